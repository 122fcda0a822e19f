//! Views of a job of several ranks: each rank records its own events ([`RankRun`]); these are
//! merged into one Chrome trace with a process per rank and arrows between the ranks' matching
//! communications ([`chrome_trace`]), one timeline with each rank's lanes ([`timeline`]), and
//! per-rank figures for the summary ([`RankFigures`]): compute busy, communication time, and
//! how much of the communication ran while compute ran (the overlap fraction).
//!
//! Communications are found by their op's device ([`Device::Net`]) and matched as the ranks
//! match them (see `dep-interp`'s `comm` module): the k-th collective of every rank is one
//! collective, and the k-th message from rank a to rank b (a label ending ` → rB` on a) meets
//! the k-th receive on b from a (a label ending ` ← rA`).

use std::collections::BTreeMap;

use dep_engine::{Device, Event, EventKind, OpId, VarId};
use serde_json::{json, Value};

use crate::replay::{OpRecord, Replay};
use crate::svg::{self, TimelineOptions};
use crate::util::format_ns;

/// The marker a send's label ends with, before the receiving rank: `send(x, 1) → r1`.
pub const SEND_MARK: &str = " → r";
/// The marker a receive's label ends with, before the sending rank: `y = recv(0, 6) ← r0`.
pub const RECV_MARK: &str = " ← r";

/// One rank's part of a job, as it recorded it.
#[derive(Clone, Debug)]
pub struct RankRun {
    /// The rank.
    pub rank: usize,
    /// Its events, in its log's order, on its own clock.
    pub events: Vec<Event>,
    /// Its engine's worker names.
    pub worker_names: Vec<String>,
    /// How long after the earliest rank's clock started this rank's did (0 for simulated ranks,
    /// which share the virtual clock's origin).
    pub offset_ns: u64,
}

impl RankRun {
    /// The rank's own replay (its events on its own clock).
    pub fn replay(&self) -> Replay {
        Replay::new(self.events.clone(), self.worker_names.clone())
    }
}

/// Puts a simulated rank's events in an order that depends only on virtual times, so that two
/// runs give the same bytes. The simulator stamps every op event with virtual time, but a
/// variable's creation and deletion come from the interpreter's thread at whatever virtual time
/// the clock shows then, which depends on when asynchronous ops completed in real time: a
/// variable is therefore taken as created when the first op using it was pushed, and deleted
/// when the last one finished; then events are sorted by time, and at one time every creation
/// first, every deletion last, and the ops' events between by op, then by kind (an op's end
/// before the grants and start it lets happen then: an op waits only on ops pushed before it).
pub fn order_simulated(events: &mut [Event]) {
    let mut first_use: BTreeMap<VarId, u64> = BTreeMap::new();
    let mut last_use: BTreeMap<VarId, u64> = BTreeMap::new();
    let mut op_vars: BTreeMap<OpId, Vec<VarId>> = BTreeMap::new();
    for event in events.iter() {
        match &event.kind {
            EventKind::Pushed {
                op, reads, writes, ..
            } => {
                for var in reads.iter().chain(writes) {
                    first_use.entry(*var).or_insert(event.time_ns);
                }
                op_vars.insert(*op, reads.iter().chain(writes).copied().collect());
            }
            EventKind::Finished { op, .. } => {
                for var in op_vars.get(op).into_iter().flatten() {
                    let last = last_use.entry(*var).or_insert(event.time_ns);
                    *last = (*last).max(event.time_ns);
                }
            }
            _ => {}
        }
    }
    for event in events.iter_mut() {
        match &event.kind {
            EventKind::VarCreated { var, .. } => {
                if let Some(time) = first_use.get(var) {
                    event.time_ns = *time;
                }
            }
            EventKind::VarDeleted { var } => {
                if let Some(time) = last_use.get(var) {
                    event.time_ns = *time;
                }
            }
            _ => {}
        }
    }
    events.sort_by_key(|event| (event.time_ns, kind_order(&event.kind)));
}

