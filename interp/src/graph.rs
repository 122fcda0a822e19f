//! Graph mode (seed 003, SINGA): a block recorded once as ops, analysed into a DAG with
//! petgraph, then replayed any number of times with memory optimisations.
//!
//! Recording runs the block's statements without pushing them: each statement's [`ComputeOp`]
//! is kept, and every buffer a name first assigned inside the block (or a function temporary)
//! needs is the graph's own ("internal"). Names that existed before the block are read and
//! written as usual and keep their values after a run: to keep a result, define its name before
//! the graph. They are used by name ([`External`]): a run uses the variable each is bound to
//! then, as a function call does, so a name deleted and assigned again is the new variable.
//!
//! Communication statements are recorded too: each replay posts a fresh communication,
//! numbered as the rank's next of its kind at the replay's push (`CommKind::numbered`), so that
//! every rank that replays the same graph matches the same communications.
//!
//! A replay pushes the recorded ops again, so the engine runs them with its usual parallelism;
//! with `with bulk = N`, up to N consecutive ops of one device go as one engine op
//! (`segment.rs`).
//! Optimisations, each switchable with `with lazy = 0`, `with recycle = 0`, `with share = 0`:
//! - lazy allocation: an internal buffer exists from its first write; with `lazy = 0` internal
//!   buffers are kept for the graph's whole life, as a static allocator would;
//! - recycling: an internal buffer is released right after its last reader in the graph
//!   (a write op on its variable, so the engine orders it after every reader); with
//!   `recycle = 0` they are released at the end of each run. A buffer smaller than
//!   `recycle_from` bytes ([`RECYCLE_FROM`], 16 KiB, unless `with recycle_from = BYTES` says
//!   otherwise) is kept by its variable from run to run, as eager mode keeps it: its release
//!   and its next write's allocation cost more than the kernel that fills it (issue 16), for
//!   memory that hardly counts. Its release op keeps it (a release decides by the size it finds,
//!   so every run keeps and frees the same buffers), and once the graph has measured its size,
//!   replays no longer push that op at all. The graph measures its buffers only when every op
//!   it pushed has finished ([`Graph::measure`]: at a `wait`, a `print` of the graph, the end
//!   of a run, and at its second run, which waits for the first once to learn them), never
//!   from what a run that may still be going happens to show: which ops a replay pushes is
//!   the same on every engine, run after run (the simulated clock's determinism needs it, and
//!   a user comparing engines sees the same DAG). A kept buffer that grows stays with its
//!   variable, as eager mode would hold it, until the graph measures again; it is released
//!   from the next run on;
//! - sharing: released buffers go to a pool keyed by size that serves the graph's later
//!   allocations.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dep_engine as engine;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;

use crate::comm::ops::CommOp;
use crate::comm::CommCounters;
use crate::compute::ComputeOp;
use crate::pushed_within::{Frame as WithinFrame, PushedWithin, ReplayWithin, Within};
use crate::segment::{FailedStep, FailedSteps, Segment, SegmentBuilder, SegmentContext};
use crate::slot::{RngSlot, Slot, SlotMover};
use crate::tensor::{format_bytes, BufferPool};
use dep_views::text::count;

/// One op of a recorded block: a computation, or a communication with another rank.
pub(crate) enum RecordedOp {
    Compute(ComputeOp),
    Comm(CommOp),
}

impl RecordedOp {
    /// The slots it reads.
    pub(crate) fn inputs(&self) -> &[Arc<Slot>] {
        match self {
            RecordedOp::Compute(op) => &op.inputs,
            RecordedOp::Comm(op) => op.inputs(),
        }
    }

    /// The slots it writes.
    pub(crate) fn outputs(&self) -> &[Arc<Slot>] {
        match self {
            RecordedOp::Compute(op) => &op.outputs,
            RecordedOp::Comm(op) => op.outputs(),
        }
    }

    /// Its statement's label.
    pub(crate) fn label(&self) -> &Arc<str> {
        match self {
            RecordedOp::Compute(op) => &op.label,
            RecordedOp::Comm(op) => &op.label,
        }
    }

    /// Its statement's session-wide line.
    pub(crate) fn line(&self) -> u32 {
        match self {
            RecordedOp::Compute(op) => op.line,
            RecordedOp::Comm(op) => op.line,
        }
    }

    /// Its estimated cost in microseconds, for upward ranks: a plan's estimate; a
    /// communication, whose size is known only when it runs, counts one microsecond, like
    /// any op but `work(ms)`.
    fn estimated_us(&self) -> f64 {
        match self {
            RecordedOp::Compute(op) => op.plan.estimated_us(),
            RecordedOp::Comm(_) => 1.0,
        }
    }

    /// Rebinds it to the slots of another engine (see [`Graph::move_to`]).
    fn move_to(&mut self, slots: &mut SlotMover<'_>, rng: &Arc<RngSlot>) {
        self.each_slot(|slot| *slot = slots.slot(slot));
        if let RecordedOp::Compute(op) = self {
            if op.rng.is_some() {
                op.rng = Some(rng.clone());
            }
        }
    }

