//! Memory blockmap allocates: zeroed bytes aligned to [`ALIGNMENT`].

use std::alloc::Layout;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Mutex;

use super::ALIGNMENT;
use crate::error::{Error, Result};

/// Owned, zero-initialised bytes aligned to [`ALIGNMENT`].
///
/// This is how blockmap allocates array memory: fill it through
/// [`AlignedBytes::as_mut_slice`], then freeze it into a
/// [`Buffer`](super::Buffer).
pub struct AlignedBytes {
    ptr: NonNull<u8>,
    len: usize,
}

/// Allocations from this size on are anonymous mappings of their own: the
/// memory comes zeroed and untouched from the kernel (the system
/// allocator's `alloc_zeroed` at blockmap's 64-byte alignment would write
/// zeros over every page first, one page fault per 4 KiB before any data).
/// They do not ask for transparent huge pages (`MADV_HUGEPAGE`): where the
/// kernel's `defrag` setting is `madvise` (a common default), every fault in
/// an advised mapping may compact memory first, and memory that stays
/// mostly zero has each huge page zeroed whole on its first write (both
/// measured slower: docs/benchmarks.md, "Figures behind design choices").
const MAPPED_FROM: usize = 4 << 20;

/// [`AlignedBytes::filled_in_order`] maps the pages of fresh memory this
/// many bytes at a time, ahead of the writes: small enough to stay in the
/// CPU's cache (docs/benchmarks.md).
pub const FILL_PIECE: usize = 1 << 20;

/// Whether an allocation of `len` bytes is a mapping of its own.
fn is_mapped(len: usize) -> bool {
    cfg!(target_os = "linux") && len >= MAPPED_FROM
}

/// The length of the mapping that holds `len` bytes (whole pages).
fn mapping_len(len: usize) -> usize {
    len.next_multiple_of(super::page_size())
}

/// At most this many bytes of freed memory are kept for reuse.
///
/// Memory that was written has its pages in place: filling it again costs
/// a copy, where fresh memory costs a page fault per page first (a fresh
/// mapping), or a pass writing zeros (the system allocator's
/// `alloc_zeroed` at blockmap's 64-byte alignment always writes them).
/// glibc keeps freed memory below 32 MiB the same way, which is why
/// `torch.cat` and `np.concatenate` in a loop run on warm memory; blockmap
/// keeps its own here, for [`AlignedBytes::for_overwrite`]: a batch joined
/// in a loop (the collate function of a `DataLoader` without workers)
/// reuses the memory of the batch before it.
const POOL_BYTES: usize = 1 << 30;

/// Allocations smaller than this are not kept (writing their zeros costs
/// less than keeping track of them).
const POOL_FROM: usize = 64 << 10;

/// Freed allocations kept for [`AlignedBytes::for_overwrite`], by length
/// (the mapping's length for a mapping, the allocation's otherwise), each
/// with an id that gives the order they were freed in (the oldest go
/// first when room is needed); made in the fork generation `generation`
/// (a forked child does not reuse its parent's: writing to them would
/// copy each page first).
struct Pool {
    generation: u32,
    by_len: Option<hashbrown::HashMap<usize, Vec<(u64, usize)>>>,
    order: std::collections::VecDeque<(u64, usize)>,
    next_id: u64,
    bytes: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    generation: 0,
    by_len: None,
    order: std::collections::VecDeque::new(),
    next_id: 0,
    bytes: 0,
});

/// The length an allocation of `len` bytes is kept under.
fn pool_len(len: usize) -> usize {
    if is_mapped(len) {
        mapping_len(len)
    } else {
        len
    }
}

/// Memory of `len` bytes freed earlier, taken out of the pool.
fn reuse(len: usize) -> Option<NonNull<u8>> {
    if len < POOL_FROM {
        return None;
    }
    // try_lock: a fork while another thread held the lock leaves it held
    // in the child for good; the pool is then skipped, never waited for
    let mut pool = POOL.try_lock().ok()?;
    if pool.generation != crate::arc::generation() {
        return None;
    }
    let key = pool_len(len);
    let (_, address) = pool.by_len.as_mut()?.get_mut(&key)?.pop()?;
    pool.bytes -= key;
    NonNull::new(address as *mut u8)
}

