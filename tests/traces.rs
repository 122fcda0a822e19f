//! Traces: every trace `dep run --trace` writes reads back with `dep replay`, on every sample
//! and every engine; the JSON and the Perfetto protobuf of one run show the same slices and
//! flows; a long observed run stays within a memory limit.

use dep_views::{perfetto, trace};

use crate::util::{repo_root, Run, TestDir};

/// Every engine policy, with the worker count it runs with.
const ENGINES: &[(&str, &str)] = &[
    ("naive", "1"),
    ("threaded", "2"),
    ("per-device", "2"),
    ("sim", "2"),
];

/// Every sample script in `samples/`, by path.
fn samples() -> Vec<std::path::PathBuf> {
    let mut samples: Vec<_> = std::fs::read_dir(repo_root().join("samples"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "dep"))
        .collect();
    samples.sort();
    assert!(samples.len() >= 9, "{samples:?}");
    samples
}

/// The summary's first line without its wall time: `summary: 10 ops (10 done)`.
fn ops_line(text: &str) -> &str {
    let line = text
        .lines()
        .find(|line| line.starts_with("summary: "))
        .unwrap_or_else(|| panic!("no summary in\n{text}"));
    line.split(", wall ").next().unwrap()
}

/// The ways trace files can spread their work over threads (`DEP_TRACE_THREADS`): each file
/// written by the recorder, or by a thread of its own and the JSON's event log by another.
const TRACE_THREADS: &[&str] = &["off", "on"];

/// Every engine (with its worker count) with every way of writing traces.
fn every_way() -> impl Iterator<Item = ((&'static str, &'static str), &'static str)> {
    ENGINES
        .iter()
        .flat_map(|engine| TRACE_THREADS.iter().map(move |way| (*engine, *way)))
}

/// `dep run SCRIPT` on `engine` with `threads` workers, writing `t.json` and `t.pftrace` with
/// their work spread as `trace_threads` says, and the views of `more`.
fn traced_run(
    dir: &TestDir,
    script: &std::path::Path,
    (engine, threads): (&str, &str),
    trace_threads: &str,
    more: &[&str],
) -> Run {
    let mut command = dir.dep();
    command.env("DEP_TRACE_THREADS", trace_threads);
    Run::of(
        command
            .arg("run")
            .arg(script)
            .args([
                "--engine",
                engine,
                "--threads",
                threads,
                "--trace",
                "t.json",
                "--trace",
                "t.pftrace",
            ])
            .args(more),
    )
}

