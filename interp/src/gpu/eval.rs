//! Evaluating a statement's [`Plan`] on a GPU: the GPU twin of `Plan::eval`.
//!
//! Values are either on the device or still on the host: constants stay on the host until a
//! kernel needs them, so `A + 1` passes `1` as a kernel argument and a subexpression of constants
//! folds on the CPU. Host numbers that steer a kernel (dimensions, axes, indices) are read on
//! the host; if one comes from a device value, reading it is a CPU consumer and waits for it.
//! Everything that can fail is checked on the host before a launch, with the CPU's messages.

use super::geometry;
use super::ops::Exec;
use super::runtime::{download, GpuOpContext, GpuTensor, OpScope};
use crate::builtins::{self, Arg, Builtin};
use crate::plan::{Plan, PlanIndex};
use crate::tensor::error::terr;
use crate::tensor::shape::fmt_shape;
use crate::tensor::{self, IndexSpec, Tensor, TensorError};

/// Evaluates `plan` on `ctx`'s device and stream, reading `inputs` (`Plan::Input(i)` is
/// `inputs[i]`). Gives one tensor, or several for a multi-result builtin (`split`).
///
/// Returns as soon as the kernels are enqueued (RFC 18951): the outputs' writer events order
/// later uses, and [`download`] waits for them. With a timing context, the kernels' times are
/// then in `ctx.take_span()`.
pub(crate) fn eval(
    plan: &Plan,
    inputs: &[GpuTensor],
    ctx: &mut GpuOpContext<'_>,
) -> Result<Vec<GpuTensor>, TensorError> {
    let input_refs: Vec<&GpuTensor> = inputs.iter().collect();
    let scope = OpScope::begin(ctx, &input_refs, false)?;
    let outputs = {
        let mut evaluator = Evaluator {
            exec: scope.exec(),
            inputs,
            ctx,
        };
        let values = if plan.is_multi() {
            evaluator.eval_multi(plan)?
        } else {
            vec![evaluator.eval(plan)?]
        };
        values
            .into_iter()
            .map(|value| evaluator.on_device(value))
            .collect::<Result<Vec<_>, _>>()?
    };
    let span = scope.finish(&outputs)?;
    ctx.set_span(span);
    Ok(outputs)
}

/// A value during evaluation.
enum Value {
    Host(Tensor),
    Device(GpuTensor),
}

impl Value {
    fn shape(&self) -> &[usize] {
        match self {
            Value::Host(tensor) => tensor.shape(),
            Value::Device(tensor) => tensor.shape(),
        }
    }
}

struct Evaluator<'e, 'c, 'r> {
    exec: Exec<'e>,
    inputs: &'e [GpuTensor],
    ctx: &'c mut GpuOpContext<'r>,
}

