//! The trace files `dep run --trace` writes while the run goes: Perfetto's protobuf
//! (`.pftrace`, `.perfetto-trace`) or Chrome JSON (any other name), fed slices and arrows by the
//! recorder's fold ([`Traces`], one [`views::fold::TraceOut`] for all of them).
//!
//! On a machine with cores to spare ([`TraceThreads`]), the work is spread over threads, so
//! that the recorder, which the end of the run waits for, does only the folding and the
//! reading and folding of the log: each file is written by a thread of its own ([`OutputFile`]),
//! each trace's slices and arrows are encoded by another ([`TraceApart`], as much work again as
//! the fold), and a JSON trace's event log (`depEvents`, about a third of the recorder's work
//! when it writes it too) is transcribed by an [`EventsApart`] thread that reads the log beside
//! the recorder. The
//! log forgets an event only once both have read it ([`Traces::read_up_to`]), so its memory
//! stays bounded by what the slower one has not read. On a machine without (two cores: the
//! interpreter's and a worker's), the threads would only take turns on the same cores, and
//! copy between them what one thread would keep in its cache: the recorder does it all.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use dep_engine as engine;
use dep_views as views;
use engine::lock;
use views::trace::{DepEventsWriter, JsonTrace};

use crate::output_file::OutputFile;
use crate::trace_apart::TraceApart;

/// How a run's trace files spread their work over threads (see the module's documentation):
/// chosen by the machine's cores, unless `DEP_TRACE_THREADS` says `on` or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TraceThreads {
    /// A JSON trace's event log transcribed by a thread of its own.
    events_apart: bool,
    /// Each file written by a thread of its own.
    writers_apart: bool,
    /// Each trace's slices and arrows encoded by a thread of its own (a JSON trace's only when
    /// its event log is transcribed apart too: the encoder is handed no event).
    encoding_apart: bool,
}

/// The fewest cores on which trace files spread their work over threads: the interpreter, a
/// worker and the recorder each keep one busy, and the others need one more.
const MIN_CORES_FOR_THREADS: usize = 4;

impl TraceThreads {
    /// The choice for this run: `DEP_TRACE_THREADS` (`on`, `off`), or by this machine's cores.
    /// A value it does not know is said on stderr, and the cores choose.
    pub(crate) fn for_this_machine() -> TraceThreads {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let setting = std::env::var("DEP_TRACE_THREADS").ok();
        TraceThreads::choose(setting.as_deref(), cores).unwrap_or_else(|problem| {
            eprintln!("dep: {problem}");
            TraceThreads::by_cores(cores)
        })
    }

    /// The choice `setting` (the variable's value, if set) makes on a machine of `cores`, or
    /// what is wrong with it.
    fn choose(setting: Option<&str>, cores: usize) -> Result<TraceThreads, String> {
        let (events_apart, writers_apart, encoding_apart) = match setting {
            None | Some("" | "auto") => return Ok(TraceThreads::by_cores(cores)),
            Some("on") => (true, true, true),
            Some("off") => (false, false, false),
            Some("events") => (true, false, false),
            Some("writers") => (false, true, false),
            Some("encoding") => (false, false, true),
            Some(other) => {
                return Err(format!(
                    "DEP_TRACE_THREADS={other}: expected on, off, auto, events, writers or \
                     encoding; choosing by this machine's {cores} cores"
                ))
            }
        };
        Ok(TraceThreads {
            events_apart,
            writers_apart,
            encoding_apart,
        })
    }

    /// The choice on a machine of `cores`: threads only where there are cores to spare.
    fn by_cores(cores: usize) -> TraceThreads {
        let spread = cores >= MIN_CORES_FOR_THREADS;
        TraceThreads {
            events_apart: spread,
            writers_apart: spread,
            encoding_apart: spread,
        }
    }

    /// `file` as an output written as this choice says, by a thread named `name`.
    fn output(self, file: std::fs::File, name: &str) -> OutputFile {
        if self.writers_apart {
            OutputFile::on_thread(file, name)
        } else {
            OutputFile::here(file)
        }
    }
}

/// How long a reader of the log that found nothing new waits before it looks again (a stop
/// wakes it at once).
pub(crate) const READ_PERIOD: Duration = Duration::from_millis(2);

