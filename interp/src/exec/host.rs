//! Values the runner itself needs now (loop bounds, seeds, priorities, shown values): the
//! only places where it waits for ops.

use std::sync::Arc;

use dep_grammar as grammar;
use grammar::{ExprKind, Span};

use super::Runner;
use crate::bindings::Binding;
use crate::builtins;
use crate::error::RunError;
use crate::slot::Slot;
use crate::tensor::{self, Tensor};

impl Runner<'_> {
    /// The value of `expr` now: waits for the ops it depends on.
    pub(super) fn evaluate_now(&mut self, expr: &grammar::Expr) -> Result<Tensor, RunError> {
        if let Some(Binding::Tensor(slot)) = self.name_binding(expr) {
            if let Some(recording) = &self.recording {
                if recording.computes(&slot) {
                    let block = recording.block.noun();
                    return Err(self.error(
                        expr.span,
                        format!(
                            "`{}` is computed in a {block}, so its value is not known until it \
                             runs: a value needed while recording must be a number, a loop \
                             counter or a variable computed before",
                            self.text(expr.span)
                        ),
                        "not known until it runs",
                    ));
                }
            }
            return self.wait_slot(&slot, expr.span);
        }
        if let Some(Binding::Counter(counter)) = self.name_binding(expr) {
            return Ok(Tensor::scalar(counter.get() as f32));
        }
        if self.recording.is_some() {
            return Err(self.error(
                expr.span,
                "a value needed while recording a graph must be a number or a loop counter",
                "not known until the graph runs",
            ));
        }
        let compiled = self.compile(expr)?;
        let temporary = self.new_temporary("_");
        let label = self.part_label(self.text(expr.span));
        let line = self.line(expr.span);
        self.push_labelled(label, line, compiled, vec![temporary.clone()], None);
        let value = self.wait_slot(&temporary, expr.span);
        self.delete_slot(temporary, line);
        value
    }

    /// The error that ends an input whose `print` or `wait` the user stopped waiting for, at
    /// `span`, what was waited for. A session that goes on (a REPL, a notebook) can show the
    /// value later; a batch run ends here.
    pub(super) fn abandoned_wait(&self, span: Span) -> RunError {
        let message = if self.scope.batch {
            "interrupted while waiting (Ctrl-C): the run stops here; ops that had not started \
             are cancelled, running ones finish"
        } else {
            "interrupted while waiting (Ctrl-C): ops that had not started are cancelled and \
             write nothing; running ones go on, and a later `print` shows what they wrote"
        };
        self.error(span, message, "waiting for this")
    }

    /// Waits for every pushed op, unless the user gives up (see `Session::set_abandon_check`),
    /// then for the GPUs' kernels (a GPU op ends when they are enqueued, not run); `span` is
    /// what waits. Every op done, the recorded graphs measure their buffers (`Graph::measure`):
    /// a moment that is the same on every engine.
    pub(super) fn wait_all(&mut self, span: Span) -> Result<(), RunError> {
        match self.scope.abandon_check {
            Some(give_up) if !self.scope.engine.wait_all_or(give_up) => {
                return Err(self.abandoned_wait(span))
            }
            Some(_) => {}
            None => self.scope.engine.wait_all(),
        }
        crate::gpu::synchronize_opened()
            .map_err(|error| self.error(span, error.to_string(), "waiting for this"))?;
        for graph in self.scope.graphs.values_mut() {
            graph.measure();
        }
        Ok(())
    }

    /// The value of `slot` once its writes are done; an error names `span`, the expression
    /// that needed it.
    pub(super) fn wait_slot(&mut self, slot: &Arc<Slot>, span: Span) -> Result<Tensor, RunError> {
        let line = self.line(span);
        let waited = match self.scope.abandon_check {
            Some(give_up) => self.scope.engine.wait_var_or(&slot.var, line, give_up),
            None => Some(self.scope.engine.wait_var(&slot.var, line)),
        };
        let Some(waited) = waited else {
            return Err(self.abandoned_wait(span));
        };
        match waited {
            // No error and no value: every op that would have written it was cancelled (Ctrl-C)
            // before it started, and they write nothing. When that interrupt also gives up the
            // wait (a script's first), the wait's end and its give-up race: either way, the
            // give-up's message.
            // Given up as the wait ended: the value may be one the cancel left stale (a
            // script's Ctrl-C cancels every op not started, then gives up), never to be saved or
            // printed as the run's.
            Ok(()) if self.scope.abandon_check.is_some_and(|give_up| give_up()) => {
                Err(self.abandoned_wait(span))
            }
            Ok(()) if !slot.has_value() => Err(self.error(
                span,
                "no value: the ops that would have computed it were cancelled (Ctrl-C) before \
                 they started",
                "needed here",
            )),
            // The write this input waited for was cancelled meanwhile (a REPL's first Ctrl-C):
            // the value left is an earlier one, not this input's.
            Ok(())
                if slot
                    .var
                    .cancelled_write_mark()
                    .is_some_and(|mark| mark > self.scope.cancel_mark) =>
            {
                Err(self.error(
                    span,
                    "no new value: its last write was cancelled (Ctrl-C) before it started; it \
                     keeps the value it had before, which a new `print` shows",
                    "needed here",
                ))
            }
            Ok(()) => {
                let value = slot
                    .get()
                    .map_err(|message| self.error(span, message, "needed here"))?;
                slot.note_host_read();
                Ok(value)
            }
            Err(error) => {
                self.scope.reported.push(error.clone());
                Err(RunError::runtime(self.scope.render_op_error(&error)))
            }
        }
    }

    /// A number needed on the host now (loop bounds, seeds, priorities), in float64: a whole
    /// number past 2^53 ([`builtins::MAX_WHOLE`]), which float64 may not hold exactly, is an
    /// error at `expr` that says it is too large.
    pub(super) fn host_number(&mut self, expr: &grammar::Expr) -> Result<f64, RunError> {
        let value = self.host_value(expr)?;
        self.host_float(value, expr)
    }

    /// `value` as float64, or the error at `expr` if it is a whole number float64 may not hold.
    fn host_float(&self, value: HostNumber, expr: &grammar::Expr) -> Result<f64, RunError> {
        match value {
            HostNumber::Whole(whole) if whole.unsigned_abs() > builtins::MAX_WHOLE as u128 => {
                Err(self.error(
                    expr.span,
                    builtins::too_large("the number", whole),
                    "too large",
                ))
            }
            HostNumber::Whole(whole) => Ok(whole as f64),
            HostNumber::Real(real) | HostNumber::Fraction { real, .. } => Ok(real),
        }
    }

    /// The value of a number the runner needs, exact while it is whole: numbers written with
    /// digits only, loop counters and ranks stay whole through `+ - *`, a `/` that divides and
    /// a `**` of a whole exponent, so `seed 9007199254740993 - 1` is 2^53, not its float64's
    /// neighbour minus one.
    fn host_value(&mut self, expr: &grammar::Expr) -> Result<HostNumber, RunError> {
        match &expr.kind {
            // A whole number below 2^53 is the number written, however it was written (`3`,
            // `3.0`, `3e0`): only a larger one has its digits read again, float64 having
            // perhaps rounded them (a loop's `with` settings are evaluated at every iteration).
            ExprKind::Number(value)
                if value.fract() == 0.0 && value.abs() < builtins::MAX_WHOLE =>
            {
                return Ok(HostNumber::Whole(*value as i128));
            }
            ExprKind::Number(value) => {
                let text = self.text(expr.span);
                let whole = text
                    .bytes()
                    .all(|byte| byte.is_ascii_digit())
                    .then(|| text.parse::<i128>().ok())
                    .flatten();
                return Ok(whole.map_or(HostNumber::Real(*value), HostNumber::Whole));
            }
            ExprKind::Unary {
                op: grammar::UnaryOp::Neg,
                operand,
            } => {
                return Ok(match self.host_value(operand)? {
                    HostNumber::Whole(whole) => HostNumber::Whole(-whole),
                    HostNumber::Real(real) => HostNumber::Real(-real),
                    HostNumber::Fraction { floor, real } => HostNumber::Fraction {
                        floor: -floor - 1,
                        real: -real,
                    },
                })
            }
            ExprKind::Name(name) => {
                if let Some((Binding::Counter(counter), _)) = self.lookup(&name.text) {
                    return Ok(HostNumber::Whole(i128::from(counter.get())));
                }
            }
            ExprKind::Call { func, args, .. } if args.is_empty() && self.is_rank_call(func) => {
                let number = match func.text.as_str() {
                    "rank" => self.scope.comm.rank(),
                    _ => self.scope.comm.size(),
                };
                return Ok(HostNumber::Whole(number as i128));
            }
            // Arithmetic on numbers and loop counters stays on the host: no op, no wait.
            ExprKind::Binary { op, lhs, rhs }
                if self.is_host_number(lhs) && self.is_host_number(rhs) =>
            {
                let (left, right) = (self.host_value(lhs)?, self.host_value(rhs)?);
                if let (HostNumber::Whole(l), HostNumber::Whole(r)) = (left, right) {
                    if let Some(whole) = whole_arithmetic(*op, l, r) {
                        return Ok(HostNumber::Whole(whole));
                    }
                    if *op == grammar::BinaryOp::Div && r != 0 {
                        // A quotient with a fraction: its whole part exact, then its fraction,
                        // which float64 may round away past 2^52.
                        let floor = l.div_euclid(r);
                        let fraction = l.rem_euclid(r) as f64 / r as f64;
                        let real = self.host_float(HostNumber::Whole(floor), expr)? + fraction;
                        return Ok(HostNumber::Fraction { floor, real });
                    }
                }
                let (l, r) = (self.host_float(left, lhs)?, self.host_float(right, rhs)?);
                match op {
                    grammar::BinaryOp::Add => return Ok(HostNumber::Real(l + r)),
                    grammar::BinaryOp::Sub => return Ok(HostNumber::Real(l - r)),
                    grammar::BinaryOp::Mul => return Ok(HostNumber::Real(l * r)),
                    grammar::BinaryOp::Div => return Ok(HostNumber::Real(l / r)),
                    grammar::BinaryOp::Pow => return Ok(HostNumber::Real(l.powf(r))),
                    _ => {}
                }
            }
            _ => {}
        }
        let value = match self.read_again(expr) {
            Some(value) => value,
            None => self.evaluate_now(expr)?,
        };
        match value.to_scalar() {
            Some(number) => Ok(HostNumber::Real(number as f64)),
            None => Err(self.error(
                expr.span,
                format!(
                    "expected a number, got a tensor of shape {}",
                    tensor::shape::fmt_shape(value.shape())
                ),
                "not a number",
            )),
        }
    }

    /// The value of variable `expr` when the host read it before and no write was pushed since
    /// (a rank or a shape held in a variable, read at every use): no new wait, which under the
    /// simulated policy would stop the virtual clock until every op pushed before it has ended,
    /// so that two ranks each reading their peer again between a `recv` and the `send` the other
    /// waits for would wait for each other. The same on every engine and every run.
    fn read_again(&self, expr: &grammar::Expr) -> Option<Tensor> {
        if self.recording.is_some() {
            return None;
        }
        let Some(Binding::Tensor(slot)) = self.name_binding(expr) else {
            return None;
        };
        if !slot.read_by_host_since_written() {
            return None;
        }
        slot.get().ok()
    }

    /// Whether `expr` is made of numbers and loop counters only.
    pub(super) fn is_host_number(&self, expr: &grammar::Expr) -> bool {
        match &expr.kind {
            ExprKind::Number(_) => true,
            ExprKind::Name(_) => matches!(self.name_binding(expr), Some(Binding::Counter(_))),
            ExprKind::Call { func, args, .. } => args.is_empty() && self.is_rank_call(func),
            ExprKind::Unary { operand, .. } => self.is_host_number(operand),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.is_host_number(lhs) && self.is_host_number(rhs)
            }
            _ => false,
        }
    }

    /// Whether `func` is the builtin `rank` or `ranks` (not a user's function of that name).
    pub(super) fn is_rank_call(&self, func: &grammar::Name) -> bool {
        matches!(func.text.as_str(), "rank" | "ranks")
            && !self.scope.functions.contains_key(&func.text)
            && self.lookup(&func.text).is_none()
    }

    pub(super) fn host_int(&mut self, expr: &grammar::Expr) -> Result<i64, RunError> {
        // A whole number written as such, the usual setting or count, without 128-bit steps.
        if let ExprKind::Number(value) = expr.kind {
            if value.fract() == 0.0 && value.abs() < builtins::MAX_WHOLE {
                return Ok(value as i64);
            }
        }
        let value = match self.host_value(expr)? {
            HostNumber::Fraction { floor, real } => {
                let got = if real.fract() == 0.0 {
                    format!("one between {floor} and {}", floor + 1)
                } else {
                    real.to_string()
                };
                return Err(self.error(
                    expr.span,
                    format!("expected a whole number, got {got}"),
                    "not a whole number",
                ));
            }
            value => self.host_float(value, expr)?,
        };
        if value.is_finite() && value.abs() > builtins::MAX_WHOLE {
            return Err(self.error(
                expr.span,
                builtins::too_large("the number", value),
                "too large",
            ));
        }
        if value.fract() != 0.0 || !value.is_finite() {
            return Err(self.error(
                expr.span,
                format!("expected a whole number, got {value}"),
                "not a whole number",
            ));
        }
        Ok(value as i64)
    }

    pub(super) fn host_count(&mut self, expr: &grammar::Expr) -> Result<usize, RunError> {
        let value = self.host_int(expr)?;
        usize::try_from(value).map_err(|_| {
            self.error(
                expr.span,
                format!("expected a count, got {value}"),
                "negative",
            )
        })
    }
}

/// A number the runner computes on the host: whole while its arithmetic is exact.
#[derive(Clone, Copy)]
enum HostNumber {
    /// Exact: a whole number written below 2^53, or past it with digits only, a loop counter,
    /// a rank, or their exact arithmetic.
    Whole(i128),
    /// A quotient of whole numbers that is not whole, `floor` below it exactly; `real` may
    /// have lost its fraction to float64's rounding.
    Fraction { floor: i128, real: f64 },
    /// Anything else, as float64 computes it.
    Real(f64),
}

/// `l op r` when it is a whole number and fits in an `i128`; `None` for a comparison, a
/// division with a remainder, a negative exponent or an overflow.
fn whole_arithmetic(op: grammar::BinaryOp, l: i128, r: i128) -> Option<i128> {
    match op {
        grammar::BinaryOp::Add => l.checked_add(r),
        grammar::BinaryOp::Sub => l.checked_sub(r),
        grammar::BinaryOp::Mul => l.checked_mul(r),
        grammar::BinaryOp::Div => (r != 0 && l.checked_rem(r) == Some(0)).then(|| l / r),
        grammar::BinaryOp::Pow => u32::try_from(r).ok().and_then(|r| l.checked_pow(r)),
        _ => None,
    }
}
