//! Errors a session reports: parse errors, statement errors found at push time, and failures of
//! ops found when the engine ran them; each rendered with `file:line:col`, the source line and a
//! caret.

use std::fmt;

/// What kind of error ended (or marred) a run; the binary maps it to an exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The source did not parse (exit code 2).
    Parse,
    /// A statement or an op failed (exit code 1).
    Runtime,
    /// The run was interrupted (Ctrl-C, a kernel interrupt).
    Interrupted,
}

/// One reported problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The problem in one line, without position.
    pub message: String,
    /// The full report: headline, `--> file:line:col`, source line, caret.
    pub rendered: String,
    /// The 1-based line within its file (0: none).
    pub line: u32,
    /// The name of that file as reports name it (`run.dep`, `cell[2]`, `<repl>`; empty: none),
    /// so that a failure reported later, in another cell, still names its own.
    pub file: String,
    /// How many more times the same failure of the same statement happened (a loop's), told
    /// in `rendered` and not reported again.
    pub repeats: u64,
    /// Of those `repeats`, how many failed with another message than `message`, and the last
    /// such message, in the form of `message` (both told in `rendered`); `None` when every one
    /// had `message`.
    pub other_messages: Option<(u64, String)>,
    /// Whether the statement being executed raised it (a statement error, found as it was
    /// pushed), rather than an op that failed on the engine: only then do the loops and calls
    /// around that statement say where the run was (see [`RunError::within`]).
    pub(crate) raised_here: bool,
}

impl Report {
    /// A problem with no place in the source (a GPU's error that no op could report).
    pub(crate) fn unplaced(message: String) -> Report {
        Report {
            rendered: format!("error: {message}\n"),
            message,
            line: 0,
            file: String::new(),
            repeats: 0,
            other_messages: None,
            raised_here: false,
        }
    }
}

/// The errors of one run of source text: all parse errors at once, or the runtime errors seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunError {
    /// The kind of error.
    pub kind: ErrorKind,
    /// One report per problem, in source order for parse errors, in finding order otherwise.
    pub reports: Vec<Report>,
}

impl RunError {
    pub(crate) fn runtime(report: Report) -> RunError {
        RunError {
            kind: ErrorKind::Runtime,
            reports: vec![report],
        }
    }

    /// A runtime error with no place: `rendered` is the whole report.
    pub(crate) fn without_place(rendered: String) -> RunError {
        RunError::runtime(Report {
            message: rendered.clone(),
            rendered,
            line: 0,
            file: String::new(),
            repeats: 0,
            other_messages: None,
            raised_here: false,
        })
    }

    /// The same error with `note` told under its last report: where the failures it reports
    /// stopped the run (`reported by the wait at f.dep:3:1, where the run stops`).
    pub(crate) fn noting_last(mut self, note: &str) -> RunError {
        if let Some(report) = self.reports.last_mut() {
            report.rendered = with_place_note(&report.rendered, note);
        }
        self
    }

    /// The same error with `context` (`in the loop at f.dep:2:1, at i = 4`) told under each
    /// statement error it holds: a loop or a call adds where it was as the error leaves it, so
    /// the notes read innermost first, like a traceback. An op's failure is left as it is: the
    /// op may have been pushed at another iteration, or before the loop.
    pub(crate) fn within(mut self, context: impl FnOnce() -> String) -> RunError {
        if self.kind != ErrorKind::Runtime || !self.reports.iter().any(|r| r.raised_here) {
            return self;
        }
        let context = context();
        for report in self.reports.iter_mut().filter(|report| report.raised_here) {
            report.rendered = with_place_note(&report.rendered, &context);
        }
        self
    }

