//! Asynchronous ops (`OpSpec::new_async`): completed later, from any thread, through their
//! `OpCompletion`, on every policy.

mod common;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use common::engine_with;
use dep_engine::sim::Cost;
use dep_engine::{
    Engine, Event, EventKind, EventLog, OpBody, OpCompletion, OpContext, OpSpec, OpState, Policy,
};

/// An op that only takes time: it reports its cost in its context.
struct Costs(Cost);

impl OpBody for Costs {
    fn run(&self, ctx: &OpContext) -> Result<(), String> {
        ctx.report_cost(self.0);
        Ok(())
    }
}

/// Every policy, the threaded one with one worker and with several.
fn all_engines() -> Vec<(&'static str, Engine)> {
    vec![
        ("naive", engine_with(Policy::Naive, 1, None)),
        ("threaded/1", engine_with(Policy::Threaded, 1, None)),
        ("threaded/4", engine_with(Policy::Threaded, 4, None)),
        ("per-device/2", engine_with(Policy::PerDevice, 2, None)),
        ("sim", engine_with(Policy::Sim, 2, None)),
    ]
}

/// A handle for the completer, the cell to set first, its value, and the op's result.
type Job = (OpCompletion, Arc<AtomicI64>, i64, Result<(), String>);

/// A thread that completes the handles it is sent, each once the test says go, with the result
/// the test sends along; the value cell is set first, as the work an async op would do.
struct Completer {
    handles: mpsc::Sender<Job>,
    go: mpsc::Sender<()>,
    thread: JoinHandle<()>,
}

impl Completer {
    fn start() -> Completer {
        let (handles, handles_in) = mpsc::channel::<Job>();
        let (go, go_in) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            for (done, cell, value, result) in handles_in {
                go_in.recv().unwrap();
                cell.store(value, Ordering::SeqCst);
                done.complete(result);
            }
        });
        Completer {
            handles,
            go,
            thread,
        }
    }

    /// An async op's start function: hands its handle to the completer.
    fn op(
        &self,
        cell: &Arc<AtomicI64>,
        value: i64,
        result: Result<(), String>,
    ) -> impl FnOnce(&OpContext, OpCompletion) + Send + 'static {
        let (handles, cell) = (self.handles.clone(), cell.clone());
        move |_, done| handles.send((done, cell, value, result)).unwrap()
    }

    fn go(&self) {
        self.go.send(()).unwrap();
    }

    fn finish(self) {
        drop(self.handles);
        self.thread.join().unwrap();
    }
}

#[test]
fn an_async_op_completed_from_another_thread_holds_its_variables_until_then() {
    for (name, engine) in all_engines() {
        let completer = Completer::start();
        let (a, b) = (engine.new_var("a"), engine.new_var("b"));
        let (cell_a, cell_b) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)));
        engine.push(
            OpSpec::new_async("a = recv()", completer.op(&cell_a, 21, Ok(()))).writes(&[a.clone()]),
        );
        let (from, to) = (cell_a.clone(), cell_b.clone());
        engine.push(
            OpSpec::new("b = a * 2", move || {
                to.store(from.load(Ordering::SeqCst) * 2, Ordering::SeqCst);
                Ok(())
            })
            .reads(&[a.clone()])
            .writes(&[b.clone()]),
        );
        // Both pushes returned (under naive too) while the async op is still outstanding.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            cell_b.load(Ordering::SeqCst),
            0,
            "{name}: the reader ran early"
        );
        assert_eq!(a.version(), 0, "{name}");
        assert_eq!(engine.n_unfinished(), 2, "{name}");
        completer.go();
        engine.wait_var(&b, 0).unwrap();
        assert_eq!(cell_b.load(Ordering::SeqCst), 42, "{name}");
        assert_eq!((a.version(), b.version()), (1, 1), "{name}");
        completer.finish();
    }
}

#[test]
fn wait_var_blocks_until_the_async_write_completes() {
    for (name, engine) in all_engines() {
        let completer = Completer::start();
        let a = engine.new_var("a");
        let cell = Arc::new(AtomicI64::new(0));
        engine.push(
            OpSpec::new_async("a = recv()", completer.op(&cell, 7, Ok(()))).writes(&[a.clone()]),
        );
        let go = completer.go.clone();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            go.send(()).unwrap();
        });
        engine.wait_var(&a, 0).unwrap();
        assert_eq!(
            cell.load(Ordering::SeqCst),
            7,
            "{name}: wait returned before completion"
        );
        releaser.join().unwrap();
        completer.finish();
    }
}

