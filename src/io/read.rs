//! Reading `.mts` archives: entries from a reader (copied, CRC checked) or
//! from an archive already in memory (viewed in place when possible), then
//! the `TensorMap` / `TensorBlock` / Labels they describe.

use std::collections::BTreeMap;
use std::io::{Read, Seek};

use super::cached::{CachedFile, Prefetched};
use super::npy::{self, Descr, Header};
use super::pieces::{Pieces, PiecesReader};
use super::zip;
use super::zip::reader::{self as zip_reader, Directory};
use crate::array::{Array, Layout};
use crate::block::TensorBlock;
use crate::buffer::{AlignedBytes, Buffer};
use crate::dtype::{ByteOrder, DType};
use crate::error::{Error, Result};
use crate::interrupt;
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// The data of one NPY entry, after its header.
enum Payload {
    /// copied out of the archive, exactly the data bytes
    Owned(AlignedBytes),
    /// a view of the archive in memory
    View(Buffer),
    /// a view of memory the load allocated and reaches alone (the ranges a
    /// mapped load read ahead): labels keep it as their own
    Private(Buffer),
}

impl Payload {
    /// The data as an array of `dtype` and `shape` laid out as `layout`:
    /// viewed or converted by [`Array::view_or_convert`].
    fn into_array(self, dtype: DType, shape: Vec<usize>, layout: Layout) -> Result<Array> {
        match self {
            Payload::Owned(bytes) => Array::from_owned_bytes(dtype, shape, layout, bytes),
            Payload::View(buffer) | Payload::Private(buffer) => {
                Array::view_or_convert(dtype, shape, layout, buffer)
            }
        }
    }
}

/// A decoded NPY entry: header and data.
pub(crate) struct Npy {
    header: Header,
    payload: Payload,
}

impl Npy {
    /// The data of a one-dimensional array of one-byte elements (an
    /// archive wrapped in an NPY array, as `numpy.save` of
    /// `save_buffer()` writes it), in memory blockmap owns.
    pub(crate) fn into_wrapped_bytes(self) -> Result<Buffer> {
        let one_byte = matches!(self.header.descr, Descr::Simple(dtype, _) if dtype.size() == 1);
        if !one_byte || self.header.shape.len() != 1 {
            return Err(Error::format(
                "not an NPY array of bytes (a one-dimensional array of uint8)",
            ));
        }
        match self.payload {
            Payload::Owned(bytes) => Ok(Buffer::from(bytes)),
            Payload::View(buffer) | Payload::Private(buffer) => Ok(buffer),
        }
    }

    pub(crate) fn into_array(self) -> Result<Array> {
        let Descr::Simple(dtype, order) = self.header.descr else {
            return Err(Error::format(
                "expected a plain array, got a structured one",
            ));
        };
        let layout = Layout {
            order,
            fortran: self.header.fortran_order,
        };
        self.payload.into_array(dtype, self.header.shape, layout)
    }

    fn into_labels(self) -> Result<Labels> {
        let Descr::Fields(fields) = &self.header.descr else {
            return Err(Error::format(
                "labels must be a structured array of int32 fields",
            ));
        };
        let [count] = self.header.shape[..] else {
            return Err(Error::format(format!(
                "labels must be a 1-dimensional array, got shape {:?}",
                self.header.shape
            )));
        };
        let mut order = ByteOrder::NATIVE;
        for (i, (name, dtype, field_order)) in fields.iter().enumerate() {
            if *dtype != DType::I4 {
                return Err(Error::format(format!(
                    "label dimension '{name}' is {dtype}, labels must be int32"
                )));
            }
            if i > 0 && *field_order != order {
                return Err(Error::format("label dimensions have mixed byte orders"));
            }
            order = *field_order;
        }
        let names: Vec<String> = fields.iter().map(|(name, _, _)| name.clone()).collect();
        let shape = vec![count, names.len()];
        let private = matches!(self.payload, Payload::Private(_));
        let values = self
            .payload
            .into_array(DType::I4, shape, Layout::c_order(order))?;
        if private {
            // memory no one else reaches (or a converted copy): validated
            // where it is
            return Labels::from_own_array(names, values, false);
        }
        Labels::from_array(names, values, false)
    }
}

