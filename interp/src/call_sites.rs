//! The calls each op was pushed within, so that an op failing inside a user's function says
//! where the function was called, as an error at push time does (`in `f`, called at
//! script.dep:6:5`).
//!
//! Ops are numbered in push order, so the table holds only the points where the innermost call
//! changed: from op N on, ops were pushed within this call (or at the top level). A loop that
//! calls a function a million times adds two points a call (and one `Call`, shared by every
//! call from the same place). The table keeps the last [`MAX_CHANGES`] points; before it forgets
//! older ones it notes the calls of the ops among them that failed and were not reported yet,
//! so a failure early in a long run still names its calls when the run's end reports it.

use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;
use std::sync::Arc;

use dep_engine as engine;

use crate::sources::SourceChunk;

/// The most change points kept (512 KiB).
pub(crate) const MAX_CHANGES: usize = 1 << 15;

/// One call of a user's function, and the call it was made within.
#[derive(Debug)]
pub(crate) struct Call {
    /// The function's name.
    function: Arc<str>,
    /// The session source chunk of the calling statement, and the call's byte offset in it.
    source_index: usize,
    offset: usize,
    /// The session-wide lines the function's body spans: an op of this call on another line
    /// was not pushed by it (a failure the engine adopted from another engine, whose numbering
    /// started afresh).
    body_lines: (u32, u32),
    /// The call this one was made within, if any.
    outer: Option<Arc<Call>>,
}

impl Call {
    /// Whether a call of `function` at `site`, within `outer`, is made where this one was.
    fn is_made_as(&self, function: &str, site: (usize, usize), outer: &Option<Arc<Call>>) -> bool {
        &*self.function == function
            && (self.source_index, self.offset) == site
            && match (&self.outer, outer) {
                (Some(mine), Some(theirs)) => Arc::ptr_eq(mine, theirs),
                (None, None) => true,
                _ => false,
            }
    }
}

/// Where each op's innermost call changed, in push order (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct CallSites {
    /// `(first op id, the call its ops were pushed within)`, ids ascending.
    changes: VecDeque<(u64, Option<Arc<Call>>)>,
    /// The calls of failed ops whose change points were forgotten, by op id.
    of_failed: HashMap<u64, Arc<Call>>,
    /// The call being run now, innermost.
    current: Option<Arc<Call>>,
    /// The call left last: the next call made from the same place shares it.
    last_left: Option<Arc<Call>>,
}

impl CallSites {
    /// The ops `engine` numbers next are pushed within a call of `function`, made at `site`
    /// (the session source chunk and byte offset of the call), whose body spans `body_lines`.
    pub(crate) fn enter(
        &mut self,
        engine: &engine::Engine,
        function: &str,
        site: (usize, usize),
        body_lines: (u32, u32),
    ) {
        let outer = self.current.take();
        let call = match self.last_left.take() {
            Some(call) if call.is_made_as(function, site, &outer) => call,
            _ => Arc::new(Call {
                function: Arc::from(function),
                source_index: site.0,
                offset: site.1,
                body_lines,
                outer,
            }),
        };
        self.current = Some(call);
        self.mark(engine);
    }

    /// The ops `engine` numbers next are pushed within the call around the current one.
    pub(crate) fn leave(&mut self, engine: &engine::Engine) {
        let left = self.current.take();
        self.current = left.as_ref().and_then(|call| call.outer.clone());
        self.last_left = left;
        self.mark(engine);
    }

    fn mark(&mut self, engine: &engine::Engine) {
        let point = (engine.next_op_id().0, self.current.clone());
        match self.changes.back_mut() {
            // No op was pushed since the last change: it is replaced.
            Some(last) if last.0 == point.0 => *last = point,
            _ => {
                if self.changes.len() == MAX_CHANGES {
                    self.forget_oldest(engine);
                }
                self.changes.push_back(point);
            }
        }
    }

    /// Forgets the oldest quarter of the change points, noting first the calls of the failed
    /// ops among them.
    fn forget_oldest(&mut self, engine: &engine::Engine) {
        let cut = self.changes[MAX_CHANGES / 4].0;
        for op in engine.failed_ops_below(engine::OpId(cut)) {
            if self.of_failed.len() >= engine::MAX_KEPT_FAILURES {
                break;
            }
            if let Some(call) = self.innermost(op) {
                self.of_failed.insert(op.0, call.clone());
            }
        }
        self.changes.drain(..MAX_CHANGES / 4);
    }

    /// The innermost call op `op` was pushed within, from the change points kept.
    fn innermost(&self, op: engine::OpId) -> Option<&Arc<Call>> {
        let after = self.changes.partition_point(|(from, _)| *from <= op.0);
        self.changes[after.checked_sub(1)?].1.as_ref()
    }

