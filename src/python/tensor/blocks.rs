//! `TensorMap`'s blocks: selected as metatensor-core selects them (`block`,
//! `blocks`, `tensor[...]`), by position, and iterated.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::block::PyTensorBlock;
use super::entry::PyLabelsEntry;
use super::errors::{invalid, type_name, wrong_type};
use super::selection::{self, block_index, describe, resolve, Selection};
use super::{iterate, view, PyTensorMap};

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyTensorMap {
    /// The one block matching ``selection``, as metatensor-core finds it:
    /// an ``int`` is a position (:meth:`block_by_id`); a dict of key
    /// values, a :class:`LabelsEntry` or :class:`Labels` (any number of
    /// entries, a subset of the key dimensions) select the blocks whose
    /// keys match one of their entries. Without a selection, the keyword
    /// arguments are the dict. Raises ``ValueError`` when no block or more
    /// than one matches.
    ///
    /// Parameters
    /// ----------
    /// selection : int, dict, LabelsEntry or Labels, optional
    ///     A position or key values.
    /// **kwargs : int
    ///     Key values, when ``selection`` is not given.
    ///
    /// Returns
    /// -------
    /// TensorBlock
    ///     The block, a view of the map's.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If no block or more than one matches.
    /// BlockMapIndexError
    ///     If a position is out of range.
    /// BlockMapOverflowError
    ///     If a selected value does not fit in int32.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    #[pyo3(signature = (selection = None, **kwargs))]
    fn block(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyTensorBlock> {
        let selection = selection::read(py, selection, kwargs, false)?;
        let map = self.map();
        let matching = resolve(&map, &selection)?;
        match matching.as_slice() {
            [i] => Ok(view(&map, *i, self.arrays)),
            [] if map.blocks().is_empty() => {
                Err(invalid(py, "there are no blocks in this TensorMap"))
            }
            [] => Err(invalid(
                py,
                format!("couldn't find any block matching {}", describe(&selection)),
            )),
            many => Err(invalid(
                py,
                format!(
                    "more than one block matched {} ({} blocks), use `TensorMap.blocks` to \
                     get all of them",
                    describe(&selection),
                    many.len()
                ),
            )),
        }
    }

    /// The blocks matching ``selection`` (all of them without one), as
    /// metatensor-core finds them: an ``int`` or a list of ``int`` are
    /// positions (:meth:`blocks_by_id`); a dict, a :class:`LabelsEntry` or
    /// :class:`Labels` select by key, as in :meth:`block`. Raises
    /// ``ValueError`` when nothing matches in a map that has blocks.
    ///
    /// Parameters
    /// ----------
    /// selection : int, dict, LabelsEntry or Labels, optional
    ///     A position, a list of positions or key values.
    /// **kwargs : int
    ///     Key values, when ``selection`` is not given.
    ///
    /// Returns
    /// -------
    /// list of TensorBlock
    ///     The blocks, views of the map's.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If nothing matches in a map that has blocks.
    /// BlockMapIndexError
    ///     If a position is out of range.
    /// BlockMapOverflowError
    ///     If a selected value does not fit in int32.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    #[pyo3(signature = (selection = None, **kwargs))]
    fn blocks(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Vec<PyTensorBlock>> {
        let selection = selection::read(py, selection, kwargs, true)?;
        let map = self.map();
        let matching = resolve(&map, &selection)?;
        if matching.is_empty() && !map.blocks().is_empty() {
            return Err(invalid(
                py,
                format!("Couldn't find any block matching {}", describe(&selection)),
            ));
        }
        Ok(matching
            .into_iter()
            .map(|i| view(&map, i, self.arrays))
            .collect())
    }

    /// ``tensor[selection]``: the same as :meth:`block`.
    fn __getitem__(&self, py: Python<'_>, selection: &Bound<'_, PyAny>) -> PyResult<PyTensorBlock> {
        self.block(py, Some(selection), None)
    }

    /// Positions of the blocks whose keys match the selection (a dict, a
    /// :class:`LabelsEntry` or :class:`Labels`); empty when none does.
    ///
    /// Parameters
    /// ----------
    /// selection : dict, LabelsEntry or Labels
    ///     Key values.
    ///
    /// Returns
    /// -------
    /// list of int
    ///     The positions of the matching blocks.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If the selection names a dimension the keys do not have.
    /// BlockMapOverflowError
    ///     If a selected value does not fit in int32.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    fn blocks_matching(
        &self,
        py: Python<'_>,
        selection: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<usize>> {
        let selection = selection::read(py, Some(selection), None, false)?;
        if !matches!(selection, Selection::Keys(_)) {
            return Err(wrong_type(
                py,
                "blocks_matching takes a dict, a LabelsEntry or Labels",
            ));
        }
        resolve(&self.map(), &selection)
    }

    /// Block ``index`` (negative indices count from the end); raises
    /// ``IndexError`` out of range.
    ///
    /// Parameters
    /// ----------
    /// index : int
    ///     A position.
    ///
    /// Returns
    /// -------
    /// TensorBlock
    ///     The block, a view of the map's.
    ///
    /// Raises
    /// ------
    /// BlockMapIndexError
    ///     If ``index`` is out of range or not an integer.
    fn block_by_id(&self, index: &Bound<'_, PyAny>) -> PyResult<PyTensorBlock> {
        let py = index.py();
        let map = self.map();
        let index = super::convert::saturating_index(index).ok_or_else(|| {
            wrong_type(
                py,
                format!("a block index must be an int, got {}", type_name(index)),
            )
        })?;
        Ok(view(&map, block_index(&map, &index)?, self.arrays))
    }

    /// The blocks at ``indices``, in that order.
    ///
    /// Parameters
    /// ----------
    /// indices : sequence of int
    ///     Positions.
    ///
    /// Returns
    /// -------
    /// list of TensorBlock
    ///     The blocks, views of the map's.
    ///
    /// Raises
    /// ------
    /// BlockMapIndexError
    ///     If an index is out of range or not an integer.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    fn blocks_by_id(&self, indices: &Bound<'_, PyAny>) -> PyResult<Vec<PyTensorBlock>> {
        let py = indices.py();
        let map = self.map();
        let mut blocks = Vec::new();
        let indices = indices.try_iter().map_err(|_| {
            wrong_type(
                py,
                format!(
                    "blocks_by_id takes a sequence of block indices, got {}",
                    type_name(indices)
                ),
            )
        })?;
        for index in indices {
            let index = index?;
            let position = super::convert::saturating_index(&index).ok_or_else(|| {
                wrong_type(
                    py,
                    format!("a block index must be an int, got {}", type_name(&index)),
                )
            })?;
            blocks.push(view(&map, block_index(&map, &position)?, self.arrays));
        }
        Ok(blocks)
    }

    /// An iterator over ``(key, block)`` pairs, in key order.
    ///
    /// Returns
    /// -------
    /// iterator of (LabelsEntry, TensorBlock)
    ///     The keys and blocks.
    ///
    /// Raises
    /// ------
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let map = self.map();
        let pairs: Vec<(PyLabelsEntry, PyTensorBlock)> = (0..map.blocks().len())
            .map(|i| {
                (
                    PyLabelsEntry::new(map.keys().clone(), i).with_arrays(self.arrays),
                    view(&map, i, self.arrays),
                )
            })
            .collect();
        iterate(py, pairs)
    }

    /// ``for block in tensor``: the blocks, in key order.
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let map = self.map();
        iterate(
            py,
            (0..map.blocks().len())
                .map(|i| view(&map, i, self.arrays))
                .collect(),
        )
    }
}
