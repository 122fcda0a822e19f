//! What a new user tries that should fail cleanly: typos, tensors larger than the machine, loops
//! of a billion iterations, Ctrl-C in a batch run.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{dep_binary, Run, TestDir};

#[test]
fn a_swapped_pair_of_letters_gets_a_suggestion() {
    let dir = TestDir::new();
    dir.write("typo.dep", "A = onse(2)\n");
    let run = Run::of(dir.dep().args(["run", "typo.dep"])).expect_code(1);
    assert!(
        run.stderr
            .contains("unknown name `onse` (did you mean `ones`?)"),
        "{}",
        run.stderr
    );
}

/// Calls that cannot be made say why, at their place: they said "unknown name `A` (did you
/// mean `A`?)", "unknown name `rank` (did you mean `rand`?)" and, for a `split` printed, "the
/// right side gives 2 values but 1 names are assigned".
#[test]
fn a_call_that_cannot_be_made_says_why_and_never_suggests_the_name_typed() {
    let dir = TestDir::new();
    for (source, message, place) in [
        (
            "A = ones(2)\nprint A(1)\n",
            "error: `A` is a tensor, not a function: index it with `A[...]`",
            "2:7",
        ),
        (
            "for i in 0..2 { x = i(1) }\n",
            "error: `i` is a loop counter, not a function",
            "1:21",
        ),
        (
            "print rank(1)\n",
            "error: wrong arguments: the form is rank(), with no arguments: this process's rank",
            "1:7",
        ),
        (
            "x = ranks(2) + 1\n",
            "error: wrong arguments: the form is ranks(), with no arguments: how many ranks the job has",
            "1:5",
        ),
        (
            "print split(arange(4), 2, 0)\n",
            "error: split gives several values and must be assigned to as many names, as in `a, b = split(x, 2, 0)`",
            "1:7",
        ),
    ] {
        dir.write("call.dep", source);
        let run = Run::of(dir.dep().args(["run", "call.dep"])).expect_code(1);
        assert!(
            run.stderr.starts_with(&format!("{message}\n --> call.dep:{place}\n")),
            "{source}: {}",
            run.stderr
        );
    }
    // Assigned to as many names, a split still runs.
    dir.write(
        "split.dep",
        "a, b = split(arange(4), 2, 0)\nprint b\nc = split(arange(2), 1, 0)\nprint c\n",
    );
    let run = Run::of(dir.dep().args(["run", "split.dep"])).expect_code(0);
    assert_eq!(run.stdout, "[2. 3.]\n[0. 1.]\n");
}

/// A number too large for a count, an index, a seed or a loop bound says so, with the limit: it
/// said "index 9223372036854775807 is out of range" and "expected a whole number, got
/// 1000000000000000000000000000000".
#[test]
fn a_number_too_large_for_a_count_says_so_and_its_limit() {
    let dir = TestDir::new();
    for (source, message, place) in [
        (
            "X = ones(3)\nprint X[1e30]\n",
            "error: an index is too large: 1e30 is beyond ±9007199254740992",
            "2:7",
        ),
        (
            "x = zeros(-1e30)\n",
            "error: a dimension is too large: -1e30 is beyond ±9007199254740992",
            "1:1",
        ),
        (
            "for i in 0..1e30 { x = 1 }\n",
            "error: the number is too large: 1e30 is beyond ±9007199254740992",
            "1:13",
        ),
        (
            "seed 1e16\n",
            "error: the number is too large: 1e16 is beyond ±9007199254740992",
            "1:6",
        ),
        (
            "with priority = 1e30 { x = 1 }\n",
            "error: the number is too large: 1e30 is beyond ±9007199254740992",
            "1:17",
        ),
        (
            "seed 2.5\n",
            "error: expected a whole number, got 2.5",
            "1:6",
        ),
    ] {
        dir.write("big.dep", source);
        let run = Run::of(dir.dep().args(["run", "big.dep"])).expect_code(1);
        assert!(
            run.stderr
                .starts_with(&format!("{message}\n --> big.dep:{place}\n")),
            "{source}: {}",
            run.stderr
        );
    }
}

