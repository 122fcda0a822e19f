//! Ops pushed together, in order: what a recorded graph's replay pushes on every run.
//!
//! A batch is prepared once (its ops and the union of their variables, sorted by id: the order in
//! which a push locks them) and pushed again and again by reference ([`crate::Engine::push_batch`]).
//! Every op of a batch stays an op of its own: numbered, granted, run, reported and observed
//! exactly as if pushed alone, one after the other, with no push from another thread between
//! them. What a batch saves is per-push work that the replay can do once per batch: under the
//! naive policy the variables are locked once for the whole batch instead of once per op.

use crate::accesses::AccessSet;
use crate::op::OpBody;
use crate::sync::Arc;
use crate::{Device, SharedOp, Var};

/// One op of a batch: what [`SharedOp`] borrows, owned.
pub struct BatchOp {
    /// The label shown in views and errors.
    pub label: Arc<str>,
    /// The source line (0 when none).
    pub line: u32,
    /// Where it runs.
    pub device: Device,
    /// Its priority among ready ops.
    pub priority: i32,
    /// What it runs.
    pub body: Arc<dyn OpBody>,
    /// What it reads and writes.
    pub accesses: AccessSet,
}

impl BatchOp {
    /// The op as [`crate::Engine::push_shared`] takes it.
    pub(crate) fn as_shared(&self) -> SharedOp<'_> {
        SharedOp {
            label: &self.label,
            line: self.line,
            device: self.device,
            priority: self.priority,
            body: &self.body,
            accesses: &self.accesses,
        }
    }
}

/// Ops to push together, in order, prepared once (see the module's documentation).
pub struct OpBatch {
    pub(crate) ops: Vec<BatchOp>,
    /// Every variable the ops access, each once, in id order.
    pub(crate) vars: Vec<Var>,
    /// For each op, the index in `vars` of each entry of its accesses' `lock_order` (increasing,
    /// since both are in id order).
    pub(crate) var_indices: Vec<Box<[usize]>>,
}

impl OpBatch {
    /// The batch of `ops`, pushed in this order.
    pub fn new(ops: Vec<BatchOp>) -> OpBatch {
        let mut vars: Vec<Var> = ops
            .iter()
            .flat_map(|op| op.accesses.reads().iter().chain(op.accesses.writes()))
            .cloned()
            .collect();
        vars.sort_unstable_by_key(Var::id);
        vars.dedup_by_key(|var| var.id());
        let var_indices = ops
            .iter()
            .map(|op| {
                op.accesses
                    .lock_order
                    .iter()
                    .map(|&access| {
                        let id = op.accesses.var_at(access).id();
                        vars.binary_search_by_key(&id, Var::id)
                            .expect("every access's variable is in the union")
                    })
                    .collect()
            })
            .collect();
        OpBatch {
            ops,
            vars,
            var_indices,
        }
    }

    /// How many ops the batch pushes.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch pushes nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::{Engine, EngineConfig, OpContext, Policy};

    /// An op body that appends `name` to a shared log, or fails when `fail` is set.
    struct Logged {
        name: &'static str,
        log: Arc<Mutex<Vec<&'static str>>>,
        fail: bool,
    }

    impl OpBody for Logged {
        fn run(&self, _ctx: &OpContext) -> Result<(), String> {
            self.log.lock().unwrap().push(self.name);
            if self.fail {
                return Err(format!("{} failed", self.name));
            }
            Ok(())
        }
    }

    fn op(
        name: &'static str,
        log: &Arc<Mutex<Vec<&'static str>>>,
        fail: bool,
        reads: &[&Var],
        writes: &[&Var],
    ) -> BatchOp {
        BatchOp {
            label: Arc::from(name),
            line: 1,
            device: Device::Cpu,
            priority: 0,
            body: Arc::new(Logged {
                name,
                log: log.clone(),
                fail,
            }),
            accesses: AccessSet::new(
                reads.iter().map(|var| (*var).clone()).collect(),
                writes.iter().map(|var| (*var).clone()).collect(),
            ),
        }
    }

