//! Opening a file of format version 2 or 3: its last commit, taken only
//! where the file's trailer closes it and it follows the last entry it
//! lists; otherwise the records are walked (`recover.rs`). An open reads
//! the trailer and the COMMIT record (the rows); the COLUMNS record is
//! read when a column is first asked for.
//!
//! Entries hold data users write, which may hold anything, the bytes of
//! this format's records included: nothing is recognised by its content
//! alone. The trailer at the end of the file is taken for the last commit
//! only where it closes the COMMIT record it names, and where nothing but
//! records of commits lies between the last entry that record lists and
//! it ([`last_commit`]).

use std::fs::File;

use super::codec::{parse_commit_pieces, parse_rows, parse_segment_rows, Schema, COMMIT, SEGMENT};
use super::contents::{payload_at, record_at, Contents};
use super::layout::{
    align_up, has_segments, parse_file_header, parse_trailer, Piece, RecordKind, Row, ALIGN,
    HEADER_LEN, RECORD_LEN, ROW_LEN, TRAILER_LEN,
};
use super::recover::recover;
use crate::dataset::read_at;
use crate::error::{Error, Result};
use crate::io::bytes::Cursor;

/// A commit record's payload, decoded.
pub(in crate::dataset) struct Commit {
    pub schema_at: u64,
    pub schema: Option<Schema>,
    pub rows: Vec<Row>,
    /// versions 2 and 3: where the COLUMNS record lies (0: no entry)
    pub columns_at: u64,
    /// version 4: the SEGMENT records listing the entries
    pub pieces: Vec<Piece>,
}

