//! The `depEvents` part of a Chrome trace: the engine's event log, transcribed element by
//! element into a spool that [`super::JsonTrace`] copies to the end of its document (layout:
//! see [`super`]). A writer of its own, so that the transcription can run on a thread of its
//! own, reading the log beside the thread that folds it.

use std::io::{self, Write};
use std::sync::Arc;

use dep_engine::{Device, Event, EventKind, OpId, OpState};
use rustc_hash::FxHashMap as HashMap;

use super::{hand_over, N_STATES};
use crate::bookkeeping::{Bookkeeping, Filtered};
use crate::json_line::{JsonLine, LastNumber};

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
    /// Strings declared so far, by their number.
    strings: HashMap<Arc<str>, usize>,
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
    error: Option<io::Error>,
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
            strings_by_address: HashMap::default(),
            devices: HashMap::default(),
            states: [None; N_STATES],
            pending: JsonLine::default(),
            numbers: Box::default(),
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
        let number = self.strings.len();
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
        hand_over(&mut self.pending, &mut self.spool)
    }

    /// Writes one event of the log, after declaring the strings it names (a declaration is an
    /// element of its own).
    fn dep_event(&mut self, event: &Event) -> io::Result<()> {
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
                line: source_line,
                reads,
                writes,
                device,
                priority,
            } => {
                let label = self.arc_string(label)?;
                let device = self.device_string(*device)?;
                self.dep_line(|line| {
                    op_event(line, "p", *op);
                    line.raw(",").int(label).raw(",").int(*source_line).raw(",");
                    for (index, vars) in [reads, writes].into_iter().enumerate() {
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
                    line.raw(",").int(device).raw(",").int(*priority).raw("]");
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
