//! Pushes rounds of 10,000 independent empty ops on the naive engine, bare or with an event log
//! attached: the workload of the `observe` benchmark's "independent empty ops, naive" rows, run a
//! fixed number of times so that callgrind counts its instructions exactly
//! (`bench/observe_instructions.sh` subtracts one round from three).
//! Usage: `empty_ops ROUNDS [bare|log]`.

use std::sync::Arc;

use dep_engine::{Engine, EngineConfig, EventLog, EventSink, OpSpec, Policy, Var};

/// The same allocator as the `dep` binary, so that the figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Ops a round.
const N_OPS: usize = 10_000;

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args
        .next()
        .and_then(|rounds| rounds.parse().ok())
        .expect("usage: empty_ops ROUNDS [bare|log]");
    let observed = args.next().as_deref() == Some("log");
    let log = Arc::new(EventLog::new());
    let engine = Engine::new(EngineConfig {
        policy: Policy::Naive,
        threads: 1,
        sink: observed.then(|| log.clone() as Arc<dyn EventSink>),
        ..EngineConfig::default()
    });
    let vars: Vec<Var> = (0..N_OPS)
        .map(|index| engine.new_var(format!("v{index}")))
        .collect();
    let label: Arc<str> = Arc::from("op");
    for _ in 0..rounds {
        for var in &vars {
            engine.push(OpSpec::new(label.clone(), || Ok(())).writes(std::slice::from_ref(var)));
        }
        engine.wait_all();
        log.clear();
    }
}
