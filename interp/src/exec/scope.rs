//! The runner's scope and names: the `Scope` a runner works in (the parts of a session it
//! reads and writes, borrowed for one input), looking a name up (a function's locals, then the
//! globals), binding one (every change but a loop counter's next value invalidates the
//! statement cache), the slots an assignment writes and `del`.

// FxHash: names are looked up on every statement; nothing here needs DoS-resistant hashing.
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use dep_engine as engine;
use dep_grammar as grammar;
use grammar::ExprKind;

use super::{Frame, Local, Runner};
use crate::bindings::{Binding, Function};
use crate::builtins;
use crate::comm::{CommCounters, Communicator};
use crate::error::{Report, RunError};
use crate::graph::Graph;
use crate::local_names::LocalNames;
use crate::pushed_within::PushedWithin;
use crate::slot::{RngSlot, Slot};
use crate::sources::{self, SourceChunk};
use crate::suggest;

/// Asked by a runner: whether the user interrupted (before a statement), or gave up waiting
/// (while a `print` or `wait` blocks).
pub(crate) type Check<'s> = &'s (dyn Fn() -> bool + Send);

/// What a runner works in: the parts of its session it reads and writes, borrowed for one
/// input. The session makes one per input (`Session::scope`) and knows the runner; the runner
/// knows only this.
pub(crate) struct Scope<'s> {
    /// The engine every op is pushed into.
    pub(crate) engine: &'s engine::Engine,
    /// The event log, whose streaming reader a push may wait for (see `backlog`).
    pub(crate) log: Option<&'s engine::EventLog>,
    /// Whether an expression statement shows its value (a REPL, a notebook).
    pub(crate) show_expression_values: bool,
    /// Whether the session is a batch run, which ends after this input (see
    /// `SessionConfig::batch`).
    pub(crate) batch: bool,
    /// The global names.
    pub(crate) globals: &'s mut HashMap<String, Binding>,
    /// The user's functions, by name.
    pub(crate) functions: &'s mut HashMap<String, Arc<Function>>,
    /// The recorded graphs, by name.
    pub(crate) graphs: &'s mut HashMap<String, Graph>,
    /// The generators, and the variable that orders their users.
    pub(crate) rng: &'s Arc<RngSlot>,
    /// Every input the session ran, this one last: where spans, labels and lines point.
    pub(crate) sources: &'s mut [SourceChunk],
    /// How many temporaries were named so far (`f#3`), session-wide.
    pub(crate) n_temporaries: &'s mut u64,
    /// The engine's names of the functions' locals (see `local_names`).
    pub(crate) local_names: &'s mut LocalNames,
    /// Failures already reported (by a `print` or `wait`), not to report twice.
    pub(crate) reported: &'s mut Vec<Arc<engine::OpError>>,
    /// The calls and loop iterations each op was pushed within, for the reports of those that
    /// fail.
    pub(crate) pushed_within: &'s mut PushedWithin,
    /// Whether the user interrupted (see `Session::set_interrupt_check`).
    pub(crate) interrupt_check: Option<Check<'s>>,
    /// Whether the user gave up waiting (see `Session::set_abandon_check`).
    pub(crate) abandon_check: Option<Check<'s>>,
    /// The engine's cancel mark as this input began (see `engine::Engine::cancel_mark`): a
    /// variable that lost a write to a later cancel holds a value older than this input asked
    /// for.
    pub(crate) cancel_mark: u64,
    /// How this rank talks to the others.
    pub(crate) comm: &'s Arc<dyn Communicator>,
    /// Whether the job's end stops this input at its next statement (see
    /// `Communicator::ended`): the job has other ranks, and had not ended when the input began
    /// (after, the input runs, and only its communications fail). A rank alone never looks.
    pub(crate) watches_job_end: bool,
    /// The numbering of communications, in push order.
    pub(crate) comm_counters: &'s mut CommCounters,
}

