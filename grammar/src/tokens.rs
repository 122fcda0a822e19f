//! A small hand-written lexer that classifies every piece of a source text
//! (keyword, name, number, string, operator, punctuation, comment, newline or
//! unknown character). It is used by REPL highlighters through [`tokens`],
//! and inside the crate to split a file into statements and to decide
//! whether an input is complete. It never fails and never panics.

use crate::span::Span;

/// The reserved words of the language; none of them can be used as a name.
/// `priority` is also accepted as the key of a `with priority = ...` setting.
pub const KEYWORDS: &[&str] = &[
    "del", "print", "seed", "wait", "for", "in", "def", "return", "with", "graph", "run", "device",
    "priority", "auto",
];

/// Whether `word` is one of the [`KEYWORDS`].
pub fn is_keyword(word: &str) -> bool {
    KEYWORDS.contains(&word)
}

/// The class of a [`Token`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// One of the [`KEYWORDS`].
    Keyword,
    /// An identifier that is not a keyword.
    Name,
    /// A number literal such as `2`, `.5` or `1e-3`.
    Number,
    /// A string literal, quotes included (possibly unterminated).
    String,
    /// An operator: `+ - * / ** @ < <= > >= == != = += -= *= /= ..`.
    Operator,
    /// Punctuation: `( ) [ ] { } , ; :`.
    Punctuation,
    /// A `#` comment, up to (not including) the end of the line.
    Comment,
    /// A line feed, which ends a statement outside brackets.
    Newline,
    /// A character that the language does not use.
    Unknown,
}

/// One classified piece of source text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Token {
    /// Where the token lies in the source.
    pub span: Span,
    /// What kind of token it is.
    pub kind: TokenKind,
}

/// Splits `source` into classified tokens, skipping spaces, tabs and
/// carriage returns. Every other byte of the source is covered by exactly
/// one token. Never panics, whatever the input.
pub fn tokens(source: &str) -> Vec<Token> {
    Lexer::new(source).collect()
}

/// Operators of two chars, tried before the one-char operators.
const TWO_CHAR_OPERATORS: &[&str] = &["**", "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", ".."];

/// Operators of one char.
const ONE_CHAR_OPERATORS: &[char] = &['+', '-', '*', '/', '@', '<', '>', '='];

/// Punctuation chars.
const PUNCTUATION: &[char] = &['(', ')', '[', ']', '{', '}', ',', ';', ':'];

/// The byte order mark some editors write at the start of a UTF-8 file.
pub(crate) const BYTE_ORDER_MARK: char = '\u{feff}';

/// The tokens of a source one at a time, so that a long source is never
/// held as a vector of tokens. A byte order mark at the very start is
/// skipped like white space.
pub(crate) struct Lexer<'source> {
    source: &'source str,
    position: usize,
    /// The start of an unterminated string literal, once it was lexed.
    pub(crate) unterminated_string_start: Option<usize>,
}

impl<'source> Lexer<'source> {
    /// A lexer at the start of `source`.
    pub(crate) fn new(source: &'source str) -> Lexer<'source> {
        Lexer {
            source,
            position: 0,
            unterminated_string_start: None,
        }
    }
}

impl Iterator for Lexer<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        loop {
            let position = self.position;
            let rest = self.source.get(position..)?;
            let first_char = rest.chars().next()?;
            let (length, kind) = match first_char {
                ' ' | '\t' | '\r' => {
                    self.position += 1;
                    continue;
                }
                BYTE_ORDER_MARK if position == 0 => {
                    self.position += BYTE_ORDER_MARK.len_utf8();
                    continue;
                }
                '\n' => (1, TokenKind::Newline),
                '#' => (rest.find('\n').unwrap_or(rest.len()), TokenKind::Comment),
                '"' => {
                    let (length, terminated) = string_length(rest);
                    if !terminated {
                        self.unterminated_string_start = Some(position);
                    }
                    (length, TokenKind::String)
                }
                character if character.is_ascii_digit() => (number_length(rest), TokenKind::Number),
                '.' if rest.as_bytes().get(1).is_some_and(u8::is_ascii_digit) => {
                    (number_length(rest), TokenKind::Number)
                }
                character if character.is_ascii_alphabetic() || character == '_' => {
                    let length = rest
                        .find(|character: char| {
                            !(character.is_ascii_alphanumeric() || character == '_')
                        })
                        .unwrap_or(rest.len());
                    let word = rest.get(..length).unwrap_or("");
                    let kind = if is_keyword(word) {
                        TokenKind::Keyword
                    } else {
                        TokenKind::Name
                    };
                    (length, kind)
                }
                character => {
                    if TWO_CHAR_OPERATORS
                        .iter()
                        .any(|operator| rest.starts_with(operator))
                    {
                        (2, TokenKind::Operator)
                    } else if ONE_CHAR_OPERATORS.contains(&character) {
                        (1, TokenKind::Operator)
                    } else if PUNCTUATION.contains(&character) {
                        (1, TokenKind::Punctuation)
                    } else {
                        (character.len_utf8(), TokenKind::Unknown)
                    }
                }
            };
            self.position += length.max(1);
            return Some(Token {
                span: Span::new(position, position + length),
                kind,
            });
        }
    }
}

