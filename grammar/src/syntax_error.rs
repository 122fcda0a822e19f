//! Turns a pest parse error into a [`Diagnostic`] in words users know:
//! rule names become phrases such as "an expression", "a name", "`)`" or
//! "end of statement", and the diagnostic says what was found instead.

use pest::error::{Error, ErrorVariant, InputLocation};

use crate::diagnostic::{join_alternatives, Diagnostic};
use crate::parse::Rule;
use crate::span::Span;
use crate::tokens::{Lexer, TokenKind};

/// The rank of "an operator" among the things expected.
const OPERATOR_RANK: u8 = 5;

/// How one grammar rule is described to users, and where the description
/// goes in a list of alternatives (lower ranks first); `None` for rules
/// that are never worth mentioning.
fn describe_rule(rule: Rule) -> Option<(u8, &'static str)> {
    Some(match rule {
        Rule::single_statement
        | Rule::statement
        | Rule::assign_statement
        | Rule::augmented_assign_statement
        | Rule::expression_statement
        | Rule::del_statement
        | Rule::print_statement
        | Rule::seed_statement
        | Rule::wait_statement
        | Rule::run_statement
        | Rule::return_statement
        | Rule::for_statement
        | Rule::def_statement
        | Rule::with_statement
        | Rule::graph_statement
        | Rule::device_statement
        | Rule::priority_auto_statement => (0, "a statement"),
        Rule::expression
        | Rule::sum
        | Rule::product
        | Rule::unary
        | Rule::negation_operator
        | Rule::power
        | Rule::postfix
        | Rule::parenthesized
        | Rule::call
        | Rule::list
        | Rule::number
        | Rule::string
        | Rule::range
        | Rule::index_item
        | Rule::slice_start
        | Rule::slice_end => (1, "an expression"),
        Rule::name
        | Rule::setting_key
        | Rule::with_setting
        | Rule::with_value_setting
        | Rule::with_device_setting => (2, "a name"),
        Rule::keyword_argument => (3, "a keyword argument `name = value`"),
        Rule::block | Rule::open_brace => (4, "`{`"),
        Rule::open_paren => (4, "`(`"),
        Rule::close_paren => (4, "`)`"),
        Rule::open_bracket => (4, "`[`"),
        Rule::close_bracket => (4, "`]`"),
        Rule::close_brace => (4, "`}`"),
        Rule::comma => (4, "`,`"),
        Rule::colon => (4, "`:`"),
        Rule::assign_sign => (4, "`=`"),
        Rule::range_dots => (4, "`..`"),
        Rule::del_keyword => (4, "`del`"),
        Rule::print_keyword => (4, "`print`"),
        Rule::seed_keyword => (4, "`seed`"),
        Rule::wait_keyword => (4, "`wait`"),
        Rule::for_keyword => (4, "`for`"),
        Rule::in_keyword => (4, "`in`"),
        Rule::def_keyword => (4, "`def`"),
        Rule::return_keyword => (4, "`return`"),
        Rule::with_keyword => (4, "`with`"),
        Rule::graph_keyword => (4, "`graph`"),
        Rule::run_keyword => (4, "`run`"),
        Rule::device_keyword => (4, "`device`"),
        Rule::priority_keyword => (4, "`priority`"),
        Rule::auto_keyword => (4, "`auto`"),
        Rule::comparison_operator
        | Rule::additive_operator
        | Rule::multiplicative_operator
        | Rule::power_operator
        | Rule::augmented_operator => (OPERATOR_RANK, "an operator"),
        Rule::separator => (6, "a newline or `;`"),
        Rule::EOI => (7, "end of statement"),
        Rule::parameters
        | Rule::call_arguments
        | Rule::index_suffix
        | Rule::string_content
        | Rule::keyword
        | Rule::WHITESPACE
        | Rule::atom
        | Rule::call_argument
        | Rule::identifier_char
        | Rule::identifier => return None,
    })
}

/// The longest token text quoted in a message.
const MAX_QUOTED_LENGTH: usize = 24;

/// Describes the token at the start of `rest` ("name `x`", "`)`", "end of
/// statement"...) and returns its byte length.
fn describe_found(rest: &str) -> (String, usize) {
    let Some(token) = Lexer::new(rest).next() else {
        return ("end of statement".to_string(), 0);
    };
    let text = token.span.text(rest);
    let quoted = if text.chars().count() > MAX_QUOTED_LENGTH {
        let shortened: String = text.chars().take(MAX_QUOTED_LENGTH).collect();
        format!("`{shortened}...`")
    } else {
        format!("`{text}`")
    };
    let description = match token.kind {
        TokenKind::Keyword => format!("keyword {quoted}"),
        TokenKind::Name => format!("name {quoted}"),
        TokenKind::Number => format!("number {quoted}"),
        TokenKind::String => "a string".to_string(),
        TokenKind::Newline => "end of line".to_string(),
        TokenKind::Operator | TokenKind::Punctuation | TokenKind::Comment | TokenKind::Unknown => {
            quoted
        }
    };
    (description, token.span.end)
}

