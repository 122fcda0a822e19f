//! A [`Stepper`]: the queues and op states after any prefix of a replay's events, kept between
//! steps, so that moving to the next or the previous step costs the events in between, not the
//! whole log.
//!
//! What changes from step to step is small: the live variables' queues and the progress of the
//! ops not yet finished. An op that finished before the step is shown as the replay's record of
//! it says (nothing of an op changes after its end), so the stepper holds only the unfinished
//! ones. Going back starts again from the nearest kept state at or before the step (a
//! checkpoint) instead of from the start of the log. A replay's frame at one step
//! ([`Replay::frame_at`]) and what it tells ([`Replay::why_waited`]) are made here too.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use rustc_hash::FxHashMap;
use std::ops::Range;

use dep_engine::{AccessSnapshot, Blocker, Event, EventKind, OpId, OpState, VarId};

use crate::frame::{Frame, FrameOp, FrameVar};
use crate::last_events::Prologue;
use crate::replay::{blockers, worker_name, Replay};

/// The fewest events between two checkpoints: a step back folds at most about this many, or
/// [`STATE_SPACING`] times the size of the state kept when that is more.
const CHECKPOINT_EVERY: usize = 4096;

/// How many events at least separate checkpoints per entry of the state they keep, so that all
/// checkpoints together hold at most an eighth as many entries as the log has events (a run
/// whose interpreter leads by thousands of ops has thousands of unfinished ops at every step).
const STATE_SPACING: usize = 8;

/// Moves through a replay's events, one step or a jump at a time; [`Stepper::frame`] is what
/// [`Replay::frame_at`] gives at the same step.
///
/// Invariant: `state` has folded exactly the first `state.n_events` events of the replay;
/// `checkpoints` are states of the same log at increasing steps, the last one at most at
/// `reached`.
#[derive(Clone, Debug)]
pub struct Stepper<'a> {
    replay: &'a Replay,
    /// What the replay's events left out of the run, when they are its last ones after a
    /// prologue that rebuilds the state where they begin ([`crate::LastEvents`]).
    prologue: Prologue,
    state: StepState,
    checkpoints: Vec<StepState>,
    /// The furthest step folded so far: checkpoints are taken only beyond it.
    reached: usize,
}

/// The state of the queues and of the unfinished ops after some events.
#[derive(Clone, Debug, Default)]
struct StepState {
    /// How many events were folded.
    n_events: usize,
    /// How many ops were pushed: the first `n_pushed` of the replay's records.
    n_pushed: usize,
    /// Live variables and their queues, oldest access first. An op's accesses to one variable
    /// are appended together at its push, so they lie side by side.
    queues: BTreeMap<VarId, VecDeque<AccessSnapshot>>,
    /// The ops pushed and not yet finished, and how far each got.
    unfinished: FxHashMap<OpId, Progress>,
}

/// How far an unfinished op got.
#[derive(Clone, Copy, Debug)]
struct Progress {
    state: OpState,
    started_ns: Option<u64>,
    worker: Option<u32>,
}