    /// Calls `change` on every slot it reads or writes.
    fn each_slot(&mut self, mut change: impl FnMut(&mut Arc<Slot>)) {
        match self {
            RecordedOp::Compute(op) => op.inputs.iter_mut().chain(&mut op.outputs).for_each(change),
            RecordedOp::Comm(op) => {
                for slot in op.input.iter_mut().chain(&mut op.output) {
                    change(slot);
                }
            }
        }
    }

    fn set_communicator(&mut self, comm: &Arc<dyn crate::comm::Communicator>) {
        if let RecordedOp::Comm(op) = self {
            op.comm = comm.clone();
        }
    }

    fn set_priority(&mut self, priority: i32) {
        match self {
            RecordedOp::Compute(op) => op.priority = priority,
            RecordedOp::Comm(op) => op.priority = priority,
        }
    }
}

/// What recording a block collects.
pub(crate) struct Recording {
    /// What is recorded, for the errors that refuse what cannot be.
    pub(crate) block: RecordedBlock,
    pub(crate) ops: Vec<RecordedOp>,
    /// By op: the calls and loop iterations of the block it was recorded within.
    pub(crate) within: Vec<Within>,
    /// The frame the block was recorded within (see [`PushedWithin::within_since`]).
    pub(crate) base: Option<Arc<WithinFrame>>,
    /// Slots created while recording: the graph's own buffers.
    pub(crate) internals: Vec<Arc<Slot>>,
    /// The names the ops' other slots were bound to when the block ended (see [`External`]).
    pub(crate) externals: Vec<External>,
}

/// A variable a graph uses that is not its own, and the global name it was found under: a
/// replay uses the variable that name is bound to now (see [`Graph::rebind`]), as a function
/// reads the global its name is bound to at each call.
pub(crate) struct External {
    /// The global name.
    pub(crate) name: Arc<str>,
    /// For `x = slots(n)`: the entry `x[i]` of the list the name is bound to.
    pub(crate) entry: Option<usize>,
    /// The variable the graph's ops use now.
    pub(crate) slot: Arc<Slot>,
}

impl Recording {
    /// An empty recording of `block`, recorded within the frame `base`.
    pub(crate) fn new(block: RecordedBlock, base: Option<Arc<WithinFrame>>) -> Recording {
        Recording {
            block,
            ops: Vec::new(),
            within: Vec::new(),
            base,
            internals: Vec::new(),
            externals: Vec::new(),
        }
    }

    /// Records `op`, made now within the frames `pushed_within` is in.
    pub(crate) fn push(&mut self, op: RecordedOp, pushed_within: &PushedWithin) {
        self.ops.push(op);
        self.within.push(pushed_within.within_since(&self.base));
    }

    /// Whether the ops recorded so far write `slot`, or it is one of the graph's own buffers:
    /// its value is not known until the block runs.
    pub(crate) fn computes(&self, slot: &Arc<Slot>) -> bool {
        self.internals
            .iter()
            .any(|internal| Arc::ptr_eq(internal, slot))
            || self
                .ops
                .iter()
                .any(|op| op.outputs().iter().any(|output| Arc::ptr_eq(output, slot)))
    }
}

/// The kind of block being recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordedBlock {
    /// `graph NAME { ... }`, replayed by `run NAME`.
    Graph,
    /// `priority auto { ... }`, recorded for its critical path, then pushed once.
    PriorityAuto,
}

impl RecordedBlock {
    /// What it is, as an error names it: "graph".
    pub(crate) fn noun(self) -> &'static str {
        match self {
            RecordedBlock::Graph => "graph",
            RecordedBlock::PriorityAuto => "`priority auto` block",
        }
    }
}

/// The kind of a dependency edge between two recorded ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dependency {
    /// The later op reads what the earlier one wrote.
    ReadAfterWrite,
    /// The later op overwrites what the earlier one read.
    WriteAfterRead,
    /// The later op overwrites what the earlier one wrote.
    WriteAfterWrite,
}

impl Dependency {
    fn short(self) -> &'static str {
        match self {
            Dependency::ReadAfterWrite => "RAW",
            Dependency::WriteAfterRead => "WAR",
            Dependency::WriteAfterWrite => "WAW",
        }
    }
}

/// The kinds of conflict behind one edge of a graph's DAG, in the order found (reads first):
/// `A = C * 2` after `C = A + 2` is one edge, RAW on C and WAR on A.
type Dependencies = smallvec::SmallVec<[Dependency; 1]>;

/// How a replay manages the graph's own buffers, and how many ops it bulks into one engine op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReplayOptions {
    pub(crate) lazy: bool,
    pub(crate) recycle: bool,
    pub(crate) share: bool,
    /// `with bulk = N`: consecutive ops of one device, N at most, run as one engine op.
    pub(crate) bulk: usize,
    /// `with recycle_from = BYTES`: internal buffers smaller than this are kept from run to run.
    pub(crate) recycle_from: u64,
}

