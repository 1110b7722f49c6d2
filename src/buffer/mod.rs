//! Reference-counted bytes with an owner.
//!
//! All array and label data in blockmap lives in a [`Buffer`]: a pointer, a
//! length, a flag saying whether the memory may be written, and a shared
//! owner that keeps the memory alive. Four kinds of owner exist, one module
//! each, and this folder holds every `unsafe` that owns memory:
//!
//! - memory Rust allocated ([`AlignedBytes`], aligned to [`ALIGNMENT`]
//!   bytes; `aligned.rs`);
//! - a file mapping, read-only or copy-on-write ([`Buffer::map_file`];
//!   `mapped.rs`);
//! - a shared-memory segment other processes can map ([`SharedBytes`];
//!   `shared.rs`);
//! - a foreign owner: anything that pins memory it manages, such as a held
//!   Python buffer export in the binding ([`Buffer::from_foreign`],
//!   [`Buffer::from_owner`]; here).
//!
//! Cloning or slicing a buffer never copies: it adds a reference to the
//! owner, which is dropped exactly when the last clone or slice goes.
//!
//! Memory seen through a buffer is treated as shared: Rust only reads it.
//! Writes happen outside Rust, through views handed to foreign code (numpy
//! arrays in the binding) and only when the buffer is writable, the same
//! contract numpy arrays sharing memory have with each other.
//!
//! # Aliasing
//!
//! The one rule every `SAFETY` comment that reads buffer memory cites as
//! "the aliasing rule (`buffer/mod.rs`)":
//!
//! 1. **A `&[u8]` (or `&[T]`) over a buffer's memory exists only while
//!    nobody can write that memory.** A Rust shared reference promises the
//!    compiler that the bytes do not change while it lives; a writable numpy
//!    view or torch tensor written from another thread, a shared-memory
//!    segment another process maps writable, or a file mapping another
//!    program writes (or the SIGBUS guard replaces with zeros) would break
//!    that promise, which is undefined behaviour even where it looks
//!    harmless (the compiler may read a byte twice and see two values, or
//!    once and reuse it after it changed).
//! 2. **Private memory** is memory nobody else can write: memory blockmap
//!    allocated and froze while it held the only reference (a read-only
//!    buffer made by [`Buffer::into_read_only`] on the last handle, by
//!    [`Buffer::snapshot`] or [`Buffer::filled`]), owners moved into
//!    [`Buffer::from_owner`] (a `Vec`, an anonymous mapping), and foreign
//!    memory nobody writes ([`Buffer::from_immutable_foreign`]: a Python
//!    `bytes` object in the binding). Only such a
//!    buffer gives a `&[u8]`: [`Buffer::private_bytes`]. Freezing is one
//!    way: once frozen, no writable handle to the memory can exist again
//!    (a buffer never becomes writable, and every handle was read-only or
//!    gone when it froze).
//! 3. **Every other buffer is read by copying from raw pointers**
//!    ([`Buffer::raw`]: [`RawBytes::copy_to`], [`RawBytes::to_aligned`],
//!    [`RawBytes::for_each_chunk`], [`RawBytes::crc32`]), never through a
//!    reference, and what is checked (headers, labels, CRCs) is checked on
//!    the private copy, so that what was checked is what is used. File
//!    mappings (read-only or copy-on-write: Linux shows other programs'
//!    writes on pages not yet copied), shared-memory segments and foreign
//!    owners (Python buffer exports, even read-only ones: a read-only view
//!    may look at a writable array) are never private.
//! 4. A copy made while another thread or process writes the source may
//!    hold a mix of old and new bytes (a torn read, as numpy's own copies
//!    give); that is the snapshot contract of saves and pickles: the bytes
//!    copied are what is written, hashed and validated. Rust's memory model
//!    still calls a plain copy concurrent with a write in the same process
//!    a data race; there is no stable atomic memcpy (RFC 3301), and the
//!    writers are foreign code (numpy, torch, other processes) outside the
//!    Rust abstract machine, so the raw copies are the closest sound form
//!    (the approach of rust-vmm's `VolatileSlice` for guest memory). Miri
//!    cannot check this here (it is not installed, and cannot run numpy or
//!    other processes).
//! 5. There is no escape: no method gives a `&[u8]` over a buffer that is
//!    not private.
//!
//! This is arrow-rs' split of `Buffer` (immutable, shared) from
//! `MutableBuffer` (uniquely owned), adapted to memory that blockmap
//! shares writable with numpy on purpose: [`AlignedBytes`] is the uniquely
//! owned, mutable form; a private [`Buffer`] the immutable one; every other
//! [`Buffer`] is shared and read through copies.
//!
//! [`FixedWriter`] (`writer.rs`) writes into memory of fixed capacity, for
//! building archives in place.

