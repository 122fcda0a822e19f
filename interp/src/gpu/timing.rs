//! Kernel times for the views. A GPU op finishes, for the engine, once its kernels are enqueued;
//! when it runs observed, its kernels are bracketed by two timing events, and [`report_later`]
//! hands them to one background thread per process that waits for the kernels to end and reports
//! their span to the op's [`DeviceClock`] (an `EventKind::DeviceSpan` in the engine's log).
//!
//! CUDA times events relative to each other, in milliseconds as `f32`; the host clock is
//! `Instant`. The thread keeps, per device, an anchor: an event whose host time is known. The
//! first is the device's epoch (waited for when the device opened). After each wait that really
//! blocked, the event just waited for becomes the anchor, its host time "now": so spans are
//! placed from a recent anchor, and `f32`'s precision does not decay over a long session.

use std::collections::HashMap;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use cudarc::driver::CudaEvent;
use dep_engine::DeviceClock;

use super::runtime::KernelSpan;
use crate::slot::lock;

/// What the timing thread is asked to do.
enum Request {
    /// Time one op's kernels.
    Time(Timed),
    /// Say when every earlier request is done.
    Flush(Sender<()>),
}

/// One op's kernels, waiting to be timed.
struct Timed {
    clock: DeviceClock,
    lane: String,
    span: KernelSpan,
}

/// The timing thread's queue, started by the first [`report_later`] (`None` if the OS refused
/// a thread: kernel times are then not shown, and the run goes on).
static REQUESTS: OnceLock<Option<Mutex<Sender<Request>>>> = OnceLock::new();

/// Reports `span` on `lane` to `clock` once its kernels ended, from the timing thread; never
/// blocks the caller.
pub(crate) fn report_later(clock: DeviceClock, lane: String, span: KernelSpan) {
    let requests = REQUESTS.get_or_init(|| {
        let (sender, receiver) = channel::<Request>();
        let started = std::thread::Builder::new()
            .name("dep-gpu-timing".to_string())
            .spawn(move || {
                let mut anchors: HashMap<u16, Anchor> = HashMap::new();
                for request in receiver {
                    match request {
                        Request::Time(timed) => time_one(&mut anchors, timed),
                        Request::Flush(done) => drop(done.send(())),
                    }
                }
            });
        started.ok().map(|_| Mutex::new(sender))
    });
    if let Some(requests) = requests {
        let _ = lock(requests).send(Request::Time(Timed { clock, lane, span }));
    }
}

/// Waits until the kernel times of every op that finished so far are in the event log (at most
/// `limit`, so that a wedged device cannot hang a session). Returns at once when no GPU op was
/// timed in this process.
pub fn flush_kernel_times(limit: Duration) {
    let Some(Some(requests)) = REQUESTS.get() else {
        return;
    };
    let (done, flushed) = channel();
    if lock(requests).send(Request::Flush(done)).is_ok() {
        let _ = flushed.recv_timeout(limit);
    }
}

/// An event whose completion time on the host's clock is known (`None`: the device's epoch).
struct Anchor {
    event: Option<CudaEvent>,
    at: Instant,
}

fn time_one(anchors: &mut HashMap<u16, Anchor>, timed: Timed) {
    let Timed { clock, lane, span } = timed;
    let device = span.device.clone();
    let (epoch, epoch_at) = device.epoch();
    let anchor = anchors.entry(device.index()).or_insert(Anchor {
        event: None,
        at: epoch_at,
    });
    let blocked = !span.end.is_complete();
    if span.end.synchronize().is_err() {
        return; // The op's error surfaces where its value is used; only its time is lost.
    }
    let ended_at = Instant::now();
    let anchor_event = anchor.event.as_ref().unwrap_or(epoch);
    let (Ok(start_ms), Ok(end_ms)) = (
        anchor_event.elapsed_ms(&span.start),
        anchor_event.elapsed_ms(&span.end),
    ) else {
        return;
    };
    let host_time = |ms: f32| shift(anchor.at, f64::from(ms));
    clock.report(&lane, host_time(start_ms), host_time(end_ms));
    if blocked {
        *anchor = Anchor {
            event: Some(span.end),
            at: ended_at,
        };
    }
}

/// `at` moved by `ms` milliseconds (either way).
fn shift(at: Instant, ms: f64) -> Instant {
    let by = Duration::from_secs_f64(ms.abs() / 1_000.0);
    if ms >= 0.0 {
        at + by
    } else {
        at.checked_sub(by).unwrap_or(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifting_goes_both_ways() {
        let at = Instant::now() + Duration::from_secs(1);
        assert_eq!(shift(at, 1.5) - at, Duration::from_micros(1_500));
        assert_eq!(at - shift(at, -0.25), Duration::from_micros(250));
        assert_eq!(shift(at, 0.0), at);
    }
}
