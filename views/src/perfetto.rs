//! Perfetto's own trace format, protobuf (`--trace t.pftrace`): the same slices and flows as
//! the Chrome JSON ([`crate::trace`]), in a fraction of the bytes, written as the run goes.
//!
//! A trace is a stream of `TracePacket`s, all on one sequence. The first clears the sequence's
//! incremental state and interns the categories and argument names; event names (labels) and
//! the text values of arguments (variables' names, states, devices) are interned on first use,
//! so each is written once, and only packets that name one say they need the sequence's
//! interned state (a slice's end does not). Each worker is a thread
//! track (its `tid` the worker index, as in the JSON), each device lane a thread track from
//! `tid` 10000; their names come at the end, when the run knows them. An op is a
//! `TYPE_SLICE_BEGIN` and `TYPE_SLICE_END` pair with its arguments as debug annotations; a
//! dependency (or a launch) is a flow written as the JSON's is, a legacy `s` event at the
//! earlier op's start and an `f` event bound to the enclosing slice at the later op's start, so
//! that Perfetto draws the same arrows from both files. Only the messages and fields used are
//! declared here, with the field numbers of Perfetto's `protos/perfetto/trace/`.

use std::collections::{BTreeMap, HashMap};

use rustc_hash::FxHashMap;
use std::io::{self, Write};
use std::sync::Arc;

use dep_engine::{Device, Event, RanAtOnce};
use prost::Message;
use smallvec::SmallVec;

use crate::error::{Error, ErrorKind};
use crate::fold::{DeviceSlice, Flow, FlowNameKey, KeptFlowName, OpSlice, TraceLane, TraceOut};
use crate::kept_arguments::{KeptArguments, PerLabel};
use crate::trace::DEVICE_TID;

mod wire;

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
        #[prost(uint64, optional, tag = "17")]
        pub(crate) string_value_iid: Option<u64>,
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
        #[prost(message, repeated, tag = "29")]
        pub(crate) debug_annotation_string_values: Vec<InternedString>,
    }

    /// `InternedString`: an interned argument value.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct InternedString {
        #[prost(uint64, optional, tag = "1")]
        pub(crate) iid: Option<u64>,
        #[prost(bytes = "vec", optional, tag = "2")]
        pub(crate) str: Option<Vec<u8>>,
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
    Interned, InternedData, ProcessDescriptor, ThreadDescriptor, TracePacket, TrackDescriptor,
};

/// `Trace.packet`'s field number: each packet is one.
const TRACE_PACKET: u32 = 1;
/// How many bytes of packets are gathered before they are written out.
const BUFFER_BYTES: usize = 64 * 1024;
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
/// A thread track's uuid: this plus its tid (small, so that the uuid every event names takes
/// one or two bytes).
const THREAD_UUID: u64 = 2;
/// Launch flows' ids: this plus the op's id (dependency flows count from 1).
const LAUNCH_FLOW: u64 = 1 << 62;
/// Arrows between ranks' ops' ids ([`PerfettoTrace::comm_arrow`]): this plus the arrow's index.
const COMM_FLOW: u64 = 1 << 61;
/// Categories, by interned id.
const CATEGORIES: [&str; 5] = ["op", "device", "dependency", "launch", "comm"];
const CATEGORY_OP: u64 = 1;
const CATEGORY_DEVICE: u64 = 2;
const CATEGORY_DEPENDENCY: u64 = 3;
const CATEGORY_LAUNCH: u64 = 4;
const CATEGORY_COMM: u64 = 5;
/// Argument names, by interned id (from 1).
const ARGUMENTS: [&str; 8] = [
    "op", "line", "reads", "writes", "state", "device", "priority", "message",
];

/// A Perfetto protobuf trace written while the run goes: a [`TraceOut`] for a
/// [`RunFold`](crate::fold::RunFold). The first write error stops the writing;
/// [`PerfettoTrace::finish`] returns it. The packets of each op (its slice, its flows) are
/// encoded by hand (`wire.rs`) into buffers kept from packet to packet; the few others (the
/// header, the tracks) are prost's messages.
pub struct PerfettoTrace<W: Write> {
    out: W,
    /// The event names and argument values interned so far, and those to declare in the next
    /// track event's packet.
    interned: Interning,
    /// Each op label's interned id and last arguments.
    labels: PerLabel<LabelCache>,
    /// Each flow name's interned id, by its variable's address and its hazard (the variable's
    /// name kept, so that the address stays its own).
    flow_names: FxHashMap<FlowNameKey, KeptFlowName<u64>>,
    /// The tracks described so far (a few: one per worker and device lane).
    tracks: Vec<u64>,
    /// Flows whose later op's slice is not written yet, by that op's (worker, start): a flow's
    /// end must follow the slice it binds to. Those of the latest such op are in
    /// `latest_flows`, not here: its slice most often comes next (an op run where it was pushed
    /// starts and ends in a row), and is then written without a look-up.
    pending_flows: FxHashMap<(u32, u64), PendingFlows>,
    /// The flows of the op that started last (see `pending_flows`), by its (worker, start).
    latest_flows: Option<((u32, u64), PendingFlows)>,
    /// A packet's bytes, for packets encoded by prost.
    packet: Vec<u8>,
    /// Packets encoded and not yet written to `out` (written by [`BUFFER_BYTES`]).
    buffer: Vec<u8>,
    /// The `TrackEvent` of the packet being written.
    event: Vec<u8>,
    /// A message inside it: an argument, a legacy event, interned data.
    part: Vec<u8>,
    /// A message inside that: an array's element.
    item: Vec<u8>,
    /// The last slice's device and its name, written out (most slices run on the device of
    /// the slice before).
    device: Option<(Device, String)>,
    error: Option<io::Error>,
}

