//! Pushing into the queues: an op is numbered, its block made, its accesses appended to its
//! variables' queues under their locks, and it is routed to a worker group once every access
//! is granted.

use super::{lock_batch, states_in, Shared, VarState, BATCH_VARS, CALLER_WORKER, FAST_ACCESSES};
use crate::accesses::AccessSet;
use crate::batch::OpBatch;
use crate::config::Policy;
use crate::event::{EventKind, Push};
use crate::op::{NewWork, OpHeader, OpId, OpRef, OpState, Work};
use crate::ready_queue::{runs_before, Group};
use crate::sync::{lock, Arc, MutexGuard, Ordering};
use crate::Device;

impl Shared {
    /// Pushes an op: run here and now when the fast path may (see `Self::run_unqueued`), else
    /// into its variables' queues; returns its id.
    pub(super) fn push_block(
        self: &Arc<Self>,
        label: &Arc<str>,
        line: u32,
        device: Device,
        priority: i32,
        accesses: &AccessSet,
        work: Work,
    ) -> OpId {
        let work = match self.run_unqueued(label, line, device, priority, accesses, work) {
            Ok(id) => return id,
            Err(work) => work,
        };
        let op = self.new_op(
            label,
            line,
            device,
            priority,
            accesses,
            NewWork::Owned(work),
        );
        self.push_queued(op)
    }

    /// Pushes a new op's block into its variables' queues, then runs or queues it if it is
    /// ready; returns its id.
    pub(super) fn push_queued(self: &Arc<Self>, op: OpRef) -> OpId {
        let n_granted = 1 + self.append_accesses(&op); // 1: the count `push` holds
        let id = op.id;
        self.dispatch_pushed(op, n_granted);
        id
    }

    /// Numbers `n` ops pushed together and counts them unfinished; returns the first one's id.
    pub(super) fn number_ops(&self, n: usize) -> OpId {
        self.n_unfinished.fetch_add(n, Ordering::AcqRel);
        OpId(self.next_op.fetch_add(n as u64, Ordering::Relaxed))
    }

    /// A pushed op's numbered block, counted unfinished.
    pub(super) fn new_op(
        &self,
        label: &Arc<str>,
        line: u32,
        device: Device,
        priority: i32,
        accesses: &AccessSet,
        work: NewWork<'_>,
    ) -> OpRef {
        let header = self.numbered(label, line, device, priority, accesses);
        self.blocks.new_op(header, work)
    }

