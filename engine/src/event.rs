//! Observation: the events the engine emits to an [`EventSink`] when one is attached.
//!
//! Architecture Invariant: with no sink attached, the engine takes no timestamp and builds no
//! event; the only cost is one branch per would-be event.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::sync::{lock, lock_short, Arc, AtomicBool, AtomicU64, Mutex, Ordering, ShortLock};
use crate::{Device, OpId, OpState, Var, VarId};
use crossbeam_utils::CachePadded;

mod reader;

use reader::{merge, push_room, Reading, Run};

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
    /// The op, which had not started, was cancelled (Ctrl-C, a notebook's interrupt): it will
    /// run nothing and write nothing, and finishes cancelled when its turn comes; until then
    /// it keeps its place in its variables' queues. Views show it cancelled from this event on.
    Cancelled {
        /// The op.
        op: OpId,
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

/// An op's push as one moment: what its [`EventKind::Pushed`] says, which of its accesses were
/// granted at once, and whether that made it ready. Sent to [`EventSink::pushed`] while the
/// op's variables are still locked, so no other event about the op comes before it.
pub struct Push<'a> {
    /// The op.
    pub op: OpId,
    /// Its label.
    pub label: &'a Arc<str>,
    /// Its source line (0: none).
    pub line: u32,
    /// The variables it reads.
    pub reads: &'a [Var],
    /// The variables it writes.
    pub writes: &'a [Var],
    /// The device it runs on.
    pub device: Device,
    /// Its priority.
    pub priority: i32,
    /// Which accesses were granted at once, by index (reads, then writes), as bits: access `i`
    /// is bit `i % 64` of word `i / 64`.
    pub granted: &'a [u64],
    /// Whether every access was granted at once: the op is ready.
    pub ready: bool,
}

impl Push<'_> {
    /// How many accesses were granted at once.
    pub fn n_granted(&self) -> u32 {
        self.granted.iter().map(|word| word.count_ones()).sum()
    }

    /// The events this push stands for: [`EventKind::Pushed`], a [`EventKind::Granted`] for
    /// each access granted at once (reads, then writes), then [`EventKind::Ready`] when ready.
    pub fn events(&self) -> impl Iterator<Item = EventKind> + '_ {
        let ids = |vars: &[Var]| vars.iter().map(Var::id).collect();
        let pushed = EventKind::Pushed {
            op: self.op,
            label: self.label.clone(),
            line: self.line,
            reads: ids(self.reads),
            writes: ids(self.writes),
            device: self.device,
            priority: self.priority,
        };
        let granted = self
            .reads
            .iter()
            .chain(self.writes)
            .enumerate()
            .filter(|(index, _)| is_set(self.granted, *index))
            .map(|(_, var)| EventKind::Granted {
                op: self.op,
                var: var.id(),
            });
        let ready = self.ready.then_some(EventKind::Ready { op: self.op });
        std::iter::once(pushed).chain(granted).chain(ready)
    }
}

/// Whether bit `index` of a bit set kept in words is set.
fn is_set(bits: &[u64], index: usize) -> bool {
    bits.get(index / 64)
        .is_some_and(|word| word >> (index % 64) & 1 == 1)
}

/// What [`EventLog::read_ops_since`] lends its reader: one event, or an op that ran the moment
/// it was pushed, whole.
pub enum Logged<'a> {
    /// One event.
    Event(&'a Event),
    /// An op run at once, on the thread that pushed it: the events it stands for, one after
    /// another with no other event between them.
    RanAtOnce(RanAtOnce<'a>),
}

impl Logged<'_> {
    /// Lends `visit` each event it stands for, in order.
    pub fn each_event(&self, mut visit: impl FnMut(&Event)) {
        match self {
            Logged::Event(event) => visit(event),
            Logged::RanAtOnce(ran) => ran.events().iter().for_each(visit),
        }
    }
}

/// An op that ran the moment it was pushed, on the thread that pushed it
/// ([`EventSink::ran_at_once`]), every access granted at its push: its push, its grants and
/// its readiness (for a reader that reads grants), its start on [`crate::CALLER_WORKER`] at the
/// push's time, then its end. A reader that folds or transcribes ops takes it in one step,
/// where decoding and handing out its events costs about as much again.
pub struct RanAtOnce<'a> {
    /// The op.
    pub op: OpId,
    /// Its push, an [`EventKind::Pushed`] of `op`.
    pub push: &'a Event,
    /// When it ended.
    pub end_ns: u64,
    /// How it ended.
    pub state: OpState,
    /// Its error message, for a failed, skipped or cancelled op.
    pub message: Option<&'a str>,
    /// Whether its reader reads grants: its events then include a grant of each access, in
    /// order (reads, then writes), and its readiness, between its push and its start.
    pub with_grants: bool,
}

impl RanAtOnce<'_> {
    /// The events it stands for, in order: its push, its grants and readiness when its reader
    /// reads grants, its start and its end.
    pub fn events(&self) -> Vec<Event> {
        let (op, time_ns) = (self.op, self.push.time_ns);
        let mut events = vec![self.push.clone()];
        if let (true, EventKind::Pushed { reads, writes, .. }) = (self.with_grants, &self.push.kind)
        {
            let granted = reads.iter().chain(writes).map(|var| Event {
                time_ns,
                kind: EventKind::Granted { op, var: *var },
            });
            events.extend(granted);
            events.push(Event {
                time_ns,
                kind: EventKind::Ready { op },
            });
        }
        events.push(Event {
            time_ns,
            kind: EventKind::Started {
                op,
                worker: crate::CALLER_WORKER,
            },
        });
        events.push(Event {
            time_ns: self.end_ns,
            kind: EventKind::Finished {
                op,
                state: self.state,
                message: self.message.map(str::to_owned),
            },
        });
        events
    }
}

/// Receives the engine's events. Called from whichever thread the event happens on, so it must
/// be cheap; rendering belongs elsewhere.
pub trait EventSink: Send + Sync {
    /// Takes one event.
    fn event(&self, event: Event);

    /// Takes an op's push, its grants and its readiness, all at `time_ns`: by default as the
    /// events [`Push::events`] lists; a sink may keep them as one record.
    fn pushed(&self, time_ns: u64, push: &Push<'_>) {
        for kind in push.events() {
            self.event(Event { time_ns, kind });
        }
    }

    /// Takes an op's push, every access granted and the op ready, and its start on the thread
    /// that pushed it ([`crate::CALLER_WORKER`]), both at `time_ns`: an op that runs the moment
    /// it is pushed. By default [`EventSink::pushed`] then [`EventSink::started`]; a sink may
    /// keep them as one record.
    fn pushed_and_started(&self, time_ns: u64, push: &Push<'_>) {
        self.pushed(time_ns, push);
        self.started(time_ns, push.op, crate::CALLER_WORKER);
    }

    /// Takes an op that ran the moment it was pushed, on the thread that pushed it, once it has
    /// ended: its push at `push_ns` (every access granted, the op ready and started at once, as
    /// [`EventSink::pushed_and_started`]), then its end at `end_ns` in `state`, with its error
    /// message. The engine calls it instead of those two only where nothing else happens to
    /// the op or its variables between them (a CPU op, under its variables' locks, with no
    /// snapshots taken), so its events may all be numbered at its end. By default
    /// [`EventSink::pushed_and_started`] then [`EventSink::finished`]; a sink may keep them as
    /// one record.
    fn ran_at_once(
        &self,
        push_ns: u64,
        push: &Push<'_>,
        end_ns: u64,
        state: OpState,
        message: Option<&str>,
    ) {
        self.pushed_and_started(push_ns, push);
        self.finished(end_ns, push.op, state, message);
    }

    /// Takes op `op`'s start on worker `worker` at `time_ns`: by default an
    /// [`EventKind::Started`]; a sink may keep it without building the event.
    fn started(&self, time_ns: u64, op: OpId, worker: u32) {
        self.event(Event {
            time_ns,
            kind: EventKind::Started { op, worker },
        });
    }

    /// Takes op `op`'s end in `state` at `time_ns`, with its error message: by default an
    /// [`EventKind::Finished`]; a sink may keep it without building the event.
    fn finished(&self, time_ns: u64, op: OpId, state: OpState, message: Option<&str>) {
        self.event(Event {
            time_ns,
            kind: EventKind::Finished {
                op,
                state,
                message: message.map(str::to_owned),
            },
        });
    }

    /// Takes the grant of `op`'s access to `var` at a release, one that did not make it ready:
    /// by default an [`EventKind::Granted`]; a sink may keep it without building the event.
    fn granted(&self, time_ns: u64, op: OpId, var: VarId) {
        self.event(Event {
            time_ns,
            kind: EventKind::Granted { op, var },
        });
    }

    /// Takes the grant of `op`'s access to `var` that made it ready, at a release: an
    /// [`EventKind::Granted`] then an [`EventKind::Ready`], both at `time_ns`, with no event
    /// between them. By default the two events; a sink may keep them as one record.
    fn granted_ready(&self, time_ns: u64, op: OpId, var: VarId) {
        self.event(Event {
            time_ns,
            kind: EventKind::Granted { op, var },
        });
        self.event(Event {
            time_ns,
            kind: EventKind::Ready { op },
        });
    }
}

/// An [`EventSink`] that keeps every event in memory, in the order they arrived.
///
/// Events arrive from every worker at once, so the log is striped: each thread appends to one of
/// a few shards (an uncontended lock), stamping the event with a sequence number that
/// [`EventLog::events`] sorts by.
///
/// Sequence numbers start at 0 and only increase, across [`EventLog::clear`] too, so a reader can
/// keep its place: [`EventLog::events_since`] hands out the events from a sequence number on,
/// a piece at a time, each exactly once. A number is taken under its shard's lock, so each shard
/// is in increasing order; but a reader locks one shard at a time, and may find an event in one
/// shard while an earlier one is appended to a shard it already read. Readers therefore only
/// get the run of consecutive numbers that are all present, never skipping such a gap.
pub struct EventLog {
    shards: [CachePadded<ShortLock<Shard>>; N_SHARDS],
    next_seq: CachePadded<AtomicU64>,
    /// The number of the first event after the last clear: the log holds no event numbered
    /// below it. Written only while every shard is locked, so read under any shard's lock.
    first_seq: CachePadded<AtomicU64>,
    /// Whether a reader streams the log (has called [`EventLog::forget_before`]).
    streamed: AtomicBool,
    /// The room [`EventLog::read_since`] copies each shard's records into, and the room it
    /// decodes a push into, kept between calls.
    reader: CachePadded<Mutex<(Vec<Run>, Event)>>,
    /// Whether the grants that come after a push (a release's) are kept: not in a log made by
    /// [`EventLog::without_later_grants`].
    keeps_later_grants: bool,
    /// The most events it holds, the oldest forgotten beyond ([`EventLog::keeping_at_most`]);
    /// 0: no limit.
    keep_at_most: u64,
    /// How many events the limit forgot since the last clear.
    n_forgotten: AtomicU64,
    /// How many times it was cleared.
    n_clears: AtomicU64,
}

