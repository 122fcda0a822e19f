//! The replay model: an event log folded into op records, dependency edges, and the state of
//! every queue and op after any prefix of the log.
//!
//! Only the event log and the worker names go in, so a replay works the same on a live session's
//! [`dep_engine::EventLog`] and on the `depEvents` read back from a trace file.
//!
//! A replay can be extended with the log's next events ([`Replay::extend`]: a live display's
//! redraw) without folding the old ones again; the dependency edges are worked out when first
//! asked for.
//!
//! Events are taken in log order, not in timestamp order: the engine stamps an event just before
//! it takes the log's lock, so two threads' stamps may be out of order by a few nanoseconds, while
//! the log order is causal (an op's push comes before its grants, its finish before the grants it
//! releases).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use dep_engine as engine;
use dep_engine::{AccessSnapshot, Blocker, Event, EventKind, OpId, OpState, VarId};
use petgraph::graph::{DiGraph, NodeIndex};

use crate::bookkeeping::{Bookkeeping, Filtered};
use crate::places::Places;
use crate::util::describe_op_at;

/// A finished (or partial) run, rebuilt from its events.
///
/// The fewest records an ops-only replay holds before [`Replay::forget_finished`] forgets some.
const MIN_FORGET: usize = 1024;

/// Invariant: `table` has folded exactly `events`, and every edge goes from an earlier op to a
/// later one (so push order is a topological order).
#[derive(Clone, Debug)]
pub struct Replay {
    events: Vec<Event>,
    worker_names: Vec<String>,
    table: OpTable,
    /// What leaves the interpreter's bookkeeping out of `events` and `table`.
    bookkeeping: Bookkeeping,
    /// Computed on the first call to [`Replay::edges`] (a live display never asks), and again
    /// after the replay is extended.
    edges: OnceLock<Vec<Edge>>,
    /// While the run goes on: the engine's clock now, where the time axis ends and running
    /// ops' bars reach (see [`Replay::set_now`]).
    now_ns: Option<u64>,
    /// Whether `events` keeps the folded events ([`Replay::ops_only`]: it does not).
    keeps_events: bool,
    /// The times of the first and the last event folded.
    time_range: Option<(u64, u64)>,
}

/// The op records of an event log, folded one event at a time, and kept between
/// [`Replay::extend`]s so that old events are never folded again: no events, no queues, no
/// edges.
///
/// Invariant: `ops` is in push order; `op_index` maps the id of each op in `ops` to its position
/// (`base` plus its index in `ops`).
#[derive(Clone, Debug, Default)]
struct OpTable {
    var_names: BTreeMap<VarId, Arc<str>>,
    /// Whether a deleted variable's name is let go (see [`Replay::forget_deleted_vars`]).
    forgets_deleted_vars: bool,
    ops: Vec<OpRecord>,
    op_index: HashMap<OpId, usize>,
    /// How many ops were forgotten from the front ([`Replay::forget_finished`]): the position of
    /// `ops[0]`.
    base: usize,
    /// How many ops `ops` holds when [`Replay::forget_finished`] next looks for some to forget.
    forget_at: usize,
    /// The newest op [`Replay::forget_finished`] forgot.
    newest_forgotten: Option<OpId>,
    /// How many events were folded: the next one's index in the log.
    n_events: usize,
}

/// Everything the log says about one op.
#[derive(Clone, Debug, PartialEq)]
pub struct OpRecord {
    /// The op.
    pub id: OpId,
    /// Its label (the statement).
    pub label: Arc<str>,
    /// Its source line (0: none).
    pub line: u32,
    /// Its line as the reader numbers it (`cell[2]:3`), once a front-end named it
    /// ([`Replay::name_places`]).
    pub place: Option<Arc<str>>,
    /// Its device.
    pub device: engine::Device,
    /// Its priority.
    pub priority: i32,
    /// The variables it reads.
    pub reads: Vec<VarId>,
    /// The variables it writes.
    pub writes: Vec<VarId>,
    /// When it was pushed (ns since the engine started).
    pub pushed_ns: u64,
    /// When every access was granted.
    pub ready_ns: Option<u64>,
    /// When it started on a worker.
    pub started_ns: Option<u64>,
    /// When it finished.
    pub finished_ns: Option<u64>,
    /// The worker that ran it (index into the replay's worker names).
    pub worker: Option<u32>,
    /// Its state at the end of the log.
    pub state: OpState,
    /// The error message of a failed, skipped or cancelled op.
    pub message: Option<String>,
    /// The index of its `Pushed` event in the log.
    pub pushed_at: usize,
    /// The index of its `Finished` event in the log.
    pub finished_at: Option<usize>,
    /// When the work it enqueued on a device ran (its GPU kernels), once the device said so.
    pub device_span: Option<DeviceSpan>,
}

/// When an op's device work (its kernels) ran: from the device's timing events, in the engine's
/// clock. An op that enqueues kernels finishes, for the engine, before they run (RFC 18951).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSpan {
    /// The device lane (a stream, such as `gpu0:s1`).
    pub lane: Arc<str>,
    /// When the first kernel started.
    pub start_ns: u64,
    /// When the last kernel ended.
    pub end_ns: u64,
}

