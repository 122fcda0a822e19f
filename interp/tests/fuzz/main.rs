//! The fuzzer of the whole pipeline (decode, parse, run): generated programs, and byte-level
//! mutations of them, never make dep panic, hang, or report an error without a place.
//!
//! Programs come from a proptest strategy (`generate.rs`): well-formed dep built from the
//! language's constructs (assignments, in-place updates, arithmetic and builtins on tiny
//! shapes, loops, functions, graphs and bulks, `del`, `print`, `with` blocks, slots, save and
//! load), with deliberate mistakes now and then; a quarter of the cases then get a few random
//! byte mutations (NUL, invalid UTF-8, brackets, newlines, byte order marks). Each runs on the
//! naive engine with a statement budget and a time limit (`check.rs`).
//!
//! This is not coverage-guided: `cargo fuzz` (libFuzzer) needs a nightly compiler, which the
//! project does not use; proptest on stable draws programs at random and shrinks a failure to
//! a small program.
//!
//! - `DEP_FUZZ_CASES=N` runs N generated programs (default 6000, about half a minute in the
//!   test profile); `DEP_FUZZ_SEED=S` draws another set than CI's fixed one (`random` for a
//!   new one each run).
//! - A failing program is written to `target/tmp/fuzz-failures/` and printed. Once fixed, it
//!   goes into `tests/fuzz/corpus/` (a `.dep` file, `{DIR}` standing for a scratch directory,
//!   a `# %%` line between cells run one after the other in one session), which
//!   [`every_corpus_input_runs_cleanly`] runs on every test run.
//! - `explore_and_list_every_distinct_problem` (ignored; run it with `--ignored`) goes on past
//!   the first failure and lists every distinct problem found.

mod check;
mod generate;

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

