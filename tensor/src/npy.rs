//! NumPy `.npy` files.
//!
//! Tensors are written as format version 1.0, little-endian `float32`
//! (`'<f4'`), C order. Reading accepts versions 1, 2 and 3, any float
//! (`f2`, `f4`, `f8`), integer (`i1`..`i8`, `u1`..`u8`) or boolean (`b1`)
//! dtype of either byte order, and Fortran order (by transposing); values
//! are converted to `f32`.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

use super::error::{terr, Result};
use super::linalg::transpose;
use super::shape::{alloc, fmt_shape, numel};
use super::Tensor;

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Writes `t` in `.npy` format (version 1.0, `'<f4'`, C order) to `w`.
pub fn write_npy<W: Write>(t: &Tensor, w: &mut W) -> io::Result<()> {
    let shape = match t.shape() {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    // Version 1.0 has a 2-byte header length; larger headers need 2.0.
    let (version, prefix) = if header.len() + 1 + 10 <= u16::MAX as usize {
        (1u8, 10)
    } else {
        (2u8, 12)
    };
    // Pad with spaces and end with a newline so the data is 64-byte aligned.
    let total = (prefix + header.len() + 1).div_ceil(64) * 64;
    while prefix + header.len() + 1 < total {
        header.push(' ');
    }
    header.push('\n');
    w.write_all(MAGIC)?;
    w.write_all(&[version, 0])?;
    if version == 1 {
        w.write_all(&(header.len() as u16).to_le_bytes())?;
    } else {
        w.write_all(&(header.len() as u32).to_le_bytes())?;
    }
    w.write_all(header.as_bytes())?;
    let mut buf = Vec::with_capacity(64 * 1024);
    for chunk in t.data().chunks(16 * 1024) {
        buf.clear();
        for v in chunk {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        w.write_all(&buf)?;
    }
    Ok(())
}

/// Saves `t` to the file at `path` in `.npy` format (see [`write_npy`]).
pub fn save_npy(t: &Tensor, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let fail = |e: io::Error| terr!("cannot write '{}': {e}", path.display());
    let file = File::create(path).map_err(fail)?;
    let mut w = BufWriter::new(file);
    write_npy(t, &mut w).map_err(fail)?;
    w.flush().map_err(fail)
}

/// Loads the `.npy` file at `path` as an `f32` tensor (see [`read_npy`]).
pub fn load_npy(path: impl AsRef<Path>) -> Result<Tensor> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| terr!("cannot read '{}': {e}", path.display()))?;
    read_npy(&mut BufReader::new(file))
        .map_err(|e| terr!("cannot load '{}': {}", path.display(), e.message()))
}

/// The element types a `.npy` file may hold.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Float,
    Int,
    Uint,
    Bool,
}

/// A parsed `descr` such as `'<f4'`.
#[derive(Clone, Copy, Debug)]
struct Dtype {
    kind: Kind,
    size: usize,
    big_endian: bool,
}

fn parse_descr(descr: &str) -> Result<Dtype> {
    let unsupported = || terr!("npy: unsupported dtype '{descr}'");
    let (order, rest) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &descr[1..]),
        _ => ('=', descr),
    };
    let mut chars = rest.chars();
    let kind = match chars.next() {
        Some('f') => Kind::Float,
        Some('i') => Kind::Int,
        Some('u') => Kind::Uint,
        Some('b') => Kind::Bool,
        _ => return Err(unsupported()),
    };
    let size: usize = chars.as_str().parse().map_err(|_| unsupported())?;
    let ok = match kind {
        Kind::Float => matches!(size, 2 | 4 | 8),
        Kind::Int | Kind::Uint => matches!(size, 1 | 2 | 4 | 8),
        Kind::Bool => size == 1,
    };
    if !ok {
        return Err(unsupported());
    }
    let big_endian = match order {
        '>' => true,
        '<' | '|' => false,
        _ => cfg!(target_endian = "big"),
    };
    Ok(Dtype {
        kind,
        size,
        big_endian,
    })
}

/// A value of the header's Python dictionary literal.
#[derive(Debug)]
enum Literal {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
}

