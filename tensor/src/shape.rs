//! Shape arithmetic: element counts, strides, axis checks, broadcasting and
//! fallible allocation.
//!
//! Everything that can go wrong with a shape is reported here as a
//! [`TensorError`](crate::TensorError), so that the operations built on top never panic and a
//! tensor too large for memory is an error rather than an abort.

use super::error::{terr, Result};

/// Formats a shape the way error messages show it: `[2, 3]`, `[]`.
pub fn fmt_shape(shape: &[usize]) -> String {
    format!("{shape:?}")
}

/// The number of elements of `shape` (1 for the 0-d shape `[]`), or an error
/// if that number does not fit in memory addresses.
pub fn numel(shape: &[usize]) -> Result<usize> {
    // Any 0 makes none, however large the others (their product may not fit).
    if shape.contains(&0) {
        return Ok(0);
    }
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n.checked_mul(4).is_some_and(|b| b <= isize::MAX as usize))
        .ok_or_else(|| {
            let total: u128 = shape
                .iter()
                .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128))
                .unwrap_or(u128::MAX);
            if total == u128::MAX {
                terr!(
                    "cannot allocate a tensor of shape {} (too many elements)",
                    fmt_shape(shape)
                )
            } else {
                alloc_error(total)
            }
        })
}

/// The error for a tensor of `n` elements that cannot be allocated.
pub(crate) fn alloc_error(n: u128) -> super::TensorError {
    match n.checked_mul(4) {
        Some(bytes) => terr!("cannot allocate a tensor of {n} elements ({bytes} bytes)"),
        None => terr!("cannot allocate a tensor of {n} elements"),
    }
}

/// An empty vector with room for exactly `n` elements, or an error naming
/// the size if the memory cannot be reserved.
pub fn alloc(n: usize) -> Result<Vec<f32>> {
    if let Some(pooled) = super::storage::take_pooled(n) {
        return Ok(pooled);
    }
    super::memory_budget::check(n as u64 * 4)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| alloc_error(n as u128))?;
    Ok(v)
}

/// A vector of `n` copies of `value`, or an allocation error.
pub fn alloc_filled(n: usize, value: f32) -> Result<Vec<f32>> {
    let mut v = alloc(n)?;
    v.resize(n, value);
    Ok(v)
}

/// Row-major strides (in elements) of a contiguous tensor of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(shape[i + 1]);
    }
    s
}

/// Pluralises "dimension" for messages: `1 dimension`, `2 dimensions`.
pub(crate) fn dims_word(ndim: usize) -> String {
    if ndim == 1 {
        "1 dimension".to_string()
    } else {
        format!("{ndim} dimensions")
    }
}

/// Resolves a possibly negative `axis` (-1 is the last) of a tensor with
/// `ndim` dimensions to an index in `0..ndim`.
pub fn normalize_axis(axis: i64, ndim: usize) -> Result<usize> {
    let n = ndim as i64;
    let a = if axis < 0 { axis + n } else { axis };
    if a < 0 || a >= n {
        return Err(terr!(
            "axis {axis} is out of range for a tensor of {}",
            dims_word(ndim)
        ));
    }
    Ok(a as usize)
}

/// The NumPy broadcast of two shapes: dimensions are matched from the right
/// and each pair must be equal or contain a 1.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i < n - a.len() {
            1
        } else {
            a[i - (n - a.len())]
        };
        let db = if i < n - b.len() {
            1
        } else {
            b[i - (n - b.len())]
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(terr!(
                "cannot broadcast shapes {} and {}",
                fmt_shape(a),
                fmt_shape(b)
            ));
        };
    }
    Ok(out)
}

/// Whether a value of shape `from` broadcasts to exactly `to` (each of its dimensions, aligned
/// on the right, equal to `to`'s or 1): then `to op from` has `to`'s shape and can be computed
/// in `to`'s buffer. Allocates nothing, unlike [`broadcast_shapes`].
pub fn broadcasts_to(from: &[usize], to: &[usize]) -> bool {
    from.len() <= to.len()
        && from
            .iter()
            .rev()
            .zip(to.iter().rev())
            .all(|(&f, &t)| f == t || f == 1)
}

/// Strides (in elements) for reading a tensor of `shape` as if it had the
/// broadcast shape `out` (of at least as many dimensions): broadcast
/// dimensions get stride 0.
pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let own = strides(shape);
    let lead = out.len() - shape.len();
    (0..out.len())
        .map(|i| {
            if i < lead || shape[i - lead] == 1 {
                0
            } else {
                own[i - lead]
            }
        })
        .collect()
}

