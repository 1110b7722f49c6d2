//! The byte layout of dataset format versions 2 and 3 (docs/format.md,
//! "Datasets"): the file header, the record header, the commit rows, the
//! trailer, and the encodings of the records' payloads, with their bounded
//! decoders. Version 3 differs from version 2 in one field: a commit row's
//! last four bytes, zero in version 2, hold the CRC32 of the entry's
//! description, which every read checks.
//!
//! Every decoder reads from bytes copied out of the file (the aliasing
//! rule, buffer/mod.rs) through the bounded [`Cursor`] (`io/bytes.rs`),
//! which checks each length against what is left: a hostile file gives an [`Error::Format`], never a
//! panic nor an allocation larger than the bytes read.

use crate::dtype::{ByteOrder, DType};
use crate::error::{Error, Result};
pub(crate) use crate::io::bytes::{put_u32, put_u64, Cursor};
use crate::labels::Labels;

/// What a [`Cursor`] over a record's payload names in its errors.
pub const SCHEMA: &str = "dataset file: bad schema record";
pub const LABELS: &str = "dataset file: bad labels record";
pub const ENTRY: &str = "dataset file: bad entry record";
pub const COMMIT: &str = "dataset file: bad commit record";
pub const COLUMNS: &str = "dataset file: bad columns record";

/// The first 8 bytes of a version-2 or 3 dataset file (not a zip signature: a
/// zip tool does not take it for an archive; the `\r\n` and `\x1a` catch
/// text-mode transfers, as PNG's signature does).
pub const MAGIC: [u8; 8] = crate::io::zip::DATASET_MAGIC;
/// The version new files are written in (an append keeps its file's).
pub const VERSION: u32 = 3;
/// The first version of this layout (version 1 is a zip: `v1.rs`).
pub const FIRST_VERSION: u32 = 2;
/// The file header's length: magic, version, identity, zeros.
pub const HEADER_LEN: usize = 64;
/// Records start on multiples of this.
pub const ALIGN: u64 = 64;
/// The first bytes of every record header.
pub const RECORD_MAGIC: [u8; 3] = *b"BMr";
/// A record header: magic (3), kind (1), CRC32 of the payload (4), payload
/// length (8).
pub const RECORD_LEN: usize = 16;
/// The trailer after each commit record: magic (8), commit record offset
/// (8), count (8), CRC32 of those 24 bytes (4), zeros (4).
pub const TRAILER_LEN: usize = 32;
pub const TRAILER_MAGIC: [u8; 8] = *b"BMDSEND2";

/// The kinds of records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Schema = 1,
    Labels = 2,
    Entry = 3,
    Commit = 4,
    Columns = 5,
}

impl Kind {
    fn from_byte(byte: u8) -> Option<Kind> {
        match byte {
            1 => Some(Kind::Schema),
            2 => Some(Kind::Labels),
            3 => Some(Kind::Entry),
            4 => Some(Kind::Commit),
            5 => Some(Kind::Columns),
            _ => None,
        }
    }
}

/// A decoded record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub kind: Kind,
    pub crc: u32,
    pub len: u64,
}

pub fn record_header(kind: Kind, crc: u32, len: u64) -> [u8; RECORD_LEN] {
    let mut out = [0u8; RECORD_LEN];
    out[..3].copy_from_slice(&RECORD_MAGIC);
    out[3] = kind as u8;
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    out[8..16].copy_from_slice(&len.to_le_bytes());
    out
}

/// The record header in `bytes`, `None` when it is not one.
pub fn parse_record(bytes: &[u8]) -> Option<Record> {
    if bytes.len() < RECORD_LEN || bytes[..3] != RECORD_MAGIC {
        return None;
    }
    let kind = Kind::from_byte(bytes[3])?;
    let crc = u32::from_le_bytes(bytes[4..8].try_into().ok()?);
    let len = u64::from_le_bytes(bytes[8..16].try_into().ok()?);
    Some(Record { kind, crc, len })
}

