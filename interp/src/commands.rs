//! The commands that inspect and steer a session: `:name` in the REPL, `%name` in a notebook.
//!
//! One table ([`COMMANDS`]) names them, with their arguments and help; [`parse`] turns the text
//! after the sigil into a typed [`Command`] and [`run`] runs it on a [`Session`]. What a command
//! shows comes back as an [`Outcome`] that each front-end only renders (the REPL as terminal text,
//! the kernel as text, SVG or HTML): a command added here appears in both, with the same help.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use dep_engine as engine;
use dep_views as views;

use crate::Session;

/// One command's name, arguments and help, for help texts, completion and inspection.
pub struct CommandInfo {
    /// The name after the sigil (`why`).
    pub name: &'static str,
    /// Other names it answers to (`q` for `quit`).
    pub aliases: &'static [&'static str],
    /// Its arguments as the help shows them; `POLICY` stands for every engine policy.
    pub args: &'static str,
    /// What it does, in one sentence.
    pub doc: &'static str,
}

impl CommandInfo {
    /// How to call it: `:why NAME`, `%engine naive|threaded|per-device|sim [THREADS]`.
    pub fn usage(&self, sigil: char) -> String {
        let args = self.args.replace("POLICY", &engine_names().join("|"));
        format!("{sigil}{} {args}", self.name)
            .trim_end()
            .to_string()
    }
}

/// The engine policies `:engine` and `%engine` take, by name, for completion and help.
pub fn engine_names() -> Vec<&'static str> {
    engine::Policy::ALL
        .iter()
        .map(|policy| policy.name())
        .collect()
}

/// Every command, in the order help lists them.
pub const COMMANDS: &[CommandInfo] = &[
    CommandInfo { name: "help", aliases: &["h", "?"], args: "", doc: "this list" },
    CommandInfo { name: "vars", aliases: &[], args: "", doc: "variables: names, shapes, devices, states" },
    CommandInfo { name: "queues", aliases: &[], args: "", doc: "each variable's queue of pending reads and writes" },
    CommandInfo { name: "ops", aliases: &[], args: "", doc: "live ops and their states" },
    CommandInfo { name: "why", aliases: &[], args: "NAME", doc: "why NAME is not ready: the op that will write it and every access that op waits for; once nothing is pending, why its last write waited (from the event log)" },
    CommandInfo { name: "timeline", aliases: &[], args: "[FILE.svg] [SPAN]", doc: "what ran when, on which worker, critical path outlined (SVG to a file); a SPAN such as 30ms draws at least that long, so that two timelines share a scale" },
    CommandInfo { name: "dag", aliases: &[], args: "[NAME|FILE.dot|FILE.svg]", doc: "the dependency graph (RAW, WAR, WAW edges) of the ops, or of the graph NAME recorded with `graph NAME { ... }` (Graphviz DOT, or SVG)" },
    CommandInfo { name: "graph", aliases: &[], args: "[NAME]", doc: "the report of the recorded graph NAME (ops, edges, critical path, memory); alone, the recorded graphs" },
    CommandInfo { name: "trace", aliases: &[], args: "FILE.json|FILE.pftrace", doc: "write the ops as a trace: Chrome's JSON (open it in Perfetto; `dep replay` steps through it), or Perfetto's protobuf for a FILE.pftrace" },
    CommandInfo { name: "engine", aliases: &[], args: "POLICY [THREADS] [--ranks N]", doc: "switch the engine policy, keeping every variable (waits for pending ops first); `sim --ranks N` starts N simulated ranks instead, every variable forgotten: each input then runs on every rank, rank 0's output shown" },
    CommandInfo { name: "threads", aliases: &[], args: "N", doc: "set the number of CPU worker threads, keeping every variable (of one rank: simulated ranks take their lanes from `engine sim N --ranks R`, which starts them afresh)" },
    CommandInfo { name: "load", aliases: &[], args: "FILE.dep", doc: "run a script in this session" },
    CommandInfo { name: "reset", aliases: &[], args: "", doc: "forget every variable and function and start a fresh engine" },
    CommandInfo { name: "watch", aliases: &[], args: "on|off", doc: "show or hide the live display of queues and ops" },
    CommandInfo { name: "quit", aliases: &["q", "exit"], args: "", doc: "wait for pending ops and leave the REPL (a notebook's kernel stops from its Kernel menu)" },
];

/// The help lines of every command: (usage, doc), for a front-end to lay out.
pub fn help_lines(sigil: char) -> Vec<(String, &'static str)> {
    COMMANDS
        .iter()
        .map(|info| (info.usage(sigil), info.doc))
        .collect()
}

/// A parsed command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// The list of commands.
    Help,
    /// The variables.
    Vars,
    /// Every variable's queue.
    Queues,
    /// The live ops.
    Ops,
    /// Why a variable is not ready.
    Why(String),
    /// The timeline, shown or written to an SVG file, its axis at least `span_ns` long.
    Timeline {
        /// The SVG file to write, if any.
        path: Option<PathBuf>,
        /// The least length of the time axis (`30ms`), for timelines on one scale.
        span_ns: Option<u64>,
    },
    /// The ops' DAG (or written to a file), or a recorded graph's when the argument names one.
    Dag(Option<String>),
    /// A recorded graph's report, or the list of recorded graphs.
    Graph(Option<String>),
    /// A trace written to a file: Chrome's JSON, or Perfetto's protobuf for a `.pftrace`.
    Trace(PathBuf),
    /// A new engine policy (and thread count).
    Engine {
        /// The policy.
        policy: engine::Policy,
        /// The worker threads, else the current count.
        threads: Option<usize>,
        /// `--ranks N` (under `sim` only): N simulated ranks, from a fresh start.
        ranks: Option<usize>,
    },
    /// A new thread count.
    Threads(usize),
    /// A script to run in the session.
    Load(PathBuf),
    /// Forget everything.
    Reset,
    /// The live display on or off.
    Watch(bool),
    /// Leave.
    Quit,
}

impl Command {
    /// Whether running it replaces the engine: a front-end finishes its live display of the old
    /// one first.
    pub fn replaces_engine(&self) -> bool {
        matches!(
            self,
            Command::Engine { .. } | Command::Threads(_) | Command::Reset
        )
    }

    /// Whether it shows what the ops did, so a front-end lets them finish first.
    pub fn reads_history(&self) -> bool {
        matches!(
            self,
            Command::Timeline { .. } | Command::Dag(_) | Command::Trace(_)
        )
    }
}

/// Parses the text after the sigil (`:` or `%`). Errors are one-line messages for the user.
pub fn parse(sigil: char, text: &str) -> Result<Command, String> {
    let text = text.trim();
    let mut words = text.split_whitespace();
    let word = words.next().unwrap_or("");
    let args: Vec<&str> = words.collect();
    let Some(info) = COMMANDS
        .iter()
        .find(|info| info.name == word || info.aliases.contains(&word))
    else {
        return Err(if word.is_empty() {
            format!("a `{sigil}` alone is not a command; {sigil}help lists them")
        } else {
            format!("unknown command `{sigil}{word}`; {sigil}help lists the commands")
        });
    };
    let usage = || format!("usage: {}", info.usage(sigil));
    let path = |text: &str| PathBuf::from(text);
    let command = match (info.name, args.as_slice()) {
        ("help", []) => Command::Help,
        ("vars", []) => Command::Vars,
        ("queues", []) => Command::Queues,
        ("ops", []) => Command::Ops,
        ("why", [name]) => Command::Why(name.to_string()),
        ("timeline", args) if args.len() <= 2 => {
            let mut timeline = (None, None);
            for arg in args {
                match timeline_argument(arg, sigil)? {
                    TimelineArgument::Span(span_ns) if timeline.1.is_none() => {
                        timeline.1 = Some(span_ns)
                    }
                    TimelineArgument::File if timeline.0.is_none() => timeline.0 = Some(path(arg)),
                    _ => return Err(usage()),
                }
            }
            Command::Timeline {
                path: timeline.0,
                span_ns: timeline.1,
            }
        }
        ("dag", []) => Command::Dag(None),
        ("dag", [argument]) => Command::Dag(Some(argument.to_string())),
        ("graph", []) => Command::Graph(None),
        ("graph", [name]) => Command::Graph(Some(name.to_string())),
        ("trace", [file]) => {
            trace_format(Path::new(file)).map_err(|error| format!("{error} ({})", usage()))?;
            Command::Trace(path(file))
        }
        ("engine", [policy, rest @ ..]) => parse_engine(policy, rest, sigil)?,
        ("threads", [threads]) => Command::Threads(engine::parse_threads(threads)?),
        ("load", [file]) => Command::Load(path(file)),
        ("reset", []) => Command::Reset,
        ("watch", ["on"]) => Command::Watch(true),
        ("watch", ["off"]) => Command::Watch(false),
        ("quit", []) => Command::Quit,
        _ => return Err(usage()),
    };
    Ok(command)
}

