//! Datasets in the binding: `_Dataset` (a dataset file, mapped; the public
//! `blockmap.Dataset` is its Python subclass in `python/blockmap/dataset.py`)
//! and `DatasetWriter`.

use std::path::PathBuf;

use pyo3::prelude::*;

use super::convert::SaturatingInt;
use super::errors::{invalid, type_name, wrong_type};
use super::file::{FileArg, MmapArg};
use super::gil::detached;
use super::labels::{keys_arg, LabelsArg};
use super::tensor::PyTensorMap;
use super::torch::arrays_arg;
use super::torch::Arrays;
use crate::arc::{ForkArc, ForkMutex, SetOnce};
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
    inner: ForkArc<dataset::Dataset>,
    mode: MapMode,
    count: usize,
    schema: dataset::Schema,
    /// the checksum of the `count` maps, computed at the first pickle (a
    /// `SetOnce`, never waited for: a `OnceLock` being set by a thread of
    /// the parent at a fork would hang the child's first pickle)
    checksum: SetOnce<u32>,
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
        let mut inner = detached(py, move || dataset::Dataset::open(&path, mode))?;
        if let Some(count) = count {
            inner.keep_first(count)?;
        }
        let count = inner.len();
        let schema = inner.schema();
        Ok(PyDataset {
            inner: ForkArc::new(inner),
            mode,
            count,
            schema,
            checksum: SetOnce::new(),
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

    /// A CRC32 of the maps' places in the file and of their content
    /// checksums (what a reference checks the file it opens against):
    /// computed once per dataset object, then O(1).
    fn _checksum(&self, py: Python<'_>) -> PyResult<u32> {
        if let Some(checksum) = self.checksum.get() {
            return Ok(*checksum);
        }
        let (inner, count) = (&self.inner, self.count);
        let checksum = detached(py, || inner.checksum(count))?;
        // threads racing here computed the same value: the first one kept
        let _ = self.checksum.set(checksum);
        Ok(checksum)
    }

    /// ``(offset, length)`` in the file of entry ``index``: its record
    /// (versions 2 and 3, header included) or its ``.mts`` archive (version 1).
    #[allow(clippy::needless_pass_by_value)] // a Python argument
    fn _slot(&self, index: SaturatingInt) -> PyResult<(u64, u64)> {
        let span = self.inner.span(index.0)?;
        Ok((span.offset, span.len))
    }

    /// Map ``index`` (negative from the end) of field ``field`` (its
    /// position in ``fields``), viewing the mapping; with ``keys``, only the
    /// blocks whose keys match. A read-only, whole map pickles as a
    /// reference to this dataset while it is unchanged.
    #[pyo3(signature = (index, keys = None, arrays = None, field = 0))]
    #[allow(clippy::needless_pass_by_value)] // a Python argument
    fn _get(
        slf: &Bound<'_, Self>,
        index: SaturatingInt,
        keys: Option<LabelsArg>,
        arrays: Option<&str>,
        field: usize,
    ) -> PyResult<Py<PyTensorMap>> {
        let py = slf.py();
        let this = slf.get();
        let arrays = arrays_arg(py, arrays, Arrays::Numpy)?;
        let keys = keys_arg(keys);
        let keys = keys.as_ref();
        let inner = &this.inner;
        let index = index.0;
        let n_fields = this.schema.fields.len();
        let (index, map) = detached(py, || {
            let position = inner.position(index)?;
            Ok((position, inner.get_field(index, field, keys)?))
        })?;
        let object = if keys.is_none() && this.mode == MapMode::ReadOnly && arrays == Arrays::Numpy
        {
            // the map's place among all the maps: entries x fields
            let flat = index * n_fields + field;
            PyTensorMap::from_dataset(map, slf.clone().into_any().unbind(), flat)
        } else {
            PyTensorMap::with_arrays(map, arrays)
        };
        Py::new(py, object)
    }

    /// Ask the kernel to read entries ``start`` to ``start + count`` ahead
    /// (iteration and ``load_all`` call it; ``ds[i]`` reads only its own
    /// pages).
    fn _prefetch(&self, start: usize, count: usize) {
        self.inner
            .prefetch(start, count.min(self.count.saturating_sub(start)));
    }

    /// The format version of the file: 1 (read-only), 2 or 3 (written by
    /// this blockmap; a file of version 2 is appended to in version 2).
    #[getter]
    fn version(&self) -> u32 {
        self.inner.version()
    }

    /// The names of the maps each entry holds (``["tensor"]`` for a
    /// dataset of single maps).
    #[getter]
    fn fields(&self) -> Vec<String> {
        self.schema.fields.clone()
    }

    /// Whether each entry is one map (``ds[i]`` is a ``TensorMap``), not named
    /// fields.
    #[getter]
    fn _single(&self) -> bool {
        self.schema.single
    }

    /// The names of the columns the writer was given (``n_samples`` of
    /// each field is always there besides).
    #[getter]
    fn _columns(&self) -> Vec<String> {
        self.schema.columns.iter().map(|c| c.0.clone()).collect()
    }

    /// ``(kind, bytes)`` of column ``name``: ``"i8"`` or ``"f8"``, and its
    /// values for the entries of this view, native 8-byte elements.
    fn _column<'py>(
        &self,
        py: Python<'py>,
        name: &str,
    ) -> PyResult<(&'static str, Bound<'py, pyo3::types::PyBytes>)> {
        let (kind, values) = self.inner.column(name)?;
        let kind = match kind {
            dataset::ColumnType::Int => "i8",
            dataset::ColumnType::Float => "f8",
        };
        Ok((
            kind,
            column_bytes(py, &values[..self.count.min(values.len())]),
        ))
    }

    /// The sample count of field ``field``'s first block, per entry (native
    /// int64 bytes).
    fn _n_samples<'py>(
        &self,
        py: Python<'py>,
        field: usize,
    ) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let values = self.inner.n_samples(field)?;
        Ok(column_bytes(py, &values[..self.count.min(values.len())]))
    }

    /// Write the dataset at ``src`` (any version) as a new dataset of the
    /// newest version at ``dst`` (refused when it exists, unless
    /// ``overwrite``; replaced once complete: on failure it keeps what it
    /// held), each entry checked against its CRC32 first.
    #[staticmethod]
    #[pyo3(signature = (src, dst, overwrite = false))]
    fn _upgrade(
        py: Python<'_>,
        src: FileArg<'_>,
        dst: FileArg<'_>,
        overwrite: bool,
    ) -> PyResult<()> {
        let src = src.into_path(py, "a dataset")?;
        let dst = dst.into_path(py, "a dataset")?;
        detached(py, || {
            dataset::upgrade(&src, &dst, Some(std::time::Duration::ZERO), overwrite)
        })?;
        Ok(())
    }
}

