//! The engine op of one communication statement.

use std::sync::Arc;

use dep_engine as engine;

use super::{CommCounters, CommRequest, Communicator};
use crate::slot::Slot;
use crate::tensor::{shape::fmt_shape, Tensor};

/// What a communication statement does, with its numbers fixed at push (see
/// [`CommKind::numbered`]: a statement recorded in a graph is numbered afresh on every replay).
#[derive(Clone, Debug)]
pub(crate) enum CommKind {
    /// `y = allreduce(x)`.
    AllReduce { seq: u64 },
    /// `broadcast(x, root)`, or `y = broadcast(x, root)`.
    Broadcast { seq: u64, root: usize },
    /// `y = reduce(x, root)`.
    Reduce { seq: u64, root: usize },
    /// `y = allgather(x)`.
    AllGather { seq: u64 },
    /// `send(x, to)`.
    Send { to: usize, tag: u64 },
    /// `x = recv(from, shape...)`.
    Recv {
        from: usize,
        tag: u64,
        shape: Vec<usize>,
    },
}

impl CommKind {
    /// The one rank it names, if it names one: the peer of a `send` or `recv`, the root of a
    /// `broadcast` or `reduce`.
    pub(crate) fn named_rank(&self) -> Option<usize> {
        match self {
            CommKind::AllReduce { .. } | CommKind::AllGather { .. } => None,
            CommKind::Broadcast { root, .. } | CommKind::Reduce { root, .. } => Some(*root),
            CommKind::Send { to, .. } => Some(*to),
            CommKind::Recv { from, .. } => Some(*from),
        }
    }

    /// The same communication numbered as this rank's next one of its kind: the next
    /// collective, or the next message to or from its peer. Every rank runs the same
    /// statements, so every rank gives a communication the same number, whether it is pushed
    /// by its statement or by a replay of a recorded graph.
    pub(crate) fn numbered(self, counters: &mut CommCounters) -> CommKind {
        match self {
            CommKind::AllReduce { .. } => CommKind::AllReduce {
                seq: counters.next_collective(),
            },
            CommKind::Broadcast { root, .. } => CommKind::Broadcast {
                seq: counters.next_collective(),
                root,
            },
            CommKind::Reduce { root, .. } => CommKind::Reduce {
                seq: counters.next_collective(),
                root,
            },
            CommKind::AllGather { .. } => CommKind::AllGather {
                seq: counters.next_collective(),
            },
            CommKind::Send { to, .. } => CommKind::Send {
                to,
                tag: counters.next_send(to),
            },
            CommKind::Recv { from, shape, .. } => CommKind::Recv {
                from,
                tag: counters.next_recv(from),
                shape,
            },
        }
    }
}

/// One communication statement, ready to push (numbered), or recorded in a graph (numbered
/// at each replay).
#[derive(Clone)]
pub(crate) struct CommOp {
    pub(crate) label: Arc<str>,
    pub(crate) line: u32,
    pub(crate) priority: i32,
    pub(crate) kind: CommKind,
    /// What it sends or reduces (none for `recv`).
    pub(crate) input: Option<Arc<Slot>>,
    /// Where the result goes (none for `send`).
    pub(crate) output: Option<Arc<Slot>>,
    pub(crate) comm: Arc<dyn Communicator>,
}

impl CommOp {
    /// This communication numbered as this rank's next of its kind (see [`CommKind::numbered`]).
    pub(crate) fn numbered(mut self, counters: &mut CommCounters) -> CommOp {
        self.kind = self.kind.numbered(counters);
        self
    }

    /// What it reads: its input, if it has one.
    pub(crate) fn inputs(&self) -> &[Arc<Slot>] {
        self.input.as_slice()
    }

    /// What it writes: its output, if it has one.
    pub(crate) fn outputs(&self) -> &[Arc<Slot>] {
        self.output.as_slice()
    }

