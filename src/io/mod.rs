//! The `.mts` format (metatensor's): save and load `TensorMap`, `TensorBlock`
//! and Labels through any `Write`/`Read + Seek`, a path, memory blockmap
//! owns, a caller's bytes or a file mapping.
//!
//! A `TensorMap` or `TensorBlock` is a ZIP archive of NPY arrays (see
//! `docs/format.md`); Labels alone are a bare NPY file.
//!
//! - Saving streams array memory straight into the archive; to a path, it
//!   writes a temporary file beside the target and renames it.
//! - Loading from a reader or a path copies each array once into memory
//!   blockmap owns and checks every CRC.
//! - Loading from a [`Buffer`] (a caller's bytes, or a file mapping) views
//!   STORED, aligned, native, C-ordered entries in place and copies the
//!   others. From a caller's bytes the CRCs are checked; from a mapping they
//!   are not, so that its cost does not grow with the data ([`verify_path`]
//!   checks a file completely).

pub(crate) mod bytes;
mod cached;
pub mod foreign;
pub mod npy;
mod pieces;
mod pipeline;
pub mod portable;
mod read;
pub(crate) mod replace;
mod write;
pub(crate) mod zip;

use std::fs::File;
use std::fs::OpenOptions;
use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::path::Path;

use crate::buffer::{AlignedBytes, Buffer, FixedWriter, MapMode, NextData};
use crate::data::{Data, DataRef, Kind};
use crate::error::{Error, Result};
use crate::labels::Labels;
use pieces::Pieces;
pub use write::{Plain, Sink};

/// Write `data` to `writer`, refusing data that metatensor-core could not
/// read back (see [`portable`]).
pub fn save<W: Write + Seek>(writer: W, data: DataRef<'_>) -> Result<W> {
    portable::check(data)?;
    write(write::Plain(writer), data, None).map(|plain| plain.0)
}

/// Whether an array of `data` views a mapping of the file `file` (its
/// device and inode): writing that file in place would change (or, cut
/// off, lose) what the save reads.
pub fn maps_file(data: DataRef<'_>, file: (u64, u64)) -> bool {
    fn block_maps(block: &crate::block::TensorBlock, file: (u64, u64)) -> bool {
        block.values().buffer().mapped_file() == Some(file)
            || block
                .gradients()
                .values()
                .any(|gradient| block_maps(gradient, file))
    }
    match data {
        DataRef::Tensor(map) => map.blocks().iter().any(|block| block_maps(block, file)),
        DataRef::Block(block) => block_maps(block, file),
        // labels own their memory
        DataRef::Labels(_) => false,
    }
}

/// Write `data`; `next_data` is told of array data (see [`save_archive`]).
fn write<W: Sink>(writer: W, data: DataRef<'_>, next_data: Option<NextData>) -> Result<W> {
    match data {
        DataRef::Tensor(map) => write::tensor(writer, map, next_data),
        DataRef::Block(block) => write::block(writer, block, next_data),
        DataRef::Labels(labels) => write::labels(writer, labels),
    }
}

/// An upper bound of the size of the archive (or NPY file) of `data`,
/// computed without allocating.
pub fn save_size_bound(data: DataRef<'_>) -> usize {
    let mut bound = write::SizeBound::new();
    match data {
        DataRef::Tensor(map) => bound.tensor(map),
        DataRef::Block(block) => bound.block(0, block, false),
        DataRef::Labels(labels) => return write::labels_size(labels),
    }
    bound.total()
}

/// Write `data` into `writer` (whose capacity is at least
/// [`save_size_bound`]); returns the number of bytes written. This is the
/// archive a pickle carries: unlike the other `save` functions it keeps
/// what metatensor-core could not read back (a pickle is read by blockmap),
/// but for what no archive can hold ([`portable::check_archive`]).
pub fn save_into(writer: FixedWriter<'_>, data: DataRef<'_>) -> Result<usize> {
    Ok(save_archive(writer, data, None)?.len())
}

/// Write the archive a pickle carries (see [`save_into`]) into `writer`;
/// with `next_data`, setting it to the length of each array's data right
/// before writing it (see [`PiecedWriter`](crate::buffer::PiecedWriter):
/// Labels, a bare NPY file, have no array data to tell of).
pub fn save_archive<W: Sink>(
    writer: W,
    data: DataRef<'_>,
    next_data: Option<NextData>,
) -> Result<W> {
    portable::check_archive(data)?;
    write(writer, data, next_data)
}

