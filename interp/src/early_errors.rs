//! Mistakes an input's text alone shows, found with its syntax errors, before any of it runs:
//! the runner would refuse them only when it reached them, after the statements before had run
//! and printed (a long loop, then `y = allreduce(x) + 1`). They are a builtin redefined
//! (`def sum(x)`), and a communication (`allreduce`, `send`, ...) called inside an expression
//! rather than as a statement of its own, unless the input or an earlier one defines a function
//! of that name (a user's function wins). The runner keeps its own checks of both, with the same
//! messages.

use dep_grammar::{Block, Diagnostic, Expr, ExprKind, ForIter, IndexItem, Program, Stmt};
use dep_grammar::{StmtKind, WithSetting};

use crate::builtins;

/// The names communication statements are called by.
pub(crate) const COMM_NAMES: [&str; 6] = [
    "allreduce",
    "broadcast",
    "reduce",
    "allgather",
    "send",
    "recv",
];

/// Why a builtin's name cannot name a function.
pub(crate) fn builtin_redefined(name: &str) -> String {
    format!("`{name}` is a builtin and cannot be redefined")
}

/// Why the communication `name` cannot be called inside an expression.
pub(crate) fn comm_in_expression(name: &str) -> String {
    format!(
        "{name} is a statement of its own (x = allreduce(x), broadcast(x, root), y = reduce(x, root), y = allgather(x), send(x, to), x = recv(from, shape...)), not part of an expression"
    )
}

/// The mistakes of `program` found before it runs, in source order; `defined_earlier` says
/// whether an earlier input defined a function of a name.
pub fn early_errors(program: &Program, defined_earlier: &dyn Fn(&str) -> bool) -> Vec<Diagnostic> {
    let mut defined = Vec::new();
    defs_in(&program.statements, &mut defined);
    let mut check = Check {
        is_user_function: &|name| defined.contains(&name) || defined_earlier(name),
        errors: Vec::new(),
    };
    check.statements(&program.statements);
    check.errors
}

/// The names of the functions `statements` define, at any depth.
fn defs_in<'p>(statements: &'p [Stmt], names: &mut Vec<&'p str>) {
    for stmt in statements {
        match &stmt.kind {
            StmtKind::Def { name, body, .. } => {
                names.push(&name.text);
                defs_in(&body.statements, names);
            }
            StmtKind::For { body, .. }
            | StmtKind::With { body, .. }
            | StmtKind::Graph { body, .. }
            | StmtKind::PriorityAuto { body } => defs_in(&body.statements, names),
            _ => {}
        }
    }
}

/// A walk over an input's statements, gathering its mistakes.
struct Check<'a> {
    is_user_function: &'a dyn Fn(&str) -> bool,
    errors: Vec<Diagnostic>,
}

