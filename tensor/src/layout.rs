//! Layout operations: reshape, indexing and slicing, concatenation and
//! splitting. Reshape shares the data; the others copy contiguous runs.

use super::error::{terr, Result};
use super::shape::{alloc, dims_word, fmt_shape, normalize_axis, numel};
use super::Tensor;

/// One entry of an index expression `x[...]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexSpec {
    /// A single position (negative counts from the end); removes the axis.
    Single(i64),
    /// A half-open range `start:end` with NumPy's clamping; either end may
    /// be omitted or negative. Keeps the axis.
    Slice {
        /// First position, 0 if omitted.
        start: Option<i64>,
        /// One past the last position, the axis size if omitted.
        end: Option<i64>,
    },
}

/// `x` with the same data under `dims`; at most one dimension may be -1,
/// which is inferred.
pub fn reshape(x: &Tensor, dims: &[i64]) -> Result<Tensor> {
    Ok(x.with_shape(reshaped_shape(x.shape(), dims)?))
}

/// The shape `reshape` gives a tensor of `shape` (shared with the GPU, which reshapes views).
pub fn reshaped_shape(shape: &[usize], dims: &[i64]) -> Result<Vec<usize>> {
    let len: usize = shape.iter().product();
    let mut infer = None;
    let mut known: usize = 1;
    for (i, &d) in dims.iter().enumerate() {
        if d == -1 {
            if infer.is_some() {
                return Err(terr!("reshape: only one dimension can be -1, got {dims:?}"));
            }
            infer = Some(i);
        } else if d < 0 {
            return Err(terr!("reshape: invalid dimension {d} in {dims:?}"));
        } else {
            known = known.saturating_mul(usize::try_from(d).unwrap_or(usize::MAX));
        }
    }
    let fail = || {
        terr!(
            "cannot reshape a tensor of shape {} ({len} elements) into shape {dims:?}",
            fmt_shape(shape)
        )
    };
    let mut out = Vec::with_capacity(dims.len());
    for (i, &d) in dims.iter().enumerate() {
        if Some(i) == infer {
            if len.checked_rem(known) != Some(0) {
                return Err(fail());
            }
            out.push(len / known);
        } else {
            out.push(usize::try_from(d).map_err(|_| fail())?);
        }
    }
    if numel(&out).ok() != Some(len) {
        return Err(fail());
    }
    Ok(out)
}

/// The selection on one axis: first position, length, and whether the axis
/// stays in the result.
pub struct AxisSel {
    /// The first position selected.
    pub start: usize,
    /// How many positions are selected.
    pub len: usize,
    /// Whether the axis stays in the result (a slice) or goes (a single index).
    pub keep: bool,
}

fn clamp_bound(v: i64, size: usize) -> usize {
    let size_i = size as i64;
    let v = if v < 0 { v.saturating_add(size_i) } else { v };
    v.clamp(0, size_i) as usize
}

/// Indexes and slices `x`; axes without a spec are kept whole.
pub fn index(x: &Tensor, specs: &[IndexSpec]) -> Result<Tensor> {
    let sels = axis_selections(x.shape(), specs)?;
    let out_shape: Vec<usize> = sels.iter().filter(|s| s.keep).map(|s| s.len).collect();
    let total: usize = sels.iter().map(|s| s.len).product();
    let mut out = alloc(total)?;
    if total > 0 {
        if sels.is_empty() {
            out.extend_from_slice(x.data());
        } else {
            copy_block(x.data(), x.shape(), &sels, 0, 0, &mut out);
        }
    }
    Ok(Tensor::from_parts(out_shape, out))
}

/// What `specs` select on each axis of a tensor of `shape` (shared with the GPU kernels).
pub fn axis_selections(shape: &[usize], specs: &[IndexSpec]) -> Result<Vec<AxisSel>> {
    if specs.len() > shape.len() {
        return Err(terr!(
            "too many indices for a tensor of {} (shape {}): {} were given",
            dims_word(shape.len()),
            fmt_shape(shape),
            specs.len()
        ));
    }
    let mut sels = Vec::with_capacity(shape.len());
    for (axis, &size) in shape.iter().enumerate() {
        sels.push(match specs.get(axis) {
            None => AxisSel {
                start: 0,
                len: size,
                keep: true,
            },
            Some(IndexSpec::Single(i)) => {
                let j = if *i < 0 {
                    i.saturating_add(size as i64)
                } else {
                    *i
                };
                if j < 0 || j >= size as i64 {
                    return Err(terr!(
                        "index {i} is out of range for axis {axis} of size {size}"
                    ));
                }
                AxisSel {
                    start: j as usize,
                    len: 1,
                    keep: false,
                }
            }
            Some(IndexSpec::Slice { start, end }) => {
                let s = start.map_or(0, |v| clamp_bound(v, size));
                let e = end.map_or(size, |v| clamp_bound(v, size));
                AxisSel {
                    start: s,
                    len: e.saturating_sub(s),
                    keep: true,
                }
            }
        });
    }
    Ok(sels)
}

