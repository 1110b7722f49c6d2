//! Pickle support: `__reduce_ex__` of `Labels`, `TensorBlock` and
//! `TensorMap` and the reconstructor `blockmap._blockmap._reconstruct` (see
//! docs/pickle.md).
//!
//! - protocol >= 5: `_reconstruct(3, header, *buffers)`, one
//!   `pickle.PickleBuffer` per array over the memory the object holds
//!   (labels equal to earlier ones refer to them); version 1 is read too;
//! - protocol < 5: `_reconstruct(2, kind, *pieces)`, the `.mts` archive in
//!   a few `bytes` objects of about [`PIECE_TARGET`] bytes, each array whole
//!   in one of them; or `_reconstruct(0, kind, archive)` when it fits in one
//!   (and always for Labels, a bare NPY file). A `bytearray` is read too.

use std::sync::atomic::{AtomicUsize, Ordering};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyTuple};

use super::array::{
    buffer_from_pickled_bytes, buffer_from_python, bytes_with, pieces_with, BufferOwner,
};
use super::convert::{saturating_index, to_python};
use super::errors::{invalid, type_name, Class};
use super::gil::detached;
use crate::data::{DataRef, Kind};
use crate::io;
use crate::pickle;

static PICKLE_BUFFER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static RECONSTRUCT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The version of the in-band `.mts` form in one piece (protocol < 5).
const ARCHIVE_VERSION: u32 = 0;
/// The version of the in-band `.mts` form in several pieces.
const PIECES_VERSION: u32 = 2;

/// About how large each piece of an archive pickled in-band is. `CPython`'s
/// pickler writes one large `bytes` object much slower than the same bytes
/// in pieces: 1.1-1.5 s for one of 794 MB, 0.51 s for 8 of 100 MB. Pieces of
/// 16, 32 and 64 MiB measured alike on W (protocol 4 dumps 0.98-1.02x
/// numpy's, loads 0.98-1.02x, 5 fresh processes each); the smallest keeps
/// the least unused memory in the last piece before it is trimmed, and
/// stays below glibc's largest mmap threshold (32 MiB), so that a process
/// pickling again reuses freed heap memory.
const PIECE_TARGET: usize = 16 << 20;

