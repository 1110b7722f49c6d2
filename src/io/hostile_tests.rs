//! Hostile input for the readers (the Rust side of
//! `tests/python/io/test_io_hostile.py`): archives and NPY files whose
//! bytes lie, loaded through every reader form (a `Read + Seek`, a
//! `Buffer` aligned or not, the pieces of a pickle, a path read or mapped,
//! `verify_path`, and loads by keys), each refused with the error it
//! deserves (the exact `Error` variant, and a fragment of the message where
//! blockmap writes it rather than the zip reader), never a panic or an
//! allocation of what a header declares.
//!
//! The archives are built from a valid save: its entries are taken out by a
//! small central-directory reader of this file and written again by a small
//! zip writer of this file whose every size, offset, CRC and header field
//! can lie; container cases patch the valid save's records in place. Only
//! the io module's public entry points are used.

use std::io::Cursor;
use std::path::PathBuf;

use super::*;
use crate::buffer::MapMode;
use crate::dtype::DType;
use crate::fixtures::{block_with_nested_gradients, tensor, TempDir};

// ------------------------------------------------------------ zip records

const LOCAL_SIG: u32 = 0x0403_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const END_SIG: u32 = 0x0605_4b50;
const ZIP64_END_SIG: u32 = 0x0606_4b50;
const ZIP64_LOCATOR_SIG: u32 = 0x0706_4b50;
const STORED: u16 = 0;
const DEFLATED: u16 = 8;
const END_LEN: usize = 22;

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

fn put_u16(bytes: &mut [u8], at: usize, value: u16) {
    bytes[at..at + 2].copy_from_slice(&value.to_le_bytes());
}

fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn to_u16(n: usize) -> u16 {
    u16::try_from(n).unwrap()
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap()
}

fn idx(n: u32) -> usize {
    usize::try_from(n).unwrap()
}

/// Where the records of an archive lie (one without a comment).
#[derive(Debug)]
struct Layout {
    /// (name, offset of its local header, offset of its data, data length)
    entries: Vec<(String, usize, usize, usize)>,
    /// the central directory's records
    central: Vec<usize>,
    central_directory: usize,
    end: usize,
}

impl Layout {
    fn of(bytes: &[u8]) -> Layout {
        let end = bytes.len() - END_LEN;
        assert_eq!(u32_at(bytes, end), END_SIG);
        let count = usize::from(u16_at(bytes, end + 10));
        let central_directory = idx(u32_at(bytes, end + 16));
        let mut entries = Vec::new();
        let mut central = Vec::new();
        let mut at = central_directory;
        for _ in 0..count {
            assert_eq!(u32_at(bytes, at), CENTRAL_SIG);
            central.push(at);
            let size = idx(u32_at(bytes, at + 20));
            let name_len = usize::from(u16_at(bytes, at + 28));
            let extra_len = usize::from(u16_at(bytes, at + 30));
            let comment_len = usize::from(u16_at(bytes, at + 32));
            let local = idx(u32_at(bytes, at + 42));
            let name = String::from_utf8(bytes[at + 46..at + 46 + name_len].to_vec()).unwrap();
            assert_eq!(u32_at(bytes, local), LOCAL_SIG);
            let data = local
                + 30
                + usize::from(u16_at(bytes, local + 26))
                + usize::from(u16_at(bytes, local + 28));
            entries.push((name, local, data, size));
            at += 46 + name_len + extra_len + comment_len;
        }
        Layout {
            entries,
            central,
            central_directory,
            end,
        }
    }

    fn entry(&self, name: &str) -> (usize, usize, usize) {
        let (_, local, data, size) = self
            .entries
            .iter()
            .find(|e| e.0 == name)
            .unwrap_or_else(|| panic!("no entry {name}"));
        (*local, *data, *size)
    }

    fn central_of(&self, name: &str) -> usize {
        let i = self.entries.iter().position(|e| e.0 == name).unwrap();
        self.central[i]
    }
}

/// One entry to write; the `Option`s replace what the headers would say
/// truthfully.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    data: Vec<u8>,
    method: u16,
    /// the stored bytes (default: `data`, as a DEFLATE stream of stored
    /// blocks when `method` is DEFLATED)
    payload: Option<Vec<u8>>,
    crc: Option<u32>,
    declared_size: Option<u32>,
    declared_compressed: Option<u32>,
    central_crc: Option<u32>,
    local_offset: Option<u32>,
    flags: u16,
}

impl Entry {
    fn new(name: &str, data: Vec<u8>) -> Entry {
        Entry {
            name: name.to_string(),
            data,
            method: STORED,
            payload: None,
            crc: None,
            declared_size: None,
            declared_compressed: None,
            central_crc: None,
            local_offset: None,
            flags: 0,
        }
    }
}

/// `data` as a DEFLATE stream of stored blocks.
fn deflate_stored(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chunks = data.chunks(0xffff).peekable();
    if data.is_empty() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        out.push(u8::from(chunks.peek().is_none()));
        let len = to_u16(chunk.len());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

/// A DEFLATE stream (fixed Huffman codes) of `runs` runs of 258 zero bytes
/// after one zero byte: `1 + 258 * runs` bytes from 13 bits a run.
fn deflate_zeros(runs: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut acc = 0u64;
    let mut bits = 0u32;
    let mut push = |value: u32, count: u32, msb_first: bool, out: &mut Vec<u8>| {
        for i in 0..count {
            let bit = if msb_first {
                (value >> (count - 1 - i)) & 1
            } else {
                (value >> i) & 1
            };
            acc |= u64::from(bit) << bits;
            bits += 1;
            if bits == 8 {
                out.push(u8::try_from(acc).unwrap());
                acc = 0;
                bits = 0;
            }
        }
    };
    push(1, 1, false, &mut out); // BFINAL
    push(1, 2, false, &mut out); // BTYPE = fixed Huffman
    push(0x30, 8, true, &mut out); // literal 0
    for _ in 0..runs {
        push(0b1100_0101, 8, true, &mut out); // length 258 (code 285)
        push(0, 5, true, &mut out); // distance 1
    }
    push(0, 7, true, &mut out); // end of block
    push(0, 7, false, &mut out); // flush the last byte
    out
}

/// A zip archive of `entries` (in order), each payload starting `shift`
/// bytes after a 64-byte boundary (padding in an extra field).
fn zip_bytes(entries: &[Entry], shift: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for entry in entries {
        let name = entry.name.as_bytes();
        let payload = match (&entry.payload, entry.method) {
            (Some(payload), _) => payload.clone(),
            (None, DEFLATED) => deflate_stored(&entry.data),
            (None, _) => entry.data.clone(),
        };
        let crc = entry.crc.unwrap_or_else(|| crc32fast::hash(&entry.data));
        let size = entry.declared_size.unwrap_or(to_u32(entry.data.len()));
        let compressed = entry.declared_compressed.unwrap_or(to_u32(payload.len()));
        let offset = out.len();
        let mut pad = (shift + 64 * 4 - (offset + 30 + name.len()) % 64) % 64;
        if pad < 6 {
            pad += 64;
        }
        let mut extra = Vec::new();
        extra.extend_from_slice(&(if shift == 0 { 0xa11e_u16 } else { 0xcafe }).to_le_bytes());
        extra.extend_from_slice(&to_u16(pad - 4).to_le_bytes());
        extra.extend_from_slice(&64u16.to_le_bytes());
        extra.resize(pad, 0);
        let header = |sig: u32, central_record: bool| {
            let mut h = Vec::new();
            h.extend_from_slice(&sig.to_le_bytes());
            if central_record {
                h.extend_from_slice(&20u16.to_le_bytes());
            }
            for v in [20, entry.flags, entry.method, 0, (20 << 9) | (1 << 5) | 1] {
                h.extend_from_slice(&u16::to_le_bytes(v));
            }
            let crc = if central_record {
                entry.central_crc.unwrap_or(crc)
            } else {
                crc
            };
            for v in [crc, compressed, size] {
                h.extend_from_slice(&v.to_le_bytes());
            }
            h.extend_from_slice(&to_u16(name.len()).to_le_bytes());
            if central_record {
                h.extend_from_slice(&[0; 12]);
                let local = entry.local_offset.unwrap_or(to_u32(offset));
                h.extend_from_slice(&local.to_le_bytes());
            } else {
                h.extend_from_slice(&to_u16(extra.len()).to_le_bytes());
            }
            h.extend_from_slice(name);
            h
        };
        out.extend(header(LOCAL_SIG, false));
        out.extend_from_slice(&extra);
        out.extend_from_slice(&payload);
        central.extend(header(CENTRAL_SIG, true));
    }
    let central_offset = out.len();
    out.extend_from_slice(&central);
    end_record(&mut out, entries.len(), central.len(), central_offset);
    out
}

fn end_record(out: &mut Vec<u8>, count: usize, size: usize, offset: usize) {
    out.extend_from_slice(&END_SIG.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&to_u16(count).to_le_bytes());
    out.extend_from_slice(&to_u16(count).to_le_bytes());
    out.extend_from_slice(&to_u32(size).to_le_bytes());
    out.extend_from_slice(&to_u32(offset).to_le_bytes());
    out.extend_from_slice(&[0; 2]);
}

// ------------------------------------------------------------- the valid map

const VALUES: &str = "blocks/0/values.npy";
const SAMPLES: &str = "blocks/0/samples.npy";
const GRADIENT: &str = "blocks/0/gradients/positions/values.npy";

fn valid_tensor() -> Vec<u8> {
    save(Cursor::new(Vec::new()), DataRef::Tensor(&tensor(DType::F8)))
        .unwrap()
        .into_inner()
}

fn valid_block() -> Vec<u8> {
    let block = block_with_nested_gradients(DType::F8);
    save(Cursor::new(Vec::new()), DataRef::Block(&block))
        .unwrap()
        .into_inner()
}

/// The entries of the valid map's archive, in order.
fn valid_entries() -> Vec<Entry> {
    let bytes = valid_tensor();
    Layout::of(&bytes)
        .entries
        .iter()
        .map(|(name, _, data, size)| Entry::new(name, bytes[*data..*data + *size].to_vec()))
        .collect()
}

/// The valid map's archive with `name`'s content replaced by `data`.
fn with_entry(name: &str, data: Vec<u8>) -> Vec<u8> {
    with_changed(name, |entry| entry.data = data)
}

/// The valid map's archive with `change` applied to entry `name`.
fn with_changed(name: &str, change: impl FnOnce(&mut Entry)) -> Vec<u8> {
    let mut entries = valid_entries();
    let entry = entries.iter_mut().find(|e| e.name == name).unwrap();
    change(entry);
    zip_bytes(&entries, 0)
}

/// The valid map's archive without `names`.
fn without(names: &[&str]) -> Vec<u8> {
    let mut entries = valid_entries();
    entries.retain(|e| !names.contains(&e.name.as_str()));
    zip_bytes(&entries, 0)
}

/// An npy file: magic, version, header length, header text (padded so that
/// the data starts on a multiple of 64 bytes, ending with a newline), then
/// `body`. `header_len` replaces the length field.
fn npy_raw(
    magic: &[u8],
    version: (u8, u8),
    text: &[u8],
    header_len: Option<u32>,
    body: &[u8],
) -> Vec<u8> {
    let length_size = if version.0 == 1 { 2 } else { 4 };
    let preamble = magic.len() + 2 + length_size;
    let mut text = text.to_vec();
    let pad = (64 - (preamble + text.len() + 1) % 64) % 64;
    text.resize(text.len() + pad, b' ');
    text.push(b'\n');
    let header_len = header_len.unwrap_or(to_u32(text.len()));
    let mut out = magic.to_vec();
    out.extend_from_slice(&[version.0, version.1]);
    if length_size == 2 {
        out.extend_from_slice(&u16::try_from(header_len).unwrap().to_le_bytes());
    } else {
        out.extend_from_slice(&header_len.to_le_bytes());
    }
    out.extend_from_slice(&text);
    out.extend_from_slice(body);
    out
}

fn header_text(descr: &str, shape: &str) -> String {
    format!("{{'descr': {descr}, 'fortran_order': False, 'shape': {shape}, }}")
}

/// The valid values of blocks/0 (float64, shape (3, 2, 4)): 192 bytes.
fn values_body() -> Vec<u8> {
    let entries = valid_entries();
    let data = &entries.iter().find(|e| e.name == VALUES).unwrap().data;
    let header_end = 10 + usize::from(u16_at(data, 8));
    assert_eq!(data.len() - header_end, 192);
    data[header_end..].to_vec()
}

const VALID_HEADER: &str = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2, 4), }";

