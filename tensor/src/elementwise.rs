//! Elementwise arithmetic: binary operators with NumPy broadcasting (also in
//! place, for `A += B`) and unary functions.
//!
//! Each operator is one closure, monomorphised into a few kernels: equal
//! shapes, a one-element operand on either side, and a general strided loop
//! for broadcasting. The first three are plain slice loops that the compiler
//! vectorises. Floating-point semantics are IEEE, as in NumPy: `1 / 0` is
//! `inf`, `0 / 0` is NaN, and comparisons give `1.0` or `0.0`.

use super::error::{terr, Result};
use super::shape::{
    alloc, broadcast_shapes, broadcast_strides, broadcasts_to, coalesce, fmt_shape, numel, strides,
};
use super::Tensor;

/// A binary elementwise operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`
    Div,
    /// `a ** b`
    Pow,
    /// `a < b`, giving 1.0 or 0.0
    Lt,
    /// `a <= b`, giving 1.0 or 0.0
    Le,
    /// `a > b`, giving 1.0 or 0.0
    Gt,
    /// `a >= b`, giving 1.0 or 0.0
    Ge,
    /// `a == b`, giving 1.0 or 0.0
    Eq,
    /// `a != b`, giving 1.0 or 0.0
    Ne,
}

impl BinaryOp {
    /// Every binary operator.
    pub const ALL: [BinaryOp; 11] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
        BinaryOp::Eq,
        BinaryOp::Ne,
    ];

    /// The operator as written in the language: `+`, `**`, `<=`, ...
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Pow => "**",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
        }
    }

    /// The operator for a symbol such as `"+"` or `"**"`.
    pub fn from_symbol(symbol: &str) -> Option<BinaryOp> {
        BinaryOp::ALL.into_iter().find(|op| op.symbol() == symbol)
    }

    /// A lowercase name for messages: `add`, `pow`, `lt`, ...
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
            BinaryOp::Eq => "eq",
            BinaryOp::Ne => "ne",
        }
    }

    /// Applies the operator to two numbers, exactly as the tensor kernels do.
    pub fn apply(self, a: f32, b: f32) -> f32 {
        struct One(f32, f32);
        impl Visit for One {
            type Out = f32;
            fn visit<F: Fn(f32, f32) -> f32 + Copy>(self, f: F) -> f32 {
                f(self.0, self.1)
            }
        }
        with_op(self, One(a, b))
    }
}

/// Something to run with the closure of one operator; lets each operator
/// get its own monomorphised (and so vectorisable) loops.
trait Visit {
    type Out;
    fn visit<F: Fn(f32, f32) -> f32 + Copy>(self, f: F) -> Self::Out;
}

#[inline]
fn bool_f32(b: bool) -> f32 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// The single definition of every binary operator.
fn with_op<V: Visit>(op: BinaryOp, v: V) -> V::Out {
    match op {
        BinaryOp::Add => v.visit(|a, b| a + b),
        BinaryOp::Sub => v.visit(|a, b| a - b),
        BinaryOp::Mul => v.visit(|a, b| a * b),
        BinaryOp::Div => v.visit(|a, b| a / b),
        BinaryOp::Pow => v.visit(f32::powf),
        BinaryOp::Lt => v.visit(|a, b| bool_f32(a < b)),
        BinaryOp::Le => v.visit(|a, b| bool_f32(a <= b)),
        BinaryOp::Gt => v.visit(|a, b| bool_f32(a > b)),
        BinaryOp::Ge => v.visit(|a, b| bool_f32(a >= b)),
        BinaryOp::Eq => v.visit(|a, b| bool_f32(a == b)),
        BinaryOp::Ne => v.visit(|a, b| bool_f32(a != b)),
    }
}

