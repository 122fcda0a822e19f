//! Ops: what a caller pushes ([`OpSpec`]), the engine's block for a pushed op, and outcomes.

use std::fmt;

use crate::sync::{Arc, AtomicU32, AtomicU8, AtomicUsize, Condvar, Mutex, Ordering};
use crate::{AccessSet, Device, OpCompletion, Var};

/// The closure an op runs: `Err(message)` marks the op failed.
pub type OpFn = Box<dyn FnOnce() -> Result<(), String> + Send + 'static>;

/// The closure an asynchronous op runs, in its [`OpContext`] (where it reports its cost): it
/// starts the work and hands the [`OpCompletion`] to whoever finishes it (another thread, a
/// callback), which completes the op later.
pub type AsyncOpFn = Box<dyn FnOnce(&OpContext, OpCompletion) + Send + 'static>;

/// What an op pushed many times runs, shared by every push (a statement in a loop): pushing
/// it costs a reference count, where a closure costs an allocation each time.
pub trait OpBody: Send + Sync + 'static {
    /// Runs the op once, in `ctx`: `Err(message)` marks it failed.
    fn run(&self, ctx: &OpContext) -> Result<(), String>;

    /// Whether running the op now costs less than handing it to a worker (on a machine of
    /// many cores a hand-over moves the op's cache lines between cores: a few hundred
    /// nanoseconds). The threaded and per-device policies run such a CPU op on the pushing
    /// thread when every access of it would be granted at once, as the naive policy runs every
    /// op (TensorFlow's executor runs its inexpensive kernels inline so). Asked at the push,
    /// before the op's variables are locked, so that an op that is not cheap locks them only
    /// once: it must answer at once (never wait for a lock), and may measure an input that an
    /// op still running is about to replace. The answer chooses only the thread: the op runs,
    /// and is observed, as it would on a worker. Default: no.
    fn is_cheap(&self) -> bool {
        false
    }
}

/// What an op's body may learn of where and how it runs, built by the engine for each run
/// ([`OpBody::run`], and an asynchronous op's start function): its worker lane (a GPU op's
/// stream), the engine's workers per GPU, whether it runs on the simulated clock (and the cost
/// it reports there, which the engine reads back when the run returns), and the device clock it
/// reports its kernels' times to when the run is observed.
#[derive(Debug)]
pub struct OpContext {
    lane: usize,
    gpu_streams: usize,
    simulated: bool,
    clock: Option<crate::DeviceClock>,
    /// The cost reported so far (simulated runs only).
    cost: std::cell::Cell<crate::sim::Cost>,
}

impl OpContext {
    pub(crate) fn new(
        lane: usize,
        gpu_streams: usize,
        simulated: bool,
        clock: Option<crate::DeviceClock>,
    ) -> OpContext {
        OpContext {
            lane,
            gpu_streams,
            simulated,
            clock,
            cost: std::cell::Cell::new(crate::sim::Cost::default()),
        }
    }

    /// The context of a body run outside any engine (tests, reference interpreters): lane 0,
    /// the default workers per GPU, not simulated, not observed.
    pub fn standalone() -> OpContext {
        OpContext::new(
            0,
            crate::EngineConfig::default().gpu_streams.max(1),
            false,
            None,
        )
    }

    /// The index, within its worker group, of the worker running the op: a GPU op on worker
    /// `gpu1:s1` runs on stream 1 of gpu1.
    pub fn lane(&self) -> usize {
        self.lane
    }

    /// The engine's workers (streams) per GPU.
    pub fn gpu_streams(&self) -> usize {
        self.gpu_streams
    }

    /// Whether the op runs under the simulated policy: its time is reported
    /// ([`OpContext::report_cost`]), not spent.
    #[inline]
    pub fn is_simulated(&self) -> bool {
        self.simulated
    }

    /// Adds to the op's cost on the simulated clock (nothing otherwise).
    #[inline]
    pub fn report_cost(&self, cost: crate::sim::Cost) {
        if self.simulated {
            self.cost.set(self.cost.get() + cost);
        }
    }

    /// The cost reported in this context so far (none unless simulated).
    pub fn cost(&self) -> crate::sim::Cost {
        self.cost.get()
    }

