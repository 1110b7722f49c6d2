//! The zip format's records and their fields, shared by the writer of
//! `.mts` archives (`writer.rs`) and the central-directory reader
//! (`reader.rs`): signatures, the fixed lengths, the timestamp, the ZIP64
//! extra field and its values. Beside them, what the version-1 dataset
//! reader (`dataset/v1/`) walks a file's records with when its last commit
//! is missing: local headers decoded on their own, the length of the other
//! records, and the first bytes that tell a dataset file (of any version)
//! from one map's archive.

use crate::error::{Error, Result};
use crate::io::bytes::{le16, le32, le64};

pub(crate) const LOCAL: u32 = 0x0403_4b50;
pub(crate) const CENTRAL: u32 = 0x0201_4b50;
pub(crate) const ZIP64_END: u32 = 0x0606_4b50;
pub(crate) const ZIP64_LOCATOR: u32 = 0x0706_4b50;
pub(crate) const END: u32 = 0x0605_4b50;

/// Size of the fixed part of a local header.
pub(crate) const LOCAL_LEN: usize = 30;

/// The name of the first entry of a dataset file of format version 1
/// (`dataset/v1/`): what tells such a dataset from one map's archive.
pub(crate) const DATASET_HEADER_NAME: &str = "blockmap-dataset.json";
/// The first bytes of a dataset file of format version 2 or later (not a
/// zip: `dataset/v2/layout.rs`), refused by the loaders of one map as
/// version 1's header entry is.
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
pub(super) const MAX16: u64 = 0xFFFF;
pub(super) const MAX32: u64 = 0xFFFF_FFFF;

/// `value` in a 32-bit field: itself, or the ZIP64 marker when larger.
pub(super) fn clamp32(value: u64) -> u32 {
    u32::try_from(value.min(MAX32)).unwrap_or(u32::MAX)
}

/// The values of the ZIP64 extra field among the extra fields `extra`, in
/// order (those the field holds whole, 8 bytes each; none without the
/// field).
pub(crate) fn zip64_values(extra: &[u8]) -> impl Iterator<Item = u64> + '_ {
    let mut at = 0;
    let mut field: &[u8] = &[];
    while at + 4 <= extra.len() {
        let (id, len) = (le16(extra, at), usize::from(le16(extra, at + 2)));
        if id == ZIP64_EXTRA {
            field = &extra[at + 4..extra.len().min(at + 4 + len)];
            break;
        }
        at += 4 + len;
    }
    field.chunks_exact(8).map(|value| le64(value, 0))
}

/// What the first bytes of a file say it is, when it is a dataset file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DatasetStart {
    /// a zip whose first entry is the dataset header (format version 1)
    Zip,
    /// the magic of format version 2 and later
    Magic,
}