/// Whether `again`, a trace written again from the replay of `text`, holds the same slices and
/// flows and the same events. A trace streamed while the run went holds its events in the
/// order they were logged and its slices in the order they ended, a replay both in the order
/// of their times: slices are compared as sets, events as their replays hold them.
fn written_again_the_same(text: &str, again: &str) -> bool {
    let slices = |trace: &str| {
        let json: serde_json::Value = serde_json::from_str(trace).unwrap();
        let mut slices: Vec<String> = json["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        slices.sort_unstable();
        slices
    };
    let events = |trace: &str| trace::read_trace(trace).unwrap().events().to_vec();
    slices(text) == slices(again) && events(text) == events(again)
}

#[test]
fn the_trace_of_every_sample_on_every_engine_replays() {
    let dir = TestDir::new();
    for sample in samples() {
        let name = sample.file_name().unwrap().to_string_lossy().into_owned();
        for ((engine, threads), trace_threads) in every_way() {
            let name = format!("{name} (trace threads {trace_threads})");
            let run = traced_run(&dir, &sample, (engine, threads), trace_threads, &[]);
            // Samples that place ops on GPUs fail on a real engine without one, after writing
            // their views.
            let no_gpu = run.code == 1 && run.stderr.contains("gpu");
            assert!(
                run.code == 0 || no_gpu,
                "{name} on {engine}: exit {}\n{}",
                run.code,
                run.stderr
            );
            let text = std::fs::read_to_string(dir.path().join("t.json")).unwrap();
            // The event log, written by a thread of its own while the run went, is the one the
            // slices were folded from: written again from it, the trace is the same, byte for
            // byte (none of the interpreter's bookkeeping in it, no event left out at the end).
            let again = trace::chrome_trace(&trace::read_trace(&text).unwrap());
            assert!(
                written_again_the_same(&text, &again),
                "{name} on {engine}: the trace written again from its event log differs"
            );
            let json = perfetto::read_json(&text).unwrap();
            let protobuf =
                perfetto::read(&std::fs::read(dir.path().join("t.pftrace")).unwrap()).unwrap();
            assert_eq!(json, protobuf, "{name} on {engine}: the two formats differ");
            assert!(!json.slices.is_empty(), "{name} on {engine}");
            for (category, from, to) in &json.flows {
                assert!(
                    json.op_at(*from).is_some() && json.op_at(*to).is_some(),
                    "{name} on {engine}: a {category} flow from {from:?} to {to:?} binds to no op"
                );
            }
            let replay = Run::of(dir.dep().args(["replay", "t.json", "--end"]));
            assert_eq!(
                replay.code, 0,
                "{name} on {engine}: replay failed\n{}",
                replay.stderr
            );
            assert!(replay.stdout.starts_with("step "), "{}", replay.stdout);
            let (step, total) = replay.stdout["step ".len()..]
                .split_once(' ')
                .unwrap()
                .0
                .split_once('/')
                .unwrap();
            assert_eq!(step, total, "{name} on {engine}: the last step");
            assert_eq!(
                ops_line(&replay.stdout),
                ops_line(&run.stderr),
                "{name} on {engine}: the replay's ops are the run's"
            );
        }
    }
}

/// Checks that `dep run long.dep --summary` of `script`, with at most 300 MB of address space,
/// prints `stdout` and sums up `n_ops` ops, every one done.
fn summed_up_under_a_memory_limit(script: &str, stdout: &str, n_ops: usize) {
    let dir = TestDir::new();
    dir.write("long.dep", script);
    let command = format!(
        "ulimit -v 300000 && exec '{}' run long.dep --summary",
        crate::util::dep_binary().display()
    );
    let mut shell = std::process::Command::new("sh");
    shell
        .args(["-c", &command])
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env_remove("DEP_ENGINE")
        .env_remove("DEP_THREADS")
        .stdin(std::process::Stdio::null());
    let run = Run::of(&mut shell).expect_code(0);
    assert_eq!(run.stdout, stdout);
    let summary = format!("summary: {n_ops} ops ({n_ops} done), wall ");
    assert!(run.stderr.starts_with(&summary), "{}", run.stderr);
}

#[test]
fn a_long_observed_run_completes_under_a_memory_limit() {
    // 300,002 ops (the `print`'s wait for its temporary and its deletion are not counted):
    // folding the summary from the whole event log took 620 MB here.
    summed_up_under_a_memory_limit(
        "x = ones(64)\nfor i in 0..150000 {\n  y = x + 1\n  x = y * 1\n}\nprint sum(x)\n",
        "9.600064e+06\n",
        300002,
    );
}

#[test]
fn a_long_loop_reading_a_variable_it_never_writes_completes_under_a_memory_limit() {
    // Every op reads `b`, which nothing writes: the fold held every op for a later write of
    // `b` (about 400 bytes each) and ran out of memory here.
    summed_up_under_a_memory_limit(
        "b = ones(4)\nc = ones(4)\nfor i in 0..400000 {\n  c = c + b\n}\nprint sum(c)\n",
        "1.600004e+06\n",
        400003,
    );
}

/// An observed loop's ops each have a label of their own (`A = ones(8) * i i=41`): the event
/// log and the summary's fold kept one string per op (about 350 bytes an op) and ran out of
/// memory here.
#[test]
fn a_loop_whose_ops_have_labels_of_their_own_is_summed_up_within_a_memory_limit() {
    summed_up_under_a_memory_limit(
        "B = ones(8)\nfor i in 0..1000000 {\n  A = ones(8) * i\n}\nprint A[0]\n",
        "999999.0\n",
        1000002,
    );
}

/// The trace writers keep a few thousand labels and strings, and start again when full (they
/// kept one per op of a loop whose ops each have a label of their own): both traces of a run
/// of more still read back, alike, each op named by its own label.
#[test]
fn traces_of_more_labels_than_their_writers_keep_read_back() {
    let dir = TestDir::new();
    let script = dir.write(
        "long.dep",
        "B = ones(8)\nfor i in 0..10000 {\n  A = ones(8) * i\n}\nprint A[0]\n",
    );
    for trace_threads in TRACE_THREADS {
        let run = traced_run(&dir, &script, ("threaded", "2"), trace_threads, &[]);
        assert_eq!(run.stdout, "9999.0\n", "{}", run.stderr);
        let text = std::fs::read_to_string(dir.path().join("t.json")).unwrap();
        let json = perfetto::read_json(&text).unwrap();
        let protobuf =
            perfetto::read(&std::fs::read(dir.path().join("t.pftrace")).unwrap()).unwrap();
        assert!(json == protobuf, "{trace_threads}: the two formats differ");
        let replay = trace::read_trace(&text).unwrap();
        let labels: Vec<&str> = replay.ops().iter().map(|op| &*op.label).collect();
        let expected: Vec<String> = (0..10000)
            .map(|index| format!("A = ones(8) * i i={index}"))
            .collect();
        assert_eq!(labels.len(), 10002, "{trace_threads}");
        assert!(
            labels[1..10001] == expected,
            "{trace_threads}: the labels differ"
        );
        assert!(
            written_again_the_same(&text, &trace::chrome_trace(&replay)),
            "{trace_threads}: the trace written again from its event log differs"
        );
    }
}

#[test]
fn a_trace_of_several_ranks_is_written_in_the_format_its_name_says() {
    // Before, `--trace t.pftrace` beside `--ranks` got the merged Chrome JSON, which no Perfetto
    // reader opens as protobuf.
    let dir = TestDir::new();
    let sample = repo_root().join("samples/ps_ranks.dep");
    let run = Run::of(dir.dep().arg("run").arg(&sample).args([
        "--engine",
        "sim",
        "--ranks",
        "3",
        "--trace",
        "t.json",
        "--trace",
        "t.pftrace",
    ]));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json =
        perfetto::read_json(&std::fs::read_to_string(dir.path().join("t.json")).unwrap()).unwrap();
    let protobuf = perfetto::read(&std::fs::read(dir.path().join("t.pftrace")).unwrap())
        .expect("the .pftrace file is Perfetto's protobuf");
    // The JSON puts each rank in a process of its own (its lanes renumbered); the protobuf keeps
    // the merged run's lanes, each named after its rank. Both show the same slices at the same
    // times, and the same flows.
    let timed = |contents: &perfetto::TraceContents| {
        let mut slices: Vec<_> = contents
            .slices
            .iter()
            .map(|slice| (slice.start_ns, slice.end_ns, slice.name.clone()))
            .collect();
        slices.sort();
        slices
    };
    assert!(!json.slices.is_empty());
    assert_eq!(timed(&json), timed(&protobuf));
    assert_eq!(json.flows.len(), protobuf.flows.len());
    for rank in 0..3 {
        let prefix = format!("r{rank} ");
        assert!(
            protobuf
                .threads
                .values()
                .any(|name| name.starts_with(&prefix)),
            "no lane of rank {rank} in {:?}",
            protobuf.threads
        );
    }
}

/// A trace written over an earlier one is a new file (the old one is not truncated in place,
/// which costs a long trace's rerun the freeing of its pages and a flush at close): it holds
/// the new run alone, keeps the old file's permissions, and a file with another name (a hard
/// link) is written through instead, so that both names see the new trace.
#[cfg(unix)]
#[test]
fn a_trace_over_an_earlier_one_replaces_it() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = TestDir::new();
    dir.write(
        "long.dep",
        "x = ones(4)\nfor i in 0..50 { x = x + 1 }\nprint x[0]\n",
    );
    dir.write("short.dep", "y = ones(4)\nprint y[0]\n");
    let trace = dir.path().join("t.json");
    let linked = dir.path().join("linked.json");
    Run::of(dir.dep().args(["run", "long.dep", "--trace", "t.json"])).expect_code(0);
    std::fs::set_permissions(&trace, std::fs::Permissions::from_mode(0o640)).unwrap();
    let first = std::fs::metadata(&trace).unwrap();
    Run::of(dir.dep().args(["run", "short.dep", "--trace", "t.json"])).expect_code(0);
    let second = std::fs::metadata(&trace).unwrap();
    assert_ne!(first.ino(), second.ino(), "a new file");
    assert_eq!(second.mode() & 0o777, 0o640, "the old file's permissions");
    let read = |path: &std::path::Path| {
        perfetto::read_json(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let n_slices = |script: &str| {
        Run::of(dir.dep().args(["run", script, "--trace", "fresh.json"])).expect_code(0);
        read(&dir.path().join("fresh.json")).slices.len()
    };
    let (n_short, n_long) = (n_slices("short.dep"), n_slices("long.dep"));
    assert!(n_long > n_short, "{n_long} {n_short}");
    assert_eq!(
        read(&trace).slices.len(),
        n_short,
        "the short run's ops alone"
    );
    Run::of(dir.dep().args(["replay", "t.json", "--end"])).expect_code(0);

    std::fs::hard_link(&trace, &linked).unwrap();
    Run::of(dir.dep().args(["run", "long.dep", "--trace", "t.json"])).expect_code(0);
    assert_eq!(
        std::fs::metadata(&trace).unwrap().ino(),
        std::fs::metadata(&linked).unwrap().ino(),
        "a file with two names is written through"
    );
    assert_eq!(
        read(&linked).slices.len(),
        n_long,
        "the other name sees the new trace"
    );
}

/// What `dep run --summary` of `script` prints to stderr on `engine` with `threads` workers,
/// exiting with `code`.
fn summary_of(dir: &TestDir, script: &str, engine: &str, threads: &str, code: i32) -> String {
    let run = Run::of(dir.dep().arg("run").arg(script).args([
        "--engine",
        engine,
        "--threads",
        threads,
        "--summary",
    ]))
    .expect_code(code);
    run.stderr
}

/// The summary's memory in use at the end is the program's, the same on every engine: the
/// threaded engines' finished op blocks kept the bodies of statements gone, and with them their
/// constants (`A = ones(2, 3)` ended with 32 B in use there, 24 B on the naive engine).
#[test]
fn the_memory_in_use_at_the_end_is_the_same_on_every_engine() {
    let dir = TestDir::new();
    dir.write("one.dep", "A = ones(2, 3)\n");
    dir.write(
        "loop.dep",
        "x = ones(64)\nfor i in 0..200 { y = x + 1; x = y * 1 }\nprint x[0]\n",
    );
    for (script, in_use) in [("one.dep", "24 B"), ("loop.dep", "512 B")] {
        for (engine, threads) in ENGINES {
            let stderr = summary_of(&dir, script, engine, threads, 0);
            assert!(
                stderr.contains(&format!(", {in_use} in use at the end, ")),
                "{script} on {engine}: {stderr}"
            );
        }
    }
}

/// The summary counts an allocation for each buffer a value is made in, and none for a buffer
/// kept for a later value: `y = x @ x` in a loop, whose result is made in y's old buffer (the
/// op's spare), counted two per statement, and a graph's pool one more for every buffer
/// released into it (4 per run of a graph that makes 2 values, both in buffers of its pool).
#[test]
fn a_buffer_kept_for_reuse_is_no_allocation() {
    let dir = TestDir::new();
    let allocations = |script: &str, engine: &str, threads: &str| -> u64 {
        let stderr = summary_of(&dir, script, engine, threads, 0);
        let (before, _) = stderr
            .split_once(" allocations\n")
            .unwrap_or_else(|| panic!("{stderr}"));
        before.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let graph = |runs: u32| {
        format!(
            "X = ones(128, 128)\nW = ones(128, 128)\ngraph g {{\n  H = X @ W\n  G = H * 2\n  X = G + 1\n}}\nfor i in 0..{runs} {{ run g }}\n"
        )
    };
    for (engine, threads) in ENGINES {
        let mut counts = Vec::new();
        for n in [2, 12] {
            let script =
                format!("x = ones(64, 64)\ny = ones(64, 64)\nfor i in 0..{n} {{ y = x @ x }}\n");
            dir.write("loop.dep", &script);
            dir.write("graph.dep", &graph(n));
            counts.push((
                allocations("loop.dep", engine, threads),
                allocations("graph.dep", engine, threads),
            ));
        }
        let (statements, runs) = (counts[1].0 - counts[0].0, counts[1].1 - counts[0].1);
        assert_eq!(statements, 10, "one buffer per statement on {engine}");
        // A run makes H, G and X, X where G was when nobody else holds G.
        assert!(runs <= 30, "{runs} allocations in 10 runs on {engine}");
        if *engine == "naive" {
            assert_eq!(runs, 20, "the two buffers its pool serves");
        }
    }
}

/// The free buffers a graph's pool holds for its later runs are counted apart from the memory
/// in use at the end: how many it holds depends on how a run's releases and allocations
/// interleaved (the MLP step ended with 1.3 MiB in use on the naive engine and 1.8 MiB on the
/// threaded one; with `recycle = 0`, 4.0 MiB and 3.0 MiB).
#[test]
fn the_memory_in_use_after_graph_runs_is_the_same_on_every_engine() {
    let dir = TestDir::new();
    let source = std::fs::read_to_string(repo_root().join("samples/mlp_graph.dep")).unwrap();
    let (before, _) = source
        .split_once("\nfor epoch in ")
        .expect("the sample runs its graph in a loop");
    for (option, in_use) in [
        ("recycle_from = 16384", "548.0 KiB"),
        ("recycle = 0", "548.0 KiB"),
        ("recycle_from = 0", "532.0 KiB"),
        ("lazy = 0", "4.0 MiB"),
    ] {
        dir.write(
            "graph.dep",
            &format!("{before}\nfor i in 0..5 {{ with {option} {{ run step }} }}\n"),
        );
        for (engine, threads) in ENGINES {
            let stderr = summary_of(&dir, "graph.dep", engine, threads, 0);
            assert!(
                stderr.contains(&format!(", {in_use} in use at the end, ")),
                "{option} on {engine}: {stderr}"
            );
            assert!(
                stderr.contains("; free buffers it holds: "),
                "{option} on {engine}: {stderr}"
            );
        }
    }
}

/// A graph's replays push the same ops on every engine, so its summary counts the same ops: the
/// first run releases each of the graph's own buffers, and from the second on only those of 16
/// KiB or more are (the simulated engine released the small ones at every run, the threaded
/// ones until they happened to have finished a run when the next was pushed).
#[test]
fn a_graph_pushes_the_same_ops_on_every_engine() {
    let dir = TestDir::new();
    dir.write(
        "graph.dep",
        "a = ones(4)\nbig = ones(8192)\ngraph g {\n  t = a + 1\n  u = big * 2\n  a = t * 0.5\n  big = u - 1\n}\nfor i in 0..50 { run g }\nprint a[0]\nprint g\n",
    );
    // 2 `ones`; 4 ops and 2 releases in the first run, then 4 ops and `release u` in each of
    // the 49 others; `a[0]`.
    for (engine, threads) in ENGINES {
        let stderr = summary_of(&dir, "graph.dep", engine, threads, 0);
        assert!(
            stderr.starts_with("summary: 254 ops (254 done), "),
            "on {engine}: {stderr}"
        );
        assert!(
            stderr.contains(
                "2 internal buffers: 1 released after their last reader, 1 smaller than 16.0 KiB kept from run to run"
            ),
            "on {engine}: {stderr}"
        );
    }
}

/// The critical path is the same chain on every engine: an op of no time at its end (a
/// `print`'s wait) is on it whether the clock saw it take 100 ns or, simulated, none (the
/// simulated engine left it out); and an op skipped for a failed input ran nothing, so no path
/// goes through it: the path after a failure ends at the failed op (led on through the skipped
/// ops, it read `B → wait D`, where no dependency joins them).
#[test]
fn the_critical_path_is_the_same_chain_on_every_engine() {
    let dir = TestDir::new();
    dir.write("wait.dep", "A = work(20, ones(2))\nprint A\n");
    dir.write(
        "failed.dep",
        "A = ones(2) @ ones(3)\nB = A + 1\nC = B * 2\n",
    );
    dir.write(
        "skipped.dep",
        "A = work(20, ones(2, 3))\nB = A @ ones(4, 5)\nC = B + 1\nD = C * 2\nprint D\n",
    );
    for (script, code, path) in [
        (
            "wait.dep",
            0,
            " over 2 ops: A = work(20, ones(2)) (line 1) → wait A (line 2)",
        ),
        (
            "failed.dep",
            1,
            " over 1 op: A = ones(2) @ ones(3) (line 1)",
        ),
        (
            "skipped.dep",
            1,
            " over 2 ops: A = work(20, ones(2, 3)) (line 1) → B = A @ ones(4, 5) (line 2)",
        ),
    ] {
        for (engine, threads) in ENGINES {
            let stderr = summary_of(&dir, script, engine, threads, code);
            // The path, as one line (the summary wraps it before the memory line).
            let lines: Vec<&str> = stderr.lines().map(str::trim).collect();
            let first = lines
                .iter()
                .position(|line| line.starts_with("critical path: "))
                .unwrap_or_else(|| panic!("{script} on {engine}: {stderr}"));
            let line = lines[first..]
                .iter()
                .take_while(|line| !line.starts_with("memory"))
                .copied()
                .collect::<Vec<_>>()
                .join(" ");
            assert!(line.ends_with(path), "{script} on {engine}: {line}");
        }
    }
}

/// Two ops ordered by two conflicts are one arrow naming both, in every view: in `intro.dep`,
/// `A = C * 2` reads C after `C = A + 2` wrote it (RAW) and writes A after it read it (WAR),
/// the point of that sample. Before, only the first (`C RAW`) was shown anywhere.
#[test]
fn an_arrow_between_two_ops_names_every_conflict_between_them() {
    let dir = TestDir::new();
    let intro = repo_root().join("samples/intro.dep");
    for ((engine, threads), trace_threads) in every_way() {
        let views = ["--dot", "d.dot", "--timeline", "t.svg", "--arrows"];
        traced_run(&dir, &intro, (engine, threads), trace_threads, &views).expect_code(0);
        let case = format!("{engine} (trace threads {trace_threads})");
        let json = std::fs::read_to_string(dir.path().join("t.json")).unwrap();
        assert!(
            json.contains("\"name\":\"C RAW, A WAR\""),
            "{case}: no flow names both conflicts"
        );
        let protobuf = std::fs::read(dir.path().join("t.pftrace")).unwrap();
        assert!(
            protobuf.windows(12).any(|bytes| bytes == b"C RAW, A WAR"),
            "{case}: no Perfetto flow names both conflicts"
        );
        let dot = std::fs::read_to_string(dir.path().join("d.dot")).unwrap();
        assert!(dot.contains("[label=\"C RAW, A WAR\""), "{case}: {dot}");
        let svg = std::fs::read_to_string(dir.path().join("t.svg")).unwrap();
        assert!(
            svg.contains("<title>2 dependencies: RAW C, WAR A</title>"),
            "{case}: no arrow names both conflicts"
        );
    }
}
