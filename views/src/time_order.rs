//! A run's events in the order of their times, so that a stepper moving forward moves forward in
//! time and the state it shows "at T" is the state at T.
//!
//! The engine's log holds events in the order they were logged, which is not quite the order of
//! their times: a thread stamps an event, then logs it, and may be preempted in between, and a
//! releasing op's grants are stamped with its end though logged after it (a worker preempted
//! there logs them late, behind events of later times). Logged late, a grant is stamped earlier
//! than it happened, sometimes earlier than its op's own push (the op was pushed while the
//! releasing thread stood between its end and its grants). So each event is first moved no
//! earlier than the event of its op before it (an op's grants are never before its push, its
//! start never before its readiness), and a device's span is told when its kernels ended, not
//! when its host op learnt of them; then the events are sorted by time, those at one time kept
//! in log order. An op's events keep their order, and an op's grant stays after the end that
//! made it (stamped at that end, logged after it).

use dep_engine::{Event, EventKind, OpId};
use rustc_hash::FxHashMap;

/// The latest time of each unfinished op's events so far, to move each of its next events no
/// earlier than that.
#[derive(Clone, Debug, Default)]
pub(crate) struct OpTimes {
    last_ns: FxHashMap<OpId, u64>,
}

impl OpTimes {
    /// Moves `event` (the next in log order) no earlier than its op's events before it; a
    /// device's span to its kernels' end.
    pub(crate) fn settle(&mut self, event: &mut Event) {
        let op = match &event.kind {
            EventKind::VarCreated { .. } | EventKind::VarDeleted { .. } => return,
            EventKind::DeviceSpan { end_ns, .. } => {
                event.time_ns = event.time_ns.max(*end_ns);
                return;
            }
            EventKind::Pushed { op, .. } => {
                self.last_ns.insert(*op, event.time_ns);
                return;
            }
            EventKind::Granted { op, .. }
            | EventKind::Ready { op }
            | EventKind::Cancelled { op }
            | EventKind::Started { op, .. }
            | EventKind::Finished { op, .. } => *op,
        };
        if let Some(last) = self.last_ns.get_mut(&op) {
            event.time_ns = event.time_ns.max(*last);
            *last = event.time_ns;
        }
        if matches!(event.kind, EventKind::Finished { .. }) {
            self.last_ns.remove(&op);
        }
    }
}

/// Puts `events` (in log order) in time order, as the module says.
pub(crate) fn into_time_order(events: &mut [Event]) {
    let mut times = OpTimes::default();
    for event in events.iter_mut() {
        times.settle(event);
    }
    // Stable: events at one time keep their log order.
    events.sort_by_key(|event| event.time_ns);
}

#[cfg(test)]
mod tests {
    use super::*;
    use dep_engine::VarId;

    fn at(time_ns: u64, kind: EventKind) -> Event {
        Event { time_ns, kind }
    }

    fn pushed(op: u64, var: u64) -> EventKind {
        EventKind::Pushed {
            op: OpId(op),
            label: format!("op{op}").into(),
            line: 1,
            reads: vec![VarId(var)],
            writes: Vec::new(),
            device: dep_engine::Device::Cpu,
            priority: 0,
        }
    }

    /// A grant logged late, stamped with its releaser's end, which came before its op's push:
    /// it moves to the push, and every event lies in time order, each op's in its own order.
    #[test]
    fn a_grant_logged_late_moves_to_its_time_and_never_before_its_push() {
        let (x, y) = (OpId(1), OpId(2));
        let v = VarId(7);
        let mut events = vec![
            at(
                100,
                EventKind::Finished {
                    op: x,
                    state: dep_engine::OpState::Done,
                    message: None,
                },
            ),
            at(150, pushed(2, 7)),
            at(300, pushed(3, 8)),
            // Logged after the push at 300, stamped with x's end.
            at(100, EventKind::Granted { op: y, var: v }),
            at(100, EventKind::Ready { op: y }),
            at(400, EventKind::Started { op: y, worker: 1 }),
        ];
        into_time_order(&mut events);
        let times: Vec<u64> = events.iter().map(|event| event.time_ns).collect();
        assert_eq!(times, [100, 150, 150, 150, 300, 400]);
        assert!(matches!(events[1].kind, EventKind::Pushed { op, .. } if op == y));
        assert_eq!(events[2].kind, EventKind::Granted { op: y, var: v });
        assert_eq!(events[3].kind, EventKind::Ready { op: y });
    }

    /// A device's span, learnt when its host op ended, is told when its kernels ended.
    #[test]
    fn a_device_span_is_told_at_its_kernels_end() {
        let mut events = vec![
            at(
                10,
                EventKind::DeviceSpan {
                    op: OpId(1),
                    lane: "gpu0:s0".into(),
                    start_ns: 20,
                    end_ns: 30,
                },
            ),
            at(25, pushed(2, 1)),
        ];
        into_time_order(&mut events);
        assert_eq!(events[0].time_ns, 25);
        assert_eq!(events[1].time_ns, 30);
    }
}
