//! The arguments of a reconstructor call, read and dispatched on their
//! version: out of band (1, 3), the archive in one piece (0) or in
//! several (2).

use crate::buffer::Buffer;
use crate::data::{Data, Kind};
use crate::error::{Error, Result};
use crate::io;

use super::rebuild::load_copied;
use super::{ARCHIVE_VERSION, PIECES_VERSION, VERSION};

/// The arguments of a reconstructor call after the version, as the binding
/// reads them from the objects the unpickler gives.
pub trait Arguments {
    /// The binding's error, which core errors become.
    type Error: From<Error>;

    /// How many there are.
    fn count(&self) -> usize;

    /// Argument `index` as a string, `None` when it is not one.
    fn text(&self, index: usize) -> Result<Option<String>, Self::Error>;

    /// The bytes of argument `index`. `in_band`: a piece of an archive the
    /// pickler wrote into the stream, which the unpickler made into a new
    /// object (that the binding may view writable, as numpy does).
    fn buffer(&self, index: usize, in_band: bool) -> Result<Buffer, Self::Error>;
}

/// What the arguments of a reconstructor call describe.
#[derive(Debug)]
pub enum Pickled {
    /// versions 1 and 3: a header and one buffer per array
    OutOfBand {
        /// 1 or 3
        version: u32,
        /// the metadata header (JSON)
        header: Buffer,
        /// the arrays' buffers, in the header's order
        buffers: Vec<Buffer>,
    },
    /// version 0: the `.mts` archive (or NPY file) in one buffer
    Archive {
        /// what the archive holds
        kind: Kind,
        /// the archive
        archive: Buffer,
    },
    /// version 2: the `.mts` archive in pieces
    Pieces {
        /// what the archive holds
        kind: Kind,
        /// the pieces, in order
        pieces: Vec<Buffer>,
    },
}

impl Pickled {
    /// Read the arguments of a reconstructor call of format `version`
    /// (refusing versions this blockmap does not know).
    pub fn read<A: Arguments>(version: i64, args: &A) -> Result<Self, A::Error> {
        let count = args.count();
        let buffers = |first: usize, in_band: bool| {
            (first..count)
                .map(|i| args.buffer(i, in_band))
                .collect::<Result<Vec<_>, _>>()
        };
        match version {
            1 | 3 => {
                if count == 0 {
                    return Err(Error::format("the pickle has no header").into());
                }
                Ok(Pickled::OutOfBand {
                    version: if version == 1 { 1 } else { VERSION },
                    header: args.buffer(0, false)?,
                    buffers: buffers(1, false)?,
                })
            }
            0 => {
                if count != 2 {
                    return Err(Error::format(format!(
                        "a version 0 pickle has a kind and an archive, got {count} arguments"
                    ))
                    .into());
                }
                Ok(Pickled::Archive {
                    kind: Self::kind(args, ARCHIVE_VERSION)?,
                    archive: args.buffer(1, true)?,
                })
            }
            2 => {
                if count == 0 {
                    return Err(Error::format(
                        "a version 2 pickle has a kind and pieces, got no arguments",
                    )
                    .into());
                }
                Ok(Pickled::Pieces {
                    kind: Self::kind(args, PIECES_VERSION)?,
                    pieces: buffers(1, true)?,
                })
            }
            other => Err(Error::format(format!(
                "unknown pickle format version {other}: this blockmap reads versions 0 to \
                 {VERSION}; the pickle may come from a newer blockmap"
            ))
            .into()),
        }
    }

    /// The kind of object (`"tensor"`, `"block"`, `"labels"`) the first
    /// argument of an in-band pickle of format `version` names.
    fn kind<A: Arguments>(args: &A, version: u32) -> Result<Kind, A::Error> {
        let name = args.text(0)?.ok_or_else(|| {
            Error::format(format!(
                "the kind of a version {version} pickle must be a string"
            ))
        })?;
        Ok(Kind::from_name(&name)?)
    }

    /// Rebuild the object, validating everything.
    pub fn load(self) -> Result<Data> {
        match self {
            Pickled::OutOfBand {
                version,
                header,
                buffers,
            } => {
                // the header is copied once into blockmap's memory, and
                // checked and parsed from the copy, whatever holds it (a
                // `bytes` object, or memory others may write: the
                // aliasing rule, buffer/mod.rs)
                let copy = header.raw().to_vec()?;
                load_copied(version, &copy, buffers)
            }
            Pickled::Archive { kind, archive } => io::load_buffer_checked(archive, kind, false),
            Pickled::Pieces { kind, pieces } => io::load_pieces(pieces, kind, false),
        }
    }
}
