//! Plans: a statement's expression compiled for one push, evaluated later inside its op.
//!
//! Compiling resolves every name (to a read of an input slot, or to the value of a loop counter)
//! at push time, so the op closure owns everything it needs and the engine can run it on any
//! thread at any later time.

use crate::builtins::{self, Arg, Builtin};
use crate::tensor::{self, BinaryOp, IndexSpec, Tensor, TensorError, TensorRng, UnaryOp};

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

/// What a plan evaluates against: the op's input values and, for random ops, the generator.
///
/// An input is moved out at its last use (`remaining_uses` reaches zero) instead of cloned, so
/// that a value nobody else holds (an intermediate, or the old value of the variable the op
/// overwrites) is updated in place: `c = c + b` and `tanh(x) * 0.5 + 1` allocate at most once.
pub(crate) struct EvalContext<'a> {
    pub(crate) inputs: &'a mut [Option<Tensor>],
    pub(crate) remaining_uses: &'a mut [u32],
    pub(crate) rng: Option<&'a mut TensorRng>,
}

impl EvalContext<'_> {
    fn input(&mut self, index: usize) -> Result<Tensor, TensorError> {
        self.remaining_uses[index] = self.remaining_uses[index].saturating_sub(1);
        let value = if self.remaining_uses[index] == 0 {
            self.inputs[index].take()
        } else {
            self.inputs[index].clone()
        };
        value.ok_or_else(|| TensorError::new("an input was used more often than counted"))
    }
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

    /// Evaluates to one tensor.
    pub(crate) fn eval(&self, ctx: &mut EvalContext<'_>) -> Result<Tensor, TensorError> {
        let value = self.eval_node(ctx)?;
        if matches!(self, Plan::Unary(..) | Plan::Binary(..)) {
            report_flops(value.len() as f64);
        }
        Ok(value)
    }

    fn eval_node(&self, ctx: &mut EvalContext<'_>) -> Result<Tensor, TensorError> {
        match self {
            Plan::Const(tensor) => Ok(tensor.clone()),
            Plan::Str(text) => Err(TensorError::new(format!(
                "the string {text:?} is not a tensor"
            ))),
            Plan::Input(index) => ctx.input(*index),
            Plan::Unary(op, operand) => {
                let mut value = operand.eval(ctx)?;
                if value.is_unique() {
                    tensor::unary_inplace(*op, &mut value);
                    return Ok(value);
                }
                tensor::unary(*op, &value)
            }
            Plan::Binary(op, lhs, rhs) => {
                let mut lhs = lhs.eval(ctx)?;
                let rhs = rhs.eval(ctx)?;
                if lhs.is_unique() && tensor::shape::broadcasts_to(rhs.shape(), lhs.shape()) {
                    tensor::binary_inplace(&mut lhs, *op, &rhs)?;
                    return Ok(lhs);
                }
                tensor::binary(&lhs, *op, &rhs)
            }
            Plan::Matmul(lhs, rhs) => {
                let lhs = lhs.eval(ctx)?;
                let rhs = rhs.eval(ctx)?;
                let inner = lhs.shape().last().copied().unwrap_or(1) as f64;
                let result = tensor::matmul(&lhs, &rhs)?;
                report_flops(2.0 * inner * result.len() as f64);
                Ok(result)
            }
            Plan::Call(builtin, _) if builtin.is_multi() => Err(TensorError::new(format!(
                "{} gives several values: assign them to several names",
                builtins::name_of(*builtin)
            ))),
            Plan::Call(..) => Ok(self.eval_multi(ctx)?.remove(0)),
            Plan::Index(base, items) => {
                let base = base.eval(ctx)?;
                let mut specs = Vec::with_capacity(items.len());
                for item in items {
                    specs.push(match item {
                        PlanIndex::Single(plan) => {
                            IndexSpec::Single(builtins::whole_number(&plan.eval(ctx)?, "an index")?)
                        }
                        PlanIndex::Slice(start, end) => IndexSpec::Slice {
                            start: start
                                .as_ref()
                                .map(|plan| {
                                    builtins::whole_number(&plan.eval(ctx)?, "a slice bound")
                                })
                                .transpose()?,
                            end: end
                                .as_ref()
                                .map(|plan| {
                                    builtins::whole_number(&plan.eval(ctx)?, "a slice bound")
                                })
                                .transpose()?,
                        },
                    });
                }
                tensor::index(&base, &specs)
            }
            // Values live in host memory; on the simulated engine the copy's cost is its bytes
            // over the link the op runs on.
            Plan::CopyTo(value, _) => value.eval(ctx),
            Plan::List(items) => {
                let values = items
                    .iter()
                    .map(|item| item.eval(ctx))
                    .collect::<Result<Vec<_>, _>>()?;
                stack(&values)
            }
        }
    }

    /// Evaluates to one or several tensors (several only for a multi-result builtin).
    pub(crate) fn eval_multi(&self, ctx: &mut EvalContext<'_>) -> Result<Vec<Tensor>, TensorError> {
        match self {
            Plan::Call(builtin, args) => {
                let mut values = Vec::with_capacity(args.len());
                for arg in args {
                    values.push(match arg {
                        Plan::Str(text) => Arg::Str(text.clone()),
                        plan => Arg::Tensor(plan.eval(ctx)?),
                    });
                }
                let rng = if builtin.is_random() {
                    ctx.rng.as_deref_mut()
                } else {
                    None
                };
                builtins::call(*builtin, &values, rng)
            }
            plan => Ok(vec![plan.eval(ctx)?]),
        }
    }
}

