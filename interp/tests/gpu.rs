//! GPU tests through the public API: detection and its message, upload/download round trips,
//! elementwise ops against the CPU kernels, a cross-stream dependency, freeing under load, and
//! programs (a fixed one, and the random programs of the property test) placed on cpu, gpu0 or
//! both giving the same numbers within float32 bounds.
//! Each test prints `skipped: no GPU (...)` and returns on a machine without a GPU;
//! `scripts/gpu-check` runs them (and the plan-level GPU tests in `src/gpu/tests.rs`) on one.

mod common;

use std::sync::{Arc, MutexGuard, PoisonError};

use dep_interp::gpu::{self, GpuAvailability, GpuConfig, GpuDevice, GpuOpContext, GpuRuntime};
use dep_interp::tensor::{self, BinaryOp, Tensor, UnaryOp};

/// Held by every test that uses the GPU: tests read device-wide counters (`bytes_in_use`,
/// `take_deferred_error`) that another test's allocations would move.
static GPU_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Device 0 and the GPU tests' lock (hold it for the whole test), or `None` after printing why
/// the test is skipped.
fn gpu0() -> Option<(MutexGuard<'static, ()>, &'static Arc<GpuDevice>)> {
    if let GpuAvailability::Unavailable { reason } = gpu::detect() {
        println!("skipped: no GPU ({reason})");
        return None;
    }
    let guard = GPU_TESTS.lock().unwrap_or_else(PoisonError::into_inner);
    let runtime = GpuRuntime::get(GpuConfig::from_env(2)).expect("a GPU runtime");
    Some((guard, runtime.device(0).expect("gpu0 opens")))
}

#[test]
fn a_script_naming_a_missing_gpu_gets_a_clear_message() {
    let availability = gpu::detect();
    let missing = u16::try_from(availability.n_devices()).unwrap();
    let message = gpu::placement_error(missing, availability).expect("that GPU does not exist");
    assert!(message.contains(&format!("gpu{missing}")), "{message}");
    assert!(message.contains("to run on the CPU"), "{message}");
    if let GpuAvailability::Unavailable { reason } = availability {
        assert!(message.contains("0 GPUs"), "{message}");
        assert!(message.contains(reason.as_str()), "{message}");
        let error = GpuRuntime::get(GpuConfig::from_env(1)).unwrap_err();
        assert!(error.message().contains("0 GPUs"), "{error}");
    }
}

#[test]
fn values_round_trip_through_the_device() {
    let Some((_gpu, device)) = gpu0() else { return };
    let mut ctx = GpuOpContext::new(device, 0).unwrap();
    for shape in [&[][..], &[0][..], &[3, 5][..], &[1 << 20][..]] {
        let x = tensor::randn(shape, &mut tensor::seeded_rng(1)).unwrap();
        let on_gpu = gpu::upload(&x, &mut ctx).unwrap();
        assert_eq!(on_gpu.shape(), x.shape());
        assert!(gpu::download(&on_gpu).unwrap().bits_eq(&x));
    }
    assert!(!device.name().is_empty());
}

#[test]
fn elementwise_ops_match_the_cpu() {
    let Some((_gpu, device)) = gpu0() else { return };
    let mut ctx = GpuOpContext::new(device, 0).unwrap();
    let a = tensor::randn(&[64, 33], &mut tensor::seeded_rng(2)).unwrap();
    let b = tensor::randn(&[33], &mut tensor::seeded_rng(3)).unwrap();
    let (ga, gb) = (
        gpu::upload(&a, &mut ctx).unwrap(),
        gpu::upload(&b, &mut ctx).unwrap(),
    );
    for op in BinaryOp::ALL {
        let got = gpu::download(&gpu::binary(&ga, op, &gb, &mut ctx).unwrap()).unwrap();
        let want = tensor::binary(&a, op, &b).unwrap();
        close(&got, &want, op.name());
    }
    for op in UnaryOp::ALL {
        let got = gpu::download(&gpu::unary(op, &ga, &mut ctx).unwrap()).unwrap();
        close(&got, &tensor::unary(op, &a).unwrap(), op.name());
    }
    let m = tensor::randn(&[33, 17], &mut tensor::seeded_rng(4)).unwrap();
    let gm = gpu::upload(&m, &mut ctx).unwrap();
    let got = gpu::download(&gpu::matmul(&ga, &gm, &mut ctx).unwrap()).unwrap();
    close(&got, &tensor::matmul(&a, &m).unwrap(), "matmul");
    let error = gpu::matmul(&ga, &ga, &mut ctx).unwrap_err();
    assert_eq!(error, tensor::matmul(&a, &a).unwrap_err());
}

