//! Python exception types, and the conversion of core errors to them.
//!
//! `BlockMapError` is the base of every error blockmap raises; each
//! subclass also inherits the builtin exception a user would catch, so that
//! `except ValueError` works as well as `except blockmap.ValidationError`.

use pyo3::exceptions::{PyException, PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::error::Error;

static BLOCKMAP_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static VALIDATION_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static TYPE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Make `class name(*bases)` in module `blockmap`, with a docstring.
fn new_class<'py>(
    py: Python<'py>,
    name: &str,
    bases: &[&Bound<'py, PyType>],
    doc: &str,
) -> PyResult<Py<PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__module__", "blockmap")?;
    namespace.set_item("__doc__", doc)?;
    let bases = PyTuple::new(py, bases)?;
    let class = py
        .get_type::<PyType>()
        .call1((name, bases, namespace))?
        .cast_into::<PyType>()?;
    Ok(class.unbind())
}

/// `blockmap.BlockMapError`, the base of all blockmap errors.
pub fn blockmap_error(py: Python<'_>) -> &Bound<'_, PyType> {
    BLOCKMAP_ERROR
        .get_or_init(py, || {
            new_class(
                py,
                "BlockMapError",
                &[&py.get_type::<PyException>()],
                "Base class of every error blockmap raises.",
            )
            .expect("creating an exception class cannot fail")
        })
        .bind(py)
}

/// `blockmap.ValidationError`: invalid data (also a `ValueError`).
pub fn validation_error(py: Python<'_>) -> &Bound<'_, PyType> {
    VALIDATION_ERROR
        .get_or_init(py, || {
            new_class(
                py,
                "ValidationError",
                &[blockmap_error(py), &py.get_type::<PyValueError>()],
                "Invalid data: shapes, labels, gradients or metadata that break a rule.",
            )
            .expect("creating an exception class cannot fail")
        })
        .bind(py)
}

/// `blockmap.BlockMapTypeError`: an argument of the wrong type (also a `TypeError`).
pub fn type_error(py: Python<'_>) -> &Bound<'_, PyType> {
    TYPE_ERROR
        .get_or_init(py, || {
            new_class(
                py,
                "BlockMapTypeError",
                &[blockmap_error(py), &py.get_type::<PyTypeError>()],
                "An argument of the wrong type (e.g. an object dtype array).",
            )
            .expect("creating an exception class cannot fail")
        })
        .bind(py)
}

/// A `blockmap.ValidationError` with this message.
pub fn invalid(py: Python<'_>, message: impl Into<String>) -> PyErr {
    PyErr::from_type(validation_error(py).clone(), message.into())
}

/// A `blockmap.BlockMapTypeError` with this message.
pub fn wrong_type(py: Python<'_>, message: impl Into<String>) -> PyErr {
    PyErr::from_type(type_error(py).clone(), message.into())
}

impl From<Error> for PyErr {
    fn from(error: Error) -> PyErr {
        Python::attach(|py| match error {
            Error::Invalid(message) => invalid(py, message),
            Error::UnsupportedType(message) => wrong_type(py, message),
            Error::Io { .. } => PyOSError::new_err(error.to_string()),
        })
    }
}

/// The name of `obj`'s type, for error messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Add the exception classes to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add("BlockMapError", blockmap_error(py))?;
    module.add("ValidationError", validation_error(py))?;
    module.add("BlockMapTypeError", type_error(py))?;
    Ok(())
}
