//! Calls of the user's functions: a frame of locals per call, results returned as slots.

use std::sync::Arc;

use dep_grammar as grammar;
use grammar::{ExprKind, Span};

use super::push::Written;
use super::scope::names_of_new;
use super::{
    CallParts, Compiled, Flow, Frame, Local, ReturnInto, ReturnsInto, Runner, MAX_CALL_DEPTH,
};
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
    /// Values returned are computed straight into `returns_into` where given (the caller's
    /// variables they are assigned to, one for each), which are then its results (see
    /// [`Runner::return_values`]).
    pub(super) fn call_function(
        &mut self,
        func: &grammar::Name,
        args: &[grammar::Expr],
        kwargs: &[grammar::KeywordArg],
        span: Span,
        returns_into: ReturnsInto,
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
                    "`{}` takes {} ({}), got {}",
                    func.text,
                    dep_views::text::count(function.params.len(), "argument"),
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
            made_for_caller: Default::default(),
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
        for (name, slot) in frame.made_for_caller.drain(..) {
            self.bind(name, Binding::Tensor(slot), true);
        }
        Ok(results)
    }

    /// The slots of the values `return` gives: a local of the call's own as it is, any other
    /// value computed into the caller's variable it is assigned to (`Frame::returns_into`: one
    /// of the caller's, or a new one made here for a name the caller assigns), or into a
    /// temporary. Every value is compiled before any is pushed, and one is computed into
    /// the caller's variable only if no value after it reads that variable (`return b, a` into
    /// `a, b` swaps them), so the caller's variables change only as the assignment says.
    pub(super) fn return_values(
        &mut self,
        stmt: &grammar::Stmt,
        exprs: &[grammar::Expr],
    ) -> Result<Vec<Arc<Slot>>, RunError> {
        let single_into = match (exprs, self.frames.last()) {
            ([expr], Some(frame)) if self.owned_local(expr).is_none() => frame
                .returns_into
                .first()
                .filter(|_| frame.returns_into.len() == 1)
                .and_then(ReturnInto::variable),
            _ => None,
        };
        if let (Some(into), [expr]) = (single_into, exprs) {
            let into = into.clone();
            return self.return_into(stmt, expr, into);
        }
        // Taken: the call's frame ends with its `return`.
        let returns_into = match self.frames.last_mut() {
            Some(frame) if frame.returns_into.len() == exprs.len() => {
                std::mem::take(&mut frame.returns_into)
            }
            _ => ReturnsInto::new(),
        };
        let mut values = Vec::with_capacity(exprs.len());
        for expr in exprs {
            let value = match self.owned_local(expr) {
                // A local returned twice is copied the second time.
                Some(slot) if !values.iter().any(|value| is_local(value, &slot)) => {
                    ReturnValue::Local(slot)
                }
                _ => ReturnValue::Computed(self.compile(expr)?),
            };
            values.push(value);
        }
        // Where each computed value goes: its caller's variable, unless a later value reads it.
        let intos: Vec<Option<&ReturnInto>> = (0..values.len())
            .map(|index| {
                let into = returns_into.get(index)?;
                let read_later = values[index + 1..].iter().any(|later| match (later, into) {
                    (ReturnValue::Computed(compiled), ReturnInto::Variable(into)) => {
                        compiled.inputs.iter().any(|input| Arc::ptr_eq(input, into))
                    }
                    _ => false,
                });
                (!read_later).then_some(into)
            })
            .collect();
        let mut results = Vec::with_capacity(values.len());
        for (value, into) in values.into_iter().zip(intos) {
            let slot = match value {
                ReturnValue::Local(slot) => slot,
                ReturnValue::Computed(compiled) => {
                    let slot = match into {
                        Some(ReturnInto::Variable(slot)) => slot.clone(),
                        Some(ReturnInto::New(name)) => self.new_for_caller(name),
                        None => self.new_temporary("return"),
                    };
                    self.push_compute(stmt, compiled, vec![slot.clone()], None);
                    slot
                }
            };
            results.push(slot);
        }
        Ok(results)
    }

    /// A new variable for `name`, which the caller assigns the value a `return` computes into
    /// it, named as the caller names a new variable (`b`, or `b'` when the caller is a
    /// function); bound in the caller's scope once the call returns.
    fn new_for_caller(&mut self, name: &str) -> Arc<Slot> {
        let callers = &self.frames[..self.frames.len().saturating_sub(1)];
        let (bound_name, var_name) = names_of_new(callers, self.scope.local_names, name);
        let slot = self.create_slot(var_name);
        if let Some(frame) = self.frames.last_mut() {
            frame.made_for_caller.push((bound_name, slot.clone()));
        }
        slot
    }

    /// Pushes `return expr`'s one value into `into`, the caller's variable it is assigned to:
    /// the same op every call while the names it reads keep their variables (`a = f(a)` in a
    /// loop).
    fn return_into(
        &mut self,
        stmt: &grammar::Stmt,
        expr: &grammar::Expr,
        into: Arc<Slot>,
    ) -> Result<Vec<Arc<Slot>>, RunError> {
        if !self.push_cached(stmt) {
            let epoch = self.cache.epoch();
            let compiled = self.compile(expr)?;
            let pushed = self.push_compute(stmt, compiled, vec![into.clone()], None);
            self.keep_compiled(stmt, epoch, pushed, Written::ReturnsInto);
        }
        Ok(vec![into])
    }

    /// The slot of `expr` if it names a local the call owns (made in its body), which `return`
    /// gives back as it is.
    fn owned_local(&self, expr: &grammar::Expr) -> Option<Arc<Slot>> {
        let ExprKind::Name(name) = &expr.kind else {
            return None;
        };
        match self.frames.last()?.locals.get(name.text.as_str()) {
            Some(Local {
                binding: Binding::Tensor(slot),
                owned: true,
            }) => Some(slot.clone()),
            _ => None,
        }
    }
}

/// One value of a `return`, before it is pushed.
enum ReturnValue {
    /// A local of the call's own, given back as it is.
    Local(Arc<Slot>),
    /// An expression, compiled.
    Computed(Compiled),
}

fn is_local(value: &ReturnValue, slot: &Arc<Slot>) -> bool {
    matches!(value, ReturnValue::Local(local) if Arc::ptr_eq(local, slot))
}
