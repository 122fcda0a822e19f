//! A [`Frame`]: what the live views show at one moment, from a replay or a live snapshot.

use std::collections::HashMap;
use std::sync::Arc;

use dep_engine as engine;
use dep_engine::{AccessSnapshot, Blocker, OpId, OpState, VarId};

use crate::places::Places;
use crate::replay::{blockers, worker_name};
use crate::util::describe_op_at;

/// Per-variable queues and op states at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Frame {
    /// Nanoseconds since the engine started.
    pub time_ns: u64,
    /// Live variables in creation order, each with its pending accesses, oldest first.
    pub vars: Vec<FrameVar>,
    /// Ops in push order: every op so far for a replay, the live ones for a snapshot.
    pub ops: Vec<FrameOp>,
    /// Ops left out of `ops` (a live display lists at most so many) that a queue or a waiting
    /// op's reasons name: [`Frame::op`] finds them, so that no view names an op by its number.
    pub named: Vec<FrameOp>,
}

/// Why a waiting op waits once every access it queued is granted: the engine has yet to make
/// it ready (the step between its last grant and its readiness, or a snapshot taken there).
pub(crate) const ALL_GRANTED: &str = "has every grant: the engine makes it ready next";

/// One live variable and its queue.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameVar {
    /// The variable.
    pub id: VarId,
    /// Its name.
    pub name: Arc<str>,
    /// Pending accesses, oldest first; granted ones form a prefix.
    pub queue: Vec<AccessSnapshot>,
}

/// One op.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameOp {
    /// The op.
    pub id: OpId,
    /// Its label (the statement).
    pub label: Arc<str>,
    /// Its source line (0: none).
    pub line: u32,
    /// Its line as the reader numbers it (`cell[2]:3`), once a front-end named it
    /// ([`Frame::name_places`]).
    pub place: Option<Arc<str>>,
    /// Its state.
    pub state: OpState,
    /// Its device.
    pub device: engine::Device,
    /// The name of the worker running or having run it.
    pub worker: Option<String>,
    /// When it started, when known.
    pub started_ns: Option<u64>,
    /// When it finished, when known.
    pub finished_ns: Option<u64>,
    /// For a waiting op, each access not yet granted and the op it waits behind.
    pub waits_on: Vec<Blocker>,
}

impl FrameOp {
    /// "statement (line N)", or "statement (cell\[2\]:3)" once its place is named.
    pub fn describe(&self) -> String {
        describe_op_at(&self.label, self.line, self.place.as_deref())
    }
}

/// Whether a variable is one of the interpreter's temporaries that carry nothing between two
/// shown ops: the value of an expression statement or of a `print A + 1` (`_#3`), which only
/// the interpreter's own `wait _#3` reads. User names are identifiers, which never hold a `#`
/// (it starts a comment). The temporaries that do carry a value from one shown op to another
/// (a function's argument `f.x#4`, its result `return#3`, a communication's input `comm#5`)
/// are shown, so that every view keeps the dependency they stand for.
pub fn is_internal_name(name: &str) -> bool {
    name.starts_with("_#")
}

/// Whether an op is bookkeeping of the interpreter's temporaries, which no view shows: one that
/// computes a hidden temporary (`_#1`), or a wait for or deletion of any temporary
/// (`wait _#1`, `del _#1`, `del return#3`).
pub fn is_internal_op(label: &str) -> bool {
    let is_temporary = |name: &str| name.contains('#') && !name.contains(char::is_whitespace);
    match label
        .strip_prefix("wait ")
        .or_else(|| label.strip_prefix("del "))
    {
        Some(name) => is_temporary(name),
        None => is_internal_name(label) && is_temporary(label),
    }
}