    #[test]
    fn the_union_is_sorted_and_each_op_indexes_it_in_lock_order() {
        let engine = Engine::new(EngineConfig::default());
        let (a, b, c) = (
            engine.new_var("a"),
            engine.new_var("b"),
            engine.new_var("c"),
        );
        let log = Arc::new(Mutex::new(Vec::new()));
        let batch = OpBatch::new(vec![
            op("c = a + b", &log, false, &[&b, &a], &[&c]),
            op("a = c", &log, false, &[&c], &[&a]),
        ]);
        let ids: Vec<_> = batch.vars.iter().map(Var::id).collect();
        assert_eq!(ids, vec![a.id(), b.id(), c.id()]);
        assert_eq!(&*batch.var_indices[0], &[0, 1, 2]);
        assert_eq!(&*batch.var_indices[1], &[0, 2]);
    }

    /// Every policy runs a batch's ops in order, skips the readers of a failed op's output and
    /// numbers the ops as pushes one by one would.
    #[test]
    fn a_batch_runs_as_its_ops_pushed_one_by_one() {
        for policy in [Policy::Naive, Policy::Threaded, Policy::PerDevice] {
            let engine = Engine::new(EngineConfig::with_policy(policy));
            let (a, b, c, d) = (
                engine.new_var("a"),
                engine.new_var("b"),
                engine.new_var("c"),
                engine.new_var("d"),
            );
            let log = Arc::new(Mutex::new(Vec::new()));
            let batch = OpBatch::new(vec![
                op("b = a", &log, false, &[&a], &[&b]),
                op("c = b", &log, true, &[&b], &[&c]),
                op("d = c", &log, false, &[&c], &[&d]),
                op("b = b", &log, false, &[&b], &[&b]),
            ]);
            let first = engine.push_batch(&batch).unwrap();
            let second = engine.push_batch(&batch).unwrap();
            engine.wait_all();
            assert_eq!(second.0, first.0 + 4, "{policy:?}");
            assert_eq!(
                *log.lock().unwrap(),
                vec!["b = a", "c = b", "b = b", "b = a", "c = b", "b = b"],
                "{policy:?}"
            );
            assert_eq!(c.error().unwrap().message, "c = b failed", "{policy:?}");
            assert_eq!(d.error().unwrap().message, "c = b failed", "{policy:?}");
            assert!(a.error().is_none() && b.error().is_none(), "{policy:?}");
            let versions = (a.version(), b.version(), c.version(), d.version());
            assert_eq!(versions, (0, 4, 2, 2), "{policy:?}");
            assert_eq!(engine.take_failures().len(), 2, "{policy:?}");
        }
    }

    /// Under the naive policy a batch with an op that must wait (an asynchronous op still holds
    /// its variable) is pushed op by op: the ops before it run at once, it runs once the variable
    /// is free.
    #[test]
    fn a_naive_batch_waits_behind_an_unfinished_op() {
        let engine = Engine::new(EngineConfig::with_policy(Policy::Naive));
        let (a, b) = (engine.new_var("a"), engine.new_var("b"));
        let (sender, receiver) = std::sync::mpsc::channel();
        engine.push(
            crate::OpSpec::new_async("a = later", move |_ctx, done| {
                sender.send(done).unwrap();
            })
            .writes(&[a.clone()]),
        );
        let log = Arc::new(Mutex::new(Vec::new()));
        let batch = OpBatch::new(vec![
            op("b = 1", &log, false, &[], &[&b]),
            op("b = a", &log, false, &[&a], &[&b]),
        ]);
        engine.push_batch(&batch);
        assert_eq!(*log.lock().unwrap(), vec!["b = 1"], "b = a waits for a");
        receiver.recv().unwrap().complete(Ok(()));
        engine.wait_all();
        assert_eq!(*log.lock().unwrap(), vec!["b = 1", "b = a"]);
    }
}
