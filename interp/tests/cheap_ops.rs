//! Which ops the threaded engines run on the pushing thread: a cheap op (one elementwise
//! operator over at most 1,024 elements, see `ComputeOp::is_cheap_now`) that is ready at its
//! push runs there, as the naive engine runs every op; every other op goes to a worker. The
//! event log says where each op started (worker 0 is the pushing thread, `main`). The scripts
//! `wait` for their inputs first: an op behind one that has not ended is not ready at its push.

use std::collections::HashMap;

use dep_engine::{EventKind, Policy, CALLER_WORKER};
use dep_interp::{Session, SessionConfig};

/// Runs `source` observed on `policy` with 2 CPU workers; returns the worker each op started
/// on, by label (the last op of each label), and what it printed.
fn workers_by_label(policy: Policy, source: &str) -> (HashMap<String, u32>, String) {
    let mut session = Session::new(SessionConfig {
        policy,
        threads: 2,
        observe: true,
        ..SessionConfig::default()
    });
    let mut out = Vec::new();
    session
        .run_source("cheap.dep", source, &mut out)
        .unwrap_or_else(|error| panic!("{error}"));
    session.finish().unwrap_or_else(|error| panic!("{error}"));
    let mut labels = HashMap::new();
    let mut workers = HashMap::new();
    for event in session.event_log().expect("observed").events() {
        match event.kind {
            EventKind::Pushed { op, label, .. } => {
                labels.insert(op, label.to_string());
            }
            EventKind::Started { op, worker } => {
                workers.insert(labels[&op].clone(), worker);
            }
            _ => {}
        }
    }
    (workers, String::from_utf8(out).unwrap())
}

const SOURCE: &str = "b = ones(4)
c = ones(4)
d = ones(2000)
g = ones(32, 1)
h = ones(1, 32)
wait
c = c + b
x = -c
r = relu(x)
e = d + 1
f = g + h
m = ones(4, 4) @ ones(4, 4)
s = work(30, c)
t = s + 1
print t[0], e[0], f[0, 0], x[0], m[0, 0], r[0]
";

#[test]
fn the_threaded_engines_run_a_cheap_ready_op_where_it_is_pushed() {
    for policy in [Policy::Threaded, Policy::PerDevice] {
        let (workers, out) = workers_by_label(policy, SOURCE);
        let on = |label: &str| {
            *workers
                .get(label)
                .unwrap_or_else(|| panic!("{policy:?}: no `{label}` in {workers:?}"))
        };
        assert_eq!(out, "3 2 2 -2 4 0\n", "{policy:?}");
        // Cheap and ready at once: on the pushing thread.
        for label in ["c = c + b", "x = -c", "r = relu(x)"] {
            assert_eq!(on(label), CALLER_WORKER, "{policy:?}: {label}");
        }
        // Too large, growing by broadcasting, more than one operator, or behind an op that
        // has not ended: on a worker.
        for label in [
            "e = d + 1",
            "f = g + h",
            "m = ones(4, 4) @ ones(4, 4)",
            "s = work(30, c)",
            "t = s + 1",
        ] {
            assert_ne!(on(label), CALLER_WORKER, "{policy:?}: {label}");
        }
    }
}

/// The naive engine runs every op where it is pushed, cheap or not; the simulated one leaves
/// every op to its simulated workers.
#[test]
fn cheapness_changes_nothing_on_the_naive_and_simulated_engines() {
    let (naive, naive_out) = workers_by_label(Policy::Naive, SOURCE);
    assert!(
        naive.values().all(|worker| *worker == CALLER_WORKER),
        "{naive:?}"
    );
    let (_, threaded_out) = workers_by_label(Policy::Threaded, SOURCE);
    assert_eq!(naive_out, threaded_out);
}

/// A recorded graph of cheap ops replays where it is pushed, as one batch; with a large
/// input it replays on the workers. Either way it computes the same values.
#[test]
fn a_graph_of_cheap_ops_replays_where_it_is_pushed() {
    let graph = |n: usize| {
        format!(
            "a = ones({n})
b = ones({n})
wait
graph step {{
  t = a + b
  a = t * 0.5
}}
for i in 0..3 {{ run step }}
print a[0]
"
        )
    };
    for (n, here) in [(4, true), (4000, false)] {
        let (workers, out) = workers_by_label(Policy::Threaded, &graph(n));
        assert_eq!(out, "1.0\n", "{n}: {out}");
        for label in ["t = a + b", "a = t * 0.5"] {
            let worker = workers[label];
            assert_eq!(
                worker == CALLER_WORKER,
                here,
                "{n} elements: {label} on {worker}"
            );
        }
    }
}
