//! The writer of `.mts` archives: STORED entries only, the data of each
//! starting on a multiple of 64 bytes from the start of the archive (the
//! local header padded by an extra field of id `0xa11e`, the alignment
//! field of the zip format's appendix), a real CRC32, the timestamp
//! 2000-01-01 00:00, Unix permissions 0644, ZIP64 fields for entries of
//! 4 GiB or more and ZIP64 end records when the central directory needs
//! them. The bytes are those the `zip` crate (9.8) wrote before this
//! writer replaced it, byte for byte, so that the same data still gives the
//! same file (`io/tests.rs`, `archives_keep_their_bytes`).
//!
//! Writing goes forward only: each entry's local header is written with a
//! zero CRC and sizes, then its data, then the CRC and sizes are given to
//! the sink as a patch of the header ([`Sink::patch`]), which each sink
//! applies in its own way (seeking back, or rewriting memory it holds).

use crate::buffer::RawBytes;
use std::io::{Seek, SeekFrom, Write};

use super::records::{
    clamp32, CENTRAL, DOS_DATE, DOS_TIME, END, LOCAL, LOCAL_LEN, MAX32, ZIP64_END, ZIP64_EXTRA,
    ZIP64_LOCATOR,
};
use crate::io::bytes::{put_u16, put_u32, put_u64};

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

    /// Write `bytes` at `offset`, before the current position `end` (a
    /// local header's CRC and sizes, once its entry is written), and leave
    /// the position at `end`. By default: seek there, write, seek back.
    fn patch(&mut self, offset: u64, bytes: &[u8], end: u64) -> std::io::Result<()> {
        self.seek(SeekFrom::Start(offset))?;
        self.write_all(bytes)?;
        self.seek(SeekFrom::Start(end))?;
        Ok(())
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

    fn patch(&mut self, offset: u64, bytes: &[u8], end: u64) -> std::io::Result<()> {
        (**self).patch(offset, bytes, end)
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
    fn seek(&mut self, from: SeekFrom) -> std::io::Result<u64> {
        self.0.seek(from)
    }
}

impl<W: Write + Seek> Sink for Plain<W> {}

/// Snapshots made by a writer's own copy: `write` copies what fits of the
/// data and returns the copy, which is hashed while it is in the CPU cache.
pub(crate) fn snapshot_by_copy<W>(
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

/// The alignment of every entry's data from the start of the archive.
const ALIGN: u64 = 64;
const ALIGN16: u16 = 64;
const _: () = assert!(ALIGN == ALIGN16 as u64 && ALIGN == crate::buffer::ALIGNMENT as u64);
/// The extra field padding a local header (the zip format's "data stream
/// alignment", APPNOTE 4.6.11's id), holding the alignment then zeros.
const ALIGNMENT_EXTRA: u16 = 0xa11e;
/// The version needed to extract: 1.0 (STORED), 4.5 with ZIP64 sizes.
const VERSION_PLAIN: u16 = 10;
const VERSION_ZIP64: u16 = 45;
/// The general purpose flag of a name in UTF-8.
const UTF8_FLAG: u16 = 0x0800;
/// `-rw-r--r--`, a regular file, in the high half of the external
/// attributes (made on Unix).
const EXTERNAL_ATTRIBUTES: u32 = 0o100_644 << 16;
/// Entries past this many use the ZIP64 end records.
const MAX_ENTRIES16: usize = 0xFFFF;

/// An entry written (or being written), for the central directory.
#[derive(Debug)]
struct Entry {
    name: Box<str>,
    /// where its local header starts
    offset: u64,
    crc: u32,
    size: u64,
    /// ZIP64 sizes (local and central)
    large: bool,
}

impl Entry {
    fn version(&self) -> u16 {
        if self.large {
            VERSION_ZIP64
        } else {
            VERSION_PLAIN
        }
    }

    fn flags(&self) -> u16 {
        if self.name.is_ascii() {
            0
        } else {
            UTF8_FLAG
        }
    }
}

fn name_too_long() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "zip entry name longer than 65535 bytes",
    )
}

