//! The simulated policy: ops compute their real values at push (in push order, like the naive
//! policy), while their start and end times come from a cost model on a virtual clock, so the
//! same script gives the same timeline, to the nanosecond, on every run and machine.
//!
//! Each op reports its cost while it runs, in the context it is given ([`crate::OpContext::report_cost`]: flops, bytes moved, or a fixed
//! time). The simulator turns the cost into a duration on the op's device (roofline:
//! latency + max(flops / peak flops, bytes / bandwidth) + fixed time), and schedules ops as the
//! engine would: each access is granted when the accesses ahead of it on its variable that it
//! conflicts with (read after write, write after read, write after write) have ended, as a
//! variable's queue grants it, and an op is ready once all of its accesses are; each device has
//! its lanes (CPU workers, GPU streams, one lane per link) and a ready queue ordered by
//! priority, then push order. Virtual time advances only when the host waits (`wait_var`,
//! `wait_all`): up to the moment the wait would return.
//!
//! Events carry virtual times, so every view (queues, timeline, trace) shows the simulated run.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fmt;

use crate::event::{Event, EventKind, EventSink};
use crate::sim_feed::{Bookkeeping, SimOutcome};
use crate::sync::Arc;
use crate::{Device, OpId, OpState, VarId};

/// The worker of the host thread that pushes ops and waits (`main`, the engine's first).
const MAIN_WORKER: u32 = 0;

/// What an op costs, as it reports while running under the simulated policy.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    /// Floating-point operations.
    pub flops: f64,
    /// Bytes read and written in memory (or moved over a link).
    pub bytes: f64,
    /// Time the op takes whatever its device (`work(ms)`), in nanoseconds.
    pub fixed_ns: u64,
}

impl std::ops::Add for Cost {
    type Output = Cost;

    /// The two costs together.
    fn add(self, other: Cost) -> Cost {
        Cost {
            flops: self.flops + other.flops,
            bytes: self.bytes + other.bytes,
            fixed_ns: self.fixed_ns + other.fixed_ns,
        }
    }
}

/// A simulated device or link: its speed and its fixed cost per op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimDevice {
    /// Peak floating-point operations per second.
    pub flops_per_s: f64,
    /// Memory (or link) bandwidth in bytes per second.
    pub bytes_per_s: f64,
    /// Fixed time per op (launch latency, link latency), in nanoseconds.
    pub latency_ns: u64,
    /// Lanes (GPU streams, CPU workers) ops run on at once; 0: the engine's worker count.
    pub lanes: usize,
    /// For a GPU: the host's time to launch an op's kernels, in nanoseconds. When not 0, a GPU
    /// op is two things: its launch on a host lane (the engine's worker, `gpu0:s0` busy for
    /// this long), then its kernel on the stream's device lane (`dev:gpu0:s0`), which starts
    /// once launched, once the stream is free and once the kernels it depends on have ended
    /// (an event wait across streams); a CPU op reading its result waits for the kernel.
    pub launch_ns: u64,
    /// For a GPU with `launch_ns`: whether the host synchronizes after every op (MXNet before
    /// RFC 18951): the op completes, and its host lane is free, only when its kernel has
    /// ended. Otherwise it completes when launched (RFC 18951).
    pub sync: bool,
}

impl SimDevice {
    /// An H100-like GPU: 60 TFLOP/s of f32, 3 TB/s of HBM, 5 µs to launch a kernel.
    pub const GPU: SimDevice = SimDevice {
        flops_per_s: 60e12,
        bytes_per_s: 3e12,
        latency_ns: 5_000,
        lanes: 0,
        launch_ns: 0,
        sync: false,
    };
    /// One CPU core: 50 GFLOP/s, 20 GB/s, 1 µs per op.
    pub const CPU: SimDevice = SimDevice {
        flops_per_s: 50e9,
        bytes_per_s: 20e9,
        latency_ns: 1_000,
        lanes: 0,
        launch_ns: 0,
        sync: false,
    };
    /// A PCIe 4.0 x16 link: 25 GB/s, 10 µs per transfer.
    pub const PCIE: SimDevice = SimDevice {
        flops_per_s: f64::INFINITY,
        bytes_per_s: 25e9,
        latency_ns: 10_000,
        lanes: 0,
        launch_ns: 0,
        sync: false,
    };
    /// The network between ranks: 100 Gbit/s (12.5 GB/s), 5 µs per message.
    pub const NET: SimDevice = SimDevice {
        flops_per_s: f64::INFINITY,
        bytes_per_s: 12.5e9,
        latency_ns: 5_000,
        lanes: 0,
        launch_ns: 0,
        sync: false,
    };
    /// An NVLink link between GPUs: 300 GB/s, 5 µs per transfer.
    pub const NVLINK: SimDevice = SimDevice {
        flops_per_s: f64::INFINITY,
        bytes_per_s: 300e9,
        latency_ns: 5_000,
        lanes: 0,
        launch_ns: 0,
        sync: false,
    };

