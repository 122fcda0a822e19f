//! The engine: variables, push, completion, waiting, deletion, snapshots.
//!
//! # Protocol
//!
//! Shared state and who touches it:
//! - a variable's [`VarQueue`], version and error: under the variable's own mutex. A push locks
//!   all of its op's variables at once, in id order, to append (see `append_accesses`); a
//!   completion takes one variable lock at a time;
//! - an op's wait counter (`OpBlock::wait_count`): an atomic, starting at its number of accesses
//!   plus one that `push` holds until every access is appended, so an op cannot start while it is
//!   still being pushed; whoever takes it to zero makes the op ready. Observed, a grant at a
//!   release is sent before its count goes down (after, another thread could make the op ready
//!   and start it first), except the op's last wait (the count is 1: counts only go down, so
//!   nobody else can move it), whose grant and the readiness it gives go as one record;
//! - an op's closure: taken once, by the thread that runs it;
//! - an asynchronous op's completion: taken once, by the first of its handle's `complete` and
//!   `drop` (see `completion.rs`); it releases the op's accesses like a synchronous op's end;
//! - the fast path (`run_unqueued`): a synchronous op whose accesses would all be granted at
//!   once runs on the pushing thread while it holds its variables' locks (taken in id order, as
//!   an append does), never entering the queues: a push from another thread to one of them waits
//!   for it, as its queue entries would make that push's op wait. The naive policy runs every
//!   op so; the threaded and per-device ones a CPU op whose body says it is cheap
//!   ([`OpBody::is_cheap`]: handing it to a worker would cost more than running it), asked
//!   before the locks are taken. Observed, it sends the events the queued path would; once a
//!   snapshot was taken, observed ops take the queues;
//! - the count of unfinished ops: an atomic; the idle mutex is touched only when it reaches zero
//!   while a thread waits for everything, and by that thread.
//!
//! Memory per op: an access is an entry in its variable's `VecDeque`, a ring buffer whose slots
//! are reused from op to op; an op's block is reused once the op has finished (`block_pool.rs`:
//! blocks finished on workers go back, in batches, to the thread that pushes).
//!
//! What both the pushing thread and the workers write at every op costs a cache line moved
//! between cores each time (on a 16-core machine, most of a threaded op's cost): the op's block
//! and its variables' states and queues must move; the rest is kept off the path. The counters
//! of ops pushed and unfinished, the block exchange and a variable's error flag sit on lines of
//! their own; a worker counts its finished ops in batches (see [`UNCOUNTED`]); a block reused for
//! the same statement keeps its label, access set and shared body.
//!
//! There is no engine-wide lock on the hot path: a push takes one lock per accessed variable and,
//! under the threaded policies, the ready queue's lock when the op is ready at once. A worker that
//! finishes an op keeps one of the ops it made ready and runs it next when its queue is empty. A
//! thread that makes network ops ready (completing an asynchronous op, finishing an op on a
//! worker, or pushing one ready at once) starts them itself, each when nothing queued in its
//! group runs before it (`start_posts`): their start functions only post a request, and never
//! block.

use crate::clock::Clock;
use crossbeam_utils::CachePadded;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::accesses::{AccessSet, Accesses};
use crate::batch::OpBatch;
use crate::block_pool::BlockPool;
use crate::completion::{self, Ending, OpCompletion};
use crate::config::{EngineConfig, Policy};
use crate::device_time::DeviceClock;
use crate::event::{Event, EventKind, EventSink, Push};
use crate::op::{
    AsyncOpFn, NewWork, OpBlock, OpBody, OpContext, OpError, OpHeader, OpId, OpRef, OpSpec,
    OpState, Outcome, Signal, Work,
};
use crate::ready_queue::{runs_before, Group};
use crate::sim::{self as simulation, Cost, SimDevice, Simulator};
use crate::sim_feed::{Bookkeeping, SimFeed, SimOutcome};
use crate::snapshot::{AccessSnapshot, Blocker, OpSnapshot, Snapshot, VarSnapshot};
use crate::sync::thread::{Builder, JoinHandle};
use crate::sync::{
    engine_thread_local, fence, lock, wait, wait_timeout, Arc, AtomicBool, AtomicU64, AtomicUsize,
    Condvar, Mutex, MutexGuard, OnceLock, Ordering, Weak,
};
use crate::var_queue::VarQueue;
use crate::Device;

/// A variable's identity, unique within an engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VarId(pub u64);

impl std::fmt::Display for VarId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// A handle to an engine variable: a tag the engine tracks accesses to. Cheap to clone; the
/// engine never looks at what the caller stores under it.
#[derive(Clone)]
pub struct Var(Arc<VarInner>);

pub(crate) struct VarInner {
    id: VarId,
    name: Arc<str>,
    state: Mutex<VarState>,
    /// Mirrors `state.error.is_some()`, so that running an op checks its reads without locking.
    /// On a cache line of its own, written only when the variable's error changes: beside the
    /// queue, which the pushing thread and the workers write at every op, each check would
    /// read a line that another core holds, then fetch it again to write it.
    has_error: CachePadded<AtomicBool>,
}

struct VarState {
    queue: VarQueue<OpRef>,
    version: u64,
    error: Option<Arc<OpError>>,
    /// When the last write to finish was cancelled, the engine's cancel mark as it finished
    /// (see [`Engine::cancel_mark`]); 0 when it ran.
    cancelled_mark: u64,
}

impl Var {
    /// The variable's identity.
    pub fn id(&self) -> VarId {
        self.0.id
    }

    /// The name it was created with.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// How many writes to it have completed.
    pub fn version(&self) -> u64 {
        lock(&self.0.state).version
    }

    /// The error it holds, if the last write to complete failed (or was skipped: a cancelled
    /// write changes nothing).
    pub fn error(&self) -> Option<Arc<OpError>> {
        lock(&self.0.state).error.clone()
    }

    /// When the last write to finish was cancelled (its value is then older than the program's
    /// last write to it), the engine's cancel mark as it finished, which is at least the mark of
    /// the cancel that stopped it (see [`Engine::cancel_mark`]); `None` when that write ran.
    pub fn cancelled_write_mark(&self) -> Option<u64> {
        Some(lock(&self.0.state).cancelled_mark).filter(|&mark| mark > 0)
    }
}

impl std::fmt::Debug for Var {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Var({}, {:?})", self.0.id, self.0.name)
    }
}

/// The dependency engine. Push ops from any thread; they run as their accesses are granted.
/// Dropping it waits for every pushed op, then stops the workers.
pub struct Engine {
    shared: Arc<Shared>,
}

/// A shared op to push by reference ([`Engine::push_shared`]): its label, line, placement,
/// body and accesses, all borrowed from whoever keeps the op to push again.
pub struct SharedOp<'a> {
    /// The label shown in views and errors.
    pub label: &'a Arc<str>,
    /// The source line (0 when none).
    pub line: u32,
    /// Where it runs.
    pub device: Device,
    /// Its priority among ready ops.
    pub priority: i32,
    /// What it runs.
    pub body: &'a Arc<dyn OpBody>,
    /// What it reads and writes.
    pub accesses: &'a AccessSet,
}

/// The most accesses an op run by the fast path has (nearly all ops): their locks stay on
/// the stack.
const FAST_ACCESSES: usize = 4;

/// The locks the fast path holds while its op runs, by access index.
type FastGuards<'a> = [Option<MutexGuard<'a, VarState>>; FAST_ACCESSES];

/// The most variables a batch run by the naive fast path locks at once (a replayed block of a
/// few statements): their locks stay on the stack.
const BATCH_VARS: usize = 16;

/// The locks a batch's push holds: its variables', taken in id order.
type BatchGuards<'a> = [Option<MutexGuard<'a, VarState>>; BATCH_VARS];

/// Locks every variable of `batch` (at most [`BATCH_VARS`]), in id order.
fn lock_batch(batch: &OpBatch) -> BatchGuards<'_> {
    let mut guards: BatchGuards<'_> = Default::default();
    for (guard, var) in guards.iter_mut().zip(&batch.vars) {
        *guard = Some(lock(&var.0.state));
    }
    guards
}

/// The states of one batch op's variables as a slice by access index (see [`states_in`]), kept
/// in `narrow` or, for an op of more than [`FAST_ACCESSES`] accesses, in `wide`: two locals of
/// the caller's, so that the op's run is written once and inlined for both.
macro_rules! batch_states {
    ($narrow:ident, $wide:ident, $guards:expr, $accesses:expr, $indices:expr) => {{
        let n_accesses = $accesses.len();
        if n_accesses <= FAST_ACCESSES {
            $narrow = states_in::<FAST_ACCESSES>($guards, $accesses, $indices);
            &mut $narrow[..n_accesses]
        } else {
            $wide = states_in::<BATCH_VARS>($guards, $accesses, $indices);
            &mut $wide[..n_accesses]
        }
    }};
}

/// The states of one batch op's variables, by access index, out of the batch's locks
/// (`indices`: where each access of its lock order is among the batch's variables), in room for
/// `N`: [`FAST_ACCESSES`] for nearly every op, [`BATCH_VARS`] for a bulk of several statements
/// (whose accesses are among the batch's variables, so never more). See [`batch_states`].
fn states_in<'g, const N: usize>(
    guards: &'g mut BatchGuards<'_>,
    accesses: &Accesses,
    indices: &[usize],
) -> [Option<&'g mut VarState>; N] {
    let mut states: [Option<&mut VarState>; N] = std::array::from_fn(|_| None);
    // Both in id order: each access's variable is further on among the batch's than the last.
    let mut rest = &mut guards[..];
    let mut start = 0;
    for (&access, &var) in accesses.lock_order.iter().zip(indices) {
        let (state, tail) = std::mem::take(&mut rest)[var - start..]
            .split_first_mut()
            .expect("the batch locks every access's variable");
        states[access] = state.as_deref_mut();
        rest = tail;
        start = var + 1;
    }
    states
}

/// The variables' states behind the fast path's locks, by access index.
fn states_of<'g>(guards: &'g mut FastGuards<'_>) -> [Option<&'g mut VarState>; FAST_ACCESSES] {
    guards.each_mut().map(|guard| guard.as_deref_mut())
}

/// The most worker groups an engine can have: the CPU, the copy workers, the GPUs and the network.
const N_GROUP_SLOTS: usize = 3 + crate::device::MAX_GPUS as usize;

