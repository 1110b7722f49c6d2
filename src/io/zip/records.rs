//! Zip records written and read by hand. The dataset layout: local headers
//! (with the data 64-byte aligned), central directory headers, and the
//! ZIP64 end records, always written (Python's `zipfile`, `unzip` and the
//! `zip` crate read them). Only STORED entries, with a fixed timestamp, as
//! in `.mts` files. Dataset files are made and read with these alone; the
//! `.mts` writer (`writer.rs`) and the reader (`reader.rs`) use the same
//! fields and decoders.

use crate::error::{Error, Result};

pub(crate) const LOCAL: u32 = 0x0403_4b50;
pub(crate) const CENTRAL: u32 = 0x0201_4b50;
pub(crate) const ZIP64_END: u32 = 0x0606_4b50;
pub(crate) const ZIP64_LOCATOR: u32 = 0x0706_4b50;
pub(crate) const END: u32 = 0x0605_4b50;

/// Size of the fixed part of a local header.
pub(crate) const LOCAL_LEN: usize = 30;

/// The name of the first entry of a dataset file (`dataset/mod.rs`): what
/// tells a dataset from one map's archive.
pub(crate) const DATASET_HEADER_NAME: &str = "blockmap-dataset.json";
/// The first bytes of a dataset file of format version 2 (not a zip:
/// `dataset/format.rs`), refused by the loaders of one map as version 1's
/// header entry is.
pub(crate) const DATASET_MAGIC: [u8; 8] = *b"\x89BMDS\r\n\x1a";
/// Size of the fixed part of a central directory header.
pub(crate) const CENTRAL_LEN: usize = 46;
/// Size of the fixed part of the end of central directory record.
pub(crate) const END_LEN: usize = 22;
/// Size of the ZIP64 end record and of its locator.
pub(crate) const ZIP64_END_LEN: usize = 56;
pub(crate) const ZIP64_LOCATOR_LEN: usize = 20;

/// 2000-01-01 00:00 in MS-DOS form, as in `.mts` files.
pub(super) const DOS_TIME: u16 = 0;
pub(super) const DOS_DATE: u16 = ((2000 - 1980) << 9) | (1 << 5) | 1;
pub(super) const ZIP64_EXTRA: u16 = 0x0001;
#[cfg(test)]
/// The extra field that pads a local header so that the data is aligned
/// (the id Android's `zipalign` uses).
const PADDING_EXTRA: u16 = 0xD935;
pub(super) const MAX16: u64 = 0xFFFF;
pub(super) const MAX32: u64 = 0xFFFF_FFFF;
#[cfg(test)]
/// Version 4.5: ZIP64.
const VERSION: u16 = 45;
#[cfg(test)]
/// Made on Unix (for the permissions in the external attributes).
const MADE_BY: u16 = (3 << 8) | VERSION;

pub(super) fn u16_le(out: &mut Vec<u8>, value: u16) {
    out.extend_from_slice(&value.to_le_bytes());
}