/// Where entries come from.
pub(crate) trait Source {
    /// The entries, by name.
    fn names(&self) -> &Directory;
    /// Read and decode the NPY entry `name`.
    fn npy(&mut self, name: &str) -> Result<Npy>;
    /// Read a small text entry (info.json), at most `limit` bytes.
    fn text(&mut self, name: &str, limit: usize) -> Result<String>;
}

/// `len` zero bytes, or an out-of-memory error.
fn zeroed_vec(len: usize) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len)?;
    bytes.resize(len, 0);
    Ok(bytes)
}

/// Read the NPY header at the start of `reader`, an entry of `size` bytes,
/// and check that the data it announces fills the rest of the entry.
fn read_npy_header(reader: &mut impl Read, size: usize) -> Result<Header> {
    let mut prefix = [0u8; 12];
    let preamble = if size < 10 {
        return Err(Error::format("the npy entry is too short"));
    } else {
        read_exact(reader, &mut prefix[..10])?;
        if prefix[6] >= 2 && size >= 12 {
            read_exact(reader, &mut prefix[10..12])?;
            12
        } else {
            10
        }
    };
    let (preamble, header_len) = npy::header_extent(&prefix[..preamble])?;
    let total_header = preamble + header_len;
    if total_header > size {
        return Err(Error::format("npy header is longer than its entry"));
    }
    let mut text = zeroed_vec(header_len)?;
    read_exact(reader, &mut text)?;
    let header = npy::parse_header(&text, preamble)?;
    let data_len = header.data_len()?;
    if total_header + data_len != size {
        return Err(Error::format(format!(
            "npy data is {} bytes, but the shape {:?} needs {data_len}",
            size - total_header,
            header.shape
        )));
    }
    Ok(header)
}

/// Read an NPY entry from `reader` (decompressed, CRC checked when read to
/// the end), whose declared uncompressed size is `size`.
pub(crate) fn read_npy(mut reader: impl Read, size: u64) -> Result<Npy> {
    let size = usize::try_from(size).map_err(|_| Error::format("entry too large"))?;
    let header = read_npy_header(&mut reader, size)?;
    // filled in full by the read (or the load fails): memory that may be
    // warm (a freed allocation of the same size)
    let mut data = AlignedBytes::for_overwrite(header.data_len()?)?;
    read_exact(&mut reader, data.as_mut_slice())?;

    // reading to the end makes the entry reader check the CRC, and finds data
    // past the declared size
    let mut extra = [0u8; 1];
    if read_up_to(&mut reader, &mut extra)? != 0 {
        return Err(Error::format(
            "entry holds more data than its declared size",
        ));
    }
    Ok(Npy {
        header,
        payload: Payload::Owned(data),
    })
}

use zip_reader::read_error as io_read_error;

/// Bytes asked of the reader at once: the entry reader checks the CRC of
/// each piece right after reading it, while it is still in the CPU's cache
/// (a 64 MiB piece would be read from memory a second time).
const READ_PIECE: usize = 1 << 20;

/// Fill `buf` from `reader`, in pieces of [`READ_PIECE`] bytes with an
/// [`interrupt::check`] every [`interrupt::PIECE`] bytes; a read
/// interrupted by a signal (`EINTR`) is retried only once the check let it
/// go on.
fn read_exact(reader: &mut impl Read, buf: &mut [u8]) -> Result<()> {
    let mut done = 0;
    let mut since_check = 0;
    while done < buf.len() {
        if since_check >= interrupt::PIECE {
            interrupt::check()?;
            since_check = 0;
        }
        let end = buf.len().min(done + READ_PIECE);
        match reader.read(&mut buf[done..end]) {
            Ok(0) => return Err(Error::format("the archive is truncated")),
            Ok(n) => {
                done += n;
                since_check += n;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => interrupt::check()?,
            Err(e) => return Err(io_read_error(e)),
        }
    }
    Ok(())
}

/// Read until `buf` is full or the end; returns how much was read.
fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => interrupt::check()?,
            Err(e) => return Err(io_read_error(e)),
        }
    }
    Ok(got)
}

/// A `FormatError` unless `bytes`, a whole entry, hash to `crc`.
fn check_crc_of(bytes: &[u8], crc: u32) -> Result<()> {
    if crc32fast::hash(bytes) != crc {
        return Err(Error::format("CRC mismatch: the data is corrupt"));
    }
    Ok(())
}

