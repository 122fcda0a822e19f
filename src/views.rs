//! The binary's side of the views: what `dep run`'s view flags write and print, the live
//! `--watch` panel, and `dep replay`, the terminal stepper. The views themselves come from
//! `dep-views`; only this module knows the terminal (STYLE.md: "only the binary knows the
//! terminal").
//!
//! Views go to stderr or to files, never to stdout, which stays the script's own output.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dep_engine as engine;
use dep_interp::Session;
use dep_views as views;
use engine::lock;
use views::live::{LiveFold, LiveSource, TextLayout};

use crate::cli::{ReplayArgs, RunArgs};
use crate::trace_files::{read_some_then_gather, TraceThreads, Traces, READ_PERIOD};

/// How often the live panel redraws: often enough to follow, rarely enough to cost nothing
/// (issue 4: "throttle redraws to ~10 per second; rendering happens off the workers").
const WATCH_PERIOD: Duration = Duration::from_millis(100);
/// How often the plain progress line is printed when stderr is not a terminal.
const PROGRESS_PERIOD: Duration = Duration::from_secs(1);

/// The views a run asked for, validated from [`RunArgs`].
#[derive(Debug)]
pub(crate) struct ViewPlan {
    traces: Vec<PathBuf>,
    timeline: Option<PathBuf>,
    arrows: bool,
    dot: Option<PathBuf>,
    replay: Option<PathBuf>,
    /// How many of the run's last events the `--replay` page holds (0: all).
    replay_events: usize,
    watch: bool,
    /// Keep every event and hand them back from [`ViewPlan::finish`] (a rank of a job
    /// of several, see `rank_views`).
    keep_events: bool,
    /// For rank 0 of a job of this many simulated ranks (threads of this process): fold the
    /// summary from the events put in virtual-time order at the end, not as they arrived (see
    /// `dep_views::ranks::order_simulated`), so that two runs print the same summary; and say
    /// that the memory line counts every rank's tensors, which this process shares.
    simulated_ranks: Option<usize>,
}

impl ViewPlan {
    /// The plan, or `None` when no view flag was given (the session then keeps no event log).
    pub(crate) fn from_args(args: &RunArgs) -> Option<ViewPlan> {
        args.wants_views().then(|| ViewPlan {
            traces: args.trace.clone(),
            timeline: args.timeline.clone(),
            arrows: args.arrows,
            dot: args.dot.clone(),
            replay: args.replay.clone(),
            replay_events: args.replay_events,
            watch: args.watch,
            keep_events: false,
            simulated_ranks: None,
        })
    }

    /// Takes out the views that a job of several ranks writes merged (the traces, the timeline
    /// and its arrows flag), and keeps every event for them. In a job of `simulated_ranks`
    /// (simulated ranks, in this process), the summary is folded from the events in
    /// virtual-time order and its memory line said to count every rank.
    pub(crate) fn take_merged_views(
        &mut self,
        simulated_ranks: Option<usize>,
    ) -> (Vec<PathBuf>, Option<PathBuf>, bool) {
        self.keep_events = true;
        self.simulated_ranks = simulated_ranks;
        (
            std::mem::take(&mut self.traces),
            self.timeline.take(),
            self.arrows,
        )
    }

    /// Starts the live panel of the run of `path` when `--watch` asked for it. Its fold is fed
    /// by the recorder ([`ViewPlan::start_recording`]), the log's reader.
    pub(crate) fn start_watch(&self, session: &Session, path: &str) -> Option<Watcher> {
        if !self.watch {
            return None;
        }
        Some(Watcher::start(session.live(path)?))
    }

    /// Starts folding the session's event log while the run goes: the summary, the trace
    /// (written as the events arrive), every event when a view needs the whole run, and the
    /// `--watch` panel's live fold when `watcher` is given: the recorder is the log's reader,
    /// and feeds them all from what it reads once (but a JSON trace's event log, transcribed
    /// by a reader of its own: see `trace_files`). `None` when the session keeps no event log.
    pub(crate) fn start_recording(
        &self,
        session: &Session,
        watcher: Option<&Watcher>,
    ) -> Option<Recorder> {
        let log = session.event_log()?.clone();
        let first = log.first_seq();
        let traces = Traces::open(&self.traces, &log, first, TraceThreads::for_this_machine());
        Some(Recorder::start(
            log,
            first,
            traces,
            self.events_kept(),
            watcher.map(|watcher| watcher.fold.clone()),
        ))
    }