pub(super) fn u32_le(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

pub(super) fn u64_le(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

pub(super) fn clamp32(value: u64) -> u32 {
    u32::try_from(value.min(MAX32)).unwrap_or(u32::MAX)
}

#[cfg(test)]
fn name_len(name: &str) -> Result<u16> {
    u16::try_from(name.len()).map_err(|_| Error::invalid("zip entry name too long"))
}

#[cfg(test)]
/// A local header at `offset` for the entry `name`, with room for a ZIP64
/// size field when `zip64`, padded so that the data starts on a multiple of
/// `align`. The CRC and sizes are those given (zeros for a header patched
/// once the data is written: see [`size_fields`]).
pub(crate) fn local_header(
    offset: u64,
    name: &str,
    crc: u32,
    size: u64,
    zip64: bool,
    align: u64,
) -> Result<Vec<u8>> {
    let zip64_len = if zip64 { 20 } else { 0 };
    let unpadded = offset + (LOCAL_LEN + name.len() + zip64_len) as u64;
    let mut pad = (align - unpadded % align) % align;
    if pad != 0 && pad < 4 {
        pad += align;
    }
    let extra_len = u16::try_from(zip64_len as u64 + pad)
        .map_err(|_| Error::internal("local header padding too long"))?;
    let mut out = Vec::with_capacity(LOCAL_LEN + name.len() + usize::from(extra_len));
    u32_le(&mut out, LOCAL);
    u16_le(&mut out, VERSION);
    u16_le(&mut out, 0); // flags
    u16_le(&mut out, 0); // STORED
    u16_le(&mut out, DOS_TIME);
    u16_le(&mut out, DOS_DATE);
    u32_le(&mut out, crc);
    let small = if zip64 { MAX32 } else { size };
    u32_le(&mut out, clamp32(small));
    u32_le(&mut out, clamp32(small));
    u16_le(&mut out, name_len(name)?);
    u16_le(&mut out, extra_len);
    out.extend_from_slice(name.as_bytes());
    if zip64 {
        u16_le(&mut out, ZIP64_EXTRA);
        u16_le(&mut out, 16);
        u64_le(&mut out, size);
        u64_le(&mut out, size);
    }
    if pad != 0 {
        u16_le(&mut out, PADDING_EXTRA);
        u16_le(&mut out, u16::try_from(pad - 4).unwrap_or(0));
        out.resize(out.len() + usize::try_from(pad - 4).unwrap_or(0), 0);
    }
    Ok(out)
}

#[cfg(test)]
/// The bytes that give a local header of `name` its CRC and sizes, with
/// where they go in the header: `(offset in the header, bytes)` pieces.
pub(crate) fn size_fields(name: &str, crc: u32, size: u64, zip64: bool) -> Vec<(usize, Vec<u8>)> {
    let mut crc_and_sizes = Vec::with_capacity(12);
    u32_le(&mut crc_and_sizes, crc);
    if zip64 {
        u32_le(&mut crc_and_sizes, u32::MAX);
        u32_le(&mut crc_and_sizes, u32::MAX);
        let mut sizes = Vec::with_capacity(16);
        u64_le(&mut sizes, size);
        u64_le(&mut sizes, size);
        // the ZIP64 field's values, after its id and length
        vec![(14, crc_and_sizes), (LOCAL_LEN + name.len() + 4, sizes)]
    } else {
        u32_le(&mut crc_and_sizes, clamp32(size));
        u32_le(&mut crc_and_sizes, clamp32(size));
        vec![(14, crc_and_sizes)]
    }
}

/// A local header, as read back.
#[derive(Debug, Clone)]
pub(crate) struct LocalHeader {
    pub name: String,
    pub crc: u32,
    /// the data's size (STORED: both sizes are the same)
    pub size: u64,
    /// the header's own length: the data starts this far after it
    pub len: u64,
}

pub(super) fn le16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

pub(super) fn le32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

pub(super) fn le64(bytes: &[u8], at: usize) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(raw)
}

/// The lengths of the name and extra field of the local header starting
/// with these [`LOCAL_LEN`] bytes.
pub(crate) fn local_variable_len(fixed: &[u8]) -> usize {
    usize::from(le16(fixed, 26)) + usize::from(le16(fixed, 28))
}

/// Parse a whole local header (fixed part, name and extra field).
pub(crate) fn parse_local(bytes: &[u8]) -> Result<LocalHeader> {
    let bad = |what: &str| Error::format(format!("dataset file: bad local header ({what})"));
    if bytes.len() < LOCAL_LEN || le32(bytes, 0) != LOCAL {
        return Err(bad("signature"));
    }
    if le16(bytes, 8) != 0 {
        return Err(bad("entries must be STORED"));
    }
    let (name_len, extra_len) = (usize::from(le16(bytes, 26)), usize::from(le16(bytes, 28)));
    let len = LOCAL_LEN + name_len + extra_len;
    if bytes.len() < len {
        return Err(bad("truncated"));
    }
    let name = std::str::from_utf8(&bytes[LOCAL_LEN..LOCAL_LEN + name_len])
        .map_err(|_| bad("name"))?
        .to_string();
    let mut size = u64::from(le32(bytes, 22));
    let compressed = u64::from(le32(bytes, 18));
    if size == MAX32 || compressed == MAX32 {
        size = zip64_value(&bytes[LOCAL_LEN + name_len..len]).ok_or_else(|| bad("ZIP64 sizes"))?;
    } else if size != compressed {
        return Err(bad("sizes"));
    }
    Ok(LocalHeader {
        name,
        crc: le32(bytes, 14),
        size,
        len: len as u64,
    })
}

/// The first value of the ZIP64 extra field among `extra`.
fn zip64_value(extra: &[u8]) -> Option<u64> {
    let mut at = 0;
    while at + 4 <= extra.len() {
        let (id, len) = (le16(extra, at), usize::from(le16(extra, at + 2)));
        if id == ZIP64_EXTRA && len >= 8 && at + 4 + len <= extra.len() {
            return Some(le64(extra, at + 4));
        }
        at += 4 + len;
    }
    None
}

/// An entry of the central directory.
#[derive(Debug, Clone)]
pub(crate) struct Central {
    pub name: String,
    pub crc: u32,
    pub size: u64,
    /// where its local header is
    pub offset: u64,
}

#[cfg(test)]
/// The central directory header of `entry`.
pub(crate) fn central_header(entry: &Central, out: &mut Vec<u8>) -> Result<()> {
    let mut zip64 = Vec::new();
    if entry.size >= MAX32 {
        u64_le(&mut zip64, entry.size);
        u64_le(&mut zip64, entry.size);
    }
    if entry.offset >= MAX32 {
        u64_le(&mut zip64, entry.offset);
    }
    u32_le(out, CENTRAL);
    u16_le(out, MADE_BY);
    u16_le(out, VERSION);
    u16_le(out, 0);
    u16_le(out, 0);
    u16_le(out, DOS_TIME);
    u16_le(out, DOS_DATE);
    u32_le(out, entry.crc);
    u32_le(out, clamp32(entry.size));
    u32_le(out, clamp32(entry.size));
    u16_le(out, name_len(&entry.name)?);
    let extra_len = if zip64.is_empty() { 0 } else { 4 + zip64.len() };
    u16_le(out, u16::try_from(extra_len).unwrap_or(0));
    u16_le(out, 0); // comment
    u16_le(out, 0); // disk
    u16_le(out, 0); // internal attributes
    u32_le(out, 0o100_644 << 16);
    u32_le(out, clamp32(entry.offset));
    out.extend_from_slice(entry.name.as_bytes());
    if !zip64.is_empty() {
        u16_le(out, ZIP64_EXTRA);
        u16_le(out, u16::try_from(zip64.len()).unwrap_or(0));
        out.extend_from_slice(&zip64);
    }
    Ok(())
}

/// Parse the central directory `bytes` (of `count` entries).
pub(crate) fn parse_central(bytes: &[u8], count: u64) -> Result<Vec<Central>> {
    let bad = |what: &str| Error::format(format!("dataset file: bad central directory ({what})"));
    let mut entries = Vec::new();
    // every header takes at least CENTRAL_LEN bytes: `count` is bounded
    if count > (bytes.len() / CENTRAL_LEN) as u64 {
        return Err(bad("more entries than it holds"));
    }
    entries.try_reserve_exact(usize::try_from(count).map_err(|_| bad("count"))?)?;
    let mut at = 0;
    for _ in 0..count {
        if at + CENTRAL_LEN > bytes.len() || le32(bytes, at) != CENTRAL {
            return Err(bad("signature"));
        }
        let name_len = usize::from(le16(bytes, at + 28));
        let extra_len = usize::from(le16(bytes, at + 30));
        let comment_len = usize::from(le16(bytes, at + 32));
        let end = at + CENTRAL_LEN + name_len + extra_len + comment_len;
        if end > bytes.len() {
            return Err(bad("truncated"));
        }
        let name = std::str::from_utf8(&bytes[at + CENTRAL_LEN..at + CENTRAL_LEN + name_len])
            .map_err(|_| bad("name"))?
            .to_string();
        let extra = &bytes[at + CENTRAL_LEN + name_len..at + CENTRAL_LEN + name_len + extra_len];
        let mut values = zip64_values(extra).into_iter();
        let mut size = u64::from(le32(bytes, at + 24));
        if size == MAX32 {
            size = values.next().ok_or_else(|| bad("ZIP64 size"))?;
            // the compressed size follows (the same, STORED)
            values.next();
        }
        let mut offset = u64::from(le32(bytes, at + 42));
        if offset == MAX32 {
            offset = values.next().ok_or_else(|| bad("ZIP64 offset"))?;
        }
        entries.push(Central {
            name,
            crc: le32(bytes, at + 16),
            size,
            offset,
        });
        at = end;
    }
    Ok(entries)
}

/// The values of the ZIP64 extra field among `extra`, in order.
fn zip64_values(extra: &[u8]) -> Vec<u64> {
    let mut at = 0;
    while at + 4 <= extra.len() {
        let (id, len) = (le16(extra, at), usize::from(le16(extra, at + 2)));
        if id == ZIP64_EXTRA && at + 4 + len <= extra.len() {
            return extra[at + 4..at + 4 + len]
                .chunks_exact(8)
                .map(|value| le64(value, 0))
                .collect();
        }
        at += 4 + len;
    }
    Vec::new()
}

#[cfg(test)]
/// The end records of a central directory of `count` entries and `size`
/// bytes at `offset`, followed at `end_offset` (where the ZIP64 record
/// starts): the ZIP64 end record, its locator, and the end record with
/// `comment`.
pub(crate) fn end_records(
    count: u64,
    size: u64,
    offset: u64,
    end_offset: u64,
    comment: &str,
) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(ZIP64_END_LEN + ZIP64_LOCATOR_LEN + END_LEN + comment.len());
    u32_le(&mut out, ZIP64_END);
    u64_le(&mut out, (ZIP64_END_LEN - 12) as u64);
    u16_le(&mut out, MADE_BY);
    u16_le(&mut out, VERSION);
    u32_le(&mut out, 0);
    u32_le(&mut out, 0);
    u64_le(&mut out, count);
    u64_le(&mut out, count);
    u64_le(&mut out, size);
    u64_le(&mut out, offset);
    u32_le(&mut out, ZIP64_LOCATOR);
    u32_le(&mut out, 0);
    u64_le(&mut out, end_offset);
    u32_le(&mut out, 1);
    u32_le(&mut out, END);
    u16_le(&mut out, 0);
    u16_le(&mut out, 0);
    let count16 = u16::try_from(count.min(MAX16)).unwrap_or(u16::MAX);
    u16_le(&mut out, count16);
    u16_le(&mut out, count16);
    u32_le(&mut out, clamp32(size));
    u32_le(&mut out, clamp32(offset));
    let comment_len =
        u16::try_from(comment.len()).map_err(|_| Error::internal("zip comment too long"))?;
    u16_le(&mut out, comment_len);
    out.extend_from_slice(comment.as_bytes());
    Ok(out)
}