/// The arguments of `engine`: `POLICY [THREADS] [--ranks N]`.
fn parse_engine(policy: &str, rest: &[&str], sigil: char) -> Result<Command, String> {
    let policy: engine::Policy = policy.parse()?;
    let (threads, ranks) = match rest {
        [] => (None, None),
        ["--ranks"] | [_, "--ranks"] => {
            return Err(format!(
                "--ranks needs a number of ranks: {sigil}engine sim --ranks N"
            ))
        }
        [threads] => (Some(*threads), None),
        ["--ranks", ranks] => (None, Some(*ranks)),
        [threads, "--ranks", ranks] => (Some(*threads), Some(*ranks)),
        _ => return Err(format!("usage: {sigil}engine POLICY [THREADS] [--ranks N]")),
    };
    let ranks = match ranks {
        None => None,
        Some(_) if policy != engine::Policy::Sim => {
            return Err(format!(
                "--ranks runs simulated ranks: {sigil}engine sim --ranks N (real ranks: mpirun -n N dep run FILE)"
            ))
        }
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=MAX_SIM_RANKS).contains(&n) => Some(n),
            _ => {
                return Err(format!(
                    "--ranks takes a whole number of ranks from 1 to {MAX_SIM_RANKS}, got `{text}`"
                ))
            }
        },
    };
    Ok(Command::Engine {
        policy,
        threads: threads.map(engine::parse_threads).transpose()?,
        ranks,
    })
}

/// The most ranks `engine sim --ranks N` simulates: each is a session on a thread.
const MAX_SIM_RANKS: usize = 64;

/// Which live view of the engine a command asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveView {
    /// Every variable's queue.
    Queues,
    /// The live ops.
    Ops,
}

/// What a command shows; each front-end renders it its own way.
pub enum Outcome {
    /// Text to show as the command's answer.
    Text(String),
    /// A table: its header and rows (`:vars`).
    Table {
        /// The column names.
        header: Vec<String>,
        /// The rows, as many cells as the header.
        rows: Vec<Vec<String>>,
    },
    /// A note on what was done (a file written, the engine switched).
    Note(String),
    /// The engine was replaced (a note saying how): a live display follows the new one.
    EngineReplaced(String),
    /// A live view of the engine now.
    Live(LiveView, views::Frame),
    /// The timeline of the ops so far, its axis at least the span (ns) long when given.
    Timeline(Box<views::Replay>, Option<u64>),
    /// A DAG as Graphviz DOT.
    Dot(String),
    /// The help: the front-end lists [`help_lines`] with its sigil.
    Help,
    /// The live display on or off.
    Watch(bool),
    /// A script to run in the session (`:load`): its name and text.
    Run {
        /// The name its reports give.
        path: String,
        /// The text.
        source: String,
    },
    /// Leave.
    Quit,
}

/// How many ops the DAG shown on a screen or in a notebook draws (the last ones): a long loop's
/// whole DAG is megabytes of DOT that no layout draws; a file gets every op.
const SHOWN_DAG_OPS: usize = 100;

/// Runs a command on the session. An error is a one-line message for the user.
pub fn run(session: &mut Session, command: Command) -> Result<Outcome, String> {
    Ok(match command {
        Command::Help => Outcome::Help,
        Command::Vars => vars(session),
        Command::Queues => Outcome::Live(LiveView::Queues, live_frame(session)),
        Command::Ops => {
            let frame = live_frame(session);
            if frame.ops.is_empty() {
                return Ok(Outcome::Note(NO_LIVE_OPS.to_string()));
            }
            Outcome::Live(LiveView::Ops, frame)
        }
        Command::Why(name) => with_forgotten(session, Outcome::Text(why(session, &name)?)),
        Command::Timeline { path, span_ns } => {
            let replay = replay(session);
            if replay.ops().is_empty() {
                return Ok(Outcome::Note("no op ran yet".to_string()));
            }
            match path {
                None => Outcome::Timeline(Box::new(replay), span_ns),
                Some(path) => {
                    let options = views::svg::TimelineOptions {
                        simulated: session.engine().policy() == engine::Policy::Sim,
                        span_ns,
                        ..Default::default()
                    };
                    let svg = views::svg::timeline(&replay, &options);
                    with_forgotten(session, write_file(&path, &svg, "timeline")?)
                }
            }
        }
        Command::Dag(Some(name)) if session.graph_names().contains(&name) => {
            Outcome::Dot(session.graph_dot(&name).unwrap_or_default())
        }
        Command::Dag(Some(argument)) => {
            let path = Path::new(&argument);
            let replay = replay(session);
            let written = match path.extension().and_then(|extension| extension.to_str()) {
                Some("svg") => {
                    let svg = views::dot::dag_svg(&replay).map_err(|error| error.to_string())?;
                    let written = write_file(path, &svg, "DAG")?;
                    let (n_ops, drawn) = (replay.ops().len(), views::dot::SVG_DAG_OPS);
                    match written {
                        Outcome::Note(note) if n_ops > drawn => Outcome::Note(format!(
                            "{note}: its last {drawn} of {n_ops} ops (Graphviz takes minutes to lay out more; a FILE.dot gets every op)"
                        )),
                        written => written,
                    }
                }
                Some("dot") => write_file(path, views::dot::dag(&replay), "DAG")?,
                // `.svg` alone is a file name with no extension, and no graph's name.
                _ if [".dot", ".svg"].iter().any(|end| argument.ends_with(end)) => {
                    return Err(format!(
                        "`{argument}` names no file: give a name before the extension (FILE.dot or FILE.svg)"
                    ))
                }
                // A graph's name is a name: with a dot or a slash it was meant as a file.
                _ if argument.contains(['.', '/']) => {
                    return Err(format!(
                        "`{argument}` is not a FILE.dot or FILE.svg: the DAG is written as Graphviz's DOT or, through it, as SVG"
                    ))
                }
                _ => return Err(no_graph(session, &argument)),
            };
            with_forgotten(session, written)
        }
        Command::Dag(None) => {
            let replay = replay(session);
            let n_ops = replay.ops().len();
            if n_ops == 0 {
                return Ok(Outcome::Note("no op ran yet".to_string()));
            }
            let mut dot = views::dot::dag_of_last(&replay, SHOWN_DAG_OPS);
            if n_ops > SHOWN_DAG_OPS {
                dot.insert_str(
                    0,
                    &format!("// the last {SHOWN_DAG_OPS} of {n_ops} ops: the dag command with a FILE.dot draws them all\n"),
                );
            }
            with_forgotten(session, Outcome::Dot(dot))
        }
        Command::Graph(None) => {
            let names = session.graph_names();
            if names.is_empty() {
                Outcome::Note("no recorded graph: `graph NAME { ... }` records one".to_string())
            } else {
                Outcome::Text(format!("recorded graphs: {}\n", names.join(", ")))
            }
        }
        Command::Graph(Some(name)) => match session.graph_report(&name) {
            // A run still going has measured only the buffers its finished ops wrote.
            Some(report) if session.engine().n_unfinished() > 0 => Outcome::Text(format!(
                "{}\n  (ops are still running: the memory figures count only the buffers \
                 measured so far; wait, then ask again for the whole run's)\n",
                report.trim_end()
            )),
            Some(report) => Outcome::Text(format!("{}\n", report.trim_end())),
            None => return Err(no_graph(session, &name)),
        },
        Command::Trace(path) => {
            let replay = replay_in_input_lines(session);
            let n_ops = replay.ops().len();
            let (contents, format, opener) = match trace_format(&path)? {
                TraceFormat::Chrome => (
                    views::trace::chrome_trace(&replay).into_bytes(),
                    "Chrome",
                    "Perfetto or chrome://tracing",
                ),
                TraceFormat::Perfetto => (
                    views::perfetto::perfetto_trace(&replay),
                    "Perfetto",
                    "Perfetto",
                ),
            };
            let ops = views::text::count(n_ops, "op");
            let written = write_file(
                &path,
                contents,
                &format!("{format} trace of {ops} (open it in {opener})"),
            )?;
            with_forgotten(session, written)
        }
        Command::Engine {
            policy,
            threads,
            ranks,
        } => {
            let threads = threads.unwrap_or(session.config().threads);
            match ranks {
                Some(n) => start_sim_ranks(session, threads, n),
                None => switch_engine(session, policy, threads),
            }
        }
        Command::Threads(threads) => {
            if let Some(peers) = session.peers() {
                let n = peers.size();
                return Err(format!(
                    "threads keeps one rank's variables, and this session runs {n} simulated \
                     ranks: `engine sim {threads} --ranks {n}` starts them afresh with {threads} \
                     CPU lanes each (every variable forgotten)"
                ));
            }
            let policy = session.config().policy;
            switch_engine(session, policy, threads)
        }
        Command::Load(path) => {
            let shown = path.display().to_string();
            let bytes =
                std::fs::read(&path).map_err(|error| format!("cannot read {shown}: {error}"))?;
            // Not UTF-8: the report names the first bad byte and its place, as `dep run` does.
            let source = dep_grammar::decode_source(bytes).map_err(|error| error.render(&shown))?;
            Outcome::Run {
                path: shown,
                source,
            }
        }
        Command::Reset => {
            session.reset();
            Outcome::EngineReplaced(
                "reset: every variable and function forgotten; a fresh engine".to_string(),
            )
        }
        Command::Watch(on) => Outcome::Watch(on),
        Command::Quit => Outcome::Quit,
    })
}

