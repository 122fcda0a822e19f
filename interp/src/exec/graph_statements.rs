//! `graph NAME { ... }`: recording a block's ops once, to replay with `run NAME`.

use dep_grammar as grammar;
use rustc_hash::FxHashMap as HashMap;

use super::{Flow, Frame, Runner};
use crate::bindings::Binding;
use crate::error::RunError;
use crate::graph::{Graph, RecordedBlock, Recording};

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
        self.recording = Some(Recording::new(block));
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
            .unwrap_or_else(|| Recording::new(block));
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