/// The engine's state, shared by its handle, its workers, monitors and completion handles.
pub(crate) struct Shared {
    policy: Policy,
    /// The simulated policy's clock and model; `None` under the real policies.
    sim: Option<SimFeed>,
    threads: usize,
    gpu_streams: usize,
    clock: Clock,
    sink: Option<Arc<dyn EventSink>>,
    next_op: CachePadded<AtomicU64>,
    next_var: AtomicU64,
    /// Ops pushed and not yet finished.
    n_unfinished: CachePadded<AtomicUsize>,
    /// Finished op blocks on their way back to the threads that push.
    blocks: BlockPool,
    idle_lock: Mutex<()>,
    idle_condvar: Condvar,
    /// Threads in `wait_all`; a finishing op takes the idle lock only when there are some.
    n_idle_waiters: AtomicUsize,
    /// Ops with an id below this are cancelled when they would start.
    cancel_below: AtomicU64,
    /// Live variables, for snapshots; touched at creation and deletion only.
    vars: Mutex<BTreeMap<VarId, Weak<VarInner>>>,
    groups: [OnceLock<Arc<Group>>; N_GROUP_SLOTS],
    worker_names: Arc<Mutex<Vec<String>>>,
    threads_started: Mutex<Vec<JoinHandle<()>>>,
    failures: Mutex<Failures>,
    /// Whether a snapshot was ever taken: from then on an observed naive engine's ops take the
    /// queued path, where a snapshot sees them running (see [`Shared::lock_if_grantable`]).
    snapshots_taken: AtomicBool,
}

/// The most ops a worker finishes before it counts them (see [`UNCOUNTED`]).
const MAX_UNCOUNTED: usize = 64;

/// A worker's ops finished and not yet counted (see [`UNCOUNTED`]).
#[derive(Clone, Copy)]
struct Uncounted {
    /// The address of the worker's engine: ops of another engine finished on this thread (an
    /// asynchronous op completed inside another engine's op) are counted at once.
    engine: usize,
    n: usize,
}

engine_thread_local! {
    /// On a worker, the ops of its engine it finished and has not yet taken off the engine's
    /// count of unfinished ops (`None` on other threads, which count each at once). Every push
    /// adds to that count and every finish takes from it: counted one by one, its cache line
    /// would move between the pushing thread and the worker at every op. A worker counts them
    /// before it looks for more work, so the count reaches zero, and wakes `wait_all`, when the
    /// last op finishes.
    static UNCOUNTED: std::cell::Cell<Option<Uncounted>> = std::cell::Cell::new(None);
}

engine_thread_local! {
    /// The room a release on this thread collects each variable's granted ops in (see
    /// `Shared::release`), kept so that a finish allocates nothing.
    static GRANTED: std::cell::Cell<Vec<OpRef>> = std::cell::Cell::new(Vec::new());
}

engine_thread_local! {
    /// This thread's index within its worker group (0 on threads that are not workers).
    static CURRENT_LANE: std::cell::Cell<usize> = std::cell::Cell::new(0);
}

/// The index, within its worker group, of the worker running the current op: a GPU op on
/// worker `gpu1:s1` runs on stream 1 of gpu1. 0 on threads that are not workers.
pub fn current_lane() -> usize {
    CURRENT_LANE.with(std::cell::Cell::get)
}

/// The worker index of the thread that calls the engine (naive runs, waits, deletions), and of
/// a thread that completes an asynchronous op.
pub const CALLER_WORKER: u32 = 0;

/// The push number of an engine's first op.
const FIRST_OP: u64 = 1;

impl Engine {
    /// Starts an engine: under the threaded policy its worker pool starts now; per-device
    /// groups start on their first op.
    pub fn new(config: EngineConfig) -> Engine {
        let worker_names = Arc::new(Mutex::new(vec!["main".to_string()]));
        let shared = Arc::new(Shared {
            policy: config.policy,
            threads: config.threads.max(1),
            gpu_streams: config.gpu_streams.max(1),
            clock: Clock::start(),
            sim: (config.policy == Policy::Sim).then(|| {
                SimFeed::new(
                    Simulator::new(config.threads, config.gpu_streams),
                    FIRST_OP,
                    worker_names.clone(),
                )
            }),
            sink: config.sink,
            next_op: CachePadded::new(AtomicU64::new(FIRST_OP)),
            next_var: AtomicU64::new(1),
            n_unfinished: CachePadded::new(AtomicUsize::new(0)),
            blocks: BlockPool::new(),
            idle_lock: Mutex::new(()),
            idle_condvar: Condvar::new(),
            n_idle_waiters: AtomicUsize::new(0),
            cancel_below: AtomicU64::new(0),
            vars: Mutex::new(BTreeMap::new()),
            groups: std::array::from_fn(|_| OnceLock::new()),
            worker_names,
            threads_started: Mutex::new(Vec::new()),
            failures: Mutex::new(Failures::default()),
            snapshots_taken: AtomicBool::new(false),
        });
        if shared.policy == Policy::Threaded {
            shared.group_for(Device::Cpu);
        }
        Engine { shared }
    }

    /// The running policy.
    pub fn policy(&self) -> Policy {
        self.shared.policy
    }

    /// The CPU pool's worker count.
    pub fn threads(&self) -> usize {
        self.shared.threads
    }

    /// Whether events go to a sink.
    pub fn is_observed(&self) -> bool {
        self.shared.sink.is_some()
    }

    /// The names of the workers started so far, by worker index (0 is the calling thread).
    pub fn worker_names(&self) -> Vec<String> {
        lock(&self.shared.worker_names).clone()
    }

    /// Nanoseconds since the engine started (the clock of events and snapshots).
    pub fn now_ns(&self) -> u64 {
        self.shared.now_ns()
    }

    /// Creates a variable named `name` (the name is for views only).
    pub fn new_var(&self, name: impl Into<Arc<str>>) -> Var {
        let id = VarId(self.shared.next_var.fetch_add(1, Ordering::Relaxed));
        let name = name.into();
        let inner = Arc::new(VarInner {
            id,
            name: name.clone(),
            state: Mutex::new(VarState {
                queue: VarQueue::new(),
                version: 0,
                error: None,
                cancelled_mark: 0,
            }),
            has_error: CachePadded::new(AtomicBool::new(false)),
        });
        lock(&self.shared.vars).insert(id, Arc::downgrade(&inner));
        self.shared
            .emit_structural(|| EventKind::VarCreated { var: id, name });
        Var(inner)
    }

    /// Creates a variable named `name` that holds `error`, as if the last write to it had
    /// failed: its readers are skipped and pass the error on, and a plain write clears it (a
    /// failed variable carried over from an engine this one replaces).
    pub fn new_failed_var(&self, name: impl Into<Arc<str>>, error: Arc<OpError>) -> Var {
        let var = self.new_var(name);
        lock(&var.0.state).error = Some(error);
        var.0.has_error.store(true, Ordering::Release);
        var
    }

    /// Pushes an op; it runs once every access is granted. Safe from several threads at once.
    pub fn push(&self, mut spec: OpSpec) -> OpId {
        let accesses = spec.take_accesses();
        self.shared.push_block(
            &spec.label,
            spec.line,
            spec.device,
            spec.priority,
            &accesses,
            spec.work,
        )
    }

    /// Pushes a shared op by reference: what `push` of `OpSpec::shared(...).access_set(...)`
    /// does, cloning the op's parts only when it must wait in the queues (the naive engine runs
    /// an op that waits for nothing at once, the threaded ones a cheap one, and then need no
    /// copy of them).
    pub fn push_shared(&self, op: SharedOp<'_>) -> OpId {
        if let Some(mut guards) = self
            .shared
            .lock_if_grantable(op.accesses, op.device, || op.body.is_cheap())
        {
            let granted =
                self.shared
                    .numbered(op.label, op.line, op.device, op.priority, op.accesses);
            let id = self
                .shared
                .run_granted(granted, &mut states_of(&mut guards), || {
                    op.body.run(&self.shared.op_context())
                });
            drop(guards);
            self.shared.count_finished(1);
            return id;
        }
        // The naive fast path was tried above: the op takes the queues.
        let block = self.shared.new_op(
            op.label,
            op.line,
            op.device,
            op.priority,
            op.accesses,
            NewWork::Shared(op.body),
        );
        self.shared.push_queued(block)
    }

    /// Pushes a batch's ops in order, as [`Engine::push_shared`] of each one after the other
    /// would, with no push from another thread between them; returns the last op's id (`None`
    /// for an empty batch). Its variables are locked once for the whole batch: under the naive
    /// policy, unobserved, when its ops would all run at once, they run here under those locks;
    /// under the threaded and per-device policies every op's accesses are appended under them.
    pub fn push_batch(&self, batch: &OpBatch) -> Option<OpId> {
        if let Some(last) = self
            .shared
            .run_batch_unqueued(batch, || self.shared.op_context())
        {
            return Some(last);
        }
        if let Some(last) = self.shared.push_batch_queued(batch) {
            return Some(last);
        }
        let mut last = None;
        for op in &batch.ops {
            last = Some(self.push_shared(op.as_shared()));
        }
        last
    }

    /// Waits until every op pushed so far that writes `var` has finished (asynchronous ones
    /// completed; reads pushed before go on: the wait is a read too); returns the error the
    /// variable holds, if any. Must not be called from inside an op. Under the simulated policy
    /// it first waits, in real time, for every op pushed before it and for the wait itself to be
    /// in the simulator (a wait run by a completing thread enters there), then advances the
    /// virtual clock, so that its events fall at the same place every run. `line` is the source line that
    /// waits (a `print`, a value read on the host; 0: none), which views show beside the wait.
    pub fn wait_var(&self, var: &Var, line: u32) -> Result<(), Arc<OpError>> {
        let signal = Arc::new(Signal::default());
        let label: Arc<str> = format!("wait {}", var.name()).into();
        let wait = self.shared.push_block(
            &label,
            line,
            Device::Cpu,
            0,
            &AccessSet::new(vec![var.clone()], Vec::new()),
            Work::Wait(signal.clone()),
        );
        let result = signal.wait();
        let id = var.id();
        self.shared
            .simulate_until(wait.0 + 1, &move |sim: &Simulator| sim.var_is_idle(id));
        result
    }

