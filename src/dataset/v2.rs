//! Dataset format versions 2 and 3 (docs/format.md, "Datasets"): a 64-byte
//! file header, then records on 64-byte boundaries (SCHEMA, LABELS, ENTRY,
//! COLUMNS, COMMIT), each commit followed by a trailer that ends the
//! file. Opening reads the trailer and the COMMIT record (the rows); the
//! COLUMNS record is read when a column is first asked for. Version 3's
//! rows also hold the CRC32 of each entry's description, checked at every
//! read; version 2's do not (its files keep opening, reading and
//! appending, in version 2).
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
//! alone. The trailer at the end of the file is taken for the last commit
//! only where it closes the COMMIT record it names, and where nothing but
//! records of commits lies between the last entry that record lists and
//! it ([`Contents::last_commit`]); records are otherwise found by walking
//! them from the file header, each from the end of the one before; and
//! the writer cuts off the bytes of a write that failed before anything
//! else is written after them (so that no walk meets them).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub use super::format::Row;
use super::format::{
    self as f, align_up, ColumnType, Cursor, Kind, Schema, Value, RECORD_LEN, ROW_LEN, TRAILER_LEN,
};
use super::{io_error, lock, read_at, Slot, Timeout};
use crate::arc::{ForkMutex, SetOnce};
use crate::array::{Array, Layout};
use crate::block::TensorBlock;
use crate::buffer::{Advice, Buffer};
use crate::data::DataRef;
use crate::error::{Error, Result};
use crate::io;
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// Entries whose record is at most this large are built in memory and
/// written with one `pwrite`; larger ones stream their arrays.
const IN_MEMORY: usize = 4 << 20;

/// The most [`Dataset::prefetch`] asks the kernel to read ahead at once.
const PREFETCH: u64 = 64 << 20;

/// Entries of at least this many bytes have their arrays read ahead when
/// read whole (`ds[i]`); smaller ones fault in their own pages.
const LARGE_ENTRY: u64 = 1 << 20;

/// Labels records the reader keeps decoded (cleared whole when full).
const LABELS_CACHE: usize = 4096;

/// What a version-2 or 3 file holds, found by opening it.
#[derive(Debug, Clone)]
pub struct Contents {
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

fn bad(what: impl std::fmt::Display) -> Error {
    Error::format(format!("dataset file: {what}"))
}

/// The record header at `at` when one is there and its payload lies in
/// the file (`None` otherwise). `at` comes from the file: it is bounded by
/// the file's length before anything is read (an offset of 2**63 or more
/// is no record, not an error of the system's `pread`).
pub(super) fn record_at(file: &File, at: u64, file_len: u64) -> Result<Option<f::Record>> {
    if at
        .checked_add(RECORD_LEN as u64)
        .is_none_or(|end| end > file_len)
    {
        return Ok(None);
    }
    let bytes = read_at(file, at, RECORD_LEN)?;
    let Some(record) = f::parse_record(&bytes) else {
        return Ok(None);
    };
    let fits = at
        .checked_add(RECORD_LEN as u64)
        .and_then(|s| s.checked_add(record.len))
        .is_some_and(|end| end <= file_len);
    Ok(fits.then_some(record))
}

/// The file read through a window of [`Window::SIZE`] bytes: the
/// recovery walk reads 16 bytes per record, and small records lie many to
/// a window (one `pread` each 64 KiB, not one per record).
struct Window<'a> {
    file: &'a File,
    at: u64,
    bytes: Vec<u8>,
}

impl<'a> Window<'a> {
    const SIZE: usize = 64 << 10;

    fn new(file: &'a File) -> Self {
        Window {
            file,
            at: 0,
            bytes: Vec::new(),
        }
    }

    /// The `len` bytes (at most [`Window::SIZE`]) at `at`, fewer at the
    /// end of the file.
    fn get(&mut self, at: u64, len: usize) -> Result<&[u8]> {
        let inside = at >= self.at && at + len as u64 <= self.at + self.bytes.len() as u64;
        if !inside {
            self.bytes = read_at(self.file, at, Self::SIZE.max(len))?;
            self.at = at;
        }
        let start = usize::try_from(at - self.at).map_err(|_| bad("an offset"))?;
        let end = (start + len).min(self.bytes.len());
        Ok(&self.bytes[start.min(end)..end])
    }

    /// The record header at `at` and whether its payload lies in the file
    /// (as [`record_at`]).
    fn record(&mut self, at: u64, file_len: u64) -> Result<Option<f::Record>> {
        if at >= file_len {
            return Ok(None);
        }
        let Some(record) = f::parse_record(self.get(at, RECORD_LEN)?) else {
            return Ok(None);
        };
        let fits = at
            .checked_add(RECORD_LEN as u64)
            .and_then(|s| s.checked_add(record.len))
            .is_some_and(|end| end <= file_len);
        Ok(fits.then_some(record))
    }
}

/// The payload of a record whose header was checked, its CRC verified.
pub(super) fn payload_at(file: &File, at: u64, record: f::Record) -> Result<Option<Vec<u8>>> {
    let len = usize::try_from(record.len).map_err(|_| bad("a record too large"))?;
    let bytes = read_at(file, at + RECORD_LEN as u64, len)?;
    Ok((bytes.len() == len && crc32fast::hash(&bytes) == record.crc).then_some(bytes))
}

/// Whether the payload of a record whose header was checked hashes to its
/// CRC, read a piece at a time (an entry may be gigabytes: recovery reads
/// it in constant memory).
fn payload_intact(file: &File, at: u64, record: f::Record) -> Result<bool> {
    Ok(hash_payload(file, at, record)?.is_some())
}

/// The CRC32 of the description of the entry whose record is at `at`
/// when its payload hashes to its CRC (`None` otherwise), read a piece at
/// a time: what recovery knows of an entry no valid commit lists.
pub(super) fn hash_payload(file: &File, at: u64, record: f::Record) -> Result<Option<u32>> {
    const PIECE: u64 = 1 << 20;
    let mut hasher = crc32fast::Hasher::new();
    let mut description = crc32fast::Hasher::new();
    // the description's length and the description: the payload's first
    // 8 + length bytes (as many as there are)
    let mut description_end = 8u64.min(record.len);
    let start = at + RECORD_LEN as u64;
    let mut done = 0u64;
    while done < record.len {
        let n = usize::try_from((record.len - done).min(PIECE)).unwrap_or(0);
        let piece = read_at(file, start + done, n)?;
        if piece.len() != n {
            return Ok(None);
        }
        if done == 0 && piece.len() >= 8 {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(&piece[..8]);
            description_end = u64::from_le_bytes(raw).saturating_add(8).min(record.len);
        }
        hasher.update(&piece);
        if done < description_end {
            let upto = usize::try_from((description_end - done).min(n as u64)).unwrap_or(n);
            description.update(&piece[..upto]);
        }
        done += n as u64;
        crate::interrupt::check()?;
    }
    Ok((hasher.finalize() == record.crc).then(|| description.finalize()))
}

/// The column values and per-field sample counts at the start of an entry
/// payload's description.
pub(super) fn entry_values(payload_head: &[u8], n: usize) -> Result<Vec<u64>> {
    let mut c = Cursor::new(payload_head, f::ENTRY);
    let desc_len = c.u64()?;
    if desc_len < (n as u64) * 8 {
        return Err(c.bad("description"));
    }
    (0..n).map(|_| c.u64()).collect()
}

/// A commit record's payload, decoded.
struct Commit {
    schema_at: u64,
    schema: Option<Schema>,
    rows: Vec<Row>,
    columns_at: u64,
}

impl Contents {
    /// Open a version-2 or 3 file of `file_len` bytes: from its last
    /// commit when the file ends with it, by walking its records otherwise.
    pub fn read(file: &File, file_len: u64) -> Result<Contents> {
        let header = read_at(file, 0, f::HEADER_LEN)?;
        let (id, version) = f::parse_file_header(&header)?;
        match Self::last_commit(file, file_len, &id, version) {
            Ok(Some((contents, true))) => Ok(contents),
            // a commit record the trailer closes, but something between its
            // last entry and it is not a commit's: a copy of a commit
            // record and its trailer inside an entry's data (the walk then
            // finds as many entries as it lists, or more: the entry holding
            // the copy at least), or damage there (the walk stops at it,
            // before the last entry the record lists: the record is kept,
            // and the damaged entry fails its reads alone)
            Ok(Some((contents, false))) => match Self::recover(file, file_len, id, version) {
                Ok(walked) if walked.rows.len() >= contents.rows.len() => Ok(walked),
                Ok(_) | Err(Error::Format(_)) => Ok(contents),
                Err(other) => Err(other),
            },
            // no commit at the end (a writer interrupted), or a trailer
            // that does not close one (damaged, or bytes of an entry's data
            // that look like one): the walk decides
            Ok(None) | Err(Error::Format(_)) => Self::recover(file, file_len, id, version),
            Err(other) => Err(other),
        }
    }

