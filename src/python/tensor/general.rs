//! `TensorMap`'s general members: names, sizes, dtype and device, info,
//! equality, the garbage collector's hooks, and its text forms.

use std::collections::BTreeMap;

use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::PyTraverseError;

use super::convert::SaturatingInt;
use super::labels::PyLabels;
use super::PyTensorMap;

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyTensorMap {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.traverse(&visit)
    }

    fn __clear__(&self) {
        self.clear();
    }

    /// The array type of the values: ``"numpy"`` or ``"torch"``.
    #[getter]
    fn _arrays(&self) -> &'static str {
        self.arrays.name()
    }

    /// The keys, one entry per block.
    #[getter]
    fn keys(&self) -> PyLabels {
        PyLabels::with_arrays(self.map().keys().clone(), self.arrays)
    }

    /// Sample names shared by all blocks.
    #[getter]
    fn sample_names(&self) -> Vec<String> {
        self.map().sample_names()
    }

    /// Component names shared by all blocks.
    #[getter]
    fn component_names(&self) -> Vec<String> {
        self.map().component_names()
    }

    /// Property names shared by all blocks.
    #[getter]
    fn property_names(&self) -> Vec<String> {
        self.map().property_names()
    }

    /// Bytes of array data in the map (values, gradients, labels).
    #[getter]
    fn nbytes(&self) -> usize {
        self.map().nbytes()
    }

    fn __len__(&self) -> usize {
        self.map().blocks().len()
    }

    /// The dtype of every array in the map (None for a map without
    /// blocks): a numpy dtype, or a ``torch.dtype`` for torch tensors.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.map()
            .blocks()
            .first()
            .map(|block| super::torch::dtype_of(py, block.dtype(), self.arrays))
            .transpose()
    }

    /// The device of every array in the map: ``"cpu"``, or
    /// ``torch.device("cpu")`` for torch tensors.
    #[getter]
    fn device<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        super::torch::device_of(py, self.arrays)
    }

    /// Whether this map is a view inside another object: never.
    #[getter]
    #[allow(clippy::unused_self)] // a Python property takes the object
    fn is_view(&self) -> bool {
        false
    }

    /// The map printed with at most ``max_keys`` keys (all of them when
    /// negative), in metatensor-core's layout.
    ///
    /// Parameters
    /// ----------
    /// max_keys : int
    ///     The most keys shown (all when negative).
    ///
    /// Returns
    /// -------
    /// str
    ///     The text.
    ///
    /// Raises
    /// ------
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    #[pyo3(name = "print")]
    #[allow(clippy::needless_pass_by_value)] // a Python argument
    fn print_(&self, max_keys: SaturatingInt) -> String {
        super::repr::tensor(&self.map(), max_keys.0)
    }

    /// The info map, as a new dict.
    ///
    /// Returns
    /// -------
    /// dict of str to str
    ///     A copy of the info.
    ///
    /// Raises
    /// ------
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn info(&self) -> BTreeMap<String, String> {
        self.map().info().clone()
    }

    /// The info value of ``key``, or None.
    ///
    /// Parameters
    /// ----------
    /// key : str
    ///     The info key.
    ///
    /// Returns
    /// -------
    /// str or None
    ///     Its value, or None when absent.
    fn get_info(&self, key: &str) -> Option<String> {
        self.map().info().get(key).cloned()
    }

    /// Set the info value of ``key`` (the info must fit in 64 MiB of JSON,
    /// as ``.mts`` files hold it).
    ///
    /// Parameters
    /// ----------
    /// key : str
    ///     The info key.
    /// value : str
    ///     Its value.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If the info would exceed 64 MiB of JSON.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn set_info(&self, key: String, value: String) -> PyResult<()> {
        Ok(self.map.modify(|map| map.set_info(key, value))?)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.cast::<PyTensorMap>() {
            Ok(other) => *self.map() == *other.get().map(),
            Err(_) => false,
        }
    }

    fn __ne__(&self, other: &Bound<'_, PyAny>) -> bool {
        !self.__eq__(other)
    }

    /// metatensor's layout, with every key.
    fn __repr__(&self) -> String {
        let map = self.map();
        format!(
            "{}\n    {}",
            super::repr::tensor(&map, -1),
            super::repr::arrays(map.blocks().iter(), self.arrays)
        )
    }

    /// metatensor's layout, with at most 7 keys.
    fn __str__(&self) -> String {
        super::repr::tensor(&self.map(), 7)
    }
}
