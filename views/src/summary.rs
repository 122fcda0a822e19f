//! The run summary: ops, wall time, busy time per worker, parallelism, the critical path, and
//! for GPU runs the kernels' busy time and the device's idle time between dependent kernels.

use dep_engine::{OpId, OpState};

use crate::fold::{NoTrace, RunFold};
use crate::replay::Replay;
use crate::util::describe_op_at;

/// Figures of a run, folded from its events in one pass ([`Summary::of`] for a replay, or
/// [`RunFold::finish`] while the run streams).
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// How many ops were pushed.
    pub n_ops: usize,
    /// How many ended in each state (only states that occur, in state order).
    pub n_by_state: Vec<(OpState, usize)>,
    /// From the first push to the last finish.
    pub wall_ns: u64,
    /// Time each worker spent running ops: (worker name, ns), one per lane.
    pub busy_ns: Vec<(String, u64)>,
    /// Total busy time over wall time: how many workers were busy on average.
    pub parallelism: f64,
    /// The sum of op durations along the critical path: no schedule can beat it.
    pub critical_path_ns: u64,
    /// How many ops the critical path has.
    pub critical_path_ops: usize,
    /// The critical path's ops, in order: (op, "statement (line N)"); only its first three and
    /// last three when it has more than eight.
    pub critical_path: Vec<(OpId, String)>,
    /// Time each device lane spent running kernels: (lane name, ns); empty without device spans.
    pub device_busy_ns: Vec<(String, u64)>,
    /// The device's idle time between dependent kernels, when some ran.
    pub kernel_gaps: Option<KernelGaps>,
}

/// How long the device sat idle between dependent kernels: for every dependency edge whose two
/// ops both ran device work, the time from the end of the producer's kernels to the start of the
/// consumer's (zero when the consumer's started first, which cannot happen on one stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelGaps {
    /// How many dependent pairs.
    pub n_pairs: usize,
    /// Their mean gap.
    pub mean_ns: u64,
    /// Their largest gap.
    pub max_ns: u64,
}

impl KernelGaps {
    /// The figures of some gaps, or `None` when there are none.
    pub(crate) fn of_pairs(gaps: impl Iterator<Item = u64>) -> Option<KernelGaps> {
        let (mut n_pairs, mut total, mut max_ns) = (0usize, 0u64, 0u64);
        for gap in gaps {
            n_pairs += 1;
            total += gap;
            max_ns = max_ns.max(gap);
        }
        (n_pairs > 0).then(|| KernelGaps {
            n_pairs,
            mean_ns: total / n_pairs as u64,
            max_ns,
        })
    }
}

impl Summary {
    /// The summary of a replay, in one pass over its events.
    pub fn of(replay: &Replay) -> Summary {
        let mut fold = RunFold::new();
        for event in replay.events() {
            fold.push(event, &mut NoTrace);
        }
        fold.finish(replay.worker_names(), &mut NoTrace)
    }

    /// Names the critical path's ops by the places `replay` gives them (`r1:7` in a trace of
    /// several ranks, see [`Replay::name_ranks`]; `cell[2]:3`), as its table and steps name
    /// them: a fold describes an op by its line alone, which does not tell whose line it is.
    /// An op the replay does not hold (before a `--last` cut) keeps its description.
    pub fn name_places_from(&mut self, replay: &Replay) {
        for (id, described) in &mut self.critical_path {
            if let Some(op) = replay.op(*id) {
                if let Some(place) = op.place.as_deref() {
                    *described = describe_op_at(&op.label, op.line, Some(place));
                }
            }
        }
    }
}