/// The diagnostic for a statement that starts by assigning to a keyword,
/// such as `run = 1`, if `text` is one.
fn keyword_assignment(text: &str, offset: usize) -> Option<Diagnostic> {
    let mut lexer = Lexer::new(text);
    let (Some(keyword), Some(operator)) = (lexer.next(), lexer.next()) else {
        return None;
    };
    let assigns = matches!(operator.span.text(text), "=" | "+=" | "-=" | "*=" | "/=");
    (keyword.kind == TokenKind::Keyword && assigns).then(|| {
        Diagnostic::new(
            format!("`{}` is a keyword, not a name", keyword.span.text(text)),
            keyword.span.shifted(offset),
            "keywords cannot be assigned to; pick another name",
        )
    })
}

/// The diagnostic for a statement that assigns to an index or a slice, such as `A[0] = 5` or
/// `s[i] += 1` (NumPy's way of writing part of an array), if `text` is one: dep writes a
/// variable whole, and an entry of a list of slots with `set`; said so, rather than "expected
/// an operator, found `=`".
fn indexed_assignment(text: &str, offset: usize) -> Option<Diagnostic> {
    let mut lexer = Lexer::new(text)
        .filter(|token| token.kind != TokenKind::Comment)
        .peekable();
    let name = lexer.next()?;
    if name.kind != TokenKind::Name {
        return None;
    }
    // One or more indexes (`w[k][1]`), each to its closing bracket.
    let mut close = None;
    while lexer
        .next_if(|token| token.span.text(text) == "[")
        .is_some()
    {
        let mut depth = 1;
        close = Some(lexer.by_ref().find(|token| {
            match token.span.text(text) {
                "[" => depth += 1,
                "]" => depth -= 1,
                _ => {}
            }
            depth == 0
        })?);
    }
    let close = close?;
    let operator = lexer.next()?;
    if !matches!(operator.span.text(text), "=" | "+=" | "-=" | "*=" | "/=") {
        return None;
    }
    let name_text = name.span.text(text);
    let indexes = &text[name.span.end..close.span.end];
    let whole = format!("a variable is written whole (`{name_text} = ...`)");
    // One index may be an entry of a list of slots; a slice or several indices cannot.
    let single = indexes
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .filter(|index| !index.contains([':', ',', '[', ']']));
    let label = match single {
        None => whole,
        Some(index) => format!(
            "{whole}; an entry of a list made with `slots(n)` is written with `set({name_text}, {}, value)`",
            index.trim()
        ),
    };
    Some(Diagnostic::new(
        format!(
            "dep has no assignment to an index or a slice (`{name_text}{indexes} {} ...`)",
            operator.span.text(text)
        ),
        Span::new(name.span.start, close.span.end).shifted(offset),
        label,
    ))
}

/// The diagnostic for a block opened Python's way, with a `:` after its head (`def f(x):`,
/// `for i in range(3): print i`), if the parse of `text` failed at that `:` (`position`): dep's
/// blocks are in braces, and its ranges are `start..end`; the label writes the head so.
fn python_block(text: &str, offset: usize, position: usize) -> Option<Diagnostic> {
    let rest = text.get(position..)?.strip_prefix(':')?;
    let first = Lexer::new(text).next()?;
    if !matches!(
        first.span.text(text),
        "def" | "for" | "with" | "graph" | "priority"
    ) {
        return None;
    }
    let head = text[..position].trim_end();
    let head = python_range(head).unwrap_or_else(|| head.to_string());
    let body = match rest.split_once('\n') {
        Some((line, _)) => line,
        None => rest,
    };
    // Up to a comment (a `#` in a string is the string's).
    let comment = Lexer::new(body).find(|token| token.kind == TokenKind::Comment);
    let body = body[..comment.map_or(body.len(), |comment| comment.span.start)].trim();
    let written = match body {
        "" => format!("`{head} {{ ... }}`, the block's statements inside the braces"),
        body => format!("`{head} {{ {body} }}`"),
    };
    Some(Diagnostic::new(
        "dep's blocks are in braces, not after `:`",
        Span::new(position, position + 1).shifted(offset),
        format!("write {written}"),
    ))
}

/// The diagnostic for a slice with a step (NumPy's `a[::2]`, `a[1:9:2]`), if the parse of
/// `text` failed at the `:` of its step (`position`): dep's slices are `start:end`.
fn slice_step(text: &str, offset: usize, position: usize) -> Option<Diagnostic> {
    text.get(position..)?.strip_prefix(':')?;
    let before = &text[..position];
    let bracket = before.rfind('[')?;
    let slice = &before[bracket + 1..];
    if !slice.contains(':') || slice.contains([']', ',']) {
        return None;
    }
    Some(Diagnostic::new(
        "dep's slices have no step",
        Span::new(position, position + 1).shifted(offset),
        "a slice is `start:end` (either may be left out), every element between",
    ))
}