    /// Checks, before the run, that every file it is to write can be written, so that a long
    /// run does not end with its views lost (`--trace /missing/t.json`): a folder that does not
    /// exist, is not a folder or refuses a new file, or a path that is a folder, is a usage error.
    /// So is a file whose name says another format than the view's, one that two views name,
    /// and `script` itself: a view would overwrite it (`--replay run.dep`).
    pub(crate) fn check_paths(&self, script: &Path) -> Result<(), String> {
        let files: Vec<(&str, &PathBuf)> = self
            .traces
            .iter()
            .map(|path| ("--trace", path))
            .chain(self.timeline.iter().map(|path| ("--timeline", path)))
            .chain(self.dot.iter().map(|path| ("--dot", path)))
            .chain(self.replay.iter().map(|path| ("--replay", path)))
            .collect();
        for &(flag, path) in &files {
            let cannot = |why: String| format!("{flag}: cannot write {}: {why}", path.display());
            if path.is_dir() {
                return Err(cannot("it is a folder".to_string()));
            }
            // `t.json/` reads as the file `t.json` everywhere but where it is opened.
            if path
                .as_os_str()
                .to_string_lossy()
                .ends_with(std::path::is_separator)
            {
                return Err(cannot(
                    "a file's name does not end with a slash".to_string(),
                ));
            }
            let folder = match path.parent() {
                Some(folder) if !folder.as_os_str().is_empty() => folder,
                _ => Path::new("."),
            };
            if !folder.is_dir() {
                return Err(cannot(format!("no folder {}", folder.display())));
            }
            // A file made and removed at once: what the run will do there, tried first.
            probe_folder(folder).map_err(|error| cannot(error.to_string()))?;
        }
        // The format a file's name says, as the REPL's `:trace` and `:timeline` read it.
        for path in &self.traces {
            dep_interp::commands::trace_format(path)
                .map_err(|error| format!("--trace: {error}"))?;
        }
        // The extensions each view's file may have, and what it is written as.
        let formats = [
            (
                &self.timeline,
                "--timeline",
                &["svg"][..],
                "a FILE.svg: the timeline is written as SVG",
            ),
            (
                &self.dot,
                "--dot",
                &["dot", "svg"][..],
                "a FILE.dot or FILE.svg: the DAG is written as Graphviz's DOT, or drawn as SVG",
            ),
            (
                &self.replay,
                "--replay",
                &["html", "htm"][..],
                "a FILE.html: the player is an HTML page",
            ),
        ];
        for (path, flag, extensions, what) in formats {
            let Some(path) = path else {
                continue;
            };
            let extension = path.extension().and_then(|extension| extension.to_str());
            if !extension.is_some_and(|extension| extensions.contains(&extension)) {
                return Err(format!("{flag}: `{}` is not {what}", path.display()));
            }
        }
        let script = std::fs::canonicalize(script).ok();
        let mut resolved: Vec<(&str, PathBuf)> = Vec::new();
        for &(flag, path) in &files {
            let here = resolve_output(path);
            if script.as_ref() == Some(&here) {
                return Err(format!(
                    "{flag}: `{}` is the script being run: the view would overwrite it",
                    path.display()
                ));
            }
            if let Some((other, _)) = resolved.iter().find(|(_, there)| *there == here) {
                return Err(format!(
                    "{other} and {flag} both name `{}`: each view needs a file of its own",
                    path.display()
                ));
            }
            resolved.push((flag, here));
        }
        Ok(())
    }

    /// What the recorder keeps of the events: every one for a job's merged views and a replay
    /// page of every event; else the op records for the timeline and the DAG, which draw
    /// nothing else, and the last events for a replay page.
    fn events_kept(&self) -> Keep {
        let every = self.keep_events || (self.replay.is_some() && self.replay_events == 0);
        Keep {
            every,
            records: !every && (self.timeline.is_some() || self.dot.is_some()),
            last: (!every && self.replay.is_some()).then_some(self.replay_events),
        }
    }

    /// Once the run is over: finishes the trace, writes the other requested files and prints
    /// the summary to stderr. Returns the problems met (a file that could not be written),
    /// already printed, and every event of the run when the plan keeps them
    /// ([`ViewPlan::take_merged_views`]).
    pub(crate) fn finish(
        &self,
        session: &Session,
        recorder: Recorder,
        script_path: &str,
    ) -> (Result<(), ()>, Option<Vec<engine::Event>>) {
        let Some(mut recorded) = recorder.stop(session.worker_names()) else {
            eprintln!("dep: the views stopped with a panic; the run itself is unaffected");
            return (Err(()), None);
        };
        let kept = match (&recorded.events, self.keep_events) {
            (Some(events), true) => Some(events.clone()),
            _ => None,
        };
        let result = self.write_recorded(session, &mut recorded, script_path);
        (result, kept)
    }

