//! Backends: where the values of a statement's plan live, and how each operation of the language
//! runs there.
//!
//! The interpreter has one evaluator of a plan, generic over a [`Backend`]: it walks the plan,
//! reads the host numbers that steer an operation (dimensions, axes, indices, through
//! [`Backend::to_host`]), checks arguments with the language's messages, and calls the backend
//! once per operation. [`HostBackend`] computes with this crate's CPU kernels; `dep-gpu`
//! implements the same trait for values on a GPU. An operation added to the language is one
//! method here, so every backend implements it (or refuses it with an error naming the operation
//! and the device).

use super::error::{terr, Result};
use super::shape::fmt_shape;
use super::{BinaryOp, IndexSpec, ReduceOp, Tensor, TensorRng, UnaryOp};

/// The operations a plan is made of, over values that live on one kind of device.
pub trait Backend {
    /// A value during evaluation (on the device, or wherever the backend keeps it).
    type Value;

    /// The shape of `value`.
    fn shape(value: &Self::Value) -> &[usize];
    /// The op's `index`th input.
    fn input(&mut self, index: usize) -> Result<Self::Value>;
    /// A value made from a host tensor (constants, loaded files).
    fn constant(&mut self, value: Tensor) -> Result<Self::Value>;
    /// `value` in host memory, for the numbers that steer an operation (waits for a device
    /// value: a CPU consumer).
    fn to_host(&mut self, value: Self::Value) -> Result<Tensor>;

    /// `op(x)`, elementwise.
    fn unary(&mut self, op: UnaryOp, x: Self::Value) -> Result<Self::Value>;
    /// `a op b`, elementwise with NumPy broadcasting.
    fn binary(&mut self, op: BinaryOp, a: Self::Value, b: Self::Value) -> Result<Self::Value>;
    /// The matrix product `a @ b`.
    fn matmul(&mut self, a: Self::Value, b: Self::Value) -> Result<Self::Value>;
    /// `x[specs...]`.
    fn index(&mut self, x: Self::Value, specs: &[IndexSpec]) -> Result<Self::Value>;
    /// Values of one shape (checked by the caller; at least one) stacked along a new first axis.
    fn stack(&mut self, items: Vec<Self::Value>) -> Result<Self::Value>;

    /// A tensor of shape `dims` filled with `value` (`zeros`, `ones`, `full`).
    fn fill(&mut self, dims: &[usize], value: f32) -> Result<Self::Value>;
    /// The `n` by `n` identity matrix.
    fn eye(&mut self, n: usize) -> Result<Self::Value>;
    /// `[0, 1, ..., n - 1]`.
    fn arange(&mut self, n: usize) -> Result<Self::Value>;
    /// Random numbers of shape `dims` from the op's generator: standard normal when `normal`,
    /// else uniform in [0, 1).
    fn random(&mut self, dims: &[usize], normal: bool) -> Result<Self::Value>;
    /// A reduction over everything, or over `axis`.
    fn reduce(&mut self, op: ReduceOp, x: Self::Value, axis: Option<i64>) -> Result<Self::Value>;
    /// Softmax along `axis`.
    fn softmax(&mut self, x: Self::Value, axis: i64) -> Result<Self::Value>;
    /// One-hot rows of length `n` for integer labels.
    fn onehot(&mut self, labels: Self::Value, n: usize) -> Result<Self::Value>;
    /// The axes reversed.
    fn transpose(&mut self, x: Self::Value) -> Result<Self::Value>;
    /// The same data with dimensions `dims` (one may be -1).
    fn reshape(&mut self, x: Self::Value, dims: &[i64]) -> Result<Self::Value>;
    /// `a` and `b` joined along `axis`.
    fn concat(&mut self, a: Self::Value, b: Self::Value, axis: i64) -> Result<Self::Value>;
    /// `parts` equal parts of `x` along `axis`.
    fn split(&mut self, x: Self::Value, parts: usize, axis: i64) -> Result<Vec<Self::Value>>;

    /// Spends `duration` where the op runs (`work(ms)`): the CPU backend sleeps its thread, a
    /// GPU backend keeps the op's stream busy for that long, so the time is the device's.
    fn take_time(&mut self, duration: std::time::Duration) -> Result<()>;
}

/// The CPU backend: values are host tensors, computed by this crate's kernels.
///
/// An input is moved out at its last use (`remaining_uses` reaches zero) instead of cloned, so
/// that a value nobody else holds (an intermediate, or the old value of the variable the op
/// overwrites) is updated in place: `c = c + b` and `tanh(x) * 0.5 + 1` allocate at most once.
pub struct HostBackend<'a> {
    /// The op's input values, taken at their last use.
    pub inputs: &'a mut [Option<Tensor>],
    /// How many more times the plan reads each input.
    pub remaining_uses: &'a mut [u32],
    /// The generator, for plans that draw random numbers.
    pub rng: Option<&'a mut TensorRng>,
}

