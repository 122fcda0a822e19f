//! The CUDA side: the per-process runtime, each device's context, streams, cuBLAS handles and
//! kernel module, device buffers with their event logs, and the scope of one GPU op.
//!
//! # Protocol (MXNet RFC 18951)
//!
//! - An op runs on one stream `S` of one device (the engine worker `gpuN:sK` uses stream `K`).
//!   [`OpScope::begin`] makes `S` wait (`cuStreamWaitEvent`, no CPU blocking) for the writer event
//!   of every input written on another stream; then the op enqueues its kernels; then
//!   [`OpScope::finish`] records one event on `S`, which becomes the writer event of every buffer
//!   the op created and a read of every input. The engine may complete the op's dependencies as
//!   soon as `finish` returns: the kernels need not have run. An op that fails after `begin`
//!   (its kernels perhaps enqueued) still records an event and notes it as a read of every input
//!   when its scope drops, so that no input is freed under its kernels.
//! - Buffers are immutable once their op finished (every op writes fresh buffers; `reshape` shares
//!   one), so a buffer has one writer event for life and, per stream, its latest reader.
//! - A CPU consumer ([`download`]) blocks on the writer event only.
//! - Freeing (the last `Arc<DeviceBuffer>` dropped) is stream-ordered: the buffer's home stream
//!   waits for the events of its last users on other streams, then `cuMemFreeAsync` is enqueued
//!   there. Nothing is freed under a queued kernel, and no CPU thread waits (unless a wait
//!   cannot be enqueued: the drop then waits for that event on the host, and frees anyway).
//! - `DEP_GPU_SYNC=1` makes `finish` synchronize the stream: the pre-RFC behaviour, to compare.
//!
//! # Shared state
//!
//! - `GpuRuntime`: created once per process, read-only afterwards; devices open lazily.
//! - A device's `bytes_in_use` (atomic), `event_pool` and `deferred_error` (mutexes held for a
//!   push or pop only). Each stream's cuBLAS handle sits behind its own mutex: an engine worker
//!   owns its stream, so the lock is uncontended.
//! - A buffer's `AccessLog` (mutex): locked by `begin`/`finish` of ops that use the buffer and
//!   by its drop; no other lock is taken while holding it.
//!
//! cudarc's own per-slice event tracking is turned off: this module never creates a
//! `CudaSlice`, it allocates raw device memory and tracks it with [`AccessLog`].
//!
//! # Kernels
//!
//! NVRTC compiles the generated source once per compute capability to a CUBIN (machine code for
//! that `sm_XY`), loaded through a temporary file; when it cannot (an NVRTC too old for the
//! GPU), to PTX that the driver JIT-compiles. PTX alone would fail on a driver older than the
//! NVRTC that made it (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION`); a CUBIN loads on any driver of the
//! same CUDA major version.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::cublas;
use cudarc::driver::{result, sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream};

use super::access::{AccessLog, StreamId};
use super::detect::{detect, placement_error, probe_library, GpuAvailability};
use super::source;
use crate::tensor::error::terr;
use crate::tensor::{shape, Tensor, TensorError};
use dep_engine::lock;

/// The environment variable that turns on the sync-every-op mode (`DEP_GPU_SYNC=1`).
pub const SYNC_ENV: &str = "DEP_GPU_SYNC";

/// The sync mode a script chose per device (`device gpu0 = sim(sync=1)` on a real engine), over
/// the configuration's: [`AS_CONFIGURED`], [`SYNC_OFF`] or [`SYNC_ON`], by device index.
static SYNC_CHOSEN: [AtomicU8; MAX_CHOSEN_DEVICES] =
    [const { AtomicU8::new(AS_CONFIGURED) }; MAX_CHOSEN_DEVICES];
/// How many devices a script can choose the sync mode of (`gpu0` .. `gpu63`).
const MAX_CHOSEN_DEVICES: usize = 64;
const AS_CONFIGURED: u8 = 0;
const SYNC_OFF: u8 = 1;
const SYNC_ON: u8 = 2;

/// Chooses whether GPU ops of device `gpu{index}` (of every device with `None`) synchronize
/// their stream at their end (the pre-RFC mode, [`SYNC_ENV`] for one device), from the next op
/// on. For a script's `device gpu0 = sim(sync=1)`, which a real engine honours this way; the
/// caller waits for the ops already pushed first, so that none runs in the mode it was not
/// pushed in. An error for an index beyond the 64 this can set.
pub fn choose_sync_every_op(index: Option<u16>, on: bool) -> Result<(), TensorError> {
    let mode = if on { SYNC_ON } else { SYNC_OFF };
    match index {
        None => SYNC_CHOSEN
            .iter()
            .for_each(|slot| slot.store(mode, Ordering::Relaxed)),
        Some(index) => SYNC_CHOSEN
            .get(usize::from(index))
            .ok_or_else(|| {
                terr!(
                    "the sync mode can be chosen for gpu0 to gpu{}",
                    MAX_CHOSEN_DEVICES - 1
                )
            })?
            .store(mode, Ordering::Relaxed),
    }
    Ok(())
}

/// How the GPU runtime is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuConfig {
    /// CUDA streams per device: one per engine worker of that GPU (the engine's `gpu_streams`).
    pub streams_per_device: usize,
    /// Synchronize the stream after every op (the pre-RFC behaviour, for comparison).
    pub sync_every_op: bool,
}

impl GpuConfig {
    /// `streams_per_device` streams, with the sync mode taken from `DEP_GPU_SYNC`.
    pub fn from_env(streams_per_device: usize) -> GpuConfig {
        GpuConfig {
            streams_per_device: streams_per_device.max(1),
            sync_every_op: std::env::var_os(SYNC_ENV)
                .is_some_and(|value| !value.is_empty() && value != "0"),
        }
    }
}

/// The process's GPUs: created once, on first use, by [`GpuRuntime::get`].
pub struct GpuRuntime {
    config: GpuConfig,
    n_devices: usize,
    devices: Vec<OnceLock<Result<Arc<GpuDevice>, TensorError>>>,
}

