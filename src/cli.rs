//! Command-line arguments, parsed by clap, then validated into the session's configuration.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use dep_engine as engine;
use dep_interp::SessionConfig;

/// dep: a small tensor language run by an asynchronous dependency engine.
#[derive(Parser, Debug)]
#[command(
    name = "dep",
    version,
    about,
    long_about = None,
    after_help = "With no command, dep opens its REPL: each statement runs as it is entered, \
                  the live queues and ops under the prompt (:help lists its commands)."
)]
pub(crate) struct Cli {
    /// With no command, dep opens an interactive REPL.
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

/// What to do.
#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Run a .dep script.
    Run(RunArgs),
    /// Parse a .dep script and report every syntax error, without running it.
    Check {
        /// The script.
        file: PathBuf,
    },
    /// Step through a run recorded with `dep run --trace FILE.json` (keys: → n forward, ← p back, PgDn/PgUp 100 steps, Home/End, q quit).
    Replay(ReplayArgs),
    /// Run the Jupyter kernel (Jupyter starts it), or install its kernelspec.
    Kernel(KernelArgs),
}

/// Arguments of `dep kernel`.
#[derive(Args, Debug)]
pub(crate) struct KernelArgs {
    /// What to do instead of running the kernel.
    #[command(subcommand)]
    pub(crate) action: Option<KernelAction>,
    /// The connection file Jupyter writes for the kernel
    #[arg(long, value_name = "FILE")]
    pub(crate) connection_file: Option<PathBuf>,
}

/// `dep kernel` subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum KernelAction {
    /// Install the kernelspec so that Jupyter lists the dep kernel (default: --user).
    Install(KernelInstallArgs),
}

/// Where `dep kernel install` writes the kernelspec, as `jupyter kernelspec install` says it.
#[derive(Args, Debug)]
#[group(multiple = false)]
pub(crate) struct KernelInstallArgs {
    /// In the user's Jupyter data directory (the default)
    #[arg(long)]
    pub(crate) user: bool,
    /// In the active Python environment's prefix
    #[arg(long)]
    pub(crate) sys_prefix: bool,
    /// In DIR/share/jupyter/kernels/dep
    #[arg(long, value_name = "DIR")]
    pub(crate) prefix: Option<PathBuf>,
}

/// How many events a `--replay` page holds by default: about 70 MB of page, which a browser
/// parses in a few seconds (a page of every event of a run of millions of ops would be a
/// gigabyte, more than a browser holds as one string).
pub(crate) const DEFAULT_REPLAY_EVENTS: usize = 1_000_000;

/// Arguments of `dep run`.
#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// The script.
    pub(crate) file: PathBuf,
    /// The engine policy: naive (serial), threaded, per-device, sim (simulated devices, virtual clock) [env: DEP_ENGINE]
    #[arg(long)]
    pub(crate) engine: Option<String>,
    /// Worker threads of the CPU pool [env: DEP_THREADS]
    #[arg(long)]
    pub(crate) threads: Option<String>,
    /// Write a trace while the run goes: Chrome JSON (opens in Perfetto; `dep replay` steps through it), or Perfetto's protobuf when FILE ends in .pftrace (may be given twice)
    #[arg(long, value_name = "FILE.json|FILE.pftrace")]
    pub(crate) trace: Vec<PathBuf>,
    /// Write the timeline (one lane per worker, critical path outlined) as SVG
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) timeline: Option<PathBuf>,
    /// Draw dependency arrows on the --timeline (one per pair of bars drawn, counting the dependencies it stands for)
    #[arg(long, requires = "timeline")]
    pub(crate) arrows: bool,
    /// Write the op DAG as Graphviz DOT, or as SVG when FILE ends in .svg (its last 200 ops; needs Graphviz)
    #[arg(long, value_name = "FILE.dot")]
    pub(crate) dot: Option<PathBuf>,
    /// Write a self-contained HTML player that steps through the run's events (its last --replay-events of them)
    #[arg(long, value_name = "FILE.html")]
    pub(crate) replay: Option<PathBuf>,
    /// How many of the run's last events the --replay page holds: it starts from the state the earlier ones left (0: every event)
    #[arg(long, value_name = "N", requires = "replay", default_value_t = DEFAULT_REPLAY_EVENTS)]
    pub(crate) replay_events: usize,
    /// Show the live queues and ops on stderr while the script runs
    #[arg(long)]
    pub(crate) watch: bool,
    /// Print a summary of the schedule to stderr at the end (implied by every view flag)
    #[arg(long)]
    pub(crate) summary: bool,
    /// Under mpirun or --ranks: every rank prints, each line prefixed `[rN]` (by default only rank 0 prints)
    #[arg(long)]
    pub(crate) all_ranks: bool,
    /// Run N simulated ranks in this process (with --engine sim); real ranks come from mpirun -n N
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) ranks: Option<u16>,
}