    /// The contents the commit record that the file's trailer closes
    /// describes, and whether that record follows the last entry it lists
    /// as a commit does. `None` (or a format error) when the file's last
    /// 32 bytes are not a trailer, or not one that closes a commit: the
    /// trailer must directly follow the COMMIT record it names, whose CRC
    /// and count must match. An entry's data that ends with a copy of an
    /// earlier trailer is not one. The flag is false unless the last entry
    /// the record lists is where it says, and only records of commits (an
    /// earlier commit of the same entries, COLUMNS records, the SCHEMA and
    /// LABELS records an interrupted write left) lie between that entry
    /// and the record: an entry's data that ends with a copy of a whole
    /// commit record and its trailer, placed where they name themselves,
    /// lies after an entry record no commit lists.
    pub(super) fn last_commit(
        file: &File,
        file_len: u64,
        id: &str,
        version: u32,
    ) -> Result<Option<(Contents, bool)>> {
        let Some(trailer_at) = file_len
            .checked_sub(TRAILER_LEN as u64)
            .filter(|&t| t >= f::HEADER_LEN as u64)
        else {
            return Ok(None);
        };
        let tail = read_at(file, trailer_at, TRAILER_LEN)?;
        let Some((at, count)) = f::parse_trailer(&tail) else {
            return Ok(None);
        };
        if at % f::ALIGN != 0 || at < f::HEADER_LEN as u64 || at >= trailer_at {
            return Ok(None);
        }
        let Some(record) = record_at(file, at, file_len)? else {
            return Ok(None);
        };
        if record.kind != Kind::Commit || at + RECORD_LEN as u64 + record.len != trailer_at {
            return Ok(None);
        }
        let Some(payload) = payload_at(file, at, record)? else {
            return Ok(None);
        };
        let commit = parse_commit(file, file_len, at, &payload, version)?;
        if commit.rows.len() as u64 != count {
            return Ok(None);
        }
        let chained = only_commits_between(file, file_len, &commit, at, count)?;
        // no entry, no COLUMNS record: every column is empty
        let n = commit
            .schema
            .as_ref()
            .map_or(0, |s| s.columns.len() + s.fields.len());
        let columns = (commit.columns_at == 0).then(|| vec![Vec::new(); n]);
        let contents = Contents {
            id: id.to_string(),
            version,
            schema: commit.schema,
            schema_at: commit.schema_at,
            rows: commit.rows,
            columns,
            columns_at: commit.columns_at,
            committed: true,
            end: file_len,
        };
        Ok(Some((contents, chained)))
    }

    /// Walk the records from the header, keeping every complete entry (a
    /// file whose last writer did not commit). Entries listed by a valid
    /// commit record met on the way are not hashed again.
    #[allow(clippy::too_many_lines)] // one walk, in order
    fn recover(file: &File, file_len: u64, id: String, version: u32) -> Result<Contents> {
        let mut at = f::HEADER_LEN as u64;
        let mut end = at;
        let mut rows = Vec::new();
        let mut verified = 0usize;
        let mut last_commit = None;
        let mut schema: Option<(u64, Schema)> = None;
        let mut window = Window::new(file);
        while let Some(record) = window.record(at, file_len)? {
            let next = align_up(at + RECORD_LEN as u64 + record.len);
            match record.kind {
                Kind::Entry => {
                    if schema.is_none() || record.len == 0 {
                        break;
                    }
                    rows.push(Row {
                        offset: at,
                        len: record.len,
                        crc: record.crc,
                        desc_crc: 0,
                    });
                }
                Kind::Schema => {
                    // complete (it fits in the file), it was written whole:
                    // a damaged one is an error, not the end of the walk,
                    // which would leave no entry (and an append would cut
                    // them all off)
                    let Some(payload) = payload_at(file, at, record)? else {
                        return Err(bad("a damaged schema record"));
                    };
                    match &schema {
                        None => schema = Some((at, Schema::decode(&payload)?)),
                        Some(_) => return Err(bad("two schema records")),
                    }
                }
                Kind::Commit => {
                    // a commit whose trailer follows it in full
                    let trailer_at = at + RECORD_LEN as u64 + record.len;
                    let tail = read_at(file, trailer_at, TRAILER_LEN)?;
                    if f::parse_trailer(&tail) != Some((at, rows.len() as u64)) {
                        break;
                    }
                    if payload_intact(file, at, record)? {
                        verified = rows.len();
                        last_commit = Some((at, record));
                    }
                    // a damaged commit record closed by its trailer is
                    // passed over: the entries it lists are hashed, as
                    // those after the last commit
                    at = align_up(trailer_at + TRAILER_LEN as u64);
                    end = at.min(file_len);
                    continue;
                }
                // a COLUMNS record is followed by its COMMIT; one alone
                // (a commit interrupted) is skipped: recovery reads the
                // values from the entries
                Kind::Labels | Kind::Columns => {}
            }
            at = next;
            // a record is complete once its payload is in the file; the
            // padding after the last one may be missing
            end = at.min(file_len);
        }
        // the description checksums of the entries the last valid commit
        // lists, from its rows (which must be the entries walked)
        if let Some((commit_at, record)) = last_commit.filter(|_| f::has_description_crcs(version))
        {
            let listed = payload_at(file, commit_at, record)?
                .and_then(|payload| parse_rows(&payload, version).ok())
                .filter(|listed| {
                    listed.len() == verified
                        && listed
                            .iter()
                            .zip(&rows)
                            .all(|(a, b)| (a.offset, a.len, a.crc) == (b.offset, b.len, b.crc))
                });
            match listed {
                Some(listed) => {
                    for (row, from) in rows.iter_mut().zip(listed) {
                        row.desc_crc = from.desc_crc;
                    }
                }
                // the commit lists other entries than the walk found: none
                // is taken on its word
                None => verified = 0,
            }
        }
        // entries after the last commit: kept up to the first whose
        // payload does not hash to its header's CRC
        let mut keep = verified;
        for row in &mut rows[verified..] {
            let record = f::Record {
                kind: Kind::Entry,
                crc: row.crc,
                len: row.len,
            };
            let Some(desc_crc) = hash_payload(file, row.offset, record)? else {
                break;
            };
            row.desc_crc = desc_crc;
            keep += 1;
        }
        if keep < rows.len() {
            end = rows[keep].offset;
            rows.truncate(keep);
        }
        let (schema_at, schema) = match schema {
            Some((at, schema)) => (at, Some(schema)),
            None => (0, None),
        };
        let n = schema
            .as_ref()
            .map_or(0, |s| s.columns.len() + s.fields.len());
        let mut columns = vec![Vec::with_capacity(rows.len()); n];
        for row in &rows {
            let head_len = usize::try_from(row.len.min(8 + 8 * n as u64)).unwrap_or(0);
            let head = if head_len <= Window::SIZE {
                window
                    .get(row.offset + RECORD_LEN as u64, head_len)?
                    .to_vec()
            } else {
                read_at(file, row.offset + RECORD_LEN as u64, head_len)?
            };
            for (column, value) in columns.iter_mut().zip(entry_values(&head, n)?) {
                column.push(value);
            }
        }
        Ok(Contents {
            id,
            version,
            schema,
            schema_at,
            rows,
            columns: Some(columns),
            columns_at: 0,
            committed: false,
            end,
        })
    }

    /// The columns, read from the COLUMNS record when not read yet (an
    /// append rewrites them at its commit).
    fn take_columns(&mut self, file: &File, file_len: u64) -> Result<Vec<Vec<u64>>> {
        if let Some(columns) = self.columns.take() {
            return Ok(columns);
        }
        let n = self.column_count();
        let record = record_at(file, self.columns_at, file_len)?
            .filter(|r| r.kind == Kind::Columns)
            .ok_or_else(|| bad("no COLUMNS record where the commit says"))?;
        let payload = payload_at(file, self.columns_at, record)?
            .ok_or_else(|| bad("a damaged COLUMNS record"))?;
        parse_columns(&payload, self.columns_at, self.rows.len(), n)
    }

    /// The schema's columns, then one per field.
    fn column_count(&self) -> usize {
        self.schema
            .as_ref()
            .map_or(0, |s| s.columns.len() + s.fields.len())
    }
}

/// Whether only records of commits lie between the last entry `commit`
/// lists (found where its row says) and the commit record at `at`: an
/// earlier commit of the same `count` entries closed by its trailer,
/// COLUMNS records (the last one `commit`'s own), the schema, and LABELS
/// records (an interrupted write's, which recovery kept). The records are
/// walked from the end of that entry, each from the end of the one before
/// (a handful, read 16 bytes at a time), so that an entry record (whose
/// data could hold a copy of any of these) is never among them.
fn only_commits_between(
    file: &File,
    file_len: u64,
    commit: &Commit,
    at: u64,
    count: u64,
) -> Result<bool> {
    let mut here = match commit.rows.last() {
        Some(last) => {
            let Some(record) = record_at(file, last.offset, file_len)? else {
                return Ok(false);
            };
            if record.kind != Kind::Entry || record.len != last.len || record.crc != last.crc {
                return Ok(false);
            }
            align_up(last.offset + RECORD_LEN as u64 + last.len)
        }
        None => f::HEADER_LEN as u64,
    };
    let mut previous = 0;
    while here < at {
        let Some(record) = record_at(file, here, file_len)? else {
            return Ok(false);
        };
        let end = here + RECORD_LEN as u64 + record.len;
        previous = here;
        here = match record.kind {
            Kind::Entry => return Ok(false),
            Kind::Schema if here != commit.schema_at => return Ok(false),
            Kind::Commit => {
                let tail = read_at(file, end, TRAILER_LEN)?;
                if f::parse_trailer(&tail) != Some((here, count)) {
                    return Ok(false);
                }
                align_up(end + TRAILER_LEN as u64)
            }
            Kind::Schema | Kind::Labels | Kind::Columns => align_up(end),
        };
        crate::interrupt::check()?;
    }
    Ok(here == at && (commit.columns_at == 0 || previous == commit.columns_at))
}

