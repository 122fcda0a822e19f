//! The executor: the one thread that owns the [`interp::Session`] and runs every request that
//! needs it (execute, complete, inspect), one at a time, in the order the shell received them.
//!
//! # Running a cell
//!
//! Magic lines (`%...`) are cut out of the cell, which leaves its lines where they were. The
//! rest is parsed once and run as `dep run` runs a file: the code between two magics with one
//! `Session::run_source` call (a trailing expression whose value the cell shows runs on its
//! own, so that its value goes to the cell's result, not its output stream). A part's text is
//! the cell with everything before it blanked to spaces, so that every report still says
//! `cell[N]:line:col` of the cell as written.
//!
//! An interrupt reaches a running part through the session's two checks, which read the
//! interrupt counter: the interrupt check, asked before every statement (loop bodies included),
//! stops the part and cancels the ops that have not started; the abandon check, asked while a
//! `print` or `wait` blocks, ends the wait at once.
//!
//! # Interrupts
//!
//! The control loop bumps a counter ([`Interrupts`]); each execute request carries the value
//! the counter had when the shell received it, and is interrupted once the counter moves past
//! it: pending ops are cancelled (`Session::cancel`), running ones finish, no further part
//! runs, and the reply is an `Interrupted` error. Requests received before the interrupt but
//! not yet started end the same way, as ipykernel aborts its queue after an interrupt.

use std::collections::HashMap;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use dep_engine as engine;
use dep_grammar as grammar;
use dep_interp as interp;
use dep_views as views;
use interp::commands::{self, LiveView, Outcome};
use jupyter_protocol as jp;
use tokio::sync::oneshot;

use crate::complete;
use crate::display::{self, LiveDisplay};
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

/// The interrupt counter, shared by the control loop (which bumps it) and the executor.
#[derive(Clone, Default)]
pub(crate) struct Interrupts(Arc<AtomicU64>);