impl Frame {
    /// A frame of a live engine: `worker_names` from [`dep_engine::Monitor::worker_names`].
    /// Snapshots carry no start times; `started_ns` is left unknown. The interpreter's
    /// temporaries and their bookkeeping ops are left out ([`is_internal_op`]).
    /// Each waiting op waits on every access ahead of it that it must outlive (two running
    /// reads ahead of a write are two blockers), worked out from the queues by the rule a replay
    /// uses.
    pub fn from_snapshot(snapshot: &engine::Snapshot, worker_names: &[String]) -> Frame {
        // The bookkeeping ops, left out of the queues as they are of the ops.
        let internal: std::collections::HashSet<OpId> = snapshot
            .ops
            .iter()
            .filter(|op| is_internal_op(&op.label))
            .map(|op| op.id)
            .collect();
        let queues: Vec<Vec<AccessSnapshot>> = snapshot
            .vars
            .iter()
            .map(|var| {
                var.queue
                    .iter()
                    .filter(|access| !internal.contains(&access.op))
                    .copied()
                    .collect()
            })
            .collect();
        let mut waits: HashMap<OpId, Vec<Blocker>> = HashMap::new();
        for (var, queue) in snapshot.vars.iter().zip(&queues) {
            for (op, blocker) in blockers(var.id, queue) {
                waits.entry(op).or_default().push(blocker);
            }
        }
        // A variable whose deletion waits in its queue (`del A` while A is read) is shown as
        // such: a new `A` may already be live beside it. (The interpreter deletes each of its
        // temporaries as soon as it is pushed: that deletion is bookkeeping, not shown.)
        let deleted: Vec<VarId> = snapshot
            .ops
            .iter()
            .filter(|op| op.label.starts_with("del ") && op.reads.is_empty())
            .filter(|op| !internal.contains(&op.id))
            .flat_map(|op| op.writes.iter().copied())
            .collect();
        Frame {
            time_ns: snapshot.time_ns,
            vars: snapshot
                .vars
                .iter()
                .zip(queues)
                .filter(|(var, _)| !is_internal_name(&var.name))
                .map(|(var, queue)| FrameVar {
                    id: var.id,
                    name: match deleted.contains(&var.id) {
                        true => Arc::from(format!("{} (deleted)", var.name)),
                        false => var.name.clone(),
                    },
                    queue,
                })
                .collect(),
            ops: snapshot
                .ops
                .iter()
                .filter(|op| !is_internal_op(&op.label))
                .map(|op| FrameOp {
                    id: op.id,
                    label: op.label.clone(),
                    line: op.line,
                    place: None,
                    state: op.state,
                    device: op.device,
                    worker: op.worker.map(|worker| worker_name(worker_names, worker)),
                    started_ns: None,
                    finished_ns: None,
                    // Only a waiting op waits for anything (a cancelled one only holds its
                    // place in the queues until its turn, then finishes without running).
                    waits_on: match op.state {
                        OpState::Waiting => waits.remove(&op.id).unwrap_or_default(),
                        _ => Vec::new(),
                    },
                })
                .collect(),
            named: Vec::new(),
        }
    }

    /// Names each op's line as the reader numbers it (`cell[2]:3`, see [`Places`]).
    pub fn name_places(&mut self, places: &Places) {
        for op in self.ops.iter_mut().chain(&mut self.named) {
            op.place = places.name(op.line);
        }
    }

    /// One op by id, listed or only named ([`Frame::named`]).
    pub fn op(&self, id: OpId) -> Option<&FrameOp> {
        self.ops.iter().chain(&self.named).find(|op| op.id == id)
    }

    /// A live variable's name, or `v7` when it is not in the frame.
    pub fn var_name(&self, var: VarId) -> Arc<str> {
        self.vars
            .iter()
            .find(|candidate| candidate.id == var)
            .map_or_else(|| Arc::from(var.to_string()), |found| found.name.clone())
    }

    /// The frame without the variables whose queue is empty and without finished ops: what a
    /// live panel has room for.
    pub fn busy_only(&self) -> Frame {
        let vars: Vec<FrameVar> = self
            .vars
            .iter()
            .filter(|var| !var.queue.is_empty())
            .cloned()
            .collect();
        let (ops, finished): (Vec<FrameOp>, Vec<FrameOp>) = self
            .ops
            .iter()
            .cloned()
            .partition(|op| !op.state.is_finished());
        let mut busy = Frame {
            time_ns: self.time_ns,
            vars,
            ops,
            named: Vec::new(),
        };
        // A finished op a queue still holds (a cancelled one, until its turn) keeps its name.
        let named: Vec<FrameOp> = finished
            .into_iter()
            .chain(self.named.iter().cloned())
            .filter(|op| busy.names(op.id))
            .collect();
        busy.named = named;
        busy
    }

