//! A trace file encoded on a thread of its own ([`TraceApart`]), on a machine with cores to
//! spare (`trace_files::TraceThreads`). The recorder's fold hands it slices and arrows as small
//! records, with numbers in place of names; the thread feeds them to the trace's writer
//! ([`views::perfetto::PerfettoTrace`], [`views::trace::JsonTrace`]: the same bytes as fed
//! where the fold runs). The recorder, which the end of a traced run waits for, then only reads
//! the log and folds it: the encoding was as much work again (per statement of `big.dep`,
//! about 2,600 instructions for Perfetto's, beside 3,400 for the reading and the fold). The
//! writer is handed every slice, arrow and end, but no event: a JSON trace whose event log a
//! thread of its own transcribes (`trace_files::EventsApart`) needs none.
//!
//! Names go over as numbers, each text once: the thread keeps its own copies, so that neither
//! thread ever writes to a reference count the other's strings hold (a cache line the other
//! may be using).

use std::io;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use dep_engine::{Device, OpId, OpState};
use dep_views as views;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use views::fold::{DeviceSlice, Flow, OpSlice, TraceLane, TraceOut};
use views::Hazard;

/// How many pieces go to the thread at once.
const BATCH: usize = 1024;
/// How many batches may wait for the thread before the recorder waits for it: what bounds the
/// memory between the two.
const IN_FLIGHT: usize = 4;
/// How many names [`Numbering`] remembers by address.
const RECENT: usize = 64;

/// What the fold hands over, in its order.
enum Piece {
    /// The text of the next name's number (from 0): a label or a variable's name.
    Name(Box<str>),
    Slice(SliceRecord),
    Flow {
        id: u64,
        var: u32,
        hazard: Hazard,
        /// The other conflicts between the same two ops, names by number (mostly none).
        more: Box<[(u32, Hazard)]>,
        from: (u32, u64),
        to: (u32, u64),
    },
    DeviceSlice {
        op: OpId,
        label: u32,
        line: u32,
        lane: usize,
        start_ns: u64,
        end_ns: u64,
        launch: Option<(u32, u64)>,
    },
    End(Vec<String>, Vec<TraceLane>),
}

/// An [`OpSlice`] with its names by number.
struct SliceRecord {
    op: OpId,
    label: u32,
    line: u32,
    reads: SmallVec<[u32; 4]>,
    writes: SmallVec<[u32; 4]>,
    state: OpState,
    device: Device,
    priority: i32,
    message: Option<Box<str>>,
    worker: u32,
    start_ns: u64,
    end_ns: u64,
}

/// A trace writer `T` fed here and run on a thread of its own (see the module's
/// documentation). [`TraceApart::finish`] waits for the thread and hands the writer back, to be
/// finished; dropped unfinished, it lets the thread take what it was handed and end.
pub(crate) struct TraceApart<T> {
    numbering: Numbering,
    batch: Vec<Piece>,
    /// `None` once finished.
    to_thread: Option<SyncSender<Vec<Piece>>>,
    /// Batches the thread has emptied, to fill again.
    emptied: Receiver<Vec<Piece>>,
    thread: Option<JoinHandle<T>>,
}

impl<T: TraceOut + Send + 'static> TraceApart<T> {
    /// Starts a thread that feeds `trace`.
    pub(crate) fn start(trace: T) -> io::Result<TraceApart<T>> {
        let (to_thread, from_recorder) = mpsc::sync_channel::<Vec<Piece>>(IN_FLIGHT);
        let (give_back, emptied) = mpsc::sync_channel::<Vec<Piece>>(IN_FLIGHT + 1);
        let thread = std::thread::Builder::new()
            .name("dep-trace-encode".into())
            .spawn(move || encode(trace, &from_recorder, &give_back))?;
        Ok(TraceApart {
            numbering: Numbering::default(),
            batch: Vec::with_capacity(BATCH),
            to_thread: Some(to_thread),
            emptied,
            thread: Some(thread),
        })
    }

    /// Hands the rest over and waits for the thread to take it all; returns the writer, to be
    /// finished.
    pub(crate) fn finish(mut self) -> io::Result<T> {
        self.send();
        self.to_thread = None;
        let thread = self.thread.take().expect("finished once");
        thread
            .join()
            .map_err(|_| io::Error::other("the trace's encoder panicked"))
    }
}

impl<T> TraceApart<T> {
    /// Hands the pieces gathered so far to the thread.
    fn send(&mut self) {
        let Some(to_thread) = &self.to_thread else {
            return;
        };
        let next = self
            .emptied
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH));
        let full = std::mem::replace(&mut self.batch, next);
        // A thread that is gone (it panicked) says so at the finish.
        let _ = to_thread.send(full);
    }

    /// Appends `piece`, handing the batch over once full.
    fn push(&mut self, piece: Piece) {
        self.batch.push(piece);
        if self.batch.len() >= BATCH {
            self.send();
        }
    }
}

impl<T> TraceOut for TraceApart<T> {
    fn event(&mut self, _: &dep_engine::Event) {}

