//! Shared memory in the binding: `share_memory()` / `is_shared()` on
//! `TensorMap` and `TensorBlock` (in their pymethods), and the helpers of the
//! two functions (`functions.rs`) the multiprocessing reducer of
//! `python/blockmap/_reduction.py` uses to send shared data as metadata plus
//! file descriptors (see docs/transports.md).

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyInt};

use super::cell::SwapCell;
use super::errors::{invalid, wrong_type, Class};
use crate::buffer::{Buffer, SharedBytes};
use crate::data::{Data, DataRef};
use crate::shm::{self, Location, Place};

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
    super::gil::detached(py, || {
        cell.while_sharing(|| {
            let value = cell.get();
            if let Some(shared) = shm::share(as_data(&value))? {
                cell.set(crate::arc::ForkArc::new(from_data(shared)?));
            }
            Ok(())
        })
    })
}

pub fn is_shared(data: DataRef<'_>) -> PyResult<bool> {
    Ok(shm::is_shared(data)?)
}

/// A buffer location as Python sees it: `(segment, offset, len, writable)`,
/// with segment -1 for label values (in the label bytes), `None` for an
/// empty buffer.
type WirePlace = Option<(i64, usize, usize, bool)>;

/// What `_shared_parts` returns: `(header, fds, places, labels)`.
pub type WireParts<'py> = (
    Bound<'py, PyBytes>,
    Vec<RawFd>,
    Vec<WirePlace>,
    Bound<'py, PyBytes>,
);

/// What `_shared_parts` gives for `data` (see there).
pub fn wire_parts<'py>(py: Python<'py>, data: DataRef<'_>) -> PyResult<Option<WireParts<'py>>> {
    let Some(parts) = shm::parts(data)? else {
        return Ok(None);
    };
    let fds = parts
        .segments
        .iter()
        .filter_map(|segment| segment.shared_segment())
        .filter_map(|(segment, _)| segment.file().map(AsRawFd::as_raw_fd))
        .collect();
    let places = parts
        .places
        .iter()
        .map(|place| match *place {
            Place::Empty => None,
            Place::Labels { offset, len } => Some((-1, offset, len, false)),
            Place::Segment(l) => Some((
                i64::try_from(l.segment).unwrap_or(i64::MAX),
                l.offset,
                l.len,
                l.writable,
            )),
        })
        .collect();
    Ok(Some((
        PyBytes::new(py, &parts.header),
        fds,
        places,
        PyBytes::new(py, &parts.labels),
    )))
}

/// Descriptors given to `_attach_shared`, owned from the moment the whole
/// argument list has been checked: each is closed exactly once, by this
/// value (on error) or by the file it becomes.
struct OwnedFds(Vec<RawFd>);

impl OwnedFds {
    /// Take ownership of `fds`, which must be distinct, non-negative and
    /// open; on refusal, the valid ones (each once) are closed all the
    /// same, as the caller gave them up.
    fn take(py: Python<'_>, fds: &Bound<'_, PyAny>) -> PyResult<OwnedFds> {
        let mut owned = OwnedFds(Vec::new());
        let mut problem: Option<String> = None;
        let items = fds.try_iter().map_err(|_| {
            Class::BlockMapTypeError.err(py, "fds must be a list of file descriptors")
        })?;
        for item in items {
            let item = item?;
            let Ok(fd) = item.extract::<i64>() else {
                problem.get_or_insert(format!(
                    "a file descriptor must be an int, got {}",
                    super::errors::type_name(&item)
                ));
                continue;
            };
            let Ok(fd) = RawFd::try_from(fd) else {
                problem.get_or_insert(format!("invalid file descriptor {fd}"));
                continue;
            };
            if fd < 0 {
                problem.get_or_insert(format!("invalid file descriptor {fd}"));
            } else if owned.0.contains(&fd) {
                problem.get_or_insert(format!("the file descriptor {fd} is given twice"));
            } else if is_open(fd) {
                owned.0.push(fd);
            } else {
                problem.get_or_insert(format!("the file descriptor {fd} is not open"));
            }
        }
        match problem {
            None => Ok(owned),
            // `owned` is dropped here: the valid descriptors are closed
            Some(problem) => Err(Class::ValidationError.err(py, problem)),
        }
    }

