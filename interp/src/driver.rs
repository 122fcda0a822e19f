//! The one driver of an input (a notebook cell, a REPL line, a script): the REPL, the Jupyter
//! kernel and `dep run` all run their inputs through it, and only render what it reports.
//!
//! [`Driver::run`] runs an input's statements in a [`Session`] under an [`Interrupt`] handle,
//! tells a [`Listener`] where the input's progress can be watched from and writes what the input
//! prints to it, and returns the [`Outcome`]. [`Driver::wait`] then waits for the ops the input
//! pushed (a cell, a script: the REPL does not), in their final state, and takes the failures.
//!
//! # Simulated ranks
//!
//! When the session is rank 0 of ranks simulated in this process (`Session::peers`, the REPL's
//! and the kernel's `engine sim --ranks N`), [`Driver::run`] hands the input to the other
//! ranks first, which run it at once on their threads through drivers of their own, and
//! [`Driver::wait`] waits for their ops too. Only rank 0's output is shown (as under mpirun);
//! another rank's error is reported with its rank when rank 0 has none, and ends the job (its
//! communications fail from then on: `engine sim --ranks N` or `reset` starts a new one). An
//! interrupt reaches every rank.
//!
//! # Interrupts
//!
//! An [`Interrupt`] is a counter that any thread bumps (a SIGINT watcher, the kernel's control
//! loop). An input runs with a *mark*, the count when it was asked for, and is interrupted once
//! the count moves past it: the first interrupt cancels, at once, the ops pushed so far that
//! have not started (`Monitor::cancel_pending`), and the session's interrupt check stops the
//! input before its next statement (loop bodies included); running ops finish. The
//! `abandon_after`-th interrupt also ends a `print` or `wait` blocked on a running op (the
//! session's abandon check): at once for the kernel and `dep run`, at the second Ctrl-C for the
//! REPL, whose first one lets the blocked `print` show its value.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dep_engine as engine;
use dep_grammar as grammar;
use dep_views::live::LiveSource;

use crate::error::RunError;
use crate::session::Session;

/// What a front-end hears while one of its inputs runs.
pub trait Listener {
    /// Where the input's printed output goes.
    fn output(&mut self) -> &mut dyn Write;

    /// The input's statements are about to run; `live` (absent when the session keeps no event
    /// log) is where its progress is read from, by any thread, while it runs: what a live
    /// display draws.
    fn started(&mut self, live: Option<&LiveSource>) {
        let _ = live;
    }
}

/// How an input ended.
#[derive(Debug, Default)]
pub struct Outcome {
    /// A parse error (nothing ran), a statement's error (the input stopped there), or the
    /// interruption.
    pub error: Option<RunError>,
    /// Whether an interrupt arrived while the input ran.
    pub interrupted: bool,
    /// The value of the input's last statement, an expression, when [`Input::value_apart`]
    /// asked for it (a notebook cell's result): its text, without the trailing line feed.
    pub value: Option<String>,
}

/// One input to run.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    /// What reports call it: a file, `cell[3]`, `<repl>`, `<stdin>`.
    pub path: &'a str,
    /// The number of its first line in `path` (1, unless read from the middle of a pipe).
    pub first_line: u32,
    /// Its text.
    pub source: &'a str,
    /// Whether the value of a last expression statement goes to [`Outcome::value`] rather than
    /// to the output (the session must show expression values).
    pub value_apart: bool,
    /// `source` parsed already (`grammar::parse(source)`), when the front-end parsed it to
    /// look at it first (the kernel, a cell with magics): the driver then does not parse again.
    pub parsed: Option<&'a grammar::ParseOutput>,
    /// The mistakes `parsed`'s text alone shows (`early_errors(&parsed.program, ...)`), when
    /// the front-end found them already, for a session that defined no function before (a
    /// batch run, which decides by them whether its other ranks start): the session then does
    /// not look again. Only with `parsed`.
    pub early_errors: Option<&'a [grammar::Diagnostic]>,
}

