//! Splits a source text into top-level statement chunks, so that each
//! statement can be parsed on its own and every syntax error of a file is
//! reported at once. A chunk ends at a newline or `;` outside any bracket.
//! A newline right after a binary operator or `,` continues the statement
//! (the same rule [`crate::is_complete`] uses), and newlines inside `(...)`
//! or `[...]` are plain white space.
//!
//! The splitter also builds a "cleaned" copy of the source of exactly the
//! same byte length, in which comments and non-separating newlines are
//! blanked to spaces, so that byte offsets in the cleaned text are byte
//! offsets in the original. Lexical problems (unknown characters,
//! unterminated strings, unbalanced brackets) are found here.

use crate::diagnostic::{describe_char, Diagnostic};
use crate::span::Span;
use crate::tokens::{Lexer, TokenKind, BYTE_ORDER_MARK};

/// The deepest bracket nesting accepted; deeper input is reported as an
/// error (this keeps the recursive parser far from the end of the stack).
pub(crate) const MAX_BRACKET_DEPTH: usize = 32;

/// The most tokens one top-level statement may have. A longer one is
/// reported here, before the parser runs, so that a huge one-line file
/// fails in time and memory proportional to its size only.
pub(crate) const MAX_STATEMENT_TOKENS: usize = 100_000;

/// One top-level statement's worth of source.
pub(crate) struct Chunk {
    /// From the chunk's first token to its last one (comments excluded).
    pub(crate) span: Span,
    /// The source text of `span`, with comments and newlines that do not end
    /// the statement blanked to spaces: what the parser reads.
    pub(crate) text: String,
    /// The first lexical problem found in the chunk, if any.
    pub(crate) problem: Option<Diagnostic>,
    /// The operators and commas at the end of a line that made the
    /// statement go on to the next line, in order.
    pub(crate) continued_after: Vec<Span>,
}

/// Whether the operator or punctuation `text` makes a newline right after
/// it continue the statement: binary operators and `,`.
pub(crate) fn continues_statement(text: &str) -> bool {
    matches!(
        text,
        "+" | "-" | "*" | "/" | "**" | "@" | "<" | "<=" | ">" | ">=" | "==" | "!=" | ","
    )
}

/// The closing bracket for an opening one.
pub(crate) fn closing_bracket_for(opening: char) -> char {
    match opening {
        '(' => ')',
        '[' => ']',
        _ => '}',
    }
}

/// A chunk under construction.
#[derive(Default)]
struct ChunkBuilder {
    span: Option<Span>,
    problem: Option<Diagnostic>,
    continued_after: Vec<Span>,
    /// Comments and non-separating newlines inside the chunk, blanked in its text.
    blanks: Vec<Span>,
    token_count: usize,
}

impl ChunkBuilder {
    fn include(&mut self, span: Span) {
        self.span = Some(self.span.map_or(span, |current| current.join(span)));
        self.token_count += 1;
        if self.token_count == MAX_STATEMENT_TOKENS + 1 {
            self.report(Diagnostic::new(
                "statement is too long",
                span,
                format!(
                    "more than {MAX_STATEMENT_TOKENS} tokens in one statement; split it into several statements"
                ),
            ));
        }
    }

    fn report(&mut self, problem: Diagnostic) {
        if self.problem.is_none() {
            self.problem = Some(problem);
        }
    }

    /// The finished chunk of `source`, if it has any token; the builder is
    /// left empty for the next one.
    fn finish(&mut self, source: &str) -> Option<Chunk> {
        let finished = std::mem::take(self);
        let span = finished.span?;
        let mut text = span.text(source).to_string();
        for blank in finished.blanks {
            // Comments before the chunk's first token or after its last one lie
            // outside it.
            if span.start <= blank.start && blank.end <= span.end {
                let relative = blank.shifted_back(span.start);
                text.replace_range(relative.start..relative.end, &" ".repeat(blank.len()));
            }
        }
        Some(Chunk {
            span,
            text,
            problem: finished.problem,
            continued_after: finished.continued_after,
        })
    }
}

/// Splits a source into chunks, one at a time, so that a caller can stop
/// early and a huge source is never held as a list of chunks; see the
/// module documentation.
pub(crate) struct Chunker<'source> {
    source: &'source str,
    lexer: Lexer<'source>,
    current: ChunkBuilder,
    open_brackets: Vec<(char, Span)>,
    previous_continues: bool,
    previous_span: Span,
    done: bool,
}