/// The size from which an internal buffer is recycled by default (see the module's doc): a
/// release op and a pooled allocation cost about 0.34 µs (`bench/README.md`, "Graph mode"), the
/// time of an elementwise kernel over about 1,500 `f32`s on one core; at 4,096 they still add a
/// third to the kernel, and below that recycling costs more time than its memory is worth.
pub(crate) const RECYCLE_FROM: u64 = 16 * 1024;

impl Default for ReplayOptions {
    fn default() -> ReplayOptions {
        ReplayOptions {
            lazy: true,
            recycle: true,
            share: true,
            bulk: 1,
            recycle_from: RECYCLE_FROM,
        }
    }
}

/// The most ops `with bulk = N` puts in one engine op.
pub(crate) const MAX_BULK: usize = 1024;

/// What a replay pushes, made once for a set of options and of buffers kept from run to run,
/// and pushed again while they stay the same.
struct Prepared {
    options: ReplayOptions,
    /// By internal index: whether the buffer is kept from run to run, its release op not pushed
    /// (see [`Graph::is_small`]).
    kept: Vec<bool>,
    segments: Vec<Segment>,
    /// By engine op the segments push: the frames within the block its ops were recorded
    /// within; `None` when every op was recorded in the block itself.
    within: Option<ReplayWithin>,
}

/// A recorded block.
pub(crate) struct Graph {
    name: Arc<str>,
    ops: Vec<RecordedOp>,
    /// By op: the calls and loop iterations of the block it was recorded within.
    within: Vec<Within>,
    /// The first and last session-wide lines of its statements.
    lines: (u32, u32),
    internals: Vec<Arc<Slot>>,
    /// The variables it uses that are not its own, by the global names they are bound to.
    externals: Vec<External>,
    /// When its externals' names were last found bound to them (see [`Graph::names_checked`]).
    names_checked: Option<(u64, u64)>,
    /// For each op, the internals whose last use it is.
    release_after: Vec<Vec<usize>>,
    /// The ops (node weight: op index) and their dependencies.
    dag: DiGraph<usize, Dependencies>,
    pool: Arc<BufferPool>,
    /// The byte size of each internal buffer, as seen when it was last released (or, for one
    /// kept from run to run, when the graph was last measured); ops write it as they run. Then,
    /// from `internals.len()` on, the byte size of each external variable (0: unknown) as the
    /// first op of a run that uses it left it, or as the graph last measured it: the size the
    /// memory estimate counts, which a variable deleted since keeps.
    internal_bytes: Arc<Vec<AtomicU64>>,
    /// The byte size of each internal buffer (0: unknown) when the graph was last measured, at
    /// a moment when every op it had pushed was done ([`Graph::measure`]); `None` until then.
    /// What decides which buffers replays keep: it changes only at those moments, so the same
    /// script pushes the same ops on every engine.
    measured: Option<Vec<u64>>,
    runs: u64,
    /// What a replay pushes, made for the options and kept buffers of the latest run.
    prepared: Option<Prepared>,
    /// The statements that failed inside bulks, for their reports.
    failed_steps: Arc<FailedSteps>,
}

impl Graph {
    /// Its own buffers (the variables first assigned in its block), which go with it.
    pub(crate) fn into_internals(self) -> Vec<Arc<Slot>> {
        self.internals
    }

    /// Whether one of its statements is at session-wide line `line`: an op of that line failing
    /// on the engine was pushed by one of its replays.
    pub(crate) fn has_statement_at(&self, line: u32) -> bool {
        self.ops.iter().any(|op| op.line() == line)
    }

    /// Whether a replay writes `slot`.
    pub(crate) fn writes(&self, slot: &Arc<Slot>) -> bool {
        self.ops
            .iter()
            .any(|op| op.outputs().iter().any(|output| Arc::ptr_eq(output, slot)))
    }

    /// Analyses a recording.
    pub(crate) fn new(name: &str, recording: Recording) -> Graph {
        let Recording {
            ops,
            within,
            internals,
            externals,
            ..
        } = recording;
        let dag = dependency_dag(&ops);
        let mut release_after = vec![Vec::new(); ops.len()];
        for (internal_index, internal) in internals.iter().enumerate() {
            let last_use = ops.iter().rposition(|op| {
                op.inputs()
                    .iter()
                    .chain(op.outputs())
                    .any(|slot| Arc::ptr_eq(slot, internal))
            });
            if let Some(last_use) = last_use {
                release_after[last_use].push(internal_index);
            }
        }
        let internal_bytes = Arc::new(
            (0..internals.len() + externals.len())
                .map(|_| AtomicU64::new(0))
                .collect(),
        );
        let lines = ops.iter().map(RecordedOp::line);
        let lines = (lines.clone().min().unwrap_or(0), lines.max().unwrap_or(0));
        Graph {
            name: Arc::from(name),
            ops,
            within,
            lines,
            internals,
            externals,
            names_checked: None,
            release_after,
            dag,
            pool: BufferPool::new(),
            internal_bytes,
            measured: None,
            runs: 0,
            prepared: None,
            failed_steps: Arc::default(),
        }
    }

