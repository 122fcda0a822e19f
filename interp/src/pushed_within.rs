//! The calls and loop iterations each op was pushed within, so that an op failing on the engine
//! says where it was pushed, as an error at push time does (`in `f`, called at script.dep:6:5`,
//! `in the loop at script.dep:4:1, at i = 3`), observed or not.
//!
//! Ops are numbered in push order, so the tables hold only the points where something changed:
//! from op N on, ops were pushed within this frame (a call, a loop; none at the top level),
//! and from op M on at this iteration of the innermost loop. A call adds two frame changes; a
//! frame is one record, shared by every call made from the same place at the same iteration of
//! the loops around it. Iterations are kept as runs of regular steps: a loop whose iterations
//! each push as many ops is one run however long it is. Each table keeps its last
//! [`MAX_CHANGES`] entries (far more than the ops the backlog lets run unfinished); before it
//! forgets older ones it notes where the failed ops among them, not reported yet, were pushed,
//! so a failure early in a long run still names its place when the run's end reports it.
//!
//! A `run` of a graph is a frame too, at the `run` statement. The graph's ops were recorded
//! within calls (and iterations of loops in its block) that its replays do not make again: each
//! recorded op keeps those frames ([`Within`]), and the `run` frame holds them by the replay's
//! engine ops ([`ReplayWithin`]), so a replayed op that fails names them inside the `run`, as
//! the same call outside a graph would.

use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;
use std::sync::Arc;

use dep_engine as engine;

use crate::sources::SourceChunk;

/// The most frame changes kept (1 MiB), and the most runs of iterations (1.25 MiB).
pub(crate) const MAX_CHANGES: usize = 1 << 15;

/// The values of a loop's counters at one iteration (a range loop has one, `clock_cycles` two).
pub(crate) type Row = [i64; 2];

/// What a frame is.
#[derive(Debug)]
enum Kind {
    /// A call of the user's function of this name.
    Call(Arc<str>),
    /// A `for` loop with these counters.
    Loop(Arc<[Arc<str>]>),
    /// A `run` of the graph of this name, with the frames its engine ops were recorded within.
    Run(Arc<str>, Option<ReplayWithin>),
}

/// The frames, inside its graph's block, that a recorded op was recorded within (calls, loop
/// iterations), innermost first; none for an op of the block itself.
#[derive(Clone, Debug, Default)]
pub(crate) struct Within(Option<Arc<[FrameAt]>>);

/// A frame, and its iteration when a loop.
type FrameAt = (Arc<Frame>, Row);

impl Within {
    /// Whether the op was recorded in the block itself, within no call or loop.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

/// By engine op of a replay, in push order: the session-wide line and the [`Within`] of each
/// recorded op it runs, in order (several in a bulk).
pub(crate) type ReplayWithin = Arc<[Box<[(u32, Within)]>]>;

/// A call of a user's function or a `for` loop, and the frame it was entered within.
#[derive(Debug)]
pub(crate) struct Frame {
    kind: Kind,
    /// The session source chunk of the call or the `for`, and its byte offset in it.
    source_index: usize,
    offset: usize,
    /// The session-wide lines the function's body or the loop's spans: an op of this frame on
    /// another line was not pushed within it (a failure the engine adopted from another
    /// engine, whose numbering started afresh).
    body_lines: (u32, u32),
    /// The frame this one was entered within, if any, and its iteration then (when a loop).
    outer: Option<(Arc<Frame>, Row)>,
}

impl Frame {
    /// Whether a frame of `kind` at `site`, within `outer`, is entered where this one was.
    fn is_entered_as(
        &self,
        kind: &Kind,
        site: (usize, usize),
        outer: &Option<(Arc<Frame>, Row)>,
    ) -> bool {
        let same_kind = match (&self.kind, kind) {
            (Kind::Call(mine), Kind::Call(theirs)) => mine == theirs,
            (Kind::Loop(mine), Kind::Loop(theirs)) => mine == theirs,
            (Kind::Run(mine, my_ops), Kind::Run(theirs, their_ops)) => {
                mine == theirs
                    && match (my_ops, their_ops) {
                        (Some(mine), Some(theirs)) => Arc::ptr_eq(mine, theirs),
                        (None, None) => true,
                        _ => false,
                    }
            }
            _ => false,
        };
        same_kind
            && (self.source_index, self.offset) == site
            && match (&self.outer, outer) {
                (Some((mine, my_row)), Some((theirs, their_row))) => {
                    Arc::ptr_eq(mine, theirs) && my_row == their_row
                }
                (None, None) => true,
                _ => false,
            }
    }

