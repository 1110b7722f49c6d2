//! What opening a file of format version 2 or 3 finds ([`Contents`]: by
//! its last commit, `open.rs`, or by walking its records, `recover.rs`),
//! and the reads of records from the file both ways use: a record header
//! bounded by the file's length, a payload checked against its CRC.

use std::fs::File;

use super::codec::{parse_columns, Schema};
use super::layout::{parse_record, Record, RecordKind, Row, RECORD_LEN};
use crate::dataset::read_at;
use crate::error::{Error, Result};

/// What a version-2 or 3 file holds, found by opening it.
#[derive(Debug, Clone)]
pub(super) struct Contents {
    pub id: String,
    /// the file's format version (2 or 3)
    pub version: u32,
    pub schema: Option<Schema>,
    /// where the schema record lies (0: none yet)
    pub schema_at: u64,
    pub rows: Vec<Row>,
    /// per column of the schema, then per field (its first block's
    /// samples), one value per entry, as bits (`None`: in the COLUMNS
    /// record at `columns_at`, read when asked for)
    pub columns: Option<Vec<Vec<u64>>>,
    /// where the COLUMNS record of a committed file lies
    pub columns_at: u64,
    pub committed: bool,
    /// where the file's complete content ends (an append writes there)
    pub end: u64,
}

pub(super) fn bad(what: impl std::fmt::Display) -> Error {
    Error::format(format!("dataset file: {what}"))
}

/// The record header at `at` when one is there and its payload lies in
/// the file (`None` otherwise). `at` comes from the file: it is bounded by
/// the file's length before anything is read (an offset of 2**63 or more
/// is no record, not an error of the system's `pread`).
pub(in crate::dataset) fn record_at(file: &File, at: u64, file_len: u64) -> Result<Option<Record>> {
    if at
        .checked_add(RECORD_LEN as u64)
        .is_none_or(|end| end > file_len)
    {
        return Ok(None);
    }
    let bytes = read_at(file, at, RECORD_LEN)?;
    Ok(parse_record(&bytes).filter(|record| fits(at, *record, file_len)))
}

/// Whether the payload of `record`, whose header is at `at`, lies in a
/// file of `file_len` bytes.
pub(super) fn fits(at: u64, record: Record, file_len: u64) -> bool {
    at.checked_add(RECORD_LEN as u64)
        .and_then(|start| start.checked_add(record.len))
        .is_some_and(|end| end <= file_len)
}

/// The payload of a record whose header was checked, its CRC verified.
pub(in crate::dataset) fn payload_at(
    file: &File,
    at: u64,
    record: Record,
) -> Result<Option<Vec<u8>>> {
    let len = usize::try_from(record.len).map_err(|_| bad("a record too large"))?;
    let bytes = read_at(file, at + RECORD_LEN as u64, len)?;
    Ok((bytes.len() == len && crc32fast::hash(&bytes) == record.crc).then_some(bytes))
}

impl Contents {
    /// The columns, read from the COLUMNS record when not read yet (an
    /// append rewrites them at its commit).
    pub(super) fn take_columns(&mut self, file: &File, file_len: u64) -> Result<Vec<Vec<u64>>> {
        if let Some(columns) = self.columns.take() {
            return Ok(columns);
        }
        let n = self.column_count();
        let record = record_at(file, self.columns_at, file_len)?
            .filter(|r| r.kind == RecordKind::Columns)
            .ok_or_else(|| bad("no COLUMNS record where the commit says"))?;
        let payload = payload_at(file, self.columns_at, record)?
            .ok_or_else(|| bad("a damaged COLUMNS record"))?;
        parse_columns(&payload, self.columns_at, self.rows.len(), n)
    }

    /// The schema's columns, then one per field.
    pub(super) fn column_count(&self) -> usize {
        self.schema
            .as_ref()
            .map_or(0, |s| s.columns.len() + s.fields.len())
    }
}
