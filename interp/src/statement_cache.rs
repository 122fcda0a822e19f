//! Compiled statements kept at their place in the source, so that a statement run again (every
//! iteration of a loop) is pushed without resolving its names or compiling its plan again.
//!
//! An entry is valid while nothing it resolved can have changed: the runner bumps an epoch on
//! every change of a name's binding (a new name, a rebinding to another variable, `del`, a
//! function's frame entering or leaving, a graph's names published), and an entry holds the
//! epoch, device and priority it was compiled under. Once the epoch moved on, an entry that
//! kept the names it resolved ([`Dependency`]) is valid again if each still resolves to the
//! variable it did: so a function's body, whose frame is new at every call, is compiled at its
//! first call only while its names keep their variables (`a = f(a)` in a loop). Where they
//! resolve to other variables (a local made anew at every call, another call's arguments), the
//! runner pushes the kept plan over those instead ([`StatementCache::kept`],
//! [`StatementCache::replace_op`]), as long as they are alike: no two one that were two, and
//! the reverse. Statements
//! whose plan depends on more than bindings (loop counters, `clock()`, function calls, copies
//! between devices) are never stored: the runner compiles them every time.

use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry as MapEntry;

use dep_engine as engine;
use dep_grammar::Span;

use crate::compute::{ComputeOp, PushableOp};

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
    /// Every name the statement resolved, when those are all its plan depends on besides the
    /// device and priority; `None` when the epoch alone tells whether it is valid.
    dependencies: Option<Box<[Dependency]>>,
}

/// A name a kept statement resolved when it was compiled, and the variable of its op it
/// resolved to: the op may be pushed again while every one still resolves the same way.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Dependency {
    /// The name written at `name` (in the statement's source chunk) reads the op's input
    /// `input`.
    Reads { name: Span, input: usize },
    /// The name written at `name` is the op's output `output`, a variable of the scope's own.
    Writes { name: Span, output: usize },
    /// The op's single output is the caller's variable the function's value is returned into.
    ReturnsInto,
}

impl StatementCache {
    /// Notes that some name's binding changed: every entry compiled before is stale.
    pub(crate) fn invalidate(&mut self) {
        self.epoch += 1;
    }

    /// The op compiled for the statement at `key`, if it is valid as it is on `device` at
    /// `priority`: compiled under the bindings as they are.
    #[inline]
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

    /// Whether the op kept for the statement at `key` on `device` at `priority`, compiled
    /// under bindings that changed since, is valid under those of now: every dependency it
    /// kept still holds (`holds`, asked of each with the op). If so, [`Self::get`] finds it
    /// until the bindings change again.
    #[cold]
    pub(crate) fn holds_again(
        &mut self,
        key: StatementKey,
        device: engine::Device,
        priority: i32,
        holds: impl Fn(Dependency, &ComputeOp) -> bool,
    ) -> bool {
        let Some(entry) = self.entries.get_mut(&key) else {
            return false;
        };
        let valid = entry.device == device
            && entry.priority == priority
            && entry.dependencies.as_deref().is_some_and(|dependencies| {
                dependencies
                    .iter()
                    .all(|dependency| holds(*dependency, entry.op.op()))
            });
        if valid {
            entry.epoch = self.epoch;
        }
        valid
    }

    /// The op kept for the statement at `key` on `device` at `priority`, whatever the bindings
    /// it was compiled under, with the names it resolved: what a statement whose names now
    /// resolve to other variables is pushed again from, bound anew (see
    /// [`Self::replace_op`]). `None` when none is kept, or one whose validity the epoch alone
    /// tells.
    pub(crate) fn kept(
        &self,
        key: StatementKey,
        device: engine::Device,
        priority: i32,
    ) -> Option<(&PushableOp, &[Dependency])> {
        let entry = self
            .entries
            .get(&key)
            .filter(|entry| entry.device == device && entry.priority == priority)?;
        Some((&entry.op, entry.dependencies.as_deref()?))
    }

    /// Replaces the op kept for the statement at `key` with `op`, the same statement's plan over
    /// other variables, resolved from the same names under the bindings of `epoch`.
    pub(crate) fn replace_op(&mut self, key: StatementKey, epoch: u64, op: PushableOp) {
        if let Some(entry) = self.entries.get_mut(&key) {
            (entry.epoch, entry.op) = (epoch, op);
        }
    }

