//! What observing costs: the engine's per-op cost with an event log attached and the live
//! `--watch` renderer redrawing at 10 Hz from another thread, against the bare engine.
//!
//! Issue 4's goal is at most 1.5× the bare cost. The renderer does what `dep run --watch` does
//! on a terminal, short of writing to it: a snapshot through a `Monitor`, a `Frame`, and the
//! queues and ops text. Run: `cargo bench -p dep-bench --bench views`; each iteration pushes
//! `N_OPS` empty ops and waits for all, so criterion's time / N_OPS is the cost per op.

use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dep_engine::{Engine, EngineConfig, EventLog, EventSink, Monitor, OpSpec, Policy, Var};
use dep_views as views;

const N_OPS: usize = 10_000;

#[derive(Clone, Copy, PartialEq)]
enum Observer {
    /// No sink, no renderer.
    Bare,
    /// An event log, no renderer.
    Log,
    /// An event log and the live renderer at 10 Hz.
    LogAndWatch,
}

impl Observer {
    fn name(self) -> &'static str {
        match self {
            Observer::Bare => "bare",
            Observer::Log => "log",
            Observer::LogAndWatch => "log+watch10hz",
        }
    }
}

/// The `--watch` panel's work, minus the terminal: every 100 ms, render the live frame. Like the
/// panel (its `LiveFold`), it says at once that it will take snapshots.
fn start_renderer(monitor: Monitor) -> (mpsc::Sender<()>, JoinHandle<usize>) {
    monitor.expect_snapshots();
    let (stop, stopped) = mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let style = views::TextStyle::plain(120);
        let mut n_bytes = 0;
        while let Err(mpsc::RecvTimeoutError::Timeout) =
            stopped.recv_timeout(Duration::from_millis(100))
        {
            let frame = views::Frame::from_snapshot(&monitor.snapshot(), &monitor.worker_names())
                .busy_only();
            n_bytes += views::text::queues(&frame, &style).len();
            n_bytes += views::text::ops(&frame, &style).len();
        }
        n_bytes
    });
    (stop, thread)
}

/// How each op spends its time.
#[derive(Clone, Copy)]
enum Work {
    /// Nothing: the engine's own cost.
    Empty,
    /// Spins for 2 µs: a small real op (a 4-element add through the session costs about that).
    Spin2us,
}

fn push_ops(engine: &Engine, vars: &[Var], chain: bool, work: Work) {
    let label: Arc<str> = Arc::from("op");
    for index in 0..N_OPS {
        let var = if chain { &vars[0] } else { &vars[index] };
        let spec = match work {
            Work::Empty => OpSpec::new(label.clone(), || Ok(())),
            Work::Spin2us => OpSpec::new(label.clone(), || {
                let start = Instant::now();
                while start.elapsed() < Duration::from_micros(2) {
                    std::hint::spin_loop();
                }
                Ok(())
            }),
        };
        engine.push(spec.writes(std::slice::from_ref(var)));
    }
}

fn bench_views(c: &mut Criterion) {
    let mut group = c.benchmark_group("observe");
    group.throughput(Throughput::Elements(N_OPS as u64));
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    for (shape, chain, work) in [
        ("independent", false, Work::Empty),
        ("chain", true, Work::Empty),
        ("independent-2us", false, Work::Spin2us),
    ] {
        for (policy, threads) in [(Policy::Naive, 1), (Policy::Threaded, 2)] {
            for observer in [Observer::Bare, Observer::Log, Observer::LogAndWatch] {
                let id = format!(
                    "{shape}/{}{}/{}",
                    policy.name(),
                    if policy == Policy::Naive {
                        String::new()
                    } else {
                        threads.to_string()
                    },
                    observer.name()
                );
                group.bench_function(BenchmarkId::from_parameter(id), |bencher| {
                    bencher.iter_custom(|iterations| {
                        let log = Arc::new(EventLog::new());
                        let sink =
                            (observer != Observer::Bare).then(|| log.clone() as Arc<dyn EventSink>);
                        let engine = Engine::new(EngineConfig {
                            policy,
                            threads,
                            sink,
                            ..EngineConfig::default()
                        });
                        let vars: Vec<Var> = (0..N_OPS)
                            .map(|index| engine.new_var(format!("v{index}")))
                            .collect();
                        let renderer = (observer == Observer::LogAndWatch)
                            .then(|| start_renderer(engine.monitor()));
                        let mut total = Duration::ZERO;
                        for _ in 0..iterations {
                            let start = Instant::now();
                            push_ops(&engine, &vars, chain, work);
                            engine.wait_all();
                            total += start.elapsed();
                            log.clear();
                        }
                        if let Some((stop, thread)) = renderer {
                            let _ = stop.send(());
                            let _ = thread.join();
                        }
                        total
                    })
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench_views);
criterion_main!(benches);