impl<'a> Stepper<'a> {
    /// A stepper at the start of `replay`'s log, before any event.
    pub fn new(replay: &'a Replay) -> Stepper<'a> {
        Stepper::after(replay, Prologue::default())
    }

    /// A stepper through a run's last events, at the end of the `prologue` that `replay`'s
    /// events begin with: it never goes back into the prologue, and it numbers its steps and
    /// counts the ops before its window as the whole run's.
    pub fn after(replay: &'a Replay, prologue: Prologue) -> Stepper<'a> {
        let mut stepper = Stepper {
            replay,
            prologue,
            state: StepState::default(),
            checkpoints: Vec::new(),
            reached: 0,
        };
        stepper.go_to(stepper.prologue.n_events);
        stepper
    }

    /// What the replay's events left out of the run (nothing, unless made by
    /// [`Stepper::after`]).
    pub fn prologue(&self) -> &Prologue {
        &self.prologue
    }

    /// The first step it shows: the end of the prologue.
    pub fn first_step(&self) -> usize {
        self.prologue.n_events
    }

    /// The run's number of step `n` of the replay (`n` events folded): the same but for a
    /// replay of a run's last events.
    pub fn run_step(&self, n: usize) -> usize {
        n - self.prologue.n_events.min(n) + self.prologue.n_run_events_before
    }

    /// The replay it steps through.
    pub fn replay(&self) -> &'a Replay {
        self.replay
    }

    /// How many events the current step has folded (0: the start).
    pub fn step(&self) -> usize {
        self.state.n_events
    }

    /// How many ops were pushed by the current step: the positions of their records
    /// ([`Replay::op_at`]) are `0..n_pushed()`.
    pub fn n_pushed(&self) -> usize {
        self.state.n_pushed
    }

    /// Moves to the step after the first `n_events` events (the last step when larger, the
    /// first one when inside the prologue).
    pub fn go_to(&mut self, n_events: usize) {
        let events = self.replay.events();
        let n_events = n_events
            .min(events.len())
            .max(self.prologue.n_events.min(events.len()));
        if n_events < self.state.n_events {
            let kept = self
                .checkpoints
                .partition_point(|checkpoint| checkpoint.n_events <= n_events);
            self.state = match kept {
                0 => StepState::default(),
                kept => self.checkpoints[kept - 1].clone(),
            };
        }
        while self.state.n_events < n_events {
            self.state.apply(&events[self.state.n_events], self.replay);
            if self.state.n_events > self.reached {
                self.reached = self.state.n_events;
                self.keep_checkpoint();
            }
        }
    }

    /// Keeps the current state as a checkpoint when enough events have passed since the last
    /// one: at least [`CHECKPOINT_EVERY`], and at least [`STATE_SPACING`] per entry it holds.
    fn keep_checkpoint(&mut self) {
        let last = self.checkpoints.last().map_or(0, |state| state.n_events);
        let since = self.state.n_events - last;
        if since >= CHECKPOINT_EVERY.max(STATE_SPACING * self.state.size()) {
            self.checkpoints.push(self.state.compact_copy());
        }
    }

    /// The queues and every op pushed so far, at the current step.
    pub fn frame(&self) -> Frame {
        self.frame_of_positions((0..self.state.n_pushed).collect())
    }

    /// The queues and the ops at `positions` (push order, clamped to the ops pushed so far) at
    /// the current step, with every op that has an access in a queue (those the queues and the
    /// reasons for waiting name): a window on a long run's ops.
    pub fn frame_of(&self, positions: Range<usize>) -> Frame {
        let end = positions.end.min(self.state.n_pushed);
        let mut shown: Vec<usize> = (positions.start.min(end)..end).collect();
        shown.extend(
            self.state
                .queues
                .values()
                .flatten()
                .filter_map(|access| self.replay.op_position(access.op)),
        );
        shown.sort_unstable();
        shown.dedup();
        self.frame_of_positions(shown)
    }

    /// The position of the op that the current step's event concerns (its push, a grant, its
    /// start, its end), or of the last op pushed when it concerns none; `None` before any push.
    pub fn focus(&self) -> Option<usize> {
        let event_op = self
            .state
            .n_events
            .checked_sub(1)
            .and_then(|last| event_op(&self.replay.events()[last].kind))
            .and_then(|op| self.replay.op_position(op));
        event_op.or_else(|| self.state.n_pushed.checked_sub(1))
    }

    /// The positions of at most `room` ops around the focus ([`Stepper::focus`], a third of
    /// them before it), among the ops pushed so far: what a view of that many rows shows.
    pub fn window(&self, room: usize) -> Range<usize> {
        let focus = self.focus().unwrap_or(0);
        let mut first = focus.saturating_sub(room / 3);
        let end = (first + room).min(self.state.n_pushed);
        first = first.min(end.saturating_sub(room));
        first..end
    }

    /// How many of the run's ops pushed by now come before the ops at `window` and how many
    /// after them, counted among the whole run's: a cut replay's first ops (those its prologue
    /// carries) have ops left out of it pushed before them, between them and after them.
    pub fn ops_outside(&self, window: &Range<usize>) -> (usize, usize) {
        let prologue = &self.prologue;
        let n_run_pushed = self.state.n_pushed + prologue.n_ops_left_out;
        let n_earlier = prologue.run_ops_before(window.start);
        let n_later = match window
            .end
            .checked_sub(1)
            .filter(|_| window.end > window.start)
        {
            Some(last) => n_run_pushed - prologue.run_ops_before(last) - 1,
            None => n_run_pushed - n_earlier,
        };
        (n_earlier, n_later)
    }

    /// For each op at `window` after its first, how many of the run's ops left out of a cut
    /// replay were pushed between it and the op before it, where there are any: a cut replay's
    /// prologue carries the ops unfinished at its cut, and those that finished in between are
    /// left out.
    pub fn ops_left_out_between(&self, window: &Range<usize>) -> HashMap<OpId, usize> {
        let prologue = &self.prologue;
        (window.start + 1..window.end)
            .filter_map(|position| {
                let n_between =
                    prologue.left_out_before(position) - prologue.left_out_before(position - 1);
                let id = self.replay.op_at(position)?.id;
                (n_between > 0).then_some((id, n_between))
            })
            .collect()
    }

    /// The ids of the ops at `positions`.
    pub fn ids(&self, positions: Range<usize>) -> HashSet<OpId> {
        positions
            .filter_map(|position| self.replay.op_at(position))
            .map(|record| record.id)
            .collect()
    }

    /// The frame holding the ops at `positions` (ascending, each pushed by now).
    fn frame_of_positions(&self, positions: Vec<usize>) -> Frame {
        let state = &self.state;
        let vars: Vec<FrameVar> = state
            .queues
            .iter()
            .map(|(id, queue)| FrameVar {
                id: *id,
                name: self.replay.var_name(*id),
                queue: queue.iter().copied().collect(),
            })
            .collect();
        let mut waits: HashMap<OpId, Vec<Blocker>> = HashMap::new();
        for var in &vars {
            for (op, blocker) in blockers(var.id, &var.queue) {
                waits.entry(op).or_default().push(blocker);
            }
        }
        let ops = positions
            .into_iter()
            .filter_map(|position| self.replay.op_at(position))
            .map(|record| {
                let (state, started_ns, finished_ns, worker) = match state
                    .unfinished
                    .get(&record.id)
                {
                    Some(progress) => (progress.state, progress.started_ns, None, progress.worker),
                    None => (
                        record.state,
                        record.started_ns,
                        record.finished_ns,
                        record.worker,
                    ),
                };
                // A cancelled op keeps its place in its queues but waits for nothing.
                let waits_on = waits.remove(&record.id).unwrap_or_default();
                FrameOp {
                    waits_on: if state == OpState::Cancelled {
                        Vec::new()
                    } else {
                        waits_on
                    },
                    worker: worker.map(|worker| worker_name(self.replay.worker_names(), worker)),
                    id: record.id,
                    label: record.label.clone(),
                    line: record.line,
                    place: record.place.clone(),
                    state,
                    device: record.device,
                    started_ns,
                    finished_ns,
                }
            })
            .collect();
        let mut time_ns = state
            .n_events
            .checked_sub(1)
            .map_or(0, |last| self.replay.events()[last].time_ns);
        if self.prologue.is_cut() && state.n_events <= self.prologue.n_events {
            // The prologue's last event is its last op's (pushed, granted or started before the
            // cut): the state it rebuilds is the state at the cut.
            time_ns = time_ns.max(self.prologue.cut_ns);
        }
        Frame {
            time_ns,
            vars,
            ops,
            named: Vec::new(),
        }
    }
}

/// Takes `op`'s accesses out of a variable's queue: they lie side by side, usually near its
/// front (an op finishes once granted, and grants go from the front), so the queue is looked
/// at up to them, not through.
fn remove_accesses(queue: &mut VecDeque<AccessSnapshot>, op: OpId) {
    if let Some(first) = queue.iter().position(|access| access.op == op) {
        while queue.get(first).is_some_and(|access| access.op == op) {
            queue.remove(first);
        }
    }
}

/// The op an event is about, if any.
fn event_op(kind: &EventKind) -> Option<OpId> {
    match kind {
        EventKind::Pushed { op, .. }
        | EventKind::Granted { op, .. }
        | EventKind::Ready { op }
        | EventKind::Cancelled { op }
        | EventKind::Started { op, .. }
        | EventKind::Finished { op, .. }
        | EventKind::DeviceSpan { op, .. } => Some(*op),
        EventKind::VarCreated { .. } | EventKind::VarDeleted { .. } => None,
    }
}

/// A replay's frames at one step, and what they tell, each from a stepper of its own.
impl Replay {
    /// The queues and op states after the first `n_events` events (all of them when larger).
    /// To move through many steps, a [`Stepper`] keeps the state between them.
    pub fn frame_at(&self, n_events: usize) -> Frame {
        let mut stepper = Stepper::new(self);
        stepper.go_to(n_events);
        stepper.frame()
    }

