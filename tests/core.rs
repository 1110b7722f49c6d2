//! Integration tests of the core through its public API: a small map shaped
//! like the benchmark workload, built over foreign memory, and the sharing
//! rules between maps, blocks and buffers.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use blockmap::{fixtures, Array, Buffer, DType, Labels, OwnerKind, TensorBlock, TensorMap};

/// Memory owned by someone else, recording when it is released.
struct Foreign {
    data: Vec<f64>,
    released: Arc<AtomicBool>,
}

impl Drop for Foreign {
    fn drop(&mut self) {
        self.released.store(true, Ordering::SeqCst);
    }
}

fn foreign_array(shape: Vec<usize>, released: &Arc<AtomicBool>) -> Array {
    let n = shape.iter().product();
    let owner = Box::new(Foreign {
        data: (0..n)
            .map(|i| f64::from(u32::try_from(i).expect("a small test array")))
            .collect(),
        released: Arc::clone(released),
    });
    let ptr = NonNull::new(owner.data.as_ptr().cast_mut().cast::<u8>()).unwrap();
    let len = n * 8;
    // SAFETY: the Vec's heap memory holds `len` bytes, does not move when the
    // box moves, and lives until the owner is dropped; nothing writes to it.
    let buffer = unsafe { Buffer::from_foreign(ptr, len, false, owner) };
    Array::new(DType::F8, shape, buffer).unwrap()
}

fn labels(names: &[&str], rows: impl IntoIterator<Item = Vec<i32>>) -> Labels {
    let values: Vec<i32> = rows.into_iter().flatten().collect();
    fixtures::labels(names, &values)
}

fn workload_block(n_samples: usize, released: &Arc<AtomicBool>) -> TensorBlock {
    fixtures::workload_block(foreign_array(vec![n_samples, 3, 5], released))
}

#[test]
fn a_map_over_foreign_memory_keeps_it_alive_and_releases_it() {
    let released = Arc::new(AtomicBool::new(false));
    let keys = labels(&["o3_lambda", "center_type"], [vec![0, 1], vec![1, 1]]);
    let blocks = vec![workload_block(8, &released), workload_block(8, &released)];
    let input_ptr = blocks[0].values().buffer().as_ptr();
    let map = TensorMap::new(keys, blocks).unwrap();

    let values = map.blocks()[0].values();
    assert_eq!(
        values.buffer().as_ptr(),
        input_ptr,
        "the map views the input"
    );
    assert_eq!(values.buffer().owner_kind(), OwnerKind::Foreign);
    // bit-exact on purpose: element 7 was written as exactly 7.0
    let seventh = values.to_vec::<f64>().unwrap()[7];
    assert_eq!(seventh.to_bits(), 7.0f64.to_bits());
    assert_eq!(map.sample_names(), vec!["system", "atom"]);
    assert_eq!(map.component_names(), vec!["o3_mu"]);

    // a clone of the map shares everything; dropping the original keeps the data
    let clone = map.clone();
    drop(map);
    assert!(!released.load(Ordering::SeqCst));
    assert_eq!(clone.blocks()[1].values().buffer().as_ptr() as usize % 8, 0);
    drop(clone);
    assert!(
        released.load(Ordering::SeqCst),
        "the last reference releases the owner"
    );
}

#[test]
fn deep_copies_own_their_memory() {
    let released = Arc::new(AtomicBool::new(false));
    let keys = labels(&["k"], [vec![0]]);
    let map = TensorMap::new(keys, vec![workload_block(4, &released)]).unwrap();
    let copy = map.deep_copy().unwrap();
    drop(map);
    assert!(
        released.load(Ordering::SeqCst),
        "the copy does not hold the input"
    );
    let values = copy.blocks()[0].values();
    assert_eq!(values.buffer().owner_kind(), OwnerKind::Rust);
    assert!(values.buffer().is_aligned_to(blockmap::ALIGNMENT));
    assert_eq!(values.to_vec::<f64>().unwrap()[..3], [0.0, 1.0, 2.0]);
}

#[test]
fn errors_name_what_is_wrong() {
    let released = Arc::new(AtomicBool::new(false));
    let keys = labels(&["k"], [vec![0], vec![1]]);
    let mut other = TensorBlock::new(
        Array::zeros(DType::F8, vec![4, 3, 5]).unwrap(),
        labels(&["system", "atom"], (0..4).map(|i| vec![0, i])),
        vec![labels(&["o3_mu"], [vec![-1], vec![0], vec![1]])],
        Labels::range("n", 5).unwrap(),
    )
    .unwrap();
    let err = TensorMap::new(
        keys.clone(),
        vec![workload_block(4, &released), other.clone()],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("block 1 (key {k=1})"), "{err}");
    assert!(
        err.contains("gradients [] differ from ['positions']"),
        "{err}"
    );

    let wrong = TensorBlock::new(
        Array::zeros(DType::F8, vec![1, 3, 5]).unwrap(),
        labels(&["sample"], [vec![9]]),
        vec![labels(&["o3_mu"], [vec![-1], vec![0], vec![1]])],
        Labels::range("n", 5).unwrap(),
    )
    .unwrap();
    let err = other
        .add_gradient("positions", wrong)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("gradient 'positions'") && err.contains("outside"),
        "{err}"
    );
}

#[test]
fn labels_from_a_foreign_buffer_own_a_copy() {
    let values: Vec<u8> = [0i32, 1, 1, 0]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    // writable memory someone else holds (as a numpy array's)
    let buffer = Buffer::copy_from(&values).unwrap();
    let labels =
        Labels::from_buffer(vec!["a".into(), "b".into()], 2, buffer.clone(), false).unwrap();
    assert_eq!(labels.position(&[1, 0]).unwrap(), Some(1));
    // validated means owned: the labels copied the bytes, so that nothing
    // the other holder writes afterwards can reach them
    assert_ne!(labels.values().buffer().as_ptr(), buffer.as_ptr());
    assert_eq!(labels.values().buffer().owner_kind(), OwnerKind::Rust);
    assert!(labels.values().buffer().is_private());
    assert!(Labels::from_buffer(vec!["a".into()], 3, buffer, false).is_err());
    // a moved-in owner nobody else can write is private: viewed in place
    let owned = Buffer::from_owner(values);
    let labels =
        Labels::from_buffer(vec!["a".into(), "b".into()], 2, owned.clone(), false).unwrap();
    assert_eq!(labels.values().buffer().as_ptr(), owned.as_ptr());
}
