//! Shared-memory segments: anonymous Linux `memfd`s whose size is sealed.
//!
//! A segment has no name, so nothing can leak in `/dev/shm`; the kernel
//! frees it when the last file descriptor and the last mapping of it are
//! gone, in whichever process, including processes that were killed. Its
//! size is sealed once set, so no process can shrink it under another's
//! mapping (mapping it then never faults with SIGBUS).

use std::fmt;
use std::fs::File;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::ALIGNMENT;
use crate::error::{Error, Result};

/// A shared-memory segment, mapped read-write and shared with every other
/// process that maps it.
///
/// The mapping stays valid without the descriptor; the descriptor is only
/// needed to send the segment on to another process. A segment made here
/// keeps it; a segment received keeps it only while the process holds few
/// of them (see [`SharedBytes::open`]), so that receiving thousands of maps
/// never runs the process out of descriptors.
pub struct SharedBytes {
    file: Option<File>,
    map: memmap2::MmapMut,
}

/// How many segment descriptors `SharedBytes` values of this process hold.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// How many descriptors the segments of this process hold open.
pub fn descriptors_held() -> usize {
    HELD.load(Ordering::Relaxed)
}

/// Whether a received segment may keep its descriptor: the segments hold
/// fewer than a quarter of the process's descriptor limit (`RLIMIT_NOFILE`,
/// soft).
fn may_keep_descriptor() -> bool {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limits into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } != 0 {
        return false;
    }
    if limit.rlim_cur == libc::RLIM_INFINITY {
        return true;
    }
    let budget = usize::try_from(limit.rlim_cur / 4).unwrap_or(usize::MAX);
    descriptors_held() < budget
}

impl Drop for SharedBytes {
    fn drop(&mut self) {
        if self.file.is_some() {
            HELD.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBytes")
            .field("len", &self.map.len())
            .finish_non_exhaustive()
    }
}

fn shm_error(context: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    move |error| Error::io(context, error)
}

#[cfg(target_os = "linux")]
mod sys {
    use std::fs::File;
    use std::os::fd::{AsRawFd, FromRawFd};

    const SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

    /// A new memfd of `len` bytes whose size is sealed.
    pub fn create(len: u64) -> std::io::Result<File> {
        // SAFETY: the name is a NUL-terminated string; memfd_create returns
        // a new descriptor that nothing else owns, or -1.
        let fd = unsafe {
            libc::memfd_create(
                c"blockmap".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a valid descriptor owned by no one else.
        let file = unsafe { File::from_raw_fd(fd) };
        file.set_len(len)?;
        // SAFETY: fcntl with F_ADD_SEALS on a descriptor this function owns.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, SEALS) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(file)
    }

    /// Whether `file` is a memfd whose size can never shrink.
    pub fn is_sealed_segment(file: &File) -> bool {
        // SAFETY: F_GET_SEALS only reads the seals of a valid descriptor;
        // it fails with EINVAL for files that are not memfds.
        let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
        seals >= 0 && seals & libc::F_SEAL_SHRINK != 0
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use std::fs::File;

    pub fn create(_len: u64) -> std::io::Result<File> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "shared memory segments need Linux (memfd)",
        ))
    }

    pub fn is_sealed_segment(_file: &File) -> bool {
        false
    }
}

impl SharedBytes {
    /// A new zeroed segment of `len` bytes (at least one page is mapped,
    /// so that empty data still has a segment).
    pub fn create(len: usize) -> Result<Self> {
        let size = len.max(ALIGNMENT);
        let file = sys::create(size as u64).map_err(shm_error("creating shared memory"))?;
        Self::map(file, true)
    }

    /// Map a segment received from another process (its descriptor).
    /// Refuses files that are not size-sealed memfds. The descriptor is
    /// closed once mapped when the segments of this process already hold a
    /// quarter of its descriptor limit: the segment can then not be sent on
    /// (the data holding it is not [shared](Self::file) any more: sending
    /// it copies), but the mapping is the same.
    pub fn open(file: File) -> Result<Self> {
        if !sys::is_sealed_segment(&file) {
            return Err(Error::invalid(
                "the file descriptor is not a blockmap shared-memory segment",
            ));
        }
        Self::map(file, may_keep_descriptor())
    }

