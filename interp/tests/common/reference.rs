//! A serial reference interpreter of the generated programs (`failing_program.rs`), written
//! from the language's rules and independent of the engine: no scheduling, no variables' queues,
//! the statements evaluated one after the other on a map of values. Only the tensor kernels and
//! builtins are shared with dep (they compute the numbers and the messages, bit for bit).
//!
//! The rules of errors it follows:
//! - an op (one statement, one value of a `return`, one copy of each value a call returns)
//!   reads variables and writes variables; the target of `A op= x` is both read and written;
//! - an op that reads a variable holding an error is skipped: everything it writes holds that
//!   error (the root cause, the op that failed first), values are unchanged;
//! - an op that runs and fails holds its own error in everything it writes; a plain write that
//!   runs replaces the value and clears the error;
//! - a bulk (`with bulk = N { run g }`) is one op made of N consecutive recorded statements: it
//!   reads what its statements read from before it, and when it is skipped or one of its
//!   statements fails, everything it writes holds the error;
//! - `print` and `save` of a variable holding an error report that error and stop the statement
//!   (a top-level statement: a whole loop); `wait` and the end of the run report every failure
//!   not reported yet, and `wait` then stops too; a failure is reported once.
//!
//! Where the rules leave a choice (an op that reads several variables holding different errors
//! carries one of them), the reference accepts any of them: [`check`] follows the choice the
//! engine's run shows and checks that it is one the rules allow.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use dep_interp::builtins::{self, Arg};
use dep_interp::tensor::{self, BinaryOp, IndexSpec, Tensor};

use super::failing_program::{files_in, Expr, Index, Line, Program, Reported, Stmt, Transcript};

type VarId = usize;

/// What a variable holds.
#[derive(Clone)]
enum Value {
    /// Nothing yet (a graph's own name before its first write in a run).
    Unset,
    Ok(Tensor),
    /// The error of one of these failures (indices into `Reference::failures`).
    Failed(BTreeSet<usize>),
}

/// An op: the expression it evaluates (names resolved when it was pushed or recorded), the
/// variables it writes, and for `op=` the operation applied to its single write.
#[derive(Clone)]
struct Op {
    line: u32,
    label: String,
    env: HashMap<String, VarId>,
    counter: Option<i64>,
    value: Expr,
    writes: Vec<VarId>,
    update: Option<&'static str>,
}

impl Op {
    fn reads(&self) -> Vec<VarId> {
        let mut names = Vec::new();
        self.value.names(&mut names);
        let mut reads: Vec<VarId> = names.iter().map(|name| self.env[name]).collect();
        if self.update.is_some() {
            reads.push(self.writes[0]);
        }
        reads
    }
}

/// Why a top-level statement stopped: what it reported.
struct Stop(Vec<Reported>);

/// A function-call frame: locals, and whether each is the frame's own.
type Frame = HashMap<String, (VarId, bool)>;

struct Reference<'a> {
    vars: Vec<Value>,
    globals: HashMap<String, VarId>,
    functions: HashMap<&'static str, (Vec<&'static str>, Vec<Line>)>,
    graphs: HashMap<String, (Vec<Op>, Vec<VarId>)>,
    /// Every failure: its line and its report's message.
    failures: Vec<Reported>,
    /// Failures not taken by a `wait` yet, and those reported by a `print` or `save` since:
    /// for each report, the failures it may have been (those it could be, rendered the same).
    pending: Vec<usize>,
    reported: Vec<BTreeSet<usize>>,
    dir: &'a Path,
    /// The engine's reports for the statement being run, which settle the choices the rules
    /// leave.
    observed: Vec<Reported>,
}

fn binary_op(op: &str) -> BinaryOp {
    match op {
        "+" => BinaryOp::Add,
        "-" => BinaryOp::Sub,
        "*" => BinaryOp::Mul,
        "/" => BinaryOp::Div,
        _ => panic!("not an operator: {op}"),
    }
}

