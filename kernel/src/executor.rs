//! The executor: the one thread that owns the [`interp::Session`] and runs every request that
//! needs it (execute, complete, inspect), one at a time, in the order the shell received them.
//!
//! # Running a cell
//!
//! Magic lines (`%...`) are cut out of the cell, which leaves its lines where they were. The
//! code between two magics runs as one input of the driver (`dep_interp::driver`, which the
//! REPL and `dep run` use too), as `dep run` runs a file; the last one gives the value of a
//! trailing expression apart, for the cell's result. An input's text is the cell with
//! everything before it blanked to spaces, so that every report still says
//! `cell[N]:line:col` of the cell as written. The driver tells the cell when its code starts
//! (the live display starts then) and, at the end, waits for the cell's ops in their final
//! state.
//!
//! # Interrupts
//!
//! The control loop bumps the driver's interrupt counter ([`Interrupts`]), which cancels at
//! once the ops that have not started; each execute request carries the value the counter had
//! when the shell received it, and is interrupted once the counter moves past it: running ops
//! finish, a blocked `print` or `wait` gives up, no further part runs, and the reply is an
//! `Interrupted` error. A second interrupt stops waiting for the running ops, which go on
//! ([`GIVE_UP_AFTER`]): the session lets them go (`Session::let_go_unfinished`), so a later
//! cell waits for them only through what it reads. Requests received before the interrupt but
//! not yet started end the same way, as ipykernel aborts its queue after an interrupt.

use std::collections::HashMap;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;
use std::thread;

use dep_engine as engine;
use dep_grammar as grammar;
use dep_interp as interp;
use dep_views as views;
use interp::commands::{self, LiveView, Outcome};
use interp::driver::{blank, Driver, Input, Interrupt, Listener};
use jupyter_protocol as jp;
use tokio::sync::oneshot;
use views::live::LiveSource;

use crate::complete;
use crate::display::LiveDisplay;
use crate::iopub::{CellOutput, Iopub, StreamWriter};
use crate::magic;

/// The width of the text fallbacks of `%timeline`.
const TEXT_WIDTH: usize = 100;

/// A request for the executor, with the channel its reply goes back on.
pub(crate) enum Job {
    Execute {
        parent: Box<jp::JupyterMessage>,
        request: jp::ExecuteRequest,
        /// The interrupt counter when the shell received the request.
        interrupt_mark: u64,
        done: oneshot::Sender<jp::ExecuteReply>,
    },
    Complete {
        request: jp::CompleteRequest,
        done: oneshot::Sender<jp::CompleteReply>,
    },
    Inspect {
        request: jp::InspectRequest,
        done: oneshot::Sender<jp::InspectReply>,
    },
}

/// The interrupt counter, shared by the control loop (which bumps it) and the executor's
/// driver: the first interrupt of a cell stops it and ends a blocked `print` or `wait`.
pub(crate) type Interrupts = Interrupt;

/// The interrupts of a cell after which it stops waiting for its running ops (they go on):
/// the first cancels what has not started, stops the cell and ends a blocked `print`, and the
/// cell then waits for the ops already running; the second ends that wait, as the REPL's
/// second Ctrl-C does.
const GIVE_UP_AFTER: u64 = 2;

/// A new interrupt counter for a kernel.
pub(crate) fn interrupts() -> Interrupts {
    Interrupt::new(1)
}

/// Starts the executor thread; it ends when every sender of its job queue is dropped.
pub(crate) fn spawn(
    config: interp::SessionConfig,
    iopub: Iopub,
    interrupts: Interrupts,
) -> io::Result<(mpsc::Sender<Job>, thread::JoinHandle<()>)> {
    let (jobs, queue) = mpsc::channel::<Job>();
    let thread = thread::Builder::new()
        .name("dep-executor".to_string())
        .spawn(move || {
            let mut executor = Executor {
                session: interp::Session::new(config),
                execution_count: 0,
                watch: true,
                iopub,
                driver: Driver::with_interrupt(interrupts),
                events_of: None,
            };
            for job in queue {
                // A bug in one request must not end the kernel: the request's reply channel is
                // dropped (the shell answers with an error) and the next request runs.
                let result = panic::catch_unwind(AssertUnwindSafe(|| executor.run(job)));
                if result.is_err() {
                    eprintln!("dep kernel: a request panicked; the kernel goes on");
                }
            }
        })?;
    Ok((jobs, thread))
}

