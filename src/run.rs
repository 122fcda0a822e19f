//! Batch mode: `dep run FILE` (with its view flags, see `views`) and `dep check FILE`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use signal_hook::consts::SIGINT;

use dep_interp::comm::{failed_on_every_rank, LocalRanks};
use dep_interp::driver::{Driver, Input, Interrupt, Listener};
use dep_interp::{ErrorKind, RunError, Session};

use crate::cli::RunArgs;
use crate::rank_views::RankViews;
use crate::ranks::{RankOutput, Ranks};
use crate::sim_ranks::OtherRanks;
use crate::views::ViewPlan;

/// Exit code of a runtime error.
const EXIT_RUNTIME: u8 = 1;
/// Exit code of a usage or parse error.
const EXIT_USAGE: u8 = 2;

/// Runs a script: pushes every statement, waits for all ops, reports failures. Under mpirun
/// this process is one rank of the job (see `ranks`): a failing rank ends the whole job.
pub(crate) fn run(args: &RunArgs) -> ExitCode {
    let ranks = match Ranks::connect(args) {
        Ok(ranks) => ranks,
        Err(message) => return usage_error(&message),
    };
    let code = run_rank(args, &ranks);
    ranks.end(code);
    ExitCode::from(code)
}

/// Runs the script as this process's rank; returns the exit code.
fn run_rank(args: &RunArgs, ranks: &Ranks) -> u8 {
    let mut config = match args.session_config() {
        Ok(config) => config,
        Err(message) => return rank_usage_code(ranks, &message),
    };
    if let Some(Err(message)) = ViewPlan::from_args(args).map(|plan| plan.check_paths(&args.file)) {
        return rank_usage_code(ranks, &message);
    }
    let core_share = ranks.share_cores(&mut config, args.threads_chosen());
    let (path, source) = match read_script(&args.file, &|report| say_once(ranks, report)) {
        Ok(read) => read,
        Err(code) => return code,
    };
    // A script with a syntax error (or a mistake its text alone shows: `early_errors`) runs
    // nothing; it gets no views either, so that a trace or a page of an earlier run is not
    // replaced by an empty one and no summary of nothing is printed.
    // The error is the same on every rank: no other simulated rank starts, and rank 0 says it.
    let parsed = dep_grammar::parse(&source);
    // Found once: the session is handed them (a fresh one, which defined no function before).
    let early = match parsed.is_ok() {
        true => dep_interp::early_errors(&parsed.program, &|_| false),
        false => Vec::new(),
    };
    let runs = parsed.is_ok() && early.is_empty();
    let others = match ranks {
        Ranks::Simulated(comms) if runs => Some(OtherRanks::start(
            comms,
            &config,
            &path,
            &source,
            args.all_ranks,
        )),
        _ => None,
    };
    let mut view_plan = ViewPlan::from_args(args).filter(|_| runs);
    let rank_views = RankViews::take(&mut view_plan, ranks, core_share);
    let mut others = others;
    let (code, own_run) = run_source_as_rank(
        args,
        ranks,
        config,
        (&path, &source, &parsed, &early),
        view_plan,
        rank_views.is_some(),
        &mut |failed| {
            if let (Ranks::Simulated(comms), Some(reason)) = (ranks, failed) {
                // The other ranks stop waiting for rank 0, and stop at their next statement.
                comms[0].end_job(reason.to_string());
            }
            // Rank 0's summary counts the memory every rank keeps at its end.
            if let Some(others) = &mut others {
                others.settle();
            }
        },
    );
    if let (Ranks::Simulated(comms), true) = (ranks, code != 0) {
        // The other ranks stop waiting for rank 0.
        comms[0].end_job("rank 0 failed".to_string());
    }
    match others {
        Some(others) => {
            let mut outcomes = others.wait();
            if let (Some(rank_views), Some(own_run)) = (&rank_views, own_run) {
                let runs = std::iter::once(own_run)
                    .chain(outcomes.iter_mut().filter_map(|outcome| outcome.run.take()))
                    .collect();
                rank_views.write(runs);
            }
            let code = OtherRanks::report(outcomes, code);
            if let (Ranks::Simulated(comms), 0) = (ranks, code) {
                warn_of_unreceived(&comms[0]);
            }
            code
        }
        None => {
            match (&rank_views, own_run) {
                (Some(rank_views), Some(own_run)) if code == 0 => {
                    // Every rank that succeeded sends its events to rank 0 (a failing one ends
                    // the job instead).
                    if let Some(runs) = ranks.gather_runs(own_run) {
                        rank_views.write(runs);
                    }
                }
                // A failing rank ends the job (MPI_Abort) once this returns: rank 0 writes
                // what it recorded itself, and every failing rank says what the views lack.
                (Some(rank_views), own_run) => {
                    let rank = ranks.rank();
                    let views = rank_views.asked_for();
                    match (own_run.filter(|_| rank == 0), views) {
                        (Some(own_run), views) => {
                            if let Some(views) = views {
                                say(&format!(
                                    "note: rank 0 failed: {views} hold rank 0's events only (its MPI_Abort ends the other ranks before they send theirs)"
                                ));
                            }
                            rank_views.write(vec![own_run]);
                        }
                        (None, Some(views)) => say(&format!(
                            "note (rank {rank}): rank {rank} failed: {views} get none of its events (its MPI_Abort ends the job before rank 0 gathers them; a failing rank 0 writes its own)"
                        )),
                        (None, None) => {}
                    }
                }
                (None, _) => {}
            }
            code
        }
    }
}

