//! The online fold of an event log: the run's [`Summary`] and its trace, worked out one event at
//! a time, in one pass, keeping only what later events can still refer to.
//!
//! A [`Replay`](crate::Replay) keeps every event and every op; this keeps the ops that are
//! unfinished or that a later op may still depend on (the last writer of each live variable and
//! the readers since), so a long run folds in memory that does not grow with its length. A
//! variable read again and again and not written (a loop's `c = c + b` reads `b` every time)
//! would hold every reader: its finished readers are let go as ops once they are many, and kept
//! only as what a later write needs of them (see `DoneReads`). The same fold computes
//! [`Summary::of`] for a replay, so the two never disagree.
//!
//! Dependencies are those of [`Edge`](crate::Edge): a read depends on the last write before it;
//! a write on every read since the last write or, when there was none, on the last write. Each
//! edge gets the flow id `index + 1`, its index in [`Replay::edges`](crate::Replay::edges).

use std::sync::Arc;

use dep_engine::{Device, Event, EventKind, Logged, OpId, OpState, RanAtOnce, VarId};
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;

use crate::bookkeeping::{Bookkeeping, Filtered};
use crate::replay::{worker_name, Hazard};
use crate::summary::{KernelGaps, Summary};
use crate::util::describe_op;

/// Receives what the fold finds, as soon as it is known: the parts of a trace.
pub trait TraceOut {
    /// Every event, in log order, before the fold looks at it.
    fn event(&mut self, event: &Event);
    /// An op's run on its worker: once it finished, or at the end of the log for one still
    /// running.
    fn slice(&mut self, slice: &OpSlice<'_>);
    /// A dependency between two ops that both started, once the later one started.
    fn flow(&mut self, flow: &Flow<'_>);
    /// The device work (GPU kernels) of one op, at the end of the log.
    fn device_slice(&mut self, slice: &DeviceSlice<'_>);
    /// The end of the log: the engine's worker names, and every lane of the run, workers first.
    fn end(&mut self, worker_names: &[String], lanes: &[TraceLane]);
    /// Whether it keeps slices and flows at all: when not, the fold does not build them (their
    /// names and vectors cost more than the rest of the fold).
    fn keeps_slices(&self) -> bool {
        true
    }
    /// An op that ran at once, whole, in log order as its events would come (see
    /// [`RunFold::push_logged`]): by default each of its events to [`TraceOut::event`]; a
    /// trace that writes no events does nothing, one that writes them may write it as one.
    fn ran_at_once(&mut self, ran: &RanAtOnce<'_>) {
        for event in &ran.events() {
            self.event(event);
        }
    }
}

/// An op's run on its worker (see [`TraceOut::slice`]).
#[derive(Debug)]
pub struct OpSlice<'a> {
    /// The op.
    pub op: OpId,
    /// Its label (the statement).
    pub label: &'a Arc<str>,
    /// Its source line (0: none).
    pub line: u32,
    /// The names of the variables it reads: one `Arc` per variable, so that a writer can tell
    /// two variables of the same name apart by address.
    pub reads: &'a [&'a Arc<str>],
    /// The names of the variables it writes, as `reads`.
    pub writes: &'a [&'a Arc<str>],
    /// Its state at the end of its slice.
    pub state: OpState,
    /// Its device.
    pub device: Device,
    /// Its priority.
    pub priority: i32,
    /// The error message of a failed, skipped or cancelled op.
    pub message: Option<&'a str>,
    /// The worker that ran it.
    pub worker: u32,
    /// When it started (ns).
    pub start_ns: u64,
    /// When it finished, or the end of the log.
    pub end_ns: u64,
}

/// A dependency arrow between two started ops (see [`TraceOut::flow`]).
#[derive(Debug)]
pub struct Flow<'a> {
    /// The edge's index in [`Replay::edges`](crate::Replay::edges), plus one.
    pub id: u64,
    /// The variable's name.
    pub var: &'a Arc<str>,
    /// The kind of conflict.
    pub hazard: Hazard,
    /// The other conflicts between the same two ops, by variable name (see
    /// [`Edge::more`](crate::Edge::more)); most flows have none.
    pub more: &'a [(Arc<str>, Hazard)],
    /// The earlier op's worker and start.
    pub from: (u32, u64),
    /// The later op's worker and start.
    pub to: (u32, u64),
}

impl Flow<'_> {
    /// Its name: the variable and the hazard, `X RAW`, then the others (`C RAW, A WAR`).
    pub fn name(&self) -> String {
        // Put together without `fmt`'s machinery (a few hundred instructions).
        let mut name = String::with_capacity(self.var.len() + 4);
        for (index, (var, hazard)) in std::iter::once((self.var, self.hazard))
            .chain(self.more.iter().map(|(var, hazard)| (var, *hazard)))
            .enumerate()
        {
            if index > 0 {
                name.push_str(", ");
            }
            name.push_str(var);
            name.push(' ');
            name.push_str(hazard.short_name());
        }
        name
    }

    /// What tells its name apart from another flow's while the variables' names are kept
    /// alive: each variable name's address and its hazard.
    pub fn name_key(&self) -> FlowNameKey {
        let address = |var: &Arc<str>| Arc::as_ptr(var) as *const u8 as usize;
        let mut key = FlowNameKey::new();
        key.push((address(self.var), self.hazard));
        for (var, hazard) in self.more {
            key.push((address(var), *hazard));
        }
        key
    }

    /// The variables' names it is named by, to keep alive with a [`Flow::name_key`].
    pub fn name_parts(&self) -> SmallVec<[Arc<str>; 1]> {
        std::iter::once(self.var.clone())
            .chain(self.more.iter().map(|(var, _)| var.clone()))
            .collect()
    }
}

/// See [`Flow::name_key`].
pub type FlowNameKey = SmallVec<[(usize, Hazard); 2]>;

/// A flow name's encoding kept by its [`FlowNameKey`], with the variables' names that keep
/// the key's addresses alive.
pub type KeptFlowName<T> = (SmallVec<[Arc<str>; 1]>, T);

/// The device work of one op (see [`TraceOut::device_slice`]).
#[derive(Debug)]
pub struct DeviceSlice<'a> {
    /// The op.
    pub op: OpId,
    /// Its label.
    pub label: &'a Arc<str>,
    /// Its source line.
    pub line: u32,
    /// The device lane's index among [`TraceLane::Device`] lanes (in name order).
    pub lane: usize,
    /// When its first kernel started.
    pub start_ns: u64,
    /// When its last kernel ended.
    pub end_ns: u64,
    /// Where and when the op enqueued the work: its worker and start, when it started.
    pub launch: Option<(u32, u64)>,
}

/// A lane of the trace (see [`TraceOut::end`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceLane {
    /// A worker: its index and name.
    Worker(u32, String),
    /// A device lane: its name (`gpu0:s0`).
    Device(Arc<str>),
}

/// A [`TraceOut`] that keeps nothing: for a summary alone.
pub struct NoTrace;