impl Check<'_> {
    fn statements(&mut self, statements: &[Stmt]) {
        for stmt in statements {
            self.statement(stmt);
        }
    }

    fn block(&mut self, block: &Block) {
        self.statements(&block.statements);
    }

    fn statement(&mut self, stmt: &Stmt) {
        match &stmt.kind {
            // A communication stands alone as an assignment's value or as a statement: its
            // arguments are what must not hold one.
            StmtKind::Assign { value, .. } | StmtKind::Expr(value) => self.outermost(value),
            StmtKind::AugAssign { value, .. } | StmtKind::Seed(value) => self.expr(value),
            StmtKind::Print(items) | StmtKind::Return(items) => {
                items.iter().for_each(|item| self.expr(item));
            }
            StmtKind::For { iter, body, .. } => {
                match iter {
                    ForIter::Range { start, end } => {
                        self.expr(start);
                        self.expr(end);
                    }
                    ForIter::Expr(iterated) => self.expr(iterated),
                }
                self.block(body);
            }
            StmtKind::Def { name, body, .. } => {
                if builtins::lookup(&name.text).is_some() {
                    self.errors.push(Diagnostic::new(
                        builtin_redefined(&name.text),
                        name.span,
                        "defined here",
                    ));
                }
                self.block(body);
            }
            StmtKind::With { settings, body } => {
                for setting in settings {
                    if let WithSetting::Value { value, .. } = setting {
                        self.expr(value);
                    }
                }
                self.block(body);
            }
            StmtKind::Graph { body, .. } | StmtKind::PriorityAuto { body } => self.block(body),
            StmtKind::Device { args, .. } => args.iter().for_each(|arg| self.expr(&arg.value)),
            StmtKind::Del(_) | StmtKind::Wait | StmtKind::Run(_) => {}
        }
    }

    /// An expression that may be a communication itself, but holds none within.
    fn outermost(&mut self, expr: &Expr) {
        match &expr.kind {
            ExprKind::Call { args, kwargs, .. } => {
                args.iter().for_each(|arg| self.expr(arg));
                kwargs.iter().for_each(|arg| self.expr(&arg.value));
            }
            _ => self.expr(expr),
        }
    }

    /// An expression that holds no communication.
    fn expr(&mut self, expr: &Expr) {
        match &expr.kind {
            ExprKind::Number(_) | ExprKind::Str(_) | ExprKind::Name(_) => {}
            ExprKind::List(items) => items.iter().for_each(|item| self.expr(item)),
            ExprKind::Unary { operand, .. } => self.expr(operand),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.expr(lhs);
                self.expr(rhs);
            }
            ExprKind::Call { func, .. } => {
                if COMM_NAMES.contains(&func.text.as_str()) && !(self.is_user_function)(&func.text)
                {
                    self.errors.push(Diagnostic::new(
                        comm_in_expression(&func.text),
                        expr.span,
                        "here",
                    ));
                }
                self.outermost(expr);
            }
            ExprKind::Index { base, indices } => {
                self.expr(base);
                for index in indices {
                    match index {
                        IndexItem::Single(item) => self.expr(item),
                        IndexItem::Slice { start, end, .. } => {
                            start.iter().chain(end).for_each(|bound| self.expr(bound));
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages and places of `source`'s early errors.
    fn errors_of(source: &str, defined_earlier: &dyn Fn(&str) -> bool) -> Vec<(String, String)> {
        let parsed = dep_grammar::parse(source);
        assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
        early_errors(&parsed.program, defined_earlier)
            .into_iter()
            .map(|error| (error.message, error.span.text(source).to_string()))
            .collect()
    }

    #[test]
    fn a_builtin_redefined_and_a_communication_within_an_expression_are_found() {
        let none = |_: &str| false;
        assert_eq!(
            errors_of("print 1\ndef sum(x) {\n  return x\n}", &none),
            [(builtin_redefined("sum"), "sum".to_string())]
        );
        let nested = [
            ("x = allreduce(x) + 1", "allreduce(x)"),
            ("print allgather(x)", "allgather(x)"),
            ("y = exp(recv(0, 3))", "recv(0, 3)"),
            ("x += reduce(x, 0)", "reduce(x, 0)"),
            ("for i in 0..2 {\n  y = x[allreduce(x)]\n}", "allreduce(x)"),
            ("def f(x) {\n  return broadcast(x, 0)\n}", "broadcast(x, 0)"),
        ];
        for (source, place) in nested {
            let name = place.split('(').next().unwrap();
            assert_eq!(
                errors_of(&format!("x = ones(3)\n{source}"), &none),
                [(comm_in_expression(name), place.to_string())],
                "{source}"
            );
        }
    }

    #[test]
    fn communications_as_statements_and_users_functions_of_their_names_pass() {
        let none = |_: &str| false;
        for source in [
            "x = allreduce(x)",
            "broadcast(x, 0)",
            "send(x * 2, 1)",
            "y = recv(0, 3)",
            "y = allgather(x)",
            "def allreduce(x) {\n  return x\n}\ny = allreduce(x) + 1",
            "def sums(x) {\n  return x\n}",
        ] {
            assert_eq!(errors_of(source, &none), [], "{source}");
        }
        // A function an earlier input defined.
        let earlier = |name: &str| name == "send";
        assert_eq!(errors_of("y = send(x, 1) * 2", &earlier), []);
    }
}
