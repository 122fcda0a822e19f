//! Kernel times for the views. A GPU op finishes, for the engine, once its kernels are enqueued;
//! when it runs observed, its kernels are bracketed by two timing events, and [`report_later`]
//! hands them to one background thread per process that waits for the kernels to end and reports
//! their span to the op's [`DeviceClock`] (an `EventKind::DeviceSpan` in the engine's log).
//!
//! CUDA times events relative to each other, in milliseconds as `f32`; the host clock is
//! `Instant`. The thread keeps, per device, an anchor: an event whose host time is known. The
//! first is the device's epoch (waited for when the device opened). When the anchor is more than
//! a second old at a span's end, the thread calibrates a new one: it records an event on a
//! stream of its own, idle, so the event completes within microseconds, spins until it has, and
//! takes the host time then. A span's start is placed from the anchor, its end from its start
//! and the span's own length (start to end event): so `f32`'s precision does not decay over a
//! long session, and spans stray from the host's clock by at most what the two clocks drift
//! apart in a second, plus the few µs by which a calibration's pairing is off (spans placed from
//! successive anchors may step by as much).
//!
//! The span events block (`CU_EVENT_BLOCKING_SYNC`): waiting for a span's end, the thread
//! sleeps rather than spinning a core for as long as the queued kernels run.

use std::collections::HashMap;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cudarc::driver::{sys, CudaEvent, CudaStream};
use dep_engine::DeviceClock;

use super::runtime::{GpuDevice, KernelSpan};
use dep_engine::lock;

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
pub fn report_later(clock: DeviceClock, lane: String, span: KernelSpan) {
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

/// Waits until the kernel times of every op that finished so far are in the event log, for at
/// most `limit` (a wedged device must not hang a session); says whether they are. Returns `true`
/// at once when no GPU op was timed in this process.
pub fn flush_kernel_times(limit: Duration) -> bool {
    let Some(Some(requests)) = REQUESTS.get() else {
        return true;
    };
    let (done, flushed) = channel();
    // A request left behind by a timeout is harmless: its answer goes nowhere.
    lock(requests).send(Request::Flush(done)).is_err() || flushed.recv_timeout(limit).is_ok()
}

/// An event whose completion time on the host's clock is known (`None`: the device's epoch).
struct Anchor {
    event: Option<CudaEvent>,
    at: Instant,
    /// The idle stream calibrations record on (made by the first).
    stream: Option<Arc<CudaStream>>,
}

/// How old an anchor may be when a span is placed from it.
const RECALIBRATE_AFTER: Duration = Duration::from_secs(1);

/// Makes a fresh anchor: an event recorded on a stream where nothing else runs completes within
/// microseconds, so spinning on it (here only, about once a second) pairs a device time with a
/// host time to a few µs. On an error the old anchor stays.
fn calibrate(device: &GpuDevice, anchor: &mut Anchor) {
    let stream = match &anchor.stream {
        Some(stream) => stream.clone(),
        None => match device.ctx().new_stream() {
            Ok(stream) => {
                anchor.stream = Some(stream.clone());
                stream
            }
            Err(_) => return,
        },
    };
    // The default flags: timed, and waited for by spinning, for the tightest pairing.
    let Ok(event) = stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)) else {
        return;
    };
    if event.synchronize().is_ok() {
        anchor.at = Instant::now();
        anchor.event = Some(event);
    }
}

fn time_one(anchors: &mut HashMap<u16, Anchor>, timed: Timed) {
    let Timed { clock, lane, span } = timed;
    let device = span.device.clone();
    if device.bind().is_err() {
        return;
    }
    let (epoch, epoch_at) = device.epoch();
    let anchor = anchors.entry(device.index()).or_insert(Anchor {
        event: None,
        at: epoch_at,
        stream: None,
    });
    // Sleeps until the kernels ended (a blocking-sync event).
    if span.end.synchronize().is_err() {
        return; // The op's error surfaces where its value is used; only its time is lost.
    }
    if anchor.at.elapsed() > RECALIBRATE_AFTER {
        calibrate(&device, anchor);
    }
    let anchor_event = anchor.event.as_ref().unwrap_or(epoch);
    let (Ok(start_ms), Ok(length_ms)) = (
        anchor_event.elapsed_ms(&span.start),
        span.start.elapsed_ms(&span.end),
    ) else {
        return;
    };
    let start = shift(anchor.at, f64::from(start_ms));
    let end = shift(start, f64::from(length_ms.max(0.0)));
    clock.report(&lane, start, end);
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