/// Give back `len` bytes at `ptr`, allocated by [`AlignedBytes`] for this
/// same `len`: unmapped or deallocated.
///
/// # Safety
///
/// `ptr` must be the start of such an allocation, owned by the caller and
/// no longer used.
unsafe fn release(ptr: NonNull<u8>, len: usize) {
    if is_mapped(len) {
        // SAFETY: (caller) `ptr..ptr + mapping_len(len)` is a mapping made
        // by `allocate` for this `len`, unmapped only here.
        unsafe { libc::munmap(ptr.as_ptr().cast(), mapping_len(len)) };
    } else if let Ok(layout) = AlignedBytes::layout(len) {
        // SAFETY: (caller) allocated by `allocate` with this same layout.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
    }
}

/// Keep the allocation of `len` bytes at `ptr` for reuse, making room by
/// releasing the oldest ones kept; false when it is not kept (the caller
/// releases it).
fn keep(ptr: NonNull<u8>, len: usize) -> bool {
    let key = pool_len(len);
    if len < POOL_FROM || key > POOL_BYTES / 4 {
        return false;
    }
    let Ok(mut pool) = POOL.try_lock() else {
        return false;
    };
    let pool = &mut *pool;
    let generation = crate::arc::generation();
    if pool.generation != generation {
        // forked: what is kept is the parent's (its pages are shared with
        // it until written); forgotten here, left to the child's exit
        pool.by_len = None;
        pool.order.clear();
        pool.bytes = 0;
        pool.generation = generation;
    }
    let by_len = pool.by_len.get_or_insert_with(hashbrown::HashMap::new);
    while pool.bytes + key > POOL_BYTES {
        let Some((id, old_key)) = pool.order.pop_front() else {
            break;
        };
        let Some(kept) = by_len.get_mut(&old_key) else {
            continue;
        };
        // taken out by `reuse` already when it is not there
        if let Some(at) = kept.iter().position(|&(kept_id, _)| kept_id == id) {
            let (_, address) = kept.remove(at);
            pool.bytes -= old_key;
            // SAFETY: an allocation kept under this length (the mapping's
            // length is a length the mapping was made for) that `keep`
            // took over; the pool owned it alone since.
            unsafe { release(NonNull::new_unchecked(address as *mut u8), old_key) };
        }
    }
    if pool.order.try_reserve(1).is_err() {
        return false;
    }
    let kept = by_len.entry(key).or_default();
    if kept.try_reserve(1).is_err() {
        return false;
    }
    let id = pool.next_id;
    pool.next_id += 1;
    kept.push((id, ptr.as_ptr() as usize));
    pool.order.push_back((id, key));
    pool.bytes += key;
    true
}

/// A fresh private anonymous mapping of `len` bytes (page-aligned, so
/// aligned to [`ALIGNMENT`]); None when the kernel refuses it. With
/// `populate`, for memory about to be written in full, the kernel maps
/// every page at once (`MAP_POPULATE`, best effort) instead of one fault
/// per page on the first write (docs/benchmarks.md).
#[cfg(target_os = "linux")]
fn map_anonymous(len: usize, populate: bool) -> Option<NonNull<u8>> {
    let populate = if populate { libc::MAP_POPULATE } else { 0 };
    // SAFETY: a new anonymous private mapping aliases no existing memory;
    // the arguments are valid for any `len` (the kernel refuses what it
    // cannot map, returning MAP_FAILED, which is checked).
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | populate,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return None;
    }
    NonNull::new(ptr.cast::<u8>())
}

#[cfg(not(target_os = "linux"))]
fn map_anonymous(_len: usize, _populate: bool) -> Option<NonNull<u8>> {
    None
}

/// Map every page wholly inside `memory` now (`MADV_POPULATE_WRITE`, Linux
/// 5.14 and later; best effort, a no-op elsewhere), for memory about to be
/// written in full that may be fresh from the kernel: one call instead of a
/// page fault per 4 KiB on the first writes (as `MAP_POPULATE` does for
/// [`AlignedBytes::for_overwrite`]).
pub fn prefault(memory: &mut [std::mem::MaybeUninit<u8>]) {
    populate_write(memory.as_mut_ptr().cast::<u8>(), memory.len());
}

/// [`prefault`] of the `len` bytes at `start`, which the caller holds
/// exclusively (a `&mut` borrow of them).
fn populate_write(start: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        let page = super::page_size();
        let start = start as usize;
        let first = start.next_multiple_of(page);
        let end = (start + len) / page * page;
        if end > first {
            // SAFETY: `first..end` lies inside the caller's memory, which it
            // holds exclusively; MADV_POPULATE_WRITE faults its pages in as
            // a write would, without changing what they hold. An error (an
            // older kernel) is ignored: the writes then fault as usual.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    end - first,
                    libc::MADV_POPULATE_WRITE,
                )
            };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, len);
}

