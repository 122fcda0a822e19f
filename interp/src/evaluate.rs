//! The one evaluator of a plan, generic over where values live ([`Backend`]: the host's tensors,
//! or a GPU's).
//!
//! It walks the plan, reads the host numbers that steer an operation (dimensions, axes,
//! indices), checks every argument with the language's messages, and calls the backend once per
//! operation; builtins are dispatched here and only here. A plan node or builtin added to the
//! language is handled once, for every backend.

use dep_engine::OpContext;

use crate::builtins::{self, Builtin};
use crate::plan::{Plan, PlanIndex};
use crate::tensor::backend::Backend;
use crate::tensor::shape::fmt_shape;
use crate::tensor::{IndexSpec, Tensor, TensorError};

/// Evaluates `plan` to one value.
pub(crate) fn eval<B: Backend>(
    plan: &Plan,
    backend: &mut B,
    cx: &OpContext,
) -> Result<B::Value, TensorError> {
    eval_node(plan, backend, cx)
}

/// Evaluates `plan` to its values: several for a multi-result builtin at the top, else one.
pub(crate) fn eval_all<B: Backend>(
    plan: &Plan,
    backend: &mut B,
    cx: &OpContext,
) -> Result<Vec<B::Value>, TensorError> {
    if plan.is_multi() {
        eval_multi(plan, backend, cx)
    } else {
        Ok(vec![eval(plan, backend, cx)?])
    }
}

/// Evaluates `plan` to one or several values (several only for a multi-result builtin).
pub(crate) fn eval_multi<B: Backend>(
    plan: &Plan,
    backend: &mut B,
    cx: &OpContext,
) -> Result<Vec<B::Value>, TensorError> {
    match plan {
        Plan::Call(builtin, args) => {
            let mut values = Vec::with_capacity(args.len());
            let simulated = cx.is_simulated();
            let mut bytes_read = 0.0;
            for arg in args {
                values.push(match arg {
                    Plan::Str(text) => Arg::Str(text.clone()),
                    plan => {
                        let value = eval(plan, backend, cx)?;
                        if simulated {
                            bytes_read += bytes::<B>(&value);
                        }
                        Arg::Value(value)
                    }
                });
            }
            let results = call(*builtin, values, backend, cx)?;
            // `work(ms, ...)` stands for an op of that length, whatever it passes on.
            if simulated && *builtin != Builtin::Work {
                let written: f64 = results.iter().map(bytes::<B>).sum();
                report_bytes(cx, bytes_read + written);
            }
            Ok(results)
        }
        plan => Ok(vec![eval(plan, backend, cx)?]),
    }
}

fn numel<B: Backend>(value: &B::Value) -> usize {
    // Saturating: an empty tensor's other dimensions may multiply past the machine's words.
    B::shape(value)
        .iter()
        .fold(1, |product: usize, dim| product.saturating_mul(*dim))
}

/// The bytes of a value's elements (float32).
fn bytes<B: Backend>(value: &B::Value) -> f64 {
    (numel::<B>(value) * std::mem::size_of::<f32>()) as f64
}

