//! The live panel: while ops are pending, a few lines under the prompt with the engine's progress
//! (how many ops run, wait, are ready; each busy variable's queue of reads and writes), redrawn
//! in place at most ten times a second, gone once every op has finished. What it draws is the
//! one live view model of `dep_views::live`, folded incrementally from the event log as the
//! kernel's display is (a `LiveFold` of the ops pushed since the engine was last idle), rendered
//! by its text renderer: the heading every live display has, the busy queues, then the ops
//! that have not finished, under each waiting one every access it waits for.
//!
//! # How it is drawn, and why this way
//!
//! While ops are pending and nothing has been typed, the REPL loop draws the prompt and the panel
//! itself ([`watch_until_key`]): the terminal in raw mode, `poll` on stdin with a 100 ms timeout,
//! and a redraw in place (carriage return, clear to the end of the screen, prompt, panel, cursor
//! back after the prompt) whenever the panel changed. The first key, or the engine going idle,
//! ends it: the drawing is erased and rustyline's `readline` starts with the key still unread.
//! While the user types, the panel is the tail of the line editor's hint (`DepHelper::hint`), so
//! rustyline lays it out under the input line, refreshes it at every key and erases it when the
//! line is accepted.
//!
//! Why not redraw from another thread through rustyline's `ExternalPrinter`: while a printer
//! exists, rustyline 17 waits for input with `select` on the terminal and ignores keys it has
//! already read into its buffer, so keys that arrive in one read (a paste without bracketed paste,
//! `tmux send-keys`, an `expect` script, fast typing on a loaded machine) are taken one per later
//! input event, and an Enter can sit unseen. The cost of this design is that the panel does not
//! move while a half-typed line sits untouched; it catches up at the next key.

use std::collections::HashSet;
use std::io::{self, IsTerminal, Write};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use dep_engine as engine;
use dep_views as views;
use engine::lock;
use nix::sys::termios;
use views::live::{LiveFold, LiveSource, TextLayout};

use crate::repl::style::Style;

/// How often the panel looks at the engine while nothing is typed.
const TICK_MS: u8 = 100;

/// The most lines the panel shows: its heading, the hint, the busy queues, then the ops that
/// have not finished, each with what it waits for.
const MAX_LINES: usize = 16;

/// The line under the panel's heading.
const HINT: &str = "(Ctrl-C cancels what has not started)";

/// The live panel's state, shared by the REPL loop and the line editor's helper.
///
/// Lock discipline: each lock is held only to read or replace its value; none is held while
/// another is taken.
pub(crate) struct Panel {
    /// `:watch on|off`.
    enabled: AtomicBool,
    /// Terminal columns.
    width: AtomicUsize,
    style: Style,
    /// Where the session's live state is read from (absent when it keeps no event log).
    source: Mutex<Option<LiveSource>>,
    /// The ops pushed since the engine was last idle, folded from the event log so far.
    fold: Mutex<Option<LiveFold>>,
    /// The text last rendered, plain and coloured.
    text: Mutex<PanelText>,
    /// Failures already known when the prompt was shown, so that only new ones are noticed.
    known_failures: Mutex<Vec<Arc<engine::OpError>>>,
    /// Ops cancelled by Ctrl-C that the engine still lists as waiting: it drops them only when
    /// their turn comes, and the panel shows them as cancelled meanwhile.
    cancelled: Mutex<HashSet<engine::OpId>>,
    /// Whether the line editor's next drawing leaves the panel out (see
    /// [`Panel::leave_out_of_next_drawing`]).
    left_out: AtomicBool,
}

#[derive(Default, Clone, PartialEq, Eq)]
struct PanelText {
    plain: String,
    coloured: String,
}

impl Panel {
    pub(crate) fn new(source: Option<LiveSource>, style: Style) -> Panel {
        Panel {
            enabled: AtomicBool::new(true),
            width: AtomicUsize::new(80),
            style,
            fold: Mutex::new(source.as_ref().map(LiveFold::from_now)),
            source: Mutex::new(source),
            text: Mutex::new(PanelText::default()),
            known_failures: Mutex::new(Vec::new()),
            cancelled: Mutex::new(HashSet::new()),
            left_out: AtomicBool::new(false),
        }
    }

    /// Leaves the panel out of the line editor's next drawing: the prompt's first after a line
    /// typed ahead or pasted, when nothing watches under the prompt. Drawn there, nothing would
    /// redraw the panel until a key came, and it would stand still, showing ops running that
    /// have ended. The key after brings it back.
    pub(crate) fn leave_out_of_next_drawing(&self) {
        self.left_out.store(true, Ordering::SeqCst);
    }

