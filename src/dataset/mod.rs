//! Datasets: many `TensorMap`s in one file, read by mapping it, appended to
//! without rewriting it (see docs/format.md, "Datasets").
//!
//! A dataset file is a zip archive of STORED entries, in this order:
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
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::buffer::{Buffer, MapMode, ALIGNMENT};
use crate::data::{Data, DataRef, Kind};
use crate::error::{Error, Result};
use crate::io;
use crate::labels::Labels;
use crate::tensor::TensorMap;

use crate::io::zip::{self, Central, LocalHeader};

mod lock;
pub use lock::Timeout;

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

/// Where one map lies in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// first byte of its `.mts` archive
    pub offset: u64,
    /// bytes of its `.mts` archive
    pub len: u64,
}

/// A random identity (32 hex digits) for a new dataset.
fn new_id() -> String {
    use std::fmt::Write as _;
    use std::hash::{BuildHasher, Hasher};
    let mut digits = String::with_capacity(32);
    for round in 0..2u64 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(round);
        hasher.write_u32(std::process::id());
        if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            hasher.write_u128(now.as_nanos());
        }
        let _ = write!(digits, "{:016x}", hasher.finish());
    }
    digits
}

fn json_text(id: &str) -> String {
    format!("{{\"format\": \"blockmap dataset\", \"version\": {VERSION}, \"id\": \"{id}\"}}")
}

fn io_error(path: &Path, what: &str) -> impl FnOnce(std::io::Error) -> Error {
    let message = format!("{what} '{}'", path.display());
    move |e| Error::io(message, e)
}

