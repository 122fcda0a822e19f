//! The statements that compute: assignments, `op=` updates, `print`, expression statements,
//! `save` and `for` loops.

use std::sync::Arc;

use dep_grammar as grammar;
use grammar::ExprKind;

use super::push::Written;
use super::{Compiled, Flow, ReturnInto, ReturnsInto, Runner};
use crate::bindings::{Binding, LoopCounter};
use crate::builtins;
use crate::error::RunError;
use crate::plan::Plan;
use crate::slot::Slot;
use crate::tensor;

/// About what one entry of `slots(n)` takes before it holds a value (its slot, its engine
/// variable and queue, their names), measured: 10,000,000 entries took 10.9 GB.
const SLOT_BYTES: u64 = 1100;

impl Runner<'_> {
    pub(super) fn exec_assign(
        &mut self,
        stmt: &grammar::Stmt,
        targets: &[grammar::Name],
        value: &grammar::Expr,
    ) -> Result<(), RunError> {
        if self.push_cached(stmt) {
            return Ok(());
        }
        if let Some((func, args, kwargs)) = self.user_call(value) {
            // `a = f(a)`, `b = f(a)` or `h, p = forward(x)`: the values returned are computed
            // into the names assigned, a variable of this scope's or a new one (made only once
            // the call has succeeded), where the names are all different.
            let mut returns_into = ReturnsInto::new();
            for target in targets {
                let into = match self.lookup(&target.text) {
                    Some((Binding::Tensor(slot), true)) => ReturnInto::Variable(slot),
                    Some((Binding::Tensor(_), false)) | None => {
                        ReturnInto::New(Arc::from(target.text.as_str()))
                    }
                    Some(_) => {
                        returns_into.clear();
                        break;
                    }
                };
                if returns_into.iter().any(|other| same_target(other, &into)) {
                    returns_into.clear();
                    break;
                }
                returns_into.push(into);
            }
            let results = self.call_function(func, args, kwargs, value.span, returns_into)?;
            if results.len() != targets.len() {
                return Err(self.error(
                    stmt.span,
                    format!(
                        "`{}` returns {} but {}",
                        func.text,
                        dep_views::text::count(results.len(), "value"),
                        crate::compute::names_assigned(targets.len())
                    ),
                    "in this assignment",
                ));
            }
            for (target, result) in targets.iter().zip(results) {
                let output = self.target_slot(target)?;
                if Arc::ptr_eq(&output, &result) {
                    continue;
                }
                let compiled = Compiled {
                    plan: Plan::Input(0),
                    inputs: vec![result.clone()],
                    temporaries: vec![result],
                };
                self.push_compute(stmt, compiled, vec![output], None);
            }
            return Ok(());
        }
        if let (ExprKind::Call { func, args, .. }, [target]) = (&value.kind, targets) {
            if func.text == "slots" && self.lookup(&func.text).is_none() {
                let [count] = args.as_slice() else {
                    return Err(self.error(
                        value.span,
                        "slots takes a count: slots(n)",
                        "in this call",
                    ));
                };
                let count = self.host_count(count)?;
                // Each entry is a variable of its own (its slot, its queue): refused before
                // they are made when they would not fit, as a tensor too large is.
                let needed = (count as u64).saturating_mul(SLOT_BYTES);
                if let Some(budget) =
                    crate::tensor::memory_budget_bytes().filter(|budget| needed > *budget)
                {
                    return Err(self.error(
                        value.span,
                        format!(
                            "cannot make {count} variables: about {} ({} each), and only {} is available (DEP_MEMORY_LIMIT sets the budget)",
                            crate::tensor::format_bytes(needed),
                            crate::tensor::format_bytes(SLOT_BYTES),
                            crate::tensor::format_bytes(budget)
                        ),
                        "in this call",
                    ));
                }
                if self.lookup(&target.text).is_some() {
                    return Err(self.error(
                        target.span,
                        format!(
                            "`{}` is already defined; a list of variables needs a new name",
                            target.text
                        ),
                        "already defined",
                    ));
                }
                let slots: Vec<Arc<Slot>> = (0..count)
                    .map(|index| self.create_slot(format!("{}[{index}]", target.text)))
                    .collect();
                self.bind(target.text.as_str(), Binding::Slots(Arc::new(slots)), true);
                return Ok(());
            }
        }
        if self.comm_assign(stmt, targets, value)? {
            return Ok(());
        }
        let epoch = self.cache.epoch();
        let compiled = self.compile_values(value)?;
        if targets.len() > 1 && !compiled.plan.is_multi() {
            return Err(self.error(
                stmt.span,
                format!("one value cannot be unpacked into {} names", targets.len()),
                "in this assignment",
            ));
        }
        let outputs = targets
            .iter()
            .map(|target| self.target_slot(target))
            .collect::<Result<Vec<_>, _>>()?;
        let pushed = self.push_compute(stmt, compiled, outputs, None);
        self.keep_compiled(stmt, epoch, pushed, Written::Names(targets));
        Ok(())
    }

    pub(super) fn exec_aug_assign(
        &mut self,
        stmt: &grammar::Stmt,
        target: &grammar::Name,
        op: grammar::AugOp,
        value: &grammar::Expr,
    ) -> Result<(), RunError> {
        if self.push_cached(stmt) {
            return Ok(());
        }
        let binary = match op {
            grammar::AugOp::Add => tensor::BinaryOp::Add,
            grammar::AugOp::Sub => tensor::BinaryOp::Sub,
            grammar::AugOp::Mul => tensor::BinaryOp::Mul,
            grammar::AugOp::Div => tensor::BinaryOp::Div,
        };
        let owned_slot = match self.lookup(&target.text) {
            Some((Binding::Tensor(slot), true)) => slot,
            Some((Binding::Tensor(_), false)) if self.is_global_seen_from_a_function(target) => {
                return Err(self.error(
                    target.span,
                    format!(
                        "`{name}` is a global: a function reads globals but cannot update them; \
                         return the new value and assign it where you call the function \
                         (`{name} = f(...)`)",
                        name = target.text
                    ),
                    "a global, updated inside a function",
                ));
            }
            Some((Binding::Tensor(_), false)) => {
                // A parameter: `x += 1` makes a local `x = x + 1`, leaving the caller's variable.
                let lhs = grammar::Expr {
                    kind: ExprKind::Name(target.clone()),
                    span: target.span,
                };
                let mut compiled = self.compile(&lhs)?;
                let rhs =
                    self.compile_into(value, &mut compiled.inputs, &mut compiled.temporaries)?;
                compiled.plan = Plan::Binary(binary, Box::new(compiled.plan), Box::new(rhs));
                let output = self.target_slot(target)?;
                self.push_compute(stmt, compiled, vec![output], None);
                return Ok(());
            }
            Some((Binding::Counter(_), _)) => {
                return Err(self.error(
                    target.span,
                    format!("`{}` is a loop counter and cannot be updated", target.text),
                    "a loop counter",
                ));
            }
            Some((Binding::Slots(_), _)) => return Err(self.slots_misuse(target)),
            None => return Err(self.unknown_name(target)),
        };
        let epoch = self.cache.epoch();
        let compiled = self.compile(value)?;
        let pushed = self.push_compute(stmt, compiled, vec![owned_slot], Some(binary));
        self.keep_compiled(
            stmt,
            epoch,
            pushed,
            Written::Names(std::slice::from_ref(target)),
        );
        Ok(())
    }

    pub(super) fn exec_print(&mut self, items: &[grammar::Expr]) -> Result<(), RunError> {
        let mut parts = Vec::with_capacity(items.len());
        for item in items {
            match (&item.kind, self.name_binding(item)) {
                (ExprKind::Str(text), _) => parts.push(text.clone()),
                (_, Some(Binding::Counter(counter))) => parts.push(counter.get().to_string()),
                (ExprKind::Name(name), None) if self.scope.graphs.contains_key(&name.text) => {
                    // The report reads the sizes the last run left: wait for it.
                    self.wait_all(item.span)?;
                    let report = self.scope.graphs[&name.text].report();
                    parts.push(report.trim_end().to_string());
                }
                _ => {
                    let value = self.evaluate_now(item)?;
                    // In a sentence a number reads as a student expects (`0.333`, not
                    // `0.33333334`); `print X` alone shows every digit.
                    parts.push(match value.to_scalar() {
                        Some(number) if items.len() > 1 && value.ndim() == 0 => {
                            tensor::format_for_reading(number)
                        }
                        _ => value.to_string(),
                    });
                }
            }
        }
        self.write_line(&parts.join(" "));
        Ok(())
    }

    pub(super) fn exec_expr_stmt(
        &mut self,
        stmt: &grammar::Stmt,
        expr: &grammar::Expr,
    ) -> Result<(), RunError> {
        if let ExprKind::Call { func, args, kwargs } = &expr.kind {
            if func.text == "save" && self.lookup(&func.text).is_none() {
                return self.exec_save(stmt, args, kwargs);
            }
            if func.text == "set" && self.lookup(&func.text).is_none() {
                let [grammar::Expr {
                    kind: ExprKind::Name(name),
                    ..
                }, index, value] = args.as_slice()
                else {
                    return Err(self.error(
                        expr.span,
                        "set takes a list of variables, an index and a value: set(x, i, value)",
                        "in this call",
                    ));
                };
                let Some(slot) = self.slot_of(name, index)? else {
                    return Err(self.error(
                        name.span,
                        format!(
                            "`{}` is not a list of variables made with slots(n)",
                            name.text
                        ),
                        "here",
                    ));
                };
                let compiled = self.compile(value)?;
                self.push_compute(stmt, compiled, vec![slot], None);
                return Ok(());
            }
        }
        if self.comm_statement(stmt, expr)? {
            return Ok(());
        }
        if let Some((func, args, kwargs)) = self.user_call(expr) {
            let results = self.call_function(func, args, kwargs, expr.span, Default::default())?;
            for result in results {
                if self.scope.show_expression_values {
                    let value = self.wait_slot(&result, expr.span)?;
                    self.write_line(&value.to_string());
                }
                let line = self.line(expr.span);
                self.delete_slot(result, line);
            }
            return Ok(());
        }
        if self.scope.show_expression_values {
            let value = self.evaluate_now(expr)?;
            self.write_line(&value.to_string());
            return Ok(());
        }
        let compiled = self.compile(expr)?;
        let temporary = self.new_temporary("_");
        self.push_compute(stmt, compiled, vec![temporary.clone()], None);
        let line = self.line(stmt.span);
        self.delete_slot(temporary, line);
        Ok(())
    }

    pub(super) fn exec_save(
        &mut self,
        stmt: &grammar::Stmt,
        args: &[grammar::Expr],
        kwargs: &[grammar::KeywordArg],
    ) -> Result<(), RunError> {
        // It writes the file now, not when the recording runs.
        self.refuse_while_recording(stmt, "save")?;
        let path = match (args, kwargs) {
            (
                [_, grammar::Expr {
                    kind: ExprKind::Str(path),
                    ..
                }],
                [],
            ) => path.clone(),
            _ => {
                return Err(self.error(
                    stmt.span,
                    "save takes a tensor and a path in quotes: save(X, \"x.npy\")",
                    "in this call",
                ))
            }
        };
        let value = self.evaluate_now(&args[0])?;
        tensor::save_npy(&value, &path).map_err(|error| {
            self.error(stmt.span, error.message().to_string(), "in this statement")
        })
    }

    /// Runs a `for` loop's body once per row of its counters; a statement error in the body
    /// says at which iteration it stopped the loop.
    pub(super) fn exec_for(
        &mut self,
        stmt: &grammar::Stmt,
        vars: &[grammar::Name],
        iter: &grammar::ForIter,
        body: &grammar::Block,
    ) -> Result<Flow, RunError> {
        // Rows are made as the loop goes: a loop of 10^9 iterations starts at once and runs in
        // constant memory.
        let rows: Box<dyn Iterator<Item = [i64; 2]>> = match iter {
            grammar::ForIter::Range { start, end } => {
                let (start, end) = (self.host_int(start)?, self.host_int(end)?);
                if vars.len() != 1 {
                    return Err(self.error(
                        vars[0].span,
                        "a range loop has one counter: for i in 0..10 { ... }",
                        "here",
                    ));
                }
                Box::new((start..end).map(|value| [value, 0]))
            }
            grammar::ForIter::Expr(expr) => match &expr.kind {
                ExprKind::Call { func, args, .. }
                    if func.text == "clock_cycles" && args.len() == 2 =>
                {
                    if vars.len() != 2 {
                        return Err(self.error(
                            expr.span,
                            "clock_cycles gives pairs: for i, j in clock_cycles(m, n) { ... }",
                            "here",
                        ));
                    }
                    let m = self.host_count(&args[0])?;
                    let n = self.host_count(&args[1])?;
                    Box::new(
                        builtins::clock_cycles(m, n)
                            .map(|(micro_batch, partition)| [micro_batch as i64, partition as i64]),
                    )
                }
                _ => {
                    return Err(self.error(
                        expr.span,
                        "a for loop runs over a range `a..b` or clock_cycles(m, n)",
                        "not a range",
                    ))
                }
            },
        };
        let chunk = &self.scope.sources[self.source_index];
        let body_lines = (chunk.line_of(body.span.start), chunk.line_of(body.span.end));
        let names: Vec<&str> = vars.iter().map(|var| var.text.as_str()).collect();
        self.scope.pushed_within.enter_loop(
            self.scope.engine,
            &names,
            (self.source_index, stmt.span.start),
            body_lines,
        );
        let flow = self.run_rows(stmt, vars, rows, body);
        self.scope.pushed_within.leave(self.scope.engine);
        // Its counters keep their last values, now names like others: assignable.
        for var in vars {
            if let Some((Binding::Counter(counter), _)) = self.lookup(&var.text) {
                counter.end_loop();
            }
        }
        flow
    }

    /// Runs a loop's body once per row of its counters' values (see [`Runner::exec_for`]).
    fn run_rows(
        &mut self,
        stmt: &grammar::Stmt,
        vars: &[grammar::Name],
        rows: impl Iterator<Item = [i64; 2]>,
        body: &grammar::Block,
    ) -> Result<Flow, RunError> {
        // The counters this loop bound, and the runner's binding state just after: while
        // nothing was bound or rebound since (no name, no frame, no other loop's counter), the
        // names still hold these counters, and the next iteration only sets their values.
        let mut counters: Vec<LoopCounter> = Vec::with_capacity(vars.len());
        let mut bound_at = None;
        for row in rows {
            // Every statement checks for an interrupt; an empty body checks here.
            if body.statements.is_empty() {
                self.check_interrupt(body.span)?;
            }
            self.scope.pushed_within.iterate(self.scope.engine, row);
            if bound_at == Some(self.binding_state()) {
                for (counter, value) in counters.iter().zip(row) {
                    counter.set(value);
                }
            } else {
                counters.clear();
                for (var, value) in vars.iter().zip(row) {
                    let counter = LoopCounter::new(value);
                    self.bind(var.text.as_str(), Binding::Counter(counter.clone()), false);
                    counters.push(counter);
                }
                bound_at = Some(self.binding_state());
            }
            let flow = self.exec_block(&body.statements).map_err(|error| {
                error.within(|| {
                    let at: Vec<String> = vars
                        .iter()
                        .zip(row)
                        .map(|(var, value)| format!("{} = {value}", var.text))
                        .collect();
                    format!(
                        "in the loop at {}, at {}",
                        self.place(stmt.span),
                        at.join(", ")
                    )
                })
            })?;
            if let Flow::Return(results) = flow {
                return Ok(Flow::Return(results));
            }
        }
        Ok(Flow::Normal)
    }
}

/// Whether two places a call returns into are one: one variable, or one new name.
fn same_target(a: &ReturnInto, b: &ReturnInto) -> bool {
    match (a, b) {
        (ReturnInto::Variable(a), ReturnInto::Variable(b)) => Arc::ptr_eq(a, b),
        (ReturnInto::New(a), ReturnInto::New(b)) => a == b,
        _ => false,
    }
}
