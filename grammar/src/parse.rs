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
use crate::placement::misplaced;
use crate::syntax_error::syntax_error;
use crate::tokens::Lexer;

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
/// The statements on the lines indented under a top-level `def` that failed (its body written
/// Python's way, `def f(x):`) are its body: their own syntax errors are reported, but they are
/// placed as in a function (a `return` there is no second error) and left out of the program.
///
/// Statements end at a newline or `;` outside brackets; a newline right
/// after a binary operator or `,`, or inside `(...)` or `[...]`, does not end
/// a statement. A block's `{` must be on the same line as its header.
pub fn parse(source: &str) -> ParseOutput {
    let mut output = ParseOutput::default();
    let mut previous_failed = false;
    let mut failed_def: Option<FailedDef> = None;
    let mut lines = Lines::new(source);
    for chunk in Chunker::new(source) {
        let text = chunk.text.as_str();
        let line = lines.line_of(chunk.span.start);
        let in_body = failed_def.is_some_and(|def| def.holds(line));
        if !in_body {
            failed_def = None;
        }
        let result = match chunk.problem {
            Some(problem) => Err(problem),
            None => match StatementParser::parse(Rule::single_statement, text) {
                Ok(mut pairs) => match pairs.next() {
                    Some(pair) => {
                        Lowerer::new(chunk.span.start)
                            .statement(pair)
                            .and_then(|statement| match misplaced(&statement, in_body) {
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
            // A statement of a failed `def`'s body is the function's, which is not defined.
            Ok(_) if in_body => previous_failed = false,
            Ok(statement) => {
                output.program.statements.push(statement);
                previous_failed = false;
            }
            Err(diagnostic) => {
                if failed_def.is_none() {
                    failed_def = FailedDef::starting(text, line);
                }
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

/// A top-level `def` that failed to parse (`def f(x):`, a block opened Python's way), whose
/// body the lines indented under it are meant to be. Those lines are the function's: they are
/// parsed for their own syntax errors, and placed as in a function (so a `return` among them
/// is not reported too, as if outside one), but left out of the program, the function being
/// undefined.
#[derive(Clone, Copy)]
struct FailedDef {
    /// The line of the `def` keyword.
    line: Line,
}

impl FailedDef {
    /// The failed `def` that the statement `text` on `line`, which failed, is, if it is one.
    fn starting(text: &str, line: Line) -> Option<FailedDef> {
        let first = Lexer::new(text).next()?;
        (first.span.text(text) == "def").then_some(FailedDef { line })
    }

    /// Whether a statement on `line` is in the body: on a later line, indented deeper.
    fn holds(self, line: Line) -> bool {
        line.start > self.line.start && line.indent > self.line.indent
    }
}

/// A line of the source: where it starts, and how many bytes of spaces and tabs begin it.
#[derive(Clone, Copy, Default)]
struct Line {
    start: usize,
    indent: usize,
}

/// Finds the line of each statement going forward through the source (statements come in
/// order), so that the whole source is read once however many statements a line holds.
struct Lines<'source> {
    source: &'source str,
    /// How far the source was read.
    read: usize,
    /// The line `read` is on.
    line: Line,
}

impl<'source> Lines<'source> {
    fn new(source: &'source str) -> Lines<'source> {
        let mut lines = Lines {
            source,
            read: 0,
            line: Line::default(),
        };
        lines.line.indent = lines.indent_at(0);
        lines
    }

    /// The line that `offset`, at or after every offset asked for before, is on.
    fn line_of(&mut self, offset: usize) -> Line {
        let between = self.source.get(self.read..offset).unwrap_or("");
        if let Some(newline) = between.rfind('\n') {
            let start = self.read + newline + 1;
            self.line = Line {
                start,
                indent: self.indent_at(start),
            };
        }
        self.read = self.read.max(offset);
        self.line
    }

    /// How many bytes of spaces and tabs the text at `start` begins with.
    fn indent_at(&self, start: usize) -> usize {
        self.source.as_bytes()[start..]
            .iter()
            .take_while(|byte| matches!(byte, b' ' | b'\t'))
            .count()
    }
}
