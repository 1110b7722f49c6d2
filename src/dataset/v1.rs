//! Dataset format version 1, read-only (docs/format.md, "Datasets"):
//! files written before version 2 open and read their maps; appending to
//! them is refused (`Dataset.upgrade` converts them). Its writer is gone;
//! the files of tests/data/datasets/ were written by it.
//!
//! A version-1 dataset file is a zip archive of STORED entries, in this order:
//!
//! - `blockmap-dataset.json`, first: `{"format": "blockmap dataset",
//!   "version": 1, "id": "<32 hex digits>"}`, the identity the file keeps
//!   through appends;
//! - `maps/<i>.mts` for i = 0, 1, ...: the `.mts` archive of map `i`, its
//!   data starting on a 64-byte boundary of the file (so the arrays inside,
//!   aligned in their own archive, are aligned in the file);
//! - at each commit (closing a writer): `blockmap-index.npy`, a `(count, 2)`
//!   little-endian `uint64` array of each map's data offset and length in
//!   the file; then the central directory (the JSON entry, every map, this
//!   index), the ZIP64 end record and locator, and the end record, whose
//!   comment is `blockmap-dataset 1 <id> <offset of the index's local
//!   header> <count>`.
//!
//! Opening reads the end of the file and the index: O(count) bytes of
//! index, no parsing of the central directory. Appending writes after the
//! end record of the last commit: nothing already in the file is rewritten,
//! so a reader that opened the file before keeps a consistent view (it
//! mapped what it read). A writer killed at any moment leaves a file whose
//! last bytes are not a complete end record: opening it then walks the
//! records from the start and keeps every map whose entry is complete (its
//! local header, patched with its size only once its data is written,
//! and its data within the file), which is every map whose `write` had
//! returned. Appending to such a file first cuts the incomplete tail off.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::{io_error, read_at, Slot};
use crate::buffer::{Buffer, MapMode, ALIGNMENT};
use crate::data::{Data, Kind};
use crate::error::{Error, Result};
use crate::io;
use crate::labels::Labels;
use crate::tensor::TensorMap;

use crate::io::zip::{self, Central, LocalHeader};

/// The first entry of every dataset file.
pub const JSON_NAME: &str = zip::DATASET_HEADER_NAME;
/// The index entry written at each commit.
pub const INDEX_NAME: &str = "blockmap-index.npy";
/// The version of the layout described in the module docs.
pub const VERSION: u32 = 1;
const COMMENT_PREFIX: &str = "blockmap-dataset";

/// The name of map `i`'s entry.
fn map_name(i: u64) -> String {
    format!("maps/{i}.mts")
}

/// What a dataset file holds, found by opening it.
#[derive(Debug, Clone)]
pub struct Contents {
    /// the dataset's identity
    pub id: String,
    /// where each map lies
    pub slots: Vec<Slot>,
    /// whether the file ends with a complete commit (false: recovered by
    /// walking its records after an interrupted write)
    pub committed: bool,
    /// for a writer that appends: every entry to list in the next central
    /// directory (the JSON entry and the maps), and where the file's
    /// complete content ends
    entries: Vec<Central>,
    end: u64,
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

impl Contents {
    /// Open the dataset file `file` (of `file_len` bytes).
    pub fn read(file: &File, file_len: u64) -> Result<Contents> {
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
        let tail_len = file_len
            .min((zip::END_LEN + zip::ZIP64_END_LEN + zip::ZIP64_LOCATOR_LEN + 0xFFFF) as u64);
        let tail = read_at(
            file,
            file_len - tail_len,
            usize::try_from(tail_len).unwrap_or(0),
        )?;
        if let Some(end) = zip::parse_end(&tail, file_len) {
            match Self::committed(file, file_len, &id, &end) {
                Ok(Some(contents)) => return Ok(contents),
                // end records that are not the file's last commit
                // (damaged, or a map's bytes that look like them): the walk
                // decides
                Ok(None) | Err(Error::Format(_)) => {}
                Err(other) => return Err(other),
            }
        }
        Self::recover(file, file_len, id, &json)
    }

    /// The contents a complete commit describes, `None` when the end
    /// record is not one of blockmap's.
    fn committed(file: &File, file_len: u64, id: &str, end: &zip::End) -> Result<Option<Contents>> {
        let mut words = end.comment.split(' ');
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
        let slots = parse_index(&bytes, count, index_at)?;
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
        // the central directory is read only by a writer that appends
        Ok(Some(Contents {
            id: id.to_string(),
            slots,
            committed: true,
            entries: Vec::new(),
            end: file_len,
        }))
    }

