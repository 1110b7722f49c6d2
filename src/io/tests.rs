//! Round trips and the copy/view rules of the io module.

use std::io::Cursor;

use super::*;
use crate::array::Array;
use crate::block::TensorBlock;
use crate::buffer::{MapMode, OwnerKind};
use crate::dtype::DType;
use crate::fixtures::{block_with_nested_gradients as block, labels, tensor, TempDir};
use crate::labels::Labels;
use crate::tensor::TensorMap;

#[test]
fn round_trip_every_dtype() {
    for dtype in DType::ALL {
        let map = tensor(dtype);
        let bytes = save(Cursor::new(Vec::new()), DataRef::Tensor(&map))
            .unwrap()
            .into_inner();
        let Data::Tensor(loaded) = load(Cursor::new(&bytes), Kind::Tensor).unwrap() else {
            panic!("a tensor was saved")
        };
        assert_eq!(loaded, map, "{dtype}");
        let Data::Tensor(viewed) =
            load_buffer(Buffer::copy_from(&bytes).unwrap(), Kind::Tensor).unwrap()
        else {
            panic!("a tensor was saved")
        };
        assert_eq!(viewed, map, "{dtype}");
    }
}

#[test]
fn same_data_same_bytes_and_aligned_payloads() {
    let map = tensor(DType::F8);
    let first = save_buffer(DataRef::Tensor(&map)).unwrap();
    let second = save_buffer(DataRef::Tensor(&map.deep_copy().unwrap())).unwrap();
    assert!(
        first.to_vec().unwrap() == second.to_vec().unwrap(),
        "two saves differ"
    );
    let written = save(Cursor::new(Vec::new()), DataRef::Tensor(&map))
        .unwrap()
        .into_inner();
    let differ = first
        .to_vec()
        .unwrap()
        .iter()
        .zip(&written)
        .position(|(a, b)| a != b);
    assert!(
        first.to_vec().unwrap() == written,
        "save_buffer and save differ: lengths {} and {}, first difference at {differ:?}",
        first.len(),
        written.len()
    );

    // every array loaded from the buffer views it, at 64-byte aligned offsets
    let Data::Tensor(loaded) = load_buffer(first.clone(), Kind::Tensor).unwrap() else {
        panic!()
    };
    let start = first.as_ptr() as usize;
    for block in loaded.blocks() {
        for array in [
            block.values(),
            block.gradient("positions").unwrap().values(),
        ] {
            let offset = array.buffer().as_ptr() as usize - start;
            assert!(offset < first.len());
            assert_eq!(offset % 64, 0);
            assert_eq!(array.buffer().owner_kind(), OwnerKind::Rust);
        }
        // labels own a copy: the caller's buffer cannot reach them
        let samples = block.samples().values().buffer().as_ptr() as usize;
        assert!(!(start..start + first.len()).contains(&samples));
    }
    // every payload, labels' included, starts on a 64-byte boundary
    let mut archive = ::zip::ZipArchive::new(Cursor::new(first.to_vec().unwrap())).unwrap();
    for i in 0..archive.len() {
        let entry = archive.by_index_raw(i).unwrap();
        let name = entry.name().unwrap().to_string();
        if std::path::Path::new(&name)
            .extension()
            .is_none_or(|e| e != "npy")
        {
            continue;
        }
        let start = usize::try_from(entry.data_start().unwrap()).unwrap();
        let header = npy::read_header(&first.to_vec().unwrap()[start..]).unwrap();
        assert_eq!((start + header.len) % 64, 0, "{name}");
    }
}

#[test]
fn blocks_and_labels() {
    let block = block(DType::I4);
    let buffer = save_buffer(DataRef::Block(&block)).unwrap();
    let Data::Block(loaded) = load_buffer(buffer, Kind::Block).unwrap() else {
        panic!()
    };
    assert_eq!(loaded, block);

    let labels = labels(&["a", "b"], &[1, 2, 3, 4]);
    let buffer = save_buffer(DataRef::Labels(&labels)).unwrap();
    assert_eq!(&buffer.to_vec().unwrap()[..6], npy::MAGIC);
    let Data::Labels(loaded) = load_buffer(buffer, Kind::Labels).unwrap() else {
        panic!()
    };
    assert_eq!(loaded, labels);
}

