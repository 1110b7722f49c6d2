//! The Python binding (cargo feature `python`): the native module
//! `blockmap._blockmap`. It converts, checks and calls into the core; the
//! public Python API is re-exported by `python/blockmap/__init__.py`.

//! Modules, bottom up: `errors` (exceptions), `array` (numpy glue),
//! `classes` (what each class holds), `convert` (Python objects to and from
//! the core), `repr` (metatensor's text layout), `file` (paths and file
//! objects), `gil` (core work with the GIL released, interruptible), then
//! `torch` (torch tensors as values), `io`, `pickle` and `shm` (the functions behind every save, load, pickle
//! and share), `ops` and `selection` (the arguments of the map operations
//! and of block selections, read as metatensor-core reads them), and last
//! the classes' methods (`labels`, `entry`, `block`, `tensor`), whose
//! bodies call into those.

mod array;
mod block;
mod classes;
mod convert;
mod dataset;
mod entry;
mod errors;
mod file;
mod gil;
mod io;
mod join;
mod labels;
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
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(module)?;
    module.add_class::<classes::PyLabels>()?;
    module.add_class::<classes::PyLabelsEntry>()?;
    module.add_class::<classes::PyTensorBlock>()?;
    module.add_class::<classes::PyTensorMap>()?;
    io::register(module)?;
    pickle::register(module)?;
    shm::register(module)?;
    dataset::register(module)?;
    join::register(module)?;
    split::register(module)?;
    torch::register(module)?;
    Ok(())
}
