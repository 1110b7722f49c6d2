//! The central-directory reader every load of an `.mts` archive goes
//! through: the end records (ZIP64 ones included), then the central
//! directory, each entry's name, method, CRC, sizes and local header
//! offset; then an entry's data, from its local header on: STORED entries
//! as they lie in the archive, DEFLATE ones (archives from elsewhere:
//! blockmap and metatensor-core write STORED entries) inflated by `flate2`,
//! both stopping at the size the central directory declares and checking
//! its CRC at the end.
//!
//! Bounded against hostile input: the directory is read only when it lies
//! within the archive, and its declared count of entries is checked against
//! its size (every header takes 46 bytes at least) before anything is
//! allocated for them; a DEFLATE entry may not declare more than DEFLATE
//! can expand its compressed bytes to.
//!
//! Every byte of the archive belongs to one record at most, as Python's
//! `zipfile` requires since 3.12: an entry's local header and data end
//! before the next local header (or the central directory), so that no
//! bytes are read as the data of two entries (a directory listing 400
//! entries over one shared block of bytes made a 1.7 MB file load as
//! 620 MB). An entry's local header must name it and give its method. An
//! archive found after other bytes must not lie inside an entry of an
//! archive that starts before it (a truncated archive whose last entry
//! holds an archive of its own, whose end record is then the last one in
//! the file).

use std::io::{Read, Seek, SeekFrom};

use super::records::{
    skipped_record_len, zip64_values, CENTRAL, CENTRAL_LEN, END, END_LEN, LOCAL, LOCAL_LEN, MAX16,
    MAX32, ZIP64_END, ZIP64_END_LEN, ZIP64_LOCATOR, ZIP64_LOCATOR_LEN,
};
use crate::buffer::Buffer;
use crate::error::{Error, Result};
use crate::io::bytes::{le16, le32, le64};
use crate::io::pieces::Pieces;

/// The compression methods read.
pub(crate) const STORED: u16 = 0;
pub(crate) const DEFLATED: u16 = 8;

/// DEFLATE cannot compress by more than about 1032:1; an entry declaring a
/// larger ratio is refused before anything is allocated for it.
const MAX_DEFLATE_RATIO: u64 = 1032;

/// An entry of the central directory.
#[derive(Debug, Clone)]
pub(crate) struct DirEntry {
    /// where its name lies in the directory's names
    name: (usize, usize),
    pub method: u16,
    /// the general purpose flags (bit 0: encrypted)
    pub flags: u16,
    pub crc: u32,
    pub compressed: u64,
    pub size: u64,
    /// where its local header starts
    pub header: u64,
    /// the length of its name, as stored (the local header's must be the
    /// same)
    name_len: u16,
    /// where its bytes must end: the next local header of the archive, or
    /// the central directory
    limit: u64,
}

impl DirEntry {
    pub fn encrypted(&self) -> bool {
        self.flags & 1 != 0
    }

    /// The length of its local header's fixed part and name (what
    /// [`local_data_start`] reads).
    pub fn local_named_len(&self) -> usize {
        LOCAL_LEN + usize::from(self.name_len)
    }
}

/// The entries of an archive's central directory, and their names sorted
/// for lookups and prefix scans: one string holding them all, and where
/// each lies in it (no allocation per entry).
#[derive(Debug)]
pub(crate) struct Directory {
    text: String,
    /// in the directory's order
    entries: Vec<DirEntry>,
    /// indices of `entries`, sorted by name
    sorted: Vec<u32>,
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::format(format!("not a valid .mts (zip) archive: {what}"))
}

/// Errors the operating system reports (they have an errno) are I/O
/// errors; everything else met while reading (truncation, a corrupt DEFLATE
/// stream, a CRC mismatch) is about the content.
pub(crate) fn read_error(e: std::io::Error) -> Error {
    if e.raw_os_error().is_some() {
        return Error::io("reading the archive", e);
    }
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof => Error::format("the archive is truncated"),
        std::io::ErrorKind::OutOfMemory => Error::OutOfMemory(format!("reading the archive: {e}")),
        _ => Error::format(format!("corrupt archive: {e}")),
    }
}