    /// Writes what the recorder made: the files and the summary.
    fn write_recorded(
        &self,
        session: &Session,
        recorded: &mut Recorded,
        script_path: &str,
    ) -> Result<(), ()> {
        let mut ok = true;
        for (path, written) in &recorded.traces {
            if let Err(error) = written {
                eprintln!("dep: --trace: cannot write {}: {error}", path.display());
                ok = false;
            }
        }
        if let (Some(events), Some(_)) = (&recorded.events, self.simulated_ranks) {
            let mut events = events.clone();
            views::ranks::order_simulated(&mut events);
            recorded.summary =
                views::Summary::of(&views::Replay::new(events, session.worker_names()));
        }
        if let (Some(path), Some(cut)) = (&self.replay, recorded.last_events.take()) {
            let replay = views::Replay::new(cut.events, session.worker_names());
            ok &= self.write_player(path, &replay, &cut.prologue, script_path);
        }
        if let Some(mut records) = recorded.records.take() {
            records.set_worker_names(session.worker_names());
            ok &= self.write_drawings(session, &records);
        }
        let drawn = self.timeline.is_some() || self.dot.is_some() || self.replay.is_some();
        if let Some(events) = recorded.events.take().filter(|_| drawn) {
            let replay = views::Replay::new(events, session.worker_names());
            ok &= self.write_drawings(session, &replay);
            if let Some(path) = &self.replay {
                let n_events = replay.events().len();
                if self.replay_events == 0 || n_events <= self.replay_events {
                    let prologue = views::Prologue::default();
                    ok &= self.write_player(path, &replay, &prologue, script_path);
                } else {
                    let cut =
                        views::LastEvents::cut(replay.events().iter().cloned(), self.replay_events);
                    let replay = views::Replay::new(cut.events, session.worker_names());
                    ok &= self.write_player(path, &replay, &cut.prologue, script_path);
                }
            }
        }
        let style = stderr_style();
        eprint!("{}", views::text::summary(&recorded.summary, &style));
        // The host's tensor storage: a real GPU's tensors are the GPU layer's, not counted here;
        // a simulated device's live in host memory, and are. Counted once the engine let go of
        // what it kept of the statements (their constants), as an idle naive engine holds none.
        session.settle();
        let memory = dep_interp::tensor::cpu_memory();
        let simulated = session.config().policy == engine::Policy::Sim;
        let whose = match (self.simulated_ranks, simulated) {
            (Some(n), _) => format!(
                " (the {n} simulated ranks together, with their simulated devices' tensors)"
            ),
            (None, true) => " (with the simulated devices' tensors)".to_string(),
            (None, false) => String::new(),
        };
        // The free buffers graphs' pools keep for their later runs are no variable's, and how
        // many depends on the schedule: each graph's report below tells them.
        let in_use = memory
            .current_bytes
            .saturating_sub(session.graph_pooled_bytes());
        eprintln!(
            "  memory{whose}: cpu peak {}, {} in use at the end, {}",
            dep_interp::tensor::format_bytes(memory.peak_bytes),
            dep_interp::tensor::format_bytes(in_use),
            views::text::count(memory.allocations, "allocation")
        );
        for name in session.graph_names() {
            if let Some(report) = session.graph_report(&name) {
                eprint!("  {}", report.replace('\n', "\n  ").trim_end());
                eprintln!();
            }
        }
        if ok {
            Ok(())
        } else {
            Err(())
        }
    }

    /// Writes the `--timeline` and the `--dot` of `replay`, when asked for; whether both were
    /// written.
    fn write_drawings(&self, session: &Session, replay: &views::Replay) -> bool {
        let mut ok = true;
        if let Some(path) = &self.timeline {
            let options = views::svg::TimelineOptions {
                arrows: self.arrows,
                simulated: session.config().policy == engine::Policy::Sim,
                ..views::svg::TimelineOptions::default()
            };
            ok &= write_file(path, "--timeline", views::svg::timeline(replay, &options));
        }
        if let Some(path) = &self.dot {
            ok &= write_dot(path, replay);
        }
        ok
    }

    /// Writes the `--replay` page of `replay` (the run's events, or its last ones after the
    /// `prologue` that rebuilds the state where they begin).
    fn write_player(
        &self,
        path: &Path,
        replay: &views::Replay,
        prologue: &views::Prologue,
        script_path: &str,
    ) -> bool {
        let title = format!("dep replay of {script_path}");
        write_file(
            path,
            "--replay",
            views::html::player(replay, &title, prologue),
        )
    }
}

/// What a [`Recorder`] keeps of the run's events, besides the summary and the traces it folds
/// and writes as they come.
#[derive(Clone, Copy, Debug, Default)]
struct Keep {
    /// Every event.
    every: bool,
    /// Every op's record (a replay that keeps no events): all that a timeline and a DAG draw.
    records: bool,
    /// The last this many events, with what rebuilds the state before them.
    last: Option<usize>,
}

/// What a [`Recorder`] made of the run.
struct Recorded {
    summary: views::Summary,
    /// Each trace's path and how writing it went.
    traces: Vec<(PathBuf, std::io::Result<()>)>,
    /// Every event, when a view needs the whole run.
    events: Option<Vec<engine::Event>>,
    /// Every op's record, when only drawings of the whole run need them.
    records: Option<views::Replay>,
    /// The last events, when only a replay page needs them.
    last_events: Option<views::EventsCut>,
}

