//! File mappings owned by buffers, the kernel's read-ahead advice about
//! their pages, and the system's page size.

use std::fs::File;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::guard::Guard;
use super::{Buffer, Owner, Storage};
use crate::error::{Error, Result};

/// How a file is mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapMode {
    /// read-only: views of it cannot be written
    ReadOnly,
    /// private copy-on-write: writes through views change this process's
    /// pages, never the file
    CopyOnWrite,
}

/// What the kernel is told about the pages of a file mapping
/// ([`Buffer::advise`]): read-ahead only, never the memory's contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advice {
    /// random access: a fault reads its own page, no read-ahead around it
    /// (the kernel's default reads up to megabytes per fault)
    Random,
    /// the pages are about to be read: read them ahead now
    WillNeed,
}

impl Advice {
    fn flag(self) -> libc::c_int {
        match self {
            Advice::Random => libc::MADV_RANDOM,
            Advice::WillNeed => libc::MADV_WILLNEED,
        }
    }
}

/// The bytes asked for by one `MADV_WILLNEED` (a multiple of any page size
/// up to 64 KiB, at most the default read-ahead of 128 KiB): Linux reads
/// at most the file's read-ahead size (`read_ahead_kb`) per call, so a
/// larger range is asked for a piece at a time.
const WILLNEED_PIECE: usize = 128 << 10;

/// The system's page size (a power of two; 4096 where the system does not
/// say), looked up once: every page computation of blockmap uses it.
pub fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    let known = PAGE.load(Ordering::Relaxed);
    if known != 0 {
        return known;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = usize::try_from(page)
        .ok()
        .filter(|page| page.is_power_of_two())
        .unwrap_or(4096);
    PAGE.store(page, Ordering::Relaxed);
    page
}

/// A file mapping owned by a buffer, registered with the SIGBUS guard
/// (dropped first: the mapping is unregistered before it is unmapped).
#[derive(Debug)]
pub(super) struct Mapping {
    guard: Option<Guard>,
    #[allow(dead_code)] // held to be dropped with the buffer, never read
    map: Map,
    /// the file mapped: its device and inode
    file: Option<(u64, u64)>,
}

#[derive(Debug)]
#[allow(dead_code)] // held to be dropped with the buffer, never read
enum Map {
    ReadOnly(memmap2::Mmap),
    CopyOnWrite(memmap2::MmapMut),
}

impl Mapping {
    /// Whether the file shrank under the mapping (see `guard.rs`).
    pub(super) fn is_broken(&self) -> bool {
        self.guard.as_ref().is_some_and(Guard::is_broken)
    }

    /// The file mapped: its device and inode.
    pub(super) fn file(&self) -> Option<(u64, u64)> {
        self.file
    }
}

/// The device and inode of `file`.
fn file_id(file: &File) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        file.metadata()
            .ok()
            .map(|metadata| (metadata.dev(), metadata.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        None
    }
}

impl Buffer {
    /// Map the whole of `file` (opened for reading) in `mode`.
    ///
    /// The documented risk of every file mapping: were another program to
    /// truncate the file, reading the lost pages would fault. blockmap's
    /// guard (`guard.rs`) makes them read as zeros instead and marks the
    /// buffer broken ([`Buffer::check_intact`]); blockmap itself only
    /// replaces files by renaming, never truncating them.
    pub fn map_file(file: &File, mode: MapMode) -> Result<Buffer> {
        let error = |e| Error::io("cannot map the file", e);
        let (map, ptr, len) = match mode {
            MapMode::ReadOnly => {
                // SAFETY: a read-only shared mapping of a file; its memory
                // stays valid while the mapping (owned by the buffer) lives.
                let map = unsafe { memmap2::Mmap::map(file) }.map_err(error)?;
                let ptr = NonNull::new(map.as_ptr().cast_mut()).unwrap_or(NonNull::dangling());
                let len = map.len();
                (Map::ReadOnly(map), ptr, len)
            }
            MapMode::CopyOnWrite => {
                // SAFETY: a private mapping of a file; its memory stays
                // valid while the mapping (owned by the buffer) lives, and
                // writes to it never reach the file.
                let mut map =
                    unsafe { memmap2::MmapOptions::new().map_copy(file) }.map_err(error)?;
                let ptr = NonNull::new(map.as_mut_ptr()).unwrap_or(NonNull::dangling());
                let len = map.len();
                (Map::CopyOnWrite(map), ptr, len)
            }
        };
        let writable = mode == MapMode::CopyOnWrite;
        let guard = Guard::register(ptr.as_ptr(), len, writable);
        let file = file_id(file);
        Ok(Buffer {
            // never frozen: other programs may write the file, and the SIGBUS
            // guard replaces lost pages (the aliasing rule, buffer/mod.rs)
            storage: Owner::new(Storage::Mapped(Mapping { guard, map, file }), false),
            ptr,
            len,
            writable,
        })
    }
}