fn values_npy() -> Vec<u8> {
    npy_raw(
        npy::MAGIC,
        (1, 0),
        VALID_HEADER.as_bytes(),
        None,
        &values_body(),
    )
}

/// blocks/0/values.npy with the header text `text` over the valid data.
fn values_header(text: &str) -> Vec<u8> {
    with_entry(
        VALUES,
        npy_raw(npy::MAGIC, (1, 0), text.as_bytes(), None, &values_body()),
    )
}

/// blocks/0/values.npy declaring `shape` over `body`.
fn values_shape(shape: &str, body: &[u8]) -> Vec<u8> {
    let text = header_text("'<f8'", shape);
    with_entry(
        VALUES,
        npy_raw(npy::MAGIC, (1, 0), text.as_bytes(), None, body),
    )
}

/// blocks/0/samples.npy (names system, atom; 3 rows) with `shape` text and
/// `body`, or the valid ones.
fn samples_npy(
    field: &str,
    shape: &str,
    body: Option<&[u8]>,
    version: (u8, u8),
    header_len: Option<u32>,
) -> Vec<u8> {
    let rows: Vec<u8> = [0i32, 0, 0, 1, 1, 0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let descr = format!("[('system', '{field}'), ('atom', '{field}')]");
    let text = header_text(&descr, shape);
    npy_raw(
        npy::MAGIC,
        version,
        text.as_bytes(),
        header_len,
        body.unwrap_or(&rows),
    )
}

// ------------------------------------------------------------ reader forms

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Reader,
    Buffer,
    /// a buffer starting one byte past a 64-byte boundary: every array is
    /// copied
    Unaligned,
    /// the archive in three buffers, as a pickle's (`load_pieces`)
    Pieces,
    Path,
    Mapped,
    Verify,
}

const TENSOR_FORMS: [Form; 7] = [
    Form::Reader,
    Form::Buffer,
    Form::Unaligned,
    Form::Pieces,
    Form::Path,
    Form::Mapped,
    Form::Verify,
];

/// `bytes` in memory blockmap owns, one byte past a 64-byte boundary.
fn unaligned(bytes: &[u8]) -> Buffer {
    let padded = [&[0u8][..], bytes].concat();
    let buffer = Buffer::copy_from(&padded)
        .unwrap()
        .slice(1, bytes.len())
        .unwrap();
    assert_eq!(buffer.as_ptr() as usize % 64, 1);
    buffer
}

/// `bytes` in three buffers, cut at a third and two thirds.
fn pieces(bytes: &[u8]) -> Vec<Buffer> {
    let cuts = [0, bytes.len() / 3, bytes.len() * 2 / 3, bytes.len()];
    cuts.windows(2)
        .map(|w| Buffer::copy_from(&bytes[w[0]..w[1]]).unwrap())
        .collect()
}

/// A file of `bytes` in a directory of its own, removed when dropped.
struct TempFile {
    path: PathBuf,
    _dir: TempDir,
}

impl TempFile {
    fn new(bytes: &[u8]) -> TempFile {
        let dir = TempDir::new("hostile");
        let path = dir.join("archive.mts");
        std::fs::write(&path, bytes).unwrap();
        TempFile { path, _dir: dir }
    }
}

fn load_as(form: Form, bytes: &[u8], kind: Kind, file: Option<&TempFile>) -> Result<()> {
    let path = || &file.expect("a file for the path forms").path;
    match form {
        Form::Reader => load(Cursor::new(bytes), kind).map(drop),
        Form::Buffer => load_buffer(Buffer::copy_from(bytes)?, kind).map(drop),
        Form::Unaligned => load_buffer(unaligned(bytes), kind).map(drop),
        Form::Pieces => load_pieces(pieces(bytes), kind, true).map(drop),
        Form::Path => load_path(path(), kind, None).map(drop),
        Form::Mapped => load_path(path(), kind, Some(MapMode::ReadOnly)).map(drop),
        Form::Verify => verify_path(path()).map(drop),
    }
}

/// What each form makes of `bytes`.
fn load_all(bytes: &[u8], kind: Kind, forms: &[Form]) -> Vec<(Form, Result<()>)> {
    let file = forms
        .iter()
        .any(|f| matches!(f, Form::Path | Form::Mapped | Form::Verify))
        .then(|| TempFile::new(bytes));
    forms
        .iter()
        .map(|&form| (form, load_as(form, bytes, kind, file.as_ref())))
        .collect()
}

/// What a case must be refused with.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// an `Error::Format` whose message holds one of the fragments
    Format(&'static [&'static str]),
    /// an `Error::Invalid` whose message holds one of the fragments
    Invalid(&'static [&'static str]),
}

fn check(label: &str, form: Form, result: &Result<()>, expect: Expect) -> Option<String> {
    let error = match result {
        Ok(()) => return Some(format!("{label} / {form:?}: loaded without an error")),
        Err(error) => error,
    };
    let message = error.to_string();
    let ok = match (expect, error) {
        (Expect::Format(fragments), Error::Format(_))
        | (Expect::Invalid(fragments), Error::Invalid(_)) => {
            fragments.is_empty() || fragments.iter().any(|f| message.contains(f))
        }
        _ => false,
    };
    (!ok).then(|| format!("{label} / {form:?}: expected {expect:?}, got {error:?}"))
}