    /// [`Engine::wait_var`] that the caller can abandon: `give_up` is asked every few
    /// milliseconds, and once it says yes the wait returns `None` (the ops go on; only the
    /// caller stops waiting). A REPL's second Ctrl-C while a `print` waits uses it.
    pub fn wait_var_or(
        &self,
        var: &Var,
        line: u32,
        give_up: &dyn Fn() -> bool,
    ) -> Option<Result<(), Arc<OpError>>> {
        let signal = Arc::new(Signal::default());
        let label: Arc<str> = format!("wait {}", var.name()).into();
        let wait = self.shared.push_block(
            &label,
            line,
            Device::Cpu,
            0,
            &AccessSet::new(vec![var.clone()], Vec::new()),
            Work::Wait(signal.clone()),
        );
        let result = signal.wait_or(give_up)?;
        let id = var.id();
        // Under the simulated policy an op pushed before may still wait (for a peer's
        // message): giving up stops that wait too.
        self.shared
            .simulate_until_or(
                wait.0 + 1,
                &move |sim: &Simulator| sim.var_is_idle(id),
                give_up,
            )
            .then_some(result)
    }

    /// [`Engine::wait_all`] that the caller can abandon (see [`Engine::wait_var_or`]); says
    /// whether every op finished.
    pub fn wait_all_or(&self, give_up: &dyn Fn() -> bool) -> bool {
        let before = self.shared.next_op.load(Ordering::SeqCst);
        if !self.shared.wait_all_or(give_up) {
            return false;
        }
        self.shared.simulate_until(before, &Simulator::is_idle);
        true
    }

    /// Waits until every op pushed so far has finished (asynchronous ones completed). Must not be
    /// called from inside an op.
    pub fn wait_all(&self) {
        let before = self.shared.next_op.load(Ordering::SeqCst);
        self.shared.wait_all();
        self.shared.simulate_until(before, &Simulator::is_idle);
    }

    /// Waits until every op pushed so far has finished and every worker sleeps, then lets go
    /// of what the engine kept of the statements it ran (the shared bodies its finished op
    /// blocks keep for the next push of the same statement, see `block_pool`): an idle engine
    /// then holds no tensor of a statement gone, on every policy alike, so that the memory in
    /// use counted next is the program's. For the end of a run, not its hot path.
    pub fn settle(&self) {
        self.wait_all();
        for group in self.shared.groups.iter().filter_map(|slot| slot.get()) {
            group.wait_until_asleep();
        }
        self.shared.blocks.forget_kept_bodies();
    }

    /// Sets the simulated model of `target` (`cpu`, `gpu1`, `gpu` for every GPU, `cpu->gpu0`,
    /// `pcie`, `nvlink`, `copy`) for ops pushed from now on; only the simulated policy uses it.
    pub fn set_sim_device(&self, target: &str, device: SimDevice) {
        if let Some(sim) = &self.shared.sim {
            sim.with(|sim| sim.model.set(target, device));
        }
    }

    /// Deletes `var`: a write op that runs `free` once every earlier access has ended, then
    /// forgets the variable. `line` is the source line that deletes it (a `del`, or the statement
    /// whose temporary it was; 0: none), shown in views.
    pub fn delete_var(&self, var: Var, line: u32, free: impl FnOnce() + Send + 'static) -> OpId {
        let label: Arc<str> = format!("del {}", var.name()).into();
        self.delete_var_labelled(var, &label, line, free)
    }

    /// [`Engine::delete_var`] with its label given, `del ` and the variable's name, made once by
    /// a caller that deletes variables of one name again and again (a function's local at
    /// every call).
    pub fn delete_var_labelled(
        &self,
        var: Var,
        label: &Arc<str>,
        line: u32,
        free: impl FnOnce() + Send + 'static,
    ) -> OpId {
        debug_assert_eq!(label.strip_prefix("del "), Some(var.name()));
        self.shared.push_block(
            label,
            line,
            Device::Cpu,
            0,
            &AccessSet::new(Vec::new(), vec![var]),
            Work::Delete(Box::new(free)),
        )
    }

    /// Cancels every op pushed so far that has not started: each finishes as cancelled without
    /// starting (no worker, no `Started` event) and writes nothing, so its written variables keep
    /// their last completed write's version and error (its own error stays the op's, in views).
    /// Waits, deletions and running ops are not interrupted.
    pub fn cancel_pending(&self) {
        self.shared.cancel_pending();
    }

    /// How far cancels have reached: ops numbered below it were pushed before the last
    /// [`Engine::cancel_pending`] (0 before any). It only grows, so a variable whose
    /// [`Var::cancelled_write_mark`] is above the mark read at some moment lost a write to a
    /// cancel made after that moment.
    pub fn cancel_mark(&self) -> u64 {
        self.shared.cancel_below.load(Ordering::Acquire)
    }

    /// The ops that failed (not skipped nor cancelled) since the last call, in push order (so
    /// that every policy reports them alike, whatever order they finished in), after those
    /// adopted from a replaced engine: the first [`MAX_KEPT_FAILURES`] to finish
    /// ([`Engine::take_n_failures_not_kept`] counts the rest, so that a loop failing millions of
    /// times keeps the memory of a few).
    pub fn take_failures(&self) -> Vec<Arc<OpError>> {
        lock(&self.shared.failures).take()
    }

    /// The ops numbered below `op` whose failures are kept untaken (see
    /// [`Engine::take_failures`]): what an interpreter that forgets where old ops were pushed
    /// must note first.
    pub fn failed_ops_below(&self, op: OpId) -> Vec<OpId> {
        let failures = lock(&self.shared.failures);
        failures
            .kept
            .iter()
            .map(|error| error.op)
            .filter(|failed| *failed < op)
            .collect()
    }

    /// How many failures since the last call were counted and not kept (past
    /// [`MAX_KEPT_FAILURES`] untaken).
    pub fn take_n_failures_not_kept(&self) -> u64 {
        std::mem::take(&mut lock(&self.shared.failures).n_not_kept)
    }

    /// Adds `failures`, seen by another engine and not taken yet, to those the next
    /// [`Engine::take_failures`] returns (ahead of this engine's own): the failures of an
    /// engine this one replaces.
    pub fn adopt_failures(&self, failures: Vec<Arc<OpError>>) {
        lock(&self.shared.failures).adopted.extend(failures);
    }

    /// The id the next op pushed will take: ops are numbered in push order, so an interpreter
    /// that reads it before and after pushing some knows their ids (see [`OpError::op`]).
    pub fn next_op_id(&self) -> OpId {
        OpId(self.shared.next_op.load(Ordering::Relaxed))
    }

    /// How many ops are pushed and not yet finished.
    pub fn n_unfinished(&self) -> usize {
        self.shared.n_unfinished.load(Ordering::Acquire)
    }

    /// Every live variable's queue and every live op's state, with what waiting ops wait on.
    pub fn snapshot(&self) -> Snapshot {
        self.shared.snapshot()
    }

    /// Waits for every op, then stops the workers (what dropping the engine does).
    pub fn shutdown(self) {}

    /// A handle that watches this engine from another thread (snapshots, progress) without
    /// owning it: live panels redraw from it while the owner keeps pushing.
    pub fn monitor(&self) -> Monitor {
        Monitor {
            shared: self.shared.clone(),
        }
    }
}

/// A watcher of an engine: snapshots and progress, from any thread. It keeps the engine's
/// bookkeeping alive but not its workers; once the engine is dropped it sees an idle engine.
#[derive(Clone)]
pub struct Monitor {
    shared: Arc<Shared>,
}

impl Monitor {
    /// Every live variable's queue and every live op's state (see [`Engine::snapshot`]).
    pub fn snapshot(&self) -> Snapshot {
        self.shared.snapshot()
    }

    /// How many ops are pushed and not yet finished.
    pub fn n_unfinished(&self) -> usize {
        self.shared.n_unfinished.load(Ordering::Acquire)
    }

    /// Says that a live view will take snapshots from now on, before it takes the first: an
    /// observed naive engine then queues every op, where a snapshot sees it waiting and running,
    /// instead of running it at once under its variables' locks, where a snapshot would wait for
    /// it. (The first snapshot says so too, but only once the op it may have waited for ended.)
    pub fn expect_snapshots(&self) {
        self.shared.snapshots_taken.store(true, Ordering::Relaxed);
    }

    /// The names of the workers started so far, by worker index.
    pub fn worker_names(&self) -> Vec<String> {
        lock(&self.shared.worker_names).clone()
    }

    /// Nanoseconds since the engine started.
    pub fn now_ns(&self) -> u64 {
        self.shared.now_ns()
    }

    /// Cancels every op pushed so far that has not started (see [`Engine::cancel_pending`]):
    /// from another thread, while the owner is blocked waiting (Ctrl-C, a kernel interrupt).
    pub fn cancel_pending(&self) {
        self.shared.cancel_pending();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shared.wait_all();
        for group in self.shared.groups.iter().filter_map(|slot| slot.get()) {
            group.shut_down();
        }
        for thread in std::mem::take(&mut *lock(&self.shared.threads_started)) {
            // A worker never panics (ops run under catch_unwind); nothing to report if one did.
            let _ = thread.join();
        }
    }
}

impl Shared {
    /// Nanoseconds since the start: real time, or the host's virtual time when simulated.
    fn now_ns(&self) -> u64 {
        match &self.sim {
            Some(sim) => sim.with(|sim| sim.now_ns()),
            None => self.clock.now_ns(),
        }
    }

    /// Sends a variable's creation or deletion to the sink (at virtual time when simulated).
    fn emit_structural(&self, kind: impl FnOnce() -> EventKind) {
        if let Some(sink) = &self.sink {
            sink.event(Event {
                time_ns: self.now_ns(),
                kind: kind(),
            });
        }
    }

    /// Advances a simulated run until `done`, once every op pushed before op `before` is in the
    /// simulator; nothing under the real policies.
    fn simulate_until(&self, before: u64, done: &dyn Fn(&Simulator) -> bool) {
        self.simulate_until_or(before, done, &|| false);
    }

