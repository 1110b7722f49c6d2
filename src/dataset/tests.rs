//! Version-2 datasets: round trips, fields and columns, appends, recovery
//! after a cut at every byte, hostile files, labels stored once, and the
//! version-1 files (read, refused for appends, upgraded).

use std::path::{Path, PathBuf};

use super::v2::layout::VERSION;
use super::*;
use crate::fixtures::{self, TempDir};
use crate::DType;

/// A directory of its own for a test (removed when dropped).
fn scratch(name: &str) -> TempDir {
    TempDir::new(&format!("dataset-{name}"))
}

fn index(i: usize) -> i64 {
    i64::try_from(i).unwrap()
}

/// Every map of `fixtures.rs`, with every dtype.
fn maps() -> Vec<TensorMap> {
    let mut maps = vec![fixtures::small_map(), fixtures::map_with_an_empty_block()];
    for dtype in DType::ALL {
        maps.push(fixtures::tensor(dtype));
    }
    let mut with_info = fixtures::small_map();
    with_info.set_info("unit".into(), "eV".into()).unwrap();
    maps.push(with_info);
    maps
}

fn stored(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/datasets")
        .join(name)
}

#[test]
fn every_fixture_round_trips_and_appends() {
    let dir = scratch("round-trip");
    let path = dir.join("data");
    let maps = maps();
    let mut writer = Writer::create(&path, None, true).unwrap();
    for map in &maps[..3] {
        writer.write(map).unwrap();
    }
    writer.close().unwrap();
    let first = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    assert_eq!((first.version(), first.len()), (VERSION, 3));
    assert!(first.committed());
    let mut writer = Writer::append(&path, None).unwrap();
    assert_eq!(writer.id(), first.id());
    for map in &maps[3..] {
        writer.write(map).unwrap();
    }
    writer.close().unwrap();
    let all = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    assert_eq!((all.len(), all.id()), (maps.len(), first.id()));
    for (i, map) in maps.iter().enumerate() {
        assert_eq!(&all.get(index(i), None).unwrap(), map, "map {i}");
        assert_eq!(all.span(index(i)).unwrap().offset % 64, 0);
    }
    // the reader opened before the append keeps its view
    assert_eq!(&first.get(2, None).unwrap(), &maps[2]);
    assert!(first.get(3, None).is_err());
    assert_eq!(first.checksum(3).unwrap(), all.checksum(3).unwrap());
    let samples: Vec<u64> = maps
        .iter()
        .map(|m| m.blocks().first().map_or(0, |b| b.samples().count() as u64))
        .collect();
    assert_eq!(all.n_samples(0).unwrap(), &samples[..]);
}

#[test]
fn array_data_views_the_mapping_aligned() {
    let dir = scratch("views");
    let path = dir.join("data");
    let mut writer = Writer::create(&path, None, true).unwrap();
    writer.write(&fixtures::small_map()).unwrap();
    writer.close().unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    let mapping = dataset.mapping().unwrap();
    let start = mapping.as_ptr() as usize;
    let map = dataset.get(0, None).unwrap();
    for block in map.blocks() {
        let at = block.values().buffer().as_ptr() as usize;
        assert!(at >= start && at < start + mapping.len());
        assert_eq!((at - start) % 64, 0);
    }
}

#[test]
fn fields_and_columns() {
    let dir = scratch("fields");
    let path = dir.join("data");
    let (a, b) = (fixtures::small_map(), fixtures::tensor(DType::F4));
    let mut writer = Writer::create(&path, None, true).unwrap();
    for i in 0..5i32 {
        writer
            .write_entry(&Entry {
                fields: vec![("system", &a), ("energy", &b)],
                columns: vec![
                    ("n_atoms", ColumnValue::Int(i64::from(i) * 3)),
                    ("weight", ColumnValue::Float(0.5 * f64::from(i))),
                ],
                single: false,
            })
            .unwrap();
    }
    // another schema: refused, naming the difference, nothing written
    let error = writer
        .write_entry(&Entry {
            fields: vec![("system", &a)],
            columns: vec![],
            single: false,
        })
        .unwrap_err();
    assert!(error.to_string().contains("\"energy\""), "{error}");
    let error = writer
        .write_entry(&Entry {
            fields: vec![("system", &a), ("energy", &b)],
            columns: vec![
                ("n_atoms", ColumnValue::Float(1.0)),
                ("weight", ColumnValue::Float(0.0)),
            ],
            single: false,
        })
        .unwrap_err();
    assert!(error.to_string().contains("n_atoms: float"), "{error}");
    assert!(writer.write(&a).is_err());
    writer.close().unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    let schema = dataset.schema();
    assert_eq!(schema.fields, ["system", "energy"]);
    assert!(!schema.single);
    assert_eq!(dataset.len(), 5);
    for i in 0..5 {
        assert_eq!(dataset.get_field(i, 0, None).unwrap(), a);
        assert_eq!(dataset.get_field(i, 1, None).unwrap(), b);
    }
    assert!(dataset.get_field(0, 2, None).is_err());
    let (kind, values) = dataset.column("n_atoms").unwrap();
    assert_eq!(kind, ColumnType::Int);
    let ints: Vec<ColumnValue> = values
        .iter()
        .map(|&v| ColumnValue::from_bits(kind, v))
        .collect();
    assert_eq!(
        ints,
        (0..5).map(|i| ColumnValue::Int(i * 3)).collect::<Vec<_>>()
    );
    let (kind, values) = dataset.column("weight").unwrap();
    assert_eq!(
        ColumnValue::from_bits(kind, values[4]),
        ColumnValue::Float(2.0)
    );
    assert!(dataset
        .column("other")
        .unwrap_err()
        .to_string()
        .contains("n_atoms"));
    assert_eq!(
        dataset.n_samples(1).unwrap(),
        &[b.blocks()[0].samples().count() as u64; 5]
    );
    // an append of the same schema keeps the columns
    let mut writer = Writer::append(&path, None).unwrap();
    writer
        .write_entry(&Entry {
            fields: vec![("system", &a), ("energy", &b)],
            columns: vec![
                ("n_atoms", ColumnValue::Int(99)),
                ("weight", ColumnValue::Float(1.0)),
            ],
            single: false,
        })
        .unwrap();
    writer.close().unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    let (kind, values) = dataset.column("n_atoms").unwrap();
    assert_eq!(
        ColumnValue::from_bits(kind, values[5]),
        ColumnValue::Int(99)
    );
    // upgraded (a version-2 source): the same entries and columns
    let copy = dir.join("copy");
    upgrade(&path, &copy, None, true).unwrap();
    let upgraded = Dataset::open(&copy, MapMode::ReadOnly).unwrap();
    assert_eq!(upgraded.schema(), dataset.schema());
    assert_eq!(
        upgraded.column("weight").unwrap(),
        dataset.column("weight").unwrap()
    );
    assert_eq!(upgraded.get_field(5, 1, None).unwrap(), b);
}

#[test]
fn labels_are_stored_once_and_shared_in_memory() {
    let dir = scratch("shared");
    let path = dir.join("data");
    let map = fixtures::tensor(DType::F8);
    let mut writer = Writer::create(&path, None, true).unwrap();
    for _ in 0..10 {
        writer.write(&map).unwrap();
    }
    writer.close().unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    // entries 1.. are the same size: their keys, components and
    // properties are references to the first entry's LABELS records, their
    // samples inline
    let sizes: Vec<u64> = (1..10).map(|i| dataset.span(i).unwrap().len).collect();
    assert!(sizes.windows(2).all(|w| w[0] == w[1]));
    let first = dataset.span(0).unwrap();
    let second = dataset.span(1).unwrap();
    // the first entry's LABELS records lie before it: entries after are
    // back to back
    assert_eq!(
        second.offset,
        super::v2::layout::align_up(first.offset + first.len)
    );
    let x = dataset.get(0, None).unwrap();
    let y = dataset.get(5, None).unwrap();
    assert!(x.keys().ptr_eq(y.keys()));
    assert!(x.blocks()[0]
        .properties()
        .ptr_eq(y.blocks()[0].properties()));
    assert!(!x.blocks()[0].samples().ptr_eq(y.blocks()[0].samples()));
}

#[test]
fn selected_keys_read_only_their_blocks() {
    let dir = scratch("keys");
    let path = dir.join("data");
    let map = fixtures::small_map();
    let mut writer = Writer::create(&path, None, true).unwrap();
    writer.write(&map).unwrap();
    writer.close().unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    let keys = map.keys();
    let selection = Labels::new(keys.names().to_vec(), keys.row(keys.count() - 1)).unwrap();
    let got = dataset.get(0, Some(&selection)).unwrap();
    assert_eq!(got.blocks().len(), 1);
    assert_eq!(&got.blocks()[0], map.blocks().last().unwrap());
    let none = Labels::empty(keys.names().to_vec()).unwrap();
    assert_eq!(dataset.get(0, Some(&none)).unwrap().blocks().len(), 0);
    // several blocks, selected in reverse: in the selection's order
    let mut writer = Writer::append(&path, None).unwrap();
    let two = fixtures::map_with_an_empty_block();
    writer.write(&two).unwrap();
    writer.close().unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    let keys = two.keys();
    let mut reversed = keys.row(1).to_vec();
    reversed.extend_from_slice(keys.row(0));
    let selection = Labels::new(keys.names().to_vec(), &reversed).unwrap();
    let got = dataset.get(1, Some(&selection)).unwrap();
    assert_eq!(got.blocks().len(), 2);
    assert_eq!(&got.blocks()[0], &two.blocks()[1]);
    assert_eq!(&got.blocks()[1], &two.blocks()[0]);
}

