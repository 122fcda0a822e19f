//! Cheap ops ([`OpBody::is_cheap`]) under the threaded policies: one that every access would
//! grant at once runs on the pushing thread, before its push returns, as the naive policy runs
//! every op; any other op, or any op once a live view takes snapshots, goes to a worker.

mod common;

use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use common::engine_with;
use dep_engine::{
    AccessSet, BatchOp, Device, Engine, EventKind, EventLog, OpBatch, OpBody, OpContext, OpSpec,
    Policy, SharedOp, Var, CALLER_WORKER,
};

/// A body that notes the thread it ran on and says it is cheap or not.
struct Noted {
    cheap: bool,
    ran_on: Mutex<Vec<ThreadId>>,
}

impl Noted {
    fn new(cheap: bool) -> Arc<Noted> {
        Arc::new(Noted {
            cheap,
            ran_on: Mutex::new(Vec::new()),
        })
    }

    fn ran_on(&self) -> Vec<ThreadId> {
        self.ran_on.lock().unwrap().clone()
    }
}

impl OpBody for Noted {
    fn run(&self, _ctx: &OpContext) -> Result<(), String> {
        self.ran_on
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        Ok(())
    }

    fn is_cheap(&self) -> bool {
        self.cheap
    }
}

/// Pushes `body` by reference on `device`, reading `reads` and writing `writes`.
fn push(engine: &Engine, body: &Arc<Noted>, device: Device, reads: &[&Var], writes: &[&Var]) {
    let body: Arc<dyn OpBody> = body.clone();
    let accesses = AccessSet::new(
        reads.iter().map(|var| (*var).clone()).collect(),
        writes.iter().map(|var| (*var).clone()).collect(),
    );
    engine.push_shared(SharedOp {
        label: &Arc::from("op"),
        line: 1,
        device,
        priority: 0,
        body: &body,
        accesses: &accesses,
    });
}

/// One op of a batch, running `body` on the CPU, reading `reads` and writing `writes`.
fn batch_op(body: &Arc<Noted>, reads: &[Var], writes: &[Var]) -> BatchOp {
    BatchOp {
        label: Arc::from("op"),
        line: 1,
        device: Device::Cpu,
        priority: 0,
        body: body.clone(),
        accesses: AccessSet::new(reads.to_vec(), writes.to_vec()),
    }
}

/// The workers that ops started on, in the log's order.
fn started_workers(log: &EventLog) -> Vec<u32> {
    log.events()
        .into_iter()
        .filter_map(|event| match event.kind {
            EventKind::Started { worker, .. } => Some(worker),
            _ => None,
        })
        .collect()
}

#[test]
fn a_cheap_ready_cpu_op_runs_on_the_pushing_thread() {
    let here = std::thread::current().id();
    for policy in [Policy::Threaded, Policy::PerDevice] {
        let engine = engine_with(policy, 2, None);
        let (a, b) = (engine.new_var("a"), engine.new_var("b"));
        let cheap = Noted::new(true);
        push(&engine, &cheap, Device::Cpu, &[&a], &[&b]);
        // Run before its push returned, with nothing waited for.
        assert_eq!(cheap.ran_on(), vec![here], "{policy:?}");
        let costly = Noted::new(false);
        push(&engine, &costly, Device::Cpu, &[&a], &[&b]);
        engine.wait_all();
        let ran_on = costly.ran_on();
        assert_eq!(ran_on.len(), 1, "{policy:?}");
        assert_ne!(ran_on[0], here, "{policy:?}: a costly op runs on a worker");
        assert_eq!(b.version(), 2, "{policy:?}");
    }
}

#[test]
fn a_cheap_op_off_the_cpu_or_behind_an_unfinished_op_runs_on_a_worker() {
    let here = std::thread::current().id();
    let engine = engine_with(Policy::Threaded, 2, None);
    let (a, b) = (engine.new_var("a"), engine.new_var("b"));
    let on_gpu = Noted::new(true);
    push(&engine, &on_gpu, Device::Gpu(0), &[], &[&a]);
    engine.wait_all();
    assert_ne!(on_gpu.ran_on(), vec![here], "placed on a GPU");

    let (started, start) = std::sync::mpsc::channel();
    let (release, wait) = std::sync::mpsc::channel::<()>();
    engine.push(
        OpSpec::new("a = slow()", move || {
            started.send(()).unwrap();
            wait.recv().unwrap();
            Ok(())
        })
        .writes(std::slice::from_ref(&a)),
    );
    start.recv().unwrap();
    let behind = Noted::new(true);
    push(&engine, &behind, Device::Cpu, &[&a], &[&b]);
    assert!(behind.ran_on().is_empty(), "it waits for a's write");
    release.send(()).unwrap();
    engine.wait_all();
    let ran_on = behind.ran_on();
    assert_eq!(ran_on.len(), 1);
    assert_ne!(
        ran_on[0], here,
        "granted at a worker's release, it runs there"
    );
}

/// Observed, a cheap op run where it is pushed starts on the pushing thread's worker (`main`),
/// until a live view expects snapshots: then it takes the queues, where snapshots see it.
#[test]
fn an_observed_cheap_op_starts_on_main_until_snapshots_are_expected() {
    for expect_snapshots in [false, true] {
        let log = Arc::new(EventLog::new());
        let engine = engine_with(Policy::Threaded, 2, Some(log.clone()));
        if expect_snapshots {
            engine.monitor().expect_snapshots();
        }
        let (a, b) = (engine.new_var("a"), engine.new_var("b"));
        push(&engine, &Noted::new(true), Device::Cpu, &[&a], &[&b]);
        engine.wait_all();
        let workers = started_workers(&log);
        assert_eq!(workers.len(), 1, "{workers:?}");
        assert_eq!(
            workers[0] == CALLER_WORKER,
            !expect_snapshots,
            "expecting snapshots: {expect_snapshots}, started on {}",
            engine.worker_names()[workers[0] as usize]
        );
    }
}

