//! Compute ops: what one statement pushes (a plan, the slots it reads and writes), and the
//! engine op that runs it. Graph mode records these and pushes them again on every replay.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dep_engine as engine;

use crate::gpu;
use crate::plan::{EvalContext, Plan};
use crate::slot::{lock, RngSlot, Slot};
use crate::tensor::{self, BufferPool};

/// One statement's computation, ready to push (once, or on every replay of a graph).
#[derive(Clone)]
pub(crate) struct ComputeOp {
    pub(crate) label: Arc<str>,
    pub(crate) line: u32,
    /// Where it runs: a device, or the link a copy crosses.
    pub(crate) device: engine::Device,
    pub(crate) priority: i32,
    pub(crate) plan: Arc<Plan>,
    pub(crate) inputs: Vec<Arc<Slot>>,
    pub(crate) outputs: Vec<Arc<Slot>>,
    /// `A op= ...`: apply the plan's value to the single output in place.
    pub(crate) update: Option<tensor::BinaryOp>,
    /// The generator, for plans that draw random numbers.
    pub(crate) rng: Option<Arc<RngSlot>>,
}

impl ComputeOp {
    /// The engine op: reads the inputs (and the generator), writes the outputs (and the
    /// generator); allocations come from `pool` when one is given.
    pub(crate) fn into_spec(self, pool: Option<Arc<BufferPool>>) -> engine::OpSpec {
        let (reads, writes) = self.accesses();
        let (label, line, priority, device) =
            (self.label.clone(), self.line, self.priority, self.device);
        engine::OpSpec::new(label, move || self.execute(pool.as_ref()))
            .accesses(reads, writes)
            .line(line)
            .priority(priority)
            .device(device)
    }

    /// The variables the op reads (its inputs, and the target of `A op= ...`, which it updates
    /// in place) and writes (its outputs, and the generator for plans that draw random numbers).
    /// A variable both read and written is a read-write: an error it holds skips the op and
    /// stays, where a plain write would run and clear it.
    pub(crate) fn accesses(&self) -> (Vec<engine::Var>, Vec<engine::Var>) {
        let extra = usize::from(self.rng.is_some());
        let updated = usize::from(self.update.is_some());
        let mut reads = Vec::with_capacity(self.inputs.len() + updated);
        let mut writes = Vec::with_capacity(self.outputs.len() + extra);
        reads.extend(self.inputs.iter().map(|slot| slot.var.clone()));
        if self.update.is_some() {
            reads.extend(self.outputs.iter().map(|slot| slot.var.clone()));
        }
        writes.extend(self.outputs.iter().map(|slot| slot.var.clone()));
        if let Some(rng) = &self.rng {
            // Written only (draws still run in push order): a failed draw, which leaves its
            // error on the generator, must not skip every later one.
            writes.push(rng.var.clone());
        }
        (reads, writes)
    }

    /// Runs the computation, inside the op's engine op; allocations come from `pool` when one
    /// is given.
    pub(crate) fn execute(&self, pool: Option<&Arc<BufferPool>>) -> Result<(), String> {
        let ComputeOp {
            device,
            plan,
            inputs,
            outputs,
            update,
            rng,
            ..
        } = self;
        match (gpu_of(*device), pool) {
            // On a real GPU (under the simulated engine every device computes on the host).
            (Some(index), _) if !engine::sim::is_simulated() => {
                run_on_gpu(index, plan, inputs, outputs, *update, rng.as_deref())
                    .map_err(|error| error.message().to_string())
            }
            (_, Some(pool)) => {
                tensor::with_pool(pool, || run(plan, inputs, outputs, *update, rng.as_deref()))
            }
            (_, None) => run(plan, inputs, outputs, *update, rng.as_deref()),
        }
    }
}

/// The GPU an op placed on `device` computes on: a GPU's own ops, and copies to a GPU (`to(x,
/// gpuN)`, a link whose destination is that GPU: the inputs are uploaded or copied from their GPU
/// as the op's first kernels, and the result stays there).
fn gpu_of(device: engine::Device) -> Option<u16> {
    match device {
        engine::Device::Gpu(index) => Some(index),
        engine::Device::Link(..) => match device.link_ends() {
            Some((_, engine::Device::Gpu(index))) => Some(index),
            _ => None,
        },
        engine::Device::Cpu | engine::Device::Copy | engine::Device::Net => None,
    }
}

/// The engine's workers (streams) per GPU (`EngineConfig::gpu_streams`), as the last session to
/// start an engine configured it (0: none did yet).
static ENGINE_GPU_STREAMS: AtomicUsize = AtomicUsize::new(0);

/// Notes the engine's workers per GPU, so that the GPU runtime opens a stream for each.
pub(crate) fn note_engine_gpu_streams(gpu_streams: usize) {
    ENGINE_GPU_STREAMS.store(gpu_streams.max(1), Ordering::Relaxed);
}

/// The streams per device the GPU runtime is created with: one per engine worker of a GPU. The
/// runtime is made once per process, by the first GPU op; a later engine with another count
/// still runs correctly (a worker's stream is its index modulo the count), its lanes merged.
fn gpu_streams() -> usize {
    match ENGINE_GPU_STREAMS.load(Ordering::Relaxed) {
        0 => engine::EngineConfig::default().gpu_streams,
        streams => streams,
    }
}

