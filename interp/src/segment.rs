//! What a graph replay pushes: segments, each one engine op, made once per set of replay
//! options and pushed again on every run.
//!
//! A segment is one recorded op, or, with `with bulk = N`, up to N consecutive ops of one device
//! run one after the other in a single engine op (MXNet's bulk execution: the engine's cost is
//! paid once per segment, at the price of the parallelism among its ops). Releases of the
//! graph's own buffers are segments of their own, or steps of the bulk after the op that last
//! reads the buffer. Everything a push needs is computed here once: the label, the union of the
//! accesses, the steps; a replay only clones them. The segments between two communications are
//! pushed together, as one engine batch (`engine::Engine::push_batch`): still one engine op each,
//! with the per-push work the engine can share done once per batch.
//!
//! A bulk is one engine op: when one of its statements fails, the rest of the bulk does not
//! run, and every variable the bulk writes holds the error (MXNet's bulk segments do the same).
//! The engine knows only the bulk's label and first line, so the failing statement is noted in
//! [`FailedSteps`], and reports name its place.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dep_engine as engine;

use crate::comm::ops::CommOp;
use crate::comm::CommCounters;
use crate::compute::ComputeOp;
use crate::slot::Slot;
use crate::tensor::{BufferPool, Tensor};

/// What a replay pushes, in order.
pub(crate) enum Segment {
    /// Consecutive segments of recorded computations and releases, each one engine op, pushed
    /// together (see `engine::Engine::push_batch`): prepared once, pushed on every run for a
    /// few reference counts.
    Batch(engine::OpBatch),
    /// A recorded communication: never bulked, posted afresh (numbered) on every run.
    Comm(CommOp),
}

/// What a segment runs: its steps, with where allocations come from (`pool`), where releases
/// note buffer sizes (`sizes`), and where a bulk notes its failing statement (`failed`).
struct SegmentBody {
    label: Arc<str>,
    steps: Box<[Step]>,
    pool: Option<Arc<BufferPool>>,
    sizes: Arc<Vec<AtomicU64>>,
    failed: Arc<FailedSteps>,
    recycle_from: u64,
}

/// Where the segments of one graph's replays put what they note, and take buffers from.
#[derive(Clone)]
pub(crate) struct SegmentContext {
    /// The graph's buffer pool, when its buffers are shared (`share = 1`).
    pub(crate) pool: Option<Arc<BufferPool>>,
    /// The byte size of each internal buffer, noted when released.
    pub(crate) sizes: Arc<Vec<AtomicU64>>,
    /// The failing statements of bulks.
    pub(crate) failed: Arc<FailedSteps>,
    /// A release keeps a buffer smaller than this many bytes (see `graph::ReplayOptions`).
    pub(crate) recycle_from: u64,
}

/// One thing a segment does.
enum Step {
    /// Runs a recorded op, then notes the sizes of the graph's own buffers it wrote whose size
    /// the graph has not measured (by internal index and slot), for its memory estimate; which
    /// buffers are kept from run to run is decided from what the graph measures when every op
    /// is done (see `graph::Graph::measure`), never from these notes as they come.
    Compute(Arc<ComputeOp>, Box<[(usize, Arc<Slot>)]>),
    /// Releases internal buffer `index` (its slot): into the pool, or freed; one smaller than
    /// the context's `recycle_from` stays where it is.
    Release(usize, Arc<Slot>),
}

/// The failing statements of a graph's bulks, for the reports of their errors: the latest
/// [`FailedSteps::KEPT`] failures, looked up by the bulk's label and error message.
#[derive(Default)]
pub(crate) struct FailedSteps(Mutex<VecDeque<FailedStep>>);

/// The statement of a bulk that failed.
#[derive(Clone)]
pub(crate) struct FailedStep {
    /// The bulk's label (the engine op's), and the message of its error.
    bulk: Arc<str>,
    bulk_message: String,
    /// The failing statement's label and line, and its place among the bulk's statements.
    pub(crate) label: Arc<str>,
    pub(crate) line: u32,
    pub(crate) position: usize,
    /// What went wrong in it.
    pub(crate) message: String,
}

impl FailedSteps {
    /// How many failures are kept: a failure is reported at the next `print`, `wait` or end of
    /// the run, so only recent ones are looked up.
    const KEPT: usize = 64;

    fn note(&self, step: FailedStep) {
        let mut steps = crate::slot::lock(&self.0);
        steps.retain(|kept| {
            !(Arc::ptr_eq(&kept.bulk, &step.bulk) && kept.bulk_message == step.bulk_message)
        });
        if steps.len() == Self::KEPT {
            steps.pop_front();
        }
        steps.push_back(step);
    }

