//! Ranks: the binary under `mpirun` (built with `--features mpi`), and, without the feature, the
//! error that says how to build it. The MPI tests run real processes: `mpirun -n 2` and `-n 4`,
//! each bounded by a timeout.

use crate::util::{Run, TestDir};

/// Runs `script` alone (the serial reference).
fn alone(dir: &TestDir, script: &str) -> String {
    let path = dir.write("reference.dep", script);
    Run::of(dir.dep().arg("run").arg(&path))
        .expect_code(0)
        .stdout
}

const COMMUNICATIONS: &str = "\
x = arange(6) * (rank() + 1)
s = allreduce(x)
m = allreduce(reshape(x, 2, 3) * 0.5)
b = arange(3) + rank() * 10
broadcast(b, ranks() - 1)
with rank = 0 { send(x * 7, 1) }
with rank = 1 { r = recv(0, 6) ; send(r + 1, 0) }
with rank = 0 { back = recv(1, 6) ; print back }
print s
print m
print b
print rank(), ranks()
";

/// A script whose rank 1 fails in an op nobody prints: the allreduce that reads the failed
/// value never runs there, and the next one must not wait for it.
const FAILED_INPUT: &str = "\
x = ones(2)
with rank = 1 { x = ones(2, 3) @ ones(4, 5) }
y = allreduce(x)
z = allreduce(ones(2))
print z
";

/// `reduce` on the last rank (its sum sent back to rank 0) and `allgather`.
const GATHERED: &str = "\
x = arange(3) + rank() * 10
r = reduce(x, ranks() - 1)
g = allgather(x * 2)
with rank = ranks() - 1 { send(r, 0) }
with rank = 0 { s = recv(ranks() - 1, 3) ; print s }
print r
print g
";

/// What the serial reference prints for GATHERED on `n` ranks.
fn gathered_reference(dir: &TestDir, n: usize) -> String {
    alone(
        dir,
        &format!(
            "x = arange(3)\nprint x * {n} + {}\nprint x\nprint (reshape(arange({n}) * 10, {n}, 1) + x) * 2\n",
            10 * n * (n - 1) / 2
        ),
    )
}

/// Communications recorded in a graph replayed three times (once bulked, an allreduce of its own
/// between replays), and in a `priority auto` block.
const RECORDED: &str = "\
x = ones(2) * (rank() + 1)
total = zeros(2)
graph step {
  s = allreduce(x)
  total = total + s
  with rank = 0 { send(total, 1) }
  with rank = 1 { r = recv(0, 2) ; total = total + r }
}
run step
y = allreduce(x * 10)
run step
with bulk = 4 { run step }
priority auto {
  a = allreduce(total)
  b = a * 2
}
print total, y, b
";

/// What the serial reference prints for RECORDED on `n` ranks: rank 0's total is 3 sums of
/// ranks, rank 1's 9 (it adds what rank 0 sent), the others' 3 each.
fn recorded_reference(dir: &TestDir, n: usize) -> String {
    let sum = (n * (n + 1) / 2) as f32;
    let all_totals = (3 * n + 6) as f32 * sum;
    alone(
        dir,
        &format!(
            "print ones(2) * {}, ones(2) * {}, ones(2) * {}\n",
            3.0 * sum,
            10.0 * sum,
            2.0 * all_totals
        ),
    )
}

/// Collectives whose ranks disagree, each with the error every rank gives and the place of
/// rank 0's statement: MPI and simulated ranks give the same. (Under mpirun, different sizes were
/// MPI's own error, with no statement and no rank; the same size in another shape, a broadcast
/// into a larger buffer, another collective or another root gave wrong values silently.)
const DISAGREEING: [(&str, &str, &str); 6] = [
    (
        "x = ones(rank() + 2)\nx = allreduce(x)\nprint x\n",
        "allreduce: rank 1 has shape [3] but rank 0 has [2]; every rank must give the same shape",
        "ranks.dep:2:1",
    ),
    (
        "x = reshape(arange(6), 2, 3)\nwith rank = 1 { x = reshape(arange(6), 3, 2) }\nx = allreduce(x)\nprint x\n",
        "allreduce: rank 1 has shape [3, 2] but rank 0 has [2, 3]",
        "ranks.dep:3:1",
    ),
    (
        "x = arange(rank() + 2)\nbroadcast(x, 0)\nprint x\n",
        "broadcast: rank 1 has shape [3] but rank 0 has [2]",
        "ranks.dep:2:1",
    ),
    (
        "x = ones(rank() + 2)\ny = allgather(x)\nprint y\n",
        "allgather: rank 1 has shape [3] but rank 0 has [2]",
        "ranks.dep:2:1",
    ),
    (
        "x = ones(3) * (rank() + 1)\nwith rank = 0 { x = allreduce(x) }\nwith rank = 1 { broadcast(x, 1) }\nprint x\n",
        "collective number 1: rank 1 runs broadcast with root 1 (line 3) but rank 0 runs allreduce (line 2); every rank must run the same collectives, with the same root, in the same order",
        "ranks.dep:2:17",
    ),
    (
        "x = ones(3)\ny = reduce(x, rank())\nprint y\n",
        "collective number 1: rank 1 runs reduce with root 1 (line 2) but rank 0 runs reduce with root 0 (line 2)",
        "ranks.dep:2:1",
    ),
];

/// Asserts that `run` of a DISAGREEING script failed with dep's error `expected`, whole, at
/// `place`, said once, by rank 0 (every rank sees the same disagreement; each said it, and under
/// mpirun the first to end the job cut the others' reports short), and nothing else went wrong.
fn assert_disagreement(run: &Run, expected: &str, place: &str) {
    assert_eq!(run.code, 1, "{expected}\n{}", run.stderr);
    let own = format!("error (rank 0): {expected}");
    let at = run
        .stderr
        .find(&own)
        .unwrap_or_else(|| panic!("{expected} at {place}\n{}", run.stderr));
    let place_line = run.stderr[at..].lines().nth(1).unwrap_or_default();
    assert!(
        place_line.ends_with(&format!("/{place}")),
        "{expected} at {place}\n{}",
        run.stderr
    );
    assert_eq!(
        run.stderr.matches("error (rank").count(),
        1,
        "said once\n{}",
        run.stderr
    );
    for wrong in ["MPI Error", "MPI_ERR", "panicked"] {
        assert!(!run.stderr.contains(wrong), "{wrong}\n{}", run.stderr);
    }
    assert_eq!(run.stdout, "", "nothing printed after the collective");
}

/// The golden output of a sample run on simulated ranks.
fn sample_golden(name: &str) -> String {
    let path = crate::util::repo_root().join(format!("samples/expected/{name}.out"));
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The numbers of each line of `text`, with the line's words.
fn numbers(text: &str) -> Vec<(String, Vec<f64>)> {
    text.lines()
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let numbers = words.iter().filter_map(|word| word.parse().ok()).collect();
            let names = words.iter().filter(|word| word.parse::<f64>().is_err());
            (names.copied().collect::<Vec<_>>().join(" "), numbers)
        })
        .collect()
}