#[test]
fn a_file_cut_anywhere_opens_with_every_complete_entry() {
    let dir = scratch("cut");
    let path = dir.join("data");
    let maps = maps();
    let mut writer = Writer::create(&path, None, true).unwrap();
    writer.write(&maps[0]).unwrap();
    writer.commit().unwrap();
    for map in &maps[1..5] {
        writer.write(map).unwrap();
    }
    writer.close().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let whole = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    let ends: Vec<u64> = (0..5)
        .map(|i| {
            let span = whole.span(i).unwrap();
            span.offset + span.len
        })
        .collect();
    let cut_path = dir.join("cut");
    for cut in 0..=bytes.len() {
        std::fs::write(&cut_path, &bytes[..cut]).unwrap();
        let opened = Dataset::open(&cut_path, MapMode::ReadOnly);
        if cut < 64 {
            assert!(opened.is_err(), "cut at {cut}");
            continue;
        }
        let dataset = opened.unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let complete = ends.iter().filter(|&&end| end <= cut as u64).count();
        assert_eq!(dataset.len(), complete, "cut at {cut}");
        for (i, map) in maps.iter().take(complete).enumerate() {
            assert_eq!(&dataset.get(index(i), None).unwrap(), map, "cut at {cut}");
        }
        if cut % 61 == 0 || cut == bytes.len() - 1 {
            // appending cuts the incomplete tail off first
            let mut writer = Writer::append(&cut_path, None).unwrap();
            writer.write(&maps[7]).unwrap();
            writer.close().unwrap();
            let appended = Dataset::open(&cut_path, MapMode::ReadOnly).unwrap();
            assert!(appended.committed());
            assert_eq!(appended.len(), complete + 1, "cut at {cut}");
            assert_eq!(&appended.get(index(complete), None).unwrap(), &maps[7]);
        }
    }
}

#[test]
fn large_entries_stream_and_recover() {
    let dir = scratch("large");
    let path = dir.join("data");
    let values = fixtures::filled(DType::F8, &[40_000, 3, 5]);
    let block = fixtures::workload_block(values);
    let big = TensorMap::new(Labels::single(), vec![block]).unwrap();
    let mut writer = Writer::create(&path, None, true).unwrap();
    writer.write(&fixtures::small_map()).unwrap();
    writer.write(&big).unwrap();
    writer.close().unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    assert_eq!(dataset.get(1, None).unwrap(), big);
    // the streamed record cut in the middle: the first map only
    let bytes = std::fs::read(&path).unwrap();
    let cut = dir.join("cut");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let dataset = Dataset::open(&cut, MapMode::ReadOnly).unwrap();
    assert_eq!(dataset.len(), 1);
}

#[test]
fn hostile_files_are_refused_with_errors() {
    let dir = scratch("hostile");
    let path = dir.join("data");
    let mut writer = Writer::create(&path, None, true).unwrap();
    writer
        .write_entry(&Entry {
            fields: vec![
                ("a", &fixtures::small_map()),
                ("b", &fixtures::tensor(DType::I2)),
            ],
            columns: vec![("n", ColumnValue::Int(3))],
            single: false,
        })
        .unwrap();
    writer
        .write_entry(&Entry {
            fields: vec![
                ("a", &fixtures::map_with_an_empty_block()),
                ("b", &fixtures::tensor(DType::I2)),
            ],
            columns: vec![("n", ColumnValue::Int(4))],
            single: false,
        })
        .unwrap();
    writer.close().unwrap();
    let good = std::fs::read(&path).unwrap();
    let bad_path = dir.join("bad");
    // every byte flipped, in two ways: an error or a dataset, never a panic
    for at in 0..good.len() {
        for flip in [0x01u8, 0xFF] {
            let mut bytes = good.clone();
            bytes[at] ^= flip;
            std::fs::write(&bad_path, &bytes).unwrap();
            if let Ok(dataset) = Dataset::open(&bad_path, MapMode::ReadOnly) {
                for i in 0..dataset.len() {
                    for field in 0..dataset.schema().fields.len() {
                        if let Err(e) = dataset.get_field(index(i), field, None) {
                            assert!(
                                matches!(e, Error::Format(_) | Error::UnsupportedType(_)),
                                "byte {at}: {e:?}"
                            );
                        }
                    }
                }
            }
        }
    }
    std::fs::write(&bad_path, b"not a dataset").unwrap();
    assert!(matches!(
        Dataset::open(&bad_path, MapMode::ReadOnly).unwrap_err(),
        Error::Format(_)
    ));
}

#[test]
fn labels_references_into_entries_or_forward_are_refused() {
    use super::v2::codec::encode_labels;
    use super::v2::layout::{record_header, RecordKind as Kind};
    let dir = scratch("refs");
    let path = dir.join("data");
    // entry 0's values are bytes that look like a LABELS record: keys
    // like entry 1's, with another value
    let second = fixtures::small_map();
    let mut fake = Vec::new();
    encode_labels(&Labels::new(vec!["k"], &[8]).unwrap(), &mut fake);
    let mut record =
        record_header(Kind::Labels, crc32fast::hash(&fake), fake.len() as u64).to_vec();
    record.extend_from_slice(&fake);
    let values = crate::Array::from_slice(vec![record.len(), 1], &record).unwrap();
    let block = crate::TensorBlock::new(
        values,
        Labels::range("s", i32::try_from(record.len()).unwrap()).unwrap(),
        vec![],
        Labels::range("p", 1).unwrap(),
    )
    .unwrap();
    let first = TensorMap::new(Labels::single(), vec![block]).unwrap();
    let mut writer = Writer::create_version(&path, None, true, 3).unwrap();
    writer.write(&first).unwrap();
    writer.write(&second).unwrap();
    writer.close().unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    let mapping = dataset.mapping().unwrap().as_ptr() as u64;
    let data_at = dataset.get(0, None).unwrap().blocks()[0]
        .values()
        .buffer()
        .as_ptr() as u64
        - mapping;
    let entry_1 = dataset.span(1).unwrap().offset;
    let entry_0 = dataset.span(0).unwrap().offset;
    drop(dataset);
    // entry 1's keys reference: after its header, the description's
    // length, its n_samples and its field's length
    let keys_ref = usize::try_from(entry_1).unwrap() + 16 + 8 + 8 + 8;
    let good = std::fs::read(&path).unwrap();
    let bad_path = dir.join("bad");
    for (target, what) in [
        (data_at + 16, "into entry 0's arrays"),
        (entry_0 + 16, "into entry 0's header"),
        (entry_1 + 64, "into the entry itself"),
    ] {
        let mut bytes = good.clone();
        bytes[keys_ref..keys_ref + 8].copy_from_slice(&target.to_le_bytes());
        std::fs::write(&bad_path, &bytes).unwrap();
        let dataset = Dataset::open(&bad_path, MapMode::ReadOnly).unwrap();
        assert_eq!(dataset.get(0, None).unwrap(), first);
        let error = dataset.get(1, None).unwrap_err();
        assert!(matches!(error, Error::Format(_)), "{what}: {error:?}");
    }
    // a LABELS record after the entry referring to it: refused too
    let mut bytes = good.clone();
    let end = bytes.len() - 32;
    let mut forward =
        record_header(Kind::Labels, crc32fast::hash(&fake), fake.len() as u64).to_vec();
    forward.extend_from_slice(&fake);
    // put it where the commit's trailer was, a new trailer after it
    let at = super::v2::layout::align_up(end as u64);
    bytes.resize(usize::try_from(at).unwrap(), 0);
    bytes.extend_from_slice(&forward);
    bytes[keys_ref..keys_ref + 8].copy_from_slice(&(at + 16).to_le_bytes());
    std::fs::write(&bad_path, &bytes).unwrap();
    let dataset = Dataset::open(&bad_path, MapMode::ReadOnly).unwrap();
    let error = dataset.get(1, None).unwrap_err();
    assert!(matches!(error, Error::Format(_)), "forward: {error:?}");
}

