//! The `depEvents` part of a Chrome trace: the engine's event log, transcribed element by
//! element into a spool that [`super::JsonTrace`] copies to the end of its document (layout:
//! see [`super`]). A writer of its own, so that the transcription can run on a thread of its
//! own, reading the log beside the thread that folds it.

use std::io::{self, Write};
use std::sync::Arc;

use dep_engine::{Device, Event, EventKind, OpId, OpState, RanAtOnce, VarId};
use rustc_hash::FxHashMap as HashMap;

use super::{hand_over, N_STATES};
use crate::bookkeeping::{Bookkeeping, Filtered};
use crate::json_line::{JsonLine, LastNumber};

/// The most strings a [`DepEventsWriter`] remembers as declared.
const MAX_STRINGS: usize = 4096;

/// Writes the event log's elements (`[time, kind, ...]`, each string declared once) to a spool,
/// in the order given, as the views see them: without the interpreter's bookkeeping. The first
/// write error stops the writing; [`DepEventsWriter::finish`] returns it.
pub struct DepEventsWriter<S: Write> {
    spool: io::BufWriter<S>,
    /// The filter that leaves the bookkeeping out, for a writer that reads the log itself
    /// ([`DepEventsWriter::reading_the_log`]); `None` when a fold filtered the events.
    bookkeeping: Option<Bookkeeping>,
    /// How many elements were written.
    n_events: usize,
    /// Strings declared so far, by their number: [`MAX_STRINGS`] at most, then it starts
    /// again (an observed loop's ops may each have a label of their own), a string met again
    /// declared again under a new number.
    strings: HashMap<Arc<str>, usize>,
    /// How many strings were declared: the next one's number.
    n_strings: usize,
    /// The numbers of strings met as an `Arc` (a label, pushed again and again), by the
    /// address of that `Arc`, which the entry keeps alive so no other string can take it.
    strings_by_address: HashMap<usize, (Arc<str>, usize)>,
    /// The string number of each device's name (as `Display` writes it).
    devices: HashMap<Device, usize>,
    /// Each state's string number once declared.
    states: [Option<usize>; N_STATES],
    /// Elements written but not yet handed to the spool, which gets them in large pieces.
    pending: JsonLine,
    /// The last time and op id written: an op's push, grants and readiness share both, its
    /// start and finish its id.
    numbers: Box<(LastNumber, LastNumber)>,
    /// The op whose elements may yet be written again as one `"o"`.
    candidate: Candidate,
    error: Option<io::Error>,
}

/// An op whose elements so far are those of an op run at once (its push, then a grant of each
/// access in order, its readiness and its start on the pushing thread, all at its push's time):
/// if its end comes next, they are written again as one `"o"`, which stands for the same
/// events. So an op is one element whether it came whole from the log
/// ([`DepEventsWriter::ran_at_once`]) or event by event, and a trace written again from its
/// events is the same, byte for byte. While one is open, nothing pending goes to the spool.
struct Candidate {
    open: bool,
    op: OpId,
    time_ns: u64,
    /// Where its push's element starts among the pending bytes, and how many elements were
    /// written before it.
    at: usize,
    n_before: usize,
    /// Its label's and device's string numbers.
    strings: (usize, usize),
    line: u32,
    priority: i32,
    reads: Vec<VarId>,
    writes: Vec<VarId>,
    /// How many of its events after its push came so far.
    seen: usize,
}

impl Default for Candidate {
    fn default() -> Candidate {
        Candidate {
            open: false,
            op: OpId(0),
            time_ns: 0,
            at: 0,
            n_before: 0,
            strings: (0, 0),
            line: 0,
            priority: 0,
            reads: Vec::new(),
            writes: Vec::new(),
            seen: 0,
        }
    }
}

/// What an event does to an open [`Candidate`].
enum Next {
    /// It is the next of its events: the op may still be one element.
    Continues,
    /// It is its end: the op is one element.
    Ends,
    /// Anything else: the op's elements stay as they are.
    Breaks,
}

impl Candidate {
    /// What `event` does to it, counted when it continues it.
    fn next(&mut self, event: &Event) -> Next {
        let n_accesses = self.reads.len() + self.writes.len();
        let at_push = event.time_ns == self.time_ns;
        let continues = match &event.kind {
            EventKind::Granted { op, var } if *op == self.op && at_push => {
                let access = self.reads.iter().chain(&self.writes).nth(self.seen);
                self.seen < n_accesses && access == Some(var)
            }
            EventKind::Ready { op } if *op == self.op && at_push => self.seen == n_accesses,
            EventKind::Started { op, worker } if *op == self.op && at_push => {
                self.seen == n_accesses + 1 && *worker == dep_engine::CALLER_WORKER
            }
            EventKind::Finished { op, .. } if *op == self.op && self.seen == n_accesses + 2 => {
                return Next::Ends;
            }
            _ => false,
        };
        if continues {
            self.seen += 1;
            Next::Continues
        } else {
            Next::Breaks
        }
    }