    /// Walk the records from the start of the file, keeping every complete
    /// map entry (a file whose last commit was interrupted).
    fn recover(file: &File, file_len: u64, id: String, json: &LocalHeader) -> Result<Contents> {
        let mut entries = vec![Central {
            name: JSON_NAME.to_string(),
            crc: json.crc,
            size: json.size,
            offset: 0,
        }];
        let mut slots = Vec::new();
        let mut at = json.len + json.size;
        let mut end = at;
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
                if header.name == map_name(slots.len() as u64) && header.size > 0 {
                    slots.push(Slot {
                        offset: data,
                        len: header.size,
                    });
                    entries.push(Central {
                        name: header.name,
                        crc: header.crc,
                        size: header.size,
                        offset: at,
                    });
                } else if header.name != INDEX_NAME {
                    break;
                }
                at = data + header.size;
                end = at;
                continue;
            }
            // the records of an earlier commit: skipped
            let Some(len) = zip::skipped_record_len(signature, &head) else {
                break;
            };
            match at.checked_add(len) {
                Some(next) if next <= file_len => {
                    at = next;
                    end = at;
                }
                _ => break,
            }
        }
        Ok(Contents {
            id,
            slots,
            committed: false,
            entries,
            end,
        })
    }
}

/// The slots of an index entry's data: `(count, 2)` little-endian `uint64`,
/// each map's data within the file before the index (at `limit`), 64-byte
/// aligned, one after the other.
fn parse_index(bytes: &[u8], count: u64, limit: u64) -> Result<Vec<Slot>> {
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
    let mut slots = Vec::new();
    slots.try_reserve_exact(count)?;
    let mut previous_end = 0u64;
    for row in data.chunks_exact(16) {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(&row[..8]);
        let offset = u64::from_le_bytes(raw);
        raw.copy_from_slice(&row[8..]);
        let len = u64::from_le_bytes(raw);
        let end = offset
            .checked_add(len)
            .ok_or_else(|| bad("a map's range"))?;
        if len == 0 || offset < previous_end || end > limit || offset % ALIGNMENT as u64 != 0 {
            return Err(bad("a map's range"));
        }
        previous_end = end;
        slots.push(Slot { offset, len });
    }
    Ok(slots)
}

/// A dataset opened for reading: the file mapped, and where its maps lie.
#[derive(Debug)]
pub struct Dataset {
    path: PathBuf,
    mapping: Buffer,
    contents: Contents,
    /// the CRC32 of each map's archive, read once when first asked for
    crcs: std::sync::OnceLock<Vec<u32>>,
}

impl Dataset {
    /// Open `path`, mapping it read-only or privately (`mode`).
    pub fn open(path: &Path, mode: MapMode) -> Result<Dataset> {
        let file = io::open_regular(path)?;
        let file_len = file
            .metadata()
            .map_err(io_error(path, "cannot read"))?
            .len();
        let contents = Contents::read(&file, file_len)
            .map_err(|e| e.context(format!("'{}'", path.display())))?;
        let mapping = Buffer::map_file(&file, mode).map_err(|e| match e {
            Error::Io { source, .. } => {
                Error::io(format!("cannot map '{}'", path.display()), source)
            }
            other => other,
        })?;
        if (mapping.len() as u64) < contents.slots.last().map_or(0, |s| s.offset + s.len) {
            return Err(Error::format(format!(
                "'{}' changed while it was opened",
                path.display()
            )));
        }
        Ok(Dataset {
            path: path.to_path_buf(),
            mapping,
            contents,
            crcs: std::sync::OnceLock::new(),
        })
    }

    /// Its identity (kept through appends).
    pub fn id(&self) -> &str {
        &self.contents.id
    }

    /// Number of maps.
    pub fn len(&self) -> usize {
        self.contents.slots.len()
    }

    /// Whether the file ends with a complete commit.
    pub fn committed(&self) -> bool {
        self.contents.committed
    }

    /// Where each map lies.
    #[cfg(test)]
    pub fn slots(&self) -> &[Slot] {
        &self.contents.slots
    }

    /// Keep the first `count` maps only: a reference reopened in another
    /// process sees what its sender saw, although the file may have grown.
    pub fn keep_first(&mut self, count: usize) -> Result<()> {
        if count > self.len() {
            return Err(Error::invalid(format!(
                "'{}' holds {} maps, fewer than the {count} asked for",
                self.path.display(),
                self.len()
            )));
        }
        self.contents.slots.truncate(count);
        Ok(())
    }