/// Column values as the bytes of native 8-byte elements.
fn column_bytes<'py>(py: Python<'py>, values: &[u64]) -> Bound<'py, pyo3::types::PyBytes> {
    let mut bytes = Vec::with_capacity(values.len() * 8);
    for value in values {
        bytes.extend_from_slice(&value.to_ne_bytes());
    }
    pyo3::types::PyBytes::new(py, &bytes)
}

/// Adds maps to a dataset file, one at a time, in constant memory.
///
/// ``DatasetWriter(path, append=False, timeout=0.0)``: a new, empty
/// dataset that replaces what is at ``path`` when the writer is closed
/// (or at its first ``commit()``): it is built in a temporary file beside
/// ``path`` (unnamed, or a hidden ``.bm-*.tmp``), so that until then the
/// path keeps what it held, and a writer that fails, is killed, or leaves
/// its ``with`` block on an exception leaves it untouched and nothing
/// behind (symlinks, mode and owner kept as ``save`` keeps them). With
/// ``append=True`` the maps go after those already there (the file is
/// created when missing), without rewriting anything. The path is used as
/// given: no extension is appended.
///
/// A dataset has one writer at a time, across processes: the writer locks
/// the file (an advisory ``flock``, which the system lets go when the
/// process ends, however it ends) from its creation to its close; readers
/// never wait for it. A second writer waits ``timeout`` seconds at most
/// for the lock (``0.0``, the default: not at all; ``None``: as long as it
/// takes), then fails with :class:`~blockmap.BlockMapIOError` naming the
/// path.
///
/// ``write(tensor)`` adds a map, ``write(name=tensor, ...,
/// columns={...})`` an entry of named maps and scalars (every entry of a
/// dataset has the same fields and columns); entries of up to 4 MiB are
/// built in memory and written at once, larger ones streamed from their
/// arrays' memory. Once the dataset is in place (appending, or after a
/// commit), the entry is in the file when ``write`` returns: a process
/// killed from then on leaves a file that opens with it. ``close()`` (or
/// leaving the ``with`` block) writes the commit record (the index and the
/// columns) and its trailer, and syncs the file; opening it then reads the
/// index alone. A new dataset is of format version 4; one of version 2 or
/// 3 is appended to in its version (the blockmap that wrote it still
/// reads it); one of version 1 is not appended to (see
/// ``Dataset.upgrade``).
///
/// A path that holds a file is refused (``ExistingFileError``, a
/// ``FileExistsError``) unless ``overwrite=True`` (replace it, atomically,
/// at the first commit) or ``append=True`` (add to it). Two writers
/// creating the same path take turns through its lock file
/// (``.<name>.lock`` beside it, while it is created): the second waits for the first's
/// first commit (``timeout`` at most), then finds the file there. A writer
/// never closed commits what it wrote when it is finalized, with a
/// ``ResourceWarning``.
#[pyclass(name = "DatasetWriter", module = "blockmap", frozen, subclass)]
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

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyDatasetWriter {
    #[new]
    #[pyo3(
        signature = (
            path,
            append = false,
            timeout = TimeoutArg(Some(std::time::Duration::ZERO)),
            *,
            overwrite = false,
            _version = None,
        ),
        text_signature = "(path, append=False, timeout=0.0, *, overwrite=False, _version=None)"
    )]
    // `_version` is private (tests and benchmarks of earlier layouts)
    #[allow(clippy::used_underscore_binding)]
    fn new(
        py: Python<'_>,
        path: FileArg<'_>,
        append: bool,
        timeout: TimeoutArg,
        overwrite: bool,
        _version: Option<u32>,
    ) -> PyResult<Self> {
        let path = path.into_path(py, "a dataset writer")?;
        if append && overwrite {
            return Err(invalid(
                py,
                "append=True adds to a dataset, overwrite=True replaces it: not both",
            ));
        }
        let TimeoutArg(timeout) = timeout;
        let writer = detached(py, || match (append, _version) {
            (true, _) => dataset::Writer::append(&path, timeout),
            // the layouts of earlier versions, for tests and benchmarks
            (false, Some(version)) => {
                dataset::Writer::create_version(&path, timeout, overwrite, version)
            }
            (false, None) => dataset::Writer::create(&path, timeout, overwrite),
        })?;
        Ok(PyDatasetWriter {
            writer: ForkMutex::new(writer),
            path,
        })
    }

    /// Add an entry at the end of the dataset: ``write(tensor)`` (a
    /// dataset of single maps) or ``write(name=tensor, ...)`` (an entry of
    /// named fields, in the order given), with ``columns={"name": value}``
    /// (ints or floats) stored in the index. Every entry of a dataset has
    /// the same fields and columns (in the first entry's order; later
    /// entries may give them in any order, and an int for a float column).
    ///
    /// Parameters
    /// ----------
    /// tensor : TensorMap, optional
    ///     The map of a dataset of single maps.
    /// columns : dict, optional
    ///     Named scalars (int or float) of this entry.
    /// **fields : TensorMap
    ///     The named maps of this entry.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If the writer is closed or re-entered, or the entry's fields or
    ///     columns differ from the dataset's.
    /// BlockMapIOError
    ///     If the write fails.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    #[pyo3(signature = (tensor = None, /, *, columns = None, **fields))]
    fn write(
        &self,
        py: Python<'_>,
        tensor: Option<&Bound<'_, PyAny>>,
        columns: Option<&Bound<'_, pyo3::types::PyDict>>,
        fields: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<()> {
        let as_map = |object: &Bound<'_, PyAny>| {
            object
                .cast::<PyTensorMap>()
                .map(|t| t.get().map())
                .map_err(|_| {
                    wrong_type(
                        py,
                        format!("a dataset holds TensorMaps, not {}", type_name(object)),
                    )
                })
        };
        let mut maps = Vec::new();
        let single = match (tensor, fields) {
            (Some(tensor), None) => {
                maps.push((dataset::SINGLE_FIELD.to_string(), as_map(tensor)?));
                true
            }
            (None, Some(fields)) if !fields.is_empty() => {
                for (name, value) in fields.iter() {
                    let name = text_name(py, &name, "field")?;
                    maps.push((name, as_map(&value)?));
                }
                false
            }
            (Some(_), Some(_)) => {
                return Err(invalid(
                    py,
                    "write(tensor) or write(name=tensor, ...), not both",
                ))
            }
            _ => {
                return Err(wrong_type(
                    py,
                    "write() needs a TensorMap, or named TensorMaps",
                ))
            }
        };
        let mut values = Vec::new();
        if let Some(columns) = columns {
            for (name, value) in columns.iter() {
                let name = text_name(py, &name, "column")?;
                let value = column_value(py, &name, &value)?;
                values.push((name, value));
            }
        }
        let snapshots: Vec<(String, crate::arc::ForkArc<crate::TensorMap>)> = maps;
        self.with(py, move |writer| {
            writer.write_entry(&dataset::Entry {
                fields: snapshots.iter().map(|(n, m)| (n.as_str(), &**m)).collect(),
                columns: values.iter().map(|(n, v)| (n.as_str(), *v)).collect(),
                single,
            })
        })
    }

    /// Write the commit record and its trailer now (``close`` does it
    /// too), so that opening the file reads the index alone. A commit
    /// writes the index of the entries written since the last one (with
    /// earlier pieces it merges, amortized a logarithmic factor; in a
    /// file of version 2 or 3, the whole index again), and syncs the file.
    /// A write is in the file when it returns, committed or not.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If the writer is closed or re-entered.
    /// BlockMapIOError
    ///     If the write or the sync fails.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, dataset::Writer::commit)
    }

    /// Commit and close: writing afterwards is an error.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If the writer is re-entered.
    /// BlockMapIOError
    ///     If the write or the sync fails.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, dataset::Writer::close)
    }

    /// Whether it is open (neither closed nor given up) in this process
    /// (not a forked child of the one that opened it): what finalizing
    /// an unclosed writer commits.
    fn _open_here(&self) -> bool {
        self.writer.lock().is_ok_and(|writer| writer.is_open_here())
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

    /// Give up a new dataset not in place yet (its path keeps what it
    /// held, nothing is left behind); a dataset in place (appended to, or
    /// committed) is committed and closed, as by ``close()``.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If the writer is re-entered.
    /// BlockMapIOError
    ///     If the file cannot be truncated back.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, dataset::Writer::abort)
    }

    /// Closes the writer: the maps written so far are committed. When the
    /// block raised, a new dataset not in place yet is given up instead
    /// (``abort()``): what the path held stays.
    #[pyo3(signature = (exc_type, *_args))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        _args: &Bound<'_, pyo3::types::PyTuple>,
    ) -> PyResult<bool> {
        if exc_type.is_none() {
            self.close(py)?;
        } else {
            self.abort(py)?;
        }
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

/// A zip blockmap did not write (metatrain's ``DiskDataset``), read with the
/// bounds of blockmap's own readers (see ``src/io/foreign.rs``):
/// ``_ForeignZip(path)``, ``names()``, ``load(name)`` (the map wrapped in
/// the NPY array of bytes that member ``name`` is).
#[pyclass(name = "_ForeignZip", module = "blockmap._blockmap", frozen)]
#[derive(Debug)]
pub struct PyForeignZip {
    zip: ForkMutex<crate::io::foreign::ForeignZip>,
}

/// A `_ForeignZip` read from a signal handler during one of its own reads.
fn zip_reentered() -> crate::Error {
    crate::Error::invalid(
        "this zip is being read by this thread already (called from a signal handler during \
         one of its own reads)",
    )
}

#[pymethods]
impl PyForeignZip {
    #[new]
    fn new(py: Python<'_>, path: FileArg<'_>) -> PyResult<Self> {
        let path = path.into_path(py, "a zip")?;
        let zip = detached(py, || crate::io::foreign::ForeignZip::open(&path))?;
        Ok(PyForeignZip {
            zip: ForkMutex::new(zip),
        })
    }

    /// The bytes of member ``name`` (a ``system.mta``: a zip itself), its
    /// CRC checked, within the bounds ``load`` has.
    fn raw<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let zip = &self.zip;
        let bytes = detached(py, || {
            zip.lock().map_err(|_| zip_reentered())?.raw_bytes(name)
        })?;
        Ok(pyo3::types::PyBytes::new(py, &bytes))
    }

    /// The members' names, in the zip's order.
    fn names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let zip = &self.zip;
        detached(py, || zip.lock().map_err(|_| zip_reentered())?.names())
    }

    /// The map wrapped in member ``name`` (an NPY array of bytes holding
    /// an ``.mts`` archive), every CRC checked.
    fn load(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyTensorMap>> {
        let zip = &self.zip;
        let map = detached(py, || {
            let bytes = zip
                .lock()
                .map_err(|_| zip_reentered())?
                .wrapped_bytes(name)?;
            match crate::io::load_buffer(bytes, crate::data::Kind::Tensor) {
                Ok(crate::data::Data::Tensor(map)) => Ok(map),
                Ok(_) => Err(crate::Error::internal("a map loaded as something else")),
                Err(e) => Err(e.context(format!("member '{name}'"))),
            }
        })?;
        Py::new(py, PyTensorMap::from_map(map))
    }
}

