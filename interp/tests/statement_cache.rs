//! Statements run again (in loops, in functions) are compiled once and pushed again while their
//! names keep their bindings. These programs change bindings under a loop in every way the
//! language allows; each must print what it would if every statement were compiled afresh.

use dep_engine::Policy;
use dep_interp::{Session, SessionConfig};

fn session(policy: Policy) -> Session {
    Session::new(SessionConfig {
        policy,
        threads: 2,
        ..SessionConfig::default()
    })
}

fn run_on(policy: Policy, source: &str) -> (String, Session) {
    let mut session = session(policy);
    let mut out = Vec::new();
    session
        .run_source("cache.dep", source, &mut out)
        .unwrap_or_else(|error| panic!("{error}\n{source}"));
    session
        .finish()
        .unwrap_or_else(|error| panic!("{error}\n{source}"));
    (String::from_utf8(out).unwrap(), session)
}

/// Runs `source` on the naive, threaded and simulated engines; each must print `expected`.
fn prints(source: &str, expected: &str) {
    for policy in [Policy::Naive, Policy::Threaded, Policy::Sim] {
        let (out, _) = run_on(policy, source);
        assert_eq!(out, expected, "{policy:?}:\n{source}");
    }
}

#[test]
fn a_parameter_assigned_in_a_loop_becomes_a_local_once() {
    // The first `x = x + 1` reads the caller's `a` and makes a local `x`; later ones read the
    // local. A statement kept with its first compilation would add 1 to `a` each time.
    prints(
        "def f(x) {\n  for i in 0..3 { x = x + 1 }\n  return x\n}\na = ones(2)\nb = f(a)\nprint a\nprint b\n",
        "[1. 1.]\n[4. 4.]\n",
    );
}

#[test]
fn a_deleted_name_assigned_again_is_a_new_variable() {
    prints(
        "c = ones(2)\nfor i in 0..3 {\n  t = c * 2\n  c = t + 1\n  del t\n}\nprint c\n",
        "[15. 15.]\n",
    );
    prints(
        "a = ones(2)\nfor i in 0..3 {\n  c = a * 2\n  b = c + 1\n  del c\n}\nprint b\n",
        "[3. 3.]\n",
    );
}

#[test]
fn a_function_body_serves_each_call_with_its_own_arguments() {
    prints(
        "def double(x) {\n  y = x * 2\n  return y\n}\na = ones(2)\nb = ones(2) * 3\nfor i in 0..2 {\n  p = double(a)\n  q = double(b)\n}\nprint p\nprint q\n",
        "[2. 2.]\n[6. 6.]\n",
    );
    // A parameter bound to a temporary belongs to the call: `x = x * 2` writes it without
    // binding anything, so only entering the call tells the kept statement apart.
    prints(
        "def g(x) {\n  x = x * 2\n  return x\n}\na = ones(2)\nb = ones(2) * 3\nfor i in 0..2 {\n  p = g(a + 0)\n  q = g(b + 0)\n}\nprint p\nprint q\n",
        "[2. 2.]\n[6. 6.]\n",
    );
}

#[test]
fn a_function_body_reads_a_global_as_it_is_bound_at_each_call() {
    // `return x + k` is kept from the first call into `a`, then checked at each call: `k` is
    // a new variable after `del k`.
    prints(
        "def f(x) {\n  return x + k\n}\na = zeros(2)\nk = ones(2)\nfor i in 0..3 {\n  a = f(a)\n  del k\n  k = ones(2) * 10\n}\nprint a\n",
        "[21. 21.]\n",
    );
}

#[test]
fn a_value_returned_into_the_callers_variable_goes_to_each_callers_own() {
    // Both calls read `c`; only where the value is returned to tells them apart.
    prints(
        "def f(x) {\n  return x + 1\n}\nc = ones(2)\na = zeros(2)\nb = zeros(2)\nfor i in 0..2 {\n  a = f(c)\n  b = f(c)\n  c = c * 3\n}\nprint a\nprint b\n",
        "[4. 4.]\n[4. 4.]\n",
    );
}

#[test]
fn an_entry_of_a_list_of_variables_is_found_again_after_the_list_is_made_again() {
    // `x[0]` names no variable by its own name: its statement is kept only until a binding
    // changes.
    prints(
        "x = slots(2)\nset(x, 0, ones(2))\nfor i in 0..2 {\n  b = x[0] + 1\n  del x\n  x = slots(2)\n  set(x, 0, ones(2) * 5)\n}\nprint b\n",
        "[6. 6.]\n",
    );
}

#[test]
fn loop_counters_and_indices_by_counter_are_read_on_every_iteration() {
    prints(
        "c = zeros(2)\nfor i in 0..4 { c = c + i }\nprint c\n",
        "[6. 6.]\n",
    );
    prints(
        "c = zeros(2)\nfor i in 0..4 { c += i }\nprint c\n",
        "[6. 6.]\n",
    );
    prints(
        "s = slots(3)\nfor i in 0..3 { set(s, i, ones(1) * i) }\nt = zeros(1)\nfor i in 0..3 { t = t + s[i] }\nprint t\n",
        "[3.]\n",
    );
}