    /// Whether `name` is one of the graph's own buffers: first assigned inside the block, so
    /// gone once a run no longer needs it.
    pub(crate) fn has_internal_named(&self, name: &str) -> bool {
        self.internals.iter().any(|slot| slot.var.name() == name)
    }

    /// The same graph under another name.
    pub(crate) fn named(mut self, name: &str) -> Graph {
        self.name = Arc::from(name);
        self
    }

    /// Rebinds the graph to another engine (an engine switch): every slot its ops and own
    /// buffers use becomes its moved slot in `slots`, the generator `rng`, and what a replay
    /// pushes is made again at the next run. The analysis (DAG, releases, sizes, failed
    /// statements) stands: slots move one to one.
    pub(crate) fn move_to(&mut self, slots: &mut SlotMover<'_>, rng: &Arc<RngSlot>) {
        for op in &mut self.ops {
            op.move_to(slots, rng);
        }
        for internal in &mut self.internals {
            *internal = slots.slot(internal);
        }
        for external in &mut self.externals {
            external.slot = slots.slot(&external.slot);
        }
        self.names_checked = None;
        self.prepared = None;
    }

    /// The variables it uses that are not its own, with the global names they were bound to.
    pub(crate) fn externals(&self) -> &[External] {
        &self.externals
    }

    /// Makes its ops use `now` in place of the variable of external `index`: its name was
    /// deleted and bound again since (a replay uses the variable the name is bound to now, as a
    /// function call does). `now` must be a variable the graph does not use yet, so the DAG,
    /// and each op's in-place updates, stand as analysed. What a replay pushes is made again.
    pub(crate) fn rebind(&mut self, index: usize, now: Arc<Slot>) {
        let old = std::mem::replace(&mut self.externals[index].slot, now.clone());
        for op in &mut self.ops {
            op.each_slot(|slot| {
                if Arc::ptr_eq(slot, &old) {
                    *slot = now.clone();
                }
            });
        }
        self.prepared = None;
    }

    /// The runner and its statement cache's epoch under which the names of its externals were
    /// last found bound to its variables (`Runner::rebind_graph`): while both stand, no name
    /// was bound anew and a run need not look them up again.
    pub(crate) fn names_checked(&self) -> Option<(u64, u64)> {
        self.names_checked
    }

    /// Notes that its externals' names were found bound to its variables under `at` (see
    /// [`Graph::names_checked`]).
    pub(crate) fn note_names_checked(&mut self, at: (u64, u64)) {
        self.names_checked = Some(at);
    }

    /// Whether one of its ops reads or writes `slot`.
    pub(crate) fn uses(&self, slot: &Arc<Slot>) -> bool {
        self.ops.iter().any(|op| {
            op.inputs()
                .iter()
                .chain(op.outputs())
                .any(|used| Arc::ptr_eq(used, slot))
        })
    }

    /// Makes the graph's communications go through `comm` from its next run on: the session's
    /// ranks changed (`:engine naive` after `:engine sim --ranks N` is one rank again), and a
    /// communication posted to ranks that are gone would wait for them forever.
    pub(crate) fn set_communicator(&mut self, comm: &Arc<dyn crate::comm::Communicator>) {
        for op in &mut self.ops {
            op.set_communicator(comm);
        }
        self.prepared = None;
    }

    /// The first of the graph's communications that names a rank outside a job of `size`
    /// ranks, with that rank: recorded with more ranks than the session has now, it would wait
    /// for a rank that is not there.
    pub(crate) fn rank_outside(&self, size: usize) -> Option<(&CommOp, usize)> {
        self.ops.iter().find_map(|op| match op {
            RecordedOp::Comm(op) => op
                .kind
                .named_rank()
                .filter(|rank| *rank >= size)
                .map(|rank| (op, rank)),
            RecordedOp::Compute(_) => None,
        })
    }

    /// HEFT's upward rank of every op, in microseconds: its estimated cost plus the largest rank
    /// of the ops that depend on it, i.e. the longest path from the op to the end of the block
    /// (seed 004). Costs are estimated statically: `work(ms)` takes its milliseconds; any other
    /// op counts one microsecond.
    pub(crate) fn upward_ranks(&self) -> Vec<f64> {
        let mut ranks: Vec<f64> = self.ops.iter().map(RecordedOp::estimated_us).collect();
        for node in self.dag.node_indices().rev() {
            let op = self.dag[node];
            let tail = self
                .dag
                .edges_directed(node, petgraph::Direction::Outgoing)
                .map(|edge| ranks[self.dag[edge.target()]])
                .fold(0.0, f64::max);
            ranks[op] += tail;
        }
        ranks
    }

