//! Communication between ranks: the statements `allreduce`, `broadcast`, `reduce`,
//! `allgather`, `send` and `recv`, and
//! the [`Communicator`] they run over (MPI in the binary built with `--features mpi`, or ranks
//! in this process: [`LocalRanks`]).
//!
//! Each communication statement is one asynchronous engine op (`OpSpec::new_async`): its start
//! function hands the data to the communicator and returns; the communicator calls the op's
//! [`CommDone`] when the transfer is over, from whichever thread learns it, and that completes
//! the op. Workers never block on the network.
//!
//! Matching: collectives are numbered in push order (the same on every rank, since every rank
//! runs the same script), and a communicator starts them in that order whatever order they
//! become ready in; the k-th `send` from rank a to rank b carries tag k, and so does the k-th
//! `recv` on b from a, so messages match in push order too.

mod agree;
mod local;
pub(crate) mod ops;
mod peers;

use std::time::Duration;

pub use agree::{
    disagreement, failed_on_every_rank, fails_on_every_rank, CollectiveHeader, CollectiveKind,
};
pub use local::LocalRanks;
pub use peers::{PeerRanks, PeerReport};

use crate::tensor::Tensor;

/// How a rank's statement or communication that a failure elsewhere stopped begins its message.
const JOB_ENDED: &str = "the job ended: ";

/// The error of a rank's statement or communication that `reason` (another rank's failure)
/// stopped: `the job ended: rank 1 failed`.
pub fn job_ended(reason: &str) -> String {
    format!("{JOB_ENDED}{reason}")
}

/// Whether `report` (an error as a rank reports it) is of a statement or communication that
/// another rank's failure stopped ([`job_ended`]).
pub fn is_job_ended(report: &str) -> bool {
    report.contains(JOB_ENDED)
}

/// Called once when a communication ends: with the values received (the sum of an allreduce,
/// the root's values of a broadcast, the sum of a reduce on its root and the rank's own values
/// elsewhere, every rank's values of an allgather, a message; nothing for a send), or with what
/// went wrong.
pub type CommDone = Box<dyn FnOnce(Result<Vec<f32>, String>) + Send>;

/// One communication, as a rank's op starts it. The values it sends are the input variable's
/// tensor itself, shared and not copied: a communicator reads them where they are (MPI sends
/// straight from the tensor's buffer).
#[derive(Debug)]
pub enum CommRequest {
    /// Sum `data` over every rank; each rank gets the sum.
    AllReduce {
        /// The collective's number, in push order.
        seq: u64,
        /// The line of its statement, which errors name to the other ranks.
        line: u32,
        /// This rank's values.
        data: Tensor,
    },
    /// Every rank gets `root`'s values.
    Broadcast {
        /// The collective's number, in push order.
        seq: u64,
        /// The line of its statement, which errors name to the other ranks.
        line: u32,
        /// The rank whose values everyone gets.
        root: usize,
        /// This rank's values (the root's are sent; the others' give the length).
        data: Tensor,
    },
    /// Sums `data` over every rank on `root`; the others get their own values back.
    Reduce {
        /// The collective's number, in push order.
        seq: u64,
        /// The line of its statement, which errors name to the other ranks.
        line: u32,
        /// The rank that gets the sum.
        root: usize,
        /// This rank's values.
        data: Tensor,
    },
    /// Every rank gets every rank's values, one after the other in rank order.
    AllGather {
        /// The collective's number, in push order.
        seq: u64,
        /// The line of its statement, which errors name to the other ranks.
        line: u32,
        /// This rank's values.
        data: Tensor,
    },
    /// Sends `data` to rank `to`.
    Send {
        /// The receiving rank.
        to: usize,
        /// The message's number among those from this rank to `to`.
        tag: u64,
        /// The values sent.
        data: Tensor,
    },
    /// Receives a message from rank `from`.
    Recv {
        /// The sending rank.
        from: usize,
        /// The message's number among those from `from` to this rank.
        tag: u64,
    },
}

