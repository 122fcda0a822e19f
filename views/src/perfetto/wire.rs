//! Protobuf's wire format, written by hand for the packets a trace writes per op (a slice's
//! begin and end, a flow's ends): building prost's messages for them cost a `Vec` per event and
//! a `Vec` and a `String` per argument. The bytes are those prost writes for the same message:
//! fields in field-number order, optional fields only when set, repeated ones unpacked (a test
//! checks them against prost's encoding).

/// Wire types.
const VARINT: u64 = 0;
const LEN: u64 = 2;

/// Appends `value` as a varint, byte by byte (cheaper than a copy for the few bytes it takes).
#[inline]
fn push_varint(buf: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        buf.push(value as u8 | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

/// Appends two varints (a field's key and its value, or a length).
#[inline]
fn two_varints(buf: &mut Vec<u8>, first: u64, second: u64) {
    buf.reserve(20);
    push_varint(buf, first);
    push_varint(buf, second);
}

/// Appends a varint field (uint32, uint64, bool; and int32 and int64, whose negative values
/// protobuf writes as their 64-bit two's complement).
#[inline]
pub(super) fn uint(buf: &mut Vec<u8>, field: u32, value: u64) {
    two_varints(buf, u64::from(field) << 3 | VARINT, value);
}

/// Appends a signed varint field (int32, int64).
#[inline]
pub(super) fn int(buf: &mut Vec<u8>, field: u32, value: i64) {
    uint(buf, field, value as u64);
}

/// Appends a length-delimited field: a string, or a message already encoded.
#[inline]
pub(super) fn bytes(buf: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    two_varints(buf, u64::from(field) << 3 | LEN, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

/// How many bytes `value` takes as a varint.
#[inline]
fn varint_size(value: u64) -> usize {
    // 7 bits a byte; 0 takes one.
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// How many bytes [`uint`] appends (for a field number under 16: a one-byte key).
#[inline]
pub(super) fn uint_size(field: u32, value: u64) -> usize {
    debug_assert!(field < 16);
    1 + varint_size(value)
}

/// How many bytes [`bytes`] appends for `length` bytes (a field number under 16).
#[inline]
pub(super) fn bytes_size(field: u32, length: usize) -> usize {
    debug_assert!(field < 16);
    1 + varint_size(length as u64) + length
}

/// Appends the key and length of a length-delimited field whose `length` bytes follow.
#[inline]
pub(super) fn length_key(buf: &mut Vec<u8>, field: u32, length: usize) {
    two_varints(buf, u64::from(field) << 3 | LEN, length as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_protobufs() {
        for value in [0, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut theirs = Vec::new();
            prost::encode_length_delimiter(value as usize, &mut theirs).unwrap();
            let mut ours = Vec::new();
            push_varint(&mut ours, value);
            assert_eq!(ours, theirs, "{value}");
            assert_eq!(varint_size(value), ours.len(), "{value}");
        }
    }

    #[test]
    fn sizes_are_what_is_appended() {
        for value in [0, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut buf = Vec::new();
            uint(&mut buf, 13, value);
            assert_eq!(uint_size(13, value), buf.len(), "{value}");
        }
        for length in [0, 1, 127, 128, 20_000] {
            let mut buf = Vec::new();
            bytes(&mut buf, 11, &vec![7; length]);
            assert_eq!(bytes_size(11, length), buf.len(), "{length}");
            let mut key = Vec::new();
            length_key(&mut key, 11, length);
            assert_eq!(key, buf[..buf.len() - length], "{length}");
        }
    }
}
