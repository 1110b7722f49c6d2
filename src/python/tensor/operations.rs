//! `TensorMap`'s operations: `keys_to_samples`, `keys_to_properties`,
//! `components_to_properties`, and the arithmetic operators
//! (metatensor-operations' functions).

use pyo3::prelude::*;

use super::errors::{invalid, wrong_type};
use super::ops::{fill_bytes, keys_to_move, names};
use super::PyTensorMap;
use crate::tensor::TensorMap;

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyTensorMap {
    /// Merge blocks along the samples, moving the key dimensions
    /// ``keys_to_move`` (a name, a list of names, or :class:`Labels` without
    /// entries) to the end of the sample dimensions, as metatensor-core's
    /// ``keys_to_samples``: properties are the union of the merged blocks'
    /// (missing entries are ``fill_value``, gradients too); samples are
    /// sorted when ``sort_samples``, otherwise in block order.
    ///
    /// Parameters
    /// ----------
    /// keys_to_move : str, sequence of str or Labels
    ///     The key dimensions to move.
    /// fill_value : float, optional
    ///     The value of missing entries.
    /// sort_samples : bool, optional
    ///     Sort the samples of the result.
    ///
    /// Returns
    /// -------
    /// TensorMap
    ///     The merged map.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If a dimension is not a key dimension, or the blocks cannot be merged.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    #[pyo3(
        signature = (keys_to_move, *, fill_value = FillValue::Default, sort_samples = true),
        text_signature = "(self, /, keys_to_move, *, fill_value=0.0, sort_samples=True)"
    )]
    fn keys_to_samples(
        &self,
        py: Python<'_>,
        keys_to_move: &Bound<'_, PyAny>,
        fill_value: FillValue<'_>,
        sort_samples: bool,
    ) -> PyResult<Self> {
        let keys_to_move = self::keys_to_move(keys_to_move)?;
        if !keys_to_move.is_empty() {
            return Err(invalid(
                py,
                "user provided values for the keys to move is not yet implemented, \
                 `keys_to_move` should not contain any entry when calling keys_to_samples",
            ));
        }
        let map = self.map();
        let fill = fill(py, &map, fill_value)?;
        let result = py.detach(|| {
            crate::ops::keys_to_samples(&map, keys_to_move.names(), &fill, sort_samples)
        })?;
        Ok(PyTensorMap::with_arrays(result, self.arrays))
    }

    /// Merge blocks along the properties, moving the key dimensions
    /// ``keys_to_move`` to the front of the property dimensions, as
    /// metatensor-core's ``keys_to_properties``. Given as names (or
    /// :class:`Labels` without entries), the new properties are each merged
    /// block's, prefixed by its key values; given as :class:`Labels` with
    /// entries, they are every entry followed by every (shared) property.
    /// Missing entries are ``fill_value`` (gradients too); samples are
    /// sorted when ``sort_samples``, otherwise in order of appearance.
    ///
    /// Parameters
    /// ----------
    /// keys_to_move : str, sequence of str or Labels
    ///     The key dimensions to move.
    /// fill_value : float, optional
    ///     The value of missing entries.
    /// sort_samples : bool, optional
    ///     Sort the samples of the result.
    ///
    /// Returns
    /// -------
    /// TensorMap
    ///     The merged map.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If a dimension is not a key dimension, or the blocks cannot be merged.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    #[pyo3(
        signature = (keys_to_move, *, fill_value = FillValue::Default, sort_samples = true),
        text_signature = "(self, /, keys_to_move, *, fill_value=0.0, sort_samples=True)"
    )]
    fn keys_to_properties(
        &self,
        py: Python<'_>,
        keys_to_move: &Bound<'_, PyAny>,
        fill_value: FillValue<'_>,
        sort_samples: bool,
    ) -> PyResult<Self> {
        let keys_to_move = self::keys_to_move(keys_to_move)?;
        let map = self.map();
        let fill = fill(py, &map, fill_value)?;
        let result =
            py.detach(|| crate::ops::keys_to_properties(&map, &keys_to_move, &fill, sort_samples))?;
        Ok(PyTensorMap::with_arrays(result, self.arrays))
    }

    /// Move the component dimensions ``dimensions`` (a name or a list of
    /// names) to the front of the properties of every block and gradient,
    /// as metatensor-core's ``components_to_properties`` (the last one
    /// named comes first).
    ///
    /// Parameters
    /// ----------
    /// dimensions : str or sequence of str
    ///     The component dimensions to move.
    ///
    /// Returns
    /// -------
    /// TensorMap
    ///     The new map.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If a name is not a component dimension.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn components_to_properties(
        &self,
        py: Python<'_>,
        dimensions: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let dimensions = names(dimensions, "dimensions")?;
        let map = self.map();
        let result = py.detach(|| crate::ops::components_to_properties(&map, &dimensions))?;
        Ok(PyTensorMap::with_arrays(result, self.arrays))
    }

    /// ``tensor + other``: ``blockmap.operations.add`` (metatensor-core's
    /// operators are metatensor-operations' functions; they need it
    /// installed, as metatensor-core does).
    fn __add__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        operation(slf, "add", other)
    }

    /// ``tensor - other``: ``blockmap.operations.subtract``.
    fn __sub__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        operation(slf, "subtract", other)
    }

    /// ``tensor * other``: ``blockmap.operations.multiply``.
    fn __mul__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        operation(slf, "multiply", other)
    }

    /// ``tensor @ other``: ``blockmap.operations.dot``.
    fn __matmul__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        operation(slf, "dot", other)
    }

    /// ``tensor / other``: ``blockmap.operations.divide``.
    fn __truediv__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        operation(slf, "divide", other)
    }

    /// ``tensor ** other``: ``blockmap.operations.pow``. As metatensor-core's
    /// two-argument ``__pow__``, ``pow(tensor, other, modulo)`` is a `TypeError`.
    fn __pow__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
        modulo: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if !modulo.is_none() {
            return Err(wrong_type(
                slf.py(),
                "TensorMap.__pow__() takes 2 positional arguments but 3 were given",
            ));
        }
        operation(slf, "pow", other)
    }

    /// ``-tensor``: ``blockmap.operations.multiply(tensor, -1)``.
    fn __neg__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        operation(
            slf,
            "multiply",
            &(-1i64).into_pyobject(slf.py())?.into_any(),
        )
    }

    /// ``+tensor``: the map itself, as in metatensor-core.
    fn __pos__<'py>(slf: &Bound<'py, Self>) -> Bound<'py, Self> {
        slf.clone()
    }
}

/// ``blockmap.operations.<name>(map, other)``, imported on first use.
fn operation<'py>(
    map: &Bound<'py, PyTensorMap>,
    name: &str,
    other: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let operations = map.py().import("blockmap.operations")?;
    operations.getattr(name)?.call1((map, other))
}

/// The ``fill_value`` of ``keys_to_*``: 0.0 when not given (an explicit
/// None is numpy's, as in metatensor-core: NaN for floats).
pub enum FillValue<'py> {
    Default,
    Value(Bound<'py, PyAny>),
}

impl<'py> FromPyObject<'_, 'py> for FillValue<'py> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        Ok(FillValue::Value(obj.to_owned()))
    }
}

/// ``numpy.array(fill_value, dtype=map.dtype)``, as bytes.
fn fill(py: Python<'_>, map: &TensorMap, fill_value: FillValue<'_>) -> PyResult<Vec<u8>> {
    match fill_value {
        FillValue::Value(value) => fill_bytes(map, &value),
        FillValue::Default => fill_bytes(map, &0.0f64.into_pyobject(py)?.into_any()),
    }
}
