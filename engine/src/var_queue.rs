//! The per-variable access queue: the state machine at the heart of the engine (seed 000).
//!
//! Each variable keeps, in push order, the accesses that ops have asked for and not yet finished.
//! Granted accesses form a prefix of the queue: either one write, or a run of reads.
//!
//! - Append a read: granted at once when no write is in the queue, else queued.
//! - Append a write: granted at once when the queue is empty, else queued.
//! - Complete a read: when the last running read ends and a write is next, grant the write.
//! - Complete a write: grant the next write, or every read up to the next write, all at once.
//!
//! The queue is a plain data structure: the engine keeps it under the variable's mutex, and it
//! reports which ops it granted so that the caller decrements their wait counters outside it.

use std::collections::VecDeque;

/// One pending access of an op to a variable.
#[derive(Debug, Clone)]
pub(crate) struct Access<T> {
    /// The op that asked for the access.
    pub(crate) op: T,
    /// A write (exclusive) or a read (shared).
    pub(crate) write: bool,
    /// Whether the access has been granted (the op may run as far as this variable goes).
    pub(crate) granted: bool,
}

/// A variable's FIFO of pending accesses.
///
/// Invariant: the granted entries are a prefix of `entries`, made of exactly one write or of
/// reads only; `n_writes` counts the write entries and `n_granted_reads` the granted reads.
#[derive(Debug)]
pub(crate) struct VarQueue<T> {
    entries: VecDeque<Access<T>>,
    n_writes: usize,
    n_granted_reads: usize,
}

impl<T: Clone + PartialEq> VarQueue<T> {
    /// An empty queue.
    pub(crate) fn new() -> Self {
        VarQueue {
            entries: VecDeque::new(),
            n_writes: 0,
            n_granted_reads: 0,
        }
    }

    /// Whether a write is queued or running.
    pub(crate) fn has_writes(&self) -> bool {
        self.n_writes > 0
    }

    /// Appends a read by `op`; returns whether it was granted at once.
    pub(crate) fn append_read(&mut self, op: T) -> bool {
        let granted = self.n_writes == 0;
        if granted {
            self.n_granted_reads += 1;
        }
        self.entries.push_back(Access {
            op,
            write: false,
            granted,
        });
        self.check();
        granted
    }

    /// Appends a write by `op`; returns whether it was granted at once.
    pub(crate) fn append_write(&mut self, op: T) -> bool {
        let granted = self.entries.is_empty();
        self.n_writes += 1;
        self.entries.push_back(Access {
            op,
            write: true,
            granted,
        });
        self.check();
        granted
    }

    /// Ends the granted read of `op`, pushing onto `granted` the op whose write it unblocks.
    pub(crate) fn complete_read(&mut self, op: &T, granted: &mut Vec<T>) {
        // Reads usually end in the order they were granted: the front first.
        if self.entries.front().is_some_and(|access| access.op == *op) {
            self.entries.pop_front();
        } else {
            let position = self
                .entries
                .iter()
                .take(self.n_granted_reads)
                .position(|access| access.op == *op);
            let Some(position) = position else {
                debug_assert!(false, "complete_read of an op that holds no granted read");
                return;
            };
            self.entries.remove(position);
        }
        self.n_granted_reads -= 1;
        if self.n_granted_reads == 0 {
            self.grant_front(granted);
        }
        self.check();
    }

    /// Ends the granted write at the front, pushing onto `granted` the ops it unblocks.
    pub(crate) fn complete_write(&mut self, granted: &mut Vec<T>) {
        match self.entries.pop_front() {
            Some(access) if access.write && access.granted => self.n_writes -= 1,
            _ => debug_assert!(false, "complete_write without a granted write at the front"),
        }
        self.grant_front(granted);
        self.check();
    }