fn eval_node<B: Backend>(
    plan: &Plan,
    backend: &mut B,
    cx: &OpContext,
) -> Result<B::Value, TensorError> {
    match plan {
        Plan::Const(tensor) => backend.constant(tensor.clone()),
        Plan::Str(text) => Err(TensorError::new(format!(
            "the string {text:?} is not a tensor"
        ))),
        Plan::Input(index) => backend.input(*index),
        Plan::Unary(op, operand) => {
            let value = eval(operand, backend, cx)?;
            if !cx.is_simulated() {
                return backend.unary(*op, value);
            }
            let read = bytes::<B>(&value);
            let result = backend.unary(*op, value)?;
            report_elementwise::<B>(cx, read, &result);
            Ok(result)
        }
        Plan::Binary(op, lhs, rhs) => {
            let lhs = eval(lhs, backend, cx)?;
            let rhs = eval(rhs, backend, cx)?;
            if !cx.is_simulated() {
                return backend.binary(*op, lhs, rhs);
            }
            let read = bytes::<B>(&lhs) + bytes::<B>(&rhs);
            let result = backend.binary(*op, lhs, rhs)?;
            report_elementwise::<B>(cx, read, &result);
            Ok(result)
        }
        Plan::Matmul(lhs, rhs) => {
            let lhs = eval(lhs, backend, cx)?;
            let rhs = eval(rhs, backend, cx)?;
            let inner = B::shape(&lhs).last().copied().unwrap_or(1) as f64;
            let read = bytes::<B>(&lhs) + bytes::<B>(&rhs);
            let result = backend.matmul(lhs, rhs)?;
            if cx.is_simulated() {
                cx.report_cost(dep_engine::sim::Cost {
                    flops: 2.0 * inner * numel::<B>(&result) as f64,
                    bytes: read + bytes::<B>(&result),
                    ..Default::default()
                });
            }
            Ok(result)
        }
        Plan::Call(builtin, _) if builtin.is_multi() => Err(TensorError::new(format!(
            "{} gives several values: assign them to several names",
            builtins::name_of(*builtin)
        ))),
        Plan::Call(..) => Ok(eval_multi(plan, backend, cx)?.remove(0)),
        Plan::Index(base, items) => {
            let base = eval(base, backend, cx)?;
            let mut specs = Vec::with_capacity(items.len());
            for item in items {
                specs.push(match item {
                    PlanIndex::Single(plan) => {
                        IndexSpec::Single(integer(plan, backend, cx, "an index")?)
                    }
                    PlanIndex::Slice(start, end) => IndexSpec::Slice {
                        start: start
                            .as_ref()
                            .map(|plan| integer(plan, backend, cx, "a slice bound"))
                            .transpose()?,
                        end: end
                            .as_ref()
                            .map(|plan| integer(plan, backend, cx, "a slice bound"))
                            .transpose()?,
                    },
                });
            }
            let result = backend.index(base, &specs)?;
            // A copy of the elements it selects: it reads them and writes them.
            if cx.is_simulated() {
                report_bytes(cx, 2.0 * bytes::<B>(&result));
            }
            Ok(result)
        }
        // The op runs on the link's destination: on the host, the value is where it is (the
        // simulated engine charges the copy's bytes over the link); on a GPU, the inputs were
        // uploaded or copied there before the plan ran.
        Plan::CopyTo(value, _) => {
            let value = eval(value, backend, cx)?;
            if cx.is_simulated() {
                report_bytes(cx, bytes::<B>(&value));
            }
            Ok(value)
        }
        Plan::List(items) => {
            let values = items
                .iter()
                .map(|item| eval(item, backend, cx))
                .collect::<Result<Vec<_>, _>>()?;
            let Some(first) = values.first() else {
                return backend.constant(Tensor::from_vec(vec![0], Vec::new())?);
            };
            let item_shape = B::shape(first);
            if let Some(other) = values.iter().find(|value| B::shape(value) != item_shape) {
                return Err(TensorError::new(format!(
                    "the elements of a tensor literal must have one shape, found {} and {}",
                    fmt_shape(item_shape),
                    fmt_shape(B::shape(other))
                )));
            }
            let read: f64 = values.iter().map(bytes::<B>).sum();
            let result = backend.stack(values)?;
            // It reads its elements and writes them together.
            if cx.is_simulated() {
                report_bytes(cx, read + bytes::<B>(&result));
            }
            Ok(result)
        }
    }
}

/// A host integer from a plan (an index, a slice bound).
fn integer<B: Backend>(
    plan: &Plan,
    backend: &mut B,
    cx: &OpContext,
    what: &str,
) -> Result<i64, TensorError> {
    let value = eval(plan, backend, cx)?;
    builtins::whole_number(&backend.to_host(value)?, what)
}

/// Counts an elementwise operation for the simulated engine's cost model: a floating-point
/// operation per element of its result, and the bytes it reads and writes.
fn report_elementwise<B: Backend>(cx: &OpContext, read: f64, result: &B::Value) {
    cx.report_cost(dep_engine::sim::Cost {
        flops: numel::<B>(result) as f64,
        bytes: read + bytes::<B>(result),
        ..Default::default()
    });
}

