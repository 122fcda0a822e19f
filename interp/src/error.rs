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
            repeats: 0,
            other_messages: None,
            raised_here: false,
        })
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
/// as `  = note`. A note the same as the one above it is counted rather than told again: a
/// recursion 64 calls deep tells its call once, then `(the same, 62 more times)`.
pub(crate) fn with_place_note(rendered: &str, note: &str) -> String {
    let rendered = rendered.trim_end();
    let line = format!("  = {note}");
    let (above, last) = rendered.rsplit_once('\n').unwrap_or(("", rendered));
    if last == line {
        return format!("{rendered}\n  = (the same, 1 more time)");
    }
    let repeats = last
        .strip_prefix("  = (the same, ")
        .and_then(|rest| rest.split_once(" more time"))
        .and_then(|(count, _)| count.parse::<u64>().ok());
    match repeats {
        Some(count) if above.rsplit_once('\n').map_or(above, |(_, note)| note) == line => {
            format!("{above}\n  = (the same, {} more times)", count + 1)
        }
        _ => format!("{rendered}\n{line}"),
    }
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
}