    /// The clock the op reports its device work to, when the run is observed (never under the
    /// simulated policy).
    pub fn device_clock(&self) -> Option<&crate::DeviceClock> {
        self.clock.as_ref()
    }
}

/// An op's identity: its push number, unique within an engine, increasing in push order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u64);

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op{}", self.0)
    }
}

/// Everything needed to push an op: built with [`OpSpec::new`] (or [`OpSpec::new_async`]) and
/// its setters.
pub struct OpSpec {
    pub(crate) label: Arc<str>,
    pub(crate) line: u32,
    pub(crate) reads: Vec<Var>,
    pub(crate) writes: Vec<Var>,
    /// Accesses made ready beforehand ([`OpSpec::access_set`]), besides `reads` and `writes`.
    pub(crate) set: Option<AccessSet>,
    pub(crate) device: Device,
    pub(crate) priority: i32,
    pub(crate) work: Work,
}

impl OpSpec {
    /// An op labelled `label` (shown in views, e.g. the statement) that runs `exec`, on the CPU,
    /// at priority 0, reading and writing nothing until told.
    pub fn new(
        label: impl Into<Arc<str>>,
        exec: impl FnOnce() -> Result<(), String> + Send + 'static,
    ) -> Self {
        OpSpec::with_work(label.into(), Work::Run(Box::new(exec)))
    }

    /// An op labelled `label` that runs `body`, which other ops may share (see [`OpBody`]); on
    /// the CPU, at priority 0, reading and writing nothing until told.
    pub fn shared(label: impl Into<Arc<str>>, body: std::sync::Arc<dyn OpBody>) -> Self {
        OpSpec::with_work(label.into(), Work::Shared(body))
    }

    /// An asynchronous op (MXNet's `PushAsync`): `start` runs when the op's accesses are granted
    /// and may return before the work is done; the op finishes when the [`OpCompletion`] it is
    /// given is completed, from any thread, at any later time. Until then its variables stay
    /// held: readers of what it writes, and writers of what it reads, wait. Completing with
    /// `Err(message)` fails the op exactly as a synchronous op's error does; dropping the handle
    /// without completing it fails the op too, so a lost handle never hangs a wait. Waits and
    /// dropping the engine wait for the completion: a thread must not wait on the engine while
    /// it holds a handle that only it will complete.
    ///
    /// Placed on [`Device::Net`], its `start` must only post the work (hand a request to whoever
    /// does it) and return, never block: under the threaded and per-device policies, the thread
    /// whose completion of another op makes it ready starts it there (see
    /// `Shared::start_posts`), and that thread may be the one that moves the network's bytes.
    pub fn new_async(
        label: impl Into<Arc<str>>,
        start: impl FnOnce(&OpContext, OpCompletion) + Send + 'static,
    ) -> Self {
        OpSpec::with_work(label.into(), Work::Async(Box::new(start)))
    }

    fn with_work(label: Arc<str>, work: Work) -> Self {
        OpSpec {
            label,
            line: 0,
            reads: Vec::new(),
            writes: Vec::new(),
            set: None,
            device: Device::Cpu,
            priority: 0,
            work,
        }
    }

    /// The variables the op reads.
    pub fn reads(mut self, reads: &[Var]) -> Self {
        self.reads.extend_from_slice(reads);
        self
    }

    /// The variables the op writes (a variable both read and written counts as written).
    pub fn writes(mut self, writes: &[Var]) -> Self {
        self.writes.extend_from_slice(writes);
        self
    }

    /// The variables the op reads and writes, taking the vectors (no copy): for callers that
    /// keep them ready, such as a graph replay.
    pub fn accesses(mut self, reads: Vec<Var>, writes: Vec<Var>) -> Self {
        if self.reads.is_empty() && self.writes.is_empty() {
            (self.reads, self.writes) = (reads, writes);
        } else {
            self.reads.extend(reads);
            self.writes.extend(writes);
        }
        self
    }

    /// The op's accesses as a set made beforehand, shared with other ops: the cheapest way to
    /// push the same accesses many times (a statement in a loop).
    pub fn access_set(mut self, set: AccessSet) -> Self {
        self.set = Some(set);
        self
    }