#[test]
fn empty_maps_and_blocks() {
    let empty = TensorMap::new(Labels::empty(vec!["k"]).unwrap(), vec![]).unwrap();
    let buffer = save_buffer(DataRef::Tensor(&empty)).unwrap();
    let Data::Tensor(loaded) = load_buffer(buffer, Kind::Tensor).unwrap() else {
        panic!()
    };
    assert_eq!(loaded, empty);

    let no_samples = TensorBlock::new(
        Array::zeros(DType::F4, vec![0, 3]).unwrap(),
        Labels::empty(vec!["s"]).unwrap(),
        vec![],
        Labels::range("p", 3).unwrap(),
    )
    .unwrap();
    let map = TensorMap::new(Labels::single(), vec![no_samples]).unwrap();
    let buffer = save_buffer(DataRef::Tensor(&map)).unwrap();
    let Data::Tensor(loaded) = load_buffer(buffer, Kind::Tensor).unwrap() else {
        panic!()
    };
    assert_eq!(loaded, map);
}

#[test]
fn paths_mapped_and_atomic() {
    let dir = TempDir::new("io-paths");
    let path = dir.join("map.mts");
    let map = tensor(DType::F8);
    save_path(&path, DataRef::Tensor(&map), true).unwrap();

    let Data::Tensor(read) = load_path(&path, Kind::Tensor, None).unwrap() else {
        panic!()
    };
    assert_eq!(read, map);
    assert_eq!(
        read.blocks()[0].values().buffer().owner_kind(),
        OwnerKind::Rust
    );

    let Data::Tensor(mapped) = load_path(&path, Kind::Tensor, Some(MapMode::ReadOnly)).unwrap()
    else {
        panic!()
    };
    assert_eq!(mapped, map);
    let values = mapped.blocks()[0].values().buffer();
    assert_eq!(values.owner_kind(), OwnerKind::Mapped);
    assert!(!values.is_writable(), "read-only mapping");
    // labels own their memory, read from the file: never a view of the mapping
    let samples = mapped.blocks()[0].samples().values().buffer();
    assert_eq!(samples.owner_kind(), OwnerKind::Rust);

    let Data::Tensor(private) = load_path(&path, Kind::Tensor, Some(MapMode::CopyOnWrite)).unwrap()
    else {
        panic!()
    };
    assert_eq!(private, map);
    assert!(
        private.blocks()[0].values().buffer().is_writable(),
        "copy-on-write mapping"
    );

    // saving over the mapped file replaces it: the mapping keeps its data
    let other = tensor(DType::F8).deep_copy().unwrap();
    save_path(
        &path,
        DataRef::Tensor(&TensorMap::new(Labels::single(), vec![block(DType::F8)]).unwrap()),
        true,
    )
    .unwrap();
    assert_eq!(mapped, other);
    assert_eq!(verify_path(&path).unwrap(), Kind::Tensor);

    // a failed save leaves nothing behind
    let missing_dir = dir.join("missing").join("map.mts");
    assert!(matches!(
        save_path(&missing_dir, DataRef::Tensor(&map), true),
        Err(Error::Io { .. })
    ));
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name != "map.mts")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let err = load_path(&dir.join("nope.mts"), Kind::Tensor, None).unwrap_err();
    assert!(
        matches!(err, Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    );
}

#[test]
fn corrupt_data_is_found() {
    let map = tensor(DType::F8);
    let bytes = save(Cursor::new(Vec::new()), DataRef::Tensor(&map))
        .unwrap()
        .into_inner();
    // flip one byte of the first block's values (after keys.npy)
    let mut corrupt = bytes.clone();
    let position = bytes
        .windows(6)
        .enumerate()
        .filter(|(_, w)| w == npy::MAGIC)
        .nth(1)
        .unwrap()
        .0;
    corrupt[position + 200] ^= 0xff;
    let err = load(Cursor::new(&corrupt), Kind::Tensor).unwrap_err();
    assert!(matches!(err, Error::Format(_)), "{err}");
    let err = load_buffer(Buffer::copy_from(&corrupt).unwrap(), Kind::Tensor).unwrap_err();
    assert!(err.to_string().contains("CRC"), "{err}");

    for cut in [0, 10, bytes.len() / 2, bytes.len() - 10] {
        assert!(load(Cursor::new(&bytes[..cut]), Kind::Tensor).is_err());
        assert!(load_buffer(Buffer::copy_from(&bytes[..cut]).unwrap(), Kind::Tensor).is_err());
    }
    assert!(load_buffer(Buffer::copy_from(&bytes).unwrap(), Kind::Block).is_err());
}