/// The longest chain found up to an op (see `Replay::longest_path`): its time, its number of
/// ops, and the op before it, with whether that op's chain is its chain through device ops.
#[derive(Clone, Copy, Debug, Default)]
struct Link {
    ns: u64,
    n_steps: usize,
    before: Option<(NodeIndex, bool)>,
}

impl Link {
    /// How chains to one op compare: the longest, of the most steps among equals, then
    /// through the latest pushed op, then through a device op's chain (as the summary's fold
    /// chooses).
    fn rank(&self) -> (u64, usize, Option<(NodeIndex, bool)>) {
        (self.ns, self.n_steps, self.before)
    }

    /// The chain one op of `own_ns` longer.
    fn then(self, own_ns: u64) -> Link {
        Link {
            ns: self.ns + own_ns,
            n_steps: self.n_steps + 1,
            ..self
        }
    }
}

/// One row of a timeline: a worker (the host thread that ran, or enqueued, ops) or a device lane
/// (a GPU stream, where enqueued kernels ran).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lane {
    /// A worker, by index into the worker names.
    Worker(u32),
    /// A device lane, by name.
    Device(Arc<str>),
}

/// One op's bar on a [`Lane`]: from its start to its end (the end of the run while it runs).
#[derive(Clone, Copy, Debug)]
pub struct Bar<'a> {
    /// The op.
    pub op: &'a OpRecord,
    /// Where the bar starts.
    pub start_ns: u64,
    /// Where the bar ends.
    pub end_ns: u64,
}

impl OpRecord {
    /// How long it ran, once it finished.
    pub fn duration_ns(&self) -> Option<u64> {
        Some(self.finished_ns?.saturating_sub(self.started_ns?))
    }

    /// What the op took on the critical path of device ops: the longer of its run on its
    /// worker (for a device op, the launch of its kernels) and its kernels' span on the device.
    pub fn work_ns(&self) -> u64 {
        let device_ns = self
            .device_span
            .as_ref()
            .map_or(0, |span| span.end_ns.saturating_sub(span.start_ns));
        self.duration_ns().unwrap_or(0).max(device_ns)
    }

    /// "statement (line N)", or the bare label for engine bookkeeping ops without a line.
    pub fn describe(&self) -> String {
        describe_op_at(&self.label, self.line, self.place.as_deref())
    }
}

/// A dependency: `to` accesses `var` after `from`'s conflicting access, in push order.
///
/// Edges are the data dependencies of the program, not of one schedule: a read depends on the
/// last write before it (read-after-write); a write on every read since the last write
/// (write-after-read) or, when there was none, on the last write (write-after-write). That is
/// exactly which access each access is queued behind when nothing has finished yet, so the DAG
/// is the same under every policy (the naive engine, which finishes each op before the next push,
/// never queues anything). [`Edge::queued`] says whether the access really waited in this run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    /// The earlier op.
    pub from: OpId,
    /// The later op, which may start only after `from` ends.
    pub to: OpId,
    /// The variable, and the hazard, that order them: the first of `to`'s accesses that
    /// conflicts with `from` (its reads come first, then its writes).
    pub var: VarId,
    /// Which kind of conflict.
    pub hazard: Hazard,
    /// The other conflicts between the same two ops, in the same order (`A = C * 2` after
    /// `C = A + 2`: RAW on C, then WAR on A); empty for most edges.
    pub more: Vec<(VarId, Hazard)>,
    /// Whether `from` had not finished when `to` was pushed, so `to`'s access really queued.
    pub queued: bool,
}

impl Edge {
    /// Every conflict that orders the two ops: the first, then the others.
    pub fn dependencies(&self) -> impl Iterator<Item = (VarId, Hazard)> + '_ {
        std::iter::once((self.var, self.hazard)).chain(self.more.iter().copied())
    }
}

/// The kind of conflict behind an [`Edge`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hazard {
    /// A read of what an earlier op wrote.
    ReadAfterWrite,
    /// A write of what an earlier op read.
    WriteAfterRead,
    /// A write of what an earlier op wrote.
    WriteAfterWrite,
}

impl Hazard {
    /// `RAW`, `WAR` or `WAW`.
    pub fn short_name(self) -> &'static str {
        match self {
            Hazard::ReadAfterWrite => "RAW",
            Hazard::WriteAfterRead => "WAR",
            Hazard::WriteAfterWrite => "WAW",
        }
    }
}

/// Rewrites every event's time to its index in microseconds (event `i` at `i` µs), so that views
/// of a run are the same on every machine: snapshot tests and documentation use this. Durations
/// then count events, not time.
pub fn renumber_times(events: &mut [Event]) {
    for (index, event) in events.iter_mut().enumerate() {
        event.time_ns = index as u64 * 1_000;
    }
}

