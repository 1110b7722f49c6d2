//! A valid file mutated while a map views it (the safetensors-style
//! "another writer" fuzzer): the input says where to cut the file short and
//! which bytes to overwrite, applied to a valid archive after it was mapped.
//! Reading every value of the map afterwards must not crash the process
//! (a truncation reads as zeros, see `buffer/guard.rs`), the labels it
//! validated must not change, and saving or pickling it must either work or
//! fail with an I/O error, never panic.

#![no_main]

use std::io::{Seek, SeekFrom, Write};
use std::sync::OnceLock;

use blockmap::{fixtures, io, pickle, DType, Data, DataRef, Kind, MapMode};
use libfuzzer_sys::fuzz_target;

/// The valid archive every run starts from.
fn archive() -> &'static [u8] {
    static ARCHIVE: OnceLock<Vec<u8>> = OnceLock::new();
    ARCHIVE.get_or_init(|| {
        let map = fixtures::tensor(DType::F8);
        io::save_buffer(DataRef::Tensor(&map))
            .expect("the fixture saves")
            .to_vec()
            .expect("the archive copies")
    })
}

fn read_everything(data: &Data) -> u64 {
    let Data::Tensor(map) = data else {
        return 0;
    };
    let mut sum = 0u64;
    // the mapped values are read by raw copies, never as a `&[u8]`: the
    // file changes under them (the aliasing rule, buffer/mod.rs)
    let mut add = |bytes: blockmap::buffer::RawBytes<'_>| {
        let _ = bytes.for_each_chunk(|chunk| {
            sum = chunk
                .iter()
                .fold(sum, |sum, &byte| sum.wrapping_add(u64::from(byte)));
            Ok(())
        });
    };
    for block in map.blocks() {
        add(block.values().bytes());
        for gradient in block.gradients().values() {
            add(gradient.values().bytes());
        }
    }
    sum
}

fuzz_target!(|input: &[u8]| {
    let archive = archive();
    let path = std::env::temp_dir().join(format!("blockmap-fuzz-mapped-{}", std::process::id()));
    std::fs::write(&path, archive).expect("a temporary file");
    let Ok(mapped) = io::load_path(&path, Kind::Tensor, Some(MapMode::ReadOnly)) else {
        panic!("the valid archive maps");
    };
    let Data::Tensor(map) = &mapped else {
        panic!("a map was saved")
    };
    let keys = map.keys().clone();
    let samples = map.blocks()[0].samples().value_bytes().to_vec();

    // the other writer: cut the file at the first two bytes' offset, then
    // write the rest of the input as (offset, byte) pairs
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("the temporary file");
    if let [high, low, rest @ ..] = input {
        let cut = (usize::from(*high) << 8 | usize::from(*low)) * archive.len() / 65536;
        file.set_len(cut as u64).expect("truncate");
        for pair in rest.chunks_exact(3) {
            let offset = (usize::from(pair[0]) << 8 | usize::from(pair[1])) % archive.len();
            let _ = file.seek(SeekFrom::Start(offset as u64));
            let _ = file.write_all(&[pair[2]]);
        }
    }
    drop(file);

    let _ = read_everything(&mapped);
    assert_eq!(map.keys(), &keys, "validated keys changed");
    assert_eq!(
        map.blocks()[0].samples().value_bytes(),
        &samples[..],
        "validated samples changed"
    );
    match io::save_buffer(DataRef::Tensor(map)) {
        Ok(_) | Err(blockmap::Error::Io { .. }) => {}
        Err(other) => panic!("saving a mapped map gave {other:?}"),
    }
    match pickle::dump(DataRef::Tensor(map)) {
        Ok(_) | Err(blockmap::Error::Io { .. }) => {}
        Err(other) => panic!("pickling a mapped map gave {other:?}"),
    }
    let _ = std::fs::remove_file(&path);
});
