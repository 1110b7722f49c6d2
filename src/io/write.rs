//! Writing `.mts` archives: STORED entries whose NPY data starts on a
//! 64-byte boundary of the archive, real CRCs, a fixed timestamp, gradients
//! in sorted order, so that the same data always gives the same bytes.
//! Array memory is written straight from the buffers: no copy of the data.

use std::cell::Cell;
use std::io::{Seek, Write};
use std::rc::Rc;

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

use super::npy;
use crate::array::Array;
use crate::block::TensorBlock;
use crate::buffer::{Allocate, FixedWriter, NextData, PiecedWriter, RawBytes, ALIGNMENT};
use crate::error::{Error, Result};
use crate::labels::Labels;
use crate::limits;
use crate::tensor::TensorMap;

/// [`ALIGNMENT`] as the zip writer takes it.
const ZIP_ALIGNMENT: u16 = 64;
const _: () = assert!(ALIGNMENT == ZIP_ALIGNMENT as usize);

/// Entries at or above this size use ZIP64 local headers.
const ZIP64_THRESHOLD: usize = 0xFFFF_0000;

fn options(size: usize) -> SimpleFileOptions {
    let timestamp = DateTime::from_date_and_time(2000, 1, 1, 0, 0, 0)
        .expect("2000-01-01 is a valid zip timestamp");
    SimpleFileOptions::default()
        .compression_method(CompressionMethod::Stored)
        .last_modified_time(timestamp)
        .with_alignment(ZIP_ALIGNMENT)
        .large_file(size >= ZIP64_THRESHOLD)
        .unix_permissions(0o644)
}

fn write_error(error: std::io::Error) -> Error {
    if error.kind() == std::io::ErrorKind::OutOfMemory {
        // memory for the archive (a pickle's pieces) could not be had
        return Error::OutOfMemory(format!("writing the archive: {error}"));
    }
    Error::io("writing the archive", error)
}

/// Every failure of the zip writer is a failure to write: its own errors
/// (an archive it cannot represent, a state it refuses) come from what it
/// was asked to write, which blockmap checks first, so they are I/O errors
/// too, never "invalid data".
fn zip_error(error: zip::result::ZipError) -> Error {
    match error {
        zip::result::ZipError::Io(e) => write_error(e),
        other => write_error(std::io::Error::other(other.to_string())),
    }
}

/// The bytes of a bare NPY file holding `labels`.
pub(crate) fn labels_npy_header(labels: &Labels) -> Result<Vec<u8>> {
    npy::write_header(&npy::labels_descr(labels.names()), &[labels.count()])
}

fn array_npy_header(array: &Array) -> Result<Vec<u8>> {
    npy::write_header(&npy::simple_descr(array.dtype()), array.shape())
}

/// A writer that, once blown, discards everything. The zip writer tries to
/// finish the archive when it is dropped, even after an error (and prints to
/// stderr when that fails); blowing the fuse first makes that a silent no-op
/// that never touches the real writer again. It keeps track of positions so
/// that the discarded writes stay consistent for the zip writer.
struct Fuse<W> {
    inner: W,
    blown: Rc<Cell<bool>>,
    position: u64,
    len: u64,
}

impl<W> Fuse<W> {
    fn advance(&mut self, n: usize) {
        self.position += n as u64;
        self.len = self.len.max(self.position);
    }
}

impl<W: Write> Write for Fuse<W> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.blown.get() {
            self.advance(data.len());
            return Ok(data.len());
        }
        let n = self
            .inner
            .write(data)
            .inspect_err(|_| self.blown.set(true))?;
        if n == 0 && !data.is_empty() {
            // a writer that takes nothing has failed (`write_all` says so);
            // blown now, or the zip writer would try it again on drop
            self.blown.set(true);
            return Err(std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                "failed to write whole buffer",
            ));
        }
        self.advance(n);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.blown.get() {
            return Ok(());
        }
        self.inner.flush().inspect_err(|_| self.blown.set(true))
    }
}