/// Every form of `forms` refuses every case as its `Expect` says; lists
/// every one that does not.
fn assert_refused(cases: &[(&str, Vec<u8>, Expect)], kind: Kind, forms: &[Form]) {
    let mut problems = Vec::new();
    for (label, bytes, expect) in cases {
        for (form, result) in load_all(bytes, kind, forms) {
            problems.extend(check(label, form, &result, *expect));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Refused as not a valid archive: the message is the zip reader's own.
const ANY_FORMAT: Expect = Expect::Format(&[]);
/// A declared size refused before anything is allocated for it: more than
/// a DEFLATE stream can hold, a STORED entry whose two sizes differ, or
/// 0xFFFFFFFF (which means "in the ZIP64 extra") without the extra.
const DECLARED: Expect = Expect::Format(&[
    "compressed bytes can hold",
    "a STORED entry declares",
    "ZIP64 size of",
]);

// ------------------------------------------------------------------ control

#[test]
fn the_rebuilt_archives_load_in_every_form() {
    let map = tensor(DType::F8);
    let deflated: Vec<Entry> = valid_entries()
        .into_iter()
        .map(|mut e| {
            e.method = DEFLATED;
            e
        })
        .collect();
    let values = |bytes: &[u8]| {
        let entries = Layout::of(bytes).entries;
        assert_eq!(entries.len(), valid_entries().len());
    };
    for (label, bytes) in [
        ("saved", valid_tensor()),
        ("rebuilt", zip_bytes(&valid_entries(), 0)),
        ("unaligned", zip_bytes(&valid_entries(), 3)),
        ("deflated", zip_bytes(&deflated, 0)),
        ("values rewritten", with_entry(VALUES, values_npy())),
        (
            "samples rewritten",
            with_entry(SAMPLES, samples_npy("<i4", "(3,)", None, (1, 0), None)),
        ),
    ] {
        values(&bytes);
        let file = TempFile::new(&bytes);
        for form in TENSOR_FORMS {
            load_as(form, &bytes, Kind::Tensor, Some(&file))
                .unwrap_or_else(|e| panic!("{label} / {form:?}: {e}"));
        }
        let Data::Tensor(loaded) = load(Cursor::new(&bytes), Kind::Tensor).unwrap() else {
            panic!("a tensor")
        };
        assert_eq!(loaded, map, "{label}");
    }
    // the DEFLATE helpers make what they say: info.json as 1 + 258 * 4
    // zero bytes (valid UTF-8, not JSON) inflates and passes its CRC
    // check, to be refused by the JSON parser; one bit more and the stream
    // or the CRC is refused
    let bomb = deflate_zeros(4);
    assert!(bomb.len() < 10, "{}", bomb.len());
    let zeros = |payload: Vec<u8>| {
        with_changed("info.json", |e| {
            e.method = DEFLATED;
            e.data = vec![0u8; 1 + 258 * 4];
            e.payload = Some(payload);
        })
    };
    let mut longer = bomb.clone();
    longer[1] ^= 0x20;
    let json = zeros(bomb);
    let broken = zeros(longer);
    let file = TempFile::new(&json);
    for form in TENSOR_FORMS {
        let err = load_as(form, &json, Kind::Tensor, Some(&file)).unwrap_err();
        assert!(
            err.to_string().contains("info.json is not a JSON object"),
            "{form:?}: {err}"
        );
        let err = load_all(&broken, Kind::Tensor, &[form])
            .remove(0)
            .1
            .unwrap_err();
        assert!(
            !err.to_string().contains("info.json is not a JSON object"),
            "{form:?}: {err}"
        );
    }
}

// ------------------------------------------------------------ zip container

/// Cuts of the valid archive at every record boundary, and inside each
/// record.
#[test]
fn truncated_at_every_record_boundary() {
    let bytes = valid_tensor();
    let layout = Layout::of(&bytes);
    let mut cuts = vec![0, 1, 4, 12, bytes.len() - 1, bytes.len() - END_LEN / 2];
    for (_, local, data, size) in &layout.entries {
        cuts.extend([*local, local + 12, *data, data + 5, data + size / 2]);
    }
    for central in &layout.central {
        cuts.extend([*central, central + 20]);
    }
    cuts.extend([layout.central_directory, layout.end, layout.end + 10]);
    cuts.sort_unstable();
    cuts.dedup();
    let cases: Vec<_> = cuts
        .iter()
        .map(|&cut| ("cut", bytes[..cut].to_vec(), ANY_FORMAT))
        .collect();
    assert!(cases.len() > 100, "{}", cases.len());
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
}

/// The last entry cut inside its data, a correct-looking central directory
/// after it: its declared size runs past the end of the file.
#[test]
fn truncated_payload_with_the_directory_rewritten() {
    let bytes = valid_tensor();
    let layout = Layout::of(&bytes);
    let (_, _, data, size) = layout.entries.last().unwrap().clone();
    let cut = data + size / 2;
    let mut truncated = bytes[..cut].to_vec();
    truncated.extend_from_slice(&bytes[layout.central_directory..layout.end]);
    let mut end = bytes[layout.end..].to_vec();
    put_u32(&mut end, 16, to_u32(cut));
    truncated.extend_from_slice(&end);
    assert_refused(
        &[("cut", truncated, ANY_FORMAT)],
        Kind::Tensor,
        &TENSOR_FORMS,
    );
}

fn patched(bytes: &[u8], patch: impl FnOnce(&mut Vec<u8>, &Layout)) -> Vec<u8> {
    let layout = Layout::of(bytes);
    let mut bytes = bytes.to_vec();
    patch(&mut bytes, &layout);
    bytes
}

#[test]
fn bad_signatures() {
    let bytes = valid_tensor();
    let cases = vec![
        (
            "first local header",
            patched(&bytes, |b, _| b[0] = b'X'),
            ANY_FORMAT,
        ),
        (
            "local header of the values",
            patched(&bytes, |b, l| b[l.entry(VALUES).0 + 3] = 9),
            ANY_FORMAT,
        ),
        (
            "central record of the values",
            patched(&bytes, |b, l| b[l.central_of(VALUES) + 2] = 9),
            ANY_FORMAT,
        ),
        (
            "end of central directory",
            patched(&bytes, |b, l| b[l.end + 1] = b'Q'),
            ANY_FORMAT,
        ),
    ];
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
}

/// Every payload byte flipped and a central CRC that lies: refused by every
/// load but the mapped one, which does not check CRCs (and may load the
/// corrupt value, but not crash).
#[test]
fn wrong_crc() {
    let bytes = valid_tensor();
    let flipped = patched(&bytes, |b, l| b[l.entry(VALUES).1 + 128 + 8] ^= 0x40);
    let central = with_changed(VALUES, |e| e.central_crc = Some(0x1234_5678));
    for bytes in [flipped, central] {
        let crc: &'static [&'static str] = &["CRC", "checksum"];
        assert_refused(
            &[("crc", bytes.clone(), Expect::Format(crc))],
            Kind::Tensor,
            &[
                Form::Reader,
                Form::Buffer,
                Form::Unaligned,
                Form::Pieces,
                Form::Path,
                Form::Verify,
            ],
        );
        let file = TempFile::new(&bytes);
        let mapped = load_as(Form::Mapped, &bytes, Kind::Tensor, Some(&file));
        assert!(
            matches!(mapped, Ok(()) | Err(Error::Format(_))),
            "{mapped:?}"
        );
    }
}

#[test]
fn lying_sizes_and_offsets() {
    let bytes = valid_tensor();
    let huge = 0xF000_0000;
    let directory_offset = Layout::of(&bytes).central_directory;
    let overlap = {
        // the values' central record points at the keys' local header
        patched(&bytes, |b, l| {
            let keys = to_u32(l.entry("keys.npy").0);
            put_u32(b, l.central_of(VALUES) + 42, keys);
        })
    };
    let cases = vec![
        (
            "stored entry larger than the file",
            with_changed(VALUES, |e| {
                e.declared_size = Some(huge);
                e.declared_compressed = Some(huge);
            }),
            ANY_FORMAT,
        ),
        (
            "stored entry declaring more than its compressed size",
            with_changed(VALUES, |e| e.declared_size = Some(huge)),
            DECLARED,
        ),
        (
            "compressed size one byte short",
            patched(&bytes, |b, l| {
                let at = l.central_of(VALUES) + 20;
                let size = u32_at(b, at);
                put_u32(b, at, size - 1);
            }),
            DECLARED,
        ),
        (
            "sizes one byte long, in both headers",
            with_changed(VALUES, |e| {
                let n = to_u32(e.data.len()) + 1;
                e.declared_size = Some(n);
                e.declared_compressed = Some(n);
            }),
            ANY_FORMAT,
        ),
        (
            "local header offset past the end",
            with_changed(VALUES, |e| e.local_offset = Some(0x7FFF_0000)),
            ANY_FORMAT,
        ),
        (
            "local header offset into the directory",
            with_changed(VALUES, |e| {
                e.local_offset = Some(to_u32(directory_offset) + 4);
            }),
            ANY_FORMAT,
        ),
        ("two entries on one local header", overlap, ANY_FORMAT),
        (
            "directory offset past the end",
            patched(&bytes, |b, l| put_u32(b, l.end + 16, 0x7FFF_0000)),
            ANY_FORMAT,
        ),
        (
            "huge entry count",
            patched(&bytes, |b, l| {
                put_u16(b, l.end + 8, 0xFFFE);
                put_u16(b, l.end + 10, 0xFFFE);
            }),
            ANY_FORMAT,
        ),
        (
            "entry count one too many",
            patched(&bytes, |b, l| {
                let n = u16_at(b, l.end + 10) + 1;
                put_u16(b, l.end + 8, n);
                put_u16(b, l.end + 10, n);
            }),
            ANY_FORMAT,
        ),
        (
            "local extra length past the entry",
            patched(&bytes, |b, l| put_u16(b, l.entry(VALUES).0 + 28, 0xFFFF)),
            ANY_FORMAT,
        ),
    ];
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
}

/// Entries the readers cannot read: refused, whatever their data.
#[test]
fn unsupported_entries() {
    let cases = vec![
        (
            "unknown compression method",
            with_changed(VALUES, |e| e.method = 77),
            ANY_FORMAT,
        ),
        (
            "bzip2 entry with garbage",
            with_changed(VALUES, |e| {
                e.method = 12;
                e.payload = Some([b"BZh9".as_slice(), &[b'x'; 64]].concat());
            }),
            ANY_FORMAT,
        ),
        (
            "encrypted entry",
            with_changed(VALUES, |e| e.flags = 1),
            ANY_FORMAT,
        ),
    ];
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
}

#[test]
fn not_an_archive() {
    let mut garbage = Vec::new();
    let mut state = 7u64;
    for _ in 0..4096 {
        garbage.push(u8::try_from(xorshift(&mut state) & 0xff).unwrap());
    }
    let after_signature = [
        b"PK\x03\x04".as_slice(),
        &(0..=255).collect::<Vec<u8>>().repeat(8),
    ]
    .concat();
    let mut no_entries = Vec::new();
    end_record(&mut no_entries, 0, 0, 0);
    let unrelated = zip_bytes(
        &[
            Entry::new("hello.txt", b"hello".to_vec()),
            Entry::new("x.npy", values_npy()),
        ],
        0,
    );
    let cases = vec![
        ("empty file", Vec::new(), ANY_FORMAT),
        ("garbage bytes", garbage, ANY_FORMAT),
        ("garbage after a zip signature", after_signature, ANY_FORMAT),
        ("zip with no entries", no_entries, ANY_FORMAT),
        ("zip of unrelated entries", unrelated, ANY_FORMAT),
    ];
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
    // the other formats say which loader reads them (verify_path reads
    // each as what it is)
    let other = vec![
        (
            "a bare npy file",
            values_npy(),
            Expect::Format(&["load_labels"]),
        ),
        (
            "a block file",
            valid_block(),
            Expect::Format(&["load_block"]),
        ),
    ];
    // (not load_pieces: a pickle's archive, never a file a user picked)
    let forms = [
        Form::Reader,
        Form::Buffer,
        Form::Unaligned,
        Form::Path,
        Form::Mapped,
    ];
    assert_refused(&other, Kind::Tensor, &forms);
    let file = TempFile::new(&valid_block());
    assert_eq!(verify_path(&file.path).unwrap(), Kind::Block);
    let file = TempFile::new(&values_npy());
    assert!(matches!(verify_path(&file.path), Err(Error::Format(_))));
}

/// A dataset file (its first entry the dataset's header) is not one map:
/// refused by every form, also when it ends with a map's whole archive
/// (a dataset being written), whose end record a zip reader would find.
#[test]
fn a_dataset_file_is_refused() {
    let mut entries = valid_entries();
    entries.insert(0, Entry::new("blockmap-dataset.json", b"{}".to_vec()));
    let one_archive = zip_bytes(&entries, 0);
    let header = zip_bytes(&[Entry::new("blockmap-dataset.json", b"{}".to_vec())], 0);
    let local_record = &header[..Layout::of(&header).central_directory];
    let being_written = [local_record, &valid_tensor()].concat();
    let dataset = Expect::Format(&["this is a blockmap dataset"]);
    assert_refused(
        &[
            ("one archive", one_archive, dataset),
            ("a map appended", being_written, dataset),
        ],
        Kind::Tensor,
        &TENSOR_FORMS,
    );
}

/// ZIP64 end records whose fields lie: counts, sizes and offsets far past
/// the file.
#[test]
fn zip64_fields_lying() {
    let bytes = valid_tensor();
    let layout = Layout::of(&bytes);
    let count = layout.entries.len() as u64;
    let size = (layout.end - layout.central_directory) as u64;
    let offset = layout.central_directory as u64;
    let zip64 = |count: u64, size: u64, offset: u64, locator_offset: Option<u64>| {
        let mut out = bytes[..layout.end].to_vec();
        let record = out.len() as u64;
        out.extend_from_slice(&ZIP64_END_SIG.to_le_bytes());
        out.extend_from_slice(&44u64.to_le_bytes());
        out.extend_from_slice(&[45, 0, 45, 0]);
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&ZIP64_LOCATOR_SIG.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&locator_offset.unwrap_or(record).to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&END_SIG.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&[0xff; 12]);
        out.extend_from_slice(&[0; 2]);
        out
    };
    // the control: truthful ZIP64 records load
    let truthful = zip64(count, size, offset, None);
    for (form, result) in load_all(&truthful, Kind::Tensor, &TENSOR_FORMS) {
        result.unwrap_or_else(|e| panic!("truthful zip64 / {form:?}: {e}"));
    }
    let cases = vec![
        (
            "huge count",
            zip64(u64::MAX, size, offset, None),
            ANY_FORMAT,
        ),
        ("count 2^40", zip64(1 << 40, size, offset, None), ANY_FORMAT),
        (
            "directory offset 1 TB",
            zip64(count, size, 1 << 40, None),
            ANY_FORMAT,
        ),
        (
            "directory offset u64::MAX",
            zip64(count, size, u64::MAX, None),
            ANY_FORMAT,
        ),
        (
            "record offset past the end",
            zip64(count, size, offset, Some(1 << 40)),
            ANY_FORMAT,
        ),
        (
            "record offset u64::MAX",
            zip64(count, size, offset, Some(u64::MAX)),
            ANY_FORMAT,
        ),
    ];
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
}

/// A ZIP64 extra field declaring a 1 TB entry: refused before anything of
/// that size is allocated (an allocation would fail as out of memory, or
/// the read as truncated, not as a size that does not fit).
#[test]
fn zip64_extra_declaring_a_terabyte_entry() {
    let bytes = valid_tensor();
    let layout = Layout::of(&bytes);
    let (_, _, size) = layout.entry(VALUES);
    let tera = 1u64 << 40;
    // a ZIP64 extra in the central record of the values (sizes only)
    let mut out = bytes[..layout.central_directory].to_vec();
    let directory = out.len();
    for (i, &at) in layout.central.iter().enumerate() {
        let name_len = usize::from(u16_at(&bytes, at + 28));
        let record_end = at + 46 + name_len + usize::from(u16_at(&bytes, at + 30));
        let mut record = bytes[at..record_end].to_vec();
        if layout.entries[i].0 == VALUES {
            put_u32(&mut record, 20, u32::MAX);
            put_u32(&mut record, 24, u32::MAX);
            let mut extra = vec![1, 0, 16, 0];
            extra.extend_from_slice(&tera.to_le_bytes());
            extra.extend_from_slice(&(size as u64).to_le_bytes());
            let extra_len = u16_at(&record, 30) + to_u16(extra.len());
            put_u16(&mut record, 30, extra_len);
            record.extend_from_slice(&extra);
        }
        out.extend_from_slice(&record);
    }
    let directory_size = out.len() - directory;
    end_record(&mut out, layout.entries.len(), directory_size, directory);
    assert_refused(
        &[("1 TB entry", out, DECLARED)],
        Kind::Tensor,
        &TENSOR_FORMS,
    );
}

/// DEFLATE entries that lie about what they inflate to.
#[test]
fn deflate_lies_and_bombs() {
    let valid = values_npy();
    let longer = [valid.as_slice(), &(0..=255).collect::<Vec<u8>>().repeat(16)].concat();
    let short = valid[..valid.len() - 64].to_vec();
    let inflate_past = |crc_of_all: bool| {
        with_changed(VALUES, |e| {
            e.method = DEFLATED;
            e.payload = Some(deflate_stored(&longer));
            e.crc = Some(crc32fast::hash(if crc_of_all { &longer } else { &valid }));
            e.declared_size = Some(to_u32(valid.len()));
        })
    };
    let inflate_short = |zero_filled: bool| {
        let filled = [short.as_slice(), &[0; 64]].concat();
        with_changed(VALUES, |e| {
            e.method = DEFLATED;
            e.payload = Some(deflate_stored(&short));
            e.crc = Some(crc32fast::hash(if zero_filled { &filled } else { &short }));
            e.declared_size = Some(to_u32(valid.len()));
        })
    };
    // a bomb: 3 GiB (or 4 GiB - 1) declared, 64 KiB of zeros inflated from
    // 415 bytes
    let bomb = |declared: u32| {
        with_changed(VALUES, |e| {
            e.method = DEFLATED;
            e.payload = Some(deflate_zeros(254));
            e.crc = Some(crc32fast::hash(&vec![0u8; 1 + 258 * 254]));
            e.declared_size = Some(declared);
        })
    };
    let cases = vec![
        (
            "corrupt stream",
            with_changed(VALUES, |e| {
                e.method = DEFLATED;
                e.payload = Some(vec![0xff; 100]);
            }),
            ANY_FORMAT,
        ),
        (
            "inflating past its declared size",
            inflate_past(false),
            ANY_FORMAT,
        ),
        (
            "inflating past, CRC of everything",
            inflate_past(true),
            ANY_FORMAT,
        ),
        (
            "inflating short of its declared size",
            with_changed(VALUES, |e| {
                e.method = DEFLATED;
                e.declared_size = Some(to_u32(e.data.len() + 64));
            }),
            ANY_FORMAT,
        ),
        (
            "inflating short, CRC of the inflated data",
            inflate_short(false),
            ANY_FORMAT,
        ),
        (
            "inflating short, CRC of it zero-filled",
            inflate_short(true),
            ANY_FORMAT,
        ),
        ("bomb declaring 3 GiB", bomb(3 << 30), DECLARED),
        ("bomb declaring 4 GiB - 1", bomb(u32::MAX), DECLARED),
    ];
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
}

/// A simple xorshift64: deterministic noise without another crate.
fn xorshift(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}

/// Records that disagree where the readers need only one of them (the
/// central directory's sizes, method and name; the local header only for
/// where the data starts): a load may refuse them, or load the map the
/// data holds, never another one.
#[test]
fn inconsistencies_the_readers_may_tolerate() {
    let bytes = valid_tensor();
    let directory = Layout::of(&bytes).end - Layout::of(&bytes).central_directory;
    let zip64_directory_size = {
        let layout = Layout::of(&bytes);
        let mut out = bytes[..layout.end].to_vec();
        let record = out.len() as u64;
        out.extend_from_slice(&ZIP64_END_SIG.to_le_bytes());
        out.extend_from_slice(&44u64.to_le_bytes());
        out.extend_from_slice(&[45, 0, 45, 0]);
        out.extend_from_slice(&[0; 8]);
        let count = layout.entries.len() as u64;
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&(1u64 << 40).to_le_bytes());
        out.extend_from_slice(&(layout.central_directory as u64).to_le_bytes());
        out.extend_from_slice(&ZIP64_LOCATOR_SIG.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&record.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&END_SIG.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&[0xff; 12]);
        out.extend_from_slice(&[0; 2]);
        out
    };
    let cases = [
        (
            "directory size past the end",
            patched(&bytes, |b, l| put_u32(b, l.end + 12, 0x7FFF_0000)),
        ),
        (
            "directory size too small",
            patched(&bytes, |b, l| put_u32(b, l.end + 12, to_u32(directory / 2))),
        ),
        ("ZIP64 directory size 1 TB", zip64_directory_size),
        (
            "local name differs",
            patched(&bytes, |b, l| b[l.entry(VALUES).0 + 30] = b'x'),
        ),
        (
            "local method differs",
            patched(&bytes, |b, l| put_u16(b, l.entry(VALUES).0 + 8, DEFLATED)),
        ),
        (
            "local sizes differ",
            patched(&bytes, |b, l| {
                let local = l.entry(VALUES).0;
                put_u32(b, local + 18, 16);
                put_u32(b, local + 22, 16);
            }),
        ),
        (
            "local CRC differs",
            patched(&bytes, |b, l| b[l.entry(VALUES).0 + 14] ^= 1),
        ),
    ];
    let map = tensor(DType::F8);
    for (label, bytes) in &cases {
        let file = TempFile::new(bytes);
        for form in TENSOR_FORMS {
            let loaded = match form {
                Form::Reader => load(Cursor::new(bytes), Kind::Tensor),
                Form::Buffer => load_buffer(Buffer::copy_from(bytes).unwrap(), Kind::Tensor),
                Form::Unaligned => load_buffer(unaligned(bytes), Kind::Tensor),
                Form::Pieces => load_pieces(pieces(bytes), Kind::Tensor, true),
                Form::Path => load_path(&file.path, Kind::Tensor, None),
                Form::Mapped => load_path(&file.path, Kind::Tensor, Some(MapMode::ReadOnly)),
                Form::Verify => verify_path(&file.path).map(|_| Data::Tensor(map.clone())),
            };
            match loaded {
                Ok(Data::Tensor(loaded)) => assert_eq!(loaded, map, "{label} / {form:?}"),
                Err(Error::Format(_)) => {}
                other => panic!("{label} / {form:?}: {:?}", other.map(|_| ())),
            }
        }
    }
}

