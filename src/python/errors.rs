//! The conversion of core errors to Python exceptions.
//!
//! The exception classes are declared in Python (`blockmap/exceptions.py`,
//! one line each with their builtin bases); the binding looks each one up
//! once and raises it.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use crate::error::Error;

/// The exception classes of `blockmap.exceptions` (named as in Python,
/// hence the common postfix).
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    BlockMapError,
    ValidationError,
    BlockMapTypeError,
    FormatError,
    BlockMapIOError,
    MissingFileError,
    ExistingFileError,
    BlockMapMemoryError,
    InternalError,
    BlockMapIndexError,
    BlockMapOverflowError,
    BlockMapAssertionError,
    NotEqualError,
    BlockMapNotImplementedError,
    BlockMapRuntimeError,
}

impl Class {
    const ALL: [Class; 15] = [
        Class::BlockMapError,
        Class::ValidationError,
        Class::BlockMapTypeError,
        Class::FormatError,
        Class::BlockMapIOError,
        Class::MissingFileError,
        Class::ExistingFileError,
        Class::BlockMapMemoryError,
        Class::InternalError,
        Class::BlockMapIndexError,
        Class::BlockMapOverflowError,
        Class::BlockMapAssertionError,
        Class::NotEqualError,
        Class::BlockMapNotImplementedError,
        Class::BlockMapRuntimeError,
    ];

