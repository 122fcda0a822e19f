//! The session: the names a user has defined, the engine they live in, and the entry point that
//! turns source text into pushes (`run_source`). The REPL, the Jupyter kernel and `dep run` all
//! drive this one API.

// FxHash: names are looked up on every statement; nothing here needs DoS-resistant hashing.
use rustc_hash::FxHashMap as HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dep_engine as engine;
use dep_grammar as grammar;

use crate::bindings::{Binding, Function};
use crate::error::{ErrorKind, Report, RunError};
use crate::exec::{Runner, Scope};
use crate::local_names::LocalNames;
use crate::slot::{RngSlot, Slot, SlotMover};
use crate::sources::SourceChunk;
use crate::tensor::{self, Tensor};

/// How a session runs.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// The engine policy and worker count.
    pub policy: engine::Policy,
    /// Worker threads of the CPU pool.
    pub threads: usize,
    /// Keep an event log of everything the engine does, for views and traces.
    pub observe: bool,
    /// With `observe`, no view reads the grants that come after a push (the summary and
    /// Perfetto traces): the log drops them ([`engine::EventLog::without_later_grants`]).
    pub lean_log: bool,
    /// Show the value of an expression statement (`X + 1` alone), as a REPL or notebook does.
    pub show_expression_values: bool,
    /// With `observe`, the most events the log keeps, the oldest forgotten beyond
    /// ([`engine::EventLog::keeping_at_most`]): a REPL's or a notebook's log, which no reader
    /// streams; 0 keeps them all.
    pub kept_events: u64,
    /// A batch run (`dep run`): it ends after its one input, so an interrupt's message tells
    /// what the run did, not what a later input could do.
    pub batch: bool,
}

/// How many events a REPL's or a notebook's log keeps: about 330,000 statements of a loop
/// (some 100 MB), so that a long loop runs in bounded memory while `:timeline`, `:why` and the
/// like see the recent past.
pub const INTERACTIVE_KEPT_EVENTS: u64 = 2_000_000;

/// The fewest events a log with a limit may keep: the interpreter runs a few thousand ops (tens
/// of thousands of events) ahead of the workers, so a smaller log would hold the ends of ops
/// whose pushes it forgot, and show nothing.
pub const MIN_KEPT_EVENTS: u64 = 100_000;

/// The events a REPL's or a notebook's log keeps: `DEP_LOG_EVENTS` when set (0: all of them),
/// else [`INTERACTIVE_KEPT_EVENTS`].
pub fn interactive_kept_events() -> Result<u64, String> {
    let Ok(text) = std::env::var("DEP_LOG_EVENTS") else {
        return Ok(INTERACTIVE_KEPT_EVENTS);
    };
    match text.trim().parse::<u64>() {
        Ok(n) if n == 0 || n >= MIN_KEPT_EVENTS => Ok(n),
        _ => Err(format!(
            "DEP_LOG_EVENTS: `{text}` is not a number of events to keep (at least \
             {MIN_KEPT_EVENTS}, or 0 for all of them)"
        )),
    }
}

impl Default for SessionConfig {
    fn default() -> SessionConfig {
        let engine_config = engine::EngineConfig::default();
        SessionConfig {
            policy: engine_config.policy,
            threads: engine_config.threads,
            observe: false,
            lean_log: false,
            show_expression_values: false,
            kept_events: 0,
            batch: false,
        }
    }
}

/// A summary of one variable, for `:vars` and inspection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VariableInfo {
    /// The name.
    pub name: String,
    /// The shape, when the value is computed.
    pub shape: Option<Vec<usize>>,
    /// Where it lives.
    pub device: String,
    /// `ready`, `pending` (an op writing it has not finished), `failed: ...` or `no value`
    /// (nothing wrote it, or its writes were cancelled).
    pub state: String,
}

/// The state a user builds up: names, functions, the RNG and the engine that runs it all.
pub struct Session {
    pub(crate) engine: engine::Engine,
    pub(crate) log: Option<Arc<engine::EventLog>>,
    pub(crate) config: SessionConfig,
    pub(crate) globals: HashMap<String, Binding>,
    pub(crate) functions: HashMap<String, Arc<Function>>,
    pub(crate) rng: Arc<RngSlot>,
    pub(crate) sources: Vec<SourceChunk>,
    /// Lines run so far, so that each input's lines get session-wide numbers.
    pub(crate) lines_so_far: u32,
    /// Each input's place, for views that name lines as the reader numbers them.
    places: dep_views::Places,
    /// Counter for names of temporaries.
    pub(crate) n_temporaries: u64,
    /// The engine's names of the functions' locals, session-wide: a call in one input names
    /// its locals apart from those of a call in an earlier input still in flight.
    local_names: LocalNames,
    /// Recorded graphs, by name.
    pub(crate) graphs: HashMap<String, crate::graph::Graph>,
    /// Failures already reported (by a `print` or `wait`), not to report twice.
    pub(crate) reported: Vec<Arc<engine::OpError>>,
    /// The calls and loop iterations each op was pushed within, for the reports of those that
    /// fail.
    pub(crate) pushed_within: crate::pushed_within::PushedWithin,
    /// Asked before each statement: whether the user interrupted (Ctrl-C, a kernel interrupt).
    pub(crate) interrupt_check: Option<InterruptCheck>,
    /// Asked while a `print` or `wait` blocks: whether the user gave up waiting (a second
    /// Ctrl-C); the ops go on, the input stops.
    pub(crate) abandon_check: Option<InterruptCheck>,
    /// How this rank talks to the others (one rank alone by default).
    pub(crate) comm: Arc<dyn crate::comm::Communicator>,
    /// The numbering of communications, in push order.
    pub(crate) comm_counters: crate::comm::CommCounters,
    /// Ranks 1..N when this session is rank 0 of ranks simulated in this process (the REPL's
    /// and the kernel's `engine sim --ranks N`): the driver runs every input on them too.
    peers: Option<crate::comm::PeerRanks>,
    /// Failures of simulated ranks that were let go (`:engine` back to one rank) before they
    /// were reported: the next [`Session::take_failures`] reports them.
    peer_errors: Vec<RunError>,
    /// The ops numbered below it that had not finished when [`Session::let_go_unfinished`]
    /// let them go: [`Session::n_unfinished`] and [`Session::wait_all`] leave them out while
    /// one of them runs (0: none let go).
    let_go_below: AtomicU64,
}

