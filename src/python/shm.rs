//! Shared memory in the binding: `share_memory()` / `is_shared()` on
//! `TensorMap` and `TensorBlock` (in their pymethods), and the two functions
//! the multiprocessing reducer of `python/blockmap/_shared.py` uses to send
//! shared data as metadata plus file descriptors (see docs/transports.md).

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::classes::SwapCell;
use super::convert::{held_from_python, to_python};
use super::errors::Class;
use crate::buffer::SharedBytes;
use crate::data::{Data, DataRef};
use crate::shm::{self, Location};

/// `share_memory()` of a map or a block: the value in `cell` moved into
/// shared memory with the GIL released, then swapped in; readers keep
/// using the old value meanwhile, and two threads sharing the same object
/// at once share it once.
pub fn share_in_place<T: Clone + Send + Sync>(
    py: Python<'_>,
    cell: &SwapCell<T>,
    as_data: impl Fn(&T) -> DataRef<'_> + Send + Sync,
    from_data: impl FnOnce(Data) -> crate::Result<T> + Send,
) -> PyResult<()> {
    py.detach(|| {
        cell.while_sharing(|| {
            let value = cell.get();
            if let Some(shared) = shm::share(as_data(&value))? {
                cell.set(std::sync::Arc::new(from_data(shared)?));
            }
            Ok::<_, crate::Error>(())
        })
    })?;
    Ok(())
}

pub fn is_shared(data: DataRef<'_>) -> PyResult<bool> {
    Ok(shm::is_shared(data)?)
}

/// A `Location` as Python sees it: `(segment, offset, len, writable)`,
/// `None` for an empty buffer.
type WireLocation = Option<(usize, usize, usize, bool)>;

/// What `_shared_parts` returns: `(header, fds, locations)`.
type WireParts<'py> = (Bound<'py, PyBytes>, Vec<RawFd>, Vec<WireLocation>);

/// `(header, fds, locations)` for a `TensorMap`, `TensorBlock` or `Labels`
/// whose memory lives in shared segments, `None` otherwise. The descriptors
/// belong to `data` and stay valid while it lives: the caller duplicates
/// them before sending.
#[pyfunction]
fn _shared_parts<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Option<WireParts<'py>>> {
    let data = held_from_python(data)?;
    let Some(parts) = shm::parts(data.as_ref())? else {
        return Ok(None);
    };
    let fds = parts
        .segments
        .iter()
        .filter_map(|segment| segment.shared_segment())
        .map(|(segment, _)| segment.file().as_raw_fd())
        .collect();
    let locations = parts
        .locations
        .iter()
        .map(|l| l.map(|l| (l.segment, l.offset, l.len, l.writable)))
        .collect();
    Ok(Some((PyBytes::new(py, &parts.header), fds, locations)))
}

/// Rebuild what `_shared_parts` described, in another process. Takes
/// ownership of the descriptors `fds` (duplicates received from the
/// sender): they are kept open by the result, or closed on error.
#[pyfunction]
fn _attach_shared(
    py: Python<'_>,
    header: &[u8],
    fds: Vec<RawFd>,
    locations: Vec<WireLocation>,
) -> PyResult<Py<PyAny>> {
    if let Some(fd) = fds.iter().find(|&&fd| fd < 0) {
        return Err(Class::ValidationError.err(py, format!("invalid file descriptor {fd}")));
    }
    let files: Vec<File> = fds
        .into_iter()
        // SAFETY: the caller gives up these descriptors (checked to be
        // non-negative above); each becomes owned by exactly one File.
        .map(|fd| unsafe { File::from_raw_fd(fd) })
        .collect();
    let locations: Vec<Option<Location>> = locations
        .into_iter()
        .map(|l| {
            l.map(|(segment, offset, len, writable)| Location {
                segment,
                offset,
                len,
                writable,
            })
        })
        .collect();
    let data = py.detach(|| {
        let segments = files
            .into_iter()
            .map(SharedBytes::open)
            .collect::<crate::Result<Vec<_>>>()?;
        shm::attach(header, segments, &locations)
    })?;
    to_python(py, data)
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(_shared_parts, module)?)?;
    module.add_function(wrap_pyfunction!(_attach_shared, module)?)?;
    Ok(())
}
