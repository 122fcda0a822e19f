//! The simulated policy grants each access when its variable's earlier conflicting accesses have
//! ended, as a variable's queue does on the real engines, not when the op's last access is:
//! a view stepping through a simulated run shows an access waiting only while something is
//! ahead of it.

use std::collections::HashMap;
use std::sync::Arc;

use dep_engine::sim::{Cost, SimDevice};
use dep_engine::{
    Device, Engine, EngineConfig, Event, EventKind, EventLog, OpBody, OpContext, OpId, OpSpec,
    Policy, Var, VarId,
};

/// An op that takes `.0` nanoseconds of virtual time on any device.
struct Work(u64);

impl OpBody for Work {
    fn run(&self, ctx: &OpContext) -> Result<(), String> {
        ctx.report_cost(Cost {
            fixed_ns: self.0,
            ..Cost::default()
        });
        Ok(())
    }
}

const MS: u64 = 1_000_000;

/// A simulated engine of `threads` CPU lanes and no per-op latency (so times are the costs'
/// sums), logging into `log`.
fn sim_engine(threads: usize, log: &Arc<EventLog>) -> Engine {
    let engine = Engine::new(EngineConfig {
        policy: Policy::Sim,
        threads,
        gpu_streams: 1,
        sink: Some(log.clone()),
    });
    for target in ["cpu", "gpu"] {
        let model = if target == "cpu" {
            SimDevice::CPU
        } else {
            SimDevice::GPU
        };
        engine.set_sim_device(
            target,
            SimDevice {
                latency_ns: 0,
                ..model
            },
        );
    }
    engine
}

/// Pushes `label`, taking `ns`, reading `reads` and writing `writes`, on the CPU.
fn push(engine: &Engine, label: &str, ns: u64, reads: &[&Var], writes: &[&Var]) -> OpId {
    let owned = |vars: &[&Var]| vars.iter().map(|var| (*var).clone()).collect::<Vec<_>>();
    engine.push(
        OpSpec::shared(label, Arc::new(Work(ns)))
            .reads(&owned(reads))
            .writes(&owned(writes)),
    )
}

/// Each grant's virtual time, by op and variable.
fn grant_times(events: &[Event]) -> HashMap<(OpId, VarId), u64> {
    events
        .iter()
        .filter_map(|event| match event.kind {
            EventKind::Granted { op, var } => Some(((op, var), event.time_ns)),
            _ => None,
        })
        .collect()
}

/// The virtual time of `op`'s event that `pick` chooses.
fn time_of(events: &[Event], pick: impl Fn(&EventKind) -> bool) -> u64 {
    events
        .iter()
        .find(|event| pick(&event.kind))
        .expect("the event")
        .time_ns
}

/// `A = work(20)`, `C = work(10)`, `D = A + C`: D's write is granted at its push and its read
/// of C when C's writer ends (10 ms), though D waits for A (20 ms) to start.
#[test]
fn a_read_is_granted_when_its_writer_ends_though_the_op_waits_for_another() {
    let log = Arc::new(EventLog::new());
    let engine = sim_engine(2, &log);
    let (a, c, d) = (
        engine.new_var("A"),
        engine.new_var("C"),
        engine.new_var("D"),
    );
    push(&engine, "A = work(20)", 20 * MS, &[], &[&a]);
    push(&engine, "C = work(10)", 10 * MS, &[], &[&c]);
    let sum = push(&engine, "D = A + C", 0, &[&a, &c], &[&d]);
    engine.wait_all();
    let events = log.events();
    let grants = grant_times(&events);
    assert_eq!(grants[&(sum, d.id())], 0, "D's write, at its push");
    assert_eq!(
        grants[&(sum, c.id())],
        10 * MS,
        "C's read, when C's writer ends"
    );
    assert_eq!(
        grants[&(sum, a.id())],
        20 * MS,
        "A's read, when A's writer ends"
    );
    let ready = time_of(&events, |kind| *kind == EventKind::Ready { op: sum });
    let started = time_of(
        &events,
        |kind| matches!(kind, EventKind::Started { op, .. } if *op == sum),
    );
    assert_eq!(
        (ready, started),
        (20 * MS, 20 * MS),
        "the op starts as before"
    );
}

/// `A = work(20)`, `B = work(30, A)`, `C = work(30)`, `A = C * 2`: the last op's read of C is
/// granted when C's writer ends (30 ms), its write of A when B's read of A ends (50 ms).
#[test]
fn a_read_is_granted_when_its_writer_ends_though_the_op_waits_to_write_after_a_read() {
    let log = Arc::new(EventLog::new());
    let engine = sim_engine(2, &log);
    let (a, b, c) = (
        engine.new_var("A"),
        engine.new_var("B"),
        engine.new_var("C"),
    );
    push(&engine, "A = work(20)", 20 * MS, &[], &[&a]);
    push(&engine, "B = work(30, A)", 30 * MS, &[&a], &[&b]);
    push(&engine, "C = work(30)", 30 * MS, &[], &[&c]);
    let double = push(&engine, "A = C * 2", 0, &[&c], &[&a]);
    engine.wait_all();
    let events = log.events();
    let grants = grant_times(&events);
    assert_eq!(
        grants[&(double, c.id())],
        30 * MS,
        "C's read, when C's writer ends"
    );
    assert_eq!(
        grants[&(double, a.id())],
        50 * MS,
        "A's write, when B's read ends"
    );
    let started = time_of(
        &events,
        |kind| matches!(kind, EventKind::Started { op, .. } if *op == double),
    );
    assert_eq!(started, 50 * MS);
}

