//! Ranks over MPI (built with `--features mpi`, started by `mpirun`): the [`Communicator`] of a
//! process that is one rank of an MPI job.
//!
//! One progress thread owns MPI: it initializes it (`MPI_THREAD_FUNNELED`), makes every MPI
//! call, and finalizes or aborts it; no other thread calls MPI. A communication op's start
//! function sends its request to the thread over a channel and returns. The thread posts
//! nonblocking requests (`MPI_Isend`, `MPI_Iallreduce`, `MPI_Ibcast`, `MPI_Ireduce`,
//! `MPI_Iallgather`; receives are matched
//! with `MPI_Improbe` as their messages arrive), tests them while it waits for more, and calls
//! each op's `CommDone` from that thread as its request finishes, which completes the op.
//!
//! Agreement: before a collective moves any data, every rank's side of it (which collective, its
//! root, the shape of its values: a `CollectiveHeader`, a few words) is gathered on a
//! communicator of their own (`MPI_Iallgather`, the same size on every rank, so it always
//! matches). The collective is posted only if every rank's agrees; otherwise every rank fails
//! its op with the same error, saying what differs, and posts nothing (two ranks' different
//! sizes would be MPI's own error, which ends the job without naming the statement; a different
//! shape or collective of the same size would give wrong values silently).
//!
//! Buffers: a posted request borrows its buffers until it completes, so the thread runs in
//! epochs: an `mpi::request::scope` with the [`buffers::EpochBuffers`] its requests borrow,
//! ended as soon as no request is in flight. A request sends straight from the input's tensor
//! (shared, not copied) and receives into a buffer of the thread's pool. A result that completes
//! with nothing else in flight ends the epoch and becomes the output's tensor as it is (no
//! copy); one that completes while others are still in flight is copied out at once, so that
//! no op waits for another's transfer. The tensors sent go back to the pool once no variable
//! holds them: a chain of `x = allreduce(x)` moves its values through two buffers, copying
//! nothing outside MPI. While requests stay in flight back to back an epoch does not end, and
//! the tensors it sent stay alive until it does (the next moment with nothing in flight).
//!
//! Pace: the thread spins on MPI and its inbox briefly after each progress, then sleeps on its
//! inbox (see [`pace`]).

mod buffers;
mod pace;

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::environment::Threading;
use mpi::point_to_point::MatchedReceiveVec;
use mpi::request::{LocalScope, Request};
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator as _, CommunicatorCollectives, Destination, Root, Source};

use dep_interp::comm::{
    disagreement, fails_on_every_rank, timeout, timeout_message, CollectiveHeader, CommDone,
    CommRequest, Communicator,
};

use buffers::{EpochBuffers, Pool, Received};
use pace::{Disconnected, Pacer};

/// MPI tags run from 0 to at least 32767 (`MPI_TAG_UB`); message numbers wrap around there.
const TAG_MODULUS: u64 = 32768;

/// What the progress thread is asked to do.
enum Command {
    /// Start a communication.
    Start(CommRequest, CommDone),
    /// This rank is failing (a communication of it will never start): fail every
    /// communication now, and every later one at once.
    Abandon(String),
    /// Gather every rank's bytes on rank 0 (in rank order), which gets them on the channel;
    /// the others get `None`. Blocking: given once every communication is over.
    Gather(Vec<u8>, mpsc::Sender<Option<Vec<Vec<u8>>>>),
    /// End the job now: `MPI_Abort` with this code.
    Abort(i32),
    /// Finalize MPI once every communication is over, and end.
    Finish,
}

/// This process's rank of an MPI job, and the thread that talks MPI for it.
pub(crate) struct MpiRanks {
    rank: usize,
    size: usize,
    /// How many ranks of the job run on this machine (this one included).
    local_size: usize,
    commands: Mutex<mpsc::Sender<Command>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl MpiRanks {
    /// Starts the progress thread, which initializes MPI; an error says why MPI did not start.
    pub(crate) fn start() -> Result<Arc<MpiRanks>, String> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (commands, inbox) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("dep-mpi".into())
            .spawn(move || progress(ready_tx, inbox))
            .map_err(|error| format!("cannot start the MPI thread: {error}"))?;
        let (rank, size, local_size) = ready_rx
            .recv()
            .map_err(|_| "MPI did not start".to_string())??;
        Ok(Arc::new(MpiRanks {
            rank,
            size,
            local_size,
            commands: Mutex::new(commands),
            thread: Mutex::new(Some(thread)),
        }))
    }

