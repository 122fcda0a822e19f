//! Slots: where a variable's tensor lives, beside the engine variable that orders its accesses.
//!
//! The engine grants an op exclusive (write) or shared (read) access to a variable before the op
//! runs, so a slot's mutex is never contended by two ops that conflict; it is there because the
//! engine's guarantee is not visible to the compiler, and it costs one uncontended lock.
//!
//! A value lives in host memory, on a GPU, or both: an op on a GPU leaves its result there, and
//! a CPU consumer (print, save, a CPU op) downloads it on first use, waiting only for the event
//! of the kernel that wrote it (RFC 18951); a GPU op that reads a host value uploads it once,
//! and later GPU readers use that copy.
//!
//! Invariant: when both copies are there they hold the same values. Every write replaces the
//! value (`set`, `set_on_device`, `take`, `clear` drop the other copy), and an in-place update
//! (`lock_value`, `replace_host`, `overwrite_host`) drops the device copy before the host copy
//! can change. Both copies are only
//! added by ops that hold access to the variable (a download or an upload under a read, which
//! no write runs beside).

use std::sync::{Arc, Mutex, MutexGuard};

use rustc_hash::FxHashMap;

use dep_engine as engine;

use crate::gpu::{self, GpuOpContext, GpuRng, GpuTensor};
use crate::tensor::{Tensor, TensorError, TensorRng};

/// A named variable's storage.
pub struct Slot {
    /// The engine variable that orders accesses to this slot.
    pub var: engine::Var,
    value: Mutex<Option<Tensor>>,
    /// The value on a GPU: written by an op there (then `value`, if any, is a download), or an
    /// upload of `value` for GPU readers.
    device_value: Mutex<Option<GpuTensor>>,
    /// The device of the last op pushed to write it (where `to(X, ...)` copies from). Only the
    /// interpreter's thread touches it, on every push that writes the slot: on a cache line of
    /// its own, so that the push does not pull `value`'s line from the worker that last wrote
    /// it (on a 16-core machine that miss was a tenth of a threaded `c = c + b`).
    home: engine::OwnLines<Mutex<engine::Device>>,
    /// The variable's writes when the host last waited for it and read it (see
    /// [`Slot::note_host_read`]).
    host_read: Mutex<Option<engine::SettledWrites>>,
}

impl Slot {
    /// An empty slot behind `var`.
    pub fn new(var: engine::Var) -> Arc<Slot> {
        Arc::new(Slot {
            var,
            value: Mutex::new(None),
            device_value: Mutex::new(None),
            home: engine::OwnLines::new(Mutex::new(engine::Device::Cpu)),
            host_read: Mutex::new(None),
        })
    }

    /// Notes that the host waited for this slot's writes and read its value.
    pub(crate) fn note_host_read(&self) {
        *lock(&self.host_read) = self.var.settled_writes();
    }

    /// Whether no write was pushed since the host last waited for this slot and read it: its
    /// value then needs no new wait (under the simulated policy a wait stops the virtual clock
    /// until every op pushed before it has ended, communications included).
    pub(crate) fn read_by_host_since_written(&self) -> bool {
        let noted = *lock(&self.host_read);
        noted.is_some() && noted == self.var.settled_writes()
    }

    /// The current value (a cheap clone), or an error if nothing was ever written.
    pub fn get(&self) -> Result<Tensor, String> {
        let mut value = lock(&self.value);
        if value.is_none() {
            *value = self.download()?;
        }
        value
            .clone()
            .ok_or_else(|| format!("`{}` has no value", self.var.name()))
    }

    /// The host copy of a value that lives on a GPU, if it does.
    fn download(&self) -> Result<Option<Tensor>, String> {
        // Not under the lock: the download waits for the kernels that write the value, and a GPU
        // op reading it meanwhile (`get_on_device`) need not wait for the copy.
        let on_device = lock(&self.device_value).clone();
        match on_device {
            Some(on_device) => gpu::download(&on_device)
                .map(Some)
                .map_err(|error| error.message().to_string()),
            None => Ok(None),
        }
    }

    /// The value on GPU `device` for an op running on `ctx`'s stream: the GPU copy when it is
    /// there, copied from another GPU, or uploaded from host memory (kept, for later GPU
    /// readers, while the variable keeps this value). The op must hold access to the variable.
    pub(crate) fn get_on_device(
        &self,
        device: u16,
        ctx: &mut GpuOpContext<'_>,
    ) -> Result<GpuTensor, TensorError> {
        let on_device = lock(&self.device_value).clone();
        if let Some(on_device) = on_device {
            if on_device.device_index() == device {
                return Ok(on_device);
            }
            return gpu::copy_to_device(&on_device, ctx);
        }
        let host = lock(&self.value)
            .clone()
            .ok_or_else(|| TensorError::new(format!("`{}` has no value", self.var.name())))?;
        let uploaded = gpu::upload(&host, ctx)?;
        // No write runs beside this op's access, so `value` is still `host`; another reader may
        // have uploaded it meanwhile (either copy will do).
        lock(&self.device_value).get_or_insert_with(|| uploaded.clone());
        Ok(uploaded)
    }