/// A thread that reads the event log as the run goes and forgets what it read: it folds the
/// summary, streams the trace, feeds the `--watch` panel's live fold, and keeps the events only
/// when a view needs them all.
pub(crate) struct Recorder {
    stop: mpsc::Sender<Vec<String>>,
    thread: JoinHandle<Recorded>,
}

impl Recorder {
    fn start(
        log: Arc<engine::EventLog>,
        first: u64,
        (mut open, failed): (Traces, Vec<(PathBuf, std::io::Error)>),
        keep: Keep,
        live: Option<Arc<Mutex<LiveFold>>>,
    ) -> Recorder {
        let (stop, stopped) = mpsc::channel::<Vec<String>>();
        let thread = std::thread::Builder::new()
            .name("dep-record".to_string())
            .spawn(move || {
                let mut fold = views::fold::RunFold::new();
                let mut events: Option<Vec<engine::Event>> = keep.every.then(Vec::new);
                let mut records = keep.records.then(|| views::Replay::ops_only(Vec::new()));
                let mut last_events = keep.last.map(views::LastEvents::keeping);
                let mut next = first;
                let mut worker_names = None;
                let mut fed: Vec<engine::Event> = Vec::new();
                // The fold passes grants over; only the live panel, the kept events and a JSON
                // trace's event log show them (unless that log has a reader of its own). When
                // the fold is the only reader, it takes an op run at once whole.
                let only_the_fold = live.is_none()
                    && events.is_none()
                    && records.is_none()
                    && last_events.is_none();
                let grants = !only_the_fold || open.wants_events();
                loop {
                    let mut visit = |event: &engine::Event| {
                        fold.push(event, &mut open);
                        if live.is_some() {
                            fed.push(event.clone());
                        }
                        if let Some(kept) = &mut events {
                            kept.push(event.clone());
                        }
                        if let Some(records) = &mut records {
                            records.push_event(event.clone());
                        }
                        if let Some(last) = &mut last_events {
                            last.push(event.clone());
                        }
                    };
                    let after = if only_the_fold {
                        // An op run at once comes whole, to the fold and its traces.
                        log.read_ops_since(next, grants, |logged| {
                            fold.push_logged(logged, &mut open);
                        })
                    } else {
                        log.read_since(next, &mut visit)
                    };
                    // What a trace's own reader of the log has not read yet is kept for it.
                    log.forget_before(after.min(open.read_up_to()));
                    if let Some(live) = &live {
                        // Locked once a batch, and not while the log is read.
                        feed(&mut lock(live), fed.drain(..), after);
                    }
                    // Events were read (perhaps only grants, passed over).
                    let read_some = read_some_then_gather(after - next);
                    next = after;
                    if read_some {
                        continue;
                    }
                    // Everything up to the stop is read once a look after it finds nothing.
                    if worker_names.is_some() && next == log.next_seq() {
                        break;
                    }
                    match stopped.recv_timeout(READ_PERIOD) {
                        Ok(names) => worker_names = Some(names),
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => {
                            worker_names.get_or_insert_with(Vec::new);
                        }
                    }
                }
                let summary = fold.finish(&worker_names.unwrap_or_default(), &mut open);
                let mut traces = open.finish();
                traces.extend(failed.into_iter().map(|(path, error)| (path, Err(error))));
                Recorded {
                    summary,
                    traces,
                    events,
                    records,
                    last_events: last_events.map(views::LastEvents::finish),
                }
            })
            .expect("the OS refused to start the recording thread");
        Recorder { stop, thread }
    }

    /// Tells the recorder the run is over (every event is in the log), with the engine's worker
    /// names, and waits for what it made; `None` if it panicked.
    fn stop(self, worker_names: Vec<String>) -> Option<Recorded> {
        let _ = self.stop.send(worker_names);
        self.thread.join().ok()
    }
}

/// Feeds the events a streaming reader read to a live fold, in order.
fn feed(fold: &mut LiveFold, events: impl IntoIterator<Item = engine::Event>, next_seq: u64) {
    for event in events {
        fold.push(event);
    }
    fold.fed_up_to(next_seq);
}

/// Makes a new file in `folder` and removes it at once: whether a view can be written there.
/// The file is its own (`.dep-check-PID-N`, a number not taken), so an error is the system's
/// about the folder, naming no file of ours.
/// Where an output file will be, whether it exists or not: its folder's canonical path (the
/// folder exists, [`ViewPlan::check_paths`] checked) joined with its name, so that two names of
/// one file (`t.json`, `./t.json`, `../here/t.json`) compare equal.
fn resolve_output(path: &Path) -> PathBuf {
    let folder = match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    };
    let folder = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
    match path.file_name() {
        Some(name) => folder.join(name),
        None => folder,
    }
}

