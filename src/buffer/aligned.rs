//! Memory blockmap allocates: zeroed bytes aligned to [`ALIGNMENT`].

use std::alloc::Layout;
use std::fmt;
use std::ptr::NonNull;

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
/// Memory that the caller then fills entirely asks for transparent huge
/// pages, as numpy's allocator does from 4 MiB: filling it takes one page
/// fault per 2 MiB. Memory that may stay mostly zero (the fill of
/// `keys_to_properties`) does not: untouched 4 KiB pages are never mapped,
/// where a huge page would be zeroed whole on the first write into it
/// (measured on W's `keys_to_properties`: 1.3 s without the advice, 7 s
/// with it, for 2.7 GB mostly zeros).
const MAPPED_FROM: usize = 4 << 20;

/// Whether an allocation of `len` bytes is a mapping of its own.
fn is_mapped(len: usize) -> bool {
    cfg!(target_os = "linux") && len >= MAPPED_FROM
}

/// A fresh private anonymous mapping of `len` bytes (page-aligned, so
/// aligned to [`ALIGNMENT`]), advised to use huge pages if `huge_pages`;
/// None when the kernel refuses it.
#[cfg(target_os = "linux")]
fn map_anonymous(len: usize, huge_pages: bool) -> Option<NonNull<u8>> {
    // SAFETY: a new anonymous private mapping aliases no existing memory;
    // the arguments are valid for any `len` (the kernel refuses what it
    // cannot map, returning MAP_FAILED, which is checked).
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return None;
    }
    if huge_pages {
        // SAFETY: `ptr..ptr + len` is the mapping just made, owned here;
        // MADV_HUGEPAGE changes neither its contents nor its validity, only
        // how the kernel backs it. An error (huge pages off) is ignored.
        unsafe { libc::madvise(ptr, len, libc::MADV_HUGEPAGE) };
    }
    NonNull::new(ptr.cast::<u8>())
}

#[cfg(not(target_os = "linux"))]
fn map_anonymous(_len: usize, _huge_pages: bool) -> Option<NonNull<u8>> {
    None
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

    /// Allocate `len` zeroed bytes that the caller is about to write in
    /// full (a copy, a permutation): large ones ask for huge pages.
    pub fn zeroed_to_fill(len: usize) -> Result<Self> {
        Self::allocate(len, true)
    }

    fn allocate(len: usize, huge_pages: bool) -> Result<Self> {
        let layout = Self::layout(len)?;
        let ptr = if is_mapped(len) {
            map_anonymous(len, huge_pages)
        } else {
            // SAFETY: the layout has a non-zero size (`len.max(1)`).
            NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
        };
        let ptr = ptr.ok_or_else(|| Error::out_of_memory(len))?;
        Ok(AlignedBytes { ptr, len })
    }

    /// Allocate aligned memory holding a copy of `data`.
    pub fn copy_from(data: &[u8]) -> Result<Self> {
        let mut bytes = Self::zeroed_to_fill(data.len())?;
        bytes.as_mut_slice().copy_from_slice(data);
        Ok(bytes)
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
        if is_mapped(self.len) {
            // SAFETY: `ptr..ptr + len` is the mapping made in `zeroed` for
            // this same `len`, unmapped only here, once; nothing borrows it
            // any more (the borrows of `as_slice` end with `self`).
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
            return;
        }
        // the layout was valid at allocation, for the same `len`
        if let Ok(layout) = Self::layout(self.len) {
            // SAFETY: `ptr` was allocated in `zeroed` with this same layout
            // and is freed only here, once.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
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
        assert!(AlignedBytes::zeroed_to_fill(len)
            .unwrap()
            .as_slice()
            .iter()
            .all(|&b| b == 0));
        assert_eq!(bytes.ptr().as_ptr() as usize % ALIGNMENT, 0);
        assert!(bytes.as_slice().iter().all(|&b| b == 0));
        bytes.as_mut_slice()[len - 1] = 7;
        let copy = AlignedBytes::copy_from(bytes.as_slice()).unwrap();
        assert_eq!(copy.as_slice()[len - 1], 7);
        assert_eq!(copy.len(), len);
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
