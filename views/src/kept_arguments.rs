//! What a trace writer keeps per op label to write a slice's arguments again without encoding
//! them again: the ops of one statement in a loop read and write the same variables, run on the
//! same device at the same priority and end in the same state, so the bytes of those arguments
//! (`reads` to `priority`) are the last slice's of the label, copied. Both trace formats keep
//! them ([`crate::trace`], [`crate::perfetto`]); the bytes are the same either way.

use std::sync::Arc;

use dep_engine::{Device, OpState};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::fold::OpSlice;

/// A slice's arguments from `reads` to `priority`, encoded, and what they were encoded from (the
/// variables' names by address: the fold hands out one `Arc` per variable, and this holds it, so
/// the address stays its own).
pub(crate) struct KeptArguments {
    reads: SmallVec<[Arc<str>; 4]>,
    writes: SmallVec<[Arc<str>; 4]>,
    state: OpState,
    device: Device,
    priority: i32,
    /// The encoded arguments.
    pub(crate) bytes: Vec<u8>,
}

impl KeptArguments {
    /// `slice`'s arguments, encoded as `bytes`.
    pub(crate) fn of(slice: &OpSlice<'_>, bytes: Vec<u8>) -> KeptArguments {
        KeptArguments {
            reads: slice.reads.iter().map(|name| Arc::clone(name)).collect(),
            writes: slice.writes.iter().map(|name| Arc::clone(name)).collect(),
            state: slice.state,
            device: slice.device,
            priority: slice.priority,
            bytes,
        }
    }

    /// Whether these are `slice`'s arguments.
    pub(crate) fn are_those_of(&self, slice: &OpSlice<'_>) -> bool {
        let same = |kept: &[Arc<str>], names: &[&Arc<str>]| {
            kept.len() == names.len()
                && kept
                    .iter()
                    .zip(names)
                    .all(|(kept, name)| Arc::ptr_eq(kept, name))
        };
        self.state == slice.state
            && self.device == slice.device
            && self.priority == slice.priority
            && same(&self.reads, slice.reads)
            && same(&self.writes, slice.writes)
    }
}

/// Something kept per op label, found by the label's address (the fold hands out one `Arc` per
/// label; the table holds it, so the address stays its own). It holds [`MAX_LABELS`] at most,
/// and starts again when full: an observed loop's ops may each have a label of their own (`A =
/// ones(8) * i i=41`), which would make it hold one per op of the run.
pub(crate) struct PerLabel<T> {
    index: FxHashMap<usize, usize>,
    entries: Vec<(Arc<str>, T)>,
}

/// The most labels a [`PerLabel`] holds.
pub(crate) const MAX_LABELS: usize = 4096;

impl<T> Default for PerLabel<T> {
    fn default() -> PerLabel<T> {
        PerLabel {
            index: FxHashMap::default(),
            entries: Vec::new(),
        }
    }
}

impl<T> PerLabel<T> {
    /// The entry of `label` (made by `make` on its first use), and whether it was just made.
    pub(crate) fn entry(&mut self, label: &Arc<str>, make: impl FnOnce() -> T) -> (usize, bool) {
        let address = Arc::as_ptr(label) as *const u8 as usize;
        if let Some(index) = self.index.get(&address) {
            return (*index, false);
        }
        if self.entries.len() >= MAX_LABELS {
            self.index.clear();
            self.entries.clear();
        }
        let index = self.entries.len();
        self.entries.push((label.clone(), make()));
        self.index.insert(address, index);
        (index, true)
    }

    /// Entry `index`, as [`PerLabel::entry`] gave it.
    pub(crate) fn get_mut(&mut self, index: usize) -> &mut T {
        &mut self.entries[index].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dep_engine::OpId;

    fn slice<'a>(label: &'a Arc<str>, reads: &'a [&'a Arc<str>], state: OpState) -> OpSlice<'a> {
        OpSlice {
            op: OpId(1),
            label,
            line: 1,
            reads,
            writes: &[],
            state,
            device: Device::Cpu,
            priority: 0,
            message: None,
            worker: 0,
            start_ns: 0,
            end_ns: 1,
        }
    }

    #[test]
    fn kept_arguments_are_those_of_the_same_names_state_device_and_priority() {
        let label: Arc<str> = Arc::from("y = x + 1");
        let x: Arc<str> = Arc::from("x");
        let other_x: Arc<str> = Arc::from("x");
        let reads = [&x];
        let kept = KeptArguments::of(&slice(&label, &reads, OpState::Done), vec![1]);
        assert!(kept.are_those_of(&slice(&label, &[&x], OpState::Done)));
        assert!(!kept.are_those_of(&slice(&label, &[&x], OpState::Failed)));
        assert!(!kept.are_those_of(&slice(&label, &[], OpState::Done)));
        // Another variable of the same name is another variable.
        assert!(!kept.are_those_of(&slice(&label, &[&other_x], OpState::Done)));
        let mut moved = slice(&label, &reads, OpState::Done);
        moved.device = Device::Gpu(0);
        assert!(!kept.are_those_of(&moved));
        moved.device = Device::Cpu;
        moved.priority = 3;
        assert!(!kept.are_those_of(&moved));
    }

    #[test]
    fn an_entry_is_made_once_per_label_by_address() {
        let mut table = PerLabel::default();
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("a"));
        assert_eq!(table.entry(&a, || 10), (0, true));
        assert_eq!(table.entry(&a, || 20), (0, false));
        assert_eq!(table.entry(&b, || 30), (1, true));
        *table.get_mut(0) += 1;
        assert_eq!(*table.get_mut(0), 11);
        assert_eq!(*table.get_mut(1), 30);
    }

    /// Labels of their own for every op (a loop counter's value in each) fill the table, which
    /// then starts again: it holds at most `MAX_LABELS`, whatever the run's length.
    #[test]
    fn a_table_full_of_labels_starts_again() {
        let mut table = PerLabel::default();
        let labels: Vec<Arc<str>> = (0..3 * MAX_LABELS)
            .map(|index| Arc::from(format!("A = A + i i={index}")))
            .collect();
        for (index, label) in labels.iter().enumerate() {
            let (entry, made) = table.entry(label, || index);
            assert!(made);
            assert_eq!(*table.get_mut(entry), index);
            assert!(table.entries.len() <= MAX_LABELS);
        }
        // The last label is still found as it was kept.
        let last = labels.last().unwrap();
        let (entry, made) = table.entry(last, || 0);
        assert!(!made);
        assert_eq!(*table.get_mut(entry), 3 * MAX_LABELS - 1);
    }
}
