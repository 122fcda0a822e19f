//! CPU tensors of `f32` and the operations of the language on them.
//!
//! A [`Tensor`] is a row-major, contiguous block of `f32` values behind an
//! [`Arc`], so cloning one is cheap and [`Tensor::make_mut`] copies only when
//! the data is shared. Every operation returns a [`Result`] whose error is a
//! [`TensorError`] with a clear lowercase message; no input makes an operation
//! panic, and a tensor too large for memory is an error rather than an abort.
//!
//! The operations live in small modules, one job each, and are re-exported
//! here: creation ([`zeros`], [`rand()`], ...), elementwise arithmetic with NumPy
//! broadcasting ([`binary`], [`unary`]), reductions ([`reduce`]), linear
//! algebra ([`matmul`], [`transpose`]), layout ([`reshape`], [`index`],
//! [`concat()`], [`split`]), neural-network helpers ([`softmax`], [`onehot`]),
//! `.npy` files ([`save_npy`], [`load_npy`]) and NumPy-like printing (the
//! [`std::fmt::Display`] impl). [`backend`] names these operations as a trait that
//! every device implements, the CPU's here.

use std::sync::Arc;

pub mod backend;
mod create;
mod elementwise;
pub mod error;
mod format;
mod layout;
mod linalg;
mod memory_budget;
mod nn;
mod npy;
mod random;
mod reduce;
pub mod shape;
mod storage;

pub use create::{arange, copied, eye, full, ones, zeros};
pub use elementwise::{
    binary, binary_inplace, binary_into, binary_owned, unary, unary_inplace, unary_into,
    unary_owned, BinaryOp, UnaryOp,
};
pub use error::{Result, TensorError};
pub use format::{format_for_reading, format_scalar};
pub use layout::{axis_selections, reshaped_shape, split_specs, AxisSel};
pub use layout::{concat, index, reshape, split, IndexSpec};
pub use linalg::{matmul, transpose};
pub use memory_budget::budget_bytes as memory_budget_bytes;
pub use nn::{onehot, softmax};
pub use npy::{load_npy, read_npy, save_npy, write_npy};
pub use random::{rand, randn, seeded_rng, TensorRng};
pub use reduce::{reduce, ReduceOp};
pub use storage::with_spare;
pub use storage::{cpu_memory, format_bytes, reset_cpu_peak, with_pool, BufferPool};

use storage::Storage;

use shape::fmt_shape;
use smallvec::SmallVec;

/// An n-dimensional, row-major, contiguous array of `f32`.
///
/// A 0-d tensor has shape `[]` and one element. Clones share their data.
#[derive(Debug)]
pub struct Tensor {
    /// Inline up to four dimensions: cloning a tensor (an op reading a variable) allocates
    /// nothing.
    shape: SmallVec<[usize; 4]>,
    data: Arc<Storage>,
}

impl Clone for Tensor {
    /// Shares the data; copies the shape as one slice (`SmallVec`'s own `clone` extends it
    /// element by element, on every read of a variable).
    fn clone(&self) -> Tensor {
        Tensor {
            shape: SmallVec::from_slice(&self.shape),
            data: self.data.clone(),
        }
    }
}

impl Tensor {
    /// Builds a tensor of `shape` from row-major `data`; the number of
    /// values must equal the product of the dimensions.
    pub fn from_vec(shape: Vec<usize>, data: Vec<f32>) -> Result<Tensor> {
        let n = shape::numel(&shape)?;
        if n != data.len() {
            return Err(terr!(
                "cannot make a tensor of shape {} ({n} elements) from {} values",
                fmt_shape(&shape),
                data.len()
            ));
        }
        Ok(Tensor {
            shape: SmallVec::from_vec(shape),
            data: Arc::new(Storage::new(data)),
        })
    }

    /// Internal constructor for callers that already checked the sizes.
    pub(crate) fn from_parts(shape: Vec<usize>, data: Vec<f32>) -> Tensor {
        debug_assert_eq!(shape::numel(&shape).ok(), Some(data.len()));
        Tensor {
            shape: SmallVec::from_vec(shape),
            data: Arc::new(Storage::new(data)),
        }
    }