    /// The calls op `op`, of session-wide line `line`, was pushed within, innermost first,
    /// rendered as reports name them (`` in `f`, called at script.dep:6:5 ``); empty for an op
    /// pushed at the top level or whose calls were forgotten.
    pub(crate) fn describe(
        &self,
        sources: &[SourceChunk],
        op: engine::OpId,
        line: u32,
    ) -> Vec<String> {
        let Some(innermost) = self.of_failed.get(&op.0).or_else(|| self.innermost(op)) else {
            return Vec::new();
        };
        let (first_line, last_line) = innermost.body_lines;
        if !(first_line..=last_line).contains(&line) {
            return Vec::new();
        }
        std::iter::successors(Some(innermost), |call| call.outer.as_ref())
            .map(|call| {
                let place = sources
                    .get(call.source_index)
                    .map_or_else(|| "?".to_string(), |chunk| chunk.place(call.offset));
                format!("in `{}`, called at {place}", call.function)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{CallSites, MAX_CHANGES};
    use crate::sources::SourceChunk;
    use dep_engine::{Engine, EngineConfig, OpId, OpSpec, Policy};

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
        let mut calls = CallSites::default();
        let at_g = SOURCE.find("g(a)").unwrap();
        let at_f = SOURCE.find("f(x)\n").unwrap();
        let top = push(&engine, 2, false);
        calls.enter(&engine, "g", (0, at_g), (4, 6));
        let in_g = push(&engine, 1, false);
        calls.enter(&engine, "f", (0, at_f), (1, 3));
        let in_f = push(&engine, 2, false);
        calls.leave(&engine);
        let in_g_again = push(&engine, 1, false);
        calls.leave(&engine);
        let top_again = push(&engine, 1, false);
        assert!(calls.describe(&sources, top, 7).is_empty());
        assert_eq!(
            calls.describe(&sources, in_f, 2),
            [
                "in `f`, called at s.dep:5:10",
                "in `g`, called at s.dep:7:5"
            ]
        );
        assert_eq!(
            calls.describe(&sources, in_g, 5),
            ["in `g`, called at s.dep:7:5"]
        );
        assert_eq!(
            calls.describe(&sources, in_g_again, 5),
            ["in `g`, called at s.dep:7:5"]
        );
        assert!(calls.describe(&sources, top_again, 7).is_empty());
        // An op on a line outside the innermost function's body was not pushed by that call.
        assert!(calls.describe(&sources, in_f, 7).is_empty());
    }

    #[test]
    fn calls_from_one_place_share_one_record_and_pushing_nothing_adds_no_point() {
        let engine = naive_engine();
        let mut calls = CallSites::default();
        calls.enter(&engine, "f", (0, 5), (1, 3));
        calls.leave(&engine);
        assert_eq!(calls.changes.len(), 1);
        push(&engine, 1, false);
        calls.enter(&engine, "f", (0, 5), (1, 3));
        let first = calls.current.clone().unwrap();
        push(&engine, 1, false);
        calls.leave(&engine);
        calls.enter(&engine, "f", (0, 5), (1, 3));
        assert!(std::sync::Arc::ptr_eq(
            &first,
            calls.current.as_ref().unwrap()
        ));
        calls.leave(&engine);
        calls.enter(&engine, "f", (0, 9), (1, 3));
        assert!(!std::sync::Arc::ptr_eq(
            &first,
            calls.current.as_ref().unwrap()
        ));
    }

    #[test]
    fn old_points_are_forgotten_but_not_those_of_a_failure_not_reported_yet() {
        let (sources, engine) = (sources(), naive_engine());
        let mut calls = CallSites::default();
        calls.enter(&engine, "f", (0, 0), (1, 3));
        let failed = push(&engine, 1, true);
        let ran = push(&engine, 1, false);
        calls.leave(&engine);
        for _ in 0..MAX_CHANGES {
            push(&engine, 1, false);
            calls.enter(&engine, "f", (0, 0), (1, 3));
            push(&engine, 1, false);
            calls.leave(&engine);
        }
        assert!(calls.changes.len() <= MAX_CHANGES);
        assert!(calls.changes.front().unwrap().0 > ran.0);
        assert!(calls.describe(&sources, ran, 2).is_empty());
        assert_eq!(
            calls.describe(&sources, failed, 2),
            ["in `f`, called at s.dep:1:1"]
        );
        // The last call's op, and the one pushed before the call.
        let in_last_call = OpId(engine.next_op_id().0 - 1);
        assert_eq!(calls.describe(&sources, in_last_call, 2).len(), 1);
        assert!(calls
            .describe(&sources, OpId(in_last_call.0 - 1), 2)
            .is_empty());
    }
}
