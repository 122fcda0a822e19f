//! GPU tests of plan evaluation: every builtin on the GPU against the CPU's evaluation of the
//! same plan on fresh random inputs, a cross-stream dependency, and freeing under load. Each test
//! prints `skipped: no GPU (...)` and returns when this machine has none; `scripts/gpu-check`
//! runs them on a GPU machine.

use std::sync::Arc;

use crate::builtins::Builtin;
use crate::gpu::*;
use crate::plan::{Plan, PlanIndex};
use crate::tensor::{self, BinaryOp, ReduceOp, Tensor, UnaryOp};

/// Evaluates `plan` on `ctx`'s GPU and stream outside any engine op.
fn eval(
    plan: &Plan,
    inputs: &[GpuTensor],
    ctx: &mut GpuOpContext<'_>,
) -> Result<Vec<GpuTensor>, tensor::TensorError> {
    crate::compute::eval_on_gpu(plan, inputs, ctx, &dep_engine::OpContext::standalone())
}

/// Held by every test that uses the GPU: tests read device-wide counters (`bytes_in_use`,
/// `take_deferred_error`) that another test's allocations would move.
static GPU_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Device 0 and the GPU tests' lock (hold it for the whole test), or `None` after printing why
/// the test is skipped.
fn gpu0(streams: usize) -> Option<(std::sync::MutexGuard<'static, ()>, &'static Arc<GpuDevice>)> {
    if let GpuAvailability::Unavailable { reason } = detect() {
        println!("skipped: no GPU ({reason})");
        return None;
    }
    let guard = GPU_TESTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let runtime = GpuRuntime::get(GpuConfig::from_env(streams)).expect("a GPU runtime");
    Some((guard, runtime.device(0).expect("gpu0 opens")))
}

fn c(value: f32) -> Plan {
    Plan::Const(Tensor::scalar(value))
}

fn input(index: usize) -> Box<Plan> {
    Box::new(Plan::Input(index))
}

fn call(builtin: Builtin, args: Vec<Plan>) -> Plan {
    Plan::Call(builtin, args)
}

fn cpu_eval(plan: &Plan, inputs: &[Tensor]) -> Result<Vec<Tensor>, tensor::TensorError> {
    let mut uses = vec![0; inputs.len()];
    plan.count_uses(&mut uses);
    let mut slots: Vec<Option<Tensor>> = inputs.iter().cloned().map(Some).collect();
    let mut backend = tensor::backend::HostBackend {
        inputs: &mut slots,
        remaining_uses: &mut uses,
        rng: None,
    };
    crate::evaluate::eval_all(plan, &mut backend, &dep_engine::OpContext::standalone())
}

fn gpu_eval(
    device: &Arc<GpuDevice>,
    plan: &Plan,
    inputs: &[Tensor],
) -> Result<Vec<Tensor>, tensor::TensorError> {
    let mut ctx = GpuOpContext::new(device, 0)?;
    let on_gpu = inputs
        .iter()
        .map(|x| upload(x, &mut ctx))
        .collect::<Result<Vec<_>, _>>()?;
    let outputs = eval(plan, &on_gpu, &mut ctx)?;
    outputs.iter().map(download).collect()
}

/// Whether `got` equals `want` within float32 bounds: NaNs and infinities where the CPU has them,
/// and a relative error of `tolerance` (scaled by `scale`, the magnitude of the terms) elsewhere.
fn assert_close(what: &str, got: &Tensor, want: &Tensor, tolerance: f32) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let scale = want
        .data()
        .iter()
        .filter(|v| v.is_finite())
        .fold(1.0f32, |acc, v| acc.max(v.abs()));
    for (index, (&g, &w)) in got.data().iter().zip(want.data()).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= tolerance * w.abs().max(scale * 1e-3).max(1e-30)
        };
        assert!(ok, "{what}: element {index}: gpu {g} vs cpu {w}");
    }
}