fn close(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}");
    for (&g, &w) in got.data().iter().zip(want.data()) {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= 1e-4 * w.abs().max(1.0);
        assert!(ok, "{what}: gpu {g} vs cpu {w}");
    }
}

#[test]
fn two_streams_with_a_cross_stream_dependency() {
    let Some((_gpu, device)) = gpu0() else { return };
    let mut s0 = GpuOpContext::new(device, 0).unwrap();
    let mut s1 = GpuOpContext::new(device, 1).unwrap();
    let n = 1 << 24;
    let mut x = gpu::full(&[n], 0.0, &mut s0).unwrap();
    for _ in 0..20 {
        x = gpu::binary_scalar(&x, BinaryOp::Add, 1.0, &mut s0).unwrap();
    }
    // Stream 1 reads what stream 0 is still computing: it must wait on stream 0's event.
    let y = gpu::binary_scalar(&x, BinaryOp::Mul, 3.0, &mut s1).unwrap();
    let copied = gpu::copy_to_device(&y, &mut s0).unwrap();
    drop(x); // freed on stream 0 after stream 1's read, never under it
    let result = gpu::download(&copied).unwrap();
    assert!(
        result.data().iter().all(|&v| v == 60.0),
        "{:?}",
        &result.data()[..4]
    );
    assert_eq!(device.take_deferred_error(), None);
}

#[test]
fn freeing_under_load_keeps_device_memory_flat() {
    let Some((_gpu, device)) = gpu0() else { return };
    let mut ctx = GpuOpContext::new(device, 0).unwrap();
    let mut other = GpuOpContext::new(device, 1).unwrap();
    let b = gpu::full(&[256], 1.0, &mut ctx).unwrap();
    let mut c = gpu::full(&[256], 0.0, &mut ctx).unwrap();
    let base = device.bytes_in_use();
    let mut peak = base;
    for step in 0..100_000 {
        let ctx = if step % 5 == 0 { &mut other } else { &mut ctx };
        c = gpu::binary(&c, BinaryOp::Add, &b, ctx).unwrap();
        peak = peak.max(device.bytes_in_use());
    }
    assert!(gpu::download(&c)
        .unwrap()
        .data()
        .iter()
        .all(|&v| v == 100_000.0));
    assert!(
        peak <= base + 1024,
        "device memory grew from {base} to {peak} bytes"
    );
}

/// Runs a script through a session on `policy`, returning what it printed.
fn run_script(source: &str, policy: dep_engine::Policy) -> String {
    let mut session = dep_interp::Session::new(dep_interp::SessionConfig {
        policy,
        threads: 2,
        ..dep_interp::SessionConfig::default()
    });
    let mut out = Vec::new();
    session
        .run_source("gpu.dep", source, &mut out)
        .unwrap_or_else(|error| panic!("{error}\n{source}"));
    session
        .finish()
        .unwrap_or_else(|error| panic!("{error}\n{source}"));
    String::from_utf8(out).unwrap()
}

/// The numbers in printed output, to compare GPU and CPU results within float32 bounds.
fn numbers(output: &str) -> Vec<f64> {
    output
        .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e' || c == '+'))
        .filter_map(|word| word.parse().ok())
        .collect()
}