    /// [`Tensor::from_parts`] for a shape borrowed from elsewhere (no vector built for it).
    pub(crate) fn from_slice_parts(shape: &[usize], data: Vec<f32>) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        Tensor {
            shape: SmallVec::from_slice(shape),
            data: Arc::new(Storage::new(data)),
        }
    }

    /// A 0-d tensor holding `value`.
    pub fn scalar(value: f32) -> Tensor {
        Tensor {
            shape: SmallVec::new(),
            data: Arc::new(Storage::new(vec![value])),
        }
    }

    /// The dimensions, outermost first (`[]` for a scalar).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The number of elements (1 for a 0-d tensor).
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the tensor has no elements (some dimension is 0).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The size of the data in bytes (4 per element).
    pub fn nbytes(&self) -> usize {
        self.data.len() * std::mem::size_of::<f32>()
    }

    /// The values in row-major order.
    pub fn data(&self) -> &[f32] {
        &self.data
    }

    /// The values in row-major order (same as [`Tensor::data`]).
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    /// The single value of a 0-d or one-element tensor.
    pub fn to_scalar(&self) -> Option<f32> {
        match self.data.as_slice() {
            [v] => Some(*v),
            _ => None,
        }
    }

    /// Mutable access to the values for in-place updates; copies them first
    /// only if another tensor shares them.
    pub fn make_mut(&mut self) -> &mut [f32] {
        Arc::make_mut(&mut self.data).values_mut().as_mut_slice()
    }

    /// The shape, and the values to write in place (copied first only if shared, as
    /// [`Tensor::make_mut`]): for kernels that need both at once without copying the shape.
    pub fn shape_and_values_mut(&mut self) -> (&[usize], &mut [f32]) {
        let values = Arc::make_mut(&mut self.data).values_mut().as_mut_slice();
        (&self.shape, values)
    }

    /// Whether `self` and `other` have the same shape and bit-identical
    /// values (so NaNs compare equal to themselves, and `0.0 != -0.0`).
    pub fn bits_eq(&self, other: &Tensor) -> bool {
        self.shape == other.shape
            && self
                .data
                .iter()
                .zip(other.data.iter())
                .all(|(a, b)| a.to_bits() == b.to_bits())
    }

    /// The shape, and the buffer of values to overwrite, when no other tensor shares them (for
    /// kernels that write a result into a dead value's buffer); `None` when shared.
    pub(crate) fn shape_and_buffer_if_unique(&mut self) -> Option<(&[usize], &mut Vec<f32>)> {
        let storage = Arc::get_mut(&mut self.data)?;
        Some((&self.shape, storage.values_mut()))
    }

    /// Whether no other tensor shares this one's data, so that an update in place copies nothing.
    pub fn is_unique(&mut self) -> bool {
        Arc::get_mut(&mut self.data).is_some()
    }

    /// The values, moved out without a copy when no other tensor shares them.
    pub fn into_values(self) -> Option<Vec<f32>> {
        Arc::try_unwrap(self.data).ok().map(Storage::into_values)
    }

    /// Whether `self` and `other` share the same data buffer.
    pub fn shares_data(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.data, &other.data)
    }

    /// The same data under another shape with the same number of elements
    /// (no copy). Used by the layout operations.
    pub(crate) fn with_shape(&self, shape: Vec<usize>) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), self.data.len());
        Tensor {
            shape: SmallVec::from_vec(shape),
            data: Arc::clone(&self.data),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_accessors() {
        let t = Tensor::from_vec(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]).unwrap();
        assert_eq!(t.shape(), &[2, 3]);
        assert_eq!(t.ndim(), 2);
        assert_eq!(t.len(), 6);
        assert_eq!(t.nbytes(), 24);
        assert_eq!(t.to_scalar(), None);
        let s = Tensor::scalar(3.5);
        assert_eq!(s.shape(), &[] as &[usize]);
        assert_eq!(s.len(), 1);
        assert_eq!(s.to_scalar(), Some(3.5));
        let one = Tensor::from_vec(vec![1, 1], vec![2.0]).unwrap();
        assert_eq!(one.to_scalar(), Some(2.0));
    }

    #[test]
    fn from_vec_checks_the_count() {
        let e = Tensor::from_vec(vec![2, 3], vec![1.0; 5]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot make a tensor of shape [2, 3] (6 elements) from 5 values"
        );
    }

    #[test]
    fn make_mut_copies_only_shared_data() {
        let mut a = Tensor::from_vec(vec![2], vec![1., 2.]).unwrap();
        let b = a.clone();
        assert!(a.shares_data(&b));
        a.make_mut()[0] = 9.0;
        assert_eq!(a.data(), &[9., 2.]);
        assert_eq!(b.data(), &[1., 2.]);
        let p = a.data().as_ptr();
        a.make_mut()[1] = 7.0;
        assert_eq!(a.data().as_ptr(), p);
    }

    #[test]
    fn bits_eq_is_nan_safe() {
        let a = Tensor::from_vec(vec![2], vec![f32::NAN, 1.0]).unwrap();
        assert!(a.bits_eq(&a.clone()));
        let b = Tensor::from_vec(vec![1, 2], vec![f32::NAN, 1.0]).unwrap();
        assert!(!a.bits_eq(&b));
        assert!(!Tensor::scalar(0.0).bits_eq(&Tensor::scalar(-0.0)));
    }
}