/// Warns of every message of the job's simulated ranks that no `recv` took: a lost message
/// is a script's mistake that nothing else shows (the sender's op ended when it was sent).
fn warn_of_unreceived(comm: &LocalRanks) {
    for (from, to, tag) in comm.unreceived() {
        eprintln!(
            "warning: rank {from}'s send number {} to rank {to} was never received: rank {to} \
             has no matching recv({from}, ...)",
            tag + 1
        );
    }
}

/// Runs `source` (named `path`, parsed as `parsed`, with the early errors `early`) in this process's session, as rank `ranks.rank()`, with the
/// views of `view_plan`; returns the exit code, and with `keep_run` what this rank recorded
/// (for the views of every rank). `before_views` is called once this rank's ops ended, before
/// its views are written, with why it failed, if it did (`rank 0 failed`).
fn run_source_as_rank(
    args: &RunArgs,
    ranks: &Ranks,
    config: dep_interp::SessionConfig,
    (path, source, parsed, early): (
        &str,
        &str,
        &dep_grammar::ParseOutput,
        &[dep_grammar::Diagnostic],
    ),
    view_plan: Option<ViewPlan>,
    keep_run: bool,
    before_views: &mut dyn FnMut(Option<&str>),
) -> (u8, Option<dep_views::ranks::RankRun>) {
    let mut session = Session::new(config);
    if let Some(comm) = ranks.communicator() {
        session.set_communicator(comm);
    }
    let driver = Driver::new(1);
    watch_interrupts(driver.interrupt());
    let watcher = view_plan
        .as_ref()
        .and_then(|plan| plan.start_watch(&session, path));
    let recorder = view_plan
        .as_ref()
        .and_then(|plan| plan.start_recording(&session, watcher.as_ref()));
    let stdout = std::io::stdout();
    let mut out = RankOutput::new(stdout.lock(), ranks.rank(), ranks.size(), args.all_ranks);
    let mark = driver.mark();
    let input = Input {
        parsed: Some(parsed),
        early_errors: Some(early),
        ..Input::new(path, source)
    };
    let outcome = match &watcher {
        Some(watcher) => {
            let mut panel_aware = watcher.output(&mut out);
            driver.run(&mut session, &input, mark, &mut Output(&mut panel_aware))
        }
        None => driver.run(&mut session, &input, mark, &mut Output(&mut out)),
    };
    // Every pushed op runs to the end, even after an error, so that nothing is left half done.
    let waited = driver.wait(&mut session, mark);
    let _ = out.flush();
    if let Some(watcher) = watcher {
        watcher.stop();
    }
    let rank = ranks.rank();
    let failed = if outcome.interrupted || waited.interrupted {
        Some(format!("rank {rank} was interrupted (Ctrl-C)"))
    } else if outcome.error.is_some() || waited.failures.is_some() {
        Some(format!("rank {rank} failed"))
    } else {
        None
    };
    before_views(failed.as_deref());
    // Views come before the error reports, so that the last line printed is the error.
    let (views_written, kept) = match (&view_plan, recorder) {
        (Some(plan), Some(recorder)) => plan.finish(&session, recorder, path),
        _ => (Ok(()), None),
    };
    let own_run = keep_run.then(|| crate::rank_views::recorded(&session, ranks.rank(), kept));
    let code = match (outcome.error, waited.failures) {
        // Every statement pushed, then Ctrl-C while the last ops ran: the run did not end as
        // written, whatever ran.
        (None, None) if waited.interrupted => {
            say(&ranks.label_error(
                "error: interrupted (Ctrl-C) while the script's last ops ran: those that had not \
                 started are cancelled (they wrote nothing), running ones finished",
            ));
            EXIT_RUNTIME
        }
        (None, None) if views_written.is_err() => EXIT_RUNTIME,
        (None, None) => 0,
        (Some(error), None) | (None, Some(error)) => report(ranks, &error),
        (Some(first), Some(later)) => {
            report(ranks, &first);
            report(ranks, &later)
        }
    };
    (code, own_run)
}

