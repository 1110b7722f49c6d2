//! Datasets in the binding: `_Dataset` (a dataset file, mapped; the public
//! `blockmap.Dataset` is its Python subclass in `python/blockmap/dataset.py`)
//! and `DatasetWriter`.

use std::path::PathBuf;

use pyo3::prelude::*;

use super::classes::{Arrays, PyTensorMap};
use super::convert::{LabelsArg, SaturatingInt};
use super::errors::{invalid, type_name, wrong_type};
use super::file::{FileArg, MmapArg};
use super::gil::detached;
use super::io::keys_arg;
use super::torch::arrays_arg;
use crate::arc::{Arc, ForkMutex};
use crate::buffer::MapMode;
use crate::dataset;

/// A dataset file, mapped: its maps are read as views of the mapping.
///
/// ``_Dataset(path, mmap="r", count=None)``: ``mmap`` is ``"r"`` (or
/// ``True``: read-only views, maps that pickle as references) or ``"c"``
/// (private copy-on-write views: writable, and their maps pickle as data);
/// ``count`` limits the view to the first ``count`` maps (a reference
/// reopened in another process sees what its sender saw).
#[pyclass(name = "_Dataset", module = "blockmap._blockmap", subclass, frozen)]
#[derive(Debug)]
pub struct PyDataset {
    inner: Arc<dataset::Dataset>,
    mode: MapMode,
    count: usize,
}

#[pymethods]
impl PyDataset {
    #[new]
    #[pyo3(
        signature = (path, mmap = MmapArg(Some(MapMode::ReadOnly)), count = None),
        text_signature = "(path, mmap=True, count=None)"
    )]
    fn new(
        py: Python<'_>,
        path: FileArg<'_>,
        mmap: MmapArg,
        count: Option<SaturatingInt>,
    ) -> PyResult<Self> {
        let path = path.into_path(py, "a dataset")?;
        let count = match count {
            None => None,
            Some(count) => Some(usize::try_from(count.0).map_err(|_| {
                invalid(py, format!("count must be a number of maps, got {count}"))
            })?),
        };
        let Some(mode) = mmap.0 else {
            return Err(invalid(
                py,
                "a dataset is always mapped: mmap must be True, 'r' or 'c'",
            ));
        };
        let inner = detached(py, move || dataset::Dataset::open(&path, mode))?;
        let count = match count {
            None => inner.len(),
            Some(count) if count <= inner.len() => count,
            Some(count) => {
                return Err(invalid(
                    py,
                    format!(
                        "'{}' holds {} maps, fewer than the {count} asked for",
                        inner.path().display(),
                        inner.len()
                    ),
                ))
            }
        };
        Ok(PyDataset {
            inner: Arc::new(inner),
            mode,
            count,
        })
    }

    fn __len__(&self) -> usize {
        self.count
    }

    /// The path the dataset was opened from.
    #[getter]
    fn path(&self) -> PathBuf {
        self.inner.path().to_path_buf()
    }

    /// The dataset's identity (32 hex digits, kept through appends).
    #[getter]
    fn id(&self) -> &str {
        self.inner.id()
    }

    /// ``"r"`` (read-only views) or ``"c"`` (copy-on-write views).
    #[getter]
    fn mmap(&self) -> &'static str {
        match self.mode {
            MapMode::ReadOnly => "r",
            MapMode::CopyOnWrite => "c",
        }
    }

    /// Whether the file ended with a complete commit when it was opened
    /// (false: an interrupted writer's maps were recovered).
    #[getter]
    fn committed(&self) -> bool {
        self.inner.committed()
    }

    /// A CRC32 of the index rows of the first ``count`` maps.
    fn _index_crc(&self, py: Python<'_>, count: usize) -> PyResult<u32> {
        if count > self.count {
            return Err(invalid(
                py,
                format!("{count} maps of a dataset of {}", self.count),
            ));
        }
        Ok(self.inner.index_crc(count)?)
    }

    /// ``(offset, length)`` in the file of map ``index``'s ``.mts`` archive.
    fn _slot(&self, py: Python<'_>, index: usize) -> PyResult<(u64, u64)> {
        if index >= self.count {
            return Err(invalid(
                py,
                format!("map {index} of a dataset of {}", self.count),
            ));
        }
        let slot = self.inner.slots()[index];
        Ok((slot.offset, slot.len))
    }

    /// Map ``index`` (``0 <= index < len``), viewing the mapping; with
    /// ``keys``, only the blocks whose keys match. A read-only, whole map
    /// pickles as a reference to this dataset while it is unchanged.
    #[pyo3(signature = (index, keys = None, arrays = None))]
    fn _get(
        slf: &Bound<'_, Self>,
        index: usize,
        keys: Option<LabelsArg>,
        arrays: Option<&str>,
    ) -> PyResult<Py<PyTensorMap>> {
        let py = slf.py();
        let this = slf.get();
        if index >= this.count {
            return Err(super::errors::Class::BlockMapIndexError.err(
                py,
                format!(
                    "map {index} is out of range for a dataset of {}",
                    this.count
                ),
            ));
        }
        let arrays = arrays_arg(py, arrays, Arrays::Numpy)?;
        let keys = keys_arg(keys);
        let keys = keys.as_ref();
        let inner = &this.inner;
        let map = detached(py, || inner.get(index, keys))?;
        let object = if keys.is_none() && this.mode == MapMode::ReadOnly && arrays == Arrays::Numpy
        {
            PyTensorMap::from_dataset(map, slf.clone().into_any().unbind(), index)
        } else {
            PyTensorMap::with_arrays(map, arrays)
        };
        Py::new(py, object)
    }
}

