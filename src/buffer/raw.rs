//! [`RawBytes`]: a buffer's bytes read only by copying from raw pointers,
//! for memory others may write meanwhile (see "Aliasing" in the module
//! docs of `buffer/`).

use std::marker::PhantomData;
use std::ptr::NonNull;

use super::AlignedBytes;
use crate::error::{Error, Result};

/// Bytes copied through this much private memory at a time by
/// [`RawBytes::for_each_chunk`]: a buffer on the stack (no allocation that
/// could fail), in the CPU's L1 cache when it is read again: the fastest
/// piece size measured (docs/benchmarks.md).
pub const CHUNK: usize = 4 << 10;

/// A range of a [`Buffer`]'s bytes that is never seen as a `&[u8]` unless
/// the buffer is private: it is read by copying (the aliasing rule,
/// `buffer/mod.rs`). Borrows the buffer, which keeps the memory alive.
#[derive(Clone, Copy)]
pub struct RawBytes<'a> {
    pub(super) ptr: NonNull<u8>,
    pub(super) len: usize,
    /// the buffer is private: nothing writes the memory while it lives
    pub(super) private: bool,
    pub(super) _buffer: PhantomData<&'a [u8]>,
}

impl<'a> RawBytes<'a> {
    /// Bytes Rust already holds as a slice (private: nothing writes them
    /// while the borrow lives).
    #[inline]
    pub fn from_slice(bytes: &'a [u8]) -> Self {
        RawBytes {
            ptr: NonNull::new(bytes.as_ptr().cast_mut()).unwrap_or(NonNull::dangling()),
            len: bytes.len(),
            private: true,
            _buffer: PhantomData,
        }
    }

