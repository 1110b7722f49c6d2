//! The recovery walk of a file of format version 2 or 3 whose last commit
//! is missing or cannot be taken on its word (a writer interrupted, a
//! damaged tail): the records are walked from the file header, each from
//! the end of the one before, and every complete entry is kept, up to the
//! first whose payload does not hash to its header's CRC. Entries a valid
//! commit met on the way lists are not hashed again.

use std::fs::File;

use super::codec::{entry_values, parse_rows, Schema};
use super::contents::{bad, fits, payload_at, Contents};
use super::layout::{
    align_up, has_description_crcs, has_segments, parse_record, parse_trailer, Record, RecordKind,
    Row, ENTRY_DESCRIPTION, HEADER_LEN, RECORD_LEN, TRAILER_LEN,
};
use super::open::parse_commit;
use crate::dataset::read_at;
use crate::error::Result;
use crate::io::bytes::le64;

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
    fn record(&mut self, at: u64, file_len: u64) -> Result<Option<Record>> {
        if at >= file_len {
            return Ok(None);
        }
        Ok(parse_record(self.get(at, RECORD_LEN)?).filter(|record| fits(at, *record, file_len)))
    }
}

/// The CRC32 of the description of the entry whose record is at `at`
/// when its payload hashes to its CRC (`None` otherwise), read a piece at
/// a time: what recovery knows of an entry no valid commit lists.
pub(in crate::dataset) fn hash_payload(
    file: &File,
    at: u64,
    record: Record,
) -> Result<Option<u32>> {
    const PIECE: u64 = 1 << 20;
    let mut hasher = crc32fast::Hasher::new();
    let mut description = crc32fast::Hasher::new();
    // the description's length and the description: the payload's first
    // 8 + length bytes (as many as there are)
    let mut description_end = (ENTRY_DESCRIPTION as u64).min(record.len);
    let start = at + RECORD_LEN as u64;
    let mut done = 0u64;
    while done < record.len {
        let n = usize::try_from((record.len - done).min(PIECE)).unwrap_or(0);
        let piece = read_at(file, start + done, n)?;
        if piece.len() != n {
            return Ok(None);
        }
        if done == 0 && piece.len() >= ENTRY_DESCRIPTION {
            description_end = le64(&piece, 0)
                .saturating_add(ENTRY_DESCRIPTION as u64)
                .min(record.len);
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

/// Walk the records from the header, keeping every complete entry (a
/// file whose last writer did not commit). Entries listed by a valid
/// commit record met on the way are not hashed again.
#[allow(clippy::too_many_lines)] // one walk, in order
pub(super) fn recover(file: &File, file_len: u64, id: String, version: u32) -> Result<Contents> {
    let mut at = HEADER_LEN as u64;
    let mut end = at;
    let mut rows = Vec::new();
    // the valid commits met (closed by their trailer, their CRC right):
    // where, their record, their count of entries
    let mut commits = Vec::new();
    let mut schema: Option<(u64, Schema)> = None;
    let mut window = Window::new(file);
    while let Some(record) = window.record(at, file_len)? {
        let mut next = align_up(at + RECORD_LEN as u64 + record.len);
        match record.kind {
            RecordKind::Entry => {
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
            RecordKind::Schema => {
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
            RecordKind::Commit => {
                // a commit whose trailer follows it in full
                let trailer_at = at + RECORD_LEN as u64 + record.len;
                let tail = read_at(file, trailer_at, TRAILER_LEN)?;
                if parse_trailer(&tail) != Some((at, rows.len() as u64)) {
                    break;
                }
                if hash_payload(file, at, record)?.is_some() {
                    commits.push((at, record, rows.len()));
                }
                // a damaged commit record closed by its trailer is
                // passed over: the entries it lists are hashed, as
                // those after the last commit
                next = align_up(trailer_at + TRAILER_LEN as u64);
            }
            // a COLUMNS record is followed by its COMMIT; one alone
            // (a commit interrupted) is skipped: recovery reads the
            // values from the entries
            // so is a SEGMENT record (version 4), which only a commit's
            // pieces name
            RecordKind::Labels | RecordKind::Columns | RecordKind::Segment => {}
        }
        at = next;
        // a record is complete once its payload is in the file; the
        // padding after the last one may be missing
        end = at.min(file_len);
    }
    // the entries of the last valid commit whose rows are the entries
    // walked (a later one that lists others, an entry's header damaged
    // since, is passed over: the entries an earlier one lists stay
    // committed), their description checksums from its rows (version 4:
    // and its pieces, which the next commit keeps)
    let mut verified = 0usize;
    let mut pieces = Vec::new();
    if has_description_crcs(version) {
        for &(commit_at, record, count) in commits.iter().rev() {
            let Some(payload) = payload_at(file, commit_at, record)? else {
                continue;
            };
            let (listed, listed_pieces) = if has_segments(version) {
                match parse_commit(file, file_len, commit_at, &payload, version) {
                    Ok(commit) => (commit.rows, commit.pieces),
                    Err(_) => continue,
                }
            } else {
                match parse_rows(&payload, version) {
                    Ok(listed) => (listed, Vec::new()),
                    Err(_) => continue,
                }
            };
            let matches = listed.len() == count
                && listed
                    .iter()
                    .zip(&rows)
                    .all(|(a, b)| (a.offset, a.len, a.crc) == (b.offset, b.len, b.crc));
            if matches {
                for (row, from) in rows.iter_mut().zip(listed) {
                    row.desc_crc = from.desc_crc;
                }
                verified = count;
                pieces = listed_pieces;
                break;
            }
        }
    } else if let Some(&(_, _, count)) = commits.last() {
        // version 2: its rows hold no description checksums to take
        verified = count;
    }
    // entries after the last commit: kept up to the first whose
    // payload does not hash to its header's CRC
    let mut keep = verified;
    for row in &mut rows[verified..] {
        let record = Record {
            kind: RecordKind::Entry,
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
        pieces,
        committed: false,
        end,
    })
}