    fn ran_at_once(&mut self, _: &dep_engine::RanAtOnce<'_>) {}

    fn slice(&mut self, slice: &OpSlice<'_>) {
        let batch = &mut self.batch;
        let numbering = &mut self.numbering;
        let label = numbering.number(slice.label, batch);
        let reads = numbering.numbers(slice.reads, batch);
        let writes = numbering.numbers(slice.writes, batch);
        self.push(Piece::Slice(SliceRecord {
            op: slice.op,
            label,
            line: slice.line,
            reads,
            writes,
            state: slice.state,
            device: slice.device,
            priority: slice.priority,
            message: slice.message.map(Box::from),
            worker: slice.worker,
            start_ns: slice.start_ns,
            end_ns: slice.end_ns,
        }));
    }

    fn flow(&mut self, flow: &Flow<'_>) {
        let var = self.numbering.number(flow.var, &mut self.batch);
        let more = flow
            .more
            .iter()
            .map(|(var, hazard)| (self.numbering.number(var, &mut self.batch), *hazard))
            .collect();
        self.push(Piece::Flow {
            id: flow.id,
            var,
            hazard: flow.hazard,
            more,
            from: flow.from,
            to: flow.to,
        });
    }

    fn device_slice(&mut self, slice: &DeviceSlice<'_>) {
        let label = self.numbering.number(slice.label, &mut self.batch);
        self.push(Piece::DeviceSlice {
            op: slice.op,
            label,
            line: slice.line,
            lane: slice.lane,
            start_ns: slice.start_ns,
            end_ns: slice.end_ns,
            launch: slice.launch,
        });
    }

    fn end(&mut self, worker_names: &[String], lanes: &[TraceLane]) {
        self.push(Piece::End(worker_names.to_vec(), lanes.to_vec()));
        self.send();
    }
}

/// The numbers of the names handed over: by text, each text once, with the last names seen
/// remembered by address in front (a loop's statements name the same few again and again).
struct Numbering {
    by_text: FxHashMap<Arc<str>, u32>,
    /// A name by a slot its address chooses, held so that the address stays its own.
    recent: [Option<(Arc<str>, u32)>; RECENT],
}

impl Default for Numbering {
    fn default() -> Numbering {
        Numbering {
            by_text: FxHashMap::default(),
            recent: std::array::from_fn(|_| None),
        }
    }
}

impl Numbering {
    /// The numbers of `names`, as [`Numbering::number`] gives each.
    fn numbers(&mut self, names: &[&Arc<str>], batch: &mut Vec<Piece>) -> SmallVec<[u32; 4]> {
        names.iter().map(|name| self.number(name, batch)).collect()
    }

    /// The number of `name`; a new one's text is appended to `batch` first.
    fn number(&mut self, name: &Arc<str>, batch: &mut Vec<Piece>) -> u32 {
        let slot = (Arc::as_ptr(name) as *const u8 as usize >> 4) % RECENT;
        if let Some((kept, number)) = &self.recent[slot] {
            if Arc::ptr_eq(kept, name) {
                return *number;
            }
        }
        let number = match self.by_text.get(&**name) {
            Some(number) => *number,
            None => {
                let number = self.by_text.len() as u32;
                self.by_text.insert(name.clone(), number);
                batch.push(Piece::Name(Box::from(&**name)));
                number
            }
        };
        self.recent[slot] = Some((name.clone(), number));
        number
    }
}

/// The thread's work: feeds every batch to `trace`, gives the emptied batches back, and hands
/// the trace back once the recorder has hung up.
fn encode<T: TraceOut>(
    mut trace: T,
    from_recorder: &Receiver<Vec<Piece>>,
    give_back: &SyncSender<Vec<Piece>>,
) -> T {
    let mut names: Vec<Arc<str>> = Vec::new();
    fn named<'a>(names: &'a [Arc<str>], numbers: &[u32]) -> SmallVec<[&'a Arc<str>; 4]> {
        numbers
            .iter()
            .map(|number| &names[*number as usize])
            .collect()
    }
    for mut batch in from_recorder {
        for piece in batch.drain(..) {
            match piece {
                Piece::Name(text) => names.push(Arc::from(text)),
                Piece::Slice(slice) => {
                    let reads = named(&names, &slice.reads);
                    let writes = named(&names, &slice.writes);
                    trace.slice(&OpSlice {
                        op: slice.op,
                        label: &names[slice.label as usize],
                        line: slice.line,
                        reads: &reads,
                        writes: &writes,
                        state: slice.state,
                        device: slice.device,
                        priority: slice.priority,
                        message: slice.message.as_deref(),
                        worker: slice.worker,
                        start_ns: slice.start_ns,
                        end_ns: slice.end_ns,
                    });
                }
                Piece::Flow {
                    id,
                    var,
                    hazard,
                    more,
                    from,
                    to,
                } => {
                    let more: Vec<(Arc<str>, Hazard)> = more
                        .iter()
                        .map(|(var, hazard)| (names[*var as usize].clone(), *hazard))
                        .collect();
                    trace.flow(&Flow {
                        id,
                        var: &names[var as usize],
                        hazard,
                        more: &more,
                        from,
                        to,
                    })
                }
                Piece::DeviceSlice {
                    op,
                    label,
                    line,
                    lane,
                    start_ns,
                    end_ns,
                    launch,
                } => trace.device_slice(&DeviceSlice {
                    op,
                    label: &names[label as usize],
                    line,
                    lane,
                    start_ns,
                    end_ns,
                    launch,
                }),
                Piece::End(worker_names, lanes) => trace.end(&worker_names, &lanes),
            }
        }
        // Kept by the recorder to fill again, unless it has enough.
        let _ = give_back.try_send(batch);
    }
    trace
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::sync::Arc;

