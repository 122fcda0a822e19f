//! Running queued ops and finishing them: a worker (or the pushing thread) executes a ready op,
//! starts an asynchronous one, then releases its accesses, which grants the next ones in each
//! variable's queue; finished ops are counted, failures kept.

use super::{
    cancelled, current_lane, error_at, observed_run, panic_message, run_caught, Shared, Uncounted,
    Var, VarId, CALLER_WORKER, GRANTED, MAX_UNCOUNTED, UNCOUNTED,
};
use crate::completion;
use crate::completion::{Ending, OpCompletion};
use crate::config::Policy;
use crate::device_time::DeviceClock;
use crate::event::EventKind;
use crate::op::{AsyncOpFn, OpBlock, OpContext, OpError, OpId, OpRef, OpState, Outcome, Work};
use crate::ready_queue::runs_before;
use crate::sim::{self as simulation, Cost};
use crate::sim_feed::{Bookkeeping, SimOutcome};
use crate::sync::{fence, lock, Arc, Ordering};
use std::panic::{catch_unwind, AssertUnwindSafe};

impl Shared {
    /// Starts one op on this thread. A synchronous op (and engine bookkeeping) also finishes here,
    /// collecting the ops its release makes ready; an asynchronous one finishes here only when its
    /// handle ended while its function ran. A user's op cancelled before this point never
    /// starts: it finishes here as cancelled, with no worker and no `Started` event (a wait or a
    /// deletion is bookkeeping, never cancelled).
    pub(super) fn execute(self: &Arc<Self>, op: OpRef, worker: u32, ready: &mut Vec<OpRef>) {
        let work = lock(&op.work).take();
        if work.as_ref().is_some_and(Work::is_users) && self.is_cancelled(op.id) {
            if let Some(Work::Shared(body)) = work {
                // Kept for the block's next op of the same statement (see `OpBlock::refill`).
                *lock(&op.work) = Some(Work::Ran(body));
            }
            // Its work is dropped unrun (a communication's start function, dropped, abandons
            // the communication).
            let cost = self.sim.as_ref().map(|_| Cost::default());
            self.finish(
                &op,
                cancelled(op.id, &op.label, op.line),
                cost,
                false,
                ready,
            );
            self.blocks.recycle(op);
            return;
        }
        op.set_worker(worker);
        op.set_state(OpState::Running);
        if let Some(sink) = self.real_sink() {
            sink.started(self.now_ns(), op.id, worker);
        }
        match work {
            Some(Work::Run(exec)) => {
                // A closure has no context to report a cost in: it costs nothing simulated.
                let outcome = self.run_user_op(&op, exec);
                let cost = self.sim.as_ref().map(|_| Cost::default());
                self.finish(&op, outcome, cost, false, ready);
            }
            Some(Work::Shared(body)) => {
                let mut cost = Cost::default();
                let outcome = self.run_user_op(&op, || {
                    let ctx = self.op_context();
                    let result = body.run(&ctx);
                    cost = ctx.cost();
                    result
                });
                // Kept for the block's next op of the same statement (see `OpBlock::refill`).
                *lock(&op.work) = Some(Work::Ran(body));
                let cost = self.sim.as_ref().map(|_| cost);
                self.finish(&op, outcome, cost, false, ready);
            }
            Some(Work::Async(start)) => self.start_async(&op, start, ready),
            Some(Work::Wait(signal)) => {
                signal.set(match first_read_error(&op) {
                    Some(error) => Err(error),
                    None => Ok(()),
                });
                self.finish(&op, Outcome::Ok, None, false, ready);
            }
            Some(Work::Delete(free)) => {
                free();
                self.finish(&op, Outcome::Ok, None, true, ready);
            }
            Some(Work::Ran(_)) | None => debug_assert!(false, "an op ran twice"),
        }
        self.blocks.recycle(op);
    }

    /// The context of the op about to run on this thread, inside `clocked` (whose clock it
    /// takes when the run is observed).
    pub(super) fn op_context(&self) -> OpContext {
        let observed = self.sink.is_some() && self.sim.is_none();
        OpContext::new(
            current_lane(),
            self.gpu_streams,
            self.sim.is_some(),
            observed.then(DeviceClock::current).flatten(),
        )
    }