/// Whether `head`, the first bytes of a file (as many as it has, up to
/// [`LOCAL_LEN`] and the name of the dataset header), start a dataset
/// file, and of which layout.
pub(crate) fn dataset_start(head: &[u8]) -> Option<DatasetStart> {
    let name = DATASET_HEADER_NAME.as_bytes();
    if head.len() >= DATASET_MAGIC.len() && head[..DATASET_MAGIC.len()] == DATASET_MAGIC {
        return Some(DatasetStart::Magic);
    }
    let zip = head.len() >= LOCAL_LEN + name.len()
        && signature(head) == Some(LOCAL)
        && usize::from(le16(head, 26)) == name.len()
        && &head[LOCAL_LEN..LOCAL_LEN + name.len()] == name;
    zip.then_some(DatasetStart::Zip)
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
        size = zip64_values(&bytes[LOCAL_LEN + name_len..len])
            .next()
            .ok_or_else(|| bad("ZIP64 sizes"))?;
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
    use crate::io::bytes::{put_u16, put_u64};
    use crate::io::zip::reader::Directory;
    use crate::io::zip::writer::{Plain, ZipWriter};

    /// An archive written by the `.mts` writer: its entries' names and
    /// data.
    fn archive(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = ZipWriter::new(Plain(std::io::Cursor::new(Vec::new()))).unwrap();
        for (name, data) in entries {
            writer.start(name, data.len()).unwrap();
            writer.write(data).unwrap();
            writer.finish_entry().unwrap();
        }
        writer.finish().unwrap().0.into_inner()
    }

    /// The local headers of the writer's archives decode on their own to
    /// what the central directory says of them, and the walk from one
    /// record to the next (a version-1 dataset's recovery) ends on the
    /// end records.
    #[test]
    fn local_headers_decode_as_the_directory_lists_them() {
        let bytes = archive(&[
            (DATASET_HEADER_NAME, b"{}"),
            ("maps/0.mts", &[7u8; 1000]),
            ("maps/1.mts", b""),
            ("blockmap-index.npy", &[1u8; 33]),
        ]);
        let directory = Directory::read(&mut std::io::Cursor::new(&bytes)).unwrap();
        let mut at = 0usize;
        for k in 0..directory.len() {
            let entry = directory.entry(k);
            assert_eq!(entry.header, at as u64);
            let fixed = &bytes[at..at + LOCAL_LEN];
            let header =
                parse_local(&bytes[at..at + LOCAL_LEN + local_variable_len(fixed)]).unwrap();
            assert_eq!(
                (header.name.as_str(), header.crc, header.size),
                (directory.name(k), entry.crc, entry.size)
            );
            // the data is 64-byte aligned in the archive
            assert_eq!((at as u64 + header.len) % 64, 0);
            at += usize::try_from(header.len + header.size).unwrap();
        }
        // then the central directory, the end records: each skipped whole
        for expected in [CENTRAL, CENTRAL, CENTRAL, CENTRAL, END] {
            let signature = signature(&bytes[at..]).unwrap();
            assert_eq!(signature, expected);
            at += usize::try_from(skipped_record_len(signature, &bytes[at..]).unwrap()).unwrap();
        }
        assert_eq!(at, bytes.len());
        // a DEFLATE entry, or one cut short, is no local header of a dataset
        let mut deflated = bytes.clone();
        deflated[8] = 8;
        assert!(parse_local(&deflated).is_err());
        assert!(parse_local(&bytes[..LOCAL_LEN + 3]).is_err());
    }

    #[test]
    fn zip64_values_come_from_their_field_only() {
        let mut extra = Vec::new();
        // a padding field, then the ZIP64 field of two values
        put_u16(&mut extra, 0xa11e);
        put_u16(&mut extra, 2);
        put_u16(&mut extra, 64);
        put_u16(&mut extra, ZIP64_EXTRA);
        put_u16(&mut extra, 16);
        put_u64(&mut extra, 5_000_000_000);
        put_u64(&mut extra, 6_000_000_000);
        let values: Vec<u64> = zip64_values(&extra).collect();
        assert_eq!(values, [5_000_000_000, 6_000_000_000]);
        // cut inside its second value: the first alone
        assert_eq!(zip64_values(&extra[..extra.len() - 1]).count(), 1);
        // no ZIP64 field: none
        assert_eq!(zip64_values(&extra[..6]).count(), 0);
        assert_eq!(zip64_values(&[]).count(), 0);
    }

    #[test]
    fn dataset_files_are_told_by_their_first_bytes() {
        let version_1 = archive(&[(DATASET_HEADER_NAME, b"{}"), ("maps/0.mts", b"x")]);
        assert_eq!(dataset_start(&version_1), Some(DatasetStart::Zip));
        assert_eq!(dataset_start(&DATASET_MAGIC), Some(DatasetStart::Magic));
        // one map's archive, another first entry, too few bytes: none
        let map = archive(&[("keys.npy", b"x")]);
        assert_eq!(dataset_start(&map), None);
        let other = archive(&[("blockmap-dataset.jsom", b"{}")]);
        assert_eq!(dataset_start(&other), None);
        let name_end = LOCAL_LEN + DATASET_HEADER_NAME.len();
        assert_eq!(dataset_start(&version_1[..name_end - 1]), None);
        assert_eq!(dataset_start(&DATASET_MAGIC[..7]), None);
    }
}