impl<W: Seek> Seek for Fuse<W> {
    fn seek(&mut self, from: std::io::SeekFrom) -> std::io::Result<u64> {
        if !self.blown.get() {
            self.position = self
                .inner
                .seek(from)
                .inspect_err(|_| self.blown.set(true))?;
            self.len = self.len.max(self.position);
            return Ok(self.position);
        }
        let target = match from {
            std::io::SeekFrom::Start(offset) => Some(offset),
            // where the zip writer asks where it is, after a failure in the
            // middle of rewriting a header: the end of what it wrote, so
            // that the sizes it computes while finishing on drop stay
            // sane (it would refuse them, and print that it did)
            std::io::SeekFrom::Current(0) => Some(self.len),
            std::io::SeekFrom::Current(offset) => self.position.checked_add_signed(offset),
            std::io::SeekFrom::End(offset) => self.len.checked_add_signed(offset),
        };
        self.position = target.ok_or_else(|| std::io::Error::other("invalid seek"))?;
        Ok(self.position)
    }
}

/// Where an archive goes. Array data is handed over in pieces that may
/// change while they are read (another thread writing to the values): the
/// sink keeps a snapshot of each piece and adds the snapshot's bytes to
/// the entry's CRC, so that the CRC always describes the bytes written.
pub trait Sink: Write + Seek {
    /// Write a snapshot of `piece` at the current position, hashing the
    /// snapshot into `crc`: exactly `piece.len()` bytes, advancing the
    /// position by as much, and the hash of exactly those bytes as written
    /// (the archive's CRC and sizes are computed from both). By default the
    /// snapshot is a copy in `scratch` (kept in the CPU cache: the piece is
    /// read once); a sink that copies what it is given anyway (into its own
    /// memory) hashes its copy instead.
    fn write_snapshot(
        &mut self,
        piece: RawBytes<'_>,
        crc: &mut crc32fast::Hasher,
        scratch: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        if scratch.len() < piece.len() {
            scratch
                .try_reserve_exact(piece.len() - scratch.len())
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
            scratch.resize(piece.len(), 0);
        }
        let copy = &mut scratch[..piece.len()];
        piece
            .copy_to(copy)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        crc.update(copy);
        self.write_all(copy)
    }
}

impl<S: Sink + ?Sized> Sink for &mut S {
    fn write_snapshot(
        &mut self,
        piece: RawBytes<'_>,
        crc: &mut crc32fast::Hasher,
        scratch: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        (**self).write_snapshot(piece, crc, scratch)
    }
}

/// Any `Write + Seek` as a [`Sink`] taking snapshots in a scratch buffer.
#[derive(Debug)]
pub struct Plain<W>(pub W);

impl<W: Write> Write for Plain<W> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.write(data)
    }

    fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.0.write_all(data)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl<W: Seek> Seek for Plain<W> {
    fn seek(&mut self, from: std::io::SeekFrom) -> std::io::Result<u64> {
        self.0.seek(from)
    }
}

impl<W: Write + Seek> Sink for Plain<W> {}

/// Snapshots made by a writer's own copy: `write` copies what fits of the
/// data and returns the copy, which is hashed while it is in the CPU cache.
pub(super) fn snapshot_by_copy<W>(
    writer: &mut W,
    piece: RawBytes<'_>,
    crc: &mut crc32fast::Hasher,
    write: for<'w> fn(&'w mut W, RawBytes<'_>) -> std::io::Result<&'w [u8]>,
) -> std::io::Result<()> {
    let mut rest = piece;
    while !rest.is_empty() {
        let copy = write(writer, rest)?;
        if copy.is_empty() {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        crc.update(copy);
        let done = copy.len();
        rest = rest
            .get(done, rest.len() - done)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidData))?;
    }
    Ok(())
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

impl<S: Sink> Sink for Fuse<S> {
    fn write_snapshot(
        &mut self,
        piece: RawBytes<'_>,
        crc: &mut crc32fast::Hasher,
        scratch: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        if self.blown.get() {
            self.advance(piece.len());
            return Ok(());
        }
        self.inner
            .write_snapshot(piece, crc, scratch)
            .inspect_err(|_| self.blown.set(true))?;
        self.advance(piece.len());
        Ok(())
    }
}

/// Array data goes to the zip writer through a scratch buffer of this size.
/// Buffered writers in front of files have this capacity too, so that the
/// pieces pass through them instead of being copied once more.
pub(crate) const SNAPSHOT_PIECE: usize = 256 * 1024;

