//! [`ForkArc`]: a fork-aware `Arc`, a reference-counted pointer whose
//! objects are immortal in forked children; [`ForkMutex`]: a lock a forked
//! child takes over from its parent's threads; [`SetOnce`]: a value set
//! once without ever waiting.
//!
//! `std::sync::Arc` writes its counter on every clone and drop. After a
//! `fork()`, the child shares the parent's memory page by page until either
//! writes to it (copy-on-write): a `DataLoader` worker that only *reads* the
//! dataset it inherited still copies one page per map it touches, for the
//! counter of that map's metadata. With many small maps that is more memory
//! than the maps' data (docs/benchmarks.md, "Figures behind design
//! choices").
//!
//! This `ForkArc` records, in each object, the fork generation of the process
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

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// The fork generation of this process: 0 in the process that loaded
/// blockmap, one more in each forked child.
static GENERATION: AtomicU32 = AtomicU32::new(0);

/// Whether the fork handler is registered (see [`track_forks`]).
static TRACK_FORKS: AtomicBool = AtomicBool::new(false);

extern "C" fn after_fork_in_child() {
    // async-signal-safe: one atomic add, no allocation, no lock
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Register the fork handler (once per process; its children inherit it).
///
/// Not `std::sync::Once`: a fork while another thread was inside
/// `call_once` would leave the child's `Once` running forever, and every
/// call there waiting. Two threads racing here may both register; the
/// handler then runs twice per fork, which only moves the generation on by
/// two (all that matters is that it changes). A thread that returns from
/// here has seen a registration complete, so a fork after anything it
/// does next bumps the generation.
fn track_forks() {
    if TRACK_FORKS.load(Ordering::Acquire) {
        return;
    }
    // SAFETY: `after_fork_in_child` is an `extern "C"` function that
    // lives as long as the program and only does an atomic add, which is
    // allowed in a child of a multithreaded fork. pthread_atfork can only
    // fail for lack of memory; then forks are not tracked and objects are
    // counted as with std's Arc (correct, only not frozen).
    let registered = unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) } == 0;
    if registered {
        TRACK_FORKS.store(true, Ordering::Release);
    }
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
pub struct ForkArc<T> {
    inner: NonNull<Inner<T>>,
    _owns: PhantomData<Inner<T>>,
}

// SAFETY: as std's Arc: the value is shared between threads (Sync needed)
// and may be dropped on any thread (Send needed); the counter is atomic.
unsafe impl<T: Send + Sync> Send for ForkArc<T> {}
// SAFETY: as for Send.
unsafe impl<T: Send + Sync> Sync for ForkArc<T> {}

