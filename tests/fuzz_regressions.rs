//! Inputs found by fuzzing (see `fuzz/` and `tests/data/fuzz/README.md`):
//! every committed input goes through every entry point it could reach,
//! none may panic, abort or exhaust memory, and each finding's own test
//! checks what the input is now refused with.

use std::io::Cursor;
use std::path::PathBuf;

use blockmap::io;
use blockmap::{pickle, Buffer, Error, Result};
use blockmap::{Data, Kind};

fn folder(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fuzz")
        .join(target)
}

fn input(target: &str, name: &str) -> Vec<u8> {
    std::fs::read(folder(target).join(name)).unwrap()
}

/// Every committed input of a fuzz target, with its name.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(folder(target)) else {
        return Vec::new();
    };
    let mut inputs: Vec<_> = entries
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    inputs.sort();
    inputs
}

/// The bytes as an archive or NPY file, through every loader and kind.
fn load_every_way(bytes: &[u8]) -> Vec<Result<Data>> {
    let mut results = Vec::new();
    for kind in [Kind::Tensor, Kind::Block, Kind::Labels] {
        let buffer = || Buffer::copy_from(bytes).unwrap();
        results.push(io::load_buffer_checked(buffer(), kind, false));
        results.push(io::load_buffer(buffer(), kind));
        results.push(io::load(Cursor::new(bytes), kind));
    }
    results
}

/// The header and buffers of a `pickle_load` input.
fn pickle_parts(bytes: &[u8]) -> (&[u8], Vec<Buffer>) {
    const SEPARATOR: &[u8] = b"\n--buffer--\n";
    let mut parts = Vec::new();
    let mut rest = bytes;
    while let Some(at) = rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
        parts.push(&rest[..at]);
        rest = &rest[at + SEPARATOR.len()..];
    }
    parts.push(rest);
    let buffers = parts[1..]
        .iter()
        .map(|part| Buffer::copy_from(part).unwrap())
        .collect();
    (parts[0], buffers)
}

#[test]
fn every_input_is_handled() {
    for target in ["npy_header", "load_archive"] {
        for (_, bytes) in inputs(target) {
            load_every_way(&bytes);
        }
    }
    for (_, bytes) in inputs("pickle_load") {
        let (header, buffers) = pickle_parts(&bytes);
        let _ = pickle::load(header, buffers);
    }
    for (name, bytes) in inputs("dataset_v2") {
        read_dataset(&name, &bytes);
    }
}

/// The bytes as a dataset file: opened, every field of every entry, the
/// columns and the checksum read (`Ok` or an error, never a panic).
fn read_dataset(name: &str, bytes: &[u8]) {
    use blockmap::dataset::Dataset;
    let dir = blockmap::fixtures::TempDir::new("fuzz-regression");
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    if let Ok(dataset) = Dataset::open(&path, blockmap::MapMode::ReadOnly) {
        let schema = dataset.schema();
        for (column, _) in &schema.columns {
            let _ = dataset.column(column);
        }
        let _ = dataset.checksum(dataset.len());
        for i in 0..dataset.len() {
            for field in 0..schema.fields.len() {
                let _ = dataset.get_field(i64::try_from(i).unwrap(), field, None);
            }
        }
    }
    let _ = blockmap::dataset::verify(&path);
}

fn assert_invalid(result: Result<Data>, expected: &str) {
    match result {
        Err(error @ (Error::Invalid(_) | Error::Format(_))) => {
            let message = error.to_string();
            assert!(message.contains(expected), "{message}");
        }
        other => panic!("expected an error about '{expected}', got {other:?}"),
    }
}

#[test]
fn labels_without_dimensions_with_many_entries() {
    // `'descr': [], 'shape': (1000000000000,)`: no data, 10^12 entries
    let bytes = input("npy_header", "labels-without-dimensions-1e12-entries");
    assert_invalid(
        io::load_buffer(Buffer::copy_from(&bytes).unwrap(), Kind::Labels),
        "twice",
    );
    // one entry without dimensions is still fine
    let one = bytes
        .windows(15)
        .position(|w| w == b"1000000000000,)")
        .map(|at| [&bytes[..at], b"1,)".as_slice(), &bytes[at + 15..]].concat())
        .unwrap();
    let one = [
        &one[..8],
        &u16::try_from(one.len() - 10).unwrap().to_le_bytes(),
        &one[10..],
    ]
    .concat();
    let Data::Labels(labels) =
        io::load_buffer(Buffer::copy_from(&one).unwrap(), Kind::Labels).unwrap()
    else {
        panic!("labels were loaded")
    };
    assert_eq!((labels.count(), labels.size()), (1, 0));
    // the same through a pickle header
    let header = br#"{"kind":"labels","labels":{"names":[],"count":1000000000000,"dtype":"<i4"}}"#;
    assert_invalid(pickle::load(header, vec![Buffer::empty()]), "twice");
}