/// Says whether the user asked to stop (see [`Session::set_interrupt_check`]).
pub type InterruptCheck = Box<dyn Fn() -> bool + Send>;

impl Session {
    /// A new, empty session with its own engine.
    pub fn new(config: SessionConfig) -> Session {
        let log = new_log(&config);
        let engine = new_engine(&config, log.clone());
        let rng = Arc::new(RngSlot {
            var: engine.new_var("rng"),
            rng: Mutex::new(tensor::seeded_rng(0)),
            gpu_rng: Mutex::new(crate::gpu::GpuRng::seeded(0)),
        });
        Session {
            engine,
            log,
            config,
            globals: HashMap::default(),
            functions: HashMap::default(),
            rng,
            sources: Vec::new(),
            lines_so_far: 0,
            places: dep_views::Places::default(),
            n_temporaries: 0,
            local_names: LocalNames::default(),
            reported: Vec::new(),
            pushed_within: Default::default(),
            interrupt_check: None,
            abandon_check: None,
            graphs: HashMap::default(),
            comm: crate::comm::LocalRanks::solo(),
            comm_counters: crate::comm::CommCounters::default(),
            peers: None,
            peer_errors: Vec::new(),
            let_go_below: AtomicU64::new(0),
        }
    }

    /// Where each input's lines are, to name an op's session-wide line as the reader numbers
    /// it (`cell[3]:1`, `<repl>:1`): for `Frame::name_places` and `Replay::name_places`. The
    /// handle sees inputs run later too.
    pub fn places(&self) -> dep_views::Places {
        self.places.clone()
    }

    /// Makes this session one rank of a job: `rank()`, `ranks()`, `with rank = K` and the
    /// communication statements, those of recorded graphs included, go through `comm`.
    pub fn set_communicator(&mut self, comm: Arc<dyn crate::comm::Communicator>) {
        for graph in self.graphs.values_mut() {
            graph.set_communicator(&comm);
        }
        self.comm = comm;
        self.comm_counters = crate::comm::CommCounters::default();
    }

    /// Makes this session rank 0 of ranks simulated in this process, `peers` the others (or,
    /// with `None`, a process alone again: one rank): the driver runs every input on them too
    /// (see `comm::PeerRanks`).
    pub fn set_peers(&mut self, peers: Option<crate::comm::PeerRanks>) {
        if peers.is_none() {
            self.set_communicator(crate::comm::LocalRanks::solo());
        }
        // The ranks left behind finish their ops first; their failures are reported by the
        // next `take_failures`, not lost with them.
        if let Some(old) = std::mem::replace(&mut self.peers, peers) {
            self.peer_errors
                .extend(old.wait(&|| 0).into_iter().flat_map(|report| report.errors));
        }
    }

    /// The other ranks this session runs its inputs with, when it is rank 0 of simulated ranks.
    pub fn peers(&self) -> Option<&crate::comm::PeerRanks> {
        self.peers.as_ref()
    }

    /// This session's rank, from 0.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// How many ranks the job has.
    pub fn ranks(&self) -> usize {
        self.comm.size()
    }

    /// The session's configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// The engine the session pushes into: the interpreter's own; front-ends go through the
    /// session's methods and [`Session::monitor`].
    pub(crate) fn engine(&self) -> &engine::Engine {
        &self.engine
    }

    /// A handle that watches this session's engine from any thread: snapshots (queues, op
    /// states, what each waiting op waits behind), unfinished ops, the engine's clock. After
    /// `set_engine` or `reset`, take a new one.
    pub fn monitor(&self) -> engine::Monitor {
        self.engine.monitor()
    }

    /// Where a live view of this session is read from, by any thread, titled `title` (`cell[3]`,
    /// `<repl>`): the engine's monitor and event log and the inputs' places. `None` when the
    /// session keeps no event log. After `set_engine` or `reset`, take a new one.
    pub fn live(&self, title: &str) -> Option<dep_views::live::LiveSource> {
        Some(dep_views::live::LiveSource {
            title: title.to_string(),
            policy: self.engine.policy(),
            monitor: self.engine.monitor(),
            log: self.log.clone()?,
            places: self.places(),
        })
    }

