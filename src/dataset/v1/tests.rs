//! Version-1 files: the stored ones open and read, a file cut anywhere
//! opens with every complete map, hostile bytes give errors.

use super::*;
use crate::buffer::ALIGNMENT;
use crate::fixtures::TempDir;

/// A stored version-1 file of tests/data/datasets/.
fn stored(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/datasets")
        .join(name)
}

#[test]
fn stored_files_open() {
    for (name, count, committed) in [
        ("v1-committed.bmds", 3, true),
        ("v1-appended.bmds", 4, true),
        ("v1-recovered.bmds", 3, false),
        ("v1-empty.bmds", 0, true),
    ] {
        let dataset = Dataset::open(&stored(name), MapMode::ReadOnly).unwrap();
        assert_eq!(
            (dataset.len(), dataset.committed()),
            (count, committed),
            "{name}"
        );
        for i in 0..count {
            let map = dataset.get(i, None).unwrap();
            assert!(!map.blocks().is_empty());
            assert_eq!(dataset.span(i).offset % ALIGNMENT as u64, 0);
        }
        dataset.checksum(count).unwrap();
    }
}

#[test]
fn a_file_cut_anywhere_opens_with_every_complete_map() {
    let path = stored("v1-committed.bmds");
    let whole = Dataset::open(&path, MapMode::ReadOnly).unwrap();
    let ends: Vec<u64> = (0..whole.len())
        .map(|i| whole.span(i))
        .map(|s| s.offset + s.len)
        .collect();
    let maps: Vec<TensorMap> = (0..3).map(|i| whole.get(i, None).unwrap()).collect();
    let bytes = std::fs::read(&path).unwrap();
    let dir = TempDir::new("v1-cut");
    let cut_path = dir.join("data");
    let json_end = whole.span(0).offset - 100;
    for cut in (usize::try_from(json_end).unwrap()..=bytes.len()).step_by(7) {
        std::fs::write(&cut_path, &bytes[..cut]).unwrap();
        let dataset = Dataset::open(&cut_path, MapMode::ReadOnly)
            .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let complete = ends.iter().filter(|&&end| end <= cut as u64).count();
        assert_eq!(dataset.len(), complete, "cut at {cut}");
        for (i, map) in maps.iter().take(complete).enumerate() {
            assert_eq!(&dataset.get(i, None).unwrap(), map, "cut at {cut}");
        }
    }
}

#[test]
fn hostile_files_are_refused_with_errors() {
    let good = std::fs::read(stored("v1-committed.bmds")).unwrap();
    let dir = TempDir::new("v1-hostile");
    let bad_path = dir.join("data");
    // single bytes flipped: an error or a dataset, never a panic
    for at in (0..good.len()).step_by(13) {
        let mut bytes = good.clone();
        bytes[at] ^= 0x5A;
        std::fs::write(&bad_path, &bytes).unwrap();
        if let Ok(dataset) = Dataset::open(&bad_path, MapMode::ReadOnly) {
            for i in 0..dataset.len() {
                let _ = dataset.get(i, None);
            }
        }
    }
    std::fs::write(&bad_path, b"not a dataset").unwrap();
    assert!(Dataset::open(&bad_path, MapMode::ReadOnly).is_err());
}
