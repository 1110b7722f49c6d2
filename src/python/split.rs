//! `blockmap.split` and `blockmap.split_block`: the arguments checked as
//! metatensor-operations checks them (`_check_split_args` and
//! `_check_slice_args`: same order, same exception types), each selection
//! resolved to positions per block exactly as numpy indexes (Labels with
//! `select`, lists as int32 arrays, arrays as given), then the core's split
//! with the GIL released.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString};

use super::block::{Origin, PyTensorBlock};
use super::errors::{class_repr, from_callee, invalid, wrong_type};
use super::join::{needs_autograd, operation};
use super::labels::PyLabels;
use super::tensor::PyTensorMap;
use super::torch::Arrays;
use crate::block::TensorBlock;
use crate::labels::Labels;
use crate::ops::join::Axis;
use crate::ops::split::split_block as core_split;
use crate::tensor::TensorMap;

static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    NUMPY
        .get_or_try_init(py, || Ok(py.import("numpy")?.unbind()))
        .map(|m| m.bind(py))
}

/// One selection, checked against the first block as metatensor-operations
/// checks it.
enum SplitSelection<'py> {
    Labels(Labels),
    /// a list (made an int32 array) or an array: numpy indexes with it
    Index(Bound<'py, PyAny>),
}

fn check_arguments<'py>(
    py: Python<'py>,
    first: &TensorBlock,
    axis: &Bound<'py, PyAny>,
    selections: &Bound<'py, PyAny>,
) -> PyResult<(Axis, Vec<SplitSelection<'py>>)> {
    let Ok(axis_name) = axis.cast::<PyString>() else {
        return Err(wrong_type(
            py,
            format!("axis must be a string, not {}", class_repr(axis)),
        ));
    };
    let Ok(selections) = selections.cast::<PyList>() else {
        return Err(wrong_type(
            py,
            format!(
                "`selections` must be a list, not {}",
                class_repr(selections)
            ),
        ));
    };
    let axis = match axis_name.to_str()? {
        "samples" => Axis::Samples,
        "properties" => Axis::Properties,
        _ => return Err(invalid(py, "axis must be either 'samples' or 'properties'")),
    };
    let ndarray = numpy(py)?.getattr("ndarray")?;
    let mut checked = Vec::with_capacity(selections.len());
    for selection in selections.iter() {
        if selection.is_instance(&ndarray)? {
            if selection.getattr("ndim")?.extract::<usize>()? > 1 {
                return Err(invalid(py, "`selection` must be a 1-D array of integers"));
            }
            checked.push(SplitSelection::Index(selection));
        } else if selection.is_instance_of::<PyList>() {
            let kwargs = PyDict::new(py);
            kwargs.set_item("dtype", numpy(py)?.getattr("int32")?)?;
            let array = numpy(py)?
                .getattr("array")?
                .call((selection,), Some(&kwargs))
                .map_err(|e| from_callee(py, e))?;
            checked.push(SplitSelection::Index(array));
        } else if let Ok(labels) = selection.cast::<PyLabels>() {
            let labels = labels.get().labels.clone();
            let (names, what) = match axis {
                Axis::Samples => (first.samples().names(), "sample"),
                Axis::Properties => (first.properties().names(), "property"),
            };
            if let Some(name) = labels.names().iter().find(|n| !names.contains(n)) {
                return Err(invalid(
                    py,
                    format!("invalid {what} name '{name}' which is not part of the input"),
                ));
            }
            checked.push(SplitSelection::Labels(labels));
        } else {
            return Err(wrong_type(
                py,
                format!(
                    "`selection` must be blockmap Labels, an array or List[int], not {}",
                    class_repr(&selection)
                ),
            ));
        }
    }
    Ok((axis, checked))
}

/// A boolean array with some entries false.
fn is_partial_mask(index: &Bound<'_, PyAny>) -> PyResult<bool> {
    let kind: String = index.getattr("dtype")?.getattr("kind")?.extract()?;
    if kind != "b" {
        return Ok(false);
    }
    let len: usize = index.len()?;
    let count: usize = index.call_method0("sum")?.extract()?;
    Ok(count != len)
}