fn probe_folder(folder: &Path) -> std::io::Result<()> {
    let mut n = 0;
    loop {
        let probe = folder.join(format!(".dep-check-{}-{n}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
        {
            Ok(_) => return std::fs::remove_file(&probe),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
            Err(error) => return Err(error),
        }
    }
}

/// Writes a view's file for `flag`; says why not on stderr, and whether it was written.
pub(crate) fn write_file(path: &Path, flag: &str, contents: impl AsRef<[u8]>) -> bool {
    match crate::fresh_file::write(path, contents.as_ref()) {
        Ok(()) => true,
        Err(error) => {
            eprintln!("dep: {flag}: cannot write {}: {error}", path.display());
            false
        }
    }
}

/// Writes the DOT of every op to `path` as it is made (a long run's is hundreds of megabytes);
/// says why not on stderr, and whether it was written.
fn write_whole_dag(path: &Path, replay: &views::Replay) -> bool {
    let written = crate::fresh_file::create(path).and_then(|file| {
        let mut out = std::io::BufWriter::new(file);
        views::dot::write_dag(replay, &mut out)?;
        std::io::Write::flush(&mut out)
    });
    match written {
        Ok(()) => true,
        Err(error) => {
            eprintln!("dep: --dot: cannot write {}: {error}", path.display());
            false
        }
    }
}

/// Writes the DAG as DOT, every op; or as SVG through Graphviz when the file ends in `.svg`,
/// its last ops (saying so when some are left out); without Graphviz, or when its layout fails,
/// writes the DOT beside it and says so.
fn write_dot(path: &Path, replay: &views::Replay) -> bool {
    if path.extension().and_then(|ext| ext.to_str()) != Some("svg") {
        return write_whole_dag(path, replay);
    }
    let n_ops = replay.ops().len();
    if n_ops > views::dot::SVG_DAG_OPS {
        eprintln!(
            "dep: --dot: {} draws the last {} of {n_ops} ops (Graphviz takes minutes to lay out more); a --dot FILE.dot gets every op",
            path.display(),
            views::dot::SVG_DAG_OPS
        );
    }
    match views::dot::dag_svg(replay) {
        Ok(svg) => write_file(path, "--dot", &svg),
        Err(error) => {
            let fallback = path.with_extension("dot");
            eprintln!(
                "dep: --dot: {error}; writing the DOT of every op to {} instead",
                fallback.display()
            );
            write_whole_dag(&fallback, replay);
            false
        }
    }
}

/// Text style for stderr: colour only on a terminal (and without `NO_COLOR`).
fn stderr_style() -> views::TextStyle {
    if std::io::stderr().is_terminal() {
        views::TextStyle::terminal(terminal_size().0)
    } else {
        views::TextStyle::plain(100)
    }
}

/// Columns and rows of the terminal, or 100×40 when unknown (a pseudo-terminal may say 0×0).
fn terminal_size() -> (usize, usize) {
    match crossterm::terminal::size() {
        Ok((cols, rows)) if cols > 0 && rows > 0 => (cols as usize, rows as usize),
        _ => (100, 40),
    }
}

/// What the watcher thread reacts to: its loop matches on this, and on nothing else.
enum WatchEvent {
    /// Time to redraw.
    Tick,
    /// The run is over: clear the panel and return.
    Stop,
}

/// The `--watch` panel: a thread that redraws the live queues and ops in place on stderr at most
/// ten times a second: the one live view model (`dep_views::live`) rendered as terminal text,
/// from a [`LiveFold`] that the recorder feeds (the recorder reads the event log, and forgets
/// what it read) and the session's [`LiveSource`] for snapshots (taken off the
/// workers, which only pay for the locks a snapshot takes, one variable at a time).
pub(crate) struct Watcher {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<()>,
    panel: Arc<Mutex<Panel>>,
    /// The run folded so far, fed by the recorder.
    fold: Arc<Mutex<LiveFold>>,
}

/// The panel of the run's `--watch`, while it is live: what a second Ctrl-C erases before the
/// process leaves at once ([`erase_live_panel`]).
static LIVE_PANEL: Mutex<Option<Arc<Mutex<Panel>>>> = Mutex::new(None);

/// Erases the `--watch` panel, if one is live, and draws it no more: the process is about to
/// leave at once (a second Ctrl-C), and would leave its last frame on the screen.
pub(crate) fn erase_live_panel() {
    if let Some(panel) = lock(&LIVE_PANEL).as_ref() {
        let mut panel = lock(panel);
        panel.clear();
        panel.terminal = false;
        panel.closed = true;
    }
}

impl Watcher {
    fn start(source: LiveSource) -> Watcher {
        let (stop, stopped) = mpsc::channel::<()>();
        let panel = Arc::new(Mutex::new(Panel::new(std::io::stderr().is_terminal())));
        *lock(&LIVE_PANEL) = Some(panel.clone());
        let fold = Arc::new(Mutex::new(LiveFold::from_now(&source)));
        let shared_panel = panel.clone();
        let shared_fold = fold.clone();
        let thread = std::thread::Builder::new()
            .name("dep-watch".to_string())
            .spawn(move || {
                let panel = shared_panel;
                loop {
                    let event = match stopped.recv_timeout(WATCH_PERIOD) {
                        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => WatchEvent::Stop,
                        Err(mpsc::RecvTimeoutError::Timeout) => WatchEvent::Tick,
                    };
                    let mut panel = lock(&panel);
                    match event {
                        WatchEvent::Tick => panel.draw(&source, &shared_fold),
                        WatchEvent::Stop => {
                            panel.clear();
                            return;
                        }
                    }
                }
            })
            .expect("the OS refused to start the watch thread");
        Watcher {
            stop,
            thread,
            panel,
            fold,
        }
    }

    /// A writer for the script's own output that first erases the panel, so that the script's
    /// lines and the panel never overwrite each other when stdout and stderr share a terminal;
    /// the next redraw draws the panel below them.
    pub(crate) fn output<'a>(&self, out: &'a mut dyn Write) -> PanelAwareOutput<'a> {
        PanelAwareOutput {
            panel: self.panel.clone(),
            out,
        }
    }

    /// Stops the panel and waits for its thread (which clears what it drew).
    pub(crate) fn stop(self) {
        *lock(&LIVE_PANEL) = None;
        let _ = self.stop.send(());
        if self.thread.join().is_err() {
            eprintln!("dep: the --watch panel stopped with a panic; the run itself is unaffected");
        }
    }
}