mod aligned;
mod guard;
mod mapped;
mod raw;
mod shared;
mod writer;

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::arc::ForkArc;

pub use aligned::{prefault, AlignedBytes};
pub use mapped::{page_size, Advice, MapMode};
pub use raw::{RawBytes, CHUNK};
pub use shared::{SegmentArena, SharedBytes};
pub use writer::{seek_target, Allocate, FixedWriter, NextData, PieceMemory, PiecedWriter};

use crate::error::{Error, Result};

/// Alignment of the memory blockmap allocates, in bytes: enough for every
/// element type and for SIMD loads, and the alignment of payloads in the
/// files blockmap writes.
pub const ALIGNMENT: usize = 64;

/// [`Buffer::filled`] makes allocations from this size on mappings of
/// their own.
pub const FILLED_MAPPED_FROM: usize = 256 << 10;

/// What keeps a buffer's memory alive. The fields are never read: they are
/// held so that dropping the last buffer drops them.
#[allow(dead_code)]
enum Storage {
    Rust(AlignedBytes),
    Mapped(mapped::Mapping),
    Foreign(Box<dyn Any + Send + Sync>),
    Shared(SharedBytes),
}

/// A [`Storage`] and whether its memory is frozen: private to blockmap's
/// readers (see "Aliasing" in the module docs). Set once, never cleared.
struct Owner {
    storage: Storage,
    frozen: AtomicBool,
}

impl Owner {
    fn new(storage: Storage, frozen: bool) -> ForkArc<Self> {
        ForkArc::new(Owner {
            storage,
            frozen: AtomicBool::new(frozen),
        })
    }
}

/// The kind of owner behind a [`Buffer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerKind {
    /// memory blockmap allocated
    Rust,
    /// a file mapping
    Mapped,
    /// memory owned by someone else (e.g. a Python object)
    Foreign,
    /// a shared-memory segment other processes can map
    Shared,
}

/// Reference-counted bytes with an owner; see the [module docs](self).
#[derive(Clone)]
pub struct Buffer {
    storage: ForkArc<Owner>,
    ptr: NonNull<u8>,
    len: usize,
    writable: bool,
}

