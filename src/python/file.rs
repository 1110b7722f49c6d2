//! "A path or a binary file object", the first argument of every save and
//! load, and the Rust writer over a Python file object.

use std::path::PathBuf;

use pyo3::exceptions::PyUserWarning;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyString};

use super::errors::{invalid, type_name, wrong_type};
use crate::buffer::MapMode;

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
