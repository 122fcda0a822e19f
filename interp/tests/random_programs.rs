//! The property test of the whole language: random well-typed programs (rebinding, in-place
//! updates, `del`, loops, functions, random ops after `seed`) save bit-identical results on the
//! naive engine, on the threaded engine with 1, 2, 4 and 8 threads, and on the simulated one;
//! and the same programs placed all on gpu0 or in mixed runs of `with gpu0 { ... }` blocks are
//! valid programs that save the same bits under the simulated engine (where a GPU computes on
//! the host with the CPU's kernels). The generator is shared (`common/random_program.rs`) with
//! the test on a real GPU in `gpu.rs`.
//!
//! Programs with failures (`common/failing_program.rs`: shape mismatches, missing files,
//! out-of-range indices among updates, rebinding, `del`, loops, functions, graph replays and
//! bulks) print, report (statement and message) and save the same on every policy as on the
//! naive engine, and the naive engine's run is the one a serial reference interpreter of the
//! language's error rules gives (`common/reference.rs`).
//!
//! Programs of `work(ms, ...)` ops and waits (`common/timed_program.rs`) show the same order of
//! wait returns and op ends on the simulated engine as on the threaded one.

mod common;

use common::failing_program::{failing_program, run_failing, Stmt};
use common::random_program::{random_program, run, Placement};
use common::timed_program::{timed_program, timeline, MS_STEP};
use dep_engine::Policy;

#[test]
fn random_programs_save_the_same_bits_on_every_engine() {
    for seed in common::seeds(0..25) {
        let program = random_program(seed, Placement::Cpu);
        let reference_dir = tempfile::tempdir().unwrap();
        let reference = run(&program, reference_dir.path(), Policy::Naive, 1);
        assert!(!reference.is_empty());
        let sim_dir = tempfile::tempdir().unwrap();
        let simulated = run(&program, sim_dir.path(), Policy::Sim, 2);
        assert!(
            simulated == reference,
            "program {seed} differs on the simulated engine:\n{program}"
        );
        for threads in [1, 2, 4, 8] {
            let dir = tempfile::tempdir().unwrap();
            let got = run(&program, dir.path(), Policy::Threaded, threads);
            assert!(
                got == reference,
                "program {seed} differs on threaded/{threads}:\n{program}"
            );
        }
    }
}

#[test]
fn random_programs_placed_on_simulated_gpus_save_the_cpus_bits() {
    for seed in common::seeds(0..25) {
        let cpu = random_program(seed, Placement::Cpu);
        let reference_dir = tempfile::tempdir().unwrap();
        let reference = run(&cpu, reference_dir.path(), Policy::Naive, 1);
        let on_gpu = random_program(seed, Placement::Gpu0);
        let mixed = random_program(seed, Placement::Mixed(seed));
        // Placement only wraps statements: the same statements, in the same order (the closing
        // braces of `def` and `for` bodies are left out on both sides alike).
        let statements = |program: &str| -> Vec<String> {
            program
                .lines()
                .filter(|line| *line != "with gpu0 {" && *line != "}")
                .map(str::to_string)
                .collect()
        };
        for placed in [&on_gpu, &mixed] {
            assert!(placed.contains("with gpu0 {\n"), "{placed}");
            assert_eq!(statements(placed), statements(&cpu), "{placed}");
        }
        assert_ne!(
            on_gpu, mixed,
            "program {seed}: the mixed placement is all on gpu0"
        );
        for placement in [Placement::Gpu0, Placement::Mixed(seed)] {
            let program = random_program(seed, placement);
            let dir = tempfile::tempdir().unwrap();
            let got = run(&program, dir.path(), Policy::Sim, 2);
            assert!(
                got == reference,
                "program {seed} placed {} differs on the simulated engine:\n{program}",
                placement.name()
            );
        }
    }
}

