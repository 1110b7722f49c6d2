//! Block selections (`tensor.block(...)`, `tensor.blocks(...)`,
//! `tensor[...]`), read as metatensor-core reads them: an index, a list of
//! indices (`blocks` only), a dict of key values, a `LabelsEntry`, `Labels`
//! (any number of entries) or keyword arguments.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyString};

use super::convert::{check_index, saturating_index, PyIndex};
use super::entry::PyLabelsEntry;
use super::errors::{out_of_range, overflow, type_name, wrong_type};
use super::labels::PyLabels;
use crate::array::Array;
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// A selection, read.
pub enum Selection {
    /// one block, by position (negative from the end)
    Index(PyIndex),
    /// blocks by position
    Indices(Vec<PyIndex>),
    /// the blocks whose keys match one of the entries
    Keys(Labels),
}

/// Read `selection` (or, when it is None, the keyword arguments);
/// `indices` allows a sequence of indices.
pub fn read(
    py: Python<'_>,
    selection: Option<&Bound<'_, PyAny>>,
    kwargs: Option<&Bound<'_, PyDict>>,
    indices: bool,
) -> PyResult<Selection> {
    let kwargs = kwargs.filter(|k| !k.is_empty());
    let Some(selection) = selection.filter(|s| !s.is_none()) else {
        return match kwargs {
            Some(kwargs) => from_dict(kwargs),
            None => from_dict(&PyDict::new(py)),
        };
    };
    if kwargs.is_some() {
        return Err(wrong_type(
            py,
            "give the selection either as an argument or as keyword arguments, not both",
        ));
    }
    if let Ok(entry) = selection.cast::<PyLabelsEntry>() {
        let entry = entry.get();
        return Ok(Selection::Keys(Labels::new(
            entry.names().to_vec(),
            entry.values(),
        )?));
    }
    if let Ok(labels) = selection.cast::<PyLabels>() {
        return Ok(Selection::Keys(labels.get().labels.clone()));
    }
    if let Ok(dict) = selection.cast::<PyDict>() {
        return from_dict(dict);
    }
    // `True` is the integer 1 in Python, and metatensor-core takes it so
    if let Some(index) = saturating_index(selection) {
        return Ok(Selection::Index(index));
    }
    if indices && !selection.is_instance_of::<PyString>() && !selection.is_instance_of::<PyBytes>()
    {
        if let Ok(iter) = selection.try_iter() {
            let mut positions = Vec::new();
            for item in iter {
                let item = item?;
                positions.push(saturating_index(&item).ok_or_else(|| {
                    wrong_type(
                        py,
                        format!(
                            "a list of block indices must hold integers, got {}",
                            type_name(&item)
                        ),
                    )
                })?);
            }
            return Ok(Selection::Indices(positions));
        }
    }
    Err(wrong_type(
        py,
        format!(
            "invalid type for block selection: {} (expected an int, a dict, a LabelsEntry \
             or Labels{})",
            type_name(selection),
            if indices { ", or a list of int" } else { "" }
        ),
    ))
}

/// A dict of key values as one-entry Labels (an empty dict: no dimensions,
/// one entry, which every key matches).
fn from_dict(dict: &Bound<'_, PyDict>) -> PyResult<Selection> {
    let py = dict.py();
    let mut names = Vec::with_capacity(dict.len());
    let mut values = Vec::with_capacity(dict.len());
    for (name, value) in dict.iter() {
        let name: String = name.extract().map_err(|_| {
            wrong_type(
                py,
                format!(
                    "the keys of a selection must be dimension names (str), got {}",
                    type_name(&name)
                ),
            )
        })?;
        let number: i64 = if value.is_instance_of::<PyBool>() {
            i64::from(value.is_truthy()?)
        } else {
            value.extract().map_err(|_| {
                if saturating_index(&value).is_some() {
                    overflow(
                        py,
                        format!("the selected value {name}={value} is out of bounds for int32"),
                    )
                } else {
                    wrong_type(
                        py,
                        format!(
                            "expected integer values in selection, got {name}={value} of type {}",
                            type_name(&value)
                        ),
                    )
                }
            })?
        };
        let number = i32::try_from(number).map_err(|_| {
            overflow(
                py,
                format!("the selected value {name}={number} is out of bounds for int32"),
            )
        })?;
        names.push(name);
        values.push(number);
    }
    let array = Array::from_slice(vec![1, names.len()], &values)?;
    Ok(Selection::Keys(Labels::from_array(names, array, false)?))
}

/// Resolve a Python index into the map's blocks.
pub fn block_index(map: &TensorMap, index: &PyIndex) -> PyResult<usize> {
    check_index(index, map.blocks().len()).map_err(|_| {
        Python::attach(|py| {
            out_of_range(
                py,
                format!(
                    "block index out of bounds: we have {} blocks but the index is {index}",
                    map.blocks().len()
                ),
            )
        })
    })
}

/// The positions of the blocks `selection` picks.
pub fn resolve(map: &TensorMap, selection: &Selection) -> PyResult<Vec<usize>> {
    match selection {
        Selection::Index(index) => Ok(vec![block_index(map, index)?]),
        Selection::Indices(indices) => indices.iter().map(|i| block_index(map, i)).collect(),
        Selection::Keys(labels) => Ok(map.select(labels)?),
    }
}

/// `(o3_lambda=1, center_type=8)` for the first entry of a selection.
pub fn describe(selection: &Selection) -> String {
    match selection {
        Selection::Index(i) => format!("index {i}"),
        Selection::Indices(indices) => {
            let shown: Vec<String> = indices.iter().map(ToString::to_string).collect();
            format!("indices [{}]", shown.join(", "))
        }
        Selection::Keys(labels) if labels.is_empty() => "a selection without entries".into(),
        Selection::Keys(labels) => {
            let pairs: Vec<String> = labels
                .names()
                .iter()
                .zip(labels.row(0))
                .map(|(name, value)| format!("{name}={value}"))
                .collect();
            let more = match labels.count() {
                1 => String::new(),
                n => format!(" (and {} more entries)", n - 1),
            };
            format!("({}){more}", pairs.join(", "))
        }
    }
}
