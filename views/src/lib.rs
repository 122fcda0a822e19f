//! Views of a dependency engine's schedule, shared by the REPL, the Jupyter kernel and batch runs.
//!
//! Everything here is computed from the engine's events ([`dep_engine::Event`]) and snapshots
//! ([`dep_engine::Snapshot`]); nothing knows about tensors or the language. An op is its label
//! (the statement), its line and the variables it reads and writes.
//!
//! - [`Replay`]: an event log folded into per-op records ([`OpRecord`]), dependency edges
//!   ([`Edge`]: read-after-write, write-after-read, write-after-write) and the [`Frame`] at any
//!   event index, for stepping through a finished run.
//! - [`Frame`]: what the live views show at one moment: per-variable queues and op states, with
//!   what each waiting op waits behind. Built from a replay or from a live [`dep_engine::Snapshot`].
//! - [`text`]: queues, ops, why-waiting, a compact timeline and the run [`Summary`], as ANSI text
//!   honouring `NO_COLOR` and a width ([`TextStyle`]).
//! - [`svg`]: the timeline as a Gantt chart with the critical path; [`dot`]: the op DAG as
//!   Graphviz DOT (and SVG when Graphviz is installed); [`trace`]: Chrome trace JSON for Perfetto,
//!   carrying the raw event log so that it can be replayed, and [`perfetto`]: the same slices and
//!   flows in Perfetto's protobuf format, both written while a run goes from the online
//!   [`fold`] that also makes the [`Summary`]; [`html`]: a live-state fragment and a
//!   self-contained replay player.
//! - [`ranks`]: the views of a job of several ranks, merged from each rank's events: one trace
//!   with a process per rank, one timeline, and each rank's communication overlap.
//! - [`color`]: the one colour scheme every view uses.
//!
//! ```
//! use std::sync::Arc;
//! use dep_engine::{Engine, EngineConfig, EventLog, OpSpec, Policy};
//!
//! let log = Arc::new(EventLog::new());
//! let engine = Engine::new(EngineConfig {
//!     policy: Policy::Naive,
//!     sink: Some(log.clone()),
//!     ..EngineConfig::default()
//! });
//! let a = engine.new_var("A");
//! let b = engine.new_var("B");
//! engine.push(OpSpec::new("A = 2", || Ok(())).writes(&[a.clone()]).line(1));
//! engine.push(OpSpec::new("B = A + 1", || Ok(())).reads(&[a]).writes(&[b]).line(2));
//! engine.wait_all();
//!
//! let replay = dep_views::Replay::new(log.events(), engine.worker_names());
//! assert_eq!(replay.ops().len(), 2);
//! assert_eq!(replay.edges().len(), 1); // B = A + 1 reads what A = 2 wrote
//! let summary = dep_views::Summary::of(&replay);
//! assert_eq!(summary.n_ops, 2);
//! ```

#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod bookkeeping;
pub mod color;
pub mod dot;
mod error;
pub mod fold;
mod frame;
pub mod html;
mod json_line;
mod kept_arguments;
mod last_events;
pub mod live;
pub mod perfetto;
mod places;
pub mod ranks;
mod replay;
mod stepper;
mod summary;
pub mod svg;
pub mod text;
mod time_order;
pub mod trace;
mod util;

pub use crate::{
    error::{Error, ErrorKind},
    frame::{is_internal_name, is_internal_op, Frame, FrameOp, FrameVar},
    last_events::{EventsCut, LastEvents, Prologue},
    places::Places,
    replay::{renumber_times, Bar, DeviceSpan, Edge, Hazard, Lane, OpRecord, Replay},
    stepper::Stepper,
    summary::{KernelGaps, Summary},
    text::TextStyle,
    util::{format_ns, format_percent},
};

#[cfg(test)]
mod tests;
