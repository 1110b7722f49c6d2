//! The writer of files of format versions 2 and 3: entries appended in
//! place, each written whole before `write` returns (built in memory, or
//! its arrays streamed with its header patched last), a commit (the
//! COLUMNS record, the COMMIT record and its trailer) at each `commit`;
//! the bytes of a write that failed are cut off before anything else is
//! written after them, so that no walk of the records meets them. A new
//! dataset, of version 3, is built beside its path and put in place at
//! its first commit; an append writes in its file's version.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::codec::{
    encode_columns, encode_commit, encode_commit_pieces, encode_segment, Schema, SINGLE_FIELD,
};
use super::describe::{describe, first_samples, Description, Encoder, Entry};
use super::layout::{
    align_up, file_header, has_segments, pad_len, record_header, trailer, Piece, RecordKind, Row,
    COMMIT_ROWS, HEADER_LEN, PIECE_LEN, RECORD_LEN, ROW_LEN, TRAILER_LEN, VERSION,
};
use super::open::open;
use crate::data::DataRef;
use crate::dataset::{io_error, lock, new_id, read_at, Timeout};
use crate::error::{Error, Result};
use crate::io;
use crate::tensor::TensorMap;

/// Entries whose record is at most this large are built in memory and
/// written with one `pwrite`; larger ones stream their arrays.
const IN_MEMORY: usize = 4 << 20;

/// A writer adding entries to a dataset file of version 2 or 3.
///
/// One writer at a time per file, across processes (`lock.rs`). A new
/// dataset ([`Writer::create`]) is of version 3, built in a temporary
/// file beside its path and put in place at its first commit; an append
/// writes in its file's version (a file of version 2 stays one, readable
/// by the blockmap that wrote it).
#[derive(Debug)]
pub struct Writer {
    path: PathBuf,
    file: Option<File>,
    pending: Option<io::replace::Temporary>,
    replaced: Option<File>,
    target: PathBuf,
    timeout: Timeout,
    pid: u32,
    id: String,
    /// the file's format version (3 for a new dataset)
    version: u32,
    schema: Option<Schema>,
    schema_at: u64,
    rows: Vec<Row>,
    columns: Vec<Vec<u64>>,
    /// version 4: the runs of entries the last commit listed, in SEGMENT
    /// records (`write_commit` says how they merge)
    pieces: Vec<Piece>,
    /// where the next record goes (a multiple of 64)
    end: u64,
    /// the file's length once its last complete write (or commit) is in:
    /// what a failed write cuts the file back to
    written: u64,
    /// a failed write left bytes after `written` that could not be cut
    /// off yet: cut before anything else is written
    tail_left: bool,
    encoder: Encoder,
    /// a new dataset may replace a file that its path holds at its first
    /// commit
    overwrite: bool,
    /// a new dataset's creation lock, held until it is in place
    creating: Option<lock::CreationLock>,
}

impl Writer {
    /// A new dataset at `path`, put in place at its first commit. A path
    /// that holds a file is refused (an `AlreadyExists` I/O error naming
    /// `overwrite=True` and `append=True`) unless `overwrite`, which
    /// replaces it then (atomically). Two writers creating the same path
    /// take turns (`lock::CreationLock`, a lock file): the second waits
    /// for the first's first commit (`timeout` at most), then finds the
    /// file there.
    pub fn create(path: &Path, timeout: Timeout, overwrite: bool) -> Result<Writer> {
        Writer::create_version(path, timeout, overwrite, VERSION)
    }

