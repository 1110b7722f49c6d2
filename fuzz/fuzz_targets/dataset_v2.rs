//! Dataset files of format versions 2, 3 and 4 (`dataset/v2/`): the input
//! is a whole file, written to a scratch path and opened (the trailer and
//! commit record, or the recovery walk), then every field of every entry
//! read, every column and the checksum. Whatever the bytes, the outcome is
//! a dataset or an error, never a crash; what reads saves as `.mts` and
//! loads back equal.
//!
//! Beyond that, the file is also read by [`Oracle`], a walk of its records
//! written apart from the reader, from docs/format.md, and the open must
//! agree with it:
//!
//! - a dataset opened as committed ends with a trailer that closes the
//!   COMMIT record it names (directly after it, its CRC and count right),
//!   and holds that record's count of entries: a trailer that is an
//!   entry's bytes (the seeds `v3-trailer-imitation` and
//!   `v3-commit-imitation` hold such entries, their writer killed before
//!   its commit) is never taken for the last commit unless it is one;
//! - a dataset opened by walking its records holds at least the entries
//!   the last valid commit met by the walk lists (a commit closed by its
//!   trailer, whose CRC matches and whose rows are the entries before it):
//!   no committed entry is lost;
//! - in versions 3 and 4, an entry whose description does not hash to the
//!   CRC32 its row holds never reads (every field's read fails);
//! - in version 4, the rows are those of the SEGMENT records the commit's
//!   pieces name (each checked against the CRC32 its piece holds).

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use blockmap::dataset::Dataset;
use blockmap::{io, DataRef, Kind, MapMode};
use libfuzzer_sys::fuzz_target;

/// The scratch file of this process.
fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("blockmap-fuzz-dataset-{}", std::process::id()))
    })
}

