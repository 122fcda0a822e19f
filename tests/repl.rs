//! The REPL, end to end through a pseudo-terminal (rexpect) as a user types, and through a pipe.
//!
//! Every session runs in a fresh directory that is also its HOME and XDG_DATA_HOME, so the
//! history file never touches the user's. Colours are off (`NO_COLOR`) and escape sequences are
//! stripped from what the terminal shows, so expectations are plain text.
//! Lines are sent whole, as a paste or `tmux send-keys` sends them: the REPL must take every key
//! of a write, also while the live panel is drawn.

use std::io::Write;
use std::process::{Command, Stdio};

use rexpect::reader::Options;
use rexpect::session::PtySession;

use crate::util::{Run, TestDir};

/// How long any expectation may wait (a debug build's 800×800 matmuls take seconds).
const TIMEOUT_MS: u64 = 60_000;

/// A `dep` REPL in a pseudo-terminal.
struct Repl {
    session: PtySession,
    dir: TestDir,
    /// Everything the terminal showed so far, for failure messages.
    transcript: String,
}

impl Repl {
    /// Starts `dep` with no arguments and waits for its first prompt.
    fn start() -> Repl {
        let dir = TestDir::new();
        let command = dir.dep();
        Repl::spawn(dir, command)
    }

    /// Starts `command` (which runs `dep` in `dir`) in a pseudo-terminal, with the session's
    /// own HOME, a threaded engine of two workers, and waits for its first prompt.
    fn spawn(dir: TestDir, mut command: Command) -> Repl {
        command
            .stdin(Stdio::inherit())
            .env("HOME", dir.path())
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env("TERM", "xterm-256color")
            .env("DEP_ENGINE", "threaded")
            .env("DEP_THREADS", "2");
        let options = Options {
            timeout_ms: Some(TIMEOUT_MS),
            strip_ansi_escape_codes: true,
        };
        let session = rexpect::session::spawn_with_options(command, options).expect("spawn dep");
        let mut repl = Repl {
            session,
            dir,
            transcript: String::new(),
        };
        repl.expect("Ctrl-D leaves.");
        repl.prompt();
        repl
    }

    /// Waits for `needle` in the terminal's output; on a timeout, fails with the transcript.
    fn expect(&mut self, needle: &str) -> String {
        match self.session.exp_string(needle) {
            Ok(before) => {
                self.transcript.push_str(&before);
                self.transcript.push_str(needle);
                before
            }
            Err(error) => panic!(
                "waiting for {needle:?}: {error}\n--- the terminal so far:\n{}",
                self.transcript
            ),
        }
    }

    /// Waits for a fresh prompt at the start of a line (redraws of the current line start with
    /// a carriage return, not a line feed).
    fn prompt(&mut self) -> String {
        self.expect("\n\rdep> ")
    }

    /// Types `line` and Enter, in one write.
    fn line(&mut self, line: &str) {
        self.send(&format!("{line}\r"));
    }

    /// Types `line` and Enter key by key, at a fast typist's pace: a line whose keys come
    /// faster is pasted, and the live panel stays away from the prompt after it (the line editor may
    /// hold the lines pasted with it).
    fn type_line(&mut self, line: &str) {
        for key in line.chars().chain(['\r']) {
            self.send(&key.to_string());
            std::thread::sleep(std::time::Duration::from_millis(65));
        }
    }

    /// Types `line`, then waits for the next prompt and returns what came before it.
    fn run(&mut self, line: &str) -> String {
        self.line(line);
        self.prompt()
    }

    fn send(&mut self, text: &str) {
        self.session.send(text).expect("write to the terminal");
        self.session.flush().expect("flush the terminal");
    }

    fn control(&mut self, key: char) {
        self.session.send_control(key).expect("send a control key");
    }

    /// Ctrl-D, then the exit status.
    fn quit(mut self) -> (i32, TestDir) {
        self.control('d');
        let _ = self.session.exp_eof();
        let status = self.session.process().wait().expect("wait for dep");
        let code = match status {
            rexpect::process::wait::WaitStatus::Exited(_, code) => code,
            other => panic!("dep did not exit normally: {other:?}\n{}", self.transcript),
        };
        (code, self.dir)
    }
}

#[test]
fn the_seed_example_typed_line_by_line_prints_d_and_keeps_history() {
    let mut repl = Repl::start();
    for line in ["A = 2", "B = A + 1", "C = A + 2", "D = B * C"] {
        repl.run(line);
    }
    let shown = repl.run("print D");
    assert!(shown.contains("12.0"), "{shown:?}");
    let shown = repl.run(":vars");
    assert!(shown.contains("D     scalar  cpu     ready"), "{shown:?}");
    let (code, dir) = repl.quit();
    assert_eq!(code, 0);
    let history = std::fs::read_to_string(dir.path().join("data/dep/history")).expect("history");
    assert!(history.contains("D = B * C\nprint D\n:vars"), "{history}");
}

#[test]
fn a_failing_statement_leaves_the_other_variables_usable() {
    let mut repl = Repl::start();
    repl.run("A = ones(2, 3)");
    // The matmul fails on a worker; the prompt reports it once the op is done.
    let shown = repl.run("B = A @ A");
    assert!(
        shown.contains("error: matmul: shapes [2, 3] and [2, 3] are not aligned"),
        "{shown:?}"
    );
    // Numbered after the code typed before it, so that each input's lines are told apart.
    assert!(shown.contains(" --> <repl>:2:1\r\n"), "{shown:?}");
    assert!(shown.contains("2 | B = A @ A"), "{shown:?}");
    repl.run("C = A * 2");
    let shown = repl.run("print C");
    assert!(shown.contains("[[2. 2. 2.]\r\n [2. 2. 2.]]"), "{shown:?}");
    // A parse error is reported too, and nothing is lost.
    repl.line("E = (A +");
    repl.expect("\n\r...> ");
    let shown = repl.run(")");
    assert!(shown.contains("error"), "{shown:?}");
    let shown = repl.run("print A + C");
    assert!(shown.contains("[[3. 3. 3.]"), "{shown:?}");
    assert_eq!(repl.quit().0, 0);
}