/// A tiny parser for the header, e.g.
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
struct HeaderParser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl HeaderParser<'_> {
    fn bad(&self, what: &str) -> super::TensorError {
        terr!("npy: bad header: {what} at byte {}", self.pos)
    }

    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.pos).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.bad(&format!("expected '{}'", c as char)))
        }
    }

    fn string(&mut self) -> Result<String> {
        let quote = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return Err(self.bad("expected a string")),
        };
        self.pos += 1;
        let start = self.pos;
        while self.pos < self.s.len() && self.s[self.pos] != quote {
            self.pos += 1;
        }
        if self.pos >= self.s.len() {
            return Err(self.bad("unterminated string"));
        }
        let text = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
        self.pos += 1;
        Ok(text)
    }

    fn integer(&mut self) -> Result<usize> {
        self.skip_ws();
        let start = self.pos;
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_digit() {
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
        let v = text.parse().map_err(|_| self.bad("expected a dimension"))?;
        // Python 2 wrote long integers with an `L` suffix.
        if self.s.get(self.pos) == Some(&b'L') {
            self.pos += 1;
        }
        Ok(v)
    }

    fn literal(&mut self) -> Result<Literal> {
        match self.peek() {
            Some(b'\'' | b'"') => Ok(Literal::Str(self.string()?)),
            Some(b'(') => {
                self.pos += 1;
                let mut dims = Vec::new();
                while !self.eat(b')') {
                    dims.push(self.integer()?);
                    if !self.eat(b',') {
                        self.expect(b')')?;
                        break;
                    }
                }
                Ok(Literal::Tuple(dims))
            }
            _ => {
                let rest = &self.s[self.pos..];
                for (word, v) in [(&b"True"[..], true), (&b"False"[..], false)] {
                    if rest.starts_with(word) {
                        self.pos += word.len();
                        return Ok(Literal::Bool(v));
                    }
                }
                Err(self.bad("unsupported value"))
            }
        }
    }

    fn dict(&mut self) -> Result<Vec<(String, Literal)>> {
        self.expect(b'{')?;
        let mut entries = Vec::new();
        while !self.eat(b'}') {
            let key = self.string()?;
            self.expect(b':')?;
            entries.push((key, self.literal()?));
            if !self.eat(b',') {
                self.expect(b'}')?;
                break;
            }
        }
        Ok(entries)
    }
}

/// The header fields that matter.
struct Header {
    dtype: Dtype,
    fortran_order: bool,
    shape: Vec<usize>,
}

fn parse_header(text: &[u8]) -> Result<Header> {
    let mut p = HeaderParser { s: text, pos: 0 };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    for (key, value) in p.dict()? {
        match (key.as_str(), value) {
            ("descr", Literal::Str(s)) => descr = Some(s),
            ("fortran_order", Literal::Bool(b)) => fortran = Some(b),
            ("shape", Literal::Tuple(t)) => shape = Some(t),
            (k, v) => return Err(terr!("npy: bad header: unexpected entry '{k}': {v:?}")),
        }
    }
    let missing = |k: &str| terr!("npy: bad header: missing '{k}'");
    Ok(Header {
        dtype: parse_descr(&descr.ok_or_else(|| missing("descr"))?)?,
        fortran_order: fortran.ok_or_else(|| missing("fortran_order"))?,
        shape: shape.ok_or_else(|| missing("shape"))?,
    })
}

/// Converts IEEE half-precision bits to `f32` (exactly).
fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match (exp, frac) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: the value is frac * 2^-24.
            let v = frac as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000 | (frac << 13),
        _ => sign | ((exp + 112) << 23) | (frac << 13),
    };
    f32::from_bits(bits)
}

/// Converts one element's bytes (in file order) to `f32`; `Err` holds the element as the file
/// has it when `f32` cannot hold it: a whole number it would round to its neighbour, or a
/// finite number past its range (it would become infinite). Fractions round as floats do.
fn convert(dtype: Dtype, raw: &[u8]) -> std::result::Result<f32, String> {
    let value = convert_rounding(dtype, raw);
    let whole = |whole: i128| match value as i128 == whole {
        true => Ok(value),
        false => Err(whole.to_string()),
    };
    let mut b = [0u8; 8];
    b[..raw.len()].copy_from_slice(raw);
    if dtype.big_endian {
        b[..raw.len()].reverse();
    }
    match (dtype.kind, dtype.size) {
        (Kind::Int, 4) => whole(i32::from_le_bytes([b[0], b[1], b[2], b[3]]).into()),
        (Kind::Int, 8) => whole(i64::from_le_bytes(b).into()),
        (Kind::Uint, 4) => whole(u32::from_le_bytes([b[0], b[1], b[2], b[3]]).into()),
        (Kind::Uint, 8) => whole(u64::from_le_bytes(b).into()),
        (Kind::Float, 8) => {
            let wide = f64::from_le_bytes(b);
            match wide.is_finite() && value.is_infinite() {
                true => Err(format!("{wide:e}")),
                false => Ok(value),
            }
        }
        _ => Ok(value),
    }
}

