//! Chrome trace JSON (the Trace Event Format), which Perfetto and `chrome://tracing` open,
//! written while a run goes ([`JsonTrace`], fed by a [`RunFold`]), and the way back from such a
//! file to a [`Replay`].
//!
//! - one `ph:"X"` slice per op that started, on one thread (`tid`) per worker, with the op's
//!   reads, writes, line and state in `args`;
//! - `ph:"M"` metadata naming the process and each worker's thread;
//! - one slice per op's device work (its GPU kernels) on a thread per device lane, numbered from
//!   10000, with a `launch` flow from the op's enqueue to it;
//! - one flow pair per dependency edge: `ph:"s"` at the producer's start, `ph:"f"` at the
//!   consumer's start, with the same `id` and `bp:"e"` so that both bind to the enclosing slice;
//! - the raw event log under the top-level key `depEvents` (trace viewers ignore unknown keys),
//!   so that `dep replay t.json` can step through the run. Its layout is this module's own (the
//!   engine's types are not `Serialize`, see STYLE.md): version 3 lists each event as an array,
//!   `[time, kind, ...]`, and every string once: a string element declares the next string
//!   number, and events name strings by number; an op that ran the moment it was pushed, every
//!   access granted, is one element, `[time, "o", op, label, line, [reads], [writes], device,
//!   priority, end time, state, message?]`, which stands for its push, a grant of each access,
//!   its readiness, its start on the pushing thread (worker 0) and its end; `[time, "c", op]` is
//!   a cancel that stopped an op before it started (an older reader, which knows no `"c"`,
//!   refuses the trace rather than show it wrongly). A trace of several ranks' runs merged
//!   ([`crate::ranks::chrome_trace`]) says how many under `ranks` (absent: one), which names
//!   each op's rank where it is read back ([`Replay::name_ranks`]). [`read_trace`] also
//!   reads version 2 (the same without `"o"`) and version 1, one object per event, as the HTML
//!   player still carries them (`event_to_json`).
//!
//! The trace is written as the events arrive: slices when their op finishes, flows when the
//! later op starts; `depEvents` go to a spool (a temporary file) appended at the end, so a run
//! of any length is never held whole, written by a [`DepEventsWriter`] that the trace feeds
//! ([`JsonTrace::new`]) or that reads the log itself, on a thread of its own
//! ([`JsonTrace::without_events`]). Times are microseconds since the engine started, with
//! nanosecond precision.

use std::cell::Cell;
use std::fmt;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::rc::Rc;
use std::sync::Arc;

use dep_engine::{Device, Event, EventKind, OpId, OpState, RanAtOnce, VarId};
use rustc_hash::FxHashMap as HashMap;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserializer;
use serde_json::{json, Map, Value};

use crate::error::{Error, ErrorKind};
use crate::fold::{
    DeviceSlice, Flow, FlowNameKey, KeptFlowName, NoTrace, OpSlice, RunFold, TraceLane, TraceOut,
};
use crate::json_line::{JsonLine, LastNumber};
use crate::kept_arguments::{KeptArguments, PerLabel};
use crate::last_events::{LastEvents, Prologue};
use crate::replay::Replay;
use crate::summary::Summary;

pub mod dep_events_writer;

pub use dep_events_writer::DepEventsWriter;

/// The version of the `depEvents` layout this module writes.
const DEP_EVENTS_VERSION: u64 = 3;
/// The version before ops run at once were written whole, which [`read_trace`] still reads.
const ONE_PER_EVENT_VERSION: u64 = 2;
/// The version of the one-object-per-event layout (the HTML player's).
const OBJECT_EVENTS_VERSION: u64 = 1;
/// The trace's one process id.
const PID: u64 = 1;
/// The thread id of the first device lane (workers count from 0).
pub(crate) const DEVICE_TID: u64 = 10_000;

/// The replay as a Chrome trace JSON document (the same bytes a run streams).
pub fn chrome_trace(replay: &Replay) -> String {
    let mut trace = JsonTrace::new(Vec::new(), io::Cursor::new(Vec::new()));
    let mut fold = RunFold::new();
    for event in replay.events() {
        fold.push(event, &mut trace);
    }
    fold.finish(replay.worker_names(), &mut trace);
    let bytes = trace.finish().expect("writing to memory cannot fail");
    String::from_utf8(bytes).expect("the trace is UTF-8")
}

