//! How the progress thread waits between its looks at MPI and at its inbox.
//!
//! Open MPI moves data only inside MPI calls, and a request handed to the thread waits until the
//! thread looks at its inbox, so the thread polls both; but on a machine with fewer cores than
//! busy threads, a poll that never lets go of its core keeps the rank's own engine workers and
//! the other ranks' threads from running. So it spins after its last progress, giving the core
//! away now and then (more often when the ranks on this machine keep more threads busy than it
//! has cores), and then sleeps on its inbox, where a new request wakes it at once: between polls
//! of the requests still in flight, for [`BUSY_NAP`]; with nothing in flight, for [`IDLE_NAP`] (a
//! peer may still need this rank inside MPI to finish a transfer of its own). While requests are
//! in flight it spins for as long as their bytes may take to move ([`SPIN_PER_MIB`] a MiB, at
//! least [`BUSY_SPIN`]): a large transfer completes nothing until its end, and Open MPI moves its
//! pieces only while the thread polls, so a nap in its midst would stall it.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

/// How long the thread spins after its last progress while requests are in flight, at least.
const BUSY_SPIN: Duration = Duration::from_millis(2);

/// How much longer it spins for each MiB in flight: a transfer at 0.5 GB/s, slower than any
/// shared-memory or network link MPI runs on.
const SPIN_PER_MIB: Duration = Duration::from_millis(2);

/// How long it spins after its last progress with nothing in flight: the next request of a chain
/// of communications comes within microseconds.
const IDLE_SPIN: Duration = Duration::from_micros(200);

/// How long it sleeps between polls, once done spinning, while requests are in flight.
const BUSY_NAP: Duration = Duration::from_micros(50);

/// How long it sleeps between polls, once done spinning, with nothing in flight.
const IDLE_NAP: Duration = Duration::from_millis(1);

/// Polls between two yields of the core when the busy threads of this machine's ranks (two
/// each: the progress thread and the engine worker that starts the next communication) have a
/// core each.
const POLLS_PER_YIELD: u32 = 64;

/// Polls between two yields when they share cores: the others get the core sooner. Measured on
/// 2 cores (bench/README.md): a chain of 4-byte allreduces over 2 ranks took 12 µs an op
/// yielding every 16 polls, 18 µs every poll, 22 µs every 64.
const POLLS_PER_YIELD_SHARED: u32 = 16;

/// The pace of the progress thread's polls.
pub(super) struct Pacer {
    last_progress: Instant,
    polls: u32,
    polls_per_yield: u32,
}

/// The inbox's sender is gone: the session ended.
pub(super) struct Disconnected;

impl Pacer {
    /// A pacer for a rank that shares this machine with `local_ranks` ranks in all.
    pub(super) fn new(local_ranks: usize) -> Pacer {
        let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
        Pacer {
            last_progress: Instant::now(),
            polls: 0,
            polls_per_yield: polls_per_yield(local_ranks, cores),
        }
    }

    /// Something moved (a request came, one completed): spin again.
    pub(super) fn progressed(&mut self) {
        self.last_progress = Instant::now();
    }

    /// Waits as long as this moment calls for (see the module's doc), and returns the first
    /// command that came in that time, if any. `in_flight` is `None` with nothing in flight, and
    /// otherwise the bytes in flight.
    pub(super) fn wait<T>(
        &mut self,
        in_flight: Option<usize>,
        inbox: &Receiver<T>,
    ) -> Result<Option<T>, Disconnected> {
        if self.last_progress.elapsed() < spin_time(in_flight) {
            self.polls = self.polls.wrapping_add(1);
            if self.polls.is_multiple_of(self.polls_per_yield) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            return match inbox.try_recv() {
                Ok(command) => Ok(Some(command)),
                Err(TryRecvError::Empty) => Ok(None),
                Err(TryRecvError::Disconnected) => Err(Disconnected),
            };
        }
        let nap = if in_flight.is_some() {
            BUSY_NAP
        } else {
            IDLE_NAP
        };
        match inbox.recv_timeout(nap) {
            Ok(command) => Ok(Some(command)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(Disconnected),
        }
    }
}

/// How many polls between two yields of the core, for `local_ranks` ranks on `cores` cores.
fn polls_per_yield(local_ranks: usize, cores: usize) -> u32 {
    if 2 * local_ranks > cores {
        POLLS_PER_YIELD_SHARED
    } else {
        POLLS_PER_YIELD
    }
}

/// How long the thread spins after its last progress (see [`Pacer::wait`]).
fn spin_time(in_flight: Option<usize>) -> Duration {
    match in_flight {
        None => IDLE_SPIN,
        Some(bytes) => BUSY_SPIN + SPIN_PER_MIB.mul_f64(bytes as f64 / f64::from(1u32 << 20)),
    }
}

/// Drains what else is in the inbox now, after `first`.
pub(super) fn drain<T>(first: Option<T>, inbox: &mpsc::Receiver<T>) -> Vec<T> {
    first.into_iter().chain(inbox.try_iter()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_that_share_cores_yield_more_often() {
        assert_eq!(polls_per_yield(2, 4), POLLS_PER_YIELD);
        assert_eq!(polls_per_yield(2, 2), POLLS_PER_YIELD_SHARED);
        assert_eq!(polls_per_yield(4, 2), POLLS_PER_YIELD_SHARED);
    }

    #[test]
    fn the_thread_spins_longer_while_more_bytes_are_in_flight() {
        assert_eq!(spin_time(None), IDLE_SPIN);
        assert_eq!(
            spin_time(Some(4)),
            BUSY_SPIN + SPIN_PER_MIB.mul_f64(4.0 / 1048576.0)
        );
        assert_eq!(spin_time(Some(64 << 20)), BUSY_SPIN + SPIN_PER_MIB * 64);
        assert!(spin_time(None) < spin_time(Some(0)));
    }

    #[test]
    fn a_waiting_command_is_taken_at_once_and_a_gone_sender_is_told() {
        let (send, inbox) = mpsc::channel();
        let mut pacer = Pacer::new(1);
        send.send(7).expect("the inbox is there");
        assert!(matches!(pacer.wait(Some(0), &inbox), Ok(Some(7))));
        assert!(matches!(pacer.wait(None, &inbox), Ok(None)));
        drop(send);
        assert!(matches!(pacer.wait(None, &inbox), Err(Disconnected)));
    }

    #[test]
    fn once_done_spinning_the_thread_naps_and_a_command_wakes_it() {
        let (send, inbox) = mpsc::channel();
        let mut pacer = Pacer::new(1);
        pacer.last_progress = Instant::now() - IDLE_SPIN * 2;
        let started = Instant::now();
        assert!(matches!(pacer.wait(None, &inbox), Ok(None)));
        assert!(started.elapsed() >= IDLE_NAP, "it napped");
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            send.send(1).expect("the inbox is there");
        });
        let mut got = None;
        while got.is_none() {
            got = pacer.wait(None, &inbox).ok().flatten();
        }
        assert_eq!(got, Some(1));
        sender.join().expect("the sender ended");
    }
}
