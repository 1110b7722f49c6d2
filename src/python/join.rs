//! `blockmap.join` and `blockmap.join_blocks`: the arguments read and
//! checked as metatensor-operations checks them (same order, same
//! exception types), then the core's join with the GIL released.

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use super::classes::{Arrays, Origin, PyTensorBlock, PyTensorMap};
use super::errors::{class_repr, invalid, wrong_type, Class};
use super::shm::{auto_share_threshold, in_dataloader_worker};
use super::torch::requires_grad;
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
/// Maps of another dtype than the first are converted to it first, as
/// numpy's assignment would.
///
/// ``shared=True`` writes the joined arrays straight into one new
/// shared-memory segment (along samples; along properties the result is
/// shared afterwards), so that sending the result to another process sends
/// only its metadata; ``shared=None`` (the default) does so in a torch
/// `DataLoader` worker when the inputs hold at least the auto-share
/// threshold, as torch's ``default_collate`` allocates its output in
/// shared memory there.
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
    for (map, snapshot) in maps.iter().zip(&snapshots) {
        if map.get().arrays == Arrays::Torch {
            refuse_autograd(py, snapshot.blocks())?;
        }
    }
    let refs: Vec<&crate::tensor::TensorMap> = snapshots.iter().map(AsRef::as_ref).collect();
    let shared = match shared {
        Some(shared) => shared,
        None => match auto_share_threshold() {
            Some(threshold) => {
                let nbytes: usize = refs.iter().map(|map| map.nbytes()).sum();
                nbytes as u64 >= threshold && in_dataloader_worker(py)?
            }
            None => false,
        },
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

/// Join copies arrays in Rust, where autograd cannot follow: tensors that
/// require grad are refused rather than silently detached.
fn refuse_autograd(py: Python<'_>, blocks: &[crate::block::TensorBlock]) -> PyResult<()> {
    let rule = "blockmap.join copies the arrays without autograd, and some of these tensors \
                require grad: join them with blockmap.operations.join (torch.cat), or \
                detach them first";
    if !requires_grad(py, blocks, rule)?.is_empty() {
        return Err(Class::BlockMapRuntimeError.err(py, rule));
    }
    Ok(())
}

/// The maps' data, every map in the dtype of the first (converted with
/// `to(dtype=...)` where it differs).
fn same_dtype(
    py: Python<'_>,
    maps: &[Bound<'_, PyTensorMap>],
) -> PyResult<Vec<crate::arc::Arc<crate::tensor::TensorMap>>> {
    let first = maps[0].get().map();
    let dtype = first.blocks().first().map(crate::block::TensorBlock::dtype);
    let mut snapshots = vec![first];
    for map in &maps[1..] {
        let data = map.get().map();
        match (
            dtype,
            data.blocks().first().map(crate::block::TensorBlock::dtype),
        ) {
            (Some(want), Some(have)) if want != have => {
                let kwargs = pyo3::types::PyDict::new(py);
                kwargs.set_item("dtype", want.native_descr())?;
                let converted = map.call_method("to", (), Some(&kwargs))?;
                snapshots.push(converted.cast::<PyTensorMap>()?.get().map());
            }
            _ => snapshots.push(data),
        }
    }
    Ok(snapshots)
}

/// Join ``blocks`` along ``axis``, as metatensor-operations'
/// ``join_blocks``.
#[pyfunction]
#[pyo3(signature = (blocks, axis, add_dimension = None))]
pub fn join_blocks(
    py: Python<'_>,
    blocks: &Bound<'_, PyAny>,
    axis: &Bound<'_, PyAny>,
    add_dimension: Option<&str>,
) -> PyResult<PyTensorBlock> {
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
    for (item, snapshot) in items.iter().zip(&snapshots) {
        if item.cast::<PyTensorBlock>()?.get().arrays == Arrays::Torch {
            refuse_autograd(py, std::slice::from_ref(&**snapshot))?;
        }
    }
    let refs: Vec<&crate::block::TensorBlock> = snapshots.iter().map(AsRef::as_ref).collect();
    let joined = py.detach(|| core_join::join_blocks(&refs, axis, add_dimension))?;
    Ok(PyTensorBlock::new_view(joined, Origin::Standalone).with_arrays(arrays))
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(join, module)?)?;
    module.add_function(wrap_pyfunction!(join_blocks, module)?)
}
