//! The other ranks of a job simulated in this process (`dep run --engine sim --ranks N`, and
//! `:engine sim --ranks N` in the REPL or `%engine sim --ranks N` in the kernel): ranks 1..N,
//! each a session of its own on a thread, running every input rank 0 runs through a
//! [`Driver`] of its own, as rank 0 does. Rank 0's session holds them (`Session::set_peers`);
//! its driver hands them each input, and reports their errors with their rank.
//!
//! A rank whose input fails ends the job (`LocalRanks::end_job`): the communications of the
//! others fail at once instead of waiting for it, now and in later inputs.

use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use super::{Communicator, LocalRanks};
use crate::driver::{Driver, Input, Interrupt, Listener};
use crate::error::RunError;
use crate::session::{Session, SessionConfig};

/// What one peer rank did since it was last asked.
pub struct PeerReport {
    /// Its rank.
    pub rank: usize,
    /// What it printed.
    pub output: Vec<u8>,
    /// Its errors: a statement's, or the failures of its ops, each naming the rank.
    pub errors: Vec<RunError>,
}

/// Ranks 1..N of a simulated job, on their threads.
pub struct PeerRanks {
    peers: Vec<Peer>,
    /// What their sessions were made with, to start them again.
    config: SessionConfig,
}

struct Peer {
    rank: usize,
    comm: Arc<LocalRanks>,
    jobs: mpsc::Sender<Job>,
    reports: mpsc::Receiver<PeerReport>,
    interrupt: Interrupt,
    thread: Option<JoinHandle<()>>,
}

/// What a peer's thread is asked to do.
enum Job {
    /// Run an input; report once its statements are pushed (its ops may still run).
    Run {
        path: String,
        first_line: u32,
        source: String,
    },
    /// Wait for every op, in its final state, and report the failures; `to_the_end`: then let
    /// the engine go of what it kept of the statements, as at the end of a run
    /// ([`Session::settle`]), so that the memory in use is the program's alone.
    Wait { to_the_end: bool },
    /// Report the failures of ops that ended since the last report, without waiting.
    TakeFailures,
    /// Call this on the session, and end.
    Finish(Box<dyn FnOnce(&Session) + Send>),
}

impl PeerRanks {
    /// A job of `n` ranks simulated in this process: rank 0's communicator (for the caller's
    /// session) and ranks 1..n started with sessions made with `config`.
    pub fn group(n: usize, config: &SessionConfig) -> (Arc<LocalRanks>, PeerRanks) {
        let comms = LocalRanks::group(n, super::timeout());
        (comms[0].clone(), PeerRanks::start(&comms[1..], config))
    }

    /// A fresh job of as many ranks, its peers' sessions empty (rank 0's `:reset`).
    pub fn restarted(&self) -> (Arc<LocalRanks>, PeerRanks) {
        PeerRanks::group(self.size(), &self.config)
    }

    /// Starts a session for each of `comms` (ranks 1..N of one group) on its own thread, made
    /// with `config` and talking through its communicator.
    pub fn start(comms: &[Arc<LocalRanks>], config: &SessionConfig) -> PeerRanks {
        let peers = comms
            .iter()
            .map(|comm| {
                let (jobs, job_queue) = mpsc::channel();
                let (report, reports) = mpsc::channel();
                let rank = comm.rank();
                let driver = Driver::new(1);
                let interrupt = driver.interrupt();
                let (comm_of_thread, config) = (comm.clone(), config.clone());
                let thread = std::thread::Builder::new()
                    .name(format!("dep-rank{rank}"))
                    .spawn(move || serve(comm_of_thread, config, driver, job_queue, report))
                    .expect("spawning a simulated rank's thread");
                Peer {
                    rank,
                    comm: comm.clone(),
                    jobs,
                    reports,
                    interrupt,
                    thread: Some(thread),
                }
            })
            .collect();
        PeerRanks {
            peers,
            config: config.clone(),
        }
    }

    /// How many ranks the job has, rank 0 included.
    pub fn size(&self) -> usize {
        self.peers.len() + 1
    }

    /// Hands `input` to every peer, which starts running it at once; [`PeerRanks::ran`] says
    /// how it went.
    pub fn run(&self, input: &Input<'_>) {
        for peer in &self.peers {
            let _ = peer.jobs.send(Job::Run {
                path: input.path.to_string(),
                first_line: input.first_line,
                source: input.source.to_string(),
            });
        }
    }

    /// Waits until every peer has pushed the statements of the input it was handed (its ops
    /// may still run); what each printed and its statement's error, in rank order. Each of
    /// rank 0's interrupts that `interrupts` counts, before or while this waits, interrupts the
    /// peers too: a peer's `print` blocked on an op that never ends (a `recv` whose `send` no
    /// rank makes) gives up, rather than hold rank 0's prompt until the communication's
    /// timeout.
    pub fn ran(&self, interrupts: &dyn Fn() -> u64) -> Vec<PeerReport> {
        self.collect(interrupts)
    }

    /// Waits until every op of every peer has finished, in its final state; what each printed
    /// and the failures of its ops, in rank order. An interrupt that `interrupts` counts
    /// gives the peers' waits up, as in [`PeerRanks::ran`].
    pub fn wait(&self, interrupts: &dyn Fn() -> u64) -> Vec<PeerReport> {
        self.wait_and(false, interrupts)
    }

    /// [`PeerRanks::wait`] at the end of a run: each peer's engine then lets go of what it
    /// kept of the statements it ran ([`Session::settle`]), so that the memory the process
    /// holds is what every rank's program keeps at its end, whenever its thread ran.
    pub fn wait_to_the_end(&self, interrupts: &dyn Fn() -> u64) -> Vec<PeerReport> {
        self.wait_and(true, interrupts)
    }

