//! What a dataset file holds beyond its entries, for `blockmap info`: how
//! many commits it went through and how many of its bytes no reader uses
//! any more (the "dead" bytes a rewrite, `Dataset.upgrade`, would drop).
//!
//! Read only, and from the records' headers: no entry's data is read. The
//! knowledge of each format version's layout sits in one function per
//! version ([`layout_v1`], [`layout_v2`] for versions 2, 3 and 4): a new
//! version adds its own, and [`inspect`] dispatches on the version the
//! open found.

use std::collections::HashSet;
use std::fs::File;
use std::path::Path;

use super::v1::{INDEX_NAME, JSON_NAME};
use super::v2::layout::{self as f, parse_trailer, RecordKind, RECORD_LEN, TRAILER_LEN};
use super::{io_error, read_at, v1, v2, Dataset, Inner};
use crate::buffer::MapMode;
use crate::error::{Error, Result};
use crate::io::bytes::le64;
use crate::io::zip;

/// What [`inspect`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// the file's format version (1 to 4)
    pub version: u32,
    /// its identity
    pub id: String,
    /// the entries a reader opens
    pub entries: usize,
    /// whether the file ends with its last commit
    pub committed: bool,
    /// the file's length in bytes
    pub file_len: u64,
    /// the layout's figures
    pub layout: Layout,
}

impl Inspection {
    /// The bytes of the file no reader uses: superseded commits (their
    /// records, indexes and directories), entries no commit lists, what an
    /// interrupted write left after the last commit.
    pub fn dead_bytes(&self) -> u64 {
        self.file_len.saturating_sub(self.layout.live)
    }
}

/// The figures of one file's layout, as its version's function finds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout {
    /// the commits the file holds (each one closed by its end records)
    pub commits: u64,
    /// the bytes a reader of the last commit uses: the file header, the
    /// schema and labels, the entries it lists and the commit itself, each
    /// with the padding after it
    pub live: u64,
}

/// Inspect the dataset file at `path` (any version): opened as a reader
/// opens it, then its records' headers walked.
pub fn inspect(path: &Path) -> Result<Inspection> {
    let dataset = Dataset::open(path, MapMode::ReadOnly)?;
    let file = crate::io::open_regular(path)?;
    let file_len = file
        .metadata()
        .map_err(io_error(path, "cannot read"))?
        .len();
    // one function per format version: a new version adds its own here
    // (until it does, its files are refused by name, not misread)
    let layout = match (&dataset.inner, dataset.version()) {
        (Inner::V1(d), 1) => layout_v1(&file, file_len, d)?,
        (Inner::V2(d), 2..=4) => layout_v2(&file, file_len, d)?,
        (_, version) => {
            return Err(Error::internal(format!(
                "dataset/inspect.rs has no layout function for format version {version}"
            )))
        }
    };
    Ok(Inspection {
        version: dataset.version(),
        id: dataset.id().to_string(),
        entries: dataset.len(),
        committed: dataset.committed(),
        file_len,
        layout,
    })
}

/// Versions 2, 3 and 4: the records walked from the file header, each
/// from the end of the one before (16 bytes read per record). A COMMIT
/// record closed by its trailer is a commit; the live records are the
/// SCHEMA and LABELS records (every writing session's, which its entries
/// refer to), the entries the open lists, and the last commit's COMMIT
/// record with its trailer and what it lists: its COLUMNS record
/// (versions 2 and 3) or its SEGMENT records (version 4).
fn layout_v2(file: &File, file_len: u64, d: &v2::Dataset) -> Result<Layout> {
    let listed: HashSet<u64> = (0..d.len()).map(|i| d.span(i).offset).collect();
    let pieces: HashSet<u64> = d.piece_offsets().collect();
    // the last commit, from the trailer that ends the file
    let (commit_at, columns_at) = if d.committed() {
        let tail = read_at(
            file,
            file_len.saturating_sub(TRAILER_LEN as u64),
            TRAILER_LEN,
        )?;
        let commit_at = parse_trailer(&tail)
            .map(|(at, _)| at)
            .ok_or_else(|| Error::internal("a committed dataset without its trailer"))?;
        let payload = read_at(
            file,
            commit_at + RECORD_LEN as u64,
            f::COMMIT_COLUMNS_AT + 8,
        )?;
        // version 4's COMMIT lists pieces where versions 2 and 3 name
        // their COLUMNS record
        let columns_at = if d.version() < 4 && payload.len() == f::COMMIT_COLUMNS_AT + 8 {
            le64(&payload, f::COMMIT_COLUMNS_AT)
        } else {
            0
        };
        (Some(commit_at), columns_at)
    } else {
        (None, 0)
    };
    let mut layout = Layout {
        commits: 0,
        live: f::HEADER_LEN as u64,
    };
    let mut at = f::HEADER_LEN as u64;
    while at < file_len {
        crate::interrupt::check()?;
        let Some(record) = v2::record_at(file, at, file_len)? else {
            break;
        };
        let end = at + RECORD_LEN as u64 + record.len;
        // a record and the padding after it
        let footprint = f::align_up(end).min(file_len) - at;
        let next = match record.kind {
            RecordKind::Commit => {
                let closed = parse_trailer(&read_at(file, end, TRAILER_LEN)?)
                    .is_some_and(|(named, _)| named == at);
                if closed {
                    layout.commits += 1;
                }
                if Some(at) == commit_at {
                    layout.live += TRAILER_LEN as u64 + RECORD_LEN as u64 + record.len;
                }
                if closed {
                    end + TRAILER_LEN as u64
                } else {
                    end
                }
            }
            RecordKind::Entry if record.len == 0 => break,
            kind => {
                let live = match kind {
                    RecordKind::Schema | RecordKind::Labels => true,
                    RecordKind::Entry => listed.contains(&at),
                    RecordKind::Columns => at == columns_at,
                    RecordKind::Segment => pieces.contains(&at),
                    RecordKind::Commit => false,
                };
                if live {
                    layout.live += footprint;
                }
                end
            }
        };
        at = f::align_up(next);
    }
    Ok(layout)
}

