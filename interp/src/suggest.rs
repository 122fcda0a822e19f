//! "Did you mean" suggestions for unknown names.

/// Names longer than this get no suggestion: no typo of a real name is that long, and the
/// distance costs the product of the two lengths.
const LONGEST_SUGGESTED: usize = 64;

/// The candidate closest to `name` by edit distance, if it is close enough to be a likely typo.
/// A swap of two neighbouring letters counts as one edit (`onse` is one edit from `ones`), and
/// case differences count as nothing.
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let length = name.chars().count();
    if length > LONGEST_SUGGESTED {
        return None;
    }
    let limit = (length / 3).max(1);
    let name = name.to_lowercase();
    candidates
        .into_iter()
        // The distance is at least the difference of the lengths: skip far ones unmeasured.
        .filter(|candidate| candidate.chars().count().abs_diff(length) <= limit)
        .map(|candidate| {
            let distance = strsim::osa_distance(&name, &candidate.to_lowercase());
            (distance, candidate)
        })
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, candidate)| (*distance, *candidate))
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(closest("Bx", ["B", "C", "zeros"]), Some("B"));
        assert_eq!(closest("relux", ["relu", "exp"]), Some("relu"));
        assert_eq!(closest("weights", ["A", "B"]), None);
        assert_eq!(closest("a", ["A"]), Some("A"));
    }

    #[test]
    fn a_swap_of_neighbouring_letters_is_one_edit() {
        assert_eq!(closest("onse", ["ones", "zeros"]), Some("ones"));
        assert_eq!(closest("mtamul", ["matmul", "mean"]), Some("matmul"));
    }

    #[test]
    fn very_long_names_get_no_suggestion() {
        let long = "x".repeat(100_000);
        let candidate = "x".repeat(99_999);
        // One edit apart, but measuring it would cost 10^10 steps: not measured, not suggested.
        assert_eq!(closest(&long, [candidate.as_str()]), None);
    }
}
