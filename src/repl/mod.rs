//! The REPL: `dep` with no arguments.
//!
//! On a terminal it is a rustyline editor (history, completion, signature hints, colours,
//! multi-line blocks) over one [`Session`]. Each input is pushed into the engine the moment it is
//! complete and the prompt comes back at once while its ops run: only `print`, `save`, `wait` and
//! a shown expression value block, each for the variables it needs. A live panel under the input
//! line shows the pending ops ([`panel`]). Colon commands inspect and steer the session
//! (`dep_interp::commands`, shared with the kernel's `%` magics; the REPL only renders them);
//! one typed at a continuation runs too, the unfinished statement kept ([`command_in`]).
//!
//! When stdin is not a terminal, the same loop reads statements line by line like a script, with
//! no prompt, and the exit code says whether any statement failed ([`run_piped`]).
//!
//! Nothing a user types ends the REPL: a parse error, a failing statement or op, a bad command
//! is reported and the session, with all its variables, goes on. Ctrl-C at the prompt cancels
//! the ops that have not started (and drops the line being typed); Ctrl-D (or `:quit`) waits for
//! the pending ops and leaves with 0. Ctrl-C while a statement runs or blocks (a `print` waiting
//! for a long op, a long loop pushing ops) cancels the ops that have not started and stops the
//! input; running ops finish: see [`watch_interrupts`]. Every input runs through the driver that
//! the kernel and `dep run` use too (`dep_interp::driver`).

mod helper;
mod panel;
mod style;

