//! Loading whole `.mts` archives (TensorMap and TensorBlock ZIP archives)
//! and bare NPY files (Labels), through every entry point: from memory
//! with and without CRC checks (`load_buffer_checked`, `load_buffer`), from
//! misaligned read-only memory, and through a reader (`load`).
//!
//! Loads that differ only in where the bytes are must agree; whatever
//! loads must save and load again to the same object.

#![no_main]

use std::io::Cursor;

use blockmap::io::{self, npy};
use blockmap::Kind;
use blockmap_fuzz::{
    aligned, assert_round_trip, assert_same_outcome, misaligned_read_only, no_writable_view_of,
    same,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let kinds: &[Kind] = if data.starts_with(npy::MAGIC) {
        &[Kind::Labels]
    } else {
        &[Kind::Tensor, Kind::Block]
    };
    for &kind in kinds {
        // without CRC checks (as version 0 pickles load) the fuzzer's
        // mutations reach the NPY headers and the data model
        let viewed = io::load_buffer_checked(aligned(data), kind, false);
        let read_only = misaligned_read_only(data);
        let copied = io::load_buffer_checked(read_only.clone(), kind, false);
        assert_same_outcome(&viewed, &copied, "unchecked, aligned / misaligned");
        if let Ok(loaded) = &copied {
            assert!(
                no_writable_view_of(loaded, &read_only),
                "read-only memory was made writable"
            );
        }
        let read_only = aligned(data).into_read_only();
        if let Ok(loaded) = io::load_buffer_checked(read_only.clone(), kind, false) {
            assert!(
                no_writable_view_of(&loaded, &read_only),
                "read-only memory was made writable"
            );
        }
        if let Ok(loaded) = &viewed {
            assert_round_trip(loaded, kind);
        }

        // with CRC checks, from memory and through a reader
        let checked = io::load_buffer(aligned(data), kind);
        let read = io::load(Cursor::new(data), kind);
        for (result, what) in [(&checked, "load_buffer"), (&read, "load")] {
            if let Ok(loaded) = result {
                let Ok(unchecked) = &viewed else {
                    panic!("{what} succeeded where the unchecked load failed");
                };
                assert!(same(loaded, unchecked), "{what} loaded something else");
            }
        }
    }
});
