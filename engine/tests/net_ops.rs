//! Network ops (asynchronous ops on `Device::Net`, whose start only posts a request): under the
//! threaded and per-device policies, the thread that makes them ready (completing an
//! asynchronous op, finishing an op on a worker, or pushing one ready at once) starts them
//! there, best first, unless an op queued in their group runs before them (then they wait in
//! the queue, as any ready op does).

mod common;

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use common::engine_with;
use dep_engine::{Device, Engine, EventKind, EventLog, OpCompletion, OpSpec, Policy, Var};

/// The policies with workers, each with one and with several CPU workers.
const POLICIES: [(&str, Policy, usize); 4] = [
    ("threaded/1", Policy::Threaded, 1),
    ("threaded/4", Policy::Threaded, 4),
    ("per-device/1", Policy::PerDevice, 1),
    ("per-device/2", Policy::PerDevice, 2),
];

/// Which op started, on which thread, in start order.
type Starts = Arc<Mutex<Vec<(String, ThreadId)>>>;

/// Pushes an asynchronous op that writes `var` on `device` and hands its handle to the test.
fn push_handed_over(engine: &Engine, var: &Var, device: Device) -> mpsc::Receiver<OpCompletion> {
    let (handles, handle) = mpsc::channel();
    engine.push(
        OpSpec::new_async(format!("{} = recv()", var.name()), move |_, done| {
            handles.send(done).unwrap()
        })
        .writes(&[var.clone()])
        .device(device),
    );
    handle
}

/// Pushes an asynchronous op named `name` on `device`, reading `reads`, that notes where it
/// started and completes at once (as a communication whose peer was there already).
fn push_noted(
    engine: &Engine,
    starts: &Starts,
    name: &str,
    device: Device,
    priority: i32,
    reads: &[Var],
) {
    let (starts, noted) = (starts.clone(), name.to_string());
    engine.push(
        OpSpec::new_async(name, move |_, done| {
            starts
                .lock()
                .unwrap()
                .push((noted, std::thread::current().id()));
            done.complete(Ok(()));
        })
        .reads(reads)
        .device(device)
        .priority(priority),
    );
}

/// Pushes a synchronous op named `name` on `device` that notes where it started: ready at once,
/// it waits in its group's queue for a worker (only network ops start where they become ready).
fn push_noted_sync(engine: &Engine, starts: &Starts, name: &str, device: Device, priority: i32) {
    let (starts, noted) = (starts.clone(), name.to_string());
    engine.push(
        OpSpec::new(name, move || {
            starts
                .lock()
                .unwrap()
                .push((noted, std::thread::current().id()));
            Ok(())
        })
        .device(device)
        .priority(priority),
    );
}

/// The names of the ops that started, in order, and whether each started on `thread`.
fn started(starts: &Starts, thread: ThreadId) -> Vec<(String, bool)> {
    starts
        .lock()
        .unwrap()
        .iter()
        .map(|(name, on)| (name.clone(), *on == thread))
        .collect()
}

#[test]
fn a_network_op_made_ready_by_a_completion_starts_on_the_completing_thread() {
    for (name, policy, threads) in POLICIES {
        let engine = engine_with(policy, threads, None);
        let a = engine.new_var("a");
        let handle = push_handed_over(&engine, &a, Device::Net);
        let starts = Starts::default();
        push_noted(&engine, &starts, "net", Device::Net, 0, &[a.clone()]);
        // Only asynchronous ops on the network: a CPU one goes to a worker.
        push_noted(&engine, &starts, "cpu", Device::Cpu, 0, &[a.clone()]);
        // This thread completes the op both wait for.
        handle.recv().unwrap().complete(Ok(()));
        engine.wait_all();
        let mut noted = started(&starts, std::thread::current().id());
        noted.sort();
        assert_eq!(
            noted,
            [("cpu".to_string(), false), ("net".to_string(), true)],
            "{name}"
        );
    }
}

#[test]
fn a_network_op_ready_when_pushed_starts_on_the_pushing_thread() {
    for (name, policy, threads) in POLICIES {
        let engine = engine_with(policy, threads, None);
        let starts = Starts::default();
        push_noted(&engine, &starts, "net", Device::Net, 0, &[]);
        // Only asynchronous ops on the network: a CPU one goes to a worker.
        push_noted(&engine, &starts, "cpu", Device::Cpu, 0, &[]);
        engine.wait_all();
        let mut noted = started(&starts, std::thread::current().id());
        noted.sort();
        assert_eq!(
            noted,
            [("cpu".to_string(), false), ("net".to_string(), true)],
            "{name}"
        );
    }
}

