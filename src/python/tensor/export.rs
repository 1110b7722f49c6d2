//! `TensorMap` as metatensor-core's and metatensor-torch's maps.

use pyo3::prelude::*;

use super::PyTensorMap;

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyTensorMap {
    /// The same map as metatensor-torch's ``TensorMap`` (see
    /// :func:`blockmap.metatensor_torch.to_metatensor_torch`): values are
    /// shared, labels copied once. Needs metatensor-torch installed.
    ///
    /// Returns
    /// -------
    /// metatensor.torch.TensorMap
    ///     The same map.
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

    /// The same `TensorMap` as metatensor-core's ``metatensor.TensorMap`` (see
    /// :func:`blockmap.metatensor.to_metatensor`): arrays are shared, labels
    /// are copied once. Needs metatensor-core installed.
    ///
    /// Returns
    /// -------
    /// metatensor.TensorMap
    ///     The same map.
    ///
    /// Raises
    /// ------
    /// ModuleNotFoundError
    ///     If metatensor-core is not installed.
    fn to_metatensor<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        super::convert::bridge(slf.as_any(), "to_metatensor")
    }
}