    fn send(&self, command: Command) -> bool {
        self.commands
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .send(command)
            .is_ok()
    }

    /// How many ranks of the job run on this machine, this one included (MPI's shared-memory
    /// group: `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`).
    pub(crate) fn local_size(&self) -> usize {
        self.local_size
    }

    /// Finalizes MPI (after every communication is over) and waits for the progress thread.
    pub(crate) fn finish(&self) {
        self.send(Command::Finish);
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    /// Gathers every rank's `bytes` on rank 0 (see [`Command::Gather`]): every rank's, in rank
    /// order, on rank 0; `None` on the others. Call it on every rank, after the run.
    pub(crate) fn gather(&self, bytes: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        let (reply, gathered) = mpsc::channel();
        if !self.send(Command::Gather(bytes, reply)) {
            return None;
        }
        gathered.recv().ok().flatten()
    }

    /// Ends the whole job with `code` (`MPI_Abort`): every rank stops. Write the error first.
    pub(crate) fn abort(&self, code: i32) -> ! {
        if self.send(Command::Abort(code)) {
            // MPI_Abort ends this process; should it not within seconds, leave anyway.
            std::thread::sleep(Duration::from_secs(10));
        }
        std::process::exit(code)
    }
}

impl Communicator for MpiRanks {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn abandon(&self, what: String) {
        self.send(Command::Abandon(format!(
            "rank {} failed ({what})",
            self.rank
        )));
    }