/// Converts one element's bytes (in file order) to `f32`, rounding as `as` does.
fn convert_rounding(dtype: Dtype, raw: &[u8]) -> f32 {
    let mut b = [0u8; 8];
    b[..raw.len()].copy_from_slice(raw);
    if dtype.big_endian {
        b[..raw.len()].reverse();
    }
    // `b` now holds the value little-endian.
    match (dtype.kind, dtype.size) {
        (Kind::Float, 2) => f16_to_f32(u16::from_le_bytes([b[0], b[1]])),
        (Kind::Float, 4) => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        (Kind::Float, _) => f64::from_le_bytes(b) as f32,
        (Kind::Int, 1) => b[0] as i8 as f32,
        (Kind::Int, 2) => i16::from_le_bytes([b[0], b[1]]) as f32,
        (Kind::Int, 4) => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32,
        (Kind::Int, _) => i64::from_le_bytes(b) as f32,
        (Kind::Uint, _) => u64::from_le_bytes(b) as f32,
        (Kind::Bool, _) => {
            if b[0] != 0 {
                1.0
            } else {
                0.0
            }
        }
    }
}

/// Reads a `.npy` stream from `r` into an `f32` tensor.
pub fn read_npy<R: Read>(r: &mut R) -> Result<Tensor> {
    let io_err = |e: io::Error| terr!("npy: read failed: {e}");
    let mut prefix = [0u8; 8];
    let got = read_up_to(r, &mut prefix).map_err(io_err)?;
    if got < 8 || &prefix[..6] != MAGIC {
        return Err(terr!("npy: not a .npy file (bad magic string)"));
    }
    let (major, minor) = (prefix[6], prefix[7]);
    let header_len = match major {
        1 => {
            let mut l = [0u8; 2];
            r.read_exact(&mut l)
                .map_err(|_| terr!("npy: the header is truncated"))?;
            u16::from_le_bytes(l) as u64
        }
        2 | 3 => {
            let mut l = [0u8; 4];
            r.read_exact(&mut l)
                .map_err(|_| terr!("npy: the header is truncated"))?;
            u32::from_le_bytes(l) as u64
        }
        _ => return Err(terr!("npy: unsupported format version {major}.{minor}")),
    };
    let mut header = Vec::new();
    r.take(header_len)
        .read_to_end(&mut header)
        .map_err(io_err)?;
    if (header.len() as u64) < header_len {
        return Err(terr!("npy: the header is truncated"));
    }
    let h = parse_header(&header)?;
    let n = numel(&h.shape)?;
    let nbytes = n
        .checked_mul(h.dtype.size)
        .ok_or_else(|| terr!("npy: shape {} is too large", fmt_shape(&h.shape)))?;
    // Read in bounded chunks so a header that lies about the size cannot
    // make us allocate more than the file holds.
    let mut out = alloc(n)?;
    let mut chunk = vec![0u8; (64 * 1024 / h.dtype.size).max(1) * h.dtype.size];
    let mut remaining = nbytes;
    while remaining > 0 {
        let want = remaining.min(chunk.len());
        let got = read_up_to(r, &mut chunk[..want]).map_err(io_err)?;
        if got < want {
            return Err(terr!(
                "npy: the data is truncated: expected {nbytes} bytes for shape {}, found {}",
                fmt_shape(&h.shape),
                nbytes - remaining + got
            ));
        }
        for raw in chunk[..want].chunks_exact(h.dtype.size) {
            match convert(h.dtype, raw) {
                Ok(value) => out.push(value),
                Err(value) => return Err(unholdable(&h, out.len(), &value)),
            }
        }
        remaining -= want;
    }
    if h.fortran_order && h.shape.len() > 1 {
        let reversed: Vec<usize> = h.shape.iter().rev().copied().collect();
        transpose(&Tensor::from_parts(reversed, out))
    } else {
        Ok(Tensor::from_parts(h.shape, out))
    }
}

