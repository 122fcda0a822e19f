//! Waits that the caller abandons (`wait_var_or`, `wait_all_or`): the caller stops waiting, the
//! op goes on and its result is there for a later wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use dep_engine::{Engine, EngineConfig, OpSpec, Policy};

#[test]
fn an_abandoned_wait_returns_while_the_op_runs_and_a_later_wait_sees_its_end() {
    let engine = Engine::new(EngineConfig {
        policy: Policy::Threaded,
        threads: 2,
        ..EngineConfig::default()
    });
    let var = engine.new_var("a");
    let (release, released) = mpsc::channel::<()>();
    let finished = Arc::new(AtomicBool::new(false));
    let done = finished.clone();
    engine.push(
        OpSpec::new("slow", move || {
            released.recv().map_err(|error| error.to_string())?;
            done.store(true, Ordering::SeqCst);
            Ok(())
        })
        .writes(&[var.clone()]),
    );
    let asked = Arc::new(AtomicBool::new(false));
    let give_up = {
        let asked = asked.clone();
        move || {
            // Gives up the second time it is asked: the wait did block once.
            asked.swap(true, Ordering::SeqCst)
        }
    };
    assert!(engine.wait_var_or(&var, 0, &give_up).is_none());
    assert!(!engine.wait_all_or(&|| true));
    assert!(!finished.load(Ordering::SeqCst), "the op still runs");
    release.send(()).unwrap();
    assert!(matches!(
        engine.wait_var_or(&var, 0, &|| false),
        Some(Ok(()))
    ));
    assert!(engine.wait_all_or(&|| false));
    assert!(finished.load(Ordering::SeqCst));
}

/// Under the simulated policy a wait first waits for every op pushed before it to end (the
/// virtual clock needs them all): an earlier communication that waits for a peer that never
/// comes must not hold a wait for something else past the caller's giving up.
#[test]
fn a_simulated_wait_behind_an_op_that_never_ends_can_be_abandoned() {
    let engine = Engine::new(EngineConfig {
        policy: Policy::Sim,
        threads: 1,
        ..EngineConfig::default()
    });
    let (message, other) = (engine.new_var("x"), engine.new_var("y"));
    let (hand_over, completion) = mpsc::channel();
    engine.push(
        OpSpec::new_async("x = recv(1, 2)", move |_, done| {
            hand_over.send(done).unwrap();
        })
        .writes(&[message.clone()]),
    );
    engine.push(OpSpec::new("y = 7", || Ok(())).writes(&[other.clone()]));
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let give_up = {
        let asked = asked.clone();
        move || asked.fetch_add(1, Ordering::SeqCst) >= 3
    };
    assert!(engine.wait_var_or(&other, 0, &give_up).is_none());
    // The communication ends: the wait, asked again, sees y.
    let done: dep_engine::OpCompletion = completion.recv().unwrap();
    done.complete(Ok(()));
    assert!(matches!(
        engine.wait_var_or(&other, 0, &|| false),
        Some(Ok(()))
    ));
}
