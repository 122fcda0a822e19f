//! Making ops: a compiled statement pushed as one engine op with its label and line, kept in
//! the statement cache when its plan depends on bindings alone, and its temporaries deleted
//! behind it.

use std::sync::Arc;

use smallvec::SmallVec;

use dep_engine as engine;
use dep_grammar as grammar;
use grammar::Span;

use super::scope::{names_of_new, resolve};
use super::{Compiled, Pushed, ReturnInto, Runner};
use crate::bindings::Binding;
use crate::compute::{ComputeOp, PushableOp};
use crate::graph::RecordedOp;
use crate::input_uses::InputUses;
use crate::one_operator::OneOperator;
use crate::slot::Slot;
use crate::statement_cache::{Dependency, StatementKey};
use crate::tensor;

impl Runner<'_> {
    /// Pushes the statement's op (see [`Self::push_labelled`]).
    pub(super) fn push_compute(
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
    pub(super) fn push_cached(&mut self, stmt: &grammar::Stmt) -> bool {
        if self.recording.is_some() {
            return false;
        }
        let key = (self.source_index, stmt.span.start);
        let op = match self.cache.get(key, self.device, self.priority) {
            Some(op) => op,
            None => {
                if !self.kept_op_holds_again(key) {
                    return self.push_rebound(key);
                }
                self.cache
                    .get(key, self.device, self.priority)
                    .expect("valid, as just checked")
            }
        };
        // Another statement may have placed an output elsewhere since.
        for output in &op.op().outputs {
            output.set_home(self.device);
        }
        // A kept statement reads no loop counter and writes no `set` slot, so its label has
        // nothing of the iteration to add (`op_label`): the statement's text, as compiled.
        self.scope.push_shared(op.shared_op());
        true
    }

    /// Whether the op kept for the statement at `key`, under bindings that changed since, is
    /// valid under those of now: every name it resolved still resolves to the variable it did
    /// (see `statement_cache`).
    fn kept_op_holds_again(&mut self, key: StatementKey) -> bool {
        let (frames, globals) = (&self.frames, &*self.scope.globals);
        let source = &self.scope.sources[self.source_index].text;
        let resolves_to = |name: Span, slot: &Arc<Slot>, must_own: bool| {
            matches!(
                resolve(frames, globals, name.text(source)),
                Some((Binding::Tensor(bound), owned))
                    if Arc::ptr_eq(bound, slot) && (owned || !must_own)
            )
        };
        let holds = |dependency, op: &ComputeOp| match dependency {
            Dependency::Reads { name, input } => resolves_to(name, &op.inputs[input], false),
            Dependency::Writes { name, output } => resolves_to(name, &op.outputs[output], true),
            Dependency::ReturnsInto => frames.last().is_some_and(|frame| {
                matches!((frame.returns_into.as_slice(), op.outputs.as_slice()),
                    ([ReturnInto::Variable(into)], [output]) if Arc::ptr_eq(into, output))
            }),
        };
        self.cache
            .holds_again(key, self.device, self.priority, holds)
    }

    /// Pushes the op kept for the statement at `key` over the variables its names resolve to
    /// now, where some resolve to others than when it was compiled (a function's body at a
    /// call: its locals are new variables at every call): the same plan, label and line, so
    /// that the statement is not compiled again. Names it writes that the scope does not own
    /// yet are bound to new variables, as the statement itself binds them. Refused (`false`,
    /// and nothing done) when a name resolves to something else than a tensor, or when the
    /// variables are not alike as they were: two that were one, or one that was two (the plan
    /// reads each input once, and runs in place where an input is its output). Keeps the new
    /// op for the next time.
    #[cold]
    #[inline(never)]
    fn push_rebound(&mut self, key: StatementKey) -> bool {
        let epoch = self.cache.epoch();
        let Some((op, new_locals)) = self.rebound_op(key) else {
            return false;
        };
        let mut op = op;
        for (name, output) in new_locals {
            let source = &self.scope.sources[self.source_index].text;
            let names = names_of_new(&self.frames, self.scope.local_names, name.text(source));
            op.outputs[output] = self.new_local_named(names);
        }
        op.input_uses = InputUses::of(&op.plan, &op.inputs, &op.outputs, op.update);
        for output in &op.outputs {
            output.set_home(self.device);
        }
        let op = PushableOp::new(op);
        self.scope.push_shared(op.shared_op());
        self.cache.replace_op(key, epoch, op);
        true
    }

    /// The op kept for the statement at `key`, its inputs and outputs replaced by the variables
    /// its names resolve to now, with the names of the outputs that are to be new locals of
    /// the scope (by output): see [`Self::push_rebound`].
    fn rebound_op(&self, key: StatementKey) -> Option<(ComputeOp, NewLocals)> {
        let (kept, dependencies) = self.cache.kept(key, self.device, self.priority)?;
        let kept = kept.op();
        let (frames, globals) = (&self.frames, &*self.scope.globals);
        let source = &self.scope.sources[self.source_index].text;
        let mut inputs = kept.inputs.clone();
        let mut outputs: SmallVec<[Option<Arc<Slot>>; 2]> =
            kept.outputs.iter().cloned().map(Some).collect();
        let mut new_locals = NewLocals::new();
        if inputs.len() > u64::BITS as usize {
            return None;
        }
        // Which inputs a name read was resolved for so far, by bit.
        let mut read = 0u64;
        for dependency in dependencies {
            match *dependency {
                Dependency::Reads { name, input } => {
                    match resolve(frames, globals, name.text(source))? {
                        // Two names that were one variable (`f(a, a)`) must still be one.
                        (Binding::Tensor(slot), _) if read & (1 << input) == 0 => {
                            read |= 1 << input;
                            inputs[input] = slot.clone();
                        }
                        (Binding::Tensor(slot), _) if Arc::ptr_eq(slot, &inputs[input]) => {}
                        _ => return None,
                    }
                }
                Dependency::Writes { name, output } => {
                    match resolve(frames, globals, name.text(source)) {
                        Some((Binding::Tensor(slot), true)) => outputs[output] = Some(slot.clone()),
                        // `x += 1` updates a variable of the scope's own in place.
                        Some((Binding::Tensor(_), false)) | None if kept.update.is_some() => {
                            return None
                        }
                        Some((Binding::Tensor(_), false)) | None => {
                            let text = name.text(source);
                            if new_locals
                                .iter()
                                .any(|(other, _)| other.text(source) == text)
                            {
                                return None;
                            }
                            outputs[output] = None;
                            new_locals.push((name, output));
                        }
                        Some(_) => return None,
                    }
                }
                Dependency::ReturnsInto => match frames.last()?.returns_into.as_slice() {
                    [ReturnInto::Variable(into)] if outputs.len() == 1 => {
                        outputs[0] = Some(into.clone())
                    }
                    _ => return None,
                },
            }
        }
        // Alike as compiled: each pair of variables one where it was one, two where it was two.
        let was = || kept.inputs.iter().chain(&kept.outputs).map(Some);
        let now = || {
            inputs
                .iter()
                .map(Some)
                .chain(outputs.iter().map(Option::as_ref))
        };
        let same = |a: Option<&Arc<Slot>>, b: Option<&Arc<Slot>>| matches!((a, b), (Some(a), Some(b)) if Arc::ptr_eq(a, b));
        for (index, (was_one, now_one)) in was().zip(now()).enumerate() {
            let alike = was()
                .zip(now())
                .skip(index + 1)
                .all(|(was_other, now_other)| same(was_one, was_other) == same(now_one, now_other));
            if !alike {
                return None;
            }
        }
        let op = ComputeOp {
            label: kept.label.clone(),
            line: kept.line,
            device: kept.device,
            priority: kept.priority,
            plan: kept.plan.clone(),
            inputs,
            // A new local's place holds the old variable until it is made.
            outputs: outputs
                .into_iter()
                .zip(&kept.outputs)
                .map(|(now, was)| now.unwrap_or_else(|| was.clone()))
                .collect(),
            update: kept.update,
            rng: kept.rng.clone(),
            // Worked out once the outputs are known.
            input_uses: InputUses::default(),
            one_operator: kept.one_operator.clone(),
        };
        Some((op, new_locals))
    }

    /// The label of the op `stmt` pushes to write `outputs`: its text, and when the engine is
    /// observed, which iteration of a loop it is (see `labels`).
    pub(super) fn op_label(&mut self, stmt: &grammar::Stmt, outputs: &[Arc<Slot>]) -> Arc<str> {
        let label = self.label(stmt);
        let written = outputs.first().map(|slot| slot.var.name());
        self.with_iteration(label, written)
    }

    /// The label of an op that computes a part of a statement (a function's argument, a
    /// `print`'s value), `text`, with the loop counters it reads, as [`Runner::op_label`] gives
    /// a statement's, on one line as a statement's.
    pub(super) fn part_label(&self, text: &str) -> Arc<str> {
        let label = match text.contains('\n') {
            true => Arc::from(crate::sources::one_line_without_comments(text)),
            false => Arc::from(text),
        };
        self.with_iteration(label, None)
    }

    /// `label` with the values of the loop counters it reads (` i=4`), when observed: views tell
    /// a loop's ops apart; an unobserved run keeps the shared label. `written` is the variable
    /// the op writes.
    fn with_iteration(&self, label: Arc<str>, written: Option<&str>) -> Arc<str> {
        if !self.scope.engine.is_observed() {
            return label;
        }
        let counter = |name: &str| match self.lookup(name) {
            Some((Binding::Counter(counter), _)) => Some(counter.get()),
            _ => None,
        };
        crate::labels::with_iteration(&label, written, &self.placed_by, counter).unwrap_or(label)
    }

    /// Keeps the op just pushed for `stmt`, compiled when the bindings were at `epoch`, if
    /// its plan depends on nothing else (see `statement_cache`), with the names it resolved:
    /// those its expression read, and what its outputs are (`written`).
    pub(super) fn keep_compiled(
        &mut self,
        stmt: &grammar::Stmt,
        epoch: u64,
        pushed: Option<Pushed>,
        written: Written<'_>,
    ) {
        let Some(pushed) = pushed else { return };
        // Observed, a statement placed by a loop counter (`with gpu = j`) tells the counter in
        // its label, which a kept op would keep from its first push.
        let placed_by_a_counter = !self.placed_by.is_empty() && self.scope.engine.is_observed();
        if !self.compiled_pure
            || pushed.had_temporaries
            || pushed.op.op().plan.copy_to().is_some()
            || placed_by_a_counter
        {
            return;
        }
        let key = (self.source_index, stmt.span.start);
        let mut dependencies = self.names_suffice.then_some(&mut self.dependencies);
        if let Some(dependencies) = &mut dependencies {
            match written {
                Written::Names(names) => {
                    dependencies.extend(names.iter().enumerate().map(|(output, name)| {
                        Dependency::Writes {
                            name: name.span,
                            output,
                        }
                    }));
                    // Checked first: in a function's body, a name written is most often the
                    // call's own new local, which fails the check at once.
                    dependencies.rotate_right(names.len());
                }
                Written::ReturnsInto => dependencies.push(Dependency::ReturnsInto),
            }
        }
        self.cache.insert(
            key,
            epoch,
            self.device,
            self.priority,
            pushed.op,
            dependencies.map(|dependencies| dependencies.as_slice()),
        );
    }

    /// Pushes one op that evaluates `compiled` into `outputs` (or, with `update`, applies it in
    /// place to the single output), then deletes the statement's temporaries behind it. Returns
    /// what it pushed (nothing while a graph is recorded).
    pub(super) fn push_labelled(
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
        let rng = plan.uses_rng().then(|| self.scope.rng.clone());
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
        let input_uses = InputUses::of(&plan, &inputs, &outputs, update);
        let one_operator = OneOperator::of(&plan, inputs.len());
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
            input_uses,
            one_operator,
        };
        if let Some(recording) = &mut self.recording {
            // Temporaries of a recorded statement are the graph's own buffers, released by
            // liveness on replay.
            recording.push(RecordedOp::Compute(op), self.scope.pushed_within);
            return None;
        }
        let op = PushableOp::new(op);
        self.scope.push_shared(op.shared_op());
        let had_temporaries = !temporaries.is_empty();
        for temporary in temporaries {
            self.delete_slot(temporary, line);
        }
        Some(Pushed {
            op,
            had_temporaries,
        })
    }

    /// Deletes `slot`'s variable once its accesses end, by an op of source line `line` (a `del`,
    /// or the statement whose temporary it was).
    pub(super) fn delete_slot(&mut self, slot: Arc<Slot>, line: u32) {
        if self.recording.is_some() {
            // A graph's own buffer: released by liveness when the graph runs.
            return;
        }
        let var = slot.var.clone();
        let deletion = self.scope.local_names.deletion_of(var.name());
        let label = match &deletion {
            Some(deletion) => deletion.label.clone(),
            None => Arc::from(format!("del {}", var.name())),
        };
        // A local's name is free for the next local once its deletion has run; under the
        // simulated policy once it is pushed, as its run (in real time, behind the asynchronous
        // ops it may wait for) would make the names differ from run to run, where the same
        // script must give the same events.
        let frees_name = match deletion {
            Some(deletion) if self.scope.engine.policy() == engine::Policy::Sim => {
                deletion.ran();
                None
            }
            deletion => deletion,
        };
        let free = move || {
            slot.clear();
            if let Some(deletion) = frees_name {
                deletion.ran();
            }
        };
        self.scope
            .engine
            .delete_var_labelled(var, &label, line, free);
    }

    pub(super) fn new_temporary(&mut self, hint: &str) -> Arc<Slot> {
        *self.scope.n_temporaries += 1;
        let name = format!("{hint}#{}", self.scope.n_temporaries);
        self.create_slot(name)
    }
}

/// The names (where they are written in the source) a statement pushed again binds to new
/// variables of the scope, each with the output of its op it is (see [`Runner::push_rebound`]).
type NewLocals = SmallVec<[(Span, usize); 2]>;

/// What the outputs of an op kept in the statement cache are.
pub(super) enum Written<'n> {
    /// The variables of these names, one an output each, in order.
    Names(&'n [grammar::Name]),
    /// The caller's variable the function's value is returned into.
    ReturnsInto,
}
