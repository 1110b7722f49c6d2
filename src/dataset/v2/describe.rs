//! An entry's description as the writer encodes it (docs/format.md,
//! "Datasets"): the column values, each field's sample count, then each
//! field's map (keys, info, blocks with their dtype code, shape, array
//! offset, labels references and gradients), its labels stored once per
//! session in LABELS records (keys, components, properties) or inline
//! after the map's fixed part (samples, unless seen before). The reader
//! decodes it where it views the arrays (`reader.rs`).

use std::collections::HashMap;

use super::codec::{encode_labels, put_str, u32_len, ColumnType, ColumnValue, Schema};
use super::layout::{
    align_up, description_crc, dtype_code, pad_len, record_header, RecordKind, ENTRY_DESCRIPTION,
    RECORD_LEN,
};
use crate::array::Array;
use crate::block::TensorBlock;
use crate::error::{Error, Result};
use crate::io::bytes::{put_u32, put_u64};
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// One entry to write: its fields' maps and its column values.
#[derive(Debug)]
pub struct Entry<'a> {
    pub fields: Vec<(&'a str, &'a TensorMap)>,
    pub columns: Vec<(&'a str, ColumnValue)>,
    pub single: bool,
}

impl<'a> Entry<'a> {
    /// This entry with its fields and columns in `schema`'s order, and
    /// its int values of float columns as floats (`float(n)`'s rounding),
    /// when it holds the same fields and columns in another order or with
    /// such values; `None` otherwise (the entry as it is, or one that does
    /// not match, which `write_entry` refuses naming the difference).
    pub(super) fn conform(&self, schema: &Schema) -> Option<Entry<'a>> {
        if self.single != schema.single
            || self.fields.len() != schema.fields.len()
            || self.columns.len() != schema.columns.len()
        {
            return None;
        }
        let fields = schema
            .fields
            .iter()
            .map(|name| self.fields.iter().find(|(n, _)| n == name).copied())
            .collect::<Option<Vec<_>>>()?;
        let columns = schema
            .columns
            .iter()
            .map(|(name, kind)| {
                let (n, value) = *self.columns.iter().find(|(n, _)| n == name)?;
                match (kind, value) {
                    #[allow(clippy::cast_precision_loss)] // Python's float(n)
                    (ColumnType::Float, ColumnValue::Int(v)) => {
                        Some((n, ColumnValue::Float(v as f64)))
                    }
                    _ => Some((n, value)),
                }
            })
            .collect::<Option<Vec<_>>>()?;
        let same = fields.iter().zip(&self.fields).all(|(a, b)| a.0 == b.0)
            && columns.iter().zip(&self.columns).all(|(a, b)| a == b);
        (!same).then_some(Entry {
            fields,
            columns,
            single: self.single,
        })
    }

    /// The schema of a dataset of entries like this one.
    pub(super) fn schema(&self) -> Schema {
        Schema {
            single: self.single,
            fields: self.fields.iter().map(|(n, _)| (*n).to_string()).collect(),
            columns: self
                .columns
                .iter()
                .map(|(n, v)| ((*n).to_string(), v.column_type()))
                .collect(),
        }
    }
}

/// The writer's part of the format: labels already stored, the scratch
/// memory, and the encoding of entries.
#[derive(Debug, Default)]
pub struct Encoder {
    /// labels encodings stored in LABELS records by this session, to the
    /// offset of their encoding
    seen: HashMap<Vec<u8>, u64>,
    encoding: Vec<u8>,
}

impl Encoder {
    /// `labels` encoded into the scratch memory; the offset of their
    /// encoding when this session stored them in a LABELS record.
    fn encode(&mut self, labels: &Labels) -> Option<u64> {
        self.encoding.clear();
        encode_labels(labels, &mut self.encoding);
        self.seen.get(&self.encoding).copied()
    }

    /// The reference to `labels`: their LABELS record, appended to
    /// `records` (which start at file offset `records_at`) the first time
    /// the session sees them.
    fn shared_ref(&mut self, labels: &Labels, records: &mut Vec<u8>, records_at: u64) -> u64 {
        if let Some(at) = self.encode(labels) {
            return at;
        }
        let header_at = records_at + records.len() as u64;
        records.extend_from_slice(&record_header(
            RecordKind::Labels,
            crc32fast::hash(&self.encoding),
            self.encoding.len() as u64,
        ));
        records.extend_from_slice(&self.encoding);
        let pad = pad_len(records_at + records.len() as u64);
        records.resize(records.len() + pad, 0);
        let at = header_at + RECORD_LEN as u64;
        self.seen.insert(self.encoding.clone(), at);
        at
    }