impl<'source> Chunker<'source> {
    /// A chunker at the start of `source`.
    pub(crate) fn new(source: &'source str) -> Chunker<'source> {
        Chunker {
            source,
            lexer: Lexer::new(source),
            current: ChunkBuilder::default(),
            open_brackets: Vec::new(),
            previous_continues: false,
            previous_span: Span::default(),
            done: false,
        }
    }

    /// Whether the source ends inside a bracket or string, or right after a
    /// token that continues the statement on the next line. Meaningful once
    /// every chunk was taken.
    pub(crate) fn ends_incomplete(&self) -> bool {
        self.previous_continues
            || !self.open_brackets.is_empty()
            || self.lexer.unterminated_string_start.is_some()
    }

    /// Takes in one token; returns the chunk it ends, if it ends one.
    fn take(&mut self, token: crate::tokens::Token) -> Option<Chunk> {
        let source = self.source;
        let text = token.span.text(source);
        let current = &mut self.current;
        match token.kind {
            TokenKind::Comment => {
                if let Some(problem) = text_direction_control(text, token.span, "a comment") {
                    // A comment on a line of its own is a chunk of its own, to report it.
                    current.include(token.span);
                    current.report(problem);
                } else if current.span.is_some() {
                    current.blanks.push(token.span);
                }
            }
            TokenKind::Newline => {
                let innermost = self.open_brackets.last().map(|(opening, _)| *opening);
                if matches!(innermost, Some('(' | '[')) {
                    current.blanks.push(token.span);
                } else if self.previous_continues {
                    current.blanks.push(token.span);
                    if current.continued_after.last() != Some(&self.previous_span) {
                        current.continued_after.push(self.previous_span);
                    }
                } else if innermost.is_none() {
                    return current.finish(source);
                }
            }
            _ if text == ";" && self.open_brackets.is_empty() => {
                self.previous_continues = false;
                return current.finish(source);
            }
            kind => {
                current.include(token.span);
                self.previous_span = token.span;
                self.previous_continues =
                    matches!(kind, TokenKind::Operator | TokenKind::Punctuation)
                        && continues_statement(text);
                match kind {
                    TokenKind::Unknown => match attribute_access(source, token.span) {
                        Some(AttributeAccess::Reported) => {}
                        Some(AttributeAccess::New(problem)) => current.report(problem),
                        None => current.report(unknown_character(text, token.span)),
                    },
                    TokenKind::String => {
                        if let Some(problem) = text_direction_control(text, token.span, "a string")
                        {
                            current.report(problem);
                        }
                        if self.lexer.unterminated_string_start == Some(token.span.start) {
                            current.report(Diagnostic::new(
                                "unterminated string",
                                Span::new(token.span.start, token.span.start + 1),
                                "this string is never closed with `\"`",
                            ))
                        }
                    }
                    _ => {}
                }
                match text {
                    "(" | "[" | "{" => {
                        self.open_brackets
                            .push((text.chars().next().unwrap_or('('), token.span));
                        if self.open_brackets.len() == MAX_BRACKET_DEPTH + 1 {
                            current.report(Diagnostic::new(
                                "brackets are nested too deeply",
                                token.span,
                                format!("more than {MAX_BRACKET_DEPTH} nested brackets"),
                            ));
                        }
                    }
                    ")" | "]" | "}" => {
                        close_bracket(text, token.span, &mut self.open_brackets, current)
                    }
                    _ => {}
                }
            }
        }
        None
    }
}

impl Iterator for Chunker<'_> {
    type Item = Chunk;

    fn next(&mut self) -> Option<Chunk> {
        while let Some(token) = self.lexer.next() {
            if let Some(chunk) = self.take(token) {
                return Some(chunk);
            }
        }
        if self.done {
            return None;
        }
        self.done = true;
        // The outermost bracket still open: where a line was left unfinished, and what
        // opened after it ran into it.
        if let Some((opening, span)) = self.open_brackets.first() {
            self.current.report(unclosed_bracket(*opening, *span));
        }
        self.current.finish(self.source)
    }
}