impl AlignedBytes {
    fn layout(len: usize) -> Result<Layout> {
        // never allocate zero bytes: the allocator does not allow it, and a
        // non-null, aligned pointer is wanted for empty arrays too
        Layout::from_size_align(len.max(1), ALIGNMENT).map_err(|_| {
            Error::OutOfMemory(format!(
                "cannot allocate {len} bytes: more than this machine can address"
            ))
        })
    }

    /// Allocate `len` zeroed bytes, or fail with [`Error::OutOfMemory`]
    /// (never abort) when the memory cannot be had.
    pub fn zeroed(len: usize) -> Result<Self> {
        Self::allocate(len, false)
    }

    /// Allocate `len` bytes that the caller is about to write in full (a
    /// copy, a join, a permutation): what they hold until then is
    /// unspecified (zeros, or bytes this process wrote before and freed),
    /// never uninitialised. Large ones reuse a mapping freed earlier when
    /// one of the same length is kept (warm pages: no page faults); fresh
    /// ones have all their pages mapped at once.
    pub fn for_overwrite(len: usize) -> Result<Self> {
        if let Some(ptr) = reuse(len) {
            return Ok(AlignedBytes { ptr, len });
        }
        Self::allocate(len, true)
    }

    /// `len` bytes written in full by `fill`, in order, a piece of at most
    /// [`FILL_PIECE`] bytes at a time: `fill(offset, piece)` writes the
    /// bytes at `offset..offset + piece.len()`. Memory reused from the pool
    /// is written as it is; fresh pages are mapped one piece ahead of the
    /// writes (`MADV_POPULATE_WRITE`), so that each piece is written while
    /// the zeros the kernel just wrote into it are still in the CPU cache
    /// (faster than every page mapped at the allocation, or a fault per
    /// page: docs/benchmarks.md). An error from `fill` is returned (the
    /// memory is released).
    pub fn filled_in_order(
        len: usize,
        mut fill: impl FnMut(usize, &mut [u8]) -> Result<()>,
    ) -> Result<Self> {
        let (mut bytes, fresh) = match reuse(len) {
            Some(ptr) => (AlignedBytes { ptr, len }, false),
            None => (Self::allocate(len, false)?, is_mapped(len)),
        };
        let mut offset = 0;
        while offset < len {
            let end = len.min(offset + FILL_PIECE);
            let piece = &mut bytes.as_mut_slice()[offset..end];
            if fresh {
                populate_write(piece.as_mut_ptr(), piece.len());
            }
            fill(offset, piece)?;
            offset = end;
        }
        Ok(bytes)
    }

    /// `len` bytes; with `filled` the caller writes them all at once (see
    /// [`map_anonymous`]).
    fn allocate(len: usize, filled: bool) -> Result<Self> {
        let layout = Self::layout(len)?;
        let ptr = if is_mapped(len) {
            map_anonymous(mapping_len(len), filled)
        } else {
            // SAFETY: the layout has a non-zero size (`len.max(1)`).
            NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
        };
        let ptr = ptr.ok_or_else(|| Error::out_of_memory(len))?;
        Ok(AlignedBytes { ptr, len })
    }

    /// Allocate aligned memory holding a copy of `data`.
    pub fn copy_from(data: &[u8]) -> Result<Self> {
        Self::filled_in_order(data.len(), |offset, piece| {
            piece.copy_from_slice(&data[offset..offset + piece.len()]);
            Ok(())
        })
    }

