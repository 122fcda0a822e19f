//! Simulated ranks: `dep run FILE --engine sim --ranks N` runs the script as N ranks of one
//! process, each a session of its own under the simulated engine, talking through `LocalRanks`.
//! Values are computed for real, so the ranks print what an MPI run prints; each rank's
//! communications take their time on its `net` lane (the link model
//! `device net = sim(gbps=..., latency_us=...)`).
//!
//! Rank 0 runs on the main thread, with the views; ranks 1..N are `dep_interp::comm::PeerRanks`,
//! sessions on threads each run through a driver of its own, as rank 0 is. Their output is
//! kept and written after rank 0's (only with `--all-ranks`, as under mpirun), then their
//! errors. A rank that fails ends the job: the communications of the others fail at once
//! instead of waiting.

use std::io::Write;
use std::sync::Arc;

use dep_interp::comm::{self, LocalRanks, PeerRanks, PeerReport};
use dep_interp::driver::Input;
use dep_interp::{RunError, SessionConfig};

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

/// Ranks 1..N, running the script on their threads.
pub(crate) struct OtherRanks {
    peers: PeerRanks,
    all_ranks: bool,
    observed: bool,
    /// What each rank reported after its statements ran and after its ops ended, once
    /// [`OtherRanks::settle`] waited for them.
    settled: Option<(Vec<PeerReport>, Vec<PeerReport>)>,
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
        let peers = PeerRanks::start(&comms[1..], config);
        peers.run(&Input::new(path, source));
        OtherRanks {
            peers,
            all_ranks,
            observed: config.observe,
            settled: None,
        }
    }

    /// Waits for every rank's statements and ops, keeping what each reported: their engines
    /// are then idle and their temporaries deleted, so that the process holds what the ranks
    /// keep at their end, whenever their threads ran (rank 0's memory line counts it).
    pub(crate) fn settle(&mut self) {
        if self.settled.is_none() {
            let ran = self.peers.ran(&|| 0);
            let waited = self.peers.wait_to_the_end(&|| 0);
            self.settled = Some((ran, waited));
        }
    }

    /// Waits for every rank's statements and ops ([`OtherRanks::settle`], if not yet); returns
    /// what each ended with, in rank order.
    pub(crate) fn wait(mut self) -> Vec<Outcome> {
        let size = self.peers.size();
        self.settle();
        let (ran, waited) = self.settled.take().expect("settled above");
        let observed = self.observed;
        let runs = self.peers.finish(move |session| {
            observed.then(|| crate::rank_views::recorded(session, session.rank(), None))
        });
        ran.into_iter()
            .zip(waited)
            .zip(runs)
            .map(|((ran, waited), run)| outcome(ran, waited, run, size, self.all_ranks))
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

/// What a rank ended with, from its reports after its statements ran and after its ops ended.
fn outcome(
    ran: PeerReport,
    waited: PeerReport,
    run: Option<dep_views::ranks::RankRun>,
    size: usize,
    all_ranks: bool,
) -> Outcome {
    let mut out = RankOutput::new(Vec::new(), ran.rank, size, all_ranks);
    let _ = out.write_all(&ran.output);
    let _ = out.write_all(&waited.output);
    let mut errors: Vec<_> = ran.errors.into_iter().chain(waited.errors).collect();
    let code = errors
        .iter()
        .map(|error| match error.kind {
            dep_interp::ErrorKind::Parse => 2,
            _ => 1,
        })
        .max()
        .unwrap_or(0);
    // A failure every rank saw alike is rank 0's to report, as under mpirun, and so is what it
    // led to here: this rank stopped where rank 0, failing, ended the job.
    let alike = |error: &RunError| comm::failed_on_every_rank(&error.to_string());
    if errors.iter().any(alike) {
        errors.retain(|error| !alike(error) && !comm::is_job_ended(&error.to_string()));
    }
    Outcome {
        run,
        stdout: out.into_inner(),
        errors: errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
        code,
    }
}
