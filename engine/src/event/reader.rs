//! The reading side of the [`EventLog`](super::EventLog): each shard's records copied out under
//! its lock as they are (32 bytes each, with the words they point to), then merged in number
//! order and decoded one event at a time, after the locks are let go.
//!
//! A reader never holds a batch of decoded events: each event is decoded when its turn comes
//! into room the reader keeps (a push into one [`Event`] whose vectors and label are reused, so
//! a loop's pushes allocate nothing and touch no reference count), lent to the visitor, and
//! overwritten by the next.

use super::{
    device_of, is_set, Chunk, Record, Shard, GRANT_READY, KIND_CANCELLED, KIND_DEVICE_SPAN,
    KIND_FINISHED, KIND_GRANTED, KIND_PUSHED, KIND_READY, KIND_STARTED, KIND_VAR_CREATED,
    KIND_VAR_DELETED, STATES,
};
use crate::sync::Arc;
use crate::{Event, EventKind, Logged, OpId, OpState, RanAtOnce, VarId};

/// What a merge hands out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Reading {
    /// Whether the grants are handed out: when not, they are counted and passed over, not
    /// decoded, and so is the readiness of an op that started at once (see
    /// [`Cursor::passes_over`]).
    pub(super) grants: bool,
    /// Whether an op that ran at once comes whole ([`Logged::RanAtOnce`]).
    pub(super) whole_ops: bool,
}

impl Reading {
    /// Every event, one at a time.
    pub(super) const EVERY: Reading = Reading {
        grants: true,
        whole_ops: false,
    };
}

/// One shard's records for a reader, copied as they are: kept from one read to the next, so a
/// long run's reader allocates nothing per read.
#[derive(Default)]
pub(super) struct Run {
    records: Vec<Record>,
    /// The words the records point to (a push's accesses, a device span's times), copied
    /// chunk by chunk.
    words: Vec<u64>,
    /// For each chunk copied: the index of its first record in `records`, and what to add
    /// (wrapping) to a record's offset into its chunk's words to find them in `words`.
    segments: Vec<(usize, u64)>,
    /// The shard's strings (which only grow), copied as they appear: the reader's own copies,
    /// allocated on its thread. Decoding a push clones its label; a clone of the log's own
    /// copy writes to a cache line that the appending thread may share with its hot data
    /// (allocated beside it): in some observed runs of `big.dep` that took a tenth of the
    /// interpreter's time, in one function reading a statement's operands.
    strings: Vec<Arc<str>>,
    /// The generation of the shard's strings that `strings` copies (see `Strings::generation`).
    generation: u64,
    /// The first number to hand out (it may fall inside the first record: a push's grants).
    from: u64,
}

impl Shard {
    /// Copies the records holding the events numbered `from` and on into `out` (emptied
    /// first), found by binary searches; from no record numbered `until` or later (a push's
    /// record numbered below it gives all its events).
    pub(super) fn since_into(&self, from: u64, until: u64, out: &mut Run) {
        out.records.clear();
        out.words.clear();
        out.segments.clear();
        out.from = from;
        if out.generation != self.strings.generation {
            // Compacted since: the numbers name other strings now.
            out.strings.clear();
            out.generation = self.strings.generation;
        }
        let known = out.strings.len();
        if let Some(new) = self.strings.texts.get(known..) {
            out.strings
                .extend(new.iter().map(|text| Arc::from(&**text)));
        }
        // The chunks before the first that ends at or after `from` hold only earlier numbers.
        let first_chunk = self
            .chunks
            .partition_point(|chunk| chunk.last_seq().is_some_and(|seq| seq < from));
        for chunk in &self.chunks[first_chunk..] {
            let skip = chunk
                .records
                .partition_point(|record| record.last_seq() < from);
            let records = &chunk.records[skip..];
            let n = records.partition_point(|record| record.seq() < until);
            out.copy(chunk, &records[..n]);
            if n < records.len() {
                return;
            }
        }
    }
}

