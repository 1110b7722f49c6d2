//! Datasets: many entries (each one `TensorMap`, or several named ones)
//! in one file, read by mapping it, appended to without rewriting it (see
//! docs/format.md, "Datasets").
//!
//! Files of format versions 2 and 3 (`v2/`, their bytes in
//! `v2/layout.rs`) are read and written (new files in version 3, appends
//! in their file's version); files of version 1 (`v1/`, a zip of `.mts`
//! archives) are read only. [`upgrade`] writes any of them as version 3, [`verify`]
//! checks any of them whole, [`inspect`] counts their commits and dead bytes.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::buffer::{Buffer, MapMode};
use crate::error::{Error, Result};
use crate::io;
use crate::labels::Labels;
use crate::tensor::TensorMap;

mod inspect;
mod lock;
mod v1;
mod v2;
mod verify;

pub use inspect::{inspect, Inspection, Layout};
pub use lock::Timeout;
pub use v2::{ColumnType, ColumnValue, Entry, Schema, Writer, SINGLE_FIELD};
pub use verify::{file_version, verify, Report};

/// Where one entry lies in the file: a range of its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// its first byte (version 1: of its `.mts` archive; versions 2 and
    /// 3: of its record's header)
    pub offset: u64,
    /// its bytes
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

/// The whole of `file` (opened from `path`) mapped in `mode`, its errors
/// naming the path.
fn map_file(path: &Path, file: &File, mode: MapMode) -> Result<Buffer> {
    Buffer::map_file(file, mode).map_err(|e| match e {
        Error::Io { source, .. } => Error::io(format!("cannot map '{}'", path.display()), source),
        other => other,
    })
}

fn io_error(path: &Path, what: &str) -> impl FnOnce(std::io::Error) -> Error {
    let message = format!("{what} '{}'", path.display());
    move |e| Error::io(message, e)
}

/// Read `len` bytes at `offset` (fewer at the end of the file); callers
/// bound `len` by the file's length. An offset past what a file can hold
/// (2**63 and more, which `pread` refuses) reads nothing, as one past the
/// file's end does.
fn read_at(file: &File, offset: u64, len: usize) -> Result<Vec<u8>> {
    let len = if i64::try_from(offset).is_ok() {
        len
    } else {
        0
    };
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len)?;
    bytes.resize(len, 0);
    let mut done = 0;
    while done < len {
        let Some(at) = offset
            .checked_add(done as u64)
            .filter(|&at| i64::try_from(at).is_ok())
        else {
            break;
        };
        match file.read_at(&mut bytes[done..], at) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => crate::interrupt::check()?,
            Err(e) => return Err(Error::io("reading the dataset file", e)),
        }
    }
    bytes.truncate(done);
    Ok(bytes)
}

/// The CRC32 of `bytes` of a file's mapping (memory another program may
/// write: hashed through copies), a MiB at a time, answering Ctrl-C
/// between pieces; `ahead(k)` is called before piece `k` (read-ahead
/// advice). What `verify` and `upgrade` check an entry against.
fn crc32_of_mapped(
    bytes: crate::buffer::RawBytes<'_>,
    mut ahead: impl FnMut(usize),
) -> Result<u32> {
    let mut hasher = crc32fast::Hasher::new();
    for (k, piece) in bytes.chunks(1 << 20).enumerate() {
        ahead(k);
        piece.for_each_chunk(|bytes| {
            hasher.update(bytes);
            Ok(())
        })?;
        crate::interrupt::check()?;
    }
    Ok(hasher.finalize())
}

#[derive(Debug)]
enum Inner {
    V1(v1::Dataset),
    V2(v2::Dataset),
}

/// A dataset opened for reading: the file mapped, and where its entries
/// lie.
#[derive(Debug)]
pub struct Dataset {
    path: PathBuf,
    inner: Inner,
}