impl TraceOut for NoTrace {
    fn event(&mut self, _: &Event) {}
    fn slice(&mut self, _: &OpSlice<'_>) {}
    fn flow(&mut self, _: &Flow<'_>) {}
    fn device_slice(&mut self, _: &DeviceSlice<'_>) {}
    fn end(&mut self, _: &[String], _: &[TraceLane]) {}
    fn keeps_slices(&self) -> bool {
        false
    }
    fn ran_at_once(&mut self, _: &RanAtOnce<'_>) {}
}

/// The fold: feed it the log's events in order ([`RunFold::push`]), then end it
/// ([`RunFold::finish`]) for the summary.
#[derive(Default)]
pub struct RunFold {
    bookkeeping: Bookkeeping,
    n_pushed: usize,
    n_edges: u64,
    /// The live ops, each in a slot that does not move while it lives (dependencies and
    /// histories name ops by slot); `None` for a free slot.
    slots: Vec<Option<LiveOp>>,
    /// The free slots, reused first.
    free: Vec<Slot>,
    /// Each live op's slot.
    ops: HashMap<OpId, Slot>,
    /// The last op pushed and its slot, while it lives: the events after a push are most often
    /// its own (an op run where it was pushed is pushed, made ready, started and ended in a
    /// row), found here without a look-up in `ops`.
    last_pushed: Option<(OpId, Slot)>,
    histories: HashMap<VarId, History>,
    var_names: HashMap<VarId, Arc<str>>,
    /// Ops placed on a device other than the CPU (or that reported device work), kept to the
    /// end: their kernels' times may arrive last.
    device_ops: HashMap<OpId, DeviceOp>,
    first_push_ns: Option<u64>,
    last_ns: u64,
    n_by_state: [usize; N_STATES],
    /// Each worker's busy time, by index; `None` for one that ran no op. Communications are
    /// not in it: see `comm_spans`.
    busy_ns: Vec<Option<u64>>,
    /// The spans of each worker's communications (ops on `Device::Net`), by index. An
    /// asynchronous communication only posts its request on a worker, and then waits for its
    /// peers while the worker runs other ops: its time is the worker's busy time only on a
    /// lane of the network's own (`net:0`: the per-device policy's, the simulator's), and
    /// there the union of the spans, since several may be in flight at once.
    comm_spans: Vec<Vec<(u64, u64)>>,
    /// The longest path so far.
    critical: Option<Critical>,
    /// The ops' labels, each once: live ops and paths name them by number, so that an op
    /// touches no reference count.
    labels: Labels,
}

/// The labels of a fold's ops, each kept once and named by its number: found by the address of
/// the `Arc` it came in when that is one of the last few seen (a loop's statements, which the
/// log hands out as one `Arc` each), else by its text. An observed loop's ops may each have a
/// label of their own (`A = ones(8) * i i=41`): the labels no live op or kept path names are
/// let go now and then ([`RunFold::compact_labels`]), so that they take the memory of the ops
/// the fold holds, not of every op of the run.
#[derive(Default)]
struct Labels {
    texts: Vec<Arc<str>>,
    by_text: HashMap<Arc<str>, u32>,
    /// The numbers of the labels most recently looked up.
    recent: [u32; N_RECENT_LABELS],
    /// The entry of `recent` the next label found by its text takes.
    next_recent: usize,
    /// How many labels it holds when it is next compacted (0: [`MIN_LABELS_TO_COMPACT`]).
    compact_at: usize,
}

/// How many label numbers [`Labels`] remembers as recent.
const N_RECENT_LABELS: usize = 4;

/// The fewest labels [`Labels`] holds before it lets the unused ones go.
const MIN_LABELS_TO_COMPACT: usize = 4096;

impl Labels {
    /// Whether it holds enough labels to let the unused ones go: twice as many as it kept the
    /// last time, so that compacting costs a few steps per label.
    fn is_due(&self) -> bool {
        self.texts.len() >= self.compact_at.max(MIN_LABELS_TO_COMPACT)
    }

    /// Keeps only `texts`, renumbered from 0 in that order (see [`RunFold::compact_labels`]).
    fn keep_only(&mut self, texts: Vec<Arc<str>>) {
        self.by_text = texts
            .iter()
            .enumerate()
            .map(|(number, text)| (text.clone(), number as u32))
            .collect();
        self.compact_at = 2 * texts.len();
        self.texts = texts;
        // No number is recent: the old ones name other labels now.
        self.recent = [u32::MAX; N_RECENT_LABELS];
    }

    /// The number of `label`, kept if new.
    fn number(&mut self, label: &Arc<str>) -> u32 {
        // An `Arc` kept here is alive, so no other string can have its address.
        let texts = &self.texts;
        let same = |number: &&u32| {
            texts
                .get(**number as usize)
                .is_some_and(|text| Arc::ptr_eq(text, label))
        };
        if let Some(number) = self.recent.iter().find(same) {
            return *number;
        }
        let number = match self.by_text.get(&**label) {
            Some(number) => *number,
            None => {
                let number = self.texts.len() as u32;
                self.texts.push(label.clone());
                self.by_text.insert(label.clone(), number);
                number
            }
        };
        // Only a label in the very `Arc` kept here is found by its address next time.
        if Arc::ptr_eq(&self.texts[number as usize], label) {
            self.recent[self.next_recent] = number;
            self.next_recent = (self.next_recent + 1) % N_RECENT_LABELS;
        }
        number
    }

    /// The label numbered `number`.
    fn text(&self, number: u32) -> &Arc<str> {
        &self.texts[number as usize]
    }
}

/// The longest path so far: kept by its last op while that op lives (a path is not copied for
/// each op that makes it longer, which in a chain is every op), taken over when it goes.
enum Critical {
    /// The path of the op in this slot.
    InSlot(Slot),
    /// A path whose last op was forgotten, and that op's push position.
    Kept(Path, usize),
}

const N_STATES: usize = 7;

/// The index of a live op in [`RunFold::slots`].
type Slot = u32;

/// What the fold keeps of a live op.
/// The variables an op reads or writes, kept for its slice: most ops access a few, kept inline
/// (an op of the fold is made per op of the run, and two allocations each cost more than its
/// bookkeeping).
type Accessed = SmallVec<[VarId; 3]>;

struct LiveOp {
    id: OpId,
    /// Whether [`RunFold::ops`] names it by its id (not an op that ran at once).
    named: bool,
    position: usize,
    /// Its label's number in [`RunFold::labels`].
    label: u32,
    line: u32,
    device: Device,
    priority: i32,
    /// Emptied once its slice is out; empty when the trace keeps no slices.
    reads: Accessed,
    writes: Accessed,
    started: Option<(u32, u64)>,
    finished: bool,
    state: OpState,
    message: Option<String>,
    /// Its dependencies, held until it finishes.
    preds: SmallVec<[Pred; 2]>,
    /// Its other conflicts with the same earlier ops, for its flows' names; boxed, as most
    /// ops have none (and `Pred` stays plain data).
    more: Option<Box<MoreConflicts>>,
    /// Its dependencies on readers let go as ops (which [`PredFrom::Done`] names by index) and
    /// the longest path among them; held until it finishes.
    done: Option<Box<DoneReads>>,
    /// How many history entries and unfinished later ops name it.
    refs: u32,
    /// The longest path ending at it, once it finished.
    path: Option<Path>,
}

struct Pred {
    from: PredFrom,
    var: VarId,
    hazard: Hazard,
    flow: u64,
}

/// Conflicts of an op with earlier ops beyond the first with each (see
/// [`Edge::more`](crate::Edge::more)), by the earlier op; kept only for a trace's flows.
type MoreConflicts = SmallVec<[(PredFrom, VarId, Hazard); 2]>;

/// Adds `conflict` to `more` unless it is `pred`'s own or already there.
fn add_conflict(more: &mut MoreConflicts, pred: &Pred, conflict: (PredFrom, VarId, Hazard)) {
    let (_, var, hazard) = conflict;
    if (pred.var, pred.hazard) != (var, hazard) && !more.contains(&conflict) {
        more.push(conflict);
    }
}

/// The earlier op of a dependency.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PredFrom {
    /// An op the fold holds, by slot: it lives at least as long as this dependency does.
    Live(Slot),
    /// A finished reader let go as an op (see [`DoneReads`]), by its index in the later op's
    /// own [`DoneReads::reads`].
    Done(u32),
}

/// What a later write needs of a finished reader let go as an op: its push position (the
/// order of dependencies) and where and when it started (its flow's start), when it did.
#[derive(Clone, Copy)]
struct DoneRead {
    position: usize,
    started: Option<(u32, u64)>,
}

#[derive(Default)]
struct History {
    last_write: Option<Slot>,
    /// The readers since the last write that the fold holds as ops.
    reads_since: Vec<Slot>,
    /// The readers since the last write let go as ops; `None` when there are none (most
    /// variables never have any).
    done_reads: Option<Box<DoneReads>>,
    /// The length of `reads_since` at which its finished readers are next let go.
    let_go_at: usize,
}

/// The finished readers of a variable since its last write that the fold let go as ops: each
/// one's [`DoneRead`] when the trace keeps flows (a later write has one flow from each), and
/// the longest path among them (the one a later write's path may go through). A variable read
/// by every op of a loop and never written holds a few words per reader, or none for a summary.
#[derive(Default)]
struct DoneReads {
    /// How many.
    n: usize,
    /// Each one, in no order; empty when the trace keeps no flows.
    reads: Vec<DoneRead>,
    /// The longest path ending at one of them, and the push position of that one.
    best: Option<(Path, usize)>,
}

/// The fewest readers of a variable the fold holds before it lets the finished ones go.
const LET_GO_AT_LEAST: usize = 32;

/// The longest path among some finished readers let go as ops, if they have one.
fn best_path(done: &mut Option<Box<DoneReads>>) -> Option<&mut Path> {
    let (path, _) = done.as_mut()?.best.as_mut()?;
    Some(path)
}

/// The longer of two paths, each with its last op's push position: by run time, then the
/// latest pushed (as a write's path picks among its dependencies).
fn longer<'a>(
    a: Option<(&'a Path, usize)>,
    b: Option<(&'a Path, usize)>,
) -> Option<(&'a Path, usize)> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if (b.0.ns, b.0.n_ops, b.1) > (a.0.ns, a.0.n_ops, a.1) {
            b
        } else {
            a
        }),
        (a, b) => a.or(b),
    }
}

/// A device op's run on its worker.
struct Ran {
    /// How long it took (the launch of its kernels).
    ns: u64,
    /// The longest path to it (as the fold counts it, device ops by their launches), and the
    /// push position of its last op.
    before: Option<(Path, usize)>,
}

/// Where a chain through device ops comes from: nowhere, a path of the fold's, or a device op.
enum ChainFrom {
    Start,
    Path(Path),
    Device(OpId),
}

/// The longest chain of ops that ran, each depending on the one before, whose last ops are
/// device ops counting the longer of their launch and their kernels' span (as
/// `Replay::critical_path` counts it): the critical path where it is longer than the fold's,
/// whose device ops count only their launches. `device_ops` are in push order.
fn device_path(device_ops: &[(&OpId, &DeviceOp)], labels: &mut Labels) -> Option<Path> {
    // By op: the length and steps of the longest chain up to and with it, where it comes from,
    // and its push position.
    let mut best: HashMap<OpId, (u64, usize, ChainFrom, usize)> = HashMap::default();
    for (op, device_op) in device_ops {
        let Some(ran) = &device_op.ran else {
            continue;
        };
        let kernels_ns = device_op
            .span
            .as_ref()
            .map_or(0, |(_, start_ns, end_ns)| end_ns - start_ns);
        // Ranked as `Replay::critical_path` ranks them: the longest, of the most steps, then
        // through the latest pushed op, then through a device op's chain.
        let through_path = ran.before.as_ref().map(|(path, position)| {
            let rank = (path.ns, path.n_ops, Some((*position, false)));
            (rank, ChainFrom::Path(path.clone()))
        });
        let through_device = device_op.preds.iter().filter_map(|pred| {
            let (ns, n_steps, _, position) = best.get(pred)?;
            Some((
                (*ns, *n_steps, Some((*position, true))),
                ChainFrom::Device(*pred),
            ))
        });
        let ((ns, n_steps, _), from) = through_path
            .into_iter()
            .chain(through_device)
            .max_by_key(|(rank, _)| *rank)
            .unwrap_or(((0, 0, None), ChainFrom::Start));
        let own = ran.ns.max(kernels_ns);
        best.insert(**op, (ns + own, n_steps + 1, from, device_op.position));
    }
    let (&end, _) = best.iter().max_by_key(|(_, (ns, n_steps, _, position))| {
        (*ns, *n_steps, std::cmp::Reverse(*position))
    })?;
    // Back along the device ops to where the chain came from, then forward from there.
    let mut chain = vec![end];
    let start = loop {
        match &best[chain.last().expect("a chain has an op")].2 {
            ChainFrom::Device(before) => chain.push(*before),
            ChainFrom::Path(path) => break Some(path.clone()),
            ChainFrom::Start => break None,
        }
    };
    let by_id: HashMap<OpId, &DeviceOp> = device_ops
        .iter()
        .map(|(op, device_op)| (**op, *device_op))
        .collect();
    let mut path = start;
    for op in chain.into_iter().rev() {
        let device_op = by_id[&op];
        let own = best[&op].0 - path.as_ref().map_or(0, |path| path.ns);
        let step = Step(op, labels.number(&device_op.label), device_op.line);
        path = Some(Path::extend(path.as_ref(), step, own));
    }
    path
}

/// The name of a variable the log never named: its id.
fn unnamed_var(var: VarId) -> Arc<str> {
    Arc::from(var.to_string())
}

struct DeviceOp {
    position: usize,
    label: Arc<str>,
    line: u32,
    launch: Option<(u32, u64)>,
    /// Its run, once it ended having run.
    ran: Option<Ran>,
    span: Option<(Arc<str>, u64, u64)>,
    /// Its dependencies on other device ops.
    preds: Vec<OpId>,
}

/// One op of a path: its id, its label's number in [`RunFold::labels`], and its line.
#[derive(Clone, Copy, Debug)]
struct Step(OpId, u32, u32);

/// A chain of dependent ops, kept as its length, its run time, its first ops and its last three:
/// all a summary shows of it.
#[derive(Clone, Debug, Default)]
struct Path {
    ns: u64,
    n_ops: usize,
    head: Arc<[Step]>,
    tail: [Option<Step>; TAIL],
}

/// The first ops a path keeps: all of a path this short is shown.
const HEAD: usize = 8;
/// The last ops a path keeps.
const TAIL: usize = 3;

impl Path {
    fn extend(previous: Option<&Path>, step: Step, own_ns: u64) -> Path {
        let Some(previous) = previous else {
            return Path {
                ns: own_ns,
                n_ops: 1,
                head: Arc::from(vec![step]),
                tail: [None, None, Some(step)],
            };
        };
        let head = if previous.head.len() < HEAD {
            let mut head = previous.head.to_vec();
            head.push(step);
            Arc::from(head)
        } else {
            previous.head.clone()
        };
        let [_, second, third] = &previous.tail;
        Path {
            ns: previous.ns + own_ns,
            n_ops: previous.n_ops + 1,
            head,
            tail: [*second, *third, Some(step)],
        }
    }

