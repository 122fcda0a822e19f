//! Chrome trace JSON (the Trace Event Format), which Perfetto and `chrome://tracing` open, and
//! the way back from such a file to a [`Replay`].
//!
//! - one `ph:"X"` slice per op that started, on one thread (`tid`) per worker, with the op's
//!   reads, writes, line and state in `args`;
//! - `ph:"M"` metadata naming the process and each worker's thread;
//! - one slice per op's device work (its GPU kernels) on a thread per device lane, numbered from
//!   10000, with a `launch` flow from the op's enqueue to it;
//! - one flow pair per dependency edge: `ph:"s"` at the producer's start, `ph:"f"` at the
//!   consumer's start, with the same `id` and `bp:"e"` so that both bind to the enclosing slice;
//! - the raw event log under the top-level key `depEvents` (trace viewers ignore unknown keys),
//!   so that `dep replay t.json` can step through the run. Its layout is this module's own: the
//!   engine's types are not `Serialize` (see STYLE.md, "Core types aren't Serialize").
//!
//! Times are microseconds since the engine started, with nanosecond precision.

use std::sync::Arc;

use dep_engine::{Device, Event, EventKind, OpId, OpState, VarId};
use serde_json::{json, Map, Value};

use crate::error::{Error, ErrorKind};
use crate::replay::{Lane, Replay};

/// The version of the `depEvents` layout.
const DEP_EVENTS_VERSION: u64 = 1;
/// The trace's one process id.
const PID: u64 = 1;
/// The thread id of the first device lane (workers count from 0).
const DEVICE_TID: u64 = 10_000;

/// The replay as a Chrome trace JSON document.
pub fn chrome_trace(replay: &Replay) -> String {
    // Written element by element: a run of 100,000 ops has a million trace elements, which as
    // one `Value` tree would take over a gigabyte.
    let mut trace_events = JsonList::new(String::from("{\"traceEvents\":"));
    trace_events.push(json!({
        "ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "dep engine"}
    }));
    // Workers are threads 0, 1, ...; device lanes 10000, 10001, ...
    let mut device_lanes: Vec<Lane> = Vec::new();
    for lane in replay.timeline_lanes() {
        let tid = match &lane {
            Lane::Worker(worker) => u64::from(*worker),
            Lane::Device(_) => DEVICE_TID + device_lanes.len() as u64,
        };
        trace_events.push(json!({
            "ph": "M", "name": "thread_name", "pid": PID, "tid": tid,
            "args": {"name": replay.lane_name(&lane)}
        }));
        trace_events.push(json!({
            "ph": "M", "name": "thread_sort_index", "pid": PID, "tid": tid,
            "args": {"sort_index": tid}
        }));
        if matches!(lane, Lane::Device(_)) {
            device_lanes.push(lane);
        }
    }
    let (_, end) = replay.span_ns();
    let names = |vars: &[VarId]| -> Vec<Value> {
        vars.iter()
            .map(|var| Value::from(&*replay.var_name(*var)))
            .collect()
    };
    for op in replay.ops() {
        let (Some(start), Some(worker)) = (op.started_ns, op.worker) else {
            continue;
        };
        let mut args = json!({
            "op": op.id.0,
            "line": op.line,
            "reads": names(&op.reads),
            "writes": names(&op.writes),
            "state": op.state.name(),
            "device": op.device.to_string(),
            "priority": op.priority,
        });
        if let Some(message) = &op.message {
            args["message"] = Value::from(message.as_str());
        }
        trace_events.push(json!({
            "ph": "X",
            "name": &*op.label,
            "cat": "op",
            "pid": PID,
            "tid": worker,
            "ts": micros(start),
            "dur": micros(op.finished_ns.unwrap_or(end).saturating_sub(start)),
            "args": args,
        }));
    }
    for (index, edge) in replay.edges().iter().enumerate() {
        let (Some(from), Some(to)) = (replay.op(edge.from), replay.op(edge.to)) else {
            continue;
        };
        let (Some(from_start), Some(from_worker), Some(to_start), Some(to_worker)) =
            (from.started_ns, from.worker, to.started_ns, to.worker)
        else {
            continue;
        };
        let name = format!("{} {}", replay.var_name(edge.var), edge.hazard.short_name());
        trace_events.flow(
            json!(index + 1),
            &name,
            "dependency",
            (u64::from(from_worker), from_start),
            (u64::from(to_worker), to_start),
        );
    }
    for (index, lane) in device_lanes.iter().enumerate() {
        let tid = DEVICE_TID + index as u64;
        for bar in replay.bars(lane) {
            let op = bar.op;
            trace_events.push(json!({
                "ph": "X",
                "name": &*op.label,
                "cat": "device",
                "pid": PID,
                "tid": tid,
                "ts": micros(bar.start_ns),
                "dur": micros(bar.end_ns - bar.start_ns),
                "args": {"op": op.id.0, "line": op.line},
            }));
            // The launch: from the op's enqueue on its worker to its kernels on the device.
            let (Some(enqueued), Some(worker)) = (op.started_ns, op.worker) else {
                continue;
            };
            trace_events.flow(
                json!(format!("launch {}", op.id.0)),
                "launch",
                "launch",
                (u64::from(worker), enqueued),
                (tid, bar.start_ns),
            );
        }
    }
    let mut text = trace_events.end();
    text.push_str(",\"displayTimeUnit\":\"ns\",\"depEvents\":{\"version\":");
    text.push_str(&DEP_EVENTS_VERSION.to_string());
    text.push_str(",\"workers\":");
    text.push_str(&to_json(&json!(replay.worker_names())));
    text.push_str(",\"events\":");
    let mut events = JsonList::new(text);
    for event in replay.events() {
        events.push(event_to_json(event));
    }
    let mut text = events.end();
    text.push_str("}}\n");
    text
}