/// Visits every innermost row of a strided iteration over `shape` (at least
/// one dimension, no zero dimension), calling `row(offset_a, offset_b)`.
fn for_each_row(shape: &[usize], sa: &[usize], sb: &[usize], mut row: impl FnMut(usize, usize)) {
    let n = shape.len();
    let outer: usize = shape[..n - 1].iter().product();
    let mut idx = vec![0usize; n - 1];
    let (mut oa, mut ob) = (0usize, 0usize);
    for _ in 0..outer {
        row(oa, ob);
        for d in (0..n - 1).rev() {
            idx[d] += 1;
            oa += sa[d];
            ob += sb[d];
            if idx[d] < shape[d] {
                break;
            }
            oa -= sa[d] * shape[d];
            ob -= sb[d] * shape[d];
            idx[d] = 0;
        }
    }
}

/// Whether two shapes are the same: a loop, cheaper than a call to compare memory for the few
/// dimensions a shape has.
#[inline]
fn same_shape(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(p, q)| p == q)
}

/// Computes `x op y` into `out` (empty) for `x` and `y` of one shape, or `y` a scalar.
struct FlatKernel<'a> {
    x: &'a [f32],
    y: &'a [f32],
    out: &'a mut Vec<f32>,
}

impl Visit for FlatKernel<'_> {
    type Out = ();
    #[inline(never)]
    fn visit<F: Fn(f32, f32) -> f32 + Copy>(self, f: F) {
        let FlatKernel { x, y, out } = self;
        match y {
            [q] if x.len() != 1 => out.extend(x.iter().map(|&p| f(p, *q))),
            _ => out.extend(x.iter().zip(y).map(|(&p, &q)| f(p, q))),
        }
    }
}

/// Computes `a op b` into a fresh vector of the broadcast shape.
struct NewKernel<'a> {
    a: &'a Tensor,
    b: &'a Tensor,
    shape: &'a [usize],
    out: Vec<f32>,
}

impl Visit for NewKernel<'_> {
    type Out = Vec<f32>;
    #[inline(never)]
    fn visit<F: Fn(f32, f32) -> f32 + Copy>(self, f: F) -> Vec<f32> {
        let NewKernel {
            a,
            b,
            shape,
            mut out,
        } = self;
        let (x, y) = (a.data(), b.data());
        if same_shape(a.shape(), b.shape()) || (y.len() == 1 && same_shape(a.shape(), shape)) {
            FlatKernel {
                x,
                y,
                out: &mut out,
            }
            .visit(f);
        } else if x.len() == 1 && b.shape() == shape {
            let p = x[0];
            out.extend(y.iter().map(|&q| f(p, q)));
        } else if !shape.contains(&0) {
            let (shp, sa, sb) = coalesce(
                shape,
                &broadcast_strides(a.shape(), shape),
                &broadcast_strides(b.shape(), shape),
            );
            let inner = shp[shp.len() - 1];
            let (ia, ib) = (sa[sa.len() - 1], sb[sb.len() - 1]);
            for_each_row(&shp, &sa, &sb, |oa, ob| match (ia, ib) {
                (0, 0) => {
                    let v = f(x[oa], y[ob]);
                    out.resize(out.len() + inner, v);
                }
                (0, 1) => {
                    let p = x[oa];
                    out.extend(y[ob..ob + inner].iter().map(|&q| f(p, q)));
                }
                (1, 0) => {
                    let q = y[ob];
                    out.extend(x[oa..oa + inner].iter().map(|&p| f(p, q)));
                }
                (1, 1) => {
                    out.extend(
                        x[oa..oa + inner]
                            .iter()
                            .zip(&y[ob..ob + inner])
                            .map(|(&p, &q)| f(p, q)),
                    );
                }
                _ => out.extend((0..inner).map(|i| f(x[oa + i * ia], y[ob + i * ib]))),
            });
        }
        out
    }
}