/// A whole number written with digits only past 2^53, as a seed, a loop bound or a count, is
/// too large, said with its every digit: `seed 9007199254740993` seeded with 9007199254740992,
/// its float64, silently. Their arithmetic is exact: a result past 2^53 is too large, one
/// within it is taken, and a quotient float64 rounds to a whole number is not whole. 2^53
/// itself is taken; as a tensor's value, the number says it is not a float32 number, as before.
#[test]
fn a_whole_number_past_2_53_written_with_digits_only_is_too_large_not_its_neighbour() {
    let dir = TestDir::new();
    let too_large = "the number is too large: 9.007199254740993e15 is beyond ±9007199254740992";
    for (source, message, place) in [
        ("seed 9007199254740993\nprint 1\n", too_large, "1:6"),
        ("seed 9007199254740991 + 2\nprint 1\n", too_large, "1:6"),
        (
            "seed 9007199254740993 / 2\nprint 1\n",
            "expected a whole number, got one between 4503599627370496 and 4503599627370497",
            "1:6",
        ),
        (
            "for i in 0..9007199254740993 { x = 1 }\n",
            too_large,
            "1:13",
        ),
        (
            "for i in -9007199254740993..0 { x = 1 }\n",
            "the number is too large: -9.007199254740993e15 is beyond ±9007199254740992",
            "1:10",
        ),
        ("s = slots(9007199254740993)\n", too_large, "1:11"),
        (
            "with priority = 18014398509481985 { x = 1 }\n",
            "the number is too large: 1.8014398509481985e16 is beyond ±9007199254740992",
            "1:17",
        ),
        (
            "x = ones(9007199254740993)\n",
            "9007199254740993 is not a float32 number: tensors hold float32, whose whole numbers \
             are exact up to 16777216; the nearest is 9007199254740992",
            "1:10",
        ),
    ] {
        dir.write("big.dep", source);
        let run = Run::of(dir.dep().args(["run", "big.dep"])).expect_code(1);
        assert_eq!(run.stdout, "", "{source}");
        assert!(
            run.stderr
                .starts_with(&format!("error: {message}\n --> big.dep:{place}\n")),
            "{source}: {}",
            run.stderr
        );
    }
    for source in [
        "seed 9007199254740992\nprint 1\n",
        "seed 9007199254740993 - 1\nprint 1\n",
        "seed 18014398509481984 / 4\nprint 1\n",
        "for i in 0..2 { seed 9007199254740993 - i - 1 }\nprint 1\n",
    ] {
        dir.write("max.dep", source);
        let run = Run::of(dir.dep().args(["run", "max.dep"])).expect_code(0);
        assert_eq!(run.stdout, "1.0\n", "{source}");
    }
}

#[test]
fn a_tensor_larger_than_the_machine_fails_with_its_size_and_what_is_available() {
    let dir = TestDir::new();
    // 400 GB: more than any machine this runs on, refused before the OOM killer can act.
    dir.write("huge.dep", "A = zeros(1000000, 100000)\nprint A[0, 0]\n");
    let run = Run::of(dir.dep().args(["run", "huge.dep"])).expect_code(1);
    assert!(
        run.stderr
            .contains("cannot allocate a tensor of 100000000000 elements (372.5 GiB): only"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("available"), "{}", run.stderr);
    assert!(run.stderr.contains("--> huge.dep:1:1"), "{}", run.stderr);
}

#[test]
fn dep_memory_limit_sets_the_budget() {
    let dir = TestDir::new();
    dir.write(
        "big.dep",
        "A = zeros(1000, 1000)\nB = zeros(10, 10)\nprint A[0, 0]\n",
    );
    // The naive engine runs ops in push order: `B` cannot allocate before `A` asks, and the
    // message's "left" is exact (on the threaded engine it may be 400 bytes less).
    let run = Run::of(
        dir.dep()
            .env("DEP_MEMORY_LIMIT", "1M")
            .args(["run", "--engine", "naive", "big.dep"]),
    )
    .expect_code(1);
    assert!(
        run.stderr.contains(
            "cannot allocate a tensor of 1000000 elements (3.8 MiB): only 1024.0 KiB left under \
             DEP_MEMORY_LIMIT"
        ),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--> big.dep:1:1"), "{}", run.stderr);
    let run = Run::of(
        dir.dep()
            .env("DEP_MEMORY_LIMIT", "8M")
            .args(["run", "big.dep"]),
    )
    .expect_code(0);
    assert_eq!(run.stdout, "0.0\n");
    let run = Run::of(
        dir.dep()
            .env("DEP_MEMORY_LIMIT", "lots")
            .args(["run", "big.dep"]),
    )
    .expect_code(1);
    assert!(
        run.stderr
            .contains("DEP_MEMORY_LIMIT=\"lots\" is not a size"),
        "{}",
        run.stderr
    );
    // A list of variables too long for the budget is refused before its variables are made
    // (100,000,000 of them took the machine's memory).
    dir.write("slots.dep", "x = slots(1000)\nprint 1\n");
    let run = Run::of(
        dir.dep()
            .env("DEP_MEMORY_LIMIT", "512K")
            .args(["run", "slots.dep"]),
    )
    .expect_code(1);
    assert!(
        run.stderr.contains(
            "cannot make 1000 variables: about 1.0 MiB (1.1 KiB each), and only 512.0 KiB is available"
        ) && run.stderr.contains("--> slots.dep:1:5"),
        "{}",
        run.stderr
    );
}

/// Starts `dep run FILE` in `dir` under a 4 GB address-space limit, with its outputs piped.
fn spawn_limited(dir: &TestDir, file: &str) -> Child {
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 4000000 && exec '{}' run {file}",
            dep_binary().display()
        ))
        .current_dir(dir.path())
        .env_remove("DEP_ENGINE")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start dep")
}

