//! Helpers shared by the integration tests: the graph-mode sample, the random programs of the
//! property tests (`random_program`, `failing_program` with its `reference` interpreter, and
//! `timed_program`).
// Each test binary compiles the whole module and uses a part of it.
#![allow(dead_code)]

pub mod failing_program;
pub mod random_program;
pub mod reference;
pub mod timed_program;

use std::ops::Range;
use std::path::Path;

/// The seeds of a property test's random programs (`random_programs.rs`, the pooled buffers
/// of `graph.rs`, the placements of `gpu.rs`): `default`, or the range
/// `DEP_RANDOM_SEEDS=START..END` names, to try more programs than a test run does
/// (`DEP_RANDOM_SEEDS=1000..5000 cargo test --release -p dep-interp --test random_programs`).
pub fn seeds(default: Range<u64>) -> Range<u64> {
    let Ok(range) = std::env::var("DEP_RANDOM_SEEDS") else {
        return default;
    };
    let parsed = range
        .split_once("..")
        .and_then(|(start, end)| Some(start.trim().parse().ok()?..end.trim().parse().ok()?));
    parsed.unwrap_or_else(|| panic!("DEP_RANDOM_SEEDS={range}: expected START..END"))
}

/// The graph-mode sample as two programs: recorded and replayed `runs` times, and the same
/// statements run eagerly `runs` times.
pub fn sample_graph_and_eager(runs: usize) -> (String, String) {
    let sample = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples/mlp_graph.dep"),
    )
    .unwrap();
    let start = sample.find("\ngraph step {").unwrap() + 1;
    let end = start + sample[start..].find("\n}\n").unwrap() + 3;
    let body = &sample[start + "graph step {".len()..end - 3];
    let setup = &sample[..start];
    let graph = format!(
        "{setup}{}for i in 0..{runs} {{ run step }}\n",
        &sample[start..end]
    );
    let eager = format!("{setup}for i in 0..{runs} {{{body}\n}}\n");
    (graph, eager)
}