/// An op that fails after the prompt came back (it waited for seconds of work) is told by the
/// panel, and its full report comes before the output of the next line typed, not after it.
/// A pasted line's prompt comes back without the live panel: nothing watches under it (the line
/// editor may hold the lines pasted with it), so a panel drawn there would stand still until a
/// key came, showing an op running long after it ended.
#[test]
fn after_a_pasted_line_no_panel_stands_still_under_the_prompt() {
    let mut repl = Repl::start();
    repl.line("Q = work(1500, ones(2))");
    repl.prompt();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // Everything the terminal showed from that prompt on (the next key brings the panel back;
    // the op has ended by then, so it shows nothing).
    repl.line("print Q[0]");
    let shown = repl.expect("1.0");
    assert!(!shown.contains("running"), "{shown:?}");
    repl.prompt();
    assert_eq!(repl.quit().0, 0);
}

#[test]
fn a_failure_told_by_the_panel_is_reported_before_the_next_lines_output() {
    let mut repl = Repl::start();
    // Three seconds: the prompt comes back, and the next line is typed, before it ends.
    repl.run("B = work(3000, ones(2, 2))");
    // Typed, not pasted: the panel then watches under the prompt.
    repl.type_line("C = B @ ones(3)");
    repl.expect("(press Enter for the full report)");
    repl.line("print 7");
    let before = repl.expect("7.0");
    assert!(
        before.contains("error: matmul: shapes [2, 2] and [3]"),
        "{before:?}"
    );
    repl.prompt();
    assert_eq!(repl.quit().0, 0);
}

#[test]
fn tab_completes_a_builtin_and_the_hint_shows_its_signature() {
    let mut repl = Repl::start();
    repl.send("X = zer");
    repl.expect("X = zer");
    repl.send("\t");
    repl.expect("X = zeros(d...)  a tensor of zeros with dimensions d");
    repl.run("(2)");
    let shown = repl.run("print X");
    assert!(shown.contains("[0. 0.]"), "{shown:?}");
    // Colon commands complete too.
    repl.send(":thr\t");
    repl.expect(":threads");
    repl.line(" 3");
    let shown = repl.prompt();
    assert!(
        shown.contains("engine: threaded, 3 CPU worker threads"),
        "{shown:?}"
    );
    assert_eq!(repl.quit().0, 0);
}

#[test]
fn a_for_block_continues_over_several_lines() {
    let mut repl = Repl::start();
    repl.line("for i in 0..3 {");
    repl.expect("\n\r...> ");
    repl.line("  print i");
    repl.expect("\n\r...> ");
    let shown = repl.run("}");
    assert!(shown.contains("0\r\n1\r\n2"), "{shown:?}");
    assert_eq!(repl.quit().0, 0);
}

/// A colon command typed at a continuation runs, and the lines typed before it wait for the
/// rest of their statement: `:vars` was taken as part of the loop, a syntax error once closed.
#[test]
fn a_colon_command_at_a_continuation_runs_and_keeps_the_unfinished_statement() {
    let mut repl = Repl::start();
    repl.run("A = ones(2)");
    repl.line("for i in 0..3 {");
    repl.expect("\n\r...> ");
    repl.line(":vars");
    let shown = repl.expect("\n\r...> ");
    assert!(shown.contains("name  shape"), "{shown:?}");
    assert!(
        shown.contains("the unfinished statement is kept"),
        "{shown:?}"
    );
    repl.line(":why A");
    let shown = repl.expect("\n\r...> ");
    assert!(shown.contains("A is ready"), "{shown:?}");
    // A wrong command is told as at the prompt, and the statement is still kept.
    repl.line(":why");
    let shown = repl.expect("\n\r...> ");
    assert!(shown.contains("usage: :why NAME"), "{shown:?}");
    repl.line("  print i");
    repl.expect("\n\r...> ");
    let shown = repl.run("}");
    assert!(shown.contains("0\r\n1\r\n2"), "{shown:?}");
    assert!(!shown.contains("error"), "{shown:?}");
    assert_eq!(repl.quit().0, 0);
}

/// Piped too, a command inside a block runs where it stands; a slice's end on a line of its own
/// (`:3]`) is still code.
#[test]
fn a_piped_colon_command_inside_a_block_runs_and_a_slice_end_stays_code() {
    let dir = TestDir::new();
    let input = "A = ones(4)\nfor i in 0..2 {\n:vars\n  print i\n}\nB = A[1\n:3]\nprint B\n";
    let run = run_piped(&dir, input, &[]).expect_code(0);
    assert!(run.stdout.starts_with("name  shape"), "{}", run.stdout);
    assert!(run.stdout.ends_with("0\n1\n[1. 1.]\n"), "{}", run.stdout);
}

/// `:quit` inside an unfinished statement leaves without running it (it ran what was typed,
/// and the parser's error for the missing `}` ended the REPL with exit code 2).
#[test]
fn a_piped_quit_inside_a_block_leaves_without_running_the_unfinished_statement() {
    let dir = TestDir::new();
    let input = "A = ones(2)\nprint A\nfor i in 0..2 {\n  print i\n:quit\nprint 7\n";
    let run = run_piped(&dir, input, &[]).expect_code(0);
    assert_eq!(run.stdout, "[1. 1.]\n");
    assert!(
        run.stderr
            .contains("(the unfinished statement was not run)"),
        "{}",
        run.stderr
    );
}

#[test]
fn why_explains_an_op_waiting_behind_a_long_matmul_while_the_panel_shows_it() {
    let mut repl = Repl::start();
    repl.run(":engine threaded");
    repl.run("X = rand(800, 800)");
    repl.run("print X[0, 0] >= 0");
    // work(ms, x) takes a known time whatever the build's optimisation, then gives x.
    repl.type_line("Y = work(4000, X @ X)");
    repl.prompt();
    // The prompt is back at once, with the live panel under it.
    // The heading every live display has (matched on its ASCII part: the pseudo-terminal
    // reads byte by byte).
    repl.expect("1 op: 1 running");
    repl.type_line("Z = Y + 1");
    repl.expect("2 ops: 1 running, 1 waiting");
    let shown = repl.run(":why Z");
    assert!(
        shown.contains("Z will be written by Z = Y + 1 (<repl>:4), which waits for Y: written by Y = work(4000, X @ X) (<repl>:3)"),
        "{shown:?}"
    );
    assert!(shown.contains("running on cpu:"), "{shown:?}");
    // Once the matmul is done, Z is computed and nothing waits.
    let shown = repl.run("print Z[0, 0] > 1");
    assert!(shown.contains("1.0"), "{shown:?}");
    let shown = repl.run(":why Z");
    assert!(shown.contains("Z is ready"), "{shown:?}");
    assert_eq!(repl.quit().0, 0);
}