fn switch_engine(session: &mut Session, policy: engine::Policy, threads: usize) -> Outcome {
    let had_ranks = session.peers().is_some();
    session.set_engine(policy, threads);
    session.set_peers(None);
    let kept = if had_ranks {
        "one rank again, rank 0's variables kept"
    } else {
        "every variable kept"
    };
    let workers = workers_phrase(policy, threads);
    Outcome::EngineReplaced(format!("engine: {policy}, {workers}; {kept}"))
}

/// Where a policy runs its ops, as `:engine` and `:threads` say it: the CPU worker count means
/// threads only for the threaded and per-device engines (the simulator's are virtual lanes,
/// and the naive engine runs every op on the thread that pushes it).
fn workers_phrase(policy: engine::Policy, threads: usize) -> String {
    let cpu_workers = views::text::count(threads, "CPU worker thread");
    match policy {
        engine::Policy::Naive => {
            format!("every op runs on main, the thread that pushes it ({cpu_workers} kept for the other engines)")
        }
        engine::Policy::Threaded => cpu_workers,
        engine::Policy::PerDevice => format!("{cpu_workers}, and a worker per GPU stream"),
        engine::Policy::Sim => views::text::count(threads, "simulated CPU lane"),
    }
}

/// `engine sim --ranks N`: a fresh session as rank 0 of `n` simulated ranks, the others on
/// threads (their events unobserved: views show rank 0).
fn start_sim_ranks(session: &mut Session, threads: usize, n: usize) -> Outcome {
    session.set_peers(None);
    session.set_engine(engine::Policy::Sim, threads);
    session.reset();
    let peer_config = crate::SessionConfig {
        observe: false,
        ..session.config().clone()
    };
    let (comm, peers) = crate::comm::PeerRanks::group(n, &peer_config);
    session.set_communicator(comm);
    session.set_peers(Some(peers));
    let lanes = workers_phrase(engine::Policy::Sim, threads);
    Outcome::EngineReplaced(format!(
        "engine: sim, {lanes}, {}; every variable forgotten: each input runs on every rank, rank 0's output shown",
        views::text::count(n, "simulated rank")
    ))
}

fn vars(session: &Session) -> Outcome {
    let variables = session.variables();
    if variables.is_empty() {
        return Outcome::Text("no variables\n".to_string());
    }
    let rows = variables
        .into_iter()
        .map(|info| {
            let shape = match &info.shape {
                None => "?".to_string(),
                Some(shape) if shape.is_empty() => "scalar".to_string(),
                Some(shape) => format!("{shape:?}"),
            };
            vec![info.name, shape, info.device, info.state]
        })
        .collect();
    Outcome::Table {
        header: ["name", "shape", "device", "state"]
            .map(str::to_string)
            .to_vec(),
        rows,
    }
}

/// Whether `name` is one of the interpreter's temporaries (`return#2`, `f.x#1`) or a function's
/// local (`h'`, `h'2`): user names are identifiers, which never hold a `#` nor a `'`.
fn is_temporary_name(name: &str) -> bool {
    name.contains(['#', '\'']) && !name.contains(char::is_whitespace)
}

/// What `name` is when it names no variable but a function, a builtin or a recorded graph: `why`
/// of it says so and what to ask instead, where "no variable named" would suggest a typo.
fn not_a_variable(session: &Session, name: &str) -> Option<String> {
    if let Some(function) = session.functions.get(name) {
        let place = (session.sources.get(function.source_index))
            .map(|chunk| format!(", defined at {}", chunk.line_place(function.def_offset)))
            .unwrap_or_default();
        return Some(format!(
            "`{name}` is a function (`def {name}({})`{place}), not a variable: why explains the \
             ops of a variable; ask it of a variable a call writes (`y = {name}(...)`, then why of `y`)",
            function.params.join(", ")
        ));
    }
    if crate::builtins::lookup(name).is_some() {
        return Some(format!(
            "`{name}` is a builtin, not a variable: why explains the ops of a variable; ask it of \
             a variable a call writes (`y = {name}(...)`, then why of `y`)"
        ));
    }
    session.graphs.contains_key(name).then(|| {
        format!(
            "`{name}` is a recorded graph, not a variable: why explains the ops of a variable; \
             `graph {name}` reports the graph's ops and `dag {name}` draws them"
        )
    })
}

/// `why NAME`: why `name` is not ready: the op that will write it and every access that op waits for; or,
/// once nothing is pending, why its last write waited when it did (from the event log).
fn why(session: &Session, name: &str) -> Result<String, String> {
    let Some(var) = session.var_of(name) else {
        // A name first assigned inside a recorded graph is the graph's own buffer: a variable
        // the engine keeps for the graph's runs, which no name binds between them.
        let graph = (session.graphs.iter())
            .filter(|(_, graph)| graph.has_internal_named(name))
            .map(|(graph_name, _)| graph_name)
            .min();
        // A variable the views show without a binding (a function's argument `f.x#1`, its
        // result `return#2`, its local `h'`; a name deleted while ops still use it, shown
        // `A (deleted)`; a graph's own buffer while a run uses it): asked while it is live, the
        // live frame answers for it.
        let frame = live_frame(session);
        let in_use = || {
            (frame.vars.iter())
                .any(|candidate| &*candidate.name == name && !candidate.queue.is_empty())
        };
        if let Some(text) = frame.why(name).filter(|_| graph.is_none() || in_use()) {
            // A line of its own, as every answer is: the REPL's panel redraws below it.
            return Ok(text + "\n");
        }
        if let Some(graph) = graph {
            // Between runs it holds nothing a name could read: `print` says so too.
            return Err(format!(
                "`{name}` is first assigned inside graph `{graph}`, so it is the graph's own \
                 buffer, not kept after a run; assign `{name}` before `graph {graph}` to read it"
            ));
        }
        if is_temporary_name(name) {
            return Err(format!(
                "`{name}` was one of the interpreter's temporaries (a function's argument, local \
                 or result), deleted once the ops that use it ended: it is no longer live"
            ));
        }
        // `x[5]` of a list of 3: out of its range, not an unknown name.
        let list = name
            .strip_suffix(']')
            .and_then(|name| name.split_once('['))
            .map(|(list, _)| list.trim());
        return Err(
            match (
                session.slots_len(name),
                list.and_then(|list| session.slots_len(list)),
            ) {
                (Some(n), _) => format!(
                "`{name}` is a list of {}: ask why of one of them, `{name}[i]` for i from 0 to {}",
                views::text::count(n, "slot"),
                n.saturating_sub(1)
            ),
                (None, Some(n)) => format!(
                    "`{name}` is not one of the list's slots: `{}` holds {}, `{0}[0]` to `{0}[{}]`",
                    list.unwrap_or_default(),
                    views::text::count(n, "slot"),
                    n.saturating_sub(1)
                ),
                (None, None) => {
                    not_a_variable(session, name).unwrap_or(format!("no variable named `{name}`"))
                }
            },
        );
    };
    let frame = live_frame(session);
    let pending_write = frame.vars.iter().any(|candidate| {
        candidate.id == var.id() && candidate.queue.iter().any(|access| access.write)
    });
    let variables = session.variables();
    let state = variables
        .iter()
        .find(|info| info.name == name)
        .map_or("ready", |info| info.state.as_str());
    let mut text = frame
        .why(name)
        .unwrap_or_else(|| format!("{name} is ready: nothing reads or writes it now"));
    // Nothing pending, yet not ready: its last write failed, or nothing wrote it.
    let not_ready = match state {
        _ if state.starts_with("failed: ") => Some("failed"),
        crate::session::NO_VALUE => Some("has no value"),
        _ => None,
    };
    if not_ready == Some("has no value") {
        // Its only writes were cancelled: it keeps no value at all.
        text = text.replace(
            views::Frame::KEEPS_ITS_VALUE,
            "will have no value: no write of it ran",
        );
    }
    if let (Some(not_ready), Some(rest)) =
        (not_ready, text.strip_prefix(&format!("{name} is ready")))
    {
        text = format!("{name} {not_ready}{rest}");
    }
    text.push('\n');
    if !pending_write {
        let has_value = not_ready.is_none();
        let replay = replay(session);
        if let Some(history) = replay.why_waited(var.id(), has_value) {
            text.push_str(&history);
            let written_here = replay
                .ops()
                .iter()
                .any(|op| op.writes.contains(&var.id()) && op.state != engine::OpState::Cancelled);
            if !written_here && session.event_log().is_some_and(|log| log.n_clears() > 0) {
                // The kernel clears the log when a cell runs code (`Session::forget_events`).
                text.push_str(" (a notebook keeps the events of the last cell that ran code)");
            }
            text.push('\n');
        }
    }
    if let Some(error) = state.strip_prefix("failed: ") {
        let _ = writeln!(text, "{name} holds an error: {error}");
    }
    Ok(text)
}