impl Interrupts {
    pub(crate) fn mark(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    pub(crate) fn interrupt(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    fn since(&self, mark: u64) -> bool {
        self.mark() > mark
    }
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
                interrupts,
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
    interrupts: Interrupts,
}

/// Why a cell failed, as Jupyter shows it.
struct CellFailure {
    ename: String,
    evalue: String,
    traceback: Vec<String>,
}

/// One step of a cell.
enum Step {
    /// Statements run by one `run_source` call (`start..end` in the cell's bytes).
    Code {
        start: usize,
        end: usize,
        /// The cell's last statement, an expression whose value is the cell's result.
        shows_value: bool,
    },
    /// A magic line.
    Magic(String),
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
        if request.store_history && !request.silent {
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
        let path = format!("cell[{}]", self.execution_count);
        let (code_only, magics) = cut_magics(code);
        let parsed = grammar::parse(&code_only);
        if !parsed.diagnostics.is_empty() {
            // run_source reports every parse error of the cell at once, and runs nothing.
            return match self.session.run_source(&path, &code_only, &mut io::sink()) {
                Ok(()) => Ok(()),
                Err(error) => Err(failure_of(&error)),
            };
        }
        let steps = steps(&parsed.program.statements, &code_only, magics);
        let mut display: Option<LiveDisplay> = None;
        let mut ran_code = false;
        let mut run_error: Option<interp::RunError> = None;
        let mut value_text: Option<String> = None;
        let mut interrupted = false;
        for step in steps {
            if self.interrupts.since(mark) {
                interrupted = true;
                break;
            }
            // Asked before each statement (loop and function bodies included), and while a
            // `print` or `wait` blocks (set again each time: `%reset` makes a new session).
            let interrupts = self.interrupts.clone();
            self.session
                .set_interrupt_check(Some(Box::new(move || interrupts.since(mark))));
            let interrupts = self.interrupts.clone();
            self.session
                .set_abandon_check(Some(Box::new(move || interrupts.since(mark))));
            match step {
                Step::Magic(line) => {
                    if let Err(failure) = self.run_magic(&line, output, mark, &mut display) {
                        finish_display(display.take(), Some(failure.evalue.clone()));
                        return Err(failure);
                    }
                }
                Step::Code {
                    start,
                    end,
                    shows_value,
                } => {
                    if !ran_code {
                        // The log holds the last cell that ran code, for %timeline and friends.
                        if let Some(log) = self.session.event_log() {
                            log.clear();
                        }
                        ran_code = true;
                    }
                    if display.is_none() && self.watch {
                        display = self.start_display(&path, output);
                    }
                    let text = format!("{}{}", blank(&code_only[..start]), &code_only[start..end]);
                    let result = if shows_value {
                        let mut buffer = Vec::new();
                        let result = self.session.run_source(&path, &text, &mut buffer);
                        value_text = Some(String::from_utf8_lossy(&buffer).trim_end().to_string());
                        result
                    } else {
                        let before_output = display.as_ref().map(LiveDisplay::show_before_output);
                        let mut writer = StreamWriter::new(output.clone(), before_output);
                        self.session.run_source(&path, &text, &mut writer)
                    };
                    if let Err(error) = result {
                        interrupted |= self.interrupts.since(mark);
                        run_error = Some(error);
                        break;
                    }
                }
            }
        }
        interrupted |= self.wait_idle(mark);
        if !interrupted {
            self.finish_cell_ops();
            self.session
                .wait_for_kernel_times_until(|| self.interrupts.since(mark));
        }
        let failures = self.session.take_failures().err();
        let failure = if interrupted {
            let n_cancelled = self.display_source(&path).map_or(0, |source| {
                source.view(true).count(engine::OpState::Cancelled)
            });
            Some(CellFailure {
                ename: "Interrupted".to_string(),
                evalue: format!("{path} interrupted: {n_cancelled} ops that had not started were cancelled; running ops finished"),
                traceback: vec![format!(
                    "\x1b[1;31mInterrupted\x1b[0m: {path} stopped; {n_cancelled} pending ops cancelled. Variables they would have written hold a `cancelled` error until written again; every other variable keeps its value."
                )],
            })
        } else {
            let mut reports: Vec<interp::Report> = Vec::new();
            let mut kind = None;
            for error in run_error.iter().chain(failures.iter()) {
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

    fn display_source(&self, title: &str) -> Option<display::Source> {
        let log = self.session.event_log()?.clone();
        Some(display::Source {
            title: title.to_string(),
            policy: self.session.engine().policy(),
            monitor: self.session.engine().monitor(),
            log,
            places: self.session.places(),
        })
    }

    fn start_display(&self, title: &str, output: &CellOutput) -> Option<LiveDisplay> {
        Some(LiveDisplay::start(
            self.display_source(title)?,
            output.clone(),
        ))
    }

    /// Lets the engine reach its final state once every op has finished: the simulated policy
    /// advances its virtual clock only when something waits, so without this a cell's display
    /// would end with ops still ready or running at their virtual times.
    fn finish_cell_ops(&self) {
        self.session.engine().wait_all();
    }

    /// Waits until every pushed op has finished, cancelling the pending ones on an interrupt;
    /// returns whether the cell was interrupted.
    fn wait_idle(&self, mark: u64) -> bool {
        let monitor = self.session.engine().monitor();
        let mut interrupted = false;
        let mut n_polls: u32 = 0;
        loop {
            if !interrupted && self.interrupts.since(mark) {
                self.session.cancel();
                interrupted = true;
            }
            if monitor.n_unfinished() == 0 {
                return interrupted;
            }
            // Spin briefly (a trivial cell's op ends within microseconds), then back off to
            // at most 5 ms between looks: interrupts are seen within that.
            n_polls += 1;
            if n_polls < 64 {
                thread::yield_now();
            } else {
                let n_sleeps = u64::from((n_polls - 63).min(100));
                thread::sleep(Duration::from_micros(n_sleeps * 50));
            }
        }
    }

    fn run_magic(
        &mut self,
        line: &str,
        output: &CellOutput,
        mark: u64,
        display: &mut Option<LiveDisplay>,
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
            self.wait_idle(mark);
        }
        if command.replaces_engine() {
            // The live display of the old engine shows its final state; a new one starts with
            // the next code.
            self.finish_cell_ops();
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
                    LiveView::Ops => views::text::ops(&frame, &style),
                });
            }
            Outcome::Timeline(replay, span_ns) => {
                let options = views::svg::TimelineOptions {
                    simulated: self.session.engine().policy() == engine::Policy::Sim,
                    span_ns,
                    ..Default::default()
                };
                let text_style = views::TextStyle::plain(TEXT_WIDTH);
                output.send(jp::DisplayData::new(jp::Media::new(vec![
                    jp::MediaType::Svg(views::svg::timeline(&replay, &options)),
                    jp::MediaType::Plain(views::text::timeline(&replay, &text_style)),
                ])));
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
                let mut writer = StreamWriter::new(output.clone(), None);
                let ran = self.session.run_source(&path, &source, &mut writer);
                ran.map_err(|error| failure_of(&error))?;
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

/// The steps of a cell: its code between magics, and the magics, in source order; a last
/// statement that shows a value is a step of its own.
fn steps(statements: &[grammar::Stmt], source: &str, magics: Vec<(usize, String)>) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut magics = magics.into_iter().peekable();
    let mut current: Option<(usize, usize)> = None;
    let close = |current: &mut Option<(usize, usize)>, steps: &mut Vec<Step>| {
        if let Some((start, end)) = current.take() {
            steps.push(Step::Code {
                start,
                end,
                shows_value: false,
            });
        }
    };
    for (stmt_idx, stmt) in statements.iter().enumerate() {
        while let Some((_, line)) = magics.next_if(|(offset, _)| *offset < stmt.span.start) {
            close(&mut current, &mut steps);
            steps.push(Step::Magic(line));
        }
        let is_last = stmt_idx + 1 == statements.len();
        if is_last && matches!(stmt.kind, grammar::StmtKind::Expr(_)) {
            close(&mut current, &mut steps);
            steps.push(Step::Code {
                start: stmt.span.start,
                end: stmt.span.end,
                shows_value: true,
            });
        } else {
            let start = current.map_or(stmt.span.start, |(start, _)| start);
            current = Some((start, stmt.span.end));
        }
    }
    close(&mut current, &mut steps);
    steps.extend(magics.map(|(_, line)| Step::Magic(line)));
    debug_assert!(steps
        .iter()
        .all(|step| !matches!(step, Step::Code { end, .. } if *end > source.len())));
    steps
}

/// `text` with every character but line feeds replaced by a space: lines and columns (in
/// characters) stay where they were.
fn blank(text: &str) -> String {
    text.chars()
        .map(|c| if c == '\n' { '\n' } else { ' ' })
        .collect()
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
        let parsed = grammar::parse(&code_only);
        assert!(parsed.diagnostics.is_empty());
        steps(&parsed.program.statements, &code_only, magics)
            .into_iter()
            .map(|step| match step {
                Step::Code {
                    start,
                    end,
                    shows_value,
                } => {
                    format!(
                        "{}{}",
                        if shows_value { "value " } else { "code " },
                        &code_only[start..end]
                    )
                }
                Step::Magic(line) => format!("magic {line}"),
            })
            .collect()
    }

    #[test]
    fn a_cell_runs_as_a_file_between_magics_with_its_shown_value_apart() {
        let code = "A = ones(4)\nB = A + 1\nprint B\n%why B\nfor i in 0..3 { C = A @ A }\nfor i in 0..2 { print i }\nB + 1";
        assert_eq!(
            step_texts(code),
            vec![
                "code A = ones(4)\nB = A + 1\nprint B",
                "magic %why B",
                "code for i in 0..3 { C = A @ A }\nfor i in 0..2 { print i }",
                "value B + 1",
            ]
        );
    }

    /// An executor over a session of `policy`, whose outputs go nowhere (a silent request).
    fn silent_executor(policy: engine::Policy) -> (Executor, CellOutput) {
        let (queue, _) = tokio::sync::mpsc::unbounded_channel();
        let iopub = Iopub::new(queue, crate::message::Identity::new());
        let parent = jp::JupyterMessage::new(jp::ExecuteRequest::new(String::new()), None);
        let config = interp::SessionConfig {
            policy,
            observe: true,
            ..interp::SessionConfig::default()
        };
        let executor = Executor {
            session: interp::Session::new(config),
            execution_count: 1,
            watch: false,
            iopub: iopub.clone(),
            interrupts: Interrupts::default(),
        };
        (executor, CellOutput::new(iopub, parent, true))
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
                .display_source("cell[1]")
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

    #[test]
    fn blanking_keeps_lines_and_columns() {
        let (code_only, magics) = cut_magics("%watch off\nA = 1 # é\n  B = A");
        assert_eq!(magics, vec![(0, "%watch off".to_string())]);
        assert_eq!(code_only, "          \nA = 1 # é\n  B = A");
        assert_eq!(blank("ab\né c"), "  \n   ");
    }
}
