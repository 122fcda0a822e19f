//! What a failed statement does to later ones, seen from the binary: an op that reads (or
//! reads and updates) a variable holding an error is skipped and carries the error on; a plain
//! write clears it; the report names the statement that failed, on every engine.

use crate::util::{Run, TestDir};

const ENGINES: &[(&str, &str)] = &[
    ("naive", "1"),
    ("threaded", "1"),
    ("threaded", "4"),
    ("per-device", "2"),
    ("sim", "2"),
];

/// Runs `source` as `case.dep` on every engine; returns each run, checked to exit with `code`.
fn on_every_engine(dir: &TestDir, source: &str, code: i32) -> Vec<(String, Run)> {
    dir.write("case.dep", source);
    ENGINES
        .iter()
        .map(|(engine, threads)| {
            let run = Run::of(dir.dep().args([
                "run",
                "case.dep",
                "--engine",
                engine,
                "--threads",
                threads,
            ]))
            .expect_code(code);
            (format!("{engine}/{threads}"), run)
        })
        .collect()
}

/// The report of the matmul at `line` (1-based), whose statement is `statement` at `column`.
fn matmul_report(line: usize, column: usize, statement: &str) -> String {
    format!(
        "error: matmul: shapes [2, 3] and [4] are not aligned (3 != 4)\n --> case.dep:{line}:{column}\n  |\n{line} | {pad}{statement}\n  | {pad}{carets} in this statement\n",
        pad = " ".repeat(column - 1),
        carets = "^".repeat(statement.len()),
    )
}

#[test]
fn an_update_of_a_variable_holding_an_error_is_skipped_and_carries_the_error_on() {
    let dir = TestDir::new();
    for update in ["A += 1", "A -= 1", "A *= 2", "A /= 2"] {
        // Before the fix, the update ran on the value from before the failed write and erased
        // the error: `print A` printed a number.
        let source = format!("A = ones(2)\nA = ones(2, 3) @ ones(4)\n{update}\nprint A\n");
        for (engine, run) in on_every_engine(&dir, &source, 1) {
            assert_eq!(run.stdout, "", "{update} on {engine}");
            assert_eq!(
                run.stderr,
                matmul_report(2, 1, "A = ones(2, 3) @ ones(4)"),
                "{update} on {engine}"
            );
        }
    }
}

#[test]
fn an_update_of_a_variable_that_never_had_a_value_reports_the_first_error_only() {
    let dir = TestDir::new();
    // Before the fix: a second, misleading error, "`B` has no value", at line 2.
    let source = "B = ones(2, 3) @ ones(4)\nB += 1\nprint B\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(
            run.stderr,
            matmul_report(1, 1, "B = ones(2, 3) @ ones(4)"),
            "{engine}"
        );
    }
}

#[test]
fn a_plain_write_clears_the_error_and_later_updates_run() {
    let dir = TestDir::new();
    let source =
        "A = ones(2)\nA = ones(2, 3) @ ones(4)\nA += 1\nA = ones(2) * 3\nA += 1\nprint A\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(run.stdout, "[4. 4.]\n", "{engine}");
        assert_eq!(
            run.stderr,
            matmul_report(2, 1, "A = ones(2, 3) @ ones(4)"),
            "{engine}"
        );
    }
}

#[test]
fn updates_replayed_by_a_graph_or_a_bulk_skip_a_variable_holding_an_error() {
    let dir = TestDir::new();
    for run_it in ["run g", "with bulk = 2 { run g }"] {
        // The graph updates A in place; A's last write failed before the replay. Before the fix
        // the replay computed on A's older value and `print A` printed [4. 4.].
        let source = format!(
            "A = ones(2)\nC = 0\ngraph g {{\n  A += 1\n  C = A * 2\n}}\nA = ones(2, 3) @ ones(4)\n{run_it}\nprint C\n"
        );
        for (engine, run) in on_every_engine(&dir, &source, 1) {
            assert_eq!(run.stdout, "", "{run_it} on {engine}");
            assert_eq!(
                run.stderr,
                matmul_report(7, 1, "A = ones(2, 3) @ ones(4)"),
                "{run_it} on {engine}"
            );
        }
    }
}