/// A field's or column's name: a `str` that UTF-8 encodes (a lone
/// surrogate, as `os.fsdecode` makes of undecodable bytes, does not).
fn text_name(py: Python<'_>, name: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    if !name.is_instance_of::<pyo3::types::PyString>() {
        return Err(wrong_type(
            py,
            format!("{what} names are str, not {}", type_name(name)),
        ));
    }
    name.extract().map_err(|_| {
        invalid(
            py,
            format!(
                "{what} names are stored as UTF-8, and {} holds a lone surrogate",
                name.repr()
                    .map_or_else(|_| "this name".into(), |r| r.to_string())
            ),
        )
    })
}

/// `numpy.generic`, the class of numpy's scalars.
static NUMPY_GENERIC: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();

/// The value of column `name`: what a user means by a number, whatever
/// the library it comes from (docs/format.md, "Datasets"):
///
/// - a Python int (within int64) or float;
/// - a numpy scalar or 0-d array of an integer or floating dtype, and a
///   0-d torch tensor of an integer or floating dtype, taken by value
///   (`.item()`);
/// - a bool of any of them (Python's, `numpy.bool_`, a bool array or
///   tensor) is refused: a column is never a bool (`True` would be stored
///   as 1);
/// - anything else (a string, a complex number, an array of several
///   values, a `Decimal`) is refused with blockmap's `TypeError`, naming
///   the column and the type.
fn column_value(
    py: Python<'_>,
    name: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<dataset::ColumnValue> {
    let refused = |what: String| {
        wrong_type(
            py,
            format!(
                "column '{name}': a column value is an int or a float (Python's, or a numpy \
                 or torch scalar), not {what}"
            ),
        )
    };
    let int = |number: &Bound<'_, PyAny>| {
        number
            .extract::<i64>()
            .map(dataset::ColumnValue::Int)
            .map_err(|_| {
                invalid(
                    py,
                    format!("column '{name}': value {number} is outside int64"),
                )
            })
    };
    let float = |number: &Bound<'_, PyAny>| {
        number
            .extract::<f64>()
            .map(dataset::ColumnValue::Float)
            .map_err(|_| refused(type_name(value)))
    };
    if value.is_instance_of::<pyo3::types::PyBool>() {
        return Err(refused("bool".into()));
    }
    if value.is_instance_of::<pyo3::types::PyInt>() {
        return int(value);
    }
    if value.is_instance_of::<pyo3::types::PyFloat>() {
        return float(value);
    }
    let generic = NUMPY_GENERIC.import(py, "numpy", "generic")?;
    if value.is_instance_of::<numpy::PyUntypedArray>() || value.is_instance(generic)? {
        let shape: Vec<usize> = value.getattr("shape")?.extract()?;
        let dtype = value.getattr("dtype")?;
        if !shape.is_empty() {
            return Err(refused(format!(
                "a numpy array of shape {shape:?} (dtype {dtype})"
            )));
        }
        let item = || {
            value
                .call_method0("item")
                .map_err(|_| refused(format!("numpy {dtype}")))
        };
        return match dtype.getattr("kind")?.extract::<String>()?.as_str() {
            "b" => Err(refused(format!("a bool (numpy {dtype})"))),
            "i" | "u" => int(&item()?),
            "f" => float(value),
            _ => Err(refused(format!("numpy {dtype}"))),
        };
    }
    if super::torch::is_tensor(value)? {
        let dtype = value.getattr("dtype")?;
        let shape: Vec<usize> = value
            .getattr("shape")?
            .try_iter()?
            .map(|n| n.and_then(|n| n.extract()))
            .collect::<PyResult<_>>()?;
        if !shape.is_empty() {
            return Err(refused(format!(
                "a torch tensor of shape {shape:?} ({dtype})"
            )));
        }
        let test = |method: &str| -> PyResult<bool> { value.call_method0(method)?.extract() };
        let item = || {
            value
                .call_method0("item")
                .map_err(|_| refused(format!("a tensor of {dtype}")))
        };
        if dtype.eq(super::torch::torch(py)?.getattr("bool")?)? {
            return Err(refused(format!("a bool (a tensor of {dtype})")));
        }
        if test("is_complex")? {
            return Err(refused(format!("a tensor of {dtype}")));
        }
        if test("is_floating_point")? {
            return float(&item()?);
        }
        let item = item()?;
        if !item.is_instance_of::<pyo3::types::PyInt>() {
            return Err(refused(format!("a tensor of {dtype}")));
        }
        return int(&item);
    }
    Err(refused(type_name(value)))
}