/// Computes `a op b` with NumPy broadcasting.
///
/// ```
/// use dep_tensor::{binary, BinaryOp, Tensor};
/// let a = Tensor::from_vec(vec![2, 1], vec![1., 2.]).unwrap();
/// let b = Tensor::from_vec(vec![3], vec![10., 20., 30.]).unwrap();
/// let c = binary(&a, BinaryOp::Add, &b).unwrap();
/// assert_eq!(c.shape(), &[2, 3]);
/// assert_eq!(c.data(), &[11., 21., 31., 12., 22., 32.]);
/// ```
pub fn binary(a: &Tensor, op: BinaryOp, b: &Tensor) -> Result<Tensor> {
    // The result has one operand's shape whenever the other broadcasts to it (nearly always):
    // then no shape is built.
    let broadcast;
    let shape: &[usize] = if broadcasts_to(b.shape(), a.shape()) {
        a.shape()
    } else if broadcasts_to(a.shape(), b.shape()) {
        b.shape()
    } else {
        broadcast = broadcast_shapes(a.shape(), b.shape())?;
        &broadcast
    };
    let n = numel(shape)?;
    let out = alloc(n)?;
    let out = with_op(op, NewKernel { a, b, shape, out });
    Ok(Tensor::from_slice_parts(shape, out))
}

/// `a op b` from an operand the caller gives up: computed in `a`'s own buffer when nobody else
/// holds it and the result has its shape (`c = c + b` allocates nothing), else as [`binary`].
/// What the host backend runs for every binary operator.
pub fn binary_owned(mut a: Tensor, op: BinaryOp, b: &Tensor) -> Result<Tensor> {
    if a.is_unique() && broadcasts_to(b.shape(), a.shape()) {
        binary_inplace(&mut a, op, b)?;
        return Ok(a);
    }
    binary(&a, op, b)
}

/// Updates `target` in place with `target op other`, as `A += B` does.
struct InPlaceKernel<'a> {
    target: &'a mut [f32],
    target_shape: &'a [usize],
    other: &'a Tensor,
}

impl Visit for InPlaceKernel<'_> {
    type Out = ();
    #[inline(never)]
    fn visit<F: Fn(f32, f32) -> f32 + Copy>(self, f: F) {
        let InPlaceKernel {
            target,
            target_shape,
            other,
        } = self;
        let y = other.data();
        if target.is_empty() {
            return;
        }
        if same_shape(other.shape(), target_shape) {
            for (p, &q) in target.iter_mut().zip(y) {
                *p = f(*p, q);
            }
        } else if y.len() == 1 {
            let q = y[0];
            for p in target.iter_mut() {
                *p = f(*p, q);
            }
        } else {
            let (shp, sa, sb) = coalesce(
                target_shape,
                &strides(target_shape),
                &broadcast_strides(other.shape(), target_shape),
            );
            let inner = shp[shp.len() - 1];
            let ib = sb[sb.len() - 1];
            for_each_row(&shp, &sa, &sb, |oa, ob| {
                let row = &mut target[oa..oa + inner];
                if ib == 0 {
                    let q = y[ob];
                    for p in row.iter_mut() {
                        *p = f(*p, q);
                    }
                } else {
                    for (i, p) in row.iter_mut().enumerate() {
                        *p = f(*p, y[ob + i * ib]);
                    }
                }
            });
        }
    }
}

/// Computes `target op other` into `target`'s own buffer (copying it first
/// only if it is shared). The broadcast result must have `target`'s shape.
pub fn binary_inplace(target: &mut Tensor, op: BinaryOp, other: &Tensor) -> Result<()> {
    if !broadcasts_to(other.shape(), target.shape()) {
        let shape = broadcast_shapes(target.shape(), other.shape())?;
        return Err(terr!(
            "cannot update a tensor of shape {} in place with an operand of shape {}: \
             the result would have shape {}",
            fmt_shape(target.shape()),
            fmt_shape(other.shape()),
            fmt_shape(&shape)
        ));
    }
    let (target_shape, target) = target.shape_and_values_mut();
    with_op(
        op,
        InPlaceKernel {
            target,
            target_shape,
            other,
        },
    );
    Ok(())
}

