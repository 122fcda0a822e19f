//! Small helpers shared by the renderers: escaping, truncation, durations.

/// Escapes text for XML and HTML content and attribute values.
pub(crate) fn escape_xml(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            _ => escaped.push(ch),
        }
    }
    escaped
}

/// `text` cut to at most `max_chars` characters, ending in `…` when cut.
pub(crate) fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    if max_chars == 0 {
        return String::new();
    }
    let mut cut: String = text.chars().take(max_chars - 1).collect();
    cut.push('…');
    cut
}

/// `text` padded with spaces (or cut) to exactly `n_chars` characters.
pub(crate) fn pad(text: &str, n_chars: usize) -> String {
    let cut = truncate(text, n_chars);
    let len = cut.chars().count();
    format!("{cut}{}", " ".repeat(n_chars - len))
}

/// A duration in the most readable unit, as every view writes it: `850 ns`, `12 µs`, `3.40 ms`,
/// `1.25 s`.
pub fn format_ns(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=99_999 => {
            let tenths = rounded(ns, 100);
            match tenths % 10 {
                0 => format!("{} µs", tenths / 10),
                digit => format!("{}.{digit} µs", tenths / 10),
            }
        }
        100_000..=999_999_999 => with_hundredths(rounded(ns, 10_000), "ms"),
        _ => with_hundredths(rounded(ns, 10_000_000), "s"),
    }
}

/// `ns / unit`, rounded half up: in integers, so that the replay player's script (which rounds
/// with `Math.round`) writes the same digits.
fn rounded(ns: u64, unit: u64) -> u64 {
    // Not `(ns + unit / 2) / unit`, which overflows near `u64::MAX`.
    ns / unit + u64::from(ns % unit >= unit - unit / 2)
}

fn with_hundredths(hundredths: u64, unit: &str) -> String {
    format!("{}.{:02} {unit}", hundredths / 100, hundredths % 100)
}

/// "a statement (line 3)", or the bare label when it has no line.
pub(crate) fn describe_op(label: &str, line: u32) -> String {
    describe_op_at(label, line, None)
}

/// "a statement (cell[2]:3)" where a front-end named the line's place ([`crate::Places`]),
/// else as [`describe_op`].
pub(crate) fn describe_op_at(label: &str, line: u32, place: Option<&str>) -> String {
    match place {
        Some(place) => format!("{label} ({place})"),
        None if line > 0 => format!("{label} (line {line})"),
        None => label.to_string(),
    }
}

/// An op's line for a table's line column: its place (`cell[2]:3`) when named, else its
/// number, else nothing.
pub(crate) fn line_column(line: u32, place: Option<&str>) -> String {
    match place {
        Some(place) => place.to_string(),
        None if line > 0 => line.to_string(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_durations_in_readable_units() {
        assert_eq!(format_ns(850), "850 ns");
        assert_eq!(format_ns(12_000), "12 µs");
        assert_eq!(format_ns(12_500), "12.5 µs");
        assert_eq!(format_ns(3_400_000), "3.40 ms");
        assert_eq!(format_ns(1_250_000_000), "1.25 s");
    }

    #[test]
    fn rounds_halves_up_as_the_player_script_does() {
        assert_eq!(format_ns(1_250), "1.3 µs");
        assert_eq!(format_ns(1_249), "1.2 µs");
        assert_eq!(format_ns(99_950), "100 µs");
        assert_eq!(format_ns(125_000), "0.13 ms");
        assert_eq!(format_ns(30_005_000), "30.01 ms");
        // The unit follows the value before rounding, in the script too.
        assert_eq!(format_ns(999_995_000), "1000.00 ms");
        assert_eq!(format_ns(u64::MAX), "18446744073.71 s");
    }

    #[test]
    fn truncates_with_an_ellipsis() {
        assert_eq!(truncate("B = A + 1", 5), "B = …");
        assert_eq!(truncate("B", 5), "B");
        assert_eq!(pad("B", 3), "B  ");
    }
}
