//! `Labels`' construction: from names and values, `single`, `empty`,
//! `range`, copies, and `to` (the array type).

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::convert::{extract_label_values, extract_names, to_arguments, SaturatingInt};
use super::errors::{from_callee, invalid};
use super::torch::{arrays_arg, is_tensor, Arrays};
use super::PyLabels;
use crate::labels::Labels;

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyLabels {
    // `assume_unique` is any object, taken for its truth value (as Python
    // code does)
    #[new]
    #[pyo3(
        signature = (names, values, assume_unique = None),
        text_signature = "(names, values, assume_unique=False)"
    )]
    fn new(
        names: &Bound<'_, PyAny>,
        values: &Bound<'_, PyAny>,
        assume_unique: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let py = names.py();
        let names = extract_names(names)?;
        // a tensor's values are copied, as any other integers (metatensor-torch
        // Labels give torch tensors back, so do these)
        let arrays = if is_tensor(values)? {
            Arrays::Torch
        } else {
            Arrays::Numpy
        };
        let detached;
        let values = if arrays == Arrays::Torch {
            detached = values
                .call_method0("detach")?
                .call_method0("numpy")
                .map_err(|error| from_callee(py, error))?;
            &detached
        } else {
            values
        };
        let values = extract_label_values(values, names.len())?;
        let assume_unique = assume_unique
            .map_or(Ok(false), PyAnyMethods::is_truthy)
            .map_err(|error| from_callee(py, error))?;
        Ok(PyLabels::with_arrays(
            Labels::from_array(names, values, assume_unique)?,
            arrays,
        ))
    }

    /// One entry with one dimension ``_`` of value 0, for when there is no
    /// relevant metadata (e.g. the keys of a map of one block).
    ///
    /// Returns
    /// -------
    /// Labels
    ///     One entry, dimension ``_``, value 0.
    #[staticmethod]
    fn single() -> Self {
        Labels::single().into()
    }

    /// Labels without entries, with these dimension names (a string or a
    /// sequence of strings).
    ///
    /// Parameters
    /// ----------
    /// names : str or sequence of str
    ///     The dimension names.
    ///
    /// Returns
    /// -------
    /// Labels
    ///     No entry, with these names.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If an argument has an invalid value.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    #[staticmethod]
    fn empty(names: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(Labels::empty(extract_names(names)?)?.into())
    }

    /// One dimension ``name`` with the entries ``0 .. end - 1`` (none when
    /// ``end <= 0``).
    ///
    /// Parameters
    /// ----------
    /// name : str
    ///     The dimension name.
    /// end : int
    ///     The number of entries.
    ///
    /// Returns
    /// -------
    /// Labels
    ///     The entries ``0 .. end - 1``.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If ``name`` is not a valid name or ``end`` is beyond int32.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    #[staticmethod]
    #[allow(clippy::needless_pass_by_value)] // a Python argument
    fn range(py: Python<'_>, name: &str, end: SaturatingInt) -> PyResult<Self> {
        let end = i32::try_from(end.0.max(0)).map_err(|_| {
            invalid(
                py,
                format!(
                    "range end {end} is too large: label values are int32 (at most {})",
                    i32::MAX
                ),
            )
        })?;
        Ok(Labels::range(name, end)?.into())
    }

    /// These Labels giving their values as ``arrays`` (``"numpy"`` or
    /// ``"torch"``) on the CPU (``"cpu"`` or ``torch.device("cpu")``).
    /// Arguments as metatensor's ``Labels.to`` (a positional string or
    /// ``torch.device`` is a device, a numeric numpy or torch dtype a
    /// dtype); a ``dtype``, another device or array backend is refused with
    /// a ``ValueError``.
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
    /// Labels
    ///     Labels with the values in that array type.
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
    #[pyo3(
        signature = (*args, dtype = None, device = None, arrays = None, non_blocking = None),
        text_signature = "($self, *args, dtype=None, device=None, arrays=None, non_blocking=False)"
    )]
    fn to<'py>(
        slf: &Bound<'py, Self>,
        args: &Bound<'py, PyTuple>,
        dtype: Option<Bound<'py, PyAny>>,
        device: Option<Bound<'py, PyAny>>,
        arrays: Option<Bound<'py, PyAny>>,
        non_blocking: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, Self>> {
        let py = slf.py();
        let _ = non_blocking;
        let (dtype, device) = to_arguments("`Labels.to`", args, dtype, device)?;
        if dtype.is_some() {
            return Err(invalid(
                py,
                "Labels values must be int32, `dtype` can not be changed",
            ));
        }
        let mut backend = slf.get().arrays;
        if let Some(arrays) = arrays.filter(|a| !a.is_none()) {
            let name = arrays.str()?;
            backend = arrays_arg(py, Some(name.to_str()?), backend)?;
        }
        if let Some(device) = device {
            let name = device.str()?;
            if name.to_str()? != "cpu" {
                return Err(invalid(
                    py,
                    format!("can not move numpy array to non-cpu device: {name}"),
                ));
            }
        }
        if backend == slf.get().arrays {
            return Ok(slf.clone());
        }
        Bound::new(py, PyLabels::with_arrays(slf.get().labels.clone(), backend))
    }

    /// Labels are immutable: copies share their values.
    fn __copy__(&self) -> Self {
        self.clone()
    }

    #[pyo3(signature = (memo, /))]
    fn __deepcopy__(&self, memo: &Bound<'_, PyAny>) -> Self {
        let _ = memo;
        self.clone()
    }
}