/// The `n` columns of `count` values of a COLUMNS record's payload (the
/// record at `at`): u32 column count, then each column 64-byte aligned in
/// the file.
fn parse_columns(payload: &[u8], at: u64, count: usize, n: usize) -> Result<Vec<Vec<u64>>> {
    let mut c = Cursor::new(payload, f::COLUMNS);
    if c.u32()? as usize != n {
        return Err(c.bad("its columns do not match the schema"));
    }
    if count.saturating_mul(8).saturating_mul(n) > payload.len() {
        return Err(c.bad("a count larger than the record"));
    }
    let payload_at_file = at + RECORD_LEN as u64;
    let mut columns = Vec::with_capacity(n);
    for _ in 0..n {
        let here = payload_at_file + c.position() as u64;
        c.take(usize::try_from(align_up(here) - here).unwrap_or(0))?;
        let mut column = Vec::with_capacity(count);
        for _ in 0..count {
            column.push(c.u64()?);
        }
        columns.push(column);
    }
    if !c.rest().is_empty() {
        return Err(c.bad("bytes after its columns"));
    }
    Ok(columns)
}

/// The rows of a commit record's payload, unchecked (their places are
/// checked by [`parse_commit`]).
pub(super) fn parse_rows(payload: &[u8], version: u32) -> Result<Vec<Row>> {
    let mut c = Cursor::new(payload, f::COMMIT);
    let count = usize::try_from(c.u64()?).map_err(|_| c.bad("count"))?;
    c.take(16)?;
    if count.saturating_mul(ROW_LEN) > c.rest().len() {
        return Err(c.bad("a count larger than the record"));
    }
    let mut rows = Vec::with_capacity(count);
    for _ in 0..count {
        rows.push(Row::decode(&mut c, version)?);
    }
    if !c.rest().is_empty() {
        return Err(c.bad("bytes after its rows"));
    }
    Ok(rows)
}

/// The schema, rows and COLUMNS record offset of a commit record's
/// payload (the record at `at`), every offset checked.
fn parse_commit(
    file: &File,
    file_len: u64,
    at: u64,
    payload: &[u8],
    version: u32,
) -> Result<Commit> {
    let mut c = Cursor::new(payload, f::COMMIT);
    let count = c.u64()?;
    let schema_at = c.u64()?;
    let columns_at = c.u64()?;
    let count = usize::try_from(count).map_err(|_| c.bad("count"))?;
    if count.saturating_mul(ROW_LEN) > payload.len() {
        return Err(c.bad("a count larger than the record"));
    }
    let schema = if schema_at == 0 {
        if count > 0 || columns_at != 0 {
            return Err(c.bad("entries without a schema"));
        }
        None
    } else {
        let record = record_at(file, schema_at, file_len)?
            .filter(|r| r.kind == Kind::Schema && schema_at < at)
            .ok_or_else(|| c.bad("no schema where it says"))?;
        let bytes =
            payload_at(file, schema_at, record)?.ok_or_else(|| c.bad("a damaged schema record"))?;
        Some(Schema::decode(&bytes)?)
    };
    if (count == 0) != (columns_at == 0) {
        return Err(c.bad("a COLUMNS record offset without entries, or entries without it"));
    }
    let rows = parse_rows(payload, version)?;
    let mut previous_end = f::HEADER_LEN as u64;
    for row in &rows {
        let end = row
            .offset
            .checked_add(RECORD_LEN as u64)
            .and_then(|s| s.checked_add(row.len))
            .ok_or_else(|| c.bad("an entry's range"))?;
        if row.offset < previous_end || end > at || row.offset % f::ALIGN != 0 {
            return Err(c.bad("an entry's range"));
        }
        previous_end = end;
    }
    // the COLUMNS record lies after the entries, before this commit (its
    // header and payload are read when a column is asked for)
    if columns_at != 0
        && (columns_at < previous_end
            || columns_at % f::ALIGN != 0
            || columns_at.saturating_add(RECORD_LEN as u64) > at)
    {
        return Err(c.bad("the COLUMNS record's offset"));
    }
    Ok(Commit {
        schema_at,
        schema,
        rows,
        columns_at,
    })
}

/// A version-2 or 3 dataset opened for reading.
#[derive(Debug)]
pub struct Dataset {
    path: PathBuf,
    mapping: Buffer,
    contents: Contents,
    /// labels of LABELS records, by the offset of their encoding (a lock
    /// a forked child takes over; re-entered from a signal handler, the
    /// labels are decoded without it)
    labels: ForkMutex<HashMap<u64, Labels>>,
    /// the columns, read from the COLUMNS record at the first `column` or
    /// `n_samples` (a lock-free cell: a child forked while a thread reads
    /// them reads them again), as many values as the commit lists entries
    columns: SetOnce<Vec<Vec<u64>>>,
    /// the entries the commit lists (`keep_first` may keep fewer)
    committed_count: usize,
}

impl Dataset {
    pub fn open(path: &Path, file: &File, file_len: u64, mapping: Buffer) -> Result<Dataset> {
        let mut contents = Contents::read(file, file_len)
            .map_err(|e| e.context(format!("'{}'", path.display())))?;
        let columns = SetOnce::new();
        if let Some(read) = contents.columns.take() {
            // recovered or empty: known already
            let _ = columns.set(read);
        }
        let needed = contents
            .rows
            .last()
            .map_or(0, |r| r.offset + RECORD_LEN as u64 + r.len);
        if (mapping.len() as u64) < needed {
            return Err(Error::format(format!(
                "'{}' changed while it was opened",
                path.display()
            )));
        }
        // random access touches only its pages: no read-ahead around a
        // fault (the kernel's default pulls up to megabytes per map)
        mapping.advise(0, mapping.len(), Advice::Random);
        Ok(Dataset {
            path: path.to_path_buf(),
            mapping,
            committed_count: contents.rows.len(),
            contents,
            labels: ForkMutex::new(HashMap::new()),
            columns,
        })
    }

    /// Ask the kernel to read entries `start..start + count` (clamped)
    /// ahead: what iteration and `load_all` are about to read.
    pub fn prefetch(&self, start: usize, count: usize) {
        if let Some((offset, len)) = self.prefetch_range(start, count) {
            self.advise(offset, len, Advice::WillNeed);
        }
    }

    /// The file bytes [`Dataset::prefetch`] asks for: from entry `start`
    /// to the end of entry `start + count - 1`, at most [`PREFETCH`] bytes
    /// (256 entries of 100 MB would otherwise ask for 25 GB at once, and
    /// push out of the page cache what was read before).
    pub(super) fn prefetch_range(&self, start: usize, count: usize) -> Option<(u64, u64)> {
        let rows = &self.contents.rows;
        let end = start.saturating_add(count).min(rows.len());
        if start >= end {
            return None;
        }
        let first = rows[start].offset;
        let last = rows[end - 1];
        let until = last.offset + RECORD_LEN as u64 + last.len;
        Some((first, (until - first).min(PREFETCH)))
    }

    /// Advise the kernel about the file bytes `offset..offset + len` (the
    /// mapping is of the whole file, from its start).
    fn advise(&self, offset: u64, len: u64, advice: Advice) {
        let saturated = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        self.mapping
            .advise(saturated(offset), saturated(len), advice);
    }

    pub fn id(&self) -> &str {
        &self.contents.id
    }