impl Run {
    /// Appends `records` of `chunk`, with the words they point to.
    fn copy(&mut self, chunk: &Chunk, records: &[Record]) {
        if records.is_empty() {
            return;
        }
        let first = records.iter().find_map(Record::word_offset);
        let last = records
            .iter()
            .rev()
            .find_map(|record| Some(record.word_offset()? + record.n_words(&chunk.words)));
        let base = match (first, last) {
            (Some(first), Some(end)) => {
                let base = (self.words.len() as u64).wrapping_sub(first);
                self.words
                    .extend_from_slice(&chunk.words[first as usize..end as usize]);
                base
            }
            _ => 0,
        };
        self.segments.push((self.records.len(), base));
        self.records.extend_from_slice(records);
    }

    /// Whether it holds no event.
    fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

impl Record {
    /// Where its words start in its chunk, for a kind that has words.
    fn word_offset(&self) -> Option<u64> {
        match self.kind() {
            KIND_PUSHED => Some(self.payload & 0xffff_ffff),
            KIND_DEVICE_SPAN => Some(self.payload),
            _ => None,
        }
    }

    /// How many words it has, read from `words` (its chunk's, or a run's) at its offset.
    pub(super) fn n_words(&self, words: &[u64]) -> u64 {
        match self.kind() {
            KIND_PUSHED => {
                let offset = (self.payload & 0xffff_ffff) as usize;
                let counts = words[offset + 2];
                let n_accesses = (counts >> 32) + (counts & 0xffff_ffff);
                // The grants' bits follow the accesses when some were granted at once, and the
                // end's two words follow them when the op ended at once.
                let n_bits = match self.grants() {
                    (0, _) => 0,
                    _ => n_accesses.div_ceil(64),
                };
                3 + n_accesses + n_bits + 2 * u64::from(self.ends_at_once())
            }
            KIND_DEVICE_SPAN => 3,
            _ => 0,
        }
    }
}

/// Where a merge is in one run: the next event's record, its chunk, and its number; and of that
/// record, worked out once for all its events, the number of its last event and the numbers
/// of the events a reader without grants passes over.
struct Cursor<'a> {
    run: &'a Run,
    record: usize,
    segment: usize,
    seq: u64,
    last: u64,
    /// The first and last numbers of the record's events that a reader without grants passes
    /// over (the first above the last when there are none): its grants, and the readiness of an
    /// op that started at once (its start, the next event, says all it says).
    passed_over: (u64, u64),
}

