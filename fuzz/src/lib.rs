//! Helpers shared by the fuzz targets: buffers at chosen alignments, and
//! comparisons of load outcomes.

use blockmap::{Buffer, Data, Kind, Result};

/// `bytes` copied into memory blockmap owns (64-byte aligned).
pub fn aligned(bytes: &[u8]) -> Buffer {
    Buffer::copy_from(bytes).expect("small allocation")
}

/// `bytes` copied to an odd address and made read-only, as a transport may
/// hand them: loads must copy them (never read through a misaligned typed
/// pointer) and keep them read-only.
pub fn misaligned_read_only(bytes: &[u8]) -> Buffer {
    let mut shifted = vec![0u8; bytes.len() + 1];
    shifted[1..].copy_from_slice(bytes);
    aligned(&shifted)
        .slice(1, bytes.len())
        .expect("in bounds")
        .into_read_only()
}

/// Whether two loaded objects hold the same thing.
pub fn same(a: &Data, b: &Data) -> bool {
    match (a, b) {
        (Data::Tensor(a), Data::Tensor(b)) => a == b && a.info() == b.info(),
        (Data::Block(a), Data::Block(b)) => a == b,
        (Data::Labels(a), Data::Labels(b)) => a == b,
        _ => false,
    }
}

/// Two loads of the same bytes that may differ only in the memory they
/// view must both fail or both give the same object.
pub fn assert_same_outcome(a: &Result<Data>, b: &Result<Data>, what: &str) {
    match (a, b) {
        (Ok(a), Ok(b)) => assert!(same(a, b), "{what}: different objects loaded"),
        (Err(_), Err(_)) => {}
        (a, b) => panic!(
            "{what}: one load failed and not the other: {:?} / {:?}",
            a.as_ref().err(),
            b.as_ref().err()
        ),
    }
}

/// Whether every array and labels of `data` views read-only memory.
pub fn all_read_only(data: &Data) -> bool {
    fn block(b: &blockmap::TensorBlock) -> bool {
        !b.values().buffer().is_writable()
            && labels(b.samples())
            && b.components().iter().all(labels)
            && labels(b.properties())
            && b.gradients().values().all(block)
    }
    fn labels(labels: &blockmap::Labels) -> bool {
        !labels.values().buffer().is_writable()
    }
    match data {
        Data::Tensor(map) => labels(map.keys()) && map.blocks().iter().all(block),
        Data::Block(b) => block(b),
        Data::Labels(l) => labels(l),
    }
}

/// Whether no array or labels of `data` is writable while viewing the
/// memory of `input` (read-only memory must never become writable; arrays
/// in new memory, such as inflated DEFLATE entries, may be writable).
pub fn no_writable_view_of(data: &Data, input: &Buffer) -> bool {
    let region = input.as_ptr() as usize..input.as_ptr() as usize + input.len();
    let ok = |buffer: &Buffer| {
        !(buffer.is_writable()
            && !buffer.is_empty()
            && region.contains(&(buffer.as_ptr() as usize)))
    };
    fn block(b: &blockmap::TensorBlock, ok: &dyn Fn(&Buffer) -> bool) -> bool {
        ok(b.values().buffer())
            && ok(b.samples().values().buffer())
            && b.components().iter().all(|c| ok(c.values().buffer()))
            && ok(b.properties().values().buffer())
            && b.gradients().values().all(|g| block(g, ok))
    }
    match data {
        Data::Tensor(map) => {
            ok(map.keys().values().buffer()) && map.blocks().iter().all(|b| block(b, &ok))
        }
        Data::Block(b) => block(b, &ok),
        Data::Labels(l) => ok(l.values().buffer()),
    }
}

/// Saving what was loaded and loading it again gives the same object.
pub fn assert_round_trip(data: &Data, kind: Kind) {
    let saved = blockmap::io::save_buffer(data.as_ref()).expect("a loaded object can be saved");
    let again = blockmap::io::load_buffer(saved, kind).expect("a saved object loads");
    assert!(same(data, &again), "the saved object loads differently");
}