    /// [`Self::simulate_until`] that the caller can abandon while an op before `before` has
    /// not ended (see [`Engine::wait_var_or`]); says whether the clock ran.
    fn simulate_until_or(
        &self,
        before: u64,
        done: &dyn Fn(&Simulator) -> bool,
        give_up: &dyn Fn() -> bool,
    ) -> bool {
        let Some(sim) = &self.sim else { return true };
        let sink = simulation::sink_or_none(&self.sink);
        sim.run_until(before, sink, done, give_up)
    }

    /// The sink that op events go to directly: none when unobserved, or when simulated (the
    /// simulator sends them).
    #[inline]
    fn real_sink(&self) -> Option<&Arc<dyn EventSink>> {
        match self.sim {
            Some(_) => None,
            None => self.sink.as_ref(),
        }
    }

    /// Sends an event to the sink, building it only when there is one. Under the simulated
    /// policy the simulator sends the op events, in virtual time.
    #[inline]
    fn emit(&self, kind: impl FnOnce() -> EventKind) {
        if self.sim.is_some() {
            return;
        }
        if let Some(sink) = &self.sink {
            sink.event(Event {
                time_ns: self.now_ns(),
                kind: kind(),
            });
        }
    }

    fn push_block(
        self: &Arc<Self>,
        label: &Arc<str>,
        line: u32,
        device: Device,
        priority: i32,
        accesses: &AccessSet,
        work: Work,
    ) -> OpId {
        let work = match self.run_unqueued(label, line, device, priority, accesses, work) {
            Ok(id) => return id,
            Err(work) => work,
        };
        let op = self.new_op(
            label,
            line,
            device,
            priority,
            accesses,
            NewWork::Owned(work),
        );
        self.push_queued(op)
    }

    /// Pushes a new op's block into its variables' queues, then runs or queues it if it is
    /// ready; returns its id.
    fn push_queued(self: &Arc<Self>, op: OpRef) -> OpId {
        let n_granted = 1 + self.append_accesses(&op); // 1: the count `push` holds
        let id = op.id;
        self.dispatch_pushed(op, n_granted);
        id
    }

    /// Numbers `n` ops pushed together and counts them unfinished; returns the first one's id.
    fn number_ops(&self, n: usize) -> OpId {
        self.n_unfinished.fetch_add(n, Ordering::AcqRel);
        OpId(self.next_op.fetch_add(n as u64, Ordering::Relaxed))
    }

    /// A pushed op's numbered block, counted unfinished.
    fn new_op(
        &self,
        label: &Arc<str>,
        line: u32,
        device: Device,
        priority: i32,
        accesses: &AccessSet,
        work: NewWork<'_>,
    ) -> OpRef {
        let header = self.numbered(label, line, device, priority, accesses);
        self.blocks.new_op(header, work)
    }