impl Replay {
    /// Folds `events` (in log order) into a replay; `worker_names` are the engine's
    /// ([`dep_engine::Engine::worker_names`]; index 0 is the calling thread, `main`). The
    /// events are put in time order first (an event logged late moves to its time, never before
    /// its op's event before it: see `time_order.rs`), so that its steps go forward in time.
    /// The events of the interpreter's temporaries (`_#1`, `wait _#1`, `del _#1`) are left out.
    pub fn new(mut events: Vec<Event>, worker_names: Vec<String>) -> Replay {
        crate::time_order::into_time_order(&mut events);
        let mut replay = Replay {
            table: OpTable::default(),
            bookkeeping: Bookkeeping::default(),
            edges: OnceLock::new(),
            events: Vec::new(),
            worker_names,
            now_ns: None,
            keeps_events: true,
            time_range: None,
        };
        // Room for every op at once: a long run's records would otherwise double their way up,
        // each time copied into fresh pages.
        let n_pushes = events
            .iter()
            .filter(|event| matches!(event.kind, EventKind::Pushed { .. }))
            .count();
        replay.table.ops.reserve_exact(n_pushes);
        replay.table.op_index.reserve(n_pushes);
        // Folded where they lie, the events shown moved to the front of the same vector: a
        // long run's events (a trace read back) are held once, not twice while copied.
        events.retain_mut(|event| match replay.bookkeeping.filter(event) {
            Filtered::Hidden => false,
            Filtered::Shown => {
                replay.fold_shown(event);
                true
            }
            Filtered::Trimmed(trimmed) => {
                *event = trimmed;
                replay.fold_shown(event);
                true
            }
        });
        replay.events = events;
        replay
    }

    /// A replay of nothing yet that keeps only the op records of what it folds, not the events
    /// themselves: for a live panel that draws no timeline (the terminal's), whose memory then
    /// does not grow with every event of a long run. [`Replay::events`] stays empty, so only
    /// [`Replay::ops`], [`Replay::op_position`] and [`Replay::time_range`] are of use.
    pub fn ops_only(worker_names: Vec<String>) -> Replay {
        Replay {
            keeps_events: false,
            ..Replay::new(Vec::new(), worker_names)
        }
    }

    /// Lets go of each variable's name once it is deleted, for a replay that never names a
    /// deleted variable (a live panel's, which draws the engine's live variables), where a
    /// loop making a variable at every iteration would keep a name per iteration. A replay
    /// drawn as a DAG or a timeline names them in its edges.
    pub fn forget_deleted_vars(&mut self) {
        self.table.forgets_deleted_vars = true;
    }

    /// Drops the events kept so far and keeps none from now on, as a replay made by
    /// [`Replay::ops_only`]: for a live display that drew a timeline while its input was short
    /// and stops once it is long, so that its memory stops growing with every event.
    pub fn stop_keeping_events(&mut self) {
        self.events = Vec::new();
        self.keeps_events = false;
        self.edges = OnceLock::new();
    }

    /// Forgets the records of the finished ops at the front of an ops-only replay (from
    /// [`Replay::ops_only`]; a replay that keeps its events keeps every record), so that a
    /// live panel following a long run holds about as many records as ops are unfinished, not
    /// one per op of the run. Positions stay those of the whole run: [`Replay::ops`] then
    /// starts at position [`Replay::n_forgotten`]. It looks at the front only when the table
    /// has doubled since it last did, so its cost per op pushed is constant.
    pub fn forget_finished(&mut self) {
        let table = &mut self.table;
        if self.keeps_events || table.ops.len() < table.forget_at.max(MIN_FORGET) {
            return;
        }
        let n = table
            .ops
            .iter()
            .take_while(|record| record.state.is_finished())
            .count();
        for record in table.ops.drain(..n) {
            table.op_index.remove(&record.id);
            table.newest_forgotten = table.newest_forgotten.max(Some(record.id));
        }
        table.base += n;
        table.forget_at = 2 * table.ops.len();
        table.ops.shrink_to(table.forget_at);
        table.op_index.shrink_to(table.forget_at);
    }

    /// How many variables it holds a name for.
    #[cfg(test)]
    pub(crate) fn n_var_names(&self) -> usize {
        self.table.var_names.len()
    }

    /// How many ops' records [`Replay::forget_finished`] forgot: the position of
    /// `ops()[0]`.
    pub fn n_forgotten(&self) -> usize {
        self.table.base
    }

    /// Whether `id` is an op whose record [`Replay::forget_finished`] forgot: one that finished
    /// (ops are numbered in push order, and only the front of the table is forgotten). A live
    /// snapshot may still hold it; the replay counted it and its end.
    pub fn forgot(&self, id: OpId) -> bool {
        self.table
            .newest_forgotten
            .is_some_and(|newest| id <= newest)
    }

    /// The record of the op at `position` (in push order, over the whole run), unless it was
    /// forgotten.
    pub fn op_at(&self, position: usize) -> Option<&OpRecord> {
        self.table.ops.get(position.checked_sub(self.table.base)?)
    }

    /// The times of the first and the last event folded (the interpreter's bookkeeping left
    /// out), if any.
    pub fn time_range(&self) -> Option<(u64, u64)> {
        self.time_range
    }