use std::io::{self, BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dep_engine as engine;
use dep_interp::commands::{self, Command, LiveView, Outcome};
use dep_interp::driver::{Driver, Input, Interrupt, Listener};
use dep_interp::{builtins, ErrorKind, RunError, Session, SessionConfig};
use dep_views as views;
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::{
    Cmd, ColorMode, CompletionType, ConditionalEventHandler, Config, Editor, Event, EventContext,
    EventHandler, KeyEvent, RepeatCount,
};

use crate::repl::helper::DepHelper;
use crate::repl::panel::Panel;
use crate::repl::style::Style;

/// `print!`, best effort: the REPL's answers going into a pipe closed early (`dep < script |
/// head`) must not end the session with a panic; it reads on, as a script's own prints do.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = write!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `println!`, best effort (see [`say`]).
macro_rules! sayln {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// Exit code when a statement or op failed (as `dep run`).
const EXIT_RUNTIME: u8 = 1;
/// Exit code of a usage or parse error (as `dep run`).
const EXIT_USAGE: u8 = 2;

/// The prompt, and the prompt of a continuation line (an open block or bracket).
const PROMPT: &str = "dep> ";
const CONTINUATION_PROMPT: &str = "...> ";

/// How long the prompt waits for ops that are about to finish (see `Driver::settle`).
const SETTLE_TIME: Duration = Duration::from_millis(30);

/// Columns of the text views when the output is not a terminal.
const PIPED_WIDTH: usize = 100;

/// The file name that reports give to typed input.
const INPUT_PATH: &str = "<repl>";
const STDIN_PATH: &str = "<stdin>";

/// Runs the REPL: interactive on a terminal, a line-by-line script otherwise.
pub(crate) fn run() -> ExitCode {
    let config = match session_config() {
        Ok(config) => config,
        Err(message) => {
            eprintln!("dep: {message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if io::stdin().is_terminal() {
        run_interactive(config)
    } else {
        run_piped(config)
    }
}

/// The engine comes from `DEP_ENGINE` and `DEP_THREADS`, else the defaults; the REPL observes it
/// (for `:timeline`, `:trace`) and shows the values of expression statements.
fn session_config() -> Result<SessionConfig, String> {
    let engine_config = engine::EngineConfig::from_env()?;
    dep_interp::comm::timeout_from_env()?;
    Ok(SessionConfig {
        policy: engine_config.policy,
        threads: engine_config.threads,
        observe: true,
        lean_log: false,
        show_expression_values: true,
        kept_events: dep_interp::interactive_kept_events()?,
        batch: false,
    })
}

/// Whether the loop goes on after an input.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Quit,
}

/// What the REPL loop owns: the session and how it shows things.
struct Ctx {
    session: Session,
    style: Style,
    /// The live panel, on a terminal.
    panel: Option<Arc<Panel>>,
    /// What names the helper completes, on a terminal.
    helper_shared: Option<Arc<helper::Shared>>,
    /// The worst failure so far, for the exit code of a piped run.
    worst: Option<ErrorKind>,
    /// Terminal columns for the text views.
    width: usize,
    /// Runs every input; on a terminal, Ctrl-C interrupts it (see [`watch_interrupts`]): the
    /// first cancels, the second gives up a blocked `print`.
    driver: Driver,
}

impl Ctx {
    fn new(session: Session, style: Style) -> Ctx {
        Ctx {
            session,
            style,
            panel: None,
            helper_shared: None,
            worst: None,
            width: PIPED_WIDTH,
            driver: Driver::new(2),
        }
    }

    /// Pushes the statements of `source`, printing what they print, and reports the errors found
    /// on the way: parse errors, a bad statement, a failure that a `print` waited for.
    fn run_source(&mut self, path: &str, source: &str) {
        self.run_source_from_line(path, 1, source);
    }

    /// [`Ctx::run_source`] for text that starts at line `first_line` of `path`.
    fn run_source_from_line(&mut self, path: &str, first_line: u32, source: &str) {
        let input = Input {
            first_line,
            ..Input::new(path, source)
        };
        if let Some(panel) = &self.panel {
            panel.input_starts();
        }
        let mark = self.driver.mark();
        let outcome = self
            .driver
            .run(&mut self.session, &input, mark, &mut Stdout(io::stdout()));
        if let Some(error) = outcome.error {
            self.report(&error);
        }
        self.refresh_names();
    }

    /// Gives pending ops a few milliseconds to finish before the prompt comes back. Most
    /// statements take microseconds: their failures are then reported right away rather than
    /// after the next input, and no live panel flashes by for them.
    fn settle(&self) {
        self.driver.settle(&self.session, SETTLE_TIME);
    }

    /// Reports the op failures the engine saw since the last look, without waiting.
    fn report_new_failures(&mut self) {
        if let Err(error) = self.session.take_failures() {
            self.report(&error);
        }
    }

    fn report(&mut self, error: &RunError) {
        let worst = match (self.worst, error.kind) {
            (Some(ErrorKind::Runtime), _) | (_, ErrorKind::Runtime) => ErrorKind::Runtime,
            (_, kind) => kind,
        };
        self.worst = Some(worst);
        let rendered: Vec<String> = error
            .reports
            .iter()
            .map(|report| self.style.report(&report.rendered))
            .collect();
        eprintln!("{}", rendered.join("\n\n"));
    }

    fn usage_error(&mut self, message: &str) {
        if self.worst.is_none() {
            self.worst = Some(ErrorKind::Parse);
        }
        eprintln!("{}", self.style.error(&format!("dep: {message}")));
    }

    fn note(&self, message: &str) {
        eprintln!("{}", self.style.note(message));
    }

    fn refresh_names(&self) {
        if let Some(shared) = &self.helper_shared {
            *shared
                .names
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = self.session.names();
            *shared
                .graphs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = self.session.graph_names();
        }
    }

    /// After the engine was replaced (`:engine`, `:threads`, `:reset`).
    fn engine_replaced(&mut self) {
        if let Some(panel) = &self.panel {
            panel.set_source(self.session.live(INPUT_PATH));
        }
        self.refresh_names();
    }

    fn wait_for_pending(&mut self, why: &str) {
        let n_unfinished = self.session.n_unfinished();
        if n_unfinished > 0 {
            self.note(&format!(
                "waiting for {n_unfinished} pending op{} {why}",
                views::text::plural(n_unfinished)
            ));
        }
    }

    /// Cancels the ops that have not started and says which.
    fn cancel_pending(&mut self) {
        let snapshot = self.session.monitor().snapshot();
        self.session.cancel();
        if let Some(panel) = &self.panel {
            panel.mark_cancelled(
                snapshot
                    .ops
                    .iter()
                    .filter(|op| {
                        matches!(op.state, engine::OpState::Waiting | engine::OpState::Ready)
                    })
                    .map(|op| op.id),
            );
        }
        let labels = |state: fn(engine::OpState) -> bool| -> Vec<String> {
            snapshot
                .ops
                .iter()
                .filter(|op| state(op.state))
                .map(|op| format!("`{}`", op.label))
                .collect()
        };
        let cancelled =
            labels(|state| matches!(state, engine::OpState::Waiting | engine::OpState::Ready));
        let running = labels(|state| state == engine::OpState::Running);
        if cancelled.is_empty() && running.is_empty() {
            return;
        }
        let mut message = format!(
            "cancelled {} op{} that had not started",
            cancelled.len(),
            views::text::plural(cancelled.len())
        );
        if !cancelled.is_empty() {
            message.push_str(&format!(": {}", summarize(&cancelled)));
        }
        if !running.is_empty() {
            message.push_str(&format!(
                "; still running (not interruptible): {}",
                summarize(&running)
            ));
        }
        self.note(&message);
    }

    fn run_command(&mut self, command: Command) -> Flow {
        if command.replaces_engine() {
            self.wait_for_pending("before replacing the engine");
            // Ctrl-C cancels what has not started and stops the command; again, it stops
            // waiting for the running ops (they go on, on the engine kept).
            let mark = self.driver.mark();
            if self
                .driver
                .wait_all_before_replacing(&mut self.session, mark, 2)
            {
                self.note("interrupted (Ctrl-C): the engine was not replaced");
                return Flow::Continue;
            }
        }
        if command.reads_history() {
            // A trace, timeline or DAG of ops still pending would show them waiting, or leave
            // them out: they finish first (Ctrl-C cancels those not started), as in a notebook.
            let mark = self.driver.mark();
            self.driver.wait_idle(&mut self.session, mark);
        }
        let outcome = match commands::run(&mut self.session, command) {
            Ok(outcome) => outcome,
            Err(message) => {
                self.usage_error(&message);
                return Flow::Continue;
            }
        };
        match outcome {
            Outcome::Text(text) => say!("{text}"),
            Outcome::Table { header, rows } => self.table(&header, &rows),
            Outcome::Note(note) => self.note(&note),
            Outcome::EngineReplaced(note) => {
                self.engine_replaced();
                self.note(&note);
            }
            Outcome::Live(LiveView::Queues, frame) => {
                say!("{}", views::text::queues(&frame, &self.text_style()));
            }
            Outcome::Live(LiveView::Ops, frame) => {
                say!("{}", views::text::ops(&frame, &self.text_style()));
                self.note(&views::text::session_clock_note(&frame));
            }
            Outcome::Timeline(replay, span_ns) => {
                say!(
                    "{}",
                    views::text::timeline(&replay, &self.text_style(), span_ns, None)
                );
                if let Some(forgotten) = commands::forgotten_events(&self.session) {
                    self.note(&forgotten);
                }
            }
            Outcome::Dot(dot) => say!("{dot}"),
            Outcome::Help => self.help(),
            Outcome::Watch(on) => match &self.panel {
                Some(panel) => panel.set_enabled(on),
                None => self.note("the live panel shows only on a terminal"),
            },
            Outcome::Run { path, source } => self.run_source(&path, &source),
            Outcome::Quit => return Flow::Quit,
        }
        Flow::Continue
    }

    fn help(&self) {
        let mut out = String::new();
        out.push_str(
            "Each statement is pushed into the engine as soon as it is complete, and the prompt\n\
             comes back while its ops run; `print X` waits for X only. Tab completes, Ctrl-R\n\
             searches the history, Ctrl-C cancels the ops that have not started, Ctrl-D waits\n\
             for the pending ops and leaves. A command typed inside an unfinished statement (at\n\
             the `...>` prompt) runs at once, and the statement's lines are kept for the rest.\n\n",
        );
        out.push_str(&self.style.heading("Commands"));
        out.push('\n');
        let lines = commands::help_lines(':');
        let width = lines
            .iter()
            .map(|(usage, _)| usage.len())
            .max()
            .unwrap_or(0);
        for (usage, what) in &lines {
            out.push_str(&format!("  {usage:<width$}  {what}\n"));
        }
        out.push('\n');
        out.push_str(&self.style.heading("Builtins"));
        out.push('\n');
        let signatures = builtins::BUILTINS
            .iter()
            .map(|info| (info.signature, info.doc))
            .chain(
                builtins::OTHER_FUNCTIONS
                    .iter()
                    .map(|(_, signature, doc)| (*signature, *doc)),
            );
        for (signature, doc) in signatures {
            out.push_str(&format!("  {signature:<20}  {doc}\n"));
        }
        say!("{out}");
    }

    /// A table with a heading row, columns as wide as their widest cell.
    fn table(&self, header: &[String], rows: &[Vec<String>]) {
        let widths: Vec<usize> = (0..header.len())
            .map(|column| {
                rows.iter()
                    .chain(std::iter::once(&header.to_vec()))
                    .map(|row| row.get(column).map_or(0, |cell| cell.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |row: &[String]| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            cells.join("  ").trim_end().to_string()
        };
        sayln!("{}", self.style.heading(&line(header)));
        for row in rows {
            sayln!("{}", line(row));
        }
    }

    fn text_style(&self) -> views::TextStyle {
        views::TextStyle {
            color: self.style.colour,
            width: self.width,
        }
    }
}

/// Reads the text after `:` if `line` is a colon command.
fn colon_command(line: &str) -> Option<&str> {
    line.trim_start().strip_prefix(':')
}

/// Reads the text after `:` if `line` is a colon command where a statement is unfinished (a
/// block or bracket open): any line starting with `:` at the prompt, but at a continuation only
/// one whose first word names a command (`:vars`, `:why A`), so that a slice's end on a line
/// of its own (`x[0` then `:n]`) stays code.
fn command_in<'line>(buffer: &str, line: &'line str) -> Option<&'line str> {
    colon_command(line).filter(|text| {
        let word = text.split_whitespace().next().unwrap_or("");
        buffer.is_empty()
            || (commands::COMMANDS.iter())
                .any(|info| info.name == word || info.aliases.contains(&word))
    })
}

/// Said after a colon command run at a continuation: the unfinished statement waits for its
/// next lines.
const STILL_UNFINISHED: &str =
    "(the unfinished statement is kept: go on typing it at `...>`; Ctrl-C drops it)";

/// Said when `:quit` leaves with a statement unfinished, which then never runs.
const DROPPED_UNFINISHED: &str = "(the unfinished statement was not run)";

/// The interactive REPL on a terminal.
fn run_interactive(config: SessionConfig) -> ExitCode {
    let style = Style::from_env();
    let mut ctx = Ctx::new(Session::new(config), style);
    let panel = Arc::new(Panel::new(ctx.session.live(INPUT_PATH), style));
    let helper_shared = Arc::new(helper::Shared::default());
    ctx.panel = Some(panel.clone());
    ctx.helper_shared = Some(helper_shared.clone());

    let mut editor = match new_editor(style) {
        Ok(editor) => editor,
        Err(error) => {
            eprintln!("dep: cannot start the line editor: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    editor.set_helper(Some(DepHelper::new(helper_shared, panel.clone(), style)));
    let interrupted = Arc::new(AtomicBool::new(false));
    editor.bind_sequence(
        KeyEvent::ctrl('C'),
        EventHandler::Conditional(Box::new(InterruptKey(interrupted.clone()))),
    );
    let line_keys = Arc::new(std::sync::Mutex::new(LineKeys::default()));
    editor.bind_sequence(
        Event::Any,
        EventHandler::Conditional(Box::new(CountKeys(line_keys.clone()))),
    );
    let history = history_path();
    if let Some(path) = &history {
        // A missing history file is the first run; anything else is not worth stopping for.
        let _ = editor.load_history(path);
    }
    let leaving = Arc::new(AtomicBool::new(false));
    watch_interrupts(ctx.driver.interrupt(), leaving.clone());

    sayln!(
        "dep {}: a tensor language on an asynchronous dependency engine ({}, {} threads).\n\
         :help lists the commands; Ctrl-D leaves.",
        env!("CARGO_PKG_VERSION"),
        ctx.session.config().policy,
        ctx.session.config().threads,
    );
    let mut buffer = String::new();
    // The lines of code run so far: the next input's first line is numbered after them.
    let mut typed_lines: u32 = 0;
    let mut typed_ahead = false;
    loop {
        ctx.settle();
        ctx.report_new_failures();
        let prompt = if buffer.is_empty() {
            PROMPT
        } else {
            CONTINUATION_PROMPT
        };
        let width = editor
            .dimensions()
            .map_or(80, |(columns, _)| usize::from(columns));
        ctx.width = width.saturating_sub(1).max(40);
        panel.start_prompt(width);
        // A line whose keys came at once was typed ahead or pasted, and the editor may hold
        // the next ones already, read from stdin with it: the panel, which waits for a key on
        // stdin with Ctrl-C taken as a key, would then hold them back, and a Ctrl-C meant for
        // the `print` among them would wait for its end.
        if typed_ahead {
            panel.leave_out_of_next_drawing();
        } else {
            panel::watch_until_key(&panel, prompt, || {
                editor
                    .dimensions()
                    .map_or(80, |(columns, _)| usize::from(columns))
            });
        }
        *engine::lock(&line_keys) = LineKeys::default();
        let read = editor.readline(prompt);
        // A bare Enter (to see the panel again) is no sign of a paste.
        let keys = std::mem::take(&mut *engine::lock(&line_keys));
        typed_ahead = matches!(&read, Ok(line) if !line.trim().is_empty()) && keys.came_at_once();
        let line = match read {
            Ok(_) if interrupted.swap(false, Ordering::SeqCst) => {
                buffer.clear();
                ctx.cancel_pending();
                continue;
            }
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                buffer.clear();
                ctx.cancel_pending();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(error) => {
                eprintln!("dep: cannot read input: {error}");
                break;
            }
        };
        // What failed while the line was typed is reported before it runs (the panel only told
        // of it): its output comes after the failures that happened first.
        ctx.report_new_failures();
        if !line.trim().is_empty() && editor.add_history_entry(line.as_str()).unwrap_or(false) {
            // Written at once, so that a session that is killed keeps its history too.
            if let Some(path) = &history {
                if let Err(error) = editor.append_history(path) {
                    eprintln!("dep: cannot save history to {}: {error}", path.display());
                }
            }
        }
        let flow = match command_in(&buffer, &line) {
            Some(text) => {
                // At a continuation too: the lines typed so far wait for the command.
                let flow = match commands::parse(':', text) {
                    Ok(command) => ctx.run_command(command),
                    Err(message) => {
                        ctx.usage_error(&message);
                        Flow::Continue
                    }
                };
                if !buffer.is_empty() && flow == Flow::Continue {
                    ctx.note(STILL_UNFINISHED);
                }
                flow
            }
            None if buffer.is_empty() && line.trim().is_empty() => Flow::Continue,
            None => {
                if !buffer.is_empty() {
                    buffer.push('\n');
                }
                buffer.push_str(&line);
                Flow::Continue
            }
        };
        if flow == Flow::Quit {
            if !buffer.trim().is_empty() {
                ctx.note(DROPPED_UNFINISHED);
            }
            break;
        }
        if !buffer.is_empty() && dep_grammar::is_complete(&buffer) {
            let source = std::mem::take(&mut buffer);
            // Numbered on from the code typed before, so that reports and views tell inputs
            // apart (`<repl>:7`, not every input's `<repl>:1`).
            ctx.run_source_from_line(INPUT_PATH, typed_lines + 1, &source);
            typed_lines += source.lines().count().max(1) as u32;
        }
    }

    leaving.store(true, Ordering::SeqCst);
    let mark = ctx.driver.mark();
    ctx.wait_for_pending("before leaving");
    // While leaving, Ctrl-C cancels what has not started and Ctrl-C again leaves at once.
    let waited = ctx.driver.wait_or_leave(&mut ctx.session, mark);
    if waited.abandoned {
        ctx.note("left without waiting for the running ops");
        return ExitCode::SUCCESS;
    }
    if let Some(error) = waited.failures {
        ctx.report(&error);
    }
    ExitCode::SUCCESS
}

/// A line whose keys, its first to its Enter, came less than this long apart on average was
/// typed ahead or pasted: the fastest typists leave about 60 ms between keys, while the keys of
/// one write come as fast as the editor takes them, or a few milliseconds apart on a loaded
/// machine that puts the REPL aside between two of them.
const TYPED_AHEAD_KEY_GAP: std::time::Duration = std::time::Duration::from_millis(25);

/// The REPL's side of an input: what it prints goes to stdout, now.
struct Stdout(io::Stdout);

impl Listener for Stdout {
    fn output(&mut self) -> &mut dyn Write {
        &mut self.0
    }
}

/// Ctrl-C outside the line editor, while an input runs (a `print` waiting for a long op, a loop
/// pushing ops), is a signal, counted by the driver's [`Interrupt`] from the start of each
/// input. The first one cancels, from this thread, the input's ops that have not started: a
/// blocked `print` returns once the op it waits for is over, and the session's interrupt check
/// stops the input at its next statement. Running ops finish. A second one abandons a `print`
/// or `wait` still blocked on a running op (the session's abandon check): the prompt comes
/// back, the op goes on, the session and its variables stay. Only Ctrl-D or `:quit` leave;
/// once `leaving` (they wait for the pending ops), the first cancels what has not started and
/// the second leaves at once, and what each says is that.
fn watch_interrupts(interrupt: Interrupt, leaving: Arc<AtomicBool>) {
    let mut signals = match signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT]) {
        Ok(signals) => signals,
        Err(error) => {
            eprintln!("dep: Ctrl-C will not interrupt a running input: {error}");
            return;
        }
    };
    let _ = std::thread::Builder::new()
        .name("dep-interrupts".to_string())
        .spawn(move || {
            for _ in signals.forever() {
                let first = interrupt.interrupt() == 1;
                if leaving.load(Ordering::SeqCst) {
                    // The second leaves at once, and says so as it goes.
                    if first {
                        eprintln!(
                            "\n(Ctrl-C: the ops that had not started are cancelled; dep leaves \
                             once the running ops finish; Ctrl-C again leaves at once)"
                        );
                    }
                } else if first {
                    eprintln!(
                        "\n(Ctrl-C: the ops that had not started are cancelled; running ops \
                         finish, then the prompt comes back; Ctrl-C again stops waiting)"
                    );
                } else {
                    eprintln!(
                        "\n(Ctrl-C again: stopped waiting; running ops go on; Ctrl-D or :quit \
                         leaves dep)"
                    );
                }
            }
        });
}

fn new_editor(style: Style) -> rustyline::Result<Editor<DepHelper, FileHistory>> {
    let config = Config::builder()
        .max_history_size(10_000)?
        .history_ignore_dups(true)?
        .history_ignore_space(true)
        .auto_add_history(false)
        .completion_type(CompletionType::List)
        .color_mode(if style.colour {
            ColorMode::Enabled
        } else {
            ColorMode::Disabled
        })
        .build();
    Editor::with_config(config)
}

/// Ctrl-C in the line editor: accepts the line (which erases the hint and the live panel under
/// it, where rustyline's own interrupt would leave them on the screen) and flags it as
/// interrupted, so the loop drops the line and cancels the pending ops.
struct InterruptKey(Arc<AtomicBool>);

impl ConditionalEventHandler for InterruptKey {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, _: &EventContext) -> Option<Cmd> {
        self.0.store(true, Ordering::SeqCst);
        Some(Cmd::AcceptLine)
    }
}

/// The keys of the line being read: how many, and when the first came.
#[derive(Default)]
struct LineKeys {
    first: Option<std::time::Instant>,
    count: u32,
}

impl LineKeys {
    /// Whether the line's keys, Enter included, came faster than anyone types (see
    /// [`TYPED_AHEAD_KEY_GAP`]).
    fn came_at_once(&self) -> bool {
        let gaps = self.count.saturating_sub(1);
        self.first
            .is_some_and(|first| gaps > 0 && first.elapsed() < TYPED_AHEAD_KEY_GAP * gaps)
    }
}

/// Any key the line editor reads: counts it into the line's [`LineKeys`], and lets the editor do
/// what the key does.
struct CountKeys(Arc<std::sync::Mutex<LineKeys>>);

impl ConditionalEventHandler for CountKeys {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, _: &EventContext) -> Option<Cmd> {
        let mut keys = engine::lock(&self.0);
        keys.first.get_or_insert_with(std::time::Instant::now);
        keys.count += 1;
        None
    }
}

/// Where the history lives: `$XDG_DATA_HOME/dep/history`, else `~/.local/share/dep/history`,
/// else `~/.dep_history` when that directory cannot be made.
fn history_path() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from);
    let data_dir = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| home.as_ref().map(|home| home.join(".local").join("share")));
    if let Some(dir) = data_dir.map(|dir| dir.join("dep")) {
        if std::fs::create_dir_all(&dir).is_ok() {
            return Some(dir.join("history"));
        }
    }
    home.map(|home| home.join(".dep_history"))
}

