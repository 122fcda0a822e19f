//! Ranks inside this process: the communicator of a single-process run (one rank: an allreduce
//! is the identity) and of simulated ranks (`--engine sim --ranks N`: N sessions, one per rank,
//! in one process). Messages and collective contributions meet in mailboxes under one lock; a
//! timer thread fails what waits longer than the timeout.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap as HashMap;

use super::{
    disagreement, timeout_message, CollectiveHeader, CollectiveKind, CommDone, CommRequest,
    Communicator,
};
use crate::tensor::Tensor;

/// One rank of a group of ranks in this process.
pub struct LocalRanks {
    rank: usize,
    shared: Arc<Shared>,
}

struct Shared {
    size: usize,
    timeout: Duration,
    state: Mutex<State>,
    /// Whether `State::ended` is set: read before every statement of every rank, so kept out
    /// of the lock.
    ended: AtomicBool,
    /// Told when something starts waiting, so that the timer looks at its deadline.
    waiting: Condvar,
}

#[derive(Default)]
struct State {
    collectives: BTreeMap<u64, Collective>,
    /// Messages sent before their receive started, by (from, to, tag).
    messages: HashMap<(usize, usize, u64), Vec<f32>>,
    /// Receives started before their message was sent, by (from, to, tag).
    receivers: HashMap<(usize, usize, u64), Waiter>,
    timer_started: bool,
    /// Why the job ended, once a rank failed: every communication fails from then on.
    ended: Option<String>,
}

/// A collective some ranks have joined.
struct Collective {
    seq: u64,
    /// Each rank's side (which collective, its root, its shape), once it joined.
    headers: Vec<Option<CollectiveHeader>>,
    /// Each rank's values, once it joined.
    parts: Vec<Option<Vec<f32>>>,
    waiters: Vec<(usize, Waiter)>,
}

struct Waiter {
    done: CommDone,
    since: Instant,
}

/// What a finished communication hands to its waiters, called after the lock is released.
type Deliveries = Vec<(CommDone, Result<Vec<f32>, String>)>;

impl LocalRanks {
    /// The `size` ranks of one job in this process, rank 0 first; a communication waits at most
    /// `timeout` for its peers.
    pub fn group(size: usize, timeout: Duration) -> Vec<Arc<LocalRanks>> {
        let shared = Arc::new(Shared {
            size: size.max(1),
            timeout,
            state: Mutex::new(State::default()),
            ended: AtomicBool::new(false),
            waiting: Condvar::new(),
        });
        (0..size.max(1))
            .map(|rank| {
                Arc::new(LocalRanks {
                    rank,
                    shared: shared.clone(),
                })
            })
            .collect()
    }

    /// A single rank: the communicator of a process that runs alone.
    pub fn solo() -> Arc<LocalRanks> {
        LocalRanks::group(1, super::timeout()).remove(0)
    }

    /// Ends the job because of `reason` (a rank failed): every communication waiting now, and
    /// every one started later, fails at once rather than wait for the failed rank.
    pub fn end_job(&self, reason: String) {
        let mut state = self.lock();
        state.ended.get_or_insert(reason);
        self.shared.ended.store(true, Ordering::SeqCst);
        let receivers = std::mem::take(&mut state.receivers);
        let collectives = std::mem::take(&mut state.collectives);
        let message = super::job_ended(state.ended.as_deref().unwrap_or_default());
        drop(state);
        let waiters = receivers.into_values().chain(
            collectives
                .into_values()
                .flat_map(|collective| collective.waiters.into_iter().map(|(_, waiter)| waiter)),
        );
        for waiter in waiters {
            (waiter.done)(Err(message.clone()));
        }
    }

