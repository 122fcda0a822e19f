//! Creation of tensors from a shape: constant fills, the identity matrix and
//! ranges. Random tensors live in `random.rs`.

use super::error::Result;
use super::shape::{alloc, alloc_filled, numel};
use super::Tensor;

/// A tensor of shape `dims` filled with `value`.
pub fn full(value: f32, dims: &[usize]) -> Result<Tensor> {
    let n = numel(dims)?;
    Ok(Tensor::from_parts(dims.to_vec(), alloc_filled(n, value)?))
}

/// A tensor of shape `dims` filled with zeros.
pub fn zeros(dims: &[usize]) -> Result<Tensor> {
    full(0.0, dims)
}

/// A tensor of shape `dims` filled with ones.
pub fn ones(dims: &[usize]) -> Result<Tensor> {
    full(1.0, dims)
}

/// The `n` by `n` identity matrix.
pub fn eye(n: usize) -> Result<Tensor> {
    let mut t = zeros(&[n, n])?;
    let data = t.make_mut();
    for i in 0..n {
        data[i * n + i] = 1.0;
    }
    Ok(t)
}

/// The 1-d tensor `[0, 1, ..., n - 1]`.
pub fn arange(n: usize) -> Result<Tensor> {
    numel(&[n])?;
    let mut v = alloc(n)?;
    v.extend((0..n).map(|i| i as f32));
    Ok(Tensor::from_parts(vec![n], v))
}

/// `x`'s values in a buffer of their own, allocated as a result is (from the running op's pool
/// or spare buffer, within the memory budget): what a copy to another device holds there.
pub fn copied(x: &Tensor) -> Result<Tensor> {
    let mut v = alloc(x.len())?;
    v.extend_from_slice(x.data());
    Ok(Tensor::from_slice_parts(x.shape(), v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_has_a_buffer_of_its_own() {
        let x = full(3.0, &[2, 2]).unwrap();
        let copy = copied(&x).unwrap();
        assert!(copy.bits_eq(&x));
        assert!(!copy.shares_data(&x));
    }

    #[test]
    fn fills() {
        let z = zeros(&[2, 3]).unwrap();
        assert_eq!(z.shape(), &[2, 3]);
        assert!(z.data().iter().all(|&v| v == 0.0));
        assert_eq!(ones(&[]).unwrap().data(), &[1.0]);
        assert_eq!(full(2.5, &[2]).unwrap().data(), &[2.5, 2.5]);
        assert_eq!(zeros(&[0, 4]).unwrap().len(), 0);
    }

    #[test]
    fn identity_and_range() {
        assert_eq!(eye(2).unwrap().data(), &[1., 0., 0., 1.]);
        assert_eq!(eye(0).unwrap().shape(), &[0, 0]);
        let r = arange(4).unwrap();
        assert_eq!(r.shape(), &[4]);
        assert_eq!(r.data(), &[0., 1., 2., 3.]);
    }

    #[test]
    fn too_large_is_an_error() {
        // Refused by the memory budget before the allocator is asked (4 TB).
        let message = zeros(&[1_000_000, 1_000_000]).unwrap_err().to_string();
        assert!(
            message.starts_with(
                "cannot allocate a tensor of 1000000000000 elements (3725.3 GiB): only "
            ),
            "{message}"
        );
        assert!(eye(usize::MAX).is_err());
    }
}