#[test]
fn chained_async_ops_each_start_after_the_one_they_read_completes() {
    for (name, engine) in all_engines() {
        let vars: Vec<_> = (0..4)
            .map(|index| engine.new_var(format!("x{index}")))
            .collect();
        let cells: Vec<_> = (0..4).map(|_| Arc::new(AtomicI64::new(0))).collect();
        let mut threads = Vec::new();
        let (spawned, spawned_in) = mpsc::channel();
        for step in 0..4 {
            let (from, to) = (cells[step.max(1) - 1].clone(), cells[step].clone());
            let spawned = spawned.clone();
            let op = OpSpec::new_async(
                format!("x{step} = x{} + 1", step.max(1) - 1),
                move |_, done| {
                    // The work goes on on another thread, after the function returned.
                    let thread = std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(5));
                        let before = if step == 0 {
                            0
                        } else {
                            from.load(Ordering::SeqCst)
                        };
                        to.store(before + 1, Ordering::SeqCst);
                        done.complete(Ok(()));
                    });
                    spawned.send(thread).unwrap();
                },
            );
            let op = if step == 0 {
                op
            } else {
                op.reads(&[vars[step - 1].clone()])
            };
            engine.push(op.writes(&[vars[step].clone()]));
        }
        engine.wait_var(&vars[3], 0).unwrap();
        let values: Vec<i64> = cells
            .iter()
            .map(|cell| cell.load(Ordering::SeqCst))
            .collect();
        assert_eq!(values, [1, 2, 3, 4], "{name}");
        drop(spawned);
        threads.extend(spawned_in);
        for thread in threads {
            thread.join().unwrap();
        }
    }
}

#[test]
fn an_async_error_is_stored_on_what_it_writes_and_skips_its_readers() {
    for (name, engine) in all_engines() {
        let completer = Completer::start();
        let (a, b) = (engine.new_var("a"), engine.new_var("b"));
        let cell = Arc::new(AtomicI64::new(0));
        engine.push(
            OpSpec::new_async(
                "a = recv()",
                completer.op(&cell, 1, Err("link down".to_string())),
            )
            .line(3)
            .writes(&[a.clone()]),
        );
        let ran = Arc::new(AtomicBool::new(false));
        let reader_ran = ran.clone();
        engine.push(
            OpSpec::new("b = a + 1", move || {
                reader_ran.store(true, Ordering::SeqCst);
                Ok(())
            })
            .reads(&[a.clone()])
            .writes(&[b.clone()]),
        );
        completer.go();
        let error = engine.wait_var(&b, 0).expect_err(name);
        assert_eq!(
            (&*error.label, error.line, error.message.as_str()),
            ("a = recv()", 3, "link down"),
            "{name}"
        );
        assert!(!ran.load(Ordering::SeqCst), "{name}: the reader ran");
        assert_eq!(engine.wait_var(&a, 0).expect_err(name).message, "link down");
        let failures = engine.take_failures();
        assert_eq!(failures.len(), 1, "{name}: {failures:?}");
        // A plain write clears it, as after a synchronous failure.
        engine.push(OpSpec::new("a = 0", || Ok(())).writes(&[a.clone()]));
        engine.wait_var(&a, 0).unwrap();
        completer.finish();
    }
}

#[test]
fn a_dropped_handle_fails_the_op_instead_of_hanging() {
    for (name, engine) in all_engines() {
        let (a, b) = (engine.new_var("a"), engine.new_var("b"));
        // Dropped by its start function, and dropped by another thread.
        engine.push(OpSpec::new_async("a = lost()", |_, done| drop(done)).writes(&[a.clone()]));
        engine.push(
            OpSpec::new_async("b = lost()", |_, done| {
                std::thread::spawn(move || drop(done));
            })
            .writes(&[b.clone()]),
        );
        for var in [&a, &b] {
            let error = engine.wait_var(var, 0).expect_err(name);
            assert!(
                error.message.contains("dropped without completing"),
                "{name}: {error}"
            );
        }
        assert_eq!(engine.take_failures().len(), 2, "{name}");
    }
}

