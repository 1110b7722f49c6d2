//! The methods of `blockmap.Labels` and `blockmap.LabelsEntry`.

use pyo3::prelude::*;
use pyo3::types::{PyList, PySlice, PyString};
use pyo3::types::{PyMemoryView, PyTuple};

use super::array::{int32_row, to_numpy_read_only};
use super::classes::{PyLabels, PyLabelsEntry};
use super::convert::{
    check_index, extract_entry, extract_label_values, extract_names, saturating_index,
};
use super::errors::{invalid, type_name, wrong_type};
use super::file::{FileArg, MmapArg};
use crate::data::{DataRef, Kind};
use crate::labels::{Labels, Names};

#[pymethods]
impl PyLabels {
    #[new]
    #[pyo3(signature = (names, values, assume_unique = false))]
    fn new(
        names: &Bound<'_, PyAny>,
        values: &Bound<'_, PyAny>,
        assume_unique: bool,
    ) -> PyResult<Self> {
        let names = extract_names(names)?;
        let values = extract_label_values(values, names.len())?;
        Ok(Labels::from_array(names, values, assume_unique)?.into())
    }

    /// One entry with one dimension ``_`` of value 0.
    #[staticmethod]
    fn single() -> Self {
        Labels::single().into()
    }

    /// Labels without entries, with these dimension names.
    #[staticmethod]
    fn empty(names: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(Labels::empty(extract_names(names)?)?.into())
    }

    /// One dimension ``name`` with entries ``0 .. end-1``.
    #[staticmethod]
    fn range(py: Python<'_>, name: &str, end: i64) -> PyResult<Self> {
        let end = i32::try_from(end).map_err(|_| invalid(py, "range end must fit in int32"))?;
        Ok(Labels::range(name, end)?.into())
    }

    /// Names of the dimensions.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.labels.names().to_vec()
    }

    /// The ``(count, len(names))`` int32 values, as a read-only view.
    #[getter]
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_numpy_read_only(py, self.labels.values())
    }

    /// The values of one dimension, as a read-only view.
    fn column<'py>(&self, py: Python<'py>, dimension: &str) -> PyResult<Bound<'py, PyAny>> {
        let d = self.labels.dimension(dimension).ok_or_else(|| {
            invalid(
                py,
                format!(
                    "labels {} have no dimension '{dimension}'",
                    Names(self.labels.names())
                ),
            )
        })?;
        let values = self.values(py)?;
        values.get_item((PySlice::full(py), d))
    }

    /// Position of ``entry`` (a :class:`LabelsEntry` or a sequence of
    /// integers), or ``None`` when it is not present.
    fn position(&self, entry: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
        let Some(values) = extract_entry(entry)? else {
            return Ok(None);
        };
        Ok(self.labels.position(&values)?)
    }

    fn __contains__(&self, entry: &Bound<'_, PyAny>) -> bool {
        match extract_entry(entry) {
            Ok(Some(values)) => matches!(self.labels.position(&values), Ok(Some(_))),
            _ => false,
        }
    }

    fn __len__(&self) -> usize {
        self.labels.count()
    }

    /// Pickle support: out-of-band buffers over this object's memory with
    /// protocol 5, the ``.mts`` archive in a bytes object before (see
    /// ``docs/pickle.md``).
    fn __reduce_ex__<'py>(&self, py: Python<'py>, protocol: i64) -> PyResult<Bound<'py, PyTuple>> {
        super::pickle::reduce(py, DataRef::Labels(&self.labels), protocol)
    }

    /// Save to a path or binary file object (see ``blockmap.save``).
    fn save(&self, py: Python<'_>, file: FileArg<'_>) -> PyResult<()> {
        super::io::save(py, file, DataRef::Labels(&self.labels))
    }

    /// Load Labels from a path or binary file object (see ``blockmap.load_labels``).
    #[staticmethod]
    fn load(py: Python<'_>, file: FileArg<'_>) -> PyResult<Py<PyAny>> {
        super::io::load(py, file, Kind::Labels, MmapArg(None))
    }

    /// The ``.mts`` data, in a memoryview (see ``blockmap.save_buffer``).
    fn save_buffer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyMemoryView>> {
        super::io::save_buffer(py, DataRef::Labels(&self.labels))
    }

    /// Load from a bytes-like object (see ``blockmap.load_labels_buffer``).
    #[staticmethod]
    fn load_buffer(py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        super::io::load_buffer(py, buffer, Kind::Labels)
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

    /// ``labels[i]`` is entry ``i`` (a :class:`LabelsEntry`);
    /// ``labels["name"]`` is the column of that dimension.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        index: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(name) = index.cast::<PyString>() {
            return self.column(py, name.to_str()?);
        }
        let index = saturating_index(index).ok_or_else(|| {
            wrong_type(
                py,
                format!("labels are indexed by int or str, not {}", type_name(index)),
            )
        })?;
        let i = check_index(index, self.labels.count())?;
        Ok(Bound::new(py, PyLabelsEntry::new(self.labels.clone(), i))?.into_any())
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let entries = (0..self.labels.count())
            .map(|i| PyLabelsEntry::new(self.labels.clone(), i))
            .collect::<Vec<_>>();
        Ok(PyList::new(py, entries)?.try_iter()?.into_any())
    }

    fn __repr__(&self) -> String {
        let count = self.labels.count();
        let rows: Vec<String> = if count <= 4 {
            (0..count).map(|i| row_string(self.labels.row(i))).collect()
        } else {
            let mut rows: Vec<String> = (0..3).map(|i| row_string(self.labels.row(i))).collect();
            rows.push("...".into());
            rows.push(row_string(self.labels.row(count - 1)));
            rows
        };
        format!(
            "Labels({}, {count} {}: {})",
            Names(self.labels.names()),
            if count == 1 { "entry" } else { "entries" },
            rows.join(", ")
        )
    }
}

