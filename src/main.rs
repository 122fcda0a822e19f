//! The `dep` binary: `dep run FILE` (batch), `dep check FILE` (parse only).
//!
//! The binary owns the final word: it prints errors with a `dep:` prefix where they have no
//! place of their own, and maps them to exit codes: 0 ok, 1 runtime error, 2 usage or parse error.

/// `std`'s `eprint!`, shadowed in this crate by one that shrugs off a closed stderr (`dep run
/// … 2>&1 | head -1`; `std`'s panics there): the run goes on, and its exit code still says how
/// it ended. Defined before the modules, so that every one of them uses it.
macro_rules! eprint {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

/// `std`'s `eprintln!`, shadowed as [`eprint!`] is.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod cli;
mod fresh_file;
mod kernel_cmd;
#[cfg(feature = "mpi")]
mod mpi_ranks;
mod output_file;
mod rank_views;
mod ranks;
mod repl;
mod run;
mod sim_ranks;
mod trace_apart;
mod trace_files;
mod views;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc rather than the system allocator: ops are allocated on the pushing thread and freed on
/// workers, and glibc's arenas serialise such cross-thread frees (seen in `perf` as most of the
/// engine's per-op cost under the threaded policy). Built without asking for transparent huge
/// pages (the `no_thp` feature): the first touch of a fresh 2 MiB page, zeroed whole, took 0.5-6
/// ms in a VM, paid inside whichever op first allocated from it (each worker's first op, which
/// a trace then showed taking milliseconds to make `ones(4)`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match args.command {
        Some(cli::Command::Run(run_args)) => run::run(&run_args),
        Some(cli::Command::Check { file }) => run::check(&file),
        Some(cli::Command::Replay(replay_args)) => views::replay(&replay_args),
        Some(cli::Command::Kernel(kernel_args)) => kernel_cmd::kernel(&kernel_args),
        None => repl::run(),
    }
}

#[cfg(test)]
mod tests {
    /// The allocator asks for no transparent huge pages: memory it hands out and that is then
    /// touched is mapped in 4 KiB pages, unless the system maps every region in huge pages
    /// (`always`), which no madvise can turn off.
    #[test]
    fn allocations_are_not_backed_by_huge_pages() {
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
        let Ok(mode) = mode else {
            eprintln!("skipped: no transparent huge pages on this system");
            return;
        };
        if mode.contains("[always]") {
            eprintln!("skipped: the system maps every region in huge pages ({mode})");
            return;
        }
        // Many mimalloc pages' worth of small and large blocks, each touched.
        let blocks: Vec<Vec<u8>> = (0..64).map(|size| vec![1u8; 4096 << (size % 12)]).collect();
        let huge_kb = huge_pages_kb();
        assert_eq!(huge_kb, 0, "{} blocks touched", blocks.len());
    }

    /// The kibibytes of this process's memory in transparent huge pages.
    fn huge_pages_kb() -> u64 {
        let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").expect("smaps_rollup");
        rollup
            .lines()
            .find_map(|line| line.strip_prefix("AnonHugePages:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("an AnonHugePages line")
    }
}