/// A Chrome trace written while the run goes: a [`TraceOut`] for a [`RunFold`]. Trace events go
/// to `out` as they are known; `depEvents` to `spool` (a temporary file, or memory), copied to
/// the end of `out` by [`JsonTrace::finish`]. The first write error stops the writing; `finish`
/// returns it.
pub struct JsonTrace<W: Write, S: Read + Write + Seek> {
    out: W,
    /// The writer of `depEvents`, when this trace writes them as they come ([`JsonTrace::new`]);
    /// `None` when another writer does ([`JsonTrace::without_events`]).
    events: Option<DepEventsWriter<S>>,
    n_trace_events: usize,
    /// Each device's name, as `Display` writes it.
    device_names: HashMap<Device, Arc<str>>,
    /// The middle of a dependency's flow elements, from its name to its thread id key
    /// (`,"name":"x RAW","cat":"dependency","bp":"e","pid":1,"tid":`), by the address of the
    /// variable's name (the entry keeps that `Arc` alive) and the hazard.
    flow_middles: HashMap<FlowNameKey, KeptFlowName<Vec<u8>>>,
    /// The last arguments written for each op label (see [`KeptArguments`]).
    arguments: PerLabel<Option<KeptArguments>>,
    /// Trace events written but not yet handed to `out`, which gets them in large pieces.
    pending: JsonLine,
    workers: Vec<String>,
    /// Text kept from element to element, to write again.
    again: Box<Again>,
    error: Option<io::Error>,
}

/// What a [`JsonTrace`] keeps to write again without working it out again.
#[derive(Default)]
struct Again {
    /// The last time written at each end of a flow (an op's two dependencies end at its start).
    flow_times: [LastNumber; 2],
    /// The last labels written as a slice's name, escaped, in a slot chosen by their `Arc`'s
    /// address (a loop's statements name their slices with the same few labels).
    labels: [EscapedLabel; N_LABELS],
}

/// A label (the `Arc` it came in) and its text, quoted and escaped.
type EscapedLabel = (Option<Arc<str>>, Vec<u8>);

/// How many escaped labels [`Again::labels`] holds.
const N_LABELS: usize = 16;

/// How many op states there are.
const N_STATES: usize = 7;
/// How many bytes of elements are gathered before they are handed to the writer at once.
const PIECE: usize = 64 * 1024;
/// How many flow names [`JsonTrace::flow_middles`] holds before it starts again (variables
/// without a name get a new one for each flow).
const MAX_FLOW_MIDDLES: usize = 4096;

impl<W: Write, S: Read + Write + Seek> JsonTrace<W, S> {
    /// A trace that writes to `out`, spooling the event log it is given
    /// ([`TraceOut::event`]) to `spool`; [`JsonTrace::finish`] closes it.
    pub fn new(out: W, spool: S) -> JsonTrace<W, S> {
        JsonTrace::starting(out, Some(DepEventsWriter::new(spool)))
    }

    /// A trace that writes to `out` and leaves the event log to a [`DepEventsWriter`] of the
    /// caller's, which reads the same events in the same order (on a thread of its own);
    /// [`JsonTrace::finish_with`] closes it with that writer's spool.
    pub fn without_events(out: W) -> JsonTrace<W, S> {
        JsonTrace::starting(out, None)
    }

    /// Whether the trace writes the event log it is given ([`JsonTrace::new`]).
    pub fn writes_events(&self) -> bool {
        self.events.is_some()
    }

    fn starting(out: W, events: Option<DepEventsWriter<S>>) -> JsonTrace<W, S> {
        let mut trace = JsonTrace {
            out,
            events,
            n_trace_events: 0,
            device_names: HashMap::default(),
            flow_middles: HashMap::default(),
            arguments: PerLabel::default(),
            pending: JsonLine::default(),
            workers: Vec::new(),
            again: Box::default(),
            error: None,
        };
        trace.attempt(|trace| {
            trace.out.write_all(b"{\"traceEvents\":[")?;
            trace.trace_event(format_args!(
                "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{PID},\"tid\":0,\"args\":{{\"name\":\"dep engine\"}}}}"
            ))
        });
        trace
    }

    /// Closes the document: the spooled event log goes after the trace events. Returns `out`,
    /// or the first write error.
    pub fn finish(mut self) -> io::Result<W> {
        let spool = match self.events.take() {
            Some(events) => events.finish(),
            None => Err(io::Error::other(
                "the trace's event log is written apart: close it with `finish_with`",
            )),
        };
        self.finish_with(spool)
    }

    /// [`JsonTrace::finish`] of a trace [`JsonTrace::without_events`], with what its
    /// [`DepEventsWriter`] returned.
    pub fn finish_with(mut self, spool: io::Result<S>) -> io::Result<W> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        let mut spool = spool?;
        self.out.write_all(self.pending.bytes())?;
        self.out
            .write_all(b"],\"displayTimeUnit\":\"ns\",\"depEvents\":{\"version\":")?;
        write!(self.out, "{DEP_EVENTS_VERSION},\"workers\":")?;
        serde_json::to_writer(&mut self.out, &self.workers)?;
        self.out.write_all(b",\"events\":[")?;
        spool.seek(SeekFrom::Start(0))?;
        copy_in_pieces(&mut spool, &mut self.out)?;
        self.out.write_all(b"]}}\n")?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Runs one write unless an earlier one failed; keeps the first error.
    fn attempt(&mut self, write: impl FnOnce(&mut Self) -> io::Result<()>) {
        if self.error.is_none() {
            if let Err(error) = write(self) {
                self.error = Some(error);
            }
        }
    }