/// What the serial reference prints for COMMUNICATIONS on `n` ranks.
fn communications_reference(dir: &TestDir, n: usize) -> String {
    let total = (n * (n + 1) / 2) as f32;
    alone(
        dir,
        &format!(
            "x = arange(6)\nprint x * 7 + 1\nprint x * {total}\nprint reshape(x, 2, 3) * 0.5 * {total}\nprint arange(3) + {}\nprint 0, {n}\n",
            (n - 1) * 10
        ),
    )
}

/// Asserts that every number `output` prints is within 1e-5 of the one `reference` prints.
fn assert_close(output: &str, reference: &str, what: &str) {
    let (got, expected) = (numbers(output), numbers(reference));
    assert_eq!(got.len(), expected.len(), "{what}:\n{output}");
    for ((got_words, got), (words, expected)) in got.iter().zip(&expected) {
        assert_eq!(got_words, words, "{what}");
        for (got, expected) in got.iter().zip(expected) {
            assert!(
                (got - expected).abs() <= 1e-5,
                "{what}: {got} != {expected}\n{output}"
            );
        }
    }
}

/// The data-parallel sample's text, and the losses the single-process `mlp.dep` prints, both
/// with the loss printed alone, which prints every digit: the samples' print sentences round to
/// three figures, far too coarse for a comparison to 1e-5.
fn data_parallel() -> (String, String) {
    let read = |path: &str| {
        std::fs::read_to_string(crate::util::repo_root().join(path)).expect("a sample file")
    };
    let every_digit = |script: String| {
        let sentence = "print \"epoch\", epoch, \"loss\", L\n";
        assert!(script.contains(sentence), "the sample prints its loss so");
        script.replace(sentence, "print L\n")
    };
    let script = every_digit(read("samples/data_parallel.dep"));
    let dir = TestDir::new();
    let mlp = dir.write("mlp.dep", &every_digit(read("samples/mlp.dep")));
    let reference = Run::of(dir.dep().arg("run").arg(&mlp))
        .expect_code(0)
        .stdout;
    assert!(
        reference.lines().filter(|line| line.contains('.')).count() >= 5,
        "every loss with its digits: {reference}"
    );
    (script, reference)
}

/// The view flags the rank-views tests give: a trace, a timeline and the summary, in the
/// test's directory.
const VIEW_FLAGS: [&str; 5] = ["--trace", "t.json", "--timeline", "t.svg", "--summary"];

/// Checks the views of COMMUNICATIONS run on `n` ranks with [`VIEW_FLAGS`] in `dir`: one trace
/// with a process per rank, an arrow from rank 0's send to rank 1's receive and arrows across
/// each allreduce, a timeline with every rank's lanes, and each rank's figures in the summary.
fn assert_rank_views(dir: &std::path::Path, n: usize, stderr: &str) {
    let text = std::fs::read_to_string(dir.join("t.json")).expect("the trace");
    let trace: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let events = trace["traceEvents"].as_array().expect("trace events");
    for rank in 0..n {
        let pid = rank + 1;
        assert!(
            events.iter().any(|event| event["ph"] == "M"
                && event["name"] == "process_name"
                && event["pid"] == pid
                && event["args"]["name"] == format!("rank {rank}")),
            "no process for rank {rank}"
        );
        assert!(
            events.iter().any(|event| event["ph"] == "X"
                && event["pid"] == pid
                && event["name"] == "s = allreduce(x)"),
            "no allreduce slice on rank {rank}"
        );
        assert!(
            stderr.contains(&format!("rank {rank}: compute busy ")),
            "{stderr}"
        );
    }
    assert!(stderr.contains(&format!("ranks: {n}")), "{stderr}");
    // The arrow of the first message from rank 0 to rank 1 leaves the send's slice on rank 0
    // and ends on the receive's on rank 1 (each end inside its slice).
    // (Under MPI an asynchronous op's slice spans its whole transfer, so slices on one worker
    // may overlap: any enclosing slice will do.)
    let slices_under = |end: &serde_json::Value| -> Vec<String> {
        let ts = end["ts"].as_f64().expect("a time");
        events
            .iter()
            .filter(|event| {
                event["ph"] == "X"
                    && event["pid"] == end["pid"]
                    && event["tid"] == end["tid"]
                    && event["ts"].as_f64().unwrap() < ts
                    && ts < event["ts"].as_f64().unwrap() + event["dur"].as_f64().unwrap()
            })
            .map(|event| event["name"].as_str().unwrap().to_string())
            .collect()
    };
    let arrow_end = |phase: &str| {
        events
            .iter()
            .find(|event| {
                event["cat"] == "comm"
                    && event["ph"] == phase
                    && event["name"] == "message 0 r0 → r1"
            })
            .unwrap_or_else(|| panic!("no {phase} end of the message's arrow"))
    };
    assert_eq!(arrow_end("s")["pid"], 1);
    assert_eq!(arrow_end("f")["pid"], 2);
    let (sent, received) = (slices_under(arrow_end("s")), slices_under(arrow_end("f")));
    assert!(
        sent.iter().any(|name| name == "send(x * 7, 1) → r1"),
        "{sent:?}"
    );
    assert!(
        received.iter().any(|name| name == "r = recv(0, 6) ← r0"),
        "{received:?}"
    );
    // Each of the 3 collectives: an arrow from the last rank to join it to each other rank.
    let n_collective_arrows = events
        .iter()
        .filter(|event| {
            event["cat"] == "comm"
                && event["ph"] == "f"
                && event["name"].as_str().unwrap().starts_with("collective ")
        })
        .count();
    assert_eq!(n_collective_arrows, 3 * (n - 1), "collective arrows");
    let svg = std::fs::read_to_string(dir.join("t.svg")).expect("the timeline");
    for rank in 0..n {
        assert!(
            svg.contains(&format!("r{rank} main")),
            "no lanes of rank {rank}"
        );
    }
}

#[cfg(feature = "mpi")]
mod mpi {
    use std::process::Command;
    use std::time::{Duration, Instant};

    use super::{alone, gathered_reference, recorded_reference, GATHERED, RECORDED};
    use super::{
        assert_close, assert_disagreement, assert_rank_views, communications_reference,
        data_parallel, COMMUNICATIONS, DISAGREEING, FAILED_INPUT, VIEW_FLAGS,
    };
    use crate::util::{dep_binary, repo_root, Run, TestDir};

    /// A chain of in-place allreduces of a large vector, whose buffers the MPI progress thread
    /// hands over and reuses, beside a variable that still shares the chain's first value: that
    /// one keeps its values, and its own allreduce sums them.
    const CHAINED: &str = "\
x = ones(300000) * (rank() + 1)
y = x
for i in 0..3 { x = allreduce(x) }
z = allreduce(y)
print sum(x), sum(y), sum(z)
";