/// Sends SIGINT to `child`.
fn interrupt(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

/// Waits for `child` (at most a minute: a hang fails the test) and returns its exit code and
/// standard error.
fn finish(mut child: Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for dep") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("dep did not stop after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    (status.code(), stderr)
}

#[test]
fn a_loop_of_a_billion_iterations_starts_at_once_in_bounded_memory_and_stops_on_ctrl_c() {
    let dir = TestDir::new();
    // Made as a list first, the range alone would need 24 GB: far over the 4 GB limit.
    dir.write(
        "long.dep",
        "for i in 0..1000000000 { a = 1 }\nfor i, j in clock_cycles(100000, 100000) { b = 1 }\n",
    );
    let child = spawn_limited(&dir, "long.dep");
    std::thread::sleep(Duration::from_millis(800));
    interrupt(&child);
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("error: interrupted: ops that had not started are cancelled")
            && stderr.contains("--> long.dep:1:"),
        "{stderr}"
    );
}

#[test]
fn ctrl_c_in_a_batch_run_stops_a_blocked_print_and_a_second_one_leaves_at_once() {
    let dir = TestDir::new();
    dir.write(
        "slow.dep",
        "A = work(30000, ones(2))\nprint A\nB = ones(2)\n",
    );
    let child = spawn_limited(&dir, "slow.dep --trace t.json --trace t.pftrace");
    std::thread::sleep(Duration::from_millis(500));
    interrupt(&child);
    std::thread::sleep(Duration::from_millis(300));
    interrupt(&child);
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(130), "{stderr}");
    // No trace cut off is left behind, and the user is told.
    assert!(
        stderr.contains("removed the unfinished trace t.json, t.pftrace"),
        "{stderr}"
    );
    assert!(!dir.path().join("t.json").exists());
    assert!(!dir.path().join("t.pftrace").exists());
}

#[test]
fn one_ctrl_c_in_a_batch_run_stops_a_blocked_print_at_its_place_and_the_run_finishes() {
    let dir = TestDir::new();
    dir.write(
        "slow.dep",
        "A = work(3000, ones(2))\nprint A\nB = ones(2)\n",
    );
    let child = spawn_limited(&dir, "slow.dep");
    std::thread::sleep(Duration::from_millis(500));
    interrupt(&child);
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("error: interrupted while waiting (Ctrl-C)")
            && stderr.contains("--> slow.dep:2:7"),
        "{stderr}"
    );
}