    /// Pushes the ops once with their upward ranks as priorities (`priority auto`); its
    /// communications take their numbers from `counters`.
    pub(crate) fn run_with_upward_ranks(
        mut self,
        engine: &engine::Engine,
        counters: &mut CommCounters,
    ) {
        let ranks = self.upward_ranks();
        for (op, rank) in self.ops.iter_mut().zip(ranks) {
            op.set_priority(rank.round().clamp(0.0, i32::MAX as f64) as i32);
        }
        self.replay(engine, counters, ReplayOptions::default(), None);
    }

    /// Pushes the recorded ops, with releases of internal buffers and bulking as `options` say;
    /// each communication is posted afresh, numbered from `counters`. With `run`, the pushes
    /// are within a `run` frame of `pushed_within` at the `run` statement's `site` (its session
    /// source chunk and byte offset), which knows the frames each op was recorded within.
    pub(crate) fn replay(
        &mut self,
        engine: &engine::Engine,
        counters: &mut CommCounters,
        options: ReplayOptions,
        run: Option<(&mut PushedWithin, (usize, usize))>,
    ) {
        let keeps = |index| self.is_small(index, options);
        let stale = self.prepared.as_ref().is_none_or(|prepared| {
            prepared.options != options
                || (0..self.internals.len()).any(|index| prepared.kept[index] != keeps(index))
        });
        if stale {
            let kept: Vec<bool> = (0..self.internals.len()).map(keeps).collect();
            let (segments, covers) = self.segments_for(options, &kept);
            let within = self.replay_within(&covers);
            self.prepared = Some(Prepared {
                options,
                kept,
                segments,
                within,
            });
        }
        if let Some(prepared) = &self.prepared {
            let run = run.map(|(pushed_within, site)| {
                let ops = prepared.within.clone();
                pushed_within.enter_run(engine, &self.name, site, self.lines, ops);
                pushed_within
            });
            for segment in &prepared.segments {
                segment.push(engine, counters);
            }
            if let Some(pushed_within) = run {
                pushed_within.leave(engine);
            }
        }
        self.runs += 1;
    }

    /// The frames each engine op of a replay was recorded within, by engine op; `covers` says
    /// which recorded ops each runs. `None` when every op was recorded in the block itself.
    fn replay_within(&self, covers: &[std::ops::Range<usize>]) -> Option<ReplayWithin> {
        if self.within.iter().all(Within::is_empty) {
            return None;
        }
        Some(
            covers
                .iter()
                .map(|ops| {
                    ops.clone()
                        .map(|op| (self.ops[op].line(), self.within[op].clone()))
                        .collect()
                })
                .collect(),
        )
    }

    /// Whether internal buffer `index` is kept from run to run under `options`: the graph has
    /// measured its size, and that is below `recycle_from` (see the module's doc).
    fn is_small(&self, index: usize, options: ReplayOptions) -> bool {
        self.measured.as_ref().is_some_and(|measured| {
            let bytes = measured[index];
            bytes > 0 && bytes < options.recycle_from
        })
    }

    /// Whether the next replay under `options` must first wait for every op pushed so far and
    /// [`Graph::measure`] the buffers: the graph ran and was never measured, and `options` may
    /// keep a buffer from run to run. Its second run then decides, on every engine alike, from
    /// the sizes of the first (once: later replays use what the graph measured last).
    pub(crate) fn wants_measuring(&self, options: ReplayOptions) -> bool {
        self.runs > 0
            && self.measured.is_none()
            && options.lazy
            && options.recycle_from > 0
            && !self.internals.is_empty()
    }

    /// Measures the internal buffers; the caller has waited until every op pushed so far is
    /// done (a `wait`, a `print` of a graph, the end of a run, or the wait of
    /// [`Graph::wants_measuring`]), so the sizes are those the last run left, whatever the
    /// engine and its timing: a buffer held now by its size, one released by the size its
    /// release saw. Nothing before the first run.
    pub(crate) fn measure(&mut self) {
        if self.runs == 0 {
            return;
        }
        let measured = self
            .internals
            .iter()
            .zip(self.internal_bytes.iter())
            .map(|(internal, noted)| {
                if let Some(bytes) = internal.bytes_now() {
                    noted.store(bytes as u64, Ordering::Relaxed);
                }
                noted.load(Ordering::Relaxed)
            })
            .collect();
        self.measured = Some(measured);
        let external_bytes = &self.internal_bytes[self.internals.len()..];
        for (external, noted) in self.externals.iter().zip(external_bytes) {
            if let Some(bytes) = external.slot.bytes_now() {
                noted.store(bytes as u64, Ordering::Relaxed);
            }
        }
    }

    /// The internal buffers `op` writes whose size the graph has not measured, for it to note
    /// as it runs (for the memory estimate of a graph not measured yet).
    fn unsized_outputs(&self, op: &ComputeOp) -> Vec<(usize, Arc<Slot>)> {
        op.outputs
            .iter()
            .filter_map(|output| {
                let index = self
                    .internals
                    .iter()
                    .position(|internal| Arc::ptr_eq(internal, output))?;
                let known = self
                    .measured
                    .as_ref()
                    .is_some_and(|measured| measured[index] > 0);
                (!known).then(|| (index, output.clone()))
            })
            .collect()
    }

