//! Host-side geometry that drives the GPU kernels: broadcasting layouts, strided copies (for
//! transpose, indexing, slicing, concat, split and stacking), reduction and softmax extents, and
//! the row-major-to-cuBLAS translation of a matrix product.
//!
//! Every shape check happens here, on the host, before anything is launched, with the CPU
//! kernels' error messages; a kernel only ever sees valid, in-bounds geometry. Nothing here
//! touches CUDA, so it is all tested on machines without a GPU, partly by emulating the kernels'
//! index arithmetic in Rust against the CPU tensor operations.

use crate::tensor::error::terr;
use crate::tensor::shape::{
    broadcast_shapes, broadcast_strides, coalesce, fmt_shape, normalize_axis, numel, strides,
};
use crate::tensor::{IndexSpec, TensorError};

/// The most dimensions a GPU kernel handles (the parameter structs have fixed arrays).
pub(crate) const MAX_DIMS: usize = 8;

/// Threads per block of every elementwise kernel.
pub(crate) const BLOCK: u32 = 256;

/// The most blocks an elementwise launch uses; kernels loop (grid-stride) over the rest.
pub(crate) const MAX_GRID: u32 = 65_535;

/// The parameters of `strided_copy`: `n` elements indexed by a row-major walk of `shape`; element
/// `m` goes from `src[src_offset + Σ m_d·src_strides_d]` to `dst[dst_offset + Σ m_d·dst_strides_d]`.
///
/// Laid out exactly as `struct Strided` in the kernel source (eight-byte fields only, so there is
/// no padding to disagree about).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StridedParams {
    pub(crate) ndim: u64,
    pub(crate) n: u64,
    pub(crate) src_offset: u64,
    pub(crate) dst_offset: u64,
    pub(crate) shape: [u64; MAX_DIMS],
    pub(crate) src_strides: [u64; MAX_DIMS],
    pub(crate) dst_strides: [u64; MAX_DIMS],
}

/// The parameters of `binary_*_bcast`: the (coalesced) output shape and each operand's strides
/// (0 along broadcast dimensions). Laid out as `struct Bcast` in the kernel source.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BroadcastParams {
    pub(crate) ndim: u64,
    pub(crate) n: u64,
    pub(crate) shape: [u64; MAX_DIMS],
    pub(crate) a_strides: [u64; MAX_DIMS],
    pub(crate) b_strides: [u64; MAX_DIMS],
}

/// How a binary kernel reads its operands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BinaryLayout {
    /// Both operands have the output's shape: one flat loop.
    Same,
    /// The right operand is one value, the left has the output's shape.
    ScalarRhs,
    /// The left operand is one value, the right has the output's shape.
    ScalarLhs,
    /// General NumPy broadcasting through strides.
    Broadcast(Box<BroadcastParams>),
}

/// The output shape and the kernel layout of `a op b`, or the CPU's broadcast error.
pub(crate) fn binary_layout(
    a: &[usize],
    b: &[usize],
) -> Result<(Vec<usize>, BinaryLayout), TensorError> {
    let shape = broadcast_shapes(a, b)?;
    let n = numel(&shape)?;
    let len = |s: &[usize]| s.iter().product::<usize>();
    let layout = if a == b {
        BinaryLayout::Same
    } else if len(b) == 1 && a == shape.as_slice() {
        BinaryLayout::ScalarRhs
    } else if len(a) == 1 && b == shape.as_slice() {
        BinaryLayout::ScalarLhs
    } else {
        let (dims, sa, sb) = coalesce(
            &shape,
            &broadcast_strides(a, &shape),
            &broadcast_strides(b, &shape),
        );
        check_rank(dims.len(), &shape)?;
        let mut params = BroadcastParams {
            ndim: dims.len() as u64,
            n: n as u64,
            shape: [1; MAX_DIMS],
            a_strides: [0; MAX_DIMS],
            b_strides: [0; MAX_DIMS],
        };
        for axis in 0..dims.len() {
            params.shape[axis] = dims[axis] as u64;
            params.a_strides[axis] = sa[axis] as u64;
            params.b_strides[axis] = sb[axis] as u64;
        }
        BinaryLayout::Broadcast(Box::new(params))
    };
    Ok((shape, layout))
}

fn check_rank(ndim: usize, shape: &[usize]) -> Result<(), TensorError> {
    if ndim > MAX_DIMS {
        return Err(terr!(
            "gpu kernels support at most {MAX_DIMS} dimensions, got shape {}",
            fmt_shape(shape)
        ));
    }
    Ok(())
}