#[test]
fn programs_placed_on_cpu_gpu0_or_both_print_the_same_numbers() {
    let Some((_gpu, _)) = gpu0() else { return };
    // One program, its statements on the CPU, all on gpu0, or alternating; the language's
    // placement and the GPU's cross-stream and download rules must not change the values.
    let statements = [
        "a = randn(32, 16) * 0.5",
        "b = tanh(a @ transpose(a)) + 1",
        "c = softmax(b, 1) * sum(a, 0)[0]",
        "d = relu(c - mean(c)) + abs(a[0:32, 0:1])",
        "e = concat(d, b, 0)",
        "f, g = split(e, 2, 0)",
        "h = f * g - exp(-abs(f))",
    ];
    let placed = |on_gpu: &dyn Fn(usize) -> bool| -> String {
        let mut source = String::from("seed 3\n");
        for (index, statement) in statements.iter().enumerate() {
            // The random draw stays on the CPU: the GPU's generator (Philox) gives other numbers.
            if index > 0 && on_gpu(index) {
                source.push_str(&format!("with gpu0 {{ {statement} }}\n"));
            } else {
                source.push_str(&format!("{statement}\n"));
            }
        }
        source.push_str("print sum(h), max(h), min(h), sum(d)\n");
        source
    };
    let cpu = numbers(&run_script(&placed(&|_| false), dep_engine::Policy::Naive));
    for (name, program) in [
        ("gpu0", placed(&|_| true)),
        ("mixed", placed(&|index| index % 2 == 1)),
    ] {
        for policy in [dep_engine::Policy::Threaded, dep_engine::Policy::PerDevice] {
            let got = numbers(&run_script(&program, policy));
            assert_eq!(got.len(), cpu.len(), "{name} on {policy}");
            for (got, want) in got.iter().zip(&cpu) {
                assert!(
                    (got - want).abs() <= 1e-3 * want.abs().max(1.0),
                    "{name} on {policy}: {got} != {want}"
                );
            }
        }
    }
}

/// How far a value computed with GPU placements may be from the CPU's: relative to the CPU's
/// value, and absolute below 1 (|gpu - cpu| <= TOLERANCE * max(1, |cpu|)).
///
/// The GPU rounds differently in the last bits: `+ - * /` (one kernel per operator) are
/// correctly rounded on both, but CUDA's `tanhf` and `expf` (in `softmax`) are within 2 ulps
/// of the CPU's, and cuBLAS (with FMAs) and the reductions add in another order. The programs
/// chain up to ~250 statements (loops and `mix` add more) and amplify these differences: values
/// multiplied and matmul'd into each other reach 1e29 (program 13), and differences cancel
/// (`y - z`, `sum`). Measured on the CPU by perturbing the result of every statement, in loops
/// and functions too, by a factor 1 + k * 2^-23 (the same sign everywhere, the worst case), the
/// saved values of programs 0..25 move by at most 3.2e-5 relative for k = 1, and 1.3e-4 for
/// k = 4 (programs 13 and 18). 1e-3 leaves a margin of 8 over that; a wrong placement (a stale
/// value, a lost update, the other device's random numbers) is off by far more.
const TOLERANCE: f64 = 1e-3;

/// Checks that the arrays saved with a GPU placement (`got`) are the CPU reference's (`want`):
/// the same files, the same shapes, values within [`TOLERANCE`] (NaN where the CPU has NaN,
/// infinities exact).
fn assert_saves_close(got: &[(String, Vec<u8>)], want: &[(String, Vec<u8>)], what: &str) {
    let names = |saves: &[(String, Vec<u8>)]| -> Vec<String> {
        saves.iter().map(|(name, _)| name.clone()).collect()
    };
    assert_eq!(names(got), names(want), "{what}: other files were saved");
    for ((name, got), (_, want)) in got.iter().zip(want) {
        let got = tensor::read_npy(&mut got.as_slice()).unwrap();
        let want = tensor::read_npy(&mut want.as_slice()).unwrap();
        assert_eq!(got.shape(), want.shape(), "{what}: {name}");
        for (index, (&g, &w)) in got.data().iter().zip(want.data()).enumerate() {
            let (g64, w64) = (f64::from(g), f64::from(w));
            let ok = (g.is_nan() && w.is_nan())
                || g == w
                || (w.is_finite() && (g64 - w64).abs() <= TOLERANCE * w64.abs().max(1.0));
            assert!(
                ok,
                "{what}: {name}[{index}] is {g} with the GPU, {w} on the CPU"
            );
        }
    }
}