/// The local header at `offset` and its data's range, `None` when no
/// complete entry lies there.
fn local_at(file: &File, offset: u64, file_len: u64) -> Result<Option<zip::LocalHeader>> {
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

/// Version 1: the zip records walked from the start (each local header,
/// and the central directories and end records of earlier commits
/// skipped). Each `blockmap-index.npy` is a commit; the live bytes are the
/// dataset header entry, the maps the open lists (their local headers and
/// archives), and the last commit's index, central directory and end
/// records, which end the file.
fn layout_v1(file: &File, file_len: u64, d: &v1::Dataset) -> Result<Layout> {
    let listed: HashSet<u64> = (0..d.len()).map(|i| d.span(i).offset).collect();
    let mut layout = Layout::default();
    let mut last_index = None;
    let mut at = 0u64;
    while at < file_len {
        crate::interrupt::check()?;
        let head = read_at(file, at, zip::CENTRAL_LEN)?;
        let Some(signature) = zip::signature(&head) else {
            break;
        };
        if signature == zip::LOCAL {
            let Some(header) = local_at(file, at, file_len)? else {
                break;
            };
            let data = at + header.len;
            let end = data + header.size;
            if header.name == INDEX_NAME {
                layout.commits += 1;
                last_index = Some(at);
            } else if header.name == JSON_NAME || listed.contains(&data) {
                layout.live += end - at;
            }
            at = end;
            continue;
        }
        let Some(len) = zip::skipped_record_len(signature, &head) else {
            break;
        };
        match at.checked_add(len) {
            Some(next) if next <= file_len => at = next,
            _ => break,
        }
    }
    if d.committed() {
        if let Some(index_at) = last_index {
            layout.live += file_len - index_at;
        }
    }
    Ok(layout)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::dataset::{upgrade, Writer};
    use crate::fixtures::{self, TempDir};

    /// The empty commit a new file starts with: its record (16 bytes of
    /// header, 24 of payload) and trailer (32), padded to 64 bytes.
    const EMPTY_COMMIT: u64 = 128;

    fn stored(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/datasets")
            .join(name)
    }

    #[test]
    fn commits_and_dead_bytes_follow_the_writes() {
        let dir = TempDir::new("dataset-inspect");
        let path = dir.join("data");
        let mut writer = Writer::create(&path, None, false).unwrap();
        writer.write(&fixtures::small_map()).unwrap();
        writer.close().unwrap();
        let first = inspect(&path).unwrap();
        assert_eq!((first.version, first.entries), (4, 1));
        assert_eq!(first.layout.commits, 2);
        assert_eq!(first.dead_bytes(), EMPTY_COMMIT);

        let mut writer = Writer::append(&path, None).unwrap();
        writer.write(&fixtures::small_map()).unwrap();
        writer.commit().unwrap();
        writer.write(&fixtures::small_map()).unwrap();
        writer.close().unwrap();
        let grown = inspect(&path).unwrap();
        assert_eq!((grown.entries, grown.layout.commits), (3, 4));
        assert_eq!(grown.id, first.id);
        // the commits before the last (records, trailers, COLUMNS) are dead
        assert!(grown.dead_bytes() > first.dead_bytes() + 2 * EMPTY_COMMIT);
        assert_eq!(grown.layout.live + grown.dead_bytes(), grown.file_len);

        let copy = dir.join("copy");
        upgrade(&path, &copy, None, false).unwrap();
        let copied = inspect(&copy).unwrap();
        assert_eq!((copied.entries, copied.layout.commits), (3, 2));
        assert_eq!(copied.dead_bytes(), EMPTY_COMMIT);
    }

    #[test]
    fn an_interrupted_write_is_dead_bytes_after_the_last_commit() {
        let dir = TempDir::new("dataset-inspect-cut");
        let path = dir.join("data");
        let mut writer = Writer::create(&path, None, false).unwrap();
        writer.write(&fixtures::small_map()).unwrap();
        writer.close().unwrap();
        let committed = inspect(&path).unwrap();
        // what a killed writer leaves: bytes after the trailer
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&[0x5a; 200]);
        std::fs::write(&path, &bytes).unwrap();
        let cut = inspect(&path).unwrap();
        assert!(!cut.committed);
        assert_eq!(cut.entries, 1);
        assert!(cut.dead_bytes() >= committed.dead_bytes() + 200);
    }

    #[test]
    fn every_stored_version() {
        for (name, version, commits) in [
            ("v1-committed.bmds", 1, 2),
            ("v1-appended.bmds", 1, 3),
            ("v2-committed.bmds", 2, 2),
            ("v2-appended.bmds", 2, 3),
            ("v3-committed.bmds", 3, 2),
            ("v4-committed.bmds", 4, 2),
            ("v4-appended.bmds", 4, 3),
        ] {
            let found = inspect(&stored(name)).unwrap();
            assert_eq!(found.version, version, "{name}");
            assert_eq!(found.layout.commits, commits, "{name}");
            assert!(found.committed, "{name}");
            assert!(found.dead_bytes() > 0 && found.layout.live > 0, "{name}");
        }
        let recovered = inspect(&stored("v2-recovered.bmds")).unwrap();
        assert!(!recovered.committed);
        assert!(recovered.dead_bytes() > 0);
    }
}