    /// The file's format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.contents.version
    }

    pub fn len(&self) -> usize {
        self.contents.rows.len()
    }

    /// Entry `i`'s row (a position below `len`).
    pub fn row(&self, i: usize) -> Row {
        self.contents.rows[i]
    }

    pub fn committed(&self) -> bool {
        self.contents.committed
    }

    pub fn schema(&self) -> Option<&Schema> {
        self.contents.schema.as_ref()
    }

    pub fn is_empty_schema(&self) -> bool {
        self.contents.schema.is_none()
    }

    pub fn mapping(&self) -> &Buffer {
        &self.mapping
    }

    pub fn keep_first(&mut self, count: usize) {
        // the columns are cut to this count when read (`kept`)
        self.contents.rows.truncate(count);
    }

    pub fn slot(&self, i: usize) -> Slot {
        let row = self.contents.rows[i];
        Slot {
            offset: row.offset,
            len: row.len + RECORD_LEN as u64,
        }
    }

    /// Whether entry `i`'s payload (its description and arrays) hashes to
    /// the CRC32 its row holds, read through the mapping a piece at a
    /// time: what `verify` and `upgrade` check before trusting an entry
    /// (a read checks its description only).
    pub fn payload_intact(&self, i: usize) -> Result<bool> {
        let row = self.contents.rows[i];
        let raw = self.mapping.raw();
        let start = usize::try_from(row.offset).map_err(|_| bad("entry offset"))?;
        let len = usize::try_from(row.len).map_err(|_| bad("entry length"))?;
        let mut head = [0u8; RECORD_LEN];
        raw.get(start, RECORD_LEN)
            .ok_or_else(|| bad("an entry outside the file"))?
            .copy_to(&mut head)?;
        if f::parse_record(&head)
            != Some(f::Record {
                kind: Kind::Entry,
                crc: row.crc,
                len: row.len,
            })
        {
            return Ok(false);
        }
        let payload = raw
            .get(start + RECORD_LEN, len)
            .ok_or_else(|| bad("an entry outside the file"))?;
        // under MADV_RANDOM, a large entry is asked for 64 MiB at a time
        let large = row.len >= LARGE_ENTRY;
        let hashed = super::crc32_of_mapped(payload, |k| {
            if large && k % 64 == 0 {
                let from = row.offset + RECORD_LEN as u64 + ((k as u64) << 20);
                self.advise(from, PREFETCH, Advice::WillNeed);
            }
        })?;
        self.mapping.check_intact()?;
        Ok(hashed == row.crc)
    }

    /// Entry `i`'s column values and per-field sample counts, as its
    /// description holds them (the COLUMNS record holds them again).
    pub fn entry_values(&self, i: usize) -> Result<Vec<u64>> {
        let row = self.contents.rows[i];
        let n = self.contents.column_count();
        let start = usize::try_from(row.offset).map_err(|_| bad("entry offset"))? + RECORD_LEN;
        let len = usize::try_from(row.len.min(8 + 8 * n as u64)).unwrap_or(0);
        let head = self
            .mapping
            .raw()
            .get(start, len)
            .ok_or_else(|| bad("an entry outside the file"))?
            .to_vec()?;
        entry_values(&head, n)
    }

    /// The checksum of the first `count` entries: a CRC32 over their rows.
    pub fn checksum(&self, count: usize) -> u32 {
        let mut hasher = crc32fast::Hasher::new();
        for row in &self.contents.rows[..count.min(self.len())] {
            hasher.update(&row.offset.to_le_bytes());
            hasher.update(&row.len.to_le_bytes());
            hasher.update(&row.crc.to_le_bytes());
        }
        hasher.finalize()
    }

    /// Column `name`'s values (`None`: no such column); the COLUMNS
    /// record is read at the first call.
    pub fn column(&self, name: &str) -> Result<Option<(ColumnType, &[u64])>> {
        let Some(schema) = self.schema() else {
            return Ok(None);
        };
        let Some(i) = schema.columns.iter().position(|(n, _)| n == name) else {
            return Ok(None);
        };
        let kind = schema.columns[i].1;
        Ok(self.columns()?.get(i).map(|c| (kind, self.kept(c))))
    }

    /// The samples of field `field`'s first block, per entry (`None`: no
    /// such field).
    pub fn n_samples(&self, field: usize) -> Result<Option<&[u64]>> {
        let Some(schema) = self.schema() else {
            return Ok(None);
        };
        if field >= schema.fields.len() {
            return Ok(None);
        }
        let i = schema.columns.len() + field;
        Ok(self.columns()?.get(i).map(|c| self.kept(c)))
    }

    /// The values of the entries kept (`keep_first`).
    fn kept<'a>(&self, column: &'a [u64]) -> &'a [u64] {
        &column[..column.len().min(self.contents.rows.len())]
    }

    /// Every column, read from the COLUMNS record at the first call (its
    /// CRC checked then; a bad record a `FormatError` naming the file, at
    /// each call).
    fn columns(&self) -> Result<&Vec<Vec<u64>>> {
        if let Some(columns) = self.columns.get() {
            return Ok(columns);
        }
        let read = self
            .read_columns()
            .map_err(|e| e.context(format!("'{}'", self.path.display())))?;
        // a thread that read them at the same time set them first: its
        // values are the same
        let _ = self.columns.set(read);
        self.columns
            .get()
            .ok_or_else(|| Error::internal("columns read but not kept"))
    }

    fn read_columns(&self) -> Result<Vec<Vec<u64>>> {
        let raw = self.mapping.raw();
        let at = self.contents.columns_at;
        let start = usize::try_from(at).map_err(|_| bad("the COLUMNS record's offset"))?;
        // copied out of the mapping, then parsed (the aliasing rule)
        let mut head = [0u8; RECORD_LEN];
        raw.get(start, RECORD_LEN)
            .ok_or_else(|| bad("a COLUMNS record outside the file"))?
            .copy_to(&mut head)?;
        let record = f::parse_record(&head)
            .filter(|r| r.kind == Kind::Columns)
            .ok_or_else(|| bad("no COLUMNS record where the commit says"))?;
        let len = usize::try_from(record.len).map_err(|_| bad("a COLUMNS record too large"))?;
        // bounded by the mapping before anything is allocated
        let bytes = raw
            .get(start + RECORD_LEN, len)
            .ok_or_else(|| bad("a COLUMNS record outside the file"))?;
        let mut payload = Vec::new();
        payload.try_reserve_exact(len)?;
        payload.resize(len, 0);
        bytes.copy_to(&mut payload)?;
        if crc32fast::hash(&payload) != record.crc {
            return Err(bad("a damaged COLUMNS record (its CRC differs)"));
        }
        parse_columns(
            &payload,
            at,
            self.committed_count,
            self.contents.column_count(),
        )
    }

    /// The map of field `field` (an index in the schema's fields) of entry
    /// `i` (a position), with only the blocks matching `keys` when given.
    pub fn get(&self, i: usize, field: usize, keys: Option<&Labels>) -> Result<TensorMap> {
        self.read_entry(i, field, keys)
            .map_err(|e| e.context(format!("entry {i} of '{}'", self.path.display())))
    }

    fn read_entry(&self, i: usize, field: usize, keys: Option<&Labels>) -> Result<TensorMap> {
        let schema = self
            .schema()
            .ok_or_else(|| bad("entries without a schema"))?;
        if field >= schema.fields.len() {
            return Err(Error::internal("a field out of range"));
        }
        let row = self.contents.rows[i];
        let raw = self.mapping.raw();
        let start = usize::try_from(row.offset).map_err(|_| bad("entry offset"))?;
        // the description is copied out of the mapping, then parsed
        let mut head = [0u8; RECORD_LEN + 8];
        raw.get(start, head.len())
            .ok_or_else(|| bad("an entry outside the file"))?
            .copy_to(&mut head)?;
        let record = f::parse_record(&head).ok_or_else(|| bad("no entry record"))?;
        if record.kind != Kind::Entry || record.len != row.len || record.crc != row.crc {
            return Err(bad("the entry record differs from the index"));
        }
        let mut raw8 = [0u8; 8];
        raw8.copy_from_slice(&head[RECORD_LEN..]);
        let desc_len = u64::from_le_bytes(raw8);
        if desc_len > row.len - 8.min(row.len) {
            return Err(bad("an entry description longer than its record"));
        }
        let desc_len = usize::try_from(desc_len).map_err(|_| bad("description"))?;
        let desc_start = start + RECORD_LEN + 8;
        if row.len >= LARGE_ENTRY {
            // the mapping is advised MADV_RANDOM: a fault reads its one
            // page, and a large entry's description (copied below) and
            // arrays (read by their user) would cost a fault and a 4 KiB
            // read per page; asked for at once instead (64 MiB at most, as
            // iteration's read-ahead), the arrays only when all are read
            let until = if keys.is_none() {
                row.offset + RECORD_LEN as u64 + row.len
            } else {
                (desc_start + desc_len) as u64
            };
            let from = desc_start as u64;
            self.advise(
                from,
                (until - from.min(until)).min(PREFETCH),
                Advice::WillNeed,
            );
        }
        let desc = raw
            .get(desc_start, desc_len)
            .ok_or_else(|| bad("an entry outside the file"))?
            .to_vec()?;
        self.mapping.check_intact()?;
        // the description is checked against its CRC32 (version 3), on the
        // copy that is then decoded: one damaged byte is an error, never
        // another dtype, array or labels
        if f::has_description_crcs(self.contents.version)
            && f::description_crc(desc_len as u64, &desc) != row.desc_crc
        {
            return Err(bad(
                "its description does not match its CRC32: the file is damaged \
                 (blockmap.verify lists every damaged entry)",
            ));
        }
        let entry = EntryView {
            dataset: self,
            // taken once for the entry's labels references
            cache: std::cell::RefCell::new(self.labels.lock().ok()),
            desc: &desc,
            desc_at: desc_start as u64,
            payload: (
                row.offset + RECORD_LEN as u64,
                row.offset + RECORD_LEN as u64 + row.len,
            ),
        };
        let mut c = Cursor::new(&desc, f::ENTRY);
        c.take((schema.columns.len() + schema.fields.len()) * 8)?;
        for _ in 0..field {
            let len = usize::try_from(c.u64()?).map_err(|_| c.bad("field length"))?;
            c.take(len)?;
        }
        let len = usize::try_from(c.u64()?).map_err(|_| c.bad("field length"))?;
        let start = c.position();
        c.take(len)?;
        let mut fc = Cursor::new(&desc[start..start + len], f::ENTRY);
        entry.map(&mut fc, start, keys)
    }

    /// The labels of a LABELS record's encoding at `at`, cached, referred
    /// to by the entry whose record starts at `entry_at`. A LABELS record
    /// lies before every entry that refers to it (the writer puts it
    /// before the first) and outside every entry: a reference into an
    /// entry's bytes (its arrays, which a `mmap="c"` map may write) or
    /// forward is refused, so that the labels cached at an offset are
    /// those of a record no map's data can change.
    fn shared_labels(
        &self,
        at: u64,
        entry_at: u64,
        mut cache: Option<&mut HashMap<u64, Labels>>,
    ) -> Result<Labels> {
        if at >= entry_at {
            return Err(bad(
                "a labels reference at or after the entry that refers to it",
            ));
        }
        if let Some(labels) = cache.as_ref().and_then(|c| c.get(&at)) {
            return Ok(labels.clone());
        }
        let record_start = at
            .checked_sub(RECORD_LEN as u64)
            .and_then(|s| usize::try_from(s).ok())
            .ok_or_else(|| bad("a labels reference"))?;
        let raw = self.mapping.raw();
        let head = raw
            .get(record_start, RECORD_LEN)
            .ok_or_else(|| bad("a labels reference outside the file"))?
            .to_vec()?;
        let record = f::parse_record(&head)
            .filter(|r| r.kind == Kind::Labels)
            .ok_or_else(|| bad("a labels reference to no labels record"))?;
        let len = usize::try_from(record.len).map_err(|_| bad("labels record"))?;
        let record_end = at
            .checked_add(record.len)
            .filter(|&end| end <= entry_at)
            .ok_or_else(|| bad("a labels record that runs into the entry referring to it"))?;
        // the entry rows are ordered and disjoint: the last one starting
        // at or before the record, and the next, must not overlap it
        let rows = &self.contents.rows;
        let next = rows.partition_point(|r| r.offset <= record_start as u64);
        let overlaps = |r: &Row| {
            let end = r.offset + RECORD_LEN as u64 + r.len;
            r.offset < record_end && (record_start as u64) < end
        };
        if next
            .checked_sub(1)
            .and_then(|i| rows.get(i))
            .is_some_and(overlaps)
            || rows.get(next).is_some_and(overlaps)
        {
            return Err(bad("a labels reference into an entry's bytes"));
        }
        let payload = raw
            .get(record_start + RECORD_LEN, len)
            .ok_or_else(|| bad("a labels record outside the file"))?
            .to_vec()?;
        self.mapping.check_intact()?;
        if crc32fast::hash(&payload) != record.crc {
            return Err(bad("a damaged labels record"));
        }
        let mut c = Cursor::new(&payload, f::LABELS);
        let labels = f::decode_labels(&mut c)?;
        if !c.rest().is_empty() {
            return Err(c.bad("bytes after the labels"));
        }
        if let Some(cache) = cache.as_mut() {
            if cache.len() >= LABELS_CACHE {
                cache.clear();
            }
            cache.insert(at, labels.clone());
        }
        Ok(labels)
    }
}