    /// Its steps' labels renumbered by `renumber` (see [`RunFold::compact_labels`]).
    fn renumber_labels(&mut self, renumber: &mut impl FnMut(u32) -> u32) {
        let mut step = |Step(op, label, line): Step| Step(op, renumber(label), line);
        self.head = self.head.iter().map(|&each| step(each)).collect();
        for each in self.tail.iter_mut().flatten() {
            *each = step(*each);
        }
    }

    /// What a summary shows: every op of a path of at most [`HEAD`], else the first three and
    /// the last three. (Internal ops, a temporary's `wait _#1` and `del _#1`, never enter the
    /// fold.)
    fn shown(&self, labels: &Labels) -> Vec<(OpId, String)> {
        let describe =
            |Step(id, label, line): &Step| (*id, describe_op(labels.text(*label), *line));
        if self.n_ops <= HEAD {
            return self.head.iter().map(describe).collect();
        }
        let tail = self.tail.iter().flatten().map(describe);
        self.head[..TAIL].iter().map(describe).chain(tail).collect()
    }
}

impl RunFold {
    /// An empty fold.
    pub fn new() -> RunFold {
        RunFold::default()
    }

    /// Folds the log's next event, telling `out` what it makes known.
    /// The interpreter's bookkeeping (`wait _#1`) is left out, as in a [`crate::Replay`].
    pub fn push(&mut self, event: &Event, out: &mut dyn TraceOut) {
        let trimmed;
        let event = match self.bookkeeping.filter(event) {
            Filtered::Hidden => return,
            Filtered::Shown => event,
            Filtered::Trimmed(kept) => {
                trimmed = kept;
                &trimmed
            }
        };
        out.event(event);
        let time_ns = event.time_ns;
        match &event.kind {
            EventKind::VarCreated { var, name } => {
                self.var_names.insert(*var, name.clone());
            }
            EventKind::VarDeleted { var } => {
                self.var_names.remove(var);
                if let Some(history) = self.histories.remove(var) {
                    for slot in history.last_write.into_iter().chain(history.reads_since) {
                        self.unref(slot);
                    }
                }
            }
            EventKind::Pushed { op, .. } => {
                let Some(slot) = self.pushed(event, out.keeps_slices()) else {
                    return;
                };
                // Later events name it by id. An op pushed again under a live id (a log read
                // from a file may do so) takes the id; the earlier one lives on, unnamed,
                // while records still name it.
                self.ops.insert(*op, slot);
                if let Some(live) = &mut self.slots[slot as usize] {
                    live.named = true;
                }
            }
            EventKind::Granted { .. } => {}
            EventKind::Ready { op } => {
                // A cancelled op stays cancelled while it waits for its turn.
                if let Some(live) = self
                    .live_mut(*op)
                    .filter(|live| live.state != OpState::Cancelled)
                {
                    live.state = OpState::Ready;
                }
            }
            EventKind::Cancelled { op } => {
                if let Some(live) = self.live_mut(*op) {
                    live.state = OpState::Cancelled;
                }
            }
            EventKind::Started { op, worker } => self.started(time_ns, *op, *worker, out),
            EventKind::Finished { op, state, message } => {
                self.finished(time_ns, *op, *state, message.as_deref(), out);
            }
            EventKind::DeviceSpan {
                op,
                lane,
                start_ns,
                end_ns,
            } => {
                // A span read from a file may end before it starts: it then takes no time.
                let end_ns = (*end_ns).max(*start_ns);
                self.last_ns = self.last_ns.max(end_ns);
                let device_op = match self.device_ops.get_mut(op) {
                    Some(device_op) => device_op,
                    None => {
                        let Some(slot) = self.slot_of(*op) else {
                            return;
                        };
                        let live = self.slot(slot);
                        let device_op = DeviceOp {
                            position: live.position,
                            label: self.labels.text(live.label).clone(),
                            line: live.line,
                            launch: live.started,
                            ran: None,
                            span: None,
                            preds: Vec::new(),
                        };
                        self.device_ops.entry(*op).or_insert(device_op)
                    }
                };
                // Several reports for one op (its kernels timed in parts) cover them all.
                let span = device_op
                    .span
                    .get_or_insert_with(|| (lane.clone(), *start_ns, end_ns));
                span.1 = span.1.min(*start_ns);
                span.2 = span.2.max(end_ns);
            }
        }
    }