/// The order of events at one time: every creation first, every deletion last, and between
/// them the ops' events by op, then by kind. By op, not by kind: ops are numbered in push
/// order, and an op waits only on ops pushed before it, so an op's end comes before the grants
/// and the start it lets happen at the same virtual time (a zero-latency successor).
fn kind_order(kind: &EventKind) -> (u8, u64, u8, u64) {
    match kind {
        EventKind::VarCreated { var, .. } => (0, var.0, 0, 0),
        EventKind::Pushed { op, .. } => (1, op.0, 0, 0),
        EventKind::Granted { op, var } => (1, op.0, 1, var.0),
        EventKind::Ready { op } => (1, op.0, 2, 0),
        EventKind::Cancelled { op } => (1, op.0, 3, 0),
        EventKind::Started { op, .. } => (1, op.0, 4, 0),
        EventKind::Finished { op, .. } => (1, op.0, 5, 0),
        EventKind::DeviceSpan { op, .. } => (1, op.0, 6, 0),
        EventKind::VarDeleted { var } => (2, var.0, 0, 0),
    }
}

/// Every rank's events in one replay: rank r's op n becomes op `n * ranks + r` (its variables
/// likewise, named `r{rank} {name}` when there are several ranks), its workers are named
/// `r{rank} {name}`, its device lanes `r{rank} {lane}`, and its times are moved by its offset.
/// The ranks' events are interleaved in time order (the earlier rank first at a tie), each
/// rank's kept in its own order, so that stepping through the replay moves forward in time.
pub fn merge(runs: &[RankRun]) -> Replay {
    let n = runs.len().max(1) as u64;
    let mut by_rank: Vec<Vec<Event>> = Vec::with_capacity(runs.len());
    let mut worker_names = Vec::new();
    for run in runs {
        let mut events = Vec::with_capacity(run.events.len());
        let rank = run.rank as u64;
        let first_worker = worker_names.len() as u32;
        worker_names.extend(
            run.worker_names
                .iter()
                .map(|name| format!("r{} {name}", run.rank)),
        );
        let op = |id: OpId| OpId(id.0 * n + rank);
        let var = |id: VarId| VarId(id.0 * n + rank);
        let time = |ns: u64| ns + run.offset_ns;
        for event in &run.events {
            let kind = match &event.kind {
                EventKind::VarCreated { var: v, name } => EventKind::VarCreated {
                    var: var(*v),
                    name: match n {
                        1 => name.clone(),
                        _ => format!("r{} {name}", run.rank).into(),
                    },
                },
                EventKind::VarDeleted { var: v } => EventKind::VarDeleted { var: var(*v) },
                EventKind::Pushed {
                    op: o,
                    label,
                    line,
                    reads,
                    writes,
                    device,
                    priority,
                } => EventKind::Pushed {
                    op: op(*o),
                    label: label.clone(),
                    line: *line,
                    reads: reads.iter().map(|v| var(*v)).collect(),
                    writes: writes.iter().map(|v| var(*v)).collect(),
                    device: *device,
                    priority: *priority,
                },
                EventKind::Granted { op: o, var: v } => EventKind::Granted {
                    op: op(*o),
                    var: var(*v),
                },
                EventKind::Ready { op: o } => EventKind::Ready { op: op(*o) },
                EventKind::Cancelled { op: o } => EventKind::Cancelled { op: op(*o) },
                EventKind::Started { op: o, worker } => EventKind::Started {
                    op: op(*o),
                    worker: worker + first_worker,
                },
                EventKind::Finished {
                    op: o,
                    state,
                    message,
                } => EventKind::Finished {
                    op: op(*o),
                    state: *state,
                    message: message.clone(),
                },
                EventKind::DeviceSpan {
                    op: o,
                    lane,
                    start_ns,
                    end_ns,
                } => EventKind::DeviceSpan {
                    op: op(*o),
                    lane: format!("r{} {lane}", run.rank).into(),
                    start_ns: time(*start_ns),
                    end_ns: time(*end_ns),
                },
            };
            events.push(Event {
                time_ns: time(event.time_ns),
                kind,
            });
        }
        by_rank.push(events);
    }
    let mut replay = Replay::new(in_time_order(by_rank), worker_names);
    replay.name_ranks(n);
    replay
}

/// The events of every rank in one list: repeatedly the next event of the rank whose next
/// event is earliest (the earlier rank at a tie), so that each rank's events keep their order.
fn in_time_order(by_rank: Vec<Vec<Event>>) -> Vec<Event> {
    let mut merged = Vec::with_capacity(by_rank.iter().map(Vec::len).sum());
    let mut ranks: Vec<std::iter::Peekable<std::vec::IntoIter<Event>>> = by_rank
        .into_iter()
        .map(|events| events.into_iter().peekable())
        .collect();
    let mut next = std::collections::BinaryHeap::new();
    for (rank, events) in ranks.iter_mut().enumerate() {
        if let Some(event) = events.peek() {
            next.push(std::cmp::Reverse((event.time_ns, rank)));
        }
    }
    while let Some(std::cmp::Reverse((_, rank))) = next.pop() {
        let events = &mut ranks[rank];
        merged.extend(events.next());
        if let Some(event) = events.peek() {
            next.push(std::cmp::Reverse((event.time_ns, rank)));
        }
    }
    merged
}

