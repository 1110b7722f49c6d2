//! Python exception types, and the conversion of core errors to them.
//!
//! `BlockMapError` is the base of every error blockmap raises; each
//! subclass also inherits the builtin exception a user would catch, so that
//! `except ValueError` works as well as `except blockmap.ValidationError`.

use pyo3::exceptions::{PyException, PyFileNotFoundError, PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::error::Error;

/// The exception classes, in an order where bases come first (named as in
/// Python, hence the common postfix).
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    BlockMapError,
    ValidationError,
    BlockMapTypeError,
    FormatError,
    BlockMapIOError,
    MissingFileError,
}

impl Class {
    const ALL: [Class; 6] = [
        Class::BlockMapError,
        Class::ValidationError,
        Class::BlockMapTypeError,
        Class::FormatError,
        Class::BlockMapIOError,
        Class::MissingFileError,
    ];

    fn name(self) -> &'static str {
        match self {
            Class::BlockMapError => "BlockMapError",
            Class::ValidationError => "ValidationError",
            Class::BlockMapTypeError => "BlockMapTypeError",
            Class::FormatError => "FormatError",
            Class::BlockMapIOError => "BlockMapIOError",
            Class::MissingFileError => "MissingFileError",
        }
    }

    fn doc(self) -> &'static str {
        match self {
            Class::BlockMapError => "Base class of every error blockmap raises.",
            Class::ValidationError => {
                "Invalid data: shapes, labels, gradients or metadata that break a rule."
            }
            Class::BlockMapTypeError => {
                "An argument of the wrong type (e.g. an object dtype array)."
            }
            Class::FormatError => {
                "A file or buffer that is not a valid ``.mts`` archive / ``.npy`` array."
            }
            Class::BlockMapIOError => "The operating system refused a read or a write.",
            Class::MissingFileError => "The file to load does not exist.",
        }
    }

    fn bases(self, py: Python<'_>) -> Vec<Bound<'_, PyType>> {
        match self {
            Class::BlockMapError => vec![py.get_type::<PyException>()],
            Class::ValidationError => vec![
                Class::BlockMapError.get(py).clone(),
                py.get_type::<PyValueError>(),
            ],
            Class::BlockMapTypeError => vec![
                Class::BlockMapError.get(py).clone(),
                py.get_type::<PyTypeError>(),
            ],
            Class::FormatError => vec![Class::ValidationError.get(py).clone()],
            Class::BlockMapIOError => vec![
                Class::BlockMapError.get(py).clone(),
                py.get_type::<PyOSError>(),
            ],
            Class::MissingFileError => vec![
                Class::BlockMapIOError.get(py).clone(),
                py.get_type::<PyFileNotFoundError>(),
            ],
        }
    }

    fn cell(self) -> &'static PyOnceLock<Py<PyType>> {
        static CELLS: [PyOnceLock<Py<PyType>>; 6] = [
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
        ];
        &CELLS[self as usize]
    }

    /// The class object, created on first use as `class Name(*bases)` in
    /// module `blockmap`.
    pub fn get(self, py: Python<'_>) -> &Bound<'_, PyType> {
        self.cell()
            .get_or_init(py, || {
                let create = || -> PyResult<Py<PyType>> {
                    let namespace = PyDict::new(py);
                    namespace.set_item("__module__", "blockmap")?;
                    namespace.set_item("__doc__", self.doc())?;
                    let bases = PyTuple::new(py, self.bases(py))?;
                    let class = py
                        .get_type::<PyType>()
                        .call1((self.name(), bases, namespace))?
                        .cast_into::<PyType>()?;
                    Ok(class.unbind())
                };
                create().expect("creating an exception class cannot fail")
            })
            .bind(py)
    }

    /// An exception of this class with `args`.
    pub fn err<A>(self, py: Python<'_>, args: A) -> PyErr
    where
        A: for<'py> IntoPyObject<'py> + Send + Sync + 'static,
        for<'py> <A as IntoPyObject<'py>>::Error: Into<PyErr>,
    {
        PyErr::from_type(self.get(py).clone(), args)
    }
}

/// A `blockmap.ValidationError` with this message.
pub fn invalid(py: Python<'_>, message: impl Into<String>) -> PyErr {
    Class::ValidationError.err(py, message.into())
}

/// A `blockmap.BlockMapTypeError` with this message.
pub fn wrong_type(py: Python<'_>, message: impl Into<String>) -> PyErr {
    Class::BlockMapTypeError.err(py, message.into())
}

impl From<Error> for PyErr {
    fn from(error: Error) -> PyErr {
        Python::attach(|py| match error {
            Error::Invalid(message) => invalid(py, message),
            Error::Format(message) => Class::FormatError.err(py, message),
            Error::UnsupportedType(message) => wrong_type(py, message),
            Error::Io { ref source, .. } => {
                let class = if source.kind() == std::io::ErrorKind::NotFound {
                    Class::MissingFileError
                } else {
                    Class::BlockMapIOError
                };
                // OSError(errno, strerror) sets `errno` and shows "[Errno N]"
                // itself: drop Rust's " (os error N)" suffix
                let message = error.to_string();
                match source.raw_os_error() {
                    Some(errno) => {
                        let suffix = format!(" (os error {errno})");
                        let message = message.strip_suffix(&suffix).unwrap_or(&message);
                        class.err(py, (errno, message.to_string()))
                    }
                    None => class.err(py, (message,)),
                }
            }
        })
    }
}

/// The name of `obj`'s type, for error messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".into(), |n| n.to_string())
}

/// Add the exception classes to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    for class in Class::ALL {
        module.add(class.name(), class.get(module.py()))?;
    }
    Ok(())
}
