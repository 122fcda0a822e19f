//! A value on cache lines of its own, asking the allocator for no more than its usual alignment.

use std::ops::Deref;

/// The padding on each side of an [`OwnLines`] value: a cache line.
const LINE: usize = 64;

/// A value that shares no cache line with anything else: a line of padding on each side, so
/// that whatever address the allocator gives, the lines the value touches hold nothing but it
/// and its padding. Crossbeam's `CachePadded` gets the same by aligning the value to 128
/// bytes; but a larger alignment than usual takes mimalloc's slow path (about 500 instructions
/// an allocation against about 30), which every new variable and slot paid, twice for a call of
/// a function with a local. The spatial prefetcher's pairs of lines are not kept apart here, as
/// `CachePadded` keeps them: this is for values written rarely or by one thread.
#[repr(C)]
pub struct OwnLines<T> {
    _before: [u8; LINE],
    value: T,
    _after: [u8; LINE],
}

impl<T> OwnLines<T> {
    /// `value` on lines of its own.
    pub fn new(value: T) -> OwnLines<T> {
        OwnLines {
            _before: [0; LINE],
            value,
            _after: [0; LINE],
        }
    }
}

impl<T> Deref for OwnLines<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// The value lies a whole line away from either end, whatever the struct's address, and
    /// asks for no more than its own alignment.
    #[test]
    fn the_value_has_a_line_of_padding_on_each_side() {
        let padded = OwnLines::new(AtomicBool::new(true));
        let start = &padded as *const OwnLines<AtomicBool> as usize;
        let value = &padded.value as *const AtomicBool as usize;
        assert_eq!(value - start, LINE);
        assert_eq!(std::mem::size_of_val(&padded), 2 * LINE + 1);
        assert_eq!(std::mem::align_of::<OwnLines<AtomicBool>>(), 1);
    }
}
