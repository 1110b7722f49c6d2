//! The native half of `blockmap.io`: save and load with the GIL released.
//! Path handling and file objects are in `python/blockmap/io.py`.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyMemoryView;

use super::array::{buffer_from_python, BufferOwner};
use super::block::{Origin, PyTensorBlock};
use super::errors::{invalid, type_name, wrong_type};
use super::labels::PyLabels;
use super::tensor::PyTensorMap;
use crate::io::{self, Data, DataRef, Kind};

/// An owned copy of the metadata of something to save (its arrays are
/// shared, not copied), so that the GIL can be released while saving.
pub fn extract_data(data: &Bound<'_, PyAny>) -> PyResult<Data> {
    if let Ok(map) = data.cast::<PyTensorMap>() {
        return Ok(Data::Tensor(map.try_borrow()?.map.clone()));
    }
    if let Ok(block) = data.cast::<PyTensorBlock>() {
        return Ok(Data::Block(block.try_borrow()?.block.clone()));
    }
    if let Ok(labels) = data.cast::<PyLabels>() {
        return Ok(Data::Labels(labels.get().labels.clone()));
    }
    Err(wrong_type(
        data.py(),
        format!(
            "data must be a TensorMap, TensorBlock or Labels, not {}",
            type_name(data)
        ),
    ))
}

pub fn as_ref(data: &Data) -> DataRef<'_> {
    match data {
        Data::Tensor(map) => DataRef::Tensor(map),
        Data::Block(block) => DataRef::Block(block),
        Data::Labels(labels) => DataRef::Labels(labels),
    }
}

/// The name of the kind of `data`, as `parse_kind` reads it.
pub fn kind_name(data: &Data) -> &'static str {
    match data {
        Data::Tensor(_) => "tensor",
        Data::Block(_) => "block",
        Data::Labels(_) => "labels",
    }
}

pub fn parse_kind(py: Python<'_>, kind: &str) -> PyResult<Kind> {
    match kind {
        "tensor" => Ok(Kind::Tensor),
        "block" => Ok(Kind::Block),
        "labels" => Ok(Kind::Labels),
        other => Err(invalid(py, format!("unknown kind '{other}'"))),
    }
}

pub fn to_python(py: Python<'_>, data: Data) -> PyResult<Py<PyAny>> {
    Ok(match data {
        Data::Tensor(map) => Py::new(py, PyTensorMap { map })?.into_any(),
        Data::Block(block) => Py::new(
            py,
            PyTensorBlock {
                block,
                origin: Origin::Standalone,
            },
        )?
        .into_any(),
        Data::Labels(labels) => Py::new(py, PyLabels::from(labels))?.into_any(),
    })
}

/// Save `data` to `path` atomically (the path is used as given).
#[pyfunction]
// pyo3 can only extract an owned `PathBuf` (there is no `&Path` argument)
#[allow(clippy::needless_pass_by_value)]
fn _save_path(py: Python<'_>, path: PathBuf, data: &Bound<'_, PyAny>) -> PyResult<()> {
    let data = extract_data(data)?;
    Ok(py.detach(|| io::save_path(&path, as_ref(&data)))?)
}

/// A seekable Python binary file object as a Rust writer. Data goes to
/// `file.write` in chunks of at most [`CHUNK`] bytes, each copied into a
/// `bytes` object (so the file object never sees blockmap's memory, and the
/// memory used does not grow with the data).
///
/// Positions are relative to where the file was when saving started, so an
/// archive written after other data is a valid archive from its own start
/// (as with `numpy.savez`).
struct PyFileWriter<'py> {
    file: Bound<'py, PyAny>,
    base: u64,
}

/// Largest piece handed to `file.write` at once.
const CHUNK: usize = 8 << 20;

fn to_io_error(error: PyErr) -> std::io::Error {
    std::io::Error::other(error)
}

impl std::io::Write for PyFileWriter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let chunk = &data[..data.len().min(CHUNK)];
        let bytes = pyo3::types::PyBytes::new(self.file.py(), chunk);
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

impl std::io::Seek for PyFileWriter<'_> {
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

/// Save `data` into a seekable binary file object, streaming.
#[pyfunction]
fn _save_file(file: &Bound<'_, PyAny>, data: &Bound<'_, PyAny>) -> PyResult<()> {
    let data = extract_data(data)?;
    let base: u64 = file.call_method0("tell")?.extract()?;
    let writer = PyFileWriter {
        file: file.clone(),
        base,
    };
    let result = io::save(writer, as_ref(&data)).and_then(|mut writer| {
        std::io::Write::flush(&mut writer).map_err(|e| crate::Error::io("flushing the file", e))
    });
    match result {
        Ok(()) => Ok(()),
        // an exception raised by the file object: raise it as it is
        Err(crate::Error::Io { source, .. })
            if source
                .get_ref()
                .is_some_and(<dyn std::error::Error + Send + Sync>::is::<PyErr>) =>
        {
            let error = source.into_inner().and_then(|e| e.downcast::<PyErr>().ok());
            Err(error.map_or_else(|| invalid(file.py(), "writing failed"), |e| *e))
        }
        Err(error) => Err(error.into()),
    }
}

/// The archive of `data` in a memoryview over memory blockmap owns.
#[pyfunction]
fn _save_buffer<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyMemoryView>> {
    let data = extract_data(data)?;
    let buffer = py.detach(|| io::save_buffer(as_ref(&data)))?;
    let owner = Bound::new(py, BufferOwner::new(buffer))?;
    PyMemoryView::from(&owner.into_any())
}

/// Load `kind` from `path`, mapped when `mmap` is true.
#[pyfunction]
// pyo3 can only extract an owned `PathBuf` (there is no `&Path` argument)
#[allow(clippy::needless_pass_by_value)]
fn _load_path(py: Python<'_>, path: PathBuf, kind: &str, mmap: bool) -> PyResult<Py<PyAny>> {
    let kind = parse_kind(py, kind)?;
    let data = py.detach(|| io::load_path(&path, kind, mmap))?;
    to_python(py, data)
}

/// Load `kind` from a bytes-like object, viewing it where possible.
#[pyfunction]
fn _load_buffer(py: Python<'_>, buffer: &Bound<'_, PyAny>, kind: &str) -> PyResult<Py<PyAny>> {
    let kind = parse_kind(py, kind)?;
    let buffer = buffer_from_python(buffer)?;
    let data = py.detach(|| io::load_buffer(buffer, kind))?;
    to_python(py, data)
}

/// Check the file at `path` completely.
#[pyfunction]
// pyo3 can only extract an owned `PathBuf` (there is no `&Path` argument)
#[allow(clippy::needless_pass_by_value)]
fn _verify_path(py: Python<'_>, path: PathBuf) -> PyResult<()> {
    py.detach(|| io::verify_path(&path))?;
    Ok(())
}

/// Call a function of the Python module `blockmap.io`.
pub fn call_io<'py>(
    py: Python<'py>,
    function: &str,
    args: impl pyo3::call::PyCallArgs<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    py.import("blockmap.io")?.getattr(function)?.call1(args)
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(_save_path, module)?)?;
    module.add_function(wrap_pyfunction!(_save_buffer, module)?)?;
    module.add_function(wrap_pyfunction!(_save_file, module)?)?;
    module.add_function(wrap_pyfunction!(_load_path, module)?)?;
    module.add_function(wrap_pyfunction!(_load_buffer, module)?)?;
    module.add_function(wrap_pyfunction!(_verify_path, module)?)?;
    Ok(())
}
