//! The Python binding (cargo feature `python`): the native module
//! `blockmap._blockmap`. It converts, checks and calls into the core; the
//! public Python API is re-exported by `python/blockmap/__init__.py`.

//! Modules, bottom up (as docs/design.md lists them): `docstrings`
//! (docstring text several members share), `errors` (core errors
//! to blockmap's exception classes), `gil` (core work with the GIL
//! released, interruptible), `array` (numpy glue), `file` (paths and file
//! objects), `cell` (the swapped value of a map or a block), `torch` (torch
//! tensors as values, and `Arrays`, the array type an object gives back),
//! `repr` (metatensor's text layout), `convert` (label names and values,
//! indices and integers from Python), `io`, `pickle` and `shm` (the core
//! work behind every save, load, pickle and share, taking and giving core
//! data), then the classes, each struct with its methods: `entry` and
//! `labels`, `ops` and `selection` (the arguments of the map operations and
//! of block selections, read as metatensor-core reads them), `block` and
//! `tensor` (the methods of `labels`, `block` and `tensor` in a folder of
//! that name, a file per concern: pyo3's `multiple-pymethods`); then `gc`
//! (what maps and blocks report to the
//! garbage collector), `objects` (any class's object to and from core
//! data), `functions` (the module-level functions over objects), and last
//! `dataset`, `inspect` (the figures of `blockmap info`), `join` and
//! `split`.
//!
//! Every class is frozen (no borrow flag, so no "already borrowed"
//! errors); a map or a block holds its value in a `SwapCell` (`cell.rs`,
//! docs/design.md's "Threads").

mod array;
mod block;
mod cell;
mod convert;
mod dataset;
mod docstrings;
mod entry;
mod errors;
mod file;
mod functions;
mod gc;
mod gil;
mod inspect;
mod io;
mod join;
mod labels;
mod objects;
mod ops;
mod pickle;
mod repr;
mod selection;
mod shm;
mod split;
mod tensor;
mod torch;

use pyo3::prelude::*;

#[pymodule]
fn _blockmap(module: &Bound<'_, PyModule>) -> PyResult<()> {
    refuse_sub_interpreters()?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(module)?;
    module.add_class::<labels::PyLabels>()?;
    module.add_class::<entry::PyLabelsEntry>()?;
    module.add_class::<block::PyTensorBlock>()?;
    module.add_class::<tensor::PyTensorMap>()?;
    functions::register(module)?;
    pickle::register(module)?;
    shm::register(module)?;
    dataset::register(module)?;
    inspect::register(module)?;
    join::register(module)?;
    split::register(module)?;
    Ok(())
}

/// blockmap keeps Python objects of the interpreter that imported it in
/// statics (its exception classes, numpy's functions, the reconstructor:
/// `PyOnceLock`s), and releases the GIL around its work, retaking it from
/// the same thread (`Python::attach`), which in a sub-interpreter attaches
/// to the main one. Neither is sound in a sub-interpreter: an import there
/// (before or after the main interpreter's) raises `ImportError` instead.
fn refuse_sub_interpreters() -> PyResult<()> {
    // SAFETY: both only read the interpreter state pointers, with the GIL
    // held (the module is being initialised).
    let (current, main) = unsafe {
        (
            pyo3::ffi::PyInterpreterState_Get(),
            pyo3::ffi::PyInterpreterState_Main(),
        )
    };
    if current == main {
        return Ok(());
    }
    Err(pyo3::exceptions::PyImportError::new_err(
        "blockmap cannot be imported in a sub-interpreter: it supports the main \
         interpreter only (its native module keeps objects of the interpreter that \
         imported it); import it in the main interpreter, or use processes instead",
    ))
}
