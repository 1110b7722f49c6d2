//! A dataset file checked whole (`blockmap.verify`): every checksum and
//! every structural rule the readers know, each problem found reported in
//! one line rather than the first one raised. A read (`ds[i]`) checks the
//! description of the entry it reads only (its CRC32, version 3); this
//! reads every byte.
//!
//! Versions 2 and 3: the records are walked from the file header (each
//! record's CRC, every COMMIT closed by its trailer and listing the
//! entries before it, one SCHEMA, LABELS that decode), the file is opened
//! as a reader opens it, and every entry it lists is checked: its payload
//! against its CRC32, its description against its own (version 3), every
//! field decoded (labels references, shapes, array ranges), its column
//! values against the COLUMNS record. An entry record the open does not
//! list (a trailer that is not the file's last commit, a damaged commit)
//! is reported too. Version 1: each map's archive against the CRC32 its
//! central directory holds, and every entry of it against its own.

use std::fmt::Write as _;
use std::fs::File;
use std::path::Path;

use super::v2;
use super::v2::codec::{decode_labels, parse_rows, Schema, LABELS};
use super::v2::layout::{
    self as f, align_up, parse_trailer, Record, RecordKind, Row, COMMIT_COLUMNS_AT,
    COMMIT_SCHEMA_AT, RECORD_LEN, TRAILER_LEN,
};
use super::{read_at, Dataset, Inner};
use crate::buffer::MapMode;
use crate::error::{Error, Result};
use crate::io::bytes::{le64, Cursor};
use crate::io::zip::{dataset_start, DatasetStart};

/// The problems listed at most (the others are counted).
const LISTED: usize = 1000;

/// What [`verify`] found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// the file's format version (1, 2 or 3)
    pub version: u32,
    /// the entries a reader opens
    pub entries: usize,
    /// whether the file ends with its last commit (false: the writer was
    /// interrupted, the entries it wrote are recovered: not a problem)
    pub committed: bool,
    /// one line per problem, in the order of the file (at most 1,000)
    pub problems: Vec<String>,
    /// problems found beyond those listed
    pub unlisted: usize,
}

impl Report {
    fn problem(&mut self, text: String) {
        if self.problems.len() < LISTED {
            self.problems.push(text);
        } else {
            self.unlisted += 1;
        }
    }

    /// Whether no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// `Ok` when no problem was found; otherwise a format error whose
    /// message names the file and the number of problems, then lists them,
    /// one per line.
    pub fn into_result(self, path: &Path) -> Result<()> {
        if self.is_ok() {
            return Ok(());
        }
        let total = self.problems.len() + self.unlisted;
        let mut text = format!(
            "'{}' is damaged: {total} problem{} found",
            path.display(),
            if total == 1 { "" } else { "s" }
        );
        for problem in &self.problems {
            text.push_str("\n  ");
            text.push_str(problem);
        }
        if self.unlisted > 0 {
            let _ = write!(text, "\n  ... and {} more", self.unlisted);
        }
        Err(Error::format(text))
    }
}

/// The format version of the dataset file at `path`, `None` when it is
/// not one (the first bytes say: version 2 and 3's header, or version 1's
/// zip with its dataset header first).
pub fn file_version(path: &Path) -> Result<Option<u32>> {
    let file = crate::io::open_regular(path)?;
    let head = read_at(&file, 0, f::HEADER_LEN)?;
    Ok(match dataset_start(&head) {
        Some(DatasetStart::Magic) => {
            Some(f::parse_file_header(&head).map_or(f::VERSION, |(_, v)| v))
        }
        Some(DatasetStart::Zip) => Some(super::v1::VERSION),
        None => None,
    })
}