impl CommRequest {
    /// This rank's side of a collective, which every rank's must agree with (see
    /// [`disagreement`]); `None` for a message.
    pub fn header(&self) -> Option<CollectiveHeader> {
        let (kind, line, data) = match self {
            CommRequest::AllReduce { line, data, .. } => (CollectiveKind::AllReduce, line, data),
            CommRequest::Broadcast {
                root, line, data, ..
            } => (CollectiveKind::Broadcast(*root), line, data),
            CommRequest::Reduce {
                root, line, data, ..
            } => (CollectiveKind::Reduce(*root), line, data),
            CommRequest::AllGather { line, data, .. } => (CollectiveKind::AllGather, line, data),
            CommRequest::Send { .. } | CommRequest::Recv { .. } => return None,
        };
        Some(CollectiveHeader::new(kind, *line, data.shape()))
    }
}

/// How a rank talks to the others. Implementations finish every request exactly once, never
/// block the caller of [`Communicator::start`] on the network, and fail a request that waits
/// longer than [`timeout`] for its peers.
pub trait Communicator: Send + Sync {
    /// This process's rank, from 0.
    fn rank(&self) -> usize;
    /// How many ranks there are.
    fn size(&self) -> usize;
    /// Starts `request`; `done` is called once it is over, maybe before this returns, maybe
    /// from another thread.
    fn start(&self, request: CommRequest, done: CommDone);
    /// Says that this rank will not make a communication it was to make (its op did not run:
    /// it read a value that failed, or it was cancelled), so this rank is failing: what waits
    /// now and what starts later fails at once, instead of waiting for peers that wait for the
    /// missing one. `what` says which communication.
    fn abandon(&self, what: String);
    /// Why the job ended, once it did (a rank failed, or was interrupted): a rank that learns it
    /// stops before its next statement, as the failed rank would under mpirun, whose
    /// `MPI_Abort` ends every process. `None` while the job runs, and for communicators whose
    /// job ends by other means.
    fn ended(&self) -> Option<String> {
        None
    }
}

/// How long a communication waits for its peers when `DEP_COMM_TIMEOUT` does not say.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest `DEP_COMM_TIMEOUT`, in seconds (about 11.6 days).
const MAX_TIMEOUT_S: f64 = 1e6;

/// How long a communication may wait for its peers: `DEP_COMM_TIMEOUT` seconds (a number above
/// 0 and at most 1,000,000), 60 by default; an error saying so when the variable holds anything
/// else. Front-ends check it at start ([`timeout`] then never meets a bad value).
pub fn timeout_from_env() -> Result<Duration, String> {
    let Ok(text) = std::env::var("DEP_COMM_TIMEOUT") else {
        return Ok(DEFAULT_TIMEOUT);
    };
    match text.trim().parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= MAX_TIMEOUT_S => {
            Ok(Duration::from_secs_f64(seconds))
        }
        _ => Err(format!(
            "DEP_COMM_TIMEOUT: `{text}` is not a time in seconds (expected a number above 0 and at most {MAX_TIMEOUT_S})"
        )),
    }
}

/// [`timeout_from_env`], or the default where the variable is bad.
pub fn timeout() -> Duration {
    timeout_from_env().unwrap_or(DEFAULT_TIMEOUT)
}

/// The error of a communication that waited past [`timeout`]: names both ranks.
pub fn timeout_message(what: &str, rank: usize, peer: Option<usize>, waited: Duration) -> String {
    let peers = match peer {
        Some(peer) => format!("rank {peer}"),
        None => "the other ranks".to_string(),
    };
    format!(
        "{what}: rank {rank} waited {:.1} s for {peers} (DEP_COMM_TIMEOUT); did {peers} fail, or not reach the matching statement?",
        waited.as_secs_f64()
    )
}

/// The numbering of one rank's communications, in push order (see the module's doc).
#[derive(Default)]
pub(crate) struct CommCounters {
    collectives: u64,
    sent: rustc_hash::FxHashMap<usize, u64>,
    received: rustc_hash::FxHashMap<usize, u64>,
}

impl CommCounters {
    /// The next collective's number.
    pub(crate) fn next_collective(&mut self) -> u64 {
        self.collectives += 1;
        self.collectives - 1
    }

    /// The tag of the next message to `to`.
    pub(crate) fn next_send(&mut self, to: usize) -> u64 {
        let count = self.sent.entry(to).or_default();
        *count += 1;
        *count - 1
    }

    /// The tag of the next message from `from`.
    pub(crate) fn next_recv(&mut self, from: usize) -> u64 {
        let count = self.received.entry(from).or_default();
        *count += 1;
        *count - 1
    }
}

#[cfg(test)]
mod session_tests;