    /// The messages sent and never received, as (from, to, tag) in that order: once every rank
    /// has ended, each is a `send` that no `recv` matched (tag k: the (k+1)-th send from that
    /// rank to that one).
    pub fn unreceived(&self) -> Vec<(usize, usize, u64)> {
        let mut keys: Vec<(usize, usize, u64)> = self.lock().messages.keys().copied().collect();
        keys.sort_unstable();
        keys
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts the timer thread once, the first time something waits.
    fn note_waiting(&self, state: &mut State) {
        if !state.timer_started {
            state.timer_started = true;
            let shared = self.shared.clone();
            std::thread::Builder::new()
                .name("dep-comm-timer".into())
                .spawn(move || expire_loop(&shared))
                .expect("spawning the communication timer thread");
        }
        self.shared.waiting.notify_all();
    }

    fn join_collective(
        &self,
        seq: u64,
        header: CollectiveHeader,
        data: Vec<f32>,
        done: CommDone,
    ) -> Deliveries {
        let size = self.shared.size;
        let mut state = self.lock();
        if let Some(ended) = job_ended(&state) {
            return vec![(done, Err(ended))];
        }
        let collective = state.collectives.entry(seq).or_insert_with(|| Collective {
            seq,
            headers: vec![None; size],
            parts: vec![None; size],
            waiters: Vec::new(),
        });
        collective.headers[self.rank] = Some(header);
        collective.parts[self.rank] = Some(data);
        collective.waiters.push((
            self.rank,
            Waiter {
                done,
                since: Instant::now(),
            },
        ));
        if collective.waiters.len() < size {
            self.note_waiting(&mut state);
            return Vec::new();
        }
        let collective = state.collectives.remove(&seq).expect("present just above");
        drop(state);
        finish_collective(collective)
    }
}

/// What a communication that starts after the job ended fails with.
fn job_ended(state: &State) -> Option<String> {
    let reason = state.ended.as_deref()?;
    Some(super::job_ended(reason))
}

/// The results of a collective every rank has joined: an error for every rank when they
/// disagree on which collective it is, its root or the shape of their values.
fn finish_collective(collective: Collective) -> Deliveries {
    let headers: Vec<CollectiveHeader> = collective.headers.into_iter().flatten().collect();
    let parts: Vec<Vec<f32>> = collective.parts.into_iter().flatten().collect();
    let kind = headers[0].kind;
    let result = match (disagreement(collective.seq, &headers), kind) {
        (Some(message), _) => Err(message),
        (None, CollectiveKind::Broadcast(root)) => Ok(parts[root].clone()),
        (None, CollectiveKind::AllGather) => Ok(parts.concat()),
        (None, CollectiveKind::AllReduce | CollectiveKind::Reduce(_)) => {
            // Summed in rank order, so that every run adds in the same order.
            let mut sum = parts[0].clone();
            for part in &parts[1..] {
                for (total, value) in sum.iter_mut().zip(part) {
                    *total += value;
                }
            }
            Ok(sum)
        }
    };
    collective
        .waiters
        .into_iter()
        .map(|(rank, waiter)| {
            let result = match (kind, &result) {
                // A reduce's other ranks keep their own values.
                (CollectiveKind::Reduce(root), Ok(_)) if rank != root => Ok(parts[rank].clone()),
                _ => result.clone(),
            };
            (waiter.done, result)
        })
        .collect()
}

impl Communicator for LocalRanks {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.shared.size
    }

    fn ended(&self) -> Option<String> {
        if !self.shared.ended.load(Ordering::SeqCst) {
            return None;
        }
        self.lock().ended.clone()
    }

    fn abandon(&self, what: String) {
        if self.shared.ended.load(Ordering::SeqCst) {
            // Every communication fails already: nothing to end (and no thread to spawn for
            // each of a loop's refused communications).
            return;
        }
        // Off the caller's thread: the caller may be an engine worker inside an op's start,
        // and ending the job completes other ops of this rank's engine.
        let reason = format!("rank {} failed ({what})", self.rank);
        let job = LocalRanks {
            rank: self.rank,
            shared: self.shared.clone(),
        };
        let spawned = std::thread::Builder::new()
            .name("dep-comm-abandon".into())
            .spawn(move || job.end_job(reason));
        if spawned.is_err() {
            // No thread to spare: end the job here rather than leave the others waiting.
            self.end_job(format!("rank {} failed ({what})", self.rank));
        }
    }