/// How many events one read of the log hands out at least for its reader to read again at
/// once (see [`read_some_then_gather`]).
const FULL_READ: u64 = 256;
/// How long a reader of the log lets events gather after a read that found only a few.
const GATHER_PERIOD: Duration = Duration::from_micros(100);

/// Whether a read of the log that handed out `n_read` events read some; after one that read
/// only a few, lets more gather first. A reader that keeps up with the run would otherwise read
/// a handful at a time, taking every shard's lock each time (on 16 cores the recorder's CPU
/// time fell by about a third with the wait).
pub(crate) fn read_some_then_gather(n_read: u64) -> bool {
    if (1..FULL_READ).contains(&n_read) {
        std::thread::sleep(GATHER_PERIOD);
    }
    n_read > 0
}

/// A trace file being written.
enum TraceFile {
    /// Chrome JSON, its event log spooled to a temporary file beside it, by the trace itself
    /// or by a thread of its own.
    Json {
        trace: Encoder<JsonTrace<OutputFile, OutputFile>>,
        events: Option<EventsApart>,
    },
    Perfetto(Encoder<views::perfetto::PerfettoTrace<OutputFile>>),
}

/// Where a trace's writer encodes what the fold hands it: here, on the recorder, or on a thread
/// of its own.
enum Encoder<T> {
    Here(Box<T>),
    Apart(Box<TraceApart<T>>),
}

impl<T: views::fold::TraceOut + Send + 'static> Encoder<T> {
    /// `trace`, fed on a thread of its own when `apart` says so.
    fn start(trace: T, apart: bool) -> io::Result<Encoder<T>> {
        Ok(if apart {
            Encoder::Apart(Box::new(TraceApart::start(trace)?))
        } else {
            Encoder::Here(Box::new(trace))
        })
    }

    fn out(&mut self) -> &mut dyn views::fold::TraceOut {
        match self {
            Encoder::Here(trace) => trace.as_mut(),
            Encoder::Apart(trace) => trace.as_mut(),
        }
    }

    /// The writer, once it has encoded all it was handed, to be finished.
    fn finish(self) -> io::Result<T> {
        match self {
            Encoder::Here(trace) => Ok(*trace),
            Encoder::Apart(trace) => trace.finish(),
        }
    }
}

/// The trace files being written, each with its path.
pub(crate) struct Traces(Vec<(PathBuf, TraceFile)>);