/// The number of generated programs in one run.
fn cases() -> u32 {
    std::env::var("DEP_FUZZ_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(6000)
}

/// The seed of the run: fixed in CI so that a run is reproducible.
fn seed() -> RngSeed {
    match std::env::var("DEP_FUZZ_SEED").ok().as_deref() {
        Some("random") => RngSeed::Random,
        Some(seed) => RngSeed::Fixed(seed.parse().unwrap_or(0)),
        None => RngSeed::Fixed(0x5eed_0de9),
    }
}

fn config() -> Config {
    Config {
        cases: cases(),
        // About one mutated program in ten is passed over (a number made too large to run in
        // the budget): proptest's default of 1,024 passed-over cases would end a long run
        // (`DEP_FUZZ_CASES=100000`) after some 10,000 programs.
        max_global_rejects: cases(),
        rng_seed: seed(),
        failure_persistence: None,
        max_shrink_time: 120_000,
        ..Config::default()
    }
}

/// One fuzz case: the tape the program is built from, byte mutations applied after, in how
/// many cells an unmutated program runs, and how it runs.
#[derive(Clone, Debug)]
struct Case {
    tape: Vec<u32>,
    mutations: Vec<(u32, u8, u8)>,
    cells: u8,
    settings: check::Settings,
}

/// Bytes that mutations insert or write: brackets, separators, quotes, NUL, a byte order mark,
/// bytes that are never UTF-8.
const INTERESTING: &[&[u8]] = &[
    b"(",
    b")",
    b"[",
    b"]",
    b"{",
    b"}",
    b"\n",
    b";",
    b",",
    b"=",
    b"+",
    b"#",
    b"\"",
    b"..",
    b":",
    b"\0",
    b"\xEF\xBB\xBF",
    b"\xFF",
    b"\xC3",
    b"-",
    b"**",
    b"del ",
    b"return ",
];

impl Case {
    /// The inputs of the case: the mutated program, or the program cut into 1 to 3 cells.
    fn inputs(&self) -> Vec<Vec<u8>> {
        if !self.mutations.is_empty() || self.cells.is_multiple_of(3) {
            return vec![self.bytes()];
        }
        let statements = generate::statements(&self.tape);
        let per_cell = statements
            .len()
            .div_ceil(usize::from(self.cells % 3) + 1)
            .max(1);
        statements
            .chunks(per_cell)
            .map(|cell| format!("{}\n", cell.join("\n")).into_bytes())
            .collect()
    }

    /// The program's bytes: generated, then mutated.
    fn bytes(&self) -> Vec<u8> {
        let mut bytes = generate::program(&self.tape).into_bytes();
        for &(position, kind, byte) in &self.mutations {
            let at = position as usize % (bytes.len() + 1);
            match kind % 7 {
                0 if at < bytes.len() => bytes[at] = byte,
                1 => bytes.insert(at, byte),
                2 if at < bytes.len() => {
                    bytes.remove(at);
                }
                3 => {
                    let insert = INTERESTING[byte as usize % INTERESTING.len()];
                    bytes.splice(at..at, insert.iter().copied());
                }
                // Whole lines moved about: mostly well-formed programs that use names before
                // they are defined, after `del`, or run graphs before they are recorded.
                line_kind => {
                    let mut lines: Vec<Vec<u8>> =
                        bytes.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
                    let from = at % lines.len();
                    let to = usize::from(byte) % lines.len();
                    match line_kind {
                        4 => {
                            let copy = lines[from].clone();
                            lines.insert(to, copy);
                        }
                        5 => {
                            lines.remove(from);
                        }
                        _ => lines.swap(from, to),
                    }
                    bytes = lines.join(&b'\n');
                }
            }
        }
        bytes
    }
}

fn case() -> impl Strategy<Value = Case> {
    let mutations = prop_oneof![
        3 => Just(Vec::new()),
        1 => prop::collection::vec((any::<u32>(), any::<u8>(), any::<u8>()), 1..4),
    ];
    // Mostly the naive engine, the serial reference; now and then a threaded or simulated one,
    // an event log, or a budget small enough to interrupt the program mid-way.
    let policy = prop_oneof![
        12 => Just(dep_engine::Policy::Naive),
        1 => Just(dep_engine::Policy::Threaded),
        1 => Just(dep_engine::Policy::Sim),
        1 => Just(dep_engine::Policy::PerDevice),
    ];
    let budget = prop_oneof![4 => Just(check::STATEMENT_BUDGET), 1 => 0..40usize];
    let settings =
        (policy, any::<bool>(), budget).prop_map(|(policy, observe, budget)| check::Settings {
            policy,
            observe,
            budget,
        });
    (
        prop::collection::vec(any::<u32>(), 0..400),
        mutations,
        any::<u8>(),
        settings,
    )
        .prop_map(|(tape, mutations, cells, settings)| Case {
            tape,
            mutations,
            cells,
            settings,
        })
}

/// Whether a mutation made a number so large that the program's cost is no longer bounded by
/// the statement budget (a loop of 0..999 over `work(2)`, a tensor of 999 x 999 x 999).
fn has_a_large_number(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    dep_grammar::tokens(&text).iter().any(|token| {
        token.kind == dep_grammar::TokenKind::Number
            && token
                .span
                .text(&text)
                .parse::<f64>()
                .map_or(true, |n| n > 64.0)
            && !matches!(token.span.text(&text), "1e30" | "1e-3")
    })
}

/// The line that separates the cells of a corpus file (each cell runs as one input of the
/// same session, like a notebook's cells).
const CELL_SEPARATOR: &[u8] = b"# %%\n";

/// The cells of a corpus file.
fn cells_of(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut cells = vec![Vec::new()];
    for line in bytes.split_inclusive(|byte| *byte == b'\n') {
        if line == CELL_SEPARATOR {
            cells.push(Vec::new());
        } else if let Some(cell) = cells.last_mut() {
            cell.extend_from_slice(line);
        }
    }
    cells
}

/// Where a failing input is written, for a developer to look at and add to the corpus.
fn save_failure(bytes: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let name = format!("{:016x}.dep", fnv1a(bytes));
    let path = dir.join(name);
    let _ = std::fs::write(&path, bytes);
    path
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn generated_programs_never_panic_hang_or_lose_their_place(case in case()) {
        let inputs = case.inputs();
        let bytes = inputs.join(CELL_SEPARATOR);
        prop_assume!(case.mutations.is_empty() || !has_a_large_number(&bytes));
        let dir = tempfile::tempdir().unwrap();
        if let Err(problem) = check::check_cells(&inputs, dir.path(), case.settings) {
            let saved = save_failure(&bytes);
            return Err(TestCaseError::fail(format!(
                "{problem}\n--- {:?}, program (saved as {}):\n{}",
                case.settings,
                saved.display(),
                String::from_utf8_lossy(&bytes)
            )));
        }
    }
}

/// The corpus: inputs that once went wrong, and hostile ones worth running every time.
fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/corpus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "dep"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_input_runs_cleanly() {
    let files = corpus();
    assert!(files.len() >= 10, "the corpus is missing: {files:?}");
    let mut failures = Vec::new();
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let settings = check::Settings::default();
        if let Err(problem) = check::check_cells(&cells_of(&bytes), dir.path(), settings) {
            failures.push(format!("{}: {problem}", file.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_generator_writes_programs_that_parse_and_mostly_run() {
    // Without mutations, programs parse (unless a deliberately broken statement is in them),
    // and most run to the end without an error: the fuzzer reaches deep into the interpreter.
    let mut parsed = 0;
    let mut clean = 0;
    let total = 200;
    for seed in 0..total {
        let tape: Vec<u32> = (0..400u32)
            .map(|index| {
                (index ^ seed)
                    .wrapping_mul(2_654_435_761)
                    .rotate_left(seed % 31)
            })
            .collect();
        let text = generate::program(&tape);
        if dep_grammar::parse(&text).is_ok() {
            parsed += 1;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().display().to_string();
        let text = text.replace("{DIR}", &path);
        let mut session = dep_interp::Session::new(dep_interp::SessionConfig {
            policy: dep_engine::Policy::Naive,
            threads: 1,
            observe: false,
            show_expression_values: false,
            ..dep_interp::SessionConfig::default()
        });
        let ran = session.run_source(check::PATH, &text, &mut Vec::new());
        let _ = session.finish();
        if ran.is_ok() {
            clean += 1;
        }
    }
    assert!(parsed * 10 >= total * 8, "{parsed} of {total} parse");
    assert!(
        clean * 2 >= total,
        "{clean} of {total} run without an error"
    );
}

/// A longer search that does not stop at the first failure: draws `DEP_FUZZ_CASES` programs
/// (default 6000), and lists every distinct problem found, each with the first program that
/// showed it (also written to `target/tmp/fuzz-failures/`). Run it with
/// `DEP_FUZZ_CASES=20000 DEP_FUZZ_SEED=random cargo test -p dep-interp --test fuzz -- --ignored`.
#[test]
#[ignore = "a long search: run it by hand"]
fn explore_and_list_every_distinct_problem() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::new(config());
    let mut problems: std::collections::BTreeMap<String, (usize, PathBuf)> = Default::default();
    for _ in 0..cases() {
        let case = case().new_tree(&mut runner).unwrap().current();
        let inputs = case.inputs();
        let bytes = inputs.join(CELL_SEPARATOR);
        if !case.mutations.is_empty() && has_a_large_number(&bytes) {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        if let Err(problem) = check::check_cells(&inputs, dir.path(), case.settings) {
            let kind: String = format!("{:?}: {problem}", case.settings.policy)
                .lines()
                .take(2)
                .collect::<Vec<_>>()
                .join(" ")
                .split('`')
                .enumerate()
                .map(|(index, part)| if index % 2 == 1 { "_" } else { part })
                .collect();
            let entry = problems.entry(kind).or_insert_with(|| {
                eprintln!("{:?}", case.settings);
                (0, save_failure(&bytes))
            });
            entry.0 += 1;
        }
    }
    for (kind, (count, path)) in &problems {
        eprintln!("{count:5} x {kind}\n        e.g. {}", path.display());
    }
    assert!(problems.is_empty(), "{} distinct problems", problems.len());
}
