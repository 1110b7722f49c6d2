//! The Python binding (cargo feature `python`): the native module
//! `blockmap._blockmap`. It converts, checks and calls into the core; the
//! public Python API is re-exported by `python/blockmap/__init__.py`.

mod array;
mod block;
mod errors;
mod io;
mod labels;
mod pickle;
mod shm;
mod tensor;

use pyo3::prelude::*;

#[pymodule]
fn _blockmap(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(module)?;
    module.add_class::<labels::PyLabels>()?;
    module.add_class::<labels::PyLabelsEntry>()?;
    module.add_class::<block::PyTensorBlock>()?;
    module.add_class::<tensor::PyTensorMap>()?;
    io::register(module)?;
    pickle::register(module)?;
    shm::register(module)?;
    Ok(())
}
