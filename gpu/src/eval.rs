//! The GPU [`Backend`]: the operations of a plan on one stream of one device, for the
//! interpreter's one plan evaluator.
//!
//! Values are either on the device or still on the host: constants stay on the host until a
//! kernel needs them, so `A + 1` passes `1` as a kernel argument and an operation on host values
//! only (a subexpression of constants) folds on the CPU. Host numbers that steer a kernel
//! (dimensions, axes, indices) are read on the host; if one comes from a device value, reading it
//! is a CPU consumer and waits for it. Everything that can fail is checked on the host before a
//! launch, with the CPU's messages.

use super::geometry;
use super::ops::Exec;
use super::runtime::{download, GpuOpContext, GpuTensor, OpScope};
use crate::tensor::backend::Backend;
use crate::tensor::shape::numel;
use crate::tensor::{self, BinaryOp, IndexSpec, ReduceOp, Tensor, TensorError, UnaryOp};

/// Runs one op's work on `ctx`'s device and stream: `body` evaluates with a [`GpuBackend`]
/// whose inputs are `inputs`, and its values end on the device. Gives them once the kernels are
/// enqueued (RFC 18951): the outputs' writer events order later uses, and [`download`] waits for
/// them. With a timing context, the kernels' times are then in `ctx.take_span()`.
pub fn run_op(
    inputs: &[GpuTensor],
    ctx: &mut GpuOpContext<'_>,
    body: impl FnOnce(&mut GpuBackend<'_, '_, '_>) -> Result<Vec<GpuValue>, TensorError>,
) -> Result<Vec<GpuTensor>, TensorError> {
    let input_refs: Vec<&GpuTensor> = inputs.iter().collect();
    let scope = OpScope::begin(ctx, &input_refs, false)?;
    let outputs = {
        let mut backend = GpuBackend {
            exec: scope.exec(),
            inputs,
            ctx,
        };
        let values = body(&mut backend)?;
        values
            .into_iter()
            .map(|value| backend.on_device(value))
            .collect::<Result<Vec<_>, _>>()?
    };
    let span = scope.finish(&outputs)?;
    ctx.set_span(span);
    Ok(outputs)
}

/// A value during a GPU op: on the device, or still on the host (a constant, or folded on the
/// CPU from constants).
pub enum GpuValue {
    /// In host memory.
    Host(Tensor),
    /// On the op's device.
    Device(GpuTensor),
}

/// The operations of one GPU op (see [`run_op`]).
pub struct GpuBackend<'s, 'c, 'r> {
    exec: Exec<'s>,
    inputs: &'s [GpuTensor],
    ctx: &'c mut GpuOpContext<'r>,
}

impl GpuBackend<'_, '_, '_> {
    fn on_device(&self, value: GpuValue) -> Result<GpuTensor, TensorError> {
        match value {
            GpuValue::Device(tensor) => Ok(tensor),
            GpuValue::Host(tensor) => self.exec.upload(&tensor),
        }
    }

    fn device(tensor: Result<GpuTensor, TensorError>) -> Result<GpuValue, TensorError> {
        tensor.map(GpuValue::Device)
    }
}

/// A host value computed on the CPU.
fn host(tensor: Result<Tensor, TensorError>) -> Result<GpuValue, TensorError> {
    tensor.map(GpuValue::Host)
}

