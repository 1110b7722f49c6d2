//! `blockmap.Labels` and `blockmap.LabelsEntry`.

use numpy::PyReadonlyArray2;
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::types::{PyList, PySlice, PyString};

use super::array::{as_ndarray, int32_row, to_numpy_read_only};
use super::errors::{invalid, type_name, wrong_type};
use super::io::call_io;
use crate::array::Array;
use crate::dtype::DType;
use crate::labels::{Labels, Names};

/// Named int32 columns, one unique row per entry.
///
/// ``Labels(names, values, assume_unique=False)``: ``names`` is a string or a
/// list of strings (valid identifiers, unique); ``values`` a 2-D integer
/// array of shape ``(count, len(names))``. The values are copied once into
/// int32 memory owned by the Labels, which never changes afterwards:
/// ``.values`` is a read-only view of it. With ``assume_unique=True`` the
/// check that rows are unique is skipped.
#[pyclass(name = "Labels", module = "blockmap", frozen, eq, hash)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PyLabels {
    pub labels: Labels,
}

impl From<Labels> for PyLabels {
    fn from(labels: Labels) -> Self {
        PyLabels { labels }
    }
}

/// `names` given as one string or a sequence of strings.
fn extract_names(names: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(name) = names.cast::<PyString>() {
        return Ok(vec![name.to_string()]);
    }
    if names.is_instance_of::<pyo3::types::PyBytes>() {
        return Err(wrong_type(names.py(), "label names must be str, not bytes"));
    }
    let mut result = Vec::new();
    for name in names.try_iter().map_err(|_| {
        wrong_type(
            names.py(),
            format!(
                "label names must be a str or a sequence of str, got {}",
                type_name(names)
            ),
        )
    })? {
        let name = name?;
        let name = name.cast::<PyString>().map_err(|_| {
            wrong_type(
                names.py(),
                format!("label names must be str, got {}", type_name(&name)),
            )
        })?;
        result.push(name.to_string());
    }
    Ok(result)
}

/// An int32 `count x n_dims` array copied from an integer array-like.
fn extract_values(values: &Bound<'_, PyAny>, n_dims: usize) -> PyResult<Array> {
    let py = values.py();
    let array = as_ndarray(values)?;
    let shape: Vec<usize> = array.getattr("shape")?.extract()?;
    let size: usize = array.getattr("size")?.extract()?;
    if size == 0 && shape.len() <= 2 {
        // an empty list or array of any dtype: no entries
        let count = if shape.len() == 2 && n_dims == 0 {
            shape[0]
        } else {
            0
        };
        if count > 1 {
            return Err(invalid(
                py,
                "labels without dimensions can have at most one entry",
            ));
        }
        return Ok(Array::zeros(DType::I4, vec![count, n_dims])?);
    }
    let kind: String = array.getattr("dtype")?.getattr("kind")?.extract()?;
    if kind != "i" && kind != "u" {
        return Err(wrong_type(
            py,
            format!(
                "label values must be integers, got dtype {}",
                array.getattr("dtype")?.str()?
            ),
        ));
    }
    if shape.len() != 2 || shape[1] != n_dims {
        return Err(invalid(
            py,
            format!("label values must have shape (count, {n_dims}), got {shape:?}"),
        ));
    }
    let (min, max): (i128, i128) = (
        array.call_method0("min")?.extract()?,
        array.call_method0("max")?.extract()?,
    );
    if min < i128::from(i32::MIN) || max > i128::from(i32::MAX) {
        return Err(invalid(
            py,
            format!("label values must fit in int32, got values in [{min}, {max}]"),
        ));
    }
    // one copy into memory the Labels own; `astype` only converts when needed
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("copy", false)?;
    let int32 = array.call_method("astype", ("=i4",), Some(&kwargs))?;
    let int32: PyReadonlyArray2<'_, i32> = int32.extract()?;
    let view = int32.as_array();
    // `ndarray`'s `as_slice` is only for row-major (C) layout
    let array = if let Some(data) = view.as_slice() {
        Array::from_slice(shape, data)?
    } else {
        // otherwise gather in row-major order
        let data: Vec<i32> = view.iter().copied().collect();
        Array::from_slice(shape, &data)?
    };
    Ok(array)
}