    /// The accesses the engine keeps for the op: the shared set as it is when nothing else was
    /// given, otherwise everything normalized together.
    pub(crate) fn take_accesses(&mut self) -> AccessSet {
        let (reads, writes) = (
            std::mem::take(&mut self.reads),
            std::mem::take(&mut self.writes),
        );
        match self.set.take() {
            Some(set) if reads.is_empty() && writes.is_empty() => set,
            Some(set) => AccessSet::new(
                set.reads().iter().chain(&reads).cloned().collect(),
                set.writes().iter().chain(&writes).cloned().collect(),
            ),
            None => AccessSet::new(reads, writes),
        }
    }

    /// The device whose workers run the op.
    pub fn device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    /// The priority: higher runs first among ready ops; equal priorities run in push order.
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// The source line the op comes from (1-based; 0 means none), shown in views.
    pub fn line(mut self, line: u32) -> Self {
        self.line = line;
        self
    }
}

/// Where an op is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum OpState {
    /// Pushed; waits for some of its accesses.
    Waiting = 0,
    /// Every access granted; in a ready queue.
    Ready = 1,
    /// Running on a worker.
    Running = 2,
    /// Finished successfully.
    Done = 3,
    /// Its closure returned an error or panicked.
    Failed = 4,
    /// Not run because a variable it reads holds an error.
    Skipped = 5,
    /// Not run because it was cancelled before it started.
    Cancelled = 6,
}

impl OpState {
    fn from_u8(value: u8) -> OpState {
        match value {
            0 => OpState::Waiting,
            1 => OpState::Ready,
            2 => OpState::Running,
            3 => OpState::Done,
            4 => OpState::Failed,
            5 => OpState::Skipped,
            _ => OpState::Cancelled,
        }
    }

    /// The state's name in lowercase, as views show it.
    pub fn name(self) -> &'static str {
        match self {
            OpState::Waiting => "waiting",
            OpState::Ready => "ready",
            OpState::Running => "running",
            OpState::Done => "done",
            OpState::Failed => "failed",
            OpState::Skipped => "skipped",
            OpState::Cancelled => "cancelled",
        }
    }

    /// Whether the op has finished, one way or another.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            OpState::Done | OpState::Failed | OpState::Skipped | OpState::Cancelled
        )
    }
}

/// The failure a variable holds after the op writing it failed (or was skipped or cancelled):
/// always the root cause, the op that failed first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpError {
    /// The op that failed (or was cancelled), as its engine numbered it: what the interpreter
    /// finds the calls it was pushed within by.
    pub op: OpId,
    /// The label of the op that failed.
    pub label: Arc<str>,
    /// Its source line (0: none).
    pub line: u32,
    /// What went wrong.
    pub message: String,
    /// Whether the op was cancelled rather than failed.
    pub cancelled: bool,
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: `{}`: {}", self.line, self.label, self.message)
        } else {
            write!(f, "`{}`: {}", self.label, self.message)
        }
    }
}

impl std::error::Error for OpError {}

/// How a finished op ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// It ran and succeeded.
    Ok,
    /// It ran and failed with this error.
    Failed(Arc<OpError>),
    /// It did not run: a variable it reads holds this error.
    Skipped(Arc<OpError>),
    /// It was cancelled before it started.
    Cancelled(Arc<OpError>),
}

impl Outcome {
    /// The op state this outcome leaves.
    pub fn state(&self) -> OpState {
        match self {
            Outcome::Ok => OpState::Done,
            Outcome::Failed(_) => OpState::Failed,
            Outcome::Skipped(_) => OpState::Skipped,
            Outcome::Cancelled(_) => OpState::Cancelled,
        }
    }

    /// The error the op's written variables will hold, if any.
    pub(crate) fn error(&self) -> Option<&Arc<OpError>> {
        match self {
            Outcome::Ok => None,
            Outcome::Failed(error) | Outcome::Skipped(error) | Outcome::Cancelled(error) => {
                Some(error)
            }
        }
    }
}

