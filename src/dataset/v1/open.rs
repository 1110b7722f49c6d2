//! Where the maps of a version-1 file lie: from its last commit (the end
//! records, their comment, and the index they name), or, when the file
//! does not end with one, by walking its zip records from the start.

use std::fs::File;

use super::{map_name, COMMENT_PREFIX, INDEX_NAME, JSON_NAME, VERSION};
use crate::buffer::ALIGNMENT;
use crate::dataset::{read_at, Span};
use crate::error::{Error, Result};
use crate::io;
use crate::io::zip::reader::{find_end, EndRecords};
use crate::io::zip::{self, LocalHeader};

/// Where a version-1 file's maps lie, found by opening it.
#[derive(Debug, Clone)]
pub(super) struct Listing {
    /// the dataset's identity
    pub id: String,
    /// where each map's archive lies
    pub spans: Vec<Span>,
    /// whether the file ends with a complete commit (false: recovered by
    /// walking its records after an interrupted write)
    pub committed: bool,
    /// a recovered file's CRC32 of each map's archive, from its local
    /// header (a committed file's are in its central directory, read when
    /// first asked for)
    pub walked_crcs: Vec<u32>,
    /// the file's length
    pub len: u64,
}

/// Read the identity out of the JSON entry whose data is `bytes`.
fn parse_json_id(bytes: &[u8]) -> Result<String> {
    let bad = || Error::format("dataset file: its first entry is not blockmap's dataset header");
    let text = std::str::from_utf8(bytes).map_err(|_| bad())?;
    let value: serde_json::Value = serde_json::from_str(text).map_err(|_| bad())?;
    if value.get("format").and_then(|f| f.as_str()) != Some("blockmap dataset") {
        return Err(bad());
    }
    let version = value.get("version").and_then(serde_json::Value::as_u64);
    if version != Some(u64::from(VERSION)) {
        return Err(Error::format(format!(
            "dataset file of version {version:?}: this blockmap reads version {VERSION}"
        )));
    }
    let id = value.get("id").and_then(|i| i.as_str()).ok_or_else(bad)?;
    if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    Ok(id.to_string())
}

/// The local header at `offset`, with its data range checked against the
/// file's length (`None`: no complete entry there).
fn local_at(file: &File, offset: u64, file_len: u64) -> Result<Option<LocalHeader>> {
    let fixed = read_at(file, offset, zip::LOCAL_LEN)?;
    if fixed.len() < zip::LOCAL_LEN || zip::signature(&fixed) != Some(zip::LOCAL) {
        return Ok(None);
    }
    let whole = read_at(
        file,
        offset,
        zip::LOCAL_LEN + zip::local_variable_len(&fixed),
    )?;
    let Ok(header) = zip::parse_local(&whole) else {
        return Ok(None);
    };
    let complete = offset
        .checked_add(header.len)
        .and_then(|start| start.checked_add(header.size))
        .is_some_and(|end| end <= file_len);
    Ok(complete.then_some(header))
}

impl Listing {
    /// Open the dataset file `file` (of `file_len` bytes).
    pub fn read(file: &File, file_len: u64) -> Result<Listing> {
        // (the end records are found by their signature, from the file's
        // end: `committed` takes them for the last commit only where they
        // close the central directory that directly follows the index it
        // names, which a map's data holding a copy of an earlier commit's
        // end records does not)
        let json = local_at(file, 0, file_len)?
            .filter(|header| header.name == JSON_NAME)
            .ok_or_else(|| {
                Error::format("not a blockmap dataset file: it does not start with its header")
            })?;
        let json_data = read_at(file, json.len, usize::try_from(json.size).unwrap_or(0))?;
        let id = parse_json_id(&json_data)?;
        // the end records of a commit, ZIP64 ones first (a file without
        // them, or whose end does not parse, is walked)
        let end = match find_end(&mut &*file, file_len) {
            Ok(end) => Some(end).filter(|end| end.zip64),
            Err(Error::Format(_)) => None,
            Err(other) => return Err(other),
        };
        if let Some(end) = end {
            match Self::committed(file, file_len, &id, &end) {
                Ok(Some(listing)) => return Ok(listing),
                // end records that are not the file's last commit
                // (damaged, or a map's bytes that look like them): the walk
                // decides
                Ok(None) | Err(Error::Format(_)) => {}
                Err(other) => return Err(other),
            }
        }
        Self::recover(file, file_len, id, &json)
    }

