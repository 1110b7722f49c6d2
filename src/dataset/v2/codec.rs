//! The encodings of the payloads of dataset format versions 2 and 3
//! (docs/format.md, "Datasets"): the schema, labels, the COLUMNS and
//! COMMIT records' contents, and the head of an entry's description (its
//! column values). An entry's description is encoded by `describe.rs`
//! and decoded by the reader, where it views the arrays (`reader.rs`);
//! where the fixed fields lie is `layout.rs`'s.
//!
//! Every decoder reads from bytes copied out of the file (the aliasing
//! rule, buffer/mod.rs) through a bounded [`Cursor`], which checks each
//! length against what is left: a hostile file gives an [`Error::Format`],
//! never a panic nor an allocation larger than the bytes read.

use super::layout::{
    self, align_up, Piece, Row, COMMIT_PIECE_LIST, COMMIT_ROWS, COMMIT_SCHEMA_AT, PIECE_LEN,
    RECORD_LEN, ROW_LEN, SEGMENT_VALUES,
};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::io::bytes::{put_u32, put_u64, Cursor};
use crate::labels::Labels;

/// What a [`Cursor`] over a record's payload names in its errors.
pub const SCHEMA: &str = "dataset file: bad schema record";
pub const LABELS: &str = "dataset file: bad labels record";
pub const ENTRY: &str = "dataset file: bad entry record";
pub const COMMIT: &str = "dataset file: bad commit record";
pub const COLUMNS: &str = "dataset file: bad columns record";
pub const SEGMENT: &str = "dataset file: bad segment record";

/// The type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Int,
    Float,
}

/// One column's value in one entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ColumnValue {
    Int(i64),
    Float(f64),
}

impl ColumnValue {
    pub fn column_type(self) -> ColumnType {
        match self {
            ColumnValue::Int(_) => ColumnType::Int,
            ColumnValue::Float(_) => ColumnType::Float,
        }
    }

    pub fn to_bits(self) -> u64 {
        match self {
            ColumnValue::Int(v) => u64::from_ne_bytes(v.to_ne_bytes()),
            ColumnValue::Float(v) => v.to_bits(),
        }
    }