/// The local header of `entry`, with a zero CRC and sizes (ZIP64 sizes
/// when `large`), padded so that the data starts on a multiple of
/// [`ALIGN`] from the start of the archive.
fn local_header(entry: &Entry) -> std::io::Result<Vec<u8>> {
    let name = entry.name.as_bytes();
    let zip64_len: u64 = if entry.large { 20 } else { 0 };
    let unaligned = (entry.offset + (LOCAL_LEN + name.len()) as u64 + zip64_len) % ALIGN;
    let mut pad = 0;
    if unaligned != 0 {
        pad = ALIGN - unaligned;
        // the field's id, length and alignment take 6 bytes
        while pad < 6 {
            pad += ALIGN;
        }
    }
    let extra_len = u16::try_from(zip64_len + pad).map_err(|_| name_too_long())?;
    let mut out = Vec::new();
    out.try_reserve_exact(LOCAL_LEN + name.len() + usize::from(extra_len))
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
    put_u32(&mut out, LOCAL);
    put_u16(&mut out, entry.version());
    put_u16(&mut out, entry.flags());
    put_u16(&mut out, 0); // STORED
    put_u16(&mut out, DOS_TIME);
    put_u16(&mut out, DOS_DATE);
    put_u32(&mut out, 0); // the CRC, patched in
    let sizes = if entry.large { u32::MAX } else { 0 };
    put_u32(&mut out, sizes);
    put_u32(&mut out, sizes);
    put_u16(
        &mut out,
        u16::try_from(name.len()).map_err(|_| name_too_long())?,
    );
    put_u16(&mut out, extra_len);
    out.extend_from_slice(name);
    if entry.large {
        put_u16(&mut out, ZIP64_EXTRA);
        put_u16(&mut out, 16);
        put_u64(&mut out, 0);
        put_u64(&mut out, 0);
    }
    if pad != 0 {
        put_u16(&mut out, ALIGNMENT_EXTRA);
        put_u16(
            &mut out,
            u16::try_from(pad - 4).map_err(|_| name_too_long())?,
        );
        put_u16(&mut out, ALIGN16);
        out.resize(out.len() + usize::try_from(pad - 6).unwrap_or(0), 0);
    }
    Ok(out)
}

/// The central directory header of `entry`, appended to `out`.
fn central_header(entry: &Entry, out: &mut Vec<u8>) -> std::io::Result<()> {
    let name = entry.name.as_bytes();
    let mut zip64_len: u16 = 0;
    if entry.large {
        zip64_len += 16;
    }
    let far = entry.offset >= MAX32;
    if far {
        zip64_len += 8;
    }
    let extra_len = if zip64_len == 0 { 0 } else { 4 + zip64_len };
    put_u32(out, CENTRAL);
    put_u16(out, (3 << 8) | entry.version());
    put_u16(out, entry.version());
    put_u16(out, entry.flags());
    put_u16(out, 0); // STORED
    put_u16(out, DOS_TIME);
    put_u16(out, DOS_DATE);
    put_u32(out, entry.crc);
    let size = if entry.large {
        u32::MAX
    } else {
        clamp32(entry.size)
    };
    put_u32(out, size);
    put_u32(out, size);
    put_u16(out, u16::try_from(name.len()).map_err(|_| name_too_long())?);
    put_u16(out, extra_len);
    put_u16(out, 0); // comment
    put_u16(out, 0); // disk
    put_u16(out, 0); // internal attributes
    put_u32(out, EXTERNAL_ATTRIBUTES);
    put_u32(out, clamp32(entry.offset));
    out.extend_from_slice(name);
    if zip64_len != 0 {
        put_u16(out, ZIP64_EXTRA);
        put_u16(out, zip64_len);
        if entry.large {
            put_u64(out, entry.size);
            put_u64(out, entry.size);
        }
        if far {
            put_u64(out, entry.offset);
        }
    }
    Ok(())
}

/// The central directory is handed to the sink in pieces of about this
/// size.
const DIRECTORY_PIECE: usize = 64 << 10;

/// An archive being written into a [`Sink`]: entries one after the other
/// (`start`, data, `finish_entry`), then `finish` writes the central
/// directory and the end records. Nothing is written when it is dropped:
/// an archive abandoned on an error is left as it stands (the callers
/// throw it away).
pub(crate) struct ZipWriter<S: Sink> {
    sink: S,
    /// where the sink stands: offsets in the archive are positions in the
    /// sink (an archive written after other data has offsets past it, as
    /// the `zip` crate wrote them)
    position: u64,
    entries: Vec<Entry>,
    /// the entry being written: its data's start and CRC so far
    open: Option<(u64, crc32fast::Hasher)>,
}

impl<S: Sink> ZipWriter<S> {
    pub fn new(mut sink: S) -> std::io::Result<Self> {
        let position = sink.stream_position()?;
        Ok(ZipWriter {
            sink,
            position,
            entries: Vec::new(),
            open: None,
        })
    }

