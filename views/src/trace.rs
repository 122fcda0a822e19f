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
//!   engine's types are not `Serialize`, see STYLE.md): version 2 lists each event as an array,
//!   `[time, kind, ...]`, and every string once: a string element declares the next string
//!   number, and events name strings by number. [`read_trace`] also reads version 1, one object
//!   per event, as the HTML player still carries them ([`dep_events`]).
//!
//! The trace is written as the events arrive: slices when their op finishes, flows when the
//! later op starts; `depEvents` go to a spool (a temporary file) appended at the end, so a run
//! of any length is never held whole. Times are microseconds since the engine started, with
//! nanosecond precision.

use std::fmt;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::sync::Arc;

use dep_engine::{Device, Event, EventKind, OpId, OpState, VarId};
use rustc_hash::FxHashMap as HashMap;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserializer;
use serde_json::{json, Map, Value};

use crate::error::{Error, ErrorKind};
use crate::fold::{DeviceSlice, Flow, OpSlice, RunFold, TraceLane, TraceOut};
use crate::replay::Replay;

/// The version of the `depEvents` layout this module writes.
const DEP_EVENTS_VERSION: u64 = 2;
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
    spool: io::BufWriter<S>,
    n_trace_events: usize,
    n_dep_events: usize,
    /// Strings declared in `depEvents` so far, by their number.
    strings: HashMap<Arc<str>, usize>,
    workers: Vec<String>,
    error: Option<io::Error>,
}

impl<W: Write, S: Read + Write + Seek> JsonTrace<W, S> {
    /// A trace that writes to `out`, spooling the event log to `spool`.
    pub fn new(out: W, spool: S) -> JsonTrace<W, S> {
        let mut trace = JsonTrace {
            out,
            spool: io::BufWriter::new(spool),
            n_trace_events: 0,
            n_dep_events: 0,
            strings: HashMap::default(),
            workers: Vec::new(),
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
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        self.out
            .write_all(b"],\"displayTimeUnit\":\"ns\",\"depEvents\":{\"version\":")?;
        write!(self.out, "{DEP_EVENTS_VERSION},\"workers\":")?;
        serde_json::to_writer(&mut self.out, &self.workers)?;
        self.out.write_all(b",\"events\":[")?;
        let mut spool = self
            .spool
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?;
        spool.seek(SeekFrom::Start(0))?;
        io::copy(&mut spool, &mut self.out)?;
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
        if self.n_trace_events > 0 {
            self.out.write_all(b",")?;
        }
        self.n_trace_events += 1;
        self.out.write_fmt(element)
    }

    /// A flow pair (an arrow in trace viewers) from `(thread, time)` to `(thread, time)`, each
    /// end bound to the slice that encloses it.
    fn flow_pair(
        &mut self,
        id: &str,
        name: &str,
        category: &str,
        from: (u64, u64),
        to: (u64, u64),
    ) -> io::Result<()> {
        let name = json_string(name);
        for (phase, (tid, time)) in [("s", from), ("f", to)] {
            self.trace_event(format_args!(
                "{{\"ph\":\"{phase}\",\"id\":{id},\"name\":{name},\"cat\":\"{category}\",\"bp\":\"e\",\"pid\":{PID},\"tid\":{tid},\"ts\":{}}}",
                Micros(time)
            ))?;
        }
        Ok(())
    }

    /// The number of `text` among the declared strings, declaring it first if new.
    fn string(&mut self, text: &str) -> io::Result<usize> {
        if let Some(number) = self.strings.get(text) {
            return Ok(*number);
        }
        let number = self.strings.len();
        self.strings.insert(Arc::from(text), number);
        self.dep_event_separator()?;
        serde_json::to_writer(&mut self.spool, text)?;
        Ok(number)
    }

    fn dep_event_separator(&mut self) -> io::Result<()> {
        if self.n_dep_events > 0 {
            self.spool.write_all(b",")?;
        }
        self.n_dep_events += 1;
        Ok(())
    }

    /// Writes one event of the log, after declaring the strings it names (a declaration is an
    /// element of its own).
    fn dep_event(&mut self, event: &Event) -> io::Result<()> {
        let time = event.time_ns;
        match &event.kind {
            EventKind::VarCreated { var, name } => {
                let name = self.string(name)?;
                self.dep_event_separator()?;
                write!(self.spool, "[{time},\"v\",{},{name}]", var.0)
            }
            EventKind::VarDeleted { var } => {
                self.dep_event_separator()?;
                write!(self.spool, "[{time},\"x\",{}]", var.0)
            }
            EventKind::Pushed {
                op,
                label,
                line,
                reads,
                writes,
                device,
                priority,
            } => {
                let label = self.string(label)?;
                let device = self.string(&device.to_string())?;
                self.dep_event_separator()?;
                write!(
                    self.spool,
                    "[{time},\"p\",{},{label},{line},{},{},{device},{priority}]",
                    op.0,
                    IdList(reads),
                    IdList(writes)
                )
            }
            EventKind::Granted { op, var } => {
                self.dep_event_separator()?;
                write!(self.spool, "[{time},\"g\",{},{}]", op.0, var.0)
            }
            EventKind::Ready { op } => {
                self.dep_event_separator()?;
                write!(self.spool, "[{time},\"r\",{}]", op.0)
            }
            EventKind::Started { op, worker } => {
                self.dep_event_separator()?;
                write!(self.spool, "[{time},\"s\",{},{worker}]", op.0)
            }
            EventKind::Finished { op, state, message } => {
                let state = self.string(state.name())?;
                let message = match message {
                    Some(message) => Some(self.string(message)?),
                    None => None,
                };
                self.dep_event_separator()?;
                match message {
                    Some(message) => {
                        write!(self.spool, "[{time},\"f\",{},{state},{message}]", op.0)
                    }
                    None => write!(self.spool, "[{time},\"f\",{},{state}]", op.0),
                }
            }
            EventKind::DeviceSpan {
                op,
                lane,
                start_ns,
                end_ns,
            } => {
                let lane = self.string(lane)?;
                self.dep_event_separator()?;
                write!(
                    self.spool,
                    "[{time},\"d\",{},{lane},{start_ns},{end_ns}]",
                    op.0
                )
            }
        }
    }
}

impl<W: Write, S: Read + Write + Seek> TraceOut for JsonTrace<W, S> {
    fn event(&mut self, event: &Event) {
        self.attempt(|trace| trace.dep_event(event));
    }

