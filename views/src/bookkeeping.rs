//! The interpreter's bookkeeping, which no view shows: its temporaries (`_#1`, `return#3`, the
//! value of a `print A + 1`), the waits for them (`wait _#1`) and their deletions (`del _#1`).
//!
//! Every view reads an event log through a [`Bookkeeping`] filter (a [`crate::Replay`] when it
//! folds an event, the online [`crate::fold::RunFold`] before it writes a trace), so the ops a
//! student counts, the queues, the critical path, the timelines, the DAG and the trace all agree
//! and none names a temporary.

use std::borrow::Cow;

use dep_engine::{Event, EventKind, OpId, VarId};
use rustc_hash::FxHashSet;

use crate::frame::{is_internal_name, is_internal_op};

/// The internal ops and variables seen so far in a log, to leave their events out. It holds
/// only the live ones: an op until it finishes, a variable until it is deleted.
#[derive(Clone, Debug, Default)]
pub(crate) struct Bookkeeping {
    ops: FxHashSet<OpId>,
    vars: FxHashSet<VarId>,
}

impl Bookkeeping {
    /// `event` as the views see it: `None` for an event of an internal op or variable, a push
    /// of a visible op without its accesses to internal variables, any other event as it is.
    pub(crate) fn filter<'a>(&mut self, event: Cow<'a, Event>) -> Option<Cow<'a, Event>> {
        match &event.kind {
            EventKind::VarCreated { var, name } if is_internal_name(name) => {
                self.vars.insert(*var);
                None
            }
            EventKind::VarDeleted { var } if self.vars.remove(var) => None,
            EventKind::Pushed { op, label, .. } if is_internal_op(label) => {
                self.ops.insert(*op);
                None
            }
            EventKind::Pushed { reads, writes, .. }
                if reads
                    .iter()
                    .chain(writes)
                    .any(|var| self.vars.contains(var)) =>
            {
                let mut event = event.into_owned();
                if let EventKind::Pushed { reads, writes, .. } = &mut event.kind {
                    reads.retain(|var| !self.vars.contains(var));
                    writes.retain(|var| !self.vars.contains(var));
                }
                Some(Cow::Owned(event))
            }
            EventKind::Granted { op, var } if self.ops.contains(op) || self.vars.contains(var) => {
                None
            }
            EventKind::Finished { op, .. } if self.ops.remove(op) => None,
            EventKind::Ready { op }
            | EventKind::Started { op, .. }
            | EventKind::DeviceSpan { op, .. }
                if self.ops.contains(op) =>
            {
                None
            }
            _ => Some(event),
        }
    }
}