fn check(device: &Arc<GpuDevice>, what: &str, plan: &Plan, inputs: &[Tensor], tolerance: f32) {
    let want = cpu_eval(plan, inputs);
    let got = gpu_eval(device, plan, inputs);
    match (got, want) {
        (Ok(got), Ok(want)) => {
            assert_eq!(got.len(), want.len(), "{what}: number of results");
            for (got, want) in got.iter().zip(&want) {
                assert_close(what, got, want, tolerance);
            }
        }
        (Err(got), Err(want)) => assert_eq!(got, want, "{what}: errors"),
        (got, want) => panic!("{what}: gpu {got:?} vs cpu {want:?}"),
    }
}

/// `a @ b` on the GPU against the CPU, element by element within the float32 bound of a sum of
/// `k` products summed in any order: `2 k u` times the sum of the terms' magnitudes (`|a| @ |b|`),
/// with `u` the unit roundoff. Relative to the result itself no tolerance holds: an element that
/// cancels to near zero keeps the absolute error of its large terms.
fn check_matmul(device: &Arc<GpuDevice>, what: &str, a: &Tensor, b: &Tensor) {
    let plan = Plan::Matmul(input(0), input(1));
    let inputs = [a.clone(), b.clone()];
    let want = cpu_eval(&plan, &inputs).unwrap().remove(0);
    let got = gpu_eval(device, &plan, &inputs).unwrap().remove(0);
    let magnitude = |x: &Tensor| tensor::unary(UnaryOp::Abs, x).unwrap();
    let terms = tensor::matmul(&magnitude(a), &magnitude(b)).unwrap();
    let k = a.shape()[a.shape().len() - 1] as f32;
    let bound = 2.0 * k * f32::EPSILON / 2.0;
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    for (index, ((&g, &w), &t)) in got
        .data()
        .iter()
        .zip(want.data())
        .zip(terms.data())
        .enumerate()
    {
        assert!(
            (g - w).abs() <= bound * t,
            "{what}: element {index}: gpu {g} vs cpu {w}, terms of magnitude {t}"
        );
    }
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    tensor::randn(shape, &mut tensor::seeded_rng(seed)).unwrap()
}