/// What an argument of `timeline` is.
enum TimelineArgument {
    /// The SVG file to write.
    File,
    /// The least length of the axis, in nanoseconds.
    Span(u64),
}

/// Reads an argument of `timeline`: a file ending in `.svg`, or a SPAN. An argument that reads as
/// a number (and a unit) but not as a span is a wrong span, any other a wrong file name: neither
/// becomes a file written under that name.
fn timeline_argument(text: &str, sigil: char) -> Result<TimelineArgument, String> {
    if let Some(span_ns) = parse_span(text) {
        return Ok(TimelineArgument::Span(span_ns));
    }
    let usage = format!("{sigil}timeline [FILE.svg] [SPAN]");
    if let Some(stem) = text.strip_suffix(".svg") {
        return if stem.is_empty() || stem.ends_with('/') {
            Err(format!(
                "`{text}` names no file: give a name before .svg ({usage})"
            ))
        } else {
            Ok(TimelineArgument::File)
        };
    }
    let number = text.trim_end_matches(|c: char| c.is_alphabetic());
    if number.parse::<f64>().is_ok() {
        return Err(format!(
            "`{text}` is not a SPAN: a SPAN is a length of time above 0 and at most 1000000s, \
             such as 30ms, 1.5s or 200us ({usage})"
        ));
    }
    Err(format!(
        "`{text}` is not a FILE.svg: the timeline is written as SVG, to a file whose name ends \
         in .svg ({usage})"
    ))
}

/// A span of time as a command argument: `30ms`, `1.5s`, `200us` (or `µs`), in nanoseconds.
fn parse_span(text: &str) -> Option<u64> {
    let (number, unit_ns) = [
        ("ms", 1e6),
        ("us", 1e3),
        ("µs", 1e3),
        ("ns", 1.0),
        ("s", 1e9),
    ]
    .into_iter()
    .find_map(|(unit, ns)| Some((text.strip_suffix(unit)?, ns)))?;
    let value: f64 = number.parse().ok()?;
    let span_ns = value * unit_ns;
    (span_ns > 0.0 && span_ns <= MAX_SPAN_NS).then(|| span_ns.round() as u64)
}

/// The longest SPAN a timeline takes: a million seconds (about 11.6 days).
const MAX_SPAN_NS: f64 = 1e15;

/// What `ops` says when no op is live: a loop's ops end as it goes, and a user who asks after
/// it would otherwise see an empty table and wonder whether it ran.
const NO_LIVE_OPS: &str =
    "no live ops (an op is live from its push to its end; the timeline shows those that ran)";

/// The engine's queues and live ops now.
fn live_frame(session: &Session) -> views::Frame {
    let engine = session.engine();
    let mut frame = views::Frame::from_snapshot(&engine.snapshot(), &engine.worker_names());
    frame.name_places(&session.places());
    add_start_times(session, &mut frame);
    frame
}

/// Gives the frame's running ops the start times the event log holds (a snapshot has none),
/// so `:ops` shows when each started and for how long it has run, as the live panel does.
fn add_start_times(session: &Session, frame: &mut views::Frame) {
    let running: std::collections::HashSet<engine::OpId> = frame
        .ops
        .iter()
        .filter(|op| op.state == engine::OpState::Running)
        .map(|op| op.id)
        .collect();
    let Some(log) = session.event_log().filter(|_| !running.is_empty()) else {
        return;
    };
    let mut started = std::collections::HashMap::new();
    let mut next = log.first_seq();
    loop {
        let after = log.read_since(next, |event| {
            if let engine::EventKind::Started { op, .. } = event.kind {
                if running.contains(&op) {
                    started.insert(op, event.time_ns);
                }
            }
        });
        if after == next {
            break;
        }
        next = after;
    }
    for op in &mut frame.ops {
        if let Some(time_ns) = started.get(&op.id) {
            op.started_ns = Some(*time_ns);
            // The snapshot reads the clock before the queues: an op that started meanwhile
            // has run no time yet, not a negative one.
            frame.time_ns = frame.time_ns.max(*time_ns);
        }
    }
}

/// What the session's event log holds: everything since the engine started in the REPL, the
/// last cell that ran code in the kernel (which clears the log). Variables created before the
/// log began are named from the engine.
fn replay(session: &Session) -> views::Replay {
    let mut replay = replay_of(session, session_events(session));
    replay.name_places(&session.places());
    replay
}

/// [`replay`] for a trace file, which has only lines to say where an op came from: each op's
/// line is the line of the input it came from (`B` at `<stdin>:6` is line 6), as the
/// front-end's reports number it, not the session-wide line that the engine's events carry
/// (which counts only the lines of statements run so far).
fn replay_in_input_lines(session: &Session) -> views::Replay {
    let places = session.places();
    let mut events = session_events(session);
    for event in &mut events {
        if let engine::EventKind::Pushed { line, .. } = &mut event.kind {
            if let Some((_, input_line)) = places.input_line(*line) {
                *line = input_line;
            }
        }
    }
    replay_of(session, events)
}

/// The events the session's log holds (none without a log).
fn session_events(session: &Session) -> Vec<engine::Event> {
    session
        .event_log()
        .map(|log| log.events())
        .unwrap_or_default()
}

/// The replay of `events`, a session's, its variables named.
fn replay_of(session: &Session, events: Vec<engine::Event>) -> views::Replay {
    let engine = session.engine();
    let mut replay = views::Replay::new(events, engine.worker_names());
    replay.name_vars(
        engine
            .snapshot()
            .vars
            .into_iter()
            .map(|var| (var.id, var.name)),
    );
    // A run still going: its running ops' bars and the wall time reach now, not the last event.
    if session.n_unfinished() > 0 {
        replay.set_now(Some(session.now_ns()));
    }
    replay
}

/// Why a DAG or report of the graph `name` cannot be shown.
fn no_graph(session: &Session, name: &str) -> String {
    let names = session.graph_names();
    if names.is_empty() {
        format!("no graph named `{name}`: `graph {name} {{ ... }}` records one")
    } else {
        format!(
            "no graph named `{name}`; recorded graphs: {}",
            names.join(", ")
        )
    }
}

/// What the session's event log no longer holds, when its limit
/// ([`SessionConfig::kept_events`](crate::SessionConfig::kept_events)) forgot its oldest events:
/// a note for every view made from the log, which then shows the recent past only.
///
/// The log forgets its older half each time it fills up, so it holds between half its limit
/// and its limit: the note says how many it holds now.
pub fn forgotten_events(session: &Session) -> Option<String> {
    let log = session.event_log()?;
    let n_forgotten = log.n_forgotten();
    (n_forgotten > 0).then(|| {
        format!(
            "the event log holds only the last {} events: the {n_forgotten} before them are \
             forgotten (it keeps at most {}, DEP_LOG_EVENTS sets how many, 0 all)",
            log.len(),
            session.config().kept_events
        )
    })
}

/// `outcome`, made from the event log, with the note of [`forgotten_events`] when there is one:
/// after a note or a text, as a comment at the top of DOT.
fn with_forgotten(session: &Session, outcome: Outcome) -> Outcome {
    let Some(forgotten) = forgotten_events(session) else {
        return outcome;
    };
    match outcome {
        Outcome::Note(note) => Outcome::Note(format!("{note}; {forgotten}")),
        Outcome::Text(text) => Outcome::Text(format!("{text}({forgotten})\n")),
        Outcome::Dot(dot) => Outcome::Dot(format!("// {forgotten}\n{dot}")),
        other => other,
    }
}