/// The diagnostic for Python's floor division (`x // 2`), if the parse of `text` failed at the
/// second `/` (`position`): dep divides with `/` only.
fn floor_division(text: &str, offset: usize, position: usize) -> Option<Diagnostic> {
    text.get(position..)?.strip_prefix('/')?;
    text[..position].strip_suffix('/')?;
    Some(Diagnostic::new(
        "dep has no floor division `//`",
        Span::new(position - 1, position + 1).shifted(offset),
        "`a / b` divides, in float32; dep has no integer division",
    ))
}

/// `head`, a loop's head over Python's `range(n)` or `range(a, b)` (`for i in range(3)`),
/// written over dep's range (`for i in 0..3`); `None` when it is not one.
fn python_range(head: &str) -> Option<String> {
    let (before, call) = head.split_once(" in range(")?;
    let arguments = call.strip_suffix(')')?;
    if arguments.contains(['(', ')']) {
        return None;
    }
    let bounds: Vec<&str> = arguments.split(',').map(str::trim).collect();
    Some(format!("{before} in {}", dep_range(&bounds)?))
}

/// Python's `range(end)` or `range(start, end)`, given the texts of its arguments, written as
/// dep's range (`0..end`, `start..end`); `None` for any other number of arguments.
pub(crate) fn dep_range(bounds: &[&str]) -> Option<String> {
    match bounds {
        [end] => Some(format!("0..{end}")),
        [start, end] => Some(format!("{start}..{end}")),
        _ => None,
    }
}

/// The span, in `text` (one top-level statement), of the statement that holds `position`: the
/// innermost statement of a block (`{ ...; A[0] = 5 }`) around it, or the whole text when
/// `position` is in no block. The checks for another language's statements look at this
/// statement, so that they name it inside a loop or a function as at the top level.
fn statement_at(text: &str, position: usize) -> Span {
    // The brackets open before `position`; for a `{`, where its current statement starts
    // (`None` right after the `{` or a separator, before the statement's first token).
    let mut open: Vec<(&str, Option<usize>)> = Vec::new();
    let mut tokens = Lexer::new(text).peekable();
    while let Some(token) = tokens.next_if(|token| token.span.start < position) {
        let token_text = token.span.text(text);
        if matches!(token_text, ")" | "]" | "}") {
            open.pop();
        }
        match open.last_mut() {
            Some(("{", start)) if matches!(token_text, "\n" | ";") => *start = None,
            Some(("{", start)) => {
                start.get_or_insert(token.span.start);
            }
            _ => {}
        }
        if matches!(token_text, "(" | "[" | "{") {
            open.push((token_text, None));
        }
    }
    let Some((_, start)) = open.iter().rev().find(|(bracket, _)| *bracket == "{") else {
        return Span::new(0, text.len());
    };
    let start = start.unwrap_or(position);
    // The statement ends at a separator or at the `}` of its block.
    let mut depth = 0usize;
    let mut end = start;
    let rest = text.get(start..).unwrap_or("");
    for token in Lexer::new(rest) {
        match token.span.text(rest) {
            "\n" | ";" if depth == 0 => break,
            ")" | "]" | "}" if depth == 0 => break,
            ")" | "]" | "}" => depth -= 1,
            "(" | "[" | "{" => depth += 1,
            _ => {}
        }
        end = start + token.span.end;
    }
    Span::new(start, end)
}

/// The diagnostic for a statement that starts with a statement of another language that dep
/// does not have (`if`, `while`, `import`, ...), such as `if rank() == 0 { ... }`, if `text` is
/// one: said so, with what dep offers instead, rather than "expected `,`" at its second token.
/// These words are names in dep (`if = 1` is an assignment), so only a statement that does not
/// parse, and whose second token cannot follow a name, is taken for one.
fn foreign_statement(text: &str, offset: usize) -> Option<Diagnostic> {
    let mut lexer = Lexer::new(text).filter(|token| token.kind != TokenKind::Comment);
    let (word, next) = (lexer.next()?, lexer.next()?);
    let opens_a_block = matches!(next.span.text(text), "{" | ":");
    if word.kind != TokenKind::Name
        || (matches!(next.kind, TokenKind::Operator | TokenKind::Punctuation) && !opens_a_block)
    {
        return None;
    }
    let instead = match word.span.text(text) {
        "if" | "elif" | "else" => {
            "every statement runs; `with rank = 0 { ... }` runs a block on one rank only"
        }
        "while" => "a loop runs over a range: `for i in 0..n { ... }`",
        "break" | "continue" => "a `for` loop runs every one of its iterations",
        "import" | "from" => "every builtin is always there; the REPL's `:load FILE` runs a file",
        "class" | "try" | "except" | "lambda" => {
            "statements are assignments, `print`, `for`, `def`, `with`, `graph`, `run`"
        }
        _ => return None,
    };
    Some(Diagnostic::new(
        format!("dep has no `{}` statement", word.span.text(text)),
        word.span.shifted(offset),
        instead,
    ))
}

