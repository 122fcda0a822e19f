//! Model checks of the engine's real code under every interleaving loom explores: `Engine::push`,
//! the workers of the threaded policy (`Group::pop_blocking`, `execute`, `release`, `route`),
//! `wait_var`, `wait_all`, asynchronous completion from another thread, the network ops the
//! thread that makes them ready starts itself (a completing thread, a worker, the pushing thread:
//! `start_posts`, `Group::push_unless_first`), a batch's push (`Engine::push_batch`) racing
//! another thread's push, and cheap ops run where they are pushed (`Shared::runs_here`), all
//! compiled with loom's mutexes, condition variables, atomics and
//! threads (see `sync.rs`).
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR=target/loom cargo test -p dep-engine --release --lib loom`.
//!
//! What is checked, besides loom's own checks (deadlock, a thread left blocked):
//! - the variable queue's invariant after every change (`VarQueue::check`): granted accesses are
//!   a prefix, one write or reads only;
//! - values: each variable is a model atomic that write ops increment and read ops load, both
//!   `Relaxed`, so a load sees the writes the engine made happen before it and no other: two
//!   writes at once lose an increment, a read run before the write it follows (or after the
//!   write it precedes) sees the wrong count;
//! - every op runs exactly once, and `wait_var` returns only after the writes it waits for.
//! - observed, an op's events come in order, a grant at a release racing the op's push too.
//!
//! The models are small: one worker, at most two pushing threads (or a pusher and a completing
//! thread), four ops. The whole set runs in about 30 s on two cores with
//! `LOOM_MAX_PREEMPTIONS=3`.

use crate::sync::{Arc, AtomicUsize, Ordering};
use crate::{
    AccessSet, BatchOp, Device, Engine, EngineConfig, OpBatch, OpBody, OpCompletion, OpContext,
    OpSpec, Policy, Var,
};

/// An engine of `policy` with one worker.
fn engine(policy: Policy) -> Engine {
    Engine::new(EngineConfig {
        policy,
        threads: 1,
        gpu_streams: 1,
        sink: None,
    })
}

/// A variable's value, and what each op saw of it.
struct Value {
    count: AtomicUsize,
    /// Per op: the count it saw, plus one (0: it has not run); a second run is an error.
    seen: Vec<AtomicUsize>,
}

impl Value {
    fn new(n_ops: usize) -> Arc<Value> {
        Arc::new(Value {
            count: AtomicUsize::new(0),
            seen: (0..n_ops).map(|_| AtomicUsize::new(0)).collect(),
        })
    }

    /// Op `op`'s body: a write increments the count, a read loads it.
    fn access(&self, op: usize, write: bool) -> Result<(), String> {
        let count = self.count.load(Ordering::Relaxed);
        if write {
            self.count.store(count + 1, Ordering::Relaxed);
        }
        match self.seen[op].swap(count + 1, Ordering::Relaxed) {
            0 => Ok(()),
            _ => Err(format!("op {op} ran twice")),
        }
    }

    /// The count op `op` saw (panics if it did not run).
    fn seen(&self, op: usize) -> usize {
        match self.seen[op].load(Ordering::Relaxed) {
            0 => panic!("op {op} did not run"),
            seen => seen - 1,
        }
    }
}

/// Pushes op `op` reading or writing `var`, whose value is `value`.
fn push(engine: &Engine, var: &Var, value: &Arc<Value>, op: usize, write: bool) {
    let value = value.clone();
    let spec = OpSpec::new(format!("op{op}"), move || value.access(op, write));
    engine.push(if write {
        spec.writes(&[var.clone()])
    } else {
        spec.reads(&[var.clone()])
    });
}

#[test]
fn loom_two_threads_push_reads_and_writes_to_one_variable() {
    loom::model(|| {
        let engine = Arc::new(engine(Policy::Threaded));
        let a = engine.new_var("a");
        let value = Value::new(4);
        // The main thread pushes W0 then R1; another thread pushes R2 then W3, at the same time.
        let other = {
            let (engine, a, value) = (engine.clone(), a.clone(), value.clone());
            loom::thread::spawn(move || {
                push(&engine, &a, &value, 2, false);
                push(&engine, &a, &value, 3, true);
            })
        };
        push(&engine, &a, &value, 0, true);
        push(&engine, &a, &value, 1, false);
        other.join().unwrap();
        engine.wait_all();
        assert!(engine.take_failures().is_empty(), "an op ran twice");
        let (w0, r1, r2, w3) = (value.seen(0), value.seen(1), value.seen(2), value.seen(3));
        assert_eq!((w0.min(w3), w0.max(w3)), (0, 1), "the two writes ran alone");
        assert!(r1 > w0, "R1 ran after W0, pushed before it");
        assert!(r2 <= w3, "R2 ran before W3, pushed after it");
        assert_eq!(value.count.load(Ordering::Relaxed), 2);
    });
}

/// A batch op's body: a closure.
struct Body<F>(F);

impl<F: Fn() -> Result<(), String> + Send + Sync + 'static> OpBody for Body<F> {
    fn run(&self, _ctx: &OpContext) -> Result<(), String> {
        (self.0)()
    }
}

#[test]
fn loom_a_batch_is_pushed_whole_while_another_thread_pushes() {
    loom::model(|| {
        let engine = Arc::new(engine(Policy::Threaded));
        let (a, b) = (engine.new_var("a"), engine.new_var("b"));
        let (value_a, value_b) = (Value::new(3), Value::new(3));
        // The batch: op 0 writes a, op 1 reads a and writes b. Another thread pushes op 2, a
        // write of a, at the same time: it lands before the batch or after it, never between.
        let other = {
            let (engine, a, value_a) = (engine.clone(), a.clone(), value_a.clone());
            loom::thread::spawn(move || push(&engine, &a, &value_a, 2, true))
        };
        let write_a = value_a.clone();
        let (read_a, write_b) = (value_a.clone(), value_b.clone());
        let batch = OpBatch::new(vec![
            BatchOp {
                label: "op0".into(),
                line: 1,
                device: Device::Cpu,
                priority: 0,
                body: Arc::new(Body(move || write_a.access(0, true))),
                accesses: AccessSet::new(Vec::new(), vec![a.clone()]),
            },
            BatchOp {
                label: "op1".into(),
                line: 2,
                device: Device::Cpu,
                priority: 0,
                body: Arc::new(Body(move || {
                    read_a.access(1, false)?;
                    write_b.access(1, true)
                })),
                accesses: AccessSet::new(vec![a.clone()], vec![b.clone()]),
            },
        ]);
        engine.push_batch(&batch);
        other.join().unwrap();
        engine.wait_all();
        assert!(engine.take_failures().is_empty(), "an op ran twice");
        let (w0, r1, w2) = (value_a.seen(0), value_a.seen(1), value_a.seen(2));
        assert_eq!(r1, w0 + 1, "op 1 read op 0's write, no other write between");
        assert_eq!((w0.min(w2), w0.max(w2)), (0, 1), "the two writes ran alone");
        assert_eq!(value_b.seen(1), 0);
    });
}

/// A body that says it is cheap: the threaded policy runs it on the pushing thread when every
/// access of it is granted at its push (see `Shared::runs_here`).
struct Cheap<F>(F);

impl<F: Fn() -> Result<(), String> + Send + Sync + 'static> OpBody for Cheap<F> {
    fn run(&self, _ctx: &OpContext) -> Result<(), String> {
        (self.0)()
    }

    fn is_cheap(&self) -> bool {
        true
    }
}

/// Pushes op `op` as a cheap op reading or writing `var`, whose value is `value`.
fn push_cheap(engine: &Engine, var: &Var, value: &Arc<Value>, op: usize, write: bool) {
    let value = value.clone();
    let body: Arc<dyn OpBody> = Arc::new(Cheap(move || value.access(op, write)));
    let accesses = if write {
        AccessSet::new(Vec::new(), vec![var.clone()])
    } else {
        AccessSet::new(vec![var.clone()], Vec::new())
    };
    engine.push_shared(crate::SharedOp {
        label: &Arc::from(format!("op{op}")),
        line: 1,
        device: Device::Cpu,
        priority: 0,
        body: &body,
        accesses: &accesses,
    });
}

#[test]
fn loom_cheap_ops_run_where_they_are_pushed_in_order_with_the_workers() {
    loom::model(|| {
        let engine = Arc::new(engine(Policy::Threaded));
        let a = engine.new_var("a");
        let value = Value::new(4);
        // The main thread pushes W0 (to the worker), then R1 and W2, cheap: each runs where it
        // is pushed if W0 has ended, else behind it on the worker. Another thread pushes R3,
        // cheap, at the same time.
        let other = {
            let (engine, a, value) = (engine.clone(), a.clone(), value.clone());
            loom::thread::spawn(move || push_cheap(&engine, &a, &value, 3, false))
        };
        push(&engine, &a, &value, 0, true);
        push_cheap(&engine, &a, &value, 1, false);
        push_cheap(&engine, &a, &value, 2, true);
        other.join().unwrap();
        engine.wait_all();
        assert!(engine.take_failures().is_empty(), "an op ran twice");
        let (w0, r1, w2, r3) = (value.seen(0), value.seen(1), value.seen(2), value.seen(3));
        assert_eq!((w0, r1, w2), (0, 1, 1), "W0, then R1, then W2");
        assert!(r3 <= 2);
        assert_eq!(value.count.load(Ordering::Relaxed), 2);
    });
}

#[test]
fn loom_two_threads_push_to_two_variables_in_opposite_orders() {
    loom::model(|| {
        let engine = Arc::new(engine(Policy::Threaded));
        let (a, b) = (engine.new_var("a"), engine.new_var("b"));
        let (value_a, value_b) = (Value::new(2), Value::new(2));
        // Op 0 reads a and writes b; op 1 reads b and writes a: pushed from two threads, each
        // waits behind the other on one variable, whichever is appended first.
        let values = (value_a.clone(), value_b.clone());
        let push_both = move |engine: &Engine, op: usize, from: &Var, to: &Var| {
            let (value_a, value_b) = (values.0.clone(), values.1.clone());
            let writes_b = op == 0;
            engine.push(
                OpSpec::new(format!("op{op}"), move || {
                    value_a.access(op, !writes_b)?;
                    value_b.access(op, writes_b)
                })
                .reads(&[from.clone()])
                .writes(&[to.clone()]),
            );
        };
        let other = {
            let (engine, a, b, push_both) =
                (engine.clone(), a.clone(), b.clone(), push_both.clone());
            loom::thread::spawn(move || push_both(&engine, 1, &b, &a))
        };
        push_both(&engine, 0, &a, &b);
        other.join().unwrap();
        engine.wait_var(&a, 0).unwrap();
        engine.wait_var(&b, 0).unwrap();
        assert!(engine.take_failures().is_empty(), "an op ran twice");
        // Whichever ran first, the other saw its write: not both saw the count before it.
        if value_a.seen(0) == 0 {
            assert_eq!((value_b.seen(0), value_b.seen(1)), (0, 1), "op 0 then op 1");
        } else {
            assert_eq!((value_a.seen(1), value_b.seen(1)), (0, 0), "op 1 then op 0");
            assert_eq!((value_a.seen(0), value_b.seen(0)), (1, 0), "op 1 then op 0");
        }
    });
}

#[test]
fn loom_wait_var_races_the_completion_of_the_writes_it_waits_for() {
    loom::model(|| {
        let engine = engine(Policy::Threaded);
        let a = engine.new_var("a");
        let value = Value::new(2);
        push(&engine, &a, &value, 0, true);
        push(&engine, &a, &value, 1, true);
        // The wait is granted at push if the worker has finished both writes, else by the
        // second write's completion on the worker: either way it returns after both.
        engine.wait_var(&a, 0).unwrap();
        assert_eq!(value.count.load(Ordering::Relaxed), 2);
        assert_eq!(
            (value.seen(0), value.seen(1)),
            (0, 1),
            "writes in push order"
        );
    });
}

/// An async op writing `a`, completed (or dropped, when `drop_handle`) by another thread, then a
/// synchronous op reading `a` and writing `b`, and a wait on `b`, under `policy`.
fn async_completed_elsewhere(policy: Policy, drop_handle: bool) {
    loom::model(move || {
        let engine = engine(policy);
        let (a, b) = (engine.new_var("a"), engine.new_var("b"));
        let (value_a, value_b) = (Value::new(2), Value::new(2));
        let (sender, receiver) = loom::sync::mpsc::channel::<OpCompletion>();
        let completer = {
            let value_a = value_a.clone();
            loom::thread::spawn(move || {
                let done = receiver.recv().unwrap();
                if drop_handle {
                    drop(done);
                } else {
                    let result = value_a.access(0, true);
                    done.complete(result);
                }
            })
        };
        engine.push(
            OpSpec::new_async("async write a", move |_, done| sender.send(done).unwrap())
                .writes(&[a.clone()]),
        );
        {
            let (value_a, value_b) = (value_a.clone(), value_b.clone());
            engine.push(
                OpSpec::new("b = a", move || {
                    value_a.access(1, false)?;
                    value_b.access(1, true)
                })
                .reads(&[a.clone()])
                .writes(&[b.clone()]),
            );
        }
        let waited = engine.wait_var(&b, 0);
        if drop_handle {
            let error = waited.expect_err("a dropped handle fails the op");
            assert!(error.message.contains("dropped"), "{error}");
            assert_eq!(
                value_a.seen[1].load(Ordering::Relaxed),
                0,
                "the reader was skipped"
            );
        } else {
            waited.unwrap();
            assert_eq!(value_a.seen(1), 1, "the reader saw the async write");
            assert_eq!(value_b.count.load(Ordering::Relaxed), 1);
        }
        completer.join().unwrap();
    });
}

#[test]
fn loom_async_op_completed_from_another_thread_threaded() {
    async_completed_elsewhere(Policy::Threaded, false);
}

#[test]
fn loom_async_op_completed_from_another_thread_naive() {
    async_completed_elsewhere(Policy::Naive, false);
}

/// Under the simulated policy the ops pushed after the async one wait for its completion to
/// enter the simulator (`sim_feed.rs`), and the wait for it before the clock advances.
#[test]
fn loom_async_op_completed_from_another_thread_sim() {
    async_completed_elsewhere(Policy::Sim, false);
}

#[test]
fn loom_async_handle_dropped_on_another_thread_fails_the_op() {
    async_completed_elsewhere(Policy::Threaded, true);
}

/// A network op (asynchronous, on `Device::Net`) that reads what an async op writes, and a write
/// after it: the completing thread starts the network op itself, or queues it when an op queued
/// before it runs first, while the worker and the pushing thread go on. Each runs once, the
/// read between the two writes.
fn network_op_started_by_the_completer(policy: Policy) {
    loom::model(move || {
        let engine = engine(policy);
        let a = engine.new_var("a");
        let value = Value::new(3);
        let (sender, receiver) = loom::sync::mpsc::channel::<OpCompletion>();
        let completer = {
            let value = value.clone();
            loom::thread::spawn(move || {
                let done = receiver.recv().unwrap();
                let result = value.access(0, true);
                done.complete(result);
            })
        };
        engine.push(
            OpSpec::new_async("a = recv()", move |_, done| sender.send(done).unwrap())
                .writes(&[a.clone()])
                .device(Device::Net),
        );
        {
            let value = value.clone();
            engine.push(
                OpSpec::new_async("send(a)", move |_, done| {
                    done.complete(value.access(1, false))
                })
                .reads(&[a.clone()])
                .device(Device::Net),
            );
        }
        push(&engine, &a, &value, 2, true);
        engine.wait_all();
        assert!(engine.take_failures().is_empty(), "an op ran twice");
        assert_eq!(
            (value.seen(0), value.seen(1), value.seen(2)),
            (0, 1, 1),
            "the send read the received value, before the write after it"
        );
        completer.join().unwrap();
    });
}

#[test]
fn loom_a_network_op_starts_on_the_thread_that_completes_its_input_threaded() {
    network_op_started_by_the_completer(Policy::Threaded);
}

#[test]
fn loom_a_network_op_starts_on_the_thread_that_completes_its_input_per_device() {
    network_op_started_by_the_completer(Policy::PerDevice);
}

/// An observed op whose read is granted at a release, on the worker, while another thread is
/// still pushing it: its events still come in order (its push, a grant per access, its
/// readiness after the last grant, its start, its finish), whether the last grant is the push's
/// or the release's (which then sends the grant and the readiness as one record).
#[test]
fn loom_an_observed_op_granted_at_a_release_tells_its_story_in_order() {
    use crate::{EventKind, EventLog, OpId};
    loom::model(|| {
        let log = Arc::new(EventLog::new());
        let engine = Arc::new(Engine::new(EngineConfig {
            policy: Policy::Threaded,
            threads: 1,
            gpu_streams: 1,
            sink: Some(log.clone()),
        }));
        let (a, b) = (engine.new_var("a"), engine.new_var("b"));
        let value = Value::new(2);
        push(&engine, &a, &value, 0, true);
        let other = {
            let (engine, a, b) = (engine.clone(), a.clone(), b.clone());
            loom::thread::spawn(move || {
                engine.push(OpSpec::new("op1", || Ok(())).reads(&[a]).writes(&[b]));
            })
        };
        other.join().unwrap();
        engine.wait_all();
        // Per op: (grants, ready, started, finished), in log order.
        let mut stories = [(0, false, false, false); 2];
        for event in log.events() {
            let story = |op: &OpId| (op.0 as usize).checked_sub(1);
            match &event.kind {
                EventKind::Granted { op, .. } => {
                    let story = &mut stories[story(op).unwrap()];
                    assert!(!story.1, "{op} granted after it was ready");
                    story.0 += 1;
                }
                EventKind::Ready { op } => stories[story(op).unwrap()].1 = true,
                EventKind::Started { op, .. } => {
                    let story = &mut stories[story(op).unwrap()];
                    assert!(story.1, "{op} started before it was ready");
                    story.2 = true;
                }
                EventKind::Finished { op, .. } => stories[story(op).unwrap()].3 = true,
                _ => {}
            }
        }
        assert_eq!(stories, [(1, true, true, true), (2, true, true, true)]);
    });
}

/// A network op that a worker's op makes ready (that worker starts it), completed by another
/// thread, and a write after it: each runs once, the read between the two writes.
fn network_op_started_by_a_worker(policy: Policy) {
    loom::model(move || {
        let engine = engine(policy);
        let a = engine.new_var("a");
        let value = Value::new(3);
        let (sender, receiver) = loom::sync::mpsc::channel::<OpCompletion>();
        let completer = {
            let value = value.clone();
            loom::thread::spawn(move || {
                let done = receiver.recv().unwrap();
                let result = value.access(1, false);
                done.complete(result);
            })
        };
        push(&engine, &a, &value, 0, true);
        engine.push(
            OpSpec::new_async("send(a)", move |_, done| sender.send(done).unwrap())
                .reads(&[a.clone()])
                .device(Device::Net),
        );
        push(&engine, &a, &value, 2, true);
        engine.wait_all();
        assert!(engine.take_failures().is_empty(), "an op ran twice");
        assert_eq!(
            (value.seen(0), value.seen(1), value.seen(2)),
            (0, 1, 1),
            "the send read the first write's value, before the write after it"
        );
        completer.join().unwrap();
    });
}

#[test]
fn loom_a_network_op_starts_on_the_worker_that_makes_it_ready_threaded() {
    network_op_started_by_a_worker(Policy::Threaded);
}

#[test]
fn loom_a_network_op_starts_on_the_worker_that_makes_it_ready_per_device() {
    network_op_started_by_a_worker(Policy::PerDevice);
}
