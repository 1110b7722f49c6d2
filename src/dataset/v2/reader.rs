//! The mapped reader of files of format versions 2 and 3: an entry is
//! read by copying its description out of the mapping (the aliasing rule,
//! buffer/mod.rs), checking it against its CRC32 (version 3), decoding it
//! and viewing its arrays in place. Labels of LABELS records are decoded
//! once and cached, so that equal labels share memory across reads; the
//! kernel is told of the access pattern (random reads, read-ahead for
//! large entries and iteration).

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use super::codec::{decode_labels, entry_values, parse_columns, ColumnType, Schema, ENTRY, LABELS};
use super::contents::{bad, piece_columns, Contents};
use super::layout::{
    description_crc, has_description_crcs, parse_dtype_code, parse_record, Record, RecordKind, Row,
    ENTRY_DESCRIPTION, RECORD_LEN,
};
use super::open::open;
use crate::arc::{ForkMutex, SetOnce};
use crate::array::{Array, Layout};
use crate::block::TensorBlock;
use crate::buffer::{Advice, Buffer};
use crate::dataset::Span;
use crate::error::{Error, Result};
use crate::io::bytes::{le64, Cursor};
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// The most [`Dataset::prefetch`] asks the kernel to read ahead at once.
const PREFETCH: u64 = 64 << 20;

/// Entries of at least this many bytes have their arrays read ahead when
/// read whole (`ds[i]`); smaller ones fault in their own pages.
const LARGE_ENTRY: u64 = 1 << 20;

/// Labels records the reader keeps decoded (cleared whole when full).
const LABELS_CACHE: usize = 4096;

/// A version-2 or 3 dataset opened for reading.
#[derive(Debug)]
pub struct Dataset {
    path: PathBuf,
    mapping: Buffer,
    contents: Contents,
    /// labels of LABELS records, by the offset of their encoding (a lock
    /// a forked child takes over; re-entered from a signal handler, the
    /// labels are decoded without it)
    labels: ForkMutex<HashMap<u64, Labels>>,
    /// the columns, read from the COLUMNS record at the first `column` or
    /// `n_samples` (a lock-free cell: a child forked while a thread reads
    /// them reads them again), as many values as the commit lists entries
    columns: SetOnce<Vec<Vec<u64>>>,
    /// the entries the commit lists (`keep_first` may keep fewer)
    committed_count: usize,
}

impl Dataset {
    pub fn open(path: &Path, file: &File, file_len: u64, mapping: Buffer) -> Result<Dataset> {
        let mut contents =
            open(file, file_len).map_err(|e| e.context(format!("'{}'", path.display())))?;
        let columns = SetOnce::new();
        if let Some(read) = contents.columns.take() {
            // recovered or empty: known already
            let _ = columns.set(read);
        }
        let needed = contents.rows.last().map_or(0, Row::end);
        if (mapping.len() as u64) < needed {
            return Err(Error::format(format!(
                "'{}' changed while it was opened",
                path.display()
            )));
        }
        // random access touches only its pages: no read-ahead around a
        // fault (the kernel's default pulls up to megabytes per map)
        mapping.advise(0, mapping.len(), Advice::Random);
        Ok(Dataset {
            path: path.to_path_buf(),
            mapping,
            committed_count: contents.rows.len(),
            contents,
            labels: ForkMutex::new(HashMap::new()),
            columns,
        })
    }

    /// Ask the kernel to read entries `start..start + count` (clamped)
    /// ahead: what iteration and `load_all` are about to read.
    pub fn prefetch(&self, start: usize, count: usize) {
        if let Some((offset, len)) = self.prefetch_range(start, count) {
            self.advise(offset, len, Advice::WillNeed);
        }
    }

    /// The file bytes [`Dataset::prefetch`] asks for: from entry `start`
    /// to the end of entry `start + count - 1`, at most [`PREFETCH`] bytes
    /// (256 entries of 100 MB would otherwise ask for 25 GB at once, and
    /// push out of the page cache what was read before).
    pub(in crate::dataset) fn prefetch_range(
        &self,
        start: usize,
        count: usize,
    ) -> Option<(u64, u64)> {
        let rows = &self.contents.rows;
        let end = start.saturating_add(count).min(rows.len());
        if start >= end {
            return None;
        }
        let first = rows[start].offset;
        let last = rows[end - 1];
        let until = last.end();
        Some((first, (until - first).min(PREFETCH)))
    }