/// The end of a dataset file as read back: where the central directory is
/// and the end record's comment.
#[derive(Debug)]
pub(crate) struct End {
    pub count: u64,
    pub cd_offset: u64,
    pub cd_size: u64,
    pub comment: String,
}

/// Find the end records in `tail`, the last bytes of a file of `file_len`
/// bytes: the end record must end exactly where the file does (anything
/// after it means a later write did not complete).
pub(crate) fn parse_end(tail: &[u8], file_len: u64) -> Option<End> {
    let tail_start = file_len.checked_sub(tail.len() as u64)?;
    let mut at = tail.len().checked_sub(END_LEN)?;
    loop {
        if le32(tail, at) == END {
            let comment_len = usize::from(le16(tail, at + 20));
            if at + END_LEN + comment_len == tail.len() {
                let comment = String::from_utf8(tail[at + END_LEN..].to_vec()).unwrap_or_default();
                let locator = at.checked_sub(ZIP64_LOCATOR_LEN)?;
                if le32(tail, locator) != ZIP64_LOCATOR {
                    return None;
                }
                let zip64_end = le64(tail, locator + 8).checked_sub(tail_start)?;
                let zip64_end = usize::try_from(zip64_end).ok()?;
                if zip64_end + ZIP64_END_LEN > locator || le32(tail, zip64_end) != ZIP64_END {
                    return None;
                }
                return Some(End {
                    count: le64(tail, zip64_end + 32),
                    cd_size: le64(tail, zip64_end + 40),
                    cd_offset: le64(tail, zip64_end + 48),
                    comment,
                });
            }
        }
        at = at.checked_sub(1)?;
    }
}

