//! What several of the engine's integration tests build alike.

use std::sync::Arc;

use dep_engine::{Engine, EngineConfig, EventLog, Policy};

/// An engine of `policy` with `threads` CPU workers, two streams per GPU, and `log` as its
/// event sink when given.
pub fn engine_with(policy: Policy, threads: usize, log: Option<Arc<EventLog>>) -> Engine {
    Engine::new(EngineConfig {
        policy,
        threads,
        gpu_streams: 2,
        sink: log.map(|log| log as _),
    })
}
