//! `blockmap.join` and `blockmap.join_blocks`: the arguments read and
//! checked as metatensor-operations checks them (same order, same
//! exception types), then the core's join with the GIL released.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use super::block::{Origin, PyTensorBlock};
use super::errors::{class_repr, invalid, wrong_type, Class};
use super::ops::block_to;
use super::shm::{auto_shares, in_dataloader_worker};
use super::tensor::PyTensorMap;
use super::torch::{grad_positions, Arrays};
use crate::dtype::DType;
use crate::ops::join::{self as core_join, Axis, DifferentKeys};

fn axis(py: Python<'_>, axis: &Bound<'_, PyAny>, trailing: &str) -> PyResult<Axis> {
    match axis.extract::<String>().ok().as_deref() {
        Some("samples") => Ok(Axis::Samples),
        Some("properties") => Ok(Axis::Properties),
        _ => Err(invalid(
            py,
            format!(
                "Only `'properties'` or `'samples'` are valid values for the `axis` \
                 parameter{trailing}"
            ),
        )),
    }
}

/// The items of a list or tuple argument, as metatensor-operations
/// requires (`TypeError` otherwise).
fn sequence<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if !(value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>()) {
        return Err(wrong_type(
            py,
            format!(
                "`{what}` must be a list or a tuple, not {}",
                class_repr(value)
            ),
        ));
    }
    value.try_iter()?.collect()
}

/// Join ``tensors`` along ``axis`` (``"samples"`` or ``"properties"``),
/// with the semantics of metatensor-operations' ``join``: the same keys
/// (``different_keys="error"``), only the common ones
/// (``"intersection"``) or all of them, missing blocks counting as empty
/// (``"union"``); ``add_dimension`` names an extra last dimension of the
/// joined labels holding the index of the map each entry came from.
///
/// Each array is copied once, straight into its place in the result.
/// When some input tensor requires grad, the maps are joined by
/// metatensor-operations' ``join`` on blockmap's classes instead (tensor
/// operations that autograd follows, as for metatensor-core's maps).
/// Maps of another dtype than the first are converted to it first, as
/// metatensor-operations assigns them into arrays of the first's dtype,
/// when that cast keeps every value (int32 into float64, float32 into
/// float64); a cast that could change values (float64 into int32 or
/// float32, int64 into float64) is refused with a ``ValidationError``.
///
/// ``shared=True`` writes the joined arrays straight into one new
/// shared-memory segment (along samples; along properties the result is
/// shared afterwards), so that sending the result to another process sends
/// only its metadata; ``shared=None`` (the default) does so in a torch
/// `DataLoader` worker when the inputs hold at least the auto-share
/// threshold, as torch's ``default_collate`` allocates its output in
/// shared memory there.
///
/// Parameters
/// ----------
/// tensors : sequence of TensorMap
///     The maps to join.
/// axis : {"samples", "properties"}
///     The axis.
/// different_keys : {"error", "intersection", "union"}, optional
///     What to do with keys not in every map.
/// add_dimension : str, optional
///     The name of a dimension holding the index of each entry's map.
/// shared : bool or None, optional
///     Write the result into shared memory (None: in a DataLoader worker,
///     above the auto-share threshold).
///
/// Returns
/// -------
/// TensorMap
///     The joined map.
///
/// Raises
/// ------
/// ValidationError
///     If the arguments or the maps' metadata are invalid.
/// NotEqualError
///     If the maps' keys or names differ where they must match.
/// BlockMapNotImplementedError
///     For gradients of gradients.
/// BlockMapRuntimeError
///     If tensors require grad and metatensor-operations is not installed.
/// BlockMapTypeError
///     If an argument has the wrong type.
/// BlockMapMemoryError
///     If memory for the result cannot be allocated.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction]
#[pyo3(signature = (tensors, axis, different_keys = "error", add_dimension = None, *, shared = None))]
pub fn join<'py>(
    py: Python<'py>,
    tensors: &Bound<'py, PyAny>,
    axis: &Bound<'py, PyAny>,
    different_keys: &str,
    add_dimension: Option<&str>,
    shared: Option<bool>,
) -> PyResult<Bound<'py, PyAny>> {
    let items = sequence(py, tensors, "tensors")?;
    let mut maps = Vec::with_capacity(items.len());
    for item in &items {
        let map = item.cast::<PyTensorMap>().map_err(|_| {
            wrong_type(
                py,
                format!(
                    "`tensors` elements must be blockmap TensorMap, not {}",
                    class_repr(item)
                ),
            )
        })?;
        maps.push(map.clone());
    }
    if maps.is_empty() {
        return Err(invalid(py, "provide at least one `TensorMap` for joining"));
    }
    let axis = self::axis(py, axis, ".")?;
    if maps.len() == 1 {
        return Ok(items[0].clone());
    }
    let different_keys_name = different_keys;
    let different_keys = match different_keys {
        "error" => DifferentKeys::Error,
        "intersection" => DifferentKeys::Intersection,
        "union" => DifferentKeys::Union,
        other => {
            return Err(invalid(
                py,
                format!(
                    "'{other}' is not a valid option for `different_keys`. Choose either \
                     'error', 'intersection' or 'union'."
                ),
            ))
        }
    };
    let snapshots = same_dtype(py, &maps)?;
    let arrays = maps[0].get().arrays;
    let mut autograd = false;
    for (map, snapshot) in maps.iter().zip(&snapshots) {
        autograd = autograd
            || (map.get().arrays == Arrays::Torch && needs_autograd(py, snapshot.blocks())?);
    }
    if autograd {
        if shared == Some(true) {
            return Err(invalid(py, SHARED_AUTOGRAD));
        }
        let list = PyList::empty(py);
        for snapshot in &snapshots {
            let map = crate::tensor::TensorMap::clone(snapshot);
            list.append(Bound::new(
                py,
                PyTensorMap::with_arrays(map, Arrays::Torch),
            )?)?;
        }
        let kwargs = PyDict::new(py);
        kwargs.set_item("axis", axis_name(axis))?;
        kwargs.set_item("different_keys", different_keys_name)?;
        kwargs.set_item("add_dimension", add_dimension)?;
        return operation(py, "join")?.call((list,), Some(&kwargs));
    }
    let refs: Vec<&crate::tensor::TensorMap> = snapshots.iter().map(AsRef::as_ref).collect();
    let shared = if let Some(shared) = shared {
        shared
    } else {
        let nbytes: usize = refs.iter().map(|map| map.nbytes()).sum();
        auto_shares(nbytes) && in_dataloader_worker(py)?
    };
    let joined = py.detach(|| {
        if shared {
            let joined = core_join::join_in_segment(&refs, axis, different_keys, add_dimension)?;
            // along properties, or anything that did not fit: shared now
            match crate::shm::share(crate::data::DataRef::Tensor(&joined))? {
                Some(crate::data::Data::Tensor(moved)) => Ok(moved),
                _ => Ok(joined),
            }
        } else {
            core_join::join(&refs, axis, different_keys, add_dimension)
        }
    })?;
    Ok(Bound::new(py, PyTensorMap::with_arrays(joined, arrays))?.into_any())
}

