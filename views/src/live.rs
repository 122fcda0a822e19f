//! The one live view model of a run, folded incrementally, and its two renderers: text for the
//! terminal, HTML for Jupyter.
//!
//! A [`LiveSource`] is where the live state is read from, by any thread, while the interpreter
//! pushes (or blocks in a `print`): the engine's monitor (snapshots: queues, states, what each
//! waiting op waits behind) and its event log (what ran, when). A [`LiveFold`] keeps the input
//! folded so far and folds only the events since its last look, keeps the ops by state as they
//! change, and builds rows only for the ops it shows: a redraw costs what is new and what is
//! unfinished, not the input's whole history. It reads the log itself (the kernel's display,
//! the REPL's panel: `EventLog::events_since`), or is fed the events by the log's one
//! streaming reader (`dep run`'s recorder, which forgets what it read, feeds `--watch`'s fold
//! through [`LiveFold::push`]). What it makes is a [`LiveView`]: one heading (input, engine, ops
//! by state, time) over a [`Frame`](crate::Frame) of the input's queues and ops and, in a notebook, the
//! timeline so far, rendered by [`LiveView::html`] (the Jupyter kernel's display) and
//! [`LiveView::text_with`] (the kernel's text fallback and the terminal's panels, each with its
//! [`TextLayout`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::thread;

use dep_engine as engine;

use crate as views;

/// How many op rows a display shows: every unfinished op first, then the latest finished ones.
const MAX_OP_ROWS: usize = 24;
/// How many variables' queues a display shows: busy ones first.
const MAX_VAR_ROWS: usize = 16;
/// The width of the text/plain fallback.
const TEXT_WIDTH: usize = 100;
/// Up to how many ops a cell's display draws the timeline of what has run so far: drawing it
/// costs the cell's whole history, which a redraw of a longer cell must not.
const MAX_TIMELINE_OPS: usize = 1000;
/// The width of the timeline under the display.
const TIMELINE_PX: u32 = 900;
/// Up to how many ops the timeline carries dependency arrows (shown while the pointer is over it).
const MAX_ARROW_OPS: usize = 300;
/// Arrows appear while the pointer is over the timeline.
const TIMELINE_STYLE: &str = "<style>.dep-timeline .dep-arrow { opacity: 0; transition: opacity 0.2s; } .dep-timeline:hover .dep-arrow { opacity: 1; }</style>";

/// Where a run's live state is read from, by any thread: what every live view is drawn from.
/// The session makes it (`Session::live`).
#[derive(Clone)]
pub struct LiveSource {
    /// What the heading calls the input (`cell[3]`, `<repl>`).
    pub title: String,
    /// The engine's policy, named in the heading; under `sim`, times are virtual.
    pub policy: engine::Policy,
    /// Snapshots of the engine: queues, states, what each waiting op waits behind.
    pub monitor: engine::Monitor,
    /// The engine's event log: what ran, when.
    pub log: Arc<engine::EventLog>,
    /// Names op lines by their input (`cell[3]:1`, `<repl>:1`).
    pub places: views::Places,
}

/// One input's ops and queues at one moment: the live view model every front-end renders.
pub struct LiveView {
    /// `cell[3] · threaded engine · 40 ops: 2 running, 38 done · 1.20 s so far`.
    pub heading: String,
    /// The variables the cell's ops access, and the ops a display has room for; times are
    /// counted from the cell's first event.
    pub frame: views::Frame,
    /// Every op of the cell, by state.
    counts: Vec<(engine::OpState, usize)>,
    /// How many of the cell's ops the frame leaves out.
    n_hidden: usize,
    /// How many of the variables it would show (touched by the cell's ops, or busy) the frame
    /// leaves out.
    n_vars_hidden: usize,
    /// The timeline (SVG) of what the cell ran so far, when it has room for one.
    timeline: Option<String>,
    /// What the heading says besides the counts.
    about: About,
}

/// What a view's heading says besides the counts: the input, the engine, the time.
#[derive(Clone, Debug)]
struct About {
    title: String,
    policy: engine::Policy,
    elapsed_ns: u64,
    /// Whether the input ended with every op of it: its time is then the whole ("in all"), else
    /// the time so far (a last display that stopped waiting for ops still running).
    ended: bool,
    /// The unfinished ops of earlier inputs shown with this one's (an op an earlier cell let
    /// go, which this one waits for): told apart in the heading, not counted as this input's.
    n_earlier: usize,
}

/// How a terminal lays a [`LiveView`] out as text ([`LiveView::text_with`]).
#[derive(Clone, Debug)]
pub struct TextLayout {
    /// Columns and colours.
    pub style: views::TextStyle,
    /// Whether the queues list the idle variables too (else only the busy ones).
    pub idle_queues: bool,
    /// Whether the op table follows the queues.
    pub ops: bool,
    /// Whether the op table lists the finished ops too (else only the running, ready and
    /// waiting ones, each with what it waits for).
    pub finished_ops: bool,
    /// At most how many lines: a longer text ends with a line saying how many were left out.
    pub max_lines: usize,
}

/// The states in the order the heading counts them.
const STATES: [engine::OpState; 7] = [
    engine::OpState::Running,
    engine::OpState::Ready,
    engine::OpState::Waiting,
    engine::OpState::Done,
    engine::OpState::Failed,
    engine::OpState::Skipped,
    engine::OpState::Cancelled,
];

fn state_index(state: engine::OpState) -> usize {
    STATES
        .iter()
        .position(|candidate| *candidate == state)
        .expect("every state is in STATES")
}

impl LiveSource {
    /// The cell now, read from the start of the event log (which the executor clears when a
    /// cell starts): see [`LiveFold::view`]. A watcher keeps a [`LiveFold`] instead, so that
    /// each redraw reads only what is new.
    pub fn view(&self, finished: bool) -> LiveView {
        LiveFold::new(self).view(self, finished)
    }

    /// How many pushed ops have not finished.
    pub fn n_unfinished(&self) -> usize {
        self.monitor.n_unfinished()
    }

    /// How many events the log has numbered so far.
    pub fn n_events(&self) -> u64 {
        self.log.next_seq()
    }
}

/// What a display keeps between redraws: the cell's events read so far, folded into op records,
/// where to read on, and the ops by state. A redraw reads and folds only the events that
/// arrived since the last one, and builds rows only for the ops it shows, so its cost follows
/// what is new and what is unfinished, not the cell's whole history.
pub struct LiveFold {
    /// The cell's events so far, folded (edges are never asked for).
    replay: views::Replay,
    /// The log's number of the next event to read.
    next_seq: u64,
    /// How many times the log was cleared when this fold began: a clear since then starts it
    /// over.
    n_clears: u64,
    /// Every variable an op of the log reads or writes.
    touched: HashSet<engine::VarId>,
    /// How many ops the log pushed.
    n_pushed: usize,
    /// The ops the log has not seen finish, by position (in push order): their state in the log.
    unfinished: BTreeMap<usize, engine::OpState>,
    /// The first failed, skipped and cancelled ops, as many as a display shows
    /// ([`MAX_OP_ROWS`]), by position: their records, which a terminal's fold keeps after its
    /// replay forgets them.
    troubled: BTreeMap<usize, views::OpRecord>,
    /// The latest done ops, as many as a display shows, by position, with their records.
    done: BTreeMap<usize, views::OpRecord>,
    /// The ops of the log by state, by [`state_index`].
    n_by_state: [usize; STATES.len()],
    /// The log's ready and running ops, by position: a display lists them first.
    active: BTreeSet<usize>,
    /// The ops cancelled before they started whose end the log has not told yet: they keep
    /// their places in their queues until their turn comes, as the engine keeps them.
    cancelled_in_queues: HashSet<engine::OpId>,
    /// Whether the fold keeps every event, to draw the timeline (the kernel's display); the
    /// terminal's panels keep only op records.
    timeline: bool,
    /// The id of the first op pushed since the fold began: a live op numbered below it was
    /// pushed by an earlier input (one a notebook's earlier cell let go), shown where it
    /// explains a wait but not counted among this input's ops.
    first_op: engine::OpId,
}

impl LiveFold {
    /// A fold of nothing yet, which reads `source`'s log from its start and keeps every event
    /// for the timeline under the view: a notebook cell's display.
    pub fn new(source: &LiveSource) -> LiveFold {
        // A live view takes snapshots: every op of the engine must be visible to them.
        source.monitor.expect_snapshots();
        LiveFold {
            replay: views::Replay::new(Vec::new(), source.monitor.worker_names()),
            next_seq: source.log.first_seq(),
            n_clears: source.log.n_clears(),
            touched: HashSet::new(),
            n_pushed: 0,
            unfinished: BTreeMap::new(),
            troubled: BTreeMap::new(),
            done: BTreeMap::new(),
            n_by_state: [0; STATES.len()],
            active: BTreeSet::new(),
            cancelled_in_queues: HashSet::new(),
            timeline: true,
            first_op: source.monitor.next_op_id(),
        }
    }

    /// A fold of nothing yet for a terminal's panel, which draws no timeline and so keeps only
    /// the records of the unfinished ops and of the finished ones it shows (its memory does not
    /// grow with the run's ops): it reads `source`'s log from the next event on (the REPL's panel starts one
    /// whenever the engine is idle), or is fed by the log's one streaming reader through
    /// [`LiveFold::push`] (`dep run --watch`, whose recorder forgets what it read).
    pub fn from_now(source: &LiveSource) -> LiveFold {
        let mut replay = views::Replay::ops_only(source.monitor.worker_names());
        // It draws the engine's live variables, never a deleted one.
        replay.forget_deleted_vars();
        LiveFold {
            replay,
            next_seq: source.log.next_seq(),
            timeline: false,
            ..LiveFold::new(source)
        }
    }

    /// Folds one event of the log, the next after those folded so far: what a reader that
    /// streams the log (and forgets what it read) feeds a fold with, instead of the fold
    /// reading the log itself ([`LiveFold::view`]).
    pub fn push(&mut self, event: engine::Event) {
        self.fold(event);
    }

    /// The input now: its ops from the event log, the live queues, states and what each
    /// waiting op waits behind from a snapshot. Reads the events that arrived since the last
    /// call; `finished` (the final state) first waits for every event numbered before this
    /// call.
    ///
    /// The snapshot is taken before the log is read, so the log is at least as new: an op
    /// gone from the snapshot has its end in the log (an op's end is logged before it leaves
    /// its queues), and no op shows as running after it ended.
    pub fn view(&mut self, source: &LiveSource, finished: bool) -> LiveView {
        let snapshot = source.monitor.snapshot();
        self.read(source, finished);
        self.draw_with(source, &snapshot, finished)
    }

    /// Says that the events fed through [`LiveFold::push`] are those numbered below
    /// `next_seq`: what [`LiveFold::folded_up_to`] then answers.
    pub fn fed_up_to(&mut self, next_seq: u64) {
        self.next_seq = next_seq;
    }

    /// The log's number of the first event this fold has not folded.
    pub fn folded_up_to(&self) -> u64 {
        self.next_seq
    }

    /// The input now from the events folded so far, without reading the log: the view of a
    /// fold fed through [`LiveFold::push`].
    pub fn draw(&mut self, source: &LiveSource, finished: bool) -> LiveView {
        let snapshot = source.monitor.snapshot();
        self.draw_with(source, &snapshot, finished)
    }

    /// [`LiveFold::draw`] with `snapshot`, taken by the caller: a fed fold's drawer takes it,
    /// then waits for the fold to hold every event logged before it (see [`LiveFold::view`]).
    pub fn draw_with(
        &mut self,
        source: &LiveSource,
        snapshot: &engine::Snapshot,
        finished: bool,
    ) -> LiveView {
        let worker_names = source.monitor.worker_names();
        let now_ns = source.monitor.now_ns();
        let live = views::Frame::from_snapshot(snapshot, &worker_names);
        let mut view = self.cell_view(
            &source.title,
            source.policy,
            (&live, &worker_names),
            now_ns,
            finished,
        );
        // Only the ops shown are named: a redraw's cost does not grow with the cell.
        view.frame.name_places(&source.places);
        if self.timeline {
            // While the cell runs, its timeline reaches now: a running op's bar grows with it
            // (also in a last display drawn while ops go on).
            self.replay.set_now((!view.about.ended).then_some(now_ns));
            // Its lanes are named as the rows name their workers: workers start on first use,
            // after the fold began (the first cell on a new engine).
            self.replay.set_worker_names(worker_names);
            view.timeline = self.timeline(source);
        }
        view
    }

