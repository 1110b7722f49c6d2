//! What each Python class holds. The classes' methods are in `labels.rs`,
//! `entry.rs`, `block.rs` and `tensor.rs`; the conversions between them and
//! the core's [`Data`](crate::data::Data) in `convert.rs`.
//!
//! The structs stay here, below their methods, because the binding's
//! helpers that the methods call name every class: `convert.rs` turns any
//! of them into core data and back (used by `io.rs`, `pickle.rs` and
//! `shm.rs`), and `torch.rs`'s `_as_torch` rebuilds each. A struct in the
//! file of its methods would make those helpers and the methods use each
//! other (one cycle of eleven modules).
//!
//! A map or a block is a value that many threads read: every class is
//! frozen (no borrow flag, so no "already borrowed" errors), and a map or a
//! block holds its data as an immutable `ForkArc` behind a lock (a
//! [`SwapCell`], `cell.rs`) that is held only to take a snapshot (clone the `ForkArc`) or to swap in a new value.
//! Long operations (save, share, copy, pickle) work on a snapshot with the
//! GIL released and lock nobody out; the few that change the object
//! (`set_info`, `add_gradient`, `share_memory`) build the new value, then
//! swap it in.

use pyo3::prelude::*;

use super::cell::SwapCell;
use crate::arc::ForkArc;

use crate::block::TensorBlock;
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// The array type a map, a block or Labels gives back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Arrays {
    /// numpy arrays
    #[default]
    Numpy,
    /// torch tensors
    Torch,
}

impl Arrays {
    /// The name used by `to(arrays=...)`.
    pub fn name(self) -> &'static str {
        match self {
            Arrays::Numpy => "numpy",
            Arrays::Torch => "torch",
        }
    }
}

/// Named int32 columns, one unique row per entry.
///
/// ``Labels(names, values, assume_unique=False)``, as in metatensor-core:
/// ``names`` is a string (``""``: no names) or a sequence of strings (valid
/// identifiers, unique); ``values`` a 2-D numpy array of integers of shape
/// ``(count, len(names))`` (any array without entries means none). The
/// values are copied once into int32 memory owned by the Labels, which
/// never changes afterwards: ``.values`` is a read-only view of it. With
/// ``assume_unique=True`` the check that rows are unique is skipped.
///
/// Labels are immutable: every operation (``union``, ``select``,
/// ``insert``, ``rename``, ...) returns new Labels.
#[pyclass(name = "Labels", module = "blockmap", frozen, weakref)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PyLabels {
    pub labels: Labels,
    /// what `values` gives: numpy arrays, or torch tensors (copies)
    pub arrays: Arrays,
}

impl From<Labels> for PyLabels {
    fn from(labels: Labels) -> Self {
        PyLabels {
            labels,
            arrays: Arrays::Numpy,
        }
    }
}

impl PyLabels {
    /// `labels` giving values as `arrays`.
    pub fn with_arrays(labels: Labels, arrays: Arrays) -> Self {
        PyLabels { labels, arrays }
    }

    /// Other Labels derived from these, giving the same array type.
    pub fn derived(&self, labels: Labels) -> Self {
        PyLabels::with_arrays(labels, self.arrays)
    }
}

/// One entry of a :class:`Labels`.
#[pyclass(name = "LabelsEntry", module = "blockmap", frozen, weakref)]
#[derive(Debug)]
pub struct PyLabelsEntry {
    pub labels: Labels,
    pub index: usize,
    pub arrays: Arrays,
}

impl PyLabelsEntry {
    /// Entry `index` of `labels`; `index < labels.count()`.
    pub fn new(labels: Labels, index: usize) -> Self {
        debug_assert!(index < labels.count());
        PyLabelsEntry {
            labels,
            index,
            arrays: Arrays::Numpy,
        }
    }

