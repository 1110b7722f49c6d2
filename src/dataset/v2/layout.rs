//! Where each field of dataset format versions 2 and 3 lies: the file
//! header, the record header, the commit record's payload and its rows,
//! the trailer, the record kinds, and the dtype codes of block
//! descriptions (docs/format.md, "Datasets"). Every fixed field has a named
//! offset here; the variable encodings of payloads are in `codec.rs`.
//!
//! Version 3 differs from version 2 in one field: a commit row's last four
//! bytes, zero in version 2, hold the CRC32 of the entry's description,
//! which every read checks.

use crate::dtype::{ByteOrder, DType};
use crate::error::{Error, Result};
use crate::io::bytes::{le32, le64, put_u32, put_u64, Cursor};

/// The first 8 bytes of a version-2 or 3 dataset file (not a zip signature:
/// a zip tool does not take it for an archive; the `\r\n` and `\x1a` catch
/// text-mode transfers, as PNG's signature does).
pub const MAGIC: [u8; 8] = crate::io::zip::DATASET_MAGIC;
/// The version new files are written in (an append keeps its file's).
pub const VERSION: u32 = 4;
/// The first version of this layout (version 1 is a zip: `dataset/v1/`).
pub const FIRST_VERSION: u32 = 2;

/// The file header: the magic, the version (u32), the identity (32 hex
/// digits), zeros up to [`HEADER_LEN`].
pub const HEADER_LEN: usize = 64;
const HEADER_VERSION: usize = 8;
const HEADER_ID: usize = 12;
const HEADER_ID_END: usize = 44;

/// Records start on multiples of this.
pub const ALIGN: u64 = 64;

/// A record header: magic (3 bytes), kind (u8), CRC32 of the payload
/// (u32), payload length (u64); the payload follows.
pub const RECORD_LEN: usize = 16;
/// The first bytes of every record header.
pub const RECORD_MAGIC: [u8; 3] = *b"BMr";
const RECORD_KIND: usize = 3;
const RECORD_CRC: usize = 4;
const RECORD_PAYLOAD_LEN: usize = 8;

/// The trailer after each commit record: magic (8 bytes), the commit
/// record's offset (u64), its count of entries (u64), the CRC32 of those
/// 24 bytes (u32), zeros (4 bytes).
pub const TRAILER_LEN: usize = 32;
pub const TRAILER_MAGIC: [u8; 8] = *b"BMDSEND2";
const TRAILER_COMMIT_AT: usize = 8;
const TRAILER_COUNT: usize = 16;
const TRAILER_CRC: usize = 24;
const TRAILER_ZEROS: usize = 28;

/// A COMMIT record's payload: the count of entries (u64), the SCHEMA
/// record's offset (u64, 0: none yet), the COLUMNS record's offset (u64,
/// 0: no entries), then a row per entry ([`Row`]).
pub const COMMIT_SCHEMA_AT: usize = 8;
pub const COMMIT_COLUMNS_AT: usize = 16;
pub const COMMIT_ROWS: usize = 24;

/// A COMMIT record's payload in version 4: the count of entries (u64),
/// the SCHEMA record's offset (u64), the count of pieces (u64), then a
/// [`Piece`] per run of entries, in entry order.
pub const COMMIT_PIECES: usize = 16;
pub const COMMIT_PIECE_LIST: usize = 24;

/// A SEGMENT record's payload (version 4): its count of entries (u64),
/// its count of columns (u32), zeros (u32), each column's values (u64
/// per entry), one column after the other, then a [`Row`] per entry. The
/// rows come last, just before the COMMIT record: an open reads them
/// alone, and the kernel's read-ahead after them meets the commit, not
/// the columns.
pub const SEGMENT_COUNT: usize = 0;
pub const SEGMENT_COLUMNS: usize = 8;
pub const SEGMENT_VALUES: usize = 16;

/// Whether a file of `version` lists its entries in SEGMENT records that
/// its commits name (version 4), rather than in each commit (2 and 3).
pub fn has_segments(version: u32) -> bool {
    version >= 4
}

