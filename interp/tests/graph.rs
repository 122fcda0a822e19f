//! Graph mode: replays equal eager execution bit for bit, buffers are never reused under a
//! pending reader, and recording is deterministic.

mod common;

use std::path::Path;

use dep_engine::Policy;
use dep_interp::{Session, SessionConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn session(policy: Policy, threads: usize) -> Session {
    Session::new(SessionConfig {
        policy,
        threads,
        ..SessionConfig::default()
    })
}

fn run(session: &mut Session, source: &str) -> String {
    let mut out = Vec::new();
    session
        .run_source("test.dep", source, &mut out)
        .unwrap_or_else(|error| panic!("{error}\n{source}"));
    session
        .finish()
        .unwrap_or_else(|error| panic!("{error}\n{source}"));
    String::from_utf8(out).unwrap()
}

/// The sample's graph, run as a graph and as the same statements eagerly, 5 times.
fn sample_variants() -> (String, String) {
    common::sample_graph_and_eager(5)
}

fn saved_weights(session: &mut Session, dir: &Path) -> Vec<Vec<u8>> {
    let saves: String = ["W1", "W2", "W3", "W4", "L"]
        .iter()
        .map(|name| format!("save({name}, \"{}/{name}.npy\")\n", dir.display()))
        .collect();
    run(session, &saves);
    ["W1", "W2", "W3", "W4", "L"]
        .iter()
        .map(|name| std::fs::read(dir.join(format!("{name}.npy"))).unwrap())
        .collect()
}

#[test]
fn a_replayed_graph_equals_eager_execution_bit_for_bit() {
    let (graph, eager) = sample_variants();
    let eager_dir = tempfile::tempdir().unwrap();
    let mut eager_session = session(Policy::Naive, 1);
    run(&mut eager_session, &eager);
    let expected = saved_weights(&mut eager_session, eager_dir.path());
    for (policy, threads) in [
        (Policy::Naive, 1),
        (Policy::Threaded, 2),
        (Policy::Threaded, 4),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut graph_session = session(policy, threads);
        run(&mut graph_session, &graph);
        assert!(
            saved_weights(&mut graph_session, dir.path()) == expected,
            "{policy:?}/{threads} differs from eager"
        );
    }
}

#[test]
fn every_optimisation_switched_off_gives_the_same_values() {
    let (graph, _) = sample_variants();
    let mut expected = None;
    for settings in [
        "",
        "with recycle = 0 {",
        "with share = 0 {",
        "with lazy = 0 {",
        "with lazy = 0, recycle = 0, share = 0 {",
        "with bulk = 3 {",
        "with bulk = 1024 {",
        "with bulk = 4, recycle = 0 {",
    ] {
        let source = if settings.is_empty() {
            graph.clone()
        } else {
            graph.replace("{ run step }", &format!("{{ {settings} run step }} }}"))
        };
        let dir = tempfile::tempdir().unwrap();
        let mut session = session(Policy::Threaded, 2);
        run(&mut session, &source);
        let weights = saved_weights(&mut session, dir.path());
        match &expected {
            None => expected = Some(weights),
            Some(expected) => assert!(&weights == expected, "`{settings}` changes the values"),
        }
    }
}

/// A random graph over 4x4 tensors: intermediates read by later statements, parameters updated.
fn random_graph(seed: u64) -> String {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut lines = vec![
        "seed 1".to_string(),
        "P = randn(4, 4)".to_string(),
        "Q = randn(4, 4)".to_string(),
        "graph g {".to_string(),
    ];
    let mut names = vec!["P".to_string(), "Q".to_string()];
    for index in 0..rng.gen_range(5..30) {
        let pick =
            |rng: &mut StdRng, names: &[String]| names[rng.gen_range(0..names.len())].clone();
        let (a, b) = (pick(&mut rng, &names), pick(&mut rng, &names));
        let line = match rng.gen_range(0..5) {
            0 => format!("  t{index} = {a} @ {b} * 0.5"),
            1 => format!("  t{index} = tanh({a}) + {b}"),
            2 => format!("  t{index} = {a} * {b} - 1"),
            3 => format!("  t{index} = softmax({a}, 1) + relu({b})"),
            _ => format!("  t{index} = transpose({a}) - {b}"),
        };
        lines.push(line);
        names.push(format!("t{index}"));
        if rng.gen_bool(0.2) {
            let c = pick(&mut rng, &names);
            lines.push(format!("  P = P * 0.9 + mean({c}) * 0.1"));
        }
    }
    let last = names.last().unwrap().clone();
    lines.push(format!("  Q = Q * 0.5 + {last} * 0.01"));
    lines.push("}".to_string());
    lines.join("\n") + "\n"
}

#[test]
fn pooled_buffers_are_never_reused_under_a_pending_reader() {
    // If a released buffer were handed to a new op while an earlier reader still used it, the
    // reader would see the new op's values and the results would differ from the naive run.
    for seed in common::seeds(0..12) {
        let graph = random_graph(seed) + "for i in 0..15 { run g }\n";
        let eager = graph
            .replace("graph g {", "def g_body() {")
            .replace("for i in 0..15 { run g }", "");
        assert!(eager.contains("def g_body"));
        let mut reference = session(Policy::Naive, 1);
        run(&mut reference, &graph);
        let ref_dir = tempfile::tempdir().unwrap();
        let saves = |dir: &Path| {
            format!(
                "save(P, \"{0}/P.npy\")\nsave(Q, \"{0}/Q.npy\")\n",
                dir.display()
            )
        };
        run(&mut reference, &saves(ref_dir.path()));
        for (threads, bulk) in [(2, 1), (4, 1), (8, 1), (2, 3), (4, 7)] {
            let dir = tempfile::tempdir().unwrap();
            let mut threaded = session(Policy::Threaded, threads);
            let graph = graph.replace(
                "{ run g }",
                // Every buffer recycled, however small (4x4 here).
                &format!("{{ with bulk = {bulk}, recycle_from = 0 {{ run g }} }}"),
            );
            run(&mut threaded, &graph);
            run(&mut threaded, &saves(dir.path()));
            for name in ["P.npy", "Q.npy"] {
                assert_eq!(
                    std::fs::read(ref_dir.path().join(name)).unwrap(),
                    std::fs::read(dir.path().join(name)).unwrap(),
                    "graph {seed} on {threads} threads, bulk {bulk}: {name}\n{graph}"
                );
            }
        }
    }
}

/// The labels of the ops pushed by `source`, run run by run (`wait` between runs), observed.
fn pushed_labels(source: &str) -> Vec<String> {
    pushed_labels_on(Policy::Threaded, source)
}

/// The labels of the ops pushed by `source` under `policy` (2 workers), observed.
fn pushed_labels_on(policy: Policy, source: &str) -> Vec<String> {
    let mut session = Session::new(SessionConfig {
        policy,
        threads: 2,
        observe: true,
        ..SessionConfig::default()
    });
    run(&mut session, source);
    session.finish().unwrap();
    labels_pushed(&session)
}

/// The labels of the ops `session`'s event log saw pushed, in order.
fn labels_pushed(session: &Session) -> Vec<String> {
    session
        .event_log()
        .unwrap()
        .events()
        .into_iter()
        .filter_map(|event| match event.kind {
            dep_engine::EventKind::Pushed { label, .. } => Some(label.to_string()),
            _ => None,
        })
        .collect()
}

/// The releases among `labels`, run by run: those before the first `marker` label, then those
/// between each and the next.
fn releases_by_run(labels: &[String], marker: &str) -> Vec<Vec<String>> {
    labels
        .split(|label| label == marker)
        .map(|run| {
            run.iter()
                .filter(|label| label.starts_with("release"))
                .cloned()
                .collect()
        })
        .collect()
}

/// A buffer under `recycle_from` bytes (16 KiB unless set) is released by the first run only,
/// which shows its size; from then on its variable keeps it, as eager mode would. A larger one
/// is released by every run; one that grows to that size is released again; and
/// `recycle_from = 0` recycles every buffer.
#[test]
fn small_buffers_are_kept_from_run_to_run_and_large_ones_recycled() {
    let graph = "a = ones(4)\nbig = ones(8192)\ngraph g {\n  t = a + 1\n  u = big * 2\n  a = t * 0.5\n  big = u - 1\n}\n";
    let marker = "mark = a * 1";
    let runs = format!(
        "{graph}run g\nwait\nmark = a * 1\nrun g\nwait\nmark = a * 1\nrun g\nwait\nmark = a * 1\nwith recycle_from = 0 {{ run g }}\nwait\nmark = a * 1\nprint g\n"
    );
    let labels = pushed_labels(&runs);
    let releases = releases_by_run(&labels, marker);
    // The first run pushes both releases (`t`'s keeps its 16 bytes); once it has shown their
    // sizes, only `u` (32 KiB) is released.
    assert_eq!(releases[0], ["release t", "release u"], "{labels:?}");
    assert_eq!(releases[1], ["release u"], "{labels:?}");
    assert_eq!(releases[2], ["release u"], "{labels:?}");
    assert_eq!(
        releases[3],
        ["release t", "release u"],
        "recycle_from = 0 recycles every buffer: {labels:?}"
    );

    // `t` grows from 16 bytes to 32 KiB: released again once a replay has seen it.
    let growing = format!(
        "{graph}run g\nwait\nmark = a * 1\nrun g\nwait\nmark = a * 1\na = ones(8192)\nrun g\nwait\nmark = a * 1\nrun g\nwait\nmark = a * 1\n"
    );
    let labels = pushed_labels(&growing);
    let releases = releases_by_run(&labels, marker);
    assert_eq!(releases[1], ["release u"], "{labels:?}");
    // The run after `a` grew writes a large `t` and keeps it; the next one sees its size.
    assert_eq!(releases[2], ["release u"], "{labels:?}");
    assert_eq!(releases[3], ["release t", "release u"], "{labels:?}");
}

/// Which releases a replay pushes does not depend on the engine nor on when its ops happen to
/// run: with no `wait` between runs, the first run releases every buffer, and its sizes, which
/// the second run waits for once, decide for the later ones on every engine (the simulated one
/// pushed every release at every run, the threaded one until it happened to see the sizes).
#[test]
fn every_engine_pushes_the_same_releases_run_after_run() {
    let source = "a = ones(4)\nbig = ones(8192)\ngraph g {\n  t = a + 1\n  u = big * 2\n  a = t * 0.5\n  big = u - 1\n}\nrun g\nmark = a * 1\nrun g\nmark = a * 1\nrun g\nmark = a * 1\nfor i in 0..20 { run g }\nmark = a * 1\nprint g\n";
    let mut reference = None;
    for policy in [
        Policy::Naive,
        Policy::Threaded,
        Policy::PerDevice,
        Policy::Sim,
    ] {
        for _ in 0..3 {
            let labels = pushed_labels_on(policy, source);
            let releases = releases_by_run(&labels, "mark = a * 1");
            assert_eq!(releases[0], ["release t", "release u"], "{policy:?}");
            assert_eq!(releases[1], ["release u"], "{policy:?}: {labels:?}");
            assert_eq!(releases[2], ["release u"], "{policy:?}: {labels:?}");
            assert_eq!(releases[3], ["release u"; 20], "{policy:?}: {labels:?}");
            match &reference {
                None => reference = Some(labels),
                Some(reference) => assert_eq!(&labels, reference, "{policy:?}"),
            }
        }
    }
}

/// What `print g` says of kept buffers, and that keeping them changes no value.
#[test]
fn the_report_names_the_kept_buffers_and_the_values_stay_the_same() {
    let graph = "a = ones(4)\nbig = ones(8192)\ngraph g {\n  t = a + 1\n  u = big * 2\n  a = t * 0.5\n  big = u - 1\n}\nfor i in 0..3 { run g }\nprint g\nprint a, big[0]\n";
    let mut kept = session(Policy::Threaded, 2);
    let out = run(&mut kept, graph);
    assert!(
        out.contains(
            "  2 internal buffers: 1 released after their last reader, 1 smaller than 16.0 KiB kept from run to run\n"
        ),
        "{out}"
    );
    // Eager: t and u both live (16 B + 32 KiB); the graph: u released after its reader, t kept.
    assert!(
        out.contains("peak memory per run: eager 64.0 KiB, graph 64.0 KiB (0% less)"),
        "{out}"
    );
    let mut recycled = session(Policy::Threaded, 2);
    let every = run(
        &mut recycled,
        &graph.replace(
            "for i in 0..3 { run g }",
            "for i in 0..3 { with recycle_from = 0 { run g } }",
        ),
    );
    assert!(
        every.contains("  2 internal buffers, released after their last reader\n"),
        "{every}"
    );
    let values = |out: &str| out.lines().last().unwrap().to_string();
    assert_eq!(values(&out), values(&every));
    assert_eq!(values(&out), "[1. 1. 1. 1.] 1");
}

/// A bulk is one engine op running its statements in order: a failure inside it names the
/// failing statement, stops the bulk, and leaves the session usable.
#[test]
fn a_bulked_replay_is_fewer_engine_ops_and_names_a_failing_statement() {
    let log_session = |source: &str| {
        let mut session = Session::new(SessionConfig {
            policy: Policy::Threaded,
            threads: 2,
            observe: true,
            ..SessionConfig::default()
        });
        let mut out = Vec::new();
        let result = session.run_source("bulk.dep", source, &mut out);
        (session, result, String::from_utf8(out).unwrap())
    };
    let block = "a = ones(4)\nb = ones(4)\ngraph g {\n  t1 = a + b\n  t2 = t1 * 2\n  t3 = t2 - a\n  b = t3 + t1\n}\n";
    let (mut session, result, _) =
        log_session(&format!("{block}with bulk = 2 {{ run g }}\nwait\n"));
    result.unwrap();
    session.finish().unwrap();
    let labels = labels_pushed(&session);
    assert!(
        labels.contains(&"bulk of 2: t1 = a + b; t2 = t1 * 2".to_string()),
        "{labels:?}"
    );
    assert!(
        labels.contains(&"bulk of 2: t3 = t2 - a; b = t3 + t1".to_string()),
        "{labels:?}"
    );
    assert!(
        !labels.iter().any(|label| label.starts_with("release")),
        "{labels:?}"
    );

    let failing = "a = ones(4)\nm = ones(3, 3)\nout = zeros(4)\ngraph g {\n  t1 = a + 1\n  t2 = t1 @ m\n  out = t2 * 2\n}\nwith bulk = 8 { run g }\nprint a\nprint out\n";
    let (mut session, result, out) = log_session(failing);
    let error = result.unwrap_err();
    // The failing statement's place and message, as without bulking.
    assert_eq!(
        error.message(),
        "`t2 = t1 @ m`: matmul: shapes [4] and [3, 3] are not aligned (4 != 3)"
    );
    let error = error.to_string();
    assert!(
        error.contains(" --> bulk.dep:6:3\n  |\n6 |   t2 = t1 @ m\n"),
        "{error}"
    );
    assert!(out.contains("[1. 1. 1. 1.]"), "{out}");
    let mut out = Vec::new();
    session
        .run_source("more.dep", "print a + 1\n", &mut out)
        .unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), "[2. 2. 2. 2.]\n");
}