/// Merges the adjacent dimensions of a broadcast iteration that both operands traverse
/// contiguously, and drops size-1 dimensions: given the output `shape` and each operand's
/// strides over it ([`broadcast_strides`]), gives an equivalent shape with as few dimensions as
/// possible (at least one) and the operands' strides over it. The CPU's strided loop then has the
/// longest innermost row, and a GPU kernel divides by the fewest extents.
pub fn coalesce(
    shape: &[usize],
    sa: &[usize],
    sb: &[usize],
) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let mut dims: Vec<usize> = Vec::with_capacity(shape.len());
    let mut ra: Vec<usize> = Vec::with_capacity(shape.len());
    let mut rb: Vec<usize> = Vec::with_capacity(shape.len());
    for axis in 0..shape.len() {
        if shape[axis] == 1 {
            continue;
        }
        if let (Some(&last), Some(&xa), Some(&xb)) = (dims.last(), ra.last(), rb.last()) {
            if xa == sa[axis] * shape[axis] && xb == sb[axis] * shape[axis] {
                let at = dims.len() - 1;
                dims[at] = last * shape[axis];
                ra[at] = sa[axis];
                rb[at] = sb[axis];
                continue;
            }
        }
        dims.push(shape[axis]);
        ra.push(sa[axis]);
        rb.push(sb[axis]);
    }
    if dims.is_empty() {
        dims.push(1);
        ra.push(0);
        rb.push(0);
    }
    (dims, ra, rb)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalescing_merges_contiguous_dimensions_and_drops_ones() {
        // [2, 3, 4] + [3, 4]: b repeats along the first axis, the last two merge.
        let shape = [2, 3, 4];
        let (dims, sa, sb) = coalesce(
            &shape,
            &broadcast_strides(&[2, 3, 4], &shape),
            &broadcast_strides(&[3, 4], &shape),
        );
        assert_eq!((dims, sa, sb), (vec![2, 12], vec![12, 1], vec![0, 1]));
        // Size-1 dimensions vanish; all of them leave one dimension of 1.
        let (dims, sa, sb) = coalesce(&[1, 5, 1], &[0, 1, 0], &[0, 0, 0]);
        assert_eq!((dims, sa, sb), (vec![5], vec![1], vec![0]));
        assert_eq!(
            coalesce(&[1, 1], &[0, 0], &[0, 0]),
            (vec![1], vec![0], vec![0])
        );
        // A transposed-looking stride pattern does not merge.
        let (dims, ..) = coalesce(&[2, 3], &[1, 2], &[3, 1]);
        assert_eq!(dims, vec![2, 3]);
    }
    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast_shapes(&[2, 3], &[3]).unwrap(), vec![2, 3]);
        assert_eq!(broadcast_shapes(&[2, 1], &[1, 3]).unwrap(), vec![2, 3]);
        assert_eq!(broadcast_shapes(&[], &[4, 5]).unwrap(), vec![4, 5]);
        assert_eq!(broadcast_shapes(&[0, 1], &[3]).unwrap(), vec![0, 3]);
        assert_eq!(
            broadcast_shapes(&[2, 3], &[4]).unwrap_err().to_string(),
            "cannot broadcast shapes [2, 3] and [4]"
        );
    }

    #[test]
    fn broadcasts_to_agrees_with_broadcast_shapes() {
        let shapes: [&[usize]; 8] = [&[], &[1], &[3], &[2, 3], &[2, 1], &[1, 3], &[4, 2, 3], &[0]];
        for from in shapes {
            for to in shapes {
                let same = broadcast_shapes(to, from).is_ok_and(|shape| shape == to);
                assert_eq!(broadcasts_to(from, to), same, "{from:?} to {to:?}");
            }
        }
    }

    #[test]
    fn axes_may_be_negative() {
        assert_eq!(normalize_axis(-1, 3).unwrap(), 2);
        assert_eq!(normalize_axis(0, 3).unwrap(), 0);
        assert_eq!(
            normalize_axis(2, 2).unwrap_err().to_string(),
            "axis 2 is out of range for a tensor of 2 dimensions"
        );
        assert_eq!(
            normalize_axis(-2, 1).unwrap_err().to_string(),
            "axis -2 is out of range for a tensor of 1 dimension"
        );
        assert!(normalize_axis(0, 0).is_err());
    }

    #[test]
    fn huge_sizes_are_errors() {
        assert_eq!(numel(&[1_000_000, 1_000_000]).unwrap(), 1_000_000_000_000);
        assert_eq!(
            numel(&[1 << 40, 1 << 40]).unwrap_err().to_string(),
            "cannot allocate a tensor of 1208925819614629174706176 elements \
             (4835703278458516698824704 bytes)"
        );
        assert_eq!(
            numel(&[usize::MAX, usize::MAX, usize::MAX])
                .unwrap_err()
                .to_string(),
            format!(
                "cannot allocate a tensor of shape [{0}, {0}, {0}] (too many elements)",
                usize::MAX
            )
        );
        // Refused by the memory budget before the allocator is asked (4 TB).
        let message = alloc(1_000_000_000_000).unwrap_err().to_string();
        assert!(
            message.starts_with(
                "cannot allocate a tensor of 1000000000000 elements (3725.3 GiB): only "
            ),
            "{message}"
        );
        assert_eq!(numel(&[]).unwrap(), 1);
        assert_eq!(numel(&[3, 0]).unwrap(), 0);
    }

    #[test]
    fn strides_are_row_major() {
        assert_eq!(strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(broadcast_strides(&[3, 1], &[2, 3, 4]), vec![0, 1, 0]);
    }
}
