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
use crate::sync::{lock, wait_timeout, Condvar, Mutex};
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
}

impl SimFeed {
    /// A feed into `sim` whose first op is numbered `first`.
    pub(crate) fn new(sim: Simulator, first: u64) -> SimFeed {
        SimFeed {
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
        new_lane: &mut dyn FnMut(Device, usize) -> u32,
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
        state.sim.run_until(sink, new_lane, done);
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