/// A bulk whose first step fails must not hand the old value to a later step that reads it
/// (the bulk reads what it also writes): bulked or not, the failure is what is reported.
#[test]
fn a_failure_inside_a_bulk_is_not_hidden_by_later_steps() {
    for bulk in [1, 2, 8] {
        let source = format!(
            "a = ones(4)\nm = ones(3, 3)\nW = ones(4)\nout = zeros(4)\ngraph g {{\n  W = a @ m\n  out = W * 2\n  W = out + 1\n}}\nwith bulk = {bulk} {{ run g }}\nprint W\n"
        );
        let mut session = session(Policy::Threaded, 2);
        let mut out = Vec::new();
        let error = session
            .run_source("bulk.dep", &source, &mut out)
            .unwrap_err()
            .to_string();
        assert!(error.contains("matmul"), "bulk {bulk}: {error}");
        assert!(
            out.is_empty(),
            "bulk {bulk} printed {:?}",
            String::from_utf8_lossy(&out)
        );
    }
}

#[test]
fn a_bulk_size_out_of_range_is_refused_with_its_place() {
    let mut session = session(Policy::Naive, 1);
    let mut out = Vec::new();
    let error = session
        .run_source(
            "bulk.dep",
            "graph g {\n  x = ones(2)\n}\nwith bulk = 0 { run g }\n",
            &mut out,
        )
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("bulk = 0: a bulk holds 1 to 1024 ops"),
        "{error}"
    );
    assert!(error.contains("bulk.dep:4:13"), "{error}");
    // A negative size to recycle from, refused the same way; the session goes on.
    let error = session
        .run_source(
            "sizes.dep",
            "graph h {\n  y = ones(2)\n}\nwith recycle_from = -1 { run h }\n",
            &mut out,
        )
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("recycle_from = -1: a size in bytes is at least 0"),
        "{error}"
    );
    assert!(error.contains("sizes.dep:4:21"), "{error}");
    session
        .run_source("more.dep", "with recycle_from = 0 { run g }\n", &mut out)
        .unwrap();
}