pub fn file_header(id: &str, version: u32) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    out[..8].copy_from_slice(&MAGIC);
    out[8..12].copy_from_slice(&version.to_le_bytes());
    out[12..44].copy_from_slice(id.as_bytes());
    out
}

/// The identity and version of a file header (version 2 or 3).
pub fn parse_file_header(bytes: &[u8]) -> Result<(String, u32)> {
    if bytes.len() < HEADER_LEN || bytes[..8] != MAGIC {
        return Err(Error::format(
            "not a blockmap dataset file: it does not start with its header",
        ));
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if !(FIRST_VERSION..=VERSION).contains(&version) {
        return Err(Error::format(format!(
            "dataset file of version {version}: this blockmap reads versions 1 to {VERSION}"
        )));
    }
    let id = &bytes[12..44];
    if !id.iter().all(u8::is_ascii_hexdigit) || bytes[44..HEADER_LEN].iter().any(|&b| b != 0) {
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
    out[..8].copy_from_slice(&TRAILER_MAGIC);
    out[8..16].copy_from_slice(&commit_at.to_le_bytes());
    out[16..24].copy_from_slice(&count.to_le_bytes());
    let crc = crc32fast::hash(&out[..24]);
    out[24..28].copy_from_slice(&crc.to_le_bytes());
    out
}

/// `(commit record offset, count)` of a trailer, `None` when it is not one.
pub fn parse_trailer(bytes: &[u8]) -> Option<(u64, u64)> {
    if bytes.len() != TRAILER_LEN || bytes[..8] != TRAILER_MAGIC || bytes[28..] != [0; 4] {
        return None;
    }
    let crc = u32::from_le_bytes(bytes[24..28].try_into().ok()?);
    if crc != crc32fast::hash(&bytes[..24]) {
        return None;
    }
    let at = u64::from_le_bytes(bytes[8..16].try_into().ok()?);
    let count = u64::from_le_bytes(bytes[16..24].try_into().ok()?);
    Some((at, count))
}

/// `offset` rounded up to a multiple of [`ALIGN`].
pub fn align_up(offset: u64) -> u64 {
    offset.div_ceil(ALIGN) * ALIGN
}

/// The type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Int,
    Float,
}

/// One column's value in one entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
}

impl Value {
    pub fn column_type(self) -> ColumnType {
        match self {
            Value::Int(_) => ColumnType::Int,
            Value::Float(_) => ColumnType::Float,
        }
    }

    pub fn to_bits(self) -> u64 {
        match self {
            Value::Int(v) => u64::from_ne_bytes(v.to_ne_bytes()),
            Value::Float(v) => v.to_bits(),
        }
    }

    pub fn from_bits(kind: ColumnType, bits: u64) -> Value {
        match kind {
            ColumnType::Int => Value::Int(i64::from_ne_bytes(bits.to_ne_bytes())),
            ColumnType::Float => Value::Float(f64::from_bits(bits)),
        }
    }
}

/// What every entry of a dataset holds: its fields (named maps) and
/// columns (named scalars). `single`: one field, `ds[i]` is its map.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    pub single: bool,
    pub fields: Vec<String>,
    pub columns: Vec<(String, ColumnType)>,
}

/// The field of a dataset of single maps.
pub const SINGLE_FIELD: &str = "tensor";

