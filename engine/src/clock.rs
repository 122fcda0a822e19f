//! The clock of a real (not simulated) engine's events: nanoseconds since the engine started,
//! read from the monotonic clock (`CLOCK_MONOTONIC`, the clock `std::time::Instant` reads, the
//! same on every thread) through rustix's safe `clock_gettime`, as one subtraction of integers:
//! an observed op reads it up to three times, and `Instant::elapsed` added a `Duration`'s
//! checked arithmetic and a 128-bit conversion to each read.

use std::time::Instant;

/// When the engine started, as an `Instant` (to place the instants a device reports) and as
/// the monotonic clock's nanoseconds (to read the time since cheaply). The two are read one
/// after the other, so they name the same moment to within the time of one read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Clock {
    origin: Instant,
    origin_ns: u64,
}

impl Clock {
    /// A clock that starts now.
    pub(crate) fn start() -> Clock {
        let origin = Instant::now();
        Clock {
            origin,
            origin_ns: monotonic_ns(),
        }
    }

    /// Nanoseconds since the start.
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        monotonic_ns().saturating_sub(self.origin_ns)
    }

    /// Nanoseconds from the start to `instant` (0 for an instant before it).
    pub(crate) fn ns_at(&self, instant: Instant) -> u64 {
        instant.saturating_duration_since(self.origin).as_nanos() as u64
    }
}

/// The monotonic clock's reading, in nanoseconds.
#[inline]
fn monotonic_ns() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (now.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(now.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::Clock;
    use std::time::{Duration, Instant};

    #[test]
    fn the_clock_agrees_with_instants_and_never_goes_back() {
        let clock = Clock::start();
        let mut last = 0;
        for _ in 0..1_000 {
            let before = clock.ns_at(Instant::now());
            let now = clock.now_ns();
            let after = clock.ns_at(Instant::now());
            assert!(now >= last, "{now} after {last}");
            // The two origins are read one after the other: a few microseconds at most apart.
            assert!(
                now + 50_000 >= before && now <= after + 50_000,
                "{before} {now} {after}"
            );
            last = now;
        }
        std::thread::sleep(Duration::from_millis(2));
        let slept = clock.now_ns() - last;
        assert!(slept >= 2_000_000, "{slept} ns");
        // On another thread, the same clock.
        let there = std::thread::spawn(move || clock.now_ns()).join().unwrap();
        assert!(there >= last + 2_000_000);
    }
}
