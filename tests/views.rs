//! `dep run`'s view flags (`--trace`, `--timeline`, `--dot`, `--replay`, `--summary`, `--watch`)
//! and `dep replay`: the files they write, what goes to stderr, and stdout left to the script.

use std::path::Path;

use crate::util::{Run, TestDir};

/// Two independent matmul chains joined at the end: work for two workers.
const PARALLEL: &str = "X = rand(120, 120)
W = rand(120, 120)
A = X @ W
B = W @ X
A2 = A @ W
B2 = B @ X
C = A2 + B2
print sum(C) > 0
";

/// A loop of 300 statements on one variable pair: a trace longer than a screen of ops.
const LOOP: &str = "x = ones(4)\nfor i in 0..150 {\n  y = x + 1\n  x = y * 1\n}\n";

/// The step headings of `dep replay`'s listing (`step 3/40 at …: …`).
fn step_headers(listing: &str) -> Vec<&str> {
    listing
        .lines()
        .filter(|line| line.starts_with("step "))
        .collect()
}

fn read(dir: &TestDir, name: &str) -> String {
    let path = dir.path().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Runs `script` with `--dot g.dot` on the naive, threaded and simulated engines: each engine's
/// name, its run (which must exit 0) and the DAG it wrote.
fn runs_with_dot(dir: &TestDir, script: &Path) -> Vec<(&'static str, Run, String)> {
    ["naive", "threaded", "sim"]
        .into_iter()
        .map(|engine| {
            let run = Run::of(
                dir.dep()
                    .arg("run")
                    .arg(script)
                    .args(["--engine", engine, "--dot", "g.dot"]),
            )
            .expect_code(0);
            (engine, run, read(dir, "g.dot"))
        })
        .collect()
}

#[test]
fn every_view_flag_writes_its_file_and_stdout_stays_the_script_output() {
    let dir = TestDir::new();
    let script = dir.write("par.dep", PARALLEL);
    let plain = Run::of(dir.dep().arg("run").arg(&script)).expect_code(0);
    let run = Run::of(dir.dep().arg("run").arg(&script).args([
        "--threads",
        "2",
        "--trace",
        "t.json",
        "--timeline",
        "t.svg",
        "--arrows",
        "--dot",
        "g.dot",
        "--replay",
        "t.html",
    ]))
    .expect_code(0);
    assert_eq!(run.stdout, plain.stdout, "views never write to stdout");
    assert!(
        run.stderr.starts_with("summary: 8 ops (8 done), wall "),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("parallelism: "), "{}", run.stderr);
    assert!(run.stderr.contains("critical path: "), "{}", run.stderr);
    assert!(
        !run.stderr.contains('\x1b'),
        "NO_COLOR and a pipe: no escapes\n{}",
        run.stderr
    );

    let trace: serde_json::Value = serde_json::from_str(&read(&dir, "t.json")).unwrap();
    let slices: Vec<&serde_json::Value> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["ph"] == "X")
        .collect();
    let labels: Vec<&str> = slices
        .iter()
        .map(|slice| slice["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels
            .iter()
            .filter(|label| **label == "C = A2 + B2")
            .count(),
        1,
        "{labels:?}"
    );
    let join = slices
        .iter()
        .find(|slice| slice["name"] == "C = A2 + B2")
        .unwrap();
    assert_eq!(join["args"]["reads"], serde_json::json!(["A2", "B2"]));
    assert_eq!(join["args"]["writes"], serde_json::json!(["C"]));
    assert_eq!(join["args"]["line"], 7);
    assert!(trace["depEvents"]["events"].as_array().unwrap().len() > 30);

    let svg = read(&dir, "t.svg");
    assert!(
        svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "{svg}"
    );
    assert!(
        svg.contains(">cpu:0</text>") && svg.contains(">cpu:1</text>"),
        "{svg}"
    );
    assert!(
        svg.contains("marker-end=\"url(#arrow)\""),
        "--arrows draws arrows"
    );

    let dot = read(&dir, "g.dot");
    assert!(dot.starts_with("digraph dep {"), "{dot}");
    assert!(dot.contains("[label=\"A2 RAW\""), "{dot}");

    let html = read(&dir, "t.html");
    let static_part = html.split("<script").next().unwrap();
    assert!(static_part.contains("id=\"dep-slider\""), "{html}");
    assert!(
        static_part.contains(
            "<td>C = A2 + B2</td><td>7</td><td><span class=\"dep-state dep-done\">done</span>"
        ),
        "the final state shows without scripts"
    );
}

/// A long run's `--replay` page holds its last `--replay-events` events and starts from the
/// state the earlier ones left, whether the recorder kept only those (the page alone) or every
/// event (for a timeline beside it); `--replay-events 0` keeps them all. The page's script, run
/// under Node.js when it is installed, steps from its first step to its end.
#[test]
fn a_long_runs_replay_page_holds_its_last_events() {
    let dir = TestDir::new();
    let n_events = traced_naive_run(&dir, "loop.dep", LOOP);
    let script = dir.path().join("loop.dep");
    let cut_note = format!(
        "The run had {n_events} events: this page steps through the last 300, from the state the first {} left",
        n_events - 300
    );
    let end_line = format!("step {n_events}/{n_events}: the end of the run");
    for extra in [&[][..], &["--timeline", "t.svg"][..]] {
        Run::of(
            dir.dep()
                .arg("run")
                .arg(&script)
                .args([
                    "--engine",
                    "naive",
                    "--replay",
                    "t.html",
                    "--replay-events",
                    "300",
                ])
                .args(extra),
        )
        .expect_code(0);
        let html = read(&dir, "t.html");
        assert!(html.contains(&cut_note), "{extra:?}: {}", &html[..2000]);
        assert!(html.contains(&end_line), "{extra:?}");
        let start = html.split("\"start\":").nth(1).unwrap();
        let start: usize = start[..start.find(',').unwrap()].parse().unwrap();
        assert!(start > 0, "a prologue rebuilds the state at the cut");
        assert!(
            html.contains(&format!("id=\"dep-slider\" type=\"range\" min=\"{start}\"")),
            "the slider starts after the prologue"
        );
        match std::process::Command::new("node")
            .arg(crate::util::repo_root().join("bench/player_steps.js"))
            .arg(dir.path().join("t.html"))
            .output()
        {
            Ok(node) => {
                let out = String::from_utf8_lossy(&node.stdout);
                assert!(node.status.success(), "{out}");
                let first = format!("step {}/{n_events} at ", n_events - 300);
                assert!(out.contains(&first), "{out}");
                assert!(
                    out.contains(&format!(
                        ": the state after the run's first {} events",
                        n_events - 300
                    )),
                    "{out}"
                );
                assert!(
                    out.contains(&format!("step {n_events}/{n_events} at ")),
                    "{out}"
                );
            }
            Err(_) => eprintln!("skipped the page's script: Node.js (`node`) is not installed"),
        }
    }
    Run::of(dir.dep().arg("run").arg(&script).args([
        "--engine",
        "naive",
        "--replay",
        "t.html",
        "--replay-events",
        "0",
    ]))
    .expect_code(0);
    let html = read(&dir, "t.html");
    assert!(!html.contains("this page steps through the last"));
    assert!(html.contains(&end_line));
    assert!(html.contains("id=\"dep-slider\" type=\"range\" min=\"0\""));
    let without_page = Run::of(
        dir.dep()
            .arg("run")
            .arg(&script)
            .args(["--replay-events", "10"]),
    )
    .expect_code(2);
    assert!(
        without_page.stderr.contains("--replay"),
        "{}",
        without_page.stderr
    );
}

/// Runs `script` (saved as `name`) on the naive engine with `--trace t.json` in `dir`, and
/// returns how many events the trace's event log holds.
fn traced_naive_run(dir: &TestDir, name: &str, script: &str) -> usize {
    let script = dir.write(name, script);
    Run::of(
        dir.dep()
            .arg("run")
            .arg(&script)
            .args(["--engine", "naive", "--trace", "t.json"]),
    )
    .expect_code(0);
    // Events are arrays; the strings among them declare the texts the events name. An op run
    // at once (`"o"`) stands for its push, a grant of each access, its readiness, its start and
    // its end.
    serde_json::from_str::<serde_json::Value>(&read(dir, "t.json")).unwrap()["depEvents"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|element| element.as_array())
        .map(|fields| match fields[1].as_str() {
            Some("o") => {
                let n_accesses = |index: usize| fields[index].as_array().unwrap().len();
                4 + n_accesses(5) + n_accesses(6)
            }
            _ => 1,
        })
        .sum()
}

#[test]
fn replay_prints_every_step_in_order_when_not_on_a_terminal() {
    let dir = TestDir::new();
    let n_events = traced_naive_run(
        &dir,
        "seed.dep",
        "A = 2\nB = A + 1\nC = A + 2\nA = C * 2\nD = A + 3\nprint D\n",
    );
    let run = Run::of(dir.dep().args(["replay", "t.json"])).expect_code(0);
    let headers = step_headers(&run.stdout);
    assert_eq!(headers.len(), n_events + 1);
    assert_eq!(
        headers[0],
        "step 0/".to_string() + &n_events.to_string() + " at 0 ns: the start, before any event"
    );
    assert!(
        headers
            .iter()
            .any(|line| line.ends_with(": pushed D = A + 3 (line 5)")),
        "{headers:?}"
    );
    assert!(
        run.stdout.contains("  A   ○ R B = A + 1 (line 2)"),
        "a queued read shows\n{}",
        run.stdout
    );
    assert!(
        headers.last().unwrap().ends_with(": done wait D (line 6)"),
        "{headers:?}"
    );
}

/// A worker preempted between an op's end and its grants logs the grants late, behind events
/// of later times, stamped with that end (here before the op granted was even pushed): the
/// replay steps through the events in time order, the grant moved to its op's push, so no step
/// goes back in time and `B` is not shown waiting for `A` after it was granted.
#[test]
fn replay_steps_through_events_logged_late_in_time_order() {
    let dir = TestDir::new();
    // Microseconds: A = work(1) ends at 2,000; B = A + 1 is pushed at 3,000, queued behind A's
    // write by then, and C = 3 at 4,000; A's release grants A to B, stamped 2,000, logged after
    // C's push.
    let events = r#"["A", [1000, "v", 1, 0], "A = work(1)", "cpu", [1000, "p", 1, 1, 1, [], [1], 2, 0],
        [1000, "g", 1, 1], [1000, "r", 1], [1000, "s", 1, 1], "done", [2000000, "f", 1, 3],
        "B", [2500000, "v", 2, 4], "B = A + 1", [3000000, "p", 2, 5, 2, [1], [2], 2, 0],
        [3000000, "g", 2, 2], "C", [3500000, "v", 3, 6], "C = 3", [4000000, "p", 3, 7, 3, [], [3], 2, 0],
        [4000000, "g", 3, 3], [4000000, "r", 3], [4000000, "s", 3, 2],
        [2000000, "g", 2, 1], [2000000, "r", 2], [5000000, "s", 2, 1],
        [5000000, "f", 3, 3], [6000000, "f", 2, 3]]"#;
    let trace = format!(
        r#"{{"traceEvents": [], "depEvents": {{"version": 3, "workers": ["main", "cpu:0", "cpu:1"], "events": {events}}}}}"#
    );
    std::fs::write(dir.path().join("t.json"), trace).unwrap();
    let run = Run::of(dir.dep().args(["replay", "t.json"])).expect_code(0);
    let headers = step_headers(&run.stdout);
    let times: Vec<&str> = headers
        .iter()
        .map(|line| {
            line.split(" at ")
                .nth(1)
                .unwrap()
                .split(':')
                .next()
                .unwrap()
        })
        .collect();
    let position = |text: &str| {
        headers
            .iter()
            .position(|line| line.ends_with(text))
            .unwrap_or_else(|| panic!("no step {text:?} in {headers:?}"))
    };
    let granted = position(": granted A to B = A + 1 (line 2)");
    assert!(
        position(": pushed B = A + 1 (line 2)") < granted
            && granted < position(": pushed C = 3 (line 3)"),
        "{headers:?}"
    );
    assert_eq!(times[granted], "3.00 ms", "{headers:?}");
    assert_eq!(
        times[position(": ready: B = A + 1 (line 2)")],
        "3.00 ms",
        "{headers:?}"
    );
    let ms = |time: &&str| time.trim_end_matches(" ms").parse::<f64>().unwrap_or(0.0);
    assert!(
        times.windows(2).all(|pair| ms(&pair[0]) <= ms(&pair[1])),
        "the steps go forward in time: {headers:?}"
    );
}

