//! Compiled statements kept at their place in the source, so that a statement run again (every
//! iteration of a loop) is pushed without resolving its names or compiling its plan again.
//!
//! An entry is valid while nothing it resolved can have changed: the runner bumps an epoch on
//! every change of a name's binding (a new name, a rebinding to another variable, `del`, a
//! function's frame entering or leaving, a graph's names published), and an entry holds the
//! epoch, device and priority it was compiled under. Statements whose plan depends on more
//! than bindings (loop counters, `clock()`, function calls, copies between devices) are never
//! stored: the runner compiles them every time.

use rustc_hash::FxHashMap;

use dep_engine as engine;

use crate::compute::PushableOp;

/// Where a statement is: the source chunk it was parsed from and the byte its span starts at.
pub(crate) type StatementKey = (usize, usize);

/// The compiled statements of one run, by place.
#[derive(Default)]
pub(crate) struct StatementCache {
    entries: FxHashMap<StatementKey, Entry>,
    epoch: u64,
}

/// One compiled statement and what it was compiled under.
struct Entry {
    epoch: u64,
    device: engine::Device,
    priority: i32,
    op: PushableOp,
}

impl StatementCache {
    /// Notes that some name's binding changed: every entry compiled before is stale.
    pub(crate) fn invalidate(&mut self) {
        self.epoch += 1;
    }

    /// The op compiled for the statement at `key`, if it is still valid on `device` at
    /// `priority`.
    pub(crate) fn get(
        &self,
        key: StatementKey,
        device: engine::Device,
        priority: i32,
    ) -> Option<&PushableOp> {
        self.entries
            .get(&key)
            .filter(|entry| {
                entry.epoch == self.epoch && entry.device == device && entry.priority == priority
            })
            .map(|entry| &entry.op)
    }

    /// The bindings' version now: take it before compiling a statement, and insert with it, so
    /// that a statement whose own assignment rebinds a name it read is stale at once.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Keeps `op`, compiled for the statement at `key` on `device` at `priority` under the
    /// bindings of `epoch`.
    pub(crate) fn insert(
        &mut self,
        key: StatementKey,
        epoch: u64,
        device: engine::Device,
        priority: i32,
        op: PushableOp,
    ) {
        self.entries.insert(
            key,
            Entry {
                epoch,
                device,
                priority,
                op,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::ComputeOp;
    use crate::plan::Plan;
    use std::sync::Arc;

    fn op() -> PushableOp {
        PushableOp::new(ComputeOp {
            label: Arc::from("x = 1"),
            line: 1,
            device: engine::Device::Cpu,
            priority: 0,
            plan: Arc::new(Plan::Input(0)),
            inputs: Vec::new(),
            outputs: Vec::new(),
            update: None,
            rng: None,
            input_uses: Default::default(),
            one_operator: None,
        })
    }

    #[test]
    fn an_entry_is_valid_until_a_binding_changes() {
        let mut cache = StatementCache::default();
        cache.insert((0, 4), cache.epoch(), engine::Device::Cpu, 0, op());
        assert!(cache.get((0, 4), engine::Device::Cpu, 0).is_some());
        assert!(cache.get((1, 4), engine::Device::Cpu, 0).is_none());
        cache.invalidate();
        assert!(cache.get((0, 4), engine::Device::Cpu, 0).is_none());
        let stale = cache.epoch() - 1;
        cache.insert((0, 4), stale, engine::Device::Cpu, 0, op());
        assert!(
            cache.get((0, 4), engine::Device::Cpu, 0).is_none(),
            "compiled under older bindings"
        );
    }

    #[test]
    fn an_entry_serves_only_its_device_and_priority() {
        let mut cache = StatementCache::default();
        cache.insert((0, 0), cache.epoch(), engine::Device::Cpu, 0, op());
        assert!(cache.get((0, 0), engine::Device::Gpu(0), 0).is_none());
        assert!(cache.get((0, 0), engine::Device::Cpu, 5).is_none());
    }
}