/// Whether some tensor of `blocks` requires grad: the join then goes
/// through metatensor-operations' (see [`operation`]), since the core's
/// copies are outside autograd.
pub(super) fn needs_autograd(
    py: Python<'_>,
    blocks: &[crate::block::TensorBlock],
) -> PyResult<bool> {
    Ok(!grad_positions(py, blocks)?.is_empty())
}

const SHARED_AUTOGRAD: &str = "can not join tensors that require grad into shared memory \
    (`shared=True`): autograd does not cross processes; detach them first";

fn axis_name(axis: Axis) -> &'static str {
    match axis {
        Axis::Samples => "samples",
        Axis::Properties => "properties",
    }
}

/// metatensor-operations' `name` running on blockmap's classes
/// (`blockmap.operations`), where torch tensors that require grad are
/// joined by tensor operations autograd follows, as metatensor-operations
/// joins metatensor-core's maps.
pub(super) fn operation<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let installed = py
        .import("blockmap")?
        .getattr("HAS_METATENSOR_OPERATIONS")?
        .is_truthy()?;
    if !installed {
        return Err(Class::BlockMapRuntimeError.err(
            py,
            format!(
                "blockmap.{name} of tensors that require grad goes through \
                 metatensor-operations' {name} (tensor operations autograd follows), which \
                 is not installed: `pip install metatensor-operations`, or detach the tensors"
            ),
        ));
    }
    py.import("blockmap.operations")?.getattr(name)
}

