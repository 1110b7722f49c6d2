//! Writing `.mts` archives: STORED entries whose NPY data starts on a
//! 64-byte boundary of the archive, real CRCs, a fixed timestamp, gradients
//! in sorted order, so that the same data always gives the same bytes.
//! Array memory is written straight from the buffers: no copy of the data.

use std::io::Write;

use super::npy;
use super::zip::writer::{snapshot_by_copy, ZipWriter};
pub use super::zip::writer::{Plain, Sink};
use crate::array::Array;
use crate::block::TensorBlock;
use crate::buffer::{Allocate, FixedWriter, NextData, PiecedWriter, RawBytes};
use crate::error::{Error, Result};
use crate::labels::Labels;
use crate::limits;
use crate::tensor::TensorMap;

fn write_error(error: std::io::Error) -> Error {
    if error.kind() == std::io::ErrorKind::OutOfMemory {
        // memory for the archive (a pickle's pieces) could not be had
        return Error::OutOfMemory(format!("writing the archive: {error}"));
    }
    Error::io("writing the archive", error)
}

/// The bytes of a bare NPY file holding `labels`.
pub(crate) fn labels_npy_header(labels: &Labels) -> Result<Vec<u8>> {
    npy::write_header(&npy::labels_descr(labels.names()), &[labels.count()])
}

fn array_npy_header(array: &Array) -> Result<Vec<u8>> {
    npy::write_header(&npy::simple_descr(array.dtype()), array.shape())
}

/// Archives built in memory (a pickle's, `save_buffer`'s) copy array data
/// once, into that memory, and hash the copy.
impl Sink for FixedWriter<'_> {
    fn write_snapshot(
        &mut self,
        piece: RawBytes<'_>,
        crc: &mut crc32fast::Hasher,
        _scratch: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        snapshot_by_copy(self, piece, crc, FixedWriter::write_viewed)
    }
}

impl<'a, A: Allocate<'a>> Sink for PiecedWriter<'a, A> {
    fn write_snapshot(
        &mut self,
        piece: RawBytes<'_>,
        crc: &mut crc32fast::Hasher,
        _scratch: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        snapshot_by_copy(self, piece, crc, PiecedWriter::write_viewed)
    }
}

/// Array data goes to the archive writer through a scratch buffer of this size.
/// Buffered writers in front of files have this capacity too, so that the
/// pieces pass through them instead of being copied once more.
pub(crate) const SNAPSHOT_PIECE: usize = 256 * 1024;

struct Archive<W: Sink> {
    zip: ZipWriter<W>,
    /// where a sink that keeps no copy of its own takes snapshots of array
    /// data (see [`Sink::write_snapshot`])
    scratch: Vec<u8>,
    /// told the length of each array's data right before it is written
    /// (for a writer that keeps arrays whole in pieces of memory)
    next_data: Option<NextData>,
}

impl<W: Sink> Archive<W> {
    fn entry(&mut self, name: &str, header: &[u8], data: &[u8]) -> Result<()> {
        self.zip
            .start(name, header.len() + data.len())
            .and_then(|()| self.zip.write(header))
            .and_then(|()| self.zip.write(data))
            .and_then(|()| self.zip.finish_entry())
            .map_err(write_error)
    }

    /// An array's entry. Its memory may be written by another thread
    /// (through a numpy view) while it is saved: the data goes to the sink
    /// piece by piece, as snapshots whose CRC the sink computes (see
    /// [`Sink::write_snapshot`]), so that the file holds a snapshot of each
    /// piece and its CRC describes them. The array's memory is read once.
    fn array(&mut self, name: &str, array: &Array) -> Result<()> {
        let header = array_npy_header(array)?;
        let data = array.bytes();
        self.zip
            .start(name, header.len() + data.len())
            .and_then(|()| self.zip.write(&header))
            .map_err(write_error)?;
        if let Some(next_data) = self.next_data.as_ref().filter(|_| !data.is_empty()) {
            next_data.set(Some(data.len()));
        }
        for (i, piece) in data.chunks(SNAPSHOT_PIECE).enumerate() {
            if i % (crate::interrupt::PIECE / SNAPSHOT_PIECE) == 0 {
                crate::interrupt::check()?;
            }
            self.zip
                .write_snapshot(piece, &mut self.scratch)
                .map_err(write_error)?;
        }
        self.zip.finish_entry().map_err(write_error)?;
        // a file that shrank under a mapped array lost part of it
        array.buffer().check_intact()
    }

