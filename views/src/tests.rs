//! Tests of the views: snapshot tests of every rendering of fixed runs (seed 000's example and a
//! write-after-read / write-after-write script under the naive engine, with times renumbered by
//! event index), a live snapshot of blocked queues, the trace read back and checked on a parallel
//! run, and the why-waiting sentence behind a slow matmul.
//!
//! Scripts here are tiny: each line is a statement whose target is written and whose other
//! capitalised names are read (`B = A + 1`), `print X` waits for X, `del X` deletes X. The
//! engine runs them as empty ops, so the views see exactly the accesses a session would push.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dep_engine::{Engine, EngineConfig, EventKind, EventLog, OpSpec, OpState, Policy, Var};
use expect_test::{expect, expect_file, Expect};

use crate::{dot, html, svg, text, trace, Frame, Replay, Summary, TextStyle};

const SEED_000: &str = "A = 2
B = A + 1
C = A + 2
A = C * 2
D = A + 3
print D";

/// Reads of A after a write of A, then writes of A behind those reads and behind a write.
const MUTATION: &str = "A = 1
B = A + 1
C = A * 3
A = 5
A = A * 2
D = B + C
E = A + D
del B
print E";

const STYLE: TextStyle = TextStyle {
    color: false,
    width: 100,
};

/// An engine with an event log, and the names of the variables a script created.
struct Bench {
    engine: Engine,
    log: Arc<EventLog>,
    vars: HashMap<String, Var>,
}

impl Bench {
    fn new(policy: Policy, threads: usize) -> Bench {
        let log = Arc::new(EventLog::new());
        let engine = Engine::new(EngineConfig {
            policy,
            threads,
            sink: Some(log.clone()),
            ..EngineConfig::default()
        });
        Bench {
            engine,
            log,
            vars: HashMap::new(),
        }
    }

    /// Pushes each line of `script` as one op running `body(line number)`.
    fn push_script(&mut self, script: &str, body: &dyn Fn(u32) -> Box<dyn FnOnce() + Send>) {
        for (index, statement) in script.lines().enumerate() {
            let line = index as u32 + 1;
            let words: Vec<&str> = statement.split_whitespace().collect();
            match words.as_slice() {
                ["print", name] => {
                    let var = self.vars[*name].clone();
                    let _ = self.engine.wait_var(&var, 0);
                }
                ["del", name] => {
                    let var = self.vars.remove(*name).expect("del of a known variable");
                    self.engine.delete_var(var, 0, || ());
                }
                [target, "=", value @ ..] => {
                    let reads: Vec<Var> = value
                        .iter()
                        .filter(|word| word.starts_with(|ch: char| ch.is_ascii_uppercase()))
                        .map(|name| self.vars[*name].clone())
                        .collect();
                    let engine = &self.engine;
                    let write = self
                        .vars
                        .entry(target.to_string())
                        .or_insert_with(|| engine.new_var(*target))
                        .clone();
                    let run = body(line);
                    self.engine.push(
                        OpSpec::new(statement, move || {
                            run();
                            Ok(())
                        })
                        .reads(&reads)
                        .writes(&[write])
                        .line(line),
                    );
                }
                _ => panic!("not a test statement: {statement}"),
            }
        }
    }

    /// Pushes `script` as [`Bench::push_script`] does, the op of line `held` holding its
    /// variables until the returned sender sends (or is dropped); returns once it runs.
    fn push_held(&mut self, script: &str, held: u32) -> mpsc::Sender<()> {
        let (release, gate) = mpsc::channel::<()>();
        let (started_out, started) = mpsc::channel::<()>();
        let gate = std::sync::Mutex::new(Some((gate, started_out)));
        self.push_script(script, &|line| {
            let taken = if line == held {
                gate.lock().unwrap().take()
            } else {
                None
            };
            Box::new(move || {
                if let Some((gate, started_out)) = taken {
                    started_out.send(()).unwrap();
                    let _ = gate.recv();
                }
            })
        });
        started.recv().unwrap();
        release
    }

    fn replay(&self) -> Replay {
        Replay::new(self.log.events(), self.engine.worker_names())
    }
}

fn no_work(_: u32) -> Box<dyn FnOnce() + Send> {
    Box::new(|| ())
}

/// The replay of `script` under the naive engine, with times renumbered by event index.
fn naive_replay(script: &str) -> Replay {
    let mut bench = Bench::new(Policy::Naive, 1);
    bench.push_script(script, &no_work);
    bench.engine.wait_all();
    let mut events = bench.log.events();
    crate::renumber_times(&mut events);
    Replay::new(events, bench.engine.worker_names())
}

/// MUTATION on two workers, with times renumbered: real queueing, reproducible times.
pub(crate) fn threaded_mutation_replay() -> Replay {
    let mut bench = Bench::new(Policy::Threaded, 2);
    bench.push_script(MUTATION, &|_| {
        Box::new(|| std::thread::sleep(Duration::from_millis(2)))
    });
    bench.engine.wait_all();
    let mut events = bench.log.events();
    crate::renumber_times(&mut events);
    Replay::new(events, bench.engine.worker_names())
}

/// A chain of at least `n_events` events on the naive engine (`B = A + 1`, `A = B + 1`, …),
/// times renumbered: a log longer than a stepper's checkpoint spacing, whose state stays small.
pub(crate) fn long_chain_replay(n_events: usize) -> Replay {
    let mut bench = Bench::new(Policy::Naive, 1);
    let script: String = std::iter::once("A = 1".to_string())
        .chain((0..n_events / 4).map(|index| {
            if index % 2 == 0 {
                "B = A + 1".to_string()
            } else {
                "A = B + 1".to_string()
            }
        }))
        .collect::<Vec<_>>()
        .join("\n");
    bench.push_script(&script, &no_work);
    bench.engine.wait_all();
    let mut events = bench.log.events();
    crate::renumber_times(&mut events);
    Replay::new(events, bench.engine.worker_names())
}

/// A slow op overtaken: `B = A + 1` runs on one of two workers until ten reads of A after it
/// (`C1 = A + 1` …) have run and ended on the other, then `D = B + 1` waits for B. Times
/// renumbered. A cut while B runs carries B and D and leaves the ten between them out.
pub(crate) fn overtaken_replay() -> Replay {
    let mut bench = Bench::new(Policy::Threaded, 2);
    let script: String = ["A = 1".to_string(), "B = A + 1".to_string()]
        .into_iter()
        .chain((1..=10).map(|index| format!("C{index} = A + 1")))
        .chain(std::iter::once("D = B + 1".to_string()))
        .collect::<Vec<_>>()
        .join("\n");
    // B ends only once the ten reads have ended, whichever order the workers take them in
    // (a loaded machine may ready them all at once when A ends, and a worker's own queue is
    // last in, first out), and the reads end only once D is pushed (a pusher held up on a
    // loaded machine could push D after they ended, and a cut would find it not pushed yet);
    // a deadline keeps a broken engine from hanging the test.
    let reads_done = Arc::new(AtomicUsize::new(0));
    let all_pushed = Arc::new(AtomicUsize::new(0));
    let wait_until = |count: &AtomicUsize, at_least: usize| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while count.load(Ordering::SeqCst) < at_least && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    bench.push_script(&script, &|line| {
        let reads_done = Arc::clone(&reads_done);
        let all_pushed = Arc::clone(&all_pushed);
        Box::new(move || match line {
            2 => wait_until(&reads_done, 10),
            3..=12 => {
                wait_until(&all_pushed, 1);
                reads_done.fetch_add(1, Ordering::SeqCst);
            }
            _ => {}
        })
    });
    all_pushed.store(1, Ordering::SeqCst);
    bench.engine.wait_all();
    let mut events = bench.log.events();
    crate::renumber_times(&mut events);
    Replay::new(events, bench.engine.worker_names())
}

/// Ops that read and write the same variable (two accesses of one op in one queue), each taking
/// a millisecond on two workers, times renumbered.
pub(crate) fn self_update_replay() -> Replay {
    let mut bench = Bench::new(Policy::Threaded, 2);
    bench.push_script(
        "A = 1\nB = A + 1\nA = A + 1\nB = A + B\nA = A + 1\nC = B + A\nB = B + 1",
        &|_| Box::new(|| std::thread::sleep(Duration::from_millis(1))),
    );
    bench.engine.wait_all();
    let mut events = bench.log.events();
    crate::renumber_times(&mut events);
    Replay::new(events, bench.engine.worker_names())
}

