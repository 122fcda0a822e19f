//! `dep-gpu-bench`: the GPU figures of issue 7, measured on the GPU layer of `dep_interp::gpu`
//! directly (one op per call, as the engine's GPU workers will make them):
//!
//! - `elementwise`: `c = a + b` on 256 MB tensors, GB/s, against a device-to-device copy;
//! - `matmul`: 8192×8192 f32, TFLOP/s (cuBLAS);
//! - `chain`: 10,000 dependent tiny ops (`x = x + 1` on 4 values), µs per op from the first
//!   enqueue to the result on the host; run once plain and once with `DEP_GPU_SYNC=1` (the
//!   sync mode is per process, so `scripts/gpu-check` runs this binary twice);
//! - `roundtrip`: 2,000 times a tiny op then its result read on the host (µs each), and the
//!   read alone of a value already computed;
//! - `idle`: the GPU's idle time between dependent kernels, from CUDA events around each op.
//!
//! Prints one CSV line per figure: `name,value,unit,device,sync`. Without a GPU it prints
//! `skipped: no GPU (...)` and exits 0. Run: `cargo run --release -p dep-bench --bin
//! dep-gpu-bench -- [elementwise|matmul|chain|roundtrip|idle]...`.

use std::time::Instant;

use dep_interp::gpu::{self, GpuAvailability, GpuConfig, GpuOpContext, GpuRuntime};
use dep_interp::tensor::{BinaryOp, TensorError};