/// Where a script's output goes while it runs.
struct Output<'a>(&'a mut dyn Write);

impl Listener for Output<'_> {
    fn output(&mut self) -> &mut dyn Write {
        self.0
    }
}

/// Ctrl-C during `dep run`: the first stops the script at its next statement (or the `print`
/// or `wait` it blocks in), cancels the ops that have not started, lets running ops finish and
/// writes the views of what ran; a second one leaves at once with exit code 130, removing the
/// trace files it would leave cut off.
fn watch_interrupts(interrupt: Interrupt) {
    let mut signals = match signal_hook::iterator::Signals::new([SIGINT]) {
        Ok(signals) => signals,
        Err(error) => {
            eprintln!("dep: Ctrl-C will not interrupt the run: {error}");
            return;
        }
    };
    let _ = std::thread::Builder::new()
        .name("dep-interrupts".to_string())
        .spawn(move || {
            for _ in signals.forever() {
                if interrupt.interrupt() >= 2 {
                    crate::views::erase_live_panel();
                    let removed = crate::trace_files::remove_unfinished();
                    if !removed.is_empty() {
                        let names: Vec<String> = removed
                            .iter()
                            .map(|path| path.display().to_string())
                            .collect();
                        eprintln!(
                            "dep: left at once (a second Ctrl-C): removed the unfinished trace {}",
                            names.join(", ")
                        );
                    }
                    std::process::exit(130);
                }
            }
        });
}