/// The maps' data, every map in the dtype of the first (converted as
/// `to(dtype=...)` converts where it differs: by the core, or by torch for
/// torch-backed maps), as metatensor-operations' join
/// assigns every input into an array of the first's dtype; but where that
/// cast would change values (float64 into int32 or float32, int64 into
/// float64, ...) the maps are refused instead.
fn same_dtype(
    py: Python<'_>,
    maps: &[Bound<'_, PyTensorMap>],
) -> PyResult<Vec<crate::arc::ForkArc<crate::tensor::TensorMap>>> {
    let first = maps[0].get().map();
    let dtype = first.blocks().first().map(crate::block::TensorBlock::dtype);
    let mut snapshots = vec![first];
    for (i, map) in maps.iter().enumerate().skip(1) {
        let data = map.get().map();
        match (
            dtype,
            data.blocks().first().map(crate::block::TensorBlock::dtype),
        ) {
            (Some(want), Some(have)) if want != have => {
                check_lossless(py, have, want, &format!("tensor {i}"), "tensor 0")?;
                let torch = map.get().arrays == Arrays::Torch;
                let blocks = data
                    .blocks()
                    .iter()
                    .map(|block| block_to(block, Some(want), torch))
                    .collect::<PyResult<Vec<_>>>()?;
                let mut converted = crate::tensor::TensorMap::new(data.keys().clone(), blocks)?;
                converted.replace_info(crate::limits::try_clone_info(data.info())?)?;
                snapshots.push(crate::arc::ForkArc::new(converted));
            }
            _ => snapshots.push(data),
        }
    }
    Ok(snapshots)
}

/// Refuse to cast the values of `what` (of `have`) into the dtype of
/// `first` (`want`) when the cast would change some of them.
fn check_lossless(
    py: Python<'_>,
    have: DType,
    want: DType,
    what: &str,
    first: &str,
) -> PyResult<()> {
    if have.casts_losslessly_to(want) {
        return Ok(());
    }
    Err(invalid(
        py,
        format!(
            "can not join {what} of dtype {have} with {first} of dtype {want}: the joined \
             values take the dtype of the first input, and {have} values do not all fit in \
             {want}; convert the inputs first (`.to(dtype=...)`)"
        ),
    ))
}

/// Join ``blocks`` along ``axis``, as metatensor-operations'
/// ``join_blocks``.
///
/// Parameters
/// ----------
/// blocks : sequence of TensorBlock
///     The blocks to join.
/// axis : {"samples", "properties"}
///     The axis.
/// add_dimension : str, optional
///     The name of a dimension holding the index of each entry's block.
///
/// Returns
/// -------
/// TensorBlock
///     The joined block.
///
/// Raises
/// ------
/// ValidationError
///     If the arguments or the blocks' metadata are invalid.
/// NotEqualError
///     If the blocks' names differ where they must match.
/// BlockMapNotImplementedError
///     For gradients of gradients.
/// BlockMapRuntimeError
///     If tensors require grad and metatensor-operations is not installed.
/// BlockMapTypeError
///     If an argument has the wrong type.
/// BlockMapMemoryError
///     If memory for the result cannot be allocated.
// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pyfunction]
#[pyo3(signature = (blocks, axis, add_dimension = None))]
pub fn join_blocks<'py>(
    py: Python<'py>,
    blocks: &Bound<'py, PyAny>,
    axis: &Bound<'py, PyAny>,
    add_dimension: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let items = sequence(py, blocks, "blocks")?;
    let mut snapshots = Vec::with_capacity(items.len());
    for item in &items {
        let block = item.cast::<PyTensorBlock>().map_err(|_| {
            wrong_type(
                py,
                format!(
                    "`blocks` elements must be blockmap TensorBlock, not {}",
                    class_repr(item)
                ),
            )
        })?;
        snapshots.push(block.get().block());
    }
    if snapshots.is_empty() {
        return Err(invalid(
            py,
            "provide at least one `TensorBlock` for joining",
        ));
    }
    let axis = self::axis(py, axis, "")?;
    let arrays = items[0].cast::<PyTensorBlock>()?.get().arrays;
    let want = snapshots[0].dtype();
    for (i, snapshot) in snapshots.iter_mut().enumerate().skip(1) {
        let have = snapshot.dtype();
        if have != want {
            check_lossless(py, have, want, &format!("block {i}"), "block 0")?;
            let converted = block_to(snapshot, Some(want), arrays == Arrays::Torch)?;
            *snapshot = crate::arc::ForkArc::new(converted);
        }
    }
    let mut autograd = false;
    for (item, snapshot) in items.iter().zip(&snapshots) {
        autograd = autograd
            || (item.cast::<PyTensorBlock>()?.get().arrays == Arrays::Torch
                && needs_autograd(py, std::slice::from_ref(&**snapshot))?);
    }
    if autograd {
        let list = PyList::empty(py);
        for snapshot in &snapshots {
            let block = crate::block::TensorBlock::clone(snapshot);
            list.append(
                PyTensorBlock::new_view(block, Origin::Standalone).with_arrays(Arrays::Torch),
            )?;
        }
        let kwargs = PyDict::new(py);
        kwargs.set_item("axis", axis_name(axis))?;
        kwargs.set_item("add_dimension", add_dimension)?;
        return operation(py, "join_blocks")?.call((list,), Some(&kwargs));
    }
    let refs: Vec<&crate::block::TensorBlock> = snapshots.iter().map(AsRef::as_ref).collect();
    let joined = py.detach(|| core_join::join_blocks(&refs, axis, add_dimension))?;
    Ok(Bound::new(
        py,
        PyTensorBlock::new_view(joined, Origin::Standalone).with_arrays(arrays),
    )?
    .into_any())
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(join, module)?)?;
    module.add_function(wrap_pyfunction!(join_blocks, module)?)
}