#[test]
fn an_error_inside_a_bulk_names_the_failing_statement_as_without_bulking() {
    let dir = TestDir::new();
    let graph =
        "A = ones(2, 3)\nB = ones(4)\ngraph g {\n  T = A + 1\n  U = T @ B\n  V = U * 2\n}\n";
    // Each report also names the `run` that replayed the statement, at its place, and the
    // loop iteration around it (it named neither, then the `run` without its place).
    for (run_it, within) in [
        ("run g", "  = in `run g` at case.dep:8:1\n"),
        (
            "with bulk = 4 { run g }",
            "  = in `run g` at case.dep:8:17\n",
        ),
        (
            "with bulk = 2 { run g }",
            "  = in `run g` at case.dep:8:17\n",
        ),
        (
            "for i in 0..3 {\n  run g\n}",
            "  = in `run g` at case.dep:9:3\n  = in the loop at case.dep:8:1, at i = 0\n  \
             = it failed so 2 more times at this statement\n",
        ),
    ] {
        // Before the fix, a bulk's error pointed at its first statement, `T = A + 1`, which
        // succeeded.
        let source = format!("{graph}{run_it}\n");
        for (engine, run) in on_every_engine(&dir, &source, 1) {
            assert_eq!(
                run.stderr,
                format!("{}{within}", matmul_report(5, 3, "U = T @ B")),
                "{run_it} on {engine}"
            );
        }
    }
}

/// An op that fails in a function called inside a graph names the calls it was recorded
/// within, then the `run` that replayed it, as the same calls outside a graph would (the calls
/// were left out: the report went from the statement straight to the `run`).
#[test]
fn a_failure_in_a_function_called_in_a_graph_names_the_calls_then_the_run() {
    let dir = TestDir::new();
    let functions = "def inner(x) {\n  return x @ ones(5, 5)\n}\ndef outer(x) {\n  y = inner(x) + 1\n  return y\n}\nX = ones(2, 3)\nY = zeros(2, 5)\n";
    let statement = "  return x @ ones(5, 5)";
    let report = format!(
        "error: matmul: shapes [2, 3] and [5, 5] are not aligned (3 != 5)\n --> case.dep:2:3\n  |\n2 | {statement}\n  |   {} in this statement\n  = in `inner`, called at case.dep:5:7\n",
        "^".repeat(statement.trim().len())
    );
    for (graph, run_it, within) in [
        (
            "graph step {\n  Y = outer(X)\n}\n",
            "for i in 0..2 {\n  run step\n}\n",
            "  = in `outer`, called at case.dep:11:7\n  = in `run step` at case.dep:14:3\n  \
             = in the loop at case.dep:13:1, at i = 0\n  = it failed so 1 more time at this statement\n",
        ),
        // Two calls of `outer`, the second failing: its ops are told apart from the first's,
        // which come from the same lines, alone or in one bulk.
        (
            "graph step {\n  Z = outer(Y)\n  Y = outer(X)\n}\n",
            "run step\n",
            "  = in `outer`, called at case.dep:12:7\n  = in `run step` at case.dep:14:1\n",
        ),
        (
            "graph step {\n  Z = outer(Y)\n  Y = outer(X)\n}\n",
            "with bulk = 8 { run step }\n",
            "  = in `outer`, called at case.dep:12:7\n  = in `run step` at case.dep:14:17\n",
        ),
    ] {
        let source = format!("{functions}{graph}{run_it}");
        for (engine, run) in on_every_engine(&dir, &source, 1) {
            assert_eq!(
                run.stderr,
                format!("{report}{within}"),
                "{run_it} on {engine}"
            );
        }
    }
}