    /// How a report names it, at `row` when a loop (`in the loop at f.dep:4:1, at i = 3`).
    fn describe(&self, sources: &[SourceChunk], row: Row) -> String {
        let place = sources
            .get(self.source_index)
            .map_or_else(|| "?".to_string(), |chunk| chunk.place(self.offset));
        match &self.kind {
            Kind::Call(function) => format!("in `{function}`, called at {place}"),
            Kind::Loop(counters) => {
                let at: Vec<String> = counters
                    .iter()
                    .zip(row)
                    .map(|(counter, value)| format!("{counter} = {value}"))
                    .collect();
                format!("in the loop at {place}, at {}", at.join(", "))
            }
            Kind::Run(graph, _) => format!("in `run {graph}` at {place}"),
        }
    }

    /// For a `run` frame: the frames within the graph that its replay's op `op` was recorded
    /// within, innermost first, for its statement of session-wide line `line` (the one at
    /// `position` among a bulk's, when known); `from` is the replay's first op. Empty for any
    /// other frame.
    fn recorded_within(
        &self,
        op: u64,
        from: u64,
        line: u32,
        position: Option<usize>,
    ) -> &[FrameAt] {
        let Kind::Run(_, Some(ops)) = &self.kind else {
            return &[];
        };
        let Some(recorded) = op
            .checked_sub(from)
            .and_then(|offset| ops.get(usize::try_from(offset).ok()?))
        else {
            return &[];
        };
        let statement = match position {
            Some(position) => recorded.get(position).filter(|(at, _)| *at == line),
            None => recorded.iter().find(|(at, _)| *at == line),
        };
        statement
            .and_then(|(_, within)| within.0.as_deref())
            .unwrap_or(&[])
    }
}

/// A point where the innermost frame changed: ops numbered from `from` on were pushed within
/// `frame` (none: at the top level), at `row` when it is a loop and no [`RowRun`] since
/// says otherwise.
#[derive(Debug)]
struct FrameChange {
    from: u64,
    frame: Option<Arc<Frame>>,
    row: Row,
}

/// Iterations of the innermost loop that started at regular steps: the `k`th of them (`k <
/// n`) started at op `from + k * from_step`, at the row `row` with its first counter moved by
/// `k * row_step`. A loop whose iterations each push as many ops is one run however long it
/// is, and an iteration costs neither memory nor a reference count.
#[derive(Debug)]
struct RowRun {
    from: u64,
    row: Row,
    n: u64,
    from_step: u64,
    row_step: i64,
}

impl RowRun {
    fn one(from: u64, row: Row) -> RowRun {
        RowRun {
            from,
            row,
            n: 1,
            from_step: 0,
            row_step: 0,
        }
    }

    /// Where its last iteration started.
    fn last_from(&self) -> u64 {
        self.from + (self.n - 1) * self.from_step
    }

    /// Its last iteration that started at or before op `op`, if one did: where it started,
    /// and its row.
    fn at(&self, op: u64) -> Option<(u64, Row)> {
        let k = match op.checked_sub(self.from)? {
            _ if self.n == 1 => 0,
            after => (after / self.from_step).min(self.n - 1),
        };
        let row = [self.row[0] + k as i64 * self.row_step, self.row[1]];
        Some((self.from + k * self.from_step, row))
    }

    /// Takes in an iteration that starts at op `from` at `row`, if it continues the run.
    fn extend(&mut self, from: u64, row: Row) -> bool {
        if row[1] != self.row[1] || from <= self.last_from() {
            return false;
        }
        if self.n == 1 {
            self.from_step = from - self.from;
            self.row_step = row[0].wrapping_sub(self.row[0]);
        } else if from != self.last_from() + self.from_step
            || row[0] != self.row[0].wrapping_add(self.n as i64 * self.row_step)
        {
            return false;
        }
        self.n += 1;
        true
    }
}

/// Where each op was pushed, in push order (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct PushedWithin {
    /// The frame changes and the iterations, ids ascending in each.
    frames: VecDeque<FrameChange>,
    rows: VecDeque<RowRun>,
    /// Ops numbered below it may have had change points that were forgotten.
    forgotten_below: u64,
    /// Where failed ops whose change points were forgotten were pushed, by op id, with the op
    /// from which that frame held.
    of_failed: HashMap<u64, (Arc<Frame>, Row, u64)>,
    /// The frame being run now, innermost, and its iteration.
    current: Option<Arc<Frame>>,
    row: Row,
    /// The frame left last: the next one entered in the same place shares it.
    last_left: Option<Arc<Frame>>,
}

