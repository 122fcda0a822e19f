//! The language's builtin functions: their names, signatures and docs. How each one computes,
//! on any device, is `evaluate.rs`'s.
//!
//! Builtins don't know where they were called: they return a [`TensorError`] with no position,
//! and the session adds the statement and line on the way up.

use crate::tensor::{self, ReduceOp, Tensor, TensorError, TensorRng, UnaryOp};

/// A builtin function of the language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// `zeros(d...)`
    Zeros,
    /// `ones(d...)`
    Ones,
    /// `full(v, d...)`
    Full,
    /// `eye(n)`
    Eye,
    /// `arange(n)`
    Arange,
    /// `rand(d...)`
    Rand,
    /// `randn(d...)`
    Randn,
    /// `exp(x)` and the other elementwise functions.
    Unary(UnaryOp),
    /// `sum(x[, axis])` and the other reductions.
    Reduce(ReduceOp),
    /// `softmax(x, axis)`
    Softmax,
    /// `onehot(labels, n)`
    Onehot,
    /// `transpose(x)`
    Transpose,
    /// `reshape(x, d...)`
    Reshape,
    /// `concat(a, b, axis)`
    Concat,
    /// `split(x, n, axis)`
    Split,
    /// `load(path)`
    Load,
    /// `matmul(a, b)`, the same as `a @ b`.
    Matmul,
    /// `work(ms[, x])`: takes `ms` milliseconds, gives `x` (or 0): an op that just takes time.
    Work,
}

/// One entry of the builtin table.
pub struct BuiltinInfo {
    /// The name scripts call it by.
    pub name: &'static str,
    /// The builtin.
    pub builtin: Builtin,
    /// Its signature, as shown in hints and help.
    pub signature: &'static str,
    /// What it does, in one line.
    pub doc: &'static str,
}

macro_rules! table {
    ($($name:literal, $builtin:expr, $signature:literal, $doc:literal;)*) => {
        /// Every builtin function, in the order help lists them.
        pub const BUILTINS: &[BuiltinInfo] = &[
            $(BuiltinInfo { name: $name, builtin: $builtin, signature: $signature, doc: $doc },)*
        ];
    };
}

table! {
    "zeros", Builtin::Zeros, "zeros(d...)", "a tensor of zeros with dimensions d";
    "ones", Builtin::Ones, "ones(d...)", "a tensor of ones with dimensions d";
    "full", Builtin::Full, "full(value, d...)", "a tensor filled with value";
    "eye", Builtin::Eye, "eye(n)", "the n-by-n identity matrix";
    "arange", Builtin::Arange, "arange(n)", "0, 1, ..., n-1";
    "rand", Builtin::Rand, "rand(d...)", "uniform random numbers in [0, 1) (uses and advances the RNG)";
    "randn", Builtin::Randn, "randn(d...)", "standard normal random numbers (uses and advances the RNG)";
    "exp", Builtin::Unary(UnaryOp::Exp), "exp(x)", "e to the power x, elementwise";
    "log", Builtin::Unary(UnaryOp::Log), "log(x)", "natural logarithm, elementwise";
    "sqrt", Builtin::Unary(UnaryOp::Sqrt), "sqrt(x)", "square root, elementwise";
    "tanh", Builtin::Unary(UnaryOp::Tanh), "tanh(x)", "hyperbolic tangent, elementwise";
    "sigmoid", Builtin::Unary(UnaryOp::Sigmoid), "sigmoid(x)", "1 / (1 + exp(-x)), elementwise";
    "relu", Builtin::Unary(UnaryOp::Relu), "relu(x)", "max(x, 0), elementwise";
    "abs", Builtin::Unary(UnaryOp::Abs), "abs(x)", "absolute value, elementwise";
    "sum", Builtin::Reduce(ReduceOp::Sum), "sum(x[, axis])", "sum over everything, or over one axis";
    "mean", Builtin::Reduce(ReduceOp::Mean), "mean(x[, axis])", "mean over everything, or over one axis";
    "max", Builtin::Reduce(ReduceOp::Max), "max(x[, axis])", "maximum over everything, or over one axis";
    "min", Builtin::Reduce(ReduceOp::Min), "min(x[, axis])", "minimum over everything, or over one axis";
    "argmax", Builtin::Reduce(ReduceOp::Argmax), "argmax(x[, axis])", "index of the maximum, over everything or one axis";
    "softmax", Builtin::Softmax, "softmax(x, axis)", "softmax along an axis";
    "onehot", Builtin::Onehot, "onehot(labels, n)", "one-hot rows of length n for integer labels";
    "transpose", Builtin::Transpose, "transpose(x)", "reverses the axes";
    "reshape", Builtin::Reshape, "reshape(x, d...)", "the same data with new dimensions (one may be -1)";
    "concat", Builtin::Concat, "concat(a, b, axis)", "joins two tensors along an axis";
    "split", Builtin::Split, "split(x, n, axis)", "n equal parts along an axis (several results)";
    "load", Builtin::Load, "load(path)", "reads a NumPy .npy file (any float or int dtype) as f32, refusing a value f32 cannot hold";
    "matmul", Builtin::Matmul, "matmul(a, b)", "matrix product, the same as a @ b";
    "work", Builtin::Work, "work(ms[, x])", "takes ms milliseconds, then gives x (or 0): an op that just takes time, for lessons";
}

