//! Shared memory: a map's data moved into one segment other processes can
//! map, so that sending the map sends only its metadata and a handle.
//!
//! A segment is a [`SharedBytes`]: an anonymous, size-sealed Linux `memfd`
//! (see `buffer/shared.rs`).
//!
//! [`share`] copies the arrays' values into a new segment, once; [`parts`]
//! describes data whose values already live in segments (the
//! [`pickle`](crate::pickle) header, the segments, where each value buffer
//! lies in them, and the label values themselves); [`attach`] rebuilds the
//! data in another process from those parts, viewing the segments.
//!
//! Labels never live in a segment: another process could write to it, and
//! labels own what they validated. They travel as bytes with the message
//! (they are small next to the values) and each receiver checks its copy.

use crate::buffer::{Buffer, SharedBytes, ALIGNMENT};
use crate::data::{Data, DataRef};
use crate::error::{Error, Result};
use crate::pickle::{self, Role};

/// Where one value buffer lies: in `segment` (an index into the segments
/// of [`Parts`]), `len` bytes from `offset`.
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

/// Where one buffer of the pickle wire order comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// an empty buffer: no memory needed
    Empty,
    /// values in a shared segment
    Segment(Location),
    /// label values, `len` bytes from `offset` of [`Parts::labels`]
    Labels {
        /// first byte in the label bytes
        offset: usize,
        /// number of bytes
        len: usize,
    },
}

/// What describes data whose values live in shared memory, for another
/// process.
#[derive(Debug)]
pub struct Parts {
    /// the pickle header (version 3) of the data
    pub header: Vec<u8>,
    /// one buffer per distinct segment, each spanning the whole segment
    /// (and keeping it alive); its owner gives the file to send
    pub segments: Vec<Buffer>,
    /// per buffer of the pickle wire order: where it comes from
    pub places: Vec<Place>,
    /// the label values, one after the other (each at an offset that is a
    /// multiple of 8)
    pub labels: Vec<u8>,
}

/// Copy the values of `data` into one new shared-memory segment and return
/// the same data viewing it, or `None` when all of its values are in
/// shared segments already (nothing to do). Every array starts on a
/// 64-byte boundary of the segment; writability is kept per array.
pub fn share(data: DataRef<'_>) -> Result<Option<Data>> {
    let (header, buffers) = pickle::dump_with_roles(data)?;
    if all_values_shared(&buffers) {
        return Ok(None);
    }
    let mut offsets = Vec::with_capacity(buffers.len());
    let mut total = 0usize;
    let too_large = || Error::invalid("the data is too large for one shared-memory segment");
    for (buffer, role) in &buffers {
        if *role != Role::Values {
            offsets.push(None);
            continue;
        }
        let offset = total
            .checked_next_multiple_of(ALIGNMENT)
            .ok_or_else(too_large)?;
        offsets.push(Some(offset));
        total = offset.checked_add(buffer.len()).ok_or_else(too_large)?;
    }
    let mut segment = SharedBytes::create(total)?;
    let bytes = segment.as_mut_slice();
    for ((buffer, _), offset) in buffers.iter().zip(&offsets) {
        if let Some(offset) = *offset {
            // raw copies: numpy may write the source meanwhile (the
            // aliasing rule, buffer/mod.rs)
            buffer
                .raw()
                .copy_to(&mut bytes[offset..offset + buffer.len()])?;
            crate::interrupt::check()?;
        }
    }
    for (buffer, _) in &buffers {
        buffer.check_intact()?;
    }
    let segment = Buffer::from(segment);
    let views = buffers
        .iter()
        .zip(&offsets)
        .map(|((buffer, _), offset)| match offset {
            Some(offset) => Ok(segment
                .slice(*offset, buffer.len())?
                .with_access(buffer.is_writable())),
            None => Ok(buffer.clone()),
        })
        .collect::<Result<Vec<_>>>()?;
    pickle::load(&header, views).map(Some)
}

fn all_values_shared(buffers: &[(Buffer, Role)]) -> bool {
    buffers.iter().all(|(buffer, role)| {
        *role == Role::Labels || buffer.is_empty() || buffer.shared_segment().is_some()
    })
}

/// The parts describing `data` when all of its values live in shared
/// segments, `None` when some of them do not.
pub fn parts(data: DataRef<'_>) -> Result<Option<Parts>> {
    let (header, buffers) = pickle::dump_with_roles(data)?;
    let mut segments: Vec<Buffer> = Vec::new();
    let mut places = Vec::with_capacity(buffers.len());
    let mut labels = Vec::new();
    for (buffer, role) in &buffers {
        if *role == Role::Labels {
            let offset = labels.len().next_multiple_of(8);
            labels.try_reserve(offset - labels.len() + buffer.len())?;
            labels.resize(offset + buffer.len(), 0);
            buffer.raw().copy_to(&mut labels[offset..])?;
            places.push(Place::Labels {
                offset,
                len: buffer.len(),
            });
            continue;
        }
        if buffer.is_empty() {
            places.push(Place::Empty);
            continue;
        }
        let Some((segment, offset)) = buffer.shared_segment() else {
            return Ok(None);
        };
        let start = segment.as_ptr();
        let index = if let Some(index) = segments.iter().position(|s| s.as_ptr() == start) {
            index
        } else {
            // a view of the whole segment, keeping it alive
            segments.extend(buffer.whole_segment());
            segments.len() - 1
        };
        places.push(Place::Segment(Location {
            segment: index,
            offset,
            len: buffer.len(),
            writable: buffer.is_writable(),
        }));
    }
    Ok(Some(Parts {
        header,
        segments,
        places,
        labels,
    }))
}