impl Schema {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_u32(&mut out, u32::from(self.single));
        put_u32(&mut out, u32_len(self.fields.len()));
        for field in &self.fields {
            put_str(&mut out, field);
        }
        put_u32(&mut out, u32_len(self.columns.len()));
        for (name, kind) in &self.columns {
            put_str(&mut out, name);
            out.push(match kind {
                ColumnType::Int => 0,
                ColumnType::Float => 1,
            });
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Schema> {
        let mut c = Cursor::new(bytes, SCHEMA);
        let single = match c.u32()? {
            0 => false,
            1 => true,
            _ => return Err(c.bad("flags")),
        };
        let n = c.count(4)?;
        let mut fields = Vec::with_capacity(n);
        for _ in 0..n {
            fields.push(c.str()?);
        }
        let n = c.count(5)?;
        let mut columns = Vec::with_capacity(n);
        for _ in 0..n {
            let name = c.str()?;
            let kind = match c.u8()? {
                0 => ColumnType::Int,
                1 => ColumnType::Float,
                _ => return Err(c.bad("column type")),
            };
            columns.push((name, kind));
        }
        if !c.rest().is_empty() || fields.is_empty() || (single && fields.len() != 1) {
            return Err(c.bad("layout"));
        }
        // what the writer refuses (write_entry), the reader refuses too:
        // a field or column no name could reach
        for (i, field) in fields.iter().enumerate() {
            if field.is_empty() || fields[..i].contains(field) {
                return Err(c.bad("an empty or repeated field name"));
            }
        }
        for (i, (column, _)) in columns.iter().enumerate() {
            if column.is_empty()
                || column == "n_samples"
                || columns[..i].iter().any(|(c, _)| c == column)
            {
                return Err(c.bad("an empty, repeated or reserved column name"));
            }
        }
        Ok(Schema {
            single,
            fields,
            columns,
        })
    }

    /// What differs from `other`, in words (`None`: the same).
    pub fn difference(&self, other: &Schema) -> Option<String> {
        let shown = |s: &Schema| {
            if s.single {
                "single maps".to_string()
            } else {
                format!("fields {:?}", s.fields)
            }
        };
        if self.single != other.single || self.fields != other.fields {
            return Some(format!(
                "the dataset holds {}, this entry {}",
                shown(self),
                shown(other)
            ));
        }
        if self.columns != other.columns {
            let names = |s: &Schema| {
                s.columns
                    .iter()
                    .map(|(n, k)| {
                        format!(
                            "{n}: {}",
                            if *k == ColumnType::Int {
                                "int"
                            } else {
                                "float"
                            }
                        )
                    })
                    .collect::<Vec<_>>()
            };
            return Some(format!(
                "the dataset has columns {:?}, this entry {:?}",
                names(self),
                names(other)
            ));
        }
        None
    }
}

/// A count or length as the u32 the layout stores (saturated: a count
/// that large is refused by the reader, and never written by blockmap,
/// whose limits are lower).
pub fn u32_len(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The zero bytes that bring file offset `here` to a multiple of
/// [`ALIGN`].
pub fn pad_len(here: u64) -> usize {
    usize::try_from(align_up(here) - here).unwrap_or(0)
}

pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, u32_len(s.len()));
    out.extend_from_slice(s.as_bytes());
}

