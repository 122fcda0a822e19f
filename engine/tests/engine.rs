//! Tests of the engine through its public API, on every policy.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dep_engine::{
    AccessSet, Device, DeviceClock, Engine, EngineConfig, EventKind, EventLog, OpBody, OpContext,
    OpSpec, OpState, Policy, SharedOp, Var,
};
use rand::{Rng, SeedableRng};

fn engine(policy: Policy, threads: usize) -> Engine {
    Engine::new(EngineConfig {
        policy,
        threads,
        ..EngineConfig::default()
    })
}

/// Every configuration the engine can run in, for tests that must hold on all of them.
fn all_engines() -> Vec<(String, Engine)> {
    let mut engines = vec![("naive".to_string(), engine(Policy::Naive, 1))];
    for threads in [1, 2, 4, 8] {
        engines.push((
            format!("threaded/{threads}"),
            engine(Policy::Threaded, threads),
        ));
    }
    engines.push(("per-device/2".to_string(), engine(Policy::PerDevice, 2)));
    engines
}

/// A log of (op, "start"|"end") in the order they happened.
#[derive(Clone, Default)]
struct Trace(Arc<Mutex<Vec<(&'static str, &'static str)>>>);

impl Trace {
    fn op(
        &self,
        name: &'static str,
        sleep_ms: u64,
    ) -> impl FnOnce() -> Result<(), String> + Send + 'static {
        let trace = self.clone();
        move || {
            trace.0.lock().unwrap().push((name, "start"));
            std::thread::sleep(Duration::from_millis(sleep_ms));
            trace.0.lock().unwrap().push((name, "end"));
            Ok(())
        }
    }

    fn position(&self, name: &str, what: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .position(|entry| *entry == (name, what))
            .unwrap()
    }
}

#[test]
fn seed_example_reads_overlap_and_the_write_waits_for_both() {
    let engine = engine(Policy::Threaded, 2);
    let (a, b, c, d) = (
        engine.new_var("A"),
        engine.new_var("B"),
        engine.new_var("C"),
        engine.new_var("D"),
    );
    let trace = Trace::default();
    engine.push(OpSpec::new("A = 2", trace.op("A=2", 0)).writes(&[a.clone()]));
    engine.push(
        OpSpec::new("B = A + 1", trace.op("B=A+1", 100))
            .reads(&[a.clone()])
            .writes(&[b.clone()]),
    );
    engine.push(
        OpSpec::new("C = A + 2", trace.op("C=A+2", 100))
            .reads(&[a.clone()])
            .writes(&[c.clone()]),
    );
    engine.push(
        OpSpec::new("A = C * 2", trace.op("A=C*2", 0))
            .reads(&[c.clone()])
            .writes(&[a.clone()]),
    );
    engine.push(
        OpSpec::new("D = A + 3", trace.op("D=A+3", 0))
            .reads(&[a.clone()])
            .writes(&[d.clone()]),
    );
    engine.wait_all();
    // The two reads of A overlap: each starts before the other ends.
    assert!(trace.position("B=A+1", "start") < trace.position("C=A+2", "end"));
    assert!(trace.position("C=A+2", "start") < trace.position("B=A+1", "end"));
    // The write to A waits for both reads (WAR), and D follows the write (RAW).
    assert!(trace.position("A=C*2", "start") > trace.position("B=A+1", "end"));
    assert!(trace.position("A=C*2", "start") > trace.position("C=A+2", "end"));
    assert!(trace.position("D=A+3", "start") > trace.position("A=C*2", "end"));
    assert_eq!(a.version(), 2);
}

/// MXNet's randomized engine test: random ops over shared data, compared with the naive run.
fn random_workload(engine: &Engine, seed: u64, n_ops: usize, n_vars: usize) -> Vec<f64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let data: Arc<Vec<Mutex<f64>>> =
        Arc::new((0..n_vars).map(|index| Mutex::new(index as f64)).collect());
    let vars: Vec<_> = (0..n_vars)
        .map(|index| engine.new_var(format!("v{index}")))
        .collect();
    for op_index in 0..n_ops {
        let n_reads = rng.gen_range(1..20);
        let reads: Vec<usize> = (0..n_reads).map(|_| rng.gen_range(0..n_vars)).collect();
        let write = rng.gen_range(0..n_vars);
        let sleep_us = if rng.gen_bool(0.01) {
            rng.gen_range(0..50)
        } else {
            0
        };
        let data = data.clone();
        let read_vars: Vec<_> = reads.iter().map(|&index| vars[index].clone()).collect();
        let exec_reads = reads.clone();
        engine.push(
            OpSpec::new(format!("op{op_index}"), move || {
                if sleep_us > 0 {
                    std::thread::sleep(Duration::from_micros(sleep_us));
                }
                let sum: f64 = exec_reads
                    .iter()
                    .map(|&index| *data[index].lock().unwrap())
                    .sum();
                *data[write].lock().unwrap() = sum / (exec_reads.len() + 1) as f64;
                Ok(())
            })
            .reads(&read_vars)
            .writes(&[vars[write].clone()]),
        );
    }
    engine.wait_all();
    data.iter().map(|cell| *cell.lock().unwrap()).collect()
}

#[test]
fn random_ops_give_bit_identical_results_on_every_policy() {
    for seed in [1, 2, 3] {
        let expected = random_workload(&engine(Policy::Naive, 1), seed, 10_000, 100);
        for (name, engine) in all_engines() {
            let got = random_workload(&engine, seed, 10_000, 100);
            let same = expected
                .iter()
                .zip(&got)
                .all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same, "seed {seed}: {name} differs from naive");
        }
    }
}

#[test]
fn reads_leave_the_version_and_writes_advance_it() {
    for (name, engine) in all_engines() {
        let var = engine.new_var("X");
        for _ in 0..10 {
            engine.push(OpSpec::new("read", || Ok(())).reads(&[var.clone()]));
        }
        engine.wait_var(&var, 0).unwrap();
        assert_eq!(var.version(), 0, "{name}");
        for _ in 0..10 {
            engine.push(OpSpec::new("write", || Ok(())).writes(&[var.clone()]));
        }
        engine.wait_var(&var, 0).unwrap();
        assert_eq!(var.version(), 10, "{name}");
    }
}