struct Executor {
    session: interp::Session,
    execution_count: usize,
    /// Whether cells show the live display (`%watch`).
    watch: bool,
    iopub: Iopub,
    /// Runs the cells' code, interrupted by the control loop.
    driver: Driver,
    /// The last cell that ran code (`cell[3]`), whose events the log holds: `%timeline` names it.
    events_of: Option<String>,
}

/// Why a cell failed, as Jupyter shows it.
struct CellFailure {
    ename: String,
    evalue: String,
    traceback: Vec<String>,
}

impl Executor {
    fn run(&mut self, job: Job) {
        match job {
            Job::Execute {
                parent,
                request,
                interrupt_mark,
                done,
            } => {
                let reply = self.execute(&parent, &request, interrupt_mark);
                let _ = done.send(reply);
            }
            Job::Complete { request, done } => {
                let completion =
                    complete::complete(&request.code, request.cursor_pos, &self.scope());
                let _ = done.send(jp::CompleteReply {
                    matches: completion.matches,
                    cursor_start: completion.cursor_start,
                    cursor_end: completion.cursor_end,
                    ..Default::default()
                });
            }
            Job::Inspect { request, done } => {
                let text = complete::inspect(&request.code, request.cursor_pos, &self.scope());
                let _ = done.send(jp::InspectReply {
                    found: text.is_some(),
                    data: text.map_or_else(jp::Media::default, |text| {
                        jp::Media::new(vec![jp::MediaType::Plain(text)])
                    }),
                    ..Default::default()
                });
            }
        }
    }

    fn scope(&self) -> complete::Scope {
        complete::Scope {
            names: self.session.names(),
            variables: self.session.variables(),
            graphs: self.session.graph_names(),
        }
    }

    fn execute(
        &mut self,
        parent: &jp::JupyterMessage,
        request: &jp::ExecuteRequest,
        interrupt_mark: u64,
    ) -> jp::ExecuteReply {
        // An empty cell runs nothing and, as in IPython, takes no number.
        if request.store_history && !request.silent && !request.code.trim().is_empty() {
            self.execution_count += 1;
        }
        let execution_count = jp::ExecutionCount::new(self.execution_count);
        let output = CellOutput::new(self.iopub.clone(), parent.clone(), request.silent);
        output.send(jp::ExecuteInput {
            code: request.code.clone(),
            execution_count,
        });
        match self.run_cell(&request.code, &output, interrupt_mark) {
            Ok(()) => jp::ExecuteReply {
                status: jp::ReplyStatus::Ok,
                execution_count,
                user_expressions: Some(HashMap::new()),
                ..Default::default()
            },
            Err(failure) => {
                output.send(jp::ErrorOutput {
                    ename: failure.ename.clone(),
                    evalue: failure.evalue.clone(),
                    traceback: failure.traceback.clone(),
                });
                jp::ExecuteReply {
                    status: jp::ReplyStatus::Error,
                    execution_count,
                    user_expressions: Some(HashMap::new()),
                    error: Some(Box::new(jp::ReplyError {
                        ename: failure.ename,
                        evalue: failure.evalue,
                        traceback: failure.traceback,
                    })),
                    ..Default::default()
                }
            }
        }
    }

    fn run_cell(&mut self, code: &str, output: &CellOutput, mark: u64) -> Result<(), CellFailure> {
        let path = cell_path(self.execution_count);
        let (code_only, magics) = cut_magics(code);
        let magic_lines: Vec<String> = magics.iter().map(|(_, line)| line.clone()).collect();
        let mut steps = steps(&code_only, magics);
        if steps.len() > 1 && !parse_steps(&mut steps) {
            // A magic inside a block, or a parse error: the cell without its magics runs whole
            // (every parse error at once, and then nothing runs), then the magics.
            let whole = std::iter::once(Step::Code(code_only, None))
                .chain(magic_lines.into_iter().map(Step::Magic))
                .collect();
            return self.run_cell_steps(&path, whole, output, mark);
        }
        self.run_cell_steps(&path, steps, output, mark)
    }