impl<'a> Input<'a> {
    /// The whole of `source`, named `path`, from its line 1.
    pub fn new(path: &'a str, source: &'a str) -> Input<'a> {
        Input {
            path,
            first_line: 1,
            source,
            value_apart: false,
            parsed: None,
            early_errors: None,
        }
    }
}

/// How [`Driver::wait`] ended.
#[derive(Debug, Default)]
pub struct Waited {
    /// The ops that failed and were not reported yet (by a `print` or `wait`).
    pub failures: Option<RunError>,
    /// Whether an interrupt arrived while waiting (pending ops were cancelled; running ones
    /// finished).
    pub interrupted: bool,
    /// Whether the wait was given up (see [`Driver::wait_or_leave`]): ops are still running.
    pub abandoned: bool,
}

/// Interrupts the input running now, from any thread: see the module's doc.
#[derive(Clone)]
pub struct Interrupt(Arc<InterruptState>);

struct InterruptState {
    /// Interrupts so far.
    count: AtomicU64,
    /// The mark of the input running now (or of the last one).
    run_mark: AtomicU64,
    /// How many interrupts past an input's mark give up a blocked `print` or `wait`.
    abandon_after: u64,
    /// The engine of the input running now, where an interrupt cancels.
    busy: Mutex<Option<engine::Monitor>>,
}

impl Interrupt {
    /// A handle whose `abandon_after`-th interrupt of an input (at least 1) also gives up a
    /// blocked `print` or `wait`.
    pub fn new(abandon_after: u64) -> Interrupt {
        Interrupt(Arc::new(InterruptState {
            count: AtomicU64::new(0),
            run_mark: AtomicU64::new(0),
            abandon_after: abandon_after.max(1),
            busy: Mutex::new(None),
        }))
    }

    /// Interrupts the input running now: cancels the ops it pushed that have not started.
    /// Returns how many interrupts the running input (or the last one) has had, this one
    /// included, so that a front-end can say what this one does.
    pub fn interrupt(&self) -> u64 {
        let count = self.0.count.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(monitor) = &*self.busy() {
            monitor.cancel_pending();
        }
        count.saturating_sub(self.0.run_mark.load(Ordering::SeqCst))
    }

    /// The count now: an input run with this mark is interrupted by any later interrupt.
    pub fn mark(&self) -> u64 {
        self.0.count.load(Ordering::SeqCst)
    }

    /// How many interrupts arrived since `mark`.
    pub fn since(&self, mark: u64) -> u64 {
        self.mark().saturating_sub(mark)
    }

    fn busy(&self) -> std::sync::MutexGuard<'_, Option<engine::Monitor>> {
        engine::lock(&self.0.busy)
    }

    /// Starts an input with `mark`: interrupts cancel in `session`'s engine, and its checks read
    /// the count.
    fn enter(&self, session: &mut Session, mark: u64) {
        self.0.run_mark.store(mark, Ordering::SeqCst);
        *self.busy() = Some(session.monitor());
        let stop = self.clone();
        session.set_interrupt_check(Some(Box::new(move || stop.since(mark) >= 1)));
        let give_up = self.clone();
        let abandon_after = self.0.abandon_after;
        session.set_abandon_check(Some(Box::new(move || give_up.since(mark) >= abandon_after)));
    }

    /// Ends an input: interrupts no longer reach the session.
    fn leave(&self, session: &mut Session) {
        *self.busy() = None;
        session.set_interrupt_check(None);
        session.set_abandon_check(None);
    }
}

/// Runs inputs in a session under one [`Interrupt`] handle.
pub struct Driver {
    interrupt: Interrupt,
}

impl Driver {
    /// A driver whose `abandon_after`-th interrupt of an input gives up a blocked `print` or
    /// `wait` (1 for a notebook or a script, 2 for the REPL).
    pub fn new(abandon_after: u64) -> Driver {
        Driver {
            interrupt: Interrupt::new(abandon_after),
        }
    }

