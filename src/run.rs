//! Batch mode: `dep run FILE` (with its view flags, see `views`) and `dep check FILE`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use dep_interp::{ErrorKind, RunError, Session};

use crate::cli::RunArgs;
use crate::views::ViewPlan;

/// Exit code of a runtime error.
const EXIT_RUNTIME: u8 = 1;
/// Exit code of a usage or parse error.
const EXIT_USAGE: u8 = 2;

/// Runs a script: pushes every statement, waits for all ops, reports failures.
pub(crate) fn run(args: &RunArgs) -> ExitCode {
    let config = match args.session_config() {
        Ok(config) => config,
        Err(message) => return usage_error(&message),
    };
    let (path, source) = match read_script(&args.file) {
        Ok(read) => read,
        Err(code) => return code,
    };
    let view_plan = ViewPlan::from_args(args);
    let mut session = Session::new(config);
    let watcher = view_plan
        .as_ref()
        .and_then(|plan| plan.start_watch(&session));
    let recorder = view_plan
        .as_ref()
        .and_then(|plan| plan.start_recording(&session));
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let pushed = match &watcher {
        Some(watcher) => session.run_source(&path, &source, &mut watcher.output(&mut out)),
        None => session.run_source(&path, &source, &mut out),
    };
    // Every pushed op runs to the end, even after an error, so that nothing is left half done.
    let finished = session.finish();
    let _ = out.flush();
    if let Some(watcher) = watcher {
        watcher.stop();
    }
    // Views come before the error reports, so that the last line printed is the error.
    let views_written = match (&view_plan, recorder) {
        (Some(plan), Some(recorder)) => plan.finish(&session, recorder, &path),
        _ => Ok(()),
    };
    match (pushed, finished) {
        (Ok(()), Ok(())) if views_written.is_err() => ExitCode::from(EXIT_RUNTIME),
        (Ok(()), Ok(())) => ExitCode::SUCCESS,
        (Err(error), Ok(())) | (Ok(()), Err(error)) => report(&error),
        (Err(first), Err(later)) => {
            report(&first);
            report(&later)
        }
    }
}

/// Parses a script and reports every syntax error.
pub(crate) fn check(file: &Path) -> ExitCode {
    let (path, source) = match read_script(file) {
        Ok(read) => read,
        Err(code) => return code,
    };
    let parsed = dep_grammar::parse(&source);
    if parsed.diagnostics.is_empty() {
        println!(
            "{path}: ok ({} statements)",
            parsed.program.statements.len()
        );
        return ExitCode::SUCCESS;
    }
    eprint!(
        "{}",
        dep_grammar::render_diagnostics(&parsed.diagnostics, &path, &source)
    );
    eprintln!(
        "dep: {} syntax error{} in {path}",
        parsed.diagnostics.len(),
        if parsed.diagnostics.len() == 1 {
            ""
        } else {
            "s"
        }
    );
    ExitCode::from(EXIT_USAGE)
}

fn read_script(file: &Path) -> Result<(String, String), ExitCode> {
    let path = file.display().to_string();
    match std::fs::read_to_string(file) {
        Ok(source) => Ok((path, source)),
        Err(error) => Err(usage_error(&format!("cannot read {path}: {error}"))),
    }
}

fn report(error: &RunError) -> ExitCode {
    eprintln!("{error}");
    match error.kind {
        ErrorKind::Parse => ExitCode::from(EXIT_USAGE),
        _ => ExitCode::from(EXIT_RUNTIME),
    }
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("dep: {message}");
    ExitCode::from(EXIT_USAGE)
}