impl Backend for GpuBackend<'_, '_, '_> {
    type Value = GpuValue;

    fn shape(value: &GpuValue) -> &[usize] {
        match value {
            GpuValue::Host(tensor) => tensor.shape(),
            GpuValue::Device(tensor) => tensor.shape(),
        }
    }

    fn input(&mut self, index: usize) -> Result<GpuValue, TensorError> {
        self.inputs
            .get(index)
            .cloned()
            .map(GpuValue::Device)
            .ok_or_else(|| TensorError::new("an input was used more often than counted"))
    }

    fn constant(&mut self, value: Tensor) -> Result<GpuValue, TensorError> {
        Ok(GpuValue::Host(value))
    }

    /// The value on the host; a device value is downloaded (waiting for its kernels).
    fn to_host(&mut self, value: GpuValue) -> Result<Tensor, TensorError> {
        match value {
            GpuValue::Host(tensor) => Ok(tensor),
            GpuValue::Device(tensor) => download(&tensor),
        }
    }

    fn unary(&mut self, op: UnaryOp, x: GpuValue) -> Result<GpuValue, TensorError> {
        match x {
            GpuValue::Host(x) => host(tensor::unary(op, &x)),
            GpuValue::Device(x) => Self::device(self.exec.unary(op, &x)),
        }
    }

    fn binary(&mut self, op: BinaryOp, a: GpuValue, b: GpuValue) -> Result<GpuValue, TensorError> {
        let (shape, _) = geometry::binary_layout(Self::shape(&a), Self::shape(&b))?;
        match (a, b) {
            (GpuValue::Host(a), GpuValue::Host(b)) => host(tensor::binary(&a, op, &b)),
            (GpuValue::Device(a), GpuValue::Host(b))
                if b.len() == 1 && a.shape() == shape.as_slice() =>
            {
                Self::device(self.exec.binary_scalar(&a, op, b.data()[0], false))
            }
            (GpuValue::Host(a), GpuValue::Device(b))
                if a.len() == 1 && b.shape() == shape.as_slice() =>
            {
                Self::device(self.exec.binary_scalar(&b, op, a.data()[0], true))
            }
            (a, b) => {
                let (a, b) = (self.on_device(a)?, self.on_device(b)?);
                Self::device(self.exec.binary(&a, op, &b))
            }
        }
    }

    fn matmul(&mut self, a: GpuValue, b: GpuValue) -> Result<GpuValue, TensorError> {
        match (a, b) {
            (GpuValue::Host(a), GpuValue::Host(b)) => host(tensor::matmul(&a, &b)),
            (a, b) => {
                let (a, b) = (self.on_device(a)?, self.on_device(b)?);
                Self::device(self.exec.matmul(&a, &b))
            }
        }
    }

    fn index(&mut self, x: GpuValue, specs: &[IndexSpec]) -> Result<GpuValue, TensorError> {
        match x {
            GpuValue::Host(x) => host(tensor::index(&x, specs)),
            GpuValue::Device(x) => {
                let (shape, params) = geometry::index(x.shape(), specs)?;
                Self::device(self.exec.gather(&x, shape, params))
            }
        }
    }

    /// Stacked on the device, even from host items (a literal of numbers is a GPU tensor).
    fn stack(&mut self, items: Vec<GpuValue>) -> Result<GpuValue, TensorError> {
        let item_shape = items
            .first()
            .map(|item| Self::shape(item).to_vec())
            .ok_or_else(|| TensorError::new("nothing to stack"))?;
        let (shape, copies) = geometry::stack(&item_shape, items.len())?;
        let out = self.exec.alloc(shape)?;
        for (item, params) in items.into_iter().zip(copies) {
            let item = self.on_device(item)?;
            self.exec.strided_copy(&item, &out, params)?;
        }
        Ok(GpuValue::Device(out))
    }

    fn fill(&mut self, dims: &[usize], value: f32) -> Result<GpuValue, TensorError> {
        Self::device(self.exec.fill(dims.to_vec(), value))
    }

    fn eye(&mut self, n: usize) -> Result<GpuValue, TensorError> {
        Self::device(self.exec.eye(n))
    }

    fn arange(&mut self, n: usize) -> Result<GpuValue, TensorError> {
        Self::device(self.exec.arange(n))
    }

    fn random(&mut self, dims: &[usize], normal: bool) -> Result<GpuValue, TensorError> {
        let n = numel(dims)?;
        let rng = self
            .ctx
            .rng()
            .ok_or_else(|| TensorError::new("no random number generator"))?;
        let draw = rng.draw(n);
        Self::device(self.exec.random(dims.to_vec(), draw, normal))
    }

    fn reduce(
        &mut self,
        op: ReduceOp,
        x: GpuValue,
        axis: Option<i64>,
    ) -> Result<GpuValue, TensorError> {
        match x {
            GpuValue::Host(x) => host(tensor::reduce(op, &x, axis)),
            GpuValue::Device(x) => Self::device(self.exec.reduce(op, &x, axis)),
        }
    }

    fn softmax(&mut self, x: GpuValue, axis: i64) -> Result<GpuValue, TensorError> {
        match x {
            GpuValue::Host(x) => host(tensor::softmax(&x, axis)),
            GpuValue::Device(x) => Self::device(self.exec.softmax(&x, axis)),
        }
    }

    fn onehot(&mut self, labels: GpuValue, n: usize) -> Result<GpuValue, TensorError> {
        match labels {
            GpuValue::Host(labels) => host(tensor::onehot(&labels, n)),
            GpuValue::Device(labels) => {
                // The labels are checked on the host (the errors name the first bad one), so
                // onehot waits for them: a CPU consumer.
                let labels_on_host = download(&labels)?;
                Self::device(self.exec.onehot(&labels, &labels_on_host, n))
            }
        }
    }

    fn transpose(&mut self, x: GpuValue) -> Result<GpuValue, TensorError> {
        match x {
            GpuValue::Host(x) => host(tensor::transpose(&x)),
            GpuValue::Device(x) if x.shape().len() <= 1 => Ok(GpuValue::Device(x)),
            GpuValue::Device(x) => {
                let (shape, params) = geometry::transpose(x.shape())?;
                Self::device(self.exec.gather(&x, shape, params))
            }
        }
    }

    fn reshape(&mut self, x: GpuValue, dims: &[i64]) -> Result<GpuValue, TensorError> {
        match x {
            GpuValue::Host(x) => host(tensor::reshape(&x, dims)),
            GpuValue::Device(x) => {
                let shape = geometry::reshape(x.shape(), dims)?;
                Ok(GpuValue::Device(x.with_shape(shape)))
            }
        }
    }

    fn concat(&mut self, a: GpuValue, b: GpuValue, axis: i64) -> Result<GpuValue, TensorError> {
        if let (GpuValue::Host(a), GpuValue::Host(b)) = (&a, &b) {
            return host(tensor::concat(a, b, axis));
        }
        let (a, b) = (self.on_device(a)?, self.on_device(b)?);
        let (shape, [first, second]) = geometry::concat(a.shape(), b.shape(), axis)?;
        let out = self.exec.alloc(shape)?;
        self.exec.strided_copy(&a, &out, first)?;
        self.exec.strided_copy(&b, &out, second)?;
        Ok(GpuValue::Device(out))
    }

    fn split(
        &mut self,
        x: GpuValue,
        parts: usize,
        axis: i64,
    ) -> Result<Vec<GpuValue>, TensorError> {
        match x {
            GpuValue::Host(x) => Ok(tensor::split(&x, parts, axis)?
                .into_iter()
                .map(GpuValue::Host)
                .collect()),
            GpuValue::Device(x) => geometry::split(x.shape(), parts, axis)?
                .into_iter()
                .map(|(shape, params)| Self::device(self.exec.gather(&x, shape, params)))
                .collect(),
        }
    }

    fn take_time(&mut self, duration: std::time::Duration) -> Result<(), TensorError> {
        self.exec.spin(duration)
    }
}
