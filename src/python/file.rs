//! "A path or a binary file object", the first argument of every save and
//! load, and the Rust writer over a Python file object.

use std::path::PathBuf;

use pyo3::exceptions::PyUserWarning;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyString};

use super::errors::{invalid, type_name, wrong_type};
use crate::buffer::MapMode;
use crate::data::DataRef;

/// Where to save to or load from: a path (`str` or `os.PathLike`), or a
/// binary file object (anything with `write` for saving, `read` for
/// loading; checked when it is used).
#[derive(Debug)]
pub enum FileArg<'py> {
    /// a path, used as given
    Path(PathBuf),
    /// a file object
    File(Bound<'py, PyAny>),
}

impl<'py> FromPyObject<'_, 'py> for FileArg<'py> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_instance_of::<PyString>() || obj.hasattr("__fspath__")? {
            return Ok(FileArg::Path(obj.extract::<PathBuf>()?));
        }
        if obj.hasattr("write")? || obj.hasattr("read")? {
            return Ok(FileArg::File(obj.to_owned()));
        }
        Err(wrong_type(
            obj.py(),
            format!(
                "file must be a path or a binary file object, not {}",
                type_name(&obj)
            ),
        ))
    }
}

impl FileArg<'_> {
    /// The path, or a type error saying that `what` needs one.
    pub fn into_path(self, py: Python<'_>, what: &str) -> PyResult<PathBuf> {
        match self {
            FileArg::Path(path) => Ok(path),
            FileArg::File(file) => Err(wrong_type(
                py,
                format!("{what} needs a path, not {}", type_name(&file)),
            )),
        }
    }
}

/// The `mmap` argument of the loads: `False` (read the file), `True` or
/// `"r"` (map it read-only: the arrays are read-only views), `"c"` (map it
/// copy-on-write: writable views whose writes never reach the file), as
/// numpy's `mmap_mode` spells them.
#[derive(Clone, Copy, Debug, Default)]
pub struct MmapArg(pub Option<MapMode>);

impl FromPyObject<'_, '_> for MmapArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, '_, PyAny>) -> PyResult<Self> {
        if let Ok(flag) = obj.cast::<PyBool>() {
            return Ok(MmapArg(flag.is_true().then_some(MapMode::ReadOnly)));
        }
        if let Ok(mode) = obj.cast::<PyString>() {
            return match mode.to_str()? {
                "r" => Ok(MmapArg(Some(MapMode::ReadOnly))),
                "c" => Ok(MmapArg(Some(MapMode::CopyOnWrite))),
                other => Err(invalid(
                    obj.py(),
                    format!(
                        "mmap must be False, True, 'r' (read-only) or 'c' (copy-on-write), \
                         got '{other}'"
                    ),
                )),
            };
        }
        Err(wrong_type(
            obj.py(),
            format!(
                "mmap must be False, True, 'r' or 'c', not {}",
                type_name(&obj)
            ),
        ))
    }
}

/// metatensor-core's ``use_numpy=`` argument of load and save, accepted so
/// that its callers run unchanged and ignored: it chooses between two
/// implementations in metatensor-core; blockmap has one, and ``arrays=``
/// alone chooses the array type.
#[derive(Clone, Copy, Debug, Default)]
pub struct UseNumpy;

impl FromPyObject<'_, '_> for UseNumpy {
    type Error = PyErr;

    fn extract(_obj: Borrowed<'_, '_, PyAny>) -> PyResult<Self> {
        Ok(UseNumpy)
    }
}

/// `path` with `.mts` appended unless it ends with it, with metatensor's
/// warning (a ``UserWarning`` naming the path saved to) when it is added.
pub fn with_mts_extension(py: Python<'_>, path: PathBuf) -> PyResult<PathBuf> {
    if path.as_os_str().as_encoded_bytes().ends_with(b".mts") {
        return Ok(path);
    }
    let mut name = path.into_os_string();
    name.push(".mts");
    let path = PathBuf::from(name);
    let message = format!(
        "adding '.mts' extension, the file will be saved at '{}'",
        path.display()
    );
    let message = std::ffi::CString::new(message.replace('\0', "\\0"))
        .unwrap_or_else(|_| c"adding '.mts' extension".to_owned());
    PyErr::warn(py, &py.get_type::<PyUserWarning>(), &message, 1)?;
    Ok(path)
}

/// A seekable Python binary file object as a Rust writer, or reader. Data
/// goes to `file.write` in chunks of at most [`CHUNK`] bytes, each copied
/// into a `bytes` object (so the file object never sees blockmap's memory,
/// and the memory used does not grow with the data); it comes from
/// `file.read`, copied out of the `bytes` it returns.
///
/// Positions are relative to where the file was when saving (or loading)
/// started, so an archive written after other data is a valid archive from
/// its own start (as with `numpy.savez`).
pub struct PyFileIo<'py> {
    file: Bound<'py, PyAny>,
    base: u64,
}