    /// Stores a new value that lives on a GPU (the old host copy is dropped).
    pub(crate) fn set_on_device(&self, value: GpuTensor) {
        *lock(&self.value) = None;
        *lock(&self.device_value) = Some(value);
    }

    /// The device of the last op pushed to write this slot.
    pub fn home(&self) -> engine::Device {
        *lock(&self.home)
    }

    pub(crate) fn set_home(&self, device: engine::Device) {
        *lock(&self.home) = device;
    }

    /// Moves the value out, leaving the slot empty (for an op that overwrites it).
    pub(crate) fn take(&self) -> Result<Tensor, String> {
        let host = lock(&self.value).take();
        let host = match host {
            Some(host) => Some(host),
            None => self.download()?,
        };
        *lock(&self.device_value) = None;
        host.ok_or_else(|| format!("`{}` has no value", self.var.name()))
    }

    /// Replaces the host value with one computed from it under the slot's lock, for an op that
    /// overwrites the variable with a value made from its old one (`c = c + b`): the old value
    /// is moved into `compute` (so that, held by nobody else, it may be updated in place) and
    /// the result stored; on failure the slot is left empty, as when an op takes the value and
    /// fails. The device copy is dropped. `None`, without running `compute`, when there is no
    /// host value (none, or only on a GPU): the caller then takes the general path, which
    /// downloads it or reports it missing.
    pub(crate) fn replace_host<E>(
        &self,
        compute: impl FnOnce(Tensor) -> Result<Tensor, E>,
    ) -> Option<Result<(), E>> {
        let mut value = lock(&self.value);
        let old = value.take()?;
        *lock(&self.device_value) = None;
        Some(compute(old).map(|new| *value = Some(new)))
    }

    /// Runs `write` on the host value where it lies, for an op that overwrites the variable
    /// without reading it and may put its result in the old value's buffer (`write` returns
    /// `Some` when it did). The device copy, as dead as the host one, is dropped first. `None`
    /// when there is no host value or `write` wrote nothing.
    pub(crate) fn overwrite_host<T>(
        &self,
        write: impl FnOnce(&mut Tensor) -> Option<T>,
    ) -> Option<T> {
        let mut value = lock(&self.value);
        let old = value.as_mut()?;
        *lock(&self.device_value) = None;
        write(old)
    }

    /// Runs `read` on the host value where it lies, for an op that reads the variable; `None`,
    /// without running it, when there is no host value.
    pub(crate) fn read_host<T>(&self, read: impl FnOnce(&Tensor) -> T) -> Option<T> {
        lock(&self.value).as_ref().map(read)
    }

    /// The host buffer of the value an op is about to overwrite, when nobody else holds it, for
    /// the op's result to reuse (see `tensor::with_spare`). The value leaves the slot: the op
    /// that overwrites it stores the new one (or fails, and the variable holds the error).
    pub(crate) fn take_dead_buffer(&self) -> Option<Vec<f32>> {
        let host = lock(&self.value).take()?;
        host.into_values()
    }

    /// Drops the value for good (a graph's own buffer after its last reader), never downloading
    /// it, unless it is smaller than `min_bytes`, which it keeps: gives its size in bytes (0
    /// without a value) and the host copy it dropped, if there is one, for a buffer pool.
    pub(crate) fn release_from(&self, min_bytes: u64) -> (usize, Option<Tensor>) {
        let mut host = lock(&self.value);
        let mut device = lock(&self.device_value);
        let bytes = host
            .as_ref()
            .map(Tensor::nbytes)
            .or_else(|| device.as_ref().map(GpuTensor::nbytes))
            .unwrap_or(0);
        if (bytes as u64) < min_bytes {
            return (bytes, None);
        }
        device.take();
        (bytes, host.take())
    }

    /// Gives the host value a buffer of its own when it shares one with another holder (see
    /// `tensor::copied`): under the simulated engine every device's tensors live in host
    /// memory, and a copy to another device must take memory there as it would on a real one,
    /// not share its source's buffer.
    pub(crate) fn own_host_buffer(&self) -> Result<(), TensorError> {
        let mut value = lock(&self.value);
        if let Some(value) = value.as_mut() {
            if !value.is_unique() {
                *value = crate::tensor::copied(value)?;
            }
        }
        Ok(())
    }

    /// Whether it holds a value, on the host or on a GPU (none before its first write completes,
    /// nor after a failed op took it).
    pub(crate) fn has_value(&self) -> bool {
        lock(&self.value).is_some() || lock(&self.device_value).is_some()
    }

    /// The value if there is one, without waiting.
    pub fn peek(&self) -> Option<Tensor> {
        self.value.try_lock().ok().and_then(|value| value.clone())
    }