/// Off a terminal, each step of a long trace lists the 100 ops around its event and counts the
/// others, so the listing grows with the steps, not with their square; the last step's window
/// ends with the run's last op (on the naive engine each step's event concerns the latest op).
#[test]
fn replay_lists_the_ops_around_each_step_of_a_long_run() {
    let dir = TestDir::new();
    let n_events = traced_naive_run(&dir, "loop.dep", LOOP);
    let run = Run::of(dir.dep().args(["replay", "t.json"])).expect_code(0);
    let steps: Vec<&str> = run.stdout.split("\nstep ").collect();
    assert_eq!(steps.len(), n_events + 1);
    let op_rows = |step: &str| {
        step.lines()
            .filter(|line| line.starts_with("y = x + 1 ") || line.starts_with("x = y * 1 "))
            .count()
    };
    assert!(steps.iter().all(|step| op_rows(step) <= 100));
    let last = steps.last().unwrap();
    assert!(last.contains("… 201 earlier ops"), "{last}");
    assert!(!last.contains("later ops"), "{last}");
}

/// A timeline and a DAG alone are drawn from the op records the recorder folds as the run goes
/// (no event kept); beside a replay page of every event, from those events: the same files.
#[test]
fn drawings_from_the_folded_records_are_those_from_every_event() {
    let dir = TestDir::new();
    for sample in ["intro", "data_parallel", "gpipe", "mlp_graph"] {
        let script = crate::util::repo_root().join(format!("samples/{sample}.dep"));
        let draw = |extra: &[&str]| {
            Run::of(
                dir.dep()
                    .arg("run")
                    .arg(&script)
                    .args([
                        "--engine",
                        "sim",
                        "--timeline",
                        "t.svg",
                        "--arrows",
                        "--dot",
                        "g.dot",
                    ])
                    .args(extra),
            )
            .expect_code(0);
            (read(&dir, "t.svg"), read(&dir, "g.dot"))
        };
        let folded = draw(&[]);
        let from_events = draw(&["--replay", "r.html", "--replay-events", "0"]);
        assert!(folded.0.contains("critical path"), "{sample}: {}", folded.0);
        assert!(folded == from_events, "{sample}: the drawings differ");
    }
}