/// One entry's description being decoded.
struct EntryView<'a> {
    dataset: &'a Dataset,
    /// the dataset's labels cache, locked for this entry (`None`: a signal
    /// handler's read while this thread holds it, decoded uncached)
    cache: std::cell::RefCell<Option<crate::arc::ForkGuard<'a, HashMap<u64, Labels>>>>,
    desc: &'a [u8],
    /// the file offset of `desc[0]`
    desc_at: u64,
    /// the file range of the entry's payload
    payload: (u64, u64),
}

impl EntryView<'_> {
    fn labels(&self, c: &mut Cursor<'_>) -> Result<Labels> {
        let at = c.u64()?;
        let desc_end = self.desc_at + self.desc.len() as u64;
        if at >= self.desc_at && at < desc_end {
            let start = usize::try_from(at - self.desc_at).map_err(|_| c.bad("labels"))?;
            return f::decode_labels(&mut Cursor::new(&self.desc[start..], f::ENTRY));
        }
        if at >= self.payload.0 && at < self.payload.1 {
            return Err(c.bad("labels among the entry's arrays"));
        }
        let mut cache = self.cache.borrow_mut();
        let entry_at = self.payload.0 - RECORD_LEN as u64;
        self.dataset
            .shared_labels(at, entry_at, cache.as_deref_mut())
    }

    fn map(&self, c: &mut Cursor<'_>, _base: usize, keys: Option<&Labels>) -> Result<TensorMap> {
        let all_keys = self.labels(c)?;
        let n_info = c.count(8)?;
        let mut info = std::collections::BTreeMap::new();
        for _ in 0..n_info {
            let key = c.str()?;
            let value = c.str()?;
            info.insert(key, value);
        }
        let n_blocks = c.count(8)?;
        if n_blocks != all_keys.count() {
            return Err(c.bad("a block count that differs from the keys'"));
        }
        let (keys, positions) = match keys {
            None => (all_keys.clone(), None),
            Some(selection) => {
                let positions = all_keys
                    .select(selection)
                    .map_err(|e| e.context("selecting keys"))?;
                let mut rows = Vec::with_capacity(positions.len() * all_keys.size());
                for &i in &positions {
                    rows.extend_from_slice(all_keys.row(i));
                }
                (
                    Labels::new(all_keys.names().to_vec(), &rows)?,
                    Some(positions),
                )
            }
        };
        if positions.is_none() {
            let mut blocks = Vec::with_capacity(n_blocks);
            for i in 0..n_blocks {
                let block = self
                    .block(c, true, 0)
                    .map_err(|e| e.context(format!("block {i}")))?;
                blocks.extend(block);
            }
            return finish(keys, blocks, info);
        }
        // which blocks are selected, by position (a lookup per block, not
        // a scan of the selection: O(blocks), not O(blocks x selected))
        let mut wanted = vec![positions.is_none(); n_blocks];
        for &i in positions.iter().flatten() {
            if let Some(w) = wanted.get_mut(i) {
                *w = true;
            }
        }
        let mut kept: Vec<Option<TensorBlock>> = Vec::with_capacity(n_blocks);
        for (i, &keep) in wanted.iter().enumerate() {
            let block = self
                .block(c, keep, 0)
                .map_err(|e| e.context(format!("block {i}")))?;
            kept.push(block);
        }
        // in the selection's order (metatensor's, when it names every key
        // dimension), else in key order
        let blocks: Vec<TensorBlock> = match &positions {
            None => kept.into_iter().flatten().collect(),
            Some(positions) => positions
                .iter()
                .filter_map(|&i| kept.get_mut(i).and_then(Option::take))
                .collect(),
        };
        // what follows the fixed part is the inline labels it referenced
        finish(keys, blocks, info)
    }

    fn block(&self, c: &mut Cursor<'_>, keep: bool, depth: usize) -> Result<Option<TensorBlock>> {
        // the limit every reader checks before recursing (limits.rs)
        if depth > crate::limits::MAX_GRADIENT_DEPTH {
            return Err(c.bad("gradients nested too deep"));
        }
        let (dtype, order) = f::parse_dtype_byte(c.u8()?).ok_or_else(|| c.bad("dtype"))?;
        let ndim = usize::from(c.u8()?);
        if c.u16()? != 0 {
            return Err(c.bad("a block's reserved bytes are not zero"));
        }
        if !(2..=crate::limits::MAX_NDIM).contains(&ndim) {
            return Err(c.bad("an array's dimensions"));
        }
        let mut shape = Vec::with_capacity(ndim);
        for _ in 0..ndim {
            shape.push(usize::try_from(c.u64()?).map_err(|_| c.bad("shape"))?);
        }
        let data_at = c.u64()?;
        let samples = if keep {
            Some(self.labels(c)?)
        } else {
            c.u64().map(|_| None)?
        };
        let mut components = Vec::with_capacity(ndim - 2);
        for _ in 2..ndim {
            if keep {
                components.push(self.labels(c)?);
            } else {
                c.u64()?;
            }
        }
        let properties = if keep {
            Some(self.labels(c)?)
        } else {
            c.u64().map(|_| None)?
        };
        let n_gradients = c.count(8)?;
        let mut gradients = Vec::new();
        for _ in 0..n_gradients {
            let parameter = c.str()?;
            let gradient = self
                .block(c, keep, depth + 1)
                .map_err(|e| e.context(format!("gradient '{parameter}'")))?;
            if let Some(gradient) = gradient {
                gradients.push((parameter, gradient));
            }
        }
        let (Some(samples), Some(properties)) = (samples, properties) else {
            return Ok(None);
        };
        let len = crate::array::byte_len(dtype, &shape).map_err(as_format)?;
        let end = data_at
            .checked_add(len as u64)
            .ok_or_else(|| c.bad("data range"))?;
        let desc_end = self.desc_at + self.desc.len() as u64;
        if data_at < desc_end || end > self.payload.1 {
            return Err(c.bad("array data outside the entry's arrays"));
        }
        let data_at = usize::try_from(data_at).map_err(|_| c.bad("data range"))?;
        let buffer = self.dataset.mapping.slice(data_at, len)?;
        let values = Array::view_or_convert(dtype, shape, Layout::c_order(order), buffer)?;
        let mut block =
            TensorBlock::new(values, samples, components, properties).map_err(as_format)?;
        for (parameter, gradient) in gradients {
            block
                .add_gradient(&parameter, gradient)
                .map_err(as_format)?;
        }
        Ok(Some(block))
    }
}

/// The map of `keys`, `blocks` and `info` read from a file.
fn finish(
    keys: Labels,
    blocks: Vec<TensorBlock>,
    info: std::collections::BTreeMap<String, String>,
) -> Result<TensorMap> {
    let mut map = TensorMap::new(keys, blocks).map_err(as_format)?;
    if !info.is_empty() {
        map.replace_info(info).map_err(as_format)?;
    }
    Ok(map)
}

fn as_format(error: Error) -> Error {
    match error {
        Error::Invalid(message) => Error::format(format!("dataset file: {message}")),
        other => other,
    }
}

