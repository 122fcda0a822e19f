//! The runner: walks a parsed program and pushes one engine op per statement.
//!
//! Names resolve at push time: a statement's op captures the slots it reads and writes, and the
//! engine orders it after every earlier op on those slots. Only `print`, `save`, `wait`, shown
//! expression values and host-side numbers (loop bounds, seeds, priorities) wait for ops.

// FxHash: names are looked up on every statement; nothing here needs DoS-resistant hashing.
use rustc_hash::FxHashMap as HashMap;
use std::io::Write;
use std::sync::Arc;

use dep_engine as engine;
use dep_grammar as grammar;
use grammar::{ExprKind, Span, StmtKind};

use crate::builtins;
use crate::compute::{ComputeOp, PushableOp};
use crate::error::RunError;
use crate::graph::{Graph, Recording, ReplayOptions, MAX_BULK};
use crate::plan::{Plan, PlanIndex};
use crate::session::{Binding, Function, Session};
use crate::slot::{lock, Slot};
use crate::statement_cache::StatementCache;
use crate::suggest;
use crate::tensor::{self, Tensor};

mod comm_statements;

/// The deepest chain of function calls a script may make.
const MAX_CALL_DEPTH: usize = 64;

/// What running a block ended with.
enum Flow {
    Normal,
    Return(Vec<Arc<Slot>>),
}

/// A call's parts: the function's name, its arguments and its keyword arguments.
type CallParts<'e> = (
    &'e grammar::Name,
    &'e [grammar::Expr],
    &'e [grammar::KeywordArg],
);

/// An op a statement pushed, which its statement may keep to push again.
struct Pushed {
    op: PushableOp,
    /// Whether the statement made temporaries (function results), deleted behind the op.
    had_temporaries: bool,
}

/// A function call's local names.
struct Frame {
    locals: HashMap<String, Local>,
    /// A graph being recorded writes the global names it assigns; a function makes locals.
    writes_globals: bool,
}

/// A local name: `owned` slots belong to the frame and are deleted when it ends; parameters
/// bound to the caller's variables are not owned, and assigning to them makes a new local.
struct Local {
    binding: Binding,
    owned: bool,
}

/// A compiled expression and the slots its op reads.
struct Compiled {
    plan: Plan,
    inputs: Vec<Arc<Slot>>,
    /// Temporaries (function results) to delete once the statement's op is pushed.
    temporaries: Vec<Arc<Slot>>,
}

/// Runs statements of one source chunk (and the functions they call) against a session.
pub(crate) struct Runner<'a> {
    session: &'a mut Session,
    out: &'a mut dyn Write,
    /// The chunk the current statements' spans point into.
    source_index: usize,
    frames: Vec<Frame>,
    priority: i32,
    /// Where the ops pushed now run (`with gpu0 { ... }`).
    device: engine::Device,
    /// While a `graph` block is recorded: its ops and buffers.
    recording: Option<Recording>,
    /// How `run` replays graphs (`with lazy = 0`, `recycle = 0`, `share = 0`, `bulk = N`).
    replay_options: ReplayOptions,
    /// Assignments compiled once and pushed again while their names keep their bindings.
    cache: StatementCache,
    /// Whether the expression compiled last depends on nothing but name bindings (no loop
    /// counter, clock, function call), so that its statement may be cached.
    compiled_pure: bool,
}

