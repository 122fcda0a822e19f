//! Syntax errors with a source span, and their rendering as
//! `file:line:col` reports that quote the source line and put a caret
//! under the offending place.

use crate::span::{LineIndex, Span};

/// One syntax error found while parsing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The headline, for example `expected an expression, found end of statement`.
    pub message: String,
    /// Where the error is; it may be empty (a single point).
    pub span: Span,
    /// A short note printed beside the caret, for example `expected an expression`.
    pub label: String,
    /// The things that would have been accepted at `span`, in words users
    /// know (`an expression`, `` `)` ``); empty when not applicable.
    pub expected: Vec<String>,
}

impl Diagnostic {
    /// A diagnostic without a list of expected things.
    pub fn new(message: impl Into<String>, span: Span, label: impl Into<String>) -> Diagnostic {
        Diagnostic {
            message: message.into(),
            span,
            label: label.into(),
            expected: Vec::new(),
        }
    }

    /// Renders the diagnostic for a terminal, for example:
    ///
    /// ```text
    /// error: expected an expression, found end of statement
    ///  --> intro.dep:3:8
    ///   |
    /// 3 | B = A +
    ///   |        ^ expected an expression
    /// ```
    ///
    /// `path` is only printed; `source` is the text that was parsed.
    pub fn render(&self, path: &str, source: &str) -> String {
        self.render_with_index(path, &LineIndex::new(source))
    }

    /// Like [`Diagnostic::render`], reusing a [`LineIndex`] of the source
    /// (cheaper when rendering many diagnostics of one file).
    pub fn render_with_index(&self, path: &str, line_index: &LineIndex<'_>) -> String {
        self.render_from_line(path, line_index, 1)
    }

    /// Like [`Diagnostic::render_with_index`], for a source that starts at line `first_line` of
    /// `path` (a statement read from the middle of a pipe).
    pub fn render_from_line(
        &self,
        path: &str,
        line_index: &LineIndex<'_>,
        first_line: usize,
    ) -> String {
        let start = line_index.line_column(self.span.start);
        let end = line_index.line_column(self.span.end);
        let line_text = line_index.line_text(start.line);
        let file_line = start.line + first_line.max(1) - 1;
        let line_number = file_line.to_string();
        let gutter = " ".repeat(line_number.len());
        // Keep tabs in the padding so that the caret lines up with the text.
        let padding: String = line_text
            .chars()
            .take(start.column - 1)
            .map(|character| if character == '\t' { '\t' } else { ' ' })
            .collect();
        let line_length_in_chars = line_text.chars().count();
        let caret_end_column = if end.line == start.line {
            end.column
        } else {
            line_length_in_chars + 1
        };
        let caret_count = caret_end_column.saturating_sub(start.column).max(1);
        let mut rendered = format!(
            "error: {message}\n{gutter}--> {path}:{line_number}:{column}\n{gutter} |\n{line_number} | {line_text}\n{gutter} | {padding}{carets}",
            column = start.column,
            message = self.message,
            carets = "^".repeat(caret_count),
        );
        if !self.label.is_empty() {
            rendered.push(' ');
            rendered.push_str(&self.label);
        }
        rendered.push('\n');
        rendered
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.message)
    }
}

impl std::error::Error for Diagnostic {}

/// Renders every diagnostic of one source, one after the other, separated
/// by blank lines.
pub fn render_diagnostics(diagnostics: &[Diagnostic], path: &str, source: &str) -> String {
    let line_index = LineIndex::new(source);
    diagnostics
        .iter()
        .map(|diagnostic| diagnostic.render_with_index(path, &line_index))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Joins alternatives the way people write them: `a`, `a or b`,
/// `a, b or c`.
pub(crate) fn join_alternatives(alternatives: &[String]) -> String {
    match alternatives {
        [] => String::new(),
        [only] => only.clone(),
        [first @ .., last] => format!("{} or {}", first.join(", "), last),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    #[test]
    fn renders_header_source_line_and_caret() {
        let source = "A = 1\nB = 2\nB = A +\n";
        let diagnostic = Diagnostic::new(
            "expected an expression, found end of statement",
            Span::new(19, 19),
            "expected an expression",
        );
        expect![[r#"
            error: expected an expression, found end of statement
             --> intro.dep:3:8
              |
            3 | B = A +
              |        ^ expected an expression
        "#]]
        .assert_eq(&diagnostic.render("intro.dep", source));
    }

    #[test]
    fn carets_cover_the_span_and_keep_tabs() {
        let source = "\tx = $$$ + 1";
        let diagnostic = Diagnostic::new("unexpected character `$`", Span::new(5, 8), "");
        expect![[r#"
            error: unexpected character `$`
             --> f.dep:1:6
              |
            1 | 	x = $$$ + 1
              | 	    ^^^
        "#]]
        .assert_eq(&diagnostic.render("f.dep", source));
    }

    #[test]
    fn wide_gutters_and_spans_past_the_end_do_not_panic() {
        let source = "\n".repeat(11) + "x";
        let diagnostic = Diagnostic::new("m", Span::new(11, 999), "l");
        expect![[r#"
            error: m
              --> f.dep:12:1
               |
            12 | x
               | ^ l
        "#]]
        .assert_eq(&diagnostic.render("f.dep", &source));
    }

    #[test]
    fn alternatives_are_joined_with_commas_and_or() {
        let words = |list: &[&str]| list.iter().map(|word| word.to_string()).collect::<Vec<_>>();
        assert_eq!(join_alternatives(&words(&[])), "");
        assert_eq!(join_alternatives(&words(&["a"])), "a");
        assert_eq!(join_alternatives(&words(&["a", "b", "c"])), "a, b or c");
    }
}