    /// Advise the kernel about the file bytes `offset..offset + len` (the
    /// mapping is of the whole file, from its start).
    fn advise(&self, offset: u64, len: u64, advice: Advice) {
        let saturated = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        self.mapping
            .advise(saturated(offset), saturated(len), advice);
    }

    pub fn id(&self) -> &str {
        &self.contents.id
    }

    /// The file's format version (2, 3 or 4).
    pub fn version(&self) -> u32 {
        self.contents.version
    }

    /// Where the SEGMENT records the last commit lists lie (version 4;
    /// none in versions 2 and 3).
    pub fn piece_offsets(&self) -> impl Iterator<Item = u64> + '_ {
        self.contents.pieces.iter().map(|piece| piece.at)
    }

    pub fn len(&self) -> usize {
        self.contents.rows.len()
    }

    /// Entry `i`'s row (a position below `len`).
    pub fn row(&self, i: usize) -> Row {
        self.contents.rows[i]
    }

    pub fn committed(&self) -> bool {
        self.contents.committed
    }

    pub fn schema(&self) -> Option<&Schema> {
        self.contents.schema.as_ref()
    }

    pub fn is_empty_schema(&self) -> bool {
        self.contents.schema.is_none()
    }

    pub fn mapping(&self) -> &Buffer {
        &self.mapping
    }

    pub fn keep_first(&mut self, count: usize) {
        // the columns are cut to this count when read (`kept`)
        self.contents.rows.truncate(count);
    }

    pub fn span(&self, i: usize) -> Span {
        let row = self.contents.rows[i];
        Span {
            offset: row.offset,
            len: row.len + RECORD_LEN as u64,
        }
    }

    /// Whether entry `i`'s payload (its description and arrays) hashes to
    /// the CRC32 its row holds, read through the mapping a piece at a
    /// time: what `verify` and `upgrade` check before trusting an entry
    /// (a read checks its description only).
    pub fn payload_intact(&self, i: usize) -> Result<bool> {
        let row = self.contents.rows[i];
        let raw = self.mapping.raw();
        let start = usize::try_from(row.offset).map_err(|_| bad("entry offset"))?;
        let len = usize::try_from(row.len).map_err(|_| bad("entry length"))?;
        let mut head = [0u8; RECORD_LEN];
        raw.get(start, RECORD_LEN)
            .ok_or_else(|| bad("an entry outside the file"))?
            .copy_to(&mut head)?;
        if parse_record(&head)
            != Some(Record {
                kind: RecordKind::Entry,
                crc: row.crc,
                len: row.len,
            })
        {
            return Ok(false);
        }
        let payload = raw
            .get(start + RECORD_LEN, len)
            .ok_or_else(|| bad("an entry outside the file"))?;
        // under MADV_RANDOM, a large entry is asked for 64 MiB at a time
        let large = row.len >= LARGE_ENTRY;
        let hashed = crate::dataset::crc32_of_mapped(payload, |k| {
            if large && k % 64 == 0 {
                let from = row.offset + RECORD_LEN as u64 + ((k as u64) << 20);
                self.advise(from, PREFETCH, Advice::WillNeed);
            }
        })?;
        self.mapping.check_intact()?;
        Ok(hashed == row.crc)
    }

    /// Entry `i`'s column values and per-field sample counts, as its
    /// description holds them (the COLUMNS record holds them again).
    pub fn entry_values(&self, i: usize) -> Result<Vec<u64>> {
        let row = self.contents.rows[i];
        let n = self.contents.column_count();
        let start = usize::try_from(row.offset).map_err(|_| bad("entry offset"))? + RECORD_LEN;
        let len = usize::try_from(row.len.min(8 + 8 * n as u64)).unwrap_or(0);
        let head = self
            .mapping
            .raw()
            .get(start, len)
            .ok_or_else(|| bad("an entry outside the file"))?
            .to_vec()?;
        entry_values(&head, n)
    }

    /// The checksum of the first `count` entries: a CRC32 over their rows.
    pub fn checksum(&self, count: usize) -> u32 {
        let mut hasher = crc32fast::Hasher::new();
        for row in &self.contents.rows[..count.min(self.len())] {
            hasher.update(&row.offset.to_le_bytes());
            hasher.update(&row.len.to_le_bytes());
            hasher.update(&row.crc.to_le_bytes());
        }
        hasher.finalize()
    }

    /// Column `name`'s values (`None`: no such column); the COLUMNS
    /// record is read at the first call.
    pub fn column(&self, name: &str) -> Result<Option<(ColumnType, &[u64])>> {
        let Some(schema) = self.schema() else {
            return Ok(None);
        };
        let Some(i) = schema.columns.iter().position(|(n, _)| n == name) else {
            return Ok(None);
        };
        let kind = schema.columns[i].1;
        Ok(self.columns()?.get(i).map(|c| (kind, self.kept(c))))
    }

    /// The samples of field `field`'s first block, per entry (`None`: no
    /// such field).
    pub fn n_samples(&self, field: usize) -> Result<Option<&[u64]>> {
        let Some(schema) = self.schema() else {
            return Ok(None);
        };
        if field >= schema.fields.len() {
            return Ok(None);
        }
        let i = schema.columns.len() + field;
        Ok(self.columns()?.get(i).map(|c| self.kept(c)))
    }

    /// The values of the entries kept (`keep_first`).
    fn kept<'a>(&self, column: &'a [u64]) -> &'a [u64] {
        &column[..column.len().min(self.contents.rows.len())]
    }

    /// Every column, read from the COLUMNS record at the first call (its
    /// CRC checked then; a bad record a `FormatError` naming the file, at
    /// each call).
    fn columns(&self) -> Result<&Vec<Vec<u64>>> {
        if let Some(columns) = self.columns.get() {
            return Ok(columns);
        }
        let read = self
            .read_columns()
            .map_err(|e| e.context(format!("'{}'", self.path.display())))?;
        // a thread that read them at the same time set them first: its
        // values are the same
        let _ = self.columns.set(read);
        self.columns
            .get()
            .ok_or_else(|| Error::internal("columns read but not kept"))
    }

    fn read_columns(&self) -> Result<Vec<Vec<u64>>> {
        let raw = self.mapping.raw();
        if !self.contents.pieces.is_empty() {
            // version 4: each piece's columns, copied out of the mapping
            let mut columns = piece_columns(
                &self.contents.pieces,
                self.contents.column_count(),
                |at, len| {
                    let start = usize::try_from(at).map_err(|_| bad("a piece's range"))?;
                    let bytes = raw
                        .get(start, len)
                        .ok_or_else(|| bad("a SEGMENT record outside the file"))?;
                    let mut out = Vec::new();
                    out.try_reserve_exact(len)?;
                    out.resize(len, 0);
                    bytes.copy_to(&mut out)?;
                    Ok(out)
                },
            )?;
            for column in &mut columns {
                column.truncate(self.committed_count);
            }
            return Ok(columns);
        }
        let at = self.contents.columns_at;
        let start = usize::try_from(at).map_err(|_| bad("the COLUMNS record's offset"))?;
        // copied out of the mapping, then parsed (the aliasing rule)
        let mut head = [0u8; RECORD_LEN];
        raw.get(start, RECORD_LEN)
            .ok_or_else(|| bad("a COLUMNS record outside the file"))?
            .copy_to(&mut head)?;
        let record = parse_record(&head)
            .filter(|r| r.kind == RecordKind::Columns)
            .ok_or_else(|| bad("no COLUMNS record where the commit says"))?;
        let len = usize::try_from(record.len).map_err(|_| bad("a COLUMNS record too large"))?;
        // bounded by the mapping before anything is allocated
        let bytes = raw
            .get(start + RECORD_LEN, len)
            .ok_or_else(|| bad("a COLUMNS record outside the file"))?;
        let mut payload = Vec::new();
        payload.try_reserve_exact(len)?;
        payload.resize(len, 0);
        bytes.copy_to(&mut payload)?;
        if crc32fast::hash(&payload) != record.crc {
            return Err(bad("a damaged COLUMNS record (its CRC differs)"));
        }
        parse_columns(
            &payload,
            at,
            self.committed_count,
            self.contents.column_count(),
        )
    }

    /// The map of field `field` (an index in the schema's fields) of entry
    /// `i` (a position), with only the blocks matching `keys` when given.
    pub fn get(&self, i: usize, field: usize, keys: Option<&Labels>) -> Result<TensorMap> {
        self.read_entry(i, field, keys)
            .map_err(|e| e.context(format!("entry {i} of '{}'", self.path.display())))
    }

    fn read_entry(&self, i: usize, field: usize, keys: Option<&Labels>) -> Result<TensorMap> {
        let schema = self
            .schema()
            .ok_or_else(|| bad("entries without a schema"))?;
        if field >= schema.fields.len() {
            return Err(Error::internal("a field out of range"));
        }
        let row = self.contents.rows[i];
        let raw = self.mapping.raw();
        let start = usize::try_from(row.offset).map_err(|_| bad("entry offset"))?;
        // the description is copied out of the mapping, then parsed
        let mut head = [0u8; RECORD_LEN + ENTRY_DESCRIPTION];
        raw.get(start, head.len())
            .ok_or_else(|| bad("an entry outside the file"))?
            .copy_to(&mut head)?;
        let record = parse_record(&head).ok_or_else(|| bad("no entry record"))?;
        if record.kind != RecordKind::Entry || record.len != row.len || record.crc != row.crc {
            return Err(bad("the entry record differs from the index"));
        }
        let desc_len = le64(&head, RECORD_LEN);
        if desc_len > row.len - (ENTRY_DESCRIPTION as u64).min(row.len) {
            return Err(bad("an entry description longer than its record"));
        }
        let desc_len = usize::try_from(desc_len).map_err(|_| bad("description"))?;
        let desc_start = start + RECORD_LEN + ENTRY_DESCRIPTION;
        if row.len >= LARGE_ENTRY {
            // the mapping is advised MADV_RANDOM: a fault reads its one
            // page, and a large entry's description (copied below) and
            // arrays (read by their user) would cost a fault and a 4 KiB
            // read per page; asked for at once instead (64 MiB at most, as
            // iteration's read-ahead), the arrays only when all are read
            let until = if keys.is_none() {
                row.end()
            } else {
                (desc_start + desc_len) as u64
            };
            let from = desc_start as u64;
            self.advise(
                from,
                (until - from.min(until)).min(PREFETCH),
                Advice::WillNeed,
            );
        }
        let desc = raw
            .get(desc_start, desc_len)
            .ok_or_else(|| bad("an entry outside the file"))?
            .to_vec()?;
        self.mapping.check_intact()?;
        // the description is checked against its CRC32 (version 3), on the
        // copy that is then decoded: one damaged byte is an error, never
        // another dtype, array or labels
        if has_description_crcs(self.contents.version)
            && description_crc(desc_len as u64, &desc) != row.desc_crc
        {
            return Err(bad(
                "its description does not match its CRC32: the file is damaged \
                 (blockmap.verify lists every damaged entry)",
            ));
        }
        let entry = EntryView {
            dataset: self,
            // taken once for the entry's labels references
            cache: std::cell::RefCell::new(self.labels.lock().ok()),
            desc: &desc,
            desc_at: desc_start as u64,
            payload: (row.offset + RECORD_LEN as u64, row.end()),
        };
        let mut c = Cursor::new(&desc, ENTRY);
        c.take((schema.columns.len() + schema.fields.len()) * 8)?;
        for _ in 0..field {
            let len = usize::try_from(c.u64()?).map_err(|_| c.bad("field length"))?;
            c.take(len)?;
        }
        let len = usize::try_from(c.u64()?).map_err(|_| c.bad("field length"))?;
        let start = c.position();
        c.take(len)?;
        let mut fc = Cursor::new(&desc[start..start + len], ENTRY);
        entry.map(&mut fc, keys)
    }

    /// The labels of a LABELS record's encoding at `at`, cached, referred
    /// to by the entry whose record starts at `entry_at`. A LABELS record
    /// lies before every entry that refers to it (the writer puts it
    /// before the first) and outside every entry: a reference into an
    /// entry's bytes (its arrays, which a `mmap="c"` map may write) or
    /// forward is refused, so that the labels cached at an offset are
    /// those of a record no map's data can change.
    fn shared_labels(
        &self,
        at: u64,
        entry_at: u64,
        mut cache: Option<&mut HashMap<u64, Labels>>,
    ) -> Result<Labels> {
        if at >= entry_at {
            return Err(bad(
                "a labels reference at or after the entry that refers to it",
            ));
        }
        if let Some(labels) = cache.as_ref().and_then(|c| c.get(&at)) {
            return Ok(labels.clone());
        }
        let record_start = at
            .checked_sub(RECORD_LEN as u64)
            .and_then(|s| usize::try_from(s).ok())
            .ok_or_else(|| bad("a labels reference"))?;
        let raw = self.mapping.raw();
        let head = raw
            .get(record_start, RECORD_LEN)
            .ok_or_else(|| bad("a labels reference outside the file"))?
            .to_vec()?;
        let record = parse_record(&head)
            .filter(|r| r.kind == RecordKind::Labels)
            .ok_or_else(|| bad("a labels reference to no labels record"))?;
        let len = usize::try_from(record.len).map_err(|_| bad("labels record"))?;
        let record_end = at
            .checked_add(record.len)
            .filter(|&end| end <= entry_at)
            .ok_or_else(|| bad("a labels record that runs into the entry referring to it"))?;
        // the entry rows are ordered and disjoint: the last one starting
        // at or before the record, and the next, must not overlap it
        let rows = &self.contents.rows;
        let next = rows.partition_point(|r| r.offset <= record_start as u64);
        let overlaps = |r: &Row| {
            let end = r.end();
            r.offset < record_end && (record_start as u64) < end
        };
        if next
            .checked_sub(1)
            .and_then(|i| rows.get(i))
            .is_some_and(overlaps)
            || rows.get(next).is_some_and(overlaps)
        {
            return Err(bad("a labels reference into an entry's bytes"));
        }
        let payload = raw
            .get(record_start + RECORD_LEN, len)
            .ok_or_else(|| bad("a labels record outside the file"))?
            .to_vec()?;
        self.mapping.check_intact()?;
        if crc32fast::hash(&payload) != record.crc {
            return Err(bad("a damaged labels record"));
        }
        let mut c = Cursor::new(&payload, LABELS);
        let labels = decode_labels(&mut c)?;
        if !c.rest().is_empty() {
            return Err(c.bad("bytes after the labels"));
        }
        if let Some(cache) = cache.as_mut() {
            if cache.len() >= LABELS_CACHE {
                cache.clear();
            }
            cache.insert(at, labels.clone());
        }
        Ok(labels)
    }
}