struct Archive<W: Sink> {
    zip: ZipWriter<Fuse<W>>,
    blown: Rc<Cell<bool>>,
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
            .start_file(name, options(header.len() + data.len()))
            .map_err(zip_error)?;
        self.zip.write_all(header).map_err(write_error)?;
        self.zip.write_all(data).map_err(write_error)
    }

    /// An array's entry. Its memory may be written by another thread
    /// (through a numpy view) while it is saved, and the zip writer would
    /// read what it is given twice (to write it, then to update the CRC):
    /// the data goes to the sink piece by piece instead, as snapshots whose
    /// CRC the sink computes (see [`Sink::write_snapshot`]), and the zip
    /// writer is told the entry's CRC and size. The file then holds a
    /// snapshot of each piece, and loads; the array's memory is read once.
    fn array(&mut self, name: &str, array: &Array) -> Result<()> {
        let header = array_npy_header(array)?;
        let data = array.bytes();
        self.zip
            .start_file(name, options(header.len() + data.len()))
            .map_err(zip_error)?;
        self.zip.write_all(&header).map_err(write_error)?;
        if let Some(next_data) = self.next_data.as_ref().filter(|_| !data.is_empty()) {
            next_data.set(Some(data.len()));
        }
        let mut crc = crc32fast::Hasher::new();
        crc.update(&header);
        // SAFETY: `get_mut` asks that the archive is not corrupted, and the
        // position restored before the zip writer writes again. The entry
        // is STORED and not encrypted (`options`), so its data is the bytes
        // as they are; they are written at the position, right after the
        // entry's header, where the zip writer would write them, and
        // nothing else is. The position is then deliberately not restored:
        // the zip writer is told of that data (`set_file_metadata`), and
        // zip 9 finishes an entry from where the writer stands (size
        // written = position - data start, `finish_file`), as after its own
        // writes; `large_file` was set from the exact size (`options`), so
        // the check its `write` would make on the data is not needed.
        let sink = unsafe { self.zip.get_mut() }
            .ok_or_else(|| Error::internal("the zip writer has no entry open"))?;
        for (i, piece) in data.chunks(SNAPSHOT_PIECE).enumerate() {
            if i % (crate::interrupt::PIECE / SNAPSHOT_PIECE) == 0 {
                crate::interrupt::check()?;
            }
            sink.write_snapshot(piece, &mut crc, &mut self.scratch)
                .map_err(write_error)?;
        }
        let len = (header.len() + data.len()) as u64;
        // SAFETY: `len` bytes were written for this entry since
        // `start_file` (the header through the zip writer, the data
        // above), and `crc` was computed over exactly those bytes as
        // written (the header, then each snapshot).
        unsafe { self.zip.set_file_metadata(len, crc.finalize()) }.map_err(zip_error)?;
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

    fn new(writer: W, next_data: Option<NextData>) -> Self {
        let blown = Rc::new(Cell::new(false));
        let fuse = Fuse {
            inner: writer,
            blown: Rc::clone(&blown),
            position: 0,
            len: 0,
        };
        Archive {
            zip: ZipWriter::new(fuse),
            blown,
            scratch: Vec::new(),
            next_data,
        }
    }

    /// Finish the archive after `result`, or abandon it on error.
    fn finish(mut self, result: Result<()>) -> Result<W> {
        match result {
            Ok(()) => self.zip.finish().map(|fuse| fuse.inner).map_err(zip_error),
            Err(error) => {
                // nothing reaches the real writer any more, and the entry
                // being written is dropped: when the zip writer finishes the
                // archive on drop, it has nothing to refuse (and so nothing
                // to print)
                self.blown.set(true);
                let _ = self.zip.abort_file();
                Err(error)
            }
        }
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
    let mut archive = Archive::new(writer, next_data);
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
    let mut archive = Archive::new(writer, next_data);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_zip_writer_failure_is_an_io_error() {
        let failures = [
            zip::result::ZipError::Io(std::io::Error::other("disk full")),
            zip::result::ZipError::InvalidArchive("a state the writer refuses".into()),
            zip::result::ZipError::UnsupportedArchive("too many entries"),
        ];
        for failure in failures {
            let shown = failure.to_string();
            let error = zip_error(failure);
            assert!(
                matches!(error, Error::Io { .. }),
                "{shown} became {error:?}"
            );
        }
    }
}