    /// Says that the run is still going at `now_ns` on the engine's clock (`None`: it ended),
    /// so that the time span reaches now and an op still running is drawn up to now, not up to
    /// the last event.
    pub fn set_now(&mut self, now_ns: Option<u64>) {
        self.now_ns = now_ns;
    }

    /// The engine's clock now while the run goes on (see [`Replay::set_now`]); `None` once it
    /// ended.
    pub fn now_ns(&self) -> Option<u64> {
        self.now_ns
    }

    /// Folds the log's next events (in log order, after those the replay holds) into it, as if
    /// they had been given to [`Replay::new`] with the others. Only the new events are folded,
    /// so a live display can keep one replay and extend it with what arrived since its last
    /// look (`dep_engine::EventLog::events_since`); [`Replay::edges`] are worked out again when
    /// next asked for.
    pub fn extend(&mut self, events: impl IntoIterator<Item = Event>) {
        for event in events {
            self.push_event(event);
        }
    }

    /// Folds the log's next event into the replay, as [`Replay::extend`] does. Returns the
    /// position in [`Replay::ops`] of the op whose record the event made or changed (a push, a
    /// grant of every access, a start, a finish, device times), if any: a caller that keeps an
    /// index of ops by state updates that one op.
    pub fn push_event(&mut self, event: Event) -> Option<usize> {
        let trimmed = match self.bookkeeping.filter(&event) {
            Filtered::Hidden => return None,
            Filtered::Shown => None,
            Filtered::Trimmed(trimmed) => Some(trimmed),
        };
        let event = trimmed.unwrap_or(event);
        let position = self.fold_shown(&event);
        if self.keeps_events {
            self.events.push(event);
        }
        position
    }

    /// Folds an event the bookkeeping filter let through (see [`Replay::push_event`]).
    fn fold_shown(&mut self, event: &Event) -> Option<usize> {
        self.edges.take();
        let position = self.table.apply(event);
        let first_ns = self.time_range.map_or(event.time_ns, |(first, _)| first);
        self.time_range = Some((first_ns, event.time_ns));
        position
    }

    /// Names the variables that the log does not name, because it began after they were
    /// created (a notebook cell's log starts with the cell): `names` are a live engine's, from
    /// its snapshot. A name the log gives is kept.
    pub fn name_vars(&mut self, names: impl IntoIterator<Item = (VarId, Arc<str>)>) {
        for (var, name) in names {
            self.table.var_names.entry(var).or_insert(name);
        }
    }

    /// Names each op's line as the reader numbers it (`cell[2]:3`, see [`Places`]), in its
    /// record and in the frames drawn from the replay.
    pub fn name_places(&mut self, places: &Places) {
        for op in &mut self.table.ops {
            op.place = places.name(op.line);
        }
    }

    /// Names each op's place by its rank and line (`r1:7`) when the replay merges the runs of
    /// `ranks` ranks, whose op n is rank `n % ranks`'s (see [`crate::ranks::merge`]): every
    /// view of the merged run tells which rank pushed an op, not only which worker ran it.
    pub fn name_ranks(&mut self, ranks: u64) {
        if ranks < 2 {
            return;
        }
        for op in &mut self.table.ops {
            let rank = op.id.0 % ranks;
            op.place = Some(Arc::from(match op.line {
                0 => format!("r{rank}"),
                line => format!("r{rank}:{line}"),
            }));
        }
    }

    /// The events, in log order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Names the workers, by worker index: for a replay folded while the run went, before the
    /// engine's worker names were known.
    pub fn set_worker_names(&mut self, worker_names: Vec<String>) {
        self.worker_names = worker_names;
    }

    /// The worker names, by worker index.
    pub fn worker_names(&self) -> &[String] {
        &self.worker_names
    }

    /// A worker's name, or `worker N` when the replay was given no name for it.
    pub fn worker_name(&self, worker: u32) -> String {
        worker_name(&self.worker_names, worker)
    }

    /// The rows of a timeline: every worker of [`Replay::lanes`], then every device lane, by name.
    pub fn timeline_lanes(&self) -> Vec<Lane> {
        let mut device_lanes: Vec<Arc<str>> = Vec::new();
        for span in self.ops().iter().filter_map(|op| op.device_span.as_ref()) {
            if !device_lanes.contains(&span.lane) {
                device_lanes.push(span.lane.clone());
            }
        }
        device_lanes.sort();
        let workers = self.lanes().into_iter().map(Lane::Worker);
        workers
            .chain(device_lanes.into_iter().map(Lane::Device))
            .collect()
    }

    /// A lane's label: the worker's name, or `dev:` and the device lane (`dev:gpu0:s0`).
    pub fn lane_name(&self, lane: &Lane) -> String {
        match lane {
            Lane::Worker(worker) => self.worker_name(*worker),
            Lane::Device(name) => format!("dev:{name}"),
        }
    }