impl Evaluator<'_, '_, '_> {
    fn on_device(&self, value: Value) -> Result<GpuTensor, TensorError> {
        match value {
            Value::Device(tensor) => Ok(tensor),
            Value::Host(tensor) => self.exec.upload(&tensor),
        }
    }

    /// The value on the host; a device value is downloaded (waiting for its kernels).
    fn on_host(&self, value: Value) -> Result<Tensor, TensorError> {
        match value {
            Value::Host(tensor) => Ok(tensor),
            Value::Device(tensor) => download(&tensor),
        }
    }

    fn eval(&mut self, plan: &Plan) -> Result<Value, TensorError> {
        match plan {
            Plan::Const(tensor) => Ok(Value::Host(tensor.clone())),
            Plan::Str(text) => Err(terr!("the string {text:?} is not a tensor")),
            Plan::Input(index) => self
                .inputs
                .get(*index)
                .cloned()
                .map(Value::Device)
                .ok_or_else(|| TensorError::new("an input was used more often than counted")),
            Plan::Unary(op, operand) => match self.eval(operand)? {
                Value::Host(x) => Ok(Value::Host(tensor::unary(*op, &x)?)),
                Value::Device(x) => Ok(Value::Device(self.exec.unary(*op, &x)?)),
            },
            Plan::Binary(op, lhs, rhs) => {
                let lhs = self.eval(lhs)?;
                let rhs = self.eval(rhs)?;
                let (shape, _) = geometry::binary_layout(lhs.shape(), rhs.shape())?;
                match (lhs, rhs) {
                    (Value::Host(a), Value::Host(b)) => {
                        Ok(Value::Host(tensor::binary(&a, *op, &b)?))
                    }
                    (Value::Device(a), Value::Host(b))
                        if b.len() == 1 && a.shape() == shape.as_slice() =>
                    {
                        Ok(Value::Device(self.exec.binary_scalar(
                            &a,
                            *op,
                            b.data()[0],
                            false,
                        )?))
                    }
                    (Value::Host(a), Value::Device(b))
                        if a.len() == 1 && b.shape() == shape.as_slice() =>
                    {
                        Ok(Value::Device(self.exec.binary_scalar(
                            &b,
                            *op,
                            a.data()[0],
                            true,
                        )?))
                    }
                    (lhs, rhs) => {
                        let (a, b) = (self.on_device(lhs)?, self.on_device(rhs)?);
                        Ok(Value::Device(self.exec.binary(&a, *op, &b)?))
                    }
                }
            }
            Plan::Matmul(lhs, rhs) => {
                let lhs = self.eval(lhs)?;
                let rhs = self.eval(rhs)?;
                self.matmul(lhs, rhs)
            }
            Plan::Call(builtin, _) if builtin.is_multi() => Err(terr!(
                "{} gives several values: assign them to several names",
                builtins::name_of(*builtin)
            )),
            Plan::Call(..) => Ok(self.eval_multi(plan)?.remove(0)),
            Plan::Index(base, items) => {
                let base = self.eval(base)?;
                let mut specs = Vec::with_capacity(items.len());
                for item in items {
                    specs.push(match item {
                        PlanIndex::Single(plan) => {
                            IndexSpec::Single(self.integer(plan, "an index")?)
                        }
                        PlanIndex::Slice(start, end) => IndexSpec::Slice {
                            start: start
                                .as_ref()
                                .map(|plan| self.integer(plan, "a slice bound"))
                                .transpose()?,
                            end: end
                                .as_ref()
                                .map(|plan| self.integer(plan, "a slice bound"))
                                .transpose()?,
                        },
                    });
                }
                match base {
                    Value::Host(x) => Ok(Value::Host(tensor::index(&x, &specs)?)),
                    Value::Device(x) => {
                        let (shape, params) = geometry::index(x.shape(), &specs)?;
                        Ok(Value::Device(self.exec.gather(&x, shape, params)?))
                    }
                }
            }
            // The op runs on the destination GPU (`to(x, gpuN)`), or on a GPU that already holds
            // the value: its inputs were uploaded or copied there before the plan ran.
            Plan::CopyTo(value, _) => self.eval(value),
            Plan::List(items) => {
                let values = items
                    .iter()
                    .map(|item| self.eval(item))
                    .collect::<Result<Vec<_>, _>>()?;
                let Some(first) = values.first() else {
                    return Ok(Value::Host(Tensor::from_vec(vec![0], Vec::new())?));
                };
                let item_shape = first.shape().to_vec();
                for value in &values {
                    if value.shape() != item_shape.as_slice() {
                        return Err(terr!(
                            "the elements of a tensor literal must have one shape, found {} and {}",
                            fmt_shape(&item_shape),
                            fmt_shape(value.shape())
                        ));
                    }
                }
                let (shape, copies) = geometry::stack(&item_shape, values.len())?;
                let out = self.exec.alloc(shape)?;
                for (value, params) in values.into_iter().zip(copies) {
                    let item = self.on_device(value)?;
                    self.exec.strided_copy(&item, &out, params)?;
                }
                Ok(Value::Device(out))
            }
        }
    }

    fn matmul(&mut self, lhs: Value, rhs: Value) -> Result<Value, TensorError> {
        match (lhs, rhs) {
            (Value::Host(a), Value::Host(b)) => Ok(Value::Host(tensor::matmul(&a, &b)?)),
            (lhs, rhs) => {
                let (a, b) = (self.on_device(lhs)?, self.on_device(rhs)?);
                Ok(Value::Device(self.exec.matmul(&a, &b)?))
            }
        }
    }

    /// A host integer from a plan (an index, an axis), with `plan.rs`'s messages.
    fn integer(&mut self, plan: &Plan, what: &str) -> Result<i64, TensorError> {
        let value = self.eval(plan)?;
        let value = self.on_host(value)?;
        builtins::whole_number(&value, what)
    }

    fn eval_multi(&mut self, plan: &Plan) -> Result<Vec<Value>, TensorError> {
        let Plan::Call(builtin, args) = plan else {
            return Ok(vec![self.eval(plan)?]);
        };
        let mut values = Vec::with_capacity(args.len());
        for arg in args {
            values.push(match arg {
                Plan::Str(text) => CallArg::Str(text.clone()),
                plan => CallArg::Value(self.eval(plan)?),
            });
        }
        self.call(*builtin, values)
    }

    /// Runs a builtin: creation and random builtins on the device; the others on the device
    /// when a tensor argument is there, else on the CPU (constant folding).
    fn call(&mut self, builtin: Builtin, args: Vec<CallArg>) -> Result<Vec<Value>, TensorError> {
        let one = |value: GpuTensor| Ok(vec![Value::Device(value)]);
        match builtin {
            Builtin::Zeros | Builtin::Ones => {
                let value = if builtin == Builtin::Ones { 1.0 } else { 0.0 };
                return one(self.exec.fill(self.dims(&args)?, value)?);
            }
            Builtin::Full => {
                let value = self.host_tensor(&args, 0, "the fill value")?;
                let value = value
                    .to_scalar()
                    .ok_or_else(|| TensorError::new("the fill value must be a number"))?;
                return one(self.exec.fill(self.dims(&args[1..])?, value)?);
            }
            Builtin::Eye => return one(self.exec.eye(self.dimension(&args, 0, "n")?)?),
            Builtin::Arange => return one(self.exec.arange(self.dimension(&args, 0, "n")?)?),
            Builtin::Rand | Builtin::Randn => {
                let dims = self.dims(&args)?;
                let n = crate::tensor::shape::numel(&dims)?;
                let rng = self
                    .ctx
                    .rng()
                    .ok_or_else(|| TensorError::new("no random number generator"))?;
                let draw = rng.draw(n);
                return one(self.exec.random(dims, draw, builtin == Builtin::Randn)?);
            }
            _ => {}
        }
        let all_on_host = args
            .iter()
            .all(|arg| !matches!(arg, CallArg::Value(Value::Device(_))));
        if all_on_host {
            let cpu_args: Vec<Arg> = args
                .into_iter()
                .map(|arg| match arg {
                    CallArg::Str(text) => Arg::Str(text),
                    CallArg::Value(Value::Host(tensor)) => Arg::Tensor(tensor),
                    CallArg::Value(Value::Device(_)) => {
                        unreachable!("all arguments are on the host")
                    }
                })
                .collect();
            return Ok(builtins::call(builtin, &cpu_args, None)?
                .into_iter()
                .map(Value::Host)
                .collect());
        }
        match builtin {
            Builtin::Unary(op) => {
                let x = self.device_tensor(&args, 0, "the argument")?;
                one(self.exec.unary(op, &x)?)
            }
            Builtin::Reduce(op) => {
                let x = self.device_tensor(&args, 0, "the argument")?;
                let axis = match args.get(1) {
                    Some(_) => Some(self.integer_arg(&args, 1, "the axis")?),
                    None => None,
                };
                one(self.exec.reduce(op, &x, axis)?)
            }
            Builtin::Softmax => {
                let x = self.device_tensor(&args, 0, "the argument")?;
                let axis = self.integer_arg(&args, 1, "the axis")?;
                one(self.exec.softmax(&x, axis)?)
            }
            Builtin::Onehot => {
                let labels = self.device_tensor(&args, 0, "the labels")?;
                let classes = self.dimension(&args, 1, "n")?;
                // The labels are checked on the host (the errors name the first bad one), so
                // onehot waits for them: a CPU consumer.
                let labels_on_host = download(&labels)?;
                one(self.exec.onehot(&labels, &labels_on_host, classes)?)
            }
            Builtin::Transpose => {
                let x = self.device_tensor(&args, 0, "the argument")?;
                if x.shape().len() <= 1 {
                    return one(x);
                }
                let (shape, params) = geometry::transpose(x.shape())?;
                one(self.exec.gather(&x, shape, params)?)
            }
            Builtin::Reshape => {
                let x = self.device_tensor(&args, 0, "the argument")?;
                let dims = (1..args.len())
                    .map(|index| self.integer_arg(&args, index, "a dimension"))
                    .collect::<Result<Vec<_>, _>>()?;
                let shape = geometry::reshape(x.shape(), &dims)?;
                one(x.with_shape(shape))
            }
            Builtin::Concat => {
                let a = self.device_tensor(&args, 0, "the first tensor")?;
                let b = self.device_tensor(&args, 1, "the second tensor")?;
                let axis = self.integer_arg(&args, 2, "the axis")?;
                let (shape, [first, second]) = geometry::concat(a.shape(), b.shape(), axis)?;
                let out = self.exec.alloc(shape)?;
                self.exec.strided_copy(&a, &out, first)?;
                self.exec.strided_copy(&b, &out, second)?;
                one(out)
            }
            Builtin::Split => {
                let x = self.device_tensor(&args, 0, "the argument")?;
                let parts = self.dimension(&args, 1, "the number of parts")?;
                let axis = self.integer_arg(&args, 2, "the axis")?;
                geometry::split(x.shape(), parts, axis)?
                    .into_iter()
                    .map(|(shape, params)| Ok(Value::Device(self.exec.gather(&x, shape, params)?)))
                    .collect()
            }
            Builtin::Matmul => {
                let a = self.value_arg(&args, 0, "the left operand")?;
                let b = self.value_arg(&args, 1, "the right operand")?;
                Ok(vec![self.matmul(a, b)?])
            }
            Builtin::Load => Err(TensorError::new(
                "load takes a file path in quotes, e.g. load(\"x.npy\")",
            )),
            Builtin::Work => {
                // The time passes on the host; the value passes through on its device.
                builtins::call(
                    Builtin::Work,
                    &[Arg::Tensor(self.host_tensor(&args, 0, "the time")?)],
                    None,
                )?;
                match args.get(1) {
                    Some(_) => Ok(vec![self.value_arg(&args, 1, "the value")?]),
                    None => Ok(vec![Value::Host(crate::tensor::Tensor::scalar(0.0))]),
                }
            }
            Builtin::Zeros
            | Builtin::Ones
            | Builtin::Full
            | Builtin::Eye
            | Builtin::Arange
            | Builtin::Rand
            | Builtin::Randn => unreachable!("creation builtins returned above"),
        }
    }

    /// Argument `index` as a value (a string is an error, worded as `builtins.rs` words it).
    fn value_arg(&self, args: &[CallArg], index: usize, what: &str) -> Result<Value, TensorError> {
        match args.get(index) {
            Some(CallArg::Value(Value::Host(tensor))) => Ok(Value::Host(tensor.clone())),
            Some(CallArg::Value(Value::Device(tensor))) => Ok(Value::Device(tensor.clone())),
            Some(CallArg::Str(text)) => {
                Err(terr!("{what} must be a tensor, not the string {text:?}"))
            }
            None => Err(terr!("{what} is missing")),
        }
    }

    fn device_tensor(
        &self,
        args: &[CallArg],
        index: usize,
        what: &str,
    ) -> Result<GpuTensor, TensorError> {
        let value = self.value_arg(args, index, what)?;
        self.on_device(value)
    }

    fn host_tensor(
        &self,
        args: &[CallArg],
        index: usize,
        what: &str,
    ) -> Result<Tensor, TensorError> {
        let value = self.value_arg(args, index, what)?;
        self.on_host(value)
    }

    fn integer_arg(&self, args: &[CallArg], index: usize, what: &str) -> Result<i64, TensorError> {
        builtins::whole_number(&self.host_tensor(args, index, what)?, what)
    }

    fn dimension(&self, args: &[CallArg], index: usize, what: &str) -> Result<usize, TensorError> {
        let value = self.integer_arg(args, index, what)?;
        usize::try_from(value).map_err(|_| terr!("{what} must not be negative, got {value}"))
    }

    fn dims(&self, args: &[CallArg]) -> Result<Vec<usize>, TensorError> {
        (0..args.len())
            .map(|index| self.dimension(args, index, "a dimension"))
            .collect()
    }
}

/// An evaluated builtin argument.
enum CallArg {
    Str(String),
    Value(Value),
}