    /// The Gantt chart of the cell so far (what has run, what runs, as Dask's task stream
    /// shows it; full labels in each bar's tooltip, dependency arrows while the pointer is over
    /// it), for a cell of at most [`MAX_TIMELINE_OPS`] ops.
    fn timeline(&mut self, source: &LiveSource) -> Option<String> {
        let n_ops = self.replay.ops().len();
        if n_ops == 0 || n_ops > MAX_TIMELINE_OPS {
            return None;
        }
        self.replay.name_places(&source.places);
        let options = views::svg::TimelineOptions {
            width_px: TIMELINE_PX,
            arrows: n_ops <= MAX_ARROW_OPS,
            simulated: source.policy == engine::Policy::Sim,
            span_ns: None,
            // Its tables count from the same first push as the axis.
            origin_note: false,
            of: None,
        };
        Some(views::svg::timeline(&self.replay, &options))
    }

    /// Folds the events that arrived since the last read; with `settle`, every event numbered
    /// before this call (a read stops short of one that is being appended, for a moment).
    fn read(&mut self, source: &LiveSource, settle: bool) {
        // The log was cleared under this fold, or its limit forgot events this fold had not read
        // (`EventLog::keeping_at_most`; a live display reads far more often than that): start
        // over with what it holds now.
        if source.log.n_clears() != self.n_clears || source.log.first_seq() > self.next_seq {
            let (timeline, first_op) = (self.timeline, self.first_op);
            *self = LiveFold::new(source);
            self.first_op = first_op;
            if !timeline {
                self.replay = views::Replay::ops_only(source.monitor.worker_names());
                self.timeline = false;
            }
        }
        let target = if settle { source.log.next_seq() } else { 0 };
        loop {
            let (events, next) = source.log.events_since(self.next_seq);
            self.next_seq = next;
            for event in events {
                self.fold(event);
            }
            if self.next_seq >= target {
                return;
            }
            thread::yield_now();
        }
    }

    fn fold(&mut self, event: engine::Event) {
        match event.kind {
            engine::EventKind::VarDeleted { var } => {
                // A deleted variable idle in no queue is gone from the engine's snapshot; one
                // that ops still use is shown for its busy queue.
                self.touched.remove(&var);
            }
            engine::EventKind::Cancelled { op } => {
                self.cancelled_in_queues.insert(op);
            }
            engine::EventKind::Finished { op, .. } => {
                self.cancelled_in_queues.remove(&op);
            }
            _ => {}
        }
        let Some(position) = self.replay.push_event(event) else {
            return;
        };
        let Some(record) = self.replay.op_at(position) else {
            return;
        };
        let state = record.state;
        if position == self.n_pushed {
            // A push.
            self.touched
                .extend(record.reads.iter().chain(&record.writes).copied());
            self.n_pushed += 1;
            self.unfinished.insert(position, state);
            mark_active(&mut self.active, position, state);
            self.n_by_state[state_index(state)] += 1;
            if self.timeline && self.n_pushed > MAX_TIMELINE_OPS {
                // Too many ops for a timeline: keep no more events than a terminal's panel.
                self.replay.stop_keeping_events();
                self.timeline = false;
            }
            return;
        }
        // An op that finished keeps its state.
        let Some(&old) = self.unfinished.get(&position) else {
            return;
        };
        if old == state {
            return;
        }
        self.n_by_state[state_index(old)] -= 1;
        self.n_by_state[state_index(state)] += 1;
        mark_active(&mut self.active, position, state);
        if !state.is_finished() {
            self.unfinished.insert(position, state);
            return;
        }
        self.unfinished.remove(&position);
        if state == engine::OpState::Done {
            self.done.insert(position, record.clone());
            if self.done.len() > MAX_OP_ROWS {
                self.done.pop_first();
            }
        } else if self.troubled.len() < MAX_OP_ROWS {
            // Positions come in push order but ops finish out of it: keep the first ones.
            self.troubled.insert(position, record.clone());
        } else if self
            .troubled
            .last_key_value()
            .is_some_and(|(last, _)| *last > position)
        {
            self.troubled.insert(position, record.clone());
            self.troubled.pop_last();
        }
        if !self.timeline {
            self.replay.forget_finished();
        }
    }

    /// The positions of the ops a display of more than [`MAX_OP_ROWS`] ops lists, in push
    /// order: the running ops, then the ready ones, then the other unfinished ones in push
    /// order, then the failed, skipped or cancelled ones, then the latest done ones. `further`
    /// are the log's unfinished ops the snapshot shows further along, and `live_only` the live
    /// ops the log has not shown yet (at positions from `n_log` on).
    fn chosen_rows(
        &self,
        n_log: usize,
        live_only: &[&views::FrameOp],
        further: &HashMap<usize, engine::OpState>,
    ) -> Vec<usize> {
        let shown_state = |position: usize, log_state: engine::OpState| {
            further.get(&position).copied().unwrap_or(log_state)
        };
        let live_only = live_only
            .iter()
            .enumerate()
            .map(|(index, op)| (n_log + index, op.state));
        // Every unfinished op, in the state shown: the log's, updated by the snapshot's.
        let unfinished = self
            .unfinished
            .iter()
            .map(|(&position, &state)| (position, shown_state(position, state)))
            .filter(|(_, state)| !state.is_finished())
            .chain(live_only.clone().filter(|(_, state)| !state.is_finished()));
        let active = self
            .active
            .iter()
            .map(|&position| (position, shown_state(position, self.unfinished[&position])))
            .chain(further.iter().map(|(&position, &state)| (position, state)))
            .chain(live_only.clone());
        let mut chosen: Vec<usize> = Vec::with_capacity(MAX_OP_ROWS);
        let mut choose = |position: usize| {
            if chosen.len() < MAX_OP_ROWS && !chosen.contains(&position) {
                chosen.push(position);
            }
        };
        for wanted in [engine::OpState::Running, engine::OpState::Ready] {
            for (position, _) in active.clone().filter(|(_, state)| *state == wanted) {
                choose(position);
            }
        }
        for (position, _) in unfinished.take(2 * MAX_OP_ROWS) {
            choose(position);
        }
        // The finished ops the log has not seen finish, and the live-only ones.
        let shown_finished = further
            .iter()
            .map(|(&position, &state)| (position, state))
            .chain(live_only)
            .filter(|(_, state)| state.is_finished());
        let mut troubled: Vec<usize> = self
            .troubled
            .keys()
            .take(MAX_OP_ROWS)
            .copied()
            .chain(
                shown_finished
                    .clone()
                    .filter(|(_, state)| *state != engine::OpState::Done)
                    .map(|(position, _)| position),
            )
            .collect();
        troubled.sort_unstable();
        let mut latest_done: Vec<usize> = self
            .done
            .keys()
            .rev()
            .take(MAX_OP_ROWS)
            .copied()
            .chain(
                shown_finished
                    .filter(|(_, state)| *state == engine::OpState::Done)
                    .map(|(position, _)| position),
            )
            .collect();
        latest_done.sort_unstable_by(|a, b| b.cmp(a));
        for position in troubled.into_iter().chain(latest_done) {
            choose(position);
        }
        chosen.sort_unstable();
        chosen
    }

    /// Brings the snapshot's queues of `vars` up to the log where the log is newer: an access
    /// of an op the log saw finish is left out (its end is logged before it leaves its queues),
    /// and an access of an op shown ready or running is granted; in the first
    /// 2 × [`MAX_QUEUE_NAMES`] entries of each queue.
    fn bring_queues_up_to_the_log(
        &self,
        vars: &mut [views::FrameVar],
        further: &HashMap<usize, engine::OpState>,
        live_only: &[&views::FrameOp],
    ) {
        let replay = &self.replay;
        let live_state: HashMap<engine::OpId, engine::OpState> =
            live_only.iter().map(|op| (op.id, op.state)).collect();
        let finished_in_log = |id: engine::OpId| {
            !self.cancelled_in_queues.contains(&id)
                && (replay.forgot(id)
                    || replay
                        .op_position(id)
                        .is_some_and(|position| !self.unfinished.contains_key(&position)))
        };
        let active = |id: engine::OpId| {
            let state = match replay.op_position(id) {
                Some(position) => further
                    .get(&position)
                    .or_else(|| self.unfinished.get(&position))
                    .copied(),
                None => live_state.get(&id).copied(),
            };
            matches!(
                state,
                Some(engine::OpState::Ready | engine::OpState::Running)
            )
        };
        // Only the head of each queue, which a display names entry by entry: a redraw's cost
        // does not grow with a long queue's tail, which is only counted.
        for var in vars {
            let head = var.queue.len().min(2 * MAX_QUEUE_NAMES);
            let mut settled: Vec<engine::AccessSnapshot> = var
                .queue
                .drain(..head)
                .filter(|access| !finished_in_log(access.op))
                .collect();
            for access in &mut settled {
                access.granted |= active(access.op);
            }
            var.queue.splice(0..0, settled);
        }
    }