    fn head(&self) -> PushHead<'_> {
        PushHead {
            time_ns: self.time_ns,
            op: self.op,
            line: self.line,
            accesses: [&self.reads, &self.writes],
            priority: self.priority,
        }
    }
}

impl<S: Write> DepEventsWriter<S> {
    /// A writer to `spool` of the events a [`crate::fold::RunFold`] hands its trace (the
    /// bookkeeping already left out).
    pub fn new(spool: S) -> DepEventsWriter<S> {
        DepEventsWriter::with(spool, None)
    }

    /// A writer to `spool` of the events of the log as it holds them: it leaves out the
    /// bookkeeping itself, as a fold would.
    pub fn reading_the_log(spool: S) -> DepEventsWriter<S> {
        DepEventsWriter::with(spool, Some(Bookkeeping::default()))
    }

    fn with(spool: S, bookkeeping: Option<Bookkeeping>) -> DepEventsWriter<S> {
        DepEventsWriter {
            spool: io::BufWriter::new(spool),
            bookkeeping,
            n_events: 0,
            strings: HashMap::default(),
            n_strings: 0,
            strings_by_address: HashMap::default(),
            devices: HashMap::default(),
            states: [None; N_STATES],
            pending: JsonLine::default(),
            numbers: Box::default(),
            candidate: Candidate::default(),
            error: None,
        }
    }

    /// Writes the elements of one event of the log (its strings' declarations, then itself),
    /// unless an earlier write failed.
    pub fn event(&mut self, event: &Event) {
        if self.error.is_some() {
            return;
        }
        let trimmed;
        let event = match self.bookkeeping.as_mut().map(|filter| filter.filter(event)) {
            Some(Filtered::Hidden) => return,
            None | Some(Filtered::Shown) => event,
            Some(Filtered::Trimmed(kept)) => {
                trimmed = kept;
                &trimmed
            }
        };
        if let Err(error) = self.dep_event(event) {
            self.error = Some(error);
        }
    }

    /// Writes an op that ran at once (see [`dep_engine::RanAtOnce`]), unless an earlier write
    /// failed: read with its grants, as one element (`"o"`, see [`super`]); read without, as
    /// its events.
    pub fn ran_at_once(&mut self, ran: &RanAtOnce<'_>) {
        if self.error.is_some() {
            return;
        }
        if !ran.with_grants {
            for event in &ran.events() {
                self.event(event);
            }
            return;
        }
        let trimmed;
        let filtered = self
            .bookkeeping
            .as_mut()
            .map(|filter| filter.filter_ran_at_once(ran));
        let push = match filtered {
            Some(Filtered::Hidden) => return,
            None | Some(Filtered::Shown) => ran.push,
            Some(Filtered::Trimmed(kept)) => {
                trimmed = kept;
                &trimmed
            }
        };
        let EventKind::Pushed {
            label,
            line,
            reads,
            writes,
            device,
            priority,
            ..
        } = &push.kind
        else {
            return self.event(push);
        };
        let head = PushHead {
            time_ns: push.time_ns,
            op: ran.op,
            line: *line,
            accesses: [reads, writes],
            priority: *priority,
        };
        let result = self.close_candidate().and_then(|()| {
            let strings = self.push_strings(label, *device)?;
            self.dep_ran_at_once(&head, strings, (ran.end_ns, ran.state, ran.message))
        });
        if let Err(error) = result {
            self.error = Some(error);
        }
    }