/// A run of entries a commit lists (version 4): where its SEGMENT record
/// lies, how many entries it holds, and the CRC32s of its payload's two
/// parts (its rows, read at an open; the 16 bytes of counts and the
/// columns, read when a column is asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub at: u64,
    pub count: u64,
    pub rows_crc: u32,
    pub columns_crc: u32,
}

/// A piece's bytes in a COMMIT record.
pub const PIECE_LEN: usize = 24;

impl Piece {
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, self.at);
        put_u64(out, self.count);
        put_u32(out, self.rows_crc);
        put_u32(out, self.columns_crc);
    }

    pub fn decode(c: &mut Cursor<'_>) -> Result<Piece> {
        Ok(Piece {
            at: c.u64()?,
            count: c.u64()?,
            rows_crc: c.u32()?,
            columns_crc: c.u32()?,
        })
    }

    /// The length of the rows part of its record's payload (its end).
    pub fn rows_len(&self) -> Option<u64> {
        self.count.checked_mul(ROW_LEN as u64)
    }

    /// The length of the counts and columns part of its record's payload
    /// (its start), for `n` columns.
    pub fn values_len(&self, n: usize) -> Option<u64> {
        self.count
            .checked_mul(8 * n as u64)
            .and_then(|len| len.checked_add(SEGMENT_VALUES as u64))
    }
}

/// An ENTRY record's payload starts with the length of the entry's
/// description (u64), which follows; the arrays follow it, each on a
/// multiple of [`ALIGN`] in the file.
pub const ENTRY_DESCRIPTION: usize = 8;

/// The kinds of records: the byte after the record magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// what every entry holds (`codec::Schema`), once per file
    Schema = 1,
    /// labels stored once and referred to by entries
    Labels = 2,
    /// an entry: its description and its arrays
    Entry = 3,
    /// the rows of the entries committed, followed by a trailer
    Commit = 4,
    /// the column values of the entries committed, before their commit
    /// (versions 2 and 3)
    Columns = 5,
    /// the rows and column values of a run of entries (version 4), which
    /// commits list
    Segment = 6,
}

impl RecordKind {
    fn from_byte(byte: u8) -> Option<RecordKind> {
        match byte {
            1 => Some(RecordKind::Schema),
            2 => Some(RecordKind::Labels),
            3 => Some(RecordKind::Entry),
            4 => Some(RecordKind::Commit),
            5 => Some(RecordKind::Columns),
            6 => Some(RecordKind::Segment),
            _ => None,
        }
    }
}

/// A decoded record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub kind: RecordKind,
    pub crc: u32,
    pub len: u64,
}

pub fn record_header(kind: RecordKind, crc: u32, len: u64) -> [u8; RECORD_LEN] {
    let mut out = [0u8; RECORD_LEN];
    out[..RECORD_MAGIC.len()].copy_from_slice(&RECORD_MAGIC);
    out[RECORD_KIND] = kind as u8;
    out[RECORD_CRC..RECORD_PAYLOAD_LEN].copy_from_slice(&crc.to_le_bytes());
    out[RECORD_PAYLOAD_LEN..].copy_from_slice(&len.to_le_bytes());
    out
}

/// The record header in `bytes`, `None` when it is not one.
pub fn parse_record(bytes: &[u8]) -> Option<Record> {
    if bytes.len() < RECORD_LEN || bytes[..RECORD_MAGIC.len()] != RECORD_MAGIC {
        return None;
    }
    Some(Record {
        kind: RecordKind::from_byte(bytes[RECORD_KIND])?,
        crc: le32(bytes, RECORD_CRC),
        len: le64(bytes, RECORD_PAYLOAD_LEN),
    })
}

pub fn file_header(id: &str, version: u32) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    out[..MAGIC.len()].copy_from_slice(&MAGIC);
    out[HEADER_VERSION..HEADER_ID].copy_from_slice(&version.to_le_bytes());
    out[HEADER_ID..HEADER_ID_END].copy_from_slice(id.as_bytes());
    out
}