/// Converts the pest `error` from parsing `text` (which starts `offset`
/// bytes into the source) into a diagnostic. `continued_after` holds the
/// source spans of the line-ending operators and commas that made the
/// statement go on to the next line.
pub(crate) fn syntax_error(
    error: &Error<Rule>,
    text: &str,
    offset: usize,
    continued_after: &[Span],
) -> Diagnostic {
    let position = match error.location {
        InputLocation::Pos(position) => position,
        InputLocation::Span((start, _)) => start,
    };
    // The statement that failed, at any depth of blocks, and where in it.
    let statement = statement_at(text, position);
    let (inner, inner_offset) = (statement.text(text), offset + statement.start);
    let inner_position = position.saturating_sub(statement.start);
    if let Some(diagnostic) = keyword_assignment(inner, inner_offset)
        .or_else(|| foreign_statement(inner, inner_offset))
        .or_else(|| indexed_assignment(inner, inner_offset))
        .or_else(|| python_block(inner, inner_offset, inner_position))
        .or_else(|| slice_step(inner, inner_offset, inner_position))
        .or_else(|| floor_division(inner, inner_offset, inner_position))
    {
        return diagnostic;
    }
    let (found, found_length) = describe_found(text.get(position..).unwrap_or(""));
    let span = Span::new(position, position + found_length).shifted(offset);
    let mut diagnostic = match &error.variant {
        ErrorVariant::ParsingError { positives, .. } => {
            let mut described: Vec<(u8, &str)> = positives
                .iter()
                .copied()
                .filter_map(describe_rule)
                .collect();
            described.sort();
            described.dedup();
            let after_an_operand = described.iter().any(|(rank, _)| *rank == OPERATOR_RANK);
            let expected: Vec<String> = described
                .iter()
                .map(|(_, description)| *description)
                // After a complete operand, a call's `(` or an index's `[`
                // could follow, but saying so only confuses.
                .filter(|description| !(after_an_operand && matches!(*description, "`(`" | "`[`")))
                .map(str::to_string)
                .collect();
            match expected.first() {
                Some(primary) => Diagnostic {
                    message: format!("expected {primary}, found {found}"),
                    span,
                    label: format!("expected {}", join_alternatives(&expected)),
                    expected,
                },
                None => Diagnostic::new(format!("unexpected {found}"), span, "not expected here"),
            }
        }
        ErrorVariant::CustomError { .. } => Diagnostic::new(
            "statement is nested too deeply",
            span,
            "the parser ran out of room here; split the statement",
        ),
    };
    if let Some(operator) = continued_after
        .iter()
        .rev()
        .find(|operator| operator.end <= span.start)
    {
        let operator_text = operator.shifted_back(offset).text(text);
        diagnostic.label.push_str(&format!(
            " (the statement goes on from the line ending with `{operator_text}`)"
        ));
    }
    diagnostic
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text of the statement of `text` that holds the first place where `at` occurs.
    fn statement_of<'text>(text: &'text str, at: &str) -> &'text str {
        let position = text.find(at).expect("`at` is in `text`");
        statement_at(text, position).text(text)
    }

    #[test]
    fn the_statement_at_a_place_is_the_innermost_one_of_its_block() {
        // Outside any block: the whole top-level statement.
        assert_eq!(statement_of("if x { y }", "x {"), "if x { y }");
        assert_eq!(
            statement_of("for i in 0..2 { x } y", "y"),
            "for i in 0..2 { x } y"
        );
        // In a block: from a separator or the `{` to the next separator or the `}`.
        assert_eq!(
            statement_of("for i in 0..2 { x = 1; A[0] = 5 }", "= 5"),
            "A[0] = 5"
        );
        assert_eq!(
            statement_of(
                "def f(x) {\n  y = (1 +\n 2)\n  if y {\n    z = 1\n  }\n  return y\n}",
                "y {"
            ),
            "if y {\n    z = 1\n  }"
        );
        assert_eq!(
            statement_of("with gpu0 { def g(x) { while x < [1, 2][0] { } } }", "x <"),
            "while x < [1, 2][0] { }"
        );
        // At the first token of a statement, after white space.
        assert_eq!(statement_of("for i in 0..2 { x\n  = 2 }", "= 2"), "= 2");
    }
}