/// The archive (or NPY file) of `data`, in memory blockmap owns (refusing
/// what metatensor-core could not read back).
pub fn save_buffer(data: DataRef<'_>) -> Result<Buffer> {
    portable::check(data)?;
    // allocate an upper bound of the size (untouched pages of a large
    // zeroed allocation cost nothing), write, then keep the written part
    let mut bytes = AlignedBytes::zeroed(save_size_bound(data))?;
    let written = save_into(FixedWriter::over_bytes(bytes.as_mut_slice()), data)?;
    Buffer::from(bytes).slice(0, written)
}

/// Archives at least this large are written through a writer thread (see
/// `pipeline.rs`); below, starting the thread costs more than it saves.
const PIPELINED_FROM: usize = 8 << 20;

/// Save `data` to `path`, atomically, keeping what the user had: the data
/// goes to a temporary file beside the file `path` names (following
/// symlinks), renamed over it once complete, with its mode and owner; on
/// failure nothing is left behind and the file is untouched (see
/// `replace.rs` for the whole contract). With `durable`, the data and the
/// rename are synced to the disk before this returns, so that the save
/// survives a crash of the system too, not only of the process.
pub fn save_path(path: &Path, data: DataRef<'_>, durable: bool) -> Result<()> {
    portable::check(data)?;
    let target = replace::resolve(path)?;
    let shown = path.display();
    let mut temporary = replace::Temporary::beside(&target)?;
    let bound = save_size_bound(data);
    if bound >= PIPELINED_FROM {
        let file: &File = temporary.file()?;
        let reserve = u64::try_from(bound).unwrap_or(u64::MAX);
        pipeline::with_pipeline(file, durable, reserve, |writer| {
            write(writer, data, None).map(drop)
        })?;
    } else {
        // pieces of array data (see `write::SNAPSHOT_PIECE`) pass through
        let writer = write(
            write::Plain(BufWriter::with_capacity(
                write::SNAPSHOT_PIECE,
                temporary.file()?,
            )),
            data,
            None,
        )?;
        writer
            .0
            .into_inner()
            .map_err(|e| Error::io(format!("cannot write '{shown}'"), e.into_error()))?;
    }
    temporary.replace(&target, durable)
}

fn from_source(source: &mut impl read::Source, kind: Kind, keys: Option<&Labels>) -> Result<Data> {
    check_selection(kind, keys)?;
    let names = source.names();
    // the other kind of archive: say which loader reads it
    if kind == Kind::Tensor && !names.contains("keys.npy") && names.contains("values.npy") {
        return Err(Error::format(
            "this archive holds a TensorBlock saved on its own (values.npy at its root, \
             no keys.npy), not a TensorMap: load it with load_block",
        ));
    }
    if kind == Kind::Block && !names.contains("values.npy") && names.contains("keys.npy") {
        return Err(Error::format(
            "this archive holds a TensorMap (keys.npy, no values.npy at its root), not a \
             TensorBlock: load it with load",
        ));
    }
    match kind {
        Kind::Tensor => read::tensor(source, keys).map(Data::Tensor),
        Kind::Block => read::block(source, "", None, 0).map(Data::Block),
        Kind::Labels => Err(Error::internal(
            "labels are a bare NPY file, not an archive: they are read by `load_buffer_checked`",
        )),
    }
}

/// The zip local header signature, the first bytes of an `.mts` archive.
const ZIP_MAGIC: &[u8; 4] = b"PK\x03\x04";

/// `error`, a failure to read data of `kind` whose first bytes are `head`,
/// said again when those bytes show the other format: a bare NPY file
/// (Labels saved on their own) where an archive was expected, or an
/// archive where Labels were: which loader reads it.
fn other_format(error: Error, kind: Kind, head: &[u8]) -> Error {
    if !matches!(error, Error::Format(_)) {
        return error;
    }
    if kind != Kind::Labels && head.starts_with(npy::MAGIC) {
        return Error::format(
            "this is a bare .npy file (Labels saved on their own), not an .mts archive: \
             load it with load_labels",
        );
    }
    if kind == Kind::Labels && head.starts_with(ZIP_MAGIC) {
        return Error::format(
            "this is an .mts (zip) archive (a TensorMap or a TensorBlock), not Labels saved \
             on their own: load it with load or load_block",
        );
    }
    error
}

