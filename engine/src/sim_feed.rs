//! The simulated policy's intake: ops enter the [`Simulator`] in push order, whatever order they
//! finish in.
//!
//! Under the simulated policy an op runs at push, so ops usually finish in push order and each
//! goes into the simulator as it finishes. An asynchronous op finishes when its handle is
//! completed, in real time, maybe on another thread: the ops pushed after it (and those waiting
//! for it, which run when it completes) are held here until it has, then handed over in push
//! order. The simulator sees the same sequence whenever completions arrive, so a script gives the
//! same virtual timeline on every run.
//!
//! An op needs two things to enter: its outcome (at completion) and the cost it reported (when
//! its function returned); for a synchronous op both come at once. A wait advances the virtual
//! clock only once every op pushed before it has entered: it waits, in real time, for the
//! asynchronous ones to complete.

use std::collections::BTreeMap;

use crate::event::{EventKind, EventSink};
use crate::op::GIVE_UP_SLICE;
use crate::sim::{Cost, Simulator};
use crate::sync::{lock, wait_timeout, Arc, Condvar, Mutex};
use crate::{Device, OpId, OpState, VarId};

/// What the simulator needs of a finished op besides its cost.
pub(crate) struct SimOutcome {
    /// The op's `Pushed` event, sent at virtual time when it enters.
    pub(crate) pushed: EventKind,
    pub(crate) device: Device,
    pub(crate) priority: i32,
    pub(crate) reads: Vec<VarId>,
    pub(crate) writes: Vec<VarId>,
    pub(crate) state: OpState,
    pub(crate) message: Option<String>,
    /// Engine bookkeeping (a wait, a deletion), which takes no lane and no time.
    pub(crate) bookkeeping: Option<Bookkeeping>,
}

/// What an op of engine bookkeeping does, as the simulator shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bookkeeping {
    /// A wait for a variable: the host, which waits, runs it when the variable is ready.
    Wait,
    /// A deletion: the variable is gone once it ends.
    Delete,
}

/// An op on its way into the simulator.
#[derive(Default)]
struct Entry {
    cost: Option<Cost>,
    outcome: Option<SimOutcome>,
}

impl Entry {
    fn is_complete(&self) -> bool {
        self.cost.is_some() && self.outcome.is_some()
    }
}

struct FeedState {
    sim: Simulator,
    /// The first op (by push number) that has not entered.
    next: u64,
    /// Ops from `next` on that have finished, or reported their cost, out of order.
    pending: BTreeMap<u64, Entry>,
    /// Threads waiting for `next` to move.
    n_waiting: usize,
}

/// The simulator behind its lock, with the ops waiting to enter it.
pub(crate) struct SimFeed {
    state: Mutex<FeedState>,
    entered: Condvar,
    /// The engine's worker names, to which each lane the simulator opens adds its own.
    worker_names: Arc<Mutex<Vec<String>>>,
}

/// How many ops the simulated host may have pushed and not seen end before the virtual clock
/// runs (until half are left), as the interpreter of a real engine waits when it leads the
/// workers by that many (`interp`'s backlog): a long loop then holds the ops of a few thousand
/// statements, and the clock runs at the same places every run.
const HOST_LEAD: usize = 4096;

/// Names the new lane `lane` of `device` among the engine's workers; its worker number.
fn new_lane(names: &Mutex<Vec<String>>, device: Device, lane: usize) -> u32 {
    let mut names = lock(names);
    names.push(match device {
        Device::Cpu => format!("cpu:{lane}"),
        Device::Gpu(index) => format!("gpu{index}:s{lane}"),
        Device::Copy => format!("copy:{lane}"),
        Device::Net => format!("net:{lane}"),
        Device::Link(..) => device.to_string(),
    });
    (names.len() - 1) as u32
}

impl SimFeed {
    /// A feed into `sim` whose first op is numbered `first`, naming its lanes in
    /// `worker_names`.
    pub(crate) fn new(
        sim: Simulator,
        first: u64,
        worker_names: Arc<Mutex<Vec<String>>>,
    ) -> SimFeed {
        SimFeed {
            worker_names,
            state: Mutex::new(FeedState {
                sim,
                next: first,
                pending: BTreeMap::new(),
                n_waiting: 0,
            }),
            entered: Condvar::new(),
        }
    }

    /// Runs `body` on the simulator, under its lock.
    pub(crate) fn with<T>(&self, body: impl FnOnce(&mut Simulator) -> T) -> T {
        body(&mut lock(&self.state).sim)
    }