    /// How many pushed ops have not finished, leaving out those let go
    /// ([`Session::let_go_unfinished`]).
    pub fn n_unfinished(&self) -> usize {
        let n_unfinished = self.engine.n_unfinished();
        let below = self.let_go_below.load(Ordering::SeqCst);
        if below == 0 {
            return n_unfinished;
        }
        if n_unfinished > 0 {
            // Read after the count: an op that finishes in between is counted there only, so
            // the ops left are never undercounted.
            let (n_let_go, n_others) = self.unfinished_around(below);
            if n_let_go > 0 {
                return n_others;
            }
        }
        // Every op let go has finished: the count is the engine's again.
        let _ = self
            .let_go_below
            .compare_exchange(below, 0, Ordering::SeqCst, Ordering::SeqCst);
        n_unfinished
    }

    /// Lets go of every op that has not finished (a notebook cell interrupted twice stops
    /// waiting for its running ops, which go on): the ends of later inputs
    /// ([`Session::n_unfinished`], [`Session::wait_all`]) no longer wait for them. An op that
    /// reads what they write still waits for them, and so does an input that waits for it.
    pub fn let_go_unfinished(&self) {
        let last = self
            .engine
            .snapshot()
            .ops
            .iter()
            .filter(|op| !op.state.is_finished())
            .map(|op| op.id.0)
            .max();
        if let Some(last) = last {
            self.let_go_below.fetch_max(last + 1, Ordering::SeqCst);
        }
    }

    /// How many unfinished ops a snapshot shows numbered below `below`, and from it on. An op
    /// cancelled before it started, still queued behind a running one, counts as finished: it
    /// will run nothing.
    fn unfinished_around(&self, below: u64) -> (usize, usize) {
        let mut counts = (0, 0);
        for op in self.engine.snapshot().ops {
            match (op.state.is_finished(), op.id.0 < below) {
                (true, _) => {}
                (false, true) => counts.0 += 1,
                (false, false) => counts.1 += 1,
            }
        }
        counts
    }

    /// Waits for every pushed op but those let go ([`Session::let_go_unfinished`]). Under the
    /// simulated policy, with none let go running, this also runs the virtual clock to its end,
    /// so that every op is in its final state at its virtual times.
    pub fn wait_all(&self) {
        while self.let_go_below.load(Ordering::SeqCst) != 0 && self.n_unfinished() > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        if self.let_go_below.load(Ordering::SeqCst) == 0 {
            self.engine.wait_all();
        }
    }

    /// Waits for every op and lets the engine go of what it kept of the statements it ran (see
    /// `engine::Engine::settle`), so that the memory in use counted next is the program's alone,
    /// whatever the engine: for the end of a run.
    pub fn settle(&self) {
        self.engine.settle();
    }

    /// [`Session::wait_all`] that gives up as soon as `give_up()` says so (asked every few
    /// milliseconds); says whether every op finished.
    pub fn wait_all_or(&self, give_up: &dyn Fn() -> bool) -> bool {
        self.engine.wait_all_or(give_up)
    }

    /// Nanoseconds on the engine's clock (real time since it started, or the virtual time of
    /// the simulated policy): the time the events' stamps count in.
    pub fn now_ns(&self) -> u64 {
        self.engine.now_ns()
    }

    /// The names of the engine's workers, as views name their lanes.
    pub fn worker_names(&self) -> Vec<String> {
        self.engine.worker_names()
    }

    /// Forgets the events logged so far (the kernel's log holds only the last cell that ran
    /// code, for `%timeline` and its live display).
    pub fn forget_events(&self) {
        if let Some(log) = &self.log {
            log.clear();
        }
    }

    /// The event log, when the session observes its engine.
    pub fn event_log(&self) -> Option<&Arc<engine::EventLog>> {
        self.log.as_ref()
    }

    /// Parses `source` (named `path` in reports) and pushes its statements in order. Returns
    /// once every statement is pushed: only `print`, `save`, `wait` and expression values shown
    /// wait for ops. Parse errors are all reported at once and nothing runs; a statement error
    /// stops the run at that statement; the names defined so far stay.
    pub fn run_source(
        &mut self,
        path: &str,
        source: &str,
        out: &mut dyn Write,
    ) -> Result<(), RunError> {
        self.run_source_from_line(path, 1, source, out)
    }

    /// Like [`Session::run_source`], for text that starts at line `file_first_line` of `path`
    /// (statements read one by one from a pipe): reports then name the line in `path`.
    pub fn run_source_from_line(
        &mut self,
        path: &str,
        file_first_line: u32,
        source: &str,
        out: &mut dyn Write,
    ) -> Result<(), RunError> {
        let parsed = grammar::parse(source);
        self.run_parsed(path, file_first_line, source, &parsed, None, out, None)
    }

