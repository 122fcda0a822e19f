//! Labels that tell the ops of a loop apart. A statement in a loop pushes one op per iteration,
//! all with the statement's text as label; when the run is observed, each op's label also says
//! which iteration it is: the slot a `set` writes, and the value of every loop counter the
//! statement names (`set(layers, 2, work(3, layers[k - 1])) k=2`). Unobserved runs keep the
//! statement's shared label and pay nothing.

use std::sync::Arc;

/// `label` with the slot index of a `set(x, i, value)` written out (from `written`, the name of
/// the slot it writes: `x[2]`) and the values of the loop counters it names appended, then
/// those that `placed_by` names (the `with` settings that place the op: `j` of `with gpu = j`),
/// as `counter` gives them. `None` when there is nothing to add: the shared label is kept.
pub(crate) fn with_iteration(
    label: &str,
    written: Option<&str>,
    placed_by: &[Arc<str>],
    counter: impl Fn(&str) -> Option<i64>,
) -> Option<Arc<str>> {
    let mut values: Vec<(&str, i64)> = Vec::new();
    let placing = placed_by.iter().flat_map(|text| identifiers(text));
    for name in identifiers(label).chain(placing) {
        if values.iter().any(|(known, _)| *known == name) {
            continue;
        }
        if let Some(value) = counter(name) {
            values.push((name, value));
        }
    }
    let with_slot = written.and_then(|written| set_with_index(label, written));
    if values.is_empty() && with_slot.is_none() {
        return None;
    }
    let mut out = with_slot.unwrap_or_else(|| label.to_string());
    for (name, value) in values {
        out.push_str(&format!(" {name}={value}"));
    }
    Some(Arc::from(out))
}

/// The identifiers of a statement's text, in order, outside string literals and comments.
pub(crate) fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < bytes.len() {
            let byte = bytes[at];
            if byte == b'"' {
                at += 1;
                while at < bytes.len() && bytes[at] != b'"' {
                    at += 1;
                }
                at += 1;
            } else if byte == b'#' {
                return None;
            } else if byte.is_ascii_alphabetic() || byte == b'_' {
                let start = at;
                while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
                    at += 1;
                }
                return Some(&text[start..at]);
            } else if byte.is_ascii_digit() {
                // A number, with its exponent or suffix letters (`1e5`): not a name.
                while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'.') {
                    at += 1;
                }
            } else {
                at += 1;
            }
        }
        None
    })
}

/// `set(x, i, value)` with `i` replaced by the index in `written` (`x[2]`), when the label is
/// such a call and its index is not already that number.
fn set_with_index(label: &str, written: &str) -> Option<String> {
    let args = label.strip_prefix("set(")?;
    let index = written.strip_suffix(']')?.rsplit_once('[')?.1;
    let mut depth = 0usize;
    let mut commas = Vec::with_capacity(2);
    for (offset, ch) in args.char_indices() {
        match ch {
            '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                commas.push(offset);
                if commas.len() == 2 {
                    break;
                }
            }
            _ => {}
        }
    }
    let [first, second] = commas[..] else {
        return None;
    };
    if args[first + 1..second].trim() == index {
        return None;
    }
    Some(format!(
        "set({}, {index},{}",
        &args[..first],
        &args[second + 1..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(name: &str) -> Option<i64> {
        match name {
            "k" => Some(2),
            "r" => Some(1),
            "i" => Some(3),
            _ => None,
        }
    }

    #[test]
    fn a_set_in_a_loop_names_its_slot_and_counters() {
        let label = with_iteration(
            "set(layers, k, work(3, layers[k - 1] + received[k]))",
            Some("layers[2]"),
            &[],
            counters,
        );
        assert_eq!(
            label.as_deref(),
            Some("set(layers, 2, work(3, layers[k - 1] + received[k])) k=2")
        );
        let label = with_iteration(
            "set(received, 3 - r, work(4, params[3 - r]))",
            Some("received[2]"),
            &[],
            counters,
        );
        assert_eq!(
            label.as_deref(),
            Some("set(received, 2, work(4, params[3 - r])) r=1")
        );
    }

    #[test]
    fn the_counters_a_with_setting_places_the_op_by_come_after_the_statements() {
        let placed_by: [Arc<str>; 2] = [Arc::from("r"), Arc::from("k + i")];
        assert_eq!(
            with_iteration("y = x[i] * 2", Some("y"), &placed_by, counters).as_deref(),
            Some("y = x[i] * 2 i=3 r=1 k=2")
        );
        assert_eq!(
            with_iteration("B = A + 1", Some("B"), &placed_by[..1], counters).as_deref(),
            Some("B = A + 1 r=1")
        );
    }

    #[test]
    fn other_statements_get_the_counters_they_name() {
        assert_eq!(
            with_iteration("A = A + i * 2e3", Some("A"), &[], counters).as_deref(),
            Some("A = A + i * 2e3 i=3")
        );
        assert_eq!(
            with_iteration("print \"k\", k2 # k", None, &[], counters),
            None
        );
        assert_eq!(with_iteration("B = A + 1", Some("B"), &[], counters), None);
        // A literal index already says it.
        assert_eq!(
            with_iteration("set(x, 2, ones(3))", Some("x[2]"), &[], counters),
            None
        );
    }
}