impl fmt::Debug for GpuRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuRuntime")
            .field("config", &self.config)
            .field("n_devices", &self.n_devices)
            .finish()
    }
}

/// The process's runtime, once [`GpuRuntime::get`] made it.
static RUNTIME: OnceLock<Result<GpuRuntime, TensorError>> = OnceLock::new();

/// The deferred errors (see [`GpuDevice::take_deferred_error`]) of the devices opened so far,
/// each naming its device. Never initialises CUDA nor opens a device.
pub fn take_deferred_errors() -> Vec<String> {
    let Some(Ok(runtime)) = RUNTIME.get() else {
        return Vec::new();
    };
    runtime
        .devices
        .iter()
        .filter_map(|device| match device.get() {
            Some(Ok(device)) => device
                .take_deferred_error()
                .map(|error| format!("gpu{}: {error}", device.index)),
            _ => None,
        })
        .collect()
}

/// Whether GPU `index` has been opened (by an op or by the interpreter placing ops on it).
/// Never initialises CUDA nor opens a device.
pub fn is_open(index: u16) -> bool {
    let Some(Ok(runtime)) = RUNTIME.get() else {
        return false;
    };
    runtime
        .devices
        .get(usize::from(index))
        .is_some_and(|device| matches!(device.get(), Some(Ok(_))))
}

/// Waits until everything enqueued on the GPUs opened so far (kernels, copies, frees) has run:
/// a GPU op completes when its kernels are enqueued, so `wait` also needs this to mean "done".
/// The first failure names its device. Never initialises CUDA nor opens a device.
pub fn synchronize_opened() -> Result<(), TensorError> {
    let Some(Ok(runtime)) = RUNTIME.get() else {
        return Ok(());
    };
    let opened = runtime.devices.iter().filter_map(|device| device.get());
    for device in opened.flatten() {
        device
            .synchronize()
            .map_err(|error| terr!("gpu{}: {error}", device.index))?;
    }
    Ok(())
}