    /// Ends an op: records its outcome, releases its accesses (collecting the ops that become
    /// ready) and counts it finished. `cost` is what it reported under the simulated policy, when
    /// known now.
    pub(super) fn finish(
        self: &Arc<Self>,
        op: &OpRef,
        outcome: Outcome,
        cost: Option<Cost>,
        deleted: bool,
        ready: &mut Vec<OpRef>,
    ) {
        if let Outcome::Failed(error) = &outcome {
            lock(&self.failures).add(error);
        }
        op.set_state(outcome.state());
        if let Some(sim) = &self.sim {
            let sink = simulation::sink_or_none(&self.sink);
            let bookkeeping = op.inline.then_some(if deleted {
                Bookkeeping::Delete
            } else {
                Bookkeeping::Wait
            });
            // Bookkeeping costs nothing simulated.
            let cost = cost.or(bookkeeping.map(|_| Cost::default()));
            sim.finished(sink, op.id, sim_outcome(op, &outcome, bookkeeping), cost);
        }
        // Observed, the end's time is also that of the grants its release gives: they follow it
        // at once, on this thread, and one reading of the clock serves them all.
        let time_ns = self.real_sink().map(|sink| {
            let time_ns = self.now_ns();
            let message = outcome.error().map(|error| error.message.as_str());
            sink.finished(time_ns, op.id, outcome.state(), message);
            time_ns
        });
        self.release(op, &outcome, time_ns, ready);
        if deleted {
            self.forget_deleted(&op.accesses.writes);
        }
        self.count_finished_here();
    }

    /// Forgets the variables a deletion that just ended wrote: they are no longer live (nor
    /// in snapshots), and observers hear so.
    pub(super) fn forget_deleted(&self, deleted: &[Var]) {
        for var in deleted {
            lock(&self.vars).remove(&var.id());
            // Under the simulated policy the simulator says so, when the deletion ends in
            // virtual time.
            if self.sim.is_none() {
                self.emit_structural(|| EventKind::VarDeleted { var: var.id() });
            }
        }
    }

    /// Counts one op finished on this thread: on a worker, with the others it finished since
    /// it last counted, [`MAX_UNCOUNTED`] at a time or before it looks for work (see
    /// [`UNCOUNTED`]); elsewhere at once.
    pub(super) fn count_finished_here(&self) {
        let engine = self.address();
        let to_count = UNCOUNTED.with(|uncounted| match uncounted.get() {
            Some(mine) if mine.engine == engine => {
                let n = mine.n + 1;
                let keep = if n < MAX_UNCOUNTED { n } else { 0 };
                uncounted.set(Some(Uncounted { engine, n: keep }));
                n - keep
            }
            _ => 1,
        });
        if to_count > 0 {
            self.count_finished(to_count);
        }
    }

    /// Counts the ops this worker finished and has not counted yet.
    pub(super) fn count_uncounted(&self) {
        let engine = self.address();
        let n = UNCOUNTED.with(|uncounted| {
            uncounted
                .replace(Some(Uncounted { engine, n: 0 }))
                .map_or(0, |mine| mine.n)
        });
        if n > 0 {
            self.count_finished(n);
        }
    }