/// The byte length of the string literal at the start of `rest` (which
/// starts with `"`), and whether its closing quote was found. A backslash
/// escapes the next char; strings may span lines.
fn string_length(rest: &str) -> (usize, bool) {
    let mut escaped = false;
    for (offset, character) in rest.char_indices().skip(1) {
        if escaped {
            escaped = false;
        } else if character == '\\' {
            escaped = true;
        } else if character == '"' {
            return (offset + 1, true);
        }
    }
    (rest.len(), false)
}

/// The byte length of the number literal at the start of `rest`, following
/// the grammar's `number` rule: `12`, `1.5`, `1.`, `.5`, `1e-3`; the dot is
/// not taken when a second dot follows (as in `0..10`).
fn number_length(rest: &str) -> usize {
    let bytes = rest.as_bytes();
    let is_digit_at = |index: usize| bytes.get(index).is_some_and(u8::is_ascii_digit);
    let mut length = 0;
    while is_digit_at(length) {
        length += 1;
    }
    if bytes.get(length) == Some(&b'.') && bytes.get(length + 1) != Some(&b'.') {
        length += 1;
        while is_digit_at(length) {
            length += 1;
        }
    }
    if matches!(bytes.get(length), Some(b'e' | b'E')) {
        let mut exponent_end = length + 1;
        if matches!(bytes.get(exponent_end), Some(b'+' | b'-')) {
            exponent_end += 1;
        }
        if is_digit_at(exponent_end) {
            while is_digit_at(exponent_end) {
                exponent_end += 1;
            }
            length = exponent_end;
        }
    }
    length
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::{expect, Expect};

    fn check(source: &str, expected: Expect) {
        let rendered: Vec<String> = tokens(source)
            .iter()
            .map(|token| format!("{:?} {:?}", token.kind, token.span.text(source)))
            .collect();
        expected.assert_eq(&rendered.join("\n"));
    }

    #[test]
    fn classifies_every_kind_of_token() {
        check(
            "for i in 0..10 { x = .5e-3 ** y[1:] } # done\nprint \"a\\\"b\", $",
            expect![[r##"
                Keyword "for"
                Name "i"
                Keyword "in"
                Number "0"
                Operator ".."
                Number "10"
                Punctuation "{"
                Name "x"
                Operator "="
                Number ".5e-3"
                Operator "**"
                Name "y"
                Punctuation "["
                Number "1"
                Punctuation ":"
                Punctuation "]"
                Punctuation "}"
                Comment "# done"
                Newline "\n"
                Keyword "print"
                String "\"a\\\"b\""
                Punctuation ","
                Unknown "$""##]],
        );
    }

    #[test]
    fn unterminated_strings_run_to_the_end() {
        let mut lexer = Lexer::new("print \"ab\nc");
        assert_eq!(lexer.by_ref().count(), 2);
        assert_eq!(lexer.unterminated_string_start, Some(6));
        check(
            "x = 1e",
            expect![[r#"
            Name "x"
            Operator "="
            Number "1"
            Name "e""#]],
        );
    }

    #[test]
    fn non_ascii_characters_are_unknown_tokens() {
        check(
            "é+ü",
            expect![[r#"
            Unknown "é"
            Operator "+"
            Unknown "ü""#]],
        );
    }
}
