//! What running an op needs to know of its inputs, worked out once when the op is made: how
//! often its plan reads each, which it overwrites, whether its output's old buffer is dead.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::plan::Plan;
use crate::slot::Slot;
use crate::tensor;

/// What running an op needs to know of its inputs, worked out once when the op is made rather
/// than on every run of it.
#[derive(Clone, Debug, Default)]
pub(crate) struct InputUses {
    /// How many times the plan reads each input.
    uses: SmallVec<[u32; 8]>,
    /// Whether each input is an output the op overwrites (not `A op= ...`): its old value is
    /// dead once read, so it is taken out of its slot and may be updated in place.
    overwritten: SmallVec<[bool; 8]>,
    /// Whether the op writes one output that it does not read: its old value is dead, and its
    /// buffer may take the result.
    output_unread: bool,
}

impl InputUses {
    /// The uses of `inputs` by `plan`, which writes `outputs` (in place when `update`).
    pub(crate) fn of(
        plan: &Plan,
        inputs: &[Arc<Slot>],
        outputs: &[Arc<Slot>],
        update: Option<tensor::BinaryOp>,
    ) -> InputUses {
        let mut uses: SmallVec<[u32; 8]> = SmallVec::from_elem(0, inputs.len());
        plan.count_uses(&mut uses);
        let is_output = |slot: &Arc<Slot>| outputs.iter().any(|output| Arc::ptr_eq(slot, output));
        InputUses {
            uses,
            overwritten: inputs
                .iter()
                .map(|slot| update.is_none() && is_output(slot))
                .collect(),
            output_unread: match outputs {
                [output] => inputs.iter().all(|input| !Arc::ptr_eq(input, output)),
                _ => false,
            },
        }
    }

    /// How many times the plan reads each input.
    pub(crate) fn uses(&self) -> &[u32] {
        &self.uses
    }

    /// Whether each input is an output the op overwrites.
    pub(crate) fn overwritten(&self) -> &[bool] {
        &self.overwritten
    }

    /// Whether input `index` is an output the op overwrites (taken out of its slot when read).
    pub(crate) fn is_overwritten(&self, index: usize) -> bool {
        self.overwritten[index]
    }

    /// Whether the op writes one output that it does not read (its old buffer may take the
    /// result).
    pub(crate) fn output_unread(&self) -> bool {
        self.output_unread
    }
}