/// Appends the selected block of `data` (dimensions `shape[axis..]`, starting
/// at `base`) to `out`; the innermost selection is one contiguous run.
fn copy_block(
    data: &[f32],
    shape: &[usize],
    sels: &[AxisSel],
    axis: usize,
    base: usize,
    out: &mut Vec<f32>,
) {
    let stride: usize = shape[axis + 1..].iter().product();
    let sel = &sels[axis];
    if axis + 1 == shape.len() {
        out.extend_from_slice(&data[base + sel.start..base + sel.start + sel.len]);
        return;
    }
    // Whole trailing axes are a single contiguous run per position.
    if sels[axis + 1..]
        .iter()
        .zip(&shape[axis + 1..])
        .all(|(s, &n)| s.start == 0 && s.len == n)
    {
        let from = base + sel.start * stride;
        out.extend_from_slice(&data[from..from + sel.len * stride]);
        return;
    }
    for i in sel.start..sel.start + sel.len {
        copy_block(data, shape, sels, axis + 1, base + i * stride, out);
    }
}

/// Joins `a` and `b` along `axis`; all other dimensions must match.
pub fn concat(a: &Tensor, b: &Tensor, axis: i64) -> Result<Tensor> {
    if a.ndim() == 0 || b.ndim() == 0 {
        return Err(terr!(
            "concat: zero-dimensional tensors cannot be concatenated (shapes {} and {})",
            fmt_shape(a.shape()),
            fmt_shape(b.shape())
        ));
    }
    let ax = normalize_axis(axis, a.ndim())?;
    let compatible = a.ndim() == b.ndim()
        && a.shape()
            .iter()
            .zip(b.shape())
            .enumerate()
            .all(|(i, (x, y))| i == ax || x == y);
    if !compatible {
        return Err(terr!(
            "concat: shapes {} and {} do not match outside axis {axis}",
            fmt_shape(a.shape()),
            fmt_shape(b.shape())
        ));
    }
    let mut shape = a.shape().to_vec();
    shape[ax] = a.shape()[ax]
        .checked_add(b.shape()[ax])
        .ok_or_else(|| terr!("concat: the result is too large"))?;
    let total = numel(&shape)?;
    let mut out = alloc(total)?;
    let inner: usize = shape[ax + 1..].iter().product();
    let (ra, rb) = (a.shape()[ax] * inner, b.shape()[ax] * inner);
    let outer: usize = shape[..ax].iter().product();
    if total > 0 {
        for o in 0..outer {
            out.extend_from_slice(&a.data()[o * ra..(o + 1) * ra]);
            out.extend_from_slice(&b.data()[o * rb..(o + 1) * rb]);
        }
    }
    Ok(Tensor::from_parts(shape, out))
}

/// Splits `x` along `axis` into `parts` tensors of equal size.
pub fn split(x: &Tensor, parts: usize, axis: i64) -> Result<Vec<Tensor>> {
    split_specs(x.shape(), parts, axis)?
        .iter()
        .map(|specs| index(x, specs))
        .collect()
}