impl GpuRuntime {
    /// The runtime, created on the first call with that call's `config` (later calls get the
    /// same runtime whatever config they pass). An error when there is no GPU, with the reason.
    pub fn get(config: GpuConfig) -> Result<&'static GpuRuntime, TensorError> {
        RUNTIME
            .get_or_init(|| match detect() {
                GpuAvailability::Available { n_devices } => Ok(GpuRuntime {
                    config,
                    n_devices: *n_devices,
                    devices: (0..*n_devices).map(|_| OnceLock::new()).collect(),
                }),
                unavailable @ GpuAvailability::Unavailable { .. } => Err(TensorError::new(
                    placement_error(0, unavailable).unwrap_or_default(),
                )),
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The configuration the runtime was created with.
    pub fn config(&self) -> &GpuConfig {
        &self.config
    }

    /// The number of devices.
    pub fn n_devices(&self) -> usize {
        self.n_devices
    }

    /// Device `gpu{index}`, opened on first use (context, streams, cuBLAS, kernels).
    pub fn device(&self, index: u16) -> Result<&Arc<GpuDevice>, TensorError> {
        let slot = self.devices.get(usize::from(index)).ok_or_else(|| {
            let availability = GpuAvailability::Available {
                n_devices: self.n_devices,
            };
            TensorError::new(placement_error(index, &availability).unwrap_or_default())
        })?;
        slot.get_or_init(|| GpuDevice::open(index, &self.config))
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// One GPU: its context, streams (each with a cuBLAS handle), the compiled kernels, a count of
/// the bytes its live buffers hold, and a pool of reusable events.
pub struct GpuDevice {
    index: u16,
    name: String,
    ctx: Arc<CudaContext>,
    streams: Vec<GpuStream>,
    functions: HashMap<String, CudaFunction>,
    /// What the kernels were loaded from: `sm_90 CUBIN`, or `PTX` (JIT-compiled by the driver).
    kernel_binary: String,
    bytes_in_use: AtomicUsize,
    event_pool: Mutex<Vec<CudaEvent>>,
    sync_every_op: bool,
    deferred_error: Mutex<Option<String>>,
    epoch: CudaEvent,
    /// When `epoch` completed, on the host's clock (it was waited for when the device opened).
    epoch_at: Instant,
}

impl fmt::Debug for GpuDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuDevice")
            .field("index", &self.index)
            .field("name", &self.name)
            .field("streams", &self.streams.len())
            .field("kernel_binary", &self.kernel_binary)
            .field("bytes_in_use", &self.bytes_in_use())
            .finish()
    }
}

pub(crate) struct GpuStream {
    // Declared first, so dropped first: the handle before the stream it is bound to.
    pub(crate) blas: Option<Mutex<BlasHandle>>,
    pub(crate) stream: Arc<CudaStream>,
    /// Held from recording an op's completion event until the event is noted in the access
    /// logs: threads that share the stream (GPU ops on the threaded policy's pool, copies) then
    /// note events in the order they were recorded, as `AccessLog::note_read` assumes (it keeps
    /// the latest read per stream). Lock order: `notes`, then a buffer's log.
    pub(crate) notes: Mutex<()>,
}

/// A cuBLAS handle bound to one stream.
pub(crate) struct BlasHandle(pub(crate) cublas::sys::cublasHandle_t);

// SAFETY: a cuBLAS handle may be used from any thread as long as no two threads use it at once;
// it only ever lives behind a `Mutex`.
unsafe impl Send for BlasHandle {}

impl Drop for BlasHandle {
    fn drop(&mut self) {
        // SAFETY: the handle was created by `create_handle` and is destroyed once, here.
        let _ = unsafe { cublas::result::destroy_handle(self.0) };
    }
}

/// Compiles the kernel source once per process.
fn ptx() -> Result<&'static cudarc::nvrtc::Ptx, TensorError> {
    static PTX: OnceLock<Result<cudarc::nvrtc::Ptx, TensorError>> = OnceLock::new();
    PTX.get_or_init(|| {
        probe_library("nvrtc", &["nvrtcCreateProgram", "nvrtcGetPTX"]).map_err(|reason| {
            terr!(
                "cannot compile GPU kernels: {reason}; install CUDA's NVRTC \
                 (e.g. `pip install nvidia-cuda-nvrtc`, or `nvidia-cuda-nvrtc-cu12` for CUDA 12) and add its lib directory to LD_LIBRARY_PATH"
            )
        })?;
        let compiled = std::panic::catch_unwind(|| {
            cudarc::nvrtc::compile_ptx_with_opts(
                source::kernel_source(),
                cudarc::nvrtc::CompileOptions {
                    name: Some("dep_kernels.cu".to_string()),
                    ..Default::default()
                },
            )
        });
        match compiled {
            Ok(Ok(ptx)) => Ok(ptx),
            Ok(Err(error)) => Err(terr!("NVRTC failed to compile the GPU kernels: {error:?}")),
            Err(_) => Err(terr!("NVRTC could not be loaded")),
        }
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The kernels of `ctx`'s device as machine code for its compute capability (a CUBIN), or, when
/// NVRTC cannot make one (too old for this GPU), as PTX for the driver to JIT-compile. Gives the
/// module and what was loaded (`sm_90 CUBIN`, `PTX`).
///
/// A CUBIN comes first: PTX carries the ISA version of the NVRTC that made it, and a driver older
/// than that NVRTC refuses it (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION`), while machine code from a
/// CUDA toolkit loads on any driver of its major version or later; it also spares the
/// JIT at every start.
fn load_kernels(ctx: &Arc<CudaContext>) -> Result<(Arc<CudaModule>, String), TensorError> {
    let from_cubin = compute_capability(ctx).and_then(|cc| {
        let image = cubin(cc)?;
        load_cubin(ctx, &image, cc)
    });
    match from_cubin {
        Ok(module) => Ok(module),
        Err(cubin_error) => {
            let ptx = ptx()?;
            let module = ctx.load_module(ptx.clone()).map_err(|error| {
                terr!(
                    "cannot load the GPU kernels: as PTX, CUDA error {error:?}; \
                     as a CUBIN, {cubin_error}"
                )
            })?;
            Ok((module, "PTX".to_string()))
        }
    }
}

/// The compute capability `(major, minor)` of `ctx`'s device.
fn compute_capability(ctx: &Arc<CudaContext>) -> Result<(i32, i32), TensorError> {
    use sys::CUdevice_attribute::{
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR as MAJOR,
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR as MINOR,
    };
    Ok((
        ctx.attribute(MAJOR).map_err(driver_error)?,
        ctx.attribute(MINOR).map_err(driver_error)?,
    ))
}

/// The kernels as a CUBIN for compute capability `cc`, compiled once per capability and process.
fn cubin(cc: (i32, i32)) -> Result<Arc<Vec<u8>>, TensorError> {
    type Cache = Mutex<HashMap<(i32, i32), Result<Arc<Vec<u8>>, TensorError>>>;
    static CUBINS: OnceLock<Cache> = OnceLock::new();
    // Held while compiling, so that two devices of one capability compile once.
    let mut cubins = lock(CUBINS.get_or_init(Default::default));
    cubins
        .entry(cc)
        .or_insert_with(|| {
            probe_library("nvrtc", &["nvrtcCreateProgram", "nvrtcGetCUBIN"])
                .map_err(|reason| terr!("cannot compile GPU kernels: {reason}"))?;
            match std::panic::catch_unwind(|| compile_cubin(&source::kernel_source(), cc)) {
                Ok(Ok(image)) => Ok(Arc::new(image)),
                Ok(Err(error)) => Err(terr!("{error}")),
                Err(_) => Err(terr!("NVRTC could not be loaded")),
            }
        })
        .clone()
}

/// Compiles `source` with NVRTC to a CUBIN (an ELF image of machine code) for compute capability
/// `cc` (`--gpu-architecture=sm_XY`). Needs NVRTC, not a GPU. Panics where cudarc does: when
/// NVRTC cannot be loaded (the caller catches it).
pub(crate) fn compile_cubin(source: &str, cc: (i32, i32)) -> Result<Vec<u8>, String> {
    use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys};
    let arch = format!("sm_{}{}", cc.0, cc.1);
    let src = std::ffi::CString::new(source).map_err(|_| "the kernel source holds a NUL")?;
    let prog = nvrtc::create_program(&src, Some(c"dep_kernels.cu"))
        .map_err(|error| format!("NVRTC cannot create a program: {error:?}"))?;
    // SAFETY: `prog` was created above from `src`, which outlives it, and is destroyed once, below;
    // the image buffer has the size NVRTC reports for it.
    let image = unsafe {
        nvrtc::compile_program(prog, &[format!("--gpu-architecture={arch}")])
            .map_err(|error| {
                let log = nvrtc::get_program_log(prog)
                    .map(|log| {
                        let bytes: Vec<u8> = log
                            .iter()
                            .take_while(|c| **c != 0)
                            .map(|c| *c as u8)
                            .collect();
                        String::from_utf8_lossy(&bytes).into_owned()
                    })
                    .unwrap_or_default();
                format!("NVRTC cannot compile the GPU kernels for {arch}: {error:?} {log}")
            })
            .and_then(|()| {
                let mut size = 0usize;
                nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .map_err(|error| format!("NVRTC has no CUBIN for {arch}: {error:?}"))?;
                let mut image = vec![0u8; size];
                nvrtc_sys::nvrtcGetCUBIN(prog, image.as_mut_ptr().cast())
                    .result()
                    .map_err(|error| format!("NVRTC has no CUBIN for {arch}: {error:?}"))?;
                Ok(image)
            })
    };
    // SAFETY: `prog` was created above and is destroyed once, here.
    let _ = unsafe { nvrtc::destroy_program(prog) };
    image
}

/// Loads a CUBIN into `ctx`. cudarc loads a module from bytes only as PTX text, and from a file
/// with `cuModuleLoad`, which takes a CUBIN too: so the image goes through a file of its own
/// (see [`write_cubin_file`]), removed once loaded (`cuModuleLoad` reads it whole).
fn load_cubin(
    ctx: &Arc<CudaContext>,
    image: &[u8],
    cc: (i32, i32),
) -> Result<(Arc<CudaModule>, String), TensorError> {
    let path = write_cubin_file(image, cc)?;
    let loaded = match path.to_str() {
        // cudarc passes the path on as UTF-8.
        None => Err(terr!("{} is not UTF-8", path.display())),
        Some(_) => ctx
            .load_module(cudarc::nvrtc::Ptx::from_file(path.clone()))
            .map_err(|error| {
                terr!(
                    "CUDA error loading the sm_{}{} CUBIN: {error:?}",
                    cc.0,
                    cc.1
                )
            }),
    };
    let _ = std::fs::remove_file(&path);
    Ok((loaded?, format!("sm_{}{} CUBIN", cc.0, cc.1)))
}

/// Writes a CUBIN for compute capability `cc` to a new file under the temporary directory, named
/// with the process id and a counter (`dep-kernels-PID-N-sm_XY.cubin`), created new (never an
/// existing file, or a link planted under that name); the caller removes it.
pub(crate) fn write_cubin_file(
    image: &[u8],
    cc: (i32, i32),
) -> Result<std::path::PathBuf, TensorError> {
    use std::io::Write;
    static NEXT_FILE: AtomicUsize = AtomicUsize::new(0);
    for _ in 0..100 {
        let path = std::env::temp_dir().join(format!(
            "dep-kernels-{}-{}-sm_{}{}.cubin",
            std::process::id(),
            NEXT_FILE.fetch_add(1, Ordering::Relaxed),
            cc.0,
            cc.1
        ));
        let mut file = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => file,
            // Left by an earlier process of the same id: take the next name.
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(terr!("cannot write {}: {error}", path.display())),
        };
        return match file.write_all(image).and_then(|()| file.flush()) {
            Ok(()) => Ok(path),
            Err(error) => {
                drop(file);
                let _ = std::fs::remove_file(&path);
                Err(terr!("cannot write {}: {error}", path.display()))
            }
        };
    }
    Err(terr!(
        "cannot write a CUBIN under {}: every name is taken",
        std::env::temp_dir().display()
    ))
}

/// One cuBLAS handle per stream, each bound to its stream; `None` when cuBLAS fails to load or
/// to make one (matrix products then use the tiled kernel). cudarc panics when the library it
/// finds lacks a symbol it binds (a cuBLAS 11, say): that is caught here, so a bad cuBLAS costs
/// the GPU its cuBLAS, not the GPU.
fn blas_handles(streams: &[Arc<CudaStream>]) -> Option<Vec<BlasHandle>> {
    let made =
        std::panic::catch_unwind(|| -> Result<Vec<BlasHandle>, cublas::result::CublasError> {
            let mut handles = Vec::with_capacity(streams.len());
            for stream in streams {
                let handle = BlasHandle(cublas::result::create_handle()?);
                // SAFETY: both the handle and the stream are live; the stream outlives the handle
                // (both belong to one `GpuStream`, and the handle drops first).
                unsafe {
                    cublas::result::set_stream(
                        handle.0,
                        stream.cu_stream() as cublas::sys::cudaStream_t,
                    )
                }?;
                handles.push(handle);
            }
            Ok(handles)
        });
    match made {
        Ok(Ok(handles)) => Some(handles),
        Ok(Err(_)) | Err(_) => None,
    }
}

pub(crate) fn driver_error(error: result::DriverError) -> TensorError {
    terr!("CUDA error: {error:?}")
}

impl GpuDevice {
    fn open(index: u16, config: &GpuConfig) -> Result<Arc<GpuDevice>, TensorError> {
        let blas_available =
            probe_library("cublas", &["cublasCreate_v2", "cublasSgemm_v2"]).is_ok();
        let opened = std::panic::catch_unwind(|| -> Result<GpuDevice, TensorError> {
            let ctx = CudaContext::new(usize::from(index)).map_err(driver_error)?;
            // SAFETY: this module never creates a `CudaSlice`; every buffer is raw device memory
            // whose cross-stream uses are ordered by its `AccessLog` (see the module doc).
            unsafe { ctx.disable_event_tracking() };
            let name = ctx.name().map_err(driver_error)?;
            set_pool_release_threshold(&ctx)?;
            let (module, kernel_binary) = load_kernels(&ctx)?;
            let mut cu_streams = Vec::with_capacity(config.streams_per_device);
            for _ in 0..config.streams_per_device.max(1) {
                cu_streams.push(ctx.new_stream().map_err(driver_error)?);
            }
            let mut handles = match blas_available {
                true => blas_handles(&cu_streams),
                false => None,
            }
            .map(|handles| handles.into_iter().map(Mutex::new));
            let streams: Vec<GpuStream> = cu_streams
                .into_iter()
                .map(|stream| GpuStream {
                    stream,
                    blas: handles.as_mut().and_then(Iterator::next),
                    notes: Mutex::new(()),
                })
                .collect();
            let mut functions = HashMap::new();
            for name in source::kernel_names() {
                let function = module.load_function(&name).map_err(driver_error)?;
                functions.insert(name, function);
            }
            let epoch = streams[0]
                .stream
                .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(driver_error)?;
            epoch.synchronize().map_err(driver_error)?;
            let epoch_at = Instant::now();
            Ok(GpuDevice {
                index,
                name,
                ctx,
                streams,
                functions,
                kernel_binary,
                bytes_in_use: AtomicUsize::new(0),
                event_pool: Mutex::new(Vec::new()),
                sync_every_op: config.sync_every_op,
                deferred_error: Mutex::new(None),
                epoch,
                epoch_at,
            })
        });
        match opened {
            Ok(result) => result.map(Arc::new),
            Err(_) => Err(terr!(
                "gpu{index} could not be opened: a CUDA library failed to load"
            )),
        }
    }

    /// The device's index (`gpu{index}`).
    pub fn index(&self) -> u16 {
        self.index
    }

    /// Whether its ops synchronize their stream at their end: as a script chose
    /// ([`choose_sync_every_op`]), else as configured ([`SYNC_ENV`]).
    pub fn syncs_every_op(&self) -> bool {
        let chosen = SYNC_CHOSEN
            .get(usize::from(self.index))
            .map_or(AS_CONFIGURED, |slot| slot.load(Ordering::Relaxed));
        match chosen {
            SYNC_ON => true,
            SYNC_OFF => false,
            _ => self.sync_every_op,
        }
    }

    /// The device's name as the driver reports it, e.g. `NVIDIA H100 80GB HBM3`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the kernels were loaded from: a CUBIN for the device's compute capability
    /// (`sm_90 CUBIN`), or `PTX` that the driver JIT-compiled (when NVRTC could not make a CUBIN).
    pub fn kernel_binary(&self) -> &str {
        &self.kernel_binary
    }

    /// The number of streams (engine workers) of this device.
    pub fn n_streams(&self) -> usize {
        self.streams.len()
    }

    /// Whether matrix products go through cuBLAS (else a tiled NVRTC kernel).
    pub fn has_cublas(&self) -> bool {
        self.streams[0].blas.is_some()
    }

    /// Bytes held by live buffers of this device (a buffer's bytes stop counting when its free
    /// is enqueued).
    pub fn bytes_in_use(&self) -> usize {
        self.bytes_in_use.load(Ordering::Relaxed)
    }

    /// Blocks until every stream of the device is idle (tests and benchmarks).
    pub fn synchronize(&self) -> Result<(), TensorError> {
        for stream in &self.streams {
            stream.stream.synchronize().map_err(driver_error)?;
        }
        Ok(())
    }

    /// An error from a place that could not return one (a buffer's free), if any happened since
    /// the last call.
    pub fn take_deferred_error(&self) -> Option<String> {
        lock(&self.deferred_error).take()
    }

    /// Milliseconds from the device's epoch (recorded when it was opened) to `event`, once the
    /// event has completed; `None` before (never blocks).
    pub fn ms_since_epoch(&self, event: &CudaEvent) -> Option<f32> {
        self.ms_between(&self.epoch, event)
    }

    /// Milliseconds from `start` to `end` (two timing events of this device), once `end` has
    /// completed; `None` before (never blocks). From any thread: the context is bound first.
    pub(crate) fn ms_between(&self, start: &CudaEvent, end: &CudaEvent) -> Option<f32> {
        self.bind().ok()?;
        // `cuEventQuery` (unlike cudarc's other event calls) does not bind a context itself.
        if !end.is_complete() || !start.is_complete() {
            return None;
        }
        // SAFETY: both events belong to this device's context (bound above) and have completed.
        unsafe { result::event::elapsed(start.cu_event(), end.cu_event()) }.ok()
    }

    /// The epoch event and when it completed on the host's clock: the first anchor from which
    /// kernel times are placed on the host's clock (see `timing.rs`).
    pub(crate) fn epoch(&self) -> (&CudaEvent, Instant) {
        (&self.epoch, self.epoch_at)
    }

    pub(crate) fn stream(&self, index: usize) -> Result<&GpuStream, TensorError> {
        self.streams.get(index).ok_or_else(|| {
            terr!(
                "gpu{} has {} streams; stream {index} does not exist",
                self.index,
                self.streams.len()
            )
        })
    }

    pub(crate) fn function(&self, name: &str) -> Result<&CudaFunction, TensorError> {
        self.functions
            .get(name)
            .ok_or_else(|| terr!("no GPU kernel named {name}"))
    }

    pub(crate) fn bind(&self) -> Result<(), TensorError> {
        self.ctx.bind_to_thread().map_err(driver_error)
    }

    pub(crate) fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    fn stream_id(&self, stream: usize) -> StreamId {
        StreamId {
            device: self.index,
            stream: stream as u16,
        }
    }

    /// A recorded-later event from the pool (events are created without timing, the cheapest).
    fn pooled_event(self: &Arc<Self>) -> Result<SharedEvent, TensorError> {
        let event = match lock(&self.event_pool).pop() {
            Some(event) => event,
            None => self.ctx.new_event(None).map_err(driver_error)?,
        };
        Ok(Arc::new(PooledEvent {
            event: Some(event),
            device: self.clone(),
        }))
    }

    fn defer_error(&self, message: String) {
        *lock(&self.deferred_error) = Some(message);
    }

    /// The error for `n_bytes` that gpuN cannot give: what was asked, what the device has
    /// free of its total (when the driver says), what dep holds there, and the driver's words.
    fn alloc_error(
        &self,
        n_bytes: usize,
        memory: Option<(usize, usize)>,
        why: &str,
    ) -> TensorError {
        let gib = |bytes: usize| crate::tensor::format_bytes(bytes as u64);
        let device = match memory {
            Some((free, total)) => format!("{} free of {}", gib(free), gib(total)),
            None => "free memory unknown".to_string(),
        };
        terr!(
            "cannot allocate {} on gpu{}: {device}, {} held by dep ({why})",
            gib(n_bytes),
            self.index,
            gib(self.bytes_in_use())
        )
    }

    /// Allocates `n_bytes` on `stream` (stream-ordered).
    pub(crate) fn alloc(
        self: &Arc<Self>,
        n_bytes: usize,
        stream: usize,
    ) -> Result<Arc<DeviceBuffer>, TensorError> {
        let home = self.stream_id(stream);
        let ptr = if n_bytes == 0 {
            0
        } else {
            self.bind()?;
            // Larger than the whole device: refused before asking. Otherwise the driver's own
            // out-of-memory answer is clean (no OOM killer on a GPU), and freed memory kept in
            // the stream-ordered pool is not "free" to cuMemGetInfo, so only a failure is
            // explained with the device's figures.
            let memory = result::mem_get_info().ok();
            if memory.is_some_and(|(_, total)| n_bytes > total) {
                return Err(self.alloc_error(n_bytes, memory, "larger than the whole device"));
            }
            // SAFETY: the stream is live (owned by this device); the memory is uninitialised
            // and every op writes a buffer entirely before anything reads it.
            unsafe { result::malloc_async(self.stream(stream)?.stream.cu_stream(), n_bytes) }
                .map_err(|error| {
                    self.alloc_error(n_bytes, result::mem_get_info().ok(), &format!("{error:?}"))
                })?
        };
        self.bytes_in_use.fetch_add(n_bytes, Ordering::Relaxed);
        Ok(Arc::new(DeviceBuffer {
            device: self.clone(),
            ptr,
            n_bytes,
            home,
            log: Mutex::new(AccessLog::new()),
        }))
    }
}

/// Sets the default memory pool to keep freed memory (rather than return it to the driver at
/// every synchronization), so stream-ordered allocation stays cheap under load.
fn set_pool_release_threshold(ctx: &Arc<CudaContext>) -> Result<(), TensorError> {
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let mut threshold: u64 = u64::MAX;
    // SAFETY: `pool` and `threshold` are valid for the writes/reads the driver makes; the
    // device handle comes from a live context.
    unsafe {
        sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device())
            .result()
            .map_err(driver_error)?;
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
        .result()
        .map_err(driver_error)
    }
}

/// A CUDA event shared by the buffers whose logs name it; back to its device's pool when the
/// last holder lets go.
pub(crate) struct PooledEvent {
    event: Option<CudaEvent>,
    device: Arc<GpuDevice>,
}

pub(crate) type SharedEvent = Arc<PooledEvent>;

impl PooledEvent {
    fn cu_event(&self) -> sys::CUevent {
        self.event
            .as_ref()
            .map_or(std::ptr::null_mut(), CudaEvent::cu_event)
    }
}

impl fmt::Debug for PooledEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PooledEvent({:?})", self.cu_event())
    }
}