/// Fails every operation after `budget` bytes, and counts calls after that.
#[derive(Debug)]
struct Failing {
    written: usize,
    budget: usize,
    calls_after_failure: usize,
}

impl std::io::Write for Failing {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.written + data.len() > self.budget {
            self.calls_after_failure += 1;
            return Err(std::io::Error::other("disk full"));
        }
        self.written += data.len();
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl std::io::Seek for Failing {
    fn seek(&mut self, _: std::io::SeekFrom) -> std::io::Result<u64> {
        if self.written >= self.budget {
            self.calls_after_failure += 1;
        }
        Ok(self.written as u64)
    }
}

#[test]
fn a_failing_writer_is_left_alone_after_its_error() {
    let map = tensor(DType::F8);
    let mut failing = Failing {
        written: 0,
        budget: 1000,
        calls_after_failure: 0,
    };
    let err = write::tensor(write::Plain(&mut failing), &map, None).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert_eq!(
        failing.calls_after_failure, 1,
        "only the failing write reached the writer"
    );
}

/// The maps whose archives [`archives_keep_their_bytes`] pins: every
/// fixture, a gradient parameter with a non-ASCII name (the zip's UTF-8
/// flag), a map of 66,000 entries (ZIP64 end records), and a block.
fn pinned_archives() -> Vec<(&'static str, Buffer)> {
    let save = |data: DataRef<'_>| save_buffer(data).unwrap();
    let mut out = vec![
        ("tensor f8", save(DataRef::Tensor(&tensor(DType::F8)))),
        ("tensor i1", save(DataRef::Tensor(&tensor(DType::I1)))),
        (
            "small map",
            save(DataRef::Tensor(&crate::fixtures::small_map())),
        ),
        (
            "empty block",
            save(DataRef::Tensor(&crate::fixtures::map_with_an_empty_block())),
        ),
        ("block", save(DataRef::Block(&block(DType::F4)))),
    ];
    let mut unicode = crate::fixtures::small_map();
    let gradient = unicode.blocks()[0].gradient("positions").unwrap().clone();
    let mut blocks = unicode.blocks().to_vec();
    blocks[0].add_gradient("déplacement", gradient).unwrap();
    unicode = TensorMap::new(unicode.keys().clone(), blocks).unwrap();
    out.push(("non-ASCII name", save(DataRef::Tensor(&unicode))));
    let one = crate::fixtures::small_map().blocks()[0].clone();
    let count = 16_500;
    let keys: Vec<i32> = (0..count).collect();
    let many = TensorMap::new(
        Labels::new(vec!["k"], &keys).unwrap(),
        vec![one; usize::try_from(count).unwrap()],
    )
    .unwrap();
    out.push(("66,001 entries", save(DataRef::Tensor(&many))));
    out
}

/// The archives blockmap writes keep their bytes (format.md: the same data
/// always gives the same bytes): these are the length and CRC32 of the
/// archives written before blockmap had its own zip writer, when the zip
/// crate wrote them.
#[test]
fn archives_keep_their_bytes() {
    let pinned: &[(&str, usize, u32)] = &[
        ("tensor f8", 9972, 0x53b1_4259),
        ("tensor i1", 8564, 0x3b74_4032),
        ("small map", 2335, 0x61f6_77d6),
        ("empty block", 3314, 0x4392_bef1),
        ("block", 4223, 0x9d0d_7e9c),
        ("non-ASCII name", 3249, 0x1b5d_c0f6),
        ("66,001 entries", 32_780_340, 0xc9e4_b039),
    ];
    for (name, buffer) in pinned_archives() {
        let found = (buffer.len(), buffer.raw().crc32());
        let &(_, len, crc) = pinned.iter().find(|(n, _, _)| *n == name).unwrap();
        assert_eq!(found, (len, crc), "{name}: length and CRC32");
    }
}