    /// `mpirun -n N dep run SCRIPT ARGS...` in `dir`, killed after 60 s (`timeout`), with
    /// `env` set for every rank.
    fn mpirun(dir: &TestDir, n: usize, script: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
        let path = dir.write("ranks.dep", script);
        let mut command = Command::new("timeout");
        command
            .current_dir(dir.path())
            .args([
                "60",
                "mpirun",
                "--allow-run-as-root",
                "--oversubscribe",
                "-n",
            ])
            .arg(n.to_string())
            .arg(dep_binary())
            .arg("run")
            .arg(&path)
            .args(args)
            .env_remove("DEP_ENGINE")
            .env_remove("DEP_THREADS")
            .env("NO_COLOR", "1")
            // Containers often forbid the cross-memory attach of Open MPI's shared-memory path.
            .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
        for (name, value) in env {
            command.env(name, value);
        }
        Run::of(&mut command)
    }

    /// What every rank meets alike, a usage error or a syntax error, is said once, by rank 0,
    /// whose abort ends the job: each rank said it (and two aborts at once made Open MPI print
    /// errors of its own), and a rank that ended the job first could cut rank 0's report off.
    #[test]
    fn usage_and_syntax_errors_are_said_once_by_rank_0() {
        let dir = TestDir::new();
        let syntax = mpirun(&dir, 3, "x = ones(3)\nx = allreduce(x) + 1\n", &[], &[]);
        assert_eq!(syntax.code, 2, "{}", syntax.stderr);
        assert_eq!(
            syntax.stderr.matches("error").count(),
            syntax.stderr.matches("errorcode").count() + 1,
            "{}",
            syntax.stderr
        );
        assert!(
            syntax
                .stderr
                .contains("error: allreduce is a statement of its own"),
            "{}",
            syntax.stderr
        );
        let usage = mpirun(
            &dir,
            3,
            "x = 1\n",
            &["--trace", "no/such/folder/t.json"],
            &[],
        );
        assert_eq!(usage.code, 2, "{}", usage.stderr);
        assert_eq!(
            usage.stderr.matches("dep: --trace: cannot write").count(),
            1,
            "{}",
            usage.stderr
        );
        assert!(!usage.stderr.contains("dep (rank"), "{}", usage.stderr);
    }