#[test]
fn ctrl_c_cancels_the_pending_ops_and_clears_the_line() {
    let mut repl = Repl::start();
    repl.run("X = rand(800, 800)");
    repl.run("print X[0, 0] >= 0");
    // One input, three statements: Z and W wait behind the matmul.
    repl.type_line("Y = work(4000, X @ X); Z = Y + 1; W = Z * 2");
    repl.expect("3 ops: 1 running, 2 waiting");
    repl.control('c');
    let shown = repl.prompt();
    assert!(
        shown.contains("cancelled 2 ops that had not started: `Z = Y + 1`, `W = Z * 2`"),
        "{shown:?}"
    );
    assert!(
        shown.contains("still running (not interruptible): `Y = work(4000, X @ X)`"),
        "{shown:?}"
    );
    // The cancelled variables say so; the others are there.
    let shown = repl.run("print W");
    assert!(shown.contains("cancelled"), "{shown:?}");
    let shown = repl.run("print Y[0, 0] > 1");
    assert!(shown.contains("1.0"), "{shown:?}");
    // At an idle prompt Ctrl-C drops the line: Q is never defined.
    repl.send("Q = 1");
    repl.expect("Q = 1");
    repl.control('c');
    repl.prompt();
    let shown = repl.run(":vars");
    assert!(!shown.contains("Q "), "{shown:?}");
    assert!(shown.contains("X "), "{shown:?}");
    assert_eq!(repl.quit().0, 0);
}

#[test]
fn ctrl_c_in_a_loop_leaves_the_variables_it_writes_with_their_last_computed_values() {
    for engine in ["threaded", "per-device", "naive", "sim"] {
        ctrl_c_in_a_loop_under(engine);
    }
}

fn ctrl_c_in_a_loop_under(engine: &str) {
    let mut repl = Repl::start();
    repl.run(&format!(":engine {engine}"));
    repl.run("x = ones(100000)");
    // Each iteration takes over a millisecond, so the interpreter's lead of 4,096 ops is not
    // run through when the Ctrl-C comes: ops are pending.
    repl.line("for i in 0..1000000 { y = x + 1; x = work(1, y) }");
    repl.expect(" }\r\n");
    std::thread::sleep(std::time::Duration::from_millis(1000));
    repl.control('c');
    let shown = repl.prompt();
    assert!(shown.contains("cancelled"), "{shown:?}");
    // The cancelled ops wrote nothing: x and y hold what the last ops that ran computed.
    let shown = repl.run(":vars");
    assert!(!shown.contains("failed"), "{shown:?}");
    let shown = repl.run("print x[0] > 1");
    assert!(shown.contains("1.0"), "x kept its value: {shown:?}");
    // y = x + 1 or, its x = work(1, y) done, y = x.
    let shown = repl.run("print (y[0] - x[0]) * (y[0] - x[0] - 1) == 0");
    assert!(shown.contains("1.0"), "y and x are the loop's: {shown:?}");
    if engine == "threaded" || engine == "per-device" {
        // Ops were pending (naive and sim ones run at push): `:why` skips the cancelled.
        let shown = repl.run(":why y");
        assert!(
            shown.contains("y was last written by y = x + 1")
                && shown.contains(" later writes were cancelled before they started"),
            "{shown:?}"
        );
    }
    assert_eq!(repl.quit().0, 0);
}

#[test]
fn ctrl_c_while_print_blocks_cancels_what_has_not_started_and_stops_the_input() {
    let mut repl = Repl::start();
    // A runs for 1.5 s; B waits behind it and would take 30 s; `print B` blocks; the input's
    // last statement would define C.
    repl.line("A = work(1500, ones(2)); B = work(30000, A); print B; C = ones(3)");
    repl.expect("C = ones(3)\r\r\n");
    std::thread::sleep(std::time::Duration::from_millis(300));
    repl.control('c');
    repl.expect("(Ctrl-C: the ops that had not started are cancelled");
    let started = std::time::Instant::now();
    let shown = repl.prompt();
    // Back once A is over, long before B's 30 s: B was cancelled, the input stopped.
    assert!(started.elapsed().as_secs() < 20, "{shown:?}");
    assert!(shown.contains("cancelled"), "{shown:?}");
    let shown = repl.run(":vars");
    assert!(
        !shown.contains("\nC "),
        "the input stopped before C: {shown:?}"
    );
    let shown = repl.run("print A + 1");
    assert!(
        shown.contains("[2. 2.]"),
        "A finished and kept its value: {shown:?}"
    );
    assert_eq!(repl.quit().0, 0);
}

/// Lines that come at once (typed ahead, pasted) run at once: the live panel, which waits for a
/// key at the prompt, held back the lines the line editor had read with the first, so a Ctrl-C
/// meant for the `print` among them cancelled nothing and stayed a key until the print's end.
#[test]
fn ctrl_c_after_lines_typed_at_once_cancels_what_they_pushed() {
    let mut repl = Repl::start();
    repl.send("X = work(8000)\rY = X + 1\rprint Y\r");
    repl.expect("print Y");
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let started = std::time::Instant::now();
    repl.control('c');
    repl.expect("(Ctrl-C: the ops that had not started are cancelled");
    let shown = repl.prompt();
    assert!(
        shown.contains("cancelled (Ctrl-C) before they started"),
        "{shown:?}"
    );
    assert!(
        started.elapsed().as_secs() < 20,
        "back once X is over: {shown:?}"
    );
    assert_eq!(repl.quit().0, 0);
}

/// Ctrl-C while `:engine` waits for the pending ops cancels those that have not started and
/// keeps the engine: it said they were cancelled, yet the wait heard nothing, `Y = X + 1` ran
/// and the engine was replaced once X's op ended.
#[test]
fn ctrl_c_while_engine_waits_cancels_what_has_not_started_and_keeps_the_engine() {
    let mut repl = Repl::start();
    repl.run("X = work(2500, ones(2))");
    repl.run("Y = X + 1");
    repl.line(":engine naive");
    repl.expect("before replacing the engine");
    std::thread::sleep(std::time::Duration::from_millis(300));
    repl.control('c');
    repl.expect("(Ctrl-C: the ops that had not started are cancelled");
    let shown = repl.prompt();
    assert!(
        shown.contains("the engine was not replaced") && !shown.contains("engine: naive"),
        "{shown:?}"
    );
    let shown = repl.run("print Y");
    assert!(shown.contains("cancelled (Ctrl-C)"), "{shown:?}");
    let shown = repl.run("print X + 1");
    assert!(shown.contains("[2. 2.]"), "{shown:?}");
    assert_eq!(repl.quit().0, 0);
}

