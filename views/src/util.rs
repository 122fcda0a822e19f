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

/// The columns `text` takes on a terminal: a wide character (`日`, `😀`) two, a combining one
/// none.
pub(crate) fn width(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// `text` cut to at most `max_width` columns ([`width`]), with `…` where it was cut: at the
/// end, or, for an op's label that ends in the loop counters it names (`set(w, 0, a + …) i=1
/// j=0`), before them, so that the ops of one statement stay told apart.
pub(crate) fn truncate(text: &str, max_width: usize) -> String {
    if width(text) <= max_width {
        return text.to_string();
    }
    if max_width == 0 {
        return String::new();
    }
    let counters = loop_counters(text);
    let n_counters = width(counters);
    // The counters kept only where some of the statement still shows before them.
    let (head_width, tail) = if !counters.is_empty() && n_counters + 2 < max_width {
        (max_width - 1 - n_counters, counters)
    } else {
        (max_width - 1, "")
    };
    let mut cut = head(text, head_width);
    cut.push('…');
    cut.push_str(tail);
    cut
}

/// A heading of parts joined by ` · ` (`cell[3] · threaded engine · 40 ops: … · showing 24 of
/// 40 ops`) cut to at most `max_width` columns: whole parts dropped from the end, ` · …` where
/// they were, so that no number is cut in half; [`truncate`] when even its first part is too
/// wide.
pub(crate) fn fit_heading(heading: &str, max_width: usize) -> String {
    if width(heading) <= max_width {
        return heading.to_string();
    }
    let parts: Vec<&str> = heading.split(" · ").collect();
    for kept in (1..parts.len()).rev() {
        let whole = parts[..kept].join(" · ");
        if width(&whole) + width(" · …") > max_width {
            continue;
        }
        // Of the first part left out, as many of its items (`1 running, 2 waiting`) as fit.
        let items: Vec<&str> = parts[kept].split(", ").collect();
        for n_items in (1..items.len()).rev() {
            let fitted = format!("{whole} · {}, …", items[..n_items].join(", "));
            if width(&fitted) <= max_width {
                return fitted;
            }
        }
        return format!("{whole} · …");
    }
    truncate(heading, max_width)
}

/// `text` cut to at most `max_width` columns ([`width`]) in its middle, `…` where it was cut,
/// its start and its end kept (`learning_…rate_b`): names that differ at their end, as a
/// family of variables' names often do, stay told apart.
pub(crate) fn cut_middle(text: &str, max_width: usize) -> String {
    if width(text) <= max_width {
        return text.to_string();
    }
    let Some(room) = max_width.checked_sub(1) else {
        return String::new();
    };
    let start = head(text, room.div_ceil(2));
    let mut end_width = room - width(&start);
    let mut end: Vec<char> = Vec::new();
    for c in text.chars().rev() {
        let Some(left) =
            end_width.checked_sub(unicode_width::UnicodeWidthChar::width(c).unwrap_or(0))
        else {
            break;
        };
        end_width = left;
        end.push(c);
    }
    end.reverse();
    format!("{start}…{}", end.into_iter().collect::<String>())
}

/// The longest start of `text` at most `max_width` columns wide.
pub(crate) fn head(text: &str, max_width: usize) -> String {
    let mut used = 0;
    text.chars()
        .take_while(|c| {
            used += unicode_width::UnicodeWidthChar::width(*c).unwrap_or(0);
            used <= max_width
        })
        .collect()
}

/// The loop counters at the end of an op's label, with the space before them (` i=1 j=0`), or
/// `""`: trailing words `name=integer`.
fn loop_counters(label: &str) -> &str {
    let is_counter = |word: &str| {
        word.split_once('=').is_some_and(|(name, value)| {
            name.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_alphanumeric() || c == '_')
                && value
                    .strip_prefix('-')
                    .unwrap_or(value)
                    .parse::<u64>()
                    .is_ok()
        })
    };
    let mut start = label.len();
    for (index, _) in label.rmatch_indices(' ') {
        if !is_counter(&label[index + 1..start]) {
            break;
        }
        start = index;
    }
    &label[start..]
}

