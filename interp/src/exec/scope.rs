//! Names and scopes: looking a name up (a function's locals, then the globals), binding one
//! (every change but a loop counter's next value invalidates the statement cache), the slots
//! an assignment writes and `del`.

use std::sync::Arc;

use dep_grammar as grammar;
use grammar::ExprKind;

use super::{Local, Runner};
use crate::builtins;
use crate::error::RunError;
use crate::session::Binding;
use crate::slot::Slot;
use crate::suggest;

impl Runner<'_> {
    /// The binding of `name`, and whether the current scope owns it.
    pub(super) fn lookup(&self, name: &str) -> Option<(Binding, bool)> {
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

    pub(super) fn bind(&mut self, name: &str, binding: Binding, owned: bool) {
        self.binds += 1;
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
    pub(super) fn target_slot(&mut self, target: &grammar::Name) -> Result<Arc<Slot>, RunError> {
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
    pub(super) fn create_slot(&mut self, var_name: String) -> Arc<Slot> {
        let slot = Slot::new(self.session.engine.new_var(var_name));
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
}
