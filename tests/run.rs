//! `dep run` and `dep check`: golden outputs of every sample on every engine, errors and exit codes.

use crate::util::{repo_root, Run, TestDir};

const SAMPLES: &[&str] = &[
    "intro",
    "mutation",
    "random",
    "memory",
    "mlp",
    "mlp_graph",
    "data_parallel",
];

fn expected_output(sample: &str) -> String {
    let path = repo_root()
        .join("samples/expected")
        .join(format!("{sample}.out"));
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn every_sample_prints_its_golden_output_on_every_engine() {
    let dir = TestDir::new();
    for sample in SAMPLES {
        let script = repo_root().join("samples").join(format!("{sample}.dep"));
        for (engine, threads) in [
            ("naive", "1"),
            ("threaded", "1"),
            ("threaded", "2"),
            ("threaded", "4"),
            ("threaded", "8"),
            ("per-device", "2"),
            ("sim", "2"),
        ] {
            let run = Run::of(dir.dep().arg("run").arg(&script).args([
                "--engine",
                engine,
                "--threads",
                threads,
            ]))
            .expect_code(0);
            // Exactly: what a sample prints is the same on every engine and run (a graph's pool
            // count, which depends on the schedule, is shown by `--summary` only).
            assert_eq!(
                run.stdout,
                expected_output(sample),
                "{sample} on {engine}/{threads}"
            );
            assert_eq!(run.stderr, "", "{sample} on {engine}/{threads}");
        }
    }
}

#[test]
fn engine_and_threads_come_from_the_environment_too() {
    let dir = TestDir::new();
    let script = repo_root().join("samples/random.dep");
    let run = Run::of(
        dir.dep()
            .arg("run")
            .arg(&script)
            .env("DEP_ENGINE", "threaded")
            .env("DEP_THREADS", "3"),
    )
    .expect_code(0);
    assert_eq!(run.stdout, expected_output("random"));
    let run = Run::of(dir.dep().arg("run").arg(&script).env("DEP_ENGINE", "fast")).expect_code(2);
    assert_eq!(
        run.stderr,
        "dep: DEP_ENGINE: unknown engine `fast` (expected naive, threaded, per-device or sim)\n"
    );
    let run = Run::of(dir.dep().arg("run").arg(&script).args(["--threads", "0"])).expect_code(2);
    assert!(
        run.stderr.contains("--threads: `0` is not a thread count"),
        "{}",
        run.stderr
    );
    // The communications' timeout: a usage error when it is not a number of seconds in range
    // (a huge one used to panic, and a bad one to mean the default without a word), in a run
    // and in the REPL alike.
    for bad in ["abc", "0", "-1", "nan", "inf", "1e30"] {
        let message = format!(
            "dep: DEP_COMM_TIMEOUT: `{bad}` is not a time in seconds (expected a number above 0 and at most 1000000)\n"
        );
        let run = Run::of(
            dir.dep()
                .arg("run")
                .arg(&script)
                .env("DEP_COMM_TIMEOUT", bad),
        )
        .expect_code(2);
        assert_eq!(run.stderr, message);
        let repl = Run::of(
            dir.dep()
                .env("DEP_COMM_TIMEOUT", bad)
                .stdin(std::process::Stdio::null()),
        )
        .expect_code(2);
        assert_eq!(repl.stderr, message);
    }
    let run = Run::of(
        dir.dep()
            .arg("run")
            .arg(&script)
            .env("DEP_COMM_TIMEOUT", "2.5"),
    )
    .expect_code(0);
    assert_eq!(run.stdout, expected_output("random"));
}

#[test]
fn a_failing_op_names_its_statement_shapes_and_place_and_exits_1() {
    let dir = TestDir::new();
    let script = dir.write(
        "bad.dep",
        "A = ones(2, 3)\nB = A @ ones(4, 5)\nC = B + 1\nprint \"never\", C\n",
    );
    let run = Run::of(dir.dep().args(["run", "bad.dep"])).expect_code(1);
    assert_eq!(run.stdout, "");
    assert_eq!(
        run.stderr,
        "error: matmul: shapes [2, 3] and [4, 5] are not aligned (3 != 4)\n --> bad.dep:2:1\n  |\n2 | B = A @ ones(4, 5)\n  | ^^^^^^^^^^^^^^^^^^ in this statement\n"
    );
    drop(script);
}

#[test]
fn an_unknown_name_is_reported_with_a_suggestion_before_anything_runs_after_it() {
    let dir = TestDir::new();
    dir.write(
        "typo.dep",
        "weights = ones(2)\nprint \"first\"\nB = weigths + 1\nprint \"second\"\n",
    );
    let run = Run::of(dir.dep().args(["run", "typo.dep"])).expect_code(1);
    assert_eq!(run.stdout, "first\n");
    assert!(
        run.stderr.starts_with(
            "error: unknown name `weigths` (did you mean `weights`?)\n --> typo.dep:3:5\n"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn parse_errors_are_all_reported_with_line_and_column_and_exit_2() {
    let dir = TestDir::new();
    dir.write("syntax.dep", "A = 1 +\n\nB = 2 )\nC = 3\nD = [1, 2\n");
    for command in ["run", "check"] {
        let run = Run::of(dir.dep().args([command, "syntax.dep"])).expect_code(2);
        assert_eq!(run.stdout, "", "{command}: nothing runs");
        assert!(
            run.stderr.contains("--> syntax.dep:3:7"),
            "{command}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains("--> syntax.dep:5:5"),
            "{command}: {}",
            run.stderr
        );
    }
    dir.write("good.dep", "A = 1\nprint A\n");
    let run = Run::of(dir.dep().args(["check", "good.dep"])).expect_code(0);
    assert_eq!(run.stdout, "good.dep: ok (2 statements)\n");
    dir.write("one.dep", "A = 1\n");
    let run = Run::of(dir.dep().args(["check", "one.dep"])).expect_code(0);
    assert_eq!(run.stdout, "one.dep: ok (1 statement)\n");
}

#[test]
fn runtime_errors_in_values_name_the_problem() {
    let dir = TestDir::new();
    let cases = [
        (
            "A = ones(2, 3)\nB = A + ones(4)\n",
            "cannot broadcast shapes [2, 3] and [4]",
        ),
        (
            "A = ones(2, 3)\nB = sum(A, 2)\n",
            "axis 2 is out of range for a tensor of 2 dimensions",
        ),
        ("A = load(\"missing.npy\")\n", "missing.npy"),
        ("A = zeros(1000000, 1000000, 1000)\n", "cannot allocate"),
        ("A = ones(2)\nB = A[5]\n", "index 5 is out of range"),
        // Counts in the singular where there is one (it said "takes 1 arguments" and "1 names
        // are assigned").
        (
            "def f(x) { return x }\nB = f(1, 2)\n",
            "`f` takes 1 argument (x), got 2",
        ),
        (
            "def f(x, y) { return x }\nB = f(1)\n",
            "`f` takes 2 arguments (x, y), got 1",
        ),
        (
            "def f(x) { return x, x }\nB = f(1)\n",
            "`f` returns 2 values but 1 name is assigned",
        ),
        (
            "def f(x) { return x }\nB, C = f(1)\n",
            "`f` returns 1 value but 2 names are assigned",
        ),
        (
            "B = zeros(2.5)\n",
            "a dimension must be a whole number, not 2.5",
        ),
    ];
    for (source, expected) in cases {
        dir.write("case.dep", source);
        let run = Run::of(dir.dep().args(["run", "case.dep"])).expect_code(1);
        assert!(run.stderr.contains(expected), "{source:?}\n{}", run.stderr);
        assert!(
            run.stderr.contains("--> case.dep:"),
            "{source:?}\n{}",
            run.stderr
        );
    }
}

#[test]
fn save_and_load_round_trip_through_npy_in_the_working_directory() {
    let dir = TestDir::new();
    dir.write(
        "io.dep",
        "X = [[1, 2], [3, 4]] * 0.5\nsave(X, \"x.npy\")\nY = load(\"x.npy\") + 1\nprint Y\n",
    );
    let run = Run::of(dir.dep().args(["run", "io.dep"])).expect_code(0);
    assert_eq!(run.stdout, "[[1.5 2. ]\n [2.5 3. ]]\n");
    let bytes = std::fs::read(dir.path().join("x.npy")).unwrap();
    assert!(bytes.starts_with(b"\x93NUMPY"), "a NumPy file");
}

#[test]
fn usage_errors_exit_2() {
    let dir = TestDir::new();
    let run = Run::of(dir.dep().args(["run", "nowhere.dep"])).expect_code(2);
    assert!(
        run.stderr.starts_with("dep: cannot read nowhere.dep:"),
        "{}",
        run.stderr
    );
    Run::of(dir.dep().args(["frobnicate"])).expect_code(2);
    let help = Run::of(dir.dep().arg("--help")).expect_code(0);
    assert!(help.stdout.contains("run"), "{}", help.stdout);
    assert!(
        help.stdout.contains("With no command, dep opens its REPL"),
        "{}",
        help.stdout
    );
}

/// A closed stderr (`dep run FILE 2>&1 | head -1`) does not stop a run with a panic: its errors
/// are written while they can be, and the exit code still says the run failed.
#[test]
fn a_closed_stderr_ends_no_run_with_a_panic() {
    let dir = TestDir::new();
    let script = dir.write("flood.dep", "for i in 0..300 { B = ones(2) @ ones(3) }\n");
    let mut child = dir
        .dep()
        .arg("run")
        .arg(&script)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn dep");
    drop(child.stderr.take());
    let status = child.wait().expect("wait for dep");
    assert_eq!(status.code(), Some(1), "{status:?}");
}

/// A number the host read from a variable is read again without a wait only while nothing
/// wrote the variable since: after a graph's run (replayed one op at a time or in a bulk), an
/// update in place and a write through `set`, the host reads the new value, on every engine.
#[test]
fn a_number_read_again_is_the_latest_after_every_kind_of_write() {
    let dir = TestDir::new();
    let path = dir.write(
        "reads.dep",
        "n = 2 * 1\ngraph g {\n  n = n + 1\n}\nprint zeros(n)\nrun g\nprint zeros(n)\n\
         with bulk = 2 { run g }\nprint zeros(n)\nn += 1\nprint zeros(n)\nk = slots(1)\n\
         set(k, 0, n - 3)\nprint zeros(k[0])\nset(k, 0, n - 4)\nprint zeros(k[0])\n",
    );
    for engine in ["naive", "threaded", "per-device", "sim"] {
        let run =
            Run::of(dir.dep().arg("run").arg(&path).args(["--engine", engine])).expect_code(0);
        assert_eq!(
            run.stdout, "[0. 0.]\n[0. 0. 0.]\n[0. 0. 0. 0.]\n[0. 0. 0. 0. 0.]\n[0. 0.]\n[0.]\n",
            "{engine}: {}",
            run.stderr
        );
    }
}
