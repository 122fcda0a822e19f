//! Reductions: sum, mean, max, min and argmax, over the whole tensor (giving
//! a 0-d tensor) or over one axis (removing it).
//!
//! Sums add in NumPy's order: from 0, pairwise along contiguous rows (eight
//! accumulators in blocks of 128), row after row across an outer axis, so
//! results are accurate and bit-identical to NumPy's on the CPU. Max and min
//! propagate NaN and, among equal values (0.0 and -0.0), keep the last, as
//! NumPy's do; argmax returns the first maximum (or the first NaN) as an
//! `f32` index, an error past what `f32` holds exactly.

use super::error::{terr, Result};
use super::shape::{alloc, alloc_filled, fmt_shape, normalize_axis};
use super::Tensor;

/// A reduction over a whole tensor or one of its axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum (0 for no elements).
    Sum,
    /// The arithmetic mean (NaN for no elements).
    Mean,
    /// The largest value, NaN if any is NaN; an error for no elements.
    Max,
    /// The smallest value, NaN if any is NaN; an error for no elements.
    Min,
    /// The index of the first largest value (or first NaN) as `f32`; an
    /// error for no elements, or for an index `f32` cannot hold exactly.
    Argmax,
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Argmax,
    ];

    /// The builtin's name: `sum`, `mean`, `max`, `min`, `argmax`.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Argmax => "argmax",
        }
    }

    /// The reduction called `name`, if any.
    pub fn from_name(name: &str) -> Option<ReduceOp> {
        ReduceOp::ALL.into_iter().find(|op| op.name() == name)
    }
}

/// The sum of a contiguous run the way NumPy's `add.reduce` computes it:
/// its identity, 0, plus the pairwise sum of the run (so `sum([1, 1e8, -1e8])`
/// is 0, as NumPy's, and the sum of `[-0.0]` is 0.0).
pub(crate) fn numpy_sum(x: &[f32]) -> f32 {
    0.0 + pairwise_sum(x)
}

/// NumPy's pairwise sum: eight accumulators over blocks of at most 128
/// elements, halving larger runs.
fn pairwise_sum(x: &[f32]) -> f32 {
    let n = x.len();
    if n < 8 {
        let mut s = -0.0f32;
        for &v in x {
            s += v;
        }
        s
    } else if n <= 128 {
        let mut r = [0f32; 8];
        r.copy_from_slice(&x[..8]);
        let mut i = 8;
        while i + 8 <= n {
            for (k, acc) in r.iter_mut().enumerate() {
                *acc += x[i + k];
            }
            i += 8;
        }
        let mut s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &v in &x[i..] {
            s += v;
        }
        s
    } else {
        let mut half = n / 2;
        half -= half % 8;
        pairwise_sum(&x[..half]) + pairwise_sum(&x[half..])
    }
}

/// The maximum (`greater = true`) or minimum of a non-empty run, NaN if any
/// element is NaN; of equal values the last (`max([-0.0, 0.0])` is 0.0).
fn extreme(x: &[f32], greater: bool) -> f32 {
    let mut m = x[0];
    for &v in x {
        if v.is_nan() {
            return v;
        }
        if replaces(v, m, greater) {
            m = v;
        }
    }
    m
}

/// Whether `v` takes the place of `m` as the maximum (`greater`) or minimum
/// so far, neither NaN: a value equal to it does, as in NumPy's reductions.
fn replaces(v: f32, m: f32, greater: bool) -> bool {
    if greater {
        v >= m
    } else {
        v <= m
    }
}

/// The index of the first maximum (or the first NaN) of a non-empty run.
fn argmax_of(x: &[f32]) -> usize {
    let mut best = x[0];
    let mut at = 0;
    if best.is_nan() {
        return 0;
    }
    for (i, &v) in x.iter().enumerate().skip(1) {
        if v.is_nan() {
            return i;
        }
        if v > best {
            best = v;
            at = i;
        }
    }
    at
}

/// `index` as the float32 an index is held in, or an error if float32 cannot hold it exactly
/// (past 16777216, 2^24): the index would silently be its neighbour.
fn index_f32(op: ReduceOp, index: usize) -> Result<f32> {
    let single = index as f32;
    if single as usize == index {
        Ok(single)
    } else {
        Err(terr!(
            "{}: the index {index} is not a float32 number: tensors hold float32, whose whole \
             numbers are exact up to 16777216; the nearest is {single:.0}",
            op.name()
        ))
    }
}

fn reduce_run(op: ReduceOp, x: &[f32]) -> Result<f32> {
    Ok(match op {
        ReduceOp::Sum => numpy_sum(x),
        ReduceOp::Mean => numpy_sum(x) / x.len() as f32,
        ReduceOp::Max => extreme(x, true),
        ReduceOp::Min => extreme(x, false),
        ReduceOp::Argmax => index_f32(op, argmax_of(x))?,
    })
}

