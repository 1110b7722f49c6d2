//! `blockmap.save`, `blockmap.load` and their siblings, and the shared
//! functions behind the `save`/`load` methods of the three classes. Paths
//! are saved and loaded with the GIL released.

use pyo3::prelude::*;
use pyo3::types::{PyMemoryView, PySlice};

use super::array::{buffer_from_python, BufferOwner};
use super::classes::Arrays;
use super::convert::{held_from_python, to_python_as, LabelsArg};
use super::errors::wrong_type;
use super::file::{with_mts_extension, FileArg, MmapArg, PyFileIo, UseNumpy};
use super::gil::detached;
use super::torch::arrays_arg;
use crate::data::{DataRef, Kind};
use crate::io;
use crate::labels::Labels;

/// Save `data` to `file`: a path (`.mts` appended when missing), written
/// atomically with the GIL released; a seekable file object, streamed in
/// chunks; or a file object that cannot seek, given the archive at once.
pub fn save(py: Python<'_>, file: FileArg<'_>, data: DataRef<'_>, durable: bool) -> PyResult<()> {
    match file {
        FileArg::Path(path) => {
            let path = with_mts_extension(py, path)?;
            detached(py, || io::save_path(&path, data, durable))
        }
        FileArg::File(file) => {
            if seekable(&file)? {
                let writer = PyFileIo::new(file)?;
                io::save(writer, data)
                    .and_then(|mut writer| {
                        std::io::Write::flush(&mut writer)
                            .map_err(|e| crate::Error::io("flushing the file", e))
                    })
                    .map_err(PyFileIo::error)
            } else {
                write_whole(&file, &save_buffer(py, data)?)
            }
        }
    }
}

/// Whether `file.seekable()` says so (a file object without the method
/// cannot seek, as for `io.IOBase`'s users).
fn seekable(file: &Bound<'_, PyAny>) -> PyResult<bool> {
    if !file.hasattr("seekable")? {
        return Ok(false);
    }
    file.call_method0("seekable")?.is_truthy()
}

/// Write all of `archive` to a file object that cannot seek: raw files
/// may write less than asked (again with the rest), and one that writes
/// nothing has failed (`BlockMapIOError`, as from a seekable one).
fn write_whole(file: &Bound<'_, PyAny>, archive: &Bound<'_, PyMemoryView>) -> PyResult<()> {
    let len = archive.len()?;
    let mut done = 0;
    while done < len {
        let rest = if done == 0 {
            archive.clone().into_any()
        } else {
            // a memoryview is at most isize::MAX bytes long
            let start = isize::try_from(done).unwrap_or(isize::MAX);
            archive.get_item(PySlice::new(file.py(), start, isize::MAX, 1))?
        };
        let written = file.call_method1("write", (rest,))?;
        // buffered files return None or the length
        let written = if written.is_none() {
            len - done
        } else {
            written.extract::<usize>().unwrap_or(0).min(len - done)
        };
        if written == 0 {
            return Err(crate::Error::io(
                "writing the archive",
                std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    "failed to write whole buffer",
                ),
            )
            .into());
        }
        done += written;
    }
    Ok(())
}

/// The archive of `data` in a memoryview over memory blockmap owns.
pub fn save_buffer<'py>(py: Python<'py>, data: DataRef<'_>) -> PyResult<Bound<'py, PyMemoryView>> {
    let buffer = detached(py, || io::save_buffer(data))?;
    let owner = Bound::new(py, BufferOwner::new(buffer))?;
    PyMemoryView::from(&owner.into_any())
}