impl Reference<'_> {
    fn new_var(&mut self) -> VarId {
        self.vars.push(Value::Unset);
        self.vars.len() - 1
    }

    fn dir_text(&self) -> String {
        self.dir.display().to_string()
    }

    fn eval(&self, op: &Op, expr: &Expr) -> Result<Tensor, String> {
        let get = |name: &String| -> Tensor {
            match &self.vars[op.env[name]] {
                Value::Ok(value) => value.clone(),
                _ => panic!("`{name}` read without a value by `{}`", op.label),
            }
        };
        let message = |error: tensor::TensorError| error.message().to_string();
        match expr {
            Expr::Name(name) => Ok(get(name)),
            Expr::Counter => Ok(Tensor::scalar(
                op.counter.expect("a counter in a loop") as f32
            )),
            Expr::Num(text) => Ok(Tensor::scalar(text.parse::<f64>().unwrap() as f32)),
            Expr::Str(text) => Err(format!("the string {text:?} is not a tensor")),
            Expr::Binary(symbol, lhs, rhs) => {
                let (lhs, rhs) = (self.eval(op, lhs)?, self.eval(op, rhs)?);
                if *symbol == "@" {
                    tensor::matmul(&lhs, &rhs).map_err(message)
                } else {
                    tensor::binary(&lhs, binary_op(symbol), &rhs).map_err(message)
                }
            }
            Expr::Call(..) => {
                let mut values = self.eval_multi(op, expr)?;
                if values.len() != 1 {
                    return Err(format!("{expr} gives several values"));
                }
                Ok(values.remove(0))
            }
            Expr::Index(name, items) => {
                let specs: Vec<IndexSpec> = items
                    .iter()
                    .map(|item| match *item {
                        Index::Single(index) => IndexSpec::Single(index),
                        Index::Slice(start, end) => IndexSpec::Slice {
                            start: Some(start),
                            end: Some(end),
                        },
                    })
                    .collect();
                tensor::index(&get(name), &specs).map_err(message)
            }
        }
    }

    fn eval_multi(&self, op: &Op, expr: &Expr) -> Result<Vec<Tensor>, String> {
        let Expr::Call(name, args) = expr else {
            return Ok(vec![self.eval(op, expr)?]);
        };
        let builtin = builtins::lookup(name).expect("a builtin").builtin;
        let mut values = Vec::with_capacity(args.len());
        for arg in args {
            values.push(match arg {
                Expr::Str(path) => Arg::Str(path.replace("{DIR}", &self.dir_text())),
                arg => Arg::Tensor(self.eval(op, arg)?),
            });
        }
        builtins::call(builtin, &values, None).map_err(|error| error.message().to_string())
    }

    /// What the op computes for its writes.
    fn compute(&self, op: &Op) -> Result<Vec<Tensor>, String> {
        match op.update {
            Some(symbol) => {
                let rhs = self.eval(op, &op.value)?;
                let Value::Ok(mut target) = self.vars[op.writes[0]].clone() else {
                    panic!("`{}` updates a variable without a value", op.label);
                };
                tensor::binary_inplace(&mut target, binary_op(symbol), &rhs)
                    .map_err(|error| error.message().to_string())?;
                Ok(vec![target])
            }
            None => {
                let values = self.eval_multi(op, &op.value)?;
                if values.len() != op.writes.len() {
                    return Err(format!(
                        "the right side gives {} values but {} names are assigned",
                        values.len(),
                        op.writes.len()
                    ));
                }
                Ok(values)
            }
        }
    }

    /// Runs ops as one: skipped if what they read from before holds an error; the first
    /// failure stops them; either way everything they write then holds the error.
    fn run_ops(&mut self, ops: &[Op]) {
        let (mut written, mut read_before) = (Vec::new(), Vec::new());
        for op in ops {
            read_before.extend(
                op.reads()
                    .into_iter()
                    .filter(|read| !written.contains(read)),
            );
            written.extend(op.writes.iter().copied());
        }
        let errors: BTreeSet<usize> = read_before
            .iter()
            .filter_map(|&var| match &self.vars[var] {
                Value::Failed(errors) => Some(errors.iter().copied()),
                _ => None,
            })
            .flatten()
            .collect();
        if !errors.is_empty() {
            for &var in &written {
                self.vars[var] = Value::Failed(errors.clone());
            }
            return;
        }
        for op in ops {
            match self.compute(op) {
                Ok(values) => {
                    for (&var, value) in op.writes.iter().zip(values) {
                        self.vars[var] = Value::Ok(value);
                    }
                }
                Err(message) => {
                    let dir = self.dir_text();
                    let report = format!("`{}`: {message}", op.label).replace(&dir, "{DIR}");
                    self.failures.push((op.line, report));
                    let failure = self.failures.len() - 1;
                    self.pending.push(failure);
                    for &var in &written {
                        self.vars[var] = Value::Failed(BTreeSet::from([failure]));
                    }
                    return;
                }
            }
        }
    }

    /// The value of `var` for a `print` or `save`, or the report of the error it holds.
    fn wait(&mut self, var: VarId) -> Result<Tensor, Stop> {
        match &self.vars[var] {
            Value::Ok(value) => Ok(value.clone()),
            Value::Unset => panic!("a wait for a variable without a value"),
            Value::Failed(errors) => {
                // One of the errors: the ones that render as the engine's run reported, if any.
                let matching: BTreeSet<usize> = errors
                    .iter()
                    .copied()
                    .filter(|&failure| self.observed == [self.failures[failure].clone()])
                    .collect();
                let chosen = if matching.is_empty() {
                    BTreeSet::from([*errors.first().unwrap()])
                } else {
                    matching
                };
                let report = self.failures[*chosen.first().unwrap()].clone();
                self.reported.push(chosen);
                Err(Stop(vec![report]))
            }
        }
    }

    /// `wait` and the end of a run: every failure not reported yet. Which failures were
    /// reported may be open (a `print` of one of several that render alike): the reports are
    /// those of a choice that gives what the engine's run reported (`self.observed`), if one
    /// does.
    fn take_failures(&mut self) -> Result<(), Stop> {
        let render = |chosen: &BTreeSet<usize>| -> Vec<Reported> {
            let failures: Vec<Reported> = self
                .pending
                .iter()
                .filter(|failure| !chosen.contains(failure))
                .map(|&failure| self.failures[failure].clone())
                .collect();
            let mut reports = fold_repeats(failures);
            reports.sort();
            reports
        };
        let mut observed = self.observed.clone();
        observed.sort();
        let mut first_choice = None;
        let mut budget = 100_000;
        let found = choose(
            &self.reported,
            &mut BTreeSet::new(),
            &mut budget,
            &mut |chosen| {
                let reports = render(chosen);
                first_choice.get_or_insert_with(|| reports.clone());
                reports == observed
            },
        );
        let reports = if found {
            observed
        } else {
            first_choice.unwrap_or_else(|| render(&BTreeSet::new()))
        };
        self.pending.clear();
        self.reported.clear();
        if reports.is_empty() {
            Ok(())
        } else {
            Err(Stop(reports))
        }
    }

    /// The variable `name` is written to at the top level: its own, or a new one.
    fn global_target(&mut self, name: &str) -> VarId {
        if let Some(&var) = self.globals.get(name) {
            return var;
        }
        let var = self.new_var();
        self.globals.insert(name.to_string(), var);
        var
    }

    fn global_env(&self, value: &Expr) -> HashMap<String, VarId> {
        let mut names = Vec::new();
        value.names(&mut names);
        names
            .into_iter()
            .map(|name| {
                let var = *self
                    .globals
                    .get(&name)
                    .unwrap_or_else(|| panic!("`{name}` is not bound"));
                (name, var)
            })
            .collect()
    }

    /// Runs one statement at the top level or in a loop body (`counter`: the loop's).
    fn exec(&mut self, line: &Line, counter: Option<i64>, out: &mut String) -> Result<(), Stop> {
        let label = line.stmt.head();
        let op = |env, value: &Expr, writes, update| Op {
            line: line.line,
            label: label.clone(),
            env,
            counter,
            value: value.clone(),
            writes,
            update,
        };
        match &line.stmt {
            Stmt::Assign(targets, value) => {
                let env = self.global_env(value);
                let writes = targets
                    .iter()
                    .map(|name| self.global_target(name))
                    .collect();
                self.run_ops(&[op(env, value, writes, None)]);
            }
            Stmt::Update(target, symbol, value) => {
                let env = self.global_env(value);
                let writes = vec![self.globals[target]];
                self.run_ops(&[op(env, value, writes, Some(*symbol))]);
            }
            Stmt::Call(targets, function, args) => {
                // Each value returned is copied into its name, in order (dep computes a value
                // straight into an existing name when nothing after reads it: the same values
                // and errors, one op fewer).
                let results = self.call(function, args)?;
                assert_eq!(results.len(), targets.len(), "`{function}`'s values");
                for (target, result) in targets.iter().zip(results) {
                    let writes = vec![self.global_target(target)];
                    let env = HashMap::from([("result".to_string(), result)]);
                    self.run_ops(&[op(env, &Expr::Name("result".into()), writes, None)]);
                }
            }
            Stmt::Del(name) => {
                self.globals.remove(name);
            }
            Stmt::Print(items) => {
                let mut parts = Vec::new();
                for item in items {
                    let value = match item {
                        Expr::Str(text) => {
                            parts.push(text.clone());
                            continue;
                        }
                        Expr::Name(name) => self.wait(self.globals[name])?,
                        expr => {
                            // An expression is computed by an op of its own, then waited for.
                            let temporary = self.new_var();
                            let mut item_op =
                                op(self.global_env(expr), expr, vec![temporary], None);
                            item_op.label = expr.to_string();
                            self.run_ops(&[item_op]);
                            self.wait(temporary)?
                        }
                    };
                    // A number in a sentence reads as a student expects (`0.333`); a value
                    // printed alone, or a tensor, shows every digit.
                    parts.push(match value.to_scalar() {
                        Some(number) if items.len() > 1 && value.ndim() == 0 => {
                            tensor::format_for_reading(number)
                        }
                        _ => value.to_string(),
                    });
                }
                out.push_str(&parts.join(" "));
                out.push('\n');
            }
            Stmt::Save(name, path) => {
                let value = self.wait(self.globals[name])?;
                let path = path.replace("{DIR}", &self.dir_text());
                tensor::save_npy(&value, &path).expect("the reference saves");
            }
            Stmt::Wait => self.take_failures()?,
            Stmt::For(n, body) => {
                for i in 0..*n {
                    for line in body {
                        self.exec(line, Some(i), out)?;
                    }
                }
            }
            Stmt::Def(name, params, body) => {
                self.functions.insert(name, (params.clone(), body.clone()));
            }
            Stmt::Graph(name, body) => self.record(name, body),
            Stmt::Run(name, bulk) => {
                let (ops, internals) = self.graphs[name].clone();
                for var in internals {
                    self.vars[var] = Value::Unset;
                }
                for bulk in ops.chunks(bulk.unwrap_or(1)) {
                    self.run_ops(bulk);
                }
            }
            Stmt::Return(_) => panic!("`return` at the top level"),
        }
        Ok(())
    }

    /// Calls a function on global names: runs its body in a frame of its own; returns the
    /// variable holding its result.
    fn call(&mut self, function: &str, args: &[String]) -> Result<Vec<VarId>, Stop> {
        let (params, body) = self.functions[function].clone();
        let mut frame: Frame = params
            .iter()
            .zip(args)
            .map(|(param, arg)| (param.to_string(), (self.globals[arg], false)))
            .collect();
        for line in &body {
            let env_of = |frame: &Frame, value: &Expr| -> HashMap<String, VarId> {
                let mut names = Vec::new();
                value.names(&mut names);
                names
                    .into_iter()
                    .map(|name| {
                        let var = frame[&name].0;
                        (name, var)
                    })
                    .collect()
            };
            let op = |env, value: Expr, writes, update| Op {
                line: line.line,
                label: line.stmt.head(),
                env,
                counter: None,
                value,
                writes,
                update,
            };
            match &line.stmt {
                Stmt::Assign(targets, value) => {
                    let env = env_of(&frame, value);
                    let mut writes = Vec::new();
                    for target in targets {
                        let var = match frame.get(target) {
                            Some(&(var, true)) => var,
                            _ => {
                                let var = self.new_var();
                                frame.insert(target.clone(), (var, true));
                                var
                            }
                        };
                        writes.push(var);
                    }
                    self.run_ops(&[op(env, value.clone(), writes, None)]);
                }
                Stmt::Update(target, symbol, value) => match frame[target] {
                    (var, true) => {
                        let env = env_of(&frame, value);
                        self.run_ops(&[op(env, value.clone(), vec![var], Some(*symbol))]);
                    }
                    (_, false) => {
                        // A parameter: `p op= x` makes a local `p = p op x`.
                        let value = Expr::Binary(
                            symbol,
                            Box::new(Expr::Name(target.clone())),
                            Box::new(value.clone()),
                        );
                        let env = env_of(&frame, &value);
                        let local = self.new_var();
                        frame.insert(target.clone(), (local, true));
                        self.run_ops(&[op(env, value, vec![local], None)]);
                    }
                },
                Stmt::Return(values) => {
                    // A local of the call's own is given back as it is (once: returned twice,
                    // it is copied the second time), any other value computed anew, in order.
                    let mut results = Vec::with_capacity(values.len());
                    for value in values {
                        if let Expr::Name(name) = value {
                            if let Some(&(var, true)) = frame.get(name) {
                                if !results.contains(&var) {
                                    results.push(var);
                                    continue;
                                }
                            }
                        }
                        let env = env_of(&frame, value);
                        let result = self.new_var();
                        self.run_ops(&[op(env, value.clone(), vec![result], None)]);
                        results.push(result);
                    }
                    return Ok(results);
                }
                other => panic!("not in a function: {other:?}"),
            }
        }
        panic!("`{function}` returns nothing")
    }

    /// Records a graph: its ops with names resolved now; names first assigned in it are its own.
    fn record(&mut self, name: &str, body: &[Line]) {
        let mut own: HashMap<String, VarId> = HashMap::new();
        let mut ops = Vec::new();
        for line in body {
            let resolve = |own: &HashMap<String, VarId>, name: &String| -> VarId {
                own.get(name)
                    .or_else(|| self.globals.get(name))
                    .copied()
                    .unwrap_or_else(|| panic!("`{name}` is not bound in the graph"))
            };
            let (targets, value, update) = match &line.stmt {
                Stmt::Assign(targets, value) => (targets.clone(), value, None),
                Stmt::Update(target, symbol, value) => (vec![target.clone()], value, Some(*symbol)),
                other => panic!("not in a graph: {other:?}"),
            };
            let mut names = Vec::new();
            value.names(&mut names);
            let env = names
                .into_iter()
                .map(|name| {
                    let var = resolve(&own, &name);
                    (name, var)
                })
                .collect();
            let mut writes = Vec::new();
            for target in targets {
                let var = match own.get(&target).or_else(|| self.globals.get(&target)) {
                    Some(&var) => var,
                    None => {
                        let var = self.new_var();
                        own.insert(target, var);
                        var
                    }
                };
                writes.push(var);
            }
            ops.push(Op {
                line: line.line,
                label: line.stmt.head(),
                env,
                counter: None,
                value: value.clone(),
                writes,
                update,
            });
        }
        self.graphs
            .insert(name.to_string(), (ops, own.into_values().collect()));
    }
}