/// `--dot g.svg` of a run longer than Graphviz lays out in seconds draws the run's last 200 ops,
/// counts the others in its title and says so on stderr, where it drew every op and could take
/// hours; without Graphviz it writes the DOT of every op beside it and fails. `scripts/test`
/// installs Graphviz, so the test suite takes the first branch.
#[test]
fn a_dag_as_svg_draws_the_last_ops_of_a_long_run() {
    let dir = TestDir::new();
    let script = dir.write("loop.dep", LOOP);
    let graphviz = std::process::Command::new("dot").arg("-V").output().is_ok();
    let run = Run::of(
        dir.dep()
            .arg("run")
            .arg(&script)
            .args(["--engine", "naive", "--dot", "g.svg"]),
    )
    .expect_code(if graphviz { 0 } else { 1 });
    assert!(
        run.stderr
            .contains("dep: --dot: g.svg draws the last 200 of 301 ops"),
        "{}",
        run.stderr
    );
    if graphviz {
        let svg = read(&dir, "g.svg");
        assert!(
            svg.contains("… 101 earlier ops (of 301) not drawn"),
            "{svg}"
        );
        assert_eq!(svg.matches("<g id=\"node").count(), 200, "{svg}");
        assert!(svg.contains("x = y * 1"), "{svg}");
    } else {
        eprintln!("Graphviz (`dot`) is not installed: checked the fallback only");
        assert!(
            run.stderr.contains("writing the DOT of every op to"),
            "{}",
            run.stderr
        );
        assert_eq!(read(&dir, "g.dot").matches("fillcolor").count(), 301);
    }
}

/// A lane's bars are grouped in the order they start, not the order they were pushed: ops of a
/// higher priority start before ops pushed before them, and the four thin ops that start in one
/// pixel column are one bar counting four (they were two bars of two, drawn on top of each
/// other).
#[test]
fn thin_bars_are_grouped_in_the_order_they_start() {
    let dir = TestDir::new();
    let script = dir.write(
        "col.dep",
        "with priority = 10 {\n  L = work(100)\n}\na1 = ones(2)\na2 = ones(2)\n\
         with priority = 10 {\n  X = ones(2)\n}\nc1 = ones(2)\nc2 = ones(2)\n\
         with priority = 9 {\n  N = work(50)\n}\nwait\n",
    );
    Run::of(dir.dep().arg("run").arg(&script).args([
        "--engine",
        "sim",
        "--threads",
        "1",
        "--timeline",
        "t.svg",
    ]))
    .expect_code(0);
    let svg = read(&dir, "t.svg");
    let groups: Vec<&str> = svg
        .split("<g><title>")
        .skip(1)
        .filter_map(|bar| bar.split_once(" ops on cpu:0 (").map(|(count, _)| count))
        .collect();
    assert_eq!(groups, ["4"], "{svg}");
}

/// A script with a syntax error runs nothing and writes no view: a trace and a timeline of an
/// earlier run stay as they were, and no summary of nothing is printed before the error.
/// A view file that cannot be written is a usage error before the run, not a loss after it:
/// the script does not run (a long run used to end with its trace lost).
#[test]
fn a_view_file_that_cannot_be_written_stops_the_run_before_it_starts() {
    let dir = TestDir::new();
    let script = dir.write("p.dep", "print 1\n");
    for (flag, path, why) in [
        ("--trace", "missing/t.json", "no folder missing"),
        ("--timeline", ".", "it is a folder"),
        ("--replay", "missing/r.html", "no folder missing"),
        // A name ending in a slash, which the extension check read as `t.json`.
        (
            "--trace",
            "t.json/",
            "a file's name does not end with a slash",
        ),
        ("--dot", "d.dot/", "a file's name does not end with a slash"),
        // A folder that refuses a new file: the system's error, naming no file of dep's own.
        (
            "--trace",
            "/proc/t.json",
            "No such file or directory (os error 2)",
        ),
    ] {
        let run = Run::of(dir.dep().arg("run").arg(&script).args([flag, path])).expect_code(2);
        assert_eq!(run.stdout, "", "{flag}: the script did not run");
        assert_eq!(
            run.stderr,
            format!("dep: {flag}: cannot write {path}: {why}\n")
        );
    }
    // A name whose extension names no format is refused as the REPL refuses it, where it
    // used to get Chrome's JSON (or SVG) under that name.
    for (flag, path, why) in [
        (
            "--trace",
            "t.txt",
            "`t.txt` names no trace format: FILE.json writes Chrome's JSON",
        ),
        ("--trace", "t", "`t` names no trace format"),
        ("--timeline", "t.png", "`t.png` is not a FILE.svg"),
    ] {
        let run = Run::of(dir.dep().arg("run").arg(&script).args([flag, path])).expect_code(2);
        assert_eq!(run.stdout, "", "{flag}: the script did not run");
        assert!(
            run.stderr.starts_with(&format!("dep: {flag}: {why}")),
            "{}",
            run.stderr
        );
        assert!(!dir.path().join(path).exists(), "{path} written");
    }
}

/// A view never overwrites the script it runs, nor another view's file: `--replay run.dep`
/// and `--dot run.dep` replaced the script with HTML or DOT, and `--trace t.json --replay
/// t.json` lost the trace. Each is refused before the run, and so is a `--dot` or `--replay`
/// file whose name says another format.
#[test]
fn a_view_that_would_overwrite_the_script_or_another_view_is_refused() {
    let dir = TestDir::new();
    let script = dir.write("run.dep", "print 1\n");
    let cases: [(&[&str], &str); 8] = [
        (
            &["--replay", "run.dep"],
            "--replay: `run.dep` is not a FILE.html",
        ),
        (
            &["--dot", "run.dep"],
            "--dot: `run.dep` is not a FILE.dot or FILE.svg",
        ),
        (
            &["--dot", "g.png"],
            "--dot: `g.png` is not a FILE.dot or FILE.svg",
        ),
        (
            &["--trace", "run.dep"],
            "--trace: `run.dep` names no trace format",
        ),
        (
            &["--trace", "t.json", "--replay", "./t.json"],
            "--replay: `./t.json` is not a FILE.html",
        ),
        (
            &["--trace", "t.json", "--trace", "./t.json"],
            "--trace and --trace both name `./t.json`: each view needs a file of its own",
        ),
        (
            &["--timeline", "x.svg", "--dot", "x.svg"],
            "--timeline and --dot both name `x.svg`: each view needs a file of its own",
        ),
        (
            &["--timeline", "../sub/g.svg", "--dot", "g.svg"],
            "--timeline and --dot both name `g.svg`: each view needs a file of its own",
        ),
    ];
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    for (args, why) in cases {
        // The last case runs from a folder below, where `../sub/g.svg` is `g.svg`.
        let mut command = dir.dep();
        if args.contains(&"../sub/g.svg") {
            command.current_dir(dir.path().join("sub"));
        }
        let run = Run::of(command.arg("run").arg(&script).args(args)).expect_code(2);
        assert_eq!(run.stdout, "", "{args:?}: the script did not run");
        assert!(
            run.stderr.starts_with(&format!("dep: {why}")),
            "{args:?}: {}",
            run.stderr
        );
        assert_eq!(read(&dir, "run.dep"), "print 1\n", "{args:?}");
    }
    assert!(!dir.path().join("t.json").exists());
    // The script itself, named as an output of a format it could be (a script may have any
    // name): refused too.
    let named_like_a_page = dir.write("lesson.html", "print 2\n");
    let run = Run::of(
        dir.dep()
            .arg("run")
            .arg(&named_like_a_page)
            .args(["--replay", "./lesson.html"]),
    )
    .expect_code(2);
    assert_eq!(
        run.stderr,
        "dep: --replay: `./lesson.html` is the script being run: the view would overwrite it\n"
    );
    assert_eq!(read(&dir, "lesson.html"), "print 2\n");
}