impl Buffer {
    /// Advise the kernel about the pages holding bytes `offset..offset +
    /// len` of this buffer (clamped to it), when it views a file mapping:
    /// [`Advice::Random`] before random reads, [`Advice::WillNeed`] for
    /// what is about to be read. Advice only: its callers go on whatever
    /// the answer, which says whether the kernel took it (false for other
    /// kinds of memory, which are left as they are, for an empty range,
    /// and for a kernel that refuses it).
    pub fn advise(&self, offset: usize, len: usize, advice: Advice) -> bool {
        if !matches!(self.storage.storage, Storage::Mapped(_)) || offset >= self.len || len == 0 {
            return false;
        }
        let page = page_size();
        let first = self.ptr.as_ptr() as usize + offset;
        let mut start = first - first % page;
        let end = first + len.min(self.len - offset);
        let piece = if advice == Advice::WillNeed {
            WILLNEED_PIECE
        } else {
            usize::MAX
        };
        let mut taken = true;
        while start < end {
            let n = (end - start).min(piece);
            // SAFETY: `start..start + n` lies within the file mapping this
            // buffer views: its end within the buffer, its start rounded
            // down to a page boundary from an address within the buffer,
            // which the mapping (page-aligned, as every mapping) holds
            // from its first page. The advice given (MADV_RANDOM,
            // MADV_WILLNEED) changes the kernel's read-ahead only, never
            // the memory's contents nor its validity, and no reference to
            // the memory is made.
            let done = unsafe { libc::madvise(start as *mut libc::c_void, n, advice.flag()) };
            taken &= done == 0;
            start += n;
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::OwnerKind;
    use crate::fixtures::TempDir;
    use std::io::Write;

    #[test]
    fn mapped_buffers() {
        let dir = TempDir::new("mapped");
        let path = dir.join("file");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&[42u8; 4096])
            .unwrap();
        let file = File::open(&path).unwrap();
        let read_only = Buffer::map_file(&file, MapMode::ReadOnly).unwrap();
        assert_eq!(read_only.owner_kind(), OwnerKind::Mapped);
        assert!(!read_only.is_writable());
        assert!(!read_only.is_private(), "a file mapping is never private");
        assert_eq!(read_only.raw().to_vec().unwrap()[0], 42);

        let cow = Buffer::map_file(&file, MapMode::CopyOnWrite).unwrap();
        assert!(cow.is_writable());
        assert_eq!(cow.len(), 4096);
    }

    #[test]
    fn advice_is_taken_over_any_range_of_a_mapping_and_changes_nothing() {
        let page = page_size();
        assert!(page.is_power_of_two());
        // SAFETY: sysconf has no preconditions.
        let system = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        assert_eq!(page, usize::try_from(system).unwrap());
        let dir = TempDir::new("advised");
        let path = dir.join("file");
        let len = 3 * WILLNEED_PIECE + 5 * page + 17;
        let bytes: Vec<u8> = (0..len).map(|i| u8::try_from(i % 251).unwrap()).collect();
        std::fs::write(&path, &bytes).unwrap();
        let mapped = Buffer::map_file(&File::open(&path).unwrap(), MapMode::ReadOnly).unwrap();
        // a view that starts inside a page: the advice starts on its page
        let view = mapped.slice(page + 7, len - page - 7).unwrap();
        for advice in [Advice::Random, Advice::WillNeed] {
            for buffer in [&mapped, &view] {
                for (offset, n) in [
                    (0, buffer.len()),
                    (1, 1),
                    (page - 1, 2 * WILLNEED_PIECE),
                    (buffer.len() - 1, usize::MAX),
                    (5, usize::MAX),
                ] {
                    assert!(buffer.advise(offset, n, advice), "{advice:?} {offset} {n}");
                }
                // nothing to advise
                assert!(!buffer.advise(buffer.len(), 1, advice));
                assert!(!buffer.advise(3, 0, advice));
            }
        }
        assert_eq!(mapped.raw().to_vec().unwrap(), bytes);
        assert_eq!(view.raw().to_vec().unwrap(), &bytes[page + 7..]);
        // memory that is no file mapping is left as it is
        let owned = Buffer::copy_from(&bytes).unwrap();
        assert!(!owned.advise(0, len, Advice::WillNeed));
    }

    #[cfg(unix)]
    #[test]
    fn a_file_truncated_under_its_mapping_reads_as_zeros() {
        let dir = TempDir::new("shrunk");
        let path = dir.join("file");
        let page = 4096;
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&vec![7u8; 4 * page])
            .unwrap();
        for mode in [MapMode::ReadOnly, MapMode::CopyOnWrite] {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(4 * page as u64)
                .unwrap();
            std::fs::write(&path, vec![7u8; 4 * page]).unwrap();
            let buffer = Buffer::map_file(&File::open(&path).unwrap(), mode).unwrap();
            assert_eq!(
                buffer.raw().to_vec().unwrap()[0],
                7,
                "page 0 faulted in before"
            );
            assert!(buffer.check_intact().is_ok());
            // another program truncates the file to one page
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(page as u64)
                .unwrap();
            // SAFETY: volatile reads of bytes inside the buffer, so that
            // the compiler does not elide or reorder them; raw reads, no
            // `&[u8]` (the aliasing rule, buffer/mod.rs)
            let read = |i: usize| unsafe { std::ptr::read_volatile(buffer.as_ptr().add(i)) };
            assert_eq!(read(10), 7, "the part still in the file is kept");
            assert_eq!(read(2 * page + 5), 0, "the lost part reads as zeros");
            assert_eq!(read(4 * page - 1), 0);
            let error = buffer.check_intact().unwrap_err().to_string();
            assert!(error.contains("truncated"), "{error}");
            // a slice shares the mapping, and its state
            assert!(buffer.slice(0, 8).unwrap().check_intact().is_err());
        }
    }
}