    fn run_cell_steps(
        &mut self,
        path: &str,
        steps: Vec<Step>,
        output: &CellOutput,
        mark: u64,
    ) -> Result<(), CellFailure> {
        let mut display: Option<LiveDisplay> = None;
        let mut ran_code = false;
        let mut run_error: Option<interp::RunError> = None;
        let mut value_text: Option<String> = None;
        let mut interrupted = false;
        let n_steps = steps.len();
        for (index, step) in steps.into_iter().enumerate() {
            if self.driver.interrupt().since(mark) > 0 {
                interrupted = true;
                break;
            }
            match step {
                Step::Magic(line) => {
                    let ran = self.run_magic(&line, output, mark, &mut display, &mut ran_code);
                    if let Err(failure) = ran {
                        finish_display(display.take(), Some(failure.evalue.clone()));
                        return Err(failure);
                    }
                }
                Step::Code(text, parsed) => {
                    self.start_code(&mut ran_code);
                    let input = Input {
                        // The last step's last statement, an expression, is the cell's result.
                        value_apart: index + 1 == n_steps,
                        parsed: parsed.as_ref(),
                        ..Input::new(path, &text)
                    };
                    let mut listener = CellListener {
                        output,
                        display: &mut display,
                        watch: self.watch,
                        writer: None,
                    };
                    let outcome = self
                        .driver
                        .run(&mut self.session, &input, mark, &mut listener);
                    interrupted |= outcome.interrupted;
                    value_text = outcome.value;
                    if let Some(error) = outcome.error {
                        run_error = Some(error);
                        break;
                    }
                    if interrupted {
                        break;
                    }
                }
            }
        }
        let waited = self
            .driver
            .wait_or_give_up(&mut self.session, mark, GIVE_UP_AFTER);
        interrupted |= waited.interrupted;
        if waited.abandoned {
            // Later cells wait for these ops only if they read what the ops write.
            self.session.let_go_unfinished();
        }
        let failure = if interrupted {
            let (n_cancelled, n_running) = self.session.live(path).map_or((0, 0), |source| {
                let view = source.view(true);
                (
                    view.count(engine::OpState::Cancelled),
                    view.count(engine::OpState::Running),
                )
            });
            let running = match (waited.abandoned, n_running) {
                (false, _) => "running ops finished".to_string(),
                (true, 1) => "1 running op goes on (a later cell that reads what it writes waits for it)".to_string(),
                (true, n) => format!("{n} running ops go on (a later cell that reads what they write waits for them)"),
            };
            let (ops, were, pending) = match n_cancelled {
                1 => ("op", "was", "pending op"),
                _ => ("ops", "were", "pending ops"),
            };
            Some(CellFailure {
                ename: "Interrupted".to_string(),
                evalue: format!("{path} interrupted: {n_cancelled} {ops} that had not started {were} cancelled; {running}"),
                traceback: vec![format!(
                    "\x1b[1;31mInterrupted\x1b[0m: {path} stopped; {n_cancelled} {pending} cancelled, writing nothing; {running}. Every variable keeps its last computed value."
                )],
            })
        } else {
            let mut reports: Vec<interp::Report> = Vec::new();
            let mut kind = None;
            for error in run_error.iter().chain(waited.failures.iter()) {
                kind.get_or_insert(error.kind);
                reports.extend(error.reports.iter().cloned());
            }
            kind.map(|kind| failure_of(&interp::RunError { kind, reports }))
        };
        let note = failure.as_ref().map(|failure| failure.evalue.clone());
        finish_display(display, note);
        if let (Some(text), None) = (value_text, &failure) {
            if !text.is_empty() {
                output.send(jp::ExecuteResult {
                    execution_count: jp::ExecutionCount::new(self.execution_count),
                    data: jp::Media::new(vec![jp::MediaType::Plain(text)]),
                    metadata: Default::default(),
                    transient: Some(jp::Transient::default()),
                });
            }
        }
        match failure {
            Some(failure) => Err(failure),
            None => Ok(()),
        }
    }

    /// Before a cell's first code (its own, or a script `%load` runs): the event log holds the
    /// last cell that ran code, for its display, `%timeline` and friends.
    fn start_code(&mut self, ran_code: &mut bool) {
        if !*ran_code {
            self.session.forget_events();
            self.events_of = Some(cell_path(self.execution_count));
            *ran_code = true;
        }
    }

