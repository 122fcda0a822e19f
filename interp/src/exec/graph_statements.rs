//! `graph NAME { ... }`: recording a block's ops once, to replay with `run NAME`.

use dep_grammar as grammar;
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use super::{Flow, Frame, Runner};
use crate::bindings::Binding;
use crate::error::RunError;
use crate::graph::{External, Graph, RecordedBlock, Recording};

impl Runner<'_> {
    /// Records `body` as the graph `name` (replacing an earlier one of that name).
    pub(super) fn record_graph(
        &mut self,
        stmt: &grammar::Stmt,
        name: &grammar::Name,
        body: &grammar::Block,
    ) -> Result<(), RunError> {
        let graph = self
            .record(stmt, body, RecordedBlock::Graph)?
            .named(&name.text);
        if let Some(replaced) = self.scope.graphs.insert(name.text.clone(), graph) {
            self.delete_graph_buffers(replaced, self.line(name.span));
        }
        Ok(())
    }

    /// Deletes the buffers of a graph that is gone (deleted, or recorded again): nothing reads
    /// them any more, and the views would show them alive.
    pub(super) fn delete_graph_buffers(&mut self, graph: Graph, line: u32) {
        for internal in graph.into_internals() {
            self.delete_slot(internal, line);
        }
    }

    /// Runs `body` recording its ops instead of pushing them. Names first assigned in the block
    /// are the graph's own buffers (`graph`), or become global names after it (`priority
    /// auto`).
    pub(super) fn record(
        &mut self,
        stmt: &grammar::Stmt,
        body: &grammar::Block,
        block: RecordedBlock,
    ) -> Result<Graph, RunError> {
        if self.recording.is_some() || !self.frames.is_empty() {
            return Err(self.error(
                stmt.span,
                "a block is recorded at the top level, not inside a graph or a function",
                "here",
            ));
        }
        let base = self.scope.pushed_within.current();
        self.recording = Some(Recording::new(block, base));
        self.frames.push(Frame {
            locals: HashMap::default(),
            writes_globals: true,
            returns_into: Default::default(),
            made_for_caller: Default::default(),
        });
        self.cache.invalidate();
        let recorded = self.exec_block(&body.statements);
        let frame = self.frames.pop();
        self.cache.invalidate();
        let mut recording = self
            .recording
            .take()
            .unwrap_or_else(|| Recording::new(block, None));
        if block == RecordedBlock::Graph {
            recording.externals = self.externals_of(&recording);
        }
        if block == RecordedBlock::PriorityAuto {
            recording.internals.clear();
            for (name, local) in frame.map(|frame| frame.locals).unwrap_or_default() {
                if let Binding::Tensor(_) = local.binding {
                    self.scope.globals.insert(name.to_string(), local.binding);
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

    /// The variables the ops of `recording` use that are bound to global names (every one that
    /// is not the graph's own), by name, sorted.
    fn externals_of(&self, recording: &Recording) -> Vec<External> {
        let used: rustc_hash::FxHashSet<*const crate::slot::Slot> = recording
            .ops
            .iter()
            .flat_map(|op| op.inputs().iter().chain(op.outputs()))
            .map(Arc::as_ptr)
            .collect();
        let uses = |slot: &Arc<crate::slot::Slot>| used.contains(&Arc::as_ptr(slot));
        let mut externals = Vec::new();
        for (name, binding) in self.scope.globals.iter() {
            let name: Arc<str> = Arc::from(name.as_str());
            match binding {
                Binding::Tensor(slot) if uses(slot) => externals.push(External {
                    name,
                    entry: None,
                    slot: slot.clone(),
                }),
                Binding::Slots(slots) => {
                    for (index, slot) in slots.iter().enumerate().filter(|(_, slot)| uses(slot)) {
                        externals.push(External {
                            name: name.clone(),
                            entry: Some(index),
                            slot: slot.clone(),
                        });
                    }
                }
                _ => {}
            }
        }
        externals.sort_by(|a, b| (&a.name, a.entry).cmp(&(&b.name, b.entry)));
        externals
    }

    /// Before `run NAME`: makes the graph use the variables its names are bound to now. A name
    /// deleted and bound again since the graph was recorded (`del X`, then `X = ones(3)`) is
    /// the new variable from this run on, as a function reads the global its name is bound to
    /// at each call; a name deleted and not bound again, or bound to something that is not a
    /// variable, is an error here, at the `run`, before anything is pushed.
    pub(super) fn rebind_graph(&mut self, name: &grammar::Name) -> Result<(), RunError> {
        let Some(graph) = self.scope.graphs.get(&name.text) else {
            return Ok(());
        };
        // No name was bound anew since this runner last checked them (a loop of runs).
        let now = (self.id, self.cache.epoch());
        if graph.names_checked() == Some(now) {
            return Ok(());
        }
        let mut moves = Vec::new();
        for (index, external) in graph.externals().iter().enumerate() {
            let now = match (self.scope.globals.get(&*external.name), external.entry) {
                (Some(Binding::Tensor(slot)), None) => Some(slot),
                (Some(Binding::Slots(slots)), Some(entry)) => slots.get(entry),
                _ => None,
            };
            // Written only for an error: a run that finds every name bound as before (the
            // usual case) allocates nothing.
            let shown = || match external.entry {
                Some(entry) => format!("{}[{entry}]", external.name),
                None => external.name.to_string(),
            };
            match now {
                Some(slot) if Arc::ptr_eq(slot, &external.slot) => {}
                Some(slot) if !graph.uses(slot) => moves.push((index, slot.clone())),
                Some(_) => {
                    return Err(self.error(
                        name.span,
                        format!(
                            "graph `{}` uses `{}`, bound since it was recorded to a variable the graph already uses under another name; record the graph again",
                            name.text,
                            shown()
                        ),
                        "run here",
                    ))
                }
                None => {
                    let what = if self.scope.globals.contains_key(&*external.name) {
                        "is no longer the variable it was"
                    } else {
                        "was deleted"
                    };
                    return Err(self.error(
                        name.span,
                        format!(
                            "graph `{}` reads or writes `{}`, which {what} after the graph was recorded; assign `{}` before `run {}`",
                            name.text,
                            shown(),
                            external.name,
                            name.text
                        ),
                        "run here",
                    ));
                }
            }
        }
        if let Some(graph) = self.scope.graphs.get_mut(&name.text) {
            for (index, slot) in moves {
                graph.rebind(index, slot);
            }
            graph.note_names_checked(now);
        }
        Ok(())
    }

    /// Refuses `run NAME` inside a function when the graph writes globals: a function never
    /// changes a global (it returns new values instead), and a replay would.
    pub(super) fn refuse_run_changing_globals(&self, name: &grammar::Name) -> Result<(), RunError> {
        if !self.in_a_function() {
            return Ok(());
        }
        let Some(graph) = self.scope.graphs.get(&name.text) else {
            return Ok(());
        };
        let mut written: Vec<&str> = self
            .scope
            .globals
            .iter()
            .filter_map(|(global, binding)| match binding {
                Binding::Tensor(slot) if graph.writes(slot) => Some(global.as_str()),
                _ => None,
            })
            .collect();
        if written.is_empty() {
            return Ok(());
        }
        written.sort_unstable();
        Err(self.error(
            name.span,
            format!(
                "`run {}` inside a function would change the globals it writes ({}): a function \
                 never changes globals; run it outside the function",
                name.text,
                written.join(", ")
            ),
            "a graph that writes globals",
        ))
    }

    pub(super) fn refuse_while_recording(
        &self,
        stmt: &grammar::Stmt,
        keyword: &str,
    ) -> Result<(), RunError> {
        let Some(recording) = &self.recording else {
            return Ok(());
        };
        let block = recording.block.noun();
        Err(self.error(
            stmt.span,
            format!("`{keyword}` cannot be recorded in a {block}: a {block} holds computations only; put it before or after the {block}"),
            "cannot be recorded",
        ))
    }
}