/// Read exactly `buf` at `offset` of `reader`.
fn read_at<R: Read + Seek>(reader: &mut R, offset: u64, buf: &mut [u8]) -> Result<()> {
    reader.seek(SeekFrom::Start(offset)).map_err(read_error)?;
    let mut done = 0;
    while done < buf.len() {
        match reader.read(&mut buf[done..]) {
            Ok(0) => return Err(Error::format("the archive is truncated")),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => crate::interrupt::check()?,
            Err(e) => return Err(read_error(e)),
        }
    }
    Ok(())
}

/// `len` zero bytes, or an out-of-memory error.
fn zeroed(len: usize) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len)?;
    bytes.resize(len, 0);
    Ok(bytes)
}

/// Where the central directory lies, as the end records say.
#[derive(Debug)]
pub(crate) struct EndRecords {
    /// the entries the directory lists
    pub count: u64,
    pub cd_size: u64,
    pub cd_offset: u64,
    /// where the records after the directory start (the ZIP64 end record,
    /// or the end record): the directory ends there
    pub records_at: u64,
    /// whether the values are a ZIP64 end record's (a locator precedes the
    /// end record)
    pub zip64: bool,
    /// the end record's comment
    pub comment: Vec<u8>,
}

/// Find the end records in the last bytes of the archive of `len` bytes:
/// the end record whose comment ends where the archive does (the last
/// such signature), then the ZIP64 end record when a locator precedes it.
/// An end record followed by other bytes is not taken: the archive it
/// ends is not the file's last (a file object holding an archive, into
/// which a save of another was cut short: the end found would be the
/// first's, and the file read as what it held before).
pub(crate) fn find_end<R: Read + Seek>(reader: &mut R, len: u64) -> Result<EndRecords> {
    let tail_len = len.min((END_LEN + 0xFFFF) as u64);
    if tail_len < END_LEN as u64 {
        return Err(bad("too short to be a zip archive"));
    }
    let tail_start = len - tail_len;
    let mut tail = zeroed(usize::try_from(tail_len).map_err(|_| bad("size"))?)?;
    read_at(reader, tail_start, &mut tail)?;
    let mut at = tail.len() - END_LEN;
    // an end record whose comment ends before the archive does
    let mut followed = None;
    let eocd = loop {
        if le32(&tail, at) == END {
            let end = at + END_LEN + usize::from(le16(&tail, at + 20));
            if end == tail.len() {
                break at;
            }
            if end < tail.len() && followed.is_none() {
                followed = Some(tail.len() - end);
            }
        }
        at = match at.checked_sub(1) {
            Some(at) => at,
            None => {
                return Err(bad(match followed {
                    Some(after) => format!(
                        "{after} bytes follow its end of central directory record (other \
                         data, or the start of another archive whose writing did not \
                         complete): its end is not the file's"
                    ),
                    None => "no end of central directory record".to_string(),
                }))
            }
        };
    };
    let comment = tail[eocd + END_LEN..].to_vec();
    let count16 = u64::from(le16(&tail, eocd + 10));
    let size32 = u64::from(le32(&tail, eocd + 12));
    let offset32 = u64::from(le32(&tail, eocd + 16));
    let eocd_at = tail_start + eocd as u64;
    // a ZIP64 locator right before the end record: the ZIP64 end record
    // holds the real values
    let mut locator = [0u8; ZIP64_LOCATOR_LEN];
    let has_locator = eocd_at >= ZIP64_LOCATOR_LEN as u64 && {
        read_at(reader, eocd_at - ZIP64_LOCATOR_LEN as u64, &mut locator)?;
        le32(&locator, 0) == ZIP64_LOCATOR
    };
    if !has_locator {
        if count16 == MAX16 && size32 == MAX32 {
            return Err(bad("ZIP64 values without a ZIP64 end record"));
        }
        return Ok(EndRecords {
            count: count16,
            cd_size: size32,
            cd_offset: offset32,
            records_at: eocd_at,
            zip64: false,
            comment,
        });
    }
    let record_at = le64(&locator, 8);
    let locator_at = eocd_at - ZIP64_LOCATOR_LEN as u64;
    if record_at
        .checked_add(ZIP64_END_LEN as u64)
        .is_none_or(|end| end > locator_at)
    {
        return Err(bad("the ZIP64 end record lies outside the archive"));
    }
    let mut record = [0u8; ZIP64_END_LEN];
    read_at(reader, record_at, &mut record)?;
    if le32(&record, 0) != ZIP64_END {
        return Err(bad("bad ZIP64 end record signature"));
    }
    Ok(EndRecords {
        count: le64(&record, 32),
        cd_size: le64(&record, 40),
        cd_offset: le64(&record, 48),
        records_at: record_at,
        zip64: true,
        comment,
    })
}

