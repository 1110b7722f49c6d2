//! Dataset files of format version 2 (`dataset/v2.rs`): the input is a
//! whole file, written to a scratch path and opened (the trailer and
//! commit record, or the recovery walk), then every field of every entry
//! read, every column and the checksum. Whatever the bytes, the outcome is
//! a dataset or an error, never a crash; what reads saves as `.mts` and
//! loads back equal.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use blockmap::dataset::Dataset;
use blockmap::{io, DataRef, Kind, MapMode};
use libfuzzer_sys::fuzz_target;

/// The scratch file of this process.
fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("blockmap-fuzz-dataset-{}", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let path = scratch();
    std::fs::write(path, data).expect("the scratch file is written");
    let Ok(dataset) = Dataset::open(path, MapMode::ReadOnly) else {
        return;
    };
    let schema = dataset.schema();
    for (name, _) in &schema.columns {
        let _ = dataset.column(name);
    }
    for field in 0..schema.fields.len() {
        let _ = dataset.n_samples(field);
    }
    let _ = dataset.checksum(dataset.len());
    for i in 0..dataset.len() {
        let index = i64::try_from(i).expect("an index");
        for field in 0..schema.fields.len() {
            if let Ok(map) = dataset.get_field(index, field, None) {
                let saved = io::save_buffer(DataRef::Tensor(&map)).expect("a map read saves");
                match io::load_buffer(saved, Kind::Tensor) {
                    Ok(blockmap::Data::Tensor(again)) => assert!(again == map),
                    other => panic!("a saved map does not load back: {other:?}"),
                }
            }
        }
    }
});
