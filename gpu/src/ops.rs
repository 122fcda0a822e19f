//! Kernel launches: one method per operation, enqueued on the op's stream. Shapes are checked on
//! the host (in `geometry`) before anything is launched, with the CPU kernels' messages.

use std::sync::{Arc, Mutex};

use cudarc::cublas;
use cudarc::driver::{result, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg};

use super::geometry::{self, BinaryLayout, ReduceStrategy, StridedParams, BLOCK};
use super::philox::Draw;
use super::runtime::{driver_error, BlasHandle, GpuDevice, GpuTensor};
use super::source;
use crate::tensor::error::terr;
use crate::tensor::shape::{fmt_shape, normalize_axis, numel};
use crate::tensor::{self, BinaryOp, ReduceOp, Tensor, TensorError, UnaryOp};
use dep_engine::lock;

// SAFETY: both structs are `repr(C)` with only `u64` fields (no padding, any bit pattern is
// valid), laid out exactly as `struct Strided` and `struct Bcast` in the kernel source, which
// take them by value.
unsafe impl DeviceRepr for geometry::StridedParams {}
// SAFETY: as above.
unsafe impl DeviceRepr for geometry::BroadcastParams {}

/// Launches kernel `$name` with config `$cfg` and the given locals as arguments, in order.
/// Arguments must be locals (not temporaries): the launch reads them through pointers.
macro_rules! launch {
    ($exec:expr, $name:expr, $cfg:expr, $($arg:ident),* $(,)?) => {{
        let function = $exec.device.function($name)?;
        let mut builder = $exec.stream.launch_builder(function);
        $( builder.arg(&$arg); )*
        // SAFETY: the argument list matches the kernel's parameter list in `source.rs` in order
        // and type (device pointers as u64, sizes as u64, `float`, `int`, parameter structs by
        // value); every pointer is a live allocation of the op's device at least as large as
        // the geometry the host checked, and the launch is ordered on the op's stream after the
        // writes of its inputs (see `OpScope::begin`).
        unsafe { builder.launch($cfg) }.map(|_| ()).map_err(driver_error)
    }};
}

/// The kernel launcher of one op: its device and stream.
pub(crate) struct Exec<'a> {
    pub(crate) device: &'a Arc<GpuDevice>,
    pub(crate) stream_index: usize,
    pub(crate) stream: &'a Arc<CudaStream>,
    pub(crate) blas: Option<&'a Mutex<BlasHandle>>,
}

