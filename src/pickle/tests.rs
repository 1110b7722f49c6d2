//! The wire format's round trips, its dispatch and crafted input.

use super::writer::dump_version;
use super::*;
use crate::array::Array;
use crate::block::TensorBlock;
use crate::buffer::{Allocate, Buffer, PieceMemory, PiecedWriter};
use crate::data::{Data, DataRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::fixtures::small_map as map;
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// A reconstructor argument as a transport gives it.
enum Arg {
    Text(&'static str),
    Bytes(Buffer),
}

impl Arguments for Vec<Arg> {
    type Error = Error;

    fn count(&self) -> usize {
        self.len()
    }

    fn text(&self, index: usize) -> Result<Option<String>> {
        Ok(match &self[index] {
            Arg::Text(text) => Some((*text).to_string()),
            Arg::Bytes(_) => None,
        })
    }

    fn buffer(&self, index: usize, _: bool) -> Result<Buffer> {
        match &self[index] {
            Arg::Bytes(buffer) => Ok(buffer.clone()),
            Arg::Text(_) => Err(Error::UnsupportedType("not bytes".into())),
        }
    }
}

/// Pieces from leaked boxes (the test's memory, never freed),
/// remembered by address to be read back.
struct Leaked(Vec<(usize, usize)>);

impl Allocate<'static> for &mut Leaked {
    fn allocate(&mut self, capacity: usize) -> std::io::Result<PieceMemory<'static>> {
        let memory = Box::leak(vec![std::mem::MaybeUninit::new(0_u8); capacity].into_boxed_slice());
        self.0.push((memory.as_ptr() as usize, capacity));
        Ok(memory)
    }
}

/// The in-band form of `data` in pieces of about `target` bytes, as
/// the arguments of its reconstructor call: (version, arguments).
fn in_band(data: DataRef<'_>, target: usize) -> (i64, Vec<Arg>) {
    let mut leaked = Leaked(Vec::new());
    let size = in_band_piece_size(data, target);
    let mut writer = PiecedWriter::new(&mut leaked, size, in_band_bound(data));
    write_in_band(&mut writer, data).unwrap();
    let lengths = writer.lengths();
    drop(writer);
    let mut args = vec![Arg::Text(data.kind().name())];
    for (length, &(address, _)) in lengths.iter().zip(&leaked.0) {
        // SAFETY: the piece was leaked (it lives forever), its first
        // `length` bytes were written, and the writer is gone.
        let bytes = unsafe { std::slice::from_raw_parts(address as *const u8, *length) };
        args.push(Arg::Bytes(Buffer::copy_from(bytes).unwrap()));
    }
    (i64::from(in_band_version(lengths.len())), args)
}

#[test]
fn every_version_is_read_and_dispatched_in_the_core() {
    let map = map();
    let labels = map.keys().clone();
    // out of band: version 3, and version 1 (no references)
    for (version, refer) in [(3, true), (1, false)] {
        let (header, buffers) = dump_version(DataRef::Tensor(&map), refer).unwrap();
        let mut args = vec![Arg::Bytes(Buffer::copy_from(&header).unwrap())];
        args.extend(buffers.into_iter().map(|(buffer, _)| Arg::Bytes(buffer)));
        let pickled = Pickled::read(version, &args).unwrap();
        assert!(matches!(pickled, Pickled::OutOfBand { .. }));
        assert_eq!(pickled.load().unwrap(), Data::Tensor(map.clone()));
    }
    // in band: one piece (version 0), several (version 2); labels
    // always in one
    for (data, target, version) in [
        (Data::Tensor(map.clone()), 16 << 20, 0),
        (Data::Tensor(map.clone()), 256, 2),
        (Data::Block(map.blocks()[0].clone()), 256, 2),
        (Data::Labels(labels), 1, 0),
    ] {
        let (written, args) = in_band(data.as_ref(), target);
        assert_eq!(written, version);
        let pickled = Pickled::read(written, &args).unwrap();
        assert_eq!(pickled.load().unwrap(), data);
    }
}