    /// This engine's address, which tells it apart from the other engines of the process.
    pub(super) fn address(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Counts `n` ops finished, waking `wait_all` when they were the last.
    pub(super) fn count_finished(&self, n: usize) {
        // The fence pairs with `wait_all`'s: either it sees zero unfinished ops, or this sees it
        // waiting. (SeqCst accesses alone do not order a store before a later load of another
        // variable in loom's model, which finds the lost wake-up; the fences do.)
        if self.n_unfinished.fetch_sub(n, Ordering::SeqCst) == n {
            fence(Ordering::SeqCst);
            if self.n_idle_waiters.load(Ordering::SeqCst) > 0 {
                let _idle = lock(&self.idle_lock);
                self.idle_condvar.notify_all();
            }
        }
    }

    /// Runs an asynchronous op's start function with its completion handle. The op finishes now
    /// if it does not run (reading an error) or if its handle ended on this thread
    /// while the function ran; otherwise whoever holds the handle finishes it.
    pub(super) fn start_async(
        self: &Arc<Self>,
        op: &OpRef,
        start: AsyncOpFn,
        ready: &mut Vec<OpRef>,
    ) {
        if let Some(outcome) = self.refusal(op) {
            let cost = self.sim.as_ref().map(|_| Cost::default());
            self.finish(op, outcome, cost, false, ready);
            return;
        }
        let handle = OpCompletion::new(self.clone(), op.clone());
        let (result, ending, cost) = self.clocked(op, || {
            let ctx = self.op_context();
            let frame = completion::enter(self, op.id);
            let result = catch_unwind(AssertUnwindSafe(|| start(&ctx, handle)));
            (result, completion::leave(frame), ctx.cost())
        });
        let cost = self.sim.as_ref().map(|_| cost);
        let panic = result.err().map(|payload| panic_message(payload.as_ref()));
        match ending {
            Some(ending) => {
                let outcome = match (ending, panic) {
                    (Ending::Completed(result), panic) => {
                        if let Some(message) = panic {
                            self.report_late_panic(op, message);
                        }
                        match result {
                            Ok(()) => Outcome::Ok,
                            Err(message) => Outcome::Failed(op_error(op, message)),
                        }
                    }
                    (Ending::Dropped, panic) => Outcome::Failed(op_error(
                        op,
                        panic.unwrap_or_else(|| completion::DROPPED.to_string()),
                    )),
                };
                self.finish(op, outcome, cost, false, ready);
            }
            None => {
                if let Some(message) = panic {
                    self.report_late_panic(op, message);
                }
                if let (Some(sim), Some(cost)) = (&self.sim, cost) {
                    sim.cost(simulation::sink_or_none(&self.sink), op.id, cost);
                }
            }
        }
    }

    /// Finishes an asynchronous op whose handle ended away from its start function; the ops it
    /// makes ready go to their queues (or run here, under the naive and simulated policies).
    pub(crate) fn complete_async(self: &Arc<Self>, op: &OpRef, ending: Ending) {
        let outcome = match ending {
            Ending::Completed(Ok(())) => Outcome::Ok,
            Ending::Completed(Err(message)) => Outcome::Failed(op_error(op, message)),
            Ending::Dropped => Outcome::Failed(op_error(op, completion::DROPPED.to_string())),
        };
        let mut ready = Vec::new();
        self.finish(op, outcome, None, false, &mut ready);
        self.start_posts(&mut ready, CALLER_WORKER);
        self.route(&mut ready, CALLER_WORKER, None);
    }

    /// Starts here, on the thread that made them ready (one that completed an asynchronous op,
    /// a worker that finished an op, or the pushing thread for an op ready at once), the
    /// network ops in `ready` (`OpBlock::posts`: asynchronous, their start only posts a
    /// request), best first, each one only when no op queued in its group runs before it (it
    /// would be the next out of its queue, so priorities hold); the others stay in `ready`, or
    /// go to their queue. A chain of communications then goes from the thread that learns one
    /// is over straight to the next, without waking a worker to start it (two thread hand-overs
    /// an op, under MPI: from the progress thread to the worker and back; on cores shared by
    /// several ranks, a woken worker also spins on a core another rank's thread needs). Under
    /// the naive and simulated policies every ready op runs here anyway (`route`).
    ///
    /// Recorded as run by the group's first worker under the per-device policy (its `net` lane,
    /// where views draw the network's ops), and by `worker` (the caller's) under the threaded one.
    pub(super) fn start_posts(self: &Arc<Self>, ready: &mut Vec<OpRef>, worker: u32) {
        if !matches!(self.policy, Policy::Threaded | Policy::PerDevice) {
            return;
        }
        loop {
            let mut best: Option<usize> = None;
            for (index, op) in ready.iter().enumerate() {
                if op.posts && best.is_none_or(|best| runs_before(op, &ready[best])) {
                    best = Some(index);
                }
            }
            let Some(best) = best else { return };
            let op = ready.swap_remove(best);
            let group = self.group_for(op.device);
            let worker = match self.policy {
                Policy::PerDevice => group.first_worker(),
                _ => worker,
            };
            if let Some(op) = group.push_unless_first(op) {
                // Its start may finish it here (refused, or completed inline): what that makes
                // ready joins `ready`.
                self.execute(op, worker, ready);
            }
        }
    }

    /// An async op's start function panicked after its handle was completed or handed on: the
    /// op's outcome is the handle's, and the panic is reported as a failure of its own.
    pub(super) fn report_late_panic(&self, op: &OpBlock, message: String) {
        lock(&self.failures).add(&op_error(op, message));
    }

    /// Runs `body` as `op`'s execution, with its device clock current when observed.
    pub(super) fn clocked<T>(&self, op: &OpBlock, body: impl FnOnce() -> T) -> T {
        match &self.sink {
            Some(sink) if self.sim.is_none() => {
                observed_run(op.id, op.device, sink, self.clock, body)
            }
            _ => body(),
        }
    }

    /// Why an op that was not cancelled (see [`Self::execute`]) must not run: it reads a variable
    /// that holds an error.
    pub(super) fn refusal(&self, op: &OpBlock) -> Option<Outcome> {
        first_read_error(op).map(Outcome::Skipped)
    }

    /// Whether op `id` was pushed before a [`Self::cancel_pending`]: it must not start.
    pub(super) fn is_cancelled(&self, id: OpId) -> bool {
        id.0 < self.cancel_below.load(Ordering::Acquire)
    }

    /// Runs a user op's work `exec`, unless it is refused (cancelled, or reading an error): its
    /// outcome, a panic caught as a failure; observed, timed by its device clock.
    pub(super) fn run_user_op(
        &self,
        op: &OpBlock,
        exec: impl FnOnce() -> Result<(), String>,
    ) -> Outcome {
        if let Some(outcome) = self.refusal(op) {
            return outcome;
        }
        self.clocked(op, || run_caught(op.id, &op.label, op.line, exec))
    }

    /// Ends the op's accesses, in the order they were taken, and counts down the ops they unblock;
    /// observed, the grants are sent at `time_ns`, the op's end. Its written variables take its
    /// `outcome`: a new version, holding its error or none; but a cancelled op wrote nothing, so
    /// they keep their version and error (their values, which the engine does not see, stay as
    /// the last completed write left them).
    pub(super) fn release(
        &self,
        op: &OpRef,
        outcome: &Outcome,
        time_ns: Option<u64>,
        ready: &mut Vec<OpRef>,
    ) {
        let wrote = !matches!(outcome, Outcome::Cancelled(_));
        let error = outcome.error();
        // This thread's room for the ops each variable grants: empty between releases, and
        // taken, not borrowed, so that a release on this thread meanwhile makes its own.
        let mut granted = GRANTED.with(|room| room.take());
        for var in &op.accesses.reads {
            lock(&var.0.state).queue.complete_read(op, &mut granted);
            self.grant_all(var, &mut granted, time_ns, ready);
        }
        for var in &op.accesses.writes {
            {
                let mut state = lock(&var.0.state);
                if wrote {
                    state.version += 1;
                    state.cancelled_mark = 0;
                } else {
                    state.cancelled_mark = self.cancel_below.load(Ordering::Acquire);
                }
                if wrote && (state.error.is_some() || error.is_some()) {
                    state.error = error.cloned();
                    var.0.has_error.store(error.is_some(), Ordering::Release);
                }
                state.queue.complete_write(&mut granted);
            }
            self.grant_all(var, &mut granted, time_ns, ready);
        }
        GRANTED.with(|room| room.set(granted));
    }

    /// Grants `var` to the ops in `granted`, collecting those it makes ready; observed (`time_ns`,
    /// the releasing op's end), each grant is sent at that time.
    pub(super) fn grant_all(
        &self,
        var: &Var,
        granted: &mut Vec<OpRef>,
        time_ns: Option<u64>,
        ready: &mut Vec<OpRef>,
    ) {
        if granted.is_empty() {
            return;
        }
        let sink = self.real_sink().zip(time_ns);
        for next in granted.drain(..) {
            let Some((sink, time_ns)) = sink else {
                if next.grant_one() {
                    next.set_state(OpState::Ready);
                    ready.push(next);
                }
                continue;
            };
            // The op's last wait: nothing else counts it down (counts only go down), so this
            // grant makes it ready, and no other event of it can come between the two.
            if next.wait_count.load(Ordering::Acquire) == 1 {
                sink.granted_ready(time_ns, next.id, var.id());
                let made_ready = next.grant_one();
                debug_assert!(made_ready, "the last wait was counted down elsewhere");
                next.set_state(OpState::Ready);
                ready.push(next);
                continue;
            }
            // Sent before the count goes down: once it does, another thread may make the op
            // ready and start it, and its grant must come first.
            sink.granted(time_ns, next.id, var.id());
            if next.grant_one() {
                ready.push(self.make_ready(next));
            }
        }
    }
}

/// The first error held by a variable the op reads, also one it writes too (granted accesses:
/// no other write can change it now).
fn first_read_error(op: &OpBlock) -> Option<Arc<OpError>> {
    let read_writes = &op.accesses.writes[..op.accesses.n_read_writes];
    // Plain loops (not a chain of the two): this runs before every op, and nearly always finds
    // nothing.
    let error_of = |var: &Var| {
        if var.0.has_error.load(Ordering::Acquire) {
            lock(&var.0.state).error.clone()
        } else {
            None
        }
    };
    for var in &op.accesses.reads {
        if let Some(error) = error_of(var) {
            return Some(error);
        }
    }
    read_writes.iter().find_map(error_of)
}

/// The error of `op` failing with `message`.
fn op_error(op: &OpBlock, message: String) -> Arc<OpError> {
    error_at(op.id, &op.label, op.line, message)
}

/// What the simulator needs of a finished op.
fn sim_outcome(op: &OpBlock, outcome: &Outcome, bookkeeping: Option<Bookkeeping>) -> SimOutcome {
    let reads: Vec<VarId> = op.accesses.reads.iter().map(Var::id).collect();
    let writes: Vec<VarId> = op.accesses.writes.iter().map(Var::id).collect();
    SimOutcome {
        pushed: EventKind::Pushed {
            op: op.id,
            label: op.label.clone(),
            line: op.line,
            reads: reads.clone(),
            writes: writes.clone(),
            device: op.device,
            priority: op.priority,
        },
        device: op.device,
        priority: op.priority,
        reads,
        writes,
        state: outcome.state(),
        message: outcome.error().map(|error| error.message.clone()),
        bookkeeping,
    }
}