/// A graph reads and writes names that existed before it by name, as a function reads globals:
/// after `del X` and a new `X`, a run updates the new X (it updated the deleted variable,
/// leaving the new X as it was, and the end of the run said `X` has no value); a name deleted
/// and not assigned again is an error at the `run`, before anything runs.
#[test]
fn a_graph_uses_a_name_assigned_again_after_del_and_refuses_one_deleted() {
    let dir = TestDir::new();
    let source = "X = ones(2)\ngraph g { X = X * 2 }\nrun g\ndel X\nX = ones(3)\nrun g\nprint X\n";
    for (engine, run) in on_every_engine(&dir, source, 0) {
        assert_eq!(run.stdout, "[2. 2. 2.]\n", "{engine}: {}", run.stderr);
        assert_eq!(run.stderr, "", "{engine}");
    }
    // An entry of a list of variables, made anew: the graph writes the new one.
    let source = "x = slots(2)\nset(x, 1, ones(2))\ngraph g { set(x, 1, x[1] + 1) }\nrun g\ndel x\nx = slots(2)\nset(x, 1, zeros(2))\nrun g\nprint x[1]\n";
    for (engine, run) in on_every_engine(&dir, source, 0) {
        assert_eq!(run.stdout, "[1. 1.]\n", "{engine}: {}", run.stderr);
    }
    let source = "X = ones(2)\nW = ones(2)\ngraph step { W = W + X }\nrun step\ndel X\nrun step\nprint \"not reached\"\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(run.stdout, "", "{engine}");
        assert_eq!(
            run.stderr,
            "error: graph `step` reads or writes `X`, which was deleted after the graph was recorded; assign `X` before `run step`\n --> case.dep:6:5\n  |\n6 | run step\n  |     ^^^^ run here\n",
            "{engine}"
        );
    }
}

/// Inputs an audit found taken without a word or failing late: each is an error at its place
/// on every engine, before anything waits.
#[test]
fn a_parameter_named_twice_and_a_zero_sized_huge_shape_are_handled_at_their_place() {
    let dir = TestDir::new();
    for (_, run) in on_every_engine(&dir, "def f(x, y, x) {\n  return x\n}\nprint 1\n", 2) {
        assert_eq!(run.stdout, "");
        assert!(
            run.stderr.starts_with(
                "error: `x` names two parameters of `f` (parameter 3)\n --> case.dep:1:13\n"
            ),
            "{}",
            run.stderr
        );
    }
    // Any dimension 0 makes an empty tensor, however large the others' product.
    let source = "x = zeros(16777216, 16777216, 16777216, 16777216, 0)\nprint sum(x)\n";
    for (engine, run) in on_every_engine(&dir, source, 0) {
        assert_eq!(run.stdout, "0.0\n", "{engine}: {}", run.stderr);
    }
}

/// A statement that fails on every iteration of a loop is reported once, with how many more
/// times it failed; past 10,000 failures the engine counts them instead of keeping them, so a
/// loop failing a million times keeps the memory of a short one (it kept some 780 bytes each).
#[test]
fn a_loop_failing_at_every_iteration_is_reported_once_with_its_count() {
    let dir = TestDir::new();
    for (engine, run) in on_every_engine(
        &dir,
        "for i in 0..5 { B = ones(2) @ ones(3) }\nprint 1\n",
        1,
    ) {
        assert_eq!(run.stdout, "1.0\n", "{engine}");
        assert_eq!(
            run.stderr.matches("error: matmul").count(),
            1,
            "{engine}: {}",
            run.stderr
        );
        assert!(
            run.stderr
                .contains("  = it failed so 4 more times at this statement"),
            "{engine}: {}",
            run.stderr
        );
    }
    dir.write("many.dep", "for i in 0..10005 { B = ones(2) @ ones(3) }\n");
    let run = Run::of(dir.dep().args(["run", "many.dep", "--engine", "naive"])).expect_code(1);
    assert!(
        run.stderr
            .contains("  = it failed so 9999 more times at this statement")
            && run
                .stderr
                .contains("error: 5 more ops failed after the first 10000, not kept"),
        "{}",
        run.stderr
    );
}

/// Updating a global inside a function would update a local copy and leave the global as it
/// was: an error at the update, on every engine. A parameter updated there is the function's
/// own, and a name it assigns shadows the global of that name.
#[test]
fn a_function_that_updates_a_global_is_an_error_at_the_update() {
    let dir = TestDir::new();
    let source =
        "W = ones(2)\ndef sgd(g) {\n  W -= 0.5 * g\n  return W\n}\nR = sgd(ones(2))\nprint R\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(run.stdout, "", "{engine}");
        assert!(
            run.stderr.starts_with(
                "error: `W` is a global: a function reads globals but cannot update them; return \
                 the new value and assign it where you call the function (`W = f(...)`)\n --> case.dep:3:3\n"
            ),
            "{engine}: {}",
            run.stderr
        );
    }
    let source = "W = ones(2)\ndef f(g) {\n  g -= 1\n  W = g * 2\n  return W\n}\nprint f(ones(2))\nprint W\n";
    for (engine, run) in on_every_engine(&dir, source, 0) {
        assert_eq!(run.stdout, "[0. 0.]\n[1. 1.]\n", "{engine}");
    }
}