impl PushedWithin {
    /// The ops `engine` numbers next are pushed within a call of `function`, made at `site`
    /// (the session source chunk and byte offset of the call), whose body spans `body_lines`.
    pub(crate) fn enter_call(
        &mut self,
        engine: &engine::Engine,
        function: &Arc<str>,
        site: (usize, usize),
        body_lines: (u32, u32),
    ) {
        self.enter(engine, Kind::Call(function.clone()), site, body_lines);
    }

    /// The ops `engine` numbers next are pushed by a `run` of `graph`, written at `site`, whose
    /// statements (and the functions they call) span `lines`; `ops` holds the frames its
    /// engine ops were recorded within. [`PushedWithin::leave`] ends it.
    pub(crate) fn enter_run(
        &mut self,
        engine: &engine::Engine,
        graph: &Arc<str>,
        site: (usize, usize),
        lines: (u32, u32),
        ops: Option<ReplayWithin>,
    ) {
        self.enter(engine, Kind::Run(graph.clone(), ops), site, lines);
    }

    /// The frames, innermost first, that an op recorded now in a block entered within `base`
    /// is recorded within: those entered since (calls, loops of the block), each with its
    /// iteration.
    pub(crate) fn within_since(&self, base: &Option<Arc<Frame>>) -> Within {
        let mut chain = Vec::new();
        let mut at = self.current.as_ref().map(|frame| (frame, self.row));
        while let Some((frame, row)) = at {
            if base.as_ref().is_some_and(|base| Arc::ptr_eq(base, frame)) {
                break;
            }
            chain.push((frame.clone(), row));
            at = frame.outer.as_ref().map(|(outer, row)| (outer, *row));
        }
        Within((!chain.is_empty()).then(|| chain.into()))
    }

    /// The frame being run now, innermost: where a recorded block's own frames start.
    pub(crate) fn current(&self) -> Option<Arc<Frame>> {
        self.current.clone()
    }

    /// The ops `engine` numbers next are pushed within a `for` loop over `counters`, written at
    /// `site`, whose body spans `body_lines`; [`PushedWithin::iterate`] says at which iteration.
    pub(crate) fn enter_loop(
        &mut self,
        engine: &engine::Engine,
        counters: &[&str],
        site: (usize, usize),
        body_lines: (u32, u32),
    ) {
        let counters = counters.iter().map(|&counter| Arc::from(counter)).collect();
        self.enter(engine, Kind::Loop(counters), site, body_lines);
    }

    fn enter(
        &mut self,
        engine: &engine::Engine,
        kind: Kind,
        site: (usize, usize),
        body_lines: (u32, u32),
    ) {
        let outer = self.current.take().map(|frame| (frame, self.row));
        let frame = match self.last_left.take() {
            Some(frame) if frame.is_entered_as(&kind, site, &outer) => frame,
            _ => Arc::new(Frame {
                kind,
                source_index: site.0,
                offset: site.1,
                body_lines,
                outer,
            }),
        };
        self.current = Some(frame);
        self.row = Row::default();
        self.mark_frame(engine);
    }

    /// The ops `engine` numbers next are pushed at the iteration `row` of the loop entered
    /// last.
    #[inline]
    pub(crate) fn iterate(&mut self, engine: &engine::Engine, row: Row) {
        self.row = row;
        let from = engine.next_op_id().0;
        if let Some(last) = self.rows.back_mut() {
            if last.extend(from, row) {
                return;
            }
        }
        self.push_row(engine, from, row);
    }

    /// Starts a new run of iterations at op `from` (see [`PushedWithin::iterate`]).
    fn push_row(&mut self, engine: &engine::Engine, from: u64, row: Row) {
        // The iteration that started at `from` pushed nothing: this one replaces it.
        self.drop_iteration_at(from);
        if self.rows.len() == MAX_CHANGES {
            let cut = self.rows[MAX_CHANGES / 4].from;
            self.forget_below(engine, cut);
        }
        self.rows.push_back(RowRun::one(from, row));
    }

