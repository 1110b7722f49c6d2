//! `TensorBlock`'s construction: from values and labels, copies, and `to`
//! (dtype and array type).

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::errors::{type_name, wrong_type};
use super::labels::{extract_labels, PyLabels};
use super::ops::{block_to, to_dtype};
use super::torch::{arrays_arg, deep_copies, values_from_python, Arrays};
use super::{Origin, PyTensorBlock};
use crate::block::TensorBlock;

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyTensorBlock {
    #[new]
    fn new(
        values: &Bound<'_, PyAny>,
        samples: &Bound<'_, PyAny>,
        components: &Bound<'_, PyAny>,
        properties: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let py = values.py();
        let samples = extract_labels(samples, "samples")?;
        let properties = extract_labels(properties, "properties")?;
        if components.is_instance_of::<PyLabels>() {
            return Err(wrong_type(
                py,
                "components must be a list of Labels, got a single Labels",
            ));
        }
        let components = components
            .try_iter()
            .map_err(|_| {
                wrong_type(
                    py,
                    format!(
                        "components must be a list of Labels, got {}",
                        type_name(components)
                    ),
                )
            })?
            .enumerate()
            .map(|(i, c)| extract_labels(&c?, &format!("component {i}")))
            .collect::<PyResult<Vec<_>>>()?;
        let (values, arrays) = values_from_python(values, "values")?;
        let block = TensorBlock::new(values, samples, components, properties)?;
        Ok(PyTensorBlock::new_view(block, Origin::Standalone).with_arrays(arrays))
    }

    /// The block with every array of ``dtype``, given as ``arrays`` (see
    /// :meth:`TensorMap.to`).
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
    /// TensorBlock
    ///     The converted block.
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
        let dtype = to_dtype("`TensorBlock.to`", args, dtype, device, arrays)?;
        let arrays = arrays_arg(args.py(), arrays, self.arrays)?;
        let block = block_to(&self.block(), dtype, arrays == Arrays::Torch)?;
        Ok(PyTensorBlock::new_view(block, Origin::Standalone).with_arrays(arrays))
    }

    /// A copy of the block, which may get gradients: with ``deep`` (the
    /// default) values and gradients are in new memory; otherwise they are
    /// shared with this block.
    ///
    /// Parameters
    /// ----------
    /// deep : bool, optional
    ///     Copy the arrays (the default) or share them.
    ///
    /// Returns
    /// -------
    /// TensorBlock
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
        if !deep {
            return Ok(self.__copy__());
        }
        let block = self.block();
        let copy = match self.arrays {
            Arrays::Torch => deep_copies(py, std::slice::from_ref(&*block))?.remove(0),
            Arrays::Numpy => super::gil::detached(py, || block.deep_copy())?,
        };
        Ok(PyTensorBlock::new_view(copy, Origin::Standalone).with_arrays(self.arrays))
    }

    /// ``copy.deepcopy(block)``: the same as :meth:`copy`.
    #[pyo3(signature = (memo, /))]
    fn __deepcopy__(&self, py: Python<'_>, memo: &Bound<'_, PyAny>) -> PyResult<Self> {
        let _ = memo;
        self.copy(py, true)
    }

    /// ``copy.copy(block)``: a new block object sharing this one's memory.
    fn __copy__(&self) -> Self {
        PyTensorBlock::new_view(TensorBlock::clone(&self.block()), Origin::Standalone)
            .with_arrays(self.arrays)
    }
}