    /// The reference to `labels` in a description: their LABELS record
    /// when the session stored them, else their encoding, appended to
    /// `inline` (which starts at file offset `inline_at`).
    fn inline_ref(&mut self, labels: &Labels, inline: &mut Vec<u8>, inline_at: u64) -> u64 {
        if let Some(at) = self.encode(labels) {
            return at;
        }
        let at = inline_at + inline.len() as u64;
        inline.extend_from_slice(&self.encoding);
        at
    }

    /// Forget the LABELS records at and after file offset `at` (those of a
    /// write that failed: cut off, never referred to).
    pub(super) fn forget_from(&mut self, at: u64) {
        self.seen.retain(|_, &mut offset| offset < at);
    }
}

/// An entry encoded for the file at `at` ([`describe`]): the records to
/// write before it (its schema, when new, and its new LABELS records), its
/// record's place, the head of its payload, and where its arrays go.
pub(super) struct Description<'a> {
    /// the SCHEMA and LABELS records that go first, from `at`
    pub records: Vec<u8>,
    /// the entry record's offset
    pub entry_at: u64,
    /// the payload's first bytes: the description's length, the
    /// description, the zeros up to the first array
    pub head: Vec<u8>,
    /// the CRC32 of the description, as its row holds it (version 3)
    pub desc_crc: u32,
    /// the arrays, each with its file offset, in order
    pub arrays: Vec<(u64, &'a Array)>,
    /// the payload's length
    pub payload_len: u64,
}

impl Description<'_> {
    /// Where the arrays start (after the head).
    pub fn data_start(&self) -> u64 {
        self.entry_at + RECORD_LEN as u64 + self.head.len() as u64
    }

    /// Where the payload ends, the padding after it left out.
    pub fn payload_end(&self) -> u64 {
        self.entry_at + RECORD_LEN as u64 + self.payload_len
    }
}

/// `entry` described for the file at `at`, after `records` (its schema
/// when new): the LABELS records of labels the session meets first, then
/// the entry's description, whose labels references and array offsets are
/// file offsets.
pub(super) fn describe<'a>(
    entry: &Entry<'a>,
    encoder: &mut Encoder,
    mut records: Vec<u8>,
    at: u64,
) -> Result<Description<'a>> {
    for (_, map) in &entry.fields {
        collect_shared(map, encoder, &mut records, at);
    }
    let entry_at = at + records.len() as u64;
    let desc_at = entry_at + RECORD_LEN as u64 + ENTRY_DESCRIPTION as u64;
    // the column values and each field's first block's sample count
    let mut desc = Vec::new();
    for (_, value) in &entry.columns {
        put_u64(&mut desc, value.to_bits());
    }
    for (_, map) in &entry.fields {
        put_u64(&mut desc, first_samples(map));
    }
    let fixed = desc.len();
    let mut arrays: Vec<&Array> = Vec::new();
    for (_, map) in &entry.fields {
        collect_arrays(map, &mut arrays);
    }
    // the fields' descriptions one after the other (each with its inline
    // labels after its fixed part), then the arrays, placed after the
    // description: its length does not depend on the offsets it holds (8
    // bytes each), so that a second encoding, with the offsets the first
    // placed, puts the arrays where it says
    let mut offsets: Vec<u64> = vec![0; arrays.len()];
    loop {
        desc.truncate(fixed);
        let mut k = 0;
        for (_, map) in &entry.fields {
            let len_at = desc.len();
            put_u64(&mut desc, 0);
            let field_start = desc.len();
            encode_map(
                map,
                encoder,
                desc_at + field_start as u64,
                &mut desc,
                &offsets,
                &mut k,
            );
            let len = (desc.len() - field_start) as u64;
            desc[len_at..len_at + 8].copy_from_slice(&len.to_le_bytes());
        }
        let mut next = align_up(desc_at + desc.len() as u64);
        let placed: Vec<u64> = arrays
            .iter()
            .map(|array| {
                let here = next;
                next = align_up(next + array.buffer().len() as u64);
                here
            })
            .collect();
        if placed == offsets {
            break;
        }
        offsets = placed;
    }
    let desc_len = desc.len() as u64;
    let data_start = align_up(desc_at + desc_len);
    let payload_end = offsets
        .last()
        .zip(arrays.last())
        .map_or(desc_at + desc_len, |(o, a)| o + a.buffer().len() as u64);
    let mut head = Vec::new();
    head.try_reserve_exact(ENTRY_DESCRIPTION + desc.len())?;
    put_u64(&mut head, desc_len);
    head.extend_from_slice(&desc);
    head.resize(
        usize::try_from(data_start - (entry_at + RECORD_LEN as u64))
            .map_err(|_| Error::internal("entry"))?,
        0,
    );
    Ok(Description {
        records,
        entry_at,
        head,
        desc_crc: description_crc(desc_len, &desc),
        arrays: offsets.into_iter().zip(arrays).collect(),
        payload_len: payload_end - (entry_at + RECORD_LEN as u64),
    })
}

