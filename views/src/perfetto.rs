//! Perfetto's own trace format, protobuf (`--trace t.pftrace`): the same slices and flows as
//! the Chrome JSON ([`crate::trace`]), in a fraction of the bytes, written as the run goes.
//!
//! A trace is a stream of `TracePacket`s, all on one sequence. The first clears the sequence's
//! incremental state and interns the categories and argument names; event names (labels) are
//! interned on first use, so each statement's text is written once. Each worker is a thread
//! track (its `tid` the worker index, as in the JSON), each device lane a thread track from
//! `tid` 10000; their names come at the end, when the run knows them. An op is a
//! `TYPE_SLICE_BEGIN` and `TYPE_SLICE_END` pair with its arguments as debug annotations; a
//! dependency (or a launch) is a flow written as the JSON's is, a legacy `s` event at the
//! earlier op's start and an `f` event bound to the enclosing slice at the later op's start, so
//! that Perfetto draws the same arrows from both files. Only the messages and fields used are
//! declared here, with the field numbers of Perfetto's `protos/perfetto/trace/`.

use std::collections::{BTreeMap, HashMap, HashSet};

use rustc_hash::FxHashMap;
use std::io::{self, Write};
use std::sync::Arc;

use dep_engine::Event;
use prost::Message;

use crate::error::{Error, ErrorKind};
use crate::fold::{DeviceSlice, Flow, OpSlice, TraceLane, TraceOut};
use crate::trace::DEVICE_TID;

/// The messages of Perfetto's trace format that dep writes, with their field numbers.
mod proto {
    /// `Trace`: the file, a list of packets.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Trace {
        #[prost(message, repeated, tag = "1")]
        pub(crate) packet: Vec<TracePacket>,
    }

    /// `TracePacket`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct TracePacket {
        #[prost(uint64, optional, tag = "8")]
        pub(crate) timestamp: Option<u64>,
        #[prost(uint32, optional, tag = "10")]
        pub(crate) trusted_packet_sequence_id: Option<u32>,
        #[prost(message, optional, tag = "11")]
        pub(crate) track_event: Option<TrackEvent>,
        #[prost(message, optional, tag = "12")]
        pub(crate) interned_data: Option<InternedData>,
        #[prost(uint32, optional, tag = "13")]
        pub(crate) sequence_flags: Option<u32>,
        #[prost(message, optional, tag = "60")]
        pub(crate) track_descriptor: Option<TrackDescriptor>,
    }

    /// `TrackEvent`. Repeated scalars are proto2's, not packed.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct TrackEvent {
        #[prost(uint64, repeated, packed = "false", tag = "3")]
        pub(crate) category_iids: Vec<u64>,
        #[prost(message, repeated, tag = "4")]
        pub(crate) debug_annotations: Vec<DebugAnnotation>,
        #[prost(message, optional, tag = "6")]
        pub(crate) legacy_event: Option<LegacyEvent>,
        #[prost(int32, optional, tag = "9")]
        pub(crate) r#type: Option<i32>,
        #[prost(uint64, optional, tag = "10")]
        pub(crate) name_iid: Option<u64>,
        #[prost(uint64, optional, tag = "11")]
        pub(crate) track_uuid: Option<u64>,
    }

    /// `TrackEvent.LegacyEvent`: what carries a flow's ends, as Chrome's JSON does.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct LegacyEvent {
        #[prost(int32, optional, tag = "2")]
        pub(crate) phase: Option<i32>,
        #[prost(uint64, optional, tag = "6")]
        pub(crate) unscoped_id: Option<u64>,
        #[prost(bool, optional, tag = "12")]
        pub(crate) bind_to_enclosing: Option<bool>,
    }

    /// `DebugAnnotation`: one argument of a slice.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct DebugAnnotation {
        #[prost(uint64, optional, tag = "1")]
        pub(crate) name_iid: Option<u64>,
        #[prost(uint64, optional, tag = "3")]
        pub(crate) uint_value: Option<u64>,
        #[prost(int64, optional, tag = "4")]
        pub(crate) int_value: Option<i64>,
        #[prost(string, optional, tag = "6")]
        pub(crate) string_value: Option<String>,
        #[prost(message, repeated, tag = "12")]
        pub(crate) array_values: Vec<DebugAnnotation>,
    }

    /// `InternedData`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct InternedData {
        #[prost(message, repeated, tag = "1")]
        pub(crate) event_categories: Vec<Interned>,
        #[prost(message, repeated, tag = "2")]
        pub(crate) event_names: Vec<Interned>,
        #[prost(message, repeated, tag = "3")]
        pub(crate) debug_annotation_names: Vec<Interned>,
    }

    /// `EventCategory`, `EventName` and `DebugAnnotationName`: one interned string.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Interned {
        #[prost(uint64, optional, tag = "1")]
        pub(crate) iid: Option<u64>,
        #[prost(string, optional, tag = "2")]
        pub(crate) name: Option<String>,
    }

    /// `TrackDescriptor`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct TrackDescriptor {
        #[prost(uint64, optional, tag = "1")]
        pub(crate) uuid: Option<u64>,
        #[prost(string, optional, tag = "2")]
        pub(crate) name: Option<String>,
        #[prost(message, optional, tag = "3")]
        pub(crate) process: Option<ProcessDescriptor>,
        #[prost(message, optional, tag = "4")]
        pub(crate) thread: Option<ThreadDescriptor>,
        #[prost(uint64, optional, tag = "5")]
        pub(crate) parent_uuid: Option<u64>,
    }

    /// `ProcessDescriptor`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct ProcessDescriptor {
        #[prost(int32, optional, tag = "1")]
        pub(crate) pid: Option<i32>,
        #[prost(string, optional, tag = "6")]
        pub(crate) process_name: Option<String>,
    }

    /// `ThreadDescriptor`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct ThreadDescriptor {
        #[prost(int32, optional, tag = "1")]
        pub(crate) pid: Option<i32>,
        #[prost(int64, optional, tag = "2")]
        pub(crate) tid: Option<i64>,
        #[prost(string, optional, tag = "5")]
        pub(crate) thread_name: Option<String>,
    }
}