    fn trace_event(&mut self, element: fmt::Arguments<'_>) -> io::Result<()> {
        self.trace_line(|line| line.fmt(element))
    }

    /// Writes a trace event, built by `build` after what is pending.
    fn trace_line(&mut self, build: impl FnOnce(&mut JsonLine)) -> io::Result<()> {
        element(
            &mut self.pending,
            &mut self.n_trace_events,
            &mut self.out,
            build,
        )
    }

    /// A flow pair (an arrow in trace viewers) from `(thread, time)` to `(thread, time)`, each
    /// end bound to the slice that encloses it. `id` is JSON: a number, or a quoted string.
    fn flow_pair(
        &mut self,
        id: &str,
        name: &str,
        category: &str,
        from: (u64, u64),
        to: (u64, u64),
    ) -> io::Result<()> {
        let mut middle = JsonLine::default();
        flow_middle(&mut middle, name, category);
        flow_pair(
            (&mut self.pending, &mut self.n_trace_events, &mut self.out),
            &mut self.again.flow_times,
            id,
            middle.bytes(),
            from,
            to,
        )
    }

    /// A slice's name, `label` quoted and escaped, and the slot of [`Again::labels`] to
    /// give its room back to.
    fn escaped_label(&mut self, label: &Arc<str>) -> (usize, Vec<u8>) {
        let slot = (Arc::as_ptr(label) as *const u8 as usize >> 4) % N_LABELS;
        let (kept, escaped) = &mut self.again.labels[slot];
        if !kept.as_ref().is_some_and(|kept| Arc::ptr_eq(kept, label)) {
            escaped.clear();
            serde_json::to_writer(&mut *escaped, &**label).expect("a string always serializes");
            *kept = Some(label.clone());
        }
        (slot, std::mem::take(escaped))
    }

    /// A slice's arguments from `reads` to `priority`, as the slice's element writes them:
    /// `,"reads":["x"],"writes":["y"],"state":"done","device":"cpu","priority":0`.
    fn encode_arguments(&mut self, slice: &OpSlice<'_>) -> Vec<u8> {
        let device = self
            .device_names
            .entry(slice.device)
            .or_insert_with(|| Arc::from(slice.device.to_string()));
        let names = |line: &mut JsonLine, names: &[&Arc<str>]| {
            line.raw("[");
            for (index, name) in names.iter().enumerate() {
                if index > 0 {
                    line.raw(",");
                }
                line.string(name);
            }
            line.raw("]");
        };
        let mut line = JsonLine::default();
        line.raw(",\"reads\":");
        names(&mut line, slice.reads);
        line.raw(",\"writes\":");
        names(&mut line, slice.writes);
        line.raw(",\"state\":\"")
            .raw(slice.state.name())
            .raw("\",\"device\":\"")
            .raw(device)
            .raw("\",\"priority\":")
            .int(slice.priority);
        line.bytes().to_vec()
    }
}

impl<W: Write, S: Read + Write + Seek> TraceOut for JsonTrace<W, S> {
    fn event(&mut self, event: &Event) {
        if let Some(events) = &mut self.events {
            events.event(event);
        }
    }

    fn ran_at_once(&mut self, ran: &RanAtOnce<'_>) {
        if let Some(events) = &mut self.events {
            events.ran_at_once(ran);
        }
    }

    fn slice(&mut self, slice: &OpSlice<'_>) {
        self.attempt(|trace| {
            let (label, _) = trace.arguments.entry(slice.label, || None);
            let mut arguments = trace.arguments.get_mut(label).take();
            if !arguments
                .as_ref()
                .is_some_and(|kept| kept.are_those_of(slice))
            {
                arguments = Some(KeptArguments::of(slice, trace.encode_arguments(slice)));
            }
            let kept = arguments.as_ref().expect("made above");
            let (slot, name) = trace.escaped_label(slice.label);
            let written = trace.trace_line(|line| {
                line.raw("{\"ph\":\"X\",\"name\":")
                    .bytes_raw(&name)
                    .raw(",\"cat\":\"op\",\"pid\":")
                    .int(PID)
                    .raw(",\"tid\":")
                    .int(slice.worker)
                    .raw(",\"ts\":")
                    .micros(slice.start_ns)
                    .raw(",\"dur\":")
                    .micros(slice.end_ns - slice.start_ns)
                    .raw(",\"args\":{\"op\":")
                    .int(slice.op.0)
                    .raw(",\"line\":")
                    .int(slice.line)
                    .bytes_raw(&kept.bytes);
                if let Some(message) = slice.message {
                    line.raw(",\"message\":").string(message);
                }
                line.raw("}}");
            });
            trace.again.labels[slot].1 = name;
            *trace.arguments.get_mut(label) = arguments;
            written
        });
    }

