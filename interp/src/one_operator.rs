//! The one-operator fast path: a statement whose right side is a single elementwise operator
//! over the op's inputs and constants (`c = c + b`, `y = x * 0.5`, `h = relu(z)`), the commonest
//! statement in a loop, runs straight on its inputs' values, without the plan evaluator and its
//! bookkeeping (the values' list, the uses left, the walk).
//!
//! It computes with the kernels the evaluator's host backend calls
//! ([`tensor::binary_owned`], [`tensor::unary_owned`]) on the same values, taken or read from
//! their slots in the same order, so its results, the buffers it reuses and its errors are the
//! evaluator's.

use std::sync::Arc;

use crate::builtins::Builtin;
use crate::input_uses::InputUses;
use crate::plan::Plan;
use crate::slot::Slot;
use crate::tensor::{self, BinaryOp, Tensor, UnaryOp};

/// A plan that is one elementwise operator over inputs and constants.
#[derive(Clone, Debug)]
pub(crate) enum OneOperator {
    /// `a op b`.
    Binary(BinaryOp, Operand, Operand),
    /// `op(x)` of input `x` (`-x`, `relu(x)`).
    Unary(UnaryOp, usize),
}

/// An operand of a [`OneOperator`].
#[derive(Clone, Debug)]
pub(crate) enum Operand {
    /// The op's `n`th input.
    Input(usize),
    /// A constant.
    Const(Tensor),
}

impl Operand {
    fn of(plan: &Plan) -> Option<Operand> {
        match plan {
            Plan::Input(index) => Some(Operand::Input(*index)),
            Plan::Const(value) => Some(Operand::Const(value.clone())),
            _ => None,
        }
    }
}

impl OneOperator {
    /// `plan`, which reads `n_inputs` inputs, as one operator over every one of them and
    /// constants, if it is one (a constant op constant is left to the evaluator: it reads no
    /// input).
    pub(crate) fn of(plan: &Plan, n_inputs: usize) -> Option<OneOperator> {
        let one = match plan {
            Plan::Binary(op, lhs, rhs) => {
                OneOperator::Binary(*op, Operand::of(lhs)?, Operand::of(rhs)?)
            }
            Plan::Unary(op, operand) => match **operand {
                Plan::Input(index) => OneOperator::Unary(*op, index),
                _ => return None,
            },
            // `relu(z)`, `exp(x)`: the evaluator runs the same kernel on the argument's value.
            Plan::Call(Builtin::Unary(op), args) => match args.as_slice() {
                [Plan::Input(index)] => OneOperator::Unary(*op, *index),
                _ => return None,
            },
            _ => return None,
        };
        let reads_every_input = match &one {
            OneOperator::Unary(_, index) => n_inputs == 1 && *index == 0,
            OneOperator::Binary(_, Operand::Input(i), Operand::Input(j)) => {
                let (low, high) = ((*i).min(*j), (*i).max(*j));
                low == 0 && high < n_inputs && n_inputs == 1 + usize::from(low != high)
            }
            OneOperator::Binary(_, Operand::Input(index), Operand::Const(_))
            | OneOperator::Binary(_, Operand::Const(_), Operand::Input(index)) => {
                n_inputs == 1 && *index == 0
            }
            OneOperator::Binary(_, Operand::Const(_), Operand::Const(_)) => false,
        };
        reads_every_input.then_some(one)
    }

    /// Its constant operands.
    pub(crate) fn constants(&self) -> impl Iterator<Item = &Tensor> {
        let operands = match self {
            OneOperator::Binary(_, lhs, rhs) => [Some(lhs), Some(rhs)],
            OneOperator::Unary(..) => [None, None],
        };
        operands
            .into_iter()
            .flatten()
            .filter_map(|operand| match operand {
                Operand::Const(value) => Some(value),
                Operand::Input(_) => None,
            })
    }