    /// By op: the external variables (by index) whose size it notes as it runs, each at the
    /// first computation that reads or writes it, so that the memory estimate counts the size
    /// a run used, also once the variable is deleted.
    fn external_first_uses(&self) -> Vec<Vec<usize>> {
        let mut first_uses = vec![Vec::new(); self.ops.len()];
        for (index, external) in self.externals.iter().enumerate() {
            let first = self.ops.iter().position(|op| {
                matches!(op, RecordedOp::Compute(_))
                    && (op.inputs().iter().chain(op.outputs()))
                        .any(|slot| Arc::ptr_eq(slot, &external.slot))
            });
            if let Some(first) = first {
                first_uses[first].push(index);
            }
        }
        first_uses
    }

    /// The statement whose failure made a bulk of this graph fail with `error`, if it did.
    pub(crate) fn failed_step(&self, error: &engine::OpError) -> Option<FailedStep> {
        self.failed_steps.find(&error.label, &error.message)
    }

    /// The engine ops of one replay under `options`, the buffers `kept` (by internal index)
    /// never released; with, by engine op in push order, the recorded ops it runs.
    fn segments_for(
        &self,
        options: ReplayOptions,
        kept: &[bool],
    ) -> (Vec<Segment>, Vec<std::ops::Range<usize>>) {
        let released = |index: &usize| !kept[*index];
        let recycles = options.lazy && kept.iter().any(|kept| !kept);
        let context = SegmentContext {
            // No buffer ever goes to the pool when every one is kept: no op need look there.
            pool: (options.share && recycles).then(|| self.pool.clone()),
            sizes: self.internal_bytes.clone(),
            failed: self.failed_steps.clone(),
            recycle_from: options.recycle_from,
        };
        let mut builder = SegmentBuilder::new(options.bulk, context);
        let first_uses = self.external_first_uses();
        for (op_index, op) in self.ops.iter().enumerate() {
            match op {
                RecordedOp::Compute(op) => {
                    let mut sized = self.unsized_outputs(op);
                    sized.extend(first_uses[op_index].iter().map(|&external| {
                        let slot = self.externals[external].slot.clone();
                        (self.internals.len() + external, slot)
                    }));
                    builder.op(op_index, op, sized)
                }
                RecordedOp::Comm(op) => builder.comm(op_index, op),
            }
            if options.lazy && options.recycle {
                for &internal_index in &self.release_after[op_index] {
                    if kept[internal_index] {
                        continue;
                    }
                    builder.release(internal_index, &self.internals[internal_index]);
                }
            }
            builder.end_of_op();
        }
        if options.lazy && !options.recycle {
            for internal_index in (0..self.internals.len()).filter(released) {
                builder.release_alone(internal_index, &self.internals[internal_index]);
            }
        }
        builder.finish()
    }

    /// The ops on the longest chain of dependencies, in order.
    pub(crate) fn critical_path(&self) -> Vec<usize> {
        // Edges go from earlier to later ops, so op order is a topological order.
        let n = self.ops.len();
        let mut length = vec![1usize; n];
        let mut previous: Vec<Option<usize>> = vec![None; n];
        for node in self.dag.node_indices() {
            for edge in self.dag.edges_directed(node, petgraph::Direction::Incoming) {
                let (from, to) = (self.dag[edge.source()], self.dag[node]);
                if length[from] + 1 > length[to] {
                    length[to] = length[from] + 1;
                    previous[to] = Some(from);
                }
            }
        }
        let Some(mut last) = (0..n).max_by_key(|&op| (length[op], std::cmp::Reverse(op))) else {
            return Vec::new();
        };
        let mut path = vec![last];
        while let Some(before) = previous[last] {
            path.push(before);
            last = before;
        }
        path.reverse();
        path
    }

    /// The options of the latest replay (the defaults before the first).
    fn options(&self) -> ReplayOptions {
        self.prepared
            .as_ref()
            .map_or_else(ReplayOptions::default, |prepared| prepared.options)
    }

    /// Whether internal buffer `index` is kept from run to run, by the size the graph measured
    /// last and the latest replay's options.
    fn is_kept(&self, index: usize) -> bool {
        let options = self.options();
        options.lazy && self.is_small(index, options)
    }