impl Drop for PooledEvent {
    fn drop(&mut self) {
        if let Some(event) = self.event.take() {
            lock(&self.device.event_pool).push(event);
        }
    }
}

/// Device memory holding one tensor's values, with the events that order its uses.
///
/// Invariant: `ptr` is a live allocation of `n_bytes` on `device` (0 for no bytes) until the
/// drop, which frees it stream-ordered after its last users.
pub struct DeviceBuffer {
    device: Arc<GpuDevice>,
    ptr: sys::CUdeviceptr,
    n_bytes: usize,
    home: StreamId,
    log: Mutex<AccessLog<SharedEvent>>,
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("device", &self.device.index)
            .field("n_bytes", &self.n_bytes)
            .field("home", &self.home)
            .finish()
    }
}

impl DeviceBuffer {
    /// The device the buffer lives on.
    pub fn device(&self) -> &Arc<GpuDevice> {
        &self.device
    }

    /// Its size in bytes.
    pub fn n_bytes(&self) -> usize {
        self.n_bytes
    }

    /// The stream it was allocated (and written) on, where it will be freed.
    pub fn home_stream(&self) -> StreamId {
        self.home
    }

    pub(crate) fn ptr(&self) -> u64 {
        self.ptr
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.n_bytes == 0 {
            return;
        }
        let log = match self.log.get_mut() {
            Ok(log) => log,
            Err(poisoned) => poisoned.into_inner(),
        };
        let waits = log.waits_before_free(self.home);
        let device = &self.device;
        // A wait that cannot be enqueued is done on the host instead (the free is then enqueued
        // after the use has ended): the buffer is freed whatever failed, and the first error is
        // reported later.
        let mut failure: Option<TensorError> = None;
        let freed = (|| -> Result<(), TensorError> {
            device.bind()?;
            let stream = device
                .stream(usize::from(self.home.stream))?
                .stream
                .cu_stream();
            for event in &waits {
                // SAFETY: the stream and the event are live (the event is held by `waits`);
                // waiting enqueues a dependency and blocks no thread.
                let waited = unsafe {
                    result::stream::wait_event(
                        stream,
                        event.cu_event(),
                        sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                    )
                };
                if let Err(error) = waited {
                    failure.get_or_insert(driver_error(error));
                    if let Some(inner) = &event.event {
                        // Binds the event's own context (perhaps another device's)...
                        if let Err(error) = inner.synchronize() {
                            failure.get_or_insert(driver_error(error));
                        }
                    }
                    // ...so bind this device's again before the free.
                    device.bind()?;
                }
            }
            // SAFETY: `ptr` was allocated by `malloc_async` and is freed once, here, on its home
            // stream after every use on that stream and (through the waits above, or the host
            // waits that replaced them) on the others.
            unsafe { result::free_async(self.ptr, stream) }.map_err(driver_error)
        })();
        device
            .bytes_in_use
            .fetch_sub(self.n_bytes, Ordering::Relaxed);
        if let Some(error) = failure.or(freed.err()) {
            device.defer_error(format!("freeing a gpu buffer failed: {error}"));
        }
    }
}