    /// The same entry, giving values as `arrays`.
    #[must_use]
    pub fn with_arrays(mut self, arrays: Arrays) -> Self {
        self.arrays = arrays;
        self
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
#[pyclass(name = "TensorBlock", module = "blockmap", frozen, weakref)]
#[derive(Debug)]
pub struct PyTensorBlock {
    pub block: SwapCell<TensorBlock>,
    pub origin: Origin,
    /// for a gradient, the parameters leading to it from the block it was
    /// taken from (`["positions", "cell"]` for a gradient of a gradient)
    pub parameters: Vec<String>,
    /// what `values` (and the labels' values) are: numpy arrays or torch
    /// tensors
    pub arrays: Arrays,
}

impl PyTensorBlock {
    /// A Python block over `block`, coming from `origin`.
    pub fn new_view(block: TensorBlock, origin: Origin) -> Self {
        PyTensorBlock {
            block: SwapCell::new(block),
            origin,
            parameters: Vec::new(),
            arrays: Arrays::Numpy,
        }
    }

    /// A Python block over a gradient, reached through `parameters`.
    pub fn gradient_view(block: TensorBlock, parameters: Vec<String>) -> Self {
        PyTensorBlock {
            block: SwapCell::new(block),
            origin: Origin::Gradient,
            parameters,
            arrays: Arrays::Numpy,
        }
    }

    /// The same block, giving arrays as `arrays`.
    #[must_use]
    pub fn with_arrays(mut self, arrays: Arrays) -> Self {
        self.arrays = arrays;
        self
    }

    /// Labels of this block, giving values as its arrays.
    pub fn labels(&self, labels: &Labels) -> PyLabels {
        PyLabels::with_arrays(labels.clone(), self.arrays)
    }

    /// The block's current value.
    pub fn block(&self) -> ForkArc<TensorBlock> {
        self.block.get()
    }
}

/// A set of :class:`TensorBlock`, one per entry of ``keys``.
///
/// ``TensorMap(keys, blocks)``. Every block must have the same sample,
/// component and property names and the same gradients. Unlike
/// metatensor-core, the blocks are not consumed: the block objects stay
/// usable and share their array memory with the map.
#[pyclass(name = "TensorMap", module = "blockmap", frozen, weakref)]
#[derive(Debug)]
pub struct PyTensorMap {
    pub map: SwapCell<TensorMap>,
    /// what the blocks' values are: numpy arrays or torch tensors
    pub arrays: Arrays,
    /// the dataset it was read from, when it pickles as a reference to it
    /// (boxed: the Python object of every map stays as small as it was,
    /// which keeps the maps of a dataset in memory dense; a fork worker
    /// that touches them copies fewer pages)
    pub origin: Option<Box<MapOrigin>>,
}

/// Where a map read from a dataset comes from: while its value is still
/// the one read (`snapshot`), it pickles as `dataset[index]`.
#[derive(Debug)]
pub struct MapOrigin {
    /// the Python dataset object (it pickles as a reference to its file)
    pub dataset: Py<PyAny>,
    pub index: usize,
    pub snapshot: ForkArc<TensorMap>,
}

impl PyTensorMap {
    /// A Python map holding `map`.
    pub fn from_map(map: TensorMap) -> Self {
        Self::with_arrays(map, Arrays::Numpy)
    }

    /// A Python map holding `map`, giving arrays as `arrays`.
    pub fn with_arrays(map: TensorMap, arrays: Arrays) -> Self {
        PyTensorMap {
            map: SwapCell::new(map),
            arrays,
            origin: None,
        }
    }

    /// Map `index` of `dataset`, as read from it.
    pub fn from_dataset(map: TensorMap, dataset: Py<PyAny>, index: usize) -> Self {
        let cell = SwapCell::new(map);
        let snapshot = cell.get();
        PyTensorMap {
            map: cell,
            arrays: Arrays::Numpy,
            origin: Some(Box::new(MapOrigin {
                dataset,
                index,
                snapshot,
            })),
        }
    }

    /// The `(dataset, index)` this map pickles as, while it is unchanged.
    pub fn reference(&self) -> Option<&MapOrigin> {
        let origin = self.origin.as_ref()?;
        ForkArc::ptr_eq(&origin.snapshot, &self.map()).then_some(origin)
    }

    /// The map's current value.
    pub fn map(&self) -> ForkArc<TensorMap> {
        self.map.get()
    }
}