    /// The bars on one lane in the order they start (push order among those that start at
    /// once): ops that started on a worker, or device spans. Push order is not start order: a
    /// worker takes a ready op of higher priority, or one whose accesses were granted earlier,
    /// before one pushed before it.
    pub fn bars(&self, lane: &Lane) -> Vec<Bar<'_>> {
        let (_, end) = self.span_ns();
        let mut bars: Vec<Bar<'_>> = self
            .ops()
            .iter()
            .filter_map(|op| {
                let (start_ns, end_ns) = match lane {
                    Lane::Worker(worker) if op.worker == Some(*worker) => {
                        (op.started_ns?, op.finished_ns.unwrap_or(end))
                    }
                    Lane::Device(name) => {
                        let span = op.device_span.as_ref().filter(|span| span.lane == *name)?;
                        (span.start_ns, span.end_ns)
                    }
                    Lane::Worker(_) => return None,
                };
                Some(Bar {
                    op,
                    start_ns,
                    end_ns,
                })
            })
            .collect();
        bars.sort_by_key(|bar| bar.start_ns);
        bars
    }

    /// The workers to draw lanes for: every named worker and every worker that ran an op.
    pub fn lanes(&self) -> Vec<u32> {
        let mut lanes: Vec<u32> = (0..self.worker_names.len() as u32).collect();
        for worker in self.ops().iter().filter_map(|op| op.worker) {
            if !lanes.contains(&worker) {
                lanes.push(worker);
            }
        }
        lanes.sort_unstable();
        lanes
    }

    /// A variable's name (`v7` when no `VarCreated` event named it).
    pub fn var_name(&self, var: VarId) -> Arc<str> {
        self.table.var_name(var)
    }

    /// Every op, in push order (those after the [`Replay::n_forgotten`] ones).
    pub fn ops(&self) -> &[OpRecord] {
        &self.table.ops
    }

    /// One op by id.
    pub fn op(&self, id: OpId) -> Option<&OpRecord> {
        self.table.op(id)
    }

    /// An op's position (its push number in this log), by id: its index in [`Replay::ops`]
    /// after the [`Replay::n_forgotten`] ones; `None` for a forgotten op.
    pub fn op_position(&self, id: OpId) -> Option<usize> {
        self.table.op_index.get(&id).copied()
    }

    /// Every dependency edge, ordered by their later op, then their earlier op.
    pub fn edges(&self) -> &[Edge] {
        self.edges
            .get_or_init(|| dependency_edges(&self.table.ops, &self.table.op_index))
    }

    /// The op DAG: one node per op (weight: its id), one edge per dependency (weight: the index
    /// into [`Replay::edges`]). Node `i` is op `i` in push order.
    pub fn graph(&self) -> DiGraph<OpId, usize> {
        let ops = self.ops();
        let op_index = &self.table.op_index;
        let edges = self.edges();
        let mut graph = DiGraph::with_capacity(ops.len(), edges.len());
        for op in ops {
            graph.add_node(op.id);
        }
        for (edge_index, edge) in edges.iter().enumerate() {
            graph.add_edge(
                NodeIndex::new(op_index[&edge.from]),
                NodeIndex::new(op_index[&edge.to]),
                edge_index,
            );
        }
        graph
    }

    /// The critical path: the chain of dependent ops with the largest total run time, in order.
    /// Running ops count as taking no time. An op that ran nothing (never started, cancelled, or
    /// skipped because what it reads failed) is on no path: a path is a chain of ops that ran,
    /// each depending on the one before, so one ends before such an op. Of chains of one
    /// length, the one of more steps is taken (an op of no time at the end, a `wait`, is on the
    /// path whether the engine's clock saw it take 100 ns or, under the simulated engine, none),
    /// then the one that ends first; the summary's fold chooses alike.
    ///
    /// A device op's host thread only launches its kernels, which run later on the device: a
    /// chain of device ops that no host op waits for would count only the launches. So the
    /// longest chain of device ops alone, each counting the longer of its launch and its
    /// kernels (see [`OpRecord::work_ns`]), is the critical path where it is longer.
    pub fn critical_path(&self) -> Vec<OpId> {
        self.longest_path()
            .1
            .into_iter()
            .map(|(op, _)| op)
            .collect()
    }

    /// The critical path's ops, each with whether its kernels count for it: a device op on a
    /// chain of device ops whose kernels' span is longer than its launch (its time on the path
    /// is spent on a device lane, not on its worker's).
    pub fn critical_path_lanes(&self) -> Vec<(OpId, bool)> {
        self.longest_path()
            .1
            .into_iter()
            .map(|(id, on_device)| {
                let kernels_count = on_device
                    && self.op(id).is_some_and(|op| {
                        op.device_span.is_some() && op.work_ns() > op.duration_ns().unwrap_or(0)
                    });
                (id, kernels_count)
            })
            .collect()
    }

    /// The critical path's time: its ops' run times, or, for a chain of device ops, their work
    /// times (see [`Replay::critical_path`]).
    pub fn critical_path_ns(&self) -> u64 {
        self.longest_path().0
    }

    /// The critical path's time and its ops, each with whether it is counted on the chain of
    /// device ops (by its work) rather than on the host's (by its run).
    fn longest_path(&self) -> (u64, Vec<(OpId, bool)>) {
        let graph = self.graph();
        // Push order is a topological order (see the invariant), which `toposort` confirms.
        let order = petgraph::algo::toposort(&graph, None)
            .unwrap_or_else(|_| graph.node_indices().collect());
        let ops = self.ops();
        let is_step = |node: NodeIndex| {
            let op = &ops[node.index()];
            op.started_ns.is_some() && !matches!(op.state, OpState::Skipped | OpState::Cancelled)
        };
        let is_device_step =
            |node: NodeIndex| is_step(node) && ops[node.index()].device != engine::Device::Cpu;
        // By node: the length and number of steps of the longest chain up to and with it, and
        // the node before it on that chain; for a device op, the chain through device ops
        // counting their work, and whether the node before is on such a chain too.
        let mut host: Vec<Link> = vec![Link::default(); graph.node_count()];
        let mut device: Vec<Link> = vec![Link::default(); graph.node_count()];
        for &node in &order {
            if !is_step(node) {
                continue;
            }
            let op = &ops[node.index()];
            let preds = || {
                graph
                    .neighbors_directed(node, petgraph::Direction::Incoming)
                    .filter(|previous| is_step(*previous))
            };
            let after = |links: &[Link], previous: NodeIndex, on_device: bool| Link {
                before: Some((previous, on_device)),
                ..links[previous.index()]
            };
            let before = preds()
                .map(|previous| after(&host, previous, false))
                .max_by_key(Link::rank)
                .unwrap_or_default();
            host[node.index()] = before.then(op.duration_ns().unwrap_or(0));
            if is_device_step(node) {
                let before = preds()
                    .map(|previous| after(&host, previous, false))
                    .chain(
                        preds()
                            .filter(|previous| is_device_step(*previous))
                            .map(|previous| after(&device, previous, true)),
                    )
                    .max_by_key(Link::rank)
                    .unwrap_or_default();
                device[node.index()] = before.then(op.work_ns());
            }
        }
        let end_of = |links: &[Link]| {
            (0..links.len())
                .filter(|&index| links[index].n_steps > 0)
                .max_by_key(|&index| {
                    (
                        links[index].ns,
                        links[index].n_steps,
                        std::cmp::Reverse(index),
                    )
                })
        };
        let (mut at, mut on_device) = match (end_of(&host), end_of(&device)) {
            (Some(host_end), Some(device_end)) if device[device_end].ns > host[host_end].ns => {
                (Some(NodeIndex::new(device_end)), true)
            }
            (Some(host_end), _) => (Some(NodeIndex::new(host_end)), false),
            (None, device_end) => (device_end.map(NodeIndex::new), true),
        };
        let ns = at.map_or(0, |node| match on_device {
            true => device[node.index()].ns,
            false => host[node.index()].ns,
        });
        let mut path = Vec::new();
        while let Some(node) = at {
            path.push((ops[node.index()].id, on_device));
            let link = if on_device { &device } else { &host }[node.index()];
            at = link.before.map(|(before, _)| before);
            on_device = link.before.is_some_and(|(_, on_device)| on_device);
        }
        path.reverse();
        (ns, path)
    }

    /// The earliest push and the latest finish (of an op or of its device work): the span the
    /// views draw.
    pub fn span_ns(&self) -> (u64, u64) {
        let start = self.ops().iter().map(|op| op.pushed_ns).min().unwrap_or(0);
        let end = self
            .ops()
            .iter()
            .flat_map(|op| {
                let device_end = op.device_span.as_ref().map(|span| span.end_ns);
                [
                    op.finished_ns,
                    op.started_ns,
                    Some(op.pushed_ns),
                    device_end,
                ]
            })
            .flatten()
            .chain(self.now_ns)
            .max()
            .unwrap_or(start);
        (start, end.max(start))
    }

    /// One event in words, for steppers: `granted B to D = B * C (line 4)`.
    pub fn describe_event(&self, index: usize) -> String {
        let Some(event) = self.events.get(index) else {
            return "the start".to_string();
        };
        let op_text = |op: &OpId| {
            self.op(*op)
                .map_or_else(|| op.to_string(), OpRecord::describe)
        };
        match &event.kind {
            EventKind::VarCreated { name, .. } => format!("created {name}"),
            EventKind::VarDeleted { var } => format!("deleted {}", self.var_name(*var)),
            EventKind::Pushed { op, .. } => format!("pushed {}", op_text(op)),
            EventKind::Granted { op, var } => {
                format!("granted {} to {}", self.var_name(*var), op_text(op))
            }
            EventKind::Ready { op } => format!("ready: {}", op_text(op)),
            EventKind::Cancelled { op } => format!(
                "cancelled {} (it keeps its place in its queues until its turn)",
                op_text(op)
            ),
            EventKind::Started { op, worker } => {
                format!("started {} on {}", op_text(op), self.worker_name(*worker))
            }
            EventKind::Finished { op, state, .. } => {
                format!("{} {}", state.name(), op_text(op))
            }
            EventKind::DeviceSpan {
                op,
                lane,
                start_ns,
                end_ns,
            } => format!(
                "dev:{lane} ran the kernels of {} for {}",
                op_text(op),
                crate::format_ns(end_ns.saturating_sub(*start_ns))
            ),
        }
    }
}