/// Check the dataset file at `path` whole. An error only when it cannot
/// be read, or is not a dataset file at all; every damage found is a line
/// of the report.
pub fn verify(path: &Path) -> Result<Report> {
    let version = file_version(path)?.ok_or_else(|| {
        Error::format(format!(
            "'{}' is not a blockmap dataset file",
            path.display()
        ))
    })?;
    let mut report = Report {
        version,
        ..Report::default()
    };
    let file = crate::io::open_regular(path)?;
    let file_len = file
        .metadata()
        .map_err(super::io_error(path, "cannot read"))?
        .len();
    if version >= f::FIRST_VERSION {
        if let Err(e) = f::parse_file_header(&read_at(&file, 0, f::HEADER_LEN)?) {
            report.problem(format!("the file header: {e}"));
            return Ok(report);
        }
        let walked = walk(&file, file_len, version, &mut report)?;
        check_opened(path, file_len, &walked, &mut report)?;
    } else {
        match Dataset::open(path, MapMode::ReadOnly) {
            Ok(dataset) => {
                report.entries = dataset.len();
                report.committed = dataset.committed();
                if let Inner::V1(d) = &dataset.inner {
                    d.verify(&mut |text| report.problem(text))?;
                }
            }
            Err(e @ (Error::Io { .. } | Error::Interrupted)) => return Err(e),
            Err(e) => report.problem(format!("the file does not open: {e}")),
        }
    }
    Ok(report)
}

/// An entry record met by the walk: its row as the record header gives
/// it, the CRC of its description when its payload matched its CRC.
struct Walked {
    row: Row,
    intact: bool,
}

/// What the walk of a version-2 or 3 file found.
struct Walk {
    entries: Vec<Walked>,
    /// where the walk stopped (the file's length when it reached its end)
    stopped: u64,
}

/// Walk the records from the header, each from the end of the one before,
/// checking each one's CRC and the commits' rows.
#[allow(clippy::too_many_lines)] // one walk, in order
fn walk(file: &File, file_len: u64, version: u32, report: &mut Report) -> Result<Walk> {
    let mut at = f::HEADER_LEN as u64;
    let mut entries: Vec<Walked> = Vec::new();
    let mut schema_at = None;
    // the COLUMNS record met since the last entry (a commit's own is the
    // last one before it)
    let mut columns_at = None;
    while at < file_len {
        crate::interrupt::check()?;
        let Some(record) = v2::record_at(file, at, file_len)? else {
            break;
        };
        let end = at + RECORD_LEN as u64 + record.len;
        match record.kind {
            RecordKind::Entry => {
                if record.len == 0 {
                    // a streamed entry whose write did not finish
                    break;
                }
                let desc = v2::hash_payload(file, at, record)?;
                if schema_at.is_none() {
                    report.problem(format!(
                        "the entry record at byte {at} comes before the schema"
                    ));
                }
                columns_at = None;
                entries.push(Walked {
                    row: Row {
                        offset: at,
                        len: record.len,
                        crc: record.crc,
                        desc_crc: desc.unwrap_or(0),
                    },
                    intact: desc.is_some(),
                });
            }
            RecordKind::Schema => match v2::payload_at(file, at, record)? {
                None => report.problem(format!(
                    "the SCHEMA record at byte {at} does not match its CRC32"
                )),
                Some(payload) => {
                    if let Err(e) = Schema::decode(&payload) {
                        report.problem(format!("the SCHEMA record at byte {at}: {e}"));
                    }
                    if schema_at.is_some() {
                        report.problem(format!("a second SCHEMA record at byte {at}"));
                    }
                    schema_at = Some(at);
                }
            },
            RecordKind::Labels => match v2::payload_at(file, at, record)? {
                None => report.problem(format!(
                    "the LABELS record at byte {at} does not match its CRC32"
                )),
                Some(payload) => {
                    let mut c = Cursor::new(&payload, LABELS);
                    let decoded = decode_labels(&mut c).and_then(|_| {
                        if c.rest().is_empty() {
                            Ok(())
                        } else {
                            Err(c.bad("bytes after the labels"))
                        }
                    });
                    if let Err(e) = decoded {
                        report.problem(format!("the LABELS record at byte {at}: {e}"));
                    }
                }
            },
            RecordKind::Segment => {
                if v2::payload_at(file, at, record)?.is_none() {
                    report.problem(format!(
                        "the SEGMENT record at byte {at} does not match its CRC32"
                    ));
                }
            }
            RecordKind::Columns => {
                columns_at = Some(at);
                if v2::payload_at(file, at, record)?.is_none() {
                    report.problem(format!(
                        "the COLUMNS record at byte {at} does not match its CRC32"
                    ));
                }
            }
            RecordKind::Commit => {
                let trailer = read_at(file, end, TRAILER_LEN)?;
                match parse_trailer(&trailer) {
                    Some((named, count)) if named == at => {
                        if count != entries.len() as u64 {
                            report.problem(format!(
                                "the commit at byte {at} counts {count} entries, {} lie \
                                 before it",
                                entries.len()
                            ));
                        }
                        let found = Found {
                            entries: &entries,
                            schema_at: schema_at.unwrap_or(0),
                            columns_at: columns_at.unwrap_or(0),
                        };
                        check_commit(file, at, record, version, &found, report)?;
                        at = align_up(end + TRAILER_LEN as u64);
                        continue;
                    }
                    // a commit interrupted before its trailer was written
                    // in full: the end of a file a reader recovers
                    _ if end + TRAILER_LEN as u64 > file_len => break,
                    // a whole trailer that is not this commit's: damaged
                    _ => {
                        report.problem(format!(
                            "the trailer after the COMMIT record at byte {at} is damaged (or \
                             not its own)"
                        ));
                        at = align_up(end + TRAILER_LEN as u64);
                        continue;
                    }
                }
            }
        }
        at = align_up(end);
    }
    Ok(Walk {
        entries,
        stopped: at.min(file_len),
    })
}

