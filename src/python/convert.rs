//! Conversions between Python objects and the core: [`Data`] to and from
//! the Python classes, Labels from their Python forms (names, values,
//! entries), and Python indices.

use std::sync::Arc;

use numpy::PyReadonlyArray2;
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use super::array::as_ndarray;
use super::classes::{Origin, PyLabels, PyLabelsEntry, PyTensorBlock, PyTensorMap};
use super::errors::{invalid, type_name, wrong_type};
use crate::array::Array;
use crate::block::TensorBlock;
use crate::data::{Data, DataRef};
use crate::dtype::DType;
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// A snapshot of the `TensorMap`, `TensorBlock` or `Labels` in a Python
/// object: what it held when taken, kept alive while it is used (with the
/// GIL released, or while another thread changes the object).
#[derive(Debug)]
pub enum Held {
    /// a map
    Tensor(Arc<TensorMap>),
    /// a block
    Block(Arc<TensorBlock>),
    /// labels
    Labels(Labels),
}

impl Held {
    /// The data, borrowed.
    pub fn as_ref(&self) -> DataRef<'_> {
        match self {
            Held::Tensor(map) => DataRef::Tensor(map),
            Held::Block(block) => DataRef::Block(block),
            Held::Labels(labels) => DataRef::Labels(labels),
        }
    }
}

/// A snapshot of the `TensorMap`, `TensorBlock` or `Labels` in `obj`, or a
/// type error.
pub fn held_from_python(obj: &Bound<'_, PyAny>) -> PyResult<Held> {
    if let Ok(map) = obj.cast::<PyTensorMap>() {
        return Ok(Held::Tensor(map.get().map()));
    }
    if let Ok(block) = obj.cast::<PyTensorBlock>() {
        return Ok(Held::Block(block.get().block()));
    }
    if let Ok(labels) = obj.cast::<PyLabels>() {
        return Ok(Held::Labels(labels.get().labels.clone()));
    }
    Err(wrong_type(
        obj.py(),
        format!(
            "data must be a TensorMap, TensorBlock or Labels, not {}",
            type_name(obj)
        ),
    ))
}