/// The script's output while the panel is live: see [`Watcher::output`].
pub(crate) struct PanelAwareOutput<'a> {
    panel: Arc<Mutex<Panel>>,
    out: &'a mut dyn Write,
}

impl Write for PanelAwareOutput<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // The panel's lock is held while writing, so no redraw lands in the middle of a line.
        let mut panel = lock(&self.panel);
        panel.clear();
        self.out.write_all(buf)?;
        self.out.flush()?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// The state of the live panel between redraws.
struct Panel {
    terminal: bool,
    /// The columns each line drawn last takes (each fitted to the terminal's width then): how
    /// many rows they take now, after the terminal was perhaps made narrower, is counted from
    /// them ([`rows_taken`]).
    drawn: Vec<usize>,
    last_progress: Option<Instant>,
    /// Whether it draws no more (erased for good: the process leaves).
    closed: bool,
}

/// The watched run now: a snapshot, then the fold once the recorder has fed it every event
/// logged before the snapshot (see `LiveFold::view`), so that no op shows as running after its
/// end; a recorder more than [`CATCH_UP`] behind is not waited for longer.
fn fresh_view(source: &LiveSource, fold: &Mutex<LiveFold>) -> dep_views::live::LiveView {
    let snapshot = source.monitor.snapshot();
    let logged = source.log.next_seq();
    let deadline = Instant::now() + CATCH_UP;
    while lock(fold).folded_up_to() < logged && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    lock(fold).draw_with(source, &snapshot, false)
}

/// How long a redraw of `--watch` waits for the recorder to fold what was logged before it.
const CATCH_UP: Duration = Duration::from_millis(100);

impl Panel {
    fn new(terminal: bool) -> Panel {
        Panel {
            terminal,
            drawn: Vec::new(),
            last_progress: None,
            closed: false,
        }
    }

    fn draw(&mut self, source: &LiveSource, fold: &Mutex<LiveFold>) {
        if self.closed {
            return;
        }
        if !self.terminal {
            let due = !matches!(self.last_progress, Some(last) if last.elapsed() < PROGRESS_PERIOD);
            if due {
                self.last_progress = Some(Instant::now());
                let view = fresh_view(source, fold);
                eprintln!("{}", view.heading);
            }
            return;
        }
        let (width, rows) = terminal_size();
        let layout = TextLayout {
            style: views::TextStyle::terminal(width.saturating_sub(1)),
            idle_queues: false,
            ops: true,
            finished_ops: true,
            max_lines: rows.saturating_sub(2).max(4),
        };
        let text = fresh_view(source, fold).text_with(None, &layout);
        let mut out = String::new();
        out.push_str(&self.erase(width));
        self.drawn.clear();
        // Every line fits the width, so that none wraps: each takes one row.
        for line in views::text::fit_lines(&text, layout.style.width).lines() {
            out.push_str(line);
            out.push_str("\x1b[K\n");
            self.drawn.push(views::text::shown_width(line));
        }
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(out.as_bytes());
        let _ = stderr.flush();
    }

    /// Escapes that move back to the panel's first line and clear everything below, on a
    /// terminal `width` columns wide now.
    fn erase(&self, width: usize) -> String {
        match rows_taken(&self.drawn, width) {
            0 => String::new(),
            n => format!("\x1b[{n}F\x1b[J"),
        }
    }

    fn clear(&mut self) {
        if self.terminal && !self.drawn.is_empty() {
            eprint!("{}", self.erase(terminal_size().0));
            self.drawn.clear();
        }
    }
}