/// Deleting a global or a function inside a function is an error that says so: it said
/// "unknown name `a`" of a global that exists. A local deleted there is the function's own.
#[test]
fn a_function_that_deletes_a_global_is_an_error_that_says_so() {
    let dir = TestDir::new();
    for (source, expected) in [
        (
            "a = 1\ndef f(x) {\n  del a\n  return x\n}\nprint f(1)\n",
            "error: `a` is a global: a function reads globals but cannot delete them; delete it \
             where it was defined, outside the function\n --> case.dep:3:7\n",
        ),
        (
            "def g(x) { return x }\ndef f(x) {\n  del g\n  return x\n}\nprint f(1)\n",
            "error: `g` is a function: a function cannot delete one; delete it outside\n \
             --> case.dep:3:7\n",
        ),
    ] {
        for (engine, run) in on_every_engine(&dir, source, 1) {
            assert!(run.stderr.starts_with(expected), "{engine}: {}", run.stderr);
        }
    }
    let source = "a = 5\ndef f(x) {\n  a = x + 1\n  del a\n  return x\n}\nprint f(1)\nprint a\n";
    for (engine, run) in on_every_engine(&dir, source, 0) {
        assert_eq!(run.stdout, "1.0\n5.0\n", "{engine}");
    }
}

/// Failures reported together at the end of a run come in source order on every engine: the
/// threaded engine reported the line-7 error before the line-2 one when it finished first.
#[test]
fn failures_reported_together_come_in_source_order_on_every_engine() {
    let dir = TestDir::new();
    let source = "A = ones(300, 300)\nX = A @ ones(5)\nB = A @ A\nfor k in 0..3 {\n  B = B @ A\n}\nY = ones(2) + ones(3)\nprint \"mid\", B[0, 0]\nZ = log(A) @ ones(7)\nprint \"end\"\n";
    let runs = on_every_engine(&dir, source, 1);
    for (engine, run) in &runs {
        let lines: Vec<&str> = run
            .stderr
            .lines()
            .filter_map(|line| line.strip_prefix(" --> case.dep:"))
            .collect();
        assert_eq!(lines, ["2:1", "7:1", "9:1"], "{engine}: {}", run.stderr);
        assert_eq!(run.stderr, runs[0].1.stderr, "{engine}");
    }
}

/// A statement that fails on every iteration of a loop with another message each time (other
/// shapes) is reported once, with how many more times it failed and the last message, on every
/// engine and observed too (where each iteration's op is labelled with its counter): it was
/// 298 reports.
#[test]
fn a_loop_statement_failing_with_other_messages_is_reported_once() {
    let dir = TestDir::new();
    let source = "for i in 1..300 { B = ones(i) + ones(i + 1) }\nprint \"done\"\n";
    let folded = "  = it failed so 297 more times at this statement, every time with other \
                  messages (the last: cannot broadcast shapes [299] and [300])";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(
            run.stderr.matches("error:").count(),
            1,
            "{engine}: {}",
            run.stderr
        );
        assert!(
            run.stderr
                .starts_with("error: cannot broadcast shapes [2] and [3]\n")
                && run.stderr.contains(folded),
            "{engine}: {}",
            run.stderr
        );
    }
    let run = Run::of(dir.dep().args(["run", "case.dep", "--summary"])).expect_code(1);
    assert!(run.stderr.contains(folded), "{}", run.stderr);
}

/// A call that recurses until the depth limit tells the recursive call once, then how many
/// more times it came, like Python's "previous line repeated": not 63 identical lines.
#[test]
fn a_recursion_past_the_depth_limit_tells_its_call_once_and_counts_the_rest() {
    let dir = TestDir::new();
    let source = "def f(x) {\n  return f(x)\n}\na = ones(2)\nb = f(a)\n";
    let expected = "error: functions call each other more than 64 deep\n --> case.dep:2:10\n  |\n2 |   return f(x)\n  |          ^^^^ in this call\n  = in `f`, called at case.dep:2:10\n  = (the same, 62 more times)\n  = in `f`, called at case.dep:5:5\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(run.stderr, expected, "{engine}");
    }
}