    /// The failing statement of the bulk labelled `bulk` (by identity) whose error says
    /// `message`, if one of these bulks failed so.
    pub(crate) fn find(&self, bulk: &Arc<str>, message: &str) -> Option<FailedStep> {
        crate::slot::lock(&self.0)
            .iter()
            .rev()
            .find(|step| Arc::ptr_eq(&step.bulk, bulk) && step.bulk_message == message)
            .cloned()
    }
}

/// Builds the segments of one replay: ops are added in order, releases after the op that last
/// uses their buffer.
pub(crate) struct SegmentBuilder {
    /// Compute ops per segment (1: no bulking).
    bulk: usize,
    context: SegmentContext,
    segments: Vec<Segment>,
    /// The engine ops of the batch being built (since the last communication).
    batch: Vec<engine::BatchOp>,
    open: Vec<Step>,
    open_device: engine::Device,
    /// The recorded ops of the open bulk, by index.
    open_ops: Option<std::ops::Range<usize>>,
    /// By engine op pushed, in order: the recorded ops it runs.
    covers: Vec<std::ops::Range<usize>>,
}

impl SegmentBuilder {
    /// A builder putting at most `bulk` ops in a segment, for a graph whose replays use
    /// `context`.
    pub(crate) fn new(bulk: usize, context: SegmentContext) -> SegmentBuilder {
        SegmentBuilder {
            bulk: bulk.max(1),
            context,
            segments: Vec::new(),
            batch: Vec::new(),
            open: Vec::new(),
            open_device: engine::Device::Cpu,
            open_ops: None,
            covers: Vec::new(),
        }
    }

    /// Adds recorded op `index`, which notes the sizes of the internal buffers `sized` after it
    /// runs.
    pub(crate) fn op(&mut self, index: usize, op: &ComputeOp, sized: Vec<(usize, Arc<Slot>)>) {
        if self.bulk == 1 || (!self.open.is_empty() && op.device != self.open_device) {
            self.close();
        }
        self.open_device = op.device;
        let first = self.open_ops.as_ref().map_or(index, |open| open.start);
        self.open_ops = Some(first..index + 1);
        self.open
            .push(Step::Compute(Arc::new(op.clone()), sized.into()));
        if self.bulk == 1 {
            self.close();
        }
    }

    /// Adds recorded communication `index`: a segment of its own, closing the open bulk.
    pub(crate) fn comm(&mut self, index: usize, op: &CommOp) {
        self.close();
        self.end_batch();
        self.segments.push(Segment::Comm(op.clone()));
        self.covers.push(index..index + 1);
    }

    /// Adds the release of internal buffer `index`, held by `slot`, after the last op that
    /// uses it: a segment of its own without bulking, else a step of the open bulk.
    pub(crate) fn release(&mut self, index: usize, slot: &Arc<Slot>) {
        if self.bulk == 1 {
            self.release_alone(index, slot);
        } else {
            self.open.push(Step::Release(index, slot.clone()));
        }
    }

    /// Adds the release of internal buffer `index` as a segment of its own, on the CPU (it only
    /// drops the value: a GPU buffer's free is stream-ordered anyway).
    pub(crate) fn release_alone(&mut self, index: usize, slot: &Arc<Slot>) {
        self.close();
        self.open_device = engine::Device::Cpu;
        self.open.push(Step::Release(index, slot.clone()));
        self.close();
    }

    /// Closes the open bulk once it holds `bulk` ops.
    pub(crate) fn end_of_op(&mut self) {
        let n_ops = self
            .open
            .iter()
            .filter(|step| matches!(step, Step::Compute(..)))
            .count();
        if n_ops >= self.bulk {
            self.close();
        }
    }

    /// The segments, in push order, and by engine op they push, the recorded ops it runs.
    pub(crate) fn finish(mut self) -> (Vec<Segment>, Vec<std::ops::Range<usize>>) {
        self.close();
        self.end_batch();
        (self.segments, self.covers)
    }

    /// Ends the batch being built: its ops become one segment.
    fn end_batch(&mut self) {
        if !self.batch.is_empty() {
            let ops = std::mem::take(&mut self.batch);
            self.segments
                .push(Segment::Batch(engine::OpBatch::new(ops)));
        }
    }

