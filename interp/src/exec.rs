//! The runner: walks a parsed program and pushes one engine op per statement.
//!
//! Names resolve at push time: a statement's op captures the slots it reads and writes, and the
//! engine orders it after every earlier op on those slots. Only `print`, `save`, `wait`, shown
//! expression values and host-side numbers (loop bounds, seeds, priorities) wait for ops.
//!
//! This module holds the runner's state and hands each statement to the submodule for its
//! job: `statements` (assignments, `print`, `for`, `save`), `with_blocks` (device, priority,
//! replay settings), `functions` (user calls), `graph_statements` (`graph`), `comm_statements`
//! (ranks); below them `scope` (names and bindings), `compile` (an expression into a plan),
//! `push` (a plan into an engine op, and the statement cache) and `host` (the values the runner
//! itself waits for).

// FxHash: names are looked up on every statement; nothing here needs DoS-resistant hashing.
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use std::io::Write;
use std::sync::Arc;

use dep_engine as engine;
use dep_grammar as grammar;
use grammar::{Span, StmtKind};

use crate::bindings::{Binding, Function};
use crate::builtins;
use crate::compute::PushableOp;
use crate::error::RunError;
use crate::graph::{Recording, ReplayOptions};
use crate::plan::Plan;
use crate::slot::{lock, Slot};
use crate::statement_cache::{Dependency, StatementCache};
use crate::suggest;
use crate::tensor;

mod comm_statements;
mod compile;
mod functions;
mod graph_statements;
mod host;
mod push;
mod scope;
pub(crate) use scope::Scope;
mod statements;
mod with_blocks;

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
    locals: HashMap<Arc<str>, Local>,
    /// A graph being recorded writes the global names it assigns; a function makes locals.
    writes_globals: bool,
    /// Where the call's returned values are computed straight into, one for each (`a = f(a)`,
    /// `h, p = forward(x)`, `b = f(a)` with `b` new), rather than into temporaries copied
    /// there, then deleted; empty when the caller gave none.
    returns_into: ReturnsInto,
    /// The caller's new names whose variables the call's `return` made (see
    /// [`ReturnInto::New`]), with those variables: bound in the caller's scope when the call
    /// returns.
    made_for_caller: Vec<(Arc<str>, Arc<Slot>)>,
}

/// Where a call's values are returned into (see `Frame::returns_into`): two inline, so that a
/// call in a loop allocates nothing for them.
type ReturnsInto = SmallVec<[ReturnInto; 2]>;

/// Where one value a call returns goes in its caller.
#[derive(Clone)]
enum ReturnInto {
    /// A variable the caller's scope owns (`a = f(a)`).
    Variable(Arc<Slot>),
    /// A name the caller's scope does not own yet (`b = f(a)`, `b` new): its variable is made
    /// by the `return` that computes the value into it, named as the caller names a new
    /// variable, and bound once the call has returned, so a call that fails makes no name.
    New(Arc<str>),
}

impl ReturnInto {
    /// The caller's variable, when it exists already.
    fn variable(&self) -> Option<&Arc<Slot>> {
        match self {
            ReturnInto::Variable(slot) => Some(slot),
            ReturnInto::New(_) => None,
        }
    }
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

/// Runs statements of one source chunk (and the functions they call) in a session's [`Scope`].
pub(crate) struct Runner<'a> {
    scope: Scope<'a>,
    out: &'a mut dyn Write,
    /// The chunk the current statements' spans point into.
    source_index: usize,
    frames: Vec<Frame>,
    priority: i32,
    /// Where the ops pushed now run (`with gpu0 { ... }`).
    device: engine::Device,
    /// While a `graph` block is recorded: its ops and buffers.
    recording: Option<Recording>,
    /// How `run` replays graphs (`with lazy = 0`, `recycle = 0`, `share = 0`, `recycle_from = BYTES`,
    /// `bulk = N`).
    replay_options: ReplayOptions,
    /// Assignments compiled once and pushed again while their names keep their bindings.
    cache: StatementCache,
    /// How many times a name was bound (loop counters included): with the statement cache's
    /// epoch, what a loop checks to know its counters are still bound (see `binding_state`).
    binds: u64,
    /// Whether the expression compiled last depends on nothing but name bindings (no loop
    /// counter, clock, function call), so that its statement may be cached.
    compiled_pure: bool,
    /// The names the expression compiled last read, and the inputs they resolved to: what its
    /// statement, once cached, checks to be pushed again after the bindings changed.
    dependencies: Vec<Dependency>,
    /// Whether `dependencies` is all the expression compiled last resolved (not so for an entry
    /// of a list of variables, `x[i]`, found through its index).
    names_suffice: bool,
    /// The maps of locals of the calls that returned, emptied, for the next calls' frames.
    spare_locals: Vec<HashMap<Arc<str>, Local>>,
    /// The values of the `with` settings around the statements now that place their ops and
    /// read a loop counter (`j` of `with gpu = j`): an observed op's label tells those counters
    /// too, so that the ops a loop places on several devices are told apart.
    placed_by: Vec<Arc<str>>,
    /// This runner among the process's, so that what it notes with its statement cache's
    /// epoch (a graph's names checked, `Graph::names_checked`) is not taken for another's.
    id: u64,
}