    #[test]
    fn allreduce_broadcast_and_messages_give_the_serial_values_on_2_and_4_ranks() {
        let dir = TestDir::new();
        for n in [2usize, 4] {
            let reference = communications_reference(&dir, n);
            let started = Instant::now();
            let run = mpirun(&dir, n, COMMUNICATIONS, &[], &[]).expect_code(0);
            assert_eq!(
                run.stdout, reference,
                "{n} ranks\n--- stderr\n{}",
                run.stderr
            );
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{n} ranks took {:?}",
                started.elapsed()
            );
        }
    }

    #[test]
    fn chained_allreduces_reuse_no_buffer_a_variable_still_holds_on_2_and_4_ranks() {
        let dir = TestDir::new();
        for n in [2usize, 4] {
            let sum = n * (n + 1) / 2;
            let reference = alone(
                &dir,
                &format!(
                    "print sum(ones(300000) * {}), sum(ones(300000)), sum(ones(300000) * {sum})\n",
                    n * n * sum
                ),
            );
            let run = mpirun(&dir, n, CHAINED, &[], &[]).expect_code(0);
            assert_eq!(
                run.stdout, reference,
                "{n} ranks\n--- stderr\n{}",
                run.stderr
            );
        }
    }

    #[test]
    fn data_parallel_training_prints_the_single_process_losses_on_2_and_4_ranks() {
        let dir = TestDir::new();
        let (script, reference) = data_parallel();
        for n in [2, 4] {
            let run = mpirun(&dir, n, &script, &[], &[]).expect_code(0);
            assert_close(&run.stdout, &reference, &format!("{n} MPI ranks"));
        }
    }

    #[test]
    fn reduce_and_allgather_give_the_serial_values_on_2_and_4_ranks() {
        let dir = TestDir::new();
        for n in [2usize, 4] {
            let run = mpirun(&dir, n, GATHERED, &[], &[]).expect_code(0);
            assert_eq!(
                run.stdout,
                gathered_reference(&dir, n),
                "{n} ranks\n--- stderr\n{}",
                run.stderr
            );
        }
    }

    #[test]
    fn recorded_communications_replay_as_fresh_ones_on_2_and_4_ranks() {
        let dir = TestDir::new();
        for n in [2usize, 4] {
            let run = mpirun(&dir, n, RECORDED, &[], &[]).expect_code(0);
            assert_eq!(
                run.stdout,
                recorded_reference(&dir, n),
                "{n} ranks\n--- stderr\n{}",
                run.stderr
            );
        }
    }

    #[test]
    fn the_parameter_server_sample_runs_on_a_server_and_two_workers() {
        let dir = TestDir::new();
        let script =
            std::fs::read_to_string(repo_root().join("samples/ps_ranks.dep")).expect("the sample");
        let run = mpirun(&dir, 3, &script, &[], &[]).expect_code(0);
        let lines: Vec<&str> = run.stdout.lines().collect();
        assert_eq!(lines.len(), 3, "{}\n{}", run.stdout, run.stderr);
        for (line, start) in lines[..2].iter().zip([
            "posted order: iteration ",
            "critical-path priorities: iteration ",
        ]) {
            let figures: Vec<f64> = line
                .strip_prefix(start)
                .unwrap_or_else(|| panic!("{line}"))
                .split([' ', ','])
                .filter_map(|word| word.parse().ok())
                .collect();
            // The iteration takes at least its forward pass (4 layers of 3 ms), on real time.
            assert!(
                figures.len() == 2 && figures[0] >= 12.0,
                "{line}\n{}",
                run.stdout
            );
        }
        assert_eq!(lines[2], "same result: 6");
    }

    #[test]
    fn rank_0_writes_one_trace_timeline_and_summary_of_every_rank() {
        for n in [2usize, 4] {
            let dir = TestDir::new();
            let run = mpirun(&dir, n, COMMUNICATIONS, &VIEW_FLAGS, &[]).expect_code(0);
            assert_eq!(run.stdout, communications_reference(&dir, n));
            assert_rank_views(dir.path(), n, &run.stderr);
            assert_eq!(
                run.stderr.matches("ranks: ").count(),
                1,
                "one summary: {}",
                run.stderr
            );
        }
    }

    /// Two chains of allreduces (one at a higher priority), each link made ready by the
    /// completion of the one before: the engine starts those on the MPI progress thread
    /// (`Shared::start_posts`); a receive's completion starts the send that returns its message.
    const CHAINS: &str = "\
a = ones(3) * (rank() + 1)
b = arange(3) + rank()
for i in 0..12 {
  a = allreduce(a)
  with priority = 5 { b = allreduce(b) }
}
with rank = 0 { send(a, 1) }
with rank = 1 { r = recv(0, 3) ; send(r, 0) }
with rank = 0 { q = recv(1, 3) ; print q }
print a
print b
";

    /// What the serial reference prints for CHAINS on `n` ranks.
    fn chains_reference(dir: &TestDir, n: usize) -> String {
        let (sum, offsets) = (n * (n + 1) / 2, n * (n - 1) / 2);
        alone(
            dir,
            &format!(
                "a = ones(3) * {sum}\nb = arange(3) * {n} + {offsets}\n\
                 for i in 0..11 {{ a = a * {n} ; b = b * {n} }}\n\
                 print a\nprint a\nprint b\n"
            ),
        )
    }

    #[test]
    fn chained_communications_give_the_serial_values_on_every_engine() {
        let dir = TestDir::new();
        for (n, engine) in [
            (2usize, "naive"),
            (2, "threaded"),
            (2, "per-device"),
            (4, "threaded"),
            (4, "per-device"),
        ] {
            let reference = chains_reference(&dir, n);
            let run = mpirun(&dir, n, CHAINS, &["--engine", engine], &[]).expect_code(0);
            assert_eq!(
                run.stdout, reference,
                "{n} ranks, {engine}\n--- stderr\n{}",
                run.stderr
            );
        }
    }

    /// A receive that fails (the message is shorter than its shape) on the progress thread,
    /// whose completion makes ready the allreduce that reads it: refused there, that one ends
    /// the job at once, on every engine.
    #[test]
    fn a_communication_refused_after_a_failed_receive_ends_the_job_in_seconds() {
        let dir = TestDir::new();
        let script = "\
with rank = 0 { send(ones(2), 1) }
x = ones(3)
with rank = 1 { x = recv(0, 3) }
y = allreduce(x)
print y
";
        for engine in ["threaded", "per-device"] {
            let started = Instant::now();
            let run = mpirun(
                &dir,
                2,
                script,
                &["--engine", engine],
                &[("DEP_COMM_TIMEOUT", "30")],
            );
            assert_ne!(run.code, 0, "{engine}: {}", run.stderr);
            assert!(
                run.stderr.contains("error (rank 1)")
                    && run
                        .stderr
                        .contains("rank 0 sent 2 values, but shape [3] holds 3"),
                "{engine}: {}",
                run.stderr
            );
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{engine}: took {:?}\n{}",
                started.elapsed(),
                run.stderr
            );
        }
    }

    #[test]
    fn a_communication_skipped_after_a_failure_ends_the_job_in_seconds() {
        let dir = TestDir::new();
        let started = Instant::now();
        let run = mpirun(&dir, 2, FAILED_INPUT, &[], &[("DEP_COMM_TIMEOUT", "30")]);
        assert_ne!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("error (rank 1): matmul: shapes [2, 3] and [4, 5] are not aligned"),
            "{}",
            run.stderr
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "took {:?}\n{}",
            started.elapsed(),
            run.stderr
        );
    }

    #[test]
    fn collectives_whose_ranks_disagree_fail_with_deps_error_naming_the_statement() {
        let dir = TestDir::new();
        for (script, expected, place) in DISAGREEING {
            let run = mpirun(&dir, 2, script, &[], &[("DEP_COMM_TIMEOUT", "20")]);
            assert_disagreement(&run, expected, place);
        }
    }

    /// A collective one rank never reaches: its timeout is the error, then the job ends through
    /// MPI_Abort (before, leaving with the request in flight panicked: exit 134, backtraces).
    #[test]
    fn a_collective_that_times_out_ends_the_job_with_its_error_and_no_panic() {
        let dir = TestDir::new();
        let script = "x = ones(3)\nwith rank = 0 { x = allreduce(x) }\nprint x\n";
        let started = Instant::now();
        let run = mpirun(&dir, 2, script, &[], &[("DEP_COMM_TIMEOUT", "1")]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("error (rank 0): allreduce: rank 0 waited")
                && run.stderr.contains("ranks.dep:2:17"),
            "{}",
            run.stderr
        );
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "took {:?}",
            started.elapsed()
        );
    }

    /// A failing job's views: rank 0, failing, writes its own events and says so; another
    /// failing rank says that the views get none of its events (before, both silently wrote
    /// nothing).
    #[test]
    fn a_failing_job_writes_what_rank_0_recorded_and_says_what_the_views_lack() {
        let dir = TestDir::new();
        let flags = ["--trace", "t.json", "--timeline", "t.svg"];
        let failing = |rank: usize| {
            format!("with rank = {rank} {{ y = ones(2) @ ones(3) ; print y }}\nx = allreduce(ones(2))\nprint x\n")
        };
        let run = mpirun(&dir, 2, &failing(0), &flags, &[]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            run.stderr.contains("note: rank 0 failed: --trace t.json and --timeline t.svg hold rank 0's events only"),
            "{}",
            run.stderr
        );
        let trace = std::fs::read_to_string(dir.path().join("t.json")).expect("a trace");
        assert!(
            trace.contains("rank 0") && trace.contains("ones(2) @ ones(3)"),
            "{trace}"
        );
        assert!(dir.path().join("t.svg").exists());

        let dir = TestDir::new();
        let run = mpirun(&dir, 2, &failing(1), &flags, &[]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            run.stderr.contains("note (rank 1): rank 1 failed: --trace t.json and --timeline t.svg get none of its events"),
            "{}",
            run.stderr
        );
    }

    #[test]
    fn every_rank_prints_with_its_prefix_when_asked() {
        let dir = TestDir::new();
        let run = mpirun(&dir, 2, "print rank()\n", &["--all-ranks"], &[]).expect_code(0);
        let mut lines: Vec<&str> = run.stdout.lines().collect();
        lines.sort();
        assert_eq!(lines, ["[r0] 0.0", "[r1] 1.0"], "{}", run.stderr);
    }

    #[test]
    fn a_failing_rank_ends_the_job_with_its_error_in_seconds() {
        let dir = TestDir::new();
        let script = "\
with rank = 1 { y = ones(2, 3) @ ones(4, 5) ; print y }
x = allreduce(ones(2))
print x
";
        let started = Instant::now();
        let run = mpirun(&dir, 2, script, &[], &[]);
        assert_ne!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("error (rank 1): matmul: shapes [2, 3] and [4, 5] are not aligned"),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains("ranks.dep:1:"), "{}", run.stderr);
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "took {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_receive_with_no_sender_fails_after_the_comm_timeout_naming_both_ranks() {
        let dir = TestDir::new();
        let script = "x = ones(2)\nwith rank = 0 { y = recv(1, 2) ; print y }\n";
        let started = Instant::now();
        let run = mpirun(&dir, 2, script, &[], &[("DEP_COMM_TIMEOUT", "1")]);
        assert_ne!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("error (rank 0): `y = recv(1, 2)`: recv: rank 0 waited")
                || run.stderr.contains("error (rank 0): recv: rank 0 waited"),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains("for rank 1"), "{}", run.stderr);
        assert!(run.stderr.contains("ranks.dep:2:"), "{}", run.stderr);
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "took {:?}",
            started.elapsed()
        );
    }

    /// The `busy:` line of rank 0's summary in `stderr`: one entry per worker of its engine.
    fn busy_line(stderr: &str) -> &str {
        stderr
            .lines()
            .find(|line| line.trim_start().starts_with("busy:"))
            .unwrap_or_else(|| panic!("no busy line: {stderr}"))
    }

    /// Rank 0 waits 300 ms in an allreduce for rank 1's work: the wait is communication, not
    /// busy time of the worker that posted it (before, rank 0's `cpu:0` showed 100%, and a
    /// data-parallel run on 4 ranks over 300%).
    #[test]
    fn waiting_for_a_communication_is_not_worker_busy_time() {
        let dir = TestDir::new();
        let script =
            "x = ones(10)\nwith rank = 1 { x = work(300, x) }\nx = allreduce(x)\nprint x[0]\n";
        let run = mpirun(&dir, 2, script, &["--summary", "--threads", "1"], &[]).expect_code(0);
        let busy = busy_line(&run.stderr);
        let shares: Vec<f64> = busy
            .split('(')
            .skip(1)
            .filter_map(|part| part.split('%').next()?.parse().ok())
            .collect();
        assert!(!shares.is_empty(), "{busy}");
        assert!(
            shares.iter().all(|share| *share < 50.0),
            "rank 0 only waits: {busy}\n{}",
            run.stderr
        );
        assert!(
            run.stderr.contains("rank 0: compute busy"),
            "{}",
            run.stderr
        );
    }

    #[test]
    fn ranks_on_one_machine_share_its_cores_as_workers_and_the_summary_says_so() {
        // Every rank may run on every core (mpirun binds 2 ranks to a core each otherwise).
        let unbound = [("OMPI_MCA_hwloc_base_binding_policy", "none")];
        let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let script = "x = allreduce(ones(2))\nprint x\n";
        for n in [2usize, 4] {
            let dir = TestDir::new();
            let workers = (cores / n).max(1);
            let run = mpirun(&dir, n, script, &["--summary"], &unbound).expect_code(0);
            let busy = busy_line(&run.stderr);
            assert!(
                busy.contains(&format!("cpu:{} ", workers - 1))
                    && !busy.contains(&format!("cpu:{workers} ")),
                "{n} ranks on {cores} cores: {workers} workers each\n{}",
                run.stderr
            );
            let note = format!(
                "    {workers} CPU worker{} per rank: {n} ranks share this machine's {cores} core{} (--threads or DEP_THREADS chooses)\n",
                plural(workers),
                plural(cores)
            );
            assert_eq!(
                run.stderr.contains(&note),
                workers != cores,
                "{n} ranks: {note}\n{}",
                run.stderr
            );
            // A count the user chose is kept, and needs no note.
            let chosen = [unbound[0], ("DEP_THREADS", "3")];
            let run = mpirun(&dir, n, script, &["--summary"], &chosen).expect_code(0);
            assert!(busy_line(&run.stderr).contains("cpu:2 "), "{}", run.stderr);
            assert!(!run.stderr.contains("per rank:"), "{}", run.stderr);
        }
    }
}