/// The identity and version of a file header (version 2 or 3).
pub fn parse_file_header(bytes: &[u8]) -> Result<(String, u32)> {
    if bytes.len() < HEADER_LEN || bytes[..MAGIC.len()] != MAGIC {
        return Err(Error::format(
            "not a blockmap dataset file: it does not start with its header",
        ));
    }
    let version = le32(bytes, HEADER_VERSION);
    if !(FIRST_VERSION..=VERSION).contains(&version) {
        return Err(Error::format(format!(
            "dataset file of version {version}: this blockmap reads versions 1 to {VERSION}"
        )));
    }
    let id = &bytes[HEADER_ID..HEADER_ID_END];
    if !id.iter().all(u8::is_ascii_hexdigit)
        || bytes[HEADER_ID_END..HEADER_LEN].iter().any(|&b| b != 0)
    {
        return Err(Error::format("dataset file: bad header"));
    }
    Ok((String::from_utf8_lossy(id).into_owned(), version))
}

/// Whether entries of files of `version` carry the CRC32 of their
/// description in their commit row (checked at every read).
pub fn has_description_crcs(version: u32) -> bool {
    version >= 3
}

/// One entry's place in the file and its checksums: a row of a COMMIT
/// record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// the entry record's first byte (its header)
    pub offset: u64,
    /// its payload's length
    pub len: u64,
    /// the CRC32 of its payload
    pub crc: u32,
    /// the CRC32 of its description ([`description_crc`]; version 3: 0 in
    /// a file of version 2, which does not store it)
    pub desc_crc: u32,
}

/// A row's bytes: u64 record offset, u64 payload length, u32 payload
/// CRC32, u32 description CRC32 (version 3) or zero (version 2).
pub const ROW_LEN: usize = 24;

impl Row {
    pub fn encode(&self, version: u32, out: &mut Vec<u8>) {
        put_u64(out, self.offset);
        put_u64(out, self.len);
        put_u32(out, self.crc);
        put_u32(
            out,
            if has_description_crcs(version) {
                self.desc_crc
            } else {
                0
            },
        );
    }

    /// A row of a file of `version` (its place in the file not checked).
    pub fn decode(c: &mut Cursor<'_>, version: u32) -> Result<Row> {
        let offset = c.u64()?;
        let len = c.u64()?;
        let crc = c.u32()?;
        let desc_crc = c.u32()?;
        if !has_description_crcs(version) && desc_crc != 0 {
            // zero in version 2: a later writer's use of them is refused,
            // not misread
            return Err(c.bad("a row's reserved bytes are not zero"));
        }
        Ok(Row {
            offset,
            len,
            crc,
            desc_crc,
        })
    }

    /// The file bytes after the entry record's payload (its end, before
    /// any padding).
    pub fn end(&self) -> u64 {
        self.offset + RECORD_LEN as u64 + self.len
    }
}

/// The CRC32 of an entry's description as its row holds it (version 3):
/// over the payload's first 8 bytes (the description's length, `len`) and
/// the description.
pub fn description_crc(len: u64, description: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&len.to_le_bytes());
    hasher.update(description);
    hasher.finalize()
}

pub fn trailer(commit_at: u64, count: u64) -> [u8; TRAILER_LEN] {
    let mut out = [0u8; TRAILER_LEN];
    out[..TRAILER_MAGIC.len()].copy_from_slice(&TRAILER_MAGIC);
    out[TRAILER_COMMIT_AT..TRAILER_COUNT].copy_from_slice(&commit_at.to_le_bytes());
    out[TRAILER_COUNT..TRAILER_CRC].copy_from_slice(&count.to_le_bytes());
    let crc = crc32fast::hash(&out[..TRAILER_CRC]);
    out[TRAILER_CRC..TRAILER_ZEROS].copy_from_slice(&crc.to_le_bytes());
    out
}

