//! The interpreter's bounded lead over the workers: before it pushes, it waits while too many
//! ops are pushed and unfinished, so a loop of ten million statements holds the ops (and the
//! values they keep alive) of a few thousand, not of all of them. When a reader streams the
//! event log (`dep run`'s views), it also waits while the log holds too many events that reader
//! has not read, so observing a long run takes memory that does not grow with it either.
//!
//! Waiting here never deadlocks: an op depends only on ops pushed before it, so every pending
//! op can finish without the interpreter. Under the naive and simulated policies an op finishes
//! inside its push, so the count never reaches the limit. A log reader that stops reading for a
//! second is no longer waited for.

use std::time::{Duration, Instant};

use dep_engine as engine;

/// How many unfinished ops make the interpreter wait before its next push. The wait lasts
/// until every op has ended: a cheap op pushed next then finds its variables free and runs where
/// it is pushed (see `engine::OpBody::is_cheap`), and so does every one after it that the
/// workers do not hold back. Resumed with ops still queued, a loop of cheap ops (`c = c + b`)
/// would queue each behind the one before for ever, every op paying a hand-over to a worker
/// where the interpreter could run it for less. The workers idle only while the interpreter
/// pushes its first op again (at most [`LOOK_PERIOD`] late).
pub(crate) const MAX_UNFINISHED: usize = 4096;
/// How many unread events of a streamed log make the interpreter wait (a few megabytes).
const MAX_UNREAD: u64 = 1 << 16;
/// How long a log reader may read nothing before the interpreter stops waiting for it.
const READER_PATIENCE: Duration = Duration::from_secs(1);
/// How long the interpreter sleeps between two looks.
const LOOK_PERIOD: Duration = Duration::from_micros(100);

