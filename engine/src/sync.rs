//! The engine's one source of synchronisation primitives.
//!
//! Engine code never names `std::sync` or `std::thread` directly: under `--cfg loom` the
//! mutexes, condition variables, atomics, threads and one-time cells are loom's model-checked
//! versions, so the real push, completion and wait paths are explored under every interleaving
//! (see `loom_tests`).
//!
//! What stays `std` under loom, on purpose:
//! - `Arc` and `Weak`: reference counting is not part of the protocol (no decision reads a
//!   count), and loom's `Arc` has no unsized coercion (`Arc<dyn EventSink>`) nor `Weak`;
//! - [`stats`]: counters no decision reads (the memory meter), which must stay `const`-built;
//! - the simulator's and the device clock's thread-locals (`sim.rs`, `device_time.rs`): the
//!   model runs neither. The engine's own thread-locals use [`engine_thread_local`], loom's under the
//!   model, where every model thread runs on one OS thread.

pub(crate) use std::sync::{Arc, Weak};

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard, OnceLock,
};

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard,
};

#[cfg(loom)]
pub(crate) use loom_once::OnceLock;

/// `thread_local!` for one `static` with a `const` initialiser: `std`'s, or loom's under the
/// model (whose macro takes no `const` block).
macro_rules! engine_thread_local {
    ($(#[$attr:meta])* static $name:ident: $t:ty = $init:expr;) => {
        #[cfg(not(loom))]
        std::thread_local!($(#[$attr])* static $name: $t = const { $init });
        #[cfg(loom)]
        loom::thread_local!($(#[$attr])* static $name: $t = $init);
    };
}
pub(crate) use engine_thread_local;

/// Threads: `std::thread`, or loom's under the model.
pub(crate) mod thread {
    #[cfg(loom)]
    pub(crate) use loom::thread::{Builder, JoinHandle};
    #[cfg(not(loom))]
    pub(crate) use std::thread::{Builder, JoinHandle};
}

/// Statistics counters: plain `std` atomics in every build (see the module comment).
pub(crate) mod stats {
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
}

/// Locks a mutex, ignoring poisoning: engine state is only mutated by engine code, which never
/// panics while holding a lock (user closures run outside every lock, under `catch_unwind`).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// A lock held only for short work that cannot panic (an event log's shard: an append, or a
/// reader copying a batch out): a spin lock whose release is a plain store. A `Mutex`'s release
/// is an atomic swap, which on x86 first waits for every write made under the lock to leave
/// the core (`perf` put half of `EventLog::ran_at_once`'s samples on it), and wakes a waiter
/// through the kernel. A thread that finds it held spins a while, then yields until it is free
/// ([`lock_short`]). Under loom, a model-checked `Mutex`.
#[cfg(not(loom))]
pub(crate) type ShortLock<T> = spin::mutex::SpinMutex<T, spin::relax::Yield>;
#[cfg(loom)]
pub(crate) type ShortLock<T> = Mutex<T>;

/// What holds a [`ShortLock`].
#[cfg(not(loom))]
pub(crate) type ShortGuard<'a, T> = spin::mutex::SpinMutexGuard<'a, T, spin::relax::Yield>;
#[cfg(loom)]
pub(crate) type ShortGuard<'a, T> = MutexGuard<'a, T>;

/// Takes a [`ShortLock`]: held by another thread, it is waited for spinning a while (its
/// holder, on another core, lets go within a microsecond or two), then yielding.
pub(crate) fn lock_short<T>(short: &ShortLock<T>) -> ShortGuard<'_, T> {
    #[cfg(not(loom))]
    {
        for _ in 0..SHORT_SPINS {
            if !short.is_locked() {
                if let Some(guard) = short.try_lock() {
                    return guard;
                }
            }
            std::hint::spin_loop();
        }
        short.lock()
    }
    #[cfg(loom)]
    return lock(short);
}

/// How many times [`lock_short`] looks at a held lock, with a spin-loop hint between looks
/// (some microseconds in all), before it yields between tries: a holder that was preempted
/// gets the core back.
#[cfg(not(loom))]
const SHORT_SPINS: usize = 128;

/// Waits on `condvar`, ignoring poisoning (see [`lock`]).
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    match condvar.wait(guard) {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Waits on `condvar` for at most `timeout` (under loom: until notified, as loom has no
/// clock), ignoring poisoning (see [`lock`]).
pub(crate) fn wait_timeout<'a, T>(
    condvar: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: std::time::Duration,
) -> MutexGuard<'a, T> {
    match condvar.wait_timeout(guard, timeout) {
        Ok((guard, _)) => guard,
        Err(poisoned) => poisoned.into_inner().0,
    }
}

#[cfg(loom)]
mod loom_once {
    //! A one-time cell the model can see: loom has no `OnceLock`, and `std`'s blocks a second
    //! initialiser on a real futex, which would stall loom's scheduler (all model threads run on
    //! one OS thread) while the first initialiser waits at a model lock.

    use super::{lock, AtomicBool, Mutex, Ordering};

    /// `std::sync::OnceLock` for the cases the engine uses, initialised under a model mutex and
    /// published through a model atomic.
    pub(crate) struct OnceLock<T> {
        init: Mutex<()>,
        done: AtomicBool,
        cell: std::sync::OnceLock<T>,
    }

    impl<T> OnceLock<T> {
        pub(crate) fn new() -> Self {
            OnceLock {
                init: Mutex::new(()),
                done: AtomicBool::new(false),
                cell: std::sync::OnceLock::new(),
            }
        }

        pub(crate) fn get(&self) -> Option<&T> {
            if self.done.load(Ordering::Acquire) {
                self.cell.get()
            } else {
                None
            }
        }

        pub(crate) fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
            if let Some(value) = self.get() {
                return value;
            }
            let _guard = lock(&self.init);
            let value = self.cell.get_or_init(init);
            self.done.store(true, Ordering::Release);
            value
        }
    }
}