/// `(commit record offset, count)` of a trailer, `None` when it is not one.
pub fn parse_trailer(bytes: &[u8]) -> Option<(u64, u64)> {
    if bytes.len() != TRAILER_LEN
        || bytes[..TRAILER_MAGIC.len()] != TRAILER_MAGIC
        || bytes[TRAILER_ZEROS..] != [0; TRAILER_LEN - TRAILER_ZEROS]
        || le32(bytes, TRAILER_CRC) != crc32fast::hash(&bytes[..TRAILER_CRC])
    {
        return None;
    }
    Some((le64(bytes, TRAILER_COMMIT_AT), le64(bytes, TRAILER_COUNT)))
}

/// `offset` rounded up to a multiple of [`ALIGN`].
pub fn align_up(offset: u64) -> u64 {
    offset.div_ceil(ALIGN) * ALIGN
}

/// The zero bytes that bring file offset `here` to a multiple of
/// [`ALIGN`].
pub fn pad_len(here: u64) -> usize {
    usize::try_from(align_up(here) - here).unwrap_or(0)
}

/// Bit 7 of a dtype code: the data is big-endian.
const BIG_ENDIAN: u8 = 0x80;

/// The code of `dtype` in a block description, with [`BIG_ENDIAN`] set on
/// big-endian machines (the arrays are written in native order). The codes
/// are the format's: never derived from an enum's or a list's order, so
/// that reordering `DType` changes nothing on disk (a test pins each).
pub fn dtype_code(dtype: DType) -> u8 {
    let code = match dtype {
        DType::F2 => 0,
        DType::F4 => 1,
        DType::F8 => 2,
        DType::I1 => 3,
        DType::I2 => 4,
        DType::I4 => 5,
        DType::I8 => 6,
        DType::U1 => 7,
        DType::U2 => 8,
        DType::U4 => 9,
        DType::U8 => 10,
        DType::B1 => 11,
        DType::C8 => 12,
        DType::C16 => 13,
    };
    if ByteOrder::NATIVE == ByteOrder::Big {
        code | BIG_ENDIAN
    } else {
        code
    }
}