impl Scope<'_> {
    /// Pushes a statement's op, after waiting while the engine has too many unfinished ops
    /// (see `backlog`): the interpreter leads the workers by a bounded number of ops.
    pub(crate) fn push(&self, spec: engine::OpSpec) -> engine::OpId {
        self.wait_for_backlog();
        self.engine.push(spec)
    }

    /// Pushes a shared op by reference (see `engine::Engine::push_shared`), after waiting for
    /// room as [`Self::push`] does.
    pub(crate) fn push_shared(&self, op: engine::SharedOp<'_>) -> engine::OpId {
        self.wait_for_backlog();
        self.engine.push_shared(op)
    }

    /// Waits while the engine has too many unfinished ops, or the event log too many events
    /// its streaming reader has not read (see `backlog`), or until the user interrupts.
    pub(crate) fn wait_for_backlog(&self) {
        let interrupted = || self.interrupt_check.is_some_and(|check| check());
        crate::backlog::wait_for_room(self.engine, self.log, &interrupted);
    }

    /// Reports the failures not reported yet (see `Session::take_failures`).
    pub(crate) fn take_failures(&mut self) -> Result<(), RunError> {
        sources::take_failures(
            self.engine,
            self.reported,
            self.sources,
            self.graphs,
            self.pushed_within,
        )
    }

    /// An op failure, rendered at its statement.
    pub(crate) fn render_op_error(&self, error: &engine::OpError) -> Report {
        sources::render_op_error(self.sources, self.graphs, self.pushed_within, error)
    }
}

/// The binding of `name` seen from the innermost of `frames` (its locals, then `globals`), and
/// whether that scope owns it.
pub(super) fn resolve<'f>(
    frames: &'f [Frame],
    globals: &'f HashMap<String, Binding>,
    name: &str,
) -> Option<(&'f Binding, bool)> {
    if let Some(frame) = frames.last() {
        if let Some(local) = frame.locals.get(name) {
            return Some((&local.binding, local.owned));
        }
    }
    let owned = frames.last().is_none_or(|frame| frame.writes_globals);
    globals.get(name).map(|binding| (binding, owned))
}

/// The name a new variable bound to `name` in the scope of `frames` is bound under, and its
/// variable's name: in a function, a local's (`name'`, or `name'2` while another local of that
/// name is alive in the engine: see `local_names`); elsewhere `name` itself, a global's.
pub(super) fn names_of_new(
    frames: &[Frame],
    local_names: &mut LocalNames,
    name: &str,
) -> (Arc<str>, Arc<str>) {
    match frames.last() {
        Some(frame) if !frame.writes_globals => local_names.of_new(name),
        _ => {
            let name: Arc<str> = Arc::from(name);
            (name.clone(), name)
        }
    }
}