    fn flow(&mut self, flow: &Flow<'_>) {
        self.attempt(|trace| {
            let key = flow.name_key();
            if trace.flow_middles.len() >= MAX_FLOW_MIDDLES
                && !trace.flow_middles.contains_key(&key)
            {
                trace.flow_middles.clear();
            }
            let (_, middle) = trace.flow_middles.entry(key).or_insert_with(|| {
                let mut middle = JsonLine::default();
                flow_middle(&mut middle, &flow.name(), "dependency");
                (flow.name_parts(), middle.bytes().to_vec())
            });
            flow_pair(
                (
                    &mut trace.pending,
                    &mut trace.n_trace_events,
                    &mut trace.out,
                ),
                &mut trace.again.flow_times,
                itoa::Buffer::new().format(flow.id),
                middle,
                (u64::from(flow.from.0), flow.from.1),
                (u64::from(flow.to.0), flow.to.1),
            )
        });
    }

    fn device_slice(&mut self, slice: &DeviceSlice<'_>) {
        self.attempt(|trace| {
            let tid = DEVICE_TID + slice.lane as u64;
            trace.trace_event(format_args!(
                "{{\"ph\":\"X\",\"name\":{},\"cat\":\"device\",\"pid\":{PID},\"tid\":{tid},\"ts\":{},\"dur\":{},\"args\":{{\"op\":{},\"line\":{}}}}}",
                json_string(slice.label),
                Micros(slice.start_ns),
                Micros(slice.end_ns - slice.start_ns),
                slice.op.0,
                slice.line,
            ))?;
            // The launch: from the op's enqueue on its worker to its kernels on the device.
            if let Some((worker, enqueued)) = slice.launch {
                trace.flow_pair(
                    &json_string(&format!("launch {}", slice.op.0)),
                    "launch",
                    "launch",
                    (u64::from(worker), enqueued),
                    (tid, slice.start_ns),
                )?;
            }
            Ok(())
        });
    }

    fn end(&mut self, worker_names: &[String], lanes: &[TraceLane]) {
        self.workers = worker_names.to_vec();
        self.attempt(|trace| {
            let mut n_device_lanes = 0;
            for lane in lanes {
                let (tid, name) = match lane {
                    TraceLane::Worker(worker, name) => (u64::from(*worker), name.clone()),
                    TraceLane::Device(name) => {
                        n_device_lanes += 1;
                        (DEVICE_TID + n_device_lanes - 1, format!("dev:{name}"))
                    }
                };
                trace.trace_event(format_args!(
                    "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{PID},\"tid\":{tid},\"args\":{{\"name\":{}}}}}",
                    json_string(&name)
                ))?;
                trace.trace_event(format_args!(
                    "{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{PID},\"tid\":{tid},\"args\":{{\"sort_index\":{tid}}}}}"
                ))?;
            }
            Ok(())
        });
    }
}

/// Writes one element (after a comma unless it is the first, counted in `n_elements`), built by
/// `build` after what is pending.
fn element(
    pending: &mut JsonLine,
    n_elements: &mut usize,
    out: &mut impl Write,
    build: impl FnOnce(&mut JsonLine),
) -> io::Result<()> {
    if *n_elements > 0 {
        pending.raw(",");
    }
    *n_elements += 1;
    build(pending);
    hand_over(pending, out)
}

/// A flow pair from `(thread, time)` to `(thread, time)` (see [`JsonTrace::flow_pair`]) whose
/// elements have `middle` ([`flow_middle`]) between the id and the thread id, written as
/// [`element`]s.
fn flow_pair(
    (pending, n_elements, out): (&mut JsonLine, &mut usize, &mut impl Write),
    times: &mut [LastNumber; 2],
    id: &str,
    middle: &[u8],
    from: (u64, u64),
    to: (u64, u64),
) -> io::Result<()> {
    let phases = [
        ("{\"ph\":\"s\",\"id\":", from),
        ("{\"ph\":\"f\",\"id\":", to),
    ];
    for ((start, (tid, time)), last) in phases.into_iter().zip(times) {
        element(pending, n_elements, out, |line| {
            line.raw(start)
                .raw(id)
                .bytes_raw(middle)
                .int(tid)
                .raw(",\"ts\":")
                .micros_again(time, last)
                .raw("}");
        })?;
    }
    Ok(())
}

/// Hands `pending` to `to` once it holds a large piece (a `BufWriter` then writes it through
/// without copying it).
fn hand_over(pending: &mut JsonLine, to: &mut impl Write) -> io::Result<()> {
    if pending.bytes().len() >= PIECE {
        to.write_all(pending.bytes())?;
        pending.clear();
    }
    Ok(())
}