    fn run_magic(
        &mut self,
        line: &str,
        output: &CellOutput,
        mark: u64,
        display: &mut Option<LiveDisplay>,
        ran_code: &mut bool,
    ) -> Result<(), CellFailure> {
        let body = line.trim().strip_prefix('%').unwrap_or(line);
        let command = commands::parse('%', body).map_err(|message| CellFailure {
            ename: "MagicError".to_string(),
            evalue: message.clone(),
            traceback: vec![format!(
                "\x1b[1;31merror\x1b[0m: {message}\n  in: {}",
                line.trim()
            )],
        })?;
        let magic_error = |message: String| CellFailure {
            ename: "MagicError".to_string(),
            evalue: message.clone(),
            traceback: vec![format!("\x1b[1;31merror\x1b[0m: {message}")],
        };
        if command.reads_history() {
            self.driver.wait_idle(&mut self.session, mark);
        }
        if command.replaces_engine() {
            // An interrupt cancels what has not started, a second stops waiting for the
            // running ops (those an earlier cell let go too): the engine is then kept, and the
            // cell ends as interrupted.
            if self
                .driver
                .wait_all_before_replacing(&mut self.session, mark, GIVE_UP_AFTER)
            {
                output
                    .stdout("the engine was not replaced: interrupted while waiting for its ops\n");
                return Ok(());
            }
            // The live display of the old engine shows its final state; a new one starts with
            // the next code.
            finish_display(display.take(), None);
        }
        match commands::run(&mut self.session, command).map_err(magic_error)? {
            Outcome::Text(text) => output.stdout(&text),
            Outcome::Table { header, rows } => output.stdout(&magic::table(&header, &rows)),
            Outcome::Note(note) | Outcome::EngineReplaced(note) => {
                output.stdout(&format!("{note}\n"));
            }
            Outcome::Live(view, frame) => {
                let style = views::TextStyle::plain(TEXT_WIDTH);
                output.stdout(&match view {
                    LiveView::Queues => views::text::queues(&frame, &style),
                    LiveView::Ops => format!(
                        "{}{}\n",
                        views::text::ops(&frame, &style),
                        views::text::session_clock_note(&frame)
                    ),
                });
            }
            Outcome::Timeline(replay, span_ns) => {
                // The log holds the last cell that ran code: the title says which.
                let options = views::svg::TimelineOptions {
                    simulated: self.session.config().policy == engine::Policy::Sim,
                    span_ns,
                    of: self.events_of.clone(),
                    ..Default::default()
                };
                let text_style = views::TextStyle::plain(TEXT_WIDTH);
                let text =
                    views::text::timeline(&replay, &text_style, span_ns, self.events_of.as_deref());
                output.send(jp::DisplayData::new(jp::Media::new(vec![
                    jp::MediaType::Svg(views::svg::timeline(&replay, &options)),
                    jp::MediaType::Plain(text),
                ])));
                if let Some(forgotten) = commands::forgotten_events(&self.session) {
                    output.stdout(&format!("{forgotten}\n"));
                }
            }
            Outcome::Dot(dot) => show_dot(output, dot),
            Outcome::Help => output.stdout(&magic::help()),
            Outcome::Watch(on) => {
                self.watch = on;
                output.stdout(if on {
                    "live display on: cells show their queues and ops while they run\n"
                } else {
                    "live display off\n"
                });
            }
            Outcome::Run { path, source } => {
                self.start_code(ran_code);
                let mut listener = CellListener {
                    output,
                    display,
                    watch: self.watch,
                    writer: None,
                };
                let input = Input::new(&path, &source);
                let outcome = self
                    .driver
                    .run(&mut self.session, &input, mark, &mut listener);
                if let Some(error) = outcome.error {
                    return Err(failure_of(&error));
                }
            }
            Outcome::Quit => {
                return Err(magic_error(
                    "a notebook's kernel does not quit from a cell: stop it from the Kernel menu"
                        .to_string(),
                ))
            }
        }
        Ok(())
    }
}

/// The name reports and views give the cell of execution count `count`: `cell[3]`.
fn cell_path(count: usize) -> String {
    format!("cell[{count}]")
}