    /// Writes what is pending; returns the spool, or the first write error.
    pub fn finish(mut self) -> io::Result<S> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        self.spool.write_all(self.pending.bytes())?;
        self.spool
            .into_inner()
            .map_err(io::IntoInnerError::into_error)
    }

    /// The number of a string met as an `Arc`: found by its address when met before.
    fn arc_string(&mut self, text: &Arc<str>) -> io::Result<usize> {
        let address = Arc::as_ptr(text) as *const u8 as usize;
        if let Some((_, number)) = self.strings_by_address.get(&address) {
            return Ok(*number);
        }
        let number = self.string(text)?;
        if self.strings_by_address.len() >= MAX_STRINGS {
            // Many `Arc`s of one text (or of texts of their own) would fill it.
            self.strings_by_address.clear();
        }
        self.strings_by_address
            .insert(address, (text.clone(), number));
        Ok(number)
    }

    /// The number of a device's name.
    fn device_string(&mut self, device: Device) -> io::Result<usize> {
        if let Some(number) = self.devices.get(&device) {
            return Ok(*number);
        }
        let number = self.string(&device.to_string())?;
        self.devices.insert(device, number);
        Ok(number)
    }

    /// The number of a state's name.
    fn state_string(&mut self, state: OpState) -> io::Result<usize> {
        if let Some(number) = self.states[state as usize] {
            return Ok(number);
        }
        let number = self.string(state.name())?;
        self.states[state as usize] = Some(number);
        Ok(number)
    }

    /// The number of `text` among the declared strings, declaring it first if new.
    fn string(&mut self, text: &str) -> io::Result<usize> {
        if let Some(number) = self.strings.get(text) {
            return Ok(*number);
        }
        if self.strings.len() >= MAX_STRINGS {
            self.strings.clear();
            self.strings_by_address.clear();
        }
        let number = self.n_strings;
        self.n_strings += 1;
        self.strings.insert(Arc::from(text), number);
        self.dep_line(|line| {
            line.string(text);
        })?;
        Ok(number)
    }

    /// Writes one `depEvents` element, built by `build` after what is pending.
    fn dep_line(&mut self, build: impl FnOnce(&mut JsonLine)) -> io::Result<()> {
        if self.n_events > 0 {
            self.pending.raw(",");
        }
        self.n_events += 1;
        build(&mut self.pending);
        if self.candidate.open {
            return Ok(());
        }
        hand_over(&mut self.pending, &mut self.spool)
    }

    /// Leaves the open candidate's elements as they are, if one is open.
    fn close_candidate(&mut self) -> io::Result<()> {
        if !self.candidate.open {
            return Ok(());
        }
        self.candidate.open = false;
        hand_over(&mut self.pending, &mut self.spool)
    }

    /// The string numbers of a push's label and device, declared first if new.
    fn push_strings(&mut self, label: &Arc<str>, device: Device) -> io::Result<(usize, usize)> {
        Ok((self.arc_string(label)?, self.device_string(device)?))
    }

    /// Writes an op that ran at once, every access granted at its push, as one element:
    /// `[time, "o", op, label, line, [reads], [writes], device, priority, end time, state,
    /// message?]`, after declaring the strings its end names; `strings` are its label's and
    /// device's string numbers.
    fn dep_ran_at_once(
        &mut self,
        head: &PushHead<'_>,
        strings: (usize, usize),
        (end_ns, state, message): (u64, OpState, Option<&str>),
    ) -> io::Result<()> {
        let state = self.state_string(state)?;
        let message = match message {
            Some(message) => Some(self.string(message)?),
            None => None,
        };
        let mut last = std::mem::take(&mut *self.numbers);
        let result = self.dep_line(|line| {
            head.write("o", strings, line, (&mut last.0, &mut last.1));
            line.raw(",").int(end_ns).raw(",").int(state);
            if let Some(message) = message {
                line.raw(",").int(message);
            }
            line.raw("]");
        });
        *self.numbers = last;
        result
    }

    /// Writes the open candidate again as one element, its end being `state` and `message`
    /// at `end_ns`: its elements so far are taken back.
    fn candidate_whole(
        &mut self,
        end_ns: u64,
        state: OpState,
        message: Option<&str>,
    ) -> io::Result<()> {
        let candidate = std::mem::take(&mut self.candidate);
        self.pending.truncate(candidate.at);
        self.n_events = candidate.n_before;
        let result = self.dep_ran_at_once(
            &candidate.head(),
            candidate.strings,
            (end_ns, state, message),
        );
        // Its room is kept for the next.
        self.candidate = Candidate {
            open: false,
            ..candidate
        };
        result
    }

    /// Writes one event of the log, after declaring the strings it names (a declaration is an
    /// element of its own); the end of an op whose elements are those of an op run at once
    /// writes them again as one.
    fn dep_event(&mut self, event: &Event) -> io::Result<()> {
        if self.candidate.open {
            match (self.candidate.next(event), &event.kind) {
                (Next::Continues, _) => {}
                (Next::Ends, EventKind::Finished { state, message, .. }) => {
                    return self.candidate_whole(event.time_ns, *state, message.as_deref());
                }
                (Next::Ends | Next::Breaks, _) => self.close_candidate()?,
            }
        }
        let mut last = std::mem::take(&mut *self.numbers);
        let result = self.dep_event_after(event, &mut last);
        *self.numbers = last;
        result
    }

    /// [`DepEventsWriter::dep_event`], with the last time and op id written.
    fn dep_event_after(
        &mut self,
        event: &Event,
        (last_time, last_op): &mut (LastNumber, LastNumber),
    ) -> io::Result<()> {
        let time = event.time_ns;
        let mut op_event = |line: &mut JsonLine, kind: &str, op: OpId| {
            line.raw("[")
                .int_again(time, last_time)
                .raw(",\"")
                .raw(kind)
                .raw("\",")
                .int_again(op.0, last_op);
        };
        match &event.kind {
            EventKind::Pushed {
                op,
                label,
                line,
                reads,
                writes,
                device,
                priority,
            } => {
                let head = PushHead {
                    time_ns: time,
                    op: *op,
                    line: *line,
                    accesses: [reads, writes],
                    priority: *priority,
                };
                let strings = self.push_strings(label, *device)?;
                // It may be an op run at once: its elements are held until that is known.
                let candidate = &mut self.candidate;
                candidate.open = true;
                candidate.op = *op;
                candidate.time_ns = time;
                candidate.at = self.pending.bytes().len();
                candidate.n_before = self.n_events;
                candidate.strings = strings;
                candidate.line = *line;
                candidate.priority = *priority;
                candidate.reads.clone_from(reads);
                candidate.writes.clone_from(writes);
                candidate.seen = 0;
                self.dep_line(|line| {
                    head.write("p", strings, line, (last_time, last_op));
                    line.raw("]");
                })
            }
            EventKind::Granted { op, var } => self.dep_line(|line| {
                op_event(line, "g", *op);
                line.raw(",").int(var.0).raw("]");
            }),
            EventKind::Ready { op } => self.dep_line(|line| {
                op_event(line, "r", *op);
                line.raw("]");
            }),
            EventKind::Cancelled { op } => self.dep_line(|line| {
                op_event(line, "c", *op);
                line.raw("]");
            }),
            EventKind::Started { op, worker } => self.dep_line(|line| {
                op_event(line, "s", *op);
                line.raw(",").int(*worker).raw("]");
            }),
            EventKind::Finished { op, state, message } => {
                let state = self.state_string(*state)?;
                let message = match message {
                    Some(message) => Some(self.string(message)?),
                    None => None,
                };
                self.dep_line(|line| {
                    op_event(line, "f", *op);
                    line.raw(",").int(state);
                    if let Some(message) = message {
                        line.raw(",").int(message);
                    }
                    line.raw("]");
                })
            }
            EventKind::VarCreated { var, name } => {
                let name = self.string(name)?;
                self.dep_line(|line| {
                    line.raw("[").int(time).raw(",\"v\",").int(var.0);
                    line.raw(",").int(name).raw("]");
                })
            }
            EventKind::VarDeleted { var } => self.dep_line(|line| {
                line.raw("[").int(time).raw(",\"x\",").int(var.0).raw("]");
            }),
            EventKind::DeviceSpan {
                op,
                lane,
                start_ns,
                end_ns,
            } => {
                let lane = self.string(lane)?;
                self.dep_line(|line| {
                    op_event(line, "d", *op);
                    line.raw(",").int(lane).raw(",").int(*start_ns);
                    line.raw(",").int(*end_ns).raw("]");
                })
            }
        }
    }
}