#[test]
fn every_builtin_matches_the_cpu() {
    let Some((_gpu, device)) = gpu0(2) else {
        return;
    };
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |elapsed| elapsed.as_nanos() as u64);
    println!("inputs from seed {seed}");
    let x = randn(&[37, 300], seed);
    let y = randn(&[300], seed + 1);
    let positive = tensor::unary(UnaryOp::Abs, &randn(&[5, 7], seed + 2)).unwrap();
    let small = randn(&[4, 3, 5], seed + 3);
    let tol = 1e-5;

    for op in UnaryOp::ALL {
        let plan = Plan::Unary(op, input(0));
        check(
            device,
            op.name(),
            &plan,
            std::slice::from_ref(&positive),
            tol,
        );
        check(device, op.name(), &plan, std::slice::from_ref(&x), tol);
    }
    for op in BinaryOp::ALL {
        let plan = Plan::Binary(op, input(0), input(1));
        check(device, op.name(), &plan, &[x.clone(), y.clone()], tol);
        check(
            device,
            op.name(),
            &plan,
            &[small.clone(), randn(&[3, 1], seed)],
            tol,
        );
        check(device, op.name(), &plan, &[x.clone(), x.clone()], tol);
        let with_const = Plan::Binary(op, input(0), Box::new(c(0.5)));
        check(
            device,
            op.name(),
            &with_const,
            std::slice::from_ref(&positive),
            tol,
        );
        let const_first = Plan::Binary(op, Box::new(c(2.0)), input(0));
        check(
            device,
            op.name(),
            &const_first,
            std::slice::from_ref(&positive),
            tol,
        );
    }
    check(
        device,
        "broadcast error",
        &Plan::Binary(BinaryOp::Add, input(0), input(1)),
        &[x.clone(), randn(&[7], seed)],
        tol,
    );
    for op in ReduceOp::ALL {
        let whole = call(Builtin::Reduce(op), vec![Plan::Input(0)]);
        check(device, op.name(), &whole, std::slice::from_ref(&x), 1e-4);
        check(device, op.name(), &whole, &[randn(&[1 << 20], seed)], 1e-3);
        for axis in [0.0, 1.0, -1.0, 2.0] {
            let plan = call(Builtin::Reduce(op), vec![Plan::Input(0), c(axis)]);
            check(device, op.name(), &plan, std::slice::from_ref(&x), 1e-4);
            check(device, op.name(), &plan, std::slice::from_ref(&small), 1e-4);
        }
        check(
            device,
            op.name(),
            &whole,
            &[Tensor::from_vec(vec![0], vec![]).unwrap()],
            tol,
        );
    }
    for axis in [0.0, 1.0, -1.0] {
        let plan = call(Builtin::Softmax, vec![Plan::Input(0), c(axis)]);
        check(device, "softmax", &plan, std::slice::from_ref(&x), 1e-5);
    }
    let labels = Tensor::from_vec(vec![4], vec![0.0, 3.0, 1.0, 3.0]).unwrap();
    let onehot = call(Builtin::Onehot, vec![Plan::Input(0), c(4.0)]);
    check(device, "onehot", &onehot, &[labels], 0.0);
    let bad = Tensor::from_vec(vec![2], vec![0.0, 4.0]).unwrap();
    check(device, "onehot error", &onehot, &[bad], 0.0);
    check(
        device,
        "transpose",
        &call(Builtin::Transpose, vec![Plan::Input(0)]),
        std::slice::from_ref(&small),
        0.0,
    );
    check(
        device,
        "reshape",
        &call(Builtin::Reshape, vec![Plan::Input(0), c(-1.0), c(6.0)]),
        std::slice::from_ref(&small),
        0.0,
    );
    check(
        device,
        "concat",
        &call(
            Builtin::Concat,
            vec![Plan::Input(0), Plan::Input(1), c(1.0)],
        ),
        &[small.clone(), randn(&[4, 2, 5], seed)],
        0.0,
    );
    check(
        device,
        "split",
        &call(Builtin::Split, vec![Plan::Input(0), c(2.0), c(0.0)]),
        std::slice::from_ref(&small),
        0.0,
    );
    let index = Plan::Index(
        input(0),
        vec![
            PlanIndex::Single(c(-1.0)),
            PlanIndex::Slice(Some(c(1.0)), None),
        ],
    );
    check(device, "index", &index, std::slice::from_ref(&small), 0.0);
    check_matmul(device, "matmul", &x, &randn(&[300, 50], seed));
    check_matmul(device, "matvec", &x, &y);
    check(
        device,
        "matmul error",
        &Plan::Matmul(input(0), input(1)),
        &[x.clone(), x.clone()],
        0.0,
    );
    check(
        device,
        "zeros",
        &call(Builtin::Zeros, vec![c(3.0), c(2.0)]),
        &[],
        0.0,
    );
    check(device, "ones", &call(Builtin::Ones, vec![c(3.0)]), &[], 0.0);
    check(
        device,
        "full",
        &call(Builtin::Full, vec![c(2.5), c(4.0)]),
        &[],
        0.0,
    );
    check(device, "eye", &call(Builtin::Eye, vec![c(5.0)]), &[], 0.0);
    check(
        device,
        "arange",
        &call(Builtin::Arange, vec![c(1000.0)]),
        &[],
        0.0,
    );
    let literal = Plan::List(vec![Plan::Input(0), Plan::Input(0)]);
    check(device, "literal", &literal, std::slice::from_ref(&y), 0.0);
    let chain = Plan::Binary(
        BinaryOp::Mul,
        Box::new(Plan::Unary(UnaryOp::Tanh, input(0))),
        Box::new(c(0.5)),
    );
    check(device, "chain", &chain, std::slice::from_ref(&x), 1e-5);
}

#[test]
fn random_builtins_are_reproducible_and_match_the_philox_reference() {
    let Some((_gpu, device)) = gpu0(2) else {
        return;
    };
    let draw = |seed: u64, builtin: Builtin| {
        let mut rng = GpuRng::seeded(seed);
        let mut ctx = GpuOpContext::new(device, 1).unwrap().with_rng(&mut rng);
        let plan = call(builtin, vec![c(1001.0)]);
        let first = download(&eval(&plan, &[], &mut ctx).unwrap()[0]).unwrap();
        let second = download(&eval(&plan, &[], &mut ctx).unwrap()[0]).unwrap();
        (first, second)
    };
    let (a, b) = draw(7, Builtin::Rand);
    let (again, _) = draw(7, Builtin::Rand);
    assert!(a.bits_eq(&again), "a seed gives the same numbers");
    assert!(!a.bits_eq(&b), "the counter advances between draws");
    let mut rng = GpuRng::seeded(7);
    assert_eq!(a.data(), reference_uniform(rng.draw(1001), 1001).as_slice());
    assert_eq!(b.data(), reference_uniform(rng.draw(1001), 1001).as_slice());
    let (normal, _) = draw(7, Builtin::Randn);
    let want = Tensor::from_vec(
        vec![1001],
        reference_normal(GpuRng::seeded(7).draw(1001), 1001),
    )
    .unwrap();
    assert_close("randn", &normal, &want, 1e-4);
}