    /// Runs `source` that the caller parsed already (`parsed` is `grammar::parse(source)`), as
    /// [`Session::run_source_from_line`] does, so that a front-end which looks at the statements
    /// first (the driver, for a cell's trailing value) does not parse twice. `early_errors`:
    /// the mistakes the text alone shows (`crate::early_errors`), when the caller found them
    /// already for this session (`None`: they are found here). With `value_out`, a last
    /// statement that is an expression shows its value there rather than in `out`. Reports
    /// name places in `source` as written (`cell[3]:1:8`).
    // The input's parts as the driver holds them: bundling them would make a type only for
    // this call.
    #[allow(clippy::too_many_arguments)]
    pub fn run_parsed(
        &mut self,
        path: &str,
        file_first_line: u32,
        source: &str,
        parsed: &grammar::ParseOutput,
        early_errors: Option<&[grammar::Diagnostic]>,
        out: &mut dyn Write,
        value_out: Option<&mut dyn Write>,
    ) -> Result<(), RunError> {
        let file_first_line = file_first_line.max(1);
        let source: Arc<str> = Arc::from(source);
        let first_line = self.lines_so_far + 1;
        self.lines_so_far += grammar::LineIndex::new(&source).line_count() as u32;
        // Mistakes the text alone shows are reported with its syntax errors, before any of it
        // runs (see `early_errors`).
        let early;
        let diagnostics = match (parsed.diagnostics.is_empty(), early_errors) {
            (true, Some(early_errors)) => early_errors,
            (true, None) => {
                early =
                    crate::early_errors(&parsed.program, &|name| self.functions.contains_key(name));
                &early[..]
            }
            (false, _) => &parsed.diagnostics[..],
        };
        if !diagnostics.is_empty() {
            let line_index = grammar::LineIndex::new(&source);
            let reports = diagnostics
                .iter()
                .map(|diagnostic| Report {
                    message: diagnostic.message.clone(),
                    rendered: diagnostic.render_from_line(
                        path,
                        &line_index,
                        file_first_line as usize,
                    ),
                    line: line_index.line_column(diagnostic.span.start).line as u32
                        + file_first_line
                        - 1,
                    file: path.to_string(),
                    repeats: 0,
                    other_messages: None,
                    raised_here: false,
                })
                .collect();
            return Err(RunError {
                kind: ErrorKind::Parse,
                reports,
            });
        }
        self.sources.push(SourceChunk::new(
            path,
            first_line,
            file_first_line,
            source.clone(),
        ));
        self.places.add(first_line, path, file_first_line);
        let source_index = self.sources.len() - 1;
        let statements = &parsed.program.statements;
        match (value_out, statements.split_last()) {
            (Some(value_out), Some((last, rest)))
                if matches!(last.kind, grammar::StmtKind::Expr(_)) =>
            {
                Runner::new(self.scope(), source_index, out).run_statements(rest)?;
                Runner::new(self.scope(), source_index, value_out)
                    .run_statements(std::slice::from_ref(last))
            }
            _ => Runner::new(self.scope(), source_index, out).run_statements(statements),
        }
    }

    /// Waits for every pushed op and the GPUs' kernels (and for the kernel times of GPU ops,
    /// when observed, so that views drawn next show them), then reports the ops that failed and
    /// were not reported yet.
    pub fn finish(&mut self) -> Result<(), RunError> {
        self.engine.wait_all();
        // Every op done: the graphs' reports (the summary's) tell the sizes the last run left.
        for graph in self.graphs.values_mut() {
            graph.measure();
        }
        // A GPU op ends when its kernels are enqueued: the run ends once they have run, and a
        // fault of theirs is reported with the rest.
        let kernels = crate::gpu::synchronize_opened();
        self.wait_for_kernel_times();
        let unplaced =
            |error: crate::tensor::TensorError| crate::error::Report::unplaced(error.to_string());
        match (self.take_failures(), kernels) {
            (failures, Ok(())) => failures,
            (Ok(()), Err(error)) => Err(RunError::runtime(unplaced(error))),
            (Err(mut failures), Err(error)) => {
                failures.reports.push(unplaced(error));
                Err(failures)
            }
        }
    }

    /// When the engine is observed: waits (10 s at most) until the kernel times of the GPU ops
    /// that finished so far are in the event log, so that views drawn next show them.
    pub fn wait_for_kernel_times(&self) {
        self.wait_for_kernel_times_until(|| false);
    }