    /// Whether `op` still holds a place in the engine: unfinished, or cancelled while it keeps
    /// its place in a queue until its turn (its queue rows name it, so its row shows too).
    pub fn holds_a_place(&self, op: &FrameOp) -> bool {
        !op.state.is_finished()
            || (op.state == OpState::Cancelled
                && (self.vars.iter()).any(|var| var.queue.iter().any(|access| access.op == op.id)))
    }

    /// Whether a queue or a listed op's reasons for waiting name op `id`.
    pub fn names(&self, id: OpId) -> bool {
        self.vars
            .iter()
            .any(|var| var.queue.iter().any(|access| access.op == id))
            || self
                .ops
                .iter()
                .any(|op| op.waits_on.iter().any(|blocker| blocker.behind == id))
    }

    /// Why `op` waits, in words, one clause per blocked variable naming every access it waits
    /// behind: `waits for A: read by B = A @ A (line 2), running on cpu:0, and by C = A @ A
    /// (line 3), running on cpu:1`. A waiting op with nothing ahead of it (just pushed, or the
    /// op before it has just ended) waits for the engine's grants: it says so; once every
    /// access it queued is granted, it waits for nothing but being made ready, and says that.
    /// `None` for an op that does not wait.
    pub fn why_waiting(&self, op: &FrameOp) -> Option<String> {
        if op.waits_on.is_empty() {
            if op.state != OpState::Waiting {
                return None;
            }
            let mut accesses = self.vars.iter().flat_map(|var| &var.queue);
            if accesses.all(|access| access.op != op.id || access.granted) {
                return Some(ALL_GRANTED.to_string());
            }
            return Some("waits for its grants: nothing is ahead of it in its queues".to_string());
        }
        Some(format!(
            "waits {}",
            self.blocker_clauses(&op.waits_on, true)
        ))
    }

    /// `for A: read by B = A + 1 (line 2), and by C = A * 3 (line 3); and for C: …`, each op
    /// followed by its state in this frame when `with_states`.
    pub(crate) fn blocker_clauses(&self, waits_on: &[Blocker], with_states: bool) -> String {
        let mut clauses: Vec<String> = Vec::new();
        let mut by_var: Vec<(VarId, Vec<&Blocker>)> = Vec::new();
        for blocker in waits_on {
            match by_var.iter_mut().find(|(var, _)| *var == blocker.var) {
                Some((_, blockers)) => blockers.push(blocker),
                None => by_var.push((blocker.var, vec![blocker])),
            }
        }
        for (var, blockers) in by_var {
            let behind: Vec<String> = blockers
                .iter()
                .map(|blocker| {
                    let who = match self.op(blocker.behind) {
                        Some(behind) if !with_states => behind.describe(),
                        Some(behind) => {
                            behind.describe()
                                + &match (behind.state, &behind.worker) {
                                    (OpState::Running, Some(worker)) => {
                                        format!(", running on {worker}")
                                    }
                                    (OpState::Ready, _) => ", ready for a free worker".to_string(),
                                    (OpState::Waiting, _) => ", itself waiting".to_string(),
                                    (state, _) => format!(", {}", state.name()),
                                }
                        }
                        None => blocker.behind.to_string(),
                    };
                    format!("by {who}")
                })
                .collect();
            let verb = if blockers[0].behind_writes {
                "written"
            } else {
                "read"
            };
            clauses.push(format!(
                "for {}: {verb} {}",
                self.var_name(var),
                behind.join(", and ")
            ));
        }
        clauses.join("; and ")
    }

    /// What [`Frame::why`] says of a variable whose pending writes were all cancelled: the
    /// frame does not know whether a write of it ever ran, which a front-end that holds the
    /// variable's value may say instead.
    pub const KEEPS_ITS_VALUE: &'static str = "keeps what the last write that ran left";