    /// [`Writer::create`] in an earlier format version (2 to
    /// [`VERSION`]): what the tests and benchmarks of the layouts of
    /// versions 2 and 3 write.
    pub fn create_version(
        path: &Path,
        timeout: Timeout,
        overwrite: bool,
        version: u32,
    ) -> Result<Writer> {
        if !(super::layout::FIRST_VERSION..=VERSION).contains(&version) {
            return Err(Error::invalid(format!(
                "blockmap writes dataset files of versions 2 to {VERSION}, not {version}"
            )));
        }
        let target = io::replace::resolve(path)?;
        // a file already there is refused before any lock is taken: no
        // `.<name>.lock` is made beside it, and a writer creating or
        // replacing it at that moment cannot turn the refusal into a wait
        // or a "being written" error (the check after the lock still
        // catches a file made in between)
        if !overwrite && std::fs::metadata(&target).is_ok_and(|m| m.is_file()) {
            return Err(lock::exists(path));
        }
        let creating = lock::CreationLock::take(&target, timeout)?;
        let replaced = lock::open_locked(&target, false, timeout)?;
        if replaced.is_some() && !overwrite {
            return Err(lock::exists(path));
        }
        let mut writer = Writer::new_empty(path, target, replaced, timeout, version)?;
        writer.overwrite = overwrite;
        writer.creating = Some(creating);
        Ok(writer)
    }

    fn new_empty(
        path: &Path,
        target: PathBuf,
        replaced: Option<File>,
        timeout: Timeout,
        version: u32,
    ) -> Result<Writer> {
        let mut temporary = io::replace::Temporary::beside(&target)?;
        let id = new_id();
        let file = temporary.file()?;
        file.write_all_at(&file_header(&id, version), 0)
            .map_err(io_error(path, "cannot write"))?;
        lock::lock(file, path, Some(std::time::Duration::ZERO))?;
        let mut writer = Writer {
            path: path.to_path_buf(),
            file: None,
            pending: Some(temporary),
            replaced,
            target,
            timeout,
            pid: std::process::id(),
            id,
            version,
            schema: None,
            schema_at: 0,
            rows: Vec::new(),
            columns: Vec::new(),
            pieces: Vec::new(),
            end: HEADER_LEN as u64,
            written: HEADER_LEN as u64,
            tail_left: false,
            encoder: Encoder::default(),
            overwrite: false,
            creating: None,
        };
        writer.write_commit()?;
        Ok(writer)
    }

    /// Append to the version-2 dataset at `path` (created when missing).
    pub fn append(path: &Path, timeout: Timeout) -> Result<Writer> {
        let target = io::replace::resolve(path)?;
        let file = loop {
            if let Some(file) = lock::open_locked(&target, true, timeout)? {
                break file;
            }
            // created here: after any writer creating it (its lock file)
            let creating = lock::CreationLock::take(&target, timeout)?;
            if target.exists() {
                continue;
            }
            let mut writer = Writer::new_empty(path, target.clone(), None, timeout, VERSION)?;
            let Some(temporary) = writer.pending.take() else {
                return Err(Error::internal("a new dataset without its file"));
            };
            if let Some(file) = temporary.place_new(&target, true)? {
                writer.file = Some(file);
                drop(creating);
                return Ok(writer);
            }
        };
        let file_len = file
            .metadata()
            .map_err(io_error(path, "cannot read"))?
            .len();
        let in_file = |e: Error| e.context(format!("'{}'", path.display()));
        if io::zip::signature(&read_at(&file, 0, 4)?) == Some(io::zip::LOCAL) {
            return Err(Error::invalid(format!(
                "'{}' is a dataset of format version 1, which this blockmap reads but does \
                 not append to: convert it first with blockmap.Dataset.upgrade(src, dst)",
                path.display()
            )));
        }
        let mut contents = open(&file, file_len).map_err(in_file)?;
        if !contents.committed {
            file.set_len(contents.end)
                .map_err(io_error(path, "cannot write"))?;
        }
        let columns = contents.take_columns(&file, file_len).map_err(in_file)?;
        Ok(Writer {
            path: path.to_path_buf(),
            file: Some(file),
            pending: None,
            replaced: None,
            target,
            timeout,
            pid: std::process::id(),
            id: contents.id,
            version: contents.version,
            schema: contents.schema,
            schema_at: contents.schema_at,
            rows: contents.rows,
            columns,
            pieces: contents.pieces,
            end: align_up(contents.end),
            written: contents.end,
            tail_left: false,
            encoder: Encoder::default(),
            overwrite: false,
            creating: None,
        })
    }