    /// The header of a new op, numbered now and counted unfinished.
    fn numbered<'a>(
        &self,
        label: &'a Arc<str>,
        line: u32,
        device: Device,
        priority: i32,
        accesses: &'a AccessSet,
    ) -> OpHeader<'a> {
        OpHeader {
            id: self.number_ops(1),
            label,
            line,
            device,
            priority,
            accesses,
        }
    }

    /// Ends the push of `op`, whose accesses are in their queues, `n_granted` of its wait count
    /// given back (those granted at once and the push's own): runs or queues it when it is
    /// ready. Called once its variables are unlocked.
    fn dispatch_pushed(self: &Arc<Self>, op: OpRef, n_granted: usize) {
        let n_accesses = op.accesses.len();
        if op.wait_count.fetch_sub(n_granted, Ordering::AcqRel) == n_granted {
            // Ready at once: the push's record said so (`EventSink::pushed`).
            let op = if n_granted == n_accesses + 1 {
                op.set_state(OpState::Ready);
                op
            } else {
                self.make_ready(op)
            };
            if op.inline || matches!(self.policy, Policy::Naive | Policy::Sim) {
                let mut ready = Vec::new();
                self.execute(op, CALLER_WORKER, &mut ready);
                self.route(&mut ready, CALLER_WORKER, None);
            } else if op.posts {
                // A network op ready at once starts here, as a completion's does: its start
                // only posts a request, and waking a worker for it costs more than that.
                let mut ready = vec![op];
                self.start_posts(&mut ready, CALLER_WORKER);
                self.route(&mut ready, CALLER_WORKER, None);
            } else {
                self.group_for(op.device).push(op);
            }
        }
    }

    /// Pushes a whole batch into the queues, as [`Self::push_block`] pushes one op, under the
    /// threaded and per-device policies: every variable locked once, in id order, while every
    /// op's accesses are appended (in batch order, each op's push recorded as alone); then each
    /// ready op is run or queued. Returns the last op's id, or `None` when the batch must be
    /// pushed op by op (another policy, or too many variables).
    fn push_batch_queued(self: &Arc<Self>, batch: &OpBatch) -> Option<OpId> {
        if !matches!(self.policy, Policy::Threaded | Policy::PerDevice)
            || batch.vars.len() > BATCH_VARS
        {
            return None;
        }
        // The blocks are made before the variables are locked: a worker that finishes an op
        // of the last run waits for those locks, so they are held only while the accesses are
        // appended.
        let first = self.number_ops(batch.ops.len());
        let mut pushed: Vec<(OpRef, usize)> = batch
            .ops
            .iter()
            .zip(first.0..)
            .map(|(op, id)| {
                let header = OpHeader {
                    id: OpId(id),
                    label: &op.label,
                    line: op.line,
                    device: op.device,
                    priority: op.priority,
                    accesses: &op.accesses,
                };
                (self.blocks.new_op(header, NewWork::Shared(&op.body)), 1)
            })
            .collect();
        // Observed, every op of the batch is pushed at the moment before its variables are
        // locked: the clock is read once, and not while they are held.
        let time_ns = self.real_sink().map(|_| self.now_ns());
        let mut guards = lock_batch(batch);
        for ((block, n_granted), (op, indices)) in pushed
            .iter_mut()
            .zip(batch.ops.iter().zip(&batch.var_indices))
        {
            let (mut narrow, mut wide);
            let states = batch_states!(narrow, wide, &mut guards, &op.accesses, indices);
            *n_granted += self.append_locked(block, states, time_ns);
        }
        drop(guards);
        let last = pushed.last().map(|(op, _)| op.id);
        for (op, n_granted) in pushed {
            self.dispatch_pushed(op, n_granted);
        }
        last
    }

    /// The naive engine's fast path: a synchronous op (a closure, a shared body, or a deletion,
    /// whose variable is then forgotten) whose accesses would all be granted at once (nothing
    /// queued on what it writes, no write queued on what it reads) runs here and now, under its
    /// variables' locks, without entering their queues or getting an op block.
    /// The queued path would run it on this thread at once too; holding the locks (taken in id
    /// order, as `append_accesses` does) keeps a push from another thread behind it, as its
    /// queue entries would. Observed, it sends the events the queued path would (see
    /// [`Self::run_granted`]); a snapshot taken meanwhile waits for the op. Gives the work back
    /// when the op must take the queued path.
    fn run_unqueued(
        self: &Arc<Self>,
        label: &Arc<str>,
        line: u32,
        device: Device,
        priority: i32,
        accesses: &AccessSet,
        work: Work,
    ) -> Result<OpId, Work> {
        let cheap = || match &work {
            Work::Shared(body) => body.is_cheap(),
            Work::Delete(_) => true,
            _ => false,
        };
        let Some(guards) = (match &work {
            Work::Shared(_) | Work::Run(_) | Work::Delete(_) => {
                self.lock_if_grantable(accesses, device, cheap)
            }
            Work::Async(_) | Work::Wait(_) | Work::Ran(_) => None,
        }) else {
            return Err(work);
        };
        let mut guards = guards;
        let deletes = matches!(work, Work::Delete(_));
        let granted = self.numbered(label, line, device, priority, accesses);
        let id = self.run_granted(granted, &mut states_of(&mut guards), || match work {
            Work::Shared(body) => body.run(&self.op_context()),
            Work::Run(exec) => exec(),
            Work::Delete(free) => {
                free();
                Ok(())
            }
            Work::Async(_) | Work::Wait(_) | Work::Ran(_) => {
                Err("the engine ran bookkeeping as a plain op".to_string())
            }
        });
        drop(guards);
        if deletes {
            self.forget_deleted(&accesses.writes);
        }
        self.count_finished(1);
        Ok(id)
    }

    /// The locks of `accesses`' variables, taken in id order, when the fast path may run the op
    /// now (see [`Self::run_unqueued`]): an op the policy runs on the pushing thread (see
    /// [`Self::runs_here`]: under the threaded policies, a cheap one), a handful of accesses,
    /// each grantable at once, and, when observed, no snapshot taken yet. A snapshot cannot see
    /// an op that runs under its variables' locks (it waits for it), so once a live view asks
    /// for snapshots the observed ops take the queued path, where snapshots see them waiting
    /// and running.
    fn lock_if_grantable<'a>(
        &self,
        accesses: &'a Accesses,
        device: Device,
        cheap: impl FnOnce() -> bool,
    ) -> Option<FastGuards<'a>> {
        if !self.runs_here(device, cheap)
            || !self.may_run_unqueued()
            || accesses.len() > FAST_ACCESSES
        {
            return None;
        }
        let mut guards: FastGuards<'a> = Default::default();
        for &index in &accesses.lock_order {
            let state = lock(&accesses.var_at(index).0.state);
            if !state.queue.would_grant(index >= accesses.reads.len()) {
                return None;
            }
            guards[index] = Some(state);
        }
        Some(guards)
    }

    /// Whether the policy runs an op placed on `device` on the pushing thread when every access
    /// of it is granted at its push: under the naive policy every op; under the threaded and
    /// per-device ones a CPU op whose work is `cheap` (a shared body that says so, see
    /// [`OpBody::is_cheap`], asked here, before the variables are locked, so that an op that is
    /// not cheap locks them only once, on the queued path; a deletion, which the queued path
    /// runs on the thread that makes it ready too); none when simulated.
    fn runs_here(&self, device: Device, cheap: impl FnOnce() -> bool) -> bool {
        match self.policy {
            Policy::Naive => true,
            Policy::Threaded | Policy::PerDevice => device == Device::Cpu && cheap(),
            Policy::Sim => false,
        }
    }

    /// Whether the fast path is open: unobserved, or observed by nothing that takes snapshots.
    fn may_run_unqueued(&self) -> bool {
        self.sink.is_none() || !self.snapshots_taken.load(Ordering::Relaxed)
    }

    /// Runs a whole batch here and now, as [`Self::run_unqueued`] runs one op, when every op of
    /// it would be granted at once (the naive policy, or the threaded ones when every op is a
    /// cheap CPU op; no snapshot-taking observer; at most [`BATCH_VARS`] variables, so that a
    /// bulk of several statements, one op of many accesses, runs here too): every variable
    /// locked once, in id order, for the whole batch. The ops run in order, each numbered, refused, reported and counted as alone; their
    /// variables' queues do not change meanwhile (these ops never enter them), so whether each
    /// would be granted is known before the first runs. Returns the last op's id, or `None` when
    /// the batch must be pushed op by op.
    fn run_batch_unqueued(&self, batch: &OpBatch, context: impl Fn() -> OpContext) -> Option<OpId> {
        if !batch
            .ops
            .iter()
            .all(|op| self.runs_here(op.device, || op.body.is_cheap()))
            || !self.may_run_unqueued()
            || batch.vars.len() > BATCH_VARS
        {
            return None;
        }
        let mut guards = lock_batch(batch);
        let grantable = batch
            .ops
            .iter()
            .zip(&batch.var_indices)
            .all(|(op, indices)| {
                let accesses = &op.accesses;
                accesses
                    .lock_order
                    .iter()
                    .zip(indices.iter())
                    .all(|(&access, &var)| {
                        guards[var].as_ref().is_some_and(|state| {
                            state.queue.would_grant(access >= accesses.reads.len())
                        })
                    })
            });
        if !grantable {
            return None;
        }
        let first = self.number_ops(batch.ops.len());
        let mut last = None;
        for ((op, indices), id) in batch.ops.iter().zip(&batch.var_indices).zip(first.0..) {
            let accesses = &op.accesses;
            let granted = OpHeader {
                id: OpId(id),
                label: &op.label,
                line: op.line,
                device: op.device,
                priority: op.priority,
                accesses,
            };
            let (mut narrow, mut wide);
            let states = batch_states!(narrow, wide, &mut guards, accesses, indices);
            last = Some(self.run_granted(granted, states, || op.body.run(&context())));
        }
        drop(guards);
        self.count_finished(batch.ops.len());
        last
    }

    /// Runs an op whose variables' states `states` holds, locked, by access index (see
    /// [`Self::run_unqueued`]), as a push and its whole run: refused when cancelled or reading an
    /// error, its failure reported and its writes counted. Observed, it sends what the queued
    /// path sends for an op granted at once and run on this thread: its push (every access
    /// granted, ready) and its start on [`CALLER_WORKER`], at one moment (nothing stands between
    /// them here), then its end, its device clock current while it runs. The caller numbers it
    /// first (from [`Self::number_ops`]), unlocks the variables after, then counts the op
    /// finished.
    fn run_granted(
        &self,
        op: OpHeader<'_>,
        states: &mut [Option<&mut VarState>],
        run: impl FnOnce() -> Result<(), String>,
    ) -> OpId {
        let id = op.id;
        let cancel = self.is_cancelled(id);
        match &self.sink {
            None => {
                self.settle_granted(&op, states, cancel, run);
            }
            Some(sink) => self.run_granted_observed(sink, op, states, cancel, run),
        }
        id
    }

    /// [`Self::run_granted`] with its events sent to `sink`. Kept out of line, so that the
    /// unobserved path stays as small as it was. A cancelled op (`cancel`) never starts: its push is
    /// sent without a start, then its end. A CPU op's push, start and end are sent together
    /// once it has ended ([`EventSink::ran_at_once`]): it runs under its variables' locks, so
    /// no other op's event about them can fall between them, and it reports no device work
    /// meanwhile.
    #[inline(never)]
    fn run_granted_observed(
        &self,
        sink: &Arc<dyn EventSink>,
        op: OpHeader<'_>,
        states: &mut [Option<&mut VarState>],
        cancel: bool,
        run: impl FnOnce() -> Result<(), String>,
    ) {
        let n_accesses = op.accesses.len();
        debug_assert!(n_accesses <= BATCH_VARS);
        let push = Push {
            op: op.id,
            label: op.label,
            line: op.line,
            reads: &op.accesses.reads,
            writes: &op.accesses.writes,
            device: op.device,
            priority: op.priority,
            granted: &[(1 << n_accesses) - 1],
            ready: true,
        };
        let outcome = if cancel {
            sink.pushed(self.now_ns(), &push);
            self.settle_granted(&op, states, true, run)
        } else if op.device == Device::Cpu {
            let push_ns = self.now_ns();
            let outcome =
                DeviceClock::run_unclocked(|| self.settle_granted(&op, states, false, run));
            let message = outcome.error().map(|error| error.message.as_str());
            sink.ran_at_once(push_ns, &push, self.now_ns(), outcome.state(), message);
            return;
        } else {
            sink.pushed_and_started(self.now_ns(), &push);
            observed_run(op.id, op.device, sink, self.clock, || {
                self.settle_granted(&op, states, false, run)
            })
        };
        let message = outcome.error().map(|error| error.message.as_str());
        sink.finished(self.now_ns(), op.id, outcome.state(), message);
    }

    /// Runs the fast path's op unless it is refused (`cancel`, or reading an error), reports
    /// its failure and counts its writes, giving their variables its error or none; returns how
    /// it ended. A cancelled op wrote nothing: its variables keep their values and errors (see
    /// [`Shared::release`]).
    #[inline(always)]
    fn settle_granted(
        &self,
        op: &OpHeader<'_>,
        states: &mut [Option<&mut VarState>],
        cancel: bool,
        run: impl FnOnce() -> Result<(), String>,
    ) -> Outcome {
        let OpHeader {
            label,
            line,
            accesses,
            ..
        } = *op;
        let n_reads = accesses.reads.len();
        let guards = &mut states[..accesses.len()];
        let outcome = if cancel {
            let mark = self.cancel_below.load(Ordering::Acquire);
            for state in guards.iter_mut().skip(n_reads).flatten() {
                state.cancelled_mark = mark;
            }
            return cancelled(op.id, label, line);
        } else if let Some(error) = guards[..n_reads + accesses.n_read_writes]
            .iter()
            .find_map(|state| state.as_ref().and_then(|state| state.error.clone()))
        {
            Outcome::Skipped(error)
        } else {
            run_caught(op.id, label, line, run)
        };
        if let Outcome::Failed(error) = &outcome {
            lock(&self.failures).add(error);
        }
        let error = outcome.error();
        for (index, state) in guards.iter_mut().enumerate().skip(n_reads) {
            let Some(state) = state else { continue };
            state.version += 1;
            state.cancelled_mark = 0;
            if state.error.is_some() || error.is_some() {
                state.error = error.cloned();
                accesses
                    .var_at(index)
                    .0
                    .has_error
                    .store(error.is_some(), Ordering::Release);
            }
        }
        outcome
    }

    /// Appends the op's accesses to its variables' queues, reads then writes; returns how many
    /// were granted at once.
    ///
    /// Every variable is locked before the first append and unlocked after the last, in id
    /// order: two ops pushed at once from two threads then take the same order on every variable
    /// they share. Appended one variable at a time, each could be first on one variable and second
    /// on another, holding a granted access the other waits behind there: a cycle that never runs
    /// (loom found it, `loom_tests`).
    fn append_accesses(&self, op: &OpRef) -> usize {
        /// Ops with up to this many accesses (nearly all) keep their locks on the stack.
        const ON_STACK: usize = 4;
        // Observed, the push's time, read before the variables are locked so that the clock
        // does not lengthen the time they are held (a release on a worker waits for them).
        let time_ns = self.real_sink().map(|_| self.now_ns());
        let n_accesses = op.accesses.len();
        let accesses = &op.accesses;
        if n_accesses <= ON_STACK {
            let mut guards: [Option<MutexGuard<'_, VarState>>; ON_STACK] = Default::default();
            for &index in &accesses.lock_order {
                guards[index] = Some(lock(&accesses.var_at(index).0.state));
            }
            let mut states = guards.each_mut().map(|guard| guard.as_deref_mut());
            self.append_locked(op, &mut states[..n_accesses], time_ns)
        } else {
            let mut guards = Vec::new();
            guards.resize_with(n_accesses, || None);
            for &index in &accesses.lock_order {
                guards[index] = Some(lock(&accesses.var_at(index).0.state));
            }
            let mut states: Vec<_> = guards
                .iter_mut()
                .map(|guard| guard.as_deref_mut())
                .collect();
            self.append_locked(op, &mut states, time_ns)
        }
    }

    /// [`Self::append_accesses`] once the caller holds every variable's lock: `guards` holds
    /// their states by access index; `time_ns` is the push's time when observed (see
    /// [`Self::real_sink`]).
    fn append_locked(
        &self,
        op: &OpRef,
        guards: &mut [Option<&mut VarState>],
        time_ns: Option<u64>,
    ) -> usize {
        let accesses = &op.accesses;
        let n_reads = accesses.reads.len();
        let mut n_granted = 0;
        // Which accesses were granted, as bits (only when observed, to send with the push).
        let observed = time_ns.is_some();
        let mut granted_bits = [0u64; 1];
        let mut more_bits = Vec::new();
        let bits: &mut [u64] = match guards.len() {
            _ if !observed => &mut [],
            ..=64 => &mut granted_bits,
            n => {
                more_bits.resize(n.div_ceil(64), 0);
                &mut more_bits
            }
        };
        for (index, guard) in guards.iter_mut().enumerate() {
            let Some(state) = guard else { continue };
            let granted = if index < n_reads {
                state.queue.append_read(op.clone())
            } else {
                state.queue.append_write(op.clone())
            };
            if granted {
                n_granted += 1;
                if let Some(word) = bits.get_mut(index / 64) {
                    *word |= 1 << (index % 64);
                }
            }
        }
        // Sent while every variable is still locked: no grant of a later release comes first.
        if let (Some(sink), Some(time_ns)) = (&self.sink, time_ns) {
            sink.pushed(
                time_ns,
                &Push {
                    op: op.id,
                    label: &op.label,
                    line: op.line,
                    reads: &op.accesses.reads,
                    writes: &op.accesses.writes,
                    device: op.device,
                    priority: op.priority,
                    granted: bits,
                    ready: n_granted == guards.len(),
                },
            );
        }
        n_granted
    }

    fn make_ready(&self, op: OpRef) -> OpRef {
        op.set_state(OpState::Ready);
        self.emit(|| EventKind::Ready { op: op.id });
        op
    }

    /// Sends ready ops where they run: engine bookkeeping and naive ops run here and now; other
    /// ops go to their group's queue, except one that this worker keeps to run next (returned)
    /// when its own queue is empty.
    fn route(
        self: &Arc<Self>,
        ready: &mut Vec<OpRef>,
        worker: u32,
        own_group: Option<&Arc<Group>>,
    ) -> Option<OpRef> {
        let mut keep: Option<OpRef> = None;
        while let Some(op) = ready.pop() {
            if op.inline || matches!(self.policy, Policy::Naive | Policy::Sim) {
                self.execute(op, worker, ready);
                continue;
            }
            let group = self.group_for(op.device);
            let own = own_group.is_some_and(|own| Arc::ptr_eq(own, group) && own.is_empty());
            if !own {
                group.push(op);
                continue;
            }
            match keep.take() {
                None => keep = Some(op),
                Some(kept) if runs_before(&op, &kept) => {
                    group.push(kept);
                    keep = Some(op);
                }
                Some(kept) => {
                    group.push(op);
                    keep = Some(kept);
                }
            }
        }
        keep
    }

    /// Starts one op on this thread. A synchronous op (and engine bookkeeping) also finishes here,
    /// collecting the ops its release makes ready; an asynchronous one finishes here only when its
    /// handle ended while its function ran. A user's op cancelled before this point never
    /// starts: it finishes here as cancelled, with no worker and no `Started` event (a wait or a
    /// deletion is bookkeeping, never cancelled).
    fn execute(self: &Arc<Self>, op: OpRef, worker: u32, ready: &mut Vec<OpRef>) {
        let work = lock(&op.work).take();
        if work.as_ref().is_some_and(Work::is_users) && self.is_cancelled(op.id) {
            if let Some(Work::Shared(body)) = work {
                // Kept for the block's next op of the same statement (see `OpBlock::refill`).
                *lock(&op.work) = Some(Work::Ran(body));
            }
            // Its work is dropped unrun (a communication's start function, dropped, abandons
            // the communication).
            let cost = self.sim.as_ref().map(|_| Cost::default());
            self.finish(
                &op,
                cancelled(op.id, &op.label, op.line),
                cost,
                false,
                ready,
            );
            self.blocks.recycle(op);
            return;
        }
        op.set_worker(worker);
        op.set_state(OpState::Running);
        if let Some(sink) = self.real_sink() {
            sink.started(self.now_ns(), op.id, worker);
        }
        match work {
            Some(Work::Run(exec)) => {
                // A closure has no context to report a cost in: it costs nothing simulated.
                let outcome = self.run_user_op(&op, exec);
                let cost = self.sim.as_ref().map(|_| Cost::default());
                self.finish(&op, outcome, cost, false, ready);
            }
            Some(Work::Shared(body)) => {
                let mut cost = Cost::default();
                let outcome = self.run_user_op(&op, || {
                    let ctx = self.op_context();
                    let result = body.run(&ctx);
                    cost = ctx.cost();
                    result
                });
                // Kept for the block's next op of the same statement (see `OpBlock::refill`).
                *lock(&op.work) = Some(Work::Ran(body));
                let cost = self.sim.as_ref().map(|_| cost);
                self.finish(&op, outcome, cost, false, ready);
            }
            Some(Work::Async(start)) => self.start_async(&op, start, ready),
            Some(Work::Wait(signal)) => {
                signal.set(match first_read_error(&op) {
                    Some(error) => Err(error),
                    None => Ok(()),
                });
                self.finish(&op, Outcome::Ok, None, false, ready);
            }
            Some(Work::Delete(free)) => {
                free();
                self.finish(&op, Outcome::Ok, None, true, ready);
            }
            Some(Work::Ran(_)) | None => debug_assert!(false, "an op ran twice"),
        }
        self.blocks.recycle(op);
    }

    /// The context of the op about to run on this thread, inside `clocked` (whose clock it
    /// takes when the run is observed).
    fn op_context(&self) -> OpContext {
        let observed = self.sink.is_some() && self.sim.is_none();
        OpContext::new(
            current_lane(),
            self.gpu_streams,
            self.sim.is_some(),
            observed.then(DeviceClock::current).flatten(),
        )
    }

    /// Ends an op: records its outcome, releases its accesses (collecting the ops that become
    /// ready) and counts it finished. `cost` is what it reported under the simulated policy, when
    /// known now.
    fn finish(
        self: &Arc<Self>,
        op: &OpRef,
        outcome: Outcome,
        cost: Option<Cost>,
        deleted: bool,
        ready: &mut Vec<OpRef>,
    ) {
        if let Outcome::Failed(error) = &outcome {
            lock(&self.failures).add(error);
        }
        op.set_state(outcome.state());
        if let Some(sim) = &self.sim {
            let sink = simulation::sink_or_none(&self.sink);
            let bookkeeping = op.inline.then_some(if deleted {
                Bookkeeping::Delete
            } else {
                Bookkeeping::Wait
            });
            // Bookkeeping costs nothing simulated.
            let cost = cost.or(bookkeeping.map(|_| Cost::default()));
            sim.finished(sink, op.id, sim_outcome(op, &outcome, bookkeeping), cost);
        }
        // Observed, the end's time is also that of the grants its release gives: they follow it
        // at once, on this thread, and one reading of the clock serves them all.
        let time_ns = self.real_sink().map(|sink| {
            let time_ns = self.now_ns();
            let message = outcome.error().map(|error| error.message.as_str());
            sink.finished(time_ns, op.id, outcome.state(), message);
            time_ns
        });
        self.release(op, &outcome, time_ns, ready);
        if deleted {
            self.forget_deleted(&op.accesses.writes);
        }
        self.count_finished_here();
    }

    /// Forgets the variables a deletion that just ended wrote: they are no longer live (nor
    /// in snapshots), and observers hear so.
    fn forget_deleted(&self, deleted: &[Var]) {
        for var in deleted {
            lock(&self.vars).remove(&var.id());
            // Under the simulated policy the simulator says so, when the deletion ends in
            // virtual time.
            if self.sim.is_none() {
                self.emit_structural(|| EventKind::VarDeleted { var: var.id() });
            }
        }
    }

    /// Counts one op finished on this thread: on a worker, with the others it finished since
    /// it last counted, [`MAX_UNCOUNTED`] at a time or before it looks for work (see
    /// [`UNCOUNTED`]); elsewhere at once.
    fn count_finished_here(&self) {
        let engine = self.address();
        let to_count = UNCOUNTED.with(|uncounted| match uncounted.get() {
            Some(mine) if mine.engine == engine => {
                let n = mine.n + 1;
                let keep = if n < MAX_UNCOUNTED { n } else { 0 };
                uncounted.set(Some(Uncounted { engine, n: keep }));
                n - keep
            }
            _ => 1,
        });
        if to_count > 0 {
            self.count_finished(to_count);
        }
    }

    /// Counts the ops this worker finished and has not counted yet.
    fn count_uncounted(&self) {
        let engine = self.address();
        let n = UNCOUNTED.with(|uncounted| {
            uncounted
                .replace(Some(Uncounted { engine, n: 0 }))
                .map_or(0, |mine| mine.n)
        });
        if n > 0 {
            self.count_finished(n);
        }
    }

    /// This engine's address, which tells it apart from the other engines of the process.
    fn address(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Counts `n` ops finished, waking `wait_all` when they were the last.
    fn count_finished(&self, n: usize) {
        // The fence pairs with `wait_all`'s: either it sees zero unfinished ops, or this sees it
        // waiting. (SeqCst accesses alone do not order a store before a later load of another
        // variable in loom's model, which finds the lost wake-up; the fences do.)
        if self.n_unfinished.fetch_sub(n, Ordering::SeqCst) == n {
            fence(Ordering::SeqCst);
            if self.n_idle_waiters.load(Ordering::SeqCst) > 0 {
                let _idle = lock(&self.idle_lock);
                self.idle_condvar.notify_all();
            }
        }
    }

    /// Runs an asynchronous op's start function with its completion handle. The op finishes now
    /// if it does not run (reading an error) or if its handle ended on this thread
    /// while the function ran; otherwise whoever holds the handle finishes it.
    fn start_async(self: &Arc<Self>, op: &OpRef, start: AsyncOpFn, ready: &mut Vec<OpRef>) {
        if let Some(outcome) = self.refusal(op) {
            let cost = self.sim.as_ref().map(|_| Cost::default());
            self.finish(op, outcome, cost, false, ready);
            return;
        }
        let handle = OpCompletion::new(self.clone(), op.clone());
        let (result, ending, cost) = self.clocked(op, || {
            let ctx = self.op_context();
            let frame = completion::enter(self, op.id);
            let result = catch_unwind(AssertUnwindSafe(|| start(&ctx, handle)));
            (result, completion::leave(frame), ctx.cost())
        });
        let cost = self.sim.as_ref().map(|_| cost);
        let panic = result.err().map(|payload| panic_message(payload.as_ref()));
        match ending {
            Some(ending) => {
                let outcome = match (ending, panic) {
                    (Ending::Completed(result), panic) => {
                        if let Some(message) = panic {
                            self.report_late_panic(op, message);
                        }
                        match result {
                            Ok(()) => Outcome::Ok,
                            Err(message) => Outcome::Failed(op_error(op, message)),
                        }
                    }
                    (Ending::Dropped, panic) => Outcome::Failed(op_error(
                        op,
                        panic.unwrap_or_else(|| completion::DROPPED.to_string()),
                    )),
                };
                self.finish(op, outcome, cost, false, ready);
            }
            None => {
                if let Some(message) = panic {
                    self.report_late_panic(op, message);
                }
                if let (Some(sim), Some(cost)) = (&self.sim, cost) {
                    sim.cost(simulation::sink_or_none(&self.sink), op.id, cost);
                }
            }
        }
    }

    /// Finishes an asynchronous op whose handle ended away from its start function; the ops it
    /// makes ready go to their queues (or run here, under the naive and simulated policies).
    pub(crate) fn complete_async(self: &Arc<Self>, op: &OpRef, ending: Ending) {
        let outcome = match ending {
            Ending::Completed(Ok(())) => Outcome::Ok,
            Ending::Completed(Err(message)) => Outcome::Failed(op_error(op, message)),
            Ending::Dropped => Outcome::Failed(op_error(op, completion::DROPPED.to_string())),
        };
        let mut ready = Vec::new();
        self.finish(op, outcome, None, false, &mut ready);
        self.start_posts(&mut ready, CALLER_WORKER);
        self.route(&mut ready, CALLER_WORKER, None);
    }

    /// Starts here, on the thread that made them ready (one that completed an asynchronous op,
    /// a worker that finished an op, or the pushing thread for an op ready at once), the
    /// network ops in `ready` (`OpBlock::posts`: asynchronous, their start only posts a
    /// request), best first, each one only when no op queued in its group runs before it (it
    /// would be the next out of its queue, so priorities hold); the others stay in `ready`, or
    /// go to their queue. A chain of communications then goes from the thread that learns one
    /// is over straight to the next, without waking a worker to start it (two thread hand-overs
    /// an op, under MPI: from the progress thread to the worker and back; on cores shared by
    /// several ranks, a woken worker also spins on a core another rank's thread needs). Under
    /// the naive and simulated policies every ready op runs here anyway (`route`).
    ///
    /// Recorded as run by the group's first worker under the per-device policy (its `net` lane,
    /// where views draw the network's ops), and by `worker` (the caller's) under the threaded one.
    fn start_posts(self: &Arc<Self>, ready: &mut Vec<OpRef>, worker: u32) {
        if !matches!(self.policy, Policy::Threaded | Policy::PerDevice) {
            return;
        }
        loop {
            let mut best: Option<usize> = None;
            for (index, op) in ready.iter().enumerate() {
                if op.posts && best.is_none_or(|best| runs_before(op, &ready[best])) {
                    best = Some(index);
                }
            }
            let Some(best) = best else { return };
            let op = ready.swap_remove(best);
            let group = self.group_for(op.device);
            let worker = match self.policy {
                Policy::PerDevice => group.first_worker(),
                _ => worker,
            };
            if let Some(op) = group.push_unless_first(op) {
                // Its start may finish it here (refused, or completed inline): what that makes
                // ready joins `ready`.
                self.execute(op, worker, ready);
            }
        }
    }

    /// An async op's start function panicked after its handle was completed or handed on: the
    /// op's outcome is the handle's, and the panic is reported as a failure of its own.
    fn report_late_panic(&self, op: &OpBlock, message: String) {
        lock(&self.failures).add(&op_error(op, message));
    }

    /// Runs `body` as `op`'s execution, with its device clock current when observed.
    fn clocked<T>(&self, op: &OpBlock, body: impl FnOnce() -> T) -> T {
        match &self.sink {
            Some(sink) if self.sim.is_none() => {
                observed_run(op.id, op.device, sink, self.clock, body)
            }
            _ => body(),
        }
    }

    /// Why an op that was not cancelled (see [`Self::execute`]) must not run: it reads a variable
    /// that holds an error.
    fn refusal(&self, op: &OpBlock) -> Option<Outcome> {
        first_read_error(op).map(Outcome::Skipped)
    }

    /// Whether op `id` was pushed before a [`Self::cancel_pending`]: it must not start.
    fn is_cancelled(&self, id: OpId) -> bool {
        id.0 < self.cancel_below.load(Ordering::Acquire)
    }

    fn run_user_op(&self, op: &OpBlock, exec: impl FnOnce() -> Result<(), String>) -> Outcome {
        if let Some(outcome) = self.refusal(op) {
            return outcome;
        }
        self.clocked(op, || run_caught(op.id, &op.label, op.line, exec))
    }

    /// Ends the op's accesses, in the order they were taken, and counts down the ops they unblock;
    /// observed, the grants are sent at `time_ns`, the op's end. Its written variables take its
    /// `outcome`: a new version, holding its error or none; but a cancelled op wrote nothing, so
    /// they keep their version and error (their values, which the engine does not see, stay as
    /// the last completed write left them).
    fn release(&self, op: &OpRef, outcome: &Outcome, time_ns: Option<u64>, ready: &mut Vec<OpRef>) {
        let wrote = !matches!(outcome, Outcome::Cancelled(_));
        let error = outcome.error();
        // This thread's room for the ops each variable grants: empty between releases, and
        // taken, not borrowed, so that a release on this thread meanwhile makes its own.
        let mut granted = GRANTED.with(|room| room.take());
        for var in &op.accesses.reads {
            lock(&var.0.state).queue.complete_read(op, &mut granted);
            self.grant_all(var, &mut granted, time_ns, ready);
        }
        for var in &op.accesses.writes {
            {
                let mut state = lock(&var.0.state);
                if wrote {
                    state.version += 1;
                    state.cancelled_mark = 0;
                } else {
                    state.cancelled_mark = self.cancel_below.load(Ordering::Acquire);
                }
                if wrote && (state.error.is_some() || error.is_some()) {
                    state.error = error.cloned();
                    var.0.has_error.store(error.is_some(), Ordering::Release);
                }
                state.queue.complete_write(&mut granted);
            }
            self.grant_all(var, &mut granted, time_ns, ready);
        }
        GRANTED.with(|room| room.set(granted));
    }

    /// Grants `var` to the ops in `granted`, collecting those it makes ready; observed (`time_ns`,
    /// the releasing op's end), each grant is sent at that time.
    fn grant_all(
        &self,
        var: &Var,
        granted: &mut Vec<OpRef>,
        time_ns: Option<u64>,
        ready: &mut Vec<OpRef>,
    ) {
        if granted.is_empty() {
            return;
        }
        let sink = self.real_sink().zip(time_ns);
        for next in granted.drain(..) {
            let Some((sink, time_ns)) = sink else {
                if next.grant_one() {
                    next.set_state(OpState::Ready);
                    ready.push(next);
                }
                continue;
            };
            // The op's last wait: nothing else counts it down (counts only go down), so this
            // grant makes it ready, and no other event of it can come between the two.
            if next.wait_count.load(Ordering::Acquire) == 1 {
                sink.granted_ready(time_ns, next.id, var.id());
                let made_ready = next.grant_one();
                debug_assert!(made_ready, "the last wait was counted down elsewhere");
                next.set_state(OpState::Ready);
                ready.push(next);
                continue;
            }
            // Sent before the count goes down: once it does, another thread may make the op
            // ready and start it, and its grant must come first.
            sink.granted(time_ns, next.id, var.id());
            if next.grant_one() {
                ready.push(self.make_ready(next));
            }
        }
    }

    /// The worker group that runs ops placed on `device`, started on first use.
    fn group_for(self: &Arc<Self>, device: Device) -> &Arc<Group> {
        let slot = match self.policy {
            Policy::PerDevice => device.slot(),
            Policy::Naive | Policy::Threaded | Policy::Sim => 0,
        };
        self.groups[slot].get_or_init(|| self.start_group(device))
    }

    fn start_group(self: &Arc<Self>, device: Device) -> Arc<Group> {
        let (n_workers, prefix) = match (self.policy, device) {
            (Policy::PerDevice, Device::Gpu(index)) => (self.gpu_streams, format!("gpu{index}:s")),
            (Policy::PerDevice, Device::Copy | Device::Link(..)) => (1, "copy:".to_string()),
            (Policy::PerDevice, Device::Net) => (1, "net:".to_string()),
            _ => (self.threads, "cpu:".to_string()),
        };
        let mut names = lock(&self.worker_names);
        let first_worker = names.len() as u32;
        let group = Arc::new(Group::new(first_worker, n_workers));
        for index in 0..n_workers {
            names.push(format!("{prefix}{index}"));
            let shared = self.clone();
            let group = group.clone();
            let worker = first_worker + index as u32;
            let thread = Builder::new()
                .name(format!("dep-{prefix}{index}"))
                .spawn(move || {
                    CURRENT_LANE.with(|lane| lane.set(index));
                    shared.worker_loop(&group, worker)
                })
                .expect("the OS refused to start an engine worker thread");
            lock(&self.threads_started).push(thread);
        }
        group
    }

    fn worker_loop(self: &Arc<Self>, group: &Arc<Group>, worker: u32) {
        let mut ready = Vec::new();
        let mut next = None;
        let engine = self.address();
        UNCOUNTED.with(|uncounted| uncounted.set(Some(Uncounted { engine, n: 0 })));
        loop {
            let op = match next.take() {
                Some(op) => op,
                None => {
                    self.count_uncounted();
                    match group.pop_blocking() {
                        Some(op) => op,
                        None => return,
                    }
                }
            };
            self.execute(op, worker, &mut ready);
            self.start_posts(&mut ready, worker);
            next = self.route(&mut ready, worker, Some(group));
        }
    }

    fn cancel_pending(&self) {
        let next = self.next_op.load(Ordering::SeqCst);
        let before = self.cancel_below.fetch_max(next, Ordering::SeqCst);
        // Observed, each op this cancel stops is said so now, so that a trace's replay shows it
        // cancelled from here on, as a live view does, rather than waiting until its turn.
        // An earlier cancel said so of the ops below `before`.
        if next > before && self.sink.is_some() {
            for op in self.users_ops_not_started_in(before..next) {
                self.emit_structural(|| EventKind::Cancelled { op });
            }
        }
    }

    /// The users' ops numbered in `numbers` that have not started, in number order, as their
    /// variables' queues hold them: what a cancel stops. A variable whose queue is locked now is
    /// passed over rather than waited for (a naive op running at once under its variables'
    /// locks, which nothing waits behind).
    fn users_ops_not_started_in(&self, numbers: std::ops::Range<u64>) -> Vec<OpId> {
        let live: Vec<Arc<VarInner>> = lock(&self.vars)
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        let mut found = std::collections::BTreeSet::new();
        for var in &live {
            let Ok(state) = var.state.try_lock() else {
                continue;
            };
            for access in state.queue.entries() {
                let op = &access.op;
                if numbers.contains(&op.id.0)
                    && matches!(op.state(), OpState::Waiting | OpState::Ready)
                    && lock(&op.work).as_ref().is_some_and(Work::is_users)
                {
                    found.insert(op.id);
                }
            }
        }
        found.into_iter().collect()
    }

    fn wait_all_or(&self, give_up: &dyn Fn() -> bool) -> bool {
        let mut idle = lock(&self.idle_lock);
        self.n_idle_waiters.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst); // pairs with `finish`'s, as in `wait_all`
        let mut finished = true;
        while self.n_unfinished.load(Ordering::SeqCst) > 0 {
            if give_up() {
                finished = false;
                break;
            }
            idle = wait_timeout(&self.idle_condvar, idle, crate::op::GIVE_UP_SLICE);
        }
        self.n_idle_waiters.fetch_sub(1, Ordering::SeqCst);
        finished
    }

    fn wait_all(&self) {
        let mut idle = lock(&self.idle_lock);
        self.n_idle_waiters.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        while self.n_unfinished.load(Ordering::SeqCst) > 0 {
            idle = wait(&self.idle_condvar, idle);
        }
        self.n_idle_waiters.fetch_sub(1, Ordering::SeqCst);
    }

    fn snapshot(&self) -> Snapshot {
        self.snapshots_taken.store(true, Ordering::Relaxed);
        let time_ns = self.now_ns();
        let live: Vec<Arc<VarInner>> = {
            let mut vars = lock(&self.vars);
            vars.retain(|_, weak| weak.strong_count() > 0);
            vars.values().filter_map(Weak::upgrade).collect()
        };
        // Each queue is read under its own variable's lock, one after the other, and the ops'
        // states after every queue: by then an op may have gone further than a queue read
        // earlier says. The queues are brought up to the moment the states were read, so that
        // a snapshot never contradicts itself: a finished op's accesses are left out, an access
        // of an op that is ready or running is granted, and only a waiting op waits behind
        // anything.
        // Every op met in a queue, by id: its index in `refs`, where the op is held.
        let mut index: BTreeMap<OpId, usize> = BTreeMap::new();
        let mut refs: Vec<OpRef> = Vec::new();
        // Each variable's queue: (its op's index, whether it writes, whether it is granted).
        let mut queues: Vec<Vec<(usize, bool, bool)>> = Vec::with_capacity(live.len());
        let mut vars = Vec::with_capacity(live.len());
        for var in &live {
            let state = lock(&var.state);
            let mut queue = Vec::new();
            for access in state.queue.entries() {
                let op = *index.entry(access.op.id).or_insert_with(|| {
                    refs.push(access.op.clone());
                    refs.len() - 1
                });
                queue.push((op, access.write, access.granted));
            }
            queues.push(queue);
            vars.push(VarSnapshot {
                id: var.id,
                name: var.name.clone(),
                version: state.version,
                error: state.error.clone(),
                queue: Vec::new(),
            });
        }
        // Each op's state (read once), and as the snapshot shows it.
        let states: Vec<(OpState, OpState)> = refs
            .iter()
            .map(|op| {
                let state = op.state();
                (state, self.shown_state(op, state))
            })
            .collect();
        let mut waits: Vec<Vec<Blocker>> = vec![Vec::new(); refs.len()];
        for (var, queue) in vars.iter_mut().zip(queues) {
            let (indices, queue): (Vec<usize>, Vec<AccessSnapshot>) = queue
                .into_iter()
                .filter(|(op, _, _)| !states[*op].0.is_finished())
                .map(|(op, write, granted)| {
                    let active = matches!(states[op].0, OpState::Ready | OpState::Running);
                    let access = AccessSnapshot {
                        op: refs[op].id,
                        write,
                        granted: granted || active,
                    };
                    (op, access)
                })
                .unzip();
            for (at, blocker) in queue_blockers(var.id, &queue) {
                let op = indices[at];
                if states[op].1 == OpState::Waiting {
                    waits[op].push(blocker);
                }
            }
            var.queue = queue;
        }
        let ops = index
            .into_values()
            .map(|at| {
                let op = &refs[at];
                OpSnapshot {
                    id: op.id,
                    label: op.label.clone(),
                    line: op.line,
                    state: states[at].1,
                    device: op.device,
                    priority: op.priority,
                    worker: op.worker(),
                    reads: op.accesses.reads.iter().map(Var::id).collect(),
                    writes: op.accesses.writes.iter().map(Var::id).collect(),
                    waits_on: std::mem::take(&mut waits[at]),
                }
            })
            .collect();
        Snapshot { time_ns, vars, ops }
    }

    /// An op's state as a snapshot shows it: an op cancelled before it started stays in its
    /// queues until its turn comes (then it finishes at once, having run nothing), and is shown
    /// cancelled from the cancel on.
    fn shown_state(&self, op: &OpRef, state: OpState) -> OpState {
        if matches!(state, OpState::Waiting | OpState::Ready)
            && self.is_cancelled(op.id)
            && lock(&op.work).as_ref().is_some_and(Work::is_users)
        {
            OpState::Cancelled
        } else {
            state
        }
    }
}