    pub fn from_bits(kind: ColumnType, bits: u64) -> ColumnValue {
        match kind {
            ColumnType::Int => ColumnValue::Int(i64::from_ne_bytes(bits.to_ne_bytes())),
            ColumnType::Float => ColumnValue::Float(f64::from_bits(bits)),
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

/// The column values and per-field sample counts at the start of an entry
/// payload's description.
pub fn entry_values(payload_head: &[u8], n: usize) -> Result<Vec<u64>> {
    let mut c = Cursor::new(payload_head, ENTRY);
    let desc_len = c.u64()?;
    if desc_len < (n as u64) * 8 {
        return Err(c.bad("description"));
    }
    (0..n).map(|_| c.u64()).collect()
}

/// The `n` columns of `count` values of a COLUMNS record's payload (the
/// record at `at`): u32 column count, then each column 64-byte aligned in
/// the file.
pub fn parse_columns(payload: &[u8], at: u64, count: usize, n: usize) -> Result<Vec<Vec<u64>>> {
    let mut c = Cursor::new(payload, COLUMNS);
    if c.u32()? as usize != n {
        return Err(c.bad("its columns do not match the schema"));
    }
    if count.saturating_mul(8).saturating_mul(n) > payload.len() {
        return Err(c.bad("a count larger than the record"));
    }
    let payload_at_file = at + RECORD_LEN as u64;
    let mut columns = Vec::with_capacity(n);
    for _ in 0..n {
        let here = payload_at_file + c.position() as u64;
        c.take(usize::try_from(align_up(here) - here).unwrap_or(0))?;
        let mut column = Vec::with_capacity(count);
        for _ in 0..count {
            column.push(c.u64()?);
        }
        columns.push(column);
    }
    if !c.rest().is_empty() {
        return Err(c.bad("bytes after its columns"));
    }
    Ok(columns)
}

/// A COLUMNS record's payload for the record at `at`: the count of
/// columns (u32), then each column's values (u64 each, one per entry),
/// starting on a multiple of 64 in the file.
pub fn encode_columns(columns: &[Vec<u64>], count: usize, at: u64) -> Result<Vec<u8>> {
    let mut payload = Vec::new();
    payload.try_reserve(8 * count * columns.len() + 64 * (columns.len() + 1))?;
    put_u32(&mut payload, u32_len(columns.len()));
    let base = at + RECORD_LEN as u64;
    for column in columns {
        let here = base + payload.len() as u64;
        payload.resize(payload.len() + layout::pad_len(here), 0);
        for value in column {
            put_u64(&mut payload, *value);
        }
    }
    Ok(payload)
}

/// A COMMIT record's payload (layout.rs, `COMMIT_*`): the count of
/// entries, where the SCHEMA and COLUMNS records are, then each entry's
/// row, in the file's `version`.
pub fn encode_commit(
    rows: &[Row],
    schema_at: u64,
    columns_at: u64,
    version: u32,
) -> Result<Vec<u8>> {
    let mut payload = Vec::new();
    payload.try_reserve(rows.len() * ROW_LEN + COMMIT_ROWS)?;
    put_u64(&mut payload, rows.len() as u64);
    put_u64(&mut payload, schema_at);
    put_u64(&mut payload, columns_at);
    for row in rows {
        row.encode(version, &mut payload);
    }
    Ok(payload)
}

/// The rows of a commit record's payload, unchecked (their places are
/// checked when the commit is opened: `open.rs`).
pub fn parse_rows(payload: &[u8], version: u32) -> Result<Vec<Row>> {
    let mut c = Cursor::new(payload, COMMIT);
    let count = usize::try_from(c.u64()?).map_err(|_| c.bad("count"))?;
    // the SCHEMA and COLUMNS records' offsets
    c.take(COMMIT_ROWS - COMMIT_SCHEMA_AT)?;
    if count.saturating_mul(ROW_LEN) > c.rest().len() {
        return Err(c.bad("a count larger than the record"));
    }
    let mut rows = Vec::with_capacity(count);
    for _ in 0..count {
        rows.push(Row::decode(&mut c, version)?);
    }
    if !c.rest().is_empty() {
        return Err(c.bad("bytes after its rows"));
    }
    Ok(rows)
}

/// A SEGMENT record's payload (version 4, layout.rs `SEGMENT_*`) for the
/// entries of `rows` and their values in `columns` (one slice per column,
/// as long as `rows`), with the CRC32 of its rows part (its end) and of
/// its counts and columns part (its start).
pub fn encode_segment(
    rows: &[Row],
    columns: &[&[u64]],
    version: u32,
) -> Result<(Vec<u8>, u32, u32)> {
    let mut payload = Vec::new();
    payload.try_reserve(SEGMENT_VALUES + rows.len() * (ROW_LEN + 8 * columns.len()))?;
    debug_assert_eq!(payload.len(), layout::SEGMENT_COUNT);
    put_u64(&mut payload, rows.len() as u64);
    debug_assert_eq!(payload.len(), layout::SEGMENT_COLUMNS);
    put_u32(&mut payload, u32_len(columns.len()));
    put_u32(&mut payload, 0);
    debug_assert_eq!(payload.len(), SEGMENT_VALUES);
    for column in columns {
        if column.len() != rows.len() {
            return Err(Error::internal("a column of another length than its rows"));
        }
        for value in *column {
            put_u64(&mut payload, *value);
        }
    }
    let values_end = payload.len();
    for row in rows {
        row.encode(version, &mut payload);
    }
    let columns_crc = crc32fast::hash(&payload[..values_end]);
    let rows_crc = crc32fast::hash(&payload[values_end..]);
    Ok((payload, rows_crc, columns_crc))
}

/// The `count` rows of a SEGMENT record's rows part (`bytes`).
pub fn parse_segment_rows(bytes: &[u8], count: u64, version: u32) -> Result<Vec<Row>> {
    let mut c = Cursor::new(bytes, SEGMENT);
    let count = usize::try_from(count).map_err(|_| c.bad("count"))?;
    if count.saturating_mul(ROW_LEN) != c.rest().len() {
        return Err(c.bad("a count that is not its rows'"));
    }
    let mut rows = Vec::new();
    rows.try_reserve_exact(count)?;
    for _ in 0..count {
        rows.push(Row::decode(&mut c, version)?);
    }
    Ok(rows)
}

/// The columns of a SEGMENT record's counts and columns part (`bytes`),
/// checked against the `count` its commit gives and the schema's count of
/// columns (`columns.len()`), appended to `columns`.
pub fn parse_segment_columns(bytes: &[u8], count: u64, columns: &mut [Vec<u64>]) -> Result<()> {
    let mut c = Cursor::new(bytes, SEGMENT);
    if c.u64()? != count {
        return Err(c.bad("its count differs from its commit's"));
    }
    if c.u32()? as usize != columns.len() {
        return Err(c.bad("its columns do not match the schema"));
    }
    if c.u32()? != 0 {
        return Err(c.bad("reserved bytes are not zero"));
    }
    let count = usize::try_from(count).map_err(|_| c.bad("count"))?;
    if count.saturating_mul(8).saturating_mul(columns.len()) != c.rest().len() {
        return Err(c.bad("columns of another length than its rows"));
    }
    for column in columns.iter_mut() {
        column.try_reserve(count)?;
        for _ in 0..count {
            column.push(c.u64()?);
        }
    }
    Ok(())
}

/// A COMMIT record's payload in version 4 (layout.rs `COMMIT_PIECE*`):
/// the count of entries, where the SCHEMA record is, the count of
/// pieces, then the pieces.
pub fn encode_commit_pieces(count: u64, schema_at: u64, pieces: &[Piece]) -> Result<Vec<u8>> {
    let mut payload = Vec::new();
    payload.try_reserve(COMMIT_PIECE_LIST + pieces.len() * PIECE_LEN)?;
    put_u64(&mut payload, count);
    put_u64(&mut payload, schema_at);
    debug_assert_eq!(payload.len(), layout::COMMIT_PIECES);
    put_u64(&mut payload, pieces.len() as u64);
    debug_assert_eq!(payload.len(), COMMIT_PIECE_LIST);
    for piece in pieces {
        piece.encode(&mut payload);
    }
    Ok(payload)
}

/// The count of entries, the SCHEMA record's offset and the pieces of a
/// version-4 COMMIT record's payload; the pieces' counts add up to the
/// count (their places are checked when the commit is opened).
pub fn parse_commit_pieces(payload: &[u8]) -> Result<(u64, u64, Vec<Piece>)> {
    let mut c = Cursor::new(payload, COMMIT);
    let count = c.u64()?;
    let schema_at = c.u64()?;
    let n = c.u64()?;
    if n.saturating_mul(PIECE_LEN as u64) != c.rest().len() as u64 {
        return Err(c.bad("a count of pieces that is not its length's"));
    }
    let mut pieces = Vec::with_capacity(c.rest().len() / PIECE_LEN);
    let mut total = 0u64;
    for _ in 0..n {
        let piece = Piece::decode(&mut c)?;
        total = total
            .checked_add(piece.count)
            .filter(|_| piece.count > 0)
            .ok_or_else(|| c.bad("a piece's count"))?;
        pieces.push(piece);
    }
    if total != count {
        return Err(c.bad("pieces that do not add up to its count"));
    }
    Ok((count, schema_at, pieces))
}

#[cfg(test)]
mod tests {
    use super::*;

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
