//! Conversions from Python values that name no class of blockmap: label
//! names and values from their Python forms, Python indices and integers,
//! and the bridge to metatensor. (Objects of the classes to and from core
//! data: `objects.rs`; the Labels and entries of arguments: `labels.rs`
//! and `entry.rs`.)

use numpy::{
    PyArrayDescrMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use super::errors::{invalid, out_of_range, type_name, wrong_type};
use crate::array::Array;
use crate::dtype::DType;

/// Label `names` in any of the forms metatensor accepts (its
/// `_normalize_names_type`): one string (the empty string: no names), or
/// an iterable of strings; anything else is a type error.
pub fn extract_names(names: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(name) = names.cast::<PyString>() {
        let name = name.to_str()?;
        return Ok(if name.is_empty() {
            Vec::new()
        } else {
            vec![name.to_string()]
        });
    }
    let items = names.try_iter().map_err(|_| {
        wrong_type(
            names.py(),
            format!(
                "Labels names must be a sequence of strings, got {} instead",
                type_name(names)
            ),
        )
    })?;
    let mut result = Vec::new();
    for name in items {
        let name = name?;
        let name = name.cast::<PyString>().map_err(|_| {
            wrong_type(
                names.py(),
                format!(
                    "Labels names must be strings, got {} instead",
                    type_name(&name)
                ),
            )
        })?;
        result.push(name.to_str()?.to_string());
    }
    Ok(result)
}

/// The int32 `count x n_dims` values of new Labels, copied from `values`,
/// accepting and refusing what metatensor does: a numpy array (anything
/// else is a `ValueError`); any array of no entries (whatever its shape
/// and dtype); otherwise a 2-D array with one column per name (else a
/// `ValueError`) of integers or booleans (else a `TypeError`). Unlike
/// metatensor, values outside the int32 range are refused (`ValueError`)
/// instead of wrapped around.
pub fn extract_label_values(values: &Bound<'_, PyAny>, n_dims: usize) -> PyResult<Array> {
    let py = values.py();
    let array = values.cast::<PyUntypedArray>().map_err(|_| {
        invalid(
            py,
            format!(
                "`values` must be a numpy ndarray, got {}",
                type_name(values)
            ),
        )
    })?;
    let shape = array.shape();
    let Some(&count) = shape.first() else {
        return Err(wrong_type(
            py,
            "Labels values must be a 2-D array, got a 0-dimensional one",
        ));
    };
    if count == 0 {
        // no entries: any shape and dtype, as metatensor-core takes them
        // ((0,), (0, 5) for two names, (0, 1, 2), ...), gives values of
        // shape (0, len(names))
        return Ok(Array::zeros(DType::I4, vec![0, n_dims])?);
    }
    if shape.len() != 2 {
        return Err(invalid(
            py,
            format!("`values` must be a 2D array, got shape {shape:?}"),
        ));
    }
    if shape[1] != n_dims {
        return Err(invalid(
            py,
            format!(
                "`names` must have an entry for each column of the `values` array: \
                 {n_dims} names for values of shape {shape:?}"
            ),
        ));
    }
    let int32 = integers_as_int32(array, "Labels values", wrong_type)?;
    let int32: PyReadonlyArray2<'_, i32> = int32.extract()?;
    let view = int32.as_array();
    // copied by raw reads: numpy memory others may write (the aliasing
    // rule, buffer/mod.rs); the labels validate this copy
    let data = super::array::copy_int32_rows(&view)?;
    Ok(Array::from_slice(shape.to_vec(), &data)?)
}

/// The values of a new dimension of Labels with `count` entries
/// (`Labels.insert`): a 1-D numpy array of `count` integers or booleans, or
/// of floats without fractional part, in the int32 range. Anything else is
/// a `ValueError`, as in metatensor (which also truncates floats and wraps
/// large integers around, where blockmap refuses them).
pub fn extract_dimension_values(values: &Bound<'_, PyAny>, count: usize) -> PyResult<Vec<i32>> {
    let py = values.py();
    let array = values
        .cast::<PyUntypedArray>()
        .map_err(|_| invalid(py, "`values` must be a numpy ndarray"))?;
    if array.ndim() != 1 {
        return Err(invalid(py, "`values` must be a 1D array"));
    }
    if array.len() != count {
        return Err(invalid(
            py,
            format!(
                "the new `values` contains {} entries, but the Labels contains {count}",
                array.len()
            ),
        ));
    }
    let mut result = Vec::new();
    result
        .try_reserve_exact(count)
        .map_err(crate::error::Error::from)?;
    if array.dtype().kind() == b'f' {
        let floats = array.call_method1("astype", ("=f8",))?;
        let floats: PyReadonlyArray1<'_, f64> = floats.extract()?;
        for &value in floats.as_array() {
            let integer = float_as_int32(value).ok_or_else(|| {
                invalid(
                    py,
                    format!("the new `values` must be integers in the int32 range, got {value}"),
                )
            })?;
            result.push(integer);
        }
    } else {
        let int32 = integers_as_int32(array, "the new `values`", invalid)?;
        let int32: PyReadonlyArray1<'_, i32> = int32.extract()?;
        result.extend(int32.as_array().iter().copied());
    }
    Ok(result)
}

/// `value` when it is an integer in the int32 range.
fn float_as_int32(value: f64) -> Option<i32> {
    let in_range = (f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&value);
    // NaN is not in the range; the cast is exact for integers in it
    #[allow(clippy::cast_possible_truncation)]
    (in_range && value.fract() == 0.0).then_some(value as i32)
}

/// `array` as native int32 (a view when it already is): it must hold
/// integers or booleans (else `not_integers(message)`), in the int32 range
/// (else a `ValueError`).
fn integers_as_int32<'py>(
    array: &Bound<'py, PyUntypedArray>,
    what: &str,
    not_integers: fn(Python<'_>, String) -> PyErr,
) -> PyResult<Bound<'py, PyAny>> {
    let py = array.py();
    let dtype = array.dtype();
    let kind = dtype.kind();
    if !matches!(kind, b'b' | b'i' | b'u') {
        return Err(not_integers(
            py,
            format!(
                "{what} must be convertible to integers, got dtype {}",
                dtype.str()?
            ),
        ));
    }
    // only int32, uint32 and wider integers can be out of range
    if kind != b'b' && dtype.itemsize() >= 4 && array.len() > 0 {
        let (min, max): (i128, i128) = (
            array.call_method0("min")?.extract()?,
            array.call_method0("max")?.extract()?,
        );
        if min < i128::from(i32::MIN) || max > i128::from(i32::MAX) {
            return Err(invalid(
                py,
                format!("{what} must fit in int32, got values in [{min}, {max}]"),
            ));
        }
    }
    // `astype` only converts when needed
    let kwargs = PyDict::new(py);
    kwargs.set_item("copy", false)?;
    array.call_method("astype", ("=i4",), Some(&kwargs))
}