const MAGIC: &[u8; 8] = b"\x89BMDS\r\n\x1a";
const TRAILER_MAGIC: &[u8; 8] = b"BMDSEND2";
const COMMIT: u8 = 4;

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        data.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(data: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        data.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

fn align(at: usize) -> usize {
    at.div_ceil(64) * 64
}

/// `(offset, length, payload CRC, description CRC)` of an entry.
type Row = (u64, u64, u32, u32);

/// A record header: kind, CRC, payload length; `None` past the file or
/// when its payload does not fit.
fn record(data: &[u8], at: usize) -> Option<(u8, u32, usize)> {
    let head = data.get(at..at.checked_add(16)?)?;
    if &head[..3] != b"BMr" || !(1..=6).contains(&head[3]) {
        return None;
    }
    let len = usize::try_from(u64_at(head, 8)?).ok()?;
    at.checked_add(16)?
        .checked_add(len)
        .filter(|&end| end <= data.len())?;
    Some((head[3], u32_at(head, 4)?, len))
}

/// `(commit record offset, count)` of the trailer at `at`.
fn trailer(data: &[u8], at: usize) -> Option<(u64, u64)> {
    let bytes = data.get(at..at.checked_add(32)?)?;
    let valid = &bytes[..8] == TRAILER_MAGIC
        && u32_at(bytes, 24)? == crc32fast::hash(&bytes[..24])
        && u32_at(bytes, 28)? == 0;
    valid.then(|| Some((u64_at(bytes, 8)?, u64_at(bytes, 16)?)))?
}

/// The rows of a COMMIT record's payload (`None`: not a payload of
/// `version`); in version 4, read from the SEGMENT records of `data` its
/// pieces name.
fn rows(data: &[u8], payload: &[u8], version: u32) -> Option<Vec<Row>> {
    if version >= 4 {
        return piece_rows(data, payload);
    }
    let count = usize::try_from(u64_at(payload, 0)?).ok()?;
    if payload.len() != 24usize.checked_add(count.checked_mul(24)?)? {
        return None;
    }
    (0..count)
        .map(|i| {
            let at = 24 + 24 * i;
            let desc_crc = u32_at(payload, at + 20)?;
            if version == 2 && desc_crc != 0 {
                return None;
            }
            Some((
                u64_at(payload, at)?,
                u64_at(payload, at + 8)?,
                u32_at(payload, at + 16)?,
                desc_crc,
            ))
        })
        .collect()
}

/// Version 4: the rows of the SEGMENT records a COMMIT payload's pieces
/// name (count, schema offset, piece count, then per piece: segment
/// offset, count, rows CRC32, columns CRC32), each segment's rows (the
/// last 24 bytes per entry of its payload, after its count, column count,
/// zeros and columns) checked against its CRC32.
fn piece_rows(data: &[u8], payload: &[u8]) -> Option<Vec<Row>> {
    let count = u64_at(payload, 0)?;
    let pieces = usize::try_from(u64_at(payload, 16)?).ok()?;
    if payload.len() != 24usize.checked_add(pieces.checked_mul(24)?)? {
        return None;
    }
    let mut out = Vec::new();
    for p in 0..pieces {
        let at = 24 + 24 * p;
        let segment = usize::try_from(u64_at(payload, at)?).ok()?;
        let n = usize::try_from(u64_at(payload, at + 8)?).ok()?;
        let rows_crc = u32_at(payload, at + 16)?;
        let (kind, _, len) = record(data, segment)?;
        let rows_len = n.checked_mul(24)?;
        if kind != 6 || n == 0 || rows_len.checked_add(16)? > len {
            return None;
        }
        let end = segment + 16 + len;
        let part = data.get(end - rows_len..end)?;
        if crc32fast::hash(part) != rows_crc {
            return None;
        }
        for i in 0..n {
            let row = 24 * i;
            out.push((
                u64_at(part, row)?,
                u64_at(part, row + 8)?,
                u32_at(part, row + 16)?,
                u32_at(part, row + 20)?,
            ));
        }
    }
    (out.len() as u64 == count).then_some(out)
}

/// The CRC32 of the description of the entry at `offset`, as version 3
/// stores it (its u64 length, then its bytes), when it lies in the file.
fn description_crc(data: &[u8], offset: u64) -> Option<u32> {
    let at = usize::try_from(offset).ok()?;
    let len = usize::try_from(u64_at(data, at.checked_add(16)?)?).ok()?;
    let bytes = data.get(at + 16..at.checked_add(24)?.checked_add(len)?)?;
    Some(crc32fast::hash(bytes))
}

/// What the format says a file holds, found apart from the reader.
struct Oracle {
    version: u32,
    /// the entries the last valid commit met by the walk from the header
    /// lists
    walked_count: usize,
    /// its rows (version 3, where the walk reads them)
    walked_commit: Vec<Row>,
    /// the rows of the COMMIT record the file's trailer closes, when it
    /// does (directly after it, CRC and count right)
    closed_commit: Option<Vec<Row>>,
}

impl Oracle {
    fn new(data: &[u8]) -> Option<Oracle> {
        if data.len() < 64 || &data[..8] != MAGIC {
            return None;
        }
        let version = u32_at(data, 8)?;
        if !(2..=4).contains(&version) {
            return None;
        }
        // the walk: each record from the end of the one before
        let mut at = 64;
        let mut entries: Vec<(u64, u64, u32)> = Vec::new();
        let mut schema = false;
        let mut walked_commit = Vec::new();
        let mut walked_count = 0;
        while let Some((kind, crc, len)) = record(data, at) {
            let end = at + 16 + len;
            match kind {
                3 if !schema || len == 0 => break,
                3 => entries.push((at as u64, len as u64, crc)),
                1 => schema = true,
                COMMIT => {
                    if trailer(data, end) != Some((at as u64, entries.len() as u64)) {
                        break;
                    }
                    let payload = &data[at + 16..end];
                    if crc32fast::hash(payload) == crc {
                        let listed = rows(data, payload, version);
                        let matches = listed.as_ref().is_some_and(|listed| {
                            listed
                                .iter()
                                .zip(&entries)
                                .all(|(r, e)| (r.0, r.1, r.2) == *e)
                        });
                        // version 2: the rows are not read by the walk
                        if version == 2 || matches {
                            walked_count = entries.len();
                            walked_commit = listed.unwrap_or_default();
                        }
                    }
                    at = align(end + 32);
                    continue;
                }
                _ => {}
            }
            at = align(end);
        }
        // the commit the trailer at the end closes
        let closed_commit = data.len().checked_sub(32).and_then(|t| {
            let (commit_at, count) = trailer(data, t)?;
            let commit_at = usize::try_from(commit_at).ok()?;
            let (kind, crc, len) = record(data, commit_at)?;
            let payload = data.get(commit_at + 16..commit_at + 16 + len)?;
            (kind == COMMIT && commit_at + 16 + len == t && crc32fast::hash(payload) == crc)
                .then(|| rows(data, payload, version))?
                .filter(|rows| rows.len() as u64 == count)
        });
        Some(Oracle {
            version,
            walked_count,
            walked_commit,
            closed_commit,
        })
    }
}

fuzz_target!(|data: &[u8]| {
    let path = scratch();
    std::fs::write(path, data).expect("the scratch file is written");
    let Ok(dataset) = Dataset::open(path, MapMode::ReadOnly) else {
        return;
    };
    let schema = dataset.schema();
    for (name, _) in &schema.columns {
        let _ = dataset.column(name);
    }
    for field in 0..schema.fields.len() {
        let _ = dataset.n_samples(field);
    }
    let _ = dataset.checksum(dataset.len());
    let index = |i: usize| i64::try_from(i).expect("an index");
    let mut read = vec![false; dataset.len()];
    for (i, was_read) in read.iter_mut().enumerate() {
        for field in 0..schema.fields.len() {
            if let Ok(map) = dataset.get_field(index(i), field, None) {
                *was_read = true;
                let saved = io::save_buffer(DataRef::Tensor(&map)).expect("a map read saves");
                match io::load_buffer(saved, Kind::Tensor) {
                    Ok(blockmap::Data::Tensor(again)) => assert!(again == map),
                    other => panic!("a saved map does not load back: {other:?}"),
                }
            }
        }
    }
    let Some(oracle) = Oracle::new(data) else {
        return;
    };
    assert_eq!(dataset.version(), oracle.version);
    let rows = if dataset.committed() {
        let closed = oracle
            .closed_commit
            .as_ref()
            .expect("opened as committed: the file ends with a trailer closing its commit record");
        assert_eq!(
            dataset.len(),
            closed.len(),
            "the entries of the commit the trailer closes"
        );
        closed
    } else {
        assert!(
            dataset.len() >= oracle.walked_count,
            "{} entries opened, the last commit of the file lists {}",
            dataset.len(),
            oracle.walked_count
        );
        &oracle.walked_commit
    };
    if oracle.version >= 3 {
        for (i, &(offset, _, _, desc_crc)) in rows.iter().enumerate() {
            if read[i] {
                assert_eq!(
                    description_crc(data, offset),
                    Some(desc_crc),
                    "entry {i} read although its description does not match its CRC32"
                );
            }
        }
    }
});
