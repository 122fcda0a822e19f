//! Ops run on the pushing thread: an op (or a batch of ops) whose accesses would all be granted
//! at once and that runs here (the naive policy, or a cheap CPU op) runs under its variables'
//! locks, never entering their queues (the fast path of the protocol in `engine.rs`).

use super::{
    cancelled, lock_batch, observed_run, run_caught, states_in, states_of, FastGuards, Shared,
    VarState, BATCH_VARS, FAST_ACCESSES,
};
use crate::accesses::{AccessSet, Accesses};
use crate::batch::OpBatch;
use crate::config::Policy;
use crate::device_time::DeviceClock;
use crate::event::{EventSink, Push};
use crate::op::{OpContext, OpHeader, OpId, Outcome, Work};
use crate::sync::{lock, Arc, Ordering};
use crate::Device;

impl Shared {
    /// The naive engine's fast path: a synchronous op (a closure, a shared body, or a deletion,
    /// whose variable is then forgotten) whose accesses would all be granted at once (nothing
    /// queued on what it writes, no write queued on what it reads) runs here and now, under its
    /// variables' locks, without entering their queues or getting an op block.
    /// The queued path would run it on this thread at once too; holding the locks (taken in id
    /// order, as `append_accesses` does) keeps a push from another thread behind it, as its
    /// queue entries would. Observed, it sends the events the queued path would (see
    /// [`Self::run_granted`]); a snapshot taken meanwhile waits for the op. Gives the work back
    /// when the op must take the queued path.
    pub(super) fn run_unqueued(
        self: &Arc<Self>,
        label: &Arc<str>,
        line: u32,
        device: Device,
        priority: i32,
        accesses: &AccessSet,
        work: Work,
    ) -> Result<OpId, Work> {
        let cheap = || match &work {
            Work::Shared(body) => body.is_cheap(),
            Work::Delete(_) => true,
            _ => false,
        };
        let Some(guards) = (match &work {
            Work::Shared(_) | Work::Run(_) | Work::Delete(_) => {
                self.lock_if_grantable(accesses, device, cheap)
            }
            Work::Async(_) | Work::Wait(_) | Work::Ran(_) => None,
        }) else {
            return Err(work);
        };
        let mut guards = guards;
        let deletes = matches!(work, Work::Delete(_));
        let granted = self.numbered(label, line, device, priority, accesses);
        let id = self.run_granted(granted, &mut states_of(&mut guards), || match work {
            Work::Shared(body) => body.run(&self.op_context()),
            Work::Run(exec) => exec(),
            Work::Delete(free) => {
                free();
                Ok(())
            }
            Work::Async(_) | Work::Wait(_) | Work::Ran(_) => {
                Err("the engine ran bookkeeping as a plain op".to_string())
            }
        });
        drop(guards);
        if deletes {
            self.forget_deleted(&accesses.writes);
        }
        self.count_finished(1);
        Ok(id)
    }

