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
mod trace_files;
mod views;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc rather than the system allocator: ops are allocated on the pushing thread and freed on
/// workers, and glibc's arenas serialise such cross-thread frees (seen in `perf` as most of the
/// engine's per-op cost under the threaded policy).
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