/// Rebuild data from [`Parts`] received from another process: `segments`
/// are the segments it listed, mapped here, which the values view; the
/// labels are copied out of `labels` (the label bytes received) and
/// checked.
pub fn attach(
    header: &[u8],
    segments: Vec<SharedBytes>,
    places: &[Place],
    labels: &Buffer,
) -> Result<Data> {
    let segments: Vec<Buffer> = segments.into_iter().map(Buffer::from).collect();
    let buffers = places
        .iter()
        .map(|place| match *place {
            Place::Empty => Ok(Buffer::empty()),
            Place::Labels { offset, len } => labels.slice(offset, len).map_err(|_| {
                Error::format(format!(
                    "label values at [{offset}, {offset}+{len}) lie outside the {} label bytes \
                     received",
                    labels.len()
                ))
            }),
            Place::Segment(location) => {
                let segment = segments.get(location.segment).ok_or_else(|| {
                    Error::format(format!(
                        "a buffer lies in segment {}, but {} segments were given",
                        location.segment,
                        segments.len()
                    ))
                })?;
                let view = segment.slice(location.offset, location.len).map_err(|_| {
                    Error::format(format!(
                        "a buffer at [{}, {}+{}) lies outside its segment of {} bytes",
                        location.offset,
                        location.offset,
                        location.len,
                        segment.len()
                    ))
                })?;
                Ok(view.with_access(location.writable))
            }
        })
        .collect::<Result<Vec<_>>>()?;
    pickle::load(header, buffers)
}

/// Whether all of `data`'s values live in shared segments.
pub fn is_shared(data: DataRef<'_>) -> Result<bool> {
    let (_, buffers) = pickle::dump_with_roles(data)?;
    Ok(all_values_shared(&buffers))
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
        let mut label_buffers = 0;
        for place in &parts.places {
            match place {
                Place::Segment(location) => {
                    assert_eq!(location.segment, 0);
                    assert_eq!(location.offset % ALIGNMENT, 0);
                }
                Place::Labels { offset, .. } => {
                    label_buffers += 1;
                    assert_eq!(offset % 8, 0);
                }
                Place::Empty => {}
            }
        }
        // keys, then samples of 2 blocks and their gradients, and the
        // first block's properties (the second's are equal: referred to)
        assert_eq!(label_buffers, 6);
        // labels stay in memory the map owns, never in the segment
        let keys = shared.keys().values().buffer();
        assert!(keys.shared_segment().is_none());
        // shared already: nothing to do
        assert!(share(DataRef::Tensor(&shared)).unwrap().is_none());
    }

    #[test]
    fn attach_views_the_same_memory() {
        let map = map();
        let shared = shared_copy(&map);
        let parts = parts(DataRef::Tensor(&shared)).unwrap().unwrap();
        let file = parts.segments[0]
            .shared_segment()
            .unwrap()
            .0
            .file()
            .unwrap();
        let segment = SharedBytes::open(file.try_clone().unwrap()).unwrap();
        let labels = Buffer::copy_from(&parts.labels).unwrap();
        let Data::Tensor(attached) =
            attach(&parts.header, vec![segment], &parts.places, &labels).unwrap()
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
            let file = parts.segments[0]
                .shared_segment()
                .unwrap()
                .0
                .file()
                .unwrap();
            vec![SharedBytes::open(file.try_clone().unwrap()).unwrap()]
        };
        let labels = Buffer::copy_from(&parts.labels).unwrap();
        let values = parts
            .places
            .iter()
            .position(|p| matches!(p, Place::Segment(_)))
            .unwrap();
        let with = |change: &dyn Fn(&mut Location)| {
            let mut places = parts.places.clone();
            let Place::Segment(location) = &mut places[values] else {
                unreachable!()
            };
            change(location);
            places
        };
        let far = with(&|l| l.offset = usize::MAX - 1);
        assert!(attach(&parts.header, open(), &far, &labels).is_err());
        let missing = with(&|l| l.segment = 1);
        assert!(attach(&parts.header, open(), &missing, &labels).is_err());
        assert!(attach(&parts.header, open(), &parts.places[1..], &labels).is_err());
        // label bytes that do not hold what the places say
        let short = Buffer::copy_from(&parts.labels[..8]).unwrap();
        assert!(attach(&parts.header, open(), &parts.places, &short).is_err());
        // label bytes changed by the sender afterwards cannot reach the
        // attached labels: they are copied and checked
        let mut duplicated = parts.labels.clone();
        duplicated.fill(0);
        let duplicated = Buffer::copy_from(&duplicated).unwrap();
        assert!(attach(&parts.header, open(), &parts.places, &duplicated).is_err());
    }
}