    /// How long an op of `cost` takes here, in nanoseconds.
    pub fn duration_ns(&self, cost: Cost) -> u64 {
        let compute = if cost.flops > 0.0 {
            cost.flops / self.flops_per_s
        } else {
            0.0
        };
        let memory = if cost.bytes > 0.0 {
            cost.bytes / self.bytes_per_s
        } else {
            0.0
        };
        // Saturating: a duration past the clock's limit stays at the limit, never wraps.
        let busy_ns = (compute.max(memory) * 1e9).round() as u64;
        self.latency_ns
            .saturating_add(busy_ns)
            .saturating_add(cost.fixed_ns)
    }
}

impl fmt::Display for SimDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.3} TFLOP/s, {:.1} GB/s, {} µs latency",
            self.flops_per_s / 1e12,
            self.bytes_per_s / 1e9,
            self.latency_ns as f64 / 1e3
        )
    }
}

/// The default model of a target name (`cpu`, `gpu`, `gpu3`, `copy`, `pcie`, `nvlink`, `net`).
pub fn default_model(target: &str) -> Option<SimDevice> {
    match target {
        "cpu" => Some(SimDevice::CPU),
        "net" => Some(SimDevice::NET),
        "copy" | "pcie" => Some(SimDevice::PCIE),
        "nvlink" => Some(SimDevice::NVLINK),
        "gpu" => Some(SimDevice::GPU),
        gpu if gpu
            .strip_prefix("gpu")
            .is_some_and(|index| index.parse::<u16>().is_ok()) =>
        {
            Some(SimDevice::GPU)
        }
        _ => None,
    }
}

/// The simulated machine: a model per device, with defaults for each kind.
#[derive(Clone, Debug, Default)]
pub struct SimModel {
    overrides: BTreeMap<String, SimDevice>,
}

impl SimModel {
    /// Sets the model of `target`: a device (`cpu`, `gpu1`), every GPU (`gpu`), a link
    /// (`cpu->gpu0`), or every link of a kind (`pcie`, `nvlink`), or the copy lane (`copy`).
    pub fn set(&mut self, target: &str, device: SimDevice) {
        self.overrides.insert(target.to_string(), device);
    }

    /// The model that applies to `device`.
    pub fn device(&self, device: Device) -> SimDevice {
        let exact = self.overrides.get(&device.to_string());
        let family = match device {
            Device::Cpu => ("cpu", SimDevice::CPU),
            Device::Gpu(_) => ("gpu", SimDevice::GPU),
            Device::Copy => ("copy", SimDevice::PCIE),
            Device::Net => ("net", SimDevice::NET),
            Device::Link(from, to) if from > 0 && to > 0 => ("nvlink", SimDevice::NVLINK),
            Device::Link(..) => ("pcie", SimDevice::PCIE),
        };
        exact
            .or_else(|| self.overrides.get(family.0))
            .copied()
            .unwrap_or(family.1)
    }
}

/// One op known to the simulator.
struct SimOp {
    id: OpId,
    device: Device,
    priority: i32,
    writes: Vec<VarId>,
    duration_ns: u64,
    state: OpState,
    message: Option<String>,
    /// Its accesses, reads then writes, each with how many ops ahead of it on its variable it
    /// still waits for (a read for the last writer, a write for the last writer and the readers
    /// since): an access is granted when its count reaches 0, as a variable's queue grants it
    /// when those ops release the variable.
    accesses: Vec<(VarId, u32)>,
    /// How many of its accesses are not granted: the op is ready when none is left.
    n_waiting: usize,
    /// The accesses of later ops that wait for this one: (op, index into its `accesses`).
    successors: Vec<(usize, u32)>,
    end_ns: Option<u64>,
    /// For a GPU op whose launch is modelled: the launch time and whether the host syncs.
    launch: Option<(u64, bool)>,
    /// When the kernels it depends on end (0: none): its kernel, or its start for a CPU op,
    /// waits until then.
    after_ns: u64,
    /// Its kernel, once launched: the device lane, start and end.
    kernel: Option<(Arc<str>, u64, u64)>,
    /// Engine bookkeeping (a wait, a deletion): run by the host when ready, taking no lane.
    bookkeeping: Option<Bookkeeping>,
}