/// What each access of `queue` (of variable `var`) not yet granted waits behind, by the
/// access's place in the queue: a write behind the access just ahead of it, a read behind the
/// last write ahead of it.
fn queue_blockers(var: VarId, queue: &[AccessSnapshot]) -> Vec<(usize, Blocker)> {
    let mut found = Vec::new();
    let mut previous: Option<(OpId, bool)> = None;
    let mut last_write: Option<OpId> = None;
    for (at, access) in queue.iter().enumerate() {
        if !access.granted {
            let behind = if access.write {
                previous
            } else {
                last_write.map(|op| (op, true))
            };
            if let Some((behind, behind_writes)) = behind {
                found.push((
                    at,
                    Blocker {
                        var,
                        behind,
                        behind_writes,
                    },
                ));
            }
        }
        if access.write {
            last_write = Some(access.op);
        }
        previous = Some((access.op, access.write));
    }
    found
}

/// Runs `body` as the observed execution of op `id`, placed on `device`: with its device clock
/// current, unless it runs on the CPU, which has no device work to time (see `device_time.rs`).
#[inline]
fn observed_run<T>(
    id: OpId,
    device: Device,
    sink: &Arc<dyn EventSink>,
    clock: Clock,
    body: impl FnOnce() -> T,
) -> T {
    match device {
        Device::Cpu => DeviceClock::run_unclocked(body),
        _ => DeviceClock::run_as(id, sink, clock, body),
    }
}