/// The name of `entry`, in the directory's names.
fn name_in<'t>(text: &'t str, entry: &DirEntry) -> &'t str {
    &text[entry.name.0..entry.name.1]
}

/// Give every entry the end its bytes may not pass (the next local header
/// in the archive, or the central directory), and refuse entries whose
/// local headers lie at the same place or whose declared bytes (a local
/// header at least as long as the name, then the data) run past that end:
/// overlapping entries would make the same bytes the data of many entries
/// (a small file loaded as gigabytes) or a header the data of another.
fn bound_entries(entries: &mut [DirEntry], text: &str, count: u32) -> Result<()> {
    let mut order = Vec::new();
    order.try_reserve_exact(entries.len())?;
    order.extend(0..count);
    order.sort_unstable_by_key(|&i| entries[i as usize].header);
    // from the last local header back: each ends where the next one starts
    let mut next: Option<u32> = None;
    for &i in order.iter().rev() {
        let limit = next.map(|n| entries[n as usize].header);
        let entry = &mut entries[i as usize];
        if let Some(limit) = limit {
            entry.limit = limit;
        }
        let least = (LOCAL_LEN as u64 + u64::from(entry.name_len)).checked_add(entry.compressed);
        let end = least.and_then(|least| entry.header.checked_add(least));
        if end.is_none_or(|end| end > entry.limit) {
            let entry = &entries[i as usize];
            return Err(overlap(
                name_in(text, entry),
                next.map(|n| name_in(text, &entries[n as usize])),
            ));
        }
        next = Some(i);
    }
    Ok(())
}

/// The error of entry `name` running into entry `next` (or the central
/// directory).
fn overlap(name: &str, next: Option<&str>) -> Error {
    let into = match next {
        Some(next) => format!("the entry '{next}'"),
        None => "the central directory".to_string(),
    };
    bad(format!(
        "the entry '{name}' overlaps {into}: the directory lists entries over the same \
         bytes (as a zip bomb does), or its sizes are wrong"
    ))
}

/// Where the data of `entry` (named `name`) starts, from the first bytes
/// of its local header, `local` (its fixed part and its name at least):
/// the header's signature, name and method checked against the central
/// directory's, and the data the directory declares within the entry's
/// bounds (see [`bound_entries`]).
pub(crate) fn local_data_start(entry: &DirEntry, name: &str, local: &[u8]) -> Result<u64> {
    if local.len() < LOCAL_LEN || le32(local, 0) != LOCAL {
        return Err(Error::format("bad local header signature"));
    }
    let (name_len, extra_len) = (le16(local, 26), le16(local, 28));
    let local_name = local.get(LOCAL_LEN..LOCAL_LEN + usize::from(name_len));
    if name_len != entry.name_len
        || local_name.is_none_or(|local_name| String::from_utf8_lossy(local_name) != name)
    {
        return Err(Error::format(format!(
            "the local header of '{name}' names another entry: the archive is corrupt"
        )));
    }
    if le16(local, 8) != entry.method {
        return Err(Error::format(format!(
            "the local header of '{name}' gives another compression method than the \
             central directory: the archive is corrupt"
        )));
    }
    let start = entry
        .header
        .checked_add(LOCAL_LEN as u64 + u64::from(name_len) + u64::from(extra_len))
        .ok_or_else(|| Error::format("entry data lies outside the archive"))?;
    if start
        .checked_add(entry.compressed)
        .is_none_or(|end| end > entry.limit)
    {
        return Err(Error::format(format!(
            "the data of '{name}' runs past the start of the next entry (or of the central \
             directory): the archive lists entries over the same bytes, or is corrupt"
        )));
    }
    Ok(start)
}