    /// Why the last op that wrote `var` waited, from the log, in words: `A was last written
    /// by A = 5 (line 4), which waited 2.00 ms for A: read by B = A + 1 (line 2), and by C =
    /// A * 3 (line 3)`, or `…, which did not wait`. What it waited for is every access ahead
    /// of its own when it was pushed. A cancelled op wrote nothing: the writer is the last op
    /// that was not cancelled, and the sentence says how many writes after it were (`…; 3
    /// later writes were cancelled`). When no op of the log wrote `var`: `None`, or, with
    /// cancelled writes, that it was never written; but when `has_value` (the variable holds a
    /// value, written before the events the log keeps) that its last write is older than them.
    pub fn why_waited(&self, var: VarId, has_value: bool) -> Option<String> {
        let mut n_cancelled = 0;
        let writer = self.ops().iter().rev().find(|op| {
            let writes = op.writes.contains(&var);
            if writes && op.state == OpState::Cancelled {
                n_cancelled += 1;
                return false;
            }
            writes
        });
        let cancelled = match n_cancelled {
            0 => String::new(),
            1 => "; 1 later write was cancelled before it started".to_string(),
            n => format!("; {n} later writes were cancelled before they started"),
        };
        let Some(writer) = writer else {
            if has_value {
                return Some(format!(
                    "{} was last written before the events kept here{cancelled}",
                    self.var_name(var)
                ));
            }
            return (n_cancelled > 0).then(|| {
                format!(
                    "{} was never written: {n_cancelled} write{} cancelled before {} started",
                    self.var_name(var),
                    if n_cancelled == 1 { " was" } else { "s were" },
                    if n_cancelled == 1 { "it" } else { "they" },
                )
            });
        };
        let subject = format!(
            "{} was last written by {}",
            self.var_name(var),
            writer.describe()
        );
        let at_push = self.frame_at(writer.pushed_at + 1);
        let waits_on = at_push
            .op(writer.id)
            .map(|op| op.waits_on.as_slice())
            .unwrap_or_default();
        if waits_on.is_empty() {
            return Some(format!("{subject}, which did not wait{cancelled}"));
        }
        let waited = match writer.ready_ns {
            Some(ready_ns) => format!(
                " {}",
                crate::format_ns(ready_ns.saturating_sub(writer.pushed_ns))
            ),
            None => String::new(),
        };
        // What it waited behind and was then cancelled ran nothing: said, so that the wait is
        // not read as a wait for a value.
        let mut stopped: Vec<String> = Vec::new();
        for blocker in waits_on {
            if let Some(op) = self.op(blocker.behind) {
                let said = op.describe();
                if op.state == OpState::Cancelled && !stopped.contains(&said) {
                    stopped.push(said);
                }
            }
        }
        let stopped = match stopped.as_slice() {
            [] => String::new(),
            [one] => format!(" ({one} was then cancelled: it ran nothing)"),
            many => format!(
                " ({} were then cancelled: they ran nothing)",
                many.join(" and ")
            ),
        };
        Some(format!(
            "{subject}, which waited{waited} {}{stopped}{cancelled}",
            at_push.blocker_clauses(waits_on, false)
        ))
    }