/// Handles the closing bracket `text` at `span`: it closes the innermost
/// open bracket of its kind, and brackets left open inside that one are
/// reported. A closing bracket of a kind that is not open closes the
/// innermost open bracket (it is reported as mismatched), or is reported as
/// unmatched when no bracket is open.
fn close_bracket(
    text: &str,
    span: Span,
    open_brackets: &mut Vec<(char, Span)>,
    current: &mut ChunkBuilder,
) {
    let matching = open_brackets
        .iter()
        .rposition(|(opening, _)| closing_bracket_for(*opening).to_string() == text);
    match matching {
        Some(index) => {
            if let Some((opening, opening_span)) = open_brackets.last() {
                if index + 1 != open_brackets.len() {
                    current.report(unclosed_bracket(*opening, *opening_span));
                }
            }
            open_brackets.truncate(index);
        }
        None => match open_brackets.pop() {
            Some((opening, _)) => current.report(Diagnostic::new(
                format!("mismatched `{text}`"),
                span,
                format!(
                    "expected `{}` to close the `{opening}` before it",
                    closing_bracket_for(opening)
                ),
            )),
            None => current.report(Diagnostic::new(
                format!("unmatched `{text}`"),
                span,
                "this bracket closes nothing",
            )),
        },
    }
}

/// What a `.` that follows a value is taken for (see [`attribute_access`]).
enum AttributeAccess {
    /// The first `.` of an access (`A.T`, `np.random.randn`): its diagnostic.
    New(Diagnostic),
    /// A later `.` of an access already reported (`.randn` in `np.random.randn`).
    Reported,
}

/// Python's and NumPy's modules always in a user's fingers.
const MODULES: [&str; 8] = ["np", "numpy", "torch", "mx", "nd", "tf", "jnp", "math"];

/// The ends of the file names a script names (`load("x.npy")`, a script, a table):
/// `x.npy` without its quotes, and not called, is a file name, not a method `npy` of `x`.
const FILE_EXTENSIONS: [&str; 6] = ["npy", "npz", "dep", "csv", "txt", "json"];

/// The diagnostic for an attribute, a method or a module's member (`A.T`, `A.shape`,
/// `x.sum()`, `np.ones(3)`), if the `.` at `span` of `source` follows a name, a `)` or a `]`
/// and comes before a name: dep has none of them, and the diagnostic says what to write
/// instead, rather than that `.` is not part of the language.
fn attribute_access(source: &str, span: Span) -> Option<AttributeAccess> {
    let is_name_char = |c: char| c.is_alphanumeric() || c == '_';
    let name_length = |text: &str| -> usize {
        text.chars()
            .take_while(|&c| is_name_char(c))
            .map(char::len_utf8)
            .sum()
    };
    let before = &source[..span.start];
    let owner_length: usize = before
        .chars()
        .rev()
        .take_while(|&c| is_name_char(c))
        .map(char::len_utf8)
        .sum();
    let owner_start = span.start - owner_length;
    let owner = &source[owner_start..span.start];
    let after = &source[span.end..];
    let attribute = &after[..name_length(after)];
    let starts_a_name = |text: &str| text.starts_with(|c: char| c.is_alphabetic() || c == '_');
    if !starts_a_name(attribute) {
        return None;
    }
    if owner.is_empty() {
        if !before.trim_end().ends_with([')', ']']) {
            return None;
        }
    } else if !starts_a_name(owner) {
        return None;
    } else if source[..owner_start].ends_with('.') {
        return Some(AttributeAccess::Reported);
    }
    // The whole chain (`np.random.randn`), and its last name.
    let mut end = span.end + attribute.len();
    let mut last = attribute;
    while let Some(rest) = source[end..].strip_prefix('.') {
        let next = &rest[..name_length(rest)];
        if !starts_a_name(next) {
            break;
        }
        end += 1 + next.len();
        last = next;
    }
    let access = &source[owner_start..end];
    let value = if owner.is_empty() { "x" } else { owner };
    let (message, label) = match (owner, attribute) {
        (owner, _)
            if !owner.is_empty()
                && FILE_EXTENSIONS.contains(&last)
                && !source[end..].trim_start().starts_with('(') =>
        {
            (
            format!("`{access}` is a file name without its quotes"),
            format!("a file name is a string: `\"{access}\"`"),
            )
        }
        (owner, _) if MODULES.contains(&owner) => (
            format!("dep has no modules (`{access}`)"),
            format!("builtins are called by their name alone: `{last}(...)`"),
        ),
        (_, "T") => (
            format!("dep has no attributes (`{access}`)"),
            format!("transpose with `transpose({value})`"),
        ),
        (_, "shape" | "size" | "ndim" | "dtype") => (
            format!("dep has no attributes (`{access}`)"),
            "`print` shows a value; `:vars` in the REPL (`%vars` in a notebook) shows every variable's shape".to_string(),
        ),
        _ => (
            format!("dep has no attributes or methods (`{access}`)"),
            format!("a builtin takes the value as its first argument: `{attribute}({value}, ...)`"),
        ),
    };
    Some(AttributeAccess::New(Diagnostic::new(
        message,
        Span::new(owner_start.min(span.start), end),
        label,
    )))
}