/// Parses a script and reports every syntax error.
pub(crate) fn check(file: &Path) -> ExitCode {
    let path = file.display().to_string();
    let source = match read_source(file) {
        Ok(source) => source,
        Err(ReadError::Io(message)) => return usage_error(&message),
        // Text that is not UTF-8 is an error in the file, counted as its syntax errors are
        // (the rest of the file was not read).
        Err(ReadError::NotText(rendered)) => {
            eprint!("{rendered}");
            eprintln!(
                "dep: 1 syntax error in {path}: it is not UTF-8 text, so the rest was not read"
            );
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let parsed = dep_grammar::parse(&source);
    // With no syntax error, the mistakes `dep run` would report before running anything.
    let early = match parsed.diagnostics.is_empty() {
        true => dep_interp::early_errors(&parsed.program, &|_| false),
        false => Vec::new(),
    };
    if parsed.diagnostics.is_empty() && early.is_empty() {
        println!(
            "{path}: ok ({})",
            dep_views::text::count(parsed.program.statements.len(), "statement")
        );
        return ExitCode::SUCCESS;
    }
    let diagnostics = [&parsed.diagnostics[..], &early[..]].concat();
    eprint!(
        "{}",
        dep_grammar::render_diagnostics(&diagnostics, &path, &source)
    );
    let (n_errors, stopped) = match early.len() {
        0 => parsed.n_errors(),
        n => (n, false),
    };
    let plural = if n_errors == 1 { "" } else { "s" };
    match stopped {
        true => eprintln!(
            "dep: more than {n_errors} syntax errors in {path}: the first {n_errors} are reported"
        ),
        false => eprintln!("dep: {n_errors} syntax error{plural} in {path}"),
    }
    ExitCode::from(EXIT_USAGE)
}

/// Reads the script `file`: its path as reports name it and its text, or the exit code of a
/// usage error, which `say` writes (`dep: cannot read ...`, or where the text is not UTF-8).
fn read_script(file: &Path, say: &dyn Fn(&str)) -> Result<(String, String), u8> {
    let path = file.display().to_string();
    match read_source(file) {
        Ok(source) => Ok((path, source)),
        Err(ReadError::Io(message)) => {
            say(&format!("dep: {message}\n"));
            Err(EXIT_USAGE)
        }
        Err(ReadError::NotText(rendered)) => {
            say(&rendered);
            Err(EXIT_USAGE)
        }
    }
}

/// Writes `report`, a usage error that every rank of an MPI job meets alike (each has the same
/// arguments): rank 0 writes it, then ends the job; another rank waits for that and writes it
/// only should rank 0 not end the job in time (a file only its machine lacks), naming its rank.
/// Every rank wrote it, and two ranks aborting at once made Open MPI print errors of its own.
fn say_once(ranks: &Ranks, report: &str) {
    let rank = ranks.rank();
    if rank == 0 {
        say(report);
        return;
    }
    ranks.wait_for_rank_0_to_end_the_job();
    let labelled = match report.strip_prefix("dep: ") {
        Some(rest) => format!("dep (rank {rank}): {rest}"),
        None => ranks.label_error(report),
    };
    say(&labelled);
}

/// Writes `line`, and a newline if it has none, to stderr in one write. Under mpirun Open MPI
/// forwards a rank's stderr in the pieces it was written in, and its own message of an abort
/// can fall between two of them (a rank's note was cut after `note (rank `, `eprintln!`
/// writing each piece of its format apart).
fn say(line: &str) {
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// The exit code of the usage error `message`, written as [`say_once`] does.
fn rank_usage_code(ranks: &Ranks, message: &str) -> u8 {
    say_once(ranks, &format!("dep: {message}\n"));
    EXIT_USAGE
}

/// Why a script could not be read.
pub(crate) enum ReadError {
    /// The file could not be read: the message says which and why.
    Io(String),
    /// The file is not UTF-8 text: the report names the first bad byte at its `file:line:col`.
    NotText(String),
}

/// Reads the script `file` as text (a byte order mark at its start is kept: the parser skips
/// it, as editors do).
pub(crate) fn read_source(file: &Path) -> Result<String, ReadError> {
    let path = file.display().to_string();
    let bytes = std::fs::read(file)
        .map_err(|error| ReadError::Io(format!("cannot read {path}: {error}")))?;
    dep_grammar::decode_source(bytes).map_err(|error| ReadError::NotText(error.render(&path)))
}

fn report(ranks: &Ranks, error: &RunError) -> u8 {
    match error.kind {
        // Every rank parsed the same text: said once, by rank 0, as a single run says it (another
        // rank that ended the job first cut it short).
        ErrorKind::Parse => {
            say_once(ranks, &format!("{error}\n"));
            EXIT_USAGE
        }
        // Every rank saw the same failure: said once, by rank 0, whose abort ends this rank;
        // said here too should rank 0 not end the job in time.
        _ if ranks.rank() != 0 && failed_on_every_rank(&error.to_string()) => {
            ranks.wait_for_rank_0_to_end_the_job();
            say(&ranks.label_error(&error.to_string()));
            EXIT_RUNTIME
        }
        _ => {
            say(&ranks.label_error(&error.to_string()));
            EXIT_RUNTIME
        }
    }
}

fn usage_error(message: &str) -> ExitCode {
    ExitCode::from(usage_code(message))
}

fn usage_code(message: &str) -> u8 {
    eprintln!("dep: {message}");
    EXIT_USAGE
}
