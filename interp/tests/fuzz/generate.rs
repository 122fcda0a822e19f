//! The program generator of the fuzzer: a well-formed dep program built from a tape of random
//! numbers, the way Hypothesis builds values. Proptest draws the tape and shrinks it (shorter,
//! smaller numbers), and since a 0 on the tape, or the end of it, always takes the simplest
//! choice, a failing program shrinks to a small one.
//!
//! The generator knows the shape of every variable it defined, and mostly writes expressions
//! whose shapes fit (so that programs run deep into the interpreter rather than stopping at the
//! first broadcast error); now and then it writes one that does not fit, a failing load, an
//! index out of range, an unknown name or a broken statement, so that errors are exercised too.
//! Shapes stay tiny (at most 3 along an axis), loops run at most 3 times, and `work` takes at
//! most 2 ms, so a program's cost is bounded by the number of statements it runs.
//!
//! Programs write files only under `{DIR}`, which the runner replaces by a fresh directory.

/// A tensor shape; `None` where the generator does not know it (after an error, or a value
/// whose shape depends on data).
type Shape = Vec<usize>;

/// The shapes constructors make.
const SHAPES: &[&[usize]] = &[&[], &[2], &[3], &[2, 3], &[3, 2], &[3, 3], &[2, 2, 3]];

/// Names of tensor variables (few, so that rebinding is frequent).
const NAMES: &[&str] = &["a", "b", "c", "x", "y", "w"];

/// Random choices read in order. Past the end of the tape every draw is 0.
pub struct Tape<'a> {
    values: &'a [u32],
    next: usize,
}

impl<'a> Tape<'a> {
    /// A tape reading `values`.
    pub fn new(values: &'a [u32]) -> Tape<'a> {
        Tape { values, next: 0 }
    }

    fn draw(&mut self) -> u32 {
        let value = self.values.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        value
    }

    /// Whether every value of the tape was read.
    fn exhausted(&self) -> bool {
        self.next >= self.values.len()
    }

    /// A number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            self.draw() as usize % n
        }
    }

    /// True `percent` times in a hundred; a 0 on the tape gives false.
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) >= 100 - percent
    }

    /// One of `items` (the first on a 0).
    fn pick<'t, T>(&mut self, items: &'t [T]) -> &'t T {
        &items[self.below(items.len())]
    }
}

/// A tensor variable in scope.
#[derive(Clone)]
struct Var {
    name: String,
    shape: Option<Shape>,
}

/// A user function: its parameters' shapes and its results' shapes.
#[derive(Clone)]
struct Function {
    name: String,
    params: Vec<Option<Shape>>,
    results: Vec<Option<Shape>>,
    /// Whether a graph can record a call: its body has no `print`, `wait`, `seed` or `del`.
    recordable: bool,
}

/// What is in scope where a statement is written.
#[derive(Clone, Default)]
struct Scope {
    vars: Vec<Var>,
    counters: Vec<String>,
    functions: Vec<Function>,
    /// Recorded graphs, with the variables a run of each defines.
    graphs: Vec<(String, Vec<Var>)>,
    slots: Vec<(String, usize)>,
    saved: Vec<(String, Shape)>,
    in_function: bool,
    in_graph: bool,
    loop_depth: usize,
}

/// Builds one program from a tape.
pub struct Generator<'a> {
    tape: Tape<'a>,
    scope: Scope,
    next_id: usize,
}

/// Builds the program of `tape`: its text, with `{DIR}` for the directory it may write in.
pub fn program(tape: &[u32]) -> String {
    let mut text = statements(tape).join("\n");
    text.push('\n');
    text
}