/// The length of the record starting at `bytes` (whose signature is
/// `signature`) that is not a local header: a central header, or an end
/// record; `None` for anything else.
pub(crate) fn skipped_record_len(signature: u32, bytes: &[u8]) -> Option<u64> {
    match signature {
        CENTRAL if bytes.len() >= CENTRAL_LEN => Some(
            (CENTRAL_LEN
                + usize::from(le16(bytes, 28))
                + usize::from(le16(bytes, 30))
                + usize::from(le16(bytes, 32))) as u64,
        ),
        ZIP64_END if bytes.len() >= 12 => le64(bytes, 4).checked_add(12),
        ZIP64_LOCATOR => Some(ZIP64_LOCATOR_LEN as u64),
        END if bytes.len() >= END_LEN => Some((END_LEN + usize::from(le16(bytes, 20))) as u64),
        _ => None,
    }
}

/// The 4-byte signature at the start of `bytes`.
pub(crate) fn signature(bytes: &[u8]) -> Option<u32> {
    (bytes.len() >= 4).then(|| le32(bytes, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_headers_align_the_data_and_read_back() {
        for offset in [0u64, 1, 17, 63, 64, 1000, 4_294_967_300] {
            for zip64 in [false, true] {
                let header = local_header(offset, "maps/12.mts", 7, 1234, zip64, 64).unwrap();
                assert_eq!((offset + header.len() as u64) % 64, 0);
                let read = parse_local(&header).unwrap();
                assert_eq!(read.name, "maps/12.mts");
                assert_eq!(
                    (read.crc, read.size, read.len),
                    (7, 1234, header.len() as u64)
                );
                let mut patched = local_header(offset, "maps/12.mts", 0, 0, zip64, 64).unwrap();
                assert_eq!(
                    parse_local(&patched).unwrap().size,
                    0,
                    "no size until patched"
                );
                let size = if zip64 { 5_000_000_000 } else { 99 };
                for (at, bytes) in size_fields("maps/12.mts", 9, size, zip64) {
                    patched[at..at + bytes.len()].copy_from_slice(&bytes);
                }
                let read = parse_local(&patched).unwrap();
                assert_eq!((read.crc, read.size), (9, size));
            }
        }
    }

    #[test]
    fn central_directory_and_end_records_read_back() {
        let entries = [
            Central {
                name: "a".into(),
                crc: 1,
                size: 10,
                offset: 0,
            },
            Central {
                name: "maps/0.mts".into(),
                crc: 2,
                size: 5_000_000_000,
                offset: 6_000_000_000,
            },
        ];
        let mut cd = Vec::new();
        for entry in &entries {
            central_header(entry, &mut cd).unwrap();
        }
        let read = parse_central(&cd, 2).unwrap();
        assert_eq!(read[1].size, 5_000_000_000);
        assert_eq!(read[1].offset, 6_000_000_000);
        assert_eq!(read[0].name, "a");
        assert!(parse_central(&cd, 3).is_err());
        let cd_offset = 7_000_000_000;
        let end = end_records(
            2,
            cd.len() as u64,
            cd_offset,
            cd_offset + cd.len() as u64,
            "hi",
        )
        .unwrap();
        let file_len = cd_offset + cd.len() as u64 + end.len() as u64;
        let found = parse_end(&end, file_len).unwrap();
        assert_eq!((found.count, found.cd_offset), (2, cd_offset));
        assert_eq!(found.comment, "hi");
        // anything after the end record: not the end of the file
        let mut longer = end.clone();
        longer.push(0);
        assert!(parse_end(&longer, file_len + 1).is_none());
    }
}