    /// Computes the operator over `inputs` into `output`, as the op's plan would: an input the
    /// op overwrites is taken out of its slot (so that its buffer may take the result), the
    /// others are read, and the old buffer of an output the op does not read may take the
    /// result (`uses` says which).
    pub(crate) fn run(
        &self,
        inputs: &[Arc<Slot>],
        output: &Slot,
        uses: &InputUses,
    ) -> Result<(), String> {
        if let Some(done) = self.update_where_it_lies(inputs, output, uses) {
            return done;
        }
        if uses.output_unread() && self.write_where_it_lies(inputs, output).is_some() {
            return Ok(());
        }
        let value = |index: usize| {
            if uses.is_overwritten(index) {
                inputs[index].take()
            } else {
                inputs[index].get()
            }
        };
        // Read in the inputs' order, as the evaluator reads them, so that the first missing
        // value is the one it would name.
        let result = match self {
            OneOperator::Unary(op, index) => {
                let x = value(*index)?;
                with_output_buffer(output, uses, || tensor::unary_owned(*op, x))
            }
            OneOperator::Binary(op, lhs, rhs) => {
                let (a, b) = match (lhs, rhs) {
                    (Operand::Input(i), Operand::Input(j)) if i == j => {
                        let a = value(*i)?;
                        (a.clone(), a)
                    }
                    (Operand::Input(i), Operand::Input(j)) if j < i => {
                        let b = value(*j)?;
                        (value(*i)?, b)
                    }
                    (Operand::Input(i), Operand::Input(j)) => (value(*i)?, value(*j)?),
                    (Operand::Input(i), Operand::Const(b)) => (value(*i)?, b.clone()),
                    (Operand::Const(a), Operand::Input(j)) => (a.clone(), value(*j)?),
                    (Operand::Const(a), Operand::Const(b)) => (a.clone(), b.clone()),
                };
                with_output_buffer(output, uses, || tensor::binary_owned(a, *op, &b))
            }
        }
        .map_err(|error| error.message().to_string())?;
        output.set(result);
        Ok(())
    }
}

impl OneOperator {
    /// `c = c op b` (or `c op 2`), the variable updated where its value lies: `b` read under its
    /// slot's lock, nothing moved out of a slot or cloned. `None` when either value is not in
    /// host memory, or the operator is another: the general path then runs.
    ///
    /// Two slots are locked at once, the read one first; no deadlock: another op holding `c`'s
    /// lock would access `c`, which the engine does not let run beside this op's write.
    fn update_where_it_lies(
        &self,
        inputs: &[Arc<Slot>],
        output: &Slot,
        uses: &InputUses,
    ) -> Option<Result<(), String>> {
        let OneOperator::Binary(op, Operand::Input(target), other) = self else {
            return None;
        };
        if !uses.is_overwritten(*target) {
            return None;
        }
        let update = |other: &Tensor| {
            output.replace_host(|old| {
                tensor::binary_owned(old, *op, other).map_err(|error| error.message().to_string())
            })
        };
        match other {
            Operand::Const(other) => update(other),
            Operand::Input(index) if index != target => inputs[*index].read_host(update).flatten(),
            Operand::Input(_) => None,
        }
    }
}

impl OneOperator {
    /// `y = a op b` where the op does not read `y`: the result written into the buffer of `y`'s
    /// old value where it lies, the operands read under their slots' locks, nothing moved or
    /// allocated. `None`, nothing done, when `y`'s old value is shared, has another shape, or a
    /// value is not in host memory: the general path then runs (and reports what is wrong).
    ///
    /// Several slots are locked at once: the read ones in the order of their variables' ids,
    /// then `y`'s. No deadlock: readers take their locks in one order, and another op holding
    /// `y`'s lock would access `y`, which the engine does not let run beside this op's write.
    fn write_where_it_lies(&self, inputs: &[Arc<Slot>], output: &Slot) -> Option<()> {
        match self {
            OneOperator::Unary(op, index) => inputs[*index]
                .read_host(|x| output.overwrite_host(|out| tensor::unary_into(*op, x, out)))
                .flatten(),
            OneOperator::Binary(op, lhs, rhs) => {
                let write = |a: &Tensor, b: &Tensor| {
                    output.overwrite_host(|out| tensor::binary_into(a, *op, b, out))
                };
                match (lhs, rhs) {
                    (Operand::Input(i), Operand::Input(j)) => {
                        read_both(&inputs[*i], &inputs[*j], write)
                    }
                    (Operand::Input(i), Operand::Const(b)) => {
                        inputs[*i].read_host(|a| write(a, b)).flatten()
                    }
                    (Operand::Const(a), Operand::Input(j)) => {
                        inputs[*j].read_host(|b| write(a, b)).flatten()
                    }
                    (Operand::Const(a), Operand::Const(b)) => write(a, b),
                }
            }
        }
    }
}