/// `text` padded with spaces (or cut) to exactly `n_columns` columns ([`width`]; one less
/// where a wide character would straddle the edge).
pub(crate) fn pad(text: &str, n_columns: usize) -> String {
    let cut = truncate(text, n_columns);
    let len = width(&cut);
    format!("{cut}{}", " ".repeat(n_columns.saturating_sub(len)))
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

/// `part` as a share of `whole`, in whole percent, as every view writes a share: rounded to
/// the nearest, except that a share short of all of it never reads `100%` and a share above
/// nothing never reads `0%` (a worker busy 99.6% of the run is `>99%`, one busy 0.2% is
/// `<1%`), so that a view never shows a worker always busy, or never, when it was not. A
/// `whole` of 0 is a share of nothing: `0%`.
pub fn format_percent(part: u64, whole: u64) -> String {
    if whole == 0 || part == 0 {
        return "0%".to_string();
    }
    if part >= whole {
        // More than the whole (never for a worker's busy time) is said as it is.
        return format!("{:.0}%", part as f64 * 100.0 / whole as f64);
    }
    let share = part as f64 * 100.0 / whole as f64;
    match share {
        share if share < 0.5 => "<1%".to_string(),
        share if share >= 99.5 => ">99%".to_string(),
        // Halves up, as `Math.round` in the pages' scripts (`{:.0}` rounds them to even).
        share => format!("{}%", share.round()),
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

/// The most characters of a label an op's description shows (a long statement, one of
/// hundreds of terms, would fill screens of a summary's critical path or a replay's heading).
const DESCRIBED_LABEL_CHARS: usize = 100;

/// "a statement (cell[2]:3)" where a front-end named the line's place ([`crate::Places`]),
/// else as [`describe_op`].
pub(crate) fn describe_op_at(label: &str, line: u32, place: Option<&str>) -> String {
    let label = truncate(label, DESCRIBED_LABEL_CHARS);
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

    /// A heading too wide loses whole parts (or whole items of a part) from its end, never half
    /// a number (a notebook's plain-text display read `showing 24 of 409…` for 4097 ops).
    #[test]
    fn a_heading_too_wide_loses_whole_parts() {
        let heading = "cell[1] · threaded engine · 4097 ops: 1437 done, 2660 cancelled · 1.57 s in all · showing 24 of 4097 ops";
        assert_eq!(fit_heading(heading, 200), heading);
        assert_eq!(
            fit_heading(heading, 100),
            "cell[1] · threaded engine · 4097 ops: 1437 done, 2660 cancelled · 1.57 s in all · …"
        );
        assert_eq!(
            fit_heading(heading, 60),
            "cell[1] · threaded engine · 4097 ops: 1437 done, …"
        );
        assert_eq!(fit_heading(heading, 30), "cell[1] · threaded engine · …");
        assert_eq!(fit_heading(heading, 8), "cell[1]…");
    }

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

    /// A share short of the whole never reads 100%, and one above nothing never 0%: a worker
    /// busy 99.95% of a run read `(100%)`, always busy, and one busy 0.01% read `(0%)`.
    #[test]
    fn a_share_reads_all_or_nothing_only_when_it_is() {
        assert_eq!(format_percent(1_000, 1_000), "100%");
        assert_eq!(format_percent(0, 1_000), "0%");
        assert_eq!(format_percent(0, 0), "0%");
        assert_eq!(format_percent(9_995, 10_000), ">99%");
        assert_eq!(format_percent(421_431, 421_432), ">99%");
        assert_eq!(format_percent(9_949, 10_000), "99%");
        assert_eq!(format_percent(1, 10_000), "<1%");
        assert_eq!(format_percent(49, 10_000), "<1%");
        assert_eq!(format_percent(50, 10_000), "1%");
        assert_eq!(format_percent(1, 3), "33%");
        assert_eq!(format_percent(2, 3), "67%");
    }

    #[test]
    fn a_name_cut_in_its_middle_keeps_its_start_and_end() {
        assert_eq!(cut_middle("learning_rate_a", 20), "learning_rate_a");
        assert_eq!(cut_middle("learning_rate_a", 12), "learni…ate_a");
        assert_eq!(cut_middle("learning_rate_b", 12), "learni…ate_b");
        assert_eq!(width(&cut_middle("learning_rate_b", 11)), 11);
        // Wide characters never straddle the cut: one column is left blank instead.
        assert_eq!(cut_middle("日本語のながい名前", 8), "日本…前");
        assert_eq!(cut_middle("abc", 1), "…");
        assert_eq!(cut_middle("abc", 0), "");
    }

    #[test]
    fn a_cut_label_keeps_its_loop_counters() {
        let label = "set(w, 0, verylongname + a + a) i=12 j=-3";
        assert_eq!(truncate(label, 26), "set(w, 0, veryl… i=12 j=-3");
        assert_eq!(width(&truncate(label, 26)), 26);
        // Too short to keep them with some of the statement: cut at the end.
        assert_eq!(truncate(label, 10), "set(w, 0,…");
        // Words that are no counters stay where they are.
        assert_eq!(truncate("x = y + zzzzzzzz", 8), "x = y +…");
        assert_eq!(truncate("print \"k=1\"", 8), "print \"…");
        assert_eq!(loop_counters("A = A + i * 2e3 i=3"), " i=3");
        assert_eq!(loop_counters("B = A + 1"), "");
    }

    #[test]
    fn wide_characters_take_two_columns() {
        assert_eq!(width("日本 ok"), 7);
        assert_eq!(pad("load(\"日本\")", 13), "load(\"日本\") ");
        assert_eq!(width(&pad("load(\"日本語\")", 10)), 10);
        assert_eq!(truncate("日本語です", 6), "日本…");
    }

    #[test]
    fn truncates_with_an_ellipsis() {
        assert_eq!(truncate("B = A + 1", 5), "B = …");
        assert_eq!(truncate("B", 5), "B");
        assert_eq!(pad("B", 3), "B  ");
    }
}
