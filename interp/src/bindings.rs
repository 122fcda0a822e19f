//! What a name is bound to (a tensor variable, a loop counter, a list of variables) and what a
//! `def` defines: the data the session keeps between inputs and the runner reads and binds.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use dep_grammar as grammar;

use crate::slot::Slot;

/// What a name is bound to.
#[derive(Clone)]
pub(crate) enum Binding {
    /// A tensor variable.
    Tensor(Arc<Slot>),
    /// A loop counter: a host integer, constant within one iteration.
    Counter(LoopCounter),
    /// `x = slots(n)`: n separate variables under one name, read as `x[i]` and written with
    /// `set(x, i, value)` for a host integer `i`; ops on different ones are independent.
    Slots(Arc<Vec<Arc<Slot>>>),
}

/// A loop counter's value, shared by its binding and the loop that advances it, so that the
/// loop sets the next value without looking the name up again (see `Runner::exec_for`).
#[derive(Clone)]
pub(crate) struct LoopCounter(Arc<CounterState>);

/// A loop counter's value, and whether its loop still runs.
struct CounterState {
    value: AtomicI64,
    /// Cleared when its loop ends: the name keeps the last value, and may be assigned anew.
    looping: AtomicBool,
}

impl LoopCounter {
    /// A counter holding `value`, for a loop that runs.
    pub(crate) fn new(value: i64) -> LoopCounter {
        LoopCounter(Arc::new(CounterState {
            value: AtomicI64::new(value),
            looping: AtomicBool::new(true),
        }))
    }

    /// Its value now.
    pub(crate) fn get(&self) -> i64 {
        self.0.value.load(Ordering::Relaxed)
    }

    /// Moves it to the next iteration's value.
    pub(crate) fn set(&self, value: i64) {
        self.0.value.store(value, Ordering::Relaxed);
    }

    /// Whether its loop still runs (an assignment to its name is then an error).
    pub(crate) fn is_looping(&self) -> bool {
        self.0.looping.load(Ordering::Relaxed)
    }

    /// Marks its loop ended.
    pub(crate) fn end_loop(&self) {
        self.0.looping.store(false, Ordering::Relaxed);
    }
}

/// A user-defined function.
pub(crate) struct Function {
    /// Its name, shared with every report of a failure in one of its calls.
    pub(crate) name: Arc<str>,
    /// Its parameters' names, shared with every call's frame of locals.
    pub(crate) params: Vec<Arc<str>>,
    pub(crate) body: grammar::Block,
    /// The session source chunk the body's spans point into.
    pub(crate) source_index: usize,
    /// Where its `def` statement starts in that chunk, for `why` of its name.
    pub(crate) def_offset: usize,
}