/// Shows a DAG: SVG when Graphviz is installed (the DOT text as its fallback), else the DOT
/// text.
fn show_dot(output: &CellOutput, dot: String) {
    match views::dot::to_svg(&dot) {
        Ok(svg) => output.send(jp::DisplayData::new(jp::Media::new(vec![
            jp::MediaType::Svg(svg),
            jp::MediaType::Plain(dot),
        ]))),
        Err(_) => output.stdout(&dot),
    }
}

fn finish_display(display: Option<LiveDisplay>, note: Option<String>) {
    if let Some(display) = display {
        display.finish(note);
    }
}

/// The cell with its magic lines blanked, and the magic lines with their byte offsets.
fn cut_magics(code: &str) -> (String, Vec<(usize, String)>) {
    let mut code_only = String::with_capacity(code.len());
    let mut magics = Vec::new();
    let mut offset = 0;
    for line in code.split_inclusive('\n') {
        if line.trim_start().starts_with('%') {
            magics.push((offset, line.trim().to_string()));
            code_only.push_str(&blank(line));
        } else {
            code_only.push_str(line);
        }
        offset += line.len();
    }
    (code_only, magics)
}

/// One step of a cell.
enum Step {
    /// Code between two magics, as one input: the cell's text with everything before it
    /// blanked to spaces, so that every report still says `cell[N]:line:col` of the cell as
    /// written; and its statements once parsed (when the cell has several steps, which are
    /// parsed first to see whether each stands alone).
    Code(String, Option<grammar::ParseOutput>),
    /// A magic line.
    Magic(String),
}

/// The steps of a cell (its magics blanked in `code_only`): the code between magics, and the
/// magics, in source order. A cell without magics is one step.
fn steps(code_only: &str, magics: Vec<(usize, String)>) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut start = 0;
    let push_code = |start: usize, end: usize, steps: &mut Vec<Step>| {
        if !code_only[start..end].trim().is_empty() {
            steps.push(Step::Code(
                format!("{}{}", blank(&code_only[..start]), &code_only[start..end]),
                None,
            ));
        }
    };
    for (offset, line) in magics {
        push_code(start, offset, &mut steps);
        steps.push(Step::Magic(line));
        start = offset;
    }
    push_code(start, code_only.len(), &mut steps);
    steps
}

/// Parses each step's code, once (the driver runs what is parsed here); returns whether every
/// step parsed.
fn parse_steps(steps: &mut [Step]) -> bool {
    let mut all_parse = true;
    for step in steps {
        if let Step::Code(text, parsed) = step {
            let output = grammar::parse(text);
            all_parse &= output.is_ok();
            *parsed = Some(output);
        }
    }
    all_parse
}

/// What the driver tells the cell: the live display starts with the cell's first code, and
/// the code's output goes to the cell's stream, under the display.
struct CellListener<'a> {
    output: &'a CellOutput,
    display: &'a mut Option<LiveDisplay>,
    watch: bool,
    writer: Option<StreamWriter>,
}

impl Listener for CellListener<'_> {
    fn output(&mut self) -> &mut dyn io::Write {
        let (output, display) = (&self.output, &self.display);
        self.writer.get_or_insert_with(|| {
            StreamWriter::new(
                (*output).clone(),
                display.as_ref().map(LiveDisplay::show_before_output),
            )
        })
    }

    fn started(&mut self, live: Option<&LiveSource>) {
        if let (None, true, Some(live)) = (&self.display, self.watch, live) {
            *self.display = Some(LiveDisplay::start(live.clone(), self.output.clone()));
        }
    }
}

