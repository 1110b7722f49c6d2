//! The module-level functions of `blockmap._blockmap` that take or give
//! objects of the classes: `save`, `load` and their siblings (over the
//! helpers of `io.rs`, which the classes' `save`/`load` methods call too),
//! the reconstructors of pickle (`_reconstruct`, over `pickle.rs`) and of
//! torch-backed objects (`_as_torch`, over `torch.rs`), and the functions
//! of the multiprocessing reducer (`_shared_parts`, `_attach_shared`,
//! `_auto_shares`, over `shm.rs`), and `_zip_members` (the members of a
//! foreign zip, over `io::foreign`). They live above the classes: the
//! helpers they call return core data, and only these build objects.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMemoryView, PyTuple};

use super::array::{buffer_from_python, to_numpy};
use super::block::{Origin, PyTensorBlock};
use super::docstrings::docstring;
use super::errors::{type_name, wrong_type};
use super::file::{FileArg, MmapArg, UseNumpy};
use super::gil::detached;
use super::io::{load, load_buffer, save, save_buffer};
use super::labels::{keys_arg, LabelsArg, PyLabels};
use super::objects::{held_from_python, to_python, to_python_as};
use super::pickle::reconstruct;
use super::shm::{attach, auto_shares, wire_parts, WireParts};
use super::tensor::PyTensorMap;
use super::torch::{arrays_arg, map_with_leaves, torch, with_leaves, Arrays};
use crate::data::Kind;
use crate::io;

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
/// file object is written in place from its position, after what follows
/// that position is cut off (``truncate``), so that no reader takes what it
/// held for the new archive; one that cannot be cut is refused, untouched
/// (docs/format.md, "File objects"). Syncing it is its owner's choice.
///
/// ``use_numpy`` is metatensor-core's, accepted and ignored: blockmap has
/// one implementation.
///
/// Parameters
/// ----------
#[doc = docstring!(save_file)]
/// data : TensorMap, TensorBlock or Labels
///     What to save.
#[doc = docstring!(use_numpy)]
#[doc = docstring!(durable)]
///
#[doc = docstring!(raises_save)]
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
#[doc = docstring!(use_numpy)]
///
/// Returns
/// -------
/// memoryview
///     The archive (``.npy`` data for Labels).
///
/// Raises
/// ------
#[doc = docstring!(wrong_type)]
#[doc = docstring!(invalid)]
#[doc = docstring!(mapped_lost)]
#[doc = docstring!(no_memory)]
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
    let data = load(py, file, Kind::Tensor, mmap, keys_arg(keys).as_ref())?;
    to_python_as(py, data, arrays)
}

/// Load a :class:`TensorBlock` saved on its own; see :func:`load`.
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
    to_python_as(py, load(py, file, Kind::Block, mmap, None)?, arrays)
}

/// Load Labels saved on their own (a bare ``.npy`` file).
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
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction(name = "load_labels")]
fn py_load_labels(py: Python<'_>, file: FileArg<'_>) -> PyResult<Py<PyAny>> {
    to_python(py, load(py, file, Kind::Labels, MmapArg(None), None)?)
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
    let data = load_buffer(py, buffer, Kind::Tensor, keys_arg(keys).as_ref())?;
    to_python_as(py, data, arrays)
}

/// Load a :class:`TensorBlock` from a bytes-like object; see :func:`load_buffer`.
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
    to_python_as(py, load_buffer(py, buffer, Kind::Block, None)?, arrays)
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
#[doc = docstring!(raises_load_buffer)]
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction(name = "load_labels_buffer")]
fn py_load_labels_buffer(py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    to_python(py, load_buffer(py, buffer, Kind::Labels, None)?)
}

/// Check a ``.mts`` file or a dataset file completely: structure, every
/// CRC, and the data model's rules. Raises :class:`blockmap.FormatError`
/// (a ``ValueError``) when something is wrong. A ``.mts`` file is read
/// through a read-only mapping: checking it takes the memory of its
/// labels, not of its arrays. A dataset file (of any
/// format version) is read whole: every record's and every entry's CRC32,
/// every entry decoded, its columns against the index; the error's
/// message names the file and the number of problems on its first line,
/// then gives one line per problem (1,000 at most).
///
/// Parameters
/// ----------
/// file : str, os.PathLike or binary file object
///     The file to check.
///
/// Raises
/// ------
/// FormatError
///     If the file is not a valid ``.mts`` archive or breaks the data
///     model, or is a damaged dataset.
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
    detached(py, || match crate::dataset::file_version(&path)? {
        Some(_) => crate::dataset::verify(&path)?.into_result(&path),
        None => io::verify_path(&path).map(drop),
    })
}

/// Rebuild a `Labels`, `TensorBlock` or `TensorMap` from what
/// `__reduce_ex__` gave: `(3, header, *buffers)`, `(2, kind, *pieces)` or
/// `(0, kind, archive)`, or an older blockmap's `(1, header, *buffers)`.
/// Buffers can be any object exporting a buffer: viewed when contiguous and
/// aligned, copied otherwise; read-only buffers give read-only arrays.
#[pyfunction]
#[pyo3(signature = (version, *args))]
fn _reconstruct(
    py: Python<'_>,
    version: &Bound<'_, PyAny>,
    args: &Bound<'_, PyTuple>,
) -> PyResult<Py<PyAny>> {
    to_python(py, reconstruct(py, version, args)?)
}