/// Counts bytes moved for the simulated engine's cost model.
fn report_bytes(cx: &OpContext, bytes: f64) {
    cx.report_cost(dep_engine::sim::Cost {
        bytes,
        ..Default::default()
    });
}

/// An argument of a builtin call, evaluated: a value, or a string (for paths).
enum Arg<V> {
    Value(V),
    Str(String),
}

impl<V> Arg<V> {
    /// The value; a string is an error naming `what`.
    fn value(self, what: &str) -> Result<V, TensorError> {
        match self {
            Arg::Value(value) => Ok(value),
            Arg::Str(text) => Err(TensorError::new(format!(
                "{what} must be a tensor, not the string {text:?}"
            ))),
        }
    }
}

/// The builtin's arguments, taken in order (their number was checked when the call compiled).
struct Args<V> {
    args: std::vec::IntoIter<Arg<V>>,
}

impl<V> Args<V> {
    fn next(&mut self) -> Result<Arg<V>, TensorError> {
        self.args
            .next()
            .ok_or_else(|| TensorError::new("a builtin was called with too few arguments"))
    }

    fn value(&mut self, what: &str) -> Result<V, TensorError> {
        self.next()?.value(what)
    }

    /// The next argument on the host.
    fn host<B: Backend<Value = V>>(
        &mut self,
        backend: &mut B,
        what: &str,
    ) -> Result<Tensor, TensorError> {
        let value = self.value(what)?;
        backend.to_host(value)
    }

    fn integer<B: Backend<Value = V>>(
        &mut self,
        backend: &mut B,
        what: &str,
    ) -> Result<i64, TensorError> {
        builtins::whole_number(&self.host(backend, what)?, what)
    }

    fn dimension<B: Backend<Value = V>>(
        &mut self,
        backend: &mut B,
        what: &str,
    ) -> Result<usize, TensorError> {
        let value = self.integer(backend, what)?;
        usize::try_from(value)
            .map_err(|_| TensorError::new(format!("{what} must not be negative, got {value}")))
    }

    /// Every remaining argument, as dimensions.
    fn dims<B: Backend<Value = V>>(&mut self, backend: &mut B) -> Result<Vec<usize>, TensorError> {
        let mut dims = Vec::with_capacity(self.args.len());
        while self.args.len() > 0 {
            dims.push(self.dimension(backend, "a dimension")?);
        }
        Ok(dims)
    }
}