/// One line read from a pipe, without its line ending, as text.
fn piped_line(mut bytes: Vec<u8>) -> Result<String, dep_grammar::InvalidUtf8> {
    if bytes.last() == Some(&b'\r') {
        bytes.pop();
    }
    dep_grammar::decode_source(bytes)
}

/// The REPL reading a pipe or a file: statements line by line, accumulated until complete, with
/// no prompt and no panel. A failure does not stop the run (as it would not stop an interactive
/// session); the exit code tells: 1 if a statement or op failed, else 2 if a statement did not
/// parse or a command was wrong, else 0.
fn run_piped(config: SessionConfig) -> ExitCode {
    let mut ctx = Ctx::new(Session::new(config), Style { colour: false });
    let mut buffer = String::new();
    // Line numbers of the input: the next line's, and the first line of what `buffer` holds.
    let (mut line_number, mut buffer_first_line) = (0u32, 1u32);
    for line in io::stdin().lock().split(b'\n') {
        line_number += 1;
        // What failed while this line was on its way is reported before it runs: its output
        // comes after the failures that happened first.
        ctx.report_new_failures();
        let line = match line.map(piped_line) {
            Ok(Ok(line)) => line,
            Ok(Err(not_text)) => {
                // A line that is not UTF-8 is reported at its place, like a syntax error, and
                // left out.
                let text = dep_grammar::LineIndex::new(&not_text.text);
                let rendered =
                    not_text
                        .diagnostic
                        .render_from_line(STDIN_PATH, &text, line_number as usize);
                ctx.worst.get_or_insert(ErrorKind::Parse);
                eprintln!("{}", ctx.style.report(rendered.trim_end()));
                continue;
            }
            Err(error) => {
                ctx.usage_error(&format!("cannot read stdin: {error}"));
                break;
            }
        };
        // A command inside an unfinished statement runs too; the statement's lines wait for it.
        if let Some(text) = command_in(&buffer, &line) {
            let flow = match commands::parse(':', text) {
                Ok(command) => ctx.run_command(command),
                Err(message) => {
                    ctx.usage_error(&message);
                    Flow::Continue
                }
            };
            if flow == Flow::Quit {
                if !buffer.trim().is_empty() {
                    ctx.note(DROPPED_UNFINISHED);
                    buffer.clear();
                }
                break;
            }
            // As the prompt does: a `:load`ed script's ops get a moment to end, and their
            // failures are reported here, before the next line.
            ctx.settle();
            ctx.report_new_failures();
            continue;
        }
        if buffer.is_empty() {
            buffer_first_line = line_number;
        } else {
            buffer.push('\n');
        }
        buffer.push_str(&line);
        if dep_grammar::is_complete(&buffer) {
            let source = std::mem::take(&mut buffer);
            if !source.trim().is_empty() {
                ctx.run_source_from_line(STDIN_PATH, buffer_first_line, &source);
                ctx.driver.end_virtual_time(&ctx.session);
                ctx.report_new_failures();
            }
        }
    }
    if !buffer.trim().is_empty() {
        // Input ended inside a block or bracket: the parser says what is missing.
        ctx.run_source_from_line(STDIN_PATH, buffer_first_line, &buffer);
    }
    let mark = ctx.driver.mark();
    if let Some(error) = ctx.driver.wait(&mut ctx.session, mark).failures {
        ctx.report(&error);
    }
    match ctx.worst {
        None => ExitCode::SUCCESS,
        Some(ErrorKind::Runtime) => ExitCode::from(EXIT_RUNTIME),
        Some(_) => ExitCode::from(EXIT_USAGE),
    }
}

/// A list of op labels, cut after a few.
fn summarize(labels: &[String]) -> String {
    const SHOWN: usize = 4;
    let mut text = labels
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if labels.len() > SHOWN {
        text.push_str(&format!(" and {} more", labels.len() - SHOWN));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn keys(count: u32, first_ago: Duration) -> LineKeys {
        LineKeys {
            first: Instant::now().checked_sub(first_ago),
            count,
        }
    }

    #[test]
    fn a_line_typed_at_a_typists_pace_did_not_come_at_once() {
        assert!(!keys(10, Duration::from_millis(9 * 60)).came_at_once());
        assert!(!keys(2, Duration::from_millis(60)).came_at_once());
    }

    #[test]
    fn a_line_whose_keys_came_together_or_a_little_apart_came_at_once() {
        assert!(keys(10, Duration::ZERO).came_at_once());
        // A loaded machine put the REPL aside for 100 ms between two of its keys.
        assert!(keys(10, Duration::from_millis(100)).came_at_once());
    }

    #[test]
    fn one_key_alone_or_none_is_no_sign_of_a_paste() {
        assert!(!keys(1, Duration::ZERO).came_at_once());
        assert!(!LineKeys::default().came_at_once());
    }
}
