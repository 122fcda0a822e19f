//! The op DAG as Graphviz DOT, nodes filled by state, and as SVG through Graphviz when it is
//! installed.
//!
//! Edges are the replay's data dependencies ([`crate::Edge`]) labelled with the variable and the
//! hazard; an edge whose access really queued in this run is solid, one already satisfied at push
//! is dashed; the critical path is drawn thick in the critical colour.

use std::collections::HashMap;
use std::io::{self, Read, Write as _};
use std::process::{Command, Stdio};
use std::time::Duration;

use wait_timeout::ChildExt as _;

use dep_engine::OpId;

use crate::color::Role;
use crate::error::{Error, ErrorKind};
use crate::replay::Replay;
use crate::util::format_ns;

/// The replay's op DAG in the DOT language.
pub fn dag(replay: &Replay) -> String {
    dag_of_last(replay, usize::MAX)
}

/// Writes the replay's op DAG in the DOT language to `out`, as it goes: a long run's DAG is
/// hundreds of megabytes of text, never held whole.
pub fn write_dag(replay: &Replay, out: &mut impl io::Write) -> io::Result<()> {
    write_drawn(replay, usize::MAX, EarlierOps::Linked, out)
}

/// The DAG of the replay's last `max_ops` ops (all of them when fewer): when some are left out,
/// a first node says how many, with a dotted arrow to each op drawn that depends on one of
/// them; the critical path is the whole run's. For a view on a screen or in a notebook, where a
/// long loop's whole DAG would be megabytes of text that no layout draws.
pub fn dag_of_last(replay: &Replay, max_ops: usize) -> String {
    dag_drawn(replay, max_ops, EarlierOps::Linked)
}

/// How a DAG of a run's last ops shows the ops left out before them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum EarlierOps {
    /// A node counting them, with a dotted arrow to each op drawn that depends on one.
    Linked,
    /// The count in the graph's label, no arrows: one node with arrows to hundreds of ops makes
    /// Graphviz's layout of a few hundred ops take minutes instead of a second.
    Counted,
}

/// [`write_drawn`] into a string.
fn dag_drawn(replay: &Replay, max_ops: usize, earlier: EarlierOps) -> String {
    let mut dot = Vec::new();
    write_drawn(replay, max_ops, earlier, &mut dot).expect("writing to memory does not fail");
    String::from_utf8(dot).expect("DOT is written from strings")
}