/// Read `len` bytes at `offset` (fewer at the end of the file); callers
/// bound `len` by the file's length.
fn read_at(file: &File, offset: u64, len: usize) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len)?;
    bytes.resize(len, 0);
    let mut done = 0;
    while done < len {
        match file.read_at(&mut bytes[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => crate::interrupt::check()?,
            Err(e) => return Err(Error::io("reading the dataset file", e)),
        }
    }
    bytes.truncate(done);
    Ok(bytes)
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
            if let Some(contents) = Self::committed(file, file_len, &id, &end)? {
                return Ok(contents);
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

    /// The entries of the central directory of a committed file (read for
    /// a writer that appends).
    fn read_entries(file: &File, file_len: u64) -> Result<Vec<Central>> {
        let tail_len = file_len
            .min((zip::END_LEN + zip::ZIP64_END_LEN + zip::ZIP64_LOCATOR_LEN + 0xFFFF) as u64);
        let tail = read_at(
            file,
            file_len - tail_len,
            usize::try_from(tail_len).unwrap_or(0),
        )?;
        let end = zip::parse_end(&tail, file_len)
            .ok_or_else(|| Error::format("dataset file: no end record"))?;
        if end
            .cd_offset
            .checked_add(end.cd_size)
            .is_none_or(|e| e > file_len)
        {
            return Err(Error::format(
                "dataset file: the central directory lies outside it",
            ));
        }
        let bytes = read_at(
            file,
            end.cd_offset,
            usize::try_from(end.cd_size)
                .map_err(|_| Error::format("central directory too large"))?,
        )?;
        let mut entries = zip::parse_central(&bytes, end.count)?;
        // the index of this commit is not listed again: the next one is
        entries.retain(|entry| entry.name != INDEX_NAME);
        Ok(entries)
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

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its identity (kept through appends).
    pub fn id(&self) -> &str {
        &self.contents.id
    }

    /// Number of maps.
    pub fn len(&self) -> usize {
        self.contents.slots.len()
    }

    /// Whether it holds no map.
    pub fn is_empty(&self) -> bool {
        self.contents.slots.is_empty()
    }

    /// Whether the file ends with a complete commit.
    pub fn committed(&self) -> bool {
        self.contents.committed
    }

    /// Where each map lies.
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

    /// The position of map `index` (Python's rule: a negative index counts
    /// from the end), or an [`Error::OutOfRange`]: the one bounds check of
    /// the indices of a dataset's maps, which the binding passes through.
    pub fn position(&self, index: i64) -> Result<usize> {
        let len = self.len();
        let position = if index < 0 {
            usize::try_from(index.unsigned_abs())
                .ok()
                .and_then(|back| len.checked_sub(back))
        } else {
            usize::try_from(index).ok().filter(|&i| i < len)
        };
        position.ok_or_else(|| {
            Error::OutOfRange(format!(
                "map {index} is out of range for a dataset of {len}"
            ))
        })
    }

    /// Where map `index` lies (see [`Dataset::position`]).
    pub fn slot(&self, index: i64) -> Result<Slot> {
        Ok(self.contents.slots[self.position(index)?])
    }

    /// The `.mts` archive of map `index` (see [`Dataset::position`]),
    /// viewing the mapping.
    pub fn archive(&self, index: i64) -> Result<Buffer> {
        self.archive_at(self.position(index)?)
    }

    /// The archive of map `i`, a position [`Dataset::position`] gave.
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
    pub fn get(&self, index: i64, keys: Option<&Labels>) -> Result<TensorMap> {
        let i = self.position(index)?;
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

/// A writer adding maps to a dataset file (see the module docs).
///
/// One writer at a time per file, across processes: a writer holds the
/// file's lock (`lock.rs`) from its creation to its close. A new dataset
/// ([`Writer::create`]) is built in a temporary file beside its path and
/// put in place at its first commit (its close, usually): until then the
/// path keeps what it held, and a writer that fails or is dropped leaves
/// it untouched and nothing behind.
#[derive(Debug)]
pub struct Writer {
    path: PathBuf,
    /// the file written to, once it is at `target`
    file: Option<File>,
    /// a new dataset not in place yet: the file written to
    pending: Option<io::replace::Temporary>,
    /// the file a pending dataset replaces, locked (kept off other
    /// writers until it is replaced)
    replaced: Option<File>,
    /// `path` after its symlinks
    target: PathBuf,
    timeout: Timeout,
    /// the process that opened the writer: a forked child's copy of it
    /// neither writes nor lets the lock go
    pid: u32,
    id: String,
    entries: Vec<Central>,
    slots: Vec<Slot>,
    /// where the next entry goes (the end of the file's complete content)
    end: u64,
    /// reused for the archives of small maps
    scratch: Vec<u8>,
}

/// Maps whose archive is at most this large are built in memory and
/// written in one piece; larger ones are streamed from their arrays.
const IN_MEMORY: usize = 4 << 20;

/// Entries from this size on get a ZIP64 local header.
const ZIP64_FROM: u64 = 0xFFFF_0000;

/// A new temporary file beside `target` holding the header of a new,
/// empty dataset, locked; with the header's central entry and where it ends.
fn new_temporary(
    path: &Path,
    target: &Path,
) -> Result<(io::replace::Temporary, String, Central, u64)> {
    let mut temporary = io::replace::Temporary::beside(target)?;
    let id = new_id();
    let json = json_text(&id);
    let crc = crc32fast::hash(json.as_bytes());
    let header = zip::local_header(0, JSON_NAME, crc, json.len() as u64, false, 1)?;
    let file = temporary.file()?;
    file.write_all(&header)
        .and_then(|()| file.write_all(json.as_bytes()))
        .map_err(io_error(path, "cannot write"))?;
    // no one else can reach it yet: taken at once
    lock::lock(file, path, Some(std::time::Duration::ZERO))?;
    let end = (header.len() + json.len()) as u64;
    let entry = Central {
        name: JSON_NAME.to_string(),
        crc,
        size: json.len() as u64,
        offset: 0,
    };
    Ok((temporary, id, entry, end))
}

impl Writer {
    /// A new, empty dataset at `path`, replacing what is there atomically
    /// at the first commit (see the type's docs); the file replaced is
    /// locked first, waiting `timeout` at most for its writer.
    pub fn create(path: &Path, timeout: Timeout) -> Result<Writer> {
        let target = io::replace::resolve(path)?;
        let replaced = lock::open_locked(&target, false, timeout)?;
        Writer::new_empty(path, target, replaced, timeout)
    }

    /// A writer of a new, empty dataset built beside `target`, committed
    /// once (an empty dataset is a complete one) and not yet in place;
    /// `replaced` is the locked file it will replace, if any.
    fn new_empty(
        path: &Path,
        target: PathBuf,
        replaced: Option<File>,
        timeout: Timeout,
    ) -> Result<Writer> {
        let (temporary, id, entry, end) = new_temporary(path, &target)?;
        let mut writer = Writer {
            path: path.to_path_buf(),
            file: None,
            pending: Some(temporary),
            replaced,
            target,
            timeout,
            pid: std::process::id(),
            id,
            entries: vec![entry],
            slots: Vec::new(),
            end,
            scratch: Vec::new(),
        };
        writer.write_commit()?;
        Ok(writer)
    }

    /// Append to the dataset at `path` (created when missing), waiting
    /// `timeout` at most for another writer of it. An interrupted earlier
    /// write leaves an incomplete tail, cut off first.
    pub fn append(path: &Path, timeout: Timeout) -> Result<Writer> {
        let target = io::replace::resolve(path)?;
        let file = loop {
            if let Some(file) = lock::open_locked(&target, true, timeout)? {
                break file;
            }
            // missing: a new, empty dataset, put there unless another
            // writer put one first (then that one is appended to)
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
        let mut contents = Contents::read(&file, file_len).map_err(in_file)?;
        if contents.committed {
            contents.entries = Contents::read_entries(&file, file_len).map_err(in_file)?;
            contents.end = file_len;
        } else {
            file.set_len(contents.end)
                .map_err(io_error(path, "cannot write"))?;
        }
        let listed = contents.entries.len() == contents.slots.len() + 1
            && contents.entries[0].name == JSON_NAME
            && contents.entries[1..]
                .iter()
                .enumerate()
                .all(|(i, entry)| entry.name == map_name(i as u64));
        if !listed {
            return Err(in_file(Error::format(
                "dataset file: its central directory does not list its maps",
            )));
        }
        Ok(Writer {
            path: path.to_path_buf(),
            file: Some(file),
            pending: None,
            replaced: None,
            target,
            timeout,
            pid: std::process::id(),
            id: contents.id,
            entries: contents.entries,
            slots: contents.slots,
            end: contents.end,
            scratch: Vec::new(),
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

    /// Whether the dataset is at its path (false: a new dataset not
    /// committed yet, or a closed writer's).
    pub fn is_in_place(&self) -> bool {
        self.file.is_some()
    }

    /// Number of maps in the dataset so far.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether it holds no map yet.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The dataset's identity.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Add `map` at the end. When this returns, the map is in the file: a
    /// process killed from then on leaves a file that opens with it.
    pub fn write(&mut self, map: &TensorMap) -> Result<()> {
        io::portable::check(DataRef::Tensor(map))?;
        let name = map_name(self.slots.len() as u64);
        let bound = io::save_size_bound(DataRef::Tensor(map));
        let at = self.end;
        let mut scratch = std::mem::take(&mut self.scratch);
        let file = self.file()?;
        let (data_offset, len, crc) = if bound <= IN_MEMORY {
            // built in memory, then written with its header at once: the
            // header's sizes describe data that is complete once the file
            // is as long as they say
            scratch.clear();
            scratch.try_reserve(bound)?;
            scratch.resize(bound, 0);
            let len = io::save_into(
                crate::buffer::FixedWriter::over_bytes(&mut scratch),
                DataRef::Tensor(map),
            )?;
            let archive = &scratch[..len];
            let crc = crc32fast::hash(archive);
            let header = zip::local_header(at, &name, crc, len as u64, false, ALIGNMENT as u64)?;
            let mut piece = Vec::with_capacity(header.len() + len);
            piece.extend_from_slice(&header);
            piece.extend_from_slice(archive);
            file.write_all_at(&piece, at)
                .map_err(io_error(&self.path, "cannot write"))?;
            (at + header.len() as u64, len as u64, crc)
        } else {
            // a header without sizes, the archive streamed from the
            // arrays, its CRC read back, then the sizes: until they are
            // patched in, the entry reads as incomplete
            let zip64 = bound as u64 >= ZIP64_FROM;
            let header = zip::local_header(at, &name, 0, 0, zip64, ALIGNMENT as u64)?;
            file.write_all_at(&header, at)
                .map_err(io_error(&self.path, "cannot write"))?;
            let data_offset = at + header.len() as u64;
            let writer = BufWriter::with_capacity(
                1 << 20,
                OffsetWriter {
                    file,
                    base: data_offset,
                    position: 0,
                    len: 0,
                },
            );
            let writer = io::save(writer, DataRef::Tensor(map))?;
            let writer = writer.into_inner().map_err(|e| {
                Error::io(
                    format!("cannot write '{}'", self.path.display()),
                    e.into_error(),
                )
            })?;
            let len = writer.len;
            let crc =
                crc_of(file, data_offset, len).map_err(io_error(&self.path, "cannot read"))?;
            for (offset, bytes) in zip::size_fields(&name, crc, len, zip64) {
                file.write_all_at(&bytes, at + offset as u64)
                    .map_err(io_error(&self.path, "cannot write"))?;
            }
            (data_offset, len, crc)
        };
        self.scratch = scratch;
        self.entries.try_reserve(1)?;
        self.slots.try_reserve(1)?;
        self.entries.push(Central {
            name,
            crc,
            size: len,
            offset: at,
        });
        self.slots.push(Slot {
            offset: data_offset,
            len,
        });
        self.end = data_offset + len;
        Ok(())
    }

    /// Write the index, the central directory and the end records after
    /// the maps, and sync the file: opening it then reads the index alone.
    /// A new dataset is put in place at its path (replacing what was
    /// there) at its first commit.
    pub fn commit(&mut self) -> Result<()> {
        self.write_commit()?;
        if self.pending.is_some() {
            self.publish()?;
        }
        Ok(())
    }

    /// Put the pending new dataset at its path, replacing the file there
    /// (locked first: the one locked since the writer was made, or the one
    /// there now when another program replaced it meanwhile).
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
        // the lock of the new file was taken when it was made: it comes
        // into place locked
        self.file = Some(temporary.replace_keeping(&self.target, true)?);
        if let Some(replaced) = self.replaced.take() {
            lock::unlock(&replaced);
        }
        Ok(())
    }

    /// Give up a new dataset not yet in place: its path keeps what it
    /// held, and nothing is left behind. A dataset already in place (an
    /// append, or after a commit) is committed and closed instead.
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
        let file = self.file()?;
        let count = self.slots.len();
        let mut index =
            io::npy::write_header(&io::npy::simple_descr(crate::DType::U8), &[count, 2])?;
        index.try_reserve(count * 16)?;
        for slot in &self.slots {
            index.extend_from_slice(&slot.offset.to_le_bytes());
            index.extend_from_slice(&slot.len.to_le_bytes());
        }
        let index_at = self.end;
        let crc = crc32fast::hash(&index);
        let header = zip::local_header(
            index_at,
            INDEX_NAME,
            crc,
            index.len() as u64,
            false,
            ALIGNMENT as u64,
        )?;
        let cd_offset = index_at + (header.len() + index.len()) as u64;
        let mut tail = Vec::new();
        tail.try_reserve(header.len() + index.len() + (self.entries.len() + 1) * 80 + 200)?;
        tail.extend_from_slice(&header);
        tail.extend_from_slice(&index);
        let index_entry = Central {
            name: INDEX_NAME.to_string(),
            crc,
            size: index.len() as u64,
            offset: index_at,
        };
        for entry in self.entries.iter().chain(std::iter::once(&index_entry)) {
            zip::central_header(entry, &mut tail)?;
        }
        let cd_size = tail.len() as u64 - (cd_offset - index_at);
        let comment = format!("{COMMENT_PREFIX} {VERSION} {} {index_at} {count}", self.id);
        let end = zip::end_records(
            self.entries.len() as u64 + 1,
            cd_size,
            cd_offset,
            cd_offset + cd_size,
            &comment,
        )?;
        tail.extend_from_slice(&end);
        file.write_all_at(&tail, index_at)
            .and_then(|()| file.sync_data())
            .map_err(io_error(&self.path, "cannot write"))?;
        // the next write goes after this commit: it is never rewritten
        self.end = index_at + tail.len() as u64;
        Ok(())
    }

    /// Commit and close, letting the lock go; writing afterwards is an
    /// error.
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
            // a forked child's copy: the lock, and a pending temporary
            // file, are its parent's
            if let Some(temporary) = self.pending.take() {
                std::mem::forget(temporary);
            }
            return;
        }
        // a pending new dataset is dropped with its temporary file (its
        // path keeps what it held); the locks go with their descriptors,
        // let go first in case a forked child holds copies of them
        self.pending = None;
        for file in [self.file.take(), self.replaced.take()]
            .into_iter()
            .flatten()
        {
            lock::unlock(&file);
        }
    }
}

/// The CRC32 of `len` bytes of `file` from `offset`, read back (from the
/// page cache, just written) in pieces.
fn crc_of(file: &File, offset: u64, len: u64) -> std::io::Result<u32> {
    let mut hasher = crc32fast::Hasher::new();
    let mut piece = vec![0u8; 1 << 20];
    let mut done = 0u64;
    while done < len {
        let want = usize::try_from((len - done).min(piece.len() as u64)).unwrap_or(piece.len());
        let n = file.read_at(&mut piece[..want], offset + done)?;
        if n == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        hasher.update(&piece[..n]);
        done += n as u64;
    }
    Ok(hasher.finalize())
}

/// `Write + Seek` at an offset of a file, with positional writes (the
/// archive of one map, from where its entry's data starts).
struct OffsetWriter<'a> {
    file: &'a File,
    base: u64,
    position: u64,
    len: u64,
}

impl Write for OffsetWriter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write_at(data, self.base + self.position)?;
        self.position += n as u64;
        self.len = self.len.max(self.position);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Seek for OffsetWriter<'_> {
    fn seek(&mut self, from: SeekFrom) -> std::io::Result<u64> {
        let position = match from {
            SeekFrom::Start(offset) => Some(offset),
            SeekFrom::Current(delta) => self.position.checked_add_signed(delta),
            SeekFrom::End(delta) => self.len.checked_add_signed(delta),
        };
        self.position = position.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start")
        })?;
        Ok(self.position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    /// A directory of its own for a test, removed with everything in it
    /// when dropped (also when the test fails).
    struct Scratch(PathBuf);

    impl Scratch {
        /// The dataset file's path, in the directory.
        fn path(&self) -> PathBuf {
            self.0.join("data")
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("blockmap-dataset-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// A position as the index `get` takes.
    fn index(i: usize) -> i64 {
        i64::try_from(i).unwrap()
    }

    fn maps() -> Vec<TensorMap> {
        vec![
            fixtures::small_map(),
            fixtures::map_with_an_empty_block(),
            fixtures::tensor(crate::DType::F4),
        ]
    }

    #[test]
    fn maps_written_read_back_after_commit_and_append() {
        let path_dir = scratch("round-trip");
        let path = path_dir.path();
        let maps = maps();
        let mut writer = Writer::create(&path, None).unwrap();
        writer.write(&maps[0]).unwrap();
        writer.write(&maps[1]).unwrap();
        writer.close().unwrap();
        let first = Dataset::open(&path, MapMode::ReadOnly).unwrap();
        assert!(first.committed());
        assert_eq!(first.len(), 2);
        let mut writer = Writer::append(&path, None).unwrap();
        assert_eq!(writer.id(), first.id());
        writer.write(&maps[2]).unwrap();
        writer.close().unwrap();
        let all = Dataset::open(&path, MapMode::ReadOnly).unwrap();
        assert_eq!((all.len(), all.id()), (3, first.id()));
        for (i, map) in maps.iter().enumerate() {
            assert_eq!(&all.get(index(i), None).unwrap(), map);
            assert_eq!(all.slots()[i].offset % ALIGNMENT as u64, 0);
        }
        // the reader opened before the append still reads its two maps
        assert_eq!(&first.get(1, None).unwrap(), &maps[1]);
        assert!(first.get(2, None).is_err());
        assert_eq!(first.checksum(2).unwrap(), all.checksum(2).unwrap());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn indices_are_checked_once_python_style() {
        let path_dir = scratch("indices");
        let path = path_dir.path();
        let maps = maps();
        let mut writer = Writer::create(&path, None).unwrap();
        for map in &maps {
            writer.write(map).unwrap();
        }
        writer.close().unwrap();
        let mut dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
        let len = index(maps.len());
        assert_eq!(dataset.position(-1).unwrap(), maps.len() - 1);
        assert_eq!(dataset.position(-len).unwrap(), 0);
        assert_eq!(&dataset.get(-1, None).unwrap(), maps.last().unwrap());
        for index in [len, -len - 1, i64::MAX, i64::MIN] {
            let error = dataset.get(index, None).unwrap_err();
            assert!(matches!(error, Error::OutOfRange(_)), "{error}");
            assert_eq!(
                error.to_string(),
                format!("map {index} is out of range for a dataset of {len}")
            );
            assert!(dataset.archive(index).is_err());
            assert!(dataset.slot(index).is_err());
        }
        // a view of the first maps: the others are out of its range
        assert!(dataset.keep_first(maps.len() + 1).is_err());
        dataset.keep_first(1).unwrap();
        assert_eq!(&dataset.get(-1, None).unwrap(), &maps[0]);
        let error = dataset.get(1, None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "map 1 is out of range for a dataset of 1"
        );
    }

    #[test]
    fn a_file_cut_anywhere_opens_with_every_complete_map() {
        let path_dir = scratch("cut");
        let path = path_dir.path();
        let maps = maps();
        let mut writer = Writer::create(&path, None).unwrap();
        let mut ends = vec![];
        for map in &maps {
            writer.write(map).unwrap();
            ends.push(writer.end);
        }
        writer.close().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let cut_path_dir = scratch("cut-copy");
        let cut_path = cut_path_dir.path();
        let json_end = Dataset::open(&path, MapMode::ReadOnly).unwrap().slots()[0].offset - 100;
        for cut in usize::try_from(json_end).unwrap()..=bytes.len() {
            std::fs::write(&cut_path, &bytes[..cut]).unwrap();
            let dataset = Dataset::open(&cut_path, MapMode::ReadOnly)
                .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            let complete = ends.iter().filter(|&&end| end <= cut as u64).count();
            assert_eq!(dataset.len(), complete, "cut at {cut}");
            for (i, map) in maps.iter().take(complete).enumerate() {
                assert_eq!(&dataset.get(index(i), None).unwrap(), map, "cut at {cut}");
            }
            if cut % 97 == 0 || cut == bytes.len() - 1 {
                // appending to it cuts the incomplete tail off first
                let mut writer = Writer::append(&cut_path, None).unwrap();
                writer.write(&maps[0]).unwrap();
                writer.close().unwrap();
                let appended = Dataset::open(&cut_path, MapMode::ReadOnly).unwrap();
                assert!(appended.committed());
                assert_eq!(appended.len(), complete + 1);
                assert_eq!(&appended.get(index(complete), None).unwrap(), &maps[0]);
            }
        }
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&cut_path);
    }

    #[test]
    fn hostile_files_are_refused_with_errors() {
        let path_dir = scratch("hostile");
        let path = path_dir.path();
        let mut writer = Writer::create(&path, None).unwrap();
        writer.write(&fixtures::small_map()).unwrap();
        writer.close().unwrap();
        let good = std::fs::read(&path).unwrap();
        let bad_path_dir = scratch("hostile-copy");
        let bad_path = bad_path_dir.path();
        // every single byte flipped: an error or a dataset, never a panic
        for at in (0..good.len()).step_by(3) {
            let mut bytes = good.clone();
            bytes[at] ^= 0x5A;
            std::fs::write(&bad_path, &bytes).unwrap();
            if let Ok(dataset) = Dataset::open(&bad_path, MapMode::ReadOnly) {
                for i in 0..dataset.len() {
                    let _ = dataset.get(index(i), None);
                }
            }
        }
        std::fs::write(&bad_path, b"not a dataset").unwrap();
        assert!(Dataset::open(&bad_path, MapMode::ReadOnly).is_err());
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&bad_path);
    }
}