use proto::{
    DebugAnnotation, Interned, InternedData, LegacyEvent, ProcessDescriptor, ThreadDescriptor,
    TracePacket, TrackDescriptor, TrackEvent,
};

/// The one sequence every packet is on.
const SEQUENCE: u32 = 1;
/// `SEQ_INCREMENTAL_STATE_CLEARED`, `SEQ_NEEDS_INCREMENTAL_STATE`.
const STATE_CLEARED: u32 = 1;
const NEEDS_STATE: u32 = 2;
/// `TrackEvent.Type`.
const SLICE_BEGIN: i32 = 1;
const SLICE_END: i32 = 2;
/// The process's pid and track.
const PID: i32 = 1;
const PROCESS_UUID: u64 = 1;
/// A thread track's uuid: this plus its tid.
const THREAD_UUID: u64 = 1 << 32;
/// Launch flows' ids: this plus the op's id (dependency flows count from 1).
const LAUNCH_FLOW: u64 = 1 << 62;
/// Categories, by interned id.
const CATEGORIES: [&str; 4] = ["op", "device", "dependency", "launch"];
const CATEGORY_OP: u64 = 1;
const CATEGORY_DEVICE: u64 = 2;
const CATEGORY_DEPENDENCY: u64 = 3;
const CATEGORY_LAUNCH: u64 = 4;
/// Argument names, by interned id (from 1).
const ARGUMENTS: [&str; 8] = [
    "op", "line", "reads", "writes", "state", "device", "priority", "message",
];

/// A Perfetto protobuf trace written while the run goes: a [`TraceOut`] for a
/// [`RunFold`](crate::fold::RunFold). The first write error stops the writing;
/// [`PerfettoTrace::finish`] returns it.
pub struct PerfettoTrace<W: Write> {
    out: W,
    names: FxHashMap<Arc<str>, u64>,
    tracks: HashSet<u64>,
    /// Flows whose later op's slice is not written yet, by that op's (worker, start): a flow's
    /// end must follow the slice it binds to.
    pending_flows: HashMap<(u32, u64), Vec<PendingFlow>>,
    buffer: Vec<u8>,
    error: Option<io::Error>,
}

struct PendingFlow {
    id: u64,
    name: String,
    from: (u32, u64),
}