#[test]
fn updates_in_place_repeat() {
    prints(
        "c = ones(2)\nfor i in 0..3 { c += c }\nprint c\n",
        "[8. 8.]\n",
    );
}

#[test]
fn a_repeated_statement_puts_its_result_where_it_runs() {
    // `y = y * 2` runs on the CPU after `y = x + 1` placed `y` on gpu0, on every iteration.
    let source = "x = ones(2)\nfor i in 0..2 {\n  with gpu0 { y = x + 1 }\n  y = y * 2\n}\n";
    let (_, session) = run_on(Policy::Sim, source);
    let y = session
        .variables()
        .into_iter()
        .find(|variable| variable.name == "y")
        .expect("y is defined");
    assert_eq!(y.device, "cpu");
}

#[test]
fn a_repeated_statement_gets_the_priority_of_its_block() {
    // Under the simulated engine, `priority` orders ready ops: the same statement pushed under
    // two priorities must carry each. A kept op would keep the first.
    let source = "a = ones(1)\nfor i in 0..2 {\n  with priority = i * 5 { b = a + 1 }\n}\n";
    let mut session = Session::new(SessionConfig {
        policy: Policy::Sim,
        observe: true,
        ..SessionConfig::default()
    });
    let mut out = Vec::new();
    session.run_source("cache.dep", source, &mut out).unwrap();
    session.finish().unwrap();
    let log = session.event_log().expect("observed").clone();
    let priorities: Vec<i32> = log
        .events()
        .iter()
        .filter_map(|event| match &event.kind {
            dep_engine::EventKind::Pushed {
                label, priority, ..
            } if label.starts_with("b = a + 1") => Some(*priority),
            _ => None,
        })
        .collect();
    assert_eq!(priorities, vec![0, 5]);
}

#[test]
fn a_loop_counter_follows_every_rebinding_of_its_name() {
    // A loop sets its counter's next value without looking the name up while nothing was bound
    // since; each of these rebinds the name between iterations, so the loop must bind again.
    // An inner loop over the same name rebinds it (a loop makes no scope of its own).
    prints(
        "for i in 0..3 { print i\n for i in 10..12 { print i } }",
        "0\n10\n11\n1\n10\n11\n2\n10\n11\n",
    );
    prints(
        "for i in 0..2 { for i in 10..12 { print i }\n print i }",
        "10\n11\n11\n10\n11\n11\n",
    );
    prints("for i in 0..3 { print i\n del i }", "0\n1\n2\n");
    prints(
        "def show(k) { print k }\nfor i in 0..3 { show(i)\n print i }",
        "0\n0\n1\n1\n2\n2\n",
    );
}

#[test]
fn a_function_body_called_with_one_variable_for_two_parameters_reads_it_for_both() {
    // A call's body is pushed again over the variables its names resolve to at that call:
    // `p * q` compiled for two variables must not serve `f(a, a)`, nor the reverse.
    prints(
        "def f(p, q) {\n  t = p * q\n  return t + p\n}\na = ones(2) * 2\nb = ones(2) * 3\nfor i in 0..2 {\n  x = f(a, b)\n  y = f(a, a)\n  z = f(b, a)\n}\nprint x\nprint y\nprint z\n",
        "[8. 8.]\n[6. 6.]\n[9. 9.]\n",
    );
}

#[test]
fn an_update_of_a_parameter_the_call_does_not_own_makes_a_local() {
    // `x += 1` on a temporary argument updates it in place; on the caller's `a` it makes a
    // local, and `a` stays as it was.
    prints(
        "def h(x) {\n  x += 1\n  return x\n}\na = ones(2)\nfor i in 0..2 {\n  p = h(a + 0)\n  q = h(a)\n}\nprint a\nprint p\nprint q\n",
        "[1. 1.]\n[2. 2.]\n[2. 2.]\n",
    );
}

#[test]
fn a_function_body_with_locals_computes_each_call_into_its_own() {
    // Each call's `y` is a new variable; the body kept from the call before writes the new one.
    prints(
        "def f(x) {\n  y = x * 2\n  z = y + x\n  return z - 1\n}\na = ones(2)\nfor i in 0..3 {\n  a = f(a)\n  b = f(a)\n}\nprint a\nprint b\n",
        "[14. 14.]\n[41. 41.]\n",
    );
}

#[test]
fn a_value_returned_into_a_variable_it_reads_twice_reads_it_whole() {
    // `return x * a` kept from `b = f(c)` (two inputs) serves `a = f(a)`, whose one variable is
    // both inputs and the output it overwrites: the op compiled afresh reads it once.
    prints(
        "def f(x) {\n  return x * a\n}\na = ones(2) * 3\nb = zeros(2)\nc = ones(2) * 2\nfor i in 0..2 {\n  b = f(c)\n  a = f(a)\n}\nprint a\nprint b\n",
        "[81. 81.]\n[18. 18.]\n",
    );
}
