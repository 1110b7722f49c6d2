//! The methods of `blockmap.Labels`: metatensor-core's `Labels` API (its
//! installed `_labels.py` is the reference for names, defaults and the
//! exceptions raised), over the core's `Labels`.

use numpy::{PyArray1, PyUntypedArray};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList, PyMemoryView, PySlice, PyString, PyTuple};

use super::array::to_numpy_read_only;
use super::convert::{
    check_index, extract_dimension_values, extract_label_values, extract_names, insert_index,
    saturating_index, to_arguments, SaturatingInt,
};
use super::entry::{extract_entry, PyLabelsEntry};
use super::errors::{class_repr, from_callee, invalid, out_of_range, type_name, wrong_type};
use super::file::{FileArg, MmapArg};
use super::torch::{arrays_arg, is_tensor, label_tensor, Arrays};
use crate::data::{DataRef, Kind};
use crate::labels::{Labels, Names};

/// Named int32 columns, one unique row per entry.
///
/// ``Labels(names, values, assume_unique=False)``, as in metatensor-core:
/// ``names`` is a string (``""``: no names) or a sequence of strings (valid
/// identifiers, unique); ``values`` a 2-D numpy array of integers of shape
/// ``(count, len(names))`` (any array without entries means none). The
/// values are copied once into int32 memory owned by the Labels, which
/// never changes afterwards: ``.values`` is a read-only view of it. With
/// ``assume_unique=True`` the check that rows are unique is skipped.
///
/// Labels are immutable: every operation (``union``, ``select``,
/// ``insert``, ``rename``, ...) returns new Labels.
#[pyclass(name = "Labels", module = "blockmap", frozen, weakref)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PyLabels {
    pub labels: Labels,
    /// what `values` gives: numpy arrays, or torch tensors (copies)
    pub arrays: Arrays,
}

impl From<Labels> for PyLabels {
    fn from(labels: Labels) -> Self {
        PyLabels {
            labels,
            arrays: Arrays::Numpy,
        }
    }
}

impl PyLabels {
    /// `labels` giving values as `arrays`.
    pub fn with_arrays(labels: Labels, arrays: Arrays) -> Self {
        PyLabels { labels, arrays }
    }

    /// Other Labels derived from these, giving the same array type.
    pub fn derived(&self, labels: Labels) -> Self {
        PyLabels::with_arrays(labels, self.arrays)
    }
}

/// The Labels in `obj`, or a type error naming `what`.
pub fn extract_labels(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Labels> {
    obj.cast::<PyLabels>()
        .map(|l| l.get().labels.clone())
        .map_err(|_| {
            wrong_type(
                obj.py(),
                format!("{what} must be blockmap.Labels, got {}", type_name(obj)),
            )
        })
}

/// A parameter that takes blockmap's `Labels`: anything else (metatensor's
/// Labels named with their conversion, see `errors::foreign`) is a
/// `BlockMapTypeError`, not pyo3's `TypeError` naming two classes `Labels`.
#[derive(Debug)]
pub struct LabelsArg(pub Labels);

impl FromPyObject<'_, '_> for LabelsArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, '_, PyAny>) -> PyResult<Self> {
        extract_labels(&obj, "the argument").map(LabelsArg)
    }
}

/// The Labels a `keys=` argument selects blocks by.
pub fn keys_arg(keys: Option<LabelsArg>) -> Option<Labels> {
    keys.map(|keys| keys.0)
}