/// A dataset file of one single-map entry whose field description is
/// `field` (made knowing the file offset it starts at), then `arrays`:
/// the bytes of a crafted entry around a valid header, schema and commit.
fn crafted(field: impl Fn(u64) -> Vec<u8>, arrays: &[u8]) -> Vec<u8> {
    use super::v2::layout::{align_up, file_header, record_header, trailer, RecordKind as Kind};
    use crate::io::bytes::put_u64;
    let mut file = file_header("0123456789abcdef0123456789abcdef", 2).to_vec();
    let schema = single().encode();
    file.extend_from_slice(&record_header(
        Kind::Schema,
        crc32fast::hash(&schema),
        schema.len() as u64,
    ));
    file.extend_from_slice(&schema);
    let pad =
        |file: &mut Vec<u8>| file.resize(usize::try_from(align_up(file.len() as u64)).unwrap(), 0);
    pad(&mut file);
    let entry_at = file.len() as u64;
    let field_at = entry_at + 16 + 8 + 16;
    let field = field(field_at);
    let mut payload = Vec::new();
    put_u64(&mut payload, 16 + field.len() as u64);
    put_u64(&mut payload, 1);
    put_u64(&mut payload, field.len() as u64);
    payload.extend_from_slice(&field);
    let data_at = align_up(entry_at + 16 + payload.len() as u64);
    payload.resize(usize::try_from(data_at - entry_at - 16).unwrap(), 0);
    payload.extend_from_slice(arrays);
    let crc = crc32fast::hash(&payload);
    file.extend_from_slice(&record_header(Kind::Entry, crc, payload.len() as u64));
    file.extend_from_slice(&payload);
    pad(&mut file);
    // the COLUMNS record: one column (n_samples), its value 64-byte aligned
    let columns_at = file.len() as u64;
    let mut columns = 1u32.to_le_bytes().to_vec();
    columns.resize(64 - 16, 0);
    put_u64(&mut columns, 1);
    file.extend_from_slice(&record_header(
        Kind::Columns,
        crc32fast::hash(&columns),
        columns.len() as u64,
    ));
    file.extend_from_slice(&columns);
    pad(&mut file);
    let commit_at = file.len() as u64;
    let mut commit = Vec::new();
    put_u64(&mut commit, 1);
    put_u64(&mut commit, 64);
    put_u64(&mut commit, columns_at);
    put_u64(&mut commit, entry_at);
    put_u64(&mut commit, payload.len() as u64);
    commit.extend_from_slice(&crc.to_le_bytes());
    commit.extend_from_slice(&0u32.to_le_bytes());
    file.extend_from_slice(&record_header(
        Kind::Commit,
        crc32fast::hash(&commit),
        commit.len() as u64,
    ));
    file.extend_from_slice(&commit);
    file.extend_from_slice(&trailer(commit_at, 1));
    file
}

#[test]
fn gradients_nested_deep_stop_at_the_limit() {
    use super::v2::codec::{encode_labels, put_str};
    use super::v2::layout::align_up;
    use crate::io::bytes::put_u64;
    // a block whose gradient has a gradient, ... `levels` deep: every
    // labels reference to one inline encoding, every array the same 8 bytes
    let description = |levels: usize| {
        move |field_at: u64| {
            let mut fixed = Vec::new();
            let mut refs = Vec::new();
            refs.push(fixed.len());
            put_u64(&mut fixed, 0); // keys
            fixed.extend_from_slice(&0u32.to_le_bytes()); // info
            fixed.extend_from_slice(&1u32.to_le_bytes()); // blocks
            for level in 0..=levels {
                fixed.extend_from_slice(&[2, 2, 0, 0]); // f8, 2 dimensions
                put_u64(&mut fixed, 1);
                put_u64(&mut fixed, 1);
                refs.push(fixed.len());
                put_u64(&mut fixed, 0); // data offset, patched below
                refs.push(fixed.len());
                put_u64(&mut fixed, 0); // samples
                refs.push(fixed.len());
                put_u64(&mut fixed, 0); // properties
                let more = u32::from(level < levels);
                fixed.extend_from_slice(&more.to_le_bytes());
                if more == 1 {
                    put_str(&mut fixed, "g");
                }
            }
            let labels_at = field_at + fixed.len() as u64;
            let mut labels = Vec::new();
            encode_labels(&Labels::new(vec!["sample"], &[0]).unwrap(), &mut labels);
            let data_at = align_up(labels_at + labels.len() as u64);
            for (i, &at) in refs.iter().enumerate() {
                // the data offsets are every third reference after the keys'
                let value = if i % 3 == 1 { data_at } else { labels_at };
                fixed[at..at + 8].copy_from_slice(&value.to_le_bytes());
            }
            fixed.extend_from_slice(&labels);
            fixed
        }
    };
    let dir = scratch("nested");
    let path = dir.join("data");
    // 16 levels: what a writer may write, read back
    std::fs::write(&path, crafted(description(16), &1.0f64.to_le_bytes())).unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    let map = dataset.get(0, None).unwrap();
    assert_eq!(map.blocks()[0].gradient_depth(), 16);
    // 100,000 levels: refused once past the limit, the reader recursing no
    // deeper than 17 levels (one context per level it went through)
    std::fs::write(&path, crafted(description(100_000), &1.0f64.to_le_bytes())).unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    let error = dataset.get(0, None).unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, Error::Format(_)), "{error:?}");
    assert!(text.contains("nested too deep"), "{text}");
    assert_eq!(text.matches("gradient 'g'").count(), 17, "{text}");
}

/// A commit whose rows are not where its entries are is not the file's
/// last commit: the file is opened by walking its records, which finds
/// every entry.
#[test]
fn commit_rows_that_overlap_or_leave_the_file_are_not_trusted() {
    let dir = scratch("rows");
    let path = dir.join("data");
    let mut writer = Writer::create_version(&path, None, true, 3).unwrap();
    writer.write(&fixtures::small_map()).unwrap();
    writer.write(&fixtures::small_map()).unwrap();
    writer.close().unwrap();
    let good = std::fs::read(&path).unwrap();
    let n = good.len();
    let commit_at =
        usize::try_from(u64::from_le_bytes(good[n - 24..n - 16].try_into().unwrap())).unwrap();
    let payload_at = commit_at + 16;
    let payload_len = usize::try_from(u64::from_le_bytes(
        good[commit_at + 8..commit_at + 16].try_into().unwrap(),
    ))
    .unwrap();
    // the rows follow count (8), schema offset (8) and COLUMNS offset (8)
    let row = |i: usize| payload_at + 24 + 24 * i;
    let first = u64::from_le_bytes(good[row(0)..row(0) + 8].try_into().unwrap());
    let bad_path = dir.join("bad");
    for (offset, len, what) in [
        (first, None, "the second entry over the first"),
        (first + 64, None, "inside the first"),
        (u64::try_from(commit_at).unwrap(), None, "at the commit"),
        (u64::MAX - 15, None, "an offset that overflows"),
        (u64::try_from(n).unwrap() + 64, None, "after the file"),
        (
            first + 4096,
            Some(u64::MAX - 100),
            "a length that overflows",
        ),
    ] {
        let mut bytes = good.clone();
        bytes[row(1)..row(1) + 8].copy_from_slice(&offset.to_le_bytes());
        if let Some(len) = len {
            bytes[row(1) + 8..row(1) + 16].copy_from_slice(&len.to_le_bytes());
        }
        // the commit's CRC made right again: the rows are what is wrong
        let crc = crc32fast::hash(&bytes[payload_at..payload_at + payload_len]);
        bytes[commit_at + 4..commit_at + 8].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&bad_path, &bytes).unwrap();
        let dataset = Dataset::open(&bad_path, MapMode::ReadOnly).unwrap();
        assert!(!dataset.committed(), "{what}");
        assert_eq!(dataset.len(), 2, "{what}");
        for i in 0..2 {
            assert_eq!(dataset.get(i, None).unwrap(), fixtures::small_map());
        }
        let report = verify(&bad_path).unwrap();
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.contains("its row 1 names")),
            "{what}: {report:?}"
        );
    }
}

#[test]
fn prefetch_asks_for_at_most_64_mib() {
    let dir = scratch("prefetch");
    let path = dir.join("data");
    // 3 entries of 60 MB (40 of values, 20 of inline samples): 256
    // entries from the first of them would be 180 MB
    let values = fixtures::filled(DType::F8, &[5_000_000, 1]);
    let block = crate::TensorBlock::new(
        values,
        Labels::range("s", 5_000_000).unwrap(),
        vec![],
        Labels::range("p", 1).unwrap(),
    )
    .unwrap();
    let big = TensorMap::new(Labels::single(), vec![block]).unwrap();
    let small = fixtures::small_map();
    let mut writer = Writer::create(&path, None, true).unwrap();
    writer.write(&small).unwrap();
    writer.write(&small).unwrap();
    for _ in 0..3 {
        writer.write(&big).unwrap();
    }
    writer.close().unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    let Inner::V2(inner) = &dataset.inner else {
        panic!("a version-2 file");
    };
    // small entries: all of them, from the first's header to the last's end
    let (first, second) = (dataset.span(0).unwrap(), dataset.span(1).unwrap());
    assert_eq!(
        inner.prefetch_range(0, 2),
        Some((first.offset, second.offset + second.len - first.offset))
    );
    assert_eq!(
        inner.prefetch_range(2, 256),
        Some((dataset.span(2).unwrap().offset, 64 << 20))
    );
    assert_eq!(inner.prefetch_range(5, 256), None);
}

/// The offset of the COMMIT record a file's trailer names, and its
/// payload's length.
fn last_commit_of(bytes: &[u8]) -> (usize, usize) {
    let n = bytes.len();
    let commit = usize::try_from(u64::from_le_bytes(
        bytes[n - 24..n - 16].try_into().unwrap(),
    ))
    .unwrap();
    let len = usize::try_from(u64::from_le_bytes(
        bytes[commit + 8..commit + 16].try_into().unwrap(),
    ))
    .unwrap();
    (commit, len)
}