/// One access of an op, in push order on its variable.
struct Access {
    op: OpId,
    write: bool,
}

/// Checks `events` against a variable queue's rule: an access is granted at the later of its
/// push and the ends of the accesses ahead of it that conflict with it (for a read, the last
/// write; for a write, the last write and the reads since), after those ends and before its
/// op's readiness in the log, and an op is ready when its last access is granted.
fn check_grants(events: &[Event]) {
    let mut queues: HashMap<VarId, Vec<Access>> = HashMap::new();
    let mut pushed: HashMap<OpId, (u64, usize)> = HashMap::new();
    let mut finished: HashMap<OpId, (u64, usize)> = HashMap::new();
    let mut granted: HashMap<(OpId, VarId), (u64, usize)> = HashMap::new();
    let mut ready: HashMap<OpId, (u64, usize)> = HashMap::new();
    let mut accesses: HashMap<OpId, Vec<VarId>> = HashMap::new();
    for (position, event) in events.iter().enumerate() {
        let at = (event.time_ns, position);
        match &event.kind {
            EventKind::Pushed {
                op, reads, writes, ..
            } => {
                pushed.insert(*op, at);
                for (var, write) in reads
                    .iter()
                    .map(|var| (var, false))
                    .chain(writes.iter().map(|var| (var, true)))
                {
                    queues
                        .entry(*var)
                        .or_default()
                        .push(Access { op: *op, write });
                    accesses.entry(*op).or_default().push(*var);
                }
            }
            EventKind::Granted { op, var } => {
                assert!(
                    granted.insert((*op, *var), at).is_none(),
                    "{op} granted {var} twice"
                );
            }
            EventKind::Ready { op } => {
                ready.insert(*op, at);
            }
            EventKind::Finished { op, .. } => {
                finished.insert(*op, at);
            }
            _ => {}
        }
    }
    for (var, queue) in &queues {
        for (index, access) in queue.iter().enumerate() {
            let earlier = &queue[..index];
            let last_write = earlier.iter().rposition(|other| other.write);
            let ahead: Vec<&Access> = if access.write {
                earlier[last_write.unwrap_or(0)..].iter().collect()
            } else {
                last_write.map(|at| &earlier[at]).into_iter().collect()
            };
            let (time, position) = granted[&(access.op, *var)];
            let expected = ahead
                .iter()
                .map(|other| finished[&other.op].0)
                .chain([pushed[&access.op].0])
                .max()
                .unwrap();
            assert_eq!(time, expected, "{} granted {var}", access.op);
            for other in ahead {
                assert!(
                    finished[&other.op].1 < position,
                    "{} granted {var} before {} ended",
                    access.op,
                    other.op
                );
            }
            assert!(pushed[&access.op].1 < position && position < ready[&access.op].1);
        }
    }
    for (op, vars) in &accesses {
        let last_grant = vars.iter().map(|var| granted[&(*op, *var)].0).max();
        assert_eq!(
            last_grant,
            Some(ready[op].0),
            "{op} is ready at its last grant"
        );
    }
}

/// A reproducible stream of numbers (a linear congruential generator).
struct Numbers(u64);

impl Numbers {
    /// A number below `n`.
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// Ops of random lengths over a few variables, on the CPU's 2 lanes and a GPU's, with waits for
/// them all or for one variable now and then: returns the events.
fn random_run(seed: u64) -> Vec<Event> {
    let log = Arc::new(EventLog::new());
    let engine = sim_engine(2, &log);
    let vars: Vec<Var> = (0..5).map(|i| engine.new_var(format!("v{i}"))).collect();
    let mut numbers = Numbers(seed);
    for i in 0..200 {
        let mut reads = Vec::new();
        for _ in 0..numbers.below(3) {
            reads.push(vars[numbers.below(5) as usize].clone());
        }
        let mut writes = Vec::new();
        if numbers.below(4) > 0 {
            writes.push(vars[numbers.below(5) as usize].clone());
        }
        let device = if numbers.below(3) == 0 {
            Device::Gpu(0)
        } else {
            Device::Cpu
        };
        let ns = (1 + numbers.below(5)) * MS;
        engine.push(
            OpSpec::shared(format!("op{i}"), Arc::new(Work(ns)))
                .reads(&reads)
                .writes(&writes)
                .device(device),
        );
        // The clock advances: the ops pushed next are pushed later than the ones before. A
        // wait for one variable ends at the instant it returns, before the next push.
        match numbers.below(25) {
            0 => engine.wait_all(),
            1 | 2 => engine
                .wait_var(&vars[numbers.below(5) as usize], 0)
                .expect("no op fails"),
            _ => {}
        }
    }
    engine.wait_all();
    log.events()
}

#[test]
fn every_access_is_granted_when_the_accesses_ahead_of_it_end_and_the_same_every_run() {
    for seed in 1..=8 {
        let events = random_run(seed);
        check_grants(&events);
        assert!(events == random_run(seed), "seed {seed}: two runs differ");
    }
}