/// How many rows lines of these widths (in columns) take on a terminal `width` columns wide:
/// one each, and more for a line wider than the terminal, which a terminal made narrower since
/// it was drawn (as tmux, VTE, kitty and iTerm2 do) wraps onto the rows below.
fn rows_taken(line_widths: &[usize], width: usize) -> usize {
    let width = width.max(1);
    line_widths
        .iter()
        .map(|n_columns| n_columns.div_ceil(width).max(1))
        .sum()
}

/// About how much memory reading a trace of `length` bytes whole takes (its events and op
/// records, then the frames of its last step): 2.5 times the file, 2.76 GB for a 1.1 GB trace.
fn memory_to_read_whole(length: u64) -> u64 {
    length.saturating_mul(5) / 2
}

/// About how many bytes of memory each event read with `--last` takes: 303 MB for 1,000,000.
const MEMORY_PER_KEPT_EVENT: u64 = 300;

/// When a trace read whole would take more memory than the process may use
/// (`dep_interp::tensor::memory_budget_bytes`), how many of its last events fit in half of it,
/// said on stderr; `None` when the whole trace fits or the budget is not known.
fn last_events_that_fit(file: &std::fs::File, path: &str) -> Option<u64> {
    let length = file.metadata().ok()?.len();
    let budget = dep_interp::tensor::memory_budget_bytes()?;
    let kept = events_within(length, budget)?;
    eprintln!(
        "dep: {path} would take about {} of memory to read whole, more than the {} this process may use: reading its last {kept} events (`--last N` chooses how many)",
        dep_interp::tensor::format_bytes(memory_to_read_whole(length)),
        dep_interp::tensor::format_bytes(budget),
    );
    Some(kept)
}

/// How many events of a trace of `length` bytes to keep within a memory `budget`: `None` when
/// the whole trace fits, else as many as half the budget holds (at least 1,000).
fn events_within(length: u64, budget: u64) -> Option<u64> {
    if memory_to_read_whole(length) <= budget {
        return None;
    }
    Some((budget / 2 / MEMORY_PER_KEPT_EVENT).max(1_000))
}

/// A trace file's replay: every event, or with `last`, its last events after the prologue that
/// rebuilds the state where they begin, and the summary of the whole run, folded as it was read.
fn read_replay(
    file: std::fs::File,
    last: Option<u64>,
) -> Result<(views::Replay, views::Prologue, Option<views::Summary>), views::Error> {
    match last {
        Some(n_events) => {
            let capacity = usize::try_from(n_events).unwrap_or(usize::MAX);
            let (replay, prologue, summary) = views::trace::read_trace_last(file, capacity)?;
            Ok((replay, prologue, Some(summary)))
        }
        None => {
            let length = file.metadata().map_or(0, |metadata| metadata.len());
            let replay = views::trace::read_trace_from(file, length)?;
            Ok((replay, views::Prologue::default(), None))
        }
    }
}

/// How many ops each step of `dep replay`'s listing (off a terminal) shows, around the one its
/// event concerns: as many as the HTML player's, so a long trace's listing grows with its steps.
const LISTED_OPS: usize = 100;

/// `dep replay FILE.json`: steps through a recorded run. On a terminal, keys move through the
/// events; otherwise every step is printed in order; with `--end`, only the last, and the
/// summary.
pub(crate) fn replay(args: &ReplayArgs) -> ExitCode {
    let path = args.file.display().to_string();
    if crate::trace_files::is_perfetto(&args.file) {
        eprintln!(
            "dep: cannot replay {path}: dep replay reads the JSON trace (`dep run FILE --trace t.json`), not Perfetto's protobuf"
        );
        return ExitCode::from(2);
    }
    if args.file.is_dir() {
        eprintln!(
            "dep: cannot replay {path}: it is a folder; give the trace a run wrote (`dep run FILE --trace t.json`)"
        );
        return ExitCode::from(2);
    }
    let read = std::fs::File::open(&args.file)
        .map_err(|error| error.to_string())
        .and_then(|file| {
            let last = args.last.or_else(|| last_events_that_fit(&file, &path));
            read_replay(file, last).map_err(|error| error.to_string())
        });
    let (replay, prologue, summary) = match read {
        Ok(read) => read,
        Err(message) => {
            eprintln!("dep: cannot replay {path}: {message}");
            return ExitCode::from(2);
        }
    };
    let n_steps = replay.events().len();
    let mut stepper = views::Stepper::after(&replay, prologue);
    let style = views::TextStyle::plain(100);
    let mut stdout = std::io::stdout().lock();
    if args.end {
        stepper.go_to(n_steps);
        let mut summary = summary.unwrap_or_else(|| views::Summary::of(&replay));
        summary.name_places_from(&replay);
        let ranks = match ranks_of(replay.worker_names()) {
            n if n > 1 => format!(
                "  (the {n} ranks of the trace together; the run's own summary was rank 0's)\n"
            ),
            _ => String::new(),
        };
        // A closed pipe (`| head`) ends the output, as success.
        let _ = write!(
            stdout,
            "{}{}{ranks}",
            views::text::step(&stepper, &style),
            views::text::summary(&summary, &style)
        );
        return ExitCode::SUCCESS;
    }
    if !(std::io::stdin().is_terminal() && stdout.is_terminal()) {
        for step in stepper.first_step()..=n_steps {
            stepper.go_to(step);
            let text = views::text::step_around(&stepper, &style, LISTED_OPS);
            if writeln!(stdout, "{text}").is_err() {
                break; // a closed pipe (`| head`) ends the listing, as success
            }
        }
        return ExitCode::SUCCESS;
    }
    drop(stdout);
    match step_interactively(&mut stepper) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("dep: replay: terminal error: {error}");
            ExitCode::from(1)
        }
    }
}