fn main() -> Result<(), TensorError> {
    if let GpuAvailability::Unavailable { reason } = gpu::detect() {
        println!("skipped: no GPU ({reason})");
        return Ok(());
    }
    let runtime = GpuRuntime::get(GpuConfig::from_env(2))?;
    let device = runtime.device(0)?;
    let sync = runtime.config().sync_every_op;
    let mut selected: Vec<String> = std::env::args().skip(1).collect();
    if selected.is_empty() {
        selected = ["elementwise", "matmul", "chain", "roundtrip", "idle"]
            .map(String::from)
            .to_vec();
    }
    let report = |name: &str, value: f64, unit: &str| {
        println!(
            "{name},{value:.3},{unit},{},{}",
            device.name(),
            u8::from(sync)
        );
    };
    let mut ctx = GpuOpContext::new(device, 0)?;
    for name in &selected {
        match name.as_str() {
            "elementwise" => {
                let n = 64 << 20; // 64 Mi floats = 256 MB
                let a = gpu::full(&[n], 1.0, &mut ctx)?;
                let b = gpu::full(&[n], 2.0, &mut ctx)?;
                let iters = 20;
                let time = |ctx: &mut GpuOpContext<'_>,
                            op: &dyn Fn(&mut GpuOpContext<'_>) -> Result<(), TensorError>|
                 -> Result<f64, TensorError> {
                    op(ctx)?;
                    device.synchronize()?;
                    let started = Instant::now();
                    for _ in 0..iters {
                        op(ctx)?;
                    }
                    device.synchronize()?;
                    Ok(started.elapsed().as_secs_f64() / iters as f64)
                };
                let add = time(&mut ctx, &|ctx| {
                    gpu::binary(&a, BinaryOp::Add, &b, ctx).map(drop)
                })?;
                let copy = time(&mut ctx, &|ctx| gpu::copy_to_device(&a, ctx).map(drop))?;
                let bytes = (n * 4) as f64;
                let add_gbs = 3.0 * bytes / add / 1e9;
                let copy_gbs = 2.0 * bytes / copy / 1e9;
                report("elementwise_add_256MB", add_gbs, "GB/s");
                report("d2d_copy_256MB", copy_gbs, "GB/s");
                report("elementwise_vs_copy", 100.0 * add_gbs / copy_gbs, "%");
            }
            "matmul" => {
                let n = 8192;
                let a = gpu::full(&[n, n], 0.5, &mut ctx)?;
                let b = gpu::full(&[n, n], 0.25, &mut ctx)?;
                drop(gpu::matmul(&a, &b, &mut ctx)?);
                device.synchronize()?;
                let iters = 5;
                let started = Instant::now();
                for _ in 0..iters {
                    drop(gpu::matmul(&a, &b, &mut ctx)?);
                }
                device.synchronize()?;
                let seconds = started.elapsed().as_secs_f64() / iters as f64;
                report(
                    "matmul_8192_f32",
                    2.0 * (n as f64).powi(3) / seconds / 1e12,
                    "TFLOP/s",
                );
                report("matmul_8192_f32_ms", seconds * 1e3, "ms");
                report(
                    "matmul_uses_cublas",
                    f64::from(u8::from(device.has_cublas())),
                    "bool",
                );
            }
            "chain" => {
                let n_ops = 10_000;
                let mut x = gpu::full(&[4], 0.0, &mut ctx)?;
                device.synchronize()?;
                let started = Instant::now();
                for _ in 0..n_ops {
                    x = gpu::binary_scalar(&x, BinaryOp::Add, 1.0, &mut ctx)?;
                }
                let enqueued = started.elapsed();
                let result = gpu::download(&x)?;
                let total = started.elapsed();
                assert_eq!(result.data()[0], n_ops as f32);
                let label = if sync {
                    "chain_10000_tiny_sync"
                } else {
                    "chain_10000_tiny"
                };
                report(
                    &format!("{label}_us_per_op"),
                    total.as_secs_f64() * 1e6 / n_ops as f64,
                    "us",
                );
                report(
                    &format!("{label}_enqueue_us_per_op"),
                    enqueued.as_secs_f64() * 1e6 / n_ops as f64,
                    "us",
                );
            }
            "roundtrip" => {
                let n_ops = 2_000;
                let mut x = gpu::full(&[4], 0.0, &mut ctx)?;
                device.synchronize()?;
                let started = Instant::now();
                for _ in 0..n_ops {
                    x = gpu::binary_scalar(&x, BinaryOp::Add, 1.0, &mut ctx)?;
                    assert!(gpu::download(&x)?.data()[0] > 0.0);
                }
                let roundtrip = started.elapsed();
                let started = Instant::now();
                for _ in 0..n_ops {
                    drop(gpu::download(&x)?);
                }
                let download = started.elapsed();
                report(
                    "roundtrip_tiny_us_per_op",
                    roundtrip.as_secs_f64() * 1e6 / n_ops as f64,
                    "us",
                );
                report(
                    "download_idle_tiny_us",
                    download.as_secs_f64() * 1e6 / n_ops as f64,
                    "us",
                );
            }
            "idle" => {
                let n_ops = 2_000;
                let mut timed = GpuOpContext::new(device, 1)?.with_timing();
                let mut x = gpu::full(&[1 << 16], 0.0, &mut timed)?;
                let mut spans = Vec::with_capacity(n_ops);
                for _ in 0..n_ops {
                    x = gpu::binary_scalar(&x, BinaryOp::Add, 1.0, &mut timed)?;
                    spans.extend(timed.take_span());
                }
                device.synchronize()?;
                // Durations from each span's own two events (precise); the whole chain's extent
                // from the device epoch (f32 milliseconds: an error of a microsecond or so, once).
                let (first, last) = (&spans[0], &spans[spans.len() - 1]);
                let (chain_start, _) = first.wait_times_ms()?;
                let (_, chain_end) = last.wait_times_ms()?;
                let busy: f64 = spans
                    .iter()
                    .map(|span| span.duration_ms().map(f64::from))
                    .sum::<Option<f64>>()
                    .ok_or_else(|| TensorError::new("a completed timing event has no time"))?;
                let idle = (f64::from(chain_end - chain_start) - busy).max(0.0);
                report(
                    "idle_between_dependent_kernels_us",
                    idle * 1e3 / (n_ops - 1) as f64,
                    "us",
                );
                report("kernel_time_us", busy * 1e3 / n_ops as f64, "us");
                drop(x);
            }
            other => eprintln!(
                "unknown benchmark `{other}` (elementwise, matmul, chain, roundtrip, idle)"
            ),
        }
    }
    if let Some(error) = device.take_deferred_error() {
        eprintln!("deferred GPU error: {error}");
    }
    Ok(())
}