/// The timeline of every rank, each with its own lanes (`r0 cpu0`, `r0 net:0`, `r1 cpu0`...).
pub fn timeline(runs: &[RankRun], options: &TimelineOptions) -> String {
    svg::timeline(&merge(runs), options)
}

/// One communication of a rank, as its op's label tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Comm {
    Collective,
    Send { to: usize },
    Recv { from: usize },
}

/// What a communication op is, from its label.
fn comm_of(op: &OpRecord) -> Option<Comm> {
    if op.device != Device::Net {
        return None;
    }
    let peer = |mark: &str| {
        let (_, after) = op.label.rsplit_once(mark)?;
        after
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    if let Some(to) = peer(SEND_MARK) {
        return Some(Comm::Send { to });
    }
    if let Some(from) = peer(RECV_MARK) {
        return Some(Comm::Recv { from });
    }
    Some(Comm::Collective)
}

/// Where an op ran in the merged replay: (rank, merged worker, start, end).
type Place = (usize, u32, u64, u64);

/// One end of an arrow between ranks: (rank, merged worker, time in ns), the time inside its
/// op's slice, which binds it to that slice.
type ArrowEnd = (usize, u32, u64);

/// An arrow between two ranks' ops: its name, and its two ends.
struct CommArrow {
    name: String,
    from: ArrowEnd,
    to: ArrowEnd,
}

/// How far inside its op's slice an arrow's end sits (at most half the slice).
const ARROW_INSET_NS: u64 = 1;

/// An arrow leaving `place`'s op as it starts: what the other end waited for is this op
/// having started (a send posted, the last rank joining a collective).
fn at_start((rank, worker, start, end): Place) -> ArrowEnd {
    (
        rank,
        worker,
        start + ARROW_INSET_NS.min(end.saturating_sub(start) / 2),
    )
}

/// An arrow reaching `place`'s op as it ends: the end is what waited (a receive completing, a
/// rank's part of a collective finishing once the last rank joined). Arrows so placed point
/// forward in time, where arrows between the slices' middles pointed back whenever the waiting
/// op had started long before the other.
fn at_end((rank, worker, start, end): Place) -> ArrowEnd {
    (
        rank,
        worker,
        end - ARROW_INSET_NS.min(end.saturating_sub(start) / 2),
    )
}

/// The arrows between matching communications of the merged replay: from each send's start to
/// its receive's end, and for each collective, from the start of the part of the rank that
/// joined it last (the one the others waited for) to the end of every other rank's part.
fn comm_arrows(merged: &Replay, n: usize) -> Vec<CommArrow> {
    let mut collectives: Vec<Vec<Place>> = vec![Vec::new(); n];
    let mut sends: BTreeMap<(usize, usize), Vec<Place>> = BTreeMap::new();
    let mut recvs: BTreeMap<(usize, usize), Vec<Place>> = BTreeMap::new();
    for op in merged.ops() {
        let Some(comm) = comm_of(op) else { continue };
        let rank = (op.id.0 % n as u64) as usize;
        let (Some(worker), Some(start), Some(end)) = (op.worker, op.started_ns, op.finished_ns)
        else {
            continue;
        };
        let place = (rank, worker, start, end);
        match comm {
            Comm::Collective => collectives[rank].push(place),
            Comm::Send { to } => sends.entry((rank, to)).or_default().push(place),
            Comm::Recv { from } => recvs.entry((from, rank)).or_default().push(place),
        }
    }
    let mut arrows = Vec::new();
    for ((from, to), sent) in &sends {
        let received = recvs.get(&(*from, *to)).map_or(&[][..], Vec::as_slice);
        for (k, (send, recv)) in sent.iter().zip(received).enumerate() {
            arrows.push(CommArrow {
                name: format!("message {k} r{from} → r{to}"),
                from: at_start(*send),
                to: at_end(*recv),
            });
        }
    }
    let n_collectives = collectives.iter().map(Vec::len).min().unwrap_or(0);
    for k in 0..n_collectives {
        let parts: Vec<Place> = collectives.iter().map(|ops| ops[k]).collect();
        let last = parts
            .iter()
            .copied()
            .max_by_key(|(rank, _, start, _)| (*start, std::cmp::Reverse(*rank)))
            .expect("at least one rank");
        for part in parts.iter().filter(|part| part.0 != last.0) {
            arrows.push(CommArrow {
                name: format!("collective {k}: r{} joined last", last.0),
                from: at_start(last),
                to: at_end(*part),
            });
        }
    }
    arrows
}

/// Every rank's run as one Perfetto protobuf trace: the merged run (each rank's lanes named
/// `r1 cpu:0`, ... and its ops numbered as in [`merge`]) with its slices and dependency arrows,
/// plus the arrows between ranks (category `comm`) that [`chrome_trace`] draws.
pub fn perfetto_trace(runs: &[RankRun]) -> Vec<u8> {
    let n = runs.len().max(1);
    let merged = merge(runs);
    let mut trace = crate::perfetto::PerfettoTrace::new(Vec::new());
    trace.write_replay(&merged);
    let end = |(_, worker, time): ArrowEnd| (u64::from(worker), time);
    for (index, arrow) in comm_arrows(&merged, n).into_iter().enumerate() {
        trace.comm_arrow(index as u64, &arrow.name, end(arrow.from), end(arrow.to));
    }
    trace.finish().expect("writing to memory cannot fail")
}

/// Every rank's run as one Chrome trace (JSON): a process per rank (`rank 0`, `rank 1`...) with
/// its workers as threads, its ops as slices and its dependencies as arrows, plus an arrow
/// (category `comm`) from each send to its receive and from the last rank to join a collective
/// to the others' ends of it. Ops keep their own rank's numbers in `args.op`. The merged event
/// log goes under `depEvents`, with how many ranks it merges (`ranks`), so that `dep replay`
/// steps through every rank's events and names each op's rank.
pub fn chrome_trace(runs: &[RankRun]) -> String {
    let n = runs.len().max(1);
    let merged = merge(runs);
    let text = crate::trace::chrome_trace(&merged);
    let mut document: Value =
        serde_json::from_str(&text).expect("the trace writer writes valid JSON");
    // Each merged worker's rank, and its tid within the rank's process.
    let mut worker_rank: Vec<(usize, u64)> = Vec::new();
    for run in runs {
        for index in 0..run.worker_names.len() {
            worker_rank.push((run.rank, index as u64));
        }
    }
    let mut device_lane_rank: BTreeMap<u64, usize> = BTreeMap::new();
    let events = document["traceEvents"]
        .as_array_mut()
        .expect("a trace has trace events");
    for event in events.iter() {
        if event["ph"] == "M" && event["name"] == "thread_name" {
            let (Some(tid), Some(name)) = (event["tid"].as_u64(), event["args"]["name"].as_str())
            else {
                continue;
            };
            if tid >= crate::trace::DEVICE_TID {
                if let Some(rank) = rank_prefix(name.trim_start_matches("dev:")) {
                    device_lane_rank.insert(tid, rank);
                }
            }
        }
    }
    let mut rewritten = Vec::with_capacity(events.len() + 2 * n);
    for rank in 0..n {
        rewritten.push(
            json!({"ph": "M", "name": "process_name", "pid": rank + 1, "tid": 0,
            "args": {"name": format!("rank {rank}")}}),
        );
        rewritten.push(
            json!({"ph": "M", "name": "process_sort_index", "pid": rank + 1,
            "tid": 0, "args": {"sort_index": rank}}),
        );
    }
    for mut event in events.drain(..) {
        if event["ph"] == "M" && event["name"] == "process_name" {
            continue;
        }
        let Some(tid) = event["tid"].as_u64() else {
            rewritten.push(event);
            continue;
        };
        let (rank, own_tid) = if tid >= crate::trace::DEVICE_TID {
            (device_lane_rank.get(&tid).copied().unwrap_or(0), tid)
        } else {
            worker_rank.get(tid as usize).copied().unwrap_or((0, tid))
        };
        event["pid"] = json!(rank + 1);
        event["tid"] = json!(own_tid);
        if event["ph"] == "M" && event["name"] == "thread_name" {
            if let Some(name) = event["args"]["name"].as_str() {
                let own = strip_rank_prefix(name);
                event["args"]["name"] = json!(own);
            }
        }
        if let Some(op) = event["args"]["op"].as_u64() {
            event["args"]["op"] = json!(op / n as u64);
        }
        rewritten.push(event);
    }
    for (index, arrow) in comm_arrows(&merged, n).into_iter().enumerate() {
        let end = |(rank, worker, time): ArrowEnd| {
            let own_tid = worker_rank
                .get(worker as usize)
                .map_or(u64::from(worker), |(_, tid)| *tid);
            (rank + 1, own_tid, time as f64 / 1000.0)
        };
        for (phase, (pid, tid, ts)) in [("s", end(arrow.from)), ("f", end(arrow.to))] {
            rewritten.push(json!({"ph": phase, "id": format!("comm {index}"),
                "name": arrow.name, "cat": "comm", "bp": "e", "pid": pid, "tid": tid, "ts": ts}));
        }
    }
    *events = rewritten;
    // So that `dep replay` tells each op's rank (see `Replay::name_ranks`).
    document["depEvents"]["ranks"] = json!(n);
    let mut out = serde_json::to_string(&document).expect("a JSON value serializes");
    out.push('\n');
    out
}

/// The rank of a merged lane or worker name (`r2 cpu0`: 2).
fn rank_prefix(name: &str) -> Option<usize> {
    let rest = name.strip_prefix('r')?;
    let (number, _) = rest.split_once(' ')?;
    number.parse().ok()
}

/// A worker's lane as its own rank names it: without the rank a job's merged views name it
/// after (`r2 net:0`: `net:0`); the name of a lane of one process's views as it is.
pub(crate) fn lane_within_rank(name: &str) -> &str {
    match rank_prefix(name) {
        Some(_) => name.split_once(' ').map_or(name, |(_, own)| own),
        None => name,
    }
}

/// A merged name without its rank (`r2 cpu0`: `cpu0`; `dev:r2 gpu0:s0`: `dev:gpu0:s0`).
fn strip_rank_prefix(name: &str) -> String {
    let (head, rest) = match name.strip_prefix("dev:") {
        Some(rest) => ("dev:", rest),
        None => ("", name),
    };
    match rank_prefix(rest) {
        Some(_) => format!(
            "{head}{}",
            rest.split_once(' ').map_or(rest, |(_, own)| own)
        ),
        None => name.to_string(),
    }
}

/// One rank's figures for the summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankFigures {
    /// The rank.
    pub rank: usize,
    /// From its first push to its last finish.
    pub wall_ns: u64,
    /// The time its workers spent running ops other than communications.
    pub compute_busy_ns: u64,
    /// The time during which at least one of its communications was under way.
    pub comm_ns: u64,
    /// The part of `comm_ns` during which compute ran too: communication hidden under compute.
    pub hidden_ns: u64,
}