#[test]
fn delete_frees_only_after_pending_reads() {
    for (name, engine) in all_engines() {
        let var = engine.new_var("A");
        let reads_done = Arc::new(AtomicUsize::new(0));
        for _ in 0..4 {
            let reads_done = reads_done.clone();
            engine.push(
                OpSpec::new("read A", move || {
                    std::thread::sleep(Duration::from_millis(5));
                    reads_done.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .reads(&[var.clone()]),
            );
        }
        let freed_after = Arc::new(AtomicUsize::new(usize::MAX));
        let (observed, freed) = (reads_done.clone(), freed_after.clone());
        engine.delete_var(var, 0, move || {
            freed.store(observed.load(Ordering::SeqCst), Ordering::SeqCst)
        });
        engine.wait_all();
        assert_eq!(
            freed_after.load(Ordering::SeqCst),
            4,
            "{name}: freed before every read ended"
        );
        assert!(
            engine.snapshot().vars.is_empty(),
            "{name}: a deleted variable is still listed"
        );
    }
}

#[test]
fn an_idle_variable_deleted_under_the_naive_policy_is_freed_before_the_push_returns() {
    let engine = engine(Policy::Naive, 1);
    let var = engine.new_var("A");
    engine.push(OpSpec::new("A = 1", || Ok(())).writes(&[var.clone()]));
    let freed = Arc::new(AtomicUsize::new(0));
    let freed_by = freed.clone();
    engine.delete_var(var, 3, move || {
        freed_by.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(
        freed.load(Ordering::SeqCst),
        1,
        "freed before anything is waited for"
    );
    assert!(engine.snapshot().vars.is_empty(), "forgotten at once");
    engine.wait_all();
    assert_eq!(freed.load(Ordering::SeqCst), 1, "freed once");
}

#[test]
fn priorities_on_one_worker_run_highest_first_then_in_push_order() {
    let engine = engine(Policy::Threaded, 1);
    let order = Arc::new(Mutex::new(Vec::new()));
    let gate = engine.new_var("gate");
    // Hold the only worker so that the next ops queue up together.
    engine.push(OpSpec::new("hold", || {
        std::thread::sleep(Duration::from_millis(50));
        Ok(())
    }));
    for (name, priority) in [
        ("low", 0),
        ("high", 5),
        ("mid", 2),
        ("high2", 5),
        ("low2", 0),
    ] {
        let order = order.clone();
        engine.push(
            OpSpec::new(name, move || {
                order.lock().unwrap().push(name);
                Ok(())
            })
            .priority(priority)
            .reads(&[gate.clone()]),
        );
    }
    engine.wait_all();
    assert_eq!(
        *order.lock().unwrap(),
        ["high", "high2", "mid", "low", "low2"]
    );
}

/// Ops made ready together by one completion run by priority, then push order, too: the worker
/// that ran the completion kept the second-to-last of them for itself (E ran before D here).
#[test]
fn ops_made_ready_together_run_highest_first_then_in_push_order() {
    let engine = engine(Policy::Threaded, 1);
    let order = Arc::new(Mutex::new(Vec::new()));
    let a = engine.new_var("A");
    engine.push(
        OpSpec::new("A = work", || {
            std::thread::sleep(Duration::from_millis(50));
            Ok(())
        })
        .writes(&[a.clone()]),
    );
    for (name, priority) in [("B", 0), ("C", 0), ("D", 9), ("E", 0), ("F", 0)] {
        let order = order.clone();
        engine.push(
            OpSpec::new(name, move || {
                order.lock().unwrap().push(name);
                Ok(())
            })
            .priority(priority)
            .reads(&[a.clone()]),
        );
    }
    engine.wait_all();
    assert_eq!(*order.lock().unwrap(), ["D", "B", "C", "E", "F"]);
}

#[test]
fn errors_propagate_skip_and_clear() {
    for (name, engine) in all_engines() {
        let (a, b, c) = (
            engine.new_var("A"),
            engine.new_var("B"),
            engine.new_var("C"),
        );
        let ran = Arc::new(AtomicUsize::new(0));
        engine.push(
            OpSpec::new("A = bad", || Err("shapes [2] and [3]".to_string()))
                .writes(&[a.clone()])
                .line(1),
        );
        let counter = ran.clone();
        engine.push(
            OpSpec::new("B = A + 1", move || {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .reads(&[a.clone()])
            .writes(&[b.clone()]),
        );
        engine.push(OpSpec::new("C = panics", || panic!("boom")).writes(&[c.clone()]));
        let error = engine.wait_var(&b, 0).unwrap_err();
        assert_eq!(
            error.label.as_ref(),
            "A = bad",
            "{name}: the root cause is reported"
        );
        assert_eq!(error.line, 1);
        assert!(error.message.contains("[2] and [3]"));
        assert_eq!(ran.load(Ordering::SeqCst), 0, "{name}: a skipped op ran");
        let panic = engine.wait_var(&c, 0).unwrap_err();
        assert!(panic.message.contains("boom"), "{name}: {}", panic.message);
        let failures = engine.take_failures();
        assert_eq!(failures.len(), 2, "{name}: skipped ops are not failures");
        // A later successful write clears the error, and the workers are still alive.
        engine.push(OpSpec::new("A = 1", || Ok(())).writes(&[a.clone()]));
        engine.push(
            OpSpec::new("B = A + 1", || Ok(()))
                .reads(&[a.clone()])
                .writes(&[b.clone()]),
        );
        assert!(engine.wait_var(&b, 0).is_ok(), "{name}");
        assert!(a.error().is_none());
    }
}

/// Failures taken together come in push order whatever order they finished in, so every
/// policy reports them alike: here the first op fails last on a pool of several workers.
#[test]
fn failures_are_taken_in_push_order() {
    for (name, engine) in all_engines() {
        let (a, b) = (engine.new_var("A"), engine.new_var("B"));
        engine.push(
            OpSpec::new("A = slow and bad", || {
                std::thread::sleep(Duration::from_millis(50));
                Err("first".to_string())
            })
            .writes(&[a.clone()])
            .line(1),
        );
        engine.push(
            OpSpec::new("B = bad", || Err("second".to_string()))
                .writes(&[b.clone()])
                .line(2),
        );
        engine.wait_all();
        let messages: Vec<String> = engine
            .take_failures()
            .iter()
            .map(|failure| failure.message.clone())
            .collect();
        assert_eq!(messages, ["first", "second"], "{name}");
    }
}

/// A variable carried over from another engine with its error: readers are skipped and pass
/// that very error on, a plain write clears it; the old engine's failures are reported once.
#[test]
fn a_failed_variable_and_failures_carry_over_to_another_engine() {
    let old = engine(Policy::Naive, 1);
    let a = old.new_var("A");
    old.push(
        OpSpec::new("A = bad", || Err("shapes [2] and [3]".to_string()))
            .writes(&[a.clone()])
            .line(1),
    );
    let error = old.wait_var(&a, 0).unwrap_err();
    let failures = old.take_failures();
    for (name, engine) in all_engines() {
        engine.adopt_failures(failures.clone());
        let (a, b) = (
            engine.new_failed_var("A", error.clone()),
            engine.new_var("B"),
        );
        assert!(Arc::ptr_eq(&a.error().unwrap(), &error), "{name}");
        let ran = Arc::new(AtomicUsize::new(0));
        let counter = ran.clone();
        engine.push(
            OpSpec::new("B = A + 1", move || {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .reads(&[a.clone()])
            .writes(&[b.clone()]),
        );
        let skipped = engine.wait_var(&b, 0).unwrap_err();
        assert!(Arc::ptr_eq(&skipped, &error), "{name}: the root cause");
        assert_eq!(ran.load(Ordering::SeqCst), 0, "{name}: a skipped op ran");
        let taken = engine.take_failures();
        assert_eq!(taken.len(), 1, "{name}: {taken:?}");
        assert!(Arc::ptr_eq(&taken[0], &error), "{name}");
        engine.push(OpSpec::new("A = 1", || Ok(())).writes(&[a.clone()]));
        assert!(engine.wait_var(&a, 0).is_ok(), "{name}");
        assert!(a.error().is_none(), "{name}");
    }
}

/// A body that adds one to a counter, or fails when told.
struct AddOne(Arc<AtomicUsize>, bool);

impl OpBody for AddOne {
    fn run(&self, _: &OpContext) -> Result<(), String> {
        if self.1 {
            return Err("bad".to_string());
        }
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// An op pushed by reference (`push_shared`, a statement kept in a loop) runs, fails, skips its
/// readers and counts its writes as a pushed `OpSpec` does, queued or not.
#[test]
fn a_shared_op_pushed_by_reference_runs_as_a_pushed_spec_does() {
    for (name, engine) in all_engines() {
        let (a, b) = (engine.new_var("A"), engine.new_var("B"));
        let count = Arc::new(AtomicUsize::new(0));
        let (label, bad_label): (Arc<str>, Arc<str>) = ("A += 1".into(), "A = bad".into());
        let add: Arc<dyn OpBody> = Arc::new(AddOne(count.clone(), false));
        let bad: Arc<dyn OpBody> = Arc::new(AddOne(count.clone(), true));
        let writes_a = AccessSet::new(vec![a.clone()], vec![a.clone()]);
        let a_to_b = AccessSet::new(vec![a.clone()], vec![b.clone()]);
        let push = |label, body, accesses| {
            engine.push_shared(SharedOp {
                label,
                line: 3,
                device: Device::Cpu,
                priority: 0,
                body,
                accesses,
            })
        };
        for _ in 0..100 {
            push(&label, &add, &writes_a);
        }
        push(&label, &add, &a_to_b);
        engine.wait_all();
        assert_eq!(count.load(Ordering::SeqCst), 101, "{name}");
        assert_eq!((a.version(), b.version()), (100, 1), "{name}");
        push(&bad_label, &bad, &writes_a);
        push(&label, &add, &a_to_b);
        let error = engine.wait_var(&b, 0).unwrap_err();
        assert_eq!((error.label.as_ref(), error.line), ("A = bad", 3), "{name}");
        assert_eq!(
            count.load(Ordering::SeqCst),
            101,
            "{name}: a skipped op ran"
        );
        assert_eq!(engine.take_failures().len(), 1, "{name}");
    }
}

/// `A = A * 2` after a failed `A = ...` reads the error: it is skipped and A keeps the root
/// cause, while a plain overwrite `A = 1` clears it.
#[test]
fn an_op_that_reads_and_writes_an_errored_variable_is_skipped() {
    for (name, engine) in all_engines() {
        let a = engine.new_var("A");
        engine.push(OpSpec::new("A = bad", || Err("bad".to_string())).writes(&[a.clone()]));
        let ran = Arc::new(AtomicUsize::new(0));
        let counter = ran.clone();
        engine.push(
            OpSpec::new("A = A * 2", move || {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .reads(&[a.clone()])
            .writes(&[a.clone()]),
        );
        let error = engine.wait_var(&a, 0).unwrap_err();
        assert_eq!(error.label.as_ref(), "A = bad", "{name}");
        assert_eq!(
            ran.load(Ordering::SeqCst),
            0,
            "{name}: the update ran on an error"
        );
        engine.push(OpSpec::new("A = 1", || Ok(())).writes(&[a.clone()]));
        assert!(engine.wait_var(&a, 0).is_ok(), "{name}");
    }
}

#[test]
fn push_is_safe_from_several_threads() {
    // The naive engine runs each op on its pushing thread: four threads push at once.
    for policy in [Policy::Threaded, Policy::Naive] {
        pushes_from_several_threads(policy);
    }
}

fn pushes_from_several_threads(policy: Policy) {
    let engine = Arc::new(engine(policy, 2));
    let counter = engine.new_var("counter");
    let value = Arc::new(Mutex::new(0u64));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (engine, counter, value) = (engine.clone(), counter.clone(), value.clone());
            std::thread::spawn(move || {
                for _ in 0..1000 {
                    let value = value.clone();
                    engine.push(
                        OpSpec::new("counter += 1", move || {
                            let mut guard = value
                                .try_lock()
                                .map_err(|_| "two writers at once".to_string())?;
                            *guard += 1;
                            Ok(())
                        })
                        .writes(&[counter.clone()]),
                    );
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    engine.wait_all();
    assert_eq!(*value.lock().unwrap(), 4000);
    assert!(engine.take_failures().is_empty());
    assert_eq!(counter.version(), 4000);
}

/// The naive engine runs an op at once, outside the variables' queues, only when nothing it
/// would wait behind is queued: an op behind an unfinished asynchronous write waits for it, while
/// an op on other variables, and a read beside a read, run at once.
#[test]
fn a_naive_op_behind_a_pending_access_waits_for_it() {
    let engine = engine(Policy::Naive, 1);
    let (a, b, c) = (
        engine.new_var("a"),
        engine.new_var("b"),
        engine.new_var("c"),
    );
    let order = Arc::new(Mutex::new(Vec::new()));
    let record = |name: &'static str| {
        let order = order.clone();
        move || {
            order.lock().unwrap().push(name);
            Ok(())
        }
    };
    let (handles, pending) = std::sync::mpsc::channel();
    engine.push(
        OpSpec::new_async("write a later", move |_, handle| {
            handles.send(handle).unwrap();
        })
        .writes(&[a.clone()]),
    );
    let (readers, pending_read) = std::sync::mpsc::channel();
    engine.push(
        OpSpec::new_async("read c later", move |_, handle| {
            readers.send(handle).unwrap();
        })
        .reads(&[c.clone()]),
    );
    engine.push(
        OpSpec::new("b = a", record("b = a"))
            .reads(&[a.clone()])
            .writes(&[b.clone()]),
    );
    engine.push(OpSpec::new("peek c", record("peek c")).reads(&[c.clone()]));
    engine.push(OpSpec::new("c += 1", record("c += 1")).writes(&[c.clone()]));
    engine.push(OpSpec::new("read c", record("read c")).reads(&[c.clone()]));
    engine.push(OpSpec::new("b2", record("b2")).writes(&[engine.new_var("b2")]));
    assert_eq!(*order.lock().unwrap(), ["peek c", "b2"]);
    pending_read.recv().unwrap().complete(Ok(()));
    assert_eq!(*order.lock().unwrap(), ["peek c", "b2", "c += 1", "read c"]);
    pending.recv().unwrap().complete(Ok(()));
    engine.wait_all();
    assert_eq!(
        *order.lock().unwrap(),
        ["peek c", "b2", "c += 1", "read c", "b = a"]
    );
    assert_eq!((a.version(), b.version(), c.version()), (1, 1, 1));
}

/// Op 1 reads A and writes B, op 2 reads B and writes A, pushed at the same moment from two
/// threads, many times. Appending to one variable at a time let each op come first on one of them
/// and hold a granted read the other's write waited behind: neither ever ran (found by loom).
#[test]
fn ops_pushed_at_once_in_opposite_variable_orders_never_deadlock() {
    let (finished, finish) = std::sync::mpsc::channel();
    for policy in [Policy::Threaded, Policy::PerDevice] {
        let finished = finished.clone();
        std::thread::spawn(move || {
            let engine = Arc::new(engine(policy, 2));
            let barrier = Arc::new(std::sync::Barrier::new(2));
            let (to_other, from_main) = std::sync::mpsc::channel::<(Var, Var)>();
            let other = {
                let (engine, barrier) = (engine.clone(), barrier.clone());
                std::thread::spawn(move || {
                    for (a, b) in from_main {
                        barrier.wait();
                        engine.push(OpSpec::new("A = B", || Ok(())).reads(&[b]).writes(&[a]));
                    }
                })
            };
            for _ in 0..20_000 {
                let (a, b) = (engine.new_var("A"), engine.new_var("B"));
                to_other.send((a.clone(), b.clone())).unwrap();
                barrier.wait();
                engine.push(
                    OpSpec::new("B = A", || Ok(()))
                        .reads(&[a.clone()])
                        .writes(&[b.clone()]),
                );
                engine.wait_var(&a, 0).unwrap();
                engine.wait_var(&b, 0).unwrap();
            }
            drop(to_other);
            other.join().unwrap();
            finished.send(policy).unwrap();
        });
    }
    for _ in 0..2 {
        finish
            .recv_timeout(Duration::from_secs(120))
            .expect("two ops pushed at once never ran");
    }
}

#[test]
fn snapshot_says_what_a_waiting_op_waits_behind() {
    let engine = engine(Policy::Threaded, 2);
    let (a, b, d) = (
        engine.new_var("A"),
        engine.new_var("B"),
        engine.new_var("D"),
    );
    let release = Arc::new(Mutex::new(()));
    let hold = release.lock().unwrap();
    let gate = release.clone();
    let slow = engine.push(
        OpSpec::new("B = A + 1", move || {
            drop(gate.lock().unwrap());
            Ok(())
        })
        .reads(&[a.clone()])
        .writes(&[b.clone()])
        .line(2),
    );
    let waiting = engine.push(
        OpSpec::new("D = B * 2", || Ok(()))
            .reads(&[b.clone()])
            .writes(&[d.clone()])
            .line(4),
    );
    // Wait until the slow op runs.
    while engine
        .snapshot()
        .ops
        .iter()
        .all(|op| op.state != OpState::Running)
    {
        std::thread::yield_now();
    }
    let snapshot = engine.snapshot();
    let op = snapshot.ops.iter().find(|op| op.id == waiting).unwrap();
    assert_eq!(op.state, OpState::Waiting);
    assert_eq!(op.waits_on.len(), 1);
    assert_eq!(op.waits_on[0].var, b.id());
    assert_eq!(op.waits_on[0].behind, slow);
    assert!(op.waits_on[0].behind_writes);
    let queue = &snapshot
        .vars
        .iter()
        .find(|var| var.id == b.id())
        .unwrap()
        .queue;
    assert_eq!(queue.len(), 2);
    assert!(queue[0].write && queue[0].granted);
    assert!(!queue[1].write && !queue[1].granted);
    drop(hold);
    engine.wait_all();
    assert!(engine.snapshot().ops.is_empty());
}

#[test]
fn cancel_pending_skips_ops_that_have_not_started() {
    let engine = engine(Policy::Threaded, 1);
    let (a, b) = (engine.new_var("A"), engine.new_var("B"));
    let ran = Arc::new(AtomicUsize::new(0));
    engine.push(
        OpSpec::new("slow", || {
            std::thread::sleep(Duration::from_millis(50));
            Ok(())
        })
        .writes(&[a.clone()]),
    );
    let counter = ran.clone();
    let mark_before = engine.cancel_mark();
    engine.push(
        OpSpec::new("B = A", move || {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .reads(&[a.clone()])
        .writes(&[b.clone()]),
    );
    engine.cancel_pending();
    // The cancelled op wrote nothing: B is as it was, no error, no new version.
    assert!(engine.wait_var(&b, 0).is_ok());
    assert_eq!(b.version(), 0);
    assert!(b.error().is_none());
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    // B says its last write was cancelled, by a cancel after `mark_before`.
    assert!(b
        .cancelled_write_mark()
        .is_some_and(|mark| mark > mark_before));
    // Ops pushed after the cancel run as usual, and B's value is its last write's again.
    engine.push(OpSpec::new("B = 1", || Ok(())).writes(&[b.clone()]));
    assert!(engine.wait_var(&b, 0).is_ok());
    assert_eq!(b.version(), 1);
    assert!(b.cancelled_write_mark().is_none());
}

/// An op that holds its variables until `gate` sends (or is dropped), and a receiver that
/// hears when it starts.
fn gated(
    label: &'static str,
) -> (
    OpSpec,
    std::sync::mpsc::Sender<()>,
    std::sync::mpsc::Receiver<()>,
) {
    let (gate, gate_in) = std::sync::mpsc::channel::<()>();
    let (started_out, started) = std::sync::mpsc::channel::<()>();
    let gate_in = Mutex::new(gate_in);
    let spec = OpSpec::new(label, move || {
        started_out.send(()).unwrap();
        let _ = gate_in.lock().unwrap().recv();
        Ok(())
    });
    (spec, gate, started)
}

/// A snapshot taken while ops run never contradicts itself, though it reads its queues one
/// after the other and the ops' states after them: no queue holds a finished op, every access
/// of a ready or running op is granted, and only a waiting op waits behind anything (it used to
/// show an op running and waiting behind the op before it at once).
#[test]
fn a_snapshot_of_a_running_engine_agrees_with_itself() {
    let engine = engine(Policy::Threaded, 2);
    let chains: Vec<Var> = (0..3).map(|i| engine.new_var(format!("x{i}"))).collect();
    let spin = || {
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_micros(20) {
            std::hint::spin_loop();
        }
        Ok(())
    };
    for i in 0..3_000 {
        let (read, write) = (&chains[i % 3], &chains[(i + 1) % 3]);
        engine.push(
            OpSpec::new("x = f(y)", spin)
                .reads(std::slice::from_ref(read))
                .writes(std::slice::from_ref(write)),
        );
    }
    let mut n_snapshots = 0;
    while engine.n_unfinished() > 0 {
        let snapshot = engine.snapshot();
        n_snapshots += 1;
        let states: std::collections::HashMap<_, _> =
            snapshot.ops.iter().map(|op| (op.id, op.state)).collect();
        let state = |id| states[&id];
        for var in &snapshot.vars {
            for access in &var.queue {
                let state = state(access.op);
                assert!(!state.is_finished(), "{access:?} of a {state:?} op");
                if matches!(state, OpState::Ready | OpState::Running) {
                    assert!(access.granted, "{access:?} of a {state:?} op");
                }
            }
        }
        for op in &snapshot.ops {
            if op.state != OpState::Waiting {
                assert!(op.waits_on.is_empty(), "{op:?}");
            }
        }
    }
    assert!(n_snapshots > 5, "{n_snapshots} snapshots");
}

/// An op cancelled while it waits stays in its queues until its turn, but a snapshot shows it
/// cancelled from the cancel on, waiting for nothing; a wait pushed before the cancel is
/// bookkeeping, not cancelled.
#[test]
fn a_snapshot_shows_an_op_cancelled_while_it_waits_as_cancelled() {
    let engine = engine(Policy::Threaded, 1);
    let (a, b) = (engine.new_var("A"), engine.new_var("B"));
    let (slow, gate, started) = gated("slow");
    engine.push(slow.writes(&[a.clone()]));
    started.recv().unwrap();
    engine.push(
        OpSpec::new("B = A", || Ok(()))
            .reads(&[a.clone()])
            .writes(&[b.clone()]),
    );
    let state_of = |label: &str| {
        let snapshot = engine.snapshot();
        let op = snapshot
            .ops
            .iter()
            .find(|op| &*op.label == label)
            .unwrap_or_else(|| panic!("no {label}"));
        (op.state, op.waits_on.len())
    };
    assert_eq!(state_of("B = A"), (OpState::Waiting, 1));
    engine.cancel_pending();
    assert_eq!(state_of("B = A"), (OpState::Cancelled, 0));
    assert_eq!(state_of("slow").0, OpState::Running);
    drop(gate);
    engine.wait_all();
    assert_eq!(b.version(), 0);
}

/// Observed, a cancel says which ops it stopped when it comes, one `Cancelled` event each (the
/// ops not started, not the running one), so that a trace's replay shows them cancelled from
/// then on rather than waiting until their turn; each still finishes cancelled at its turn.
#[test]
fn an_observed_cancel_logs_each_op_it_stops_when_it_comes() {
    let log = Arc::new(EventLog::new());
    let engine = Engine::new(EngineConfig {
        policy: Policy::Threaded,
        threads: 1,
        sink: Some(log.clone()),
        ..EngineConfig::default()
    });
    let (a, b, c) = (
        engine.new_var("A"),
        engine.new_var("B"),
        engine.new_var("C"),
    );
    let (slow, gate, started) = gated("slow");
    engine.push(slow.writes(&[a.clone()]));
    started.recv().unwrap();
    engine.push(
        OpSpec::new("B = A", || Ok(()))
            .reads(&[a.clone()])
            .writes(&[b.clone()]),
    );
    engine.push(
        OpSpec::new("C = B", || Ok(()))
            .reads(&[b.clone()])
            .writes(&[c.clone()]),
    );
    engine.cancel_pending();
    // A second cancel with nothing new pushed stops nothing more: no event. A third, after
    // another push, names only the op pushed since.
    engine.cancel_pending();
    let d = engine.new_var("D");
    engine.push(
        OpSpec::new("D = C", || Ok(()))
            .reads(&[c.clone()])
            .writes(&[d.clone()]),
    );
    engine.cancel_pending();
    drop(gate);
    engine.wait_all();
    let events = log.events();
    let label_of = |op: dep_engine::OpId| {
        events.iter().find_map(|event| match &event.kind {
            EventKind::Pushed {
                op: pushed, label, ..
            } if *pushed == op => Some(label.to_string()),
            _ => None,
        })
    };
    let position =
        |wanted: &dyn Fn(&EventKind) -> bool| events.iter().position(|e| wanted(&e.kind));
    let cancelled: Vec<(usize, String)> = events
        .iter()
        .enumerate()
        .filter_map(|(index, event)| match event.kind {
            EventKind::Cancelled { op } => Some((index, label_of(op).unwrap())),
            _ => None,
        })
        .collect();
    let labels: Vec<&str> = cancelled.iter().map(|(_, label)| label.as_str()).collect();
    assert_eq!(labels, ["B = A", "C = B", "D = C"]);
    // Both come before the running op's end, and each before its own cancelled end.
    let slow_end = position(&|kind| {
        matches!(
            kind,
            EventKind::Finished {
                state: OpState::Done,
                ..
            }
        )
    })
    .unwrap();
    for (index, label) in &cancelled {
        assert!(*index < slow_end, "{label}: {events:?}");
        let end = position(&|kind| match kind {
            EventKind::Finished { op, state, .. } => {
                *state == OpState::Cancelled && label_of(*op).as_deref() == Some(label.as_str())
            }
            _ => false,
        })
        .unwrap();
        assert!(*index < end, "{label}");
    }
}

#[test]
fn a_cancelled_op_leaves_its_written_variables_as_the_last_completed_write_left_them() {
    for (name, engine) in all_engines() {
        if name == "naive" {
            continue; // its ops run at push: nothing is pending when the cancel comes
        }
        let (x, y, z) = (
            engine.new_var("x"),
            engine.new_var("y"),
            engine.new_var("z"),
        );
        let x_value = Arc::new(AtomicUsize::new(0));
        let y_value = Arc::new(AtomicUsize::new(0));
        // x = 1; y = x + 1 complete; z holds a failure.
        let to = x_value.clone();
        engine.push(
            OpSpec::new("x = 1", move || {
                to.store(1, Ordering::SeqCst);
                Ok(())
            })
            .writes(&[x.clone()]),
        );
        let (from, to) = (x_value.clone(), y_value.clone());
        engine.push(
            OpSpec::new("y = x + 1", move || {
                to.store(from.load(Ordering::SeqCst) + 1, Ordering::SeqCst);
                Ok(())
            })
            .reads(&[x.clone()])
            .writes(&[y.clone()]),
        );
        engine.push(OpSpec::new("z = bad", || Err("bad".to_string())).writes(&[z.clone()]));
        engine.wait_all();
        // A running op that holds x, then a loop's worth of ops behind it, all cancelled.
        let (hold, gate, started) = gated("hold x");
        engine.push(hold.writes(&[x.clone()]));
        started.recv().unwrap();
        for _ in 0..10 {
            let (from, to) = (x_value.clone(), y_value.clone());
            engine.push(
                OpSpec::new("y = x + 1", move || {
                    to.store(from.load(Ordering::SeqCst) + 1, Ordering::SeqCst);
                    Ok(())
                })
                .reads(&[x.clone()])
                .writes(&[y.clone()]),
            );
            let (from, to) = (y_value.clone(), x_value.clone());
            engine.push(
                OpSpec::new("x = y * 1", move || {
                    to.store(from.load(Ordering::SeqCst), Ordering::SeqCst);
                    Ok(())
                })
                .reads(&[y.clone()])
                .writes(&[x.clone()]),
            );
            engine.push(
                OpSpec::new("z = y", || Ok(()))
                    .reads(&[y.clone()])
                    .writes(&[z.clone()]),
            );
        }
        engine.cancel_pending();
        gate.send(()).unwrap();
        assert!(engine.wait_var(&x, 0).is_ok(), "{name}: x");
        assert!(engine.wait_var(&y, 0).is_ok(), "{name}: y");
        let z_error = engine.wait_var(&z, 0).expect_err(&name);
        assert_eq!(z_error.message, "bad", "{name}: z keeps its failure");
        assert!(!z_error.cancelled, "{name}");
        assert_eq!((x.version(), y.version(), z.version()), (2, 1, 1), "{name}");
        assert_eq!(x_value.load(Ordering::SeqCst), 1, "{name}");
        assert_eq!(y_value.load(Ordering::SeqCst), 2, "{name}");
        assert_eq!(
            engine.take_failures().len(),
            1,
            "{name}: only z = bad failed"
        );
        // The engine goes on: the next write and its readers run.
        engine.push(OpSpec::new("y = 5", || Ok(())).writes(&[y.clone()]));
        engine.push(
            OpSpec::new("z = y", || Ok(()))
                .reads(&[y.clone()])
                .writes(&[z.clone()]),
        );
        assert!(
            engine.wait_var(&z, 0).is_ok(),
            "{name}: a plain write clears z's error"
        );
    }
}

#[test]
fn a_cancelled_op_finishes_without_starting() {
    for policy in [
        Policy::Threaded,
        Policy::PerDevice,
        Policy::Naive,
        Policy::Sim,
    ] {
        let log = Arc::new(EventLog::new());
        let engine = Engine::new(EngineConfig {
            policy,
            threads: 2,
            sink: Some(log.clone()),
            ..EngineConfig::default()
        });
        let a = engine.new_var("A");
        let b = engine.new_var("B");
        // Under the naive policy an asynchronous op outstanding keeps its readers queued.
        let (tx, rx) = std::sync::mpsc::channel();
        engine.push(
            OpSpec::new_async("A = slow()", move |_, done| tx.send(done).unwrap())
                .writes(&[a.clone()]),
        );
        for _ in 0..3 {
            engine.push(
                OpSpec::new("B = A", || Ok(()))
                    .reads(&[a.clone()])
                    .writes(&[b.clone()]),
            );
        }
        // Started (its function ran) before the cancel.
        let done = rx.recv().unwrap();
        engine.cancel_pending();
        done.complete(Ok(()));
        engine.wait_all();
        let events = log.events();
        let started: Vec<_> = events
            .iter()
            .filter_map(|event| match event.kind {
                EventKind::Started { op, .. } => Some(op),
                _ => None,
            })
            .collect();
        let cancelled: Vec<_> = events
            .iter()
            .filter_map(|event| match event.kind {
                EventKind::Finished {
                    op,
                    state: OpState::Cancelled,
                    ..
                } => Some(op),
                _ => None,
            })
            .collect();
        assert_eq!(cancelled.len(), 3, "{policy:?}: {events:?}");
        assert_eq!(started.len(), 1, "{policy:?}: only A = slow() started");
        assert!(!cancelled.contains(&started[0]), "{policy:?}");
        assert_eq!(b.version(), 0, "{policy:?}");
    }
}

#[test]
fn events_tell_the_whole_story_in_order() {
    let log = Arc::new(EventLog::new());
    let engine = Engine::new(EngineConfig {
        policy: Policy::Naive,
        sink: Some(log.clone()),
        ..EngineConfig::default()
    });
    let a = engine.new_var("A");
    let b = engine.new_var("B");
    engine.push(OpSpec::new("A = 1", || Ok(())).writes(&[a.clone()]));
    engine.push(
        OpSpec::new("B = A", || Ok(()))
            .reads(&[a.clone()])
            .writes(&[b.clone()])
            .device(Device::Cpu),
    );
    let kinds: Vec<String> = log
        .events()
        .iter()
        .map(|event| match &event.kind {
            EventKind::VarCreated { name, .. } => format!("var {name}"),
            EventKind::VarDeleted { var } => format!("del {var}"),
            EventKind::Pushed { op, .. } => format!("push {op}"),
            EventKind::Granted { op, var } => format!("grant {op} {var}"),
            EventKind::Ready { op } => format!("ready {op}"),
            EventKind::Cancelled { op } => format!("cancel {op}"),
            EventKind::Started { op, worker } => format!("start {op} w{worker}"),
            EventKind::Finished { op, state, .. } => format!("finish {op} {}", state.name()),
            EventKind::DeviceSpan { op, lane, .. } => format!("device {op} {lane}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "var A",
            "var B",
            "push op1",
            "grant op1 v1",
            "ready op1",
            "start op1 w0",
            "finish op1 done",
            "push op2",
            "grant op2 v1",
            "grant op2 v2",
            "ready op2",
            "start op2 w0",
            "finish op2 done",
        ]
    );
    let times: Vec<u64> = log.events().iter().map(|event| event.time_ns).collect();
    assert!(
        times.windows(2).all(|pair| pair[0] <= pair[1]),
        "timestamps are monotonic"
    );
}

/// A naive program, observed, whose ops each wait for nothing: writes, reads, a device op, a
/// failure, a skip, a shared op and a wait. Returns the events with their times set to 0.
fn observed_naive_story(take_a_snapshot_first: bool) -> Vec<dep_engine::Event> {
    let log = Arc::new(EventLog::new());
    let engine = Engine::new(EngineConfig {
        policy: Policy::Naive,
        sink: Some(log.clone()),
        ..EngineConfig::default()
    });
    if take_a_snapshot_first {
        engine.snapshot();
    }
    let (a, b, c, d) = (
        engine.new_var("A"),
        engine.new_var("B"),
        engine.new_var("C"),
        engine.new_var("D"),
    );
    // An op that notes whose device clock it has, if any.
    let clocks = Arc::new(Mutex::new(Vec::new()));
    let noting_its_clock = |label: &'static str| {
        let seen = clocks.clone();
        OpSpec::new(label, move || {
            seen.lock()
                .unwrap()
                .push(DeviceClock::current().map(|c| c.op()));
            Ok(())
        })
    };
    engine.push(noting_its_clock("A = 1").writes(&[a.clone()]).line(1));
    engine.push(
        noting_its_clock("B = A on gpu")
            .reads(&[a.clone()])
            .writes(&[b.clone()])
            .device(Device::Gpu(0))
            .priority(3)
            .line(2),
    );
    engine.push(OpSpec::new("C = bad", || Err("no".to_string())).writes(&[c.clone()]));
    engine.push(
        OpSpec::new("D = C", || Ok(()))
            .reads(&[c.clone()])
            .writes(&[d.clone()]),
    );
    let body: Arc<dyn OpBody> = Arc::new(AddOne(Arc::new(AtomicUsize::new(0)), false));
    let accesses = AccessSet::new(vec![a.clone(), b.clone()], vec![a.clone()]);
    let label: Arc<str> = Arc::from("A = A + B");
    engine.push_shared(SharedOp {
        label: &label,
        line: 5,
        device: Device::Cpu,
        priority: 0,
        body: &body,
        accesses: &accesses,
    });
    assert!(engine.wait_var(&d, 0).is_err());
    // A deletion of a variable that holds an error, waiting for nothing.
    engine.delete_var(c, 6, || ());
    // The CPU op has no device clock; the GPU op has its own.
    assert_eq!(
        *clocks.lock().unwrap(),
        [None, Some(dep_engine::OpId(2))],
        "snapshot first: {take_a_snapshot_first}"
    );
    drop(engine);
    log.events()
        .into_iter()
        .map(|event| dep_engine::Event {
            time_ns: 0,
            ..event
        })
        .collect()
}

/// The naive engine runs an observed op that waits for nothing at once, without queueing it,
/// until a snapshot is taken: either way the log tells the same story, event for event.
#[test]
fn an_observed_naive_op_run_at_once_tells_the_story_a_queued_one_tells() {
    let at_once = observed_naive_story(false);
    let queued = observed_naive_story(true);
    assert!(at_once.len() > 20, "{at_once:?}");
    assert!(
        at_once
            .iter()
            .any(|event| matches!(event.kind, EventKind::VarDeleted { .. })),
        "{at_once:?}"
    );
    assert_eq!(at_once, queued);
}

/// Once a snapshot was taken, or a live view said it will take some, an observed naive op runs
/// queued, where a snapshot sees it running (run at once, under its variables' locks, a snapshot
/// would wait for it).
#[test]
fn after_a_snapshot_an_observed_naive_op_is_seen_running() {
    an_observed_naive_op_is_seen_running(|engine| assert!(engine.snapshot().ops.is_empty()));
}

#[test]
fn once_a_live_view_expects_snapshots_an_observed_naive_op_is_seen_running() {
    an_observed_naive_op_is_seen_running(|engine| engine.monitor().expect_snapshots());
}

/// Pushes a long op from another thread to an observed naive engine once `before` ran on it, and
/// checks that a snapshot taken meanwhile sees the op running.
fn an_observed_naive_op_is_seen_running(before: impl FnOnce(&Engine)) {
    let log = Arc::new(EventLog::new());
    let engine = Arc::new(Engine::new(EngineConfig {
        policy: Policy::Naive,
        sink: Some(log.clone()),
        ..EngineConfig::default()
    }));
    before(&engine);
    let x = engine.new_var("X");
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let pusher = {
        let (engine, x) = (engine.clone(), x.clone());
        std::thread::spawn(move || {
            engine.push(
                OpSpec::new("X = slow()", move || {
                    wait.recv().unwrap();
                    Ok(())
                })
                .writes(&[x]),
            );
        })
    };
    // Watched from a thread of its own: a snapshot that waited for the op would wait forever,
    // and the test fails after a while instead.
    let (saw, seen) = std::sync::mpsc::channel();
    let monitor = engine.monitor();
    std::thread::spawn(move || loop {
        let running = monitor
            .snapshot()
            .ops
            .iter()
            .any(|op| &*op.label == "X = slow()" && op.state == OpState::Running);
        if running {
            let _ = saw.send(());
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    });
    let result = seen.recv_timeout(Duration::from_secs(10));
    release.send(()).unwrap();
    assert!(result.is_ok(), "the op was never seen running");
    pusher.join().unwrap();
    assert!(engine.wait_var(&x, 0).is_ok());
}

/// Under threads, an op's grants at a release (the one that makes it ready kept with its
/// readiness as one record) still tell its story in order: its push, a grant per access, its
/// readiness after the last grant, its start, its finish.
#[test]
fn grants_at_releases_on_many_threads_tell_each_op_story_in_order() {
    let log = Arc::new(EventLog::new());
    let engine = Engine::new(EngineConfig {
        policy: Policy::Threaded,
        threads: 4,
        sink: Some(log.clone()),
        ..EngineConfig::default()
    });
    let vars: Vec<Var> = (0..4)
        .map(|index| engine.new_var(format!("v{index}")))
        .collect();
    let mut n_accesses = std::collections::HashMap::new();
    for index in 0..3_000usize {
        let reads = [vars[index % 4].clone(), vars[(index + 1) % 4].clone()];
        let writes = [vars[(index + 2) % 4].clone()];
        let op = engine.push(
            OpSpec::new("v = f(v, v)", || Ok(()))
                .reads(&reads)
                .writes(&writes),
        );
        n_accesses.insert(op, 3);
    }
    engine.wait_all();
    #[derive(Default)]
    struct Story {
        pushed: bool,
        grants: usize,
        ready: bool,
        started: bool,
        finished: bool,
    }
    let mut stories: std::collections::HashMap<dep_engine::OpId, Story> = Default::default();
    for event in log.events() {
        let (op, story) = match &event.kind {
            EventKind::Pushed { op, .. }
            | EventKind::Granted { op, .. }
            | EventKind::Ready { op }
            | EventKind::Started { op, .. }
            | EventKind::Finished { op, .. } => (*op, stories.entry(*op).or_default()),
            _ => continue,
        };
        match &event.kind {
            EventKind::Pushed { .. } => story.pushed = true,
            EventKind::Granted { .. } => {
                assert!(story.pushed && !story.ready, "{op} granted out of order");
                story.grants += 1;
            }
            EventKind::Ready { .. } => {
                assert_eq!(
                    story.grants, n_accesses[&op],
                    "{op} ready before its grants"
                );
                story.ready = true;
            }
            EventKind::Started { .. } => {
                assert!(story.ready && !story.started, "{op} started before ready");
                story.started = true;
            }
            _ => {
                assert!(
                    story.started && !story.finished,
                    "{op} finished before started"
                );
                story.finished = true;
            }
        }
    }
    assert_eq!(stories.len(), 3_000);
    assert!(stories.values().all(|story| story.finished));
}

#[test]
fn device_time_is_reported_after_the_op_from_another_thread() {
    let log = Arc::new(EventLog::new());
    let engine = Engine::new(EngineConfig {
        policy: Policy::PerDevice,
        gpu_streams: 2,
        sink: Some(log.clone()),
        ..EngineConfig::default()
    });
    let x = engine.new_var("X");
    let (send, receive) = std::sync::mpsc::channel();
    engine.push(
        OpSpec::new("X = kernel()", move || {
            send.send(DeviceClock::current()).unwrap();
            Ok(())
        })
        .writes(&[x.clone()])
        .device(Device::Gpu(0)),
    );
    engine.wait_var(&x, 0).unwrap();
    let clock = receive.recv().unwrap().expect("an observed op has a clock");
    // The "device" reports later, from a thread of its own, as a GPU timing thread does.
    let enqueued = std::time::Instant::now();
    std::thread::spawn(move || {
        clock.report("gpu0:s0", enqueued, enqueued + Duration::from_micros(250));
    })
    .join()
    .unwrap();
    let events = log.events();
    let finished_at = events
        .iter()
        .position(|event| matches!(event.kind, EventKind::Finished { .. }))
        .unwrap();
    let (at, start_ns, end_ns) = events
        .iter()
        .enumerate()
        .find_map(|(index, event)| match &event.kind {
            EventKind::DeviceSpan {
                lane,
                start_ns,
                end_ns,
                ..
            } if &**lane == "gpu0:s0" => Some((index, *start_ns, *end_ns)),
            _ => None,
        })
        .expect("a device span");
    assert!(at > finished_at);
    assert_eq!(end_ns - start_ns, 250_000);
    assert!(DeviceClock::current().is_none(), "no clock outside ops");
}

#[test]
fn unobserved_and_simulated_ops_have_no_device_clock() {
    for (policy, sink) in [
        (Policy::Threaded, None),
        (Policy::Sim, Some(Arc::new(EventLog::new()))),
    ] {
        let engine = Engine::new(EngineConfig {
            policy,
            sink: sink.map(|log| log as Arc<dyn dep_engine::EventSink>),
            ..EngineConfig::default()
        });
        let x = engine.new_var("X");
        let had_clock = Arc::new(Mutex::new(None));
        let seen = had_clock.clone();
        engine.push(
            OpSpec::new("X = 1", move || {
                *seen.lock().unwrap() = Some(DeviceClock::current().is_some());
                Ok(())
            })
            .writes(&[x.clone()]),
        );
        engine.wait_var(&x, 0).unwrap();
        assert_eq!(*had_clock.lock().unwrap(), Some(false), "{policy:?}");
    }
}

#[test]
fn per_device_policy_runs_each_device_on_its_own_workers() {
    let engine = engine(Policy::PerDevice, 2);
    let var = engine.new_var("X");
    engine.push(
        OpSpec::new("on gpu0", || Ok(()))
            .writes(&[var.clone()])
            .device(Device::Gpu(0)),
    );
    engine.push(
        OpSpec::new("copy", || Ok(()))
            .writes(&[var.clone()])
            .device(Device::Copy),
    );
    engine.push(OpSpec::new("on cpu", || Ok(())).writes(&[var.clone()]));
    engine.wait_all();
    let names = engine.worker_names();
    assert!(names.contains(&"gpu0:s0".to_string()), "{names:?}");
    assert!(names.contains(&"copy:0".to_string()), "{names:?}");
    assert!(names.contains(&"cpu:0".to_string()), "{names:?}");
    assert_eq!(var.version(), 3);
}

#[test]
fn per_device_policy_runs_copies_over_links_on_the_copy_worker() {
    let engine = engine(Policy::PerDevice, 3);
    let var = engine.new_var("X");
    let ran_on = Arc::new(Mutex::new(String::new()));
    let seen = ran_on.clone();
    engine.push(
        OpSpec::new("to(X, gpu0)", move || {
            *seen.lock().unwrap() = std::thread::current().name().unwrap_or("").to_string();
            Ok(())
        })
        .writes(&[var.clone()])
        .device(Device::link(Device::Cpu, Device::Gpu(0))),
    );
    engine.push(OpSpec::new("on cpu", || Ok(())).writes(&[var.clone()]));
    engine.wait_all();
    assert_eq!(*ran_on.lock().unwrap(), "dep-copy:0");
    let names = engine.worker_names();
    let n_named = |name: &str| names.iter().filter(|worker| *worker == name).count();
    assert_eq!(n_named("copy:0"), 1, "{names:?}");
    assert_eq!(n_named("cpu:0"), 1, "no second CPU pool: {names:?}");
}

#[test]
fn an_op_reading_and_writing_a_variable_is_a_write() {
    let log = Arc::new(EventLog::new());
    let engine = Engine::new(EngineConfig {
        policy: Policy::Naive,
        sink: Some(log.clone()),
        ..EngineConfig::default()
    });
    let a = engine.new_var("A");
    engine.push(
        OpSpec::new("A += 1", || Ok(()))
            .reads(&[a.clone()])
            .writes(&[a.clone()]),
    );
    let pushed = log.events().into_iter().find_map(|event| match event.kind {
        EventKind::Pushed { reads, writes, .. } => Some((reads, writes)),
        _ => None,
    });
    assert_eq!(pushed, Some((vec![], vec![a.id()])));
    assert_eq!(a.version(), 1);
}

/// Workers count the ops they finish in batches (see `UNCOUNTED` in `engine.rs`); the count of
/// unfinished ops must still reach zero by itself once the last op ends, with nobody in
/// `wait_all` (the REPL's and the notebook's displays poll it to say that a cell is done).
#[test]
fn the_count_of_unfinished_ops_reaches_zero_without_a_wait() {
    // The naive engine runs each op inside its push: no gate could hold it.
    for (name, engine) in all_engines()
        .into_iter()
        .filter(|(name, _)| name != "naive")
    {
        for n_ops in [1, 5, 63, 64, 65, 1000] {
            if let Err(failure) = count_reaches_zero(&engine, n_ops) {
                // Dropping an engine whose count is stuck would wait for it forever.
                std::mem::forget(engine);
                panic!("{name}, {n_ops} ops: {failure}");
            }
        }
    }
}

/// Pushes `n_ops` ops on one variable behind a gate, opens it, and waits (10 s at most) for
/// the count of unfinished ops to reach zero.
fn count_reaches_zero(engine: &Engine, n_ops: usize) -> Result<(), String> {
    let var = engine.new_var("x");
    let gate = Arc::new(Mutex::new(()));
    let closed = gate.lock().unwrap();
    let opened = gate.clone();
    engine.push(
        OpSpec::new("gate", move || {
            drop(opened.lock().unwrap());
            Ok(())
        })
        .writes(std::slice::from_ref(&var)),
    );
    for _ in 1..n_ops {
        engine.push(OpSpec::new("op", || Ok(())).writes(std::slice::from_ref(&var)));
    }
    if engine.n_unfinished() != n_ops {
        return Err(format!(
            "{} counted unfinished behind the gate",
            engine.n_unfinished()
        ));
    }
    drop(closed);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while engine.n_unfinished() > 0 {
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "{} still counted unfinished after 10 s",
                engine.n_unfinished()
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// A variable's settled writes: none while a write is pending; then an answer that a later
/// write changes whether it completes or is cancelled, and that nothing else changes.
#[test]
fn settled_writes_change_with_every_write_pushed_and_only_then() {
    let engine = engine(Policy::Threaded, 1);
    let (a, b) = (engine.new_var("A"), engine.new_var("B"));
    let settled = b.settled_writes().expect("nothing pushed");
    let (slow, gate, started) = gated("slow");
    engine.push(slow.writes(&[a.clone()]));
    started.recv().expect("the slow op starts");
    engine.push(
        OpSpec::new("B = A", || Ok(()))
            .reads(&[a.clone()])
            .writes(&[b.clone()]),
    );
    assert_eq!(b.settled_writes(), None, "a write to B is pending");
    drop(gate);
    engine.wait_var(&b, 0).expect("B written");
    let written = b.settled_writes().expect("every write done");
    assert_ne!(written, settled);
    // Reads change nothing.
    engine.push(OpSpec::new("C = B", || Ok(())).reads(&[b.clone()]));
    engine.wait_all();
    assert_eq!(b.settled_writes(), Some(written));
    // A cancelled write changes the answer too, though B keeps its version.
    let (slow, gate, started) = gated("slow again");
    engine.push(slow.writes(&[a.clone()]));
    started.recv().expect("the slow op starts");
    engine.push(
        OpSpec::new("B = A again", || Ok(()))
            .reads(&[a.clone()])
            .writes(&[b.clone()]),
    );
    engine.cancel_pending();
    drop(gate);
    engine.wait_all();
    assert_eq!(b.version(), 1);
    let cancelled = b.settled_writes().expect("every write done");
    assert_ne!(cancelled, written);
}
