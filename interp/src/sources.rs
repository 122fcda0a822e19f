//! The source text a session ran, chunk by chunk (a script, a REPL line, a notebook cell), and
//! the reports placed in it: a statement's label and line, and an op failure found later,
//! rendered at its statement.

// FxHash: labels are looked up on every statement; nothing here needs DoS-resistant hashing.
use crate::pushed_within::PushedWithin;
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use dep_engine as engine;
use dep_grammar as grammar;

use crate::error::{ErrorKind, Report, RunError};
use crate::graph::Graph;

/// One piece of source text a session ran, for rendering errors found later by line.
pub(crate) struct SourceChunk {
    pub(crate) path: String,
    /// The session-wide number of the chunk's first line.
    pub(crate) first_line: u32,
    /// The number of the chunk's first line in `path` (1 unless read from the middle of a pipe).
    file_first_line: u32,
    pub(crate) text: Arc<str>,
    /// Byte offsets where each line starts.
    line_starts: Vec<usize>,
    /// Statement labels by span start, made once: a loop pushes the same statements many times.
    labels: HashMap<usize, Arc<str>>,
}

impl SourceChunk {
    pub(crate) fn new(
        path: &str,
        first_line: u32,
        file_first_line: u32,
        text: Arc<str>,
    ) -> SourceChunk {
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, byte)| *byte == b'\n')
                .map(|(offset, _)| offset + 1),
        );
        SourceChunk {
            path: path.to_string(),
            first_line,
            file_first_line,
            text,
            line_starts,
            labels: HashMap::default(),
        }
    }

    /// The label of the statement at `span`: its text without comments (a statement inside a
    /// block spans the comment that ends its line), on one line, as every view shows a label.
    pub(crate) fn label(&mut self, span: grammar::Span) -> Arc<str> {
        let text = &self.text;
        self.labels
            .entry(span.start)
            .or_insert_with(|| Arc::from(one_line_without_comments(span.text(text))))
            .clone()
    }

    /// A statement error at `diagnostic`'s span, as a report naming the line in the file.
    pub(crate) fn report(&self, diagnostic: grammar::Diagnostic) -> Report {
        let line_index = grammar::LineIndex::new(&self.text);
        let first = self.file_first_line;
        Report {
            rendered: diagnostic.render_from_line(&self.path, &line_index, first as usize),
            line: line_index.line_column(diagnostic.span.start).line as u32 + first - 1,
            file: self.path.to_string(),
            message: diagnostic.message,
            repeats: 0,
            other_messages: None,
            raised_here: true,
        }
    }

    /// `path:line:col` of a byte offset in this chunk, as reports name places.
    pub(crate) fn place(&self, offset: usize) -> String {
        let at = grammar::LineIndex::new(&self.text).line_column(offset);
        let line = at.line as u32 + self.file_first_line - 1;
        format!("{}:{line}:{}", self.path, at.column)
    }

    /// `path:line` of a byte offset in this chunk, as views name an op's place (`<repl>:7`).
    pub(crate) fn line_place(&self, offset: usize) -> String {
        let at = grammar::LineIndex::new(&self.text).line_column(offset);
        format!(
            "{}:{}",
            self.path,
            at.line as u32 + self.file_first_line - 1
        )
    }

    /// The session-wide line number of a byte offset in this chunk.
    pub(crate) fn line_of(&self, offset: usize) -> u32 {
        self.first_line
            + self
                .line_starts
                .partition_point(|start| *start <= offset)
                .saturating_sub(1) as u32
    }
}

/// Renders an op failure with the place of its statement in `sources` (for a bulk of one of
/// `graphs`' ops, the statement in it that failed), then the calls and loop iterations it was
/// pushed within.
pub(crate) fn render_op_error(
    sources: &[SourceChunk],
    graphs: &HashMap<String, Graph>,
    pushed_within: &PushedWithin,
    error: &engine::OpError,
) -> Report {
    match failed_statement(graphs, error) {
        Some((statement, position)) => {
            render_statement_error(sources, graphs, pushed_within, &statement, Some(position))
        }
        None => render_statement_error(sources, graphs, pushed_within, error, None),
    }
}