impl<W: Write> PerfettoTrace<W> {
    /// A trace that writes to `out`.
    pub fn new(out: W) -> PerfettoTrace<W> {
        let mut trace = PerfettoTrace {
            out,
            names: FxHashMap::default(),
            tracks: HashSet::new(),
            pending_flows: HashMap::new(),
            buffer: Vec::new(),
            error: None,
        };
        let interned = |names: &[&str]| -> Vec<Interned> {
            names
                .iter()
                .zip(1..)
                .map(|(name, iid)| Interned {
                    iid: Some(iid),
                    name: Some(name.to_string()),
                })
                .collect()
        };
        trace.packet(TracePacket {
            sequence_flags: Some(STATE_CLEARED),
            interned_data: Some(InternedData {
                event_categories: interned(&CATEGORIES),
                debug_annotation_names: interned(&ARGUMENTS),
                ..InternedData::default()
            }),
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(PROCESS_UUID),
                process: Some(ProcessDescriptor {
                    pid: Some(PID),
                    process_name: Some("dep engine".to_string()),
                }),
                ..TrackDescriptor::default()
            }),
            ..TracePacket::default()
        });
        trace
    }

    /// Flushes the trace; returns `out`, or the first write error.
    pub fn finish(mut self) -> io::Result<W> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        self.out.flush()?;
        Ok(self.out)
    }

    /// Writes one packet: field 1 of `Trace`, length-delimited.
    fn packet(&mut self, mut packet: TracePacket) {
        if self.error.is_some() {
            return;
        }
        packet.trusted_packet_sequence_id = Some(SEQUENCE);
        self.buffer.clear();
        self.buffer.push(0x0a);
        packet
            .encode_length_delimited(&mut self.buffer)
            .expect("a Vec grows as needed");
        if let Err(error) = self.out.write_all(&self.buffer) {
            self.error = Some(error);
        }
    }

    /// The track of thread `tid`, described on first use.
    fn track(&mut self, tid: u64) -> u64 {
        let uuid = THREAD_UUID + tid;
        if self.tracks.insert(uuid) {
            self.packet(TracePacket {
                track_descriptor: Some(thread_track(tid, None)),
                ..TracePacket::default()
            });
        }
        uuid
    }

    /// An event packet at `time_ns` on `track`, named by an interned id (declared in this
    /// packet when new).
    fn event(&mut self, time_ns: u64, name: &str, mut event: TrackEvent) {
        let mut interned_data = None;
        let iid = match self.names.get(name) {
            Some(iid) => *iid,
            None => {
                let iid = self.names.len() as u64 + 1;
                self.names.insert(Arc::from(name), iid);
                interned_data = Some(InternedData {
                    event_names: vec![Interned {
                        iid: Some(iid),
                        name: Some(name.to_string()),
                    }],
                    ..InternedData::default()
                });
                iid
            }
        };
        event.name_iid = Some(iid);
        self.packet(TracePacket {
            timestamp: Some(time_ns),
            track_event: Some(event),
            interned_data,
            sequence_flags: Some(NEEDS_STATE),
            ..TracePacket::default()
        });
    }

    /// A slice's end, unnamed as Perfetto's ends are.
    fn slice_end(&mut self, time_ns: u64, track: u64) {
        self.packet(TracePacket {
            timestamp: Some(time_ns),
            track_event: Some(TrackEvent {
                r#type: Some(SLICE_END),
                track_uuid: Some(track),
                ..TrackEvent::default()
            }),
            sequence_flags: Some(NEEDS_STATE),
            ..TracePacket::default()
        });
    }

    /// A flow's two ends: `s` at the earlier op's start, `f` bound to the slice enclosing the
    /// later op's start (which must be written already).
    fn flow_ends(&mut self, id: u64, name: &str, category: u64, from: (u64, u64), to: (u64, u64)) {
        for (phase, (tid, time_ns)) in [(b's', from), (b'f', to)] {
            let track = self.track(tid);
            self.event(
                time_ns,
                name,
                TrackEvent {
                    category_iids: vec![category],
                    track_uuid: Some(track),
                    legacy_event: Some(LegacyEvent {
                        phase: Some(i32::from(phase)),
                        unscoped_id: Some(id),
                        bind_to_enclosing: (phase == b'f').then_some(true),
                    }),
                    ..TrackEvent::default()
                },
            );
        }
    }
}