/// An error when `reader` holds a dataset file (many maps, see
/// `dataset/mod.rs`): the magic of version 2 and later, or version 1's
/// first entry, the dataset's header ([`zip::dataset_start`]). A zip
/// reader would otherwise find the end record of the last map's own
/// archive at the end of a dataset being written, and load that map as if
/// it were the file. Reads the first bytes and seeks back to the start.
pub(crate) fn refuse_dataset<R: Read + Seek>(reader: &mut R) -> Result<()> {
    let mut head = [0u8; zip::LOCAL_LEN + zip::DATASET_HEADER_NAME.len()];
    let seek = |reader: &mut R| {
        reader
            .seek(std::io::SeekFrom::Start(0))
            .map_err(io_read_error)
    };
    seek(reader)?;
    let got = read_up_to(reader, &mut head)?;
    seek(reader)?;
    if zip::dataset_start(&head[..got]).is_some() {
        return Err(Error::format(
            "this is a blockmap dataset (many maps in one file), not one map: open it with \
             blockmap.Dataset(path)",
        ));
    }
    Ok(())
}

/// Entries read through a `Read + Seek` (a file): every array is copied
/// once into memory blockmap owns, and every CRC is checked.
pub(crate) struct ReaderSource<R: Read + Seek> {
    reader: R,
    directory: Directory,
}

impl<R: Read + Seek> ReaderSource<R> {
    pub fn new(mut reader: R) -> Result<Self> {
        refuse_dataset(&mut reader)?;
        Self::new_checked(reader)
    }

    /// [`ReaderSource::new`] of a reader whose start was checked by
    /// [`refuse_dataset`] already (through the file under it: a buffered
    /// reader would read a whole buffer for the check).
    pub fn new_checked(mut reader: R) -> Result<Self> {
        let directory = Directory::read(&mut reader)?;
        Ok(ReaderSource { reader, directory })
    }
}

/// The entry named `name` of `directory`.
fn find<'d>(directory: &'d Directory, name: &str) -> Result<&'d zip_reader::DirEntry> {
    directory
        .index_of(name)
        .map(|index| directory.entry(index))
        .ok_or_else(|| Error::format(format!("the archive has no entry '{name}'")))
}

impl<R: Read + Seek> Source for ReaderSource<R> {
    fn names(&self) -> &Directory {
        &self.directory
    }

    fn npy(&mut self, name: &str) -> Result<Npy> {
        let context = |e: Error| e.context(format!("entry '{name}'"));
        let entry = find(&self.directory, name)?;
        let size = entry.size;
        zip_reader::open(&mut self.reader, entry, name)
            .and_then(|file| read_npy(file, size))
            .map_err(context)
    }

    fn text(&mut self, name: &str, limit: usize) -> Result<String> {
        let entry = find(&self.directory, name)?;
        let file = zip_reader::open(&mut self.reader, entry, name)
            .map_err(|e| e.context(format!("entry '{name}'")))?;
        read_text(file, name, limit)
    }
}

fn read_text(mut reader: impl Read, name: &str, limit: usize) -> Result<String> {
    let mut bytes = Vec::new();
    reader
        .by_ref()
        .take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io_read_error)?;
    if bytes.len() > limit {
        return Err(Error::format(format!(
            "entry '{name}' is larger than {limit} bytes"
        )));
    }
    String::from_utf8(bytes).map_err(|_| Error::format(format!("entry '{name}' is not UTF-8")))
}

/// Entries of an archive held in a [`Buffer`] (a mapped file, or bytes
/// given by the caller): STORED entries are viewed in place, and copied
/// only when misaligned, byte-swapped or in Fortran order; compressed
/// entries are inflated into new memory.
///
/// The archive's structure (central directory, local and NPY headers) is
/// read through `R`: the buffer itself (`Cursor<Buffer>`), or for a mapped
/// file the file, so that a mapped load touches no page of the mapping
/// but those of the arrays it views.
pub(crate) struct BufferSource<R: Read + Seek> {
    reader: R,
    directory: Directory,
    buffer: Pieces,
    /// check the CRCs of the arrays viewed (a pass over their data)
    check_crc: bool,
    /// check the CRCs of labels, which are read whole through the reader
    /// into memory they own (for a mapped file, no page of the mapping is
    /// touched for them), so that checking them costs a hash of what is
    /// read anyway
    check_labels_crc: bool,
    /// ranges of a mapped file read ahead, which labels view
    prefetched: Option<Prefetched>,
}

