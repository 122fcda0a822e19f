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

#[cfg(feature = "mpi")]
mod mpi {
    use std::process::Command;
    use std::time::{Duration, Instant};

    use super::{assert_close, communications_reference, data_parallel, COMMUNICATIONS};
    use crate::util::{dep_binary, Run, TestDir};

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
            .env("NO_COLOR", "1")
            // Containers often forbid the cross-memory attach of Open MPI's shared-memory path.
            .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
        for (name, value) in env {
            command.env(name, value);
        }
        Run::of(&mut command)
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
    fn data_parallel_training_prints_the_single_process_losses_on_2_and_4_ranks() {
        let dir = TestDir::new();
        let (script, reference) = data_parallel();
        for n in [2, 4] {
            let run = mpirun(&dir, n, &script, &[], &[]).expect_code(0);
            assert_close(&run.stdout, &reference, &format!("{n} MPI ranks"));
        }
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
fn simulated_data_parallel_training_prints_the_single_process_losses_and_the_same_timeline_every_run(
) {
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
        // The timeline: every op's slice (statement, op number, lane, virtual start and
        // duration). Not the names of the variables in its args: a temporary's name can be
        // missing when its creation event comes after the op's (async ops complete in real time).
        let trace: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let slices: Vec<String> = trace["traceEvents"]
            .as_array()
            .expect("trace events")
            .iter()
            .filter(|event| event["ph"] == "X")
            .map(|event| {
                let fields = [
                    &event["name"],
                    &event["args"]["op"],
                    &event["tid"],
                    &event["ts"],
                    &event["dur"],
                ];
                format!("{fields:?}")
            })
            .collect();
        assert!(slices.len() > 3000, "{} slices", slices.len());
        timelines.push(slices);
    }
    assert_eq!(
        outputs[0], outputs[1],
        "two simulated runs printed different numbers"
    );
    assert!(
        timelines[0] == timelines[1],
        "two simulated runs drew different timelines"
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