/// Ctrl-C while `save` waits: the ops not started are cancelled and write nothing, so the
/// value is not the script's; nothing is saved, and the run fails at the `save`. Ops that ran
/// after cancelled ones (the run's bookkeeping) do not put the cancelled ones on the critical
/// path.
#[test]
fn ctrl_c_while_save_waits_saves_nothing_and_fails_at_the_save() {
    let dir = TestDir::new();
    dir.write(
        "s.dep",
        "Y = zeros(1)\nfor i in 0..400 {\n  X = work(5, Y)\n  Y = Y + X * 0 + 1\n}\nsave(Y, \"y.npy\")\n",
    );
    let child = spawn_limited(&dir, "--engine threaded s.dep --summary");
    std::thread::sleep(Duration::from_millis(700));
    interrupt(&child);
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("error: interrupted while waiting (Ctrl-C)")
            && stderr.contains("--> s.dep:6:6"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("y.npy").exists(),
        "a value the cancel left stale was saved"
    );
    let counts = stderr
        .lines()
        .find_map(|line| line.strip_prefix("summary: "))
        .unwrap_or_else(|| panic!("no summary: {stderr}"));
    let n_done: usize = counts
        .split_once(" ops (")
        .and_then(|(_, rest)| rest.split_once(" done"))
        .and_then(|(done, _)| done.parse().ok())
        .unwrap_or_else(|| panic!("{counts}"));
    let n_on_path: usize = stderr
        .split_once("critical path: ")
        .and_then(|(_, rest)| rest.split_once(" over "))
        .and_then(|(_, rest)| rest.split_once(" ops"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        n_on_path <= n_done,
        "cancelled ops on the critical path: {stderr}"
    );
}

/// Ctrl-C once every statement is pushed, while the last ops run: the run did not end as
/// written, and says so with a failing exit code.
#[test]
fn ctrl_c_while_the_last_ops_run_fails_the_run() {
    let dir = TestDir::new();
    dir.write(
        "s.dep",
        "for i in 0..400 {\n  X = work(5)\n  Y = work(5, X)\n}\n",
    );
    let child = spawn_limited(&dir, "--engine threaded s.dep");
    std::thread::sleep(Duration::from_millis(700));
    interrupt(&child);
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("error: interrupted (Ctrl-C) while the script's last ops ran"),
        "{stderr}"
    );
}

#[test]
fn ctrl_c_in_a_batch_run_says_the_run_stops_and_its_trace_shows_cancelled_ops_as_never_run() {
    for engine in ["threaded", "per-device"] {
        let dir = TestDir::new();
        dir.write(
            "s.dep",
            "A = ones(4)\nfor i in 0..40 { A = work(20, A) }\nprint sum(A)\n",
        );
        let child = spawn_limited(
            &dir,
            &format!("--engine {engine} s.dep --trace t.json --timeline t.svg"),
        );
        std::thread::sleep(Duration::from_millis(400));
        interrupt(&child);
        let (code, stderr) = finish(child);
        assert_eq!(code, Some(1), "{engine}: {stderr}");
        // A batch run ends: no REPL advice to print the value again.
        assert!(
            stderr.contains(
                "error: interrupted while waiting (Ctrl-C): the run stops here; ops that had not \
                 started are cancelled, running ones finish"
            ) && stderr.contains("--> s.dep:3:7")
                && !stderr.contains("again to see it"),
            "{engine}: {stderr}"
        );
        // `summary: 42 ops (16 done, 26 cancelled)`: the cancelled ops have no slice in the
        // trace and are not on the critical path.
        let counts = stderr
            .lines()
            .find_map(|line| line.strip_prefix("summary: "))
            .unwrap_or_else(|| panic!("{engine}: no summary: {stderr}"));
        let n_of = |what: &str| -> usize {
            counts
                .split(|c: char| !c.is_ascii_alphanumeric() && c != ' ')
                .find_map(|part| part.trim().strip_suffix(what)?.trim().parse().ok())
                .unwrap_or(0)
        };
        let (n_done, n_cancelled) = (n_of(" done"), n_of(" cancelled"));
        assert!(n_done > 0 && n_cancelled > 0, "{engine}: {counts}");
        assert!(
            stderr.contains(&format!(" over {n_done} ops")),
            "{engine}: the critical path counts only ops that ran: {stderr}"
        );
        let trace: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("t.json")).unwrap())
                .unwrap();
        let slices = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|event| event["ph"] == "X")
            .count();
        assert_eq!(slices, n_done, "{engine}: a slice per op that ran");
        // The cancel is in the trace when it came, one `"c"` per op it stopped (`sum(A)` is
        // the print's, stopped too): its replay shows them cancelled from the Ctrl-C on, not
        // waiting until their turn.
        let cancels = trace["depEvents"]["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|event| event.get(1).and_then(|kind| kind.as_str()) == Some("c"))
            .count();
        assert_eq!(cancels, n_cancelled, "{engine}");
        let replay = Run::of(dir.dep().args(["replay", "t.json"])).expect_code(0);
        let steps: Vec<&str> = replay.stdout.split("\nstep ").collect();
        let last_cancel = steps
            .iter()
            .rposition(|step| step.contains("(it keeps its place in its queues until its turn)"))
            .unwrap_or_else(|| panic!("{engine}: no cancel step: {}", replay.stdout));
        let after = steps[last_cancel];
        assert!(
            after.contains(" cancelled ") && !after.contains(" waiting "),
            "{engine}: {after}"
        );
    }
}