/// Open a version-2 or 3 file of `file_len` bytes: from its last
/// commit when the file ends with it, by walking its records otherwise.
pub(super) fn open(file: &File, file_len: u64) -> Result<Contents> {
    let header = read_at(file, 0, HEADER_LEN)?;
    let (id, version) = parse_file_header(&header)?;
    match last_commit(file, file_len, &id, version) {
        Ok(Some((contents, true))) => Ok(contents),
        // a commit record the trailer closes, but something between its
        // last entry and it is not a commit's: a copy of a commit
        // record and its trailer inside an entry's data (the walk then
        // finds as many entries as it lists, or more: the entry holding
        // the copy at least), or damage there (the walk stops at it,
        // before the last entry the record lists: the record is kept,
        // and the damaged entry fails its reads alone)
        Ok(Some((contents, false))) => match recover(file, file_len, id, version) {
            Ok(walked) if walked.rows.len() >= contents.rows.len() => Ok(walked),
            Ok(_) | Err(Error::Format(_)) => Ok(contents),
            Err(other) => Err(other),
        },
        // no commit at the end (a writer interrupted), or a trailer
        // that does not close one (damaged, or bytes of an entry's data
        // that look like one): the walk decides
        Ok(None) | Err(Error::Format(_)) => recover(file, file_len, id, version),
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
fn last_commit(
    file: &File,
    file_len: u64,
    id: &str,
    version: u32,
) -> Result<Option<(Contents, bool)>> {
    let Some(trailer_at) = file_len
        .checked_sub(TRAILER_LEN as u64)
        .filter(|&t| t >= HEADER_LEN as u64)
    else {
        return Ok(None);
    };
    let tail = read_at(file, trailer_at, TRAILER_LEN)?;
    let Some((at, count)) = parse_trailer(&tail) else {
        return Ok(None);
    };
    if at % ALIGN != 0 || at < HEADER_LEN as u64 || at >= trailer_at {
        return Ok(None);
    }
    let Some(record) = record_at(file, at, file_len)? else {
        return Ok(None);
    };
    if record.kind != RecordKind::Commit || at + RECORD_LEN as u64 + record.len != trailer_at {
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
    let columns = commit.rows.is_empty().then(|| vec![Vec::new(); n]);
    let contents = Contents {
        id: id.to_string(),
        version,
        schema: commit.schema,
        schema_at: commit.schema_at,
        rows: commit.rows,
        columns,
        columns_at: commit.columns_at,
        pieces: commit.pieces,
        committed: true,
        end: file_len,
    };
    Ok(Some((contents, chained)))
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
            if record.kind != RecordKind::Entry || record.len != last.len || record.crc != last.crc
            {
                return Ok(false);
            }
            align_up(last.end())
        }
        None => HEADER_LEN as u64,
    };
    let mut previous = 0;
    // version 4: the SEGMENT record of the commit's last piece is met
    let last_piece = commit.pieces.last().map(|p| p.at);
    let mut met_last_piece = last_piece.is_none();
    while here < at {
        let Some(record) = record_at(file, here, file_len)? else {
            return Ok(false);
        };
        let end = here + RECORD_LEN as u64 + record.len;
        previous = here;
        here = match record.kind {
            RecordKind::Entry => return Ok(false),
            RecordKind::Schema if here != commit.schema_at => return Ok(false),
            RecordKind::Commit => {
                let tail = read_at(file, end, TRAILER_LEN)?;
                if parse_trailer(&tail) != Some((here, count)) {
                    return Ok(false);
                }
                align_up(end + TRAILER_LEN as u64)
            }
            RecordKind::Segment => {
                met_last_piece |= last_piece == Some(here);
                align_up(end)
            }
            RecordKind::Schema | RecordKind::Labels | RecordKind::Columns => align_up(end),
        };
        crate::interrupt::check()?;
    }
    Ok(here == at && met_last_piece && (commit.columns_at == 0 || previous == commit.columns_at))
}

/// The schema, rows and COLUMNS record offset (versions 2 and 3) or
/// pieces (version 4) of a commit record's payload (the record at `at`),
/// every offset checked.
pub(in crate::dataset) fn parse_commit(
    file: &File,
    file_len: u64,
    at: u64,
    payload: &[u8],
    version: u32,
) -> Result<Commit> {
    let mut c = Cursor::new(payload, COMMIT);
    let count = c.u64()?;
    let schema_at = c.u64()?;
    let columns_at = if has_segments(version) { 0 } else { c.u64()? };
    let count = usize::try_from(count).map_err(|_| c.bad("count"))?;
    if !has_segments(version) && count.saturating_mul(ROW_LEN) > payload.len() {
        return Err(c.bad("a count larger than the record"));
    }
    let schema = if schema_at == 0 {
        if count > 0 || columns_at != 0 {
            return Err(c.bad("entries without a schema"));
        }
        None
    } else {
        let record = record_at(file, schema_at, file_len)?
            .filter(|r| r.kind == RecordKind::Schema && schema_at < at)
            .ok_or_else(|| c.bad("no schema where it says"))?;
        let bytes =
            payload_at(file, schema_at, record)?.ok_or_else(|| c.bad("a damaged schema record"))?;
        Some(Schema::decode(&bytes)?)
    };
    let (rows, pieces) = if has_segments(version) {
        let n = schema
            .as_ref()
            .map_or(0, |s| s.columns.len() + s.fields.len());
        segment_rows(file, file_len, at, payload, n, version)?
    } else {
        if (count == 0) != (columns_at == 0) {
            return Err(c.bad("a COLUMNS record offset without entries, or entries without it"));
        }
        (parse_rows(payload, version)?, Vec::new())
    };
    let mut previous_end = HEADER_LEN as u64;
    for row in &rows {
        let end = row
            .offset
            .checked_add(RECORD_LEN as u64)
            .and_then(|s| s.checked_add(row.len))
            .ok_or_else(|| c.bad("an entry's range"))?;
        if row.offset < previous_end || end > at || row.offset % ALIGN != 0 {
            return Err(c.bad("an entry's range"));
        }
        previous_end = end;
    }
    // the COLUMNS record lies after the entries, before this commit (its
    // header and payload are read when a column is asked for)
    if columns_at != 0
        && (columns_at < previous_end
            || columns_at % ALIGN != 0
            || columns_at.saturating_add(RECORD_LEN as u64) > at)
    {
        return Err(c.bad("the COLUMNS record's offset"));
    }
    Ok(Commit {
        schema_at,
        schema,
        rows,
        columns_at,
        pieces,
    })
}

/// The rows of the entries of a version-4 commit record (at `at`, its
/// `payload`), read from the SEGMENT records its pieces name: each lies
/// before the commit, whole in the file, holds the piece's count of rows
/// and `n` columns, and its rows part matches the CRC32 the piece holds
/// (the columns part is checked when read). One read per piece.
fn segment_rows(
    file: &File,
    file_len: u64,
    at: u64,
    payload: &[u8],
    n: usize,
    version: u32,
) -> Result<(Vec<Row>, Vec<Piece>)> {
    let (count, _, pieces) = parse_commit_pieces(payload)?;
    let bad = |what: &str| Cursor::new(&[], SEGMENT).bad(what);
    let mut rows = Vec::new();
    // every piece lies in the file: the count is bounded by its length
    if count.saturating_mul(ROW_LEN as u64) > file_len {
        return Err(bad("a count larger than the file"));
    }
    rows.try_reserve_exact(usize::try_from(count).map_err(|_| bad("count"))?)?;
    for piece in &pieces {
        let record = record_at(file, piece.at, file_len)?
            .filter(|r| r.kind == RecordKind::Segment && piece.at % ALIGN == 0)
            .ok_or_else(|| bad("no SEGMENT record where the commit says"))?;
        let rows_len = piece.rows_len().ok_or_else(|| bad("a piece's count"))?;
        let values_len = piece.values_len(n).ok_or_else(|| bad("a piece's count"))?;
        if rows_len.checked_add(values_len) != Some(record.len)
            || piece.at + RECORD_LEN as u64 + record.len > at
        {
            return Err(bad("a SEGMENT record of another length than its piece's"));
        }
        // the rows alone: the end of the payload
        let len = usize::try_from(rows_len).map_err(|_| bad("a piece's count"))?;
        let bytes = read_at(file, piece.at + RECORD_LEN as u64 + values_len, len)?;
        if bytes.len() != len || crc32fast::hash(&bytes) != piece.rows_crc {
            return Err(bad("a damaged SEGMENT record (its rows' CRC differs)"));
        }
        let piece_rows = parse_segment_rows(&bytes, piece.count, version)?;
        // each entry lies before the segment listing it
        let past = |row: &Row| {
            row.offset
                .checked_add(RECORD_LEN as u64)
                .and_then(|start| start.checked_add(row.len))
                .is_none_or(|end| end > piece.at)
        };
        if piece_rows.last().is_some_and(past) {
            return Err(bad("an entry after the SEGMENT record listing it"));
        }
        rows.extend(piece_rows);
        crate::interrupt::check()?;
    }
    Ok((rows, pieces))
}
