//! Dataset format versions 2, 3 and 4 (docs/format.md, "Datasets"): a
//! 64-byte file header, then records on 64-byte boundaries (SCHEMA,
//! LABELS, ENTRY, COLUMNS or SEGMENT, COMMIT), each commit followed by a
//! trailer that ends the file. Version 3's rows also hold the CRC32 of
//! each entry's description, checked at every read; version 2's do not
//! (its files keep opening, reading and appending, in version 2). A
//! version-4 commit lists its entries in SEGMENT records (pieces merged
//! as an LSM tree's levels, `writer.rs`), so that a commit writes the
//! rows of the entries written since the one before, not all of them.
//!
//! An entry is a pre-parsed description of its maps (offsets, shapes,
//! dtypes, label references) followed by their arrays, 64-byte aligned in
//! the file: reading one copies its description out of the mapping,
//! decodes it and views the arrays in place. Labels seen before by the
//! writing session (keys, components, properties; samples equal to labels
//! already stored) are stored once in LABELS records and referenced by
//! file offset; the reader caches the labels of these records, so equal
//! labels share memory across reads.
//!
//! Entries hold data users write, which may hold anything, the bytes of
//! this format's records included: nothing is recognised by its content
//! alone (`open.rs` says when the last commit is taken, `recover.rs` how
//! the records are walked otherwise), and the writer cuts off the bytes of
//! a write that failed before anything else is written after them.
//!
//! - `layout.rs`: where every fixed field lies, the record kinds, the
//!   dtype codes;
//! - `codec.rs`: the payloads' encodings (schema, labels, columns, commit
//!   rows), `describe.rs`: an entry's description as the writer encodes it;
//! - `contents.rs`: what an open finds, and the reads of records;
//!   `open.rs`: the last commit; `recover.rs`: the walk of the records;
//! - `reader.rs`: the mapped reader, `writer.rs`: the writer.

pub(super) mod codec;
mod contents;
mod describe;
pub(super) mod layout;
mod open;
mod reader;
mod recover;
mod writer;

pub use codec::{ColumnType, ColumnValue, Schema, SINGLE_FIELD};
pub(super) use contents::{payload_at, piece_columns, record_at};
pub use describe::Entry;
pub(super) use open::parse_commit;
pub use reader::Dataset;
pub(super) use recover::hash_payload;
pub use writer::Writer;