    /// The descriptors as files, each owned by exactly one `File`.
    fn into_files(mut self) -> Vec<File> {
        std::mem::take(&mut self.0)
            .into_iter()
            // SAFETY: each descriptor is open, distinct and owned by this
            // value (checked in `take`), which gives it to exactly one File
            // and forgets it.
            .map(|fd| unsafe { File::from_raw_fd(fd) })
            .collect()
    }
}

impl Drop for OwnedFds {
    fn drop(&mut self) {
        for &fd in &self.0 {
            // SAFETY: `fd` is an open descriptor this value owns (see
            // `take`); it is closed once, here, and never used again.
            unsafe { libc::close(fd) };
        }
    }
}

fn is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only reads the flags of a descriptor number; an
    // unused number gives EBADF.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// The places of `_shared_parts`, checked.
fn extract_places(py: Python<'_>, places: &Bound<'_, PyAny>) -> PyResult<Vec<Place>> {
    let bad = |what: String| Class::FormatError.err(py, what);
    let items = places
        .try_iter()
        .map_err(|_| bad("the buffer places must be a list".into()))?;
    let mut result = Vec::new();
    for (i, item) in items.enumerate() {
        let item = item?;
        if item.is_none() {
            result.push(Place::Empty);
            continue;
        }
        let (segment, offset, len, writable): (i64, u64, u64, bool) =
            item.extract().map_err(|_| {
                bad(format!(
                    "buffer place {i} must be (segment, offset, len, writable)"
                ))
            })?;
        let offset = usize::try_from(offset)
            .map_err(|_| bad(format!("buffer place {i}: offset {offset} is too large")))?;
        let len = usize::try_from(len)
            .map_err(|_| bad(format!("buffer place {i}: length {len} is too large")))?;
        result.push(match segment {
            -1 => Place::Labels { offset, len },
            segment => Place::Segment(Location {
                segment: usize::try_from(segment)
                    .map_err(|_| bad(format!("buffer place {i}: invalid segment {segment}")))?,
                offset,
                len,
                writable,
            }),
        });
    }
    Ok(result)
}

/// What `_attach_shared` rebuilds (see there): the core data.
pub fn attach(
    py: Python<'_>,
    header: &Bound<'_, PyAny>,
    fds: &Bound<'_, PyAny>,
    places: &Bound<'_, PyAny>,
    labels: &Bound<'_, PyAny>,
) -> PyResult<Data> {
    let fds = OwnedFds::take(py, fds)?;
    // from here on every error drops `fds`, closing them once
    let header = copy_bytes(py, header, "the header")?;
    let places = extract_places(py, places)?;
    let labels = copy_bytes(py, labels, "the label values")?;
    let files = fds.into_files();
    let data = super::gil::detached(py, || {
        let segments = files
            .into_iter()
            .map(SharedBytes::open)
            .collect::<crate::Result<Vec<_>>>()?;
        let header = header
            .private_bytes()
            .ok_or_else(|| crate::Error::internal("a snapshot is private"))?;
        shm::attach(header, segments, &places, &labels)
    })?;
    Ok(data)
}

/// A private copy of the bytes of a bytes-like object, made by raw copies
/// (the aliasing rule, buffer/mod.rs): what blockmap checks is its own
/// memory.
fn copy_bytes(py: Python<'_>, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Buffer> {
    let buffer = super::array::buffer_from_python(obj).map_err(|_| {
        Class::BlockMapTypeError.err(py, format!("{what} must be a bytes-like object"))
    })?;
    Ok(buffer.snapshot()?)
}

