//! `Labels`' dimensions changed: `append`, `insert`, `remove`, `rename`,
//! `permute`.

use pyo3::prelude::*;

use super::convert::{check_index, extract_dimension_values, insert_index, saturating_index};
use super::errors::{invalid, type_name, wrong_type};
use super::{new_name, PyLabels};

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyLabels {
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
}
