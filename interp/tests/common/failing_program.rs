//! Random programs with statements that fail at run time (shape mismatches, loads of missing
//! files, out-of-range indices) among in-place updates, rebinding, `del`, loops, functions,
//! graph replays and bulks; and the runner that records what a session makes of one (what each
//! top-level statement prints and reports, what the run reports at the end, what it saves).
//!
//! A program is kept as statements (`Line`s, each with its line in the text), so that the
//! reference interpreter (`reference.rs`) can run the same program without parsing it. Each
//! top-level statement is run as one input, as the REPL and the notebook kernel do, so that a
//! statement that stops (a `print` of a variable holding an error) does not end the program.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;

use dep_engine::Policy;
use dep_interp::{Session, SessionConfig};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// An expression of the generated programs.
#[derive(Clone, Debug)]
pub enum Expr {
    /// A variable (or a function's parameter or local).
    Name(String),
    /// The loop counter `i`.
    Counter,
    /// A number, as written.
    Num(&'static str),
    /// A string literal (a path for `load`); `{DIR}` stands for the run's directory.
    Str(String),
    /// `lhs op rhs` with `op` one of `+ - * / @`.
    Binary(&'static str, Box<Expr>, Box<Expr>),
    /// A builtin call.
    Call(&'static str, Vec<Expr>),
    /// `name[items]`.
    Index(String, Vec<Index>),
}

/// One item of an index expression.
#[derive(Clone, Copy, Debug)]
pub enum Index {
    /// `i`.
    Single(i64),
    /// `start:end`.
    Slice(i64, i64),
}

/// A statement of the generated programs.
#[derive(Clone, Debug)]
pub enum Stmt {
    /// `targets = value` (several targets for `split`).
    Assign(Vec<String>, Expr),
    /// `target op= value`, `op` one of `+ - * /`.
    Update(String, &'static str, Expr),
    /// `targets = function(args)` (two targets for a function returning two values).
    Call(Vec<String>, &'static str, Vec<String>),
    /// `del name`.
    Del(String),
    /// `print items`.
    Print(Vec<Expr>),
    /// `save(name, "path")`.
    Save(String, String),
    /// `wait`.
    Wait,
    /// `for i in 0..n { body }`.
    For(i64, Vec<Line>),
    /// `graph name { body }`.
    Graph(String, Vec<Line>),
    /// `run name`, or `with bulk = n { run name }`.
    Run(String, Option<usize>),
    /// `def name(params) { body }`.
    Def(&'static str, Vec<&'static str>, Vec<Line>),
    /// `return values` (in a function).
    Return(Vec<Expr>),
}

/// A statement and the line it starts on (1-based).
#[derive(Clone, Debug)]
pub struct Line {
    pub line: u32,
    pub stmt: Stmt,
}

/// A generated program: its top-level statements.
#[derive(Clone, Debug)]
pub struct Program {
    pub statements: Vec<Line>,
}

impl Expr {
    fn name(name: &str) -> Expr {
        Expr::Name(name.to_string())
    }

    fn binary(op: &'static str, lhs: Expr, rhs: Expr) -> Expr {
        Expr::Binary(op, Box::new(lhs), Box::new(rhs))
    }

    fn operand_text(&self) -> String {
        match self {
            Expr::Binary(..) => format!("({self})"),
            _ => self.to_string(),
        }
    }

    /// The variable names it reads, in order of first appearance.
    pub fn names(&self, names: &mut Vec<String>) {
        let mut add = |name: &String| {
            if !names.contains(name) {
                names.push(name.clone());
            }
        };
        match self {
            Expr::Name(name) | Expr::Index(name, _) => add(name),
            Expr::Counter | Expr::Num(_) | Expr::Str(_) => {}
            Expr::Binary(_, lhs, rhs) => {
                lhs.names(names);
                rhs.names(names);
            }
            Expr::Call(_, args) => args.iter().for_each(|arg| arg.names(names)),
        }
    }
}

impl std::fmt::Display for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expr::Name(name) => f.write_str(name),
            Expr::Counter => f.write_str("i"),
            Expr::Num(text) => f.write_str(text),
            Expr::Str(text) => write!(f, "\"{text}\""),
            Expr::Binary(op, lhs, rhs) => {
                write!(f, "{} {op} {}", lhs.operand_text(), rhs.operand_text())
            }
            Expr::Call(name, args) => {
                let args: Vec<String> = args.iter().map(Expr::to_string).collect();
                write!(f, "{name}({})", args.join(", "))
            }
            Expr::Index(name, items) => {
                let items: Vec<String> = items
                    .iter()
                    .map(|item| match item {
                        Index::Single(index) => index.to_string(),
                        Index::Slice(start, end) => format!("{start}:{end}"),
                    })
                    .collect();
                write!(f, "{name}[{}]", items.join(", "))
            }
        }
    }
}

impl Stmt {
    /// The statement's text on its first line (a block's opening line), which is also the
    /// label of the op it pushes.
    pub fn head(&self) -> String {
        match self {
            Stmt::Assign(targets, value) => format!("{} = {value}", targets.join(", ")),
            Stmt::Update(target, op, value) => format!("{target} {op}= {value}"),
            Stmt::Call(targets, function, args) => {
                format!("{} = {function}({})", targets.join(", "), args.join(", "))
            }
            Stmt::Del(name) => format!("del {name}"),
            Stmt::Print(items) => {
                let items: Vec<String> = items.iter().map(Expr::to_string).collect();
                format!("print {}", items.join(", "))
            }
            Stmt::Save(name, path) => format!("save({name}, \"{path}\")"),
            Stmt::Wait => "wait".to_string(),
            Stmt::For(n, _) => format!("for i in 0..{n} {{"),
            Stmt::Graph(name, _) => format!("graph {name} {{"),
            Stmt::Run(name, None) => format!("run {name}"),
            Stmt::Run(name, Some(bulk)) => format!("with bulk = {bulk} {{ run {name} }}"),
            Stmt::Def(name, params, _) => format!("def {name}({}) {{", params.join(", ")),
            Stmt::Return(values) => {
                let values: Vec<String> = values.iter().map(Expr::to_string).collect();
                format!("return {}", values.join(", "))
            }
        }
    }

    fn body(&self) -> Option<&[Line]> {
        match self {
            Stmt::For(_, body) | Stmt::Graph(_, body) | Stmt::Def(_, _, body) => Some(body),
            _ => None,
        }
    }
}

impl Line {
    /// The statement's text, blocks with their bodies indented by `indent`.
    pub fn text(&self, indent: usize) -> String {
        let mut text = format!("{}{}\n", " ".repeat(indent), self.stmt.head());
        if let Some(body) = self.stmt.body() {
            for line in body {
                text.push_str(&line.text(indent + 2));
            }
            let _ = writeln!(text, "{}}}", " ".repeat(indent));
        }
        text
    }
}

impl std::fmt::Display for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for line in &self.statements {
            f.write_str(&line.text(0))?;
        }
        Ok(())
    }
}