/// Two functions calling each other until the depth limit: both calls told once, then how
/// many more times the pair came.
#[test]
fn a_mutual_recursion_past_the_depth_limit_tells_its_two_calls_once() {
    let dir = TestDir::new();
    let source = "def f(n) { return g(n) }\ndef g(n) { return f(n) }\nprint f(1)\n";
    let expected = "error: functions call each other more than 64 deep\n --> case.dep:2:19\n  |\n2 | def g(n) { return f(n) }\n  |                   ^^^^ in this call\n  = in `g`, called at case.dep:1:19\n  = in `f`, called at case.dep:2:19\n  = (the same 2 calls, 30 more times)\n  = in `g`, called at case.dep:1:19\n  = in `f`, called at case.dep:3:7\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(run.stderr, expected, "{engine}");
    }
}

/// Python's `range(n)` in a loop's head says how dep writes the range: a syntax error (exit 2),
/// as it was a run-time one (exit 1).
#[test]
fn a_loop_over_range_says_how_dep_writes_it() {
    let dir = TestDir::new();
    let source = "n = 4\nfor i in range(1, n + 1) { print i }\n";
    let expected = "error: dep has no `range`: a for loop runs over `1..n + 1`\n --> case.dep:2:10\n  |\n2 | for i in range(1, n + 1) { print i }\n  |          ^^^^^^^^^^^^^^^ a range is `start..end`\n";
    for (engine, run) in on_every_engine(&dir, source, 2) {
        assert_eq!(run.stderr, expected, "{engine}");
    }
}

/// A loop over `range(n)` is found by `dep check`, in a block too, and `dep run` runs nothing
/// of the file: `dep check` said ok, and the run printed what came before the loop, then
/// failed with exit 1.
#[test]
fn a_loop_over_range_is_found_by_check_and_nothing_runs() {
    let dir = TestDir::new();
    dir.write(
        "case.dep",
        "print 1\nfor i in range(3) { print i }\ndef f(n) {\n  for j in range(2, n) { wait }\n}\n",
    );
    let expected = "error: dep has no `range`: a for loop runs over `0..3`\n --> case.dep:2:10\n  |\n2 | for i in range(3) { print i }\n  |          ^^^^^^^^ a range is `start..end`\n\nerror: dep has no `range`: a for loop runs over `2..n`\n --> case.dep:4:12\n  |\n4 |   for j in range(2, n) { wait }\n  |            ^^^^^^^^^^^ a range is `start..end`\n";
    let check = Run::of(dir.dep().args(["check", "case.dep"])).expect_code(2);
    assert_eq!(check.stdout, "");
    assert_eq!(
        check.stderr,
        format!("{expected}dep: 2 syntax errors in case.dep\n")
    );
    let run = Run::of(dir.dep().args(["run", "case.dep"])).expect_code(2);
    assert_eq!(run.stdout, "", "nothing runs");
    assert_eq!(run.stderr, expected);
}