#[test]
fn an_async_op_completed_inside_its_function_is_like_a_synchronous_op() {
    for (name, engine) in all_engines() {
        let (a, b) = (engine.new_var("a"), engine.new_var("b"));
        let cell = Arc::new(AtomicI64::new(0));
        let writer = cell.clone();
        engine.push(
            OpSpec::new_async("a = 5", move |_, done| {
                writer.store(5, Ordering::SeqCst);
                done.complete(Ok(()));
            })
            .writes(&[a.clone()]),
        );
        engine.push(
            OpSpec::new_async("b = fail()", |_, done| done.complete(Err("no".into())))
                .writes(&[b.clone()]),
        );
        engine.wait_var(&a, 0).unwrap();
        assert_eq!(cell.load(Ordering::SeqCst), 5, "{name}");
        assert_eq!(engine.wait_var(&b, 0).expect_err(name).message, "no");
    }
}

#[test]
fn a_panicking_start_function_fails_the_op_with_its_panic() {
    for (name, engine) in all_engines() {
        let a = engine.new_var("a");
        engine.push(
            OpSpec::new_async("a = boom()", |_, done| {
                let _keep = done;
                panic!("boom");
            })
            .writes(&[a.clone()]),
        );
        let error = engine.wait_var(&a, 0).expect_err(name);
        assert_eq!(error.message, "panicked: boom", "{name}");
        // The engine (and its workers) go on.
        engine.push(OpSpec::new("a = 1", || Ok(())).writes(&[a.clone()]));
        engine.wait_var(&a, 0).unwrap();
    }
}

#[test]
fn an_async_op_not_started_when_cancelled_never_runs_its_function() {
    for (name, engine) in all_engines() {
        if name == "naive" || name == "sim" {
            continue; // ops run at push: nothing is pending when the cancel comes
        }
        let (a, b) = (engine.new_var("a"), engine.new_var("b"));
        let (gate, gate_in) = mpsc::channel::<()>();
        let gate_in = Mutex::new(gate_in);
        engine.push(
            OpSpec::new("a = slow()", move || {
                gate_in.lock().unwrap().recv().unwrap();
                Ok(())
            })
            .writes(&[a.clone()]),
        );
        let started = Arc::new(AtomicBool::new(false));
        let flag = started.clone();
        engine.push(
            OpSpec::new_async("b = send(a)", move |_, done| {
                flag.store(true, Ordering::SeqCst);
                done.complete(Ok(()));
            })
            .reads(&[a.clone()])
            .writes(&[b.clone()]),
        );
        engine.cancel_pending();
        gate.send(()).unwrap();
        // Cancelled, it wrote nothing: b is as it was.
        assert!(engine.wait_var(&b, 0).is_ok(), "{name}");
        assert_eq!(b.version(), 0, "{name}");
        assert!(!started.load(Ordering::SeqCst), "{name}");
    }
}

#[test]
fn dropping_the_engine_waits_for_an_outstanding_async_op() {
    for (name, engine) in all_engines() {
        let a = engine.new_var("a");
        let completed = Arc::new(AtomicBool::new(false));
        let flag = completed.clone();
        engine.push(
            OpSpec::new_async("a = later()", move |_, done| {
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(20));
                    flag.store(true, Ordering::SeqCst);
                    done.complete(Ok(()));
                });
            })
            .writes(&[a]),
        );
        drop(engine);
        assert!(completed.load(Ordering::SeqCst), "{name}");
    }
}

/// The events of one op, as (kind, time).
fn op_events(events: &[Event], label: &str) -> Vec<(&'static str, u64)> {
    let id = events
        .iter()
        .find_map(|event| match &event.kind {
            EventKind::Pushed {
                op, label: pushed, ..
            } if &**pushed == label => Some(*op),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no op `{label}`"));
    events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::Pushed { op, .. } if *op == id => Some(("pushed", event.time_ns)),
            EventKind::Started { op, .. } if *op == id => Some(("started", event.time_ns)),
            EventKind::Finished { op, .. } if *op == id => Some(("finished", event.time_ns)),
            _ => None,
        })
        .collect()
}

#[test]
fn an_async_op_runs_from_its_start_to_its_completion_in_events() {
    let log = Arc::new(EventLog::new());
    let engine = engine_with(Policy::Threaded, 2, Some(log.clone()));
    let a = engine.new_var("a");
    let monitor = engine.monitor();
    let (completed_at, completed_at_in) = mpsc::channel();
    engine.push(
        OpSpec::new_async("a = recv()", move |_, done| {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                completed_at.send(monitor.now_ns()).unwrap();
                done.complete(Err("late".into()));
            });
        })
        .writes(&[a.clone()]),
    );
    assert!(engine.wait_var(&a, 0).is_err());
    let completed_at = completed_at_in.recv().unwrap();
    let events = log.events();
    let spans = op_events(&events, "a = recv()");
    let kinds: Vec<_> = spans.iter().map(|(kind, _)| *kind).collect();
    assert_eq!(kinds, ["pushed", "started", "finished"]);
    assert!(
        spans[1].1 < completed_at && spans[2].1 >= completed_at,
        "{spans:?}"
    );
    assert!(events.iter().any(|event| matches!(
        &event.kind,
        EventKind::Finished { state: OpState::Failed, message: Some(message), .. } if message == "late"
    )));
}