/// The random-program property test across placements: for 25 seeds, the program of
/// `random_programs.rs` placed on the CPU (on the naive engine, the reference), all on gpu0, and
/// in random runs on gpu0 and the CPU (values crossing both ways), each on the threaded and the
/// per-device engines, saves the same arrays: bit for bit on the CPU, within [`TOLERANCE`] with
/// the GPU. Random draws (`rand`, `randn`) stay on the CPU in every placement: on a GPU they
/// draw from Philox (`src/gpu/philox.rs`), not from the CPU's ChaCha, and give other numbers.
#[test]
fn random_programs_placed_on_cpu_gpu0_or_both_save_the_same_arrays() {
    use common::random_program::{random_program, run, Placement};
    let Some((_gpu, _)) = gpu0() else { return };
    for seed in common::seeds(0..25) {
        let cpu = random_program(seed, Placement::Cpu);
        let reference_dir = tempfile::tempdir().unwrap();
        let reference = run(&cpu, reference_dir.path(), dep_engine::Policy::Naive, 1);
        assert!(!reference.is_empty());
        for placement in [Placement::Cpu, Placement::Gpu0, Placement::Mixed(seed)] {
            let program = random_program(seed, placement);
            for policy in [dep_engine::Policy::Threaded, dep_engine::Policy::PerDevice] {
                let dir = tempfile::tempdir().unwrap();
                let got = run(&program, dir.path(), policy, 4);
                let what = format!("program {seed} placed {} on {policy}", placement.name());
                if placement == Placement::Cpu {
                    assert!(got == reference, "{what} differs:\n{program}");
                } else {
                    let what = format!("{what}\n{program}\n");
                    assert_saves_close(&got, &reference, &what);
                }
            }
        }
    }
}

/// Under an observed engine, every GPU op's kernels are reported as a device span after the op,
/// on its stream's lane; a chain's dependent kernels never overlap, and each one starts no
/// earlier than its op was enqueued.
#[test]
fn observed_gpu_ops_report_their_kernel_times() {
    let Some((_gpu, _)) = gpu0() else { return };
    let mut session = dep_interp::Session::new(dep_interp::SessionConfig {
        policy: dep_engine::Policy::PerDevice,
        threads: 2,
        observe: true,
        ..dep_interp::SessionConfig::default()
    });
    let source = "with gpu0 {\n  x = ones(1024, 1024)\n  for i in 0..20 {\n    x = x * 1.0001 + 1\n  }\n}\nprint sum(x)\n";
    let mut out = Vec::new();
    session.run_source("kernels.dep", source, &mut out).unwrap();
    session.finish().unwrap();
    let events = session.event_log().unwrap().events();
    let mut enqueued = std::collections::HashMap::new();
    let mut gpu_ops = Vec::new();
    let mut spans = std::collections::HashMap::new();
    for event in &events {
        match &event.kind {
            dep_engine::EventKind::Pushed {
                op,
                device: dep_engine::Device::Gpu(_),
                ..
            } => {
                gpu_ops.push(*op);
            }
            dep_engine::EventKind::Started { op, .. } => {
                enqueued.insert(*op, event.time_ns);
            }
            dep_engine::EventKind::DeviceSpan {
                op,
                lane,
                start_ns,
                end_ns,
            } => {
                assert!(lane.starts_with("gpu0:s"), "{lane}");
                assert!(start_ns <= end_ns);
                spans.insert(*op, (*start_ns, *end_ns));
            }
            _ => {}
        }
    }
    assert_eq!(gpu_ops.len(), 21, "ones, then 20 updates");
    for pair in gpu_ops.windows(2) {
        let (earlier, later) = (spans[&pair[0]], spans[&pair[1]]);
        // Spans placed from successive anchors (recalibrated about once a second) may step by
        // a few µs.
        const SLACK_NS: u64 = 3_000;
        assert!(
            later.0 + SLACK_NS >= earlier.1,
            "dependent kernels overlap: {earlier:?} {later:?}"
        );
    }
    for op in &gpu_ops {
        // Timing events and the host clock are anchored to within a few microseconds.
        assert!(
            spans[op].0 + 50_000 >= enqueued[op],
            "a kernel ran before its enqueue"
        );
    }
}