    /// Records the cost op `id` reported.
    pub(crate) fn cost(&self, sink: &dyn EventSink, id: OpId, cost: Cost) {
        self.update(sink, id, |entry| entry.cost = Some(cost));
    }

    /// Records how op `id` ended, and its cost when known now.
    pub(crate) fn finished(
        &self,
        sink: &dyn EventSink,
        id: OpId,
        outcome: SimOutcome,
        cost: Option<Cost>,
    ) {
        self.update(sink, id, |entry| {
            entry.outcome = Some(outcome);
            if cost.is_some() {
                entry.cost = cost;
            }
        });
    }

    /// Waits until every op numbered below `before` has entered, then advances the virtual clock
    /// until `done` holds (see [`Simulator::run_until`]). Asks `give_up` every
    /// [`GIVE_UP_SLICE`] while it waits (an op before may wait for a peer that never comes),
    /// and returns false, the clock untouched, once it says so.
    pub(crate) fn run_until(
        &self,
        before: u64,
        sink: &dyn EventSink,
        done: &dyn Fn(&Simulator) -> bool,
        give_up: &dyn Fn() -> bool,
    ) -> bool {
        let mut state = lock(&self.state);
        while state.next < before {
            if give_up() {
                return false;
            }
            state.n_waiting += 1;
            state = wait_timeout(&self.entered, state, GIVE_UP_SLICE);
            state.n_waiting -= 1;
        }
        let names = &self.worker_names;
        state.sim.run_until(
            sink,
            &mut |device, lane| new_lane(names, device, lane),
            done,
        );
        true
    }

    fn update(&self, sink: &dyn EventSink, id: OpId, change: impl FnOnce(&mut Entry)) {
        let mut state = lock(&self.state);
        let mut entry = state.pending.remove(&id.0).unwrap_or_default();
        change(&mut entry);
        if id.0 != state.next || !entry.is_complete() {
            state.pending.insert(id.0, entry);
            return;
        }
        let mut entering = Some((id.0, entry));
        while let Some((id, entry)) = entering.take() {
            state.next = id + 1;
            if let (Some(cost), Some(outcome)) = (entry.cost, entry.outcome) {
                state.sim.add(sink, OpId(id), outcome, cost);
                if state.sim.n_unfinished() >= HOST_LEAD {
                    let names = &self.worker_names;
                    state.sim.run_until(
                        sink,
                        &mut |device, lane| new_lane(names, device, lane),
                        &|sim| sim.n_unfinished() <= HOST_LEAD / 2,
                    );
                }
            }
            let next = state.next;
            if state
                .pending
                .first_key_value()
                .is_some_and(|(&id, entry)| id == next && entry.is_complete())
            {
                entering = state.pending.pop_first();
            }
        }
        if state.n_waiting > 0 {
            self.entered.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::NoSink;

    /// A chain of ops writing one variable and reading another, entering in order.
    fn feed_chain(feed: &SimFeed, n: u64) {
        let (a, b) = (VarId(1), VarId(2));
        for id in FIRST..FIRST + n {
            let outcome = SimOutcome {
                pushed: EventKind::Pushed {
                    op: OpId(id),
                    label: Arc::from("a = a + b"),
                    line: 1,
                    reads: vec![a, b],
                    writes: vec![a],
                    device: Device::Cpu,
                    priority: 0,
                },
                device: Device::Cpu,
                priority: 0,
                reads: vec![a, b],
                writes: vec![a],
                state: OpState::Done,
                message: None,
                bookkeeping: None,
            };
            let cost = Cost {
                flops: 1e6,
                ..Cost::default()
            };
            feed.finished(&NoSink, OpId(id), outcome, Some(cost));
        }
    }

    const FIRST: u64 = 1;

    /// The simulated host leads its lanes by at most `HOST_LEAD` ops, and the ops that ended
    /// are retired: a long run holds what a short one holds.
    #[test]
    fn a_long_run_holds_only_its_recent_ops() {
        let feed = SimFeed::new(
            Simulator::new(1, 1),
            FIRST,
            Arc::new(Mutex::new(vec!["main".to_string()])),
        );
        feed_chain(&feed, 20_000);
        let (unfinished, held) = feed.with(|sim| (sim.n_unfinished(), sim.n_held()));
        assert!(unfinished < HOST_LEAD, "{unfinished} ops not simulated");
        assert!(held <= HOST_LEAD, "{held} ops held");
        feed.run_until(FIRST + 20_000, &NoSink, &Simulator::is_idle, &|| false);
        assert_eq!(feed.with(|sim| sim.n_held()), 0);
    }
}
