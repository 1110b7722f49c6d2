//! Dataset format version 1, read-only (docs/format.md, "Datasets"):
//! files written before version 2 open and read their maps; appending to
//! them is refused (`Dataset.upgrade` converts them). blockmap no longer
//! writes them; the files of tests/data/datasets/ were written by the
//! blockmap that did (`make_v1.py`).
//!
//! A version-1 dataset file is a zip archive of STORED entries, in this order:
//!
//! - `blockmap-dataset.json`, first: `{"format": "blockmap dataset",
//!   "version": 1, "id": "<32 hex digits>"}`, the identity the file kept
//!   through appends;
//! - `maps/<i>.mts` for i = 0, 1, ...: the `.mts` archive of map `i`, its
//!   data starting on a 64-byte boundary of the file (so the arrays inside,
//!   aligned in their own archive, are aligned in the file);
//! - at each commit (the close of a writing session): `blockmap-index.npy`,
//!   a `(count, 2)` little-endian `uint64` array of each map's data offset
//!   and length in the file; then the central directory (the JSON entry,
//!   every map, this index), the ZIP64 end record and locator, and the end
//!   record, whose comment is `blockmap-dataset 1 <id> <offset of the
//!   index's local header> <count>`. A later session wrote its maps and
//!   commit after the end record of the one before.
//!
//! Opening (`open.rs`) reads the end of the file and the index: O(count)
//! bytes of index, no parsing of the central directory (read through the
//! zip reader's `Directory` when the maps' checksums are first asked for).
//! A file whose last bytes are not a complete commit (its writer killed)
//! is opened by walking the records from the start, keeping every map
//! whose entry is complete (its local header, patched with its size only
//! once its data was written, and its data within the file).

use std::path::{Path, PathBuf};

use super::{map_file, Span};
use crate::arc::SetOnce;
use crate::buffer::{Buffer, MapMode};
use crate::data::{Data, Kind};
use crate::error::{Error, Result};
use crate::io;
use crate::io::zip::reader::Directory;
use crate::labels::Labels;
use crate::tensor::TensorMap;

mod open;

use open::Listing;

/// The first entry of every dataset file.
pub const JSON_NAME: &str = io::zip::DATASET_HEADER_NAME;
/// The index entry written at each commit.
pub const INDEX_NAME: &str = "blockmap-index.npy";
/// The version of the layout described in the module docs.
pub const VERSION: u32 = 1;
const COMMENT_PREFIX: &str = "blockmap-dataset";

/// The name of map `i`'s entry.
fn map_name(i: u64) -> String {
    format!("maps/{i}.mts")
}

/// A dataset opened for reading: the file mapped, and where its maps lie.
#[derive(Debug)]
pub struct Dataset {
    path: PathBuf,
    mapping: Buffer,
    listing: Listing,
    /// the CRC32 of each map's archive, read when first asked for (a
    /// lock-free cell: a child forked while a thread reads them reads them
    /// again)
    crcs: SetOnce<Vec<u32>>,
}

impl Dataset {
    /// Open `path`, mapping it read-only or privately (`mode`).
    pub fn open(path: &Path, mode: MapMode) -> Result<Dataset> {
        let file = io::open_regular(path)?;
        let file_len = file
            .metadata()
            .map_err(super::io_error(path, "cannot read"))?
            .len();
        let listing = Listing::read(&file, file_len)
            .map_err(|e| e.context(format!("'{}'", path.display())))?;
        let mapping = map_file(path, &file, mode)?;
        if (mapping.len() as u64) < listing.spans.last().map_or(0, |s| s.offset + s.len) {
            return Err(Error::format(format!(
                "'{}' changed while it was opened",
                path.display()
            )));
        }
        let crcs = SetOnce::new();
        if !listing.committed {
            // walked: known already
            let _ = crcs.set(listing.walked_crcs.clone());
        }
        Ok(Dataset {
            path: path.to_path_buf(),
            mapping,
            listing,
            crcs,
        })
    }

    /// Its identity (kept through appends).
    pub fn id(&self) -> &str {
        &self.listing.id
    }

    /// Number of maps.
    pub fn len(&self) -> usize {
        self.listing.spans.len()
    }

    /// Whether the file ends with a complete commit.
    pub fn committed(&self) -> bool {
        self.listing.committed
    }

    /// Keep the first `count` maps only (at most [`Dataset::len`]).
    pub fn keep_first(&mut self, count: usize) {
        self.listing.spans.truncate(count);
    }

    /// Where map `i` lies, a position the dataset's `position` gave.
    pub fn span(&self, i: usize) -> Span {
        self.listing.spans[i]
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
            let at = self.listing.spans[i].offset;
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
        let span = self.listing.spans[i];
        let (offset, len) = (usize::try_from(span.offset), usize::try_from(span.len));
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
    /// opened (read through the zip reader from the mapping, once), or
    /// from the local headers a recovered file was walked through.
    pub fn crcs(&self) -> Result<&[u32]> {
        if let Some(crcs) = self.crcs.get() {
            return Ok(crcs);
        }
        let read = self
            .directory_crcs()
            .map_err(|e| e.context(format!("'{}'", self.path.display())))?;
        // a thread that read them at the same time set them first: its
        // values are the same
        let _ = self.crcs.set(read);
        self.crcs
            .get()
            .map(Vec::as_slice)
            .ok_or_else(|| Error::internal("checksums read but not kept"))
    }

    /// The CRC32 of each map's archive, from the central directory of the
    /// last commit (the file's length when it was opened: the mapping may
    /// have grown since).
    fn directory_crcs(&self) -> Result<Vec<u32>> {
        let len = usize::try_from(self.listing.len)
            .map_err(|_| Error::format("bad central directory"))?;
        let directory = Directory::of_buffer(self.mapping.slice(0, len)?)?;
        self.mapping.check_intact()?;
        let spans = &self.listing.spans;
        let mut crcs = Vec::new();
        crcs.try_reserve_exact(spans.len())?;
        let maps = (0..directory.len()).filter(|&k| directory.name(k).starts_with("maps/"));
        for (i, k) in maps.enumerate() {
            let Some(span) = spans.get(i) else { break };
            let entry = directory.entry(k);
            if directory.name(k) != map_name(i as u64)
                || entry.size != span.len
                || entry.header >= span.offset
            {
                return Err(Error::format(format!(
                    "its central directory does not match its index (map {i})"
                )));
            }
            crcs.push(entry.crc);
        }
        if crcs.len() != spans.len() {
            return Err(Error::format(format!(
                "its central directory lists {} of its {} maps",
                crcs.len(),
                spans.len()
            )));
        }
        Ok(crcs)
    }

    /// A CRC32 of the first `count` maps' places in the file and of their
    /// content checksums (the CRC32 of each map's archive): what a
    /// reference to this dataset checks the file it opens against, so that
    /// it gives the maps that were pickled or fails. O(count), once per
    /// open dataset for the content checksums.
    pub fn checksum(&self, count: usize) -> Result<u32> {
        let spans = self.listing.spans.get(..count).ok_or_else(|| {
            Error::invalid(format!("{count} maps asked of a dataset of {}", self.len()))
        })?;
        let crcs = self.crcs()?;
        let mut hasher = crc32fast::Hasher::new();
        for (span, crc) in spans.iter().zip(crcs) {
            hasher.update(&span.offset.to_le_bytes());
            hasher.update(&span.len.to_le_bytes());
            hasher.update(&crc.to_le_bytes());
        }
        Ok(hasher.finalize())
    }
}

#[cfg(test)]
mod tests;