/// Make the description CRC of row `row` of the last commit match the
/// description of the entry at `entry`, and the commit's CRC its payload
/// (the bytes of a crafted file, whose checksums are right).
fn fix_description_crc(bytes: &mut [u8], row: usize, entry: usize) {
    let desc_len = u64::from_le_bytes(bytes[entry + 16..entry + 24].try_into().unwrap());
    let desc = &bytes[entry + 24..entry + 24 + usize::try_from(desc_len).unwrap()];
    let crc = super::v2::layout::description_crc(desc_len, desc);
    let (commit, len) = last_commit_of(bytes);
    let at = commit + 16 + 24 + 24 * row + 20;
    bytes[at..at + 4].copy_from_slice(&crc.to_le_bytes());
    let crc = crc32fast::hash(&bytes[commit + 16..commit + 16 + len]);
    bytes[commit + 4..commit + 8].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn reserved_bytes_that_are_not_zero_are_refused() {
    let dir = scratch("reserved");
    let path = dir.join("data");
    let mut writer = Writer::create(&path, None, true).unwrap();
    writer.write(&fixtures::small_map()).unwrap();
    writer.close().unwrap();
    let good = std::fs::read(&path).unwrap();
    let entry = usize::try_from(
        Dataset::open(&path, MapMode::ReadOnly)
            .unwrap()
            .span(0)
            .unwrap()
            .offset,
    )
    .unwrap();
    let bad_path = dir.join("bad");
    // the block's two bytes after its dtype and dimension count: after
    // the header, the description's length, n_samples, the field's
    // length, the keys reference, the info (a = b) and the block count
    let mut bytes = good.clone();
    bytes[entry + 16 + 8 + 8 + 8 + 8 + 14 + 4 + 2] = 1;
    std::fs::write(&bad_path, &bytes).unwrap();
    let dataset = Dataset::open(&bad_path, MapMode::ReadOnly).unwrap();
    let error = dataset.get(0, None).unwrap_err();
    assert!(error.to_string().contains("CRC32"), "{error}");
    // with the description's CRC made right: refused for what it holds
    fix_description_crc(&mut bytes, 0, entry);
    std::fs::write(&bad_path, &bytes).unwrap();
    let dataset = Dataset::open(&bad_path, MapMode::ReadOnly).unwrap();
    assert!(dataset.committed());
    let error = dataset.get(0, None).unwrap_err();
    assert!(error.to_string().contains("reserved"), "{error}");
    // a version-2 commit row's last four bytes, its CRC made right: that
    // commit is not taken on its word, the records are walked
    let mut bytes = std::fs::read(stored("v2-committed.bmds")).unwrap();
    let (commit, len) = last_commit_of(&bytes);
    bytes[commit + 16 + 24 + 20] = 1;
    let crc = crc32fast::hash(&bytes[commit + 16..commit + 16 + len]);
    bytes[commit + 4..commit + 8].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&bad_path, &bytes).unwrap();
    let dataset = Dataset::open(&bad_path, MapMode::ReadOnly).unwrap();
    assert_eq!((dataset.version(), dataset.len()), (2, 3));
    assert!(!dataset.committed());
    let report = verify(&bad_path).unwrap();
    assert!(
        report.problems.iter().any(|p| p.contains("reserved")),
        "{report:?}"
    );
}

#[test]
fn version_1_files_read_refuse_appends_and_upgrade() {
    let dir = scratch("v1");
    for (name, count) in [
        ("v1-committed.bmds", 3),
        ("v1-appended.bmds", 4),
        ("v1-recovered.bmds", 3),
        ("v1-empty.bmds", 0),
    ] {
        let source = Dataset::open(&stored(name), MapMode::ReadOnly).unwrap();
        assert_eq!((source.version(), source.len()), (1, count));
        assert!(source.column("n_samples").is_err());
        let copy = dir.join(name);
        std::fs::copy(stored(name), &copy).unwrap();
        let error = Writer::append(&copy, None).unwrap_err();
        assert!(error.to_string().contains("Dataset.upgrade"), "{error}");
        assert_eq!(
            std::fs::read(&copy).unwrap(),
            std::fs::read(stored(name)).unwrap()
        );
        let upgraded = dir.join(format!("{name}.v2"));
        upgrade(&stored(name), &upgraded, None, true).unwrap();
        let new = Dataset::open(&upgraded, MapMode::ReadOnly).unwrap();
        assert_eq!((new.version(), new.len()), (VERSION, count));
        assert!(new.schema().single);
        for i in 0..count {
            assert_eq!(
                new.get(index(i), None).unwrap(),
                source.get(index(i), None).unwrap()
            );
        }
    }
    // a failed upgrade leaves dst as it was
    let dst = dir.join("kept");
    std::fs::write(&dst, b"kept").unwrap();
    assert!(upgrade(&dir.join("missing"), &dst, None, true).is_err());
    assert_eq!(std::fs::read(&dst).unwrap(), b"kept");
}

#[test]
fn a_damaged_columns_record_fails_its_columns_only() {
    let dir = scratch("columns");
    let path = dir.join("data");
    let map = fixtures::small_map();
    let mut writer = Writer::create_version(&path, None, true, 3).unwrap();
    for _ in 0..3 {
        writer.write(&map).unwrap();
    }
    writer.close().unwrap();
    let good = std::fs::read(&path).unwrap();
    let n = good.len();
    let commit =
        usize::try_from(u64::from_le_bytes(good[n - 24..n - 16].try_into().unwrap())).unwrap();
    // the COMMIT payload: count, schema offset, COLUMNS offset
    let columns = usize::try_from(u64::from_le_bytes(
        good[commit + 32..commit + 40].try_into().unwrap(),
    ))
    .unwrap();
    assert_eq!(&good[columns..columns + 4], b"BMr\x05");
    // the last byte of the n_samples column, just before the commit's
    // padding: a value of the column, not its header
    let len = usize::try_from(u64::from_le_bytes(
        good[columns + 8..columns + 16].try_into().unwrap(),
    ))
    .unwrap();
    let mut bytes = good.clone();
    bytes[columns + 16 + len - 1] ^= 0x40;
    let bad_path = dir.join("bad");
    std::fs::write(&bad_path, &bytes).unwrap();
    let dataset = Dataset::open(&bad_path, MapMode::ReadOnly).unwrap();
    assert_eq!(dataset.len(), 3);
    for i in 0..3 {
        assert_eq!(dataset.get(i, None).unwrap(), map);
    }
    for _ in 0..2 {
        let error = dataset.n_samples(0).unwrap_err();
        assert!(matches!(error, Error::Format(_)), "{error:?}");
        let text = error.to_string();
        assert!(text.contains("COLUMNS") && text.contains("bad"), "{text}");
    }
    // an append reads them first: refused, the file untouched
    let error = Writer::append(&bad_path, None).unwrap_err();
    assert!(matches!(error, Error::Format(_)), "{error:?}");
    assert_eq!(std::fs::read(&bad_path).unwrap(), bytes);
    // intact: read once, cut to keep_first's count
    let mut dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    let samples = dataset.n_samples(0).unwrap().to_vec();
    assert_eq!(samples.len(), 3);
    dataset.keep_first(2).unwrap();
    assert_eq!(dataset.n_samples(0).unwrap(), &samples[..2]);
    let mut dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    dataset.keep_first(1).unwrap();
    assert_eq!(dataset.n_samples(0).unwrap(), &samples[..1]);
}

#[test]
fn a_columns_record_without_its_commit_is_skipped() {
    let dir = scratch("orphan");
    let path = dir.join("data");
    let map = fixtures::small_map();
    let mut writer = Writer::create(&path, None, true).unwrap();
    writer.write(&map).unwrap();
    writer.commit().unwrap();
    writer.write(&map).unwrap();
    writer.close().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    let commit = usize::try_from(u64::from_le_bytes(
        bytes[n - 24..n - 16].try_into().unwrap(),
    ))
    .unwrap();
    // the second commit interrupted after its COLUMNS record
    let cut_path = dir.join("cut");
    std::fs::write(&cut_path, &bytes[..commit]).unwrap();
    let dataset = Dataset::open(&cut_path, MapMode::ReadOnly).unwrap();
    assert!(!dataset.committed());
    assert_eq!(dataset.len(), 2);
    assert_eq!(dataset.get(1, None).unwrap(), map);
    let whole = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    assert_eq!(dataset.n_samples(0).unwrap(), whole.n_samples(0).unwrap());
    let mut writer = Writer::append(&cut_path, None).unwrap();
    writer.write(&map).unwrap();
    writer.close().unwrap();
    let dataset = Dataset::open(&cut_path, MapMode::ReadOnly).unwrap();
    assert!(dataset.committed());
    assert_eq!(dataset.len(), 3);
    assert_eq!(dataset.n_samples(0).unwrap().len(), 3);
}

