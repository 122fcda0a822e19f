//! [`LastEvents`]: the last events of a long run, kept as they arrive, with what a replay needs
//! to start from them: the state of the queues and of the unfinished ops where they begin,
//! rebuilt as a short prologue of events.
//!
//! A replay page of a run of millions of ops cannot hold every event (a browser parses a page of
//! some tens of megabytes, not of a gigabyte), and the run's recorder should not hold them all
//! either. What the events before the cut leave behind is small: the live variables, and the
//! ops pushed and not yet finished with their queued accesses, granted or not. Each such op's
//! push, grants, readiness and start, replayed in push order, rebuild exactly those queues
//! (an op's accesses are appended at its push and leave only at its end), so a view folds the
//! prologue and the kept events as one log and needs nothing else to know about the cut.

use std::collections::VecDeque;

use dep_engine::{Event, EventKind, OpId, VarId};
use rustc_hash::FxHashMap;

use crate::bookkeeping::{Bookkeeping, Filtered};
use crate::time_order::OpTimes;

/// Keeps at most a given number of a run's latest events, as the views see them (the
/// interpreter's bookkeeping left out, as [`crate::Replay`] leaves it); the events pushed out are
/// folded into the state they leave (live variables, unfinished ops), which
/// [`LastEvents::finish`] turns into a prologue.
#[derive(Debug)]
pub struct LastEvents {
    capacity: usize,
    bookkeeping: Bookkeeping,
    kept: VecDeque<Event>,
    /// How many events were pushed out, and the time of the last of them.
    n_dropped: usize,
    dropped_until_ns: u64,
    /// How many ops were pushed in the events pushed out.
    n_ops_dropped: usize,
    /// The live variables' creations, by when they came.
    vars: FxHashMap<VarId, (usize, Event)>,
    /// The unfinished ops of the events pushed out, by when they were pushed.
    ops: FxHashMap<OpId, (usize, CarriedOp)>,
    /// Each unfinished op's latest time, to keep the events in time order (`time_order.rs`).
    op_times: OpTimes,
}

/// The events of an op pushed before the cut and unfinished there that rebuild its state.
#[derive(Debug)]
struct CarriedOp {
    /// How many ops were pushed before it in the run (the views' ops).
    n_ops_before: usize,
    pushed: Event,
    /// Its grants, readiness and start, in the order they came.
    progress: Vec<Event>,
}

/// A run's events from a cut on, after a prologue that rebuilds the state at the cut.
#[derive(Debug)]
pub struct EventsCut {
    /// The prologue, then the events after the cut.
    pub events: Vec<Event>,
    /// Where the cut lies and what it left out.
    pub prologue: Prologue,
}

/// What a cut left out of a run's events, and how [`EventsCut::events`] begins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prologue {
    /// How many events at the front rebuild the state at the cut (0: nothing was cut).
    pub n_events: usize,
    /// How many of the run's events (those the views show) came before the cut.
    pub n_run_events_before: usize,
    /// The time of the last of them.
    pub cut_ns: u64,
    /// How many ops were pushed before the cut and finished there: those the prologue leaves
    /// out.
    pub n_ops_left_out: usize,
    /// For each op the prologue carries, in push order, how many of the ops left out were
    /// pushed before it (those left out are interleaved with those carried: an op pushed first
    /// may still run at the cut while later ones finished).
    pub left_out_before: Vec<usize>,
}

impl Prologue {
    /// Whether events were cut.
    pub fn is_cut(&self) -> bool {
        self.n_run_events_before > 0
    }

    /// How many of the ops left out were pushed before the op at `position` among those the
    /// replay holds (the prologue's ops first, then those pushed after the cut).
    pub fn left_out_before(&self, position: usize) -> usize {
        self.left_out_before
            .get(position)
            .copied()
            .unwrap_or(self.n_ops_left_out)
    }

    /// How many of the run's ops were pushed before the replay's op at `position`, whether the
    /// replay holds them or not.
    pub fn run_ops_before(&self, position: usize) -> usize {
        position + self.left_out_before(position)
    }
}

impl LastEvents {
    /// Keeps at most `capacity` events (at least one).
    pub fn keeping(capacity: usize) -> LastEvents {
        LastEvents {
            capacity: capacity.max(1),
            bookkeeping: Bookkeeping::default(),
            kept: VecDeque::new(),
            n_dropped: 0,
            dropped_until_ns: 0,
            n_ops_dropped: 0,
            vars: FxHashMap::default(),
            ops: FxHashMap::default(),
            op_times: OpTimes::default(),
        }
    }

    /// The last `capacity` of `events`, after the prologue that rebuilds the state before them.
    pub fn cut(events: impl IntoIterator<Item = Event>, capacity: usize) -> EventsCut {
        let mut last = LastEvents::keeping(capacity);
        for event in events {
            last.push(event);
        }
        last.finish()
    }