/// New Labels and the positions, in them, of the entries of both operands.
type Mapped<'py> = (
    PyLabels,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
);

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

    /// New Labels with a last dimension ``name`` whose values are
    /// ``values``, a 1-D numpy array of one integer per entry.
    /// As metatensor, ``values`` is checked before ``name``.
    ///
    /// Parameters
    /// ----------
    /// name : str
    ///     The new dimension's name.
    /// values : array of int
    ///     One value per entry.
    ///
    /// Returns
    /// -------
    /// Labels
    ///     New Labels.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If the name exists or is invalid, or the values do not fit.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn append(&self, name: &Bound<'_, PyAny>, values: &Bound<'_, PyAny>) -> PyResult<Self> {
        let values = extract_dimension_values(values, self.labels.count())?;
        let name = new_name(name)?;
        Ok(self.derived(self.labels.append(&name.to_cow()?, &values)?))
    }

    /// New Labels with a dimension ``name`` before dimension ``index``
    /// (negative: from the end), whose values are ``values``, a 1-D numpy
    /// array of one integer per entry.
    ///
    /// Parameters
    /// ----------
    /// index : int
    ///     Where the new dimension goes.
    /// name : str
    ///     The new dimension's name.
    /// values : array of int
    ///     One value per entry.
    ///
    /// Returns
    /// -------
    /// Labels
    ///     New Labels.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If the name exists or is invalid, or the values do not fit.
    /// BlockMapIndexError
    ///     If ``index`` is out of range.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn insert(
        &self,
        index: &Bound<'_, PyAny>,
        name: &Bound<'_, PyAny>,
        values: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        // metatensor's order of checks: the index's type (`list.insert`), the
        // values, the index's range (`numpy.insert`), then the name
        if saturating_index(index).is_none() {
            insert_index(index, self.labels.size())?;
        }
        let values = extract_dimension_values(values, self.labels.count())?;
        let index = insert_index(index, self.labels.size())?;
        let name = new_name(name)?;
        Ok(self.derived(self.labels.insert(index, &name.to_cow()?, &values)?))
    }

    /// New Labels without dimension ``name``; a ``MetatensorError`` when
    /// the remaining entries are not unique.
    ///
    /// Parameters
    /// ----------
    /// name : str
    ///     The dimension to remove.
    ///
    /// Returns
    /// -------
    /// Labels
    ///     New Labels.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If there is no such dimension, or entries become duplicates.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn remove(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Self> {
        let name = self.dimension_name(py, name)?;
        Ok(self.derived(self.labels.remove(&name)?))
    }

    /// New Labels with dimension ``old`` named ``new`` (sharing the values).
    /// As metatensor, ``old`` is checked first: an unknown ``old`` is a
    /// ``ValueError`` whatever ``new`` is.
    ///
    /// Parameters
    /// ----------
    /// old : str
    ///     The current name.
    /// new : str
    ///     The new name.
    ///
    /// Returns
    /// -------
    /// Labels
    ///     New Labels.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If ``old`` is absent or ``new`` exists or is invalid.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn rename(
        &self,
        py: Python<'_>,
        old: &Bound<'_, PyAny>,
        new: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let old = self.dimension_name(py, old)?;
        let new = new_name(new)?;
        Ok(self.derived(self.labels.rename(&old, &new.to_cow()?)?))
    }

    /// New Labels with the dimensions in the order ``dimensions_indexes``
    /// (a sequence of dimension positions, negative ones from the end).
    ///
    /// Parameters
    /// ----------
    /// dimensions_indexes : sequence of int
    ///     The new order of the dimensions.
    ///
    /// Returns
    /// -------
    /// Labels
    ///     New Labels.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If this is not a permutation of the dimensions.
    /// BlockMapIndexError
    ///     If an index is out of range.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn permute(&self, dimensions_indexes: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = dimensions_indexes.py();
        let size = self.labels.size();
        let len = dimensions_indexes.len().map_err(|_| {
            wrong_type(
                py,
                format!(
                    "permute takes a sequence of dimension positions, got {}",
                    type_name(dimensions_indexes)
                ),
            )
        })?;
        if len != size {
            return Err(invalid(
                py,
                format!(
                    "the length of `dimensions_indexes` ({len}) does not match the number of \
                     dimensions in the Labels ({size})"
                ),
            ));
        }
        let mut order = Vec::with_capacity(size);
        for index in dimensions_indexes.try_iter()? {
            let index = index?;
            let i = saturating_index(&index).ok_or_else(|| {
                wrong_type(
                    py,
                    format!(
                        "dimension indexes must be integers, not {}",
                        type_name(&index)
                    ),
                )
            })?;
            order.push(check_index(&i, size)?);
        }
        Ok(self.derived(self.labels.permute(&order)?))
    }

    /// The union with ``other`` (same dimensions): the entries of these
    /// Labels, then those of ``other`` they do not have.
    ///
    /// Parameters
    /// ----------
    /// other : Labels
    ///     Labels with the same names as these.
    ///
    /// Returns
    /// -------
    /// Labels
    ///     These entries, then those of ``other`` not in them.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If ``other`` has different names.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn union(&self, py: Python<'_>, other: LabelsArg) -> PyResult<Self> {
        let LabelsArg(other) = other;
        let other = &other;
        let (union, _, _) = py.detach(|| self.labels.union(other))?;
        Ok(self.derived(union))
    }

    /// The union with ``other``, and where each entry of these Labels and
    /// of ``other`` is in it: ``(union, first, second)``, the mappings as
    /// int64 arrays.
    ///
    /// Parameters
    /// ----------
    /// other : Labels
    ///     Labels with the same names as these.
    ///
    /// Returns
    /// -------
    /// tuple of (Labels, numpy.ndarray, numpy.ndarray)
    ///     The union and, for each input, the position of each entry in it.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If ``other`` has different names.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn union_and_mapping<'py>(&self, py: Python<'py>, other: LabelsArg) -> PyResult<Mapped<'py>> {
        let LabelsArg(other) = other;
        let other = &other;
        let (union, first, second) = py.detach(|| self.labels.union(other))?;
        Ok((
            self.derived(union),
            PyArray1::from_vec(py, first),
            PyArray1::from_vec(py, second),
        ))
    }

    /// The intersection with ``other`` (same dimensions): the entries both
    /// have, in the order of the one with fewer entries (of these Labels
    /// when they have as many), as metatensor orders them.
    ///
    /// Parameters
    /// ----------
    /// other : Labels
    ///     Labels with the same names as these.
    ///
    /// Returns
    /// -------
    /// Labels
    ///     The entries in both, in this order.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If ``other`` has different names.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn intersection(&self, py: Python<'_>, other: LabelsArg) -> PyResult<Self> {
        let LabelsArg(other) = other;
        let other = &other;
        let (intersection, _, _) = py.detach(|| self.labels.intersection(other))?;
        Ok(self.derived(intersection))
    }

    /// The intersection with ``other``, and where each entry of these
    /// Labels and of ``other`` is in it: ``(intersection, first, second)``,
    /// the mappings as int64 arrays, -1 for entries not in the
    /// intersection.
    ///
    /// Parameters
    /// ----------
    /// other : Labels
    ///     Labels with the same names as these.
    ///
    /// Returns
    /// -------
    /// tuple of (Labels, numpy.ndarray, numpy.ndarray)
    ///     The intersection and, for each input, the position of each entry in
    ///     it (-1 when absent).
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If ``other`` has different names.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn intersection_and_mapping<'py>(
        &self,
        py: Python<'py>,
        other: LabelsArg,
    ) -> PyResult<Mapped<'py>> {
        let LabelsArg(other) = other;
        let other = &other;
        let (intersection, first, second) = py.detach(|| self.labels.intersection(other))?;
        Ok((
            self.derived(intersection),
            PyArray1::from_vec(py, first),
            PyArray1::from_vec(py, second),
        ))
    }

    /// The set difference with ``other`` (same dimensions): the entries of
    /// these Labels that ``other`` does not have, in their order.
    ///
    /// Parameters
    /// ----------
    /// other : Labels
    ///     Labels with the same names as these.
    ///
    /// Returns
    /// -------
    /// Labels
    ///     These entries that are not in ``other``.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If ``other`` has different names.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn difference(&self, py: Python<'_>, other: LabelsArg) -> PyResult<Self> {
        let LabelsArg(other) = other;
        let other = &other;
        let (difference, _) = py.detach(|| self.labels.difference(other))?;
        Ok(self.derived(difference))
    }

    /// The set difference with ``other``, and where each entry of these
    /// Labels is in it: ``(difference, first)``, the mapping as an int64
    /// array, -1 for entries not in the difference.
    ///
    /// Parameters
    /// ----------
    /// other : Labels
    ///     Labels with the same names as these.
    ///
    /// Returns
    /// -------
    /// tuple of (Labels, numpy.ndarray)
    ///     The difference and the position of each of these entries in it (-1
    ///     when absent).
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If ``other`` has different names.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn difference_and_mapping<'py>(
        &self,
        py: Python<'py>,
        other: LabelsArg,
    ) -> PyResult<(Self, Bound<'py, PyArray1<i64>>)> {
        let LabelsArg(other) = other;
        let other = &other;
        let (difference, first) = py.detach(|| self.labels.difference(other))?;
        Ok((self.derived(difference), PyArray1::from_vec(py, first)))
    }

    /// Positions (a uint64 array, as metatensor-core returns them) of the
    /// entries matching one of the entries of ``selection``, whose
    /// dimensions are some of these Labels' dimensions, in any order. The
    /// positions are in the order of these Labels, or, when ``selection``
    /// has their very dimensions (same order), in the order of its entries
    /// (as in metatensor). A selection without dimensions selects all.
    ///
    /// Parameters
    /// ----------
    /// selection : Labels
    ///     Values of some of the dimensions.
    ///
    /// Returns
    /// -------
    /// numpy.ndarray
    ///     The positions of the matching entries.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If the selection names a dimension these Labels do not have.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn select<'py>(
        &self,
        py: Python<'py>,
        selection: LabelsArg,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let LabelsArg(selection) = selection;
        let selection = &selection;
        let selected = py.detach(|| self.labels.select(selection))?;
        let mut positions = Vec::new();
        positions
            .try_reserve_exact(selected.len())
            .map_err(crate::error::Error::from)?;
        positions.extend(selected.into_iter().map(|i| i as u64));
        Ok(PyArray1::from_vec(py, positions))
    }

    /// Pickle support: out-of-band buffers over this object's memory with
    /// protocol 5, the ``.mts`` archive in a bytes object before (see
    /// ``docs/pickle.md``).
    fn __reduce_ex__<'py>(&self, py: Python<'py>, protocol: i64) -> PyResult<Bound<'py, PyTuple>> {
        if self.arrays == Arrays::Torch {
            let twin = Bound::new(py, PyLabels::from(self.labels.clone()))?.into_any();
            return super::torch::reduce_as_torch(py, twin, Vec::new());
        }
        super::pickle::reduce(py, DataRef::Labels(&self.labels), protocol)
    }

    /// The same Labels as metatensor-core's ``metatensor.Labels`` (see
    /// :func:`blockmap.metatensor.to_metatensor`), which holds its own copy
    /// of the values. Needs metatensor-core installed.
    ///
    /// Returns
    /// -------
    /// metatensor.Labels
    ///     The same entries.
    ///
    /// Raises
    /// ------
    /// ModuleNotFoundError
    ///     If metatensor-core is not installed.
    fn to_metatensor<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        super::convert::bridge(slf.as_any(), "to_metatensor")
    }

    /// The same Labels as metatensor-torch's ``Labels`` (see
    /// :func:`blockmap.metatensor_torch.to_metatensor_torch`), holding a
    /// copy of the values. Needs metatensor-torch installed.
    ///
    /// Returns
    /// -------
    /// metatensor.torch.Labels
    ///     The same entries.
    ///
    /// Raises
    /// ------
    /// BlockMapTypeError
    ///     If the data has no metatensor-torch equivalent (labels without
    ///     dimensions, values of a dtype torch does not have).
    /// ModuleNotFoundError
    ///     If metatensor-torch is not installed.
    fn to_metatensor_torch<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        super::convert::bridge_in(
            slf.as_any(),
            "blockmap.metatensor_torch",
            "to_metatensor_torch",
        )
    }

    /// Save to a path or binary file object (see ``blockmap.save``).
    ///
    /// Parameters
    /// ----------
    /// file : str, os.PathLike or binary file object
    ///     The path (``.mts`` appended when missing) or a writable file object.
    /// durable : bool, optional
    ///     For a path: sync the data and the rename to disk before returning
    ///     (the default).
    ///
    /// Raises
    /// ------
    /// BlockMapIOError
    ///     If the operating system refuses the write, the file object fails or
    ///     holds data after its position that it cannot cut off, or mapped
    ///     data was lost (its file truncated by another program).
    /// ValidationError
    ///     If an argument has an invalid value.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    #[pyo3(signature = (file, *, durable = true), text_signature = "($self, file, *, durable=True)")]
    fn save(&self, py: Python<'_>, file: FileArg<'_>, durable: bool) -> PyResult<()> {
        super::io::save(py, file, DataRef::Labels(&self.labels), durable)
    }

    /// Load Labels from a path or binary file object (see ``blockmap.load_labels``).
    ///
    /// Parameters
    /// ----------
    /// file : str, os.PathLike or binary file object
    ///     The path, or a readable binary file object.
    ///
    /// Returns
    /// -------
    /// Labels
    ///     The Labels.
    ///
    /// Raises
    /// ------
    /// MissingFileError
    ///     If ``file`` is a path that does not exist.
    /// BlockMapIOError
    ///     If the operating system refuses the read, or the file object fails.
    /// FormatError
    ///     If the data is not a valid archive of the expected kind.
    /// ValidationError
    ///     If an argument has an invalid value.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    #[staticmethod]
    fn load(py: Python<'_>, file: FileArg<'_>) -> PyResult<Py<PyAny>> {
        let labels = super::io::load(py, file, Kind::Labels, MmapArg(None), None)?.into_labels()?;
        Ok(Py::new(py, PyLabels::from(labels))?.into_any())
    }

    /// The Labels as a bare ``.npy`` file (as metatensor-core saves Labels),
    /// in a memoryview (see ``blockmap.save_buffer``).
    ///
    /// Returns
    /// -------
    /// memoryview
    ///     The ``.npy`` data.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If an argument has an invalid value.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn save_buffer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyMemoryView>> {
        super::io::save_buffer(py, DataRef::Labels(&self.labels))
    }

    /// Load from a bytes-like object (see ``blockmap.load_labels_buffer``).
    ///
    /// Parameters
    /// ----------
    /// buffer : bytes-like object
    ///     The archive: ``bytes``, ``bytearray``, ``memoryview``, a numpy array, ...
    ///
    /// Returns
    /// -------
    /// Labels
    ///     The Labels.
    ///
    /// Raises
    /// ------
    /// FormatError
    ///     If the data is not a valid archive of the expected kind.
    /// ValidationError
    ///     If an argument has an invalid value.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    #[staticmethod]
    fn load_buffer(py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let labels = super::io::load_buffer(py, buffer, Kind::Labels, None)?.into_labels()?;
        Ok(Py::new(py, PyLabels::from(labels))?.into_any())
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

impl PyLabels {
    /// The name of a dimension given as `name`: metatensor refuses any
    /// other with "not found" (a `ValueError`), strings or not.
    fn dimension_name(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<String> {
        let found = name
            .cast::<PyString>()
            .ok()
            .map(ToString::to_string)
            .filter(|n| self.labels.dimension(n).is_some());
        found.ok_or_else(|| {
            let shown = name.str().map_or_else(|_| "?".into(), |s| s.to_string());
            invalid(
                py,
                format!(
                    "'{shown}' not found in the dimensions {} of these Labels",
                    Names(self.labels.names())
                ),
            )
        })
    }
}

/// The name of a new dimension: a str, or the `TypeError` metatensor's
/// Labels constructor raises.
fn new_name<'a, 'py>(name: &'a Bound<'py, PyAny>) -> PyResult<&'a Bound<'py, PyString>> {
    name.cast::<PyString>().map_err(|_| {
        wrong_type(
            name.py(),
            format!(
                "Labels names must be strings, got {} instead",
                class_repr(name)
            ),
        )
    })
}

/// metatensor takes a boolean or `None` index for numpy's (an added axis),
/// and refuses the entry it gets: a `ValueError`.
fn bool_index(py: Python<'_>) -> PyErr {
    invalid(
        py,
        "Labels entries are indexed by integers, not booleans or None",
    )
}
