//! Calls of the user's functions: a frame of locals per call, results returned as slots.

use std::sync::Arc;

use dep_grammar as grammar;
use grammar::{ExprKind, Span};

use super::push::Written;
use super::{CallParts, Flow, Frame, Local, Runner, MAX_CALL_DEPTH};
use crate::bindings::Binding;
use crate::error::RunError;
use crate::slot::Slot;

impl Runner<'_> {
    /// The call, if `expr` is a call of a user-defined function.
    pub(super) fn user_call<'e>(&self, expr: &'e grammar::Expr) -> Option<CallParts<'e>> {
        match &expr.kind {
            ExprKind::Call { func, args, kwargs }
                if self.scope.functions.contains_key(&func.text) =>
            {
                Some((func, args, kwargs))
            }
            _ => None,
        }
    }

    /// Pushes a function's body with its parameters bound; returns the slots of its results.
    /// A single value returned is computed straight into `returns_into` where given (the
    /// caller's variable it is assigned to), which is then its result.
    pub(super) fn call_function(
        &mut self,
        func: &grammar::Name,
        args: &[grammar::Expr],
        kwargs: &[grammar::KeywordArg],
        span: Span,
        returns_into: Option<Arc<Slot>>,
    ) -> Result<Vec<Arc<Slot>>, RunError> {
        let Some(function) = self.scope.functions.get(&func.text).cloned() else {
            return Err(self.unknown_name(func));
        };
        if let Some(kwarg) = kwargs.first() {
            return Err(self.error(
                kwarg.span,
                format!("`{}` takes no keyword arguments", func.text),
                "here",
            ));
        }
        if args.len() != function.params.len() {
            return Err(self.error(
                span,
                format!(
                    "`{}` takes {} arguments ({}), got {}",
                    func.text,
                    function.params.len(),
                    function.params.join(", "),
                    args.len()
                ),
                "in this call",
            ));
        }
        if self.frames.len() >= MAX_CALL_DEPTH {
            return Err(self.error(
                span,
                format!("functions call each other more than {MAX_CALL_DEPTH} deep"),
                "in this call",
            ));
        }
        let mut frame = Frame {
            locals: self.spare_locals.pop().unwrap_or_default(),
            writes_globals: false,
            returns_into,
        };
        for (param, arg) in function.params.iter().zip(args) {
            let local = match self.name_binding(arg) {
                Some(Binding::Tensor(slot)) => Local {
                    binding: Binding::Tensor(slot),
                    owned: false,
                },
                Some(binding @ (Binding::Counter(_) | Binding::Slots(_))) => Local {
                    binding,
                    owned: false,
                },
                None => {
                    let compiled = self.compile(arg)?;
                    let slot = self.new_temporary(&format!("{}.{param}", function.name));
                    let label = self.part_label(self.text(arg.span));
                    let line = self.line(arg.span);
                    self.push_labelled(label, line, compiled, vec![slot.clone()], None);
                    Local {
                        binding: Binding::Tensor(slot),
                        owned: true,
                    }
                }
            };
            frame.locals.insert(param.clone(), local);
        }
        let body = &self.scope.sources[function.source_index];
        let body_lines = (
            body.line_of(function.body.span.start),
            body.line_of(function.body.span.end),
        );
        self.scope.pushed_within.enter_call(
            self.scope.engine,
            &function.name,
            (self.source_index, span.start),
            body_lines,
        );
        let caller_source = std::mem::replace(&mut self.source_index, function.source_index);
        self.frames.push(frame);
        self.cache.invalidate();
        let flow = self.exec_block(&function.body.statements);
        let mut frame = self.frames.pop().expect("the frame pushed above");
        self.cache.invalidate();
        self.scope.pushed_within.leave(self.scope.engine);
        self.source_index = caller_source;
        let flow = flow.map_err(|error| {
            error.within(|| format!("in `{}`, called at {}", func.text, self.place(span)))
        });
        let results = match flow? {
            Flow::Return(results) => results,
            Flow::Normal => Vec::new(),
        };
        let mut owned: Vec<(Arc<str>, Arc<Slot>)> = frame
            .locals
            .drain()
            .filter_map(|(name, local)| match (local.binding, local.owned) {
                (Binding::Tensor(slot), true) => Some((name, slot)),
                _ => None,
            })
            .collect();
        self.spare_locals.push(frame.locals);
        // In name order, so that a run pushes the same ops in the same order every time.
        owned.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, slot) in owned {
            if !results.iter().any(|result| Arc::ptr_eq(result, &slot)) {
                let line = self.line(span);
                self.delete_slot(slot, line);
            }
        }
        Ok(results)
    }

    pub(super) fn return_values(
        &mut self,
        stmt: &grammar::Stmt,
        exprs: &[grammar::Expr],
    ) -> Result<Vec<Arc<Slot>>, RunError> {
        let mut results = Vec::with_capacity(exprs.len());
        for expr in exprs {
            if let ExprKind::Name(name) = &expr.kind {
                if let Some(Local {
                    binding: Binding::Tensor(slot),
                    owned: true,
                }) = self
                    .frames
                    .last()
                    .and_then(|frame| frame.locals.get(name.text.as_str()))
                {
                    if !results.iter().any(|result| Arc::ptr_eq(result, slot)) {
                        results.push(slot.clone());
                        continue;
                    }
                }
            }
            let into = match exprs {
                [_] => self
                    .frames
                    .last()
                    .and_then(|frame| frame.returns_into.clone()),
                _ => None,
            };
            let Some(into) = into else {
                let compiled = self.compile(expr)?;
                let slot = self.new_temporary("return");
                self.push_compute(stmt, compiled, vec![slot.clone()], None);
                results.push(slot);
                continue;
            };
            // Into the caller's variable: the same op every call while the names it reads keep
            // their variables (`a = f(a)` in a loop).
            if !self.push_cached(stmt) {
                let epoch = self.cache.epoch();
                let compiled = self.compile(expr)?;
                let pushed = self.push_compute(stmt, compiled, vec![into.clone()], None);
                self.keep_compiled(stmt, epoch, pushed, Written::ReturnsInto);
            }
            results.push(into);
        }
        Ok(results)
    }
}