/// A unary elementwise function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `e^x`
    Exp,
    /// natural logarithm (NaN below 0, `-inf` at 0)
    Log,
    /// square root (NaN below 0)
    Sqrt,
    /// hyperbolic tangent
    Tanh,
    /// `1 / (1 + e^-x)`
    Sigmoid,
    /// `max(x, 0)`, keeping NaN
    Relu,
    /// absolute value
    Abs,
}

impl UnaryOp {
    /// Every unary function.
    pub const ALL: [UnaryOp; 8] = [
        UnaryOp::Neg,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::Abs,
    ];

    /// The builtin's name: `neg`, `exp`, `log`, ...
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Abs => "abs",
        }
    }

    /// The function called `name`, if any.
    pub fn from_name(name: &str) -> Option<UnaryOp> {
        UnaryOp::ALL.into_iter().find(|op| op.name() == name)
    }

    /// Applies the function to one number, exactly as [`unary`] does.
    pub fn apply(self, x: f32) -> f32 {
        match self {
            UnaryOp::Neg => -x,
            UnaryOp::Exp => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            // NumPy's `maximum(x, 0)`: NaN stays, `-0.0` gives 0.0.
            UnaryOp::Relu => {
                if x > 0.0 || x.is_nan() {
                    x
                } else {
                    0.0
                }
            }
            UnaryOp::Abs => x.abs(),
        }
    }
}

fn map_into(x: &[f32], out: &mut Vec<f32>, f: impl Fn(f32) -> f32) {
    out.extend(x.iter().map(|&v| f(v)));
}

/// Applies `op` to every element of `x` in its own buffer (copying it first only if shared);
/// the same values as [`unary`].
pub fn unary_inplace(op: UnaryOp, x: &mut Tensor) {
    let data = x.make_mut();
    match op {
        UnaryOp::Neg => data.iter_mut().for_each(|v| *v = -*v),
        UnaryOp::Abs => data.iter_mut().for_each(|v| *v = v.abs()),
        UnaryOp::Sqrt => data.iter_mut().for_each(|v| *v = v.sqrt()),
        UnaryOp::Relu => data.iter_mut().for_each(|v| *v = UnaryOp::Relu.apply(*v)),
        _ => data.iter_mut().for_each(|v| *v = op.apply(*v)),
    }
}

/// `op(x)` from a value the caller gives up: in `x`'s own buffer when nobody else holds it, else
/// as [`unary`]. What the host backend runs for every unary function.
pub fn unary_owned(op: UnaryOp, mut x: Tensor) -> Result<Tensor> {
    if x.is_unique() {
        unary_inplace(op, &mut x);
        return Ok(x);
    }
    unary(op, &x)
}

/// Applies `op` to every element of `x`.
pub fn unary(op: UnaryOp, x: &Tensor) -> Result<Tensor> {
    let mut out = alloc(x.len())?;
    unary_values(op, x.data(), &mut out);
    Ok(Tensor::from_parts(x.shape().to_vec(), out))
}

/// `op` of every value of `x`, appended to `out`.
fn unary_values(op: UnaryOp, x: &[f32], out: &mut Vec<f32>) {
    match op {
        UnaryOp::Neg => map_into(x, out, |v| -v),
        UnaryOp::Abs => map_into(x, out, f32::abs),
        UnaryOp::Sqrt => map_into(x, out, f32::sqrt),
        UnaryOp::Relu => map_into(x, out, |v| UnaryOp::Relu.apply(v)),
        _ => map_into(x, out, |v| op.apply(v)),
    }
}