    fn slice(&mut self, slice: &OpSlice<'_>) {
        self.attempt(|trace| {
            let names = |names: &[Arc<str>]| {
                let names: Vec<&str> = names.iter().map(|name| &**name).collect();
                serde_json::to_string(&names).expect("names serialize")
            };
            let message = match slice.message {
                Some(message) => format!(",\"message\":{}", json_string(message)),
                None => String::new(),
            };
            trace.trace_event(format_args!(
                "{{\"ph\":\"X\",\"name\":{},\"cat\":\"op\",\"pid\":{PID},\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{\"op\":{},\"line\":{},\"reads\":{},\"writes\":{},\"state\":\"{}\",\"device\":\"{}\",\"priority\":{}{message}}}}}",
                json_string(slice.label),
                slice.worker,
                Micros(slice.start_ns),
                Micros(slice.end_ns - slice.start_ns),
                slice.op.0,
                slice.line,
                names(&slice.reads),
                names(&slice.writes),
                slice.state.name(),
                slice.device,
                slice.priority,
            ))
        });
    }

    fn flow(&mut self, flow: &Flow<'_>) {
        self.attempt(|trace| {
            trace.flow_pair(
                &flow.id.to_string(),
                &flow.name,
                "dependency",
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

/// Variable ids written as a JSON list.
struct IdList<'a>(&'a [VarId]);

impl fmt::Display for IdList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (index, var) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}", var.0)?;
        }
        f.write_str("]")
    }
}

/// Reads a trace written by [`chrome_trace`] (or a run's `--trace`) back into a replay, from
/// its `depEvents`.
pub fn read_trace(json_text: &str) -> Result<Replay, Error> {
    let mut deserializer = serde_json::Deserializer::from_str(json_text);
    read_from(&mut deserializer)
}

/// Like [`read_trace`], from a reader (a trace file), without holding its text: the trace
/// events are skipped as they are read.
pub fn read_trace_from(reader: impl Read) -> Result<Replay, Error> {
    let mut deserializer = serde_json::Deserializer::from_reader(io::BufReader::new(reader));
    read_from(&mut deserializer)
}

fn read_from<'de, R: serde_json::de::Read<'de>>(
    deserializer: &mut serde_json::Deserializer<R>,
) -> Result<Replay, Error> {
    let found = deserializer
        .deserialize_map(TraceVisitor)
        .and_then(|found| deserializer.end().map(|()| found))
        .map_err(|error| match error.classify() {
            serde_json::error::Category::Data => bad(error.to_string()),
            _ => bad(format!("not JSON: {error}")),
        })?;
    let (events, workers) =
        found.ok_or_else(|| bad("no `depEvents` key: this trace was not written by dep"))?;
    Ok(Replay::new(events, workers))
}

/// Finds `depEvents` in a trace document, skipping everything else.
struct TraceVisitor;

impl<'de> Visitor<'de> for TraceVisitor {
    type Value = Option<(Vec<Event>, Vec<String>)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a trace object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "depEvents" {
                found = Some(map.next_value_seed(DepEventsSeed)?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// The `depEvents` object: its version, workers and events.
struct DepEventsSeed;

impl<'de> DeserializeSeed<'de> for DepEventsSeed {
    type Value = (Vec<Event>, Vec<String>);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DepEventsSeed {
    type Value = (Vec<Event>, Vec<String>);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the `depEvents` object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut version, mut workers, mut events) = (None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "version" => version = Some(map.next_value::<Value>()?),
                "workers" => {
                    workers = Some(map.next_value::<Vec<String>>().map_err(|_| {
                        de::Error::custom("`depEvents.workers` is not a list of names")
                    })?);
                }
                "events" => events = Some(map.next_value_seed(EventsSeed)?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let version = version.as_ref().and_then(Value::as_u64);
        if version != Some(DEP_EVENTS_VERSION) && version != Some(OBJECT_EVENTS_VERSION) {
            return Err(de::Error::custom(format!(
                "`depEvents` has version {version:?}, expected {OBJECT_EVENTS_VERSION} or {DEP_EVENTS_VERSION}"
            )));
        }
        let workers = workers.ok_or_else(|| de::Error::custom("`depEvents.workers` is missing"))?;
        let events = events.ok_or_else(|| de::Error::custom("`depEvents.events` is missing"))?;
        Ok((events, workers))
    }
}

/// The event list, decoded one element at a time: a string declares the next string number,
/// an array is an event (version 2), an object an event (version 1).
struct EventsSeed;

impl<'de> DeserializeSeed<'de> for EventsSeed {
    type Value = Vec<Event>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed {
    type Value = Vec<Event>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`depEvents.events`, a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut strings: Vec<Arc<str>> = Vec::new();
        let mut events = Vec::new();
        while let Some(element) = seq.next_element::<Value>()? {
            let decoded = match element {
                Value::String(text) => {
                    strings.push(Arc::from(text));
                    continue;
                }
                Value::Array(fields) => event_from_fields(&fields, &strings),
                other => event_from_json(&other),
            };
            let event = decoded.map_err(|message| {
                de::Error::custom(format!("event {}: {message}", events.len()))
            })?;
            events.push(event);
        }
        Ok(events)
    }
}

/// Decodes a version 2 event: `[time, kind, ...]`, strings by number.
fn event_from_fields(fields: &[Value], strings: &[Arc<str>]) -> Result<Event, String> {
    let number = |index: usize| -> Result<u64, String> {
        fields
            .get(index)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("field {index} is not a whole number"))
    };
    let string = |index: usize| -> Result<Arc<str>, String> {
        let number = number(index)?;
        strings
            .get(number as usize)
            .cloned()
            .ok_or_else(|| format!("field {index} names string {number}, not declared"))
    };
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

/// The event log and worker names in the one-object-per-event layout (version 1), which the
/// HTML player reads.
pub fn dep_events(replay: &Replay) -> Value {
    let events: Vec<Value> = replay.events().iter().map(event_to_json).collect();
    json!({
        "version": OBJECT_EVENTS_VERSION,
        "workers": replay.worker_names(),
        "events": events,
    })
}

fn bad(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::BadTrace, message)
}

fn event_to_json(event: &Event) -> Value {
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