/// Largest piece handed to `file.write` at once.
const CHUNK: usize = 8 << 20;

fn to_io_error(error: PyErr) -> std::io::Error {
    std::io::Error::other(error)
}

impl<'py> PyFileIo<'py> {
    /// A writer into `file`, from its current position.
    pub fn new(file: Bound<'py, PyAny>) -> PyResult<Self> {
        let base: u64 = file.call_method0("tell")?.extract()?;
        Ok(PyFileIo { file, base })
    }

    /// The Python exception behind an I/O error of this writer, raised as
    /// it is; other errors as blockmap's.
    pub fn error(error: crate::Error) -> PyErr {
        match error {
            crate::Error::Io { source, .. }
                if source
                    .get_ref()
                    .is_some_and(<dyn std::error::Error + Send + Sync>::is::<PyErr>) =>
            {
                match source
                    .into_inner()
                    .map(<dyn std::error::Error + Send + Sync>::downcast::<PyErr>)
                {
                    Some(Ok(error)) => *error,
                    _ => crate::Error::internal("lost the file object's exception").into(),
                }
            }
            error => error.into(),
        }
    }
}

impl std::io::Write for PyFileIo<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let chunk = &data[..data.len().min(CHUNK)];
        let bytes = PyBytes::new(self.file.py(), chunk);
        let written = self
            .file
            .call_method1("write", (bytes,))
            .map_err(to_io_error)?;
        // raw files may write less than asked; buffered ones return None or the length
        let written = if written.is_none() {
            chunk.len()
        } else {
            written.extract::<usize>().map_err(to_io_error)?
        };
        Ok(written.min(chunk.len()))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // `write`, `seek` and `tell` are what a seekable file object needs;
        // one without `flush` has nothing to flush
        if !self.file.hasattr("flush").map_err(to_io_error)? {
            return Ok(());
        }
        self.file
            .call_method0("flush")
            .map(drop)
            .map_err(to_io_error)
    }
}

impl std::io::Read for PyFileIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = buf.len().min(CHUNK);
        let data = self
            .file
            .call_method1("read", (want,))
            .map_err(to_io_error)?;
        let data = data
            .cast::<PyBytes>()
            .map_err(|_| std::io::Error::other("file.read() did not return bytes"))?
            .as_bytes();
        let n = data.len().min(want);
        buf[..n].copy_from_slice(&data[..n]);
        Ok(n)
    }
}

impl std::io::Seek for PyFileIo<'_> {
    fn seek(&mut self, from: std::io::SeekFrom) -> std::io::Result<u64> {
        let (offset, whence) = match from {
            std::io::SeekFrom::Start(offset) => (i128::from(offset) + i128::from(self.base), 0),
            std::io::SeekFrom::Current(offset) => (i128::from(offset), 1),
            std::io::SeekFrom::End(offset) => (i128::from(offset), 2),
        };
        let position = self
            .file
            .call_method1("seek", (offset, whence))
            .and_then(|position| position.extract::<u64>())
            .map_err(to_io_error)?;
        position
            .checked_sub(self.base)
            .ok_or_else(|| std::io::Error::other("seek before the start of the archive"))
    }
}

/// How an archive goes into a file object ([`prepare_for_save`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveTarget {
    /// in chunks, each local header patched at its position ([`PyFileIo`]):
    /// the object can seek and holds nothing after its position
    Positioned,
    /// written forward, all at once, from an archive built in memory: the
    /// object cannot seek, appends whatever its position (a file opened
    /// with `"a"`), or cannot tell where it ends (a gzip file being
    /// written)
    Forward,
}

