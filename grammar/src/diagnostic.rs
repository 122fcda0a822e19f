//! Syntax errors with a source span, and their rendering as
//! `file:line:col` reports that quote the source line and put a caret
//! under the offending place.

use unicode_width::UnicodeWidthChar;

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
        let line_length_in_chars = line_text.chars().count();
        let caret_end_column = if end.line == start.line {
            end.column
        } else {
            line_length_in_chars + 1
        };
        let quoted = QuotedLine::new(
            line_text,
            line_length_in_chars,
            start.column - 1,
            caret_end_column.saturating_sub(1),
        );
        let mut rendered = format!(
            "error: {message}\n{gutter}--> {path}:{line_number}:{column}\n{gutter} |\n{line_number} | {text}\n{gutter} | {padding}{carets}",
            column = start.column,
            message = shorten_quotes(&self.message),
            text = quoted.text,
            padding = quoted.padding,
            carets = "^".repeat(quoted.caret_count),
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

/// The most chars of a source line quoted in a report: a longer line is cut
/// to a window around the caret, with `...` where it was cut.
const MAX_QUOTED_CHARS: usize = 100;

/// How many chars before the caret a cut line keeps.
const CONTEXT_BEFORE_CARET: usize = 40;

/// The ellipsis that marks where a quoted line was cut.
const ELLIPSIS: &str = "...";

/// A source line as quoted in a report: cut to a window around the caret,
/// invisible characters made visible, with the padding and caret count that
/// put the carets under the span.
struct QuotedLine {
    text: String,
    padding: String,
    caret_count: usize,
}

impl QuotedLine {
    /// Quotes `line` (`length` chars long) with carets under its chars
    /// `caret_start..caret_end` (0-based, at least one caret).
    fn new(line: &str, length: usize, caret_start: usize, caret_end: usize) -> QuotedLine {
        let caret_start = caret_start.min(length);
        let (window_start, window_end) = if length <= MAX_QUOTED_CHARS {
            (0, length)
        } else {
            let window_start = caret_start
                .saturating_sub(CONTEXT_BEFORE_CARET)
                .min(length - MAX_QUOTED_CHARS);
            (window_start, window_start + MAX_QUOTED_CHARS)
        };
        let cut_before = if window_start > 0 { ELLIPSIS } else { "" };
        let cut_after = if window_end < length { ELLIPSIS } else { "" };
        let visible_caret_end = caret_end.min(window_end.max(caret_start + 1));
        let mut text = String::from(cut_before);
        // Keep tabs in the padding so that the caret lines up with the text; a wide character
        // (`日`) takes two columns of padding or carets, as the terminal draws it.
        let mut padding = " ".repeat(cut_before.len());
        let mut caret_count = 0;
        for (index, character) in line
            .chars()
            .enumerate()
            .skip(window_start)
            .take(window_end - window_start)
        {
            let shown = visible(character);
            text.push(shown);
            let columns = if character == '\t' {
                1
            } else {
                shown.width().unwrap_or(1)
            };
            if index < caret_start {
                match character {
                    '\t' => padding.push('\t'),
                    _ => padding.extend(std::iter::repeat_n(' ', columns)),
                }
            } else if index < visible_caret_end {
                caret_count += columns;
            }
        }
        text.push_str(cut_after);
        QuotedLine {
            text,
            padding,
            caret_count: caret_count.max(1),
        }
    }
}

/// The most chars of a quote (between `` ` `` or `"`) kept in a headline.
const MAX_QUOTE_CHARS: usize = 40;

/// The most chars of a headline: a longer message is cut there with `...`, so the messages dep
/// writes itself stay under it.
pub const MAX_HEADLINE_CHARS: usize = 400;

/// `message` with every quote longer than [`MAX_QUOTE_CHARS`] (a huge name or string echoed
/// from the source) cut with `...`, and the whole cut to [`MAX_HEADLINE_CHARS`], so that a
/// headline stays one readable line.
fn shorten_quotes(message: &str) -> String {
    let mut shortened = String::with_capacity(message.len().min(MAX_HEADLINE_CHARS + 8));
    let mut quote: Option<(char, String)> = None;
    let flush = |shortened: &mut String, delimiter: char, inner: &str, closed: bool| {
        shortened.push(delimiter);
        if inner.chars().count() > MAX_QUOTE_CHARS {
            shortened.extend(inner.chars().take(MAX_QUOTE_CHARS - ELLIPSIS.len()));
            shortened.push_str(ELLIPSIS);
        } else {
            shortened.push_str(inner);
        }
        if closed {
            shortened.push(delimiter);
        }
    };
    let mut escaped = false;
    for character in message.chars() {
        match &mut quote {
            Some((delimiter, inner)) => {
                if character == *delimiter && !escaped {
                    let delimiter = *delimiter;
                    flush(&mut shortened, delimiter, inner, true);
                    quote = None;
                } else {
                    escaped = character == '\\' && !escaped && *delimiter == '"';
                    inner.push(character);
                }
            }
            None if character == '`' || character == '"' => {
                quote = Some((character, String::new()));
                escaped = false;
            }
            None => shortened.push(character),
        }
    }
    if let Some((delimiter, inner)) = quote {
        flush(&mut shortened, delimiter, &inner, false);
    }
    if shortened.chars().count() > MAX_HEADLINE_CHARS {
        shortened = shortened.chars().take(MAX_HEADLINE_CHARS).collect();
        shortened.push_str(ELLIPSIS);
    }
    shortened
}

/// Whether `character` shows nothing, or nothing recognisable, in a
/// terminal: control characters, white space other than ` ` and tabs,
/// zero-width and direction marks, the byte order mark.
fn is_invisible(character: char) -> bool {
    (character.is_control() && character != '\t')
        || (character.is_whitespace() && !matches!(character, ' ' | '\t'))
        || matches!(
            character,
            '\u{ad}'
                | '\u{34f}'
                | '\u{61c}'
                | '\u{115f}'..='\u{1160}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{206f}'
                | '\u{3164}'
                | '\u{feff}'
                | '\u{ffa0}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{e0000}'..='\u{e0fff}'
        )
}

/// The char shown for `character` in a quoted source line: itself, or for
/// an invisible one its control picture (`␀` for NUL) or `�`, one column
/// wide either way so that carets stay aligned.
fn visible(character: char) -> char {
    match character {
        '\0'..='\u{1f}' if character != '\t' => {
            char::from_u32(0x2400 + character as u32).unwrap_or(char::REPLACEMENT_CHARACTER)
        }
        '\u{7f}' => '\u{2421}',
        _ if is_invisible(character) => char::REPLACEMENT_CHARACTER,
        _ => character,
    }
}

/// How `character` is named in a message: quoted when it can be seen
/// (`` `$` ``), by its code point when it cannot (`NUL`, `U+0007`,
/// `U+FEFF (a byte order mark)`), so that a message never quotes something
/// invisible.
pub(crate) fn describe_char(character: char) -> String {
    match character {
        '\0' => "NUL".to_string(),
        '\u{feff}' => "U+FEFF (a byte order mark)".to_string(),
        '\u{a0}' => "U+00A0 (a no-break space)".to_string(),
        '\u{200b}' => "U+200B (a zero-width space)".to_string(),
        char::REPLACEMENT_CHARACTER => "U+FFFD (a replacement character)".to_string(),
        _ if is_invisible(character) => format!("U+{:04X}", character as u32),
        _ => format!("`{character}`"),
    }
}

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

    /// A wide character takes two columns on a terminal: the padding before a caret and the
    /// carets under one count them so.
    #[test]
    fn carets_line_up_after_and_under_wide_characters() {
        let source = "b = \"日本日本\" + zz";
        let diagnostic = Diagnostic::new("unknown name `zz`", Span::new(21, 23), "not defined");
        expect![[r#"
            error: unknown name `zz`
             --> f.dep:1:14
              |
            1 | b = "日本日本" + zz
              |                  ^^ not defined
        "#]]
        .assert_eq(&diagnostic.render("f.dep", source));
        let source = "x = \"日本\" + 1";
        let diagnostic = Diagnostic::new("not a tensor", Span::new(4, 12), "");
        expect![[r#"
            error: not a tensor
             --> f.dep:1:5
              |
            1 | x = "日本" + 1
              |     ^^^^^^
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
    fn long_lines_are_cut_to_a_window_around_the_caret() {
        let source = format!("x = {}$ + {}", "a + ".repeat(100), "b + ".repeat(100));
        let at = source.find('$').unwrap();
        let diagnostic = Diagnostic::new("unexpected character `$`", Span::new(at, at + 1), "l");
        expect![[r#"
            error: unexpected character `$`
             --> f.dep:1:405
              |
            1 | ...a + a + a + a + a + a + a + a + a + a + $ + b + b + b + b + b + b + b + b + b + b + b + b + b + b + ...
              |                                            ^ l
        "#]]
        .assert_eq(&diagnostic.render("f.dep", &source));
    }

    #[test]
    fn windows_stay_inside_the_line_at_both_ends() {
        let source = format!("${}\n{}$", "+".repeat(300), "-".repeat(300));
        let first = Diagnostic::new("m", Span::new(0, 1), "");
        expect![[r#"
            error: m
             --> f.dep:1:1
              |
            1 | $+++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++...
              | ^
        "#]]
        .assert_eq(&first.render("f.dep", &source));
        let end = source.len();
        let last = Diagnostic::new("m", Span::new(end, end), "");
        expect![[r#"
            error: m
             --> f.dep:2:302
              |
            2 | ...---------------------------------------------------------------------------------------------------$
              |                                                                                                        ^
        "#]]
        .assert_eq(&last.render("f.dep", &source));
    }

    #[test]
    fn carets_of_a_long_span_stop_at_the_window() {
        let source = "y".repeat(1000);
        let diagnostic = Diagnostic::new("m", Span::new(10, 1000), "");
        let rendered = diagnostic.render("f.dep", &source);
        let caret_line = rendered.lines().last().unwrap();
        assert_eq!(caret_line.matches('^').count(), 90, "{rendered}");
        assert!(rendered.lines().nth(3).unwrap().ends_with("y..."));
    }

    #[test]
    fn long_quotes_in_headlines_are_cut() {
        let name = "n".repeat(100_000);
        let message = format!("unknown name `{name}` (did you mean `ones`?)");
        let headline = shorten_quotes(&message);
        assert_eq!(
            headline,
            format!(
                "unknown name `{}...` (did you mean `ones`?)",
                "n".repeat(37)
            )
        );
        let text = format!("the string {:?} is not a tensor", "a\"b".repeat(50));
        let headline = shorten_quotes(&text);
        assert!(headline.ends_with("...\" is not a tensor"), "{headline}");
        assert_eq!(shorten_quotes("short `a` and \"b\""), "short `a` and \"b\"");
        assert_eq!(shorten_quotes(&"x".repeat(500)).len(), 403);
        let rendered = Diagnostic::new(message, Span::new(0, 1), "").render("f.dep", "x");
        assert!(rendered.len() < 200, "{rendered}");
    }

    #[test]
    fn characters_are_named_so_that_the_name_can_be_seen() {
        assert_eq!(describe_char('$'), "`$`");
        assert_eq!(describe_char('é'), "`é`");
        assert_eq!(describe_char('\0'), "NUL");
        assert_eq!(describe_char('\u{7}'), "U+0007");
        assert_eq!(describe_char('\u{7f}'), "U+007F");
        assert_eq!(describe_char('\u{feff}'), "U+FEFF (a byte order mark)");
        assert_eq!(describe_char('\u{202e}'), "U+202E");
        assert_eq!(describe_char('\u{3000}'), "U+3000");
        assert_eq!(describe_char('\u{e0001}'), "U+E0001");
    }

    #[test]
    fn alternatives_are_joined_with_commas_and_or() {
        let words = |list: &[&str]| list.iter().map(|word| word.to_string()).collect::<Vec<_>>();
        assert_eq!(join_alternatives(&words(&[])), "");
        assert_eq!(join_alternatives(&words(&["a"])), "a");
        assert_eq!(join_alternatives(&words(&["a", "b", "c"])), "a, b or c");
    }
}
