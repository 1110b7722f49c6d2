//! [`Arc`]: a reference-counted pointer whose objects are immortal in
//! forked children.
//!
//! `std::sync::Arc` writes its counter on every clone and drop. After a
//! `fork()`, the child shares the parent's memory page by page until either
//! writes to it (copy-on-write): a `DataLoader` worker that only *reads* the
//! dataset it inherited still copies one page per map it touches, for the
//! counter of that map's metadata. With many small maps that is more memory
//! than the maps' data (measured before this type: 40,000 QM9-like maps, a
//! fork worker reading half of them grew its private memory by 164 MB on
//! `len(tensor)` alone).
//!
//! This `Arc` records, in each object, the fork generation of the process
//! that made it. A fork bumps the generation in the child (a
//! `pthread_atfork` handler, registered with the first object). In a process
//! of a later generation, an object made before the fork is immortal: its
//! clones and drops leave the counter alone, so its pages stay shared with
//! the parent, and it is never freed in the child (its memory belongs to
//! the parent's image, which the child could not give back anyway without
//! copying the page first). Python's immortal objects and `gc.freeze()` do
//! the same for Python objects. Objects the child makes itself are counted
//! as usual.
//!
//! Only what the crate uses of `std::sync::Arc` is offered: `new`, `clone`,
//! `Deref`, `AsRef`, `ptr_eq`, `strong_count` and `make_mut`.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, AtomicUsize, Ordering};
use std::sync::Once;

/// The fork generation of this process: 0 in the process that loaded
/// blockmap, one more in each forked child.
static GENERATION: AtomicU32 = AtomicU32::new(0);

static TRACK_FORKS: Once = Once::new();

extern "C" fn after_fork_in_child() {
    // async-signal-safe: one atomic add, no allocation, no lock
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Register the fork handler (once per process; its children inherit it).
fn track_forks() {
    TRACK_FORKS.call_once(|| {
        // SAFETY: `after_fork_in_child` is an `extern "C"` function that
        // lives as long as the program and only does an atomic add, which is
        // allowed in a child of a multithreaded fork. pthread_atfork can only
        // fail for lack of memory; then forks are not tracked and objects are
        // counted as with std's Arc (correct, only not frozen).
        unsafe {
            libc::pthread_atfork(None, None, Some(after_fork_in_child));
        }
    });
}

/// The current fork generation (see the module docs).
pub fn generation() -> u32 {
    GENERATION.load(Ordering::Relaxed)
}

/// Counted object: the counter, the generation it was made in, the value.
struct Inner<T> {
    count: AtomicUsize,
    generation: u32,
    value: T,
}

/// A thread-safe reference-counted pointer, immortal in forked children;
/// see the [module docs](self).
pub struct Arc<T> {
    inner: NonNull<Inner<T>>,
    _owns: PhantomData<Inner<T>>,
}

// SAFETY: as std's Arc: the value is shared between threads (Sync needed)
// and may be dropped on any thread (Send needed); the counter is atomic.
unsafe impl<T: Send + Sync> Send for Arc<T> {}
// SAFETY: as for Send.
unsafe impl<T: Send + Sync> Sync for Arc<T> {}

impl<T> Arc<T> {
    /// A new counted `value`, counted in this process.
    pub fn new(value: T) -> Self {
        track_forks();
        let inner = Box::new(Inner {
            count: AtomicUsize::new(1),
            generation: generation(),
            value,
        });
        Arc {
            inner: NonNull::from(Box::leak(inner)),
            _owns: PhantomData,
        }
    }

    fn inner(&self) -> &Inner<T> {
        // SAFETY: `inner` came from `Box::leak` and is freed only when the
        // last counted reference drops; `self` is one of them, or the
        // object is immortal in this process and never freed.
        unsafe { self.inner.as_ref() }
    }

    /// Whether the counter of this object is kept in this process (false:
    /// made before a fork, immortal here).
    fn counted(&self) -> bool {
        self.inner().generation == generation()
    }

    /// Whether `a` and `b` point to the same object.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.inner == b.inner
    }

    /// How many pointers share the object; `usize::MAX` for an object made
    /// before a fork (immortal: never unique).
    pub fn strong_count(this: &Self) -> usize {
        if this.counted() {
            this.inner().count.load(Ordering::Acquire)
        } else {
            usize::MAX
        }
    }

    fn is_unique(&mut self) -> bool {
        // Acquire: see every write of the pointers that were dropped
        self.counted() && self.inner().count.load(Ordering::Acquire) == 1
    }
}