impl RunArgs {
    /// The session configuration: flags first, then `DEP_ENGINE` / `DEP_THREADS`, then defaults.
    pub(crate) fn session_config(&self) -> Result<SessionConfig, String> {
        let from_env = engine::EngineConfig::from_env()?;
        dep_interp::comm::timeout_from_env()?;
        let policy = match &self.engine {
            Some(name) => name
                .parse::<engine::Policy>()
                .map_err(|error| format!("--engine: {error}"))?,
            None => from_env.policy,
        };
        let threads = match &self.threads {
            Some(text) => {
                engine::parse_threads(text).map_err(|error| format!("--threads: {error}"))?
            }
            None => from_env.threads,
        };
        Ok(SessionConfig {
            policy,
            threads,
            observe: self.wants_views(),
            lean_log: self.wants_lean_log(),
            batch: true,
            ..SessionConfig::default()
        })
    }

    /// Whether the user chose the CPU workers' count (`--threads`, or `DEP_THREADS`).
    pub(crate) fn threads_chosen(&self) -> bool {
        self.threads.is_some() || std::env::var_os("DEP_THREADS").is_some()
    }

    /// Whether no view of the run reads the grants that come after a push: its views are the
    /// summary and Perfetto traces (neither reads them), in one process. Its event log then
    /// drops them.
    pub(crate) fn wants_lean_log(&self) -> bool {
        self.wants_views()
            && self
                .trace
                .iter()
                .all(|path| crate::trace_files::is_perfetto(path))
            && self.timeline.is_none()
            && self.dot.is_none()
            && self.replay.is_none()
            && !self.watch
            && self.ranks.is_none()
            && crate::ranks::launched_size().is_none()
    }

    /// Whether any view flag asks for the engine's events.
    pub(crate) fn wants_views(&self) -> bool {
        !self.trace.is_empty()
            || self.timeline.is_some()
            || self.dot.is_some()
            || self.replay.is_some()
            || self.watch
            || self.summary
    }
}

/// Arguments of `dep replay`.
#[derive(Args, Debug)]
pub(crate) struct ReplayArgs {
    /// A trace written by `dep run --trace`.
    pub(crate) file: PathBuf,
    /// Print only the state after the last event, then the run's summary, instead of stepping
    #[arg(long)]
    pub(crate) end: bool,
    /// Read only the run's last N events (from the state the earlier ones left), in the memory of those: for a trace too long to hold whole
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) last: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(args: &[&str]) -> RunArgs {
        let cli = Cli::try_parse_from(["dep", "run", "x.dep"].iter().chain(args)).unwrap();
        match cli.command {
            Some(Command::Run(args)) => args,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn only_the_summary_and_perfetto_traces_get_the_lean_log() {
        for lean in [
            &["--summary"][..],
            &["--trace", "t.pftrace"],
            &[
                "--summary",
                "--trace",
                "a.pftrace",
                "--trace",
                "b.perfetto-trace",
            ],
        ] {
            assert!(run_args(lean).wants_lean_log(), "{lean:?}");
        }
        for other_view in [
            &["--summary", "--trace", "t.json"][..],
            &["--trace", "t.pftrace", "--trace", "t.json"],
            &["--summary", "--timeline", "t.svg"],
            &["--summary", "--dot", "g.dot"],
            &["--summary", "--replay", "r.html"],
            &["--summary", "--watch"],
            &["--summary", "--engine", "sim", "--ranks", "2"],
            &[],
        ] {
            assert!(!run_args(other_view).wants_lean_log(), "{other_view:?}");
        }
    }
}
