//! Runs one fuzzed input the way a user's script runs, and says what went wrong: a panic, a
//! hang, or an error report without a place.
//!
//! The input is decoded as `dep run` decodes a file, parsed, and run (on the naive engine
//! unless the case says otherwise) with a step budget: the session's interrupt check says
//! "interrupted" after at most [`STATEMENT_BUDGET`] statements (loop and function bodies
//! included), so every program ends, some interrupted mid-way as by Ctrl-C; one that has not
//! ended after [`TIME_LIMIT`] hangs somewhere the check is never asked. After the run, every
//! variable is inspected as the REPL's `:vars` and the kernel's inspector do. The process's data
//! size is capped (see [`cap_memory`]), so that a program that grows its tensors meets an
//! allocation error, not the machine's OOM killer.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Once};
use std::time::Duration;

use dep_engine::Policy;
use dep_interp::{Report, Session, SessionConfig};

/// The name programs run under, which every report must name.
pub const PATH: &str = "fuzz.dep";

/// The statements one program may run before it is interrupted.
pub const STATEMENT_BUDGET: usize = 2000;

/// How long one program may take before it counts as hung.
pub const TIME_LIMIT: Duration = Duration::from_secs(20);

/// The process's cap on data (heap) memory.
const MEMORY_CAP_BYTES: u64 = 4 << 30;

/// Caps the data memory of this test process (once), so that a runaway program fails to
/// allocate instead of exhausting the machine.
pub fn cap_memory() {
    static CAP: Once = Once::new();
    CAP.call_once(|| {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_DATA) {
            let cap = MEMORY_CAP_BYTES.min(hard);
            if cap < soft {
                let _ = setrlimit(Resource::RLIMIT_DATA, cap, hard);
            }
        }
    });
}

/// How one case runs.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// The engine policy (`Naive` for most cases).
    pub policy: Policy,
    /// Whether the session keeps an event log, as views and the kernel's display need.
    pub observe: bool,
    /// The statements the program may run before it is interrupted.
    pub budget: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            policy: Policy::Naive,
            observe: false,
            budget: STATEMENT_BUDGET,
        }
    }
}

/// Checks the input `cells` (run one after the other in one session, as a notebook's cells
/// or a REPL's inputs are), with `{DIR}` replaced by `dir` (where programs may write files).
/// Returns what went wrong, if anything.
pub fn check_cells(cells: &[Vec<u8>], dir: &Path, settings: Settings) -> Result<(), String> {
    let mut texts = Vec::new();
    for cell in cells {
        match dep_grammar::decode_source(cell.clone()) {
            Ok(text) => texts.push(text.replace("{DIR}", &dir.display().to_string())),
            Err(not_text) => {
                let rendered = not_text.render(PATH);
                if !rendered.contains(&format!("--> {PATH}:")) {
                    return Err(format!("a decoding error without a place:\n{rendered}"));
                }
            }
        }
    }
    check_texts(texts, settings)
}

/// Runs `cells` on a thread of their own (as the kernel runs cells), waits at most
/// [`TIME_LIMIT`], and checks every report.
fn check_texts(cells: Vec<String>, settings: Settings) -> Result<(), String> {
    cap_memory();
    let (sender, receiver) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .name("fuzz-case".to_string())
        .spawn(move || {
            let _ = sender.send(run(&cells, settings));
        })
        .map_err(|error| format!("cannot start a thread: {error}"))?;
    match receiver.recv_timeout(TIME_LIMIT) {
        Ok(reports) => {
            let _ = worker.join();
            check_reports(&reports)
        }
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
            "hung: no result after {TIME_LIMIT:?} (budget {STATEMENT_BUDGET} statements)"
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(payload) => Err(format!("panicked: {}", panic_text(payload.as_ref()))),
            Ok(()) => Err("the program's thread ended without a result".to_string()),
        },
    }
}

/// Parses and runs `cells` in one session within the budget, then inspects every variable;
/// returns every report.
fn run(cells: &[String], settings: Settings) -> Vec<Report> {
    let mut session = Session::new(SessionConfig {
        policy: settings.policy,
        threads: 2,
        observe: settings.observe,
        show_expression_values: true,
        ..SessionConfig::default()
    });
    let steps = Arc::new(AtomicUsize::new(0));
    let budget = settings.budget;
    session.set_interrupt_check(Some(Box::new(move || {
        steps.fetch_add(1, Ordering::Relaxed) >= budget
    })));
    let mut printed = Vec::new();
    let mut reports = Vec::new();
    for cell in cells {
        if let Err(error) = session.run_source(PATH, cell, &mut printed) {
            reports.extend(error.reports);
        }
    }
    if let Err(error) = session.finish() {
        reports.extend(error.reports);
    }
    for variable in session.variables() {
        let _ = session.value(&variable.name);
    }
    for graph in session.graph_names() {
        let _ = (session.graph_report(&graph), session.graph_dot(&graph));
    }
    reports
}

/// Every report must name its place (`fuzz.dep:line:col`) and none may be a panic or an
/// internal error.
fn check_reports(reports: &[Report]) -> Result<(), String> {
    for report in reports {
        let placed = report.line > 0
            && report
                .rendered
                .contains(&format!("--> {PATH}:{}:", report.line));
        if !placed {
            return Err(format!("an error without a place:\n{}", report.rendered));
        }
        for bad in ["panicked", "internal error"] {
            if report.message.contains(bad) {
                return Err(format!("{bad}:\n{}", report.rendered));
            }
        }
    }
    Ok(())
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".to_string())
}