/// A `print` of a variable whose new write a Ctrl-C cancelled shows no value as the new one:
/// the value left is the earlier write's, which only a later `print` shows, as such.
#[test]
fn a_print_whose_write_ctrl_c_cancelled_does_not_show_the_earlier_value_as_the_new_one() {
    let mut repl = Repl::start();
    repl.line("B = 5");
    repl.prompt();
    repl.line("A = work(1500, ones(2)); B = A + 1; print B");
    repl.expect("; print B");
    std::thread::sleep(std::time::Duration::from_millis(300));
    repl.control('c');
    repl.expect("(Ctrl-C: the ops that had not started are cancelled");
    let shown = repl.prompt();
    assert!(
        shown.contains("no new value: its last write was cancelled") && !shown.contains("5.0"),
        "{shown:?}"
    );
    let shown = repl.run("print B");
    assert!(shown.contains("5.0"), "B kept its earlier value: {shown:?}");
    assert_eq!(repl.quit().0, 0);
}

#[test]
fn a_second_ctrl_c_while_print_waits_on_a_running_op_abandons_the_wait_and_keeps_the_session() {
    let mut repl = Repl::start();
    repl.line("K = ones(2)");
    repl.prompt();
    // A runs for 30 s: the first Ctrl-C cancels nothing (A is running), the second gives up
    // waiting for it; the session, K and A's op live on.
    repl.line("A = work(30000, ones(2)); print A");
    repl.expect("; print A");
    std::thread::sleep(std::time::Duration::from_millis(300));
    repl.control('c');
    repl.expect("(Ctrl-C: the ops that had not started are cancelled");
    repl.control('c');
    repl.expect("(Ctrl-C again: stopped waiting");
    let shown = repl.prompt();
    assert!(shown.contains("interrupted while waiting"), "{shown:?}");
    let shown = repl.run("print K + 1");
    assert!(shown.contains("[2. 2.]"), "the session kept K: {shown:?}");
    let shown = repl.run(":ops");
    assert!(shown.contains("running"), "A still runs: {shown:?}");
    // Its start is on the session's clock, where the panel's is on its input's: it says so.
    assert!(shown.contains("start: on the session's clock"), "{shown:?}");
    // Leaving: Ctrl-D waits for A; Ctrl-C, then Ctrl-C again, leaves at once.
    repl.control('d');
    repl.expect("waiting for");
    repl.control('c');
    repl.expect("(Ctrl-C: the ops that had not started are cancelled");
    repl.control('c');
    repl.expect("left without waiting");
}

/// Among simulated ranks, rank 1's `print` blocked behind a `recv` that no rank answers held
/// the prompt until the communication's 60 s timeout, whatever Ctrl-C did: rank 0 waited for
/// its peers' reports without looking at its interrupts. Ctrl-C now reaches the peers too.
#[test]
fn ctrl_c_while_another_simulated_rank_waits_for_a_message_brings_the_prompt_back() {
    let mut repl = Repl::start();
    repl.run(":engine sim --ranks 2");
    repl.run("K = ones(2)");
    repl.run("with rank = 1 { z = recv(0, 2) }");
    repl.line("print 1");
    repl.expect("1.0");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let started = std::time::Instant::now();
    repl.control('c');
    repl.expect("(Ctrl-C: the ops that had not started are cancelled");
    let shown = repl.prompt();
    assert!(
        started.elapsed().as_secs() < 20,
        "the prompt came back only after the timeout: {shown:?}"
    );
    assert!(shown.contains("error (rank 1)"), "{shown:?}");
    let shown = repl.run("print K + 1");
    assert!(shown.contains("[2. 2.]"), "the session kept K: {shown:?}");
    assert_eq!(repl.quit().0, 0);
}

/// `dep` with no arguments in `dir` (also its HOME), with `envs`, its stdin, stdout and stderr
/// pipes.
fn spawn_piped(dir: &TestDir, envs: &[(&str, &str)]) -> std::process::Child {
    dir.dep()
        .env("HOME", dir.path())
        .envs(envs.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dep")
}

/// `dep` with no arguments, `input` piped into it whole, with `envs`: what it printed.
fn run_piped(dir: &TestDir, input: &str, envs: &[(&str, &str)]) -> Run {
    let mut child = spawn_piped(dir, envs);
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    let output = child.wait_with_output().expect("wait for dep");
    Run {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        code: output.status.code().unwrap_or(-1),
    }
}

/// Answers going into a pipe closed early (`dep < script | head`) are dropped: the session reads
/// its input to the end and exits as it would have, with no panic.
#[test]
fn answers_into_a_closed_pipe_end_nothing() {
    let dir = TestDir::new();
    let input = "x = ones(4)\n".to_string() + &":ops\nprint x\n".repeat(2000);
    let mut child = spawn_piped(&dir, &[]);
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 100];
    std::io::Read::read_exact(&mut stdout, &mut first).expect("the first answers");
    drop(stdout);
    writer.join().expect("the input written");
    let output = child.wait_with_output().expect("wait for dep");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Each op slice of the Chrome trace `file` in `dir`: its name and its argument `argument`.
fn slices_with(dir: &TestDir, file: &str, argument: &str) -> Vec<(String, serde_json::Value)> {
    let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
    let trace: serde_json::Value = serde_json::from_str(&text).unwrap();
    trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["ph"] == "X")
        .map(|event| {
            let name = event["name"].as_str().unwrap().to_string();
            (name, event["args"][argument].clone())
        })
        .collect()
}

