//! Snapshots: a consistent picture of every variable's queue and every unfinished op, with what
//! each waiting access waits behind.

use super::{Shared, Var, VarId, VarInner};
use crate::op::{OpId, OpRef, OpState, Work};
use crate::snapshot::{AccessSnapshot, Blocker, OpSnapshot, Snapshot, VarSnapshot};
use crate::sync::{lock, Arc, Ordering, Weak};
use std::collections::BTreeMap;

impl Shared {
    /// Every live variable's queue and every unfinished op, with what each waiting access
    /// waits behind; from now on observed ops take the queues, where snapshots see them.
    pub(super) fn snapshot(&self) -> Snapshot {
        self.snapshots_taken.store(true, Ordering::Relaxed);
        let time_ns = self.now_ns();
        let live: Vec<Arc<VarInner>> = {
            let mut vars = lock(&self.vars);
            vars.retain(|_, weak| weak.strong_count() > 0);
            vars.values().filter_map(Weak::upgrade).collect()
        };
        // Each queue is read under its own variable's lock, one after the other, and the ops'
        // states after every queue: by then an op may have gone further than a queue read
        // earlier says. The queues are brought up to the moment the states were read, so that
        // a snapshot never contradicts itself: a finished op's accesses are left out, an access
        // of an op that is ready or running is granted, and only a waiting op waits behind
        // anything.
        // Every op met in a queue, by id: its index in `refs`, where the op is held.
        let mut index: BTreeMap<OpId, usize> = BTreeMap::new();
        let mut refs: Vec<OpRef> = Vec::new();
        // Each variable's queue: (its op's index, whether it writes, whether it is granted).
        let mut queues: Vec<Vec<(usize, bool, bool)>> = Vec::with_capacity(live.len());
        let mut vars = Vec::with_capacity(live.len());
        for var in &live {
            let state = lock(&var.state);
            let mut queue = Vec::new();
            for access in state.queue.entries() {
                let op = *index.entry(access.op.id).or_insert_with(|| {
                    refs.push(access.op.clone());
                    refs.len() - 1
                });
                queue.push((op, access.write, access.granted));
            }
            queues.push(queue);
            vars.push(VarSnapshot {
                id: var.id,
                name: var.name.clone(),
                version: state.version,
                error: state.error.clone(),
                queue: Vec::new(),
            });
        }
        // Each op's state (read once), and as the snapshot shows it.
        let states: Vec<(OpState, OpState)> = refs
            .iter()
            .map(|op| {
                let state = op.state();
                (state, self.shown_state(op, state))
            })
            .collect();
        let mut waits: Vec<Vec<Blocker>> = vec![Vec::new(); refs.len()];
        for (var, queue) in vars.iter_mut().zip(queues) {
            let (indices, queue): (Vec<usize>, Vec<AccessSnapshot>) = queue
                .into_iter()
                .filter(|(op, _, _)| !states[*op].0.is_finished())
                .map(|(op, write, granted)| {
                    let active = matches!(states[op].0, OpState::Ready | OpState::Running);
                    let access = AccessSnapshot {
                        op: refs[op].id,
                        write,
                        granted: granted || active,
                    };
                    (op, access)
                })
                .unzip();
            for (at, blocker) in queue_blockers(var.id, &queue) {
                let op = indices[at];
                if states[op].1 == OpState::Waiting {
                    waits[op].push(blocker);
                }
            }
            var.queue = queue;
        }
        let ops = index
            .into_values()
            .map(|at| {
                let op = &refs[at];
                OpSnapshot {
                    id: op.id,
                    label: op.label.clone(),
                    line: op.line,
                    state: states[at].1,
                    device: op.device,
                    priority: op.priority,
                    worker: op.worker(),
                    reads: op.accesses.reads.iter().map(Var::id).collect(),
                    writes: op.accesses.writes.iter().map(Var::id).collect(),
                    waits_on: std::mem::take(&mut waits[at]),
                }
            })
            .collect();
        Snapshot { time_ns, vars, ops }
    }

    /// An op's state as a snapshot shows it: an op cancelled before it started stays in its
    /// queues until its turn comes (then it finishes at once, having run nothing), and is shown
    /// cancelled from the cancel on.
    pub(super) fn shown_state(&self, op: &OpRef, state: OpState) -> OpState {
        if matches!(state, OpState::Waiting | OpState::Ready)
            && self.is_cancelled(op.id)
            && lock(&op.work).as_ref().is_some_and(Work::is_users)
        {
            OpState::Cancelled
        } else {
            state
        }
    }
}

/// What each access of `queue` (of variable `var`) not yet granted waits behind, by the
/// access's place in the queue: a write behind the access just ahead of it, a read behind the
/// last write ahead of it.
fn queue_blockers(var: VarId, queue: &[AccessSnapshot]) -> Vec<(usize, Blocker)> {
    let mut found = Vec::new();
    let mut previous: Option<(OpId, bool)> = None;
    let mut last_write: Option<OpId> = None;
    for (at, access) in queue.iter().enumerate() {
        if !access.granted {
            let behind = if access.write {
                previous
            } else {
                last_write.map(|op| (op, true))
            };
            if let Some((behind, behind_writes)) = behind {
                found.push((
                    at,
                    Blocker {
                        var,
                        behind,
                        behind_writes,
                    },
                ));
            }
        }
        if access.write {
            last_write = Some(access.op);
        }
        previous = Some((access.op, access.write));
    }
    found
}