    /// Forgets the last iteration if it started at op `from`: it pushed no op.
    fn drop_iteration_at(&mut self, from: u64) {
        if let Some(last) = self.rows.back_mut() {
            if last.last_from() == from {
                last.n -= 1;
                if last.n == 0 {
                    self.rows.pop_back();
                }
            }
        }
    }

    /// The ops `engine` numbers next are pushed within the frame around the current one.
    pub(crate) fn leave(&mut self, engine: &engine::Engine) {
        let left = self.current.take();
        (self.current, self.row) = match left.as_ref().and_then(|frame| frame.outer.clone()) {
            Some((outer, row)) => (Some(outer), row),
            None => (None, Row::default()),
        };
        self.last_left = left;
        self.mark_frame(engine);
    }

    fn mark_frame(&mut self, engine: &engine::Engine) {
        let point = FrameChange {
            from: engine.next_op_id().0,
            frame: self.current.clone(),
            row: self.row,
        };
        // An iteration no op was pushed at is over: the frame's own row holds from here.
        self.drop_iteration_at(point.from);
        match self.frames.back_mut() {
            Some(last) if last.from == point.from => *last = point,
            _ => {
                if self.frames.len() == MAX_CHANGES {
                    let cut = self.frames[MAX_CHANGES / 4].from;
                    self.forget_below(engine, cut);
                }
                self.frames.push_back(point);
            }
        }
    }

    /// Forgets the change points of the ops numbered below `cut`, noting first where the failed
    /// ops among them were pushed.
    fn forget_below(&mut self, engine: &engine::Engine, cut: u64) {
        for op in engine.failed_ops_below(engine::OpId(cut)) {
            if self.of_failed.len() >= engine::MAX_KEPT_FAILURES {
                break;
            }
            if let Some((frame, row, from)) = self.innermost(op) {
                self.of_failed.insert(op.0, (frame.clone(), row, from));
            }
        }
        // The last point at or below the cut still holds from the cut on.
        let frames = self.frames.partition_point(|change| change.from <= cut);
        let rows = self.rows.partition_point(|change| change.from <= cut);
        self.frames.drain(..frames.saturating_sub(1));
        self.rows.drain(..rows.saturating_sub(1));
        self.forgotten_below = self.forgotten_below.max(cut);
    }

    /// The innermost frame op `op` was pushed within, its iteration, and the op from which that
    /// frame held, from the change points kept.
    fn innermost(&self, op: engine::OpId) -> Option<(&Arc<Frame>, Row, u64)> {
        if op.0 < self.forgotten_below {
            return None;
        }
        let after = self.frames.partition_point(|change| change.from <= op.0);
        let change = &self.frames[after.checked_sub(1)?];
        let frame = change.frame.as_ref()?;
        let after = self.rows.partition_point(|run| run.from <= op.0);
        let iteration = after
            .checked_sub(1)
            .and_then(|index| self.rows[index].at(op.0));
        let row = match iteration {
            Some((from, row)) if from >= change.from => row,
            _ => change.row,
        };
        Some((frame, row, change.from))
    }

