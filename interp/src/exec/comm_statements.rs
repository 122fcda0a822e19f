//! The runner's communication statements: `y = allreduce(x)`, `broadcast(x, root)` (or
//! `y = broadcast(x, root)`), `y = reduce(x, root)`, `y = allgather(x)`, `send(x, to)`,
//! `x = recv(from, shape...)`, and `with rank = K`.
//! Each pushes one asynchronous op (see `crate::comm`). Inside a recorded block (`graph`,
//! `priority auto`) the op is recorded instead, and numbered afresh by every replay.

use std::sync::Arc;

use dep_grammar as grammar;
use grammar::ExprKind;

use super::{Binding, CallParts, Compiled, Runner};
use crate::comm::ops::{CommKind, CommOp};
use crate::error::RunError;
use crate::graph::RecordedOp;
use crate::slot::Slot;

impl Runner<'_> {
    /// The communication call `expr` is, if it is one (a user's function of that name wins).
    fn comm_call<'e>(&self, expr: &'e grammar::Expr) -> Option<CallParts<'e>> {
        match &expr.kind {
            ExprKind::Call { func, args, kwargs }
                if crate::early_errors::COMM_NAMES.contains(&func.text.as_str())
                    && self.lookup(&func.text).is_none()
                    && !self.scope.functions.contains_key(&func.text) =>
            {
                Some((func, args, kwargs))
            }
            _ => None,
        }
    }

    /// Runs `targets = value` when `value` is `allreduce`, `broadcast` or `recv`; `false` when
    /// it is not a communication.
    pub(super) fn comm_assign(
        &mut self,
        stmt: &grammar::Stmt,
        targets: &[grammar::Name],
        value: &grammar::Expr,
    ) -> Result<bool, RunError> {
        let Some((func, args, kwargs)) = self.comm_call(value) else {
            return Ok(false);
        };
        self.check_comm_call(func, kwargs)?;
        let [target] = targets else {
            return Err(self.error(
                stmt.span,
                format!("{} gives one value: assign it to one name", func.text),
                "in this assignment",
            ));
        };
        let (kind, input) = match (func.text.as_str(), args) {
            ("allreduce", [x]) => (CommKind::AllReduce { seq: 0 }, Some(x)),
            ("allgather", [x]) => (CommKind::AllGather { seq: 0 }, Some(x)),
            ("reduce", [x, root]) => {
                let root = self.rank_argument(root)?;
                (CommKind::Reduce { seq: 0, root }, Some(x))
            }
            ("broadcast", [x, root]) => {
                let root = self.rank_argument(root)?;
                (CommKind::Broadcast { seq: 0, root }, Some(x))
            }
            ("recv", [from, dims @ ..]) => {
                let from = self.rank_argument(from)?;
                let shape = dims
                    .iter()
                    .map(|dim| self.host_count(dim))
                    .collect::<Result<Vec<_>, _>>()?;
                (
                    CommKind::Recv {
                        from,
                        tag: 0,
                        shape,
                    },
                    None,
                )
            }
            ("send", _) => {
                return Err(self.error(
                    value.span,
                    "send gives no value: write it as a statement of its own, send(x, to)",
                    "here",
                ))
            }
            _ => return Err(self.comm_usage(func, value.span)),
        };
        let input = match input {
            Some(expr) => Some(self.comm_input(stmt, expr)?),
            None => None,
        };
        let output = self.target_slot(target)?;
        self.push_comm(stmt, kind, input, Some(output));
        Ok(true)
    }

    /// Runs the statement `expr` when it is `send(x, to)` or `broadcast(x, root)` (in place on
    /// the name `x`); `false` when it is not a communication.
    pub(super) fn comm_statement(
        &mut self,
        stmt: &grammar::Stmt,
        expr: &grammar::Expr,
    ) -> Result<bool, RunError> {
        let Some((func, args, kwargs)) = self.comm_call(expr) else {
            return Ok(false);
        };
        self.check_comm_call(func, kwargs)?;
        match (func.text.as_str(), args) {
            ("send", [x, to]) => {
                let to = self.rank_argument(to)?;
                let input = self.comm_input(stmt, x)?;
                self.push_comm(stmt, CommKind::Send { to, tag: 0 }, Some(input), None);
            }
            (
                "broadcast",
                [x @ grammar::Expr {
                    kind: ExprKind::Name(name),
                    ..
                }, root],
            ) => {
                let root = self.rank_argument(root)?;
                let input = self.comm_input(stmt, x)?;
                let output = self.target_slot(name)?;
                self.push_comm(
                    stmt,
                    CommKind::Broadcast { seq: 0, root },
                    Some(input),
                    Some(output),
                );
            }
            ("allreduce" | "recv" | "broadcast" | "reduce" | "allgather", _) => {
                return Err(self.error(
                    expr.span,
                    format!(
                        "{} gives a value: assign it, as in x = {}",
                        func.text,
                        comm_form(&func.text)
                    ),
                    "its value is lost",
                ))
            }
            _ => return Err(self.comm_usage(func, expr.span)),
        }
        Ok(true)
    }

    /// Whether the block of `with rank = K` runs here: on rank K only.
    pub(super) fn runs_on_rank(&mut self, value: &grammar::Expr) -> Result<bool, RunError> {
        let rank = self.rank_argument(value)?;
        Ok(rank == self.scope.comm.rank())
    }

    /// Refuses a communication with keyword arguments.
    fn check_comm_call(
        &self,
        func: &grammar::Name,
        kwargs: &[grammar::KeywordArg],
    ) -> Result<(), RunError> {
        if let Some(kwarg) = kwargs.first() {
            return Err(self.error(
                kwarg.span,
                format!("{} takes no keyword arguments", comm_form(&func.text)),
                "here",
            ));
        }
        Ok(())
    }

    fn comm_usage(&self, func: &grammar::Name, span: grammar::Span) -> RunError {
        self.error(
            span,
            format!("wrong arguments: the form is {}", comm_form(&func.text)),
            "in this call",
        )
    }

    /// A rank named in a statement: a whole number from 0 to `ranks() - 1`.
    fn rank_argument(&mut self, expr: &grammar::Expr) -> Result<usize, RunError> {
        let rank = self.host_int(expr)?;
        let size = self.scope.comm.size();
        match usize::try_from(rank) {
            Ok(rank) if rank < size => Ok(rank),
            _ => Err(self.error(
                expr.span,
                format!(
                    "rank {rank} is not a rank of this job: it has {size} rank{} (0 to {})",
                    if size == 1 { "" } else { "s" },
                    size - 1
                ),
                "this rank",
            )),
        }
    }

    /// The slot a communication reads: the variable itself for a name, else a temporary that an
    /// op pushed now computes (`true`: delete it once the communication is pushed).
    fn comm_input(
        &mut self,
        stmt: &grammar::Stmt,
        expr: &grammar::Expr,
    ) -> Result<(Arc<Slot>, bool), RunError> {
        if let Some(Binding::Tensor(slot)) = self.name_binding(expr) {
            return Ok((slot, false));
        }
        let compiled: Compiled = self.compile(expr)?;
        let temporary = self.new_temporary("comm");
        self.push_compute(stmt, compiled, vec![temporary.clone()], None);
        Ok((temporary, true))
    }

    fn push_comm(
        &mut self,
        stmt: &grammar::Stmt,
        kind: CommKind,
        input: Option<(Arc<Slot>, bool)>,
        output: Option<Arc<Slot>>,
    ) {
        let temporary = input
            .as_ref()
            .filter(|(_, temporary)| *temporary)
            .map(|(slot, _)| slot.clone());
        let input = input.map(|(slot, _)| slot);
        if let Some(output) = &output {
            output.set_home(dep_engine::Device::Cpu);
        }
        // A message's label names its peer, so that views of every rank match it.
        let label = match &kind {
            CommKind::Send { to, .. } => {
                format!("{}{}{to}", self.label(stmt), dep_views::ranks::SEND_MARK).into()
            }
            CommKind::Recv { from, .. } => {
                format!("{}{}{from}", self.label(stmt), dep_views::ranks::RECV_MARK).into()
            }
            _ => self.label(stmt),
        };
        let op = CommOp {
            label,
            line: self.line(stmt.span),
            priority: self.priority,
            kind,
            input,
            output,
            comm: self.scope.comm.clone(),
        };
        if let Some(recording) = &mut self.recording {
            // Numbered when a replay pushes it: each replay is a fresh communication.
            recording.push(RecordedOp::Comm(op), self.scope.pushed_within);
            return;
        }
        let op = op.numbered(self.scope.comm_counters);
        self.scope.push(op.into_spec());
        if let Some(temporary) = temporary {
            let line = self.line(stmt.span);
            self.delete_slot(temporary, line);
        }
    }
}

/// How a communication is written.
fn comm_form(name: &str) -> &'static str {
    match name {
        "allreduce" => "allreduce(x)",
        "broadcast" => "broadcast(x, root)",
        "reduce" => "reduce(x, root)",
        "allgather" => "allgather(x)",
        "send" => "send(x, to)",
        _ => "recv(from, shape...), e.g. x = recv(0, 2, 3)",
    }
}