    /// Whether this drawing leaves the panel out (once: the next one shows it again).
    pub(crate) fn is_left_out_now(&self) -> bool {
        self.left_out.swap(false, Ordering::SeqCst)
    }

    pub(crate) fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::SeqCst);
    }

    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::SeqCst)
    }

    /// Watches another engine (after `:engine`, `:threads`, `:reset`).
    pub(crate) fn set_source(&self, source: Option<LiveSource>) {
        *lock(&self.fold) = source.as_ref().map(LiveFold::from_now);
        *lock(&self.source) = source;
        lock(&self.known_failures).clear();
        lock(&self.cancelled).clear();
    }

    /// Shows `ops` as cancelled until they are gone from the engine.
    pub(crate) fn mark_cancelled(&self, ops: impl IntoIterator<Item = engine::OpId>) {
        lock(&self.cancelled).extend(ops);
    }

    /// Called before an input runs: when no op is pending, the panel's fold starts over from
    /// the log's next event, so that it shows the ops pushed since the engine was last idle.
    pub(crate) fn input_starts(&self) {
        let source = lock(&self.source).clone();
        if let Some(source) = source.filter(|source| source.n_unfinished() == 0) {
            *lock(&self.fold) = Some(LiveFold::from_now(&source));
        }
    }

    /// Called before each prompt, once its failures are reported: only failures after this are
    /// noticed by the panel.
    pub(crate) fn start_prompt(&self, width: usize) {
        self.width.store(width.max(20), Ordering::SeqCst);
        let source = lock(&self.source).clone();
        if let Some(source) = source {
            *lock(&self.known_failures) = failures_in(&source.monitor.snapshot());
        }
    }

    /// Whether ops are pending.
    fn is_busy(&self) -> bool {
        lock(&self.source)
            .as_ref()
            .is_some_and(|source| source.n_unfinished() > 0)
    }

    /// Renders the panel from a fresh snapshot and returns its plain text (empty when the engine
    /// is idle and nothing new failed); the coloured twin is kept for [`Panel::coloured_text_for`].
    pub(crate) fn refresh(&self) -> String {
        let text = self.render();
        let plain = text.plain.clone();
        *lock(&self.text) = text;
        plain
    }

    /// The coloured twin of `plain`, if it is still the panel's text.
    pub(crate) fn coloured_text_for(&self, plain: &str) -> String {
        let text = lock(&self.text);
        if text.plain == plain {
            text.coloured.clone()
        } else {
            plain.to_string()
        }
    }

    fn render(&self) -> PanelText {
        if !self.is_enabled() {
            return PanelText::default();
        }
        let Some(source) = lock(&self.source).clone() else {
            return PanelText::default();
        };
        let n_unfinished = source.n_unfinished();
        let snapshot = source.monitor.snapshot();
        let new_failures: Vec<Arc<engine::OpError>> = {
            let known = lock(&self.known_failures);
            let known: HashSet<*const engine::OpError> = known.iter().map(Arc::as_ptr).collect();
            failures_in(&snapshot)
                .into_iter()
                .filter(|failure| !known.contains(&Arc::as_ptr(failure)))
                .collect()
        };
        let width = self.width.load(Ordering::SeqCst).saturating_sub(1);
        if n_unfinished == 0 {
            if new_failures.is_empty() {
                return PanelText::default();
            }
            let notice = |colour: bool| -> String {
                let lines: Vec<String> = failure_notice(&new_failures)
                    .lines()
                    .map(|line| {
                        let line = views::text::fit_line(line, width);
                        if colour {
                            self.style.error(&line)
                        } else {
                            line
                        }
                    })
                    .collect();
                lines.join("\n")
            };
            return PanelText {
                plain: notice(false),
                coloured: notice(self.style.colour),
            };
        }
        let mut view = {
            let mut fold = lock(&self.fold);
            fold.get_or_insert_with(|| LiveFold::from_now(&source))
                .view(&source, false)
        };
        {
            let mut cancelled = lock(&self.cancelled);
            cancelled.retain(|id| view.frame.op(*id).is_some_and(|op| !op.state.is_finished()));
            view.show_cancelled(&cancelled);
        }
        let text = |colour: bool| -> String {
            let layout = TextLayout {
                style: views::TextStyle {
                    color: colour,
                    width,
                },
                idle_queues: false,
                ops: true,
                finished_ops: false,
                max_lines: MAX_LINES,
            };
            let text = view.text_with(Some(HINT), &layout);
            let mut lines = text.lines();
            let heading = lines.next().unwrap_or_default();
            let heading = if colour {
                self.style.note(heading)
            } else {
                heading.to_string()
            };
            // Every line fits the width: one wider would wrap, and the redraw, which moves
            // up a row a line, would leave some of it behind.
            std::iter::once(heading)
                .chain(lines.map(str::to_string))
                .map(|line| views::text::fit_line(&line, width))
                .collect::<Vec<String>>()
                .join("\n")
        };
        PanelText {
            plain: text(false),
            coloured: text(self.style.colour),
        }
    }
}

