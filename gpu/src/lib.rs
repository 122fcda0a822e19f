//! Running the language on NVIDIA GPUs through cudarc, with MXNet RFC 18951's asynchronous
//! completion: a GPU op's engine dependencies complete when its kernels are *enqueued*, other
//! streams wait on CUDA events, and only CPU consumers block.
//!
//! Brief overview:
//!
//! - [`detect`] says whether this process can use GPUs and why not, never panicking (cudarc is
//!   loaded at run time; nothing CUDA is needed to build or test). [`placement_error`] words the
//!   error for a script that names a GPU this machine lacks.
//! - [`GpuRuntime`] (one per process) opens each [`GpuDevice`] lazily: a context, one stream per
//!   engine worker with its cuBLAS handle, and the kernels, compiled once per compute capability
//!   by NVRTC (to machine code; PTX as a fallback).
//! - [`GpuTensor`] is a shape over an immutable [`DeviceBuffer`], which remembers the event of
//!   the kernel that wrote it and the latest read per stream; its free is stream-ordered.
//! - [`GpuBackend`] is the plan evaluator's backend for one stream of one device
//!   ([`GpuOpContext`]), and [`run_op`] runs one op's evaluation with it;
//!   [`upload`], [`download`] and [`copy_to_device`] move values; [`binary`], [`unary`],
//!   [`matmul`] and [`full`] run single operations as ops of their own (tests, benchmarks).
//! - [`GpuRng`] is the generator state of GPU `rand`/`randn` (Philox counters).
//!
//! The module doc of `runtime.rs` states the protocol and its shared state; `access.rs` holds
//! the event bookkeeping as plain data, `geometry.rs` every host-side shape computation, and
//! `source.rs` the generated kernel source, all tested without a GPU.
//!
//! ```
//! use dep_gpu as gpu;
//!
//! match gpu::detect() {
//!     gpu::GpuAvailability::Available { n_devices } => println!("{n_devices} GPUs"),
//!     gpu::GpuAvailability::Unavailable { reason } => {
//!         let message = gpu::placement_error(0, gpu::detect()).unwrap();
//!         assert!(message.contains(reason.as_str()));
//!     }
//! }
//! ```

#![deny(missing_docs)]

mod access;
mod api;
mod detect;
mod eval;
mod geometry;
mod ops;
mod philox;
mod runtime;
mod source;
#[cfg(test)]
mod tests;
mod timing;

pub use access::StreamId;
pub use api::{binary, binary_scalar, full, matmul, unary};
pub use detect::{detect, placement_error, GpuAvailability, DISABLE_ENV};
pub use eval::{run_op, GpuBackend, GpuValue};
pub use philox::{reference_normal, reference_uniform, Draw, GpuRng};
pub use runtime::{
    choose_sync_every_op, copy_to_device, download, synchronize_opened, upload, DeviceBuffer,
    GpuConfig, GpuDevice, GpuOpContext, GpuRuntime, GpuTensor, KernelSpan, SYNC_ENV,
};
pub use runtime::{is_open, take_deferred_errors};
pub use timing::flush_kernel_times;

/// The tensors, under the name the CUDA layer has always reached them by.
use dep_tensor as tensor;
pub use timing::report_later;
