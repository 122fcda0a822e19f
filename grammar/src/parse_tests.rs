//! Tests of [`crate::parse`]: syntax-tree snapshots of every construct,
//! operator precedence, spans, and the diagnostics of bad input.

use expect_test::{expect, Expect};

use crate::{parse, render_diagnostics, LineIndex, StmtKind};

/// Parses `source`, which must be free of errors, and compares the
/// S-expression rendering of its program with `expected`.
fn check(source: &str, expected: Expect) {
    let output = parse(source);
    assert!(
        output.diagnostics.is_empty(),
        "{}",
        render_diagnostics(&output.diagnostics, "test.dep", source)
    );
    expected.assert_eq(&output.program.to_string());
}

/// Parses `source` and compares its rendered diagnostics with `expected`.
fn check_errors(source: &str, expected: Expect) {
    let output = parse(source);
    expected.assert_eq(&render_diagnostics(&output.diagnostics, "test.dep", source));
}

#[test]
fn assignments_and_literals() {
    check(
        "A = 2\nf = 1.5; g = 1e-3; h = .5; k = 2.\nX = ones(2, 3)\nT = [[1, 2], [3, 4]]\ne = []\ns = \"a\\\"b\\n\"\nm = 1.e5 + 2E3\r\nt = \"two\nlines\"",
        expect![[r#"
            (= [A] 2)
            (= [f] 1.5)
            (= [g] 0.001)
            (= [h] 0.5)
            (= [k] 2)
            (= [X] (ones 2 3))
            (= [T] [[1 2] [3 4]])
            (= [e] [])
            (= [s] "a\"b\n")
            (= [m] (+ 100000 2000))
            (= [t] "two\nlines")
        "#]],
    );
}

#[test]
fn operators_and_precedence() {
    check(
        "B = A + 1\nM = X @ W\nc = -2**2\nd = a+b*c@d\ne = a<b+1\nf = 2**3**2\ng = 2**-1\nh = (a+b)*c\ni = a-b-c\nj = (a == b) != c\nk = a / b * c\nl = --a",
        expect![[r#"
            (= [B] (+ A 1))
            (= [M] (@ X W))
            (= [c] (- (** 2 2)))
            (= [d] (+ a (@ (* b c) d)))
            (= [e] (< a (+ b 1)))
            (= [f] (** 2 (** 3 2)))
            (= [g] (** 2 (- 1)))
            (= [h] (* (+ a b) c))
            (= [i] (- (- a b) c))
            (= [j] (!= (== a b) c))
            (= [k] (* (/ a b) c))
            (= [l] (- (- a)))
        "#]],
    );
}

#[test]
fn indexing() {
    check(
        "V = X[0:1, 1:3]; w = X[1]; u = X[:, -1]; z = X[1:]\ny = X[:2][0]\nq = f(x)[0]",
        expect![[r#"
            (= [V] (index X 0:1 1:3))
            (= [w] (index X 1))
            (= [u] (index X : (- 1)))
            (= [z] (index X 1:))
            (= [y] (index (index X :2) 0))
            (= [q] (index (f x) 0))
        "#]],
    );
}

#[test]
fn simple_statements() {
    check(
        "a, b = split(X, 2, 0)\nA += 1; A -= 1; A *= 2; A /= 2\ndel A, B\ndel C\nprint X\nprint \"loss:\", L\nX + 1\nsave(X, \"x.npy\")\nseed 42\nwait\nrun step\ny = f(x, w=3)\nz = g(k=1, j=2,)",
        expect![[r#"
            (= [a b] (split X 2 0))
            (+= A 1)
            (-= A 1)
            (*= A 2)
            (/= A 2)
            (del A B)
            (del C)
            (print X)
            (print "loss:" L)
            (expr (+ X 1))
            (expr (save X "x.npy"))
            (seed 42)
            (wait)
            (run step)
            (= [y] (f x w=3))
            (= [z] (g k=1 j=2))
        "#]],
    );
}

#[test]
fn loops_and_functions() {
    check(
        "for i in 0..10 {\n  print i\n}\nfor i, j in clock_cycles(4, 3) { a = i; b = j }\nfor x in xs {}\ndef f(x, w) {\n  h = relu(x @ w)\n  return h, sum(h)\n}\ndef g() { return 1 }",
        expect![[r#"
            (for [i] (range 0 10)
              (print i))
            (for [i j] (clock_cycles 4 3)
              (= [a] i)
              (= [b] j))
            (for [x] xs)
            (def f [x w]
              (= [h] (relu (@ x w)))
              (return h (sum h)))
            (def g []
              (return 1))
        "#]],
    );
}

#[test]
fn blocks_with_settings_graphs_and_devices() {
    check(
        "with priority = 5 { A = 1 }\nwith gpu0 {\n  B = 2\n}\nwith gpu1, priority = 2 {\n  wait\n}\ngraph step {\n  for i in 0..n {\n    X = X + 1\n  }\n}\nrun step\ndevice gpu1 = sim(tflops=100, gbps=2000, latency_us=5)\ndevice cpu = host()\npriority auto {\n  Y = X @ X\n}",
        expect![[r#"
            (with [priority=5]
              (= [A] 1))
            (with [gpu0]
              (= [B] 2))
            (with [gpu1 priority=2]
              (wait))
            (graph step
              (for [i] (range 0 n)
                (= [X] (+ X 1))))
            (run step)
            (device gpu1 (sim tflops=100 gbps=2000 latency_us=5))
            (device cpu (host))
            (priority-auto
              (= [Y] (@ X X)))
        "#]],
    );
}

#[test]
fn comments_blank_lines_and_continuations() {
    check(
        "# a comment\n\nA = 1  # trailing\nB = A +  # continued\n  2\nT = [1, # one\n     2]\nprint \"# not a comment\"\nindex = 1; inx = 2; runner = 3\r\nfor x in xs {\n  # nothing\n\n}\nwith gpu0 { print \"a\"; wait }",
        expect![[r##"
            (= [A] 1)
            (= [B] (+ A 2))
            (= [T] [1 2])
            (print "# not a comment")
            (= [index] 1)
            (= [inx] 2)
            (= [runner] 3)
            (for [x] xs)
            (with [gpu0]
              (print "a")
              (wait))
        "##]],
    );
}

#[test]
fn statement_text_and_name_positions() {
    let source = "A = 2\n  B = A + 1   # add\nfor i in 0..3 {\n  C = B\n}";
    let output = parse(source);
    assert!(output.diagnostics.is_empty());
    let texts: Vec<&str> = output
        .program
        .statements
        .iter()
        .map(|statement| statement.text(source))
        .collect();
    assert_eq!(texts, ["A = 2", "B = A + 1", "for i in 0..3 {\n  C = B\n}"]);
    let line_index = LineIndex::new(source);
    let StmtKind::Assign { targets, value } = &output.program.statements[1].kind else {
        panic!("not an assignment");
    };
    assert_eq!(
        line_index.line_column(targets[0].span.start).to_string(),
        "2:3"
    );
    assert_eq!(value.span.text(source), "A + 1");
    let StmtKind::For { body, .. } = &output.program.statements[2].kind else {
        panic!("not a loop");
    };
    let inner = &body.statements[0];
    assert_eq!(inner.text(source), "C = B");
    assert_eq!(line_index.line_column(inner.span.start).to_string(), "4:3");
    let StmtKind::Assign { value, .. } = &inner.kind else {
        panic!("not an assignment");
    };
    assert_eq!(line_index.line_column(value.span.start).to_string(), "4:7");
}

/// Of the brackets left open at the end, the outermost is reported (a statement reports its
/// first problem): where a line was left unfinished and the rest of the file ran into it. The
/// innermost was, naming a line far below the one to fix.
#[test]
fn the_outermost_bracket_left_open_at_the_end_is_reported() {
    check_errors(
        "a = (1 + 2\nb = 3\ndef f(x {\n  return x\n}\n",
        expect![[r#"
            error: unclosed `(`
             --> test.dep:1:5
              |
            1 | a = (1 + 2
              |     ^ this `(` is never closed with `)`
        "#]],
    );
}

#[test]
fn every_bad_statement_of_a_file_is_reported() {
    check_errors(
        "A = 1\nB = A *\nC = 2\nD = (1 + 2\n",
        expect![[r#"
            error: expected an operator, found `=`
             --> test.dep:3:3
              |
            3 | C = 2
              |   ^ expected an operator or end of statement (the statement goes on from the line ending with `*`)

            error: unclosed `(`
             --> test.dep:4:5
              |
            4 | D = (1 + 2
              |     ^ this `(` is never closed with `)`
        "#]],
    );
    check_errors(
        "A = 1 2\nprint\nB = $ + 1\nX = f(1, 2]\ndel 3\nY = 1; Z = = 2; W = 3",
        expect![[r#"
            error: expected an operator, found number `2`
             --> test.dep:1:7
              |
            1 | A = 1 2
              |       ^ expected an operator or end of statement

            error: expected an expression, found end of statement
             --> test.dep:2:6
              |
            2 | print
              |      ^ expected an expression

            error: unexpected character `$`
             --> test.dep:3:5
              |
            3 | B = $ + 1
              |     ^ this character is not part of the language

            error: mismatched `]`
             --> test.dep:4:11
              |
            4 | X = f(1, 2]
              |           ^ expected `)` to close the `(` before it

            error: expected a name, found number `3`
             --> test.dep:5:5
              |
            5 | del 3
              |     ^ expected a name

            error: expected an expression, found `=`
             --> test.dep:6:12
              |
            6 | Y = 1; Z = = 2; W = 3
              |            ^ expected an expression
        "#]],
    );
}

/// `3 > 2 > 1` compared the 1.0 of `3 > 2` with 1 and gave 0.0: a comparison of an
/// unparenthesized comparison is an error at its operator, which says how to write either
/// meaning; parenthesized, and beside `+` or `*`, comparisons are taken as before.
#[test]
fn comparisons_do_not_chain() {
    check_errors(
        "print 3 > 2 > 1\nok = (a < b) * (b <= c) + (a == b) != (c > 1)\ny = a < b+1 == c < d",
        expect![[r#"
            error: comparisons do not chain: `>` would compare the 1.0 or 0.0 of `3 > 2` with 1
             --> test.dep:1:13
              |
            1 | print 3 > 2 > 1
              |             ^ parenthesize it, as in `(3 > 2) > 1`, or combine with `*` for and: `(3 > 2) * (2 > 1)`

            error: comparisons do not chain: `==` would compare the 1.0 or 0.0 of `a < b+1` with c
             --> test.dep:3:13
              |
            3 | y = a < b+1 == c < d
              |             ^^ parenthesize it, as in `(a < b+1) == c`, or combine with `*` for and: `(a < b+1) * (b+1 == c)`
        "#]],
    );
}

#[test]
fn diagnostic_rendering() {
    let source = "A = 2\nX = ones(2, 3)\nB = A +";
    let output = parse(source);
    assert_eq!(output.program.statements.len(), 2);
    expect![[r#"
        error: expected an expression, found end of statement
         --> intro.dep:3:8
          |
        3 | B = A +
          |        ^ expected an expression
    "#]]
    .assert_eq(&output.diagnostics[0].render("intro.dep", source));
}

#[test]
fn brackets_strings_and_junk() {
    check_errors(
        "X = [[1, 2], [3, 4]\nY = 1",
        expect![[r#"
        error: unclosed `[`
         --> test.dep:1:5
          |
        1 | X = [[1, 2], [3, 4]
          |     ^ this `[` is never closed with `]`
    "#]],
    );
    check_errors(
        "}\nprint \"ab\nY = 1",
        expect![[r#"
        error: unmatched `}`
         --> test.dep:1:1
          |
        1 | }
          | ^ this bracket closes nothing

        error: unterminated string
         --> test.dep:2:7
          |
        2 | print "ab
          |       ^ this string is never closed with `"`
    "#]],
    );
    check_errors(
        "def f(x) {\n  h = relu(x @ w\n  return h\n}\nZ = 3 ~ 4",
        expect![[r#"
        error: unclosed `(`
         --> test.dep:2:11
          |
        2 |   h = relu(x @ w
          |           ^ this `(` is never closed with `)`

        error: unexpected character `~`
         --> test.dep:5:7
          |
        5 | Z = 3 ~ 4
          |       ^ this character is not part of the language
    "#]],
    );
    check_errors(
        "a = 1 é 2",
        expect![[r#"
        error: unexpected character `é`
         --> test.dep:1:7
          |
        1 | a = 1 é 2
          |       ^ this character is not part of the language
    "#]],
    );
}

/// The hint about a block's `{` is given once, to the statement before it; a `{` after that
/// block is an error of its own (it used to repeat the hint and hide the unclosed `{`).
#[test]
fn a_stray_brace_after_a_hinted_block_is_reported_on_its_own() {
    check_errors(
        "}\n{\n}\n{",
        expect![[r#"
        error: unmatched `}`
         --> test.dep:1:1
          |
        1 | }
          | ^ this bracket closes nothing (a block's `{` must be on the same line as its header)

        error: unclosed `{`
         --> test.dep:4:1
          |
        4 | {
          | ^ this `{` is never closed with `}`
    "#]],
    );
}

#[test]
fn blocks_need_their_brace_on_the_header_line() {
    check_errors(
        "for i in 0..10\n  print i\nfor j in 0..2\n{\n  print j\n}",
        expect![[r#"
        error: expected `{`, found end of statement
         --> test.dep:1:15
          |
        1 | for i in 0..10
          |               ^ expected `{` or an operator

        error: expected `{`, found end of statement
         --> test.dep:3:14
          |
        3 | for j in 0..2
          |              ^ expected `{` or an operator (a block's `{` must be on the same line as its header)
    "#]],
    );
    check_errors(
        "for i in 0..10 print i",
        expect![[r#"
        error: expected `{`, found keyword `print`
         --> test.dep:1:16
          |
        1 | for i in 0..10 print i
          |                ^^^^^ expected `{` or an operator
    "#]],
    );
}

#[test]
fn keywords_are_not_names() {
    check_errors(
        "run = 1\nx = print + 1\nwith priority { A = 1 }\ndef in() { wait }",
        expect![[r#"
        error: `run` is a keyword, not a name
         --> test.dep:1:1
          |
        1 | run = 1
          | ^^^ keywords cannot be assigned to; pick another name

        error: expected an expression, found keyword `print`
         --> test.dep:2:5
          |
        2 | x = print + 1
          |     ^^^^^ expected an expression

        error: expected `=`, found `{`
         --> test.dep:3:15
          |
        3 | with priority { A = 1 }
          |               ^ expected `=`

        error: expected a name, found keyword `in`
         --> test.dep:4:5
          |
        4 | def in() { wait }
          |     ^^ expected a name
    "#]],
    );
}

/// Statements of other languages that dep has no equivalent of are named as such, with what to
/// write instead; the same words are still names where a name fits.
#[test]
fn statements_dep_does_not_have_are_named() {
    check_errors(
        "if rank() == 0 { send(x, 1) }\nwhile x < 3 { x += 1 }\nif = 2\nimport numpy\nelse: x\n",
        expect![[r#"
            error: dep has no `if` statement
             --> test.dep:1:1
              |
            1 | if rank() == 0 { send(x, 1) }
              | ^^ every statement runs; `with rank = 0 { ... }` runs a block on one rank only

            error: dep has no `while` statement
             --> test.dep:2:1
              |
            2 | while x < 3 { x += 1 }
              | ^^^^^ a loop runs over a range: `for i in 0..n { ... }`

            error: dep has no `import` statement
             --> test.dep:4:1
              |
            4 | import numpy
              | ^^^^^^ every builtin is always there; the REPL's `:load FILE` runs a file

            error: dep has no `else` statement
             --> test.dep:5:1
              |
            5 | else: x
              | ^^^^ every statement runs; `with rank = 0 { ... }` runs a block on one rank only
        "#]],
    );
}

/// The same statements inside a block, at any depth (a loop, a function, a `with` block, a
/// body of several lines, blocks in blocks), are named as at the top level, at the statement:
/// they said "expected `,`, found name `i`". Each bad top-level statement still gets one
/// diagnostic, and the statements around them parse.
#[test]
fn statements_dep_does_not_have_are_named_inside_blocks() {
    let source = "for i in 0..2 { if i == 1 { } }\nfor i in 0..2 { x = 1; while i < 1 { } }\n\
                  A = 1\nfor i in 0..2 {\n  x = 1\n  import numpy\n  print x\n}\n\
                  def f(x) {\n  y = x + 1\n  if y > 1 {\n    return y\n  }\n  return x\n}\n\
                  with priority = 1 { else: x }\n\
                  graph g { def h(x) { with gpu0 { break now } } }\nB = 2\n";
    check_errors(
        source,
        expect![[r#"
            error: dep has no `if` statement
             --> test.dep:1:17
              |
            1 | for i in 0..2 { if i == 1 { } }
              |                 ^^ every statement runs; `with rank = 0 { ... }` runs a block on one rank only

            error: dep has no `while` statement
             --> test.dep:2:24
              |
            2 | for i in 0..2 { x = 1; while i < 1 { } }
              |                        ^^^^^ a loop runs over a range: `for i in 0..n { ... }`

            error: dep has no `import` statement
             --> test.dep:6:3
              |
            6 |   import numpy
              |   ^^^^^^ every builtin is always there; the REPL's `:load FILE` runs a file

            error: dep has no `if` statement
              --> test.dep:11:3
               |
            11 |   if y > 1 {
               |   ^^ every statement runs; `with rank = 0 { ... }` runs a block on one rank only

            error: dep has no `else` statement
              --> test.dep:16:21
               |
            16 | with priority = 1 { else: x }
               |                     ^^^^ every statement runs; `with rank = 0 { ... }` runs a block on one rank only

            error: dep has no `break` statement
              --> test.dep:17:34
               |
            17 | graph g { def h(x) { with gpu0 { break now } } }
               |                                  ^^^^^ a `for` loop runs every one of its iterations
        "#]],
    );
    let output = parse(source);
    assert_eq!(output.diagnostics.len(), 6);
    assert_eq!(output.program.statements.len(), 2);
}

/// An assignment to an index or a slice (NumPy's `A[0] = 5`) says that dep writes a variable
/// whole, and how to write an entry of a list of slots; an index read (`y = A[0] + 1`) and a
/// comparison after one (`A[0] == 1`) are not taken for one.
#[test]
fn an_assignment_to_an_index_says_how_dep_writes() {
    check_errors(
        "A[0] = 5\nA[0:2, i] += 1\nw[k][1] = ones(2)\ny = A[0] + 1\n",
        expect![[r#"
            error: dep has no assignment to an index or a slice (`A[0] = ...`)
             --> test.dep:1:1
              |
            1 | A[0] = 5
              | ^^^^ a variable is written whole (`A = ...`); an entry of a list made with `slots(n)` is written with `set(A, 0, value)`

            error: dep has no assignment to an index or a slice (`A[0:2, i] += ...`)
             --> test.dep:2:1
              |
            2 | A[0:2, i] += 1
              | ^^^^^^^^^ a variable is written whole (`A = ...`)

            error: dep has no assignment to an index or a slice (`w[k][1] = ...`)
             --> test.dep:3:1
              |
            3 | w[k][1] = ones(2)
              | ^^^^^^^ a variable is written whole (`w = ...`)
        "#]],
    );
}

/// An assignment to an index or a slice inside a block, at any depth, says the same as at the
/// top level, at the assignment: it said "expected `}`, found `=`". An index read inside a
/// block is still taken as one.
#[test]
fn an_assignment_to_an_index_inside_a_block_says_how_dep_writes() {
    check_errors(
        "for i in 0..2 { A[0] = 5 }\nfor i in 0..3 {\n  y = A[i] + 1\n  A[0:2, i] += y\n}\n\
         def f(w) { for k in 0..2 { with priority = k { w[k][1] = ones(2) } } }\n",
        expect![[r#"
            error: dep has no assignment to an index or a slice (`A[0] = ...`)
             --> test.dep:1:17
              |
            1 | for i in 0..2 { A[0] = 5 }
              |                 ^^^^ a variable is written whole (`A = ...`); an entry of a list made with `slots(n)` is written with `set(A, 0, value)`

            error: dep has no assignment to an index or a slice (`A[0:2, i] += ...`)
             --> test.dep:4:3
              |
            4 |   A[0:2, i] += y
              |   ^^^^^^^^^ a variable is written whole (`A = ...`)

            error: dep has no assignment to an index or a slice (`w[k][1] = ...`)
             --> test.dep:6:48
              |
            6 | def f(w) { for k in 0..2 { with priority = k { w[k][1] = ones(2) } } }
              |                                                ^^^^^^^ a variable is written whole (`w = ...`)
        "#]],
    );
}

/// An attribute, a method or a module's member (NumPy's `A.T`, `A.shape`, `A.sum()`,
/// `np.ones(3)`) says what dep writes instead, once per access, rather than that `.` is not
/// part of the language; a number's point is still a number's.
#[test]
fn attributes_methods_and_modules_say_what_to_write_instead() {
    check_errors(
        "B = A.T\nprint A.shape\nC = np.random.randn(3)\nD = A.sum() + f(x).T\nx = 1.5 + .5\n",
        expect![[r#"
            error: dep has no attributes (`A.T`)
             --> test.dep:1:5
              |
            1 | B = A.T
              |     ^^^ transpose with `transpose(A)`

            error: dep has no attributes (`A.shape`)
             --> test.dep:2:7
              |
            2 | print A.shape
              |       ^^^^^^^ `print` shows a value; `:vars` in the REPL (`%vars` in a notebook) shows every variable's shape

            error: dep has no modules (`np.random.randn`)
             --> test.dep:3:5
              |
            3 | C = np.random.randn(3)
              |     ^^^^^^^^^^^^^^^ builtins are called by their name alone: `randn(...)`

            error: dep has no attributes or methods (`A.sum`)
             --> test.dep:4:5
              |
            4 | D = A.sum() + f(x).T
              |     ^^^^^ a builtin takes the value as its first argument: `sum(A, ...)`
        "#]],
    );
}

/// A file name written without its quotes (`load(data.npy)`) says to quote it, not to call a
/// builtin `npy` (it said ``a builtin takes the value as its first argument: `npy(data, ...)` ``).
#[test]
fn a_file_name_without_quotes_says_to_quote_it() {
    check_errors(
        "X = load(data.npy)\nsave(X, out.npy)\nY = X.dot(W)\n",
        expect![[r#"
            error: `data.npy` is a file name without its quotes
             --> test.dep:1:10
              |
            1 | X = load(data.npy)
              |          ^^^^^^^^ a file name is a string: `"data.npy"`

            error: `out.npy` is a file name without its quotes
             --> test.dep:2:9
              |
            2 | save(X, out.npy)
              |         ^^^^^^^ a file name is a string: `"out.npy"`

            error: dep has no attributes or methods (`X.dot`)
             --> test.dep:3:5
              |
            3 | Y = X.dot(W)
              |     ^^^^^ a builtin takes the value as its first argument: `dot(X, ...)`
        "#]],
    );
}

/// A block opened Python's way (`def f(x):`) says that dep's blocks are in braces, with the
/// head written dep's way, a `range` as `start..end` and a body on the same line inside.
#[test]
fn python_blocks_say_that_blocks_are_in_braces() {
    check_errors(
        "def f(x):\nfor i in range(2, n):\nfor j in 0..3: print j  # one line\nwith gpu0:\n\
         def g(x) {\n  for k in range(x):\n    wait\n}\nfor i in 0..2 { with gpu0: wait }\n",
        expect![[r#"
            error: dep's blocks are in braces, not after `:`
             --> test.dep:1:9
              |
            1 | def f(x):
              |         ^ write `def f(x) { ... }`, the block's statements inside the braces

            error: dep's blocks are in braces, not after `:`
             --> test.dep:2:21
              |
            2 | for i in range(2, n):
              |                     ^ write `for i in 2..n { ... }`, the block's statements inside the braces

            error: dep's blocks are in braces, not after `:`
             --> test.dep:3:14
              |
            3 | for j in 0..3: print j  # one line
              |              ^ write `for j in 0..3 { print j }`

            error: dep's blocks are in braces, not after `:`
             --> test.dep:4:10
              |
            4 | with gpu0:
              |          ^ write `with gpu0 { ... }`, the block's statements inside the braces

            error: dep's blocks are in braces, not after `:`
             --> test.dep:6:20
              |
            6 |   for k in range(x):
              |                    ^ write `for k in 0..x { ... }`, the block's statements inside the braces

            error: dep's blocks are in braces, not after `:`
             --> test.dep:9:26
              |
            9 | for i in 0..2 { with gpu0: wait }
              |                          ^ write `with gpu0 { wait }`
        "#]],
    );
}

/// The lines indented under a `def` that failed (a body written Python's way) are its body: a
/// `return` there is not reported as outside a function too, their own syntax errors are, and
/// they are left out of the program. A statement back at the `def`'s indentation is not its.
#[test]
fn the_body_of_a_failed_def_brings_no_follow_on_errors() {
    let source = "def f(x):\n    y = x * 2\n\n    return y\nprint f(1)\n";
    let output = parse(source);
    assert_eq!(output.diagnostics.len(), 1, "{:?}", output.diagnostics);
    assert_eq!(output.program.to_string(), "(print (f 1))\n");
    check_errors(
        "  def f(x)\n    if x:\n      return x; return 2\n    return -x\n  return 0\ndef g(y):\n\treturn y\n",
        expect![[r#"
            error: expected `{`, found end of statement
             --> test.dep:1:11
              |
            1 |   def f(x)
              |           ^ expected `{`

            error: dep has no `if` statement
             --> test.dep:2:5
              |
            2 |     if x:
              |     ^^ every statement runs; `with rank = 0 { ... }` runs a block on one rank only

            error: `return` outside a function
             --> test.dep:5:3
              |
            5 |   return 0
              |   ^^^^^^^^ here

            error: dep's blocks are in braces, not after `:`
             --> test.dep:6:9
              |
            6 | def g(y):
              |         ^ write `def g(y) { ... }`, the block's statements inside the braces
        "#]],
    );
}

/// A loop over Python's `range(n)` or `range(a, b)` is a syntax error that writes the range
/// dep's way, in a block too: it parsed, and failed only when the loop ran. Other loops over a
/// call parse as before.
#[test]
fn a_loop_over_range_says_how_dep_writes_it() {
    let source = "for i in range(3) { print i }\nfor i in range(1, n + 1) {}\n\
                  def f(n) {\n  for j in range((n)) { wait }\n}\n\
                  for i in range(1, 2, 3) {}\nfor i, j in clock_cycles(2, 3) {}\nfor i in rng(3) {}\n";
    assert_eq!(parse(source).program.statements.len(), 3);
    check_errors(
        source,
        expect![[r#"
            error: dep has no `range`: a for loop runs over `0..3`
             --> test.dep:1:10
              |
            1 | for i in range(3) { print i }
              |          ^^^^^^^^ a range is `start..end`

            error: dep has no `range`: a for loop runs over `1..n + 1`
             --> test.dep:2:10
              |
            2 | for i in range(1, n + 1) {}
              |          ^^^^^^^^^^^^^^^ a range is `start..end`

            error: dep has no `range`: a for loop runs over `0..(n)`
             --> test.dep:4:12
              |
            4 |   for j in range((n)) { wait }
              |            ^^^^^^^^^^ a range is `start..end`
        "#]],
    );
}

/// A slice with a step (NumPy's `a[::2]`) says that dep's slices have none.
#[test]
fn a_slice_with_a_step_says_slices_have_none() {
    check_errors(
        "y = a[::2]\nz = a[1:9:2] + b[0:2]\n",
        expect![[r#"
        error: dep's slices have no step
         --> test.dep:1:8
          |
        1 | y = a[::2]
          |        ^ a slice is `start:end` (either may be left out), every element between

        error: dep's slices have no step
         --> test.dep:2:10
          |
        2 | z = a[1:9:2] + b[0:2]
          |          ^ a slice is `start:end` (either may be left out), every element between
    "#]],
    );
}

/// Python's floor division (`x // 2`) says that dep divides with `/` only.
#[test]
fn floor_division_says_dep_divides_with_one_slash() {
    check_errors(
        "y = x // 2\n",
        expect![[r#"
        error: dep has no floor division `//`
         --> test.dep:1:7
          |
        1 | y = x // 2
          |       ^^ `a / b` divides, in float32; dep has no integer division
    "#]],
    );
}

#[test]
fn errors_the_grammar_cannot_express() {
    check_errors(
        "y = f(k=1, 2)\nfor i, j in 0..3 { wait }\ns = \"a\\qb\"",
        expect![[r#"
            error: positional argument after a keyword argument
             --> test.dep:1:12
              |
            1 | y = f(k=1, 2)
              |            ^ move this argument before `k=`

            error: a range loop has exactly one loop variable
             --> test.dep:2:5
              |
            2 | for i, j in 0..3 { wait }
              |     ^^^^ use a single name here

            error: unknown escape `\q` in string
             --> test.dep:3:7
              |
            3 | s = "a\qb"
              |       ^^ known escapes are \" \\ \n \t \r
        "#]],
    );
}

#[test]
fn deep_brackets_are_an_error_not_a_crash() {
    let deep_brackets = format!("x = {}1{}", "(".repeat(100), ")".repeat(100));
    let output = parse(&deep_brackets);
    assert_eq!(output.diagnostics.len(), 1);
    assert_eq!(
        output.diagnostics[0].message,
        "brackets are nested too deeply"
    );
}

#[test]
fn the_deepest_accepted_nesting_parses_on_a_small_stack() {
    // Half the stack of a test thread, to leave a margin for callers.
    let small_stack = std::thread::Builder::new().stack_size(1024 * 1024);
    let parser = small_stack.spawn(parse_the_deepest_accepted_nesting);
    assert!(parser.is_ok_and(|thread| thread.join().is_ok()));
}

fn parse_the_deepest_accepted_nesting() {
    let depth = crate::chunk::MAX_BRACKET_DEPTH;
    let longest = crate::lower::MAX_EXPRESSION_NESTING - 2;
    let longest_sum = crate::lower::MAX_EXPRESSION_DEPTH - 1;
    let nested =
        |open: &str, close: &str| format!("{}1{}", open.repeat(depth), close.repeat(depth));
    let sources = [
        format!("x = {}", nested("(", ")")),
        format!("x = {}", nested("(1 + ", ")")),
        format!("x = {}", nested("-2 ** (1 @ ", ")")),
        format!("x = {}", nested("[", "]")),
        format!("x = {}", nested("[1, ", "]")),
        format!("x = {}", nested("f(k=", ")")),
        format!("x = {}", nested("g(1, ", ")")),
        format!("x = {}", nested("y[1:", "]")),
        nested("for i in 0..3 { wait\n", "\n}"),
        format!("x = 2{}", " ** 2".repeat(longest)),
        format!("x = 2{}", " + 2".repeat(longest_sum)),
        format!("x = f({}2)", "-".repeat(longest_sum - 1)),
        format!(
            "{}1{}",
            "with gpu0 { def f(x) { ".repeat(depth / 2),
            " }\n}".repeat(depth / 2)
        ),
    ];
    for source in sources {
        let output = parse(&source);
        assert!(output.is_ok(), "{source}: {:?}", output.diagnostics);
    }
}

#[test]
fn long_operator_chains_are_not_nesting() {
    // A flat sum of 257 terms used to be "nested too deeply".
    for length in [257, 500, crate::lower::MAX_EXPRESSION_DEPTH] {
        let long_sum = format!("x = 1{}", " + 1".repeat(length - 1));
        let output = parse(&long_sum);
        assert!(output.is_ok(), "{length} terms: {:?}", output.diagnostics);
    }
    let mixed = format!("x = a{}", " * 2 - b / 3 + c @ d".repeat(200));
    assert!(parse(&mixed).is_ok());
}

#[test]
fn too_long_chains_are_reported_at_the_operator_past_the_limit() {
    // As many operations as the limit, then one more.
    let terms = crate::lower::MAX_EXPRESSION_DEPTH + 1;
    assert!(parse(&format!("x = 1{}", "+1".repeat(terms - 1)))
        .diagnostics
        .is_empty());
    let terms = terms + 1;
    let long_sum = format!("x = 1{}", "+1".repeat(terms - 1));
    let output = parse(&long_sum);
    let [diagnostic] = output.diagnostics.as_slice() else {
        panic!("{:?}", output.diagnostics);
    };
    assert_eq!(diagnostic.message, "expression is too long");
    assert_eq!(diagnostic.span.text(&long_sum), "+");
    assert_eq!(diagnostic.span.start, long_sum.len() - 2);
    let rendered = diagnostic.render("t.dep", &long_sum);
    assert!(rendered.contains("--> t.dep:1:2006"), "{rendered}");
    assert!(
        rendered.contains("more than 1000 operations deep"),
        "{rendered}"
    );
}

#[test]
fn unary_and_power_chains_are_nesting_with_a_limit() {
    assert!(parse(&format!("x = {}1", "-".repeat(1000)))
        .diagnostics
        .is_empty());
    for length in [1001, 5000] {
        let many_negations = format!("x = {}1", "-".repeat(length));
        let output = parse(&many_negations);
        let [diagnostic] = output.diagnostics.as_slice() else {
            panic!("{:?}", output.diagnostics);
        };
        assert_eq!(diagnostic.message, "expression is nested too deeply");
        // The place is the `-` that goes past the limit.
        assert_eq!(diagnostic.span.start, 4 + length - 1001);
    }
    for length in [101, 150, 250, 400, 1000, 5000] {
        let long_power = format!("x = 2{}", " ** 2".repeat(length));
        let output = parse(&long_power);
        assert_eq!(output.diagnostics.len(), 1);
        assert!(output.diagnostics[0].message.contains("nested too deeply"));
    }
}

#[test]
fn errors_inside_blocks_and_other_places() {
    check_errors(
        "device g = sim(3)\nwith { A = 1 }\nfor in 0..3 {}\ny = x[]\nprint \"a\" \"b\"\na b = 1\ndef f(x) { return }\nfor i in 0..3 {\n  A = 1\n  B = * 2\n}\nC = 1",
        expect![[r#"
            error: expected a name, found number `3`
             --> test.dep:1:16
              |
            1 | device g = sim(3)
              |                ^ expected a name or `)`

            error: expected a name, found `{`
             --> test.dep:2:6
              |
            2 | with { A = 1 }
              |      ^ expected a name

            error: expected a name, found keyword `in`
             --> test.dep:3:5
              |
            3 | for in 0..3 {}
              |     ^^ expected a name

            error: expected an expression, found `]`
             --> test.dep:4:7
              |
            4 | y = x[]
              |       ^ expected an expression

            error: expected `,`, found a string
             --> test.dep:5:11
              |
            5 | print "a" "b"
              |           ^^^ expected `,`, an operator or end of statement

            error: expected `,`, found name `b`
             --> test.dep:6:3
              |
            6 | a b = 1
              |   ^ expected `,`, `=`, an operator or end of statement

            error: expected an expression, found `}`
             --> test.dep:7:19
              |
            7 | def f(x) { return }
              |                   ^ expected an expression

            error: expected an expression, found `*`
              --> test.dep:10:7
               |
            10 |   B = * 2
               |       ^ expected an expression
        "#]],
    );
}

/// A text-direction control character (U+202E, a right-to-left override, and its kin) in a
/// comment or a string makes a line read otherwise than it runs ("Trojan Source"): refused at
/// its place, in a comment after code, on a line of its own, or in a string; the statements
/// around them still parse.
#[test]
fn text_direction_controls_in_comments_and_strings_are_refused() {
    let source = "x = 1 # \u{202e} hidden\ny = 2\n# \u{2067} alone\nprint \"a\u{202e}b\"\n";
    let output = parse(source);
    let messages: Vec<(&str, usize)> = output
        .diagnostics
        .iter()
        .map(|diagnostic| (diagnostic.message.as_str(), diagnostic.span.start))
        .collect();
    assert_eq!(
        messages,
        [
            (
                "a comment holds U+202E, a text-direction control character",
                8
            ),
            (
                "a comment holds U+2067, a text-direction control character",
                27
            ),
            (
                "a string holds U+202E, a text-direction control character",
                45
            ),
        ]
    );
    assert_eq!(output.program.statements.len(), 1, "y = 2 parses");
    // Other characters in comments and strings are theirs to hold.
    assert!(parse("x = 1 # 日本 ü →\nprint \"日本\"\n")
        .diagnostics
        .is_empty());
}