/// `to(x, gpu0)` is an op on gpu0 (its kernels reported on a `gpu0:s` lane), and its result
/// stays there: a GPU reader uses it, a CPU reader downloads it; `to(z, cpu)` comes back.
#[test]
fn a_copy_to_a_gpu_runs_on_that_gpu() {
    let Some((_gpu, _)) = gpu0() else { return };
    let source = "x = ones(256) * 3\ny = to(x, gpu0)\nwith gpu0 {\n  z = y * 2\n  w = to(z, gpu0)\n}\nback = to(w, cpu)\nprint sum(y), sum(z), sum(back)\n";
    let want = [768.0, 1536.0, 1536.0];
    for policy in [
        dep_engine::Policy::Naive,
        dep_engine::Policy::Threaded,
        dep_engine::Policy::PerDevice,
    ] {
        let mut session = dep_interp::Session::new(dep_interp::SessionConfig {
            policy,
            threads: 2,
            observe: true,
            ..dep_interp::SessionConfig::default()
        });
        let mut out = Vec::new();
        session.run_source("to.dep", source, &mut out).unwrap();
        session.finish().unwrap();
        assert_eq!(numbers(&String::from_utf8(out).unwrap()), want, "{policy}");
        let events = session.event_log().unwrap().events();
        let copies: Vec<dep_engine::OpId> = events
            .iter()
            .filter_map(|event| match &event.kind {
                dep_engine::EventKind::Pushed { op, device, .. }
                    if matches!(device, dep_engine::Device::Link(..))
                        && device.link_ends().map(|(_, to)| to)
                            == Some(dep_engine::Device::Gpu(0)) =>
                {
                    Some(*op)
                }
                _ => None,
            })
            .collect();
        assert_eq!(copies.len(), 1, "{policy}: y = to(x, gpu0) crosses a link");
        assert!(
            events.iter().any(|event| matches!(
                &event.kind,
                dep_engine::EventKind::DeviceSpan { op, lane, .. }
                    if *op == copies[0] && lane.starts_with("gpu0:s")
            )),
            "{policy}: the copy's kernels ran on gpu0"
        );
    }
}

/// A value downloaded for a CPU reader, then updated in place on the CPU (`y += 1`), reaches a
/// later GPU reader with the update (the GPU copy is dropped, not reused); and a host value that
/// GPU ops read (and upload once) is seen updated after a CPU write.
#[test]
fn host_updates_reach_later_gpu_readers() {
    let Some((_gpu, _)) = gpu0() else { return };
    let source = "with gpu0 { y = ones(3) }\nprint sum(y)\ny += 1\nwith gpu0 { z = y * 1 }\nprint sum(z)\nh = ones(4)\nwith gpu0 { a = h * 2 }\nwith gpu0 { b = h * 3 }\nh += 1\nwith gpu0 { c = h * 1 }\nh = h * 0\nwith gpu0 { d = h + 5 }\nprint sum(a), sum(b), sum(c), sum(d)\n";
    for policy in [
        dep_engine::Policy::Naive,
        dep_engine::Policy::Threaded,
        dep_engine::Policy::PerDevice,
    ] {
        let got = numbers(&run_script(source, policy));
        assert_eq!(got, [3.0, 6.0, 8.0, 12.0, 8.0, 20.0], "{policy}");
    }
}

/// `:engine` between two statements on gpu0: the value made there stays there (no download),
/// and the next GPU op on the new engine reads it.
#[test]
fn an_engine_switch_keeps_a_gpu_value_on_its_gpu() {
    let Some((_gpu, _)) = gpu0() else { return };
    let mut session = dep_interp::Session::new(dep_interp::SessionConfig {
        policy: dep_engine::Policy::Threaded,
        threads: 2,
        ..dep_interp::SessionConfig::default()
    });
    let mut out = Vec::new();
    session
        .run_source("a.dep", "with gpu0 { a = ones(1024) * 2 }", &mut out)
        .unwrap();
    session.wait_all();
    session.set_engine(dep_engine::Policy::PerDevice, 2);
    let a = session.variables();
    assert_eq!((a[0].name.as_str(), a[0].device.as_str()), ("a", "gpu0"));
    session
        .run_source(
            "b.dep",
            "with gpu0 { b = a + 1 }\nprint sum(a), sum(b)",
            &mut out,
        )
        .unwrap();
    session.finish().unwrap();
    assert_eq!(numbers(&String::from_utf8(out).unwrap()), [2048.0, 3072.0]);
}

/// `to(x, D)` puts the result on `D` whatever block it is written in, also when `x` is already
/// there (the copy is then a no-op on `D`). Runs on the simulated engine: no GPU needed.
#[test]
fn a_copy_lands_where_to_says_even_from_where_it_already_is() {
    let mut session = dep_interp::Session::new(dep_interp::SessionConfig {
        policy: dep_engine::Policy::Sim,
        threads: 2,
        ..dep_interp::SessionConfig::default()
    });
    let source = "x = ones(4)\nwith gpu0 {\n  y = to(x, cpu)\n  g = x + 1\n}\nwith gpu1 {\n  z = to(g, gpu0)\n}\nprint y + z\n";
    let mut out = Vec::new();
    session.run_source("to.dep", source, &mut out).unwrap();
    session.finish().unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), "[3. 3. 3. 3.]\n");
    let device_of = |name: &str| {
        session
            .variables()
            .into_iter()
            .find(|info| info.name == name)
            .map(|info| info.device)
    };
    assert_eq!(device_of("y").as_deref(), Some("cpu"));
    assert_eq!(device_of("g").as_deref(), Some("gpu0"));
    assert_eq!(device_of("z").as_deref(), Some("gpu0"));
}

