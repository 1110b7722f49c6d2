//! `TensorMap`'s data leaving the process: save and load (files and
//! buffers), pickle, and shared memory.

use pyo3::prelude::*;
use pyo3::types::{PyMemoryView, PyTuple};

use super::docstrings::docstring;
use super::file::{FileArg, MmapArg, UseNumpy};
use super::labels::keys_arg;
use super::labels::LabelsArg;
use super::torch::{arrays_arg, reduce_as_torch, requires_grad, Arrays, PICKLE_RULE};
use super::PyTensorMap;
use crate::data::{Data, DataRef, Kind};
use crate::tensor::TensorMap;

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyTensorMap {
    /// Move the map's values (of every block and gradient) into one shared
    /// memory segment, in place, and return the map. Labels stay in memory
    /// the map owns: they travel with each message (docs/transports.md).
    ///
    /// Done once: a map already in shared memory is left as it is. Sending
    /// the map to another process through ``multiprocessing`` (``Queue``,
    /// ``Pipe``, ``Pool``, ``ProcessPoolExecutor``) then sends only its
    /// metadata and a file descriptor; the receiver maps the same memory, so
    /// writes by either process are seen by the other. The memory is freed
    /// when the last process drops its map. Blocks and arrays taken from the
    /// map before the call keep viewing the old memory. Linux only.
    ///
    /// Returns
    /// -------
    /// TensorMap
    ///     This map.
    ///
    /// Raises
    /// ------
    /// BlockMapIOError
    ///     If the shared-memory segment cannot be made.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn share_memory<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        let this = slf.get();
        super::shm::share_in_place(
            slf.py(),
            &this.map,
            |map| DataRef::Tensor(map),
            Data::into_tensor,
        )?;
        Ok(slf.clone())
    }

    /// Whether all of the map's data lives in shared memory (see
    /// ``share_memory``).
    ///
    /// Returns
    /// -------
    /// bool
    ///     Whether every array lives in shared memory.
    fn is_shared(&self) -> PyResult<bool> {
        super::shm::is_shared(DataRef::Tensor(&self.map()))
    }

    /// Pickle support: out-of-band buffers over this object's memory with
    /// protocol 5, the ``.mts`` archive in a bytes object before (see
    /// ``docs/pickle.md``).
    ///
    /// A map of torch tensors pickles as its numpy twin (the same memory)
    /// and the positions of the leaf tensors requiring grad, rebuilt as a
    /// map of torch tensors; a non-leaf tensor requiring grad is refused,
    /// as torch refuses it.
    fn __reduce_ex__<'py>(&self, py: Python<'py>, protocol: i64) -> PyResult<Bound<'py, PyTuple>> {
        let map = self.map();
        if self.arrays == Arrays::Torch {
            let flagged = requires_grad(py, map.blocks(), PICKLE_RULE)?;
            let twin = PyTensorMap::from_map(TensorMap::clone(&map));
            return reduce_as_torch(py, Bound::new(py, twin)?.into_any(), flagged);
        }
        super::pickle::reduce(py, DataRef::Tensor(&map), protocol)
    }

    /// Whether multiprocessing's reducer sends this map as a reference to
    /// the dataset it was read from (it was read from one, read-only, and
    /// is unchanged since); pickle itself always writes its data.
    #[getter]
    fn _pickles_as_reference(&self) -> bool {
        self.reference().is_some()
    }

    /// ``(dataset, index)`` this map was read as, while it is unchanged;
    /// ``None`` otherwise.
    #[getter]
    fn _dataset_origin(&self, py: Python<'_>) -> Option<(Py<PyAny>, usize)> {
        self.reference()
            .map(|origin| (origin.dataset.clone_ref(py), origin.index))
    }

    /// Save to a path or binary file object (see ``blockmap.save``).
    ///
    /// Parameters
    /// ----------
    #[doc = docstring!(save_file)]
    #[doc = docstring!(use_numpy)]
    #[doc = docstring!(durable)]
    ///
    #[doc = docstring!(raises_save)]
    #[pyo3(signature = (file, use_numpy = UseNumpy, *, durable = true), text_signature = "($self, file, use_numpy=False, *, durable=True)")]
    fn save(
        &self,
        py: Python<'_>,
        file: FileArg<'_>,
        use_numpy: UseNumpy,
        durable: bool,
    ) -> PyResult<()> {
        let _ = use_numpy;
        super::io::save(py, file, DataRef::Tensor(&self.map()), durable)
    }

    /// Load a :class:`TensorMap` from a path or binary file object (see ``blockmap.load``).
    ///
    /// Parameters
    /// ----------
    #[doc = docstring!(load_file)]
    #[doc = docstring!(use_numpy)]
    #[doc = docstring!(mmap)]
    #[doc = docstring!(arrays)]
    #[doc = docstring!(keys)]
    ///
    /// Returns
    /// -------
    /// TensorMap
    ///     The map.
    ///
    #[doc = docstring!(raises_load)]
    #[doc = docstring!(no_torch)]
    #[staticmethod]
    #[pyo3(signature = (file, use_numpy = UseNumpy, *, mmap = MmapArg::default(), arrays = None, keys = None), text_signature = "(file, use_numpy=False, *, mmap=False, arrays=None, keys=None)")]
    fn load(
        py: Python<'_>,
        file: FileArg<'_>,
        use_numpy: UseNumpy,
        mmap: MmapArg,
        arrays: Option<&str>,
        keys: Option<LabelsArg>,
    ) -> PyResult<Py<PyAny>> {
        let _ = use_numpy;
        let arrays = arrays_arg(py, arrays, Arrays::Numpy)?;
        let keys = keys_arg(keys);
        let loaded = super::io::load(py, file, Kind::Tensor, mmap, keys.as_ref())?;
        let tensor = PyTensorMap::with_arrays(loaded.into_tensor()?, arrays);
        Ok(Py::new(py, tensor)?.into_any())
    }

    /// The ``.mts`` data, in a memoryview (see ``blockmap.save_buffer``).
    ///
    /// Parameters
    /// ----------
    #[doc = docstring!(use_numpy)]
    ///
    /// Returns
    /// -------
    /// memoryview
    ///     The ``.mts`` archive.
    ///
    /// Raises
    /// ------
    #[doc = docstring!(invalid)]
    #[doc = docstring!(no_memory)]
    #[doc = docstring!(mapped_lost)]
    #[pyo3(signature = (use_numpy = UseNumpy), text_signature = "($self, use_numpy=False)")]
    fn save_buffer<'py>(
        &self,
        py: Python<'py>,
        use_numpy: UseNumpy,
    ) -> PyResult<Bound<'py, PyMemoryView>> {
        let _ = use_numpy;
        super::io::save_buffer(py, DataRef::Tensor(&self.map()))
    }

    /// Load from a bytes-like object (see ``blockmap.load_buffer``).
    ///
    /// Parameters
    /// ----------
    #[doc = docstring!(load_buffer)]
    #[doc = docstring!(use_numpy)]
    #[doc = docstring!(arrays)]
    #[doc = docstring!(keys)]
    ///
    /// Returns
    /// -------
    /// TensorMap
    ///     The map.
    ///
    #[doc = docstring!(raises_load_buffer)]
    #[doc = docstring!(no_torch)]
    #[staticmethod]
    #[pyo3(signature = (buffer, use_numpy = UseNumpy, *, arrays = None, keys = None), text_signature = "(buffer, use_numpy=False, *, arrays=None, keys=None)")]
    fn load_buffer(
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        use_numpy: UseNumpy,
        arrays: Option<&str>,
        keys: Option<LabelsArg>,
    ) -> PyResult<Py<PyAny>> {
        let _ = use_numpy;
        let arrays = arrays_arg(py, arrays, Arrays::Numpy)?;
        let keys = keys_arg(keys);
        let map = super::io::load_buffer(py, buffer, Kind::Tensor, keys.as_ref())?.into_tensor()?;
        Ok(Py::new(py, PyTensorMap::with_arrays(map, arrays))?.into_any())
    }
}
