//! Hostile input through the real binary: byte order marks, NUL bytes, files that are not
//! UTF-8, a ten-megabyte line. Each is accepted as editors accept it, or reported with what is
//! wrong (the byte, by name) and where (`file:line:col`), quickly and briefly.

use std::io::Write;
use std::process::Stdio;

use crate::util::{Run, TestDir};

#[test]
fn a_leading_byte_order_mark_is_accepted_by_run_check_and_load() {
    let dir = TestDir::new();
    dir.write("bom.dep", "\u{feff}x = 2\nprint x + 1\n");
    let run = Run::of(dir.dep().args(["run", "bom.dep"])).expect_code(0);
    assert_eq!(run.stdout, "3.0\n");
    let check = Run::of(dir.dep().args(["check", "bom.dep"])).expect_code(0);
    assert!(
        check.stdout.contains("ok (2 statements)"),
        "{}",
        check.stdout
    );
    let loaded = piped(&dir, b":load bom.dep\nprint x * 5\n");
    assert_eq!(loaded.stdout, "3.0\n10.0\n", "{}", loaded.stderr);
}

#[test]
fn a_byte_order_mark_elsewhere_is_named_with_its_place() {
    let dir = TestDir::new();
    dir.write("two.dep", "x = 1\n\u{feff}y = 2\n");
    let run = Run::of(dir.dep().args(["run", "two.dep"])).expect_code(2);
    assert!(
        run.stderr
            .contains("error: unexpected character U+FEFF (a byte order mark)\n --> two.dep:2:1"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_nul_byte_is_named_with_its_place_and_drawn() {
    let dir = TestDir::new();
    dir.write("nul.dep", "x = 1\0\nprint x\n");
    let run = Run::of(dir.dep().args(["run", "nul.dep"])).expect_code(2);
    assert!(
        run.stderr.contains(
            "error: unexpected character NUL\n --> nul.dep:1:6\n  |\n1 | x = 1\u{2400}\n  |      ^"
        ),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains('\0'));
}

#[test]
fn a_file_that_is_not_utf8_is_reported_at_its_first_bad_byte() {
    let dir = TestDir::new();
    std::fs::write(dir.path().join("bin.dep"), b"x = 1\nprint \xFF\xFE x\n").unwrap();
    for command in ["run", "check"] {
        let run = Run::of(dir.dep().args([command, "bin.dep"])).expect_code(2);
        assert!(
            run.stderr
                .starts_with("error: invalid UTF-8: byte 0xFF\n --> bin.dep:2:7\n"),
            "{command}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("stream did not contain"));
        assert!(run.stdout.is_empty(), "nothing runs: {}", run.stdout);
        // `dep check` ends with the count of errors, as for any other error in the file.
        let count =
            "dep: 1 syntax error in bin.dep: it is not UTF-8 text, so the rest was not read\n";
        assert_eq!(
            run.stderr.ends_with(count),
            command == "check",
            "{command}: {}",
            run.stderr
        );
    }
    let loaded = piped(&dir, b":load bin.dep\nprint 7\n");
    assert!(
        loaded
            .stderr
            .contains("error: invalid UTF-8: byte 0xFF\n --> bin.dep:2:7"),
        "{}",
        loaded.stderr
    );
    assert_eq!(loaded.stdout, "7.0\n");
    assert_eq!(loaded.code, 2);
}

#[test]
fn a_piped_line_that_is_not_utf8_is_reported_and_the_rest_runs() {
    let dir = TestDir::new();
    let run = piped(&dir, b"x = 1\nprint \xC0 x\nprint x + 1\n");
    assert!(
        run.stderr
            .contains("error: invalid UTF-8: byte 0xC0\n --> <stdin>:2:7"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stdout, "2.0\n");
    assert_eq!(run.code, 2);
}

#[test]
fn a_ten_megabyte_line_fails_in_seconds_with_a_short_report() {
    let dir = TestDir::new();
    let source = format!("x = 1{}\nprint x\n", "+1".repeat(5 * 1024 * 1024));
    dir.write("big.dep", &source);
    let run = Run::of(dir.dep().args(["run", "big.dep"])).expect_code(2);
    assert!(run.stderr.len() < 1000, "{}", run.stderr);
    assert!(
        run.stderr
            .starts_with("error: statement is too long\n --> big.dep:1:"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("..."), "{}", run.stderr);
}

#[test]
fn a_sum_of_a_thousand_terms_runs() {
    let dir = TestDir::new();
    let terms = vec!["x"; 1000].join(" + ");
    dir.write(
        "sum.dep",
        &format!(
            "x = ones(2)\ny = {terms}\nprint y\nz = 1{}\nprint z\n",
            " + 1".repeat(999)
        ),
    );
    let run = Run::of(dir.dep().args(["run", "sum.dep"])).expect_code(0);
    assert_eq!(run.stdout, "[1000. 1000.]\n1000.0\n", "{}", run.stderr);
}

#[test]
fn runtime_errors_on_long_lines_quote_a_window_around_the_caret() {
    let dir = TestDir::new();
    let padding = "a = 1; ".repeat(60);
    dir.write(
        "long.dep",
        &format!("{padding}x = ones(2) + zeros(3); {padding}\n"),
    );
    let run = Run::of(dir.dep().args(["run", "long.dep"])).expect_code(1);
    let quoted = run
        .stderr
        .lines()
        .find(|line| line.starts_with("1 | "))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(quoted.len() < 120, "{}", run.stderr);
    assert!(
        quoted.starts_with("1 | ...") && quoted.ends_with("..."),
        "{quoted}"
    );
    assert!(quoted.contains("x = ones(2) + zeros(3)"), "{quoted}");
    assert!(run.stderr.contains("--> long.dep:1:421"), "{}", run.stderr);
}

/// Runs `dep` with `input` piped to its standard input.
fn piped(dir: &TestDir, input: &[u8]) -> Run {
    let mut child = dir
        .dep()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start dep");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    let output = child.wait_with_output().expect("run dep");
    Run {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        code: output.status.code().unwrap_or(-1),
    }
}
