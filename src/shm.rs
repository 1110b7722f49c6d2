//! Shared memory: a map's data moved into one segment other processes can
//! map, so that sending the map sends only its metadata and a handle.
//!
//! A segment is a [`SharedBytes`]: an anonymous, size-sealed Linux `memfd`
//! (see `buffer/shared.rs`).
//!
//! [`share`] copies data into a new segment, once; [`parts`] describes data
//! that already lives in segments (the [`pickle`](crate::pickle) header,
//! the segments, and where each buffer lies in them); [`attach`] rebuilds
//! the data in another process from those parts, viewing the segments.

use crate::buffer::{Buffer, SharedBytes, ALIGNMENT};
use crate::data::{Data, DataRef};
use crate::error::{Error, Result};
use crate::pickle;

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
    use crate::fixtures::map_with_an_empty_block as map;
    use crate::TensorMap;

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
