//! `Labels`' general members: names, values and columns, entries (by index,
//! position, membership, iteration), equality and hashing, and their text
//! forms.

use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList, PySlice, PyString};

use super::array::to_numpy_read_only;
use super::convert::{check_index, saturating_index, SaturatingInt};
use super::entry::{extract_entry, PyLabelsEntry};
use super::errors::{invalid, out_of_range, type_name, wrong_type};
use super::torch::{label_tensor, Arrays};
use super::{bool_index, PyLabels};
use crate::labels::Names;

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyLabels {
    /// The array type of the values: ``"numpy"`` or ``"torch"``.
    #[getter]
    fn _arrays(&self) -> &'static str {
        self.arrays.name()
    }

    /// Names of the dimensions.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.labels.names().to_vec()
    }

    /// The values, a read-only ``(len(labels), len(names))`` int32 array
    /// viewing the memory of the Labels; for Labels of torch tensors, an
    /// int32 tensor holding a copy (the memory of Labels is never written).
    #[getter]
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let values = to_numpy_read_only(py, self.labels.values())?;
        match self.arrays {
            Arrays::Numpy => Ok(values),
            Arrays::Torch => label_tensor(py, &values),
        }
    }

    /// The device of the values: ``"cpu"``, or ``torch.device("cpu")``
    /// when they are torch tensors (as metatensor-core gives it).
    #[getter]
    fn device<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        super::torch::device_of(py, self.arrays)
    }

    /// The values of one dimension (a column of ``values``), as a
    /// read-only 1-D view.
    ///
    /// Parameters
    /// ----------
    /// dimension : str
    ///     A dimension name.
    ///
    /// Returns
    /// -------
    /// numpy.ndarray
    ///     The values of that dimension, read-only.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If there is no such dimension.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn column<'py>(&self, py: Python<'py>, dimension: &str) -> PyResult<Bound<'py, PyAny>> {
        let d = self.labels.dimension(dimension).ok_or_else(|| {
            invalid(
                py,
                format!(
                    "'{dimension}' not found in the dimensions {} of these Labels",
                    Names(self.labels.names())
                ),
            )
        })?;
        let values = self.values(py)?;
        values.get_item((PySlice::full(py), d))
    }

    /// Entry ``index`` (negative: from the end), a :class:`LabelsEntry`.
    ///
    /// Parameters
    /// ----------
    /// index : int
    ///     The position of the entry (negative counts from the end).
    ///
    /// Returns
    /// -------
    /// LabelsEntry
    ///     The entry.
    ///
    /// Raises
    /// ------
    /// BlockMapIndexError
    ///     If ``index`` is out of range or not an integer.
    /// ValidationError
    ///     If ``index`` is a bool or None.
    fn entry(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<PyLabelsEntry> {
        if index.is_instance_of::<PyBool>() || index.is_none() {
            return Err(bool_index(py));
        }
        let index = saturating_index(index).ok_or_else(|| {
            out_of_range(
                py,
                format!(
                    "only integers are valid entry indices, not {}",
                    type_name(index)
                ),
            )
        })?;
        let i = check_index(&index, self.labels.count())?;
        Ok(PyLabelsEntry::new(self.labels.clone(), i).with_arrays(self.arrays))
    }

    /// Position of ``entry`` (a :class:`LabelsEntry` or a sequence of
    /// integers), or ``None`` when it is not present.
    ///
    /// Parameters
    /// ----------
    /// entry : LabelsEntry or sequence of int
    ///     The values of an entry.
    ///
    /// Returns
    /// -------
    /// int or None
    ///     Its position, or None when absent.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If an argument has an invalid value.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    fn position(&self, entry: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
        let (values, fits) = extract_entry(entry)?;
        let position = self.labels.position(&values)?;
        // an integer outside the int32 range is in no entry
        Ok(position.filter(|_| fits))
    }

    fn __contains__(&self, entry: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.position(entry)?.is_some())
    }

    fn __len__(&self) -> usize {
        self.labels.count()
    }

    /// These Labels as text, in metatensor's layout: the names, then at
    /// most ``max_entries`` entries (all of them when it is negative), the
    /// lines after the first indented by ``indent`` spaces.
    ///
    /// Parameters
    /// ----------
    /// max_entries : int
    ///     The most entries shown (all when negative).
    /// indent : int, optional
    ///     Spaces before every line but the first.
    ///
    /// Returns
    /// -------
    /// str
    ///     The text.
    ///
    /// Raises
    /// ------
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    #[pyo3(
        signature = (max_entries, indent = SaturatingInt::new(0)),
        text_signature = "(self, /, max_entries, indent=0)"
    )]
    #[allow(clippy::needless_pass_by_value)] // a Python argument
    fn print(&self, max_entries: SaturatingInt, indent: SaturatingInt) -> PyResult<String> {
        let max_entries = usize::try_from(max_entries.0).ok();
        let indent = usize::try_from(indent.0.max(0)).unwrap_or(usize::MAX);
        Ok(self.labels.print(max_entries, indent)?)
    }

    fn __str__(&self) -> PyResult<String> {
        Ok(format!(
            "Labels\n   {}",
            self.print(SaturatingInt::new(4), SaturatingInt::new(3))?
        ))
    }

    fn __repr__(&self) -> PyResult<String> {
        Ok(format!(
            "Labels\n   {}",
            self.print(SaturatingInt::new(-1), SaturatingInt::new(3))?
        ))
    }

    /// ``labels[i]`` is entry ``i`` (a :class:`LabelsEntry`, see
    /// :meth:`entry`); ``labels["name"]`` is the values of that dimension
    /// (see :meth:`column`).
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        index: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(name) = index.cast::<PyString>() {
            return self.column(py, name.to_str()?);
        }
        if index.is_instance_of::<PyBool>() {
            return Err(bool_index(py));
        }
        let index = Some(index)
            .filter(|i| !i.is_instance_of::<PyUntypedArray>())
            .and_then(saturating_index)
            .ok_or_else(|| {
                wrong_type(
                    py,
                    format!(
                        "Labels can only be indexed by a single string or integer, got {}",
                        type_name(index)
                    ),
                )
            })?;
        let i = check_index(&index, self.labels.count())?;
        Ok(Bound::new(
            py,
            PyLabelsEntry::new(self.labels.clone(), i).with_arrays(self.arrays),
        )?
        .into_any())
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let entries = (0..self.labels.count())
            .map(|i| PyLabelsEntry::new(self.labels.clone(), i).with_arrays(self.arrays))
            .collect::<Vec<_>>();
        Ok(PyList::new(py, entries)?.try_iter()?.into_any())
    }

    /// Same names and same entries, in the same order; comparing with
    /// anything but Labels is a ``TypeError``, as in metatensor.
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let other = other.cast::<PyLabels>().map_err(|_| {
            wrong_type(
                other.py(),
                format!(
                    "can only compare between Labels for equality, got {}",
                    type_name(other)
                ),
            )
        })?;
        Ok(self.labels == other.get().labels)
    }

    fn __ne__(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(!self.__eq__(other)?)
    }

    /// Labels are immutable, so they can be hashed (by value).
    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.labels.hash(&mut hasher);
        hasher.finish()
    }
}
