//! Device time: when work an op enqueued on a device really ran.
//!
//! A GPU op finishes, for the engine, once its kernels are enqueued (MXNet RFC 18951), so its
//! `Started`/`Finished` span is the enqueue. The kernels run later; the device learns when from
//! its timing events, after the op is gone. The op takes a [`DeviceClock`] while it runs and
//! hands it to whoever reads those events, which reports the span as an
//! [`EventKind::DeviceSpan`].
//!
//! Architecture Invariant: there is a clock only when events go to a sink under a real (not
//! simulated) policy, so an unobserved engine pays one thread-local read per op that asks.

use std::cell::RefCell;
use std::time::Instant;

use crate::clock::Clock;
use crate::sync::Arc;
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
    /// The clock of the op running on this thread, while it runs and is observed.
    static CURRENT: RefCell<Option<DeviceClock>> = const { RefCell::new(None) };
}

impl DeviceClock {
    /// The clock of the op running on this thread: `None` outside ops, when nobody observes the
    /// engine, and under the simulated policy (which has its own clock).
    pub fn current() -> Option<DeviceClock> {
        CURRENT.with(|current| current.borrow().clone())
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
        let clock = DeviceClock {
            op,
            sink: sink.clone(),
            clock,
        };
        // Ops nest when one runs another's successors (an async op completed inside an op).
        let outer = CURRENT.with(|current| current.borrow_mut().replace(clock));
        let result = body();
        CURRENT.with(|current| *current.borrow_mut() = outer);
        result
    }
}
