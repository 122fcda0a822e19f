//! The communication statements run by sessions: one rank alone, and ranks on threads of this
//! process.

use std::sync::Arc;
use std::time::Duration;

use super::{Communicator, LocalRanks};
use crate::{Session, SessionConfig};

/// Runs `source` on a session of `comm`'s rank; its output, or the rendered error.
fn run_rank(source: &str, comm: Arc<dyn Communicator>) -> Result<String, String> {
    let mut session = Session::new(SessionConfig::default());
    session.set_communicator(comm);
    let mut out = Vec::new();
    let ran = session.run_source("ranks.dep", source, &mut out);
    let finished = session.finish();
    ran.and(finished).map_err(|error| error.to_string())?;
    Ok(String::from_utf8(out).expect("utf-8 output"))
}

/// Runs `source` on `n` ranks, each on its own thread; every rank's outcome, rank 0 first.
fn run_ranks(source: &str, n: usize, timeout: Duration) -> Vec<Result<String, String>> {
    let handles: Vec<_> = LocalRanks::group(n, timeout)
        .into_iter()
        .map(|comm| {
            let source = source.to_string();
            std::thread::spawn(move || run_rank(&source, comm))
        })
        .collect();
    handles
        .into_iter()
        .map(|handle| handle.join().expect("a rank's thread"))
        .collect()
}

#[test]
fn one_rank_alone_reduces_to_itself_and_sends_to_itself() {
    let out = run_rank(
        "x = [1, 2]\nx = allreduce(x)\ny = allreduce(x * 2)\nbroadcast(y, 0)\nsend(x + 1, 0)\nz = recv(0, 2)\nwith rank = 0 { print rank(), ranks() }\nprint x, y, z",
        LocalRanks::solo(),
    )
    .unwrap();
    assert_eq!(out, "0 1\n[1. 2.] [2. 4.] [2. 3.]\n");
}

#[test]
fn ranks_exchange_values_as_the_statements_say() {
    let script = "\
x = ones(2) * (rank() + 1)
s = allreduce(x)
b = rank() * 10 + [1, 2]
broadcast(b, 1)
with rank = 0 { send(x * 5, 1) }
with rank = 1 { r = recv(0, 2) ; print r }
for i in 0..ranks() { with rank = i { print rank(), s, b } }
";
    let outcomes = run_ranks(script, 2, Duration::from_secs(10));
    assert_eq!(outcomes[0], Ok("0 [3. 3.] [11. 12.]\n".to_string()));
    assert_eq!(
        outcomes[1],
        Ok("[5. 5.]\n1 [3. 3.] [11. 12.]\n".to_string())
    );
}

#[test]
fn collectives_match_in_push_order_whatever_order_they_become_ready_in() {
    // On rank 0 the first allreduce waits behind slow work, so the second is ready first.
    let script = "\
a = ones(3) * (rank() + 1)
with rank = 0 { a = work(50, a) }
b = ones(2) * 10
a = allreduce(a)
b = allreduce(b)
print a, b
";
    let outcomes = run_ranks(script, 2, Duration::from_secs(10));
    assert_eq!(outcomes[0], Ok("[3. 3. 3.] [20. 20.]\n".to_string()));
}

#[test]
fn a_receive_with_no_sender_fails_at_its_statement_after_the_timeout() {
    let comm = LocalRanks::group(2, Duration::from_millis(200)).remove(1);
    let error = run_rank("x = ones(2)\ny = recv(0, 2)\nprint y", comm).unwrap_err();
    assert!(error.contains("recv: rank 1 waited"), "{error}");
    assert!(error.contains("for rank 0"), "{error}");
    assert!(error.contains("ranks.dep:2:1"), "{error}");
}

#[test]
fn misuses_are_statement_errors_with_their_place() {
    let comm = || LocalRanks::solo() as Arc<dyn Communicator>;
    let error = run_rank("x = ones(2)\nsend(x, 3)", comm()).unwrap_err();
    assert!(
        error.contains("rank 3 is not a rank of this job: it has 1 rank (0 to 0)"),
        "{error}"
    );
    assert!(error.contains("ranks.dep:2:9"), "{error}");
    let error = run_rank("x = ones(2)\ny = allreduce(x) + 1", comm()).unwrap_err();
    assert!(
        error.contains("allreduce is a statement of its own"),
        "{error}"
    );
    let error = run_rank("x = ones(2)\nallreduce(x)", comm()).unwrap_err();
    assert!(
        error.contains("assign it, as in x = allreduce(x)"),
        "{error}"
    );
    let error = run_rank("with rank = 2 { x = 1 }", comm()).unwrap_err();
    assert!(error.contains("rank 2 is not a rank"), "{error}");
    let error = run_rank("x = recv(0, 2)\nz = ones(2)\nsend(z, 0)", comm());
    assert!(
        error.is_ok(),
        "a receive waits for the later send: {error:?}"
    );
    let error = run_rank("z = ones(3)\nsend(z, 0)\nx = recv(0, 2)\nprint x", comm()).unwrap_err();
    assert!(
        error.contains("rank 0 sent 3 values, but shape [2] holds 2"),
        "{error}"
    );
}

#[test]
fn a_recorded_graph_posts_fresh_communications_on_every_replay() {
    // Between the two replays, an allreduce of its own: every rank numbers it, and each
    // replay's communications, alike, so that they match.
    let script = "\
x = ones(2) * (rank() + 1)
total = zeros(2)
graph step {
  s = allreduce(x)
  total = total + s
  with rank = 0 { send(total, 1) }
  with rank = 1 { r = recv(0, 2) ; total = total + r }
}
run step
y = allreduce(x * 10)
run step
with bulk = 4 { run step }
print total, y
print step
";
    let outcomes = run_ranks(script, 2, Duration::from_secs(10));
    let rank0 = outcomes[0].as_ref().unwrap();
    assert!(rank0.starts_with("[9. 9.] [30. 30.]\n"), "{rank0}");
    assert!(rank0.contains("graph step: 3 ops"), "{rank0}");
    let rank1 = outcomes[1].as_ref().unwrap();
    assert!(rank1.starts_with("[27. 27.] [30. 30.]\n"), "{rank1}");
    assert!(rank1.contains("graph step: 4 ops"), "{rank1}");
}

#[test]
fn priority_auto_records_communications_and_pushes_them_once() {
    let script = "\
x = ones(3) * (rank() + 1)
priority auto {
  a = allreduce(x)
  b = a * 2
  with rank = 0 { send(b, 1) }
  with rank = 1 { c = recv(0, 3) }
}
s = allreduce(b)
with rank = 1 { print c }
with rank = 0 { print a, s }
";
    let outcomes = run_ranks(script, 2, Duration::from_secs(10));
    assert_eq!(outcomes[0], Ok("[3. 3. 3.] [12. 12. 12.]\n".to_string()));
    assert_eq!(outcomes[1], Ok("[6. 6. 6.]\n".to_string()));
}
