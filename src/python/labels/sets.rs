//! `Labels` as sets of entries: union, intersection and difference (with or
//! without the mappings of the operands' entries), and `select`.

use numpy::PyArray1;
use pyo3::prelude::*;

use super::{LabelsArg, Mapped, PyLabels};

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyLabels {
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
}