/// Every policy the failing programs run on, with its thread count.
const POLICIES: &[(Policy, usize)] = &[
    (Policy::Threaded, 1),
    (Policy::Threaded, 2),
    (Policy::Threaded, 4),
    (Policy::Threaded, 8),
    (Policy::PerDevice, 2),
    (Policy::Sim, 2),
];

#[test]
fn programs_with_failures_print_report_and_save_what_the_reference_says_on_every_engine() {
    // How many prints and saves showed a value, and how many reported an error instead.
    let (mut shown, mut failed) = (0, 0);
    // How many programs assign a function's two values to two names.
    let (mut with_two_values, mut n_programs) = (0, 0);
    // 5091 prints a 0-d value in a sentence (`print "a", a[0]` with `a` of one dimension),
    // which the reference once printed with every digit; 1558 fails three times at one
    // statement of a loop, the first time with another message than the last two (a shape
    // that changed), which the run tells in one report and this test once compared as three
    // failures with the first's message.
    for seed in common::seeds(0..80).chain([5091, 1558]) {
        let program = failing_program(seed);
        with_two_values += usize::from(program.to_string().contains(" = pair("));
        n_programs += 1;
        let dir = tempfile::tempdir().unwrap();
        let naive = run_failing(&program, dir.path(), Policy::Naive, 1);
        let reference_dir = tempfile::tempdir().unwrap();
        if let Err(difference) = common::reference::check(&program, &naive, reference_dir.path()) {
            panic!("program {seed} on the naive engine differs from the reference: {difference}\n{program}");
        }
        for &(policy, threads) in POLICIES {
            let dir = tempfile::tempdir().unwrap();
            let got = run_failing(&program, dir.path(), policy, threads);
            if let Some(difference) = got.difference(&naive) {
                panic!("program {seed} on {policy}/{threads} differs from the naive engine: {difference}\n{program}");
            }
        }
        for (line, (_, reports)) in program.statements.iter().zip(&naive.statements) {
            if matches!(line.stmt, Stmt::Print(_) | Stmt::Save(..)) {
                if reports.is_empty() {
                    shown += 1;
                } else {
                    failed += 1;
                }
            }
        }
    }
    assert!(
        with_two_values * 4 > n_programs,
        "{with_two_values} of {n_programs} programs call `pair`"
    );
    // Errors are common but do not take over: a plain write of a new value clears them.
    assert!(
        shown * 4 > shown + failed && failed * 4 > shown + failed,
        "{shown} prints and saves showed a value, {failed} reported an error"
    );
}

#[test]
fn the_simulator_waits_as_the_threaded_engine_does() {
    for seed in common::seeds(0..6) {
        let program = timed_program(seed);
        let simulated = timeline(&program, Policy::Sim);
        let threaded = timeline(&program, Policy::Threaded);
        // Every wait's return and every op's end, with its time on each engine.
        let mut events: Vec<(String, f64, f64)> = Vec::new();
        let waits = program
            .iter()
            .filter(|line| line.starts_with("print") || *line == "wait");
        for (index, line) in waits.enumerate() {
            events.push((
                format!("`{line}` (wait {index}) returns"),
                simulated.waits[index],
                threaded.waits[index],
            ));
        }
        for (line, end) in &simulated.ends {
            let text = &program[*line as usize - 1];
            events.push((format!("`{text}` ends"), *end, threaded.ends[line]));
        }
        // Events of the simulated run are at one time or at least MS_STEP apart; the threaded
        // engine runs late by scheduling delays, far less than MS_STEP / 2 apart along two
        // chains of at most a few ops. Events at one simulated time may come in either order.
        for (first, first_sim, first_real) in &events {
            for (second, second_sim, second_real) in &events {
                if second_sim - first_sim >= MS_STEP / 2.0 {
                    assert!(
                        first_real < second_real,
                        "program {seed}: {first} before {second} on the simulated engine \
                         ({first_sim} ms, {second_sim} ms), after it on the threaded one \
                         ({first_real} ms, {second_real} ms)\n{}",
                        program.join("\n")
                    );
                }
            }
        }
    }
}
