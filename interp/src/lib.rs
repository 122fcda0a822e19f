//! Where the language meets the engine: the builtins, the one evaluator of a plan (on the host's
//! tensors, [`tensor`], or a GPU's, [`gpu`]), and the [`Session`] that turns each statement into one engine op.
//!
//! ```
//! use dep_interp::{Session, SessionConfig};
//!
//! let mut session = Session::new(SessionConfig::default());
//! let mut out = Vec::new();
//! session.run_source("intro.dep", "A = 2\nB = A + 1\nC = A + 2\nD = B * C\nprint D", &mut out).unwrap();
//! session.finish().unwrap();
//! assert_eq!(String::from_utf8(out).unwrap(), "12.0\n");
//! ```

#![deny(missing_docs)]

mod backlog;
mod bindings;
pub mod builtins;
pub mod comm;
pub mod commands;
mod compute;
pub mod driver;
mod early_errors;
mod error;
mod evaluate;
mod exec;
#[cfg(test)]
mod gpu_tests;
mod graph;
mod input_uses;
mod labels;
mod local_names;
mod one_operator;
mod plan;
mod pushed_within;
mod segment;
mod session;
mod slot;
mod sources;
mod statement_cache;
mod suggest;
/// The CUDA layer (the `dep-gpu` crate), under the name the interpreter and its users have always
/// reached it by.
pub use dep_gpu as gpu;
/// The tensors and their CPU kernels (the `dep-tensor` crate), under the name the interpreter
/// and its users have always reached them by.
pub use dep_tensor as tensor;

pub use early_errors::early_errors;
pub use error::{ErrorKind, Report, RunError};
pub use session::{
    interactive_kept_events, InterruptCheck, Session, SessionConfig, VariableInfo,
    INTERACTIVE_KEPT_EVENTS, MIN_KEPT_EVENTS,
};
pub use slot::{RngSlot, Slot};