/// Counts floating-point work for the simulated engine's cost model (nothing otherwise).
fn report_flops(flops: f64) {
    dep_engine::sim::report_cost(dep_engine::sim::Cost {
        flops,
        ..Default::default()
    });
}

/// Stacks equal-shaped tensors along a new first axis (tensor literals).
fn stack(values: &[Tensor]) -> Result<Tensor, TensorError> {
    let Some(first) = values.first() else {
        return Tensor::from_vec(vec![0], Vec::new());
    };
    let mut data = tensor::shape::alloc(first.len() * values.len())?;
    for value in values {
        if value.shape() != first.shape() {
            return Err(TensorError::new(format!(
                "the elements of a tensor literal must have one shape, found {} and {}",
                tensor::shape::fmt_shape(first.shape()),
                tensor::shape::fmt_shape(value.shape())
            )));
        }
        data.extend_from_slice(value.data());
    }
    let mut shape = vec![values.len()];
    shape.extend_from_slice(first.shape());
    Tensor::from_vec(shape, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_read_once_is_moved_and_updated_in_place() {
        let shared = Tensor::from_vec(vec![2], vec![1.0, 2.0]).unwrap();
        let plan = Plan::Binary(
            BinaryOp::Add,
            Box::new(Plan::Input(0)),
            Box::new(Plan::Const(Tensor::scalar(1.0))),
        );
        let mut uses = vec![0];
        plan.count_uses(&mut uses);
        assert_eq!(uses, vec![1]);
        let mut inputs = vec![Some(shared.clone())];
        let value = plan
            .eval(&mut EvalContext {
                inputs: &mut inputs,
                remaining_uses: &mut uses,
                rng: None,
            })
            .unwrap();
        assert_eq!(value.data(), &[2.0, 3.0]);
        assert_eq!(
            shared.data(),
            &[1.0, 2.0],
            "a value another holder shares is never changed"
        );
        let mut inputs = vec![Some(Tensor::from_vec(vec![2], vec![1.0, 2.0]).unwrap())];
        let buffer = inputs[0].as_ref().unwrap().data().as_ptr();
        let value = plan
            .eval(&mut EvalContext {
                inputs: &mut inputs,
                remaining_uses: &mut [1],
                rng: None,
            })
            .unwrap();
        assert_eq!(
            value.data().as_ptr(),
            buffer,
            "a value nobody else holds is updated in place"
        );
    }

    #[test]
    fn literals_stack_and_reject_ragged_rows() {
        let row = |a: f32, b: f32| {
            Plan::List(vec![
                Plan::Const(Tensor::scalar(a)),
                Plan::Const(Tensor::scalar(b)),
            ])
        };
        let plan = Plan::List(vec![row(1.0, 2.0), row(3.0, 4.0)]);
        let value = plan
            .eval(&mut EvalContext {
                inputs: &mut [],
                remaining_uses: &mut [],
                rng: None,
            })
            .unwrap();
        assert_eq!(value.shape(), &[2, 2]);
        assert_eq!(value.data(), &[1.0, 2.0, 3.0, 4.0]);
        let ragged = Plan::List(vec![row(1.0, 2.0), Plan::Const(Tensor::scalar(3.0))]);
        let error = ragged
            .eval(&mut EvalContext {
                inputs: &mut [],
                remaining_uses: &mut [],
                rng: None,
            })
            .unwrap_err();
        assert_eq!(
            error.message(),
            "the elements of a tensor literal must have one shape, found [2] and []"
        );
    }
}