/// The diagnostic for a character the language does not use, `text`, at
/// `span`. It names invisible characters by their code point, so that the
/// message says what the quoted source line cannot show.
fn unknown_character(text: &str, span: Span) -> Diagnostic {
    let character = text.chars().next().unwrap_or(char::REPLACEMENT_CHARACTER);
    let label = match character {
        BYTE_ORDER_MARK => "a byte order mark is only accepted at the very start of a file",
        char::REPLACEMENT_CHARACTER => "this is not valid UTF-8 text, or was not when it was read",
        _ => "this character is not part of the language",
    };
    Diagnostic::new(
        format!("unexpected character {}", describe_char(character)),
        span,
        label,
    )
}

/// The diagnostic for a text-direction control character (U+202A to U+202E, U+2066 to U+2069)
/// in `text`, a comment or a string at `span`: it makes the line read otherwise than it runs
/// (a "Trojan Source" line), so it is refused, as rustc refuses it.
fn text_direction_control(text: &str, span: Span, what: &str) -> Option<Diagnostic> {
    let (offset, character) = text.char_indices().find(
        |(_, character)| matches!(character, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'),
    )?;
    let start = span.start + offset;
    Some(Diagnostic::new(
        format!(
            "{what} holds {}, a text-direction control character",
            describe_char(character)
        ),
        Span::new(start, start + character.len_utf8()),
        "it makes the line read otherwise than it runs: remove it",
    ))
}

/// The diagnostic for an opening bracket that is never closed.
fn unclosed_bracket(opening: char, span: Span) -> Diagnostic {
    Diagnostic::new(
        format!("unclosed `{opening}`"),
        span,
        format!(
            "this `{opening}` is never closed with `{}`",
            closing_bracket_for(opening)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk_texts(source: &str) -> Vec<String> {
        Chunker::new(source)
            .map(|chunk| {
                assert_eq!(chunk.text.len(), chunk.span.len());
                match &chunk.problem {
                    Some(problem) => format!("{} !! {}", chunk.text, problem.message),
                    None => chunk.text,
                }
            })
            .collect()
    }

    #[test]
    fn splits_at_newlines_and_semicolons_outside_brackets() {
        assert_eq!(
            chunk_texts("a = 1; b = 2 # c\n\nf(1,\n 2)\nfor i in x {\n p; q\n}\n"),
            vec!["a = 1", "b = 2", "f(1,  2)", "for i in x {\n p; q\n}"]
        );
    }

    #[test]
    fn a_trailing_operator_or_comma_continues_the_statement() {
        assert_eq!(
            chunk_texts("b = a +  # more\n\n 1\nc, \nd = e"),
            vec!["b = a +           1", "c,  d = e"]
        );
    }

    #[test]
    fn lexical_problems_are_attached_to_their_chunk() {
        assert_eq!(
            chunk_texts("x = $\n}\ny = (1]\nz = \"ab"),
            vec![
                "x = $ !! unexpected character `$`",
                "} !! unmatched `}`",
                "y = (1] !! mismatched `]`",
                "z = \"ab !! unterminated string",
            ]
        );
        assert_eq!(
            chunk_texts("def f() {\n h = g(1\n}\nx = 1"),
            vec!["def f() {\n h = g(1 } !! unclosed `(`", "x = 1"]
        );
    }
}