#[cfg(not(feature = "mpi"))]
#[test]
fn under_mpirun_a_build_without_mpi_says_how_to_build_with_it() {
    let dir = TestDir::new();
    let path = dir.write("ranks.dep", "print rank()\n");
    let run = Run::of(
        dir.dep()
            .arg("run")
            .arg(&path)
            .env("OMPI_COMM_WORLD_SIZE", "2"),
    )
    .expect_code(2);
    assert!(run.stderr.contains("built without MPI"), "{}", run.stderr);
    assert!(run.stderr.contains("--features mpi"), "{}", run.stderr);
}

#[test]
fn alone_a_script_is_rank_0_of_1() {
    let dir = TestDir::new();
    let path = dir.write(
        "ranks.dep",
        "x = allreduce(ones(2))\nwith rank = 0 { print rank(), ranks(), x }\n",
    );
    let run = Run::of(dir.dep().arg("run").arg(&path)).expect_code(0);
    assert_eq!(run.stdout, "0 1 [1. 1.]\n");
}

/// `dep run SCRIPT --engine sim --ranks N ARGS...` in `dir`.
fn simulated(dir: &TestDir, n: usize, script: &str, args: &[&str]) -> Run {
    let path = dir.write("ranks.dep", script);
    Run::of(
        dir.dep()
            .arg("run")
            .arg(&path)
            .args(["--engine", "sim", "--ranks", &n.to_string()])
            .args(args),
    )
}

#[test]
fn simulated_ranks_give_the_serial_values_as_mpi_ranks_do() {
    let dir = TestDir::new();
    for n in [2, 4] {
        let run = simulated(&dir, n, COMMUNICATIONS, &[]).expect_code(0);
        assert_eq!(
            run.stdout,
            communications_reference(&dir, n),
            "{n} ranks\n{}",
            run.stderr
        );
    }
    let run = simulated(&dir, 2, "print rank()\n", &["--all-ranks"]).expect_code(0);
    assert_eq!(run.stdout, "[r0] 0.0\n[r1] 1.0\n");
}

#[test]
fn simulated_data_parallel_training_prints_the_single_process_losses_and_the_same_trace_every_run()
{
    let dir = TestDir::new();
    let (script, reference) = data_parallel();
    let mut outputs = Vec::new();
    let mut timelines = Vec::new();
    for run in 0..2 {
        let trace = dir.path().join(format!("t{run}.json"));
        let trace_arg = trace.display().to_string();
        let ran = simulated(&dir, 4, &script, &["--trace", &trace_arg]).expect_code(0);
        assert_close(&ran.stdout, &reference, "4 simulated ranks");
        outputs.push(ran.stdout);
        let text = std::fs::read_to_string(&trace).expect("the trace");
        assert!(
            text.contains("allreduce(gW2)") && text.contains("net:0"),
            "no allreduce on the net lane"
        );
        let trace: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let events = trace["traceEvents"].as_array().expect("trace events");
        let n_slices = events.iter().filter(|event| event["ph"] == "X").count();
        assert!(n_slices > 3000, "{n_slices} slices");
        for rank in 0..4 {
            assert!(
                events
                    .iter()
                    .any(|event| event["ph"] == "X" && event["pid"] == rank + 1),
                "no slice of rank {rank}"
            );
        }
        timelines.push(text);
    }
    assert_eq!(
        outputs[0], outputs[1],
        "two simulated runs printed different numbers"
    );
    assert!(
        timelines[0] == timelines[1],
        "two simulated runs wrote different traces"
    );
}

