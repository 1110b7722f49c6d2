//! `_inspect_dataset`: the figures of a dataset file that `blockmap info`
//! shows beyond what `Dataset` gives (commits, dead bytes), over
//! `dataset::inspect`, the GIL released.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::file::FileArg;
use super::gil::detached;
use crate::dataset;

/// ``{"version", "id", "entries", "committed", "file_bytes", "commits",
/// "live_bytes", "dead_bytes"}`` of the dataset file at ``path`` (any
/// version), read from its records' headers (no entry's data).
#[pyfunction]
fn _inspect_dataset<'py>(py: Python<'py>, path: FileArg<'_>) -> PyResult<Bound<'py, PyDict>> {
    let path = path.into_path(py, "_inspect_dataset")?;
    let found = detached(py, || dataset::inspect(&path))?;
    let dict = PyDict::new(py);
    dict.set_item("version", found.version)?;
    dict.set_item("id", &found.id)?;
    dict.set_item("entries", found.entries)?;
    dict.set_item("committed", found.committed)?;
    dict.set_item("file_bytes", found.file_len)?;
    dict.set_item("commits", found.layout.commits)?;
    dict.set_item("live_bytes", found.layout.live)?;
    dict.set_item("dead_bytes", found.dead_bytes())?;
    Ok(dict)
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(_inspect_dataset, module)?)?;
    Ok(())
}