/// A builtin redefined and a communication inside an expression are found by `dep check`, and
/// `dep run` runs nothing of the file: `dep check` said ok, and the run printed what came before
/// them, then failed with exit 1.
#[test]
fn a_builtin_redefined_and_a_communication_in_an_expression_are_found_before_anything_runs() {
    let dir = TestDir::new();
    dir.write(
        "case.dep",
        "print 1\nx = ones(3)\nx = allreduce(x) + 1\ndef sum(v) {\n  return v\n}\n",
    );
    let expected = "\
error: allreduce is a statement of its own (x = allreduce(x), broadcast(x, root), y = reduce(x, root), y = allgather(x), send(x, to), x = recv(from, shape...)), not part of an expression
 --> case.dep:3:5
  |
3 | x = allreduce(x) + 1
  |     ^^^^^^^^^^^^ here

error: `sum` is a builtin and cannot be redefined
 --> case.dep:4:5
  |
4 | def sum(v) {
  |     ^^^ defined here
";
    let check = Run::of(dir.dep().args(["check", "case.dep"])).expect_code(2);
    assert_eq!(check.stdout, "");
    assert_eq!(
        check.stderr,
        format!("{expected}dep: 2 syntax errors in case.dep\n")
    );
    let run = Run::of(dir.dep().args(["run", "case.dep"])).expect_code(2);
    assert_eq!(run.stdout, "", "nothing runs");
    assert_eq!(run.stderr, expected);
    // A function of the communication's name is the user's to call.
    dir.write(
        "own.dep",
        "def allreduce(v) {\n  return v * 2\n}\nx = allreduce(ones(2)) + 1\nprint x\n",
    );
    let own = Run::of(dir.dep().args(["run", "own.dep"])).expect_code(0);
    assert_eq!(own.stdout, "[3. 3.]\n");
}

/// A statement of another language (`if`, `while`, `import`) or NumPy's assignment to an index
/// inside a block, at any depth, is named as at the top level, at the statement, by `dep check`
/// and `dep run` alike: they said "expected `,`, found name `i`" and "expected `}`, found `=`".
/// The statements after them are still read: a later syntax error is reported too.
#[test]
fn a_statement_of_another_language_inside_a_block_is_named_as_at_the_top_level() {
    let dir = TestDir::new();
    dir.write(
        "case.dep",
        "A = ones(2)\nfor i in 0..2 { if i == 1 { print i } }\ndef f(x) {\n  y = x + 1\n  while y < 3 {\n    y += 1\n  }\n  return y\n}\nwith priority = 1 { for k in 0..2 { import numpy } }\nfor i in 0..2 { A[0] = 5 }\nB = )\n",
    );
    let expected = "\
error: dep has no `if` statement
 --> case.dep:2:17
  |
2 | for i in 0..2 { if i == 1 { print i } }
  |                 ^^ every statement runs; `with rank = 0 { ... }` runs a block on one rank only

error: dep has no `while` statement
 --> case.dep:5:3
  |
5 |   while y < 3 {
  |   ^^^^^ a loop runs over a range: `for i in 0..n { ... }`

error: dep has no `import` statement
  --> case.dep:10:37
   |
10 | with priority = 1 { for k in 0..2 { import numpy } }
   |                                     ^^^^^^ every builtin is always there; the REPL's `:load FILE` runs a file

error: dep has no assignment to an index or a slice (`A[0] = ...`)
  --> case.dep:11:17
   |
11 | for i in 0..2 { A[0] = 5 }
   |                 ^^^^ a variable is written whole (`A = ...`); an entry of a list made with `slots(n)` is written with `set(A, 0, value)`

error: unmatched `)`
  --> case.dep:12:5
   |
12 | B = )
   |     ^ this bracket closes nothing
";
    let check = Run::of(dir.dep().args(["check", "case.dep"])).expect_code(2);
    assert_eq!(
        check.stderr,
        format!("{expected}dep: 5 syntax errors in case.dep\n")
    );
    let run = Run::of(dir.dep().args(["run", "case.dep"])).expect_code(2);
    assert_eq!(run.stdout, "", "nothing runs");
    assert_eq!(run.stderr, expected);
}

/// A string in quotes is a file's path: anywhere but as `load`'s path the error points at the
/// string when the statement compiles (the statement is not pushed), and `load` of something
/// else points at what it was given. The variables written before keep their values.
#[test]
fn a_string_where_a_tensor_belongs_is_pointed_at() {
    let dir = TestDir::new();
    let source = "x = ones(3)\nprint x\ny = x + \"a\"\n";
    let expected = "error: the string \"a\" is not a tensor: a string in quotes is a file's path, read with load(\"x.npy\")\n --> case.dep:3:9\n  |\n3 | y = x + \"a\"\n  |         ^^^ a string\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(run.stderr, expected, "{engine}");
        assert_eq!(run.stdout, "[1. 1. 1.]\n", "{engine}");
    }
    let source = "x = load(1 + 1)\n";
    let expected = "error: load takes a file's path in quotes, as in load(\"x.npy\")\n --> case.dep:1:10\n  |\n1 | x = load(1 + 1)\n  |          ^^^^^ not a path\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(run.stderr, expected, "{engine}");
    }
}