/// For each GPU op of an observed per-device run of `source`: its host `Finished` time and its
/// kernels' end on the device, in the log's nanoseconds.
fn gpu_op_ends(source: &str) -> Vec<(u64, u64)> {
    let mut session = dep_interp::Session::new(dep_interp::SessionConfig {
        policy: dep_engine::Policy::PerDevice,
        threads: 2,
        observe: true,
        ..dep_interp::SessionConfig::default()
    });
    let mut out = Vec::new();
    session.run_source("sync.dep", source, &mut out).unwrap();
    session.finish().unwrap();
    let mut finished = std::collections::HashMap::new();
    let mut kernels_end = std::collections::HashMap::new();
    for event in session.event_log().unwrap().events() {
        match event.kind {
            dep_engine::EventKind::Finished { op, .. } => {
                finished.insert(op, event.time_ns);
            }
            dep_engine::EventKind::DeviceSpan { op, end_ns, .. } => {
                kernels_end.insert(op, end_ns);
            }
            _ => {}
        }
    }
    kernels_end
        .into_iter()
        .map(|(op, end)| (finished[&op], end))
        .collect()
}

#[test]
fn work_keeps_the_gpu_busy_and_a_scripts_sync_choice_decides_when_the_op_ends() {
    let Some((_gpu, _)) = gpu0() else { return };
    // `work(20)` on gpu0 is a 20 ms kernel: without sync its op ends once it is enqueued, long
    // before the kernel ends; with `sync=1` (chosen by the script on a real engine) the op ends
    // only after its kernel.
    let script = |sync: u8| {
        format!("device gpu0 = sim(sync={sync})\nwith gpu0 {{\n  x = work(20, ones(4))\n}}\nprint sum(x)\n")
    };
    const MARGIN_NS: u64 = 5_000_000;
    let unsynced = gpu_op_ends(&script(0));
    let spinning: Vec<_> = unsynced
        .iter()
        .filter(|(finished, end)| finished + MARGIN_NS < *end)
        .collect();
    assert_eq!(
        spinning.len(),
        1,
        "one op ended 5 ms or more before its kernel: {unsynced:?}"
    );
    let synced = gpu_op_ends(&script(1));
    assert!(!synced.is_empty());
    for (finished, end) in &synced {
        // Spans are placed on the host clock to within a few microseconds.
        assert!(
            finished + 50_000 >= *end,
            "with sync=1 an op ended before its kernel: {synced:?}"
        );
    }
    dep_interp::gpu::choose_sync_every_op(None, false).unwrap();
}

#[test]
fn wait_waits_for_the_gpus_kernels_not_only_their_enqueue() {
    let Some((_gpu, _)) = gpu0() else { return };
    // A GPU op ends once its kernels are enqueued; `wait` must still mean that they have run,
    // or a script's `clock()` after it times the enqueue (a 30 ms kernel measured as ~0 ms).
    let output = run_script(
        "t0 = clock()\nwith gpu0 {\n  x = work(30, ones(4))\n}\nwait\nt1 = clock()\nprint t1 - t0\n",
        dep_engine::Policy::PerDevice,
    );
    let waited_ms = numbers(&output)[0];
    assert!(
        waited_ms >= 25.0,
        "wait returned {waited_ms} ms after a 30 ms kernel was pushed"
    );
}

#[test]
fn a_run_ends_when_its_gpu_kernels_have_run() {
    let Some((_gpu, _)) = gpu0() else { return };
    // Nothing reads x: the op ends at its enqueue, and only the session's finish waits for the
    // 30 ms kernel (a run that ended before it would lose its faults and misstate its wall time).
    let started = std::time::Instant::now();
    run_script(
        "with gpu0 {\n  x = work(30, ones(4))\n}\n",
        dep_engine::Policy::PerDevice,
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed >= std::time::Duration::from_millis(25),
        "the run ended {elapsed:?} after pushing a 30 ms kernel"
    );
}