impl<'a> Cursor<'a> {
    fn new(run: &'a Run) -> Cursor<'a> {
        let mut cursor = Cursor {
            run,
            record: 0,
            segment: 0,
            seq: 0,
            last: 0,
            passed_over: (1, 0),
        };
        if let Some(record) = run.records.first() {
            cursor.enter(record);
            cursor.seq = cursor.seq.max(run.from);
        }
        cursor
    }

    /// Moves to the first event of `record`, the cursor's record now.
    #[inline]
    fn enter(&mut self, record: &Record) {
        let seq = record.seq();
        self.seq = seq;
        self.last = record.last_seq();
        self.passed_over = match record.kind() {
            KIND_GRANTED => (seq, seq),
            KIND_PUSHED => {
                let (n_granted, ready) = record.grants();
                let ready_then_started = ready && record.starts_at_once();
                (seq + 1, seq + n_granted + u64::from(ready_then_started))
            }
            _ => (1, 0),
        };
    }

    /// The number of its next event, if any.
    fn head(&self) -> Option<u64> {
        (self.record < self.run.records.len()).then_some(self.seq)
    }

    /// Moves to the next event.
    #[inline]
    fn advance(&mut self) {
        if self.seq < self.last {
            self.seq += 1;
            return;
        }
        let records = &self.run.records;
        self.record += 1;
        if let Some(record) = records.get(self.record) {
            self.enter(record);
            let segments = &self.run.segments;
            while segments
                .get(self.segment + 1)
                .is_some_and(|(start, _)| *start <= self.record)
            {
                self.segment += 1;
            }
        }
    }

    /// Whether a reader without grants passes its next event over: a grant (an access granted,
    /// at a push or at a release), or the readiness of an op that started at once.
    #[inline]
    fn passes_over(&self) -> bool {
        (self.passed_over.0..=self.passed_over.1).contains(&self.seq)
    }

    /// Whether its next event is the first of an op that ran at once (its push, start and end
    /// in one record), which a reading of whole ops hands out whole; for a reading with
    /// grants, one whose every access was granted at its push (as the engine keeps every such
    /// op), so that its events are known from its accesses.
    #[inline]
    fn at_ran_at_once(&self, grants: bool) -> bool {
        let record = &self.run.records[self.record];
        if self.seq != record.seq() || !record.starts_at_once() || !record.ends_at_once() {
            return false;
        }
        let (n_granted, ready) = record.grants();
        !grants || (ready && n_granted == self.n_accesses(record))
    }

    /// How many accesses the push of `record`, a push's, has.
    fn n_accesses(&self, record: &Record) -> u64 {
        let run = self.run;
        let base = run.segments[self.segment].1;
        let offset = (record.payload & 0xffff_ffff).wrapping_add(base) as usize;
        let counts = run.words[offset + 2];
        (counts >> 32) + (counts & 0xffff_ffff)
    }

    /// Decodes the push of its record, a push's, into `pushed`; returns where its accesses start
    /// in the run's words and how many there are.
    fn decode_push(&self, record: &Record, pushed: &mut Event) -> (usize, usize) {
        let run = self.run;
        let base = run.segments[self.segment].1;
        let word = |offset: u64| run.words[offset.wrapping_add(base) as usize];
        let offset = record.payload & 0xffff_ffff;
        let counts = word(offset + 2);
        let (n_reads, n_writes) = ((counts >> 32) as usize, (counts & 0xffff_ffff) as usize);
        let vars_at = offset.wrapping_add(base) as usize + 3;
        let vars = &run.words[vars_at..][..n_reads + n_writes];
        let (label_line, device_priority) = (word(offset), word(offset + 1));
        let label = &run.strings[(label_line >> 32) as usize];
        fill_push(
            pushed,
            record.time_ns,
            OpId(record.subject),
            label,
            vars.split_at(n_reads),
        );
        if let EventKind::Pushed {
            line,
            device,
            priority,
            ..
        } = &mut pushed.kind
        {
            *line = label_line as u32;
            *device = device_of(device_priority >> 32);
            *priority = device_priority as u32 as i32;
        }
        (vars_at, vars.len())
    }

    /// Lends `visit` the op that ran at once whose record is its next (see
    /// [`Cursor::at_ran_at_once`]), decoded whole, for a reader that reads grants or not;
    /// `pushed` is the room its push is decoded into.
    fn visit_ran_at_once(
        &self,
        with_grants: bool,
        pushed: &mut Event,
        visit: &mut impl FnMut(u64, Logged<'_>),
    ) {
        let run = self.run;
        let record = &run.records[self.record];
        let (vars_at, n_vars) = self.decode_push(record, pushed);
        // The end's time and payload follow the accesses and, when some were granted at
        // once, their bits.
        let n_bits = match record.grants().0 {
            0 => 0,
            _ => n_vars.div_ceil(64),
        };
        let end = &run.words[vars_at + n_vars + n_bits..][..2];
        let (state, message) = end_of(run, end[1]);
        let ran = RanAtOnce {
            op: OpId(record.subject),
            push: pushed,
            end_ns: end[0],
            state,
            message,
            with_grants,
        };
        visit(self.seq, Logged::RanAtOnce(ran));
    }

    /// Decodes its next event and lends it to `visit`; `pushed` is the room a push is decoded
    /// into.
    fn visit(&self, pushed: &mut Event, visit: &mut impl FnMut(u64, Logged<'_>)) {
        let run = self.run;
        let record = &run.records[self.record];
        let base = run.segments[self.segment].1;
        let word = |offset: u64| run.words[offset.wrapping_add(base) as usize];
        let (time_ns, op) = (record.time_ns, OpId(record.subject));
        let kind = match record.kind() {
            KIND_PUSHED => {
                let offset = record.payload & 0xffff_ffff;
                let counts = word(offset + 2);
                let (n_reads, n_writes) = (counts >> 32, counts & 0xffff_ffff);
                let vars_at = offset.wrapping_add(base) as usize + 3;
                let vars = &run.words[vars_at..][..(n_reads + n_writes) as usize];
                let k = self.seq - record.seq();
                if k == 0 {
                    self.decode_push(record, pushed);
                    return visit(self.seq, Logged::Event(pushed));
                }
                // The k-th event after the push: a grant, in access order, the readiness, the
                // start at once, or the end at once (the last). The grants' bits follow the
                // accesses only when some were granted; the end's time and payload follow them.
                let n_bits = match record.grants().0 {
                    0 => 0,
                    _ => vars.len().div_ceil(64),
                };
                let ends_at = self.seq == record.last_seq() && record.ends_at_once();
                if ends_at {
                    let end = &run.words[vars_at + vars.len() + n_bits..][..2];
                    return visit(
                        self.seq,
                        Logged::Event(&Event {
                            time_ns: end[0],
                            kind: finish(run, op, end[1]),
                        }),
                    );
                }
                let started_at = record.last_seq() - u64::from(record.ends_at_once());
                if k <= record.grants().0 {
                    let bits = &run.words[vars_at + vars.len()..][..n_bits];
                    let mut granted = (0..vars.len()).filter(|index| is_set(bits, *index));
                    let index = granted.nth(k as usize - 1).expect("the k-th grant's bit");
                    EventKind::Granted {
                        op,
                        var: VarId(vars[index]),
                    }
                } else if record.starts_at_once() && self.seq == started_at {
                    EventKind::Started {
                        op,
                        worker: crate::CALLER_WORKER,
                    }
                } else {
                    EventKind::Ready { op }
                }
            }
            KIND_VAR_CREATED => EventKind::VarCreated {
                var: VarId(record.subject),
                name: run.strings[record.payload as usize].clone(),
            },
            KIND_VAR_DELETED => EventKind::VarDeleted {
                var: VarId(record.subject),
            },
            // A grant, or the readiness it caused (its record's second event).
            KIND_GRANTED if self.seq == record.seq() => EventKind::Granted {
                op,
                var: VarId(record.payload & !GRANT_READY),
            },
            KIND_GRANTED => EventKind::Ready { op },
            KIND_READY => EventKind::Ready { op },
            KIND_CANCELLED => EventKind::Cancelled { op },
            KIND_STARTED => EventKind::Started {
                op,
                worker: record.payload as u32,
            },
            KIND_FINISHED => finish(run, op, record.payload),
            _ => EventKind::DeviceSpan {
                op,
                lane: run.strings[word(record.payload) as usize].clone(),
                start_ns: word(record.payload + 1),
                end_ns: word(record.payload + 2),
            },
        };
        visit(self.seq, Logged::Event(&Event { time_ns, kind }));
    }

    /// Hands out its next event, or passes it over, as `reading` says (a whole op that ran at
    /// once, for a reading of whole ops), and moves past it; returns how many numbers it went
    /// past.
    #[inline]
    fn step(
        &mut self,
        reading: Reading,
        pushed: &mut Event,
        visit: &mut impl FnMut(u64, Logged<'_>),
    ) -> u64 {
        if reading.whole_ops && self.at_ran_at_once(reading.grants) {
            self.visit_ran_at_once(reading.grants, pushed, visit);
            // A record's events are numbered one after another: no other run holds a number
            // between them.
            let n = self.last - self.seq + 1;
            self.seq = self.last;
            self.advance();
            return n;
        }
        if reading.grants || !self.passes_over() {
            self.visit(pushed, visit);
        }
        self.advance();
        1
    }
}

/// The end of `op` kept as `payload` (its state, and its message's string number plus one, or
/// 0), a finish record's or the end of a push that ended at once.
fn finish(run: &Run, op: OpId, payload: u64) -> EventKind {
    let (state, message) = end_of(run, payload);
    EventKind::Finished {
        op,
        state,
        message: message.map(str::to_owned),
    }
}

/// The state and message of an end kept as `payload` (see [`finish`]).
fn end_of(run: &Run, payload: u64) -> (OpState, Option<&str>) {
    let message = match payload >> 8 {
        0 => None,
        number => Some(&*run.strings[number as usize - 1]),
    };
    (STATES[(payload & 0xff) as usize], message)
}

/// Makes `pushed` the push of `op` at `time_ns` with `label` and its accesses, reusing its
/// vectors, and its label when it is the same string (no reference count touched).
fn fill_push(
    pushed: &mut Event,
    time_ns: u64,
    op: OpId,
    label: &Arc<str>,
    (read_vars, write_vars): (&[u64], &[u64]),
) {
    pushed.time_ns = time_ns;
    if !matches!(pushed.kind, EventKind::Pushed { .. }) {
        pushed.kind = EventKind::Pushed {
            op,
            label: label.clone(),
            line: 0,
            reads: Vec::new(),
            writes: Vec::new(),
            device: crate::Device::Cpu,
            priority: 0,
        };
    }
    if let EventKind::Pushed {
        op: own_op,
        label: own_label,
        reads,
        writes,
        ..
    } = &mut pushed.kind
    {
        *own_op = op;
        if !Arc::ptr_eq(own_label, label) {
            own_label.clone_from(label);
        }
        reads.clear();
        reads.extend(read_vars.iter().map(|var| VarId(*var)));
        writes.clear();
        writes.extend(write_vars.iter().map(|var| VarId(*var)));
    }
}

/// The room a reader decodes a push into, kept from one read to the next.
pub(super) fn push_room() -> Event {
    Event {
        time_ns: 0,
        kind: EventKind::Ready { op: OpId(0) },
    }
}

/// Merges runs, each in increasing number order, handing each event with its number to
/// `visit` in number order: with `Some(from)`, the consecutive numbers from `from` on, up to
/// the first missing one; with `None`, all of them. Returns how many numbers it went past. Each
/// event is decoded when its turn comes (a push into `pushed`), from the run that holds the next
/// number (most often the same run as the event before); `reading` says which are handed out,
/// and whether an op that ran at once comes whole (numbered by its first event).
pub(super) fn merge(
    runs: &[Run],
    from: Option<u64>,
    reading: Reading,
    pushed: &mut Event,
    mut visit: impl FnMut(u64, Logged<'_>),
) -> usize {
    let mut cursors: Vec<Cursor<'_>> = runs
        .iter()
        .filter(|run| !run.is_empty())
        .map(Cursor::new)
        .collect();
    if let ([cursor], Some(from)) = (&mut cursors[..], from) {
        // One run (every event from one thread, as on the naive engine): its events in order
        // up to the first gap, without looking for the run that holds each number.
        let mut n = 0;
        while cursor.head() == Some(from + n) {
            n += cursor.step(reading, pushed, &mut visit);
        }
        return n as usize;
    }
    let mut n = 0;
    let mut current = 0;
    let mut expected = from;
    loop {
        let holds = |cursor: &Cursor<'_>| expected.is_some() && cursor.head() == expected;
        if !cursors.get(current).is_some_and(holds) {
            match cursors.iter().position(holds) {
                Some(found) => current = found,
                // A gap: the end for a reader, the next number present for a whole copy.
                None if from.is_some() => break,
                None => {
                    let Some((_, found)) = cursors
                        .iter()
                        .enumerate()
                        .filter_map(|(index, cursor)| Some((cursor.head()?, index)))
                        .min()
                    else {
                        break;
                    };
                    current = found;
                }
            }
        }
        let cursor = &mut cursors[current];
        let seq = cursor.seq;
        let went = cursor.step(reading, pushed, &mut visit);
        n += went as usize;
        expected = Some(seq + went);
    }
    n
}