/// `(reconstructor, args)` for pickling `data` with `protocol`.
pub fn reduce<'py>(
    py: Python<'py>,
    data: DataRef<'_>,
    protocol: i64,
) -> PyResult<Bound<'py, PyTuple>> {
    let reconstruct = RECONSTRUCT.import(py, "blockmap._blockmap", "_reconstruct")?;
    let mut args: Vec<Bound<'py, PyAny>> = Vec::new();
    if protocol >= 5 {
        let (header, buffers) = py.detach(|| pickle::dump(data))?;
        let pickle_buffer = PICKLE_BUFFER.import(py, "pickle", "PickleBuffer")?;
        args.push(pickle::VERSION.into_pyobject(py)?.into_any());
        args.push(PyBytes::new(py, &header).into_any());
        for buffer in buffers {
            let owner = Bound::new(py, BufferOwner::new(buffer))?;
            args.push(pickle_buffer.call1((owner,))?);
        }
    } else {
        // `bytes`, not `bytearray`: before protocol 5, pickle copies a
        // bytearray through bytes(self) on dumps and back on loads. Labels
        // (a bare NPY file, small) go in one object, maps and blocks in
        // pieces (one when small)
        let bound = io::save_size_bound(data);
        let pieces = if let DataRef::Labels(_) = data {
            vec![bytes_with(py, bound, |writer| io::save_into(writer, data))?]
        } else {
            pieces_with(py, piece_target(), bound, |writer| {
                let next_data = writer.next_data();
                io::save_archive(writer, data, Some(next_data)).map(drop)
            })?
        };
        let version = if pieces.len() == 1 {
            ARCHIVE_VERSION
        } else {
            PIECES_VERSION
        };
        args.push(version.into_pyobject(py)?.into_any());
        args.push(data.kind().name().into_pyobject(py)?.into_any());
        args.extend(pieces.into_iter().map(Bound::into_any));
    }
    PyTuple::new(
        py,
        [reconstruct.clone(), PyTuple::new(py, args)?.into_any()],
    )
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
    let format_error = |message: String| Class::FormatError.err(py, message);
    let version = saturating_index(version)
        .ok_or_else(|| {
            format_error(format!(
                "the pickle format version must be an integer, got {}",
                type_name(version)
            ))
        })?
        .value;
    match version {
        1 | 3 => {
            let Some(header) = args.iter().next() else {
                return Err(format_error("the pickle has no header".into()));
            };
            let header = buffer_from_python(&header)?;
            let buffers = args
                .iter()
                .skip(1)
                .map(|b| buffer_from_python(&b))
                .collect::<PyResult<Vec<_>>>()?;
            let version = if version == 1 { 1 } else { pickle::VERSION };
            let data = detached(py, || {
                pickle::load_version(version, &header.raw().to_vec()?, buffers)
            })?;
            to_python(py, data)
        }
        0 => {
            let [kind, archive] = &args.iter().collect::<Vec<_>>()[..] else {
                return Err(format_error(format!(
                    "a version 0 pickle has a kind and an archive, got {} arguments",
                    args.len()
                )));
            };
            let kind = pickled_kind(py, kind, 0)?;
            let archive = pickled_buffer(archive)?;
            let data = detached(py, || io::load_buffer_checked(archive, kind, false))?;
            to_python(py, data)
        }
        2 => {
            let mut args = args.iter();
            let Some(kind) = args.next() else {
                return Err(format_error(
                    "a version 2 pickle has a kind and pieces, got no arguments".into(),
                ));
            };
            let kind = pickled_kind(py, &kind, 2)?;
            let pieces = args
                .map(|piece| pickled_buffer(&piece))
                .collect::<PyResult<Vec<_>>>()?;
            let data = detached(py, || io::load_pieces(pieces, kind, false))?;
            to_python(py, data)
        }
        other => Err(format_error(format!(
            "unknown pickle format version {other}: this blockmap reads versions 0 to 3; \
             the pickle may come from a newer blockmap"
        ))),
    }
}

/// The kind of object (`"tensor"`, `"block"`, `"labels"`) a pickle of
/// format `version` names.
fn pickled_kind(py: Python<'_>, kind: &Bound<'_, PyAny>, version: u32) -> PyResult<Kind> {
    let name = kind.extract::<String>().map_err(|_| {
        Class::FormatError.err(
            py,
            format!("the kind of a version {version} pickle must be a string"),
        )
    })?;
    Ok(Kind::from_name(&name)?)
}

/// A piece of an archive pickled in-band: a `bytes` object the unpickler
/// made (viewed, writable: see [`buffer_from_pickled_bytes`]) or any other
/// buffer.
fn pickled_buffer(piece: &Bound<'_, PyAny>) -> PyResult<crate::buffer::Buffer> {
    match piece.cast_exact::<PyBytes>() {
        Ok(bytes) => Ok(buffer_from_pickled_bytes(bytes)),
        Err(_) => buffer_from_python(piece),
    }
}

/// The size of pieces pickles are written in (see [`PIECE_TARGET`]).
static PIECE_BYTES: AtomicUsize = AtomicUsize::new(PIECE_TARGET);

fn piece_target() -> usize {
    PIECE_BYTES.load(Ordering::Relaxed)
}

/// Set the size of the pieces pickles of protocol < 5 carry archives in
/// (for tests: small maps in many pieces), at least 1; returns the previous
/// size.
#[pyfunction]
fn _set_pickle_piece_size(py: Python<'_>, nbytes: usize) -> PyResult<usize> {
    if nbytes == 0 {
        return Err(invalid(py, "the piece size must be at least 1 byte"));
    }
    Ok(PIECE_BYTES.swap(nbytes, Ordering::Relaxed))
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(_reconstruct, module)?)?;
    module.add_function(wrap_pyfunction!(_set_pickle_piece_size, module)?)
}
