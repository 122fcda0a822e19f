//! Lowers the pest parse tree of one statement into the [`crate::ast`]
//! types, shifting every span by the statement's offset in the source.
//! The few errors the grammar cannot express (a positional argument after a
//! keyword argument, an unknown string escape, a range loop with several
//! variables, a loop over Python's `range(n)`, expressions nested too deeply
//! or chained too long) are reported here.
//!
//! Two limits keep the trees the interpreter walks recursively within its
//! stack. Nesting (brackets, calls, indexes, `**`) is limited to
//! [`MAX_EXPRESSION_NESTING`] levels. A chain of binary operators
//! (`a + b - c * d ...`) is parsed and lowered in a loop, not by recursion,
//! but it still makes a left-leaning tree one level deeper per operator, so
//! the whole tree's depth is limited to [`MAX_EXPRESSION_DEPTH`], reported
//! at the operator that goes past it.

use pest::iterators::Pair;

use crate::ast::{
    AugOp, BinaryOp, Block, Expr, ExprKind, ForIter, IndexItem, KeywordArg, Name, Stmt, StmtKind,
    UnaryOp, WithSetting,
};
use crate::diagnostic::Diagnostic;
use crate::parse::Rule;
use crate::span::Span;
use crate::syntax_error::dep_range;

/// The deepest expression tree accepted, such as a sum of 1000 terms;
/// deeper ones are reported as errors, so that the interpreter, which walks
/// trees recursively (compiling, evaluating and dropping them, on engine
/// worker threads with 2 MiB stacks), cannot exhaust a stack. Its walks
/// overflow such a stack from about 5000 levels on.
pub(crate) const MAX_EXPRESSION_DEPTH: usize = 1000;

/// The deepest nesting accepted in one expression: operands of `-`, `**`,
/// calls, lists and indexes, and the levels of the precedence ladder
/// (`a * b` inside `c + ...`); deeper ones are reported as errors.
pub(crate) const MAX_EXPRESSION_NESTING: usize = 100;

/// The result of lowering one node.
type Lowering<T> = Result<T, Diagnostic>;

/// An expression and the depth of its tree: the most operations on a path from its root to a
/// leaf (a name, a number or a string is 0 deep, `a + b` 1).
struct DeepExpr {
    expr: Expr,
    depth: usize,
}

/// Whether `rule` only stands for a fixed token that the syntax tree does
/// not need (punctuation, separators, keywords).
fn is_token_only(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::comma
            | Rule::colon
            | Rule::open_paren
            | Rule::close_paren
            | Rule::open_bracket
            | Rule::close_bracket
            | Rule::open_brace
            | Rule::close_brace
            | Rule::assign_sign
            | Rule::range_dots
            | Rule::separator
            | Rule::del_keyword
            | Rule::print_keyword
            | Rule::seed_keyword
            | Rule::wait_keyword
            | Rule::for_keyword
            | Rule::in_keyword
            | Rule::def_keyword
            | Rule::return_keyword
            | Rule::with_keyword
            | Rule::graph_keyword
            | Rule::run_keyword
            | Rule::device_keyword
            | Rule::priority_keyword
            | Rule::auto_keyword
            | Rule::EOI
    )
}