/// The first error held by a variable the op reads, also one it writes too (granted accesses:
/// no other write can change it now).
fn first_read_error(op: &OpBlock) -> Option<Arc<OpError>> {
    let read_writes = &op.accesses.writes[..op.accesses.n_read_writes];
    // Plain loops (not a chain of the two): this runs before every op, and nearly always finds
    // nothing.
    let error_of = |var: &Var| {
        if var.0.has_error.load(Ordering::Acquire) {
            lock(&var.0.state).error.clone()
        } else {
            None
        }
    };
    for var in &op.accesses.reads {
        if let Some(error) = error_of(var) {
            return Some(error);
        }
    }
    read_writes.iter().find_map(error_of)
}

/// The error of `op` failing with `message`.
fn op_error(op: &OpBlock, message: String) -> Arc<OpError> {
    error_at(op.id, &op.label, op.line, message)
}

/// The most failures an engine keeps untaken; those past it are counted, not kept.
pub const MAX_KEPT_FAILURES: usize = 10_000;

/// The failures not taken yet.
#[derive(Default)]
struct Failures {
    /// Those of a replaced engine (`Engine::adopt_failures`), whose op numbers are not ours.
    adopted: Vec<Arc<OpError>>,
    /// This engine's, in finishing order.
    kept: Vec<Arc<OpError>>,
    n_not_kept: u64,
}

