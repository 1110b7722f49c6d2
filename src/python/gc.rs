//! Garbage collection of maps and blocks (their `__traverse__` and
//! `__clear__` call these). A map or a block reaches Python objects through
//! the buffers of its arrays: a held buffer export (of a numpy array given
//! as values) or a torch tensor given as values, whose hooks may refer back
//! to the map (`t.register_hook(lambda g: tensor_map)`): a cycle the
//! collector must see (the tensors; see `visit_buffer` for the exports).
//! `__traverse__` reports each such object exactly once, and only when the
//! reference is this Python object's alone: its snapshot is held
//! by no one else (a save running on it, a block object sharing it) and the
//! buffer by no other array (a numpy view of the values holds a clone).
//! Reporting a reference that another holder also reaches would count it
//! twice and let the collector free an object still in use; a shared path
//! is left out, and what it holds stays alive (as any object referenced
//! from outside the cycle). `__clear__` swaps in an empty value: the old
//! snapshot is dropped, and with it the references it held alone.

use pyo3::gc::PyVisit;
use pyo3::PyTraverseError;

use super::block::PyTensorBlock;
use super::tensor::PyTensorMap;
use super::torch::TorchOwner;
use crate::arc::ForkArc;
use crate::array::Array;
use crate::block::TensorBlock;
use crate::buffer::Buffer;
use crate::dtype::DType;
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// Visit the torch tensor `buffer`'s owner holds, when that owner is held
/// by this buffer alone.
///
/// The objects behind held buffer exports (numpy arrays, memoryviews) are
/// not visited: the collector could then clear an exporter (a memoryview
/// drops its memory in `tp_clear`) while the export is still held, and its
/// release afterwards would touch freed memory (seen as a crash of
/// `test_pickle_pieces.py` in a first version). numpy arrays are not
/// tracked by the collector anyway. A tensor is held by reference, not
/// through an export of its own: clearing it leaves its memory alone.
fn visit_buffer(buffer: &Buffer, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
    if buffer.owner_count() != 1 {
        return Ok(());
    }
    if let Some(owner) = buffer.foreign_owner::<TorchOwner>() {
        visit.call(owner.tensor())?;
    }
    Ok(())
}

/// Visit what the values of `block` and of its gradients hold.
fn visit_block(block: &TensorBlock, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
    visit_buffer(block.values().buffer(), visit)?;
    for gradient in block.gradients().values() {
        visit_block(gradient, visit)?;
    }
    Ok(())
}

/// Labels without dimensions nor entries.
fn no_labels() -> crate::Result<Labels> {
    Labels::new(Vec::<String>::new(), &[])
}

/// A block without data, for a cleared object.
fn empty_block() -> crate::Result<TensorBlock> {
    TensorBlock::new(
        Array::zeros(DType::F8, vec![0, 0])?,
        no_labels()?,
        Vec::new(),
        no_labels()?,
    )
}

impl PyTensorBlock {
    /// `__traverse__` (see the module docs).
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        match self.block.sole() {
            Some(block) => visit_block(&block, visit),
            None => Ok(()),
        }
    }

    /// `__clear__`: an empty block in place of the value.
    pub fn clear(&self) {
        if let Ok(empty) = empty_block() {
            self.block.set(ForkArc::new(empty));
        }
    }
}

impl PyTensorMap {
    /// `__traverse__` (see the module docs); also the dataset a map was read from.
    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(origin) = &self.origin {
            visit.call(&origin.dataset)?;
        }
        if let Some(map) = self.map.sole() {
            for block in map.blocks() {
                visit_block(block, visit)?;
            }
        }
        Ok(())
    }

    /// `__clear__`: an empty map in place of the value.
    pub fn clear(&self) {
        if let Ok(empty) = no_labels().and_then(|keys| TensorMap::new(keys, Vec::new())) {
            self.map.set(ForkArc::new(empty));
        }
    }
}
