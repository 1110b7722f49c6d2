//! `TensorBlock`'s data leaving the process: save and load (files and
//! buffers), pickle, and shared memory.

use pyo3::prelude::*;
use pyo3::types::{PyMemoryView, PyTuple};

use super::docstrings::docstring;
use super::file::{FileArg, MmapArg, UseNumpy};
use super::torch::{arrays_arg, reduce_as_torch, requires_grad, Arrays, PICKLE_RULE};
use super::{Origin, PyTensorBlock};
use crate::block::TensorBlock;
use crate::data::{Data, DataRef, Kind};

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyTensorBlock {
    /// Move the block's values (and its gradients' values) into one shared
    /// memory segment, in place, and return the block (see
    /// ``TensorMap.share_memory``). For a block taken from a map, only this
    /// block object changes, not the map.
    ///
    /// Returns
    /// -------
    /// TensorBlock
    ///     This block.
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
            &this.block,
            |block| DataRef::Block(block),
            Data::into_block,
        )?;
        Ok(slf.clone())
    }

    /// Whether all of the block's data lives in shared memory.
    ///
    /// Returns
    /// -------
    /// bool
    ///     Whether every array lives in shared memory.
    fn is_shared(&self) -> PyResult<bool> {
        super::shm::is_shared(DataRef::Block(&self.block()))
    }

    /// Pickle support: out-of-band buffers over this object's memory with
    /// protocol 5, the ``.mts`` archive in a bytes object before (see
    /// ``docs/pickle.md``).
    /// A block of torch tensors pickles as its numpy twin (the same
    /// memory) and the positions of the leaf tensors requiring grad; a
    /// non-leaf tensor requiring grad is refused, as torch refuses it.
    fn __reduce_ex__<'py>(&self, py: Python<'py>, protocol: i64) -> PyResult<Bound<'py, PyTuple>> {
        let block = self.block();
        if self.arrays == Arrays::Torch {
            let flagged = requires_grad(py, std::slice::from_ref(&*block), PICKLE_RULE)?;
            let twin = PyTensorBlock::new_view(TensorBlock::clone(&block), Origin::Standalone);
            return reduce_as_torch(py, Bound::new(py, twin)?.into_any(), flagged);
        }
        super::pickle::reduce(py, DataRef::Block(&block), protocol)
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
        super::io::save(py, file, DataRef::Block(&self.block()), durable)
    }

    /// Load a :class:`TensorBlock` from a path or binary file object (see ``blockmap.load``).
    ///
    /// Parameters
    /// ----------
    #[doc = docstring!(load_file)]
    #[doc = docstring!(use_numpy)]
    #[doc = docstring!(mmap)]
    #[doc = docstring!(arrays)]
    ///
    /// Returns
    /// -------
    /// TensorBlock
    ///     The block.
    ///
    #[doc = docstring!(raises_load)]
    #[doc = docstring!(no_torch)]
    #[staticmethod]
    #[pyo3(signature = (file, use_numpy = UseNumpy, *, mmap = MmapArg::default(), arrays = None), text_signature = "(file, use_numpy=False, *, mmap=False, arrays=None)")]
    fn load(
        py: Python<'_>,
        file: FileArg<'_>,
        use_numpy: UseNumpy,
        mmap: MmapArg,
        arrays: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let _ = use_numpy;
        let arrays = arrays_arg(py, arrays, Arrays::Numpy)?;
        let block = super::io::load(py, file, Kind::Block, mmap, None)?.into_block()?;
        let block = PyTensorBlock::new_view(block, Origin::Standalone).with_arrays(arrays);
        Ok(Py::new(py, block)?.into_any())
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
        super::io::save_buffer(py, DataRef::Block(&self.block()))
    }

    /// Load from a bytes-like object (see ``blockmap.load_block_buffer``).
    ///
    /// Parameters
    /// ----------
    #[doc = docstring!(load_buffer)]
    #[doc = docstring!(use_numpy)]
    #[doc = docstring!(arrays)]
    ///
    /// Returns
    /// -------
    /// TensorBlock
    ///     The block.
    ///
    #[doc = docstring!(raises_load_buffer)]
    #[doc = docstring!(no_torch)]
    #[staticmethod]
    #[pyo3(signature = (buffer, use_numpy = UseNumpy, *, arrays = None), text_signature = "(buffer, use_numpy=False, *, arrays=None)")]
    fn load_buffer(
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        use_numpy: UseNumpy,
        arrays: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let _ = use_numpy;
        let arrays = arrays_arg(py, arrays, Arrays::Numpy)?;
        let block = super::io::load_buffer(py, buffer, Kind::Block, None)?.into_block()?;
        let block = PyTensorBlock::new_view(block, Origin::Standalone).with_arrays(arrays);
        Ok(Py::new(py, block)?.into_any())
    }
}