    fn start(&self, request: CommRequest, done: CommDone) {
        if let Err(mpsc::SendError(Command::Start(_, done))) = self
            .commands
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .send(Command::Start(request, done))
        {
            done(Err("MPI has already been finalized".to_string()));
        }
    }
}

/// The progress thread: initializes MPI, serves requests epoch after epoch, and finalizes or
/// aborts MPI.
fn progress(
    ready: mpsc::Sender<Result<(usize, usize, usize), String>>,
    inbox: mpsc::Receiver<Command>,
) {
    let Some((universe, _)) = mpi::initialize_with_threading(Threading::Funneled) else {
        let _ = ready.send(Err("MPI was already initialized".to_string()));
        return;
    };
    let world = universe.world();
    // Views travel on a communicator of their own, apart from the script's messages; so do the
    // collectives' headers, which may then run ahead of the collectives themselves.
    let views = world.duplicate();
    let headers = world.duplicate();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let local_ranks = world.split_shared(world.rank()).size() as usize;
    let _ = ready.send(Ok((rank, size, local_ranks)));
    let mut state = Progress {
        pool: Pool::default(),
        deferred: Vec::new(),
        pacer: Pacer::new(local_ranks),
        rank,
        size,
        views,
        headers,
        timeout: timeout(),
        next_collective: 0,
        next_header: 0,
        held: BTreeMap::new(),
        agreeing: BTreeMap::new(),
        receives: Vec::new(),
        finishing: false,
        ended: None,
    };
    loop {
        let buffers = EpochBuffers::default();
        let end = mpi::request::scope(|scope| state.epoch(&world, scope, &buffers, &inbox));
        state.after_epoch(buffers);
        match end {
            EpochEnd::Drained => {}
            EpochEnd::Finish => break,
        }
    }
    // The views' communicator is freed before MPI is finalized.
    drop(state);
    drop(universe);
}

/// How an epoch ended. (An abort ends none: `MPI_Abort` is called inside the epoch, while the
/// requests still in flight are alive, since leaving the scope with one would panic.)
enum EpochEnd {
    /// Nothing in flight: give the buffers back and go on.
    Drained,
    /// Asked to finish, and nothing is left.
    Finish,
}

/// A communication waiting on this thread: what it is, for whom, since when.
struct Waiting {
    what: &'static str,
    peer: Option<usize>,
    done: CommDone,
    since: Instant,
}

/// A receive whose message has not arrived.
struct Receive {
    from: usize,
    tag: u64,
    waiting: Waiting,
}

/// A posted request and who waits for it.
struct InFlight<'a, 's> {
    request: Request<'a, [f32], &'s LocalScope<'a>>,
    /// The bytes it moves (what it sends, or receives).
    bytes: usize,
    result: Outcome,
    waiting: Waiting,
}

/// Posted requests that will never be tested again (their op failed): kept until `MPI_Abort`,
/// since a request dropped before it completes panics.
#[derive(Default)]
struct Abandoned<'a, 's> {
    /// Collectives and sends.
    data: Vec<Request<'a, [f32], &'s LocalScope<'a>>>,
    /// Collectives' headers.
    headers: Vec<Request<'a, [u64], &'s LocalScope<'a>>>,
}

impl Abandoned<'_, '_> {
    fn is_empty(&self) -> bool {
        self.data.is_empty() && self.headers.is_empty()
    }
}

/// The gathering of every rank's header of collective `seq`.
struct HeaderFlight<'a, 's> {
    seq: u64,
    request: Request<'a, [u64], &'s LocalScope<'a>>,
}

/// A collective whose header went out: what it is and who waits, and, once every rank's header
/// came back, whether they agree.
struct Agreeing {
    request: CommRequest,
    waiting: Waiting,
    verdict: Option<Result<(), String>>,
}

/// What a completed request gives its op.
#[derive(Clone, Copy)]
enum Outcome {
    /// Nothing (a send).
    Nothing,
    /// The receive buffer, lent from the epoch's buffers (an allreduce, a broadcast, ...).
    Buffer(Received),
    /// A copy of the request's buffer: a reduce's own values on a rank that is not its root.
    Copy,
}

/// What the progress thread keeps across epochs.
struct Progress {
    /// Buffers to receive into, kept across epochs.
    pool: Pool,
    /// Results to hand over once the epoch ends, where they lie in its receive buffers.
    deferred: Vec<(CommDone, Received)>,
    pacer: Pacer,
    rank: usize,
    size: usize,
    /// The communicator the views are gathered on.
    views: SimpleCommunicator,
    timeout: Duration,
    /// The communicator the collectives' headers are gathered on.
    headers: SimpleCommunicator,
    /// The number of the next collective to post: collectives are posted in push order.
    next_collective: u64,
    /// The number of the next collective whose header to gather, in push order too.
    next_header: u64,
    /// Collectives that came before their turn to send their header.
    held: BTreeMap<u64, (CommRequest, Waiting)>,
    /// Collectives whose header went out, until they are posted.
    agreeing: BTreeMap<u64, Agreeing>,
    receives: Vec<Receive>,
    finishing: bool,
    /// Why this rank is failing, once a communication of it will never start: every
    /// communication fails from then on.
    ended: Option<String>,
}

impl Progress {
    fn epoch<'a, 's>(
        &mut self,
        world: &SimpleCommunicator,
        scope: &'s LocalScope<'a>,
        buffers: &'a EpochBuffers,
        inbox: &mpsc::Receiver<Command>,
    ) -> EpochEnd {
        let mut in_flight: Vec<InFlight<'a, 's>> = Vec::new();
        let mut header_flights: Vec<HeaderFlight<'a, 's>> = Vec::new();
        // Requests whose op failed on the timeout: still posted, so kept until MPI_Abort.
        let mut abandoned = Abandoned::default();
        loop {
            let busy = !in_flight.is_empty()
                || !header_flights.is_empty()
                || !self.agreeing.is_empty()
                || !self.receives.is_empty();
            if !busy && self.finishing && self.held.is_empty() {
                if !abandoned.is_empty() {
                    // Requests that never completed: MPI cannot be finalized.
                    world.abort(1);
                }
                return EpochEnd::Finish;
            }
            if in_flight.is_empty()
                && header_flights.is_empty()
                && abandoned.is_empty()
                && buffers.used()
            {
                return EpochEnd::Drained;
            }
            let bytes_in_flight = in_flight.iter().map(|flight| flight.bytes).sum::<usize>()
                + header_flights.len() * CollectiveHeader::WORDS * 8 * self.size;
            let in_flight_now = busy.then_some(bytes_in_flight);
            let first = match self.pacer.wait(in_flight_now, inbox) {
                Ok(first) => first,
                // The session is gone: finish.
                Err(Disconnected) => Some(Command::Finish),
            };
            if !busy {
                // Open MPI progresses only inside MPI calls: a peer's transfer may still need
                // this rank after its own requests are over (a rendezvous, a collective's tree).
                let _ = world.any_process().immediate_probe();
            }
            let commands = pace::drain(first, inbox);
            let mut progressed = !commands.is_empty();
            for command in commands {
                match command {
                    Command::Start(request, done) => {
                        self.accept(request, done, world, scope, buffers, &mut in_flight)
                    }
                    Command::Abandon(reason) => {
                        self.end(reason, &mut in_flight, &mut header_flights, &mut abandoned);
                    }
                    Command::Gather(bytes, reply) => {
                        let _ = reply.send(self.gather(bytes));
                    }
                    // Here, with every request in flight alive: MPI_Abort ends the process.
                    Command::Abort(code) => world.abort(code),
                    Command::Finish => self.finishing = true,
                }
            }
            self.send_headers(scope, buffers, &mut header_flights);
            progressed |= self.test_headers(&mut header_flights, &mut abandoned);
            progressed |= self.post_agreed(world, scope, buffers, &mut in_flight);
            let headers_in_flight = !header_flights.is_empty();
            progressed |= self.test_in_flight(&mut in_flight, headers_in_flight, &mut abandoned);
            progressed |= self.match_receives(world);
            self.expire_held();
            if progressed {
                self.pacer.progressed();
            }
        }
    }