    /// Folds what a reader of ops lent ([`dep_engine::EventLog::read_ops_since`]): an event,
    /// as [`RunFold::push`] does, or an op that ran at once, as its events would be folded.
    pub fn push_logged(&mut self, logged: Logged<'_>, out: &mut dyn TraceOut) {
        match logged {
            Logged::Event(event) => self.push(event, out),
            Logged::RanAtOnce(ran) => self.ran_at_once(&ran, out),
        }
    }

    /// Folds an op that ran at once in one step: its push, then its start on the pushing thread
    /// and its end, as [`RunFold::push`] folds its three events.
    fn ran_at_once(&mut self, ran: &RanAtOnce<'_>, out: &mut dyn TraceOut) {
        let trimmed;
        let push = match self.bookkeeping.filter_ran_at_once(ran) {
            Filtered::Hidden => return,
            Filtered::Shown => ran.push,
            Filtered::Trimmed(kept) => {
                trimmed = kept;
                &trimmed
            }
        };
        out.ran_at_once(&RanAtOnce { push, ..*ran });
        // Kept by slot, not named by id: no later event names an op that ran at once (its
        // start and end are found as the last op pushed).
        if self.pushed(push, out.keeps_slices()).is_none() {
            return;
        }
        self.started(push.time_ns, ran.op, dep_engine::CALLER_WORKER, out);
        self.finished(ran.end_ns, ran.op, ran.state, ran.message, out);
    }