/// One entry to write: its fields' maps and its column values.
#[derive(Debug)]
pub struct Entry<'a> {
    pub fields: Vec<(&'a str, &'a TensorMap)>,
    pub columns: Vec<(&'a str, Value)>,
    pub single: bool,
}

impl<'a> Entry<'a> {
    /// This entry with its fields and columns in `schema`'s order, and
    /// its int values of float columns as floats (`float(n)`'s rounding),
    /// when it holds the same fields and columns in another order or with
    /// such values; `None` otherwise (the entry as it is, or one that does
    /// not match, which `write_entry` refuses naming the difference).
    fn conform(&self, schema: &Schema) -> Option<Entry<'a>> {
        if self.single != schema.single
            || self.fields.len() != schema.fields.len()
            || self.columns.len() != schema.columns.len()
        {
            return None;
        }
        let fields = schema
            .fields
            .iter()
            .map(|name| self.fields.iter().find(|(n, _)| n == name).copied())
            .collect::<Option<Vec<_>>>()?;
        let columns = schema
            .columns
            .iter()
            .map(|(name, kind)| {
                let (n, value) = *self.columns.iter().find(|(n, _)| n == name)?;
                match (kind, value) {
                    #[allow(clippy::cast_precision_loss)] // Python's float(n)
                    (ColumnType::Float, Value::Int(v)) => Some((n, Value::Float(v as f64))),
                    _ => Some((n, value)),
                }
            })
            .collect::<Option<Vec<_>>>()?;
        let same = fields.iter().zip(&self.fields).all(|(a, b)| a.0 == b.0)
            && columns.iter().zip(&self.columns).all(|(a, b)| a == b);
        (!same).then_some(Entry {
            fields,
            columns,
            single: self.single,
        })
    }

    fn schema(&self) -> Schema {
        Schema {
            single: self.single,
            fields: self.fields.iter().map(|(n, _)| (*n).to_string()).collect(),
            columns: self
                .columns
                .iter()
                .map(|(n, v)| ((*n).to_string(), v.column_type()))
                .collect(),
        }
    }
}

/// Arrays an entry record holds after its description: (file offset,
/// array).
type Placed<'a> = Vec<(u64, &'a Array)>;

/// The writer's part of the format: labels already stored, the scratch
/// memory, and the encoding of entries.
#[derive(Debug, Default)]
pub struct Encoder {
    /// labels encodings stored in LABELS records by this session, to the
    /// offset of their encoding
    seen: HashMap<Vec<u8>, u64>,
    encoding: Vec<u8>,
}

impl Encoder {
    /// The reference to `labels`: a new LABELS record appended to
    /// `records` (at file offset `records_at`) when `share` and never seen,
    /// inline in `desc` (at file offset `desc_at`) otherwise.
    #[allow(clippy::too_many_arguments)]
    fn labels_ref(
        &mut self,
        labels: &Labels,
        share: bool,
        records: &mut Vec<u8>,
        records_at: u64,
        desc: &mut Vec<u8>,
        desc_at: u64,
        out: &mut Vec<u8>,
    ) {
        self.encoding.clear();
        f::encode_labels(labels, &mut self.encoding);
        if let Some(&at) = self.seen.get(&self.encoding) {
            f::put_u64(out, at);
            return;
        }
        if share {
            let header_at = records_at + records.len() as u64;
            records.extend_from_slice(&f::record_header(
                Kind::Labels,
                crc32fast::hash(&self.encoding),
                self.encoding.len() as u64,
            ));
            records.extend_from_slice(&self.encoding);
            let pad = f::pad_len(records_at + records.len() as u64);
            records.resize(records.len() + pad, 0);
            let at = header_at + RECORD_LEN as u64;
            self.seen.insert(self.encoding.clone(), at);
            f::put_u64(out, at);
        } else {
            f::put_u64(out, desc_at + desc.len() as u64);
            desc.extend_from_slice(&self.encoding);
        }
    }
}

/// A writer adding entries to a dataset file of version 2 or 3.
///
/// One writer at a time per file, across processes (`lock.rs`). A new
/// dataset ([`Writer::create`]) is of version 3, built in a temporary
/// file beside its path and put in place at its first commit; an append
/// writes in its file's version (a file of version 2 stays one, readable
/// by the blockmap that wrote it).
#[derive(Debug)]
pub struct Writer {
    path: PathBuf,
    file: Option<File>,
    pending: Option<io::replace::Temporary>,
    replaced: Option<File>,
    target: PathBuf,
    timeout: Timeout,
    pid: u32,
    id: String,
    /// the file's format version (3 for a new dataset)
    version: u32,
    schema: Option<Schema>,
    schema_at: u64,
    rows: Vec<Row>,
    columns: Vec<Vec<u64>>,
    /// where the next record goes (a multiple of 64)
    end: u64,
    /// the file's length once its last complete write (or commit) is in:
    /// what a failed write cuts the file back to
    written: u64,
    /// a failed write left bytes after `written` that could not be cut
    /// off yet: cut before anything else is written
    tail_left: bool,
    encoder: Encoder,
}

fn new_id() -> String {
    super::new_id()
}

impl Writer {
    pub fn create(path: &Path, timeout: Timeout) -> Result<Writer> {
        let target = io::replace::resolve(path)?;
        let replaced = lock::open_locked(&target, false, timeout)?;
        Writer::new_empty(path, target, replaced, timeout)
    }

    fn new_empty(
        path: &Path,
        target: PathBuf,
        replaced: Option<File>,
        timeout: Timeout,
    ) -> Result<Writer> {
        let mut temporary = io::replace::Temporary::beside(&target)?;
        let id = new_id();
        let file = temporary.file()?;
        file.write_all_at(&f::file_header(&id, f::VERSION), 0)
            .map_err(io_error(path, "cannot write"))?;
        lock::lock(file, path, Some(std::time::Duration::ZERO))?;
        let mut writer = Writer {
            path: path.to_path_buf(),
            file: None,
            pending: Some(temporary),
            replaced,
            target,
            timeout,
            pid: std::process::id(),
            id,
            version: f::VERSION,
            schema: None,
            schema_at: 0,
            rows: Vec::new(),
            columns: Vec::new(),
            end: f::HEADER_LEN as u64,
            written: f::HEADER_LEN as u64,
            tail_left: false,
            encoder: Encoder::default(),
        };
        writer.write_commit()?;
        Ok(writer)
    }

    /// Append to the version-2 dataset at `path` (created when missing).
    pub fn append(path: &Path, timeout: Timeout) -> Result<Writer> {
        let target = io::replace::resolve(path)?;
        let file = loop {
            if let Some(file) = lock::open_locked(&target, true, timeout)? {
                break file;
            }
            let mut writer = Writer::new_empty(path, target.clone(), None, timeout)?;
            let Some(temporary) = writer.pending.take() else {
                return Err(Error::internal("a new dataset without its file"));
            };
            if let Some(file) = temporary.place_new(&target, true)? {
                writer.file = Some(file);
                return Ok(writer);
            }
        };
        let file_len = file
            .metadata()
            .map_err(io_error(path, "cannot read"))?
            .len();
        let in_file = |e: Error| e.context(format!("'{}'", path.display()));
        let head = read_at(&file, 0, 8)?;
        if head.len() >= 4 && head[..4] == *b"PK\x03\x04" {
            return Err(Error::invalid(format!(
                "'{}' is a dataset of format version 1, which this blockmap reads but does \
                 not append to: convert it first with blockmap.Dataset.upgrade(src, dst)",
                path.display()
            )));
        }
        let contents = Contents::read(&file, file_len).map_err(in_file)?;
        if !contents.committed {
            file.set_len(contents.end)
                .map_err(io_error(path, "cannot write"))?;
        }
        let mut contents = contents;
        let columns = contents.take_columns(&file, file_len).map_err(in_file)?;
        Ok(Writer {
            path: path.to_path_buf(),
            file: Some(file),
            pending: None,
            replaced: None,
            target,
            timeout,
            pid: std::process::id(),
            id: contents.id,
            version: contents.version,
            schema: contents.schema,
            schema_at: contents.schema_at,
            rows: contents.rows,
            columns,
            end: align_up(contents.end),
            written: contents.end,
            tail_left: false,
            encoder: Encoder::default(),
        })
    }

    fn file(&self) -> Result<&File> {
        if self.pid != std::process::id() {
            return Err(Error::invalid(
                "this DatasetWriter was opened by another process (this one is a fork of it): \
                 only that process writes through it",
            ));
        }
        match (&self.file, &self.pending) {
            (Some(file), _) => Ok(file),
            (None, Some(temporary)) => temporary.file_ref(),
            (None, None) => Err(Error::invalid("the dataset writer is closed")),
        }
    }