    /// Hands over the results kept for the end of the epoch (each becomes its output's tensor
    /// as it is), then keeps the buffers no one holds any more for later requests.
    fn after_epoch(&mut self, buffers: EpochBuffers) {
        let (received, sent) = buffers.into_parts();
        let mut received: Vec<Option<Vec<f32>>> = received.into_iter().map(Some).collect();
        for (done, Received(at)) in self.deferred.drain(..) {
            let result = received.get_mut(at).and_then(Option::take);
            done(result.ok_or_else(|| "MPI lost the result of this communication".to_string()));
        }
        // After the results: the variables they replace have let go of the tensors sent.
        for tensor in sent {
            self.pool.give_tensor(tensor);
        }
        for buffer in received.into_iter().flatten() {
            self.pool.give(buffer);
        }
    }

    /// Takes a new request: posts a send at once, holds a collective until its turn, and keeps
    /// a receive until its message arrives.
    fn accept<'a, 's>(
        &mut self,
        request: CommRequest,
        done: CommDone,
        world: &SimpleCommunicator,
        scope: &'s LocalScope<'a>,
        buffers: &'a EpochBuffers,
        in_flight: &mut Vec<InFlight<'a, 's>>,
    ) {
        if let Some(reason) = &self.ended {
            return done(Err(format!("the job is ending: {reason}")));
        }
        let since = Instant::now();
        match request {
            CommRequest::Send { to, tag, data } => {
                let bytes = std::mem::size_of_val(data.data());
                let buffer = buffers.send(data);
                let request = world.process_at_rank(to as i32).immediate_send_with_tag(
                    scope,
                    buffer,
                    mpi_tag(tag),
                );
                in_flight.push(InFlight {
                    request,
                    bytes,
                    result: Outcome::Nothing,
                    waiting: Waiting {
                        what: "send",
                        peer: Some(to),
                        done,
                        since,
                    },
                });
            }
            CommRequest::Recv { from, tag } => self.receives.push(Receive {
                from,
                tag,
                waiting: Waiting {
                    what: "recv",
                    peer: Some(from),
                    done,
                    since,
                },
            }),
            CommRequest::AllReduce { seq, .. }
            | CommRequest::Broadcast { seq, .. }
            | CommRequest::Reduce { seq, .. }
            | CommRequest::AllGather { seq, .. } => {
                let what = match request {
                    CommRequest::AllReduce { .. } => "allreduce",
                    CommRequest::Broadcast { .. } => "broadcast",
                    CommRequest::Reduce { .. } => "reduce",
                    _ => "allgather",
                };
                let waiting = Waiting {
                    what,
                    peer: None,
                    done,
                    since,
                };
                self.held.insert(seq, (request, waiting));
            }
        }
    }