/// A simulated run: an async op costing 5 ms of fixed time, completed from another thread after
/// `delay`, an independent op pushed after it, and a reader of what the async op writes.
fn simulated_run(delay: Duration) -> Vec<Event> {
    let log = Arc::new(EventLog::new());
    let engine = engine_with(Policy::Sim, 2, Some(log.clone()));
    let (a, b, c) = (
        engine.new_var("a"),
        engine.new_var("b"),
        engine.new_var("c"),
    );
    engine.push(
        OpSpec::new_async("a = recv()", move |ctx, done| {
            ctx.report_cost(Cost {
                fixed_ns: 5_000_000,
                ..Cost::default()
            });
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                done.complete(Ok(()));
            });
        })
        .writes(&[a.clone()]),
    );
    engine.push(
        OpSpec::shared(
            "b = 1",
            Arc::new(Costs(Cost {
                fixed_ns: 1_000_000,
                ..Cost::default()
            })),
        )
        .writes(&[b.clone()]),
    );
    engine.push(
        OpSpec::new("c = a", || Ok(()))
            .reads(&[a.clone()])
            .writes(&[c.clone()]),
    );
    engine.wait_var(&c, 0).unwrap();
    engine.wait_all();
    log.events()
}

#[test]
fn a_simulated_async_op_ends_when_its_cost_says_whenever_it_completes() {
    let events = simulated_run(Duration::from_millis(30));
    // The CPU model's 1 µs per op, plus the fixed time each op reported.
    assert_eq!(
        op_events(&events, "a = recv()"),
        [("pushed", 0), ("started", 0), ("finished", 5_001_000)]
    );
    assert_eq!(
        op_events(&events, "b = 1"),
        [("pushed", 0), ("started", 0), ("finished", 1_001_000)]
    );
    assert_eq!(
        op_events(&events, "c = a"),
        [
            ("pushed", 0),
            ("started", 5_001_000),
            ("finished", 5_002_000)
        ]
    );
    // Ops enter the simulation in push order, whenever the async one completes: the wait too,
    // as it does on the real engines' logs.
    let pushed: Vec<&str> = events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::Pushed { label, .. } => Some(&**label),
            _ => None,
        })
        .collect();
    assert_eq!(pushed, ["a = recv()", "b = 1", "c = a", "wait c"]);
    assert_eq!(
        op_events(&events, "wait c"),
        [
            ("pushed", 0),
            ("started", 5_002_000),
            ("finished", 5_002_000)
        ]
    );
    assert_eq!(
        simulated_run(Duration::ZERO),
        events,
        "the same events, completed at once"
    );
}

/// Two engines in one process number their ops alike (ranks on threads run the same script): an
/// op of one that completes the other's op of the same number, inside its start function, must
/// complete that op, not be taken for completing itself.
#[test]
fn an_op_completing_another_engines_op_of_the_same_number_completes_that_op() {
    for policy in [Policy::Naive, Policy::Threaded, Policy::Sim] {
        let a = engine_with(policy, 2, None);
        let b = engine_with(policy, 2, None);
        let (handles, handle) = mpsc::channel::<OpCompletion>();
        let b_var = b.new_var("b");
        b.push(
            OpSpec::new_async("b0", move |_, done| handles.send(done).unwrap()).writes(&[b_var]),
        );
        let a_var = a.new_var("a");
        a.push(
            OpSpec::new_async("a0", move |_, done| {
                handle.recv().unwrap().complete(Ok(()));
                done.complete(Err("a's own ending".to_string()));
            })
            .writes(&[a_var.clone()]),
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let give_up = || std::time::Instant::now() > deadline;
        let (b_done, a_done) = (b.wait_all_or(&give_up), a.wait_all_or(&give_up));
        if !(b_done && a_done) {
            // Dropping an engine waits for its unfinished ops: leak them to fail, not hang.
            std::mem::forget((a, b));
            panic!("{policy}: b's op completed: {b_done}, a's: {a_done}");
        }
        let error = a.wait_var(&a_var, 0).unwrap_err();
        assert_eq!(error.message, "a's own ending", "{policy}");
    }
}
