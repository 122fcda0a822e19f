//! A worker group's ready queue: ops whose accesses are all granted, highest priority first and
//! in push order among equals, and the workers that sleep on it.
//!
//! MXNet's workers pop ready ops in FIFO order whatever their priority; here every ready queue
//! is a priority heap, so priorities hold on every policy.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;

use crate::block_pool::forget_kept_bodies_here;
use crate::op::OpRef;
use crate::sync::{lock, wait, AtomicUsize, Condvar, Mutex, Ordering};

/// How long an idle worker spins (in polls of the queue length) before it sleeps.
const SPIN_ROUNDS: u32 = 4096;

/// Whether idle workers spin: not under the loom model, where spinning changes no state and
/// each poll would multiply the interleavings to explore.
const SPINS: bool = !cfg!(loom);

/// One group of workers sharing a ready queue (the CPU pool, one GPU's streams, the copy worker).
pub(crate) struct Group {
    state: Mutex<GroupState>,
    condvar: Condvar,
    /// Ops in the heap; read without the lock to decide whether a finishing worker may keep
    /// a successor for itself.
    n_queued: AtomicUsize,
    /// The engine's worker index of the group's first worker (its lane in views).
    first_worker: u32,
    /// How many workers pop from it.
    n_workers: usize,
}

struct GroupState {
    heap: BinaryHeap<ReadyOp>,
    n_sleeping: usize,
    shutdown: bool,
}

/// Polls of [`Group::wait_until_asleep`] before it gives up on a worker that stays busy.
const ASLEEP_POLLS: u32 = 2000;

/// A heap entry: higher priority first, then lower op id (earlier push) first.
struct ReadyOp(OpRef);

impl PartialEq for ReadyOp {
    fn eq(&self, other: &ReadyOp) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}

impl Eq for ReadyOp {}

impl PartialOrd for ReadyOp {
    fn partial_cmp(&self, other: &ReadyOp) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for ReadyOp {
    fn cmp(&self, other: &ReadyOp) -> CmpOrdering {
        precedence(&self.0, &other.0)
    }
}

/// How `a` ranks against `b` among ready ops: greater runs first.
fn precedence(a: &OpRef, b: &OpRef) -> CmpOrdering {
    a.priority.cmp(&b.priority).then_with(|| b.id.cmp(&a.id))
}

/// Whether `candidate` should run before `current`: a higher priority, or an equal one and an
/// earlier push (the heap's order).
pub(crate) fn runs_before(candidate: &OpRef, current: &OpRef) -> bool {
    precedence(candidate, current).is_gt()
}

impl Group {
    /// A group of `n_workers` workers, numbered from `first_worker` among the engine's.
    pub(crate) fn new(first_worker: u32, n_workers: usize) -> Group {
        Group {
            state: Mutex::new(GroupState {
                heap: BinaryHeap::new(),
                n_sleeping: 0,
                shutdown: false,
            }),
            condvar: Condvar::new(),
            n_queued: AtomicUsize::new(0),
            first_worker,
            n_workers,
        }
    }

    /// The engine's worker index of the group's first worker.
    pub(crate) fn first_worker(&self) -> u32 {
        self.first_worker
    }

    /// Adds a ready op and wakes a sleeping worker if there is one.
    pub(crate) fn push(&self, op: OpRef) {
        self.queue(&mut lock(&self.state), op);
    }

    /// Adds `op` to the heap, whose lock the caller holds, and wakes a sleeping worker.
    fn queue(&self, state: &mut GroupState, op: OpRef) {
        state.heap.push(ReadyOp(op));
        self.n_queued.fetch_add(1, Ordering::Release);
        if state.n_sleeping > 0 {
            self.condvar.notify_one();
        }
    }

    /// Gives `op` back when no queued op runs before it, so that the caller starts it at once
    /// (it would be the next op out of this queue); otherwise queues it as [`Group::push`] does.
    pub(crate) fn push_unless_first(&self, op: OpRef) -> Option<OpRef> {
        let mut state = lock(&self.state);
        match state.heap.peek() {
            Some(ReadyOp(first)) if runs_before(first, &op) => {
                self.queue(&mut state, op);
                None
            }
            _ => Some(op),
        }
    }

    /// Whether no op waits in the queue (a hint: it may change at once).
    pub(crate) fn is_empty(&self) -> bool {
        self.n_queued.load(Ordering::Acquire) == 0
    }

    /// The best ready op, sleeping until there is one; `None` once shut down and drained.
    ///
    /// Before sleeping, a worker spins a little on the queue's length: waking a sleeping thread
    /// costs a system call, several times the engine's own cost of an op, and in a stream of
    /// short ops the next one usually arrives within microseconds.
    pub(crate) fn pop_blocking(&self) -> Option<OpRef> {
        let mut state = lock(&self.state);
        let mut spun = false;
        loop {
            if let Some(ReadyOp(op)) = state.heap.pop() {
                self.n_queued.fetch_sub(1, Ordering::Release);
                return Some(op);
            }
            if state.shutdown {
                return None;
            }
            if !spun && SPINS {
                spun = true;
                drop(state);
                for round in 0..SPIN_ROUNDS {
                    if self.n_queued.load(Ordering::Acquire) > 0 {
                        break;
                    }
                    if round % 64 == 63 {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
                // About to sleep: what this worker kept of statements is let go.
                if self.n_queued.load(Ordering::Acquire) == 0 {
                    forget_kept_bodies_here();
                }
                state = lock(&self.state);
                continue;
            }
            state.n_sleeping += 1;
            state = wait(&self.condvar, state);
            state.n_sleeping -= 1;
            spun = false;
        }
    }

    /// Waits, polling, until every worker of the group sleeps on the queue (each forgot the
    /// bodies its finished blocks kept, see `pop_blocking`), or gives up after about a second
    /// of a worker staying busy.
    pub(crate) fn wait_until_asleep(&self) {
        for _ in 0..ASLEEP_POLLS {
            let state = lock(&self.state);
            if state.n_sleeping >= self.n_workers || state.shutdown {
                return;
            }
            drop(state);
            std::thread::sleep(std::time::Duration::from_micros(500));
        }
    }

    /// Tells the workers to exit once the queue is empty.
    pub(crate) fn shut_down(&self) {
        lock(&self.state).shutdown = true;
        self.condvar.notify_all();
    }
}
