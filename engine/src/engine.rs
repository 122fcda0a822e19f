//! The engine: variables, push, completion, waiting, deletion, snapshots. This file holds the
//! engine's types and its public face; the shared state's work is split by job into
//! `engine/`: `at_once.rs` (ops run on the pushing thread), `queued.rs` (pushes into the
//! queues), `running.rs` (running ready ops, releasing their accesses), `workers.rs` (worker
//! groups, cancels, waits) and `snapshots.rs`.
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

use crate::own_lines::OwnLines;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::accesses::{AccessSet, Accesses};
use crate::batch::OpBatch;
use crate::block_pool::BlockPool;
use crate::config::{EngineConfig, Policy};
use crate::device_time::DeviceClock;
use crate::event::{Event, EventKind, EventSink};
use crate::op::{NewWork, OpBody, OpError, OpId, OpRef, OpSpec, Outcome, Signal, Work};
use crate::ready_queue::Group;
use crate::sim::{self as simulation, SimDevice, Simulator};
use crate::sim_feed::SimFeed;
use crate::snapshot::Snapshot;
use crate::sync::thread::JoinHandle;
use crate::sync::{
    engine_thread_local, lock, Arc, AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex, MutexGuard,
    OnceLock, Ordering, Weak,
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

/// A variable's writes as a host read saw them, with none pending (see [`Var::settled_writes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SettledWrites {
    version: u64,
    cancelled_mark: u64,
}

pub(crate) struct VarInner {
    id: VarId,
    name: Arc<str>,
    state: Mutex<VarState>,
    /// Mirrors `state.error.is_some()`, so that running an op checks its reads without locking.
    /// On a cache line of its own, written only when the variable's error changes: beside the
    /// queue, which the pushing thread and the workers write at every op, each check would
    /// read a line that another core holds, then fetch it again to write it.
    has_error: OwnLines<AtomicBool>,
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

    /// Its writes as far as they went, when none is queued or running: how many completed and
    /// the mark of the last one cancelled (see [`Var::cancelled_write_mark`]); `None` while one
    /// is pending. The same answer twice means no write was pushed in between (a later one is
    /// pending, completed or cancelled, and each changes the answer), so what the host read at
    /// the first is still the value at the second, with no wait: the same on every run.
    pub fn settled_writes(&self) -> Option<SettledWrites> {
        let state = lock(&self.0.state);
        (!state.queue.has_writes()).then_some(SettledWrites {
            version: state.version,
            cancelled_mark: state.cancelled_mark,
        })
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

    /// The workers (streams) the engine gives each GPU.
    pub fn gpu_streams(&self) -> usize {
        self.shared.gpu_streams
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
            has_error: OwnLines::new(AtomicBool::new(false)),
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

    /// The id the next op pushed will take (see [`Engine::next_op_id`]): a live view that
    /// begins now tells the ops pushed before it by their ids.
    pub fn next_op_id(&self) -> OpId {
        OpId(self.shared.next_op.load(Ordering::Relaxed))
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

// The shared state's work, by job (declared after `batch_states!`, which two of them use).
mod at_once;
mod queued;
mod running;
mod snapshots;
mod workers;

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

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".to_string());
    format!("panicked: {text}")
}