/// Two entries named blocks/0/values.npy, the second of zeros: every form
/// reads the same one (the last, as Python's `zipfile`), or refuses them.
#[test]
fn duplicate_names_read_the_same_entry_in_every_form() {
    let mut entries = valid_entries();
    let mut zeros = entries.iter().find(|e| e.name == VALUES).unwrap().clone();
    let n = zeros.data.len();
    zeros.data[n - 192..].fill(0);
    entries.push(zeros);
    let bytes = zip_bytes(&entries, 0);
    let file = TempFile::new(&bytes);
    for form in [
        Form::Reader,
        Form::Buffer,
        Form::Unaligned,
        Form::Pieces,
        Form::Path,
        Form::Mapped,
    ] {
        let loaded = match form {
            Form::Reader => load(Cursor::new(&bytes), Kind::Tensor),
            Form::Buffer => load_buffer(Buffer::copy_from(&bytes).unwrap(), Kind::Tensor),
            Form::Unaligned => load_buffer(unaligned(&bytes), Kind::Tensor),
            Form::Pieces => load_pieces(pieces(&bytes), Kind::Tensor, true),
            Form::Path => load_path(&file.path, Kind::Tensor, None),
            _ => load_path(&file.path, Kind::Tensor, Some(MapMode::ReadOnly)),
        };
        match loaded {
            Ok(Data::Tensor(loaded)) => {
                let values = loaded.blocks()[0].values().buffer();
                assert!(
                    values.raw().to_vec().unwrap().iter().all(|&b| b == 0),
                    "duplicate names / {form:?}: not the last entry"
                );
            }
            Err(Error::Format(_)) => {}
            other => panic!("duplicate names / {form:?}: {:?}", other.map(|_| ())),
        }
    }
}