    /// Peak bytes of one run under the latest replay's options, eager (every name keeps its
    /// buffer from its first write) against graph (internal buffers live from first write to
    /// last use, those kept from run to run for the whole run; with `recycle = 0` to the end of
    /// the run, with `lazy = 0` for the graph's whole life: as eager), from the sizes of the
    /// last run (a variable not its own by the size it had there, also once deleted); `None`
    /// before the first run.
    pub(crate) fn memory_estimate(&self) -> Option<(u64, u64)> {
        if self.runs == 0 {
            return None;
        }
        let options = self.options();
        let recycles = options.lazy && options.recycle;
        let kept = |slot: &Arc<Slot>| {
            self.internals
                .iter()
                .position(|internal| Arc::ptr_eq(internal, slot))
                .is_some_and(|index| self.is_kept(index))
        };
        let size_of = |slot: &Arc<Slot>| -> u64 {
            match self
                .internals
                .iter()
                .position(|internal| Arc::ptr_eq(internal, slot))
            {
                Some(index) => self.internal_bytes[index].load(Ordering::Relaxed),
                None => {
                    let noted = (self.externals.iter())
                        .position(|external| Arc::ptr_eq(&external.slot, slot))
                        .map_or(0, |index| {
                            self.internal_bytes[self.internals.len() + index]
                                .load(Ordering::Relaxed)
                        });
                    match noted {
                        0 => slot.bytes_now().map_or(0, |bytes| bytes as u64),
                        noted => noted,
                    }
                }
            }
        };
        let mut seen: Vec<&Arc<Slot>> = Vec::new();
        let (mut eager, mut graph_peak) = (0u64, 0u64);
        // Buffers kept from run to run are there from the run's start.
        let mut graph_live: u64 = self
            .internals
            .iter()
            .filter(|internal| kept(internal))
            .map(size_of)
            .sum();
        for (op_index, op) in self.ops.iter().enumerate() {
            for slot in op.inputs().iter().chain(op.outputs()) {
                if !seen.iter().any(|known| Arc::ptr_eq(known, slot)) {
                    seen.push(slot);
                    eager += size_of(slot);
                    if !kept(slot) {
                        graph_live += size_of(slot);
                    }
                }
            }
            graph_peak = graph_peak.max(graph_live);
            if !recycles {
                continue;
            }
            for &internal_index in &self.release_after[op_index] {
                if !self.is_kept(internal_index) {
                    graph_live -= size_of(&self.internals[internal_index]);
                }
            }
        }
        Some((eager, graph_peak))
    }

    /// How the report describes the graph's own buffers under the latest replay's options.
    fn buffers_line(&self) -> String {
        let n = self.internals.len();
        if n == 0 {
            return "no internal buffers".to_string();
        }
        let options = self.options();
        let buffers = count(n, "internal buffer");
        if !options.lazy {
            return format!("{buffers}, kept for the graph's whole life (`lazy = 0`)");
        }
        let released = if options.recycle {
            "released after their last reader"
        } else {
            "released at the end of each run (`recycle = 0`)"
        };
        let n_kept = (0..n).filter(|&index| self.is_kept(index)).count();
        if n_kept == 0 {
            return format!("{buffers}, {released}");
        }
        format!(
            "{buffers}: {} {released}, {n_kept} smaller than {} kept from run to run",
            n - n_kept,
            format_bytes(options.recycle_from),
        )
    }

    /// What `print NAME` shows: ops, edges, critical path, memory eager against graph under the
    /// latest replay's options; the same on every engine and run.
    pub(crate) fn report(&self) -> String {
        // The kinds of conflict the edges carry (one edge may carry two: `A = C * 2` after
        // `C = A + 2` is one edge, RAW on C and WAR on A).
        let mut counts = [0usize; 3];
        for kinds in self.dag.edge_weights() {
            for kind in kinds {
                counts[*kind as usize] += 1;
            }
        }
        let mut report = format!(
            "graph {}: {}, {} (carrying {} RAW, {} WAR, {} WAW), critical path {}, {}\n",
            self.name,
            count(self.ops.len(), "op"),
            count(self.dag.edge_count(), "edge"),
            counts[0],
            counts[1],
            counts[2],
            count(self.critical_path().len(), "op"),
            count(self.runs, "run"),
        );
        let _ = writeln!(report, "  {}", self.buffers_line());
        match self.memory_estimate() {
            Some((eager, graph)) => {
                // A graph that takes more than eager mode says so as a negative saving.
                let saved = match graph <= eager || eager == 0 {
                    true => dep_views::format_percent(eager.saturating_sub(graph), eager),
                    false => format!("-{}", dep_views::format_percent(graph - eager, eager)),
                };
                let _ = writeln!(
                    report,
                    "  peak memory per run: eager {}, graph {} ({saved} less)",
                    format_bytes(eager),
                    format_bytes(graph)
                );
            }
            None => report.push_str("  peak memory per run: known after the first run\n"),
        }
        report
    }

    /// The report with what was measured while it ran: how many allocations the buffer pool
    /// served, and the bytes of the free buffers it holds (figures that depend on the schedule:
    /// how releases and allocations interleaved).
    pub(crate) fn report_measured(&self) -> String {
        let mut report = self.report();
        let _ = writeln!(
            report,
            "  allocations served by the pool (avoided): {}; free buffers it holds: {}",
            self.pool.reused(),
            format_bytes(self.pool.held_bytes())
        );
        report
    }

    /// Bytes of the free buffers its pool holds now, for later runs: host memory, though no
    /// variable's, whose amount depends on the schedule.
    pub(crate) fn pooled_bytes(&self) -> u64 {
        self.pool.held_bytes()
    }

