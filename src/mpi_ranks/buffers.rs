//! The memory that posted MPI requests borrow, without copying tensors in or results out.
//!
//! A nonblocking request borrows its buffers until it completes, for the lifetime of the
//! `mpi::request::scope` it is posted in (an epoch of the progress thread). [`EpochBuffers`]
//! holds them for one epoch: the tensors a request sends (shared with their variables, read in
//! place) and the buffers it receives into. When the epoch ends (nothing in flight) it gives
//! them back, so a result can become a tensor as it is, and a buffer no tensor needs any more
//! goes to the [`Pool`], to receive a later result of its length (no fresh pages to fault in, no
//! zeroing).

use std::cell::Cell;
use std::collections::HashMap;

use dep_interp::tensor::Tensor;
use typed_arena::Arena;

/// The most bytes the pool keeps for reuse; a buffer that does not fit is freed.
const POOL_BYTES: usize = 64 << 20;

/// Buffers of one epoch (see the module's doc).
#[derive(Default)]
pub(super) struct EpochBuffers {
    sent: Arena<Tensor>,
    received: Arena<Vec<f32>>,
    /// The collectives' headers: each rank's own, and every rank's gathered.
    headers: Arena<Vec<u64>>,
    /// Whether anything was lent out this epoch.
    used: Cell<bool>,
}

/// Where a request's result lies among an epoch's receive buffers, in the order they were lent.
#[derive(Clone, Copy, Debug)]
pub(super) struct Received(pub(super) usize);

impl EpochBuffers {
    /// Lends `tensor`'s values to a request that sends them (kept alive until the epoch ends).
    pub(super) fn send(&self, tensor: Tensor) -> &[f32] {
        self.used.set(true);
        self.sent.alloc(tensor).data()
    }

    /// Lends a buffer of `len` values (from `pool`, its contents stale) for a request to receive
    /// into.
    pub(super) fn receive<'a>(&'a self, pool: &mut Pool, len: usize) -> (Received, &'a mut [f32]) {
        self.used.set(true);
        let at = Received(self.received.len());
        (at, self.received.alloc(pool.take(len)))
    }

    /// Lends a buffer holding a copy of `values`, for a request that sends and receives in one
    /// buffer (a broadcast).
    pub(super) fn copy<'a>(&'a self, pool: &mut Pool, values: &[f32]) -> (Received, &'a mut [f32]) {
        let (at, buffer) = self.receive(pool, values.len());
        buffer.copy_from_slice(values);
        (at, buffer)
    }

    /// Lends `own` (this rank's header of a collective) to a request that gathers every rank's,
    /// and a buffer for the `ranks` headers it gathers.
    pub(super) fn header(&self, own: &[u64], ranks: usize) -> (&[u64], &mut [u64]) {
        self.used.set(true);
        let sent = self.headers.alloc(own.to_vec());
        let gathered = self.headers.alloc(vec![0; own.len() * ranks]);
        (sent, gathered)
    }

    /// Whether anything was lent this epoch.
    pub(super) fn used(&self) -> bool {
        self.used.get()
    }

    /// Ends the epoch (no request borrows anything now): the receive buffers, in the order they
    /// were lent, and the tensors sent.
    pub(super) fn into_parts(self) -> (Vec<Vec<f32>>, Vec<Tensor>) {
        (self.received.into_vec(), self.sent.into_vec())
    }
}

/// Buffers kept for reuse, by length, at most [`POOL_BYTES`] in all.
#[derive(Default)]
pub(super) struct Pool {
    free: HashMap<usize, Vec<Vec<f32>>>,
    bytes: usize,
}

impl Pool {
    /// A buffer of `len` values: a kept one (stale contents) or a new one of zeros.
    pub(super) fn take(&mut self, len: usize) -> Vec<f32> {
        match self.free.get_mut(&len).and_then(Vec::pop) {
            Some(buffer) => {
                self.bytes -= bytes_of(&buffer);
                buffer
            }
            None => vec![0.0; len],
        }
    }

    /// Keeps `buffer` for a later [`Pool::take`] of its length, if it fits.
    pub(super) fn give(&mut self, buffer: Vec<f32>) {
        let bytes = bytes_of(&buffer);
        if buffer.is_empty() || buffer.len() != buffer.capacity() || self.bytes + bytes > POOL_BYTES
        {
            return;
        }
        self.bytes += bytes;
        self.free.entry(buffer.len()).or_default().push(buffer);
    }

    /// Keeps the values of `tensor` if no other tensor shares them.
    pub(super) fn give_tensor(&mut self, tensor: Tensor) {
        if let Some(values) = tensor.into_values() {
            self.give(values);
        }
    }
}

fn bytes_of(buffer: &[f32]) -> usize {
    std::mem::size_of_val(buffer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(values: Vec<f32>) -> Tensor {
        Tensor::from_vec(vec![values.len()], values).expect("a vector of its own length")
    }

    #[test]
    fn an_epoch_gives_back_what_it_lent_in_order() {
        let mut pool = Pool::default();
        let buffers = EpochBuffers::default();
        assert!(!buffers.used());
        let sent = buffers.send(vector(vec![1.0, 2.0]));
        assert_eq!(sent, &[1.0, 2.0]);
        let (first, buffer) = buffers.receive(&mut pool, 3);
        buffer.copy_from_slice(&[4.0, 5.0, 6.0]);
        let (second, copy) = buffers.copy(&mut pool, &[7.0]);
        assert_eq!(copy, &[7.0]);
        assert!(buffers.used());
        let (received, tensors) = buffers.into_parts();
        assert_eq!(received[first.0], vec![4.0, 5.0, 6.0]);
        assert_eq!(received[second.0], vec![7.0]);
        assert_eq!(tensors.len(), 1);
    }

    #[test]
    fn the_pool_reuses_a_buffer_of_the_same_length_and_a_tensor_no_one_shares() {
        let mut pool = Pool::default();
        let buffer = pool.take(4);
        let address = buffer.as_ptr();
        pool.give(buffer);
        assert_eq!(pool.take(5).len(), 5, "another length is a new buffer");
        let reused = pool.take(4);
        assert_eq!(reused.as_ptr(), address, "the same length reuses it");

        let shared = vector(vec![1.0; 8]);
        let other = shared.clone();
        pool.give_tensor(shared);
        assert_eq!(pool.bytes, 0, "values another tensor shares are not kept");
        let address = other.data().as_ptr();
        pool.give_tensor(other);
        let reused = pool.take(8);
        assert_eq!(reused.as_ptr(), address);
    }

    #[test]
    fn the_pool_keeps_no_more_than_its_bound() {
        let mut pool = Pool::default();
        let len = POOL_BYTES / std::mem::size_of::<f32>();
        pool.give(vec![0.0; len]);
        pool.give(vec![0.0; 1]);
        assert_eq!(pool.bytes, POOL_BYTES, "the second buffer does not fit");
        assert_eq!(pool.take(1).len(), 1);
        assert_eq!(pool.bytes, POOL_BYTES);
    }
}