// ---------------------------------------------------------------- npy entries

/// The valid map's archive written again with every payload `shift` bytes
/// past a 64-byte boundary, or deflated: entries the loads must copy.
fn rewritten(bytes: &[u8], shift: usize, method: u16) -> Vec<u8> {
    let entries: Vec<Entry> = Layout::of(bytes)
        .entries
        .iter()
        .map(|(name, _, data, size)| Entry {
            method,
            ..Entry::new(name, bytes[*data..*data + *size].to_vec())
        })
        .collect();
    zip_bytes(&entries, shift)
}

fn values_with(
    magic: &[u8],
    version: (u8, u8),
    header_len: Option<u32>,
    body: Option<&[u8]>,
) -> Vec<u8> {
    let body = body.map_or_else(values_body, <[u8]>::to_vec);
    let npy = npy_raw(magic, version, VALID_HEADER.as_bytes(), header_len, &body);
    with_entry(VALUES, npy)
}

fn values_descr(descr: &str, itemsize: usize) -> Vec<u8> {
    let text = header_text(descr, "(3, 2, 4)");
    with_entry(
        VALUES,
        npy_raw(
            npy::MAGIC,
            (1, 0),
            text.as_bytes(),
            None,
            &vec![0; 24 * itemsize],
        ),
    )
}

fn values_cut(range: std::ops::Range<usize>, extra: &[u8]) -> Vec<u8> {
    let valid = values_npy();
    let end = range.end.min(valid.len());
    with_entry(VALUES, [&valid[range.start..end], extra].concat())
}

const HEADER_PAST_ENTRY: Expect = Expect::Format(&["npy header is longer than its entry"]);
const HEADER_TOO_LONG: Expect = Expect::Format(&["bytes is longer than the 1048576 bytes allowed"]);
const TOO_SHORT: Expect = Expect::Format(&["the npy entry is too short"]);
const TOO_LARGE: Expect = Expect::Format(&["is too large"]);
const DATA_SIZE: Expect = Expect::Format(&["but the shape"]);
const NEGATIVE: Expect = Expect::Format(&["negative dimension"]);
const SYNTAX: Expect = Expect::Format(&["invalid npy header at byte"]);
const DTYPE: Expect = Expect::Format(&["unsupported element type"]);
const MAGIC: Expect = Expect::Format(&["the magic string is missing"]);
const VERSION: Expect = Expect::Format(&["unsupported npy format version"]);
const FORTRAN: Expect = Expect::Format(&["'fortran_order' is not True or False"]);