    fn wait_and(&self, to_the_end: bool, interrupts: &dyn Fn() -> u64) -> Vec<PeerReport> {
        for peer in &self.peers {
            let _ = peer.jobs.send(Job::Wait { to_the_end });
        }
        self.collect(interrupts)
    }

    /// The failures of the peers' ops that ended since they last reported, after giving the
    /// running ones a moment (50 ms) but without waiting for them, in rank order. A
    /// peer that reports one ends the job.
    pub fn take_failures(&self) -> Vec<PeerReport> {
        for peer in &self.peers {
            let _ = peer.jobs.send(Job::TakeFailures);
        }
        self.collect(&|| 0)
    }

    /// Interrupts the input every peer runs now (see `driver::Interrupt`).
    pub fn interrupt(&self) {
        for peer in &self.peers {
            peer.interrupt.interrupt();
        }
    }

    /// Ends the job because of `reason`: every communication waiting now, and every one
    /// started later, fails at once.
    pub fn end_job(&self, reason: String) {
        if let Some(peer) = self.peers.first() {
            peer.comm.end_job(reason);
        }
    }

    /// Ends the peers once they are done: calls `last` on each peer's session (after its
    /// ops) and returns what it gave, in rank order.
    pub fn finish<T: Send + 'static>(
        mut self,
        last: impl Fn(&Session) -> T + Send + Sync + 'static,
    ) -> Vec<T> {
        let last = Arc::new(last);
        let (sent, results) = mpsc::channel();
        for peer in &self.peers {
            let (last, sent) = (last.clone(), sent.clone());
            let rank = peer.rank;
            let _ = peer.jobs.send(Job::Finish(Box::new(move |session| {
                let _ = sent.send((rank, last(session)));
            })));
        }
        drop(sent);
        for peer in &mut self.peers {
            if let Some(thread) = peer.thread.take() {
                let _ = thread.join();
            }
        }
        let mut results: Vec<(usize, T)> = results.into_iter().collect();
        results.sort_by_key(|(rank, _)| *rank);
        results.into_iter().map(|(_, result)| result).collect()
    }

    /// One report from every peer, in rank order (a peer whose thread ended reports that),
    /// interrupting the peers once for each interrupt `interrupts` counts while it waits.
    fn collect(&self, interrupts: &dyn Fn() -> u64) -> Vec<PeerReport> {
        let mut forwarded = 0;
        self.peers
            .iter()
            .map(|peer| loop {
                let seen = interrupts();
                while forwarded < seen {
                    self.interrupt();
                    forwarded += 1;
                }
                match peer.reports.recv_timeout(INTERRUPT_POLL) {
                    Ok(report) => break report,
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        break PeerReport {
                            rank: peer.rank,
                            output: Vec::new(),
                            errors: vec![RunError::without_place(format!(
                                "error (rank {}): the simulated rank's thread ended",
                                peer.rank
                            ))],
                        }
                    }
                }
            })
            .collect()
    }
}

/// How often rank 0, waiting for its peers' reports, looks for an interrupt to pass on.
const INTERRUPT_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// How long a peer asked for its failures waits for its running ops to end first.
const SETTLE_TIME: std::time::Duration = std::time::Duration::from_millis(50);

/// What a peer prints, kept until it is reported.
struct Kept(Vec<u8>);

impl Listener for Kept {
    fn output(&mut self) -> &mut dyn std::io::Write {
        &mut self.0
    }
}

/// A peer's thread: runs the jobs it is handed on its session until told to finish (or until
/// its `PeerRanks` is gone).
fn serve(
    comm: Arc<LocalRanks>,
    config: SessionConfig,
    driver: Driver,
    jobs: mpsc::Receiver<Job>,
    reports: mpsc::Sender<PeerReport>,
) {
    let rank = comm.rank();
    let mut session = Session::new(config);
    session.set_communicator(comm.clone());
    let mut kept = Kept(Vec::new());
    for job in jobs {
        let errors: Vec<RunError> = match job {
            Job::Run {
                path,
                first_line,
                source,
            } => {
                let input = Input {
                    path: &path,
                    first_line,
                    source: &source,
                    value_apart: false,
                    parsed: None,
                    early_errors: None,
                };
                let outcome = driver.run(&mut session, &input, driver.mark(), &mut kept);
                outcome.error.into_iter().collect()
            }
            Job::Wait { to_the_end } => {
                // Rank 0's interrupt, passed on, gives the wait up (a peer's driver gives up at
                // the first).
                let waited = driver.wait_or_leave(&mut session, driver.mark());
                if to_the_end && !waited.interrupted {
                    session.settle();
                }
                waited.failures.into_iter().collect()
            }
            Job::TakeFailures => {
                // As rank 0's prompt does, give ops just pushed a moment to end.
                driver.settle(&session, SETTLE_TIME);
                session.take_failures().err().into_iter().collect()
            }
            Job::Finish(last) => {
                let _ = driver.wait(&mut session, driver.mark());
                last(&session);
                return;
            }
        };
        // A failure every rank sees alike ends no job: each rank fails there by itself.
        let fails_alone = |error: &RunError| !crate::comm::failed_on_every_rank(&error.to_string());
        if errors.iter().any(fails_alone) {
            comm.end_job(format!("rank {rank} failed"));
        }
        let report = PeerReport {
            rank,
            output: std::mem::take(&mut kept.0),
            errors: errors
                .into_iter()
                .map(|error| error.on_rank(rank))
                .collect(),
        };
        if reports.send(report).is_err() {
            return;
        }
    }
}