/// What a push's element (`"p"`) and an op run at once's (`"o"`) begin with.
struct PushHead<'a> {
    time_ns: u64,
    op: OpId,
    line: u32,
    /// Its reads, then its writes.
    accesses: [&'a [VarId]; 2],
    priority: i32,
}

impl PushHead<'_> {
    /// Writes `[time, "kind", op, label, line, [reads], [writes], device, priority` (no
    /// closing bracket), its label and device by their string numbers `strings`, with the last
    /// time and op id written.
    fn write(
        &self,
        kind: &str,
        (label, device): (usize, usize),
        line: &mut JsonLine,
        (last_time, last_op): (&mut LastNumber, &mut LastNumber),
    ) {
        line.raw("[")
            .int_again(self.time_ns, last_time)
            .raw(",\"")
            .raw(kind)
            .raw("\",")
            .int_again(self.op.0, last_op);
        line.raw(",").int(label).raw(",").int(self.line).raw(",");
        for (index, vars) in self.accesses.into_iter().enumerate() {
            if index > 0 {
                line.raw(",");
            }
            line.raw("[");
            for (position, var) in vars.iter().enumerate() {
                if position > 0 {
                    line.raw(",");
                }
                line.int(var.0);
            }
            line.raw("]");
        }
        line.raw(",").int(device).raw(",").int(self.priority);
    }
}
