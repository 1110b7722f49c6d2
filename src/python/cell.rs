//! The value behind a map or a block ([`SwapCell`]): an immutable snapshot
//! that many threads read, swapped whole when the object changes. Shared by
//! `TensorBlock` and `TensorMap` (`block.rs`, `tensor.rs`), read by the garbage
//! collector's traversal (`gc.rs`) and locked while sharing (`shm.rs`).

use crate::arc::{ForkArc, ForkGuard, ForkMutex};

/// The value behind a map or a block: an immutable snapshot, swapped
/// whole when the object changes.
///
/// Both locks survive `fork()` (a child never waits for a thread of its
/// parent, see [`ForkMutex`]): a child of a process where another thread
/// was sharing the object shares it itself.
#[derive(Debug)]
pub struct SwapCell<T> {
    /// held only to clone or replace the pointer: consistent at every
    /// instant, as a lock taken over in a forked child needs
    value: ForkMutex<ForkArc<T>>,
    /// taken (with the GIL released) by `share_memory`, so that two threads
    /// sharing the same object share it once
    sharing: ForkMutex<()>,
}

impl<T: Clone> SwapCell<T> {
    pub fn new(value: T) -> Self {
        SwapCell {
            value: ForkMutex::new(ForkArc::new(value)),
            sharing: ForkMutex::new(()),
        }
    }

    fn lock(&self) -> ForkGuard<'_, ForkArc<T>> {
        loop {
            // held for a pointer copy or swap, which runs no code of anyone
            // else's (old values are dropped after unlocking): this thread
            // cannot hold it already
            if let Ok(guard) = self.value.lock() {
                return guard;
            }
        }
    }

    /// The current value (O(1), never waits for a long operation).
    pub fn get(&self) -> ForkArc<T> {
        ForkArc::clone(&self.lock())
    }

    /// Replace the value.
    pub fn set(&self, value: ForkArc<T>) {
        let old = std::mem::replace(&mut *self.lock(), value);
        // dropped unlocked: dropping may release a Python object, whose
        // finalizer may read this cell
        drop(old);
    }

    /// Change the value in place (the metadata is cloned first when a
    /// snapshot of it is alive elsewhere).
    pub fn modify<R>(&self, change: impl FnOnce(&mut T) -> R) -> R {
        change(ForkArc::make_mut(&mut self.lock()))
    }

    /// The value, when this cell is its only holder and no thread holds
    /// the lock (the garbage collector's traversal: see `gc.rs`).
    pub fn sole(&self) -> Option<ForkGuard<'_, ForkArc<T>>> {
        let guard = self.value.try_lock()?;
        (ForkArc::strong_count(&guard) == 1).then_some(guard)
    }

    /// Hold the sharing lock while `work` runs. Re-entered (a signal
    /// handler sharing the object again while this thread shares it), the
    /// nested call runs without it: it shares the value it sees, which is
    /// correct, only not done once.
    pub fn while_sharing<R>(&self, work: impl FnOnce() -> R) -> R {
        let _guard = self.sharing.lock().ok();
        work()
    }
}