/// The paths of the trace files opened and not yet finished: what a second Ctrl-C, which leaves
/// at once, removes rather than leave them cut off.
static UNFINISHED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes the trace files still being written (the process is about to leave without
/// finishing them: a JSON trace cut off is no trace); returns those removed.
pub(crate) fn remove_unfinished() -> Vec<PathBuf> {
    let paths = std::mem::take(&mut *lock(&UNFINISHED));
    paths
        .into_iter()
        .filter(|path| std::fs::remove_file(path).is_ok())
        .collect()
}

impl Traces {
    /// Opens a trace file at each path (in the format its name says), to be fed the events of
    /// `log` from number `first` on; returns those opened and, apart, each path that could not be
    /// opened with its error.
    pub(crate) fn open(
        paths: &[PathBuf],
        log: &Arc<engine::EventLog>,
        first: u64,
        threads: TraceThreads,
    ) -> (Traces, Vec<(PathBuf, io::Error)>) {
        let (mut open, mut failed) = (Vec::new(), Vec::new());
        for path in paths {
            match open_trace(path, log, first, threads) {
                Ok(trace) => {
                    lock(&UNFINISHED).push(path.clone());
                    open.push((path.clone(), trace));
                }
                Err(error) => failed.push((path.clone(), error)),
            }
        }
        (Traces(open), failed)
    }

    /// How far every reader of the log beside the recorder has read: the log may forget the
    /// events numbered below this (and below what the recorder read); `u64::MAX` when there is
    /// no such reader.
    pub(crate) fn read_up_to(&self) -> u64 {
        self.0
            .iter()
            .filter_map(|(_, trace)| match trace {
                TraceFile::Json { events, .. } => events.as_ref().map(EventsApart::read_up_to),
                TraceFile::Perfetto(_) => None,
            })
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Whether a trace writes the event log it is fed (a JSON trace without a reader of its
    /// own): the recorder must then read the grants too.
    pub(crate) fn wants_events(&self) -> bool {
        self.0.iter().any(|(_, trace)| match trace {
            TraceFile::Json {
                trace: Encoder::Here(trace),
                ..
            } => trace.writes_events(),
            TraceFile::Json { .. } | TraceFile::Perfetto(_) => false,
        })
    }

    /// Closes every file (waiting for its threads); returns how writing each one went.
    pub(crate) fn finish(self) -> Vec<(PathBuf, io::Result<()>)> {
        self.0
            .into_iter()
            .map(|(path, trace)| {
                let finished = trace.finish();
                lock(&UNFINISHED).retain(|unfinished| *unfinished != path);
                (path, finished)
            })
            .collect()
    }
}

impl views::fold::TraceOut for Traces {
    fn event(&mut self, event: &engine::Event) {
        for (_, trace) in &mut self.0 {
            // Only a JSON trace writes events; a Perfetto trace is its slices and arrows.
            if let TraceFile::Json { trace, .. } = trace {
                trace.out().event(event);
            }
        }
    }

    fn slice(&mut self, slice: &views::fold::OpSlice<'_>) {
        for (_, trace) in &mut self.0 {
            trace.out().slice(slice);
        }
    }

    fn flow(&mut self, flow: &views::fold::Flow<'_>) {
        for (_, trace) in &mut self.0 {
            trace.out().flow(flow);
        }
    }

    fn device_slice(&mut self, slice: &views::fold::DeviceSlice<'_>) {
        for (_, trace) in &mut self.0 {
            trace.out().device_slice(slice);
        }
    }

    fn keeps_slices(&self) -> bool {
        !self.0.is_empty()
    }

    fn ran_at_once(&mut self, ran: &engine::RanAtOnce<'_>) {
        for (_, trace) in &mut self.0 {
            if let TraceFile::Json { trace, .. } = trace {
                trace.out().ran_at_once(ran);
            }
        }
    }

    fn end(&mut self, worker_names: &[String], lanes: &[views::fold::TraceLane]) {
        for (_, trace) in &mut self.0 {
            trace.out().end(worker_names, lanes);
        }
    }
}

impl TraceFile {
    fn out(&mut self) -> &mut dyn views::fold::TraceOut {
        match self {
            TraceFile::Json { trace, .. } => trace.out(),
            TraceFile::Perfetto(trace) => trace.out(),
        }
    }

    fn finish(self) -> io::Result<()> {
        match self {
            TraceFile::Json {
                trace,
                events: Some(events),
            } => trace.finish()?.finish_with(events.finish()).map(drop),
            TraceFile::Json {
                trace,
                events: None,
            } => trace.finish()?.finish().map(drop),
            TraceFile::Perfetto(trace) => trace.finish()?.finish().map(drop),
        }
    }
}

/// Whether a trace path names Perfetto's protobuf format (`.pftrace`, `.perfetto-trace`); any
/// other name gets Chrome JSON.
pub(crate) fn is_perfetto(path: &Path) -> bool {
    let extension = path.extension().and_then(|ext| ext.to_str());
    matches!(extension, Some("pftrace" | "perfetto-trace"))
}

/// Opens the trace file (and the JSON's spool and the thread that writes its event log, if
/// any), in the format its name says.
fn open_trace(
    path: &Path,
    log: &Arc<engine::EventLog>,
    first: u64,
    threads: TraceThreads,
) -> io::Result<TraceFile> {
    let out = threads.output(crate::fresh_file::create(path)?, "dep-trace-write");
    if is_perfetto(path) {
        let trace = views::perfetto::PerfettoTrace::new(out);
        return Ok(TraceFile::Perfetto(Encoder::start(
            trace,
            threads.encoding_apart,
        )?));
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let spool = threads.output(tempfile::tempfile_in(dir)?, "dep-spool-write");
    if !threads.events_apart {
        // Fed every event, so never apart: the encoder is handed none.
        return Ok(TraceFile::Json {
            trace: Encoder::Here(Box::new(JsonTrace::new(out, spool))),
            events: None,
        });
    }
    Ok(TraceFile::Json {
        trace: Encoder::start(JsonTrace::without_events(out), threads.encoding_apart)?,
        events: Some(EventsApart::start(Arc::clone(log), first, spool)?),
    })
}

/// A thread that transcribes the event log into a JSON trace's `depEvents` spool, reading the
/// log beside the recorder, in the same order.
struct EventsApart {
    /// The number of the first event the thread has not read yet.
    read_up_to: Arc<AtomicU64>,
    /// Set once every event is in the log: the thread then reads to the log's end and stops.
    stop: Arc<AtomicBool>,
    /// Taken by [`EventsApart::finish`].
    thread: Option<JoinHandle<io::Result<OutputFile>>>,
}

impl EventsApart {
    /// Starts reading `log` from event number `first` into `spool`.
    fn start(log: Arc<engine::EventLog>, first: u64, spool: OutputFile) -> io::Result<EventsApart> {
        let read_up_to = Arc::new(AtomicU64::new(first));
        let stop = Arc::new(AtomicBool::new(false));
        let (position, stopped) = (Arc::clone(&read_up_to), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("dep-trace-events".into())
            .spawn(move || {
                let mut writer = DepEventsWriter::reading_the_log(spool);
                let mut room = engine::ReadRoom::default();
                let mut next = first;
                loop {
                    // An op run at once comes whole, and is written as one element.
                    let after = log.read_ops_since_in(&mut room, next, |logged| match logged {
                        engine::Logged::Event(event) => writer.event(event),
                        engine::Logged::RanAtOnce(ran) => writer.ran_at_once(&ran),
                    });
                    position.store(after, Ordering::Release);
                    let read_some = read_some_then_gather(after - next);
                    next = after;
                    if read_some {
                        continue;
                    }
                    // The stop comes once every event is in the log: a look after it that
                    // finds nothing has read them all.
                    if stopped.load(Ordering::Acquire) {
                        if next == log.next_seq() {
                            break;
                        }
                        continue;
                    }
                    std::thread::park_timeout(READ_PERIOD);
                }
                writer.finish()
            })?;
        Ok(EventsApart {
            read_up_to,
            stop,
            thread: Some(thread),
        })
    }

    /// The number of the first event the thread has not read yet.
    fn read_up_to(&self) -> u64 {
        self.read_up_to.load(Ordering::Acquire)
    }

    /// Once every event is in the log: waits for the thread to read them all, and returns
    /// its spool.
    fn finish(mut self) -> io::Result<OutputFile> {
        self.stop();
        let thread = self.thread.take().expect("finished once");
        thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the trace's event log writer panicked")))
    }

    fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
    }
}

impl Drop for EventsApart {
    /// A trace dropped unfinished (the recorder stopped by a panic) still stops its thread,
    /// once it has read what the log holds.
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::{TraceThreads, MIN_CORES_FOR_THREADS};

    #[test]
    fn traces_spread_over_threads_only_with_cores_to_spare_or_when_asked() {
        let spread = |setting, cores| {
            let threads = TraceThreads::choose(setting, cores).unwrap();
            (
                threads.events_apart,
                threads.writers_apart,
                threads.encoding_apart,
            )
        };
        assert_eq!(spread(None, 2), (false, false, false));
        assert_eq!(
            spread(None, MIN_CORES_FOR_THREADS - 1),
            (false, false, false)
        );
        assert_eq!(spread(None, MIN_CORES_FOR_THREADS), (true, true, true));
        assert_eq!(spread(Some("auto"), 16), (true, true, true));
        assert_eq!(spread(Some("off"), 16), (false, false, false));
        assert_eq!(spread(Some("on"), 2), (true, true, true));
        assert_eq!(spread(Some("events"), 2), (true, false, false));
        assert_eq!(spread(Some("writers"), 16), (false, true, false));
        assert_eq!(spread(Some("encoding"), 2), (false, false, true));
        let problem = TraceThreads::choose(Some("yes"), 2).unwrap_err();
        assert!(problem.contains("DEP_TRACE_THREADS=yes") && problem.contains("on, off"));
    }
}
