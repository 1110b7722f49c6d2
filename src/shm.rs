//! Shared memory: a map's data moved into one segment other processes can
//! map, so that sending the map sends only its metadata and a handle.
//!
//! A segment is an anonymous Linux `memfd`: it has no name, so nothing can
//! leak in `/dev/shm`; the kernel frees it when the last file descriptor
//! and the last mapping of it are gone, in whichever process, including
//! processes that were killed. Its size is sealed once set, so no process
//! can shrink it under another's mapping.
//!
//! [`share`] copies data into a new segment, once; [`parts`] describes data
//! that already lives in segments (the [`pickle`](crate::pickle) header,
//! the segments, and where each buffer lies in them); [`attach`] rebuilds
//! the data in another process from those parts, viewing the segments.

use std::fmt;
use std::fs::File;

use crate::buffer::{Buffer, ALIGNMENT};
use crate::error::{Error, Result};
use crate::io::{Data, DataRef};
use crate::pickle;

/// A shared-memory segment, mapped read-write and shared with every other
/// process that maps it.
pub struct SharedBytes {
    file: File,
    map: memmap2::MmapMut,
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

    /// Whether `file` is a memfd whose size can never shrink (mapping it
    /// then never faults with SIGBUS).
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
        Self::map(file)
    }

    /// Map a segment received from another process (its descriptor).
    /// Refuses files that are not size-sealed memfds.
    pub fn open(file: File) -> Result<Self> {
        if !sys::is_sealed_segment(&file) {
            return Err(Error::invalid(
                "the file descriptor is not a blockmap shared-memory segment",
            ));
        }
        Self::map(file)
    }

    fn map(file: File) -> Result<Self> {
        let len = file
            .metadata()
            .map_err(shm_error("reading the size of shared memory"))?
            .len();
        if len == 0 {
            return Err(Error::invalid("the shared-memory segment is empty"));
        }
        // Other processes may write to the segment concurrently: that is its
        // purpose, and blockmap only reads the memory (see `buffer` docs).
        // SAFETY: a memfd sealed against shrinking (checked by `open`, set
        // by `create`): every page of the mapping stays backed while it lives.
        let map = unsafe { memmap2::MmapOptions::new().map_mut(&file) }
            .map_err(shm_error("mapping shared memory"))?;
        Ok(SharedBytes { file, map })
    }

    /// The segment's file (a memfd), to hand to another process.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.map
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

/// Where one buffer lies: in `segment` (an index into the segments of
/// [`Parts`]), `len` bytes from `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// index of the segment
    pub segment: usize,
    /// first byte in the segment
    pub offset: usize,
    /// number of bytes
    pub len: usize,
    /// whether the receiver may write through its views
    pub writable: bool,
}

/// What describes data living in shared memory, for another process.
#[derive(Debug)]
pub struct Parts {
    /// the pickle header (version 1) of the data
    pub header: Vec<u8>,
    /// one buffer per distinct segment, each spanning the whole segment
    /// (and keeping it alive); its owner gives the file to send
    pub segments: Vec<Buffer>,
    /// per buffer of the pickle wire order: where it lies; `None` for
    /// empty buffers, which need no memory
    pub locations: Vec<Option<Location>>,
}

/// Copy `data` into one new shared-memory segment and return the same data
/// viewing it, or `None` when all of its memory is in shared segments
/// already (nothing to do). Every array (and every Labels) starts on a
/// 64-byte boundary of the segment; writability is kept per array.
pub fn share(data: DataRef<'_>) -> Result<Option<Data>> {
    let (header, buffers) = pickle::dump(data)?;
    if buffers
        .iter()
        .all(|b| b.is_empty() || b.shared_segment().is_some())
    {
        return Ok(None);
    }
    let mut offsets = Vec::with_capacity(buffers.len());
    let mut total = 0usize;
    let too_large = || Error::invalid("the data is too large for one shared-memory segment");
    for buffer in &buffers {
        let offset = total
            .checked_next_multiple_of(ALIGNMENT)
            .ok_or_else(too_large)?;
        offsets.push(offset);
        total = offset.checked_add(buffer.len()).ok_or_else(too_large)?;
    }
    let mut segment = SharedBytes::create(total)?;
    let bytes = segment.as_mut_slice();
    for (buffer, &offset) in buffers.iter().zip(&offsets) {
        bytes[offset..offset + buffer.len()].copy_from_slice(buffer.as_slice());
    }
    let segment = Buffer::from(segment);
    let views = buffers
        .iter()
        .zip(&offsets)
        .map(|(buffer, &offset)| {
            let view = segment.slice(offset, buffer.len())?;
            Ok(if buffer.is_writable() {
                view
            } else {
                view.into_read_only()
            })
        })
        .collect::<Result<Vec<_>>>()?;
    pickle::load(&header, views).map(Some)
}

/// The parts describing `data` when all of its memory lives in shared
/// segments, `None` when some of it does not.
pub fn parts(data: DataRef<'_>) -> Result<Option<Parts>> {
    let (header, buffers) = pickle::dump(data)?;
    let mut segments: Vec<Buffer> = Vec::new();
    let mut locations = Vec::with_capacity(buffers.len());
    for buffer in &buffers {
        if buffer.is_empty() {
            locations.push(None);
            continue;
        }
        let Some((segment, offset)) = buffer.shared_segment() else {
            return Ok(None);
        };
        let start = segment.as_slice().as_ptr();
        let index = if let Some(index) = segments.iter().position(|s| s.as_ptr() == start) {
            index
        } else {
            // a view of the whole segment, keeping it alive
            segments.extend(buffer.whole_segment());
            segments.len() - 1
        };
        locations.push(Some(Location {
            segment: index,
            offset,
            len: buffer.len(),
            writable: buffer.is_writable(),
        }));
    }
    Ok(Some(Parts {
        header,
        segments,
        locations,
    }))
}