/// Shows `prompt` with the live panel under it, redrawn as the engine moves, until a key is
/// waiting on stdin (left unread for the line editor) or no op is pending. Erases what it drew.
/// Does nothing unless stdin and stdout are terminals, the panel is on and ops are pending.
pub(crate) fn watch_until_key(panel: &Panel, prompt: &str, mut width: impl FnMut() -> usize) {
    if !panel.is_enabled() || !panel.is_busy() || !io::stdout().is_terminal() || dumb_terminal() {
        return;
    }
    let Some(_raw) = RawMode::enter() else {
        return;
    };
    let stdout = io::stdout();
    let prompt_width = prompt.chars().count();
    let coloured_prompt = panel.style.prompt(prompt);
    let mut drawn: Option<PanelText> = None;
    loop {
        panel.width.store(width().max(20), Ordering::SeqCst);
        let text = panel.render();
        if !panel.is_busy() {
            break;
        }
        if drawn.as_ref() != Some(&text) {
            let n_lines = text.coloured.lines().count();
            let mut drawing = format!("\r\x1b[J{coloured_prompt}");
            for line in text.coloured.lines() {
                drawing.push('\n');
                drawing.push_str(line);
            }
            if n_lines > 0 {
                drawing.push_str(&format!("\x1b[{n_lines}A"));
            }
            drawing.push_str(&format!("\r\x1b[{prompt_width}C"));
            let mut out = stdout.lock();
            let _ = out.write_all(drawing.as_bytes());
            let _ = out.flush();
            drawn = Some(text);
        }
        if key_waiting(TICK_MS) {
            break;
        }
    }
    if drawn.is_some() {
        let mut out = stdout.lock();
        let _ = out.write_all(b"\r\x1b[J");
        let _ = out.flush();
    }
}

/// Whether the terminal cannot move its cursor: rustyline then reads plain lines, and so does
/// the panel stay away (the same list as rustyline's).
fn dumb_terminal() -> bool {
    std::env::var("TERM").is_ok_and(|term| ["dumb", "cons25", "emacs"].contains(&term.as_str()))
}

/// Whether a key is waiting on stdin, after waiting up to `timeout_ms`.
fn key_waiting(timeout_ms: u8) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let stdin = io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(timeout_ms)) {
        Ok(n_ready) => n_ready > 0,
        // EINTR (a resize, say): look again at the next tick.
        Err(_) => false,
    }
}

/// The terminal without echo, line buffering or signal keys while the panel waits for a key,
/// restored when dropped. Output processing stays on, so `\n` still starts a line.
struct RawMode {
    original: termios::Termios,
}

impl RawMode {
    fn enter() -> Option<RawMode> {
        let stdin = io::stdin();
        let original = termios::tcgetattr(stdin.as_fd()).ok()?;
        let mut raw = original.clone();
        raw.local_flags.remove(
            termios::LocalFlags::ICANON
                | termios::LocalFlags::ECHO
                | termios::LocalFlags::ISIG
                | termios::LocalFlags::IEXTEN,
        );
        termios::tcsetattr(stdin.as_fd(), termios::SetArg::TCSANOW, &raw).ok()?;
        Some(RawMode { original })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // TCSANOW keeps the typed keys that wait in the input queue for the line editor.
        let _ = termios::tcsetattr(
            io::stdin().as_fd(),
            termios::SetArg::TCSANOW,
            &self.original,
        );
    }
}

/// The panel once the ops are done and some failed: the first failure, until the next prompt
/// shows the full report.
fn failure_notice(new_failures: &[Arc<engine::OpError>]) -> String {
    let failure = &new_failures[0];
    let more = match new_failures.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    format!(
        "`{}` failed{more}: {}\n  (press Enter for the full report)",
        failure.label, failure.message
    )
}

/// The failures (not cancellations) that live variables hold, one per root cause.
fn failures_in(snapshot: &engine::Snapshot) -> Vec<Arc<engine::OpError>> {
    let mut failures: Vec<Arc<engine::OpError>> = Vec::new();
    for error in snapshot.vars.iter().filter_map(|var| var.error.as_ref()) {
        if !error.cancelled && !failures.iter().any(|seen| Arc::ptr_eq(seen, error)) {
            failures.push(error.clone());
        }
    }
    failures
}