#[test]
fn bad_calls_are_format_errors() {
    let (_, pieces) = in_band(DataRef::Tensor(&map()), 256);
    let piece = || match &pieces[1] {
        Arg::Bytes(buffer) => Arg::Bytes(buffer.clone()),
        Arg::Text(_) => unreachable!(),
    };
    for (version, args, message) in [
        (
            4,
            vec![],
            "unknown pickle format version 4: this blockmap reads versions 0 to 3",
        ),
        (-1, vec![], "unknown pickle format version -1"),
        (3, vec![], "the pickle has no header"),
        (1, vec![], "the pickle has no header"),
        (
            0,
            vec![Arg::Text("tensor")],
            "a version 0 pickle has a kind and an archive, got 1",
        ),
        (
            2,
            vec![],
            "a version 2 pickle has a kind and pieces, got no arguments",
        ),
        (
            0,
            vec![piece(), piece()],
            "the kind of a version 0 pickle must be a string",
        ),
        (
            2,
            vec![piece(), piece()],
            "the kind of a version 2 pickle must be a string",
        ),
        (2, vec![Arg::Text("map"), piece()], "unknown kind 'map'"),
        (
            2,
            vec![Arg::Text("labels"), piece()],
            "labels are a bare NPY file",
        ),
    ] {
        let error = Pickled::read(version, &args)
            .and_then(Pickled::load)
            .unwrap_err();
        assert!(matches!(error, Error::Format(_)), "{error}");
        assert!(error.to_string().contains(message), "{error}");
    }
    // an argument the binding cannot read: its error
    let error = Pickled::read(3, &vec![Arg::Text("x")]).unwrap_err();
    assert!(matches!(error, Error::UnsupportedType(_)), "{error}");
}

#[test]
fn round_trip_shares_memory() {
    let map = map();
    let (header, buffers) = dump(DataRef::Tensor(&map)).unwrap();
    // keys, values, samples, properties, gradient values, samples, component
    assert_eq!(buffers.len(), 7);
    assert!(header.len() < 1000);
    let pointers: Vec<_> = buffers.iter().map(Buffer::as_ptr).collect();
    assert!(!buffers[0].is_writable(), "labels are handed out read-only");
    assert!(buffers[1].is_writable(), "values are writable");
    let Data::Tensor(loaded) = load(&header, buffers).unwrap() else {
        panic!()
    };
    assert_eq!(loaded, map);
    assert_eq!(loaded.blocks()[0].values().buffer().as_ptr(), pointers[1]);
    assert_eq!(
        loaded.blocks()[0]
            .gradient("positions")
            .unwrap()
            .values()
            .buffer()
            .as_ptr(),
        pointers[4]
    );
}

#[test]
fn misaligned_buffers_are_copied() {
    let map = map();
    let (header, buffers) = dump(DataRef::Tensor(&map)).unwrap();
    let shifted: Vec<Buffer> = buffers
        .iter()
        .map(|b| {
            let mut bytes = vec![0u8; b.len() + 1];
            b.raw().copy_to(&mut bytes[1..]).unwrap();
            Buffer::copy_from(&bytes)
                .unwrap()
                .slice(1, b.len())
                .unwrap()
        })
        .collect();
    let Data::Tensor(loaded) = load(&header, shifted).unwrap() else {
        panic!()
    };
    assert_eq!(loaded, map);
    assert!(loaded.blocks()[0].values().buffer().is_aligned_to(8));
}

#[test]
fn crafted_input_is_refused() {
    let map = map();
    let (header, buffers) = dump(DataRef::Tensor(&map)).unwrap();
    let mut fewer = buffers.clone();
    fewer.pop();
    assert!(load(&header, fewer)
        .unwrap_err()
        .to_string()
        .contains("too few"));
    let mut more = buffers.clone();
    more.push(Buffer::empty());
    assert!(load(&header, more)
        .unwrap_err()
        .to_string()
        .contains("has 8 buffers"));
    let mut short = buffers.clone();
    short[1] = short[1].slice(0, 8).unwrap();
    assert!(load(&header, short)
        .unwrap_err()
        .to_string()
        .contains("needs 48"));
    let text = String::from_utf8(header.clone()).unwrap();
    for bad in [
        text.replace("<f8", "<O"),
        text.replace("\"count\":2", "\"count\":3"),
        text.replace("tensor", "matrix"),
        text.replace("\"shape\":[2,3]", "\"shape\":[2,-3]"),
        text[..text.len() / 2].to_string(),
        "[]".to_string(),
    ] {
        assert!(load(bad.as_bytes(), buffers.clone()).is_err(), "{bad}");
    }
    // labels that are not unique
    let mut duplicated = buffers.clone();
    duplicated[2] = Buffer::copy_from(&[0u8; 8]).unwrap();
    assert!(load(&header, duplicated)
        .unwrap_err()
        .to_string()
        .contains("twice"));
}