const N_SHARDS: usize = 8;

/// One shard's events, in increasing sequence order, kept in chunks of fixed capacity: an append
/// never moves the events already there. (A growing `Vec` would now and then copy the whole
/// shard, tens of megabytes for a long run, inside the lock and within some op's span: that op
/// would look milliseconds long in every view.)
///
/// Events are kept compact ([`Record`], 32 bytes each) and decoded when read; their strings (a
/// label, a variable's name, a lane, a message) are kept once per shard ([`Strings`]), so a
/// loop's statement costs one string however many ops it pushes.
///
/// Chunks a streaming reader has read are kept as spares (a few) and reused, not freed and
/// allocated again: a chunk is hundreds of kilobytes, allocated under the shard's lock by the
/// thread that appends, and the ones not kept are freed after the reader lets the locks go.
#[derive(Default)]
struct Shard {
    chunks: Vec<Chunk>,
    /// Emptied chunks, reused before a new one is allocated.
    spares: Vec<Chunk>,
    strings: Strings,
}

/// The most emptied chunks a shard keeps for reuse.
const MAX_SPARES: usize = 2;

/// A run of records, and the words that the records in it point to (a push's accesses, a
/// device span's times).
struct Chunk {
    records: Vec<Record>,
    words: Vec<u64>,
    /// The events its records stand for (a push's record stands for its grants and readiness
    /// too).
    n_events: usize,
}

/// About how many events [`EventLog::read_since`] hands out at most per call: few enough
/// that a shard's lock is held for about a microsecond while they are copied out, which a
/// thread appending to it waits out spinning rather than asleep (with 4,096, an observed run's
/// interpreter slept on that lock about 3,000 times in 2,000,000 statements, with 512 about
/// 600).
const READ_BATCH: u64 = 512;

/// Events per chunk of a shard.
const CHUNK: usize = 4096;
/// The most accesses of a push laid out on the stack before it is appended (see
/// `Shard::push_op`).
const SMALL_PUSH: usize = 4;

/// The words of such a push laid out on the stack: its head, its accesses, their grants' bits
/// and its end.
const SMALL_PUSH_WORDS: usize = 3 + SMALL_PUSH + 1 + 2;

/// Words a chunk makes room for at first: enough for pushes of a few accesses each, and room
/// for the stack's copy of one more (cut after), so that a chunk's words are seldom moved.
const CHUNK_WORDS: usize = 8 * CHUNK + SMALL_PUSH_WORDS;

/// An event as the log keeps it: the same 32 bytes whatever its kind.
#[derive(Clone, Copy, Debug)]
struct Record {
    /// The sequence number, shifted left by 8 bits, and the kind (`KIND_*`) in the low 8 bits.
    seq_kind: u64,
    time_ns: u64,
    /// The op, or the variable of a creation or deletion.
    subject: u64,
    /// By kind: a string number (a variable's name), an offset into the chunk's words (a device
    /// span; a push, with how many of its accesses were granted at once in bits 32-60, whether
    /// it also ended before it was kept in bit 61, `ENDED_AT_ONCE`, whether it started at once
    /// on the pushing thread in bit 62, `STARTED_AT_ONCE`, and whether it was then ready in bit
    /// 63), a variable (a grant, with whether it made its op
    /// ready in bit 63: `GRANT_READY`), a worker, or a state and message (a finish).
    payload: u64,
}

impl Record {
    /// The sequence number of its (first) event.
    fn seq(&self) -> u64 {
        self.seq_kind >> 8
    }

    fn kind(&self) -> u8 {
        (self.seq_kind & 0xff) as u8
    }

    /// For a grant: whether it made its op ready (the record then stands for its
    /// [`EventKind::Ready`] too).
    fn grant_readies(&self) -> bool {
        self.kind() == KIND_GRANTED && self.payload & GRANT_READY != 0
    }

    /// For a push: how many accesses were granted at once, and whether it was then ready.
    fn grants(&self) -> (u64, bool) {
        if self.kind() != KIND_PUSHED {
            return (0, false);
        }
        ((self.payload >> 32) & GRANTS_MASK, self.payload >> 63 == 1)
    }

    /// For a push: whether it stands for the op's start too, at the same moment, on the pushing
    /// thread ([`crate::CALLER_WORKER`]): its last event, or the one before its end.
    fn starts_at_once(&self) -> bool {
        self.kind() == KIND_PUSHED && self.payload & STARTED_AT_ONCE != 0
    }

    /// For a push: whether it stands for the op's end too ([`EventSink::ran_at_once`]): its
    /// last event, whose time and state follow the push's words.
    fn ends_at_once(&self) -> bool {
        self.kind() == KIND_PUSHED && self.payload & ENDED_AT_ONCE != 0
    }

    /// How many events it stands for: each takes one sequence number, from [`Record::seq`] on.
    fn n_events(&self) -> u64 {
        if self.kind() == KIND_GRANTED {
            return 1 + u64::from(self.grant_readies());
        }
        let (n_granted, ready) = self.grants();
        1 + n_granted
            + u64::from(ready)
            + u64::from(self.starts_at_once())
            + u64::from(self.ends_at_once())
    }

    /// The sequence number of its last event.
    fn last_seq(&self) -> u64 {
        self.seq() + self.n_events() - 1
    }
}

/// The bits of a push record's payload that count its grants (bits 32-60).
const GRANTS_MASK: u64 = (1 << 29) - 1;

/// The bit of a push record's payload that says the op ended before the push was kept: the
/// record stands for its [`EventKind::Finished`] too, whose time and payload (a finish
/// record's) are the two words after the push's.
const ENDED_AT_ONCE: u64 = 1 << 61;

/// The bit of a push record's payload that says the op started at once, on the pushing thread:
/// the record stands for its [`EventKind::Started`] too.
const STARTED_AT_ONCE: u64 = 1 << 62;

/// The bit of a grant record's payload (above its variable) that says the grant made its op
/// ready.
const GRANT_READY: u64 = 1 << 63;

const KIND_VAR_CREATED: u8 = 0;
const KIND_VAR_DELETED: u8 = 1;
const KIND_PUSHED: u8 = 2;
const KIND_GRANTED: u8 = 3;
const KIND_READY: u8 = 4;
const KIND_STARTED: u8 = 5;
const KIND_FINISHED: u8 = 6;
const KIND_DEVICE_SPAN: u8 = 7;
const KIND_CANCELLED: u8 = 8;

/// Every op state, by its number.
const STATES: [OpState; 7] = [
    OpState::Waiting,
    OpState::Ready,
    OpState::Running,
    OpState::Done,
    OpState::Failed,
    OpState::Skipped,
    OpState::Cancelled,
];

/// A shard's strings, each kept once and named by its number. A string is found by the address
/// of the `Arc` it first came in (a statement's label, pushed again and again), else by its
/// text. An observed loop's ops may each have a label of their own (`A = ones(8) * i i=41`):
/// once there are many, those no kept record names are let go ([`Shard::compact_strings`]), so
/// that a streamed log's strings take the memory of its unread events, not of the whole run.
#[derive(Default)]
struct Strings {
    /// The strings, the log's own copies, by number.
    texts: Vec<Arc<str>>,
    by_text: HashMap<Arc<str>, u32>,
    /// The `Arc`s the strings came in, kept alive so that no other string can take an address
    /// in `by_address`.
    senders: Vec<Arc<str>>,
    /// Addresses of the `Arc`s in `senders`.
    by_address: HashMap<usize, u32, BuildHasherDefault<AddressHasher>>,
    /// Strings recently found by their address, and their numbers, in a slot chosen by the
    /// address: a loop's statements push the same few labels again and again. (Address 0,
    /// where the slots start, is no `Arc`'s.)
    recent: [(usize, u32); RECENT],
    /// How many times the strings were compacted: a reader's copies made before name other
    /// strings by the same numbers.
    generation: u64,
    /// How many strings it holds when it is next compacted (0: [`MIN_STRINGS_TO_COMPACT`]).
    compact_at: usize,
}

/// The fewest strings a shard holds before it lets those no record names go.
const MIN_STRINGS_TO_COMPACT: usize = 4096;

/// How many strings [`Strings::recent`] remembers.
const RECENT: usize = 16;

