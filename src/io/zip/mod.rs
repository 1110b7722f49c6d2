//! blockmap's zip: the records of the format written and read by hand
//! (`records.rs`), the writer of `.mts` archives (`writer.rs`: STORED
//! entries, 64-byte aligned payloads, CRCs, ZIP64 where needed), and the
//! central-directory reader every load goes through (`reader.rs`). Dataset
//! files are made and read with the same records.
//!
//! The `zip` crate remains only for archives from elsewhere with compressed
//! (DEFLATE) entries.

pub(crate) mod reader;
mod records;
pub(crate) mod writer;

pub(crate) use records::*;