/// The sample count of a map's first block (0 without blocks).
pub(super) fn first_samples(map: &TensorMap) -> u64 {
    map.blocks()
        .first()
        .map_or(0, |b| b.samples().count() as u64)
}

fn collect_arrays<'a>(map: &'a TensorMap, out: &mut Vec<&'a Array>) {
    fn block<'a>(b: &'a TensorBlock, out: &mut Vec<&'a Array>) {
        out.push(b.values());
        for gradient in b.gradients().values() {
            block(gradient, out);
        }
    }
    for b in map.blocks() {
        block(b, out);
    }
}

/// The labels of `map` that go to LABELS records (keys, components,
/// properties), stored the first time the session sees them.
fn collect_shared(map: &TensorMap, encoder: &mut Encoder, records: &mut Vec<u8>, at: u64) {
    fn walk(b: &TensorBlock, encoder: &mut Encoder, records: &mut Vec<u8>, at: u64) {
        for c in b.components() {
            encoder.shared_ref(c, records, at);
        }
        encoder.shared_ref(b.properties(), records, at);
        for g in b.gradients().values() {
            walk(g, encoder, records, at);
        }
    }
    encoder.shared_ref(map.keys(), records, at);
    for b in map.blocks() {
        walk(b, encoder, records, at);
    }
}

/// A map's description at file offset `at` into `out`; array data offsets
/// taken in order from `offsets` (`k` the next).
fn encode_map(
    map: &TensorMap,
    encoder: &mut Encoder,
    at: u64,
    out: &mut Vec<u8>,
    offsets: &[u64],
    k: &mut usize,
) {
    fn block(
        b: &TensorBlock,
        fixed: &mut Vec<u8>,
        offsets: &[u64],
        k: &mut usize,
        put_ref: &mut dyn FnMut(&Labels, &mut Vec<u8>),
    ) {
        let values = b.values();
        fixed.push(dtype_code(values.dtype()));
        fixed.push(u8::try_from(values.shape().len()).unwrap_or(u8::MAX));
        fixed.extend_from_slice(&[0, 0]);
        for &n in values.shape() {
            put_u64(fixed, n as u64);
        }
        put_u64(fixed, offsets.get(*k).copied().unwrap_or(0));
        *k += 1;
        put_ref(b.samples(), fixed);
        for c in b.components() {
            put_ref(c, fixed);
        }
        put_ref(b.properties(), fixed);
        put_u32(fixed, u32_len(b.gradients().len()));
        for (parameter, g) in b.gradients() {
            put_str(fixed, parameter);
            block(g, fixed, offsets, k, put_ref);
        }
    }
    // inline labels go after the map's fixed part, in a second buffer
    let mut fixed = Vec::new();
    let mut inline = Vec::new();
    let mut refs: Vec<(usize, Labels)> = Vec::new();
    let mut put_ref = |labels: &Labels, fixed: &mut Vec<u8>| {
        refs.push((fixed.len(), labels.clone()));
        put_u64(fixed, 0);
    };
    put_ref(map.keys(), &mut fixed);
    put_u32(&mut fixed, u32_len(map.info().len()));
    for (key, value) in map.info() {
        put_str(&mut fixed, key);
        put_str(&mut fixed, value);
    }
    put_u32(&mut fixed, u32_len(map.blocks().len()));
    for b in map.blocks() {
        block(b, &mut fixed, offsets, k, &mut put_ref);
    }
    // the references resolved: shared ones to their records, the others
    // inline after the fixed part
    let inline_at = at + fixed.len() as u64;
    for (pos, labels) in refs {
        let reference = encoder.inline_ref(&labels, &mut inline, inline_at);
        fixed[pos..pos + 8].copy_from_slice(&reference.to_le_bytes());
    }
    out.extend_from_slice(&fixed);
    out.extend_from_slice(&inline);
}