/// A tensor on a GPU: a shape and the (immutable) buffer holding its values, row-major.
#[derive(Clone, Debug)]
pub struct GpuTensor {
    shape: Vec<usize>,
    buffer: Arc<DeviceBuffer>,
}

impl GpuTensor {
    pub(crate) fn new(shape: Vec<usize>, buffer: Arc<DeviceBuffer>) -> GpuTensor {
        debug_assert_eq!(shape.iter().product::<usize>() * 4, buffer.n_bytes);
        GpuTensor { shape, buffer }
    }

    /// The dimensions, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.buffer.n_bytes / 4
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.buffer.n_bytes == 0
    }

    /// The size of the values in bytes.
    pub fn nbytes(&self) -> usize {
        self.buffer.n_bytes
    }

    /// The buffer (shared by `reshape`d views).
    pub fn buffer(&self) -> &Arc<DeviceBuffer> {
        &self.buffer
    }

    /// The device index (`gpu{index}`).
    pub fn device_index(&self) -> u16 {
        self.buffer.device.index
    }

    /// The same buffer under another shape with as many elements.
    pub(crate) fn with_shape(&self, shape: Vec<usize>) -> GpuTensor {
        GpuTensor::new(shape, self.buffer.clone())
    }
}

/// Where and how one GPU op runs: the device, the stream (the engine worker's index within its
/// device group), the generator for random ops, and whether to time the op's kernels.
pub struct GpuOpContext<'a> {
    device: Arc<GpuDevice>,
    stream: usize,
    rng: Option<&'a mut super::philox::GpuRng>,
    timing: bool,
    span: Option<KernelSpan>,
}

