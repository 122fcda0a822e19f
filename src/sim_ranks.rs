//! Simulated ranks: `dep run FILE --engine sim --ranks N` runs the script as N ranks of one
//! process, each a session of its own, on its own thread, under the simulated engine, talking
//! through `LocalRanks`. Values are computed for real, so the ranks print what an MPI run
//! prints; each rank's communications take their time on its `net` lane (the link model
//! `device net = sim(gbps=..., latency_us=...)`).
//!
//! Rank 0 runs on the main thread, with the views; the other ranks' output is kept and written
//! after rank 0's (only with `--all-ranks`, as under mpirun), then their errors. A rank that
//! fails ends the job: the communications of the others fail at once instead of waiting.

use std::io::Write;
use std::sync::Arc;
use std::thread::JoinHandle;

use dep_interp::comm::LocalRanks;
use dep_interp::{Session, SessionConfig};

use crate::ranks::RankOutput;

/// What one of ranks 1..N ended with.
pub(crate) struct Outcome {
    /// What it recorded, when views were asked for.
    pub(crate) run: Option<dep_views::ranks::RankRun>,
    stdout: Vec<u8>,
    /// Its errors, rendered with its rank.
    errors: String,
    code: u8,
}

/// Ranks 1..N, running on their threads.
pub(crate) struct OtherRanks {
    threads: Vec<JoinHandle<Outcome>>,
}

impl OtherRanks {
    /// Starts ranks 1.. of `comms` on threads, each running `source` (named `path`) in a
    /// session like `config` (observed when it is: their events go to rank 0's views).
    pub(crate) fn start(
        comms: &[Arc<LocalRanks>],
        config: &SessionConfig,
        path: &str,
        source: &str,
        all_ranks: bool,
    ) -> OtherRanks {
        let size = comms.len();
        let threads = comms
            .iter()
            .enumerate()
            .skip(1)
            .map(|(rank, comm)| {
                let (comm, path, source) = (comm.clone(), path.to_string(), source.to_string());
                let config = config.clone();
                std::thread::Builder::new()
                    .name(format!("dep-rank{rank}"))
                    .spawn(move || run_rank(comm, config, &path, &source, size, all_ranks))
                    .expect("spawning a simulated rank's thread")
            })
            .collect();
        OtherRanks { threads }
    }

    /// Waits for every rank; returns what each ended with, in rank order.
    pub(crate) fn wait(self) -> Vec<Outcome> {
        self.threads
            .into_iter()
            .map(|thread| {
                thread.join().unwrap_or_else(|_| Outcome {
                    run: None,
                    stdout: Vec::new(),
                    errors: "error: a simulated rank's thread panicked".to_string(),
                    code: 1,
                })
            })
            .collect()
    }

    /// Writes the ranks' output (in rank order) and their errors; returns the job's exit code,
    /// given rank 0's.
    pub(crate) fn report(outcomes: Vec<Outcome>, rank0_code: u8) -> u8 {
        let mut code = rank0_code;
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        for outcome in &outcomes {
            let _ = out.write_all(&outcome.stdout);
        }
        let _ = out.flush();
        for outcome in outcomes {
            if !outcome.errors.is_empty() {
                eprintln!("{}", outcome.errors);
            }
            code = code.max(outcome.code);
        }
        code
    }
}

/// Runs one simulated rank to its end.
fn run_rank(
    comm: Arc<LocalRanks>,
    config: SessionConfig,
    path: &str,
    source: &str,
    size: usize,
    all_ranks: bool,
) -> Outcome {
    let rank = dep_interp::comm::Communicator::rank(comm.as_ref());
    let observed = config.observe;
    let mut session = Session::new(config);
    session.set_communicator(comm.clone());
    let mut out = RankOutput::new(Vec::new(), rank, size, all_ranks);
    let pushed = session.run_source(path, source, &mut out);
    let finished = session.finish();
    let mut errors = Vec::new();
    let mut code = 0;
    for error in [pushed.err(), finished.err()].into_iter().flatten() {
        code = match error.kind {
            dep_interp::ErrorKind::Parse => 2,
            _ => 1,
        };
        errors.push(crate::ranks::label_rank_error(
            &error.to_string(),
            rank,
            size,
        ));
    }
    if code != 0 {
        comm.end_job(format!("rank {rank} failed"));
    }
    Outcome {
        run: observed.then(|| crate::rank_views::recorded(&session, rank, None)),
        stdout: out.into_inner(),
        errors: errors.join("\n"),
        code,
    }
}
