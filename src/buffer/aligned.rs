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
        let layout = Self::layout(len)?;
        // SAFETY: the layout has a non-zero size (`len.max(1)`).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or_else(|| Error::out_of_memory(len))?;
        Ok(AlignedBytes { ptr, len })
    }

    /// Allocate aligned memory holding a copy of `data`.
    pub fn copy_from(data: &[u8]) -> Result<Self> {
        let mut bytes = Self::zeroed(data.len())?;
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
