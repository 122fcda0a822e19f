//! A generic, MXNet-style asynchronous dependency engine.
//!
//! Callers create variables (opaque tags) and push ops: a closure plus the variables it reads
//! and writes. The engine runs ops as soon as their accesses are granted: reads of a variable run
//! together, writes run alone and in push order, so read-after-write, write-after-read and
//! write-after-write are all honoured while independent ops run in parallel. The engine never
//! looks inside an op (seed 000: "the engine does not care what the operation is").
//!
//! - [`Engine`]: `new_var`, `push`, `wait_var`, `wait_all`, `delete_var`, `cancel_pending`,
//!   `snapshot`.
//! - [`OpSpec::new`] for an op that is done when its closure returns, [`OpSpec::new_async`] for
//!   one finished later, from any thread, through its [`OpCompletion`] (MXNet's `PushAsync`).
//! - [`EngineConfig`] and [`Policy`]: naive (serial reference), threaded, per-device.
//! - [`EventSink`] / [`EventLog`]: observation, free when nobody observes.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use dep_engine::{Engine, EngineConfig, OpSpec, Policy};
//!
//! let engine = Engine::new(EngineConfig::with_policy(Policy::Threaded));
//! let a = engine.new_var("A");
//! let b = engine.new_var("B");
//! let cell = Arc::new(Mutex::new(0));
//! let (w, r) = (cell.clone(), cell.clone());
//! engine.push(OpSpec::new("A = 2", move || { *w.lock().unwrap() = 2; Ok(()) }).writes(&[a.clone()]));
//! engine.push(OpSpec::new("B = A + 1", move || { *r.lock().unwrap() += 1; Ok(()) }).reads(&[a]).writes(&[b.clone()]));
//! engine.wait_var(&b, 0).unwrap();
//! assert_eq!(*cell.lock().unwrap(), 3);
//! ```
//!
//! An asynchronous op is finished when its handle is completed, here by another thread; what it
//! writes is held until then:
//!
//! ```
//! use dep_engine::{Engine, EngineConfig, OpSpec, Policy};
//!
//! let engine = Engine::new(EngineConfig::with_policy(Policy::Naive));
//! let a = engine.new_var("A");
//! engine.push(OpSpec::new_async("A = recv()", |_ctx, done| {
//!     std::thread::spawn(move || done.complete(Err("peer gone".to_string())));
//! }).writes(&[a.clone()]));
//! assert_eq!(engine.wait_var(&a, 0).unwrap_err().message, "peer gone");
//! ```

#![deny(missing_docs)]

mod accesses;
mod batch;
mod block_pool;
mod clock;
mod completion;
mod config;
mod device;
mod device_time;
mod engine;
mod event;
#[cfg(all(test, loom))]
mod loom_tests;
mod memory;
mod op;
mod own_lines;
mod ready_queue;
pub mod sim;
mod sim_feed;
mod snapshot;
mod sync;
mod var_queue;

pub use crate::{
    accesses::AccessSet,
    batch::{BatchOp, OpBatch},
    completion::OpCompletion,
    config::{parse_threads, EngineConfig, Policy},
    device::{Device, MAX_GPUS},
    device_time::DeviceClock,
    engine::{
        current_lane, Engine, Monitor, SettledWrites, SharedOp, Var, VarId, CALLER_WORKER,
        MAX_KEPT_FAILURES,
    },
    event::{Event, EventKind, EventLog, EventSink, Logged, Push, RanAtOnce, ReadRoom},
    memory::{MemoryMeter, MemoryStats},
    op::{AsyncOpFn, OpBody, OpContext, OpError, OpFn, OpId, OpSpec, OpState, Outcome},
    own_lines::OwnLines,
    snapshot::{AccessSnapshot, Blocker, OpSnapshot, Snapshot, VarSnapshot},
};

/// Locks a standard mutex, taking the guard even if a thread panicked while holding it: across
/// dep, a panic never leaves guarded data half-updated in a way that matters (a panicking op is
/// reported as failed; a panicking redraw leaves at worst a stale line), so the lock stays usable.
pub fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
