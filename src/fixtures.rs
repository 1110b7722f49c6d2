//! Small maps, blocks and labels for the tests of the core, its integration
//! tests (`tests/*.rs`, through the `fixtures` feature) and the fuzzers'
//! seeds, and the temporary directories of the tests that write files: one
//! place instead of a copy per test module.

use crate::array::Array;
use crate::block::TensorBlock;
use crate::buffer::Buffer;
use crate::dtype::DType;
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// Labels with `names` and row-major `values`.
///
/// # Panics
///
/// When the labels are invalid: fixtures are valid by construction.
pub fn labels(names: &[&str], values: &[i32]) -> Labels {
    Labels::new(names.to_vec(), values).expect("valid fixture labels")
}

/// An array of `dtype` and `shape` whose bytes follow a fixed pattern (and
/// are 0 or 1 for booleans), in memory blockmap owns.
///
/// # Panics
///
/// When the shape is too large to allocate.
pub fn filled(dtype: DType, shape: &[usize]) -> Array {
    let n: usize = shape.iter().product::<usize>() * dtype.size();
    let bytes: Vec<u8> = (0..n)
        .map(|i| {
            let byte = u8::try_from(i * 7 % 251).expect("below 251");
            if dtype == DType::B1 {
                byte & 1
            } else {
                byte
            }
        })
        .collect();
    let buffer = Buffer::copy_from(&bytes).expect("a small allocation");
    Array::new(dtype, shape.to_vec(), buffer).expect("a matching buffer")
}

/// A block of `dtype` with samples `["system", "atom"]` (3), one component
/// `o3_mu` (2), properties `n` (4), a `positions` gradient with an extra
/// `xyz` component, which has a `cell` gradient of its own.
///
/// # Panics
///
/// Never: the block is valid (the io tests round-trip it for every dtype).
pub fn block_with_nested_gradients(dtype: DType) -> TensorBlock {
    let mut block = TensorBlock::new(
        filled(dtype, &[3, 2, 4]),
        labels(&["system", "atom"], &[0, 0, 0, 1, 1, 0]),
        vec![labels(&["o3_mu"], &[-1, 1])],
        Labels::range("n", 4).expect("a small range"),
    )
    .expect("a valid block");
    let mut gradient = TensorBlock::new(
        filled(dtype, &[2, 3, 2, 4]),
        labels(&["sample", "atom"], &[0, 0, 2, 1]),
        vec![labels(&["xyz"], &[0, 1, 2]), labels(&["o3_mu"], &[-1, 1])],
        Labels::range("n", 4).expect("a small range"),
    )
    .expect("a valid gradient");
    let nested = TensorBlock::new(
        filled(dtype, &[1, 3, 2, 4]),
        labels(&["sample"], &[1]),
        vec![labels(&["xyz"], &[0, 1, 2]), labels(&["o3_mu"], &[-1, 1])],
        Labels::range("n", 4).expect("a small range"),
    )
    .expect("a valid gradient");
    gradient
        .add_gradient("cell", nested)
        .expect("a valid nested gradient");
    block
        .add_gradient("positions", gradient)
        .expect("a valid gradient");
    block
}

/// Two [`block_with_nested_gradients`] of `dtype` under keys
/// `["o3_lambda", "center_type"]`, with info `origin = tests`.
///
/// # Panics
///
/// Never: the map is valid.
pub fn tensor(dtype: DType) -> TensorMap {
    let keys = labels(&["o3_lambda", "center_type"], &[0, 1, 1, 6]);
    let blocks = vec![
        block_with_nested_gradients(dtype),
        block_with_nested_gradients(dtype),
    ];
    let mut map = TensorMap::new(keys, blocks).expect("a valid map");
    map.set_info("origin".into(), "tests".into())
        .expect("a small info");
    map
}

/// The smallest map with everything: one float64 block (2 samples `s`, 3
/// properties `p`, values 1..6) with a `positions` gradient (one sample,
/// one component `d` of 2, values 0.5), key `k = 7`, info `a = b`. Its
/// pickle has 7 buffers: keys, values, samples, properties, gradient
/// values, gradient samples, gradient component.
///
/// # Panics
///
/// Never: the map is valid.
pub fn small_map() -> TensorMap {
    let mut block = TensorBlock::new(
        Array::from_slice(vec![2, 3], &[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]).expect("6 values"),
        labels(&["s"], &[0, 1]),
        vec![],
        Labels::range("p", 3).expect("a small range"),
    )
    .expect("a valid block");
    let gradient = TensorBlock::new(
        Array::from_slice(vec![1, 2, 3], &[0.5f64; 6]).expect("6 values"),
        labels(&["sample", "xyz"], &[1, 0]),
        vec![labels(&["d"], &[0, 1])],
        Labels::range("p", 3).expect("a small range"),
    )
    .expect("a valid gradient");
    block
        .add_gradient("positions", gradient)
        .expect("a valid gradient");
    let mut map = TensorMap::new(labels(&["k"], &[7]), vec![block]).expect("a valid map");
    map.set_info("a".into(), "b".into()).expect("a small info");
    map
}