impl BufferSource<PiecesReader> {
    /// Entries of the archive in `buffer` (one or more pieces), viewing it;
    /// with `check_crc`, the CRC of every viewed entry is checked (a pass
    /// over its data).
    pub fn new(buffer: Pieces, check_crc: bool) -> Result<Self> {
        let mut reader = buffer.reader();
        refuse_dataset(&mut reader)?;
        let directory = Directory::read(&mut reader)?;
        Ok(BufferSource {
            reader,
            directory,
            buffer,
            check_crc,
            check_labels_crc: check_crc,
            prefetched: None,
        })
    }
}

/// Of an array's entry a mapped load views, this much is read ahead: its
/// local header and its NPY header (longer ones are read when met).
const PREFETCH_HEAD: u64 = 512;
/// Entries other than arrays (labels, `info.json`) up to this size are read
/// ahead whole.
const PREFETCH_WHOLE: u64 = 16 << 20;
/// At most this much of a file is read ahead; past it, entries are read
/// when met.
const PREFETCH_TOTAL: u64 = 256 << 20;

/// The ranges of the file a mapped load reads, from the central directory:
/// the headers of the arrays (`values.npy` entries, whose data is viewed)
/// and the whole of the other entries, which are copied (labels).
fn structure_ranges(directory: &Directory) -> Vec<std::ops::Range<u64>> {
    let mut ranges = Vec::with_capacity(directory.len());
    let mut total = 0u64;
    for i in 0..directory.len() {
        let (entry, name) = (directory.entry(i), directory.name(i));
        let start = entry.header;
        // the local header: 30 bytes, the name, and an extra field of a
        // length the central directory does not give (room for the usual)
        let header = 30 + name.len() as u64 + PREFETCH_HEAD;
        let whole = header.saturating_add(entry.compressed);
        let array = name.ends_with("values.npy");
        let len = if !array && entry.compressed <= PREFETCH_WHOLE {
            whole
        } else {
            header
        };
        // past the limit, what is left is read when met
        if total.saturating_add(len) > PREFETCH_TOTAL {
            continue;
        }
        total += len;
        ranges.push(start..start.saturating_add(len));
    }
    ranges
}

impl BufferSource<CachedFile> {
    /// Entries of a mapped file: arrays view `buffer` (the mapping), while
    /// the structure and the labels are read through `file` (into memory
    /// the labels own): the load touches no page of the mapping. With
    /// `read_ahead` (a load of every entry), the structure and the labels
    /// are read ahead of use (see [`CachedFile::prefetch`]), and labels
    /// view the bytes read ahead; a load of selected blocks reads only
    /// theirs, when met.
    pub fn mapped(mut file: CachedFile, buffer: Pieces, read_ahead: bool) -> Result<Self> {
        refuse_dataset(&mut file)?;
        let directory = Directory::read(&mut file)?;
        let prefetched = if read_ahead {
            Some(file.prefetch(structure_ranges(&directory))?)
        } else {
            None
        };
        Ok(BufferSource {
            reader: file,
            directory,
            buffer,
            check_crc: false,
            // a file's labels: bits flipped there gave other labels
            check_labels_crc: true,
            prefetched,
        })
    }
}