    fn labels(&mut self, name: &str, labels: &Labels) -> Result<()> {
        self.entry(name, &labels_npy_header(labels)?, labels.value_bytes())
    }

    fn block(&mut self, prefix: &str, block: &TensorBlock, gradient: bool) -> Result<()> {
        self.array(&format!("{prefix}values.npy"), block.values())?;
        self.labels(&format!("{prefix}samples.npy"), block.samples())?;
        for (k, component) in block.components().iter().enumerate() {
            self.labels(&format!("{prefix}components/{k}.npy"), component)?;
        }
        if !gradient {
            self.labels(&format!("{prefix}properties.npy"), block.properties())?;
        }
        // BTreeMap: sorted by parameter
        for (parameter, gradient) in block.gradients() {
            self.block(&format!("{prefix}gradients/{parameter}/"), gradient, true)?;
        }
        Ok(())
    }

    fn new(writer: W, next_data: Option<NextData>) -> Result<Self> {
        Ok(Archive {
            zip: ZipWriter::new(writer).map_err(write_error)?,
            scratch: Vec::new(),
            next_data,
        })
    }

    /// Finish the archive after `result`, or abandon it on error (the
    /// sink is dropped as it stands).
    fn finish(self, result: Result<()>) -> Result<W> {
        result?;
        self.zip.finish().map_err(write_error)
    }
}

/// The limits of the readers (see `limits.rs`) that an archive of these
/// blocks could break, checked before anything is written: entry names
/// the zip format can hold, gradients no deeper than readers accept.
/// (Labels and info are checked when they are made.)
fn check_blocks<'a>(blocks: impl Iterator<Item = (String, &'a TensorBlock)>) -> Result<()> {
    fn walk(prefix: &str, block: &TensorBlock, depth: usize) -> Result<()> {
        // the longest name of the block: prefix + "components/<k>.npy"
        let longest = prefix.len() + "components/".len() + 20 + ".npy".len();
        if longest > limits::MAX_ENTRY_NAME {
            return Err(Error::invalid(format!(
                "the archive entry names of the block at '{prefix}' would be longer than \
                 the {} bytes a zip archive allows",
                limits::MAX_ENTRY_NAME
            )));
        }
        if depth > limits::MAX_GRADIENT_DEPTH {
            return Err(Error::invalid(format!(
                "gradients nest more than {} levels deep",
                limits::MAX_GRADIENT_DEPTH
            )));
        }
        for (parameter, gradient) in block.gradients() {
            walk(
                &format!("{prefix}gradients/{parameter}/"),
                gradient,
                depth + 1,
            )?;
        }
        Ok(())
    }
    for (prefix, block) in blocks {
        walk(&prefix, block, 0)?;
    }
    Ok(())
}

/// Write `map` as an `.mts` archive; with `next_data`, setting it to the
/// length of each array's data right before writing it (for a writer that
/// keeps arrays whole in pieces of memory).
pub(crate) fn tensor<W: Sink>(
    writer: W,
    map: &TensorMap,
    next_data: Option<NextData>,
) -> Result<W> {
    let last = map.blocks().len().saturating_sub(1);
    check_blocks(
        map.blocks()
            .last()
            .map(|block| (format!("blocks/{last}/"), block))
            .into_iter(),
    )?;
    limits::check_info(map.info())?;
    let mut archive = Archive::new(writer, next_data)?;
    let mut write = || {
        archive.labels("keys.npy", map.keys())?;
        for (i, block) in map.blocks().iter().enumerate() {
            archive.block(&format!("blocks/{i}/"), block, false)?;
        }
        if !map.info().is_empty() {
            // written into memory reserved (fallibly) for its exact size
            let mut info = Vec::new();
            info.try_reserve_exact(limits::info_json_len(map.info()))?;
            serde_json::to_writer_pretty(&mut info, map.info())
                .map_err(|e| Error::internal(format!("cannot encode info as JSON: {e}")))?;
            archive.entry("info.json", &[], &info)?;
        }
        Ok(())
    };
    let result = write();
    archive.finish(result)
}