    /// `read` of the host value (`None`: no value at all), without waiting: `None` while another
    /// thread holds the slot, or when the value lives only on a GPU. For the check of a cheap op
    /// (see `compute::ComputeOp::is_cheap_now`), which must not wait for an op that holds it.
    pub(crate) fn try_read_host<T>(&self, read: impl FnOnce(Option<&Tensor>) -> T) -> Option<T> {
        let value = self.value.try_lock().ok()?;
        if value.is_none() && self.device_value.try_lock().ok()?.is_some() {
            return None;
        }
        Some(read(value.as_ref()))
    }

    /// The size in bytes of the value, wherever it lives, without waiting: `None` when there
    /// is no value or another thread holds the slot.
    pub(crate) fn bytes_now(&self) -> Option<usize> {
        if let Some(bytes) = self.value.try_lock().ok()?.as_ref().map(Tensor::nbytes) {
            return Some(bytes);
        }
        self.device_value
            .try_lock()
            .ok()?
            .as_ref()
            .map(GpuTensor::nbytes)
    }

    /// The value's shape, wherever it lives, if there is one, without waiting or downloading.
    pub fn peek_shape(&self) -> Option<Vec<usize>> {
        if let Some(value) = self.value.try_lock().ok().and_then(|value| value.clone()) {
            return Some(value.shape().to_vec());
        }
        let on_device = self.device_value.try_lock().ok()?;
        on_device.as_ref().map(|value| value.shape().to_vec())
    }

    /// Stores a new value.
    pub fn set(&self, value: Tensor) {
        *lock(&self.value) = Some(value);
        *lock(&self.device_value) = None;
    }

    /// Drops the value (its storage is freed when no other holder shares it; GPU memory is
    /// freed stream-ordered, after the kernels that use it).
    pub fn clear(&self) {
        *lock(&self.value) = None;
        *lock(&self.device_value) = None;
    }

    /// Locks the value for an in-place update (downloading it first if it lives on a GPU). The
    /// device copy is dropped: the host copy is about to change.
    pub(crate) fn lock_value(&self) -> MutexGuard<'_, Option<Tensor>> {
        let mut value = lock(&self.value);
        if value.is_none() {
            // An error leaves the value missing, which the caller reports.
            *value = self.download().ok().flatten();
        }
        *lock(&self.device_value) = None;
        value
    }
}

/// Moves slots into another engine (an engine switch): each becomes a slot of the new engine
/// with its value where it lives (host memory, a GPU or both: GPU memory is the process's, not
/// an engine's) and its home device, or the very error its variable holds, so
/// that reports after the switch read as before it; a slot reached twice (by a name, and by a
/// recorded graph that reads it) becomes one new slot.
pub(crate) struct SlotMover<'e> {
    engine: &'e engine::Engine,
    /// The new slot of each old one (by address), beside the old slot, held so that its address
    /// is not reused while moving.
    moved: FxHashMap<*const Slot, (Arc<Slot>, Arc<Slot>)>,
}

impl<'e> SlotMover<'e> {
    /// A mover into `engine`.
    pub(crate) fn new(engine: &'e engine::Engine) -> SlotMover<'e> {
        SlotMover {
            engine,
            moved: FxHashMap::default(),
        }
    }

    /// The new slot of `slot`, made the first time it is asked for.
    pub(crate) fn slot(&mut self, slot: &Arc<Slot>) -> Arc<Slot> {
        let engine = self.engine;
        let (_, moved) = self.moved.entry(Arc::as_ptr(slot)).or_insert_with(|| {
            let moved = Slot::new(moved_var(&slot.var, engine));
            *lock(&moved.value) = lock(&slot.value).clone();
            *lock(&moved.device_value) = lock(&slot.device_value).clone();
            moved.set_home(slot.home());
            (slot.clone(), moved)
        });
        moved.clone()
    }

    /// The generator `rng`, moved: its state, and the error its variable holds.
    pub(crate) fn rng(&self, rng: &RngSlot) -> Arc<RngSlot> {
        Arc::new(RngSlot {
            var: moved_var(&rng.var, self.engine),
            rng: Mutex::new(lock(&rng.rng).clone()),
            gpu_rng: Mutex::new(*lock(&rng.gpu_rng)),
        })
    }
}

/// A variable of `engine` named as `var`, holding the error `var` holds, if any.
fn moved_var(var: &engine::Var, engine: &engine::Engine) -> engine::Var {
    match var.error() {
        Some(error) => engine.new_failed_var(var.name(), error),
        None => engine.new_var(var.name()),
    }
}

/// The random number generator, a variable like any other: random ops read and write it, so they
/// run one at a time in push order and a seeded script gives the same numbers on every policy.
pub struct RngSlot {
    /// The engine variable random ops write.
    pub var: engine::Var,
    pub(crate) rng: Mutex<TensorRng>,
    /// The counter-based generator GPU ops draw from, seeded by the same `seed` statement.
    pub(crate) gpu_rng: Mutex<GpuRng>,
}

pub(crate) use dep_engine::lock;
