//! The readers of `read.rs` (through a `Read + Seek`, a buffer in memory, a
//! mapped file) against crafted archives: the cases of
//! `tests/python/io/test_io_hostile.py` that are about the container, each
//! a `FormatError` from every reader, never a panic or an allocation of
//! what the archive declares.

use std::io::{Cursor, Write as _};

use super::zip::reader::{self, Directory};
use super::*;
use crate::fixtures::TempDir;

const DEFLATED: u16 = 8;

/// One entry of a crafted archive; the `declared_*`, `crc`, `central_crc`,
/// `local_offset` fields lie when set.
#[derive(Clone, Default)]
struct Entry {
    name: String,
    data: Vec<u8>,
    method: u16,
    flags: u16,
    /// the bytes stored (default: `data`, deflated for DEFLATE)
    payload: Option<Vec<u8>>,
    crc: Option<u32>,
    central_crc: Option<u32>,
    declared_size: Option<u32>,
    declared_compressed: Option<u32>,
    local_offset: Option<u32>,
    /// the name the central directory gives (default: `name`, which the
    /// local header gives)
    central_name: Option<String>,
    /// the method the local header gives (default: `method`)
    local_method: Option<u16>,
}

fn deflate(data: &[u8]) -> Vec<u8> {
    let mut encoder =
        flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

/// The archive of `entries`, payloads 64-byte aligned (as blockmap writes
/// them), and where the central directory starts.
fn zip_bytes(entries: &[Entry]) -> (Vec<u8>, usize) {
    let (mut out, mut central) = (Vec::new(), Vec::new());
    for entry in entries {
        let payload = entry.payload.clone().unwrap_or_else(|| {
            if entry.method == DEFLATED {
                deflate(&entry.data)
            } else {
                entry.data.clone()
            }
        });
        let crc = entry.crc.unwrap_or_else(|| crc32fast::hash(&entry.data));
        let size = entry
            .declared_size
            .unwrap_or(u32::try_from(entry.data.len()).unwrap());
        let compressed = entry
            .declared_compressed
            .unwrap_or(u32::try_from(payload.len()).unwrap());
        let name = entry.name.as_bytes();
        let central_name = entry
            .central_name
            .as_deref()
            .unwrap_or(&entry.name)
            .as_bytes();
        let offset = out.len();
        let mut pad = (64 - (offset + 30 + name.len()) % 64) % 64;
        if pad < 6 {
            pad += 64;
        }
        let mut extra = vec![0u8; pad];
        extra[..6].copy_from_slice(&[0x1e, 0xa1, u8::try_from(pad - 4).unwrap(), 0, 64, 0]);
        let fixed = |out: &mut Vec<u8>, signature: u32, crc: u32, name: &[u8]| {
            out.extend_from_slice(&signature.to_le_bytes());
            let method = if signature == 0x0201_4b50 {
                out.extend_from_slice(&20u16.to_le_bytes());
                entry.method
            } else {
                entry.local_method.unwrap_or(entry.method)
            };
            for value in [20u16, entry.flags, method, 0, 0x2821] {
                out.extend_from_slice(&value.to_le_bytes());
            }
            for value in [crc, compressed, size] {
                out.extend_from_slice(&value.to_le_bytes());
            }
            out.extend_from_slice(&u16::try_from(name.len()).unwrap().to_le_bytes());
        };
        fixed(&mut out, 0x0403_4b50, crc, name);
        out.extend_from_slice(&u16::try_from(pad).unwrap().to_le_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(&extra);
        out.extend_from_slice(&payload);
        fixed(
            &mut central,
            0x0201_4b50,
            entry.central_crc.unwrap_or(crc),
            central_name,
        );
        central.extend_from_slice(&[0u8; 12]);
        let local = entry.local_offset.unwrap_or(u32::try_from(offset).unwrap());
        central.extend_from_slice(&local.to_le_bytes());
        central.extend_from_slice(central_name);
    }
    let cd_offset = out.len();
    out.extend_from_slice(&central);
    out.extend_from_slice(&end_record(entries.len(), central.len(), cd_offset));
    (out, cd_offset)
}

fn end_record(count: usize, size: usize, offset: usize) -> Vec<u8> {
    let mut out = 0x0605_4b50u32.to_le_bytes().to_vec();
    let count = u16::try_from(count).unwrap().to_le_bytes();
    for part in [&[0u8; 4][..], &count, &count] {
        out.extend_from_slice(part);
    }
    out.extend_from_slice(&u32::try_from(size).unwrap().to_le_bytes());
    out.extend_from_slice(&u32::try_from(offset).unwrap().to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

/// The entries of a valid archive (the small map's), as read back.
fn valid_entries() -> Vec<Entry> {
    let map = crate::fixtures::small_map();
    let bytes = save_buffer(DataRef::Tensor(&map))
        .unwrap()
        .raw()
        .to_vec()
        .unwrap();
    let mut cursor = Cursor::new(bytes.as_slice());
    let directory = Directory::read(&mut cursor).unwrap();
    let mut entries = Vec::new();
    for i in 0..directory.len() {
        let mut data = Vec::new();
        let entry = directory.entry(i).clone();
        let name = directory.name(i);
        std::io::Read::read_to_end(
            &mut reader::open(&mut cursor, &entry, name).unwrap(),
            &mut data,
        )
        .unwrap();
        entries.push(Entry {
            name: directory.name(i).to_string(),
            data,
            ..Entry::default()
        });
    }
    entries
}

/// `entries` with the values entry changed by `change`.
fn with_values(change: impl Fn(&mut Entry)) -> Vec<u8> {
    let mut entries = valid_entries();
    let values = entries
        .iter_mut()
        .find(|entry| entry.name == "blocks/0/values.npy")
        .unwrap();
    change(values);
    zip_bytes(&entries).0
}

/// What each reader makes of `bytes`: loaded through a reader, from a
/// buffer (CRCs checked), and mapped from a file.
fn load_everywhere(bytes: &[u8], name: &str) -> Vec<(&'static str, Result<Data>)> {
    let dir = TempDir::new("read");
    let path = dir.join(format!("{name}.mts"));
    std::fs::write(&path, bytes).unwrap();
    let results = vec![
        ("reader", load(Cursor::new(bytes), Kind::Tensor)),
        (
            "buffer",
            load_buffer(Buffer::copy_from(bytes).unwrap(), Kind::Tensor),
        ),
        ("path", load_path(&path, Kind::Tensor, None)),
        (
            "mapped",
            load_path(&path, Kind::Tensor, Some(crate::buffer::MapMode::ReadOnly)),
        ),
    ];
    results
}

/// Every reader refuses `bytes` with a format error.
#[track_caller]
fn refused(case: &str, bytes: &[u8]) {
    for (reader, result) in load_everywhere(bytes, &case.replace(' ', "-")) {
        match result {
            Err(Error::Format(_)) => {}
            Err(other) => panic!("{case}, {reader}: not a format error: {other:?}"),
            Ok(_) => panic!("{case}, {reader}: loaded"),
        }
    }
}

#[test]
fn the_crafted_archive_loads_and_keeps_the_map() {
    let map = crate::fixtures::small_map();
    let (bytes, _) = zip_bytes(&valid_entries());
    for (reader, result) in load_everywhere(&bytes, "valid") {
        let Ok(Data::Tensor(loaded)) = result else {
            panic!("{reader}: {result:?}")
        };
        assert_eq!(loaded, map, "{reader}");
    }
}

#[test]
fn deflate_entries_from_elsewhere_load() {
    let mut entries = valid_entries();
    for entry in &mut entries {
        entry.method = DEFLATED;
    }
    let (bytes, _) = zip_bytes(&entries);
    for (reader, result) in load_everywhere(&bytes, "deflated") {
        let Ok(Data::Tensor(loaded)) = result else {
            panic!("{reader}: {result:?}")
        };
        assert_eq!(loaded, crate::fixtures::small_map(), "{reader}");
    }
}

#[test]
fn an_archive_after_other_bytes_loads() {
    // offsets shifted by a prefix, as Python's zipfile reads them
    let (bytes, _) = zip_bytes(&valid_entries());
    let mut prefixed = b"#!/bin/sh\nexit 0\n".to_vec();
    prefixed.extend_from_slice(&bytes);
    let Data::Tensor(loaded) = load(Cursor::new(&prefixed), Kind::Tensor).unwrap() else {
        panic!("a tensor")
    };
    assert_eq!(loaded, crate::fixtures::small_map());
}

#[test]
fn containers_that_are_not_archives() {
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i * 7919 % 251).to_le_bytes()[0])
        .collect();
    let mut after_signature = b"PK\x03\x04".to_vec();
    after_signature.extend((0..2048u32).map(|i| i.to_le_bytes()[0]));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty file", Vec::new()),
        ("garbage bytes", garbage),
        ("garbage after a zip signature", after_signature),
        ("zip with no entries", end_record(0, 0, 0)),
        (
            "zip of unrelated entries",
            zip_bytes(&[Entry {
                name: "hello.txt".into(),
                data: b"hello".to_vec(),
                ..Entry::default()
            }])
            .0,
        ),
        (
            "a bare npy file",
            save_buffer(DataRef::Labels(&crate::fixtures::labels(&["a"], &[1])))
                .unwrap()
                .raw()
                .to_vec()
                .unwrap(),
        ),
    ];
    for (case, bytes) in cases {
        refused(case, &bytes);
    }
}

#[test]
fn truncated_archives() {
    let (bytes, _) = zip_bytes(&valid_entries());
    for len in (0..bytes.len()).step_by(97).chain([bytes.len() - 1]) {
        refused(&format!("truncated to {len}"), &bytes[..len]);
    }
}

#[test]
fn lying_sizes_and_checksums() {
    refused(
        "stored entry larger than the file",
        &with_values(|entry| {
            entry.declared_size = Some(0xF000_0000);
            entry.declared_compressed = Some(0xF000_0000);
        }),
    );
    refused(
        "stored sizes that differ",
        &with_values(|entry| entry.declared_size = Some(16)),
    );
    // a byte of the data flipped, or a CRC that does not match: the
    // readers that check CRCs refuse them (mapped loads view the data
    // unchecked: `verify_path` checks it)
    let wrong_crc = with_values(|entry| entry.central_crc = Some(0x1234_5678));
    let (mut flipped, _) = zip_bytes(&valid_entries());
    // the last byte of the values' data
    let mut cursor = Cursor::new(flipped.clone());
    let directory = Directory::read(&mut cursor).unwrap();
    let values = directory.entry(directory.index_of("blocks/0/values.npy").unwrap());
    let end = reader::data_start(&mut cursor, values, "blocks/0/values.npy").unwrap() + values.size;
    flipped[usize::try_from(end).unwrap() - 1] ^= 0x40;
    for (case, bytes) in [("flipped", &flipped), ("wrong-crc", &wrong_crc)] {
        for (reader, result) in load_everywhere(bytes, case) {
            if reader == "mapped" {
                continue;
            }
            assert!(
                matches!(result, Err(Error::Format(_))),
                "{case}, {reader}: {result:?}"
            );
        }
    }
}

#[test]
fn labels_are_checked_by_every_reader() {
    // a bit flipped in the block's samples ([0, 1] becomes [0, 3]: still
    // unique): mapped loads, which check no array's CRC, gave the wrong
    // labels without an error; labels are read whole, so their CRC is
    // checked everywhere
    let (mut bytes, _) = zip_bytes(&valid_entries());
    let mut cursor = Cursor::new(bytes.clone());
    let directory = Directory::read(&mut cursor).unwrap();
    let samples = directory.entry(directory.index_of("blocks/0/samples.npy").unwrap());
    let end =
        reader::data_start(&mut cursor, samples, "blocks/0/samples.npy").unwrap() + samples.size;
    bytes[usize::try_from(end).unwrap() - 4] ^= 0x02;
    refused("a bit of the samples", &bytes);
}

#[test]
fn local_headers_in_the_wrong_places() {
    refused(
        "local header offset past the end",
        &with_values(|entry| entry.local_offset = Some(0x7FFF_0000)),
    );
    let (_, cd_offset) = zip_bytes(&valid_entries());
    refused(
        "local header offset into the directory",
        &with_values(|entry| entry.local_offset = Some(u32::try_from(cd_offset + 4).unwrap())),
    );
    refused(
        "local header offset onto another entry's data",
        &with_values(|entry| entry.local_offset = Some(70)),
    );
}

#[test]
fn entries_over_the_same_bytes() {
    // the gradient's samples listed over the block's samples (one local
    // header for two entries): each of their bytes would be read twice
    let entries = valid_entries();
    let (bytes, _) = zip_bytes(&entries);
    let directory = Directory::read(&mut Cursor::new(&bytes)).unwrap();
    let samples = directory.entry(directory.index_of("blocks/0/samples.npy").unwrap());
    let samples_at = u32::try_from(samples.header).unwrap();
    let mut aliased = entries.clone();
    for entry in &mut aliased {
        if entry.name == "blocks/0/gradients/positions/samples.npy" {
            entry.local_offset = Some(samples_at);
        }
    }
    refused("one local header for two entries", &zip_bytes(&aliased).0);
    // an entry whose declared data runs over the next local header
    let mut longer = entries.clone();
    let values = longer
        .iter()
        .position(|entry| entry.name == "blocks/0/values.npy")
        .unwrap();
    let size = u32::try_from(longer[values].data.len()).unwrap() + 64;
    longer[values].declared_size = Some(size);
    longer[values].declared_compressed = Some(size);
    refused("data over the next local header", &zip_bytes(&longer).0);
    // the last entry's data over the central directory
    let mut last = entries;
    let entry = last.last_mut().unwrap();
    let size = u32::try_from(entry.data.len()).unwrap() + 8;
    entry.declared_size = Some(size);
    entry.declared_compressed = Some(size);
    refused("data over the central directory", &zip_bytes(&last).0);
}

#[test]
fn local_headers_that_disagree_with_the_directory() {
    // two labels entries of one size whose names the central directory
    // swaps, CRCs and all: every reader gave the block's samples the
    // gradient component's values and names, without an error
    let mut swapped = valid_entries();
    let (a, b) = (
        "blocks/0/samples.npy",
        "blocks/0/gradients/positions/components/0.npy",
    );
    for entry in &mut swapped {
        if entry.name == a {
            entry.central_name = Some(b.into());
        } else if entry.name == b {
            entry.central_name = Some(a.into());
        }
    }
    refused("names swapped in the directory", &zip_bytes(&swapped).0);
    refused(
        "another method in the local header",
        &with_values(|entry| entry.local_method = Some(DEFLATED)),
    );
}

#[test]
fn an_archive_inside_a_truncated_one_is_not_read_for_it() {
    // a map whose last entry holds another map's archive, cut off right
    // after it: the last end record of the file is the inner archive's,
    // and reading it gave the inner map for the file's
    let other = crate::fixtures::map_with_an_empty_block();
    let inner = save_buffer(DataRef::Tensor(&other))
        .unwrap()
        .raw()
        .to_vec()
        .unwrap();
    let mut entries = valid_entries();
    entries.push(Entry {
        name: "notes.bin".into(),
        data: inner.clone(),
        ..Entry::default()
    });
    let (bytes, cd_offset) = zip_bytes(&entries);
    let Data::Tensor(whole) = load(Cursor::new(&bytes), Kind::Tensor).unwrap() else {
        panic!("a map")
    };
    assert_eq!(whole, crate::fixtures::small_map());
    refused("cut after the inner archive", &bytes[..cd_offset]);
    // the same, as a save killed before the last local header got its sizes
    let mut unpatched = bytes[..cd_offset].to_vec();
    let last_header = cd_offset - inner.len() - 30 - "notes.bin".len();
    let last_header = (0..=last_header)
        .rev()
        .find(|&at| unpatched[at..at + 4] == [0x50, 0x4b, 0x03, 0x04])
        .unwrap();
    unpatched[last_header + 14..last_header + 26].fill(0);
    refused("killed before its last sizes", &unpatched);
}

#[test]
fn an_end_record_followed_by_other_bytes_is_not_the_end() {
    // a file object holding one archive, into which a save of a second one
    // after it was cut short: the last end record found was the first's,
    // and the file read as the first map
    let (first, _) = zip_bytes(&valid_entries());
    let second = save_buffer(DataRef::Tensor(&crate::fixtures::map_with_an_empty_block()))
        .unwrap()
        .raw()
        .to_vec()
        .unwrap();
    for cut in (1..second.len()).step_by(61).chain([second.len() - 1]) {
        let bytes = [&first[..], &second[..cut]].concat();
        refused(&format!("second archive cut at {cut}"), &bytes);
    }
    let mut followed = first;
    followed.extend_from_slice(b"\n");
    refused("one byte after the end record", &followed);
}

#[test]
fn archives_one_after_the_other_give_the_last() {
    // what a file object gets from two saves in a row: the bytes before
    // the second archive are a whole archive, which is read as a prefix
    let (first, _) = zip_bytes(&valid_entries());
    let second = save_buffer(DataRef::Tensor(&crate::fixtures::map_with_an_empty_block()))
        .unwrap()
        .raw()
        .to_vec()
        .unwrap();
    let both = [first, second].concat();
    for (reader, result) in load_everywhere(&both, "one-after-the-other") {
        let Ok(Data::Tensor(loaded)) = result else {
            panic!("{reader}: {result:?}")
        };
        assert_eq!(
            loaded,
            crate::fixtures::map_with_an_empty_block(),
            "{reader}"
        );
    }
}

#[test]
fn methods_and_flags_not_read() {
    refused("unknown method", &with_values(|entry| entry.method = 77));
    refused(
        "bzip2 with garbage",
        &with_values(|entry| {
            entry.method = 12;
            entry.payload = Some(b"BZh9xxxxxxxxxxxxxxxx".to_vec());
        }),
    );
    refused("encrypted", &with_values(|entry| entry.flags = 1));
}

#[test]
fn deflate_streams_that_lie() {
    refused(
        "corrupt stream",
        &with_values(|entry| {
            entry.method = DEFLATED;
            entry.payload = Some(vec![0xff; 100]);
        }),
    );
    refused(
        "inflating past its declared size",
        &with_values(|entry| {
            let valid = entry.data.clone();
            let mut longer = valid.clone();
            longer.extend((0..4096u32).map(|i| i.to_le_bytes()[0]));
            entry.method = DEFLATED;
            entry.payload = Some(deflate(&longer));
            entry.crc = Some(crc32fast::hash(&valid));
        }),
    );
    refused(
        "inflating short of its declared size",
        &with_values(|entry| {
            let short = entry.data[..entry.data.len() - 64].to_vec();
            entry.method = DEFLATED;
            entry.payload = Some(deflate(&short));
            entry.declared_size = Some(u32::try_from(entry.data.len()).unwrap());
        }),
    );
    refused(
        "a zip bomb's declared size",
        &with_values(|entry| {
            entry.method = DEFLATED;
            entry.declared_size = Some(3 << 30);
        }),
    );
}

#[test]
fn directories_that_lie() {
    let (bytes, cd_offset) = zip_bytes(&valid_entries());
    let cd_size = bytes.len() - 22 - cd_offset;
    let with_end = |end: Vec<u8>| {
        let mut out = bytes[..bytes.len() - 22].to_vec();
        out.extend_from_slice(&end);
        out
    };
    // a count the directory cannot hold: refused before anything is
    // allocated for it
    refused(
        "huge declared count",
        &with_end(end_record(0xFFFF, cd_size, cd_offset)),
    );
    refused(
        "count of one too many",
        &with_end(end_record(9, cd_size, cd_offset)),
    );
    refused(
        "directory past the end",
        &with_end(end_record(8, cd_size, cd_offset + 1_000_000)),
    );
    refused(
        "directory larger than the archive",
        &with_end(end_record(8, 0x7FFF_FFFF, cd_offset)),
    );
    // a ZIP64 locator pointing past the archive
    let mut locator = 0x0706_4b50u32.to_le_bytes().to_vec();
    locator.extend_from_slice(&0u32.to_le_bytes());
    locator.extend_from_slice(&u64::MAX.to_le_bytes());
    locator.extend_from_slice(&1u32.to_le_bytes());
    let mut zip64 = bytes[..bytes.len() - 22].to_vec();
    zip64.extend_from_slice(&locator);
    zip64.extend_from_slice(&bytes[bytes.len() - 22..]);
    refused("ZIP64 locator past the end", &zip64);
}

#[test]
fn names_that_trick() {
    let mut twice = valid_entries();
    let first = twice[0].clone();
    twice.push(first);
    refused("two entries of one name", &zip_bytes(&twice).0);
    let mut renamed = valid_entries();
    for entry in &mut renamed {
        if entry.name == "keys.npy" {
            entry.name = "./keys.npy".into();
        }
    }
    refused("keys under another name", &zip_bytes(&renamed).0);
    let mut missing = valid_entries();
    missing.retain(|entry| entry.name != "blocks/0/samples.npy");
    refused("a missing entry", &zip_bytes(&missing).0);
}