/// A map of one block whose values are `bytes` (a multiple of 64 bytes):
/// an entry whose arrays end with them, 64-byte aligned in the file, so
/// that a file cut after it ends with them.
fn map_of_bytes(bytes: &[u8]) -> TensorMap {
    assert_eq!(bytes.len() % 64, 0);
    let values: Vec<f64> = bytes
        .chunks_exact(8)
        .map(|b| f64::from_bits(u64::from_le_bytes(b.try_into().unwrap())))
        .collect();
    let rows = values.len() / 4;
    let block = crate::TensorBlock::new(
        crate::Array::from_slice(vec![rows, 4], &values).unwrap(),
        Labels::range("s", i32::try_from(rows).unwrap()).unwrap(),
        vec![],
        Labels::range("p", 4).unwrap(),
    )
    .unwrap();
    TensorMap::new(Labels::single(), vec![block]).unwrap()
}

/// Where the arrays of the last entry of the file at `path` start.
fn last_data_at(path: &Path) -> u64 {
    let dataset = Dataset::open(path, MapMode::ReadOnly).unwrap();
    let map = dataset.get(-1, None).unwrap();
    let start = dataset.mapping().unwrap().as_ptr() as u64;
    map.blocks()[0].values().buffer().as_ptr() as u64 - start
}

/// Two committed sessions (5 maps, then 7), and the bytes of the first
/// commit's trailer and COMMIT record (header and payload).
fn two_sessions(path: &Path, version: u32) -> (Vec<TensorMap>, Vec<u8>, Vec<u8>) {
    let kinds = [
        fixtures::small_map(),
        fixtures::tensor(DType::F4),
        fixtures::map_with_an_empty_block(),
    ];
    let maps: Vec<TensorMap> = (0..12).map(|i| kinds[i % 3].clone()).collect();
    let mut writer = Writer::create_version(path, None, true, version).unwrap();
    for map in &maps[..5] {
        writer.write(map).unwrap();
    }
    writer.close().unwrap();
    let first = std::fs::read(path).unwrap();
    let trailer = first[first.len() - 32..].to_vec();
    let (commit, len) = last_commit_of(&first);
    let record = first[commit..commit + 16 + len].to_vec();
    let mut writer = Writer::append(path, None).unwrap();
    for map in &maps[5..] {
        writer.write(map).unwrap();
    }
    writer.close().unwrap();
    (maps, trailer, record)
}

/// An entry whose data ends with a copy of an earlier commit's trailer, at
/// the end of a file whose writer was killed before its commit: the file
/// opens with every entry (walked), not as that earlier commit, and an
/// append keeps them all.
#[test]
fn an_earlier_trailer_at_the_end_of_an_entry_is_not_the_last_commit() {
    let dir = scratch("imitation");
    let path = dir.join("data");
    let (maps, trailer, _) = two_sessions(&path, 4);
    let mut bytes = vec![0u8; 128];
    bytes[96..].copy_from_slice(&trailer);
    let crafted = map_of_bytes(&bytes);
    let mut writer = Writer::append(&path, None).unwrap();
    writer.write(&crafted).unwrap();
    // killed: no commit
    drop(writer);
    let file = std::fs::read(&path).unwrap();
    assert_eq!(
        &file[file.len() - 32..],
        &trailer[..],
        "the file ends with it"
    );
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    assert!(!dataset.committed());
    assert_eq!(dataset.len(), 13);
    for (i, map) in maps.iter().chain([&crafted]).enumerate() {
        assert_eq!(&dataset.get(index(i), None).unwrap(), map, "entry {i}");
    }
    assert!(verify(&path).unwrap().is_ok());
    let mut writer = Writer::append(&path, None).unwrap();
    writer.write(&maps[0]).unwrap();
    writer.close().unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    assert!(dataset.committed());
    assert_eq!(dataset.len(), 14);
    assert_eq!(dataset.get(12, None).unwrap(), crafted);
    assert_eq!(dataset.get(13, None).unwrap(), maps[0]);
    assert!(verify(&path).unwrap().is_ok());
}

/// An entry whose data ends with a whole commit record and its trailer,
/// placed where they name themselves (adjacent, CRCs right): listing the
/// entries of an earlier commit (an entry record lies between them and
/// it), or all of them with this entry's row cut short (its record says
/// otherwise): neither is taken for the last commit.
#[test]
fn a_commit_record_imitated_inside_an_entry_is_not_the_last_commit() {
    use super::v2::layout::{record_header, trailer as make_trailer, RecordKind as Kind};
    let dir = scratch("imitation-commit");
    let path = dir.join("data");
    let (maps, _, first_commit) = two_sessions(&path, 3);
    let second = std::fs::read(&path).unwrap();
    let (commit, len) = last_commit_of(&second);
    let second_commit = second[commit..commit + 16 + len].to_vec();
    // where the crafted entry's arrays go: found on a copy first (the same
    // file, the same entry: the same place)
    let probe = dir.join("probe");
    let size = 1024;
    for variant in 0..2 {
        std::fs::copy(&path, &probe).unwrap();
        let mut writer = Writer::append(&probe, None).unwrap();
        writer.write(&map_of_bytes(&vec![0u8; size])).unwrap();
        drop(writer);
        let data_at = last_data_at(&probe);
        let entry_at = Dataset::open(&probe, MapMode::ReadOnly)
            .unwrap()
            .span(-1)
            .unwrap()
            .offset;
        // the forged commit at the end of the arrays, on a 64-byte boundary
        // (counts of 5 and 13 rows: a commit record and its trailer whose
        // length is a multiple of 64, which end the entry's arrays)
        let (payload, count) = if variant == 0 {
            (first_commit[16..].to_vec(), 5u64)
        } else {
            // the second commit's rows and one for the crafted entry, cut
            // short to end before the forged commit
            let mut payload = second_commit[16..].to_vec();
            let count = 13u64;
            payload[..8].copy_from_slice(&count.to_le_bytes());
            payload.extend_from_slice(&entry_at.to_le_bytes());
            payload.extend_from_slice(&64u64.to_le_bytes());
            payload.extend_from_slice(&[0; 8]);
            (payload, count)
        };
        let forged_len = 16 + payload.len() + 32;
        let forged_at = data_at + (size - forged_len) as u64;
        assert_eq!(forged_at % 64, 0, "the test's layout");
        let mut bytes = vec![0u8; size - forged_len];
        bytes.extend_from_slice(&record_header(
            Kind::Commit,
            crc32fast::hash(&payload),
            payload.len() as u64,
        ));
        bytes.extend_from_slice(&payload);
        bytes.extend_from_slice(&make_trailer(forged_at, count));
        let crafted = map_of_bytes(&bytes);
        let real = dir.join(format!("real-{variant}"));
        std::fs::copy(&path, &real).unwrap();
        let mut writer = Writer::append(&real, None).unwrap();
        writer.write(&crafted).unwrap();
        drop(writer);
        let file = std::fs::read(&real).unwrap();
        assert_eq!(file.len() as u64, forged_at + forged_len as u64);
        let dataset = Dataset::open(&real, MapMode::ReadOnly).unwrap();
        assert!(!dataset.committed(), "variant {variant}");
        assert_eq!(dataset.len(), 13, "variant {variant}");
        for (i, map) in maps.iter().chain([&crafted]).enumerate() {
            assert_eq!(&dataset.get(index(i), None).unwrap(), map, "entry {i}");
        }
        assert!(verify(&real).unwrap().is_ok());
        let mut writer = Writer::append(&real, None).unwrap();
        writer.write(&maps[1]).unwrap();
        writer.close().unwrap();
        let dataset = Dataset::open(&real, MapMode::ReadOnly).unwrap();
        assert_eq!((dataset.len(), dataset.committed()), (14, true));
        assert_eq!(dataset.get(12, None).unwrap(), crafted);
    }
}