impl RankFigures {
    /// The figures of one rank's replay.
    pub fn of(rank: usize, replay: &Replay) -> RankFigures {
        let (mut compute, mut comm) = (Vec::new(), Vec::new());
        let mut compute_busy_ns = 0;
        for op in replay.ops() {
            let (Some(start), Some(end)) = (op.started_ns, op.finished_ns) else {
                continue;
            };
            if op.device == Device::Net {
                comm.push((start, end));
            } else {
                compute_busy_ns += end.saturating_sub(start);
                compute.push((start, end));
            }
        }
        let (compute, comm) = (union(compute), union(comm));
        let (first, last) = replay.span_ns();
        RankFigures {
            rank,
            wall_ns: last.saturating_sub(first),
            compute_busy_ns,
            comm_ns: comm.iter().map(|(start, end)| end - start).sum(),
            hidden_ns: overlap(&comm, &compute),
        }
    }

    /// The fraction of communication time hidden under compute (1 when there was none).
    pub fn overlap_fraction(&self) -> f64 {
        if self.comm_ns == 0 {
            1.0
        } else {
            self.hidden_ns as f64 / self.comm_ns as f64
        }
    }
}

/// Disjoint, sorted intervals covering `intervals`.
fn union(mut intervals: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    intervals.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(intervals.len());
    for (start, end) in intervals {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// The length of the intersection of two sets of disjoint, sorted intervals.
fn overlap(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let start = a[i].0.max(b[j].0);
        let end = a[i].1.min(b[j].1);
        total += end.saturating_sub(start);
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// The summary's section on ranks: a line per rank with its compute busy time, its
/// communication time and the share of it hidden under compute.
pub fn summary_text(figures: &[RankFigures]) -> String {
    let mut text = format!("  ranks: {}\n", figures.len());
    for figure in figures {
        // No communication ran (an error stopped it, say): there is no share to give.
        let overlap = match figure.comm_ns {
            0 => String::new(),
            _ => format!(
                ", {} of it overlapped with compute",
                crate::util::format_percent(figure.hidden_ns, figure.comm_ns)
            ),
        };
        text.push_str(&format!(
            "    rank {}: compute busy {}, communication {}{overlap} (wall {})\n",
            figure.rank,
            format_ns(figure.compute_busy_ns),
            format_ns(figure.comm_ns),
            format_ns(figure.wall_ns),
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use dep_engine::OpState;

    use super::*;

    /// The events of one op that ran on `worker` of `device` from `start` to `end` (µs).
    fn op(id: u64, label: &str, device: Device, worker: u32, start: u64, end: u64) -> Vec<Event> {
        let at = |us: u64, kind| Event {
            time_ns: us * 1_000,
            kind,
        };
        let op = OpId(id);
        vec![
            at(
                start,
                EventKind::Pushed {
                    op,
                    label: Arc::from(label),
                    line: 1,
                    reads: vec![],
                    writes: vec![VarId(id)],
                    device,
                    priority: 0,
                },
            ),
            at(start, EventKind::Started { op, worker }),
            at(
                end,
                EventKind::Finished {
                    op,
                    state: OpState::Done,
                    message: None,
                },
            ),
        ]
    }

    /// At one virtual time, a simulated rank's op ends before the op it lets run is granted,
    /// made ready and started (a zero-latency successor): sorted by kind first, the successor's
    /// grant and start came before the end, and a replay showed a write and a read granted at
    /// once and two ops running on one worker.
    #[test]
    fn an_op_ends_before_the_successor_it_lets_run_at_the_same_time() {
        let at_100 = |kind| Event { time_ns: 100, kind };
        let (first, second, x) = (OpId(1), OpId(2), VarId(1));
        let mut events = vec![
            Event {
                time_ns: 0,
                kind: EventKind::VarCreated {
                    var: x,
                    name: Arc::from("x"),
                },
            },
            Event {
                time_ns: 0,
                kind: EventKind::Pushed {
                    op: first,
                    label: Arc::from("x = 1"),
                    line: 1,
                    reads: vec![],
                    writes: vec![x],
                    device: Device::Cpu,
                    priority: 0,
                },
            },
            Event {
                time_ns: 0,
                kind: EventKind::Pushed {
                    op: second,
                    label: Arc::from("y = x + 1"),
                    line: 2,
                    reads: vec![x],
                    writes: vec![],
                    device: Device::Cpu,
                    priority: 0,
                },
            },
            at_100(EventKind::Started {
                op: second,
                worker: 1,
            }),
            at_100(EventKind::Ready { op: second }),
            at_100(EventKind::Granted { op: second, var: x }),
            at_100(EventKind::Finished {
                op: first,
                state: OpState::Done,
                message: None,
            }),
        ];
        order_simulated(&mut events);
        let at_100: Vec<&EventKind> = events[3..].iter().map(|event| &event.kind).collect();
        assert!(
            matches!(
                at_100[..],
                [
                    EventKind::Finished { op: a, .. },
                    EventKind::Granted { op: b, .. },
                    EventKind::Ready { op: c },
                    EventKind::Started { op: d, .. },
                ] if *a == first && [*b, *c, *d] == [second; 3]
            ),
            "{at_100:?}"
        );
    }

    fn rank(rank: usize, ops: Vec<Vec<Event>>) -> RankRun {
        RankRun {
            rank,
            events: ops.into_iter().flatten().collect(),
            worker_names: vec!["main".into(), "cpu:0".into(), "net:0".into()],
            offset_ns: 0,
        }
    }

    #[test]
    fn the_overlap_fraction_is_the_share_of_communication_time_under_compute() {
        // Compute 0-10 and 30-40 µs; communications 5-20 and 15-35: 30 µs of communication,
        // 10 of it (5-10, 30-35) under compute.
        let run = rank(
            0,
            vec![
                op(0, "a = f(x)", Device::Cpu, 1, 0, 10),
                op(1, "g = allreduce(g)", Device::Net, 2, 5, 20),
                op(2, "h = allreduce(h)", Device::Net, 2, 15, 35),
                op(3, "b = f(a)", Device::Cpu, 1, 30, 40),
            ],
        );
        let figures = RankFigures::of(0, &run.replay());
        assert_eq!(figures.compute_busy_ns, 20_000);
        assert_eq!(figures.comm_ns, 30_000);
        assert_eq!(figures.hidden_ns, 10_000);
        assert!((figures.overlap_fraction() - 1.0 / 3.0).abs() < 1e-12);
        assert!(summary_text(&[figures]).contains(
            "rank 0: compute busy 20 µs, communication 30 µs, 33% of it overlapped with compute"
        ));
        // A rank whose communications never ran has no share to give (it read 100%).
        let alone = rank(0, vec![op(0, "a = f(x)", Device::Cpu, 1, 0, 10)]);
        let figures = RankFigures::of(0, &alone.replay());
        assert!(summary_text(&[figures])
            .contains("rank 0: compute busy 10 µs, communication 0 ns (wall"));
    }

    #[test]
    fn a_message_gets_an_arrow_from_its_send_to_its_receive_across_processes() {
        let runs = [
            rank(0, vec![op(0, "send(x, 1) → r1", Device::Net, 2, 0, 4)]),
            rank(1, vec![op(0, "y = recv(0, 2) ← r0", Device::Net, 2, 2, 8)]),
        ];
        let trace: Value = serde_json::from_str(&chrome_trace(&runs)).unwrap();
        let events = trace["traceEvents"].as_array().unwrap();
        let ends: Vec<(&str, u64, u64, f64)> = events
            .iter()
            .filter(|event| event["cat"] == "comm")
            .map(|event| {
                (
                    event["ph"].as_str().unwrap(),
                    event["pid"].as_u64().unwrap(),
                    event["tid"].as_u64().unwrap(),
                    event["ts"].as_f64().unwrap(),
                )
            })
            .collect();
        // From just inside the send's start to just inside the receive's end.
        assert_eq!(ends, [("s", 1, 2, 0.001), ("f", 2, 2, 7.999)]);
        // Each rank's op keeps its own number; the processes are named by rank.
        let slices: Vec<(u64, u64)> = events
            .iter()
            .filter(|event| event["ph"] == "X")
            .map(|event| {
                (
                    event["pid"].as_u64().unwrap(),
                    event["args"]["op"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(slices, [(1, 0), (2, 0)]);
        assert!(events.iter().any(|event| event["name"] == "process_name"
            && event["pid"] == 2
            && event["args"]["name"] == "rank 1"));
    }

    /// A collective's arrows leave the last rank to join it as it joins and reach the others'
    /// parts as they end: forward in time, although rank 0 joined long before (arrows between
    /// the slices' middles went from 10 µs back to 5 µs).
    #[test]
    fn a_collectives_arrows_point_forward_from_the_last_rank_to_join() {
        let runs = [
            rank(0, vec![op(0, "x = allreduce(x)", Device::Net, 2, 0, 10)]),
            rank(1, vec![op(0, "x = allreduce(x)", Device::Net, 2, 9, 11)]),
        ];
        let trace: Value = serde_json::from_str(&chrome_trace(&runs)).unwrap();
        let ends: Vec<(&str, u64, f64)> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|event| event["cat"] == "comm")
            .map(|event| {
                (
                    event["ph"].as_str().unwrap(),
                    event["pid"].as_u64().unwrap(),
                    event["ts"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(ends, [("s", 2, 9.001), ("f", 1, 9.999)]);
    }

    #[test]
    fn simulated_events_are_ordered_by_virtual_time_whatever_their_log_order() {
        let created = |us: u64| Event {
            time_ns: us * 1_000,
            kind: EventKind::VarCreated {
                var: VarId(0),
                name: Arc::from("_#1"),
            },
        };
        // The variable's creation was logged late, at a virtual time after its first use.
        let mut late: Vec<Event> = op(0, "a = 1", Device::Cpu, 1, 3, 5);
        late.push(created(9));
        let mut early = vec![created(1)];
        early.extend(op(0, "a = 1", Device::Cpu, 1, 3, 5));
        order_simulated(&mut late);
        order_simulated(&mut early);
        assert_eq!(late, early);
        assert!(matches!(late[0].kind, EventKind::VarCreated { .. }));
        assert_eq!(late[0].time_ns, 3_000);
    }
}