/// Load `kind` from `file`: a path, read (or mapped, with `mmap`) with the
/// GIL released; or a binary file object, read whole.
pub fn load(
    py: Python<'_>,
    file: FileArg<'_>,
    kind: Kind,
    mmap: MmapArg,
    arrays: Arrays,
    keys: Option<&Labels>,
) -> PyResult<Py<PyAny>> {
    match file {
        FileArg::Path(path) => {
            let data = detached(py, || io::load_path_selected(&path, kind, mmap.0, keys))?;
            to_python_as(py, data, arrays)
        }
        FileArg::File(file) => {
            if mmap.0.is_some() {
                return Err(wrong_type(py, "mmap needs a path, not a file object"));
            }
            if keys.is_some() && seekable(&file)? {
                // only the directory, the keys and the selected blocks are
                // read, through file.read and file.seek
                let data =
                    io::load_selected(PyFileIo::new(file)?, kind, keys).map_err(PyFileIo::error)?;
                return to_python_as(py, data, arrays);
            }
            load_buffer(py, &file.call_method0("read")?, kind, arrays, keys)
        }
    }
}

/// Load `kind` from a bytes-like object, viewing it where possible.
pub fn load_buffer(
    py: Python<'_>,
    buffer: &Bound<'_, PyAny>,
    kind: Kind,
    arrays: Arrays,
    keys: Option<&Labels>,
) -> PyResult<Py<PyAny>> {
    let buffer = buffer_from_python(buffer)?;
    let data = detached(py, || io::load_buffer_selected(buffer, kind, true, keys))?;
    to_python_as(py, data, arrays)
}

/// The Labels a `keys=` argument selects blocks by.
pub fn keys_arg(keys: Option<LabelsArg>) -> Option<Labels> {
    keys.map(|keys| keys.0)
}

/// Save a :class:`TensorMap`, :class:`TensorBlock` or :class:`Labels` to ``file``.
///
/// ``file`` is a path (``str`` or :class:`os.PathLike`) or a binary file object.
/// A path that does not end with ``.mts`` gets ``.mts`` appended, as metatensor
/// does. Saving to a path streams the arrays' memory straight into a temporary
/// file beside the target, renamed over it once complete, with the GIL
/// released. A seekable file object receives the archive in chunks of at most
/// 8 MB; a file object that cannot seek receives the archive built in memory.
///
/// A save to a path is atomic: readers see the old file or the new one, and a
/// process killed at any moment leaves the old file. With ``durable=True``
/// (the default) the data and the rename also reach the disk before
/// ``save`` returns (``fdatasync``, then ``fsync`` of the directory), so the
/// saved file survives a crash of the system or a power cut too.
/// ``durable=False`` skips those two syncs, as ``numpy.save``,
/// ``torch.save`` and safetensors do: for files that can be made again
/// (caches, scratch files), it returns once the kernel holds the data. A
/// file object is written as it is; syncing it is its owner's choice.
///
/// ``use_numpy`` is metatensor-core's, accepted and ignored: blockmap has
/// one implementation.
///
/// Parameters
/// ----------
/// file : str, os.PathLike or binary file object
///     The path (``.mts`` appended when missing) or a writable file object.
/// data : TensorMap, TensorBlock or Labels
///     What to save.
/// use_numpy : bool, optional
///     metatensor-core's argument, accepted and ignored.
/// durable : bool, optional
///     For a path: sync the data and the rename to disk before returning
///     (the default).
///
/// Raises
/// ------
/// BlockMapIOError
///     If the operating system refuses the write, the file object fails, or
///     mapped data was lost (its file truncated by another program).
/// ValidationError
///     If an argument has an invalid value.
/// BlockMapTypeError
///     If an argument has the wrong type.
/// BlockMapMemoryError
///     If memory for the result cannot be allocated.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction(name = "save", signature = (file, data, use_numpy = UseNumpy, *, durable = true), text_signature = "(file, data, use_numpy=False, *, durable=True)")]
fn py_save(
    py: Python<'_>,
    file: FileArg<'_>,
    data: &Bound<'_, PyAny>,
    use_numpy: UseNumpy,
    durable: bool,
) -> PyResult<()> {
    let _ = use_numpy;
    save(py, file, held_from_python(data)?.as_ref(), durable)
}