type Case = (&'static str, Vec<u8>, Expect);

/// The cases of `test_io_hostile.py`'s `NPY_CASES` (and a few more), for
/// `blocks/0/values.npy` (float64, shape (3, 2, 4): 192 bytes) and the
/// samples of block 0.
fn npy_cases() -> Vec<Case> {
    [
        npy_length_cases(),
        npy_shape_cases(),
        npy_data_cases(),
        npy_dict_cases(),
        npy_labels_cases(),
    ]
    .concat()
}

/// The header length.
fn npy_length_cases() -> Vec<Case> {
    let full = values_npy().len();
    vec![
        // the header length
        (
            "huge header length v1",
            values_with(npy::MAGIC, (1, 0), Some(0xFFFF), None),
            HEADER_PAST_ENTRY,
        ),
        (
            "huge header length v2",
            values_with(npy::MAGIC, (2, 0), Some(u32::MAX), None),
            HEADER_TOO_LONG,
        ),
        (
            "huge header length v3",
            values_with(npy::MAGIC, (3, 0), Some(u32::MAX), None),
            HEADER_TOO_LONG,
        ),
        (
            "header length past the entry",
            values_with(npy::MAGIC, (1, 0), Some(to_u32(full)), None),
            HEADER_PAST_ENTRY,
        ),
        (
            "zero header length",
            values_with(npy::MAGIC, (1, 0), Some(0), None),
            SYNTAX,
        ),
        (
            "npy cut inside the preamble",
            values_cut(0..9, &[]),
            TOO_SHORT,
        ),
        (
            "npy cut inside the header",
            values_cut(0..60, &[]),
            HEADER_PAST_ENTRY,
        ),
        ("empty npy entry", with_entry(VALUES, Vec::new()), TOO_SHORT),
    ]
}

/// The shape.
fn npy_shape_cases() -> Vec<Case> {
    vec![
        (
            "element count overflows",
            values_shape("(1099511627776, 1099511627776)", &values_body()),
            TOO_LARGE,
        ),
        (
            "element count wraps to zero",
            values_shape("(4294967296, 4294967296)", &[]),
            TOO_LARGE,
        ),
        (
            "element count wraps to zero, 3-d",
            values_shape("(2, 4611686018427387904, 2)", &[]),
            TOO_LARGE,
        ),
        (
            "byte count wraps to zero",
            values_shape("(2, 2305843009213693952, 2)", &[]),
            TOO_LARGE,
        ),
        (
            "huge first dimension (64 TB)",
            values_shape("(1099511627776, 2, 4)", &values_body()),
            DATA_SIZE,
        ),
        (
            "huge last dimension",
            values_shape("(3, 2, 35184372088832)", &values_body()),
            DATA_SIZE,
        ),
        (
            "negative dimension",
            values_shape("(3, -2, 4)", &values_body()),
            NEGATIVE,
        ),
        (
            "all dimensions negative",
            values_shape("(-3, -2, -4)", &values_body()),
            NEGATIVE,
        ),
        (
            "float dimension",
            values_shape("(3, 2.0, 4)", &values_body()),
            SYNTAX,
        ),
        (
            "string dimension",
            values_shape("(3, '2', 4)", &values_body()),
            Expect::Format(&["dimensions must be integers"]),
        ),
        (
            "None dimension",
            values_shape("(3, None, 4)", &values_body()),
            SYNTAX,
        ),
        (
            "shape not a tuple",
            values_shape("24", &values_body()),
            Expect::Format(&["must be a tuple"]),
        ),
        (
            "dimension past i64",
            values_shape("(3, 99999999999999999999999, 4)", &values_body()),
            Expect::Format(&["too large integer"]),
        ),
    ]
}

/// The data, the element type, the preamble.
fn npy_data_cases() -> Vec<Case> {
    let full = values_npy().len();
    vec![
        // the data
        (
            "data shorter than the shape",
            values_cut(0..full - 8, &[]),
            DATA_SIZE,
        ),
        (
            "data shorter by one byte",
            values_cut(0..full - 1, &[]),
            DATA_SIZE,
        ),
        ("no data", values_cut(0..128, &[]), DATA_SIZE),
        (
            "data longer than the shape",
            values_cut(0..full, &[0; 8]),
            DATA_SIZE,
        ),
        (
            "data longer by one byte",
            values_cut(0..full, &[0]),
            DATA_SIZE,
        ),
        // element types
        ("unknown dtype f16", values_descr("'<f16'", 16), DTYPE),
        ("unicode dtype", values_descr("'<U4'", 16), DTYPE),
        ("object dtype", values_descr("'|O'", 8), DTYPE),
        ("bytes dtype", values_descr("'|S8'", 8), DTYPE),
        ("datetime dtype", values_descr("'<M8[s]'", 8), DTYPE),
        (
            "structured values",
            values_descr("[('a', '<f8')]", 8),
            Expect::Format(&["expected a plain array"]),
        ),
        ("empty descr", values_descr("''", 8), DTYPE),
        (
            "descr not a string",
            values_descr("8", 8),
            Expect::Format(&["'descr' must be"]),
        ),
        // the preamble
        (
            "bad magic",
            values_with(b"\x93NUMPZ", (1, 0), None, None),
            MAGIC,
        ),
        (
            "no magic",
            values_with(b"PK\x03\x04\x00\x00", (1, 0), None, None),
            MAGIC,
        ),
        (
            "unknown npy version 9.0",
            values_with(npy::MAGIC, (9, 0), None, None),
            VERSION,
        ),
        (
            "unknown npy version 1.7",
            values_with(npy::MAGIC, (1, 7), None, None),
            VERSION,
        ),
    ]
}

/// The header dict.
fn npy_dict_cases() -> Vec<Case> {
    vec![
        // the header dict
        (
            "header not a dict",
            values_header("['descr', '<f8']"),
            Expect::Format(&["not a dict"]),
        ),
        (
            "header dict not closed",
            values_header(&VALID_HEADER[..VALID_HEADER.len() - 1]),
            SYNTAX,
        ),
        (
            "header dict missing a colon",
            values_header(&VALID_HEADER.replacen(':', "", 1)),
            SYNTAX,
        ),
        (
            "header with an extra parenthesis",
            values_header(&VALID_HEADER.replace("4), }", "4)), }")),
            SYNTAX,
        ),
        (
            "header not latin-1 text",
            with_entry(
                VALUES,
                npy_raw(npy::MAGIC, (1, 0), b"{\xff\xfe\x00}", None, &values_body()),
            ),
            Expect::Format(&["not valid text"]),
        ),
        (
            "header with code",
            values_header(
                "{'descr': '<f8', 'fortran_order': __import__('os').abort(), 'shape': (3, 2, 4), }",
            ),
            SYNTAX,
        ),
        ("empty header", values_header(""), SYNTAX),
        (
            "fortran_order is 0",
            values_header(&VALID_HEADER.replace("False", "0")),
            FORTRAN,
        ),
        (
            "fortran_order is a string",
            values_header(&VALID_HEADER.replace("False", "'False'")),
            FORTRAN,
        ),
        (
            "fortran_order is None",
            values_header(&VALID_HEADER.replace("False", "None")),
            SYNTAX,
        ),
        (
            "missing descr",
            values_header("{'fortran_order': False, 'shape': (3, 2, 4), }"),
            Expect::Format(&["no 'descr'"]),
        ),
        (
            "missing fortran_order",
            values_header("{'descr': '<f8', 'shape': (3, 2, 4), }"),
            Expect::Format(&["no 'fortran_order'"]),
        ),
        (
            "missing shape",
            values_header("{'descr': '<f8', 'fortran_order': False, }"),
            Expect::Format(&["no 'shape'"]),
        ),
        (
            "extra key",
            values_header(&VALID_HEADER.replace('}', "'extra': 1, }")),
            Expect::Format(&["unexpected key 'extra'"]),
        ),
        (
            "header overflowing its 1 MiB limit",
            with_entry(
                VALUES,
                npy_raw(
                    npy::MAGIC,
                    (2, 0),
                    VALID_HEADER
                        .replace('}', &format!("'x': '{}', }}", "x".repeat(2 << 20)))
                        .as_bytes(),
                    None,
                    &values_body(),
                ),
            ),
            HEADER_TOO_LONG,
        ),
    ]
}

/// Lies in labels entries.
fn npy_labels_cases() -> Vec<Case> {
    let samples_body: Vec<u8> = [0i32, 0, 0, 1, 1, 0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let samples = |shape: &str, body: Option<&[u8]>, version, header_len| {
        with_entry(
            SAMPLES,
            samples_npy("<i4", shape, body, version, header_len),
        )
    };
    vec![
        // lies in a labels entry
        (
            "samples: huge header length",
            samples("(3,)", None, (2, 0), Some(u32::MAX)),
            HEADER_TOO_LONG,
        ),
        (
            "samples: data shorter than the count",
            samples("(3,)", Some(&samples_body[..20]), (1, 0), None),
            DATA_SIZE,
        ),
        (
            "samples: data longer than the count",
            samples(
                "(3,)",
                Some(&[samples_body.as_slice(), &[0; 8]].concat()),
                (1, 0),
                None,
            ),
            DATA_SIZE,
        ),
        (
            "samples: count overflows",
            samples("(4611686018427387904,)", None, (1, 0), None),
            TOO_LARGE,
        ),
        (
            "keys: negative count",
            with_entry(
                "keys.npy",
                labels_npy(&["o3_lambda", "center_type"], &[0, 1, 1, 6], "(-2,)"),
            ),
            NEGATIVE,
        ),
    ]
}

/// Labels of `names` and row-major `rows`, as int32 fields, with the shape
/// text `shape`.
fn labels_npy(names: &[&str], rows: &[i32], shape: &str) -> Vec<u8> {
    let fields: Vec<String> = names.iter().map(|n| format!("('{n}', '<i4')")).collect();
    let text = header_text(&format!("[{}]", fields.join(", ")), shape);
    let body: Vec<u8> = rows.iter().flat_map(|v| v.to_le_bytes()).collect();
    npy_raw(npy::MAGIC, (1, 0), text.as_bytes(), None, &body)
}

#[test]
fn npy_headers() {
    assert_refused(&npy_cases(), Kind::Tensor, &TENSOR_FORMS);
}

/// The size lies of `npy_cases` in entries the loads copy: misaligned, or
/// deflated.
#[test]
fn npy_headers_in_copied_entries() {
    let copied = [
        "huge header length v1",
        "huge header length v2",
        "header length past the entry",
        "element count overflows",
        "element count wraps to zero",
        "byte count wraps to zero",
        "huge first dimension (64 TB)",
        "negative dimension",
        "data shorter than the shape",
        "data longer than the shape",
        "samples: data shorter than the count",
        "samples: count overflows",
    ];
    let cases: Vec<_> = npy_cases()
        .into_iter()
        .filter(|(label, _, _)| copied.contains(label))
        .flat_map(|(label, bytes, expect)| {
            [
                (label, rewritten(&bytes, 3, STORED), expect),
                (label, rewritten(&bytes, 0, DEFLATED), expect),
            ]
        })
        .collect();
    assert_eq!(cases.len(), 2 * copied.len());
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
}

// ----------------------------------------------------------- labels entries

/// An npy of labels with `fields` (name, type) and the shape text `shape`
/// over `body`.
fn fields_npy(fields: &[(&str, &str)], shape: &str, body: &[u8]) -> Vec<u8> {
    let fields: Vec<String> = fields
        .iter()
        .map(|(name, field)| format!("('{name}', {field})"))
        .collect();
    let text = header_text(&format!("[{}]", fields.join(", ")), shape);
    npy_raw(npy::MAGIC, (1, 0), text.as_bytes(), None, body)
}

fn samples_named(names: &[&str]) -> Vec<u8> {
    with_entry(SAMPLES, labels_npy(names, &[0, 0, 0, 1, 1, 0], "(3,)"))
}

fn samples_field(field: &str, itemsize: usize) -> Vec<u8> {
    let fields = [("system", field), ("atom", field)];
    with_entry(SAMPLES, fields_npy(&fields, "(3,)", &vec![0; 6 * itemsize]))
}

#[test]
fn labels_entries() {
    let not_unique = |name: &str, names: &[&str], rows: &[i32]| {
        let n = rows.len() / names.len();
        with_entry(name, labels_npy(names, rows, &format!("({n},)")))
    };
    let utf8 = {
        let fields = "[('system', '<i4'), ('\u{e9}t\u{e9}', '<i4')]";
        let text = header_text(fields, "(3,)");
        let body: Vec<u8> = [0i32, 0, 0, 1, 1, 0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        with_entry(
            SAMPLES,
            npy_raw(npy::MAGIC, (3, 0), text.as_bytes(), None, &body),
        )
    };
    let unique: Expect = Expect::Invalid(&["twice"]);
    let name: Expect = Expect::Invalid(&["is not a valid label name"]);
    let cases = vec![
        (
            "samples not unique",
            not_unique(SAMPLES, &["system", "atom"], &[0, 1, 0, 1, 2, 2]),
            unique,
        ),
        (
            "keys not unique",
            not_unique("keys.npy", &["o3_lambda", "center_type"], &[3, 3, 3, 3]),
            unique,
        ),
        (
            "component not unique",
            not_unique("blocks/0/components/0.npy", &["o3_mu"], &[1, 1]),
            unique,
        ),
        (
            "name starting with a digit",
            samples_named(&["system", "1atom"]),
            name,
        ),
        (
            "name with a space",
            samples_named(&["system", "at om"]),
            name,
        ),
        ("name with a dash", samples_named(&["system", "a-b"]), name),
        ("empty name", samples_named(&["system", ""]), name),
        ("non-ASCII name", samples_named(&["system", "\u{e9}"]), name),
        ("non-ASCII name in a UTF-8 header", utf8, name),
        (
            "duplicate names",
            samples_named(&["atom", "atom"]),
            Expect::Invalid(&["is used twice"]),
        ),
    ];
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
}

#[test]
fn labels_entries_of_other_types() {
    let field: Expect = Expect::Format(&["labels must be int32"]);
    let cases = vec![
        ("int64 field", samples_field("'<i8'", 8), field),
        ("int16 field", samples_field("'<i2'", 2), field),
        ("uint32 field", samples_field("'<u4'", 4), field),
        ("float32 field", samples_field("'<f4'", 4), field),
        (
            "mixed fields",
            with_entry(
                SAMPLES,
                fields_npy(&[("system", "'<i4'"), ("atom", "'<i8'")], "(3,)", &[0; 36]),
            ),
            field,
        ),
        (
            "nested structured field",
            with_entry(
                SAMPLES,
                fields_npy(
                    &[("system", "'<i4'"), ("atom", "[('x', '<i4')]")],
                    "(3,)",
                    &[0; 24],
                ),
            ),
            Expect::Format(&["invalid npy header"]),
        ),
        (
            "sub-array field",
            with_entry(
                SAMPLES,
                fields_npy(
                    &[("system", "'<i4'"), ("atom", "'<i4', (2,)")],
                    "(3,)",
                    &[0; 36],
                ),
            ),
            Expect::Format(&["('name', 'type') pairs"]),
        ),
        (
            "labels not structured",
            with_entry(
                SAMPLES,
                npy_raw(
                    npy::MAGIC,
                    (1, 0),
                    header_text("'<f8'", "(3, 2)").as_bytes(),
                    None,
                    &[0; 48],
                ),
            ),
            Expect::Format(&["labels must be a structured array of int32 fields"]),
        ),
        (
            "two-dimensional labels",
            with_entry(
                SAMPLES,
                labels_npy(&["system", "atom"], &[0, 0, 0, 1, 1, 0], "(3, 1)"),
            ),
            ANY_FORMAT,
        ),
    ];
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
}

// ---------------------------------------------------------- missing entries

#[test]
fn missing_entries() {
    let second: Vec<String> = valid_entries()
        .into_iter()
        .map(|e| e.name)
        .filter(|n| n.starts_with("blocks/1/"))
        .collect();
    let second: Vec<&str> = second.iter().map(String::as_str).collect();
    let missing: Expect = Expect::Format(&["has no entry"]);
    let cases = vec![
        ("no keys.npy", without(&["keys.npy"]), missing),
        ("no values", without(&[VALUES]), missing),
        ("no samples", without(&[SAMPLES]), missing),
        (
            "no component",
            without(&["blocks/0/components/0.npy"]),
            missing,
        ),
        (
            "no properties",
            without(&["blocks/0/properties.npy"]),
            missing,
        ),
        ("no second block", without(&second), missing),
        ("no gradient values", without(&[GRADIENT]), missing),
        (
            "no gradient samples",
            without(&["blocks/0/gradients/positions/samples.npy"]),
            missing,
        ),
        (
            "no gradient component",
            without(&["blocks/0/gradients/positions/components/1.npy"]),
            missing,
        ),
        (
            "no nested gradient values",
            without(&["blocks/0/gradients/positions/gradients/cell/values.npy"]),
            missing,
        ),
    ];
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
}

// ---------------------------------------------------- the data model's rules

fn f8_npy(shape: &str, elements: usize) -> Vec<u8> {
    let text = header_text("'<f8'", shape);
    npy_raw(
        npy::MAGIC,
        (1, 0),
        text.as_bytes(),
        None,
        &vec![0; 8 * elements],
    )
}

#[test]
fn data_model_rules() {
    let gradient_samples = "blocks/0/gradients/positions/samples.npy";
    let gradient = |rows: &[i32]| {
        with_entry(
            gradient_samples,
            labels_npy(&["sample", "atom"], rows, "(2,)"),
        )
    };
    let block_1_gradients: Vec<String> = valid_entries()
        .into_iter()
        .map(|e| e.name)
        .filter(|n| n.starts_with("blocks/1/gradients/"))
        .collect();
    let block_1_gradients: Vec<&str> = block_1_gradients.iter().map(String::as_str).collect();
    let f4_gradient = {
        let text = header_text("'<f4'", "(2, 3, 2, 4)");
        npy_raw(npy::MAGIC, (1, 0), text.as_bytes(), None, &[0; 4 * 48])
    };
    let outside = Expect::Invalid(&["is outside the block's 3 samples"]);
    let cases = vec![
        (
            "gradient sample past the parent",
            gradient(&[0, 0, 3, 1]),
            outside,
        ),
        (
            "gradient sample far past the parent",
            gradient(&[0, 0, i32::MAX, 1]),
            outside,
        ),
        (
            "negative gradient sample",
            gradient(&[0, 0, -1, 1]),
            outside,
        ),
        (
            "gradient samples not starting with 'sample'",
            with_entry(
                gradient_samples,
                labels_npy(&["system", "atom"], &[0, 0, 2, 1], "(2,)"),
            ),
            Expect::Invalid(&["the first sample dimension must be 'sample'"]),
        ),
        (
            "gradient values of another dtype",
            with_entry(GRADIENT, f4_gradient),
            Expect::Invalid(&["values are float64, the block's are float32"]),
        ),
        (
            "gradient component differing from the parent's",
            with_entry(
                "blocks/0/gradients/positions/components/1.npy",
                labels_npy(&["o3_mu"], &[-1, 5], "(2,)"),
            ),
            Expect::Invalid(&["must end with the block's components"]),
        ),
        (
            "block without the other block's gradient",
            without(&block_1_gradients),
            Expect::Invalid(&["gradients [] differ from ['positions']"]),
        ),
        (
            "blocks with different sample names",
            with_entry(
                "blocks/1/samples.npy",
                labels_npy(&["system", "center"], &[0, 0, 0, 1, 1, 0], "(3,)"),
            ),
            Expect::Invalid(&["sample names ['system', 'center'] differ"]),
        ),
        (
            "more keys than blocks",
            with_entry(
                "keys.npy",
                labels_npy(&["o3_lambda", "center_type"], &[0, 1, 1, 6, 2, 2], "(3,)"),
            ),
            Expect::Format(&["the archive has no entry 'blocks/2/values.npy'"]),
        ),
        (
            "keys not labels",
            with_entry("keys.npy", f8_npy("(2, 2)", 4)),
            Expect::Format(&["labels must be a structured array of int32 fields"]),
        ),
    ];
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
}

#[test]
fn data_model_shapes() {
    let two_dims = Expect::Format(&["values must have at least 2 dimensions"]);
    let cases = vec![
        (
            "values with more samples than labels",
            with_entry(VALUES, f8_npy("(4, 2, 4)", 32)),
            Expect::Invalid(&["have 4 samples, but the sample labels"]),
        ),
        (
            "values with fewer properties than labels",
            with_entry(VALUES, f8_npy("(3, 2, 3)", 18)),
            Expect::Invalid(&["have 3 properties, but the property labels"]),
        ),
        (
            "values with a component of the wrong size",
            with_entry(VALUES, f8_npy("(3, 3, 4)", 36)),
            Expect::Invalid(&["have 3 entries along component 0"]),
        ),
        (
            "values with one dimension",
            with_entry(VALUES, f8_npy("(24,)", 24)),
            two_dims,
        ),
        (
            "values with zero dimensions",
            with_entry(VALUES, f8_npy("()", 1)),
            two_dims,
        ),
        (
            "gradient values of the wrong shape",
            with_entry(GRADIENT, f8_npy("(2, 3, 2, 5)", 60)),
            Expect::Invalid(&["have 5 properties"]),
        ),
    ];
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
}

// ------------------------------------------------------------------ info.json

#[test]
fn info_json() {
    let cases: Vec<_> = [
        ("a list", b"[1, 2]".as_slice()),
        ("a string", b"\"creator\""),
        ("a number value", b"{\"creator\": 1}"),
        ("a null value", b"{\"creator\": null}"),
        ("an object value", b"{\"creator\": {\"name\": \"x\"}}"),
        ("a list value", b"{\"creator\": [\"x\"]}"),
        ("not JSON", b"creator: x"),
        ("truncated JSON", b"{\"creator\": \"x\""),
        ("empty", b""),
        ("invalid UTF-8", b"{\"creator\": \"\xff\xfe\"}"),
    ]
    .into_iter()
    .map(|(label, text)| {
        (
            label,
            with_entry("info.json", text.to_vec()),
            Expect::Format(&["info.json"]),
        )
    })
    .collect();
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
}

// ---------------------------------------------- TensorBlock and Labels files

const BLOCK_FORMS: [Form; 6] = [
    Form::Reader,
    Form::Buffer,
    Form::Unaligned,
    Form::Pieces,
    Form::Path,
    Form::Mapped,
];

#[test]
fn hostile_block_files() {
    let valid = valid_block();
    let entries = || -> Vec<Entry> {
        Layout::of(&valid)
            .entries
            .iter()
            .map(|(name, _, data, size)| Entry::new(name, valid[*data..*data + *size].to_vec()))
            .collect()
    };
    let changed = |name: &str, data: Option<Vec<u8>>| {
        let mut entries = entries();
        let i = entries.iter().position(|e| e.name == name).unwrap();
        match data {
            Some(data) => entries[i].data = data,
            None => drop(entries.remove(i)),
        }
        zip_bytes(&entries, 0)
    };
    let values = entries()
        .into_iter()
        .find(|e| e.name == "values.npy")
        .unwrap()
        .data;
    let mut huge_header = values.clone();
    put_u16(&mut huge_header, 8, 0xFFFF);
    let cases = vec![
        ("truncated", valid[..valid.len() / 2].to_vec(), ANY_FORMAT),
        (
            "no samples",
            changed("samples.npy", None),
            Expect::Format(&["has no entry 'samples.npy'"]),
        ),
        (
            "values data short",
            changed("values.npy", Some(values[..values.len() - 8].to_vec())),
            DATA_SIZE,
        ),
        (
            "values header length huge",
            changed("values.npy", Some(huge_header)),
            HEADER_PAST_ENTRY,
        ),
        (
            "gradient sample past the parent",
            changed(
                "gradients/positions/samples.npy",
                Some(labels_npy(&["sample", "atom"], &[0, 0, 7, 1], "(2,)")),
            ),
            Expect::Invalid(&["is outside the block's 3 samples"]),
        ),
        ("empty", Vec::new(), ANY_FORMAT),
    ];
    assert_refused(&cases, Kind::Block, &BLOCK_FORMS);
    assert_refused(&cases[..5], Kind::Block, &[Form::Verify]);
    assert_refused(
        &[(
            "a TensorMap file",
            valid_tensor(),
            Expect::Format(&["load it with load"]),
        )],
        Kind::Block,
        &BLOCK_FORMS,
    );
}

#[test]
fn hostile_labels_files() {
    let rows = [0i32, 0, 0, 1, 1, 0];
    let body: Vec<u8> = rows.iter().flat_map(|v| v.to_le_bytes()).collect();
    let names = ["system", "atom"];
    let valid = labels_npy(&names, &rows, "(3,)");
    let header_len = |version: (u8, u8), len: u32| {
        let fields = "[('system', '<i4'), ('atom', '<i4')]";
        npy_raw(
            npy::MAGIC,
            version,
            header_text(fields, "(3,)").as_bytes(),
            Some(len),
            &body,
        )
    };
    let bad_magic = [b"\x93NUMPZ".as_slice(), &valid[6..]].concat();
    let cases = vec![
        (
            "huge header length v1",
            header_len((1, 0), 0xFFFF),
            ANY_FORMAT,
        ),
        (
            "huge header length v2",
            header_len((2, 0), u32::MAX),
            HEADER_TOO_LONG,
        ),
        ("data short", valid[..valid.len() - 4].to_vec(), ANY_FORMAT),
        (
            "data long",
            [valid.as_slice(), &[0; 8]].concat(),
            ANY_FORMAT,
        ),
        (
            "count overflows",
            labels_npy(&names, &rows, "(4611686018427387904,)"),
            TOO_LARGE,
        ),
        (
            "negative count",
            labels_npy(&names, &rows, "(-2,)"),
            NEGATIVE,
        ),
        (
            "not unique",
            labels_npy(&names, &[1, 1, 1, 1, 0, 0], "(3,)"),
            Expect::Invalid(&["twice"]),
        ),
        (
            "name not an identifier",
            labels_npy(&["system", "a b"], &rows, "(3,)"),
            Expect::Invalid(&["is not a valid label name"]),
        ),
        (
            "int64 field",
            fields_npy(&[("system", "'<i8'"), ("atom", "'<i8'")], "(3,)", &[0; 48]),
            Expect::Format(&["labels must be int32"]),
        ),
        (
            "object dtype",
            npy_raw(
                npy::MAGIC,
                (1, 0),
                header_text("'|O'", "(2,)").as_bytes(),
                None,
                &[0; 16],
            ),
            DTYPE,
        ),
        ("bad magic", bad_magic, ANY_FORMAT),
        (
            "a TensorMap file",
            valid_tensor(),
            Expect::Format(&["load it with load or load_block"]),
        ),
        ("garbage", (0..=255).collect(), ANY_FORMAT),
        ("empty", Vec::new(), ANY_FORMAT),
    ];
    assert_refused(
        &cases,
        Kind::Labels,
        &[Form::Reader, Form::Buffer, Form::Unaligned, Form::Path],
    );
    // verify_path reads a file starting with the npy magic as Labels
    let npy: Vec<_> = cases
        .iter()
        .filter(|(_, bytes, _)| bytes.starts_with(npy::MAGIC))
        .cloned()
        .collect();
    assert_eq!(npy.len(), 10);
    assert_refused(&npy, Kind::Labels, &[Form::Verify]);
}

// --------------------------------------------------------- keys= selection

/// A load by keys reads the keys and the selected blocks only: a lie in
/// block 0 is refused when block 0 is selected, and not read when it is
/// not; a lie in the keys is refused either way.
#[test]
fn selected_loads_read_only_what_they_select() {
    let first = crate::fixtures::labels(&["o3_lambda"], &[0]);
    let second = crate::fixtures::labels(&["o3_lambda"], &[1]);
    let selected = |bytes: &[u8], keys: &Labels| -> Vec<(Form, Result<Data>)> {
        let file = TempFile::new(bytes);
        vec![
            (
                Form::Reader,
                load_selected(Cursor::new(bytes), Kind::Tensor, Some(keys)),
            ),
            (
                Form::Buffer,
                load_buffer_selected(
                    Buffer::copy_from(bytes).unwrap(),
                    Kind::Tensor,
                    true,
                    Some(keys),
                ),
            ),
            (
                Form::Unaligned,
                load_buffer_selected(unaligned(bytes), Kind::Tensor, true, Some(keys)),
            ),
            (
                Form::Path,
                load_path_selected(&file.path, Kind::Tensor, None, Some(keys)),
            ),
            (
                Form::Mapped,
                load_path_selected(
                    &file.path,
                    Kind::Tensor,
                    Some(MapMode::ReadOnly),
                    Some(keys),
                ),
            ),
        ]
    };
    let mut problems = Vec::new();
    for (label, bytes, expect) in npy_cases() {
        for (form, result) in selected(&bytes, &first) {
            problems.extend(check(label, form, &result.map(drop), expect));
        }
        let keys_lie = label.starts_with("keys");
        for (form, result) in selected(&bytes, &second) {
            if keys_lie {
                problems.extend(check(label, form, &result.map(drop), expect));
                continue;
            }
            match result {
                Ok(Data::Tensor(map)) => {
                    assert_eq!(map.keys().count(), 1, "{label} / {form:?}");
                    assert_eq!(map.blocks()[0], block_with_nested_gradients(DType::F8));
                }
                other => problems.push(format!("{label} / {form:?}: {:?}", other.map(drop))),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ------------------------------------------------------ never a panic

/// `bytes` changed at random: a few bytes flipped, or cut, or a run of
/// bytes set to 0xff (a size or offset becoming huge).
fn mutated(bytes: &[u8], state: &mut u64) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let pick = |state: &mut u64, n: usize| usize::try_from(xorshift(state) % n as u64).unwrap();
    match xorshift(state) % 4 {
        0 => out.truncate(pick(state, bytes.len())),
        1 => {
            let at = pick(state, out.len().saturating_sub(4));
            out[at..at + 4].fill(0xff);
        }
        _ => {
            for _ in 0..=pick(state, 4) {
                let at = pick(state, out.len());
                out[at] ^= u8::try_from(1 + xorshift(state) % 255).unwrap();
            }
        }
    }
    out
}

/// Archives changed at random, loaded through every reader: an answer
/// (most often an error) every time, never a panic.
#[test]
fn random_corruption_never_panics() {
    const N: usize = 2000;
    let tensor_bytes = valid_tensor();
    let block_bytes = valid_block();
    let labels_bytes = labels_npy(&["system", "atom"], &[0, 0, 0, 1, 1, 0], "(3,)");
    let mut state = 0x9e37_79b9_7f4a_7c15;
    let mut outcomes = [0usize; 2];
    for i in 0..N {
        let (valid, kind) = match i % 8 {
            0 => (&block_bytes, Kind::Block),
            1 => (&labels_bytes, Kind::Labels),
            _ => (&tensor_bytes, Kind::Tensor),
        };
        let bytes = mutated(valid, &mut state);
        let forms: &[Form] = if kind == Kind::Labels {
            &[
                Form::Reader,
                Form::Buffer,
                Form::Unaligned,
                Form::Path,
                Form::Verify,
            ]
        } else {
            &TENSOR_FORMS
        };
        let result = std::panic::catch_unwind(|| {
            load_all(&bytes, kind, forms)
                .into_iter()
                .map(|(_, result)| result.is_ok())
                .collect::<Vec<_>>()
        });
        match result {
            Ok(answers) => {
                for ok in answers {
                    outcomes[usize::from(ok)] += 1;
                }
            }
            Err(panic) => panic!(
                "case {i} ({kind:?}) panicked ({:?}); its bytes: {bytes:?}",
                panic.downcast_ref::<String>()
            ),
        }
    }
    // most changes are found (flips in array data are found by the CRCs,
    // but for the mapped loads)
    assert!(outcomes[0] > outcomes[1], "{outcomes:?}");
}

/// The gradients of the two blocks differ, or a gradient's name holds a
/// '/' (which splits the entry names: it reads as a gradient "po" without
/// values).
#[test]
fn gradient_names() {
    let renamed = |from: &str, to: &str, keep: bool| {
        let mut entries = valid_entries();
        let copies: Vec<Entry> = entries
            .iter()
            .filter(|e| e.name.contains(from))
            .map(|e| Entry {
                name: e.name.replace(from, to),
                ..e.clone()
            })
            .collect();
        if !keep {
            entries.retain(|e| !e.name.contains(from));
        }
        entries.extend(copies);
        zip_bytes(&entries, 0)
    };
    let cases = vec![
        (
            "block with a gradient the other block lacks",
            renamed(
                "blocks/1/gradients/positions/",
                "blocks/1/gradients/strain/",
                true,
            ),
            Expect::Invalid(&["gradients ['positions', 'strain'] differ from ['positions']"]),
        ),
        (
            "gradient parameter with a slash",
            renamed("/gradients/positions/", "/gradients/po/sitions/", false),
            Expect::Format(&["has no entry 'blocks/0/gradients/po/values.npy'"]),
        ),
    ];
    assert_refused(&cases, Kind::Tensor, &TENSOR_FORMS);
}

/// A bomb whose NPY header declares 3 GiB of data too (shape
/// (2, 3, 2^26) of float64), over 8 MiB of zeros inflated from 53 kB:
/// refused by the declared size, before anything of it is allocated.
#[test]
fn deflate_bomb_with_a_matching_npy_shape() {
    let header = npy_raw(
        npy::MAGIC,
        (1, 0),
        header_text("'<f8'", "(2, 3, 67108864)").as_bytes(),
        None,
        &[],
    );
    let runs = (8 << 20) / 258;
    let mut payload = vec![0u8];
    let len = to_u16(header.len());
    payload.extend_from_slice(&len.to_le_bytes());
    payload.extend_from_slice(&(!len).to_le_bytes());
    payload.extend_from_slice(&header);
    payload.extend(deflate_zeros(runs));
    let content = [header.as_slice(), &vec![0; 1 + 258 * runs]].concat();
    let bytes = with_changed(VALUES, |e| {
        e.method = DEFLATED;
        e.crc = Some(crc32fast::hash(&content));
        e.declared_size = Some(to_u32(header.len()) + (3 << 30));
        e.payload = Some(payload);
    });
    assert!(bytes.len() < 100_000, "{}", bytes.len());
    assert_refused(&[("3 GiB", bytes, DECLARED)], Kind::Tensor, &TENSOR_FORMS);
    // the same entry declaring its true size loads as far as the shape
    let truthful = with_changed(VALUES, |e| {
        e.method = DEFLATED;
        e.data = content.clone();
        e.payload = Some(
            [
                &[0u8][..],
                &len.to_le_bytes(),
                &(!len).to_le_bytes(),
                &header,
                &deflate_zeros(runs),
            ]
            .concat(),
        );
    });
    assert_refused(
        &[(
            "true size",
            truthful,
            Expect::Format(&["but the shape [2, 3, 67108864] needs"]),
        )],
        Kind::Tensor,
        &TENSOR_FORMS,
    );
}

// ---------------------------------------- foreign zips held in memory

/// `foreign::zip_members` of `entries`, after `prefix` bytes, asking for
/// the NPY member `npy` and the raw member `raw`.
fn zip_members_of(
    entries: &[Entry],
    prefix: usize,
    npy: &[&str],
    raw: &[&str],
) -> Result<foreign::ZipMembers> {
    let bytes = [vec![0u8; prefix], zip_bytes(entries, 0)].concat();
    let owned = |names: &[&str]| names.iter().map(ToString::to_string).collect::<Vec<_>>();
    foreign::zip_members(Buffer::copy_from(&bytes)?, &owned(npy), &owned(raw))
}

fn system_entries() -> Vec<Entry> {
    let positions = npy_raw(
        npy::MAGIC,
        (1, 0),
        header_text("'<f8'", "(2, 3)").as_bytes(),
        None,
        &[0u8; 48],
    );
    vec![
        Entry::new("positions.npy", positions),
        Entry::new(
            "pairs/0/options.json",
            b"{\"class\": \"NeighborListOptions\"}".to_vec(),
        ),
    ]
}

#[test]
fn zip_members_reads_arrays_and_bytes_of_a_zip_in_memory() {
    let members = zip_members_of(
        &system_entries(),
        0,
        &["positions.npy"],
        &["pairs/0/options.json"],
    )
    .unwrap();
    assert_eq!(members.names, ["positions.npy", "pairs/0/options.json"]);
    assert_eq!(members.arrays[0].dtype(), DType::F8);
    assert_eq!(members.arrays[0].shape(), [2, 3]);
    assert_eq!(
        members.raw,
        [b"{\"class\": \"NeighborListOptions\"}".to_vec()]
    );
    // names alone
    let names = zip_members_of(&system_entries(), 0, &[], &[]).unwrap();
    assert_eq!(names.names.len(), 2);
    assert!(names.arrays.is_empty() && names.raw.is_empty());
}

#[test]
fn zip_members_refuses_what_it_cannot_read_whole() {
    let message = |result: Result<foreign::ZipMembers>| match result {
        Err(Error::Format(message)) => message,
        other => panic!("expected a format error, got {other:?}"),
    };
    let missing = zip_members_of(&system_entries(), 0, &["cell.npy"], &[]);
    assert!(message(missing).contains("'cell.npy': no such member"));
    let not_npy = zip_members_of(&system_entries(), 0, &["pairs/0/options.json"], &[]);
    assert!(message(not_npy).contains("magic string"));
    // an archive after other bytes: what a cut zip whose last member is an
    // archive shows
    let shifted = zip_members_of(&system_entries(), 100, &[], &[]);
    assert!(message(shifted).contains("no entry starts at the beginning"));
    // a raw member declaring a bomb's size: refused before allocating
    let mut bomb = system_entries();
    bomb[1].method = DEFLATED;
    bomb[1].declared_size = Some(3 << 30);
    bomb[1].payload = Some(deflate_zeros(1 << 16));
    let refused = zip_members_of(&bomb, 0, &[], &["pairs/0/options.json"]);
    assert!(message(refused).contains("zip bomb"));
    // a raw member inflating past its declared size
    let mut longer = system_entries();
    longer[1].method = DEFLATED;
    longer[1].declared_size = Some(10);
    longer[1].declared_compressed = None;
    assert!(zip_members_of(&longer, 0, &[], &["pairs/0/options.json"]).is_err());
}