/// A trace asked for while ops are still pending (a slow op just pushed) waits for them: every
/// op is in it, done, where it held only those finished so far, the rest shown running.
#[test]
fn a_trace_taken_while_ops_are_pending_waits_for_them() {
    let dir = TestDir::new();
    let input = "A = ones(4)\nB = work(200, A + 1)\nC = B * 2\n:trace t.json\n";
    run_piped(&dir, input, &[("DEP_ENGINE", "threaded")]).expect_code(0);
    let slices = slices_with(&dir, "t.json", "state");
    let done = |label: &str| (label.to_string(), serde_json::json!("done"));
    assert_eq!(
        slices,
        [
            done("A = ones(4)"),
            done("B = work(200, A + 1)"),
            done("C = B * 2")
        ]
    );
}

/// A trace names each op's line as the REPL's reports do (`B` at `<stdin>:6` is line 6), not by
/// the session-wide count of statement lines that the engine's events carry (commands, blank
/// lines and comments are no statement lines there): in the slices, in Perfetto's file, and in
/// `dep replay`.
#[test]
fn a_traces_lines_are_the_lines_the_repl_names() {
    let dir = TestDir::new();
    let input =
        ":vars\n:vars\nA = ones(4)\n\n# c\nB = A + 1\n:trace t.json\n:trace t.pftrace\n:why B\n";
    let run = run_piped(&dir, input, &[]).expect_code(0);
    assert!(run.stdout.contains("<stdin>:6"), "{}", run.stdout);
    assert_eq!(
        slices_with(&dir, "t.json", "line"),
        [
            ("A = ones(4)".to_string(), serde_json::json!(3)),
            ("B = A + 1".to_string(), serde_json::json!(6))
        ]
    );
    let replayed = Run::of(dir.dep().args(["replay", "--end", "t.json"])).expect_code(0);
    assert!(
        replayed
            .stdout
            .contains("A = ones(4) (line 3) → B = A + 1 (line 6)"),
        "{}",
        replayed.stdout
    );
    let pftrace = std::fs::read(dir.path().join("t.pftrace")).unwrap();
    let slices = dep_views::perfetto::read(&pftrace).unwrap().slices;
    let lines: Vec<(String, String)> = slices
        .iter()
        .map(|slice| {
            let line = slice.arguments.iter().find(|(name, _)| name == "line");
            (slice.name.clone(), line.unwrap().1.clone())
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("A = ones(4)".to_string(), "3".to_string()),
            ("B = A + 1".to_string(), "6".to_string())
        ]
    );
}

/// A long loop in a session whose log keeps few events (`DEP_LOG_EVENTS`): the log forgets its
/// oldest events, and every view made from it says so; the trace holds the latest ops, and
/// `dep replay` steps through it.
#[test]
fn a_long_loop_keeps_the_latest_events_and_views_say_the_rest_is_forgotten() {
    let dir = TestDir::new();
    let input = "x = ones(4)\nfor i in 0..20000 {\n  y = x + 1\n  x = y * 1\n}\nprint sum(x)\n:why x\n:trace t.json\n";
    let run = run_piped(&dir, input, &[("DEP_LOG_EVENTS", "100000")]).expect_code(0);
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    let both = format!("{stdout}{stderr}");
    let notes: Vec<&str> = both
        .lines()
        .filter_map(|line| {
            line.split_once("the event log holds only the last ")
                .map(|(_, note)| note)
        })
        .collect();
    assert!(notes.len() >= 2, "{both}");
    for note in notes {
        // It forgets its older half when full: it holds between 50,000 and 100,000 events, and
        // what it holds and what it forgot are the run's events so far.
        let (held, rest) = note.split_once(" events: the ").unwrap();
        let (forgotten, rest) = rest.split_once(" before them").unwrap();
        let (held, forgotten): (usize, usize) = (held.parse().unwrap(), forgotten.parse().unwrap());
        assert!((50_000..=100_000).contains(&held), "{note}");
        assert!(forgotten > 0, "{note}");
        assert!(rest.contains("it keeps at most 100000"), "{note}");
    }
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("t.json")).unwrap()).unwrap();
    let n_slices = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["ph"] == "X")
        .count();
    assert!(
        (100..20000).contains(&n_slices),
        "{n_slices} ops of 40,001 in the trace"
    );
    Run::of(dir.dep().args(["replay", "--end", "t.json"])).expect_code(0);
    // A value that is not a number is a usage error that names the variable.
    let run = Run::of(dir.dep().env("DEP_LOG_EVENTS", "lots").stdin(Stdio::null())).expect_code(2);
    assert!(
        run.stderr
            .contains("DEP_LOG_EVENTS: `lots` is not a number"),
        "{}",
        run.stderr
    );
    let run = Run::of(dir.dep().env("DEP_LOG_EVENTS", "5000")).expect_code(2);
    assert!(run.stderr.contains("at least 100000"), "{}", run.stderr);
}

#[test]
fn piped_stdin_runs_like_a_script_and_exits_1_after_a_failure() {
    let dir = TestDir::new();
    let input = "A = 2\nB = A + 1\nC = A + 2\nD = B * C\nprint D\nE = ones(2) @ ones(3)\nfor i in 0..2 {\n  print i\n}\n:vars\nfor j in 0..1 {\n  print zz\n}\n";
    let run = run_piped(&dir, input, &[]).expect_code(1);
    assert!(run.stdout.starts_with("12.0\n0\n1\nname"), "{}", run.stdout);
    assert!(run.stdout.contains("\nD     scalar"), "{}", run.stdout);
    assert!(
        run.stderr
            .contains("error: matmul: shapes [2] and [3] are not aligned"),
        "{}",
        run.stderr
    );
    // Errors name the line of the input, also inside a block read over several lines.
    assert!(run.stderr.contains("--> <stdin>:6:1"), "{}", run.stderr);
    assert!(run.stderr.contains("--> <stdin>:12:9"), "{}", run.stderr);

    let run = Run::of(
        Command::new(crate::util::dep_binary())
            .env("NO_COLOR", "1")
            .stdin(
                std::fs::File::open(dir.write("ok.dep", "X = ones(2)\nprint X + 1\n"))
                    .expect("open"),
            ),
    )
    .expect_code(0);
    assert_eq!(run.stdout, "[2. 2.]\n");
    assert_eq!(run.stderr, "");
}