    /// Sends the headers of the collectives held, in push order: each gathers every rank's
    /// header of the collective on their communicator (see the module's doc).
    fn send_headers<'a, 's>(
        &mut self,
        scope: &'s LocalScope<'a>,
        buffers: &'a EpochBuffers,
        header_flights: &mut Vec<HeaderFlight<'a, 's>>,
    ) {
        while let Some((request, waiting)) = self.held.remove(&self.next_header) {
            let seq = self.next_header;
            self.next_header += 1;
            let Some(header) = request.header() else {
                (waiting.done)(Err("a message was taken for a collective".to_string()));
                continue;
            };
            let (own, gathered) = buffers.header(&header.encode(), self.size);
            header_flights.push(HeaderFlight {
                seq,
                request: self.headers.immediate_all_gather_into(scope, own, gathered),
            });
            self.agreeing.insert(
                seq,
                Agreeing {
                    request,
                    waiting,
                    verdict: None,
                },
            );
        }
    }

    /// Compares every rank's header of the collectives whose headers came back; fails those
    /// waited for past the timeout (a rank never reached the collective).
    fn test_headers<'a, 's>(
        &mut self,
        header_flights: &mut Vec<HeaderFlight<'a, 's>>,
        abandoned: &mut Abandoned<'a, 's>,
    ) -> bool {
        let mut progressed = false;
        for HeaderFlight { seq, request } in std::mem::take(header_flights) {
            match request.test_with_data() {
                Ok((_, words)) => {
                    progressed = true;
                    let headers: Option<Vec<CollectiveHeader>> = words
                        .chunks(CollectiveHeader::WORDS)
                        .map(CollectiveHeader::decode)
                        .collect();
                    let verdict = match headers {
                        Some(headers) => match disagreement(seq, &headers) {
                            Some(message) => Err(message),
                            None => Ok(()),
                        },
                        None => Err(fails_on_every_rank(format!(
                            "collective number {}: a rank sent a header this rank cannot read (is every rank the same dep?)",
                            seq + 1
                        ))),
                    };
                    if let Some(agreeing) = self.agreeing.get_mut(&seq) {
                        agreeing.verdict = Some(verdict);
                    }
                }
                Err(request) => {
                    let overdue = self
                        .agreeing
                        .get(&seq)
                        .is_none_or(|agreeing| agreeing.waiting.since.elapsed() >= self.timeout);
                    if overdue {
                        if let Some(agreeing) = self.agreeing.remove(&seq) {
                            let waiting = agreeing.waiting;
                            let message = timeout_message(
                                waiting.what,
                                self.rank,
                                None,
                                waiting.since.elapsed(),
                            );
                            (waiting.done)(Err(message));
                        }
                        abandoned.headers.push(request);
                    } else {
                        header_flights.push(HeaderFlight { seq, request });
                    }
                }
            }
        }
        progressed
    }

    /// Posts the collectives whose every rank's header agreed, in push order (MPI matches
    /// collectives by the order they are called); fails those whose headers disagreed, which
    /// every rank then leaves out alike.
    fn post_agreed<'a, 's>(
        &mut self,
        world: &SimpleCommunicator,
        scope: &'s LocalScope<'a>,
        buffers: &'a EpochBuffers,
        in_flight: &mut Vec<InFlight<'a, 's>>,
    ) -> bool {
        let mut progressed = false;
        while self
            .agreeing
            .get(&self.next_collective)
            .is_some_and(|agreeing| agreeing.verdict.is_some())
        {
            let Some(Agreeing {
                request,
                waiting,
                verdict: Some(verdict),
            }) = self.agreeing.remove(&self.next_collective)
            else {
                break;
            };
            self.next_collective += 1;
            progressed = true;
            match verdict {
                Ok(()) => self.post_collective(request, waiting, world, scope, buffers, in_flight),
                Err(message) => (waiting.done)(Err(message)),
            }
        }
        progressed
    }

