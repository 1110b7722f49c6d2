//! The methods of `blockmap.LabelsEntry`: metatensor-core's `LabelsEntry`
//! API over one entry of the core's `Labels`.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyString};

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};

use super::array::int32_row;
use super::convert::{check_index, extract_label_values, extract_names, saturating_index};
use super::errors::{invalid, type_name, wrong_type, Class};
use super::torch::{label_tensor, Arrays};
use crate::labels::{Labels, Names};

/// One entry of a :class:`Labels`.
#[pyclass(name = "LabelsEntry", module = "blockmap", frozen, weakref)]
#[derive(Debug)]
pub struct PyLabelsEntry {
    pub labels: Labels,
    pub index: usize,
    pub arrays: Arrays,
}

impl PyLabelsEntry {
    /// Entry `index` of `labels`; `index < labels.count()`.
    pub fn new(labels: Labels, index: usize) -> Self {
        debug_assert!(index < labels.count());
        PyLabelsEntry {
            labels,
            index,
            arrays: Arrays::Numpy,
        }
    }

    /// The same entry, giving values as `arrays`.
    #[must_use]
    pub fn with_arrays(mut self, arrays: Arrays) -> Self {
        self.arrays = arrays;
        self
    }

    /// The entry's values.
    pub fn values(&self) -> &[i32] {
        self.labels.row(self.index)
    }

    /// The names of its dimensions.
    pub fn names(&self) -> &[String] {
        self.labels.names()
    }
}

/// An entry given as a `LabelsEntry` or a sequence of integers (anything
/// with `__index__`; other items are a type error), and whether all of
/// them fit in int32 (an entry that does not cannot be present; those
/// values are 0 in the vector).
pub fn extract_entry(entry: &Bound<'_, PyAny>) -> PyResult<(Vec<i32>, bool)> {
    if let Ok(entry) = entry.cast::<PyLabelsEntry>() {
        let entry = entry.get();
        return Ok((entry.values().to_vec(), true));
    }
    let py = entry.py();
    let not_a_sequence = || {
        wrong_type(
            py,
            format!(
                "a labels entry must be a LabelsEntry or a sequence of integers, got {}",
                type_name(entry)
            ),
        )
    };
    if entry.is_instance_of::<PyString>() {
        return Err(not_a_sequence());
    }
    let mut values = Vec::new();
    let mut fits = true;
    for value in entry.try_iter().map_err(|_| not_a_sequence())? {
        let value = value?;
        let index = saturating_index(&value).ok_or_else(|| {
            wrong_type(
                py,
                format!(
                    "the values of a labels entry must be integers, got {}",
                    type_name(&value)
                ),
            )
        })?;
        if let Ok(value) = i32::try_from(index.value) {
            values.push(value);
        } else {
            values.push(0);
            fits = false;
        }
    }
    Ok((values, fits))
}

static INT32: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

#[pymethods]
impl PyLabelsEntry {
    /// ``LabelsEntry(names, values)``: ``names`` a list of strings,
    /// ``values`` a 1-D int32 numpy array of one value per name. The values
    /// are copied (entries of Labels view the Labels' memory).
    #[new]
    fn py_new(names: &Bound<'_, PyAny>, values: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = names.py();
        // metatensor checks the types with `assert`
        let names_are_strings = names
            .cast::<PyList>()
            .is_ok_and(|list| list.iter().all(|name| name.is_instance_of::<PyString>()));
        if !names_are_strings {
            return Err(Class::BlockMapAssertionError
                .err(py, "LabelsEntry names must be a list of strings"));
        }
        let array = values.cast::<PyUntypedArray>().map_err(|_| {
            Class::BlockMapAssertionError.err(
                py,
                format!(
                    "LabelsEntry values must be a numpy array, got {}",
                    type_name(values)
                ),
            )
        })?;
        let dtype = array.dtype();
        if array.ndim() != 1 || dtype.kind() != b'i' || dtype.itemsize() != 4 {
            return Err(invalid(
                py,
                "LabelsEntry values must be a 1-dimensional array of 32-bit integers",
            ));
        }
        let names = extract_names(names)?;
        let row = array.call_method1("reshape", ((1, array.len()),))?;
        let values = extract_label_values(&row, names.len())?;
        let labels = Labels::from_array(names, values, true)?;
        Ok(PyLabelsEntry::new(labels, 0))
    }

    /// Names of the dimensions.
    #[getter(names)]
    fn py_names(&self) -> Vec<String> {
        self.names().to_vec()
    }

    /// The values, a read-only 1-D int32 array viewing the Labels' memory.
    #[getter(values)]
    fn py_values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let size = self.labels.size();
        let row = int32_row(py, self.labels.values(), self.index * size, size)?;
        match self.arrays {
            Arrays::Numpy => Ok(row),
            Arrays::Torch => label_tensor(py, &row),
        }
    }

    /// The device of the values: ``"cpu"``, or ``torch.device("cpu")``
    /// when they are torch tensors (as metatensor-core gives it).
    #[getter]
    fn device<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        super::torch::device_of(py, self.arrays)
    }

    /// This entry as a named tuple: ``(name_1=value_1, name_2=value_2)``.
    ///
    /// Returns
    /// -------
    /// str
    ///     The entry, in metatensor-core's layout.
    fn print(&self) -> String {
        let pairs: Vec<String> = self
            .names()
            .iter()
            .zip(self.values())
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        format!("({})", pairs.join(", "))
    }

    fn __repr__(&self) -> String {
        format!("LabelsEntry{}", self.print())
    }

    fn __len__(&self) -> usize {
        self.labels.size()
    }

    /// ``entry[i]`` or ``entry["name"]``: one value, a ``numpy.int32`` as in
    /// metatensor.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        dimension: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let d = if let Ok(name) = dimension.cast::<PyString>() {
            let name = name.to_str()?;
            self.labels.dimension(name).ok_or_else(|| {
                invalid(
                    py,
                    format!(
                        "'{name}' not found in the dimensions {} of these Labels",
                        Names(self.names())
                    ),
                )
            })?
        } else {
            let index = saturating_index(dimension).ok_or_else(|| {
                wrong_type(
                    py,
                    format!(
                        "can only index LabelsEntry with str or int, got {}",
                        type_name(dimension)
                    ),
                )
            })?;
            check_index(&index, self.labels.size())?
        };
        INT32
            .import(py, "numpy", "int32")?
            .call1((self.values()[d],))
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.py_values(py)?.try_iter()?.into_any())
    }

    /// Same names and same values; comparing with anything but a
    /// `LabelsEntry` is a ``TypeError``, as in metatensor.
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let other = other.cast::<PyLabelsEntry>().map_err(|_| {
            wrong_type(
                other.py(),
                format!(
                    "can only compare between LabelsEntry for equality, got {}",
                    type_name(other)
                ),
            )
        })?;
        let other = other.get();
        Ok(self.names() == other.names() && self.values() == other.values())
    }

    fn __ne__(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(!self.__eq__(other)?)
    }

    /// Entries are immutable, so they can be hashed (by value).
    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.names().hash(&mut hasher);
        self.values().hash(&mut hasher);
        hasher.finish()
    }
}
