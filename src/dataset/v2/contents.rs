//! What opening a file of format version 2 or 3 finds ([`Contents`]: by
//! its last commit, `open.rs`, or by walking its records, `recover.rs`),
//! and the reads of records from the file both ways use: a record header
//! bounded by the file's length, a payload checked against its CRC.

use std::fs::File;

use super::codec::{parse_columns, parse_segment_columns, Schema};
use super::layout::{parse_record, Piece, Record, RecordKind, Row, RECORD_LEN};
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
    /// where the COLUMNS record of a committed file lies (versions 2 and 3)
    pub columns_at: u64,
    /// the runs of entries the last commit lists, in SEGMENT records
    /// (version 4; empty in versions 2 and 3, and when no commit's pieces
    /// could be taken: the next commit writes one for all the entries)
    pub pieces: Vec<Piece>,
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
        if !self.pieces.is_empty() {
            return piece_columns(&self.pieces, n, |at, len| {
                let bytes = read_at(file, at, len)?;
                if bytes.len() == len {
                    Ok(bytes)
                } else {
                    Err(bad("a SEGMENT record outside the file"))
                }
            });
        }
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

/// The `n` columns of the entries of `pieces` (version 4), each piece's
/// columns part read by `read(offset, len)` (from the file, or copied out
/// of its mapping) and checked against the CRC32 its commit holds.
pub(in crate::dataset) fn piece_columns(
    pieces: &[Piece],
    n: usize,
    read: impl Fn(u64, usize) -> Result<Vec<u8>>,
) -> Result<Vec<Vec<u64>>> {
    let mut columns = vec![Vec::new(); n];
    for piece in pieces {
        let start = piece.at + RECORD_LEN as u64;
        let len = piece
            .values_len(n)
            .and_then(|len| usize::try_from(len).ok())
            .ok_or_else(|| bad("a piece's range"))?;
        let bytes = read(start, len)?;
        if crc32fast::hash(&bytes) != piece.columns_crc {
            return Err(bad("a damaged SEGMENT record (its columns' CRC differs)"));
        }
        parse_segment_columns(&bytes, piece.count, &mut columns)?;
        crate::interrupt::check()?;
    }
    Ok(columns)
}