    /// Keeps the run's next event in log order (unless it is bookkeeping), pushing out the
    /// earliest one when full. The events kept are in time order, as [`crate::Replay::new`]
    /// puts a whole log: one logged late takes its place among them, never before the cut.
    pub fn push(&mut self, event: Event) {
        let mut event = match self.bookkeeping.filter(&event) {
            Filtered::Hidden => return,
            Filtered::Shown => event,
            Filtered::Trimmed(trimmed) => trimmed,
        };
        if self.kept.len() == self.capacity {
            if let Some(earliest) = self.kept.pop_front() {
                self.drop_event(earliest);
            }
        }
        self.op_times.settle(&mut event);
        event.time_ns = event.time_ns.max(self.dropped_until_ns);
        let at = self
            .kept
            .iter()
            .rposition(|kept| kept.time_ns <= event.time_ns)
            .map_or(0, |before| before + 1);
        self.kept.insert(at, event);
    }

    /// Folds an event pushed out into the state the cut leaves.
    fn drop_event(&mut self, event: Event) {
        let order = self.n_dropped;
        self.n_dropped += 1;
        self.dropped_until_ns = event.time_ns;
        match &event.kind {
            EventKind::VarCreated { var, .. } => {
                self.vars.insert(*var, (order, event));
            }
            EventKind::VarDeleted { var } => {
                self.vars.remove(var);
            }
            EventKind::Pushed { op, .. } => {
                let op = *op;
                let carried = CarriedOp {
                    n_ops_before: self.n_ops_dropped,
                    pushed: event,
                    progress: Vec::new(),
                };
                self.n_ops_dropped += 1;
                self.ops.insert(op, (order, carried));
            }
            EventKind::Granted { op, .. }
            | EventKind::Ready { op }
            | EventKind::Cancelled { op }
            | EventKind::Started { op, .. } => {
                if let Some((_, carried)) = self.ops.get_mut(op) {
                    carried.progress.push(event);
                }
            }
            EventKind::Finished { op, .. } => {
                self.ops.remove(op);
            }
            // A device's span says nothing of the queues or of an op's state.
            EventKind::DeviceSpan { .. } => {}
        }
    }

    /// The prologue and the kept events.
    pub fn finish(self) -> EventsCut {
        let mut vars: Vec<(usize, Event)> = self.vars.into_values().collect();
        vars.sort_unstable_by_key(|(order, _)| *order);
        let mut ops: Vec<(usize, CarriedOp)> = self.ops.into_values().collect();
        ops.sort_unstable_by_key(|(order, _)| *order);
        let n_ops_left_out = self.n_ops_dropped - ops.len();
        let mut events: Vec<Event> = vars.into_iter().map(|(_, event)| event).collect();
        let mut left_out_before = Vec::with_capacity(ops.len());
        for (carried_before, (_, op)) in ops.into_iter().enumerate() {
            left_out_before.push(op.n_ops_before - carried_before);
            events.push(op.pushed);
            events.extend(op.progress);
        }
        let prologue = Prologue {
            n_events: events.len(),
            n_run_events_before: self.n_dropped,
            cut_ns: self.dropped_until_ns,
            n_ops_left_out,
            left_out_before,
        };
        events.extend(self.kept);
        EventsCut { events, prologue }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Frame, FrameOp, Replay, Stepper};

    /// The queues and the unfinished ops of a frame: what a cut must carry over.
    fn live_part(frame: &Frame) -> (String, Vec<String>) {
        let vars = format!("{:?}", frame.vars);
        let unfinished = frame
            .ops
            .iter()
            .filter(|op| op.finished_ns.is_none())
            .map(|op: &FrameOp| format!("{op:?}"))
            .collect();
        (vars, unfinished)
    }

    /// After the prologue, and at every step after it, a cut replay shows the queues and
    /// unfinished ops that the whole replay shows at the same step of the run.
    #[test]
    fn a_cut_replay_goes_on_as_the_whole_run_does() {
        for replay in [
            crate::tests::threaded_mutation_replay(),
            crate::tests::long_queue_replay(),
            crate::tests::self_update_replay(),
            crate::tests::long_chain_replay(400),
        ] {
            let n = replay.events().len();
            let mut whole = Stepper::new(&replay);
            for capacity in [1, 2, 5, n / 3, n / 2, n - 1] {
                let cut = LastEvents::cut(replay.events().iter().cloned(), capacity);
                let prologue = cut.prologue;
                assert_eq!(prologue.n_run_events_before, n - capacity);
                assert_eq!(cut.events.len() - prologue.n_events, capacity);
                let cut_replay = Replay::new(cut.events, replay.worker_names().to_vec());
                // Each op the cut replay holds is counted at its place among the run's ops,
                // those left out included (they may have been pushed after an op carried).
                for position in 0..cut_replay.ops().len() {
                    let op = cut_replay.op_at(position).unwrap().id;
                    assert_eq!(
                        replay.op_position(op),
                        Some(prologue.run_ops_before(position)),
                        "capacity {capacity}, {op}"
                    );
                }
                let mut part = Stepper::after(&cut_replay, prologue.clone());
                for step in 0..=capacity {
                    whole.go_to(prologue.n_run_events_before + step);
                    part.go_to(prologue.n_events + step);
                    assert_eq!(
                        live_part(&part.frame()),
                        live_part(&whole.frame()),
                        "capacity {capacity}, step {step} after the cut"
                    );
                    // Running ops' times count to the same moment (at the cut, not to the
                    // prologue's last event).
                    assert_eq!(
                        part.frame().time_ns,
                        whole.frame().time_ns,
                        "capacity {capacity}, step {step} after the cut"
                    );
                    // Every op pushed by then is either in the cut replay or counted out.
                    assert_eq!(
                        part.n_pushed() + prologue.n_ops_left_out,
                        whole.n_pushed(),
                        "capacity {capacity}, step {step} after the cut"
                    );
                }
            }
        }
    }