    /// A driver interrupted through `interrupt`, a handle made beforehand (the kernel's control
    /// loop holds it).
    pub fn with_interrupt(interrupt: Interrupt) -> Driver {
        Driver { interrupt }
    }

    /// The handle that interrupts this driver's inputs, for another thread.
    pub fn interrupt(&self) -> Interrupt {
        self.interrupt.clone()
    }

    /// The mark an input asked for now runs with (see [`Interrupt::mark`]).
    pub fn mark(&self) -> u64 {
        self.interrupt.mark()
    }

    /// Runs `input` in `session`, interrupted by any interrupt after `mark`: parses it, tells
    /// `listener` it starts, and pushes its statements in order, writing what they print to the
    /// listener's output. Returns once every statement is pushed (only `print`, `save`, `wait`
    /// and a shown value wait for ops). An interrupt cancels the ops pushed so far that have
    /// not started, including those the last statement pushed after it arrived.
    pub fn run(
        &self,
        session: &mut Session,
        input: &Input<'_>,
        mark: u64,
        listener: &mut dyn Listener,
    ) -> Outcome {
        if self.interrupt.since(mark) > 0 {
            // Asked for before an interrupt, started after it: nothing runs.
            session.cancel();
            return Outcome {
                interrupted: true,
                ..Outcome::default()
            };
        }
        // Parsed once: the session runs the statements parsed here.
        let parsed_here;
        let (parsed, early_errors) = match input.parsed {
            Some(parsed) => (parsed, input.early_errors),
            None => {
                parsed_here = grammar::parse(input.source);
                (&parsed_here, None)
            }
        };
        let value_apart = input.value_apart
            && parsed.is_ok()
            && parsed
                .program
                .statements
                .last()
                .is_some_and(|last| matches!(last.kind, grammar::StmtKind::Expr(_)));
        if let Some(peers) = session.peers() {
            peers.run(&Input {
                value_apart: false,
                ..*input
            });
        }
        listener.started(session.live(input.path).as_ref());
        self.interrupt.enter(session, mark);
        let mut value = Vec::new();
        let ran = session.run_parsed(
            input.path,
            input.first_line,
            input.source,
            parsed,
            early_errors,
            listener.output(),
            value_apart.then_some(&mut value as &mut dyn Write),
        );
        let value_text = (value_apart && ran.is_ok())
            .then(|| String::from_utf8_lossy(&value).trim_end().to_string());
        let _ = listener.output().flush();
        self.interrupt.leave(session);
        let interrupted = self.interrupt.since(mark) > 0;
        if interrupted {
            // An interrupt during the last statement, which no check followed: what it pushed
            // after the interrupt's cancel is cancelled too.
            session.cancel();
        }
        let ran = match session.peers() {
            Some(peers) => {
                if ran.is_err() {
                    peers.end_job(rank_0_ended(interrupted));
                }
                // Rank 0's interrupts, those of its input and those while it waits for the
                // peers, are theirs too.
                ran.and(first_error(peers.ran(&|| self.interrupt.since(mark))))
            }
            None => ran,
        };
        Outcome {
            error: ran.err(),
            interrupted,
            value: value_text.filter(|_| !interrupted),
        }
    }

    /// Waits until every op pushed so far has finished (but those an earlier cell let go,
    /// [`Session::let_go_unfinished`]), cancelling the pending ones when an
    /// interrupt after `mark` arrives (running ones finish); then lets the engine reach its
    /// final state (the simulated policy's virtual clock runs to its end), waits for the kernel
    /// times of GPU ops (unless interrupted), and takes the failures not reported yet.
    pub fn wait(&self, session: &mut Session, mark: u64) -> Waited {
        self.wait_until(session, mark, u64::MAX, true)
    }

    /// [`Driver::wait`] that gives up once the `abandon_after`-th interrupt after `mark`
    /// arrives: the REPL leaving, whose second Ctrl-C leaves without waiting for running ops.
    pub fn wait_or_leave(&self, session: &mut Session, mark: u64) -> Waited {
        self.wait_or_give_up(session, mark, self.interrupt.0.abandon_after)
    }