    /// `live` is a snapshot's frame and the engine's worker names now (worker groups start on
    /// first use, after this fold began).
    fn cell_view(
        &self,
        title: &str,
        policy: engine::Policy,
        (live, worker_names): (&views::Frame, &[String]),
        now_ns: u64,
        finished: bool,
    ) -> LiveView {
        let replay = &self.replay;
        // The ops the log pushed; a terminal's fold no longer holds the records of the finished
        // ones it does not show.
        let n_log = self.n_pushed;
        let time_range = replay.time_range();
        let first_ns = time_range.map_or(now_ns, |(first, _)| first);
        let since_first = |ns: u64| ns.saturating_sub(first_ns);
        // Every op of the cell is an op of the log, shown in the state furthest along of the
        // log's and the snapshot's (either may be the newer for an op: the snapshot is taken
        // first, but the log is read only as far as its events are appended), or a live op the
        // log has not shown yet, after those: position `n_log + i` is `live_only[i]`. One pass
        // over the live ops (the unfinished ones) says which are which, and how the states
        // shown differ from the log's. An op the log saw finish and forgot is counted already.
        let mut n_by_state = self.n_by_state;
        let mut live_only: Vec<&views::FrameOp> = Vec::new();
        // Of those, the ops of earlier inputs (shown, not counted as this input's).
        let mut earlier: HashSet<engine::OpId> = HashSet::new();
        // The log's unfinished ops that the snapshot shows further along, with that state.
        let mut further: HashMap<usize, engine::OpState> = HashMap::new();
        for op in &live.ops {
            match replay.op_position(op.id) {
                None if replay.forgot(op.id) => {}
                None => {
                    if op.id < self.first_op {
                        earlier.insert(op.id);
                    } else {
                        n_by_state[state_index(op.state)] += 1;
                    }
                    live_only.push(op);
                }
                Some(position) => {
                    let Some(&state) = self.unfinished.get(&position) else {
                        continue;
                    };
                    if progress(op.state) > progress(state) {
                        n_by_state[state_index(state)] -= 1;
                        n_by_state[state_index(op.state)] += 1;
                        further.insert(position, op.state);
                    }
                }
            }
        }
        let n_ops = n_log + live_only.len();
        // The time a display is drawn at: the clock's while an op is unfinished, else the
        // log's last event, so that a display drawn while the interpreter works on after its
        // ops ended does not count that time, and the cell's last display ("in all") never says
        // less than one before it ("so far"). A last display drawn while ops go on (a cell that
        // stopped waiting for them) is drawn at the clock too: its running ops have run until
        // now, not until the last event.
        let all_ended = STATES
            .into_iter()
            .zip(n_by_state)
            .all(|(state, count)| count == 0 || state.is_finished());
        let last_ns = match time_range {
            Some((_, last)) if all_ended => last,
            None if finished => first_ns,
            _ => now_ns,
        };
        let counts: Vec<(engine::OpState, usize)> = STATES
            .into_iter()
            .zip(n_by_state)
            .filter(|(_, count)| *count > 0)
            .collect();
        // The snapshot's op, by id: its ops are in push order (by id), or else looked up by map.
        let by_id: Option<HashMap<engine::OpId, &views::FrameOp>> =
            (!live.ops.is_sorted_by_key(|op| op.id))
                .then(|| live.ops.iter().map(|op| (op.id, op)).collect());
        let live_op = |id: engine::OpId| match &by_id {
            Some(by_id) => by_id.get(&id).copied(),
            None => live
                .ops
                .binary_search_by_key(&id, |op| op.id)
                .ok()
                .map(|index| &live.ops[index]),
        };
        let chosen: Vec<usize> = if n_ops <= MAX_OP_ROWS {
            (0..n_ops).collect()
        } else {
            self.chosen_rows(n_log, &live_only, &further)
        };
        // An op's row, at its position: the log's record with the snapshot's live state and
        // reasons for waiting, or a live-only op as the snapshot shows it.
        let row = |position: usize| {
            let record = replay
                .op_at(position)
                .or_else(|| self.done.get(&position))
                .or_else(|| self.troubled.get(&position));
            let mut op = match record {
                Some(record) => {
                    let worker = record.worker.map(|worker| {
                        worker_names
                            .get(worker as usize)
                            .cloned()
                            .unwrap_or_else(|| replay.worker_name(worker))
                    });
                    let shown_live = (!record.state.is_finished())
                        .then(|| live_op(record.id))
                        .flatten();
                    row_of(record, shown_live, worker)
                }
                // A live-only op (every op of the log chosen has a record).
                None => (*live_only.get(position.checked_sub(n_log)?)?).clone(),
            };
            op.started_ns = op.started_ns.map(since_first);
            op.finished_ns = op.finished_ns.map(since_first);
            Some(op)
        };
        let ops: Vec<views::FrameOp> = chosen
            .iter()
            .filter_map(|&position| row(position))
            .collect();
        let n_hidden = n_ops - ops.len();
        let about = About {
            title: title.to_string(),
            policy,
            elapsed_ns: last_ns.saturating_sub(first_ns),
            ended: finished && all_ended,
            n_earlier: earlier.len(),
        };
        // The rows of this input's own ops, which the heading's counts count.
        let n_own_shown = ops.iter().filter(|op| !earlier.contains(&op.id)).count();
        let heading = heading(&about, &counts, n_own_shown);

        // The variables the cell's ops access, and the busy ones (which include every variable
        // a live op waits on: its waiting access is in that variable's queue).
        let (mut vars, n_vars_hidden) = shown_vars(live, &self.touched);
        self.bring_queues_up_to_the_log(&mut vars, &further, &live_only);
        let mut frame = views::Frame {
            time_ns: since_first(last_ns),
            vars,
            ops,
            named: Vec::new(),
        };
        // The ops the queues shown and the reasons for waiting name, beyond the rows.
        let position_of = |id: engine::OpId| {
            replay.op_position(id).or_else(|| {
                live_only
                    .iter()
                    .position(|op| op.id == id)
                    .map(|index| n_log + index)
            })
        };
        let mut named: Vec<views::FrameOp> = Vec::new();
        for id in named_ops(&frame) {
            if frame.op(id).is_none() && named.iter().all(|op| op.id != id) {
                named.extend(position_of(id).and_then(row));
            }
        }
        frame.named = named;
        LiveView {
            heading,
            frame,
            counts,
            n_hidden,
            n_vars_hidden,
            timeline: None,
            about,
        }
    }
}

impl LiveView {
    /// How many of the cell's ops are in `state`.
    pub fn count(&self, state: engine::OpState) -> usize {
        self.counts
            .iter()
            .find(|(candidate, _)| *candidate == state)
            .map_or(0, |(_, count)| *count)
    }

    /// How many of the cell's ops have not finished (wait, are ready or run).
    pub fn n_unfinished(&self) -> usize {
        self.counts
            .iter()
            .filter(|(state, _)| !state.is_finished())
            .map(|(_, count)| count)
            .sum()
    }

    /// How many ops the input has pushed.
    pub fn n_ops(&self) -> usize {
        self.counts.iter().map(|(_, count)| count).sum()
    }

    /// The display's HTML: the heading, the note, the queues and ops of `views::html`, then the
    /// timeline so far.
    pub fn html(&self, note: Option<&str>) -> String {
        // The text says so under its queues; the tables say so in the heading.
        let heading = match self.n_vars_hidden {
            0 => self.heading.clone(),
            n => format!(
                "{} · {} not shown",
                self.heading,
                views::text::count(n, "more variable")
            ),
        };
        let mut html = views::html::fragment_with_heading(&self.frame, &heading, note);
        if let Some(svg) = &self.timeline {
            html.push_str("<div class=\"dep-timeline\" style=\"overflow-x:auto\">");
            html.push_str(TIMELINE_STYLE);
            html.push_str(svg);
            html.push_str("</div>\n");
        }
        html
    }

    /// The display's text/plain fallback (the kernel's): [`LiveView::text_with`], 100 columns
    /// without colour, the queues of every variable shown when one is busy, then the ops.
    pub fn text(&self, note: Option<&str>) -> String {
        self.text_with(
            note,
            &TextLayout {
                style: views::TextStyle::plain(TEXT_WIDTH),
                idle_queues: true,
                ops: true,
                finished_ops: true,
                max_lines: usize::MAX,
            },
        )
    }

    /// The view as text, the one text renderer of every live display (the kernel's fallback,
    /// the REPL's panel, `dep run --watch`): the heading (cut to the width), the note, the
    /// queues of `views::text` when a variable is busy, and the ops when `layout` asks for them,
    /// in at most `layout.max_lines` lines.
    pub fn text_with(&self, note: Option<&str>, layout: &TextLayout) -> String {
        let style = &layout.style;
        // The heading's line first, written once the rows shown are known.
        let mut lines: Vec<String> = vec![String::new()];
        lines.extend(note.into_iter().flat_map(str::lines).map(str::to_string));
        if self.frame.vars.iter().any(|var| !var.queue.is_empty()) {
            let queues = if layout.idle_queues {
                views::text::queues(&self.frame, style)
            } else {
                let busy = views::Frame {
                    vars: self
                        .frame
                        .vars
                        .iter()
                        .filter(|var| !var.queue.is_empty())
                        .cloned()
                        .collect(),
                    ..self.frame.clone()
                };
                views::text::queues(&busy, style)
            };
            let mut queue_lines: Vec<String> = queues.lines().map(str::to_string).collect();
            // Room is kept for the ops: the queues take at most half of it.
            let room = (layout.max_lines / 2).max(3);
            if layout.ops && queue_lines.len() > room {
                let n_cut = queue_lines.len() - (room - 1);
                queue_lines.truncate(room - 1);
                let n_cut = n_cut + self.n_vars_hidden;
                queue_lines.push(format!("  … and {n_cut} more queues"));
            } else if self.n_vars_hidden > 0 {
                queue_lines.push(format!("  … and {} more variables", self.n_vars_hidden));
            }
            lines.extend(queue_lines);
        }
        let room = layout.max_lines.saturating_sub(lines.len());
        // The table's last line counts the ops it leaves out, so the heading need not.
        let heading = if layout.ops {
            lines.extend(self.ops_that_fit(room, style, layout.finished_ops));
            heading(&self.about, &self.counts, usize::MAX)
        } else {
            self.heading.clone()
        };
        lines[0] = crate::util::fit_heading(&heading, style.columns());
        if lines.len() > layout.max_lines {
            let n_kept = layout.max_lines.saturating_sub(1).max(1);
            let n_left = lines.len() - n_kept;
            lines.truncate(n_kept);
            lines.push(views::color::paint(
                &format!("  … and {n_left} more lines"),
                views::color::Role::Dim,
                style.color,
            ));
        }
        let mut text = lines.join("\n");
        text.push('\n');
        text
    }

    /// The ops table's lines within `room` lines: every op of the frame (`finished`), or its
    /// unfinished ones, the running first, then the ready, then those that wait (each in push
    /// order), so that a cut leaves out no op that runs; as many as fit, each with its
    /// why-lines, then a line counting the input's ops (or unfinished ones) left out.
    fn ops_that_fit(&self, room: usize, style: &views::TextStyle, finished: bool) -> Vec<String> {
        // The ops listed, in order, and those the table only names (an op waiting behind a
        // cancelled one names it by its label).
        let (mut listed, named): (Vec<views::FrameOp>, Vec<views::FrameOp>) = self
            .frame
            .ops
            .iter()
            .cloned()
            .partition(|op| finished || self.frame.holds_a_place(op));
        if !finished {
            listed.sort_by_key(|op| match op.state {
                engine::OpState::Running => 0,
                engine::OpState::Ready => 1,
                _ => 2,
            });
        }
        // Those of the input the frame has no row for.
        let n_more_beyond = match finished {
            true => self.n_hidden,
            false => self.n_unfinished().saturating_sub(listed.len()),
        };
        let table = |n: usize| {
            let frame = views::Frame {
                ops: listed[..n].iter().chain(&named).cloned().collect(),
                ..self.frame.clone()
            };
            let text = if finished {
                views::text::ops(&frame, style)
            } else {
                views::text::unfinished_ops(&frame, style)
            };
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            let n_left = listed.len() - n + n_more_beyond;
            if n_left > 0 {
                lines.push(format!("  … and {}", views::text::count(n_left, "more op")));
            }
            lines
        };
        let mut n = listed.len();
        let mut lines = table(n);
        while lines.len() > room && n > 0 {
            n -= 1;
            lines = table(n);
        }
        lines
    }

    /// Shows the ops of `cancelled` that still wait or are ready as cancelled, and counts them
    /// so: the engine drops a cancelled op only when its turn comes, and the REPL's panel shows
    /// what its Ctrl-C did at once.
    pub fn show_cancelled(&mut self, cancelled: &HashSet<engine::OpId>) {
        let mut n_by_state = [0; STATES.len()];
        for (state, count) in &self.counts {
            n_by_state[state_index(*state)] = *count;
        }
        for op in self.frame.ops.iter_mut() {
            if cancelled.contains(&op.id)
                && matches!(op.state, engine::OpState::Waiting | engine::OpState::Ready)
            {
                n_by_state[state_index(op.state)] -= 1;
                n_by_state[state_index(engine::OpState::Cancelled)] += 1;
                op.state = engine::OpState::Cancelled;
                op.waits_on.clear();
            }
        }
        self.counts = STATES
            .into_iter()
            .zip(n_by_state)
            .filter(|(_, count)| *count > 0)
            .collect();
        self.heading = heading(&self.about, &self.counts, self.frame.ops.len());
    }
}

/// Keeps `active` (a fold's ready and running ops, by position) up to date with the op at
/// `position` now in `state`.
fn mark_active(active: &mut BTreeSet<usize>, position: usize, state: engine::OpState) {
    if matches!(state, engine::OpState::Ready | engine::OpState::Running) {
        active.insert(position);
    } else {
        active.remove(&position);
    }
}

/// How far along an op in `state` is: of two states seen for one op, the one further along is
/// the newer.
fn progress(state: engine::OpState) -> u8 {
    match state {
        engine::OpState::Waiting => 0,
        engine::OpState::Ready => 1,
        engine::OpState::Running => 2,
        _ => 3,
    }
}

/// How many entries of each queue a display may name (the HTML shows this many, a terminal as
/// many as fit).
const MAX_QUEUE_NAMES: usize = 12;