    /// Start the entry `name`, whose size will be `size` (ZIP64 sizes from
    /// a little under 4 GiB: the `zip` crate's threshold).
    pub fn start(&mut self, name: &str, size: usize) -> std::io::Result<()> {
        const LARGE_FROM: usize = 0xFFFF_0000;
        self.start_entry(name, size >= LARGE_FROM)
    }

    /// Start the entry `name`, with ZIP64 sizes when `large`.
    fn start_entry(&mut self, name: &str, large: bool) -> std::io::Result<()> {
        if self.open.is_some() {
            self.finish_entry()?;
        }
        let mut owned = String::new();
        owned
            .try_reserve_exact(name.len())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        owned.push_str(name);
        let entry = Entry {
            name: owned.into_boxed_str(),
            offset: self.position,
            crc: 0,
            size: 0,
            large,
        };
        let header = local_header(&entry)?;
        self.entries
            .try_reserve(1)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        self.sink.write_all(&header)?;
        self.position += header.len() as u64;
        self.entries.push(entry);
        self.open = Some((self.position, crc32fast::Hasher::new()));
        Ok(())
    }

    fn hasher(&mut self) -> std::io::Result<&mut crc32fast::Hasher> {
        match &mut self.open {
            Some((_, crc)) => Ok(crc),
            None => Err(std::io::Error::other("no zip entry is open")),
        }
    }

    /// Write `bytes` into the open entry.
    pub fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.hasher()?;
        self.sink.write_all(bytes)?;
        self.hasher()?.update(bytes);
        self.position += bytes.len() as u64;
        Ok(())
    }

    /// Write a snapshot of `piece` into the open entry (see
    /// [`Sink::write_snapshot`]).
    pub fn write_snapshot(
        &mut self,
        piece: RawBytes<'_>,
        scratch: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        let Some((_, crc)) = &mut self.open else {
            return Err(std::io::Error::other("no zip entry is open"));
        };
        self.sink.write_snapshot(piece, crc, scratch)?;
        self.position += piece.len() as u64;
        Ok(())
    }

    /// Complete the open entry: its CRC and size go into its local header.
    pub fn finish_entry(&mut self) -> std::io::Result<()> {
        let Some((start, crc)) = self.open.take() else {
            return Ok(());
        };
        let entry = self
            .entries
            .last_mut()
            .ok_or_else(|| std::io::Error::other("no zip entry is open"))?;
        entry.crc = crc.finalize();
        entry.size = self.position - start;
        if !entry.large && entry.size >= MAX32 {
            return Err(std::io::Error::other(
                "a zip entry grew past the size it was started with",
            ));
        }
        let mut fields = Vec::with_capacity(12);
        put_u32(&mut fields, entry.crc);
        let size = if entry.large {
            u32::MAX
        } else {
            clamp32(entry.size)
        };
        put_u32(&mut fields, size);
        put_u32(&mut fields, size);
        self.sink.patch(entry.offset + 14, &fields, self.position)?;
        if entry.large {
            let mut zip64 = Vec::with_capacity(20);
            put_u16(&mut zip64, ZIP64_EXTRA);
            put_u16(&mut zip64, 16);
            put_u64(&mut zip64, entry.size);
            put_u64(&mut zip64, entry.size);
            let at = entry.offset + (LOCAL_LEN + entry.name.len()) as u64;
            self.sink.patch(at, &zip64, self.position)?;
        }
        Ok(())
    }

    /// Write the central directory and the end records; returns the sink.
    pub fn finish(mut self) -> std::io::Result<S> {
        self.finish_entry()?;
        let start = self.position;
        let mut piece = Vec::new();
        for entry in &self.entries {
            central_header(entry, &mut piece)?;
            if piece.len() >= DIRECTORY_PIECE {
                self.sink.write_all(&piece)?;
                self.position += piece.len() as u64;
                piece.clear();
            }
        }
        let count = self.entries.len();
        let size = self.position + piece.len() as u64 - start;
        let zip64 = count > MAX_ENTRIES16 || size.max(start) > MAX32;
        if zip64 {
            let version = self
                .entries
                .iter()
                .map(Entry::version)
                .max()
                .unwrap_or(VERSION_PLAIN);
            put_u32(&mut piece, ZIP64_END);
            put_u64(&mut piece, 44);
            put_u16(&mut piece, version);
            put_u16(&mut piece, version);
            put_u32(&mut piece, 0);
            put_u32(&mut piece, 0);
            put_u64(&mut piece, count as u64);
            put_u64(&mut piece, count as u64);
            put_u64(&mut piece, size);
            put_u64(&mut piece, start);
            put_u32(&mut piece, ZIP64_LOCATOR);
            put_u32(&mut piece, 0);
            put_u64(&mut piece, start + size);
            put_u32(&mut piece, 1);
        }
        let count16 = u16::try_from(count).unwrap_or(u16::MAX);
        put_u32(&mut piece, END);
        put_u16(&mut piece, 0);
        put_u16(&mut piece, 0);
        put_u16(&mut piece, count16);
        put_u16(&mut piece, count16);
        put_u32(&mut piece, if zip64 { u32::MAX } else { clamp32(size) });
        put_u32(&mut piece, clamp32(start));
        put_u16(&mut piece, 0); // comment
        self.sink.write_all(&piece)?;
        Ok(self.sink)
    }
}