/// `:why` of a function's name says that it is one, where it was defined and what to ask
/// instead, rather than "no variable named".
#[test]
fn why_of_a_function_says_where_it_was_defined_and_what_to_ask() {
    let dir = TestDir::new();
    let input = "A = ones(2)\ndef f(x) {\n  return x + 1\n}\nB = f(A)\n:why f\n";
    let run = run_piped(&dir, input, &[]).expect_code(2);
    assert!(
        run.stderr.contains(
            "`f` is a function (`def f(x)`, defined at <stdin>:2), not a variable: why explains \
             the ops of a variable; ask it of a variable a call writes (`y = f(...)`, then why of `y`)"
        ),
        "{}",
        run.stderr
    );
}

/// `:engine` and `:threads` keep the variables a recorded graph reads and writes: a replay
/// after the switch updates them, and `:graph` and `:dag` report it as before.
#[test]
fn a_graph_recorded_before_an_engine_switch_updates_the_same_variables() {
    let dir = TestDir::new();
    let input = "a = 1\ngraph g {\n a = a + 1\n}\nrun g\na\n:engine naive\nrun g\na\n\
                 :threads 1\nrun g\na\n:engine sim\nrun g\na\n:graph g\n:dag g\n";
    let run = run_piped(&dir, input, &[("NO_COLOR", "1")]).expect_code(0);
    assert!(
        run.stdout.starts_with("2.0\n3.0\n4.0\n5.0\ngraph g: 1 op,"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains(", 4 runs\n"), "{}", run.stdout);
    assert!(!run.stdout.contains("rng"), "{}", run.stdout);
}

/// A variable that failed before `:threads` or `:engine` holds the same error after it: `:vars`
/// says so, and it and its readers report it at its statement.
#[test]
fn an_engine_switch_keeps_a_variables_error() {
    let dir = TestDir::new();
    let input = "a = ones(2) + ones(3)\ns = slots(2)\nset(s, 1, a * 2)\n:threads 1\n:vars\na\n\
                 c = a + 1\nc\n:engine naive\ns[1]\n";
    let run = run_piped(&dir, input, &[("NO_COLOR", "1")]).expect_code(1);
    assert!(
        run.stdout
            .contains("a     ?      cpu     failed: cannot broadcast shapes [2] and [3]"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("s[1]  ?      cpu     failed: cannot broadcast shapes [2] and [3]"),
        "a list's entries are variables too\n{}",
        run.stdout
    );
    assert!(!run.stderr.contains("has no value"), "{}", run.stderr);
    // The reads of `a`, `c` and `s[1]` each report it; the failure itself is reported once
    // more before the switch when it ends before the next input is read (the worker's timing).
    let reports: Vec<&str> = run.stderr.split("error: ").skip(1).collect();
    assert!(matches!(reports.len(), 3 | 4), "{}", run.stderr);
    for report in reports {
        assert!(
            report.starts_with("cannot broadcast shapes [2] and [3]\n --> <stdin>:1:1"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn graph_reports_a_recorded_graph_and_dag_draws_it() {
    let dir = TestDir::new();
    let input = "A = ones(4, 4)\ngraph step {\n  B = A + 1\n  C = B @ A\n}\nrun step\n:graph\n:graph step\n:dag step\n";
    let run = Run::of(
        Command::new(crate::util::dep_binary())
            .env("HOME", dir.path())
            .env("NO_COLOR", "1")
            .stdin(std::fs::File::open(dir.write("in.dep", input)).expect("open")),
    )
    .expect_code(0);
    assert!(
        run.stdout.starts_with(
            "recorded graphs: step\ngraph step: 2 ops, 1 edge (carrying 1 RAW, 0 WAR, 0 WAW)"
        ),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("peak memory per run"), "{}", run.stdout);
    assert!(run.stdout.contains("digraph \"step\" {"), "{}", run.stdout);
    assert!(
        run.stdout.contains("[label=\"B = A + 1 (<stdin>:3)\""),
        "{}",
        run.stdout
    );

    // A name that is no recorded graph says which ones are.
    let run = Run::of(
        Command::new(crate::util::dep_binary())
            .env("HOME", dir.path())
            .env("NO_COLOR", "1")
            .stdin(
                std::fs::File::open(
                    dir.write("bad.dep", "graph g {\n  X = ones(2)\n}\n:graph nope\n"),
                )
                .expect("open"),
            ),
    );
    assert!(
        run.stderr
            .contains("no graph named `nope`; recorded graphs: g"),
        "{}",
        run.stderr
    );
}

#[test]
fn graph_names_complete_after_graph_and_dag() {
    let mut repl = Repl::start();
    repl.line("graph step { S = ones(2) + 1 }");
    repl.prompt();
    repl.send(":graph st\t");
    repl.expect(":graph step");
    let shown = repl.run("");
    assert!(shown.contains("graph step: 1 op,"), "{shown:?}");
    repl.send(":dag st\t");
    repl.expect(":dag step");
    let shown = repl.run("");
    assert!(shown.contains("digraph \"step\""), "{shown:?}");
    let shown = repl.run(":help");
    assert!(shown.contains(":graph [NAME]"), "{shown:?}");
    assert!(shown.contains(":dag [NAME|"), "{shown:?}");
    // The communications are builtins too (the help left them out).
    for signature in ["rank()", "allreduce(x)", "recv(from, d...)"] {
        assert!(shown.contains(signature), "{signature}: {shown:?}");
    }
    assert_eq!(repl.quit().0, 0);
}

/// The command names a help text lists: the first word after `sigil` on its indented lines.
fn listed_commands(help: &str, sigil: char) -> std::collections::BTreeSet<String> {
    help.lines()
        .filter_map(|line| line.strip_prefix("  ")?.strip_prefix(sigil))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// One command table: `:help` typed in the REPL on a terminal lists what the kernel's `%help`
/// lists (tests/kernel/test_live_kernel.py checks `%help` through a real kernel).
#[test]
fn colon_help_on_a_terminal_lists_the_kernels_magics() {
    let mut repl = Repl::start();
    let shown = repl.run(":help");
    let repl_commands = listed_commands(&shown.replace("\r\n", "\n"), ':');
    let kernel = listed_commands(&dep_kernel::magic_help(), '%');
    assert!(repl_commands.len() >= 15, "{shown:?}");
    assert_eq!(repl_commands, kernel);
    assert_eq!(repl.quit().0, 0);
}

#[test]
fn colon_help_and_percent_help_list_the_same_commands() {
    let dir = TestDir::new();
    let run = Run::of(
        Command::new(crate::util::dep_binary())
            .env("HOME", dir.path())
            .env("NO_COLOR", "1")
            .stdin(std::fs::File::open(dir.write("in.dep", ":help\n")).expect("open")),
    )
    .expect_code(0);
    let repl = listed_commands(&run.stdout, ':');
    let kernel = listed_commands(&dep_kernel::magic_help(), '%');
    assert!(repl.len() >= 15 && repl.contains("engine"), "{repl:?}");
    assert_eq!(repl, kernel);
    // Every engine policy, the simulated one included, in both.
    assert!(
        run.stdout
            .contains(":engine naive|threaded|per-device|sim [THREADS]"),
        "{}",
        run.stdout
    );
}

#[test]
fn engine_sim_with_ranks_runs_each_input_on_every_simulated_rank() {
    let dir = TestDir::new();
    let input =
        ":engine sim --ranks 4\nx = ones(2) * (rank() + 1)\nx = allreduce(x)\nprint ranks(), x\n";
    let run = Run::of(
        Command::new(crate::util::dep_binary())
            .env("HOME", dir.path())
            .env("NO_COLOR", "1")
            .stdin(std::fs::File::open(dir.write("in.dep", input)).expect("open")),
    )
    .expect_code(0);
    assert!(run.stderr.contains("4 simulated ranks"), "{}", run.stderr);
    assert_eq!(run.stdout, "4 [10. 10.]\n", "{}", run.stderr);
}

/// A failing op in a loop is reported at its statement on the line, as `dep run` reports it,
/// though its label ends with the loop's counter (`y = x[i] i=5`), which the line does not hold.
#[test]
fn an_op_failing_in_a_loop_is_reported_at_its_statement() {
    let dir = TestDir::new();
    let input = "x = arange(5)\nfor i in 5..6 { y = x[i] }\nprint 7\n";
    let run = run_piped(&dir, input, &[]);
    assert!(run.stderr.contains(" --> <stdin>:2:17\n"), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("|                 ^^^^^^^^ in this statement"),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.contains('7'),
        "the session goes on: {}",
        run.stdout
    );
}

/// Under the simulated engine each input ends with its virtual clock run to the end, as a
/// notebook's cell does, so the DAG (from the virtual clock's events) and the queues and
/// variables (from the engine) show the same state: every op done.
#[test]
fn simulated_inputs_show_one_state_in_every_view() {
    let dir = TestDir::new();
    let input = ":engine sim\nA = ones(100, 100)\nB = A @ A\nC = B + 1\n:vars\n:dag\n";
    let run = run_piped(&dir, input, &[("NO_COLOR", "1")]).expect_code(0);
    assert!(
        run.stdout.contains("C     [100, 100]  cpu     ready"),
        "{}",
        run.stdout
    );
    for (op, line) in [
        ("A = ones(100, 100)", 2),
        ("B = A @ A", 3),
        ("C = B + 1", 4),
    ] {
        assert!(
            run.stdout
                .contains(&format!("[label=\"{op}\\n<stdin>:{line} · done · cpu:0 · ")),
            "{}",
            run.stdout
        );
    }
    assert!(!run.stdout.contains("waiting"), "{}", run.stdout);
}

/// A script `:load`ed from a pipe has its failures reported right after it, before the next
/// line's output, as a statement's are (they came at the end of the input).
#[test]
fn a_loaded_scripts_failure_is_reported_before_the_next_line() {
    let dir = TestDir::new();
    dir.write(
        "s1.dep",
        "Y = ones(3)\nZ = Y @ ones(7, 7)\nprint \"done\"\n",
    );
    dir.write("in.txt", ":engine naive\n:load s1.dep\n:vars\n");
    let output = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' < in.txt 2>&1",
            crate::util::dep_binary().display()
        ))
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("NO_COLOR", "1")
        .output()
        .expect("run dep");
    let both = String::from_utf8_lossy(&output.stdout);
    let error = both.find("error: matmul: shapes [3] and [7, 7]");
    let vars = both.find("name  shape");
    assert!(error.is_some() && vars.is_some() && error < vars, "{both}");
}

/// An op that fails on a worker after its input has ended (it waited for a second of work) is
/// reported before the output of the next line, which came after the failure: not after it, as
/// if that line had failed.
#[test]
fn a_failure_that_came_while_waiting_for_input_is_reported_before_the_next_lines_output() {
    let dir = TestDir::new();
    let merged = std::fs::File::create(dir.path().join("out.txt")).expect("create out.txt");
    let mut child = dir
        .dep()
        .env("HOME", dir.path())
        .env("NO_COLOR", "1")
        .env("DEP_ENGINE", "threaded")
        .env("DEP_THREADS", "2")
        .stdin(Stdio::piped())
        .stdout(merged.try_clone().expect("clone out.txt"))
        .stderr(merged)
        .spawn()
        .expect("spawn dep");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"B = work(1000, ones(2, 2))\nC = B @ ones(3)\n")
        .expect("write stdin");
    stdin.flush().expect("flush stdin");
    // `C`'s op fails once `B`'s second of work ends.
    std::thread::sleep(std::time::Duration::from_secs(3));
    stdin.write_all(b"print 7\n").expect("write stdin");
    drop(stdin);
    let status = child.wait().expect("wait for dep");
    assert_eq!(status.code(), Some(1));
    let both = std::fs::read_to_string(dir.path().join("out.txt")).expect("read out.txt");
    let error = both.find("error: matmul: shapes [2, 2] and [3]");
    let seven = both.find("7.0");
    assert!(
        error.is_some() && seven.is_some() && error < seven,
        "{both}"
    );
}

/// A recorded graph's DAG names each op's line as every other view does (`<stdin>:4`, where
/// colon commands and blank lines count), not by the session's own numbering.
#[test]
fn a_graphs_dag_names_lines_as_the_other_views_do() {
    let dir = TestDir::new();
    let input = "W = ones(2)\n:vars\n\ngraph g { W = W * 2 }\n:dag g\n";
    let run = run_piped(&dir, input, &[("NO_COLOR", "1")]).expect_code(0);
    assert!(
        run.stdout.contains("[label=\"W = W * 2 (<stdin>:4)\""),
        "{}",
        run.stdout
    );
}

/// Another simulated rank's failing op is reported at the next prompt and ends the job (a
/// later collective fails at once), and one left unreported when `:engine` goes back to one
/// rank is reported then, not lost.
#[test]
fn another_ranks_failure_is_reported_at_once_and_never_lost() {
    let dir = TestDir::new();
    let input = ":engine sim --ranks 2\nx = ones(2)\nwith rank = 1 { z = x @ ones(5,5) }\nprint x\ny = allreduce(x)\n";
    let run = run_piped(&dir, input, &[("NO_COLOR", "1")]).expect_code(1);
    assert!(
        run.stderr
            .contains("error (rank 1): matmul: shapes [2] and [5, 5] are not aligned"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("error: the job ended: rank 1 failed\n --> <stdin>:5:1"),
        "{}",
        run.stderr
    );
    let input = ":engine sim --ranks 2\nx = ones(2)\nwith rank = 1 { z = (ones(900, 900) @ ones(900, 900)) @ ones(5, 5) }\n:engine sim\nprint x\n";
    let run = run_piped(&dir, input, &[("NO_COLOR", "1")]).expect_code(1);
    assert!(
        run.stderr
            .contains("error (rank 1): matmul: shapes [900, 900] and [5, 5] are not aligned"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("[1. 1.]"), "{}", run.stdout);
}

/// A graph recorded among simulated ranks, then run alone again after `:engine naive`: its
/// collectives run on the one rank left, and a message to or from a rank that is gone is an
/// error at `run`, never a wait for that rank (a hang, before).
#[test]
fn a_graph_recorded_among_ranks_runs_or_fails_once_alone_again() {
    let dir = TestDir::new();
    let input = ":engine sim --ranks 2\nx = ones(2) * (rank() + 1)\n\
                 graph g {\n  x = allreduce(x)\n}\n\
                 graph h {\n  with rank = 0 {\n    x = recv(1, 2)\n  }\n  with rank = 1 {\n    send(x, 0)\n  }\n}\n\
                 run g\nprint x\n:engine naive\nrun g\nprint x\nrun h\nprint x\n";
    let run = Run::of(
        Command::new("timeout")
            .arg("60")
            .arg(crate::util::dep_binary())
            .env("HOME", dir.path())
            .env("NO_COLOR", "1")
            .stdin(std::fs::File::open(dir.write("in.dep", input)).expect("open")),
    )
    .expect_code(1);
    assert_eq!(run.stdout, "[3. 3.]\n[3. 3.]\n[3. 3.]\n", "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "error: graph `h` was recorded with more ranks: its statement at <stdin>:8 (`x = recv(1, 2)`) communicates with rank 1, and this job has 1 rank (0 to 0); record it again"
        ),
        "{}",
        run.stderr
    );
}

/// `:timeline SPAN` on the terminal draws an axis at least SPAN long, as the SVG does; a wrong
/// span or a file not ending in .svg is refused, and no file is written under its name.
#[test]
fn timeline_honours_its_span_and_refuses_a_wrong_one() {
    let dir = TestDir::new();
    let input = ":engine sim\nA = work(2)\n:timeline 10ms\n:timeline 0ms\n:timeline abc\n\
                 :timeline t3.txt\n";
    let run = run_piped(&dir, input, &[("NO_COLOR", "1")]).expect_code(2);
    let axis = run.stdout.lines().find(|line| line.contains("└ 0"));
    assert!(
        axis.is_some_and(|line| line.ends_with(" 10.00 ms")),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("(2.00 ms wall"), "{}", run.stdout);
    for refused in [
        "dep: `0ms` is not a SPAN: ",
        "dep: `abc` is not a FILE.svg: ",
        "dep: `t3.txt` is not a FILE.svg: ",
    ] {
        assert!(run.stderr.contains(refused), "{}", run.stderr);
    }
    for file in ["0ms", "abc", "t3.txt"] {
        assert!(!dir.path().join(file).exists(), "{file} written");
    }
}

/// A `dep` REPL in a pseudo-terminal `columns` wide (set with `stty` before `dep` starts), as
/// [`Repl::start`] starts one at the terminal's default width.
fn repl_of_width(columns: usize) -> Repl {
    let dir = TestDir::new();
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("stty cols {columns} rows 40 && exec \"$0\""))
        .arg(crate::util::dep_binary())
        .current_dir(dir.path())
        .env("NO_COLOR", "1");
    Repl::spawn(dir, command)
}

/// On a terminal narrower than the ops table, every line the live panel draws (under the
/// prompt, or under the line being typed) is cut to the terminal's width: a longer one would
/// wrap, and the redraw, which moves up a row a line, would leave copies of it on the screen.
#[test]
fn the_live_panel_fits_a_narrow_terminal() {
    let mut repl = repl_of_width(50);
    repl.type_line("A = work(3000, ones(2))");
    repl.type_line("B = A + 1");
    repl.type_line("C = A * 2");
    repl.expect("op ");
    repl.type_line("print C");
    let shown = repl.expect("[2. 2.]");
    // rexpect reads a character a byte.
    let bytes: Vec<u8> = shown.chars().map(|c| c as u8).collect();
    let shown = String::from_utf8_lossy(&bytes);
    // The line editor moves back to the prompt with escapes (stripped), not a new line: what
    // comes before a prompt is a row of its own, and the line being typed after it (with a
    // builtin's signature) is the line editor's to wrap.
    let too_wide: Vec<&str> = shown
        .split(['\n', '\r'])
        .filter_map(|line| line.split("dep> ").next())
        .filter(|line| line.chars().count() > 49)
        .collect();
    assert!(
        shown.contains("waits for A") && too_wide.is_empty(),
        "lines wider than the terminal: {too_wide:#?}\n--- the terminal:\n{shown}"
    );
    repl.prompt();
    assert_eq!(repl.quit().0, 0);
}

/// Ctrl-C while Ctrl-D waits for the pending ops to leave says what it does there: dep leaves
/// once the running ops finish (it said the prompt would come back).
#[test]
fn ctrl_c_while_leaving_says_dep_leaves_once_the_running_ops_finish() {
    let mut repl = Repl::start();
    repl.line("Q1 = work(2000, ones(2))");
    repl.prompt();
    repl.control('d');
    repl.expect("waiting for 1 pending op before leaving");
    repl.control('c');
    let said = repl.expect("Ctrl-C again leaves at once)");
    assert!(
        said.contains("dep leaves once the running ops finish"),
        "{said:?}"
    );
    let _ = repl.session.exp_eof();
}