fn row_string(row: &[i32]) -> String {
    let values: Vec<String> = row.iter().map(i32::to_string).collect();
    format!("({})", values.join(", "))
}

#[pymethods]
impl PyLabelsEntry {
    /// Names of the dimensions.
    #[getter(names)]
    fn py_names(&self) -> Vec<String> {
        self.names().to_vec()
    }

    /// The values, as a read-only int32 view of the Labels' memory.
    #[getter(values)]
    fn py_values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let size = self.labels.size();
        int32_row(py, self.labels.values(), self.index * size, size)
    }

    fn __len__(&self) -> usize {
        self.labels.size()
    }

    /// ``entry[i]`` or ``entry["name"]``: one value.
    fn __getitem__(&self, py: Python<'_>, dimension: &Bound<'_, PyAny>) -> PyResult<i32> {
        if let Ok(name) = dimension.cast::<PyString>() {
            let name = name.to_str()?;
            let d = self.labels.dimension(name).ok_or_else(|| {
                invalid(
                    py,
                    format!("no dimension '{name}' in {}", Names(self.names())),
                )
            })?;
            return Ok(self.values()[d]);
        }
        let index = saturating_index(dimension).ok_or_else(|| {
            wrong_type(
                py,
                format!(
                    "an entry is indexed by int or str, not {}",
                    type_name(dimension)
                ),
            )
        })?;
        Ok(self.values()[check_index(index, self.labels.size())?])
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyList::new(py, self.values())?.try_iter()?.into_any())
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.cast::<PyLabelsEntry>() {
            Ok(other) => {
                let other = other.get();
                self.names() == other.names() && self.values() == other.values()
            }
            Err(_) => false,
        }
    }

    fn __ne__(&self, other: &Bound<'_, PyAny>) -> bool {
        !self.__eq__(other)
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.names().hash(&mut hasher);
        self.values().hash(&mut hasher);
        hasher.finish()
    }

    fn __repr__(&self) -> String {
        let pairs: Vec<String> = self
            .names()
            .iter()
            .zip(self.values())
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        format!("LabelsEntry({})", pairs.join(", "))
    }
}
