//! Compiling an expression: every name resolved to an input slot or a constant, into a
//! [`Plan`] the statement's op evaluates later, on any thread.

use std::sync::Arc;

use dep_grammar as grammar;
use grammar::ExprKind;

use super::{input_index, tensor_binary, Compiled, Runner};
use crate::bindings::Binding;
use crate::builtins::{self, Builtin};
use crate::error::RunError;
use crate::plan::{Plan, PlanIndex};
use crate::slot::Slot;
use crate::statement_cache::Dependency;
use crate::tensor::{self, Tensor};

/// 2^53, past which every float64 is a whole number: whole numbers up to it are checked for
/// exactness in float32, larger ones (`1e30`) are plainly approximate.
const MAX_EXACT_F64_INTEGER: f64 = 9_007_199_254_740_992.0;

impl Runner<'_> {
    /// `expr` compiled for one value: a builtin giving several (`split`) is an error at it.
    pub(super) fn compile(&mut self, expr: &grammar::Expr) -> Result<Compiled, RunError> {
        let compiled = self.compile_values(expr)?;
        if let Plan::Call(builtin, _) = &compiled.plan {
            if builtin.is_multi() {
                let name = builtins::name_of(*builtin);
                return Err(self.error(
                    expr.span,
                    format!(
                        "{name} gives several values and must be assigned to as many names, \
                         as in `a, b = {name}(x, 2, 0)`"
                    ),
                    "several values",
                ));
            }
        }
        Ok(compiled)
    }

    /// `expr` compiled for the right side of an assignment, which may give several values.
    pub(super) fn compile_values(&mut self, expr: &grammar::Expr) -> Result<Compiled, RunError> {
        self.compiled_pure = true;
        self.dependencies.clear();
        self.names_suffice = true;
        let mut inputs = Vec::new();
        let mut temporaries = Vec::new();
        let plan = self.compile_into(expr, &mut inputs, &mut temporaries)?;
        Ok(Compiled {
            plan,
            inputs,
            temporaries,
        })
    }

    /// `value`, a number written in the source or a loop counter, as the float32 a tensor holds:
    /// an error at `expr` for a whole number that float32 cannot hold exactly (past 16777216,
    /// 2^24), written with digits only or counted, which would otherwise become its neighbour
    /// unseen (`ones(20000001)` making 20000000 elements). Other numbers, and every number
    /// written with a point or an exponent (`2.5`, `1e30`, `8.249761e+07`, as `print` writes
    /// them), are rounded, as any float32 computation rounds them.
    fn float32(&self, value: f64, expr: &grammar::Expr) -> Result<f32, RunError> {
        let single = value as f32;
        // A whole number written with digits only is checked however large (past 2^53 its
        // float64 is not exact either).
        let written = matches!(expr.kind, ExprKind::Number(_)).then(|| self.text(expr.span));
        let whole_and_changed = match written {
            Some(text) if text.bytes().all(|byte| byte.is_ascii_digit()) => {
                text.parse::<u128>().ok() != Some(single as u128)
            }
            Some(_) => false,
            None => {
                value.fract() == 0.0
                    && value.abs() <= MAX_EXACT_F64_INTEGER
                    && f64::from(single) != value
            }
        };
        if whole_and_changed {
            let shown = written.map_or_else(|| value.to_string(), str::to_string);
            return Err(self.error(
                expr.span,
                format!(
                    "{shown} is not a float32 number: tensors hold float32, whose whole numbers are \
                     exact up to 16777216; the nearest is {:.0}",
                    f64::from(single)
                ),
                "not exact in float32",
            ));
        }
        Ok(single)
    }

    pub(super) fn compile_into(
        &mut self,
        expr: &grammar::Expr,
        inputs: &mut Vec<Arc<Slot>>,
        temporaries: &mut Vec<Arc<Slot>>,
    ) -> Result<Plan, RunError> {
        Ok(match &expr.kind {
            ExprKind::Number(value) => Plan::Const(Tensor::scalar(self.float32(*value, expr)?)),
            // A string is a file's path, read by `load("x.npy")` (see the builtins' arguments
            // below); anywhere else, an error at the string.
            ExprKind::Str(text) => {
                return Err(self.error(
                    expr.span,
                    format!(
                        "the string {text:?} is not a tensor: a string in quotes is a file's \
                         path, read with load(\"x.npy\")"
                    ),
                    "a string",
                ))
            }
            ExprKind::Name(name) => match self.lookup(&name.text) {
                Some((Binding::Tensor(slot), _)) => {
                    let input = input_index(inputs, slot);
                    // What the statement cache looks the name up by, later.
                    debug_assert_eq!(name.span.text(self.source()), name.text);
                    self.dependencies.push(Dependency::Reads {
                        name: name.span,
                        input,
                    });
                    Plan::Input(input)
                }
                Some((Binding::Counter(counter), _)) => {
                    self.compiled_pure = false;
                    Plan::Const(Tensor::scalar(self.float32(counter.get() as f64, expr)?))
                }
                Some((Binding::Slots(_), _)) => return Err(self.slots_misuse(name)),
                None if self.scope.functions.contains_key(&name.text)
                    || builtins::lookup(&name.text).is_some() =>
                {
                    return Err(self.error(
                        name.span,
                        format!(
                            "`{}` is a function: call it, as in {}(...)",
                            name.text, name.text
                        ),
                        "a function",
                    ));
                }
                None => return Err(self.unknown_name(name)),
            },
            ExprKind::List(items) => {
                let items = items
                    .iter()
                    .map(|item| self.compile_into(item, inputs, temporaries))
                    .collect::<Result<Vec<_>, _>>()?;
                Plan::List(items)
            }
            ExprKind::Unary {
                op: grammar::UnaryOp::Neg,
                operand,
            } => Plan::Unary(
                tensor::UnaryOp::Neg,
                Box::new(self.compile_into(operand, inputs, temporaries)?),
            ),
            ExprKind::Binary { op, lhs, rhs } => {
                let lhs = Box::new(self.compile_into(lhs, inputs, temporaries)?);
                let rhs = Box::new(self.compile_into(rhs, inputs, temporaries)?);
                match tensor_binary(*op) {
                    Some(binary) => Plan::Binary(binary, lhs, rhs),
                    None => Plan::Matmul(lhs, rhs),
                }
            }
            ExprKind::Call { func, args, kwargs } => {
                if self.scope.functions.contains_key(&func.text) {
                    let mut results =
                        self.call_function(func, args, kwargs, expr.span, Default::default())?;
                    // After the call, whose body's statements were compiled in between.
                    self.compiled_pure = false;
                    if results.len() != 1 {
                        let line = self.line(expr.span);
                        for result in results {
                            self.delete_slot(result, line);
                        }
                        return Err(self.error(
                            expr.span,
                            format!(
                                "`{}` must return exactly one value to be used in an expression",
                                func.text
                            ),
                            "this call",
                        ));
                    }
                    let result = results.remove(0);
                    temporaries.push(result.clone());
                    return Ok(Plan::Input(input_index(inputs, result)));
                }
                match (func.text.as_str(), args.as_slice()) {
                    ("rank", []) if kwargs.is_empty() => {
                        return Ok(Plan::Const(Tensor::scalar(self.scope.comm.rank() as f32)))
                    }
                    ("ranks", []) if kwargs.is_empty() => {
                        return Ok(Plan::Const(Tensor::scalar(self.scope.comm.size() as f32)))
                    }
                    ("clock", []) => {
                        if let Some(recording) = &self.recording {
                            let block = recording.block.noun();
                            return Err(self.error(
                                expr.span,
                                format!(
                                    "clock() cannot be recorded in a {block}: it reads the \
                                     engine's clock when its statement is pushed, which a \
                                     recording does once; read it before or after"
                                ),
                                "read once, when recorded",
                            ));
                        }
                        self.compiled_pure = false;
                        // A host number: the engine's clock (virtual under `--engine sim`) now.
                        return Ok(Plan::Const(Tensor::scalar(
                            (self.scope.engine.now_ns() as f64 / 1e6) as f32,
                        )));
                    }
                    (
                        "to",
                        [value, grammar::Expr {
                            kind: ExprKind::Name(device),
                            ..
                        }],
                    ) if kwargs.is_empty() => {
                        let device = self.device_named(device)?;
                        let device = self.placement(device, expr.span)?;
                        let value = self.compile_into(value, inputs, temporaries)?;
                        return Ok(Plan::CopyTo(Box::new(value), device));
                    }
                    ("to", _) | ("clock", _) | ("rank", _) | ("ranks", _) => {
                        let usage = match func.text.as_str() {
                            "to" => "to(x, device), e.g. to(X, gpu1)",
                            "clock" => "clock(), with no arguments",
                            "rank" => "rank(), with no arguments: this process's rank",
                            _ => "ranks(), with no arguments: how many ranks the job has",
                        };
                        return Err(self.error(
                            expr.span,
                            format!("wrong arguments: the form is {usage}"),
                            "in this call",
                        ));
                    }
                    _ => {}
                }
                let Some(info) = builtins::lookup(&func.text) else {
                    let message = match func.text.as_str() {
                        "save" => {
                            "save(x, path) is a statement of its own, not a value".to_string()
                        }
                        "clock_cycles" => {
                            "clock_cycles is used in a loop: for i, j in clock_cycles(m, n) { ... }"
                                .to_string()
                        }
                        name if crate::early_errors::COMM_NAMES.contains(&name) => {
                            crate::early_errors::comm_in_expression(name)
                        }
                        _ => match self.lookup(&func.text) {
                            Some((binding, _)) => {
                                let name = &func.text;
                                let message = match binding {
                                    Binding::Tensor(_) => format!(
                                        "`{name}` is a tensor, not a function: index it with `{name}[...]`"
                                    ),
                                    Binding::Counter(_) => {
                                        format!("`{name}` is a loop counter, not a function")
                                    }
                                    Binding::Slots(_) => format!(
                                        "`{name}` is a list of variables made with slots(n), not a function: read one with `{name}[i]`"
                                    ),
                                };
                                return Err(self.error(func.span, message, "not a function"));
                            }
                            None => return Err(self.unknown_name(func)),
                        },
                    };
                    return Err(self.error(expr.span, message, "here"));
                };
                if let Some(kwarg) = kwargs.first() {
                    return Err(self.error(
                        kwarg.span,
                        format!("{} takes no keyword arguments", info.signature),
                        "here",
                    ));
                }
                let (min, max) = info.builtin.arity();
                if args.len() < min || args.len() > max {
                    return Err(self.error(
                        expr.span,
                        format!(
                            "wrong number of arguments: {} takes {}, got {}",
                            info.name,
                            info.signature,
                            args.len()
                        ),
                        "in this call",
                    ));
                }
                let args = args
                    .iter()
                    .map(|arg| match (&arg.kind, info.builtin) {
                        (ExprKind::Str(path), Builtin::Load) => Ok(Plan::Str(path.clone())),
                        (_, Builtin::Load) => Err(self.error(
                            arg.span,
                            "load takes a file's path in quotes, as in load(\"x.npy\")",
                            "not a path",
                        )),
                        _ => self.compile_into(arg, inputs, temporaries),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Plan::Call(info.builtin, args)
            }
            ExprKind::Index { base, indices }
                if matches!(
                    (&base.kind, indices.as_slice()),
                    (ExprKind::Name(_), [grammar::IndexItem::Single(_)])
                ) && self.slots_named(base) =>
            {
                let (ExprKind::Name(name), [grammar::IndexItem::Single(index)]) =
                    (&base.kind, indices.as_slice())
                else {
                    unreachable!("matched just above")
                };
                self.names_suffice = false;
                match self.slot_of(name, index)? {
                    Some(slot) => Plan::Input(input_index(inputs, slot)),
                    None => return Err(self.slots_misuse(name)),
                }
            }
            ExprKind::Index { base, indices } => {
                let base = Box::new(self.compile_into(base, inputs, temporaries)?);
                let mut items = Vec::with_capacity(indices.len());
                for index in indices {
                    items.push(match index {
                        grammar::IndexItem::Single(expr) => {
                            PlanIndex::Single(self.compile_into(expr, inputs, temporaries)?)
                        }
                        grammar::IndexItem::Slice { start, end, .. } => PlanIndex::Slice(
                            start
                                .as_ref()
                                .map(|expr| self.compile_into(expr, inputs, temporaries))
                                .transpose()?,
                            end.as_ref()
                                .map(|expr| self.compile_into(expr, inputs, temporaries))
                                .transpose()?,
                        ),
                    });
                }
                Plan::Index(base, items)
            }
        })
    }
}