/// A Python integer used as an index: its value saturated to the range of
/// `isize` (such an index is out of range anyway), and, when it did not
/// fit, the number as given, which messages show.
#[derive(Clone, Debug)]
pub struct PyIndex {
    /// the index, saturated
    pub value: isize,
    /// the decimal digits of an index beyond `isize`
    given: Option<Box<str>>,
}

impl std::fmt::Display for PyIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.given {
            Some(given) => f.write_str(given),
            None => write!(f, "{}", self.value),
        }
    }
}

/// The integer index of `obj` (anything with `__index__`); `None` when
/// `obj` is not an integer.
pub fn saturating_index(obj: &Bound<'_, PyAny>) -> Option<PyIndex> {
    if let Ok(value) = obj.extract::<isize>() {
        return Some(PyIndex { value, given: None });
    }
    let index = obj.call_method0("__index__").ok()?;
    let value = if index.lt(0).ok()? {
        isize::MIN
    } else {
        isize::MAX
    };
    let given = index.str().ok().map(|s| s.to_string().into_boxed_str());
    Some(PyIndex { value, given })
}

/// Resolve a Python index (negative from the end) into `0..len`.
pub fn check_index(index: &PyIndex, len: usize) -> PyResult<usize> {
    let resolved = if index.value < 0 {
        index.value.checked_add_unsigned(len)
    } else {
        Some(index.value)
    };
    resolved
        .and_then(|i| usize::try_from(i).ok())
        .filter(|&i| i < len)
        .ok_or_else(|| {
            Python::attach(|py| {
                out_of_range(
                    py,
                    format!("index {index} is out of range for {len} entries"),
                )
            })
        })
}

/// A position before which a dimension is inserted, as `numpy.insert`
/// takes it: an integer in `-size..=size`, negative ones counted from the
/// end (else an `IndexError`; not an integer: a `TypeError`).
pub fn insert_index(index: &Bound<'_, PyAny>, size: usize) -> PyResult<usize> {
    let i = saturating_index(index).ok_or_else(|| {
        wrong_type(
            index.py(),
            format!(
                "'{}' object cannot be interpreted as an integer",
                type_name(index)
            ),
        )
    })?;
    let resolved = if i.value < 0 {
        i.value.checked_add_unsigned(size)
    } else {
        Some(i.value)
    };
    resolved
        .and_then(|i| usize::try_from(i).ok())
        .filter(|&i| i <= size)
        .ok_or_else(|| {
            out_of_range(
                index.py(),
                format!("index {i} is out of bounds for labels of {size} dimensions"),
            )
        })
}