/// The bytes before an archive found `shift` bytes into the file: any
/// data, unless they start with a zip record (a local header). Then they
/// must be whole archives, records that end with an end record where the
/// archive starts (archives written one after the other); otherwise the
/// archive lies inside an entry of an archive that starts before it and
/// has lost its end (a truncated file whose last entry holds an archive,
/// or a save killed while writing it: reading the archive found would
/// give an entry's content for the file's).
fn check_prefix<R: Read + Seek>(reader: &mut R, shift: u64) -> Result<()> {
    let inside = || {
        bad(
            "the archive found at the end of the file lies inside an entry of another \
             archive, which is incomplete: the file is truncated",
        )
    };
    let mut head = [0u8; CENTRAL_LEN];
    let mut at = 0u64;
    let mut last = None;
    while at < shift {
        let want = usize::try_from(shift - at).map_or(CENTRAL_LEN, |left| left.min(CENTRAL_LEN));
        read_at(reader, at, &mut head[..want])?;
        let signature = (want >= 4).then(|| le32(&head, 0));
        if at == 0 && signature != Some(LOCAL) {
            // other data (a script, an executable, ...) before the archive
            return Ok(());
        }
        let len = match signature {
            Some(LOCAL) if want >= LOCAL_LEN => local_record_len(reader, at, &head)?,
            Some(signature) => skipped_record_len(signature, &head[..want]),
            None => None,
        };
        at = len
            .and_then(|len| at.checked_add(len))
            .filter(|&next| next <= shift)
            .ok_or_else(inside)?;
        last = signature;
    }
    if last != Some(END) {
        return Err(inside());
    }
    Ok(())
}

/// The length of the local header starting with `fixed` at `at` and of its
/// data, as the header gives it; `None` when it does not (sizes written
/// after the data: the general purpose flag's bit 3).
fn local_record_len<R: Read + Seek>(reader: &mut R, at: u64, fixed: &[u8]) -> Result<Option<u64>> {
    if le16(fixed, 6) & 8 != 0 {
        return Ok(None);
    }
    let (name_len, extra_len) = (u64::from(le16(fixed, 26)), usize::from(le16(fixed, 28)));
    let mut compressed = u64::from(le32(fixed, 18));
    if compressed == MAX32 {
        // the ZIP64 field holds the size, then the compressed size
        let mut extra = zeroed(extra_len)?;
        read_at(reader, at + LOCAL_LEN as u64 + name_len, &mut extra)?;
        let mut values = zip64_values(&extra);
        if u64::from(le32(fixed, 22)) == MAX32 {
            values.next();
        }
        let Some(value) = values.next() else {
            return Ok(None);
        };
        compressed = value;
    }
    Ok((LOCAL_LEN as u64 + name_len + extra_len as u64).checked_add(compressed))
}