/// Copies everything `from` holds to `to` through one large buffer (where `io::copy` would
/// take 8 KiB at a time: a call each way per piece, for a spool of hundreds of megabytes).
fn copy_in_pieces(from: &mut impl Read, to: &mut impl Write) -> io::Result<()> {
    let mut piece = vec![0; 16 * PIECE];
    loop {
        match from.read(&mut piece) {
            Ok(0) => return Ok(()),
            Ok(n) => to.write_all(&piece[..n])?,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
}

/// The part of a flow element from its name to its thread id key:
/// `,"name":"x RAW","cat":"dependency","bp":"e","pid":1,"tid":`.
fn flow_middle(line: &mut JsonLine, name: &str, category: &str) {
    line.raw(",\"name\":")
        .string(name)
        .raw(",\"cat\":\"")
        .raw(category)
        .raw("\",\"bp\":\"e\",\"pid\":")
        .int(PID)
        .raw(",\"tid\":");
}

/// Nanoseconds written as microseconds, exactly: `1234567` as `1234.567`, `47000` as `47.0`.
struct Micros(u64);

impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, fraction) = (self.0 / 1_000, self.0 % 1_000);
        match fraction {
            0 => write!(f, "{whole}.0"),
            _ if fraction % 100 == 0 => write!(f, "{whole}.{}", fraction / 100),
            _ if fraction % 10 == 0 => write!(f, "{whole}.{:02}", fraction / 10),
            _ => write!(f, "{whole}.{fraction:03}"),
        }
    }
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string always serializes")
}

/// Reads a trace written by [`chrome_trace`] (or a run's `--trace`) back into a replay, from
/// its `depEvents`.
pub fn read_trace(json_text: &str) -> Result<Replay, Error> {
    let mut deserializer = serde_json::Deserializer::from_str(json_text);
    let mut events = Vec::new();
    let head = read_from(&mut deserializer, Room::default(), &mut events)?;
    Ok(head.replay_of(events))
}

/// Like [`read_trace`], from a reader of `length` bytes (a trace file), without holding its text:
/// the trace events are skipped as they are read, and the event list gets its room at once,
/// from the bytes left when it starts, instead of growing (a long run's list, copied at every
/// doubling, took a third more memory and most of the reading's time in fresh pages). A
/// `length` of 0 (not known) lets the list grow.
pub fn read_trace_from(reader: impl Read, length: u64) -> Result<Replay, Error> {
    let mut events = Vec::new();
    let head = read_file_into(reader, length, &mut events)?;
    Ok(head.replay_of(events))
}

/// The last `capacity` events of a trace file, as [`crate::LastEvents`] keeps them (after the
/// prologue that rebuilds the state where they begin), and the summary of the whole run, folded
/// as the events are read: a trace too long to hold whole is read in the memory of its last
/// events.
pub fn read_trace_last(
    reader: impl Read,
    capacity: usize,
) -> Result<(Replay, Prologue, Summary), Error> {
    let mut kept = LastRead {
        last: LastEvents::keeping(capacity),
        fold: RunFold::new(),
    };
    let head = read_file_into(reader, 0, &mut kept)?;
    let summary = kept.fold.finish(&head.workers, &mut NoTrace);
    let cut = kept.last.finish();
    Ok((head.replay_of(cut.events), cut.prologue, summary))
}

/// What `depEvents` says besides its events.
struct DepEventsHead {
    /// The workers' names, by index.
    workers: Vec<String>,
    /// How many ranks' runs its events merge (see [`crate::ranks::merge`]); 1 for one run.
    ranks: u64,
}

impl DepEventsHead {
    /// The replay of `events` with these workers, each op's place naming its rank when the
    /// events are several ranks'.
    fn replay_of(self, events: Vec<Event>) -> Replay {
        let mut replay = Replay::new(events, self.workers);
        replay.name_ranks(self.ranks);
        replay
    }
}

/// Where a trace's events go as they are decoded.
trait EventsInto {
    /// Room for about this many events, when that is known.
    fn reserve(&mut self, n_events: usize);
    /// The next event.
    fn push(&mut self, event: Event);
}

impl EventsInto for Vec<Event> {
    fn reserve(&mut self, n_events: usize) {
        // Room that the system refuses is not needed: the list then grows as it goes.
        let _ = self.try_reserve(n_events);
    }

    fn push(&mut self, event: Event) {
        Vec::push(self, event);
    }
}

/// The last events of a trace, and the summary of them all.
struct LastRead {
    last: LastEvents,
    fold: RunFold,
}

impl EventsInto for LastRead {
    fn reserve(&mut self, _: usize) {}

    fn push(&mut self, event: Event) {
        self.fold.push(&event, &mut NoTrace);
        self.last.push(event);
    }
}

/// Reads a trace file's events into `events`; returns what `depEvents` says besides.
fn read_file_into(
    reader: impl Read,
    length: u64,
    events: &mut dyn EventsInto,
) -> Result<DepEventsHead, Error> {
    let consumed = Rc::new(Cell::new(0));
    let counting = CountingReader {
        inner: reader,
        consumed: Rc::clone(&consumed),
    };
    let mut deserializer = serde_json::Deserializer::from_reader(io::BufReader::new(counting));
    read_from(
        &mut deserializer,
        Room {
            length,
            consumed: Some(consumed),
        },
        events,
    )
}