    /// `events` (in time order) with every other pair of neighbours of different times logged
    /// the wrong way round, as threads preempted between stamping an event and logging it log
    /// them; an op's grants and readiness stay where they were, after the end that made them.
    fn logged_out_of_order(events: &[Event]) -> Vec<Event> {
        let mut logged = events.to_vec();
        let moves = |event: &Event| {
            !matches!(
                event.kind,
                EventKind::Granted { .. } | EventKind::Ready { .. }
            )
        };
        for pair in logged.chunks_exact_mut(2) {
            let op = |event: &Event| match &event.kind {
                EventKind::Pushed { op, .. }
                | EventKind::Cancelled { op }
                | EventKind::Started { op, .. }
                | EventKind::Finished { op, .. }
                | EventKind::DeviceSpan { op, .. } => Some(*op),
                _ => None,
            };
            if pair[0].time_ns < pair[1].time_ns
                && moves(&pair[0])
                && moves(&pair[1])
                && op(&pair[0]) != op(&pair[1])
            {
                pair.swap(0, 1);
            }
        }
        logged
    }

    /// A log whose events are not in time order is put in it, whole by a replay and as its
    /// last events by a cut: the same replay, the same cut, as from the log in order.
    #[test]
    fn events_logged_out_of_order_are_kept_in_time_order() {
        for replay in [
            crate::tests::threaded_mutation_replay(),
            crate::tests::long_queue_replay(),
            crate::tests::long_chain_replay(400),
        ] {
            let in_order = replay.events().to_vec();
            let logged = logged_out_of_order(&in_order);
            assert_ne!(logged, in_order, "the log is out of order");
            let whole = Replay::new(logged.clone(), replay.worker_names().to_vec());
            assert!(whole.events() == in_order.as_slice());
            // (A window of one event cannot put back an event logged one place late.)
            for capacity in [2, 5, in_order.len() / 2] {
                let cut = LastEvents::cut(logged.iter().cloned(), capacity);
                let cut_in_order = LastEvents::cut(in_order.iter().cloned(), capacity);
                assert_eq!(cut.prologue, cut_in_order.prologue, "capacity {capacity}");
                assert!(cut.events == cut_in_order.events, "capacity {capacity}");
            }
        }
    }

    /// A stepper after a prologue starts at its end, does not go back into it, numbers its
    /// steps as the run's and says where the cut lies at its first step.
    #[test]
    fn a_stepper_after_a_prologue_numbers_the_runs_steps() {
        let replay = crate::tests::long_chain_replay(400);
        let n = replay.events().len();
        let cut = LastEvents::cut(replay.events().iter().cloned(), 100);
        let prologue = cut.prologue;
        let cut_replay = Replay::new(cut.events, replay.worker_names().to_vec());
        let mut stepper = Stepper::after(&cut_replay, prologue.clone());
        assert_eq!(stepper.step(), prologue.n_events);
        stepper.go_to(0);
        assert_eq!(
            stepper.step(),
            prologue.n_events,
            "never inside the prologue"
        );
        let style = crate::TextStyle::plain(80);
        let first = crate::text::step(&stepper, &style);
        assert!(
            first.starts_with(&format!(
                "step {}/{n} at {}: the state after the run's first {} events\n",
                n - 100,
                crate::format_ns(prologue.cut_ns),
                n - 100
            )),
            "{first}"
        );
        stepper.go_to(usize::MAX);
        let whole_last = crate::text::step_around(
            &{
                let mut whole = Stepper::new(&replay);
                whole.go_to(n);
                whole
            },
            &style,
            10,
        );
        // The whole run's last step and the cut's, drawn around the same ops: the same text.
        assert_eq!(crate::text::step_around(&stepper, &style, 10), whole_last);
    }

    /// Nothing is cut from a run shorter than the capacity: no prologue, the same events.
    #[test]
    fn a_short_run_is_kept_whole() {
        let replay = crate::tests::threaded_mutation_replay();
        let n = replay.events().len();
        let cut = LastEvents::cut(replay.events().iter().cloned(), n);
        assert_eq!(cut.prologue, Prologue::default());
        assert!(!cut.prologue.is_cut());
        assert_eq!(cut.events, replay.events());
    }
}