/// How often an abandonable wait asks whether to give up.
pub(crate) const GIVE_UP_SLICE: std::time::Duration = std::time::Duration::from_millis(20);

/// A one-shot signal a waiting thread blocks on.
#[derive(Default)]
pub(crate) struct Signal {
    result: Mutex<Option<Result<(), Arc<OpError>>>>,
    condvar: Condvar,
}

impl Signal {
    pub(crate) fn set(&self, result: Result<(), Arc<OpError>>) {
        *crate::sync::lock(&self.result) = Some(result);
        self.condvar.notify_all();
    }

    pub(crate) fn wait(&self) -> Result<(), Arc<OpError>> {
        let mut guard = crate::sync::lock(&self.result);
        loop {
            if let Some(result) = guard.take() {
                return result;
            }
            guard = crate::sync::wait(&self.condvar, guard);
        }
    }

    /// Like [`Signal::wait`], but asks `give_up` every [`GIVE_UP_SLICE`] and returns `None`
    /// once it says yes.
    pub(crate) fn wait_or(&self, give_up: &dyn Fn() -> bool) -> Option<Result<(), Arc<OpError>>> {
        let mut guard = crate::sync::lock(&self.result);
        loop {
            if let Some(result) = guard.take() {
                return Some(result);
            }
            if give_up() {
                return None;
            }
            guard = crate::sync::wait_timeout(&self.condvar, guard, GIVE_UP_SLICE);
        }
    }
}

/// What a pushed op does when it runs.
pub(crate) enum Work {
    /// A caller's closure, run by a worker.
    Run(OpFn),
    /// A caller's shared body, run by a worker.
    Shared(std::sync::Arc<dyn OpBody>),
    /// A caller's asynchronous op: started by a worker, finished through its [`OpCompletion`].
    Async(AsyncOpFn),
    /// `wait_var`: wake the waiting thread with the variable's error, if any.
    Wait(Arc<Signal>),
    /// `delete_var`: free the variable's storage.
    Delete(Box<dyn FnOnce() + Send + 'static>),
    /// A shared body that has run, kept in its finished block (see [`OpBlock::refill`]).
    Ran(std::sync::Arc<dyn OpBody>),
}

impl Work {
    /// Whether it is a caller's work (which a cancel stops before it starts), not the engine's
    /// bookkeeping (a wait, a deletion), which always runs.
    pub(crate) fn is_users(&self) -> bool {
        matches!(self, Work::Run(_) | Work::Shared(_) | Work::Async(_))
    }
}

/// A new op's work as its pusher hands it over: owned, or a shared body borrowed from whoever
/// keeps the op to push again, counted a new reference only when the block does not hold it.
pub(crate) enum NewWork<'a> {
    /// Work the block takes as it is.
    Owned(Work),
    /// A shared body ([`Work::Shared`]) by reference.
    Shared(&'a std::sync::Arc<dyn OpBody>),
}

impl NewWork<'_> {
    /// The work, owned (a shared body's reference counted).
    fn into_work(self) -> Work {
        match self {
            NewWork::Owned(work) => work,
            NewWork::Shared(body) => Work::Shared(body.clone()),
        }
    }

    /// Whether an op doing this work is engine bookkeeping, run on the thread that makes it
    /// ready.
    fn is_inline(&self) -> bool {
        match self {
            NewWork::Owned(work) => {
                !matches!(work, Work::Run(_) | Work::Shared(_) | Work::Async(_))
            }
            NewWork::Shared(_) => false,
        }
    }

    /// Whether an op doing this work on `device` only posts a network request when it starts.
    fn posts(&self, device: Device) -> bool {
        device == Device::Net && matches!(self, NewWork::Owned(Work::Async(_)))
    }
}