impl fmt::Debug for GpuOpContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuOpContext")
            .field("device", &self.device.index)
            .field("stream", &self.stream)
            .field("timing", &self.timing)
            .finish()
    }
}

impl<'a> GpuOpContext<'a> {
    /// An op on `device`'s stream `stream` (an error if the device has fewer streams).
    pub fn new(device: &Arc<GpuDevice>, stream: usize) -> Result<GpuOpContext<'a>, TensorError> {
        device.stream(stream)?;
        Ok(GpuOpContext {
            device: device.clone(),
            stream,
            rng: None,
            timing: false,
            span: None,
        })
    }

    /// Lets the op's random builtins draw from `rng` (the op must hold the RNG variable).
    pub fn with_rng(mut self, rng: &'a mut super::philox::GpuRng) -> GpuOpContext<'a> {
        self.rng = Some(rng);
        self
    }

    /// Records timing events around the op's kernels (see [`KernelSpan`]).
    pub fn with_timing(mut self) -> GpuOpContext<'a> {
        self.timing = true;
        self
    }

    /// The device.
    pub fn device(&self) -> &Arc<GpuDevice> {
        &self.device
    }

    /// The stream the op's kernels are enqueued on.
    pub fn stream_id(&self) -> StreamId {
        self.device.stream_id(self.stream)
    }

    /// The time of the kernels enqueued in this context since the last take, when it was created
    /// [`with_timing`](GpuOpContext::with_timing).
    pub fn take_span(&mut self) -> Option<KernelSpan> {
        self.span.take()
    }

    /// Notes the span of kernels just enqueued: an op enqueued in several parts (an upload, then
    /// its plan) spans from the first part's start to the last part's end.
    pub(crate) fn set_span(&mut self, span: Option<KernelSpan>) {
        self.span = match (self.span.take(), span) {
            (Some(earlier), Some(later)) => Some(KernelSpan {
                start: earlier.start,
                ..later
            }),
            (earlier, later) => later.or(earlier),
        };
    }

    /// The device lane the op's kernels run on, as the views name it: `gpu0:s1`.
    pub fn lane_name(&self) -> String {
        format!("gpu{}:s{}", self.device.index, self.stream)
    }

    pub(crate) fn rng(&mut self) -> Option<&mut super::philox::GpuRng> {
        self.rng.as_deref_mut()
    }
}