impl<'a> Runner<'a> {
    pub(crate) fn new(
        session: &'a mut Session,
        source_index: usize,
        out: &'a mut dyn Write,
    ) -> Runner<'a> {
        Runner {
            session,
            out,
            source_index,
            frames: Vec::new(),
            priority: 0,
            device: engine::Device::Cpu,
            recording: None,
            replay_options: ReplayOptions::default(),
            cache: StatementCache::default(),
            compiled_pure: true,
        }
    }

    pub(crate) fn run_statements(&mut self, statements: &[grammar::Stmt]) -> Result<(), RunError> {
        match self.exec_block(statements)? {
            Flow::Normal => Ok(()),
            Flow::Return(_) => Ok(()),
        }
    }

    fn exec_block(&mut self, statements: &[grammar::Stmt]) -> Result<Flow, RunError> {
        for stmt in statements {
            if let Flow::Return(results) = self.exec_stmt(stmt)? {
                return Ok(Flow::Return(results));
            }
        }
        Ok(Flow::Normal)
    }

    /// Stops the input with an "interrupted" error at `span` if the user asked to stop (Ctrl-C,
    /// a kernel interrupt), cancelling the ops that have not started.
    fn check_interrupt(&self, span: grammar::Span) -> Result<(), RunError> {
        if self
            .session
            .interrupt_check
            .as_ref()
            .is_some_and(|check| check())
        {
            self.session.cancel();
            return Err(self.error(
                span,
                "interrupted: ops that had not started are cancelled; running ops finish",
                "stopped before this statement",
            ));
        }
        Ok(())
    }

    fn exec_stmt(&mut self, stmt: &grammar::Stmt) -> Result<Flow, RunError> {
        self.check_interrupt(stmt.span)?;
        if self.recording.is_some() {
            let refused = match &stmt.kind {
                StmtKind::Print(_) => Some("print"),
                StmtKind::Wait => Some("wait"),
                StmtKind::Seed(_) => Some("seed"),
                StmtKind::Del(_) => Some("del"),
                StmtKind::Def { .. } => Some("def"),
                _ => None,
            };
            if let Some(keyword) = refused {
                self.refuse_while_recording(stmt, keyword)?;
            }
        }
        match &stmt.kind {
            StmtKind::Assign { targets, value } => self.exec_assign(stmt, targets, value)?,
            StmtKind::AugAssign { target, op, value } => {
                self.exec_aug_assign(stmt, target, *op, value)?
            }
            StmtKind::Del(names) => {
                for name in names {
                    self.delete_name(name)?;
                }
            }
            StmtKind::Print(items) => self.exec_print(items)?,
            StmtKind::Expr(expr) => self.exec_expr_stmt(stmt, expr)?,
            StmtKind::Seed(expr) => {
                let seed = self.host_int(expr)?;
                let rng = self.session.rng.clone();
                let spec = engine::OpSpec::new(self.label(stmt), move || {
                    *lock(&rng.rng) = tensor::seeded_rng(seed as u64);
                    *lock(&rng.gpu_rng) = crate::gpu::GpuRng::seeded(seed as u64);
                    Ok(())
                });
                let spec = spec
                    .writes(std::slice::from_ref(&self.session.rng.var))
                    .line(self.line(stmt.span))
                    .priority(self.priority);
                self.session.push(spec);
            }
            StmtKind::Wait => {
                self.wait_all(stmt.span)?;
                self.session.take_failures()?;
            }
            StmtKind::For { vars, iter, body } => return self.exec_for(vars, iter, body),
            StmtKind::Def { name, params, body } => {
                if builtins::lookup(&name.text).is_some() {
                    return Err(self.error(
                        name.span,
                        format!("`{}` is a builtin and cannot be redefined", name.text),
                        "defined here",
                    ));
                }
                let function = Function {
                    params: params.iter().map(|param| param.text.clone()).collect(),
                    body: body.clone(),
                    source_index: self.source_index,
                };
                self.session
                    .functions
                    .insert(name.text.clone(), Arc::new(function));
                self.cache.invalidate();
            }
            StmtKind::Return(exprs) => {
                if self.frames.is_empty() {
                    return Err(self.error(stmt.span, "`return` outside a function", "here"));
                }
                return Ok(Flow::Return(self.return_values(stmt, exprs)?));
            }
            StmtKind::With { settings, body } => return self.exec_with(settings, body),
            StmtKind::Graph { name, body } => self.record_graph(stmt, name, body)?,
            StmtKind::Run(name) => {
                self.refuse_while_recording(stmt, "run")?;
                let options = self.replay_options;
                self.session.wait_for_backlog();
                match self.session.graphs.get_mut(&name.text) {
                    Some(graph) => graph.replay(&self.session.engine, options),
                    None => {
                        let message = match suggest::closest(
                            &name.text,
                            self.session.graphs.keys().map(String::as_str),
                        ) {
                            Some(close) => {
                                format!("no graph named `{}` (did you mean `{close}`?)", name.text)
                            }
                            None => format!(
                                "no graph named `{}`; record one with `graph {} {{ ... }}`",
                                name.text, name.text
                            ),
                        };
                        return Err(self.error(name.span, message, "not a recorded graph"));
                    }
                }
            }
            StmtKind::Device {
                name,
                constructor,
                args,
            } => self.exec_device(name, constructor, args)?,
            StmtKind::PriorityAuto { body } => self.exec_priority_auto(stmt, body)?,
        }
        Ok(Flow::Normal)
    }

    // ----- statements -----

    fn exec_assign(
        &mut self,
        stmt: &grammar::Stmt,
        targets: &[grammar::Name],
        value: &grammar::Expr,
    ) -> Result<(), RunError> {
        if self.push_cached(stmt) {
            return Ok(());
        }
        if let Some((func, args, kwargs)) = self.user_call(value) {
            let results = self.call_function(func, args, kwargs, value.span)?;
            if results.len() != targets.len() {
                return Err(self.error(
                    stmt.span,
                    format!(
                        "`{}` returns {} values but {} names are assigned",
                        func.text,
                        results.len(),
                        targets.len()
                    ),
                    "in this assignment",
                ));
            }
            for (target, result) in targets.iter().zip(results) {
                let output = self.target_slot(target)?;
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
                self.bind(&target.text, Binding::Slots(Arc::new(slots)), true);
                return Ok(());
            }
        }
        if self.comm_assign(stmt, targets, value)? {
            return Ok(());
        }
        let epoch = self.cache.epoch();
        let compiled = self.compile(value)?;
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
        self.keep_compiled(stmt, epoch, pushed);
        Ok(())
    }

    fn exec_aug_assign(
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
        self.keep_compiled(stmt, epoch, pushed);
        Ok(())
    }

    fn exec_print(&mut self, items: &[grammar::Expr]) -> Result<(), RunError> {
        let mut parts = Vec::with_capacity(items.len());
        for item in items {
            match (&item.kind, self.name_binding(item)) {
                (ExprKind::Str(text), _) => parts.push(text.clone()),
                (_, Some(Binding::Counter(value))) => parts.push(value.to_string()),
                (ExprKind::Name(name), None) if self.session.graphs.contains_key(&name.text) => {
                    // The report reads the sizes the last run left: wait for it.
                    self.wait_all(item.span)?;
                    let report = self.session.graphs[&name.text].report();
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

    fn exec_expr_stmt(
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
            let results = self.call_function(func, args, kwargs, expr.span)?;
            for result in results {
                if self.session.config.show_expression_values {
                    let value = self.wait_slot(&result, expr.span)?;
                    self.write_line(&value.to_string());
                }
                self.delete_slot(result);
            }
            return Ok(());
        }
        if self.session.config.show_expression_values {
            let value = self.evaluate_now(expr)?;
            self.write_line(&value.to_string());
            return Ok(());
        }
        let compiled = self.compile(expr)?;
        let temporary = self.new_temporary("_");
        self.push_compute(stmt, compiled, vec![temporary.clone()], None);
        self.delete_slot(temporary);
        Ok(())
    }

    fn exec_save(
        &mut self,
        stmt: &grammar::Stmt,
        args: &[grammar::Expr],
        kwargs: &[grammar::KeywordArg],
    ) -> Result<(), RunError> {
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

    fn exec_for(
        &mut self,
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
        for row in rows {
            // Every statement checks for an interrupt; an empty body checks here.
            if body.statements.is_empty() {
                self.check_interrupt(body.span)?;
            }
            for (var, value) in vars.iter().zip(row) {
                self.bind(&var.text, Binding::Counter(value), false);
            }
            if let Flow::Return(results) = self.exec_block(&body.statements)? {
                return Ok(Flow::Return(results));
            }
        }
        Ok(Flow::Normal)
    }

    fn exec_with(
        &mut self,
        settings: &[grammar::WithSetting],
        body: &grammar::Block,
    ) -> Result<Flow, RunError> {
        let saved_priority = self.priority;
        let saved_options = self.replay_options;
        let saved_device = self.device;
        let mut runs_here = true;
        for setting in settings {
            match setting {
                grammar::WithSetting::Value { key, value }
                    if matches!(key.text.as_str(), "lazy" | "recycle" | "share") =>
                {
                    let enabled = self.host_int(value)? != 0;
                    match key.text.as_str() {
                        "lazy" => self.replay_options.lazy = enabled,
                        "recycle" => self.replay_options.recycle = enabled,
                        _ => self.replay_options.share = enabled,
                    }
                }
                grammar::WithSetting::Value { key, value } if key.text == "bulk" => {
                    let n_ops = self.host_int(value)?;
                    self.replay_options.bulk = usize::try_from(n_ops)
                        .ok()
                        .filter(|n_ops| (1..=MAX_BULK).contains(n_ops))
                        .ok_or_else(|| {
                            self.error(
                                value.span,
                                format!("bulk = {n_ops}: a bulk holds 1 to {MAX_BULK} ops"),
                                "this size",
                            )
                        })?;
                }
                grammar::WithSetting::Value { key, value } if key.text == "priority" => {
                    let priority = self.host_int(value)?;
                    self.priority = i32::try_from(priority).map_err(|_| {
                        self.error(
                            value.span,
                            format!("priority {priority} is out of range"),
                            "this priority",
                        )
                    })?;
                }
                grammar::WithSetting::Value { key, value } if key.text == "gpu" => {
                    let index = self.host_int(value)?;
                    let device = u16::try_from(index)
                        .ok()
                        .filter(|index| *index < engine::MAX_GPUS)
                        .map(engine::Device::Gpu)
                        .ok_or_else(|| {
                            self.error(
                                value.span,
                                format!("gpu {index} is not a GPU index"),
                                "this index",
                            )
                        })?;
                    self.device = self.placement(device, value.span)?;
                }
                grammar::WithSetting::Value { key, value } if key.text == "rank" => {
                    runs_here &= self.runs_on_rank(value)?;
                }
                grammar::WithSetting::Value { key, .. } => {
                    return Err(self.error(
                        key.span,
                        format!(
                            "unknown setting `{}` (expected `priority = N`, `bulk = N`, `lazy`, `recycle` or `share = 0|1`, `rank = K`, or a device)",
                            key.text
                        ),
                        "here",
                    ));
                }
                grammar::WithSetting::Device(name) => {
                    let device = self.device_named(name)?;
                    self.device = self.placement(device, name.span)?;
                }
            }
        }
        let flow = if runs_here {
            self.exec_block(&body.statements)
        } else {
            Ok(Flow::Normal)
        };
        self.priority = saved_priority;
        self.replay_options = saved_options;
        self.device = saved_device;
        flow
    }

    /// The device a name in `with NAME` or `to(X, NAME)` means.
    fn device_named(&self, name: &grammar::Name) -> Result<engine::Device, RunError> {
        match name.text.parse::<engine::Device>() {
            Ok(device) => Ok(device),
            Err(message) => Err(self.error(name.span, message, "this device")),
        }
    }

    /// Checks that ops may run on `device`: any device under the simulated engine; otherwise the
    /// CPU, or a GPU that is really there.
    fn placement(&self, device: engine::Device, span: Span) -> Result<engine::Device, RunError> {
        if self.session.engine.policy() == engine::Policy::Sim {
            return Ok(device);
        }
        match device {
            engine::Device::Gpu(index) => {
                match crate::gpu::placement_error(index, crate::gpu::detect()) {
                    None => Ok(device),
                    Some(message) => Err(self.error(span, message, "this device")),
                }
            }
            _ => Ok(device),
        }
    }

    // ----- functions -----

    /// The call, if `expr` is a call of a user-defined function.
    fn user_call<'e>(&self, expr: &'e grammar::Expr) -> Option<CallParts<'e>> {
        match &expr.kind {
            ExprKind::Call { func, args, kwargs }
                if self.session.functions.contains_key(&func.text) =>
            {
                Some((func, args, kwargs))
            }
            _ => None,
        }
    }

    /// Pushes a function's body with its parameters bound; returns the slots of its results.
    fn call_function(
        &mut self,
        func: &grammar::Name,
        args: &[grammar::Expr],
        kwargs: &[grammar::KeywordArg],
        span: Span,
    ) -> Result<Vec<Arc<Slot>>, RunError> {
        let Some(function) = self.session.functions.get(&func.text).cloned() else {
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
            locals: HashMap::default(),
            writes_globals: false,
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
                    let slot = self.new_temporary(&format!("{}.{param}", func.text));
                    let label: Arc<str> = Arc::from(self.text(arg.span));
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
        let caller_source = std::mem::replace(&mut self.source_index, function.source_index);
        self.frames.push(frame);
        self.cache.invalidate();
        let flow = self.exec_block(&function.body.statements);
        let frame = self.frames.pop().expect("the frame pushed above");
        self.cache.invalidate();
        self.source_index = caller_source;
        let results = match flow? {
            Flow::Return(results) => results,
            Flow::Normal => Vec::new(),
        };
        // In name order, so that a run pushes the same ops in the same order every time.
        let mut locals: Vec<(String, Local)> = frame.locals.into_iter().collect();
        locals.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, local) in locals {
            if let (Binding::Tensor(slot), true) = (local.binding, local.owned) {
                if !results.iter().any(|result| Arc::ptr_eq(result, &slot)) {
                    self.delete_slot(slot);
                }
            }
        }
        Ok(results)
    }

    fn return_values(
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
                    .and_then(|frame| frame.locals.get(&name.text))
                {
                    if !results.iter().any(|result| Arc::ptr_eq(result, slot)) {
                        results.push(slot.clone());
                        continue;
                    }
                }
            }
            let compiled = self.compile(expr)?;
            let slot = self.new_temporary("return");
            self.push_compute(stmt, compiled, vec![slot.clone()], None);
            results.push(slot);
        }
        Ok(results)
    }

    // ----- names -----

    /// The binding of `name`, and whether the current scope owns it.
    fn lookup(&self, name: &str) -> Option<(Binding, bool)> {
        if let Some(frame) = self.frames.last() {
            if let Some(local) = frame.locals.get(name) {
                return Some((local.binding.clone(), local.owned));
            }
        }
        let owned = self.frames.last().is_none_or(|frame| frame.writes_globals);
        self.session
            .globals
            .get(name)
            .map(|binding| (binding.clone(), owned))
    }

    fn name_binding(&self, expr: &grammar::Expr) -> Option<Binding> {
        match &expr.kind {
            ExprKind::Name(name) => self.lookup(&name.text).map(|(binding, _)| binding),
            _ => None,
        }
    }

    fn bind(&mut self, name: &str, binding: Binding, owned: bool) {
        // A loop counter's next value changes no compiled statement (none that reads a counter
        // is cached); any other binding may.
        let counter = matches!(binding, Binding::Counter(_));
        let still_counter = |old: &Binding| counter && matches!(old, Binding::Counter(_));
        // Rebinding a name (every iteration of `c = c + b`) reuses its key: no allocation.
        match self.frames.last_mut() {
            Some(frame) => match frame.locals.get_mut(name) {
                Some(local) if still_counter(&local.binding) => local.binding = binding,
                Some(local) => {
                    *local = Local { binding, owned };
                    self.cache.invalidate();
                }
                None => {
                    frame
                        .locals
                        .insert(name.to_string(), Local { binding, owned });
                    self.cache.invalidate();
                }
            },
            None => match self.session.globals.get_mut(name) {
                Some(global) if still_counter(global) => *global = binding,
                Some(global) => {
                    *global = binding;
                    self.cache.invalidate();
                }
                None => {
                    self.session.globals.insert(name.to_string(), binding);
                    self.cache.invalidate();
                }
            },
        }
    }

    /// The slot an assignment to `target` writes: the existing variable (a write that waits for
    /// its earlier reads, seed 000), or a new one.
    fn target_slot(&mut self, target: &grammar::Name) -> Result<Arc<Slot>, RunError> {
        match self.lookup(&target.text) {
            Some((Binding::Tensor(slot), true)) => return Ok(slot),
            Some((Binding::Counter(_), _)) => {
                return Err(self.error(
                    target.span,
                    format!("`{}` is a loop counter and cannot be assigned", target.text),
                    "a loop counter",
                ));
            }
            Some((Binding::Slots(_), _)) => return Err(self.slots_misuse(target)),
            Some((Binding::Tensor(_), false)) | None => {}
        }
        let var_name = match self.frames.last() {
            None => target.text.clone(),
            Some(frame) if frame.writes_globals => target.text.clone(),
            Some(_) => format!("{}'", target.text),
        };
        let slot = self.create_slot(var_name);
        self.bind(&target.text, Binding::Tensor(slot.clone()), true);
        Ok(slot)
    }

    /// A new slot; while recording a graph, one of the graph's own buffers.
    fn create_slot(&mut self, var_name: String) -> Arc<Slot> {
        let slot = Slot::new(self.session.engine.new_var(var_name));
        if let Some(recording) = &mut self.recording {
            recording.internals.push(slot.clone());
        }
        slot
    }

    // ----- simulated devices and priorities -----

    /// `device gpu1 = sim(tflops=100, gbps=2000, latency_us=5, launch_us=5, sync=1)`: the
    /// simulated model of a device
    /// (or of every GPU with `gpu`, of links with `pcie` / `nvlink`, of the copy lane with
    /// `copy`). Fields not given keep their defaults; real engines ignore the models.
    fn exec_device(
        &mut self,
        name: &grammar::Name,
        constructor: &grammar::Name,
        args: &[grammar::KeywordArg],
    ) -> Result<(), RunError> {
        if constructor.text != "sim" {
            return Err(self.error(
                constructor.span,
                format!(
                    "unknown device model `{}` (expected sim(...))",
                    constructor.text
                ),
                "here",
            ));
        }
        let Some(mut model) = engine::sim::default_model(&name.text) else {
            return Err(self.error(name.span, format!("`{}` is not a device to simulate (expected cpu, gpu, gpu0, ..., copy, pcie, nvlink or net)", name.text), "this name"));
        };
        for arg in args {
            let value = self.host_number(&arg.value)?;
            if !(value.is_finite() && value >= 0.0) {
                return Err(self.error(
                    arg.value.span,
                    format!("{} must be a number from 0 up, got {value}", arg.name.text),
                    "this value",
                ));
            }
            match arg.name.text.as_str() {
                "tflops" => model.flops_per_s = value * 1e12,
                "gflops" => model.flops_per_s = value * 1e9,
                "gbps" => model.bytes_per_s = value * 1e9,
                "latency_us" => model.latency_ns = (value * 1e3).round() as u64,
                "launch_us" => model.launch_ns = (value * 1e3).round() as u64,
                "sync" => model.sync = value != 0.0,
                "streams" | "lanes" if value >= 1.0 && value.fract() == 0.0 => {
                    model.lanes = value as usize
                }
                other => {
                    return Err(self.error(arg.name.span, format!("unknown field `{other}` (expected tflops, gflops, gbps, latency_us, launch_us, sync, or a whole number of streams)"), "this field"));
                }
            }
        }
        self.session.engine.set_sim_device(&name.text, model);
        Ok(())
    }

    /// `priority auto { ... }`: records the block, ranks its ops by HEFT's upward rank (the
    /// longest path of estimated costs from the op to the end, seed 004), and pushes them once
    /// with those ranks as priorities, so ops on the critical path go first.
    fn exec_priority_auto(
        &mut self,
        stmt: &grammar::Stmt,
        body: &grammar::Block,
    ) -> Result<(), RunError> {
        let graph = self.record(stmt, body, true)?;
        graph.run_with_upward_ranks(&self.session.engine);
        Ok(())
    }

    // ----- graphs -----

    /// Records `body` as the graph `name` (replacing an earlier one of that name).
    fn record_graph(
        &mut self,
        stmt: &grammar::Stmt,
        name: &grammar::Name,
        body: &grammar::Block,
    ) -> Result<(), RunError> {
        let graph = self.record(stmt, body, false)?.named(&name.text);
        self.session.graphs.insert(name.text.clone(), graph);
        Ok(())
    }

    /// Runs `body` recording its ops instead of pushing them. With `keep_names`, names first
    /// assigned in the block become global names after it (`priority auto`); otherwise they are
    /// the graph's own buffers (`graph`).
    fn record(
        &mut self,
        stmt: &grammar::Stmt,
        body: &grammar::Block,
        keep_names: bool,
    ) -> Result<Graph, RunError> {
        if self.recording.is_some() || !self.frames.is_empty() {
            return Err(self.error(
                stmt.span,
                "a block is recorded at the top level, not inside a graph or a function",
                "here",
            ));
        }
        self.recording = Some(Recording::default());
        self.frames.push(Frame {
            locals: HashMap::default(),
            writes_globals: true,
        });
        self.cache.invalidate();
        let recorded = self.exec_block(&body.statements);
        let frame = self.frames.pop();
        self.cache.invalidate();
        let mut recording = self.recording.take().unwrap_or_default();
        if keep_names {
            recording.internals.clear();
            for (name, local) in frame.map(|frame| frame.locals).unwrap_or_default() {
                if let Binding::Tensor(_) = local.binding {
                    self.session.globals.insert(name, local.binding);
                }
            }
        }
        match recorded? {
            Flow::Normal => Ok(Graph::new("block", recording)),
            Flow::Return(_) => {
                Err(self.error(stmt.span, "`return` inside a recorded block", "here"))
            }
        }
    }

    fn refuse_while_recording(&self, stmt: &grammar::Stmt, keyword: &str) -> Result<(), RunError> {
        if self.recording.is_none() {
            return Ok(());
        }
        Err(self.error(
            stmt.span,
            format!("`{keyword}` cannot be recorded in a graph: a graph holds computations only; put it before or after the graph"),
            "inside a graph",
        ))
    }

    fn delete_name(&mut self, name: &grammar::Name) -> Result<(), RunError> {
        self.cache.invalidate();
        let removed = match self.frames.last_mut() {
            Some(frame) => frame
                .locals
                .remove(&name.text)
                .map(|local| (local.binding, local.owned)),
            None => self
                .session
                .globals
                .remove(&name.text)
                .map(|binding| (binding, true)),
        };
        match removed {
            Some((Binding::Tensor(slot), true)) => {
                self.delete_slot(slot);
                Ok(())
            }
            Some((Binding::Slots(slots), true)) => {
                for slot in slots.iter() {
                    self.delete_slot(slot.clone());
                }
                Ok(())
            }
            Some(_) => Ok(()),
            None if self.session.functions.remove(&name.text).is_some() => Ok(()),
            None => Err(self.unknown_name(name)),
        }
    }

    fn slots_misuse(&self, name: &grammar::Name) -> RunError {
        self.error(
            name.span,
            format!("`{0}` is a list of variables: read one as {0}[i], write one with set({0}, i, value)", name.text),
            "a list of variables",
        )
    }

    fn slots_named(&self, expr: &grammar::Expr) -> bool {
        matches!(self.name_binding(expr), Some(Binding::Slots(_)))
    }

    /// The variable `x[i]` of a `slots` binding, for a host-integer index.
    fn slot_of(
        &mut self,
        name: &grammar::Name,
        index: &grammar::Expr,
    ) -> Result<Option<Arc<Slot>>, RunError> {
        let Some((Binding::Slots(slots), _)) = self.lookup(&name.text) else {
            return Ok(None);
        };
        if !matches!(index.kind, ExprKind::Number(_)) {
            // The index is a host value (a counter, a variable's value) that may change.
            self.compiled_pure = false;
        }
        let position = self.host_int(index)?;
        match usize::try_from(position)
            .ok()
            .and_then(|position| slots.get(position))
        {
            Some(slot) => Ok(Some(slot.clone())),
            None => Err(self.error(
                index.span,
                format!(
                    "index {position} is out of range for `{}`, a list of {} variables",
                    name.text,
                    slots.len()
                ),
                "this index",
            )),
        }
    }

    fn unknown_name(&self, name: &grammar::Name) -> RunError {
        let mut candidates: Vec<&str> = self.session.globals.keys().map(String::as_str).collect();
        if let Some(frame) = self.frames.last() {
            candidates.extend(frame.locals.keys().map(String::as_str));
        }
        candidates.extend(self.session.functions.keys().map(String::as_str));
        candidates.extend(builtins::BUILTINS.iter().map(|info| info.name));
        let message = match suggest::closest(&name.text, candidates) {
            Some(close) => format!("unknown name `{}` (did you mean `{close}`?)", name.text),
            None => format!("unknown name `{}`", name.text),
        };
        self.error(name.span, message, "not defined")
    }

    // ----- compiling expressions -----

    fn compile(&mut self, expr: &grammar::Expr) -> Result<Compiled, RunError> {
        self.compiled_pure = true;
        let mut inputs = Vec::new();
        let mut temporaries = Vec::new();
        let plan = self.compile_into(expr, &mut inputs, &mut temporaries)?;
        Ok(Compiled {
            plan,
            inputs,
            temporaries,
        })
    }

    fn compile_into(
        &mut self,
        expr: &grammar::Expr,
        inputs: &mut Vec<Arc<Slot>>,
        temporaries: &mut Vec<Arc<Slot>>,
    ) -> Result<Plan, RunError> {
        Ok(match &expr.kind {
            ExprKind::Number(value) => Plan::Const(Tensor::scalar(*value as f32)),
            ExprKind::Str(text) => Plan::Str(text.clone()),
            ExprKind::Name(name) => match self.lookup(&name.text) {
                Some((Binding::Tensor(slot), _)) => Plan::Input(input_index(inputs, slot)),
                Some((Binding::Counter(value), _)) => {
                    self.compiled_pure = false;
                    Plan::Const(Tensor::scalar(value as f32))
                }
                Some((Binding::Slots(_), _)) => return Err(self.slots_misuse(name)),
                None if self.session.functions.contains_key(&name.text)
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
                if self.session.functions.contains_key(&func.text) {
                    self.compiled_pure = false;
                    let mut results = self.call_function(func, args, kwargs, expr.span)?;
                    if results.len() != 1 {
                        for result in results {
                            self.delete_slot(result);
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
                    ("rank", []) => {
                        return Ok(Plan::Const(Tensor::scalar(self.session.comm.rank() as f32)))
                    }
                    ("ranks", []) => {
                        return Ok(Plan::Const(Tensor::scalar(self.session.comm.size() as f32)))
                    }
                    ("clock", []) => {
                        self.compiled_pure = false;
                        // A host number: the engine's clock (virtual under `--engine sim`) now.
                        return Ok(Plan::Const(Tensor::scalar(
                            (self.session.engine.now_ns() as f64 / 1e6) as f32,
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
                    ("to", _) | ("clock", _) => {
                        let usage = if func.text == "to" {
                            "to(x, device), e.g. to(X, gpu1)"
                        } else {
                            "clock(), with no arguments"
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
                        "allreduce" | "broadcast" | "recv" | "send" => format!(
                            "{} is a statement of its own (x = allreduce(x), broadcast(x, root), send(x, to), x = recv(from, shape...)), not part of an expression",
                            func.text
                        ),
                        _ => return Err(self.unknown_name(func)),
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
                    .map(|arg| self.compile_into(arg, inputs, temporaries))
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

    // ----- pushing -----

    /// Pushes the statement's op (see [`Self::push_labelled`]).
    fn push_compute(
        &mut self,
        stmt: &grammar::Stmt,
        compiled: Compiled,
        outputs: Vec<Arc<Slot>>,
        update: Option<tensor::BinaryOp>,
    ) -> Option<Pushed> {
        let label = self.op_label(stmt, &outputs);
        let line = self.line(stmt.span);
        self.push_labelled(label, line, compiled, outputs, update)
    }

    /// Pushes the op kept for `stmt` if it is still valid here (see `statement_cache`); says
    /// whether it did.
    fn push_cached(&mut self, stmt: &grammar::Stmt) -> bool {
        if self.recording.is_some() {
            return false;
        }
        let key = (self.source_index, stmt.span.start);
        let Some(op) = self.cache.get(key, self.device, self.priority) else {
            return false;
        };
        // Another statement may have placed an output elsewhere since.
        for output in &op.op().outputs {
            output.set_home(self.device);
        }
        // A kept statement reads no loop counter and writes no `set` slot, so its label has
        // nothing of the iteration to add (`op_label`): the statement's text, as compiled.
        let spec = op.spec(op.op().label.clone());
        self.session.push(spec);
        true
    }

    /// The label of the op `stmt` pushes to write `outputs`: its text, and when the engine is
    /// observed, which iteration of a loop it is (see `labels`).
    fn op_label(&mut self, stmt: &grammar::Stmt, outputs: &[Arc<Slot>]) -> Arc<str> {
        let label = self.label(stmt);
        if !self.session.engine.is_observed() {
            // Views tell a loop's ops apart; an unobserved run keeps the shared label.
            return label;
        }
        let written = outputs.first().map(|slot| slot.var.name());
        let counter = |name: &str| match self.lookup(name) {
            Some((Binding::Counter(value), _)) => Some(value),
            _ => None,
        };
        crate::labels::with_iteration(&label, written, counter).unwrap_or(label)
    }

    /// Keeps the op just pushed for `stmt`, compiled when the bindings were at `epoch`, if
    /// its plan depends on nothing else (see `statement_cache`).
    fn keep_compiled(&mut self, stmt: &grammar::Stmt, epoch: u64, pushed: Option<Pushed>) {
        let Some(pushed) = pushed else { return };
        if !self.compiled_pure || pushed.had_temporaries || pushed.op.op().plan.copy_to().is_some()
        {
            return;
        }
        let key = (self.source_index, stmt.span.start);
        self.cache
            .insert(key, epoch, self.device, self.priority, pushed.op);
    }

    /// Pushes one op that evaluates `compiled` into `outputs` (or, with `update`, applies it in
    /// place to the single output), then deletes the statement's temporaries behind it. Returns
    /// what it pushed (nothing while a graph is recorded).
    fn push_labelled(
        &mut self,
        label: Arc<str>,
        line: u32,
        compiled: Compiled,
        outputs: Vec<Arc<Slot>>,
        update: Option<tensor::BinaryOp>,
    ) -> Option<Pushed> {
        let Compiled {
            plan,
            inputs,
            temporaries,
        } = compiled;
        let rng = plan.uses_rng().then(|| self.session.rng.clone());
        let device = match plan.copy_to() {
            Some(to) => {
                let from = inputs
                    .first()
                    .map_or(engine::Device::Cpu, |input| input.home());
                // Already there: the copy is a no-op on its destination, whatever the block's
                // placement, so that the result lives where `to` says.
                if from == to {
                    to
                } else {
                    engine::Device::link(from, to)
                }
            }
            None => self.device,
        };
        let home = match device {
            engine::Device::Link(..) => plan.copy_to().unwrap_or(engine::Device::Cpu),
            device => device,
        };
        for output in &outputs {
            output.set_home(home);
        }
        let op = ComputeOp {
            label,
            line,
            device,
            priority: self.priority,
            plan: Arc::new(plan),
            inputs,
            outputs,
            update,
            rng,
        };
        if let Some(recording) = &mut self.recording {
            // Temporaries of a recorded statement are the graph's own buffers, released by
            // liveness on replay.
            recording.ops.push(op);
            return None;
        }
        let label = op.label.clone();
        let op = PushableOp::new(op);
        self.session.push(op.spec(label));
        let had_temporaries = !temporaries.is_empty();
        for temporary in temporaries {
            self.delete_slot(temporary);
        }
        Some(Pushed {
            op,
            had_temporaries,
        })
    }

    fn delete_slot(&mut self, slot: Arc<Slot>) {
        if self.recording.is_some() {
            // A graph's own buffer: released by liveness when the graph runs.
            return;
        }
        let var = slot.var.clone();
        self.session.engine.delete_var(var, move || slot.clear());
    }

    fn new_temporary(&mut self, hint: &str) -> Arc<Slot> {
        self.session.n_temporaries += 1;
        let name = format!("{hint}#{}", self.session.n_temporaries);
        self.create_slot(name)
    }

    // ----- waiting -----

    /// The value of `expr` now: waits for the ops it depends on.
    fn evaluate_now(&mut self, expr: &grammar::Expr) -> Result<Tensor, RunError> {
        if let Some(Binding::Tensor(slot)) = self.name_binding(expr) {
            return self.wait_slot(&slot, expr.span);
        }
        if let Some(Binding::Counter(value)) = self.name_binding(expr) {
            return Ok(Tensor::scalar(value as f32));
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
        let label: Arc<str> = Arc::from(self.text(expr.span));
        let line = self.line(expr.span);
        self.push_labelled(label, line, compiled, vec![temporary.clone()], None);
        let value = self.wait_slot(&temporary, expr.span);
        self.delete_slot(temporary);
        value
    }

    /// The error that ends an input whose `print` or `wait` the user stopped waiting for, at
    /// `span`, what was waited for.
    fn abandoned_wait(&self, span: Span) -> RunError {
        self.error(
            span,
            "interrupted while waiting (Ctrl-C): the awaited ops go on running; `print` the value \
             again to see it",
            "waiting for this",
        )
    }

    /// Waits for every pushed op, unless the user gives up (see `Session::set_abandon_check`);
    /// `span` is what waits.
    fn wait_all(&self, span: Span) -> Result<(), RunError> {
        match &self.session.abandon_check {
            Some(give_up) if !self.session.engine.wait_all_or(give_up) => {
                Err(self.abandoned_wait(span))
            }
            Some(_) => Ok(()),
            None => {
                self.session.engine.wait_all();
                Ok(())
            }
        }
    }

    /// The value of `slot` once its writes are done; an error names `span`, the expression
    /// that needed it.
    fn wait_slot(&mut self, slot: &Arc<Slot>, span: Span) -> Result<Tensor, RunError> {
        let waited = match &self.session.abandon_check {
            Some(give_up) => self.session.engine.wait_var_or(&slot.var, give_up),
            None => Some(self.session.engine.wait_var(&slot.var)),
        };
        let Some(waited) = waited else {
            return Err(self.abandoned_wait(span));
        };
        match waited {
            Ok(()) => slot
                .get()
                .map_err(|message| self.error(span, message, "needed here")),
            Err(error) => {
                self.session.reported.push(error.clone());
                Err(RunError::runtime(self.session.render_op_error(&error)))
            }
        }
    }

    /// A number needed on the host now (loop bounds, seeds, priorities).
    fn host_number(&mut self, expr: &grammar::Expr) -> Result<f64, RunError> {
        match &expr.kind {
            ExprKind::Number(value) => return Ok(*value),
            ExprKind::Unary {
                op: grammar::UnaryOp::Neg,
                operand,
            } => return Ok(-self.host_number(operand)?),
            ExprKind::Name(name) => {
                if let Some((Binding::Counter(value), _)) = self.lookup(&name.text) {
                    return Ok(value as f64);
                }
            }
            ExprKind::Call { func, args, .. } if args.is_empty() && self.is_rank_call(func) => {
                return Ok(match func.text.as_str() {
                    "rank" => self.session.comm.rank(),
                    _ => self.session.comm.size(),
                } as f64);
            }
            // Arithmetic on numbers and loop counters stays on the host: no op, no wait.
            ExprKind::Binary { op, lhs, rhs }
                if self.is_host_number(lhs) && self.is_host_number(rhs) =>
            {
                let (lhs, rhs) = (self.host_number(lhs)?, self.host_number(rhs)?);
                match op {
                    grammar::BinaryOp::Add => return Ok(lhs + rhs),
                    grammar::BinaryOp::Sub => return Ok(lhs - rhs),
                    grammar::BinaryOp::Mul => return Ok(lhs * rhs),
                    grammar::BinaryOp::Div => return Ok(lhs / rhs),
                    grammar::BinaryOp::Pow => return Ok(lhs.powf(rhs)),
                    _ => {}
                }
            }
            _ => {}
        }
        let value = self.evaluate_now(expr)?;
        match value.to_scalar() {
            Some(number) => Ok(number as f64),
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

    /// Whether `expr` is made of numbers and loop counters only.
    fn is_host_number(&self, expr: &grammar::Expr) -> bool {
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
    fn is_rank_call(&self, func: &grammar::Name) -> bool {
        matches!(func.text.as_str(), "rank" | "ranks")
            && !self.session.functions.contains_key(&func.text)
            && self.lookup(&func.text).is_none()
    }

    fn host_int(&mut self, expr: &grammar::Expr) -> Result<i64, RunError> {
        let value = self.host_number(expr)?;
        if value.fract() != 0.0 || !value.is_finite() || value.abs() > 9.0e15 {
            return Err(self.error(
                expr.span,
                format!("expected a whole number, got {value}"),
                "not a whole number",
            ));
        }
        Ok(value as i64)
    }

    fn host_count(&mut self, expr: &grammar::Expr) -> Result<usize, RunError> {
        let value = self.host_int(expr)?;
        usize::try_from(value).map_err(|_| {
            self.error(
                expr.span,
                format!("expected a count, got {value}"),
                "negative",
            )
        })
    }

    // ----- places and output -----

    fn source(&self) -> &str {
        &self.session.sources[self.source_index].text
    }

    fn text(&self, span: Span) -> &str {
        span.text(self.source()).trim()
    }

    fn label(&mut self, stmt: &grammar::Stmt) -> Arc<str> {
        self.session.sources[self.source_index].label(stmt.span)
    }

    /// The session-wide line of a span's start.
    fn line(&self, span: Span) -> u32 {
        self.session.sources[self.source_index].line_of(span.start)
    }

    fn error(&self, span: Span, message: impl Into<String>, label: &str) -> RunError {
        let chunk = &self.session.sources[self.source_index];
        RunError::runtime(chunk.report(grammar::Diagnostic::new(message, span, label)))
    }

    fn write_line(&mut self, text: &str) {
        // Output is best effort: a closed pipe must not turn into a script error.
        let _ = writeln!(self.out, "{text}");
    }
}

fn input_index(inputs: &mut Vec<Arc<Slot>>, slot: Arc<Slot>) -> usize {
    match inputs.iter().position(|input| Arc::ptr_eq(input, &slot)) {
        Some(index) => index,
        None => {
            inputs.push(slot);
            inputs.len() - 1
        }
    }
}

fn tensor_binary(op: grammar::BinaryOp) -> Option<tensor::BinaryOp> {
    use grammar::BinaryOp as G;
    use tensor::BinaryOp as T;
    Some(match op {
        G::Add => T::Add,
        G::Sub => T::Sub,
        G::Mul => T::Mul,
        G::Div => T::Div,
        G::Pow => T::Pow,
        G::Less => T::Lt,
        G::LessEqual => T::Le,
        G::Greater => T::Gt,
        G::GreaterEqual => T::Ge,
        G::Equal => T::Eq,
        G::NotEqual => T::Ne,
        G::MatMul => return None,
    })
}