/// The engine's record of a pushed op, shared by the queues that hold its accesses.
pub(crate) struct OpBlock {
    pub(crate) id: OpId,
    pub(crate) label: Arc<str>,
    pub(crate) line: u32,
    pub(crate) device: Device,
    pub(crate) priority: i32,
    /// What it reads and writes (`n_read_writes` of the writes, at the front, it also reads:
    /// their errors skip it too).
    pub(crate) accesses: AccessSet,
    /// Engine bookkeeping (wait, delete) run on the thread that makes it ready, never queued.
    pub(crate) inline: bool,
    /// An asynchronous op on the network device: its start function only posts a request, so a
    /// completing thread that makes it ready may start it (`Shared::start_posts`).
    pub(crate) posts: bool,
    /// Accesses not yet granted, plus one held by `push` until every access is appended.
    pub(crate) wait_count: AtomicUsize,
    state: AtomicU8,
    /// The worker that ran it (`u32::MAX`: none yet).
    worker: AtomicU32,
    /// Taken exactly once, by the thread that runs the op.
    pub(crate) work: Mutex<Option<Work>>,
}

/// What a new op is besides its work (its number and what its push event says of it), borrowed
/// from its pusher: the start of its block, or of a run on the naive fast path
/// (`Shared::run_granted`).
pub(crate) struct OpHeader<'a> {
    pub(crate) id: OpId,
    pub(crate) label: &'a Arc<str>,
    pub(crate) line: u32,
    pub(crate) device: Device,
    pub(crate) priority: i32,
    pub(crate) accesses: &'a AccessSet,
}

impl OpBlock {
    /// A new op's block, waiting.
    pub(crate) fn new(header: OpHeader<'_>, work: NewWork<'_>) -> OpBlock {
        let n_accesses = header.accesses.reads.len() + header.accesses.writes.len();
        OpBlock {
            inline: work.is_inline(),
            posts: work.posts(header.device),
            id: header.id,
            label: header.label.clone(),
            line: header.line,
            device: header.device,
            priority: header.priority,
            accesses: header.accesses.clone(),
            wait_count: AtomicUsize::new(n_accesses + 1),
            state: AtomicU8::new(OpState::Waiting as u8),
            worker: AtomicU32::new(u32::MAX),
            work: Mutex::new(Some(work.into_work())),
        }
    }

    /// Makes a finished block, which nobody else holds, the block of a new op, as
    /// [`OpBlock::new`] would. A label, access set and shared body it already holds (the same
    /// statement's) are kept as they are: their reference counts are not touched. (A worker
    /// that ran a shared body leaves it in the block, [`Work::Ran`], rather than dropping its
    /// reference: dropped there, and counted again by the next push, the count's line would
    /// move between the two threads at every op.)
    pub(crate) fn refill(&mut self, header: OpHeader<'_>, work: NewWork<'_>) {
        if !Arc::ptr_eq(&self.label, header.label) {
            self.label = header.label.clone();
        }
        if !self.accesses.same_as(header.accesses) {
            self.accesses = header.accesses.clone();
        }
        let n_accesses = self.accesses.reads.len() + self.accesses.writes.len();
        self.inline = work.is_inline();
        self.posts = work.posts(header.device);
        self.id = header.id;
        self.line = header.line;
        self.device = header.device;
        self.priority = header.priority;
        // Nobody else holds the block: these stores race with nothing.
        self.wait_count.store(n_accesses + 1, Ordering::Relaxed);
        self.state.store(OpState::Waiting as u8, Ordering::Relaxed);
        self.worker.store(u32::MAX, Ordering::Relaxed);
        let mut slot = crate::sync::lock(&self.work);
        let work = match (work, slot.take()) {
            (NewWork::Shared(body), Some(Work::Ran(ran))) if Arc::ptr_eq(body, &ran) => {
                Work::Shared(ran)
            }
            (work, _) => work.into_work(),
        };
        *slot = Some(work);
    }

    /// Drops the shared body a finished block kept after running it ([`Work::Ran`]).
    pub(crate) fn forget_ran_body(&self) {
        let mut work = crate::sync::lock(&self.work);
        if matches!(*work, Some(Work::Ran(_))) {
            *work = None;
        }
    }

    pub(crate) fn state(&self) -> OpState {
        OpState::from_u8(self.state.load(Ordering::Acquire))
    }

    pub(crate) fn set_state(&self, state: OpState) {
        self.state.store(state as u8, Ordering::Release);
    }

    pub(crate) fn worker(&self) -> Option<u32> {
        let worker = self.worker.load(Ordering::Relaxed);
        (worker != u32::MAX).then_some(worker)
    }