/// Waits, if the engine has [`MAX_UNFINISHED`] ops unfinished, until every op has ended; then,
/// if `log` is streamed and holds [`MAX_UNREAD`] unread events, until its reader has read half
/// of them. `interrupted` is asked at each look: when the user interrupts, the
/// pending ops are cancelled (they then finish at once) and the wait ends; the interrupted
/// statement stops the run at its next check.
pub(crate) fn wait_for_room(
    engine: &engine::Engine,
    log: Option<&engine::EventLog>,
    interrupted: &dyn Fn() -> bool,
) {
    if engine.n_unfinished() >= MAX_UNFINISHED {
        while engine.n_unfinished() > 0 {
            if interrupted() {
                engine.cancel_pending();
                return;
            }
            std::thread::sleep(LOOK_PERIOD);
        }
    }
    let Some(log) = log else { return };
    let mut unread = log.unread();
    if unread < MAX_UNREAD {
        return;
    }
    let mut last_progress = Instant::now();
    while unread > MAX_UNREAD / 2 && last_progress.elapsed() < READER_PATIENCE {
        if interrupted() {
            return;
        }
        std::thread::sleep(LOOK_PERIOD);
        let now_unread = log.unread();
        if now_unread < unread {
            last_progress = Instant::now();
        }
        unread = now_unread;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    fn engine(policy: engine::Policy) -> engine::Engine {
        engine::Engine::new(engine::EngineConfig {
            policy,
            threads: 2,
            ..engine::EngineConfig::default()
        })
    }

    #[test]
    fn the_interpreter_never_leads_by_more_than_the_limit() {
        let engine = engine(engine::Policy::Threaded);
        let vars: Vec<engine::Var> = (0..4)
            .map(|index| engine.new_var(format!("v{index}")))
            .collect();
        let most_pending = Arc::new(AtomicUsize::new(0));
        for index in 0..3 * MAX_UNFINISHED {
            wait_for_room(&engine, None, &|| false);
            most_pending.fetch_max(engine.n_unfinished(), Ordering::Relaxed);
            let var = vars[index % vars.len()].clone();
            engine.push(
                engine::OpSpec::new("slow", || {
                    std::thread::sleep(Duration::from_micros(5));
                    Ok(())
                })
                .writes(&[var]),
            );
        }
        engine.wait_all();
        let most = most_pending.load(Ordering::Relaxed);
        assert!(most < MAX_UNFINISHED, "{most} ops pending before a push");
        assert!(most >= MAX_UNFINISHED / 2, "the limit was reached: {most}");
    }

    /// Once the lead reached its limit, the interpreter waits until every op has ended, so that
    /// a cheap op pushed next finds its variables free.
    #[test]
    fn a_wait_for_room_lasts_until_every_op_has_ended() {
        let engine = engine(engine::Policy::Threaded);
        let var = engine.new_var("v");
        // One op that holds the variable for a while, and the rest of the limit queued behind.
        engine.push(
            engine::OpSpec::new("hold", || {
                std::thread::sleep(Duration::from_millis(20));
                Ok(())
            })
            .writes(&[var.clone()]),
        );
        for _ in 1..MAX_UNFINISHED {
            engine.push(engine::OpSpec::new("queued", || Ok(())).writes(&[var.clone()]));
        }
        wait_for_room(&engine, None, &|| false);
        assert_eq!(engine.n_unfinished(), 0);
        assert_eq!(var.version(), MAX_UNFINISHED as u64);
    }

    #[test]
    fn an_interrupt_ends_the_wait_and_cancels_what_is_pending() {
        let engine = engine(engine::Policy::Threaded);
        let var = engine.new_var("v");
        let release = Arc::new(AtomicBool::new(false));
        // One op that holds the variable until released, and many queued behind it.
        let (hold, started) = (release.clone(), Arc::new(AtomicBool::new(false)));
        let starts = started.clone();
        engine.push(
            engine::OpSpec::new("hold", move || {
                starts.store(true, Ordering::Release);
                while !hold.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(())
            })
            .writes(&[var.clone()]),
        );
        for _ in 0..MAX_UNFINISHED {
            engine.push(engine::OpSpec::new("queued", || Ok(())).writes(&[var.clone()]));
        }
        // Started before the interrupt, which would cancel it too otherwise (a busy machine).
        while !started.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let asked = AtomicUsize::new(0);
        wait_for_room(&engine, None, &|| {
            asked.fetch_add(1, Ordering::Relaxed) >= 3
        });
        assert!(asked.load(Ordering::Relaxed) >= 4);
        release.store(true, Ordering::Release);
        engine.wait_all();
        // The queued writes were cancelled: they wrote nothing after the one that held it.
        assert!(var.error().is_none());
        assert_eq!(var.version(), 1);
    }

    #[test]
    fn naive_and_simulated_runs_never_wait() {
        for policy in [engine::Policy::Naive, engine::Policy::Sim] {
            let engine = engine(policy);
            let var = engine.new_var("v");
            for _ in 0..2 * MAX_UNFINISHED {
                wait_for_room(&engine, None, &|| panic!("{policy:?} waited"));
                engine.push(engine::OpSpec::new("op", || Ok(())).writes(&[var.clone()]));
            }
            assert_eq!(engine.n_unfinished(), 0);
        }
    }

    #[test]
    fn a_streamed_log_is_waited_for_only_while_its_reader_reads() {
        let engine = engine(engine::Policy::Naive);
        let log = engine::EventLog::new();
        let event = |index: u64| engine::Event {
            time_ns: index,
            kind: engine::EventKind::Ready {
                op: engine::OpId(index),
            },
        };
        use engine::EventSink;
        for index in 0..2 * MAX_UNREAD {
            log.event(event(index));
        }
        // Nobody streams it: no wait.
        let start = Instant::now();
        wait_for_room(&engine, Some(&log), &|| false);
        assert!(start.elapsed() < READER_PATIENCE / 2);
        // A reader that read some, then stopped: the wait gives up after its patience.
        log.forget_before(MAX_UNREAD / 4);
        let start = Instant::now();
        wait_for_room(&engine, Some(&log), &|| false);
        assert!(start.elapsed() >= READER_PATIENCE);
        // A reader that keeps reading: the wait ends once half is read.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for seq in (MAX_UNREAD / 4..2 * MAX_UNREAD).step_by(1024) {
                    log.forget_before(seq);
                    std::thread::sleep(Duration::from_micros(200));
                }
            });
            wait_for_room(&engine, Some(&log), &|| false);
            assert!(log.unread() <= MAX_UNREAD / 2);
        });
    }
}
