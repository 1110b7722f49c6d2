//! The pickle wire format, version 1 (`blockmap::pickle::load`): a JSON
//! header and buffers.
//!
//! Input encoding: the header, then each buffer, separated by the line
//! `\n--buffer--\n` (a valid header never contains it: JSON strings cannot
//! hold a raw newline, and `--buffer--` is not JSON). `fuzz/seed.py`
//! writes the seeds this way from `__reduce_ex__(5)`.
//!
//! Each input is loaded twice: with buffers in aligned writable memory
//! (viewed) and in misaligned read-only memory (copied, staying
//! read-only); both must agree. What loads is dumped and loaded again.

#![no_main]

use blockmap::pickle;
use blockmap::Buffer;
use blockmap_fuzz::{aligned, all_read_only, assert_same_outcome, misaligned_read_only, same};
use libfuzzer_sys::fuzz_target;

const SEPARATOR: &[u8] = b"\n--buffer--\n";

fn split(mut data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    while let Some(at) = data
        .windows(SEPARATOR.len())
        .position(|window| window == SEPARATOR)
    {
        parts.push(&data[..at]);
        data = &data[at + SEPARATOR.len()..];
    }
    parts.push(data);
    parts
}

fuzz_target!(|data: &[u8]| {
    let parts = split(data);
    let (header, buffers) = parts.split_first().expect("at least one part");
    let viewed = pickle::load(header, buffers.iter().map(|b| aligned(b)).collect());
    let copied = pickle::load(
        header,
        buffers.iter().map(|b| misaligned_read_only(b)).collect(),
    );
    assert_same_outcome(&viewed, &copied, "aligned / misaligned buffers");
    if let Ok(loaded) = &copied {
        assert!(
            all_read_only(loaded),
            "read-only buffers gave a writable array"
        );
    }
    if let Ok(loaded) = &viewed {
        let (header, buffers) = pickle::dump(loaded.as_ref()).expect("a loaded object dumps");
        let buffers: Vec<Buffer> = buffers;
        let again = pickle::load(&header, buffers).expect("a dumped object loads");
        assert!(same(loaded, &again), "the dumped object loads differently");
    }
});