/// The first bytes of `reader` (at most 8), its position left where it was.
fn head_of<R: Read + Seek>(reader: &mut R) -> [u8; 8] {
    let mut head = [0u8; 8];
    if let Ok(start) = reader.stream_position() {
        let mut filled = 0;
        while filled < head.len() {
            match reader.read(&mut head[filled..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => filled += n,
            }
        }
        if reader.seek(std::io::SeekFrom::Start(start)).is_err() {
            // the error the load then meets is its own
            return [0u8; 8];
        }
    }
    head
}

/// Load from a reader: every array is copied once into memory blockmap
/// owns and every CRC is checked.
pub fn load<R: Read + Seek>(reader: R, kind: Kind) -> Result<Data> {
    load_selected(reader, kind, None)
}

/// [`load`], of the blocks whose keys match `keys` only (see
/// [`Labels::select`]): the central directory and the keys are read, then
/// the selected blocks' entries, and nothing else.
pub fn load_selected<R: Read + Seek>(
    mut reader: R,
    kind: Kind,
    keys: Option<&Labels>,
) -> Result<Data> {
    let head = head_of(&mut reader);
    load_reader(reader, kind, keys).map_err(|error| other_format(error, kind, &head))
}

/// [`load_selected`], without reading the first bytes again for messages
/// (a path's load reads them only when it fails).
fn load_reader<R: Read + Seek>(reader: R, kind: Kind, keys: Option<&Labels>) -> Result<Data> {
    check_selection(kind, keys)?;
    if kind == Kind::Labels {
        // a header, then the bytes it announces (and nothing after them)
        return read::labels_from_reader(reader, None).map(Data::Labels);
    }
    from_source(&mut read::ReaderSource::new(reader)?, kind, keys)
}

/// Load from an archive in memory, viewing what can be viewed (see the
/// module docs); CRCs are checked.
pub fn load_buffer(buffer: Buffer, kind: Kind) -> Result<Data> {
    load_buffer_checked(buffer, kind, true)
}

/// [`load_buffer`], checking CRCs or not (a pickle, like numpy's, carries
/// no checksum of its own: the structure and the data model's rules are
/// checked all the same).
pub fn load_buffer_checked(buffer: Buffer, kind: Kind, check_crc: bool) -> Result<Data> {
    load_buffer_selected(buffer, kind, check_crc, None)
}

/// [`load_buffer_checked`], of the blocks whose keys match `keys` only
/// (see [`load_selected`]): only their entries are viewed or checked.
pub fn load_buffer_selected(
    buffer: Buffer,
    kind: Kind,
    check_crc: bool,
    keys: Option<&Labels>,
) -> Result<Data> {
    check_selection(kind, keys)?;
    let mut head = [0u8; 8];
    let n = buffer.len().min(head.len());
    buffer.raw().copy_to(&mut head[..n])?;
    let other = |error| other_format(error, kind, &head);
    if kind == Kind::Labels {
        return read::labels_from_npy(&buffer)
            .map(Data::Labels)
            .map_err(other);
    }
    from_source(
        &mut read::BufferSource::new(Pieces::one(buffer), check_crc).map_err(other)?,
        kind,
        keys,
    )
}

/// Load a `TensorMap` or `TensorBlock` from an archive held in `pieces`
/// (one after the other), viewing what can be viewed as [`load_buffer`]
/// does: arrays view the piece that holds them (an entry lying across
/// pieces is copied). CRCs are checked or not as in [`load_buffer_checked`].
pub fn load_pieces(pieces: Vec<Buffer>, kind: Kind, check_crc: bool) -> Result<Data> {
    if kind == Kind::Labels {
        return Err(Error::format(
            "labels are a bare NPY file, never an archive in pieces",
        ));
    }
    from_source(
        &mut read::BufferSource::new(Pieces::new(pieces)?, check_crc)?,
        kind,
        None,
    )
}

/// Open `path` for reading, refusing anything but a regular file before
/// reading it: a FIFO without a writer would block forever (it is opened
/// without waiting), a device such as `/dev/zero` never ends, a directory
/// is not data.
pub(crate) fn open_regular(path: &Path) -> Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    open_regular_with(path, &mut options)
}

/// Open `path` with `options`, without waiting (`O_NONBLOCK`: opening a
/// FIFO waits for its other end otherwise; for a regular file the flag
/// changes nothing), and refuse anything but a regular file. A path that
/// does not exist is an [`Error::Io`] of kind `NotFound`.
pub(crate) fn open_regular_with(path: &Path, options: &mut OpenOptions) -> Result<File> {
    let shown = path.display();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options
        .open(path)
        .map_err(|e| Error::io(format!("cannot open '{shown}'"), e))?;
    let metadata = file
        .metadata()
        .map_err(|e| Error::io(format!("cannot open '{shown}'"), e))?;
    if metadata.is_file() {
        return Ok(file);
    }
    if metadata.is_dir() {
        return Err(Error::io(
            format!("cannot open '{shown}'"),
            std::io::Error::from_raw_os_error(libc::EISDIR),
        ));
    }
    Err(Error::io(
        format!("cannot read '{shown}'"),
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("it is not a regular file but {}", file_type_name(&metadata)),
        ),
    ))
}

fn file_type_name(metadata: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let kind = metadata.file_type();
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    let _ = metadata;
    "not a regular file"
}