    fn start(&self, request: CommRequest, done: CommDone) {
        // Checked again where a waiter is queued, under the same lock: a job that ends between
        // this look and the queueing would otherwise leave it waiting for the timeout.
        let ended = job_ended(&self.lock());
        if let Some(ended) = ended {
            return done(Err(ended));
        }
        // The mailboxes keep values apart from the sender's tensor, which may change later.
        let join = |seq, kind, line, data: Tensor, done| {
            let header = CollectiveHeader::new(kind, line, data.shape());
            self.join_collective(seq, header, data.data().to_vec(), done)
        };
        let deliveries = match request {
            CommRequest::AllReduce { seq, line, data } => {
                join(seq, CollectiveKind::AllReduce, line, data, done)
            }
            CommRequest::Broadcast {
                seq,
                line,
                root,
                data,
            } => join(seq, CollectiveKind::Broadcast(root), line, data, done),
            CommRequest::Reduce {
                seq,
                line,
                root,
                data,
            } => join(seq, CollectiveKind::Reduce(root), line, data, done),
            CommRequest::AllGather { seq, line, data } => {
                join(seq, CollectiveKind::AllGather, line, data, done)
            }
            CommRequest::Send { to, tag, data } => {
                let data = data.data().to_vec();
                let key = (self.rank, to, tag);
                let mut state = self.lock();
                let delivered = match state.receivers.remove(&key) {
                    Some(receiver) => Some((receiver.done, Ok(data))),
                    None => {
                        state.messages.insert(key, data);
                        None
                    }
                };
                drop(state);
                // A send is buffered: it is over as soon as the message is in the mailbox.
                delivered
                    .into_iter()
                    .chain([(done, Ok(Vec::new()))])
                    .collect()
            }
            CommRequest::Recv { from, tag } => {
                let key = (from, self.rank, tag);
                let mut state = self.lock();
                match state.messages.remove(&key) {
                    Some(message) => vec![(done, Ok(message))],
                    None if state.ended.is_some() => {
                        vec![(done, Err(job_ended(&state).unwrap_or_default()))]
                    }
                    None => {
                        let since = Instant::now();
                        state.receivers.insert(key, Waiter { done, since });
                        self.note_waiting(&mut state);
                        Vec::new()
                    }
                }
            }
        };
        for (done, result) in deliveries {
            done(result);
        }
    }
}

/// What a timeout adds among ranks in this process (simulated, where the host's virtual clock
/// stops at a value it reads until every op pushed before has ended): the usual deadlock of
/// simulated ranks that mpirun's do not have, so that the script can be mended. Short enough
/// that the whole timeout message fits in a headline (`dep_grammar::MAX_HEADLINE_CHARS`), whose
/// cut would fall in the advice.
const SIMULATED_WAIT: &str = "; on simulated ranks, a host read (a `print`, a variable's first read since written) waits for every communication before it, so ranks that each do one between a `recv` and the `send` the other awaits block each other: read before the `recv`, or send first";

