//! `graph NAME { ... }`: recording a block's ops once, to replay with `run NAME`.

use dep_grammar as grammar;
use rustc_hash::FxHashMap as HashMap;

use super::{Flow, Frame, Runner};
use crate::bindings::Binding;
use crate::error::RunError;
use crate::graph::{Graph, Recording};

impl Runner<'_> {
    /// Records `body` as the graph `name` (replacing an earlier one of that name).
    pub(super) fn record_graph(
        &mut self,
        stmt: &grammar::Stmt,
        name: &grammar::Name,
        body: &grammar::Block,
    ) -> Result<(), RunError> {
        let graph = self.record(stmt, body, false)?.named(&name.text);
        self.scope.graphs.insert(name.text.clone(), graph);
        Ok(())
    }

    /// Runs `body` recording its ops instead of pushing them. With `keep_names`, names first
    /// assigned in the block become global names after it (`priority auto`); otherwise they are
    /// the graph's own buffers (`graph`).
    pub(super) fn record(
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
            returns_into: Default::default(),
            made_for_caller: Default::default(),
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

    pub(super) fn refuse_while_recording(
        &self,
        stmt: &grammar::Stmt,
        keyword: &str,
    ) -> Result<(), RunError> {
        if self.recording.is_none() {
            return Ok(());
        }
        Err(self.error(
            stmt.span,
            format!("`{keyword}` cannot be recorded in a graph: a graph holds computations only; put it before or after the graph"),
            "inside a graph",
        ))
    }
}