/// What the slices of one label keep: the label's interned id and their last arguments.
struct LabelCache {
    iid: u64,
    arguments: Option<KeptArguments>,
}

/// The strings a trace interns (event names, and argument values: states, devices, variables'
/// names), each written once with the first packet that uses it and named by its id after. Each
/// table holds [`MAX_INTERNED`] strings at most and starts again when full (an observed loop's
/// ops may each have a label of their own): a string met again after is interned again, under
/// a new id, as ids are never reused.
#[derive(Default)]
struct Interning {
    names: FxHashMap<Arc<str>, u64>,
    values: FxHashMap<Box<str>, u64>,
    /// How many ids were given to names, and to values.
    n_names: u64,
    n_values: u64,
    /// `InternedData.event_names` entries not declared yet.
    new_names: Vec<u8>,
    /// `InternedData.debug_annotation_string_values` entries not declared yet.
    new_values: Vec<u8>,
    /// An entry, while it is encoded.
    entry: Vec<u8>,
}

/// The most strings each table of an [`Interning`] holds, and the most flow names a
/// [`PerfettoTrace`] keeps.
const MAX_INTERNED: usize = 4096;

impl Interning {
    /// The interned id of event name `name`, declared with the next track event when new.
    fn name(&mut self, name: &str) -> u64 {
        if let Some(iid) = self.names.get(name) {
            return *iid;
        }
        if self.names.len() >= MAX_INTERNED {
            self.names.clear();
        }
        self.n_names += 1;
        let iid = self.n_names;
        self.names.insert(Arc::from(name), iid);
        Self::declare(
            &mut self.entry,
            &mut self.new_names,
            field::EVENT_NAMES,
            iid,
            name,
        );
        iid
    }

    /// The interned id of argument value `value`, declared with the next track event when new.
    fn value(&mut self, value: &str) -> u64 {
        if let Some(iid) = self.values.get(value) {
            return *iid;
        }
        if self.values.len() >= MAX_INTERNED {
            self.values.clear();
        }
        self.n_values += 1;
        let iid = self.n_values;
        self.values.insert(Box::from(value), iid);
        let (entry, out) = (&mut self.entry, &mut self.new_values);
        Self::declare(entry, out, field::STRING_VALUES, iid, value);
        iid
    }

    /// Appends an interned entry (`iid`, `text`: both entry kinds number their fields alike)
    /// to `out` as field `field` of `InternedData`.
    fn declare(entry: &mut Vec<u8>, out: &mut Vec<u8>, field: u32, iid: u64, text: &str) {
        entry.clear();
        wire::uint(entry, field::IID, iid);
        wire::bytes(entry, field::NAME, text.as_bytes());
        wire::bytes(out, field, entry);
    }

    /// Whether some entries wait to be declared.
    fn has_new(&self) -> bool {
        !self.new_names.is_empty() || !self.new_values.is_empty()
    }

    /// The length of the `InternedData` message of the entries waiting.
    fn new_len(&self) -> usize {
        self.new_names.len() + self.new_values.len()
    }

    /// Appends the entries waiting, as one `InternedData` message's fields, in field order,
    /// and forgets them.
    fn write_new(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.new_names);
        out.extend_from_slice(&self.new_values);
        self.new_names.clear();
        self.new_values.clear();
    }
}

struct PendingFlow {
    id: u64,
    /// The interned id of its name (its variable's and its hazard's).
    name: u64,
    from: (u32, u64),
}

/// The flows that end at one op's start, in the order they came.
type PendingFlows = SmallVec<[PendingFlow; 2]>;