#[cfg(test)]
mod tests {
    use super::super::records::{parse_local, zip64_values, CENTRAL_LEN};
    use super::*;
    use crate::io::bytes::{le16, le32};

    /// Entries with ZIP64 sizes (those of 4 GiB or more) are written as
    /// the `zip` crate wrote them: compared byte for byte with its output
    /// for small entries it was told are large (`large_file`).
    #[test]
    fn zip64_entries_as_the_zip_crate_wrote_them() {
        use ::zip::write::SimpleFileOptions;
        let options = |large: bool| {
            SimpleFileOptions::default()
                .compression_method(::zip::CompressionMethod::Stored)
                .last_modified_time(
                    ::zip::DateTime::from_date_and_time(2000, 1, 1, 0, 0, 0).unwrap(),
                )
                .with_alignment(64)
                .large_file(large)
                .unix_permissions(0o644)
        };
        let entries: [(&str, &[u8], bool); 4] = [
            ("keys.npy", b"0123456789", false),
            ("blocks/0/values.npy", &[7u8; 1000], true),
            ("blocks/0/gradients/\u{e9}/values.npy", b"x", true),
            ("info.json", b"{}", false),
        ];
        let mut theirs = ::zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, data, large) in entries {
            theirs.start_file(name, options(large)).unwrap();
            theirs.write_all(data).unwrap();
        }
        let theirs = theirs.finish().unwrap().into_inner();
        let mut ours = ZipWriter::new(Plain(std::io::Cursor::new(Vec::new()))).unwrap();
        for (name, data, large) in entries {
            ours.start_entry(name, large).unwrap();
            ours.write(data).unwrap();
            ours.finish_entry().unwrap();
        }
        let ours = ours.finish().unwrap().0.into_inner();
        assert_eq!(ours.len(), theirs.len());
        let first = ours.iter().zip(&theirs).position(|(a, b)| a != b);
        assert!(
            first.is_none(),
            "the archives differ first at byte {first:?}"
        );
    }

    /// Headers of entries at and past 4 GiB, and of entries whose header
    /// lies past 4 GiB, say so with ZIP64 fields, as Python's `zipfile`
    /// reads them (checked here by decoding them back).
    #[test]
    fn zip64_fields_where_needed() {
        let entry = Entry {
            name: "blocks/0/values.npy".into(),
            offset: 5_000_000_000,
            crc: 7,
            size: 4_500_000_000,
            large: true,
        };
        let header = local_header(&entry).unwrap();
        assert_eq!((entry.offset + header.len() as u64) % ALIGN, 0);
        let local = parse_local(&header).unwrap();
        assert_eq!(
            (local.name.as_str(), local.len, local.size),
            ("blocks/0/values.npy", header.len() as u64, 0),
            "a local header's sizes are patched in once its data is written"
        );
        let mut central = Vec::new();
        central_header(&entry, &mut central).unwrap();
        // the 32-bit sizes and offset say "in the ZIP64 field", which holds
        // the size, the compressed size and the offset, in that order
        assert_eq!(
            (le32(&central, 20), le32(&central, 24), le32(&central, 42)),
            (u32::MAX, u32::MAX, u32::MAX)
        );
        assert_eq!(le32(&central, 16), 7);
        let name_len = usize::from(le16(&central, 28));
        assert_eq!(central.len(), CENTRAL_LEN + name_len + 4 + 24);
        let values: Vec<u64> = zip64_values(&central[CENTRAL_LEN + name_len..]).collect();
        assert_eq!(values, [4_500_000_000, 4_500_000_000, 5_000_000_000]);
    }
}