    fn file(&self) -> Result<&File> {
        if self.pid != std::process::id() {
            return Err(Error::invalid(
                "this DatasetWriter was opened by another process (this one is a fork of it): \
                 only that process writes through it",
            ));
        }
        match (&self.file, &self.pending) {
            (Some(file), _) => Ok(file),
            (None, Some(temporary)) => temporary.file_ref(),
            (None, None) => Err(Error::invalid("the dataset writer is closed")),
        }
    }

    pub fn is_in_place(&self) -> bool {
        self.file.is_some()
    }

    /// Whether it is open (not closed nor given up) in the process that
    /// opened it: what a writer finalized unclosed commits.
    pub fn is_open_here(&self) -> bool {
        self.pid == std::process::id() && (self.file.is_some() || self.pending.is_some())
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The format version it writes (its file's).
    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn schema(&self) -> Option<&Schema> {
        self.schema.as_ref()
    }

    /// Cut the file back to what its complete writes hold: the bytes a
    /// failed write left after them (part of an entry's data, which may
    /// hold anything) must never be followed by a later write, where a
    /// walk of the records (recovery) would meet them between two records,
    /// nor end the file, where they could pass for a trailer.
    fn cut_tail(&mut self) -> Result<()> {
        let written = self.written;
        self.file()?
            .set_len(written)
            .map_err(io_error(&self.path, "cannot write"))?;
        self.tail_left = false;
        Ok(())
    }

    /// After a write that failed: its bytes cut off now, or, when that
    /// fails too, before anything else is written.
    fn cut_failed_write(&mut self) {
        self.tail_left = true;
        let _ = self.cut_tail();
    }

    /// Add one map at the end (a dataset of single maps).
    pub fn write(&mut self, map: &TensorMap) -> Result<()> {
        self.write_entry(&Entry {
            fields: vec![(SINGLE_FIELD, map)],
            columns: Vec::new(),
            single: true,
        })
    }

    /// Add an entry at the end. When this returns, the entry is in the
    /// file: a process killed from then on leaves a file that opens with
    /// it.
    pub fn write_entry(&mut self, entry: &Entry<'_>) -> Result<()> {
        let conformed = self.schema.as_ref().and_then(|s| entry.conform(s));
        let entry = conformed.as_ref().unwrap_or(entry);
        for (name, map) in &entry.fields {
            io::portable::check(DataRef::Tensor(map))
                .map_err(|e| e.context(format!("field '{name}'")))?;
        }
        let schema = entry.schema();
        for (i, field) in schema.fields.iter().enumerate() {
            if field.is_empty() || schema.fields[..i].contains(field) {
                return Err(Error::invalid(format!(
                    "field names must be unique and non-empty, got {field:?}"
                )));
            }
        }
        for (i, (column, _)) in schema.columns.iter().enumerate() {
            if column.is_empty()
                || column == "n_samples"
                || schema.columns[..i].iter().any(|(c, _)| c == column)
            {
                return Err(Error::invalid(format!(
                    "column names must be unique and non-empty, got {column:?}"
                )));
            }
        }
        if entry.fields.is_empty() {
            return Err(Error::invalid("an entry needs at least one field"));
        }
        if self.tail_left {
            self.cut_tail()?;
        }
        let mut records = Vec::new();
        let at = self.end;
        if let Some(existing) = &self.schema {
            if let Some(difference) = existing.difference(&schema) {
                return Err(Error::invalid(format!(
                    "this entry does not match '{}': {difference}",
                    self.path.display()
                )));
            }
        } else {
            let encoded = schema.encode();
            records.extend_from_slice(&record_header(
                RecordKind::Schema,
                crc32fast::hash(&encoded),
                encoded.len() as u64,
            ));
            records.extend_from_slice(&encoded);
            let pad = pad_len(at + records.len() as u64);
            records.resize(records.len() + pad, 0);
        }
        let schema_at = if self.schema.is_none() {
            at
        } else {
            self.schema_at
        };
        let written = describe(entry, &mut self.encoder, records, at)
            .and_then(|described| self.write_described(&described, at));
        let (row, end) = match written {
            Ok(done) => done,
            Err(e) => {
                // labels records it may have written are not referenced
                self.encoder.forget_from(at);
                // nor are any of its bytes
                self.cut_failed_write();
                return Err(e);
            }
        };
        if self.schema.is_none() {
            self.columns = vec![Vec::new(); schema.columns.len() + schema.fields.len()];
            self.schema = Some(schema);
            self.schema_at = schema_at;
        }
        self.rows.try_reserve(1)?;
        self.rows.push(row);
        for (column, (_, value)) in self.columns.iter_mut().zip(&entry.columns) {
            column.push(value.to_bits());
        }
        let n = entry.columns.len();
        for (column, (_, map)) in self.columns[n..].iter_mut().zip(&entry.fields) {
            column.push(first_samples(map));
        }
        self.end = end;
        self.written = end;
        Ok(())
    }

    /// Write the entry `described` at `at` (after the records that go
    /// first): its row and where the file's content ends after it.
    fn write_described(&self, described: &Description<'_>, at: u64) -> Result<(Row, u64)> {
        let Description {
            records,
            entry_at,
            head,
            desc_crc,
            arrays,
            payload_len,
        } = described;
        let (entry_at, payload_len) = (*entry_at, *payload_len);
        let file = self.file()?;
        let werr = || io_error(&self.path, "cannot write");
        let end = align_up(described.payload_end());
        let total = usize::try_from(end - at).unwrap_or(usize::MAX);
        let crc = if total <= IN_MEMORY {
            let mut out = Vec::new();
            out.try_reserve_exact(total)?;
            out.extend_from_slice(records);
            let header_at = out.len();
            out.extend_from_slice(&[0; RECORD_LEN]);
            out.extend_from_slice(head);
            for (offset, array) in arrays {
                let pos = usize::try_from(offset - at).map_err(|_| Error::internal("entry"))?;
                out.resize(pos, 0);
                array
                    .buffer()
                    .raw()
                    .extend_vec(&mut out, array.buffer().len());
            }
            let crc = crc32fast::hash(&out[header_at + RECORD_LEN..]);
            out[header_at..header_at + RECORD_LEN].copy_from_slice(&record_header(
                RecordKind::Entry,
                crc,
                payload_len,
            ));
            out.resize(total, 0);
            file.write_all_at(&out, at).map_err(werr())?;
            crc
        } else {
            // streamed: the header says "no entry" (length 0) until its
            // length and CRC are patched in last
            let mut out = Vec::new();
            out.try_reserve_exact(records.len() + RECORD_LEN + head.len())?;
            out.extend_from_slice(records);
            out.extend_from_slice(&record_header(RecordKind::Entry, 0, 0));
            out.extend_from_slice(head);
            let mut hasher = crc32fast::Hasher::new();
            hasher.update(head);
            file.write_all_at(&out, at).map_err(werr())?;
            let mut position = described.data_start();
            let zeros = [0u8; 64];
            for (offset, array) in arrays {
                let gap = usize::try_from(offset - position).unwrap_or(0);
                if gap > 0 {
                    hasher.update(&zeros[..gap]);
                    file.write_all_at(&zeros[..gap], position).map_err(werr())?;
                }
                let mut at_data = *offset;
                array.buffer().raw().for_each_chunk(|chunk| {
                    hasher.update(chunk);
                    file.write_all_at(chunk, at_data).map_err(werr())?;
                    at_data += chunk.len() as u64;
                    crate::interrupt::check()
                })?;
                position = at_data;
            }
            let pad = usize::try_from(end - position).unwrap_or(0);
            file.write_all_at(&zeros[..pad], position).map_err(werr())?;
            let crc = hasher.finalize();
            file.write_all_at(
                &record_header(RecordKind::Entry, crc, payload_len),
                entry_at,
            )
            .map_err(werr())?;
            crc
        };
        let row = Row {
            offset: entry_at,
            len: payload_len,
            crc,
            desc_crc: *desc_crc,
        };
        Ok((row, end))
    }

    /// Write the commit record and its trailer after the entries and sync
    /// the file; a new dataset is put in place at its first commit.
    pub fn commit(&mut self) -> Result<()> {
        self.write_commit()?;
        if self.pending.is_some() {
            self.publish()?;
        }
        Ok(())
    }

    fn publish(&mut self) -> Result<()> {
        let still_there = match (&self.replaced, std::fs::metadata(&self.target)) {
            (Some(replaced), Ok(there)) => {
                use std::os::unix::fs::MetadataExt;
                let ours = replaced
                    .metadata()
                    .map_err(io_error(&self.path, "cannot read"))?;
                ours.dev() == there.dev() && ours.ino() == there.ino()
            }
            (None, Err(e)) if e.kind() == std::io::ErrorKind::NotFound => true,
            _ => false,
        };
        if !still_there {
            self.replaced = lock::open_locked(&self.target, false, self.timeout)?;
            if self.replaced.is_some() && !self.overwrite {
                // put there meanwhile (by a writer that does not take the
                // lock file: another program, or an older blockmap)
                return Err(lock::exists(&self.path));
            }
        }
        let Some(temporary) = self.pending.take() else {
            return Ok(());
        };
        self.file = Some(temporary.replace_keeping(&self.target, true)?);
        if let Some(replaced) = self.replaced.take() {
            lock::unlock(&replaced);
        }
        self.creating = None;
        Ok(())
    }

    /// Give up a new dataset not yet in place (its path keeps what it
    /// held); one in place is committed and closed instead.
    pub fn abort(&mut self) -> Result<()> {
        if self.pending.is_some() && self.pid == std::process::id() {
            self.pending = None;
            if let Some(replaced) = self.replaced.take() {
                lock::unlock(&replaced);
            }
            self.creating = None;
            return Ok(());
        }
        self.close()
    }

    fn write_commit(&mut self) -> Result<()> {
        if self.tail_left {
            self.cut_tail()?;
        }
        if has_segments(self.version) {
            return self.write_segment_commit();
        }
        let file = self.file()?;
        let count = self.rows.len();
        let mut out = Vec::new();
        out.try_reserve(
            count * (ROW_LEN + 8 * self.columns.len())
                + 64 * (self.columns.len() + 2)
                + 2 * RECORD_LEN
                + COMMIT_ROWS
                + TRAILER_LEN,
        )?;
        // the COLUMNS record (entries only): read when a column is asked
        // for, so that an open reads the rows alone
        let columns_at = if count == 0 { 0 } else { self.end };
        if count > 0 {
            let payload = encode_columns(&self.columns, count, columns_at)?;
            out.extend_from_slice(&record_header(
                RecordKind::Columns,
                crc32fast::hash(&payload),
                payload.len() as u64,
            ));
            out.extend_from_slice(&payload);
            out.resize(out.len() + pad_len(columns_at + out.len() as u64), 0);
        }
        let start = self.end;
        let at = start + out.len() as u64;
        let payload = encode_commit(&self.rows, self.schema_at, columns_at, self.version)?;
        out.extend_from_slice(&record_header(
            RecordKind::Commit,
            crc32fast::hash(&payload),
            payload.len() as u64,
        ));
        out.extend_from_slice(&payload);
        out.extend_from_slice(&trailer(at, count as u64));
        let trailer_end = start + out.len() as u64;
        // what a failed write left after `written` was cut off before
        // (`cut_tail`): the file ends with this trailer
        let done = file
            .write_all_at(&out, start)
            .and_then(|()| file.sync_data())
            .map_err(io_error(&self.path, "cannot write"));
        if let Err(e) = done {
            // its COLUMNS record holds values users gave: cut off too
            self.cut_failed_write();
            return Err(e);
        }
        self.end = align_up(trailer_end);
        self.written = trailer_end;
        Ok(())
    }

    /// A commit of version 4: the entries written since the last commit
    /// go in one SEGMENT record, with those of the last pieces that are
    /// not larger than they (merged, as an LSM tree merges its levels),
    /// then a COMMIT record naming every piece, and its trailer.
    ///
    /// The pieces a commit leaves each hold more entries than all those
    /// after them together: there are at most log2(entries) + 1 of them,
    /// and an entry's row is written again only when the run it lies in
    /// at least doubles, at most log2(entries) times. A commit of `k`
    /// entries writes their rows and columns, amortized that factor, plus
    /// its commit record (24 bytes a piece) and trailer; it never writes
    /// the rows of the entries before them again (`bench/datasets.py`'s
    /// append sessions measure it).
    fn write_segment_commit(&mut self) -> Result<()> {
        let count = self.rows.len();
        let listed: u64 = self.pieces.iter().map(|p| p.count).sum();
        let listed = usize::try_from(listed).map_err(|_| Error::internal("pieces"))?;
        let mut keep = self.pieces.len();
        let mut from = listed;
        if count > listed {
            while keep > 0 && self.pieces[keep - 1].count <= (count - from) as u64 {
                keep -= 1;
                from -= usize::try_from(self.pieces[keep].count).unwrap_or(0);
            }
        }
        let start = self.end;
        let mut out = Vec::new();
        let mut pieces = Vec::new();
        pieces.try_reserve_exact(keep + 1)?;
        pieces.extend_from_slice(&self.pieces[..keep]);
        if count > from {
            let columns: Vec<&[u64]> = self.columns.iter().map(|c| &c[from..count]).collect();
            let (payload, rows_crc, columns_crc) =
                encode_segment(&self.rows[from..count], &columns, self.version)?;
            out.try_reserve(payload.len() + 2 * RECORD_LEN + 2 * 64)?;
            out.extend_from_slice(&record_header(
                RecordKind::Segment,
                crc32fast::hash(&payload),
                payload.len() as u64,
            ));
            out.extend_from_slice(&payload);
            out.resize(out.len() + pad_len(start + out.len() as u64), 0);
            pieces.push(Piece {
                at: start,
                count: (count - from) as u64,
                rows_crc,
                columns_crc,
            });
        }
        let at = start + out.len() as u64;
        let payload = encode_commit_pieces(count as u64, self.schema_at, &pieces)?;
        out.try_reserve(RECORD_LEN + payload.len() + TRAILER_LEN + PIECE_LEN)?;
        out.extend_from_slice(&record_header(
            RecordKind::Commit,
            crc32fast::hash(&payload),
            payload.len() as u64,
        ));
        out.extend_from_slice(&payload);
        out.extend_from_slice(&trailer(at, count as u64));
        let trailer_end = start + out.len() as u64;
        let file = self.file()?;
        let done = file
            .write_all_at(&out, start)
            .and_then(|()| file.sync_data())
            .map_err(io_error(&self.path, "cannot write"));
        if let Err(e) = done {
            // its SEGMENT record holds values users gave: cut off too
            self.cut_failed_write();
            return Err(e);
        }
        self.pieces = pieces;
        self.end = align_up(trailer_end);
        self.written = trailer_end;
        Ok(())
    }

    pub fn close(&mut self) -> Result<()> {
        if self.file.is_some() || self.pending.is_some() {
            self.commit()?;
            if let Some(file) = self.file.take() {
                lock::unlock(&file);
            }
        }
        Ok(())
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            if let Some(temporary) = self.pending.take() {
                std::mem::forget(temporary);
            }
            return;
        }
        self.pending = None;
        self.creating = None;
        for file in [self.file.take(), self.replaced.take()]
            .into_iter()
            .flatten()
        {
            lock::unlock(&file);
        }
    }
}