    /// The bindings' version now: take it before compiling a statement, and insert with it, so
    /// that a statement whose own assignment rebinds a name it read is stale at once.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Keeps `op`, compiled for the statement at `key` on `device` at `priority` under the
    /// bindings of `epoch`, with the names it resolved if those are all it depends on.
    pub(crate) fn insert(
        &mut self,
        key: StatementKey,
        epoch: u64,
        device: engine::Device,
        priority: i32,
        op: PushableOp,
        dependencies: Option<&[Dependency]>,
    ) {
        match self.entries.entry(key) {
            // A statement kept again (a function's body at each call, when its names moved on):
            // its dependencies' room is reused.
            MapEntry::Occupied(mut occupied) => {
                let entry = occupied.get_mut();
                (entry.epoch, entry.device, entry.priority, entry.op) =
                    (epoch, device, priority, op);
                match (&mut entry.dependencies, dependencies) {
                    (Some(kept), Some(new)) if kept.len() == new.len() => kept.copy_from_slice(new),
                    (kept, new) => *kept = new.map(Box::from),
                }
            }
            MapEntry::Vacant(vacant) => {
                vacant.insert(Entry {
                    epoch,
                    device,
                    priority,
                    op,
                    dependencies: dependencies.map(Box::from),
                });
            }
        }
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

    const CPU: engine::Device = engine::Device::Cpu;

    #[test]
    fn an_entry_without_dependencies_is_valid_until_a_binding_changes() {
        let mut cache = StatementCache::default();
        cache.insert((0, 4), cache.epoch(), CPU, 0, op(), None);
        assert!(cache.get((0, 4), CPU, 0).is_some());
        assert!(cache.get((1, 4), CPU, 0).is_none());
        cache.invalidate();
        assert!(cache.get((0, 4), CPU, 0).is_none());
        assert!(!cache.holds_again((0, 4), CPU, 0, |_, _| true));
        let stale = cache.epoch() - 1;
        cache.insert((0, 4), stale, CPU, 0, op(), None);
        assert!(
            cache.get((0, 4), CPU, 0).is_none(),
            "compiled under older bindings"
        );
    }

    #[test]
    fn an_entry_kept_with_dependencies_is_replaced_by_its_op_bound_anew() {
        let mut cache = StatementCache::default();
        let x = Dependency::Reads {
            name: Span::new(4, 5),
            input: 0,
        };
        cache.insert((0, 0), cache.epoch(), CPU, 0, op(), Some(&[x]));
        cache.insert((0, 9), cache.epoch(), CPU, 0, op(), None);
        cache.invalidate();
        assert!(
            cache.kept((0, 9), CPU, 0).is_none(),
            "valid by the epoch alone"
        );
        assert!(cache.kept((0, 0), engine::Device::Gpu(0), 0).is_none());
        let (_, dependencies) = cache.kept((0, 0), CPU, 0).expect("kept, though stale");
        assert_eq!(dependencies, [x]);
        assert!(cache.get((0, 0), CPU, 0).is_none());
        let bound_anew = op();
        let pushed = bound_anew.op() as *const ComputeOp;
        cache.replace_op((0, 0), cache.epoch(), bound_anew);
        let found = cache
            .get((0, 0), CPU, 0)
            .expect("valid under the bindings of now");
        assert_eq!(found.op() as *const ComputeOp, pushed);
        assert_eq!(cache.kept((0, 0), CPU, 0).unwrap().1, [x]);
    }

    #[test]
    fn an_entry_with_dependencies_is_valid_again_while_they_hold() {
        let mut cache = StatementCache::default();
        let x = Dependency::Reads {
            name: Span::new(4, 5),
            input: 0,
        };
        cache.insert(
            (0, 0),
            cache.epoch(),
            CPU,
            0,
            op(),
            Some(&[x, Dependency::ReturnsInto]),
        );
        cache.invalidate();
        assert!(cache.get((0, 0), CPU, 0).is_none());
        let asked = std::cell::RefCell::new(Vec::new());
        let held = cache.holds_again((0, 0), CPU, 0, |dependency, _| {
            asked.borrow_mut().push(dependency);
            dependency != Dependency::ReturnsInto
        });
        assert!(!held, "a dependency that no longer holds");
        assert_eq!(asked.take(), [x, Dependency::ReturnsInto]);
        assert!(cache.get((0, 0), CPU, 0).is_none());
        assert!(cache.holds_again((0, 0), CPU, 0, |_, _| true));
        // Valid as it is until the bindings change again.
        assert!(cache.get((0, 0), CPU, 0).is_some());
        cache.invalidate();
        assert!(cache.get((0, 0), CPU, 0).is_none());
        // Kept again with as many dependencies: the new ones replace the old.
        let y = Dependency::Reads {
            name: Span::new(8, 9),
            input: 0,
        };
        cache.insert((0, 0), cache.epoch(), CPU, 0, op(), Some(&[y, y]));
        cache.invalidate();
        let asked = std::cell::RefCell::new(Vec::new());
        assert!(cache.holds_again((0, 0), CPU, 0, |dependency, _| {
            asked.borrow_mut().push(dependency);
            true
        }));
        assert_eq!(asked.take(), [y, y]);
    }

    #[test]
    fn an_entry_serves_only_its_device_and_priority() {
        let mut cache = StatementCache::default();
        cache.insert((0, 0), cache.epoch(), CPU, 0, op(), Some(&[]));
        assert!(cache.get((0, 0), engine::Device::Gpu(0), 0).is_none());
        assert!(cache.get((0, 0), CPU, 5).is_none());
        cache.invalidate();
        assert!(!cache.holds_again((0, 0), engine::Device::Gpu(0), 0, |_, _| true));
        assert!(!cache.holds_again((0, 0), CPU, 5, |_, _| true));
        assert!(cache.holds_again((0, 0), CPU, 0, |_, _| true));
    }
}
