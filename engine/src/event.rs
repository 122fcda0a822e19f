//! Observation: the events the engine emits to an [`EventSink`] when one is attached.
//!
//! Architecture Invariant: with no sink attached, the engine takes no timestamp and builds no
//! event; the only cost is one branch per would-be event.

use crate::sync::{lock, Arc, AtomicU64, Mutex, Ordering};
use crate::{Device, OpId, OpState, VarId};

/// One thing that happened in the engine, at `time_ns` nanoseconds after the engine started
/// (monotonic).
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Nanoseconds since the engine started.
    pub time_ns: u64,
    /// What happened.
    pub kind: EventKind,
}

/// The kinds of [`Event`].
#[derive(Clone, Debug, PartialEq)]
pub enum EventKind {
    /// A variable was created.
    VarCreated {
        /// The new variable.
        var: VarId,
        /// Its name.
        name: Arc<str>,
    },
    /// A variable was deleted (its delete op finished).
    VarDeleted {
        /// The deleted variable.
        var: VarId,
    },
    /// An op was pushed; its accesses were appended to its variables' queues in this order:
    /// reads, then writes.
    Pushed {
        /// The op.
        op: OpId,
        /// Its label.
        label: Arc<str>,
        /// Its source line (0: none).
        line: u32,
        /// The variables it reads.
        reads: Vec<VarId>,
        /// The variables it writes.
        writes: Vec<VarId>,
        /// The device it runs on.
        device: Device,
        /// Its priority.
        priority: i32,
    },
    /// The op's access to `var` was granted.
    Granted {
        /// The op.
        op: OpId,
        /// The variable.
        var: VarId,
    },
    /// Every access of the op is granted: it is in a ready queue.
    Ready {
        /// The op.
        op: OpId,
    },
    /// The op started on a worker.
    Started {
        /// The op.
        op: OpId,
        /// The worker's index into [`crate::Engine::worker_names`].
        worker: u32,
    },
    /// The op finished (its accesses are released right after this event).
    Finished {
        /// The op.
        op: OpId,
        /// How it ended.
        state: OpState,
        /// The error message for failed, skipped and cancelled ops.
        message: Option<String>,
    },
    /// Work the op enqueued on a device (its GPU kernels) ran from `start_ns` to `end_ns`, on
    /// `lane` (a stream, such as `gpu0:s1`). Reported through a [`crate::DeviceClock`] once the
    /// device says so, usually after the op's `Finished`.
    DeviceSpan {
        /// The op that enqueued the work.
        op: OpId,
        /// Where it ran.
        lane: Arc<str>,
        /// When the device started it.
        start_ns: u64,
        /// When the device finished it.
        end_ns: u64,
    },
}

/// Receives the engine's events. Called from whichever thread the event happens on, so it must
/// be cheap; rendering belongs elsewhere.
pub trait EventSink: Send + Sync {
    /// Takes one event.
    fn event(&self, event: Event);
}

/// An [`EventSink`] that keeps every event in memory, in the order they arrived.
///
/// Events arrive from every worker at once, so the log is striped: each thread appends to one of
/// a few shards (an uncontended lock), stamping the event with a sequence number that
/// [`EventLog::events`] sorts by.
pub struct EventLog {
    shards: [Mutex<Vec<(u64, Event)>>; N_SHARDS],
    next_seq: AtomicU64,
}

const N_SHARDS: usize = 8;

thread_local! {
    /// This thread's shard, assigned round-robin on its first event.
    static SHARD: usize = {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % N_SHARDS
    };
}

impl Default for EventLog {
    fn default() -> EventLog {
        EventLog {
            shards: std::array::from_fn(|_| Mutex::new(Vec::new())),
            next_seq: AtomicU64::new(0),
        }
    }
}

impl EventLog {
    /// An empty log.
    pub fn new() -> EventLog {
        EventLog::default()
    }

    /// A copy of the events so far, in arrival order.
    pub fn events(&self) -> Vec<Event> {
        let mut all: Vec<(u64, Event)> = Vec::with_capacity(self.len());
        for shard in &self.shards {
            all.extend(lock(shard).iter().cloned());
        }
        all.sort_unstable_by_key(|(seq, _)| *seq);
        all.into_iter().map(|(_, event)| event).collect()
    }

    /// The number of events so far.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|shard| lock(shard).len()).sum()
    }

    /// Whether no event arrived yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every event so far.
    pub fn clear(&self) {
        for shard in &self.shards {
            lock(shard).clear();
        }
    }
}

impl EventSink for EventLog {
    fn event(&self, event: Event) {
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let shard = SHARD.with(|shard| *shard);
        lock(&self.shards[shard]).push((seq, event));
    }
}