/// Reduces `x` with `op` over everything (`axis` is `None`, giving a 0-d
/// tensor) or over one axis (negative counts from the end), removing it.
pub fn reduce(op: ReduceOp, x: &Tensor, axis: Option<i64>) -> Result<Tensor> {
    let needs_values = matches!(op, ReduceOp::Max | ReduceOp::Min | ReduceOp::Argmax);
    let Some(axis) = axis else {
        if needs_values && x.is_empty() {
            return Err(terr!(
                "cannot take the {} of an empty tensor (shape {})",
                op.name(),
                fmt_shape(x.shape())
            ));
        }
        return Ok(Tensor::scalar(reduce_run(op, x.data())?));
    };
    let ax = normalize_axis(axis, x.ndim())?;
    let shape = x.shape();
    let n = shape[ax];
    if needs_values && n == 0 {
        return Err(terr!(
            "cannot take the {} over axis {axis} of size 0 (shape {})",
            op.name(),
            fmt_shape(shape)
        ));
    }
    let outer: usize = shape[..ax].iter().product();
    let inner: usize = shape[ax + 1..].iter().product();
    let mut out_shape = shape.to_vec();
    out_shape.remove(ax);
    let d = x.data();
    let count = outer * inner;
    if inner == 1 {
        let mut out = alloc(count)?;
        for o in 0..outer {
            out.push(reduce_run(op, &d[o * n..(o + 1) * n])?);
        }
        return Ok(Tensor::from_parts(out_shape, out));
    }
    let mut out = alloc_filled(count, 0.0)?;
    if count == 0 {
        return Ok(Tensor::from_parts(out_shape, out));
    }
    for o in 0..outer {
        let block = &d[o * n * inner..(o + 1) * n * inner];
        let acc = &mut out[o * inner..(o + 1) * inner];
        match op {
            ReduceOp::Sum | ReduceOp::Mean => {
                // From 0, as NumPy's: `-0.0` rows sum to 0.0.
                for row in block.chunks_exact(inner) {
                    for (a, &v) in acc.iter_mut().zip(row) {
                        *a += v;
                    }
                }
                if op == ReduceOp::Mean {
                    let k = n as f32;
                    for a in acc.iter_mut() {
                        *a /= k;
                    }
                }
            }
            ReduceOp::Max | ReduceOp::Min => {
                let greater = op == ReduceOp::Max;
                acc.copy_from_slice(&block[..inner]);
                for row in block.chunks_exact(inner).skip(1) {
                    for (a, &v) in acc.iter_mut().zip(row) {
                        if !a.is_nan() && (v.is_nan() || replaces(v, *a, greater)) {
                            *a = v;
                        }
                    }
                }
            }
            ReduceOp::Argmax => {
                let mut best = block[..inner].to_vec();
                for (i, row) in block.chunks_exact(inner).enumerate().skip(1) {
                    for ((b, a), &v) in best.iter_mut().zip(acc.iter_mut()).zip(row) {
                        if !b.is_nan() && (v.is_nan() || v > *b) {
                            *b = v;
                            *a = index_f32(op, i)?;
                        }
                    }
                }
            }
        }
    }
    Ok(Tensor::from_parts(out_shape, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize], data: &[f32]) -> Tensor {
        Tensor::from_vec(shape.to_vec(), data.to_vec()).unwrap()
    }

    fn m() -> Tensor {
        t(&[2, 3], &[1., 5., 3., 4., 2., 6.])
    }

    fn check(op: ReduceOp, axis: Option<i64>, shape: &[usize], want: &[f32]) {
        let r = reduce(op, &m(), axis).unwrap();
        assert_eq!(r.shape(), shape, "{op:?} {axis:?}");
        assert_eq!(r.data(), want, "{op:?} {axis:?}");
    }

    #[test]
    fn whole_tensor() {
        check(ReduceOp::Sum, None, &[], &[21.]);
        check(ReduceOp::Mean, None, &[], &[3.5]);
        check(ReduceOp::Max, None, &[], &[6.]);
        check(ReduceOp::Min, None, &[], &[1.]);
        check(ReduceOp::Argmax, None, &[], &[5.]);
    }

    #[test]
    fn along_axes() {
        check(ReduceOp::Sum, Some(0), &[3], &[5., 7., 9.]);
        check(ReduceOp::Sum, Some(1), &[2], &[9., 12.]);
        check(ReduceOp::Sum, Some(-1), &[2], &[9., 12.]);
        check(ReduceOp::Mean, Some(0), &[3], &[2.5, 3.5, 4.5]);
        check(ReduceOp::Mean, Some(1), &[2], &[3., 4.]);
        check(ReduceOp::Max, Some(0), &[3], &[4., 5., 6.]);
        check(ReduceOp::Max, Some(1), &[2], &[5., 6.]);
        check(ReduceOp::Min, Some(0), &[3], &[1., 2., 3.]);
        check(ReduceOp::Min, Some(-1), &[2], &[1., 2.]);
        check(ReduceOp::Argmax, Some(0), &[3], &[1., 0., 1.]);
        check(ReduceOp::Argmax, Some(1), &[2], &[1., 2.]);
    }

    #[test]
    fn three_dimensions_middle_axis() {
        let x = t(&[2, 2, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]);
        let r = reduce(ReduceOp::Sum, &x, Some(1)).unwrap();
        assert_eq!(r.shape(), &[2, 2]);
        assert_eq!(r.data(), &[4., 6., 12., 14.]);
    }

    #[test]
    fn nan_and_ties() {
        let x = t(&[4], &[1., f32::NAN, 3., 3.]);
        assert!(reduce(ReduceOp::Max, &x, None).unwrap().data()[0].is_nan());
        assert!(reduce(ReduceOp::Min, &x, Some(0)).unwrap().data()[0].is_nan());
        assert_eq!(reduce(ReduceOp::Argmax, &x, None).unwrap().data(), &[1.]);
        let y = t(&[3], &[3., 1., 3.]);
        assert_eq!(reduce(ReduceOp::Argmax, &y, None).unwrap().data(), &[0.]);
        let z = t(&[2, 2], &[1., f32::NAN, 2., 0.]);
        assert_eq!(
            reduce(ReduceOp::Argmax, &z, Some(0)).unwrap().data(),
            &[1., 0.]
        );
    }

    /// An index past 2^24 that float32 cannot hold is an error, not its neighbour (argmax of
    /// 16777218 elements whose last is largest gave 16777216); one float32 holds is taken.
    #[test]
    fn an_index_float32_cannot_hold_is_an_error() {
        const N: usize = 16_777_218;
        let message = "argmax: the index 16777217 is not a float32 number: tensors hold \
                       float32, whose whole numbers are exact up to 16777216; the nearest is \
                       16777216";
        let mut data = vec![0f32; N];
        data[N - 1] = 1.0;
        let x = t(&[N], &data);
        let error = reduce(ReduceOp::Argmax, &x, None).unwrap_err();
        assert_eq!(error.to_string(), message);
        let column = reduce(ReduceOp::Argmax, &t(&[N, 1], &data), Some(0)).unwrap_err();
        assert_eq!(column.to_string(), message);
        data[N - 1] = 0.0;
        data[N - 2] = 1.0;
        let x = t(&[N], &data);
        assert_eq!(
            reduce(ReduceOp::Argmax, &x, None).unwrap().data(),
            &[16_777_216.]
        );
        drop((x, data));
        // Over an axis with several columns: the second column's maximum is past 2^24.
        let mut data = vec![0f32; N * 2];
        data[2 * (N - 1) + 1] = 1.0;
        let error = reduce(ReduceOp::Argmax, &t(&[N, 2], &data), Some(0)).unwrap_err();
        assert_eq!(error.to_string(), message);
    }

    #[test]
    fn empty_inputs() {
        let e = t(&[0], &[]);
        assert_eq!(reduce(ReduceOp::Sum, &e, None).unwrap().data(), &[0.]);
        assert!(reduce(ReduceOp::Mean, &e, None).unwrap().data()[0].is_nan());
        assert_eq!(
            reduce(ReduceOp::Max, &e, None).unwrap_err().to_string(),
            "cannot take the max of an empty tensor (shape [0])"
        );
        let e2 = t(&[0, 3], &[]);
        assert_eq!(
            reduce(ReduceOp::Argmax, &e2, Some(0))
                .unwrap_err()
                .to_string(),
            "cannot take the argmax over axis 0 of size 0 (shape [0, 3])"
        );
        let r = reduce(ReduceOp::Max, &e2, Some(1)).unwrap();
        assert_eq!(r.shape(), &[0]);
        assert_eq!(
            reduce(ReduceOp::Sum, &e2, Some(0)).unwrap().data(),
            &[0.; 3]
        );
    }

    #[test]
    fn bad_axis() {
        assert_eq!(
            reduce(ReduceOp::Sum, &m(), Some(2))
                .unwrap_err()
                .to_string(),
            "axis 2 is out of range for a tensor of 2 dimensions"
        );
        assert!(reduce(ReduceOp::Sum, &Tensor::scalar(1.0), Some(0)).is_err());
    }

    #[test]
    fn pairwise_sum_is_accurate() {
        let x = vec![0.1f32; 1_000_000];
        let s = numpy_sum(&x);
        assert!((s - 100_000.0).abs() < 1.0, "{s}");
        let v: Vec<f32> = (0..1000).map(|i| i as f32).collect();
        assert_eq!(numpy_sum(&v), 499_500.0);
        assert_eq!(numpy_sum(&[-0.0]).to_bits(), 0.0f32.to_bits());
        // NumPy's order: 0 + 1 + 1e8 rounds to 1e8 before -1e8 (the first element
        // added to the rest's sum gave 1).
        assert_eq!(numpy_sum(&[1.0, 1e8, -1e8]), 0.0);
        assert_eq!(numpy_sum(&[]), 0.0);
    }
}