/// The bytes a failed write left are cut off before anything else is
/// written: a later entry never has them after it, where a walk of the
/// records would take what its data holds (here, 64-byte fake entry
/// records, one per 64 bytes) for entries.
#[test]
fn a_failed_write_leaves_nothing_a_walk_could_meet() {
    use super::v2::layout::{record_header, RecordKind as Kind};
    let dir = scratch("failed");
    let path = dir.join("data");
    let mut writer = Writer::create(&path, None, true).unwrap();
    writer.write(&fixtures::small_map()).unwrap();
    writer.commit().unwrap();
    let committed = std::fs::metadata(&path).unwrap().len();
    // a complete fake ENTRY record in each 64 bytes: a header, then 48
    // bytes whose CRC it holds
    let fake_payload = [7u8; 48];
    let mut unit = record_header(Kind::Entry, crc32fast::hash(&fake_payload), 48).to_vec();
    unit.extend_from_slice(&fake_payload);
    // 8 MiB: streamed, its write stopped (as Ctrl-C or a full disk would)
    // after 1 MiB of its arrays
    let big = map_of_bytes(&unit.repeat(8 << 14));
    let mut chunks = 0;
    let error = crate::interrupt::with_checker(
        move || {
            chunks += 1;
            chunks > 256
        },
        || writer.write(&big).unwrap_err(),
    );
    assert!(matches!(error, Error::Interrupted), "{error:?}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), committed);
    // an entry of 200 kB, past where the stopped entry's arrays started
    let medium = map_of_bytes(&vec![1u8; 200 << 10]);
    writer.write(&medium).unwrap();
    // killed: no commit
    drop(writer);
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    assert_eq!(dataset.len(), 2);
    assert_eq!(dataset.get(1, None).unwrap(), medium);
    assert!(verify(&path).unwrap().is_ok());
}

/// Files of version 3 carry each entry's description CRC: one flipped bit
/// anywhere but in an entry's arrays either fails the read that meets it
/// or leaves what is read as written (a damaged commit record: the walk
/// finds the entries); never another map.
#[test]
fn one_flipped_bit_outside_the_arrays_never_gives_another_map() {
    let dir = scratch("bits");
    let path = dir.join("data");
    let maps = [
        fixtures::small_map(),
        fixtures::tensor(DType::I2),
        fixtures::map_with_an_empty_block(),
    ];
    let mut writer = Writer::create(&path, None, true).unwrap();
    writer.write(&maps[0]).unwrap();
    writer.commit().unwrap();
    writer.write(&maps[1]).unwrap();
    writer.write(&maps[2]).unwrap();
    writer.close().unwrap();
    let good = std::fs::read(&path).unwrap();
    // the arrays of each entry: after its description, to its end
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    let arrays: Vec<(usize, usize)> = (0..3)
        .map(|i| {
            let span = dataset.span(i).unwrap();
            let at = usize::try_from(span.offset).unwrap();
            let desc_len = usize::try_from(u64::from_le_bytes(
                good[at + 16..at + 24].try_into().unwrap(),
            ))
            .unwrap();
            let start =
                usize::try_from(super::v2::layout::align_up((at + 24 + desc_len) as u64)).unwrap();
            (start, at + usize::try_from(span.len).unwrap())
        })
        .collect();
    drop(dataset);
    let bad_path = dir.join("bad");
    let (mut refused, mut read) = (0, 0);
    for at in 0..good.len() {
        if arrays
            .iter()
            .any(|&(start, end)| (start..end).contains(&at))
        {
            continue;
        }
        let mut bytes = good.clone();
        bytes[at] ^= 1 << (at % 8);
        std::fs::write(&bad_path, &bytes).unwrap();
        let Ok(dataset) = Dataset::open(&bad_path, MapMode::ReadOnly) else {
            refused += 1;
            continue;
        };
        for (i, expected) in maps.iter().enumerate().take(dataset.len()) {
            match dataset.get(index(i), None) {
                Ok(map) => {
                    assert_eq!(&map, expected, "byte {at}, entry {i}");
                    read += 1;
                }
                Err(e) => {
                    assert!(matches!(e, Error::Format(_)), "byte {at}: {e:?}");
                    refused += 1;
                }
            }
        }
    }
    assert!(refused > 0 && read > 0);
}

/// `verify` reports each damage in a line of its own, and upgrade copies
/// no damaged entry.
#[test]
fn verify_lists_every_problem_and_upgrade_copies_no_damaged_entry() {
    let dir = scratch("verify");
    let path = dir.join("data");
    let maps = [fixtures::small_map(), fixtures::tensor(DType::F8)];
    let mut writer = Writer::create(&path, None, true).unwrap();
    for map in maps.iter().chain(&maps) {
        writer.write(map).unwrap();
    }
    writer.close().unwrap();
    let report = verify(&path).unwrap();
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(
        (report.version, report.entries, report.committed),
        (VERSION, 4, true)
    );
    let good = std::fs::read(&path).unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    let last = dataset.span(3).unwrap();
    let first = dataset.span(0).unwrap();
    drop(dataset);
    let mut bytes = good.clone();
    // entry 3's last array byte, entry 0's first description byte after
    // its length
    bytes[usize::try_from(last.offset + last.len).unwrap() - 1] ^= 0x10;
    bytes[usize::try_from(first.offset).unwrap() + 24] ^= 0x01;
    let bad_path = dir.join("bad");
    std::fs::write(&bad_path, &bytes).unwrap();
    let report = verify(&bad_path).unwrap();
    let text = report.problems.join("\n");
    assert!(
        text.contains("entry 3 ") && text.contains("CRC32"),
        "{text}"
    );
    assert!(
        text.contains("entry 0 ") && text.contains("description"),
        "{text}"
    );
    assert!(
        !text.contains("entry 1 ") && !text.contains("entry 2 "),
        "{text}"
    );
    let error = report.into_result(&bad_path).unwrap_err();
    assert!(matches!(error, Error::Format(_)));
    assert!(error.to_string().lines().count() >= 3, "{error}");
    // upgrade: refused at entry 0, the destination untouched
    let dst = dir.join("dst");
    std::fs::write(&dst, b"kept").unwrap();
    let error = upgrade(&bad_path, &dst, None, true).unwrap_err();
    assert!(matches!(error, Error::Format(_)), "{error:?}");
    assert!(error.to_string().contains("entry 0"), "{error}");
    assert_eq!(std::fs::read(&dst).unwrap(), b"kept");
    // only the array byte damaged: refused at entry 3
    let mut bytes = good.clone();
    bytes[usize::try_from(last.offset + last.len).unwrap() - 1] ^= 0x10;
    std::fs::write(&bad_path, &bytes).unwrap();
    let error = upgrade(&bad_path, &dst, None, true).unwrap_err();
    assert!(error.to_string().contains("entry 3"), "{error}");
    assert_eq!(std::fs::read(&dst).unwrap(), b"kept");
    // a file cut in an entry (an interrupted write) has no problem
    let cut_path = dir.join("cut");
    std::fs::write(
        &cut_path,
        &good[..usize::try_from(last.offset).unwrap() + 100],
    )
    .unwrap();
    let report = verify(&cut_path).unwrap();
    assert!(report.is_ok(), "{report:?}");
    assert_eq!((report.entries, report.committed), (3, false));
    // not a dataset at all
    std::fs::write(&bad_path, b"something else").unwrap();
    assert!(matches!(verify(&bad_path), Err(Error::Format(_))));
}

/// Offsets of 2**63 and more (where `pread` fails) in the trailer or a
/// commit's schema offset: no error of the system, the file walked.
#[test]
fn offsets_past_what_a_file_holds_are_walked_past() {
    let dir = scratch("huge-offsets");
    let path = dir.join("data");
    let mut writer = Writer::create(&path, None, true).unwrap();
    writer.write(&fixtures::small_map()).unwrap();
    writer.close().unwrap();
    let good = std::fs::read(&path).unwrap();
    let bad_path = dir.join("bad");
    for huge in [1u64 << 63, u64::MAX - 63, (1 << 63) + 64] {
        // the trailer's commit offset, its CRC made right
        let mut bytes = good.clone();
        let n = bytes.len();
        let count = u64::from_le_bytes(bytes[n - 16..n - 8].try_into().unwrap());
        bytes[n - 32..].copy_from_slice(&super::v2::layout::trailer(huge, count));
        std::fs::write(&bad_path, &bytes).unwrap();
        let dataset = Dataset::open(&bad_path, MapMode::ReadOnly).unwrap();
        assert_eq!((dataset.len(), dataset.committed()), (1, false));
        // the commit's schema offset, its CRC made right
        let mut bytes = good.clone();
        let (commit, len) = last_commit_of(&bytes);
        bytes[commit + 24..commit + 32].copy_from_slice(&huge.to_le_bytes());
        let crc = crc32fast::hash(&bytes[commit + 16..commit + 16 + len]);
        bytes[commit + 4..commit + 8].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&bad_path, &bytes).unwrap();
        let dataset = Dataset::open(&bad_path, MapMode::ReadOnly).unwrap();
        assert_eq!((dataset.len(), dataset.committed()), (1, false));
        assert_eq!(dataset.get(0, None).unwrap(), fixtures::small_map());
        assert!(!verify(&bad_path).unwrap().is_ok());
    }
    // reads at such offsets read nothing
    let file = std::fs::File::open(&path).unwrap();
    assert!(read_at(&file, 1 << 63, 16).unwrap().is_empty());
    assert!(read_at(&file, u64::MAX, 16).unwrap().is_empty());
}