    /// Like [`Session::wait_for_kernel_times`], giving up as soon as `stop()` says so (an
    /// interrupt): it looks every 20 ms.
    pub fn wait_for_kernel_times_until(&self, stop: impl Fn() -> bool) {
        if !self.engine.is_observed() {
            return;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !crate::gpu::flush_kernel_times(std::time::Duration::from_millis(20)) {
            if stop() || std::time::Instant::now() >= deadline {
                return;
            }
        }
    }

    /// Reports failures the engine saw and nobody reported yet, without waiting; and errors of
    /// the GPUs opened so far that no op could report (a failed stream-ordered free).
    ///
    /// Rank 0 of simulated ranks also reports the other ranks' failures (each naming its
    /// rank), which end the job.
    pub fn take_failures(&mut self) -> Result<(), RunError> {
        let own = crate::sources::take_failures(
            &self.engine,
            &mut self.reported,
            &self.sources,
            &self.graphs,
            &self.pushed_within,
        );
        let mut errors: Vec<RunError> = own.err().into_iter().collect();
        errors.append(&mut self.peer_errors);
        if let Some(peers) = &self.peers {
            errors.extend(
                peers
                    .take_failures()
                    .into_iter()
                    .flat_map(|report| report.errors),
            );
        }
        let mut errors = errors.into_iter();
        let Some(mut first) = errors.next() else {
            return Ok(());
        };
        for error in errors {
            first.reports.extend(error.reports);
        }
        Err(first)
    }

    /// Cancels every pushed op that has not started (Ctrl-C, a kernel interrupt).
    pub fn cancel(&self) {
        self.engine.cancel_pending();
    }

    /// Sets what the session asks before each statement it runs, loop iterations and function
    /// bodies included: when `check()` says the user interrupted, the session cancels the ops
    /// that have not started and stops the run with an `interrupted` error (names keep their
    /// values). `reset` forgets it.
    pub fn set_interrupt_check(&mut self, check: Option<InterruptCheck>) {
        self.interrupt_check = check;
    }

    /// Sets what a blocked `print` or `wait` asks every few milliseconds: when `check()` says
    /// the user gave up waiting (the REPL's second Ctrl-C), the wait stops and the run ends
    /// with an error saying so; the awaited ops that had started go on running, and a later
    /// `print` shows what they wrote.
    /// `reset` forgets it.
    pub fn set_abandon_check(&mut self, check: Option<InterruptCheck>) {
        self.abandon_check = check;
    }

    /// Every global tensor variable, sorted by name.
    pub fn variables(&self) -> Vec<VariableInfo> {
        let snapshot = self.engine.snapshot();
        let mut infos = Vec::new();
        for (name, binding) in &self.globals {
            match binding {
                Binding::Tensor(slot) => infos.push(variable_info(name.clone(), slot, &snapshot)),
                Binding::Slots(list) => {
                    infos.extend(list.iter().enumerate().map(|(index, slot)| {
                        variable_info(format!("{name}[{index}]"), slot, &snapshot)
                    }))
                }
                Binding::Counter(_) => {}
            }
        }
        infos.sort_by(|a, b| a.name.cmp(&b.name));
        infos
    }

    /// The names in scope (variables, functions), for completion.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .globals
            .keys()
            .chain(self.functions.keys())
            .cloned()
            .collect();
        names.sort();
        names
    }

    /// The report of a recorded graph: ops, edges, critical path, memory eager against graph
    /// (what `print NAME` shows), and how many allocations its buffer pool served, a measured
    /// figure that depends on the schedule.
    pub fn graph_report(&self, name: &str) -> Option<String> {
        self.graphs
            .get(name)
            .map(crate::graph::Graph::report_measured)
    }

    /// Bytes of the free buffers the recorded graphs' pools hold for their later runs: counted
    /// in the host's tensor memory, though no variable holds them, and how many depends on the
    /// schedule (how a run's releases and allocations interleaved), so the summary counts them
    /// apart from the memory in use.
    pub fn graph_pooled_bytes(&self) -> u64 {
        self.graphs
            .values()
            .map(crate::graph::Graph::pooled_bytes)
            .sum()
    }

    /// A recorded graph's DAG in Graphviz DOT (for `:dag NAME` and `%dag NAME`).
    pub fn graph_dot(&self, name: &str) -> Option<String> {
        self.graphs.get(name).map(|graph| graph.dot(&self.places))
    }

    /// The names of the recorded graphs, sorted.
    pub fn graph_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.graphs.keys().cloned().collect();
        names.sort();
        names
    }

    /// The engine variable a global name is bound to, for views (`:why NAME`).
    /// An entry of a list made with `slots(n)` is named as it is read, `x[2]`.
    pub fn var_of(&self, name: &str) -> Option<engine::Var> {
        if let Some((list, index)) = name.strip_suffix(']').and_then(|name| name.split_once('[')) {
            let index: usize = index.trim().parse().ok()?;
            return match self.globals.get(list.trim()) {
                Some(Binding::Slots(slots)) => slots.get(index).map(|slot| slot.var.clone()),
                _ => None,
            };
        }
        match self.globals.get(name) {
            Some(Binding::Tensor(slot)) => Some(slot.var.clone()),
            _ => None,
        }
    }

    /// How many slots the list `name` made with `slots(n)` holds, if `name` is one.
    pub fn slots_len(&self, name: &str) -> Option<usize> {
        match self.globals.get(name) {
            Some(Binding::Slots(slots)) => Some(slots.len()),
            _ => None,
        }
    }

    /// Waits for `name` and returns its value.
    pub fn value(&mut self, name: &str) -> Result<Tensor, String> {
        let Some(Binding::Tensor(slot)) = self.globals.get(name) else {
            return Err(format!("no variable named `{name}`"));
        };
        self.engine
            .wait_var(&slot.var, 0)
            .map_err(|error| error.to_string())?;
        slot.get()
    }

    /// Switches to another engine policy and worker count, keeping every variable and its value,
    /// or its error, and the failures not reported yet (waits for every pushed op first).
    /// Recorded graphs are rebound to the new engine's variables.
    pub fn set_engine(&mut self, policy: engine::Policy, threads: usize) {
        self.engine.wait_all();
        // The new engine numbers its ops afresh; the old one's have all finished.
        self.let_go_below.store(0, Ordering::SeqCst);
        self.pushed_within = Default::default();
        self.config.policy = policy;
        self.config.threads = threads;
        let log = new_log(&self.config);
        let new_engine = new_engine(&self.config, log.clone());
        new_engine.adopt_failures(self.engine.take_failures());
        let mut slots = SlotMover::new(&new_engine);
        for binding in self.globals.values_mut() {
            match binding {
                Binding::Tensor(slot) => *slot = slots.slot(slot),
                Binding::Slots(list) => {
                    *list = Arc::new(list.iter().map(|slot| slots.slot(slot)).collect());
                }
                Binding::Counter(_) => {}
            }
        }
        self.rng = slots.rng(&self.rng);
        for graph in self.graphs.values_mut() {
            graph.move_to(&mut slots, &self.rng);
        }
        drop(slots);
        self.engine = new_engine;
        self.log = log;
    }

    /// What a runner of this session's inputs works with: its parts, borrowed for one input.
    fn scope(&mut self) -> Scope<'_> {
        Scope {
            engine: &self.engine,
            log: self.log.as_deref(),
            show_expression_values: self.config.show_expression_values,
            batch: self.config.batch,
            globals: &mut self.globals,
            functions: &mut self.functions,
            graphs: &mut self.graphs,
            rng: &self.rng,
            sources: &mut self.sources,
            n_temporaries: &mut self.n_temporaries,
            local_names: &mut self.local_names,
            reported: &mut self.reported,
            pushed_within: &mut self.pushed_within,
            interrupt_check: self.interrupt_check.as_deref(),
            abandon_check: self.abandon_check.as_deref(),
            cancel_mark: self.engine.cancel_mark(),
            comm: &self.comm,
            comm_counters: &mut self.comm_counters,
            watches_job_end: self.comm.size() > 1 && self.comm.ended().is_none(),
        }
    }

    /// Forgets every name and function and starts a fresh engine with the same configuration.
    pub fn reset(&mut self) {
        let config = self.config.clone();
        let comm = self.comm.clone();
        let peers = self.peers.take();
        *self = Session::new(config);
        match peers {
            // Simulated ranks start afresh too, every rank's names forgotten.
            Some(peers) => {
                let (comm, peers) = peers.restarted();
                self.set_communicator(comm);
                self.peers = Some(peers);
            }
            None => self.comm = comm,
        }
    }
}

