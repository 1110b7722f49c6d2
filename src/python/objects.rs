//! Maps, blocks and Labels as Python objects of any of their classes: a
//! snapshot of the core data an object holds ([`Held`],
//! [`held_from_python`]), and the object of the right class for core
//! [`Data`] ([`to_python`]). Above the classes, for the module-level
//! functions (`functions.rs`); the classes' own methods build their
//! objects themselves.

use pyo3::prelude::*;

use super::block::{Origin, PyTensorBlock};
use super::errors::{type_name, wrong_type};
use super::labels::PyLabels;
use super::tensor::PyTensorMap;
use super::torch::Arrays;
use crate::arc::ForkArc;
use crate::block::TensorBlock;
use crate::data::{Data, DataRef};
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// A snapshot of the `TensorMap`, `TensorBlock` or `Labels` in a Python
/// object: what it held when taken, kept alive while it is used (with the
/// GIL released, or while another thread changes the object).
#[derive(Debug)]
pub enum Held {
    /// a map
    Tensor(ForkArc<TensorMap>),
    /// a block
    Block(ForkArc<TensorBlock>),
    /// labels
    Labels(Labels),
}

impl Held {
    /// The data, borrowed.
    pub fn as_ref(&self) -> DataRef<'_> {
        match self {
            Held::Tensor(map) => DataRef::Tensor(map),
            Held::Block(block) => DataRef::Block(block),
            Held::Labels(labels) => DataRef::Labels(labels),
        }
    }
}

/// A snapshot of the `TensorMap`, `TensorBlock` or `Labels` in `obj`, or a
/// type error.
pub fn held_from_python(obj: &Bound<'_, PyAny>) -> PyResult<Held> {
    if let Ok(map) = obj.cast::<PyTensorMap>() {
        return Ok(Held::Tensor(map.get().map()));
    }
    if let Ok(block) = obj.cast::<PyTensorBlock>() {
        return Ok(Held::Block(block.get().block()));
    }
    if let Ok(labels) = obj.cast::<PyLabels>() {
        return Ok(Held::Labels(labels.get().labels.clone()));
    }
    Err(wrong_type(
        obj.py(),
        format!(
            "data must be a TensorMap, TensorBlock or Labels, not {}",
            type_name(obj)
        ),
    ))
}

/// The Python object holding `data`.
pub fn to_python(py: Python<'_>, data: Data) -> PyResult<Py<PyAny>> {
    to_python_as(py, data, Arrays::Numpy)
}

/// The Python object holding `data`, giving arrays as `arrays`.
pub fn to_python_as(py: Python<'_>, data: Data, arrays: Arrays) -> PyResult<Py<PyAny>> {
    Ok(match data {
        Data::Tensor(map) => Py::new(py, PyTensorMap::with_arrays(map, arrays))?.into_any(),
        Data::Block(block) => Py::new(
            py,
            PyTensorBlock::new_view(block, Origin::Standalone).with_arrays(arrays),
        )?
        .into_any(),
        Data::Labels(labels) => Py::new(py, PyLabels::with_arrays(labels, arrays))?.into_any(),
    })
}