/// What the walk met before a commit: the entries, the schema record, the
/// COLUMNS record after the last entry.
struct Found<'a> {
    entries: &'a [Walked],
    schema_at: u64,
    columns_at: u64,
}

/// A commit against what the walk met before it: where its schema and
/// COLUMNS records are, and its rows.
fn check_commit(
    file: &File,
    at: u64,
    record: Record,
    version: u32,
    found: &Found<'_>,
    report: &mut Report,
) -> Result<()> {
    let entries = found.entries;
    let Some(payload) = v2::payload_at(file, at, record)? else {
        report.problem(format!(
            "the COMMIT record at byte {at} does not match its CRC32"
        ));
        return Ok(());
    };
    if f::has_segments(version) {
        // version 4: the rows are in the SEGMENT records its pieces name
        let file_len = file
            .metadata()
            .map_err(|e| Error::io("reading the dataset file", e))?
            .len();
        let named =
            (payload.len() >= f::COMMIT_PIECE_LIST).then(|| le64(&payload, COMMIT_SCHEMA_AT));
        if let Some(named) = named.filter(|&named| named != found.schema_at) {
            report.problem(format!(
                "the commit at byte {at} names its SCHEMA record at byte {named}, it is at byte {}",
                found.schema_at
            ));
            return Ok(());
        }
        let commit = match v2::parse_commit(file, file_len, at, &payload, version) {
            Ok(commit) => commit,
            Err(e @ (Error::Io { .. } | Error::Interrupted | Error::OutOfMemory(_))) => {
                return Err(e)
            }
            Err(e) => {
                report.problem(format!("the COMMIT record at byte {at}: {e}"));
                return Ok(());
            }
        };
        let n = commit
            .schema
            .as_ref()
            .map_or(0, |s| s.columns.len() + s.fields.len());
        if let Err(e) = v2::piece_columns(&commit.pieces, n, |start, len| {
            let bytes = read_at(file, start, len)?;
            if bytes.len() == len {
                Ok(bytes)
            } else {
                Err(Error::format("a SEGMENT record outside the file"))
            }
        }) {
            report.problem(format!("the commit at byte {at}: {e}"));
        }
        check_rows(at, &commit.rows, version, entries, report);
        return Ok(());
    }
    let rows = match parse_rows(&payload, version) {
        Ok(rows) => rows,
        Err(e) => {
            report.problem(format!("the COMMIT record at byte {at}: {e}"));
            return Ok(());
        }
    };
    // the payload's schema and COLUMNS offsets (its count was parsed with
    // the rows: the payload holds them)
    let (schema_at, named_columns_at) = (
        le64(&payload, COMMIT_SCHEMA_AT),
        le64(&payload, COMMIT_COLUMNS_AT),
    );
    let columns_at = if entries.is_empty() {
        0
    } else {
        found.columns_at
    };
    if schema_at != found.schema_at || named_columns_at != columns_at {
        report.problem(format!(
            "the commit at byte {at} names its SCHEMA record at byte {schema_at} and its \
             COLUMNS record at byte {named_columns_at}, they are at bytes {} and {columns_at}",
            found.schema_at
        ));
    }
    check_rows(at, &rows, version, entries, report);
    Ok(())
}