/// A hasher for addresses, looked up once per push: a multiply by a large odd constant, whose
/// high bits (those a hash table uses first) mix every bit of the address. Not for untrusted
/// keys, which addresses are not.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.write_u64(u64::from(*byte));
        }
    }

    fn write_usize(&mut self, address: usize) {
        self.write_u64(address as u64);
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Strings {
    /// Whether it holds enough strings to let the unused ones go: twice as many as it kept the
    /// last time, so that compacting costs a few steps per string.
    fn is_due(&self) -> bool {
        self.texts.len() >= self.compact_at.max(MIN_STRINGS_TO_COMPACT)
    }

    /// Keeps only the strings numbered `kept`, renumbered from 0 in that order.
    fn keep_only(&mut self, kept: &[u32]) {
        let texts: Vec<Arc<str>> = kept
            .iter()
            .map(|&number| self.texts[number as usize].clone())
            .collect();
        let senders: Vec<Arc<str>> = kept
            .iter()
            .map(|&number| self.senders[number as usize].clone())
            .collect();
        *self = Strings {
            by_text: texts
                .iter()
                .enumerate()
                .map(|(number, text)| (text.clone(), number as u32))
                .collect(),
            by_address: senders
                .iter()
                .enumerate()
                .map(|(number, sender)| (Arc::as_ptr(sender) as *const u8 as usize, number as u32))
                .collect(),
            texts,
            senders,
            recent: [(0, 0); RECENT],
            generation: self.generation + 1,
            compact_at: 2 * kept.len(),
        };
    }

    /// How an op's end is kept: its state in the low 8 bits, above them its message's number
    /// plus one, or 0 without a message.
    fn end_payload(&mut self, state: OpState, message: Option<&str>) -> u64 {
        let message = message.map_or(0, |message| u64::from(self.number_of_text(message)) + 1);
        state as u64 | message << 8
    }

    /// The number of `text`, kept if new: copied, so that nothing the log does touches the
    /// reference count of the sender's (a statement's label, which the thread that pushes ops
    /// clones for each op), and this very `Arc` kept alive beside it, so that its address names
    /// it. Readers copy the copy again (see `Shard::since_into`).
    fn number(&mut self, text: &Arc<str>) -> u32 {
        let address = Arc::as_ptr(text) as *const u8 as usize;
        let slot = (address >> 4) % RECENT;
        if self.recent[slot].0 == address {
            return self.recent[slot].1;
        }
        if let Some(number) = self.by_address.get(&address) {
            self.recent[slot] = (address, *number);
            return *number;
        }
        if let Some(number) = self.by_text.get(&**text) {
            return *number;
        }
        let number = self.texts.len() as u32;
        let copy: Arc<str> = Arc::from(&**text);
        self.texts.push(copy.clone());
        self.by_text.insert(copy, number);
        self.by_address.insert(address, number);
        self.senders.push(text.clone());
        number
    }

    /// The number of `text`, kept (copied) if new.
    fn number_of_text(&mut self, text: &str) -> u32 {
        match self.by_text.get(text) {
            Some(number) => *number,
            None => self.number(&Arc::from(text)),
        }
    }
}

/// An end's payload (its state, and above it its message's number plus one, or 0 without a
/// message: see [`Strings::end_payload`]) with its message renumbered by `renumber`.
fn end_renumbered(payload: u64, renumber: &mut impl FnMut(u64) -> u64) -> u64 {
    match payload >> 8 {
        0 => payload,
        message => payload & 0xff | (renumber(message - 1) + 1) << 8,
    }
}

/// A device as a number: the CPU 0, copy 1, GPU k 2 + k, the network `NET_CODE`, a link
/// `1 << 16 | from << 8 | to`.
fn device_code(device: Device) -> u64 {
    match device {
        Device::Cpu => 0,
        Device::Copy => 1,
        Device::Net => NET_CODE,
        Device::Gpu(index) => 2 + u64::from(index),
        Device::Link(from, to) => 1 << 16 | u64::from(from) << 8 | u64::from(to),
    }
}

/// The network's code: above every GPU's, below every link's.
const NET_CODE: u64 = (1 << 16) - 1;

fn device_of(code: u64) -> Device {
    match code {
        0 => Device::Cpu,
        1 => Device::Copy,
        NET_CODE => Device::Net,
        code if code >= 1 << 16 => Device::Link((code >> 8) as u8, code as u8),
        code => Device::Gpu((code - 2) as u16),
    }
}

impl Chunk {
    fn new() -> Chunk {
        Chunk {
            records: Vec::with_capacity(CHUNK),
            words: Vec::with_capacity(CHUNK_WORDS),
            n_events: 0,
        }
    }

    /// Empties it, keeping its room.
    fn empty(&mut self) {
        self.records.clear();
        self.words.clear();
        self.n_events = 0;
    }

    fn last_seq(&self) -> Option<u64> {
        self.records.last().map(Record::last_seq)
    }

    /// Appends `record`, which stands for `n_events` events (its [`Record::n_events`], known
    /// to the caller without decoding it again).
    #[inline]
    fn push(&mut self, record: Record, n_events: u64) {
        debug_assert_eq!(n_events, record.n_events());
        self.n_events += n_events as usize;
        self.records.push(record);
    }

    /// Appends words, returning the offset of the first.
    fn words(&mut self, words: impl IntoIterator<Item = u64>) -> u64 {
        let offset = self.words.len() as u64;
        self.words.extend(words);
        offset
    }
}

impl Shard {
    fn push(&mut self, seq: u64, event: Event) {
        self.open_chunk();
        let chunk = self.chunks.last_mut().expect("a chunk with room");
        let strings = &mut self.strings;
        let (kind, subject, payload) = match event.kind {
            EventKind::VarCreated { var, name } => {
                (KIND_VAR_CREATED, var.0, u64::from(strings.number(&name)))
            }
            EventKind::VarDeleted { var } => (KIND_VAR_DELETED, var.0, 0),
            EventKind::Pushed {
                op,
                label,
                line,
                reads,
                writes,
                device,
                priority,
            } => {
                let label = u64::from(strings.number(&label));
                let head = [
                    label << 32 | u64::from(line),
                    device_code(device) << 32 | u64::from(priority as u32),
                    (reads.len() as u64) << 32 | writes.len() as u64,
                ];
                let vars = reads.iter().chain(&writes).map(|var| var.0);
                (KIND_PUSHED, op.0, chunk.words(head.into_iter().chain(vars)))
            }
            EventKind::Granted { op, var } => (KIND_GRANTED, op.0, var.0),
            EventKind::Ready { op } => (KIND_READY, op.0, 0),
            EventKind::Cancelled { op } => (KIND_CANCELLED, op.0, 0),
            EventKind::Started { op, worker } => (KIND_STARTED, op.0, u64::from(worker)),
            EventKind::Finished { op, state, message } => (
                KIND_FINISHED,
                op.0,
                strings.end_payload(state, message.as_deref()),
            ),
            EventKind::DeviceSpan {
                op,
                lane,
                start_ns,
                end_ns,
            } => {
                let lane = u64::from(strings.number(&lane));
                (
                    KIND_DEVICE_SPAN,
                    op.0,
                    chunk.words([lane, start_ns, end_ns]),
                )
            }
        };
        chunk.push(
            Record {
                seq_kind: seq << 8 | u64::from(kind),
                time_ns: event.time_ns,
                subject,
                payload,
            },
            1,
        );
    }

    /// The chunk to append to: the last, or a new one when it is full.
    #[inline]
    fn open_chunk(&mut self) -> &mut Chunk {
        if self
            .chunks
            .last()
            .is_none_or(|chunk| chunk.records.len() == CHUNK)
        {
            let chunk = self.spares.pop().unwrap_or_else(Chunk::new);
            self.chunks.push(chunk);
        }
        self.chunks.last_mut().expect("a chunk with room")
    }

    /// Keeps a push, its grants and its readiness as one record, numbered from `seq` on (one
    /// number per event it stands for); `n_granted` is [`Push::n_granted`], `started`
    /// [`STARTED_AT_ONCE`] when it stands for the op's start too, else 0; `end`, the time and
    /// the state and message of its end when it stands for that too.
    fn push_op(
        &mut self,
        seq: u64,
        time_ns: u64,
        push: &Push<'_>,
        n_granted: u32,
        started: u64,
        end: Option<[u64; 2]>,
    ) {
        let label = u64::from(self.strings.number(push.label));
        let chunk = self.open_chunk();
        let n_accesses = push.reads.len() + push.writes.len();
        let head = [
            label << 32 | u64::from(push.line),
            device_code(push.device) << 32 | u64::from(push.priority as u32),
            (push.reads.len() as u64) << 32 | push.writes.len() as u64,
        ];
        let n_events = 1
            + u64::from(n_granted)
            + u64::from(push.ready)
            + u64::from(started != 0)
            + u64::from(end.is_some());
        let offset = chunk.words.len() as u64;
        let n_bits = if n_granted > 0 {
            n_accesses.div_ceil(64)
        } else {
            0
        };
        if n_accesses <= SMALL_PUSH && n_bits <= 1 {
            // A push of a few accesses (nearly all) is laid out on the stack and appended at
            // once: one check for room, and a copy of a length known when compiled (a copy of
            // a length known only now is a call to `memmove`), then cut to its length.
            let mut words = [0; SMALL_PUSH_WORDS];
            words[..3].copy_from_slice(&head);
            for (word, var) in words[3..]
                .iter_mut()
                .zip(push.reads.iter().chain(push.writes))
            {
                *word = var.id().0;
            }
            let mut len = 3 + n_accesses;
            if n_bits == 1 {
                words[len] = push.granted[0];
                len += 1;
            }
            if let Some(end) = end {
                words[len..len + 2].copy_from_slice(&end);
                len += 2;
            }
            chunk.words.extend_from_slice(&words);
            chunk.words.truncate(offset as usize + len);
        } else {
            // Each part appended from a slice or a mapped slice, whose length is known, so that
            // the room is made once per part (a chained iterator is appended an element at a
            // time).
            chunk.words.extend_from_slice(&head);
            for vars in [push.reads, push.writes] {
                chunk.words.extend(vars.iter().map(|var| var.id().0));
            }
            // The bits of the grants, only when there are grants to read back.
            if n_bits > 0 {
                let given = &push.granted[..n_bits.min(push.granted.len())];
                chunk.words.extend_from_slice(given);
                chunk
                    .words
                    .resize(offset as usize + 3 + n_accesses + n_bits, 0);
            }
            chunk.words.extend(end.into_iter().flatten());
        }
        chunk.push(
            Record {
                seq_kind: seq << 8 | u64::from(KIND_PUSHED),
                time_ns,
                subject: push.op.0,
                payload: offset
                    | u64::from(n_granted) << 32
                    | if end.is_some() { ENDED_AT_ONCE } else { 0 }
                    | started
                    | u64::from(push.ready) << 63,
            },
            n_events,
        );
    }

    /// The number of events it holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.chunks.iter().map(|chunk| chunk.n_events).sum()
    }

    /// The events numbered `from` and on, decoded, in order.
    #[cfg(test)]
    fn since(&self, from: u64) -> Vec<(u64, Event)> {
        let mut run = Run::default();
        self.since_into(from, u64::MAX, &mut run);
        let mut events = Vec::new();
        merge(
            &[run],
            None,
            Reading::EVERY,
            &mut push_room(),
            |seq, logged| {
                logged.each_event(|event| events.push((seq, event.clone())));
            },
        );
        events
    }

    fn clear(&mut self) {
        self.chunks.clear();
    }

    /// Lets go of the strings that no record it holds names, renumbering the others in the
    /// records (a variable's name, a push's label, an end's message, a device span's lane).
    fn compact_strings(&mut self) {
        let mut new_number = vec![u32::MAX; self.strings.texts.len()];
        let mut kept: Vec<u32> = Vec::new();
        let mut renumber = |number: u64| -> u64 {
            let new = &mut new_number[number as usize];
            if *new == u32::MAX {
                *new = kept.len() as u32;
                kept.push(number as u32);
            }
            u64::from(*new)
        };
        for Chunk { records, words, .. } in &mut self.chunks {
            for record in records.iter_mut() {
                match record.kind() {
                    KIND_VAR_CREATED => record.payload = renumber(record.payload),
                    KIND_FINISHED => record.payload = end_renumbered(record.payload, &mut renumber),
                    KIND_PUSHED => {
                        let offset = (record.payload & 0xffff_ffff) as usize;
                        let head = words[offset];
                        words[offset] = renumber(head >> 32) << 32 | head & 0xffff_ffff;
                        if record.ends_at_once() {
                            // The end's payload is the push's last word.
                            let last = offset + record.n_words(words) as usize - 1;
                            words[last] = end_renumbered(words[last], &mut renumber);
                        }
                    }
                    KIND_DEVICE_SPAN => {
                        let offset = record.payload as usize;
                        words[offset] = renumber(words[offset]);
                    }
                    _ => {}
                }
            }
        }
        self.strings.keep_only(&kept);
    }

    /// Takes out the chunks that hold only events numbered below `seq`, but never the last
    /// one, which is still being appended to: a few are emptied and kept as spares, the others
    /// put in `freed`, for the caller to drop once it has let the shard's lock go. Then lets go
    /// of the strings only those named, when there are many.
    fn forget_before(&mut self, seq: u64, freed: &mut Vec<Chunk>) {
        let n_old = self
            .chunks
            .partition_point(|chunk| chunk.last_seq().is_some_and(|last| last < seq));
        let n_old = n_old.min(self.chunks.len().saturating_sub(1));
        for mut chunk in self.chunks.drain(..n_old) {
            if self.spares.len() < MAX_SPARES {
                chunk.empty();
                self.spares.push(chunk);
            } else {
                freed.push(chunk);
            }
        }
        if self.strings.is_due() {
            self.compact_strings();
        }
    }
}