pub(crate) fn worker_name(worker_names: &[String], worker: u32) -> String {
    worker_names
        .get(worker as usize)
        .cloned()
        .unwrap_or_else(|| format!("worker {worker}"))
}

/// The data dependencies of ops in push order (see [`Edge`]).
fn dependency_edges(ops: &[OpRecord], op_index: &HashMap<OpId, usize>) -> Vec<Edge> {
    #[derive(Default)]
    struct History {
        last_write: Option<OpId>,
        reads_since: Vec<OpId>,
    }
    let mut histories: HashMap<VarId, History> = HashMap::new();
    let mut edges: Vec<Edge> = Vec::new();
    for op in ops {
        let first_edge = edges.len();
        let mut add = |from: OpId, var: VarId, hazard: Hazard| {
            if from == op.id {
                return;
            }
            if let Some(edge) = edges[first_edge..]
                .iter_mut()
                .find(|edge| edge.from == from)
            {
                if !edge.dependencies().any(|known| known == (var, hazard)) {
                    edge.more.push((var, hazard));
                }
                return;
            }
            let producer = &ops[op_index[&from]];
            let finished_before_push =
                matches!(producer.finished_at, Some(finished_at) if finished_at < op.pushed_at);
            let queued = !finished_before_push;
            edges.push(Edge {
                from,
                to: op.id,
                var,
                hazard,
                more: Vec::new(),
                queued,
            });
        };
        for var in &op.reads {
            let history = histories.entry(*var).or_default();
            if let Some(writer) = history.last_write {
                add(writer, *var, Hazard::ReadAfterWrite);
            }
            history.reads_since.push(op.id);
        }
        for var in &op.writes {
            let history = histories.entry(*var).or_default();
            if history.reads_since.is_empty() {
                if let Some(writer) = history.last_write {
                    add(writer, *var, Hazard::WriteAfterWrite);
                }
            }
            for reader in std::mem::take(&mut history.reads_since) {
                add(reader, *var, Hazard::WriteAfterRead);
            }
            history.last_write = Some(op.id);
        }
        edges[first_edge..].sort_by_key(|edge| op_index[&edge.from]);
    }
    edges
}