/// Load from a file. With `mmap`, the file is mapped (read-only, or
/// privately: writes to views change this process's pages, never the file)
/// and arrays view the mapping; CRCs are then not checked.
pub fn load_path(path: &Path, kind: Kind, mmap: Option<MapMode>) -> Result<Data> {
    load_path_selected(path, kind, mmap, None)
}

/// [`load_path`], of the blocks whose keys match `keys` only (see
/// [`load_selected`]): the bytes read are those of the central directory,
/// the keys and the selected blocks (mapped or not).
pub fn load_path_selected(
    path: &Path,
    kind: Kind,
    mmap: Option<MapMode>,
    keys: Option<&Labels>,
) -> Result<Data> {
    check_selection(kind, keys)?;
    let file = open_regular(path)?;
    let in_file = |e: Error| {
        // the first bytes, read only when the load failed
        let mut head = [0u8; 8];
        if matches!(e, Error::Format(_)) {
            if let Ok(mut again) = open_regular(path) {
                head = head_of(&mut again);
            }
        }
        other_format(e, kind, &head).context(format!("'{}'", path.display()))
    };
    if kind == Kind::Labels {
        let size = file
            .metadata()
            .map_err(|e| Error::io(format!("cannot read '{}'", path.display()), e))?
            .len();
        return read::labels_from_reader(BufReader::new(file), Some(size))
            .map(Data::Labels)
            .map_err(in_file);
    }
    let Some(mode) = mmap else {
        read::refuse_dataset(&mut &file).map_err(in_file)?;
        // the start was checked through the file itself: a buffered reader
        // would read a whole buffer for the check
        let reader = BufReader::with_capacity(1 << 16, file);
        return read::ReaderSource::new_checked(reader)
            .and_then(|mut source| from_source(&mut source, kind, keys))
            .map_err(in_file);
    };
    // blockmap itself only replaces files by renaming (see `save_path`),
    // never truncating them under a mapping; another program that does is
    // survived (see `buffer/guard.rs`)
    let buffer = Buffer::map_file(&file, mode).map_err(|e| match e {
        Error::Io { source, .. } => Error::io(format!("cannot map '{}'", path.display()), source),
        other => other,
    })?;
    // the structure (central directory, local and NPY headers) and the
    // labels are read from the file: the load touches no page of the
    // mapping and allocates memory only for the labels (and what it reads
    // ahead of them: the headers)
    let mut source = read::BufferSource::mapped(
        cached::CachedFile::new(file)
            .map_err(|e| Error::io(format!("cannot read '{}'", path.display()), e))?,
        Pieces::one(buffer),
        keys.is_none(),
    )
    .map_err(in_file)?;
    from_source(&mut source, kind, keys).map_err(in_file)
}

/// Check a file completely: archive structure, every CRC, and the data
/// model's rules. Returns what the file holds: Labels (a bare NPY file), a
/// `TensorMap` (an archive with `keys.npy`) or a `TensorBlock`.
///
/// The file is read through a read-only mapping (as `load_buffer` reads a
/// buffer: every CRC checked, the arrays viewed where aligned), not copied
/// into memory: checking a file takes the memory of its labels, not of its
/// arrays, and the kernel may drop the file's pages once hashed.
pub fn verify_path(path: &Path) -> Result<Kind> {
    let in_file = |e: Error| e.context(format!("'{}'", path.display()));
    let mut file = open_regular(path)?;
    let mut magic = [0u8; 6];
    let is_npy = file.read_exact(&mut magic).is_ok() && &magic == npy::MAGIC;
    let kind = if is_npy {
        Kind::Labels
    } else {
        file.seek(std::io::SeekFrom::Start(0))
            .map_err(|e| Error::io(format!("cannot read '{}'", path.display()), e))?;
        let source = read::ReaderSource::new(BufReader::new(file)).map_err(in_file)?;
        if read::Source::names(&source).contains("keys.npy") {
            Kind::Tensor
        } else {
            Kind::Block
        }
    };
    let file = open_regular(path)?;
    let buffer = Buffer::map_file(&file, MapMode::ReadOnly).map_err(|e| match e {
        Error::Io { source, .. } => Error::io(format!("cannot map '{}'", path.display()), source),
        other => other,
    })?;
    load_buffer(buffer, kind).map_err(in_file)?;
    Ok(kind)
}

/// Only a `TensorMap` has keys to select blocks by.
fn check_selection(kind: Kind, keys: Option<&Labels>) -> Result<()> {
    if keys.is_some() && kind != Kind::Tensor {
        return Err(Error::invalid(
            "only a TensorMap can be loaded by keys: this is a TensorBlock or Labels",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod hostile_tests;

#[cfg(test)]
mod read_tests;
