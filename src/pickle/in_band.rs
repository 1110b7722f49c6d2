//! The in-band forms (protocol < 5): the `.mts` archive (a bare NPY file
//! for labels) in one piece, version 0, or in several, version 2.

use crate::buffer::{Allocate, PiecedWriter};
use crate::data::DataRef;
use crate::error::Result;
use crate::io;

use super::{ARCHIVE_VERSION, PIECES_VERSION};

/// The most bytes the in-band form of `data` takes (an upper bound).
pub fn in_band_bound(data: DataRef<'_>) -> usize {
    io::save_size_bound(data)
}

/// The size of the pieces the in-band form of `data` is written in, for
/// pieces of about `target` bytes: labels (a bare NPY file, small) in one
/// piece whatever the target.
pub fn in_band_piece_size(data: DataRef<'_>, target: usize) -> usize {
    match data {
        DataRef::Labels(_) => in_band_bound(data),
        _ => target,
    }
}

/// Write the in-band form of `data` (protocol < 5) into `writer`, made
/// with [`in_band_bound`] and [`in_band_piece_size`]: the `.mts` archive
/// (a bare NPY file for labels), each array whole in one piece.
pub fn write_in_band<'a, A: Allocate<'a>>(
    writer: &mut PiecedWriter<'a, A>,
    data: DataRef<'_>,
) -> Result<()> {
    let next_data = match data {
        // a bare NPY file has no array data to tell of
        DataRef::Labels(_) => None,
        _ => Some(writer.next_data()),
    };
    io::save_archive(writer, data, next_data).map(drop)
}

/// The version of an in-band pickle written in `pieces` pieces.
pub fn in_band_version(pieces: usize) -> u32 {
    if pieces == 1 {
        ARCHIVE_VERSION
    } else {
        PIECES_VERSION
    }
}
