//! Memory accounting: current and peak bytes of storage per device.
//!
//! The engine never allocates an op's data itself; whoever does (the interpreter's tensors)
//! reports allocations and frees to a [`MemoryMeter`], and views and run summaries read it.

use crate::sync::stats::{AtomicU64, Ordering};

/// Current and peak bytes of one device's storage, and how many allocations were made.
#[derive(Default)]
pub struct MemoryMeter {
    current: AtomicU64,
    peak: AtomicU64,
    allocations: AtomicU64,
}

/// A reading of a [`MemoryMeter`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes in use now.
    pub current_bytes: u64,
    /// The most bytes in use at once since the last [`MemoryMeter::reset_peak`].
    pub peak_bytes: u64,
    /// Allocations counted so far.
    pub allocations: u64,
}

impl MemoryMeter {
    /// A meter at zero.
    pub const fn new() -> MemoryMeter {
        MemoryMeter {
            current: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            allocations: AtomicU64::new(0),
        }
    }

    /// Counts `bytes` newly in use.
    pub fn allocated(&self, bytes: u64) {
        let now = self.current.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak.fetch_max(now, Ordering::Relaxed);
        self.allocations.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `bytes` in use again, with no allocation: a buffer one value gave up and that is
    /// kept for a later one (by a graph's pool, or as an op's spare), whose bytes stay counted
    /// until it is taken; taking it and making the later value counts that value's allocation.
    pub fn in_use_again(&self, bytes: u64) {
        let now = self.current.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    /// Counts `bytes` no longer in use.
    pub fn freed(&self, bytes: u64) {
        self.current.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// The current reading.
    pub fn stats(&self) -> MemoryStats {
        MemoryStats {
            current_bytes: self.current.load(Ordering::Relaxed),
            peak_bytes: self.peak.load(Ordering::Relaxed),
            allocations: self.allocations.load(Ordering::Relaxed),
        }
    }

    /// Starts a new peak from the current use.
    pub fn reset_peak(&self) {
        self.peak
            .store(self.current.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_follows_the_highest_use() {
        let meter = MemoryMeter::new();
        meter.allocated(100);
        meter.allocated(50);
        meter.freed(100);
        meter.allocated(20);
        assert_eq!(
            meter.stats(),
            MemoryStats {
                current_bytes: 70,
                peak_bytes: 150,
                allocations: 3
            }
        );
        meter.reset_peak();
        assert_eq!(meter.stats().peak_bytes, 70);
    }

    /// A buffer kept for reuse counts its bytes again but no allocation: a graph's pool and an
    /// op's spare counted one each time they took a buffer back, two per reused buffer.
    #[test]
    fn a_buffer_kept_for_reuse_is_no_allocation() {
        let meter = MemoryMeter::new();
        meter.allocated(100);
        meter.freed(100);
        meter.in_use_again(100);
        assert_eq!(meter.stats().allocations, 1);
        assert_eq!(meter.stats().current_bytes, 100);
        meter.in_use_again(30);
        assert_eq!(meter.stats().peak_bytes, 130);
    }
}