/// The error for element `position` (in file order) of a file whose value `value` (as the file
/// holds it) `f32` cannot hold: its index, its value, and what loading it would have made.
fn unholdable(h: &Header, position: usize, value: &str) -> super::TensorError {
    // File order is row-major, or column-major for a Fortran-ordered file.
    let mut index = Vec::with_capacity(h.shape.len());
    let mut rest = position;
    let dims: Vec<usize> = match h.fortran_order {
        true => h.shape.clone(),
        false => h.shape.iter().rev().copied().collect(),
    };
    for dim in dims {
        index.push(rest % dim.max(1));
        rest /= dim.max(1);
    }
    if !h.fortran_order {
        index.reverse();
    }
    let index: Vec<String> = index.iter().map(usize::to_string).collect();
    let what = match h.dtype.kind {
        Kind::Float => "is past float32's range (it would load as infinity)",
        _ => "is a whole number float32 cannot hold exactly (it would load as its neighbour)",
    };
    terr!(
        "npy: element [{}] is {value}, which {what}; dep's tensors are float32",
        index.join(", ")
    )
}

/// Reads until `buf` is full or the stream ends; returns the count read.
fn read_up_to<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a version-1.0 file from a header dictionary and raw data.
    fn npy_bytes(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut header = dict.to_string();
        let total = (10 + header.len() + 1).div_ceil(64) * 64;
        while 10 + header.len() + 1 < total {
            header.push(' ');
        }
        header.push('\n');
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[1, 0]);
        v.extend_from_slice(&(header.len() as u16).to_le_bytes());
        v.extend_from_slice(header.as_bytes());
        v.extend_from_slice(data);
        v
    }

    fn load(bytes: &[u8]) -> Result<Tensor> {
        read_npy(&mut &bytes[..])
    }

    #[test]
    fn roundtrip_through_bytes() {
        for shape in [vec![], vec![3], vec![2, 3], vec![0, 2], vec![1, 2, 2]] {
            let n: usize = shape.iter().product();
            let data: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 1.0).collect();
            let t = Tensor::from_vec(shape.clone(), data).unwrap();
            let mut bytes = Vec::new();
            write_npy(&t, &mut bytes).unwrap();
            let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            assert_eq!((10 + header_len) % 64, 0);
            assert!(load(&bytes).unwrap().bits_eq(&t), "{shape:?}");
        }
    }

    #[test]
    fn header_text_matches_numpy() {
        let t = Tensor::from_vec(vec![2, 3], vec![0.0; 6]).unwrap();
        let mut bytes = Vec::new();
        write_npy(&t, &mut bytes).unwrap();
        let header = std::str::from_utf8(&bytes[10..128]).unwrap();
        assert_eq!(
            header.trim_end(),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
        );
        assert!(header.ends_with('\n'));
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        assert_eq!(bytes.len(), 128 + 24);
    }

    #[test]
    fn roundtrip_through_a_file() {
        let dir = std::env::temp_dir().join(format!("dep-npy-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.npy");
        let t = Tensor::from_vec(vec![2, 2], vec![1.5, f32::NAN, -0.0, f32::INFINITY]).unwrap();
        save_npy(&t, &path).unwrap();
        assert!(load_npy(&path).unwrap().bits_eq(&t));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_file_names_path_and_os_error() {
        let e = load_npy("/nonexistent/dir/x.npy").unwrap_err().to_string();
        assert!(
            e.starts_with("cannot read '/nonexistent/dir/x.npy': "),
            "{e}"
        );
        assert!(e.contains("os error 2"), "{e}");
        let e = save_npy(&Tensor::scalar(1.0), "/nonexistent/dir/x.npy").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("cannot write '/nonexistent/dir/x.npy': "));
    }

    #[test]
    fn loads_int32() {
        let data: Vec<u8> = [1i32, -2, 3, 400]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let t = load(&npy_bytes(
            "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }",
            &data,
        ))
        .unwrap();
        assert_eq!(t.shape(), &[2, 2]);
        assert_eq!(t.data(), &[1., -2., 3., 400.]);
    }

    /// A whole number float32 cannot hold exactly, or a finite number past its range, is an
    /// error naming the element, not silently its neighbour or infinity (the README's rule for
    /// literals and loop counters, kept for data loaded from files).
    #[test]
    fn values_float32_cannot_hold_are_errors_naming_their_element() {
        let ints: Vec<u8> = [1i64, 1 << 25, (1 << 25) + 1, 4]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let error = load(&npy_bytes(
            "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }",
            &ints,
        ))
        .unwrap_err()
        .to_string();
        assert_eq!(
            error,
            "npy: element [1, 0] is 33554433, which is a whole number float32 cannot hold \
             exactly (it would load as its neighbour); dep's tensors are float32"
        );
        // Column-major: the third element in the file is [0, 1].
        let error = load(&npy_bytes(
            "{'descr': '<i8', 'fortran_order': True, 'shape': (2, 2), }",
            &ints,
        ))
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("npy: element [0, 1] is 33554433,"),
            "{error}"
        );
        let exact: Vec<u8> = [1u64 << 40, 7]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let t = load(&npy_bytes(
            "{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }",
            &exact,
        ))
        .unwrap();
        assert_eq!(t.data(), &[(1u64 << 40) as f32, 7.0]);
        let floats: Vec<u8> = [0.1f64, f64::INFINITY, 1e300]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let error = load(&npy_bytes(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
            &floats,
        ))
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("npy: element [2] is 1e300, which is past float32's range"),
            "{error}"
        );
        assert!(error.contains("past float32's range"), "{error}");
    }

    #[test]
    fn loads_float64_and_big_endian() {
        let data: Vec<u8> = [0.1f64, 2.5].iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = load(&npy_bytes(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
            &data,
        ))
        .unwrap();
        assert_eq!(t.data(), &[0.1f32, 2.5]);
        let data: Vec<u8> = [1.5f32, -3.0]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let t = load(&npy_bytes(
            "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
            &data,
        ))
        .unwrap();
        assert_eq!(t.data(), &[1.5, -3.0]);
        let data: Vec<u8> = [-7i16, 300].iter().flat_map(|v| v.to_be_bytes()).collect();
        let t = load(&npy_bytes(
            "{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }",
            &data,
        ))
        .unwrap();
        assert_eq!(t.data(), &[-7., 300.]);
    }

    #[test]
    fn loads_small_types_and_half() {
        let t = load(&npy_bytes(
            "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }",
            &[0, 7, 255],
        ))
        .unwrap();
        assert_eq!(t.data(), &[0., 7., 255.]);
        let t = load(&npy_bytes(
            "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }",
            &[1, 0],
        ))
        .unwrap();
        assert_eq!(t.data(), &[1., 0.]);
        // 1.0, -2.0, 65504 (max half), smallest subnormal, inf
        let halves: Vec<u8> = [0x3c00u16, 0xc000, 0x7bff, 0x0001, 0x7c00]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let t = load(&npy_bytes(
            "{'descr': '<f2', 'fortran_order': False, 'shape': (5,), }",
            &halves,
        ))
        .unwrap();
        assert_eq!(t.data(), &[1.0, -2.0, 65504.0, 5.9604645e-8, f32::INFINITY]);
    }

    #[test]
    fn fortran_order_is_transposed() {
        // The 2x3 matrix [[1, 2, 3], [4, 5, 6]] stored column by column.
        let data: Vec<u8> = [1f32, 4., 2., 5., 3., 6.]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let t = load(&npy_bytes(
            "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
            &data,
        ))
        .unwrap();
        assert_eq!(t.shape(), &[2, 3]);
        assert_eq!(t.data(), &[1., 2., 3., 4., 5., 6.]);
    }

    #[test]
    fn versions_two_and_three() {
        let header = "{'shape': (1,), 'fortran_order': False, 'descr': '<f4'}\n";
        for version in [2u8, 3] {
            let mut v = MAGIC.to_vec();
            v.extend_from_slice(&[version, 0]);
            v.extend_from_slice(&(header.len() as u32).to_le_bytes());
            v.extend_from_slice(header.as_bytes());
            v.extend_from_slice(&2.0f32.to_le_bytes());
            assert_eq!(load(&v).unwrap().data(), &[2.0]);
        }
    }

    #[test]
    fn bad_files_are_errors() {
        assert_eq!(
            load(b"hello world").unwrap_err().to_string(),
            "npy: not a .npy file (bad magic string)"
        );
        assert_eq!(
            load(&npy_bytes(
                "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                &[0; 8]
            ))
            .unwrap_err()
            .to_string(),
            "npy: unsupported dtype '<c8'"
        );
        assert_eq!(
            load(&npy_bytes(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
                &[0; 8]
            ))
            .unwrap_err()
            .to_string(),
            "npy: the data is truncated: expected 16 bytes for shape [4], found 8"
        );
        assert_eq!(
            load(&npy_bytes("{'descr': '<f4', 'shape': (4,), }", &[0; 16]))
                .unwrap_err()
                .to_string(),
            "npy: bad header: missing 'fortran_order'"
        );
        assert!(load(&npy_bytes("{'descr': '<f4', 'fortran_order': Maybe}", &[])).is_err());
        assert!(load(&npy_bytes("not a dict", &[])).is_err());
        let huge = npy_bytes(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }",
            &[0; 4],
        );
        assert!(load(&huge).is_err());
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[9, 0, 0, 0]);
        assert_eq!(
            load(&v).unwrap_err().to_string(),
            "npy: unsupported format version 9.0"
        );
    }
}
