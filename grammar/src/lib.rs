//! The `.dep` language front end: a pest grammar, a syntax tree whose nodes
//! all carry source spans, diagnostics rendered as `file:line:col` reports,
//! [`is_complete`] for REPLs and notebooks, and a small token classifier for
//! highlighters. It knows nothing of tensors or of the engine.
//!
//! [`parse`] never fails: it returns the statements that parsed and one
//! [`Diagnostic`] per top-level statement that did not, so every syntax
//! error of a file is reported at once (the first 100 of them). A file is
//! read with [`decode_source`], which names an invalid UTF-8 byte at its
//! place; a byte order mark at the start is accepted.
//!
//! ```
//! let source = "A = 2\nB = A + )\nprint A";
//! let output = dep_grammar::parse(source);
//! assert_eq!(output.program.statements.len(), 2);
//! assert_eq!(output.diagnostics.len(), 1);
//! let rendered = output.diagnostics[0].render("intro.dep", source);
//! assert!(rendered.contains("--> intro.dep:2:9"));
//! assert_eq!(output.program.statements[1].text(source), "print A");
//! ```
#![deny(missing_docs)]

pub mod ast;
mod chunk;
mod complete;
mod decode;
mod diagnostic;
#[cfg(test)]
mod input_tests;
mod lower;
mod parse;
#[cfg(test)]
mod parse_tests;
mod placement;
#[cfg(test)]
mod property_tests;
mod sexpr;
mod span;
mod syntax_error;
mod tokens;

pub use ast::{
    AugOp, BinaryOp, Block, Expr, ExprKind, ForIter, IndexItem, KeywordArg, Name, Program, Stmt,
    StmtKind, UnaryOp, WithSetting,
};
pub use complete::is_complete;
pub use decode::{decode_source, InvalidUtf8};
pub use diagnostic::{render_diagnostics, Diagnostic, MAX_HEADLINE_CHARS};
pub use parse::{parse, ParseOutput};
pub use span::{LineColumn, LineIndex, Span};
pub use tokens::{is_keyword, tokens, Token, TokenKind, KEYWORDS};