/// The timer: fails every receive and collective that has waited longer than the timeout. Ends
/// when the ranks it serves are gone.
fn expire_loop(shared: &Arc<Shared>) {
    let mut state = shared
        .state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    loop {
        if Arc::strong_count(shared) == 1 {
            return;
        }
        let now = Instant::now();
        let mut expired: Deliveries = Vec::new();
        let overdue: Vec<_> = state
            .receivers
            .iter()
            .filter(|(_, waiter)| now.duration_since(waiter.since) >= shared.timeout)
            .map(|(key, _)| *key)
            .collect();
        for key @ (from, to, _) in overdue {
            if let Some(waiter) = state.receivers.remove(&key) {
                let message =
                    timeout_message("recv", to, Some(from), now - waiter.since) + SIMULATED_WAIT;
                expired.push((waiter.done, Err(message)));
            }
        }
        let overdue: Vec<u64> = state
            .collectives
            .iter()
            .filter(|(_, collective)| {
                collective
                    .waiters
                    .iter()
                    .any(|(_, waiter)| now.duration_since(waiter.since) >= shared.timeout)
            })
            .map(|(seq, _)| *seq)
            .collect();
        for seq in overdue {
            if let Some(collective) = state.collectives.remove(&seq) {
                let what = collective
                    .headers
                    .iter()
                    .flatten()
                    .next()
                    .map_or("collective", |header| header.kind.name());
                let missing = collective.parts.iter().position(Option::is_none);
                for (rank, waiter) in collective.waiters {
                    let message =
                        timeout_message(what, rank, missing, now - waiter.since) + SIMULATED_WAIT;
                    expired.push((waiter.done, Err(message)));
                }
            }
        }
        if !expired.is_empty() {
            drop(state);
            for (done, result) in expired {
                done(result);
            }
            state = shared
                .state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            continue;
        }
        let earliest = state
            .receivers
            .values()
            .chain(
                state
                    .collectives
                    .values()
                    .flat_map(|collective| collective.waiters.iter().map(|(_, waiter)| waiter)),
            )
            .map(|waiter| waiter.since + shared.timeout)
            .min();
        // Wakes at the earliest deadline, and every 200 ms to see whether the ranks are gone.
        let pause = earliest
            .map_or(Duration::from_millis(200), |deadline| {
                deadline.saturating_duration_since(now)
            })
            .min(Duration::from_millis(200));
        state = shared
            .waiting
            .wait_timeout(state, pause)
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;
    use std::sync::mpsc;

    /// The longest timeout among simulated ranks (a collective's name, a four-digit rank, the
    /// longest timeout DEP_COMM_TIMEOUT takes, all the other ranks missing) is not cut in its
    /// headline: the advice at its end is read whole, not cut off with `...`.
    #[test]
    fn a_simulated_timeout_with_its_advice_fits_in_a_headline() {
        let longest = ["allreduce", "broadcast", "allgather", "reduce", "recv"]
            .into_iter()
            .flat_map(|what| {
                [None, Some(9999)].map(|peer| {
                    timeout_message(what, 9999, peer, Duration::from_secs(1_000_000))
                        + SIMULATED_WAIT
                })
            })
            .max_by_key(|message| message.chars().count())
            .expect("messages");
        assert!(
            longest.chars().count() <= dep_grammar::MAX_HEADLINE_CHARS,
            "{} chars: {longest}",
            longest.chars().count()
        );
    }

    /// A vector of `data`, as a communication's input.
    fn values(data: Vec<f32>) -> Tensor {
        Tensor::from_vec(vec![data.len()], data).expect("a vector of its own length")
    }

    fn started(
        comm: &LocalRanks,
        request: CommRequest,
    ) -> mpsc::Receiver<Result<Vec<f32>, String>> {
        let (tx, rx) = mpsc::channel();
        comm.start(
            request,
            Box::new(move |result| {
                let _ = tx.send(result);
            }),
        );
        rx
    }

    /// A collective joined after the job ended fails at once, even past `start`'s first look
    /// (the job may end between that look and the queueing; before, such a waiter waited for
    /// the timeout: a test saw 30 s once in a loaded run).
    #[test]
    fn a_collective_joined_as_the_job_ends_fails_at_once() {
        let ranks = LocalRanks::group(2, Duration::from_secs(3600));
        ranks[1].end_job("rank 1 failed".to_string());
        let (tx, rx) = mpsc::channel();
        let deliveries = ranks[0].join_collective(
            0,
            CollectiveHeader::new(CollectiveKind::AllReduce, 1, &[1]),
            vec![1.0],
            Box::new(move |result| {
                let _ = tx.send(result);
            }),
        );
        for (done, result) in deliveries {
            done(result);
        }
        assert_eq!(
            rx.try_recv().expect("answered at once"),
            Err("the job ended: rank 1 failed".to_string())
        );
    }

    #[test]
    fn allreduce_sums_over_every_rank_once_all_joined() {
        let ranks = LocalRanks::group(3, Duration::from_secs(5));
        let mut waiting = Vec::new();
        for (rank, comm) in ranks.iter().enumerate() {
            let data = values(vec![rank as f32, 10.0]);
            waiting.push(started(
                comm,
                CommRequest::AllReduce {
                    seq: 0,
                    line: 1,
                    data,
                },
            ));
            if rank < 2 {
                assert!(
                    waiting[rank].try_recv().is_err(),
                    "done before every rank joined"
                );
            }
        }
        for rx in waiting {
            assert_eq!(rx.recv().unwrap(), Ok(vec![3.0, 30.0]));
        }
    }

    #[test]
    fn one_rank_reduces_to_itself_at_once() {
        let comm = LocalRanks::solo();
        let rx = started(
            &comm,
            CommRequest::AllReduce {
                seq: 0,
                line: 1,
                data: values(vec![1.5]),
            },
        );
        assert_eq!(rx.try_recv().unwrap(), Ok(vec![1.5]));
    }

    #[test]
    fn messages_match_by_tag_whichever_side_comes_first() {
        let ranks = LocalRanks::group(2, Duration::from_secs(5));
        let late = started(&ranks[1], CommRequest::Recv { from: 0, tag: 1 });
        let sent = started(
            &ranks[0],
            CommRequest::Send {
                to: 1,
                tag: 0,
                data: values(vec![1.0]),
            },
        );
        assert_eq!(sent.recv().unwrap(), Ok(vec![]));
        let sent = started(
            &ranks[0],
            CommRequest::Send {
                to: 1,
                tag: 1,
                data: values(vec![2.0]),
            },
        );
        assert_eq!(sent.recv().unwrap(), Ok(vec![]));
        assert_eq!(late.recv().unwrap(), Ok(vec![2.0]));
        let early = started(&ranks[1], CommRequest::Recv { from: 0, tag: 0 });
        assert_eq!(early.recv().unwrap(), Ok(vec![1.0]));
    }

    #[test]
    fn broadcast_gives_the_roots_values_and_refuses_other_shapes() {
        let ranks = LocalRanks::group(2, Duration::from_secs(5));
        let a = started(
            &ranks[0],
            CommRequest::Broadcast {
                seq: 0,
                line: 1,
                root: 1,
                data: values(vec![0.0; 2]),
            },
        );
        let b = started(
            &ranks[1],
            CommRequest::Broadcast {
                seq: 0,
                line: 1,
                root: 1,
                data: values(vec![7.0, 8.0]),
            },
        );
        assert_eq!(a.recv().unwrap(), Ok(vec![7.0, 8.0]));
        assert_eq!(b.recv().unwrap(), Ok(vec![7.0, 8.0]));
        let a = started(
            &ranks[0],
            CommRequest::AllReduce {
                seq: 1,
                line: 1,
                data: values(vec![0.0; 3]),
            },
        );
        let _b = started(
            &ranks[1],
            CommRequest::AllReduce {
                seq: 1,
                line: 1,
                data: values(vec![0.0; 2]),
            },
        );
        let error = a.recv().unwrap().unwrap_err();
        assert!(
            error.contains("rank 1 has shape [2] but rank 0 has [3]"),
            "{error}"
        );
    }

    /// The same number of values in another shape, another collective, or another root:
    /// every rank's op fails, saying what differs (before, the first two were summed or
    /// broadcast as if they agreed).
    #[test]
    fn ranks_must_agree_on_shape_collective_and_root_not_only_on_size() {
        let ranks = LocalRanks::group(2, Duration::from_secs(5));
        let matrix = |rows: usize, cols: usize| {
            Tensor::from_vec(vec![rows, cols], vec![1.0; rows * cols]).expect("a matrix")
        };
        let mismatched = [
            (
                CommRequest::AllReduce {
                    seq: 0,
                    line: 2,
                    data: matrix(2, 3),
                },
                CommRequest::AllReduce {
                    seq: 0,
                    line: 2,
                    data: matrix(3, 2),
                },
                "allreduce: rank 1 has shape [3, 2] but rank 0 has [2, 3]",
            ),
            (
                CommRequest::AllReduce {
                    seq: 1,
                    line: 2,
                    data: values(vec![1.0]),
                },
                CommRequest::Broadcast {
                    seq: 1,
                    line: 3,
                    root: 1,
                    data: values(vec![1.0]),
                },
                "collective number 2: rank 1 runs broadcast with root 1 (line 3) but rank 0 runs allreduce (line 2)",
            ),
            (
                CommRequest::Reduce {
                    seq: 2,
                    line: 4,
                    root: 0,
                    data: values(vec![1.0]),
                },
                CommRequest::Reduce {
                    seq: 2,
                    line: 4,
                    root: 1,
                    data: values(vec![1.0]),
                },
                "rank 1 runs reduce with root 1 (line 4) but rank 0 runs reduce with root 0 (line 4)",
            ),
        ];
        for (first, second, expected) in mismatched {
            let a = started(&ranks[0], first);
            let b = started(&ranks[1], second);
            for rx in [a, b] {
                let error = rx.recv().unwrap().unwrap_err();
                assert!(error.contains(expected), "{error}");
            }
        }
    }

    #[test]
    fn a_failed_rank_ends_the_waits_of_the_others_at_once() {
        let ranks = LocalRanks::group(2, Duration::from_secs(60));
        let waiting = started(
            &ranks[0],
            CommRequest::AllReduce {
                seq: 0,
                line: 1,
                data: values(vec![1.0]),
            },
        );
        ranks[1].end_job("rank 1 failed".to_string());
        let error = waiting
            .recv_timeout(Duration::from_secs(5))
            .unwrap()
            .unwrap_err();
        assert_eq!(error, "the job ended: rank 1 failed");
        let later = started(&ranks[0], CommRequest::Recv { from: 1, tag: 0 });
        assert!(later.try_recv().unwrap().is_err());
    }

    #[test]
    fn a_receive_with_no_sender_fails_after_the_timeout_naming_both_ranks() {
        let ranks = LocalRanks::group(2, Duration::from_millis(100));
        let started_at = Instant::now();
        let rx = started(&ranks[1], CommRequest::Recv { from: 0, tag: 0 });
        let error = rx
            .recv_timeout(Duration::from_secs(5))
            .unwrap()
            .unwrap_err();
        assert!(started_at.elapsed() >= Duration::from_millis(100));
        assert!(
            error.contains("rank 1 waited") && error.contains("rank 0"),
            "{error}"
        );
        let rx = started(
            &ranks[0],
            CommRequest::AllReduce {
                seq: 0,
                line: 1,
                data: values(vec![1.0]),
            },
        );
        let error = rx
            .recv_timeout(Duration::from_secs(5))
            .unwrap()
            .unwrap_err();
        assert!(
            error.starts_with("allreduce: rank 0 waited") && error.contains("rank 1"),
            "{error}"
        );
    }
}
