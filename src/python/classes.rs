//! What each Python class holds. The classes' methods are in `labels.rs`,
//! `block.rs` and `tensor.rs`; the conversions between them and the core's
//! [`Data`](crate::data::Data) in `convert.rs`.

use pyo3::prelude::*;

use crate::block::TensorBlock;
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// Named int32 columns, one unique row per entry.
///
/// ``Labels(names, values, assume_unique=False)``: ``names`` is a string or a
/// list of strings (valid identifiers, unique); ``values`` a 2-D integer
/// array of shape ``(count, len(names))``. The values are copied once into
/// int32 memory owned by the Labels, which never changes afterwards:
/// ``.values`` is a read-only view of it. With ``assume_unique=True`` the
/// check that rows are unique is skipped.
#[pyclass(name = "Labels", module = "blockmap", frozen, eq, hash)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PyLabels {
    pub labels: Labels,
}

impl From<Labels> for PyLabels {
    fn from(labels: Labels) -> Self {
        PyLabels { labels }
    }
}

/// One entry of a :class:`Labels`.
#[pyclass(name = "LabelsEntry", module = "blockmap", frozen)]
#[derive(Debug)]
pub struct PyLabelsEntry {
    pub labels: Labels,
    pub index: usize,
}

impl PyLabelsEntry {
    /// Entry `index` of `labels`; `index < labels.count()`.
    pub fn new(labels: Labels, index: usize) -> Self {
        debug_assert!(index < labels.count());
        PyLabelsEntry { labels, index }
    }

    /// The entry's values.
    pub fn values(&self) -> &[i32] {
        self.labels.row(self.index)
    }

    /// The names of its dimensions.
    pub fn names(&self) -> &[String] {
        self.labels.names()
    }
}

/// Where a Python block object comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// built by the user (or a copy): may get gradients
    Standalone,
    /// a block of a `TensorMap`
    MapBlock,
    /// a gradient of another block
    Gradient,
}

/// A labeled N-d array with axes ``[samples, *components, properties]``.
///
/// ``TensorBlock(values, samples, components, properties)``. ``values`` is
/// kept without a copy when it is a C-contiguous, aligned, native-byte-order
/// numpy array: the block holds a buffer export of it, and in-place edits
/// through either side are seen by both. Any other input (non-contiguous,
/// misaligned, big-endian, a list) is copied once into such an array.
#[pyclass(name = "TensorBlock", module = "blockmap")]
#[derive(Debug)]
pub struct PyTensorBlock {
    pub block: TensorBlock,
    pub origin: Origin,
}

impl PyTensorBlock {
    /// A Python block over `block`, coming from `origin`.
    pub fn new_view(block: TensorBlock, origin: Origin) -> Self {
        PyTensorBlock { block, origin }
    }
}

/// A set of :class:`TensorBlock`, one per entry of ``keys``.
///
/// ``TensorMap(keys, blocks)``. Every block must have the same sample,
/// component and property names and the same gradients. Unlike
/// metatensor-core, the blocks are not consumed: the block objects stay
/// usable and share their array memory with the map.
#[pyclass(name = "TensorMap", module = "blockmap")]
#[derive(Debug)]
pub struct PyTensorMap {
    pub map: TensorMap,
}