impl Directory {
    /// Read the central directory of the archive in `reader` (its whole
    /// length: offsets are positions in the reader).
    pub fn read<R: Read + Seek>(reader: &mut R) -> Result<Directory> {
        let len = reader.seek(SeekFrom::End(0)).map_err(read_error)?;
        let end = find_end(reader, len)?;
        // the directory ends where the end records start; an archive
        // after other bytes (a prefix) has its offsets shifted by their
        // length, as Python's `zipfile` and the `zip` crate read it
        let shift = end
            .cd_offset
            .checked_add(end.cd_size)
            .and_then(|cd_end| end.records_at.checked_sub(cd_end))
            .ok_or_else(|| bad("the central directory lies outside the archive"))?;
        let cd_offset = end.cd_offset + shift;
        // every header takes CENTRAL_LEN bytes at least: the count is
        // bounded by the directory's size, itself within the archive
        if end.count > end.cd_size / CENTRAL_LEN as u64 {
            return Err(bad(format!(
                "the central directory declares {} entries, more than its {} bytes can hold",
                end.count, end.cd_size
            )));
        }
        let mut bytes = zeroed(usize::try_from(end.cd_size).map_err(|_| bad("size"))?)?;
        read_at(reader, cd_offset, &mut bytes)?;
        let count = usize::try_from(end.count).map_err(|_| bad("count"))?;
        let mut entries = Vec::new();
        entries.try_reserve_exact(count)?;
        let mut text = String::new();
        let mut at = 0;
        for _ in 0..count {
            if at + CENTRAL_LEN > bytes.len() || le32(&bytes, at) != CENTRAL {
                return Err(bad("bad central directory header"));
            }
            let name_len = usize::from(le16(&bytes, at + 28));
            let extra_len = usize::from(le16(&bytes, at + 30));
            let comment_len = usize::from(le16(&bytes, at + 32));
            let name_at = at + CENTRAL_LEN;
            let next = name_at + name_len + extra_len + comment_len;
            if next > bytes.len() {
                return Err(bad("truncated central directory"));
            }
            let name = String::from_utf8_lossy(&bytes[name_at..name_at + name_len]);
            let extra = &bytes[name_at + name_len..name_at + name_len + extra_len];
            let mut zip64 = zip64_values(extra);
            let mut value = |small: u64, what: &str| {
                if small == MAX32 {
                    zip64
                        .next()
                        .ok_or_else(|| bad(format!("the ZIP64 {what} of '{name}' is missing")))
                } else {
                    Ok(small)
                }
            };
            let size = value(u64::from(le32(&bytes, at + 24)), "size")?;
            let compressed = value(u64::from(le32(&bytes, at + 20)), "compressed size")?;
            let header = value(u64::from(le32(&bytes, at + 42)), "offset")?;
            let header = header
                .checked_add(shift)
                .filter(|&header| header < cd_offset)
                .ok_or_else(|| {
                    bad(format!(
                        "the local header of '{name}' lies outside the entries"
                    ))
                })?;
            text.try_reserve(name.len())?;
            let start = text.len();
            text.push_str(&name);
            entries.push(DirEntry {
                name: (start, text.len()),
                method: le16(&bytes, at + 10),
                flags: le16(&bytes, at + 8),
                crc: le32(&bytes, at + 16),
                compressed,
                size,
                header,
                name_len: le16(&bytes, at + 28),
                limit: cd_offset,
            });
            at = next;
        }
        drop(bytes);
        let count32 = u32::try_from(count).map_err(|_| bad("count"))?;
        bound_entries(&mut entries, &text, count32)?;
        if shift > 0 {
            check_prefix(reader, shift)?;
        }
        let mut sorted = Vec::new();
        sorted.try_reserve_exact(count)?;
        sorted.extend(0..count32);
        let name_of = |i: u32| {
            let (start, end) = entries[i as usize].name;
            &text[start..end]
        };
        sorted.sort_unstable_by(|&a, &b| name_of(a).cmp(name_of(b)));
        if let Some(pair) = sorted.windows(2).find(|p| name_of(p[0]) == name_of(p[1])) {
            return Err(Error::format(format!(
                "the archive has two entries named '{}'",
                name_of(pair[0])
            )));
        }
        Ok(Directory {
            text,
            entries,
            sorted,
        })
    }

    /// Read the central directory of the archive `buffer` holds, through
    /// copies of its bytes (memory another program may write: the aliasing
    /// rule, buffer/mod.rs).
    pub fn of_buffer(buffer: Buffer) -> Result<Directory> {
        Directory::read(&mut Pieces::one(buffer).reader())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn entry(&self, index: usize) -> &DirEntry {
        &self.entries[index]
    }

    pub fn name(&self, index: usize) -> &str {
        let (start, end) = self.entries[index].name;
        &self.text[start..end]
    }

    /// The index of the entry named `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.sorted
            .binary_search_by(|&i| self.name(i as usize).cmp(name))
            .ok()
            .map(|at| self.sorted[at] as usize)
    }

