//! The entry point [`parse`]: splits the source into top-level statements,
//! parses each one with the pest grammar (`dep.pest`), lowers the good ones
//! into the syntax tree and reports one diagnostic per bad one, so that all
//! syntax errors of a file are reported at once.

use pest::Parser;
use pest_derive::Parser;

use crate::ast::Program;
use crate::chunk::Chunker;
use crate::diagnostic::Diagnostic;
use crate::lower::Lowerer;
use crate::placement;
use crate::syntax_error::syntax_error;

/// The most syntax errors reported for one source (a binary file would
/// otherwise give one per line); the next one found is replaced by a
/// diagnostic saying that parsing stopped there.
pub(crate) const MAX_DIAGNOSTICS: usize = 100;

/// The pest parser generated from `dep.pest`.
#[derive(Parser)]
#[grammar = "dep.pest"]
struct StatementParser;

/// What [`parse`] returns: the statements that parsed, and a diagnostic for
/// each statement that did not.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParseOutput {
    /// The statements that parsed without errors, in source order.
    pub program: Program,
    /// One diagnostic per top-level statement with a syntax error, in
    /// source order.
    pub diagnostics: Vec<Diagnostic>,
}

impl ParseOutput {
    /// Whether the source parsed without any error.
    pub fn is_ok(&self) -> bool {
        self.diagnostics.is_empty()
    }

    /// How many syntax errors the diagnostics report, and whether parsing stopped after them
    /// (the last diagnostic then says so, and more errors may follow in the source).
    pub fn n_errors(&self) -> (usize, bool) {
        let stopped = self.diagnostics.len() > MAX_DIAGNOSTICS;
        (self.diagnostics.len() - usize::from(stopped), stopped)
    }
}

/// Parses a whole `.dep` source. Never fails and never panics: statements
/// with syntax errors are left out of the program and reported in the
/// diagnostics, at most one per top-level statement. After
/// `MAX_DIAGNOSTICS` errors, parsing stops at the next one, with a last
/// diagnostic that says so.
///
/// Statements end at a newline or `;` outside brackets; a newline right
/// after a binary operator or `,`, or inside `(...)` or `[...]`, does not end
/// a statement. A block's `{` must be on the same line as its header.
pub fn parse(source: &str) -> ParseOutput {
    let mut output = ParseOutput::default();
    let mut previous_failed = false;
    for chunk in Chunker::new(source) {
        let text = chunk.text.as_str();
        let result = match chunk.problem {
            Some(problem) => Err(problem),
            None => match StatementParser::parse(Rule::single_statement, text) {
                Ok(mut pairs) => match pairs.next() {
                    Some(pair) => {
                        Lowerer::new(chunk.span.start)
                            .statement(pair)
                            .and_then(|statement| match placement::misplaced(&statement) {
                                Some(misplaced) => Err(misplaced),
                                None => Ok(statement),
                            })
                    }
                    None => Err(Diagnostic::new(
                        "internal error: empty parse",
                        chunk.span,
                        "please report this statement",
                    )),
                },
                Err(error) => Err(syntax_error(
                    &error,
                    text,
                    chunk.span.start,
                    &chunk.continued_after,
                )),
            },
        };
        match result {
            Ok(statement) => {
                output.program.statements.push(statement);
                previous_failed = false;
            }
            Err(diagnostic) => {
                // A `{` on the line after a header is one mistake, already
                // reported with the header: say so there, not twice.
                let brace_after_failed_header = previous_failed && text.starts_with('{');
                let reported = output.diagnostics.len();
                match output.diagnostics.last_mut() {
                    Some(header) if brace_after_failed_header => {
                        header
                            .label
                            .push_str(" (a block's `{` must be on the same line as its header)");
                        // Said once: a `{` after this block is a mistake of its own.
                        previous_failed = false;
                        continue;
                    }
                    _ if reported == MAX_DIAGNOSTICS => {
                        output.diagnostics.push(Diagnostic::new(
                            format!("too many syntax errors: stopped after {MAX_DIAGNOSTICS}"),
                            diagnostic.span,
                            "this statement has another error; the rest was not read",
                        ));
                        break;
                    }
                    _ => output.diagnostics.push(diagnostic),
                }
                previous_failed = true;
            }
        }
    }
    output
}
