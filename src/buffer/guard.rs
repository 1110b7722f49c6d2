//! Surviving a mapped file that shrinks.
//!
//! A file mapping is only as long-lived as the file: when another program
//! truncates or rewrites a file (`open(p, "wb")`, `shutil.copy`, a writer
//! that does not replace the file by renaming), reading the pages past its
//! new end raises SIGBUS, which kills the process. numpy's memmap,
//! safetensors' `safe_open` and LMDB share the hazard; the JVM turns such a
//! fault into an exception.
//!
//! blockmap registers every file mapping it makes here. A SIGBUS handler,
//! installed with the first mapping, looks the faulting address up among
//! the registered mappings: when it lies in one, the rest of that mapping
//! (from the faulting page to its end) is replaced by zero pages and the
//! mapping is marked as *broken*; the faulting read then completes, reading
//! zeros, and the process lives on. Operations that read a broken mapping
//! through blockmap (saving, pickling, copying, sharing) then fail with an
//! I/O error saying what happened ([`Guard::is_broken`]). A fault anywhere
//! else goes to the handler that was installed before blockmap's (or to the
//! default action, which ends the process as it would have without
//! blockmap).
//!
//! The registry is lock-free (atomics in chunks that are never freed), so
//! that the handler, which may interrupt any code, never waits on a lock.

use crate::arc::ForkMutex;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// One registered mapping: `start == 0` is a free slot, `CLAIMED` one being
/// filled in.
struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
    writable: AtomicBool,
    broken: AtomicBool,
}

const CLAIMED: usize = usize::MAX;
const SLOTS_PER_CHUNK: usize = 64;

struct Chunk {
    slots: [Slot; SLOTS_PER_CHUNK],
    next: AtomicPtr<Chunk>,
}

impl Chunk {
    const fn new() -> Self {
        #[allow(clippy::declare_interior_mutable_const)] // copied into the array, as meant
        const FREE: Slot = Slot {
            start: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            writable: AtomicBool::new(false),
            broken: AtomicBool::new(false),
        };
        Chunk {
            slots: [FREE; SLOTS_PER_CHUNK],
            next: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    fn next(&self) -> Option<&'static Chunk> {
        let next = self.next.load(Ordering::Acquire);
        // SAFETY: `next` is null or a chunk leaked by `claim`, never freed.
        unsafe { next.as_ref() }
    }
}

static FIRST: Chunk = Chunk::new();

/// The registration of one mapping; dropping it unregisters the mapping
/// (before the mapping itself is unmapped).
#[derive(Debug)]
pub(super) struct Guard {
    slot: &'static Slot,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("len", &self.len.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Guard {
    /// Register the mapping of `len` bytes at `start` (writable when it was
    /// mapped copy-on-write), installing the handler on first use.
    pub(super) fn register(start: *const u8, len: usize, writable: bool) -> Option<Guard> {
        if len == 0 || start.is_null() {
            return None;
        }
        install();
        let slot = claim();
        slot.len.store(len, Ordering::Relaxed);
        slot.writable.store(writable, Ordering::Relaxed);
        slot.broken.store(false, Ordering::Relaxed);
        slot.start.store(start as usize, Ordering::Release);
        Some(Guard { slot })
    }

    /// Whether the file shrank under the mapping: part of it was lost and
    /// now reads as zeros.
    pub(super) fn is_broken(&self) -> bool {
        self.slot.broken.load(Ordering::Acquire)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.slot.start.store(0, Ordering::Release);
    }
}

/// A free slot, marked `CLAIMED`; a new chunk is linked when all are taken.
fn claim() -> &'static Slot {
    let mut chunk: &'static Chunk = &FIRST;
    loop {
        for slot in &chunk.slots {
            if slot
                .start
                .compare_exchange(0, CLAIMED, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return slot;
            }
        }
        if let Some(next) = chunk.next() {
            chunk = next;
            continue;
        }
        let new: &'static Chunk = Box::leak(Box::new(Chunk::new()));
        match chunk.next.compare_exchange(
            std::ptr::null_mut(),
            std::ptr::from_ref(new).cast_mut(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => chunk = new,
            Err(_) => {
                // another thread linked one first: use it (ours stays
                // leaked, unused: at most one chunk per race)
                chunk = chunk.next().unwrap_or(new);
            }
        }
    }
}

#[cfg(unix)]
mod handler {
    use super::{Chunk, Ordering, CLAIMED, FIRST};

    /// The action that was installed before blockmap's, written once before
    /// blockmap's handler is installed, read by the handler.
    static mut PREVIOUS: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();
    static mut PAGE_SIZE: usize = 4096;

    pub(super) fn install() {
        // SAFETY: called under `install`'s lock, before the handler exists
        // (or returning at once when it does), so nothing reads the statics
        // while they are written; sigaction gets a fully initialised action
        // and a place for the previous one, or none to only read.
        unsafe {
            // already in place (installed by a thread of the parent of a
            // forked child, which had not noted it yet): `PREVIOUS` was
            // written by that same sigaction call
            let mut current: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &raw mut current) == 0
                && current.sa_sigaction == on_sigbus as *const () as libc::sighandler_t
            {
                return;
            }
            PAGE_SIZE = super::super::page_size();
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
            libc::sigemptyset(&raw mut action.sa_mask);
            let previous = (&raw mut PREVIOUS).cast::<libc::sigaction>();
            libc::sigaction(libc::SIGBUS, &raw const action, previous);
        }
    }