impl<T> ForkArc<T> {
    /// A new counted `value`, counted in this process.
    pub fn new(value: T) -> Self {
        track_forks();
        let inner = Box::new(Inner {
            count: AtomicUsize::new(1),
            generation: generation(),
            value,
        });
        ForkArc {
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

impl<T: Clone> ForkArc<T> {
    /// A mutable reference to the value, cloned first into a new object
    /// unless this pointer is the only one (as `std::sync::Arc::make_mut`).
    pub fn make_mut(this: &mut Self) -> &mut T {
        if !this.is_unique() {
            *this = ForkArc::new(this.inner().value.clone());
        }
        // SAFETY: `this` is now the only pointer to an object counted in
        // this process (a fresh one, or one whose count is 1 and that no
        // other thread can clone: cloning needs a pointer), so nothing else
        // reads the value while the reference lives.
        unsafe { &mut this.inner.as_mut().value }
    }
}

impl<T> Clone for ForkArc<T> {
    fn clone(&self) -> Self {
        if self.counted() {
            // Relaxed, as std: a new pointer is made from an existing one
            let old = self.inner().count.fetch_add(1, Ordering::Relaxed);
            if old > isize::MAX as usize {
                // as std: a count this large means leaked clones in a loop
                std::process::abort();
            }
        }
        ForkArc {
            inner: self.inner,
            _owns: PhantomData,
        }
    }
}

impl<T> Drop for ForkArc<T> {
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

impl<T> Deref for ForkArc<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.inner().value
    }
}

impl<T> AsRef<T> for ForkArc<T> {
    fn as_ref(&self) -> &T {
        self
    }
}

impl<T: fmt::Debug> fmt::Debug for ForkArc<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: PartialEq> PartialEq for ForkArc<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Eq> Eq for ForkArc<T> {}

impl<T: std::hash::Hash> std::hash::Hash for ForkArc<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

/// A mutual-exclusion lock that survives `fork()`: a child never waits for
/// a thread of its parent.
///
/// `std::sync::Mutex` held by another thread at a fork stays held forever
/// in the child (only the forking thread is copied), and the child's next
/// `lock` hangs. This lock records in its word the fork generation of the
/// process whose thread holds it: in a later generation the holder does
/// not exist, and the lock is taken over (as if reset by a `pthread_atfork`
/// handler, without a registry of every lock). The value is left as the
/// holder left it: only use it for values that are consistent at every
/// instant (a pointer swapped whole, a unit).
///
/// It also tells re-entry: [`ForkMutex::lock`] refuses, instead of
/// deadlocking, when the calling thread holds the lock already (a Python
/// signal handler, run by a long operation that holds it, calling in).
/// Waiting threads spin, then sleep in growing steps up to a millisecond.
pub struct ForkMutex<T> {
    /// 0: free; else (generation + 1) << 32 | the holder's thread number
    word: AtomicU64,
    value: UnsafeCell<T>,
}

// SAFETY: as std's Mutex: the value is reached only through a guard, and
// one guard exists at a time (the word is taken by compare-exchange).
unsafe impl<T: Send> Send for ForkMutex<T> {}
// SAFETY: as for Send.
unsafe impl<T: Send> Sync for ForkMutex<T> {}

impl<T> fmt::Debug for ForkMutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ForkMutex")
            .field("held", &(self.word.load(Ordering::Relaxed) != 0))
            .finish_non_exhaustive()
    }
}

/// A small number naming this thread (never 0), for [`ForkMutex`].
fn thread_number() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    thread_local! {
        static NUMBER: u32 = NEXT.fetch_add(1, Ordering::Relaxed).max(1);
    }
    NUMBER.with(|number| *number)
}

/// The lock is held by the calling thread already.
#[derive(Debug)]
pub struct Reentered;

/// Access to the value of a [`ForkMutex`]; unlocks when dropped.
#[derive(Debug)]
pub struct ForkGuard<'a, T> {
    lock: &'a ForkMutex<T>,
    word: u64,
}

impl<T> ForkMutex<T> {
    /// A new, unlocked lock.
    pub const fn new(value: T) -> Self {
        ForkMutex {
            word: AtomicU64::new(0),
            value: UnsafeCell::new(value),
        }
    }

    /// Lock, waiting for another thread of this process that holds it;
    /// `Err(Reentered)` when this thread holds it.
    pub fn lock(&self) -> Result<ForkGuard<'_, T>, Reentered> {
        track_forks();
        let mine = (u64::from(generation()) + 1) << 32 | u64::from(thread_number());
        let mut waited = 0u32;
        loop {
            let seen = self.word.load(Ordering::Relaxed);
            let free = seen == 0 || seen >> 32 != mine >> 32;
            if free {
                // free, or held in an earlier generation: by a thread of a
                // parent, which does not exist here
                if self
                    .word
                    .compare_exchange(seen, mine, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return Ok(ForkGuard {
                        lock: self,
                        word: mine,
                    });
                }
                continue;
            }
            if seen == mine {
                return Err(Reentered);
            }
            waited = waited.saturating_add(1);
            if waited < 64 {
                std::hint::spin_loop();
            } else if waited < 128 {
                std::thread::yield_now();
            } else {
                let micros = u64::from((waited - 127).min(1000));
                std::thread::sleep(std::time::Duration::from_micros(micros));
            }
        }
    }
}