/// One slow write of A, then 20 reads of A queued behind it, on two workers, times renumbered:
/// a queue longer than the HTML views show.
pub(crate) fn long_queue_replay() -> Replay {
    let mut bench = Bench::new(Policy::Threaded, 2);
    let script: String = std::iter::once("A = 1".to_string())
        .chain((1..=20).map(|index| format!("B{index} = A + 1")))
        .collect::<Vec<_>>()
        .join("\n");
    bench.push_script(&script, &|line| {
        Box::new(move || {
            if line == 1 {
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    });
    bench.engine.wait_all();
    let mut events = bench.log.events();
    crate::renumber_times(&mut events);
    Replay::new(events, bench.engine.worker_names())
}

/// The listing's text of step `n_events` of `replay`.
fn step_text(replay: &Replay, n_events: usize) -> String {
    let mut stepper = crate::Stepper::new(replay);
    stepper.go_to(n_events);
    text::step(&stepper, &STYLE)
}

fn check_text(actual: String, expect: Expect) {
    expect.assert_eq(&actual);
}

#[test]
fn seed000_ops_timeline_and_summary() {
    let replay = naive_replay(SEED_000);
    check_text(
        text::ops(&replay.final_frame(), &STYLE),
        expect![[r#"
            op                                                     line state     worker        start   duration
            A = 2                                                     1 done      main           4 µs       1 µs
            B = A + 1                                                 2 done      main          11 µs       1 µs
            C = A + 2                                                 3 done      main          18 µs       1 µs
            A = C * 2                                                 4 done      main          24 µs       1 µs
            D = A + 3                                                 5 done      main          31 µs       1 µs
            wait D                                                    - done      main          36 µs       1 µs
        "#]],
    );
    check_text(
        text::timeline(&replay, &STYLE, None, None),
        expect![[r#"
            timeline  (36 µs wall, from the first push at 1 µs; ━ critical path)
              main │·······▕A ···············▕B···············▕C ·············▕A···············▕D ··········▕wa│
                   └ 0                                                                                     36 µs
        "#]],
    );
    check_text(
        text::summary(&Summary::of(&replay), &STYLE),
        expect![[r#"
            summary: 6 ops (6 done), wall 36 µs
              busy: main 6 µs (17%)
              parallelism: 0.17 (total busy time / wall time)
              critical path: 5 µs over 5 ops: A = 2 (line 1) → C = A + 2 (line 3) → A = C * 2 (line 4) →
              D = A + 3 (line 5) → wait D
        "#]],
    );
}

/// A SPAN longer than the run draws the text timeline on an axis that long, the run in its first
/// part, so that two timelines share a scale (the REPL's `:timeline 72us`).
#[test]
fn a_text_timeline_spans_at_least_its_span() {
    let replay = naive_replay(SEED_000);
    check_text(
        text::timeline(&replay, &STYLE, Some(72_000), None),
        expect![[r#"
            timeline  (36 µs wall, from the first push at 1 µs; ━ critical path)
              main │···▕A·······B········C·······A·······▕D·····w··············································│
                   └ 0                                                                                     72 µs
        "#]],
    );
}

/// One op is "1 op", and a run of none says so instead of `0 ops (), wall 0 ns` and an empty
/// critical path; the SVG timeline's title counts alike.
#[test]
fn a_summary_of_one_op_or_none_reads_as_english() {
    let one = naive_replay("x = 1");
    let summary = text::summary(&Summary::of(&one), &STYLE);
    assert!(
        summary.starts_with("summary: 1 op (1 done), wall "),
        "{summary}"
    );
    assert!(summary.contains(" over 1 op: x = 1 (line 1)"), "{summary}");
    let svg = svg::timeline(&one, &svg::TimelineOptions::default());
    assert!(svg.contains(">timeline: 1 op, "), "{svg}");
    let none = naive_replay("");
    assert_eq!(
        text::summary(&Summary::of(&none), &STYLE),
        "summary: no ops\n"
    );
    assert_eq!(
        [text::count(1usize, "edge"), text::count(0u64, "edge")],
        ["1 edge", "0 edges"]
    );
}

/// A statement longer than a line breaks at its own spaces in the summary's critical path,
/// never inside a name (it was cut at the column: `@ dZ` then `4…` on the next line).
#[test]
fn a_critical_path_statement_longer_than_a_line_breaks_between_words() {
    // 99 characters: as long as a described label gets, past a line of [`STYLE`].
    let mut terms: Vec<String> = (0..10).map(|i| format!("term{i}")).collect();
    terms.push("abcdefghijklmno".to_string());
    let long = format!("x = {}", terms.join(" + "));
    let replay = naive_replay(&format!("{long}\ny = x * 2"));
    let summary = text::summary(&Summary::of(&replay), &STYLE);
    let path: Vec<&str> = summary
        .lines()
        .skip_while(|line| !line.contains("critical path:"))
        .collect();
    assert!(path.len() > 1, "{summary}");
    for term in &terms {
        assert!(
            path.iter()
                .any(|line| line.split([' ', ')']).any(|word| word == term)),
            "{term} split: {summary}"
        );
    }
}

#[test]
fn seed000_svg_and_dot() {
    let replay = naive_replay(SEED_000);
    expect_file!["../test_data/seed000_timeline.svg"].assert_eq(&svg::timeline(
        &replay,
        &svg::TimelineOptions {
            width_px: 900,
            arrows: true,
            ..Default::default()
        },
    ));
    expect_file!["../test_data/seed000.dot"].assert_eq(&dot::dag(&replay));
}

/// 5,000 ops in 1,000 pixels: thin bars starting in one pixel column are drawn as one bar, whose
/// tooltip counts them; the file stays small and every op is still accounted for.
#[test]
fn thin_bars_in_a_row_are_drawn_as_one() {
    let script: String = std::iter::once("A = 1".to_string())
        .chain((2..=5000).map(|_| "A = A + 1".to_string()))
        .collect::<Vec<_>>()
        .join("\n");
    let replay = naive_replay(&script);
    let svg = svg::timeline(&replay, &svg::TimelineOptions::default());
    let n_bars = svg.matches("<g><title>").count();
    assert!(
        n_bars <= 1100,
        "{n_bars} bars for 5,000 ops in 1,100 pixels"
    );
    let counted: usize = svg
        .split("<g><title>")
        .skip(1)
        .map(|bar| match bar.split_once(" ops on main (") {
            Some((count, _)) => count.parse::<usize>().unwrap(),
            None => 1,
        })
        .sum();
    assert_eq!(counted, 5000);
    assert!(svg.contains("A = 1 (line 1) … A = A + 1"), "{svg}");
}

/// Dependency arrows join what is drawn: over 5,000 chained ops in 1,000 pixels, one arrow
/// from each drawn bar (or run of thin bars drawn as one) to the next, none inside one, each
/// counting the edges it stands for in its tooltip; an arrow per edge was megabytes of curves a
/// pixel long on a long run.
#[test]
fn arrows_join_the_bars_drawn_not_every_op() {
    let script: String = std::iter::once("A = 1".to_string())
        .chain((2..=5000).map(|_| "A = A + 1".to_string()))
        .collect::<Vec<_>>()
        .join("\n");
    let replay = naive_replay(&script);
    let options = svg::TimelineOptions {
        arrows: true,
        ..Default::default()
    };
    let svg = svg::timeline(&replay, &options);
    let n_bars = svg.matches("<g><title>").count();
    let titles: Vec<&str> = svg
        .split("class=\"dep-arrow\"")
        .skip(1)
        .map(|arrow| {
            let title = arrow.split_once("<title>").unwrap().1;
            title.split_once("</title>").unwrap().0
        })
        .collect();
    assert_eq!(titles.len(), n_bars - 1, "{svg}");
    let n_edges: usize = titles
        .iter()
        .map(|title| match title.split_once(" dependencies: ") {
            Some((count, _)) => count.parse::<usize>().unwrap(),
            None => 1,
        })
        .sum();
    assert!(n_edges < replay.edges().len(), "{n_edges} edges drawn");
    // Each run's last op is written over by the next run's first: one edge between them.
    assert!(titles.iter().all(|title| *title == "WAW A"), "{titles:?}");
}

/// A run of thin bars shows a failure among done ops.
#[test]
fn a_run_of_thin_bars_takes_its_most_notable_state() {
    let replay = naive_replay(SEED_000);
    let mut records: Vec<crate::OpRecord> = replay.ops().to_vec();
    records[2].state = dep_engine::OpState::Failed;
    let bars: Vec<crate::Bar<'_>> = records
        .iter()
        .map(|op| crate::Bar {
            op,
            start_ns: 0,
            end_ns: 1,
        })
        .collect();
    assert_eq!(svg::run_state(&bars), dep_engine::OpState::Failed);
    assert_eq!(svg::run_state(&bars[..2]), dep_engine::OpState::Done);
}

#[test]
fn mutation_dag_has_every_hazard() {
    let replay = naive_replay(MUTATION);
    expect_file!["../test_data/mutation.dot"].assert_eq(&dot::dag(&replay));
    expect_file!["../test_data/mutation_timeline.svg"]
        .assert_eq(&svg::timeline(&replay, &svg::TimelineOptions::default()));
    check_text(
        text::summary(&Summary::of(&replay), &STYLE),
        expect![[r#"
            summary: 9 ops (9 done), wall 55 µs
              busy: main 9 µs (16%)
              parallelism: 0.16 (total busy time / wall time)
              critical path: 6 µs over 6 ops: A = 1 (line 1) → C = A * 3 (line 3) → A = 5 (line 4) →
              A = A * 2 (line 5) → E = A + D (line 7) → wait E
        "#]],
    );
}

#[test]
fn stepping_shows_queued_accesses_between_push_and_grant() {
    let replay = naive_replay(SEED_000);
    // Find the push of `B = A + 1`: one step later its read of A is queued, not yet granted.
    let pushed = replay.ops()[1].pushed_at;
    check_text(
        step_text(&replay, pushed + 1),
        expect![[r#"
            step 8/38 at 7 µs: pushed B = A + 1 (line 2)
            queues  (● granted, ○ waiting)
              A ○ R B = A + 1 (line 2)
              B ○ W B = A + 1 (line 2)
            op                                                     line state     worker        start   duration
            A = 2                                                     1 done      main           4 µs       1 µs
            B = A + 1                                                 2 waiting   -                 -          -
              ↳ B = A + 1 (line 2) waits for its grants: nothing is ahead of it in its queues
        "#]],
    );
    check_text(
        step_text(&replay, pushed + 2),
        expect![[r#"
            step 9/38 at 8 µs: granted A to B = A + 1 (line 2)
            queues  (● granted, ○ waiting)
              A ● R B = A + 1 (line 2)
              B ○ W B = A + 1 (line 2)
            op                                                     line state     worker        start   duration
            A = 2                                                     1 done      main           4 µs       1 µs
            B = A + 1                                                 2 waiting   -                 -          -
              ↳ B = A + 1 (line 2) waits for its grants: nothing is ahead of it in its queues
        "#]],
    );
    // Every access granted, not yet ready: it waits for no grant any more (it said it did).
    check_text(
        step_text(&replay, pushed + 3),
        expect![[r#"
        step 10/38 at 9 µs: granted B to B = A + 1 (line 2)
        queues  (● granted, ○ waiting)
          A ● R B = A + 1 (line 2)
          B ● W B = A + 1 (line 2)
        op                                                     line state     worker        start   duration
        A = 2                                                     1 done      main           4 µs       1 µs
        B = A + 1                                                 2 waiting   -                 -          -
          ↳ B = A + 1 (line 2) has every grant: the engine makes it ready next
    "#]],
    );
}

/// Pushes seed 000 on one worker whose first op blocks until released, and shows the live view.
#[test]
fn live_queues_and_why_waiting_behind_a_blocked_op() {
    let mut bench = Bench::new(Policy::Threaded, 1);
    let (release, gate) = mpsc::channel::<()>();
    let gate = std::sync::Mutex::new(Some(gate));
    let script: String = SEED_000.lines().take(5).collect::<Vec<_>>().join("\n");
    bench.push_script(&script, &|line| {
        let gate = if line == 1 {
            gate.lock().unwrap().take()
        } else {
            None
        };
        Box::new(move || {
            if let Some(gate) = gate {
                let _ = gate.recv();
            }
        })
    });
    let monitor = bench.engine.monitor();
    let frame = wait_for(|| {
        let frame = Frame::from_snapshot(&monitor.snapshot(), &monitor.worker_names());
        (frame.ops.first()?.state == OpState::Running).then_some(frame)
    });
    check_text(
        text::queues(&frame, &STYLE),
        expect![[r#"
        queues  (● granted, ○ waiting)
          A ● W A = 2 (line 1) │ ○ R B = A + 1 (line 2) │ ○ R C = A + 2 (line 3) … +2
          B ● W B = A + 1 (line 2)
          C ● W C = A + 2 (line 3) │ ○ R A = C * 2 (line 4)
          D ● W D = A + 3 (line 5)
    "#]],
    );
    check_text(
        text::ops(&frame, &STYLE),
        expect![[r#"
            op                                                     line state     worker        start   duration
            A = 2                                                     1 running   cpu:0             -          -
            B = A + 1                                                 2 waiting   -                 -          -
              ↳ B = A + 1 (line 2) waits for A: written by A = 2 (line 1), running on cpu:0
            C = A + 2                                                 3 waiting   -                 -          -
              ↳ C = A + 2 (line 3) waits for A: written by A = 2 (line 1), running on cpu:0
            A = C * 2                                                 4 waiting   -                 -          -
              ↳ A = C * 2 (line 4) waits for A: read by B = A + 1 (line 2), itself waiting, and by C = A + 2
                (line 3), itself waiting; and for C: written by C = A + 2 (line 3), itself waiting
            D = A + 3                                                 5 waiting   -                 -          -
              ↳ D = A + 3 (line 5) waits for A: written by A = C * 2 (line 4), itself waiting
        "#]],
    );
    assert_eq!(
        frame.why("D").as_deref(),
        Some("D will be written by D = A + 3 (line 5), which waits for A: written by A = C * 2 (line 4), itself waiting")
    );
    let fragment = html::fragment(&frame);
    assert!(fragment.contains("dep-why"), "{fragment}");
    release.send(()).unwrap();
    bench.engine.wait_all();
}

/// `Z = Y + 1` waits behind a real 600×600 matmul run by the session on the threaded engine.
#[test]
fn why_waiting_behind_a_slow_matmul() {
    let mut session = dep_interp::Session::new(dep_interp::SessionConfig {
        policy: Policy::Threaded,
        threads: 2,
        observe: true,
        ..dep_interp::SessionConfig::default()
    });
    let source = "X = rand(600, 600)\nY = X @ X\nZ = Y + 1\n";
    session
        .run_source("slow.dep", source, &mut Vec::new())
        .unwrap();
    let engine = session.monitor();
    let deadline = Instant::now() + Duration::from_secs(30);
    let sentence = loop {
        let frame = Frame::from_snapshot(&engine.snapshot(), &engine.worker_names());
        let matmul_running = frame
            .ops
            .iter()
            .any(|op| &*op.label == "Y = X @ X" && op.state == OpState::Running);
        let waiting = frame.ops.iter().find(|op| &*op.label == "Z = Y + 1");
        if let (true, Some(waiting)) = (matmul_running, waiting) {
            break format!(
                "{} {}",
                waiting.describe(),
                frame.why_waiting(waiting).unwrap()
            );
        }
        assert!(
            Instant::now() < deadline && engine.n_unfinished() > 0,
            "never saw the matmul running with Z waiting"
        );
        std::thread::sleep(Duration::from_micros(200));
    };
    assert!(
        sentence.starts_with(
            "Z = Y + 1 (line 3) waits for Y: written by Y = X @ X (line 2), running on cpu:"
        ),
        "{sentence}"
    );
    session.finish().unwrap();
}

/// A run with real parallelism: independent chains that spin for a while, joined at the end.
#[test]
fn trace_of_a_parallel_run_reads_back_consistent() {
    let mut bench = Bench::new(Policy::Threaded, 2);
    // Four independent chains of three ops, then a join: up to four ops can run at once.
    let mut script = String::new();
    for chain in ["P", "Q", "R", "S"] {
        script.push_str(&format!(
            "{chain} = 1\n{chain} = {chain} + 1\n{chain} = {chain} * 2\n"
        ));
    }
    script.push_str("J = P + Q\nK = R + S\nL = J + K\n");
    let script = script.as_str();
    bench.push_script(script, &|_| {
        Box::new(|| {
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(3) {
                std::hint::spin_loop();
            }
        })
    });
    bench.engine.wait_all();
    let replay = bench.replay();
    let json = trace::chrome_trace(&replay);
    check_trace(&json, &replay);

    let back = trace::read_trace(&json).unwrap();
    assert_eq!(back.ops(), replay.ops());
    assert_eq!(back.edges(), replay.edges());
    assert_eq!(back.worker_names(), replay.worker_names());
    // Read from a file's bytes, with room taken from its length (exact, unknown, much too
    // small, much too large): the same replay.
    for length in [json.len() as u64, 0, 10, 1 << 24] {
        let read = trace::read_trace_from(json.as_bytes(), length).unwrap();
        assert_eq!(read.events(), back.events(), "length {length}");
        assert_eq!(read.ops(), back.ops(), "length {length}");
    }
    let ran_in_parallel = replay.ops().iter().any(|first| {
        replay.ops().iter().any(|second| {
            first.worker != second.worker
                && first.started_ns < second.started_ns
                && second.started_ns < first.finished_ns
        })
    });
    assert!(ran_in_parallel, "{:?}", Summary::of(&replay));
}

#[test]
fn a_summary_alone_skips_slices_and_flows_but_not_their_effect() {
    use crate::fold::{DeviceSlice, Flow, NoTrace, OpSlice, RunFold, TraceLane, TraceOut};
    /// Counts what a trace would get.
    #[derive(Default)]
    struct Counting {
        slices: usize,
        flows: usize,
    }
    impl TraceOut for Counting {
        fn event(&mut self, _: &dep_engine::Event) {}
        fn slice(&mut self, _: &OpSlice<'_>) {
            self.slices += 1;
        }
        fn flow(&mut self, _: &Flow<'_>) {
            self.flows += 1;
        }
        fn device_slice(&mut self, _: &DeviceSlice<'_>) {}
        fn end(&mut self, _: &[String], _: &[TraceLane]) {}
    }
    let replay = naive_replay(MUTATION);
    let (mut bare, mut traced) = (RunFold::new(), RunFold::new());
    let mut counting = Counting::default();
    for event in replay.events() {
        bare.push(event, &mut NoTrace);
        traced.push(event, &mut counting);
    }
    let summary = bare.finish(replay.worker_names(), &mut NoTrace);
    let traced_summary = traced.finish(replay.worker_names(), &mut counting);
    assert_eq!(
        summary, traced_summary,
        "a trace changes nothing in the summary"
    );
    assert_eq!(summary, Summary::of(&replay));
    assert_eq!(counting.slices, replay.ops().len());
    assert!(counting.flows > 0, "the mutation script has dependencies");
}

#[test]
fn reading_a_foreign_trace_says_why_it_fails() {
    let error = trace::read_trace(r#"{"traceEvents": []}"#).unwrap_err();
    assert_eq!(error.kind(), crate::ErrorKind::BadTrace);
    assert_eq!(
        error.to_string(),
        "no `depEvents` key: this trace was not written by dep"
    );
}

#[test]
fn player_shows_the_final_state_without_scripts() {
    let replay = naive_replay(SEED_000);
    let page = html::player(&replay, "seed 000 </script>", &crate::Prologue::default());
    let without_scripts: String = page.split("<script").next().unwrap().to_string();
    assert!(
        without_scripts.contains(
            "<td>D = A + 3</td><td>5</td><td><span class=\"dep-state dep-done\">done</span>"
        ),
        "{without_scripts}"
    );
    assert!(!page.contains("seed 000 </script>"), "the title is escaped");
    assert_eq!(
        page.matches("</script>").count(),
        2,
        "the data block cannot end early"
    );
}

/// A chain of three GPU ops whose kernels a "device" thread reports after the ops finished, as
/// the GPU timing thread does; times renumbered, kernel times then set to fixed values (each
/// kernel 5 µs, starting 2 µs after the one before ended).
fn gpu_chain_replay() -> Replay {
    let log = Arc::new(EventLog::new());
    let engine = Engine::new(EngineConfig {
        policy: Policy::Naive,
        sink: Some(log.clone()),
        ..EngineConfig::default()
    });
    let (clocks, reported) = mpsc::channel();
    let mut previous: Option<Var> = None;
    for (index, statement) in ["X = 1", "Y = X + 1", "Z = Y * 2"].into_iter().enumerate() {
        let var = engine.new_var(&statement[..1]);
        let clocks = clocks.clone();
        engine.push(
            OpSpec::new(statement, move || {
                clocks
                    .send(dep_engine::DeviceClock::current().unwrap())
                    .unwrap();
                Ok(())
            })
            .reads(previous.as_slice())
            .writes(&[var.clone()])
            .line(index as u32 + 1)
            .device(dep_engine::Device::Gpu(0)),
        );
        previous = Some(var);
    }
    engine.wait_all();
    drop(clocks);
    std::thread::spawn(move || {
        let now = Instant::now();
        for clock in reported {
            clock.report("gpu0:s0", now, now);
        }
    })
    .join()
    .unwrap();
    let mut events = log.events();
    crate::renumber_times(&mut events);
    let mut kernel_start = 40_000;
    for event in &mut events {
        if let dep_engine::EventKind::DeviceSpan {
            start_ns, end_ns, ..
        } = &mut event.kind
        {
            (*start_ns, *end_ns) = (kernel_start, kernel_start + 5_000);
            kernel_start += 7_000;
        }
    }
    Replay::new(events, engine.worker_names())
}

#[test]
fn gpu_kernels_show_on_a_device_lane_with_their_idle_gaps() {
    let replay = gpu_chain_replay();
    check_text(
        text::timeline(&replay, &STYLE, None, None),
        expect![[r#"
            timeline  (58 µs wall, from the first push at 1 µs; ━ critical path)
              main        │····X·········Y·········▕Z··························································│
              dev:gpu0:s0 │························································▕X = 1─···▕Y = X ···▕Z = Y *│
                          └ 0                                                                              58 µs
        "#]],
    );
    check_text(
        text::summary(&Summary::of(&replay), &STYLE),
        expect![[r#"
            summary: 3 ops (3 done), wall 58 µs
              busy: main 3 µs (5%)
              parallelism: 0.05 (total busy time / wall time)
              kernels: dev:gpu0:s0 15 µs; device idle between dependent kernels: mean 2 µs, max 2 µs over 2
              pairs
              critical path: 15 µs over 3 ops: X = 1 (line 1) → Y = X + 1 (line 2) → Z = Y * 2 (line 3)
        "#]],
    );
    let svg = svg::timeline(&replay, &svg::TimelineOptions::default());
    assert!(svg.contains(">dev:gpu0:s0<"), "{svg}");
    assert!(
        svg.contains("Y = X + 1 (line 2) · done · kernels on dev:gpu0:s0"),
        "{svg}"
    );

    let json = trace::chrome_trace(&replay);
    check_trace(&json, &replay);
    let document: serde_json::Value = serde_json::from_str(&json).unwrap();
    let events = document["traceEvents"].as_array().unwrap();
    let kernels: Vec<&serde_json::Value> = events
        .iter()
        .filter(|event| event["ph"] == "X" && event["cat"] == "device")
        .collect();
    assert_eq!(kernels.len(), 3);
    assert!(kernels.iter().all(|kernel| kernel["tid"] == 10_000));
    assert_eq!(kernels[1]["ts"], 47.0);
    let launches = events
        .iter()
        .filter(|event| event["cat"] == "launch")
        .count();
    assert_eq!(launches, 6, "a launch flow per kernel");
    let back = trace::read_trace(&json).unwrap();
    assert_eq!(back.ops(), replay.ops(), "device spans survive the trace");
}

/// Parses a Chrome trace and checks it against the replay it came from.
fn check_trace(json: &str, replay: &Replay) {
    let document: serde_json::Value = serde_json::from_str(json).unwrap();
    let events = document["traceEvents"].as_array().unwrap();
    let slices: Vec<&serde_json::Value> = events
        .iter()
        .filter(|event| event["ph"] == "X" && event["cat"] == "op")
        .collect();
    // Every op exactly once.
    let mut seen: Vec<u64> = slices
        .iter()
        .map(|slice| slice["args"]["op"].as_u64().unwrap())
        .collect();
    seen.sort_unstable();
    let expected: Vec<u64> = replay.ops().iter().map(|op| op.id.0).collect();
    assert_eq!(seen, expected, "every op exactly once");
    // Every worker that ran something is named.
    for slice in &slices {
        assert!(
            events.iter().any(|event| event["ph"] == "M"
                && event["name"] == "thread_name"
                && event["tid"] == slice["tid"]),
            "an unnamed thread: {slice}"
        );
    }
    // No slice overlaps another on its thread.
    let interval = |slice: &serde_json::Value| {
        let start = slice["ts"].as_f64().unwrap();
        (start, start + slice["dur"].as_f64().unwrap())
    };
    for (index, first) in slices.iter().enumerate() {
        for second in &slices[index + 1..] {
            if first["tid"] != second["tid"] {
                continue;
            }
            let (a, b) = (interval(first), interval(second));
            assert!(a.1 <= b.0 || b.1 <= a.0, "overlap: {first} and {second}");
        }
    }
    // Every edge is one flow pair, and every consumer starts after its producer ends.
    let slice_of = |op: u64| {
        *slices
            .iter()
            .find(|slice| slice["args"]["op"] == op)
            .unwrap()
    };
    let flows: Vec<&serde_json::Value> = events
        .iter()
        .filter(|event| (event["ph"] == "s" || event["ph"] == "f") && event["cat"] == "dependency")
        .collect();
    assert_eq!(flows.len(), 2 * replay.edges().len());
    assert!(!replay.edges().is_empty());
    for edge in replay.edges() {
        let (producer, consumer) = (slice_of(edge.from.0), slice_of(edge.to.0));
        let start = flows.iter().find(|flow| {
            flow["ph"] == "s"
                && flow["tid"] == producer["tid"]
                && flow["ts"] == producer["ts"]
                && flows.iter().any(|end| {
                    end["ph"] == "f"
                        && end["id"] == flow["id"]
                        && end["ts"] == consumer["ts"]
                        && end["tid"] == consumer["tid"]
                })
        });
        assert!(start.is_some(), "no flow pair for {edge:?}");
        assert_eq!(start.unwrap()["bp"], "e");
        assert!(
            interval(producer).1 <= interval(consumer).0,
            "{edge:?}: the consumer starts before its producer ends"
        );
    }
}

fn wait_for<T>(mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The critical path as the summary shows it, worked out from the whole replay's DAG.
fn shown_critical_path(replay: &Replay) -> (usize, Vec<String>, u64) {
    let path = replay.critical_path();
    let describe = |id: &dep_engine::OpId| replay.op(*id).unwrap().describe();
    let mut shown: Vec<String> = path.iter().map(describe).collect();
    if shown.len() > 8 {
        shown.drain(3..shown.len() - 3);
    }
    (path.len(), shown, replay.critical_path_ns())
}

/// Asserts that `summary` shows the critical path of `replay`'s whole DAG: its ops, its length
/// and its time.
fn assert_the_critical_path_of(replay: &Replay, summary: &Summary) {
    let (n_ops, shown, ns) = shown_critical_path(replay);
    assert_eq!(
        (summary.critical_path_ops, summary.critical_path_ns),
        (n_ops, ns)
    );
    let summary_shown: Vec<&str> = summary
        .critical_path
        .iter()
        .map(|(_, describe)| describe.as_str())
        .collect();
    assert_eq!(summary_shown, shown);
}

#[test]
fn the_folded_summary_has_the_critical_path_of_the_whole_dag() {
    // A chain through A (with reads of it between writes) and an independent chain through Z.
    let mut chain = String::from("A = 1\nZ = 1\n");
    for index in 0..30 {
        chain.push_str(&format!("B = A + 1\nA = B * 2\nZ = Z + {index}\n"));
    }
    let mut bench = Bench::new(Policy::Threaded, 2);
    bench.push_script(&chain, &|line| {
        Box::new(move || std::thread::sleep(Duration::from_micros(u64::from(line % 7) * 50)))
    });
    bench.engine.wait_all();
    let replays = [
        naive_replay(SEED_000),
        naive_replay(MUTATION),
        threaded_mutation_replay(),
        long_queue_replay(),
        naive_replay(&chain),
        bench.replay(),
    ];
    for replay in &replays {
        let summary = Summary::of(replay);
        assert_the_critical_path_of(replay, &summary);
        assert_eq!(summary.n_ops, replay.ops().len());
    }
    assert!(
        Summary::of(&replays[4]).critical_path_ops > 8,
        "a long path"
    );
}

#[test]
fn a_summary_of_part_of_a_run_counts_unfinished_ops_by_their_state() {
    let replay = threaded_mutation_replay();
    let whole = Summary::of(&replay);
    for n_events in 0..replay.events().len() {
        let part = Replay::new(
            replay.events()[..n_events].to_vec(),
            replay.worker_names().to_vec(),
        );
        let summary = Summary::of(&part);
        let n_counted: usize = summary.n_by_state.iter().map(|(_, n)| n).sum();
        assert_eq!(n_counted, part.ops().len(), "after {n_events} events");
        let (n_ops, shown, ns) = shown_critical_path(&part);
        assert_eq!(
            (summary.critical_path_ops, summary.critical_path_ns),
            (n_ops, ns),
            "after {n_events} events"
        );
        let summary_shown: Vec<String> = summary
            .critical_path
            .into_iter()
            .map(|(_, describe)| describe)
            .collect();
        assert_eq!(summary_shown, shown, "after {n_events} events");
    }
    assert_eq!(Summary::of(&replay), whole);
}

#[test]
fn the_json_and_the_protobuf_trace_hold_the_same_slices_and_flows() {
    for replay in [
        naive_replay(SEED_000),
        threaded_mutation_replay(),
        long_queue_replay(),
        gpu_chain_replay(),
    ] {
        let json = crate::perfetto::read_json(&trace::chrome_trace(&replay)).unwrap();
        let protobuf = crate::perfetto::read(&crate::perfetto::perfetto_trace(&replay)).unwrap();
        assert_eq!(json, protobuf);
        assert_eq!(
            json.slices
                .iter()
                .filter(|slice| slice.category == "op")
                .count(),
            replay
                .ops()
                .iter()
                .filter(|op| op.started_ns.is_some())
                .count()
        );
        // Every dependency is an arrow from its earlier op to its later one, in both.
        let mut arrows: Vec<(u64, u64)> = json
            .flows
            .iter()
            .filter(|(category, ..)| category == "dependency")
            .map(|(_, from, to)| (json.op_at(*from).unwrap(), json.op_at(*to).unwrap()))
            .collect();
        arrows.sort_unstable();
        let mut edges: Vec<(u64, u64)> = replay
            .edges()
            .iter()
            .map(|edge| (edge.from.0, edge.to.0))
            .collect();
        edges.sort_unstable();
        assert_eq!(arrows, edges);
    }
}

/// A `print A + 1` as a session pushes it on the threaded engine: the value into a temporary
/// (`_#1`, labelled by its expression), a wait for it (`wait _#1`) and its deletion
/// (`del _#1`). No view shows the bookkeeping: not the ops, the queues, the summary's count and
/// critical path, the timelines, the DAG or the trace's slices.
#[test]
fn no_view_shows_the_bookkeeping_of_temporaries() {
    let log = Arc::new(EventLog::new());
    let engine = Engine::new(EngineConfig {
        policy: Policy::Threaded,
        threads: 2,
        sink: Some(log.clone()),
        ..EngineConfig::default()
    });
    let a = engine.new_var("A");
    let temporary = engine.new_var("_#1");
    let b = engine.new_var("B");
    engine.push(OpSpec::new("A = 1", || Ok(())).writes(&[a.clone()]).line(1));
    engine.push(
        OpSpec::new("A + 1", || Ok(()))
            .reads(&[a.clone()])
            .writes(&[temporary.clone()])
            .line(2),
    );
    engine.wait_var(&temporary, 0).unwrap();
    engine.delete_var(temporary, 0, || ());
    engine.push(
        OpSpec::new("B = A * 2", || Ok(()))
            .reads(&[a])
            .writes(&[b])
            .line(3),
    );
    engine.wait_all();
    let replay = Replay::new(log.events(), engine.worker_names());
    assert!(
        log.events().iter().any(|event| matches!(
            &event.kind,
            dep_engine::EventKind::Pushed { label, .. } if &**label == "del _#1"
        )),
        "the engine pushed the bookkeeping"
    );
    let labels: Vec<&str> = replay.ops().iter().map(|op| &*op.label).collect();
    assert_eq!(labels, ["A = 1", "A + 1", "B = A * 2"]);
    let summary = Summary::of(&replay);
    assert_eq!(summary.n_ops, 3);
    assert!(summary
        .critical_path
        .iter()
        .all(|(_, describe)| !describe.contains("_#")));
    let frame = replay.final_frame();
    assert!(frame.vars.iter().all(|var| &*var.name != "_#1"));
    for shown in [
        text::ops(&frame, &STYLE),
        text::timeline(&replay, &STYLE, None, None),
        text::summary(&summary, &STYLE),
        svg::timeline(&replay, &svg::TimelineOptions::default()),
        dot::dag(&replay),
        html::player(&replay, "run", &crate::Prologue::default()),
    ] {
        assert!(
            !shown.contains("wait _#1") && !shown.contains("del _#1"),
            "{shown}"
        );
    }
    let slices = crate::perfetto::read_json(&trace::chrome_trace(&replay)).unwrap();
    assert_eq!(slices.slices.len(), 3, "{:?}", slices.slices);
}

/// Once a front-end names places, the ops table, the why sentences, the timeline's tooltips and
/// the DAG say `cell[2]:1` where they said `line 4`.
#[test]
fn named_places_replace_session_line_numbers_in_every_view() {
    let places = crate::Places::default();
    places.add(1, "cell[1]", 1);
    places.add(4, "cell[2]", 1);
    let mut replay = naive_replay(SEED_000);
    replay.name_places(&places);
    assert_eq!(replay.ops()[3].describe(), "A = C * 2 (cell[2]:1)");
    let frame = replay.frame_at(8);
    let table = text::ops(&frame, &STYLE);
    assert!(table.contains(" cell[1]:2 "), "{table}");
    let svg = svg::timeline(&replay, &svg::TimelineOptions::default());
    assert!(svg.contains("(cell[2]:2)"), "{svg}");
    assert!(dot::dag(&replay).contains("cell[2]:1 · done"));
    // A frame with a waiting op: its why sentence names places too.
    let mut replay = threaded_mutation_replay();
    replay.name_places(&places);
    let waiting = (0..replay.events().len())
        .map(|n| replay.frame_at(n))
        .find(|frame| frame.ops.iter().any(|op| !op.waits_on.is_empty()))
        .expect("an op waits at some step");
    let html = html::fragment(&waiting);
    assert!(html.contains("↳") && !html.contains("(line "), "{html}");
}

/// A write behind two running reads waits for both, and says so: live, and afterwards from the
/// event log.
#[test]
fn a_write_behind_two_running_reads_names_both() {
    let mut bench = Bench::new(Policy::Threaded, 2);
    let (release, gate) = mpsc::channel::<()>();
    let gate = Arc::new(std::sync::Mutex::new(gate));
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let script = "A = 1\nB = A + 1\nC = A * 3\nA = 5";
    bench.push_script(script, &|line| {
        let (gate, started) = (gate.clone(), started.clone());
        Box::new(move || {
            if line == 2 || line == 3 {
                started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = gate.lock().unwrap().recv();
            }
        })
    });
    let monitor = bench.engine.monitor();
    let frame = wait_for(|| {
        let frame = Frame::from_snapshot(&monitor.snapshot(), &monitor.worker_names());
        let running = frame
            .ops
            .iter()
            .filter(|op| op.state == OpState::Running)
            .count();
        (running == 2).then_some(frame)
    });
    let why = frame.why("A").unwrap();
    assert!(
        why.starts_with(
            "A will be written by A = 5 (line 4), which waits for A: read by B = A + 1 (line 2), running on cpu:"
        ) && why.contains(", and by C = A * 3 (line 3), running on cpu:"),
        "{why}"
    );
    release.send(()).unwrap();
    release.send(()).unwrap();
    bench.engine.wait_all();
    let replay = bench.replay();
    let var = bench.vars["A"].id();
    let why = replay.why_waited(var, true).unwrap();
    assert!(
        why.starts_with("A was last written by A = 5 (line 4), which waited ")
            && why.ends_with(" for A: read by B = A + 1 (line 2), and by C = A * 3 (line 3)"),
        "{why}"
    );
    // On the naive engine every op runs at its push: nothing waits.
    let naive = naive_replay(SEED_000);
    let d = naive.ops()[4].writes[0];
    assert_eq!(
        naive.why_waited(d, true).as_deref(),
        Some("D was last written by D = A + 3 (line 5), which did not wait")
    );
}

/// `A = 1` running on a threaded engine's one worker, `B = A` and `C = B` pushed behind it, then
/// cancelled before A ends (a Ctrl-C): two `Cancelled` events, then their cancelled ends.
pub(crate) fn cancelled_replay() -> Replay {
    let mut bench = Bench::new(Policy::Threaded, 1);
    let release = bench.push_held("A = 1", 1);
    bench.push_script("B = A\nC = B", &no_work);
    bench.engine.cancel_pending();
    release.send(()).unwrap();
    bench.engine.wait_all();
    bench.replay()
}

/// `:why` of a variable whose last write waited behind an op that was then cancelled says so:
/// "waited … for B: written by B = A" alone read as a wait for B's new value.
#[test]
fn why_says_when_what_a_write_waited_for_was_then_cancelled() {
    let mut bench = Bench::new(Policy::Threaded, 1);
    let release = bench.push_held("A = 1", 1);
    bench.push_script("B = A", &no_work);
    bench.engine.cancel_pending();
    // Pushed after the cancel: it runs, once B's cancelled write is out of its way.
    bench.push_script("C = B", &no_work);
    release.send(()).unwrap();
    bench.engine.wait_all();
    let why = bench
        .replay()
        .why_waited(bench.vars["C"].id(), true)
        .unwrap();
    assert!(
        why.starts_with("C was last written by C = B (line 1), which waited ")
            && why.ends_with(
                " for B: written by B = A (line 1) (B = A (line 1) was then cancelled: it ran \
                 nothing)"
            ),
        "{why}"
    );
}

/// A replay (of the log, and of its JSON trace read back) shows the ops a Ctrl-C stopped as
/// cancelled from the cancel on, waiting for nothing, and still cancelled when their turn comes
/// and makes them ready, until they finish; it used to show them waiting until their turn.
#[test]
fn a_replay_shows_cancelled_ops_cancelled_from_the_cancel_on() {
    let replay = cancelled_replay();
    let read_back = trace::read_trace(&trace::chrome_trace(&replay)).unwrap();
    assert_eq!(
        read_back.events(),
        replay.events(),
        "the JSON trace keeps the cancels"
    );
    for replay in [replay, read_back] {
        let events = replay.events();
        let cancels: Vec<usize> = (0..events.len())
            .filter(|&index| matches!(events[index].kind, EventKind::Cancelled { .. }))
            .collect();
        assert_eq!(cancels.len(), 2, "{events:?}");
        let states = |n_events: usize| -> Vec<(String, OpState, usize)> {
            replay
                .frame_at(n_events)
                .ops
                .iter()
                .map(|op| (op.label.to_string(), op.state, op.waits_on.len()))
                .collect()
        };
        // Before the cancels: B and C wait behind the running A.
        assert_eq!(
            states(cancels[0]),
            [
                ("A = 1".to_string(), OpState::Running, 0),
                ("B = A".to_string(), OpState::Waiting, 1),
                ("C = B".to_string(), OpState::Waiting, 1),
            ]
        );
        // From the cancels on, up to their ends: cancelled, waiting for nothing.
        let first_end = (0..events.len())
            .find(|&index| {
                matches!(
                    events[index].kind,
                    EventKind::Finished {
                        state: OpState::Cancelled,
                        ..
                    }
                )
            })
            .unwrap();
        for n_events in cancels[1] + 1..=first_end {
            let shown = states(n_events);
            assert_eq!(
                &shown[1..],
                [
                    ("B = A".to_string(), OpState::Cancelled, 0),
                    ("C = B".to_string(), OpState::Cancelled, 0),
                ],
                "after {n_events} events"
            );
        }
        assert!(replay
            .describe_event(cancels[0])
            .starts_with("cancelled B = A (line 1)"));
    }
}

#[test]
fn why_names_the_last_write_that_ran_not_a_cancelled_one() {
    let mut bench = Bench::new(Policy::Threaded, 2);
    let release = bench.push_held("C = 1\nB = C", 2);
    // Behind the running B = C: two writes of C, a write of D (a new variable), cancelled.
    bench.push_script("C = B\nC = B\nD = C", &no_work);
    bench.engine.cancel_pending();
    release.send(()).unwrap();
    bench.engine.wait_all();
    let replay = bench.replay();
    let why = replay.why_waited(bench.vars["C"].id(), true).unwrap();
    assert_eq!(
        why,
        "C was last written by C = 1 (line 1), which did not wait; 2 later writes were \
         cancelled before they started"
    );
    assert_eq!(
        replay.why_waited(bench.vars["D"].id(), false).as_deref(),
        Some("D was never written: 1 write was cancelled before it started")
    );
    // A variable that holds a value, written before the events the log keeps (a notebook's
    // earlier cell): not "never written".
    assert_eq!(
        replay.why_waited(bench.vars["D"].id(), true).as_deref(),
        Some("D was last written before the events kept here; 1 later write was cancelled before it started")
    );
    // The cancelled ops never started: no worker, no bar.
    let cancelled: Vec<_> = replay
        .ops()
        .iter()
        .filter(|op| op.state == OpState::Cancelled)
        .collect();
    assert_eq!(cancelled.len(), 3);
    assert!(cancelled
        .iter()
        .all(|op| op.started_ns.is_none() && op.worker.is_none()));
}

/// `b = ones(4)` (which writes `e` too), then `n` times `c = c + b` (which reads `e` too; each
/// running while the next starts, on two workers, for 1 to 7 ns), then `b = b * 2` (which writes
/// `e` too): `b` and `e` are read by every op and written only at the end. Times and ids are
/// made up, as a log read from a file may have them.
fn reads_of_a_var_written_at_the_end(n: u64) -> Vec<dep_engine::Event> {
    use dep_engine::{Device, Event, EventKind, OpId, VarId};
    let (b, c, e) = (VarId(1), VarId(2), VarId(3));
    let mut events = Vec::new();
    let mut now = 0;
    let mut at = |kind: EventKind| {
        now += 1;
        events.push(Event { time_ns: now, kind });
    };
    at(EventKind::VarCreated {
        var: b,
        name: Arc::from("b"),
    });
    at(EventKind::VarCreated {
        var: c,
        name: Arc::from("c"),
    });
    at(EventKind::VarCreated {
        var: e,
        name: Arc::from("e"),
    });
    let label: Arc<str> = Arc::from("c = c + b");
    let op = |id: u64, label: &Arc<str>, reads: Vec<VarId>, writes: Vec<VarId>| EventKind::Pushed {
        op: OpId(id),
        label: label.clone(),
        line: if id == 0 { 1 } else { 2 },
        reads,
        writes,
        device: Device::Cpu,
        priority: 0,
    };
    let finished = |id: u64| EventKind::Finished {
        op: OpId(id),
        state: OpState::Done,
        message: None,
    };
    let last = n + 1;
    at(op(0, &Arc::from("b = ones(4)"), vec![], vec![b, c, e]));
    at(EventKind::Started {
        op: OpId(0),
        worker: 0,
    });
    at(finished(0));
    for id in 1..=last {
        if id == last {
            at(op(id, &Arc::from("b = b * 2"), vec![b], vec![b, e]));
        } else {
            at(op(id, &label, vec![c, b, e], vec![c]));
        }
        at(EventKind::Ready { op: OpId(id) });
        at(EventKind::Started {
            op: OpId(id),
            worker: (id % 2) as u32,
        });
        for _ in 0..id % 7 {
            at(EventKind::Granted {
                op: OpId(id),
                var: c,
            });
        }
        // The op before ends once this one started: two run at a time.
        if id > 1 {
            at(finished(id - 1));
        }
    }
    at(finished(last));
    events
}

#[test]
fn the_fold_keeps_no_op_for_each_finished_read_of_a_var_not_yet_written() {
    use crate::fold::{DeviceSlice, Flow, NoTrace, OpSlice, RunFold, TraceLane, TraceOut};
    /// A flow's end: a worker and a time.
    type End = (u32, u64);
    /// Keeps each flow: its id, its ends.
    #[derive(Default)]
    struct Flows(Vec<(u64, End, End)>);
    impl TraceOut for Flows {
        fn event(&mut self, _: &dep_engine::Event) {}
        fn slice(&mut self, _: &OpSlice<'_>) {}
        fn flow(&mut self, flow: &Flow<'_>) {
            self.0.push((flow.id, flow.from, flow.to));
        }
        fn device_slice(&mut self, _: &DeviceSlice<'_>) {}
        fn end(&mut self, _: &[String], _: &[TraceLane]) {}
    }
    let n = 3_000;
    let events = reads_of_a_var_written_at_the_end(n);
    let replay = Replay::new(events.clone(), vec!["cpu:0".into(), "cpu:1".into()]);
    let (mut bare, mut traced) = (RunFold::new(), RunFold::new());
    let mut flows = Flows::default();
    let mut most_live = (0, 0);
    for event in &events {
        bare.push(event, &mut NoTrace);
        traced.push(event, &mut flows);
        most_live.0 = most_live.0.max(bare.n_live_ops());
        most_live.1 = most_live.1.max(traced.n_live_ops());
    }
    assert!(
        most_live.0 < 100 && most_live.1 < 100,
        "{most_live:?} ops held at once over {n} reads of b"
    );
    // Every flow of the whole replay's edges, with its ends, the last write's many among them.
    let start = |id| {
        let op = replay.op(id).unwrap();
        (op.worker.unwrap(), op.started_ns.unwrap())
    };
    let expected: Vec<_> = replay
        .edges()
        .iter()
        .enumerate()
        .map(|(index, edge)| (index as u64 + 1, start(edge.from), start(edge.to)))
        .collect();
    let mut got = flows.0;
    got.sort_unstable();
    assert_eq!(got.len(), expected.len());
    assert_eq!(got, expected);
    assert!(
        expected.len() as u64 > 2 * n,
        "each read ends in an edge to b's write"
    );
    // The summary: the whole DAG's critical path, with a trace or without.
    let summary = bare.finish(replay.worker_names(), &mut NoTrace);
    assert_eq!(
        summary,
        traced.finish(replay.worker_names(), &mut Flows::default())
    );
    assert_the_critical_path_of(&replay, &summary);
}

/// A critical path is a chain of dependencies, link by link, of ops that ran: after a failure,
/// the skipped ops end it, and after a cancel, the cancelled ones (led on through them, it read
/// `B → wait D` where no dependency joins them); the summary's fold finds the same.
#[test]
fn a_critical_path_is_a_chain_of_dependencies_of_ops_that_ran() {
    // `C = B / 0` fails, `D = C + A` is skipped, and `print D` waits for D behind them.
    let mut bench = Bench::new(Policy::Threaded, 1);
    bench.push_script("A = 1\nB = A + 1", &no_work);
    push_division_by_zero(&mut bench, 3);
    bench.push_script("D = C + A\nprint D", &no_work);
    bench.engine.wait_all();
    let failed = bench.replay();
    assert!(failed
        .ops()
        .iter()
        .any(|op| op.label.starts_with("wait D") && op.state == OpState::Done));
    for replay in [&failed, &cancelled_replay()] {
        let path = replay.critical_path();
        assert!(!path.is_empty());
        for pair in path.windows(2) {
            assert!(
                replay
                    .edges()
                    .iter()
                    .any(|edge| edge.from == pair[0] && edge.to == pair[1]),
                "no dependency from {} to {}",
                pair[0],
                pair[1]
            );
        }
        for id in &path {
            let op = replay.op(*id).unwrap();
            assert!(
                op.started_ns.is_some()
                    && !matches!(op.state, OpState::Skipped | OpState::Cancelled),
                "{} ran nothing",
                op.describe()
            );
        }
        assert_the_critical_path_of(replay, &Summary::of(replay));
    }
}

/// A cut replay's listing counts the ops it leaves out where they were pushed: the ten reads
/// that overtook the slow `B = A + 1` and ended before the cut show as one line between B and
/// `D = B + 1`, not among the ops before B.
#[test]
fn a_cut_listing_counts_the_ops_left_out_between_those_it_carries() {
    let replay = overtaken_replay();
    let events = replay.events();
    // The last events from B's end on: B's end, then D's grants, readiness, start and end.
    let b_end = events
        .iter()
        .rposition(|event| matches!(event.kind, dep_engine::EventKind::Finished { op, .. } if op == replay.ops()[1].id))
        .unwrap();
    let cut = crate::LastEvents::cut(events.iter().cloned(), events.len() - b_end);
    assert_eq!(cut.prologue.left_out_before, [1, 11]);
    let cut_replay = Replay::new(cut.events, replay.worker_names().to_vec());
    let mut stepper = crate::Stepper::after(&cut_replay, cut.prologue);
    stepper.go_to(cut_replay.events().len());
    let listing = text::step(&stepper, &STYLE);
    let ops: Vec<&str> = listing
        .lines()
        .skip_while(|line| !line.starts_with("op "))
        .skip(1)
        .map(|line| line.split("   ").next().unwrap().trim_end())
        .collect();
    assert_eq!(
        ops,
        [
            "  … 1 earlier op",
            "B = A + 1",
            "  … 10 ops done before the cut",
            "D = B + 1"
        ],
        "{listing}"
    );
}

/// On a screen too short for a long run's ops, a step shows the ops around the one its event
/// concerns, and how many are left out before and after.
#[test]
fn a_step_on_a_short_screen_shows_the_ops_around_its_event() {
    let script: String = std::iter::once("A = 1".to_string())
        .chain((1..=20).map(|index| format!("B{index} = A + 1")))
        .collect::<Vec<_>>()
        .join("\n");
    let replay = naive_replay(&script);
    let mut stepper = crate::Stepper::new(&replay);
    // The push of `B10 = A + 1`: ten ops before it, ten after.
    let pushed = replay.ops()[10].pushed_at;
    stepper.go_to(pushed + 1);
    check_text(
        text::step_on_screen(&stepper, &STYLE, 10),
        expect![[r#"
            step 71/146 at 70 µs: pushed B10 = A + 1 (line 11)
            queues  (● granted, ○ waiting)
              A   ○ R B10 = A + 1 (line 11)
              B10 ○ W B10 = A + 1 (line 11)
              idle: B1 B2 B3 B4 B5 B6 B7 B8 B9
            op                                                     line state     worker        start   duration
              … 9 earlier ops
            B9 = A + 1                                               10 done      main          67 µs       1 µs
            B10 = A + 1                                              11 waiting   -                 -          -
              ↳ B10 = A + 1 (line 11) waits for its grants: nothing is ahead of it in its queues
        "#]],
    );
    // At the end every op is done: the last ones show.
    stepper.go_to(replay.events().len());
    check_text(
        text::step_on_screen(&stepper, &STYLE, 10),
        expect![[r#"
            step 146/146 at 0.15 ms: done B20 = A + 1 (line 21)
            queues  (● granted, ○ waiting)
              idle: A B1 B2 B3 B4 B5 B6 B7 B8 B9 B10 B11 B12 B13 B14 B15 B16 B17 B18 B19 B20
            op                                                     line state     worker        start   duration
              … 17 earlier ops
            B17 = A + 1                                              18 done      main        0.12 ms       1 µs
            B18 = A + 1                                              19 done      main        0.13 ms       1 µs
            B19 = A + 1                                              20 done      main        0.14 ms       1 µs
            B20 = A + 1                                              21 done      main        0.14 ms       1 µs
        "#]],
    );
}

#[test]
fn slices_and_arrows_name_each_variable_by_its_own_name_or_by_its_id() {
    use crate::fold::{DeviceSlice, Flow, OpSlice, RunFold, TraceLane, TraceOut};
    use dep_engine::{Device, Event, EventKind, OpId, OpState, VarId};
    /// Keeps each slice's names (with whether its reads and writes share one `Arc` per
    /// variable) and each arrow's variable.
    #[derive(Default)]
    struct Names {
        slices: Vec<(Vec<String>, Vec<String>, bool)>,
        flows: Vec<String>,
    }
    impl TraceOut for Names {
        fn event(&mut self, _: &Event) {}
        fn slice(&mut self, slice: &OpSlice<'_>) {
            let text = |names: &[&Arc<str>]| names.iter().map(|name| name.to_string()).collect();
            let shared = slice.reads.iter().all(|read| {
                slice
                    .writes
                    .iter()
                    .all(|write| **read != **write || Arc::ptr_eq(read, write))
            });
            self.slices
                .push((text(slice.reads), text(slice.writes), shared));
        }
        fn flow(&mut self, flow: &Flow<'_>) {
            self.flows.push(flow.var.to_string());
        }
        fn device_slice(&mut self, _: &DeviceSlice<'_>) {}
        fn end(&mut self, _: &[String], _: &[TraceLane]) {}
    }
    let at = |time_ns, kind| Event { time_ns, kind };
    let pushed = |op, reads: Vec<VarId>, writes: Vec<VarId>| EventKind::Pushed {
        op: OpId(op),
        label: Arc::from("x = x + y"),
        line: 1,
        reads,
        writes,
        device: Device::Cpu,
        priority: 0,
    };
    let ran = |op, time_ns| {
        let op = OpId(op);
        [
            at(time_ns, EventKind::Started { op, worker: 0 }),
            at(
                time_ns + 1,
                EventKind::Finished {
                    op,
                    state: OpState::Done,
                    message: None,
                },
            ),
        ]
    };
    // `x` (variable 1) is named; variable 7 never is, as in a log read from a file that lost
    // its creation: its id, `v7`, names it.
    let (x, unnamed) = (VarId(1), VarId(7));
    let name = EventKind::VarCreated {
        var: x,
        name: Arc::from("x"),
    };
    let mut events = vec![
        at(0, name),
        at(1, pushed(1, vec![x, unnamed], vec![unnamed])),
    ];
    events.extend(ran(1, 2));
    events.push(at(4, pushed(2, vec![unnamed], vec![x])));
    events.extend(ran(2, 5));
    events.push(at(7, pushed(3, vec![x], vec![])));
    events.extend(ran(3, 8));
    let mut fold = RunFold::new();
    let mut names = Names::default();
    for event in &events {
        fold.push(event, &mut names);
    }
    let texts = |names: &[&str]| {
        names
            .iter()
            .map(|name| name.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names.slices,
        vec![
            (texts(&["x", "v7"]), texts(&["v7"]), true),
            (texts(&["v7"]), texts(&["x"]), true),
            (texts(&["x"]), texts(&[]), true),
        ]
    );
    // The second op reads the `v7` the first wrote, the third the `x` the second wrote.
    assert_eq!(names.flows, texts(&["v7", "x"]));
}

/// A fold fed whole ops ([`crate::fold::RunFold::push_logged`]) finds what it finds fed their
/// events one by one: the same summary, slices and arrows, internal ops and variables left out
/// the same way, failed and skipped ops included.
#[test]
fn a_fold_fed_whole_ops_finds_what_it_finds_fed_their_events() {
    use crate::fold::{DeviceSlice, Flow, OpSlice, RunFold, TraceLane, TraceOut};
    /// What a trace would get, written out.
    #[derive(Default)]
    struct Written(Vec<String>);
    impl TraceOut for Written {
        fn event(&mut self, _: &dep_engine::Event) {}
        fn slice(&mut self, slice: &OpSlice<'_>) {
            self.0.push(format!("{slice:?}"));
        }
        fn flow(&mut self, flow: &Flow<'_>) {
            self.0.push(format!("{flow:?}"));
        }
        fn device_slice(&mut self, _: &DeviceSlice<'_>) {}
        fn end(&mut self, _: &[String], _: &[TraceLane]) {}
        fn ran_at_once(&mut self, _: &dep_engine::RanAtOnce<'_>) {}
    }
    let bench = bench_with_a_temporary_and_a_failure();
    let workers = bench.engine.worker_names();

    let (mut by_events, mut by_events_out, mut next) = (RunFold::new(), Written::default(), 0);
    while next < bench.log.next_seq() {
        next = bench
            .log
            .read_since_without_grants(next, |event| by_events.push(event, &mut by_events_out));
    }
    let (mut whole, mut whole_out, mut n_whole, mut next) =
        (RunFold::new(), Written::default(), 0, 0);
    while next < bench.log.next_seq() {
        next = bench.log.read_ops_since(next, false, |logged| {
            n_whole += usize::from(matches!(logged, dep_engine::Logged::RanAtOnce(_)));
            whole.push_logged(logged, &mut whole_out);
        });
    }
    assert!(
        n_whole >= 8,
        "the naive engine runs each op at once: {n_whole}"
    );
    let summary = by_events.finish(&workers, &mut by_events_out);
    assert_eq!(whole.finish(&workers, &mut whole_out), summary);
    assert_eq!(whole_out.0, by_events_out.0);
    assert_eq!(summary.n_ops, 8, "{summary:?}");
    assert!(whole_out
        .0
        .iter()
        .any(|line| line.contains("division by zero")));
    // The temporary is in labels, never among a slice's variables or on an arrow.
    assert!(!whole_out.0.iter().any(|line| line.contains("\"_#1\"")));
}

/// A naive run whose ops all ran at once: a temporary (`_#1`) written, read, waited for and
/// deleted, an op that fails and the ops after it skipped.
fn bench_with_a_temporary_and_a_failure() -> Bench {
    let mut bench = Bench::new(Policy::Naive, 1);
    bench.push_script(
        "A = 1\n_#1 = A + 1\nB = _#1 + A\nprint _#1\ndel _#1",
        &no_work,
    );
    push_division_by_zero(&mut bench, 6);
    bench.push_script("A = 1\nD = C + A\nA = D * 2\nE = A + A", &no_work);
    bench.engine.wait_all();
    bench
}

/// Pushes `C = B / 0` at `line`, an op that reads B and fails, writing the new variable C.
fn push_division_by_zero(bench: &mut Bench, line: u32) {
    let (b, c) = (bench.vars["B"].clone(), bench.engine.new_var("C"));
    bench.engine.push(
        OpSpec::new("C = B / 0", || Err("division by zero".to_string()))
            .reads(&[b])
            .writes(std::slice::from_ref(&c))
            .line(line),
    );
    bench.vars.insert("C".to_string(), c);
}

/// A JSON trace written from ops taken whole (each op run at once one `"o"` element), by the
/// fold's trace or by a writer reading the log itself, is the trace written event by event,
/// byte for byte, and reads back as the log's events.
#[test]
fn a_json_trace_of_ops_taken_whole_reads_back_as_every_event() {
    use crate::fold::RunFold;
    use crate::trace::{DepEventsWriter, JsonTrace};
    use std::io::Cursor;
    let bench = bench_with_a_temporary_and_a_failure();
    let workers = bench.engine.worker_names();
    let total = bench.log.next_seq();
    let one_by_one = trace::chrome_trace(&Replay::new(bench.log.events(), workers.clone()));

    // The fold's trace writes the events.
    let (mut fold, mut next) = (RunFold::new(), 0);
    let mut fed = JsonTrace::new(Vec::new(), Cursor::new(Vec::new()));
    while next < total {
        next = bench.log.read_ops_since(next, true, |logged| {
            fold.push_logged(logged, &mut fed);
        });
    }
    fold.finish(&workers, &mut fed);
    let fed = String::from_utf8(fed.finish().unwrap()).unwrap();

    // A writer of its own reads the log beside the fold, which reads no grants.
    let (mut fold, mut next) = (RunFold::new(), 0);
    let mut apart = JsonTrace::without_events(Vec::new());
    while next < total {
        next = bench.log.read_ops_since(next, false, |logged| {
            fold.push_logged(logged, &mut apart);
        });
    }
    fold.finish(&workers, &mut apart);
    let mut writer = DepEventsWriter::reading_the_log(Cursor::new(Vec::new()));
    let (mut room, mut next) = (dep_engine::ReadRoom::default(), 0);
    while next < total {
        next = bench
            .log
            .read_ops_since_in(&mut room, next, |logged| match logged {
                dep_engine::Logged::Event(event) => writer.event(event),
                dep_engine::Logged::RanAtOnce(ran) => writer.ran_at_once(&ran),
            });
    }
    let apart = apart.finish_with(writer.finish()).unwrap();
    let apart = String::from_utf8(apart).unwrap();

    // Written event by event, an op run at once is one element too: the three are the same.
    assert!(one_by_one.contains("\"o\""), "{one_by_one}");
    assert_eq!(fed, one_by_one);
    assert_eq!(apart, one_by_one);
    let expected = Replay::new(bench.log.events(), workers);
    let read = trace::read_trace(&one_by_one).unwrap();
    assert_eq!(read.events(), expected.events());
    assert_eq!(read.ops(), expected.ops());
}

/// A malformed op run at once (`"o"`) is refused with the element and the field named.
#[test]
fn a_bad_op_run_at_once_in_a_trace_says_which_field() {
    let document = |element: &str| {
        format!(
            r#"{{"traceEvents": [], "depEvents": {{"version": 3, "workers": ["main"],
            "events": ["x = 1", "cpu", "done", {element}]}}}}"#
        )
    };
    let read =
        |element: &str| trace::read_trace(&document(element)).map(|replay| replay.ops().len());
    assert_eq!(read(r#"[5, "o", 1, 0, 1, [], [], 1, 0, 9, 2]"#).unwrap(), 1);
    for (element, expected) in [
        (
            r#"[5, "o", 1, 0, 1, [], [], 1, 0, "soon", 2]"#,
            "event 0: field 9 is not a whole number",
        ),
        (
            r#"[5, "o", 1, 0, 1, [], [], 1, 0, 9, 7]"#,
            "event 0: field 10 names string 7, not declared",
        ),
        (
            r#"[5, "o", 1, 0, 1, [], [], 1, 0, 9]"#,
            "event 0: an op run at once has too few fields",
        ),
    ] {
        let error = read(element).unwrap_err().to_string();
        assert!(error.contains(expected), "{error}");
    }
}

/// A trace that merges several ranks' runs says how many (`depEvents.ranks`): each op's place
/// names its rank and line, op n being rank n % ranks's; a count that is not one is refused.
#[test]
fn a_trace_of_several_ranks_names_each_ops_rank() {
    let document = |ranks: &str| {
        format!(
            r#"{{"traceEvents": [], "depEvents": {{"version": 3, "workers": ["r0 main", "r1 main"],
            "ranks": {ranks}, "events": ["x = 1", "cpu", "done",
            [5, "o", 0, 0, 4, [], [], 1, 0, 9, 2], [6, "o", 1, 0, 4, [], [], 1, 0, 9, 2]]}}}}"#
        )
    };
    let replay = trace::read_trace(&document("2")).unwrap();
    let places: Vec<Option<&str>> = replay.ops().iter().map(|op| op.place.as_deref()).collect();
    assert_eq!(places, [Some("r0:4"), Some("r1:4")]);
    assert_eq!(replay.ops()[1].describe(), "x = 1 (r1:4)");
    let one = trace::read_trace(&document("1")).unwrap();
    assert!(one.ops().iter().all(|op| op.place.is_none()));
    for bad in ["0", "\"two\""] {
        let error = trace::read_trace(&document(bad)).unwrap_err().to_string();
        assert!(
            error.contains("`depEvents.ranks` is not a count of ranks"),
            "{error}"
        );
    }
}