    /// The bytes, for reading.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points to `len` initialised (zeroed at allocation)
        // bytes that this value owns and that live as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, for writing.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes this the only
        // access to the memory while the slice lives.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Start of the memory.
    pub(super) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for AlignedBytes {
    fn drop(&mut self) {
        if keep(self.ptr, self.len) {
            return;
        }
        // SAFETY: `ptr` is the allocation `allocate` made for this same
        // `len` (or one of that length reused from the pool), owned by
        // `self` and released only here, once; nothing borrows it any more
        // (the borrows of `as_slice` end with `self`).
        unsafe { release(self.ptr, self.len) };
    }
}

// SAFETY: AlignedBytes uniquely owns its heap memory, like a Box<[u8]>.
unsafe impl Send for AlignedBytes {}
// SAFETY: shared references only give `&[u8]`, like a Box<[u8]>.
unsafe impl Sync for AlignedBytes {}

impl fmt::Debug for AlignedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBytes")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_allocations_are_zeroed_aligned_mappings() {
        let len = MAPPED_FROM + 12345;
        let mut bytes = AlignedBytes::zeroed(len).unwrap();
        assert_eq!(AlignedBytes::for_overwrite(len).unwrap().len(), len);
        assert_eq!(bytes.ptr().as_ptr() as usize % ALIGNMENT, 0);
        assert!(bytes.as_slice().iter().all(|&b| b == 0));
        bytes.as_mut_slice()[len - 1] = 7;
        let copy = AlignedBytes::copy_from(bytes.as_slice()).unwrap();
        assert_eq!(copy.as_slice()[len - 1], 7);
        assert_eq!(copy.len(), len);
    }

    #[test]
    fn filled_in_order_gives_every_piece_once_in_order() {
        // small (the allocator), pooled-size and mapped allocations, with a
        // last piece shorter than the others
        for len in [0, 100, POOL_FROM + 3, MAPPED_FROM + FILL_PIECE / 2 + 7] {
            let mut next = 0;
            let bytes = AlignedBytes::filled_in_order(len, |offset, piece| {
                assert_eq!(offset, next, "pieces come in order, none skipped");
                assert!(!piece.is_empty() && piece.len() <= FILL_PIECE);
                for (i, byte) in piece.iter_mut().enumerate() {
                    *byte = u8::try_from((offset + i) % 251).unwrap();
                }
                next += piece.len();
                Ok(())
            })
            .unwrap();
            assert_eq!(next, len);
            assert_eq!(bytes.len(), len);
            assert_eq!(bytes.ptr().as_ptr() as usize % ALIGNMENT, 0);
            assert!(bytes
                .as_slice()
                .iter()
                .enumerate()
                .all(|(i, &b)| usize::from(b) == i % 251));
        }
        // the first error stops the filling and is returned
        let mut calls = 0;
        let failed = AlignedBytes::filled_in_order(3 * FILL_PIECE, |offset, _| {
            calls += 1;
            if offset > 0 {
                return Err(crate::error::Error::invalid("stop here"));
            }
            Ok(())
        });
        assert!(failed.is_err());
        assert_eq!(calls, 2);
    }

    #[test]
    fn freed_mappings_are_reused_for_overwriting_only() {
        for len in [POOL_FROM + 100, MAPPED_FROM + 4096 * 3 + 5] {
            reuse_round_trip(len);
        }
        // what is kept stays within its bound
        let many: Vec<_> = (0..8)
            .map(|_| AlignedBytes::for_overwrite(POOL_BYTES / 8).unwrap())
            .collect();
        drop(many);
        assert!(POOL.lock().unwrap().bytes <= POOL_BYTES);
    }

    fn reuse_round_trip(len: usize) {
        let mut first = AlignedBytes::for_overwrite(len).unwrap();
        first.as_mut_slice().fill(7);
        let address = first.ptr();
        drop(first);
        // zeroed memory never comes from the pool
        let zeroed = AlignedBytes::zeroed(len).unwrap();
        assert!(zeroed.as_slice().iter().all(|&b| b == 0));
        // other tests may take it first (they run on other threads)
        let again = AlignedBytes::for_overwrite(len).unwrap();
        if again.ptr() == address {
            assert!(again.as_slice().iter().all(|&b| b == 7));
        }
        assert_eq!(again.len(), len);
        drop(zeroed);
        drop(again);
    }

    #[test]
    fn impossible_allocation_is_out_of_memory() {
        for len in [usize::MAX - 10, isize::MAX as usize] {
            assert!(matches!(
                AlignedBytes::zeroed(len),
                Err(Error::OutOfMemory(_))
            ));
        }
    }

    #[test]
    fn zeroed_and_aligned() {
        for len in [0, 1, 63, 64, 1000] {
            let bytes = AlignedBytes::zeroed(len).unwrap();
            assert_eq!(bytes.len(), len);
            assert!((bytes.ptr().as_ptr() as usize).is_multiple_of(ALIGNMENT));
            assert!(bytes.as_slice().iter().all(|&b| b == 0));
        }
        assert_eq!(
            AlignedBytes::copy_from(&[1, 2, 3]).unwrap().as_slice(),
            &[1, 2, 3]
        );
    }
}
