//! Plans: a statement's expression compiled for one push, evaluated later inside its op (by
//! `evaluate.rs`, on the host or a GPU).
//!
//! Compiling resolves every name (to a read of an input slot, or to the value of a loop counter)
//! at push time, so the op closure owns everything it needs and the engine can run it on any
//! thread at any later time.

use crate::builtins::Builtin;
use crate::tensor::{BinaryOp, Tensor, UnaryOp};

/// A compiled expression.
pub(crate) enum Plan {
    /// A constant (numbers, loop counters).
    Const(Tensor),
    /// A string literal (paths for `load`).
    Str(String),
    /// The value of the op's `n`th input.
    Input(usize),
    /// `-x` and friends.
    Unary(UnaryOp, Box<Plan>),
    /// `a + b` and friends; `@` is `Matmul`.
    Binary(BinaryOp, Box<Plan>, Box<Plan>),
    /// `a @ b`.
    Matmul(Box<Plan>, Box<Plan>),
    /// A builtin call.
    Call(Builtin, Vec<Plan>),
    /// `x[...]`.
    Index(Box<Plan>, Vec<PlanIndex>),
    /// A tensor literal `[a, b, ...]`: the elements stacked along a new first axis.
    List(Vec<Plan>),
    /// `to(x, device)`: the value of `x`, copied to `device` (the op runs on the link).
    CopyTo(Box<Plan>, dep_engine::Device),
}

/// One index item of a compiled index expression.
pub(crate) enum PlanIndex {
    Single(Plan),
    Slice(Option<Plan>, Option<Plan>),
}

impl Plan {
    /// Whether evaluating the plan draws random numbers.
    pub(crate) fn uses_rng(&self) -> bool {
        match self {
            Plan::Const(_) | Plan::Str(_) | Plan::Input(_) => false,
            Plan::Unary(_, operand) => operand.uses_rng(),
            Plan::Binary(_, lhs, rhs) | Plan::Matmul(lhs, rhs) => lhs.uses_rng() || rhs.uses_rng(),
            Plan::Call(builtin, args) => builtin.is_random() || args.iter().any(Plan::uses_rng),
            Plan::Index(base, items) => {
                base.uses_rng()
                    || items.iter().any(|item| match item {
                        PlanIndex::Single(plan) => plan.uses_rng(),
                        PlanIndex::Slice(start, end) => {
                            start.as_ref().is_some_and(Plan::uses_rng)
                                || end.as_ref().is_some_and(Plan::uses_rng)
                        }
                    })
            }
            Plan::List(items) => items.iter().any(Plan::uses_rng),
            Plan::CopyTo(value, _) => value.uses_rng(),
        }
    }

    /// Counts how many times the plan reads each input.
    pub(crate) fn count_uses(&self, uses: &mut [u32]) {
        match self {
            Plan::Const(_) | Plan::Str(_) => {}
            Plan::Input(index) => uses[*index] += 1,
            Plan::Unary(_, operand) | Plan::CopyTo(operand, _) => operand.count_uses(uses),
            Plan::Binary(_, lhs, rhs) | Plan::Matmul(lhs, rhs) => {
                lhs.count_uses(uses);
                rhs.count_uses(uses);
            }
            Plan::Call(_, args) | Plan::List(args) => {
                args.iter().for_each(|arg| arg.count_uses(uses))
            }
            Plan::Index(base, items) => {
                base.count_uses(uses);
                for item in items {
                    match item {
                        PlanIndex::Single(plan) => plan.count_uses(uses),
                        PlanIndex::Slice(start, end) => {
                            start
                                .iter()
                                .chain(end)
                                .for_each(|plan| plan.count_uses(uses));
                        }
                    }
                }
            }
        }
    }

    /// A static estimate of the plan's time in microseconds, for critical-path priorities:
    /// `work(ms)` with a constant time takes it; anything else counts one microsecond.
    pub(crate) fn estimated_us(&self) -> f64 {
        match self {
            Plan::Call(Builtin::Work, args) => match args.first() {
                Some(Plan::Const(ms)) => ms.to_scalar().map_or(1.0, |ms| f64::from(ms) * 1e3),
                _ => 1.0,
            },
            Plan::CopyTo(value, _) => value.estimated_us(),
            _ => 1.0,
        }
    }

    /// The device a `to(x, device)` plan copies to.
    pub(crate) fn copy_to(&self) -> Option<dep_engine::Device> {
        match self {
            Plan::CopyTo(_, device) => Some(*device),
            _ => None,
        }
    }

    /// Whether the plan gives several values (a multi-result builtin at the top).
    pub(crate) fn is_multi(&self) -> bool {
        matches!(self, Plan::Call(builtin, _) if builtin.is_multi())
    }
}