impl<T> ForkMutex<T> {
    /// Lock when no thread of this process holds it, without waiting;
    /// `None` when one does (this thread included).
    pub fn try_lock(&self) -> Option<ForkGuard<'_, T>> {
        track_forks();
        let mine = (u64::from(generation()) + 1) << 32 | u64::from(thread_number());
        let seen = self.word.load(Ordering::Relaxed);
        if seen != 0 && seen >> 32 == mine >> 32 {
            return None;
        }
        // free, or held in an earlier generation (by a thread of a parent)
        self.word
            .compare_exchange(seen, mine, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| ForkGuard {
                lock: self,
                word: mine,
            })
    }
}

impl<T> Deref for ForkGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock (its word is in the lock), so
        // no other guard exists in this process.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for ForkGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`; `&mut self` makes the access unique.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for ForkGuard<'_, T> {
    fn drop(&mut self) {
        // only our own word is cleared: in a child forked while this guard
        // lived, another thread may have taken the lock over since
        let _ = self
            .lock
            .word
            .compare_exchange(self.word, 0, Ordering::Release, Ordering::Relaxed);
    }
}

/// A value set at most once, read without waiting: a lock-free
/// `OnceLock` that only offers `get` and `set`. `std::sync::OnceLock::set`
/// waits for a `set` in progress on another thread, forever in a child
/// forked in the middle of one; here a `set` is one compare-exchange of a
/// pointer, and a losing value is dropped.
pub struct SetOnce<T> {
    value: std::sync::atomic::AtomicPtr<T>,
}

impl<T> SetOnce<T> {
    /// An empty cell.
    pub const fn new() -> Self {
        SetOnce {
            value: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The value, once set.
    pub fn get(&self) -> Option<&T> {
        let value = self.value.load(Ordering::Acquire);
        // SAFETY: a non-null pointer came from `Box::into_raw` in `set`
        // (Release, paired with the Acquire above: the value is fully
        // written) and is freed only by `drop`, which `&self` excludes.
        unsafe { value.as_ref() }
    }

    /// Set the value unless it is set already (then `value` is given back).
    pub fn set(&self, value: T) -> Result<(), T> {
        let boxed = Box::into_raw(Box::new(value));
        match self.value.compare_exchange(
            std::ptr::null_mut(),
            boxed,
            Ordering::Release,
            Ordering::Acquire,
        ) {
            Ok(_) => Ok(()),
            // SAFETY: `boxed` came from `Box::into_raw` above and was not
            // published: this is its only owner.
            Err(_) => Err(*unsafe { Box::from_raw(boxed) }),
        }
    }
}

impl<T> fmt::Debug for SetOnce<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SetOnce")
            .field("set", &self.get().is_some())
            .finish_non_exhaustive()
    }
}

impl<T> Default for SetOnce<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for SetOnce<T> {
    fn drop(&mut self) {
        let value = *self.value.get_mut();
        if !value.is_null() {
            // SAFETY: a non-null pointer came from `Box::into_raw` in `set`
            // and is owned by this cell, dropped once, here.
            drop(unsafe { Box::from_raw(value) });
        }
    }
}