/// What tells the event list how much room to take: the document's length and how many of its
/// bytes were read so far (none: the list grows as it goes).
#[derive(Clone, Default)]
struct Room {
    length: u64,
    consumed: Option<Rc<Cell<u64>>>,
}

/// About the fewest bytes an element of `depEvents.events` takes in a real run's trace (a time
/// of seven digits or more, a kind, an op, the brackets and the comma; 28 on average in a long
/// loop's), so that the room taken is rarely too small: the pages of room never filled are
/// never touched. A list of shorter elements (a simulated run's small times) grows from there.
const MIN_EVENT_BYTES: u64 = 16;
/// The most events room is taken for at once, as large as the list would grow to anyway.
const MAX_ROOM: u64 = 1 << 24;

impl Room {
    /// Room for the events the bytes left can hold.
    fn events(&self) -> usize {
        let Some(consumed) = &self.consumed else {
            return 0;
        };
        let left = self.length.saturating_sub(consumed.get());
        (left / MIN_EVENT_BYTES).min(MAX_ROOM) as usize
    }
}

/// A reader that counts the bytes read through it.
struct CountingReader<R> {
    inner: R,
    consumed: Rc<Cell<u64>>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buffer)?;
        self.consumed.set(self.consumed.get() + n as u64);
        Ok(n)
    }
}

fn read_from<'de, R: serde_json::de::Read<'de>>(
    deserializer: &mut serde_json::Deserializer<R>,
    room: Room,
    events: &mut dyn EventsInto,
) -> Result<DepEventsHead, Error> {
    let found = deserializer
        .deserialize_map(TraceVisitor(room, events))
        .and_then(|found| deserializer.end().map(|()| found))
        .map_err(|error| match error.classify() {
            serde_json::error::Category::Data => bad(error.to_string()),
            _ => bad(format!("not JSON: {error}")),
        })?;
    found.ok_or_else(|| bad("no `depEvents` key: this trace was not written by dep"))
}

/// Finds `depEvents` in a trace document, skipping everything else; its events go to the
/// second field, the rest of what it says is the value.
struct TraceVisitor<'e>(Room, &'e mut dyn EventsInto);

impl<'de> Visitor<'de> for TraceVisitor<'_> {
    type Value = Option<DepEventsHead>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a trace object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let TraceVisitor(room, events) = self;
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "depEvents" && found.is_none() {
                found = Some(map.next_value_seed(DepEventsSeed(room.clone(), &mut *events))?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// The `depEvents` object: its version, workers, events, and how many ranks' runs they merge
/// (`ranks`, written only when there are several).
struct DepEventsSeed<'e>(Room, &'e mut dyn EventsInto);

impl<'de> DeserializeSeed<'de> for DepEventsSeed<'_> {
    type Value = DepEventsHead;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DepEventsSeed<'_> {
    type Value = DepEventsHead;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the `depEvents` object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let DepEventsSeed(room, events) = self;
        let (mut version, mut workers, mut read_events) = (None, None, false);
        let mut ranks = 1;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "version" => version = Some(map.next_value::<Value>()?),
                "ranks" => {
                    ranks = map
                        .next_value::<u64>()
                        .ok()
                        .filter(|ranks| *ranks >= 1)
                        .ok_or_else(|| {
                            de::Error::custom("`depEvents.ranks` is not a count of ranks")
                        })?;
                }
                "workers" => {
                    workers = Some(map.next_value::<Vec<String>>().map_err(|_| {
                        de::Error::custom("`depEvents.workers` is not a list of names")
                    })?);
                }
                "events" if !read_events => {
                    events.reserve(room.events());
                    map.next_value_seed(EventsSeed(&mut *events))?;
                    read_events = true;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let version = version.as_ref().and_then(Value::as_u64);
        let known = [
            OBJECT_EVENTS_VERSION,
            ONE_PER_EVENT_VERSION,
            DEP_EVENTS_VERSION,
        ];
        if !version.is_some_and(|version| known.contains(&version)) {
            return Err(de::Error::custom(format!(
                "`depEvents` has version {version:?}, expected {OBJECT_EVENTS_VERSION}, {ONE_PER_EVENT_VERSION} or {DEP_EVENTS_VERSION}"
            )));
        }
        let workers = workers.ok_or_else(|| de::Error::custom("`depEvents.workers` is missing"))?;
        if !read_events {
            return Err(de::Error::custom("`depEvents.events` is missing"));
        }
        Ok(DepEventsHead { workers, ranks })
    }
}

/// The event list, decoded one element at a time into its field: a string declares the next
/// string number, an array is an event or an op run at once (versions 2 and 3), an object an
/// event (version 1).
struct EventsSeed<'e>(&'e mut dyn EventsInto);

