//! The property test of the whole language: random well-typed programs (rebinding, in-place
//! updates, `del`, loops, functions, random ops after `seed`) save bit-identical results on the
//! naive engine, on the threaded engine with 1, 2, 4 and 8 threads, and on the simulated one;
//! and the same programs placed all on gpu0 or in mixed runs of `with gpu0 { ... }` blocks are
//! valid programs that save the same bits under the simulated engine (where a GPU computes on
//! the host with the CPU's kernels). The generator is shared (`common/random_program.rs`) with
//! the test on a real GPU in `gpu.rs`.

mod common;

use common::random_program::{random_program, run, Placement};
use dep_engine::Policy;

#[test]
fn random_programs_save_the_same_bits_on_every_engine() {
    for seed in 0..25 {
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
    for seed in 0..25 {
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