fn thread_track(tid: u64, name: Option<String>) -> TrackDescriptor {
    TrackDescriptor {
        uuid: Some(THREAD_UUID + tid),
        name: name.clone(),
        parent_uuid: Some(PROCESS_UUID),
        thread: Some(ThreadDescriptor {
            pid: Some(PID),
            tid: Some(tid as i64),
            thread_name: name,
        }),
        ..TrackDescriptor::default()
    }
}

fn argument(iid: usize, value: DebugAnnotation) -> DebugAnnotation {
    DebugAnnotation {
        name_iid: Some(iid as u64 + 1),
        ..value
    }
}

fn string_value(text: &str) -> DebugAnnotation {
    DebugAnnotation {
        string_value: Some(text.to_string()),
        ..DebugAnnotation::default()
    }
}

impl<W: Write> TraceOut for PerfettoTrace<W> {
    fn event(&mut self, _: &Event) {}

    fn slice(&mut self, slice: &OpSlice<'_>) {
        let tid = u64::from(slice.worker);
        let track = self.track(tid);
        let names = |names: &[Arc<str>]| DebugAnnotation {
            array_values: names.iter().map(|name| string_value(name)).collect(),
            ..DebugAnnotation::default()
        };
        let mut arguments = vec![
            argument(
                0,
                DebugAnnotation {
                    uint_value: Some(slice.op.0),
                    ..DebugAnnotation::default()
                },
            ),
            argument(
                1,
                DebugAnnotation {
                    uint_value: Some(u64::from(slice.line)),
                    ..DebugAnnotation::default()
                },
            ),
            argument(2, names(&slice.reads)),
            argument(3, names(&slice.writes)),
            argument(4, string_value(slice.state.name())),
            argument(5, string_value(&slice.device.to_string())),
            argument(
                6,
                DebugAnnotation {
                    int_value: Some(i64::from(slice.priority)),
                    ..DebugAnnotation::default()
                },
            ),
        ];
        if let Some(message) = slice.message {
            arguments.push(argument(7, string_value(message)));
        }
        self.event(
            slice.start_ns,
            slice.label,
            TrackEvent {
                r#type: Some(SLICE_BEGIN),
                track_uuid: Some(track),
                category_iids: vec![CATEGORY_OP],
                debug_annotations: arguments,
                ..TrackEvent::default()
            },
        );
        let flows = self
            .pending_flows
            .remove(&(slice.worker, slice.start_ns))
            .unwrap_or_default();
        for flow in flows {
            self.flow_ends(
                flow.id,
                &flow.name,
                CATEGORY_DEPENDENCY,
                (u64::from(flow.from.0), flow.from.1),
                (tid, slice.start_ns),
            );
        }
        self.slice_end(slice.end_ns, track);
    }

    fn flow(&mut self, flow: &Flow<'_>) {
        self.pending_flows
            .entry(flow.to)
            .or_default()
            .push(PendingFlow {
                id: flow.id,
                name: flow.name.clone(),
                from: flow.from,
            });
    }

    fn device_slice(&mut self, slice: &DeviceSlice<'_>) {
        let tid = DEVICE_TID + slice.lane as u64;
        let track = self.track(tid);
        self.event(
            slice.start_ns,
            slice.label,
            TrackEvent {
                r#type: Some(SLICE_BEGIN),
                track_uuid: Some(track),
                category_iids: vec![CATEGORY_DEVICE],
                debug_annotations: vec![
                    argument(
                        0,
                        DebugAnnotation {
                            uint_value: Some(slice.op.0),
                            ..DebugAnnotation::default()
                        },
                    ),
                    argument(
                        1,
                        DebugAnnotation {
                            uint_value: Some(u64::from(slice.line)),
                            ..DebugAnnotation::default()
                        },
                    ),
                ],
                ..TrackEvent::default()
            },
        );
        if let Some((worker, enqueued)) = slice.launch {
            self.flow_ends(
                LAUNCH_FLOW + slice.op.0,
                "launch",
                CATEGORY_LAUNCH,
                (u64::from(worker), enqueued),
                (tid, slice.start_ns),
            );
        }
        self.slice_end(slice.end_ns, track);
    }

