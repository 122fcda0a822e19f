//! Neural-network helpers: a numerically stable softmax and one-hot
//! encoding of integer labels.

use super::error::{terr, Result};
use super::format::plain;
use super::shape::{alloc_filled, fmt_shape, normalize_axis, numel};
use super::Tensor;

/// `exp(x - max) / sum(exp(x - max))` along `axis` (negative counts from
/// the end), so large inputs do not overflow.
pub fn softmax(x: &Tensor, axis: i64) -> Result<Tensor> {
    let ax = normalize_axis(axis, x.ndim())?;
    let shape = x.shape();
    let n = shape[ax];
    let outer: usize = shape[..ax].iter().product();
    let inner: usize = shape[ax + 1..].iter().product();
    let mut out = x.clone();
    if x.is_empty() {
        return Ok(out);
    }
    let d = out.make_mut();
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            let at = |k: usize| base + k * inner;
            let mut m = f32::NEG_INFINITY;
            for k in 0..n {
                let v = d[at(k)];
                if v > m || v.is_nan() {
                    m = v;
                    if v.is_nan() {
                        break;
                    }
                }
            }
            // An all -inf lane would give (-inf) - (-inf) = NaN, as in NumPy.
            let mut sum = 0.0f32;
            for k in 0..n {
                let e = (d[at(k)] - m).exp();
                d[at(k)] = e;
                sum += e;
            }
            for k in 0..n {
                d[at(k)] /= sum;
            }
        }
    }
    Ok(out)
}

/// One-hot encodes integer-valued `labels` into `classes` columns: the result
/// has shape `labels.shape + [classes]`, with a 1 at each label's position.
pub fn onehot(labels: &Tensor, classes: usize) -> Result<Tensor> {
    let mut shape = labels.shape().to_vec();
    shape.push(classes);
    let mut out = alloc_filled(numel(&shape)?, 0.0)?;
    for (i, &v) in labels.data().iter().enumerate() {
        if v.fract() != 0.0 || !v.is_finite() {
            return Err(terr!(
                "onehot: label {} at position {i} of a tensor of shape {} is not an integer",
                plain(v),
                fmt_shape(labels.shape())
            ));
        }
        if v < 0.0 || v >= classes as f32 {
            return Err(terr!(
                "onehot: label {} at position {i} is out of range for {classes} classes \
                 (labels must be in [0, {classes}))",
                plain(v)
            ));
        }
        out[i * classes + v as usize] = 1.0;
    }
    Ok(Tensor::from_parts(shape, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize], data: &[f32]) -> Tensor {
        Tensor::from_vec(shape.to_vec(), data.to_vec()).unwrap()
    }

    #[test]
    fn softmax_rows_sum_to_one() {
        let x = t(&[2, 3], &[1., 2., 3., 1000., 1000., 1000.]);
        let s = softmax(&x, -1).unwrap();
        for row in s.data().chunks(3) {
            let total: f32 = row.iter().sum();
            assert!((total - 1.0).abs() < 1e-6, "{row:?}");
        }
        assert!((s.data()[3] - 1.0 / 3.0).abs() < 1e-7);
        let want = [0.09003057, 0.24472847, 0.66524096];
        for (g, w) in s.data()[..3].iter().zip(want) {
            assert!((g - w).abs() < 1e-7, "{g} vs {w}");
        }
    }

    #[test]
    fn softmax_along_columns() {
        let x = t(&[2, 2], &[0., 5., 0., 5.]);
        let s = softmax(&x, 0).unwrap();
        assert_eq!(s.data(), &[0.5, 0.5, 0.5, 0.5]);
        assert!(softmax(&Tensor::scalar(1.0), 0).is_err());
        assert_eq!(
            softmax(&x, 2).unwrap_err().to_string(),
            "axis 2 is out of range for a tensor of 2 dimensions"
        );
    }

    #[test]
    fn onehot_encodes() {
        let y = t(&[3], &[0., 2., 1.]);
        let h = onehot(&y, 3).unwrap();
        assert_eq!(h.shape(), &[3, 3]);
        assert_eq!(h.data(), &[1., 0., 0., 0., 0., 1., 0., 1., 0.]);
        let y2 = t(&[2, 1], &[1., 0.]);
        let h2 = onehot(&y2, 2).unwrap();
        assert_eq!(h2.shape(), &[2, 1, 2]);
        assert_eq!(h2.data(), &[0., 1., 1., 0.]);
        assert_eq!(onehot(&Tensor::scalar(1.), 2).unwrap().data(), &[0., 1.]);
    }

    #[test]
    fn onehot_rejects_bad_labels() {
        assert_eq!(
            onehot(&t(&[2], &[0., 3.]), 3).unwrap_err().to_string(),
            "onehot: label 3 at position 1 is out of range for 3 classes (labels must be in [0, 3))"
        );
        assert_eq!(
            onehot(&t(&[2], &[1.5, 0.]), 3).unwrap_err().to_string(),
            "onehot: label 1.5 at position 0 of a tensor of shape [2] is not an integer"
        );
        assert!(onehot(&t(&[1], &[-1.]), 3).is_err());
        assert_eq!(
            onehot(&t(&[1], &[f32::NAN]), 3).unwrap_err().to_string(),
            "onehot: label nan at position 0 of a tensor of shape [1] is not an integer"
        );
    }
}