    /// One sentence on what a variable waits for: the op that will write it, and why that op is
    /// not done. `None` when no variable of that name is live. A variable whose deletion is
    /// pushed (shown `h' (deleted)`, as a function's local once its call has returned) answers
    /// to its name when no other does, about the writes before its deletion, which the sentence
    /// names last.
    pub fn why(&self, name: &str) -> Option<String> {
        let live = self.vars.iter().find(|var| &*var.name == name);
        let deleted =
            || (self.vars.iter()).find(|var| var.name.strip_suffix(" (deleted)") == Some(name));
        let (var, is_deleted) = match live {
            Some(var) => (var, false),
            None => (deleted()?, true),
        };
        let writes = || {
            var.queue
                .iter()
                .rev()
                .filter(|access| access.write)
                .filter_map(|access| self.op(access.op))
        };
        // A deleted variable's last write is its deletion: nothing accesses it after.
        let deletion = writes().next().filter(|_| is_deleted);
        let then = deletion.map_or_else(String::new, |deletion| {
            format!("; then {} deletes it", deletion.describe())
        });
        let writes = || writes().skip(usize::from(is_deleted));
        // A cancelled write holds its place in the queue but will write nothing.
        let writer = writes().find(|op| op.state != OpState::Cancelled);
        if let (None, Some(cancelled)) = (writer, writes().next()) {
            return Some(format!(
                "{name} will not be written: {} was cancelled before it started, and {name} \
                 {}{then}",
                cancelled.describe(),
                Self::KEEPS_ITS_VALUE
            ));
        }
        let Some(writer) = writer else {
            let n_reads = var.queue.iter().filter(|access| !access.write).count();
            return Some(match n_reads {
                0 => format!("{name} is ready: nothing reads or writes it now{then}"),
                _ => format!(
                    "{name} is ready: no write is pending ({n_reads} read{} pending){then}",
                    if n_reads == 1 { "" } else { "s" }
                ),
            });
        };
        let subject = format!("{name} will be written by {}", writer.describe());
        Some(match (writer.state, &writer.worker) {
            (OpState::Running, Some(worker)) => format!("{subject}, running on {worker}{then}"),
            (OpState::Ready, _) => format!("{subject}, ready for a free worker{then}"),
            (OpState::Waiting, _) => match self.why_waiting(writer) {
                Some(reason) => format!("{subject}, which {reason}{then}"),
                None => format!("{subject}, which is waiting{then}"),
            },
            (state, _) => format!("{subject}, {}{then}", state.name()),
        })
    }
}

#[cfg(test)]
mod internal_tests {
    use super::*;

    /// A threaded engine of one worker.
    fn one_worker_engine() -> engine::Engine {
        engine::Engine::new(engine::EngineConfig {
            policy: engine::Policy::Threaded,
            threads: 1,
            ..engine::EngineConfig::default()
        })
    }

    /// An op labelled `label` that holds its variables until the sender sends (or is
    /// dropped), so the ops behind it stay in the snapshot.
    fn gated(label: &str) -> (engine::OpSpec, std::sync::mpsc::Sender<()>) {
        let (open, gate) = std::sync::mpsc::channel::<()>();
        let gate = std::sync::Mutex::new(gate);
        let spec = engine::OpSpec::new(label.to_string(), move || {
            let _ = gate.lock().map(|gate| gate.recv());
            Ok(())
        });
        (spec, open)
    }

    #[test]
    fn temporaries_only_the_interpreter_reads_and_bookkeeping_are_internal() {
        for label in ["_#1", "wait _#1", "del _#12", "del return#3"] {
            assert!(is_internal_op(label), "{label}");
        }
        for label in [
            "A = B + 1",
            "wait A",
            "del A",
            "print x # a comment",
            "return work(1, x)",
        ] {
            assert!(!is_internal_op(label), "{label}");
        }
        assert!(is_internal_name("_#1"));
        for name in ["A", "return#3", "f.x#4", "comm#5"] {
            assert!(!is_internal_name(name), "{name}");
        }
    }