thread_local! {
    /// This thread's shard, assigned round-robin on its first event (`N_SHARDS` until then):
    /// a plain cell, which costs no check of a lazy initializer on every event.
    static SHARD: Cell<usize> = const { Cell::new(N_SHARDS) };
}

/// This thread's shard (see [`SHARD`]).
#[inline]
fn this_shard() -> usize {
    SHARD.with(|shard| match shard.get() {
        N_SHARDS => {
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let assigned = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % N_SHARDS;
            shard.set(assigned);
            assigned
        }
        assigned => assigned,
    })
}

/// A reader's own room to decode the log's events into ([`EventLog::read_since_in`]).
pub struct ReadRoom((Vec<Run>, Event));

impl Default for ReadRoom {
    fn default() -> ReadRoom {
        ReadRoom((Vec::new(), push_room()))
    }
}

impl Default for EventLog {
    fn default() -> EventLog {
        EventLog {
            shards: std::array::from_fn(|_| CachePadded::new(ShortLock::new(Shard::default()))),
            next_seq: CachePadded::new(AtomicU64::new(0)),
            first_seq: CachePadded::new(AtomicU64::new(0)),
            streamed: AtomicBool::new(false),
            reader: CachePadded::new(Mutex::new((Vec::new(), push_room()))),
            keeps_later_grants: true,
            keep_at_most: 0,
            n_forgotten: AtomicU64::new(0),
            n_clears: AtomicU64::new(0),
        }
    }
}

impl EventLog {
    /// An empty log.
    pub fn new() -> EventLog {
        EventLog::default()
    }

    /// An empty log that drops the grants that come after an op's push, and the readiness they
    /// bring ([`EventSink::granted`], [`EventSink::granted_ready`]): for a run whose views never
    /// read them (its summary, folded from pushes, starts, ends and device spans, and Perfetto
    /// traces, which hold slices and arrows), two of a dependent op's five records. The other
    /// views (a JSON trace, which `dep replay` steps through, a timeline, a replay, a live
    /// panel) show when each access was granted: give them [`EventLog::new`].
    pub fn without_later_grants() -> EventLog {
        EventLog {
            keeps_later_grants: false,
            ..EventLog::default()
        }
    }

    /// This log, holding at most about `n_events` events: once it holds more, it forgets the
    /// oldest half of them (then [`EventLog::n_forgotten`] says how many it forgot). For a
    /// session whose log no reader streams (a REPL's, a notebook's), so that a long loop runs
    /// in bounded memory; its views then show the last events only. 0: no limit.
    pub fn keeping_at_most(self, n_events: u64) -> EventLog {
        EventLog {
            keep_at_most: n_events,
            ..self
        }
    }

    /// How many events the limit of [`EventLog::keeping_at_most`] forgot since the last clear.
    pub fn n_forgotten(&self) -> u64 {
        self.n_forgotten.load(Ordering::Relaxed)
    }

    /// How many times [`EventLog::clear`] ran: a reader that started before a clear starts
    /// over (a limit's forgetting is no clear: what a reader read stays read).
    pub fn n_clears(&self) -> u64 {
        self.n_clears.load(Ordering::Relaxed)
    }

    /// Under a limit ([`EventLog::keeping_at_most`]), forgets the oldest half of the events
    /// once they are more than it; `next` is the number after the last event appended. Called
    /// after each push, outside the shard's lock.
    #[inline]
    fn keep_within_limit(&self, next: u64) {
        if self.keep_at_most != 0
            && next.saturating_sub(self.first_seq.load(Ordering::Relaxed)) > self.keep_at_most
        {
            self.forget_oldest(next.saturating_sub(self.keep_at_most / 2));
        }
    }

    /// Forgets the events numbered below `seq` (see [`EventLog::keep_within_limit`]).
    #[cold]
    fn forget_oldest(&self, seq: u64) {
        let mut shards: Vec<_> = self.shards.iter().map(|shard| lock_short(shard)).collect();
        let first = self.first_seq.load(Ordering::Relaxed);
        if seq <= first {
            return; // another pusher forgot them first
        }
        self.first_seq.store(seq, Ordering::Relaxed);
        self.n_forgotten.fetch_add(seq - first, Ordering::Relaxed);
        let mut freed = Vec::new();
        for shard in &mut shards {
            shard.forget_before(seq, &mut freed);
        }
        drop(shards);
        drop(freed);
    }

    /// A copy of the events so far, in arrival order.
    pub fn events(&self) -> Vec<Event> {
        let mut first = 0;
        let runs: Vec<Run> = self
            .shards
            .iter()
            .enumerate()
            .map(|(index, shard)| {
                let shard = lock_short(shard);
                if index == 0 {
                    // Read under a shard's lock, which a clear or a limit holds to write it.
                    first = self.first_seq.load(Ordering::Relaxed);
                }
                let mut run = Run::default();
                shard.since_into(first, u64::MAX, &mut run);
                run
            })
            .collect();
        let mut events = Vec::with_capacity(self.len());
        merge(
            &runs,
            None,
            Reading::EVERY,
            &mut push_room(),
            |_, logged| {
                logged.each_event(|event| events.push(event.clone()));
            },
        );
        events
    }

    /// The events numbered `seq` and on, in arrival order, and the number to ask for next time.
    ///
    /// Start with 0 (or [`EventLog::first_seq`]) and pass back the number each call returns:
    /// every event then comes out exactly once, in order. A call returns the events up to the
    /// first number it did not find (an event appended to a shard after this call had read that
    /// shard) and that number, so a later call picks the event up. A `seq` from
    /// before the last [`EventLog::clear`] reads on from the first event after it: a clear
    /// forgets what a reader had not read yet. Only the events asked for are copied: each shard
    /// is searched, not scanned.
    pub fn events_since(&self, seq: u64) -> (Vec<Event>, u64) {
        let mut events = Vec::new();
        let next = self.read_up_to(seq, u64::MAX, Reading::EVERY, |logged| {
            logged.each_event(|event| events.push(event.clone()));
        });
        (events, next)
    }

    /// [`EventLog::events_since`] without the vector, a batch at a time: lends each event, in
    /// order, to `visit`, about 512 of them at most (call again while it hands out
    /// events); returns the number to ask for next time. The events are decoded into room kept
    /// from one call to the next, so a reader that streams the log allocates nothing per event
    /// and holds no more than a batch of them decoded.
    pub fn read_since(&self, seq: u64, mut visit: impl FnMut(&Event)) -> u64 {
        self.read_up_to(seq, READ_BATCH, Reading::EVERY, |logged| {
            logged.each_event(&mut visit);
        })
    }

    /// [`EventLog::read_since`] for a reader that has no use for grants
    /// ([`EventKind::Granted`]): they are passed over (and counted in the number returned)
    /// without being decoded, and so is the readiness ([`EventKind::Ready`]) of an op that
    /// started at once on the thread that pushed it, which its start, the next event, makes
    /// moot. A summary, or a trace without the event log in it, reads a third to a half fewer
    /// events per op.
    pub fn read_since_without_grants(&self, seq: u64, mut visit: impl FnMut(&Event)) -> u64 {
        let reading = Reading {
            grants: false,
            whole_ops: false,
        };
        self.read_up_to(seq, READ_BATCH, reading, |logged| {
            logged.each_event(&mut visit);
        })
    }