impl Failures {
    fn add(&mut self, error: &Arc<OpError>) {
        if self.kept.len() < MAX_KEPT_FAILURES {
            self.kept.push(error.clone());
        } else {
            self.n_not_kept += 1;
        }
    }

    /// Every failure kept, the adopted first, then this engine's in push order.
    fn take(&mut self) -> Vec<Arc<OpError>> {
        let mut own = std::mem::take(&mut self.kept);
        // Stable: a late panic's failure stays after its op's own.
        own.sort_by_key(|error| error.op);
        let mut failures = std::mem::take(&mut self.adopted);
        failures.extend(own);
        failures
    }
}

/// The outcome of op `op`, labelled `label`, at `line`, cancelled before it started.
fn cancelled(op: OpId, label: &Arc<str>, line: u32) -> Outcome {
    Outcome::Cancelled(Arc::new(OpError {
        op,
        label: label.clone(),
        line,
        message: "cancelled before it started".to_string(),
        cancelled: true,
    }))
}

/// Runs op `op`, labelled `label`, at `line`: its outcome, a panic caught as a failure.
#[inline(always)]
fn run_caught(
    op: OpId,
    label: &Arc<str>,
    line: u32,
    run: impl FnOnce() -> Result<(), String>,
) -> Outcome {
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(Ok(())) => Outcome::Ok,
        Ok(Err(message)) => Outcome::Failed(error_at(op, label, line, message)),
        Err(payload) => Outcome::Failed(error_at(op, label, line, panic_message(payload.as_ref()))),
    }
}

/// The error of op `op`, labelled `label`, at `line`, failing with `message`.
fn error_at(op: OpId, label: &Arc<str>, line: u32, message: String) -> Arc<OpError> {
    Arc::new(OpError {
        op,
        label: label.clone(),
        line,
        message,
        cancelled: false,
    })
}

/// What the simulator needs of a finished op.
fn sim_outcome(op: &OpBlock, outcome: &Outcome, bookkeeping: Option<Bookkeeping>) -> SimOutcome {
    let reads: Vec<VarId> = op.accesses.reads.iter().map(Var::id).collect();
    let writes: Vec<VarId> = op.accesses.writes.iter().map(Var::id).collect();
    SimOutcome {
        pushed: EventKind::Pushed {
            op: op.id,
            label: op.label.clone(),
            line: op.line,
            reads: reads.clone(),
            writes: writes.clone(),
            device: op.device,
            priority: op.priority,
        },
        device: op.device,
        priority: op.priority,
        reads,
        writes,
        state: outcome.state(),
        message: outcome.error().map(|error| error.message.clone()),
        bookkeeping,
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".to_string());
    format!("panicked: {text}")
}
