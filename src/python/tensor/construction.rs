//! `TensorMap`'s construction: from keys and blocks, copies, and `to`
//! (dtype and array type).

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::block::PyTensorBlock;
use super::errors::{invalid, type_name, wrong_type};
use super::labels::extract_labels;
use super::ops::{block_to, to_dtype};
use super::torch::{arrays_arg, deep_copies, Arrays};
use super::{with_info, PyTensorMap};
use crate::block::TensorBlock;
use crate::tensor::TensorMap;

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyTensorMap {
    #[new]
    fn new(keys: &Bound<'_, PyAny>, blocks: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = keys.py();
        let keys = extract_labels(keys, "keys")?;
        let iter = blocks.try_iter().map_err(|_| {
            wrong_type(
                py,
                format!(
                    "blocks must be a list of TensorBlock, got {}",
                    type_name(blocks)
                ),
            )
        })?;
        let mut rust_blocks = Vec::new();
        let mut arrays: Option<Arrays> = None;
        for (i, block) in iter.enumerate() {
            let block = block?;
            let block = block.cast::<PyTensorBlock>().map_err(|_| {
                wrong_type(
                    py,
                    format!(
                        "blocks[{i}] must be a TensorBlock, got {}",
                        type_name(&block)
                    ),
                )
            })?;
            let block = block.get();
            match arrays {
                Some(arrays) if arrays != block.arrays => {
                    return Err(invalid(
                        py,
                        format!(
                            "blocks[{i}] holds {} arrays, the blocks before it {}: convert \
                             them with `block.to(arrays=...)` first",
                            block.arrays.name(),
                            arrays.name()
                        ),
                    ))
                }
                _ => arrays = Some(block.arrays),
            }
            rust_blocks.push(TensorBlock::clone(&block.block()));
        }
        let mut map = TensorMap::new(keys, rust_blocks)?;
        // blocks made one by one hold equal labels as separate objects:
        // made one, the map holds and pickles each once
        map.share_equal_labels()?;
        Ok(PyTensorMap::with_arrays(map, arrays.unwrap_or_default()))
    }

    /// The map with every array of ``dtype`` (a numpy or torch dtype,
    /// converted as numpy's ``astype`` converts, by blockmap itself; torch
    /// tensors by ``tensor.to``; arrays already of that dtype are
    /// shared, not copied), on ``device`` (only ``"cpu"``), given as
    /// ``arrays``: ``"numpy"`` or ``"torch"`` (the same memory either way,
    /// nothing is copied). Positional arguments are a device (a str or a
    /// ``torch.device``) or a dtype, as in metatensor-core.
    ///
    /// Parameters
    /// ----------
    /// *args : str, torch.device or dtype
    ///     A device or a dtype, given positionally as in metatensor-core.
    /// dtype : numpy or torch dtype, optional
    ///     The dtype of every array (arrays already of it are shared).
    /// device : str or torch.device, optional
    ///     Only ``"cpu"``.
    /// arrays : {"numpy", "torch"}, optional
    ///     The array type of the result (numpy arrays by default); torch
    ///     tensors share the same memory.
    /// non_blocking : bool, optional
    ///     torch's argument, accepted (nothing is copied across devices).
    ///
    /// Returns
    /// -------
    /// TensorMap
    ///     The converted map.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If an argument has an invalid value.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    /// ModuleNotFoundError
    ///     If ``arrays="torch"`` and torch is not installed.
    #[pyo3(signature = (*args, dtype = None, device = None, arrays = None, non_blocking = false))]
    fn to<'py>(
        &self,
        args: &Bound<'py, PyTuple>,
        dtype: Option<Bound<'py, PyAny>>,
        device: Option<Bound<'py, PyAny>>,
        arrays: Option<&str>,
        non_blocking: bool,
    ) -> PyResult<Self> {
        let _ = non_blocking;
        let dtype = to_dtype("`TensorMap.to`", args, dtype, device, arrays)?;
        let arrays = arrays_arg(args.py(), arrays, self.arrays)?;
        let map = self.map();
        if dtype.is_none() {
            return Ok(PyTensorMap::with_arrays(TensorMap::clone(&map), arrays));
        }
        let blocks = map
            .blocks()
            .iter()
            .map(|block| block_to(block, dtype, arrays == Arrays::Torch))
            .collect::<PyResult<Vec<_>>>()?;
        let converted = TensorMap::new(map.keys().clone(), blocks)?;
        Ok(PyTensorMap::with_arrays(
            with_info(converted, &map)?,
            arrays,
        ))
    }

    /// A copy of the map: with ``deep`` (the default) all array memory is
    /// new; otherwise the copy's blocks share this map's arrays.
    ///
    /// Parameters
    /// ----------
    /// deep : bool, optional
    ///     Copy the arrays (the default) or share them.
    ///
    /// Returns
    /// -------
    /// TensorMap
    ///     The copy.
    ///
    /// Raises
    /// ------
    /// BlockMapIOError
    ///     If mapped data was lost (its file truncated by another program).
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    #[pyo3(signature = (deep = true))]
    fn copy(&self, py: Python<'_>, deep: bool) -> PyResult<Self> {
        let map = self.map();
        if !deep {
            return Ok(self.__copy__());
        }
        let copy = match self.arrays {
            Arrays::Torch => {
                let blocks = deep_copies(py, map.blocks())?;
                with_info(TensorMap::new(map.keys().clone(), blocks)?, &map)?
            }
            Arrays::Numpy => super::gil::detached(py, || map.deep_copy())?,
        };
        Ok(PyTensorMap::with_arrays(copy, self.arrays))
    }

    /// ``copy.deepcopy(tensor)``: the same as :meth:`copy`.
    #[pyo3(signature = (memo, /))]
    fn __deepcopy__(&self, py: Python<'_>, memo: &Bound<'_, PyAny>) -> PyResult<Self> {
        let _ = memo;
        self.copy(py, true)
    }

    /// ``copy.copy(tensor)``: a new map object sharing this one's memory.
    fn __copy__(&self) -> Self {
        PyTensorMap::with_arrays(TensorMap::clone(&self.map()), self.arrays)
    }
}