/// `failures`, in push order, as a run reports them: those of one statement (one line here) are
/// folded into one report that tells the first's message, how many more there were, how many
/// of those had another message, and the last such message, so that the others' messages in
/// between are not told. Returns what such a report stands for: the first message for each
/// failure with it, the last other message for each of the others.
fn fold_repeats(failures: Vec<Reported>) -> Vec<Reported> {
    let mut by_line: Vec<(Reported, u64, u64, Option<String>)> = Vec::new();
    for (line, message) in failures {
        match by_line.iter_mut().find(|(first, ..)| first.0 == line) {
            Some((first, n_same, n_other, last_other)) => {
                if message == first.1 {
                    *n_same += 1;
                } else {
                    *n_other += 1;
                    *last_other = Some(message);
                }
            }
            None => by_line.push(((line, message), 1, 0, None)),
        }
    }
    by_line
        .into_iter()
        .flat_map(|((line, first), n_same, n_other, last_other)| {
            let last_other = last_other.unwrap_or_default();
            std::iter::repeat_n((line, first), n_same as usize)
                .chain(std::iter::repeat_n((line, last_other), n_other as usize))
        })
        .collect()
}

/// Tries every way of picking one failure from each of `options` (at most `budget` of them),
/// `picked` holding the picks so far; true once `accept` takes one.
fn choose(
    options: &[BTreeSet<usize>],
    picked: &mut BTreeSet<usize>,
    budget: &mut usize,
    accept: &mut dyn FnMut(&BTreeSet<usize>) -> bool,
) -> bool {
    let Some((first, rest)) = options.split_first() else {
        *budget = budget.saturating_sub(1);
        return accept(picked);
    };
    for &failure in first {
        if *budget == 0 {
            return false;
        }
        let added = picked.insert(failure);
        if choose(rest, picked, budget, accept) {
            return true;
        }
        if added {
            picked.remove(&failure);
        }
    }
    false
}