/// Make `file` ready to receive an archive at its position, so that no
/// reader can find another archive's records after the new one (a zip
/// reader looks for the end records at the end of the file: those of a
/// longer archive the object held would make every reader, metatensor-
/// core's included, read the old directory). What follows the position is
/// cut off first (`file.truncate()`), before anything is written: a save
/// that fails or is killed then leaves an archive without end records,
/// which no reader takes for the old one. An object that holds bytes after
/// its position and cannot cut them off (no `truncate`, one that raises or
/// does nothing: an `mmap`, a `BytesIO` whose buffer is exported) is
/// refused with `BlockMapIOError`, untouched, and so is a file whose
/// bytes from the position on would be written while arrays of `data`
/// view a mapping of it (cutting it off would lose what the save reads).
/// Text files are refused with `BlockMapTypeError`, untouched.
pub fn prepare_for_save(file: &Bound<'_, PyAny>, data: DataRef<'_>) -> PyResult<SaveTarget> {
    let py = file.py();
    let io = py.import("io")?;
    if file.is_instance(&io.getattr("TextIOBase")?)? {
        return Err(wrong_type(
            py,
            format!(
                "save needs a binary file object, not the text file {} (open it with 'wb')",
                type_name(file)
            ),
        ));
    }
    if appends(file)? {
        // every write goes to the end: nothing can follow the archive
        return Ok(SaveTarget::Forward);
    }
    let seekable = if file.hasattr("seekable")? {
        file.call_method0("seekable")?.is_truthy()?
    } else {
        // objects that do not say (an mmap) but may seek: their end
        // decides
        file.hasattr("seek")? && file.hasattr("tell")?
    };
    if !seekable {
        return Ok(SaveTarget::Forward);
    }
    let Some((position, end)) = extent(file)? else {
        return Ok(SaveTarget::Forward);
    };
    if position < end && mapped_by(file, data)? {
        return Err(PyErr::from(crate::Error::io(
            "cannot save into this file object",
            std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "arrays of the data saved view a mapping of this file (loaded with \
                 mmap=...): writing it in place would change what the save reads, and \
                 cutting it off would lose it; save to its path (a new file is put in \
                 place, the mapping keeps the old one) or at the file's end",
            ),
        )));
    }
    if end > position {
        cut_after(file, position, end)?;
    }
    if file.hasattr("seekable")? {
        Ok(SaveTarget::Positioned)
    } else {
        Ok(SaveTarget::Forward)
    }
}

/// Whether `file` has a descriptor whose file arrays of `data` map.
fn mapped_by(file: &Bound<'_, PyAny>, data: DataRef<'_>) -> PyResult<bool> {
    let Ok(fd) = file
        .call_method0("fileno")
        .and_then(|fd| fd.extract::<i32>())
    else {
        return Ok(false);
    };
    let Ok(stat) = file.py().import("os")?.call_method1("fstat", (fd,)) else {
        return Ok(false);
    };
    let id = (
        stat.getattr("st_dev")?.extract::<u64>()?,
        stat.getattr("st_ino")?.extract::<u64>()?,
    );
    Ok(crate::io::maps_file(data, id))
}

/// Whether writes to `file` go to its end whatever its position: a
/// `mode` with `"a"`, or a descriptor opened with `O_APPEND`.
fn appends(file: &Bound<'_, PyAny>) -> PyResult<bool> {
    if let Ok(mode) = file.getattr("mode") {
        if mode
            .extract::<String>()
            .is_ok_and(|mode| mode.contains('a'))
        {
            return Ok(true);
        }
    }
    // a file object of a descriptor (`open(fd, "r+b")` of one opened with
    // O_APPEND); objects without one raise (`io.UnsupportedOperation`)
    let Ok(fd) = file
        .call_method0("fileno")
        .and_then(|fd| fd.extract::<i32>())
    else {
        return Ok(false);
    };
    let fcntl = file.py().import("fcntl")?;
    let flags = fcntl
        .call_method1("fcntl", (fd, fcntl.getattr("F_GETFL")?))
        .and_then(|flags| flags.extract::<i64>());
    Ok(flags.is_ok_and(|flags| flags & i64::from(libc::O_APPEND) != 0))
}

/// The position of `file` and where it ends (`seek(0, 2)`, then `tell()`:
/// an `mmap`'s `seek` returns `None`), its position left as it was;
/// `None` when it cannot tell (a gzip file being written cannot seek from
/// its end).
fn extent(file: &Bound<'_, PyAny>) -> PyResult<Option<(u64, u64)>> {
    let tell = || {
        file.call_method0("tell")
            .and_then(|position| position.extract::<u64>())
    };
    let Ok(position) = tell() else {
        return Ok(None);
    };
    if file.call_method1("seek", (0, 2)).is_err() {
        return Ok(None);
    }
    let end = tell();
    file.call_method1("seek", (position, 0))?;
    Ok(end.ok().map(|end| (position, end)))
}

/// Cut off the `end - position` bytes of `file` after `position`, or
/// refuse (`BlockMapIOError`, the object's own exception as its cause).
fn cut_after(file: &Bound<'_, PyAny>, position: u64, end: u64) -> PyResult<()> {
    let py = file.py();
    let refuse = |why: String, cause: Option<PyErr>| {
        let error = PyErr::from(crate::Error::io(
            "cannot save into this file object",
            std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                format!(
                    "it holds {} bytes after its position, which a zip reader would take \
                     for the end of the archive (those of what it held), and {why}: save \
                     at its end, into an empty file object, or to a path",
                    end - position
                ),
            ),
        ));
        error.set_cause(py, cause);
        error
    };
    if !file.hasattr("truncate")? {
        return Err(refuse("it cannot be truncated".into(), None));
    }
    if let Err(error) = file.call_method1("truncate", (position,)) {
        return Err(refuse("truncating it failed".into(), Some(error)));
    }
    match extent(file)? {
        Some((now, now_end)) if now == position && now_end == position => Ok(()),
        _ => Err(refuse("truncating it left them".into(), None)),
    }
}