/// The GPU time of one op's kernels, from two timing events: read it once the kernels ran.
#[derive(Debug)]
pub struct KernelSpan {
    pub(crate) device: Arc<GpuDevice>,
    pub(crate) start: CudaEvent,
    pub(crate) end: CudaEvent,
}

impl KernelSpan {
    /// `(start, end)` in milliseconds since the device's epoch, or `None` while the kernels have
    /// not finished (never blocks). The end is the start plus [`KernelSpan::duration_ms`], so
    /// `end - start` is the span's length to `f32`'s precision at the distance from the epoch;
    /// `duration_ms` is precise however long the device has been open.
    pub fn times_ms(&self) -> Option<(f32, f32)> {
        let duration = self.duration_ms()?;
        let start = self.device.ms_since_epoch(&self.start)?;
        Some((start, start + duration))
    }

    /// How long the kernels ran, in milliseconds (from the start event to the end event), or
    /// `None` while they have not finished (never blocks).
    pub fn duration_ms(&self) -> Option<f32> {
        self.device.ms_between(&self.start, &self.end)
    }

    /// Blocks until the kernels finished, then gives [`KernelSpan::times_ms`].
    pub fn wait_times_ms(&self) -> Result<(f32, f32), TensorError> {
        self.end.synchronize().map_err(driver_error)?;
        self.times_ms()
            .ok_or_else(|| terr!("a completed timing event has no time"))
    }
}

/// The scope of one GPU op on one stream: waits for its inputs at the start, records its event
/// at the end (see the module doc). Dropped without [`OpScope::finish`] (the op failed after it
/// may have enqueued kernels), it still records an event and notes it as a read of every input,
/// so that frees on other streams wait for those kernels.
pub(crate) struct OpScope {
    device: Arc<GpuDevice>,
    stream_index: usize,
    id: StreamId,
    inputs: Vec<Arc<DeviceBuffer>>,
    start: Option<CudaEvent>,
    /// Whether `finish` noted the op's accesses.
    finished: bool,
}

/// The flags of the timing events that bracket an op's kernels: timed, and waited for by a
/// sleeping thread rather than a spinning one (the timing thread waits on every span's end).
const TIMING_EVENT: sys::CUevent_flags = sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC;

impl OpScope {
    /// Starts an op: makes its stream wait for the writers of `inputs` on other streams.
    /// Inputs must live on the op's device unless `cross_device` (copies between GPUs).
    pub(crate) fn begin(
        ctx: &GpuOpContext<'_>,
        inputs: &[&GpuTensor],
        cross_device: bool,
    ) -> Result<OpScope, TensorError> {
        let device = ctx.device.clone();
        let id = ctx.stream_id();
        device.bind()?;
        let stream = device.stream(ctx.stream)?.stream.cu_stream();
        let mut buffers: Vec<Arc<DeviceBuffer>> = Vec::with_capacity(inputs.len());
        for input in inputs {
            if input.device_index() != device.index && !cross_device {
                return Err(terr!(
                    "a value on gpu{} is used by an op on gpu{}: copy it first with to(x, gpu{})",
                    input.device_index(),
                    device.index,
                    device.index
                ));
            }
            if buffers.iter().any(|seen| Arc::ptr_eq(seen, &input.buffer)) {
                continue;
            }
            let waits = lock(&input.buffer.log).waits_before_read(id);
            for event in waits {
                // SAFETY: the stream and the event are live; cuStreamWaitEvent accepts events of
                // other contexts (other devices) and blocks no thread.
                unsafe {
                    result::stream::wait_event(
                        stream,
                        event.cu_event(),
                        sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                    )
                }
                .map_err(driver_error)?;
            }
            buffers.push(input.buffer.clone());
        }
        let start = if ctx.timing {
            Some(
                device.streams[ctx.stream]
                    .stream
                    .record_event(Some(TIMING_EVENT))
                    .map_err(driver_error)?,
            )
        } else {
            None
        };
        Ok(OpScope {
            device,
            stream_index: ctx.stream,
            id,
            inputs: buffers,
            start,
            finished: false,
        })
    }

