//! Compute ops: what one statement pushes (a plan, the slots it reads and writes), and the
//! engine op that runs it. Graph mode records these and pushes them again on every replay.

use std::sync::Arc;

use smallvec::SmallVec;

use dep_engine as engine;

use crate::evaluate;
use crate::gpu;
use crate::input_uses::InputUses;
use crate::one_operator::OneOperator;
use crate::plan::Plan;
use crate::slot::{lock, RngSlot, Slot};
use crate::tensor::{self, BufferPool};
use dep_views::text::count;

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
    /// How the plan uses its inputs, worked out once (see [`InputUses::of`]).
    pub(crate) input_uses: InputUses,
    /// The plan as one elementwise operator over the inputs, when it is one: run on the host
    /// without the evaluator (see `one_operator.rs`).
    pub(crate) one_operator: Option<OneOperator>,
}

/// A compute op ready to push any number of times: the op, shared by every push, and its
/// accesses normalized once. A statement in a loop is compiled into one of these and pushed again
/// on every iteration by reference (see `statement_cache`, `engine::Engine::push_shared`).
#[derive(Clone)]
pub(crate) struct PushableOp {
    op: Arc<ComputeOp>,
    /// `op`, as the engine runs it.
    body: Arc<dyn engine::OpBody>,
    accesses: engine::AccessSet,
}

impl PushableOp {
    /// Makes `op` pushable: computes its accesses.
    pub(crate) fn new(op: ComputeOp) -> PushableOp {
        let (reads, writes) = op.accesses();
        let op = Arc::new(op);
        PushableOp {
            body: op.clone(),
            op,
            accesses: engine::AccessSet::new(reads, writes),
        }
    }

    /// The op.
    pub(crate) fn op(&self) -> &ComputeOp {
        &self.op
    }

    /// The engine op for one push, labelled with the statement's text as compiled: reads the
    /// inputs (and the generator), writes the outputs (and the generator), computing on the
    /// host with no buffer pool.
    pub(crate) fn shared_op(&self) -> engine::SharedOp<'_> {
        engine::SharedOp {
            label: &self.op.label,
            line: self.op.line,
            device: self.op.device,
            priority: self.op.priority,
            body: &self.body,
            accesses: &self.accesses,
        }
    }
}

/// Pushed as a shared body: a statement pushed again runs the same op, with no buffer pool.
impl engine::OpBody for ComputeOp {
    fn run(&self, ctx: &engine::OpContext) -> Result<(), String> {
        self.execute(None, ctx)
    }

    fn is_cheap(&self) -> bool {
        self.is_cheap_now()
    }
}

/// The most elements a value of a cheap op holds (see [`ComputeOp::is_cheap_now`]): one
/// elementwise operator over 1,024 floats takes about 100 ns on the host, less than handing
/// the op to another core's worker (issue 16's `c = c + b` on 4 elements costs the threaded
/// engine 0.4-0.5 µs more per op than running it where it is pushed, on a Xeon).
const CHEAP_ELEMENTS: usize = 1024;

impl ComputeOp {
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

    /// Whether the op is cheaper to run than to hand to a worker (see `engine::OpBody::is_cheap`):
    /// one elementwise operator (`one_operator.rs`) over constants and host values of at most
    /// [`CHEAP_ELEMENTS`] elements, each of one shape or of a single element, so that its
    /// result is no larger. An input with no value counts as small: in a graph's replay an
    /// earlier op of the batch, itself cheap, writes it; while an op that writes it has not
    /// ended, the op waits in the queues anyway; otherwise it fails at once. An input that
    /// another thread holds, or that lives on a GPU, makes the op not cheap.
    pub(crate) fn is_cheap_now(&self) -> bool {
        let Some(one_operator) = &self.one_operator else {
            return false;
        };
        if self.update.is_some() || self.rng.is_some() || self.outputs.len() != 1 {
            return false;
        }
        let mut operands = OperandShapes::default();
        if !one_operator.constants().all(|value| operands.fits(value)) {
            return false;
        }
        self.inputs.iter().all(|slot| {
            slot.try_read_host(|value| value.is_none_or(|value| operands.fits(value)))
                .unwrap_or(false)
        })
    }