impl<'de> DeserializeSeed<'de> for EventsSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`depEvents.events`, a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut strings: Vec<Arc<str>> = Vec::new();
        let mut n_events = 0;
        while let Some(element) = seq.next_element::<Value>()? {
            let bad = |message| de::Error::custom(format!("event {n_events}: {message}"));
            match element {
                Value::String(text) => strings.push(Arc::from(text)),
                Value::Array(fields) if fields.get(1).and_then(Value::as_str) == Some("o") => {
                    let events = ran_at_once_from_fields(&fields, &strings).map_err(bad)?;
                    n_events += events.len();
                    events.into_iter().for_each(|event| self.0.push(event));
                }
                Value::Array(fields) => {
                    self.0
                        .push(event_from_fields(&fields, &strings).map_err(bad)?);
                    n_events += 1;
                }
                other => {
                    self.0.push(event_from_json(&other).map_err(bad)?);
                    n_events += 1;
                }
            }
        }
        Ok(())
    }
}

/// Decodes an op run at once (`[time, "o", op, label, line, [reads], [writes], device,
/// priority, end time, state, message?]`) into the events it stands for: its push (the
/// element's first nine fields, as a `"p"` has them), a grant of each access, its readiness,
/// its start on the pushing thread and its end.
fn ran_at_once_from_fields(fields: &[Value], strings: &[Arc<str>]) -> Result<Vec<Event>, String> {
    if fields.len() < 11 {
        return Err("an op run at once has too few fields".to_string());
    }
    let mut push_fields = fields[..9].to_vec();
    push_fields[1] = Value::from("p");
    let push = event_from_fields(&push_fields, strings)?;
    let EventKind::Pushed { op, .. } = &push.kind else {
        return Err("an op run at once without its push".to_string());
    };
    let message = match fields.get(11) {
        Some(_) => Some(declared_string(fields, 11, strings)?),
        None => None,
    };
    let ran = RanAtOnce {
        op: *op,
        push: &push,
        end_ns: whole_number(fields, 9)?,
        state: state_from_name(&declared_string(fields, 10, strings)?)?,
        message: message.as_deref(),
        with_grants: true,
    };
    Ok(ran.events())
}

/// Field `index` of an event's `fields`, a whole number.
fn whole_number(fields: &[Value], index: usize) -> Result<u64, String> {
    fields
        .get(index)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("field {index} is not a whole number"))
}

/// The string that field `index` of an event's `fields` names by number among `strings`.
fn declared_string(
    fields: &[Value],
    index: usize,
    strings: &[Arc<str>],
) -> Result<Arc<str>, String> {
    let number = whole_number(fields, index)?;
    strings
        .get(number as usize)
        .cloned()
        .ok_or_else(|| format!("field {index} names string {number}, not declared"))
}

/// Decodes an event of versions 2 and 3: `[time, kind, ...]`, strings by number.
fn event_from_fields(fields: &[Value], strings: &[Arc<str>]) -> Result<Event, String> {
    let number = |index: usize| whole_number(fields, index);
    let string = |index: usize| declared_string(fields, index, strings);
    let small = |index: usize| -> Result<u32, String> {
        u32::try_from(number(index)?).map_err(|_| format!("field {index} is too large"))
    };
    let ids = |index: usize| -> Result<Vec<VarId>, String> {
        fields
            .get(index)
            .and_then(Value::as_array)
            .and_then(|ids| ids.iter().map(|id| id.as_u64().map(VarId)).collect())
            .ok_or_else(|| format!("field {index} is not a list of variable ids"))
    };
    let kind = fields
        .get(1)
        .and_then(Value::as_str)
        .ok_or("field 1 is not an event kind")?;
    let kind = match kind {
        "v" => EventKind::VarCreated {
            var: VarId(number(2)?),
            name: string(3)?,
        },
        "x" => EventKind::VarDeleted {
            var: VarId(number(2)?),
        },
        "p" => EventKind::Pushed {
            op: OpId(number(2)?),
            label: string(3)?,
            line: small(4)?,
            reads: ids(5)?,
            writes: ids(6)?,
            device: string(7)?.parse::<Device>()?,
            priority: fields
                .get(8)
                .and_then(Value::as_i64)
                .and_then(|priority| i32::try_from(priority).ok())
                .ok_or("field 8 is not a priority")?,
        },
        "g" => EventKind::Granted {
            op: OpId(number(2)?),
            var: VarId(number(3)?),
        },
        "r" => EventKind::Ready {
            op: OpId(number(2)?),
        },
        "c" => EventKind::Cancelled {
            op: OpId(number(2)?),
        },
        "s" => EventKind::Started {
            op: OpId(number(2)?),
            worker: small(3)?,
        },
        "f" => EventKind::Finished {
            op: OpId(number(2)?),
            state: state_from_name(&string(3)?)?,
            message: match fields.get(4) {
                Some(_) => Some(string(4)?.to_string()),
                None => None,
            },
        },
        "d" => EventKind::DeviceSpan {
            op: OpId(number(2)?),
            lane: string(3)?,
            start_ns: number(4)?,
            end_ns: number(5)?,
        },
        other => return Err(format!("unknown event kind `{other}`")),
    };
    Ok(Event {
        time_ns: number(0)?,
        kind,
    })
}

fn bad(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::BadTrace, message)
}

