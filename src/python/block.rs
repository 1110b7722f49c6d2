//! `blockmap.TensorBlock`: its struct, where a Python block comes from
//! (`Origin`), and its methods by concern in `block/` (pyo3's
//! `multiple-pymethods`): `construction` (new, copies, `to`), `general`
//! (values, labels, shape, equality, text), `gradients`, `serde` (files,
//! pickles, shared memory) and `export` (metatensor's blocks).

mod construction;
mod export;
mod general;
mod gradients;
mod serde;

use pyo3::prelude::*;

// the binding's modules the methods use, their one way to them (the
// layers of src/python read this list: ../shared/tools/layers)
use super::{
    cell, convert, docstrings, errors, file, gil, io, labels, ops, pickle, repr, shm, torch,
};

use crate::arc::ForkArc;
use crate::block::TensorBlock;
use crate::labels::Labels;
use cell::SwapCell;
use labels::PyLabels;
use torch::Arrays;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// built by the user (or a copy): may get gradients
    Standalone,
    /// a block of a `TensorMap`
    MapBlock,
    /// a gradient of another block
    Gradient,
}

/// A labeled N-d array with axes ``[samples, *components, properties]``.
///
/// ``TensorBlock(values, samples, components, properties)``. ``values`` is
/// kept without a copy when it is a C-contiguous, aligned, native-byte-order
/// numpy array: the block holds a buffer export of it, and in-place edits
/// through either side are seen by both. Any other input (non-contiguous,
/// misaligned, big-endian, a list) is copied once into such an array.
#[pyclass(name = "TensorBlock", module = "blockmap", frozen, weakref)]
#[derive(Debug)]
pub struct PyTensorBlock {
    pub block: SwapCell<TensorBlock>,
    pub origin: Origin,
    /// for a gradient, the parameters leading to it from the block it was
    /// taken from (`["positions", "cell"]` for a gradient of a gradient)
    pub parameters: Vec<String>,
    /// what `values` (and the labels' values) are: numpy arrays or torch
    /// tensors
    pub arrays: Arrays,
}

impl PyTensorBlock {
    /// A Python block over `block`, coming from `origin`.
    pub fn new_view(block: TensorBlock, origin: Origin) -> Self {
        PyTensorBlock {
            block: SwapCell::new(block),
            origin,
            parameters: Vec::new(),
            arrays: Arrays::Numpy,
        }
    }

    /// A Python block over a gradient, reached through `parameters`.
    pub fn gradient_view(block: TensorBlock, parameters: Vec<String>) -> Self {
        PyTensorBlock {
            block: SwapCell::new(block),
            origin: Origin::Gradient,
            parameters,
            arrays: Arrays::Numpy,
        }
    }

    /// The same block, giving arrays as `arrays`.
    #[must_use]
    pub fn with_arrays(mut self, arrays: Arrays) -> Self {
        self.arrays = arrays;
        self
    }

    /// Labels of this block, giving values as its arrays.
    pub fn labels(&self, labels: &Labels) -> PyLabels {
        PyLabels::with_arrays(labels.clone(), self.arrays)
    }

    /// The block's current value.
    pub fn block(&self) -> ForkArc<TensorBlock> {
        self.block.get()
    }
}

impl PyTensorBlock {
    /// The gradient `gradient` of this block, with respect to `parameter`.
    fn of_gradient(&self, gradient: TensorBlock, parameter: &str) -> Self {
        let mut parameters = self.parameters.clone();
        parameters.push(parameter.to_string());
        PyTensorBlock::gradient_view(gradient, parameters).with_arrays(self.arrays)
    }
}
