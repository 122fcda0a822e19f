//! Tensor storage: the buffer behind a tensor, counted in the process's memory meter, and the
//! buffer pool that graph replays allocate from.
//!
//! Every live buffer is counted: created through [`Storage::new`], cloned (copy on write) or
//! dropped. A graph replay installs its [`BufferPool`] on the thread running one of its ops
//! ([`with_pool`]); allocations of that op ([`super::shape::alloc`]) then reuse a released buffer
//! of the same size instead of asking the allocator.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dep_engine::{MemoryMeter, MemoryStats};

/// Bytes of tensor storage on the CPU, for the whole process.
static CPU_MEMORY: MemoryMeter = MemoryMeter::new();

/// The current and peak bytes of CPU tensor storage in this process.
pub fn cpu_memory() -> MemoryStats {
    CPU_MEMORY.stats()
}

/// Starts a new peak of CPU tensor storage from the current use.
pub fn reset_cpu_peak() {
    CPU_MEMORY.reset_peak();
}

/// Bytes in the largest unit that keeps the number at least 1: `512 B`, `3.2 KiB`, `1.5 MiB`,
/// `37.3 GiB`.
pub fn format_bytes(bytes: u64) -> String {
    match bytes {
        bytes if bytes >= 1 << 30 => format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64),
        bytes if bytes >= 1 << 20 => format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64),
        bytes if bytes >= 1 << 10 => format!("{:.1} KiB", bytes as f64 / 1024.0),
        bytes => format!("{bytes} B"),
    }
}

/// A tensor's buffer of values.
pub(crate) struct Storage {
    values: Vec<f32>,
}

impl Storage {
    pub(crate) fn new(values: Vec<f32>) -> Storage {
        CPU_MEMORY.allocated(bytes_of(&values));
        Storage { values }
    }

    pub(crate) fn values_mut(&mut self) -> &mut Vec<f32> {
        &mut self.values
    }

    /// Gives the buffer up (to a pool), leaving an empty storage behind.
    pub(crate) fn into_values(mut self) -> Vec<f32> {
        CPU_MEMORY.freed(bytes_of(&self.values));
        std::mem::take(&mut self.values)
    }
}

impl std::ops::Deref for Storage {
    type Target = Vec<f32>;
    fn deref(&self) -> &Vec<f32> {
        &self.values
    }
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.values.fmt(f)
    }
}

impl Clone for Storage {
    fn clone(&self) -> Storage {
        Storage::new(self.values.clone())
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        CPU_MEMORY.freed(bytes_of(&self.values));
    }
}

fn bytes_of(values: &Vec<f32>) -> u64 {
    (values.capacity() * std::mem::size_of::<f32>()) as u64
}

/// Released buffers kept for reuse, by length: buffer sharing in graph mode (seed 003).
#[derive(Default)]
pub struct BufferPool {
    free: Mutex<HashMap<usize, Vec<Vec<f32>>>>,
    reused: AtomicU64,
    returned: AtomicU64,
}

impl BufferPool {
    /// An empty pool.
    pub fn new() -> Arc<BufferPool> {
        Arc::new(BufferPool::default())
    }

    /// Keeps a released buffer for a later allocation of the same length. Its bytes stay counted
    /// as in use: the pool holds them.
    pub fn give(&self, values: Vec<f32>) {
        CPU_MEMORY.in_use_again(bytes_of(&values));
        self.returned.fetch_add(1, Ordering::Relaxed);
        let mut free = self
            .free
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        free.entry(values.capacity()).or_default().push(values);
    }

    fn take(&self, len: usize) -> Option<Vec<f32>> {
        let mut free = self
            .free
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut values = free.get_mut(&len)?.pop()?;
        CPU_MEMORY.freed(bytes_of(&values));
        self.reused.fetch_add(1, Ordering::Relaxed);
        values.clear();
        Some(values)
    }

    /// How many allocations the pool served (allocations avoided).
    pub fn reused(&self) -> u64 {
        self.reused.load(Ordering::Relaxed)
    }