    /// Runs the computation, inside the op's engine op (`ctx`); allocations come from `pool`
    /// when one is given.
    pub(crate) fn execute(
        &self,
        pool: Option<&Arc<BufferPool>>,
        ctx: &engine::OpContext,
    ) -> Result<(), String> {
        let ComputeOp {
            device,
            plan,
            inputs,
            outputs,
            update,
            rng,
            input_uses,
            one_operator,
            ..
        } = self;
        match (gpu_of(*device), pool) {
            // On a real GPU (under the simulated engine every device computes on the host).
            (Some(index), _) if !ctx.is_simulated() => {
                run_on_gpu(index, plan, inputs, outputs, *update, rng.as_deref(), ctx)
                    .map_err(|error| error.message().to_string())
            }
            (_, pool) => {
                // A copy to another simulated device (`to(x, gpu1)`, an op on a link) takes
                // memory there, as on a real one: its result gets a buffer of its own.
                let copies = ctx.is_simulated() && matches!(device, engine::Device::Link(..));
                let run_here = || match (one_operator, update, rng, &outputs[..]) {
                    // Under the simulated engine the evaluator also reports the op's flops.
                    (Some(one_operator), None, None, [output]) if !ctx.is_simulated() => {
                        one_operator.run(inputs, output, input_uses)
                    }
                    _ => {
                        run(
                            plan,
                            inputs,
                            outputs,
                            *update,
                            rng.as_deref(),
                            input_uses,
                            ctx,
                        )?;
                        if copies {
                            for output in outputs {
                                output
                                    .own_host_buffer()
                                    .map_err(|error| error.message().to_string())?;
                            }
                        }
                        Ok(())
                    }
                };
                match pool {
                    Some(pool) => tensor::with_pool(pool, run_here),
                    None => run_here(),
                }
            }
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
    cx: &engine::OpContext,
) -> Result<(), tensor::TensorError> {
    // The runtime is made once per process, by the first GPU op, with a stream per engine worker
    // of a GPU; a later engine with another count still runs correctly (a worker's stream is its
    // lane modulo the count), its lanes merged.
    let runtime = gpu::GpuRuntime::get(gpu::GpuConfig::from_env(cx.gpu_streams()))?;
    let device = runtime.device(index)?;
    let stream = cx.lane() % device.n_streams().max(1);
    let mut rng_guard = rng.map(|rng| lock(&rng.gpu_rng));
    let mut ctx = gpu::GpuOpContext::new(device, stream)?;
    if let Some(rng) = rng_guard.as_deref_mut() {
        ctx = ctx.with_rng(rng);
    }
    let clock = cx.device_clock().cloned();
    if clock.is_some() {
        ctx = ctx.with_timing();
    }
    let enqueued = enqueue_on_gpu(index, plan, inputs, outputs, update, &mut ctx, cx);
    if let (Some(clock), Some(span)) = (clock, ctx.take_span()) {
        gpu::report_later(clock, ctx.lane_name(), span);
    }
    enqueued
}

/// Enqueues the op's kernels in `ctx` and stores its results in the outputs' slots; `cx` is the
/// engine op's context.
fn enqueue_on_gpu(
    index: u16,
    plan: &Plan,
    inputs: &[Arc<Slot>],
    outputs: &[Arc<Slot>],
    update: Option<tensor::BinaryOp>,
    ctx: &mut gpu::GpuOpContext<'_>,
    cx: &engine::OpContext,
) -> Result<(), tensor::TensorError> {
    let values = inputs
        .iter()
        .map(|slot| slot.get_on_device(index, ctx))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(op) = update {
        let target = outputs[0].get_on_device(index, ctx)?;
        let rhs = eval_on_gpu(plan, &values, ctx, cx)?.remove(0);
        outputs[0].set_on_device(gpu::binary(&target, op, &rhs, ctx)?);
        return Ok(());
    }
    let results = eval_on_gpu(plan, &values, ctx, cx)?;
    if results.len() != outputs.len() {
        return Err(tensor::TensorError::new(format!(
            "the right side gives {} but {}",
            count(results.len(), "value"),
            names_assigned(outputs.len())
        )));
    }
    for (slot, value) in outputs.iter().zip(results) {
        slot.set_on_device(value);
    }
    Ok(())
}

/// Evaluates `plan` on `ctx`'s GPU and stream, reading `inputs` (`Plan::Input(i)` is
/// `inputs[i]`), inside the engine op whose context is `cx`: its values, on the device, once
/// their kernels are enqueued.
pub(crate) fn eval_on_gpu(
    plan: &Plan,
    inputs: &[gpu::GpuTensor],
    ctx: &mut gpu::GpuOpContext<'_>,
    cx: &engine::OpContext,
) -> Result<Vec<gpu::GpuTensor>, tensor::TensorError> {
    gpu::run_op(inputs, ctx, |backend| evaluate::eval_all(plan, backend, cx))
}

/// Evaluates `plan` over the inputs' values into the outputs; `input_uses` says how it reads
/// them.
#[allow(clippy::too_many_arguments)]
fn run(
    plan: &Plan,
    inputs: &[Arc<Slot>],
    outputs: &[Arc<Slot>],
    update: Option<tensor::BinaryOp>,
    rng: Option<&RngSlot>,
    input_uses: &InputUses,
    cx: &engine::OpContext,
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
    remaining_uses.copy_from_slice(input_uses.uses());
    // `new`, not `with_capacity`: the latter returns the whole inline buffer by value (a copy
    // of hundreds of bytes on every op); more than ON_STACK inputs spill as pushed.
    let mut values: SmallVec<[Option<tensor::Tensor>; ON_STACK]> = SmallVec::new();
    for (slot, &overwritten) in inputs.iter().zip(input_uses.overwritten()) {
        // The old value of a variable this op overwrites is dead once read: take it out of its
        // slot so that the op may update it in place (never for `+=`, which updates the slot).
        values.push(Some(if overwritten {
            slot.take()?
        } else {
            slot.get()?
        }));
    }
    let mut rng_guard = rng.map(|rng| lock(&rng.rng));
    let mut backend = tensor::backend::HostBackend {
        inputs: &mut values,
        remaining_uses,
        rng: rng_guard.as_deref_mut(),
    };
    if let Some(op) = update {
        let rhs =
            evaluate::eval(plan, &mut backend, cx).map_err(|error| error.message().to_string())?;
        drop(values);
        let mut target = outputs[0].lock_value();
        let value = target
            .as_mut()
            .ok_or_else(|| format!("`{}` has no value", outputs[0].var.name()))?;
        return tensor::binary_inplace(value, op, &rhs)
            .map_err(|error| error.message().to_string());
    }
    if !plan.is_multi() {
        let [output] = outputs else {
            return Err(format!(
                "the right side gives 1 value but {}",
                names_assigned(outputs.len())
            ));
        };
        // The old value of a variable written but not read is dead: its buffer may take the
        // result (never a value shared with another variable or a reader: those stay).
        let spare = input_uses
            .output_unread()
            .then(|| output.take_dead_buffer())
            .flatten();
        let value = match spare {
            Some(spare) => tensor::with_spare(spare, || evaluate::eval(plan, &mut backend, cx)),
            None => evaluate::eval(plan, &mut backend, cx),
        }
        .map_err(|error| error.message().to_string())?;
        output.set(value);
        return Ok(());
    }
    let results = evaluate::eval_multi(plan, &mut backend, cx)
        .map_err(|error| error.message().to_string())?;
    if results.len() != outputs.len() {
        return Err(format!(
            "the right side gives {} but {}",
            count(results.len(), "value"),
            names_assigned(outputs.len())
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

    fn slot_holding(values: Vec<f32>) -> Arc<Slot> {
        let engine = engine::Engine::new(engine::EngineConfig::default());
        let slot = Slot::new(engine.new_var("v"));
        slot.set(tensor::Tensor::from_vec(vec![values.len()], values).unwrap());
        slot
    }

    #[test]
    fn a_result_takes_the_buffer_of_the_value_it_overwrites() {
        // y = x + 1, where y's old value is held by nobody else.
        let (x, y) = (slot_holding(vec![1.0, 2.0]), slot_holding(vec![7.0, 7.0]));
        let old = y.get().unwrap().data().as_ptr();
        let plan = Plan::Binary(
            tensor::BinaryOp::Add,
            Box::new(Plan::Input(0)),
            Box::new(Plan::Const(tensor::Tensor::scalar(1.0))),
        );
        let uses = InputUses::of(&plan, &[x.clone()], &[y.clone()], None);
        run(
            &plan,
            &[x.clone()],
            &[y.clone()],
            None,
            None,
            &uses,
            &engine::OpContext::standalone(),
        )
        .unwrap();
        let new = y.get().unwrap();
        assert_eq!(new.data(), &[2.0, 3.0]);
        assert_eq!(new.data().as_ptr(), old, "y's old buffer holds the result");
        // A value another holder shares is left to it.
        let shared = y.get().unwrap();
        run(
            &plan,
            &[x],
            &[y.clone()],
            None,
            None,
            &uses,
            &engine::OpContext::standalone(),
        )
        .unwrap();
        assert_ne!(y.get().unwrap().data().as_ptr(), shared.data().as_ptr());
        assert_eq!(shared.data(), &[2.0, 3.0]);
    }

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

/// The operands of a cheap op seen so far (see [`ComputeOp::is_cheap_now`]): the shape of those
/// of more than one element.
#[derive(Default)]
struct OperandShapes {
    shape: Option<SmallVec<[usize; 4]>>,
}

impl OperandShapes {
    /// Whether `value` keeps the op cheap: a single element, or at most [`CHEAP_ELEMENTS`] of
    /// the shape of the others.
    fn fits(&mut self, value: &tensor::Tensor) -> bool {
        let n = value.len();
        if n <= 1 {
            return true;
        }
        if n > CHEAP_ELEMENTS {
            return false;
        }
        match &self.shape {
            Some(shape) => shape[..] == *value.shape(),
            None => {
                self.shape = Some(SmallVec::from_slice(value.shape()));
                true
            }
        }
    }
}

/// How many names an assignment assigns, as its errors say it: "1 name is assigned", "2 names
/// are assigned".
pub(crate) fn names_assigned(n: usize) -> String {
    match n {
        1 => "1 name is assigned".to_string(),
        n => format!("{n} names are assigned"),
    }
}