    /// The locks of `accesses`' variables, taken in id order, when the fast path may run the op
    /// now (see [`Self::run_unqueued`]): an op the policy runs on the pushing thread (see
    /// [`Self::runs_here`]: under the threaded policies, a cheap one), a handful of accesses,
    /// each grantable at once, and, when observed, no snapshot taken yet. A snapshot cannot see
    /// an op that runs under its variables' locks (it waits for it), so once a live view asks
    /// for snapshots the observed ops take the queued path, where snapshots see them waiting
    /// and running.
    pub(super) fn lock_if_grantable<'a>(
        &self,
        accesses: &'a Accesses,
        device: Device,
        cheap: impl FnOnce() -> bool,
    ) -> Option<FastGuards<'a>> {
        if !self.runs_here(device, cheap)
            || !self.may_run_unqueued()
            || accesses.len() > FAST_ACCESSES
        {
            return None;
        }
        let mut guards: FastGuards<'a> = Default::default();
        for &index in &accesses.lock_order {
            let state = lock(&accesses.var_at(index).0.state);
            if !state.queue.would_grant(index >= accesses.reads.len()) {
                return None;
            }
            guards[index] = Some(state);
        }
        Some(guards)
    }

    /// Whether the policy runs an op placed on `device` on the pushing thread when every access
    /// of it is granted at its push: under the naive policy every op; under the threaded and
    /// per-device ones a CPU op whose work is `cheap` (a shared body that says so, see
    /// [`OpBody::is_cheap`](crate::OpBody::is_cheap), asked here, before the variables are locked, so that an op that is
    /// not cheap locks them only once, on the queued path; a deletion, which the queued path
    /// runs on the thread that makes it ready too); none when simulated.
    pub(super) fn runs_here(&self, device: Device, cheap: impl FnOnce() -> bool) -> bool {
        match self.policy {
            Policy::Naive => true,
            Policy::Threaded | Policy::PerDevice => device == Device::Cpu && cheap(),
            Policy::Sim => false,
        }
    }

    /// Whether the fast path is open: unobserved, or observed by nothing that takes snapshots.
    pub(super) fn may_run_unqueued(&self) -> bool {
        self.sink.is_none() || !self.snapshots_taken.load(Ordering::Relaxed)
    }

    /// Runs a whole batch here and now, as [`Self::run_unqueued`] runs one op, when every op of
    /// it would be granted at once (the naive policy, or the threaded ones when every op is a
    /// cheap CPU op; no snapshot-taking observer; at most [`BATCH_VARS`] variables, so that a
    /// bulk of several statements, one op of many accesses, runs here too): every variable
    /// locked once, in id order, for the whole batch. The ops run in order, each numbered, refused, reported and counted as alone; their
    /// variables' queues do not change meanwhile (these ops never enter them), so whether each
    /// would be granted is known before the first runs. Returns the last op's id, or `None` when
    /// the batch must be pushed op by op.
    pub(super) fn run_batch_unqueued(
        &self,
        batch: &OpBatch,
        context: impl Fn() -> OpContext,
    ) -> Option<OpId> {
        if !batch
            .ops
            .iter()
            .all(|op| self.runs_here(op.device, || op.body.is_cheap()))
            || !self.may_run_unqueued()
            || batch.vars.len() > BATCH_VARS
        {
            return None;
        }
        let mut guards = lock_batch(batch);
        let grantable = batch
            .ops
            .iter()
            .zip(&batch.var_indices)
            .all(|(op, indices)| {
                let accesses = &op.accesses;
                accesses
                    .lock_order
                    .iter()
                    .zip(indices.iter())
                    .all(|(&access, &var)| {
                        guards[var].as_ref().is_some_and(|state| {
                            state.queue.would_grant(access >= accesses.reads.len())
                        })
                    })
            });
        if !grantable {
            return None;
        }
        let first = self.number_ops(batch.ops.len());
        let mut last = None;
        for ((op, indices), id) in batch.ops.iter().zip(&batch.var_indices).zip(first.0..) {
            let accesses = &op.accesses;
            let granted = OpHeader {
                id: OpId(id),
                label: &op.label,
                line: op.line,
                device: op.device,
                priority: op.priority,
                accesses,
            };
            let (mut narrow, mut wide);
            let states = batch_states!(narrow, wide, &mut guards, accesses, indices);
            last = Some(self.run_granted(granted, states, || op.body.run(&context())));
        }
        drop(guards);
        self.count_finished(batch.ops.len());
        last
    }

    /// Runs an op whose variables' states `states` holds, locked, by access index (see
    /// [`Self::run_unqueued`]), as a push and its whole run: refused when cancelled or reading an
    /// error, its failure reported and its writes counted. Observed, it sends what the queued
    /// path sends for an op granted at once and run on this thread: its push (every access
    /// granted, ready) and its start on [`CALLER_WORKER`](super::CALLER_WORKER), at one moment (nothing stands between
    /// them here), then its end, its device clock current while it runs. The caller numbers it
    /// first (from [`Self::number_ops`]), unlocks the variables after, then counts the op
    /// finished.
    pub(super) fn run_granted(
        &self,
        op: OpHeader<'_>,
        states: &mut [Option<&mut VarState>],
        run: impl FnOnce() -> Result<(), String>,
    ) -> OpId {
        let id = op.id;
        let cancel = self.is_cancelled(id);
        match &self.sink {
            None => {
                self.settle_granted(&op, states, cancel, run);
            }
            Some(sink) => self.run_granted_observed(sink, op, states, cancel, run),
        }
        id
    }

    /// [`Self::run_granted`] with its events sent to `sink`. Kept out of line, so that the
    /// unobserved path stays as small as it was. A cancelled op (`cancel`) never starts: its push is
    /// sent without a start, then its end. A CPU op's push, start and end are sent together
    /// once it has ended ([`EventSink::ran_at_once`]): it runs under its variables' locks, so
    /// no other op's event about them can fall between them, and it reports no device work
    /// meanwhile.
    #[inline(never)]
    pub(super) fn run_granted_observed(
        &self,
        sink: &Arc<dyn EventSink>,
        op: OpHeader<'_>,
        states: &mut [Option<&mut VarState>],
        cancel: bool,
        run: impl FnOnce() -> Result<(), String>,
    ) {
        let n_accesses = op.accesses.len();
        debug_assert!(n_accesses <= BATCH_VARS);
        let push = Push {
            op: op.id,
            label: op.label,
            line: op.line,
            reads: &op.accesses.reads,
            writes: &op.accesses.writes,
            device: op.device,
            priority: op.priority,
            granted: &[(1 << n_accesses) - 1],
            ready: true,
        };
        let outcome = if cancel {
            sink.pushed(self.now_ns(), &push);
            self.settle_granted(&op, states, true, run)
        } else if op.device == Device::Cpu {
            let push_ns = self.now_ns();
            let outcome =
                DeviceClock::run_unclocked(|| self.settle_granted(&op, states, false, run));
            let message = outcome.error().map(|error| error.message.as_str());
            sink.ran_at_once(push_ns, &push, self.now_ns(), outcome.state(), message);
            return;
        } else {
            sink.pushed_and_started(self.now_ns(), &push);
            observed_run(op.id, op.device, sink, self.clock, || {
                self.settle_granted(&op, states, false, run)
            })
        };
        let message = outcome.error().map(|error| error.message.as_str());
        sink.finished(self.now_ns(), op.id, outcome.state(), message);
    }

    /// Runs the fast path's op unless it is refused (`cancel`, or reading an error), reports
    /// its failure and counts its writes, giving their variables its error or none; returns how
    /// it ended. A cancelled op wrote nothing: its variables keep their values and errors (see
    /// [`Shared::release`]).
    #[inline(always)]
    pub(super) fn settle_granted(
        &self,
        op: &OpHeader<'_>,
        states: &mut [Option<&mut VarState>],
        cancel: bool,
        run: impl FnOnce() -> Result<(), String>,
    ) -> Outcome {
        let OpHeader {
            label,
            line,
            accesses,
            ..
        } = *op;
        let n_reads = accesses.reads.len();
        let guards = &mut states[..accesses.len()];
        let outcome = if cancel {
            let mark = self.cancel_below.load(Ordering::Acquire);
            for state in guards.iter_mut().skip(n_reads).flatten() {
                state.cancelled_mark = mark;
            }
            return cancelled(op.id, label, line);
        } else if let Some(error) = guards[..n_reads + accesses.n_read_writes]
            .iter()
            .find_map(|state| state.as_ref().and_then(|state| state.error.clone()))
        {
            Outcome::Skipped(error)
        } else {
            run_caught(op.id, label, line, run)
        };
        if let Outcome::Failed(error) = &outcome {
            lock(&self.failures).add(error);
        }
        let error = outcome.error();
        for (index, state) in guards.iter_mut().enumerate().skip(n_reads) {
            let Some(state) = state else { continue };
            state.version += 1;
            state.cancelled_mark = 0;
            if state.error.is_some() || error.is_some() {
                state.error = error.cloned();
                accesses
                    .var_at(index)
                    .0
                    .has_error
                    .store(error.is_some(), Ordering::Release);
            }
        }
        outcome
    }
}
