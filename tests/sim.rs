//! The simulated engine and its lessons: the same timeline on every run, values equal to the
//! naive engine's, no op before its producers, GPipe's bubble, critical-path priorities.

use std::collections::HashMap;

use crate::util::{repo_root, Run, TestDir};

const LESSONS: &[&str] = &["gpipe", "priorities", "two_gpus", "gpu_sync"];

fn run_sim(dir: &TestDir, script: &str, extra: &[&str]) -> Run {
    Run::of(
        dir.dep()
            .arg("run")
            .arg(script)
            .args(["--engine", "sim"])
            .args(extra),
    )
    .expect_code(0)
}

#[test]
fn lessons_print_their_golden_output_and_draw_their_golden_timeline() {
    let dir = TestDir::new();
    for lesson in LESSONS {
        let script = repo_root().join("samples").join(format!("{lesson}.dep"));
        let expected = |ext: &str| {
            std::fs::read_to_string(
                repo_root()
                    .join("samples/expected")
                    .join(format!("{lesson}.{ext}")),
            )
            .unwrap()
        };
        let run = run_sim(
            &dir,
            script.to_str().unwrap(),
            &["--timeline", "timeline.svg"],
        );
        assert_eq!(run.stdout, expected("out"), "{lesson}");
        let svg = std::fs::read_to_string(dir.path().join("timeline.svg")).unwrap();
        assert!(
            svg.contains("(simulated: virtual time)"),
            "{lesson}: the timeline says it is simulated"
        );
        assert!(
            svg == expected("svg"),
            "{lesson}: the timeline differs from samples/expected/{lesson}.svg"
        );
    }
}

/// The op slices of a trace by (thread, start), and its flow pairs (producer start on its
/// thread, consumer start on its thread).
type Slices = HashMap<(u64, u64), (u64, String)>;

/// A flow pair: (thread, start) of the producer's slice and of the consumer's.
type Flow = ((u64, u64), (u64, u64));

fn read_trace(text: &str) -> (Slices, Vec<Flow>) {
    let trace: serde_json::Value = serde_json::from_str(text).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let micros = |value: &serde_json::Value| (value.as_f64().unwrap() * 1000.0).round() as u64;
    let mut slices = HashMap::new();
    let mut flows: HashMap<u64, [(u64, u64); 2]> = HashMap::new();
    for event in events {
        let tid = event["tid"].as_u64().unwrap_or(0);
        match event["ph"].as_str() {
            Some("X") => {
                slices.insert(
                    (tid, micros(&event["ts"])),
                    (
                        micros(&event["dur"]),
                        event["name"].as_str().unwrap().to_string(),
                    ),
                );
            }
            // Dependencies between ops; not a GPU op's launch (from its enqueue to its kernel).
            Some(phase @ ("s" | "f")) if event["cat"] == "dependency" => {
                let pair = flows.entry(event["id"].as_u64().unwrap()).or_default();
                pair[usize::from(phase == "f")] = (tid, micros(&event["ts"]));
            }
            _ => {}
        }
    }
    (
        slices,
        flows.into_values().map(|[from, to]| (from, to)).collect(),
    )
}

/// Ops that a loop places by its counter (`with gpu = j`) tell that counter in their labels,
/// also when the statement reads none and two iterations place it alike (`gpu = j * 0`, where
/// an op kept from the first iteration would keep its label).
#[test]
fn ops_placed_by_a_loop_counter_tell_it_in_their_labels() {
    let dir = TestDir::new();
    dir.write(
        "placed.dep",
        "for j in 0..2 {\n  with gpu = j { y = ones(2) }\n}\nfor k in 0..3 {\n  with gpu = k * 0 { z = ones(2) }\n}\n",
    );
    run_sim(&dir, "placed.dep", &["--trace", "t.json"]);
    let (slices, _) = read_trace(&std::fs::read_to_string(dir.path().join("t.json")).unwrap());
    let mut names: Vec<String> = slices.into_values().map(|(_, name)| name).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "y = ones(2) j=0",
            "y = ones(2) j=1",
            "z = ones(2) k=0",
            "z = ones(2) k=1",
            "z = ones(2) k=2"
        ],
    );
}

