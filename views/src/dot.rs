//! The op DAG as Graphviz DOT, nodes filled by state, and as SVG through Graphviz when it is
//! installed.
//!
//! Edges are the replay's data dependencies ([`crate::Edge`]) labelled with the variable and the
//! hazard; an edge whose access really queued in this run is solid, one already satisfied at push
//! is dashed; the critical path is drawn thick in the critical colour.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::{Command, Stdio};

use dep_engine::OpId;

use crate::color::Role;
use crate::error::{Error, ErrorKind};
use crate::replay::Replay;
use crate::util::format_ns;

/// The replay's op DAG in the DOT language.
pub fn dag(replay: &Replay) -> String {
    dag_of_last(replay, usize::MAX)
}

/// The DAG of the replay's last `max_ops` ops (all of them when fewer): when some are left out,
/// a first node says how many, with a dotted arrow to each op drawn that depends on one of
/// them; the critical path is the whole run's. For a view on a screen or in a notebook, where a
/// long loop's whole DAG would be megabytes of text that no layout draws.
pub fn dag_of_last(replay: &Replay, max_ops: usize) -> String {
    let n_ops = replay.ops().len();
    let first = n_ops.saturating_sub(max_ops);
    let critical = replay.critical_path();
    // Each op's place on the critical path: an edge is on the path when it joins neighbours
    // there (looked up, not searched for: a long run's path has many thousands of ops).
    let path_place: HashMap<OpId, usize> = critical
        .iter()
        .enumerate()
        .map(|(place, id)| (*id, place))
        .collect();
    let mut dot = String::new();
    dot.push_str("digraph dep {\n");
    dot.push_str("  rankdir=TB;\n");
    dot.push_str(
        "  node [shape=box, style=\"rounded,filled\", fontname=\"monospace\", fontsize=10];\n",
    );
    dot.push_str("  edge [fontname=\"monospace\", fontsize=9];\n");
    if first > 0 {
        let _ = writeln!(
            dot,
            "  earlier [label=\"… {first} earlier ops (of {n_ops}) not drawn\", shape=plaintext, style=\"\"];"
        );
    }
    for op in &replay.ops()[first..] {
        let mut details = vec![op.state.name().to_string()];
        match &op.place {
            Some(place) => details.insert(0, place.to_string()),
            None if op.line > 0 => details.insert(0, format!("line {}", op.line)),
            None => {}
        }
        if let Some(worker) = op.worker {
            details.push(replay.worker_name(worker));
        }
        if let Some(duration) = op.duration_ns() {
            details.push(format_ns(duration));
        }
        let border = if path_place.contains_key(&op.id) {
            format!(", color=\"{}\", penwidth=2.5", Role::Critical.hex())
        } else {
            String::new()
        };
        let _ = writeln!(
            dot,
            "  {} [label=\"{}\\n{}\", fillcolor=\"{}\"{border}];",
            op.id,
            escape_dot(&op.label),
            escape_dot(&details.join(" · ")),
            Role::State(op.state).hex(),
        );
    }
    let drawn = |id: &OpId| {
        replay
            .op_position(*id)
            .is_some_and(|position| position >= first)
    };
    let mut from_earlier: Vec<OpId> = Vec::new();
    for edge in replay.edges().iter().filter(|edge| drawn(&edge.to)) {
        if !drawn(&edge.from) {
            if from_earlier.last() != Some(&edge.to) {
                from_earlier.push(edge.to);
            }
            continue;
        }
        let critical = matches!(
            (path_place.get(&edge.from), path_place.get(&edge.to)),
            (Some(from), Some(to)) if *to == from + 1
        );
        let (colour, width) = if critical {
            (Role::Critical.hex(), ", penwidth=2.5")
        } else {
            (Role::Edge.hex(), "")
        };
        let style = if edge.queued { "solid" } else { "dashed" };
        let _ = writeln!(
            dot,
            "  {} -> {} [label=\"{} {}\", color=\"{colour}\", fontcolor=\"{colour}\", style={style}{width}];",
            edge.from,
            edge.to,
            escape_dot(&replay.var_name(edge.var)),
            edge.hazard.short_name(),
        );
    }
    for op in from_earlier {
        let _ = writeln!(
            dot,
            "  earlier -> {op} [style=dotted, color=\"{}\"];",
            Role::Edge.hex()
        );
    }
    dot.push_str("}\n");
    dot
}

/// Renders DOT to SVG with Graphviz's `dot`; an error of kind
/// [`ErrorKind::GraphvizMissing`] says how to get it when it is not installed.
pub fn to_svg(dot: &str) -> Result<String, Error> {
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| {
            Error::new(
                ErrorKind::GraphvizMissing,
                format!(
                    "cannot run Graphviz `dot` ({error}): install graphviz (e.g. `apt install graphviz`) to get the DAG as SVG, or open the .dot file in any Graphviz viewer"
                ),
            )
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(dot.as_bytes()).map_err(|error| {
            Error::new(
                ErrorKind::GraphvizFailed,
                format!("writing to `dot`: {error}"),
            )
        })?;
    }
    let output = child.wait_with_output().map_err(|error| {
        Error::new(
            ErrorKind::GraphvizFailed,
            format!("waiting for `dot`: {error}"),
        )
    })?;
    if !output.status.success() {
        return Err(Error::new(
            ErrorKind::GraphvizFailed,
            format!(
                "`dot -Tsvg` failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn escape_dot(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The last ops of a long chain: that many nodes, a node counting the others with a dotted
    /// arrow to the first op drawn (which depends on one left out), and the whole DAG when it
    /// is short enough.
    #[test]
    fn the_last_ops_of_a_long_run() {
        let replay = crate::tests::long_chain_replay(400);
        let n_ops = replay.ops().len();
        let dot = dag_of_last(&replay, 10);
        let nodes = dot
            .lines()
            .filter(|line| line.contains("[label=\"") && line.contains("fillcolor"))
            .count();
        assert_eq!(nodes, 10, "{dot}");
        assert!(dot.contains(&format!(
            "earlier [label=\"… {} earlier ops (of {n_ops}) not drawn\"",
            n_ops - 10
        )));
        let first_drawn = replay.ops()[n_ops - 10].id;
        assert!(
            dot.contains(&format!("  earlier -> {first_drawn} [style=dotted")),
            "{dot}"
        );
        assert_eq!(
            dot.matches(" -> ").count(),
            10,
            "9 edges among the ten, one from the rest: {dot}"
        );
        assert_eq!(dag_of_last(&replay, n_ops), dag(&replay));
        assert!(!dag(&replay).contains("earlier"));
    }
}