    /// [`Driver::wait`] that gives up once the `give_up_after`-th interrupt after `mark`
    /// arrives (the running ops go on): a notebook's cell, whose first interrupt cancels what
    /// has not started and waits for the running ops, and whose second stops waiting.
    pub fn wait_or_give_up(&self, session: &mut Session, mark: u64, give_up_after: u64) -> Waited {
        self.wait_until(session, mark, give_up_after, true)
    }

    /// Waits until every op pushed so far has finished (but those let go), cancelling the
    /// pending ones when an interrupt after `mark` arrives (running ones finish), and nothing else: what a command
    /// that reads the run's history waits for. Returns whether an interrupt arrived.
    pub fn wait_idle(&self, session: &mut Session, mark: u64) -> bool {
        self.wait_until(session, mark, u64::MAX, false).interrupted
    }

    /// Waits for every op, those an earlier cell let go included, as replacing the engine
    /// needs (`:engine`, `:threads`, `:reset`): an interrupt after `mark` cancels the pending
    /// ones (running ones finish), and the `give_up_after`-th stops waiting (they go on).
    /// Returns whether an interrupt arrived: the command that waited is then not run, as the
    /// interrupt asked (it used to wait, deaf to interrupts, and replace the engine anyway).
    pub fn wait_all_before_replacing(
        &self,
        session: &mut Session,
        mark: u64,
        give_up_after: u64,
    ) -> bool {
        self.interrupt.0.run_mark.store(mark, Ordering::SeqCst);
        *self.interrupt.busy() = Some(session.monitor());
        if self.interrupt.since(mark) > 0 {
            session.cancel();
        }
        session.wait_all_or(&|| self.interrupt.since(mark) >= give_up_after);
        *self.interrupt.busy() = None;
        self.interrupt.since(mark) > 0
    }

    fn wait_until(
        &self,
        session: &mut Session,
        mark: u64,
        give_up_after: u64,
        final_state: bool,
    ) -> Waited {
        self.interrupt.0.run_mark.store(mark, Ordering::SeqCst);
        *self.interrupt.busy() = Some(session.monitor());
        if self.interrupt.since(mark) > 0 {
            session.cancel();
        }
        let mut n_polls: u32 = 0;
        let mut abandoned = false;
        while session.n_unfinished() > 0 {
            if self.interrupt.since(mark) >= give_up_after {
                abandoned = true;
                break;
            }
            // Spin briefly (a trivial input's ops end within microseconds), then back off to at
            // most 5 ms between looks: interrupts are seen within that.
            n_polls += 1;
            if n_polls < 64 {
                std::thread::yield_now();
            } else {
                let n_sleeps = u64::from((n_polls - 63).min(100));
                std::thread::sleep(Duration::from_micros(n_sleeps * 50));
            }
        }
        *self.interrupt.busy() = None;
        let interrupted = self.interrupt.since(mark) > 0;
        if !final_state || abandoned {
            return Waited {
                failures: None,
                interrupted,
                abandoned,
            };
        }
        session.wait_all();
        session.wait_for_kernel_times_until(|| self.interrupt.since(mark) > 0);
        let mut failures = session.take_failures();
        if let Some(peers) = session.peers() {
            if failures.is_err() {
                peers.end_job(rank_0_ended(interrupted));
            }
            failures = failures.and(first_error(peers.wait(&|| self.interrupt.since(mark))));
        }
        Waited {
            failures: failures.err(),
            interrupted,
            abandoned,
        }
    }

    /// Gives the ops pushed so far up to `time` to finish (most statements take microseconds):
    /// the REPL's prompt then reports their failures at once and shows no panel for them. Then
    /// [`Driver::end_virtual_time`].
    pub fn settle(&self, session: &Session, time: Duration) {
        let deadline = Instant::now() + time;
        while session.n_unfinished() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.end_virtual_time(session);
    }