#[test]
fn a_whole_number_float32_cannot_hold_is_an_error_at_its_place_not_its_neighbour() {
    let dir = TestDir::new();
    // ones(20000001) used to make 20000000 elements: float32 rounds 20000001 to its neighbour.
    dir.write("big.dep", "x = ones(16777216)\ny = ones(20000001)\n");
    let run = Run::of(dir.dep().args(["run", "big.dep"])).expect_code(1);
    assert!(
        run.stderr.contains(
            "20000001 is not a float32 number: tensors hold float32, whose whole numbers are \
             exact up to 16777216; the nearest is 20000000"
        ),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--> big.dep:2:10"), "{}", run.stderr);
    // A loop counter that becomes a tensor constant is held to the same rule, at its name.
    dir.write("counter.dep", "for i in 16777215..16777219 { z = i + 0 }\n");
    let run = Run::of(dir.dep().args(["run", "counter.dep"])).expect_code(1);
    assert!(
        run.stderr.contains("16777217 is not a float32 number"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("--> counter.dep:1:35"),
        "{}",
        run.stderr
    );
    // Numbers float32 only approximates are rounded, as any float32 computation rounds them:
    // fractions, and whole numbers too large to be anything but approximate.
    dir.write(
        "fine.dep",
        "print 16777216 + 0\nprint 123456789.5 * 1\nprint 1.5e30 * 2\n",
    );
    let run = Run::of(dir.dep().args(["run", "fine.dep"])).expect_code(0);
    assert_eq!(run.stdout, "1.6777216e+07\n1.2345679e+08\n3e+30\n");
    // Written with digits only, a whole number is held to the rule however large (past 2^53
    // its float64 is not exact either), and the nearest float32 is shown in full.
    for (written, nearest) in [
        ("1000000000000", "999999995904"),
        ("99999999999999999999", "100000002004087734272"),
    ] {
        dir.write("huge.dep", &format!("x = {written}\nprint x\n"));
        let run = Run::of(dir.dep().args(["run", "huge.dep"])).expect_code(1);
        assert!(
            run.stderr.contains(&format!(
                "{written} is not a float32 number: tensors hold float32, whose whole numbers are \
                 exact up to 16777216; the nearest is {nearest}"
            )),
            "{}",
            run.stderr
        );
    }
    // A number written with a point or an exponent is rounded however whole its value: dep
    // reads back what it prints (`print 82497608` prints 8.249761e+07, which was "82497610 is
    // not a float32 number"), and 1e11..1e15 were refused while 1e16 was taken.
    dir.write(
        "written.dep",
        "x = 8.249761e+07\nprint x\nprint x == 82497608\nprint 1e11, 1e15, 20000001.0\n",
    );
    let run = Run::of(dir.dep().args(["run", "written.dep"])).expect_code(0);
    assert_eq!(
        run.stdout,
        "8.249761e+07\n1.0\n99999997952 999999986991104 20000000\n"
    );
    // One that float32 holds exactly (2^60) is taken.
    dir.write("exact.dep", "print 1152921504606846976 + 0\n");
    let run = Run::of(dir.dep().args(["run", "exact.dep"])).expect_code(0);
    assert_eq!(run.stdout, "1.1529215e+18\n");
}