/// Stored files of version 2 (tests/data/datasets/, never regenerated)
/// open, read, append in version 2, and upgrade to version 3.
#[test]
fn version_2_files_read_append_in_version_2_and_upgrade() {
    let dir = scratch("v2");
    for (name, count, committed) in [
        ("v2-committed.bmds", 3, true),
        ("v2-appended.bmds", 4, true),
        ("v2-recovered.bmds", 3, false),
        ("v2-empty.bmds", 0, true),
    ] {
        let source = Dataset::open(&stored(name), MapMode::ReadOnly).unwrap();
        assert_eq!(
            (source.version(), source.len(), source.committed()),
            (2, count, committed),
            "{name}"
        );
        assert!(verify(&stored(name)).unwrap().is_ok(), "{name}");
        let schema = source.schema();
        let copy = dir.join(name);
        std::fs::copy(stored(name), &copy).unwrap();
        let mut writer = Writer::append(&copy, None).unwrap();
        assert_eq!(writer.version(), 2);
        let extra = fixtures::small_map();
        let entry = Entry {
            fields: schema.fields.iter().map(|f| (f.as_str(), &extra)).collect(),
            columns: schema
                .columns
                .iter()
                .map(|(c, k)| {
                    (
                        c.as_str(),
                        match k {
                            ColumnType::Int => ColumnValue::Int(7),
                            ColumnType::Float => ColumnValue::Float(0.5),
                        },
                    )
                })
                .collect(),
            single: schema.single,
        };
        writer.write_entry(&entry).unwrap();
        writer.close().unwrap();
        let appended = Dataset::open(&copy, MapMode::ReadOnly).unwrap();
        assert_eq!((appended.version(), appended.len()), (2, count + 1));
        assert!(appended.committed());
        assert!(verify(&copy).unwrap().is_ok(), "{name}");
        for i in 0..count {
            for field in 0..schema.fields.len() {
                assert_eq!(
                    appended.get_field(index(i), field, None).unwrap(),
                    source.get_field(index(i), field, None).unwrap()
                );
            }
        }
        assert_eq!(appended.get_field(index(count), 0, None).unwrap(), extra);
        // the bytes before the append are as they were
        let before = std::fs::read(stored(name)).unwrap();
        let after = std::fs::read(&copy).unwrap();
        if committed {
            assert_eq!(&after[..before.len()], &before[..]);
        }
        let upgraded = dir.join(format!("{name}.v3"));
        upgrade(&copy, &upgraded, None, true).unwrap();
        let new = Dataset::open(&upgraded, MapMode::ReadOnly).unwrap();
        assert_eq!((new.version(), new.len()), (VERSION, count + 1));
        assert_eq!(new.schema(), appended.schema());
        for (name, _) in &schema.columns {
            assert_eq!(new.column(name).unwrap(), appended.column(name).unwrap());
        }
    }
}

/// A version-1 file whose last map's data ends with a copy of its earlier
/// commit's end records (a writer killed before its commit): opened with
/// every map, not as that earlier commit.
#[test]
fn version_1_end_records_inside_a_map_are_not_the_last_commit() {
    let dir = scratch("v1-imitation");
    let good = std::fs::read(stored("v1-committed.bmds")).unwrap();
    let whole = Dataset::open(&stored("v1-committed.bmds"), MapMode::ReadOnly).unwrap();
    let Inner::V1(inner) = &whole.inner else {
        panic!("version 1");
    };
    let last = inner.span(inner.len() - 1);
    // the end records: after the central directory, to the end of the file
    let tail_start = good.windows(4).rposition(|w| w == b"PK\x06\x06").unwrap();
    let tail = &good[tail_start..];
    // map 3, appended after the commit: a local header (STORED, its CRC
    // and sizes) and data that ends with the tail
    let archive = &good
        [usize::try_from(last.offset).unwrap()..usize::try_from(last.offset + last.len).unwrap()];
    let mut data = archive.to_vec();
    data.extend_from_slice(tail);
    let name = b"maps/3.mts";
    let mut header = Vec::new();
    header.extend_from_slice(b"PK\x03\x04");
    header.extend_from_slice(&20u16.to_le_bytes());
    header.extend_from_slice(&0u16.to_le_bytes());
    header.extend_from_slice(&0u16.to_le_bytes());
    header.extend_from_slice(&[0; 4]);
    header.extend_from_slice(&crc32fast::hash(&data).to_le_bytes());
    header.extend_from_slice(&u32::try_from(data.len()).unwrap().to_le_bytes());
    header.extend_from_slice(&u32::try_from(data.len()).unwrap().to_le_bytes());
    header.extend_from_slice(&u16::try_from(name.len()).unwrap().to_le_bytes());
    header.extend_from_slice(&0u16.to_le_bytes());
    header.extend_from_slice(name);
    let mut bytes = good.clone();
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(&data);
    assert_eq!(&bytes[bytes.len() - tail.len()..], tail);
    let bad_path = dir.join("data");
    std::fs::write(&bad_path, &bytes).unwrap();
    let dataset = Dataset::open(&bad_path, MapMode::ReadOnly).unwrap();
    assert!(!dataset.committed());
    assert_eq!(dataset.len(), 4);
    for i in 0..3 {
        assert_eq!(dataset.get(i, None).unwrap(), whole.get(i, None).unwrap());
    }
    // map 3 is no archive (a map and end records): the one problem
    let report = verify(&bad_path).unwrap();
    assert!(
        !report.problems.is_empty() && report.problems.iter().all(|p| p.starts_with("map 3 ")),
        "{report:?}"
    );
}

/// Damage between the last commit's last entry and the commit (that
/// entry's header): the commit is kept, every other entry reads, the
/// damaged one fails its reads, and an append keeps them all.
#[test]
fn damage_before_the_last_commit_keeps_the_commit() {
    let dir = scratch("damaged-tail");
    let path = dir.join("data");
    let maps: Vec<TensorMap> = (0..4).map(|_| fixtures::small_map()).collect();
    let mut writer = Writer::create(&path, None, true).unwrap();
    for map in &maps {
        writer.write(map).unwrap();
    }
    writer.close().unwrap();
    let last = Dataset::open(&path, MapMode::ReadOnly)
        .unwrap()
        .span(3)
        .unwrap()
        .offset;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[usize::try_from(last).unwrap() + 1] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    assert_eq!((dataset.len(), dataset.committed()), (4, true));
    for i in 0..3 {
        assert_eq!(dataset.get(i, None).unwrap(), maps[0]);
    }
    assert!(matches!(dataset.get(3, None), Err(Error::Format(_))));
    assert!(!verify(&path).unwrap().is_ok());
    let mut writer = Writer::append(&path, None).unwrap();
    writer.write(&maps[0]).unwrap();
    writer.close().unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    assert_eq!((dataset.len(), dataset.committed()), (5, true));
    assert_eq!(dataset.get(4, None).unwrap(), maps[0]);
}

/// The entries of `dataset` as the writer takes them: each field's map
/// (viewing the mapping) and its column values.
fn entries_of(dataset: &Dataset) -> Vec<(Vec<TensorMap>, Vec<ColumnValue>)> {
    let schema = dataset.schema();
    let columns: Vec<(ColumnType, Vec<u64>)> = schema
        .columns
        .iter()
        .map(|(name, _)| {
            let (kind, values) = dataset.column(name).unwrap();
            (kind, values.to_vec())
        })
        .collect();
    (0..dataset.len())
        .map(|i| {
            let maps = (0..schema.fields.len())
                .map(|field| dataset.get_field(index(i), field, None).unwrap())
                .collect();
            let values = columns
                .iter()
                .map(|(kind, values)| ColumnValue::from_bits(*kind, values[i]))
                .collect();
            (maps, values)
        })
        .collect()
}

/// Stored files of version 3 (tests/data/datasets/, written once by
/// `make_v3.py`, never regenerated) open with their entries, and the
/// writer writes the same entries, in the same sessions, into the same
/// bytes but the file's identity: what pins the writer to the format.
#[test]
fn version_3_files_read_and_are_what_the_writer_writes() {
    stored_files_are_what_the_writer_writes(3);
}

/// The same for the stored files of version 4 (`make_v4.py`): commits of
/// SEGMENT records, the writer's merges of them included.
#[test]
fn version_4_files_read_and_are_what_the_writer_writes() {
    stored_files_are_what_the_writer_writes(4);
}

fn stored_files_are_what_the_writer_writes(version: u32) {
    let dir = scratch(&format!("v{version}"));
    // (file, entries, committed, entries written by the first session)
    for (name, count, committed, first) in [
        (format!("v{version}-committed.bmds"), 3, true, 3),
        (format!("v{version}-appended.bmds"), 4, true, 2),
        (format!("v{version}-recovered.bmds"), 3, false, 3),
        (format!("v{version}-empty.bmds"), 0, true, 0),
        (format!("v{version}-dtypes.bmds"), 14, true, 14),
    ] {
        let name = name.as_str();
        let stored_path = stored(name);
        let source = Dataset::open(&stored_path, MapMode::ReadOnly).unwrap();
        assert_eq!(
            (source.version(), source.len(), source.committed()),
            (version, count, committed),
            "{name}"
        );
        assert!(verify(&stored_path).unwrap().is_ok(), "{name}");
        if !committed {
            continue;
        }
        let schema = source.schema();
        let entries = entries_of(&source);
        let path = dir.join(name);
        for (session, range) in [(0, 0..first), (1, first..count)] {
            if session == 1 && range.is_empty() {
                break;
            }
            let mut writer = if session == 0 {
                Writer::create_version(&path, None, true, version).unwrap()
            } else {
                Writer::append(&path, None).unwrap()
            };
            for (maps, values) in &entries[range] {
                writer
                    .write_entry(&Entry {
                        fields: schema.fields.iter().map(String::as_str).zip(maps).collect(),
                        columns: schema
                            .columns
                            .iter()
                            .map(|(name, _)| name.as_str())
                            .zip(values.iter().copied())
                            .collect(),
                        single: schema.single,
                    })
                    .unwrap();
            }
            writer.close().unwrap();
        }
        let mut written = std::fs::read(&path).unwrap();
        let want = std::fs::read(&stored_path).unwrap();
        assert_eq!(written.len(), want.len(), "{name}");
        // the identity: 32 random hex digits after the magic and version
        written[12..44].copy_from_slice(&want[12..44]);
        assert!(
            written == want,
            "{name}: other bytes than the stored file's"
        );
    }
}