/// A map of two float64 blocks with `positions` gradients, the second
/// block and its gradient empty (no samples): empty buffers need no memory.
///
/// # Panics
///
/// Never: the map is valid.
pub fn map_with_an_empty_block() -> TensorMap {
    let mut block = TensorBlock::new(
        Array::from_slice(vec![2, 3], &[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]).expect("6 values"),
        Labels::range("s", 2).expect("a small range"),
        vec![],
        Labels::range("p", 3).expect("a small range"),
    )
    .expect("a valid block");
    let gradient = TensorBlock::new(
        Array::from_slice(vec![1, 3], &[0.5f64; 3]).expect("3 values"),
        labels(&["sample"], &[1]),
        vec![],
        Labels::range("p", 3).expect("a small range"),
    )
    .expect("a valid gradient");
    block
        .add_gradient("positions", gradient)
        .expect("a valid gradient");
    let empty_block = |sample: &str| {
        TensorBlock::new(
            Array::from_slice(vec![0, 3], &[] as &[f64]).expect("no values"),
            labels(&[sample], &[]),
            vec![],
            Labels::range("p", 3).expect("a small range"),
        )
        .expect("a valid empty block")
    };
    let mut empty = empty_block("s");
    empty
        .add_gradient("positions", empty_block("sample"))
        .expect("a valid empty gradient");
    TensorMap::new(
        Labels::range("k", 2).expect("a small range"),
        vec![block, empty],
    )
    .expect("a valid map")
}

/// A block shaped like one of the benchmark workload's, over `values`
/// (`n_samples x 3 x 5` float64): samples `["system", "atom"]`, component
/// `o3_mu` = -1, 0, 1, properties `n` = 0..5, and a zero `positions`
/// gradient of two samples with an extra `xyz` component.
///
/// # Panics
///
/// When `values` does not have that shape.
pub fn workload_block(values: Array) -> TensorBlock {
    let n_samples = i32::try_from(values.shape()[0]).expect("a small block");
    let samples: Vec<i32> = (0..n_samples).flat_map(|i| [i / 4, i % 4]).collect();
    let o3_mu = labels(&["o3_mu"], &[-1, 0, 1]);
    let properties = Labels::range("n", 5).expect("a small range");
    let mut block = TensorBlock::new(
        values,
        labels(&["system", "atom"], &samples),
        vec![o3_mu.clone()],
        properties.clone(),
    )
    .expect("values of shape (n, 3, 5)");
    let gradient = TensorBlock::new(
        Array::zeros(DType::F8, vec![2, 3, 3, 5]).expect("a small array"),
        labels(&["sample", "system", "atom"], &[0, 0, 1, 1, 0, 2]),
        vec![labels(&["xyz"], &[0, 1, 2]), o3_mu],
        properties,
    )
    .expect("a valid gradient");
    block
        .add_gradient("positions", gradient)
        .expect("a valid gradient");
    block
}

/// A new, empty directory of its own in the system's temporary folder,
/// removed with everything in it when dropped (a test that panics drops
/// it too): the one place tests write their files.
#[derive(Debug)]
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    /// A directory named after `name`, this process and a counter: unique
    /// across the threads of one test binary and across processes.
    ///
    /// # Panics
    ///
    /// When the temporary folder cannot be written.
    pub fn new(name: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static MADE: AtomicUsize = AtomicUsize::new(0);
        loop {
            let n = MADE.fetch_add(1, Ordering::Relaxed);
            let path =
                std::env::temp_dir().join(format!("blockmap-{name}-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return TempDir(path),
                // left by an earlier process of the same id: another name
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => panic!("cannot make {}: {e}", path.display()),
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    /// The path of `name` in the directory.
    pub fn join(&self, name: impl AsRef<std::path::Path>) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::TempDir;

    #[test]
    fn temporary_directories_are_apart_and_removed_whole() {
        let (a, b) = (TempDir::new("fixture"), TempDir::new("fixture"));
        assert_ne!(a.path(), b.path());
        std::fs::create_dir(a.join("inner")).unwrap();
        std::fs::write(a.join("inner").join("file"), b"bytes").unwrap();
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists());
        // a panicking test drops it too
        let dir = TempDir::new("fixture");
        let path = dir.path().to_path_buf();
        std::panic::catch_unwind(move || {
            let _dir = dir;
            panic!("a failing test");
        })
        .unwrap_err();
        assert!(!path.exists() && b.path().is_dir());
    }
}