// SAFETY: the owner is Send + Sync (every `Storage` variant is), and the
// buffer itself only reads the memory it points to; concurrent writes come
// from foreign code under the shared-memory contract of the module docs.
unsafe impl Send for Buffer {}
// SAFETY: as for Send; `&Buffer` gives nothing but reads.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// An empty buffer.
    ///
    /// # Panics
    ///
    /// If the allocator cannot give the one byte an empty buffer holds
    /// (so that its pointer is non-null and aligned), like any allocation
    /// of a `Box` or `Vec`.
    pub fn empty() -> Self {
        Self::from(AlignedBytes::zeroed(0).expect("one byte can be allocated"))
    }

    /// Allocate aligned memory holding a copy of `data`.
    pub fn copy_from(data: &[u8]) -> Result<Self> {
        Ok(Self::from(AlignedBytes::copy_from(data)?))
    }

    /// `len` bytes written in full by `fill`, then read-only: for memory
    /// made once and kept (a mapped load's labels).
    ///
    /// From [`FILLED_MAPPED_FROM`] bytes on, the memory is a mapping of its
    /// own with all its pages mapped at once (`MAP_POPULATE`) instead of
    /// one fault per page as `fill` writes it, and without huge pages,
    /// whose compaction made some loads several times slower
    /// (docs/benchmarks.md).
    pub fn filled(len: usize, fill: impl FnOnce(&mut [u8]) -> Result<()>) -> Result<Self> {
        if !cfg!(target_os = "linux") || len < FILLED_MAPPED_FROM {
            let mut bytes = AlignedBytes::for_overwrite(len)?;
            fill(bytes.as_mut_slice())?;
            return Ok(Self::from(bytes).into_read_only());
        }
        let mut map = memmap2::MmapOptions::new()
            .len(len)
            .populate()
            .map_anon()
            .map_err(|_| Error::out_of_memory(len))?;
        fill(&mut map)?;
        Ok(Buffer::from_owner(map))
    }

    /// Read-only view of memory owned by `owner` (e.g. a `Vec<u8>`); the
    /// owner is moved behind the reference count first, so the bytes it
    /// gives are at a stable address. The buffer is private (see
    /// "Aliasing" in the module docs): `owner` must be one whose bytes
    /// nothing else writes once it is moved here (a `Vec`, a `Box<[u8]>`,
    /// an anonymous mapping; not a file mapping).
    pub fn from_owner<T: AsRef<[u8]> + Send + Sync + 'static>(owner: T) -> Self {
        let owner: Box<T> = Box::new(owner);
        let bytes = (*owner).as_ref();
        let ptr = NonNull::new(bytes.as_ptr().cast_mut()).unwrap_or(NonNull::dangling());
        let len = bytes.len();
        Buffer {
            // frozen: the owner was moved here, and the buffer only reads it
            storage: Owner::new(Storage::Foreign(owner), true),
            ptr,
            len,
            writable: false,
        }
    }

    /// View memory kept alive by a foreign `owner`.
    ///
    /// # Safety
    ///
    /// - `ptr` must be valid for reads of `len` bytes for as long as `owner`
    ///   is alive, and the memory must not be freed or moved before `owner`
    ///   is dropped (a held Python buffer export guarantees both);
    /// - if `writable` is true, foreign code may write to the memory through
    ///   views of this buffer, so the owner must allow that.
    pub unsafe fn from_foreign(
        ptr: NonNull<u8>,
        len: usize,
        writable: bool,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Self {
        Buffer {
            // never frozen: whoever else holds the memory may write it
            storage: Owner::new(Storage::Foreign(owner), false),
            ptr,
            len,
            writable,
        }
    }

    /// View memory kept alive by a foreign `owner` that nobody writes for
    /// as long as it lives (a Python `bytes` object): read-only and private
    /// (see "Aliasing" in the module docs).
    ///
    /// # Safety
    ///
    /// As [`Buffer::from_foreign`], and nobody (no thread, no foreign
    /// code) writes the memory while `owner` lives.
    pub unsafe fn from_immutable_foreign(
        ptr: NonNull<u8>,
        len: usize,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Self {
        Buffer {
            // frozen: the caller vouches that nobody writes the memory
            storage: Owner::new(Storage::Foreign(owner), true),
            ptr,
            len,
            writable: false,
        }
    }

    /// A view of `len` bytes starting at `offset`, sharing the owner.
    pub fn slice(&self, offset: usize, len: usize) -> Result<Self> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => {}
            _ => {
                return Err(Error::invalid(format!(
                    "slice [{offset}, {offset}+{len}) is outside a buffer of {} bytes",
                    self.len
                )))
            }
        }
        // SAFETY: offset + len <= self.len, so the new pointer stays inside
        // (or one past the end of) the same allocation.
        let ptr = unsafe { NonNull::new_unchecked(self.ptr.as_ptr().add(offset)) };
        Ok(Buffer {
            storage: ForkArc::clone(&self.storage),
            ptr,
            len,
            writable: self.writable,
        })
    }

    /// The same memory, never writable through views of this buffer.
    /// Memory blockmap allocated becomes private (see "Aliasing" in the
    /// module docs) when this was its last handle.
    #[must_use]
    pub fn into_read_only(mut self) -> Self {
        self.writable = false;
        // unique: no other handle exists, and none can be made meanwhile
        // (that takes a handle); every later one is cloned from this
        // read-only one. An object made before a fork is never unique.
        if matches!(self.storage.storage, Storage::Rust(_))
            && ForkArc::strong_count(&self.storage) == 1
        {
            self.storage.frozen.store(true, Ordering::Release);
        }
        self
    }

    /// A private copy (see "Aliasing" in the module docs) of the bytes, in
    /// new memory blockmap owns, read-only; made by raw copies, so `self`
    /// may be written meanwhile (the copy then holds some of each).
    pub fn snapshot(&self) -> Result<Self> {
        Ok(Buffer::from(self.raw().to_aligned()?).into_read_only())
    }

    /// Whether nobody but blockmap's readers can write the memory (see
    /// "Aliasing" in the module docs).
    pub fn is_private(&self) -> bool {
        !self.writable && self.storage.frozen.load(Ordering::Acquire)
    }

    /// The bytes as a slice, when the buffer is private (see "Aliasing" in
    /// the module docs); `None` for memory others may write, which is read
    /// through [`Buffer::raw`].
    pub fn private_bytes(&self) -> Option<&[u8]> {
        // SAFETY: every constructor guarantees `ptr` is valid for `len`
        // bytes while `storage` lives, and `self` holds a reference to it;
        // the memory is private, so nothing writes it while the slice lives
        // (the aliasing rule, buffer/mod.rs).
        self.is_private()
            .then(|| unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) })
    }

    /// The bytes, read through raw copies (see "Aliasing" in the module
    /// docs): for memory others may write while it is read.
    pub fn raw(&self) -> RawBytes<'_> {
        RawBytes {
            ptr: self.ptr,
            len: self.len,
            private: self.is_private(),
            _buffer: PhantomData,
        }
    }

    /// The same memory, read-only unless `writable` (a buffer that is not
    /// writable never becomes writable).
    #[must_use]
    pub fn with_access(self, writable: bool) -> Self {
        if writable {
            self
        } else {
            self.into_read_only()
        }
    }

    /// A copy of the bytes in a new `Vec`, made by raw copies (see
    /// "Aliasing" in the module docs).
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        self.raw().to_vec()
    }

    /// The foreign owner (of [`Buffer::from_foreign`] or
    /// [`Buffer::from_owner`]) when it is a `T`: the binding finds the
    /// Python object behind memory it was given this way.
    pub fn foreign_owner<T: Any>(&self) -> Option<&T> {
        match &self.storage.storage {
            Storage::Foreign(owner) => owner.downcast_ref::<T>(),
            _ => None,
        }
    }

    /// Start of the memory.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether views of this buffer may write to the memory.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Whether the start of the memory is a multiple of `align` (a power of two).
    pub fn is_aligned_to(&self, align: usize) -> bool {
        (self.ptr.as_ptr() as usize).is_multiple_of(align)
    }

    /// Which kind of owner keeps this memory alive.
    pub fn owner_kind(&self) -> OwnerKind {
        match self.storage.storage {
            Storage::Rust(_) => OwnerKind::Rust,
            Storage::Mapped(_) => OwnerKind::Mapped,
            Storage::Foreign(_) => OwnerKind::Foreign,
            Storage::Shared(_) => OwnerKind::Shared,
        }
    }

    /// The file this buffer maps (its device and inode), when it maps one:
    /// a save must not write that file in place while it reads the buffer.
    pub fn mapped_file(&self) -> Option<(u64, u64)> {
        match &self.storage.storage {
            Storage::Mapped(mapping) => mapping.file(),
            _ => None,
        }
    }

    /// Where this buffer lies when its owner is a shared-memory segment
    /// this process can send on (it holds the segment's descriptor): the
    /// segment, and the offset of the buffer's first byte in it.
    pub fn shared_segment(&self) -> Option<(&SharedBytes, usize)> {
        match &self.storage.storage {
            Storage::Shared(segment) if segment.file().is_some() => {
                let offset = self.ptr.as_ptr() as usize - segment.as_ptr() as usize;
                Some((segment, offset))
            }
            _ => None,
        }
    }

    /// The whole shared-memory segment this buffer lies in, as a buffer.
    pub fn whole_segment(&self) -> Option<Buffer> {
        match &self.storage.storage {
            Storage::Shared(segment) => Some(Buffer {
                storage: ForkArc::clone(&self.storage),
                ptr: NonNull::new(segment.as_ptr().cast_mut()).unwrap_or(NonNull::dangling()),
                len: segment.len(),
                writable: self.writable,
            }),
            _ => None,
        }
    }

    /// An error when the memory is gone: the buffer maps a file that
    /// another program truncated (the lost part reads as zeros, see
    /// `buffer/guard.rs`).
    pub fn check_intact(&self) -> Result<()> {
        match &self.storage.storage {
            Storage::Mapped(mapping) if mapping.is_broken() => Err(Error::io(
                "reading mapped data",
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the mapped file was truncated or rewritten by another program while \
                     mapped: the part of the data past its new end is lost (it reads as zeros)",
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Number of buffers (clones and slices) sharing this owner.
    pub fn owner_count(&self) -> usize {
        ForkArc::strong_count(&self.storage)
    }
}

impl From<AlignedBytes> for Buffer {
    fn from(bytes: AlignedBytes) -> Self {
        let ptr = bytes.ptr();
        let len = bytes.len();
        Buffer {
            storage: Owner::new(Storage::Rust(bytes), false),
            ptr,
            len,
            writable: true,
        }
    }
}

impl From<SharedBytes> for Buffer {
    fn from(bytes: SharedBytes) -> Self {
        let ptr = NonNull::new(bytes.as_ptr().cast_mut()).unwrap_or(NonNull::dangling());
        let len = bytes.len();
        Buffer {
            // never frozen: other processes map the segment writable
            storage: Owner::new(Storage::Shared(bytes), false),
            ptr,
            len,
            writable: true,
        }
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("len", &self.len)
            .field("writable", &self.writable)
            .field("owner", &self.owner_kind())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    struct CountDrops {
        data: Vec<u8>,
        drops: Arc<AtomicUsize>,
    }

    impl Drop for CountDrops {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn foreign(drops: &Arc<AtomicUsize>) -> Buffer {
        let owner = Box::new(CountDrops {
            data: (0..100u8).collect(),
            drops: Arc::clone(drops),
        });
        let ptr = NonNull::new(owner.data.as_ptr().cast_mut()).unwrap();
        let len = owner.data.len();
        // SAFETY: the Vec's heap memory does not move when the Box moves and
        // lives until the owner is dropped.
        unsafe { Buffer::from_foreign(ptr, len, false, owner) }
    }

    #[test]
    fn foreign_owner_dropped_with_last_clone() {
        let drops = Arc::new(AtomicUsize::new(0));
        let buffer = foreign(&drops);
        let clone = buffer.clone();
        let slice = buffer.slice(10, 20).unwrap();
        assert_eq!(buffer.owner_count(), 3);
        drop(buffer);
        drop(clone);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        assert_eq!(slice.to_vec().unwrap(), (10..30u8).collect::<Vec<_>>());
        drop(slice);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn clone_and_slice_do_not_copy() {
        let buffer = Buffer::copy_from(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let clone = buffer.clone();
        assert_eq!(clone.as_ptr(), buffer.as_ptr());
        let slice = buffer.slice(3, 4).unwrap();
        assert_eq!(slice.as_ptr(), buffer.as_ptr().wrapping_add(3));
        assert_eq!(slice.to_vec().unwrap(), &[4, 5, 6, 7]);
        assert_eq!(buffer.owner_kind(), OwnerKind::Rust);
        assert_eq!(buffer.owner_count(), 3);
    }

    #[test]
    fn slice_out_of_bounds() {
        let buffer = Buffer::copy_from(&[0; 16]).unwrap();
        assert!(buffer.slice(8, 9).is_err());
        assert!(buffer.slice(usize::MAX, 2).is_err());
        assert!(buffer.slice(16, 0).unwrap().is_empty());
    }

    #[test]
    fn rust_memory_is_aligned_and_writable() {
        for len in [0, 1, 63, 64, 1000] {
            let buffer = Buffer::from(AlignedBytes::zeroed(len).unwrap());
            assert!(buffer.is_aligned_to(ALIGNMENT));
            assert!(buffer.is_writable());
            assert_eq!(buffer.len(), len);
            assert!(buffer.to_vec().unwrap().iter().all(|&b| b == 0));
        }
        assert!(!Buffer::empty().into_read_only().is_writable());
        assert!(!Buffer::empty()
            .into_read_only()
            .with_access(true)
            .is_writable());
        assert!(!Buffer::empty().with_access(false).is_writable());
    }

    #[test]
    fn impossible_allocation_is_an_error() {
        assert!(AlignedBytes::zeroed(usize::MAX - 10).is_err());
        assert!(AlignedBytes::zeroed(isize::MAX as usize).is_err());
    }

    #[test]
    fn from_owner_is_read_only_and_stable() {
        let buffer = Buffer::from_owner(vec![7u8; 32]);
        assert!(!buffer.is_writable());
        assert_eq!(buffer.owner_kind(), OwnerKind::Foreign);
        assert_eq!(buffer.private_bytes().unwrap(), &[7u8; 32]);
        // an owner with inline data is boxed before its address is taken
        let inline = Buffer::from_owner([3u8; 16]);
        assert_eq!(inline.private_bytes().unwrap(), &[3u8; 16]);
    }

    #[test]
    fn shared_segments_know_where_buffers_lie() {
        if cfg!(not(target_os = "linux")) {
            return;
        }
        let segment = Buffer::from(SharedBytes::create(256).unwrap());
        assert_eq!(segment.owner_kind(), OwnerKind::Shared);
        let view = segment.slice(64, 32).unwrap();
        assert_eq!(view.shared_segment().unwrap().1, 64);
        assert_eq!(view.whole_segment().unwrap().as_ptr(), segment.as_ptr());
        assert!(Buffer::empty().shared_segment().is_none());
    }

    #[test]
    fn only_memory_nobody_else_writes_is_private() {
        // blockmap's memory: writable until frozen on its last handle
        let buffer = Buffer::copy_from(&[1, 2, 3, 4]).unwrap();
        assert!(!buffer.is_private() && buffer.private_bytes().is_none());
        let clone = buffer.clone();
        let read_only = buffer.into_read_only();
        assert!(!read_only.is_private(), "a writable clone is alive");
        drop(clone);
        assert!(!read_only.is_private(), "frozen only on the last handle");
        let frozen = read_only.into_read_only();
        assert_eq!(frozen.private_bytes().unwrap(), &[1, 2, 3, 4]);
        assert!(frozen.slice(1, 2).unwrap().is_private());
        assert!(!frozen.with_access(true).is_writable());
        // snapshots and moved-in owners are private
        let writable = Buffer::copy_from(&[5; 8]).unwrap();
        let snapshot = writable.snapshot().unwrap();
        assert_ne!(snapshot.as_ptr(), writable.as_ptr());
        assert_eq!(snapshot.private_bytes().unwrap(), &[5; 8]);
        assert!(Buffer::from_owner(vec![1u8; 4]).is_private());
        assert!(Buffer::filled(3, |b| {
            b.fill(9);
            Ok(())
        })
        .unwrap()
        .is_private());
        // foreign owners are not, even read-only, unless immutable
        let drops = Arc::new(AtomicUsize::new(0));
        assert!(!foreign(&drops).is_private());
        let owner = Box::new(vec![4u8; 8]);
        let ptr = NonNull::new(owner.as_ptr().cast_mut()).unwrap();
        // SAFETY: the Vec's heap memory does not move when the Box moves,
        // lives until the owner is dropped, and nothing writes it.
        let immutable = unsafe { Buffer::from_immutable_foreign(ptr, 8, owner) };
        assert_eq!(immutable.private_bytes().unwrap(), &[4u8; 8]);
        // raw reads work on every buffer
        let raw = writable.raw();
        assert!(raw.private().is_none());
        assert_eq!(raw.get(2, 3).unwrap().to_vec().unwrap(), [5; 3]);
        assert!(raw.get(6, 3).is_none());
        assert_eq!(raw.crc32(), crc32fast::hash(&[5; 8]));
        assert!(raw.same_as(snapshot.raw()));
        assert!(!raw.same_as(snapshot.raw().get(0, 7).unwrap()));
        let mut out = [0u8; 9];
        assert!(raw.copy_to(&mut out).is_err(), "longer than the bytes");
    }

    #[test]
    fn shared_segments_are_never_private() {
        if cfg!(not(target_os = "linux")) {
            return;
        }
        let segment = Buffer::from(SharedBytes::create(64).unwrap()).into_read_only();
        assert!(!segment.is_private(), "other processes may map it writable");
    }

    /// A writer thread changes the memory of a writable buffer while it is
    /// read through `raw()` (what a numpy view written from another thread
    /// does): every read sees some state of the memory, the CRC of a
    /// snapshot is the CRC of the snapshot's bytes, and a chunked CRC is
    /// that of the bytes each chunk held. (Miri is not available here to
    /// check the model; what this checks is that no read goes through a
    /// `&[u8]` the compiler may assume constant.)
    #[test]
    fn reads_of_memory_written_meanwhile_are_snapshots() {
        use std::sync::atomic::AtomicBool;
        const LEN: usize = 1 << 20;
        let buffer = Buffer::from(AlignedBytes::zeroed(LEN).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (ptr, stop) = (buffer.as_ptr() as usize, Arc::clone(&stop));
            let keep = buffer.clone();
            std::thread::spawn(move || {
                let mut value = 0u8;
                while !stop.load(Ordering::Relaxed) {
                    value = value.wrapping_add(1);
                    for i in (0..LEN).step_by(4096) {
                        // SAFETY: inside the buffer `keep` holds alive; a
                        // volatile write, as foreign code's would be
                        unsafe { std::ptr::write_volatile((ptr as *mut u8).add(i), value) };
                    }
                }
                drop(keep);
            })
        };
        for _ in 0..20 {
            let snapshot = buffer.snapshot().unwrap();
            let bytes = snapshot.private_bytes().unwrap();
            assert_eq!(snapshot.raw().crc32(), crc32fast::hash(bytes));
            // chunk by chunk, the CRC is that of the copies
            let mut seen = Vec::new();
            let mut crc = crc32fast::Hasher::new();
            buffer
                .raw()
                .for_each_chunk(|chunk| {
                    seen.extend_from_slice(chunk);
                    crc.update(chunk);
                    Ok(())
                })
                .unwrap();
            assert_eq!(seen.len(), LEN);
            assert_eq!(crc.finalize(), crc32fast::hash(&seen));
            // only the bytes the writer touches may differ from zero
            assert!(seen
                .iter()
                .enumerate()
                .all(|(i, &b)| b == 0 || i % 4096 == 0));
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
    }
}