/// A name first assigned inside a recorded graph is the graph's own buffer: read after a run,
/// the error says so and how to keep it, rather than suggesting another name.
#[test]
fn reading_a_graphs_own_buffer_after_a_run_says_how_to_keep_it() {
    let dir = TestDir::new();
    let source = "W = ones(3)\ngraph g {\n  W = W * 2\n  V = W + 1\n}\nrun g\nprint V\n";
    let expected = "error: unknown name `V`: `V` is first assigned inside graph `g`, so it is the graph's own buffer, not kept after a run; assign `V` before `graph g` to read it\n --> case.dep:7:7\n  |\n7 | print V\n  |       ^ not defined out of the graph\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(run.stderr, expected, "{engine}");
    }
    // Assigned before the graph, it is read and written as usual and keeps its value.
    let source =
        "W = ones(3)\nV = zeros(3)\ngraph g {\n  W = W * 2\n  V = W + 1\n}\nrun g\nprint V\n";
    for (engine, run) in on_every_engine(&dir, source, 0) {
        assert_eq!(run.stdout, "[3. 3. 3.]\n", "{engine}");
    }
}

/// A statement error inside loops and calls says where the run was, innermost first, like a
/// traceback: the call and the place it was made, then each loop with its counters.
#[test]
fn a_statement_error_in_a_loop_names_the_iteration_and_the_calls_around_it() {
    let dir = TestDir::new();
    let source = "def g(a, b) {\n  return a + zz\n}\nfor i in 0..3 {\n  for j in 0..2 {\n    y = g(ones(2), i)\n  }\n}\n";
    let expected = "error: unknown name `zz`\n --> case.dep:2:14\n  |\n2 |   return a + zz\n  |              ^^ not defined\n  = in `g`, called at case.dep:6:9\n  = in the loop at case.dep:5:3, at j = 0\n  = in the loop at case.dep:4:1, at i = 0\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(run.stderr, expected, "{engine}");
    }
    // The loop stops where the statement failed: the iteration named is the one it reached.
    let source = "t = ones(2)\nfor i in 0..5 {\n  print i\n  del t\n}\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(run.stdout, "0\n1\n", "{engine}: {}", run.stderr);
        assert!(
            run.stderr
                .ends_with("  = in the loop at case.dep:2:1, at i = 1\n"),
            "{engine}: {}",
            run.stderr
        );
    }
}

/// An op that fails on the engine inside a function names the calls it was pushed within, as
/// an error found at push time does: each call of a function that failed says where it was made.
#[test]
fn an_op_failing_inside_functions_names_the_calls_it_was_pushed_within() {
    let dir = TestDir::new();
    let source = "a = ones(4)\ndef f(x) {\n  y = x + 1\n  return y[10]\n}\ndef g(x) {\n  return f(x) * 2\n}\nb = f(ones(20))\nc = g(a)\nprint b\n";
    let expected = "error: index 10 is out of range for axis 0 of size 4\n --> case.dep:4:3\n  |\n4 |   return y[10]\n  |   ^^^^^^^^^^^^ in this statement\n  = in `f`, called at case.dep:7:10\n  = in `g`, called at case.dep:10:5\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(run.stdout, "2.0\n", "{engine}");
        assert_eq!(run.stderr, expected, "{engine}");
    }
    // Read by a `print`, the failure is reported there, with its calls too.
    let source = "def f(x) {\n  return x[10]\n}\nb = f(ones(4))\nprint b\nprint \"after\"\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(run.stdout, "", "{engine}");
        assert!(
            run.stderr.contains(" --> case.dep:2:3\n")
                && run.stderr.contains("  = in `f`, called at case.dep:4:5\n"),
            "{engine}: {}",
            run.stderr
        );
    }
    // A failure early in a long run of calls, reported at its end, still names its call: the
    // interpreter forgets where old ops were pushed, but not a failed one's.
    let source = "def f(x) {\n  return x[10]\n}\nb = f(ones(4))\ndef g(x) {\n  return x + 1\n}\nfor i in 0..40000 {\n  c = g(ones(1))\n}\nprint c\n";
    dir.write("case.dep", source);
    let run = Run::of(dir.dep().args(["run", "case.dep"])).expect_code(1);
    assert_eq!(run.stdout, "[2.]\n");
    assert!(
        run.stderr
            .ends_with(" in this statement\n  = in `f`, called at case.dep:4:5\n"),
        "{}",
        run.stderr
    );
}