/// Global names the programs use.
const NAMES: &[&str] = &["a", "b", "c", "d", "e", "g", "h"];

/// Lays statements out from line `first`: gives each its line; returns the next free line.
fn lay_out(lines: &mut [Line], first: u32) -> u32 {
    let mut next = first;
    for line in lines {
        line.line = next;
        next += 1;
        let body = match &mut line.stmt {
            Stmt::For(_, body) | Stmt::Graph(_, body) | Stmt::Def(_, _, body) => Some(body),
            _ => None,
        };
        if let Some(body) = body {
            next = lay_out(body, next) + 1;
        }
    }
    next
}

fn line(stmt: Stmt) -> Line {
    Line { line: 0, stmt }
}

/// The functions every program defines first.
fn functions() -> Vec<Line> {
    let name = Expr::name;
    vec![
        // A local computed from the parameters, and a return value computed from it.
        line(Stmt::Def(
            "mix",
            vec!["p", "q"],
            vec![
                line(Stmt::Assign(
                    vec!["t".into()],
                    Expr::binary("@", name("p"), name("q")),
                )),
                line(Stmt::Return(vec![Expr::binary(
                    "+",
                    Expr::binary("*", name("t"), Expr::Num("0.5")),
                    name("p"),
                )])),
            ],
        )),
        // A local updated in place, then read by the return value: a call's body pushed
        // again over the next call's local and arguments (which may be one variable twice).
        line(Stmt::Def(
            "acc",
            vec!["p", "q"],
            vec![
                line(Stmt::Assign(
                    vec!["t".into()],
                    Expr::binary("*", name("p"), Expr::Num("0.5")),
                )),
                line(Stmt::Update("t".into(), "+", name("q"))),
                line(Stmt::Return(vec![Expr::binary("-", name("t"), name("p"))])),
            ],
        )),
        // An update of a parameter makes a local; the local is returned as is.
        line(Stmt::Def(
            "bump",
            vec!["p"],
            vec![
                line(Stmt::Update("p".into(), "+", Expr::Num("1"))),
                line(Stmt::Return(vec![name("p")])),
            ],
        )),
        // Two values: a local given back as it is, and one computed from it (which fails
        // alone when the shapes do not fit), each assigned to its own name.
        line(Stmt::Def(
            "pair",
            vec!["p", "q"],
            vec![
                line(Stmt::Assign(
                    vec!["t".into()],
                    Expr::binary(
                        "+",
                        Expr::binary("*", name("p"), Expr::Num("0.5")),
                        name("q"),
                    ),
                )),
                line(Stmt::Return(vec![
                    name("t"),
                    Expr::binary("@", name("t"), name("p")),
                ])),
            ],
        )),
    ]
}