/// Names that are statements, host functions or communications rather than tensor builtins,
/// for completion and the help.
pub const OTHER_FUNCTIONS: &[(&str, &str, &str)] = &[
    (
        "slots",
        "slots(n)",
        "n separate variables under one name: read x[i], write set(x, i, value)",
    ),
    (
        "set",
        "set(x, i, value)",
        "writes the variable x[i] of a list made with slots(n)",
    ),
    (
        "to",
        "to(x, device)",
        "copies x to a device (cpu, gpu0, ...): an op on the link between them",
    ),
    (
        "clock",
        "clock()",
        "the engine's clock in milliseconds (virtual time under --engine sim)",
    ),
    (
        "save",
        "save(x, path)",
        "writes x to a NumPy .npy file (float32); waits for x",
    ),
    (
        "clock_cycles",
        "clock_cycles(m, n)",
        "GPipe's schedule: the (micro-batch, partition) pairs of each clock tick",
    ),
    ("rank", "rank()", "this rank's number (0 alone)"),
    (
        "ranks",
        "ranks()",
        "how many ranks run the script (1 alone)",
    ),
    (
        "allreduce",
        "allreduce(x)",
        "the sum of x over every rank: x = allreduce(x)",
    ),
    (
        "broadcast",
        "broadcast(x, root)",
        "root's x on every rank (in place, or y = broadcast(x, root))",
    ),
    (
        "reduce",
        "reduce(x, root)",
        "the sum of x over every rank on root; every other rank gets its own x",
    ),
    (
        "allgather",
        "allgather(x)",
        "every rank's x, one row per rank: shape [ranks(), ...]",
    ),
    ("send", "send(x, to)", "sends x to rank `to`"),
    (
        "recv",
        "recv(from, d...)",
        "receives a tensor of dimensions d from rank `from`: x = recv(0, 2, 3)",
    ),
];

/// The largest magnitude of a whole number taken as a count, an index, a seed or a loop bound:
/// 2^53, up to which every whole number is exact in float64 and fits an `i64`.
pub(crate) const MAX_WHOLE: f64 = 9_007_199_254_740_992.0;

/// The message for `number`, given as `what` (`a dimension`), beyond [`MAX_WHOLE`].
pub(crate) fn too_large(what: &str, number: impl std::fmt::LowerExp) -> String {
    format!("{what} is too large: {number:e} is beyond ±{MAX_WHOLE}")
}

/// The whole number a 0-d (or one-element) tensor holds: an axis, an index, a count.
pub(crate) fn whole_number(value: &Tensor, what: &str) -> Result<i64, TensorError> {
    match value.to_scalar() {
        Some(number) if number.is_finite() && f64::from(number).abs() > MAX_WHOLE => {
            Err(TensorError::new(too_large(what, number)))
        }
        Some(number) if number.fract() == 0.0 && number.is_finite() => Ok(number as i64),
        Some(number) => Err(TensorError::new(format!(
            "{what} must be a whole number, not {number}"
        ))),
        None => Err(TensorError::new(format!(
            "{what} must be a number, not a tensor of shape {}",
            tensor::shape::fmt_shape(value.shape())
        ))),
    }
}