fn elementwise(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (geometry::grid_for(n), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn blocks(n_blocks: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n_blocks.clamp(1, geometry::MAX_GRID as usize) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl Exec<'_> {
    /// A fresh (uninitialised) tensor of `shape` on this stream.
    pub(crate) fn alloc(&self, shape: Vec<usize>) -> Result<GpuTensor, TensorError> {
        let n = numel(&shape)?;
        let buffer = self.device.alloc(n * 4, self.stream_index)?;
        Ok(GpuTensor::new(shape, buffer))
    }

    /// Copies a CPU tensor to a fresh buffer (stream-ordered).
    pub(crate) fn upload(&self, x: &Tensor) -> Result<GpuTensor, TensorError> {
        let out = self.alloc(x.shape().to_vec())?;
        if !x.is_empty() {
            // SAFETY: the destination holds exactly `x.len()` f32 values; for pageable host
            // memory the call returns after staging the data, so `x` may be dropped afterwards.
            unsafe {
                result::memcpy_htod_async(out.buffer().ptr(), x.data(), self.stream.cu_stream())
            }
            .map_err(driver_error)?;
        }
        Ok(out)
    }

    /// `full(value, shape)`.
    pub(crate) fn fill(&self, shape: Vec<usize>, value: f32) -> Result<GpuTensor, TensorError> {
        let out = self.alloc(shape)?;
        let (y, n) = (out.buffer().ptr(), out.len() as u64);
        if n > 0 {
            launch!(self, "fill", elementwise(out.len()), y, value, n)?;
        }
        Ok(out)
    }

    /// `work(ms)`: keeps the op's stream busy for `duration` with one thread that watches the
    /// GPU's global timer, so later kernels of the stream (and the op's end event) come after it.
    pub(crate) fn spin(&self, duration: std::time::Duration) -> Result<(), TensorError> {
        let ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        if ns > 0 {
            let one_thread = LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (1, 1, 1),
                shared_mem_bytes: 0,
            };
            launch!(self, "spin", one_thread, ns)?;
        }
        Ok(())
    }

    /// `arange(n)`.
    pub(crate) fn arange(&self, n: usize) -> Result<GpuTensor, TensorError> {
        let out = self.alloc(vec![n])?;
        let (y, count) = (out.buffer().ptr(), n as u64);
        if n > 0 {
            launch!(self, "arange", elementwise(n), y, count)?;
        }
        Ok(out)
    }

    /// `eye(n)`.
    pub(crate) fn eye(&self, n: usize) -> Result<GpuTensor, TensorError> {
        let out = self.alloc(vec![n, n])?;
        let (y, count) = (out.buffer().ptr(), n as u64);
        if n > 0 {
            launch!(self, "eye", elementwise(out.len()), y, count)?;
        }
        Ok(out)
    }

    /// `rand(dims)` or `randn(dims)` from Philox counters `draw`.
    pub(crate) fn random(
        &self,
        dims: Vec<usize>,
        draw: Draw,
        normal: bool,
    ) -> Result<GpuTensor, TensorError> {
        let out = self.alloc(dims)?;
        let (y, n, seed, first_block) = (
            out.buffer().ptr(),
            out.len() as u64,
            draw.seed,
            draw.first_block,
        );
        if n > 0 {
            let name = if normal {
                "randn_philox"
            } else {
                "rand_philox"
            };
            launch!(
                self,
                name,
                elementwise(out.len().div_ceil(4)),
                y,
                n,
                seed,
                first_block
            )?;
        }
        Ok(out)
    }

    /// `op(x)`.
    pub(crate) fn unary(&self, op: UnaryOp, x: &GpuTensor) -> Result<GpuTensor, TensorError> {
        let out = self.alloc(x.shape().to_vec())?;
        let (xs, y, n) = (x.buffer().ptr(), out.buffer().ptr(), x.len() as u64);
        if n > 0 {
            launch!(
                self,
                &source::unary_kernel(op),
                elementwise(x.len()),
                xs,
                y,
                n
            )?;
        }
        Ok(out)
    }

    /// `a op b` with broadcasting.
    pub(crate) fn binary(
        &self,
        a: &GpuTensor,
        op: BinaryOp,
        b: &GpuTensor,
    ) -> Result<GpuTensor, TensorError> {
        let (shape, layout) = geometry::binary_layout(a.shape(), b.shape())?;
        let out = self.alloc(shape)?;
        let (pa, pb, y, n) = (
            a.buffer().ptr(),
            b.buffer().ptr(),
            out.buffer().ptr(),
            out.len() as u64,
        );
        if n == 0 {
            return Ok(out);
        }
        let cfg = elementwise(out.len());
        match layout {
            BinaryLayout::Same => {
                launch!(self, &source::binary_kernel(op, "same"), cfg, pa, pb, y, n)?
            }
            BinaryLayout::ScalarRhs | BinaryLayout::ScalarLhs | BinaryLayout::Broadcast(_) => {
                // Device scalars go through the broadcast kernel (host scalars use
                // `binary_scalar`, which passes the value as a kernel argument).
                let params = match layout {
                    BinaryLayout::Broadcast(params) => *params,
                    _ => broadcast_params_for_scalar(&layout, out.shape()),
                };
                launch!(
                    self,
                    &source::binary_kernel(op, "bcast"),
                    cfg,
                    pa,
                    pb,
                    y,
                    params
                )?
            }
        }
        Ok(out)
    }

    /// `x op value` (or `value op x` when `scalar_on_left`) with the value as a kernel argument.
    pub(crate) fn binary_scalar(
        &self,
        x: &GpuTensor,
        op: BinaryOp,
        value: f32,
        scalar_on_left: bool,
    ) -> Result<GpuTensor, TensorError> {
        let out = self.alloc(x.shape().to_vec())?;
        let (px, y, n) = (x.buffer().ptr(), out.buffer().ptr(), x.len() as u64);
        if n == 0 {
            return Ok(out);
        }
        let cfg = elementwise(x.len());
        if scalar_on_left {
            launch!(
                self,
                &source::binary_kernel(op, "scalar_lhs"),
                cfg,
                value,
                px,
                y,
                n
            )?;
        } else {
            launch!(
                self,
                &source::binary_kernel(op, "scalar_rhs"),
                cfg,
                px,
                value,
                y,
                n
            )?;
        }
        Ok(out)
    }

    /// Runs one strided copy from `src` into `dst`.
    pub(crate) fn strided_copy(
        &self,
        src: &GpuTensor,
        dst: &GpuTensor,
        params: StridedParams,
    ) -> Result<(), TensorError> {
        if params.n == 0 {
            return Ok(());
        }
        let (x, y) = (src.buffer().ptr(), dst.buffer().ptr());
        launch!(
            self,
            "strided_copy",
            elementwise(params.n as usize),
            x,
            y,
            params
        )
    }

    /// A fresh tensor of `shape` gathered from `src`.
    pub(crate) fn gather(
        &self,
        src: &GpuTensor,
        shape: Vec<usize>,
        params: StridedParams,
    ) -> Result<GpuTensor, TensorError> {
        let out = self.alloc(shape)?;
        self.strided_copy(src, &out, params)?;
        Ok(out)
    }

    /// `reduce(op, x, axis)`, with the CPU's checks and messages.
    pub(crate) fn reduce(
        &self,
        op: ReduceOp,
        x: &GpuTensor,
        axis: Option<i64>,
    ) -> Result<GpuTensor, TensorError> {
        let needs_values = matches!(op, ReduceOp::Max | ReduceOp::Min | ReduceOp::Argmax);
        let kernel_rows = source::reduce_kernel(op, "rows");
        let Some(axis) = axis else {
            if needs_values && x.is_empty() {
                return Err(terr!(
                    "cannot take the {} of an empty tensor (shape {})",
                    op.name(),
                    fmt_shape(x.shape())
                ));
            }
            let ReduceStrategy::TwoPass { chunks, chunk_len } =
                geometry::reduce_strategy(x.len(), None)
            else {
                unreachable!("whole-tensor reductions take two passes")
            };
            let partial_values = self.device.alloc(chunks * 4, self.stream_index)?;
            let partial_indices = self.device.alloc(chunks * 8, self.stream_index)?;
            let out = self.alloc(Vec::new())?;
            let (px, no_index, pv, pi) = (
                x.buffer().ptr(),
                0u64,
                partial_values.ptr(),
                partial_indices.ptr(),
            );
            let (rows, row_len, total) = (chunks as u64, chunk_len as u64, x.len() as u64);
            let (global_idx, one, keep_value) = (1i32, 1.0f32, 0i32);
            launch!(
                self,
                &kernel_rows,
                blocks(chunks),
                px,
                no_index,
                pv,
                pi,
                rows,
                row_len,
                total,
                global_idx,
                one,
                keep_value
            )?;
            let (y, single, local_idx, index_as_value) = (out.buffer().ptr(), 1u64, 0i32, 1i32);
            let divisor = if op == ReduceOp::Mean {
                x.len() as f32
            } else {
                1.0
            };
            launch!(
                self,
                &kernel_rows,
                blocks(1),
                pv,
                pi,
                y,
                no_index,
                single,
                rows,
                rows,
                local_idx,
                divisor,
                index_as_value
            )?;
            return Ok(out);
        };
        let ax = normalize_axis(axis, x.shape().len())?;
        let extent = geometry::axis_extent(x.shape(), ax);
        if needs_values && extent.n == 0 {
            return Err(terr!(
                "cannot take the {} over axis {axis} of size 0 (shape {})",
                op.name(),
                fmt_shape(x.shape())
            ));
        }
        let mut out_shape = x.shape().to_vec();
        out_shape.remove(ax);
        let out = self.alloc(out_shape)?;
        if out.is_empty() {
            return Ok(out);
        }
        let divisor = if op == ReduceOp::Mean {
            extent.n as f32
        } else {
            1.0
        };
        let (px, y) = (x.buffer().ptr(), out.buffer().ptr());
        match geometry::reduce_strategy(x.len(), Some(extent)) {
            ReduceStrategy::Rows { rows, row_len } => {
                let (no_index, rows64, row_len64, total, local_idx, index_as_value) = (
                    0u64,
                    rows as u64,
                    row_len as u64,
                    x.len() as u64,
                    0i32,
                    1i32,
                );
                launch!(
                    self,
                    &kernel_rows,
                    blocks(rows),
                    px,
                    no_index,
                    y,
                    no_index,
                    rows64,
                    row_len64,
                    total,
                    local_idx,
                    divisor,
                    index_as_value
                )?;
            }
            ReduceStrategy::PerOutput(extent) => {
                let (outer, n, inner) = (extent.outer as u64, extent.n as u64, extent.inner as u64);
                launch!(
                    self,
                    &source::reduce_kernel(op, "per_output"),
                    elementwise(out.len()),
                    px,
                    y,
                    outer,
                    n,
                    inner,
                    divisor
                )?;
            }
            ReduceStrategy::TwoPass { .. } => {
                unreachable!("an axis reduction never takes two passes")
            }
        }
        Ok(out)
    }

    /// `softmax(x, axis)`.
    pub(crate) fn softmax(&self, x: &GpuTensor, axis: i64) -> Result<GpuTensor, TensorError> {
        let ax = normalize_axis(axis, x.shape().len())?;
        if x.is_empty() {
            return Ok(x.clone());
        }
        let extent = geometry::axis_extent(x.shape(), ax);
        let out = self.alloc(x.shape().to_vec())?;
        let (px, y, outer, n, inner) = (
            x.buffer().ptr(),
            out.buffer().ptr(),
            extent.outer as u64,
            extent.n as u64,
            extent.inner as u64,
        );
        launch!(
            self,
            "softmax_lanes",
            elementwise(extent.outer * extent.inner),
            px,
            y,
            outer,
            n,
            inner
        )?;
        Ok(out)
    }

    /// `onehot(labels, classes)`: `labels_on_host` are the same values, checked here with the
    /// CPU's messages before the kernel runs.
    pub(crate) fn onehot(
        &self,
        labels: &GpuTensor,
        labels_on_host: &Tensor,
        classes: usize,
    ) -> Result<GpuTensor, TensorError> {
        let valid = labels_on_host
            .data()
            .iter()
            .all(|&v| v.fract() == 0.0 && v.is_finite() && v >= 0.0 && v < classes as f32);
        if !valid {
            // The CPU kernel finds the first bad label and words the error.
            tensor::onehot(labels_on_host, classes)?;
        }
        let mut shape = labels.shape().to_vec();
        shape.push(classes);
        let out = self.fill(shape, 0.0)?;
        let (pl, y, n, classes64) = (
            labels.buffer().ptr(),
            out.buffer().ptr(),
            labels.len() as u64,
            classes as u64,
        );
        if n > 0 && classes > 0 {
            launch!(
                self,
                "onehot",
                elementwise(labels.len()),
                pl,
                y,
                n,
                classes64
            )?;
        }
        Ok(out)
    }

    /// `a @ b`: cuBLAS sgemm with the operands swapped for row-major data, or the tiled kernel
    /// when cuBLAS is not installed.
    pub(crate) fn matmul(&self, a: &GpuTensor, b: &GpuTensor) -> Result<GpuTensor, TensorError> {
        let plan = geometry::gemm(a.shape(), b.shape())?;
        if plan.k == 0 {
            return self.fill(plan.out_shape, 0.0);
        }
        let out = self.alloc(plan.out_shape.clone())?;
        if out.is_empty() {
            return Ok(out);
        }
        let (pa, pb, pc) = (a.buffer().ptr(), b.buffer().ptr(), out.buffer().ptr());
        match self.blas {
            Some(handle) => {
                let call = plan.column_major()?;
                let handle = lock(handle);
                let (alpha, beta) = (1.0f32, 0.0f32);
                // SAFETY: the handle is bound to this op's stream; `pb` (k×n), `pa` (m×k) and
                // `pc` (m×n) are live allocations of those sizes, and the column-major sizes
                // and leading dimensions were derived from them (`geometry::gemm`); alpha and
                // beta point to host floats that outlive the call.
                unsafe {
                    cublas::result::sgemm(
                        handle.0,
                        cublas::sys::cublasOperation_t::CUBLAS_OP_N,
                        cublas::sys::cublasOperation_t::CUBLAS_OP_N,
                        call.m,
                        call.n,
                        call.k,
                        &alpha,
                        pb as *const f32,
                        call.lda,
                        pa as *const f32,
                        call.ldb,
                        &beta,
                        pc as *mut f32,
                        call.ldc,
                    )
                }
                .map_err(|error| terr!("cuBLAS error: {error:?}"))?;
            }
            None => {
                let tiles_y = plan.m.div_ceil(16);
                if tiles_y > geometry::MAX_GRID as usize {
                    return Err(terr!(
                        "matmul: {} rows are too many for the fallback kernel",
                        plan.m
                    ));
                }
                let cfg = LaunchConfig {
                    grid_dim: (plan.n.div_ceil(16) as u32, tiles_y as u32, 1),
                    block_dim: (16, 16, 1),
                    shared_mem_bytes: 0,
                };
                let (m, n, k) = (plan.m as u64, plan.n as u64, plan.k as u64);
                launch!(self, "matmul_tiled", cfg, pa, pb, pc, m, n, k)?;
            }
        }
        Ok(out)
    }
}

/// Broadcast parameters for a device tensor of one element against `shape` (the one-element
/// side reads stride 0 everywhere).
fn broadcast_params_for_scalar(
    layout: &BinaryLayout,
    shape: &[usize],
) -> geometry::BroadcastParams {
    let n = shape.iter().product::<usize>() as u64;
    let mut params = geometry::BroadcastParams {
        ndim: 1,
        n,
        shape: [1; geometry::MAX_DIMS],
        a_strides: [0; geometry::MAX_DIMS],
        b_strides: [0; geometry::MAX_DIMS],
    };
    params.shape[0] = n;
    match layout {
        BinaryLayout::ScalarRhs => params.a_strides[0] = 1,
        _ => params.b_strides[0] = 1,
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_scalars_broadcast_with_stride_zero() {
        let rhs = broadcast_params_for_scalar(&BinaryLayout::ScalarRhs, &[2, 3]);
        assert_eq!((rhs.n, rhs.a_strides[0], rhs.b_strides[0]), (6, 1, 0));
        let lhs = broadcast_params_for_scalar(&BinaryLayout::ScalarLhs, &[4]);
        assert_eq!((lhs.n, lhs.a_strides[0], lhs.b_strides[0]), (4, 0, 1));
    }
}
