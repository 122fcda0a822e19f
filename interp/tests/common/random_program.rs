//! The random-program generator of the property tests, with a placement option, and the runner
//! that collects what a program saves.
//!
//! A program is generated as a list of statements, each tagged with where it may run; the
//! placement then writes it out: all on the CPU (the text the property test has always used),
//! every statement that may run on a GPU inside `with gpu0 { ... }`, or random runs of them.
//! Placement draws from its own generator, so the statements of a seed never depend on it.

use std::path::Path;

use dep_engine::Policy;
use dep_interp::{Session, SessionConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const NAMES: &[&str] = &["a", "b", "c", "d", "e", "f1", "g", "h"];

/// Where a generated program's statements run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Every statement on the CPU.
    Cpu,
    /// Every statement inside `with gpu0 { ... }`, except random draws.
    Gpu0,
    /// Random runs of consecutive statements inside `with gpu0 { ... }`, the others on the CPU
    /// (drawn from this seed), so values cross between the devices both ways; random draws stay
    /// on the CPU.
    Mixed(u64),
}

impl Placement {
    /// The placement's name in test messages.
    pub fn name(self) -> String {
        match self {
            Placement::Cpu => "cpu".to_string(),
            Placement::Gpu0 => "gpu0".to_string(),
            Placement::Mixed(seed) => format!("mixed({seed})"),
        }
    }
}

/// One generated top-level statement, and whether it may be placed on a GPU.
struct Statement {
    text: String,
    /// `rand` and `randn` draw from the CPU's generator (ChaCha); on a GPU they draw from
    /// another one (Philox), with other numbers, and leave the CPU's generator where it was.
    /// The GPU placements keep these statements on the CPU, so every placement of a seed
    /// computes the same values.
    draws_random: bool,
}

impl Statement {
    fn new(text: String) -> Statement {
        Statement {
            text,
            draws_random: false,
        }
    }

    fn random(text: String) -> Statement {
        Statement {
            text,
            draws_random: true,
        }
    }
}

/// Builds a random program whose tensors are all 3x3, saving every live name into `{DIR}`,
/// with its statements placed by `placement`. The statements of a seed are the same on every
/// placement; `Placement::Cpu` gives the text the property test has always used.
pub fn random_program(seed: u64, placement: Placement) -> String {
    place(&random_statements(seed), placement)
}

/// The statements of program `seed` (with the rng draws the property test has always made).
fn random_statements(seed: u64) -> Vec<Statement> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut lines = vec![
        // `seed` sets the CPU's and the GPU's generators wherever it runs.
        Statement::new(format!("seed {}", rng.gen_range(0..1000))),
        Statement::new("def mix(p, q) {\n  t = p @ q\n  return t * 0.5 + p\n}".to_string()),
    ];
    let mut live: Vec<&str> = Vec::new();
    for name in &NAMES[..3] {
        lines.push(Statement::random(format!("{name} = randn(3, 3)")));
        live.push(name);
    }
    let n_statements = rng.gen_range(20..200);
    for _ in 0..n_statements {
        let pick = |rng: &mut StdRng, live: &[&'static str]| live[rng.gen_range(0..live.len())];
        let x = if rng.gen_bool(0.3) {
            NAMES[rng.gen_range(0..NAMES.len())]
        } else {
            pick(&mut rng, &live)
        };
        let y = pick(&mut rng, &live);
        let z = pick(&mut rng, &live);
        let defined = live.contains(&x);
        let line = match rng.gen_range(0..14) {
            0 => Statement::new(format!("{x} = {y} + {z}")),
            1 => Statement::new(format!("{x} = {y} * {z} - 0.5")),
            2 => Statement::new(format!("{x} = relu({y}) @ {z}")),
            3 => Statement::new(format!("{x} = tanh({y}) / (abs({z}) + 1)")),
            4 => Statement::new(format!("{x} = sum({y}, 0) + {z}")),
            5 => Statement::new(format!("{x} = softmax({y}, 1) + transpose({z})")),
            6 if defined => Statement::new(format!("{x} += {y}")),
            7 if defined => Statement::new(format!("{x} *= 0.9")),
            8 => Statement::random(format!("{x} = rand(3, 3)")),
            9 => Statement::random(format!("{x} = randn(3, 3) * {y}")),
            10 if live.len() > 3 && defined => {
                live.retain(|name| *name != x);
                lines.push(Statement::new(format!("del {x}")));
                continue;
            }
            11 if defined => Statement::new(format!(
                "for i in 0..{} {{\n  {x} = {x} + i * {y}\n  {z}2 = {x} * 0.1\n}}",
                rng.gen_range(1..4)
            )),
            12 => Statement::new(format!("{x} = mix({y}, {z})")),
            13 if y != z => {
                if !live.contains(&z) {
                    live.push(z);
                }
                Statement::new(format!("{x}, {z} = split(concat({y}, {z}, 0), 2, 0)"))
            }
            _ => Statement::new(format!("{x} = {y} - {z}")),
        };
        if !live.contains(&x) {
            live.push(x);
        }
        lines.push(line);
    }
    for name in &live {
        lines.push(Statement::new(format!(
            "save({name}, \"{{DIR}}/{name}.npy\")"
        )));
    }
    lines
}

/// Writes `statements` out, wrapping runs of them in `with gpu0 { ... }` as `placement` says.
fn place(statements: &[Statement], placement: Placement) -> String {
    let mut placer = match placement {
        Placement::Mixed(seed) => Some(StdRng::seed_from_u64(seed)),
        Placement::Cpu | Placement::Gpu0 => None,
    };
    let mut on_gpu = false;
    let mut text = String::new();
    for statement in statements {
        let wanted = !statement.draws_random
            && match (placement, &mut placer) {
                (Placement::Cpu, _) => false,
                (Placement::Gpu0, _) => true,
                // Runs of about three statements on each side.
                (Placement::Mixed(_), Some(placer)) => on_gpu != placer.gen_bool(1.0 / 3.0),
                (Placement::Mixed(_), None) => unreachable!("a mixed placement has a placer"),
            };
        if wanted && !on_gpu {
            text.push_str("with gpu0 {\n");
        } else if !wanted && on_gpu {
            text.push_str("}\n");
        }
        on_gpu = wanted;
        text.push_str(&statement.text);
        text.push('\n');
    }
    if on_gpu {
        text.push_str("}\n");
    }
    text
}

/// Runs `program` with saves into `dir`; returns the saved files' bytes by name.
pub fn run(program: &str, dir: &Path, policy: Policy, threads: usize) -> Vec<(String, Vec<u8>)> {
    let source = program.replace("{DIR}", &dir.display().to_string());
    let mut session = Session::new(SessionConfig {
        policy,
        threads,
        ..SessionConfig::default()
    });
    let mut out = Vec::new();
    session
        .run_source("random.dep", &source, &mut out)
        .unwrap_or_else(|error| panic!("{error}\n{source}"));
    session
        .finish()
        .unwrap_or_else(|error| panic!("{error}\n{source}"));
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            (
                entry.file_name().to_string_lossy().into_owned(),
                std::fs::read(entry.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}
