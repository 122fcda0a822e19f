//! Device time: when work an op enqueued on a device really ran.
//!
//! A GPU op finishes, for the engine, once its kernels are enqueued (MXNet RFC 18951), so its
//! `Started`/`Finished` span is the enqueue. The kernels run later; the device learns when from
//! its timing events, after the op is gone. The op takes a [`DeviceClock`] while it runs and
//! hands it to whoever reads those events, which reports the span as an
//! [`EventKind::DeviceSpan`].
//!
//! Architecture Invariant: there is a clock only when events go to a sink under a real (not
//! simulated) policy, and only for ops placed on a device other than the CPU (the CPU has no
//! device work to time), so an unobserved engine pays one thread-local read per op that asks,
//! and an observed CPU op one.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use crate::clock::Clock;
use crate::sync::{Arc, Weak};
use crate::{Event, EventKind, EventSink, OpId};

/// Reports when the current op's device work ran, in the engine's clock. Cheap to clone and
/// `Send`: it may be used from any thread, after the op finished.
#[derive(Clone)]
pub struct DeviceClock {
    op: OpId,
    sink: Arc<dyn EventSink>,
    clock: Clock,
}

impl std::fmt::Debug for DeviceClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceClock").field("op", &self.op).finish()
    }
}

thread_local! {
    /// The op running on this thread, while it runs and is observed.
    static CURRENT_OP: Cell<Option<OpId>> = const { Cell::new(None) };
    /// The sink and clock of the last observed engine whose op ran on this thread: kept from op
    /// to op, so that running one costs no reference count, and weak, so that it keeps no
    /// engine's log alive.
    static CURRENT_SINK: RefCell<Option<(Weak<dyn EventSink>, Clock)>> = const { RefCell::new(None) };
}

impl DeviceClock {
    /// The clock of the op running on this thread: `None` outside ops, when nobody observes the
    /// engine, and under the simulated policy (which has its own clock).
    pub fn current() -> Option<DeviceClock> {
        let op = CURRENT_OP.with(Cell::get)?;
        CURRENT_SINK.with(|current| {
            let current = current.borrow();
            let (sink, clock) = current.as_ref()?;
            Some(DeviceClock {
                op,
                sink: sink.upgrade()?,
                clock: *clock,
            })
        })
    }

    /// The op whose device work this clock times.
    pub fn op(&self) -> OpId {
        self.op
    }

    /// Reports that the op's work on `lane` (a device stream, such as `gpu0:s1`) ran from
    /// `start` to `end` (host instants; before the engine started counts as its start).
    pub fn report(&self, lane: &str, start: Instant, end: Instant) {
        self.sink.event(Event {
            time_ns: self.clock.now_ns(),
            kind: EventKind::DeviceSpan {
                op: self.op,
                lane: Arc::from(lane),
                start_ns: self.clock.ns_at(start),
                end_ns: self.clock.ns_at(end.max(start)),
            },
        });
    }

    /// Runs `body` (which must not panic: the engine catches op panics inside it) as op `op`'s
    /// execution, with its clock current on this thread.
    pub(crate) fn run_as<T>(
        op: OpId,
        sink: &Arc<dyn EventSink>,
        clock: Clock,
        body: impl FnOnce() -> T,
    ) -> T {
        // Ops nest when one runs another's successors (an async op completed inside an op), and
        // an op may push to another engine: the outer op's clock comes back after.
        let outer_op = CURRENT_OP.with(|current| current.replace(Some(op)));
        let outer_sink = CURRENT_SINK.with(|current| {
            let mut current = current.borrow_mut();
            let same = current.as_ref().is_some_and(|(kept, kept_clock)| {
                std::ptr::addr_eq(kept.as_ptr(), Arc::as_ptr(sink)) && *kept_clock == clock
            });
            (!same).then(|| current.replace((Arc::downgrade(sink), clock)))
        });
        let result = body();
        CURRENT_OP.with(|current| current.set(outer_op));
        if let (Some(outer_sink), Some(_)) = (outer_sink, outer_op) {
            CURRENT_SINK.with(|current| *current.borrow_mut() = outer_sink);
        }
        result
    }

    /// Runs `body` as the execution of an op with no device work (a CPU op): no clock is current
    /// while it runs, also when it runs inside another op's run, and none is made for it.
    pub(crate) fn run_unclocked<T>(body: impl FnOnce() -> T) -> T {
        match CURRENT_OP.with(Cell::take) {
            None => body(),
            Some(outer) => {
                let result = body();
                CURRENT_OP.with(|current| current.set(Some(outer)));
                result
            }
        }
    }
}