/// `:vars`'s state of a variable that nothing wrote, or whose every write was cancelled.
pub(crate) const NO_VALUE: &str = "no value";

/// What `:vars` says of the variable `name`, held in `slot`, given a snapshot of the queues.
fn variable_info(name: String, slot: &Slot, snapshot: &engine::Snapshot) -> VariableInfo {
    // Pending: an op that writes it has not finished (reads leave the value as is; a `print`
    // that just returned may still hold its read for a moment), and was not cancelled (it
    // stays queued until its turn, then writes nothing).
    let cancelled = |op: engine::OpId| {
        snapshot
            .ops
            .iter()
            .any(|candidate| candidate.id == op && candidate.state == engine::OpState::Cancelled)
    };
    let pending = snapshot
        .vars
        .iter()
        .find(|var| var.id == slot.var.id())
        .is_some_and(|var| {
            var.queue
                .iter()
                .any(|access| access.write && !cancelled(access.op))
        });
    let shape = if pending { None } else { slot.peek_shape() };
    let state = match slot.var.error() {
        _ if pending => "pending".to_string(),
        Some(error) => format!("failed: {}", error.message),
        // Never written (an entry of `slots(n)` not set yet), or its writes were cancelled.
        None if !slot.has_value() => NO_VALUE.to_string(),
        None => "ready".to_string(),
    };
    VariableInfo {
        name,
        shape,
        device: slot.home().to_string(),
        state,
    }
}

/// The event log `config` asks for, if any.
fn new_log(config: &SessionConfig) -> Option<Arc<engine::EventLog>> {
    config.observe.then(|| {
        let log = match config.lean_log {
            true => engine::EventLog::without_later_grants(),
            false => engine::EventLog::new(),
        };
        Arc::new(log.keeping_at_most(config.kept_events))
    })
}