/// Write `block` as an `.mts` archive of a single block, telling
/// `next_data` as [`tensor`] does.
pub(crate) fn block<W: Sink>(
    writer: W,
    block: &TensorBlock,
    next_data: Option<NextData>,
) -> Result<W> {
    check_blocks(std::iter::once((String::new(), block)))?;
    let mut archive = Archive::new(writer, next_data)?;
    let result = archive.block("", block, false);
    archive.finish(result)
}

/// Write `labels` as a bare NPY file.
pub fn labels<W: Write>(mut writer: W, labels: &Labels) -> Result<W> {
    let header = labels_npy_header(labels)?;
    writer
        .write_all(&header)
        .and_then(|()| writer.write_all(labels.value_bytes()))
        .map_err(write_error)?;
    Ok(writer)
}

/// An upper bound of the size of an archive, added up entry by entry
/// without allocating: each entry costs at most its data, its name twice
/// (local and central headers), fixed headers, ZIP64 fields and alignment
/// padding, all well within 512 bytes.
#[derive(Debug)]
pub(crate) struct SizeBound(usize);

impl SizeBound {
    pub(crate) fn new() -> Self {
        SizeBound(1024)
    }

    fn entry(&mut self, name: usize, data: usize) {
        self.0 = self
            .0
            .saturating_add(data)
            .saturating_add(name.saturating_mul(2))
            .saturating_add(512);
    }

    pub(crate) fn total(&self) -> usize {
        self.0
    }

    /// Every entry of the archive of `map`.
    pub(crate) fn tensor(&mut self, map: &TensorMap) {
        self.entry(8, labels_size(map.keys()));
        for (i, block) in map.blocks().iter().enumerate() {
            // "blocks/" + the index + "/"
            let prefix = 8 + decimal_digits(i);
            self.block(prefix, block, false);
        }
        if !map.info().is_empty() {
            self.entry(9, limits::info_json_len(map.info()));
        }
    }

    /// Every entry of a block whose names start with `prefix` bytes.
    pub(crate) fn block(&mut self, prefix: usize, block: &TensorBlock, gradient: bool) {
        // names are at most prefix + "components/" + an index + ".npy"
        let name = prefix + 36;
        let values = block.values();
        self.entry(
            name,
            array_header_bound(values.shape()) + values.bytes().len(),
        );
        self.entry(name, labels_size(block.samples()));
        for component in block.components() {
            self.entry(name, labels_size(component));
        }
        if !gradient {
            self.entry(name, labels_size(block.properties()));
        }
        for (parameter, gradient) in block.gradients() {
            // + "gradients/" + the parameter + "/"
            self.block(prefix + 11 + parameter.len(), gradient, true);
        }
    }
}

fn decimal_digits(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |digits| digits as usize + 1)
}

/// An upper bound of the NPY header of an array of this shape: the dict's
/// fixed text, at most 22 bytes per dimension, padding to 64 bytes.
fn array_header_bound(shape: &[usize]) -> usize {
    12 + 96 + 22 * shape.len() + npy::HEADER_ALIGNMENT
}

/// An upper bound of the size of the bare NPY file of `labels`, computed
/// without writing its header.
pub(crate) fn labels_size(labels: &Labels) -> usize {
    let header = 12 + 96 + 22 + limits::label_names_size(labels.names()) + npy::HEADER_ALIGNMENT;
    header + labels.values().bytes().len()
}