#[test]
fn a_syntax_error_leaves_the_views_of_an_earlier_run_alone() {
    let dir = TestDir::new();
    let script = dir.write("bad.dep", "A = ones(2)\nB = A % 2\n");
    dir.write("t.json", "an earlier trace");
    let run = Run::of(dir.dep().arg("run").arg(&script).args([
        "--trace",
        "t.json",
        "--timeline",
        "t.svg",
        "--summary",
    ]))
    .expect_code(2);
    assert!(
        run.stderr.starts_with("error: unexpected character `%`"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("summary"), "{}", run.stderr);
    assert_eq!(read(&dir, "t.json"), "an earlier trace");
    assert!(!dir.path().join("t.svg").exists());
}

/// `dep replay --last N` reads only a trace's last N events, from the state the earlier ones
/// left: its steps are numbered as the whole run's, its first says where the cut lies, and
/// `--end` prints the same last step heading and the same summary of the whole run. Without
/// `--last`, a trace too long for the memory the process may use is read from its end.
#[test]
fn replay_of_the_last_events_of_a_trace() {
    let dir = TestDir::new();
    let n_events = traced_naive_run(&dir, "loop.dep", LOOP);
    let listing = Run::of(dir.dep().args(["replay", "t.json", "--last", "50"])).expect_code(0);
    let headers = step_headers(&listing.stdout);
    assert_eq!(headers.len(), 51);
    let cut = n_events - 50;
    assert!(
        headers[0].starts_with(&format!("step {cut}/{n_events} at "))
            && headers[0].ends_with(&format!(": the state after the run's first {cut} events")),
        "{}",
        headers[0]
    );
    assert!(headers[50].starts_with(&format!("step {n_events}/{n_events} at ")));
    let whole = Run::of(dir.dep().args(["replay", "t.json", "--end"])).expect_code(0);
    let last = Run::of(
        dir.dep()
            .args(["replay", "t.json", "--end", "--last", "50"]),
    )
    .expect_code(0);
    assert_eq!(whole.stdout.lines().next(), last.stdout.lines().next());
    let summary = |text: &str| text[text.find("\nsummary: ").unwrap()..].to_string();
    assert_eq!(summary(&last.stdout), summary(&whole.stdout));
    assert!(last.stdout.contains(" earlier ops\n"), "{}", last.stdout);
    let zero = Run::of(dir.dep().args(["replay", "t.json", "--last", "0"])).expect_code(2);
    assert!(zero.stderr.contains("--last"), "{}", zero.stderr);
    // A trace that would take more memory than the process may use is read from its end, and
    // says so; one that fits is read whole.
    let bytes = std::fs::metadata(dir.path().join("t.json")).unwrap().len();
    let tight = Run::of(
        dir.dep()
            .args(["replay", "t.json"])
            .env("DEP_MEMORY_LIMIT", (bytes * 2).to_string()),
    )
    .expect_code(0);
    assert!(
        tight
            .stderr
            .contains("of memory to read whole, more than the ")
            && tight.stderr.contains("reading its last 1000 events"),
        "{}",
        tight.stderr
    );
    assert_eq!(step_headers(&tight.stdout).len(), 1001);
    let roomy = Run::of(
        dir.dep()
            .args(["replay", "t.json"])
            .env("DEP_MEMORY_LIMIT", (bytes * 3).to_string()),
    )
    .expect_code(0);
    assert_eq!(roomy.stderr, "");
    assert_eq!(step_headers(&roomy.stdout).len(), n_events + 1);
}

/// A cut replay carries the ops unfinished at its cut; those that finished before it are left
/// out, and the listing counts them where they were pushed: before, between and after the ops
/// it shows. Under the simulated engine the schedule, so the cut, is the same every run.
#[test]
fn a_cut_replay_counts_the_ops_left_out_between_those_it_carries() {
    let dir = TestDir::new();
    // B runs long on one lane while the loop's ops run and end on the other.
    let script = dir.write(
        "gap.dep",
        "A = ones(200, 200)\nc = ones(2)\nB = A @ A\nfor i in 0..20 {\n  C = c + 1\n}\nE = B + 1\n",
    );
    Run::of(
        dir.dep()
            .arg("run")
            .arg(&script)
            .args(["--engine", "sim", "--trace", "t.json"]),
    )
    .expect_code(0);
    // The last 9 events: E's write is granted at its push, its read of B when B ends.
    let last = Run::of(dir.dep().args(["replay", "t.json", "--end", "--last", "9"])).expect_code(0);
    let ops: Vec<&str> = last
        .stdout
        .lines()
        .skip_while(|line| !line.starts_with("op "))
        .skip(1)
        .take_while(|line| !line.starts_with("summary: "))
        .map(|line| line.split("  ").next().unwrap())
        .collect();
    assert_eq!(
        ops,
        ["", "B = A @ A", "", "C = c + 1", "E = B + 1"],
        "{}",
        last.stdout
    );
    assert!(
        last.stdout.contains("\n  … 2 earlier ops\nB = A @ A "),
        "{}",
        last.stdout
    );
    assert!(
        last.stdout
            .contains(" 0.32 ms\n  … 19 ops done before the cut\nC = c + 1 "),
        "{}",
        last.stdout
    );
}

/// `dep replay` on a terminal, as a user steps through a long run: each key redraws the step it
/// moves to, and the screen shows the ops around the step's event, not the run's first ones.
#[test]
fn replay_on_a_terminal_steps_through_a_long_run_by_keys() {
    let dir = TestDir::new();
    let n_events = traced_naive_run(
        &dir,
        "loop.dep",
        "x = ones(4)\nfor i in 0..300 {\n  y = x + 1\n  x = y * 2\n}\nprint sum(x) > 0\n",
    );
    let mut command = dir.dep();
    command
        .args(["replay", "t.json"])
        .stdin(std::process::Stdio::inherit())
        .env("TERM", "xterm-256color")
        .env("NO_COLOR", "1");
    let options = rexpect::reader::Options {
        timeout_ms: Some(60_000),
        strip_ansi_escape_codes: true,
    };
    let mut session =
        rexpect::session::spawn_with_options(command, options).expect("spawn dep replay");
    let expect = |session: &mut rexpect::session::PtySession, needle: &str| {
        session
            .exp_string(needle)
            .unwrap_or_else(|error| panic!("waiting for {needle:?}: {error}"))
    };
    let press = |session: &mut rexpect::session::PtySession, keys: &str| {
        session.send(keys).expect("write to the terminal");
        session.flush().expect("flush the terminal");
    };
    expect(
        &mut session,
        &format!("step 0/{n_events} at 0 ns: the start"),
    );
    press(&mut session, "n");
    expect(&mut session, &format!("step 1/{n_events} "));
    press(&mut session, "G");
    expect(&mut session, &format!("step {n_events}/{n_events} "));
    // The last ops show, and how many came before them.
    let screen = expect(&mut session, "PgDn/PgUp");
    assert!(screen.contains("earlier ops"), "{screen}");
    assert!(screen.contains("sum(x) > 0"), "{screen}");
    assert!(!screen.contains("x = ones(4)"), "{screen}");
    press(&mut session, "p");
    expect(&mut session, &format!("step {}/{n_events} ", n_events - 1));
    press(&mut session, "\x1b[5~"); // Page Up
    expect(
        &mut session,
        &format!("step {}/{n_events} ", n_events - 101),
    );
    press(&mut session, "g");
    expect(&mut session, &format!("step 0/{n_events} "));
    let start = expect(&mut session, "PgDn/PgUp");
    assert!(start.contains("no ops"), "{start}");
    press(&mut session, "q");
    let _ = session.exp_eof();
    match session.process().wait().expect("wait for dep replay") {
        rexpect::process::wait::WaitStatus::Exited(_, code) => assert_eq!(code, 0),
        other => panic!("dep replay did not exit: {other:?}"),
    }
}

/// `dep replay --end` into a pipe closed early (`| head`) ends quietly, as success.
#[test]
fn replay_into_a_closed_pipe_ends_quietly() {
    let dir = TestDir::new();
    traced_naive_run(
        &dir,
        "loop.dep",
        "x = ones(4)\nfor i in 0..3000 {\n  x = x + 1\n}\n",
    );
    for args in [
        &["replay", "--end", "t.json"][..],
        &["replay", "t.json"][..],
    ] {
        let mut child = dir
            .dep()
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn dep replay");
        // Read a little, then close the pipe, as `head -c 100` does.
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 100];
        std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
        drop(stdout);
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// The worker column is as wide as the longest worker's name: two copies' links read
/// `cpu->gpu0` and `cpu->gpu1`, not both `cpu->gp…`.
#[test]
fn replay_shows_whole_worker_names() {
    let dir = TestDir::new();
    dir.write(
        "copies.dep",
        "x = ones(2)\na = to(x, gpu0)\nb = to(x, gpu1)\n",
    );
    Run::of(
        dir.dep()
            .args(["run", "copies.dep", "--engine", "sim", "--trace", "t.json"]),
    )
    .expect_code(0);
    let run = Run::of(dir.dep().args(["replay", "t.json", "--end"])).expect_code(0);
    for (label, worker) in [
        ("a = to(x, gpu0)", "cpu->gpu0"),
        ("b = to(x, gpu1)", "cpu->gpu1"),
    ] {
        let row = run.stdout.lines().find(|line| line.starts_with(label));
        assert!(
            row.is_some_and(|row| row.contains(&format!(" done      {worker} "))),
            "{}",
            run.stdout
        );
    }
}

/// A Perfetto trace is not what `dep replay` reads: it says which trace is (it said "not JSON").
#[test]
fn replay_of_a_perfetto_trace_names_the_json_trace() {
    let dir = TestDir::new();
    dir.write("t.dep", "x = 1\n");
    Run::of(dir.dep().args(["run", "t.dep", "--trace", "t.pftrace"])).expect_code(0);
    let run = Run::of(dir.dep().args(["replay", "t.pftrace"])).expect_code(2);
    assert_eq!(
        run.stderr,
        "dep: cannot replay t.pftrace: dep replay reads the JSON trace \
         (`dep run FILE --trace t.json`), not Perfetto's protobuf\n"
    );
}

/// A folder is no trace: said so (it said "not JSON: Is a directory").
#[test]
fn replay_of_a_folder_says_it_is_one() {
    let dir = TestDir::new();
    std::fs::create_dir(dir.path().join("runs")).unwrap();
    let run = Run::of(dir.dep().args(["replay", "runs"])).expect_code(2);
    assert_eq!(
        run.stderr,
        "dep: cannot replay runs: it is a folder; give the trace a run wrote \
         (`dep run FILE --trace t.json`)\n"
    );
}

#[test]
fn replay_of_a_file_without_dep_events_is_a_usage_error() {
    let dir = TestDir::new();
    dir.write("other.json", r#"{"traceEvents": []}"#);
    let run = Run::of(dir.dep().args(["replay", "other.json"])).expect_code(2);
    assert_eq!(
        run.stderr,
        "dep: cannot replay other.json: no `depEvents` key: this trace was not written by dep\n"
    );
}

#[test]
fn a_failing_run_still_writes_its_views_and_ends_with_the_error() {
    let dir = TestDir::new();
    let script = dir.write("bad.dep", "A = ones(2, 3)\nB = A @ ones(4, 5)\nC = B + 1\n");
    let run = Run::of(
        dir.dep()
            .arg("run")
            .arg(&script)
            .args(["--trace", "t.json"]),
    )
    .expect_code(1);
    assert!(run.stderr.starts_with("summary: "), "{}", run.stderr);
    assert!(run.stderr.contains(" failed"), "{}", run.stderr);
    assert!(
        run.stderr
            .trim_end()
            .lines()
            .last()
            .unwrap()
            .contains("in this statement"),
        "{}",
        run.stderr
    );
    let trace = read(&dir, "t.json");
    assert!(
        trace.contains(r#""state":"failed""#) && trace.contains(r#""state":"skipped""#),
        "{trace}"
    );
}

/// The `--watch` panel's lines: off a terminal, its heading once a second.
fn progress_lines<'a>(stderr: &'a str, script: &Path) -> Vec<&'a str> {
    let title = format!("{} · ", script.display());
    stderr
        .lines()
        .filter(|line| line.starts_with(&title))
        .collect()
}

#[test]
fn watch_prints_a_progress_line_when_stderr_is_not_a_terminal() {
    let dir = TestDir::new();
    // Long enough (1.5 s whatever the build) for the once-a-second progress line to print.
    let script = dir.write(
        "slow.dep",
        "X = rand(40, 40)\nfor i in 0..3 {\n  X = work(500, X @ X)\n  X = X / 40\n}\nprint sum(X) > 0\n",
    );
    let run = Run::of(dir.dep().arg("run").arg(&script).arg("--watch")).expect_code(0);
    let progress = progress_lines(&run.stderr, &script);
    assert!(!progress.is_empty(), "{}", run.stderr);
    // The heading of every live display: the input, the engine, its ops by state, the time.
    assert!(
        progress[0].contains(" · threaded engine · ") && progress[0].ends_with(" so far"),
        "{progress:?}"
    );
    assert!(
        !run.stderr.contains('\x1b'),
        "no cursor movement off a terminal"
    );
    assert!(run.stderr.contains("summary: "), "{}", run.stderr);
}

/// `--watch` with `--trace` and `--summary`: the recorder, which streams the log and forgets
/// what it read, feeds the panel's fold, so the panel still counts every op of the run (the
/// done ones too) while the trace and the summary have them all.
#[test]
fn watch_with_a_trace_and_the_summary_still_counts_every_op() {
    let dir = TestDir::new();
    let script = dir.write(
        "slow.dep",
        "X = rand(40, 40)\nY = X + 1\nfor i in 0..3 {\n  X = work(500, X @ X)\n  X = X / 40\n}\nprint sum(X) > 0\n",
    );
    let run = Run::of(dir.dep().arg("run").arg(&script).args([
        "--watch",
        "--summary",
        "--trace",
        "t.json",
    ]))
    .expect_code(0);
    let progress = progress_lines(&run.stderr, &script);
    assert!(!progress.is_empty(), "{}", run.stderr);
    // While the loop's work runs, the first two statements are done, and counted so.
    let counts_done = |line: &&str| {
        line.split(" · ")
            .find(|part| part.contains(" ops: "))
            .and_then(|part| part.split(", ").find(|count| count.ends_with(" done")))
            .and_then(|count| count.trim_end_matches(" done").rsplit(' ').next())
            .and_then(|n| n.parse::<usize>().ok())
    };
    assert!(
        progress
            .iter()
            .all(|line| counts_done(line).is_some_and(|n| n >= 2)),
        "{progress:?}"
    );
    assert!(progress[0].contains(" running"), "{progress:?}");
    assert!(run.stderr.contains("summary: "), "{}", run.stderr);
    let trace = read(&dir, "t.json");
    assert!(trace.contains("Y = X + 1"), "the trace has every op");
}

/// A chain that runs one op at a time never shows two running: each redraw's snapshot is
/// drawn with every event logged before it, so an op that ended is not still shown running
/// beside the next (it was, in about three redraws of four).
#[test]
fn watch_never_shows_two_ops_of_a_serial_chain_running() {
    let dir = TestDir::new();
    let script = dir.write(
        "chain.dep",
        "for i in 0..1500 {\n  X = work(1)\n  Y = work(1, X)\n}\n",
    );
    let run = Run::of(
        dir.dep()
            .arg("run")
            .arg(&script)
            .args(["--engine", "threaded", "--watch", "--trace", "t.json"]),
    )
    .expect_code(0);
    let progress = progress_lines(&run.stderr, &script);
    assert!(!progress.is_empty(), "{}", run.stderr);
    assert!(
        progress.iter().all(|line| !line.contains(" 2 running")),
        "{progress:?}"
    );
}

#[test]
fn summary_alone_prints_the_summary_and_writes_nothing() {
    let dir = TestDir::new();
    let script = dir.write("one.dep", "A = 2\nB = A + 1\nprint B\n");
    let run = Run::of(
        dir.dep()
            .arg("run")
            .arg(&script)
            .args(["--engine", "naive", "--summary"]),
    )
    .expect_code(0);
    assert_eq!(run.stdout, "3.0\n");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert!(
        lines[0].starts_with("summary: 3 ops (3 done), wall "),
        "{}",
        run.stderr
    );
    assert!(lines[1].starts_with("  busy: main "), "{}", run.stderr);
    assert!(
        lines[3].contains("over 3 ops: A = 2 (line 1) → B = A + 1 (line 2) → wait B (line 3)"),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "only the script"
    );
}

/// A statement written over several lines is shown on one, as it reads: its newlines broke the
/// summary's critical-path line (and every other one-line view) in the middle of a statement.
#[test]
fn a_statement_over_several_lines_is_one_line_in_the_summary() {
    let dir = TestDir::new();
    let script = dir.write(
        "lines.dep",
        "def f(x, y) {\n  return x * y\n}\nA = ones(2)\nB = (A +   # one more\n\n  1)\nC = f(B +\n  1, B)\n",
    );
    let run = Run::of(
        dir.dep()
            .arg("run")
            .arg(&script)
            .args(["--engine", "naive", "--summary"]),
    )
    .expect_code(0);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert!(
        lines[3].contains("A = ones(2) (line 4) → B = (A + 1) (line 5) →"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("B + 1 (line 8)") && !run.stderr.contains("B +\n"),
        "{}",
        run.stderr
    );
}

/// A `print`'s wait and a `del` are ops of their statements' lines, as every other op is, on
/// every engine (the simulator, too, shows them, naming the deleted variable as the script does).
#[test]
fn waits_and_deletions_carry_the_line_of_their_statement() {
    let dir = TestDir::new();
    let script = dir.write(
        "del.dep",
        "A = ones(3)\nB = A + 1\nfor i in 0..2 {\n  print B\n}\ndel A\n",
    );
    for engine in ["naive", "threaded", "per-device", "sim"] {
        Run::of(
            dir.dep()
                .arg("run")
                .arg(&script)
                .args(["--engine", engine, "--trace", "t.json"]),
        )
        .expect_code(0);
        let trace: serde_json::Value = serde_json::from_str(&read(&dir, "t.json")).unwrap();
        let mut ops: Vec<(u64, String, u64, String)> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|event| event["ph"] == "X")
            .map(|slice| {
                let args = &slice["args"];
                let name = slice["name"].as_str().unwrap().to_string();
                let vars = format!("{} {}", args["reads"], args["writes"]);
                (
                    args["op"].as_u64().unwrap(),
                    name,
                    args["line"].as_u64().unwrap(),
                    vars,
                )
            })
            .collect();
        ops.sort();
        let ops: Vec<(&str, u64, &str)> = ops
            .iter()
            .map(|(_, name, line, vars)| (name.as_str(), *line, vars.as_str()))
            .collect();
        assert_eq!(
            ops,
            [
                ("A = ones(3)", 1, "[] [\"A\"]"),
                ("B = A + 1", 2, "[\"A\"] [\"B\"]"),
                ("wait B", 4, "[\"B\"] []"),
                ("wait B", 4, "[\"B\"] []"),
                ("del A", 6, "[] [\"A\"]")
            ],
            "{engine}"
        );
    }
}

#[test]
fn a_summary_and_a_perfetto_trace_from_the_lean_log_are_those_of_the_whole_log() {
    // `--summary` and Perfetto traces alone record a lean log (no grants after a push, see
    // `EventLog::without_later_grants`); with a JSON trace beside them, the whole log. Under
    // the simulator both runs have the same times to the nanosecond, so the summaries must be
    // the same text and the Perfetto traces the same bytes.
    let dir = TestDir::new();
    for sample in [
        "intro",
        "mlp",
        "gpipe",
        "priorities",
        "gpu_sync",
        "mutation",
        "mlp_graph",
    ] {
        let script = crate::util::repo_root().join(format!("samples/{sample}.dep"));
        let run = |extra: &[&str]| {
            let run = Run::of(
                dir.dep()
                    .arg("run")
                    .arg(&script)
                    .args(["--engine", "sim", "--summary", "--trace", "t.pftrace"])
                    .args(extra),
            )
            .expect_code(0);
            let trace = std::fs::read(dir.path().join("t.pftrace")).unwrap();
            (run.stderr, trace)
        };
        let (lean_summary, lean_trace) = run(&[]);
        assert!(
            lean_summary.starts_with("summary: "),
            "{sample}: {lean_summary}"
        );
        let (whole_summary, whole_trace) = run(&["--trace", "t.json"]);
        assert_eq!(lean_summary, whole_summary, "{sample}");
        assert!(
            lean_trace == whole_trace,
            "{sample}: the Perfetto traces differ"
        );
    }
}

/// A value that goes into a function and comes out of it keeps its dependencies in every view:
/// the op that computes an argument (`A + 1`, into `f.x#1`) feeds the function's ops, and the
/// op that computes the result (`return work(1, x)`, into `return#2`) feeds the caller's
/// `B = f(A + 1) * 2`. These temporaries used to be left out with their accesses, which cut the
/// DAG and the critical path in two at each end of the call.
#[test]
fn a_critical_path_and_the_dag_go_through_a_functions_argument_and_result() {
    let dir = TestDir::new();
    let script = dir.write(
        "call.dep",
        "def f(x) { return work(1, x) }\nA = ones(4)\nB = f(A + 1) * 2\nC = work(1, B)\nwait\n",
    );
    for (engine, run, dot) in runs_with_dot(&dir, &script) {
        let path = run
            .stderr
            .split_once("critical path: ")
            .and_then(|(_, rest)| rest.split_once("\n  memory"))
            .map(|(path, _)| path.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| panic!("{engine}: {}", run.stderr));
        assert!(
            path.contains(
                "over 5 ops: A = ones(4) (line 2) → A + 1 (line 3) → return work(1, x) (line 1) \
                 → B = f(A + 1) * 2 (line 3) → C = work(1, B) (line 4)"
            ),
            "{engine}: {path}"
        );
        for edge in [
            "op2 -> op3 [label=\"f.x#1 RAW\"",
            "op3 -> op5 [label=\"return#2 RAW\"",
        ] {
            assert!(dot.contains(edge), "{engine}: {edge}\n{dot}");
        }
    }
}

/// Two locals of one name alive at once are two variables, named apart in every view: `g`'s
/// `h` (`h'`) is alive while the `f` it calls makes its own `h` (`h'2`); once both calls' deletions
/// have run (after the `wait`) the next call's locals take the same names again.
#[test]
fn locals_of_one_name_alive_at_once_are_named_apart() {
    let dir = TestDir::new();
    let script = dir.write(
        "nested.dep",
        "def f(x) {\n  h = x + 1\n  return h * 2\n}\ndef g(x) {\n  h = x * 3\n  return f(h)\n}\n\
         A = ones(4)\nB = g(A)\nwait\nC = g(B)\nwait\nprint sum(C)\n",
    );
    for (engine, run, dot) in runs_with_dot(&dir, &script) {
        assert_eq!(run.stdout, "200.0\n", "{engine}");
        let read_after_write: Vec<&str> = dot
            .split("label=\"")
            .filter_map(|rest| rest.split_once(" RAW\"").map(|(var, _)| var))
            .collect();
        assert_eq!(
            read_after_write,
            ["A", "h'", "h'2", "return#1", "B", "h'", "h'2", "return#2", "C"],
            "{engine}: {dot}"
        );
    }
}

/// `B = f(A + 1)`, B already a variable or a new one: the value returned is computed straight
/// into B (one op, `return work(1, x)` writing B), not into a temporary then copied into B and
/// deleted (three ops); the critical path and the DAG go through it.
#[test]
fn a_value_returned_to_a_variable_is_computed_into_it() {
    let dir = TestDir::new();
    let script = dir.write(
        "call.dep",
        "def f(x) { return work(1, x) }\nA = ones(4)\nB = ones(4)\nB = f(A + 1)\nC = work(1, B)\nwait\nprint sum(C)\n",
    );
    for (engine, run, dot) in runs_with_dot(&dir, &script) {
        assert_eq!(run.stdout, "8.0\n", "{engine}");
        let path = run
            .stderr
            .split_once("critical path: ")
            .and_then(|(_, rest)| rest.split_once("\n  memory"))
            .map(|(path, _)| path.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| panic!("{engine}: {}", run.stderr));
        // The path is the longest by the ops' times: before the return, `A + 1` on the
        // simulated engine's fixed costs; on a real engine, under load, `B = ones(4)` may have
        // taken longer.
        let through_the_return = match engine {
            "sim" => {
                "A = ones(4) (line 2) → A + 1 (line 4) → return work(1, x) (line 1) \
                 → C = work(1, B) (line 5) → sum(C) (line 7)"
            }
            _ => "return work(1, x) (line 1) → C = work(1, B) (line 5) → sum(C) (line 7)",
        };
        assert!(path.contains(through_the_return), "{engine}: {path}");
        assert!(!dot.contains("return#"), "{engine}: {dot}");
        assert!(
            dot.contains("op4 -> op6 [label=\"B RAW\"")
                && dot.contains("op2 -> op4 [label=\"B WAW\"")
                && dot.contains("op3 -> op4 [label=\"f.x#1 RAW\""),
            "{engine}: {dot}"
        );
    }
    let script = dir.write(
        "new.dep",
        "def f(x) { return work(1, x) }\nA = ones(4)\nB = f(A + 1)\nC = work(1, B)\nwait\nprint sum(C)\n",
    );
    for (engine, run, dot) in runs_with_dot(&dir, &script) {
        assert_eq!(run.stdout, "8.0\n", "{engine}");
        assert!(!dot.contains("return#"), "{engine}: {dot}");
        assert!(
            dot.contains("op3 -> op5 [label=\"B RAW\"")
                && dot.contains("op2 -> op3 [label=\"f.x#1 RAW\""),
            "{engine}: {dot}"
        );
    }
}

/// `H, P = pair(A)` where H and P are already variables: a value the function computes is
/// computed straight into its caller's variable (`return h, h + 1` writes P), unless a value
/// after it reads that variable: `A, B = swap(A, B)` computes its first value, read from B,
/// into a temporary, since its second reads A.
#[test]
fn values_returned_to_several_variables_are_computed_into_them_unless_read_after() {
    let dir = TestDir::new();
    let script = dir.write(
        "pair.dep",
        "def pair(x) {\n  h = x * 2\n  return h, h + 1\n}\ndef swap(x, y) {\n  return y, x\n}\n\
         A = ones(2)\nB = ones(2) * 5\nH = zeros(2)\nP = zeros(2)\nH, P = pair(A)\n\
         A, B = swap(A, B)\nprint H, P, A, B\n",
    );
    for (engine, run, dot) in runs_with_dot(&dir, &script) {
        assert_eq!(run.stdout, "[2. 2.] [3. 3.] [5. 5.] [1. 1.]\n", "{engine}");
        let node = |label: &str| {
            dot.lines()
                .find(|line| line.contains(&format!("[label=\"{label}\\n")))
                .and_then(|line| line.trim().split_once(' '))
                .map(|(id, _)| id.to_string())
                .unwrap_or_else(|| panic!("{engine}: no op {label}: {dot}"))
        };
        let returns_pair = node("return h, h + 1");
        assert!(
            dot.contains(&format!("-> {returns_pair} [label=\"P WAW\"")),
            "{engine}: {dot}"
        );
        // The swap's first value only: the pair's second went straight into P.
        assert!(dot.contains("return#1 RAW"), "{engine}: {dot}");
        assert!(!dot.contains("return#2"), "{engine}: {dot}");
    }
}

/// An op that computes a part of a statement in a loop (a function's argument, a `print`'s
/// value) is labelled with the loop's counter, as the statement's own op is: a trace told the
/// iterations' `A + i` apart only by their times.
#[test]
fn a_functions_argument_in_a_loop_is_labelled_with_its_iteration() {
    let dir = TestDir::new();
    let script = dir.write(
        "args.dep",
        "def f(x) { return x * 2 }\nA = ones(2)\nfor i in 0..2 {\n  B = f(A + i)\n  print sum(B + i)\n}\n",
    );
    Run::of(
        dir.dep()
            .arg("run")
            .arg(&script)
            .args(["--engine", "naive", "--trace", "t.json"]),
    )
    .expect_code(0);
    let trace: serde_json::Value = serde_json::from_str(&read(&dir, "t.json")).unwrap();
    let labels: Vec<&str> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["ph"] == "X")
        .filter_map(|slice| slice["name"].as_str())
        .collect();
    for label in ["A + i i=0", "A + i i=1", "sum(B + i) i=0", "sum(B + i) i=1"] {
        assert!(labels.contains(&label), "{label}: {labels:?}");
    }
}

/// `dep ARGS` in `dir`, in a pseudo-terminal of `columns` by `rows` (set with `stty` before
/// `dep` starts), colours off and escapes stripped from what it shows.
fn dep_on_a_terminal(
    dir: &TestDir,
    size: (usize, usize),
    args: &[&str],
) -> rexpect::session::PtySession {
    dep_on_a_terminal_showing(dir, size, args, false)
}

/// [`dep_on_a_terminal`], its escapes kept in what the session reads when `escapes`.
fn dep_on_a_terminal_showing(
    dir: &TestDir,
    (columns, rows): (usize, usize),
    args: &[&str],
    escapes: bool,
) -> rexpect::session::PtySession {
    let mut command = std::process::Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "stty cols {columns} rows {rows} && exec \"$0\" \"$@\""
        ))
        .arg(crate::util::dep_binary())
        .args(args)
        .current_dir(dir.path())
        .env("TERM", "xterm-256color")
        .env("NO_COLOR", "1");
    let options = rexpect::reader::Options {
        timeout_ms: Some(60_000),
        strip_ansi_escape_codes: !escapes,
    };
    rexpect::session::spawn_with_options(command, options).expect("spawn dep")
}

