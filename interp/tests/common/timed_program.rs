//! Random programs of `work(ms, ...)` ops and waits, and the timeline a run of one shows: when
//! each wait returned and when each op ended, on the engine's clock (real time on the threaded
//! engine, virtual time on the simulated one), to check that the simulator waits as the engine.

use std::collections::HashMap;

use dep_engine::{EventKind, Policy};
use dep_interp::{Session, SessionConfig};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Op times: multiples of the smallest, so that two events of a simulated run are at the same
/// time or at least `MS_STEP` apart.
pub const MS_STEP: f64 = 200.0;

/// At most this many `work` ops, no more than the engine's threads: an op never waits for a
/// worker, so the order of events is what the dependencies force, on both engines.
const MAX_WORK: usize = 7;

/// Threads of both engines.
pub const THREADS: usize = 8;

/// Program `seed`: one statement per line (the first ones make the values), `work` ops that
/// read one or two variables and write or update one, `print X` and `wait`.
pub fn timed_program(seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let names = ["A", "B", "C", "D", "E"];
    let mut lines: Vec<String> = names
        .iter()
        .map(|name| format!("{name} = ones(2)"))
        .collect();
    let mut n_work = 0;
    // The variable the latest op only reads: a wait for it returns before that op ends.
    let mut read_only = names[0];
    while n_work < MAX_WORK {
        let pick = |rng: &mut StdRng| *names.choose(rng).unwrap();
        let (x, y, z) = (pick(&mut rng), pick(&mut rng), pick(&mut rng));
        let ms = MS_STEP * f64::from(rng.gen_range(1..4u8));
        lines.push(match rng.gen_range(0..10) {
            0..=2 => format!("{x} = work({ms}, {y})"),
            3 | 4 => format!("{x} = work({ms}, {y} + {z})"),
            5 => format!("{x} += work({ms}, {y})"),
            6..=8 => {
                let waited = if rng.gen_bool(0.5) { read_only } else { x };
                lines.push(format!("print {waited}"));
                continue;
            }
            _ => {
                lines.push("wait".to_string());
                continue;
            }
        });
        if y != x {
            read_only = y;
        }
        n_work += 1;
    }
    lines.push(format!("print {}", names.choose(&mut rng).unwrap()));
    lines
}

/// When things happened in one run, in milliseconds on the engine's clock.
#[derive(Debug)]
pub struct Timeline {
    /// When each `print` and `wait` returned, in program order.
    pub waits: Vec<f64>,
    /// When the op of each `work` line (1-based) ended.
    pub ends: HashMap<u32, f64>,
}

/// Runs `program` observed on `policy`, one line per input; returns its timeline.
pub fn timeline(program: &[String], policy: Policy) -> Timeline {
    let mut session = Session::new(SessionConfig {
        policy,
        threads: THREADS,
        observe: true,
        ..SessionConfig::default()
    });
    let mut waits = Vec::new();
    let mut out = Vec::new();
    for (index, line) in program.iter().enumerate() {
        session
            .run_source_from_line("waits.dep", index as u32 + 1, line, &mut out)
            .unwrap_or_else(|error| panic!("{error}"));
        if line.starts_with("print") || line == "wait" {
            waits.push(session.monitor().now_ns() as f64 / 1e6);
        }
    }
    session.finish().unwrap();
    let mut lines = HashMap::new();
    let mut ends = HashMap::new();
    for event in session.event_log().unwrap().events() {
        match event.kind {
            EventKind::Pushed {
                op, label, line, ..
            } if label.contains("work(") => {
                lines.insert(op, line);
            }
            EventKind::Finished { op, .. } => {
                if let Some(line) = lines.get(&op) {
                    ends.insert(*line, event.time_ns as f64 / 1e6);
                }
            }
            _ => {}
        }
    }
    Timeline { waits, ends }
}