/// `(header, fds, places, labels)` describing a `TensorMap`, `TensorBlock`
/// or `Labels` whose values live in shared segments, `None` otherwise. The
/// descriptors belong to `data` and stay valid while it lives: the caller
/// duplicates them before sending. `labels` holds the label values, which
/// travel with the message.
#[pyfunction]
fn _shared_parts<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Option<WireParts<'py>>> {
    wire_parts(py, held_from_python(data)?.as_ref())
}

/// Rebuild what `_shared_parts` described, in another process. Takes
/// ownership of the descriptors `fds` (duplicates received from the
/// sender): once the whole argument list is checked, each is kept open by
/// the result or closed exactly once on error, and on an argument error
/// the valid ones are closed too. The label values are copied out of
/// `labels` and checked.
#[pyfunction]
fn _attach_shared(
    py: Python<'_>,
    header: &Bound<'_, PyAny>,
    fds: &Bound<'_, PyAny>,
    places: &Bound<'_, PyAny>,
    labels: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    to_python(py, attach(py, header, fds, places, labels)?)
}

/// Whether the multiprocessing reducer copies `obj` into a fresh segment
/// before sending it: maps and blocks (not Labels, which always travel in
/// the message) of at least the threshold's bytes of values.
#[pyfunction]
fn _auto_shares(obj: &Bound<'_, PyAny>) -> bool {
    let nbytes = if let Ok(map) = obj.cast::<PyTensorMap>() {
        map.get().map().nbytes()
    } else if let Ok(block) = obj.cast::<PyTensorBlock>() {
        block.get().block().nbytes()
    } else {
        return false;
    };
    auto_shares(nbytes)
}

/// ``(names, arrays, raw)`` of the zip in ``data`` (any bytes-like
/// object): every member's name in the zip's order, the arrays of the NPY
/// members named in ``npy`` and the bytes of the members named in ``raw``,
/// in the order asked (metatomic's ``system.mta``; ``blockmap._systems``
/// decodes it). Read with the bounds of blockmap's readers of foreign zips
/// (``src/io/foreign.rs``), through copies, the GIL released; a name asked
/// for that is not a member is a ``FormatError``.
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // Python arguments
fn _zip_members<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    npy: Vec<String>,
    raw: Vec<String>,
) -> PyResult<ZipMembersOut<'py>> {
    let buffer = buffer_from_python(data)?;
    let members = detached(py, || io::foreign::zip_members(buffer, &npy, &raw))?;
    let arrays = members
        .arrays
        .iter()
        .map(|array| to_numpy(py, array))
        .collect::<PyResult<_>>()?;
    let raw = members
        .raw
        .iter()
        .map(|bytes| PyBytes::new(py, bytes))
        .collect();
    Ok((members.names, arrays, raw))
}

/// What `_zip_members` gives Python.
type ZipMembersOut<'py> = (
    Vec<String>,
    Vec<Bound<'py, PyAny>>,
    Vec<Bound<'py, PyBytes>>,
);

/// The reconstructor of pickled torch-backed objects: the unpickled numpy
/// twin `obj`, given back as torch tensors, with the arrays at `flagged`
/// made leaf tensors that require grad.
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // a Python argument
fn _as_torch(obj: &Bound<'_, PyAny>, flagged: Vec<usize>) -> PyResult<Py<PyAny>> {
    let py = obj.py();
    torch(py)?;
    if let Ok(map) = obj.cast::<PyTensorMap>() {
        let map = map_with_leaves(py, &map.get().map(), &flagged)?;
        return Ok(Py::new(py, PyTensorMap::with_arrays(map, Arrays::Torch))?.into_any());
    }
    if let Ok(block) = obj.cast::<PyTensorBlock>() {
        let block = block.get().block();
        let block = with_leaves(py, std::slice::from_ref(&*block), &flagged)?.remove(0);
        return Ok(Py::new(
            py,
            PyTensorBlock::new_view(block, Origin::Standalone).with_arrays(Arrays::Torch),
        )?
        .into_any());
    }
    if let Ok(labels) = obj.cast::<PyLabels>() {
        let labels = labels.get().labels.clone();
        return Ok(Py::new(py, PyLabels::with_arrays(labels, Arrays::Torch))?.into_any());
    }
    Err(wrong_type(
        py,
        format!(
            "_as_torch takes a TensorMap, TensorBlock or Labels, not {}",
            type_name(obj)
        ),
    ))
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
    module.add_function(wrap_pyfunction!(_reconstruct, module)?)?;
    module.add_function(wrap_pyfunction!(_auto_shares, module)?)?;
    module.add_function(wrap_pyfunction!(_shared_parts, module)?)?;
    module.add_function(wrap_pyfunction!(_attach_shared, module)?)?;
    module.add_function(wrap_pyfunction!(_as_torch, module)?)?;
    module.add_function(wrap_pyfunction!(_zip_members, module)?)?;
    Ok(())
}
