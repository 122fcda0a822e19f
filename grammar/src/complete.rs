//! [`is_complete`]: whether an input typed into a REPL or notebook cell is
//! ready to be parsed, or whether another line should be read first.

use crate::chunk::Chunker;

/// Whether `source` is complete. It is not when a `(`, `[` or `{` is left
/// open, when a string literal is unterminated, or when the last token
/// (comments aside) is a binary operator or `,`. [`crate::parse`] reads
/// such input on across the newline, so a REPL can join the lines with
/// `\n` and parse them together. Complete input may still hold errors:
/// `parse` reports them. Never panics.
pub fn is_complete(source: &str) -> bool {
    let mut chunker = Chunker::new(source);
    chunker.by_ref().for_each(drop);
    !chunker.ends_incomplete()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    #[test]
    fn open_brackets_strings_and_trailing_operators_are_incomplete() {
        assert!(!is_complete("def f(x) {"));
        assert!(!is_complete("X = [1,"));
        assert!(!is_complete("print \"ab"));
        assert!(!is_complete("B = A +"));
        assert!(!is_complete("B = A + # more to come\n"));
        assert!(!is_complete("a,"));
        assert!(!is_complete("for i in 0..3 {\n  print i\n"));
        assert!(!is_complete("X = f(1,\n  2"));
    }

    #[test]
    fn finished_input_is_complete_even_when_wrong() {
        assert!(is_complete(""));
        assert!(is_complete("A = 1"));
        assert!(is_complete("}"));
        assert!(is_complete("X = (1]"));
        assert!(is_complete("for i in 0..3 {\n  print i\n}\n"));
        assert!(is_complete("print \"a # b\"  # comment"));
        assert!(is_complete("A = 1 ="));
        assert!(is_complete("$$"));
    }

    #[test]
    fn lines_read_after_incomplete_input_parse_together() {
        let mut input = String::new();
        for line in ["B = A +", "  1", "def f(x) {", "  return x", "}"] {
            if !input.is_empty() {
                input.push('\n');
            }
            input.push_str(line);
        }
        assert!(is_complete(&input));
        let output = parse(&input);
        assert!(output.is_ok(), "{:?}", output.diagnostics);
        assert_eq!(output.program.statements.len(), 2);
    }
}