fn failure_of(error: &interp::RunError) -> CellFailure {
    let ename = match error.kind {
        interp::ErrorKind::Parse => "SyntaxError",
        interp::ErrorKind::Runtime => "RuntimeError",
        interp::ErrorKind::Interrupted => "Interrupted",
        _ => "Error",
    };
    let traceback = error
        .reports
        .iter()
        .map(|report| {
            let rendered = report.rendered.trim_end();
            match rendered.split_once('\n') {
                Some((headline, rest)) => format!("\x1b[1;31m{headline}\x1b[0m\n{rest}"),
                None => format!("\x1b[1;31m{rendered}\x1b[0m"),
            }
        })
        .collect();
    let first = error.reports.first();
    let evalue = match first {
        // Its own cell's place (`cell[2]:3`), as the displays name ops: a failure read in a
        // later cell happened in an earlier one.
        Some(report) if report.line > 0 && !report.file.is_empty() => {
            format!("{} ({}:{})", report.message, report.file, report.line)
        }
        Some(report) if report.line > 0 => format!("{} (line {})", report.message, report.line),
        Some(report) => report.message.clone(),
        None => String::new(),
    };
    CellFailure {
        ename: ename.to_string(),
        evalue,
        traceback,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step_texts(code: &str) -> Vec<String> {
        let (code_only, magics) = cut_magics(code);
        steps(&code_only, magics)
            .into_iter()
            .map(|step| match step {
                Step::Code(text, _) => format!("code {}", text.trim()),
                Step::Magic(line) => format!("magic {line}"),
            })
            .collect()
    }

    #[test]
    fn a_cell_runs_as_a_file_between_magics() {
        let code = "A = ones(4)\nB = A + 1\nprint B\n%why B\nfor i in 0..3 { C = A @ A }\nfor i in 0..2 { print i }\nB + 1";
        assert_eq!(
            step_texts(code),
            vec![
                "code A = ones(4)\nB = A + 1\nprint B",
                "magic %why B",
                "code for i in 0..3 { C = A @ A }\nfor i in 0..2 { print i }\nB + 1",
            ]
        );
        // The code after a magic keeps its lines: everything before it is blank.
        let (code_only, magics) = cut_magics("A = 1\n%why A\nB = 2");
        match &steps(&code_only, magics)[2] {
            Step::Code(text, _) => assert_eq!(text, "     \n      \nB = 2"),
            Step::Magic(_) => panic!("code expected"),
        }
    }

    /// An executor over a session of `policy`, whose outputs go nowhere (a silent request).
    fn silent_executor(policy: engine::Policy) -> (Executor, CellOutput) {
        let (queue, _) = tokio::sync::mpsc::unbounded_channel();
        executor_into(policy, queue, true)
    }

    /// An executor over a session of `policy` whose cells' outputs go to `queue`, or nowhere
    /// when `silent`.
    fn executor_into(
        policy: engine::Policy,
        queue: tokio::sync::mpsc::UnboundedSender<crate::iopub::IopubItem>,
        silent: bool,
    ) -> (Executor, CellOutput) {
        let iopub = Iopub::new(queue, crate::message::Identity::new());
        let parent = jp::JupyterMessage::new(jp::ExecuteRequest::new(String::new()), None);
        let config = interp::SessionConfig {
            policy,
            // Two workers, so that an op keeping one busy leaves the other to a later cell.
            threads: 2,
            observe: true,
            ..interp::SessionConfig::default()
        };
        let executor = Executor {
            session: interp::Session::new(config),
            execution_count: 1,
            watch: false,
            iopub: iopub.clone(),
            driver: Driver::new(1),
            events_of: None,
        };
        (executor, CellOutput::new(iopub, parent, silent))
    }

    /// `%timeline` draws the last cell that ran code (the kernel's log holds only its events):
    /// its title, SVG and text alike, names that cell, where it read as the whole session's.
    #[test]
    fn timeline_names_the_cell_it_draws() {
        let (queue, mut published) = tokio::sync::mpsc::unbounded_channel();
        let (mut executor, output) = executor_into(engine::Policy::Naive, queue, false);
        assert!(executor.run_cell("A = ones(2)", &output, 0).is_ok());
        executor.execution_count = 2;
        assert!(executor
            .run_cell("B = A + 1\nC = B * 2", &output, 0)
            .is_ok());
        executor.execution_count = 3;
        assert!(executor.run_cell("%timeline", &output, 0).is_ok());
        let mut timelines = Vec::new();
        while let Ok(crate::iopub::IopubItem::Message(message)) = published.try_recv() {
            if let jp::JupyterMessageContent::DisplayData(display) = message.content {
                for media in display.data.content {
                    match media {
                        jp::MediaType::Svg(text) | jp::MediaType::Plain(text) => {
                            timelines.push(text)
                        }
                        _ => {}
                    }
                }
            }
        }
        let [svg, text] = timelines.as_slice() else {
            panic!("one timeline, as SVG and text: {timelines:?}");
        };
        assert!(svg.contains(">timeline of cell[2]: 2 ops, "), "{svg}");
        assert!(text.starts_with("timeline of cell[2]  ("), "{text}");
    }

    /// A magic inside a block runs after the block, as it did when cells were split by
    /// statement; a parse error anywhere runs nothing, magics included.
    #[test]
    fn a_magic_inside_a_block_runs_after_it_and_a_parse_error_runs_nothing() {
        let (mut executor, output) = silent_executor(engine::Policy::Naive);
        let code = "A = ones(2)\nfor i in 0..2 {\n%watch on\n  A = A + 1\n}\nprint A";
        assert!(executor.run_cell(code, &output, 0).is_ok());
        assert_eq!(executor.session.value("A").unwrap().to_string(), "[3. 3.]");
        match executor.run_cell("B = 1\n%watch off\nC = (", &output, 0) {
            Err(failure) => assert_eq!(failure.ename, "SyntaxError"),
            Ok(()) => panic!("a parse error expected"),
        }
        assert!(executor.watch, "the magic did not run");
        assert!(executor.session.value("B").is_err(), "nothing ran");
    }

    #[test]
    fn a_finished_cell_shows_every_op_done_on_every_engine() {
        // Two chains of matmuls and a print in the middle: under the simulated policy the
        // virtual clock used to stop at the print, leaving the later ops ready or running.
        let code = "A = ones(64, 64)\nB = A @ A\nprint B[0, 0]\nC = B @ A\nD = A @ A\nE = C + D";
        for policy in engine::Policy::ALL {
            let (mut executor, output) = silent_executor(policy);
            assert!(executor.run_cell(code, &output, 0).is_ok(), "{policy}");
            let view = executor
                .session
                .live("cell[1]")
                .expect("observed")
                .view(true);
            // The five statements' ops, and the print's bookkeeping.
            assert!(
                view.count(engine::OpState::Done) >= 5,
                "{policy}: {}",
                view.heading
            );
            for state in [
                engine::OpState::Running,
                engine::OpState::Ready,
                engine::OpState::Waiting,
            ] {
                assert_eq!(view.count(state), 0, "{policy}: {}", view.heading);
            }
        }
    }

    /// After a second interrupt leaves an op running, a later cell that does not read what it
    /// writes ends at once; one that reads it waits for it.
    #[test]
    fn a_cell_after_a_second_interrupt_waits_only_for_what_it_reads() {
        let (mut executor, output) = silent_executor(engine::Policy::Threaded);
        assert!(executor.run_cell("A = ones(4)", &output, 0).is_ok());
        let interrupt = executor.driver.interrupt();
        let interrupter = thread::spawn(move || {
            for _ in 0..2 {
                thread::sleep(std::time::Duration::from_millis(300));
                interrupt.interrupt();
            }
        });
        let started = std::time::Instant::now();
        let mark = executor.driver.mark();
        let interrupted = executor.run_cell("X = work(3000, A)\nprint X", &output, mark);
        interrupter.join().unwrap();
        assert!(interrupted.is_err_and(|failure| failure.evalue.contains("1 running op goes on")));

        let unrelated = std::time::Instant::now();
        let mark = executor.driver.mark();
        assert!(executor.run_cell("print 1", &output, mark).is_ok());
        let waited = unrelated.elapsed();
        assert!(
            waited.as_secs_f64() < 1.0,
            "print 1 waited {waited:?} for X"
        );

        assert!(executor.run_cell("Y = X + 1", &output, mark).is_ok());
        assert!(
            started.elapsed().as_secs_f64() >= 3.0,
            "Y = X + 1 did not wait for X"
        );
        assert_eq!(
            executor.session.value("Y").unwrap().to_string(),
            "[2. 2. 2. 2.]"
        );
    }

    #[test]
    fn blanking_keeps_lines_and_columns() {
        let (code_only, magics) = cut_magics("%watch off\nA = 1 # é\n  B = A");
        assert_eq!(magics, vec![(0, "%watch off".to_string())]);
        assert_eq!(code_only, "          \nA = 1 # é\n  B = A");
        assert_eq!(blank("ab\né c"), "  \n   ");
    }
}