/// The number the next runner takes (`Runner::id`).
static NEXT_RUNNER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl<'a> Runner<'a> {
    pub(crate) fn new(scope: Scope<'a>, source_index: usize, out: &'a mut dyn Write) -> Runner<'a> {
        Runner {
            id: NEXT_RUNNER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            scope,
            out,
            source_index,
            frames: Vec::new(),
            priority: 0,
            device: engine::Device::Cpu,
            recording: None,
            replay_options: ReplayOptions::default(),
            cache: StatementCache::default(),
            binds: 0,
            compiled_pure: true,
            dependencies: Vec::new(),
            names_suffice: true,
            spare_locals: Vec::new(),
            placed_by: Vec::new(),
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
    /// a kernel interrupt), or with the reason the job ended if it ended while the input ran (a
    /// simulated rank failed: the others stop as MPI_Abort stops them), cancelling the ops that
    /// have not started.
    fn check_interrupt(&self, span: grammar::Span) -> Result<(), RunError> {
        if self
            .scope
            .interrupt_check
            .as_ref()
            .is_some_and(|check| check())
        {
            self.scope.engine.cancel_pending();
            return Err(self.error(
                span,
                "interrupted: ops that had not started are cancelled; running ops finish",
                "stopped before this statement",
            ));
        }
        if self.scope.watches_job_end {
            if let Some(reason) = self.scope.comm.ended() {
                self.scope.engine.cancel_pending();
                return Err(self.error(
                    span,
                    crate::comm::job_ended(&reason),
                    "stopped before this statement",
                ));
            }
        }
        Ok(())
    }

    fn exec_stmt(&mut self, stmt: &grammar::Stmt) -> Result<Flow, RunError> {
        self.check_interrupt(stmt.span)?;
        if self.recording.is_some() {
            // Refused where parsing could not see it: in a function a recorded block calls.
            if let Some(keyword) = stmt.host_only_keyword() {
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
                let rng = self.scope.rng.clone();
                let spec = engine::OpSpec::new(self.label(stmt), move || {
                    *lock(&rng.rng) = tensor::seeded_rng(seed as u64);
                    *lock(&rng.gpu_rng) = crate::gpu::GpuRng::seeded(seed as u64);
                    Ok(())
                });
                let spec = spec
                    .writes(std::slice::from_ref(&self.scope.rng.var))
                    .line(self.line(stmt.span))
                    .priority(self.priority);
                self.scope.push(spec);
            }
            StmtKind::Wait => {
                self.wait_all(stmt.span)?;
                self.scope.take_failures().map_err(|error| {
                    let stops = if self.scope.batch {
                        "the run"
                    } else {
                        "this input"
                    };
                    error.noting_last(&format!(
                        "reported by the `wait` at {}, where {stops} stops",
                        self.place(stmt.span)
                    ))
                })?;
            }
            StmtKind::For { vars, iter, body } => return self.exec_for(stmt, vars, iter, body),
            StmtKind::Def { name, params, body } => {
                if builtins::lookup(&name.text).is_some() {
                    return Err(self.error(
                        name.span,
                        crate::early_errors::builtin_redefined(&name.text),
                        "defined here",
                    ));
                }
                // A parameter named twice is refused when the statement is parsed.
                let function = Function {
                    name: Arc::from(name.text.as_str()),
                    params: params
                        .iter()
                        .map(|param| Arc::from(param.text.as_str()))
                        .collect(),
                    body: body.clone(),
                    source_index: self.source_index,
                    def_offset: stmt.span.start,
                };
                self.scope
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
                self.rebind_graph(name)?;
                self.refuse_run_changing_globals(name)?;
                let options = self.replay_options;
                self.scope.wait_for_backlog();
                let size = self.scope.comm.size();
                let measure_first = self.scope.graphs.get(&name.text).is_some_and(|graph| {
                    graph.rank_outside(size).is_none() && graph.wants_measuring(options)
                });
                if measure_first {
                    // Its second run: the sizes the first left decide which buffers this run
                    // and the later ones keep, on every engine alike (`Graph::measure`).
                    self.wait_all(name.span)?;
                }
                match self.scope.graphs.get_mut(&name.text) {
                    Some(graph) => match graph.rank_outside(size) {
                        None => {
                            let run = (
                                &mut *self.scope.pushed_within,
                                (self.source_index, stmt.span.start),
                            );
                            graph.replay(
                                self.scope.engine,
                                self.scope.comm_counters,
                                options,
                                Some(run),
                            );
                        }
                        Some((op, rank)) => {
                            let place = crate::sources::locate_line(self.scope.sources, op.line)
                                .map_or_else(String::new, |(path, line, text)| {
                                    format!(" at {path}:{line} (`{}`)", text.trim())
                                });
                            let message = format!(
                                "graph `{}` was recorded with more ranks: its statement{place} communicates with rank {rank}, and this job has {size} rank{} (0 to {}); record it again",
                                name.text,
                                if size == 1 { "" } else { "s" },
                                size - 1,
                            );
                            return Err(self.error(name.span, message, "recorded with more ranks"));
                        }
                    },
                    None => {
                        let message = match suggest::closest(
                            &name.text,
                            self.scope.graphs.keys().map(String::as_str),
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

    fn source(&self) -> &str {
        &self.scope.sources[self.source_index].text
    }

    fn text(&self, span: Span) -> &str {
        span.text(self.source()).trim()
    }

    fn label(&mut self, stmt: &grammar::Stmt) -> Arc<str> {
        self.scope.sources[self.source_index].label(stmt.span)
    }

    /// The session-wide line of a span's start.
    fn line(&self, span: Span) -> u32 {
        self.scope.sources[self.source_index].line_of(span.start)
    }

    fn error(&self, span: Span, message: impl Into<String>, label: &str) -> RunError {
        let chunk = &self.scope.sources[self.source_index];
        RunError::runtime(chunk.report(grammar::Diagnostic::new(message, span, label)))
    }

    /// `path:line:col` of a span's start, as reports name places.
    fn place(&self, span: Span) -> String {
        self.scope.sources[self.source_index].place(span.start)
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