/// A lane: one worker of a device (a CPU thread, a GPU stream, a link).
struct Lane {
    worker: u32,
    free_at: u64,
    /// For a GPU stream whose launches are modelled: when its device lane is free.
    stream_free_at: u64,
}

/// The discrete-event simulation of one engine's ops.
pub(crate) struct Simulator {
    pub(crate) model: SimModel,
    now_ns: u64,
    /// The ops not retired yet, by index (numbered in the order they entered): an op that has
    /// ended and whose kernel has ended is retired, as nothing waits for it any more, so a
    /// long run holds the ops of its recent past only. An index missing here is such an op.
    ops: HashMap<usize, SimOp>,
    /// The index the next op gets.
    next_index: usize,
    /// Ended ops whose kernel has not: retired once the clock reaches its end, by that end.
    retiring: BinaryHeap<Reverse<(u64, usize)>>,
    /// Per variable: its last writer and the readers since (indices into `ops`).
    history: HashMap<VarId, (Option<usize>, Vec<usize>)>,
    ready: BTreeMap<Device, BinaryHeap<(i32, Reverse<usize>)>>,
    running: BinaryHeap<Reverse<(u64, usize)>>,
    /// The ends of launched kernels still to come: the clock advances to them too.
    kernels: BinaryHeap<Reverse<u64>>,
    lanes: BTreeMap<Device, Vec<Lane>>,
    n_unfinished: usize,
    lanes_per_device: (usize, usize),
}

/// The lanes a device gets: CPU threads, GPU streams, one per link.
fn lane_count(device: Device, (threads, gpu_streams): (usize, usize)) -> usize {
    match device {
        Device::Cpu => threads,
        Device::Gpu(_) => gpu_streams,
        Device::Copy | Device::Link(..) | Device::Net => 1,
    }
}

impl Simulator {
    pub(crate) fn new(threads: usize, gpu_streams: usize) -> Simulator {
        Simulator {
            model: SimModel::default(),
            now_ns: 0,
            ops: HashMap::new(),
            next_index: 0,
            retiring: BinaryHeap::new(),
            history: HashMap::new(),
            ready: BTreeMap::new(),
            running: BinaryHeap::new(),
            kernels: BinaryHeap::new(),
            lanes: BTreeMap::new(),
            n_unfinished: 0,
            lanes_per_device: (threads.max(1), gpu_streams.max(1)),
        }
    }