/// The index of each part of `split` on a tensor of `shape` (shared with the GPU kernels).
pub fn split_specs(shape: &[usize], parts: usize, axis: i64) -> Result<Vec<Vec<IndexSpec>>> {
    let ax = normalize_axis(axis, shape.len())?;
    let size = shape[ax];
    if size.checked_rem(parts) != Some(0) {
        return Err(terr!(
            "split: axis {axis} of size {size} (shape {}) cannot be split into {parts} equal parts",
            fmt_shape(shape)
        ));
    }
    let step = size / parts;
    let whole = IndexSpec::Slice {
        start: None,
        end: None,
    };
    Ok((0..parts)
        .map(|part| {
            let mut specs = vec![whole; ax];
            specs.push(IndexSpec::Slice {
                start: Some((part * step) as i64),
                end: Some(((part + 1) * step) as i64),
            });
            specs
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use IndexSpec::{Single, Slice};

    fn t(shape: &[usize], data: &[f32]) -> Tensor {
        Tensor::from_vec(shape.to_vec(), data.to_vec()).unwrap()
    }

    fn m() -> Tensor {
        t(&[3, 4], &(0..12).map(|i| i as f32).collect::<Vec<_>>())
    }

    fn sl(start: Option<i64>, end: Option<i64>) -> IndexSpec {
        Slice { start, end }
    }

    #[test]
    fn reshape_infers_minus_one() {
        let r = reshape(&m(), &[2, -1]).unwrap();
        assert_eq!(r.shape(), &[2, 6]);
        assert!(r.shares_data(&m()) || r.data() == m().data());
        assert_eq!(reshape(&m(), &[-1]).unwrap().shape(), &[12]);
        assert_eq!(
            reshape(&Tensor::scalar(1.), &[1, 1]).unwrap().shape(),
            &[1, 1]
        );
        assert_eq!(
            reshape(&t(&[1], &[1.]), &[]).unwrap().shape(),
            &[] as &[usize]
        );
        assert_eq!(
            reshape(&m(), &[5, -1]).unwrap_err().to_string(),
            "cannot reshape a tensor of shape [3, 4] (12 elements) into shape [5, -1]"
        );
        assert_eq!(
            reshape(&m(), &[-1, -1]).unwrap_err().to_string(),
            "reshape: only one dimension can be -1, got [-1, -1]"
        );
        assert!(reshape(&m(), &[-3, -4]).is_err());
        assert!(reshape(&t(&[0], &[]), &[0, -1]).is_err());
        assert!(reshape(&m(), &[i64::MAX, i64::MAX]).is_err());
    }

    #[test]
    fn single_indices() {
        let r = index(&m(), &[Single(1)]).unwrap();
        assert_eq!(r.shape(), &[4]);
        assert_eq!(r.data(), &[4., 5., 6., 7.]);
        let r = index(&m(), &[Single(-1), Single(-2)]).unwrap();
        assert_eq!(r.shape(), &[] as &[usize]);
        assert_eq!(r.data(), &[10.]);
        assert_eq!(
            index(&m(), &[Single(3)]).unwrap_err().to_string(),
            "index 3 is out of range for axis 0 of size 3"
        );
        assert_eq!(
            index(&m(), &[Single(0), Single(-5)])
                .unwrap_err()
                .to_string(),
            "index -5 is out of range for axis 1 of size 4"
        );
        assert_eq!(
            index(&m(), &[Single(0), Single(0), Single(0)])
                .unwrap_err()
                .to_string(),
            "too many indices for a tensor of 2 dimensions (shape [3, 4]): 3 were given"
        );
    }

    #[test]
    fn slices_clamp_like_numpy() {
        let r = index(&m(), &[sl(None, None), sl(Some(1), Some(3))]).unwrap();
        assert_eq!(r.shape(), &[3, 2]);
        assert_eq!(r.data(), &[1., 2., 5., 6., 9., 10.]);
        let r = index(&m(), &[sl(Some(-2), None), Single(-1)]).unwrap();
        assert_eq!(r.shape(), &[2]);
        assert_eq!(r.data(), &[7., 11.]);
        let r = index(&m(), &[sl(Some(-100), Some(100))]).unwrap();
        assert!(r.bits_eq(&m()));
        let r = index(&m(), &[sl(Some(2), Some(1))]).unwrap();
        assert_eq!(r.shape(), &[0, 4]);
        let r = index(&m(), &[Single(1), sl(None, Some(-1))]).unwrap();
        assert_eq!(r.data(), &[4., 5., 6.]);
        let r = index(&m(), &[]).unwrap();
        assert!(r.bits_eq(&m()));
        let s = index(&Tensor::scalar(4.), &[]).unwrap();
        assert_eq!(s.data(), &[4.]);
    }

    #[test]
    fn split_and_concat_roundtrip() {
        let parts = split(&m(), 2, 1).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].shape(), &[3, 2]);
        assert_eq!(parts[0].data(), &[0., 1., 4., 5., 8., 9.]);
        let back = concat(&parts[0], &parts[1], -1).unwrap();
        assert!(back.bits_eq(&m()));
        let rows = split(&m(), 3, 0).unwrap();
        let top = concat(&rows[0], &rows[1], 0).unwrap();
        assert!(concat(&top, &rows[2], 0).unwrap().bits_eq(&m()));
        assert_eq!(
            split(&m(), 3, 1).unwrap_err().to_string(),
            "split: axis 1 of size 4 (shape [3, 4]) cannot be split into 3 equal parts"
        );
        assert!(split(&m(), 0, 0).is_err());
        assert_eq!(
            concat(&m(), &t(&[2, 3], &[0.; 6]), 0)
                .unwrap_err()
                .to_string(),
            "concat: shapes [3, 4] and [2, 3] do not match outside axis 0"
        );
        assert!(concat(&m(), &t(&[4], &[0.; 4]), 0).is_err());
        assert!(concat(&Tensor::scalar(1.), &Tensor::scalar(1.), 0).is_err());
        assert_eq!(
            concat(&m(), &m(), 2).unwrap_err().to_string(),
            "axis 2 is out of range for a tensor of 2 dimensions"
        );
    }
}