    /// The frames op `op`, of session-wide line `line` (the statement at `position` among a
    /// graph's bulk's, when known), was pushed within, innermost first,
    /// rendered as reports name them (`` in `f`, called at script.dep:6:5 ``, `in the loop at
    /// script.dep:4:1, at i = 3`); empty for an op pushed at the top level or whose frames were
    /// forgotten.
    pub(crate) fn describe(
        &self,
        sources: &[SourceChunk],
        op: engine::OpId,
        line: u32,
        position: Option<usize>,
    ) -> Vec<String> {
        let (frame, row, from) = match self.of_failed.get(&op.0) {
            Some((frame, row, from)) => (frame, *row, *from),
            None => match self.innermost(op) {
                Some(innermost) => innermost,
                None => return Vec::new(),
            },
        };
        let (first, last) = frame.body_lines;
        if !(first..=last).contains(&line) {
            return Vec::new();
        }
        let recorded = frame
            .recorded_within(op.0, from, line, position)
            .iter()
            .map(|(frame, row)| (frame, *row));
        let pushed = std::iter::successors(Some((frame, row)), |(frame, _)| {
            frame.outer.as_ref().map(|(outer, row)| (outer, *row))
        });
        recorded
            .chain(pushed)
            .map(|(frame, row)| frame.describe(sources, row))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{PushedWithin, MAX_CHANGES};
    use crate::sources::SourceChunk;
    use dep_engine::{Engine, EngineConfig, OpId, OpSpec, Policy};
    use std::sync::Arc;

    const SOURCE: &str = "def f(x) {\n  return x[9]\n}\ndef g(x) {\n  return f(x)\n}\nb = g(a)\n";

    fn sources() -> Vec<SourceChunk> {
        vec![SourceChunk::new("s.dep", 1, 1, SOURCE.into())]
    }

    fn naive_engine() -> Engine {
        Engine::new(EngineConfig {
            policy: Policy::Naive,
            ..EngineConfig::default()
        })
    }

    /// Pushes `n` empty ops, or one failing op; returns the first one's id.
    fn push(engine: &Engine, n: usize, fail: bool) -> OpId {
        let first = engine.next_op_id();
        for _ in 0..n {
            engine.push(OpSpec::new("op", move || match fail {
                true => Err("failed".to_string()),
                false => Ok(()),
            }));
        }
        first
    }

    #[test]
    fn an_op_is_named_with_the_calls_it_was_pushed_within_innermost_first() {
        let (sources, engine) = (sources(), naive_engine());
        let mut calls = PushedWithin::default();
        let at_g = SOURCE.find("g(a)").unwrap();
        let at_f = SOURCE.find("f(x)\n").unwrap();
        let top = push(&engine, 2, false);
        calls.enter_call(&engine, &Arc::from("g"), (0, at_g), (4, 6));
        let in_g = push(&engine, 1, false);
        calls.enter_call(&engine, &Arc::from("f"), (0, at_f), (1, 3));
        let in_f = push(&engine, 2, false);
        calls.leave(&engine);
        let in_g_again = push(&engine, 1, false);
        calls.leave(&engine);
        let top_again = push(&engine, 1, false);
        assert!(calls.describe(&sources, top, 7, None).is_empty());
        assert_eq!(
            calls.describe(&sources, in_f, 2, None),
            [
                "in `f`, called at s.dep:5:10",
                "in `g`, called at s.dep:7:5"
            ]
        );
        assert_eq!(
            calls.describe(&sources, in_g, 5, None),
            ["in `g`, called at s.dep:7:5"]
        );
        assert_eq!(
            calls.describe(&sources, in_g_again, 5, None),
            ["in `g`, called at s.dep:7:5"]
        );
        assert!(calls.describe(&sources, top_again, 7, None).is_empty());
        // An op on a line outside the innermost function's body was not pushed by that call.
        assert!(calls.describe(&sources, in_f, 7, None).is_empty());
    }

    #[test]
    fn calls_from_one_place_share_one_record_and_pushing_nothing_adds_no_point() {
        let engine = naive_engine();
        let mut calls = PushedWithin::default();
        calls.enter_call(&engine, &Arc::from("f"), (0, 5), (1, 3));
        calls.leave(&engine);
        assert_eq!(calls.frames.len(), 1);
        push(&engine, 1, false);
        calls.enter_call(&engine, &Arc::from("f"), (0, 5), (1, 3));
        let first = calls.current.clone().unwrap();
        push(&engine, 1, false);
        calls.leave(&engine);
        calls.enter_call(&engine, &Arc::from("f"), (0, 5), (1, 3));
        assert!(std::sync::Arc::ptr_eq(
            &first,
            calls.current.as_ref().unwrap()
        ));
        calls.leave(&engine);
        calls.enter_call(&engine, &Arc::from("f"), (0, 9), (1, 3));
        assert!(!std::sync::Arc::ptr_eq(
            &first,
            calls.current.as_ref().unwrap()
        ));
    }

    #[test]
    fn old_points_are_forgotten_but_not_those_of_a_failure_not_reported_yet() {
        let (sources, engine) = (sources(), naive_engine());
        let mut calls = PushedWithin::default();
        calls.enter_call(&engine, &Arc::from("f"), (0, 0), (1, 3));
        let failed = push(&engine, 1, true);
        let ran = push(&engine, 1, false);
        calls.leave(&engine);
        for _ in 0..MAX_CHANGES {
            push(&engine, 1, false);
            calls.enter_call(&engine, &Arc::from("f"), (0, 0), (1, 3));
            push(&engine, 1, false);
            calls.leave(&engine);
        }
        assert!(calls.frames.len() <= MAX_CHANGES);
        assert!(calls.frames.front().unwrap().from > ran.0);
        assert!(calls.describe(&sources, ran, 2, None).is_empty());
        assert_eq!(
            calls.describe(&sources, failed, 2, None),
            ["in `f`, called at s.dep:1:1"]
        );
        // The last call's op, and the one pushed before the call.
        let in_last_call = OpId(engine.next_op_id().0 - 1);
        assert_eq!(calls.describe(&sources, in_last_call, 2, None).len(), 1);
        assert!(calls
            .describe(&sources, OpId(in_last_call.0 - 1), 2, None)
            .is_empty());
    }

    #[test]
    fn an_op_in_a_loop_is_named_with_its_iteration_and_those_of_the_loops_around() {
        let (sources, engine) = (sources(), naive_engine());
        let mut within = PushedWithin::default();
        let mut pushed = Vec::new();
        within.enter_loop(&engine, &["i"], (0, 0), (1, 7));
        for i in 0..2 {
            within.iterate(&engine, [i, 0]);
            within.enter_loop(&engine, &["m", "p"], (0, 11), (2, 2));
            for p in 0..2 {
                within.iterate(&engine, [i + 1, p]);
                pushed.push(push(&engine, 1, false));
            }
            // A last iteration that pushes nothing: the ops after the loop are the outer's.
            within.iterate(&engine, [i + 1, 2]);
            within.leave(&engine);
            within.enter_call(&engine, &Arc::from("g"), (0, 40), (4, 6));
            pushed.push(push(&engine, 1, false));
            within.leave(&engine);
        }
        within.leave(&engine);
        let after = push(&engine, 1, false);
        assert_eq!(
            within.describe(&sources, pushed[3], 2, None),
            [
                "in the loop at s.dep:2:1, at m = 2, p = 0",
                "in the loop at s.dep:1:1, at i = 1"
            ]
        );
        assert_eq!(
            within.describe(&sources, pushed[2], 5, None),
            [
                "in `g`, called at s.dep:5:3",
                "in the loop at s.dep:1:1, at i = 0"
            ]
        );
        assert!(within.describe(&sources, after, 7, None).is_empty());
        // An iteration that pushed nothing adds no point.
        within.enter_loop(&engine, &["k"], (0, 0), (1, 7));
        let n_points = within.rows.len() + within.frames.len();
        for k in 0..100 {
            within.iterate(&engine, [k, 0]);
        }
        within.leave(&engine);
        assert_eq!(within.rows.len() + within.frames.len(), n_points);
    }

    #[test]
    fn a_long_irregular_loop_forgets_old_iterations_but_not_those_of_failures_not_reported_yet() {
        let (sources, engine) = (sources(), naive_engine());
        let mut within = PushedWithin::default();
        within.enter_loop(&engine, &["i"], (0, 0), (1, 7));
        within.iterate(&engine, [0, 0]);
        let failed = push(&engine, 1, true);
        within.iterate(&engine, [1, 0]);
        let ran = push(&engine, 1, false);
        // Iterations of one op, then two: a run holds two of them at most.
        let n = 2 * MAX_CHANGES as i64 + 10;
        for i in 2..n {
            within.iterate(&engine, [i, 0]);
            push(&engine, 1 + i as usize % 2, false);
        }
        assert!(within.rows.len() <= MAX_CHANGES);
        assert_eq!(
            within.describe(&sources, failed, 2, None),
            ["in the loop at s.dep:1:1, at i = 0"]
        );
        // Forgotten: no iteration rather than a wrong one.
        assert!(within.describe(&sources, ran, 2, None).is_empty());
        let last = OpId(engine.next_op_id().0 - 1);
        assert_eq!(
            within.describe(&sources, last, 2, None),
            [format!("in the loop at s.dep:1:1, at i = {}", n - 1)]
        );
    }

    #[test]
    fn a_regular_loop_is_one_run_of_iterations_however_long() {
        let (sources, engine) = (sources(), naive_engine());
        let mut within = PushedWithin::default();
        within.enter_loop(&engine, &["i"], (0, 0), (1, 7));
        let mut firsts = Vec::new();
        for i in 0..100_000 {
            within.iterate(&engine, [10 - 3 * i, 0]);
            firsts.push(push(&engine, 3, false));
        }
        assert_eq!(within.rows.len(), 1);
        for i in [0, 1, 4_567, 99_999] {
            let in_it = OpId(firsts[i as usize].0 + 2);
            assert_eq!(
                within.describe(&sources, in_it, 2, None),
                [format!("in the loop at s.dep:1:1, at i = {}", 10 - 3 * i)]
            );
        }
    }
}