impl Backend for HostBackend<'_> {
    type Value = Tensor;

    #[inline]
    fn shape(value: &Tensor) -> &[usize] {
        value.shape()
    }

    #[inline]
    fn input(&mut self, index: usize) -> Result<Tensor> {
        self.remaining_uses[index] = self.remaining_uses[index].saturating_sub(1);
        let value = if self.remaining_uses[index] == 0 {
            self.inputs[index].take()
        } else {
            self.inputs[index].clone()
        };
        value.ok_or_else(|| terr!("an input was used more often than counted"))
    }

    #[inline]
    fn constant(&mut self, value: Tensor) -> Result<Tensor> {
        Ok(value)
    }

    #[inline]
    fn to_host(&mut self, value: Tensor) -> Result<Tensor> {
        Ok(value)
    }

    #[inline]
    fn unary(&mut self, op: UnaryOp, x: Tensor) -> Result<Tensor> {
        super::unary_owned(op, x)
    }

    #[inline]
    fn binary(&mut self, op: BinaryOp, a: Tensor, b: Tensor) -> Result<Tensor> {
        super::binary_owned(a, op, &b)
    }

    fn matmul(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        super::matmul(&a, &b)
    }

    fn index(&mut self, x: Tensor, specs: &[IndexSpec]) -> Result<Tensor> {
        super::index(&x, specs)
    }

    fn stack(&mut self, items: Vec<Tensor>) -> Result<Tensor> {
        let first = items
            .first()
            .ok_or_else(|| terr!("nothing to stack"))?
            .shape()
            .to_vec();
        let mut data = super::shape::alloc(super::shape::numel(&first)? * items.len())?;
        for item in &items {
            if item.shape() != first.as_slice() {
                return Err(terr!(
                    "cannot stack shapes {} and {}",
                    fmt_shape(&first),
                    fmt_shape(item.shape())
                ));
            }
            data.extend_from_slice(item.data());
        }
        let mut shape = vec![items.len()];
        shape.extend_from_slice(&first);
        Tensor::from_vec(shape, data)
    }

    fn fill(&mut self, dims: &[usize], value: f32) -> Result<Tensor> {
        super::full(value, dims)
    }

    fn eye(&mut self, n: usize) -> Result<Tensor> {
        super::eye(n)
    }

    fn arange(&mut self, n: usize) -> Result<Tensor> {
        super::arange(n)
    }

    fn random(&mut self, dims: &[usize], normal: bool) -> Result<Tensor> {
        let rng = self
            .rng
            .as_deref_mut()
            .ok_or_else(|| terr!("no random number generator"))?;
        if normal {
            super::randn(dims, rng)
        } else {
            super::rand(dims, rng)
        }
    }

    fn reduce(&mut self, op: ReduceOp, x: Tensor, axis: Option<i64>) -> Result<Tensor> {
        super::reduce(op, &x, axis)
    }

    fn softmax(&mut self, x: Tensor, axis: i64) -> Result<Tensor> {
        super::softmax(&x, axis)
    }

    fn onehot(&mut self, labels: Tensor, n: usize) -> Result<Tensor> {
        super::onehot(&labels, n)
    }

    fn transpose(&mut self, x: Tensor) -> Result<Tensor> {
        super::transpose(&x)
    }

    fn reshape(&mut self, x: Tensor, dims: &[i64]) -> Result<Tensor> {
        super::reshape(&x, dims)
    }

    fn concat(&mut self, a: Tensor, b: Tensor, axis: i64) -> Result<Tensor> {
        super::concat(&a, &b, axis)
    }

    fn split(&mut self, x: Tensor, parts: usize, axis: i64) -> Result<Vec<Tensor>> {
        super::split(&x, parts, axis)
    }

    fn take_time(&mut self, duration: std::time::Duration) -> Result<()> {
        std::thread::sleep(duration);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_read_for_the_last_time_is_moved_out() {
        let mut inputs = vec![Some(Tensor::scalar(1.0))];
        let mut backend = HostBackend {
            inputs: &mut inputs,
            remaining_uses: &mut [2],
            rng: None,
        };
        backend.input(0).unwrap();
        assert!(backend.inputs[0].is_some(), "one use left: cloned");
        backend.input(0).unwrap();
        assert!(backend.inputs[0].is_none(), "the last use moves it");
        assert_eq!(
            backend.input(0).unwrap_err().message(),
            "an input was used more often than counted"
        );
    }

    #[test]
    fn a_unique_left_operand_is_updated_in_place() {
        let mut backend = HostBackend {
            inputs: &mut [],
            remaining_uses: &mut [],
            rng: None,
        };
        let a = Tensor::from_vec(vec![2], vec![1.0, 2.0]).unwrap();
        let buffer = a.data().as_ptr();
        let sum = backend
            .binary(BinaryOp::Add, a, Tensor::scalar(1.0))
            .unwrap();
        assert_eq!(sum.data(), &[2.0, 3.0]);
        assert_eq!(sum.data().as_ptr(), buffer);
        let stacked = backend.stack(vec![sum.clone(), sum]).unwrap();
        assert_eq!(stacked.shape(), &[2, 2]);
        assert_eq!(
            backend.random(&[2], false).unwrap_err().message(),
            "no random number generator"
        );
    }
}