    #[test]
    fn a_frame_leaves_out_internal_ops_and_variables() {
        let engine = one_worker_engine();
        let a = engine.new_var("A");
        let temporary = engine.new_var("_#1");
        // A gate holds both variables, so the ops behind it stay in the snapshot.
        let both = [a.clone(), temporary.clone()];
        let (gate, open) = gated("gate");
        engine.push(gate.writes(&both));
        engine.push(engine::OpSpec::new("_#1", || Ok(())).writes(&[temporary.clone()]));
        engine.push(engine::OpSpec::new("A = 1", || Ok(())).writes(&[a]));
        let frame = Frame::from_snapshot(&engine.snapshot(), &engine.worker_names());
        let _ = open.send(());
        engine.wait_all();
        assert!(frame.ops.iter().any(|op| &*op.label == "A = 1"));
        assert!(frame.vars.iter().any(|var| &*var.name == "A"));
        assert!(frame.vars.iter().all(|var| &*var.name != "_#1"));
        assert!(frame.ops.iter().all(|op| &*op.label != "_#1"));
    }

    /// `del A` while A is still read, then a new `A`: the frame names the old one deleted, so
    /// two rows never both read `A`, and `why A` is about the new one.
    #[test]
    fn a_variable_whose_deletion_waits_is_named_deleted() {
        let engine = one_worker_engine();
        let old = engine.new_var("A");
        let (reader, open) = gated("B = work(A)");
        engine.push(reader.reads(&[old.clone()]));
        engine.delete_var(old, 3, || ());
        let new = engine.new_var("A");
        engine.push(engine::OpSpec::new("A = 7", || Ok(())).writes(&[new.clone()]));
        let frame = Frame::from_snapshot(&engine.snapshot(), &engine.worker_names());
        let _ = open.send(());
        engine.wait_all();
        let names: Vec<&str> = frame.vars.iter().map(|var| &*var.name).collect();
        assert!(names.contains(&"A (deleted)"), "{names:?}");
        assert_eq!(
            names.iter().filter(|name| **name == "A").count(),
            1,
            "{names:?}"
        );
    }

    /// A function's result (`return#1`) is shown, and the interpreter deletes it as soon as
    /// the call's ops are pushed: that deletion is bookkeeping, neither in its queue (where it
    /// was named `op3`) nor naming the live result "deleted".
    #[test]
    fn a_temporarys_own_deletion_is_neither_queued_nor_named() {
        let engine = one_worker_engine();
        let result = engine.new_var("return#1");
        let (writer, open) = gated("return work(1, x)");
        engine.push(writer.writes(std::slice::from_ref(&result)));
        engine
            .push(engine::OpSpec::new("a = f(a)", || Ok(())).reads(std::slice::from_ref(&result)));
        engine.delete_var(result, 2, || ());
        let frame = Frame::from_snapshot(&engine.snapshot(), &engine.worker_names());
        let _ = open.send(());
        engine.wait_all();
        let [var] = &frame.vars[..] else {
            panic!("{:?}", frame.vars);
        };
        assert_eq!(&*var.name, "return#1");
        assert_eq!(var.queue.len(), 2, "{:?}", var.queue);
        assert!(var.queue.iter().all(|access| frame.op(access.op).is_some()));
    }

    /// A write cancelled while it waits: the frame shows it cancelled, waiting for nothing, and
    /// `why` says the variable will not be written.
    #[test]
    fn why_a_variable_whose_write_was_cancelled_will_not_be_written() {
        let engine = one_worker_engine();
        let (a, b) = (engine.new_var("A"), engine.new_var("B"));
        let (writer, open) = gated("A = 1");
        engine.push(writer.writes(&[a.clone()]));
        engine.push(
            engine::OpSpec::new("B = A + 1", || Ok(()))
                .reads(&[a])
                .writes(&[b]),
        );
        let before = Frame::from_snapshot(&engine.snapshot(), &engine.worker_names());
        engine.cancel_pending();
        let after = Frame::from_snapshot(&engine.snapshot(), &engine.worker_names());
        let _ = open.send(());
        engine.wait_all();
        let b_op = |frame: &Frame| {
            let op = frame
                .ops
                .iter()
                .find(|op| &*op.label == "B = A + 1")
                .unwrap();
            (op.state, op.waits_on.len())
        };
        assert_eq!(b_op(&before), (OpState::Waiting, 1));
        assert_eq!(b_op(&after), (OpState::Cancelled, 0));
        assert!(before.why("B").unwrap().contains("which waits for A"));
        assert_eq!(
            after.why("B").unwrap(),
            "B will not be written: B = A + 1 was cancelled before it started, and B keeps what \
             the last write that ran left"
        );
    }
}