/// [`render_op_error`] of the failure of a statement: one that failed alone, or the one at
/// `position` among the statements of a graph's bulk.
fn render_statement_error(
    sources: &[SourceChunk],
    graphs: &HashMap<String, Graph>,
    pushed_within: &PushedWithin,
    error: &engine::OpError,
    position: Option<usize>,
) -> Report {
    let located = locate_line(sources, error.line);
    let rendered = match &located {
        Some((path, local_line, line_text)) => {
            // The statement's text on its line, rendered like every other report (a long
            // line is cut to a window around the carets).
            let span = statement_span(line_text, &error.label);
            grammar::Diagnostic::new(error.message.clone(), span, "in this statement")
                .render_from_line(
                    path,
                    &grammar::LineIndex::new(line_text),
                    *local_line as usize,
                )
        }
        None => format!("error: `{}`: {}\n", error.label, error.message),
    };
    // Where it was pushed: the calls and loop iterations around it, innermost first. Failing
    // that (forgotten, adopted from another engine), an observed loop's op still names its
    // iteration in its label (` i=4`).
    let mut frames = pushed_within.describe(sources, error.op, error.line, position);
    // A recorded statement's op is pushed by a `run` of its graph; where the frames were
    // forgotten (adopted from another engine), its graph is still named.
    if frames.is_empty() {
        let replayed = graphs
            .iter()
            .filter(|(_, graph)| graph.has_statement_at(error.line))
            .map(|(name, _)| name.as_str())
            .min();
        if let Some(name) = replayed {
            frames.push(format!("in `run {name}`"));
        }
    }
    let (_, iteration) = label_parts(&error.label);
    let rendered = match iteration {
        iteration if iteration.is_empty() || !frames.is_empty() => rendered,
        iteration => {
            let at: Vec<String> = iteration
                .split(' ')
                .map(|counter| counter.replacen('=', " = ", 1))
                .collect();
            format!("{}\n  = at {}", rendered.trim_end(), at.join(", "))
        }
    };
    let rendered = frames.into_iter().fold(rendered, |rendered, frame| {
        crate::error::with_place_note(&rendered, &frame)
    });
    Report {
        message: format!("`{}`: {}", error.label, error.message),
        rendered,
        line: located.as_ref().map_or(0, |(_, line, _)| *line),
        file: located.map_or_else(String::new, |(path, _, _)| path.to_string()),
        repeats: 0,
        other_messages: None,
        raised_here: false,
    }
}

/// `text` with each line's comment (from a `#` outside a string literal to the line's end)
/// left out, and its lines joined by one space (a statement written over several lines, `B =
/// (A +` then `1)`, reads `B = (A + 1)`).
pub(crate) fn one_line_without_comments(text: &str) -> String {
    let lines: Vec<&str> = text
        .split('\n')
        .map(|line| {
            let (mut in_string, mut escaped) = (false, false);
            for (offset, c) in line.char_indices() {
                match c {
                    _ if escaped => escaped = false,
                    '\\' if in_string => escaped = true,
                    '"' => in_string = !in_string,
                    '#' if !in_string => return line[..offset].trim(),
                    _ => {}
                }
            }
            line.trim()
        })
        .filter(|line| !line.is_empty())
        .collect();
    lines.join(" ")
}

/// Where an op's statement lies on its line: its label without the loop counters a label in a
/// loop ends with (`y = x[i] i=5`, which the line does not hold); the whole line, its
/// indentation left out, when the line does not hold it.
fn statement_span(line_text: &str, label: &str) -> grammar::Span {
    let statement = statement_of(label);
    match line_text.find(statement).filter(|_| !statement.is_empty()) {
        Some(start) => grammar::Span::new(start, start + statement.len()),
        None => {
            let start = line_text.len() - line_text.trim_start().len();
            grammar::Span::new(start, line_text.trim_end().len().max(start))
        }
    }
}

/// The file, file line and text of a session-wide line number.
pub(crate) fn locate_line(sources: &[SourceChunk], line: u32) -> Option<(String, u32, String)> {
    let chunk = sources
        .iter()
        .rev()
        .find(|chunk| chunk.first_line <= line && line > 0)?;
    let chunk_line = line - chunk.first_line + 1;
    let text = grammar::LineIndex::new(&chunk.text)
        .line_text(chunk_line as usize)
        .to_string();
    Some((
        chunk.path.clone(),
        chunk_line + chunk.file_first_line - 1,
        text,
    ))
}

/// The failures of one statement, folded into one report (see [`take_failures`]).
struct Folded {
    first: Arc<engine::OpError>,
    /// The first failure's place among the statements of a graph's bulk, when it failed in one.
    position: Option<usize>,
    n_more: u64,
    /// How many of the others had another message than the first's.
    n_other_messages: u64,
    last_other_message: Option<String>,
    /// How many failures of the statement a `print` reported already (not counted above).
    n_reported_above: u64,
}

impl Folded {
    fn add(&mut self, failure: Arc<engine::OpError>) {
        self.n_more += 1;
        if failure.message != self.first.message {
            self.n_other_messages += 1;
            self.last_other_message = Some(failure.message.clone());
        }
    }