/// The threshold of the automatic sharing (bytes of values; `u64::MAX`:
/// off) and its policy live here, and only here: the multiprocessing
/// reducer (`python/blockmap/_reduction.py`) asks [`_auto_shares`], `join`
/// in a `DataLoader` worker reads [`auto_share_threshold`]. 256 KiB by
/// default: below it, pickling the values through the pipe costs less than
/// a segment, a descriptor passed over a socket and a mapping
/// (docs/transports.md, docs/benchmarks.md).
pub const DEFAULT_AUTO_SHARE_BYTES: u64 = 256 * 1024;

static AUTO_SHARE_BYTES: AtomicU64 = AtomicU64::new(DEFAULT_AUTO_SHARE_BYTES);

/// Send maps and blocks holding at least ``nbytes`` bytes of values
/// through shared memory (a copy into a fresh segment) when multiprocessing
/// pickles them; ``None`` turns this off (only maps shared with
/// ``share_memory()`` then travel as descriptors). In a torch DataLoader
/// worker, :func:`blockmap.join` of at least this many bytes writes its
/// result straight into shared memory (no copy when it is sent). 256 KiB by
/// default; thresholds beyond the largest possible map are all kept as
/// ``2**64 - 2``.
///
/// Parameters
/// ----------
/// nbytes : int or None
///     The threshold in bytes, or None to turn automatic sharing off.
///
/// Raises
/// ------
/// BlockMapTypeError
///     If ``nbytes`` is neither an int nor None.
/// ValidationError
///     If ``nbytes`` is negative.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction]
#[pyo3(signature = (nbytes))]
fn set_auto_share_threshold(py: Python<'_>, nbytes: &Bound<'_, PyAny>) -> PyResult<()> {
    let stored = if nbytes.is_none() {
        u64::MAX
    } else {
        if nbytes.is_instance_of::<PyBool>() || !nbytes.is_instance_of::<PyInt>() {
            return Err(wrong_type(
                py,
                format!(
                    "the threshold must be an int or None, got {}",
                    nbytes.get_type().name()?
                ),
            ));
        }
        if nbytes.lt(0)? {
            return Err(invalid(
                py,
                format!("the threshold must not be negative, got {nbytes}"),
            ));
        }
        // larger than u64: more than any map, as u64::MAX - 1 is
        nbytes
            .extract::<u64>()
            .unwrap_or(u64::MAX)
            .min(u64::MAX - 1)
    };
    AUTO_SHARE_BYTES.store(stored, Ordering::Relaxed);
    Ok(())
}

/// The threshold of :func:`set_auto_share_threshold`.
///
/// Returns
/// -------
/// int or None
///     The threshold in bytes, or None when automatic sharing is off.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction]
fn get_auto_share_threshold() -> Option<u64> {
    auto_share_threshold()
}

pub fn auto_share_threshold() -> Option<u64> {
    match AUTO_SHARE_BYTES.load(Ordering::Relaxed) {
        u64::MAX => None,
        nbytes => Some(nbytes),
    }
}

/// Whether this many bytes of values are worth a segment of their own.
pub fn auto_shares(nbytes: usize) -> bool {
    auto_share_threshold().is_some_and(|threshold| nbytes as u64 >= threshold)
}

/// Whether this process is a torch `DataLoader` worker: torch's public
/// `torch.utils.data.get_worker_info() is not None`, asked only when torch
/// is already imported (a process that has not imported it is no worker).
pub fn in_dataloader_worker(py: Python<'_>) -> PyResult<bool> {
    let modules = py.import("sys")?.getattr("modules")?;
    // absent, or torch still being imported: not a worker yet
    let Ok(get_worker_info) = modules
        .get_item("torch.utils.data")
        .and_then(|data| data.getattr("get_worker_info"))
    else {
        return Ok(false);
    };
    Ok(!get_worker_info.call0()?.is_none())
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(set_auto_share_threshold, module)?)?;
    module.add_function(wrap_pyfunction!(get_auto_share_threshold, module)?)?;
    Ok(())
}