/// The lines of `shown` (a terminal's output as rexpect reads it, a character a byte, escapes
/// stripped) wider than `columns`.
fn wider_than(shown: &str, columns: usize) -> Vec<String> {
    let bytes: Vec<u8> = shown.chars().map(|c| c as u8).collect();
    String::from_utf8_lossy(&bytes)
        .split(['\n', '\r'])
        .filter(|line| line.chars().count() > columns)
        .map(str::to_string)
        .collect()
}

/// `--watch` on a terminal narrower than the ops table cuts every line it draws to the
/// terminal's width: a longer one would wrap, and the redraw, which moves up a row a line,
/// would leave a piece of each frame on the screen.
#[test]
fn watch_fits_a_narrow_terminal() {
    let dir = TestDir::new();
    dir.write(
        "w.dep",
        "A = work(600, ones(2))\nB = work(600, ones(2))\nfor i in 0..3 {\n  C = work(200, A + B) + i\n}\nprint sum(C)\n",
    );
    let mut session = dep_on_a_terminal(
        &dir,
        (60, 40),
        &["run", "w.dep", "--engine", "threaded", "--watch"],
    );
    let shown = session
        .exp_string("summary:")
        .unwrap_or_else(|error| panic!("waiting for the summary: {error}"));
    assert!(shown.contains("waits for"), "{shown}");
    let too_wide = wider_than(&shown, 59);
    assert!(too_wide.is_empty(), "{too_wide:#?}\n{shown}");
    let _ = session.exp_eof();
}