/// `a op b` written into `out`'s own buffer, the old values of which are dead (an op
/// overwriting a variable it does not read: `y = x + 1` in a loop), when nobody else holds that
/// buffer and the result has `out`'s shape. `None`, `out` untouched, otherwise (the caller
/// then computes with [`binary`], which also reports shapes that do not broadcast). The values
/// are [`binary`]'s.
pub fn binary_into(a: &Tensor, op: BinaryOp, b: &Tensor, out: &mut Tensor) -> Option<()> {
    let (x, y) = (a.data(), b.data());
    let scalar_b = y.len() == 1 && b.shape().len() <= out.shape().len();
    if same_shape(a.shape(), out.shape()) && (scalar_b || same_shape(b.shape(), out.shape())) {
        // The common cases (operands of one shape, or a tensor and a single value of no more
        // dimensions), without the broadcast checks.
        let (_, values) = out.shape_and_buffer_if_unique()?;
        values.clear();
        with_op(op, FlatKernel { x, y, out: values });
        return Some(());
    }
    let fits = (a.shape() == out.shape() && broadcasts_to(b.shape(), a.shape()))
        || (b.shape() == out.shape() && broadcasts_to(a.shape(), b.shape()));
    if !fits {
        return None;
    }
    let (shape, values) = out.shape_and_buffer_if_unique()?;
    let mut buffer = std::mem::take(values);
    buffer.clear();
    *values = with_op(
        op,
        NewKernel {
            a,
            b,
            shape,
            out: buffer,
        },
    );
    Some(())
}