/// An optional argument.
type Maybe<'py> = Option<Bound<'py, PyAny>>;

/// The `dtype` and `device` of a call `to(*args, dtype=None, device=None)`,
/// read as metatensor reads them (its `to_arguments_parse`): a positional
/// string is a device, a `numpy.dtype` or anything `numpy.dtype()` makes a
/// numeric dtype of is a dtype; each at most once (`ValueError`), anything
/// else is a `TypeError`. `None` (or `Some(None)`) when not given.
/// Whether `obj` is a `torch.<class>` (a `torch.device`, a `torch.dtype`),
/// without importing torch.
pub fn is_torch(obj: &Bound<'_, PyAny>, class: &str) -> PyResult<bool> {
    let type_ = obj.get_type();
    Ok(type_.module()?.to_str()? == "torch" && type_.name()?.to_str()? == class)
}

pub fn to_arguments<'py>(
    context: &str,
    args: &Bound<'py, PyTuple>,
    mut dtype: Maybe<'py>,
    mut device: Maybe<'py>,
) -> PyResult<(Maybe<'py>, Maybe<'py>)> {
    let py = args.py();
    let is_none = |value: &Maybe<'py>| value.as_ref().is_none_or(PyAnyMethods::is_none);
    let numpy = py.import("numpy")?;
    let dtype_class = numpy.getattr("dtype")?;
    for positional in args.iter() {
        let is_dtype =
            if positional.is_instance_of::<PyString>() || is_torch(&positional, "device")? {
                if !is_none(&device) {
                    return Err(invalid(
                        py,
                        format!("can not give a device twice in {context}"),
                    ));
                }
                device = Some(positional);
                continue;
            } else if positional.is_instance(&dtype_class)? || is_torch(&positional, "dtype")? {
                true
            } else {
                match dtype_class.call1((&positional,)) {
                    Ok(as_dtype) => numpy
                        .getattr("issubdtype")?
                        .call1((as_dtype, numpy.getattr("number")?))?
                        .is_truthy()?,
                    Err(error) if error.is_instance_of::<PyTypeError>(py) => false,
                    Err(error) => return Err(error),
                }
            };
        if !is_dtype {
            return Err(wrong_type(
                py,
                format!("unexpected type in {context}: {}", type_name(&positional)),
            ));
        }
        if !is_none(&dtype) {
            return Err(invalid(
                py,
                format!("can not give a dtype twice in {context}"),
            ));
        }
        dtype = Some(positional);
    }
    let dtype = if is_none(&dtype) { None } else { dtype };
    let device = if is_none(&device) { None } else { device };
    Ok((dtype, device))
}

/// An integer argument saturated to the range of `i64`: the numbers it
/// stands for (how many entries to print, a range's end) mean "all of
/// them" or "too many" beyond it, never another number, and a Python int
/// of any size is refused or taken by blockmap's own checks rather than
/// with an `OverflowError` from the conversion. Shown (`Display`) as the
/// number given.
#[derive(Clone, Debug)]
pub struct SaturatingInt(pub i64, Option<Box<str>>);

impl SaturatingInt {
    /// `value`, as given.
    pub const fn new(value: i64) -> Self {
        SaturatingInt(value, None)
    }
}

impl std::fmt::Display for SaturatingInt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.1 {
            Some(given) => f.write_str(given),
            None => write!(f, "{}", self.0),
        }
    }
}

impl FromPyObject<'_, '_> for SaturatingInt {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, '_, PyAny>) -> PyResult<Self> {
        match obj.extract::<i64>() {
            Ok(value) => Ok(SaturatingInt::new(value)),
            Err(error) if error.is_instance_of::<PyOverflowError>(obj.py()) => Ok(SaturatingInt(
                if obj.lt(0)? { i64::MIN } else { i64::MAX },
                obj.str().ok().map(|s| s.to_string().into_boxed_str()),
            )),
            Err(_) => Err(wrong_type(
                obj.py(),
                format!("expected an integer, got {}", type_name(&obj)),
            )),
        }
    }
}

/// ``blockmap.metatensor.<function>(obj)``: the bridges to metatensor-core's
/// classes live in Python, imported on first use.
pub fn bridge<'py>(obj: &Bound<'py, PyAny>, function: &str) -> PyResult<Bound<'py, PyAny>> {
    bridge_in(obj, "blockmap.metatensor", function)
}

/// ``<module>.<function>(obj)``, a bridge written in Python.
pub fn bridge_in<'py>(
    obj: &Bound<'py, PyAny>,
    module: &str,
    function: &str,
) -> PyResult<Bound<'py, PyAny>> {
    obj.py().import(module)?.getattr(function)?.call1((obj,))
}
