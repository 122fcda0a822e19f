//! Asynchronous completion (MXNet's `PushAsync`): an op whose start function returns before the
//! op is finished, and which is completed later, from any thread, through an [`OpCompletion`].
//!
//! Architecture Invariant: an op may complete after its function returns; its accesses are
//! released, its successors made ready, its `Finished` event sent and its error stored only at
//! completion, exactly once, from whichever thread completes it. A handle dropped without
//! completing fails the op, so no wait hangs on a lost handle.
//!
//! A handle completed (or dropped) on the thread that runs its op's start function, before that
//! function returns, is not acted on at once: the engine finishes the op when the function
//! returns, as it would a synchronous op (and reports a panic of the function as the op's
//! error). The engine learns this through a thread-local frame set around the start function.

use std::cell::RefCell;
use std::fmt;

use crate::engine::Shared;
use crate::op::OpRef;
use crate::sync::{engine_thread_local, Arc};
use crate::OpId;

/// The message of an op whose handle was dropped without being completed.
pub(crate) const DROPPED: &str = "its completion handle was dropped without completing it";

/// The handle that finishes an asynchronous op (see [`crate::OpSpec::new_async`]). `Send`:
/// move it to whichever thread learns that the work is done.
pub struct OpCompletion {
    op: OpId,
    /// Taken by the first of `complete` and `drop`.
    target: Option<(Arc<Shared>, OpRef)>,
}

/// How a handle ended.
pub(crate) enum Ending {
    /// Completed with the op's result.
    Completed(Result<(), String>),
    /// Dropped without completing.
    Dropped,
}

/// An op of one engine: the engine's address and the op's number. Op numbers alone are not
/// enough: two engines in one process (ranks on threads) number their ops alike, and one's op
/// may complete the other's from inside its start function.
type EngineOp = (usize, OpId);

engine_thread_local! {
    /// The async op whose start function runs on this thread, and how its handle ended on this
    /// thread while the function ran.
    static STARTING: RefCell<Option<(EngineOp, Option<Ending>)>> = RefCell::new(None);
}

/// What [`enter`] replaced, for [`leave`] to put back (start functions nest under the naive
/// policy, when one pushes an op that runs at once).
pub(crate) struct Frame(Option<(EngineOp, Option<Ending>)>);

/// The address that tells `shared`'s engine from the others in this process.
fn engine_address(shared: &Shared) -> usize {
    shared as *const Shared as usize
}

/// Marks `op`'s start function, of the engine `shared`, as running on this thread.
pub(crate) fn enter(shared: &Shared, op: OpId) -> Frame {
    let key = (engine_address(shared), op);
    Frame(STARTING.with(|starting| starting.borrow_mut().replace((key, None))))
}

/// Ends the frame [`enter`] opened; returns how the op's handle ended on this thread while its
/// start function ran (`None`: the handle is still alive, elsewhere).
pub(crate) fn leave(previous: Frame) -> Option<Ending> {
    STARTING
        .with(|starting| std::mem::replace(&mut *starting.borrow_mut(), previous.0))
        .and_then(|(_, ending)| ending)
}

impl OpCompletion {
    pub(crate) fn new(shared: Arc<Shared>, op: OpRef) -> OpCompletion {
        OpCompletion {
            op: op.id,
            target: Some((shared, op)),
        }
    }

    /// The op this handle completes.
    pub fn op(&self) -> OpId {
        self.op
    }

    /// Finishes the op: `Ok(())` as done, `Err(message)` as failed (its written variables hold
    /// the error, later readers are skipped). Its accesses are released now, and the ops waiting
    /// for them become ready; under the naive and simulated policies they run on this thread,
    /// before this returns, and under the others the network ops among them start here (their
    /// start functions only post), unless an op queued before them runs first.
    pub fn complete(mut self, result: Result<(), String>) {
        if let Some((shared, op)) = self.target.take() {
            end(shared, op, Ending::Completed(result));
        }
    }
}

impl Drop for OpCompletion {
    fn drop(&mut self) {
        if let Some((shared, op)) = self.target.take() {
            end(shared, op, Ending::Dropped);
        }
    }
}

impl fmt::Debug for OpCompletion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpCompletion")
            .field("op", &self.op)
            .finish()
    }
}

/// Finishes `op` now, or leaves the ending to its start function when that runs on this thread.
fn end(shared: Arc<Shared>, op: OpRef, ending: Ending) {
    let mut ending = Some(ending);
    // An error means this thread's locals are being destroyed: it runs no start function.
    let key = (engine_address(&shared), op.id);
    let _ = STARTING.try_with(|starting| {
        if let Some((starting_key, slot @ None)) = &mut *starting.borrow_mut() {
            if *starting_key == key {
                *slot = ending.take();
            }
        }
    });
    if let Some(ending) = ending {
        shared.complete_async(&op, ending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_can_be_sent_to_another_thread() {
        fn send<T: Send + 'static>() {}
        send::<OpCompletion>();
    }
}