    /// The kernel launcher for this op's stream.
    pub(crate) fn exec(&self) -> super::ops::Exec<'_> {
        let stream = &self.device.streams[self.stream_index];
        super::ops::Exec {
            device: &self.device,
            stream_index: self.stream_index,
            stream: &stream.stream,
            blas: stream.blas.as_ref(),
        }
    }

    /// Ends the op: one event after its kernels becomes the writer of every new output and a
    /// read of every input. With `DEP_GPU_SYNC=1`, also waits for the kernels.
    ///
    /// The timing end event (when timed) is recorded before that event: a consumer on another
    /// stream waits on the latter before recording its own timing start, so a dependent op is
    /// never timed as starting before this one ended.
    pub(crate) fn finish(
        mut self,
        outputs: &[GpuTensor],
    ) -> Result<Option<KernelSpan>, TensorError> {
        let device = self.device.clone();
        let stream = &device.streams[self.stream_index].stream;
        let end = match self.start {
            Some(_) => Some(
                stream
                    .record_event(Some(TIMING_EVENT))
                    .map_err(driver_error)?,
            ),
            None => None,
        };
        let event = device.pooled_event()?;
        {
            let _in_order = lock(&device.streams[self.stream_index].notes);
            if let Some(inner) = &event.event {
                inner.record(stream).map_err(driver_error)?;
            }
            for output in outputs {
                let mut log = lock(&output.buffer.log);
                if !log.has_writer() {
                    log.note_write(self.id, event.clone());
                }
            }
            for input in &self.inputs {
                lock(&input.log).note_read(self.id, event.clone());
            }
        }
        self.finished = true;
        let span = match (self.start.take(), end) {
            (Some(start), Some(end)) => Some(KernelSpan {
                start,
                end,
                device: device.clone(),
            }),
            _ => None,
        };
        if device.syncs_every_op() {
            stream.synchronize().map_err(driver_error)?;
        }
        Ok(span)
    }
}

impl Drop for OpScope {
    fn drop(&mut self) {
        if self.finished || self.inputs.is_empty() {
            return;
        }
        // The op failed after `begin`, perhaps after enqueueing kernels that read its inputs:
        // an input freed next on another stream must still wait for them.
        let stream = &self.device.streams[self.stream_index].stream;
        let noted = self.device.pooled_event().is_ok_and(|event| {
            let _in_order = lock(&self.device.streams[self.stream_index].notes);
            let recorded = event
                .event
                .as_ref()
                .is_some_and(|inner| inner.record(stream).is_ok());
            if recorded {
                for input in &self.inputs {
                    lock(&input.log).note_read(self.id, event.clone());
                }
            }
            recorded
        });
        if !noted {
            // No event to order the frees by: wait here until the kernels ran instead.
            let _ = stream.synchronize();
        }
    }
}

/// Copies a GPU tensor to the host: the one place a CPU thread blocks on GPU work, and only on
/// the event of the kernel that wrote the tensor.
pub fn download(x: &GpuTensor) -> Result<Tensor, TensorError> {
    let mut data = shape::alloc_filled(x.len(), 0.0)?;
    if !x.is_empty() {
        let device = &x.buffer.device;
        device.bind()?;
        let wait = lock(&x.buffer.log).host_wait();
        match wait.as_ref().and_then(|event| event.event.as_ref()) {
            Some(event) => event.synchronize().map_err(driver_error)?,
            None => device
                .stream(usize::from(x.buffer.home.stream))?
                .stream
                .synchronize()
                .map_err(driver_error)?,
        }
        // SAFETY: the buffer holds `data.len()` f32 values written by kernels that have
        // completed (the writer event was waited for); the copy is synchronous.
        unsafe { result::memcpy_dtoh_sync(&mut data, x.buffer.ptr) }.map_err(driver_error)?;
    }
    Tensor::from_vec(x.shape.clone(), data)
}

/// Copies a CPU tensor to the op's device, as an op of its own.
pub fn upload(x: &Tensor, ctx: &mut GpuOpContext<'_>) -> Result<GpuTensor, TensorError> {
    let scope = OpScope::begin(ctx, &[], false)?;
    let tensor = scope.exec().upload(x)?;
    let span = scope.finish(std::slice::from_ref(&tensor))?;
    ctx.set_span(span);
    Ok(tensor)
}

/// Copies a GPU tensor (from any device) to the op's device, as an op of its own: the op's
/// stream waits on the source's writer event, then a peer copy is enqueued.
pub fn copy_to_device(x: &GpuTensor, ctx: &mut GpuOpContext<'_>) -> Result<GpuTensor, TensorError> {
    let scope = OpScope::begin(ctx, &[x], true)?;
    let exec = scope.exec();
    let out = exec.alloc(x.shape().to_vec())?;
    if !x.is_empty() {
        // SAFETY: both buffers are live allocations of `nbytes` on their devices; the copy is
        // ordered after the source's writer (waited for in `begin`) and before anything reads
        // the destination (its writer event is recorded in `finish`).
        unsafe {
            sys::cuMemcpyPeerAsync(
                out.buffer.ptr,
                exec.device.ctx().cu_ctx(),
                x.buffer.ptr,
                x.buffer.device.ctx().cu_ctx(),
                x.nbytes(),
                exec.stream.cu_stream(),
            )
        }
        .result()
        .map_err(driver_error)?;
    }
    let span = scope.finish(std::slice::from_ref(&out))?;
    ctx.set_span(span);
    Ok(out)
}