impl OpTable {
    /// Folds the log's next event. Returns the position (in `ops`) of the op whose record it
    /// made or changed, if any.
    fn apply(&mut self, event: &Event) -> Option<usize> {
        let index = self.n_events;
        self.n_events += 1;
        let time_ns = event.time_ns;
        match &event.kind {
            EventKind::VarCreated { var, name } => {
                self.var_names.insert(*var, name.clone());
                None
            }
            EventKind::VarDeleted { var } => {
                if self.forgets_deleted_vars {
                    self.var_names.remove(var);
                }
                None
            }
            EventKind::Granted { .. } => None,
            EventKind::Pushed {
                op,
                label,
                line,
                reads,
                writes,
                device,
                priority,
            } => {
                let position = self.base + self.ops.len();
                self.op_index.insert(*op, position);
                self.ops.push(OpRecord {
                    id: *op,
                    label: label.clone(),
                    line: *line,
                    place: None,
                    device: *device,
                    priority: *priority,
                    reads: reads.clone(),
                    writes: writes.clone(),
                    pushed_ns: time_ns,
                    ready_ns: None,
                    started_ns: None,
                    finished_ns: None,
                    worker: None,
                    state: OpState::Waiting,
                    message: None,
                    pushed_at: index,
                    finished_at: None,
                    device_span: None,
                });
                Some(position)
            }
            EventKind::Ready { op } => self.update(*op, |record| {
                // A cancelled op stays cancelled while it waits for its turn.
                if record.state != OpState::Cancelled {
                    record.state = OpState::Ready;
                }
                record.ready_ns = Some(time_ns);
            }),
            EventKind::Cancelled { op } => self.update(*op, |record| {
                if matches!(record.state, OpState::Waiting | OpState::Ready) {
                    record.state = OpState::Cancelled;
                }
            }),
            EventKind::Started { op, worker } => self.update(*op, |record| {
                record.state = OpState::Running;
                record.started_ns = Some(time_ns);
                record.worker = Some(*worker);
            }),
            EventKind::Finished { op, state, message } => self.update(*op, |record| {
                record.state = *state;
                record.finished_ns = Some(time_ns);
                record.finished_at = Some(index);
                record.message = message.clone();
            }),
            EventKind::DeviceSpan {
                op,
                lane,
                start_ns,
                end_ns,
            } => self.update(*op, |record| {
                // A span read from a file may end before it starts: it then takes no time.
                let end_ns = end_ns.max(start_ns);
                // Several reports for one op (its kernels timed in parts) cover them all.
                let span = record.device_span.get_or_insert_with(|| DeviceSpan {
                    lane: lane.clone(),
                    start_ns: *start_ns,
                    end_ns: *end_ns,
                });
                span.start_ns = span.start_ns.min(*start_ns);
                span.end_ns = span.end_ns.max(*end_ns);
            }),
        }
    }