/// Checks what a run of `program` showed (`observed`) against the reference's run of it, which
/// saves into `dir`: the same prints and reports, statement by statement, the same reports at
/// the end, the same files saved, bit for bit. Returns the first difference.
pub fn check(program: &Program, observed: &Transcript, dir: &Path) -> Result<(), String> {
    let mut reference = Reference {
        vars: Vec::new(),
        globals: HashMap::new(),
        functions: HashMap::new(),
        graphs: HashMap::new(),
        failures: Vec::new(),
        pending: Vec::new(),
        reported: Vec::new(),
        dir,
        observed: Vec::new(),
    };
    for (index, line) in program.statements.iter().enumerate() {
        let seen = observed.statements.get(index).cloned().unwrap_or_default();
        reference.observed = seen.1.clone();
        let mut out = String::new();
        let mut reports = match reference.exec(line, None, &mut out) {
            Ok(()) => Vec::new(),
            Err(Stop(reports)) => reports,
        };
        reports.sort();
        if (out.clone(), reports.clone()) != seen {
            return Err(format!(
                "the statement at line {}: the reference prints {out:?} and reports {reports:?}; the run printed {:?} and reported {:?}",
                line.line, seen.0, seen.1
            ));
        }
    }
    reference.observed = observed.at_end.clone();
    let mut at_end = reference
        .take_failures()
        .err()
        .map_or_else(Vec::new, |stop| stop.0);
    at_end.sort();
    if at_end != observed.at_end {
        return Err(format!(
            "at the end the reference reports {at_end:?}; the run reported {:?}",
            observed.at_end
        ));
    }
    let files = files_in(dir);
    let expected = Transcript {
        statements: Vec::new(),
        at_end: Vec::new(),
        files,
    };
    let saved_only = Transcript {
        statements: Vec::new(),
        at_end: Vec::new(),
        files: observed.files.clone(),
    };
    match expected.difference(&saved_only) {
        Some(difference) => Err(format!("the reference against the run: {difference}")),
        None => Ok(()),
    }
}