    pub(crate) fn set_worker(&self, worker: u32) {
        self.worker.store(worker, Ordering::Relaxed);
    }

    /// Counts down one granted access; true when the op has nothing left to wait for.
    pub(crate) fn grant_one(&self) -> bool {
        self.wait_count.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

/// A shared handle to an op block, equal by identity (the variable queues hold these).
#[derive(Clone)]
pub(crate) struct OpRef(pub(crate) Arc<OpBlock>);

impl PartialEq for OpRef {
    fn eq(&self, other: &OpRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::ops::Deref for OpRef {
    type Target = OpBlock;
    fn deref(&self) -> &OpBlock {
        &self.0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::{Engine, EngineConfig, Policy};

    /// Records the context each run gets.
    struct Recorder(Mutex<Vec<(bool, usize, usize)>>);

    impl OpBody for Recorder {
        fn run(&self, ctx: &OpContext) -> Result<(), String> {
            ctx.report_cost(crate::sim::Cost {
                fixed_ns: 1_000,
                ..Default::default()
            });
            self.0
                .lock()
                .unwrap()
                .push((ctx.is_simulated(), ctx.gpu_streams(), ctx.lane()));
            Ok(())
        }
    }

    /// Does nothing.
    struct Noop;

    impl OpBody for Noop {
        fn run(&self, _: &OpContext) -> Result<(), String> {
            Ok(())
        }
    }

    fn header<'a>(label: &'a Arc<str>, accesses: &'a AccessSet) -> OpHeader<'a> {
        OpHeader {
            id: OpId(1),
            label,
            line: 1,
            device: Device::Cpu,
            priority: 0,
            accesses,
        }
    }

    /// A finished block keeps the body it ran (`Work::Ran`); refilled, it must hold the new
    /// op's body, to run, and no reference to any other. (That the same statement's body is
    /// kept without counting a reference shows in the benchmarks, not in the counts.)
    #[test]
    fn a_refilled_block_holds_its_new_ops_body_and_no_other() {
        let label: Arc<str> = "c = c + b".into();
        let accesses = AccessSet::new(Vec::new(), Vec::new());
        let body: Arc<dyn OpBody> = Arc::new(Noop);
        let mut block = OpBlock::new(header(&label, &accesses), NewWork::Shared(&body));
        // As a worker leaves it once the body has run.
        let ran = match crate::sync::lock(&block.work).take() {
            Some(Work::Shared(ran)) => ran,
            _ => panic!("a shared body's block holds it to run"),
        };
        *crate::sync::lock(&block.work) = Some(Work::Ran(ran));
        let counts = |body: &Arc<dyn OpBody>| (Arc::strong_count(&label), Arc::strong_count(body));
        let before = counts(&body);
        block.refill(header(&label, &accesses), NewWork::Shared(&body));
        assert_eq!(counts(&body), before);
        assert!(matches!(
            crate::sync::lock(&block.work).as_ref(),
            Some(Work::Shared(held)) if Arc::ptr_eq(held, &body)
        ));
        // Another statement's body takes its place, and the old one's reference goes.
        let other: Arc<dyn OpBody> = Arc::new(Noop);
        block.refill(header(&label, &accesses), NewWork::Shared(&other));
        assert_eq!(Arc::strong_count(&body), before.1 - 1);
        assert_eq!(Arc::strong_count(&other), 2);
    }

    #[test]
    fn a_shared_body_learns_its_policy_and_streams_from_its_context() {
        for (policy, simulated) in [(Policy::Naive, false), (Policy::Sim, true)] {
            let body = std::sync::Arc::new(Recorder(Mutex::new(Vec::new())));
            let engine = Engine::new(EngineConfig {
                policy,
                gpu_streams: 3,
                ..EngineConfig::default()
            });
            engine.push(OpSpec::shared("op", body.clone()));
            engine.wait_all();
            assert_eq!(
                *body.0.lock().unwrap(),
                vec![(simulated, 3, 0)],
                "{policy:?}"
            );
        }
        let standalone = OpContext::standalone();
        assert!(!standalone.is_simulated() && standalone.device_clock().is_none());
    }
}