    /// Folds a push (`None` for another event): its dependencies found, its record made in a
    /// slot, returned. Its accesses name a slice's variables: kept only with `keep_accesses`,
    /// for a trace that has slices.
    fn pushed(&mut self, push: &Event, keep_accesses: bool) -> Option<Slot> {
        let EventKind::Pushed {
            op,
            label,
            line,
            reads,
            writes,
            device,
            priority,
        } = &push.kind
        else {
            return None;
        };
        let (time_ns, op, line, device, priority) = (push.time_ns, *op, *line, *device, *priority);
        let position = self.n_pushed;
        self.n_pushed += 1;
        self.first_push_ns = Some(self.first_push_ns.map_or(time_ns, |t| t.min(time_ns)));
        self.last_ns = self.last_ns.max(time_ns);
        // The slot it will take: a later op's dependencies and the histories name it by it.
        let own = match self.free.last() {
            Some(slot) => *slot,
            None => self.slots.len() as Slot,
        };
        // Its dependencies, each earlier op once (by its first access here), in push order.
        let mut preds: SmallVec<[Pred; 2]> = SmallVec::new();
        // Whether a reader let go as an op is among them: it may be there twice, or be an op
        // also named by slot, which only its position tells.
        let mut any_done = false;
        // Its other conflicts with an op already among them (a trace's flows name them all).
        let mut more = MoreConflicts::new();
        let mut add = |from: PredFrom, var: VarId, hazard: Hazard| {
            match from {
                PredFrom::Live(slot) if slot == own => return,
                PredFrom::Live(_) => {
                    if let Some(pred) = preds.iter().find(|pred| pred.from == from) {
                        if keep_accesses {
                            add_conflict(&mut more, pred, (from, var, hazard));
                        }
                        return;
                    }
                }
                PredFrom::Done(_) => any_done = true,
            }
            preds.push(Pred {
                from,
                var,
                hazard,
                flow: 0,
            });
        };
        // The references to it: one per access, in the histories.
        let mut own_refs = 0;
        let mut dropped_refs: SmallVec<[Slot; 8]> = SmallVec::new();
        // Variables with many readers held: their finished ones are let go once it is in place.
        let mut let_go: SmallVec<[VarId; 2]> = SmallVec::new();
        // Its dependencies on readers let go as ops, from every variable it writes.
        let mut done: Option<Box<DoneReads>> = None;
        for var in reads {
            let history = self.histories.entry(*var).or_default();
            if let Some(writer) = history.last_write {
                add(PredFrom::Live(writer), *var, Hazard::ReadAfterWrite);
            }
            history.reads_since.push(own);
            own_refs += 1;
            if history.reads_since.len() >= history.let_go_at.max(LET_GO_AT_LEAST) {
                let_go.push(*var);
            }
        }
        for var in writes {
            let history = self.histories.entry(*var).or_default();
            if history.reads_since.is_empty() && history.done_reads.is_none() {
                if let Some(writer) = history.last_write {
                    add(PredFrom::Live(writer), *var, Hazard::WriteAfterWrite);
                }
            }
            // Drained, not taken: the variable's next reads reuse the room.
            for reader in history.reads_since.drain(..) {
                add(PredFrom::Live(reader), *var, Hazard::WriteAfterRead);
                dropped_refs.push(reader);
            }
            if let Some(mut reads) = history.done_reads.take() {
                let done = done.get_or_insert_with(Box::default);
                for read in reads.reads.drain(..) {
                    add(
                        PredFrom::Done(done.reads.len() as u32),
                        *var,
                        Hazard::WriteAfterRead,
                    );
                    done.reads.push(read);
                }
                done.n += reads.n;
                if let Some((path, position)) = reads.best.take() {
                    let best = longer(
                        done.best.as_ref().map(|(path, position)| (path, *position)),
                        Some((&path, position)),
                    );
                    if best.is_some_and(|(_, best)| best == position) {
                        done.best = Some((path, position));
                    }
                }
            }
            dropped_refs.extend(history.last_write.replace(own));
            own_refs += 1;
        }
        if preds.len() > 1 {
            let slots = &self.slots;
            let position = |pred: &Pred| match pred.from {
                PredFrom::Live(slot) => slots[slot as usize]
                    .as_ref()
                    .map_or(0, |from| from.position),
                PredFrom::Done(index) => done
                    .as_ref()
                    .map_or(0, |done| done.reads[index as usize].position),
            };
            // Stable: of an op named twice, its first access is kept, the other's conflicts
            // added to it.
            preds.sort_by_key(position);
            if any_done {
                preds.dedup_by(|later, earlier| {
                    let same = position(later) == position(earlier);
                    if same && keep_accesses {
                        let theirs: MoreConflicts = more
                            .iter()
                            .filter(|conflict| conflict.0 == later.from)
                            .copied()
                            .collect();
                        more.retain(|conflict| conflict.0 != later.from);
                        add_conflict(&mut more, earlier, (earlier.from, later.var, later.hazard));
                        for (_, var, hazard) in theirs {
                            add_conflict(&mut more, earlier, (earlier.from, var, hazard));
                        }
                    }
                    same
                });
            }
        }
        for pred in &mut preds {
            self.n_edges += 1;
            pred.flow = self.n_edges;
            // Each dependency on an op the fold holds holds it.
            if let PredFrom::Live(slot) = pred.from {
                if let Some(from) = &mut self.slots[slot as usize] {
                    from.refs += 1;
                }
            }
        }
        if device != Device::Cpu {
            // A reader let go as an op was not a device op (see `let_go_of_done_reads`).
            let device_preds = preds
                .iter()
                .filter_map(|pred| match pred.from {
                    PredFrom::Live(slot) => Some(self.slot(slot).id),
                    PredFrom::Done(_) => None,
                })
                .filter(|from| self.device_ops.contains_key(from))
                .collect();
            self.device_ops.insert(
                op,
                DeviceOp {
                    position,
                    label: label.clone(),
                    line,
                    launch: None,
                    ran: None,
                    span: None,
                    preds: device_preds,
                },
            );
        }
        if self.labels.is_due() {
            self.compact_labels();
        }
        let live = LiveOp {
            id: op,
            named: false,
            position,
            label: self.labels.number(label),
            line,
            device,
            priority,
            reads: if keep_accesses {
                Accessed::from_slice(reads)
            } else {
                Accessed::new()
            },
            writes: if keep_accesses {
                Accessed::from_slice(writes)
            } else {
                Accessed::new()
            },
            started: None,
            finished: false,
            state: OpState::Waiting,
            message: None,
            preds,
            more: None,
            done,
            refs: own_refs,
            path: None,
        };
        match self.free.pop() {
            Some(slot) => self.slots[slot as usize] = Some(live),
            None => self.slots.push(Some(live)),
        }
        if !more.is_empty() {
            if let Some(live) = &mut self.slots[own as usize] {
                live.more = Some(Box::new(more));
            }
        }
        self.last_pushed = Some((op, own));
        for slot in dropped_refs {
            self.unref(slot);
        }
        for var in let_go {
            self.let_go_of_done_reads(var, keep_accesses);
        }
        Some(own)
    }

    /// Lets go of the finished readers of `var` since its last write that the fold holds only
    /// for that write (not device ops, whose kernels may be reported later): each one leaves a
    /// [`DoneRead`] (when `keep_flows`) and its path if it is the longest. The next time is
    /// when as many readers again are held, so each reader is looked at a bounded number of
    /// times on average.
    fn let_go_of_done_reads(&mut self, var: VarId, keep_flows: bool) {
        let Some(history) = self.histories.get_mut(&var) else {
            return;
        };
        let (slots, device_ops) = (&self.slots, &self.device_ops);
        let mut done = history.done_reads.take().unwrap_or_default();
        let mut let_go: Vec<Slot> = Vec::new();
        // The longest path among them, copied once at the end.
        let mut best = done.best.as_ref().map(|(path, position)| (path, *position));
        history.reads_since.retain(|slot| {
            let Some(reader) = slots[*slot as usize].as_ref() else {
                return true;
            };
            let Some(path) = &reader.path else {
                return true;
            };
            if device_ops.contains_key(&reader.id) {
                return true;
            }
            done.n += 1;
            if keep_flows {
                done.reads.push(DoneRead {
                    position: reader.position,
                    started: reader.started,
                });
            }
            best = longer(best, Some((path, reader.position)));
            let_go.push(*slot);
            false
        });
        let kept = done.best.as_ref().map(|(_, position)| *position);
        if let Some((path, position)) = best.filter(|(_, position)| Some(*position) != kept) {
            done.best = Some((path.clone(), position));
        }
        history.done_reads = (done.n > 0).then_some(done);
        history.let_go_at = 2 * history.reads_since.len();
        for slot in let_go {
            self.unref(slot);
        }
    }