/// Runs `read` on the host values of slots `x` and `y` (the same slot or two), locked in the
/// order of their variables' ids; `None` when one has no host value.
fn read_both<T>(x: &Slot, y: &Slot, read: impl FnOnce(&Tensor, &Tensor) -> Option<T>) -> Option<T> {
    if std::ptr::eq(x, y) {
        return x.read_host(|value| read(value, value)).flatten();
    }
    if x.var.id() < y.var.id() {
        x.read_host(|a| y.read_host(|b| read(a, b)).flatten())
            .flatten()
    } else {
        y.read_host(|b| x.read_host(|a| read(a, b)).flatten())
            .flatten()
    }
}

/// Runs `compute` with the old buffer of `output` as the spare its allocation takes, when the op
/// does not read `output` and nobody else holds that buffer.
fn with_output_buffer<T>(output: &Slot, uses: &InputUses, compute: impl FnOnce() -> T) -> T {
    match uses
        .output_unread()
        .then(|| output.take_dead_buffer())
        .flatten()
    {
        Some(spare) => tensor::with_spare(spare, compute),
        None => compute(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dep_engine as engine;

    fn slot(engine: &engine::Engine, values: &[f32]) -> Arc<Slot> {
        let slot = Slot::new(engine.new_var("v"));
        slot.set(Tensor::from_vec(vec![values.len()], values.to_vec()).unwrap());
        slot
    }

    fn binary(op: BinaryOp, lhs: Plan, rhs: Plan) -> Plan {
        Plan::Binary(op, Box::new(lhs), Box::new(rhs))
    }

    #[test]
    fn only_one_operator_over_inputs_and_constants_is_taken() {
        let one = Plan::Const(Tensor::scalar(1.0));
        let sum = binary(
            BinaryOp::Add,
            Plan::Input(0),
            Plan::Const(Tensor::scalar(1.0)),
        );
        assert!(OneOperator::of(&sum, 1).is_some());
        assert!(OneOperator::of(&Plan::Unary(UnaryOp::Exp, Box::new(Plan::Input(0))), 1).is_some());
        assert!(OneOperator::of(&binary(BinaryOp::Mul, sum, Plan::Input(1)), 2).is_none());
        assert!(OneOperator::of(
            &binary(BinaryOp::Add, Plan::Const(Tensor::scalar(2.0)), one),
            0
        )
        .is_none());
        // Every input read, none beyond.
        let two = binary(BinaryOp::Add, Plan::Input(0), Plan::Input(1));
        assert!(OneOperator::of(&two, 2).is_some());
        assert!(OneOperator::of(&two, 3).is_none());
        let twice = binary(BinaryOp::Add, Plan::Input(0), Plan::Input(0));
        assert!(OneOperator::of(&twice, 1).is_some());
        assert!(OneOperator::of(&twice, 2).is_none());
        assert!(OneOperator::of(&Plan::Input(0), 1).is_none());
        // A unary builtin of an input, not of an expression.
        let relu = |arg: Plan| Plan::Call(Builtin::Unary(UnaryOp::Relu), vec![arg]);
        assert!(OneOperator::of(&relu(Plan::Input(0)), 1).is_some());
        let relu_of_sum = relu(binary(BinaryOp::Add, Plan::Input(0), Plan::Input(0)));
        assert!(OneOperator::of(&relu_of_sum, 1).is_none());
    }

    #[test]
    fn it_gives_the_evaluators_values_and_reuses_the_same_buffers() {
        let engine = engine::Engine::new(engine::EngineConfig::default());
        // c = c + b: c's buffer takes the result.
        let (b, c) = (slot(&engine, &[1.0, 2.0]), slot(&engine, &[10.0, 20.0]));
        let plan = binary(BinaryOp::Add, Plan::Input(0), Plan::Input(1));
        let (inputs, outputs) = (vec![c.clone(), b.clone()], vec![c.clone()]);
        let uses = InputUses::of(&plan, &inputs, &outputs, None);
        let old = c.get().unwrap().data().as_ptr();
        OneOperator::of(&plan, 2)
            .unwrap()
            .run(&inputs, &c, &uses)
            .unwrap();
        let new = c.get().unwrap();
        assert_eq!(new.data(), &[11.0, 22.0]);
        assert_eq!(new.data().as_ptr(), old, "c's buffer holds the result");
        // y = 2 - x, y unread: y's old buffer takes the result; x keeps its value.
        let (x, y) = (slot(&engine, &[1.0, 5.0]), slot(&engine, &[0.0, 0.0]));
        let plan = binary(
            BinaryOp::Sub,
            Plan::Const(Tensor::scalar(2.0)),
            Plan::Input(0),
        );
        let uses = InputUses::of(&plan, &[x.clone()], &[y.clone()], None);
        let old = y.get().unwrap().data().as_ptr();
        OneOperator::of(&plan, 1)
            .unwrap()
            .run(&[x.clone()], &y, &uses)
            .unwrap();
        assert_eq!(y.get().unwrap().data(), &[1.0, -3.0]);
        assert_eq!(y.get().unwrap().data().as_ptr(), old);
        assert_eq!(x.get().unwrap().data(), &[1.0, 5.0]);
        // z = x * x reads x twice.
        let z = Slot::new(engine.new_var("z"));
        let plan = binary(BinaryOp::Mul, Plan::Input(0), Plan::Input(0));
        let uses = InputUses::of(&plan, &[x.clone()], &[z.clone()], None);
        OneOperator::of(&plan, 1)
            .unwrap()
            .run(&[x.clone()], &z, &uses)
            .unwrap();
        assert_eq!(z.get().unwrap().data(), &[1.0, 25.0]);
    }

    #[test]
    fn a_variable_updated_from_itself_fails_as_the_evaluator_does() {
        let engine = engine::Engine::new(engine::EngineConfig::default());
        // c = c + b with shapes that do not broadcast: the error, and c left empty (the
        // evaluator takes c out of its slot and fails).
        let (c, b) = (slot(&engine, &[1.0, 2.0]), slot(&engine, &[1.0, 2.0, 3.0]));
        let plan = binary(BinaryOp::Add, Plan::Input(0), Plan::Input(1));
        let (inputs, outputs) = (vec![c.clone(), b.clone()], vec![c.clone()]);
        let uses = InputUses::of(&plan, &inputs, &outputs, None);
        let expected = tensor::binary(&c.get().unwrap(), BinaryOp::Add, &b.get().unwrap())
            .unwrap_err()
            .message()
            .to_string();
        let one = OneOperator::of(&plan, 2).unwrap();
        assert_eq!(one.run(&inputs, &c, &uses).unwrap_err(), expected);
        assert_eq!(c.get().unwrap_err(), "`v` has no value");
        // Now c is missing: named, and b keeps its value.
        assert_eq!(one.run(&inputs, &c, &uses).unwrap_err(), "`v` has no value");
        assert_eq!(b.get().unwrap().data(), &[1.0, 2.0, 3.0]);
        // A value another variable shares is left to it: c gets a new buffer.
        c.set(Tensor::from_vec(vec![3], vec![1.0, 1.0, 1.0]).unwrap());
        let shared = c.get().unwrap();
        one.run(&inputs, &c, &uses).unwrap();
        assert_eq!(c.get().unwrap().data(), &[2.0, 3.0, 4.0]);
        assert_eq!(shared.data(), &[1.0, 1.0, 1.0]);
    }

    #[test]
    fn its_errors_are_the_evaluators() {
        let engine = engine::Engine::new(engine::EngineConfig::default());
        let (a, b) = (slot(&engine, &[1.0, 2.0]), slot(&engine, &[1.0, 2.0, 3.0]));
        let out = Slot::new(engine.new_var("out"));
        let plan = binary(BinaryOp::Add, Plan::Input(0), Plan::Input(1));
        let uses = InputUses::of(&plan, &[a.clone(), b.clone()], &[out.clone()], None);
        let error = OneOperator::of(&plan, 2)
            .unwrap()
            .run(&[a.clone(), b.clone()], &out, &uses)
            .unwrap_err();
        let expected = tensor::binary(&a.get().unwrap(), BinaryOp::Add, &b.get().unwrap())
            .unwrap_err()
            .message()
            .to_string();
        assert_eq!(error, expected);
        // A missing value is named as the evaluator names it: the first input in order.
        let (empty_a, empty_b) = (
            Slot::new(engine.new_var("p")),
            Slot::new(engine.new_var("q")),
        );
        let plan = binary(BinaryOp::Add, Plan::Input(1), Plan::Input(0));
        let uses = InputUses::of(
            &plan,
            &[empty_a.clone(), empty_b.clone()],
            &[out.clone()],
            None,
        );
        let error = OneOperator::of(&plan, 2)
            .unwrap()
            .run(&[empty_a, empty_b], &out, &uses)
            .unwrap_err();
        assert_eq!(error, "`p` has no value");
    }
}