/// The writer's ``timeout``: seconds (``>= 0``), or ``None`` for no limit.
#[derive(Clone, Copy, Debug)]
pub struct TimeoutArg(dataset::Timeout);

impl FromPyObject<'_, '_> for TimeoutArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, '_, PyAny>) -> PyResult<Self> {
        let py = obj.py();
        if obj.is_none() {
            return Ok(TimeoutArg(None));
        }
        if obj.is_instance_of::<pyo3::types::PyBool>()
            || !(obj.is_instance_of::<pyo3::types::PyFloat>()
                || obj.is_instance_of::<pyo3::types::PyInt>())
        {
            return Err(wrong_type(
                py,
                format!(
                    "timeout must be a number of seconds or None, not {}",
                    super::errors::type_name(&obj)
                ),
            ));
        }
        let seconds: f64 = obj
            .extract()
            .map_err(|_| invalid(py, "timeout is too large a number"))?;
        if seconds.is_nan() || seconds < 0.0 {
            return Err(invalid(
                py,
                format!("timeout must be a number of seconds >= 0 or None, got {seconds}"),
            ));
        }
        // a wait longer than any machine runs is no limit
        Ok(TimeoutArg(
            std::time::Duration::try_from_secs_f64(seconds).ok(),
        ))
    }
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyDataset>()?;
    module.add_class::<PyDatasetWriter>()?;
    module.add_class::<PyForeignZip>()?;
    Ok(())
}