/// The Python object holding `data`.
pub fn to_python(py: Python<'_>, data: Data) -> PyResult<Py<PyAny>> {
    Ok(match data {
        Data::Tensor(map) => Py::new(py, PyTensorMap::from_map(map))?.into_any(),
        Data::Block(block) => {
            Py::new(py, PyTensorBlock::new_view(block, Origin::Standalone))?.into_any()
        }
        Data::Labels(labels) => Py::new(py, PyLabels::from(labels))?.into_any(),
    })
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

/// Label `names` given as one string or a sequence of strings.
pub fn extract_names(names: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(name) = names.cast::<PyString>() {
        return Ok(vec![name.to_string()]);
    }
    if names.is_instance_of::<PyBytes>() {
        return Err(wrong_type(names.py(), "label names must be str, not bytes"));
    }
    let mut result = Vec::new();
    for name in names.try_iter().map_err(|_| {
        wrong_type(
            names.py(),
            format!(
                "label names must be a str or a sequence of str, got {}",
                type_name(names)
            ),
        )
    })? {
        let name = name?;
        let name = name.cast::<PyString>().map_err(|_| {
            wrong_type(
                names.py(),
                format!("label names must be str, got {}", type_name(&name)),
            )
        })?;
        result.push(name.to_string());
    }
    Ok(result)
}

/// An int32 `count x n_dims` array copied from an integer array-like.
pub fn extract_label_values(values: &Bound<'_, PyAny>, n_dims: usize) -> PyResult<Array> {
    let py = values.py();
    let array = as_ndarray(values)?;
    let shape: Vec<usize> = array.getattr("shape")?.extract()?;
    let size: usize = array.getattr("size")?.extract()?;
    if size == 0 {
        // no entries: an empty list (shape (0,)), or an array of any dtype
        // of shape (0, n_dims); labels without dimensions have at most one
        // (empty) entry
        let count = match shape[..] {
            [0] => 0,
            [count, dims] if dims == n_dims && (count == 0 || n_dims == 0) => count,
            _ => {
                return Err(invalid(
                    py,
                    format!("label values must have shape (count, {n_dims}), got {shape:?}"),
                ))
            }
        };
        if count > 1 {
            return Err(invalid(
                py,
                "labels without dimensions can have at most one entry",
            ));
        }
        return Ok(Array::zeros(DType::I4, vec![count, n_dims])?);
    }
    let kind: String = array.getattr("dtype")?.getattr("kind")?.extract()?;
    if kind != "i" && kind != "u" {
        return Err(wrong_type(
            py,
            format!(
                "label values must be integers, got dtype {}",
                array.getattr("dtype")?.str()?
            ),
        ));
    }
    if shape.len() != 2 || shape[1] != n_dims {
        return Err(invalid(
            py,
            format!("label values must have shape (count, {n_dims}), got {shape:?}"),
        ));
    }
    let (min, max): (i128, i128) = (
        array.call_method0("min")?.extract()?,
        array.call_method0("max")?.extract()?,
    );
    if min < i128::from(i32::MIN) || max > i128::from(i32::MAX) {
        return Err(invalid(
            py,
            format!("label values must fit in int32, got values in [{min}, {max}]"),
        ));
    }
    // one copy into memory the Labels own; `astype` only converts when needed
    let kwargs = PyDict::new(py);
    kwargs.set_item("copy", false)?;
    let int32 = array.call_method("astype", ("=i4",), Some(&kwargs))?;
    let int32: PyReadonlyArray2<'_, i32> = int32.extract()?;
    let view = int32.as_array();
    // `ndarray`'s `as_slice` is only for row-major (C) layout
    let array = if let Some(data) = view.as_slice() {
        Array::from_slice(shape, data)?
    } else {
        // otherwise gather in row-major order
        let data: Vec<i32> = view.iter().copied().collect();
        Array::from_slice(shape, &data)?
    };
    Ok(array)
}

/// An entry given as a `LabelsEntry` or a sequence of integers; `None` when
/// an integer does not fit in int32 (such an entry cannot be present).
pub fn extract_entry(entry: &Bound<'_, PyAny>) -> PyResult<Option<Vec<i32>>> {
    if let Ok(entry) = entry.cast::<PyLabelsEntry>() {
        let entry = entry.get();
        return Ok(Some(entry.values().to_vec()));
    }
    let values: Vec<i64> = entry.extract().map_err(|_| {
        wrong_type(
            entry.py(),
            format!(
                "a labels entry must be a LabelsEntry or a sequence of integers, got {}",
                type_name(entry)
            ),
        )
    })?;
    Ok(values.into_iter().map(|v| i32::try_from(v).ok()).collect())
}

/// An integer index of `obj` (anything with `__index__`), saturated to the
/// range of `isize` (such an index is out of range anyway); `None` when
/// `obj` is not an integer.
pub fn saturating_index(obj: &Bound<'_, PyAny>) -> Option<isize> {
    if let Ok(index) = obj.extract::<isize>() {
        return Some(index);
    }
    let index = obj.call_method0("__index__").ok()?;
    Some(if index.lt(0).ok()? {
        isize::MIN
    } else {
        isize::MAX
    })
}

/// Resolve a Python index (negative from the end) into `0..len`.
pub fn check_index(index: isize, len: usize) -> PyResult<usize> {
    let resolved = if index < 0 {
        index.checked_add_unsigned(len)
    } else {
        Some(index)
    };
    resolved
        .and_then(|i| usize::try_from(i).ok())
        .filter(|&i| i < len)
        .ok_or_else(|| {
            PyIndexError::new_err(format!("index {index} is out of range for {len} entries"))
        })
}