    fn name(self) -> &'static str {
        match self {
            Class::BlockMapError => "BlockMapError",
            Class::ValidationError => "ValidationError",
            Class::BlockMapTypeError => "BlockMapTypeError",
            Class::FormatError => "FormatError",
            Class::BlockMapIOError => "BlockMapIOError",
            Class::MissingFileError => "MissingFileError",
            Class::ExistingFileError => "ExistingFileError",
            Class::BlockMapMemoryError => "BlockMapMemoryError",
            Class::InternalError => "InternalError",
            Class::BlockMapIndexError => "BlockMapIndexError",
            Class::BlockMapOverflowError => "BlockMapOverflowError",
            Class::BlockMapAssertionError => "BlockMapAssertionError",
            Class::NotEqualError => "NotEqualError",
            Class::BlockMapNotImplementedError => "BlockMapNotImplementedError",
            Class::BlockMapRuntimeError => "BlockMapRuntimeError",
        }
    }

    fn cell(self) -> &'static PyOnceLock<Py<PyType>> {
        static CELLS: [PyOnceLock<Py<PyType>>; Class::ALL.len()] = [
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
        ];
        &CELLS[self as usize]
    }

    /// The class object, looked up in `blockmap.exceptions` on first use.
    pub fn get(self, py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
        self.cell().import(py, "blockmap.exceptions", self.name())
    }

    /// An exception of this class with `args`; if the class cannot be
    /// found (`blockmap.exceptions` missing from an installation), the
    /// error saying so.
    pub fn err<A>(self, py: Python<'_>, args: A) -> PyErr
    where
        A: for<'py> IntoPyObject<'py> + Send + Sync + 'static,
        for<'py> <A as IntoPyObject<'py>>::Error: Into<PyErr>,
    {
        match self.get(py) {
            Ok(class) => PyErr::from_type(class.clone(), args),
            Err(error) => error,
        }
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

/// A `blockmap.BlockMapIndexError` (an `IndexError`) with this message.
pub fn out_of_range(py: Python<'_>, message: impl Into<String>) -> PyErr {
    Class::BlockMapIndexError.err(py, message.into())
}

/// A `blockmap.BlockMapOverflowError` (an `OverflowError`) with this message.
pub fn overflow(py: Python<'_>, message: impl Into<String>) -> PyErr {
    Class::BlockMapOverflowError.err(py, message.into())
}

/// The error of a call into numpy or into the caller's objects (`asarray`
/// of a ragged list, the truth value of an array), as blockmap's class of
/// the same builtin: `TypeError` to `BlockMapTypeError`, `ValueError` to
/// `ValidationError`, `OverflowError` and `IndexError` to theirs. Anything
/// else (`MemoryError`, `KeyboardInterrupt`, blockmap's own) is kept.
pub fn from_callee(py: Python<'_>, error: PyErr) -> PyErr {
    use pyo3::exceptions::{PyIndexError, PyOverflowError, PyTypeError, PyValueError};
    if Class::BlockMapError
        .get(py)
        .is_ok_and(|ours| error.is_instance(py, ours))
    {
        return error;
    }
    let class = if error.is_instance_of::<PyOverflowError>(py) {
        Class::BlockMapOverflowError
    } else if error.is_instance_of::<PyIndexError>(py) {
        Class::BlockMapIndexError
    } else if error.is_instance_of::<PyTypeError>(py) {
        Class::BlockMapTypeError
    } else if error.is_instance_of::<PyValueError>(py) {
        Class::ValidationError
    } else {
        return error;
    };
    let converted = class.err(py, error.value(py).to_string());
    converted.set_cause(py, Some(error));
    converted
}

/// A `blockmap.InternalError`: a broken invariant of the binding.
pub fn internal(py: Python<'_>, message: impl Into<String>) -> PyErr {
    Class::InternalError.err(py, Error::internal(message).to_string())
}

impl From<Error> for PyErr {
    fn from(error: Error) -> PyErr {
        Python::attach(|py| match error {
            Error::Invalid(message) => invalid(py, message),
            Error::Format(message) => Class::FormatError.err(py, message),
            Error::UnsupportedType(message) => wrong_type(py, message),
            Error::OutOfMemory(message) => Class::BlockMapMemoryError.err(py, message),
            Error::NotEqual(message) => Class::NotEqualError.err(py, message),
            Error::OutOfRange(message) => Class::BlockMapIndexError.err(py, message),
            Error::NotImplemented(message) => Class::BlockMapNotImplementedError.err(py, message),
            error @ Error::Internal(_) => Class::InternalError.err(py, error.to_string()),
            Error::Interrupted => pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"),
            Error::Io { ref source, .. } => {
                let class = match source.kind() {
                    std::io::ErrorKind::NotFound => Class::MissingFileError,
                    std::io::ErrorKind::AlreadyExists => Class::ExistingFileError,
                    _ => Class::BlockMapIOError,
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
            // `Error` is non-exhaustive for users of the crate, not here
            #[allow(unreachable_patterns)]
            other => Class::InternalError.err(py, other.to_string()),
        })
    }
}

/// The name of `obj`'s type, for error messages; for an object of
/// metatensor-core or metatensor-torch, its library's name for it and the
/// conversion to blockmap's (see [`foreign`]).
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    if let Some(foreign) = foreign(obj) {
        return foreign;
    }
    obj.get_type()
        .name()
        .map_or_else(|_| "?".into(), |n| n.to_string())
}

/// `repr(type(obj))`, as Python's own messages name a type
/// (`<class 'numpy.ndarray'>`); for an object of metatensor-core or
/// metatensor-torch, as [`type_name`].
pub fn class_repr(obj: &Bound<'_, PyAny>) -> String {
    if let Some(foreign) = foreign(obj) {
        return foreign;
    }
    obj.get_type()
        .repr()
        .map_or_else(|_| type_name(obj), |r| r.to_string())
}

/// The classes of metatensor's data model, as both libraries name them.
const FOREIGN_CLASSES: [&str; 4] = ["Labels", "LabelsEntry", "TensorBlock", "TensorMap"];

/// For a `Labels`, `LabelsEntry`, `TensorBlock` or `TensorMap` of
/// metatensor-core (a class of the module `metatensor`) or metatensor-torch
/// (a `torch.ScriptObject` of the `TorchScript` class
/// `__torch__.torch.classes.metatensor.<name>`, or a class of a module
/// `metatensor.torch...`): the object named as its library names it, and
/// the conversion to blockmap's, so that no message says "must be a
/// `TensorBlock`, got `TensorBlock`". Found without importing either library.
/// `None` for any other object.
pub fn foreign(obj: &Bound<'_, PyAny>) -> Option<String> {
    let class = obj.get_type();
    let module = class.module().ok()?;
    let module = module.to_str().ok()?;
    let name = class.name().ok()?;
    let name = name.to_str().ok()?;
    let (library, name) = if module == "torch" && name == "ScriptObject" {
        let qualified: String = obj
            .call_method0("_type")
            .and_then(|t| t.call_method0("qualified_name"))
            .and_then(|n| n.extract())
            .ok()?;
        let name = qualified.strip_prefix("__torch__.torch.classes.metatensor.")?;
        let name = FOREIGN_CLASSES.iter().find(|&&n| n == name)?;
        ("metatensor.torch", *name)
    } else if module == "metatensor.torch" || module.starts_with("metatensor.torch.") {
        (
            "metatensor.torch",
            *FOREIGN_CLASSES.iter().find(|&&n| n == name)?,
        )
    } else if module == "metatensor" || module.starts_with("metatensor.") {
        ("metatensor", *FOREIGN_CLASSES.iter().find(|&&n| n == name)?)
    } else {
        return None;
    };
    let (owner, function) = if library == "metatensor" {
        ("metatensor-core", "from_metatensor")
    } else {
        ("metatensor-torch", "from_metatensor_torch")
    };
    let convert = if name == "LabelsEntry" {
        format!(
            "give its values (`list(entry)`) or convert its Labels with \
             `blockmap.{function}(labels)`"
        )
    } else {
        format!("convert it with `blockmap.{function}(x)`")
    };
    Some(format!(
        "{library}.{name} ({owner}'s class, not blockmap's: {convert})"
    ))
}

/// ``_foreign(obj)``: for metatensor's objects, their name and conversion
/// as blockmap's messages give them (see [`foreign`]), else `None`; for
/// the messages of blockmap's Python code.
#[pyfunction]
fn _foreign(obj: &Bound<'_, PyAny>) -> Option<String> {
    foreign(obj)
}

/// Add the exception classes to the native module too (they are the ones
/// of `blockmap.exceptions`), and `_foreign`.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    for class in Class::ALL {
        module.add(class.name(), class.get(module.py())?)?;
    }
    module.add_function(wrap_pyfunction!(_foreign, module)?)?;
    Ok(())
}