/// `dep replay` on a terminal, at a step where many variables are busy: the queues take at
/// most about half the screen and say how many are left out, the ops the rest, with the one
/// the event concerns; on a narrow terminal every line is cut to its width, so that the step's
/// heading stays on the screen.
#[test]
fn replay_on_a_terminal_leaves_room_for_the_ops_and_fits_its_width() {
    let dir = TestDir::new();
    // While the first op works, the loop pushes the others: dozens of variables wait.
    dir.write(
        "r.dep",
        "x = work(300, ones(2))\ndef f(a) {\n  h = a + 1\n  return h * 2\n}\nfor k in 0..30 {\n  y = f(x + k)\n}\n",
    );
    Run::of(
        dir.dep()
            .args(["run", "r.dep", "--engine", "threaded", "--trace", "t.json"]),
    )
    .expect_code(0);
    for (columns, key, step) in [(120, "\x1b[6~", "step 100/"), (50, "G", "step ")] {
        let mut session = dep_on_a_terminal(&dir, (columns, 20), &["replay", "t.json"]);
        session
            .exp_string("PgDn/PgUp")
            .unwrap_or_else(|error| panic!("waiting for the first step: {error}"));
        session.send(key).expect("write to the terminal");
        session.flush().expect("flush the terminal");
        session
            .exp_string(step)
            .unwrap_or_else(|error| panic!("waiting for {step:?}: {error}"));
        let screen = session
            .exp_string("PgDn/PgUp")
            .unwrap_or_else(|error| panic!("waiting for the keys: {error}"));
        let too_wide = wider_than(&screen, columns - 1);
        assert!(too_wide.is_empty(), "{too_wide:#?}\n{screen}");
        assert!(screen.contains("op "), "{screen}");
        if columns == 120 {
            assert!(screen.contains("more queues"), "{screen}");
        }
        session.send("q").expect("write to the terminal");
        let _ = session.exp_eof();
    }
}

