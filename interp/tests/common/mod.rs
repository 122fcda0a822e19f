//! Helpers shared by the integration tests: the graph-mode sample, the random programs of the
//! property tests (`random_program`, `failing_program` with its `reference` interpreter, and
//! `timed_program`).
// Each test binary compiles the whole module and uses a part of it.
#![allow(dead_code)]

pub mod failing_program;
pub mod random_program;
pub mod reference;
pub mod timed_program;

use std::path::Path;

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
