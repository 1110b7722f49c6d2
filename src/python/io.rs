//! The functions behind every save and load: the `save`/`load` methods of
//! the three classes and `blockmap.save`, `blockmap.load` and their
//! siblings (`functions.rs`). They take and give core data; paths are
//! saved and loaded with the GIL released.

use pyo3::prelude::*;
use pyo3::types::{PyMemoryView, PySlice};

use super::array::{buffer_from_python, BufferOwner};
use super::errors::wrong_type;
use super::file::{prepare_for_save, with_mts_extension, FileArg, MmapArg, PyFileIo, SaveTarget};
use super::gil::detached;
use crate::data::{Data, DataRef, Kind};
use crate::io;
use crate::labels::Labels;

/// Save `data` to `file`: a path (`.mts` appended when missing), written
/// atomically with the GIL released; a seekable file object, cut off at
/// its position first (see [`prepare_for_save`]), then streamed in chunks;
/// or a file object that cannot seek (or appends), given the archive at
/// once. Data that metatensor-core could not read back is refused before
/// the file object is touched.
pub fn save(py: Python<'_>, file: FileArg<'_>, data: DataRef<'_>, durable: bool) -> PyResult<()> {
    match file {
        FileArg::Path(path) => {
            let path = with_mts_extension(py, path)?;
            detached(py, || io::save_path(&path, data, durable))
        }
        FileArg::File(file) => {
            io::portable::check(data)?;
            match prepare_for_save(&file, data)? {
                SaveTarget::Positioned => {
                    let writer = PyFileIo::new(file)?;
                    io::save(writer, data)
                        .and_then(|mut writer| {
                            std::io::Write::flush(&mut writer)
                                .map_err(|e| crate::Error::io("flushing the file", e))
                        })
                        .map_err(PyFileIo::error)
                }
                SaveTarget::Forward => write_whole(&file, &save_buffer(py, data)?),
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
    keys: Option<&Labels>,
) -> PyResult<Data> {
    match file {
        FileArg::Path(path) => detached(py, || io::load_path_selected(&path, kind, mmap.0, keys)),
        FileArg::File(file) => {
            if mmap.0.is_some() {
                return Err(wrong_type(py, "mmap needs a path, not a file object"));
            }
            if keys.is_some() && seekable(&file)? {
                // only the directory, the keys and the selected blocks are
                // read, through file.read and file.seek
                return io::load_selected(PyFileIo::new(file)?, kind, keys)
                    .map_err(PyFileIo::error);
            }
            load_buffer(py, &file.call_method0("read")?, kind, keys)
        }
    }
}

/// Load `kind` from a bytes-like object, viewing it where possible.
pub fn load_buffer(
    py: Python<'_>,
    buffer: &Bound<'_, PyAny>,
    kind: Kind,
    keys: Option<&Labels>,
) -> PyResult<Data> {
    let buffer = buffer_from_python(buffer)?;
    detached(py, || io::load_buffer_selected(buffer, kind, true, keys))
}