#[test]
fn a_simulated_run_is_the_same_every_time_and_never_starts_an_op_before_its_producers_end() {
    let dir = TestDir::new();
    for lesson in LESSONS {
        let script = repo_root().join("samples").join(format!("{lesson}.dep"));
        run_sim(&dir, script.to_str().unwrap(), &["--trace", "first.json"]);
        run_sim(&dir, script.to_str().unwrap(), &["--trace", "second.json"]);
        let first = std::fs::read_to_string(dir.path().join("first.json")).unwrap();
        let second = std::fs::read_to_string(dir.path().join("second.json")).unwrap();
        assert!(first == second, "{lesson}: two runs gave different traces");
        let (slices, flows) = read_trace(&first);
        assert!(!flows.is_empty(), "{lesson}: no dependency in the trace");
        for (from, to) in flows {
            let (duration, producer) = &slices[&from];
            let (_, consumer) = &slices[&to];
            assert!(
                to.1 >= from.1 + duration,
                "{lesson}: `{consumer}` starts at {} before `{producer}` ends at {}",
                to.1,
                from.1 + duration
            );
        }
    }
}

#[test]
fn the_gpipe_bubble_is_n_minus_1_over_m_plus_n_minus_1() {
    let dir = TestDir::new();
    for (m, n) in [(1, 2), (2, 2), (4, 3), (8, 3), (3, 5), (16, 4)] {
        let script = format!(
            "device gpu = sim(latency_us=0, streams=1)\nx = slots({m})\nfor i in 0..{m} {{ set(x, i, ones(64)) }}\nwait\nstart = clock()\n\
             for i, j in clock_cycles({m}, {n}) {{\n  with gpu = j {{ set(x, i, work(10, x[i] + 1)) }}\n}}\nwait\nprint clock() - start\n"
        );
        dir.write("gpipe.dep", &script);
        let run = run_sim(&dir, "gpipe.dep", &[]);
        let makespan: f64 = run.stdout.trim().parse().unwrap();
        // Each device is busy m stages of 10 ms out of the makespan, so the bubble
        // (makespan - 10 m) / makespan equals (n-1)/(m+n-1) exactly when the makespan is
        // exactly 10 (m+n-1) ms.
        assert_eq!(makespan, 10.0 * (m + n - 1) as f64, "m = {m}, n = {n}");
    }
}

#[test]
fn critical_path_priorities_shorten_the_parameter_server_iteration() {
    let dir = TestDir::new();
    let script = repo_root().join("samples/priorities.dep");
    let run = run_sim(&dir, script.to_str().unwrap(), &[]);
    let iteration = |prefix: &str| -> f64 {
        let line = run
            .stdout
            .lines()
            .find(|line| line.starts_with(prefix))
            .unwrap();
        line.split_whitespace()
            .nth(prefix.split_whitespace().count())
            .unwrap()
            .parse()
            .unwrap()
    };
    let arbitrary = iteration("arbitrary order: iteration");
    let ranked = iteration("critical-path priorities: iteration");
    assert!(
        ranked < arbitrary,
        "{ranked} is not shorter than {arbitrary}\n{}",
        run.stdout
    );
}