/// The ``.mts`` archive of ``data``, in a memoryview over memory blockmap owns.
/// ``use_numpy`` is accepted and ignored (see :func:`save`).
///
/// Parameters
/// ----------
/// data : TensorMap, TensorBlock or Labels
///     What to save.
/// use_numpy : bool, optional
///     metatensor-core's argument, accepted and ignored.
///
/// Returns
/// -------
/// memoryview
///     The archive (``.npy`` data for Labels).
///
/// Raises
/// ------
/// BlockMapTypeError
///     If an argument has the wrong type.
/// ValidationError
///     If an argument has an invalid value.
/// BlockMapIOError
///     If mapped data was lost (its file truncated by another program).
/// BlockMapMemoryError
///     If memory for the result cannot be allocated.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction(name = "save_buffer", signature = (data, use_numpy = UseNumpy), text_signature = "(data, use_numpy=False)")]
fn py_save_buffer<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    use_numpy: UseNumpy,
) -> PyResult<Bound<'py, PyMemoryView>> {
    let _ = use_numpy;
    save_buffer(py, held_from_python(data)?.as_ref())
}

/// Load a :class:`TensorMap` from a path or a binary file object.
///
/// ``use_numpy`` is metatensor-core's, accepted and ignored: ``arrays=``
/// alone chooses numpy arrays (the default) or torch tensors.
///
/// With ``mmap=True`` (or ``"r"``; paths only) the file is mapped instead of
/// read: every uncompressed, aligned, native-endian array is a read-only
/// view of the mapping, other arrays are copied; ``mmap="c"`` maps it
/// copy-on-write instead, for writable views whose writes never reach the
/// file. Labels are read into memory they own. Mapping costs only the
/// metadata, whatever the size of the file; CRCs are not checked (use
/// :func:`verify`). The values follow the file: if another program
/// rewrites it, they change, and if it truncates it, the lost part reads as
/// zeros and blockmap refuses to save, pickle or copy the map. Without
/// ``mmap``, the data is read once into memory blockmap owns and every CRC
/// is checked.
///
/// ``arrays="torch"`` gives a map of torch tensors over the same memory
/// (``torch.from_numpy`` of each array; read-only memory, as with
/// ``mmap=True``, gives tensors torch warns about once: do not write into
/// them).
///
/// ``keys`` (:class:`Labels`) loads only the blocks whose keys match it, as
/// ``Labels.select`` matches (the entries with the selection's values in
/// its dimensions; keys in the file's order, or in the selection's when it
/// has all of the keys' dimensions): the archive's directory, the keys and
/// the selected blocks are read, and nothing else, mapped or not.
///
/// Parameters
/// ----------
/// file : str, os.PathLike or binary file object
///     The path, or a readable binary file object.
/// use_numpy : bool, optional
///     metatensor-core's argument, accepted and ignored.
/// mmap : bool or {"r", "c"}, optional
///     Map the file instead of reading it (paths only): read-only views
///     (``True`` or ``"r"``) or copy-on-write views (``"c"``).
/// arrays : {"numpy", "torch"}, optional
///     The array type of the result (numpy arrays by default); torch
///     tensors share the same memory.
/// keys : Labels, optional
///     Load only the blocks whose keys match these entries.
///
/// Returns
/// -------
/// TensorMap
///     The map.
///
/// Raises
/// ------
/// MissingFileError
///     If ``file`` is a path that does not exist.
/// BlockMapIOError
///     If the operating system refuses the read, or the file object fails.
/// FormatError
///     If the data is not a valid archive of the expected kind.
/// ValidationError
///     If an argument has an invalid value.
/// BlockMapTypeError
///     If an argument has the wrong type.
/// BlockMapMemoryError
///     If memory for the result cannot be allocated.
/// ModuleNotFoundError
///     If ``arrays="torch"`` and torch is not installed.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction(name = "load", signature = (file, use_numpy = UseNumpy, *, mmap = MmapArg::default(), arrays = None, keys = None), text_signature = "(file, use_numpy=False, *, mmap=False, arrays=None, keys=None)")]
fn py_load(
    py: Python<'_>,
    file: FileArg<'_>,
    use_numpy: UseNumpy,
    mmap: MmapArg,
    arrays: Option<&str>,
    keys: Option<LabelsArg>,
) -> PyResult<Py<PyAny>> {
    let _ = use_numpy;
    let arrays = arrays_arg(py, arrays, Arrays::Numpy)?;
    load(
        py,
        file,
        Kind::Tensor,
        mmap,
        arrays,
        keys_arg(keys).as_ref(),
    )
}