/// What the generator knows while it writes a program.
struct Generator {
    rng: StdRng,
    /// Global names bound now.
    live: Vec<String>,
    /// Names a recorded graph reads or writes: never deleted (the graph holds their variables).
    pinned: HashSet<String>,
    /// Files a `save` was written for (each is saved once; loads come after their save).
    saved: Vec<String>,
    graphs: Vec<String>,
}

impl Generator {
    fn pick_live(&mut self) -> String {
        self.live.choose(&mut self.rng).unwrap().clone()
    }

    /// A target: a live name mostly, sometimes a new one (only where the statement surely
    /// binds it: at the top level).
    fn target(&mut self, may_be_new: bool) -> String {
        if may_be_new && self.rng.gen_bool(0.25) {
            NAMES.choose(&mut self.rng).unwrap().to_string()
        } else {
            self.pick_live()
        }
    }

    /// An operand: a live name, or in a loop sometimes the counter.
    fn operand(&mut self, in_loop: bool) -> Expr {
        if in_loop && self.rng.gen_bool(0.15) {
            Expr::Counter
        } else {
            Expr::Name(self.pick_live())
        }
    }

    /// A right-hand side: mostly well-shaped, some that change shapes (so that later
    /// statements mismatch), some that fail whatever the values.
    fn value(&mut self, in_loop: bool) -> Expr {
        let y = self.operand(in_loop);
        let z = self.operand(in_loop);
        let w = self.pick_live();
        let num = Expr::Num;
        match self.rng.gen_range(0..25) {
            0..=3 => Expr::binary("+", y, z),
            4 => Expr::binary("-", Expr::binary("*", y, z), num("0.5")),
            5 | 6 => Expr::binary("@", Expr::Call("relu", vec![y]), z),
            7 => Expr::binary(
                "/",
                Expr::Call("tanh", vec![y]),
                Expr::binary("+", Expr::Call("abs", vec![z]), num("1")),
            ),
            8 => Expr::binary("+", Expr::Call("sum", vec![y, num("0")]), z),
            9 => Expr::binary("@", Expr::Call("transpose", vec![y]), z),
            // Shapes that differ: [2, 3], [3] (broadcast), [3, 2].
            10 => Expr::binary("@", Expr::Index(w, vec![Index::Slice(0, 2)]), z),
            11 => Expr::binary("*", Expr::Index(w, vec![Index::Single(1)]), z),
            12 => Expr::binary(
                "@",
                y,
                Expr::Call("transpose", vec![Expr::Index(w, vec![Index::Slice(1, 3)])]),
            ),
            // New values, reading nothing: they clear an error the target held.
            13 => Expr::binary(
                "*",
                Expr::Call("ones", vec![num("3"), num("3")]),
                num("0.25"),
            ),
            14 => Expr::binary("*", Expr::Call("eye", vec![num("3")]), num("1.5")),
            15 => Expr::binary(
                "*",
                Expr::Call(
                    "reshape",
                    vec![Expr::Call("arange", vec![num("9")]), num("3"), num("3")],
                ),
                num("0.1"),
            ),
            16 => Expr::binary(
                "+",
                Expr::Call("ones", vec![num("3"), num("3")]),
                if in_loop { Expr::Counter } else { num("2") },
            ),
            17 => Expr::binary(
                "+",
                Expr::Call("eye", vec![num("3")]),
                Expr::Index(w, vec![Index::Single(0), Index::Single(2)]),
            ),
            // Failures whatever the values: a mismatch, an index out of range, a missing file.
            18 => Expr::binary("@", y, Expr::Call("ones", vec![num("4"), num("2")])),
            19 => Expr::binary("+", Expr::Index(w, vec![Index::Single(3)]), z),
            20 => Expr::Call("load", vec![Expr::Str("missing.npy".into())]),
            // A file saved before (or whose save failed).
            21 if !self.saved.is_empty() => {
                let file = self.saved.choose(&mut self.rng).unwrap().clone();
                Expr::Call("load", vec![Expr::Str(format!("{{DIR}}/{file}"))])
            }
            _ => Expr::binary("-", y, z),
        }
    }

