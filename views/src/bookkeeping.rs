//! The interpreter's bookkeeping, which no view shows: the temporaries only it reads (`_#1`, the
//! value of a `print A + 1`), the waits for temporaries (`wait _#1`) and their deletions
//! (`del _#1`, `del return#3`). A temporary that carries a value from one shown op to another
//! (`f.x#2`, `return#3`) is shown: leaving out its accesses would cut the dependency it stands
//! for ([`crate::frame::is_internal_name`]).
//!
//! Every view reads an event log through a [`Bookkeeping`] filter (a [`crate::Replay`] when it
//! folds an event, the online [`crate::fold::RunFold`] before it writes a trace), so the ops a
//! student counts, the queues, the critical path, the timelines, the DAG and the trace all agree
//! and none names a temporary.

use dep_engine::{Event, EventKind, OpId, RanAtOnce, VarId};
use std::sync::Arc;

use rustc_hash::FxHashSet;

use crate::frame::{is_internal_name, is_internal_op};

/// The internal ops and variables seen so far in a log, to leave their events out. It holds
/// only the live ones: an op until it finishes, a variable until it is deleted.
#[derive(Clone, Debug, Default)]
pub(crate) struct Bookkeeping {
    ops: FxHashSet<OpId>,
    vars: FxHashSet<VarId>,
    /// The last labels found visible, held so that their addresses stay their own: a loop
    /// pushes the same few labels again and again (one per statement of its body), and the log
    /// hands out the one `Arc` it keeps of each.
    visible_labels: [Option<Arc<str>>; N_VISIBLE],
    /// The entry of `visible_labels` the next label found visible takes.
    next_visible: usize,
}

/// How many visible labels [`Bookkeeping`] remembers.
const N_VISIBLE: usize = 4;

/// What [`Bookkeeping::filter`] makes of an event.
pub(crate) enum Filtered {
    /// An event of an internal op or variable: no view shows it.
    Hidden,
    /// The event as it is.
    Shown,
    /// A push of a visible op without its accesses to internal variables.
    Trimmed(Event),
}

impl Bookkeeping {
    /// `event` as the views see it: hidden when it is about an internal op or variable, a push
    /// of a visible op trimmed of its accesses to internal variables, any other event as it is.
    pub(crate) fn filter(&mut self, event: &Event) -> Filtered {
        let hidden = match &event.kind {
            EventKind::VarCreated { var, name } if is_internal_name(name) => {
                self.vars.insert(*var);
                true
            }
            EventKind::VarDeleted { var } => self.vars.remove(var),
            EventKind::Pushed { op, label, .. } if self.is_internal_label(label) => {
                self.ops.insert(*op);
                true
            }
            EventKind::Pushed { reads, writes, .. }
                if !self.vars.is_empty()
                    && reads
                        .iter()
                        .chain(writes)
                        .any(|var| self.vars.contains(var)) =>
            {
                let mut event = event.clone();
                if let EventKind::Pushed { reads, writes, .. } = &mut event.kind {
                    reads.retain(|var| !self.vars.contains(var));
                    writes.retain(|var| !self.vars.contains(var));
                }
                return Filtered::Trimmed(event);
            }
            EventKind::Granted { op, var } => {
                self.is_internal(*op) || (!self.vars.is_empty() && self.vars.contains(var))
            }
            EventKind::Finished { op, .. } => !self.ops.is_empty() && self.ops.remove(op),
            EventKind::Ready { op }
            | EventKind::Cancelled { op }
            | EventKind::Started { op, .. }
            | EventKind::DeviceSpan { op, .. } => self.is_internal(*op),
            _ => false,
        };
        if hidden {
            Filtered::Hidden
        } else {
            Filtered::Shown
        }
    }

    /// [`Bookkeeping::filter`] of an op that ran at once, for its push: its start and end
    /// then say what they would say alone (shown, for a visible op). An internal op's push is
    /// hidden, and the op not held, as its end would let it go.
    pub(crate) fn filter_ran_at_once(&mut self, ran: &RanAtOnce<'_>) -> Filtered {
        let filtered = self.filter(ran.push);
        if matches!(filtered, Filtered::Hidden) {
            self.ops.remove(&ran.op);
        }
        filtered
    }

    /// Whether a push's label is bookkeeping's ([`is_internal_op`]).
    fn is_internal_label(&mut self, label: &Arc<str>) -> bool {
        let known = |visible: &Option<Arc<str>>| {
            visible
                .as_ref()
                .is_some_and(|visible| Arc::ptr_eq(visible, label))
        };
        if self.visible_labels.iter().any(known) {
            return false;
        }
        if is_internal_op(label) {
            return true;
        }
        self.visible_labels[self.next_visible] = Some(label.clone());
        self.next_visible = (self.next_visible + 1) % N_VISIBLE;
        false
    }

    fn is_internal(&self, op: OpId) -> bool {
        !self.ops.is_empty() && self.ops.contains(&op)
    }
}