/// The positions each selection picks in `block`, as numpy would index.
fn positions(
    py: Python<'_>,
    block: &TensorBlock,
    axis: Axis,
    selections: &[SplitSelection<'_>],
) -> PyResult<Vec<Vec<usize>>> {
    let labels = match axis {
        Axis::Samples => block.samples(),
        Axis::Properties => block.properties(),
    };
    let arange = numpy(py)?.getattr("arange")?.call1((labels.count(),))?;
    selections
        .iter()
        .map(|selection| match selection {
            SplitSelection::Labels(selection) => Ok(labels.select(selection)?),
            SplitSelection::Index(index) => {
                if axis == Axis::Samples && is_partial_mask(index)? {
                    // metatensor-operations renumbers the samples with
                    // `sample_map[selected] = range(len(selected))`, which
                    // numpy refuses for a mask that is not all true
                    return Err(invalid(
                        py,
                        "a boolean mask selecting some samples cannot renumber them: numpy \
                         boolean array indexing assignment needs one value per true entry",
                    ));
                }
                let picked = arange.get_item(index).map_err(|e| from_callee(py, e))?;
                // positions of an arange: non-negative and below its length
                picked.call_method0("tolist")?.extract::<Vec<usize>>()
            }
        })
        .collect()
}

/// Split ``tensor`` into one map per selection along ``axis``, as
/// metatensor-operations' ``split``: each selection is :class:`Labels`
/// (entries matching its values), an array or a list of indices. Along
/// samples, the selected samples come in the order given and gradient rows
/// follow their samples; along properties, in the block's order.
///
/// Parameters
/// ----------
/// tensor : TensorMap
///     The map to split.
/// axis : {"samples", "properties"}
///     The axis.
/// selections : sequence of Labels, arrays or lists of int
///     One selection per result.
///
/// Returns
/// -------
/// list of TensorMap
///     One map per selection.
///
/// Raises
/// ------
/// ValidationError
///     If an argument has an invalid value.
/// BlockMapTypeError
///     If an argument has the wrong type.
/// BlockMapIndexError
///     If an index is out of range.
/// BlockMapNotImplementedError
///     For gradients of gradients.
/// BlockMapRuntimeError
///     If tensors require grad and metatensor-operations is not installed.
/// BlockMapMemoryError
///     If memory for the result cannot be allocated.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction]
pub fn split<'py>(
    py: Python<'py>,
    tensor: &Bound<'py, PyAny>,
    axis: &Bound<'py, PyAny>,
    selections: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let Ok(map) = tensor.cast::<PyTensorMap>() else {
        return Err(wrong_type(
            py,
            format!(
                "`tensor` must be a blockmap TensorMap, not {}",
                class_repr(tensor)
            ),
        ));
    };
    let arrays = map.get().arrays;
    // metatensor-operations checks against `tensor.block(0)`
    let first = tensor.call_method1("block", (0,))?;
    let first = first.cast::<PyTensorBlock>()?.get().block();
    let (axis_arg, selections_arg) = (axis, selections);
    let (axis, selections) = check_arguments(py, &first, axis, selections)?;
    let map = map.get().map();
    if arrays == Arrays::Torch && needs_autograd(py, map.blocks())? {
        return operation(py, "split")?.call1((tensor, axis_arg, selections_arg));
    }
    let mut groups = Vec::with_capacity(map.blocks().len());
    for block in map.blocks() {
        groups.push(positions(py, block, axis, &selections)?);
    }
    let count = selections.len();
    let maps = py.detach(|| -> crate::error::Result<Vec<TensorMap>> {
        let mut per_group: Vec<Vec<TensorBlock>> = (0..count).map(|_| Vec::new()).collect();
        for (block, positions) in map.blocks().iter().zip(&groups) {
            for (group, block) in per_group
                .iter_mut()
                .zip(core_split(block, axis, positions)?)
            {
                group.push(block);
            }
        }
        per_group
            .into_iter()
            .map(|blocks| TensorMap::new(map.keys().clone(), blocks))
            .collect()
    })?;
    let list = PyList::empty(py);
    for map in maps {
        list.append(PyTensorMap::with_arrays(map, arrays))?;
    }
    Ok(list.into_any())
}

/// Split ``block`` into one block per selection along ``axis``, as
/// metatensor-operations' ``split_block``.
///
/// Parameters
/// ----------
/// block : TensorBlock
///     The block to split.
/// axis : {"samples", "properties"}
///     The axis.
/// selections : sequence of Labels, arrays or lists of int
///     One selection per result.
///
/// Returns
/// -------
/// list of TensorBlock
///     One block per selection.
///
/// Raises
/// ------
/// ValidationError
///     If an argument has an invalid value.
/// BlockMapTypeError
///     If an argument has the wrong type.
/// BlockMapIndexError
///     If an index is out of range.
/// BlockMapNotImplementedError
///     For gradients of gradients.
/// BlockMapRuntimeError
///     If tensors require grad and metatensor-operations is not installed.
/// BlockMapMemoryError
///     If memory for the result cannot be allocated.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction]
pub fn split_block<'py>(
    py: Python<'py>,
    block: &Bound<'py, PyAny>,
    axis: &Bound<'py, PyAny>,
    selections: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let Ok(block) = block.cast::<PyTensorBlock>() else {
        return Err(wrong_type(
            py,
            format!(
                "`block` must be a blockmap TensorBlock, not {}",
                class_repr(block)
            ),
        ));
    };
    let arrays = block.get().arrays;
    let object = block;
    let block = block.get().block();
    let (axis_arg, selections_arg) = (axis, selections);
    let (axis, selections) = check_arguments(py, &block, axis, selections)?;
    if arrays == Arrays::Torch && needs_autograd(py, std::slice::from_ref(&*block))? {
        return operation(py, "split_block")?.call1((object, axis_arg, selections_arg));
    }
    let groups = positions(py, &block, axis, &selections)?;
    let blocks = py.detach(|| core_split(&block, axis, &groups))?;
    let list = PyList::empty(py);
    for block in blocks {
        list.append(PyTensorBlock::new_view(block, Origin::Standalone).with_arrays(arrays))?;
    }
    Ok(list.into_any())
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(split, module)?)?;
    module.add_function(wrap_pyfunction!(split_block, module)?)
}