    /// The maps a complete commit lists, `None` when the end record is not
    /// one of blockmap's.
    fn committed(
        file: &File,
        file_len: u64,
        id: &str,
        end: &EndRecords,
    ) -> Result<Option<Listing>> {
        let comment = String::from_utf8(end.comment.clone()).unwrap_or_default();
        let mut words = comment.split(' ');
        if words.next() != Some(COMMENT_PREFIX) {
            return Ok(None);
        }
        let bad = |what: &str| Error::format(format!("dataset file: bad commit record ({what})"));
        let version: u32 = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| bad("version"))?;
        if version != VERSION {
            return Err(Error::format(format!(
                "dataset file of version {version}: this blockmap reads version {VERSION}"
            )));
        }
        if words.next() != Some(id) {
            return Err(bad("its identity differs from the file's header"));
        }
        let index_at: u64 = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| bad("index"))?;
        let count: u64 = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| bad("count"))?;
        let index = local_at(file, index_at, file_len)?
            .filter(|header| header.name == INDEX_NAME)
            .ok_or_else(|| bad("no index where it says"))?;
        let index_data = index_at + index.len;
        let bytes = read_at(
            file,
            index_data,
            usize::try_from(index.size).map_err(|_| bad("index"))?,
        )?;
        let spans = parse_index(&bytes, count, index_at)?;
        // the records of this commit lie one after the other up to the end
        // of the file: the index, the central directory, the ZIP64 end
        // record and its locator, the end record and its comment
        let records_end = end.cd_offset.checked_add(end.cd_size).and_then(|e| {
            e.checked_add(
                (zip::ZIP64_END_LEN + zip::ZIP64_LOCATOR_LEN + zip::END_LEN) as u64
                    + end.comment.len() as u64,
            )
        });
        if index_data.checked_add(index.size) != Some(end.cd_offset)
            || records_end != Some(file_len)
        {
            return Ok(None);
        }
        // the central directory is read when the maps' checksums are
        // first asked for
        Ok(Some(Listing {
            id: id.to_string(),
            spans,
            committed: true,
            walked_crcs: Vec::new(),
            len: file_len,
        }))
    }

    /// Walk the records from the start of the file, keeping every complete
    /// map entry (a file whose last commit was interrupted).
    fn recover(file: &File, file_len: u64, id: String, json: &LocalHeader) -> Result<Listing> {
        let mut spans = Vec::new();
        let mut crcs = Vec::new();
        let mut at = json.len + json.size;
        loop {
            let head = read_at(file, at, zip::CENTRAL_LEN)?;
            let Some(signature) = zip::signature(&head) else {
                break;
            };
            if signature == zip::LOCAL {
                let Some(header) = local_at(file, at, file_len)? else {
                    break;
                };
                let data = at + header.len;
                if header.name == map_name(spans.len() as u64) && header.size > 0 {
                    spans.push(Span {
                        offset: data,
                        len: header.size,
                    });
                    crcs.push(header.crc);
                } else if header.name != INDEX_NAME {
                    break;
                }
                at = data + header.size;
                continue;
            }
            // the records of an earlier commit: skipped
            let Some(len) = zip::skipped_record_len(signature, &head) else {
                break;
            };
            match at.checked_add(len) {
                Some(next) if next <= file_len => at = next,
                _ => break,
            }
        }
        Ok(Listing {
            id,
            spans,
            committed: false,
            walked_crcs: crcs,
            len: file_len,
        })
    }
}

/// The spans of an index entry's data: `(count, 2)` little-endian `uint64`,
/// each map's data within the file before the index (at `limit`), 64-byte
/// aligned, one after the other.
fn parse_index(bytes: &[u8], count: u64, limit: u64) -> Result<Vec<Span>> {
    let bad = |what: &str| Error::format(format!("dataset file: bad index ({what})"));
    let header = io::npy::read_header(bytes)?;
    let count = usize::try_from(count).map_err(|_| bad("count"))?;
    let expected = io::npy::write_header(&io::npy::simple_descr(crate::DType::U8), &[count, 2])?;
    if header.len != expected.len() || bytes[..header.len] != expected[..] {
        return Err(bad("header"));
    }
    let data = &bytes[header.len..];
    if data.len() != count.checked_mul(16).ok_or_else(|| bad("count"))? {
        return Err(bad("size"));
    }
    let mut spans = Vec::new();
    spans.try_reserve_exact(count)?;
    let mut previous_end = 0u64;
    for row in data.chunks_exact(16) {
        let offset = io::bytes::le64(row, 0);
        let len = io::bytes::le64(row, 8);
        let end = offset
            .checked_add(len)
            .ok_or_else(|| bad("a map's range"))?;
        if len == 0
            || offset < previous_end
            || end > limit
            || !offset.is_multiple_of(ALIGNMENT as u64)
        {
            return Err(bad("a map's range"));
        }
        previous_end = end;
        spans.push(Span { offset, len });
    }
    Ok(spans)
}