    /// Number of bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Start of the memory.
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The bytes as a slice when the buffer is private (as
    /// [`Buffer::private_bytes`]).
    #[inline]
    pub fn private(&self) -> Option<&'a [u8]> {
        // SAFETY: `ptr` is valid for `len` bytes while the borrowed buffer
        // lives ('a), and the buffer is private: nothing writes the memory
        // while the slice lives (the aliasing rule, buffer/mod.rs).
        self.private
            .then(|| unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) })
    }

    /// The `len` bytes from `start`, or None when they are not all inside.
    #[inline]
    pub fn get(&self, start: usize, len: usize) -> Option<Self> {
        let end = start.checked_add(len)?;
        if end > self.len {
            return None;
        }
        Some(RawBytes {
            // SAFETY: start <= end <= self.len: inside (or one past the end
            // of) the same allocation.
            ptr: unsafe { NonNull::new_unchecked(self.ptr.as_ptr().add(start)) },
            len,
            ..*self
        })
    }

    /// The bytes in pieces of `size` (the last one shorter); `size` 0 is
    /// taken as 1.
    pub fn chunks(self, size: usize) -> impl Iterator<Item = RawBytes<'a>> {
        let size = size.max(1);
        (0..self.len).step_by(size).map(move |start| RawBytes {
            // SAFETY: start < self.len: inside the same allocation.
            ptr: unsafe { NonNull::new_unchecked(self.ptr.as_ptr().add(start)) },
            len: size.min(self.len - start),
            ..self
        })
    }

    /// Copy the first `out.len()` bytes into `out`, which must not be
    /// longer than these bytes (an error otherwise, nothing copied).
    #[inline]
    pub fn copy_to(&self, out: &mut [u8]) -> Result<()> {
        if out.len() > self.len {
            return Err(Error::internal(format!(
                "{} bytes copied out of {}",
                out.len(),
                self.len
            )));
        }
        // SAFETY: `ptr` is valid for reads of `len` >= out.len() bytes while
        // the buffer lives; `out` is a `&mut` Rust slice, which cannot
        // overlap memory a buffer shares. The copy goes through raw
        // pointers, never a `&[u8]` of the source (the aliasing rule,
        // buffer/mod.rs: a concurrent writer can only make the copy torn).
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Copy the `out.len()` bytes from `start` into `out`: for copies whose
    /// ranges follow from checked shapes.
    ///
    /// # Panics
    ///
    /// When the range is not inside these bytes, as indexing a slice with
    /// it would.
    #[inline]
    pub fn copy_at(&self, start: usize, out: &mut [u8]) {
        let end = start
            .checked_add(out.len())
            .filter(|&end| end <= self.len)
            .unwrap_or_else(|| panic!("range {start}+{} outside {} bytes", out.len(), self.len));
        debug_assert!(end <= self.len);
        // SAFETY: start + out.len() <= len, so the source lies inside the
        // buffer, valid while it lives; `out` is a `&mut` Rust slice, which
        // cannot overlap memory a buffer shares; raw pointers, no `&[u8]`
        // of the source (the aliasing rule, buffer/mod.rs).
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(start),
                out.as_mut_ptr(),
                out.len(),
            );
        }
    }

    /// Copy the `n` first bytes (at most `len`, and at most what `out`
    /// has room for without reallocating) to the end of `out`; returns how
    /// many were copied.
    pub fn extend_vec(&self, out: &mut Vec<u8>, n: usize) -> usize {
        let n = n.min(self.len).min(out.capacity() - out.len());
        let spare = out.spare_capacity_mut();
        // SAFETY: `spare` has room for `n` bytes (checked above) and, a
        // `&mut` into a Vec's own allocation, cannot overlap memory a
        // buffer shares; the source is valid for `n <= len` bytes; raw
        // pointers, no `&[u8]` of the source (the aliasing rule,
        // buffer/mod.rs).
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), spare.as_mut_ptr().cast::<u8>(), n);
        }
        let len = out.len() + n;
        // SAFETY: the `n` bytes past the old length were just written.
        unsafe { out.set_len(len) };
        n
    }

    /// A copy in new memory blockmap owns (aligned, writable, private).
    pub fn to_aligned(&self) -> Result<AlignedBytes> {
        let mut copy = AlignedBytes::for_overwrite(self.len)?;
        self.copy_to(copy.as_mut_slice())?;
        Ok(copy)
    }

    /// A copy in a new `Vec` (an error, not an abort, when it cannot be
    /// allocated).
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut copy = Vec::new();
        copy.try_reserve_exact(self.len)
            .map_err(|_| Error::out_of_memory(self.len))?;
        copy.resize(self.len, 0);
        self.copy_to(&mut copy)?;
        Ok(copy)
    }

    /// Call `f` on the bytes in order, in pieces of at most [`CHUNK`]
    /// bytes: the buffer's own memory when it is private, otherwise a
    /// private copy of each piece (made once, seen once by `f`).
    pub fn for_each_chunk(&self, mut f: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
        if let Some(bytes) = self.private() {
            return bytes.chunks(CHUNK).try_for_each(f);
        }
        let mut scratch = [0u8; CHUNK];
        for piece in self.chunks(CHUNK) {
            let copy = &mut scratch[..piece.len()];
            piece.copy_to(copy)?;
            f(copy)?;
        }
        Ok(())
    }

    /// The CRC32 of the bytes as read (each piece read once).
    pub fn crc32(&self) -> u32 {
        let mut hasher = crc32fast::Hasher::new();
        // the closure never fails, so neither does the walk
        let _ = self.for_each_chunk(|piece| {
            hasher.update(piece);
            Ok(())
        });
        hasher.finalize()
    }

    /// Whether the bytes equal `other`'s, as read.
    pub fn same_as(&self, other: RawBytes<'_>) -> bool {
        if self.len != other.len {
            return false;
        }
        if let (Some(a), Some(b)) = (self.private(), other.private()) {
            return a == b;
        }
        let mut at = 0;
        let mut theirs = [0u8; CHUNK];
        self.for_each_chunk(|mine| {
            let copy = &mut theirs[..mine.len()];
            other
                .get(at, mine.len())
                .ok_or_else(|| Error::internal("lengths checked"))?
                .copy_to(copy)?;
            at += mine.len();
            if mine == copy {
                Ok(())
            } else {
                Err(Error::internal("different"))
            }
        })
        .is_ok()
    }
}

impl std::fmt::Debug for RawBytes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawBytes")
            .field("len", &self.len)
            .field("private", &self.private)
            .finish_non_exhaustive()
    }
}