    pub fn is_in_place(&self) -> bool {
        self.file.is_some()
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The format version it writes (its file's).
    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn schema(&self) -> Option<&Schema> {
        self.schema.as_ref()
    }

    /// Cut the file back to what its complete writes hold: the bytes a
    /// failed write left after them (part of an entry's data, which may
    /// hold anything) must never be followed by a later write, where a
    /// walk of the records (recovery) would meet them between two records,
    /// nor end the file, where they could pass for a trailer.
    fn cut_tail(&mut self) -> Result<()> {
        let written = self.written;
        self.file()?
            .set_len(written)
            .map_err(io_error(&self.path, "cannot write"))?;
        self.tail_left = false;
        Ok(())
    }

    /// Add one map at the end (a dataset of single maps).
    pub fn write(&mut self, map: &TensorMap) -> Result<()> {
        self.write_entry(&Entry {
            fields: vec![(f::SINGLE_FIELD, map)],
            columns: Vec::new(),
            single: true,
        })
    }

    /// Add an entry at the end. When this returns, the entry is in the
    /// file: a process killed from then on leaves a file that opens with
    /// it.
    pub fn write_entry(&mut self, entry: &Entry<'_>) -> Result<()> {
        let conformed = self.schema.as_ref().and_then(|s| entry.conform(s));
        let entry = conformed.as_ref().unwrap_or(entry);
        for (name, map) in &entry.fields {
            io::portable::check(DataRef::Tensor(map))
                .map_err(|e| e.context(format!("field '{name}'")))?;
        }
        let schema = entry.schema();
        for (i, field) in schema.fields.iter().enumerate() {
            if field.is_empty() || schema.fields[..i].contains(field) {
                return Err(Error::invalid(format!(
                    "field names must be unique and non-empty, got {field:?}"
                )));
            }
        }
        for (i, (column, _)) in schema.columns.iter().enumerate() {
            if column.is_empty()
                || column == "n_samples"
                || schema.columns[..i].iter().any(|(c, _)| c == column)
            {
                return Err(Error::invalid(format!(
                    "column names must be unique and non-empty, got {column:?}"
                )));
            }
        }
        if entry.fields.is_empty() {
            return Err(Error::invalid("an entry needs at least one field"));
        }
        if self.tail_left {
            self.cut_tail()?;
        }
        let mut records = Vec::new();
        let at = self.end;
        if let Some(existing) = &self.schema {
            if let Some(difference) = existing.difference(&schema) {
                return Err(Error::invalid(format!(
                    "this entry does not match '{}': {difference}",
                    self.path.display()
                )));
            }
        } else {
            let encoded = schema.encode();
            records.extend_from_slice(&f::record_header(
                Kind::Schema,
                crc32fast::hash(&encoded),
                encoded.len() as u64,
            ));
            records.extend_from_slice(&encoded);
            let pad = f::pad_len(at + records.len() as u64);
            records.resize(records.len() + pad, 0);
        }
        let schema_at = if self.schema.is_none() {
            at
        } else {
            self.schema_at
        };
        let mut encoder = std::mem::take(&mut self.encoder);
        let result = self.encode_and_write(entry, &mut encoder, records, at);
        self.encoder = encoder;
        let (entry_at, row_len, crc, desc_crc, end) = match result {
            Ok(done) => done,
            Err(e) => {
                // labels records it may have written are not referenced
                self.encoder.seen.retain(|_, &mut offset| offset < at);
                // nor are any of its bytes: cut off now (else before the
                // next write or commit)
                self.tail_left = true;
                let _ = self.cut_tail();
                return Err(e);
            }
        };
        if self.schema.is_none() {
            self.columns = vec![Vec::new(); schema.columns.len() + schema.fields.len()];
            self.schema = Some(schema);
            self.schema_at = schema_at;
        }
        self.rows.try_reserve(1)?;
        self.rows.push(Row {
            offset: entry_at,
            len: row_len,
            crc,
            desc_crc,
        });
        for (column, (_, value)) in self.columns.iter_mut().zip(&entry.columns) {
            column.push(value.to_bits());
        }
        let n = entry.columns.len();
        for (column, (_, map)) in self.columns[n..].iter_mut().zip(&entry.fields) {
            column.push(first_samples(map));
        }
        self.end = end;
        self.written = end;
        Ok(())
    }

    /// Encode `entry` after `records` (the schema, when new) at `at`, and
    /// write it: `(entry record offset, payload length, CRC, description
    /// CRC, end)`.
    #[allow(clippy::too_many_lines)] // one layout, in order
    fn encode_and_write(
        &self,
        entry: &Entry<'_>,
        encoder: &mut Encoder,
        mut records: Vec<u8>,
        at: u64,
    ) -> Result<(u64, u64, u32, u32, u64)> {
        // first pass: the description, with labels records gathered in
        // `records`; the description's own position is only known once
        // those are, so inline labels are placed relative to a base
        // patched afterwards: encode twice (the second with final offsets)
        for (_, map) in &entry.fields {
            collect_shared(map, encoder, &mut records, at);
        }
        let entry_at = at + records.len() as u64;
        let desc_at = entry_at + RECORD_LEN as u64 + 8;
        let mut desc = Vec::new();
        for (_, value) in &entry.columns {
            f::put_u64(&mut desc, value.to_bits());
        }
        for (_, map) in &entry.fields {
            f::put_u64(&mut desc, first_samples(map));
        }
        // field descriptions are laid out one after the other, each with
        // its inline labels after its fixed part; the arrays follow
        let mut placed: Placed<'_> = Vec::new();
        let mut arrays: Vec<&Array> = Vec::new();
        for (_, map) in &entry.fields {
            collect_arrays(map, &mut arrays);
        }
        // description length is needed to place the arrays: encode with
        // placeholder data offsets first, then again with the real ones
        let mut total_desc;
        let mut data_offsets: Vec<u64> = vec![0; arrays.len()];
        loop {
            desc.truncate((entry.columns.len() + entry.fields.len()) * 8);
            let mut k = 0;
            for (_, map) in &entry.fields {
                let len_at = desc.len();
                f::put_u64(&mut desc, 0);
                let field_start = desc.len();
                let mut field = Vec::new();
                encode_map(
                    map,
                    encoder,
                    desc_at + field_start as u64,
                    &mut field,
                    &data_offsets,
                    &mut k,
                );
                desc.extend_from_slice(&field);
                let len = (desc.len() - field_start) as u64;
                desc[len_at..len_at + 8].copy_from_slice(&len.to_le_bytes());
            }
            total_desc = desc.len();
            let mut next = align_up(desc_at + total_desc as u64);
            let mut offsets = Vec::with_capacity(arrays.len());
            for array in &arrays {
                offsets.push(next);
                next = align_up(next + array.buffer().len() as u64);
            }
            if offsets == data_offsets {
                break;
            }
            data_offsets = offsets;
        }
        for (offset, array) in data_offsets.iter().zip(&arrays) {
            placed.push((*offset, array));
        }
        let data_start = align_up(desc_at + total_desc as u64);
        let payload_end = placed.last().map_or(desc_at + total_desc as u64, |(o, a)| {
            o + a.buffer().len() as u64
        });
        let payload_len = payload_end - (entry_at + RECORD_LEN as u64);
        let mut head = Vec::with_capacity(8 + desc.len());
        f::put_u64(&mut head, total_desc as u64);
        head.extend_from_slice(&desc);
        let desc_crc = f::description_crc(total_desc as u64, &desc);
        head.resize(
            usize::try_from(data_start - (entry_at + RECORD_LEN as u64))
                .map_err(|_| Error::internal("entry"))?,
            0,
        );
        let file = self.file()?;
        let werr = io_error(&self.path, "cannot write");
        let end = align_up(payload_end);
        let total = usize::try_from(end - at).unwrap_or(usize::MAX);
        if total <= IN_MEMORY {
            let mut out = records;
            out.try_reserve_exact(total - out.len())?;
            let header_at = out.len();
            out.extend_from_slice(&[0; RECORD_LEN]);
            out.extend_from_slice(&head);
            for (offset, array) in &placed {
                let pos = usize::try_from(offset - at).map_err(|_| Error::internal("entry"))?;
                out.resize(pos, 0);
                array
                    .buffer()
                    .raw()
                    .extend_vec(&mut out, array.buffer().len());
            }
            let crc = crc32fast::hash(&out[header_at + RECORD_LEN..]);
            out[header_at..header_at + RECORD_LEN].copy_from_slice(&f::record_header(
                Kind::Entry,
                crc,
                payload_len,
            ));
            out.resize(
                usize::try_from(end - at).map_err(|_| Error::internal("entry"))?,
                0,
            );
            file.write_all_at(&out, at).map_err(werr)?;
            Ok((entry_at, payload_len, crc, desc_crc, end))
        } else {
            // streamed: the header says "no entry" (length 0) until its
            // length and CRC are patched in last
            let mut out = records;
            out.extend_from_slice(&f::record_header(Kind::Entry, 0, 0));
            out.extend_from_slice(&head);
            let mut hasher = crc32fast::Hasher::new();
            hasher.update(&head);
            file.write_all_at(&out, at)
                .map_err(io_error(&self.path, "cannot write"))?;
            let mut position = data_start;
            let zeros = [0u8; 64];
            for (offset, array) in &placed {
                let gap = usize::try_from(offset - position).unwrap_or(0);
                if gap > 0 {
                    hasher.update(&zeros[..gap]);
                    file.write_all_at(&zeros[..gap], position)
                        .map_err(io_error(&self.path, "cannot write"))?;
                }
                let mut at_data = *offset;
                array.buffer().raw().for_each_chunk(|chunk| {
                    hasher.update(chunk);
                    file.write_all_at(chunk, at_data)
                        .map_err(io_error(&self.path, "cannot write"))?;
                    at_data += chunk.len() as u64;
                    crate::interrupt::check()
                })?;
                position = at_data;
            }
            let pad = usize::try_from(end - position).unwrap_or(0);
            file.write_all_at(&zeros[..pad], position)
                .map_err(io_error(&self.path, "cannot write"))?;
            let crc = hasher.finalize();
            file.write_all_at(&f::record_header(Kind::Entry, crc, payload_len), entry_at)
                .map_err(io_error(&self.path, "cannot write"))?;
            Ok((entry_at, payload_len, crc, desc_crc, end))
        }
    }

    /// Write the commit record and its trailer after the entries and sync
    /// the file; a new dataset is put in place at its first commit.
    pub fn commit(&mut self) -> Result<()> {
        self.write_commit()?;
        if self.pending.is_some() {
            self.publish()?;
        }
        Ok(())
    }

    fn publish(&mut self) -> Result<()> {
        let still_there = match (&self.replaced, std::fs::metadata(&self.target)) {
            (Some(replaced), Ok(there)) => {
                use std::os::unix::fs::MetadataExt;
                let ours = replaced
                    .metadata()
                    .map_err(io_error(&self.path, "cannot read"))?;
                ours.dev() == there.dev() && ours.ino() == there.ino()
            }
            (None, Err(e)) if e.kind() == std::io::ErrorKind::NotFound => true,
            _ => false,
        };
        if !still_there {
            self.replaced = lock::open_locked(&self.target, false, self.timeout)?;
        }
        let Some(temporary) = self.pending.take() else {
            return Ok(());
        };
        self.file = Some(temporary.replace_keeping(&self.target, true)?);
        if let Some(replaced) = self.replaced.take() {
            lock::unlock(&replaced);
        }
        Ok(())
    }

    /// Give up a new dataset not yet in place (its path keeps what it
    /// held); one in place is committed and closed instead.
    pub fn abort(&mut self) -> Result<()> {
        if self.pending.is_some() && self.pid == std::process::id() {
            self.pending = None;
            if let Some(replaced) = self.replaced.take() {
                lock::unlock(&replaced);
            }
            return Ok(());
        }
        self.close()
    }

    fn write_commit(&mut self) -> Result<()> {
        if self.tail_left {
            self.cut_tail()?;
        }
        let file = self.file()?;
        let count = self.rows.len();
        let mut out = Vec::new();
        out.try_reserve(
            count * (ROW_LEN + 8 * self.columns.len())
                + 64 * (self.columns.len() + 2)
                + 2 * RECORD_LEN
                + 24
                + TRAILER_LEN,
        )?;
        // the COLUMNS record (entries only): read when a column is asked
        // for, so that an open reads the rows alone
        let columns_at = if count == 0 { 0 } else { self.end };
        if count > 0 {
            let mut payload = Vec::new();
            payload.try_reserve(8 * count * self.columns.len() + 64 * (self.columns.len() + 1))?;
            f::put_u32(&mut payload, f::u32_len(self.columns.len()));
            let base = columns_at + RECORD_LEN as u64;
            for column in &self.columns {
                let here = base + payload.len() as u64;
                payload.resize(payload.len() + f::pad_len(here), 0);
                for value in column {
                    f::put_u64(&mut payload, *value);
                }
            }
            out.extend_from_slice(&f::record_header(
                Kind::Columns,
                crc32fast::hash(&payload),
                payload.len() as u64,
            ));
            out.extend_from_slice(&payload);
            out.resize(out.len() + f::pad_len(columns_at + out.len() as u64), 0);
        }
        let start = self.end;
        let at = start + out.len() as u64;
        let mut payload = Vec::new();
        payload.try_reserve(count * ROW_LEN + 24)?;
        f::put_u64(&mut payload, count as u64);
        f::put_u64(&mut payload, self.schema_at);
        f::put_u64(&mut payload, columns_at);
        for row in &self.rows {
            row.encode(self.version, &mut payload);
        }
        out.extend_from_slice(&f::record_header(
            Kind::Commit,
            crc32fast::hash(&payload),
            payload.len() as u64,
        ));
        out.extend_from_slice(&payload);
        out.extend_from_slice(&f::trailer(at, count as u64));
        let trailer_end = start + out.len() as u64;
        // what a failed write left after `written` was cut off before
        // (`cut_tail`): the file ends with this trailer
        let done = file
            .write_all_at(&out, start)
            .and_then(|()| file.sync_data())
            .map_err(io_error(&self.path, "cannot write"));
        if let Err(e) = done {
            // its COLUMNS record holds values users gave: cut off too
            self.tail_left = true;
            let _ = self.cut_tail();
            return Err(e);
        }
        self.end = align_up(trailer_end);
        self.written = trailer_end;
        Ok(())
    }

    pub fn close(&mut self) -> Result<()> {
        if self.file.is_some() || self.pending.is_some() {
            self.commit()?;
            if let Some(file) = self.file.take() {
                lock::unlock(&file);
            }
        }
        Ok(())
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            if let Some(temporary) = self.pending.take() {
                std::mem::forget(temporary);
            }
            return;
        }
        self.pending = None;
        for file in [self.file.take(), self.replaced.take()]
            .into_iter()
            .flatten()
        {
            lock::unlock(&file);
        }
    }
}

/// The sample count of a map's first block (0 without blocks).
fn first_samples(map: &TensorMap) -> u64 {
    map.blocks()
        .first()
        .map_or(0, |b| b.samples().count() as u64)
}

fn collect_arrays<'a>(map: &'a TensorMap, out: &mut Vec<&'a Array>) {
    fn block<'a>(b: &'a TensorBlock, out: &mut Vec<&'a Array>) {
        out.push(b.values());
        for gradient in b.gradients().values() {
            block(gradient, out);
        }
    }
    for b in map.blocks() {
        block(b, out);
    }
}