impl<R: Read + Seek> BufferSource<R> {
    /// The STORED entry `index` of a mapped load whose headers were read
    /// ahead, decoded from the bytes read ahead without reading the file
    /// again: the local header gives where the data starts, and the NPY
    /// header is parsed where it lies. `None` when the headers are not all
    /// in the ranges read ahead (or the entry is compressed): the entry is
    /// then read as any other, which also gives the errors of an entry
    /// whose headers run past what was read ahead.
    fn npy_read_ahead(&self, index: usize, name: &str) -> Result<Option<Npy>> {
        let Some(ahead) = &self.prefetched else {
            return Ok(None);
        };
        let entry = self.directory.entry(index);
        if entry.encrypted() || entry.method != zip_reader::STORED {
            return Ok(None);
        }
        zip_reader::check_entry(entry).map_err(|e| e.context(format!("entry '{name}'")))?;
        let (compressed, header_start) = (entry.compressed, entry.header);
        // the local header: signature, fixed fields and name (checked
        // against the directory's), then the extra field, whose length it
        // gives
        let local_len = entry.local_named_len();
        let local = ahead.bytes_up_to(header_start, local_len);
        let Some(local) = local.filter(|local| local.len() == local_len) else {
            return Ok(None);
        };
        let data_start = zip_reader::local_data_start(entry, name, local)
            .map_err(|e| e.context(format!("entry '{name}'")))?;
        let (Ok(data_start), Ok(len)) = (usize::try_from(data_start), usize::try_from(compressed))
        else {
            return Ok(None);
        };
        // the NPY header, as far as it was read ahead (the whole entry, for
        // labels)
        let Some(head) = ahead.bytes_up_to(data_start as u64, len) else {
            return Ok(None);
        };
        let header = match read_npy_header(&mut &head[..], len) {
            Ok(header) => header,
            // all of the entry was there: its error is the entry's
            Err(e) if head.len() == len => return Err(e.context(format!("entry '{name}'"))),
            // part of it: the entry is read in full, which tells
            Err(_) => return Ok(None),
        };
        let outside = || {
            Error::format(format!(
                "entry '{name}': entry data lies outside the archive"
            ))
        };
        let data_len = header.data_len()?;
        let data_at = data_start.checked_add(header.len).ok_or_else(outside)?;
        let payload = if matches!(header.descr, Descr::Fields(_)) {
            // labels: all of the entry was read ahead, or it is read again
            if head.len() < len {
                return Ok(None);
            }
            if self.check_labels_crc {
                check_crc_of(head, entry.crc).map_err(|e| e.context(format!("entry '{name}'")))?;
            }
            match ahead.view(data_at as u64, data_len) {
                Some(view) => Payload::Private(view),
                None => return Ok(None),
            }
        } else {
            Payload::View(self.buffer.slice(data_at, data_len)?.ok_or_else(outside)?)
        };
        Ok(Some(Npy { header, payload }))
    }
}

impl<R: Read + Seek> Source for BufferSource<R> {
    fn names(&self) -> &Directory {
        &self.directory
    }

    fn npy(&mut self, name: &str) -> Result<Npy> {
        let context = |e: Error| e.context(format!("entry '{name}'"));
        let index = self
            .directory
            .index_of(name)
            .ok_or_else(|| Error::format(format!("the archive has no entry '{name}'")))?;
        if let Some(npy) = self.npy_read_ahead(index, name)? {
            return Ok(npy);
        }
        let entry = self.directory.entry(index);
        zip_reader::check_entry(entry).map_err(context)?;
        if entry.method != zip_reader::STORED {
            let size = entry.size;
            return zip_reader::open(&mut self.reader, entry, name)
                .and_then(|file| read_npy(file, size))
                .map_err(context);
        }
        let (compressed, crc) = (entry.compressed, entry.crc);
        let start = zip_reader::data_start(&mut self.reader, entry, name).map_err(context)?;
        let outside = || context(Error::format("entry data lies outside the archive"));
        let (start, len) = usize::try_from(start)
            .ok()
            .zip(usize::try_from(compressed).ok())
            .filter(|&(start, len)| start.checked_add(len).is_some())
            .ok_or_else(outside)?;
        self.reader
            .seek(std::io::SeekFrom::Start(start as u64))
            .map_err(io_read_error)?;
        let mut raw = (&mut self.reader).take(compressed);
        let header = read_npy_header(&mut raw, len).map_err(context)?;
        let payload = if matches!(header.descr, Descr::Fields(_)) {
            // labels: the whole entry in memory the load owns (read ahead,
            // or read again), its CRC checked there, and the labels
            // validated where they are
            let ahead = self
                .prefetched
                .as_ref()
                .and_then(|ahead| ahead.view(start as u64, len));
            let whole = if let Some(view) = ahead {
                view
            } else {
                self.reader
                    .seek(std::io::SeekFrom::Start(start as u64))
                    .map_err(io_read_error)?;
                let reader = &mut self.reader;
                Buffer::filled(len, |bytes| read_exact(reader, bytes)).map_err(context)?
            };
            if self.check_labels_crc {
                let bytes = whole
                    .private_bytes()
                    .ok_or_else(|| Error::internal("labels read into shared memory"))?;
                check_crc_of(bytes, crc).map_err(context)?;
            }
            Payload::Private(whole.slice(header.len, header.data_len()?)?)
        } else {
            if self.check_crc {
                let entry = self.buffer.slice(start, len)?.ok_or_else(outside)?;
                if entry.raw().crc32() != crc {
                    return Err(context(Error::format("CRC mismatch: the data is corrupt")));
                }
            }
            // the data alone: in pieces, an array's NPY header may lie in
            // the piece before its data
            let data = self
                .buffer
                .slice(start + header.len, header.data_len()?)?
                .ok_or_else(outside)?;
            Payload::View(data)
        };
        Ok(Npy { header, payload })
    }

