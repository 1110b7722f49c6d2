//! `Labels` as metatensor-core's and metatensor-torch's labels.

use pyo3::prelude::*;

use super::PyLabels;

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyLabels {
    /// The same Labels as metatensor-core's ``metatensor.Labels`` (see
    /// :func:`blockmap.metatensor.to_metatensor`), which holds its own copy
    /// of the values. Needs metatensor-core installed.
    ///
    /// Returns
    /// -------
    /// metatensor.Labels
    ///     The same entries.
    ///
    /// Raises
    /// ------
    /// ModuleNotFoundError
    ///     If metatensor-core is not installed.
    fn to_metatensor<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        super::convert::bridge(slf.as_any(), "to_metatensor")
    }

    /// The same Labels as metatensor-torch's ``Labels`` (see
    /// :func:`blockmap.metatensor_torch.to_metatensor_torch`), holding a
    /// copy of the values. Needs metatensor-torch installed.
    ///
    /// Returns
    /// -------
    /// metatensor.torch.Labels
    ///     The same entries.
    ///
    /// Raises
    /// ------
    /// BlockMapTypeError
    ///     If the data has no metatensor-torch equivalent (labels without
    ///     dimensions, values of a dtype torch does not have).
    /// ModuleNotFoundError
    ///     If metatensor-torch is not installed.
    fn to_metatensor_torch<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        super::convert::bridge_in(
            slf.as_any(),
            "blockmap.metatensor_torch",
            "to_metatensor_torch",
        )
    }
}
