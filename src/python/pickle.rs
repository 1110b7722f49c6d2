//! Pickle support: `__reduce_ex__` of `Labels`, `TensorBlock` and
//! `TensorMap` and the core data of the reconstructor
//! `blockmap._blockmap._reconstruct` (`functions.rs`): the Python glue of the wire format, which lives in the core (`pickle.rs`,
//! docs/pickle.md). Here: `pickle.PickleBuffer`s over the buffers the core
//! lists (protocol >= 5), the archive written into `bytes` objects of about
//! [`PIECE_TARGET`] bytes (protocol < 5), and the reconstructor's Python
//! arguments as [`Buffer`]s.

use std::sync::atomic::{AtomicUsize, Ordering};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyTuple};

use super::array::{buffer_from_pickled_bytes, buffer_from_python, pieces_with, BufferOwner};
use super::convert::saturating_index;
use super::errors::{invalid, type_name, Class};
use super::gil::detached;
use crate::buffer::Buffer;
use crate::data::{Data, DataRef};
use crate::pickle::{self, Pickled};

static PICKLE_BUFFER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static RECONSTRUCT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// About how large each piece of an archive pickled in-band is. `CPython`'s
/// pickler writes one large `bytes` object much slower than the same bytes
/// in pieces, and pieces of 16, 32 and 64 MiB measured alike (figures in
/// docs/benchmarks.md); the smallest keeps
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
        // bytearray through bytes(self) on dumps and back on loads
        let bound = pickle::in_band_bound(data);
        let size = pickle::in_band_piece_size(data, piece_target());
        let pieces = pieces_with(py, size, bound, |writer| {
            pickle::write_in_band(writer, data)
        })?;
        args.push(
            pickle::in_band_version(pieces.len())
                .into_pyobject(py)?
                .into_any(),
        );
        args.push(data.kind().name().into_pyobject(py)?.into_any());
        args.extend(pieces.into_iter().map(Bound::into_any));
    }
    PyTuple::new(
        py,
        [reconstruct.clone(), PyTuple::new(py, args)?.into_any()],
    )
}

/// The reconstructor's arguments after the version, for the core.
struct CallArguments<'a, 'py>(&'a Bound<'py, PyTuple>);

impl pickle::Arguments for CallArguments<'_, '_> {
    type Error = PyErr;

    fn count(&self) -> usize {
        self.0.len()
    }

    fn text(&self, index: usize) -> PyResult<Option<String>> {
        Ok(self.0.get_item(index)?.extract::<String>().ok())
    }

    /// A `bytes` object the unpickler made for a piece written in band is
    /// viewed writable (see [`buffer_from_pickled_bytes`]); anything else
    /// through its buffer export.
    fn buffer(&self, index: usize, in_band: bool) -> PyResult<Buffer> {
        let object = self.0.get_item(index)?;
        match object.cast_exact::<PyBytes>() {
            Ok(bytes) if in_band => Ok(buffer_from_pickled_bytes(bytes)),
            _ => buffer_from_python(&object),
        }
    }
}

/// What `_reconstruct` rebuilds from its arguments (see there): the core
/// data.
pub fn reconstruct(
    py: Python<'_>,
    version: &Bound<'_, PyAny>,
    args: &Bound<'_, PyTuple>,
) -> PyResult<Data> {
    let version = saturating_index(version)
        .ok_or_else(|| {
            Class::FormatError.err(
                py,
                format!(
                    "the pickle format version must be an integer, got {}",
                    type_name(version)
                ),
            )
        })?
        .value;
    let version = i64::try_from(version).unwrap_or(i64::MAX);
    let pickled = Pickled::read(version, &CallArguments(args))?;
    detached(py, move || pickled.load())
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
    module.add_function(wrap_pyfunction!(_set_pickle_piece_size, module)?)
}