/// The dtype and byte order a block description's code gives (`None`: no
/// dtype has it).
pub fn parse_dtype_code(byte: u8) -> Option<(DType, ByteOrder)> {
    let order = if byte & BIG_ENDIAN != 0 {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };
    let dtype = match byte & !BIG_ENDIAN {
        0 => DType::F2,
        1 => DType::F4,
        2 => DType::F8,
        3 => DType::I1,
        4 => DType::I2,
        5 => DType::I4,
        6 => DType::I8,
        7 => DType::U1,
        8 => DType::U2,
        9 => DType::U4,
        10 => DType::U8,
        11 => DType::B1,
        12 => DType::C8,
        13 => DType::C16,
        _ => return None,
    };
    Some((dtype, order))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_refuse_damage() {
        let id = "0123456789abcdef0123456789abcdef";
        for version in [2, 3, 4] {
            assert_eq!(
                parse_file_header(&file_header(id, version)).unwrap(),
                (id.to_string(), version)
            );
        }
        for version in [0, 1, 5] {
            let bad = file_header(id, version);
            assert!(parse_file_header(&bad)
                .unwrap_err()
                .to_string()
                .contains(&format!("version {version}")));
        }
        let header = record_header(RecordKind::Entry, 7, 1 << 40);
        assert_eq!(
            parse_record(&header),
            Some(Record {
                kind: RecordKind::Entry,
                crc: 7,
                len: 1 << 40
            })
        );
        let t = trailer(640, 12);
        assert_eq!(parse_trailer(&t), Some((640, 12)));
        for at in 0..TRAILER_LEN {
            let mut damaged = t;
            damaged[at] ^= 1;
            assert_eq!(parse_trailer(&damaged), None, "byte {at}");
        }
    }

    /// The fields lie where docs/format.md says, byte for byte.
    #[test]
    fn fields_lie_at_their_documented_offsets() {
        let id = "0123456789abcdef0123456789abcdef";
        let mut header = Vec::from(*b"\x89BMDS\r\n\x1a");
        header.extend_from_slice(&3u32.to_le_bytes());
        header.extend_from_slice(id.as_bytes());
        header.resize(64, 0);
        assert_eq!(file_header(id, 3).as_slice(), header);
        let mut record = Vec::from(*b"BMr");
        record.push(4);
        record.extend_from_slice(&0xdead_beef_u32.to_le_bytes());
        record.extend_from_slice(&1234u64.to_le_bytes());
        assert_eq!(
            record_header(RecordKind::Commit, 0xdead_beef, 1234).as_slice(),
            record
        );
        let mut trailer_bytes = Vec::from(*b"BMDSEND2");
        trailer_bytes.extend_from_slice(&640u64.to_le_bytes());
        trailer_bytes.extend_from_slice(&12u64.to_le_bytes());
        let crc = crc32fast::hash(&trailer_bytes);
        trailer_bytes.extend_from_slice(&crc.to_le_bytes());
        trailer_bytes.resize(32, 0);
        assert_eq!(trailer(640, 12).as_slice(), trailer_bytes);
        let row = Row {
            offset: 1,
            len: 2,
            crc: 3,
            desc_crc: 4,
        };
        let (mut v2, mut v3) = (Vec::new(), Vec::new());
        row.encode(2, &mut v2);
        row.encode(3, &mut v3);
        let words = |row: &[u8]| (le64(row, 0), le64(row, 8), le32(row, 16), le32(row, 20));
        assert_eq!((v2.len(), words(&v2)), (ROW_LEN, (1, 2, 3, 0)));
        assert_eq!((v3.len(), words(&v3)), (ROW_LEN, (1, 2, 3, 4)));
        assert_eq!(
            (COMMIT_SCHEMA_AT, COMMIT_COLUMNS_AT, COMMIT_ROWS),
            (8, 16, 24)
        );
        assert_eq!(
            [
                RecordKind::Schema,
                RecordKind::Labels,
                RecordKind::Entry,
                RecordKind::Commit,
                RecordKind::Columns,
                RecordKind::Segment
            ]
            .map(|kind| kind as u8),
            [1, 2, 3, 4, 5, 6]
        );
        assert_eq!((COMMIT_PIECES, COMMIT_PIECE_LIST, PIECE_LEN), (16, 24, 24));
        assert_eq!((SEGMENT_COUNT, SEGMENT_COLUMNS, SEGMENT_VALUES), (0, 8, 16));
        let mut piece = Vec::new();
        Piece {
            at: 1,
            count: 2,
            rows_crc: 3,
            columns_crc: 4,
        }
        .encode(&mut piece);
        assert_eq!((piece.len(), words(&piece)), (PIECE_LEN, (1, 2, 3, 4)));
    }

    /// The code of every dtype on disk, pinned: a file's blocks keep their
    /// dtype whatever the order of `DType`'s variants or of `DType::ALL`.
    #[test]
    fn every_dtype_has_its_fixed_code() {
        let pinned = [
            (DType::F2, 0),
            (DType::F4, 1),
            (DType::F8, 2),
            (DType::I1, 3),
            (DType::I2, 4),
            (DType::I4, 5),
            (DType::I8, 6),
            (DType::U1, 7),
            (DType::U2, 8),
            (DType::U4, 9),
            (DType::U8, 10),
            (DType::B1, 11),
            (DType::C8, 12),
            (DType::C16, 13),
        ];
        assert_eq!(pinned.len(), DType::ALL.len());
        let native = if ByteOrder::NATIVE == ByteOrder::Big {
            BIG_ENDIAN
        } else {
            0
        };
        for (dtype, code) in pinned {
            assert_eq!(dtype_code(dtype), code | native, "{dtype:?}");
            assert_eq!(parse_dtype_code(code), Some((dtype, ByteOrder::Little)));
            assert_eq!(
                parse_dtype_code(code | BIG_ENDIAN),
                Some((dtype, ByteOrder::Big))
            );
        }
        let known = (0..=u8::MAX)
            .filter(|&byte| parse_dtype_code(byte).is_some())
            .count();
        assert_eq!(known, 2 * pinned.len(), "no other byte is a dtype");
    }
}