/// Runs a builtin on evaluated arguments.
fn call<B: Backend>(
    builtin: Builtin,
    args: Vec<Arg<B::Value>>,
    backend: &mut B,
    cx: &OpContext,
) -> Result<Vec<B::Value>, TensorError> {
    let mut args = Args {
        args: args.into_iter(),
    };
    let value = match builtin {
        Builtin::Zeros | Builtin::Ones => {
            let dims = args.dims(backend)?;
            backend.fill(&dims, if builtin == Builtin::Ones { 1.0 } else { 0.0 })?
        }
        Builtin::Full => {
            let value = args
                .host(backend, "the fill value")?
                .to_scalar()
                .ok_or_else(|| TensorError::new("the fill value must be a number"))?;
            let dims = args.dims(backend)?;
            backend.fill(&dims, value)?
        }
        Builtin::Eye => {
            let n = args.dimension(backend, "n")?;
            backend.eye(n)?
        }
        Builtin::Arange => {
            let n = args.dimension(backend, "n")?;
            backend.arange(n)?
        }
        Builtin::Rand | Builtin::Randn => {
            let dims = args.dims(backend)?;
            backend.random(&dims, builtin == Builtin::Randn)?
        }
        Builtin::Unary(op) => {
            let x = args.value("the argument")?;
            backend.unary(op, x)?
        }
        Builtin::Reduce(op) => {
            let x = args.next()?;
            let axis = match args.args.len() {
                0 => None,
                _ => Some(args.integer(backend, "the axis")?),
            };
            backend.reduce(op, x.value("the argument")?, axis)?
        }
        Builtin::Softmax => {
            let x = args.value("the argument")?;
            let axis = args.integer(backend, "the axis")?;
            backend.softmax(x, axis)?
        }
        Builtin::Onehot => {
            let labels = args.value("the labels")?;
            let n = args.dimension(backend, "n")?;
            backend.onehot(labels, n)?
        }
        Builtin::Transpose => {
            let x = args.value("the argument")?;
            backend.transpose(x)?
        }
        Builtin::Reshape => {
            let x = args.next()?;
            let mut dims = Vec::with_capacity(args.args.len());
            while args.args.len() > 0 {
                dims.push(args.integer(backend, "a dimension")?);
            }
            backend.reshape(x.value("the argument")?, &dims)?
        }
        Builtin::Concat => {
            let a = args.value("the first tensor")?;
            let b = args.value("the second tensor")?;
            let axis = args.integer(backend, "the axis")?;
            backend.concat(a, b, axis)?
        }
        Builtin::Split => {
            let x = args.value("the argument")?;
            let parts = args.dimension(backend, "the number of parts")?;
            let axis = args.integer(backend, "the axis")?;
            return backend.split(x, parts, axis);
        }
        Builtin::Load => match args.next()? {
            Arg::Str(path) => backend.constant(crate::tensor::load_npy(&path)?)?,
            Arg::Value(_) => {
                return Err(TensorError::new(
                    "load takes a file path in quotes, e.g. load(\"x.npy\")",
                ))
            }
        },
        Builtin::Matmul => {
            let a = args.value("the left operand")?;
            let b = args.value("the right operand")?;
            backend.matmul(a, b)?
        }
        Builtin::Work => {
            let milliseconds = args
                .host(backend, "the time")?
                .to_scalar()
                .filter(|ms| ms.is_finite() && *ms >= 0.0 && *ms <= 3.6e6)
                .ok_or_else(|| {
                    TensorError::new("work takes a time in milliseconds from 0 to 3600000")
                })?;
            take_time(
                backend,
                cx,
                std::time::Duration::from_secs_f64(f64::from(milliseconds) / 1000.0),
            )?;
            // The value passes through, where it lives.
            match args.args.len() {
                0 => backend.constant(Tensor::scalar(0.0))?,
                _ => args.value("the value")?,
            }
        }
    };
    Ok(vec![value])
}

/// Runs a builtin on host arguments (see `builtins::call`).
pub(crate) fn call_on_host(
    builtin: Builtin,
    args: &[builtins::Arg],
    rng: Option<&mut crate::tensor::TensorRng>,
) -> Result<Vec<Tensor>, TensorError> {
    let args = args
        .iter()
        .map(|arg| match arg {
            builtins::Arg::Tensor(tensor) => Arg::Value(tensor.clone()),
            builtins::Arg::Str(text) => Arg::Str(text.clone()),
        })
        .collect();
    let mut backend = crate::tensor::backend::HostBackend {
        inputs: &mut [],
        remaining_uses: &mut [],
        rng,
    };
    call(builtin, args, &mut backend, &OpContext::standalone())
}