/// The labels of `map` that go to LABELS records (keys, components,
/// properties), stored the first time the session sees them.
fn collect_shared(map: &TensorMap, encoder: &mut Encoder, records: &mut Vec<u8>, at: u64) {
    fn walk(
        b: &TensorBlock,
        encoder: &mut Encoder,
        records: &mut Vec<u8>,
        share: &mut dyn FnMut(&Labels, &mut Encoder, &mut Vec<u8>),
    ) {
        for c in b.components() {
            share(c, encoder, records);
        }
        share(b.properties(), encoder, records);
        for g in b.gradients().values() {
            walk(g, encoder, records, share);
        }
    }
    let mut sink = Vec::new();
    let mut dummy = Vec::new();
    let mut share = |labels: &Labels, encoder: &mut Encoder, records: &mut Vec<u8>| {
        sink.clear();
        encoder.labels_ref(labels, true, records, at, &mut dummy, 0, &mut sink);
    };
    share(map.keys(), encoder, records);
    for b in map.blocks() {
        walk(b, encoder, records, &mut share);
    }
}

/// A map's description at file offset `at` into `out`; array data offsets
/// taken in order from `offsets` (`k` the next).
fn encode_map(
    map: &TensorMap,
    encoder: &mut Encoder,
    at: u64,
    out: &mut Vec<u8>,
    offsets: &[u64],
    k: &mut usize,
) {
    fn block(
        b: &TensorBlock,
        fixed: &mut Vec<u8>,
        offsets: &[u64],
        k: &mut usize,
        put_ref: &mut dyn FnMut(&Labels, &mut Vec<u8>),
    ) {
        let values = b.values();
        fixed.push(f::dtype_byte(values.dtype()));
        fixed.push(u8::try_from(values.shape().len()).unwrap_or(u8::MAX));
        fixed.extend_from_slice(&[0, 0]);
        for &n in values.shape() {
            f::put_u64(fixed, n as u64);
        }
        f::put_u64(fixed, offsets.get(*k).copied().unwrap_or(0));
        *k += 1;
        put_ref(b.samples(), fixed);
        for c in b.components() {
            put_ref(c, fixed);
        }
        put_ref(b.properties(), fixed);
        f::put_u32(fixed, f::u32_len(b.gradients().len()));
        for (parameter, g) in b.gradients() {
            f::put_str(fixed, parameter);
            block(g, fixed, offsets, k, put_ref);
        }
    }
    // inline labels go after the map's fixed part, in a second buffer
    let mut fixed = Vec::new();
    let mut inline = Vec::new();
    let mut refs: Vec<(usize, Labels)> = Vec::new();
    let mut put_ref = |labels: &Labels, fixed: &mut Vec<u8>| {
        refs.push((fixed.len(), labels.clone()));
        f::put_u64(fixed, 0);
    };
    put_ref(map.keys(), &mut fixed);
    f::put_u32(&mut fixed, f::u32_len(map.info().len()));
    for (key, value) in map.info() {
        f::put_str(&mut fixed, key);
        f::put_str(&mut fixed, value);
    }
    f::put_u32(&mut fixed, f::u32_len(map.blocks().len()));
    for b in map.blocks() {
        block(b, &mut fixed, offsets, k, &mut put_ref);
    }
    // the references resolved: shared ones to their records, the others
    // inline after the fixed part
    let inline_at = at + fixed.len() as u64;
    let mut records = Vec::new();
    let mut value = Vec::with_capacity(8);
    for (pos, labels) in refs {
        value.clear();
        encoder.labels_ref(
            &labels,
            false,
            &mut records,
            0,
            &mut inline,
            inline_at,
            &mut value,
        );
        fixed[pos..pos + 8].copy_from_slice(&value);
    }
    out.extend_from_slice(&fixed);
    out.extend_from_slice(&inline);
}
