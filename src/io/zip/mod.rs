//! blockmap's zip, the one implementation every archive goes through: the
//! records and their fields (`records.rs`), the writer of `.mts` archives
//! (`writer.rs`: STORED entries, 64-byte aligned payloads, CRCs, ZIP64
//! where needed), and the central-directory reader every load goes
//! through (`reader.rs`), which inflates DEFLATE entries (archives from
//! elsewhere) with `flate2`. Version-1 dataset files, zips of `.mts`
//! archives, are read with the same reader and records.
//!
//! The `zip` crate is a dev-dependency only: an independent reader and
//! writer the tests compare blockmap's archives with.

pub(crate) mod reader;
mod records;
pub(crate) mod writer;

pub(crate) use records::*;