/// A copy of `shape`'s elements (row-major) from a source with `src_strides` to a destination
/// with `dst_strides`.
fn strided(
    shape: &[usize],
    src_offset: usize,
    src_strides: &[usize],
    dst_offset: usize,
    dst_strides: &[usize],
) -> Result<StridedParams, TensorError> {
    check_rank(shape.len(), shape)?;
    let mut params = StridedParams {
        ndim: shape.len() as u64,
        n: shape.iter().product::<usize>() as u64,
        src_offset: src_offset as u64,
        dst_offset: dst_offset as u64,
        shape: [1; MAX_DIMS],
        src_strides: [0; MAX_DIMS],
        dst_strides: [0; MAX_DIMS],
    };
    for axis in 0..shape.len() {
        params.shape[axis] = shape[axis] as u64;
        params.src_strides[axis] = src_strides[axis] as u64;
        params.dst_strides[axis] = dst_strides[axis] as u64;
    }
    Ok(params)
}

/// `transpose(x)`: the output shape (axes reversed) and its gather.
pub(crate) fn transpose(shape: &[usize]) -> Result<(Vec<usize>, StridedParams), TensorError> {
    let out: Vec<usize> = shape.iter().rev().copied().collect();
    let src: Vec<usize> = strides(shape).into_iter().rev().collect();
    let params = strided(&out, 0, &src, 0, &strides(&out))?;
    Ok((out, params))
}

/// `x[specs]`: the output shape and its gather, with the CPU's clamping and messages.
pub(crate) fn index(
    shape: &[usize],
    specs: &[IndexSpec],
) -> Result<(Vec<usize>, StridedParams), TensorError> {
    let sels = crate::tensor::axis_selections(shape, specs)?;
    let in_strides = strides(shape);
    let mut offset = 0usize;
    let (mut walk, mut src, mut out_shape) = (Vec::new(), Vec::new(), Vec::new());
    for (axis, sel) in sels.iter().enumerate() {
        let (start, len, keep) = (sel.start, sel.len, sel.keep);
        offset += start * in_strides[axis];
        if keep {
            walk.push(len);
            src.push(in_strides[axis]);
            out_shape.push(len);
        }
    }
    let params = strided(&walk, offset, &src, 0, &strides(&walk))?;
    Ok((out_shape, params))
}

/// `concat(a, b, axis)`: the output shape and the two copies that fill it.
pub(crate) fn concat(
    a: &[usize],
    b: &[usize],
    axis: i64,
) -> Result<(Vec<usize>, [StridedParams; 2]), TensorError> {
    if a.is_empty() || b.is_empty() {
        return Err(terr!(
            "concat: zero-dimensional tensors cannot be concatenated (shapes {} and {})",
            fmt_shape(a),
            fmt_shape(b)
        ));
    }
    let ax = normalize_axis(axis, a.len())?;
    let compatible = a.len() == b.len()
        && a.iter()
            .zip(b)
            .enumerate()
            .all(|(i, (x, y))| i == ax || x == y);
    if !compatible {
        return Err(terr!(
            "concat: shapes {} and {} do not match outside axis {axis}",
            fmt_shape(a),
            fmt_shape(b)
        ));
    }
    let mut out = a.to_vec();
    out[ax] = a[ax]
        .checked_add(b[ax])
        .ok_or_else(|| terr!("concat: the result is too large"))?;
    numel(&out)?;
    let out_strides = strides(&out);
    let first = strided(a, 0, &strides(a), 0, &out_strides)?;
    let second = strided(b, 0, &strides(b), a[ax] * out_strides[ax], &out_strides)?;
    Ok((out, [first, second]))
}

/// `split(x, parts, axis)`: each part's shape and gather, with the CPU's messages.
pub(crate) fn split(
    shape: &[usize],
    parts: usize,
    axis: i64,
) -> Result<Vec<(Vec<usize>, StridedParams)>, TensorError> {
    crate::tensor::split_specs(shape, parts, axis)?
        .iter()
        .map(|specs| index(shape, specs))
        .collect()
}

/// The copies that stack `n_items` tensors of `item_shape` along a new first axis.
pub(crate) fn stack(
    item_shape: &[usize],
    n_items: usize,
) -> Result<(Vec<usize>, Vec<StridedParams>), TensorError> {
    let mut out = vec![n_items];
    out.extend_from_slice(item_shape);
    let item_len = numel(item_shape)?;
    numel(&out)?;
    let item_strides = strides(item_shape);
    let copies = (0..n_items)
        .map(|item| strided(item_shape, 0, &item_strides, item * item_len, &item_strides))
        .collect::<Result<_, _>>()?;
    Ok((out, copies))
}