/// The encoding of `labels`: dimension count (u32), entry count (u64),
/// names (u32 length + UTF-8 each), then the int32 values, row-major,
/// little-endian.
pub fn encode_labels(labels: &Labels, out: &mut Vec<u8>) {
    put_u32(out, u32_len(labels.size()));
    put_u64(out, labels.count() as u64);
    for name in labels.names() {
        put_str(out, name);
    }
    if cfg!(target_endian = "little") {
        out.extend_from_slice(labels.value_bytes());
    } else {
        for v in labels.raw() {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// The code of a dtype in a block description (its index in `DType::ALL`),
/// with bit 7 set for big-endian data.
pub fn dtype_byte(dtype: DType) -> u8 {
    let index = DType::ALL
        .iter()
        .position(|&d| d == dtype)
        .and_then(|i| u8::try_from(i).ok())
        .unwrap_or(0);
    if ByteOrder::NATIVE == ByteOrder::Big {
        index | 0x80
    } else {
        index
    }
}

pub fn parse_dtype_byte(byte: u8) -> Option<(DType, ByteOrder)> {
    let order = if byte & 0x80 != 0 {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };
    DType::ALL
        .get(usize::from(byte & 0x7F))
        .map(|&dtype| (dtype, order))
}

/// Labels decoded from a [`Cursor`] at the start of their encoding: their
/// values copied into memory they own (validated there).
pub fn decode_labels(c: &mut Cursor<'_>) -> Result<Labels> {
    let size = c.u32()? as usize;
    let count = c.u64()?;
    if size > crate::limits::MAX_NDIM.max(1024) {
        return Err(c.bad("labels with too many dimensions"));
    }
    let mut names = Vec::with_capacity(size);
    for _ in 0..size {
        names.push(c.str()?);
    }
    let count = usize::try_from(count).map_err(|_| c.bad("labels count"))?;
    let n = count
        .checked_mul(size)
        .and_then(|n| n.checked_mul(4))
        .ok_or_else(|| c.bad("labels count"))?;
    if size == 0 && count > 1 {
        return Err(c.bad("labels without dimensions"));
    }
    let raw = c.take(n)?;
    let mut bytes = crate::buffer::AlignedBytes::for_overwrite(n)?;
    let out = bytes.as_mut_slice();
    out.copy_from_slice(raw);
    if cfg!(target_endian = "big") {
        for v in out.chunks_exact_mut(4) {
            v.reverse();
        }
    }
    let array = crate::array::Array::new(
        DType::I4,
        vec![count, size],
        crate::buffer::Buffer::from(bytes),
    )?;
    Labels::from_array(names, array, false).map_err(|e| match e {
        Error::Invalid(message) => Error::format(format!("dataset file: bad labels ({message})")),
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_refuse_damage() {
        let id = "0123456789abcdef0123456789abcdef";
        for version in [2, 3] {
            assert_eq!(
                parse_file_header(&file_header(id, version)).unwrap(),
                (id.to_string(), version)
            );
        }
        for version in [0, 1, 4] {
            let bad = file_header(id, version);
            assert!(parse_file_header(&bad)
                .unwrap_err()
                .to_string()
                .contains(&format!("version {version}")));
        }
        let header = record_header(Kind::Entry, 7, 1 << 40);
        assert_eq!(
            parse_record(&header),
            Some(Record {
                kind: Kind::Entry,
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

    #[test]
    fn schemas_the_writer_refuses_are_refused() {
        let schema = |fields: &[&str], columns: &[&str]| Schema {
            single: false,
            fields: fields.iter().map(|f| (*f).to_string()).collect(),
            columns: columns
                .iter()
                .map(|c| ((*c).to_string(), ColumnType::Int))
                .collect(),
        };
        let good = schema(&["a", "b"], &["x"]);
        assert_eq!(Schema::decode(&good.encode()).unwrap(), good);
        for bad in [
            schema(&["a", "a"], &[]),
            schema(&["a", ""], &[]),
            schema(&["a"], &["x", "x"]),
            schema(&["a"], &[""]),
            schema(&["a"], &["n_samples"]),
        ] {
            let error = Schema::decode(&bad.encode()).unwrap_err();
            assert!(matches!(error, Error::Format(_)), "{bad:?}: {error}");
        }
    }

    #[test]
    fn labels_decode_checks_every_length() {
        let labels = Labels::new(vec!["a", "b"], &[1, 2, 3, 4]).unwrap();
        let mut out = Vec::new();
        encode_labels(&labels, &mut out);
        let decoded = decode_labels(&mut Cursor::new(&out, LABELS)).unwrap();
        assert_eq!(decoded, labels);
        for cut in 0..out.len() {
            assert!(decode_labels(&mut Cursor::new(&out[..cut], LABELS)).is_err());
        }
        // a count of 2^62 entries: refused, nothing allocated
        let mut huge = out.clone();
        huge[4..12].copy_from_slice(&(1u64 << 62).to_le_bytes());
        assert!(decode_labels(&mut Cursor::new(&huge, LABELS)).is_err());
        // duplicate rows: a format error
        let mut dup = Vec::new();
        encode_labels(&Labels::new(vec!["a"], &[1, 2]).unwrap(), &mut dup);
        let n = dup.len();
        dup[n - 4..].copy_from_slice(&1i32.to_le_bytes());
        let error = decode_labels(&mut Cursor::new(&dup, LABELS)).unwrap_err();
        assert!(matches!(error, Error::Format(_)), "{error}");
    }
}