/// The ops `frame`'s queues (their first [`MAX_QUEUE_NAMES`] entries) and its ops' reasons for
/// waiting name.
fn named_ops(frame: &views::Frame) -> Vec<engine::OpId> {
    let queued = frame
        .vars
        .iter()
        .flat_map(|var| var.queue.iter().take(MAX_QUEUE_NAMES))
        .map(|access| access.op);
    let blockers = frame
        .ops
        .iter()
        .flat_map(|op| &op.waits_on)
        .map(|blocker| blocker.behind);
    queued.chain(blockers).collect()
}

/// An op's row: the snapshot's live state (and what it waits behind) while it has not
/// finished, else the log's record; `worker` names the worker the log saw. Where the log saw
/// the op further along than the snapshot (it started after the snapshot was taken), the
/// log's state.
fn row_of(
    record: &views::OpRecord,
    live_op: Option<&views::FrameOp>,
    worker: Option<String>,
) -> views::FrameOp {
    match live_op {
        Some(live_op) if progress(record.state) > progress(live_op.state) => views::FrameOp {
            worker: live_op.worker.clone().or(worker),
            started_ns: record.started_ns,
            state: record.state,
            waits_on: Vec::new(),
            ..live_op.clone()
        },
        Some(live_op) => views::FrameOp {
            worker: live_op.worker.clone().or(worker),
            started_ns: record.started_ns,
            ..live_op.clone()
        },
        None => views::FrameOp {
            id: record.id,
            label: record.label.clone(),
            line: record.line,
            place: record.place.clone(),
            state: record.state,
            device: record.device,
            worker,
            started_ns: record.started_ns,
            finished_ns: record.finished_ns,
            waits_on: Vec::new(),
        },
    }
}

/// `cell[3] · threaded engine · 40 ops: 2 running, 38 done · 1.20 s so far · showing 24 of 40
/// ops`: the one first line of every live display, the kernel's and the terminal's panels.
fn heading(about: &About, counts: &[(engine::OpState, usize)], n_shown: usize) -> String {
    let n_ops: usize = counts.iter().map(|(_, count)| count).sum();
    let mut heading = format!(
        "{} · {} engine · {n_ops} op{}",
        about.title,
        about.policy.name(),
        if n_ops == 1 { "" } else { "s" }
    );
    if !counts.is_empty() {
        let parts: Vec<String> = counts
            .iter()
            .map(|(state, count)| format!("{count} {}", state.name()))
            .collect();
        heading.push_str(&format!(": {}", parts.join(", ")));
    }
    heading.push_str(&format!(
        " · {} {}",
        views::format_ns(about.elapsed_ns),
        if about.ended { "in all" } else { "so far" }
    ));
    if about.n_earlier > 0 {
        heading.push_str(&format!(
            " · {} of earlier inputs",
            views::text::count(about.n_earlier, "unfinished op")
        ));
    }
    if n_shown < n_ops {
        heading.push_str(&format!(" · showing {n_shown} of {n_ops} ops"));
    }
    heading
}

