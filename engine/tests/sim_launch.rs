//! The simulated GPU's host launches and device kernels (seed 001, MXNet RFC 18951): a GPU op
//! with a launch time is a launch on its worker, then a kernel on its stream; synchronized, the
//! op ends with its kernel; otherwise at its launch, with kernels run back to back.

use std::sync::Arc;

use dep_engine::sim::{Cost, SimDevice};
use dep_engine::{
    Device, Engine, EngineConfig, EventKind, EventLog, OpBody, OpContext, OpSpec, Policy,
};

/// A kernel of 10 µs: it reports its cost in its context.
struct TenMicroseconds;

impl OpBody for TenMicroseconds {
    fn run(&self, ctx: &OpContext) -> Result<(), String> {
        ctx.report_cost(Cost {
            fixed_ns: 10_000,
            ..Cost::default()
        });
        Ok(())
    }
}

/// A GPU op whose checks fail before it launches anything.
struct FailsItsChecks;

impl OpBody for FailsItsChecks {
    fn run(&self, _: &OpContext) -> Result<(), String> {
        Err("shapes [2] and [3] are not aligned".to_string())
    }
}

/// (start, end) pairs in nanoseconds.
type Spans = Vec<(u64, u64)>;

/// Three dependent ops of 10 µs on one stream with 5 µs launches, then a CPU op reading the
/// last: the (start, end) of each op and each kernel, and when `wait_all` left the clock.
fn chain(sync: bool) -> (Spans, Spans, u64) {
    chain_after(sync, Arc::new(TenMicroseconds))
}

/// [`chain`], its first op's body `first`.
fn chain_after(sync: bool, first: Arc<dyn OpBody>) -> (Spans, Spans, u64) {
    let log = Arc::new(EventLog::new());
    let engine = Engine::new(EngineConfig {
        policy: Policy::Sim,
        threads: 1,
        gpu_streams: 1,
        sink: Some(log.clone()),
    });
    engine.set_sim_device(
        "gpu0",
        SimDevice {
            latency_ns: 0,
            launch_ns: 5_000,
            sync,
            lanes: 1,
            ..SimDevice::GPU
        },
    );
    let x = engine.new_var("x");
    let ten_us: Arc<dyn OpBody> = Arc::new(TenMicroseconds);
    for body in [first, ten_us.clone(), ten_us] {
        engine.push(
            OpSpec::shared("x = k(x)", body)
                .reads(&[x.clone()])
                .writes(&[x.clone()])
                .device(Device::Gpu(0)),
        );
    }
    let y = engine.new_var("y");
    engine.push(OpSpec::new("y = x", || Ok(())).reads(&[x]).writes(&[y]));
    engine.wait_all();
    let events = log.events();
    let mut started = std::collections::HashMap::new();
    let mut ops = Vec::new();
    let mut kernels = Vec::new();
    for event in &events {
        match &event.kind {
            EventKind::Started { op, .. } => {
                started.insert(*op, event.time_ns);
            }
            EventKind::Finished { op, .. } => ops.push((started[op], event.time_ns)),
            EventKind::DeviceSpan {
                lane,
                start_ns,
                end_ns,
                ..
            } => {
                assert_eq!(&**lane, "gpu0:s0");
                kernels.push((*start_ns, *end_ns));
            }
            _ => {}
        }
    }
    (ops, kernels, engine.monitor().now_ns())
}

#[test]
fn synchronized_gpu_ops_stall_the_host_and_leave_the_device_idle_between_kernels() {
    let (ops, kernels, _) = chain(true);
    // Each op: a 5 µs launch, then the host waits for the 10 µs kernel; the CPU op takes 1 µs.
    assert_eq!(
        ops,
        [
            (0, 15_000),
            (15_000, 30_000),
            (30_000, 45_000),
            (45_000, 46_000)
        ]
    );
    assert_eq!(
        kernels,
        [(5_000, 15_000), (20_000, 30_000), (35_000, 45_000)]
    );
}

#[test]
fn gpu_ops_complete_at_enqueue_and_their_kernels_run_back_to_back() {
    let (ops, kernels, now_ns) = chain(false);
    // The worker launches one op after the other; the CPU op reading x waits inside for the
    // last kernel (then takes the CPU's 1 µs).
    assert_eq!(
        ops,
        [
            (0, 5_000),
            (5_000, 10_000),
            (10_000, 15_000),
            (15_000, 36_000)
        ]
    );
    assert_eq!(
        kernels,
        [(5_000, 15_000), (15_000, 25_000), (25_000, 35_000)]
    );
    assert!(now_ns >= 36_000, "{now_ns}");
}

/// An op that fails its checks launches no kernel, and the ops skipped after it (they read its
/// error) launch none either: none of them takes the host's launch time or shows a kernel,
/// which made a failed run look busy for as long as a good one.
#[test]
fn a_failed_gpu_op_and_those_skipped_after_it_launch_nothing() {
    for sync in [false, true] {
        let (ops, kernels, now_ns) = chain_after(sync, Arc::new(FailsItsChecks));
        assert_eq!(kernels, [], "sync {sync}");
        assert_eq!(ops, [(0, 0); 4], "sync {sync}");
        assert_eq!(now_ns, 0, "sync {sync}");
    }
}
