//! Tests of [`crate::parse`] on hostile input: huge one-line files, byte
//! order marks, NUL and other invisible characters, binary junk. Each must
//! give errors that name what is wrong and where, quickly.

use expect_test::{expect, Expect};

use crate::{parse, render_diagnostics};

/// Parses `source` and compares its rendered diagnostics with `expected`.
fn check_errors(source: &str, expected: Expect) {
    let output = parse(source);
    expected.assert_eq(&render_diagnostics(&output.diagnostics, "test.dep", source));
}

#[test]
fn a_ten_megabyte_line_fails_fast_with_a_short_report() {
    let source = format!("x = 1{}\nprint x\n", "+1".repeat(5 * 1024 * 1024));
    let output = parse(&source);
    let rendered = render_diagnostics(&output.diagnostics, "big.dep", &source);
    let [diagnostic] = output.diagnostics.as_slice() else {
        panic!("{rendered}");
    };
    assert_eq!(diagnostic.message, "statement is too long");
    // The token past the limit: `x`, `=` and `1` come first, then `+1` pairs.
    let limit = crate::chunk::MAX_STATEMENT_TOKENS;
    assert_eq!(diagnostic.span.start, 4 + (limit - 2));
    assert!(rendered.len() < 600, "{rendered}");
    assert!(rendered.contains("--> big.dep:1:"), "{rendered}");
    assert!(rendered.contains("split it into several statements"));
    assert_eq!(output.program.statements.len(), 1, "`print x` still parses");
}

#[test]
fn a_long_statement_under_the_token_limit_is_parsed() {
    let list = format!("x = [1{}]", ", 1".repeat(20_000));
    let output = parse(&list);
    assert!(output.is_ok(), "{:?}", output.diagnostics);
}

#[test]
fn a_byte_order_mark_at_the_start_is_skipped() {
    let source = "\u{feff}x = 1\nprint x\n";
    let output = parse(source);
    assert!(output.is_ok(), "{:?}", output.diagnostics);
    assert_eq!(output.program.statements.len(), 2);
    assert_eq!(output.program.statements[0].text(source), "x = 1");
    // Columns count from after the mark, as editors count them.
    check_errors(
        "\u{feff}x = $\n",
        expect![[r#"
            error: unexpected character `$`
             --> test.dep:1:5
              |
            1 | x = $
              |     ^ this character is not part of the language
        "#]],
    );
    assert!(crate::is_complete("\u{feff}x = 1"));
}

#[test]
fn invisible_characters_are_named_by_code_point() {
    check_errors(
        "x = 1\u{0}\ny = \u{7}2\nz = 3\u{feff}\nw = 4\u{a0}+ 1\nv = \u{fffd}\n",
        expect![[r#"
            error: unexpected character NUL
             --> test.dep:1:6
              |
            1 | x = 1␀
              |      ^ this character is not part of the language

            error: unexpected character U+0007
             --> test.dep:2:5
              |
            2 | y = ␇2
              |     ^ this character is not part of the language

            error: unexpected character U+FEFF (a byte order mark)
             --> test.dep:3:6
              |
            3 | z = 3�
              |      ^ a byte order mark is only accepted at the very start of a file

            error: unexpected character U+00A0 (a no-break space)
             --> test.dep:4:6
              |
            4 | w = 4�+ 1
              |      ^ this character is not part of the language

            error: unexpected character U+FFFD (a replacement character)
             --> test.dep:5:5
              |
            5 | v = �
              |     ^ this is not valid UTF-8 text, or was not when it was read
        "#]],
    );
}

#[test]
fn visible_strange_characters_are_quoted() {
    let output = parse("x = 1 € 2");
    assert_eq!(output.diagnostics[0].message, "unexpected character `€`");
}

#[test]
fn control_characters_in_quoted_lines_cannot_drive_the_terminal() {
    // An escape sequence inside a comment is quoted when a later error on
    // the same line is reported; ESC must not reach the terminal.
    let source = "x = $ # \u{1b}[2J\u{1b}[31m";
    let rendered = render_diagnostics(&parse(source).diagnostics, "t.dep", source);
    assert!(!rendered.contains('\u{1b}'), "{rendered:?}");
    assert!(rendered.contains("# ␛[2J␛[31m"), "{rendered}");
}

#[test]
fn binary_junk_gives_at_most_a_hundred_errors_and_says_so() {
    let junk: String = (0..20_000u32)
        .map(|index| char::from_u32(index % 0x2f).unwrap_or('\0'))
        .collect();
    let output = parse(&junk);
    let rendered = render_diagnostics(&output.diagnostics, "junk.bin", &junk);
    let limit = crate::parse::MAX_DIAGNOSTICS;
    assert_eq!(output.diagnostics.len(), limit + 1);
    let last = &output.diagnostics[limit];
    assert_eq!(
        last.message,
        format!("too many syntax errors: stopped after {limit}")
    );
    assert!(
        rendered.contains("error: unexpected character NUL"),
        "{rendered}"
    );
    for diagnostic in &output.diagnostics {
        assert!(diagnostic.span.start < junk.len());
    }
}

#[test]
fn a_huge_file_of_broken_statements_stops_at_the_hundredth_error_at_once() {
    let junk = "$;".repeat(5 * 1024 * 1024);
    let output = parse(&junk);
    assert_eq!(output.diagnostics.len(), crate::parse::MAX_DIAGNOSTICS + 1);
    // The errors counted are those reported, and parsing is said to have stopped after them.
    assert_eq!(output.n_errors(), (crate::parse::MAX_DIAGNOSTICS, true));
    assert_eq!(parse("x = )\ny = (\n").n_errors(), (2, false));
}

/// Tokens of 10 MB parse (their time is measured by hand, not here: it was quadratic).
#[test]
fn ten_megabyte_tokens_parse_in_linear_time() {
    let text = "a".repeat(10 * 1024 * 1024);
    for source in [
        format!("x = \"{text}\"\n"),
        format!("x = \"\\\"{text}\\\\\"\n"),
        format!("x = {text}\n"),
        format!("# {text}\nx = 1\n"),
    ] {
        let output = parse(&source);
        assert!(output.is_ok(), "{:?}", output.diagnostics);
    }
}
