//! `Labels`' data leaving the process: save and load (a bare NPY file and
//! buffers), and pickle.

use pyo3::prelude::*;
use pyo3::types::{PyMemoryView, PyTuple};

use super::docstrings::docstring;
use super::file::{FileArg, MmapArg};
use super::torch::Arrays;
use super::PyLabels;
use crate::data::{DataRef, Kind};

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyLabels {
    /// Pickle support: out-of-band buffers over this object's memory with
    /// protocol 5, the ``.mts`` archive in a bytes object before (see
    /// ``docs/pickle.md``).
    fn __reduce_ex__<'py>(&self, py: Python<'py>, protocol: i64) -> PyResult<Bound<'py, PyTuple>> {
        if self.arrays == Arrays::Torch {
            let twin = Bound::new(py, PyLabels::from(self.labels.clone()))?.into_any();
            return super::torch::reduce_as_torch(py, twin, Vec::new());
        }
        super::pickle::reduce(py, DataRef::Labels(&self.labels), protocol)
    }

    /// Save to a path or binary file object (see ``blockmap.save``).
    ///
    /// Parameters
    /// ----------
    #[doc = docstring!(save_file)]
    #[doc = docstring!(durable)]
    ///
    #[doc = docstring!(raises_save)]
    #[pyo3(signature = (file, *, durable = true), text_signature = "($self, file, *, durable=True)")]
    fn save(&self, py: Python<'_>, file: FileArg<'_>, durable: bool) -> PyResult<()> {
        super::io::save(py, file, DataRef::Labels(&self.labels), durable)
    }

    /// Load Labels from a path or binary file object (see ``blockmap.load_labels``).
    ///
    /// Parameters
    /// ----------
    #[doc = docstring!(load_file)]
    ///
    /// Returns
    /// -------
    /// Labels
    ///     The Labels.
    ///
    #[doc = docstring!(raises_load)]
    #[staticmethod]
    fn load(py: Python<'_>, file: FileArg<'_>) -> PyResult<Py<PyAny>> {
        let labels = super::io::load(py, file, Kind::Labels, MmapArg(None), None)?.into_labels()?;
        Ok(Py::new(py, PyLabels::from(labels))?.into_any())
    }

    /// The Labels as a bare ``.npy`` file (as metatensor-core saves Labels),
    /// in a memoryview (see ``blockmap.save_buffer``).
    ///
    /// Returns
    /// -------
    /// memoryview
    ///     The ``.npy`` data.
    ///
    /// Raises
    /// ------
    #[doc = docstring!(invalid)]
    #[doc = docstring!(no_memory)]
    fn save_buffer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyMemoryView>> {
        super::io::save_buffer(py, DataRef::Labels(&self.labels))
    }

    /// Load from a bytes-like object (see ``blockmap.load_labels_buffer``).
    ///
    /// Parameters
    /// ----------
    #[doc = docstring!(load_buffer)]
    ///
    /// Returns
    /// -------
    /// Labels
    ///     The Labels.
    ///
    #[doc = docstring!(raises_load_buffer)]
    #[staticmethod]
    fn load_buffer(py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let labels = super::io::load_buffer(py, buffer, Kind::Labels, None)?.into_labels()?;
        Ok(Py::new(py, PyLabels::from(labels))?.into_any())
    }
}