/// Adds maps to a dataset file, one at a time, in constant memory.
///
/// ``DatasetWriter(path, append=False)``: a new, empty dataset replaces
/// what is at ``path`` (atomically: the old file until the new one is in
/// place; symlinks, mode and owner kept as ``save`` keeps them), or with
/// ``append=True`` the maps go after those already there (the file is
/// created when missing), without rewriting anything. The path is used as
/// given: no extension is appended.
///
/// ``write(tensor)`` adds a map, streamed from its arrays' memory (maps of
/// up to 4 MiB are built in memory first, then written at once); when it
/// returns, the map is in the file: a process killed from then on leaves a
/// file that opens with it. ``close()`` (or leaving the ``with`` block)
/// writes the index, the central directory and the end records, and syncs
/// the file; opening it then reads the index alone.
#[pyclass(name = "DatasetWriter", module = "blockmap", frozen)]
#[derive(Debug)]
pub struct PyDatasetWriter {
    /// survives fork (see `ForkMutex`); a signal handler writing while
    /// this thread writes is refused
    writer: ForkMutex<dataset::Writer>,
    path: PathBuf,
}

/// A `DatasetWriter` called by the thread that is writing with it: from a
/// signal handler during one of its own writes.
fn reentered() -> crate::Error {
    crate::Error::invalid(
        "the DatasetWriter is in use by this thread already (called from a signal handler \
         during one of its own writes)",
    )
}

impl PyDatasetWriter {
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&mut dataset::Writer) -> crate::Result<R> + Send,
    ) -> PyResult<R> {
        let writer = &self.writer;
        detached(py, || {
            let mut writer = writer.lock().map_err(|_| reentered())?;
            work(&mut writer)
        })
    }
}

#[pymethods]
impl PyDatasetWriter {
    #[new]
    #[pyo3(signature = (path, append = false))]
    fn new(py: Python<'_>, path: FileArg<'_>, append: bool) -> PyResult<Self> {
        let path = path.into_path(py, "a dataset writer")?;
        let writer = detached(py, || {
            if append {
                dataset::Writer::append(&path)
            } else {
                dataset::Writer::create(&path)
            }
        })?;
        Ok(PyDatasetWriter {
            writer: ForkMutex::new(writer),
            path,
        })
    }

    /// Add ``tensor`` (a :class:`TensorMap`) at the end of the dataset.
    fn write(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>) -> PyResult<()> {
        let tensor = tensor.cast::<PyTensorMap>().map_err(|_| {
            wrong_type(
                py,
                format!("a dataset holds TensorMaps, not {}", type_name(tensor)),
            )
        })?;
        let map = tensor.get().map();
        self.with(py, |writer| writer.write(&map))
    }

    /// Write the index and end records now (``close`` does it too), so
    /// that opening the file reads the index alone.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, dataset::Writer::commit)
    }

    /// Commit and close: writing afterwards is an error.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, dataset::Writer::close)
    }

    /// Number of maps in the dataset so far.
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.writer.lock().map_err(|_| reentered())?.len())
    }

    /// The path written to.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The dataset's identity.
    #[getter]
    fn id(&self) -> PyResult<String> {
        Ok(self
            .writer
            .lock()
            .map_err(|_| reentered())?
            .id()
            .to_string())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the writer: the maps written so far are committed, also
    /// when the block raised.
    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> PyResult<String> {
        let count = self.__len__()?;
        Ok(format!(
            "DatasetWriter('{}', {count} maps)",
            self.path.display()
        ))
    }
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyDataset>()?;
    module.add_class::<PyDatasetWriter>()?;
    Ok(())
}