/// `op(x)` written into `out`'s own buffer, as [`binary_into`]: when nobody else holds it and
/// it has `x`'s shape; `None`, `out` untouched, otherwise. The values are [`unary`]'s.
pub fn unary_into(op: UnaryOp, x: &Tensor, out: &mut Tensor) -> Option<()> {
    if x.shape() != out.shape() {
        return None;
    }
    let (_, values) = out.shape_and_buffer_if_unique()?;
    values.clear();
    unary_values(op, x.data(), values);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(shape: &[usize], data: &[f32]) -> Tensor {
        Tensor::from_vec(shape.to_vec(), data.to_vec()).unwrap()
    }

    #[test]
    fn a_result_written_into_a_dead_buffer_has_the_values_of_a_new_one() {
        let (a, b, scalar) = (
            t(&[2, 3], &[1., 2., 3., 4., 5., 6.]),
            t(&[3], &[10., 20., 30.]),
            Tensor::scalar(2.0),
        );
        for (x, y) in [(&a, &b), (&b, &a), (&a, &scalar), (&scalar, &a), (&a, &a)] {
            for op in BinaryOp::ALL {
                let expected = binary(x, op, y).unwrap();
                let mut out = t(&[2, 3], &[0.0; 6]);
                let address = out.data().as_ptr();
                assert_eq!(binary_into(x, op, y, &mut out), Some(()));
                assert!(out.bits_eq(&expected), "{op:?}");
                assert_eq!(out.data().as_ptr(), address, "written where it lies");
            }
        }
        for op in UnaryOp::ALL {
            let mut out = t(&[3], &[0.0; 3]);
            assert_eq!(unary_into(op, &b, &mut out), Some(()));
            assert!(out.bits_eq(&unary(op, &b).unwrap()), "{op:?}");
        }
        // Another shape, a shared buffer, shapes that do not broadcast: nothing written.
        let mut other_shape = t(&[3], &[0.0; 3]);
        assert_eq!(binary_into(&a, BinaryOp::Add, &b, &mut other_shape), None);
        assert_eq!(unary_into(UnaryOp::Neg, &a, &mut other_shape), None);
        let mut shared = t(&[2, 3], &[0.0; 6]);
        let holder = shared.clone();
        assert_eq!(binary_into(&a, BinaryOp::Add, &b, &mut shared), None);
        assert_eq!(unary_into(UnaryOp::Neg, &a, &mut shared), None);
        assert_eq!(holder.data(), &[0.0; 6]);
        let mut out = t(&[2], &[0.0; 2]);
        assert_eq!(
            binary_into(&t(&[2], &[1., 2.]), BinaryOp::Add, &b, &mut out),
            None
        );
        // A single value of more dimensions makes a result of more dimensions.
        let mut out = t(&[2], &[0.0; 2]);
        let one = t(&[1, 1], &[1.]);
        assert_eq!(
            binary_into(&t(&[2], &[1., 2.]), BinaryOp::Add, &one, &mut out),
            None
        );
    }

    #[test]
    fn broadcast_row() {
        let a = t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = t(&[3], &[10., 20., 30.]);
        let c = binary(&a, BinaryOp::Add, &b).unwrap();
        assert_eq!(c.shape(), &[2, 3]);
        assert_eq!(c.data(), &[11., 22., 33., 14., 25., 36.]);
        let d = binary(&b, BinaryOp::Sub, &a).unwrap();
        assert_eq!(d.data(), &[9., 18., 27., 6., 15., 24.]);
    }

    #[test]
    fn broadcast_outer() {
        let a = t(&[2, 1], &[1., 2.]);
        let b = t(&[1, 3], &[1., 2., 3.]);
        let c = binary(&a, BinaryOp::Mul, &b).unwrap();
        assert_eq!(c.shape(), &[2, 3]);
        assert_eq!(c.data(), &[1., 2., 3., 2., 4., 6.]);
    }

    #[test]
    fn scalars_on_either_side() {
        let a = t(&[3], &[1., 2., 4.]);
        let s = Tensor::scalar(2.0);
        assert_eq!(
            binary(&a, BinaryOp::Div, &s).unwrap().data(),
            &[0.5, 1., 2.]
        );
        assert_eq!(
            binary(&s, BinaryOp::Div, &a).unwrap().data(),
            &[2., 1., 0.5]
        );
        assert_eq!(
            binary(&s, BinaryOp::Pow, &a).unwrap().data(),
            &[2., 4., 16.]
        );
        let one = t(&[1, 1], &[1.0]);
        let c = binary(&a, BinaryOp::Add, &one).unwrap();
        assert_eq!(c.shape(), &[1, 3]);
        assert_eq!(c.data(), &[2., 3., 5.]);
        let z = binary(&s, BinaryOp::Mul, &s).unwrap();
        assert_eq!(z.shape(), &[] as &[usize]);
        assert_eq!(z.data(), &[4.0]);
    }

    #[test]
    fn ieee_semantics() {
        let a = t(&[3], &[1., 0., -1.]);
        let z = Tensor::scalar(0.0);
        let c = binary(&a, BinaryOp::Div, &z).unwrap();
        assert_eq!(c.data()[0], f32::INFINITY);
        assert!(c.data()[1].is_nan());
        assert_eq!(c.data()[2], f32::NEG_INFINITY);
    }

    #[test]
    fn comparisons_give_ones_and_zeros() {
        let a = t(&[3], &[1., 2., 3.]);
        let b = Tensor::scalar(2.0);
        let cases = [
            (BinaryOp::Lt, [1., 0., 0.]),
            (BinaryOp::Le, [1., 1., 0.]),
            (BinaryOp::Gt, [0., 0., 1.]),
            (BinaryOp::Ge, [0., 1., 1.]),
            (BinaryOp::Eq, [0., 1., 0.]),
            (BinaryOp::Ne, [1., 0., 1.]),
        ];
        for (op, want) in cases {
            assert_eq!(binary(&a, op, &b).unwrap().data(), &want, "{op:?}");
        }
        let nan = Tensor::scalar(f32::NAN);
        assert_eq!(binary(&nan, BinaryOp::Ne, &nan).unwrap().data(), &[1.0]);
        assert_eq!(binary(&nan, BinaryOp::Eq, &nan).unwrap().data(), &[0.0]);
    }

    #[test]
    fn incompatible_shapes_are_named() {
        let a = t(&[2, 3], &[0.; 6]);
        let b = t(&[4], &[0.; 4]);
        assert_eq!(
            binary(&a, BinaryOp::Add, &b).unwrap_err().to_string(),
            "cannot broadcast shapes [2, 3] and [4]"
        );
    }

    #[test]
    fn empty_operands() {
        let a = t(&[0, 3], &[]);
        let b = t(&[3], &[1., 2., 3.]);
        let c = binary(&a, BinaryOp::Add, &b).unwrap();
        assert_eq!(c.shape(), &[0, 3]);
        assert!(c.is_empty());
    }

    #[test]
    fn in_place_updates() {
        let mut a = t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let alias = a.clone();
        binary_inplace(&mut a, BinaryOp::Add, &t(&[3], &[1., 1., 1.])).unwrap();
        assert_eq!(a.data(), &[2., 3., 4., 5., 6., 7.]);
        assert_eq!(alias.data(), &[1., 2., 3., 4., 5., 6.]);
        binary_inplace(&mut a, BinaryOp::Mul, &Tensor::scalar(2.0)).unwrap();
        assert_eq!(a.data(), &[4., 6., 8., 10., 12., 14.]);
        binary_inplace(&mut a, BinaryOp::Sub, &t(&[2, 1], &[4., 10.])).unwrap();
        assert_eq!(a.data(), &[0., 2., 4., 0., 2., 4.]);
        let copy = a.clone();
        binary_inplace(&mut a, BinaryOp::Add, &copy).unwrap();
        assert_eq!(a.data(), &[0., 4., 8., 0., 4., 8.]);
        let mut v = t(&[3], &[1., 2., 3.]);
        assert_eq!(
            binary_inplace(&mut v, BinaryOp::Add, &t(&[2, 3], &[0.; 6]))
                .unwrap_err()
                .to_string(),
            "cannot update a tensor of shape [3] in place with an operand of shape [2, 3]: \
             the result would have shape [2, 3]"
        );
    }

    #[test]
    fn unary_functions() {
        let x = t(&[4], &[-1., 0., 1., 4.]);
        let got = |op| unary(op, &x).unwrap().data().to_vec();
        assert_eq!(got(UnaryOp::Neg), vec![1., -0., -1., -4.]);
        assert_eq!(got(UnaryOp::Abs), vec![1., 0., 1., 4.]);
        assert_eq!(got(UnaryOp::Relu), vec![0., 0., 1., 4.]);
        assert_eq!(got(UnaryOp::Sqrt)[3], 2.0);
        assert!(got(UnaryOp::Sqrt)[0].is_nan());
        assert_eq!(got(UnaryOp::Log)[1], f32::NEG_INFINITY);
        assert_eq!(got(UnaryOp::Exp)[1], 1.0);
        assert_eq!(got(UnaryOp::Tanh)[1], 0.0);
        assert_eq!(got(UnaryOp::Sigmoid)[1], 0.5);
        let big = unary(UnaryOp::Sigmoid, &t(&[2], &[-1000., 1000.])).unwrap();
        assert_eq!(big.data(), &[0.0, 1.0]);
        let zero = unary(UnaryOp::Relu, &Tensor::scalar(-0.0)).unwrap();
        assert_eq!(
            zero.data()[0].to_bits(),
            0.0f32.to_bits(),
            "NumPy's maximum(-0.0, 0)"
        );
        assert!(unary(UnaryOp::Relu, &Tensor::scalar(f32::NAN))
            .unwrap()
            .data()[0]
            .is_nan());
        assert_eq!(UnaryOp::from_name("sigmoid"), Some(UnaryOp::Sigmoid));
        assert_eq!(BinaryOp::from_symbol("**"), Some(BinaryOp::Pow));
    }

    /// The naive reference: index arithmetic straight from the definition.
    fn reference(a: &Tensor, op: BinaryOp, b: &Tensor) -> Option<Tensor> {
        let n = a.ndim().max(b.ndim());
        let pad = |s: &[usize]| {
            let mut v = vec![1; n - s.len()];
            v.extend_from_slice(s);
            v
        };
        let (pa, pb) = (pad(a.shape()), pad(b.shape()));
        let mut shape = Vec::new();
        for i in 0..n {
            shape.push(match (pa[i], pb[i]) {
                (x, y) if x == y => x,
                (1, y) => y,
                (x, 1) => x,
                _ => return None,
            });
        }
        let total: usize = shape.iter().product();
        let mut out = Vec::new();
        for flat in 0..total {
            let mut rem = flat;
            let mut idx = vec![0; n];
            for d in (0..n).rev() {
                idx[d] = rem % shape[d];
                rem /= shape[d];
            }
            let at = |p: &[usize], t: &Tensor| {
                let mut off = 0;
                for d in 0..n {
                    let i = if p[d] == 1 { 0 } else { idx[d] };
                    off = off * p[d] + i;
                }
                t.data()[off]
            };
            out.push(op.apply(at(&pa, a), at(&pb, b)));
        }
        Some(Tensor::from_vec(shape, out).unwrap())
    }

    fn shape_strategy() -> impl Strategy<Value = Vec<usize>> {
        prop::collection::vec(prop::sample::select(vec![1usize, 1, 2, 3, 0]), 0..4)
    }

    fn tensor_for(shape: Vec<usize>) -> impl Strategy<Value = Tensor> {
        let n: usize = shape.iter().product();
        prop::collection::vec(
            prop_oneof![
                -5.0f32..5.0,
                Just(0.0f32),
                Just(f32::NAN),
                Just(f32::INFINITY)
            ],
            n,
        )
        .prop_map(move |d| Tensor::from_vec(shape.clone(), d).unwrap())
    }

    /// A shape and another shape derived from it so they often broadcast.
    fn pair() -> impl Strategy<Value = (Tensor, Tensor)> {
        (shape_strategy(), shape_strategy(), any::<u64>()).prop_flat_map(|(sa, sb, mix)| {
            // Make the pair compatible most of the time: copy dims of `sa`
            // into `sb` (right-aligned) unless the mix bit says otherwise.
            let mut sb2 = sb.clone();
            let k = sa.len().min(sb2.len());
            for i in 0..k {
                let (ia, ib) = (sa.len() - 1 - i, sb2.len() - 1 - i);
                if mix >> i & 1 == 0 && sb2[ib] != 1 {
                    sb2[ib] = sa[ia];
                }
            }
            (tensor_for(sa), tensor_for(sb2))
        })
    }

    proptest! {
        #[test]
        fn broadcasting_matches_reference((a, b) in pair(), op in prop::sample::select(BinaryOp::ALL.to_vec())) {
            let want = reference(&a, op, &b);
            let got = binary(&a, op, &b);
            match want {
                None => prop_assert!(got.is_err()),
                Some(w) => {
                    let g = got.unwrap();
                    prop_assert!(g.bits_eq(&w), "{:?} {:?} {:?}: {:?} vs {:?}", a.shape(), op, b.shape(), g.data(), w.data());
                    let mut inplace = a.clone();
                    let r = binary_inplace(&mut inplace, op, &b);
                    if w.shape() == a.shape() {
                        r.unwrap();
                        prop_assert!(inplace.bits_eq(&w));
                    } else {
                        prop_assert!(r.is_err());
                    }
                    // Into a dead buffer of `a`'s shape: the same values, or nothing written
                    // when the result has another shape.
                    let mut out = Tensor::from_vec(a.shape().to_vec(), vec![0.0; a.len()]).unwrap();
                    let into = binary_into(&a, op, &b, &mut out);
                    if w.shape() == a.shape() {
                        prop_assert_eq!(into, Some(()));
                        prop_assert!(out.bits_eq(&w));
                    } else {
                        prop_assert_eq!(into, None);
                    }
                }
            }
        }
    }
}
