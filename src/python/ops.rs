//! The arguments of `keys_to_samples`, `keys_to_properties`,
//! `components_to_properties` and `to(...)`, read as metatensor-core reads
//! them, and the dtype conversion behind `to(dtype=...)`.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple};

use super::convert::{extract_names, is_torch};
use super::errors::{invalid, type_name, wrong_type};
use super::labels::PyLabels;
use crate::block::TensorBlock;
use crate::dtype::DType;
use crate::labels::Labels;
use crate::tensor::TensorMap;

/// `keys_to_move` given as a name, a list of names, or Labels (whose
/// entries, when it has any, are the values to move).
pub fn keys_to_move(obj: &Bound<'_, PyAny>) -> PyResult<Labels> {
    if let Ok(labels) = obj.cast::<PyLabels>() {
        return Ok(labels.get().labels.clone());
    }
    let names = names(obj, "keys_to_move")?;
    Ok(Labels::empty(names)?)
}

/// Dimension names given as one string or a sequence of strings.
pub fn names(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<String>> {
    if obj.is_instance_of::<PyString>() {
        return extract_names(obj);
    }
    if obj.try_iter().is_err() || obj.is_instance_of::<PyLabels>() {
        return Err(wrong_type(
            obj.py(),
            format!(
                "{what} must be a str or a list of str, got {}",
                type_name(obj)
            ),
        ));
    }
    extract_names(obj)
}

/// One element of the map's dtype holding `fill_value`, as
/// `numpy.array(fill_value, dtype=...)` makes it; no bytes for a map
/// without blocks (the operations refuse such a map first).
pub fn fill_bytes(map: &TensorMap, fill_value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    static ARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let py = fill_value.py();
    let Some(first) = map.blocks().first() else {
        return Ok(Vec::new());
    };
    let kwargs = PyDict::new(py);
    kwargs.set_item("dtype", first.dtype().native_descr())?;
    let scalar = ARRAY
        .import(py, "numpy", "array")?
        .call((fill_value,), Some(&kwargs))?;
    if scalar.getattr("ndim")?.extract::<usize>()? != 0 {
        return Err(invalid(
            py,
            format!(
                "`fill_value` must be a single scalar, got shape {}",
                scalar.getattr("shape")?.str()?
            ),
        ));
    }
    scalar.call_method0("tobytes")?.extract()
}

/// The dtype a `to(...)` call asks for, after checking
/// its arguments as metatensor-core does: positional arguments are a
/// device (a str) or a numeric dtype, each given once; the device must be
/// the CPU and the arrays numpy.
pub fn to_dtype<'py>(
    context: &str,
    args: &Bound<'py, PyTuple>,
    dtype: Option<Bound<'py, PyAny>>,
    device: Option<Bound<'py, PyAny>>,
    arrays: Option<&str>,
) -> PyResult<Option<DType>> {
    let py = args.py();
    let numpy = py.import("numpy")?;
    let mut dtype = dtype.filter(|d| !d.is_none());
    let mut device = device.filter(|d| !d.is_none());
    for positional in args.iter() {
        if positional.is_instance_of::<PyString>() || is_torch(&positional, "device")? {
            if device.is_some() {
                return Err(invalid(
                    py,
                    format!("can not give a device twice in {context}"),
                ));
            }
            device = Some(positional);
            continue;
        }
        let is_numeric = is_torch(&positional, "dtype")?
            || numpy
                .getattr("dtype")?
                .call1((&positional,))
                .ok()
                .map(|d| {
                    numpy
                        .getattr("issubdtype")?
                        .call1((d, numpy.getattr("number")?))
                })
                .transpose()?
                .is_some_and(|numeric| numeric.is_truthy().unwrap_or(false));
        if !is_numeric {
            return Err(wrong_type(
                py,
                format!("unexpected type in {context}: {}", type_name(&positional)),
            ));
        }
        if dtype.is_some() {
            return Err(invalid(
                py,
                format!("can not give a dtype twice in {context}"),
            ));
        }
        dtype = Some(positional);
    }
    if let Some(name) = arrays {
        super::torch::arrays_named(py, name)?;
    }
    if let Some(device) = device {
        let name = device.str()?.to_string();
        if name != "cpu" {
            return Err(invalid(
                py,
                format!("can not move numpy array to non-cpu device: {name}"),
            ));
        }
    }
    dtype
        .map(|d| {
            let d = numpy_of_torch_dtype(&d)?.unwrap_or(d);
            let dtype = numpy.getattr("dtype")?.call1((d,)).map_err(|error| {
                if error.is_instance_of::<pyo3::exceptions::PyTypeError>(py)
                    || error.is_instance_of::<pyo3::exceptions::PyValueError>(py)
                {
                    wrong_type(py, format!("not a dtype: {}", error.value(py)))
                } else {
                    error
                }
            })?;
            let descr: String = dtype.getattr("str")?.extract()?;
            match DType::parse_descr(&descr) {
                // the values come back in native byte order, whatever the
                // order asked for (as blockmap holds every array)
                Ok((dtype, _)) => Ok(dtype),
                Err(_) => Err(invalid(
                    py,
                    format!(
                        "unsupported dtype {}: blockmap holds numeric arrays",
                        dtype.str()?
                    ),
                )),
            }
        })
        .transpose()
}

/// The numpy dtype of a `torch.dtype` (`torch.float64` is `float64`), or
/// `None` for anything else.
fn numpy_of_torch_dtype<'py>(dtype: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    if !is_torch(dtype, "dtype")? {
        return Ok(None);
    }
    let torch = dtype.py().import("torch")?;
    let kwargs = pyo3::types::PyDict::new(dtype.py());
    kwargs.set_item("dtype", dtype)?;
    let empty = torch.getattr("empty")?.call((0,), Some(&kwargs))?;
    match empty.call_method0("numpy") {
        Ok(array) => Ok(Some(array.getattr("dtype")?)),
        Err(_) => Err(wrong_type(
            dtype.py(),
            format!(
                "unsupported dtype {}: blockmap holds numeric numpy dtypes",
                dtype.str()?
            ),
        )),
    }
}

/// `block` (and its gradients) with values of `dtype`: the same arrays
/// when they already are, otherwise converted by the core as numpy's
/// `astype` converts (no call into Python), or for torch tensors (`torch`)
/// by `tensor.to(dtype)`, which autograd follows.
pub fn block_to(block: &TensorBlock, dtype: Option<DType>, torch: bool) -> PyResult<TensorBlock> {
    let Some(dtype) = dtype.filter(|&dtype| dtype != block.dtype()) else {
        return Ok(block.clone());
    };
    Python::attach(|py| {
        if !torch {
            return Ok(py.detach(|| block.to_dtype(dtype))?);
        }
        let module = super::torch::torch(py)?;
        let empty = py
            .import("numpy")?
            .getattr("empty")?
            .call1((0, dtype.native_descr()))?;
        let target = module
            .call_method1("from_numpy", (empty,))?
            .getattr("dtype")?;
        block.map_arrays(&mut |array| {
            let tensor = super::torch::to_tensor(py, array)?;
            super::torch::from_tensor(&tensor.call_method1("to", (&target,))?, "values")
        })
    })
}
