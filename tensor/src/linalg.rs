//! Linear algebra: matrix products (NumPy's `@` rules for 1-d and 2-d
//! operands, computed by ndarray's `general_mat_mul`, matrixmultiply's
//! blocked and threaded sgemm behind a safe interface) and transposition.

use super::error::{terr, Result};
use super::shape::{alloc, alloc_filled, fmt_shape, numel, strides};
use super::Tensor;

/// The matrix product `a @ b` with NumPy's rules for 1-d and 2-d operands:
/// 1-d @ 1-d is the dot product (0-d), 2-d @ 1-d and 1-d @ 2-d are 1-d,
/// 2-d @ 2-d is 2-d. Other ranks are an error.
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let bad_rank = |t: &Tensor| t.ndim() == 0 || t.ndim() > 2;
    if bad_rank(a) || bad_rank(b) {
        return Err(terr!(
            "matmul supports 1-d and 2-d operands, got shapes {} and {}",
            fmt_shape(a.shape()),
            fmt_shape(b.shape())
        ));
    }
    let (m, ka) = match a.shape() {
        [k] => (1, *k),
        [m, k] => (*m, *k),
        _ => unreachable!("ranks were checked"),
    };
    let (kb, n) = match b.shape() {
        [k] => (*k, 1),
        [k, n] => (*k, *n),
        _ => unreachable!("ranks were checked"),
    };
    if ka != kb {
        return Err(terr!(
            "matmul: shapes {} and {} are not aligned ({ka} != {kb})",
            fmt_shape(a.shape()),
            fmt_shape(b.shape())
        ));
    }
    let k = ka;
    let mut out_shape = Vec::with_capacity(2);
    if a.ndim() == 2 {
        out_shape.push(m);
    }
    if b.ndim() == 2 {
        out_shape.push(n);
    }
    let mut out = alloc_filled(numel(&out_shape)?, 0.0)?;
    if m > 0 && n > 0 && k > 0 {
        let as_matrix = |data, rows, cols| {
            ndarray::ArrayView2::from_shape((rows, cols), data)
                .map_err(|error| terr!("matmul: {error}"))
        };
        let lhs = as_matrix(a.data(), m, k)?;
        let rhs = as_matrix(b.data(), k, n)?;
        let mut product = ndarray::ArrayViewMut2::from_shape((m, n), &mut out[..])
            .map_err(|error| terr!("matmul: {error}"))?;
        ndarray::linalg::general_mat_mul(1.0, &lhs, &rhs, 0.0, &mut product);
    }
    Ok(Tensor::from_parts(out_shape, out))
}

/// Reverses the axes of `x` (a matrix's transpose); 0-d and 1-d tensors are
/// returned unchanged.
pub fn transpose(x: &Tensor) -> Result<Tensor> {
    if x.ndim() <= 1 {
        return Ok(x.clone());
    }
    let shape: Vec<usize> = x.shape().iter().rev().copied().collect();
    let mut out = alloc(x.len())?;
    let d = x.data();
    if x.is_empty() {
        return Ok(Tensor::from_parts(shape, out));
    }
    if let [rows, cols] = *x.shape() {
        // Blocked, so both the reads and the writes stay in cache.
        out.resize(x.len(), 0.0);
        const B: usize = 32;
        for r0 in (0..rows).step_by(B) {
            for c0 in (0..cols).step_by(B) {
                for r in r0..(r0 + B).min(rows) {
                    for c in c0..(c0 + B).min(cols) {
                        out[c * rows + r] = d[r * cols + c];
                    }
                }
            }
        }
        return Ok(Tensor::from_parts(shape, out));
    }
    // General rank: walk the output in order, reading with reversed strides.
    let in_strides: Vec<usize> = strides(x.shape()).into_iter().rev().collect();
    let nd = shape.len();
    let mut idx = vec![0usize; nd];
    let mut off = 0usize;
    for _ in 0..x.len() {
        out.push(d[off]);
        for ax in (0..nd).rev() {
            idx[ax] += 1;
            off += in_strides[ax];
            if idx[ax] < shape[ax] {
                break;
            }
            off -= in_strides[ax] * shape[ax];
            idx[ax] = 0;
        }
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
    fn matrix_matrix() {
        let a = t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = t(&[3, 2], &[7., 8., 9., 10., 11., 12.]);
        let c = matmul(&a, &b).unwrap();
        assert_eq!(c.shape(), &[2, 2]);
        assert_eq!(c.data(), &[58., 64., 139., 154.]);
    }

    #[test]
    fn matrix_vector_and_vector_matrix() {
        let a = t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let v = t(&[3], &[1., 0., -1.]);
        let c = matmul(&a, &v).unwrap();
        assert_eq!(c.shape(), &[2]);
        assert_eq!(c.data(), &[-2., -2.]);
        let w = t(&[2], &[1., 1.]);
        let d = matmul(&w, &a).unwrap();
        assert_eq!(d.shape(), &[3]);
        assert_eq!(d.data(), &[5., 7., 9.]);
    }

    #[test]
    fn vector_vector_is_a_dot_product() {
        let v = t(&[3], &[1., 2., 3.]);
        let c = matmul(&v, &v).unwrap();
        assert_eq!(c.shape(), &[] as &[usize]);
        assert_eq!(c.data(), &[14.]);
    }

    #[test]
    fn misaligned_and_bad_ranks() {
        let a = t(&[2, 3], &[0.; 6]);
        let b = t(&[4, 5], &[0.; 20]);
        assert_eq!(
            matmul(&a, &b).unwrap_err().to_string(),
            "matmul: shapes [2, 3] and [4, 5] are not aligned (3 != 4)"
        );
        let c = t(&[1, 1, 1], &[0.]);
        assert_eq!(
            matmul(&c, &a).unwrap_err().to_string(),
            "matmul supports 1-d and 2-d operands, got shapes [1, 1, 1] and [2, 3]"
        );
        assert!(matmul(&Tensor::scalar(1.0), &a).is_err());
    }

    #[test]
    fn empty_inner_dimension_gives_zeros() {
        let a = t(&[2, 0], &[]);
        let b = t(&[0, 2], &[]);
        assert_eq!(matmul(&a, &b).unwrap().data(), &[0.; 4]);
        assert_eq!(matmul(&b, &a).unwrap().shape(), &[0, 0]);
    }

    #[test]
    fn transposes() {
        let a = t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = transpose(&a).unwrap();
        assert_eq!(b.shape(), &[3, 2]);
        assert_eq!(b.data(), &[1., 4., 2., 5., 3., 6.]);
        let v = t(&[3], &[1., 2., 3.]);
        assert!(transpose(&v).unwrap().bits_eq(&v));
        let s = Tensor::scalar(2.0);
        assert!(transpose(&s).unwrap().bits_eq(&s));
        let c = t(&[2, 1, 3], &[1., 2., 3., 4., 5., 6.]);
        let d = transpose(&c).unwrap();
        assert_eq!(d.shape(), &[3, 1, 2]);
        assert_eq!(d.data(), &[1., 4., 2., 5., 3., 6.]);
        let big: Vec<f32> = (0..70 * 45).map(|i| i as f32).collect();
        let e = transpose(&t(&[70, 45], &big)).unwrap();
        assert_eq!(e.data()[1], 45.0);
        assert!(transpose(&e).unwrap().bits_eq(&t(&[70, 45], &big)));
    }
}