/// Evaluates `plan` on GPU `index`, on the stream of the engine worker running the op: inputs
/// are used where they live (copied or uploaded when elsewhere), outputs stay on the GPU. Returns
/// once the kernels are enqueued; the engine then releases the op's dependencies (RFC 18951),
/// and consumers on other streams wait on the outputs' events, CPU consumers download them.
/// When the engine is observed, the kernels are timed and their span reported later.
fn run_on_gpu(
    index: u16,
    plan: &Plan,
    inputs: &[Arc<Slot>],
    outputs: &[Arc<Slot>],
    update: Option<tensor::BinaryOp>,
    rng: Option<&RngSlot>,
) -> Result<(), tensor::TensorError> {
    let runtime = gpu::GpuRuntime::get(gpu::GpuConfig::from_env(gpu_streams()))?;
    let device = runtime.device(index)?;
    let stream = engine::current_lane() % device.n_streams().max(1);
    let mut rng_guard = rng.map(|rng| lock(&rng.gpu_rng));
    let mut ctx = gpu::GpuOpContext::new(device, stream)?;
    if let Some(rng) = rng_guard.as_deref_mut() {
        ctx = ctx.with_rng(rng);
    }
    let clock = engine::DeviceClock::current();
    if clock.is_some() {
        ctx = ctx.with_timing();
    }
    let enqueued = enqueue_on_gpu(index, plan, inputs, outputs, update, &mut ctx);
    if let (Some(clock), Some(span)) = (clock, ctx.take_span()) {
        gpu::report_later(clock, ctx.lane_name(), span);
    }
    enqueued
}

/// Enqueues the op's kernels in `ctx` and stores its results in the outputs' slots.
fn enqueue_on_gpu(
    index: u16,
    plan: &Plan,
    inputs: &[Arc<Slot>],
    outputs: &[Arc<Slot>],
    update: Option<tensor::BinaryOp>,
    ctx: &mut gpu::GpuOpContext<'_>,
) -> Result<(), tensor::TensorError> {
    let values = inputs
        .iter()
        .map(|slot| slot.get_on_device(index, ctx))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(op) = update {
        let target = outputs[0].get_on_device(index, ctx)?;
        let rhs = gpu::eval(plan, &values, ctx)?.remove(0);
        outputs[0].set_on_device(gpu::binary(&target, op, &rhs, ctx)?);
        return Ok(());
    }
    let results = gpu::eval(plan, &values, ctx)?;
    if results.len() != outputs.len() {
        return Err(tensor::TensorError::new(format!(
            "the right side gives {} values but {} names are assigned",
            results.len(),
            outputs.len()
        )));
    }
    for (slot, value) in outputs.iter().zip(results) {
        slot.set_on_device(value);
    }
    Ok(())
}

/// Evaluates `plan` over the inputs' values into the outputs.
fn run(
    plan: &Plan,
    inputs: &[Arc<Slot>],
    outputs: &[Arc<Slot>],
    update: Option<tensor::BinaryOp>,
    rng: Option<&RngSlot>,
) -> Result<(), String> {
    // Most statements read a handful of variables: keep their bookkeeping on the stack.
    const ON_STACK: usize = 8;
    let (mut stack_uses, mut heap_uses);
    let remaining_uses: &mut [u32] = if inputs.len() <= ON_STACK {
        stack_uses = [0u32; ON_STACK];
        &mut stack_uses[..inputs.len()]
    } else {
        heap_uses = vec![0u32; inputs.len()];
        &mut heap_uses
    };
    plan.count_uses(remaining_uses);
    let mut values = Vec::with_capacity(inputs.len());
    for slot in inputs {
        // The old value of a variable this op overwrites is dead once read: take it out of its
        // slot so that the op may update it in place (never for `+=`, which updates the slot).
        let overwritten =
            update.is_none() && outputs.iter().any(|output| Arc::ptr_eq(slot, output));
        values.push(Some(if overwritten {
            slot.take()?
        } else {
            slot.get()?
        }));
    }
    let mut rng_guard = rng.map(|rng| lock(&rng.rng));
    let mut ctx = EvalContext {
        inputs: &mut values,
        remaining_uses,
        rng: rng_guard.as_deref_mut(),
    };
    if let Some(op) = update {
        let rhs = plan
            .eval(&mut ctx)
            .map_err(|error| error.message().to_string())?;
        drop(values);
        let mut target = outputs[0].lock_value();
        let value = target
            .as_mut()
            .ok_or_else(|| format!("`{}` has no value", outputs[0].var.name()))?;
        return tensor::binary_inplace(value, op, &rhs)
            .map_err(|error| error.message().to_string());
    }
    let results = plan
        .eval_multi(&mut ctx)
        .map_err(|error| error.message().to_string())?;
    if results.len() != outputs.len() {
        return Err(format!(
            "the right side gives {} values but {} names are assigned",
            results.len(),
            outputs.len()
        ));
    }
    for (slot, value) in outputs.iter().zip(results) {
        slot.set(value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::Device;

    #[test]
    fn ops_on_a_gpu_and_copies_to_one_compute_there() {
        assert_eq!(gpu_of(Device::Gpu(1)), Some(1));
        assert_eq!(gpu_of(Device::link(Device::Cpu, Device::Gpu(2))), Some(2));
        assert_eq!(
            gpu_of(Device::link(Device::Gpu(0), Device::Gpu(3))),
            Some(3)
        );
        assert_eq!(gpu_of(Device::link(Device::Gpu(0), Device::Cpu)), None);
        assert_eq!(gpu_of(Device::Cpu), None);
        assert_eq!(gpu_of(Device::Copy), None);
    }
}