/// The name scripts call `builtin` by.
pub(crate) fn name_of(builtin: Builtin) -> &'static str {
    BUILTINS
        .iter()
        .find(|info| info.builtin == builtin)
        .map_or("this builtin", |info| info.name)
}

/// The builtin called `name`, if there is one.
pub fn lookup(name: &str) -> Option<&'static BuiltinInfo> {
    BUILTINS.iter().find(|info| info.name == name)
}

impl Builtin {
    /// Whether the builtin uses (reads and advances) the random number generator.
    pub fn is_random(self) -> bool {
        matches!(self, Builtin::Rand | Builtin::Randn)
    }

    /// The allowed numbers of arguments (min, max; `usize::MAX` for any).
    pub fn arity(self) -> (usize, usize) {
        match self {
            Builtin::Zeros | Builtin::Ones | Builtin::Rand | Builtin::Randn => (0, usize::MAX),
            Builtin::Full => (1, usize::MAX),
            Builtin::Eye
            | Builtin::Arange
            | Builtin::Unary(_)
            | Builtin::Transpose
            | Builtin::Load => (1, 1),
            Builtin::Reduce(_) => (1, 2),
            Builtin::Softmax | Builtin::Onehot | Builtin::Matmul => (2, 2),
            Builtin::Work => (1, 2),
            Builtin::Reshape => (1, usize::MAX),
            Builtin::Concat | Builtin::Split => (3, 3),
        }
    }

    /// Whether the builtin gives several results (to unpack into several names).
    pub fn is_multi(self) -> bool {
        matches!(self, Builtin::Split)
    }
}

/// An argument of a builtin called on the host outside a plan ([`call`]): a tensor, or a string
/// (for paths).
pub enum Arg {
    /// A tensor (numbers are 0-d tensors).
    Tensor(Tensor),
    /// A string literal.
    Str(String),
}

/// Runs a builtin on host arguments, outside a plan (a reference interpreter, a test), through
/// the same evaluator as every plan; random builtins draw from `rng`.
pub fn call(
    builtin: Builtin,
    args: &[Arg],
    rng: Option<&mut TensorRng>,
) -> Result<Vec<Tensor>, TensorError> {
    crate::evaluate::call_on_host(builtin, args, rng)
}

/// GPipe's clock cycles (torchgpipe): for each tick k of m micro-batches through n partitions,
/// the pairs (micro-batch i, partition j) with i + j = k, in the order torchgpipe yields them,
/// tick after tick. Made as they are taken, so a loop over them starts at once.
pub fn clock_cycles(
    n_micro_batches: usize,
    n_partitions: usize,
) -> impl Iterator<Item = (usize, usize)> {
    let n_ticks = (n_micro_batches + n_partitions).saturating_sub(1);
    (0..n_ticks).flat_map(move |tick| {
        let first = (1 + tick).saturating_sub(n_micro_batches);
        let last = (1 + tick).min(n_partitions);
        (first..last).map(move |partition| (tick - partition, partition))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_cycles_match_torchgpipe() {
        // torchgpipe: clock_cycles(3, 2) -> [(0,0)], [(1,0),(0,1)], [(2,0),(1,1)], [(2,1)]
        assert_eq!(
            clock_cycles(3, 2).collect::<Vec<_>>(),
            vec![(0, 0), (1, 0), (0, 1), (2, 0), (1, 1), (2, 1)]
        );
        assert_eq!(clock_cycles(4, 3).count(), 12);
        assert_eq!(clock_cycles(0, 3).count(), 0);
    }

    #[test]
    fn every_builtin_is_in_the_table_once() {
        for info in BUILTINS {
            assert_eq!(
                lookup(info.name).map(|found| found.builtin),
                Some(info.builtin),
                "{}",
                info.name
            );
        }
    }
}