impl Runner<'_> {
    /// The binding of `name`, and whether the current scope owns it.
    pub(super) fn lookup(&self, name: &str) -> Option<(Binding, bool)> {
        resolve(&self.frames, self.scope.globals, name)
            .map(|(binding, owned)| (binding.clone(), owned))
    }

    pub(super) fn name_binding(&self, expr: &grammar::Expr) -> Option<Binding> {
        match &expr.kind {
            ExprKind::Name(name) => self.lookup(&name.text).map(|(binding, _)| binding),
            _ => None,
        }
    }

    /// Where the bindings stand: it changes with every binding, rebinding, `del`, and function
    /// frame entered or left.
    pub(super) fn binding_state(&self) -> (u64, u64) {
        (self.binds, self.cache.epoch())
    }

    /// Binds `name` to `binding` in the current scope (`owned`: the scope deletes its variable
    /// when it ends). A name given as an `Arc` becomes the key of a new local as it is.
    pub(super) fn bind(
        &mut self,
        name: impl AsRef<str> + Into<Arc<str>>,
        binding: Binding,
        owned: bool,
    ) {
        self.binds += 1;
        // A loop counter's next value changes no compiled statement (none that reads a counter
        // is cached); any other binding may.
        let counter = matches!(binding, Binding::Counter(_));
        let still_counter = |old: &Binding| counter && matches!(old, Binding::Counter(_));
        // Rebinding a name (every iteration of `c = c + b`) reuses its key: no allocation.
        match self.frames.last_mut() {
            Some(frame) => match frame.locals.get_mut(name.as_ref()) {
                Some(local) if still_counter(&local.binding) => local.binding = binding,
                Some(local) => {
                    *local = Local { binding, owned };
                    self.cache.invalidate();
                }
                None => {
                    frame.locals.insert(name.into(), Local { binding, owned });
                    self.cache.invalidate();
                }
            },
            None => match self.scope.globals.get_mut(name.as_ref()) {
                Some(global) if still_counter(global) => *global = binding,
                Some(global) => {
                    *global = binding;
                    self.cache.invalidate();
                }
                None => {
                    self.scope
                        .globals
                        .insert(name.as_ref().to_string(), binding);
                    self.cache.invalidate();
                }
            },
        }
    }

    /// The slot an assignment to `target` writes: the existing variable (a write that waits for
    /// its earlier reads, seed 000), or a new one.
    pub(super) fn target_slot(&mut self, target: &grammar::Name) -> Result<Arc<Slot>, RunError> {
        match self.lookup(&target.text) {
            Some((Binding::Tensor(slot), true)) => return Ok(slot),
            Some((Binding::Counter(counter), _)) if counter.is_looping() => {
                return Err(self.error(
                    target.span,
                    format!("`{}` is a loop counter and cannot be assigned", target.text),
                    "a loop counter",
                ));
            }
            Some((Binding::Slots(_), _)) => return Err(self.slots_misuse(target)),
            // A counter whose loop ended is a name like others: assigned anew.
            Some((Binding::Tensor(_), false) | (Binding::Counter(_), _)) | None => {}
        }
        Ok(self.new_local(&target.text))
    }

    /// A new variable bound to `name` in the scope, which owns it: a global at the top level
    /// or in a graph, a local (`name'`) in a function.
    pub(super) fn new_local(&mut self, name: &str) -> Arc<Slot> {
        let names = names_of_new(&self.frames, self.scope.local_names, name);
        self.new_local_named(names)
    }

    /// [`Self::new_local`] of a name whose names are worked out (see [`names_of_new`]).
    pub(super) fn new_local_named(&mut self, (name, var_name): (Arc<str>, Arc<str>)) -> Arc<Slot> {
        let slot = self.create_slot(var_name);
        self.bind(name, Binding::Tensor(slot.clone()), true);
        slot
    }

    /// Whether statements run in a user's function now (not at the top level, nor in a graph,
    /// whose frame writes globals).
    pub(super) fn in_a_function(&self) -> bool {
        self.frames
            .last()
            .is_some_and(|frame| !frame.writes_globals)
    }

    /// Whether `name` is, from inside a function's body, a global (not a parameter or a
    /// local of the function): an update of it there (`W -= lr * g`) would make a local copy
    /// and leave the global as it was, which is never what it means.
    pub(super) fn is_global_seen_from_a_function(&self, name: &grammar::Name) -> bool {
        self.in_a_function()
            && self
                .frames
                .last()
                .is_some_and(|frame| !frame.locals.contains_key(name.text.as_str()))
            && self.scope.globals.contains_key(&name.text)
    }

    /// A new slot; while recording a graph, one of the graph's own buffers.
    pub(super) fn create_slot(&mut self, var_name: impl Into<Arc<str>>) -> Arc<Slot> {
        let slot = Slot::new(self.scope.engine.new_var(var_name));
        if let Some(recording) = &mut self.recording {
            recording.internals.push(slot.clone());
        }
        slot
    }

    pub(super) fn delete_name(&mut self, name: &grammar::Name) -> Result<(), RunError> {
        self.cache.invalidate();
        let removed = match self.frames.last_mut() {
            Some(frame) => frame
                .locals
                .remove(name.text.as_str())
                .map(|local| (local.binding, local.owned)),
            None => self
                .scope
                .globals
                .remove(name.text.as_str())
                .map(|binding| (binding, true)),
        };
        match removed {
            Some((Binding::Tensor(slot), true)) => {
                let line = self.line(name.span);
                self.delete_slot(slot, line);
                Ok(())
            }
            Some((Binding::Slots(slots), true)) => {
                let line = self.line(name.span);
                for slot in slots.iter() {
                    self.delete_slot(slot.clone(), line);
                }
                Ok(())
            }
            Some(_) => Ok(()),
            None if self.is_global_seen_from_a_function(name) => Err(self.error(
                name.span,
                format!(
                    "`{}` is a global: a function reads globals but cannot delete them; delete it \
                     where it was defined, outside the function",
                    name.text
                ),
                "a global, deleted inside a function",
            )),
            None if self.in_a_function() && self.scope.functions.contains_key(&name.text) => {
                Err(self.error(
                    name.span,
                    format!(
                        "`{}` is a function: a function cannot delete one; delete it outside",
                        name.text
                    ),
                    "a function, deleted inside a function",
                ))
            }
            None if self.scope.functions.remove(&name.text).is_some() => Ok(()),
            None if self.in_a_function() && self.scope.graphs.contains_key(&name.text) => Err(self
                .error(
                    name.span,
                    format!(
                        "`{}` is a graph: a function cannot delete one; delete it outside",
                        name.text
                    ),
                    "a graph, deleted inside a function",
                )),
            None => match self.scope.graphs.remove(&name.text) {
                Some(graph) => {
                    let line = self.line(name.span);
                    self.delete_graph_buffers(graph, line);
                    Ok(())
                }
                None => Err(self.unknown_name(name)),
            },
        }
    }

    pub(super) fn slots_misuse(&self, name: &grammar::Name) -> RunError {
        self.error(
            name.span,
            format!("`{0}` is a list of variables: read one as {0}[i], write one with set({0}, i, value)", name.text),
            "a list of variables",
        )
    }

    pub(super) fn slots_named(&self, expr: &grammar::Expr) -> bool {
        matches!(self.name_binding(expr), Some(Binding::Slots(_)))
    }

    /// The variable `x[i]` of a `slots` binding, for a host-integer index.
    pub(super) fn slot_of(
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

    pub(super) fn unknown_name(&self, name: &grammar::Name) -> RunError {
        let mut candidates: Vec<&str> = self.scope.globals.keys().map(String::as_str).collect();
        if let Some(frame) = self.frames.last() {
            candidates.extend(frame.locals.keys().map(|name| &**name));
        }
        candidates.extend(self.scope.functions.keys().map(String::as_str));
        candidates.extend(builtins::BUILTINS.iter().map(|info| info.name));
        // A name that is defined but not usable here (a tensor called) is never its own fix.
        candidates.retain(|candidate| *candidate != name.text);
        // A name first assigned inside a recorded graph is the graph's own buffer: it is not
        // kept after a run (see `graph.rs`), which a user of eager mode does not expect.
        let graph = (self.scope.graphs.iter())
            .filter(|(_, graph)| graph.has_internal_named(&name.text))
            .map(|(graph_name, _)| graph_name)
            .min();
        if let Some(graph) = graph {
            let message = format!(
                "unknown name `{0}`: `{0}` is first assigned inside graph `{graph}`, so it is the graph's own buffer, not kept after a run; assign `{0}` before `graph {graph}` to read it",
                name.text
            );
            return self.error(name.span, message, "not defined out of the graph");
        }
        let message = match suggest::closest(&name.text, candidates) {
            Some(close) => format!("unknown name `{}` (did you mean `{close}`?)", name.text),
            None => format!("unknown name `{}`", name.text),
        };
        self.error(name.span, message, "not defined")
    }
}