    /// Where map `i` lies, a position the dataset's `position` gave.
    pub fn slot(&self, i: usize) -> Slot {
        self.contents.slots[i]
    }

    /// Whether map `i`'s archive hashes to the CRC32 its central directory
    /// (or its local header, in a recovered file) holds.
    pub fn archive_intact(&self, i: usize) -> Result<bool> {
        let crc = self.crcs()?[i];
        let archive = self.archive_at(i)?;
        let hashed = super::crc32_of_mapped(archive.raw(), |_| {})?;
        self.mapping.check_intact()?;
        Ok(hashed == crc)
    }

    /// Check every map: its archive against the CRC32 its central
    /// directory holds, each entry of the archive against its own, and the
    /// map loaded; `problem` is given one line per problem.
    pub fn verify(&self, problem: &mut dyn FnMut(String)) -> Result<()> {
        if let Err(e) = self.crcs() {
            problem(format!("its central directory: {e}"));
        }
        for i in 0..self.len() {
            crate::interrupt::check()?;
            let at = self.contents.slots[i].offset;
            if self.crcs.get().is_some() && !self.archive_intact(i)? {
                problem(format!(
                    "map {i} (archive at byte {at}): its bytes do not match their CRC32"
                ));
            }
            let archive = self.archive_at(i)?;
            match io::load_buffer_selected(archive, Kind::Tensor, true, None) {
                Ok(_) => {}
                Err(e @ (Error::Io { .. } | Error::Interrupted | Error::OutOfMemory(_))) => {
                    return Err(e)
                }
                Err(e) => problem(format!("map {i} (archive at byte {at}): {e}")),
            }
        }
        Ok(())
    }

    /// The archive of map `i`, a position the dataset's `position` gave.
    fn archive_at(&self, i: usize) -> Result<Buffer> {
        let slot = self.contents.slots[i];
        let (offset, len) = (usize::try_from(slot.offset), usize::try_from(slot.len));
        match (offset, len) {
            (Ok(offset), Ok(len)) => self.mapping.slice(offset, len),
            _ => Err(Error::invalid("map too large for this machine")),
        }
    }

    /// Map `i`, viewing the mapping (its labels in memory they own), with
    /// only the blocks whose keys match `keys` when given.
    pub fn get(&self, i: usize, keys: Option<&Labels>) -> Result<TensorMap> {
        let archive = self.archive_at(i)?;
        match io::load_buffer_selected(archive, Kind::Tensor, false, keys) {
            Ok(Data::Tensor(map)) => Ok(map),
            Ok(_) => Err(Error::internal("a dataset map loaded as something else")),
            Err(e) => Err(e.context(format!("map {i} of '{}'", self.path.display()))),
        }
    }

    /// The CRC32 of each map's archive (the content checksums its zip
    /// entries carry): from the central directory of the commit that was
    /// opened (read from the mapping, once), or from the local headers a
    /// recovered file was walked through.
    pub fn crcs(&self) -> Result<&[u32]> {
        if let Some(crcs) = self.crcs.get() {
            return Ok(crcs);
        }
        let entries = if self.contents.committed {
            let file_len = self.contents.end;
            // the mapping may be written by another program: the ranges
            // parsed are copied first (the aliasing rule, buffer/mod.rs)
            let bytes = self.mapping.raw();
            let bad = || Error::format(format!("'{}': bad central directory", self.path.display()));
            let end_at = usize::try_from(file_len).map_err(|_| bad())?;
            let whole = bytes.get(0, end_at).ok_or_else(bad)?;
            let tail_len = whole
                .len()
                .min(zip::END_LEN + zip::ZIP64_END_LEN + zip::ZIP64_LOCATOR_LEN + 0xFFFF);
            let tail = whole
                .get(whole.len() - tail_len, tail_len)
                .ok_or_else(bad)?
                .to_vec()?;
            let end = zip::parse_end(&tail, file_len).ok_or_else(bad)?;
            let start = usize::try_from(end.cd_offset).map_err(|_| bad())?;
            let len = usize::try_from(end.cd_size).map_err(|_| bad())?;
            let directory = whole.get(start, len).ok_or_else(bad)?.to_vec()?;
            self.mapping.check_intact()?;
            zip::parse_central(&directory, end.count)?
        } else {
            self.contents.entries.clone()
        };
        let slots = &self.contents.slots;
        let mut crcs = Vec::new();
        crcs.try_reserve_exact(slots.len())?;
        let maps = entries
            .iter()
            .filter(|entry| entry.name.starts_with("maps/"));
        for (i, entry) in maps.enumerate() {
            let Some(slot) = slots.get(i) else { break };
            if entry.name != map_name(i as u64)
                || entry.size != slot.len
                || entry.offset >= slot.offset
            {
                return Err(Error::format(format!(
                    "'{}': its central directory does not match its index (map {i})",
                    self.path.display()
                )));
            }
            crcs.push(entry.crc);
        }
        if crcs.len() != slots.len() {
            return Err(Error::format(format!(
                "'{}': its central directory lists {} of its {} maps",
                self.path.display(),
                crcs.len(),
                slots.len()
            )));
        }
        Ok(self.crcs.get_or_init(|| crcs))
    }

