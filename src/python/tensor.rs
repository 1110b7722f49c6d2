//! `blockmap.TensorMap`: its struct, how the binding makes one, and its
//! methods by concern in `tensor/` (pyo3's `multiple-pymethods`):
//! `construction` (new, copies, `to`), `general` (names, sizes, info,
//! equality, text), `blocks` (selection and iteration), `operations`
//! (`keys_to_*`, `components_to_properties`, operators), `serde` (files,
//! pickles, shared memory) and `export` (metatensor's maps).

mod blocks;
mod construction;
mod export;
mod general;
mod operations;
mod serde;

use pyo3::prelude::*;
use pyo3::types::PyList;

// the binding's modules the methods use, their one way to them (the
// layers of src/python read this list: ../shared/tools/layers)
use super::{
    block, cell, convert, docstrings, entry, errors, file, gil, io, labels, ops, pickle, repr,
    selection, shm, torch,
};

use crate::arc::ForkArc;
use crate::tensor::TensorMap;
use block::{Origin, PyTensorBlock};
use cell::SwapCell;
use torch::Arrays;

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

/// Block `i` of `map`, as a Python block viewing it.
fn view(map: &TensorMap, i: usize, arrays: Arrays) -> PyTensorBlock {
    PyTensorBlock::new_view(map.blocks()[i].clone(), Origin::MapBlock).with_arrays(arrays)
}

/// A Python iterator over `items`.
fn iterate<'py, T>(py: Python<'py>, items: Vec<T>) -> PyResult<Bound<'py, PyAny>>
where
    T: IntoPyObject<'py>,
{
    Ok(PyList::new(py, items)?.try_iter()?.into_any())
}

/// `map` with the info of `like`.
fn with_info(mut map: TensorMap, like: &TensorMap) -> crate::Result<TensorMap> {
    map.replace_info(crate::limits::try_clone_info(like.info())?)?;
    Ok(map)
}