impl<T: Clone> Arc<T> {
    /// A mutable reference to the value, cloned first into a new object
    /// unless this pointer is the only one (as `std::sync::Arc::make_mut`).
    pub fn make_mut(this: &mut Self) -> &mut T {
        if !this.is_unique() {
            *this = Arc::new(this.inner().value.clone());
        }
        // SAFETY: `this` is now the only pointer to an object counted in
        // this process (a fresh one, or one whose count is 1 and that no
        // other thread can clone: cloning needs a pointer), so nothing else
        // reads the value while the reference lives.
        unsafe { &mut this.inner.as_mut().value }
    }
}

impl<T> Clone for Arc<T> {
    fn clone(&self) -> Self {
        if self.counted() {
            // Relaxed, as std: a new pointer is made from an existing one
            let old = self.inner().count.fetch_add(1, Ordering::Relaxed);
            if old > isize::MAX as usize {
                // as std: a count this large means leaked clones in a loop
                std::process::abort();
            }
        }
        Arc {
            inner: self.inner,
            _owns: PhantomData,
        }
    }
}

impl<T> Drop for Arc<T> {
    fn drop(&mut self) {
        if !self.counted() {
            return;
        }
        if self.inner().count.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // the last pointer: every other drop happened before (Acquire pairs
        // with their Release)
        fence(Ordering::Acquire);
        // SAFETY: the count reached zero, so no other pointer exists; the
        // allocation came from `Box::leak` in `new`.
        drop(unsafe { Box::from_raw(self.inner.as_ptr()) });
    }
}

impl<T> Deref for Arc<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.inner().value
    }
}

impl<T> AsRef<T> for Arc<T> {
    fn as_ref(&self) -> &T {
        self
    }
}

impl<T: fmt::Debug> fmt::Debug for Arc<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: PartialEq> PartialEq for Arc<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Eq> Eq for Arc<T> {}

impl<T: std::hash::Hash> std::hash::Hash for Arc<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize as Counter;

    struct Dropped<'a>(&'a Counter);

    impl Drop for Dropped<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn counts_and_frees_once() {
        let drops = Counter::new(0);
        let a = Arc::new(Dropped(&drops));
        let b = a.clone();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(Arc::strong_count(&a), 2);
        drop(a);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        assert_eq!(Arc::strong_count(&b), 1);
        drop(b);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn make_mut_clones_only_when_shared() {
        let mut a = Arc::new(vec![1, 2]);
        let before = a.inner;
        Arc::make_mut(&mut a).push(3);
        assert_eq!(a.inner, before);
        let b = a.clone();
        Arc::make_mut(&mut a).push(4);
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(*a, vec![1, 2, 3, 4]);
        assert_eq!(*b, vec![1, 2, 3]);
    }

    #[test]
    fn threads_share_and_drop() {
        let a = Arc::new(vec![7u8; 1000]);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let mine = a.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        let again = mine.clone();
                        assert_eq!(again.len(), 1000);
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(Arc::strong_count(&a), 1);
    }

    #[test]
    fn objects_made_before_a_fork_are_immortal_in_the_child() {
        let old = Arc::new(vec![1u64; 8]);
        let count = Arc::strong_count(&old);
        // SAFETY: the child only touches atomics and `old`'s memory, then
        // leaves with _exit (no destructor, no stdio of the parent).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let ok = {
                let clone = old.clone();
                let inherited_untouched = old.inner().count.load(Ordering::Relaxed) == count;
                let never_unique = Arc::strong_count(&clone) == usize::MAX;
                drop(clone);
                let mut young = Arc::new(1u8);
                let young_counted = Arc::strong_count(&young) == 1;
                *Arc::make_mut(&mut young) += 1;
                let mut copy = old.clone();
                Arc::make_mut(&mut copy)[0] = 5;
                inherited_untouched
                    && never_unique
                    && young_counted
                    && *young == 2
                    && !Arc::ptr_eq(&copy, &old)
                    && old[0] == 1
            };
            // SAFETY: _exit ends the child without running anything of the
            // parent's (atexit handlers, buffered output).
            unsafe { libc::_exit(i32::from(!ok)) };
        }
        let mut status = 0;
        // SAFETY: `pid` is our child; `status` is a valid out pointer.
        let waited = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        assert_eq!(waited, pid);
        assert!(libc::WIFEXITED(status));
        assert_eq!(libc::WEXITSTATUS(status), 0, "the child saw counts change");
        assert_eq!(Arc::strong_count(&old), count);
    }
}