/// Load a :class:`TensorBlock` saved on its own; see :func:`load`.
///
/// Parameters
/// ----------
/// file : str, os.PathLike or binary file object
///     The path, or a readable binary file object.
/// use_numpy : bool, optional
///     metatensor-core's argument, accepted and ignored.
/// mmap : bool or {"r", "c"}, optional
///     Map the file instead of reading it (paths only): read-only views
///     (``True`` or ``"r"``) or copy-on-write views (``"c"``).
/// arrays : {"numpy", "torch"}, optional
///     The array type of the result (numpy arrays by default); torch
///     tensors share the same memory.
///
/// Returns
/// -------
/// TensorBlock
///     The block.
///
/// Raises
/// ------
/// MissingFileError
///     If ``file`` is a path that does not exist.
/// BlockMapIOError
///     If the operating system refuses the read, or the file object fails.
/// FormatError
///     If the data is not a valid archive of the expected kind.
/// ValidationError
///     If an argument has an invalid value.
/// BlockMapTypeError
///     If an argument has the wrong type.
/// BlockMapMemoryError
///     If memory for the result cannot be allocated.
/// ModuleNotFoundError
///     If ``arrays="torch"`` and torch is not installed.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction(name = "load_block", signature = (file, use_numpy = UseNumpy, *, mmap = MmapArg::default(), arrays = None), text_signature = "(file, use_numpy=False, *, mmap=False, arrays=None)")]
fn py_load_block(
    py: Python<'_>,
    file: FileArg<'_>,
    use_numpy: UseNumpy,
    mmap: MmapArg,
    arrays: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let _ = use_numpy;
    let arrays = arrays_arg(py, arrays, Arrays::Numpy)?;
    load(py, file, Kind::Block, mmap, arrays, None)
}

/// Load Labels saved on their own (a bare ``.npy`` file).
///
/// Parameters
/// ----------
/// file : str, os.PathLike or binary file object
///     The path, or a readable binary file object.
///
/// Returns
/// -------
/// Labels
///     The Labels.
///
/// Raises
/// ------
/// MissingFileError
///     If ``file`` is a path that does not exist.
/// BlockMapIOError
///     If the operating system refuses the read, or the file object fails.
/// FormatError
///     If the data is not a valid archive of the expected kind.
/// ValidationError
///     If an argument has an invalid value.
/// BlockMapTypeError
///     If an argument has the wrong type.
/// BlockMapMemoryError
///     If memory for the result cannot be allocated.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction(name = "load_labels")]
fn py_load_labels(py: Python<'_>, file: FileArg<'_>) -> PyResult<Py<PyAny>> {
    load(py, file, Kind::Labels, MmapArg(None), Arrays::Numpy, None)
}

/// Load a :class:`TensorMap` from a bytes-like object (``bytes``, ``bytearray``,
/// ``memoryview``, numpy array, ...).
///
/// Uncompressed, aligned, native-endian arrays are views of ``buffer``
/// (read-only when it is), which they keep alive; others are copied.
/// ``arrays="torch"`` gives torch tensors over the same memory and
/// ``keys`` selects blocks (see :func:`load`).
///
/// Parameters
/// ----------
/// buffer : bytes-like object
///     The archive: ``bytes``, ``bytearray``, ``memoryview``, a numpy array, ...
/// use_numpy : bool, optional
///     metatensor-core's argument, accepted and ignored.
/// arrays : {"numpy", "torch"}, optional
///     The array type of the result (numpy arrays by default); torch
///     tensors share the same memory.
/// keys : Labels, optional
///     Load only the blocks whose keys match these entries.
///
/// Returns
/// -------
/// TensorMap
///     The map.
///
/// Raises
/// ------
/// FormatError
///     If the data is not a valid archive of the expected kind.
/// ValidationError
///     If an argument has an invalid value.
/// BlockMapTypeError
///     If an argument has the wrong type.
/// BlockMapMemoryError
///     If memory for the result cannot be allocated.
/// ModuleNotFoundError
///     If ``arrays="torch"`` and torch is not installed.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction(name = "load_buffer", signature = (buffer, use_numpy = UseNumpy, *, arrays = None, keys = None), text_signature = "(buffer, use_numpy=False, *, arrays=None, keys=None)")]
fn py_load_buffer(
    py: Python<'_>,
    buffer: &Bound<'_, PyAny>,
    use_numpy: UseNumpy,
    arrays: Option<&str>,
    keys: Option<LabelsArg>,
) -> PyResult<Py<PyAny>> {
    let _ = use_numpy;
    let arrays = arrays_arg(py, arrays, Arrays::Numpy)?;
    load_buffer(py, buffer, Kind::Tensor, arrays, keys_arg(keys).as_ref())
}