    /// The virtual time of the host: where pushes happen.
    pub(crate) fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Adds an op that has run (its values are computed) with the cost it reported.
    pub(crate) fn add(&mut self, sink: &dyn EventSink, id: OpId, outcome: SimOutcome, cost: Cost) {
        let SimOutcome {
            pushed,
            device,
            priority,
            reads,
            writes,
            state,
            message,
            bookkeeping,
        } = outcome;
        let index = self.next_index;
        self.next_index += 1;
        // A GPU op launches its kernels once its checks pass: one that failed launched nothing
        // and took no time; one skipped or cancelled never ran.
        let on_gpu = matches!(device, Device::Gpu(_));
        let ran = state == OpState::Done || (state == OpState::Failed && !on_gpu);
        let duration_ns = if ran && bookkeeping.is_none() {
            self.model.device(device).duration_ns(cost)
        } else {
            0
        };
        // Each access (reads, then writes) with the ops ahead of it on its variable that it
        // conflicts with: (that op, the access's index).
        let mut ahead: Vec<(usize, u32)> = Vec::new();
        let mut accesses: Vec<(VarId, u32)> = Vec::with_capacity(reads.len() + writes.len());
        for var in &reads {
            let (writer, readers) = self.history.entry(*var).or_default();
            let access = accesses.len() as u32;
            ahead.extend(writer.map(|writer| (writer, access)));
            accesses.push((*var, 0));
            // A variable only read (`b` in a loop of `c = c + b`) would keep every reader:
            // the retired ones are dropped each time the list doubles.
            if readers.len() >= 64 && readers.len().is_power_of_two() {
                readers.retain(|reader| self.ops.contains_key(reader));
            }
            readers.push(index);
        }
        for var in &writes {
            let (writer, readers) = self.history.entry(*var).or_default();
            let access = accesses.len() as u32;
            ahead.extend(
                writer
                    .iter()
                    .chain(readers.iter())
                    .filter(|&&other| other != index)
                    .map(|&other| (other, access)),
            );
            accesses.push((*var, 0));
            *writer = Some(index);
            readers.clear();
        }
        // Kernels of ended predecessors may still run (launched, not done).
        let after_ns = ahead
            .iter()
            .filter_map(|(other, _)| self.ops.get(other)?.kernel.as_ref().map(|kernel| kernel.2))
            .max()
            .unwrap_or(0);
        // An access waits only for the ops that have not ended: the others released it.
        ahead.retain(|(other, _)| {
            self.ops
                .get(other)
                .is_some_and(|op| op.end_ns.is_none_or(|end| end > self.now_ns))
        });
        for &(other, access) in &ahead {
            accesses[access as usize].1 += 1;
            self.op_mut(other).successors.push((index, access));
        }
        let n_waiting = accesses.iter().filter(|(_, n_ahead)| *n_ahead > 0).count();
        let model = self.model.device(device);
        let launch = (on_gpu && state == OpState::Done && model.launch_ns > 0)
            .then_some((model.launch_ns, model.sync));
        self.ops.insert(
            index,
            SimOp {
                id,
                device,
                priority,
                writes,
                duration_ns,
                state,
                message,
                accesses,
                n_waiting,
                successors: Vec::new(),
                end_ns: None,
                launch,
                after_ns,
                kernel: None,
                bookkeeping,
            },
        );
        self.n_unfinished += 1;
        self.emit(sink, pushed);
        // Granted at push: the accesses that wait for nothing, in the order the engines grant
        // them (reads, then writes); the others are granted as the ops ahead of them end.
        let op = self.op(index);
        for (var, _) in op.accesses.iter().filter(|(_, n_ahead)| *n_ahead == 0) {
            self.emit(
                sink,
                EventKind::Granted {
                    op: op.id,
                    var: *var,
                },
            );
        }
        if n_waiting == 0 {
            self.make_ready(sink, index);
        }
    }

    fn emit(&self, sink: &dyn EventSink, kind: EventKind) {
        sink.event(Event {
            time_ns: self.now_ns,
            kind,
        });
    }

    /// The op numbered `index`, which has not been retired.
    fn op(&self, index: usize) -> &SimOp {
        self.ops.get(&index).expect("an op not retired")
    }

    /// [`Self::op`], to change.
    fn op_mut(&mut self, index: usize) -> &mut SimOp {
        self.ops.get_mut(&index).expect("an op not retired")
    }

    fn make_ready(&mut self, sink: &dyn EventSink, index: usize) {
        let op = self.op(index);
        self.emit(sink, EventKind::Ready { op: op.id });
        if op.state == OpState::Cancelled || op.bookkeeping.is_some() {
            // As on the real engines, a cancelled op never starts, and a wait or a deletion runs
            // at once on the thread that makes it ready (here the host, `main`): neither takes a
            // lane. A deletion ends when it becomes ready (a kernel still reading the variable
            // frees it in stream order); a wait is a CPU consumer, and the host waits in it
            // until the kernels it depends on have ended, as `var_is_idle` says.
            let end_ns = match op.bookkeeping {
                Some(Bookkeeping::Wait) if op.state != OpState::Cancelled => {
                    self.now_ns.max(op.after_ns)
                }
                _ => self.now_ns,
            };
            if op.state != OpState::Cancelled {
                let id = op.id;
                self.emit(
                    sink,
                    EventKind::Started {
                        op: id,
                        worker: MAIN_WORKER,
                    },
                );
            }
            self.op_mut(index).end_ns = Some(end_ns);
            self.running.push(Reverse((end_ns, index)));
            return;
        }
        let key = (op.priority, Reverse(index));
        self.ready.entry(op.device).or_default().push(key);
    }