/// An entry given as a `LabelsEntry` or a sequence of integers; `None` when
/// an integer does not fit in int32 (such an entry cannot be present).
fn extract_entry(entry: &Bound<'_, PyAny>) -> PyResult<Option<Vec<i32>>> {
    if let Ok(entry) = entry.cast::<PyLabelsEntry>() {
        let entry = entry.get();
        return Ok(Some(entry.values().to_vec()));
    }
    let values: Vec<i64> = entry.extract().map_err(|_| {
        wrong_type(
            entry.py(),
            format!(
                "a labels entry must be a LabelsEntry or a sequence of integers, got {}",
                type_name(entry)
            ),
        )
    })?;
    Ok(values.into_iter().map(|v| i32::try_from(v).ok()).collect())
}

/// An integer index of `obj` (anything with `__index__`), saturated to the
/// range of `isize` (such an index is out of range anyway); `None` when
/// `obj` is not an integer.
pub fn saturating_index(obj: &Bound<'_, PyAny>) -> Option<isize> {
    if let Ok(index) = obj.extract::<isize>() {
        return Some(index);
    }
    let index = obj.call_method0("__index__").ok()?;
    Some(if index.lt(0).ok()? {
        isize::MIN
    } else {
        isize::MAX
    })
}

/// Resolve a Python index (negative from the end) into `0..len`.
pub fn check_index(index: isize, len: usize) -> PyResult<usize> {
    let resolved = if index < 0 {
        index.checked_add_unsigned(len)
    } else {
        Some(index)
    };
    resolved
        .and_then(|i| usize::try_from(i).ok())
        .filter(|&i| i < len)
        .ok_or_else(|| {
            PyIndexError::new_err(format!("index {index} is out of range for {len} entries"))
        })
}

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
        let values = extract_values(values, names.len())?;
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
    fn __reduce_ex__<'py>(slf: &Bound<'py, Self>, protocol: i64) -> PyResult<Bound<'py, PyTuple>> {
        let data = super::io::extract_data(slf.as_any())?;
        super::pickle::reduce(slf.py(), &data, protocol)
    }

    /// Save to a path or binary file object (see ``blockmap.save``).
    fn save(slf: &Bound<'_, Self>, file: &Bound<'_, PyAny>) -> PyResult<()> {
        call_io(slf.py(), "save", (file, slf)).map(drop)
    }

    /// Load Labels from a path or binary file object (see ``blockmap.load_labels``).
    #[staticmethod]
    fn load<'py>(py: Python<'py>, file: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        call_io(py, "load_labels", (file,))
    }

    /// The ``.mts`` data, in a memoryview (see ``blockmap.save_buffer``).
    fn save_buffer<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        call_io(slf.py(), "save_buffer", (slf,))
    }

    /// Load from a bytes-like object (see ``blockmap.load_labels_buffer``).
    #[staticmethod]
    fn load_buffer<'py>(
        py: Python<'py>,
        buffer: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        call_io(py, "load_labels_buffer", (buffer,))
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

/// One entry of a :class:`Labels`.
#[pyclass(name = "LabelsEntry", module = "blockmap", frozen)]
#[derive(Debug)]
pub struct PyLabelsEntry {
    labels: Labels,
    index: usize,
}

impl PyLabelsEntry {
    /// Entry `index` of `labels`; `index < labels.count()`.
    pub fn new(labels: Labels, index: usize) -> Self {
        debug_assert!(index < labels.count());
        PyLabelsEntry { labels, index }
    }

    pub fn values(&self) -> &[i32] {
        self.labels.row(self.index)
    }

    pub fn names(&self) -> &[String] {
        self.labels.names()
    }
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