    fn end(&mut self, _: &[String], lanes: &[TraceLane]) {
        let mut n_device_lanes = 0;
        for lane in lanes {
            let (tid, name) = match lane {
                TraceLane::Worker(worker, name) => (u64::from(*worker), name.clone()),
                TraceLane::Device(name) => {
                    n_device_lanes += 1;
                    (DEVICE_TID + n_device_lanes - 1, format!("dev:{name}"))
                }
            };
            self.tracks.insert(THREAD_UUID + tid);
            self.packet(TracePacket {
                track_descriptor: Some(thread_track(tid, Some(name))),
                ..TracePacket::default()
            });
        }
    }
}

/// The replay as a Perfetto protobuf trace (the same bytes a run streams).
pub fn perfetto_trace(replay: &crate::Replay) -> Vec<u8> {
    let mut trace = PerfettoTrace::new(Vec::new());
    let mut fold = crate::fold::RunFold::new();
    for event in replay.events() {
        fold.push(event, &mut trace);
    }
    fold.finish(replay.worker_names(), &mut trace);
    trace.finish().expect("writing to memory cannot fail")
}

/// What a trace file shows, read back: its slices and flows, for checking a written trace and
/// that its two formats agree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceContents {
    /// Thread names, by `tid`.
    pub threads: BTreeMap<u64, String>,
    /// Every slice.
    pub slices: Vec<TraceSlice>,
    /// Every flow.
    pub flows: Vec<TraceFlow>,
}

/// A flow of a trace read back: its category and its two ends, `(tid, time)`, earlier end
/// first.
pub type TraceFlow = (String, (u64, u64), (u64, u64));

/// A slice begun and not yet ended, while reading: its start, name, category and op.
type OpenSlice = (u64, String, String, Option<u64>);

/// A slice of a trace read back (see [`TraceContents`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TraceSlice {
    /// Its thread.
    pub tid: u64,
    /// When it starts and ends (ns).
    pub start_ns: u64,
    /// When it ends.
    pub end_ns: u64,
    /// Its name (the op's label).
    pub name: String,
    /// Its category: `op` or `device`.
    pub category: String,
    /// Its `op` argument.
    pub op: Option<u64>,
}

impl TraceContents {
    /// The op of the slice that encloses `(tid, time)`: the innermost that started last.
    pub fn op_at(&self, (tid, time_ns): (u64, u64)) -> Option<u64> {
        self.slices
            .iter()
            .filter(|slice| {
                slice.tid == tid && slice.start_ns <= time_ns && time_ns <= slice.end_ns
            })
            .max_by_key(|slice| slice.start_ns)
            .and_then(|slice| slice.op)
    }
}