/// `work(ms)`'s time: spent where the op runs (the host thread, or the GPU stream), or, on the
/// virtual clock, reported rather than spent.
fn take_time<B: Backend>(
    backend: &mut B,
    cx: &OpContext,
    duration: std::time::Duration,
) -> Result<(), TensorError> {
    if cx.is_simulated() {
        cx.report_cost(dep_engine::sim::Cost {
            fixed_ns: duration.as_nanos() as u64,
            ..Default::default()
        });
        Ok(())
    } else {
        backend.take_time(duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::backend::HostBackend;
    use crate::tensor::{self, BinaryOp};

    fn host_eval(plan: &Plan, inputs: &mut [Option<Tensor>]) -> Result<Vec<Tensor>, TensorError> {
        let mut uses = vec![0; inputs.len()];
        plan.count_uses(&mut uses);
        eval_multi(
            plan,
            &mut HostBackend {
                inputs,
                remaining_uses: &mut uses,
                rng: None,
            },
            &OpContext::standalone(),
        )
    }

    fn c(value: f32) -> Plan {
        Plan::Const(Tensor::scalar(value))
    }

    #[test]
    fn an_input_read_once_is_moved_and_updated_in_place() {
        let shared = Tensor::from_vec(vec![2], vec![1.0, 2.0]).unwrap();
        let plan = Plan::Binary(BinaryOp::Add, Box::new(Plan::Input(0)), Box::new(c(1.0)));
        let value = host_eval(&plan, &mut [Some(shared.clone())]).unwrap();
        assert_eq!(value[0].data(), &[2.0, 3.0]);
        assert_eq!(
            shared.data(),
            &[1.0, 2.0],
            "a value another holder shares is never changed"
        );
        let mut inputs = vec![Some(Tensor::from_vec(vec![2], vec![1.0, 2.0]).unwrap())];
        let buffer = inputs[0].as_ref().unwrap().data().as_ptr();
        let value = host_eval(&plan, &mut inputs).unwrap();
        assert_eq!(
            value[0].data().as_ptr(),
            buffer,
            "a value nobody else holds is updated in place"
        );
    }

    #[test]
    fn literals_stack_and_reject_ragged_rows() {
        let row = |a: f32, b: f32| Plan::List(vec![c(a), c(b)]);
        let value = host_eval(&Plan::List(vec![row(1.0, 2.0), row(3.0, 4.0)]), &mut []).unwrap();
        assert_eq!(value[0].shape(), &[2, 2]);
        assert_eq!(value[0].data(), &[1.0, 2.0, 3.0, 4.0]);
        let ragged = Plan::List(vec![row(1.0, 2.0), c(3.0)]);
        assert_eq!(
            host_eval(&ragged, &mut []).unwrap_err().message(),
            "the elements of a tensor literal must have one shape, found [2] and []"
        );
        assert_eq!(
            host_eval(&Plan::List(vec![]), &mut []).unwrap()[0].shape(),
            &[0]
        );
    }

    #[test]
    fn dimensions_must_be_whole_and_non_negative() {
        let error = host_eval(&Plan::Call(Builtin::Zeros, vec![c(2.5)]), &mut []).unwrap_err();
        assert_eq!(
            error.message(),
            "a dimension must be a whole number, not 2.5"
        );
        let error = host_eval(&Plan::Call(Builtin::Ones, vec![c(-1.0)]), &mut []).unwrap_err();
        assert_eq!(error.message(), "a dimension must not be negative, got -1");
    }

    #[test]
    fn split_gives_several_results_and_only_where_several_names_take_them() {
        let x = tensor::arange(4).unwrap();
        let plan = Plan::Call(Builtin::Split, vec![Plan::Input(0), c(2.0), c(0.0)]);
        let parts = host_eval(&plan, &mut [Some(x.clone())]).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1].data(), &[2.0, 3.0]);
        let one = Plan::Unary(tensor::UnaryOp::Neg, Box::new(plan));
        assert_eq!(
            host_eval(&one, &mut [Some(x)]).unwrap_err().message(),
            "split gives several values: assign them to several names"
        );
    }

    #[test]
    fn strings_are_paths_only() {
        let error = host_eval(
            &Plan::Call(
                Builtin::Unary(tensor::UnaryOp::Exp),
                vec![Plan::Str("x".into())],
            ),
            &mut [],
        )
        .unwrap_err();
        assert_eq!(
            error.message(),
            "the argument must be a tensor, not the string \"x\""
        );
        let error = host_eval(&Plan::Call(Builtin::Load, vec![c(1.0)]), &mut []).unwrap_err();
        assert_eq!(
            error.message(),
            "load takes a file path in quotes, e.g. load(\"x.npy\")"
        );
    }

    #[test]
    fn work_passes_its_value_through() {
        let plan = Plan::Call(Builtin::Work, vec![c(0.0), Plan::Input(0)]);
        let x = Tensor::from_vec(vec![2], vec![5.0, 6.0]).unwrap();
        assert_eq!(
            host_eval(&plan, &mut [Some(x)]).unwrap()[0].data(),
            &[5.0, 6.0]
        );
        let zero = host_eval(&Plan::Call(Builtin::Work, vec![c(0.0)]), &mut []).unwrap();
        assert_eq!(zero[0].data(), &[0.0]);
        let error = host_eval(&Plan::Call(Builtin::Work, vec![c(-1.0)]), &mut []).unwrap_err();
        assert_eq!(
            error.message(),
            "work takes a time in milliseconds from 0 to 3600000"
        );
    }
}