    /// Posts a collective every rank agreed on.
    fn post_collective<'a, 's>(
        &mut self,
        request: CommRequest,
        waiting: Waiting,
        world: &SimpleCommunicator,
        scope: &'s LocalScope<'a>,
        buffers: &'a EpochBuffers,
        in_flight: &mut Vec<InFlight<'a, 's>>,
    ) {
        let bytes = match &request {
            CommRequest::AllReduce { data, .. }
            | CommRequest::Broadcast { data, .. }
            | CommRequest::Reduce { data, .. }
            | CommRequest::Send { data, .. } => std::mem::size_of_val(data.data()),
            CommRequest::AllGather { data, .. } => std::mem::size_of_val(data.data()) * self.size,
            CommRequest::Recv { .. } => 0,
        };
        let (request, result) = match request {
            CommRequest::AllReduce { data, .. } => {
                let (at, receive) = buffers.receive(&mut self.pool, data.len());
                let send = buffers.send(data);
                let request =
                    world.immediate_all_reduce_into(scope, send, receive, SystemOperation::sum());
                (request, Outcome::Buffer(at))
            }
            CommRequest::Broadcast { root, data, .. } => {
                let (at, buffer) = buffers.copy(&mut self.pool, data.data());
                let request = world
                    .process_at_rank(root as i32)
                    .immediate_broadcast_into(scope, buffer);
                (request, Outcome::Buffer(at))
            }
            // The root's buffer gets the sum; another rank's request holds its
            // own values, which it gets back.
            CommRequest::Reduce { root, data, .. } if root == self.rank => {
                let (at, receive) = buffers.receive(&mut self.pool, data.len());
                let send = buffers.send(data);
                let request = world
                    .process_at_rank(root as i32)
                    .immediate_reduce_into_root(scope, send, receive, SystemOperation::sum());
                (request, Outcome::Buffer(at))
            }
            CommRequest::Reduce { root, data, .. } => {
                let send = buffers.send(data);
                let request = world.process_at_rank(root as i32).immediate_reduce_into(
                    scope,
                    send,
                    SystemOperation::sum(),
                );
                (request, Outcome::Copy)
            }
            CommRequest::AllGather { data, .. } => {
                let (at, receive) = buffers.receive(&mut self.pool, data.len() * self.size);
                let send = buffers.send(data);
                let request = world.immediate_all_gather_into(scope, send, receive);
                (request, Outcome::Buffer(at))
            }
            CommRequest::Send { .. } | CommRequest::Recv { .. } => {
                return (waiting.done)(Err("a message was taken for a collective".to_string()));
            }
        };
        in_flight.push(InFlight {
            request,
            bytes,
            result,
            waiting,
        });
    }

    /// Gathers every rank's bytes on rank 0, blocking (see [`Command::Gather`]).
    fn gather(&self, bytes: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        if self.rank != 0 {
            self.views.process_at_rank(0).send(&bytes[..]);
            return None;
        }
        let mut gathered = vec![bytes];
        for rank in 1..self.size {
            let (bytes, _) = self.views.process_at_rank(rank as i32).receive_vec::<u8>();
            gathered.push(bytes);
        }
        Some(gathered)
    }

    /// Fails every communication of this rank, held, waiting for a message or in flight, because
    /// of `reason`, and every later one (see [`Command::Abandon`]). Requests already posted stay
    /// with MPI until the job ends.
    fn end<'a, 's>(
        &mut self,
        reason: String,
        in_flight: &mut Vec<InFlight<'a, 's>>,
        header_flights: &mut Vec<HeaderFlight<'a, 's>>,
        abandoned: &mut Abandoned<'a, 's>,
    ) {
        let message = format!("the job is ending: {reason}");
        self.ended.get_or_insert(reason);
        let held = std::mem::take(&mut self.held)
            .into_values()
            .map(|(_, waiting)| waiting);
        let agreeing = std::mem::take(&mut self.agreeing)
            .into_values()
            .map(|agreeing| agreeing.waiting);
        let receives = self.receives.drain(..).map(|receive| receive.waiting);
        for waiting in held.chain(agreeing).chain(receives).collect::<Vec<_>>() {
            (waiting.done)(Err(message.clone()));
        }
        for flight in in_flight.drain(..) {
            (flight.waiting.done)(Err(message.clone()));
            abandoned.data.push(flight.request);
        }
        abandoned
            .headers
            .extend(header_flights.drain(..).map(|flight| flight.request));
    }

