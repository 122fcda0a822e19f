//! `dep-bench`: times dep on the workloads that `bench/compare.py` also runs in NumPy and MXNet,
//! and prints one JSON line per (workload, engine, threads) with the seconds per op.
//!
//! Each workload has a set-up part (run and waited for, untimed) and a timed part (pushed and
//! waited for). Run it through `python3 bench/compare.py`, or alone:
//! `cargo run --release -p dep-bench -- [WORKLOAD...]`.

use std::time::Instant;

/// The same allocator as the `dep` binary, so that the figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use dep_engine::Policy;
use dep_interp::{Session, SessionConfig};

/// A workload: set-up code, timed code, and how many ops the timed code makes.
struct Workload {
    name: &'static str,
    setup: &'static str,
    timed: &'static str,
    n_ops: usize,
    /// The engines to time it on: (policy, threads).
    engines: &'static [(Policy, usize)],
}

const BOTH: &[(Policy, usize)] = &[
    (Policy::Naive, 1),
    (Policy::Threaded, 1),
    (Policy::Threaded, 2),
];

/// A block of small statements, pushed eagerly or replayed as a recorded graph (10 ops a round).
const BLOCK_SETUP: &str = "a = ones(4)\nb = ones(4)\nc = ones(4)";

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "small_add",
        setup: "c = ones(4)\nb = ones(4)",
        timed: "for i in 0..100000 { c = c + b }\nwait",
        n_ops: 100_000,
        engines: BOTH,
    },
    Workload {
        name: "big_add",
        setup: "c = ones(1000000)\nb = ones(1000000)",
        timed: "for i in 0..200 { c = c + b }\nwait",
        n_ops: 200,
        engines: BOTH,
    },
    Workload {
        name: "matmul_1024",
        setup: "x = rand(1024, 1024)\ny = rand(1024, 1024)",
        timed: "for i in 0..10 { z = x @ y }\nwait",
        n_ops: 10,
        engines: BOTH,
    },
    Workload {
        name: "eager_block",
        setup: BLOCK_SETUP,
        timed: "for i in 0..10000 {\n  t1 = a + b\n  t2 = t1 * c\n  t3 = t2 - a\n  t4 = t3 / 2\n  t5 = t4 + t1\n  a = t5 * 0.5\n  t6 = b - c\n  t7 = t6 + a\n  b = t7 * 0.5\n  c = c + 0\n}\nwait",
        n_ops: 100_000,
        engines: &[(Policy::Naive, 1), (Policy::Threaded, 2)],
    },
    Workload {
        name: "graph_block",
        setup: "a = ones(4)\nb = ones(4)\nc = ones(4)\ngraph block {\n  t1 = a + b\n  t2 = t1 * c\n  t3 = t2 - a\n  t4 = t3 / 2\n  t5 = t4 + t1\n  a = t5 * 0.5\n  t6 = b - c\n  t7 = t6 + a\n  b = t7 * 0.5\n  c = c + 0\n}",
        timed: "for i in 0..10000 { with recycle = 0, share = 0, lazy = 0 { run block } }\nwait",
        n_ops: 100_000,
        engines: &[(Policy::Naive, 1), (Policy::Threaded, 2)],
    },
    Workload {
        name: "graph_block_default",
        setup: "a = ones(4)\nb = ones(4)\nc = ones(4)\ngraph block {\n  t1 = a + b\n  t2 = t1 * c\n  t3 = t2 - a\n  t4 = t3 / 2\n  t5 = t4 + t1\n  a = t5 * 0.5\n  t6 = b - c\n  t7 = t6 + a\n  b = t7 * 0.5\n  c = c + 0\n}",
        timed: "for i in 0..10000 { run block }\nwait",
        n_ops: 100_000,
        engines: &[(Policy::Naive, 1), (Policy::Threaded, 2)],
    },
    Workload {
        name: "graph_block_bulk",
        setup: "a = ones(4)\nb = ones(4)\nc = ones(4)\ngraph block {\n  t1 = a + b\n  t2 = t1 * c\n  t3 = t2 - a\n  t4 = t3 / 2\n  t5 = t4 + t1\n  a = t5 * 0.5\n  t6 = b - c\n  t7 = t6 + a\n  b = t7 * 0.5\n  c = c + 0\n}",
        timed: "for i in 0..10000 { with recycle = 0, share = 0, lazy = 0, bulk = 10 { run block } }\nwait",
        n_ops: 100_000,
        engines: &[(Policy::Naive, 1), (Policy::Threaded, 2)],
    },
    Workload {
        name: "two_chains",
        setup: "x = rand(1000000)\ny = rand(1000000)",
        timed: "for i in 0..50 {\n  x = tanh(x) * 0.5 + 1\n  y = tanh(y) * 0.5 + 1\n}\nwait",
        n_ops: 100,
        engines: &[(Policy::Naive, 1), (Policy::Threaded, 2)],
    },
];

fn time_workload(workload: &Workload, policy: Policy, threads: usize) -> Result<f64, String> {
    let mut session = Session::new(SessionConfig {
        policy,
        threads,
        ..SessionConfig::default()
    });
    let mut sink = std::io::sink();
    session
        .run_source("setup", workload.setup, &mut sink)
        .map_err(|error| error.to_string())?;
    session.finish().map_err(|error| error.to_string())?;
    let start = Instant::now();
    session
        .run_source(workload.name, workload.timed, &mut sink)
        .map_err(|error| error.to_string())?;
    session.finish().map_err(|error| error.to_string())?;
    Ok(start.elapsed().as_secs_f64())
}

fn main() {
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    for workload in WORKLOADS
        .iter()
        .filter(|workload| wanted.is_empty() || wanted.iter().any(|name| name == workload.name))
    {
        for &(policy, threads) in workload.engines {
            // Best of three runs: the machine is shared with whatever else runs.
            let best = (0..3)
                .map(|_| time_workload(workload, policy, threads))
                .try_fold(f64::INFINITY, |best, run| {
                    run.map(|seconds| best.min(seconds))
                });
            match best {
                Ok(seconds) => println!(
                    "{{\"workload\": \"{}\", \"engine\": \"{}\", \"threads\": {threads}, \"seconds\": {seconds:.6}, \"us_per_op\": {:.4}}}",
                    workload.name,
                    policy.name(),
                    seconds * 1e6 / workload.n_ops as f64
                ),
                Err(error) => {
                    eprintln!("dep-bench: {}: {error}", workload.name);
                    std::process::exit(1);
                }
            }
        }
    }
}