    fn close(&mut self) {
        if self.open.is_empty() {
            return;
        }
        let steps: Vec<Step> = std::mem::take(&mut self.open);
        self.covers.push(self.open_ops.take().unwrap_or(0..0));
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        let mut labels: Vec<&Arc<str>> = Vec::new();
        let (mut line, mut priority) = (0, i32::MIN);
        for step in &steps {
            match step {
                Step::Compute(op, _) => {
                    let (op_reads, op_writes) = op.accesses();
                    // A value an earlier step of the bulk wrote is the bulk's own; only values
                    // from before it are read (their errors skip the bulk, as they would skip
                    // the op that reads them).
                    let written_here = |var: &engine::Var| {
                        writes
                            .iter()
                            .any(|write: &engine::Var| write.id() == var.id())
                    };
                    let from_before: Vec<engine::Var> = op_reads
                        .into_iter()
                        .filter(|read| !written_here(read))
                        .collect();
                    reads.extend(from_before);
                    writes.extend(op_writes);
                    labels.push(&op.label);
                    if line == 0 {
                        line = op.line;
                    }
                    priority = priority.max(op.priority);
                }
                Step::Release(_, slot) => writes.push(slot.var.clone()),
            }
        }
        let label: Arc<str> = match (labels.as_slice(), &steps[..]) {
            ([only], _) => (*only).clone(),
            ([], [Step::Release(_, slot)]) => Arc::from(format!("release {}", slot.var.name())),
            (labels, _) => Arc::from(bulk_label(labels)),
        };
        let SegmentContext {
            pool,
            sizes,
            failed,
            recycle_from,
        } = self.context.clone();
        self.batch.push(engine::BatchOp {
            label: label.clone(),
            line,
            device: self.open_device,
            priority: if priority == i32::MIN { 0 } else { priority },
            accesses: engine::AccessSet::new(reads, writes),
            body: Arc::new(SegmentBody {
                label,
                steps: steps.into(),
                pool,
                sizes,
                failed,
                recycle_from,
            }),
        });
    }
}

/// `bulk of 10: t1 = a + b; t2 = t1 * c; t3 = t2 - a; …`.
fn bulk_label(labels: &[&Arc<str>]) -> String {
    let mut label = format!("bulk of {}:", labels.len());
    for (index, statement) in labels.iter().enumerate() {
        if index == 3 {
            label.push_str(" …");
            break;
        }
        label.push_str(if index == 0 { " " } else { "; " });
        label.push_str(statement);
    }
    label
}

impl Segment {
    /// Pushes this segment's engine ops once (recorded computations by reference, see
    /// `engine::Engine::push_batch`); a communication takes its numbers from `counters`.
    pub(crate) fn push(&self, engine: &engine::Engine, counters: &mut CommCounters) {
        match self {
            Segment::Batch(batch) => {
                engine.push_batch(batch);
            }
            Segment::Comm(op) => {
                engine.push(op.clone().numbered(counters).into_spec());
            }
        }
    }
}

impl engine::OpBody for SegmentBody {
    /// Cheap when every op of it is (a release only drops a value).
    fn is_cheap(&self) -> bool {
        self.steps.iter().all(|step| match step {
            Step::Compute(op, _) => op.is_cheap_now(),
            Step::Release(..) => true,
        })
    }

    fn run(&self, ctx: &engine::OpContext) -> Result<(), String> {
        let where_to = StepContext {
            pool: self.pool.as_ref(),
            sizes: &self.sizes,
            recycle_from: self.recycle_from,
        };
        run_steps(&self.steps, &where_to, ctx).map_err(|(step, message)| {
            let Some((op, position)) = step else {
                return message;
            };
            let bulk_message = format!("`{}`: {message}", op.label);
            self.failed.note(FailedStep {
                bulk: self.label.clone(),
                bulk_message: bulk_message.clone(),
                label: op.label.clone(),
                line: op.line,
                position,
                message,
            });
            bulk_message
        })
    }
}

/// Where a segment's steps take buffers from and note sizes (its [`SegmentContext`], borrowed).
struct StepContext<'a> {
    pool: Option<&'a Arc<BufferPool>>,
    sizes: &'a [AtomicU64],
    recycle_from: u64,
}

/// The op of a bulk that failed, and its place among the bulk's ops.
type FailingStep = (Arc<ComputeOp>, usize);

/// Runs a segment's steps in order; the first failure stops it. Returns the failure's message,
/// with the failing op and its place among the segment's ops when the segment is a bulk.
fn run_steps(
    steps: &[Step],
    context: &StepContext<'_>,
    ctx: &engine::OpContext,
) -> Result<(), (Option<FailingStep>, String)> {
    let StepContext {
        pool,
        sizes,
        recycle_from,
    } = *context;
    let bulked = steps
        .iter()
        .filter(|step| matches!(step, Step::Compute(..)))
        .nth(1)
        .is_some();
    let mut position = 0;
    for step in steps {
        match step {
            Step::Compute(op, sized) => {
                op.execute(pool, ctx)
                    .map_err(|message| (bulked.then(|| (op.clone(), position)), message))?;
                position += 1;
                for (index, slot) in sized {
                    if let Some(bytes) = slot.bytes_now() {
                        sizes[*index].store(bytes as u64, Ordering::Relaxed);
                    }
                }
            }
            Step::Release(index, slot) => {
                let (bytes, host) = slot.release_from(recycle_from);
                if bytes > 0 {
                    sizes[*index].store(bytes as u64, Ordering::Relaxed);
                }
                if let (Some(pool), Some(values)) = (pool, host.and_then(Tensor::into_values)) {
                    pool.give(values);
                }
            }
        }
    }
    Ok(())
}