#[test]
fn a_cross_stream_dependency_waits_on_an_event_not_the_cpu() {
    let Some((_gpu, device)) = gpu0(2) else {
        return;
    };
    let n = 1 << 24;
    let x = tensor::full(1.0, &[n]).unwrap();
    let mut s0 = GpuOpContext::new(device, 0).unwrap();
    let mut s1 = GpuOpContext::new(device, 1).unwrap();
    let a = upload(&x, &mut s0).unwrap();
    // A long chain on stream 0, then a reader on stream 1: without the event wait, stream 1
    // would read a half-written value.
    let mut value = a;
    let add = Plan::Binary(BinaryOp::Add, input(0), Box::new(c(1.0)));
    for _ in 0..50 {
        value = eval(&add, &[value], &mut s0).unwrap().remove(0);
    }
    let started = std::time::Instant::now();
    let doubled = eval(
        &Plan::Binary(BinaryOp::Mul, input(0), Box::new(c(2.0))),
        std::slice::from_ref(&value),
        &mut s1,
    )
    .unwrap()
    .remove(0);
    let enqueue = started.elapsed();
    let result = download(&doubled).unwrap();
    assert!(
        result.data().iter().all(|&v| v == 102.0),
        "{:?}",
        &result.data()[..4]
    );
    println!("cross-stream op enqueued in {enqueue:?}");
    assert_eq!(doubled.buffer().home_stream().stream, 1);
}

#[test]
fn freeing_under_load_keeps_device_memory_flat() {
    let Some((_gpu, device)) = gpu0(2) else {
        return;
    };
    device.synchronize().unwrap();
    let before = device.bytes_in_use();
    let mut ctx = GpuOpContext::new(device, 0).unwrap();
    let mut other = GpuOpContext::new(device, 1).unwrap();
    let mut c_value = upload(&tensor::zeros(&[1024]).unwrap(), &mut ctx).unwrap();
    let b = upload(&tensor::ones(&[1024]).unwrap(), &mut ctx).unwrap();
    let add = Plan::Binary(BinaryOp::Add, input(0), input(1));
    let mut peak = 0;
    for step in 0..100_000 {
        // `c = c + b`, rebinding c; every 7th step runs on the other stream, so frees wait for
        // readers on another stream.
        let ctx = if step % 7 == 0 { &mut other } else { &mut ctx };
        c_value = eval(&add, &[c_value, b.clone()], ctx).unwrap().remove(0);
        peak = peak.max(device.bytes_in_use());
    }
    let result = download(&c_value).unwrap();
    assert!(result.data().iter().all(|&v| v == 100_000.0));
    assert!(peak - before <= 4 * 4096, "peak {peak} bytes over {before}");
    drop((c_value, b));
    assert_eq!(device.bytes_in_use(), before);
    assert_eq!(device.take_deferred_error(), None);
}

#[test]
fn timed_ops_report_kernel_times_from_events() {
    let Some((_gpu, device)) = gpu0(2) else {
        return;
    };
    let mut ctx = GpuOpContext::new(device, 0).unwrap().with_timing();
    let x = upload(&tensor::ones(&[1 << 20]).unwrap(), &mut ctx).unwrap();
    let out = eval(&Plan::Unary(UnaryOp::Exp, input(0)), &[x], &mut ctx).unwrap();
    let (start, end) = ctx.take_span().expect("a span").wait_times_ms().unwrap();
    assert!(0.0 <= start && start <= end, "{start} {end}");
    assert!(ctx.take_span().is_none());
    drop(out);
}