    /// The header of a new op, numbered now and counted unfinished.
    pub(super) fn numbered<'a>(
        &self,
        label: &'a Arc<str>,
        line: u32,
        device: Device,
        priority: i32,
        accesses: &'a AccessSet,
    ) -> OpHeader<'a> {
        OpHeader {
            id: self.number_ops(1),
            label,
            line,
            device,
            priority,
            accesses,
        }
    }

    /// Ends the push of `op`, whose accesses are in their queues, `n_granted` of its wait count
    /// given back (those granted at once and the push's own): runs or queues it when it is
    /// ready. Called once its variables are unlocked.
    pub(super) fn dispatch_pushed(self: &Arc<Self>, op: OpRef, n_granted: usize) {
        let n_accesses = op.accesses.len();
        if op.wait_count.fetch_sub(n_granted, Ordering::AcqRel) == n_granted {
            // Ready at once: the push's record said so (`EventSink::pushed`).
            let op = if n_granted == n_accesses + 1 {
                op.set_state(OpState::Ready);
                op
            } else {
                self.make_ready(op)
            };
            if op.inline || matches!(self.policy, Policy::Naive | Policy::Sim) {
                let mut ready = Vec::new();
                self.execute(op, CALLER_WORKER, &mut ready);
                self.route(&mut ready, CALLER_WORKER, None);
            } else if op.posts {
                // A network op ready at once starts here, as a completion's does: its start
                // only posts a request, and waking a worker for it costs more than that.
                let mut ready = vec![op];
                self.start_posts(&mut ready, CALLER_WORKER);
                self.route(&mut ready, CALLER_WORKER, None);
            } else {
                self.group_for(op.device).push(op);
            }
        }
    }

    /// Pushes a whole batch into the queues, as [`Self::push_block`] pushes one op, under the
    /// threaded and per-device policies: every variable locked once, in id order, while every
    /// op's accesses are appended (in batch order, each op's push recorded as alone); then each
    /// ready op is run or queued. Returns the last op's id, or `None` when the batch must be
    /// pushed op by op (another policy, or too many variables).
    pub(super) fn push_batch_queued(self: &Arc<Self>, batch: &OpBatch) -> Option<OpId> {
        if !matches!(self.policy, Policy::Threaded | Policy::PerDevice)
            || batch.vars.len() > BATCH_VARS
        {
            return None;
        }
        // The blocks are made before the variables are locked: a worker that finishes an op
        // of the last run waits for those locks, so they are held only while the accesses are
        // appended.
        let first = self.number_ops(batch.ops.len());
        let mut pushed: Vec<(OpRef, usize)> = batch
            .ops
            .iter()
            .zip(first.0..)
            .map(|(op, id)| {
                let header = OpHeader {
                    id: OpId(id),
                    label: &op.label,
                    line: op.line,
                    device: op.device,
                    priority: op.priority,
                    accesses: &op.accesses,
                };
                (self.blocks.new_op(header, NewWork::Shared(&op.body)), 1)
            })
            .collect();
        // Observed, every op of the batch is pushed at the moment before its variables are
        // locked: the clock is read once, and not while they are held.
        let time_ns = self.real_sink().map(|_| self.now_ns());
        let mut guards = lock_batch(batch);
        for ((block, n_granted), (op, indices)) in pushed
            .iter_mut()
            .zip(batch.ops.iter().zip(&batch.var_indices))
        {
            let (mut narrow, mut wide);
            let states = batch_states!(narrow, wide, &mut guards, &op.accesses, indices);
            *n_granted += self.append_locked(block, states, time_ns);
        }
        drop(guards);
        let last = pushed.last().map(|(op, _)| op.id);
        for (op, n_granted) in pushed {
            self.dispatch_pushed(op, n_granted);
        }
        last
    }

    /// Appends the op's accesses to its variables' queues, reads then writes; returns how many
    /// were granted at once.
    ///
    /// Every variable is locked before the first append and unlocked after the last, in id
    /// order: two ops pushed at once from two threads then take the same order on every variable
    /// they share. Appended one variable at a time, each could be first on one variable and second
    /// on another, holding a granted access the other waits behind there: a cycle that never runs
    /// (loom found it, `loom_tests`).
    pub(super) fn append_accesses(&self, op: &OpRef) -> usize {
        /// Ops with up to this many accesses (nearly all) keep their locks on the stack.
        const ON_STACK: usize = 4;
        // Observed, the push's time, read before the variables are locked so that the clock
        // does not lengthen the time they are held (a release on a worker waits for them).
        let time_ns = self.real_sink().map(|_| self.now_ns());
        let n_accesses = op.accesses.len();
        let accesses = &op.accesses;
        if n_accesses <= ON_STACK {
            let mut guards: [Option<MutexGuard<'_, VarState>>; ON_STACK] = Default::default();
            for &index in &accesses.lock_order {
                guards[index] = Some(lock(&accesses.var_at(index).0.state));
            }
            let mut states = guards.each_mut().map(|guard| guard.as_deref_mut());
            self.append_locked(op, &mut states[..n_accesses], time_ns)
        } else {
            let mut guards = Vec::new();
            guards.resize_with(n_accesses, || None);
            for &index in &accesses.lock_order {
                guards[index] = Some(lock(&accesses.var_at(index).0.state));
            }
            let mut states: Vec<_> = guards
                .iter_mut()
                .map(|guard| guard.as_deref_mut())
                .collect();
            self.append_locked(op, &mut states, time_ns)
        }
    }

    /// [`Self::append_accesses`] once the caller holds every variable's lock: `guards` holds
    /// their states by access index; `time_ns` is the push's time when observed (see
    /// [`Self::real_sink`]).
    pub(super) fn append_locked(
        &self,
        op: &OpRef,
        guards: &mut [Option<&mut VarState>],
        time_ns: Option<u64>,
    ) -> usize {
        let accesses = &op.accesses;
        let n_reads = accesses.reads.len();
        let mut n_granted = 0;
        // Which accesses were granted, as bits (only when observed, to send with the push).
        let observed = time_ns.is_some();
        let mut granted_bits = [0u64; 1];
        let mut more_bits = Vec::new();
        let bits: &mut [u64] = match guards.len() {
            _ if !observed => &mut [],
            ..=64 => &mut granted_bits,
            n => {
                more_bits.resize(n.div_ceil(64), 0);
                &mut more_bits
            }
        };
        for (index, guard) in guards.iter_mut().enumerate() {
            let Some(state) = guard else { continue };
            let granted = if index < n_reads {
                state.queue.append_read(op.clone())
            } else {
                state.queue.append_write(op.clone())
            };
            if granted {
                n_granted += 1;
                if let Some(word) = bits.get_mut(index / 64) {
                    *word |= 1 << (index % 64);
                }
            }
        }
        // Sent while every variable is still locked: no grant of a later release comes first.
        if let (Some(sink), Some(time_ns)) = (&self.sink, time_ns) {
            sink.pushed(
                time_ns,
                &Push {
                    op: op.id,
                    label: &op.label,
                    line: op.line,
                    reads: &op.accesses.reads,
                    writes: &op.accesses.writes,
                    device: op.device,
                    priority: op.priority,
                    granted: bits,
                    ready: n_granted == guards.len(),
                },
            );
        }
        n_granted
    }

    /// Marks `op` ready (every access granted) and tells the sink.
    pub(super) fn make_ready(&self, op: OpRef) -> OpRef {
        op.set_state(OpState::Ready);
        self.emit(|| EventKind::Ready { op: op.id });
        op
    }

    /// Sends ready ops where they run: engine bookkeeping and naive ops run here and now; other
    /// ops go to their group's queue, except the first by priority and push order of its own
    /// group's, which this worker keeps to run next (returned) when its own queue was empty.
    pub(super) fn route(
        self: &Arc<Self>,
        ready: &mut Vec<OpRef>,
        worker: u32,
        own_group: Option<&Arc<Group>>,
    ) -> Option<OpRef> {
        let mut keep: Option<OpRef> = None;
        // Asked once: the ops that lose their place to a better one fill the queue below.
        let own_idle = own_group.filter(|own| own.is_empty());
        while let Some(op) = ready.pop() {
            if op.inline || matches!(self.policy, Policy::Naive | Policy::Sim) {
                self.execute(op, worker, ready);
                continue;
            }
            let group = self.group_for(op.device);
            let own = own_idle.is_some_and(|own| Arc::ptr_eq(own, group));
            if !own {
                group.push(op);
                continue;
            }
            match keep.take() {
                None => keep = Some(op),
                Some(kept) if runs_before(&op, &kept) => {
                    group.push(kept);
                    keep = Some(op);
                }
                Some(kept) => {
                    group.push(op);
                    keep = Some(kept);
                }
            }
        }
        keep
    }
}