/// How many ranks a trace's workers belong to: those of a trace of several ranks are named
/// `r1 cpu:0`; one rank's have no prefix (1).
fn ranks_of(worker_names: &[String]) -> usize {
    let mut ranks: Vec<&str> = worker_names
        .iter()
        .filter_map(|name| name.split_once(' ').map(|(rank, _)| rank))
        .filter(|rank| {
            rank.strip_prefix('r').is_some_and(|number| {
                !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit())
            })
        })
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    ranks.len().max(1)
}

/// Restores the terminal when the stepper ends, however it ends.
struct RawTerminal;

impl RawTerminal {
    fn enter() -> std::io::Result<RawTerminal> {
        crossterm::terminal::enable_raw_mode()?;
        // The alternate screen keeps the user's scrollback as it was.
        print!("\x1b[?1049h\x1b[?25l");
        Ok(RawTerminal)
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        print!("\x1b[?25h\x1b[?1049l");
        let _ = std::io::stdout().flush();
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// The keys of `dep replay` on a terminal, on its last row.
const REPLAY_KEYS: &str =
    "→/n next · ←/p back · PgDn/PgUp 100 steps · Home/End first/last · q quit";

/// How many steps Page Up and Page Down move.
const PAGE_STEPS: usize = 100;

fn step_interactively(stepper: &mut views::Stepper) -> std::io::Result<()> {
    use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

    let n_steps = stepper.replay().events().len();
    let _raw = RawTerminal::enter()?;
    loop {
        let (width, rows) = terminal_size();
        let style = views::TextStyle::terminal(width.saturating_sub(1));
        let room = rows.saturating_sub(2);
        // Every line fits the width (none wraps), so the heading stays on the screen.
        let text = views::text::step_on_screen(stepper, &style, room);
        let mut screen = String::from("\x1b[H\x1b[2J");
        // Raw mode does not turn `\n` into a new line at column 0.
        for line in text.lines().take(room) {
            screen.push_str(line);
            screen.push_str("\r\n");
        }
        screen.push_str("\r\n");
        screen.push_str(&views::text::fit_line(REPLAY_KEYS, style.width));
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(screen.as_bytes())?;
        stdout.flush()?;
        drop(stdout);
        let key = match event::read()? {
            Event::Key(key) if key.kind != KeyEventKind::Release => key,
            _ => continue,
        };
        let step = stepper.step();
        let next = match key.code {
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => return Ok(()),
            KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
            KeyCode::Right | KeyCode::Char('n') | KeyCode::Char(' ') | KeyCode::Down => step + 1,
            KeyCode::Left | KeyCode::Char('p') | KeyCode::Up => step.saturating_sub(1),
            KeyCode::PageDown => step + PAGE_STEPS,
            KeyCode::PageUp => step.saturating_sub(PAGE_STEPS),
            KeyCode::Home | KeyCode::Char('g') => 0,
            KeyCode::End | KeyCode::Char('G') => n_steps,
            _ => step,
        };
        stepper.go_to(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trace that fits is read whole; one that does not keeps what half the budget holds,
    /// and never fewer than 1,000 events.
    #[test]
    fn a_trace_too_long_for_the_memory_is_read_from_its_end() {
        let gib = 1 << 30;
        assert_eq!(events_within(gib, 4 * gib), None);
        assert_eq!(
            events_within(2 * gib, 4 * gib),
            Some(2 * gib / MEMORY_PER_KEPT_EVENT)
        );
        assert_eq!(events_within(gib, 100_000), Some(1_000));
    }

    /// A `--watch` frame drawn 120 columns wide takes more rows once the terminal is 50 wide
    /// (it wraps its lines again), and the erase moves up over all of them.
    #[test]
    fn a_frame_takes_more_rows_on_a_narrower_terminal() {
        assert_eq!(rows_taken(&[119, 0, 40], 120), 3);
        assert_eq!(rows_taken(&[119, 0, 40], 50), 3 + 1 + 1);
        assert_eq!(rows_taken(&[], 50), 0);
    }
}
