//! Single operations as GPU ops of their own, for callers that hold tensors rather than plans:
//! the integration tests and the GPU benchmarks. Each call is one op on `ctx`'s stream, with the
//! same event protocol as a statement's plan (see `runtime.rs`).

use super::runtime::{GpuOpContext, GpuTensor, OpScope};
use crate::tensor::{BinaryOp, TensorError, UnaryOp};

/// Runs `body` as one op reading `inputs`, giving its single output.
fn single_op(
    ctx: &mut GpuOpContext<'_>,
    inputs: &[&GpuTensor],
    body: impl FnOnce(&super::ops::Exec<'_>) -> Result<GpuTensor, TensorError>,
) -> Result<GpuTensor, TensorError> {
    let scope = OpScope::begin(ctx, inputs, false)?;
    let out = body(&scope.exec())?;
    let span = scope.finish(std::slice::from_ref(&out))?;
    ctx.set_span(span);
    Ok(out)
}

/// `a op b` with NumPy broadcasting.
pub fn binary(
    a: &GpuTensor,
    op: BinaryOp,
    b: &GpuTensor,
    ctx: &mut GpuOpContext<'_>,
) -> Result<GpuTensor, TensorError> {
    single_op(ctx, &[a, b], |exec| exec.binary(a, op, b))
}

/// `x op value`, the value passed to the kernel as an argument.
pub fn binary_scalar(
    x: &GpuTensor,
    op: BinaryOp,
    value: f32,
    ctx: &mut GpuOpContext<'_>,
) -> Result<GpuTensor, TensorError> {
    single_op(ctx, &[x], |exec| exec.binary_scalar(x, op, value, false))
}

/// `op(x)`.
pub fn unary(
    op: UnaryOp,
    x: &GpuTensor,
    ctx: &mut GpuOpContext<'_>,
) -> Result<GpuTensor, TensorError> {
    single_op(ctx, &[x], |exec| exec.unary(op, x))
}

/// `a @ b` (cuBLAS when installed).
pub fn matmul(
    a: &GpuTensor,
    b: &GpuTensor,
    ctx: &mut GpuOpContext<'_>,
) -> Result<GpuTensor, TensorError> {
    single_op(ctx, &[a, b], |exec| exec.matmul(a, b))
}

/// A tensor of `shape` filled with `value`, made on the device.
pub fn full(
    shape: &[usize],
    value: f32,
    ctx: &mut GpuOpContext<'_>,
) -> Result<GpuTensor, TensorError> {
    single_op(ctx, &[], |exec| exec.fill(shape.to_vec(), value))
}