    fn text(&mut self, name: &str, limit: usize) -> Result<String> {
        let entry = find(&self.directory, name)?;
        let file = zip_reader::open(&mut self.reader, entry, name)
            .map_err(|e| e.context(format!("entry '{name}'")))?;
        read_text(file, name, limit)
    }
}

/// Labels from a bare NPY file read from `reader`, reading only what the
/// answer needs: the preamble, the header, then the bytes the header
/// announces, and one more to find that nothing follows. When the `size`
/// of the file is known, a header announcing more (or less) data than the
/// file holds is refused before anything is allocated for the data;
/// otherwise memory grows with the data actually read.
pub(crate) fn labels_from_reader(mut reader: impl Read, size: Option<u64>) -> Result<Labels> {
    let mut prefix = [0u8; 12];
    let got = read_up_to(&mut reader, &mut prefix[..10])?;
    let preamble_len = if got == 10 && prefix[6] >= 2 {
        10 + read_up_to(&mut reader, &mut prefix[10..12])?
    } else {
        got
    };
    let (preamble, header_len) = npy::header_extent(&prefix[..preamble_len])?;
    let mut text = zeroed_vec(header_len)?;
    read_exact(&mut reader, &mut text).map_err(|_| Error::format("npy header is truncated"))?;
    let header = npy::parse_header(&text, preamble)?;
    let data_len = header.data_len()?;
    if let Some(size) = size {
        let expected = u64::try_from(header.len + data_len).unwrap_or(u64::MAX);
        if expected != size {
            return Err(Error::format(format!(
                "npy data is {} bytes, but the shape {:?} needs {data_len}",
                size.saturating_sub(header.len as u64),
                header.shape
            )));
        }
    }
    let data = if size.is_some() {
        let mut data = AlignedBytes::zeroed(data_len)?;
        read_exact(&mut reader, data.as_mut_slice())
            .map_err(|_| Error::format("npy data is truncated"))?;
        data
    } else {
        // unknown size: grow with what arrives, never with what is claimed
        let mut data = Vec::new();
        let mut piece = zeroed_vec((64 << 10).min(data_len))?;
        while data.len() < data_len {
            let want = piece.len().min(data_len - data.len());
            let n = read_up_to(&mut reader, &mut piece[..want])?;
            if n == 0 {
                return Err(Error::format(format!(
                    "npy data is {} bytes, but the shape {:?} needs {data_len}",
                    data.len(),
                    header.shape
                )));
            }
            data.try_reserve(n)?;
            data.extend_from_slice(&piece[..n]);
        }
        AlignedBytes::copy_from(&data)?
    };
    let mut extra = [0u8; 1];
    if read_up_to(&mut reader, &mut extra)? != 0 {
        return Err(Error::format("the npy file has data past its end"));
    }
    Npy {
        header,
        payload: Payload::Owned(data),
    }
    .into_labels()
}

/// Labels from a bare NPY file held in `buffer`: the caller's memory,
/// which another thread may rewrite meanwhile, so it is read as a file is
/// (header and values copied once, then parsed and validated from the
/// copies; labels own what they validated).
pub(crate) fn labels_from_npy(buffer: &Buffer) -> Result<Labels> {
    let size = buffer.len() as u64;
    labels_from_reader(Pieces::one(buffer.clone()).reader(), Some(size))
}

/// The largest info.json accepted (see `limits.rs`).
const MAX_INFO_LEN: usize = crate::limits::MAX_INFO_JSON;

