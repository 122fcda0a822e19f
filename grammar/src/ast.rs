//! The abstract syntax tree of a `.dep` program. Every statement,
//! expression and name carries the [`Span`] of the source text it was parsed
//! from. The `Display` impls (in `sexpr.rs`) print the tree as compact
//! S-expressions.

use crate::span::Span;

/// A whole parsed source: its statements in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    /// The top-level statements that parsed without errors.
    pub statements: Vec<Stmt>,
}

/// An identifier with its own span.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Name {
    /// The identifier as written.
    pub text: String,
    /// Where the identifier lies in the source.
    pub span: Span,
}

/// A braced list of statements: `{ ... }`.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// The statements of the block, in order.
    pub statements: Vec<Stmt>,
    /// From the opening brace to the closing brace, both included.
    pub span: Span,
}

/// One statement and its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// What the statement is.
    pub kind: StmtKind,
    /// From the statement's first token to its last one.
    pub span: Span,
}

impl Stmt {
    /// The statement as written in `source` (the text that was parsed),
    /// trimmed; for labels such as `B = A + 1`. Empty when the span does not
    /// fit `source`.
    pub fn text<'source>(&self, source: &'source str) -> &'source str {
        self.span.text(source).trim()
    }

    /// The keyword of a statement only the host does (`print`, `wait`, `seed`, `del`, `def`,
    /// `device`, `save`), which a recorded block (`graph`, `priority auto`) cannot replay.
    pub fn host_only_keyword(&self) -> Option<&'static str> {
        match &self.kind {
            StmtKind::Print(_) => Some("print"),
            StmtKind::Wait => Some("wait"),
            StmtKind::Seed(_) => Some("seed"),
            StmtKind::Del(_) => Some("del"),
            StmtKind::Def { .. } => Some("def"),
            StmtKind::Device { .. } => Some("device"),
            StmtKind::Expr(expr) => match &expr.kind {
                ExprKind::Call { func, .. } if func.text == "save" => Some("save"),
                _ => None,
            },
            _ => None,
        }
    }
}

/// The kinds of statements.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `a = expr` or `a, b = expr` (several targets unpack the value).
    Assign {
        /// The names assigned, at least one.
        targets: Vec<Name>,
        /// The value assigned.
        value: Expr,
    },
    /// `a += expr` and the other augmented assignments.
    AugAssign {
        /// The name updated.
        target: Name,
        /// The operator, such as `+=`.
        op: AugOp,
        /// The right-hand side.
        value: Expr,
    },
    /// `del a, b`: forget one or more names.
    Del(Vec<Name>),
    /// `print item, item`: each item an expression (string literals included).
    Print(Vec<Expr>),
    /// An expression evaluated for its effect or to show its value.
    Expr(Expr),
    /// `seed expr`: seed the random number generator.
    Seed(Expr),
    /// `wait`: wait until all pushed work is done.
    Wait,
    /// `for i in 0..10 { ... }` or `for i, j in f(...) { ... }`.
    For {
        /// The loop variables (exactly one for a range loop).
        vars: Vec<Name>,
        /// What the loop runs over.
        iter: ForIter,
        /// The loop body.
        body: Block,
    },
    /// `def f(x, w) { ... }`: a function definition.
    Def {
        /// The function's name.
        name: Name,
        /// The parameter names, possibly none.
        params: Vec<Name>,
        /// The function body.
        body: Block,
    },
    /// `return a, b`: return one or more values from a function.
    Return(Vec<Expr>),
    /// `with gpu1, priority = 2 { ... }`: run a block under settings.
    With {
        /// The settings, at least one.
        settings: Vec<WithSetting>,
        /// The block run under the settings.
        body: Block,
    },
    /// `graph step { ... }`: record a block as a graph.
    Graph {
        /// The graph's name.
        name: Name,
        /// The recorded block.
        body: Block,
    },
    /// `run step`: replay a recorded graph.
    Run(Name),
    /// `device gpu1 = sim(tflops=100, gbps=2000)`: configure a device.
    Device {
        /// The device's name.
        name: Name,
        /// The constructor, such as `sim`.
        constructor: Name,
        /// The constructor's keyword arguments.
        args: Vec<KeywordArg>,
    },
    /// `priority auto { ... }`: critical-path priorities for a block.
    PriorityAuto {
        /// The block whose pushes get automatic priorities.
        body: Block,
    },
}

/// What a `for` loop runs over.
#[derive(Clone, Debug, PartialEq)]
pub enum ForIter {
    /// `start..end`, the end excluded.
    Range {
        /// The first value.
        start: Expr,
        /// One past the last value.
        end: Expr,
    },
    /// Any expression, such as a call returning a sequence.
    Expr(Expr),
}

/// One setting of a `with` statement.
#[derive(Clone, Debug, PartialEq)]
pub enum WithSetting {
    /// `key = expr`, such as `priority = 5`. The key is a name or the
    /// keyword `priority`.
    Value {
        /// The setting's name.
        key: Name,
        /// The setting's value.
        value: Expr,
    },
    /// A bare name, which selects a device: `with gpu0 { ... }`.
    Device(Name),
}