// SAFETY: as `OnceLock`: the value is shared between threads through
// `get` (Sync needed) and set or dropped on any thread (Send needed).
unsafe impl<T: Send + Sync> Sync for SetOnce<T> {}
// SAFETY: as for Sync.
unsafe impl<T: Send> Send for SetOnce<T> {}

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
        let a = ForkArc::new(Dropped(&drops));
        let b = a.clone();
        assert!(ForkArc::ptr_eq(&a, &b));
        assert_eq!(ForkArc::strong_count(&a), 2);
        drop(a);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        assert_eq!(ForkArc::strong_count(&b), 1);
        drop(b);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn make_mut_clones_only_when_shared() {
        let mut a = ForkArc::new(vec![1, 2]);
        let before = a.inner;
        ForkArc::make_mut(&mut a).push(3);
        assert_eq!(a.inner, before);
        let b = a.clone();
        ForkArc::make_mut(&mut a).push(4);
        assert!(!ForkArc::ptr_eq(&a, &b));
        assert_eq!(*a, vec![1, 2, 3, 4]);
        assert_eq!(*b, vec![1, 2, 3]);
    }

    #[test]
    fn threads_share_and_drop() {
        let a = ForkArc::new(vec![7u8; 1000]);
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
        assert_eq!(ForkArc::strong_count(&a), 1);
    }

    #[test]
    fn objects_made_before_a_fork_are_immortal_in_the_child() {
        let old = ForkArc::new(vec![1u64; 8]);
        let count = ForkArc::strong_count(&old);
        // SAFETY: the child only touches atomics and `old`'s memory, then
        // leaves with _exit (no destructor, no stdio of the parent).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let ok = {
                let clone = old.clone();
                let inherited_untouched = old.inner().count.load(Ordering::Relaxed) == count;
                let never_unique = ForkArc::strong_count(&clone) == usize::MAX;
                drop(clone);
                let mut young = ForkArc::new(1u8);
                let young_counted = ForkArc::strong_count(&young) == 1;
                *ForkArc::make_mut(&mut young) += 1;
                let mut copy = old.clone();
                ForkArc::make_mut(&mut copy)[0] = 5;
                inherited_untouched
                    && never_unique
                    && young_counted
                    && *young == 2
                    && !ForkArc::ptr_eq(&copy, &old)
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
        assert_eq!(ForkArc::strong_count(&old), count);
    }

    #[test]
    fn fork_mutexes_try_lock_without_waiting() {
        static LOCK: ForkMutex<u32> = ForkMutex::new(3);
        let guard = LOCK.try_lock().expect("a free lock is taken");
        assert_eq!(*guard, 3);
        assert!(LOCK.try_lock().is_none(), "held by this thread");
        let other = std::thread::spawn(|| LOCK.try_lock().is_none());
        assert!(other.join().unwrap(), "held by another thread");
        drop(guard);
        assert!(LOCK.try_lock().is_some(), "free again");
    }

    #[test]
    fn fork_mutexes_refuse_reentry_and_are_taken_over_in_a_child() {
        static LOCK: ForkMutex<u32> = ForkMutex::new(0);
        let guard = LOCK.lock().unwrap();
        assert!(LOCK.lock().is_err(), "the holding thread is refused");
        drop(guard);
        // another thread holds it across the fork
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let mut guard = LOCK.lock().unwrap();
            *guard = 7;
            held_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        });
        held_rx.recv().unwrap();
        // SAFETY: the child only takes the lock, reads an integer and
        // leaves with _exit (no destructor, no stdio of the parent).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let ok = LOCK.lock().is_ok_and(|guard| *guard == 7);
            // SAFETY: _exit ends the child without running anything of the
            // parent's.
            unsafe { libc::_exit(i32::from(!ok)) };
        }
        let mut status = 0;
        // SAFETY: `pid` is our child; `status` is a valid out pointer.
        let waited = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        assert_eq!(waited, pid);
        assert!(libc::WIFEXITED(status));
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "the child could not take the lock"
        );
        assert_eq!(*LOCK.lock().unwrap(), 7);
    }

    #[test]
    fn set_once_keeps_the_first_value() {
        let cell = SetOnce::new();
        assert!(cell.get().is_none());
        assert!(cell.set(vec![1]).is_ok());
        assert_eq!(cell.set(vec![2]), Err(vec![2]));
        assert_eq!(cell.get(), Some(&vec![1]));
    }
}