/// The shape `reshape(x, dims)` gives a tensor of `shape` (at most one `-1`, inferred), with the
/// CPU's messages. The data is shared, not copied.
pub(crate) fn reshape(shape: &[usize], dims: &[i64]) -> Result<Vec<usize>, TensorError> {
    crate::tensor::reshaped_shape(shape, dims)
}

/// A tensor viewed as `outer × n × inner` around one axis (reductions and softmax).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AxisExtent {
    pub(crate) outer: usize,
    pub(crate) n: usize,
    pub(crate) inner: usize,
}

/// The extent of `shape` around `axis` (already normalized).
pub(crate) fn axis_extent(shape: &[usize], axis: usize) -> AxisExtent {
    AxisExtent {
        outer: shape[..axis].iter().product(),
        n: shape[axis],
        inner: shape[axis + 1..].iter().product(),
    }
}

/// Which reduction kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReduceStrategy {
    /// One block per contiguous row of `row_len` values, a tree in shared memory (long rows).
    Rows { rows: usize, row_len: usize },
    /// The whole tensor: `chunks` blocks write partial results, then one block combines them.
    TwoPass { chunks: usize, chunk_len: usize },
    /// One thread per output, walking the axis (short or strided axes): exact CPU order.
    PerOutput(AxisExtent),
}

/// Rows at least this long are reduced by a whole block each.
pub(crate) const ROW_BLOCK_THRESHOLD: usize = 256;

/// How to reduce a tensor of `len` elements (`extent` is `None` for a whole-tensor reduction).
pub(crate) fn reduce_strategy(len: usize, extent: Option<AxisExtent>) -> ReduceStrategy {
    match extent {
        None => {
            // Enough blocks to fill a big GPU, each with a few thousand elements.
            let chunks = len.div_ceil(4096).clamp(1, 1024);
            ReduceStrategy::TwoPass {
                chunks,
                chunk_len: len.div_ceil(chunks).max(1),
            }
        }
        Some(extent) if extent.inner == 1 && extent.n >= ROW_BLOCK_THRESHOLD => {
            ReduceStrategy::Rows {
                rows: extent.outer,
                row_len: extent.n,
            }
        }
        Some(extent) => ReduceStrategy::PerOutput(extent),
    }
}

/// A matrix product in row-major terms, and the column-major cuBLAS call that computes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Gemm {
    /// The result's shape under NumPy's rules for 1-d and 2-d operands.
    pub(crate) out_shape: Vec<usize>,
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
}

/// The column-major `sgemm` arguments for row-major `C(m×n) = A(m×k) · B(k×n)`: cuBLAS sees
/// row-major matrices as their transposes, so it computes `Cᵀ = Bᵀ · Aᵀ` with the operands
/// swapped and no transposition flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ColumnMajorGemm {
    /// cuBLAS's `m` (rows of its first operand's result): our `n`.
    pub(crate) m: i32,
    /// cuBLAS's `n`: our `m`.
    pub(crate) n: i32,
    pub(crate) k: i32,
    /// Whether cuBLAS's first operand is our `B` (always, by the swap).
    pub(crate) first_is_b: bool,
    pub(crate) lda: i32,
    pub(crate) ldb: i32,
    pub(crate) ldc: i32,
}

impl Gemm {
    /// The cuBLAS call, or an error when a dimension exceeds cuBLAS's 32-bit sizes.
    pub(crate) fn column_major(&self) -> Result<ColumnMajorGemm, TensorError> {
        let fit = |v: usize| {
            i32::try_from(v.max(1))
                .map_err(|_| terr!("matmul: dimension {v} is too large for cuBLAS"))
        };
        Ok(ColumnMajorGemm {
            m: fit(self.n)?,
            n: fit(self.m)?,
            k: fit(self.k)?,
            first_is_b: true,
            lda: fit(self.n)?,
            ldb: fit(self.k)?,
            ldc: fit(self.n)?,
        })
    }
}