/// Reads a Perfetto trace written by [`PerfettoTrace`] back into its slices and flows.
pub fn read(bytes: &[u8]) -> Result<TraceContents, Error> {
    let bad = |message: String| Error::new(ErrorKind::BadTrace, message);
    let trace =
        proto::Trace::decode(bytes).map_err(|error| bad(format!("not a trace: {error}")))?;
    let mut contents = TraceContents::default();
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut categories: HashMap<u64, String> = HashMap::new();
    let mut argument_names: HashMap<u64, String> = HashMap::new();
    // Open slices by track: (start, name, category, op).
    let mut open: HashMap<u64, Vec<OpenSlice>> = HashMap::new();
    let mut flow_starts: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut flow_ends: Vec<(u64, String, (u64, u64))> = Vec::new();
    for (index, packet) in trace.packet.into_iter().enumerate() {
        if let Some(interned) = packet.interned_data {
            for (table, entries) in [
                (&mut names, interned.event_names),
                (&mut categories, interned.event_categories),
                (&mut argument_names, interned.debug_annotation_names),
            ] {
                for entry in entries {
                    table.insert(entry.iid.unwrap_or(0), entry.name.unwrap_or_default());
                }
            }
        }
        if let Some(track) = packet.track_descriptor {
            if let Some(thread) = track.thread {
                let tid = thread.tid.unwrap_or(0) as u64;
                if let Some(name) = thread.thread_name {
                    contents.threads.insert(tid, name);
                }
            }
        }
        let Some(event) = packet.track_event else {
            continue;
        };
        let time_ns = packet
            .timestamp
            .ok_or_else(|| bad(format!("packet {index}: an event without a time")))?;
        let tid = event.track_uuid.unwrap_or(0).wrapping_sub(THREAD_UUID);
        let name = || {
            event
                .name_iid
                .and_then(|iid| names.get(&iid).cloned())
                .ok_or_else(|| bad(format!("packet {index}: an unknown name")))
        };
        let category = event
            .category_iids
            .first()
            .and_then(|iid| categories.get(iid).cloned())
            .unwrap_or_default();
        if let Some(legacy) = &event.legacy_event {
            let id = legacy.unscoped_id.unwrap_or(0);
            match legacy.phase.and_then(|phase| u8::try_from(phase).ok()) {
                Some(b's') => {
                    flow_starts.insert(id, (tid, time_ns));
                }
                Some(b'f') => flow_ends.push((id, category, (tid, time_ns))),
                _ => return Err(bad(format!("packet {index}: an unknown legacy phase"))),
            }
            continue;
        }
        match event.r#type {
            Some(SLICE_BEGIN) => {
                let op = event
                    .debug_annotations
                    .iter()
                    .find(|annotation| {
                        annotation
                            .name_iid
                            .and_then(|iid| argument_names.get(&iid))
                            .is_some_and(|name| name == "op")
                    })
                    .and_then(|annotation| annotation.uint_value);
                open.entry(tid)
                    .or_default()
                    .push((time_ns, name()?, category, op));
            }
            Some(SLICE_END) => {
                let (start_ns, name, category, op) = open
                    .get_mut(&tid)
                    .and_then(Vec::pop)
                    .ok_or_else(|| bad(format!("packet {index}: an end without a begin")))?;
                contents.slices.push(TraceSlice {
                    tid,
                    start_ns,
                    end_ns: time_ns,
                    name,
                    category,
                    op,
                });
            }
            other => return Err(bad(format!("packet {index}: event type {other:?}"))),
        }
    }
    for (id, category, end) in flow_ends {
        let start = flow_starts
            .get(&id)
            .ok_or_else(|| bad(format!("flow {id} ends without a start")))?;
        contents.flows.push((category, *start, end));
    }
    contents.slices.sort();
    contents.flows.sort();
    Ok(contents)
}

/// Reads a Chrome JSON trace's slices and flows, as [`read`] does a Perfetto one.
pub fn read_json(json_text: &str) -> Result<TraceContents, Error> {
    let bad = |message: &str| Error::new(ErrorKind::BadTrace, message);
    let document: serde_json::Value =
        serde_json::from_str(json_text).map_err(|error| bad(&format!("not JSON: {error}")))?;
    let events = document["traceEvents"]
        .as_array()
        .ok_or_else(|| bad("no `traceEvents` list"))?;
    let nanos = |value: &serde_json::Value| -> u64 {
        // Microseconds written with at most three decimals: exact in nanoseconds.
        value
            .as_f64()
            .map_or(0, |micros| (micros * 1000.0).round() as u64)
    };
    let mut contents = TraceContents::default();
    let mut flow_starts: HashMap<String, (u64, u64)> = HashMap::new();
    let mut flow_ends: Vec<(String, String, (u64, u64))> = Vec::new();
    for event in events {
        let tid = event["tid"].as_u64().unwrap_or(0);
        let text = |key: &str| event[key].as_str().unwrap_or_default().to_string();
        match event["ph"].as_str() {
            Some("X") => {
                let start_ns = nanos(&event["ts"]);
                contents.slices.push(TraceSlice {
                    tid,
                    start_ns,
                    end_ns: start_ns + nanos(&event["dur"]),
                    name: text("name"),
                    category: text("cat"),
                    op: event["args"]["op"].as_u64(),
                });
            }
            Some("M") if event["name"] == "thread_name" => {
                contents.threads.insert(
                    tid,
                    event["args"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
            }
            Some("s") => {
                flow_starts.insert(event["id"].to_string(), (tid, nanos(&event["ts"])));
            }
            Some("f") => flow_ends.push((
                event["id"].to_string(),
                text("cat"),
                (tid, nanos(&event["ts"])),
            )),
            _ => {}
        }
    }
    for (id, category, end) in flow_ends {
        let start = flow_starts
            .get(&id)
            .ok_or_else(|| bad(&format!("flow {id} ends without a start")))?;
        contents.flows.push((category, *start, end));
    }
    contents.slices.sort();
    contents.flows.sort();
    Ok(contents)
}