    /// How many ops the fold holds now.
    #[cfg(test)]
    pub(crate) fn n_live_ops(&self) -> usize {
        self.slots.iter().flatten().count()
    }

    /// The live op in `slot`.
    fn slot(&self, slot: Slot) -> &LiveOp {
        self.slots[slot as usize]
            .as_ref()
            .expect("a slot named by a live record holds an op")
    }

    /// The slot of live op `op`.
    #[inline]
    fn slot_of(&self, op: OpId) -> Option<Slot> {
        match self.last_pushed {
            Some((last, slot)) if last == op => Some(slot),
            _ => self.ops.get(&op).copied(),
        }
    }

    /// The live op `op`, if it is live.
    fn live_mut(&mut self, op: OpId) -> Option<&mut LiveOp> {
        let slot = self.slot_of(op)?;
        self.slots[slot as usize].as_mut()
    }

    fn started(&mut self, time_ns: u64, op: OpId, worker: u32, out: &mut dyn TraceOut) {
        self.last_ns = self.last_ns.max(time_ns);
        let Some(slot) = self.slot_of(op) else {
            return;
        };
        let live = self.slots[slot as usize]
            .as_mut()
            .expect("a named op's slot holds it");
        live.state = OpState::Running;
        live.started = Some((worker, time_ns));
        // A worker that ran an op has a lane, even while the op runs.
        let index = worker as usize;
        if self.busy_ns.len() <= index {
            self.busy_ns.resize(index + 1, None);
        }
        self.busy_ns[index].get_or_insert(0);
        if !self.device_ops.is_empty() {
            if let Some(device_op) = self.device_ops.get_mut(&op) {
                device_op.launch = Some((worker, time_ns));
            }
        }
        if !out.keeps_slices() {
            return;
        }
        let live = self.slot(slot);
        for pred in &live.preds {
            let started = match (pred.from, &live.done) {
                (PredFrom::Live(from), _) => self.slot(from).started,
                (PredFrom::Done(index), Some(done)) => done.reads[index as usize].started,
                (PredFrom::Done(_), None) => None,
            };
            let Some(from) = started else {
                continue;
            };
            let unnamed;
            let var = match self.var_names.get(&pred.var) {
                Some(name) => name,
                None => {
                    unnamed = unnamed_var(pred.var);
                    &unnamed
                }
            };
            let mut more: SmallVec<[(Arc<str>, Hazard); 1]> = SmallVec::new();
            let conflicts = live.more.as_deref().map_or(&[][..], |more| more.as_slice());
            for (_, var, hazard) in conflicts.iter().filter(|more| more.0 == pred.from) {
                let name = self.var_names.get(var).cloned();
                more.push((name.unwrap_or_else(|| unnamed_var(*var)), *hazard));
            }
            out.flow(&Flow {
                id: pred.flow,
                var,
                hazard: pred.hazard,
                more: &more,
                from,
                to: (worker, time_ns),
            });
        }
    }

    fn finished(
        &mut self,
        time_ns: u64,
        op: OpId,
        state: OpState,
        message: Option<&str>,
        out: &mut dyn TraceOut,
    ) {
        self.last_ns = self.last_ns.max(time_ns);
        let Some(slot) = self.slot_of(op) else {
            return;
        };
        let live = self.slots[slot as usize]
            .as_mut()
            .expect("a named op's slot holds it");
        live.state = state;
        live.finished = true;
        live.message = message.map(str::to_string);
        if let Some((worker, start_ns)) = live.started {
            if live.device == Device::Net {
                let index = worker as usize;
                if self.comm_spans.len() <= index {
                    self.comm_spans.resize(index + 1, Vec::new());
                }
                self.comm_spans[index].push((start_ns, time_ns.max(start_ns)));
            } else if let Some(Some(busy)) = self.busy_ns.get_mut(worker as usize) {
                // Its start made the worker's entry.
                *busy += time_ns.saturating_sub(start_ns);
            }
        }
        self.n_by_state[state as usize] += 1;
        self.close(slot, time_ns, out);
    }

    /// Ends an op's record: its slice goes out, its path is made, its dependencies let go.
    /// `end_ns` is its finish, or the end of the log for an op that did not finish.
    fn close(&mut self, slot: Slot, end_ns: u64, out: &mut dyn TraceOut) {
        let live = self.slots[slot as usize]
            .as_ref()
            .expect("a closed op's slot holds it");
        let op = live.id;
        let own_ns = match (live.finished, live.started) {
            (true, Some((_, start_ns))) => end_ns.saturating_sub(start_ns),
            _ => 0,
        };
        if let (Some((worker, start_ns)), true) = (live.started, out.keeps_slices()) {
            self.with_names(&live.reads, &live.writes, |reads, writes| {
                out.slice(&OpSlice {
                    op,
                    label: self.labels.text(live.label),
                    line: live.line,
                    reads,
                    writes,
                    state: live.state,
                    device: live.device,
                    priority: live.priority,
                    message: live.message.as_deref(),
                    worker,
                    start_ns,
                    end_ns: end_ns.max(start_ns),
                });
            });
        }
        // The longest path to it: through the dependency with the longest path, of the most
        // steps among equals, then the latest pushed (as `Replay::critical_path` chooses).
        let before = live
            .preds
            .iter()
            .filter_map(|pred| {
                let PredFrom::Live(from) = pred.from else {
                    return None;
                };
                let from = self.slot(from);
                Some((from.path.as_ref()?, from.position))
            })
            .max_by_key(|(path, position)| (path.ns, path.n_ops, *position));
        let before_at = match live.done.as_ref().and_then(|done| done.best.as_ref()) {
            Some((path, position)) => longer(before, Some((path, *position))),
            None => before,
        };
        let before = before_at.map(|(path, _)| path);
        // An op that ran nothing (never started, cancelled, or skipped for a failed input) ends
        // every path to it: a path is a chain of ops that ran, each depending on the one before
        // (led on through it, a path read `B → wait D` where no dependency joins them).
        let ran =
            live.started.is_some() && !matches!(live.state, OpState::Skipped | OpState::Cancelled);
        let path = match ran {
            true => Path::extend(before, Step(op, live.label, live.line), own_ns),
            false => Path::default(),
        };
        if ran && !self.device_ops.is_empty() {
            let before_at = before_at.map(|(path, position)| (path.clone(), position));
            if let Some(device_op) = self.device_ops.get_mut(&op) {
                device_op.ran = Some(Ran {
                    ns: own_ns,
                    before: before_at,
                });
            }
        }
        let position = live.position;
        let better = match self.critical() {
            _ if path.n_ops == 0 => false,
            None => true,
            // The longest, of the most steps among equals, then the first to end.
            Some((best, best_position)) => {
                (path.ns, path.n_ops) > (best.ns, best.n_ops)
                    || ((path.ns, path.n_ops) == (best.ns, best.n_ops) && position < best_position)
            }
        };
        if better {
            self.critical = Some(Critical::InSlot(slot));
        }
        let live = self.slots[slot as usize]
            .as_mut()
            .expect("a closed op's slot holds it");
        live.path = Some(path);
        live.reads = Accessed::new();
        live.writes = Accessed::new();
        live.message = None;
        live.done = None;
        live.more = None;
        let preds = std::mem::take(&mut live.preds);
        for pred in preds {
            if let PredFrom::Live(from) = pred.from {
                self.unref(from);
            }
        }
        self.forget_if_unused(slot);
    }