/// Checks `a @ b` like the CPU kernel and gives its sizes.
pub(crate) fn gemm(a: &[usize], b: &[usize]) -> Result<Gemm, TensorError> {
    let bad_rank = |s: &[usize]| s.is_empty() || s.len() > 2;
    if bad_rank(a) || bad_rank(b) {
        return Err(terr!(
            "matmul supports 1-d and 2-d operands, got shapes {} and {}",
            fmt_shape(a),
            fmt_shape(b)
        ));
    }
    let (m, ka) = if let [m, k] = *a { (m, k) } else { (1, a[0]) };
    let (kb, n) = if let [k, n] = *b { (k, n) } else { (b[0], 1) };
    if ka != kb {
        return Err(terr!(
            "matmul: shapes {} and {} are not aligned ({ka} != {kb})",
            fmt_shape(a),
            fmt_shape(b)
        ));
    }
    let mut out_shape = Vec::with_capacity(2);
    if a.len() == 2 {
        out_shape.push(m);
    }
    if b.len() == 2 {
        out_shape.push(n);
    }
    numel(&out_shape)?;
    Ok(Gemm {
        out_shape,
        m,
        n,
        k: ka,
    })
}

/// The grid (in blocks) of an elementwise launch over `n` elements.
pub(crate) fn grid_for(n: usize) -> u32 {
    (n.div_ceil(BLOCK as usize)).clamp(1, MAX_GRID as usize) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{self, BinaryOp, Tensor};
    use IndexSpec::{Single, Slice};

    /// What `strided_copy` does, element by element, exactly as the kernel source writes it.
    pub(crate) fn emulate_strided_copy(params: &StridedParams, src: &[f32], dst: &mut [f32]) {
        for linear in 0..params.n {
            let (mut rem, mut so, mut d_o) = (linear, params.src_offset, params.dst_offset);
            for axis in (0..params.ndim as usize).rev() {
                let coordinate = rem % params.shape[axis];
                rem /= params.shape[axis];
                so += coordinate * params.src_strides[axis];
                d_o += coordinate * params.dst_strides[axis];
            }
            dst[d_o as usize] = src[so as usize];
        }
    }

    /// What the binary kernels do, as the kernel source writes them.
    fn emulate_binary(
        layout: &BinaryLayout,
        op: BinaryOp,
        a: &[f32],
        b: &[f32],
        n: usize,
    ) -> Vec<f32> {
        (0..n)
            .map(|i| match layout {
                BinaryLayout::Same => op.apply(a[i], b[i]),
                BinaryLayout::ScalarRhs => op.apply(a[i], b[0]),
                BinaryLayout::ScalarLhs => op.apply(a[0], b[i]),
                BinaryLayout::Broadcast(p) => {
                    let (mut rem, mut oa, mut ob) = (i as u64, 0, 0);
                    for axis in (0..p.ndim as usize).rev() {
                        let c = rem % p.shape[axis];
                        rem /= p.shape[axis];
                        oa += c * p.a_strides[axis];
                        ob += c * p.b_strides[axis];
                    }
                    op.apply(a[oa as usize], b[ob as usize])
                }
            })
            .collect()
    }

    fn seq(shape: &[usize]) -> Tensor {
        let n = shape.iter().product::<usize>();
        Tensor::from_vec(
            shape.to_vec(),
            (0..n).map(|i| i as f32 * 0.5 - 3.0).collect(),
        )
        .unwrap()
    }

    fn gather(x: &Tensor, out_shape: &[usize], params: &StridedParams) -> Tensor {
        let mut out = vec![f32::NAN; out_shape.iter().product()];
        emulate_strided_copy(params, x.data(), &mut out);
        Tensor::from_vec(out_shape.to_vec(), out).unwrap()
    }

    #[test]
    fn broadcast_layouts_match_the_cpu_kernel() {
        let shapes: &[(&[usize], &[usize])] = &[
            (&[2, 3], &[2, 3]),
            (&[2, 3], &[]),
            (&[1], &[4, 5]),
            (&[2, 1, 4], &[3, 1]),
            (&[5, 1], &[1, 6]),
            (&[3, 4, 5], &[4, 1]),
            (&[2, 3, 4], &[3, 1]),
            (&[1, 1], &[1]),
            (&[0, 3], &[3]),
        ];
        for &(sa, sb) in shapes {
            let (a, b) = (seq(sa), seq(sb));
            let (shape, layout) = binary_layout(sa, sb).unwrap();
            for op in [BinaryOp::Sub, BinaryOp::Lt] {
                let want = tensor::binary(&a, op, &b).unwrap();
                let got = emulate_binary(&layout, op, a.data(), b.data(), want.len());
                assert_eq!(shape, want.shape(), "{sa:?} {sb:?}");
                assert_eq!(got, want.data(), "{sa:?} {op:?} {sb:?} via {layout:?}");
            }
        }
        assert_eq!(binary_layout(&[2, 3], &[3]).unwrap().0, vec![2, 3]);
        assert!(matches!(
            binary_layout(&[4], &[]).unwrap().1,
            BinaryLayout::ScalarRhs
        ));
        assert!(matches!(
            binary_layout(&[], &[4]).unwrap().1,
            BinaryLayout::ScalarLhs
        ));
        assert_eq!(
            binary_layout(&[2, 3], &[4]).unwrap_err().message(),
            "cannot broadcast shapes [2, 3] and [4]"
        );
    }

    #[test]
    fn coalescing_keeps_kernels_to_few_dimensions() {
        let (_, layout) = binary_layout(&[4, 5, 6, 7], &[1, 1, 6, 7]).unwrap();
        let BinaryLayout::Broadcast(params) = layout else {
            panic!("{layout:?}")
        };
        assert_eq!(params.ndim, 2, "[4*5] x [6*7]: {params:?}");
        let many = [2usize; 9];
        let mut other = many;
        other[0] = 1;
        assert_eq!(
            binary_layout(&many, &[1, 2, 1, 2, 1, 2, 1, 2, 1])
                .unwrap_err()
                .message(),
            "gpu kernels support at most 8 dimensions, got shape [2, 2, 2, 2, 2, 2, 2, 2, 2]"
        );
        assert!(
            binary_layout(&many, &other).is_ok(),
            "coalesced to one dimension"
        );
    }

    #[test]
    fn gathers_match_transpose_index_concat_split() {
        let x = seq(&[3, 4, 2]);
        let (shape, params) = transpose(x.shape()).unwrap();
        assert!(gather(&x, &shape, &params).bits_eq(&tensor::transpose(&x).unwrap()));

        let cases: Vec<Vec<IndexSpec>> = vec![
            vec![Single(1)],
            vec![
                Single(-1),
                Slice {
                    start: Some(1),
                    end: Some(3),
                },
            ],
            vec![
                Slice {
                    start: None,
                    end: None,
                },
                Single(2),
                Single(0),
            ],
            vec![Slice {
                start: Some(-2),
                end: Some(100),
            }],
            vec![Slice {
                start: Some(2),
                end: Some(1),
            }],
            vec![],
        ];
        for specs in cases {
            let (shape, params) = index(x.shape(), &specs).unwrap();
            let want = tensor::index(&x, &specs).unwrap();
            assert!(gather(&x, &shape, &params).bits_eq(&want), "{specs:?}");
        }
        for specs in [
            vec![Single(3)],
            vec![Single(0), Single(-5)],
            vec![Single(0); 4],
        ] {
            assert_eq!(
                index(x.shape(), &specs).unwrap_err(),
                tensor::index(&x, &specs).unwrap_err()
            );
        }

        let b = seq(&[3, 1, 2]);
        let (shape, [first, second]) = concat(x.shape(), b.shape(), 1).unwrap();
        let mut out = vec![f32::NAN; shape.iter().product()];
        emulate_strided_copy(&first, x.data(), &mut out);
        emulate_strided_copy(&second, b.data(), &mut out);
        let want = tensor::concat(&x, &b, 1).unwrap();
        assert!(Tensor::from_vec(shape, out).unwrap().bits_eq(&want));
        for (a, b, axis) in [
            (&[3, 4][..], &[2, 3][..], 0),
            (&[2], &[], 0),
            (&[2, 2], &[2, 2], 2),
        ] {
            assert_eq!(
                concat(a, b, axis).unwrap_err(),
                tensor::concat(&seq(a), &seq(b), axis).unwrap_err()
            );
        }

        let parts = split(x.shape(), 2, 1).unwrap();
        let want = tensor::split(&x, 2, 1).unwrap();
        for ((shape, params), want) in parts.iter().zip(&want) {
            assert!(gather(&x, shape, params).bits_eq(want));
        }
        assert_eq!(
            split(x.shape(), 3, 1).unwrap_err(),
            tensor::split(&x, 3, 1).unwrap_err()
        );
    }

    #[test]
    fn reshape_matches_the_cpu() {
        let x = seq(&[3, 4]);
        for dims in [
            &[2, -1][..],
            &[-1],
            &[12, 1],
            &[5, -1],
            &[-1, -1],
            &[-3, -4],
            &[i64::MAX, i64::MAX],
            &[0, -1],
        ] {
            match (reshape(x.shape(), dims), tensor::reshape(&x, dims)) {
                (Ok(shape), Ok(want)) => assert_eq!(shape, want.shape(), "{dims:?}"),
                (Err(error), Err(want)) => assert_eq!(error, want, "{dims:?}"),
                (got, want) => panic!("{dims:?}: {got:?} vs {want:?}"),
            }
        }
        assert_eq!(
            reshape(&[0], &[0, -1]).unwrap_err(),
            tensor::reshape(&seq(&[0]), &[0, -1]).unwrap_err()
        );
    }

    #[test]
    fn stacking_places_items_one_after_another() {
        let items = [seq(&[2, 2]), seq(&[2, 2])];
        let (shape, copies) = stack(&[2, 2], 2).unwrap();
        assert_eq!(shape, vec![2, 2, 2]);
        let mut out = vec![0.0; 8];
        for (item, params) in items.iter().zip(&copies) {
            emulate_strided_copy(params, item.data(), &mut out);
        }
        assert_eq!(&out[4..], items[1].data());
    }

    #[test]
    fn reductions_pick_a_kernel_by_shape() {
        assert_eq!(
            reduce_strategy(10, None),
            ReduceStrategy::TwoPass {
                chunks: 1,
                chunk_len: 10
            }
        );
        let ReduceStrategy::TwoPass { chunks, chunk_len } = reduce_strategy(64 << 20, None) else {
            panic!()
        };
        assert_eq!(chunks, 1024);
        assert!(chunks * chunk_len >= 64 << 20);
        let rows = axis_extent(&[8, 1000], 1);
        assert_eq!(
            reduce_strategy(8000, Some(rows)),
            ReduceStrategy::Rows {
                rows: 8,
                row_len: 1000
            }
        );
        let short = axis_extent(&[1000, 8], 1);
        assert_eq!(
            reduce_strategy(8000, Some(short)),
            ReduceStrategy::PerOutput(short)
        );
        let strided_axis = axis_extent(&[4, 1000, 3], 1);
        assert_eq!(
            strided_axis,
            AxisExtent {
                outer: 4,
                n: 1000,
                inner: 3
            }
        );
        assert_eq!(
            reduce_strategy(12000, Some(strided_axis)),
            ReduceStrategy::PerOutput(strided_axis)
        );
        assert_eq!(
            reduce_strategy(0, None),
            ReduceStrategy::TwoPass {
                chunks: 1,
                chunk_len: 1
            }
        );
    }

    /// A naive column-major sgemm (what cuBLAS computes), to check the operand swap.
    fn column_major_sgemm(call: &ColumnMajorGemm, first: &[f32], second: &[f32], c: &mut [f32]) {
        for col in 0..call.n as usize {
            for row in 0..call.m as usize {
                let mut acc = 0.0;
                for k in 0..call.k as usize {
                    acc += first[row + k * call.lda as usize] * second[k + col * call.ldb as usize];
                }
                c[row + col * call.ldc as usize] = acc;
            }
        }
    }

    #[test]
    fn row_major_matmul_through_column_major_gemm() {
        for (sa, sb) in [
            (&[2, 3][..], &[3, 4][..]),
            (&[3][..], &[3, 2][..]),
            (&[2, 3][..], &[3][..]),
            (&[3][..], &[3][..]),
        ] {
            let (a, b) = (seq(sa), seq(sb));
            let plan = gemm(sa, sb).unwrap();
            let call = plan.column_major().unwrap();
            assert!(call.first_is_b);
            let mut c = vec![0.0; plan.m * plan.n];
            column_major_sgemm(&call, b.data(), a.data(), &mut c);
            let want = tensor::matmul(&a, &b).unwrap();
            assert_eq!(plan.out_shape, want.shape());
            assert_eq!(c, want.data(), "{sa:?} @ {sb:?}");
        }
        assert_eq!(
            gemm(&[2, 3], &[4, 5]).unwrap_err().message(),
            "matmul: shapes [2, 3] and [4, 5] are not aligned (3 != 4)"
        );
        assert_eq!(
            gemm(&[1, 1, 1], &[2]).unwrap_err().message(),
            "matmul supports 1-d and 2-d operands, got shapes [1, 1, 1] and [2]"
        );
        assert_eq!(gemm(&[3, 0], &[0, 2]).unwrap().k, 0);
    }

    #[test]
    fn grids_are_capped() {
        assert_eq!(grid_for(0), 1);
        assert_eq!(grid_for(257), 2);
        assert_eq!(grid_for(1 << 40), MAX_GRID);
    }
}