    /// A statement a loop body, a graph body or the top level may hold: one op (or a print).
    fn simple(&mut self, in_loop: bool, in_graph: bool, may_bind: bool) -> Stmt {
        loop {
            return match self.rng.gen_range(0..12) {
                0..=4 => {
                    let target = self.target(may_bind);
                    Stmt::Assign(vec![target], self.value(in_loop))
                }
                5 | 6 => {
                    let target = self.pick_live();
                    let (op, value) = match self.rng.gen_range(0..4) {
                        0 => ("+", self.operand(in_loop)),
                        1 => ("*", Expr::Num("0.9")),
                        2 => ("-", Expr::Index(self.pick_live(), vec![Index::Single(0)])),
                        _ => ("/", self.value(in_loop)),
                    };
                    Stmt::Update(target, op, value)
                }
                7 if !in_graph => {
                    let target = self.target(may_bind);
                    let two = |this: &mut Self| vec![this.pick_live(), this.pick_live()];
                    match self.rng.gen_range(0..4) {
                        0 => Stmt::Call(vec![target], "mix", two(self)),
                        1 => Stmt::Call(vec![target], "acc", two(self)),
                        2 => Stmt::Call(vec![target], "bump", vec![self.pick_live()]),
                        _ => {
                            let second = self.target(may_bind);
                            if second == target {
                                continue;
                            }
                            Stmt::Call(vec![target, second], "pair", two(self))
                        }
                    }
                }
                8 if may_bind => {
                    let (first, second) = (self.target(true), self.target(true));
                    if first == second {
                        continue;
                    }
                    let parts = Expr::Call(
                        "concat",
                        vec![self.operand(false), self.operand(false), Expr::Num("0")],
                    );
                    Stmt::Assign(
                        vec![first, second],
                        Expr::Call("split", vec![parts, Expr::Num("2"), Expr::Num("0")]),
                    )
                }
                9 | 10 if !in_graph => {
                    let x = self.pick_live();
                    Stmt::Print(match self.rng.gen_range(0..3) {
                        0 => vec![Expr::Name(x)],
                        1 => vec![Expr::Str(x.clone()), Expr::Index(x, vec![Index::Single(0)])],
                        _ => vec![Expr::Call("sum", vec![Expr::Name(x)])],
                    })
                }
                _ => continue,
            };
        }
    }