    /// The first failure's report, then how many more there were.
    fn report(
        self,
        sources: &[SourceChunk],
        graphs: &HashMap<String, Graph>,
        pushed_within: &PushedWithin,
    ) -> Report {
        let mut report =
            render_statement_error(sources, graphs, pushed_within, &self.first, self.position);
        report.repeats = self.n_more;
        if self.n_more > 0 {
            let times = if self.n_more == 1 { "time" } else { "times" };
            let mut more = format!(
                "it failed so {} more {times} at this statement",
                self.n_more
            );
            if let Some(last) = &self.last_other_message {
                let n_other = self.n_other_messages;
                // In the form of `message`: the statement, then the message.
                let last_message = format!("`{}`: {last}", self.first.label);
                report.other_messages = Some((n_other, last_message));
                let (them, message) = match n_other {
                    1 => ("that time", "another message"),
                    _ if n_other == self.n_more => ("every time", "other messages"),
                    _ => ("", "other messages"),
                };
                more = match them {
                    "" => format!("{more}, {n_other} of them with {message} (the last: {last})"),
                    them => format!("{more}, {them} with {message} (the last: {last})"),
                };
            }
            report.rendered = format!("{}\n  = {more}", report.rendered.trim_end());
        }
        if self.n_reported_above > 0 {
            let failures = match self.n_reported_above {
                1 => "1 other failure of this statement was".to_string(),
                n => format!("{n} other failures of this statement were"),
            };
            report.rendered = format!(
                "{}\n  = {failures} reported above",
                report.rendered.trim_end()
            );
        }
        report
    }
}

/// A label's statement, without the iteration an observed loop's op adds to it (` i=5 j=2`,
/// see `labels::with_iteration`) nor the peer a message's label names (`z = recv(0, 3) ← r0`).
fn statement_of(label: &str) -> &str {
    label_parts(label).0
}

/// A label's statement (see [`statement_of`]) and the iteration it ends with (`i=5 j=2`, or
/// empty).
fn label_parts(label: &str) -> (&str, &str) {
    let mut statement = label;
    while let Some((head, tail)) = statement.rsplit_once(' ') {
        let is_counter = tail.split_once('=').is_some_and(|(name, value)| {
            !name.is_empty()
                && name.chars().all(|c| c.is_alphanumeric() || c == '_')
                && value.trim_start_matches('-').parse::<u64>().is_ok()
        });
        if !is_counter {
            break;
        }
        statement = head;
    }
    let iteration = label[statement.len()..].trim();
    for mark in [dep_views::ranks::SEND_MARK, dep_views::ranks::RECV_MARK] {
        if let Some((head, peer)) = statement.rsplit_once(mark) {
            if peer.parse::<u32>().is_ok() {
                return (head, iteration);
            }
        }
    }
    (statement, iteration)
}

/// Reports the failures `engine` saw that are not in `reported` (already reported by a `print`
/// or `wait`), without waiting, and errors of the GPUs opened so far that no op could report (a
/// failed stream-ordered free); empties `reported`.
pub(crate) fn take_failures(
    engine: &engine::Engine,
    reported: &mut Vec<Arc<engine::OpError>>,
    sources: &[SourceChunk],
    graphs: &HashMap<String, Graph>,
    pushed_within: &PushedWithin,
) -> Result<(), RunError> {
    let failures = engine.take_failures();
    let n_not_kept = engine.take_n_failures_not_kept();
    let distinct = fold_by_statement(failures, reported, graphs);
    let mut reports: Vec<Report> = distinct
        .into_iter()
        .map(|folded| folded.report(sources, graphs, pushed_within))
        .collect();
    if n_not_kept > 0 {
        reports.push(Report::unplaced(format!(
            "{n_not_kept} more ops failed after the first {}, not kept (their statements as above, or others)",
            engine::MAX_KEPT_FAILURES
        )));
    }
    reports.extend(
        crate::gpu::take_deferred_errors()
            .into_iter()
            .map(Report::unplaced),
    );
    reported.clear();
    if reports.is_empty() {
        Ok(())
    } else {
        Err(RunError {
            kind: ErrorKind::Runtime,
            reports,
        })
    }
}

/// For a failed bulk of one of `graphs`' ops, the failure of the statement in it that failed.
/// With its place among the bulk's statements.
fn failed_statement(
    graphs: &HashMap<String, Graph>,
    failure: &engine::OpError,
) -> Option<(engine::OpError, usize)> {
    let step = graphs
        .values()
        .find_map(|graph| graph.failed_step(failure))?;
    let error = engine::OpError {
        op: failure.op,
        label: step.label,
        line: step.line,
        message: step.message,
        cancelled: false,
    };
    Some((error, step.position))
}

