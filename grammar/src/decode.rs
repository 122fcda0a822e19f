//! Source files as bytes: [`decode_source`] turns them into text, or into a
//! diagnostic that names the first byte that is not UTF-8 and its place, so
//! that `dep run` and the REPL's `:load` report a binary or mis-encoded file
//! like any other error in it.

use crate::diagnostic::Diagnostic;
use crate::span::Span;

/// A source file whose bytes are not all UTF-8.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidUtf8 {
    /// The file's text with every invalid sequence replaced by `U+FFFD`: the
    /// text [`InvalidUtf8::diagnostic`] points into.
    pub text: String,
    /// The error, at the first invalid sequence (one `U+FFFD` in `text`).
    pub diagnostic: Diagnostic,
}

impl InvalidUtf8 {
    /// The error rendered as a `path:line:col` report, like a syntax error.
    pub fn render(&self, path: &str) -> String {
        self.diagnostic.render(path, &self.text)
    }
}

impl std::fmt::Display for InvalidUtf8 {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.diagnostic.message)
    }
}

impl std::error::Error for InvalidUtf8 {}

/// Decodes the bytes of a source file as UTF-8. A byte order mark at the
/// start is kept: [`crate::parse`] skips it. Fails with the first invalid
/// sequence, named by its bytes (`byte 0xFF`), at its place.
pub fn decode_source(bytes: Vec<u8>) -> Result<String, InvalidUtf8> {
    let error = match String::from_utf8(bytes) {
        Ok(text) => return Ok(text),
        Err(error) => error,
    };
    let bytes = error.as_bytes();
    let utf8_error = error.utf8_error();
    let start = utf8_error.valid_up_to();
    let length = utf8_error
        .error_len()
        .unwrap_or(bytes.len().saturating_sub(start));
    let invalid = bytes.get(start..start + length).unwrap_or(&[]);
    let named: Vec<String> = invalid.iter().map(|byte| format!("0x{byte:02X}")).collect();
    let message = match named.as_slice() {
        [one] => format!("invalid UTF-8: byte {one}"),
        many => format!("invalid UTF-8: bytes {}", many.join(" ")),
    };
    let label = if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        "this file starts like UTF-16 text: save it as UTF-8"
    } else {
        "dep source files are UTF-8 text"
    };
    // The valid prefix is decoded as it is, so the error's offset is the same
    // in the text; the invalid sequence becomes one `U+FFFD` there.
    let text = String::from_utf8_lossy(bytes).into_owned();
    let replacement_length = char::REPLACEMENT_CHARACTER.len_utf8();
    Err(InvalidUtf8 {
        text,
        diagnostic: Diagnostic::new(message, Span::new(start, start + replacement_length), label),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    #[test]
    fn valid_text_and_a_byte_order_mark_decode_as_they_are() {
        assert_eq!(decode_source(b"x = 1\n".to_vec()).unwrap(), "x = 1\n");
        assert_eq!(
            decode_source(b"\xEF\xBB\xBFx = 1".to_vec()).unwrap(),
            "\u{feff}x = 1"
        );
    }

    #[test]
    fn the_first_invalid_byte_is_named_at_its_place() {
        let error = decode_source(b"x = 1\nprint \xFF\xFE x \xC0\n".to_vec()).unwrap_err();
        expect![[r#"
            error: invalid UTF-8: byte 0xFF
             --> bin.dep:2:7
              |
            2 | print �� x �
              |       ^ dep source files are UTF-8 text
        "#]]
        .assert_eq(&error.render("bin.dep"));
    }

    #[test]
    fn a_sequence_cut_short_at_the_end_is_named_whole() {
        let error = decode_source(b"y = 2 # \xE2\x82".to_vec()).unwrap_err();
        assert_eq!(error.diagnostic.message, "invalid UTF-8: bytes 0xE2 0x82");
        assert!(error.render("t.dep").contains("--> t.dep:1:9"));
    }

    #[test]
    fn utf16_text_is_recognised() {
        let error = decode_source(b"\xFF\xFEx\x00".to_vec()).unwrap_err();
        assert_eq!(error.diagnostic.message, "invalid UTF-8: byte 0xFF");
        assert!(error.render("w.dep").contains("save it as UTF-8"));
    }
}