    /// Whether an entry is named `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.index_of(name).is_some()
    }

    /// The names starting with `prefix`, in order.
    pub fn starting_with<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a str> {
        let first = self
            .sorted
            .partition_point(|&i| self.name(i as usize) < prefix);
        self.sorted[first..]
            .iter()
            .map(|&i| self.name(i as usize))
            .take_while(move |name| name.starts_with(prefix))
    }

    /// The names, in the directory's order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        (0..self.len()).map(|i| self.name(i))
    }
}

/// An entry's method, flags and declared sizes checked before its data is
/// read: STORED or DEFLATE, not encrypted, STORED sizes equal, DEFLATE
/// sizes within what DEFLATE can expand to.
pub(crate) fn check_entry(entry: &DirEntry) -> Result<()> {
    if entry.encrypted() {
        return Err(Error::format("encrypted entries are not supported"));
    }
    let bound = match entry.method {
        STORED => {
            if entry.size != entry.compressed {
                return Err(Error::format(format!(
                    "a STORED entry declares {} bytes and {} stored bytes",
                    entry.size, entry.compressed
                )));
            }
            entry.compressed
        }
        DEFLATED => entry
            .compressed
            .saturating_mul(MAX_DEFLATE_RATIO)
            .saturating_add(1024),
        other => {
            return Err(Error::format(format!(
                "unsupported compression method {other} (STORED and DEFLATE are read)"
            )))
        }
    };
    if entry.size > bound {
        return Err(Error::format(format!(
            "the entry declares {} bytes, more than its {} compressed bytes can hold",
            entry.size, entry.compressed
        )));
    }
    Ok(())
}

/// Where the data of `entry`, named `name`, starts: after its local
/// header, which is read and checked (see [`local_data_start`]).
pub(crate) fn data_start<R: Read + Seek>(
    reader: &mut R,
    entry: &DirEntry,
    name: &str,
) -> Result<u64> {
    let mut local = zeroed(entry.local_named_len())?;
    read_at(reader, entry.header, &mut local)?;
    local_data_start(entry, name, &local)
}

/// The data of an entry, read as it lies (STORED) or inflated (DEFLATE):
/// exactly the declared size, then an error unless the data ends there and
/// its CRC is the declared one (checked by the read that finds the end).
pub(crate) struct EntryReader<'r, R: Read> {
    inner: Inner<'r, R>,
    left: u64,
    crc: crc32fast::Hasher,
    expected: u32,
    checked: bool,
}

enum Inner<'r, R: Read> {
    Stored(std::io::Take<&'r mut R>),
    Deflated(Box<flate2::read::DeflateDecoder<std::io::Take<&'r mut R>>>),
}

impl<R: Read> Inner<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Inner::Stored(reader) => reader.read(buf),
            Inner::Deflated(reader) => reader.read(buf),
        }
    }
}

/// Open the data of `entry`, named `name` (checked by [`check_entry`] and
/// [`data_start`]), for reading.
pub(crate) fn open<'r, R: Read + Seek>(
    reader: &'r mut R,
    entry: &DirEntry,
    name: &str,
) -> Result<EntryReader<'r, R>> {
    check_entry(entry)?;
    let start = data_start(reader, entry, name)?;
    reader.seek(SeekFrom::Start(start)).map_err(read_error)?;
    let raw = reader.take(entry.compressed);
    let inner = if entry.method == DEFLATED {
        Inner::Deflated(Box::new(flate2::read::DeflateDecoder::new(raw)))
    } else {
        Inner::Stored(raw)
    };
    Ok(EntryReader {
        inner,
        left: entry.size,
        crc: crc32fast::Hasher::new(),
        expected: entry.crc,
        checked: false,
    })
}

fn invalid(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

impl<R: Read> Read for EntryReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            if !self.checked {
                // a DEFLATE stream that goes on past the declared size
                let mut more = [0u8; 1];
                if matches!(self.inner, Inner::Deflated(_)) && self.inner.read(&mut more)? != 0 {
                    return Err(invalid("the entry inflates past its declared size"));
                }
                if self.crc.clone().finalize() != self.expected {
                    return Err(invalid("CRC mismatch: the data is corrupt"));
                }
                self.checked = true;
            }
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 && want > 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.crc.update(&buf[..n]);
        self.left -= n as u64;
        Ok(n)
    }
}
