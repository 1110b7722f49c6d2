//! `TensorBlock`'s gradients: added, listed and taken (views that know the
//! parameters leading to them).

use pyo3::prelude::*;
use pyo3::types::PyList;

use super::errors::{invalid, type_name, wrong_type};
use super::{Origin, PyTensorBlock};
use crate::block::TensorBlock;

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyTensorBlock {
    /// Add the gradient with respect to ``parameter``.
    ///
    /// The gradient's first sample dimension is ``sample`` (an index into
    /// this block's samples), its components are extra leading components
    /// followed by this block's, its properties and dtype are this block's.
    /// The gradient block stays usable and shares its memory with this one.
    ///
    /// Parameters
    /// ----------
    /// parameter : str
    ///     The gradient's name.
    /// gradient : TensorBlock
    ///     The gradient block.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If the gradient breaks the rules (docs/design.md, "Validation"), or
    ///     this block is a view inside a map.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn add_gradient(
        slf: &Bound<'_, Self>,
        parameter: &str,
        gradient: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = slf.py();
        let gradient = gradient.cast::<PyTensorBlock>().map_err(|_| {
            wrong_type(
                py,
                format!(
                    "a gradient must be a TensorBlock, got {}",
                    type_name(gradient)
                ),
            )
        })?;
        // clone the gradient before borrowing `slf` mutably: they may be
        // the same object
        let gradient = TensorBlock::clone(&gradient.get().block());
        let this = slf.get();
        match this.origin {
            Origin::Standalone => {}
            Origin::MapBlock => {
                return Err(invalid(
                    py,
                    "cannot add a gradient to a block of a TensorMap: all blocks of a map \
                     have the same gradients; add gradients before building the map",
                ))
            }
            Origin::Gradient => {
                return Err(invalid(
                    py,
                    "cannot add a gradient to a block obtained with gradient(): add it to \
                     the gradient block before adding that to its parent",
                ))
            }
        }
        Ok(this
            .block
            .modify(|block| block.add_gradient(parameter, gradient))?)
    }

    /// The gradient with respect to ``parameter``.
    ///
    /// Parameters
    /// ----------
    /// parameter : str
    ///     The gradient's name.
    ///
    /// Returns
    /// -------
    /// TensorBlock
    ///     The gradient, a view of this block's.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If there is no such gradient.
    fn gradient(&self, parameter: &str) -> PyResult<Self> {
        let gradient = self.block().gradient(parameter)?.clone();
        Ok(self.of_gradient(gradient, parameter))
    }

    /// Parameters of the gradients, sorted.
    ///
    /// Returns
    /// -------
    /// list of str
    ///     The gradients' names.
    fn gradients_list(&self) -> Vec<String> {
        self.block().gradients().keys().cloned().collect()
    }

    /// An iterator over ``(parameter, gradient block)`` pairs, sorted by
    /// parameter.
    ///
    /// Returns
    /// -------
    /// iterator of (str, TensorBlock)
    ///     The gradients and their names.
    ///
    /// Raises
    /// ------
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn gradients<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let pairs: Vec<(String, Self)> = self
            .block()
            .gradients()
            .iter()
            .map(|(p, g)| (p.clone(), self.of_gradient(g.clone(), p)))
            .collect();
        Ok(PyList::new(py, pairs)?.try_iter()?.into_any())
    }

    /// Whether there is a gradient with respect to ``parameter``.
    ///
    /// Parameters
    /// ----------
    /// parameter : str
    ///     A gradient's name.
    ///
    /// Returns
    /// -------
    /// bool
    ///     Whether the block has it.
    fn has_gradient(&self, parameter: &str) -> bool {
        self.block().gradients().contains_key(parameter)
    }
}