/// The rows of the commit at `at` against the entry records the walk met
/// before it.
fn check_rows(at: u64, rows: &[Row], version: u32, entries: &[Walked], report: &mut Report) {
    if rows.len() != entries.len() {
        report.problem(format!(
            "the commit at byte {at} lists {} entries, {} entry records lie before it",
            rows.len(),
            entries.len()
        ));
        return;
    }
    for (i, (row, walked)) in rows.iter().zip(entries).enumerate() {
        let found = walked.row;
        if (row.offset, row.len, row.crc) != (found.offset, found.len, found.crc) {
            report.problem(format!(
                "the commit at byte {at}: its row {i} names an entry of {} bytes at byte {}, \
                 the entry record there is {} bytes at byte {}",
                row.len, row.offset, found.len, found.offset
            ));
        } else if f::has_description_crcs(version)
            && walked.intact
            && row.desc_crc != found.desc_crc
        {
            report.problem(format!(
                "entry {i} (record at byte {}): its description does not match the CRC32 \
                 the commit at byte {at} holds",
                found.offset
            ));
        }
    }
}

/// The file opened as a reader opens it, and every entry it lists read
/// and checked against what the walk found.
fn check_opened(path: &Path, file_len: u64, walked: &Walk, report: &mut Report) -> Result<()> {
    let dataset = match Dataset::open(path, MapMode::ReadOnly) {
        Ok(dataset) => dataset,
        Err(e @ (Error::Io { .. } | Error::Interrupted)) => return Err(e),
        Err(e) => {
            report.problem(format!("the file does not open: {e}"));
            return Ok(());
        }
    };
    let Inner::V2(inner) = &dataset.inner else {
        return Err(Error::internal("a version-2 file opened as another"));
    };
    report.entries = inner.len();
    report.committed = inner.committed();
    // a file that ends with its last commit is walked to its end; one
    // that does not may end with the beginning of an interrupted write
    if inner.committed() && walked.stopped < file_len {
        report.problem(format!(
            "bytes {}..{file_len} are not records (the records before the last commit end \
             there)",
            walked.stopped
        ));
    }
    // every complete entry record is one the reader lists (one it does
    // not is lost to it: damaged, or after a damaged one)
    let listed: std::collections::HashSet<u64> =
        (0..inner.len()).map(|i| inner.row(i).offset).collect();
    for entry in &walked.entries {
        if !listed.contains(&entry.row.offset) {
            report.problem(format!(
                "the entry record at byte {} is not one of the file's entries (readers do \
                 not see it{})",
                entry.row.offset,
                if entry.intact {
                    ""
                } else {
                    "; its data does not match its CRC32"
                }
            ));
        }
    }
    let schema = dataset.schema();
    let columns: Vec<std::result::Result<&[u64], Error>> = schema
        .columns
        .iter()
        .map(|(name, _)| inner.column(name).map(|c| c.map_or(&[][..], |(_, v)| v)))
        .chain((0..schema.fields.len()).map(|field| {
            inner
                .n_samples(field)
                .map(std::option::Option::unwrap_or_default)
        }))
        .collect();
    if let Some(Err(e)) = columns.iter().find(|c| c.is_err()) {
        report.problem(format!("the columns: {e}"));
    }
    let names: Vec<&str> = schema
        .columns
        .iter()
        .map(|(name, _)| name.as_str())
        .chain(schema.fields.iter().map(|_| "n_samples"))
        .collect();
    let columns = Columns {
        names,
        values: columns.iter().map(|c| c.as_ref().ok().copied()).collect(),
        given: schema.columns.len(),
        fields: &schema.fields,
    };
    for i in 0..inner.len() {
        crate::interrupt::check()?;
        if i % 256 == 0 {
            inner.prefetch(i, 256);
        }
        check_entry(inner, i, walked, &columns, report)?;
    }
    Ok(())
}

