//! `TensorBlock`'s general members: values and labels, shape, dtype and
//! device, equality, the garbage collector's hooks, and its text forms.

use pyo3::exceptions::PyAttributeError;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::PyTraverseError;

use super::labels::PyLabels;
use super::torch::to_python_array;
use super::{Origin, PyTensorBlock};

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyTensorBlock {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.traverse(&visit)
    }

    fn __clear__(&self) {
        self.clear();
    }

    /// The values: a numpy array viewing the block's memory (no copy),
    /// writable when that memory is; a torch tensor over the same memory
    /// for a block of torch tensors (the very tensor the block was made
    /// from, autograd graph included, while the block holds its memory).
    #[getter]
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python_array(py, self.block().values(), self.arrays)
    }

    /// The array type of the values: ``"numpy"`` or ``"torch"``.
    #[getter]
    fn _arrays(&self) -> &'static str {
        self.arrays.name()
    }

    /// Labels of the first axis.
    #[getter]
    fn samples(&self) -> PyLabels {
        self.labels(self.block().samples())
    }

    /// Labels of the middle axes, one dimension each.
    #[getter]
    fn components(&self) -> Vec<PyLabels> {
        self.block()
            .components()
            .iter()
            .map(|c| self.labels(c))
            .collect()
    }

    /// Labels of the last axis.
    #[getter]
    fn properties(&self) -> PyLabels {
        self.labels(self.block().properties())
    }

    /// The values cannot be replaced (as in metatensor-core): write into
    /// them with ``block.values[:] = new_values``.
    #[setter]
    #[allow(clippy::unused_self)] // a Python setter takes the object
    fn set_values(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let _ = value;
        Err(PyAttributeError::new_err(
            "Direct assignment to `values` is not possible. Please use \
             block.values[:] = new_values instead.",
        ))
    }

    /// Number of samples (the length of the values).
    fn __len__(&self) -> usize {
        self.block().values().shape()[0]
    }

    /// The device of every array in the block: ``"cpu"``, or
    /// ``torch.device("cpu")`` when the values are torch tensors (as
    /// metatensor-core gives it).
    #[getter]
    fn device<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        super::torch::device_of(py, self.arrays)
    }

    /// Whether this block is a view inside a :class:`TensorMap` or another
    /// block (a block of a map, or a gradient).
    #[getter]
    fn is_view(&self) -> bool {
        self.origin != Origin::Standalone
    }

    /// Shape of the values.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.block().values().shape())
    }

    /// dtype of the values: a numpy dtype, or a ``torch.dtype`` when the
    /// values are torch tensors (as metatensor-core gives it).
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        super::torch::dtype_of(py, self.block().dtype(), self.arrays)
    }

    /// Bytes of array data in this block, its labels and its gradients.
    #[getter]
    fn nbytes(&self) -> usize {
        self.block().nbytes()
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.cast::<PyTensorBlock>() {
            Ok(other) => *self.block() == *other.get().block(),
            Err(_) => false,
        }
    }

    fn __ne__(&self, other: &Bound<'_, PyAny>) -> bool {
        !self.__eq__(other)
    }

    /// metatensor's layout: shape, label names and gradients.
    fn __repr__(&self) -> String {
        let block = self.block();
        format!(
            "{}\n    {}",
            super::repr::block(&block, &self.parameters),
            super::repr::arrays(std::iter::once(&*block), self.arrays)
        )
    }

    /// metatensor's layout (``print(block)``), as metatensor-core's repr.
    fn __str__(&self) -> String {
        super::repr::block(&self.block(), &self.parameters)
    }
}