    /// The DAG in Graphviz DOT, edges labelled with their variable and RAW/WAR/WAW (`A RAW`),
    /// the critical path in bold; each op's line named as the reader numbers it (`<stdin>:4`,
    /// `cell[2]:1`) where `places` knows its input, as the session's other views name it.
    pub(crate) fn dot(&self, places: &dep_views::Places) -> String {
        let critical = self.critical_path();
        let mut dot = format!("digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fillcolor=\"#eef2f7\", fontname=\"monospace\"];\n", self.name);
        for (op_index, op) in self.ops.iter().enumerate() {
            let bold = if critical.contains(&op_index) {
                ", penwidth=2.5, fillcolor=\"#fde2c8\""
            } else {
                ""
            };
            let place = places
                .name(op.line())
                .map_or_else(|| format!("line {}", op.line()), |place| place.to_string());
            let _ = writeln!(
                dot,
                "  op{op_index} [label=\"{} ({})\"{bold}];",
                escape(op.label()),
                escape(&place)
            );
        }
        for edge in self.dag.edge_references() {
            let (from, to) = (self.dag[edge.source()], self.dag[edge.target()]);
            let label: Vec<String> = edge
                .weight()
                .iter()
                .map(|kind| match self.edge_var(from, to, *kind) {
                    Some(name) => format!("{} {}", escape(name), kind.short()),
                    None => kind.short().to_string(),
                })
                .collect();
            let label = label.join(", ");
            let _ = writeln!(dot, "  op{from} -> op{to} [label=\"{label}\"];");
        }
        dot.push_str("}\n");
        dot
    }
}

impl Graph {
    /// The variable a dependency of op `to` on op `from` is about, by name, unless it is one of
    /// the graph's own temporaries.
    fn edge_var(&self, from: usize, to: usize, kind: Dependency) -> Option<&str> {
        let (earlier, later) = (&self.ops[from], &self.ops[to]);
        let (earlier, later) = match kind {
            Dependency::ReadAfterWrite => (earlier.outputs(), later.inputs()),
            Dependency::WriteAfterRead => (earlier.inputs(), later.outputs()),
            Dependency::WriteAfterWrite => (earlier.outputs(), later.outputs()),
        };
        earlier
            .iter()
            .find(|slot| later.iter().any(|other| Arc::ptr_eq(slot, other)))
            .map(|slot| slot.var.name())
            .filter(|name| !name.contains('#'))
    }
}

/// One edge for every pair of ops ordered by a read after write, a write after read or a write
/// after write, carrying each kind that orders them.
fn dependency_dag(ops: &[RecordedOp]) -> DiGraph<usize, Dependencies> {
    let mut dag = DiGraph::new();
    let nodes: Vec<NodeIndex> = (0..ops.len())
        .map(|op_index| dag.add_node(op_index))
        .collect();
    // Per slot (by identity): its last writer and the readers since.
    let mut history: Vec<(&Arc<Slot>, Option<usize>, Vec<usize>)> = Vec::new();
    let mut edges = Vec::new();
    for (op_index, op) in ops.iter().enumerate() {
        let writes: Vec<usize> = op
            .outputs()
            .iter()
            .map(|slot| history_index(&mut history, slot))
            .collect();
        let reads: Vec<usize> = op
            .inputs()
            .iter()
            .map(|slot| history_index(&mut history, slot))
            .filter(|read| !writes.contains(read))
            .collect();
        for &read in &reads {
            if let Some(writer) = history[read].1 {
                edges.push((writer, op_index, Dependency::ReadAfterWrite));
            }
        }
        for &write in &writes {
            if let Some(writer) = history[write].1 {
                edges.push((writer, op_index, Dependency::WriteAfterWrite));
            }
            for &reader in &history[write].2 {
                edges.push((reader, op_index, Dependency::WriteAfterRead));
            }
        }
        for &read in &reads {
            history[read].2.push(op_index);
        }
        for &write in &writes {
            history[write].1 = Some(op_index);
            history[write].2.clear();
        }
    }
    // Stable: each pair's kinds stay in the order found.
    edges.sort_by_key(|(from, to, _)| (*from, *to));
    let mut pairs: Vec<(usize, usize, Dependencies)> = Vec::new();
    for (from, to, kind) in edges {
        match pairs.last_mut() {
            Some((last_from, last_to, kinds)) if (*last_from, *last_to) == (from, to) => {
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
            _ => pairs.push((from, to, Dependencies::from_elem(kind, 1))),
        }
    }
    for (from, to, kinds) in pairs {
        dag.add_edge(nodes[from], nodes[to], kinds);
    }
    dag
}

/// The index of `slot`'s entry in a dependency history, added if new.
fn history_index<'a>(
    history: &mut Vec<(&'a Arc<Slot>, Option<usize>, Vec<usize>)>,
    slot: &'a Arc<Slot>,
) -> usize {
    match history
        .iter()
        .position(|(known, _, _)| Arc::ptr_eq(known, slot))
    {
        Some(index) => index,
        None => {
            history.push((slot, None, Vec::new()));
            history.len() - 1
        }
    }
}

fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}
