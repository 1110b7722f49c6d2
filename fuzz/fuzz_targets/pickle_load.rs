//! The pickle wire format, every version the reader accepts, through the
//! reconstructor's dispatch (`blockmap::pickle::Pickled::read`, then
//! `Pickled::load`): out of band (versions 3 and 1: a JSON header and
//! buffers) and in band (version 0: a kind and the `.mts` archive, or a
//! bare NPY file for labels; version 2: a kind and the archive in pieces).
//!
//! Input encoding: the first byte is the version (the reconstructor's first
//! argument: 0 to 3 are read, any other is refused), then the arguments
//! that follow it, separated by the line `\n--buffer--\n`: the header and
//! each buffer (versions 1 and 3), or the kind (`tensor`, `block`,
//! `labels`) and the archive or its pieces (versions 0 and 2). A valid
//! header never contains the separator (JSON strings cannot hold a raw
//! newline, and `--buffer--` is not JSON). `fuzz/seed.py` writes the seeds
//! this way: `__reduce_ex__` of each protocol, and the stored pickles of
//! every version (`tests/data/pickle/`).
//!
//! Each input is loaded twice: with buffers in aligned writable memory
//! (viewed) and in misaligned read-only memory (copied, staying
//! read-only); both must agree. What loads is dumped and loaded again.

#![no_main]

use blockmap::pickle::{self, Arguments, Pickled};
use blockmap::{Buffer, Data, Error, Result};
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

/// The arguments after the version, as a transport would hand them: each
/// part a string where one is asked for (a kind), else a buffer made by
/// `make`.
struct Parts<'a> {
    parts: Vec<&'a [u8]>,
    make: fn(&[u8]) -> Buffer,
}

impl Arguments for Parts<'_> {
    type Error = Error;

    fn count(&self) -> usize {
        self.parts.len()
    }

    fn text(&self, index: usize) -> Result<Option<String>> {
        Ok(std::str::from_utf8(self.parts[index])
            .ok()
            .map(str::to_string))
    }

    fn buffer(&self, index: usize, _in_band: bool) -> Result<Buffer> {
        Ok((self.make)(self.parts[index]))
    }
}

fn load(version: u8, parts: &[&[u8]], make: fn(&[u8]) -> Buffer) -> Result<Data> {
    let arguments = Parts {
        parts: parts.to_vec(),
        make,
    };
    Pickled::read(i64::from(version), &arguments).and_then(Pickled::load)
}

fuzz_target!(|data: &[u8]| {
    let Some((&version, rest)) = data.split_first() else {
        return;
    };
    let parts = split(rest);
    let viewed = load(version, &parts, aligned);
    let copied = load(version, &parts, misaligned_read_only);
    assert_same_outcome(&viewed, &copied, "aligned / misaligned buffers");
    if let Ok(loaded) = &copied {
        assert!(
            all_read_only(loaded),
            "read-only buffers gave a writable array"
        );
    }
    if let Ok(loaded) = &viewed {
        let (header, buffers) = pickle::dump(loaded.as_ref()).expect("a loaded object dumps");
        let again = pickle::load(&header, buffers).expect("a dumped object loads");
        assert!(same(loaded, &again), "the dumped object loads differently");
    }
});