/// Rebuild data from [`Parts`] received from another process: `segments`
/// are the segments it listed, mapped here; every buffer views them.
pub fn attach(
    header: &[u8],
    segments: Vec<SharedBytes>,
    locations: &[Option<Location>],
) -> Result<Data> {
    let segments: Vec<Buffer> = segments.into_iter().map(Buffer::from).collect();
    let buffers = locations
        .iter()
        .map(|location| match location {
            None => Ok(Buffer::empty()),
            Some(location) => {
                let segment = segments.get(location.segment).ok_or_else(|| {
                    Error::format(format!(
                        "a buffer lies in segment {}, but {} segments were given",
                        location.segment,
                        segments.len()
                    ))
                })?;
                let view = segment.slice(location.offset, location.len)?;
                Ok(if location.writable {
                    view
                } else {
                    view.into_read_only()
                })
            }
        })
        .collect::<Result<Vec<_>>>()?;
    pickle::load(header, buffers)
}

/// Whether all of `data`'s memory lives in shared segments.
pub fn is_shared(data: DataRef<'_>) -> Result<bool> {
    Ok(parts(data)?.is_some())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::{Array, Labels, TensorBlock, TensorMap};

    fn map() -> TensorMap {
        let mut block = TensorBlock::new(
            Array::from_slice(vec![2, 3], &[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap(),
            Labels::range("s", 2).unwrap(),
            vec![],
            Labels::range("p", 3).unwrap(),
        )
        .unwrap();
        let gradient = TensorBlock::new(
            Array::from_slice(vec![1, 3], &[0.5f64; 3]).unwrap(),
            Labels::new(vec!["sample"], &[1]).unwrap(),
            vec![],
            Labels::range("p", 3).unwrap(),
        )
        .unwrap();
        block.add_gradient("positions", gradient).unwrap();
        let empty_block = |sample: &str| {
            TensorBlock::new(
                Array::from_slice(vec![0, 3], &[] as &[f64]).unwrap(),
                Labels::new(vec![sample], &[]).unwrap(),
                vec![],
                Labels::range("p", 3).unwrap(),
            )
            .unwrap()
        };
        let mut empty = empty_block("s");
        empty
            .add_gradient("positions", empty_block("sample"))
            .unwrap();
        TensorMap::new(Labels::range("k", 2).unwrap(), vec![block, empty]).unwrap()
    }

    fn shared_copy(map: &TensorMap) -> TensorMap {
        let Some(Data::Tensor(shared)) = share(DataRef::Tensor(map)).unwrap() else {
            panic!("a map not in shared memory is shared")
        };
        shared
    }

    #[test]
    fn share_moves_everything_into_one_segment() {
        let map = map();
        assert!(!is_shared(DataRef::Tensor(&map)).unwrap());
        let shared = shared_copy(&map);
        assert_eq!(shared, map);
        let parts = parts(DataRef::Tensor(&shared)).unwrap().unwrap();
        assert_eq!(parts.segments.len(), 1);
        for location in parts.locations.iter().flatten() {
            assert_eq!(location.segment, 0);
            assert_eq!(location.offset % ALIGNMENT, 0);
        }
        // shared already: nothing to do
        assert!(share(DataRef::Tensor(&shared)).unwrap().is_none());
    }

    #[test]
    fn attach_views_the_same_memory() {
        let map = map();
        let shared = shared_copy(&map);
        let parts = parts(DataRef::Tensor(&shared)).unwrap().unwrap();
        let file = parts.segments[0].shared_segment().unwrap().0.file();
        let segment = SharedBytes::open(file.try_clone().unwrap()).unwrap();
        let Data::Tensor(attached) =
            attach(&parts.header, vec![segment], &parts.locations).unwrap()
        else {
            panic!()
        };
        assert_eq!(attached, map);
        // a second mapping of the same memory: a different address, but a
        // write through the first shows through the second
        let ours = shared.blocks()[0].values().buffer().as_ptr().cast_mut();
        let theirs = attached.blocks()[0].values().buffer().as_ptr();
        assert_ne!(ours.cast_const(), theirs);
        // the bytes of the first value, compared as bytes: exact on purpose
        let value = 42.0f64.to_ne_bytes();
        // SAFETY: the first value of the block (8 bytes of writable shared
        // memory) is written by this test only; nothing reads it at the same
        // time.
        unsafe { ours.cast::<[u8; 8]>().write_volatile(value) };
        // SAFETY: as above; the read is of the same 8 bytes in the mapping.
        assert_eq!(unsafe { theirs.cast::<[u8; 8]>().read_volatile() }, value);
    }

    #[test]
    fn open_refuses_files_that_are_not_segments() {
        let file = std::fs::File::open("Cargo.toml").unwrap();
        assert!(SharedBytes::open(file).is_err());
    }

    #[test]
    fn attach_refuses_bad_locations() {
        let map = map();
        let shared = shared_copy(&map);
        let parts = parts(DataRef::Tensor(&shared)).unwrap().unwrap();
        let open = || {
            let file = parts.segments[0].shared_segment().unwrap().0.file();
            vec![SharedBytes::open(file.try_clone().unwrap()).unwrap()]
        };
        let mut locations = parts.locations.clone();
        let first = locations[0].as_mut().unwrap();
        first.offset = usize::MAX - 1;
        assert!(attach(&parts.header, open(), &locations).is_err());
        let mut locations = parts.locations.clone();
        locations[0].as_mut().unwrap().segment = 1;
        assert!(attach(&parts.header, open(), &locations).is_err());
        assert!(attach(&parts.header, open(), &parts.locations[1..]).is_err());
    }
}