/// A second Ctrl-C leaves at once, and erases the `--watch` panel first: its last frame stayed
/// on the screen above the message, saying ops were running.
#[test]
fn a_second_ctrl_c_erases_the_watch_panel_before_leaving() {
    let dir = TestDir::new();
    dir.write(
        "c.dep",
        "A = work(3000, ones(2))\nB = A + 1\nC = work(800, B)\nprint C\n",
    );
    let mut session = dep_on_a_terminal_showing(
        &dir,
        (120, 40),
        &[
            "run", "c.dep", "--engine", "threaded", "--watch", "--trace", "t.json",
        ],
        true,
    );
    session
        .exp_string("waits for")
        .unwrap_or_else(|error| panic!("waiting for a frame: {error}"));
    for _ in 0..2 {
        session.send_control('c').expect("send Ctrl-C");
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let rest = session.exp_eof().expect("dep leaves");
    let last_frame = rest.rfind("threaded engine").unwrap_or(0);
    let erased = rest[last_frame..].find("\x1b[J");
    let left = rest.find("left at once");
    assert!(
        matches!((erased, left), (Some(erased), Some(left)) if last_frame + erased < left),
        "{rest:?}"
    );
}

/// A worker's share of the wall time reads 100% only when it was busy all the time, and 0%
/// only when it never was: under the simulated engine, a worker busy 10.001 ms of a 10.011 ms
/// run read `(100%)` in the summary and the timeline, and one busy 11 µs of 10 ms read `(0%)`.
#[test]
fn a_busy_share_reads_all_or_nothing_only_when_it_is() {
    let dir = TestDir::new();
    let cases = [
        (
            "a = work(10)\nb = work(10.01)\n",
            "  busy: main 0 ns (0%), cpu:0 10.00 ms (>99%), cpu:1 10.01 ms (100%)\n",
            ["0%", ">99%", "100%"],
        ),
        (
            "a = work(10)\nb = work(0.01)\n",
            "  busy: main 0 ns (0%), cpu:0 10.00 ms (100%), cpu:1 11 µs (<1%)\n",
            ["0%", "100%", "<1%"],
        ),
    ];
    for (source, busy, lanes) in cases {
        let script = dir.write("share.dep", source);
        let run = Run::of(dir.dep().arg("run").arg(&script).args([
            "--engine",
            "sim",
            "--threads",
            "2",
            "--summary",
            "--timeline",
            "t.svg",
        ]))
        .expect_code(0);
        assert!(run.stderr.contains(busy), "{source}{}", run.stderr);
        let svg = read(&dir, "t.svg");
        let shares: Vec<&str> = svg
            .split(r#"font-size="9">"#)
            .skip(1)
            .filter_map(|text| text.split_once("</text>").map(|(share, _)| share))
            .filter(|text| text.ends_with('%'))
            .collect();
        let escaped: Vec<String> = lanes
            .iter()
            .map(|share| share.replace('>', "&gt;").replace('<', "&lt;"))
            .collect();
        assert_eq!(shares, escaped, "{source}");
    }
}
