//! `blockmap.Labels`: metatensor-core's `Labels` API (its installed
//! `_labels.py` is the reference for names, defaults and the exceptions
//! raised), over the core's `Labels`. Here the struct, the Labels of an
//! argument (`extract_labels`, `LabelsArg`, `keys_arg`) and helpers of the
//! methods, which are in `labels/` by concern (pyo3's
//! `multiple-pymethods`): `construction`, `general` (names, values,
//! entries, equality, text), `dimensions`, `sets`, `serde` (files and
//! pickles) and `export` (metatensor's labels).

mod construction;
mod dimensions;
mod export;
mod general;
mod serde;
mod sets;

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyString;

// the binding's modules the methods use, their one way to them (the
// layers of src/python read this list: ../shared/tools/layers)
use super::{array, convert, docstrings, entry, errors, file, io, pickle, torch};

use crate::labels::{Labels, Names};
use errors::{class_repr, invalid, type_name, wrong_type};
use torch::Arrays;

/// Named int32 columns, one unique row per entry.
///
/// ``Labels(names, values, assume_unique=False)``, as in metatensor-core:
/// ``names`` is a string (``""``: no names) or a sequence of strings (valid
/// identifiers, unique); ``values`` a 2-D numpy array of integers of shape
/// ``(count, len(names))`` (any array without entries means none). The
/// values are copied once into int32 memory owned by the Labels, which
/// never changes afterwards: ``.values`` is a read-only view of it. With
/// ``assume_unique=True`` the check that rows are unique is skipped.
///
/// Labels are immutable: every operation (``union``, ``select``,
/// ``insert``, ``rename``, ...) returns new Labels.
#[pyclass(name = "Labels", module = "blockmap", frozen, weakref)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PyLabels {
    pub labels: Labels,
    /// what `values` gives: numpy arrays, or torch tensors (copies)
    pub arrays: Arrays,
}

impl From<Labels> for PyLabels {
    fn from(labels: Labels) -> Self {
        PyLabels {
            labels,
            arrays: Arrays::Numpy,
        }
    }
}

impl PyLabels {
    /// `labels` giving values as `arrays`.
    pub fn with_arrays(labels: Labels, arrays: Arrays) -> Self {
        PyLabels { labels, arrays }
    }

    /// Other Labels derived from these, giving the same array type.
    pub fn derived(&self, labels: Labels) -> Self {
        PyLabels::with_arrays(labels, self.arrays)
    }
}

/// The Labels in `obj`, or a type error naming `what`.
pub fn extract_labels(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Labels> {
    obj.cast::<PyLabels>()
        .map(|l| l.get().labels.clone())
        .map_err(|_| {
            wrong_type(
                obj.py(),
                format!("{what} must be blockmap.Labels, got {}", type_name(obj)),
            )
        })
}

/// A parameter that takes blockmap's `Labels`: anything else (metatensor's
/// Labels named with their conversion, see `errors::foreign`) is a
/// `BlockMapTypeError`, not pyo3's `TypeError` naming two classes `Labels`.
#[derive(Debug)]
pub struct LabelsArg(pub Labels);

impl FromPyObject<'_, '_> for LabelsArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, '_, PyAny>) -> PyResult<Self> {
        extract_labels(&obj, "the argument").map(LabelsArg)
    }
}

/// The Labels a `keys=` argument selects blocks by.
pub fn keys_arg(keys: Option<LabelsArg>) -> Option<Labels> {
    keys.map(|keys| keys.0)
}

/// New Labels and the positions, in them, of the entries of both operands.
type Mapped<'py> = (
    PyLabels,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
);

impl PyLabels {
    /// The name of a dimension given as `name`: metatensor refuses any
    /// other with "not found" (a `ValueError`), strings or not.
    fn dimension_name(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<String> {
        let found = name
            .cast::<PyString>()
            .ok()
            .map(ToString::to_string)
            .filter(|n| self.labels.dimension(n).is_some());
        found.ok_or_else(|| {
            let shown = name.str().map_or_else(|_| "?".into(), |s| s.to_string());
            invalid(
                py,
                format!(
                    "'{shown}' not found in the dimensions {} of these Labels",
                    Names(self.labels.names())
                ),
            )
        })
    }
}

/// The name of a new dimension: a str, or the `TypeError` metatensor's
/// Labels constructor raises.
fn new_name<'a, 'py>(name: &'a Bound<'py, PyAny>) -> PyResult<&'a Bound<'py, PyString>> {
    name.cast::<PyString>().map_err(|_| {
        wrong_type(
            name.py(),
            format!(
                "Labels names must be strings, got {} instead",
                class_repr(name)
            ),
        )
    })
}

/// metatensor takes a boolean or `None` index for numpy's (an added axis),
/// and refuses the entry it gets: a `ValueError`.
fn bool_index(py: Python<'_>) -> PyErr {
    invalid(
        py,
        "Labels entries are indexed by integers, not booleans or None",
    )
}
