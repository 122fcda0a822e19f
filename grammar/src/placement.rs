//! Where statements may stand, checked when a top-level statement is parsed: a `return`
//! inside a function, with no statement after it in its block (none would run), a recorded
//! block (`graph`, `priority auto`) at the top level, no statement that only the host can do
//! (`print`, `wait`, `save`, ...) recorded in one, and no parameter named twice. Each of these would otherwise fail only when its statement runs,
//! after the statements before it had run and printed: `dep check` reports them with the
//! syntax errors, at their place.

use crate::ast::{Block, Stmt, StmtKind};
use crate::Diagnostic;

/// The first misplaced statement within the top-level statement `stmt`, if any; `in_function`:
/// `stmt` is meant to be in a function's body (one indented under a `def` that failed to parse).
pub(crate) fn misplaced(stmt: &Stmt, in_function: bool) -> Option<Diagnostic> {
    check(
        stmt,
        Within {
            function: in_function,
            recorded: None,
        },
    )
}

/// What a statement stands within.
#[derive(Clone, Copy, Default)]
struct Within {
    /// A function's body.
    function: bool,
    /// A recorded block: its noun (`graph`, `` `priority auto` block``).
    recorded: Option<&'static str>,
}

fn check(stmt: &Stmt, within: Within) -> Option<Diagnostic> {
    if let Some(block) = within.recorded {
        if let Some(keyword) = stmt.host_only_keyword() {
            return Some(Diagnostic::new(
                format!(
                    "`{keyword}` cannot be recorded in a {block}: a {block} holds computations \
                     only; put it before or after the {block}"
                ),
                stmt.span,
                "cannot be recorded",
            ));
        }
    }
    match &stmt.kind {
        StmtKind::Return(_) if within.recorded.is_some() => Some(Diagnostic::new(
            "`return` inside a recorded block",
            stmt.span,
            "here",
        )),
        StmtKind::Return(_) if !within.function => Some(Diagnostic::new(
            "`return` outside a function",
            stmt.span,
            "here",
        )),
        StmtKind::Def { name, params, body } => {
            for (index, param) in params.iter().enumerate() {
                if params[..index].iter().any(|other| other.text == param.text) {
                    return Some(Diagnostic::new(
                        format!(
                            "`{}` names two parameters of `{}` (parameter {})",
                            param.text,
                            name.text,
                            index + 1
                        ),
                        param.span,
                        "a parameter named twice",
                    ));
                }
            }
            let within = Within {
                function: true,
                ..within
            };
            check_block(body, within)
        }
        StmtKind::Graph { body, .. } | StmtKind::PriorityAuto { body } => {
            if within.function || within.recorded.is_some() {
                return Some(Diagnostic::new(
                    "a block is recorded at the top level, not inside a graph or a function",
                    stmt.span,
                    "a recorded block",
                ));
            }
            let noun = match stmt.kind {
                StmtKind::Graph { .. } => "graph",
                _ => "`priority auto` block",
            };
            let within = Within {
                recorded: Some(noun),
                ..within
            };
            check_block(body, within)
        }
        StmtKind::For { body, .. } | StmtKind::With { body, .. } => check_block(body, within),
        _ => None,
    }
}

fn check_block(block: &Block, within: Within) -> Option<Diagnostic> {
    for (index, stmt) in block.statements.iter().enumerate() {
        if let Some(diagnostic) = check(stmt, within) {
            return Some(diagnostic);
        }
        let after_return = matches!(stmt.kind, StmtKind::Return(_))
            .then(|| block.statements.get(index + 1))
            .flatten();
        if let Some(never_run) = after_return {
            return Some(Diagnostic::new(
                "this statement comes after a `return` in its block, so it never runs",
                never_run.span,
                "never runs",
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::parse;

    /// The message and the place of the one error `source` has.
    fn error_of(source: &str) -> (String, String) {
        let output = parse(source);
        assert_eq!(
            output.diagnostics.len(),
            1,
            "{source}: {:?}",
            output.diagnostics
        );
        let diagnostic = &output.diagnostics[0];
        (
            diagnostic.message.clone(),
            diagnostic.span.text(source).trim_end().to_string(),
        )
    }

    #[test]
    fn misplaced_statements_are_errors_at_their_place() {
        for (source, message, place) in [
            (
                "def g(x, x) {\n  return x\n}",
                "`x` names two parameters of `g` (parameter 2)",
                "x",
            ),
            ("return 1", "`return` outside a function", "return 1"),
            (
                "def f(x) {\n  return x\n  y = x + 1\n}",
                "this statement comes after a `return` in its block, so it never runs",
                "y = x + 1",
            ),
            (
                "def f(x) {\n  for i in 0..2 {\n    return x\n    print i\n  }\n  return x\n}",
                "this statement comes after a `return` in its block, so it never runs",
                "print i",
            ),
            (
                "for i in 0..2 { return i }",
                "`return` outside a function",
                "return i",
            ),
            (
                "def f(x) {\n  graph g { y = x + 1 }\n  return x\n}",
                "a block is recorded at the top level, not inside a graph or a function",
                "graph g { y = x + 1 }",
            ),
            (
                "graph g {\n  y = 1\n  print y\n}",
                "`print` cannot be recorded in a graph: a graph holds computations only; put it \
                 before or after the graph",
                "print y",
            ),
            (
                "graph g {\n  for i in 0..2 { save(y, \"y.npy\") }\n}",
                "`save` cannot be recorded in a graph: a graph holds computations only; put it \
                 before or after the graph",
                "save(y, \"y.npy\")",
            ),
            (
                "priority auto {\n  wait\n}",
                "`wait` cannot be recorded in a `priority auto` block: a `priority auto` block \
                 holds computations only; put it before or after the `priority auto` block",
                "wait",
            ),
            (
                "graph g {\n  y = 1\n  return y\n}",
                "`return` inside a recorded block",
                "return y",
            ),
        ] {
            let (got, at) = error_of(source);
            assert_eq!((got.as_str(), at.as_str()), (message, place), "{source}");
        }
    }

    #[test]
    fn statements_in_their_places_are_no_errors() {
        let source = "def f(x, y) {\n  def h(z) {\n    return z\n  }\n  for i in 0..2 { \
                      print x }\n  return h(x) + y\n}\ngraph g {\n  for i in 0..2 { y = f(1, 2) }\n}\n\
                      with gpu0 { return_value = 1 }";
        assert!(
            parse(source).diagnostics.is_empty(),
            "{:?}",
            parse(source).diagnostics
        );
    }
}