#[test]
fn a_script_that_names_a_gpu_runs_on_sim_and_says_how_on_a_machine_without_one() {
    let dir = TestDir::new();
    dir.write("gpu.dep", "with gpu0 {\n  A = ones(2) + 1\n}\nprint A\n");
    let run = Run::of(
        dir.dep()
            .args(["run", "gpu.dep"])
            .env("DEP_GPU_DISABLE", "1"),
    )
    .expect_code(1);
    assert!(
        run.stderr
            .contains("`gpu0` is not available: this machine has 0 GPUs"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--engine sim"), "{}", run.stderr);
    assert!(run.stderr.contains("--> gpu.dep:1:6"), "{}", run.stderr);
    let run = run_sim(&dir, "gpu.dep", &[]);
    assert_eq!(run.stdout, "[2. 2.]\n");
    // The summary's memory line counts the simulated GPU's tensors, which live in this
    // process's memory, and says so (it said `cpu peak` alone).
    let run = run_sim(&dir, "gpu.dep", &["--summary"]);
    assert!(
        run.stderr
            .contains("memory (with the simulated devices' tensors): cpu peak 16 B"),
        "{}",
        run.stderr
    );
}

/// A copy to another simulated device takes memory there, as on a real one: four 4 MiB tensors
/// live at the end of the first part (on the CPU, gpu0, gpu1 and the CPU again), 16 MiB, where
/// the copies shared their source's buffer and the line said 4 MiB. A copy to where the value
/// already is (`E`) takes nothing more, and a copy of a value computed for it alone (`F`, 1 MiB)
/// only the value's own buffer: 17 MiB at the end, and at the peak.
#[test]
fn copies_to_simulated_devices_take_memory_of_their_own() {
    let dir = TestDir::new();
    dir.write(
        "copies.dep",
        "A = ones(1024, 1024)\nwait\nt0 = clock()\nwith gpu0 { B = to(A, gpu0) }\nC = to(B, gpu1)\nD = to(C, cpu)\nwait\nprint clock() - t0\nE = to(D, cpu)\nF = to(ones(256, 1024) * 2, gpu1)\n",
    );
    let run = run_sim(&dir, "copies.dep", &["--summary"]);
    assert!(
        run.stderr.contains(
            "memory (with the simulated devices' tensors): cpu peak 17.0 MiB, 17.0 MiB in use at the end, "
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn a_wait_waits_for_the_writes_of_its_variable_not_for_the_reads_still_running() {
    let dir = TestDir::new();
    // `print A` while a long op only reads A returns at once on the real engines (a wait is a
    // read); before the fix the simulated clock went on until the read ended, at 500 ms.
    dir.write(
        "reads.dep",
        "A = ones(2)\nB = work(500, A)\nprint A\nprint clock()\nprint B\nprint clock()\n",
    );
    let run = run_sim(&dir, "reads.dep", &[]);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let clock = |index: usize| -> f64 { lines[index].parse().unwrap() };
    assert_eq!(lines[0], "[1. 1.]", "{}", run.stdout);
    assert!(
        clock(1) < 1.0,
        "print A waited for the read:\n{}",
        run.stdout
    );
    assert_eq!(lines[2], "[1. 1.]", "{}", run.stdout);
    assert!(
        clock(3) >= 500.0,
        "print B did not wait for B:\n{}",
        run.stdout
    );
}

/// A host wait is a CPU consumer of the kernels it waits for: `print c` after a chain of
/// kernels shows `wait c` on the host until c's kernel ends, so the critical path and the busy
/// time say where the run's time went. Before the fix `wait c` ended at c's launch (16 µs) and
/// the summary gave a 16 µs critical path in a 306 µs run that was one dependency chain.
#[test]
fn a_wait_for_a_kernels_result_lasts_until_the_kernel_ends() {
    let dir = TestDir::new();
    dir.write(
        "kernels.dep",
        "device gpu0 = sim(launch_us=5, latency_us=0, streams=1)\nx = ones(4)\nwait\nwith gpu0 {\n  a = work(0.1, x)\n  b = work(0.1, a)\n  c = work(0.1, b)\n}\nprint c\n",
    );
    let run = run_sim(&dir, "kernels.dep", &["--summary", "--trace", "t.json"]);
    let trace = std::fs::read_to_string(dir.path().join("t.json")).unwrap();
    let (slices, _) = read_trace(&trace);
    // x takes 1 µs, then three launches of 5 µs; the kernels run back to back from 6 µs.
    let wait = slices
        .iter()
        .find(|(_, (_, name))| name == "wait c")
        .map(|((_, start), (duration, _))| (*start, *duration))
        .expect("a `wait c` slice");
    assert_eq!(wait, (16_001, 290_000), "{trace}");
    assert!(
        run.stderr.contains("critical path: 0.31 ms over 5 ops"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("parallelism: 1.00"), "{}", run.stderr);
}

/// Without a host wait, a chain of kernels is still the critical path: device ops count the
/// longer of their launch and their kernels, so the path is the 0.3 ms of kernels, not the
/// 16 µs of launches the summary gave before; `dep replay` of its trace, the DOT and the
/// timeline agree (the timeline outlined the launches on the worker's lane, 5 µs each of the
/// path's 0.3 ms, and not the kernels, which are its time).
#[test]
fn a_chain_of_kernels_no_host_op_waits_for_is_the_critical_path() {
    let dir = TestDir::new();
    dir.write(
        "kernels.dep",
        "device gpu0 = sim(launch_us=5, latency_us=0, streams=1)\nx = ones(4)\nwait\nwith gpu0 {\n  a = work(0.1, x)\n  b = work(0.1, a)\n  c = work(0.1, b)\n}\n",
    );
    let path = "critical path: 0.30 ms over 4 ops: x = ones(4) (line 2) → a = work(0.1, x) (line 5) →\n  b = work(0.1, a) (line 6) → c = work(0.1, b) (line 7)\n";
    let run = run_sim(
        &dir,
        "kernels.dep",
        &[
            "--summary",
            "--trace",
            "t.json",
            "--dot",
            "g.dot",
            "--timeline",
            "t.svg",
        ],
    );
    assert!(run.stderr.contains(path), "{}", run.stderr);
    // The kernels' bars on the device lane carry the path: each is outlined, not its launch.
    let svg = std::fs::read_to_string(dir.path().join("t.svg")).unwrap();
    let outlined: Vec<String> = svg
        .lines()
        .filter(|line| line.starts_with("<g><title>") && line.contains(r##"stroke="#c2410c""##))
        .map(|line| {
            let title = line["<g><title>".len()..].split(" from ").next().unwrap();
            // A kernels' bar then says how long after its enqueue they ran.
            title
                .rsplit_once(", ")
                .map_or(title, |(head, _)| head)
                .to_string()
        })
        .collect();
    assert_eq!(
        outlined,
        [
            "a = work(0.1, x) (line 5) · done · kernels on dev:gpu0:s0",
            "b = work(0.1, a) (line 6) · done · kernels on dev:gpu0:s0",
            "c = work(0.1, b) (line 7) · done · kernels on dev:gpu0:s0"
        ],
        "{svg}"
    );
    let replayed = Run::of(dir.dep().args(["replay", "t.json", "--end"])).expect_code(0);
    assert!(
        replayed.stdout.contains(path) || replayed.stderr.contains(path),
        "{}{}",
        replayed.stdout,
        replayed.stderr
    );
    let dot = std::fs::read_to_string(dir.path().join("g.dot")).unwrap();
    let on_path = dot
        .lines()
        .filter(|line| {
            line.starts_with("  op") && !line.contains("->") && line.contains("penwidth")
        })
        .count();
    assert_eq!(on_path, 4, "{dot}");
}

/// The cost model charges an op the bytes it reads and writes and a copy the bytes it moves
/// (latency + max(flops / flop/s, bytes / bytes/s)): 4 MB made on the CPU (20 GB/s, 1 µs) take
/// 201 µs, copied over PCIe (25 GB/s, 10 µs) 170 µs; `work(ms)` takes exactly its time. A
/// slice copies what it selects (2 MB of G read and written: 201 µs) and a tensor literal its
/// elements, as every op (both were charged nothing: 1 µs, the latency alone).
#[test]
fn simulated_ops_are_charged_the_bytes_they_move() {
    let dir = TestDir::new();
    let script = dir.write(
        "bytes.dep",
        "G = ones(1000000)\nK = to(G, gpu0)\nS = sum(G)\nW = work(2, G)\nT = G[0:500000]\nL = [G[0:250000], G[250000:500000]]\nwait\n",
    );
    run_sim(&dir, script.to_str().unwrap(), &["--trace", "t.json"]);
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("t.json")).unwrap()).unwrap();
    let durations: HashMap<String, f64> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["ph"] == "X")
        .map(|slice| {
            let name = slice["name"].as_str().unwrap().to_string();
            (name, slice["dur"].as_f64().unwrap())
        })
        .collect();
    assert_eq!(durations["G = ones(1000000)"], 201.0, "{durations:?}");
    assert_eq!(durations["K = to(G, gpu0)"], 170.0, "{durations:?}");
    assert_eq!(durations["S = sum(G)"], 201.0, "{durations:?}");
    assert_eq!(durations["W = work(2, G)"], 2001.0, "{durations:?}");
    assert_eq!(durations["T = G[0:500000]"], 201.0, "{durations:?}");
    // Its two slices (2 MB read and written), then its 2 MB of elements read and written.
    assert_eq!(
        durations["L = [G[0:250000], G[250000:500000]]"], 401.0,
        "{durations:?}"
    );
}

/// A simulated device's fields are bounded so that every duration fits the virtual clock: a
/// value out of range is an error naming the field and its range (a huge latency stopped the
/// clock, a tiny flop rate wrapped to no time at all, `streams=0` was "an unknown field").
#[test]
fn a_device_field_out_of_range_is_an_error_at_its_value() {
    let dir = TestDir::new();
    for (field, message) in [
        (
            "tflops=1e-16",
            "tflops must be a number from 0.000001 to 1000000",
        ),
        (
            "latency_us=1e17",
            "latency_us must be a number from 0 to 1000000000",
        ),
        (
            "streams=0",
            "streams must be a whole number from 1 to 64, got 0",
        ),
        ("sync=2", "sync must be a whole number from 0 to 1, got 2"),
        (
            "gbps=0",
            "gbps must be a number from 0.000001 to 1000000, got 0",
        ),
    ] {
        let script = dir.write(
            "device.dep",
            &format!("device gpu1 = sim({field})\nwith gpu1 {{ A = ones(2) }}\nprint A\n"),
        );
        let run = Run::of(dir.dep().arg("run").arg(&script).args([
            "--engine",
            "sim",
            "--timeline",
            "t.svg",
        ]))
        .expect_code(1);
        assert!(run.stderr.contains(message), "{field}: {}", run.stderr);
        assert!(
            run.stderr.contains("device.dep:1:"),
            "{field}: {}",
            run.stderr
        );
    }
}

/// The queues of a simulated run of `script`, as `dep replay` shows them once every event at
/// the virtual time `writer`'s op ends has been folded: each access of the op labelled
/// `reader`, by variable name, with whether it is granted, and the variables the op still
/// waits for.
fn accesses_when_writer_ends(
    script: &str,
    writer: &str,
    reader: &str,
) -> (Vec<(String, bool)>, Vec<String>) {
    let dir = TestDir::new();
    dir.write("grants.dep", script);
    run_sim(&dir, "grants.dep", &["--trace", "t.json"]);
    let text = std::fs::read_to_string(dir.path().join("t.json")).unwrap();
    let replay = dep_views::trace::read_trace(&text).unwrap();
    let id_of = |label: &str| {
        replay
            .ops()
            .iter()
            .find(|op| &*op.label == label)
            .unwrap_or_else(|| panic!("no op `{label}`"))
            .id
    };
    let (writer, reader) = (id_of(writer), id_of(reader));
    let ended = replay.op(writer).unwrap().finished_ns.unwrap();
    // Simulated events come in virtual-time order: the step after the last one at `ended`.
    let step = replay
        .events()
        .iter()
        .take_while(|event| event.time_ns <= ended)
        .count();
    let frame = replay.frame_at(step);
    let name = |var| replay.var_name(var).to_string();
    let mut accesses = Vec::new();
    for var in &frame.vars {
        for access in var.queue.iter().filter(|access| access.op == reader) {
            accesses.push((name(var.id), access.granted));
        }
    }
    accesses.sort();
    let op = frame.ops.iter().find(|op| op.id == reader).unwrap();
    let waits_on = op
        .waits_on
        .iter()
        .map(|blocker| name(blocker.var))
        .collect();
    (accesses, waits_on)
}

/// An access is granted when the accesses ahead of it on its variable end, as on the real
/// engines, not when the op's last access is: once C's writer has ended (10 ms), `D = A + C`
/// holds C and D and waits for A alone. Before the fix `dep replay` showed C's read and D's
/// write waiting, with nothing ahead of them, until A's writer ended (20 ms).
#[test]
fn a_simulated_access_is_granted_when_the_accesses_ahead_of_it_end() {
    let (accesses, waits_on) = accesses_when_writer_ends(
        "A = work(20, ones(2))\nC = work(10, ones(2))\nD = A + C\nprint D\n",
        "C = work(10, ones(2))",
        "D = A + C",
    );
    let expected =
        [("A", false), ("C", true), ("D", true)].map(|(var, granted)| (var.to_string(), granted));
    assert_eq!(accesses, expected);
    assert_eq!(waits_on, ["A"]);
    // Write after read: once C's writer has ended (30 ms), `A = C * 2` holds C and waits to
    // write A until `B = work(30, A)` has read it (50 ms); its read of C waited until then.
    let (accesses, waits_on) = accesses_when_writer_ends(
        "A = work(20, ones(2))\nB = work(30, A)\nC = work(30, ones(2))\nA = C * 2\nprint A\n",
        "C = work(30, ones(2))",
        "A = C * 2",
    );
    let expected = [("A", false), ("C", true)].map(|(var, granted)| (var.to_string(), granted));
    assert_eq!(accesses, expected);
    assert_eq!(waits_on, ["A"]);
}