    /// Grants what may run now that nothing runs: the next write, or every read up to it.
    fn grant_front(&mut self, granted: &mut Vec<T>) {
        let Some(front) = self.entries.front_mut() else {
            return;
        };
        if front.granted {
            return;
        }
        if front.write {
            front.granted = true;
            granted.push(front.op.clone());
            return;
        }
        for access in self.entries.iter_mut() {
            if access.write {
                break;
            }
            access.granted = true;
            self.n_granted_reads += 1;
            granted.push(access.op.clone());
        }
    }

    /// Asserts the invariant under the loom model (where release builds check no
    /// `debug_assert`): the granted accesses are a prefix, one write or reads only, and the
    /// counts agree with the entries. Elsewhere it costs nothing (a queue can be long).
    fn check(&self) {
        #[cfg(loom)]
        {
            let n_granted = self
                .entries
                .iter()
                .take_while(|access| access.granted)
                .count();
            assert!(
                self.entries
                    .iter()
                    .skip(n_granted)
                    .all(|access| !access.granted),
                "granted accesses are not a prefix of the queue"
            );
            let granted = self.entries.iter().take(n_granted);
            let n_granted_writes = granted.filter(|access| access.write).count();
            assert!(
                n_granted_writes == 0 || n_granted == 1,
                "a write is granted beside another access"
            );
            assert_eq!(self.n_granted_reads, n_granted - n_granted_writes);
            assert_eq!(
                self.n_writes,
                self.entries.iter().filter(|access| access.write).count()
            );
        }
    }

    /// The pending accesses, oldest first (for snapshots).
    pub(crate) fn entries(&self) -> impl Iterator<Item = &Access<T>> {
        self.entries.iter()
    }

    /// Whether no access is pending.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether an access appended now would be granted at once: a write when nothing is
    /// pending, a read when no write is.
    pub(crate) fn would_grant(&self, write: bool) -> bool {
        if write {
            self.entries.is_empty()
        } else {
            self.n_writes == 0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted_ops(queue: &VarQueue<u32>) -> Vec<(u32, bool)> {
        queue
            .entries()
            .filter(|a| a.granted)
            .map(|a| (a.op, a.write))
            .collect()
    }

    #[test]
    fn reads_share_and_writes_wait_for_them() {
        let mut queue = VarQueue::new();
        assert!(queue.append_read(1));
        assert!(queue.append_read(2));
        assert!(!queue.append_write(3));
        assert!(!queue.append_read(4), "a read behind a queued write waits");
        let mut granted = Vec::new();
        queue.complete_read(&2, &mut granted);
        assert!(granted.is_empty(), "the write waits for every read");
        queue.complete_read(&1, &mut granted);
        assert_eq!(granted, vec![3]);
        granted.clear();
        queue.complete_write(&mut granted);
        assert_eq!(granted, vec![4]);
        assert_eq!(granted_ops(&queue), vec![(4, false)]);
    }

    #[test]
    fn completed_write_grants_all_reads_up_to_next_write() {
        let mut queue = VarQueue::new();
        assert!(queue.append_write(1));
        assert!(!queue.append_read(2));
        assert!(!queue.append_read(3));
        assert!(!queue.append_write(4));
        assert!(!queue.append_read(5));
        let mut granted = Vec::new();
        queue.complete_write(&mut granted);
        assert_eq!(granted, vec![2, 3]);
        granted.clear();
        queue.complete_read(&3, &mut granted);
        queue.complete_read(&2, &mut granted);
        assert_eq!(granted, vec![4]);
        granted.clear();
        queue.complete_write(&mut granted);
        assert_eq!(granted, vec![5]);
        granted.clear();
        queue.complete_read(&5, &mut granted);
        assert!(queue.is_empty());
    }

    #[test]
    fn writes_run_alone_in_push_order() {
        let mut queue = VarQueue::new();
        assert!(queue.append_write(1));
        assert!(!queue.append_write(2));
        let mut granted = Vec::new();
        queue.complete_write(&mut granted);
        assert_eq!(granted, vec![2]);
    }
}