    /// The registered mapping holding `address`, as (slot start, len,
    /// writable, broken flag).
    fn find(
        address: usize,
    ) -> Option<(usize, usize, bool, &'static std::sync::atomic::AtomicBool)> {
        let mut chunk: &'static Chunk = &FIRST;
        loop {
            for slot in &chunk.slots {
                let start = slot.start.load(Ordering::Acquire);
                if start == 0 || start == CLAIMED {
                    continue;
                }
                let len = slot.len.load(Ordering::Relaxed);
                if address >= start && address - start < len {
                    let writable = slot.writable.load(Ordering::Relaxed);
                    return Some((start, len, writable, &slot.broken));
                }
            }
            chunk = chunk.next()?;
        }
    }

    extern "C" fn on_sigbus(
        signal: libc::c_int,
        info: *mut libc::siginfo_t,
        context: *mut libc::c_void,
    ) {
        // SAFETY: the kernel passes a valid siginfo for a SA_SIGINFO handler.
        let address = unsafe { (*info).si_addr() } as usize;
        if let Some((start, len, writable, broken)) = find(address) {
            // SAFETY: PAGE_SIZE was written once before the handler existed.
            let page = unsafe { PAGE_SIZE };
            let from = address & !(page - 1);
            let from = from.max(start);
            let end = start + len;
            let protection = if writable {
                libc::PROT_READ | libc::PROT_WRITE
            } else {
                libc::PROT_READ
            };
            // SAFETY: [from, end) lies inside a live mapping that blockmap
            // made and registered (the faulting access went through a buffer
            // that keeps it alive; it is unregistered before it is
            // unmapped): MAP_FIXED replaces those pages of it with private
            // zero pages, and the unmapping of the whole mapping later
            // covers them too. mmap is a plain system call, safe in a
            // signal handler.
            let replaced = unsafe {
                libc::mmap(
                    from as *mut libc::c_void,
                    end - from,
                    protection,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if replaced != libc::MAP_FAILED {
                broken.store(true, Ordering::Release);
                // returning re-runs the faulting read, which now reads zeros
                return;
            }
        }
        forward(signal, info, context);
    }

    /// Hand the signal to the action installed before blockmap's.
    fn forward(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
        // SAFETY: PREVIOUS was written by `install` before this handler was
        // installed; the calls follow the previous action's own contract.
        unsafe {
            let previous = (&raw const PREVIOUS).cast::<libc::sigaction>().read();
            let handler = previous.sa_sigaction;
            if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
                // the default action: returning re-runs the faulting access,
                // which faults again and ends the process as it would have
                libc::sigaction(signal, &raw const previous, std::ptr::null_mut());
                return;
            }
            if previous.sa_flags & libc::SA_SIGINFO != 0 {
                let function: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(handler);
                function(signal, info, context);
            } else {
                let function: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
                function(signal);
            }
        }
    }
}

/// Install the handler once per process (its children inherit it). Not
/// under `std::sync::Once`: a fork while another thread was installing would
/// leave the child's `Once` running forever, and every mapping there
/// waiting; a [`ForkMutex`] is taken over in the child instead, which then
/// installs again if the parent had not finished (the action then chains to
/// the one in place, which is the previous one or blockmap's own: the
/// handler's own SIGBUS from a thread of the parent cannot be pending in
/// the child, so the chain ends).
#[cfg(unix)]
fn install() {
    static INSTALLED: ForkMutex<bool> = ForkMutex::new(false);
    // no callback runs under the lock: this thread cannot hold it already
    if let Ok(mut installed) = INSTALLED.lock() {
        if !*installed {
            handler::install();
            *installed = true;
        }
    }
}

#[cfg(not(unix))]
fn install() {}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_and_chunks_grow() {
        let area = vec![0u8; 10 * SLOTS_PER_CHUNK];
        let guards: Vec<Guard> = (0..3 * SLOTS_PER_CHUNK)
            .map(|i| Guard::register(area[i % area.len()..].as_ptr(), 1, false).unwrap())
            .collect();
        assert!(FIRST.next().is_some(), "more than one chunk");
        assert!(guards.iter().all(|g| !g.is_broken()));
        drop(guards);
        // freed slots are reused: registering as many again links no chunk
        // beyond the ones there (other tests may hold a few slots meanwhile)
        let chunks = || {
            let mut count = 1;
            let mut chunk = &FIRST;
            while let Some(next) = chunk.next() {
                count += 1;
                chunk = next;
            }
            count
        };
        let before = chunks();
        let again: Vec<Guard> = (0..2 * SLOTS_PER_CHUNK)
            .map(|_| Guard::register(area.as_ptr(), 1, false).unwrap())
            .collect();
        assert_eq!(chunks(), before);
        drop(again);
        assert!(Guard::register(std::ptr::null(), 1, false).is_none());
    }
}