impl Dataset {
    /// Open `path`, mapping it read-only or privately (`mode`).
    pub fn open(path: &Path, mode: MapMode) -> Result<Dataset> {
        let file = io::open_regular(path)?;
        let file_len = file
            .metadata()
            .map_err(io_error(path, "cannot read"))?
            .len();
        // a zip: version 1 (whose reader says when it is another zip)
        let inner = if io::zip::signature(&read_at(&file, 0, 4)?) == Some(io::zip::LOCAL) {
            Inner::V1(v1::Dataset::open(path, mode)?)
        } else {
            let mapping = map_file(path, &file, mode)?;
            Inner::V2(v2::Dataset::open(path, &file, file_len, mapping)?)
        };
        Ok(Dataset {
            path: path.to_path_buf(),
            inner,
        })
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The format version of its file (1, 2 or 3).
    pub fn version(&self) -> u32 {
        match &self.inner {
            Inner::V1(_) => v1::VERSION,
            Inner::V2(d) => d.version(),
        }
    }

    /// Its identity (kept through appends).
    pub fn id(&self) -> &str {
        match &self.inner {
            Inner::V1(d) => d.id(),
            Inner::V2(d) => d.id(),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        match &self.inner {
            Inner::V1(d) => d.len(),
            Inner::V2(d) => d.len(),
        }
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the file ends with a complete commit.
    pub fn committed(&self) -> bool {
        match &self.inner {
            Inner::V1(d) => d.committed(),
            Inner::V2(d) => d.committed(),
        }
    }

    /// What each entry holds (version 1: single maps, no columns; a
    /// version-2 file without entries yet: single maps).
    pub fn schema(&self) -> Schema {
        match &self.inner {
            Inner::V2(d) => d.schema().cloned().unwrap_or_else(single),
            Inner::V1(_) => single(),
        }
    }

    /// The file mapping (version 2 only: a version-1 dataset maps its file
    /// for itself).
    pub fn mapping(&self) -> Option<&Buffer> {
        match &self.inner {
            Inner::V1(_) => None,
            Inner::V2(d) => Some(d.mapping()),
        }
    }

    /// Ask the kernel to read entries `start..start + count` ahead
    /// (version 2; version 1 leaves the kernel's default read-ahead).
    pub fn prefetch(&self, start: usize, count: usize) {
        if let Inner::V2(d) = &self.inner {
            d.prefetch(start, count.min(self.len().saturating_sub(start)));
        }
    }

    /// Keep the first `count` entries only: a reference reopened in another
    /// process sees what its sender saw, although the file may have grown.
    pub fn keep_first(&mut self, count: usize) -> Result<()> {
        if count > self.len() {
            return Err(Error::invalid(format!(
                "'{}' holds {} maps, fewer than the {count} asked for",
                self.path.display(),
                self.len()
            )));
        }
        match &mut self.inner {
            Inner::V1(d) => d.keep_first(count),
            Inner::V2(d) => d.keep_first(count),
        }
        Ok(())
    }

    /// The position of entry `index` (Python's rule: a negative index
    /// counts from the end), or an [`Error::OutOfRange`]: the one bounds
    /// check of the indices of a dataset's entries.
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

    /// Where entry `index` lies (see [`Dataset::position`]).
    pub fn span(&self, index: i64) -> Result<Span> {
        match &self.inner {
            Inner::V1(d) => Ok(d.span(self.position(index)?)),
            Inner::V2(d) => Ok(d.span(self.position(index)?)),
        }
    }

    /// The map of the first field of entry `index` (a dataset of single
    /// maps: the map), viewing the mapping, with only the blocks whose keys
    /// match `keys` when given.
    pub fn get(&self, index: i64, keys: Option<&Labels>) -> Result<TensorMap> {
        self.get_field(index, 0, keys)
    }

    /// The map of field `field` (its position in the schema) of entry
    /// `index`.
    pub fn get_field(&self, index: i64, field: usize, keys: Option<&Labels>) -> Result<TensorMap> {
        match &self.inner {
            Inner::V1(d) if field == 0 => d.get(self.position(index)?, keys),
            Inner::V1(_) => Err(Error::invalid("a dataset of version 1 has one field")),
            Inner::V2(d) => {
                if field >= d.schema().map_or(1, |s| s.fields.len()) {
                    return Err(Error::invalid(format!("no field {field} in this dataset")));
                }
                d.get(self.position(index)?, field, keys)
            }
        }
    }

    /// Column `name`'s values, one per entry, as bits of their type.
    pub fn column(&self, name: &str) -> Result<(ColumnType, &[u64])> {
        match &self.inner {
            Inner::V2(d) => d.column(name)?.ok_or_else(|| {
                let mut names: Vec<&str> = d
                    .schema()
                    .map(|s| s.columns.iter().map(|c| c.0.as_str()).collect())
                    .unwrap_or_default();
                names.push("n_samples");
                Error::invalid(format!(
                    "no column '{name}' in '{}': its columns are {names:?}",
                    self.path.display(),
                ))
            }),
            Inner::V1(_) => Err(v1_has_no_columns(&self.path)),
        }
    }

    /// The sample count of field `field`'s first block, per entry.
    pub fn n_samples(&self, field: usize) -> Result<&[u64]> {
        match &self.inner {
            Inner::V2(d) if d.is_empty_schema() => Ok(&[]),
            Inner::V2(d) => d
                .n_samples(field)?
                .ok_or_else(|| Error::invalid(format!("no field {field} in this dataset"))),
            Inner::V1(_) => Err(v1_has_no_columns(&self.path)),
        }
    }

    /// Check entry `index` (a position) against the checksum of all its
    /// bytes, which reads do not (version 2 and 3: its payload's CRC32;
    /// version 1: its archive's, from the central directory): a
    /// [`Error::Format`] naming it when they differ.
    pub fn check_entry(&self, index: usize) -> Result<()> {
        let intact = match &self.inner {
            Inner::V1(d) => d.archive_intact(index)?,
            Inner::V2(d) => d.payload_intact(index)?,
        };
        if intact {
            return Ok(());
        }
        Err(Error::format(format!(
            "entry {index} of '{}' is damaged: its bytes do not match their CRC32",
            self.path.display()
        )))
    }

    /// A CRC32 of the first `count` entries' places in the file and of
    /// their content checksums: what a reference to this dataset checks
    /// the file it opens against.
    pub fn checksum(&self, count: usize) -> Result<u32> {
        match &self.inner {
            Inner::V1(d) => d.checksum(count),
            Inner::V2(d) => {
                if count > d.len() {
                    return Err(Error::invalid(format!(
                        "{count} maps asked of a dataset of {}",
                        d.len()
                    )));
                }
                Ok(d.checksum(count))
            }
        }
    }
}

fn single() -> Schema {
    Schema {
        single: true,
        fields: vec![SINGLE_FIELD.to_string()],
        columns: Vec::new(),
    }
}

fn v1_has_no_columns(path: &Path) -> Error {
    Error::invalid(format!(
        "'{}' is a dataset of format version 1, which has no columns: convert it with \
         blockmap.Dataset.upgrade(src, dst)",
        path.display()
    ))
}

/// Write the dataset at `src` (any version) as a new dataset of the
/// newest version at `dst`, entry by entry, with its fields and columns,
/// in one commit (one piece, no dead bytes: `Dataset.compact`). Each entry
/// is checked against the checksum of all its bytes before it is copied
/// ([`Dataset::check_entry`]): a damaged entry fails the upgrade (a copy
/// would give it a new, valid checksum). An existing `dst` is refused
/// unless `overwrite`, and replaced at the end only: on failure it keeps
/// what it held.
pub fn upgrade(src: &Path, dst: &Path, timeout: Timeout, overwrite: bool) -> Result<()> {
    let source = Dataset::open(src, MapMode::ReadOnly)?;
    let schema = source.schema();
    let mut writer = Writer::create(dst, timeout, overwrite)?;
    let columns: Vec<(&str, ColumnType, &[u64])> = match &source.inner {
        Inner::V1(_) => Vec::new(),
        Inner::V2(_) => schema
            .columns
            .iter()
            .map(|(name, _)| {
                let (kind, values) = source.column(name)?;
                Ok((name.as_str(), kind, values))
            })
            .collect::<Result<_>>()?,
    };
    for i in 0..source.len() {
        crate::interrupt::check()?;
        if i % 256 == 0 {
            source.prefetch(i, 256);
        }
        source.check_entry(i).map_err(|e| match e {
            Error::Format(message) => Error::Format(format!(
                "{message}; Dataset.upgrade copies no damaged entry (blockmap.verify lists \
                 every problem of the file)"
            )),
            other => other,
        })?;
        let index = i64::try_from(i).map_err(|_| Error::internal("index"))?;
        let maps = (0..schema.fields.len())
            .map(|field| source.get_field(index, field, None))
            .collect::<Result<Vec<_>>>()?;
        writer.write_entry(&Entry {
            fields: schema
                .fields
                .iter()
                .map(String::as_str)
                .zip(&maps)
                .collect(),
            columns: columns
                .iter()
                .map(|(name, kind, values)| (*name, ColumnValue::from_bits(*kind, values[i])))
                .collect(),
            single: schema.single,
        })?;
    }
    // on error above, the writer is dropped with its temporary file
    writer.close()
}

#[cfg(test)]
mod tests;