    use dep_engine as engine;
    use dep_views as views;
    use views::fold::{RunFold, TraceOut};

    use super::TraceApart;

    /// A run on two workers with dependencies of every kind, a failure and a skip, as a replay.
    fn replay() -> views::Replay {
        let log = Arc::new(engine::EventLog::new());
        let engine = engine::Engine::new(engine::EngineConfig {
            policy: engine::Policy::Threaded,
            threads: 2,
            sink: Some(log.clone()),
            ..engine::EngineConfig::default()
        });
        let (a, b, c) = (
            engine.new_var("a"),
            engine.new_var("b"),
            engine.new_var("δ"),
        );
        let pause = || {
            std::thread::sleep(std::time::Duration::from_micros(300));
            Ok(())
        };
        for round in 0..20 {
            engine.push(engine::OpSpec::new("a = 1", pause).writes(&[a.clone()]));
            engine.push(
                engine::OpSpec::new("b = a + 1", pause)
                    .reads(&[a.clone()])
                    .writes(&[b.clone()]),
            );
            engine.push(
                engine::OpSpec::new("δ = a * b", pause)
                    .reads(&[a.clone(), b.clone()])
                    .writes(&[c.clone()]),
            );
            if round == 7 {
                engine.push(
                    engine::OpSpec::new("a = bad", || Err("shapes differ".to_string()))
                        .writes(&[a.clone()]),
                );
                engine.push(
                    engine::OpSpec::new("b = a", pause)
                        .reads(&[a.clone()])
                        .writes(&[b.clone()]),
                );
            }
        }
        engine.wait_all();
        let mut events = log.events();
        views::renumber_times(&mut events);
        views::Replay::new(events, engine.worker_names())
    }

    /// Feeds `replay`'s fold to `trace`.
    fn fold_into(replay: &views::Replay, trace: &mut dyn TraceOut) {
        let mut fold = RunFold::new();
        for event in replay.events() {
            fold.push(event, trace);
        }
        fold.finish(replay.worker_names(), trace);
    }

    /// `trace` fed `replay`'s fold here and on a thread of its own, handed back both ways.
    fn here_and_apart<T: TraceOut + Send + 'static>(
        replay: &views::Replay,
        make: impl Fn() -> T,
    ) -> (T, T) {
        let mut here = make();
        fold_into(replay, &mut here);
        let mut apart = TraceApart::start(make()).expect("a thread");
        fold_into(replay, &mut apart);
        (here, apart.finish().unwrap())
    }

    /// A Perfetto trace encoded apart is, byte for byte, the one encoded where the fold runs.
    #[test]
    fn a_perfetto_trace_encoded_apart_is_the_one_encoded_here() {
        let replay = replay();
        let (here, apart) =
            here_and_apart(&replay, || views::perfetto::PerfettoTrace::new(Vec::new()));
        let (here, apart) = (here.finish().unwrap(), apart.finish().unwrap());
        assert!(here.len() > 1000, "{} bytes", here.len());
        assert!(
            apart == here,
            "{} bytes apart, {} here",
            apart.len(),
            here.len()
        );
        let contents = views::perfetto::read(&apart).unwrap();
        assert!(contents
            .slices
            .iter()
            .any(|slice| slice.arguments.iter().any(|(name, _)| name == "message")));
    }

    /// So is a JSON trace whose event log is written apart (the encoder is handed no event).
    #[test]
    fn a_json_trace_encoded_apart_is_the_one_encoded_here() {
        let replay = replay();
        let (here, apart) = here_and_apart(&replay, || {
            views::trace::JsonTrace::<_, Cursor<Vec<u8>>>::without_events(Vec::new())
        });
        // The event log a thread of its own would have spooled: none here.
        let spool = || Ok(Cursor::new(Vec::new()));
        let (here, apart) = (
            here.finish_with(spool()).unwrap(),
            apart.finish_with(spool()).unwrap(),
        );
        assert!(here.len() > 1000, "{} bytes", here.len());
        assert!(
            apart == here,
            "{} bytes apart, {} here",
            apart.len(),
            here.len()
        );
        let contents = views::perfetto::read_json(std::str::from_utf8(&apart).unwrap()).unwrap();
        assert!(contents.flows.len() > 20, "{} flows", contents.flows.len());
    }
}
