//! The run summary: ops, wall time, busy time per worker, parallelism, the critical path, and
//! for GPU runs the kernels' busy time and the device's idle time between dependent kernels.

use dep_engine::{OpId, OpState};

use crate::replay::{Lane, Replay};

/// Figures of a run, computed from its [`Replay`].
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
    /// The critical path's ops, in order: (op, "statement (line N)").
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
    /// The gaps of a replay, or `None` when no dependent pair ran on a device.
    pub fn of(replay: &Replay) -> Option<KernelGaps> {
        let gaps: Vec<u64> = replay
            .edges()
            .iter()
            .filter_map(|edge| {
                let from = replay.op(edge.from)?.device_span.as_ref()?;
                let to = replay.op(edge.to)?.device_span.as_ref()?;
                Some(to.start_ns.saturating_sub(from.end_ns))
            })
            .collect();
        let n_pairs = gaps.len();
        (n_pairs > 0).then(|| KernelGaps {
            n_pairs,
            mean_ns: gaps.iter().sum::<u64>() / n_pairs as u64,
            max_ns: gaps.iter().copied().max().unwrap_or(0),
        })
    }
}

impl Summary {
    /// The summary of a replay.
    pub fn of(replay: &Replay) -> Summary {
        let (start, end) = replay.span_ns();
        let wall_ns = end - start;
        let busy_ns: Vec<(String, u64)> = replay
            .lanes()
            .into_iter()
            .map(|worker| {
                let busy = replay
                    .ops()
                    .iter()
                    .filter(|op| op.worker == Some(worker))
                    .filter_map(|op| op.duration_ns())
                    .sum();
                (replay.worker_name(worker), busy)
            })
            .collect();
        let total_busy: u64 = busy_ns.iter().map(|(_, busy)| busy).sum();
        let device_busy_ns = replay
            .timeline_lanes()
            .into_iter()
            .filter(|lane| matches!(lane, Lane::Device(_)))
            .map(|lane| {
                let bars = replay.bars(&lane);
                let busy = bars.iter().map(|bar| bar.end_ns - bar.start_ns).sum();
                (replay.lane_name(&lane), busy)
            })
            .collect();
        let mut n_by_state: Vec<(OpState, usize)> = Vec::new();
        for op in replay.ops() {
            match n_by_state.iter_mut().find(|(state, _)| *state == op.state) {
                Some((_, count)) => *count += 1,
                None => n_by_state.push((op.state, 1)),
            }
        }
        n_by_state.sort_by_key(|(state, _)| *state as u8);
        let critical_path: Vec<(OpId, String)> = replay
            .critical_path()
            .into_iter()
            .filter_map(|id| replay.op(id).map(|op| (id, op.describe())))
            .filter(|(id, _)| {
                replay
                    .op(*id)
                    .is_some_and(|op| !crate::is_internal_op(&op.label))
            })
            .collect();
        let critical_path_ns = critical_path
            .iter()
            .filter_map(|(id, _)| replay.op(*id)?.duration_ns())
            .sum();
        Summary {
            n_ops: replay.ops().len(),
            n_by_state,
            wall_ns,
            parallelism: if wall_ns == 0 {
                0.0
            } else {
                total_busy as f64 / wall_ns as f64
            },
            busy_ns,
            critical_path_ns,
            critical_path,
            device_busy_ns,
            kernel_gaps: KernelGaps::of(replay),
        }
    }
}