/// The variables a display shows: those the cell's ops touch and every busy one (which includes
/// each variable a live op waits on), at most `MAX_VAR_ROWS`: the busy ones in creation order,
/// then as many idle ones as fit; and how many it leaves out.
fn shown_vars(
    live: &views::Frame,
    touched: &HashSet<engine::VarId>,
) -> (Vec<views::FrameVar>, usize) {
    let mut vars: Vec<views::FrameVar> = live
        .vars
        .iter()
        .filter(|var| touched.contains(&var.id) || !var.queue.is_empty())
        .cloned()
        .collect();
    let n_wanted = vars.len();
    if vars.len() > MAX_VAR_ROWS {
        let n_busy = vars.iter().filter(|var| !var.queue.is_empty()).count();
        let mut n_idle_room = MAX_VAR_ROWS.saturating_sub(n_busy);
        vars.retain(|var| {
            if !var.queue.is_empty() {
                return true;
            }
            let keep = n_idle_room > 0;
            n_idle_room = n_idle_room.saturating_sub(1);
            keep
        });
        vars.truncate(MAX_VAR_ROWS);
    }
    let n_left_out = n_wanted - vars.len();
    (vars, n_left_out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A finished run of `n` ops on a naive engine: `A = 1`, then `A = A + 1` again and again.
    fn finished_view(n: usize) -> LiveView {
        let (source, _engine, _a) = finished_chain(n);
        source.view(true)
    }

    /// A naive engine that ran `A = 1` then `n - 1` ops `A = A + 1`, one a line, and the source
    /// of its cell (the engine and `A` are returned to keep them alive).
    fn finished_chain(n: usize) -> (LiveSource, engine::Engine, engine::Var) {
        let log = Arc::new(engine::EventLog::new());
        let engine = engine::Engine::new(engine::EngineConfig {
            policy: engine::Policy::Naive,
            sink: Some(log.clone()),
            ..engine::EngineConfig::default()
        });
        let a = engine.new_var("A");
        engine.push(
            engine::OpSpec::new("A = 1", || Ok(()))
                .writes(&[a.clone()])
                .line(1),
        );
        for line in 2..=n as u32 {
            engine.push(
                engine::OpSpec::new("A = A + 1", || Ok(()))
                    .writes(&[a.clone()])
                    .line(line),
            );
        }
        engine.wait_all();
        let source = LiveSource {
            title: "cell[1]".to_string(),
            policy: engine::Policy::Naive,
            monitor: engine.monitor(),
            log,
            places: views::Places::default(),
        };
        (source, engine, a)
    }

    /// A cell grown past the timeline's ops stops keeping events: its fold then holds about as
    /// much as a terminal panel's, while its counts still cover every op.
    #[test]
    fn a_long_cell_stops_keeping_events_and_still_counts_every_op() {
        let n = 3 * MAX_TIMELINE_OPS;
        let (source, _engine, _a) = finished_chain(n);
        let mut fold = LiveFold::new(&source);
        let view = fold.view(&source, true);
        assert!(!fold.timeline && fold.replay.events().is_empty());
        assert!(view.timeline.is_none());
        assert!(
            fold.replay.ops().len() < n / 2,
            "{} records kept",
            fold.replay.ops().len()
        );
        assert!(
            view.heading.contains(&format!("{n} ops")),
            "{}",
            view.heading
        );
    }

    /// Under the per-device engine, worker groups start with their first op, after the cell's
    /// fold began: rows still name the workers.
    #[test]
    fn workers_started_after_the_fold_began_are_named() {
        let log = Arc::new(engine::EventLog::new());
        let engine = engine::Engine::new(engine::EngineConfig {
            policy: engine::Policy::PerDevice,
            sink: Some(log.clone()),
            ..engine::EngineConfig::default()
        });
        let source = LiveSource {
            title: "cell[1]".to_string(),
            policy: engine::Policy::PerDevice,
            monitor: engine.monitor(),
            log,
            places: views::Places::default(),
        };
        let mut fold = LiveFold::new(&source);
        let x = engine.new_var("X");
        engine.push(
            engine::OpSpec::new("X = copy", || Ok(()))
                .writes(&[x.clone()])
                .device(engine::Device::Copy)
                .line(1),
        );
        engine.wait_all();
        let view = fold.view(&source, true);
        let row = view
            .frame
            .ops
            .iter()
            .find(|op| &*op.label == "X = copy")
            .unwrap();
        assert_eq!(row.worker.as_deref(), Some("copy:0"));
        // The timeline under the tables names its lane so too, not `worker 0`.
        let timeline = view.timeline.as_deref().unwrap_or_default();
        assert!(timeline.contains(">copy:0</text>"), "{timeline}");
        assert!(!timeline.contains("worker 0"), "{timeline}");
    }

    /// `print A + 1` pushes a temporary's value, waits for it and deletes it: the cell shows
    /// and counts the statements, not the bookkeeping (`wait _#1`, `del _#1`).
    #[test]
    fn a_cell_neither_shows_nor_counts_the_bookkeeping_of_temporaries() {
        let log = Arc::new(engine::EventLog::new());
        let engine = engine::Engine::new(engine::EngineConfig {
            policy: engine::Policy::Threaded,
            threads: 2,
            sink: Some(log.clone()),
            ..engine::EngineConfig::default()
        });
        let a = engine.new_var("A");
        let temporary = engine.new_var("_#1");
        engine.push(
            engine::OpSpec::new("A = 1", || Ok(()))
                .writes(&[a.clone()])
                .line(1),
        );
        engine.push(
            engine::OpSpec::new("A + 1", || Ok(()))
                .reads(&[a])
                .writes(&[temporary.clone()])
                .line(2),
        );
        engine.wait_var(&temporary, 0).unwrap();
        engine.delete_var(temporary, 0, || ());
        engine.wait_all();
        let view = LiveSource {
            title: "cell[1]".to_string(),
            policy: engine::Policy::Threaded,
            monitor: engine.monitor(),
            log,
            places: views::Places::default(),
        }
        .view(true);
        assert!(
            view.heading
                .starts_with("cell[1] · threaded engine · 2 ops: 2 done · "),
            "{}",
            view.heading
        );
        let text = view.text(None);
        assert!(!text.contains("_#1"), "{text}");
        assert!(!view.html(None).contains("_#1"));
    }

    /// A display drawn after every op ended, while the interpreter works on (a host statement,
    /// a `print`), counts the time up to the last event, not up to the clock: the cell's last
    /// display never says less than one before it.
    #[test]
    fn a_display_after_every_op_ended_counts_no_more_time_than_the_last_display() {
        let (source, _engine, _a) = finished_chain(3);
        let elapsed = |view: &LiveView| {
            let (_, time) = view.heading.rsplit_once(" · ").unwrap();
            time.to_string()
        };
        let mut fold = LiveFold::new(&source);
        let during = fold.view(&source, false);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let later = fold.view(&source, false);
        let last = fold.view(&source, true);
        assert!(during.heading.ends_with(" so far"), "{}", during.heading);
        assert_eq!(
            elapsed(&during).replace(" so far", ""),
            elapsed(&last).replace(" in all", ""),
            "{} / {}",
            during.heading,
            last.heading
        );
        assert_eq!(elapsed(&later), elapsed(&during));
    }

    #[test]
    fn a_finished_cell_shows_its_ops_under_a_heading() {
        let view = finished_view(2);
        assert!(
            view.heading
                .starts_with("cell[1] · naive engine · 2 ops: 2 done · "),
            "{}",
            view.heading
        );
        assert!(view.heading.ends_with(" in all"), "{}", view.heading);
        let text = view.text(Some("interrupted"));
        assert!(text.starts_with(&format!("{}\ninterrupted\n", view.heading)));
        assert!(text.contains("A = A + 1"), "{text}");
        // No queue is busy: the text leaves the queues out, the HTML shows A idle.
        assert!(!text.contains("queues"), "{text}");
        let html = view.html(None);
        assert!(
            html.contains("dep-view") && html.contains("A = A + 1"),
            "{html}"
        );
        assert!(html.contains("<td>A</td><td><span class=\"dep-dim\">idle</span>"));
    }

    #[test]
    fn a_cell_of_up_to_a_thousand_ops_shows_its_timeline_under_the_tables() {
        let html = finished_view(3).html(None);
        let timeline = html
            .find("<div class=\"dep-timeline\"")
            .expect("a timeline");
        assert!(html[timeline..].contains("<svg") && html[timeline..].contains("A = A + 1"));
        // Its times count from the first push, as the tables' do: no other clock named.
        assert!(!html.contains("from the first push"), "{html}");
        // Its dependency arrows show while the pointer is over it.
        assert!(html[timeline..].contains("class=\"dep-arrow\""));
        assert!(html.contains(".dep-timeline:hover .dep-arrow { opacity: 1; }"));
        assert!(timeline > html.find("dep-ops").unwrap(), "under the tables");
        let long = finished_view(MAX_TIMELINE_OPS + 1).html(None);
        assert!(!long.contains("dep-timeline"));
    }

    #[test]
    fn a_long_cell_shows_its_latest_ops_and_says_how_many_are_left_out() {
        let view = finished_view(30);
        assert_eq!(view.count(engine::OpState::Done), 30);
        assert_eq!(view.frame.ops.len(), MAX_OP_ROWS);
        assert_eq!(view.frame.ops.last().map(|op| op.line), Some(30));
        assert!(
            view.heading.contains("showing 24 of 30 ops"),
            "{}",
            view.heading
        );
        assert!(view.text(None).ends_with("  … and 6 more ops\n"));
        // A panel listing only unfinished ops lists none of these 30 done ones, and leaves
        // none out: its heading does not say it shows 24 of them.
        let panel = TextLayout {
            style: views::TextStyle::plain(100),
            idle_queues: false,
            ops: true,
            finished_ops: false,
            max_lines: 16,
        };
        let heading = view.text_with(None, &panel);
        let heading = heading.lines().next().unwrap();
        assert!(!heading.contains("showing"), "{heading}");
        assert!(heading.contains("30 ops: 30 done"), "{heading}");
    }

    /// A fold fed by a reader that streams the log and forgets what it read (`dep run`'s
    /// recorder feeding `--watch`) draws what a fold that reads the log itself (the kernel's
    /// display) draws, batch after batch, though the log holds nothing by then.
    /// Hands every event to two logs.
    struct Tee(Arc<engine::EventLog>, Arc<engine::EventLog>);

    impl engine::EventSink for Tee {
        fn event(&self, event: engine::Event) {
            engine::EventSink::event(&*self.0, event.clone());
            engine::EventSink::event(&*self.1, event);
        }
    }

    #[test]
    fn a_fold_fed_by_a_streaming_reader_draws_what_a_fold_reading_the_log_draws() {
        // Two logs of the same run: one a reader streams and forgets, one a fold reads.
        let (streamed, kept) = (
            Arc::new(engine::EventLog::new()),
            Arc::new(engine::EventLog::new()),
        );
        let engine = engine::Engine::new(engine::EngineConfig {
            policy: engine::Policy::Threaded,
            threads: 2,
            sink: Some(Arc::new(Tee(streamed.clone(), kept.clone()))),
            ..engine::EngineConfig::default()
        });
        let source = LiveSource {
            title: "run.dep".to_string(),
            policy: engine::Policy::Threaded,
            monitor: engine.monitor(),
            log: kept,
            places: views::Places::default(),
        };
        let gated: Vec<engine::Var> = (0..4).map(|i| engine.new_var(format!("g{i}"))).collect();
        let gate = Arc::new(std::sync::Barrier::new(2));
        let opener = gate.clone();
        engine.push(
            engine::OpSpec::new("gate", move || {
                opener.wait();
                Ok(())
            })
            .writes(&gated),
        );
        let mut gate = OpenOnDrop(Some(gate));
        let free: Vec<engine::Var> = (0..5).map(|i| engine.new_var(format!("f{i}"))).collect();
        let mut reading = LiveFold::new(&source);
        let mut fed = LiveFold::from_now(&source);
        let mut next = streamed.first_seq();
        let mut stream = |fed: &mut LiveFold| {
            next = streamed.read_since(next, |event| fed.push(event.clone()));
            streamed.forget_before(next);
            assert_eq!(streamed.unread(), 0);
        };
        // Both drawn with one snapshot and one clock.
        let same = |reading: &mut LiveFold, fed: &LiveFold, finished: bool| {
            reading.read(&source, true);
            let worker_names = source.monitor.worker_names();
            let live = views::Frame::from_snapshot(&source.monitor.snapshot(), &worker_names);
            let now_ns = source.monitor.now_ns();
            let draw = |fold: &LiveFold| {
                fold.cell_view(
                    &source.title,
                    source.policy,
                    (&live, &worker_names),
                    now_ns,
                    finished,
                )
            };
            let (expected, drawn) = (draw(reading), draw(fed));
            assert_eq!(drawn.heading, expected.heading);
            assert_eq!(drawn.counts, expected.counts);
            assert_eq!(drawn.frame, expected.frame);
            assert_eq!(drawn.text(None), expected.text(None));
            drawn
        };
        let mut n_unfinished = 1 + push_mixed(&engine, &gated, &free, 1, 20);
        settle(&engine, n_unfinished);
        stream(&mut fed);
        let view = same(&mut reading, &fed, false);
        assert!(view.count(engine::OpState::Waiting) > 0, "{}", view.heading);
        assert!(view.count(engine::OpState::Done) > 0, "{}", view.heading);
        n_unfinished += push_mixed(&engine, &gated, &free, 21, 30);
        settle(&engine, n_unfinished);
        stream(&mut fed);
        same(&mut reading, &fed, false);
        gate.open();
        engine.wait_all();
        settle(&engine, 0);
        stream(&mut fed);
        let view = same(&mut reading, &fed, true);
        assert_eq!(view.n_ops(), 51);
        assert_eq!(
            view.count(engine::OpState::Running) + view.count(engine::OpState::Waiting),
            0,
            "{}",
            view.heading
        );
        // The fed fold keeps op records, not the events: it draws no timeline.
        assert!(fed.replay.events().is_empty());
        assert!(!fed.draw(&source, true).html(None).contains("dep-timeline"));
        assert!(reading
            .view(&source, true)
            .html(None)
            .contains("dep-timeline"));
    }

    /// A threaded engine of two workers whose events go to a log, and the source of a display
    /// titled `title` that reads that log.
    fn logged_threaded_source(title: &str) -> (engine::Engine, LiveSource) {
        let log = Arc::new(engine::EventLog::new());
        let engine = engine::Engine::new(engine::EngineConfig {
            policy: engine::Policy::Threaded,
            threads: 2,
            sink: Some(log.clone()),
            ..engine::EngineConfig::default()
        });
        let source = LiveSource {
            title: title.to_string(),
            policy: engine::Policy::Threaded,
            monitor: engine.monitor(),
            log,
            places: views::Places::default(),
        };
        (engine, source)
    }

    /// A terminal's fold following a long run holds a bounded number of op records (issue 17),
    /// and draws what a fold that keeps every record draws.
    #[test]
    fn a_terminal_fold_of_a_long_run_holds_few_records_and_draws_the_same() {
        let (engine, source) = logged_threaded_source("long.dep");
        let mut full = LiveFold::new(&source);
        let mut terminal = LiveFold::from_now(&source);
        let gated: Vec<engine::Var> = (0..4).map(|i| engine.new_var(format!("g{i}"))).collect();
        let free: Vec<engine::Var> = (0..5).map(|i| engine.new_var(format!("f{i}"))).collect();
        let mut most_held = 0;
        for first in (1..10_000).step_by(500) {
            push_mixed(&engine, &gated, &free, first, 500);
            engine.wait_all();
            terminal.read(&source, true);
            most_held = most_held.max(terminal.replay.ops().len());
        }
        full.read(&source, true);
        terminal.read(&source, true);
        assert_eq!(full.n_pushed, 10_000);
        assert!(most_held < 2_048, "held {most_held} records");
        assert!(terminal.replay.n_forgotten() > 8_000);
        let worker_names = source.monitor.worker_names();
        let live = views::Frame::from_snapshot(&source.monitor.snapshot(), &worker_names);
        let now_ns = source.monitor.now_ns();
        let draw = |fold: &LiveFold| {
            fold.cell_view(
                &source.title,
                source.policy,
                (&live, &worker_names),
                now_ns,
                true,
            )
        };
        let (expected, drawn) = (draw(&full), draw(&terminal));
        assert_eq!(drawn.heading, expected.heading);
        assert_eq!(drawn.counts, expected.counts);
        assert_eq!(drawn.frame, expected.frame);
        assert_eq!(drawn.text(None), expected.text(None));
        assert_eq!(drawn.n_ops(), 10_000);
        assert!(drawn.count(engine::OpState::Failed) > 0);
        assert_eq!(drawn.frame.ops.len(), MAX_OP_ROWS);
    }

    /// A terminal's fold following a loop that makes and deletes a variable at every iteration
    /// (`A = ones(8) * i; del A`) keeps neither the variables it touched nor their names once
    /// they are deleted: it kept one of each per iteration. A variable still live is shown.
    #[test]
    fn a_terminal_fold_lets_go_of_deleted_variables() {
        let (engine, source) = logged_threaded_source("loop.dep");
        let mut terminal = LiveFold::from_now(&source);
        let kept = engine.new_var("B");
        for index in 0..5_000 {
            let var = engine.new_var(format!("A{index}"));
            engine.push(
                engine::OpSpec::new("A = ones(8) * i", || Ok(()))
                    .reads(std::slice::from_ref(&kept))
                    .writes(std::slice::from_ref(&var)),
            );
            engine.delete_var(var, 2, || ());
            if index % 500 == 0 {
                engine.wait_all();
                terminal.read(&source, true);
            }
        }
        engine.wait_all();
        terminal.read(&source, true);
        // Each iteration's op and its deletion.
        assert_eq!(terminal.n_pushed, 10_000);
        assert!(
            terminal.touched.len() <= 1,
            "{} variables touched",
            terminal.touched.len()
        );
        assert!(terminal.touched.contains(&kept.id()));
        let names = terminal.replay.n_var_names();
        assert!(names <= 2, "{names} names kept");
    }

    /// Every view of a long run in flight agrees with itself, however the snapshot and the log
    /// interleave: its heading counts each op once (the ops it counts are the ops pushed), in
    /// one state, the state its row shows; the queues and the reasons for waiting name every op
    /// they list by its statement. Two chains of 1,500 short ops each, and a kernel's display
    /// (which stops keeping events past a thousand ops) and a terminal's panel redrawn as they
    /// run.
    #[test]
    fn every_view_of_a_long_run_in_flight_agrees_with_itself() {
        let (engine, source) = logged_threaded_source("chains.dep");
        let mut folds = [LiveFold::new(&source), LiveFold::from_now(&source)];
        let chains: Vec<engine::Var> = (0..2).map(|i| engine.new_var(format!("x{i}"))).collect();
        const N: u32 = 3_000;
        let spin = || {
            let start = std::time::Instant::now();
            while start.elapsed() < Duration::from_micros(50) {
                std::hint::spin_loop();
            }
            Ok(())
        };
        for line in 1..=N {
            let var = chains[line as usize % 2].clone();
            engine.push(
                engine::OpSpec::new("x = work(x)", spin)
                    .writes(&[var])
                    .line(line),
            );
        }
        let mut n_views = 0;
        loop {
            let done = engine.monitor().n_unfinished() == 0;
            for (which, fold) in folds.iter_mut().enumerate() {
                let view = fold.view(&source, done);
                n_views += 1;
                let heading = &format!("fold {which}: {}", view.heading);
                let counted: usize = view.counts.iter().map(|(_, count)| count).sum();
                assert_eq!(counted, view.n_ops(), "{heading}");
                assert_eq!(view.n_ops(), N as usize, "{heading}");
                let n_unfinished = view.n_unfinished();
                for state in [engine::OpState::Running, engine::OpState::Ready] {
                    assert!(view.count(state) <= 2, "two chains: {heading}");
                }
                if n_unfinished <= MAX_OP_ROWS {
                    for state in [
                        engine::OpState::Running,
                        engine::OpState::Ready,
                        engine::OpState::Waiting,
                    ] {
                        let rows = view.frame.ops.iter().filter(|op| op.state == state);
                        assert_eq!(rows.count(), view.count(state), "{heading}");
                    }
                }
                let text = view.text(None);
                for var in &view.frame.vars {
                    for access in var.queue.iter().take(12) {
                        assert!(
                            view.frame.op(access.op).is_some(),
                            "fold {which}: {access:?}\n{text}"
                        );
                    }
                }
                for op in &view.frame.ops {
                    for blocker in &op.waits_on {
                        assert!(
                            view.frame.op(blocker.behind).is_some(),
                            "{blocker:?}\n{text}"
                        );
                    }
                }
            }
            if done {
                break;
            }
        }
        assert!(n_views >= 10, "{n_views} views");
    }

    /// Mid-run, the live timeline counts a running op in its lane's busy share: a worker busy
    /// since the cell began is not shown idle.
    #[test]
    fn a_running_op_counts_in_its_lanes_busy_share_mid_run() {
        let gate = Arc::new(std::sync::Barrier::new(2));
        let (_engine, _vars, source) = source_with_ops(0, Some(gate.clone()));
        let mut gate = OpenOnDrop(Some(gate));
        let mut fold = LiveFold::new(&source);
        thread::sleep(Duration::from_millis(50));
        let html = fold.view(&source, false).html(None);
        let shares: Vec<u32> = html
            .split("%</text>")
            .filter_map(|before| {
                // `&gt;99%`: busy all but a moment (`util::format_percent`).
                let share = before.rsplit('>').next()?;
                share.trim_start_matches("&gt;").parse().ok()
            })
            .collect();
        assert!(shares.iter().any(|share| *share >= 50), "{shares:?}");
        gate.open();
    }

    /// The last display of a cell that stopped waiting for an op still running (a second
    /// interrupt) counts that op's time up to the clock, as the display before it did, not up
    /// to the log's last event: it said `0 ns+` and `... in all` for an op that had run a while.
    #[test]
    fn a_last_display_drawn_while_an_op_runs_counts_its_time_up_to_now() {
        let gate = Arc::new(std::sync::Barrier::new(2));
        let (_engine, _vars, source) = source_with_ops(0, Some(gate.clone()));
        let mut gate = OpenOnDrop(Some(gate));
        let mut fold = LiveFold::new(&source);
        thread::sleep(Duration::from_millis(60));
        let before = fold.view(&source, false);
        thread::sleep(Duration::from_millis(20));
        let last = fold.view(&source, true);
        gate.open();
        let running = |view: &LiveView| {
            let op = view
                .frame
                .ops
                .iter()
                .find(|op| &*op.label == "gate")
                .unwrap();
            assert_eq!(op.state, engine::OpState::Running, "{}", view.heading);
            view.frame.time_ns - op.started_ns.unwrap()
        };
        assert!(running(&before) >= 50_000_000, "{}", before.text(None));
        assert!(
            running(&last) >= running(&before) + 15_000_000,
            "{}",
            last.text(None)
        );
        assert!(last.heading.contains("1 running"), "{}", last.heading);
        assert!(last.heading.ends_with(" so far"), "{}", last.heading);
        let html = last.html(None);
        assert!(html.contains("dep-timeline"), "{html}");
    }

    /// A view of the REPL's kind of moment: one op done, one running, two waiting behind it, X
    /// idle.
    fn sample_view() -> LiveView {
        let op =
            |id: u64, label: &str, state: engine::OpState, times: (Option<u64>, Option<u64>)| {
                views::FrameOp {
                    id: engine::OpId(id),
                    label: Arc::from(label),
                    line: id as u32,
                    place: Some(Arc::from(format!("<repl>:{id}"))),
                    state,
                    device: engine::Device::Cpu,
                    worker: times.0.map(|_| "cpu:0".to_string()),
                    started_ns: times.0,
                    finished_ns: times.1,
                    waits_on: Vec::new(),
                }
            };
        let access = |op: u64, write: bool, granted: bool| engine::AccessSnapshot {
            op: engine::OpId(op),
            write,
            granted,
        };
        let var = |id: u64, name: &str, queue: Vec<engine::AccessSnapshot>| views::FrameVar {
            id: engine::VarId(id),
            name: Arc::from(name),
            queue,
        };
        let mut waiting = op(3, "Z = Y + 1", engine::OpState::Waiting, (None, None));
        waiting.waits_on.push(engine::Blocker {
            var: engine::VarId(2),
            behind: engine::OpId(2),
            behind_writes: true,
        });
        let mut behind_z = op(4, "W = Z * 2", engine::OpState::Waiting, (None, None));
        behind_z.waits_on.push(engine::Blocker {
            var: engine::VarId(3),
            behind: engine::OpId(3),
            behind_writes: true,
        });
        let frame = views::Frame {
            time_ns: 1_200_000_000,
            vars: vec![
                var(1, "X", Vec::new()),
                var(2, "Y", vec![access(2, true, true), access(3, false, false)]),
                var(3, "Z", vec![access(3, true, true), access(4, false, false)]),
                var(4, "W", vec![access(4, true, true)]),
            ],
            ops: vec![
                op(
                    1,
                    "X = rand(800, 800)",
                    engine::OpState::Done,
                    (Some(0), Some(2_000_000)),
                ),
                op(
                    2,
                    "Y = work(4000, X @ X)",
                    engine::OpState::Running,
                    (Some(2_000_000), None),
                ),
                waiting,
                behind_z,
            ],
            named: Vec::new(),
        };
        let counts = vec![
            (engine::OpState::Running, 1),
            (engine::OpState::Waiting, 2),
            (engine::OpState::Done, 1),
        ];
        let about = About {
            title: "<repl>".to_string(),
            policy: engine::Policy::Threaded,
            elapsed_ns: 1_200_000_000,
            ended: false,
            n_earlier: 0,
        };
        LiveView {
            heading: heading(&about, &counts, frame.ops.len()),
            frame,
            counts,
            n_hidden: 0,
            n_vars_hidden: 0,
            timeline: None,
            about,
        }
    }

    /// The one heading and text renderer, in the three layouts the front-ends use.
    #[test]
    fn every_front_end_renders_the_one_heading_with_the_text_renderer() {
        let view = sample_view();
        // The REPL's panel: the heading, its hint, the busy queues, the unfinished ops with
        // what each waits for, in at most 16 lines.
        let repl = TextLayout {
            style: views::TextStyle::plain(80),
            idle_queues: false,
            ops: true,
            finished_ops: false,
            max_lines: 16,
        };
        expect_test::expect![[r#"
            <repl> · threaded engine · 4 ops: 1 running, 2 waiting, 1 done · 1.20 s so far
            (Ctrl-C cancels what has not started)
            queues  (● granted, ○ waiting)
              Y ● W Y = work(4000, X @ X) (<repl>:2) │ ○ R Z = Y + 1 (<repl>:3)
              Z ● W Z = Y + 1 (<repl>:3) │ ○ R W = Z * 2 (<repl>:4)
              W ● W W = Z * 2 (<repl>:4)
            op                                 line state     worker        start   duration
            Y = work(4000, X @ X)          <repl>:2 running   cpu:0       2.00 ms    1.20 s+
            Z = Y + 1                      <repl>:3 waiting   -                 -          -
              ↳ Z = Y + 1 (<repl>:3) waits for Y: written by Y = work(4000, X @ X)
                (<repl>:2), running on cpu:0
            W = Z * 2                      <repl>:4 waiting   -                 -          -
              ↳ W = Z * 2 (<repl>:4) waits for Z: written by Z = Y + 1 (<repl>:3), itself
                waiting
        "#]]
        .assert_eq(&view.text_with(Some("(Ctrl-C cancels what has not started)"), &repl));
        // `dep run --watch`: the heading, the busy queues and the ops, cut to the terminal.
        let watch = TextLayout {
            style: views::TextStyle::plain(80),
            idle_queues: false,
            ops: true,
            finished_ops: true,
            max_lines: 9,
        };
        expect_test::expect![[r#"
            <repl> · threaded engine · 4 ops: 1 running, 2 waiting, 1 done · 1.20 s so far
            queues  (● granted, ○ waiting)
              Y ● W Y = work(4000, X @ X) (<repl>:2) │ ○ R Z = Y + 1 (<repl>:3)
              Z ● W Z = Y + 1 (<repl>:3) │ ○ R W = Z * 2 (<repl>:4)
              W ● W W = Z * 2 (<repl>:4)
            op                                 line state     worker        start   duration
            X = rand(800, 800)             <repl>:1 done      cpu:0          0 ns    2.00 ms
            Y = work(4000, X @ X)          <repl>:2 running   cpu:0       2.00 ms    1.20 s+
              … and 2 more ops
        "#]]
        .assert_eq(&view.text_with(None, &watch));
        // The kernel's text fallback: every variable's queue, every op.
        expect_test::expect![[r#"
            <repl> · threaded engine · 4 ops: 1 running, 2 waiting, 1 done · 1.20 s so far
            interrupted
            queues  (● granted, ○ waiting)
              X idle
              Y ● W Y = work(4000, X @ X) (<repl>:2) │ ○ R Z = Y + 1 (<repl>:3)
              Z ● W Z = Y + 1 (<repl>:3) │ ○ R W = Z * 2 (<repl>:4)
              W ● W W = Z * 2 (<repl>:4)
            op                                                     line state     worker        start   duration
            X = rand(800, 800)                                 <repl>:1 done      cpu:0          0 ns    2.00 ms
            Y = work(4000, X @ X)                              <repl>:2 running   cpu:0       2.00 ms    1.20 s+
            Z = Y + 1                                          <repl>:3 waiting   -                 -          -
              ↳ Z = Y + 1 (<repl>:3) waits for Y: written by Y = work(4000, X @ X) (<repl>:2), running on cpu:0
            W = Z * 2                                          <repl>:4 waiting   -                 -          -
              ↳ W = Z * 2 (<repl>:4) waits for Z: written by Z = Y + 1 (<repl>:3), itself waiting
        "#]]
        .assert_eq(&view.text(Some("interrupted")));
        // A heading wider than the terminal loses whole parts, or whole items of one.
        let narrow = TextLayout {
            style: views::TextStyle::plain(50),
            ..repl
        };
        let text = view.text_with(None, &narrow);
        assert_eq!(
            text.lines().next(),
            Some("<repl> · threaded engine · 4 ops: 1 running, …")
        );
    }

    /// The REPL's panel lists the ops that hold a place in the engine: an op waiting behind a
    /// cancelled one (which keeps its place in its queues until its turn) names it by its label,
    /// as `:ops` does, not by its engine id (`written by op3`), and the cancelled op's row shows
    /// while its queue rows do (the heading counted it, the table left it out).
    #[test]
    fn an_op_waiting_behind_a_cancelled_one_names_it_in_the_panel() {
        let mut view = sample_view();
        for op in &mut view.frame.ops {
            if op.id.0 == 3 {
                op.state = engine::OpState::Cancelled;
                op.waits_on.clear();
            }
        }
        let repl = TextLayout {
            style: views::TextStyle::plain(100),
            idle_queues: false,
            ops: true,
            finished_ops: false,
            max_lines: 16,
        };
        let text = view.text_with(None, &repl);
        assert!(
            text.contains(
                "↳ W = Z * 2 (<repl>:4) waits for Z: written by Z = Y + 1 (<repl>:3), cancelled"
            ),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|line| line.starts_with("Z = Y + 1 ") && line.contains(" cancelled ")),
            "no row for the cancelled op: {text}"
        );
        // Once its turn has come and gone, it holds no place: its row goes.
        for var in &mut view.frame.vars {
            var.queue.retain(|access| access.op.0 != 3);
        }
        let text = view.text_with(None, &repl);
        assert!(
            !text.lines().any(|line| line.starts_with("Z = Y + 1 ")),
            "a finished row: {text}"
        );
    }

    /// A panel cut short by its room lists its running ops first: the op that runs is never
    /// the one left out (a REPL panel over a long loop used to list 20 waiting ops of one chain
    /// and cut the running op of another).
    #[test]
    fn a_panel_cut_short_lists_its_running_ops_first() {
        let mut view = sample_view();
        let last = view.frame.ops.last_mut().unwrap();
        last.state = engine::OpState::Running;
        last.waits_on.clear();
        last.worker = Some("cpu:1".to_string());
        let panel = |max_lines| TextLayout {
            style: views::TextStyle::plain(120),
            idle_queues: false,
            ops: true,
            finished_ops: false,
            max_lines,
        };
        let whole = view.text_with(None, &panel(100));
        let header = whole
            .lines()
            .position(|line| line.starts_with("op "))
            .unwrap();
        // Room for the table's header, two rows and the line saying what was cut: the two
        // running ops (`Y = work(…)` is pushed before `Z = Y + 1`, which waits).
        let cut = view.text_with(None, &panel(header + 4));
        let rows: Vec<&str> = cut.lines().skip(header + 1).collect();
        assert_eq!(rows.len(), 3, "{cut}");
        assert!(rows[0].starts_with("Y = work(4000, X @ X)"), "{cut}");
        assert!(
            rows[1].starts_with("W = Z * 2") && rows[1].contains("running"),
            "{cut}"
        );
        assert_eq!(rows[2], "  … and 1 more op", "{cut}");
        // The heading, which counts every op, is whole.
        assert!(
            cut.lines().next().unwrap().ends_with(" · 1.20 s so far"),
            "{cut}"
        );
    }

    /// A panel over many busy variables keeps room for its ops (the queues filled it, and the
    /// running ops never showed), and says how many variables it leaves out, also those the
    /// frame had no room for.
    #[test]
    fn a_panel_over_many_queues_keeps_room_for_the_ops_and_counts_those_left_out() {
        let mut view = sample_view();
        let busy = view.frame.vars[1].clone();
        view.frame.vars = (0..20)
            .map(|i| views::FrameVar {
                name: Arc::from(format!("v{i}")),
                ..busy.clone()
            })
            .collect();
        view.n_vars_hidden = 4;
        let panel = |max_lines| TextLayout {
            style: views::TextStyle::plain(120),
            idle_queues: false,
            ops: true,
            finished_ops: false,
            max_lines,
        };
        let text = view.text_with(None, &panel(20));
        assert!(text.contains("  … and 16 more queues\n"), "{text}");
        assert!(text.contains("Y = work(4000, X @ X)"), "{text}");
        assert!(text.contains(" running "), "{text}");
        let roomy = view.text_with(None, &panel(100));
        assert!(roomy.contains("  … and 4 more variables\n"), "{roomy}");
        let html = view.html(None);
        assert!(
            html.contains(" · 4 more variables not shown</div>"),
            "{html}"
        );
    }

    /// Ops cancelled by Ctrl-C that the engine still lists as waiting are shown and counted
    /// as cancelled, in the rows and in the heading.
    #[test]
    fn cancelled_ops_are_shown_and_counted_as_cancelled() {
        let mut view = sample_view();
        view.show_cancelled(&HashSet::from([
            engine::OpId(3),
            engine::OpId(4),
            engine::OpId(2),
        ]));
        assert!(
            view.heading
                .starts_with("<repl> · threaded engine · 4 ops: 1 running, 1 done, 2 cancelled · "),
            "{}",
            view.heading
        );
        assert_eq!(view.count(engine::OpState::Cancelled), 2);
        assert_eq!(
            view.frame.op(engine::OpId(2)).map(|op| op.state),
            Some(engine::OpState::Running)
        );
        assert!(view
            .frame
            .op(engine::OpId(3))
            .is_some_and(|op| op.waits_on.is_empty()));
    }

    /// The display as it was drawn before redraws read only new events (a whole replay, a row
    /// for every op): the reference the incremental one must match.
    fn old_cell_view(
        title: &str,
        policy: engine::Policy,
        replay: &views::Replay,
        live: &views::Frame,
        now_ns: u64,
        finished: bool,
    ) -> LiveView {
        let first_ns = replay
            .events()
            .first()
            .map_or(now_ns, |event| event.time_ns);
        let since_first = |ns: u64| ns.saturating_sub(first_ns);
        // Every op of the cell: the log's record, with the snapshot's live state (and why it
        // waits) while it has not finished; then live ops the log has not shown yet.
        let mut ops: Vec<views::FrameOp> = replay
            .ops()
            .iter()
            .map(|record| {
                let worker = record.worker.map(|worker| replay.worker_name(worker));
                let live_op = live.op(record.id).filter(|_| !record.state.is_finished());
                row_of(record, live_op, worker)
            })
            .collect();
        ops.extend(
            live.ops
                .iter()
                .filter(|op| replay.op(op.id).is_none())
                .cloned(),
        );
        for op in &mut ops {
            op.started_ns = op.started_ns.map(since_first);
            op.finished_ns = op.finished_ns.map(since_first);
        }
        let counts: Vec<(engine::OpState, usize)> = [
            engine::OpState::Running,
            engine::OpState::Ready,
            engine::OpState::Waiting,
            engine::OpState::Done,
            engine::OpState::Failed,
            engine::OpState::Skipped,
            engine::OpState::Cancelled,
        ]
        .into_iter()
        .map(|state| (state, ops.iter().filter(|op| op.state == state).count()))
        .filter(|(_, count)| *count > 0)
        .collect();
        let all_ended = ops.iter().all(|op| op.state.is_finished());
        let last_ns = match replay.events().last() {
            Some(last) if all_ended => last.time_ns,
            None if finished => first_ns,
            _ => now_ns,
        };
        let n_ops = ops.len();
        let every_op = ops.clone();
        let ops = old_shown_ops(ops);
        let n_hidden = n_ops - ops.len();
        let about = About {
            title: title.to_string(),
            policy,
            elapsed_ns: last_ns.saturating_sub(first_ns),
            ended: finished && all_ended,
            n_earlier: 0,
        };
        let heading = heading(&about, &counts, ops.len());

        let touched: HashSet<engine::VarId> = replay
            .ops()
            .iter()
            .flat_map(|op| op.reads.iter().chain(&op.writes).copied())
            .chain(
                live.ops
                    .iter()
                    .flat_map(|op| op.waits_on.iter().map(|blocker| blocker.var)),
            )
            .collect();
        let (mut vars, n_vars_hidden) = shown_vars(live, &touched);
        // The queues as the log has them: without the ops it saw finish, granted to the ops
        // shown ready or running (whole: these tests' queues are shorter than the head a fold
        // settles).
        let shown = |id: engine::OpId| every_op.iter().find(|op| op.id == id);
        for var in &mut vars {
            var.queue.retain(|access| {
                !replay
                    .op(access.op)
                    .is_some_and(|op| op.state.is_finished())
            });
            for access in &mut var.queue {
                access.granted |= shown(access.op).is_some_and(|op| {
                    matches!(op.state, engine::OpState::Ready | engine::OpState::Running)
                });
            }
        }
        let mut frame = views::Frame {
            time_ns: since_first(last_ns),
            vars,
            ops,
            named: Vec::new(),
        };
        for id in named_ops(&frame) {
            if frame.op(id).is_none() {
                frame.named.extend(shown(id).cloned());
            }
        }
        LiveView {
            heading,
            frame,
            counts,
            n_hidden,
            n_vars_hidden,
            timeline: None,
            about,
        }
    }

    /// At most [`MAX_OP_ROWS`] of `ops`, in push order: the running ones, the ready ones, the
    /// other unfinished ones, the failed, skipped or cancelled ones, the latest done ones.
    fn old_shown_ops(ops: Vec<views::FrameOp>) -> Vec<views::FrameOp> {
        if ops.len() <= MAX_OP_ROWS {
            return ops;
        }
        let is_done = |op: &views::FrameOp| op.state == engine::OpState::Done;
        let mut chosen: Vec<usize> = Vec::with_capacity(MAX_OP_ROWS);
        let ops_ref = &ops;
        let in_state = |state| (0..ops_ref.len()).filter(move |&idx| ops_ref[idx].state == state);
        let unfinished = in_state(engine::OpState::Running)
            .chain(in_state(engine::OpState::Ready))
            .chain(in_state(engine::OpState::Waiting));
        let failed =
            (0..ops.len()).filter(|&idx| ops[idx].state.is_finished() && !is_done(&ops[idx]));
        let latest_done = (0..ops.len()).rev().filter(|&idx| is_done(&ops[idx]));
        chosen.extend(
            unfinished
                .chain(failed)
                .chain(latest_done)
                .take(MAX_OP_ROWS),
        );
        chosen.sort_unstable();
        let mut chosen = chosen.into_iter().peekable();
        ops.into_iter()
            .enumerate()
            .filter(|(idx, _)| chosen.next_if_eq(idx).is_some())
            .map(|(_, op)| op)
            .collect()
    }

    /// Reads what is new into `fold` and checks its view against the reference drawn from the
    /// whole log, with the same snapshot. The log must not move meanwhile.
    fn check_same_as_whole_log(
        fold: &mut LiveFold,
        source: &LiveSource,
        finished: bool,
    ) -> LiveView {
        check_same_with_snapshot(fold, source, finished, |_| {})
    }

    /// [`check_same_as_whole_log`] with the snapshot's frame changed by `change` first.
    fn check_same_with_snapshot(
        fold: &mut LiveFold,
        source: &LiveSource,
        finished: bool,
        change: impl FnOnce(&mut views::Frame),
    ) -> LiveView {
        fold.read(source, true);
        let worker_names = source.monitor.worker_names();
        let mut live = views::Frame::from_snapshot(&source.monitor.snapshot(), &worker_names);
        change(&mut live);
        let now_ns = source.monitor.now_ns();
        let view = fold.cell_view(
            &source.title,
            source.policy,
            (&live, &worker_names),
            now_ns,
            finished,
        );
        let replay = views::Replay::new(source.log.events(), worker_names);
        let reference = old_cell_view(
            &source.title,
            source.policy,
            &replay,
            &live,
            now_ns,
            finished,
        );
        assert_eq!(view.heading, reference.heading);
        assert_eq!(view.counts, reference.counts);
        assert_eq!(view.n_hidden, reference.n_hidden);
        assert_eq!(view.frame, reference.frame);
        assert_eq!(view.html(Some("note")), reference.html(Some("note")));
        assert_eq!(view.text(None), reference.text(None));
        view
    }

    /// Waits until `n` ops are unfinished, then a little more for their events to settle.
    fn settle(engine: &engine::Engine, n: usize) {
        while engine.monitor().n_unfinished() != n {
            thread::sleep(Duration::from_millis(1));
        }
        thread::sleep(Duration::from_millis(20));
    }

    /// Pushes `n` ops from line `first`: every third waits behind the gate's variables, the
    /// others write free ones, some failing and some skipped behind a failure.
    fn push_mixed(
        engine: &engine::Engine,
        gated: &[engine::Var],
        free: &[engine::Var],
        first: u32,
        n: u32,
    ) -> usize {
        let mut n_gated = 0;
        for line in first..first + n {
            let var = |vars: &[engine::Var]| vars[line as usize % vars.len()].clone();
            let spec = match line % 6 {
                0 | 3 => {
                    n_gated += 1;
                    engine::OpSpec::new("G = G + 1", || Ok(())).writes(&[var(gated)])
                }
                1 => engine::OpSpec::new("F = bad(F)", || Err("bad".to_string()))
                    .writes(&[free[0].clone()]),
                2 => engine::OpSpec::new("E = F + 1", || Ok(()))
                    .reads(&[free[0].clone()])
                    .writes(&[free[1].clone()]),
                _ => engine::OpSpec::new("H = 1", || Ok(())).writes(&[var(&free[2..])]),
            };
            engine.push(spec.line(line));
        }
        n_gated
    }

    #[test]
    fn redraws_from_new_events_show_what_a_view_of_the_whole_log_shows() {
        for n_first in [5, 40] {
            let gate = Arc::new(std::sync::Barrier::new(2));
            let (engine, gated, source) = source_with_ops(0, Some(gate.clone()));
            let mut gate = OpenOnDrop(Some(gate));
            let free: Vec<engine::Var> = (0..5).map(|i| engine.new_var(format!("f{i}"))).collect();
            let mut fold = LiveFold::new(&source);
            let mut n_unfinished = 1 + push_mixed(&engine, &gated, &free, 1, n_first);
            settle(&engine, n_unfinished);
            check_same_as_whole_log(&mut fold, &source, false);
            n_unfinished += push_mixed(&engine, &gated, &free, n_first + 1, 30);
            settle(&engine, n_unfinished);
            let view = check_same_as_whole_log(&mut fold, &source, false);
            assert!(view.count(engine::OpState::Failed) > 0, "{}", view.heading);
            assert!(view.count(engine::OpState::Skipped) > 0, "{}", view.heading);
            assert!(view.count(engine::OpState::Waiting) > 0, "{}", view.heading);
            assert_eq!(view.n_hidden > 0, n_first + 30 + 1 > MAX_OP_ROWS as u32);
            // Nothing new: the same view.
            check_same_as_whole_log(&mut fold, &source, false);
            // A snapshot taken after the log was read may show some of the log's waiting ops
            // finished, and ops the log has not shown yet (last, by id), finished or not; in
            // either order of ids.
            for reverse in [false, true] {
                check_same_with_snapshot(&mut fold, &source, false, |live| {
                    let states = [
                        engine::OpState::Done,
                        engine::OpState::Failed,
                        engine::OpState::Running,
                        engine::OpState::Cancelled,
                    ];
                    let mut new_ops = Vec::new();
                    for (op, state) in live.ops.iter_mut().skip(1).step_by(3).zip(states) {
                        op.state = state;
                        new_ops.push(views::FrameOp {
                            id: engine::OpId(op.id.0 + 1_000_000),
                            ..op.clone()
                        });
                    }
                    live.ops.extend(new_ops);
                    if reverse {
                        live.ops.reverse();
                    }
                });
            }

            engine.cancel_pending();
            gate.open();
            engine.wait_all();
            settle(&engine, 0);
            let view = check_same_as_whole_log(&mut fold, &source, true);
            assert!(
                view.count(engine::OpState::Cancelled) > 0,
                "{}",
                view.heading
            );
            assert_eq!(view.n_ops(), n_first as usize + 31);
        }
    }

    #[test]
    fn a_fold_starts_over_when_the_log_is_cleared_under_it() {
        let (engine, vars, source) = source_with_ops(30, None);
        engine.wait_all();
        let mut fold = LiveFold::new(&source);
        assert_eq!(fold.view(&source, true).n_ops(), 30);
        source.log.clear();
        push_tiny_ops(&engine, &vars, 0..3);
        engine.wait_all();
        settle(&engine, 0);
        let view = check_same_as_whole_log(&mut fold, &source, true);
        assert_eq!(view.n_ops(), 3);
    }

    /// An op of an earlier input still running (one a notebook's earlier cell let go) shows in a
    /// later cell's display, where the cell's ops wait for it, but is not counted as one of the
    /// cell's ops: the heading said `4 ops: 1 running, 3 waiting` of a cell that had pushed 2
    /// (then `2 ops` once they ended).
    #[test]
    fn an_earlier_inputs_op_is_shown_but_not_counted_as_this_inputs() {
        let gate = Arc::new(std::sync::Barrier::new(2));
        let (engine, vars, source) = source_with_ops(0, Some(gate.clone()));
        let mut gate = OpenOnDrop(Some(gate));
        // A new cell: the kernel clears the log, then the cell's display begins.
        source.log.clear();
        let mut fold = LiveFold::new(&source);
        push_tiny_ops(&engine, &vars, 0..2);
        let view = fold.view(&source, false);
        let heading = &view.heading;
        assert!(heading.contains(" · 2 ops: 2 waiting · "), "{heading}");
        assert!(
            heading.contains(" · 1 unfinished op of earlier inputs"),
            "{heading}"
        );
        assert!(!heading.contains("showing"), "{heading}");
        assert!(
            view.frame.ops.iter().any(|op| &*op.label == "gate"),
            "{}",
            view.text(None)
        );
        gate.open();
        engine.wait_all();
        let last = fold.view(&source, true);
        assert!(
            last.heading.contains(" · 2 ops: 2 done · "),
            "{}",
            last.heading
        );
    }

    /// An op cancelled before it started keeps its place in its queues until its turn comes, as
    /// the engine keeps it and as a replay shows it: the live views show its access there (a
    /// panel dropped it at the cancel, though its why-lines named it), then not once it ended.
    #[test]
    fn a_cancelled_op_keeps_its_place_in_the_live_queues_until_its_turn() {
        let gate = Arc::new(std::sync::Barrier::new(2));
        let (engine, vars, source) = source_with_ops(0, Some(gate.clone()));
        let mut gate = OpenOnDrop(Some(gate));
        let mut whole = LiveFold::new(&source);
        let mut terminal = LiveFold::from_now(&source);
        let read = engine.new_var("r");
        // The gate's op runs (a cancel would cancel it too otherwise).
        while !engine
            .snapshot()
            .ops
            .iter()
            .any(|op| op.state == engine::OpState::Running)
        {
            thread::sleep(Duration::from_millis(1));
        }
        engine.push(
            engine::OpSpec::new("r = v0 + 1", || Ok(()))
                .reads(&[vars[0].clone()])
                .writes(&[read])
                .line(2),
        );
        engine.cancel_pending();
        settle(&engine, 2);
        let queue_of_v0 = |view: &LiveView| {
            let var = view
                .frame
                .vars
                .iter()
                .find(|var| &*var.name == "v0")
                .unwrap();
            var.queue
                .iter()
                .map(|access| access.write)
                .collect::<Vec<bool>>()
        };
        for fold in [&mut whole, &mut terminal] {
            let view = fold.view(&source, false);
            assert_eq!(
                view.count(engine::OpState::Cancelled),
                1,
                "{}",
                view.heading
            );
            assert_eq!(
                queue_of_v0(&view),
                [true, false],
                "the gate's write, then the read"
            );
        }
        gate.open();
        engine.wait_all();
        settle(&engine, 0);
        for fold in [&mut whole, &mut terminal] {
            let view = fold.view(&source, true);
            assert!(queue_of_v0(&view).is_empty(), "{}", view.heading);
        }
    }

    /// Opens a gate (see [`source_with_ops`]) once, at the latest when dropped: declared after
    /// the engine, so that a failed check does not leave the gated op blocking the engine's drop.
    struct OpenOnDrop(Option<Arc<std::sync::Barrier>>);

    impl OpenOnDrop {
        fn open(&mut self) {
            if let Some(gate) = self.0.take() {
                gate.wait();
            }
        }
    }

    impl Drop for OpenOnDrop {
        fn drop(&mut self) {
            self.open();
        }
    }

    /// A source over a fresh threaded engine with `n` tiny ops on 16 variables pushed; when
    /// `gate` is given, an op pushed first writes every variable and waits for it, so every
    /// other op stays pending until the caller waits for `gate` too.
    fn source_with_ops(
        n: usize,
        gate: Option<Arc<std::sync::Barrier>>,
    ) -> (engine::Engine, Vec<engine::Var>, LiveSource) {
        let log = Arc::new(engine::EventLog::new());
        let engine = engine::Engine::new(engine::EngineConfig {
            policy: engine::Policy::Threaded,
            threads: 2,
            sink: Some(log.clone()),
            ..engine::EngineConfig::default()
        });
        let vars: Vec<engine::Var> = (0..16).map(|i| engine.new_var(format!("v{i}"))).collect();
        if let Some(gate) = gate {
            engine.push(
                engine::OpSpec::new("gate", move || {
                    gate.wait();
                    Ok(())
                })
                .writes(&vars),
            );
        }
        push_tiny_ops(&engine, &vars, 0..n);
        let source = LiveSource {
            title: "cell[1]".to_string(),
            policy: engine::Policy::Threaded,
            monitor: engine.monitor(),
            log,
            places: views::Places::default(),
        };
        (engine, vars, source)
    }

    fn push_tiny_ops(engine: &engine::Engine, vars: &[engine::Var], lines: std::ops::Range<usize>) {
        let label: Arc<str> = Arc::from("x = x + 1");
        for line in lines {
            let var = &vars[line % vars.len()];
            engine.push(
                engine::OpSpec::new(label.clone(), || Ok(()))
                    .writes(&[var.clone()])
                    .line(line as u32 + 1),
            );
        }
    }

    fn time_ms<T>(run: impl FnOnce() -> T) -> (T, f64) {
        let start = std::time::Instant::now();
        let value = run();
        (value, start.elapsed().as_secs_f64() * 1e3)
    }

    /// A redraw as it was before `LiveFold`: every event of the log copied and sorted, a whole
    /// replay with its edges, a row for every op.
    fn old_redraw(source: &LiveSource, finished: bool) -> LiveView {
        let events = source.log.events();
        let worker_names = source.monitor.worker_names();
        let snapshot = source.monitor.snapshot();
        let now_ns = source.monitor.now_ns();
        let replay = views::Replay::new(events, worker_names.clone());
        let _ = replay.edges();
        let live = views::Frame::from_snapshot(&snapshot, &worker_names);
        old_cell_view(
            &source.title,
            source.policy,
            &replay,
            &live,
            now_ns,
            finished,
        )
    }

    fn median_of(runs: usize, mut run: impl FnMut() -> f64) -> f64 {
        let mut times: Vec<f64> = (0..runs).map(|_| run()).collect();
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    }

    /// The cost of one redraw of a cell of 50,000 tiny ops, finished or all pending: as it was
    /// (the whole log, every time), a `LiveSource::view` (a fresh `LiveFold` over the whole log,
    /// as the executor's one-off views do), and a watcher's redraw, which reads only the events
    /// since its last one. Medians of 5. Run:
    /// `cargo test --release -p dep-kernel -- --ignored --nocapture redraw_cost`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn redraw_cost() {
        const N: usize = 50_000;
        const N_NEW: usize = 500;
        let (engine, vars, source) = source_with_ops(N, None);
        engine.wait_all();
        let old = median_of(5, || time_ms(|| old_redraw(&source, false)).1);
        let whole = median_of(5, || time_ms(|| source.view(false)).1);
        let mut fold = LiveFold::new(&source);
        fold.view(&source, false);
        let nothing_new = median_of(5, || time_ms(|| fold.view(&source, false)).1);
        let mut round = 0;
        let some_new = median_of(5, || {
            round += 1;
            push_tiny_ops(&engine, &vars, N + (round - 1) * N_NEW..N + round * N_NEW);
            engine.wait_all();
            let (view, ms) = time_ms(|| fold.view(&source, false));
            assert_eq!(view.n_ops(), N + round * N_NEW);
            ms
        });
        println!(
            "{N} finished ops: before {old:.3} ms; LiveSource::view {whole:.3} ms; a redraw with \
             nothing new {nothing_new:.3} ms; a redraw after {N_NEW} new ops {some_new:.3} ms"
        );

        let gate = Arc::new(std::sync::Barrier::new(2));
        let (engine, _vars, source) = source_with_ops(N, Some(gate.clone()));
        let mut gate = OpenOnDrop(Some(gate));
        let old = median_of(3, || time_ms(|| old_redraw(&source, false)).1);
        let whole = median_of(5, || time_ms(|| source.view(false)).1);
        let mut fold = LiveFold::new(&source);
        assert_eq!(fold.view(&source, false).n_ops(), N + 1);
        let nothing_new = median_of(5, || time_ms(|| fold.view(&source, false)).1);
        let snapshot = median_of(5, || {
            time_ms(|| {
                let snapshot = source.monitor.snapshot();
                views::Frame::from_snapshot(&snapshot, &source.monitor.worker_names())
            })
            .1
        });
        let view = fold.view(&source, false);
        let (html, html_ms) = time_ms(|| view.html(None));
        println!(
            "{N} pending ops: before {old:.3} ms; LiveSource::view {whole:.3} ms; a redraw with \
             nothing new {nothing_new:.3} ms, of which the engine's snapshot and its frame \
             {snapshot:.3} ms; then its HTML (every queued access) {html_ms:.3} ms, {} bytes",
            html.len()
        );
        gate.open();
        engine.wait_all();
    }
}