/// A `name = expr` argument of a call or a `device` statement.
#[derive(Clone, Debug, PartialEq)]
pub struct KeywordArg {
    /// The argument's name.
    pub name: Name,
    /// The argument's value.
    pub value: Expr,
    /// From the name to the end of the value.
    pub span: Span,
}

/// One expression and its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What the expression is.
    pub kind: ExprKind,
    /// The expression's source text; parentheses around it are included.
    pub span: Span,
}

/// The kinds of expressions.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A number literal; integers and floats alike.
    Number(f64),
    /// A string literal, escapes resolved.
    Str(String),
    /// A variable.
    Name(Name),
    /// A tensor literal: `[1, 2]`, `[[1, 2], [3, 4]]`.
    List(Vec<Expr>),
    /// `-x`.
    Unary {
        /// The operator.
        op: UnaryOp,
        /// The operand.
        operand: Box<Expr>,
    },
    /// `a + b` and the other binary operators.
    Binary {
        /// The operator.
        op: BinaryOp,
        /// The left operand.
        lhs: Box<Expr>,
        /// The right operand.
        rhs: Box<Expr>,
    },
    /// `f(a, b, k=c)`: positional arguments, then keyword arguments.
    Call {
        /// The function called.
        func: Name,
        /// The positional arguments.
        args: Vec<Expr>,
        /// The keyword arguments, after the positional ones.
        kwargs: Vec<KeywordArg>,
    },
    /// `x[0, 1:3, :]`.
    Index {
        /// The indexed value.
        base: Box<Expr>,
        /// One item per indexed dimension, at least one.
        indices: Vec<IndexItem>,
    },
}

/// One item between the brackets of an index expression.
#[derive(Clone, Debug, PartialEq)]
pub enum IndexItem {
    /// `x[i]`: a single position.
    Single(Expr),
    /// `x[start:end]`, either bound may be left out; no step.
    Slice {
        /// The first position, or the start of the dimension.
        start: Option<Expr>,
        /// One past the last position, or the end of the dimension.
        end: Option<Expr>,
        /// The slice's source text, colon included.
        span: Span,
    },
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*` (element-wise)
    Mul,
    /// `/`
    Div,
    /// `**` (right-associative)
    Pow,
    /// `@` (matrix product)
    MatMul,
    /// `<`
    Less,
    /// `<=`
    LessEqual,
    /// `>`
    Greater,
    /// `>=`
    GreaterEqual,
    /// `==`
    Equal,
    /// `!=`
    NotEqual,
}

impl BinaryOp {
    /// The operator as written in source.
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Pow => "**",
            BinaryOp::MatMul => "@",
            BinaryOp::Less => "<",
            BinaryOp::LessEqual => "<=",
            BinaryOp::Greater => ">",
            BinaryOp::GreaterEqual => ">=",
            BinaryOp::Equal => "==",
            BinaryOp::NotEqual => "!=",
        }
    }

    /// Whether the operator compares (`<` ... `!=`), giving 1.0 or 0.0.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Less
                | BinaryOp::LessEqual
                | BinaryOp::Greater
                | BinaryOp::GreaterEqual
                | BinaryOp::Equal
                | BinaryOp::NotEqual
        )
    }

    /// The operator written `symbol`, if there is one.
    pub fn from_symbol(symbol: &str) -> Option<BinaryOp> {
        Some(match symbol {
            "+" => BinaryOp::Add,
            "-" => BinaryOp::Sub,
            "*" => BinaryOp::Mul,
            "/" => BinaryOp::Div,
            "**" => BinaryOp::Pow,
            "@" => BinaryOp::MatMul,
            "<" => BinaryOp::Less,
            "<=" => BinaryOp::LessEqual,
            ">" => BinaryOp::Greater,
            ">=" => BinaryOp::GreaterEqual,
            "==" => BinaryOp::Equal,
            "!=" => BinaryOp::NotEqual,
            _ => return None,
        })
    }
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`
    Neg,
}

impl UnaryOp {
    /// The operator as written in source.
    pub fn symbol(self) -> &'static str {
        match self {
            UnaryOp::Neg => "-",
        }
    }
}

/// Augmented assignment operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AugOp {
    /// `+=`
    Add,
    /// `-=`
    Sub,
    /// `*=`
    Mul,
    /// `/=`
    Div,
}

impl AugOp {
    /// The operator as written in source.
    pub fn symbol(self) -> &'static str {
        match self {
            AugOp::Add => "+=",
            AugOp::Sub => "-=",
            AugOp::Mul => "*=",
            AugOp::Div => "/=",
        }
    }

    /// The binary operator that `a op= b` applies, as in `a = a op b`.
    pub fn binary_op(self) -> BinaryOp {
        match self {
            AugOp::Add => BinaryOp::Add,
            AugOp::Sub => BinaryOp::Sub,
            AugOp::Mul => BinaryOp::Mul,
            AugOp::Div => BinaryOp::Div,
        }
    }

    /// The operator written `symbol`, if there is one.
    pub fn from_symbol(symbol: &str) -> Option<AugOp> {
        Some(match symbol {
            "+=" => AugOp::Add,
            "-=" => AugOp::Sub,
            "*=" => AugOp::Mul,
            "/=" => AugOp::Div,
            _ => return None,
        })
    }
}