    /// Finishes the requests that completed, and fails those that waited past the timeout. A
    /// result that completes with nothing else in flight (no request, and no header:
    /// `headers_in_flight`) is kept in its buffer for the end of the epoch, which comes next
    /// (see the module's doc); the others are copied out now.
    fn test_in_flight<'a, 's>(
        &mut self,
        in_flight: &mut Vec<InFlight<'a, 's>>,
        headers_in_flight: bool,
        abandoned: &mut Abandoned<'a, 's>,
    ) -> bool {
        let mut completed = Vec::new();
        let mut still = Vec::with_capacity(in_flight.len());
        for flight in in_flight.drain(..) {
            let InFlight {
                request,
                bytes,
                result,
                waiting,
            } = flight;
            match request.test_with_data() {
                Ok((_, data)) => completed.push((result, data, waiting)),
                Err(request) if waiting.since.elapsed() >= self.timeout => {
                    let message = timeout_message(
                        waiting.what,
                        self.rank,
                        waiting.peer,
                        waiting.since.elapsed(),
                    );
                    (waiting.done)(Err(message));
                    abandoned.data.push(request);
                }
                Err(request) => still.push(InFlight {
                    request,
                    bytes,
                    result,
                    waiting,
                }),
            }
        }
        *in_flight = still;
        let epoch_ends = in_flight.is_empty() && !headers_in_flight && abandoned.is_empty();
        let progressed = !completed.is_empty();
        for (result, data, waiting) in completed {
            match result {
                Outcome::Buffer(at) if epoch_ends => self.deferred.push((waiting.done, at)),
                Outcome::Buffer(_) | Outcome::Copy => (waiting.done)(Ok(data.to_vec())),
                Outcome::Nothing => (waiting.done)(Ok(Vec::new())),
            }
        }
        progressed
    }

    /// Receives the messages that arrived for waiting receives; fails those past the timeout.
    fn match_receives(&mut self, world: &SimpleCommunicator) -> bool {
        let mut progressed = false;
        let mut index = 0;
        while index < self.receives.len() {
            let receive = &self.receives[index];
            let matched = world
                .process_at_rank(receive.from as i32)
                .immediate_matched_probe_with_tag(mpi_tag(receive.tag));
            if let Some(matched) = matched {
                let receive = self.receives.remove(index);
                let (data, _) = matched.matched_receive_vec::<f32>();
                (receive.waiting.done)(Ok(data));
                progressed = true;
            } else if receive.waiting.since.elapsed() >= self.timeout {
                let receive = self.receives.remove(index);
                let waited = receive.waiting.since.elapsed();
                (receive.waiting.done)(Err(timeout_message(
                    "recv",
                    self.rank,
                    Some(receive.from),
                    waited,
                )));
            } else {
                index += 1;
            }
        }
        progressed
    }

    /// Fails collectives held past the timeout, before their header went out or after every
    /// rank's came back (an earlier one never started here: its op failed or was skipped, or
    /// its header was not answered).
    fn expire_held(&mut self) {
        let timeout = self.timeout;
        let expired: Vec<u64> = self
            .held
            .iter()
            .filter(|(_, (_, waiting))| waiting.since.elapsed() >= timeout)
            .map(|(seq, _)| *seq)
            .collect();
        let agreed: Vec<u64> = self
            .agreeing
            .iter()
            .filter(|(_, agreeing)| {
                agreeing.verdict.is_some() && agreeing.waiting.since.elapsed() >= timeout
            })
            .map(|(seq, _)| *seq)
            .collect();
        let mut overdue: Vec<(u64, Waiting)> = Vec::new();
        for seq in expired {
            if let Some((_, waiting)) = self.held.remove(&seq) {
                overdue.push((seq, waiting));
            }
        }
        for seq in agreed {
            if let Some(agreeing) = self.agreeing.remove(&seq) {
                overdue.push((seq, agreeing.waiting));
            }
        }
        for (seq, waiting) in overdue {
            let message = format!(
                "{}: collective {seq} of rank {} waited {:.1} s for the collectives pushed before it on this rank (DEP_COMM_TIMEOUT)",
                waiting.what,
                self.rank,
                waiting.since.elapsed().as_secs_f64()
            );
            (waiting.done)(Err(message));
        }
    }
}

fn mpi_tag(tag: u64) -> i32 {
    (tag % TAG_MODULUS) as i32
}