/// Load a :class:`TensorBlock` from a bytes-like object; see :func:`load_buffer`.
///
/// Parameters
/// ----------
/// buffer : bytes-like object
///     The archive: ``bytes``, ``bytearray``, ``memoryview``, a numpy array, ...
/// use_numpy : bool, optional
///     metatensor-core's argument, accepted and ignored.
/// arrays : {"numpy", "torch"}, optional
///     The array type of the result (numpy arrays by default); torch
///     tensors share the same memory.
///
/// Returns
/// -------
/// TensorBlock
///     The block.
///
/// Raises
/// ------
/// FormatError
///     If the data is not a valid archive of the expected kind.
/// ValidationError
///     If an argument has an invalid value.
/// BlockMapTypeError
///     If an argument has the wrong type.
/// BlockMapMemoryError
///     If memory for the result cannot be allocated.
/// ModuleNotFoundError
///     If ``arrays="torch"`` and torch is not installed.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction(name = "load_block_buffer", signature = (buffer, use_numpy = UseNumpy, *, arrays = None), text_signature = "(buffer, use_numpy=False, *, arrays=None)")]
fn py_load_block_buffer(
    py: Python<'_>,
    buffer: &Bound<'_, PyAny>,
    use_numpy: UseNumpy,
    arrays: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let _ = use_numpy;
    let arrays = arrays_arg(py, arrays, Arrays::Numpy)?;
    load_buffer(py, buffer, Kind::Block, arrays, None)
}

/// Load Labels from a bytes-like object holding a ``.npy`` file.
///
/// Parameters
/// ----------
/// buffer : bytes-like object
///     The ``.npy`` data.
///
/// Returns
/// -------
/// Labels
///     The Labels.
///
/// Raises
/// ------
/// FormatError
///     If the data is not a valid archive of the expected kind.
/// ValidationError
///     If an argument has an invalid value.
/// BlockMapTypeError
///     If an argument has the wrong type.
/// BlockMapMemoryError
///     If memory for the result cannot be allocated.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction(name = "load_labels_buffer")]
fn py_load_labels_buffer(py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    load_buffer(py, buffer, Kind::Labels, Arrays::Numpy, None)
}

/// Check a ``.mts`` file completely: structure, every CRC, and the data
/// model's rules. Raises :class:`blockmap.FormatError` (a ``ValueError``)
/// when something is wrong.
///
/// Parameters
/// ----------
/// file : str, os.PathLike or binary file object
///     The file to check.
///
/// Raises
/// ------
/// FormatError
///     If the file is not a valid ``.mts`` archive or breaks the data model.
/// MissingFileError
///     If the path does not exist.
/// BlockMapIOError
///     If the read fails.
/// BlockMapTypeError
///     If an argument has the wrong type.
/// BlockMapMemoryError
///     If memory for the result cannot be allocated.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction(name = "verify")]
fn py_verify(py: Python<'_>, file: FileArg<'_>) -> PyResult<()> {
    let path = file.into_path(py, "verify")?;
    detached(py, || io::verify_path(&path)).map(drop)
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