/// Read the `TensorMap` of an archive; with `selection`, only the blocks
/// whose keys match it (as `Labels::select` matches: the entries that have
/// the selection's values in its dimensions), and no other entry.
pub(crate) fn tensor(source: &mut impl Source, selection: Option<&Labels>) -> Result<TensorMap> {
    let all_keys = source
        .npy("keys.npy")
        .and_then(Npy::into_labels)
        .map_err(|e| e.context("keys"))?;
    let (keys, positions) = match selection {
        None => {
            let positions: Vec<usize> = (0..all_keys.count()).collect();
            (all_keys, positions)
        }
        Some(selection) => {
            let positions = all_keys
                .select(selection)
                .map_err(|e| e.context("selecting keys"))?;
            let mut rows = Vec::new();
            rows.try_reserve_exact(positions.len() * all_keys.size())?;
            for &i in &positions {
                rows.extend_from_slice(all_keys.row(i));
            }
            (Labels::new(all_keys.names().to_vec(), &rows)?, positions)
        }
    };
    let mut blocks = Vec::with_capacity(positions.len());
    for i in positions {
        let prefix = format!("blocks/{i}/");
        blocks.push(block(source, &prefix, None, 0).map_err(|e| e.context(format!("block {i}")))?);
    }
    let mut map = TensorMap::new(keys, blocks)?;
    if source.names().contains("info.json") {
        let text = source.text("info.json", MAX_INFO_LEN)?;
        let info: BTreeMap<crate::limits::JsonStr<'_>, crate::limits::JsonStr<'_>> =
            serde_json::from_str(&text).map_err(|e| {
                Error::format(format!("info.json is not a JSON object of strings: {e}"))
            })?;
        map.replace_info(crate::limits::owned_info(info)?)?;
    }
    Ok(map)
}

/// Read the block whose entries start with `prefix`; a gradient block
/// (`parent` given) has no properties entry: it uses the parent's. `depth`
/// is how many gradient levels lie above it: past the limit of gradient
/// nesting the archive is refused before reading further (the recursion is
/// bounded, whatever the archive holds).
pub(crate) fn block(
    source: &mut impl Source,
    prefix: &str,
    parent: Option<&TensorBlock>,
    depth: usize,
) -> Result<TensorBlock> {
    if depth > crate::limits::MAX_GRADIENT_DEPTH {
        return Err(Error::format(format!(
            "gradients nest more than {} levels deep",
            crate::limits::MAX_GRADIENT_DEPTH
        )));
    }
    // the entry names, `prefix` then the name, made in one reused string
    let mut path = String::with_capacity(prefix.len() + 32);
    let mut npy = |source: &mut _, name: &str| -> Result<Npy> {
        path.clear();
        path.push_str(prefix);
        path.push_str(name);
        Source::npy(source, &path)
    };
    let values = npy(source, "values.npy")?.into_array()?;
    let samples = npy(source, "samples.npy")?.into_labels()?;
    let n_components = values.shape().len().checked_sub(2).ok_or_else(|| {
        Error::format(format!(
            "values must have at least 2 dimensions, got shape {:?}",
            values.shape()
        ))
    })?;
    let mut components = Vec::with_capacity(n_components);
    for k in 0..n_components {
        components.push(npy(source, &format!("components/{k}.npy"))?.into_labels()?);
    }
    let properties = match parent {
        Some(parent) => parent.properties().clone(),
        None => npy(source, "properties.npy")?.into_labels()?,
    };
    let mut block = TensorBlock::new(values, samples, components, properties)?;

    let gradients_prefix = format!("{prefix}gradients/");
    // the names are sorted: a parameter's entries are next to each other
    let mut parameters: Vec<String> = Vec::new();
    for name in source.names().starting_with(&gradients_prefix) {
        let parameter = name[gradients_prefix.len()..]
            .split('/')
            .next()
            .unwrap_or_default();
        if parameters.last().map(String::as_str) != Some(parameter) {
            parameters.push(parameter.to_string());
        }
    }
    for parameter in parameters {
        let prefix_of_gradient = format!("{gradients_prefix}{parameter}/");
        let gradient = self::block(source, &prefix_of_gradient, Some(&block), depth + 1)
            .map_err(|e| e.context(format!("gradient '{parameter}'")))?;
        block.add_gradient(&parameter, gradient)?;
    }
    Ok(block)
}