/// One entry's description being decoded.
struct EntryView<'a> {
    dataset: &'a Dataset,
    /// the dataset's labels cache, locked for this entry (`None`: a signal
    /// handler's read while this thread holds it, decoded uncached)
    cache: std::cell::RefCell<Option<crate::arc::ForkGuard<'a, HashMap<u64, Labels>>>>,
    desc: &'a [u8],
    /// the file offset of `desc[0]`
    desc_at: u64,
    /// the file range of the entry's payload
    payload: (u64, u64),
}

impl EntryView<'_> {
    fn labels(&self, c: &mut Cursor<'_>) -> Result<Labels> {
        let at = c.u64()?;
        let desc_end = self.desc_at + self.desc.len() as u64;
        if at >= self.desc_at && at < desc_end {
            let start = usize::try_from(at - self.desc_at).map_err(|_| c.bad("labels"))?;
            return decode_labels(&mut Cursor::new(&self.desc[start..], ENTRY));
        }
        if at >= self.payload.0 && at < self.payload.1 {
            return Err(c.bad("labels among the entry's arrays"));
        }
        let mut cache = self.cache.borrow_mut();
        let entry_at = self.payload.0 - RECORD_LEN as u64;
        self.dataset
            .shared_labels(at, entry_at, cache.as_deref_mut())
    }

    /// The map whose description `c` is at, with only the blocks whose
    /// keys match `keys` when given.
    fn map(&self, c: &mut Cursor<'_>, keys: Option<&Labels>) -> Result<TensorMap> {
        let all_keys = self.labels(c)?;
        let n_info = c.count(8)?;
        let mut info = std::collections::BTreeMap::new();
        for _ in 0..n_info {
            let key = c.str()?;
            let value = c.str()?;
            info.insert(key, value);
        }
        let n_blocks = c.count(8)?;
        if n_blocks != all_keys.count() {
            return Err(c.bad("a block count that differs from the keys'"));
        }
        let Some(selection) = keys else {
            let mut blocks = Vec::with_capacity(n_blocks);
            for i in 0..n_blocks {
                let block = self
                    .block(c, true, 0)
                    .map_err(|e| e.context(format!("block {i}")))?;
                blocks.extend(block);
            }
            return finish(all_keys, blocks, info);
        };
        let positions = all_keys
            .select(selection)
            .map_err(|e| e.context("selecting keys"))?;
        let mut rows = Vec::with_capacity(positions.len() * all_keys.size());
        for &i in &positions {
            rows.extend_from_slice(all_keys.row(i));
        }
        let keys = Labels::new(all_keys.names().to_vec(), &rows)?;
        // which blocks are selected, by position (a lookup per block, not
        // a scan of the selection: O(blocks), not O(blocks x selected))
        let mut wanted = vec![false; n_blocks];
        for &i in &positions {
            if let Some(w) = wanted.get_mut(i) {
                *w = true;
            }
        }
        let mut kept: Vec<Option<TensorBlock>> = Vec::with_capacity(n_blocks);
        for (i, &keep) in wanted.iter().enumerate() {
            let block = self
                .block(c, keep, 0)
                .map_err(|e| e.context(format!("block {i}")))?;
            kept.push(block);
        }
        // in the selection's order (metatensor's, when it names every key
        // dimension), else in key order
        let blocks: Vec<TensorBlock> = positions
            .iter()
            .filter_map(|&i| kept.get_mut(i).and_then(Option::take))
            .collect();
        finish(keys, blocks, info)
    }

    fn block(&self, c: &mut Cursor<'_>, keep: bool, depth: usize) -> Result<Option<TensorBlock>> {
        // the limit every reader checks before recursing (limits.rs)
        if depth > crate::limits::MAX_GRADIENT_DEPTH {
            return Err(c.bad("gradients nested too deep"));
        }
        let (dtype, order) = parse_dtype_code(c.u8()?).ok_or_else(|| c.bad("dtype"))?;
        let ndim = usize::from(c.u8()?);
        if c.u16()? != 0 {
            return Err(c.bad("a block's reserved bytes are not zero"));
        }
        if !(2..=crate::limits::MAX_NDIM).contains(&ndim) {
            return Err(c.bad("an array's dimensions"));
        }
        let mut shape = Vec::with_capacity(ndim);
        for _ in 0..ndim {
            shape.push(usize::try_from(c.u64()?).map_err(|_| c.bad("shape"))?);
        }
        let data_at = c.u64()?;
        let samples = if keep {
            Some(self.labels(c)?)
        } else {
            c.u64().map(|_| None)?
        };
        let mut components = Vec::with_capacity(ndim - 2);
        for _ in 2..ndim {
            if keep {
                components.push(self.labels(c)?);
            } else {
                c.u64()?;
            }
        }
        let properties = if keep {
            Some(self.labels(c)?)
        } else {
            c.u64().map(|_| None)?
        };
        let n_gradients = c.count(8)?;
        let mut gradients = Vec::new();
        for _ in 0..n_gradients {
            let parameter = c.str()?;
            let gradient = self
                .block(c, keep, depth + 1)
                .map_err(|e| e.context(format!("gradient '{parameter}'")))?;
            if let Some(gradient) = gradient {
                gradients.push((parameter, gradient));
            }
        }
        let (Some(samples), Some(properties)) = (samples, properties) else {
            return Ok(None);
        };
        let len = crate::array::byte_len(dtype, &shape).map_err(as_format)?;
        let end = data_at
            .checked_add(len as u64)
            .ok_or_else(|| c.bad("data range"))?;
        let desc_end = self.desc_at + self.desc.len() as u64;
        if data_at < desc_end || end > self.payload.1 {
            return Err(c.bad("array data outside the entry's arrays"));
        }
        let data_at = usize::try_from(data_at).map_err(|_| c.bad("data range"))?;
        let buffer = self.dataset.mapping.slice(data_at, len)?;
        let values = Array::view_or_convert(dtype, shape, Layout::c_order(order), buffer)?;
        let mut block =
            TensorBlock::new(values, samples, components, properties).map_err(as_format)?;
        for (parameter, gradient) in gradients {
            block
                .add_gradient(&parameter, gradient)
                .map_err(as_format)?;
        }
        Ok(Some(block))
    }
}

/// The map of `keys`, `blocks` and `info` read from a file.
fn finish(
    keys: Labels,
    blocks: Vec<TensorBlock>,
    info: std::collections::BTreeMap<String, String>,
) -> Result<TensorMap> {
    let mut map = TensorMap::new(keys, blocks).map_err(as_format)?;
    if !info.is_empty() {
        map.replace_info(info).map_err(as_format)?;
    }
    Ok(map)
}

fn as_format(error: Error) -> Error {
    match error {
        Error::Invalid(message) => Error::format(format!("dataset file: {message}")),
        other => other,
    }
}
