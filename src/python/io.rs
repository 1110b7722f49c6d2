//! `blockmap.save`, `blockmap.load` and their siblings, and the shared
//! functions behind the `save`/`load` methods of the three classes. Paths
//! are saved and loaded with the GIL released.

use pyo3::prelude::*;
use pyo3::types::PyMemoryView;

use super::array::{buffer_from_python, BufferOwner};
use super::convert::{held_from_python, to_python};
use super::errors::wrong_type;
use super::file::{with_mts_extension, FileArg, PyFileWriter};
use crate::data::{DataRef, Kind};
use crate::io;

/// Save `data` to `file`: a path (`.mts` appended when missing), written
/// atomically with the GIL released; a seekable file object, streamed in
/// chunks; or a file object that cannot seek, given the archive at once.
pub fn save(py: Python<'_>, file: FileArg<'_>, data: DataRef<'_>) -> PyResult<()> {
    match file {
        FileArg::Path(path) => {
            let path = with_mts_extension(path);
            Ok(py.detach(|| io::save_path(&path, data))?)
        }
        FileArg::File(file) => {
            if file.call_method0("seekable").and_then(|s| s.is_truthy())? {
                let writer = PyFileWriter::new(file)?;
                io::save(writer, data)
                    .and_then(|mut writer| {
                        std::io::Write::flush(&mut writer)
                            .map_err(|e| crate::Error::io("flushing the file", e))
                    })
                    .map_err(PyFileWriter::error)
            } else {
                let archive = save_buffer(py, data)?;
                file.call_method1("write", (archive,)).map(drop)
            }
        }
    }
}

/// The archive of `data` in a memoryview over memory blockmap owns.
pub fn save_buffer<'py>(py: Python<'py>, data: DataRef<'_>) -> PyResult<Bound<'py, PyMemoryView>> {
    let buffer = py.detach(|| io::save_buffer(data))?;
    let owner = Bound::new(py, BufferOwner::new(buffer))?;
    PyMemoryView::from(&owner.into_any())
}

/// Load `kind` from `file`: a path, read (or mapped, with `mmap`) with the
/// GIL released; or a binary file object, read whole.
pub fn load(py: Python<'_>, file: FileArg<'_>, kind: Kind, mmap: bool) -> PyResult<Py<PyAny>> {
    match file {
        FileArg::Path(path) => {
            let data = py.detach(|| io::load_path(&path, kind, mmap))?;
            to_python(py, data)
        }
        FileArg::File(file) => {
            if mmap {
                return Err(wrong_type(py, "mmap=True needs a path, not a file object"));
            }
            load_buffer(py, &file.call_method0("read")?, kind)
        }
    }
}

/// Load `kind` from a bytes-like object, viewing it where possible.
pub fn load_buffer(py: Python<'_>, buffer: &Bound<'_, PyAny>, kind: Kind) -> PyResult<Py<PyAny>> {
    let buffer = buffer_from_python(buffer)?;
    let data = py.detach(|| io::load_buffer(buffer, kind))?;
    to_python(py, data)
}

/// Save a :class:`TensorMap`, :class:`TensorBlock` or :class:`Labels` to ``file``.
///
/// ``file`` is a path (``str`` or :class:`os.PathLike`) or a binary file object.
/// A path that does not end with ``.mts`` gets ``.mts`` appended, as metatensor
/// does. Saving to a path streams the arrays' memory straight into a temporary
/// file beside the target, renamed over it once complete, with the GIL
/// released. A seekable file object receives the archive in chunks of at most
/// 8 MB; a file object that cannot seek receives the archive built in memory.
#[pyfunction(name = "save")]
fn py_save(py: Python<'_>, file: FileArg<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
    save(py, file, held_from_python(data)?.as_ref())
}

/// The ``.mts`` archive of ``data``, in a memoryview over memory blockmap owns.
#[pyfunction(name = "save_buffer")]
fn py_save_buffer<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyMemoryView>> {
    save_buffer(py, held_from_python(data)?.as_ref())
}

/// Load a :class:`TensorMap` from a path or a binary file object.
///
/// With ``mmap=True`` (paths only) the file is mapped instead of read: every
/// uncompressed, aligned, native-endian array is a view of the mapping
/// (copy-on-write: writing to it never changes the file), other arrays are
/// copied. Mapping costs only the metadata; CRCs are not checked (use
/// :func:`verify`). Without it, the data is read once into memory blockmap
/// owns and every CRC is checked.
#[pyfunction(name = "load", signature = (file, mmap = false))]
fn py_load(py: Python<'_>, file: FileArg<'_>, mmap: bool) -> PyResult<Py<PyAny>> {
    load(py, file, Kind::Tensor, mmap)
}

/// Load a :class:`TensorBlock` saved on its own; see :func:`load`.
#[pyfunction(name = "load_block", signature = (file, mmap = false))]
fn py_load_block(py: Python<'_>, file: FileArg<'_>, mmap: bool) -> PyResult<Py<PyAny>> {
    load(py, file, Kind::Block, mmap)
}

/// Load Labels saved on their own (a bare ``.npy`` file).
#[pyfunction(name = "load_labels")]
fn py_load_labels(py: Python<'_>, file: FileArg<'_>) -> PyResult<Py<PyAny>> {
    load(py, file, Kind::Labels, false)
}

/// Load a :class:`TensorMap` from a bytes-like object (``bytes``, ``bytearray``,
/// ``memoryview``, numpy array, ...).
///
/// Uncompressed, aligned, native-endian arrays are views of ``buffer``
/// (read-only when it is), which they keep alive; others are copied.
#[pyfunction(name = "load_buffer")]
fn py_load_buffer(py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    load_buffer(py, buffer, Kind::Tensor)
}

/// Load a :class:`TensorBlock` from a bytes-like object; see :func:`load_buffer`.
#[pyfunction(name = "load_block_buffer")]
fn py_load_block_buffer(py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    load_buffer(py, buffer, Kind::Block)
}

/// Load Labels from a bytes-like object holding a ``.npy`` file.
#[pyfunction(name = "load_labels_buffer")]
fn py_load_labels_buffer(py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    load_buffer(py, buffer, Kind::Labels)
}

/// Check a ``.mts`` file completely: structure, every CRC, and the data
/// model's rules. Raises :class:`blockmap.FormatError` (a ``ValueError``)
/// when something is wrong.
#[pyfunction(name = "verify")]
fn py_verify(py: Python<'_>, file: FileArg<'_>) -> PyResult<()> {
    let path = file.into_path(py, "verify")?;
    py.detach(|| io::verify_path(&path))?;
    Ok(())
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(py_save, module)?)?;
    module.add_function(wrap_pyfunction!(py_save_buffer, module)?)?;
    module.add_function(wrap_pyfunction!(py_load, module)?)?;
    module.add_function(wrap_pyfunction!(py_load_block, module)?)?;
    module.add_function(wrap_pyfunction!(py_load_labels, module)?)?;
    module.add_function(wrap_pyfunction!(py_load_buffer, module)?)?;
    module.add_function(wrap_pyfunction!(py_load_block_buffer, module)?)?;
    module.add_function(wrap_pyfunction!(py_load_labels_buffer, module)?)?;
    module.add_function(wrap_pyfunction!(py_verify, module)?)?;
    Ok(())
}