/// `failure` as its statement failed: for a bulk of one of `graphs`' ops, the failure of the
/// statement in it that failed.
/// With its place among the bulk's statements.
fn as_statement(
    graphs: &HashMap<String, Graph>,
    failure: Arc<engine::OpError>,
) -> (Arc<engine::OpError>, Option<usize>) {
    match failed_statement(graphs, &failure) {
        Some((statement, position)) => (Arc::new(statement), Some(position)),
        None => (failure, None),
    }
}

/// The statement of a failure, as failures are folded: its line and its label without an
/// observed loop's counters.
fn statement_key(failure: &engine::OpError) -> (u32, String) {
    (failure.line, statement_of(&failure.label).to_string())
}

/// `failures` folded by statement (a loop's, each iteration's op labelled with its counters
/// when observed; a graph's statement, replayed alone or in bulks): each statement's are
/// reported once, with how many more there were and, where their messages differ (other shapes
/// each iteration), how many of those and the last. Those in `reported` (reported by a `print`
/// already) are not reported again, only counted at their statement's report, if it has one.
fn fold_by_statement(
    failures: Vec<Arc<engine::OpError>>,
    reported: &[Arc<engine::OpError>],
    graphs: &HashMap<String, Graph>,
) -> Vec<Folded> {
    let mut distinct: Vec<Folded> = Vec::new();
    let mut index_of: HashMap<(u32, String), usize> = HashMap::default();
    let mut reported_at: HashMap<(u32, String), u64> = HashMap::default();
    for failure in failures {
        if reported
            .iter()
            .any(|reported| Arc::ptr_eq(reported, &failure))
        {
            *reported_at
                .entry(statement_key(&as_statement(graphs, failure).0))
                .or_default() += 1;
            continue;
        }
        let (failure, position) = as_statement(graphs, failure);
        let key = statement_key(&failure);
        match index_of.get(&key) {
            Some(&index) => distinct[index].add(failure),
            None => {
                index_of.insert(key, distinct.len());
                distinct.push(Folded {
                    first: failure,
                    position,
                    n_more: 0,
                    n_other_messages: 0,
                    last_other_message: None,
                    n_reported_above: 0,
                });
            }
        }
    }
    for (key, n_reported) in reported_at {
        if let Some(&index) = index_of.get(&key) {
            distinct[index].n_reported_above = n_reported;
        }
    }
    distinct
}

#[cfg(test)]
mod tests {
    #[test]
    fn labels_leave_comments_out_but_not_a_hash_in_a_string() {
        use super::one_line_without_comments as label;
        assert_eq!(label("x = ones(2)   # a comment"), "x = ones(2)");
        assert_eq!(label("print \"a # b\", x  # why"), "print \"a # b\", x");
        assert_eq!(label("print \"a \\\" # b\"  # why"), "print \"a \\\" # b\"");
        assert_eq!(label("y = f(a,  # first\n      b)"), "y = f(a, b)");
        assert_eq!(label("B = (A +\n\n  # the one\n  1)"), "B = (A + 1)");
    }

    use super::statement_span;

    /// An op's statement is found on its line without the loop counters its label ends with;
    /// a label the line does not hold at all marks the line's statement text.
    #[test]
    fn a_statement_is_found_on_its_line_without_its_counters() {
        let line = "for i in 5..6 { y = x[i] }";
        let span = statement_span(line, "y = x[i] i=5");
        assert_eq!(&line[span.start..span.end], "y = x[i]");
        let span = statement_span(line, "y = x[0:i] + ones(3) i=5 j=1");
        assert_eq!(&line[span.start..span.end], "for i in 5..6 { y = x[i] }");
        let line = "for i in 0..2 { for j in 0..2 { a = b + f(i, j) } }";
        let span = statement_span(line, "a = b + f(i, j) i=1 j=0");
        assert_eq!(&line[span.start..span.end], "a = b + f(i, j)");
        let span = statement_span("  A = B + 1", "A = B + 1");
        assert_eq!(span.start, 2);
        // A message's label names its peer: the statement is found without it (its report
        // underlined the whole `with` line).
        let line = "with rank = 1 { z = recv(0, 3) }";
        for label in ["z = recv(0, 3) ← r0", "z = recv(0, 3) ← r0 i=4"] {
            let span = statement_span(line, label);
            assert_eq!(&line[span.start..span.end], "z = recv(0, 3)", "{label}");
        }
        assert_eq!(
            super::label_parts("send(x, 1) → r1 i=2"),
            ("send(x, 1)", "i=2")
        );
        let span = statement_span("  z = f(q)  ", "nothing here");
        assert_eq!((span.start, span.end), (2, 10));
    }
}