    fn unref(&mut self, slot: Slot) {
        if let Some(live) = &mut self.slots[slot as usize] {
            live.refs = live.refs.saturating_sub(1);
            self.forget_if_unused(slot);
        }
    }

    /// Frees the op's slot once nothing names it and its path is made.
    fn forget_if_unused(&mut self, slot: Slot) {
        let entry = &mut self.slots[slot as usize];
        let Some(live) = entry else {
            return;
        };
        if live.refs > 0 || live.path.is_none() {
            return;
        }
        // One look-up: the id names this slot unless an op pushed again under it took it.
        if live.named {
            if let std::collections::hash_map::Entry::Occupied(named) = self.ops.entry(live.id) {
                if *named.get() == slot {
                    named.remove();
                }
            }
        }
        if self.last_pushed.is_some_and(|(_, last)| last == slot) {
            self.last_pushed = None;
        }
        if matches!(self.critical, Some(Critical::InSlot(critical)) if critical == slot) {
            let path = live.path.take().expect("a forgotten op's path is made");
            self.critical = Some(Critical::Kept(path, live.position));
        }
        // Dropped where it lies, not moved out first (a live op is a few hundred bytes).
        *entry = None;
        self.free.push(slot);
    }

    /// Lets go of the labels that no live op and no path the fold keeps names, renumbering
    /// the others: a loop whose ops each have a label of their own would otherwise hold one
    /// per op of the run.
    fn compact_labels(&mut self) {
        let old = std::mem::take(&mut self.labels.texts);
        let mut kept: Vec<Arc<str>> = Vec::new();
        let mut new_number = vec![u32::MAX; old.len()];
        let mut renumber = |number: u32| {
            let new = &mut new_number[number as usize];
            if *new == u32::MAX {
                *new = kept.len() as u32;
                kept.push(old[number as usize].clone());
            }
            *new
        };
        for live in self.slots.iter_mut().flatten() {
            live.label = renumber(live.label);
            let paths = [live.path.as_mut(), best_path(&mut live.done)];
            for path in paths.into_iter().flatten() {
                path.renumber_labels(&mut renumber);
            }
        }
        for history in self.histories.values_mut() {
            if let Some(path) = best_path(&mut history.done_reads) {
                path.renumber_labels(&mut renumber);
            }
        }
        for device_op in self.device_ops.values_mut() {
            let before = device_op.ran.as_mut().and_then(|ran| ran.before.as_mut());
            if let Some((path, _)) = before {
                path.renumber_labels(&mut renumber);
            }
        }
        if let Some(Critical::Kept(path, _)) = &mut self.critical {
            path.renumber_labels(&mut renumber);
        }
        self.labels.keep_only(kept);
    }

    /// The longest path so far and the push position of its last op.
    fn critical(&self) -> Option<(&Path, usize)> {
        match self.critical.as_ref()? {
            Critical::InSlot(slot) => {
                let live = self.slot(*slot);
                Some((live.path.as_ref()?, live.position))
            }
            Critical::Kept(path, position) => Some((path, *position)),
        }
    }

    /// Calls `with` with the names of `reads` and `writes`, borrowed: each variable's own `Arc`
    /// (a clone per name and slice took 7% of the recorder's samples in a Perfetto trace), or,
    /// for a variable the log never named, one made of its id.
    fn with_names<R>(
        &self,
        reads: &[VarId],
        writes: &[VarId],
        with: impl FnOnce(&[&Arc<str>], &[&Arc<str>]) -> R,
    ) -> R {
        let named = |vars: &[VarId]| -> Option<SmallVec<[&Arc<str>; 4]>> {
            vars.iter().map(|var| self.var_names.get(var)).collect()
        };
        if let (Some(reads), Some(writes)) = (named(reads), named(writes)) {
            return with(&reads, &writes);
        }
        let unnamed: SmallVec<[(VarId, Arc<str>); 4]> = reads
            .iter()
            .chain(writes)
            .filter(|var| !self.var_names.contains_key(var))
            .map(|var| (*var, unnamed_var(*var)))
            .collect();
        let name = |var: &VarId| match self.var_names.get(var) {
            Some(name) => name,
            None => {
                let (_, name) = unnamed
                    .iter()
                    .find(|(unnamed, _)| unnamed == var)
                    .expect("a name made for every unnamed variable");
                name
            }
        };
        let reads: SmallVec<[&Arc<str>; 4]> = reads.iter().map(name).collect();
        let writes: SmallVec<[&Arc<str>; 4]> = writes.iter().map(name).collect();
        with(&reads, &writes)
    }