/// Field numbers of the messages written by hand (Perfetto's `protos/perfetto/trace/`).
mod field {
    /// `TracePacket`.
    pub(super) const TIMESTAMP: u32 = 8;
    pub(super) const SEQUENCE_ID: u32 = 10;
    pub(super) const TRACK_EVENT: u32 = 11;
    pub(super) const INTERNED_DATA: u32 = 12;
    pub(super) const SEQUENCE_FLAGS: u32 = 13;
    /// `TrackEvent`.
    pub(super) const CATEGORY_IIDS: u32 = 3;
    pub(super) const DEBUG_ANNOTATIONS: u32 = 4;
    pub(super) const LEGACY_EVENT: u32 = 6;
    pub(super) const TYPE: u32 = 9;
    pub(super) const NAME_IID: u32 = 10;
    pub(super) const TRACK_UUID: u32 = 11;
    /// `TrackEvent.LegacyEvent`.
    pub(super) const PHASE: u32 = 2;
    pub(super) const UNSCOPED_ID: u32 = 6;
    pub(super) const BIND_TO_ENCLOSING: u32 = 12;
    /// `DebugAnnotation`.
    pub(super) const ANNOTATION_NAME_IID: u32 = 1;
    pub(super) const UINT_VALUE: u32 = 3;
    pub(super) const INT_VALUE: u32 = 4;
    pub(super) const STRING_VALUE: u32 = 6;
    pub(super) const ARRAY_VALUES: u32 = 12;
    pub(super) const STRING_VALUE_IID: u32 = 17;
    /// `InternedData`, and `EventName` and `InternedString` (whose `str` is field 2 as `name`).
    pub(super) const EVENT_NAMES: u32 = 2;
    pub(super) const STRING_VALUES: u32 = 29;
    pub(super) const IID: u32 = 1;
    pub(super) const NAME: u32 = 2;
}

/// Appends an argument (`DebugAnnotation`) of interned name `iid` (from 0, in [`ARGUMENTS`]) to
/// the track event `event`, its value written by `value` into its message, `part`.
fn annotation(
    event: &mut Vec<u8>,
    part: &mut Vec<u8>,
    iid: usize,
    value: impl FnOnce(&mut Vec<u8>),
) {
    part.clear();
    wire::uint(part, field::ANNOTATION_NAME_IID, iid as u64 + 1);
    value(part);
    wire::bytes(event, field::DEBUG_ANNOTATIONS, part);
}

/// Appends an argument whose value is a list of names, each an interned value.
fn names_annotation(
    event: &mut Vec<u8>,
    (part, item): (&mut Vec<u8>, &mut Vec<u8>),
    interned: &mut Interning,
    iid: usize,
    names: &[&Arc<str>],
) {
    annotation(event, part, iid, |part| {
        for name in names {
            item.clear();
            wire::uint(item, field::STRING_VALUE_IID, interned.value(name));
            wire::bytes(part, field::ARRAY_VALUES, item);
        }
    });
}

/// Appends an argument whose value is a text, an interned value.
fn value_annotation(
    event: &mut Vec<u8>,
    part: &mut Vec<u8>,
    interned: &mut Interning,
    iid: usize,
    value: &str,
) {
    let value = interned.value(value);
    annotation(event, part, iid, |part| {
        wire::uint(part, field::STRING_VALUE_IID, value);
    });
}