    fn top_level(&mut self, lines: &mut Vec<Line>) {
        let stmt = match self.rng.gen_range(0..20) {
            0..=8 => self.simple(false, false, true),
            9 if self.live.len() > 3 => {
                let candidates: Vec<String> = self
                    .live
                    .iter()
                    .filter(|name| !self.pinned.contains(*name))
                    .cloned()
                    .collect();
                let Some(name) = candidates.choose(&mut self.rng).cloned() else {
                    return;
                };
                self.live.retain(|live| *live != name);
                lines.push(line(Stmt::Del(name)));
                return;
            }
            10 => {
                let file = format!("s{}.npy", self.saved.len());
                self.saved.push(file.clone());
                Stmt::Save(self.pick_live(), format!("{{DIR}}/{file}"))
            }
            11 => Stmt::Wait,
            12 | 13 => {
                let n = self.rng.gen_range(1..4);
                let body = (0..self.rng.gen_range(1..4))
                    .map(|_| line(self.simple(true, false, false)))
                    .collect();
                Stmt::For(n, body)
            }
            14 if self.graphs.len() < 3 => self.graph(),
            15..=17 if !self.graphs.is_empty() => {
                let name = self.graphs.choose(&mut self.rng).unwrap().clone();
                let bulk = match self.rng.gen_range(0..3) {
                    0 => None,
                    1 => Some(2),
                    _ => Some(self.rng.gen_range(3..6)),
                };
                Stmt::Run(name, bulk)
            }
            _ => self.simple(false, false, true),
        };
        for name in bound_names(&stmt) {
            if !self.live.contains(&name) {
                self.live.push(name);
            }
        }
        lines.push(line(stmt));
    }

    /// A graph: statements over live names and its own names (`k0`, `k1`, ... for graph k),
    /// each first assigned before it is read.
    fn graph(&mut self) -> Stmt {
        let name = format!("g{}", self.graphs.len());
        let prefix = format!("k{}_", self.graphs.len());
        let outer = self.live.clone();
        let mut body = Vec::new();
        for index in 0..self.rng.gen_range(2..7) {
            let mut stmt = self.simple(false, true, false);
            // Half of the assignments go to the graph's own names, which later statements of
            // the body then read.
            if let Stmt::Assign(targets, _) = &mut stmt {
                if targets.len() == 1 && self.rng.gen_bool(0.5) {
                    targets[0] = format!("{prefix}{index}");
                }
            }
            for bound in bound_names(&stmt) {
                if !self.live.contains(&bound) {
                    self.live.push(bound);
                }
            }
            body.push(line(stmt));
        }
        // The graph's own names are not visible after it; every outer name it uses is pinned.
        let mut used = Vec::new();
        for line in &body {
            stmt_names(&line.stmt, &mut used);
        }
        self.live = outer;
        for name in used {
            if self.live.contains(&name) {
                self.pinned.insert(name);
            }
        }
        self.graphs.push(name.clone());
        Stmt::Graph(name, body)
    }
}

/// The names a statement binds (assigns).
fn bound_names(stmt: &Stmt) -> Vec<String> {
    match stmt {
        Stmt::Assign(targets, _) => targets.clone(),
        Stmt::Call(targets, ..) => targets.clone(),
        Stmt::For(_, body) => body
            .iter()
            .flat_map(|line| bound_names(&line.stmt))
            .collect(),
        _ => Vec::new(),
    }
}

/// Every name a statement reads or writes.
fn stmt_names(stmt: &Stmt, names: &mut Vec<String>) {
    match stmt {
        Stmt::Assign(targets, value) => {
            names.extend(targets.iter().cloned());
            value.names(names);
        }
        Stmt::Update(target, _, value) => {
            names.push(target.clone());
            value.names(names);
        }
        _ => {}
    }
}

/// Program `seed`: the functions, three names, then 20 to 60 random statements, and saves of
/// every live name at the end.
pub fn failing_program(seed: u64) -> Program {
    let mut generator = Generator {
        rng: StdRng::seed_from_u64(seed),
        live: Vec::new(),
        pinned: HashSet::new(),
        saved: Vec::new(),
        graphs: Vec::new(),
    };
    let mut lines = functions();
    let num = Expr::Num;
    let starts = [
        // reshape(arange(9), 3, 3) * 0.25 - 1
        Expr::binary(
            "-",
            Expr::binary(
                "*",
                Expr::Call(
                    "reshape",
                    vec![Expr::Call("arange", vec![num("9")]), num("3"), num("3")],
                ),
                num("0.25"),
            ),
            num("1"),
        ),
        // eye(3) * 2 + 0.5
        Expr::binary(
            "+",
            Expr::binary("*", Expr::Call("eye", vec![num("3")]), num("2")),
            num("0.5"),
        ),
        // ones(3, 3) * 0.5
        Expr::binary(
            "*",
            Expr::Call("ones", vec![num("3"), num("3")]),
            num("0.5"),
        ),
    ];
    for (name, start) in NAMES.iter().zip(starts) {
        lines.push(line(Stmt::Assign(vec![name.to_string()], start)));
        generator.live.push(name.to_string());
    }
    for _ in 0..generator.rng.gen_range(20..60) {
        generator.top_level(&mut lines);
    }
    for name in generator.live.clone() {
        lines.push(line(Stmt::Save(
            name.clone(),
            format!("{{DIR}}/{name}.npy"),
        )));
    }
    lay_out(&mut lines, 1);
    Program { statements: lines }
}

