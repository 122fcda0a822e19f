//! Protobuf's wire format, written by hand for the packets a trace writes per op (a slice's
//! begin and end, a flow's ends): building prost's messages for them cost a `Vec` per event and
//! a `Vec` and a `String` per argument. The bytes are those prost writes for the same message:
//! fields in field-number order, optional fields only when set, repeated ones unpacked (a test
//! checks them against prost's encoding).

/// Writes `value` as a base-128 varint at the start of `out` (at least 10 bytes); returns how
/// many bytes it took.
#[inline]
pub(super) fn varint_to(out: &mut [u8], mut value: u64) -> usize {
    let mut n = 0;
    while value >= 0x80 {
        out[n] = value as u8 | 0x80;
        value >>= 7;
        n += 1;
    }
    out[n] = value as u8;
    n + 1
}

/// Wire types.
const VARINT: u64 = 0;
const LEN: u64 = 2;

/// Appends two varints (a field's key and its value, or a length), copied at once.
#[inline]
fn two_varints(buf: &mut Vec<u8>, first: u64, second: u64) {
    let mut bytes = [0; 20];
    let n = varint_to(&mut bytes, first);
    let n = n + varint_to(&mut bytes[n..], second);
    buf.extend_from_slice(&bytes[..n]);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_protobufs() {
        for value in [0, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut theirs = Vec::new();
            prost::encode_length_delimiter(value as usize, &mut theirs).unwrap();
            let mut array = [0; 10];
            let n = varint_to(&mut array, value);
            assert_eq!(array[..n], theirs, "{value}");
        }
    }
}