/// A JSON list written one element at a time after a prefix.
struct JsonList {
    text: String,
    empty: bool,
}

impl JsonList {
    fn new(mut prefix: String) -> JsonList {
        prefix.push('[');
        JsonList {
            text: prefix,
            empty: true,
        }
    }

    fn push(&mut self, element: Value) {
        if !self.empty {
            self.text.push(',');
        }
        self.empty = false;
        self.text.push_str(&to_json(&element));
    }

    /// A flow pair (an arrow in trace viewers) from `(thread, time)` to `(thread, time)`, each
    /// end bound to the slice that encloses it.
    fn flow(&mut self, id: Value, name: &str, category: &str, from: (u64, u64), to: (u64, u64)) {
        for (phase, (tid, time)) in [("s", from), ("f", to)] {
            self.push(json!({
                "ph": phase, "id": &id, "name": name, "cat": category, "bp": "e",
                "pid": PID, "tid": tid, "ts": micros(time),
            }));
        }
    }

    /// The text so far, with the list closed.
    fn end(mut self) -> String {
        self.text.push(']');
        self.text
    }
}

fn to_json(value: &Value) -> String {
    serde_json::to_string(value).expect("a JSON value always serializes")
}

/// Reads a trace written by [`chrome_trace`] back into a replay (from its `depEvents`).
pub fn read_trace(json_text: &str) -> Result<Replay, Error> {
    let document: Value =
        serde_json::from_str(json_text).map_err(|error| bad(format!("not JSON: {error}")))?;
    let dep_events = document
        .get("depEvents")
        .ok_or_else(|| bad("no `depEvents` key: this trace was not written by dep"))?;
    let (events, workers) = parse_dep_events(dep_events)?;
    Ok(Replay::new(events, workers))
}

/// The event log and worker names as the `depEvents` value.
pub fn dep_events(replay: &Replay) -> Value {
    let events: Vec<Value> = replay.events().iter().map(event_to_json).collect();
    json!({
        "version": DEP_EVENTS_VERSION,
        "workers": replay.worker_names(),
        "events": events,
    })
}

/// Parses a `depEvents` value into events and worker names.
pub fn parse_dep_events(value: &Value) -> Result<(Vec<Event>, Vec<String>), Error> {
    let version = value.get("version").and_then(Value::as_u64);
    if version != Some(DEP_EVENTS_VERSION) {
        return Err(bad(format!(
            "`depEvents` has version {version:?}, expected {DEP_EVENTS_VERSION}"
        )));
    }
    let workers = value
        .get("workers")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("`depEvents.workers` is not a list"))?
        .iter()
        .map(|name| name.as_str().map(str::to_string))
        .collect::<Option<Vec<String>>>()
        .ok_or_else(|| bad("a worker name is not a string"))?;
    let events = value
        .get("events")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("`depEvents.events` is not a list"))?
        .iter()
        .enumerate()
        .map(|(index, event)| {
            event_from_json(event).map_err(|message| bad(format!("event {index}: {message}")))
        })
        .collect::<Result<Vec<Event>, Error>>()?;
    Ok((events, workers))
}

fn bad(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::BadTrace, message)
}

fn micros(ns: u64) -> f64 {
    ns as f64 / 1_000.0
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
