//! A JSON element built in a reused buffer, for the trace writer's hot path: numbers through
//! `itoa`, strings through serde_json's escaping, nothing through `fmt`'s machinery (which cost
//! a trace several thousand instructions per op). Its pieces are inlined: most are a few bytes
//! known when compiled, whose copy is then a store or two instead of a call.

/// The bytes of one JSON element, built piece by piece; cleared and reused for the next.
#[derive(Default)]
pub(crate) struct JsonLine(Vec<u8>);

impl JsonLine {
    /// Empties it for the next element.
    #[inline]
    pub(crate) fn clear(&mut self) -> &mut Self {
        self.0.clear();
        self
    }

    /// The bytes so far.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// Cuts it back to its first `len` bytes (elements written after them taken back).
    pub(crate) fn truncate(&mut self, len: usize) {
        self.0.truncate(len);
    }

    /// Text written as it is (JSON punctuation, keys, already escaped strings).
    #[inline]
    pub(crate) fn raw(&mut self, text: &str) -> &mut Self {
        self.0.extend_from_slice(text.as_bytes());
        self
    }

    /// Bytes written as they are (a piece put together before).
    #[inline]
    pub(crate) fn bytes_raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.extend_from_slice(bytes);
        self
    }

    /// Text put together by `fmt` (for rare elements, where speed does not matter).
    pub(crate) fn fmt(&mut self, text: std::fmt::Arguments<'_>) {
        use std::io::Write;
        self.0
            .write_fmt(text)
            .expect("writing to memory cannot fail");
    }

    /// An integer.
    #[inline]
    pub(crate) fn int(&mut self, value: impl itoa::Integer) -> &mut Self {
        self.0
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
        self
    }

    /// A number that the element before may have written through `last` too (an op's id, its
    /// time): its digits are then copied, not worked out again.
    #[inline]
    pub(crate) fn int_again(&mut self, value: u64, last: &mut LastNumber) -> &mut Self {
        if last.value != Some(value) {
            let mut buffer = itoa::Buffer::new();
            let digits = buffer.format(value).as_bytes();
            last.digits[..digits.len()].copy_from_slice(digits);
            last.len = digits.len();
            last.value = Some(value);
        }
        self.again(last)
    }

    /// The text `last` keeps: all its room copied at once (a copy whose length is known when
    /// compiled is a few stores, where one of a few bytes is a call), then cut to the text.
    #[inline]
    fn again(&mut self, last: &LastNumber) -> &mut Self {
        let len = self.0.len();
        self.0.extend_from_slice(&last.digits);
        self.0.truncate(len + last.len);
        self
    }

    /// Nanoseconds written as microseconds, exactly: `1234567` as `1234.567`, `47000` as
    /// `47.0`.
    #[inline]
    pub(crate) fn micros(&mut self, ns: u64) -> &mut Self {
        let (whole, fraction) = (ns / 1_000, ns % 1_000);
        self.int(whole).raw(".");
        // The fraction's three digits without their trailing zeros, at least one.
        let digits = [fraction / 100, fraction / 10 % 10, fraction % 10];
        let n_digits = if fraction % 100 == 0 {
            1
        } else if fraction % 10 == 0 {
            2
        } else {
            3
        };
        self.0
            .extend(digits[..n_digits].iter().map(|digit| b'0' + *digit as u8));
        self
    }

    /// [`JsonLine::micros`] of a time that an element before may have written through `last`
    /// too (an op's start: the end of its dependencies' flows, then its slice).
    #[inline]
    pub(crate) fn micros_again(&mut self, ns: u64, last: &mut LastNumber) -> &mut Self {
        if last.value != Some(ns) {
            let start = self.0.len();
            self.micros(ns);
            let text = &self.0[start..];
            last.digits[..text.len()].copy_from_slice(text);
            last.len = text.len();
            last.value = Some(ns);
            return self;
        }
        self.again(last)
    }

    /// A string, quoted and escaped.
    #[inline]
    pub(crate) fn string(&mut self, text: &str) -> &mut Self {
        serde_json::to_writer(&mut self.0, text).expect("a string always serializes");
        self
    }
}

/// The last number written through [`JsonLine::int_again`] (or time through
/// [`JsonLine::micros_again`]), and its text.
#[derive(Default)]
pub(crate) struct LastNumber {
    value: Option<u64>,
    len: usize,
    /// Room for the digits of any `u64`, and of its microseconds (a point and three more).
    digits: [u8; 24],
}

#[cfg(test)]
mod tests {
    use super::{JsonLine, LastNumber};

    #[test]
    fn a_number_written_again_reads_the_same() {
        let (mut line, mut last) = (JsonLine::default(), LastNumber::default());
        for value in [0, 7, 7, u64::MAX, u64::MAX, 10, 100, 100] {
            line.clear().raw("[").int_again(value, &mut last).raw("]");
            assert_eq!(line.bytes(), format!("[{value}]").as_bytes());
        }
        let (mut again, mut last) = (JsonLine::default(), LastNumber::default());
        for ns in [0, 47_000, 47_000, u64::MAX, u64::MAX, 1_234_560, 999, 999] {
            line.clear().micros(ns);
            again.clear().micros_again(ns, &mut last);
            assert_eq!(again.bytes(), line.bytes(), "{ns}");
        }
    }

    #[test]
    fn micros_are_exact_and_always_have_a_fraction() {
        let mut line = JsonLine::default();
        for (ns, text) in [
            (0, "0.0"),
            (47_000, "47.0"),
            (1_234_567, "1234.567"),
            (1_234_500, "1234.5"),
            (1_234_560, "1234.56"),
            (1_000_001, "1000.001"),
            (1_000_010, "1000.01"),
            (1_000_100, "1000.1"),
            (999, "0.999"),
        ] {
            assert_eq!(line.clear().micros(ns).bytes(), text.as_bytes(), "{ns}");
        }
        line.clear()
            .raw("[")
            .int(-5i32)
            .raw(",")
            .string("a\"b")
            .raw("]");
        assert_eq!(line.bytes(), b"[-5,\"a\\\"b\"]");
    }
}
