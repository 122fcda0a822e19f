//! Worker groups and waiting: a group's threads started on first use, their loop, cancelling
//! ops not started, and waiting for every op to finish.

use super::{Shared, Uncounted, VarInner, CURRENT_LANE, UNCOUNTED};
use crate::config::Policy;
use crate::event::EventKind;
use crate::op::{OpId, OpState, Work};
use crate::ready_queue::Group;
use crate::sync::thread::Builder;
use crate::sync::{fence, lock, wait, wait_timeout, Arc, Ordering, Weak};
use crate::Device;

impl Shared {
    /// The worker group that runs ops placed on `device`, started on first use.
    pub(super) fn group_for(self: &Arc<Self>, device: Device) -> &Arc<Group> {
        let slot = match self.policy {
            Policy::PerDevice => device.slot(),
            Policy::Naive | Policy::Threaded | Policy::Sim => 0,
        };
        self.groups[slot].get_or_init(|| self.start_group(device))
    }

    /// Starts the worker threads of `device`'s group, as many as the policy gives it.
    pub(super) fn start_group(self: &Arc<Self>, device: Device) -> Arc<Group> {
        let (n_workers, prefix) = match (self.policy, device) {
            (Policy::PerDevice, Device::Gpu(index)) => (self.gpu_streams, format!("gpu{index}:s")),
            (Policy::PerDevice, Device::Copy | Device::Link(..)) => (1, "copy:".to_string()),
            (Policy::PerDevice, Device::Net) => (1, "net:".to_string()),
            _ => (self.threads, "cpu:".to_string()),
        };
        let mut names = lock(&self.worker_names);
        let first_worker = names.len() as u32;
        let group = Arc::new(Group::new(first_worker, n_workers));
        for index in 0..n_workers {
            names.push(format!("{prefix}{index}"));
            let shared = self.clone();
            let group = group.clone();
            let worker = first_worker + index as u32;
            let thread = Builder::new()
                .name(format!("dep-{prefix}{index}"))
                .spawn(move || {
                    CURRENT_LANE.with(|lane| lane.set(index));
                    shared.worker_loop(&group, worker)
                })
                .expect("the OS refused to start an engine worker thread");
            lock(&self.threads_started).push(thread);
        }
        group
    }

    /// A worker's life: runs its group's ready ops, next one it made ready itself when it
    /// kept one, until the group stops.
    pub(super) fn worker_loop(self: &Arc<Self>, group: &Arc<Group>, worker: u32) {
        let mut ready = Vec::new();
        let mut next = None;
        let engine = self.address();
        UNCOUNTED.with(|uncounted| uncounted.set(Some(Uncounted { engine, n: 0 })));
        loop {
            let op = match next.take() {
                Some(op) => op,
                None => {
                    self.count_uncounted();
                    match group.pop_blocking() {
                        Some(op) => op,
                        None => return,
                    }
                }
            };
            self.execute(op, worker, &mut ready);
            self.start_posts(&mut ready, worker);
            next = self.route(&mut ready, worker, Some(group));
        }
    }

    /// See [`Engine::cancel_pending`](super::Engine::cancel_pending).
    pub(super) fn cancel_pending(&self) {
        let next = self.next_op.load(Ordering::SeqCst);
        let before = self.cancel_below.fetch_max(next, Ordering::SeqCst);
        // Observed, each op this cancel stops is said so now, so that a trace's replay shows it
        // cancelled from here on, as a live view does, rather than waiting until its turn.
        // An earlier cancel said so of the ops below `before`.
        if next > before && self.sink.is_some() {
            for op in self.users_ops_not_started_in(before..next) {
                self.emit_structural(|| EventKind::Cancelled { op });
            }
        }
    }

    /// The users' ops numbered in `numbers` that have not started, in number order, as their
    /// variables' queues hold them: what a cancel stops. A variable whose queue is locked now is
    /// passed over rather than waited for (a naive op running at once under its variables'
    /// locks, which nothing waits behind).
    pub(super) fn users_ops_not_started_in(&self, numbers: std::ops::Range<u64>) -> Vec<OpId> {
        let live: Vec<Arc<VarInner>> = lock(&self.vars)
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        let mut found = std::collections::BTreeSet::new();
        for var in &live {
            let Ok(state) = var.state.try_lock() else {
                continue;
            };
            for access in state.queue.entries() {
                let op = &access.op;
                if numbers.contains(&op.id.0)
                    && matches!(op.state(), OpState::Waiting | OpState::Ready)
                    && lock(&op.work).as_ref().is_some_and(Work::is_users)
                {
                    found.insert(op.id);
                }
            }
        }
        found.into_iter().collect()
    }

    /// See [`Engine::wait_all_or`](super::Engine::wait_all_or), without the simulator's part.
    pub(super) fn wait_all_or(&self, give_up: &dyn Fn() -> bool) -> bool {
        let mut idle = lock(&self.idle_lock);
        self.n_idle_waiters.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst); // pairs with `finish`'s, as in `wait_all`
        let mut finished = true;
        while self.n_unfinished.load(Ordering::SeqCst) > 0 {
            if give_up() {
                finished = false;
                break;
            }
            idle = wait_timeout(&self.idle_condvar, idle, crate::op::GIVE_UP_SLICE);
        }
        self.n_idle_waiters.fetch_sub(1, Ordering::SeqCst);
        finished
    }

    /// Waits until no op is unfinished (see [`Engine::wait_all`](super::Engine::wait_all)).
    pub(super) fn wait_all(&self) {
        let mut idle = lock(&self.idle_lock);
        self.n_idle_waiters.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        while self.n_unfinished.load(Ordering::SeqCst) > 0 {
            idle = wait(&self.idle_condvar, idle);
        }
        self.n_idle_waiters.fetch_sub(1, Ordering::SeqCst);
    }
}