/// One event in the one-object-per-event layout (version 1), which the HTML player reads.
pub(crate) fn event_to_json(event: &Event) -> Value {
    let ids = |vars: &[VarId]| vars.iter().map(|var| var.0).collect::<Vec<u64>>();
    let mut value = match &event.kind {
        EventKind::VarCreated { var, name } => {
            json!({"kind": "var_created", "var": var.0, "name": &**name})
        }
        EventKind::VarDeleted { var } => json!({"kind": "var_deleted", "var": var.0}),
        EventKind::Pushed {
            op,
            label,
            line,
            reads,
            writes,
            device,
            priority,
        } => json!({
            "kind": "pushed", "op": op.0, "label": &**label, "line": line,
            "reads": ids(reads), "writes": ids(writes),
            "device": device.to_string(), "priority": priority,
        }),
        EventKind::Granted { op, var } => json!({"kind": "granted", "op": op.0, "var": var.0}),
        EventKind::Ready { op } => json!({"kind": "ready", "op": op.0}),
        EventKind::Cancelled { op } => json!({"kind": "cancelled", "op": op.0}),
        EventKind::Started { op, worker } => {
            json!({"kind": "started", "op": op.0, "worker": worker})
        }
        EventKind::Finished { op, state, message } => {
            json!({"kind": "finished", "op": op.0, "state": state.name(), "message": message})
        }
        EventKind::DeviceSpan {
            op,
            lane,
            start_ns,
            end_ns,
        } => json!({
            "kind": "device_span", "op": op.0, "lane": &**lane,
            "start": start_ns, "end": end_ns,
        }),
    };
    value["t"] = Value::from(event.time_ns);
    value
}

fn event_from_json(value: &Value) -> Result<Event, String> {
    let object = value.as_object().ok_or("not an object")?;
    let kind = str_field(object, "kind")?;
    let op = || u64_field(object, "op").map(OpId);
    let var = || u64_field(object, "var").map(VarId);
    let kind = match kind {
        "var_created" => EventKind::VarCreated {
            var: var()?,
            name: Arc::from(str_field(object, "name")?),
        },
        "var_deleted" => EventKind::VarDeleted { var: var()? },
        "pushed" => EventKind::Pushed {
            op: op()?,
            label: Arc::from(str_field(object, "label")?),
            line: u32::try_from(u64_field(object, "line")?).map_err(|_| "`line` is too large")?,
            reads: var_list(object, "reads")?,
            writes: var_list(object, "writes")?,
            device: str_field(object, "device")?.parse::<Device>()?,
            priority: object
                .get("priority")
                .and_then(Value::as_i64)
                .and_then(|priority| i32::try_from(priority).ok())
                .ok_or("`priority` is not an i32")?,
        },
        "granted" => EventKind::Granted {
            op: op()?,
            var: var()?,
        },
        "ready" => EventKind::Ready { op: op()? },
        "cancelled" => EventKind::Cancelled { op: op()? },
        "started" => EventKind::Started {
            op: op()?,
            worker: u32::try_from(u64_field(object, "worker")?)
                .map_err(|_| "`worker` is too large")?,
        },
        "finished" => EventKind::Finished {
            op: op()?,
            state: state_from_name(str_field(object, "state")?)?,
            message: object
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string),
        },
        "device_span" => EventKind::DeviceSpan {
            op: op()?,
            lane: Arc::from(str_field(object, "lane")?),
            start_ns: u64_field(object, "start")?,
            end_ns: u64_field(object, "end")?,
        },
        other => return Err(format!("unknown event kind `{other}`")),
    };
    Ok(Event {
        time_ns: u64_field(object, "t")?,
        kind,
    })
}

fn str_field<'a>(object: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    object
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{key}` is not a string"))
}

fn u64_field(object: &Map<String, Value>, key: &str) -> Result<u64, String> {
    object
        .get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("`{key}` is not a whole number"))
}

fn var_list(object: &Map<String, Value>, key: &str) -> Result<Vec<VarId>, String> {
    object
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("`{key}` is not a list"))?
        .iter()
        .map(|id| id.as_u64().map(VarId))
        .collect::<Option<Vec<VarId>>>()
        .ok_or_else(|| format!("`{key}` holds something other than variable ids"))
}

fn state_from_name(name: &str) -> Result<OpState, String> {
    [
        OpState::Waiting,
        OpState::Ready,
        OpState::Running,
        OpState::Done,
        OpState::Failed,
        OpState::Skipped,
        OpState::Cancelled,
    ]
    .into_iter()
    .find(|state| state.name() == name)
    .ok_or_else(|| format!("unknown op state `{name}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micros_are_exact_and_always_have_a_fraction() {
        let written: Vec<String> = [0, 47_000, 1_234_567, 1_500, 1_050, 999]
            .into_iter()
            .map(|ns| Micros(ns).to_string())
            .collect();
        assert_eq!(written, ["0.0", "47.0", "1234.567", "1.5", "1.05", "0.999"]);
    }
}