    /// Advances virtual time until `done` holds (or nothing is left to run).
    pub(crate) fn run_until(
        &mut self,
        sink: &dyn EventSink,
        new_lane: &mut dyn FnMut(Device, usize) -> u32,
        done: &dyn Fn(&Simulator) -> bool,
    ) {
        loop {
            self.start_ready(sink, new_lane);
            // Ops that end at the current instant (a wait, a deletion, an op of no cost) end
            // before the host goes on: a later push must not see one ended that no event says
            // has finished.
            if let Some(Reverse((_, index))) = self
                .running
                .peek()
                .copied()
                .filter(|Reverse((end, _))| *end <= self.now_ns)
            {
                self.running.pop();
                self.finish(sink, index);
                continue;
            }
            if done(self) {
                return;
            }
            let next_op = self.running.peek().map(|Reverse((end, _))| *end);
            let next_kernel = self.kernels.peek().map(|Reverse(end)| *end);
            let Some(end_ns) = next_op.into_iter().chain(next_kernel).min() else {
                return;
            };
            self.now_ns = self.now_ns.max(end_ns);
            while self
                .kernels
                .peek()
                .is_some_and(|Reverse(end)| *end <= end_ns)
            {
                self.kernels.pop();
            }
            while let Some(Reverse((_, index))) = self
                .retiring
                .peek()
                .copied()
                .filter(|Reverse((end, _))| *end <= end_ns)
            {
                self.retiring.pop();
                self.ops.remove(&index);
            }
        }
    }

    /// Whether a wait for `var` returns now: the last op writing it has ended (and so have the
    /// writes before it, which it waited for). Reads pushed before may go on, as on the real
    /// engines, where a wait reads the variable and so runs beside them (MXNet's WaitForVar).
    /// A wait is a CPU consumer: it also waits for the writer's kernel.
    pub(crate) fn var_is_idle(&self, var: VarId) -> bool {
        match self.history.get(&var) {
            Some((Some(writer), _)) => match self.ops.get(writer) {
                Some(writer) => {
                    writer.end_ns.is_some_and(|end| end <= self.now_ns)
                        && writer
                            .kernel
                            .as_ref()
                            .is_none_or(|kernel| kernel.2 <= self.now_ns)
                }
                // Retired: it and its kernel have ended.
                None => true,
            },
            Some((None, _)) | None => true,
        }
    }

    /// How many ops it holds, not retired (see [`Simulator::ops`]).
    #[cfg(test)]
    pub(crate) fn n_held(&self) -> usize {
        self.ops.len()
    }

    /// How many ops have entered and not ended.
    pub(crate) fn n_unfinished(&self) -> usize {
        self.n_unfinished
    }

    /// Whether every op and every kernel has ended.
    pub(crate) fn is_idle(&self) -> bool {
        self.n_unfinished == 0 && self.kernels.is_empty()
    }

    fn start_ready(
        &mut self,
        sink: &dyn EventSink,
        new_lane: &mut dyn FnMut(Device, usize) -> u32,
    ) {
        let devices: Vec<Device> = self
            .ready
            .iter()
            .filter(|(_, heap)| !heap.is_empty())
            .map(|(device, _)| *device)
            .collect();
        for device in devices {
            if !self.lanes.contains_key(&device) {
                let n = match self.model.device(device).lanes {
                    0 => lane_count(device, self.lanes_per_device),
                    lanes => lanes,
                };
                let lanes = (0..n)
                    .map(|lane| Lane {
                        worker: new_lane(device, lane),
                        free_at: 0,
                        stream_free_at: 0,
                    })
                    .collect();
                self.lanes.insert(device, lanes);
            }
            loop {
                let now = self.now_ns;
                let Some((lane_index, lane)) = self.lanes.get_mut(&device).and_then(|lanes| {
                    lanes
                        .iter_mut()
                        .enumerate()
                        .find(|(_, lane)| lane.free_at <= now)
                }) else {
                    break;
                };
                let Some((_, Reverse(index))) =
                    self.ready.get_mut(&device).and_then(BinaryHeap::pop)
                else {
                    break;
                };
                let op = self.ops.get_mut(&index).expect("a ready op is not retired");
                let end = match op.launch {
                    Some((launch_ns, sync)) => {
                        // The host launches; the stream runs the kernel when it can.
                        let launched = now + launch_ns;
                        let start = launched.max(lane.stream_free_at).max(op.after_ns);
                        let kernel_end = start + op.duration_ns;
                        lane.stream_free_at = kernel_end;
                        let name: Arc<str> = Arc::from(format!("{device}:s{lane_index}"));
                        op.kernel = Some((name, start, kernel_end));
                        self.kernels.push(Reverse(kernel_end));
                        if sync {
                            kernel_end
                        } else {
                            launched
                        }
                    }
                    // A consumer of kernels' results waits for them inside the op.
                    None => now.max(op.after_ns) + op.duration_ns,
                };
                lane.free_at = end;
                op.end_ns = Some(end);
                let (id, worker) = (op.id, lane.worker);
                self.emit(sink, EventKind::Started { op: id, worker });
                self.running.push(Reverse((end, index)));
            }
        }
    }