/// The summary of a simulated job is folded from rank 0's events in virtual-time order: folded
/// as they arrived (their order depends on when the other ranks' threads ran), its critical
/// path went through 1203, 1205 or 1207 ops from run to run.
#[test]
fn simulated_ranks_print_the_same_summary_every_run() {
    let dir = TestDir::new();
    let script = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/data_parallel.dep"),
    )
    .expect("the sample");
    // Every line but the memory one, which measures this process's real allocations (those
    // of every simulated rank's thread), and says so.
    let summary = |stderr: &str| -> String {
        stderr
            .lines()
            .skip_while(|line| !line.starts_with("summary:"))
            .filter(|line| {
                !line
                    .trim_start()
                    .starts_with("memory (the 2 simulated ranks")
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let first = simulated(&dir, 2, &script, &["--summary"]).expect_code(0);
    let expected = summary(&first.stderr);
    assert!(expected.contains("critical path"), "{}", first.stderr);
    assert!(
        first.stderr.contains(
            "memory (the 2 simulated ranks together, with their simulated devices' tensors): \
                 cpu peak"
        ),
        "{}",
        first.stderr
    );
    // It differed in about one run of five.
    for _ in 0..20 {
        let again = simulated(&dir, 2, &script, &["--summary"]).expect_code(0);
        assert_eq!(summary(&again.stderr), expected, "two runs, two summaries");
    }
}

#[test]
fn simulated_reduce_and_allgather_give_the_serial_values() {
    let dir = TestDir::new();
    for n in [1usize, 2, 4] {
        let run = simulated(&dir, n, GATHERED, &[]).expect_code(0);
        assert_eq!(
            run.stdout,
            gathered_reference(&dir, n),
            "{n} ranks\n{}",
            run.stderr
        );
    }
}

#[test]
fn simulated_recorded_communications_replay_as_fresh_ones() {
    let dir = TestDir::new();
    for n in [2usize, 4] {
        let run = simulated(&dir, n, RECORDED, &[]).expect_code(0);
        assert_eq!(
            run.stdout,
            recorded_reference(&dir, n),
            "{n} ranks\n{}",
            run.stderr
        );
    }
}

#[test]
fn the_rank_samples_print_their_golden_output_on_simulated_ranks() {
    let dir = TestDir::new();
    for (name, n) in [("ps_ranks", 3), ("data_parallel_lesson", 4)] {
        let path = crate::util::repo_root().join(format!("samples/{name}.dep"));
        let run = Run::of(dir.dep().arg("run").arg(&path).args([
            "--engine",
            "sim",
            "--ranks",
            &n.to_string(),
        ]))
        .expect_code(0);
        assert_eq!(run.stdout, sample_golden(name), "{name}\n{}", run.stderr);
        assert_eq!(run.stderr, "", "{name}");
    }
}

#[test]
fn simulated_ranks_give_one_trace_timeline_and_summary_of_every_rank() {
    for n in [2usize, 4] {
        let dir = TestDir::new();
        let path = dir.write("ranks.dep", COMMUNICATIONS);
        let run = Run::of(
            dir.dep()
                .arg("run")
                .arg(&path)
                .args(["--engine", "sim", "--ranks", &n.to_string()])
                .args(VIEW_FLAGS),
        )
        .expect_code(0);
        assert_rank_views(dir.path(), n, &run.stderr);
    }
}

#[test]
fn a_simulated_communication_skipped_after_a_failure_ends_the_job_at_once() {
    let dir = TestDir::new();
    let path = dir.write("ranks.dep", FAILED_INPUT);
    let started = std::time::Instant::now();
    let run = Run::of(
        dir.dep()
            .arg("run")
            .arg(&path)
            .args(["--engine", "sim", "--ranks", "2"])
            .env("DEP_COMM_TIMEOUT", "30"),
    )
    .expect_code(1);
    assert!(
        run.stderr
            .contains("error (rank 1): matmul: shapes [2, 3] and [4, 5] are not aligned"),
        "{}",
        run.stderr
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn a_failing_simulated_rank_ends_the_job_with_its_error() {
    let dir = TestDir::new();
    let script = "with rank = 1 { y = ones(2, 3) @ ones(4, 5) ; print y }\nx = allreduce(ones(2))\nprint x\n";
    let started = std::time::Instant::now();
    let run = simulated(&dir, 2, script, &[]).expect_code(1);
    assert!(
        run.stderr
            .contains("error (rank 1): matmul: shapes [2, 3] and [4, 5] are not aligned"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("the job ended: rank 1 failed"),
        "{}",
        run.stderr
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn simulated_collectives_whose_ranks_disagree_fail_as_under_mpirun() {
    let dir = TestDir::new();
    for (script, expected, place) in DISAGREEING {
        let run = simulated(&dir, 2, script, &[]);
        assert_disagreement(&run, expected, place);
    }
}

/// A disagreement ends no job early (every rank fails there by itself), but a rank still
/// waiting for a collective rank 0 never runs stops once rank 0 has failed, rather than wait
/// out the communication timeout (it would then report that timeout); as under mpirun, where
/// rank 0's abort ends it, rank 0's report is the only one.
#[test]
fn after_a_disagreement_a_rank_left_waiting_stops_when_rank_0_ends() {
    let dir = TestDir::new();
    let script = "x = ones(rank() + 2)\nx = allreduce(x)\nwith rank = 1 { y = allreduce(ones(3)) }\nprint x\n";
    let path = dir.write("ranks.dep", script);
    let run = Run::of(
        dir.dep()
            .env("DEP_COMM_TIMEOUT", "600")
            .arg("run")
            .arg(&path)
            .args(["--engine", "sim", "--ranks", "2"]),
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("error (rank 0): allreduce: rank 1 has shape [3] but rank 0 has [2]"),
        "{}",
        run.stderr
    );
    assert_eq!(
        run.stderr.matches("error (rank").count(),
        1,
        "{}",
        run.stderr
    );
}

/// A loop of allreduces long enough (seconds) to show whether the other ranks stop.
const LONG_LOOP: &str =
    "for i in 0..200000 {\n  x = allreduce(x)\n  x = x / ranks()\n}\nprint x[0]\n";

/// One simulated rank fails (rank 0 or rank 1) while the others run a long loop of
/// communications: they stop at their next statement, as under mpirun (before, they ran the whole
/// loop, each refused communication spawning a thread, for a minute or more).
#[test]
fn a_failing_simulated_rank_stops_the_others_at_their_next_statement() {
    let dir = TestDir::new();
    for failing in [0, 1] {
        let script = format!(
            "x = ones(1000)\nwith rank = {failing} {{ y = ones(2) @ ones(3) ; print y }}\n{LONG_LOOP}"
        );
        let path = dir.write("ranks.dep", &script);
        let started = std::time::Instant::now();
        let run = Run::of(
            dir.dep()
                .arg("run")
                .arg(&path)
                .args(["--engine", "sim", "--ranks", "3"])
                .env("DEP_COMM_TIMEOUT", "60"),
        )
        .expect_code(1);
        assert!(
            run.stderr.contains(&format!(
                "error (rank {failing}): matmul: shapes [2] and [3] are not aligned"
            )),
            "{}",
            run.stderr
        );
        let other = 1 - failing;
        assert!(
            run.stderr.contains(&format!(
                "error (rank {other}): the job ended: rank {failing} failed"
            )),
            "{}",
            run.stderr
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(8),
            "rank {failing} failing took {:?}",
            started.elapsed()
        );
    }
}

/// Ctrl-C stops every simulated rank, not only rank 0 (before, the others ran on, at full
/// CPU, until a second Ctrl-C).
#[test]
fn ctrl_c_stops_every_simulated_rank() {
    use std::io::Read;
    let dir = TestDir::new();
    let script = format!(
        "x = ones(1000)\n{}",
        LONG_LOOP.replace("200000", "100000000")
    );
    let path = dir.write("ranks.dep", &script);
    let mut child = dir
        .dep()
        .arg("run")
        .arg(&path)
        .args(["--engine", "sim", "--ranks", "2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start dep");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for dep") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the simulated ranks did not stop after one Ctrl-C");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut stderr = String::new();
    let _ = child
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut stderr);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("error (rank 0): interrupted"), "{stderr}");
    // Rank 1 learns of it from rank 0's end (`rank 0 was interrupted (Ctrl-C)`), or from the
    // communication the interrupt cancelled on rank 0 (`rank 0 failed (... did not run)`).
    assert!(
        stderr.contains("error (rank 1): the job ended: rank 0 ")
            && stderr.contains("stopped before this statement"),
        "{stderr}"
    );
}

/// Each rank reads, between its `recv` and its `send`, a rank held in a variable it had not
/// read since it was written: under the simulated engine the read waits for the `recv` (the
/// virtual clock stops at a host read until every op pushed before it has ended), so the ranks
/// wait for each other. The timeout says so, and how to write it (MPI's engines run it), its
/// advice whole: not cut with `...`.
#[test]
fn a_simulated_recv_that_times_out_says_how_host_reads_wait() {
    let dir = TestDir::new();
    let path = dir.write(
        "ranks.dep",
        "x = full(rank() + 1, 3)\nother = 1 - rank()\ny = recv(1 - rank(), 3)\nsend(x, other)\nprint y\n",
    );
    let run = Run::of(
        dir.dep()
            .arg("run")
            .arg(&path)
            .args(["--engine", "sim", "--ranks", "2"])
            .env("DEP_COMM_TIMEOUT", "1"),
    )
    .expect_code(1);
    assert!(
        run.stderr.contains("waited 1.0 s for rank")
            && run.stderr.contains("on simulated ranks, a host read")
            && run
                .stderr
                .contains("block each other: read before the `recv`, or send first\n"),
        "{}",
        run.stderr
    );
}

/// A rank held in a variable the host read before the `recv`, read again between the `recv`
/// and the `send` with no write in between, needs no new wait: the ranks exchange their values
/// on the simulated engine as under mpirun (it timed out, each rank's second read of `other`
/// waiting for its own `recv`).
#[test]
fn a_variable_read_again_unchanged_waits_for_nothing_between_a_recv_and_a_send() {
    let dir = TestDir::new();
    let path = dir.write(
        "ranks.dep",
        "x = full(rank() + 1, 3)\nother = 1 - rank()\ny = recv(other, 3)\nsend(x, other)\nprint y\n",
    );
    let run = Run::of(
        dir.dep()
            .arg("run")
            .arg(&path)
            .args(["--engine", "sim", "--ranks", "2", "--all-ranks"])
            .env("DEP_COMM_TIMEOUT", "5"),
    )
    .expect_code(0);
    assert_eq!(run.stdout, "[r0] [2. 2. 2.]\n[r1] [1. 1. 1.]\n");
}

#[test]
fn ranks_outside_the_simulator_is_an_error_saying_where_real_ranks_come_from() {
    let dir = TestDir::new();
    let path = dir.write("ranks.dep", "print 1\n");
    let run = Run::of(
        dir.dep()
            .arg("run")
            .arg(&path)
            .args(["--ranks", "2", "--engine", "threaded"]),
    )
    .expect_code(2);
    assert!(
        run.stderr
            .contains("--ranks 2 runs simulated ranks: add --engine sim"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("mpirun -n N"), "{}", run.stderr);
}

#[test]
fn a_simulated_allreduce_takes_a_rings_share_of_its_bytes_over_the_net_model() {
    let dir = TestDir::new();
    // 1 MB over 1 GB/s with no latency: a ring sends 2(n-1)/n of it over each rank's link.
    let script = "device net = sim(gbps=1, latency_us=0)\nx = ones(250000)\nwait\nt0 = clock()\nx = allreduce(x)\nwait\nprint clock() - t0\n";
    for (n, ms) in [(2, "1.0"), (4, "1.5")] {
        let run = simulated(&dir, n, script, &[]).expect_code(0);
        assert_eq!(run.stdout, format!("{ms}\n"), "{n} ranks");
    }
}

/// A message no rank receives is a script's mistake nothing else shows (its send ended when
/// sent): the run warns of it, naming both ranks and which send it was.
#[test]
fn a_simulated_message_never_received_is_warned_of() {
    let dir = TestDir::new();
    let script = "x = ones(3)\nwith rank = 0 {\n  send(x, 1)\n  send(x * 2, 1)\n}\nwith rank = 1 {\n  y = recv(0, 3)\n}\nprint sum(x)\n";
    let run = simulated(&dir, 2, script, &[]).expect_code(0);
    assert!(
        run.stderr.contains(
            "warning: rank 0's send number 2 to rank 1 was never received: rank 1 has no \
             matching recv(0, ...)"
        ),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("send number 1 "), "{}", run.stderr);
}

/// `dep replay` of a trace of several ranks names the critical path's ops by their rank and
/// line (`r1:2`), as its table does: `(line 2)` did not say whose op it was.
#[test]
fn a_replayed_critical_path_of_several_ranks_names_each_ops_rank() {
    let dir = TestDir::new();
    let script = "x = ones(2)\nwith rank = 1 { y = work(5, x) }\nx = allreduce(x)\n";
    simulated(&dir, 2, script, &["--trace", "t.json"]).expect_code(0);
    for last in [None, Some("30")] {
        let mut replay = dir.dep();
        replay.args(["replay", "--end", "t.json"]);
        if let Some(last) = last {
            replay.args(["--last", last]);
        }
        let run = Run::of(&mut replay).expect_code(0);
        let path = &run.stdout[run.stdout.find("critical path:").expect("a critical path")..];
        assert!(
            path.contains("y = work(5, x) (r1:2)") && !path.contains("(line "),
            "--last {last:?}: {}",
            run.stdout
        );
    }
}

/// `dep replay` of a trace of several ranks sums them all, where `dep run`'s summary was rank
/// 0's: its summary says so.
#[test]
fn a_replayed_summary_of_several_ranks_says_it_adds_them_up() {
    let dir = TestDir::new();
    let script = "x = ones(2) * (rank() + 1)\nx = allreduce(x)\nprint x\n";
    simulated(&dir, 3, script, &["--trace", "t.json"]).expect_code(0);
    let run = Run::of(dir.dep().args(["replay", "--end", "t.json"])).expect_code(0);
    assert!(
        run.stdout
            .contains("(the 3 ranks of the trace together; the run's own summary was rank 0's)"),
        "{}",
        run.stdout
    );
    simulated(&dir, 1, script, &["--trace", "one.json"]).expect_code(0);
    let run = Run::of(dir.dep().args(["replay", "--end", "one.json"])).expect_code(0);
    assert!(!run.stdout.contains("ranks of the trace"), "{}", run.stdout);
}

/// The network lane of each rank is busy with its communications in every view of the job: the
/// timeline and `dep replay` of its trace named it `r0 net:0`, which they did not take for a
/// network lane, and said `0%` and `r0 net:0 0 ns (0%)` (parallelism 3.60) where the run's
/// summary said `net:0 88.9 µs (8%)`: a 1 MiB allreduce over 2 ranks, 1 MiB on the default
/// 12.5 GB/s link after 5 µs of latency.
#[test]
fn a_jobs_network_lanes_are_busy_with_its_communications_in_every_view() {
    let dir = TestDir::new();
    let script = "x = ones(262144)\ny = work(1)\nx = allreduce(x)\nz = work(1, x)\n";
    let args = ["--summary", "--trace", "t.json", "--timeline", "t.svg"];
    let run = simulated(&dir, 2, script, &args).expect_code(0);
    let busy = "busy: main 0 ns (0%), cpu:0 1.05 ms (92%), cpu:1 1.00 ms (88%), net:0 88.9 µs (8%)";
    assert!(run.stderr.contains(busy), "{}", run.stderr);
    let replayed = Run::of(dir.dep().args(["replay", "--end", "t.json"])).expect_code(0);
    let summary = &replayed.stdout[replayed.stdout.find("\nsummary: ").unwrap()..];
    // The summary wraps its busy line; each rank's lanes as that rank's own summary says them.
    let summary = summary.replace("\n  ", " ");
    for rank in 0..2 {
        let lanes = format!(
            "r{rank} main 0 ns (0%), r{rank} cpu:0 1.05 ms (92%), r{rank} cpu:1 1.00 ms (88%), r{rank} net:0 88.9 µs (8%)"
        );
        assert!(summary.contains(&lanes), "{summary}");
    }
    assert!(summary.contains("parallelism: 3.75 "), "{summary}");
    let svg = std::fs::read_to_string(dir.path().join("t.svg")).unwrap();
    let shares: Vec<&str> = svg
        .split(r#"font-size="9">"#)
        .skip(1)
        .filter_map(|text| text.split_once("</text>").map(|(share, _)| share))
        .filter(|text| text.ends_with('%'))
        .collect();
    assert_eq!(shares, ["0%", "92%", "88%", "8%", "0%", "92%", "88%", "8%"]);
}

/// The timeline of a job names each lane whole: the two streams of a rank's GPU, cut at 11
/// columns, both read `dev:r0 gpu…`, with different busy shares beside them.
#[test]
fn a_jobs_timeline_tells_the_streams_of_a_ranks_gpu_apart() {
    let dir = TestDir::new();
    let script = "device gpu0 = sim(launch_us=5, latency_us=0, streams=2)\na = ones(16)\nwith gpu0 {\n  b = work(1, a)\n  d = work(2, a)\n}\n";
    simulated(&dir, 2, script, &["--timeline", "t.svg"]).expect_code(0);
    let svg = std::fs::read_to_string(dir.path().join("t.svg")).unwrap();
    for rank in 0..2 {
        for stream in 0..2 {
            let label =
                format!(r#"lengthAdjust="spacingAndGlyphs">dev:r{rank} gpu0:s{stream}</text>"#);
            assert!(svg.contains(&label), "{label} in {svg}");
        }
    }
    assert!(!svg.contains("gpu…"), "{svg}");
}

/// `dep replay` of a trace of several ranks steps forward in time through every rank's events
/// at once, and names each rank's variables (`r1 x`) and ops (`(r1:3)`) by their rank: it used
/// to step through rank 0's whole run, then back to the start for rank 1's, with two rows named
/// `x`, and two ops of a statement read the same.
#[test]
fn a_replay_of_several_ranks_steps_forward_in_time_through_them_all() {
    let dir = TestDir::new();
    let script = "x = work(1, ones(2) * (rank() + 1))\nx = allreduce(x)\ny = work(1, x)\nprint y\n";
    simulated(&dir, 2, script, &["--trace", "t.json"]).expect_code(0);
    let run = Run::of(dir.dep().args(["replay", "t.json"])).expect_code(0);
    let to_ns = |time: &str| {
        let (value, unit) = time.split_once(' ').unwrap();
        let scale = match unit {
            "ns" => 1.0,
            "µs" => 1e3,
            "ms" => 1e6,
            _ => 1e9,
        };
        value.parse::<f64>().unwrap() * scale
    };
    let times: Vec<f64> = run
        .stdout
        .lines()
        .filter_map(|line| line.strip_prefix("step "))
        .map(|step| {
            to_ns(
                step.split(" at ")
                    .nth(1)
                    .unwrap()
                    .split(':')
                    .next()
                    .unwrap(),
            )
        })
        .collect();
    assert!(times.len() > 20, "{}", run.stdout);
    assert!(
        times.windows(2).all(|pair| pair[0] <= pair[1]),
        "{}",
        run.stdout
    );
    for created in ["created r0 x", "created r1 x"] {
        assert!(run.stdout.contains(created), "{created}\n{}", run.stdout);
    }
    // Each op is told by its rank and line, in the steps and in the table's line column: the
    // same statement's ops on two ranks read the same otherwise.
    for rank in 0..2 {
        let done = format!("done y = work(1, x) (r{rank}:3)");
        assert!(
            run.stdout
                .lines()
                .any(|line| line.starts_with("step ") && line.ends_with(&done)),
            "{done}\n{}",
            run.stdout
        );
        assert!(
            run.stdout
                .lines()
                .any(|line| line.starts_with("y = work(1, x)")
                    && line.contains(&format!(" r{rank}:3 done "))),
            "the table's row of rank {rank}'s y\n{}",
            run.stdout
        );
    }
}

/// The memory simulated ranks keep at their end is counted once every rank's ops ended and
/// its engine let go of what it kept of the statements: the same figure in every run (it
/// was read while the other ranks' threads still freed their temporaries, 32 B in one run and
/// 64 B in another). Here each of 3 ranks keeps `x`, 4 float32s.
#[test]
fn simulated_ranks_count_the_same_memory_at_their_end_in_every_run() {
    let dir = TestDir::new();
    let script = "def step(w) {\n  g = work(2, w) * 2\n  g = allreduce(g)\n  return g\n}\n\
                  x = ones(4) * rank()\nfor i in 0..3 {\n  x = step(x) + 1\n}\nprint x[0]\n";
    for _ in 0..4 {
        let run = simulated(&dir, 3, script, &["--summary"]).expect_code(0);
        assert!(
            run.stderr.contains(", 48 B in use at the end, "),
            "{}",
            run.stderr
        );
    }
}

/// A syntax error is the same on every rank: said once, as a single run says it, and no rank
/// runs (each of 3 simulated ranks printed it, labelled `error (rank N)`).
#[test]
fn a_syntax_error_on_simulated_ranks_is_said_once() {
    let dir = TestDir::new();
    let source = "x = ones(2)\nif rank() == 0 {\n  print x\n}\n";
    let run = simulated(&dir, 3, source, &[]).expect_code(2);
    let alone = Run::of(dir.dep().arg("run").arg(dir.path().join("ranks.dep"))).expect_code(2);
    assert_eq!(run.stderr, alone.stderr);
    assert_eq!(
        run.stderr
            .matches("error: dep has no `if` statement")
            .count(),
        1
    );
    assert_eq!(run.stdout, "");
}