    /// The asynchronous engine op: it reads the input, hands it to the communicator and
    /// returns; the communicator's callback stores the result and completes the op. Under the
    /// simulated engine it reports the bytes it moves as its cost.
    pub(crate) fn into_spec(self) -> engine::OpSpec {
        let CommOp {
            label,
            line,
            priority,
            kind,
            input,
            output,
            comm,
        } = self;
        let reads: Vec<engine::Var> = input.iter().map(|slot| slot.var.clone()).collect();
        let writes: Vec<engine::Var> = output.iter().map(|slot| slot.var.clone()).collect();
        let refused = Refused {
            comm: Some(comm.clone()),
            label: label.clone(),
        };
        engine::OpSpec::new_async(label, move |ctx, completion| {
            refused.started();
            let value = match input.as_ref().map(|slot| slot.get()).transpose() {
                Ok(value) => value,
                Err(message) => return completion.complete(Err(message)),
            };
            let shape = match (&kind, &value) {
                (CommKind::Recv { shape, .. }, _) => shape.clone(),
                // Every rank's values, stacked: one row per rank.
                (CommKind::AllGather { .. }, Some(value)) => std::iter::once(comm.size())
                    .chain(value.shape().iter().copied())
                    .collect(),
                (_, Some(value)) => value.shape().to_vec(),
                (_, None) => Vec::new(),
            };
            ctx.report_cost(engine::sim::Cost {
                bytes: bytes_moved(&kind, &shape, comm.size()),
                ..engine::sim::Cost::default()
            });
            let request = match request(&kind, line, value) {
                Ok(request) => request,
                Err(message) => return completion.complete(Err(message)),
            };
            comm.start(
                request,
                Box::new(move |result| {
                    completion.complete(result.and_then(|data| store(&kind, output, shape, data)))
                }),
            );
        })
        .reads(&reads)
        .writes(&writes)
        .device(engine::Device::Net)
        .line(line)
        .priority(priority)
    }
}

/// The request of a communication at `line` whose input (none for `recv`) is `value`: the
/// tensor itself, shared, not copied.
fn request(kind: &CommKind, line: u32, value: Option<Tensor>) -> Result<CommRequest, String> {
    if let CommKind::Recv { from, tag, .. } = kind {
        return Ok(CommRequest::Recv {
            from: *from,
            tag: *tag,
        });
    }
    let data = value.ok_or_else(|| "a communication that sends has no input".to_string())?;
    Ok(match kind {
        CommKind::AllReduce { seq } => CommRequest::AllReduce {
            seq: *seq,
            line,
            data,
        },
        CommKind::Broadcast { seq, root } => CommRequest::Broadcast {
            seq: *seq,
            line,
            root: *root,
            data,
        },
        CommKind::Reduce { seq, root } => CommRequest::Reduce {
            seq: *seq,
            line,
            root: *root,
            data,
        },
        CommKind::AllGather { seq } => CommRequest::AllGather {
            seq: *seq,
            line,
            data,
        },
        CommKind::Send { to, tag } => CommRequest::Send {
            to: *to,
            tag: *tag,
            data,
        },
        CommKind::Recv { from, tag, .. } => CommRequest::Recv {
            from: *from,
            tag: *tag,
        },
    })
}

/// Held by a communication op until it starts: dropped without starting (the op read a value
/// that failed, or was cancelled), it tells the communicator, so that this rank's other
/// communications, and its peers', fail at once rather than wait for the one that never comes.
struct Refused {
    /// `None` once the op started.
    comm: Option<Arc<dyn Communicator>>,
    label: Arc<str>,
}

impl Refused {
    /// The op started: nothing to tell.
    fn started(mut self) {
        self.comm = None;
    }
}

impl Drop for Refused {
    fn drop(&mut self) {
        if let Some(comm) = self.comm.take() {
            comm.abandon(format!("`{}` did not run", self.label));
        }
    }
}

/// Stores what a communication received in its output.
fn store(
    kind: &CommKind,
    output: Option<Arc<Slot>>,
    shape: Vec<usize>,
    data: Vec<f32>,
) -> Result<(), String> {
    let Some(output) = output else {
        return Ok(());
    };
    let expected: usize = shape.iter().product();
    if data.len() != expected {
        let from = match kind {
            CommKind::Recv { from, .. } => format!("rank {from} sent"),
            _ => "got".to_string(),
        };
        return Err(format!(
            "{from} {} values, but shape {} holds {expected}",
            data.len(),
            fmt_shape(&shape)
        ));
    }
    let value = Tensor::from_vec(shape, data).map_err(|error| error.message().to_string())?;
    output.set(value);
    Ok(())
}

/// The bytes a communication moves over one rank's link: a ring allreduce sends 2(n-1)/n of
/// the data, a ring allgather (n-1)/n of what it gathers (`shape` is the gathered shape); a
/// broadcast, a reduce, a send and a receive move it once.
fn bytes_moved(kind: &CommKind, shape: &[usize], ranks: usize) -> f64 {
    let bytes = (shape.iter().product::<usize>() * std::mem::size_of::<f32>()) as f64;
    let n = ranks.max(1) as f64;
    match kind {
        CommKind::AllReduce { .. } => 2.0 * (n - 1.0) / n * bytes,
        CommKind::AllGather { .. } => (n - 1.0) / n * bytes,
        _ => bytes,
    }
}