    /// [`EventLog::read_since`] (with `grants`) or [`EventLog::read_since_without_grants`] for
    /// a reader that takes ops whole: an op that ran the moment it was pushed, on the thread
    /// that pushed it (nearly every op of a loop of small statements), comes whole
    /// ([`Logged::RanAtOnce`]), decoded once, where its push, start and end (and its grants and
    /// readiness) would each be decoded and handed out; every other event comes alone.
    pub fn read_ops_since(&self, seq: u64, grants: bool, visit: impl FnMut(Logged<'_>)) -> u64 {
        let reading = Reading {
            grants,
            whole_ops: true,
        };
        self.read_up_to(seq, READ_BATCH, reading, visit)
    }

    /// [`EventLog::read_since`] for a reader that reads beside another one (a trace's event
    /// log transcribed on a thread of its own, beside the thread that folds the run): it
    /// decodes into `room`, its own, where two readers of the kept room would take turns
    /// making and dropping each other's.
    pub fn read_since_in(
        &self,
        room: &mut ReadRoom,
        seq: u64,
        mut visit: impl FnMut(&Event),
    ) -> u64 {
        self.read_up_to_in(&mut room.0, seq, READ_BATCH, Reading::EVERY, |logged| {
            logged.each_event(&mut visit);
        })
    }

    /// [`EventLog::read_since_in`] for a reader that takes ops whole, every grant included (see
    /// [`EventLog::read_ops_since`]).
    pub fn read_ops_since_in(
        &self,
        room: &mut ReadRoom,
        seq: u64,
        visit: impl FnMut(Logged<'_>),
    ) -> u64 {
        let reading = Reading {
            grants: true,
            whole_ops: true,
        };
        self.read_up_to_in(&mut room.0, seq, READ_BATCH, reading, visit)
    }

    /// [`EventLog::read_since`], from no record numbered `limit` or more after the first, read
    /// as `reading` says.
    fn read_up_to(
        &self,
        seq: u64,
        limit: u64,
        reading: Reading,
        visit: impl FnMut(Logged<'_>),
    ) -> u64 {
        // Another reader at the same time finds no room kept, and makes its own.
        let mut room = std::mem::replace(&mut *lock(&self.reader), (Vec::new(), push_room()));
        let next = self.read_up_to_in(&mut room, seq, limit, reading, visit);
        *lock(&self.reader) = room;
        next
    }

    /// [`EventLog::read_up_to`] in `room`.
    fn read_up_to_in(
        &self,
        (runs, pushed): &mut (Vec<Run>, Event),
        seq: u64,
        limit: u64,
        reading: Reading,
        visit: impl FnMut(Logged<'_>),
    ) -> u64 {
        runs.resize_with(N_SHARDS, Run::default);
        let (mut from, mut until) = (seq, u64::MAX);
        for (index, (shard, run)) in self.shards.iter().zip(runs.iter_mut()).enumerate() {
            let shard = lock_short(shard);
            if index == 0 {
                // Read under a shard's lock, which a clear holds while it writes `first_seq`.
                from = from.max(self.first_seq.load(Ordering::Relaxed));
                until = from.saturating_add(limit);
            }
            shard.since_into(from, until, run);
        }
        // Up to the first gap: a number appended to a shard after this read it (or, when a clear
        // ran during this read, forgotten). What follows it waits for the next call.
        let mut visit = visit;
        let n = merge(runs, Some(from), reading, pushed, |_, logged| visit(logged));
        from + n as u64
    }

    /// The number the next event will get: every event numbered below it is in the log, or was
    /// forgotten by a clear. A reader that has caught up with it has read every event that
    /// arrived before this call.
    pub fn next_seq(&self) -> u64 {
        self.next_seq.load(Ordering::Relaxed)
    }

    /// The number of the first event after the last [`EventLog::clear`] (0 before any): the
    /// first number [`EventLog::events_since`] can return events from.
    pub fn first_seq(&self) -> u64 {
        let _shard = lock_short(&self.shards[0]);
        self.first_seq.load(Ordering::Relaxed)
    }

    /// The number of events the log holds: those since the last clear, less those its limit
    /// forgot. (A limit drops whole chunks, so a shard may still store a few forgotten events
    /// beside the kept ones; they are not counted, as no reader sees them.)
    pub fn len(&self) -> usize {
        // Every shard locked, as a clear does: no number is being taken, so every event
        // numbered below `next_seq` is in a shard or forgotten.
        let _shards: Vec<_> = self.shards.iter().map(|shard| lock_short(shard)).collect();
        let held = self.next_seq.load(Ordering::Relaxed) - self.first_seq.load(Ordering::Relaxed);
        usize::try_from(held).unwrap_or(usize::MAX)
    }

    /// The number of events the shards store, forgotten ones in chunks not dropped yet
    /// included: what the log's memory grows with.
    #[cfg(test)]
    fn n_stored(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| lock_short(shard).len())
            .sum()
    }

    /// Whether no event arrived yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every event so far. Numbers keep increasing, and [`EventLog::events_since`] reads
    /// on from the first event after the clear.
    pub fn clear(&self) {
        let mut shards: Vec<_> = self.shards.iter().map(|shard| lock_short(shard)).collect();
        // Every shard is locked, so no number is being taken: the events numbered below
        // `next_seq` are all in the shards, and the later ones come after this returns.
        self.first_seq
            .store(self.next_seq.load(Ordering::Relaxed), Ordering::Relaxed);
        self.n_forgotten.store(0, Ordering::Relaxed);
        self.n_clears.fetch_add(1, Ordering::Relaxed);
        for shard in &mut shards {
            shard.clear();
        }
    }
}

impl EventLog {
    /// How many events a log that a reader streams (see [`EventLog::forget_before`]) holds
    /// that the reader has not read yet; 0 for a log nobody streams. A writer that outruns
    /// the reader waits on this, so that the log stays small.
    pub fn unread(&self) -> u64 {
        if !self.streamed.load(Ordering::Relaxed) {
            return 0;
        }
        let first = self.first_seq.load(Ordering::Relaxed);
        self.next_seq.load(Ordering::Relaxed).saturating_sub(first)
    }

    /// Forgets the events numbered below `seq`, for a reader that streams the log (reads each
    /// event once with [`EventLog::events_since`] and keeps what it needs): the log then holds
    /// only what that reader has not read yet. [`EventLog::events_since`] reads on from `seq`.
    pub fn forget_before(&self, seq: u64) {
        if !self.streamed.load(Ordering::Relaxed) {
            self.streamed.store(true, Ordering::Relaxed);
        }
        let mut shards: Vec<_> = self.shards.iter().map(|shard| lock_short(shard)).collect();
        let first = self.first_seq.load(Ordering::Relaxed).max(seq);
        self.first_seq.store(first, Ordering::Relaxed);
        // Dropped once every lock is let go: a thread appending waits for none of it.
        let mut freed = Vec::new();
        for shard in &mut shards {
            shard.forget_before(first, &mut freed);
        }
        drop(shards);
        drop(freed);
    }
}

impl EventLog {
    /// Keeps one record of kind `kind` that stands for `n_events` events, numbered from the next
    /// number on, in this thread's shard; `payload` makes its payload, given the shard's strings
    /// to keep a string in.
    #[inline]
    fn keep(
        &self,
        kind: u8,
        n_events: u64,
        time_ns: u64,
        subject: u64,
        payload: impl FnOnce(&mut Strings) -> u64,
    ) {
        let mut shard = lock_short(&self.shards[this_shard()]);
        // Numbered under the shard's lock, so each shard is in increasing order.
        let seq = self.next_seq.fetch_add(n_events, Ordering::Relaxed);
        let payload = payload(&mut shard.strings);
        let record = Record {
            seq_kind: seq << 8 | u64::from(kind),
            time_ns,
            subject,
            payload,
        };
        shard.open_chunk().push(record, n_events);
    }
}

impl EventSink for EventLog {
    fn event(&self, event: Event) {
        let later_grant = matches!(
            event.kind,
            EventKind::Granted { .. } | EventKind::Ready { .. }
        );
        if later_grant && !self.keeps_later_grants {
            return;
        }
        let shard = this_shard();
        let mut shard = lock_short(&self.shards[shard]);
        // Numbered under the shard's lock, so each shard is in increasing order (several threads
        // may share one), and a clear, which holds every shard, falls between two numbers.
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        shard.push(seq, event);
    }

    fn pushed(&self, time_ns: u64, push: &Push<'_>) {
        let n_granted = push.n_granted();
        let n_events = 1 + u64::from(n_granted) + u64::from(push.ready);
        let shard = this_shard();
        let mut shard = lock_short(&self.shards[shard]);
        let seq = self.next_seq.fetch_add(n_events, Ordering::Relaxed);
        shard.push_op(seq, time_ns, push, n_granted, 0, None);
        drop(shard);
        self.keep_within_limit(seq + n_events);
    }

    fn pushed_and_started(&self, time_ns: u64, push: &Push<'_>) {
        let n_granted = push.n_granted();
        // The push, its grants, its readiness and its start.
        let n_events = 2 + u64::from(n_granted) + u64::from(push.ready);
        let shard = this_shard();
        let mut shard = lock_short(&self.shards[shard]);
        let seq = self.next_seq.fetch_add(n_events, Ordering::Relaxed);
        shard.push_op(seq, time_ns, push, n_granted, STARTED_AT_ONCE, None);
        drop(shard);
        self.keep_within_limit(seq + n_events);
    }

    fn ran_at_once(
        &self,
        push_ns: u64,
        push: &Push<'_>,
        end_ns: u64,
        state: OpState,
        message: Option<&str>,
    ) {
        let n_granted = push.n_granted();
        // The push, its grants, its readiness, its start and its end.
        let n_events = 3 + u64::from(n_granted) + u64::from(push.ready);
        let shard = this_shard();
        let mut shard = lock_short(&self.shards[shard]);
        let seq = self.next_seq.fetch_add(n_events, Ordering::Relaxed);
        let end = [end_ns, shard.strings.end_payload(state, message)];
        shard.push_op(seq, push_ns, push, n_granted, STARTED_AT_ONCE, Some(end));
        drop(shard);
        self.keep_within_limit(seq + n_events);
    }

    fn started(&self, time_ns: u64, op: OpId, worker: u32) {
        self.keep(KIND_STARTED, 1, time_ns, op.0, |_| u64::from(worker));
    }

    fn finished(&self, time_ns: u64, op: OpId, state: OpState, message: Option<&str>) {
        self.keep(KIND_FINISHED, 1, time_ns, op.0, |strings| {
            strings.end_payload(state, message)
        });
    }

    fn granted(&self, time_ns: u64, op: OpId, var: VarId) {
        if self.keeps_later_grants {
            self.keep(KIND_GRANTED, 1, time_ns, op.0, |_| var.0);
        }
    }

    fn granted_ready(&self, time_ns: u64, op: OpId, var: VarId) {
        if self.keeps_later_grants {
            // Two numbers, the grant's and the readiness's, taken at once.
            self.keep(KIND_GRANTED, 2, time_ns, op.0, |_| var.0 | GRANT_READY);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader's events name strings it copied on its own thread: decoding a push clones its
    /// label, and a clone of the log's copy would write to memory the appending thread
    /// allocated beside its own hot data (in some runs a tenth of the interpreter's time).
    #[test]
    fn readers_decode_strings_into_copies_of_their_own() {
        let log = EventLog::new();
        let label: Arc<str> = Arc::from("y = x + 1");
        log.event(Event {
            time_ns: 1,
            kind: EventKind::Pushed {
                op: OpId(1),
                label: label.clone(),
                line: 3,
                reads: Vec::new(),
                writes: Vec::new(),
                device: Device::Cpu,
                priority: 0,
            },
        });
        let mut read = Vec::new();
        log.read_since(0, |event| read.push(event.clone()));
        let EventKind::Pushed { label: decoded, .. } = &read[0].kind else {
            panic!("{read:?}");
        };
        let shard = lock_short(&log.shards[this_shard()]);
        let kept = &shard.strings.texts[0];
        assert_eq!(decoded, kept);
        assert!(!Arc::ptr_eq(decoded, kept) && !Arc::ptr_eq(decoded, &label));
    }

    /// A streamed log whose ops each have a label of their own (an observed loop's, `y = x + i
    /// i=41`), and messages, variables and lanes of their own, keeps strings for its unread
    /// events only, and every event read back names its own strings, whether the strings were
    /// compacted between its keeping and its reading or not.
    #[test]
    fn a_streamed_log_lets_go_of_strings_no_kept_event_names() {
        let engine = crate::Engine::new(crate::EngineConfig::default());
        let vars: Vec<Var> = (0..2)
            .map(|index| engine.new_var(format!("v{index}")))
            .collect();
        let log = EventLog::new();
        let (mut next, mut read) = (0, Vec::new());
        // What the test checks of an event: its strings.
        fn described(logged: Logged<'_>) -> String {
            match logged {
                Logged::RanAtOnce(ran) => {
                    let EventKind::Pushed { label, .. } = &ran.push.kind else {
                        panic!("{:?}", ran.push);
                    };
                    format!("{label} {:?} {:?}", ran.state, ran.message)
                }
                Logged::Event(event) => match &event.kind {
                    EventKind::VarCreated { name, .. } => format!("var {name}"),
                    EventKind::DeviceSpan { lane, .. } => format!("lane {lane}"),
                    other => panic!("{other:?}"),
                },
            }
        }
        // Reads every event from `next` on; gives the number after the last.
        fn read_all(log: &EventLog, mut next: u64, read: &mut Vec<String>) -> u64 {
            loop {
                let after = log.read_ops_since(next, false, |logged| read.push(described(logged)));
                if after == next {
                    return next;
                }
                next = after;
            }
        }
        // About 70,000 strings in all.
        let n = 10 * MIN_STRINGS_TO_COMPACT as u64;
        let mut expected = Vec::new();
        for index in 0..n {
            let label: Arc<str> = Arc::from(format!("y = x + i i={index}"));
            let push = Push {
                op: OpId(index),
                label: &label,
                line: 3,
                reads: &vars[..1],
                writes: &vars[1..],
                device: Device::Cpu,
                priority: 0,
                granted: &[0b11],
                ready: true,
            };
            let message = format!("failure {index}");
            let failed = index % 3 == 0;
            let (state, message) = match failed {
                true => (OpState::Failed, Some(message.as_str())),
                false => (OpState::Done, None),
            };
            log.ran_at_once(index, &push, index, state, message);
            expected.push(format!("{label} {state:?} {message:?}"));
            if index % 5 == 0 {
                let name = Arc::from(format!("t{index}"));
                log.event(Event {
                    time_ns: index,
                    kind: EventKind::VarCreated {
                        var: VarId(1000 + index),
                        name: Arc::clone(&name),
                    },
                });
                expected.push(format!("var {name}"));
                let lane = Arc::from(format!("gpu0:s{index}"));
                log.event(Event {
                    time_ns: index,
                    kind: EventKind::DeviceSpan {
                        op: OpId(index),
                        lane: Arc::clone(&lane),
                        start_ns: index,
                        end_ns: index + 1,
                    },
                });
                expected.push(format!("lane {lane}"));
            }
            // Read now and then, a few hundred events behind.
            if index % 97 == 0 {
                // One read (512 events at most) leaves some unread while the log forgets what
                // was read and compacts its strings: those are read after, renumbered.
                next = log.read_ops_since(next, false, |logged| read.push(described(logged)));
                log.forget_before(next);
                next = read_all(&log, next, &mut read);
                let shard = lock_short(&log.shards[this_shard()]);
                assert!(
                    shard.strings.texts.len() < 4 * MIN_STRINGS_TO_COMPACT,
                    "{} strings kept",
                    shard.strings.texts.len()
                );
            }
        }
        read_all(&log, next, &mut read);
        assert_eq!(read.len(), expected.len());
        assert!(read == expected, "the events read back name other strings");
        let shard = lock_short(&log.shards[this_shard()]);
        assert!(
            shard.strings.generation >= 2,
            "compacted {}",
            shard.strings.generation
        );
    }

    /// An event that says which thread sent it and how many it sent before.
    fn numbered(thread: u32, index: u64) -> Event {
        Event {
            time_ns: index,
            kind: EventKind::Started {
                op: OpId(index),
                worker: thread,
            },
        }
    }

    fn numbers(events: &[Event]) -> Vec<u64> {
        events.iter().map(|event| event.time_ns).collect()
    }

    #[test]
    fn a_shard_finds_any_number_across_its_chunks() {
        let mut shard = Shard::default();
        // Every third number, as when three threads share the numbering.
        for seq in (0..3 * (2 * CHUNK as u64 + 10)).step_by(3) {
            shard.push(seq, numbered(0, seq));
        }
        assert_eq!(shard.chunks.len(), 3);
        assert_eq!(shard.len(), 2 * CHUNK + 10);
        for from in [
            0,
            1,
            3,
            3 * CHUNK as u64 - 1,
            3 * CHUNK as u64,
            6 * CHUNK as u64 + 29,
        ] {
            let found: Vec<u64> = shard.since(from).into_iter().map(|(seq, _)| seq).collect();
            let expected: Vec<u64> = shard
                .since(0)
                .into_iter()
                .map(|(seq, _)| seq)
                .filter(|seq| *seq >= from)
                .collect();
            assert_eq!(found, expected, "since {from}");
        }
        assert!(shard.since(u64::MAX).is_empty());
        shard.clear();
        assert!(shard.since(0).is_empty());
    }

    /// One event of every kind, with every field set.
    fn every_kind() -> Vec<Event> {
        let label: Arc<str> = Arc::from("y = x + 1");
        let kinds = vec![
            EventKind::VarCreated {
                var: VarId(7),
                name: Arc::from("x"),
            },
            EventKind::Pushed {
                op: OpId(3),
                label: label.clone(),
                line: 12,
                reads: vec![VarId(7), VarId(9)],
                writes: vec![VarId(8)],
                device: Device::link(Device::Cpu, Device::Gpu(1)),
                priority: -5,
            },
            EventKind::Pushed {
                op: OpId(4),
                label,
                line: 0,
                reads: Vec::new(),
                writes: Vec::new(),
                device: Device::Gpu(61),
                priority: i32::MAX,
            },
            EventKind::Granted {
                op: OpId(3),
                var: VarId(7),
            },
            EventKind::Ready { op: OpId(3) },
            EventKind::Started {
                op: OpId(3),
                worker: 2,
            },
            EventKind::Finished {
                op: OpId(3),
                state: OpState::Failed,
                message: Some("shapes differ".to_string()),
            },
            EventKind::Finished {
                op: OpId(4),
                state: OpState::Done,
                message: None,
            },
            EventKind::DeviceSpan {
                op: OpId(3),
                lane: Arc::from("gpu1:s0"),
                start_ns: 5,
                end_ns: u64::MAX,
            },
            EventKind::VarDeleted { var: VarId(7) },
        ];
        kinds
            .into_iter()
            .enumerate()
            .map(|(index, kind)| Event {
                time_ns: 1_000 * index as u64,
                kind,
            })
            .collect()
    }

    #[test]
    fn every_kind_of_event_reads_back_as_it_was_sent() {
        let log = EventLog::new();
        for event in every_kind() {
            log.event(event);
        }
        assert_eq!(log.events(), every_kind());
    }

    /// A grant, a start and an end taken through their own methods read back as the events the
    /// default methods send: every state, with and without a message.
    #[test]
    fn starts_and_ends_kept_without_an_event_read_back_as_their_events() {
        let log = EventLog::new();
        let default = Keep(Mutex::new(Vec::new()));
        for (index, state) in STATES.into_iter().enumerate() {
            let op = OpId(index as u64 + 40);
            let message = (index % 2 == 1).then(|| format!("error {index} \u{3b4}"));
            for sink in [&log as &dyn EventSink, &default] {
                sink.granted(10 * index as u64, op, VarId(index as u64 + 3));
                sink.started(10 * index as u64, op, index as u32);
                sink.finished(10 * index as u64 + 5, op, state, message.as_deref());
            }
        }
        let sent = std::mem::take(&mut *lock(&default.0));
        assert_eq!(sent.len(), 3 * STATES.len());
        assert_eq!(log.events(), sent);
    }

    #[test]
    fn a_log_for_a_summary_drops_the_later_grants_and_keeps_the_rest() {
        let full = EventLog::new();
        let lean = EventLog::without_later_grants();
        let (op, var) = (OpId(7), VarId(3));
        for log in [&full, &lean] {
            log.granted(1, op, var);
            log.granted_ready(2, op, var);
            log.event(Event {
                time_ns: 3,
                kind: EventKind::Granted { op, var },
            });
            log.event(Event {
                time_ns: 3,
                kind: EventKind::Ready { op },
            });
            log.started(4, op, 0);
            log.finished(5, op, OpState::Done, None);
        }
        let kinds = |log: &EventLog| -> Vec<u8> {
            log.events()
                .iter()
                .map(|event| match event.kind {
                    EventKind::Granted { .. } => b'g',
                    EventKind::Ready { .. } => b'r',
                    EventKind::Started { .. } => b's',
                    EventKind::Finished { .. } => b'f',
                    _ => b'?',
                })
                .collect()
        };
        assert_eq!(kinds(&full), b"ggrgrsf");
        assert_eq!(kinds(&lean), b"sf");
        assert_eq!(lean.events(), full.events()[5..]);
    }

    /// A sink that keeps the events as the trait's default methods send them.
    struct Keep(Mutex<Vec<Event>>);

    impl EventSink for Keep {
        fn event(&self, event: Event) {
            lock(&self.0).push(event);
        }
    }

    #[test]
    fn a_label_pushed_again_and_again_is_kept_once() {
        let mut shard = Shard::default();
        let label: Arc<str> = Arc::from("y = x + 1");
        for seq in 0..1_000 {
            let copy_of_the_text: Arc<str> = Arc::from("y = x + 1");
            shard.push(
                seq,
                Event {
                    time_ns: seq,
                    kind: EventKind::Pushed {
                        op: OpId(seq),
                        label: if seq % 2 == 0 {
                            label.clone()
                        } else {
                            copy_of_the_text
                        },
                        line: 1,
                        reads: vec![VarId(1)],
                        writes: vec![VarId(2)],
                        device: Device::Cpu,
                        priority: 0,
                    },
                },
            );
        }
        assert_eq!(shard.strings.texts.len(), 1);
        assert_eq!(std::mem::size_of::<Record>(), 32);
        assert!(shard
            .since(0)
            .into_iter()
            .all(|(_, event)| matches!(event.kind, EventKind::Pushed { label, .. } if &*label == "y = x + 1")));
    }

    /// A push of `n_vars` variables (the first half read, the rest written), the accesses at
    /// the indices `granted` granted at once, sent to a log and to a sink that keeps the events.
    /// An op's push (and, `at_once`, its start with it) kept by the log and sent as events by
    /// the trait's default methods, between two other events: the log, and the events sent.
    /// How [`push_both_ways`] sends its push.
    #[derive(Clone, Copy)]
    enum Sent<'a> {
        Pushed,
        PushedAndStarted,
        /// Ran at once, ending in a state with a message.
        RanAtOnce(OpState, Option<&'a str>),
    }

    fn push_both_ways(
        n_vars: usize,
        granted: &[usize],
        ready: bool,
        sent: Sent<'_>,
    ) -> (EventLog, Vec<Event>) {
        let engine = crate::Engine::new(crate::EngineConfig::default());
        let vars: Vec<Var> = (0..n_vars)
            .map(|index| engine.new_var(format!("v{index}")))
            .collect();
        let (reads, writes) = vars.split_at(n_vars / 2);
        let mut bits = vec![0u64; n_vars.div_ceil(64)];
        for index in granted {
            bits[index / 64] |= 1 << (index % 64);
        }
        let label: Arc<str> = Arc::from("y = x + 1");
        let push = Push {
            op: OpId(5),
            label: &label,
            line: 3,
            reads,
            writes,
            device: Device::Gpu(1),
            priority: -2,
            granted: &bits,
            ready,
        };
        let keep = Keep(Mutex::new(Vec::new()));
        let log = EventLog::new();
        log.event(numbered(0, 0));
        keep.event(numbered(0, 0));
        for sink in [&log as &dyn EventSink, &keep] {
            match sent {
                Sent::Pushed => sink.pushed(77, &push),
                Sent::PushedAndStarted => sink.pushed_and_started(77, &push),
                Sent::RanAtOnce(state, message) => sink.ran_at_once(77, &push, 90, state, message),
            }
            sink.event(numbered(0, 9));
        }
        let kept = std::mem::take(&mut *lock(&keep.0));
        (log, kept)
    }

    #[test]
    fn a_push_kept_as_one_record_reads_back_as_its_events() {
        let (log, expected) = push_both_ways(4, &[0, 1, 3], false, Sent::Pushed);
        let kinds: Vec<String> = expected
            .iter()
            .map(|event| {
                format!("{:?}", event.kind)
                    .split(' ')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            kinds,
            ["Started", "Pushed", "Granted", "Granted", "Granted", "Started"]
        );
        assert_eq!(log.events(), expected);
        assert_eq!((log.len(), log.next_seq()), (6, 6));
        // Read from inside the record: only the events from that number on.
        for from in 0..=6 {
            assert_eq!(
                log.events_since(from),
                (expected[from as usize..].to_vec(), 6),
                "from {from}"
            );
        }
        let (log, expected) = push_both_ways(2, &[0, 1], true, Sent::Pushed);
        assert!(matches!(expected[4].kind, EventKind::Ready { op: OpId(5) }));
        assert_eq!(log.events(), expected);
        // More accesses than one word of bits holds.
        let (log, expected) = push_both_ways(150, &[0, 63, 64, 149], false, Sent::Pushed);
        assert_eq!(expected.len(), 7);
        assert_eq!(log.events(), expected);
        assert_eq!(log.events_since(3).0, expected[3..]);
    }

    /// The kinds of `events`, by name.
    fn kinds(events: &[Event]) -> Vec<&'static str> {
        events
            .iter()
            .map(|event| match event.kind {
                EventKind::Pushed { .. } => "Pushed",
                EventKind::Granted { .. } => "Granted",
                EventKind::Ready { .. } => "Ready",
                EventKind::Started { .. } => "Started",
                EventKind::Finished { .. } => "Finished",
                _ => "other",
            })
            .collect()
    }

    /// Checks that a log whose pushes all started at once reads back as `expected`: whole, from
    /// each number on (inside a record too), and without grants (nor the readiness of those
    /// pushes), every number counted.
    fn reads_back_from_each_number(log: &EventLog, expected: &[Event]) {
        let n = expected.len() as u64;
        assert_eq!(log.events(), expected);
        assert_eq!((log.len() as u64, log.next_seq()), (n, n));
        for from in 0..=n {
            assert_eq!(
                log.events_since(from),
                (expected[from as usize..].to_vec(), n),
                "from {from}"
            );
        }
        let mut seen = Vec::new();
        let next = log.read_since_without_grants(0, |event| seen.push(event.clone()));
        let without_grants: Vec<Event> = expected
            .iter()
            .filter(|event| {
                !matches!(
                    event.kind,
                    EventKind::Granted { .. } | EventKind::Ready { .. }
                )
            })
            .cloned()
            .collect();
        assert_eq!((seen, next), (without_grants, n));
    }

    #[test]
    fn a_push_and_its_start_kept_as_one_record_read_back_as_their_events() {
        let (log, expected) = push_both_ways(3, &[0, 1, 2], true, Sent::PushedAndStarted);
        assert_eq!(
            kinds(&expected),
            ["Started", "Pushed", "Granted", "Granted", "Granted", "Ready", "Started", "Started"]
        );
        assert_eq!(
            expected[6],
            Event {
                time_ns: 77,
                kind: EventKind::Started {
                    op: OpId(5),
                    worker: crate::CALLER_WORKER
                }
            }
        );
        reads_back_from_each_number(&log, &expected);
        // Nothing granted at once: the push then its start (the record's words hold no bits).
        let (log, expected) = push_both_ways(2, &[], false, Sent::PushedAndStarted);
        assert_eq!(expected.len(), 4);
        assert_eq!(log.events(), expected);
    }

    #[test]
    fn an_op_that_ran_at_once_kept_as_one_record_reads_back_as_its_events() {
        let (log, expected) =
            push_both_ways(3, &[0, 1, 2], true, Sent::RanAtOnce(OpState::Done, None));
        assert_eq!(
            kinds(&expected),
            [
                "Started", "Pushed", "Granted", "Granted", "Granted", "Ready", "Started",
                "Finished", "Started"
            ]
        );
        assert_eq!(
            expected[7],
            Event {
                time_ns: 90,
                kind: EventKind::Finished {
                    op: OpId(5),
                    state: OpState::Done,
                    message: None
                }
            }
        );
        reads_back_from_each_number(&log, &expected);
        // Failed, nothing granted at once (no bits among the words), and a push of more
        // accesses than the stack's layout takes: the end's words are found after them all.
        for (n_vars, granted) in [(2, &[][..]), (7, &[0, 6][..]), (70, &[3, 69][..])] {
            let (log, expected) = push_both_ways(
                n_vars,
                granted,
                false,
                Sent::RanAtOnce(OpState::Failed, Some("shapes differ")),
            );
            assert_eq!(expected.len(), 5 + granted.len());
            assert_eq!(log.events(), expected, "{n_vars} variables");
        }
    }

    #[test]
    fn a_grant_that_makes_its_op_ready_reads_back_as_both_events() {
        let log = EventLog::new();
        log.event(numbered(0, 0));
        log.granted_ready(40, OpId(7), VarId(3));
        log.event(numbered(0, 2));
        let grant = Event {
            time_ns: 40,
            kind: EventKind::Granted {
                op: OpId(7),
                var: VarId(3),
            },
        };
        let ready = Event {
            time_ns: 40,
            kind: EventKind::Ready { op: OpId(7) },
        };
        let all = vec![numbered(0, 0), grant, ready.clone(), numbered(0, 2)];
        assert_eq!(log.events(), all);
        assert_eq!((log.len(), log.next_seq()), (4, 4));
        // Read from inside the record: the readiness alone.
        for from in 0..=4 {
            assert_eq!(log.events_since(from), (all[from as usize..].to_vec(), 4));
        }
        // Without grants: the readiness is kept, the grant passed over but counted.
        let mut seen = Vec::new();
        let next = log.read_since_without_grants(0, |event| seen.push(event.clone()));
        assert_eq!(
            (seen, next),
            (vec![numbered(0, 0), ready, numbered(0, 2)], 4)
        );
    }

    #[test]
    fn a_reader_without_grants_gets_every_other_event_and_the_same_numbers() {
        let (log, expected) = push_both_ways(4, &[0, 1, 3], true, Sent::Pushed);
        // A grant at a release, as another thread (another shard) sends it.
        let grant = Event {
            time_ns: 90,
            kind: EventKind::Granted {
                op: OpId(5),
                var: VarId(2),
            },
        };
        let shard = (this_shard() + 1) % N_SHARDS;
        let seq = log.next_seq.fetch_add(1, Ordering::Relaxed);
        lock_short(&log.shards[shard]).push(seq, grant.clone());
        log.event(numbered(0, 10));
        let mut all = expected;
        all.push(grant);
        all.push(numbered(0, 10));
        let without: Vec<Event> = all
            .iter()
            .filter(|event| !matches!(event.kind, EventKind::Granted { .. }))
            .cloned()
            .collect();
        assert_eq!(without.len(), all.len() - 4);
        for from in 0..=all.len() as u64 {
            let (mut seen, mut next) = (Vec::new(), from);
            loop {
                let after = log.read_since_without_grants(next, |event| seen.push(event.clone()));
                if after == next {
                    break;
                }
                next = after;
            }
            assert_eq!(next, all.len() as u64, "from {from}");
            let expected: Vec<Event> = all[from as usize..]
                .iter()
                .filter(|event| !matches!(event.kind, EventKind::Granted { .. }))
                .cloned()
                .collect();
            assert_eq!(seen, expected, "from {from}");
        }
    }

    #[test]
    fn a_reader_of_ops_gets_each_op_run_at_once_whole_and_the_events_of_a_reader_of_events() {
        let engine = crate::Engine::new(crate::EngineConfig::default());
        let vars: Vec<Var> = (0..3)
            .map(|index| engine.new_var(format!("v{index}")))
            .collect();
        let label: Arc<str> = Arc::from("y = x + 1");
        let push = |op: u64| Push {
            op: OpId(op),
            label: &label,
            line: 3,
            reads: &vars[..1],
            writes: &vars[1..],
            device: Device::Cpu,
            priority: 0,
            granted: &[0b111],
            ready: true,
        };
        let log = EventLog::new();
        log.ran_at_once(10, &push(1), 20, OpState::Done, None);
        log.pushed(30, &push(2));
        {
            // A failed op run at once on another thread (another shard), between two of ours.
            let other = (this_shard() + 1) % N_SHARDS;
            let failed = push(3);
            let mut shard = lock_short(&log.shards[other]);
            let seq = log.next_seq.fetch_add(4 + 3, Ordering::Relaxed);
            let end = [
                50,
                shard
                    .strings
                    .end_payload(OpState::Failed, Some("bad shapes")),
            ];
            shard.push_op(seq, 40, &failed, 3, STARTED_AT_ONCE, Some(end));
        }
        log.ran_at_once(60, &push(4), 70, OpState::Done, None);
        {
            // A record of an op run at once with one access not granted at its push (the
            // engine keeps none such): whole only for a reader without grants.
            let partly = Push {
                granted: &[0b011],
                ready: false,
                ..push(5)
            };
            let mut shard = lock_short(&log.shards[this_shard()]);
            let seq = log.next_seq.fetch_add(1 + 2 + 2, Ordering::Relaxed);
            let end = [90, shard.strings.end_payload(OpState::Done, None)];
            shard.push_op(seq, 80, &partly, 2, STARTED_AT_ONCE, Some(end));
        }
        log.event(numbered(0, 9));
        let total = log.next_seq();
        for (from, grants) in (0..=total).flat_map(|from| [(from, false), (from, true)]) {
            let (mut whole, mut seen, mut next) = (Vec::new(), Vec::new(), from);
            loop {
                let after = log.read_ops_since(next, grants, |logged| {
                    if let Logged::RanAtOnce(ran) = &logged {
                        whole.push((
                            ran.op,
                            ran.end_ns,
                            ran.state,
                            ran.message.map(str::to_owned),
                        ));
                    }
                    logged.each_event(|event| seen.push(event.clone()));
                });
                if after == next {
                    break;
                }
                next = after;
            }
            assert_eq!(next, total, "from {from}");
            let (mut expected, mut next) = (Vec::new(), from);
            while next < total {
                let keep = |event: &Event| expected.push(event.clone());
                next = match grants {
                    true => log.read_since(next, keep),
                    false => log.read_since_without_grants(next, keep),
                };
            }
            assert_eq!(seen, expected, "from {from}, grants {grants}");
            if from == 0 {
                let failed = Some("bad shapes".to_string());
                let mut expected = vec![
                    (OpId(1), 20, OpState::Done, None),
                    (OpId(3), 50, OpState::Failed, failed),
                    (OpId(4), 70, OpState::Done, None),
                ];
                if !grants {
                    expected.push((OpId(5), 90, OpState::Done, None));
                }
                assert_eq!(whole, expected, "grants {grants}");
            }
        }
    }

    #[test]
    fn a_reader_reusing_its_room_decodes_every_event_afresh() {
        let log = EventLog::new();
        let (mut expected, mut seen) = (Vec::new(), Vec::new());
        let mut next = 0;
        for round in 0..60u64 {
            // Batches of different lengths, pushes of different accesses between other events:
            // a slot that held a push holds another kind next time, and the other way round.
            for index in 0..round % 7 {
                let event = if (round + index) % 3 == 0 {
                    numbered(0, index)
                } else {
                    Event {
                        time_ns: index,
                        kind: EventKind::Pushed {
                            op: OpId(round),
                            label: Arc::from(format!("y{index}")),
                            line: 1,
                            reads: (0..index).map(VarId).collect(),
                            writes: (0..round % 4).map(VarId).collect(),
                            device: Device::Cpu,
                            priority: 0,
                        },
                    }
                };
                log.event(event.clone());
                expected.push(event);
            }
            next = log.read_since(next, |event| seen.push(event.clone()));
        }
        assert_eq!(seen, expected);
    }

    #[test]
    fn a_streaming_reader_gets_a_long_log_in_batches() {
        let log = EventLog::new();
        let n = 3 * READ_BATCH + 5;
        for index in 0..n {
            log.event(numbered(0, index));
        }
        let (mut next, mut seen, mut n_reads) = (0, Vec::new(), 0);
        loop {
            let mut n_new = 0;
            next = log.read_since(next, |event| {
                seen.push(event.time_ns);
                n_new += 1;
            });
            if n_new == 0 {
                break;
            }
            assert!(n_new <= READ_BATCH, "{n_new} events in one read");
            n_reads += 1;
        }
        assert_eq!(seen, (0..n).collect::<Vec<u64>>());
        assert_eq!((next, n_reads), (n, 4));
        // Asked for all at once, they come at once.
        assert_eq!(log.events_since(0).0.len() as u64, n);
    }

    #[test]
    fn two_readers_beside_each_other_each_read_every_event_once_in_order() {
        let log = Arc::new(EventLog::new());
        let n = 20 * READ_BATCH;
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Each reads the log while it is written, one in the kept room, one in its own.
        let readers: Vec<_> = [false, true]
            .into_iter()
            .map(|own_room| {
                let (log, done) = (Arc::clone(&log), Arc::clone(&done));
                std::thread::spawn(move || {
                    let (mut room, mut next, mut seen) = (ReadRoom::default(), 0, Vec::new());
                    loop {
                        let finished = done.load(Ordering::Acquire);
                        let visit = |event: &Event| seen.push(event.time_ns);
                        next = if own_room {
                            log.read_since_in(&mut room, next, visit)
                        } else {
                            log.read_since(next, visit)
                        };
                        if finished && next == log.next_seq() {
                            return seen;
                        }
                    }
                })
            })
            .collect();
        for index in 0..n {
            log.event(numbered(0, index));
        }
        done.store(true, Ordering::Release);
        for reader in readers {
            assert_eq!(reader.join().unwrap(), (0..n).collect::<Vec<u64>>());
        }
    }

    #[test]
    fn a_streaming_reader_keeps_the_log_small_and_loses_nothing() {
        let unstreamed = EventLog::new();
        unstreamed.event(numbered(0, 0));
        assert_eq!(unstreamed.unread(), 0, "nobody streams this log");
        let log = EventLog::new();
        let mut next = 0;
        let mut n_read = 0;
        for index in 0..10 * CHUNK as u64 {
            log.event(numbered(0, index));
            if index % 1000 == 999 {
                let (events, after) = log.events_since(next);
                assert_eq!(numbers(&events), (next..after).collect::<Vec<u64>>());
                n_read += events.len();
                next = after;
                log.forget_before(next);
                assert!(
                    log.n_stored() <= 2 * CHUNK,
                    "{} events held",
                    log.n_stored()
                );
                assert_eq!(log.unread(), 0);
            }
        }
        let (events, after) = log.events_since(next);
        assert_eq!(n_read + events.len(), 10 * CHUNK);
        assert_eq!(after, 10 * CHUNK as u64);
        // Asking from before what was forgotten reads on from the first number kept.
        assert_eq!(log.events_since(0).0, events);
    }

    /// A log with a limit, under an engine's pushes: it holds about the limit's events, the
    /// latest ones, and says how many it forgot; a clear starts the count again.
    #[test]
    fn a_log_with_a_limit_keeps_the_latest_events() {
        let limit = 4 * CHUNK as u64;
        let log = Arc::new(EventLog::new().keeping_at_most(limit));
        let engine = crate::Engine::new(crate::EngineConfig {
            policy: crate::Policy::Naive,
            sink: Some(log.clone()),
            ..crate::EngineConfig::default()
        });
        let var = engine.new_var("x");
        let n_ops = 10 * CHUNK as u64;
        for _ in 0..n_ops {
            engine.push(crate::OpSpec::new("x = x + 1", || Ok(())).writes(&[var.clone()]));
        }
        engine.wait_all();
        // What it says it holds is within the limit (views print it beside the limit); what
        // it stores, whole chunks, about the same.
        let held = log.len() as u64;
        assert!(held <= limit, "{held} events held");
        let stored = log.n_stored() as u64;
        assert!(stored <= limit + 2 * CHUNK as u64, "{stored} events stored");
        assert_eq!(log.unread(), 0, "the interpreter never waits for a reader");
        let events = log.events();
        let first = log.first_seq();
        assert!(
            first > 0 && log.n_forgotten() == first,
            "{first} {}",
            log.n_forgotten()
        );
        assert_eq!(events.len() as u64, log.next_seq() - first);
        // The latest events: the last op's end is the last one, and the ops pushed are the
        // last of the run, in order.
        let pushed: Vec<u64> = events
            .iter()
            .filter_map(|event| match event.kind {
                EventKind::Pushed { op, .. } => Some(op.0),
                _ => None,
            })
            .collect();
        assert!(pushed.windows(2).all(|pair| pair[1] == pair[0] + 1));
        let last_op = *pushed.last().expect("pushes kept");
        assert!(matches!(
            events.last().map(|event| &event.kind),
            Some(EventKind::Finished { op, .. }) if op.0 == last_op
        ));
        let clears = log.n_clears();
        log.clear();
        assert_eq!((log.n_forgotten(), log.n_clears()), (0, clears + 1));
    }

    #[test]
    fn events_since_hands_out_the_events_from_a_number_on() {
        let log = EventLog::new();
        assert_eq!(log.events_since(0), (Vec::new(), 0));
        for index in 0..5 {
            log.event(numbered(0, index));
        }
        let (all, next) = log.events_since(0);
        assert_eq!((numbers(&all), next), (vec![0, 1, 2, 3, 4], 5));
        assert_eq!(all, log.events());
        let (tail, next) = log.events_since(3);
        assert_eq!((numbers(&tail), next), (vec![3, 4], 5));
        assert_eq!(log.events_since(5), (Vec::new(), 5));
        assert_eq!(log.next_seq(), 5);
    }

    #[test]
    fn a_reader_stops_at_a_gap_and_picks_it_up_later() {
        let log = EventLog::new();
        log.event(numbered(0, 0));
        // Number 1 is taken, and its event is appended to a shard the reader has already read.
        let late = log.next_seq.fetch_add(1, Ordering::Relaxed);
        log.event(numbered(0, 2));
        let (events, next) = log.events_since(0);
        assert_eq!((numbers(&events), next), (vec![0], 1));
        assert_eq!(log.events_since(next), (Vec::new(), 1));
        lock_short(&log.shards[(this_shard() + 1) % N_SHARDS]).push(late, numbered(0, 1));
        let (events, next) = log.events_since(next);
        assert_eq!((numbers(&events), next), (vec![1, 2], 3));
    }

    #[test]
    fn numbers_keep_increasing_across_a_clear() {
        let log = EventLog::new();
        for index in 0..3 {
            log.event(numbered(0, index));
        }
        let (_, next) = log.events_since(0);
        log.event(numbered(0, 3));
        log.clear();
        assert!(log.is_empty());
        assert_eq!((log.first_seq(), log.next_seq()), (4, 4));
        // What was not read before the clear is forgotten; reading goes on after it.
        assert_eq!(log.events_since(next), (Vec::new(), 4));
        log.event(numbered(0, 10));
        log.event(numbered(0, 11));
        let (events, after) = log.events_since(next);
        assert_eq!((numbers(&events), after), (vec![10, 11], 6));
        assert_eq!(log.events_since(0), log.events_since(4));
        assert_eq!(log.events_since(5).0, vec![numbered(0, 11)]);
        assert_eq!(log.events(), events);
    }

    /// Appends `per_thread` events from each of `n_threads` threads (more threads than shards,
    /// so shards are shared) while reading with `events_since` in a loop; `clear_at` clears the
    /// log once the reader has seen that many events. Returns what the reader saw.
    fn read_while_appending(
        n_threads: u32,
        per_thread: u64,
        clear_at: Option<usize>,
    ) -> Vec<Event> {
        let log = Arc::new(EventLog::new());
        let writers: Vec<_> = (0..n_threads)
            .map(|thread| {
                let log = log.clone();
                std::thread::spawn(move || {
                    for index in 0..per_thread {
                        log.event(numbered(thread, index));
                        if index % 64 == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let total = n_threads as u64 * per_thread;
        let mut seen: Vec<Event> = Vec::new();
        let mut next = 0;
        let mut cleared = false;
        loop {
            let writers_done = log.next_seq() == total;
            let (events, after) = log.events_since(next);
            assert!(after >= next + events.len() as u64);
            next = after;
            seen.extend(events);
            if clear_at.is_some_and(|at| seen.len() >= at) && !cleared {
                log.clear();
                cleared = true;
            }
            if writers_done && next == total {
                break;
            }
        }
        for writer in writers {
            writer.join().unwrap();
        }
        assert_eq!(log.events_since(next), (Vec::new(), total));
        // Everything the log still holds came out last, in the same order.
        let kept = log.events();
        assert_eq!(seen[seen.len() - kept.len()..], kept[..]);
        seen
    }

    /// Each thread's events in `seen` must be its own, in the order it sent them, each once.
    fn check_order(seen: &[Event], n_threads: u32) -> Vec<u64> {
        let mut counts: Vec<u64> = vec![0; n_threads as usize];
        let mut last: Vec<Option<u64>> = vec![None; n_threads as usize];
        for event in seen {
            let EventKind::Started { worker, op } = event.kind else {
                panic!("unexpected {event:?}");
            };
            let last = &mut last[worker as usize];
            assert!(last.is_none_or(|last| op.0 > last), "{op:?} after {last:?}");
            *last = Some(op.0);
            counts[worker as usize] += 1;
        }
        counts
    }

    #[test]
    fn a_reader_polling_while_threads_append_sees_every_event_once_in_order() {
        let (n_threads, per_thread) = (12, 20_000);
        let seen = read_while_appending(n_threads, per_thread, None);
        assert_eq!(seen.len() as u64, n_threads as u64 * per_thread);
        // Every thread's events, each once, in the order it sent them.
        for count in check_order(&seen, n_threads) {
            assert_eq!(count, per_thread);
        }
    }

    #[test]
    fn a_clear_while_threads_append_loses_only_what_it_forgets() {
        let (n_threads, per_thread) = (12, 20_000);
        let seen = read_while_appending(n_threads, per_thread, Some(50_000));
        let counts = check_order(&seen, n_threads);
        assert!(counts.iter().sum::<u64>() <= n_threads as u64 * per_thread);
    }
}