fn new_engine(config: &SessionConfig, log: Option<Arc<engine::EventLog>>) -> engine::Engine {
    let engine_config = engine::EngineConfig {
        policy: config.policy,
        threads: config.threads,
        sink: log.map(|log| log as Arc<dyn engine::EventSink>),
        ..engine::EngineConfig::default()
    };
    // GPU ops open one stream per engine worker of a GPU.
    engine::Engine::new(engine_config)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `inputs` print and report, run one by one on a session of `first`'s policy and
    /// threads that switches to `then`'s before input `switch_before` (never when past the
    /// end), failures reported at the end only (as in a REPL that does not wait between
    /// inputs), and every global's `:vars` line.
    fn transcript(
        inputs: &[&str],
        first: (engine::Policy, usize),
        switch_before: usize,
        then: (engine::Policy, usize),
    ) -> String {
        let mut session = Session::new(SessionConfig {
            policy: first.0,
            threads: first.1,
            ..SessionConfig::default()
        });
        let mut out = Vec::new();
        for (index, input) in inputs.iter().enumerate() {
            if index == switch_before {
                session.set_engine(then.0, then.1);
            }
            if let Err(error) = session.run_source("<stdin>", input, &mut out) {
                writeln!(out, "{error}").unwrap();
            }
        }
        if let Err(error) = session.finish() {
            writeln!(out, "at the end: {error}").unwrap();
        }
        for info in session.variables() {
            writeln!(out, "{info:?}").unwrap();
        }
        for name in session.graph_names() {
            let report = session.graph_report(&name).unwrap();
            // The pool's count depends on the schedule; the rest of the report does not.
            let report: Vec<&str> = report
                .lines()
                .filter(|line| !line.contains("served by the pool"))
                .collect();
            writeln!(
                out,
                "{}\n{}",
                report.join("\n"),
                session.graph_dot(&name).unwrap()
            )
            .unwrap();
        }
        String::from_utf8(out).unwrap()
    }

    /// Every policy the session can switch to, from another one.
    const SWITCHES: [((engine::Policy, usize), (engine::Policy, usize)); 5] = [
        ((engine::Policy::Threaded, 2), (engine::Policy::Naive, 1)),
        ((engine::Policy::Threaded, 2), (engine::Policy::Threaded, 1)),
        ((engine::Policy::Naive, 1), (engine::Policy::Sim, 2)),
        ((engine::Policy::Naive, 1), (engine::Policy::PerDevice, 2)),
        ((engine::Policy::Sim, 2), (engine::Policy::Threaded, 3)),
    ];

    /// Runs `inputs` switching engines before input `switch_before`, and on the second engine
    /// all along: the same output, values, errors and graph reports.
    fn assert_switch_changes_nothing(inputs: &[&str], switch_before: usize) {
        for (first, then) in SWITCHES {
            let switched = transcript(inputs, first, switch_before, then);
            let unswitched = transcript(inputs, then, usize::MAX, then);
            assert_eq!(switched, unswitched, "{first:?} then {then:?}");
        }
    }

    #[test]
    fn a_graph_recorded_before_an_engine_switch_replays_on_the_new_engines_variables() {
        let inputs = [
            "seed 1\na = 1\nb = ones(3)\nr = zeros(2)\n\
             graph g {\n  a = a + 1\n  t = b * a\n  b = t + 1\n  r = r + rand(2)\n}\n\
             run g\nprint a, b, r",
            "run g\nprint a, b, r\nwith bulk = 2 { run g }\nprint a, b, r\nprint g",
        ];
        let transcript = transcript(
            &inputs,
            (engine::Policy::Threaded, 2),
            1,
            (engine::Policy::Naive, 1),
        );
        assert!(transcript.contains("\n3 [10. 10. 10.]"), "{transcript}");
        assert!(transcript.contains("graph g: 4 ops"), "{transcript}");
        assert!(transcript.contains("3 runs"), "{transcript}");
        assert!(!transcript.contains("rng"), "{transcript}");
        assert_switch_changes_nothing(&inputs, 1);
    }

    #[test]
    fn the_sample_graph_trains_after_an_engine_switch() {
        let sample = include_str!("../../samples/mlp_graph.dep");
        // Up to the end of the graph's block.
        let (setup, _) = sample.split_once("\n}\n").unwrap();
        let setup = format!("{setup}\n}}");
        let inputs = [&setup, "run step\nrun step\nprint L, sum(W1), sum(W4)"];
        assert_switch_changes_nothing(&inputs, 1);
    }

    #[test]
    fn an_engine_switch_keeps_a_failed_variables_error_as_reported_before() {
        // Read after the switch: the root cause at its line, also through a new reader.
        assert_switch_changes_nothing(
            &[
                "a = ones(2) + ones(3)\nb = ones(2)",
                "print a",
                "c = a + 1\nprint c",
            ],
            1,
        );
        // Never read: reported at the end all the same, once.
        assert_switch_changes_nothing(&["a = ones(2) + ones(3)", "b = 1"], 1);
        // Overwritten after the switch: the error is gone.
        assert_switch_changes_nothing(&["a = ones(2) + ones(3)", "a = ones(2)\nprint a"], 1);
    }

    #[test]
    fn an_engine_switch_keeps_a_failed_slots_error_and_the_other_slots() {
        assert_switch_changes_nothing(
            &[
                "s = slots(3)\nset(s, 1, ones(2) + ones(3))\nset(s, 2, ones(2) * 2)",
                "print s[1]",
                "c = s[1] + 1\nprint c",
                "set(s, 0, s[2] + 1)\nprint s[0], s[2]",
            ],
            1,
        );
    }

    /// A value made on a GPU stays there across a switch (here a simulated one, so that the
    /// test needs none): `:vars` says where it lives as before.
    #[test]
    fn an_engine_switch_keeps_where_each_value_lives() {
        let mut session = Session::new(SessionConfig {
            policy: engine::Policy::Sim,
            ..SessionConfig::default()
        });
        session
            .run_source(
                "<stdin>",
                "with gpu0 {\n  a = ones(2) + 1\n}\nb = ones(2)",
                &mut std::io::sink(),
            )
            .unwrap();
        session.wait_all();
        let homes = |session: &Session| -> Vec<String> {
            session
                .variables()
                .into_iter()
                .map(|info| info.device)
                .collect()
        };
        assert_eq!(homes(&session), ["gpu0", "cpu"]);
        session.set_engine(engine::Policy::Naive, 1);
        assert_eq!(homes(&session), ["gpu0", "cpu"]);
        assert_eq!(session.value("a").unwrap().to_string(), "[2. 2.]");
    }

    /// A call's value assigned to a new name is computed straight into a new variable, bound
    /// once the call has returned: a call that fails makes no name (nor a variable the views
    /// would show), and one that succeeds binds it, in a function as at the top level.
    #[test]
    fn a_value_returned_to_a_new_name_binds_it_only_when_the_call_returns() {
        let mut session = Session::new(SessionConfig::default());
        let mut out = Vec::new();
        session
            .run_source(
                "<stdin>",
                "def f(x) {\n  h = x * 2\n  return h + q\n}\ndef two(x) { return x, x }\n\
                 def g(x) {\n  y = one(x)\n  return y * 10\n}\ndef one(x) { return x + 1 }\n\
                 a = ones(2)",
                &mut out,
            )
            .unwrap();
        for failing in ["b = f(a)", "b = two(a)"] {
            assert!(session.run_source("<stdin>", failing, &mut out).is_err());
            assert_eq!(session.names(), ["a", "f", "g", "one", "two"], "{failing}");
        }
        session
            .run_source("<stdin>", "b = g(a)\nc = one(b)", &mut out)
            .unwrap();
        assert_eq!(session.names(), ["a", "b", "c", "f", "g", "one", "two"]);
        assert_eq!(session.value("c").unwrap().to_string(), "[21. 21.]");
        // Every variable the engine holds is a name's: no temporary, local or unbound one left.
        session.wait_all();
        let held: Vec<String> = session
            .variables()
            .into_iter()
            .map(|info| info.name)
            .collect();
        assert_eq!(held, ["a", "b", "c"]);
    }

    /// Ops let go are left out of the count and of `wait_all`; an op that reads what they
    /// write is not, and waits for them.
    #[test]
    fn ops_let_go_are_not_waited_for_but_what_reads_them_is() {
        let mut session = Session::new(SessionConfig {
            policy: engine::Policy::Threaded,
            threads: 2,
            ..SessionConfig::default()
        });
        let started = std::time::Instant::now();
        let mut out = Vec::new();
        session
            .run_source("<stdin>", "A = ones(2)\nX = work(1500, A)", &mut out)
            .unwrap();
        session.let_go_unfinished();
        assert_eq!(session.n_unfinished(), 0);
        session.wait_all();
        assert!(
            started.elapsed() < Duration::from_millis(1000),
            "waited for X"
        );
        session
            .run_source("<stdin>", "Y = X + 1", &mut out)
            .unwrap();
        assert!(session.n_unfinished() > 0, "Y waits for X");
        session.wait_all();
        assert!(
            started.elapsed() >= Duration::from_millis(1500),
            "Y ran before X"
        );
        assert_eq!(session.value("Y").unwrap().to_string(), "[2. 2.]");
        assert_eq!(session.n_unfinished(), 0);
    }

    #[test]
    fn the_failed_variable_after_a_switch_holds_the_same_error() {
        let mut session = Session::new(SessionConfig::default());
        let mut out = Vec::new();
        session
            .run_source("<stdin>", "a = ones(2) + ones(3)", &mut out)
            .unwrap();
        session.wait_all();
        let Some(Binding::Tensor(before)) = session.globals.get("a").cloned() else {
            panic!("a is a tensor");
        };
        session.set_engine(engine::Policy::Naive, 1);
        let Some(Binding::Tensor(after)) = session.globals.get("a").cloned() else {
            panic!("a is a tensor");
        };
        let (before, after) = (before.var.error().unwrap(), after.var.error().unwrap());
        assert!(Arc::ptr_eq(&before, &after));
        let state = &session.variables()[0].state;
        assert!(
            state.starts_with("failed: cannot broadcast shapes [2] and [3]"),
            "{state}"
        );
    }

    /// A loop's counter cannot be assigned while its loop runs; once the loop has ended its
    /// name keeps the last value and is assigned anew like any other (it stayed an error).
    #[test]
    fn a_loop_counter_is_assignable_once_its_loop_has_ended() {
        let mut session = Session::new(SessionConfig::default());
        let mut out = Vec::new();
        let error = session
            .run_source("<stdin>", "for j in 0..2 { j = 3 }", &mut out)
            .expect_err("assigned in its loop")
            .to_string();
        assert!(
            error.starts_with("error: `j` is a loop counter and cannot be assigned\n"),
            "{error}"
        );
        session
            .run_source(
                "<stdin>",
                "for i in 0..3 { x = 1 }\nprint i\ni = 5\nprint i\nfor i in 0..2 { print i }",
                &mut out,
            )
            .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "2\n5.0\n0\n1\n");
    }

    /// A whole number written with digits only past 2^53, where the runner needs a whole
    /// number (a seed, a loop bound, a result of their arithmetic), is too large, said with
    /// its every digit: `seed 9007199254740993` seeded with its float64, 9007199254740992.
    #[test]
    fn a_whole_number_past_2_53_written_with_digits_only_is_too_large() {
        let mut session = Session::new(SessionConfig::default());
        let mut out = Vec::new();
        for source in [
            "seed 9007199254740993",
            "seed 9007199254740991 + 2",
            "for i in 0..9007199254740993 { wait }",
            "x = slots(9007199254740993)",
        ] {
            let error = session
                .run_source("<stdin>", source, &mut out)
                .expect_err(source)
                .to_string();
            assert!(
                error.starts_with(
                    "error: the number is too large: 9.007199254740993e15 is beyond \
                     ±9007199254740992\n"
                ),
                "{source}: {error}"
            );
        }
        session
            .run_source(
                "<stdin>",
                "seed 9007199254740992\nseed 1e15 + 1\nseed 9007199254740993 - 1",
                &mut out,
            )
            .unwrap();
    }
}
