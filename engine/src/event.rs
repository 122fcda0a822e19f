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
///
/// Sequence numbers start at 0 and only increase, across [`EventLog::clear`] too, so a reader can
/// keep its place: [`EventLog::events_since`] hands out the events from a sequence number on,
/// a piece at a time, each exactly once. A number is taken under its shard's lock, so each shard
/// is in increasing order; but a reader locks one shard at a time, and may find an event in one
/// shard while an earlier one is appended to a shard it already read. Readers therefore only
/// get the run of consecutive numbers that are all present, never skipping such a gap.
pub struct EventLog {
    shards: [Mutex<Shard>; N_SHARDS],
    next_seq: AtomicU64,
    /// The number of the first event after the last clear: the log holds no event numbered
    /// below it. Written only while every shard is locked, so read under any shard's lock.
    first_seq: AtomicU64,
}

const N_SHARDS: usize = 8;

/// One shard's events, in increasing sequence order, kept in chunks of fixed capacity: an append
/// never moves the events already there. (A growing `Vec` would now and then copy the whole
/// shard, tens of megabytes for a long run, inside the lock and within some op's span: that op
/// would look milliseconds long in every view.)
#[derive(Default)]
struct Shard {
    chunks: Vec<Vec<(u64, Event)>>,
}

/// Events per chunk of a shard.
const CHUNK: usize = 4096;

impl Shard {
    fn push(&mut self, numbered: (u64, Event)) {
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < CHUNK => chunk.push(numbered),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(numbered);
                self.chunks.push(chunk);
            }
        }
    }

    fn len(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }

    fn iter(&self) -> impl Iterator<Item = &(u64, Event)> {
        self.chunks.iter().flatten()
    }

    /// The events numbered `from` and on, found by binary searches.
    fn since(&self, from: u64) -> impl Iterator<Item = &(u64, Event)> {
        // The chunks before the first that ends at or after `from` hold only earlier numbers.
        let first_chunk = self
            .chunks
            .partition_point(|chunk| chunk.last().is_some_and(|(seq, _)| *seq < from));
        let rest = &self.chunks[first_chunk..];
        let skip = rest
            .first()
            .map_or(0, |chunk| chunk.partition_point(|(seq, _)| *seq < from));
        rest.iter().flatten().skip(skip)
    }

    fn clear(&mut self) {
        self.chunks.clear();
    }
}

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
            shards: std::array::from_fn(|_| Mutex::new(Shard::default())),
            next_seq: AtomicU64::new(0),
            first_seq: AtomicU64::new(0),
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
        let mut from = seq;
        let mut found: Vec<(u64, Event)> = Vec::new();
        for (index, shard) in self.shards.iter().enumerate() {
            let shard = lock(shard);
            if index == 0 {
                // Read under a shard's lock, which a clear holds while it writes `first_seq`.
                from = from.max(self.first_seq.load(Ordering::Relaxed));
            }
            found.extend(shard.since(from).cloned());
        }
        // Each shard's part is in order: a merge of a few runs.
        found.sort_by_key(|(seq, _)| *seq);
        // Up to the first gap: a number appended to a shard after this read it (or, when a clear
        // ran during this read, forgotten). What follows it waits for the next call.
        let n_present = found
            .iter()
            .zip(from..)
            .take_while(|((seq, _), expected)| seq == expected)
            .count();
        found.truncate(n_present);
        let next = from + n_present as u64;
        let events = found.into_iter().map(|(_, event)| event).collect();
        (events, next)
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
        let _shard = lock(&self.shards[0]);
        self.first_seq.load(Ordering::Relaxed)
    }

    /// The number of events so far.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|shard| lock(shard).len()).sum()
    }

    /// Whether no event arrived yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every event so far. Numbers keep increasing, and [`EventLog::events_since`] reads
    /// on from the first event after the clear.
    pub fn clear(&self) {
        let mut shards: Vec<_> = self.shards.iter().map(lock).collect();
        // Every shard is locked, so no number is being taken: the events numbered below
        // `next_seq` are all in the shards, and the later ones come after this returns.
        self.first_seq
            .store(self.next_seq.load(Ordering::Relaxed), Ordering::Relaxed);
        for shard in &mut shards {
            shard.clear();
        }
    }
}

impl EventSink for EventLog {
    fn event(&self, event: Event) {
        let shard = SHARD.with(|shard| *shard);
        let mut shard = lock(&self.shards[shard]);
        // Numbered under the shard's lock, so each shard is in increasing order (several threads
        // may share one), and a clear, which holds every shard, falls between two numbers.
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        shard.push((seq, event));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            shard.push((seq, numbered(0, seq)));
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
            let found: Vec<u64> = shard.since(from).map(|(seq, _)| *seq).collect();
            let expected: Vec<u64> = shard
                .iter()
                .map(|(seq, _)| *seq)
                .filter(|seq| *seq >= from)
                .collect();
            assert_eq!(found, expected, "since {from}");
        }
        assert_eq!(shard.since(u64::MAX).count(), 0);
        shard.clear();
        assert_eq!(shard.since(0).count(), 0);
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
        lock(&log.shards[(SHARD.with(|shard| *shard) + 1) % N_SHARDS]).push((late, numbered(0, 1)));
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