/// The formats `trace` writes, chosen by the file's extension as `dep run --trace` chooses.
pub enum TraceFormat {
    /// Chrome's JSON (`.json`), which `dep replay` steps through.
    Chrome,
    /// Perfetto's protobuf (`.pftrace`, `.perfetto-trace`).
    Perfetto,
}

/// The format of a trace written to `path`, or why none: a name with another extension would
/// hold a format it does not say.
/// The trace format `path` names by its extension; an error that says which extensions do
/// for any other (`dep run --trace` and `trace` refuse it alike).
pub fn trace_format(path: &Path) -> Result<TraceFormat, String> {
    match path.extension().and_then(|extension| extension.to_str()) {
        Some("json") => Ok(TraceFormat::Chrome),
        Some("pftrace" | "perfetto-trace") => Ok(TraceFormat::Perfetto),
        _ => Err(format!(
            "`{}` names no trace format: FILE.json writes Chrome's JSON, FILE.pftrace Perfetto's protobuf",
            path.display()
        )),
    }
}

fn write_file(path: &Path, contents: impl AsRef<[u8]>, what: &str) -> Result<Outcome, String> {
    std::fs::write(path, contents)
        .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    Ok(Outcome::Note(format!(
        "wrote the {what} to {}",
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SessionConfig;

    /// A timeline's SPAN is at most a million seconds: one past the clock's range drew ticks
    /// forever.
    #[test]
    fn a_span_beyond_a_million_seconds_is_refused() {
        assert_eq!(parse_span("1000000s"), Some(1_000_000_000_000_000));
        assert_eq!(parse_span("2e10s"), None);
        assert_eq!(parse_span("0ms"), None);
        assert!(parse(':', "timeline t.svg 2e10s").is_err());
    }

    /// A wrong SPAN, or a file not ending in .svg, is refused with what was wrong: they were taken
    /// for file names, and SVG written to `0ms`, `abc` or `t3.txt`.
    #[test]
    fn a_timeline_refuses_a_wrong_span_and_a_file_not_svg() {
        for span in ["0ms", "-5ms", "5", "2e10s", "1.5parsecs"] {
            let error = parse(':', &format!("timeline {span}")).unwrap_err();
            assert!(
                error.starts_with(&format!("`{span}` is not a SPAN: ")),
                "{error}"
            );
        }
        for file in ["abc", "t3.txt", "t.svg.bak"] {
            let error = parse(':', &format!("timeline {file} 30ms")).unwrap_err();
            assert!(
                error.starts_with(&format!("`{file}` is not a FILE.svg: ")),
                "{error}"
            );
        }
        for file in [".svg", "out/.svg"] {
            let error = parse('%', &format!("timeline {file}")).unwrap_err();
            assert!(error.contains("names no file"), "{error}");
        }
        assert_eq!(
            parse(':', "timeline 2.5us out/t.svg"),
            Ok(Command::Timeline {
                path: Some("out/t.svg".into()),
                span_ns: Some(2_500)
            })
        );
    }

    #[test]
    fn commands_parse_with_their_arguments_under_either_sigil() {
        assert_eq!(parse(':', "why  Z "), Ok(Command::Why("Z".into())));
        assert_eq!(parse('%', "threads 4"), Ok(Command::Threads(4)));
        assert_eq!(
            parse('%', "engine threaded 4"),
            Ok(Command::Engine {
                ranks: None,
                policy: engine::Policy::Threaded,
                threads: Some(4)
            })
        );
        assert_eq!(
            parse(':', "engine sim"),
            Ok(Command::Engine {
                ranks: None,
                policy: engine::Policy::Sim,
                threads: None
            })
        );
        assert_eq!(
            parse(':', "timeline"),
            Ok(Command::Timeline {
                path: None,
                span_ns: None
            })
        );
        assert_eq!(
            parse('%', "timeline 30ms t.svg"),
            Ok(Command::Timeline {
                path: Some("t.svg".into()),
                span_ns: Some(30_000_000)
            })
        );
        assert_eq!(
            parse('%', "timeline a.svg b.svg"),
            Err("usage: %timeline [FILE.svg] [SPAN]".into())
        );
        assert_eq!(
            parse(':', "dag g.dot"),
            Ok(Command::Dag(Some("g.dot".into())))
        );
        assert_eq!(parse('%', "graph"), Ok(Command::Graph(None)));
        assert_eq!(parse('%', "watch off"), Ok(Command::Watch(false)));
        assert_eq!(parse(':', "q"), Ok(Command::Quit));
        assert_eq!(parse(':', "?"), Ok(Command::Help));
    }

    #[test]
    fn bad_commands_say_what_is_wrong_with_the_front_ends_sigil() {
        assert_eq!(parse(':', "why"), Err("usage: :why NAME".into()));
        assert_eq!(parse('%', "graph a b"), Err("usage: %graph [NAME]".into()));
        assert_eq!(parse(':', "vars x"), Err("usage: :vars".into()));
        assert!(parse('%', "engine warp")
            .unwrap_err()
            .contains("unknown engine"));
        assert!(parse(':', "threads 0")
            .unwrap_err()
            .contains("thread count"));
        assert_eq!(
            parse('%', "frobnicate"),
            Err("unknown command `%frobnicate`; %help lists the commands".into())
        );
    }

    #[test]
    fn the_help_lists_every_engine_policy() {
        let engine_line = help_lines('%')
            .into_iter()
            .find(|(usage, _)| usage.starts_with("%engine"))
            .expect("engine has a help line");
        for policy in engine::Policy::ALL {
            assert!(engine_line.0.contains(policy.name()), "{engine_line:?}");
        }
        assert_eq!(
            engine_line.0,
            "%engine naive|threaded|per-device|sim [THREADS] [--ranks N]"
        );
    }

    #[test]
    fn every_command_in_the_table_parses() {
        for info in COMMANDS {
            let example = info
                .args
                .replace("POLICY", "sim")
                .replace("[THREADS]", "")
                .replace("NAME", "x")
                .replace("on|off", "on")
                .replace('N', "2");
            let text = format!("{} {}", info.name, example);
            let text = text.split('[').next().unwrap_or("").trim();
            assert!(parse(':', text).is_ok(), "{text}: {:?}", parse(':', text));
        }
    }

    /// What `:why NAME` says, which must be text.
    fn why_text(session: &mut Session, name: &str) -> String {
        match run(session, Command::Why(name.into())) {
            Ok(Outcome::Text(text)) => text,
            Err(message) => panic!("why {name} gives text: {message}"),
            Ok(_) => panic!("why {name} gives text"),
        }
    }

    /// A session on two worker threads with an event log, as the REPL's.
    fn observed_threaded_session() -> Session {
        Session::new(SessionConfig {
            observe: true,
            policy: engine::Policy::Threaded,
            threads: 2,
            ..SessionConfig::default()
        })
    }

    /// `ops` with no live op says what a live op is and where the others are, rather than
    /// showing an empty table, before any op and after a loop's have ended.
    #[test]
    fn ops_without_live_ops_says_why() {
        let mut session = observed_threaded_session();
        let ops = |session: &mut Session| match run(session, Command::Ops) {
            Ok(Outcome::Note(note)) => note,
            _ => panic!("ops with no live op gives a note"),
        };
        assert_eq!(ops(&mut session), NO_LIVE_OPS);
        session
            .run_source(
                "t.dep",
                "b = ones(4)\nfor i in 0..3 { b = b + 1 }",
                &mut std::io::sink(),
            )
            .unwrap();
        session.engine().wait_all();
        assert_eq!(ops(&mut session), NO_LIVE_OPS);
    }

    /// `ops` shows a running op's start, from the event log (a snapshot has none).
    #[test]
    fn ops_shows_when_a_running_op_started() {
        let mut session = observed_threaded_session();
        session
            .run_source("t.dep", "A = work(400, ones(2))", &mut std::io::sink())
            .unwrap();
        // Until the op is seen running.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let frame = loop {
            let Ok(Outcome::Live(LiveView::Ops, frame)) = run(&mut session, Command::Ops) else {
                panic!("ops shows a frame");
            };
            let running = frame
                .ops
                .iter()
                .any(|op| op.state == engine::OpState::Running);
            if running || std::time::Instant::now() > deadline {
                break frame;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        let op = frame
            .ops
            .iter()
            .find(|op| op.state == engine::OpState::Running)
            .expect("the op runs for 400 ms");
        assert!(
            op.started_ns.is_some_and(|start| start <= frame.time_ns),
            "{:?} {}",
            op.started_ns,
            frame.time_ns
        );
        session.engine().wait_all();
    }

    /// `trace t.pftrace` writes Perfetto's protobuf, as `dep run --trace t.pftrace` does (it
    /// wrote Chrome's JSON under that name), and a name of no trace format is refused.
    #[test]
    fn a_trace_is_written_in_the_format_its_extension_names() {
        let mut session = observed_threaded_session();
        session
            .run_source("t.dep", "A = ones(2)\nB = A + 1", &mut std::io::sink())
            .unwrap();
        session.engine().wait_all();
        let dir = tempfile::tempdir().unwrap();
        let (json, pftrace) = (dir.path().join("t.json"), dir.path().join("t.pftrace"));
        for path in [&json, &pftrace] {
            let Ok(Outcome::Note(note)) = run(&mut session, Command::Trace(path.clone())) else {
                panic!("trace writes a file");
            };
            assert!(note.ends_with(&path.display().to_string()), "{note}");
        }
        let json = views::trace::read_trace(&std::fs::read_to_string(json).unwrap());
        let pftrace = views::perfetto::read(&std::fs::read(pftrace).unwrap()).unwrap();
        assert!(json.is_ok());
        assert_eq!(pftrace.slices.len(), 2, "{pftrace:?}");
        for file in ["t.txt", "t", ".json.gz"] {
            let error = parse(':', &format!("trace {file}")).unwrap_err();
            assert!(
                error.starts_with(&format!("`{file}` names no trace format: ")),
                "{error}"
            );
        }
    }

    /// `threads` among simulated ranks is refused, the ranks kept, with how to change their
    /// lanes: it went back to one rank, and said so only in passing.
    #[test]
    fn threads_among_simulated_ranks_keeps_them_and_says_how_to_change_lanes() {
        let mut session = observed_threaded_session();
        let ranks = Command::Engine {
            policy: engine::Policy::Sim,
            threads: None,
            ranks: Some(2),
        };
        assert!(matches!(
            run(&mut session, ranks),
            Ok(Outcome::EngineReplaced(_))
        ));
        let Err(error) = run(&mut session, Command::Threads(3)) else {
            panic!("threads among ranks is refused");
        };
        assert!(error.contains("`engine sim 3 --ranks 2`"), "{error}");
        assert_eq!(session.ranks(), 2);
        assert!(session.peers().is_some());
    }

    /// `why` of a name first assigned inside a recorded graph says that it is the graph's own
    /// buffer, as `print` does, while no run uses it: it said `Z is ready: nothing reads or
    /// writes it now` of a name `print` and `:vars` do not know.
    #[test]
    fn why_of_a_graphs_own_buffer_says_what_it_is() {
        let mut session = observed_threaded_session();
        let source = "X = ones(2)\ngraph g { Z = X + 1 }";
        session
            .run_source("t.dep", source, &mut std::io::sink())
            .unwrap();
        for _ in 0..2 {
            let error = run(&mut session, Command::Why("Z".into())).err();
            assert_eq!(
                error.as_deref(),
                Some(
                    "`Z` is first assigned inside graph `g`, so it is the graph's own buffer, \
                     not kept after a run; assign `Z` before `graph g` to read it"
                )
            );
            session
                .run_source("t.dep", "run g", &mut std::io::sink())
                .unwrap();
            session.wait_all();
        }
        // While a run uses it, the live queues answer for it.
        session
            .run_source(
                "t.dep",
                "Y = work(800, X)\nX = Y\nrun g",
                &mut std::io::sink(),
            )
            .unwrap();
        let text = why_text(&mut session, "Z");
        assert!(text.starts_with("Z will be written by Z = X + 1"), "{text}");
        session.cancel();
    }

    /// `why` of a list or of a slot past its end, `dag .svg` and `engine sim --ranks` without N
    /// say what is wrong: they said "no variable named", "no graph named `.svg`" and "`--ranks`
    /// is not a thread count".
    #[test]
    fn a_list_a_bare_extension_and_ranks_without_a_number_are_explained() {
        let mut session = observed_threaded_session();
        session
            .run_source("t.dep", "x = slots(3)", &mut std::io::sink())
            .unwrap();
        assert_eq!(
            run(&mut session, Command::Why("x".into())).err().as_deref(),
            Some("`x` is a list of 3 slots: ask why of one of them, `x[i]` for i from 0 to 2")
        );
        // A slot past the list's end is out of its range, not an unknown variable.
        assert_eq!(
            run(&mut session, Command::Why("x[5]".into()))
                .err()
                .as_deref(),
            Some("`x[5]` is not one of the list's slots: `x` holds 3 slots, `x[0]` to `x[2]`")
        );
        assert!(run(&mut session, Command::Why("x[2]".into())).is_ok());
        for file in [".svg", ".dot"] {
            let error = run(&mut session, Command::Dag(Some(file.into()))).err();
            assert!(
                error
                    .as_deref()
                    .is_some_and(|error| error.starts_with(&format!(
                        "`{file}` names no file: give a name before the extension"
                    ))),
                "{error:?}"
            );
        }
        // A file of another kind is not taken for a graph's name.
        for file in ["t.png", "out/dag"] {
            assert_eq!(
                run(&mut session, Command::Dag(Some(file.into()))).err(),
                Some(format!(
                    "`{file}` is not a FILE.dot or FILE.svg: the DAG is written as Graphviz's DOT or, through it, as SVG"
                ))
            );
        }
        for args in ["sim --ranks", "sim 2 --ranks"] {
            assert_eq!(
                parse(':', &format!("engine {args}")),
                Err("--ranks needs a number of ranks: :engine sim --ranks N".into())
            );
        }
    }

    /// The entries of a list made with `slots(n)` are variables like any other: `:vars` lists
    /// them and `:why` explains them, named as a script reads them (`w[1]`).
    #[test]
    fn slots_entries_are_listed_and_explained() {
        let mut session = observed_threaded_session();
        let mut sink = std::io::sink();
        session
            .run_source(
                "cell[1]",
                "A = ones(2)\nw = slots(2)\nset(w, 0, A + 1)",
                &mut sink,
            )
            .unwrap();
        // Done before the cancel below, which would cancel it too otherwise.
        session.engine().wait_all();
        session
            .run_source("cell[2]", "B = work(1000, A)\nset(w, 1, B * 2)", &mut sink)
            .unwrap();
        let Ok(Outcome::Text(text)) = run(&mut session, Command::Why("w[1]".into())) else {
            panic!("why gives text");
        };
        session.cancel();
        assert!(
            text.starts_with(
                "w[1] will be written by set(w, 1, B * 2) (cell[2]:2), which waits for B"
            ),
            "{text}"
        );
        session.engine().wait_all();
        let Ok(Outcome::Table { rows, .. }) = run(&mut session, Command::Vars) else {
            panic!("vars gives a table");
        };
        let names: Vec<&str> = rows.iter().map(|row| row[0].as_str()).collect();
        assert_eq!(names, ["A", "B", "w[0]", "w[1]"]);
        assert_eq!(rows[2][1..], ["[2]", "cpu", "ready"]);
        assert_eq!(
            run(&mut session, Command::Why("w[2]".into())).err(),
            Some(
                "`w[2]` is not one of the list's slots: `w` holds 2 slots, `w[0]` to `w[1]`"
                    .to_string()
            )
        );
    }

    /// `:timeline` while an op runs draws it up to now: the wall time is the run's so far, not
    /// the time of its last event.
    #[test]
    fn a_timeline_during_a_run_reaches_now() {
        let mut session = observed_threaded_session();
        session
            .run_source("t.dep", "A = work(500)", &mut std::io::sink())
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let timeline = Command::Timeline {
            path: None,
            span_ns: None,
        };
        let Ok(Outcome::Timeline(replay, _)) = run(&mut session, timeline) else {
            panic!("timeline gives a replay");
        };
        session.cancel();
        let (start, end) = replay.span_ns();
        assert!(end - start >= 200_000_000, "{} ns", end - start);
    }

    /// A variable with nothing pending is ready only when it holds a value: an entry of
    /// `slots(n)` never set has none, and a variable whose last write failed holds an error.
    #[test]
    fn a_variable_without_a_value_is_not_called_ready() {
        let mut session = Session::new(SessionConfig::default());
        let mut sink = std::io::sink();
        session
            .run_source(
                "t.dep",
                "x = slots(2)\nA = ones(2)\nC = A @ ones(3, 3)",
                &mut sink,
            )
            .ok();
        session.engine().wait_all();
        let Ok(Outcome::Table { rows, .. }) = run(&mut session, Command::Vars) else {
            panic!("vars gives a table");
        };
        let states: Vec<&str> = rows.iter().map(|row| row[3].as_str()).collect();
        assert_eq!(states[0], "ready");
        assert!(states[1].starts_with("failed: matmul"), "{states:?}");
        assert_eq!(states[2..], ["no value", "no value"]);
        let why = why_text;
        assert!(why(&mut session, "x[0]")
            .starts_with("x[0] has no value: nothing reads or writes it now\n"),);
        let text = why(&mut session, "C");
        assert!(
            text.starts_with("C failed: nothing reads or writes it now\n"),
            "{text}"
        );
        assert!(text.contains("\nC holds an error: matmul"), "{text}");
        assert!(why(&mut session, "A").starts_with("A is ready: "));
    }

    /// A variable whose only write was cancelled has no value, and `:why` says so; one that
    /// had a value keeps it. (It said both keep what the last write that ran left.) `A` runs
    /// long enough for both answers to come while the cancelled writes still wait behind it, on
    /// a loaded machine too (with 400 ms, a CI run saw B's cancelled write already ended).
    #[test]
    fn why_a_cancelled_only_write_leaves_no_value() {
        let mut session = observed_threaded_session();
        let source = "B = ones(2)\nwait\nA = work(3000, ones(2))\nY = A + 1\nB = A * 2";
        session
            .run_source("t.dep", source, &mut std::io::sink())
            .unwrap();
        session.cancel();
        let text = why_text(&mut session, "Y");
        assert!(
            text.starts_with(
                "Y will not be written: Y = A + 1 (t.dep:4) was cancelled before it started, \
                 and Y will have no value: no write of it ran\n"
            ),
            "{text}"
        );
        let text = why_text(&mut session, "B");
        assert!(
            text.contains(&format!("and B {}\n", views::Frame::KEEPS_ITS_VALUE)),
            "{text}"
        );
        session.engine().wait_all();
    }

    /// `:why` answers for a temporary the views show (a function's result, `return#1`, its
    /// local `h'`) while it is live, and says what it was once it is gone: it said "no variable
    /// named".
    #[test]
    fn why_answers_for_a_live_temporary_and_says_what_a_gone_one_was() {
        let mut session = observed_threaded_session();
        let mut sink = std::io::sink();
        session
            .run_source(
                "t.dep",
                "def f(x) {\n  h = work(1000, x)\n  return h + 1\n}\nA = ones(2)\nB = f(A) * 2",
                &mut sink,
            )
            .unwrap();
        let [result, local] = ["return#1", "h'"].map(|name| why_text(&mut session, name));
        session.cancel();
        assert!(
            result.contains("return#1") && result.contains("return h + 1"),
            "{result}"
        );
        // The call has returned: the local's deletion is pushed, behind the write it waits for.
        assert!(
            local.starts_with("h' will be written by h = work(1000, x) (t.dep:2), ")
                && local.ends_with("; then del h' (t.dep:6) deletes it\n"),
            "{local}"
        );
        session.engine().wait_all();
        for name in ["return#1", "h'"] {
            let Err(gone) = why(&session, name) else {
                panic!("a gone temporary is an error");
            };
            assert!(gone.contains("no longer live"), "{gone}");
        }
    }

    /// `:why` of a name deleted while an op still reads it answers from the live frame (the
    /// views show it `A (deleted)`), naming the deletion last; once it is gone, no variable
    /// has that name.
    #[test]
    fn why_answers_for_a_deleted_name_while_ops_still_use_it() {
        let mut session = observed_threaded_session();
        let mut sink = std::io::sink();
        session
            .run_source("t.dep", "A = ones(2)\nB = work(1000, A)\ndel A", &mut sink)
            .unwrap();
        let text = why_text(&mut session, "A");
        session.cancel();
        assert!(
            text.starts_with("A ") && text.ends_with("; then del A (t.dep:3) deletes it\n"),
            "{text}"
        );
        session.engine().wait_all();
        let Err(gone) = run(&mut session, Command::Why("A".into())) else {
            panic!("a name gone is an error");
        };
        assert_eq!(gone, "no variable named `A`");
    }

    /// `:why` of a function's name says it is a function, where its `def` is, and what to ask
    /// instead; of a builtin's or a recorded graph's name, what they are: each said "no variable
    /// named", as of a typo.
    #[test]
    fn why_of_a_function_a_builtin_or_a_graph_says_what_it_is() {
        let mut session = observed_threaded_session();
        let mut sink = std::io::sink();
        session
            .run_source("cell[1]", "A = ones(2)", &mut sink)
            .unwrap();
        let define = "B = A + 1\ndef f(x, y) {\n  return x + y\n}\ngraph g { C = A * 2 }";
        session.run_source("cell[2]", define, &mut sink).unwrap();
        let why_error =
            |session: &mut Session, name: &str| match run(session, Command::Why(name.into())) {
                Err(message) => message,
                Ok(_) => panic!("why {name} is an error"),
            };
        assert_eq!(
            why_error(&mut session, "f"),
            "`f` is a function (`def f(x, y)`, defined at cell[2]:2), not a variable: why \
             explains the ops of a variable; ask it of a variable a call writes (`y = f(...)`, then \
             why of `y`)"
        );
        assert!(
            why_error(&mut session, "matmul").starts_with("`matmul` is a builtin, not a variable"),
        );
        assert!(why_error(&mut session, "g")
            .ends_with("`graph g` reports the graph's ops and `dag g` draws them"),);
        assert_eq!(why_error(&mut session, "nope"), "no variable named `nope`");
        // A variable of the name is what why explains.
        session
            .run_source("cell[3]", "f = ones(2)", &mut sink)
            .unwrap();
        session.engine().wait_all();
        assert!(why_text(&mut session, "f").starts_with("f is ready"));
    }

    /// A call in one input names its locals apart from those of a call in an earlier input
    /// still in flight: the names are the session's, not one input's.
    #[test]
    fn locals_of_calls_from_two_inputs_in_flight_are_named_apart() {
        let mut session = observed_threaded_session();
        let mut sink = std::io::sink();
        let define = "def f(x) {\n  h = work(1000, x)\n  return h + 1\n}\nA = ones(2)\nB = f(A)";
        session.run_source("cell[1]", define, &mut sink).unwrap();
        session
            .run_source("cell[2]", "C = f(A)", &mut sink)
            .unwrap();
        let names: Vec<String> = (live_frame(&session).vars.iter())
            .map(|var| var.name.to_string())
            .collect();
        session.cancel();
        for name in ["h' (deleted)", "h'2 (deleted)"] {
            assert!(names.iter().any(|shown| shown == name), "{name}: {names:?}");
        }
    }

    /// `:why` and the views name a line by its input (`cell[2]:2`), as error reports do,
    /// not by its number in the session.
    #[test]
    fn why_names_lines_by_their_input() {
        let mut session = observed_threaded_session();
        let mut sink = std::io::sink();
        session
            .run_source("cell[1]", "A = ones(2)\nB = ones(2)", &mut sink)
            .unwrap();
        session
            .run_source("cell[2]", "B = work(1000, A)\nC = B + 1", &mut sink)
            .unwrap();
        let Ok(Outcome::Text(text)) = run(&mut session, Command::Why("C".into())) else {
            panic!("why gives text");
        };
        session.cancel();
        assert!(
            text.starts_with("C will be written by C = B + 1 (cell[2]:2), which waits for B: written by B = work(1000, A) (cell[2]:1)"),
            "{text}"
        );
        session.engine().wait_all();
        let timeline = Command::Timeline {
            path: None,
            span_ns: None,
        };
        let Ok(Outcome::Timeline(replay, _)) = run(&mut session, timeline) else {
            panic!("timeline gives a replay");
        };
        let places: Vec<Option<&str>> = replay.ops().iter().map(|op| op.place.as_deref()).collect();
        assert_eq!(
            places,
            [
                Some("cell[1]:1"),
                Some("cell[1]:2"),
                Some("cell[2]:1"),
                Some("cell[2]:2")
            ]
        );
    }

    /// A graph's report while its run goes says that its memory figures are partial; after the
    /// run, it gives them without that note.
    #[test]
    fn a_graphs_report_during_its_run_says_its_memory_is_partial() {
        let mut session = Session::new(SessionConfig::default());
        session
            .run_source(
                "g.dep",
                "a = ones(4)\ngraph g {\n  b = work(300, a)\n  a = b + 1\n}\nrun g",
                &mut std::io::sink(),
            )
            .unwrap();
        let report = |session: &mut Session| match run(session, Command::Graph(Some("g".into()))) {
            Ok(Outcome::Text(text)) => text,
            _ => panic!("a graph's report is text"),
        };
        let during = report(&mut session);
        assert!(during.contains("(ops are still running: "), "{during}");
        session.engine().wait_all();
        let after = report(&mut session);
        assert!(!after.contains("still running"), "{after}");
        assert!(after.contains("peak memory per run: eager "), "{after}");
    }

    #[test]
    fn commands_run_on_a_session() {
        let mut session = Session::new(SessionConfig {
            observe: true,
            ..SessionConfig::default()
        });
        session
            .run_source("t.dep", "A = ones(2)\nB = A + 1", &mut std::io::sink())
            .unwrap();
        session.engine().wait_all();
        let Ok(Outcome::Text(text)) = run(&mut session, Command::Why("B".into())) else {
            panic!("why gives text");
        };
        // Nothing pending: the log says whether its last write waited (it may have waited
        // for A's, on the threaded engine).
        assert!(
            text.starts_with(
                "B is ready: nothing reads or writes it now\n\
                 B was last written by B = A + 1 (t.dep:2), which "
            ),
            "{text}"
        );
        assert_eq!(
            run(&mut session, Command::Why("nope".into())).err(),
            Some("no variable named `nope`".to_string())
        );
        let Ok(Outcome::Table { rows, .. }) = run(&mut session, Command::Vars) else {
            panic!("vars gives a table");
        };
        assert_eq!(rows.len(), 2);
        let Ok(Outcome::Dot(dot)) = run(&mut session, Command::Dag(None)) else {
            panic!("dag gives DOT");
        };
        assert!(dot.contains("B = A + 1"), "{dot}");
        // A log that began after A was made (a notebook's next cell) still names it.
        if let Some(log) = session.event_log() {
            log.clear();
        }
        session
            .run_source("t.dep", "C = A * 2\nA = ones(2)", &mut std::io::sink())
            .unwrap();
        session.engine().wait_all();
        let Ok(Outcome::Dot(dot)) = run(&mut session, Command::Dag(None)) else {
            panic!("dag gives DOT");
        };
        assert!(dot.contains("label=\"A WAR\""), "{dot}");
        // A long loop's DAG on the screen: its last ops, and a line saying how to get them all.
        session
            .run_source(
                "loop.dep",
                "for i in 0..200 { C = C + 1 }",
                &mut std::io::sink(),
            )
            .unwrap();
        session.engine().wait_all();
        let Ok(Outcome::Dot(dot)) = run(&mut session, Command::Dag(None)) else {
            panic!("dag gives DOT");
        };
        assert!(dot.starts_with("// the last 100 of 202 ops: "), "{dot}");
        assert_eq!(dot.matches("[label=\"C = C + 1\\n").count(), 100, "{dot}");
        assert!(dot.contains("earlier [label=\"… 102 earlier ops (of 202) not drawn\""));
        // As SVG, the last ops Graphviz lays out in seconds, and a note saying so; without
        // Graphviz, an error saying how to get it.
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("g.svg");
        match run(&mut session, Command::Dag(Some(svg.display().to_string()))) {
            Ok(Outcome::Note(note)) => {
                assert!(note.ends_with("g.svg: its last 200 of 202 ops (Graphviz takes minutes to lay out more; a FILE.dot gets every op)"), "{note}");
                let svg = std::fs::read_to_string(&svg).unwrap();
                assert!(svg.contains("… 2 earlier ops (of 202) not drawn"), "{svg}");
            }
            Err(error) => assert!(error.contains("install graphviz"), "{error}"),
            Ok(_) => panic!("dag FILE.svg writes a file"),
        }
        assert_eq!(
            run(&mut session, Command::Graph(Some("g".into()))).err(),
            Some("no graph named `g`: `graph g { ... }` records one".to_string())
        );
        let Ok(Outcome::EngineReplaced(note)) = run(&mut session, Command::Threads(2)) else {
            panic!("threads replaces the engine");
        };
        assert!(
            note.ends_with("2 CPU worker threads; every variable kept"),
            "{note}"
        );
        // The naive engine has no CPU workers to count, and the simulator's are virtual lanes.
        let switch = |session: &mut Session, policy| {
            let command = Command::Engine {
                policy,
                threads: Some(3),
                ranks: None,
            };
            match run(session, command) {
                Ok(Outcome::EngineReplaced(note)) => note,
                _ => panic!("engine replaces the engine"),
            }
        };
        assert_eq!(
            switch(&mut session, engine::Policy::Naive),
            "engine: naive, every op runs on main, the thread that pushes it (3 CPU worker threads kept for the other engines); every variable kept"
        );
        assert_eq!(
            switch(&mut session, engine::Policy::Sim),
            "engine: sim, 3 simulated CPU lanes; every variable kept"
        );
        assert_eq!(
            switch(&mut session, engine::Policy::PerDevice),
            "engine: per-device, 3 CPU worker threads, and a worker per GPU stream; every variable kept"
        );
        assert_eq!(
            workers_phrase(engine::Policy::Threaded, 1),
            "1 CPU worker thread"
        );
    }
}

#[cfg(test)]
mod rank_tests {
    use super::*;
    use crate::driver::{Driver, Input, Listener};
    use crate::SessionConfig;

    struct Kept(Vec<u8>);

    impl Listener for Kept {
        fn output(&mut self) -> &mut dyn std::io::Write {
            &mut self.0
        }
    }

    /// Runs `source` as a cell through `driver`, waits for it; its output, or its error.
    fn cell(driver: &Driver, session: &mut Session, source: &str) -> Result<String, String> {
        let mut kept = Kept(Vec::new());
        let outcome = driver.run(session, &Input::new("cell", source), 0, &mut kept);
        let waited = driver.wait(session, 0);
        match outcome.error.or(waited.failures) {
            Some(error) => Err(error.to_string()),
            None => Ok(String::from_utf8(kept.0).expect("utf-8")),
        }
    }

    #[test]
    fn engine_sim_with_ranks_runs_every_input_on_every_rank() {
        assert_eq!(
            parse('%', "engine sim --ranks 4"),
            Ok(Command::Engine {
                policy: engine::Policy::Sim,
                threads: None,
                ranks: Some(4),
            })
        );
        assert!(parse(':', "engine threaded --ranks 4")
            .unwrap_err()
            .contains(":engine sim --ranks N"));
        assert!(parse(':', "engine sim --ranks 0")
            .unwrap_err()
            .contains("from 1 to 64"));
        let driver = Driver::new(1);
        let mut session = Session::new(SessionConfig::default());
        cell(&driver, &mut session, "A = ones(2)").unwrap();
        let Ok(Outcome::EngineReplaced(note)) =
            run(&mut session, parse('%', "engine sim --ranks 4").unwrap())
        else {
            panic!("engine gives a note");
        };
        assert!(note.contains("4 simulated ranks"), "{note}");
        assert!(session.names().is_empty(), "a fresh start");
        let out = cell(
            &driver,
            &mut session,
            "x = ones(2) * (rank() + 1)\nx = allreduce(x)\nprint rank(), ranks(), x",
        );
        assert_eq!(out, Ok("0 4 [10. 10.]\n".to_string()));
        // Later inputs see each rank's names, and keep matching.
        let out = cell(&driver, &mut session, "y = allreduce(x)\nprint y");
        assert_eq!(out, Ok("[40. 40.]\n".to_string()));
        // Another rank's error is reported with its rank, and ends the job.
        let error = cell(
            &driver,
            &mut session,
            "with rank = 2 { z = ones(2) @ ones(3) }\nprint 1",
        )
        .unwrap_err();
        assert!(error.contains("error (rank 2): matmul"), "{error}");
        let error = cell(&driver, &mut session, "w = allreduce(x)\nprint w").unwrap_err();
        assert!(error.contains("the job ended"), "{error}");
        // A reset starts a new job of as many ranks.
        run(&mut session, Command::Reset).unwrap();
        let out = cell(&driver, &mut session, "v = allreduce(ones(1))\nprint v");
        assert_eq!(out, Ok("[4.]\n".to_string()));
        // Another engine: one rank again, rank 0's names kept.
        run(&mut session, parse(':', "engine threaded").unwrap()).unwrap();
        let out = cell(&driver, &mut session, "print ranks(), allreduce(v)");
        assert!(out.is_err(), "allreduce is a statement: {out:?}");
        let out = cell(&driver, &mut session, "u = allreduce(v)\nprint ranks(), u");
        assert_eq!(out, Ok("1 [4.]\n".to_string()));
    }
}