/// Writes the DAG of the replay's last `max_ops` ops to `out` (see [`dag_of_last`]).
fn write_drawn(
    replay: &Replay,
    max_ops: usize,
    earlier: EarlierOps,
    out: &mut impl io::Write,
) -> io::Result<()> {
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
    out.write_all(b"digraph dep {\n  rankdir=TB;\n")?;
    out.write_all(
        b"  node [shape=box, style=\"rounded,filled\", fontname=\"monospace\", fontsize=10];\n",
    )?;
    out.write_all(b"  edge [fontname=\"monospace\", fontsize=9];\n")?;
    if first > 0 {
        let note = format!("… {first} earlier ops (of {n_ops}) not drawn");
        match earlier {
            EarlierOps::Linked => writeln!(
                out,
                "  earlier [label=\"{note}\", shape=plaintext, style=\"\"];"
            )?,
            EarlierOps::Counted => writeln!(
                out,
                "  label=\"{note}\";\n  labelloc=t;\n  fontname=\"monospace\";"
            )?,
        }
    }
    for op in &replay.ops()[first..] {
        write!(out, "  {} [label=\"", op.id)?;
        write_escaped(out, &op.label)?;
        out.write_all(b"\\n")?;
        match &op.place {
            Some(place) => {
                write_escaped(out, place.as_ref())?;
                out.write_all(" · ".as_bytes())?;
            }
            None if op.line > 0 => write!(out, "line {} · ", op.line)?,
            None => {}
        }
        out.write_all(op.state.name().as_bytes())?;
        if let Some(worker) = op.worker {
            out.write_all(" · ".as_bytes())?;
            write_escaped(out, &replay.worker_name(worker))?;
        }
        if let Some(duration) = op.duration_ns() {
            write!(out, " · {}", format_ns(duration))?;
        }
        write!(out, "\", fillcolor=\"{}\"", Role::State(op.state).hex())?;
        if path_place.contains_key(&op.id) {
            write!(out, ", color=\"{}\", penwidth=2.5", Role::Critical.hex())?;
        }
        out.write_all(b"];\n")?;
    }
    let drawn = |id: &OpId| {
        replay
            .op_position(*id)
            .is_some_and(|position| position >= first)
    };
    let mut from_earlier: Vec<OpId> = Vec::new();
    for edge in replay.edges().iter().filter(|edge| drawn(&edge.to)) {
        if !drawn(&edge.from) {
            if earlier == EarlierOps::Linked && from_earlier.last() != Some(&edge.to) {
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
        write!(out, "  {} -> {} [label=\"", edge.from, edge.to)?;
        for (index, (var, hazard)) in edge.dependencies().enumerate() {
            if index > 0 {
                out.write_all(b", ")?;
            }
            write_escaped(out, &replay.var_name(var))?;
            write!(out, " {}", hazard.short_name())?;
        }
        writeln!(
            out,
            "\", color=\"{colour}\", fontcolor=\"{colour}\", style={style}{width}];"
        )?;
    }
    for op in from_earlier {
        writeln!(
            out,
            "  earlier -> {op} [style=dotted, color=\"{}\"];",
            Role::Edge.hex()
        )?;
    }
    out.write_all(b"}\n")
}

/// How many ops a DAG drawn as SVG holds, the last ones. Graphviz's `dot` takes time that grows
/// much faster than the ops and their labelled edges: the last 200 ops of
/// `samples/mlp_graph.dep` take 1.6 s, 300 take 7.5 s, and 5,000 ops of a loop of four
/// statements do not end in 5 minutes (bench/README, "A DAG as SVG"). A `.dot` file gets every
/// op.
pub const SVG_DAG_OPS: usize = 200;

/// How long Graphviz may lay a DAG out before dep stops it and says so, rather than leaving a
/// user waiting on a layout that may take hours.
const LAYOUT_LIMIT: Duration = Duration::from_secs(30);

/// The replay's DAG as SVG through Graphviz: its last [`SVG_DAG_OPS`] ops, the number of the
/// others in its title.
pub fn dag_svg(replay: &Replay) -> Result<String, Error> {
    to_svg(&dag_drawn(replay, SVG_DAG_OPS, EarlierOps::Counted))
}

/// Renders DOT to SVG with Graphviz's `dot`; an error of kind
/// [`ErrorKind::GraphvizMissing`] says how to get it when it is not installed, one of kind
/// [`ErrorKind::GraphvizFailed`] that it failed or took longer than 30 s (it is stopped then).
pub fn to_svg(dot: &str) -> Result<String, Error> {
    let mut command = Command::new("dot");
    command.arg("-Tsvg");
    let svg = run_layout(command, dot, LAYOUT_LIMIT)?;
    Ok(String::from_utf8_lossy(&svg).into_owned())
}

/// Runs a layout program on `input` and gives its standard output, stopping it after `limit`.
/// Its input is written and its outputs read on threads of their own, so that neither pipe
/// fills while the other is waited on.
fn run_layout(mut command: Command, input: &str, limit: Duration) -> Result<Vec<u8>, Error> {
    let mut child = command
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
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    std::thread::scope(|scope| {
        // A write that fails (the program stopped, or quit on bad input) shows in its status.
        scope.spawn(move || stdin.map(|mut stdin| stdin.write_all(input.as_bytes())));
        let output = scope.spawn(move || read_all(stdout));
        let errors = scope.spawn(move || read_all(stderr));
        let waited = child.wait_timeout(limit);
        if !matches!(waited, Ok(Some(_))) {
            // Stopped, so that its pipes close and the threads above end.
            let _ = child.kill();
            let _ = child.wait();
        }
        let output = output.join().unwrap_or_default();
        let errors = errors.join().unwrap_or_default();
        match waited {
            Ok(Some(status)) if status.success() => Ok(output),
            Ok(Some(_)) => Err(Error::new(
                ErrorKind::GraphvizFailed,
                format!(
                    "`dot -Tsvg` failed: {}",
                    String::from_utf8_lossy(&errors).trim()
                ),
            )),
            Ok(None) => Err(Error::new(
                ErrorKind::GraphvizFailed,
                format!(
                    "Graphviz's `dot` took more than {} s to lay the DAG out and was stopped",
                    limit.as_secs_f64()
                ),
            )),
            Err(error) => Err(Error::new(
                ErrorKind::GraphvizFailed,
                format!("waiting for `dot`: {error}"),
            )),
        }
    })
}

/// Everything a child's pipe gives until it closes (what it gave before an error).
fn read_all(pipe: Option<impl Read>) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_end(&mut bytes);
    }
    bytes
}

/// Writes `text` as the inside of a DOT string: quotes and backslashes escaped, line breaks as
/// `\n`.
fn write_escaped(out: &mut impl io::Write, text: &str) -> io::Result<()> {
    let mut rest = text;
    while let Some(at) = rest.find(['\\', '"', '\n']) {
        out.write_all(&rest.as_bytes()[..at])?;
        out.write_all(match rest.as_bytes()[at] {
            b'\\' => b"\\\\",
            b'"' => b"\\\"",
            _ => b"\\n",
        })?;
        rest = &rest[at + 1..];
    }
    out.write_all(rest.as_bytes())
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

    /// Labels, places and variable names keep their quotes, backslashes and line breaks inside
    /// DOT strings.
    #[test]
    fn text_is_escaped_inside_dot_strings() {
        let mut out = Vec::new();
        write_escaped(&mut out, "print \"a\\b\"\nnext").unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), r#"print \"a\\b\"\nnext"#);
    }

    /// A layout program that outlives its limit is stopped and named in the error, in about
    /// the limit's time; one that ends gives what it wrote, however much (both pipes drained
    /// while it runs); one that is missing says how to get Graphviz.
    #[test]
    fn a_layout_is_stopped_at_its_limit() {
        let started = std::time::Instant::now();
        let mut sleep = Command::new("sleep");
        sleep.arg("20");
        let error = run_layout(sleep, "", Duration::from_millis(200)).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::GraphvizFailed);
        assert!(
            error.to_string().contains("took more than 0.2 s"),
            "{error}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));

        let input = "digraph dep {}\n".repeat(100_000);
        let output = run_layout(Command::new("cat"), &input, Duration::from_secs(30)).unwrap();
        assert_eq!(output, input.as_bytes());

        let missing = Command::new("dep-no-such-layout-program");
        let error = run_layout(missing, "", Duration::from_secs(1)).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::GraphvizMissing);
    }
}