impl<W: Write> PerfettoTrace<W> {
    /// A trace that writes to `out`.
    pub fn new(out: W) -> PerfettoTrace<W> {
        let mut trace = PerfettoTrace {
            out,
            interned: Interning::default(),
            labels: PerLabel::default(),
            flow_names: FxHashMap::default(),
            tracks: Vec::new(),
            pending_flows: FxHashMap::default(),
            latest_flows: None,
            packet: Vec::new(),
            buffer: Vec::with_capacity(BUFFER_BYTES + 4096),
            event: Vec::new(),
            part: Vec::new(),
            item: Vec::new(),
            device: None,
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
        trace.message_packet(TracePacket {
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

    /// Writes the whole of a recorded run, as a run writes it while it goes.
    pub fn write_replay(&mut self, replay: &crate::Replay) {
        let mut fold = crate::fold::RunFold::new();
        for event in replay.events() {
            fold.push(event, self);
        }
        fold.finish(replay.worker_names(), self);
    }

    /// Writes arrow number `index` (category `comm`) between two ranks' ops, named `name`,
    /// from `from` to `to`, each `(tid, time_ns)` inside its op's slice.
    pub fn comm_arrow(&mut self, index: u64, name: &str, from: (u64, u64), to: (u64, u64)) {
        self.flow_ends(COMM_FLOW + index, name, CATEGORY_COMM, from, to);
    }

    /// Flushes the trace; returns `out`, or the first write error.
    pub fn finish(mut self) -> io::Result<W> {
        self.write_buffer();
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        self.out.flush()?;
        Ok(self.out)
    }

    /// Writes one packet given as a prost message.
    fn message_packet(&mut self, mut packet: TracePacket) {
        packet.trusted_packet_sequence_id = Some(SEQUENCE);
        self.packet.clear();
        packet
            .encode(&mut self.packet)
            .expect("a Vec grows as needed");
        self.write_packet();
    }

    /// Writes the packet in `self.packet`: field 1 of `Trace`, length-delimited.
    fn write_packet(&mut self) {
        wire::bytes(&mut self.buffer, TRACE_PACKET, &self.packet);
        self.flush_when_full();
    }

    /// Writes the output buffer out once it holds [`BUFFER_BYTES`].
    fn flush_when_full(&mut self) {
        if self.buffer.len() >= BUFFER_BYTES {
            self.write_buffer();
        }
    }

    /// Writes the output buffer out (nothing after the first write error).
    fn write_buffer(&mut self) {
        if self.error.is_none() {
            if let Err(error) = self.out.write_all(&self.buffer) {
                self.error = Some(error);
            }
        }
        self.buffer.clear();
    }

    /// The track of thread `tid`, described on first use.
    fn track(&mut self, tid: u64) -> u64 {
        let uuid = THREAD_UUID + tid;
        if !self.tracks.contains(&uuid) {
            self.tracks.push(uuid);
            self.message_packet(TracePacket {
                track_descriptor: Some(thread_track(tid, None)),
                ..TracePacket::default()
            });
        }
        uuid
    }

    /// Writes the track event in `self.event` (without its name and track, its last fields) at
    /// `time_ns` on `track`, named `name` by an interned id.
    fn event_packet(&mut self, time_ns: u64, name: &str, track: u64) {
        let iid = self.interned.name(name);
        self.event_packet_named(time_ns, iid, track);
    }

    /// Writes the track event in `self.event` as [`PerfettoTrace::event_packet`] does, named by
    /// interned id `iid`.
    fn event_packet_named(&mut self, time_ns: u64, iid: u64, track: u64) {
        wire::uint(&mut self.event, field::NAME_IID, iid);
        wire::uint(&mut self.event, field::TRACK_UUID, track);
        self.track_event_packet(time_ns, true);
    }

    /// Writes the track event in `self.event` at `time_ns`, with the interned strings that wait
    /// to be declared. `interns` says whether the event names an interned string (its name, an
    /// argument's value): the packet then says it needs the sequence's interned state.
    fn track_event_packet(&mut self, time_ns: u64, interns: bool) {
        // The packet is written straight into the output buffer, its length summed first.
        let flags = interns.then_some(u64::from(NEEDS_STATE));
        let length = wire::uint_size(field::TIMESTAMP, time_ns)
            + wire::uint_size(field::SEQUENCE_ID, u64::from(SEQUENCE))
            + wire::bytes_size(field::TRACK_EVENT, self.event.len())
            + if self.interned.has_new() {
                wire::bytes_size(field::INTERNED_DATA, self.interned.new_len())
            } else {
                0
            }
            + flags.map_or(0, |flags| wire::uint_size(field::SEQUENCE_FLAGS, flags));
        let out = &mut self.buffer;
        wire::length_key(out, TRACE_PACKET, length);
        wire::uint(out, field::TIMESTAMP, time_ns);
        wire::uint(out, field::SEQUENCE_ID, u64::from(SEQUENCE));
        wire::bytes(out, field::TRACK_EVENT, &self.event);
        if self.interned.has_new() {
            wire::length_key(out, field::INTERNED_DATA, self.interned.new_len());
            self.interned.write_new(out);
        }
        if let Some(flags) = flags {
            wire::uint(out, field::SEQUENCE_FLAGS, flags);
        }
        self.flush_when_full();
    }

    /// A slice's end, unnamed as Perfetto's ends are: the one event that needs no interned
    /// string.
    fn slice_end(&mut self, time_ns: u64, track: u64) {
        self.event.clear();
        wire::int(&mut self.event, field::TYPE, i64::from(SLICE_END));
        wire::uint(&mut self.event, field::TRACK_UUID, track);
        self.track_event_packet(time_ns, false);
    }

    /// A flow's two ends: `s` at the earlier op's start, `f` bound to the slice enclosing the
    /// later op's start (which must be written already).
    fn flow_ends(&mut self, id: u64, name: &str, category: u64, from: (u64, u64), to: (u64, u64)) {
        let iid = self.interned.name(name);
        self.flow_ends_named(id, iid, category, from, to);
    }

    /// [`PerfettoTrace::flow_ends`], named by interned id `iid`.
    fn flow_ends_named(
        &mut self,
        id: u64,
        iid: u64,
        category: u64,
        from: (u64, u64),
        to: (u64, u64),
    ) {
        for (phase, (tid, time_ns)) in [(b's', from), (b'f', to)] {
            let track = self.track(tid);
            let event = &mut self.event;
            event.clear();
            wire::uint(event, field::CATEGORY_IIDS, category);
            let legacy = &mut self.part;
            legacy.clear();
            wire::int(legacy, field::PHASE, i64::from(phase));
            wire::uint(legacy, field::UNSCOPED_ID, id);
            if phase == b'f' {
                wire::uint(legacy, field::BIND_TO_ENCLOSING, 1);
            }
            wire::bytes(event, field::LEGACY_EVENT, legacy);
            self.event_packet_named(time_ns, iid, track);
        }
    }

    /// The interned id of the name of a dependency flow on `var` (`x RAW`), and its text when
    /// it is new.
    fn flow_name_iid(&mut self, flow: &Flow<'_>) -> u64 {
        let key = flow.name_key();
        if let Some((_, iid)) = self.flow_names.get(&key) {
            return *iid;
        }
        let iid = self.interned.name(&flow.name());
        if self.flow_names.len() >= MAX_INTERNED {
            // Variables made anew in a loop each have flows of their own.
            self.flow_names.clear();
        }
        self.flow_names.insert(key, (flow.name_parts(), iid));
        iid
    }

    /// Appends `slice`'s arguments from `reads` to `priority` to `self.event`: copied from the
    /// last slice of its label (cache `label`) when they are the same, else encoded (and kept).
    fn slice_arguments(&mut self, slice: &OpSlice<'_>, label: usize) {
        if let Some(kept) = &self.labels.get_mut(label).arguments {
            if kept.are_those_of(slice) {
                self.event.extend_from_slice(&kept.bytes);
                return;
            }
        }
        let start = self.event.len();
        if self
            .device
            .as_ref()
            .is_none_or(|(device, _)| *device != slice.device)
        {
            self.device = Some((slice.device, slice.device.to_string()));
        }
        let device = self.device.as_ref().map_or("", |(_, name)| name.as_str());
        let (event, part, item) = (&mut self.event, &mut self.part, &mut self.item);
        let interned = &mut self.interned;
        names_annotation(event, (part, item), interned, 2, slice.reads);
        names_annotation(event, (part, item), interned, 3, slice.writes);
        value_annotation(event, part, interned, 4, slice.state.name());
        value_annotation(event, part, interned, 5, device);
        annotation(event, part, 6, |part| {
            wire::int(part, field::INT_VALUE, i64::from(slice.priority));
        });
        let bytes = self.event[start..].to_vec();
        self.labels.get_mut(label).arguments = Some(KeptArguments::of(slice, bytes));
    }

    /// The index of `label`'s cache in `labels`, made with the label's interned id on its
    /// first slice.
    fn label_cache(&mut self, label: &Arc<str>) -> usize {
        let interned = &mut self.interned;
        let (index, _) = self.labels.entry(label, || LabelCache {
            iid: interned.name(label),
            arguments: None,
        });
        index
    }

    /// Starts a slice's begin event in `self.event`: its category and its `op` and `line`
    /// arguments.
    fn begin_slice(&mut self, category: u64, op: u64, line: u32) {
        let (event, part) = (&mut self.event, &mut self.part);
        event.clear();
        wire::uint(event, field::CATEGORY_IIDS, category);
        annotation(event, part, 0, |part| {
            wire::uint(part, field::UINT_VALUE, op)
        });
        annotation(event, part, 1, |part| {
            wire::uint(part, field::UINT_VALUE, u64::from(line));
        });
    }

    /// Ends a slice's begin event in `self.event` (its type and track) and writes it.
    fn write_begin(&mut self, track: u64, time_ns: u64, name: &str) {
        wire::int(&mut self.event, field::TYPE, i64::from(SLICE_BEGIN));
        self.event_packet(time_ns, name, track);
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

impl<W: Write> TraceOut for PerfettoTrace<W> {
    fn event(&mut self, _: &Event) {}

    fn ran_at_once(&mut self, _: &RanAtOnce<'_>) {}

    fn slice(&mut self, slice: &OpSlice<'_>) {
        let tid = u64::from(slice.worker);
        let track = self.track(tid);
        self.begin_slice(CATEGORY_OP, slice.op.0, slice.line);
        let label = self.label_cache(slice.label);
        self.slice_arguments(slice, label);
        if let Some(message) = slice.message {
            let (event, part) = (&mut self.event, &mut self.part);
            annotation(event, part, 7, |part| {
                wire::bytes(part, field::STRING_VALUE, message.as_bytes());
            });
        }
        wire::int(&mut self.event, field::TYPE, i64::from(SLICE_BEGIN));
        let name = self.labels.get_mut(label).iid;
        self.event_packet_named(slice.start_ns, name, track);
        let key = (slice.worker, slice.start_ns);
        let flows = match self.latest_flows.take() {
            Some((latest, flows)) if latest == key => flows,
            latest => {
                self.latest_flows = latest;
                self.pending_flows.remove(&key).unwrap_or_default()
            }
        };
        for flow in flows {
            self.flow_ends_named(
                flow.id,
                flow.name,
                CATEGORY_DEPENDENCY,
                (u64::from(flow.from.0), flow.from.1),
                (tid, slice.start_ns),
            );
        }
        self.slice_end(slice.end_ns, track);
    }

    fn flow(&mut self, flow: &Flow<'_>) {
        // Interned now (declared with the next packet, before the flow's own).
        let pending = PendingFlow {
            id: flow.id,
            name: self.flow_name_iid(flow),
            from: flow.from,
        };
        match &mut self.latest_flows {
            Some((latest, flows)) if *latest == flow.to => flows.push(pending),
            latest => {
                if let Some((earlier, flows)) = latest.replace((flow.to, PendingFlows::new())) {
                    self.pending_flows.entry(earlier).or_default().extend(flows);
                }
                if let Some((_, flows)) = latest {
                    flows.push(pending);
                }
            }
        }
    }

    fn device_slice(&mut self, slice: &DeviceSlice<'_>) {
        let tid = DEVICE_TID + slice.lane as u64;
        let track = self.track(tid);
        self.begin_slice(CATEGORY_DEVICE, slice.op.0, slice.line);
        self.write_begin(track, slice.start_ns, slice.label);
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
            if !self.tracks.contains(&(THREAD_UUID + tid)) {
                self.tracks.push(THREAD_UUID + tid);
            }
            self.message_packet(TracePacket {
                track_descriptor: Some(thread_track(tid, Some(name))),
                ..TracePacket::default()
            });
        }
    }
}

/// The replay as a Perfetto protobuf trace (the same bytes a run streams).
pub fn perfetto_trace(replay: &crate::Replay) -> Vec<u8> {
    let mut trace = PerfettoTrace::new(Vec::new());
    trace.write_replay(replay);
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

/// A slice begun and not yet ended, while reading: the slice, its end not known yet.
type OpenSlice = TraceSlice;

/// An argument of a slice read back: its name and its value as text (a list as `[a, b]`).
pub type TraceArgument = (String, String);

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
    /// Its arguments, `op` included, sorted by name.
    pub arguments: Vec<TraceArgument>,
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
    let mut values: HashMap<u64, String> = HashMap::new();
    // Open slices by track.
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
            for entry in interned.debug_annotation_string_values {
                let text = String::from_utf8_lossy(&entry.str.unwrap_or_default()).into_owned();
                values.insert(entry.iid.unwrap_or(0), text);
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
                let mut arguments = Vec::new();
                for annotation in &event.debug_annotations {
                    let argument = annotation
                        .name_iid
                        .and_then(|iid| argument_names.get(&iid))
                        .ok_or_else(|| bad(format!("packet {index}: an unknown argument")))?;
                    let value = annotation_text(annotation, &values)
                        .map_err(|what| bad(format!("packet {index}: `{argument}` {what}")))?;
                    arguments.push((argument.clone(), value));
                }
                arguments.sort();
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
                open.entry(tid).or_default().push(TraceSlice {
                    tid,
                    start_ns: time_ns,
                    end_ns: time_ns,
                    name: name()?,
                    category,
                    op,
                    arguments,
                });
            }
            Some(SLICE_END) => {
                let begun = open
                    .get_mut(&tid)
                    .and_then(Vec::pop)
                    .ok_or_else(|| bad(format!("packet {index}: an end without a begin")))?;
                contents.slices.push(TraceSlice {
                    end_ns: time_ns,
                    ..begun
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

/// A protobuf argument's value as text, as [`json_argument_text`] writes a JSON one; its interned
/// string values (`string_value_iid`) found in `values`.
fn annotation_text(
    annotation: &proto::DebugAnnotation,
    values: &HashMap<u64, String>,
) -> Result<String, &'static str> {
    if let Some(iid) = annotation.string_value_iid {
        return values.get(&iid).cloned().ok_or("names an unknown value");
    }
    if let Some(text) = &annotation.string_value {
        return Ok(text.clone());
    }
    if let Some(value) = annotation.uint_value {
        return Ok(value.to_string());
    }
    if let Some(value) = annotation.int_value {
        return Ok(value.to_string());
    }
    let items: Result<Vec<String>, _> = annotation
        .array_values
        .iter()
        .map(|item| annotation_text(item, values))
        .collect();
    Ok(format!("[{}]", items?.join(", ")))
}

/// A JSON argument's value as text: a string as it is, a number in decimal, a list as
/// `[a, b]`.
fn json_argument_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(json_argument_text).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
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
                let mut arguments: Vec<TraceArgument> = event["args"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, value)| (name.clone(), json_argument_text(value)))
                    .collect();
                arguments.sort();
                contents.slices.push(TraceSlice {
                    tid,
                    start_ns,
                    end_ns: start_ns + nanos(&event["dur"]),
                    name: text("name"),
                    category: text("cat"),
                    op: event["args"]["op"].as_u64(),
                    arguments,
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

#[cfg(test)]
mod tests {
    use super::proto::{DebugAnnotation, InternedString, LegacyEvent, TrackEvent};
    use super::*;
    use dep_engine::{Device, OpId, OpState};

    /// Names of their own for every op fill the interning tables, which then start again:
    /// they hold at most `MAX_INTERNED` strings, and never give one id twice.
    #[test]
    fn interning_tables_start_again_when_full_and_never_reuse_an_id() {
        use std::collections::HashSet;
        let mut interning = Interning::default();
        let (mut names, mut values) = (HashSet::new(), HashSet::new());
        for index in 0..3 * MAX_INTERNED {
            assert!(names.insert(interning.name(&format!("A = A + i i={index}"))));
            assert!(values.insert(interning.value(&format!("t{index}"))));
            assert!(
                interning.names.len() <= MAX_INTERNED && interning.values.len() <= MAX_INTERNED
            );
        }
        // A name met again while kept keeps its id.
        let last = format!("A = A + i i={}", 3 * MAX_INTERNED - 1);
        assert_eq!(interning.name(&last), interning.n_names);
    }

    /// One packet as prost writes it (field 1 of `Trace`, length-delimited).
    fn prost_packet(out: &mut Vec<u8>, mut packet: TracePacket) {
        packet.trusted_packet_sequence_id = Some(SEQUENCE);
        out.push(0x0a);
        packet.encode_length_delimited(out).unwrap();
    }

    /// Interned strings declared in a packet: `(iid, text)` each.
    type Declared<'a> = &'a [(u64, &'a str)];

    /// A track event's packet, declaring the event names and argument values `new`; one that
    /// names no interned string (`interns`) does not say it needs them.
    fn event_packet(
        time_ns: u64,
        event: TrackEvent,
        (new_names, new_values): (Declared<'_>, Declared<'_>),
        interns: bool,
    ) -> TracePacket {
        let new = !new_names.is_empty() || !new_values.is_empty();
        TracePacket {
            timestamp: Some(time_ns),
            track_event: Some(event),
            interned_data: new.then(|| InternedData {
                event_names: new_names
                    .iter()
                    .map(|(iid, name)| Interned {
                        iid: Some(*iid),
                        name: Some(name.to_string()),
                    })
                    .collect(),
                debug_annotation_string_values: new_values
                    .iter()
                    .map(|(iid, text)| InternedString {
                        iid: Some(*iid),
                        str: Some(text.as_bytes().to_vec()),
                    })
                    .collect(),
                ..InternedData::default()
            }),
            sequence_flags: interns.then_some(NEEDS_STATE),
            ..TracePacket::default()
        }
    }

    fn uint(iid: u64, value: u64) -> DebugAnnotation {
        DebugAnnotation {
            name_iid: Some(iid),
            uint_value: Some(value),
            ..DebugAnnotation::default()
        }
    }

    fn text(iid: u64, value: &str) -> DebugAnnotation {
        DebugAnnotation {
            name_iid: Some(iid),
            string_value: Some(value.to_string()),
            ..DebugAnnotation::default()
        }
    }

    /// An argument whose value is interned value `value`.
    fn interned(iid: u64, value: u64) -> DebugAnnotation {
        DebugAnnotation {
            name_iid: Some(iid),
            string_value_iid: Some(value),
            ..DebugAnnotation::default()
        }
    }

    fn flow_end(
        time_ns: u64,
        tid: u64,
        phase: u8,
        id: u64,
        name: (u64, &str),
        new_name: bool,
    ) -> TracePacket {
        let event = TrackEvent {
            category_iids: vec![CATEGORY_DEPENDENCY],
            track_uuid: Some(THREAD_UUID + tid),
            legacy_event: Some(LegacyEvent {
                phase: Some(i32::from(phase)),
                unscoped_id: Some(id),
                bind_to_enclosing: (phase == b'f').then_some(true),
            }),
            name_iid: Some(name.0),
            ..TrackEvent::default()
        };
        let new = [name];
        let new: &[(u64, &str)] = if new_name { &new } else { &[] };
        event_packet(time_ns, event, (new, &[]), true)
    }

    /// The packets written by hand are the bytes prost writes for the same messages: a slice
    /// with every argument (a negative priority, a message, names with non-ASCII text, a long
    /// label), a flow to it, and a slice with no accesses.
    #[test]
    fn hand_written_packets_are_prosts() {
        let label: Arc<str> = Arc::from(format!("y = x + {}", "1 + ".repeat(40)).as_str());
        let names: Vec<Arc<str>> = vec![Arc::from("x"), Arc::from("δ")];
        let mut trace = PerfettoTrace::new(Vec::new());
        trace.flow(&Flow {
            id: 300,
            var: &names[0],
            hazard: crate::Hazard::ReadAfterWrite,
            more: &[],
            from: (0, 5),
            to: (1, 1_000_000),
        });
        trace.slice(&OpSlice {
            op: OpId(7),
            label: &label,
            line: 200,
            reads: &[&names[0], &names[1]],
            writes: &[&names[0]],
            state: OpState::Failed,
            device: Device::Gpu(3),
            priority: -4,
            message: Some("shapes differ"),
            worker: 1,
            start_ns: 1_000_000,
            end_ns: 1 << 40,
        });
        trace.slice(&OpSlice {
            op: OpId(8),
            label: &label,
            line: 0,
            reads: &[],
            writes: &[],
            state: OpState::Done,
            device: Device::Cpu,
            priority: 0,
            message: None,
            worker: 1,
            start_ns: 1 << 41,
            end_ns: 1 << 41,
        });
        let written = trace.finish().unwrap();

        let mut expected = Vec::new();
        let mut header = PerfettoTrace::new(Vec::new()).finish().unwrap();
        expected.append(&mut header);
        let track = |tid: u64| TracePacket {
            track_descriptor: Some(thread_track(tid, None)),
            ..TracePacket::default()
        };
        prost_packet(&mut expected, track(1));
        // Variables' names, states and devices are interned values: x 1, δ 2, failed 3,
        // gpu3 4, done 5, cpu 6.
        let names_value = |iid: u64, values: &[u64]| DebugAnnotation {
            name_iid: Some(iid),
            array_values: values
                .iter()
                .map(|value| DebugAnnotation {
                    string_value_iid: Some(*value),
                    ..DebugAnnotation::default()
                })
                .collect(),
            ..DebugAnnotation::default()
        };
        let begin = TrackEvent {
            category_iids: vec![CATEGORY_OP],
            debug_annotations: vec![
                uint(1, 7),
                uint(2, 200),
                names_value(3, &[1, 2]),
                names_value(4, &[1]),
                interned(5, 3),
                interned(6, 4),
                DebugAnnotation {
                    name_iid: Some(7),
                    int_value: Some(-4),
                    ..DebugAnnotation::default()
                },
                text(8, "shapes differ"),
            ],
            r#type: Some(SLICE_BEGIN),
            name_iid: Some(2),
            track_uuid: Some(THREAD_UUID + 1),
            ..TrackEvent::default()
        };
        // The flow's name was interned when the flow came, before the slice's label: both are
        // declared with the next packet, the slice's begin.
        prost_packet(
            &mut expected,
            event_packet(
                1_000_000,
                begin,
                (
                    &[(1, "x RAW"), (2, &label)],
                    &[(1, "x"), (2, "δ"), (3, "failed"), (4, "gpu3")],
                ),
                true,
            ),
        );
        prost_packet(&mut expected, track(0));
        prost_packet(
            &mut expected,
            flow_end(5, 0, b's', 300, (1, "x RAW"), false),
        );
        prost_packet(
            &mut expected,
            flow_end(1_000_000, 1, b'f', 300, (1, "x RAW"), false),
        );
        let end = |time_ns: u64| {
            let event = TrackEvent {
                r#type: Some(SLICE_END),
                track_uuid: Some(THREAD_UUID + 1),
                ..TrackEvent::default()
            };
            event_packet(time_ns, event, (&[], &[]), false)
        };
        prost_packet(&mut expected, end(1 << 40));
        let begin = TrackEvent {
            category_iids: vec![CATEGORY_OP],
            debug_annotations: vec![
                uint(1, 8),
                uint(2, 0),
                names_value(3, &[]),
                names_value(4, &[]),
                interned(5, 5),
                interned(6, 6),
                DebugAnnotation {
                    name_iid: Some(7),
                    int_value: Some(0),
                    ..DebugAnnotation::default()
                },
            ],
            r#type: Some(SLICE_BEGIN),
            name_iid: Some(2),
            track_uuid: Some(THREAD_UUID + 1),
            ..TrackEvent::default()
        };
        prost_packet(
            &mut expected,
            event_packet(1 << 41, begin, (&[], &[(5, "done"), (6, "cpu")]), true),
        );
        prost_packet(&mut expected, end(1 << 41));
        let first_difference = written.iter().zip(&expected).position(|(a, b)| a != b);
        assert_eq!(
            written, expected,
            "first difference at {first_difference:?}"
        );
        let contents = read(&written).unwrap();
        assert_eq!((contents.slices.len(), contents.flows.len()), (2, 1));
        let shown: Vec<_> = contents.slices[0]
            .arguments
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                ("device", "gpu3"),
                ("line", "200"),
                ("message", "shapes differ"),
                ("op", "7"),
                ("priority", "-4"),
                ("reads", "[x, δ]"),
                ("state", "failed"),
                ("writes", "[x]")
            ]
        );
    }
}