/// A report as the test compares it: its line and its one-line message, with the run's
/// directory written `{DIR}`.
pub type Reported = (u32, String);

/// What running a program showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transcript {
    /// Per top-level statement: what it printed and what it reported (sorted: failures found
    /// at one `wait` come in the order they finished).
    pub statements: Vec<(String, Vec<Reported>)>,
    /// What the end of the run reported (sorted).
    pub at_end: Vec<Reported>,
    /// The files saved, by name.
    pub files: Vec<(String, Vec<u8>)>,
}

impl Transcript {
    /// The first difference from `other`, described, if any.
    pub fn difference(&self, other: &Transcript) -> Option<String> {
        for (index, (mine, theirs)) in self.statements.iter().zip(&other.statements).enumerate() {
            if mine != theirs {
                return Some(format!(
                    "top-level statement {index}: {mine:?}\n   against {theirs:?}"
                ));
            }
        }
        if self.statements.len() != other.statements.len() {
            return Some("a different number of statements".to_string());
        }
        if self.at_end != other.at_end {
            return Some(format!(
                "at the end: {:?}\n   against {:?}",
                self.at_end, other.at_end
            ));
        }
        let names = |files: &[(String, Vec<u8>)]| -> Vec<String> {
            files.iter().map(|(name, _)| name.clone()).collect()
        };
        if names(&self.files) != names(&other.files) {
            return Some(format!(
                "saved files {:?}\n   against {:?}",
                names(&self.files),
                names(&other.files)
            ));
        }
        for ((name, mine), (_, theirs)) in self.files.iter().zip(&other.files) {
            if mine != theirs {
                return Some(format!("{name} holds other bytes"));
            }
        }
        None
    }

    /// How many failures were reported, in all.
    pub fn n_reports(&self) -> usize {
        self.statements
            .iter()
            .map(|(_, reports)| reports.len())
            .sum::<usize>()
            + self.at_end.len()
    }
}

/// The files in `dir`, sorted by name.
pub fn files_in(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            (
                entry.file_name().to_string_lossy().into_owned(),
                std::fs::read(entry.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// Runs `program` on a session of `policy` with `threads`, one top-level statement per input,
/// saving into `dir`.
pub fn run_failing(program: &Program, dir: &Path, policy: Policy, threads: usize) -> Transcript {
    let dir_text = dir.display().to_string();
    let reported = |error: dep_interp::RunError| -> Vec<Reported> {
        let mut reports: Vec<Reported> = error
            .reports
            .into_iter()
            // A failure repeated at one statement is reported once with its count, and how
            // many of the others had another message, the last of them (see `fold_repeats`).
            .flat_map(|report| {
                let reported = |message: &str| (report.line, message.replace(&dir_text, "{DIR}"));
                let (n_other, last) = report.other_messages.clone().unwrap_or_default();
                let n_first = 1 + report.repeats - n_other;
                std::iter::repeat_n(reported(&report.message), n_first as usize)
                    .chain(std::iter::repeat_n(reported(&last), n_other as usize))
                    .collect::<Vec<_>>()
            })
            .collect();
        reports.sort();
        reports
    };
    let mut session = Session::new(SessionConfig {
        policy,
        threads,
        ..SessionConfig::default()
    });
    let mut statements = Vec::new();
    for line in &program.statements {
        let source = line.text(0).replace("{DIR}", &dir_text);
        let mut out = Vec::new();
        let result = session.run_source_from_line("random.dep", line.line, &source, &mut out);
        statements.push((
            String::from_utf8(out).unwrap(),
            result.err().map(reported).unwrap_or_default(),
        ));
    }
    let at_end = session.finish().err().map(reported).unwrap_or_default();
    Transcript {
        statements,
        at_end,
        files: files_in(dir),
    }
}