/// The columns of a dataset, as its COLUMNS record holds them (`None`:
/// not readable).
struct Columns<'a> {
    /// the schema's columns, then `n_samples` once per field
    names: Vec<&'a str>,
    values: Vec<Option<&'a [u64]>>,
    /// how many of them the schema has (before the `n_samples`)
    given: usize,
    fields: &'a [String],
}

/// Entry `i` of an opened file: its payload against its CRC32, its fields
/// read, its column values against the COLUMNS record's.
fn check_entry(
    inner: &v2::Dataset,
    i: usize,
    walked: &Walk,
    columns: &Columns<'_>,
    report: &mut Report,
) -> Result<()> {
    let row = inner.row(i);
    let at = row.offset;
    let intact = match walked
        .entries
        .binary_search_by_key(&row.offset, |e| e.row.offset)
    {
        Ok(k) if walked.entries[k].row.len == row.len && walked.entries[k].row.crc == row.crc => {
            walked.entries[k].intact
        }
        _ => inner.payload_intact(i)?,
    };
    if !intact {
        report.problem(format!(
            "entry {i} (record at byte {at}): its data does not match its CRC32"
        ));
    }
    let values = inner.entry_values(i);
    for (field, name) in columns.fields.iter().enumerate() {
        match inner.get(i, field, None) {
            Err(e @ (Error::Io { .. } | Error::Interrupted | Error::OutOfMemory(_))) => {
                return Err(e)
            }
            Err(e) => report.problem(format!(
                "entry {i} (record at byte {at}), field '{name}': {e}"
            )),
            Ok(map) => {
                let samples = map
                    .blocks()
                    .first()
                    .map_or(0, |b| b.samples().count() as u64);
                let counted = values
                    .as_ref()
                    .ok()
                    .and_then(|v| v.get(columns.given + field));
                if counted.is_some_and(|&n| n != samples) {
                    report.problem(format!(
                        "entry {i} (record at byte {at}), field '{name}': its description \
                         counts {} samples, its map has {samples}",
                        counted.copied().unwrap_or(0)
                    ));
                }
            }
        }
    }
    match &values {
        Err(e) => report.problem(format!("entry {i} (record at byte {at}): {e}")),
        Ok(values) => {
            for (k, column) in columns.values.iter().enumerate() {
                let Some(column) = column else { continue };
                if column.get(i) != values.get(k) {
                    report.problem(format!(
                        "entry {i} (record at byte {at}): column '{}' holds {:?} in the \
                         COLUMNS record, {:?} in the entry",
                        columns.names[k],
                        column.get(i),
                        values.get(k)
                    ));
                }
            }
        }
    }
    Ok(())
}