/// The top-level statements of the program of `tape`, in order.
pub fn statements(tape: &[u32]) -> Vec<String> {
    let mut generator = Generator {
        tape: Tape::new(tape),
        scope: Scope::default(),
        next_id: 0,
    };
    let mut lines = Vec::new();
    if generator.tape.chance(50) {
        lines.push(format!("seed {}", generator.tape.below(100)));
    }
    let count = 1 + generator.tape.below(30);
    for _ in 0..count {
        lines.push(generator.statement(0));
        if generator.tape.exhausted() {
            break;
        }
    }
    lines
}

impl Generator<'_> {
    fn fresh(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{}", self.next_id)
    }

    fn any_shape(&mut self) -> Shape {
        self.tape.pick(SHAPES).to_vec()
    }

    /// A statement, with blocks nested `depth` deep around it.
    fn statement(&mut self, depth: usize) -> String {
        let kinds = 20;
        match self.tape.below(kinds) {
            0..=4 => self.assignment(),
            5 => self.update(),
            6 => self.print(),
            7 => self.delete(),
            8 if depth < 2 => self.for_loop(depth),
            9 if depth < 2 && !self.scope.in_function && !self.scope.in_graph => {
                self.definition(depth)
            }
            10 => self.call_statement(),
            11 if depth < 2 => self.with_block(depth),
            12 if depth == 0 && !self.scope.in_function => self.graph(),
            13 => self.run_graph(),
            14 => self.seed_or_wait(),
            15 => self.save_or_load(),
            16 => self.slots(),
            17 => self.split(),
            18 if self.tape.chance(30) => self.broken(),
            19 if !self.scope.in_graph => {
                let (expr, _) = self.expr(None, 2);
                expr
            }
            _ => self.assignment(),
        }
    }

    /// The target of an assignment: a variable in scope or a new name from the pool.
    fn target(&mut self) -> String {
        if !self.scope.vars.is_empty() && self.tape.chance(50) {
            let index = self.tape.below(self.scope.vars.len());
            return self.scope.vars[index].name.clone();
        }
        self.tape.pick(NAMES).to_string()
    }

    fn define(&mut self, name: &str, shape: Option<Shape>) {
        match self.scope.vars.iter_mut().find(|var| var.name == name) {
            Some(var) => var.shape = shape,
            None => self.scope.vars.push(Var {
                name: name.to_string(),
                shape,
            }),
        }
    }

    fn assignment(&mut self) -> String {
        let target = self.target();
        let want = self.any_shape();
        let (expr, shape) = self.expr(Some(want), 3);
        self.define(&target, shape);
        format!("{target} = {expr}")
    }

    fn update(&mut self) -> String {
        if self.scope.vars.is_empty() {
            return self.assignment();
        }
        let index = self.tape.below(self.scope.vars.len());
        let var = self.scope.vars[index].clone();
        let operator = self.tape.pick(&["+=", "-=", "*=", "/="]);
        let want = match (&var.shape, self.tape.chance(30)) {
            (Some(shape), false) => shape.clone(),
            _ => Vec::new(),
        };
        let (expr, shape) = self.expr(Some(want), 2);
        if broadcast(var.shape.as_ref(), shape.as_ref()) != var.shape {
            self.define(&var.name, None);
        }
        format!("{} {operator} {expr}", var.name)
    }

    fn print(&mut self) -> String {
        let (first, shape) = self.expr(None, 2);
        if self.scope.in_graph && !self.tape.chance(3) {
            // `print` is refused inside a graph: only now and then.
            let target = self.target();
            self.define(&target, shape);
            return format!("{target} = {first}");
        }
        if self.tape.chance(20) {
            let (second, _) = self.expr(None, 1);
            return format!("print {first}, {second}");
        }
        if self.tape.chance(10) {
            return format!(
                "print \"{} =\", {first}",
                self.tape.pick(&["value", "é ü", "a\\tb"])
            );
        }
        format!("print {first}")
    }

    fn delete(&mut self) -> String {
        if self.scope.vars.is_empty() || self.scope.in_graph {
            return self.assignment();
        }
        let index = self.tape.below(self.scope.vars.len());
        let var = self.scope.vars.remove(index);
        format!("del {}", var.name)
    }

    /// A block's statements, indented, with `scope` changes kept only when `keep` says so.
    fn block(&mut self, depth: usize, keep: bool) -> String {
        let saved = self.scope.clone();
        let count = 1 + self.tape.below(4);
        let body: Vec<String> = (0..count)
            .map(|_| indent(&self.statement(depth + 1)))
            .collect();
        if !keep {
            self.scope = saved;
        }
        body.join("\n")
    }

    fn for_loop(&mut self, depth: usize) -> String {
        let counter = ["i", "j"][self.scope.loop_depth.min(1)].to_string();
        let start = self.tape.below(2);
        let end = start + self.tape.below(4);
        self.scope.counters.push(counter.clone());
        self.scope.loop_depth += 1;
        let body = self.block(depth, end > start);
        self.scope.loop_depth -= 1;
        self.scope.counters.retain(|name| *name != counter);
        if self.tape.chance(10) {
            let m = 1 + self.tape.below(3);
            let n = 1 + self.tape.below(3);
            return format!("for i, j in clock_cycles({m}, {n}) {{\n{body}\n}}");
        }
        format!("for {counter} in {start}..{end} {{\n{body}\n}}")
    }

    fn definition(&mut self, depth: usize) -> String {
        let name = self.fresh("f");
        let arity = self.tape.below(3);
        let params: Vec<String> = ["p", "q", "r"][..arity]
            .iter()
            .map(|p| p.to_string())
            .collect();
        let param_shapes: Vec<Option<Shape>> = (0..arity).map(|_| Some(self.any_shape())).collect();
        let saved = self.scope.clone();
        self.scope.in_function = true;
        for (param, shape) in params.iter().zip(&param_shapes) {
            self.define(param, shape.clone());
        }
        let mut body = self.block(depth, true);
        let n_results = 1 + usize::from(self.tape.chance(25));
        let mut results = Vec::new();
        let mut returned = Vec::new();
        for _ in 0..n_results {
            let want = self.any_shape();
            let (expr, shape) = self.expr(Some(want), 2);
            returned.push(expr);
            results.push(shape);
        }
        body.push_str(&format!("\n  return {}", returned.join(", ")));
        self.scope = saved;
        let recordable =
            body.lines().all(|line| {
                let first_word = line.split_whitespace().next().unwrap_or("");
                !matches!(first_word, "print" | "wait" | "seed" | "del")
            }) && self.scope.functions.iter().all(|function| {
                function.recordable || !body.contains(&format!("{}(", function.name))
            });
        self.scope.functions.push(Function {
            name: name.clone(),
            params: param_shapes,
            results,
            recordable,
        });
        format!("def {name}({}) {{\n{body}\n}}", params.join(", "))
    }

    /// The arguments of a call of `function`, mostly of the shapes it expects.
    fn arguments(&mut self, function: &Function) -> String {
        let mut arguments = Vec::new();
        for shape in &function.params {
            let (argument, _) = self.expr(shape.clone(), 1);
            arguments.push(argument);
        }
        if self.tape.chance(5) {
            arguments.push("1".to_string());
        }
        arguments.join(", ")
    }

    /// The functions a call may name here (in a graph, those it can record).
    fn callable(&self) -> Vec<Function> {
        self.scope
            .functions
            .iter()
            .filter(|function| function.recordable || !self.scope.in_graph)
            .cloned()
            .collect()
    }

    fn call_statement(&mut self) -> String {
        let callable = self.callable();
        if callable.is_empty() {
            return self.assignment();
        }
        let function = self.tape.pick(&callable).clone();
        let arguments = self.arguments(&function);
        let targets: Vec<String> = function.results.iter().map(|_| self.target()).collect();
        let mut distinct = targets.clone();
        distinct.sort();
        distinct.dedup();
        if distinct.len() != targets.len() {
            return self.assignment();
        }
        for (target, shape) in targets.iter().zip(&function.results) {
            self.define(target, shape.clone());
        }
        format!("{} = {}({arguments})", targets.join(", "), function.name)
    }

    fn with_block(&mut self, depth: usize) -> String {
        let top_level = depth == 0 && !self.scope.in_function && !self.scope.in_graph;
        let header = match self.tape.below(6) {
            0 => format!("with priority = {}", self.tape.below(5)),
            1 if top_level => {
                // `priority auto` records its block like a graph, then runs it.
                let was_in_graph = std::mem::replace(&mut self.scope.in_graph, true);
                let body = self.block(depth, true);
                self.scope.in_graph = was_in_graph;
                return format!("priority auto {{\n{body}\n}}");
            }
            2 => format!("with bulk = {}", 1 + self.tape.below(3)),
            3 => format!(
                "with {} = {}",
                self.tape.pick(&["lazy", "recycle", "share"]),
                self.tape.below(2)
            ),
            4 => "with cpu".to_string(),
            _ => format!("with priority = -{}", self.tape.below(3)),
        };
        let body = self.block(depth, true);
        format!("{header} {{\n{body}\n}}")
    }

    fn graph(&mut self) -> String {
        let name = self.fresh("g");
        // Recording computes nothing, and a run of the graph writes only the variables that
        // existed before it (names new in the body stay inside).
        let before = self.scope.clone();
        self.scope.in_graph = true;
        let body = self.block(0, true);
        let defined: Vec<Var> = self
            .scope
            .vars
            .iter()
            .filter(|var| before.vars.iter().any(|old| old.name == var.name))
            .cloned()
            .collect();
        self.scope = before;
        self.scope.graphs.push((name.clone(), defined));
        format!("graph {name} {{\n{body}\n}}")
    }

    fn run_graph(&mut self) -> String {
        if self.scope.graphs.is_empty() || self.scope.in_graph {
            return self.print();
        }
        let index = self.tape.below(self.scope.graphs.len());
        let (name, defined) = self.scope.graphs[index].clone();
        for var in defined {
            self.define(&var.name, var.shape);
        }
        match self.tape.below(4) {
            0 => format!("with bulk = {} {{ run {name} }}", 1 + self.tape.below(4)),
            1 if !self.scope.in_function => format!("print {name}"),
            _ => format!("run {name}"),
        }
    }

    fn seed_or_wait(&mut self) -> String {
        if self.scope.in_graph {
            return self.assignment();
        }
        if self.tape.chance(50) {
            "wait".to_string()
        } else {
            format!("seed {}", self.tape.below(1000))
        }
    }

    fn save_or_load(&mut self) -> String {
        let saveable: Vec<Var> = self
            .scope
            .vars
            .iter()
            .filter(|var| var.shape.is_some())
            .cloned()
            .collect();
        if self.tape.chance(50) && !saveable.is_empty() {
            let var = self.tape.pick(&saveable).clone();
            let path = format!("{{DIR}}/{}.npy", self.fresh("s"));
            if let Some(shape) = var.shape {
                self.scope.saved.push((path.clone(), shape));
            }
            return format!("save({}, \"{path}\")", var.name);
        }
        let target = self.target();
        if self.scope.saved.is_empty() || self.tape.chance(20) {
            self.define(&target, None);
            return format!("{target} = load(\"{{DIR}}/missing.npy\")");
        }
        let (path, shape) = self.tape.pick(&self.scope.saved.clone()).clone();
        self.define(&target, Some(shape));
        format!("{target} = load(\"{path}\")")
    }

    fn slots(&mut self) -> String {
        if let Some((name, count)) = self.scope.slots.first().cloned() {
            if self.tape.chance(70) {
                // Now and then one past the end.
                let past_the_end = usize::from(self.tape.chance(10));
                let index = self.tape.below(count + past_the_end);
                let (expr, _) = self.expr(None, 2);
                return format!("set({name}, {index}, {expr})");
            }
        }
        if self.scope.in_function || self.scope.in_graph || self.scope.loop_depth > 0 {
            return self.assignment();
        }
        let name = self.fresh("s");
        let count = 1 + self.tape.below(3);
        self.scope.slots.push((name.clone(), count));
        format!("{name} = slots({count})")
    }

    fn split(&mut self) -> String {
        let first = self.target();
        let second = self.target();
        if first == second {
            return self.assignment();
        }
        let rows = *self.tape.pick(&[2usize, 4]);
        let rest = self.tape.pick(&[&[][..], &[3][..], &[2][..]]).to_vec();
        let mut shape = vec![rows];
        shape.extend(&rest);
        let (expr, _) = self.expr(Some(shape), 2);
        let mut half = vec![rows / 2];
        half.extend(&rest);
        self.define(&first, Some(half.clone()));
        self.define(&second, Some(half));
        format!("{first}, {second} = split({expr}, 2, 0)")
    }

    /// A statement with a mistake: a syntax error, or one found when it runs.
    fn broken(&mut self) -> String {
        let broken = [
            "x = ",
            "y = (1 + ",
            "z = 1 2",
            "def (p) { return p }",
            "for i in 0.. { a = 1 }",
            "print )",
            "a = $",
            "del",
            "= 3",
            "with { a = 1 }",
            "b[ = 1",
            "c = ones(2,, 3)",
            "d = \"unterminated",
            "e = ones(2) +\n\n",
            "run = 1",
            "x = undefined_name + 1",
            "y = ones()",
            "z = reshape(ones(2, 3), 4)",
            "w = ones(2, 3) @ ones(2, 3)",
            "a = eye(3)[5]",
            "b = softmax(ones(2), 3)",
            "del never_defined",
            "run never_recorded",
            "c = concat(ones(2), ones(3, 3), 0)",
            "d = sum(ones(2, 3), 7)",
            "e = full(1)",
            "for i in 0..2 { def inner() { return 1 } }",
            "f = 1 / 0",
            "g = onehot(arange(3), 2)",
            "h = work(-1)",
            "k = ones(2.5)",
            "m = to(ones(2), nowhere)",
            "n = clock(1)",
            "with gpu0 { a = ones(2) }",
            "p = to(ones(2), gpu1)",
            "q = \"text\" + 1",
            "print \"bad escape \\q\"",
            "r = ones(2)[0, 0, 0]",
            "s = arange(3)[1:0]",
            "t = slots(0)",
            "u = load(\"{DIR}\")",
        ];
        self.tape.pick(&broken).to_string()
    }

    /// An expression of shape `want` (of any shape when `None`), at most `depth` operators
    /// deep; returns its text and its shape, when known.
    fn expr(&mut self, want: Option<Shape>, depth: usize) -> (String, Option<Shape>) {
        // Now and then an expression of another shape than the one that fits.
        let want = match want {
            Some(shape) if !self.tape.chance(4) => shape,
            _ => self.any_shape(),
        };
        if depth == 0 || self.tape.chance(35) {
            return self.leaf(&want);
        }
        let depth = depth - 1;
        match self.tape.below(16) {
            13 => {
                let (operand, shape) = self.expr(Some(want), depth);
                (format!("to({operand}, cpu)"), shape)
            }
            14 if want.is_empty() => ("(clock() * 0)".to_string(), Some(want)),
            15 => self.two_axis_index(&want, depth),
            0 => self.unary(&want, depth),
            1 | 2 => self.binary(&want, depth),
            3 => self.matmul(&want, depth),
            4 => self.transpose(&want, depth),
            5 => self.reduce(&want, depth),
            6 if !want.is_empty() => {
                let (operand, shape) = self.expr(Some(want.clone()), depth);
                (format!("softmax({operand}, {})", want.len() - 1), shape)
            }
            7 => self.reshape(&want, depth),
            8 => self.index(&want, depth),
            9 => self.concat(&want, depth),
            10 => self.call_expr(&want, depth),
            11 => {
                let (operand, shape) = self.expr(Some(want), depth);
                (format!("work({}, {operand})", self.tape.below(3)), shape)
            }
            _ => {
                let (operand, shape) = self.expr(Some(want), depth);
                (format!("({operand})"), shape)
            }
        }
    }

    fn leaf(&mut self, want: &Shape) -> (String, Option<Shape>) {
        let fitting: Vec<Var> = self
            .scope
            .vars
            .iter()
            .filter(|var| var.shape.as_ref() == Some(want))
            .cloned()
            .collect();
        match self.tape.below(4) {
            0 if !fitting.is_empty() => {
                let var = self.tape.pick(&fitting).clone();
                (var.name, var.shape)
            }
            1 if want.is_empty() && !self.scope.counters.is_empty() => {
                let counter = self.tape.pick(&self.scope.counters.clone()).clone();
                (counter, Some(Vec::new()))
            }
            2 if !self.scope.slots.is_empty() && self.tape.chance(50) => {
                let (name, count) = self.tape.pick(&self.scope.slots.clone()).clone();
                (format!("{name}[{}]", self.tape.below(count)), None)
            }
            3 if !self.scope.vars.is_empty() && self.tape.chance(20) => {
                // Any variable, whatever its shape.
                let var = self.tape.pick(&self.scope.vars.clone()).clone();
                (var.name, var.shape)
            }
            _ => self.constructor(want),
        }
    }

    fn number(&mut self) -> String {
        self.tape
            .pick(&["1", "0", "2", "0.5", "3", "1e-3", "-1", "1e30", "0.25", "7"])
            .to_string()
    }

    fn constructor(&mut self, want: &Shape) -> (String, Option<Shape>) {
        let dims = want
            .iter()
            .map(|dim| dim.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let text = match (want.as_slice(), self.tape.below(8)) {
            ([], 0) => "full(2)".to_string(),
            ([], _) => self.number(),
            ([n], 5) => format!("arange({n})"),
            ([n], 6) => {
                let items: Vec<String> = (0..*n).map(|_| self.number()).collect();
                format!("[{}]", items.join(", "))
            }
            ([n, m], 5) if n == m => format!("eye({n})"),
            ([n, m], 7) if n <= m => format!("onehot(arange({n}), {m})"),
            ([n, m], 6) => {
                let rows: Vec<String> = (0..*n)
                    .map(|_| {
                        let items: Vec<String> = (0..*m).map(|_| self.number()).collect();
                        format!("[{}]", items.join(", "))
                    })
                    .collect();
                format!("[{}]", rows.join(", "))
            }
            (_, 1) => format!("zeros({dims})"),
            (_, 2) => format!("rand({dims})"),
            (_, 3) => format!("randn({dims})"),
            (_, 4) => format!("full({}, {dims})", self.number()),
            _ => format!("ones({dims})"),
        };
        (text, Some(want.clone()))
    }

    fn unary(&mut self, want: &Shape, depth: usize) -> (String, Option<Shape>) {
        let (operand, shape) = self.expr(Some(want.clone()), depth);
        let function = self.tape.pick(&[
            "-", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs", "-",
        ]);
        let text = if *function == "-" {
            format!("-{operand}")
        } else {
            format!("{function}({operand})")
        };
        (text, shape)
    }

    fn binary(&mut self, want: &Shape, depth: usize) -> (String, Option<Shape>) {
        let (lhs, lhs_shape) = self.expr(Some(want.clone()), depth);
        let rhs_want = if self.tape.chance(30) {
            Vec::new()
        } else {
            want.clone()
        };
        let (rhs, rhs_shape) = self.expr(Some(rhs_want), depth);
        let operator = self.tape.pick(&[
            "+", "-", "*", "/", "+", "*", "**", "<", ">=", "==", "!=", "<=", ">",
        ]);
        (
            format!("({lhs} {operator} {rhs})"),
            broadcast(lhs_shape.as_ref(), rhs_shape.as_ref()),
        )
    }

    fn matmul(&mut self, want: &Shape, depth: usize) -> (String, Option<Shape>) {
        let k = *self.tape.pick(&[2usize, 3]);
        let (lhs_want, rhs_want) = match want.as_slice() {
            [] => (vec![k], vec![k]),
            [a] => (vec![*a, k], vec![k]),
            [a, b] => (vec![*a, k], vec![k, *b]),
            _ => return self.binary(want, depth),
        };
        let (lhs, lhs_shape) = self.expr(Some(lhs_want), depth);
        let (rhs, rhs_shape) = self.expr(Some(rhs_want), depth);
        let fits = lhs_shape.is_some() && rhs_shape.is_some();
        let text = if self.tape.chance(30) {
            format!("matmul({lhs}, {rhs})")
        } else {
            format!("({lhs} @ {rhs})")
        };
        (text, fits.then(|| want.clone()))
    }

    fn transpose(&mut self, want: &Shape, depth: usize) -> (String, Option<Shape>) {
        let reversed: Shape = want.iter().rev().copied().collect();
        let (operand, shape) = self.expr(Some(reversed), depth);
        let shape = shape.map(|shape| shape.into_iter().rev().collect());
        (format!("transpose({operand})"), shape)
    }

    fn reduce(&mut self, want: &Shape, depth: usize) -> (String, Option<Shape>) {
        let function = *self
            .tape
            .pick(&["sum", "mean", "max", "min", "argmax", "sum"]);
        if want.is_empty() && self.tape.chance(50) {
            let (operand, _) = self.expr(None, depth);
            return (format!("{function}({operand})"), Some(Vec::new()));
        }
        let mut operand_shape = vec![*self.tape.pick(&[2usize, 3])];
        operand_shape.extend(want);
        let (operand, shape) = self.expr(Some(operand_shape), depth);
        let shape = shape.and_then(|shape| shape.get(1..).map(<[usize]>::to_vec));
        (format!("{function}({operand}, 0)"), shape)
    }

    fn reshape(&mut self, want: &Shape, depth: usize) -> (String, Option<Shape>) {
        let count: usize = want.iter().product();
        let sources: Vec<Shape> = SHAPES
            .iter()
            .map(|shape| shape.to_vec())
            .filter(|shape| shape.iter().product::<usize>() == count)
            .collect();
        let source = if sources.is_empty() {
            vec![count]
        } else {
            self.tape.pick(&sources).clone()
        };
        let (operand, shape) = self.expr(Some(source), depth);
        let dims = if want.len() == 1 && self.tape.chance(30) {
            "-1".to_string()
        } else {
            want.iter()
                .map(|dim| dim.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let text = if want.is_empty() {
            format!("reshape({operand})")
        } else {
            format!("reshape({operand}, {dims})")
        };
        (text, shape.map(|_| want.clone()))
    }

    fn index(&mut self, want: &Shape, depth: usize) -> (String, Option<Shape>) {
        let rows = *self.tape.pick(&[2usize, 3]);
        if let Some(first) = want.first().copied().filter(|first| *first <= rows) {
            if self.tape.chance(40) {
                // A slice of the first axis.
                let mut base_shape = vec![rows];
                base_shape.extend(&want[1..]);
                let (base, shape) = self.expr(Some(base_shape), depth);
                let start = rows - first;
                let slice = if self.tape.chance(50) {
                    format!("{start}:")
                } else {
                    format!("0:{first}")
                };
                let shape = shape.map(|_| want.clone());
                return (format!("{}[{slice}]", parenthesized(&base)), shape);
            }
        }
        let mut base_shape = vec![rows];
        base_shape.extend(want);
        let (base, shape) = self.expr(Some(base_shape), depth);
        let index = match self.tape.below(10) {
            0 => "-1".to_string(),
            1 => rows.to_string(),
            draw => (draw % rows).to_string(),
        };
        let shape = shape.and_then(|shape| shape.get(1..).map(<[usize]>::to_vec));
        (format!("{}[{index}]", parenthesized(&base)), shape)
    }

    /// `x[i, j]`, `x[i, a:b]`, `x[:, j]` on a matrix, giving a scalar or a row or column.
    fn two_axis_index(&mut self, want: &Shape, depth: usize) -> (String, Option<Shape>) {
        let (rows, columns) = (*self.tape.pick(&[2usize, 3]), *self.tape.pick(&[2usize, 3]));
        let (base, shape) = self.expr(Some(vec![rows, columns]), depth);
        let row = self.tape.below(rows) as i64 - i64::from(self.tape.chance(20)) * rows as i64;
        let column = self.tape.below(columns);
        let (index, result) = match want.as_slice() {
            [] => (format!("{row}, {column}"), Vec::new()),
            [n] if *n <= columns && self.tape.chance(50) => {
                (format!("{row}, {}:", columns - n), vec![*n])
            }
            [n] if *n == rows => (format!(":, {column}"), vec![rows]),
            _ => (format!("{row}, :"), vec![columns]),
        };
        (
            format!("{}[{index}]", parenthesized(&base)),
            shape.map(|_| result),
        )
    }

    fn concat(&mut self, want: &Shape, depth: usize) -> (String, Option<Shape>) {
        let Some(first) = want.first().copied().filter(|first| *first >= 2) else {
            return self.binary(want, depth);
        };
        let left = 1 + self.tape.below(first - 1);
        let mut left_shape = vec![left];
        left_shape.extend(&want[1..]);
        let mut right_shape = vec![first - left];
        right_shape.extend(&want[1..]);
        let (lhs, lhs_shape) = self.expr(Some(left_shape), depth);
        let (rhs, rhs_shape) = self.expr(Some(right_shape), depth);
        let fits = lhs_shape.is_some() && rhs_shape.is_some();
        (
            format!("concat({lhs}, {rhs}, 0)"),
            fits.then(|| want.clone()),
        )
    }

    fn call_expr(&mut self, want: &Shape, depth: usize) -> (String, Option<Shape>) {
        let single: Vec<Function> = self
            .callable()
            .into_iter()
            .filter(|function| function.results.len() == 1)
            .collect();
        if single.is_empty() {
            return self.unary(want, depth);
        }
        let function = self.tape.pick(&single).clone();
        let arguments = self.arguments(&function);
        (
            format!("{}({arguments})", function.name),
            function.results[0].clone(),
        )
    }
}

/// The shape of an elementwise operation on `lhs` and `rhs` (NumPy broadcasting), if known and
/// valid.
fn broadcast(lhs: Option<&Shape>, rhs: Option<&Shape>) -> Option<Shape> {
    let (lhs, rhs) = (lhs?, rhs?);
    let rank = lhs.len().max(rhs.len());
    let dim = |shape: &Shape, axis: usize| {
        let offset = rank - shape.len();
        if axis < offset {
            1
        } else {
            shape[axis - offset]
        }
    };
    (0..rank)
        .map(|axis| match (dim(lhs, axis), dim(rhs, axis)) {
            (a, b) if a == b => Some(a),
            (1, b) => Some(b),
            (a, 1) => Some(a),
            _ => None,
        })
        .collect()
}

fn indent(statement: &str) -> String {
    statement
        .lines()
        .map(|line| format!("  {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text`, in parentheses unless it is a name.
fn parenthesized(text: &str) -> String {
    if text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        text.to_string()
    } else {
        format!("({text})")
    }
}