/// Version 4: a loop of append sessions of one entry each grows the file
/// by about what they add (each commit writes its entry's row and
/// columns, its merges amortized, a commit record of a few pieces and a
/// trailer), never by the rows of the entries before them; every session
/// reopens with every entry, and the file is what `verify` expects.
#[test]
fn append_sessions_grow_the_file_by_what_they_add() {
    let dir = scratch("growth");
    let path = dir.join("data");
    let map = fixtures::small_map();
    let mut writer = Writer::create(&path, None, true).unwrap();
    for _ in 0..500 {
        writer.write(&map).unwrap();
    }
    writer.close().unwrap();
    let before = std::fs::metadata(&path).unwrap().len();
    let entry = Dataset::open(&path, MapMode::ReadOnly)
        .unwrap()
        .span(-1)
        .unwrap()
        .len;
    let sessions = 200u64;
    for i in 0..sessions {
        let mut writer = Writer::append(&path, None).unwrap();
        writer.write(&map).unwrap();
        writer.close().unwrap();
        if i % 50 == 49 {
            let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
            assert!(dataset.committed());
            assert_eq!(dataset.len(), 501 + usize::try_from(i).unwrap());
            assert_eq!(dataset.get(-1, None).unwrap(), map);
            assert_eq!(
                dataset.n_samples(0).unwrap().len(),
                501 + usize::try_from(i).unwrap()
            );
        }
    }
    let growth = std::fs::metadata(&path).unwrap().len() - before;
    // a version-3 commit of these 700 entries alone writes 700 rows of 24
    // bytes and a column of 8: over 22 kB a session
    let bound = sessions * (super::v2::layout::align_up(16 + entry) + 1024);
    assert!(
        growth <= bound,
        "{sessions} sessions grew the file by {growth} bytes, more than {bound}"
    );
    assert!(verify(&path).unwrap().is_ok());
}

/// Version 4: a copy of an earlier commit record and its trailer (whose
/// pieces name the file's real SEGMENT records) inside an entry's
/// arrays, placed where it names itself at the end of a file whose writer
/// was killed: not the last commit (an entry lies between the last entry
/// it lists and it); the walk keeps every entry.
#[test]
fn a_commit_of_segments_imitated_inside_an_entry_is_not_the_last_commit() {
    use super::v2::layout::{record_header, trailer as make_trailer, RecordKind as Kind};
    let dir = scratch("imitation-segments");
    let path = dir.join("data");
    // sessions of 16, 8, 4, 2 and 1 entries: a commit of 5 pieces, whose
    // record and trailer (16 + 24 + 5 * 24 + 32 bytes) fill whole 64-byte
    // blocks, as the end of an entry's arrays does
    let kinds = [fixtures::small_map(), fixtures::tensor(DType::F4)];
    let mut maps = Vec::new();
    for (session, n) in [16, 8, 4, 2, 1].into_iter().enumerate() {
        let mut writer = if session == 0 {
            Writer::create(&path, None, true).unwrap()
        } else {
            Writer::append(&path, None).unwrap()
        };
        for _ in 0..n {
            let map = kinds[maps.len() % 2].clone();
            writer.write(&map).unwrap();
            maps.push(map);
        }
        writer.close().unwrap();
    }
    let good = std::fs::read(&path).unwrap();
    let (commit, len) = last_commit_of(&good);
    let payload = good[commit + 16..commit + 16 + len].to_vec();
    assert_eq!(payload.len(), 24 + 5 * 24, "the test's layout");
    let forged_len = 16 + payload.len() + 32;
    let size = 1024;
    let probe = dir.join("probe");
    std::fs::copy(&path, &probe).unwrap();
    let mut writer = Writer::append(&probe, None).unwrap();
    writer.write(&map_of_bytes(&vec![0u8; size])).unwrap();
    drop(writer);
    let data_at = last_data_at(&probe);
    let forged_at = data_at + (size - forged_len) as u64;
    assert_eq!(forged_at % 64, 0, "the test's layout");
    let mut bytes = vec![0u8; size - forged_len];
    bytes.extend_from_slice(&record_header(
        Kind::Commit,
        crc32fast::hash(&payload),
        payload.len() as u64,
    ));
    bytes.extend_from_slice(&payload);
    bytes.extend_from_slice(&make_trailer(forged_at, 31));
    let crafted = map_of_bytes(&bytes);
    let mut writer = Writer::append(&path, None).unwrap();
    writer.write(&crafted).unwrap();
    // killed: no commit
    drop(writer);
    let file = std::fs::read(&path).unwrap();
    assert_eq!(file.len() as u64, forged_at + forged_len as u64);
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    assert!(!dataset.committed());
    assert_eq!(dataset.len(), 32);
    for (i, map) in maps.iter().chain([&crafted]).enumerate() {
        assert_eq!(&dataset.get(index(i), None).unwrap(), map, "entry {i}");
    }
    assert!(verify(&path).unwrap().is_ok());
    let mut writer = Writer::append(&path, None).unwrap();
    writer.write(&maps[1]).unwrap();
    writer.close().unwrap();
    let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    assert_eq!((dataset.len(), dataset.committed()), (33, true));
    assert_eq!(dataset.get(31, None).unwrap(), crafted);
    assert!(verify(&path).unwrap().is_ok());
}

/// Version 4: a SEGMENT record whose columns are damaged fails the
/// columns (a `FormatError` naming the file), while the open and every
/// entry still read; one whose rows are damaged is no commit (the walk
/// keeps the entries).
#[test]
fn a_damaged_segment_fails_its_columns_or_its_commit() {
    let dir = scratch("segment");
    let path = dir.join("data");
    let map = fixtures::small_map();
    let mut writer = Writer::create(&path, None, true).unwrap();
    for _ in 0..3 {
        writer.write(&map).unwrap();
    }
    writer.close().unwrap();
    let good = std::fs::read(&path).unwrap();
    let (commit, _) = last_commit_of(&good);
    // the one piece: its SEGMENT record's offset
    let piece_at = commit + 16 + 24;
    let segment = usize::try_from(u64::from_le_bytes(
        good[piece_at..piece_at + 8].try_into().unwrap(),
    ))
    .unwrap();
    let bad_path = dir.join("bad");
    // the last column value (before the rows, which end the payload)
    let mut bytes = good.clone();
    let columns_end = segment + 16 + 16 + 3 * 8;
    bytes[columns_end - 1] ^= 1;
    std::fs::write(&bad_path, &bytes).unwrap();
    let dataset = Dataset::open(&bad_path, MapMode::ReadOnly).unwrap();
    assert!(dataset.committed());
    assert_eq!(dataset.get(2, None).unwrap(), map);
    let error = dataset.n_samples(0).unwrap_err();
    assert!(matches!(error, Error::Format(_)), "{error:?}");
    assert!(!verify(&bad_path).unwrap().is_ok());
    // a row's byte
    let mut bytes = good;
    bytes[columns_end + 8] ^= 1;
    std::fs::write(&bad_path, &bytes).unwrap();
    let dataset = Dataset::open(&bad_path, MapMode::ReadOnly).unwrap();
    assert!(!dataset.committed());
    assert_eq!(dataset.len(), 3);
    assert_eq!(dataset.get(2, None).unwrap(), map);
}

/// A walk of the records (the last commit not taken on its word) keeps
/// the entries of the last valid commit whose rows are the entries it
/// walked: a later commit that lists an entry whose header was damaged
/// since is passed over, not taken as a reason to drop every commit (the
/// fuzz target's finding: an entry of the earlier commit damaged in its
/// arrays then lost it and every entry after it).
#[test]
fn a_later_commit_of_a_damaged_entry_keeps_an_earlier_commits_entries() {
    for version in [3, 4] {
        let dir = scratch(&format!("later-commit-{version}"));
        let path = dir.join("data");
        let maps: Vec<TensorMap> = (0..5).map(|_| fixtures::tensor(DType::F8)).collect();
        let mut writer = Writer::create_version(&path, None, true, version).unwrap();
        for map in &maps[..3] {
            writer.write(map).unwrap();
        }
        writer.close().unwrap();
        let mut writer = Writer::append(&path, None).unwrap();
        for map in &maps[3..] {
            writer.write(map).unwrap();
        }
        writer.close().unwrap();
        let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
        let (first, last) = (dataset.span(0).unwrap(), dataset.span(4).unwrap());
        drop(dataset);
        let mut bytes = std::fs::read(&path).unwrap();
        // entry 0's last array byte, and entry 4's header CRC
        bytes[usize::try_from(first.offset + first.len).unwrap() - 1] ^= 1;
        bytes[usize::try_from(last.offset).unwrap() + 4] ^= 1;
        // and the beginning of a write after the last commit (a record
        // that runs past the file's end): the records are walked
        bytes.extend_from_slice(&super::v2::layout::record_header(
            super::v2::layout::RecordKind::Labels,
            0,
            1000,
        ));
        std::fs::write(&path, &bytes).unwrap();
        let dataset = Dataset::open(&path, MapMode::ReadOnly).unwrap();
        assert!(!dataset.committed());
        // the first commit's 3 (entry 0 taken on its word: reads check its
        // description), entry 3 hashed, entry 4 not
        assert_eq!(dataset.len(), 4, "version {version}");
        assert_eq!(dataset.get(3, None).unwrap(), maps[3]);
    }
}