/// Three blocks whose samples, components and properties are equal
/// labels held separately (as received from another process).
fn map_of_equal_labels() -> TensorMap {
    use crate::fixtures::labels;
    let blocks = (0..3)
        .map(|i| {
            TensorBlock::new(
                Array::from_slice(vec![2, 1, 3], &[f64::from(i); 6]).unwrap(),
                labels(&["s"], &[0, 1]),
                vec![labels(&["c"], &[5])],
                Labels::range("p", 3).unwrap(),
            )
            .unwrap()
        })
        .collect();
    TensorMap::new(labels(&["k"], &[0, 1, 2]), blocks).unwrap()
}

/// A version 1 pickle: every labels with its buffer.
fn dump_v1(data: DataRef<'_>) -> (Vec<u8>, Vec<Buffer>) {
    let (header, buffers) = dump_version(data, false).unwrap();
    (header, buffers.into_iter().map(|(b, _)| b).collect())
}

#[test]
fn equal_small_labels_are_sent_once_and_received_shared() {
    let map = map_of_equal_labels();
    let (header, buffers) = dump(DataRef::Tensor(&map)).unwrap();
    // keys, then values, samples, component, properties for block 0,
    // only the values for blocks 1 and 2
    assert_eq!(buffers.len(), 1 + 4 + 1 + 1);
    let text = String::from_utf8(header.clone()).unwrap();
    assert!(text.contains(r#""samples":2,"components":[3],"properties":4"#));
    let (v1_header, v1_buffers) = dump_v1(DataRef::Tensor(&map));
    assert_eq!(v1_buffers.len(), 1 + 3 * 4);
    assert!(header.len() < v1_header.len());
    for (header, buffers, version) in [(header, buffers, 3), (v1_header, v1_buffers, 1)] {
        let Data::Tensor(loaded) = load_version(version, &header, buffers).unwrap() else {
            panic!()
        };
        assert_eq!(loaded, map);
        let blocks = loaded.blocks();
        for block in &blocks[1..] {
            assert!(block.samples().ptr_eq(blocks[0].samples()));
            assert!(block.components()[0].ptr_eq(&blocks[0].components()[0]));
            assert!(block.properties().ptr_eq(blocks[0].properties()));
        }
    }
    // a version 1 reader refuses references
    let (header, buffers) = dump(DataRef::Tensor(&map)).unwrap();
    let error = load_version(1, &header, buffers).unwrap_err().to_string();
    assert!(error.contains("version 3"), "{error}");
}

#[test]
fn large_labels_are_sent_once_per_object() {
    // samples just over the 4 KiB of labels that are compared by content
    let samples = Labels::range("s", 1025).unwrap();
    let map_of = |same_object: bool| {
        let blocks = (0..2)
            .map(|_| {
                let samples = if same_object {
                    samples.clone()
                } else {
                    Labels::range("s", 1025).unwrap()
                };
                TensorBlock::new(
                    Array::from_slice(vec![1025, 1], &[0.0f64; 1025]).unwrap(),
                    samples,
                    vec![],
                    Labels::range("p", 1).unwrap(),
                )
                .unwrap()
            })
            .collect();
        TensorMap::new(Labels::range("k", 2).unwrap(), blocks).unwrap()
    };
    // the same object: referred to, whatever its size; equal objects
    // larger than 4 KiB: sent each time (not hashed at dumps)
    for (same_object, count) in [(true, 1 + 3 + 1), (false, 1 + 3 + 2)] {
        let map = map_of(same_object);
        let (header, buffers) = dump(DataRef::Tensor(&map)).unwrap();
        // keys; values, samples, properties; values (and samples)
        assert_eq!(buffers.len(), count);
        let Data::Tensor(loaded) = load(&header, buffers).unwrap() else {
            panic!()
        };
        assert_eq!(loaded, map);
        let blocks = loaded.blocks();
        assert_eq!(blocks[1].samples().ptr_eq(blocks[0].samples()), same_object);
        // version 1 sends every labels
        let (v1_header, v1_buffers) = dump_v1(DataRef::Tensor(&map));
        assert_eq!(v1_buffers.len(), 1 + 3 + 3);
        let Data::Tensor(loaded) = load_version(1, &v1_header, v1_buffers).unwrap() else {
            panic!()
        };
        assert_eq!(loaded, map);
    }
    // made one object (TensorMap::share_equal_labels), they are sent once
    let mut map = map_of(false);
    map.share_equal_labels().unwrap();
    let (_, buffers) = dump(DataRef::Tensor(&map)).unwrap();
    assert_eq!(buffers.len(), 1 + 3 + 1);
}

#[test]
fn crafted_references_are_refused() {
    let map = map_of_equal_labels();
    let (header, buffers) = dump(DataRef::Tensor(&map)).unwrap();
    let text = String::from_utf8(header).unwrap();
    let refs = r#""samples":2,"components":[3],"properties":4"#;
    for (bad, expected) in [
        // the values of block 0
        (r#""samples":1,"components":[3],"properties":4"#, "buffer 1"),
        // a later buffer
        (r#""samples":2,"components":[6],"properties":4"#, "buffer 6"),
        (
            r#""samples":2,"components":[3],"properties":99"#,
            "buffer 99",
        ),
        (r#""samples":-2,"components":[3],"properties":4"#, "invalid"),
        (
            r#""samples":2.5,"components":[3],"properties":4"#,
            "invalid",
        ),
        (
            r#""samples":"2","components":[3],"properties":4"#,
            "invalid",
        ),
    ] {
        let crafted = text.replacen(refs, bad, 1);
        assert_ne!(crafted, text);
        let error = load(crafted.as_bytes(), buffers.clone())
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{bad}: {error}");
    }
    // the keys are always described
    let crafted = text.replacen(
        r#""keys":{"names":["k"],"count":3,"dtype":"<i4"}"#,
        r#""keys":0"#,
        1,
    );
    assert_ne!(crafted, text);
    assert!(load(crafted.as_bytes(), buffers.clone()).is_err());
}

#[test]
fn received_labels_are_copied_together_and_equal_ones_made_once() {
    let map = map_of_equal_labels();
    let (header, buffers) = dump_v1(DataRef::Tensor(&map));
    let sent: Vec<_> = buffers
        .iter()
        .map(|b| b.as_ptr() as usize..b.as_ptr() as usize + b.len())
        .collect();
    let Data::Tensor(loaded) = load_version(1, &header, buffers).unwrap() else {
        panic!()
    };
    assert_eq!(loaded, map);
    let blocks = loaded.blocks();
    for block in &blocks[1..] {
        assert!(block.samples().ptr_eq(blocks[0].samples()));
        assert!(block.properties().ptr_eq(blocks[0].properties()));
        assert!(block.components()[0].ptr_eq(&blocks[0].components()[0]));
    }
    // every label's memory is a copy (none of the sent buffers), in
    // one allocation: the keys and the first block's labels lie within
    // a few aligned slots of each other
    let labels = [
        loaded.keys(),
        blocks[0].samples(),
        &blocks[0].components()[0],
        blocks[0].properties(),
    ];
    let addresses: Vec<usize> = labels
        .iter()
        .map(|l| l.values().buffer().as_ptr() as usize)
        .collect();
    for address in &addresses {
        assert!(sent.iter().all(|range| !range.contains(address)));
        assert_eq!(address % crate::buffer::ALIGNMENT, 0);
    }
    let lowest = *addresses.iter().min().unwrap();
    let highest = *addresses.iter().max().unwrap();
    assert!(highest - lowest < 4 * crate::buffer::ALIGNMENT);
    // the values still view the sent memory
    assert!(sent[1].contains(&(blocks[0].values().buffer().as_ptr() as usize)));
}

#[test]
fn labels_with_other_names_or_byte_order_are_not_shared() {
    // the same bytes under other names
    let block = TensorBlock::new(
        Array::from_slice(vec![3, 3], &[0.0f64; 9]).unwrap(),
        Labels::range("s", 3).unwrap(),
        vec![],
        Labels::range("p", 3).unwrap(),
    )
    .unwrap();
    let (header, buffers) = dump(DataRef::Block(&block)).unwrap();
    let Data::Block(loaded) = load(&header, buffers).unwrap() else {
        panic!()
    };
    assert_eq!(loaded, block);
    assert!(!loaded.samples().ptr_eq(loaded.properties()));

    // the same names and bytes read in the other byte order: the last
    // block's properties (version 1: each block's described)
    let map = map_of_equal_labels();
    let (header, buffers) = dump_v1(DataRef::Tensor(&map));
    let text = String::from_utf8(header).unwrap();
    let native = DType::I4.native_descr();
    let swapped = if native.starts_with('<') {
        ">i4"
    } else {
        "<i4"
    };
    let properties = format!("\"names\":[\"p\"],\"count\":3,\"dtype\":\"{native}\"");
    let last = text.rfind(&properties).unwrap();
    let crafted = format!(
        "{}{}{}",
        &text[..last],
        properties.replace(&native, swapped),
        &text[last + properties.len()..]
    );
    let Data::Tensor(loaded) = load_version(1, crafted.as_bytes(), buffers).unwrap() else {
        panic!()
    };
    let blocks = loaded.blocks();
    assert!(blocks[1].properties().ptr_eq(blocks[0].properties()));
    assert!(!blocks[2].properties().ptr_eq(blocks[0].properties()));
    let swapped_values: Vec<i32> = (0..3).map(i32::swap_bytes).collect();
    assert_eq!(
        blocks[2].properties().values().as_slice::<i32>().unwrap(),
        &swapped_values[..]
    );
}

#[test]
fn blocks_and_labels() {
    let map = map();
    let block = &map.blocks()[0];
    let (header, buffers) = dump(DataRef::Block(block)).unwrap();
    let Data::Block(loaded) = load(&header, buffers).unwrap() else {
        panic!()
    };
    assert_eq!(&loaded, block);
    let (header, buffers) = dump(DataRef::Labels(map.keys())).unwrap();
    let Data::Labels(loaded) = load(&header, buffers).unwrap() else {
        panic!()
    };
    assert_eq!(&loaded, map.keys());
}

#[test]
fn read_only_in_band_pieces_give_read_only_arrays_empty_ones_too() {
    let empty = TensorBlock::new(
        Array::from_slice(vec![0, 3], &[0.0f64; 0]).unwrap(),
        Labels::range("s", 0).unwrap(),
        vec![],
        Labels::range("p", 3).unwrap(),
    )
    .unwrap();
    let full = TensorBlock::new(
        Array::from_slice(vec![2, 3], &[1.0f64; 6]).unwrap(),
        Labels::range("s", 2).unwrap(),
        vec![],
        Labels::range("p", 3).unwrap(),
    )
    .unwrap();
    let map = TensorMap::new(Labels::range("k", 2).unwrap(), vec![empty, full]).unwrap();
    let mut versions = Vec::new();
    // in one piece (version 0) and in pieces (version 2)
    for target in [16 << 20, 256] {
        let (version, args) = in_band(DataRef::Tensor(&map), target);
        versions.push(version);
        let read_only: Vec<Arg> = args
            .into_iter()
            .map(|arg| match arg {
                Arg::Bytes(buffer) => Arg::Bytes(buffer.into_read_only()),
                text @ Arg::Text(_) => text,
            })
            .collect();
        let Data::Tensor(loaded) = Pickled::read(version, &read_only)
            .and_then(Pickled::load)
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(loaded, map);
        for block in loaded.blocks() {
            assert!(
                !block.values().buffer().is_writable(),
                "version {version}: a block of {} samples is writable",
                block.samples().count()
            );
        }
    }
    assert_eq!(versions, [0, 2]);
}