    fn map(file: File, keep: bool) -> Result<Self> {
        let len = file
            .metadata()
            .map_err(shm_error("reading the size of shared memory"))?
            .len();
        if len == 0 {
            return Err(Error::invalid("the shared-memory segment is empty"));
        }
        // Other processes may write to the segment concurrently: that is its
        // purpose, and blockmap only reads the memory (see the `buffer` docs).
        // SAFETY: a memfd sealed against shrinking (checked by `open`, set
        // by `create`): every page of the mapping stays backed while it lives.
        let map = unsafe { memmap2::MmapOptions::new().map_mut(&file) }
            .map_err(shm_error("mapping shared memory"))?;
        let file = if keep {
            HELD.fetch_add(1, Ordering::Relaxed);
            Some(file)
        } else {
            // the mapping stays valid without its descriptor
            None
        };
        Ok(SharedBytes { file, map })
    }

    /// The segment's file (a memfd), to hand to another process; `None`
    /// for a received segment whose descriptor was closed (see
    /// [`SharedBytes::open`]).
    pub fn file(&self) -> Option<&File> {
        self.file.as_ref()
    }

    /// Start of the memory (read through a [`super::Buffer`] of it: other
    /// processes may write it, see "Aliasing" in `buffer/mod.rs`).
    pub fn as_ptr(&self) -> *const u8 {
        self.map.as_ptr()
    }

    /// The bytes, for writing (only before the segment is shared).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.map
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the segment has no bytes (never true: segments are mapped).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::buffer::Buffer;

    #[test]
    fn open_refuses_files_that_are_not_segments() {
        let file = std::fs::File::open("Cargo.toml").unwrap();
        assert!(SharedBytes::open(file).is_err());
    }

    #[test]
    fn a_segment_reopened_shares_its_bytes() {
        let mut segment = SharedBytes::create(10).unwrap();
        assert_eq!(segment.len(), ALIGNMENT);
        segment.as_mut_slice()[3] = 7;
        let again = SharedBytes::open(segment.file().unwrap().try_clone().unwrap()).unwrap();
        assert_eq!(Buffer::from(again).raw().to_vec().unwrap()[3], 7);
    }

    #[test]
    fn received_segments_keep_descriptors_within_a_budget() {
        let segment = SharedBytes::create(10).unwrap();
        let again = SharedBytes::open(segment.file().unwrap().try_clone().unwrap()).unwrap();
        // far below a quarter of any usual limit: kept
        assert!(again.file().is_some());
        assert!(descriptors_held() >= 2);
        // without a descriptor the mapping is the same memory
        let mapped = SharedBytes::map(segment.file().unwrap().try_clone().unwrap(), false).unwrap();
        assert!(mapped.file().is_none());
        assert_eq!(mapped.len(), segment.len());
    }
}

/// New arrays placed one after the other in one fresh segment, each at a
/// multiple of [`ALIGNMENT`]: what a join writes into when its result is
/// about to be sent to another process (a `DataLoader` batch), so that the
/// data is written once, already where the receiver maps it.
#[derive(Debug)]
pub struct SegmentArena {
    /// the whole segment, writable; regions before `used` are handed out
    segment: super::Buffer,
    used: usize,
}

impl SegmentArena {
    /// An arena of `capacity` bytes (a new zeroed segment; pages never
    /// written cost no memory).
    pub fn new(capacity: usize) -> Result<Self> {
        Ok(SegmentArena {
            segment: super::Buffer::from(SharedBytes::create(capacity)?),
            used: 0,
        })
    }

    /// Place `len` bytes in the arena, let `write` fill them (they come
    /// zeroed), and return the buffer viewing them with what `write`
    /// returned; `None` when they do not fit (nothing is written then).
    pub fn place<R>(
        &mut self,
        len: usize,
        write: impl FnOnce(&mut [u8]) -> R,
    ) -> Option<Result<(super::Buffer, R)>> {
        let start = self.used.checked_next_multiple_of(ALIGNMENT)?;
        let end = start.checked_add(len)?;
        if end > self.segment.len() {
            return None;
        }
        self.used = end;
        // SAFETY: `start..end` lies in the segment, which is mapped
        // read-write for as long as `self.segment` lives (it does during
        // this call). The region is handed out once (`used` only grows), so
        // no buffer, array or slice views it yet: the only views of the
        // segment are the buffers returned for earlier, disjoint regions.
        // The segment is new and no descriptor of it has left this
        // process, so no other process writes to it either: the `&mut` is
        // the region's only view (the aliasing rule, buffer/mod.rs).
        let region = unsafe {
            std::slice::from_raw_parts_mut(self.segment.as_ptr().cast_mut().add(start), len)
        };
        let made = write(region);
        Some(self.segment.slice(start, len).map(|view| (view, made)))
    }
}