    /// The same error as rank `rank` of a job reports it: `error (rank 2): ...`.
    pub fn on_rank(mut self, rank: usize) -> RunError {
        for report in &mut self.reports {
            report.rendered = report
                .rendered
                .lines()
                .map(|line| match line.strip_prefix("error:") {
                    Some(rest) => format!("error (rank {rank}):{rest}"),
                    None => line.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n");
        }
        self
    }

    /// The first report's one-line message (for Jupyter's `evalue`).
    pub fn message(&self) -> &str {
        self.reports
            .first()
            .map_or("", |report| report.message.as_str())
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rendered: Vec<&str> = self
            .reports
            .iter()
            .map(|report| report.rendered.trim_end())
            .collect();
        f.write_str(&rendered.join("\n\n"))
    }
}

impl std::error::Error for RunError {}

/// `rendered` with `note` (where the run was: `in \`f\`, called at f.dep:2:10`) told under it,
/// as `  = note`. Notes that repeat the ones above them are counted rather than told again: a
/// recursion 64 calls deep tells its call once, then `(the same, 62 more times)`, and one
/// through two functions calling each other tells both calls once, then `(the same 2 calls, 31
/// more times)` (a cycle of up to [`LONGEST_REPEATED_CYCLE`] notes).
pub(crate) fn with_place_note(rendered: &str, note: &str) -> String {
    let line = format!("  = {note}");
    let mut lines: Vec<&str> = rendered.trim_end().lines().collect();
    lines.push(&line);
    let folded = fold_repeated_notes(&lines);
    let lines: Vec<&str> = match &folded {
        Some((kept, marker)) => lines[..*kept]
            .iter()
            .copied()
            .chain([marker.as_str()])
            .collect(),
        None => lines,
    };
    lines.join("\n")
}

/// The most notes a repeated cycle of them may have to be counted (`f` calls `g` calls `h`
/// calls `f`... is a cycle of three).
const LONGEST_REPEATED_CYCLE: usize = 4;

/// Where the last note, just added to `lines`, completes a repetition of the notes above it:
/// how many of `lines` to keep, and the count that follows them in place of the rest.
fn fold_repeated_notes(lines: &[&str]) -> Option<(usize, String)> {
    let n = lines.len();
    let is_note = |line: &&str| line.starts_with("  = ") && repeat_count(line).is_none();
    for period in 1..=LONGEST_REPEATED_CYCLE.min(n / 2) {
        let last = &lines[n - period..];
        if !last.iter().all(is_note) {
            continue;
        }
        // Counted already: the cycle, its count, then the cycle again.
        if n > 2 * period {
            let marker = lines[n - period - 1];
            let cycle = &lines[n - 2 * period - 1..n - period - 1];
            if let Some((counted_period, count)) = repeat_count(marker) {
                if counted_period == period && cycle == last {
                    return Some((n - period - 1, repeat_marker(period, count + 1)));
                }
            }
        }
        // Told twice in a row.
        let before = &lines[n - 2 * period..n - period];
        if before.iter().all(is_note) && before == last {
            return Some((n - period, repeat_marker(period, 1)));
        }
    }
    None
}

/// The line counting `count` more times of the `period` notes above it.
fn repeat_marker(period: usize, count: u64) -> String {
    let times = if count == 1 { "time" } else { "times" };
    match period {
        1 => format!("  = (the same, {count} more {times})"),
        _ => format!("  = (the same {period} calls, {count} more {times})"),
    }
}

/// The cycle's length and the count of a line [`repeat_marker`] wrote.
fn repeat_count(line: &str) -> Option<(usize, u64)> {
    let rest = line.strip_prefix("  = (the same")?;
    let (period, rest) = match rest.strip_prefix(", ") {
        Some(rest) => (1, rest),
        None => {
            let (period, rest) = rest.strip_prefix(' ')?.split_once(" calls, ")?;
            (period.parse().ok()?, rest)
        }
    };
    let (count, _) = rest.split_once(" more time")?;
    Some((period, count.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::with_place_note;

    #[test]
    fn a_place_note_the_same_as_the_last_is_counted_not_told_again() {
        let mut rendered = "error: boom\n --> f.dep:2:3\n".to_string();
        for _ in 0..4 {
            rendered = with_place_note(&rendered, "in `f`, called at f.dep:2:10");
        }
        rendered = with_place_note(&rendered, "in `f`, called at f.dep:5:1");
        rendered = with_place_note(&rendered, "in the loop at f.dep:4:1, at i = 0");
        assert_eq!(
            rendered,
            "error: boom\n --> f.dep:2:3\n  = in `f`, called at f.dep:2:10\n  = (the same, 3 more times)\n  = in `f`, called at f.dep:5:1\n  = in the loop at f.dep:4:1, at i = 0"
        );
        // Once: told once; twice: one more time.
        let once = with_place_note("error: boom", "in `g`, called at f.dep:1:1");
        assert_eq!(once, "error: boom\n  = in `g`, called at f.dep:1:1");
        assert_eq!(
            with_place_note(&once, "in `g`, called at f.dep:1:1"),
            "error: boom\n  = in `g`, called at f.dep:1:1\n  = (the same, 1 more time)"
        );
        // A count is of the note right above it only.
        let other = with_place_note(
            "error: boom\n  = in `h`, called at f.dep:9:9\n  = (the same, 1 more time)",
            "in `g`, called at f.dep:1:1",
        );
        assert!(other.ends_with("(the same, 1 more time)\n  = in `g`, called at f.dep:1:1"));
    }

    #[test]
    fn notes_repeating_a_cycle_of_calls_are_counted_not_told_again() {
        let (f, g) = (
            "in `f`, called at f.dep:1:20",
            "in `g`, called at f.dep:2:20",
        );
        let mut rendered = "error: boom\n --> f.dep:1:1".to_string();
        for _ in 0..32 {
            rendered = with_place_note(&rendered, g);
            rendered = with_place_note(&rendered, f);
        }
        rendered = with_place_note(&rendered, g);
        rendered = with_place_note(&rendered, "in `f`, called at f.dep:3:7");
        assert_eq!(
            rendered,
            "error: boom\n --> f.dep:1:1\n  = in `g`, called at f.dep:2:20\n  = in `f`, called at f.dep:1:20\n  = (the same 2 calls, 31 more times)\n  = in `g`, called at f.dep:2:20\n  = in `f`, called at f.dep:3:7"
        );
        // Three functions in a ring.
        let h = "in `h`, called at f.dep:3:20";
        let mut ring = "error: boom".to_string();
        for _ in 0..5 {
            for note in [f, g, h] {
                ring = with_place_note(&ring, note);
            }
        }
        assert_eq!(
            ring,
            format!("error: boom\n  = {f}\n  = {g}\n  = {h}\n  = (the same 3 calls, 4 more times)")
        );
    }
}