    fn finish(&mut self, sink: &dyn EventSink, index: usize) {
        let op = self.op(index);
        self.emit(
            sink,
            EventKind::Finished {
                op: op.id,
                state: op.state,
                message: op.message.clone(),
            },
        );
        if op.bookkeeping == Some(Bookkeeping::Delete) {
            // Sent here, in virtual time, so that it follows every access to the variable.
            for var in op.writes.clone() {
                self.emit(sink, EventKind::VarDeleted { var });
                // Gone: no later op names it.
                self.history.remove(&var);
            }
        }
        let op = self.op(index);
        if let Some((lane, start_ns, end_ns)) = op.kernel.clone() {
            self.emit(
                sink,
                EventKind::DeviceSpan {
                    op: op.id,
                    lane,
                    start_ns,
                    end_ns,
                },
            );
        }
        self.n_unfinished -= 1;
        let kernel_end = self.op(index).kernel.as_ref().map_or(0, |kernel| kernel.2);
        let successors = std::mem::take(&mut self.op_mut(index).successors);
        for (successor, access) in successors {
            let successor_op = self.op_mut(successor);
            successor_op.after_ns = successor_op.after_ns.max(kernel_end);
            // An access is granted when the last op ahead of it releases the variable, as the
            // real engines grant it, whether or not the op's other accesses are granted.
            let (var, n_ahead) = &mut successor_op.accesses[access as usize];
            *n_ahead -= 1;
            if *n_ahead > 0 {
                continue;
            }
            let var = *var;
            successor_op.n_waiting -= 1;
            let (id, ready) = (successor_op.id, successor_op.n_waiting == 0);
            self.emit(sink, EventKind::Granted { op: id, var });
            if ready {
                self.make_ready(sink, successor);
            }
        }
        // Nothing waits for an ended op but for its kernel: retired now, or once that ends.
        if kernel_end <= self.now_ns {
            self.ops.remove(&index);
        } else {
            self.retiring.push(Reverse((kernel_end, index)));
        }
    }
}

/// A sink that drops everything, for simulated runs nobody observes.
pub(crate) struct NoSink;

impl EventSink for NoSink {
    fn event(&self, _: Event) {}
}

/// The sink events of a simulated run go to.
pub(crate) fn sink_or_none(sink: &Option<Arc<dyn EventSink>>) -> &dyn EventSink {
    match sink {
        Some(sink) => sink.as_ref(),
        None => &NoSink,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roofline_durations() {
        let gpu = SimDevice::GPU;
        assert_eq!(gpu.duration_ns(Cost::default()), 5_000);
        assert_eq!(
            gpu.duration_ns(Cost {
                flops: 60e9,
                bytes: 0.0,
                fixed_ns: 0
            }),
            5_000 + 1_000_000
        );
        assert_eq!(
            gpu.duration_ns(Cost {
                flops: 0.0,
                bytes: 3e9,
                fixed_ns: 7
            }),
            5_000 + 1_000_000 + 7
        );
        let mut model = SimModel::default();
        assert_eq!(model.device(Device::Link(1, 2)), SimDevice::NVLINK);
        assert_eq!(model.device(Device::Link(0, 2)), SimDevice::PCIE);
        model.set(
            "gpu",
            SimDevice {
                flops_per_s: 1.0,
                bytes_per_s: 1.0,
                latency_ns: 1,
                lanes: 0,
                launch_ns: 0,
                sync: false,
            },
        );
        model.set(
            "gpu1",
            SimDevice {
                flops_per_s: 2.0,
                bytes_per_s: 2.0,
                latency_ns: 2,
                lanes: 1,
                launch_ns: 0,
                sync: false,
            },
        );
        assert_eq!(model.device(Device::Gpu(0)).latency_ns, 1);
        assert_eq!(model.device(Device::Gpu(1)).latency_ns, 2);
    }
}