#[test]
fn a_network_op_made_ready_by_a_worker_starts_on_that_worker() {
    for (name, policy, threads) in POLICIES {
        let engine = engine_with(policy, threads, None);
        let a = engine.new_var("a");
        let starts = Starts::default();
        let (gate, gate_in) = mpsc::channel::<()>();
        let noted = starts.clone();
        engine.push(
            OpSpec::new("a = compute()", move || {
                let _ = gate_in.recv();
                noted
                    .lock()
                    .unwrap()
                    .push(("compute".to_string(), std::thread::current().id()));
                Ok(())
            })
            .writes(&[a.clone()]),
        );
        push_noted(&engine, &starts, "net", Device::Net, 0, &[a.clone()]);
        drop(gate);
        engine.wait_all();
        let noted = starts.lock().unwrap().clone();
        assert_eq!(noted.len(), 2, "{name}: {noted:?}");
        assert_eq!(noted[1].0, "net", "{name}");
        assert_ne!(
            noted[0].1,
            std::thread::current().id(),
            "{name}: on a worker"
        );
        assert_eq!(
            noted[1].1, noted[0].1,
            "{name}: on the worker that made it ready"
        );
    }
}

#[test]
fn network_ops_a_completion_makes_ready_start_there_highest_priority_first() {
    for (name, policy, threads) in POLICIES {
        let engine = engine_with(policy, threads, None);
        let a = engine.new_var("a");
        let handle = push_handed_over(&engine, &a, Device::Net);
        let starts = Starts::default();
        for (op, priority) in [("p1", 1), ("p5", 5), ("p3", 3), ("q3", 3)] {
            push_noted(&engine, &starts, op, Device::Net, priority, &[a.clone()]);
        }
        handle.recv().unwrap().complete(Ok(()));
        engine.wait_all();
        let here = |op: &str| (op.to_string(), true);
        assert_eq!(
            started(&starts, std::thread::current().id()),
            [here("p5"), here("p3"), here("q3"), here("p1")],
            "{name}: by priority, then push order"
        );
    }
}

/// Blocks the worker that runs network ops (the `net` lane under the per-device policy, the
/// only CPU worker under the threaded one with one thread) until the returned sender is dropped.
fn block_the_network_worker(engine: &Engine, policy: Policy) -> mpsc::Sender<()> {
    let (gate, gate_in) = mpsc::channel::<()>();
    let (entered, entered_in) = mpsc::channel();
    let device = match policy {
        Policy::PerDevice => Device::Net,
        _ => Device::Cpu,
    };
    engine.push(
        OpSpec::new("block", move || {
            entered.send(()).unwrap();
            let _ = gate_in.recv();
            Ok(())
        })
        .device(device),
    );
    entered_in.recv().unwrap();
    gate
}

#[test]
fn a_network_op_waits_in_its_queue_behind_a_queued_op_that_runs_before_it() {
    for (name, policy) in [
        ("threaded/1", Policy::Threaded),
        ("per-device/1", Policy::PerDevice),
    ] {
        for later_priority in [0, 10] {
            let engine = engine_with(policy, 1, None);
            let a = engine.new_var("a");
            // The op whose completion makes the later one ready, started before the block.
            let handle = push_handed_over(&engine, &a, Device::Net).recv().unwrap();
            let gate = block_the_network_worker(&engine, policy);
            let starts = Starts::default();
            // Ready at once, queued behind the blocked worker.
            let device = match policy {
                Policy::PerDevice => Device::Net,
                _ => Device::Cpu,
            };
            push_noted_sync(&engine, &starts, "queued", device, 9);
            push_noted(&engine, &starts, "later", Device::Net, later_priority, &[a]);
            handle.complete(Ok(()));
            let before_the_gate = started(&starts, std::thread::current().id());
            drop(gate);
            engine.wait_all();
            let all = started(&starts, std::thread::current().id());
            if later_priority > 9 {
                // It runs before the queued one: started here at once.
                assert_eq!(before_the_gate, [("later".to_string(), true)], "{name}");
                assert_eq!(all[1], ("queued".to_string(), false), "{name}");
            } else {
                // Behind the queued one: in the queue, run by the worker after it.
                assert!(before_the_gate.is_empty(), "{name}: {before_the_gate:?}");
                assert_eq!(
                    all,
                    [("queued".to_string(), false), ("later".to_string(), false)],
                    "{name}"
                );
            }
        }
    }
}

#[test]
fn a_network_op_started_by_a_completion_is_drawn_on_the_net_lane_of_the_per_device_policy() {
    for (policy, lane) in [(Policy::PerDevice, "net:0"), (Policy::Threaded, "main")] {
        let log = Arc::new(EventLog::new());
        let engine = engine_with(policy, 2, Some(log.clone()));
        let a = engine.new_var("a");
        let handle = push_handed_over(&engine, &a, Device::Net);
        let starts = Starts::default();
        push_noted(&engine, &starts, "net", Device::Net, 0, &[a.clone()]);
        handle.recv().unwrap().complete(Ok(()));
        engine.wait_all();
        assert_eq!(
            started(&starts, std::thread::current().id()),
            [("net".to_string(), true)]
        );
        let events = log.events();
        let op = events
            .iter()
            .find_map(|event| match &event.kind {
                EventKind::Pushed { op, label, .. } if &**label == "net" => Some(*op),
                _ => None,
            })
            .expect("pushed");
        let worker = events
            .iter()
            .find_map(|event| match &event.kind {
                EventKind::Started {
                    op: started,
                    worker,
                } if *started == op => Some(*worker),
                _ => None,
            })
            .expect("started");
        assert_eq!(engine.worker_names()[worker as usize], lane, "{policy:?}");
    }
}