/// A batch runs where it is pushed when every op of it is cheap, on the workers otherwise; in
/// order either way.
#[test]
fn a_batch_of_cheap_ops_runs_on_the_pushing_thread() {
    let here = std::thread::current().id();
    for all_cheap in [true, false] {
        let engine = engine_with(Policy::Threaded, 2, None);
        let (a, b, c) = (
            engine.new_var("a"),
            engine.new_var("b"),
            engine.new_var("c"),
        );
        let bodies = [Noted::new(true), Noted::new(all_cheap)];
        let batch = OpBatch::new(vec![
            batch_op(
                &bodies[0],
                std::slice::from_ref(&a),
                std::slice::from_ref(&b),
            ),
            batch_op(
                &bodies[1],
                std::slice::from_ref(&b),
                std::slice::from_ref(&c),
            ),
        ]);
        engine.push_batch(&batch);
        engine.wait_all();
        for body in &bodies {
            let ran_on = body.ran_on();
            assert_eq!(ran_on.len(), 1, "all cheap: {all_cheap}");
            assert_eq!(ran_on[0] == here, all_cheap, "all cheap: {all_cheap}");
        }
        assert_eq!((b.version(), c.version()), (1, 1));
    }
}

/// A cheap op of more accesses than a single op's fast path holds (a bulk of several
/// statements, replayed as one op of a batch) still runs where it is pushed, observed or not,
/// and its push says every access was granted at once; a costly one goes to a worker, its
/// accesses appended with the batch's.
#[test]
fn a_cheap_batch_op_of_many_variables_runs_on_the_pushing_thread() {
    let here = std::thread::current().id();
    let costly = Noted::new(false);
    {
        let engine = engine_with(Policy::Threaded, 2, None);
        let vars: Vec<Var> = (0..9).map(|i| engine.new_var(format!("v{i}"))).collect();
        let (reads, writes) = vars.split_at(3);
        let batch = OpBatch::new(vec![batch_op(&costly, reads, writes)]);
        engine.push_batch(&batch);
        engine.push_batch(&batch);
        engine.wait_all();
        let ran_on = costly.ran_on();
        assert_eq!(ran_on.len(), 2);
        assert!(ran_on.iter().all(|thread| *thread != here), "{ran_on:?}");
        assert!(writes.iter().all(|var| var.version() == 2));
    }
    for observed in [false, true] {
        let log = Arc::new(EventLog::new());
        let engine = engine_with(Policy::Threaded, 2, observed.then(|| log.clone()));
        let vars: Vec<Var> = (0..9).map(|i| engine.new_var(format!("v{i}"))).collect();
        let (reads, writes) = vars.split_at(3);
        let bulk = Noted::new(true);
        let batch = OpBatch::new(vec![batch_op(&bulk, reads, writes)]);
        engine.push_batch(&batch);
        assert_eq!(bulk.ran_on(), vec![here], "observed: {observed}");
        engine.wait_all();
        assert!(writes.iter().all(|var| var.version() == 1));
        if !observed {
            continue;
        }
        let events = log.events();
        let count = |matches: fn(&EventKind) -> bool| {
            events.iter().filter(|event| matches(&event.kind)).count()
        };
        assert_eq!(count(|kind| matches!(kind, EventKind::Granted { .. })), 9);
        assert_eq!(started_workers(&log), vec![CALLER_WORKER]);
    }
}

#[test]
fn the_deletion_of_an_idle_variable_runs_on_the_pushing_thread() {
    let here = std::thread::current().id();
    for policy in [Policy::Threaded, Policy::PerDevice] {
        let engine = engine_with(policy, 2, None);
        let var = engine.new_var("a");
        let freed_on = Arc::new(Mutex::new(Vec::new()));
        let noted = freed_on.clone();
        engine.delete_var_labelled(var, &Arc::from("del a"), 1, move || {
            noted.lock().unwrap().push(std::thread::current().id())
        });
        // Freed before its push returned, with nothing waited for, and forgotten.
        assert_eq!(*freed_on.lock().unwrap(), [here], "{policy:?}");
        assert!(engine.snapshot().vars.is_empty(), "{policy:?}");
        // Behind a write that has not ended, the deletion runs where the write ends.
        let var = engine.new_var("b");
        let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
        engine.push(
            OpSpec::new("b = slow", move || {
                gate_rx.recv().ok();
                Ok(())
            })
            .writes(&[var.clone()]),
        );
        let freed_on = Arc::new(Mutex::new(Vec::new()));
        let noted = freed_on.clone();
        engine.delete_var_labelled(var, &Arc::from("del b"), 2, move || {
            noted.lock().unwrap().push(std::thread::current().id())
        });
        assert!(freed_on.lock().unwrap().is_empty(), "{policy:?}");
        gate_tx.send(()).unwrap();
        engine.wait_all();
        assert_eq!(freed_on.lock().unwrap().len(), 1, "{policy:?}");
        assert_ne!(freed_on.lock().unwrap()[0], here, "{policy:?}");
        assert!(engine.snapshot().vars.is_empty(), "{policy:?}");
    }
}
