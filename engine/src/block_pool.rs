//! Finished op blocks kept for the next pushes (MXNet's `ObjectPool`), handed back from the
//! threads that finish ops to the threads that push them.
//!
//! Under the threaded policies a block is filled on the pushing thread and finished on a
//! worker, which never pushes. Freed there, every push would allocate and every finish free
//! across threads; kept there, no push would reuse it. So each thread keeps the blocks it
//! finishes in a list of its own, a full list goes to its engine's exchange, and a pushing thread
//! whose list is empty takes the exchange's whole list.
//!
//! A block reused for an op of the same statement keeps its label, access set and shared body
//! (compared by address, see [`OpBlock::refill`]): such a push writes no reference count that a
//! worker reads. On a machine of many cores each such write pulls a cache line from another
//! core (`perf` of `c = c + b` on a 16-core machine: cloning the label, body and access set was
//! about a tenth of the pushing thread's samples, and blocks allocated on one thread and freed
//! on the other a few percent more).

use std::cell::RefCell;

use crossbeam_utils::CachePadded;

use crate::op::{NewWork, OpBlock, OpHeader, OpRef};
use crate::sync::{engine_thread_local, lock, Arc, Mutex};

/// How many finished blocks a thread gathers before it hands them to the exchange.
const BATCH: usize = 32;

/// The most blocks the exchange holds; a fuller batch is freed where it was gathered.
const MAX_EXCHANGED: usize = 256;

engine_thread_local! {
    /// The finished blocks this thread keeps: reused by its next pushes, or handed over.
    static SPARE: RefCell<Vec<Arc<OpBlock>>> = RefCell::new(Vec::new());
}

/// An engine's exchange of finished op blocks between its threads.
pub(crate) struct BlockPool {
    /// On a line of its own: threads that finish ops append to it, others take from it, and
    /// neither should pull the engine's other fields with it.
    exchange: CachePadded<Mutex<Vec<Arc<OpBlock>>>>,
}

impl BlockPool {
    /// An empty pool.
    pub(crate) fn new() -> BlockPool {
        BlockPool {
            exchange: CachePadded::new(Mutex::new(Vec::new())),
        }
    }

    /// A handle to a new op's block: a finished one when there is one (see
    /// [`OpBlock::refill`]), else a new one.
    pub(crate) fn new_op(&self, header: OpHeader<'_>, work: NewWork<'_>) -> OpRef {
        if let Some(mut spare) = self.take() {
            if let Some(old) = Arc::get_mut(&mut spare) {
                old.refill(header, work);
                return OpRef(spare);
            }
        }
        OpRef(Arc::new(OpBlock::new(header, work)))
    }

    /// Drops a handle to a finished op, keeping its block for a later push when this was the
    /// last handle.
    pub(crate) fn recycle(&self, op: OpRef) {
        let OpRef(mut block) = op;
        if Arc::get_mut(&mut block).is_some() {
            self.give_back(block);
        }
    }

    /// A finished block nobody else holds, for a new op: this thread's, or the exchange's when
    /// this thread has none left; `None` when neither has one.
    fn take(&self) -> Option<Arc<OpBlock>> {
        SPARE.with(|spare| {
            let mut spare = spare.borrow_mut();
            if spare.is_empty() {
                std::mem::swap(&mut *spare, &mut *lock(&self.exchange));
            }
            spare.pop()
        })
    }

    /// Drops the bodies that this thread's finished blocks and the exchange's still hold (see
    /// [`forget_kept_bodies_here`]).
    pub(crate) fn forget_kept_bodies(&self) {
        forget_kept_bodies_here();
        forget_bodies_of(&lock(&self.exchange));
    }

    /// Keeps a finished block nobody else holds for a later push: in this thread's list, handed
    /// with the rest of it to the exchange once the list holds a batch.
    fn give_back(&self, block: Arc<OpBlock>) {
        SPARE.with(|spare| {
            let mut spare = spare.borrow_mut();
            spare.push(block);
            if spare.len() >= BATCH {
                let mut exchange = lock(&self.exchange);
                if exchange.len() < MAX_EXCHANGED {
                    exchange.append(&mut spare);
                } else {
                    drop(exchange);
                    spare.clear();
                }
            }
        });
    }
}

/// Drops the bodies that this thread's finished blocks still hold (a shared body that ran stays
/// in its block for the next push of its statement, see [`OpBlock::refill`]), and with them what
/// they hold: a statement's constants, counted as tensors in use. A thread does so before it
/// sleeps, so that an idle engine holds nothing of statements gone (the summary's memory in use
/// at the end would count them on one engine and not on another).
pub(crate) fn forget_kept_bodies_here() {
    SPARE.with(|spare| forget_bodies_of(&spare.borrow()));
}

fn forget_bodies_of(blocks: &[Arc<OpBlock>]) {
    for block in blocks {
        block.forget_ran_body();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::accesses::AccessSet;
    use crate::op::{OpId, Work};
    use crate::Device;

    fn block(label: &Arc<str>, accesses: &AccessSet) -> Arc<OpBlock> {
        let header = OpHeader {
            id: OpId(0),
            label,
            line: 0,
            device: Device::Cpu,
            priority: 0,
            accesses,
        };
        Arc::new(OpBlock::new(
            header,
            NewWork::Owned(Work::Wait(Default::default())),
        ))
    }

    #[test]
    fn blocks_finished_on_one_thread_reach_a_thread_that_pushes() {
        let pool = Arc::new(BlockPool::new());
        let label: Arc<str> = "op".into();
        let accesses = AccessSet::new(Vec::new(), Vec::new());
        let blocks: Vec<_> = (0..BATCH).map(|_| block(&label, &accesses)).collect();
        let addresses: Vec<_> = blocks.iter().map(Arc::as_ptr).collect();
        let worker_pool = pool.clone();
        std::thread::spawn(move || {
            for block in blocks {
                worker_pool.give_back(block);
            }
        })
        .join()
        .unwrap();
        for _ in 0..BATCH {
            let taken = pool
                .take()
                .expect("the worker's batch reached the exchange");
            assert!(addresses.contains(&Arc::as_ptr(&taken)));
        }
        assert!(pool.take().is_none());
    }

    #[test]
    fn fewer_than_a_batch_stay_with_the_thread_that_finished_them() {
        let pool = Arc::new(BlockPool::new());
        let label: Arc<str> = "op".into();
        let accesses = AccessSet::new(Vec::new(), Vec::new());
        let worker_pool = pool.clone();
        let (label2, accesses2) = (label.clone(), accesses.clone());
        std::thread::spawn(move || {
            worker_pool.give_back(block(&label2, &accesses2));
            // This thread may reuse its own block at once.
            assert!(worker_pool.take().is_some());
            worker_pool.give_back(block(&label2, &accesses2));
        })
        .join()
        .unwrap();
        assert!(pool.take().is_none());
    }
}