    /// Under the simulated policy, once every op pushed has run (their values are computed at
    /// push), runs the virtual clock to its end, as at the end of a notebook's cell: every view
    /// then shows the same final state (`:ops`, `:queues` and `:vars` read the queues, `:dag`
    /// and `:timeline` the virtual clock's events). With an op still running (an asynchronous
    /// one), it leaves the clock for the next look.
    pub fn end_virtual_time(&self, session: &Session) {
        if session.engine().policy() == engine::Policy::Sim && session.n_unfinished() == 0 {
            session.wait_all();
        }
    }
}

/// The first error of the other ranks' reports, if one failed (their output is rank 0's to
/// show, as under mpirun: not shown).
fn first_error(reports: Vec<crate::comm::PeerReport>) -> Result<(), RunError> {
    match reports.into_iter().flat_map(|report| report.errors).next() {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// `text` with every character but line feeds replaced by a space: lines and columns (in
/// characters) stay where they were.
pub fn blank(text: &str) -> String {
    text.chars()
        .map(|c| if c == '\n' { '\n' } else { ' ' })
        .collect()
}

/// Why rank 0 ended a job of simulated ranks, as the other ranks and every later communication
/// report it (`the job ended: rank 0 was interrupted`): an interrupt is no failure of rank 0's.
fn rank_0_ended(interrupted: bool) -> String {
    if interrupted {
        "rank 0 was interrupted".to_string()
    } else {
        "rank 0 failed".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SessionConfig;

    /// A listener that keeps what the input prints and the live source it was given.
    #[derive(Default)]
    struct Kept {
        out: Vec<u8>,
        live: Option<String>,
        n_started: usize,
    }

    impl Listener for Kept {
        fn output(&mut self) -> &mut dyn Write {
            &mut self.out
        }

        fn started(&mut self, live: Option<&LiveSource>) {
            self.n_started += 1;
            self.live = live.map(|live| live.title.clone());
        }
    }

    fn session(policy: engine::Policy) -> Session {
        Session::new(SessionConfig {
            policy,
            threads: 2,
            observe: true,
            show_expression_values: true,
            ..SessionConfig::default()
        })
    }

    /// The early errors a front-end found already (a batch run, before its session exists)
    /// are the session's: it reports them, as its own, without looking again.
    #[test]
    fn early_errors_found_already_are_reported_and_not_looked_for_again() {
        let driver = Driver::new(1);
        let mut session = session(engine::Policy::Naive);
        let mut kept = Kept::default();
        let source = "print 1\nprint 2";
        let parsed = grammar::parse(source);
        let found = [grammar::Diagnostic::new(
            "found before",
            grammar::Span::new(8, 15),
            "here",
        )];
        let input = Input {
            parsed: Some(&parsed),
            early_errors: Some(&found),
            ..Input::new("t.dep", source)
        };
        let outcome = driver.run(&mut session, &input, driver.mark(), &mut kept);
        let error = outcome.error.expect("the early error");
        assert_eq!(error.kind, crate::ErrorKind::Parse);
        assert!(
            error
                .to_string()
                .starts_with("error: found before\n --> t.dep:2:1"),
            "{error}"
        );
        assert!(kept.out.is_empty(), "nothing runs");
    }

    #[test]
    fn an_input_runs_prints_and_tells_its_listener_where_to_watch() {
        let driver = Driver::new(1);
        let mut session = session(engine::Policy::Threaded);
        let mut kept = Kept::default();
        let outcome = driver.run(
            &mut session,
            &Input::new("cell[1]", "A = ones(2)\nprint A + 1\n"),
            driver.mark(),
            &mut kept,
        );
        assert!(outcome.error.is_none() && !outcome.interrupted);
        assert_eq!(String::from_utf8_lossy(&kept.out), "[2. 2.]\n");
        assert_eq!((kept.n_started, kept.live.as_deref()), (1, Some("cell[1]")));
        let waited = driver.wait(&mut session, driver.mark());
        assert!(waited.failures.is_none() && !waited.interrupted && !waited.abandoned);
    }

    #[test]
    fn a_last_expression_value_goes_apart_with_the_lines_where_they_were() {
        let driver = Driver::new(1);
        let mut session = session(engine::Policy::Naive);
        let mut kept = Kept::default();
        let input = Input {
            value_apart: true,
            ..Input::new("cell[1]", "A = ones(2)\nprint A\nA + 1")
        };
        let outcome = driver.run(&mut session, &input, driver.mark(), &mut kept);
        assert!(outcome.error.is_none());
        assert_eq!(String::from_utf8_lossy(&kept.out), "[1. 1.]\n");
        assert_eq!(outcome.value.as_deref(), Some("[2. 2.]"));
        // An error in the value names its line in the input.
        let input = Input {
            value_apart: true,
            ..Input::new("cell[2]", "B = 1\n\nnope + 1")
        };
        let outcome = driver.run(&mut session, &input, driver.mark(), &mut kept);
        let error = outcome.error.expect("an unknown name");
        assert!(error.to_string().contains("cell[2]:3:1"), "{error}");
    }

    /// The session-wide lines of the ops in the event log, by label.
    fn op_lines(session: &Session) -> Vec<(String, u32)> {
        let log = session.event_log().expect("observed");
        log.events()
            .into_iter()
            .filter_map(|event| match event.kind {
                engine::EventKind::Pushed { label, line, .. } => Some((label.to_string(), line)),
                _ => None,
            })
            .collect()
    }

    /// A cell with a trailing value is parsed once and runs as one input: its lines count once
    /// in the session (the value's op is on its own line, the next cell's right after), errors
    /// name their place in the cell, and a cell the front-end parsed runs from that parse.
    #[test]
    fn a_cell_with_a_trailing_value_is_one_input_parsed_once() {
        let driver = Driver::new(1);
        let mut session = session(engine::Policy::Naive);
        let mut kept = Kept::default();
        let input = Input {
            value_apart: true,
            ..Input::new("cell[1]", "A = ones(2)\nA * 3")
        };
        let outcome = driver.run(&mut session, &input, driver.mark(), &mut kept);
        assert_eq!(outcome.value.as_deref(), Some("[3. 3.]"));
        let source = "B = A + 1\nB + A";
        let parsed = grammar::parse(source);
        let input = Input {
            value_apart: true,
            parsed: Some(&parsed),
            ..Input::new("cell[2]", source)
        };
        let outcome = driver.run(&mut session, &input, driver.mark(), &mut kept);
        assert_eq!(outcome.value.as_deref(), Some("[3. 3.]"));
        let lines = op_lines(&session);
        let line_of = |label: &str| {
            lines
                .iter()
                .find(|(candidate, _)| candidate == label)
                .map(|(_, line)| *line)
        };
        assert_eq!(line_of("A * 3"), Some(2), "{lines:?}");
        assert_eq!(line_of("B = A + 1"), Some(3), "{lines:?}");
        assert_eq!(line_of("B + A"), Some(4), "{lines:?}");
        let places = session.places();
        assert_eq!(places.name(4).as_deref(), Some("cell[2]:2"));
        // A statement error, in the body or in the value, names its column in the cell.
        for (source, place) in [
            ("C = 1\nD = nope + 1\nC", "cell[3]:2:5"),
            ("C = 1\nC + nope", "cell[3]:2:5"),
        ] {
            let input = Input {
                value_apart: true,
                ..Input::new("cell[3]", source)
            };
            let outcome = driver.run(&mut session, &input, driver.mark(), &mut kept);
            let error = outcome.error.expect("an unknown name");
            assert!(error.to_string().contains(place), "{error}");
            assert!(outcome.value.is_none());
        }
    }

    #[test]
    fn an_input_asked_for_before_an_interrupt_does_not_run() {
        let driver = Driver::new(1);
        let mut session = session(engine::Policy::Threaded);
        let mark = driver.mark();
        driver.interrupt().interrupt();
        let mut kept = Kept::default();
        let outcome = driver.run(&mut session, &Input::new("x", "print 1"), mark, &mut kept);
        assert!(outcome.interrupted && kept.out.is_empty() && kept.n_started == 0);
        // A later input, with a later mark, runs.
        let outcome = driver.run(
            &mut session,
            &Input::new("x", "print 1"),
            driver.mark(),
            &mut kept,
        );
        assert!(!outcome.interrupted && outcome.error.is_none());
        assert_eq!(String::from_utf8_lossy(&kept.out), "1.0\n");
    }

    /// An interrupt from another thread while a loop pushes slow ops stops the loop, cancels
    /// what has not started, and the wait after it ends with every op over.
    #[test]
    fn an_interrupt_from_another_thread_stops_the_input_and_cancels_what_has_not_started() {
        for policy in [engine::Policy::Threaded, engine::Policy::Naive] {
            let driver = Driver::new(1);
            let mut session = session(policy);
            let interrupt = driver.interrupt();
            let mark = driver.mark();
            let interrupter = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                interrupt.interrupt()
            });
            let source =
                "A = rand(200, 200)\nfor i in 0..100000 { A = A @ A / 200 }\nprint A[0, 0]";
            let mut kept = Kept::default();
            let started = Instant::now();
            let outcome = driver.run(&mut session, &Input::new("x", source), mark, &mut kept);
            assert_eq!(interrupter.join().unwrap(), 1);
            assert!(outcome.interrupted, "{policy}");
            let error = outcome.error.expect("stopped");
            assert!(
                error.to_string().contains("interrupted"),
                "{policy}: {error}"
            );
            let waited = driver.wait(&mut session, mark);
            assert!(waited.interrupted && !waited.abandoned, "{policy}");
            assert_eq!(session.n_unfinished(), 0);
            assert!(started.elapsed() < Duration::from_secs(20), "{policy}");
        }
    }

    /// An interrupt while the engine is about to be replaced cancels what has not started, and a
    /// second stops waiting for what runs, even for an op an earlier cell let go: the wait said
    /// nothing was cancelled and heard no interrupt until every op had ended.
    #[test]
    fn the_wait_before_replacing_the_engine_hears_interrupts() {
        let driver = Driver::new(1);
        let mut session = session(engine::Policy::Threaded);
        let mut kept = Kept::default();
        let source = "X = work(3000, ones(2))\nY = X + 1";
        let outcome = driver.run(&mut session, &Input::new("cell[1]", source), 0, &mut kept);
        assert!(outcome.error.is_none());
        session.let_go_unfinished();
        let interrupt = driver.interrupt();
        let mark = driver.mark();
        let interrupter = std::thread::spawn(move || {
            for _ in 0..2 {
                std::thread::sleep(Duration::from_millis(200));
                interrupt.interrupt();
            }
        });
        let started = Instant::now();
        assert!(driver.wait_all_before_replacing(&mut session, mark, 2));
        assert!(
            started.elapsed() < Duration::from_millis(2500),
            "waited {:?} for X's op",
            started.elapsed()
        );
        interrupter.join().unwrap();
        let error = session.value("Y").unwrap_err();
        assert!(
            error.contains("has no value"),
            "Y = X + 1 was cancelled: {error}"
        );
        // No interrupt: it waits for every op and says none came.
        let mark = driver.mark();
        assert!(!driver.wait_all_before_replacing(&mut session, mark, 2));
        assert_eq!(session.n_unfinished(), 0);
    }

    /// An interrupt of an input on simulated ranks ends their job, and what then fails says that
    /// rank 0 was interrupted: it said `the job ended: rank 0 failed`, which it had not.
    #[test]
    fn a_job_of_ranks_ended_by_an_interrupt_says_so() {
        let driver = Driver::new(1);
        let mut session = session(engine::Policy::Threaded);
        let command = crate::commands::parse('%', "engine sim --ranks 2").unwrap();
        crate::commands::run(&mut session, command).unwrap();
        let interrupt = driver.interrupt();
        let mark = driver.mark();
        let interrupter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            interrupt.interrupt()
        });
        // Both ranks wait for a message the other never sends.
        let source = "w = recv(1 - rank(), 4)\nprint w";
        let mut kept = Kept::default();
        let outcome = driver.run(
            &mut session,
            &Input::new("cell[1]", source),
            mark,
            &mut kept,
        );
        interrupter.join().unwrap();
        assert!(outcome.interrupted);
        driver.wait(&mut session, mark);
        let mark = driver.mark();
        let outcome = driver.run(
            &mut session,
            &Input::new("cell[2]", "v = allreduce(ones(2))\nprint v"),
            mark,
            &mut kept,
        );
        let error = outcome.error.expect("the job ended").to_string();
        assert!(
            error.contains("the job ended: rank 0 was interrupted"),
            "{error}"
        );
        assert!(!error.contains("rank 0 failed"), "{error}");
    }

    /// Under the simulated policy the wait lets the virtual clock run to its end: every op of
    /// the input is done, none left ready or running.
    #[test]
    fn a_wait_leaves_every_op_in_its_final_state_on_the_simulated_engine() {
        let driver = Driver::new(1);
        let mut session = session(engine::Policy::Sim);
        let mut kept = Kept::default();
        let source = "A = ones(64, 64)\nB = A @ A\nprint B[0, 0]\nC = B @ A\nD = A @ A\nE = C + D";
        let outcome = driver.run(&mut session, &Input::new("cell[1]", source), 0, &mut kept);
        assert!(outcome.error.is_none());
        let waited = driver.wait(&mut session, 0);
        assert!(waited.failures.is_none());
        let view = session.live("cell[1]").expect("observed").view(true);
        assert!(view.count(engine::OpState::Done) >= 5, "{}", view.heading);
        for state in [
            engine::OpState::Running,
            engine::OpState::Ready,
            engine::OpState::Waiting,
        ] {
            assert_eq!(view.count(state), 0, "{}", view.heading);
        }
    }

    #[test]
    fn a_wait_reports_the_failures_nobody_reported() {
        let driver = Driver::new(1);
        let mut session = session(engine::Policy::Threaded);
        let mut kept = Kept::default();
        let outcome = driver.run(
            &mut session,
            &Input::new("f.dep", "A = ones(2)\nB = A @ ones(3)\n"),
            0,
            &mut kept,
        );
        assert!(outcome.error.is_none());
        let failures = driver.wait(&mut session, 0).failures.expect("a failed op");
        assert!(failures.to_string().contains("f.dep:2"), "{failures}");
    }

    #[test]
    fn the_repl_leaving_gives_up_at_the_second_interrupt() {
        let driver = Driver::new(2);
        let mut session = session(engine::Policy::Threaded);
        let mut kept = Kept::default();
        // One long op, running when the interrupts come: the first cancels nothing that runs.
        let source = "A = rand(300, 300)\nfor i in 0..400 { A = A @ A / 300 }";
        let mark = driver.mark();
        driver.run(&mut session, &Input::new("<repl>", source), mark, &mut kept);
        // On a busy machine the workers may not have started the first op yet: the interrupts
        // would then cancel everything, and nothing would be left to give up on.
        let monitor = session.monitor();
        let running =
            |ops: &[engine::OpSnapshot]| ops.iter().any(|op| op.state == engine::OpState::Running);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !running(&monitor.snapshot().ops) {
            assert!(std::time::Instant::now() < deadline, "no op started");
            std::thread::sleep(Duration::from_millis(1));
        }
        let interrupt = driver.interrupt();
        interrupt.interrupt();
        interrupt.interrupt();
        let waited = driver.wait_or_leave(&mut session, mark);
        assert!(waited.interrupted && waited.abandoned);
        session.wait_all();
    }

    #[test]
    fn blanking_keeps_lines_and_columns() {
        assert_eq!(blank("ab\né c"), "  \n   ");
    }
}