#[test]
fn recording_twice_gives_the_same_dag() {
    let (graph, _) = sample_variants();
    let mut first = session(Policy::Naive, 1);
    run(&mut first, &graph);
    let mut second = session(Policy::Threaded, 2);
    run(&mut second, &graph);
    let dot = first.graph_dot("step").unwrap();
    assert_eq!(dot, second.graph_dot("step").unwrap());
    assert!(dot.contains(" RAW\"]") && dot.contains(" WAR\"]"), "{dot}");
    // Recording again in the same session replaces the graph with one of the same edges (its
    // labels carry session-wide line numbers, which moved on).
    run(&mut first, &graph);
    let edges = |dot: &str| {
        dot.lines()
            .filter(|line| line.contains("->"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(edges(&first.graph_dot("step").unwrap()), edges(&dot));
}

#[test]
fn the_dag_has_an_edge_for_every_raw_war_and_waw() {
    let mut session = session(Policy::Naive, 1);
    run(
        &mut session,
        "A = ones(2)\nB = ones(2)\ngraph g {\n  C = A + 1\n  A = B * 2\n  A = A + C\n  D = A\n}\n",
    );
    let dot = session.graph_dot("g").unwrap();
    let edges: Vec<&str> = dot
        .lines()
        .filter(|line| line.contains("->"))
        .map(str::trim)
        .collect();
    assert_eq!(
        edges,
        [
            "op0 -> op1 [label=\"A WAR\"];",
            "op0 -> op2 [label=\"C RAW\"];",
            "op1 -> op2 [label=\"A WAW\"];",
            "op2 -> op3 [label=\"A RAW\"];",
        ]
    );
    let report = session.graph_report("g").unwrap();
    assert!(
        report.starts_with(
            "graph g: 4 ops, 4 edges (carrying 2 RAW, 1 WAR, 1 WAW), critical path 4 ops, 0 runs"
        ),
        "{report}"
    );
}

/// Two ops ordered by two conflicts are one edge carrying both: `A = C * 2` reads C after
/// `C = A + 2` wrote it and writes A after it read it. The report counted the edge as RAW only
/// and its DOT named C alone.
#[test]
fn an_edge_carries_every_conflict_between_its_two_ops() {
    let mut session = session(Policy::Naive, 1);
    run(
        &mut session,
        "A = ones(2)\ngraph g {\n  C = A + 2\n  A = C * 2\n}\n",
    );
    let dot = session.graph_dot("g").unwrap();
    assert!(
        dot.contains("op0 -> op1 [label=\"C RAW, A WAR\"];"),
        "{dot}"
    );
    let report = session.graph_report("g").unwrap();
    assert!(
        report.starts_with("graph g: 2 ops, 1 edge (carrying 1 RAW, 1 WAR, 0 WAW)"),
        "{report}"
    );
}

#[test]
fn what_cannot_be_recorded_is_refused_with_its_place() {
    let mut session = session(Policy::Naive, 1);
    let mut out = Vec::new();
    session.run_source("g.dep", "A = 1", &mut out).unwrap();
    // Found as the input is parsed: nothing of it runs.
    let error = session
        .run_source(
            "g.dep",
            "C = 2\ngraph g {\n  B = A + 1\n  print B\n}\n",
            &mut out,
        )
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("`print` cannot be recorded in a graph"),
        "{error}"
    );
    assert!(error.to_string().contains("--> g.dep:4:3"), "{error}");
    assert!(!session.variables().iter().any(|var| var.name == "C"));
    let error = session
        .run_source("g.dep", "run nothing\n", &mut out)
        .unwrap_err();
    assert!(
        error.to_string().contains("no graph named `nothing`"),
        "{error}"
    );
    // What a recording would do once, when recorded, rather than at every run (they were
    // accepted: `clock()` gave the time of the recording at every run, `save` wrote its file
    // then and never again, `device` configured the device then), and a loop bound computed in
    // the block (it said the ops were cancelled by Ctrl-C).
    let saved = std::env::temp_dir().join(format!("dep-graph-save-{}.npy", std::process::id()));
    let save = format!("graph g {{\n  save(A, \"{}\")\n}}\n", saved.display());
    let cases = [
        (
            "graph g {\n  T = clock()\n}\n",
            "clock() cannot be recorded in a graph",
            "2:7",
        ),
        (save.as_str(), "`save` cannot be recorded in a graph", "2:3"),
        (
            "graph g {\n  device gpu0 = sim(tflops=1)\n}\n",
            "`device` cannot be recorded in a graph",
            "2:3",
        ),
        (
            "graph g {\n  n = 3\n  for i in 0..n { A = A + 1 }\n}\n",
            "`n` is computed in a graph, so its value is not known until it runs",
            "3:15",
        ),
        (
            "priority auto {\n  B = A + 1\n  print B\n}\n",
            "`print` cannot be recorded in a `priority auto` block",
            "3:3",
        ),
        (
            "priority auto {\n  T = clock()\n}\n",
            "clock() cannot be recorded in a `priority auto` block",
            "2:7",
        ),
    ];
    for (source, message, place) in cases {
        let error = session.run_source("g.dep", source, &mut out).unwrap_err();
        let error = error.to_string();
        assert!(error.contains(message), "{source}: {error}");
        assert!(
            error.contains(&format!("--> g.dep:{place}")),
            "{source}: {error}"
        );
        assert!(session.graph_names().is_empty(), "{source}");
    }
    assert!(!saved.exists(), "a refused save wrote its file");
    let out = run(&mut session, "print A");
    assert_eq!(out, "1.0\n");
}

/// A function never changes a global: `run g` inside one is refused when `g` writes globals
/// (it changed them), and the globals keep their values.
#[test]
fn a_function_cannot_run_a_graph_that_writes_globals() {
    let mut session = session(Policy::Threaded, 2);
    let mut out = Vec::new();
    let error = session
        .run_source(
            "g.dep",
            "A = ones(2)\nB = ones(2)\ngraph g {\n  t = A + B\n  A = t * 2\n}\n\
             def f() {\n  run g\n  return 0\n}\nz = f()\n",
            &mut out,
        )
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`run g` inside a function would change the globals it writes (A)")
            && error.contains("--> g.dep:8:7")
            && error.contains("in `f`, called at g.dep:11:5"),
        "{error}"
    );
    assert_eq!(run(&mut session, "run g\nprint A"), "[4. 4.]\n");
}

/// `del g` forgets a graph, and so does recording another of its name; the graph's own
/// buffers are deleted with it (they stayed live variables in every view).
#[test]
fn a_graph_deleted_or_recorded_again_deletes_its_own_buffers() {
    let mut session = session(Policy::Threaded, 2);
    run(
        &mut session,
        "A = ones(2)\ngraph g {\n  t = A + 1\n  A = t * 2\n}\nrun g\n\
         graph g {\n  u = A + 1\n  A = u * 3\n}\nrun g\nwait",
    );
    let live_vars = |session: &Session| -> Vec<String> {
        let snapshot = session.monitor().snapshot();
        let mut names: Vec<String> = snapshot
            .vars
            .iter()
            .map(|var| var.name.to_string())
            .filter(|name| name != "rng")
            .collect();
        names.sort();
        names
    };
    assert_eq!(live_vars(&session), ["A", "u"]);
    assert_eq!(run(&mut session, "del g\nwait\nprint A"), "[15. 15.]\n");
    assert_eq!(live_vars(&session), ["A"]);
    assert!(session.graph_names().is_empty());
    let mut out = Vec::new();
    let error = session
        .run_source("g.dep", "run g\n", &mut out)
        .unwrap_err();
    assert!(error.to_string().contains("no graph named `g`"), "{error}");
}

/// `print g` reports the memory of the options its runs had: with `lazy = 0` or `recycle = 0`
/// no buffer is released within a run, so the graph's peak is eager's (it reported the saving
/// of recycling, 25% less, and said buffers were released after their last reader).
#[test]
fn the_report_follows_the_options_the_graph_ran_with() {
    let graph = "X = ones(1000, 1000)\ngraph g {\n  A = X * 2\n  B = A * 2\n  C = B * 2\n  X = C * 0.125\n}\n";
    let mut recycled = session(Policy::Naive, 1);
    let out = run(
        &mut recycled,
        &format!("{graph}for i in 0..4 {{ run g }}\nprint g\n"),
    );
    assert!(
        out.contains("  3 internal buffers, released after their last reader\n  peak memory per run: eager 15.3 MiB, graph 11.4 MiB (25% less)\n"),
        "{out}"
    );
    for (option, buffers) in [
        (
            "lazy",
            "3 internal buffers, kept for the graph's whole life (`lazy = 0`)",
        ),
        (
            "recycle",
            "3 internal buffers, released at the end of each run (`recycle = 0`)",
        ),
    ] {
        let mut session = session(Policy::Naive, 1);
        let out = run(
            &mut session,
            &format!("{graph}for i in 0..4 {{ with {option} = 0 {{ run g }} }}\nprint g\n"),
        );
        assert!(
            out.contains(&format!(
                "  {buffers}\n  peak memory per run: eager 15.3 MiB, graph 15.3 MiB (0% less)\n"
            )),
            "{option} = 0: {out}"
        );
    }
}

/// The report counts a variable the graph does not own by the size its runs used: deleted
/// after the last run (once, or after a measuring second run), it still counts (the report
/// said 11.4 MiB, leaving X out, where every run held it).
#[test]
fn the_report_counts_a_variable_deleted_after_the_runs() {
    let graph = "X = ones(1000, 1000)\ngraph g {\n  A = X * 2\n  B = A * 2\n  C = B * 2\n  X = C * 0.125\n}\n";
    let per_run = "peak memory per run: eager 15.3 MiB, graph 11.4 MiB (25% less)";
    for policy in [Policy::Naive, Policy::Threaded] {
        for runs in ["run g\n", "run g\nrun g\nprint g\n"] {
            let mut session = session(policy, 2);
            let out = run(&mut session, &format!("{graph}{runs}del X\n"));
            let report = session.graph_report("g").expect("a report");
            assert!(
                report.contains(per_run),
                "{policy:?}, {runs:?}: {report}\n{out}"
            );
        }
    }
}

/// A graph without buffers of its own says so, rather than "0 internal buffers, released after
/// their last reader".
#[test]
fn a_graph_without_buffers_of_its_own_says_so() {
    let mut session = session(Policy::Naive, 1);
    let out = run(
        &mut session,
        "W = ones(2)\ngraph g { W = W * 10 }\nrun g\nprint g\n",
    );
    assert!(out.contains("\n  no internal buffers\n"), "{out}");
}