/// An op that failed on the engine may have been pushed at another iteration than the one the
/// interpreter is at when the failure is seen, so its report names the loops and calls it was
/// pushed within, as a push-time error does, observed (`--summary`) or not: an unobserved run
/// named no iteration.
#[test]
fn an_op_failure_in_a_loop_names_the_iteration_it_was_pushed_at() {
    let dir = TestDir::new();
    let source = "x = ones(2, 2)\nfor i in 0..5 {\n  x = x @ ones(2, i + 1)\n}\n";
    let expected = "3 |   x = x @ ones(2, i + 1)\n  |   ^^^^^^^^^^^^^^^^^^^^^^ in this statement\n  = in the loop at case.dep:2:1, at i = 1\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert!(run.stderr.ends_with(expected), "{engine}: {}", run.stderr);
    }
    for engine in ["naive", "threaded", "sim"] {
        let run = Run::of(
            dir.dep()
                .args(["run", "case.dep", "--summary", "--engine", engine]),
        )
        .expect_code(1);
        assert!(run.stderr.ends_with(expected), "{engine}: {}", run.stderr);
    }
}

/// Nested loops and the calls within them name every level at the iteration the failing op
/// was pushed at, innermost first.
#[test]
fn an_op_failure_in_a_call_in_nested_loops_names_every_level() {
    let dir = TestDir::new();
    let source = "def f(a, n) {\n  return a[n]\n}\nA = ones(3)\nfor i in 0..2 {\n  for j in 0..3 {\n    B = f(A, i + j)\n  }\n}\nwait\n";
    let expected = "  = in `f`, called at case.dep:7:9\n  = in the loop at case.dep:6:3, at j = 2\n  = in the loop at case.dep:5:1, at i = 1\n  = reported by the `wait` at case.dep:10:1, where the run stops\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert!(
            run.stderr
                .starts_with("error: index 3 is out of range for axis 0 of size 3\n")
                && run.stderr.ends_with(expected),
            "{engine}: {}",
            run.stderr
        );
    }
}

/// A `print` of a variable whose last write failed in a loop reports that failure (the last
/// iteration's); the run's end reports the loop's others once, from the first, and says that
/// one more was reported above: it said nothing of it, so "the last" it named seemed wrong.
#[test]
fn the_failures_of_a_loop_a_print_met_one_of_are_reported_once_each() {
    let dir = TestDir::new();
    let source = "A = ones(4)\nfor i in 0..8 { B = A[i] }\nprint B\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        let reports: Vec<&str> = run.stderr.split("error: ").skip(1).collect();
        assert_eq!(reports.len(), 2, "{engine}: {}", run.stderr);
        assert!(
            reports[0].starts_with("index 7 is out of range for axis 0 of size 4\n")
                && reports[0].ends_with("  = in the loop at case.dep:2:1, at i = 7\n"),
            "{engine}: {}",
            run.stderr
        );
        assert!(
            reports[1].starts_with("index 4 is out of range for axis 0 of size 4\n")
                && reports[1].ends_with(
                    "  = in the loop at case.dep:2:1, at i = 4\n  = it failed so 2 more times at \
                     this statement, every time with other messages (the last: index 6 is out of \
                     range for axis 0 of size 4)\n  = 1 other failure of this statement was \
                     reported above\n"
                ),
            "{engine}: {}",
            run.stderr
        );
    }
}

/// `dep check` of a file with more syntax errors than it reports counts those it reported and
/// says there are more (it said 101: the hundred, and the line saying it stopped).
#[test]
fn check_past_its_error_limit_says_there_are_more() {
    let dir = TestDir::new();
    dir.write("many.dep", &"x = )\n".repeat(150));
    let check = Run::of(dir.dep().args(["check", "many.dep"])).expect_code(2);
    assert!(
        check.stderr.ends_with(
            "dep: more than 100 syntax errors in many.dep: the first 100 are reported\n"
        ),
        "{}",
        check.stderr
    );
}

/// A `wait` that reports failures stops the run there, and its report says so: the statements
/// after it did not run, which the report did not tell.
#[test]
fn a_wait_that_reports_a_failure_says_the_run_stops_there() {
    let dir = TestDir::new();
    let source = "A = ones(2, 3) @ ones(4)\nwait\nprint \"after\"\n";
    for (engine, run) in on_every_engine(&dir, source, 1) {
        assert_eq!(run.stdout, "", "{engine}");
        assert_eq!(
            run.stderr,
            matmul_report(1, 1, "A = ones(2, 3) @ ones(4)")
                + "  = reported by the `wait` at case.dep:2:1, where the run stops\n",
            "{engine}"
        );
    }
}