    /// A CRC32 of the first `count` maps' places in the file and of their
    /// content checksums (the CRC32 of each map's archive): what a
    /// reference to this dataset checks the file it opens against, so that
    /// it gives the maps that were pickled or fails. O(count), once per
    /// open dataset for the content checksums.
    pub fn checksum(&self, count: usize) -> Result<u32> {
        let slots = self.contents.slots.get(..count).ok_or_else(|| {
            Error::invalid(format!("{count} maps asked of a dataset of {}", self.len()))
        })?;
        let crcs = self.crcs()?;
        let mut hasher = crc32fast::Hasher::new();
        for (slot, crc) in slots.iter().zip(crcs) {
            hasher.update(&slot.offset.to_le_bytes());
            hasher.update(&slot.len.to_le_bytes());
            hasher.update(&crc.to_le_bytes());
        }
        Ok(hasher.finalize())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::TempDir;

    /// A stored version-1 file of tests/data/datasets/.
    fn stored(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/datasets")
            .join(name)
    }

    #[test]
    fn stored_files_open() {
        for (name, count, committed) in [
            ("v1-committed.bmds", 3, true),
            ("v1-appended.bmds", 4, true),
            ("v1-recovered.bmds", 3, false),
            ("v1-empty.bmds", 0, true),
        ] {
            let dataset = Dataset::open(&stored(name), MapMode::ReadOnly).unwrap();
            assert_eq!(
                (dataset.len(), dataset.committed()),
                (count, committed),
                "{name}"
            );
            for i in 0..count {
                let map = dataset.get(i, None).unwrap();
                assert!(!map.blocks().is_empty());
                assert_eq!(dataset.slots()[i].offset % ALIGNMENT as u64, 0);
            }
            dataset.checksum(count).unwrap();
        }
    }

    #[test]
    fn a_file_cut_anywhere_opens_with_every_complete_map() {
        let path = stored("v1-committed.bmds");
        let whole = Dataset::open(&path, MapMode::ReadOnly).unwrap();
        let ends: Vec<u64> = whole.slots().iter().map(|s| s.offset + s.len).collect();
        let maps: Vec<TensorMap> = (0..3).map(|i| whole.get(i, None).unwrap()).collect();
        let bytes = std::fs::read(&path).unwrap();
        let dir = TempDir::new("v1-cut");
        let cut_path = dir.join("data");
        let json_end = whole.slots()[0].offset - 100;
        for cut in (usize::try_from(json_end).unwrap()..=bytes.len()).step_by(7) {
            std::fs::write(&cut_path, &bytes[..cut]).unwrap();
            let dataset = Dataset::open(&cut_path, MapMode::ReadOnly)
                .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            let complete = ends.iter().filter(|&&end| end <= cut as u64).count();
            assert_eq!(dataset.len(), complete, "cut at {cut}");
            for (i, map) in maps.iter().take(complete).enumerate() {
                assert_eq!(&dataset.get(i, None).unwrap(), map, "cut at {cut}");
            }
        }
    }

    #[test]
    fn hostile_files_are_refused_with_errors() {
        let good = std::fs::read(stored("v1-committed.bmds")).unwrap();
        let dir = TempDir::new("v1-hostile");
        let bad_path = dir.join("data");
        // single bytes flipped: an error or a dataset, never a panic
        for at in (0..good.len()).step_by(13) {
            let mut bytes = good.clone();
            bytes[at] ^= 0x5A;
            std::fs::write(&bad_path, &bytes).unwrap();
            if let Ok(dataset) = Dataset::open(&bad_path, MapMode::ReadOnly) {
                for i in 0..dataset.len() {
                    let _ = dataset.get(i, None);
                }
            }
        }
        std::fs::write(&bad_path, b"not a dataset").unwrap();
        assert!(Dataset::open(&bad_path, MapMode::ReadOnly).is_err());
    }
}
