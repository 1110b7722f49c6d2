//! The pickle wire format, every version, and the dispatch on the version
//! (see `docs/pickle.md`); the binding only turns Python objects into
//! [`Buffer`](crate::buffer::Buffer)s and back ([`Arguments`]).
//!
//! - protocol >= 5, out of band (version 3; version 1 is read too): a
//!   small metadata header and one buffer per array, in a fixed order,
//!   labels equal to earlier ones referring to them. [`dump`] lists the
//!   buffers a map, block or labels already hold (nothing is copied);
//!   [`load`] rebuilds the object from a header and buffers given by a
//!   transport, viewing each buffer when it is aligned for its element
//!   type and copying it otherwise, and validating everything;
//! - protocol < 5, in band: the `.mts` archive in one piece (version 0,
//!   and always for labels, a bare NPY file) or in several (version 2),
//!   each array whole in one piece ([`write_in_band`]).
//!
//! [`Pickled::read`] reads the arguments of a reconstructor call of any
//! version, [`Pickled::load`] rebuilds the object they describe.
//!
//! Files, bottom up: `header` (the header's schema, and its parsing),
//! `writer` (a header and the buffers of the wire order),
//! `gather` (received labels copied into one allocation, equal ones made
//! once), `rebuild` (objects rebuilt from a parsed header and the
//! buffers), `in_band` (protocols < 5), `version` (the reconstructor's
//! arguments, dispatched on the version).

mod gather;
mod header;
mod in_band;
mod rebuild;
mod version;
mod writer;

pub use in_band::{in_band_bound, in_band_piece_size, in_band_version, write_in_band};
pub use rebuild::{load, load_version};
pub use version::{Arguments, Pickled};
pub use writer::{dump, dump_with_roles, Buffers, Role};

/// The version of the wire format [`dump`] writes. [`load`] reads it and
/// version 1, the same without references to earlier labels.
pub const VERSION: u32 = 3;

/// The version of the in-band `.mts` form in one piece (protocol < 5).
pub const ARCHIVE_VERSION: u32 = 0;

/// The version of the in-band `.mts` form in several pieces.
pub const PIECES_VERSION: u32 = 2;

/// Labels up to this size (components and properties, mostly) that are
/// equal to labels met before them are sent once: later ones refer to the
/// first (see `LabelsField::Same`); received, they are built once and
/// shared. A map of 10,000 blocks whose blocks have equal components and
/// properties sends 2 buffers per block, not 4.
const SHARED_LABELS_MAX: usize = 4 << 10;

#[cfg(test)]
mod tests;