    /// Ends the fold: ops still unfinished get their slices (to the end of the log) and count
    /// as taking no time; device work goes out; `out` learns the lanes. Returns the summary.
    pub fn finish(mut self, worker_names: &[String], out: &mut dyn TraceOut) -> Summary {
        let start_ns = self.first_push_ns.unwrap_or(0);
        let end_ns = self.last_ns.max(start_ns);
        let mut unfinished: Vec<(usize, Slot)> = self
            .ops
            .values()
            .map(|slot| (self.slot(*slot), *slot))
            .filter(|(live, _)| live.path.is_none())
            .map(|(live, slot)| (live.position, slot))
            .collect();
        unfinished.sort_unstable();
        for (_, slot) in unfinished {
            let state = self.slot(slot).state;
            self.n_by_state[state as usize] += 1;
            self.close(slot, end_ns, out);
        }
        let lanes = self.lanes(worker_names);
        let device_lanes: Vec<Arc<str>> = lanes
            .iter()
            .filter_map(|lane| match lane {
                TraceLane::Device(name) => Some(name.clone()),
                TraceLane::Worker(..) => None,
            })
            .collect();
        let mut device_ops: Vec<(&OpId, &DeviceOp)> = self.device_ops.iter().collect();
        device_ops.sort_unstable_by_key(|(_, device_op)| device_op.position);
        let mut device_busy_ns = vec![0; device_lanes.len()];
        for (op, device_op) in &device_ops {
            let Some((lane, start_ns, end_ns)) = &device_op.span else {
                continue;
            };
            let lane = device_lanes
                .binary_search(lane)
                .expect("every span's lane is a lane");
            device_busy_ns[lane] += end_ns - start_ns;
            out.device_slice(&DeviceSlice {
                op: **op,
                label: &device_op.label,
                line: device_op.line,
                lane,
                start_ns: *start_ns,
                end_ns: *end_ns,
                launch: device_op.launch,
            });
        }
        out.end(worker_names, &lanes);
        let all_device_ops = &self.device_ops;
        let kernel_gaps = KernelGaps::of_pairs(device_ops.iter().flat_map(|(_, to)| {
            let to_start = to.span.as_ref().map(|span| span.1);
            to.preds.iter().filter_map(move |from| {
                let from_end = all_device_ops.get(from)?.span.as_ref()?.2;
                Some(to_start?.saturating_sub(from_end))
            })
        }));
        let busy_ns: Vec<(String, u64)> = lanes
            .iter()
            .filter_map(|lane| match lane {
                TraceLane::Worker(worker, name) => {
                    let busy = self.busy_ns.get(*worker as usize).copied().flatten();
                    let comm = match self.comm_spans.get(*worker as usize) {
                        Some(spans) if is_network_lane(name) => covered_ns(spans),
                        _ => 0,
                    };
                    Some((name.clone(), busy.unwrap_or(0) + comm))
                }
                TraceLane::Device(_) => None,
            })
            .collect();
        let wall_ns = end_ns - start_ns;
        let total_busy: u64 = busy_ns.iter().map(|(_, busy)| busy).sum();
        let device_path = device_path(&device_ops, &mut self.labels);
        let critical = match (self.critical(), &device_path) {
            (Some((host, _)), Some(device)) if device.ns > host.ns => Some(device),
            (Some((host, _)), _) => Some(host),
            (None, device) => device.as_ref(),
        };
        let (critical_path_ns, critical_path_ops, critical_path) = match critical {
            Some(path) => (path.ns, path.n_ops, path.shown(&self.labels)),
            None => (0, 0, Vec::new()),
        };
        Summary {
            n_ops: self.n_pushed,
            n_by_state: ALL_STATES
                .into_iter()
                .filter(|state| self.n_by_state[*state as usize] > 0)
                .map(|state| (state, self.n_by_state[state as usize]))
                .collect(),
            wall_ns,
            parallelism: if wall_ns == 0 {
                0.0
            } else {
                total_busy as f64 / wall_ns as f64
            },
            busy_ns,
            critical_path_ns,
            critical_path_ops,
            critical_path,
            device_busy_ns: device_lanes
                .iter()
                .zip(device_busy_ns)
                .map(|(lane, busy)| (format!("dev:{lane}"), busy))
                .collect(),
            kernel_gaps,
        }
    }

    /// Every named worker and every worker that ran an op, by index; then the device lanes, by
    /// name.
    fn lanes(&self, worker_names: &[String]) -> Vec<TraceLane> {
        let mut workers: Vec<u32> = (0..worker_names.len() as u32).collect();
        workers.extend(
            (0..self.busy_ns.len() as u32)
                .filter(|worker| self.busy_ns[*worker as usize].is_some()),
        );
        workers.sort_unstable();
        workers.dedup();
        let mut device_lanes: Vec<Arc<str>> = self
            .device_ops
            .values()
            .filter_map(|device_op| device_op.span.as_ref().map(|span| span.0.clone()))
            .collect();
        device_lanes.sort();
        device_lanes.dedup();
        workers
            .into_iter()
            .map(|worker| TraceLane::Worker(worker, worker_name(worker_names, worker)))
            .chain(device_lanes.into_iter().map(TraceLane::Device))
            .collect()
    }
}

const ALL_STATES: [OpState; N_STATES] = [
    OpState::Waiting,
    OpState::Ready,
    OpState::Running,
    OpState::Done,
    OpState::Failed,
    OpState::Skipped,
    OpState::Cancelled,
];

/// Whether a worker's lane is the network's own (`net:0`), where communications are its work,
/// rather than a compute worker's, which only posts them; also in the views of a job of
/// several ranks, which name each rank's lanes after it (`r1 net:0`).
pub fn is_network_lane(name: &str) -> bool {
    crate::ranks::lane_within_rank(name).starts_with("net")
}

/// The time the union of `spans` covers: spans in flight at once count once.
pub fn covered_ns(spans: &[(u64, u64)]) -> u64 {
    let mut spans = spans.to_vec();
    spans.sort_unstable();
    let mut covered = 0;
    let mut reach = 0;
    for (start, end) in spans {
        let start = start.max(reach);
        if end > start {
            covered += end - start;
            reach = end;
        }
    }
    covered
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain of ops each with a label of its own (an observed loop's, `A = A + i i=41`): the
    /// fold lets go of the labels no live op or kept path names, and the critical path still
    /// names its first ops and its last by their own labels, renumbered as the labels went.
    #[test]
    fn a_fold_keeps_the_labels_of_its_live_ops_and_paths_only() {
        let mut fold = RunFold::new();
        let var = VarId(1);
        let event = |time_ns: u64, kind: EventKind| Event { time_ns, kind };
        fold.push(
            &event(
                0,
                EventKind::VarCreated {
                    var,
                    name: Arc::from("A"),
                },
            ),
            &mut NoTrace,
        );
        let n = 10 * MIN_LABELS_TO_COMPACT as u64;
        let label = |index: u64| format!("A = A + i i={index}");
        for index in 0..n {
            let (op, time_ns) = (OpId(index), 10 * index);
            let pushed = EventKind::Pushed {
                op,
                label: Arc::from(label(index)),
                line: 2,
                reads: vec![var],
                writes: vec![var],
                device: Device::Cpu,
                priority: 0,
            };
            fold.push(&event(time_ns, pushed), &mut NoTrace);
            let started = EventKind::Started { op, worker: 0 };
            fold.push(&event(time_ns + 1, started), &mut NoTrace);
            let finished = EventKind::Finished {
                op,
                state: OpState::Done,
                message: None,
            };
            fold.push(&event(time_ns + 2, finished), &mut NoTrace);
            assert!(
                fold.labels.texts.len() <= MIN_LABELS_TO_COMPACT,
                "{} labels kept",
                fold.labels.texts.len()
            );
        }
        let summary = fold.finish(&["cpu:0".to_string()], &mut NoTrace);
        assert_eq!(summary.critical_path_ops, n as usize);
        let shown: Vec<&str> = summary
            .critical_path
            .iter()
            .map(|(_, text)| text.as_str())
            .collect();
        let expected: Vec<String> = [0, 1, 2, n - 3, n - 2, n - 1]
            .into_iter()
            .map(|index| format!("{} (line 2)", label(index)))
            .collect();
        assert_eq!(shown, expected);
    }

    #[test]
    fn communications_in_flight_at_once_cover_their_union_and_only_network_lanes_count_them() {
        assert_eq!(covered_ns(&[]), 0);
        assert_eq!(covered_ns(&[(10, 20), (0, 5), (15, 30), (18, 19)]), 25);
        assert!(is_network_lane("net:0"));
        assert!(!is_network_lane("cpu:0") && !is_network_lane("main"));
        // A job's merged views name each rank's lanes after it: its network lane is one too.
        assert!(is_network_lane("r0 net:0") && is_network_lane("r12 net:0"));
        assert!(!is_network_lane("r1 cpu:0") && !is_network_lane("r1 main"));
    }
}