    /// The queues and op states at the end of the log.
    pub fn final_frame(&self) -> Frame {
        self.frame_at(self.events().len())
    }
}

impl StepState {
    /// A copy holding no more room than its entries need (a map's clone keeps the room it once
    /// grew to, and checkpoints are many).
    fn compact_copy(&self) -> StepState {
        StepState {
            n_events: self.n_events,
            n_pushed: self.n_pushed,
            queues: self.queues.clone(),
            unfinished: self
                .unfinished
                .iter()
                .map(|(op, progress)| (*op, *progress))
                .collect(),
        }
    }

    /// What the state holds, in entries: the cost of keeping a copy.
    fn size(&self) -> usize {
        self.queues.len()
            + self.queues.values().map(VecDeque::len).sum::<usize>()
            + self.unfinished.len()
    }

    /// Folds the log's next event; `replay` has the records of the ops it names.
    fn apply(&mut self, event: &Event, replay: &Replay) {
        self.n_events += 1;
        match &event.kind {
            EventKind::VarCreated { var, .. } => {
                self.queues.insert(*var, VecDeque::new());
            }
            EventKind::VarDeleted { var } => {
                self.queues.remove(var);
            }
            EventKind::Pushed {
                op, reads, writes, ..
            } => {
                self.n_pushed += 1;
                self.unfinished.insert(
                    *op,
                    Progress {
                        state: OpState::Waiting,
                        started_ns: None,
                        worker: None,
                    },
                );
                let accesses = reads
                    .iter()
                    .map(|var| (var, false))
                    .chain(writes.iter().map(|var| (var, true)));
                for (var, write) in accesses {
                    self.queues
                        .entry(*var)
                        .or_default()
                        .push_back(AccessSnapshot {
                            op: *op,
                            write,
                            granted: false,
                        });
                }
            }
            EventKind::Granted { op, var } => {
                if let Some(access) = self
                    .queues
                    .get_mut(var)
                    .and_then(|queue| queue.iter_mut().find(|access| access.op == *op))
                {
                    access.granted = true;
                }
            }
            EventKind::Ready { op } => {
                // A cancelled op stays cancelled while it waits for its turn.
                if let Some(progress) = self
                    .unfinished
                    .get_mut(op)
                    .filter(|progress| progress.state != OpState::Cancelled)
                {
                    progress.state = OpState::Ready;
                }
            }
            EventKind::Cancelled { op } => {
                if let Some(progress) = self
                    .unfinished
                    .get_mut(op)
                    .filter(|progress| matches!(progress.state, OpState::Waiting | OpState::Ready))
                {
                    progress.state = OpState::Cancelled;
                }
            }
            EventKind::Started { op, worker } => {
                if let Some(progress) = self.unfinished.get_mut(op) {
                    progress.state = OpState::Running;
                    progress.started_ns = Some(event.time_ns);
                    progress.worker = Some(*worker);
                }
            }
            EventKind::Finished { op, .. } => {
                if self.unfinished.remove(op).is_some() {
                    if let Some(record) = replay.op(*op) {
                        for var in record.reads.iter().chain(&record.writes) {
                            if let Some(queue) = self.queues.get_mut(var) {
                                remove_accesses(queue, *op);
                            }
                        }
                    }
                }
            }
            EventKind::DeviceSpan { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// A stepper sent back and forth at random shows at each step what a stepper that only ever
    /// went forward shows there: checkpoints and going back lose and add nothing.
    #[test]
    fn jumps_back_and_forth_give_the_frames_of_a_walk_forward() {
        for replay in [
            crate::tests::threaded_mutation_replay(),
            crate::tests::self_update_replay(),
        ] {
            jumps_match_a_walk(&replay);
        }
    }

    fn jumps_match_a_walk(replay: &Replay) {
        let n = replay.events().len();
        let mut forward = Stepper::new(replay);
        let frames: Vec<Frame> = (0..=n)
            .map(|step| {
                forward.go_to(step);
                forward.frame()
            })
            .collect();
        let mut rng = StdRng::seed_from_u64(16);
        let mut jumping = Stepper::new(replay);
        for _ in 0..500 {
            let step = rng.gen_range(0..=n + 2);
            jumping.go_to(step);
            assert_eq!(jumping.step(), step.min(n));
            assert_eq!(jumping.frame(), frames[step.min(n)], "step {step}");
        }
    }

    /// Checkpoints are kept on a long log, and a step back from far along folds from the last
    /// one before it, to the same frame as a walk from the start.
    #[test]
    fn a_step_back_on_a_long_log_starts_from_a_checkpoint() {
        let replay = crate::tests::long_chain_replay(3 * CHECKPOINT_EVERY);
        let n = replay.events().len();
        let mut stepper = Stepper::new(&replay);
        stepper.go_to(n);
        assert!(
            stepper.checkpoints.len() >= 2,
            "{} checkpoints over {n} events",
            stepper.checkpoints.len()
        );
        for step in [n - 1, n / 2, CHECKPOINT_EVERY, CHECKPOINT_EVERY - 1, 1, 0] {
            stepper.go_to(step);
            let mut fresh = Stepper::new(&replay);
            fresh.go_to(step);
            assert_eq!(stepper.frame(), fresh.frame(), "step {step}");
        }
    }

    /// A window on the ops holds the records at those positions and those of the ops in the
    /// queues, as the whole frame has them.
    #[test]
    fn a_window_is_a_part_of_the_whole_frame() {
        let replay = crate::tests::long_queue_replay();
        let mut stepper = Stepper::new(&replay);
        // Just after the last push: A's write runs, twenty reads wait behind it.
        let last_push = replay
            .events()
            .iter()
            .rposition(|event| matches!(event.kind, EventKind::Pushed { .. }))
            .expect("ops were pushed");
        stepper.go_to(last_push + 1);
        let whole = stepper.frame();
        let n = stepper.n_pushed();
        assert_eq!(n, 21);
        assert_eq!(stepper.focus(), Some(20));
        let window = stepper.frame_of(5..8);
        assert_eq!(window.vars, whole.vars);
        let queued: Vec<OpId> = whole
            .vars
            .iter()
            .flat_map(|var| &var.queue)
            .map(|access| access.op)
            .collect();
        let expected: Vec<&FrameOp> = whole
            .ops
            .iter()
            .enumerate()
            .filter(|(position, op)| (5..8).contains(position) || queued.contains(&op.id))
            .map(|(_, op)| op)
            .collect();
        assert_eq!(window.ops.iter().collect::<Vec<_>>(), expected);
        // Once all have finished, a window holds only its own positions.
        stepper.go_to(replay.events().len());
        let whole = stepper.frame();
        assert_eq!(stepper.frame_of(5..8).ops, whole.ops[5..8]);
        assert_eq!(stepper.frame_of(n..n + 5).ops, vec![]);
    }
}