    /// Bytes the pool holds now.
    pub fn held_bytes(&self) -> u64 {
        let free = self
            .free
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        free.values().flatten().map(bytes_of).sum()
    }

    /// Frees every buffer the pool holds.
    pub fn clear(&self) {
        let mut free = self
            .free
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for values in free.drain().flat_map(|(_, buffers)| buffers) {
            CPU_MEMORY.freed(bytes_of(&values));
        }
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        self.clear();
    }
}

thread_local! {
    static CURRENT_POOL: RefCell<Option<Arc<BufferPool>>> = const { RefCell::new(None) };
}

/// Runs `body` with `pool` serving this thread's tensor allocations.
pub fn with_pool<T>(pool: &Arc<BufferPool>, body: impl FnOnce() -> T) -> T {
    let previous = CURRENT_POOL.with(|current| current.borrow_mut().replace(pool.clone()));
    let result = body();
    CURRENT_POOL.with(|current| *current.borrow_mut() = previous);
    result
}

/// A buffer of exactly `len` elements' capacity from the current pool, if it has one, or else
/// the op's spare buffer if it has that capacity.
pub(crate) fn take_pooled(len: usize) -> Option<Vec<f32>> {
    CURRENT_POOL
        .with(|current| current.borrow().as_ref().and_then(|pool| pool.take(len)))
        .or_else(|| take_spare(len))
}

thread_local! {
    /// The buffer of the value the running op overwrites, offered to its allocations.
    static SPARE: Cell<Option<Vec<f32>>> = const { Cell::new(None) };
}

/// Runs `body` (an op's computation) with `spare`, the buffer of the value the op overwrites
/// (dead once the op runs, and held by nobody else), serving the first allocation of exactly
/// its length: `y = x + 1` in a loop then writes into `y`'s old buffer instead of allocating.
/// The spare stays counted as memory in use until it is reused or, unused, freed at the end.
pub fn with_spare<T>(spare: Vec<f32>, body: impl FnOnce() -> T) -> T {
    CPU_MEMORY.in_use_again(bytes_of(&spare));
    SPARE.set(Some(spare));
    let result = body();
    if let Some(unused) = SPARE.take() {
        CPU_MEMORY.freed(bytes_of(&unused));
    }
    result
}

/// The spare buffer, emptied, if it holds exactly `len` elements.
fn take_spare(len: usize) -> Option<Vec<f32>> {
    let spare = SPARE.take()?;
    if spare.capacity() != len {
        SPARE.set(Some(spare));
        return None;
    }
    CPU_MEMORY.freed(bytes_of(&spare));
    let mut spare = spare;
    spare.clear();
    Some(spare)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spare_serves_one_allocation_of_its_length() {
        let spare = vec![1.0f32; 16];
        let address = spare.as_ptr();
        let (first, second) = with_spare(spare, || {
            assert_eq!(take_pooled(8), None, "another length");
            (take_pooled(16), take_pooled(16))
        });
        let first = first.expect("the spare, once");
        assert_eq!(
            (first.as_ptr(), first.len(), first.capacity()),
            (address, 0, 16)
        );
        assert_eq!(second, None);
        assert_eq!(
            with_spare(vec![0.0; 4], || take_pooled(4)).map(|v| v.capacity()),
            Some(4)
        );
        assert_eq!(take_pooled(4), None, "no spare outside with_spare");
    }

    #[test]
    fn a_pool_serves_an_allocation_of_the_same_length_once() {
        let pool = BufferPool::new();
        pool.give(vec![1.0; 8]);
        assert_eq!(pool.held_bytes(), 32);
        let reused = with_pool(&pool, || take_pooled(8));
        assert_eq!(
            reused.map(|values| (values.len(), values.capacity())),
            Some((0, 8))
        );
        assert_eq!(with_pool(&pool, || take_pooled(8)), None);
        assert_eq!(take_pooled(8), None, "no pool outside with_pool");
        assert_eq!(pool.reused(), 1);
    }
}