/// The children of `pair` that carry meaning, in order.
fn children(pair: Pair<'_, Rule>) -> Vec<Pair<'_, Rule>> {
    pair.into_inner()
        .filter(|child| !is_token_only(child.as_rule()))
        .collect()
}

/// The error for an expression nested deeper than
/// [`MAX_EXPRESSION_NESTING`], at the place where it goes past it.
fn nested_too_deeply(span: Span) -> Diagnostic {
    Diagnostic::new(
        "expression is nested too deeply",
        span,
        format!(
            "more than {MAX_EXPRESSION_NESTING} levels of brackets, calls, indexes and operators inside one another; split it into several statements"
        ),
    )
}

/// The error for an expression tree deeper than [`MAX_EXPRESSION_DEPTH`]
/// at `span`, the node that goes past it.
fn too_deep(span: Span) -> Diagnostic {
    Diagnostic::new(
        "expression is nested too deeply",
        span,
        format!(
            "more than {MAX_EXPRESSION_DEPTH} operations inside one another; split it into several statements"
        ),
    )
}

/// The error for a chain of binary operators that makes the expression tree
/// deeper than [`MAX_EXPRESSION_DEPTH`], at the operator that goes past it.
fn chain_too_long(operator: Span) -> Diagnostic {
    Diagnostic::new(
        "expression is too long",
        operator,
        format!(
            "this chain makes the expression more than {MAX_EXPRESSION_DEPTH} operations deep; split it into several statements (`s = a + b`, then `s += c`)"
        ),
    )
}

/// The error for a comparison whose left operand is an unparenthesized comparison, `a < b < c`
/// (written `[a, <, b, <, c]`), at its operator: it would compare the 1.0 or 0.0 of `a < b`,
/// which is seldom what was meant.
fn chained_comparison(texts: [&str; 5], operator: Span) -> Diagnostic {
    let [a, first, b, second, c] = texts.map(str::trim);
    Diagnostic::new(
        format!(
            "comparisons do not chain: `{second}` would compare the 1.0 or 0.0 of `{a} {first} {b}` with {c}"
        ),
        operator,
        format!(
            "parenthesize it, as in `({a} {first} {b}) {second} {c}`, or combine with `*` for and: `({a} {first} {b}) * ({b} {second} {c})`"
        ),
    )
}

/// Turns the parse tree of one statement into syntax-tree nodes.
pub(crate) struct Lowerer {
    /// The byte offset of the parsed text in the whole source.
    offset: usize,
}

impl Lowerer {
    /// A lowerer for text that starts `offset` bytes into the source.
    pub(crate) fn new(offset: usize) -> Lowerer {
        Lowerer { offset }
    }

    /// The span of `pair` in the whole source.
    fn span(&self, pair: &Pair<'_, Rule>) -> Span {
        let span = pair.as_span();
        Span::new(span.start(), span.end()).shifted(self.offset)
    }

    /// The error for a parse tree of a shape the grammar cannot produce.
    fn unexpected_shape(&self, span: Span) -> Diagnostic {
        Diagnostic::new(
            "internal error: unexpected parse tree",
            span,
            "please report this statement",
        )
    }

    /// Checks that `pair` has the rule `expected`.
    fn expect_rule<'text>(
        &self,
        pair: Option<Pair<'text, Rule>>,
        expected: Rule,
        parent: Span,
    ) -> Lowering<Pair<'text, Rule>> {
        match pair {
            Some(pair) if pair.as_rule() == expected => Ok(pair),
            Some(pair) => Err(self.unexpected_shape(self.span(&pair))),
            None => Err(self.unexpected_shape(parent)),
        }
    }

    /// Lowers a `single_statement` or `statement` pair.
    pub(crate) fn statement(&self, pair: Pair<'_, Rule>) -> Lowering<Stmt> {
        let span = self.span(&pair);
        match pair.as_rule() {
            Rule::single_statement | Rule::statement => {
                let mut inner = children(pair).into_iter();
                match (inner.next(), inner.next()) {
                    (Some(only), None) => self.statement(only),
                    _ => Err(self.unexpected_shape(span)),
                }
            }
            rule => {
                let kind = self.statement_kind(rule, pair, span)?;
                Ok(Stmt { kind, span })
            }
        }
    }

    /// Lowers the pair of one statement kind.
    fn statement_kind(&self, rule: Rule, pair: Pair<'_, Rule>, span: Span) -> Lowering<StmtKind> {
        let mut parts = children(pair);
        Ok(match rule {
            Rule::assign_statement => {
                let value = self.expression_of(parts.pop(), span)?;
                StmtKind::Assign {
                    targets: self.names(parts)?,
                    value,
                }
            }
            Rule::augmented_assign_statement => {
                let mut parts = parts.into_iter();
                let target = self.name(parts.next(), span)?;
                let operator = self.expect_rule(parts.next(), Rule::augmented_operator, span)?;
                let op = AugOp::from_symbol(operator.as_str())
                    .ok_or_else(|| self.unexpected_shape(self.span(&operator)))?;
                let value = self.expression_of(parts.next(), span)?;
                StmtKind::AugAssign { target, op, value }
            }
            Rule::expression_statement => StmtKind::Expr(self.expression_of(parts.pop(), span)?),
            Rule::del_statement => StmtKind::Del(self.names(parts)?),
            Rule::print_statement => StmtKind::Print(self.expressions(parts)?),
            Rule::seed_statement => StmtKind::Seed(self.expression_of(parts.pop(), span)?),
            Rule::wait_statement => StmtKind::Wait,
            Rule::run_statement => StmtKind::Run(self.name(parts.pop(), span)?),
            Rule::return_statement => StmtKind::Return(self.expressions(parts)?),
            Rule::for_statement => {
                let body = self.block(parts.pop(), span)?;
                let iter_pair = parts.pop().ok_or_else(|| self.unexpected_shape(span))?;
                let vars = self.names(parts)?;
                let iter = if iter_pair.as_rule() == Rule::range {
                    let range_span = self.span(&iter_pair);
                    if let [first, .., last] = vars.as_slice() {
                        return Err(Diagnostic::new(
                            "a range loop has exactly one loop variable",
                            first.span.join(last.span),
                            "use a single name here",
                        ));
                    }
                    let mut bounds = children(iter_pair).into_iter();
                    let start = self.expression_of(bounds.next(), range_span)?;
                    let end = self.expression_of(bounds.next(), range_span)?;
                    ForIter::Range { start, end }
                } else {
                    let input = iter_pair.get_input();
                    let iter = self.expression_of(Some(iter_pair), span)?;
                    if let Some(diagnostic) = self.loop_over_python_range(&iter, input) {
                        return Err(diagnostic);
                    }
                    ForIter::Expr(iter)
                };
                StmtKind::For { vars, iter, body }
            }
            Rule::def_statement => {
                let mut parts = parts.into_iter();
                let name = self.name(parts.next(), span)?;
                let parameters = self.expect_rule(parts.next(), Rule::parameters, span)?;
                let params = self.names(children(parameters))?;
                let body = self.block(parts.next(), span)?;
                StmtKind::Def { name, params, body }
            }
            Rule::with_statement => {
                let body = self.block(parts.pop(), span)?;
                let settings = parts
                    .into_iter()
                    .map(|setting| self.with_setting(setting))
                    .collect::<Lowering<Vec<_>>>()?;
                StmtKind::With { settings, body }
            }
            Rule::graph_statement => {
                let mut parts = parts.into_iter();
                let name = self.name(parts.next(), span)?;
                let body = self.block(parts.next(), span)?;
                StmtKind::Graph { name, body }
            }
            Rule::device_statement => {
                let mut parts = parts.into_iter();
                let name = self.name(parts.next(), span)?;
                let constructor = self.name(parts.next(), span)?;
                let args = parts
                    .map(|argument| self.keyword_argument(argument, 0))
                    .collect::<Lowering<Vec<_>>>()?;
                StmtKind::Device {
                    name,
                    constructor,
                    args,
                }
            }
            Rule::priority_auto_statement => StmtKind::PriorityAuto {
                body: self.block(parts.pop(), span)?,
            },
            _ => return Err(self.unexpected_shape(span)),
        })
    }

    /// The error for a loop over Python's `range(n)` or `range(a, b)` (`for i in range(3)`),
    /// if `iter`, the loop's expression in `input` (the parsed text), is one: dep's ranges are
    /// `start..end`, and the error writes this one so. A loop runs over a range or
    /// `clock_cycles(m, n)` only, so no `range` call, not even a function of that name, could
    /// run.
    fn loop_over_python_range(&self, iter: &Expr, input: &str) -> Option<Diagnostic> {
        let ExprKind::Call { func, args, .. } = &iter.kind else {
            return None;
        };
        if func.text != "range" {
            return None;
        }
        let bounds: Vec<&str> = args
            .iter()
            .map(|arg| arg.span.shifted_back(self.offset).text(input))
            .collect();
        let range = dep_range(&bounds)?;
        Some(Diagnostic::new(
            format!("dep has no `range`: a for loop runs over `{range}`"),
            iter.span,
            "a range is `start..end`",
        ))
    }

    /// Lowers a `block` pair.
    fn block(&self, pair: Option<Pair<'_, Rule>>, parent: Span) -> Lowering<Block> {
        let pair = self.expect_rule(pair, Rule::block, parent)?;
        let span = self.span(&pair);
        let statements = children(pair)
            .into_iter()
            .map(|statement| self.statement(statement))
            .collect::<Lowering<Vec<_>>>()?;
        Ok(Block { statements, span })
    }

    /// Lowers a `with_value_setting` or `with_device_setting` pair.
    fn with_setting(&self, pair: Pair<'_, Rule>) -> Lowering<WithSetting> {
        let span = self.span(&pair);
        match pair.as_rule() {
            Rule::with_value_setting => {
                let mut parts = children(pair).into_iter();
                let key_pair = self.expect_rule(parts.next(), Rule::setting_key, span)?;
                let key = Name {
                    text: key_pair.as_str().to_string(),
                    span: self.span(&key_pair),
                };
                let value = self.expression_of(parts.next(), span)?;
                Ok(WithSetting::Value { key, value })
            }
            Rule::with_device_setting => {
                Ok(WithSetting::Device(self.name(children(pair).pop(), span)?))
            }
            _ => Err(self.unexpected_shape(span)),
        }
    }

    /// Lowers a `name` pair.
    fn name(&self, pair: Option<Pair<'_, Rule>>, parent: Span) -> Lowering<Name> {
        let pair = self.expect_rule(pair, Rule::name, parent)?;
        Ok(Name {
            text: pair.as_str().to_string(),
            span: self.span(&pair),
        })
    }

    /// Lowers a list of `name` pairs.
    fn names(&self, pairs: Vec<Pair<'_, Rule>>) -> Lowering<Vec<Name>> {
        pairs
            .into_iter()
            .map(|pair| {
                let span = self.span(&pair);
                self.name(Some(pair), span)
            })
            .collect()
    }

    /// Lowers a list of `expression` pairs.
    fn expressions(&self, pairs: Vec<Pair<'_, Rule>>) -> Lowering<Vec<Expr>> {
        pairs
            .into_iter()
            .map(|pair| {
                let span = self.span(&pair);
                self.expression_of(Some(pair), span)
            })
            .collect()
    }

    /// Lowers an `expression` pair at the top of an expression tree.
    fn expression_of(&self, pair: Option<Pair<'_, Rule>>, parent: Span) -> Lowering<Expr> {
        let pair = self.expect_rule(pair, Rule::expression, parent)?;
        Ok(self.expression(pair, 0)?.expr)
    }

    /// Builds an expression node, refusing trees deeper than
    /// [`MAX_EXPRESSION_DEPTH`].
    fn node(&self, kind: ExprKind, span: Span, depth: usize) -> Lowering<DeepExpr> {
        if depth > MAX_EXPRESSION_DEPTH {
            return Err(too_deep(span));
        }
        Ok(DeepExpr {
            expr: Expr { kind, span },
            depth,
        })
    }

    /// Lowers any expression-level pair; `nesting` counts the recursive
    /// calls above this one. Levels of the grammar's precedence ladder with
    /// a single child (and parentheses) are walked down in a loop, so that
    /// the recursion, and the stack, only grows with real nesting.
    fn expression(&self, pair: Pair<'_, Rule>, nesting: usize) -> Lowering<DeepExpr> {
        if nesting > MAX_EXPRESSION_NESTING {
            return Err(nested_too_deeply(self.span(&pair)));
        }
        let nesting = nesting + 1;
        let mut parenthesized_span = None;
        let mut pair = pair;
        loop {
            let span = self.span(&pair);
            let rule = pair.as_rule();
            let text = pair.as_str();
            let mut parts = children(pair);
            let lowered = match rule {
                Rule::expression
                | Rule::sum
                | Rule::product
                | Rule::unary
                | Rule::power
                | Rule::postfix
                | Rule::parenthesized
                    if parts.len() == 1 =>
                {
                    if rule == Rule::parenthesized {
                        parenthesized_span = Some(span);
                    }
                    pair = parts.pop().ok_or_else(|| self.unexpected_shape(span))?;
                    continue;
                }
                Rule::expression | Rule::sum | Rule::product => {
                    self.binary_chain(parts, span, nesting)
                }
                Rule::unary => self.negations(parts, span, nesting),
                Rule::power => self.power(parts, span, nesting),
                Rule::postfix => self.indexes(parts, span, nesting),
                Rule::list => self.list(parts, span, nesting),
                Rule::call => self.call(parts, span, nesting),
                Rule::number => self.number(text, span),
                Rule::string => self.string(parts, span),
                Rule::name => {
                    let name = Name {
                        text: text.to_string(),
                        span,
                    };
                    self.node(ExprKind::Name(name), span, 0)
                }
                _ => Err(self.unexpected_shape(span)),
            }?;
            return Ok(match parenthesized_span {
                Some(span) => DeepExpr {
                    expr: Expr {
                        kind: lowered.expr.kind,
                        span,
                    },
                    depth: lowered.depth,
                },
                None => lowered,
            });
        }
    }

    /// Lowers the parts of a `unary` pair: negations, then the operand.
    fn negations(
        &self,
        mut parts: Vec<Pair<'_, Rule>>,
        span: Span,
        nesting: usize,
    ) -> Lowering<DeepExpr> {
        let operand = parts.pop().ok_or_else(|| self.unexpected_shape(span))?;
        let mut result = self.expression(operand, nesting)?;
        for negation in parts.into_iter().rev() {
            let operand_span = result.expr.span;
            result = self.node(
                ExprKind::Unary {
                    op: UnaryOp::Neg,
                    operand: Box::new(result.expr),
                },
                self.span(&negation).join(operand_span),
                result.depth + 1,
            )?;
        }
        Ok(result)
    }

    /// Lowers the parts of a `power` pair: base, `**`, exponent.
    fn power(&self, parts: Vec<Pair<'_, Rule>>, span: Span, nesting: usize) -> Lowering<DeepExpr> {
        let [base, _operator, exponent] =
            <[_; 3]>::try_from(parts).map_err(|_| self.unexpected_shape(span))?;
        let base = self.expression(base, nesting)?;
        let exponent = self.expression(exponent, nesting)?;
        self.node(
            ExprKind::Binary {
                op: BinaryOp::Pow,
                lhs: Box::new(base.expr),
                rhs: Box::new(exponent.expr),
            },
            span,
            base.depth.max(exponent.depth) + 1,
        )
    }

    /// Lowers the parts of a `postfix` pair: an atom, then index suffixes.
    fn indexes(
        &self,
        parts: Vec<Pair<'_, Rule>>,
        span: Span,
        nesting: usize,
    ) -> Lowering<DeepExpr> {
        let mut parts = parts.into_iter();
        let atom = parts.next().ok_or_else(|| self.unexpected_shape(span))?;
        let mut result = self.expression(atom, nesting)?;
        for suffix in parts {
            let suffix_span = self.span(&suffix);
            let mut depth = result.depth;
            let mut indices = Vec::new();
            for item in children(suffix) {
                let (index, item_depth) = self.index_item(item, nesting)?;
                depth = depth.max(item_depth);
                indices.push(index);
            }
            let base_span = result.expr.span;
            result = self.node(
                ExprKind::Index {
                    base: Box::new(result.expr),
                    indices,
                },
                base_span.join(suffix_span),
                depth + 1,
            )?;
        }
        Ok(result)
    }

    /// Lowers the items of a `list` pair.
    fn list(&self, parts: Vec<Pair<'_, Rule>>, span: Span, nesting: usize) -> Lowering<DeepExpr> {
        let mut depth = 0;
        let mut items = Vec::new();
        for item in parts {
            let item = self.expression(item, nesting)?;
            depth = depth.max(item.depth);
            items.push(item.expr);
        }
        self.node(ExprKind::List(items), span, depth + 1)
    }

    /// Lowers the number literal `text` at `span`.
    fn number(&self, text: &str, span: Span) -> Lowering<DeepExpr> {
        let value = text
            .parse::<f64>()
            .map_err(|_| Diagnostic::new("invalid number", span, "this is not a valid number"))?;
        self.node(ExprKind::Number(value), span, 0)
    }

    /// Lowers the parts of a `string` pair: its content.
    fn string(&self, mut parts: Vec<Pair<'_, Rule>>, span: Span) -> Lowering<DeepExpr> {
        let content = parts.pop().ok_or_else(|| self.unexpected_shape(span))?;
        let text = self.unescape(&content)?;
        self.node(ExprKind::Str(text), span, 0)
    }

    /// Lowers an `expression`, `sum` or `product` pair: operands separated
    /// by operators, folded to the left.
    fn binary_chain(
        &self,
        parts: Vec<Pair<'_, Rule>>,
        span: Span,
        nesting: usize,
    ) -> Lowering<DeepExpr> {
        let mut parts = parts.into_iter();
        let first = parts.next().ok_or_else(|| self.unexpected_shape(span))?;
        let first_text = first.as_str();
        let mut result = self.expression(first, nesting)?;
        // The last comparison of this chain, as its operator and right operand's text.
        let mut comparison: Option<(&str, &str)> = None;
        while let Some(operator) = parts.next() {
            let op = BinaryOp::from_symbol(operator.as_str())
                .ok_or_else(|| self.unexpected_shape(self.span(&operator)))?;
            let operand = parts.next().ok_or_else(|| self.unexpected_shape(span))?;
            if op.is_comparison() {
                if let Some((first_op, middle)) = comparison {
                    return Err(chained_comparison(
                        [
                            first_text,
                            first_op,
                            middle,
                            operator.as_str(),
                            operand.as_str(),
                        ],
                        self.span(&operator),
                    ));
                }
                comparison = Some((operator.as_str(), operand.as_str()));
            }
            let operand = self.expression(operand, nesting)?;
            if result.depth.max(operand.depth) >= MAX_EXPRESSION_DEPTH {
                return Err(chain_too_long(self.span(&operator)));
            }
            let joined = result.expr.span.join(operand.expr.span);
            result = self.node(
                ExprKind::Binary {
                    op,
                    lhs: Box::new(result.expr),
                    rhs: Box::new(operand.expr),
                },
                joined,
                result.depth.max(operand.depth) + 1,
            )?;
        }
        Ok(result)
    }

    /// Lowers a `call` pair; keyword arguments must follow positional ones.
    fn call(&self, parts: Vec<Pair<'_, Rule>>, span: Span, nesting: usize) -> Lowering<DeepExpr> {
        let mut parts = parts.into_iter();
        let func = self.name(parts.next(), span)?;
        let arguments = self.expect_rule(parts.next(), Rule::call_arguments, span)?;
        let mut depth = 0;
        let mut args = Vec::new();
        let mut kwargs: Vec<KeywordArg> = Vec::new();
        for argument in children(arguments) {
            if argument.as_rule() == Rule::keyword_argument {
                let (keyword_argument, argument_depth) =
                    self.keyword_argument_with_depth(argument, nesting)?;
                depth = depth.max(argument_depth);
                kwargs.push(keyword_argument);
            } else {
                let argument_span = self.span(&argument);
                if let Some(previous) = kwargs.last() {
                    return Err(Diagnostic::new(
                        "positional argument after a keyword argument",
                        argument_span,
                        format!("move this argument before `{}=`", previous.name.text),
                    ));
                }
                let argument = self.expression(argument, nesting)?;
                depth = depth.max(argument.depth);
                args.push(argument.expr);
            }
        }
        self.node(ExprKind::Call { func, args, kwargs }, span, depth + 1)
    }

    /// Lowers a `keyword_argument` pair of a `device` statement.
    fn keyword_argument(&self, pair: Pair<'_, Rule>, nesting: usize) -> Lowering<KeywordArg> {
        Ok(self.keyword_argument_with_depth(pair, nesting)?.0)
    }

    /// Lowers a `keyword_argument` pair, with the depth of its value.
    fn keyword_argument_with_depth(
        &self,
        pair: Pair<'_, Rule>,
        nesting: usize,
    ) -> Lowering<(KeywordArg, usize)> {
        let span = self.span(&pair);
        if pair.as_rule() != Rule::keyword_argument {
            return Err(self.unexpected_shape(span));
        }
        let mut parts = children(pair).into_iter();
        let name = self.name(parts.next(), span)?;
        let value = self.expect_rule(parts.next(), Rule::expression, span)?;
        let value = self.expression(value, nesting)?;
        Ok((
            KeywordArg {
                name,
                value: value.expr,
                span,
            },
            value.depth,
        ))
    }

    /// Lowers an `index_item` pair (`i`, `a:b`, `a:`, `:b` or `:`), with
    /// its depth.
    fn index_item(&self, pair: Pair<'_, Rule>, nesting: usize) -> Lowering<(IndexItem, usize)> {
        let span = self.span(&pair);
        if pair.as_rule() != Rule::index_item {
            return Err(self.unexpected_shape(span));
        }
        let is_slice = pair
            .clone()
            .into_inner()
            .any(|child| child.as_rule() == Rule::colon);
        let mut start = None;
        let mut end = None;
        let mut depth = 0;
        for bound in children(pair) {
            let rule = bound.as_rule();
            let expression = children(bound)
                .pop()
                .ok_or_else(|| self.unexpected_shape(span))?;
            let expression = self.expression(expression, nesting)?;
            depth = depth.max(expression.depth);
            match rule {
                Rule::slice_start => start = Some(expression.expr),
                Rule::slice_end => end = Some(expression.expr),
                _ => return Err(self.unexpected_shape(span)),
            }
        }
        let item = match (is_slice, start) {
            (false, Some(single)) => IndexItem::Single(single),
            (false, None) => return Err(self.unexpected_shape(span)),
            (true, start) => IndexItem::Slice { start, end, span },
        };
        Ok((item, depth))
    }

    /// Resolves the escapes of a `string_content` pair: `\"`, `\\`, `\n`,
    /// `\t` and `\r`.
    fn unescape(&self, content: &Pair<'_, Rule>) -> Lowering<String> {
        let content_span = self.span(content);
        let mut text = String::new();
        let mut characters = content.as_str().char_indices();
        while let Some((_, character)) = characters.next() {
            if character != '\\' {
                text.push(character);
                continue;
            }
            match characters.next() {
                Some((_, '"')) => text.push('"'),
                Some((_, '\\')) => text.push('\\'),
                Some((_, 'n')) => text.push('\n'),
                Some((_, 't')) => text.push('\t'),
                Some((_, 'r')) => text.push('\r'),
                Some((offset, escaped)) => {
                    let start = content_span.start + offset - 1;
                    return Err(Diagnostic::new(
                        format!("unknown escape `\\{escaped}` in string"),
                        Span::new(start, start + 1 + escaped.len_utf8()),
                        "known escapes are \\\" \\\\ \\n \\t \\r",
                    ));
                }
                None => return Err(self.unexpected_shape(content_span)),
            }
        }
        Ok(text)
    }
}