    /// Changes the record of `op`, when the table has one; returns its position.
    fn update(&mut self, op: OpId, change: impl FnOnce(&mut OpRecord)) -> Option<usize> {
        let position = *self.op_index.get(&op)?;
        change(&mut self.ops[position - self.base]);
        Some(position)
    }

    /// One op by id.
    fn op(&self, id: OpId) -> Option<&OpRecord> {
        self.op_index
            .get(&id)
            .map(|&position| &self.ops[position - self.base])
    }

    /// A variable's name (`v7` when no `VarCreated` event named it).
    fn var_name(&self, var: VarId) -> Arc<str> {
        self.var_names
            .get(&var)
            .cloned()
            .unwrap_or_else(|| Arc::from(var.to_string()))
    }
}

/// Every access that each access not yet granted in `queue` waits behind, by the engine's rule:
/// a write waits for every read since the last write before it (all of them: two running reads
/// are two blockers), or for that write when no read came since; a read waits for the last
/// write before it.
pub(crate) fn blockers(var: VarId, queue: &[AccessSnapshot]) -> Vec<(OpId, Blocker)> {
    let mut found = Vec::new();
    let mut last_write: Option<OpId> = None;
    let mut reads_since: Vec<OpId> = Vec::new();
    for access in queue {
        if !access.granted {
            let blocker = |behind: OpId, behind_writes: bool| {
                (
                    access.op,
                    Blocker {
                        var,
                        behind,
                        behind_writes,
                    },
                )
            };
            if !access.write {
                found.extend(last_write.map(|op| blocker(op, true)));
            } else if reads_since.is_empty() {
                found.extend(last_write.map(|op| blocker(op, true)));
            } else {
                found.extend(reads_since.iter().map(|op| blocker(*op, false)));
            }
        }
        if access.write {
            last_write = Some(access.op);
            reads_since.clear();
        } else {
            reads_since.push(access.op);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_extended_piece_by_piece_is_the_replay_of_the_whole_log() {
        let whole = crate::tests::threaded_mutation_replay();
        let events = whole.events().to_vec();
        let worker_names = whole.worker_names().to_vec();
        for split in 0..=events.len() {
            let mut replay = Replay::new(events[..split].to_vec(), worker_names.clone());
            // Edges worked out before an extension are worked out again after it.
            let _ = replay.edges();
            let (middle, last) = events[split..].split_at((events.len() - split) / 2);
            replay.extend(middle.iter().cloned());
            replay.extend(last.iter().cloned());
            assert_eq!(replay.events(), whole.events());
            assert_eq!(replay.ops(), whole.ops());
            assert_eq!(replay.edges(), whole.edges());
            assert_eq!(replay.critical_path(), whole.critical_path());
            assert_eq!(replay.final_frame(), whole.final_frame());
            assert_eq!(replay.frame_at(split), whole.frame_at(split));
        }
    }

    #[test]
    fn push_event_names_the_op_whose_record_changed() {
        let whole = crate::tests::threaded_mutation_replay();
        let mut replay = Replay::new(Vec::new(), whole.worker_names().to_vec());
        for event in whole.events() {
            let position = replay.push_event(event.clone());
            let op = match &event.kind {
                EventKind::Pushed { op, .. }
                | EventKind::Ready { op }
                | EventKind::Cancelled { op }
                | EventKind::Started { op, .. }
                | EventKind::Finished { op, .. }
                | EventKind::DeviceSpan { op, .. } => Some(*op),
                EventKind::VarCreated { .. }
                | EventKind::VarDeleted { .. }
                | EventKind::Granted { .. } => None,
            };
            assert_eq!(position.map(|position| replay.ops()[position].id), op);
        }
        assert_eq!(replay.ops(), whole.ops());
    }

    #[test]
    fn while_the_run_goes_on_the_span_and_a_running_bar_reach_now() {
        let whole = crate::tests::threaded_mutation_replay();
        // Cut the log just after some op started: that op is running.
        let started = whole
            .events()
            .iter()
            .position(|event| matches!(event.kind, dep_engine::EventKind::Started { .. }))
            .expect("an op starts");
        let mut replay = Replay::new(
            whole.events()[..=started].to_vec(),
            whole.worker_names().to_vec(),
        );
        let (start, end) = replay.span_ns();
        let running = |replay: &Replay| {
            let lanes = replay.lanes();
            lanes
                .iter()
                .flat_map(|worker| replay.bars(&Lane::Worker(*worker)))
                .filter(|bar| bar.op.finished_ns.is_none())
                .map(|bar| bar.end_ns)
                .collect::<Vec<_>>()
        };
        assert_eq!(running(&replay), vec![end], "up to the last event");
        let now = end + 5_000_000;
        replay.set_now(Some(now));
        assert_eq!(replay.span_ns(), (start, now));
        assert_eq!(running(&replay), vec![now], "up to now");
        replay.set_now(None);
        assert_eq!(replay.span_ns(), (start, end));
    }
}
