//! Torch tensors as values (`arrays="torch"`).
//!
//! A map, a block or Labels holds which array type it gives back: numpy
//! arrays or torch tensors ([`Arrays`]), as metatensor-core keeps the type
//! of the arrays it was given. The memory is the same either way: a block
//! made from a CPU tensor holds a buffer export of the tensor's memory
//! (through the numpy array `tensor.detach().numpy()`, which shares it)
//! together with the tensor itself ([`TorchOwner`]), so that `values` gives
//! back that very tensor, autograd graph included. Arrays blockmap made
//! (loaded, joined, received) are handed out as `torch.from_numpy` of a
//! view of their memory: no copy either.
//!
//! torch is never imported by blockmap: a tensor can only exist once the
//! user has imported torch, and a torch option imports it on first use.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use numpy::PyUntypedArray;

use super::array::{from_python, from_python_array, to_numpy};
use super::errors::{invalid, wrong_type, Class};
use crate::array::Array;
use crate::block::TensorBlock;
use crate::tensor::TensorMap;

/// The array type a map, a block or Labels gives back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Arrays {
    /// numpy arrays
    #[default]
    Numpy,
    /// torch tensors
    Torch,
}

impl Arrays {
    /// The name used by `to(arrays=...)`.
    pub fn name(self) -> &'static str {
        match self {
            Arrays::Numpy => "numpy",
            Arrays::Torch => "torch",
        }
    }
}

/// The array type an `arrays=` argument names, `current` when it is
/// `None`; torch is imported for `"torch"` (see [`torch`]).
pub fn arrays_arg(py: Python<'_>, arrays: Option<&str>, current: Arrays) -> PyResult<Arrays> {
    let Some(name) = arrays else {
        return Ok(current);
    };
    let arrays = arrays_named(py, name)?;
    if arrays == Arrays::Torch {
        torch(py)?;
    }
    Ok(arrays)
}

/// The array type `name` names, checked (every `arrays=` goes through
/// here), without importing torch: a `ValueError` (as metatensor's "unknown
/// array backend") listing the valid values for anything else.
pub fn arrays_named(py: Python<'_>, name: &str) -> PyResult<Arrays> {
    match name {
        "numpy" => Ok(Arrays::Numpy),
        "torch" => Ok(Arrays::Torch),
        other => Err(invalid(
            py,
            format!("unknown array backend: '{other}' (arrays must be 'numpy' or 'torch')"),
        )),
    }
}

static TORCH: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The torch module, imported on first use. When torch is not installed
/// (blockmap's extra `torch` installs it): Python's
/// `ModuleNotFoundError` (`name="torch"`), saying how to install it.
pub fn torch(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    TORCH
        .get_or_try_init(py, || match py.import("torch") {
            Ok(module) => Ok(module.unbind()),
            Err(error) if error.is_instance_of::<pyo3::exceptions::PyImportError>(py) => {
                Err(torch_missing(py, error))
            }
            Err(error) => Err(error),
        })
        .map(|module| module.bind(py))
}

/// The `torch.dtype` of `dtype` (`torch.float64` for F8): torch names
/// its types as numpy does.
pub fn torch_dtype(py: Python<'_>, dtype: crate::dtype::DType) -> PyResult<Bound<'_, PyAny>> {
    torch(py)?.getattr(dtype.name())
}

/// `torch.device("cpu")`, the device of every torch-backed array.
pub fn cpu_device(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    torch(py)?.getattr("device")?.call1(("cpu",))
}

/// The `dtype` property of an object giving `arrays`: a numpy dtype, or a
/// `torch.dtype` for torch-backed objects, as metatensor-core gives.
pub fn dtype_of(
    py: Python<'_>,
    dtype: crate::dtype::DType,
    arrays: Arrays,
) -> PyResult<Bound<'_, PyAny>> {
    match arrays {
        Arrays::Numpy => Ok(numpy::PyArrayDescr::new(py, dtype.native_descr())?.into_any()),
        Arrays::Torch => torch_dtype(py, dtype),
    }
}

/// The `device` property of an object giving `arrays`: the string `"cpu"`,
/// or `torch.device("cpu")` for torch-backed objects, as metatensor-core
/// gives.
pub fn device_of(py: Python<'_>, arrays: Arrays) -> PyResult<Bound<'_, PyAny>> {
    match arrays {
        Arrays::Numpy => Ok(pyo3::types::PyString::new(py, "cpu").into_any()),
        Arrays::Torch => cpu_device(py),
    }
}

/// The `ModuleNotFoundError` of a torch option without torch, as Python's
/// own (the class and `name` that code checking for a missing module
/// catches), saying how to install it; `cause` is the import's error.
fn torch_missing(py: Python<'_>, cause: PyErr) -> PyErr {
    // the hint of python/blockmap/_optional.py's install_hint
    let message = "arrays='torch' gives torch tensors, and torch is not installed: \
                   `pip install torch`, or blockmap's `torch` extra, given after its wheel \
                   or sdist: `pip install \"dist/blockmap-<version>-<tags>.whl[torch]\"` \
                   (README.md, \"Install\")";
    let made = (|| {
        let kwargs = PyDict::new(py);
        kwargs.set_item("name", "torch")?;
        let class = py.import("builtins")?.getattr("ModuleNotFoundError")?;
        class.call((message,), Some(&kwargs))
    })();
    match made {
        Ok(value) => {
            let error = PyErr::from_value(value);
            error.set_cause(py, Some(cause));
            error
        }
        Err(error) => error,
    }
}

/// Whether `obj` is a torch tensor (without importing torch: a tensor only
/// exists once torch is imported).
pub fn is_tensor(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = obj.py();
    let modules = py.import("sys")?.getattr("modules")?;
    let Some(torch) = modules.cast::<PyDict>()?.get_item("torch")? else {
        return Ok(false);
    };
    let Ok(tensor) = torch.getattr("Tensor") else {
        return Ok(false);
    };
    obj.is_instance(&tensor)
}

/// Values from Python and the array type they came as: a tensor is held as
/// [`from_tensor`] says, anything else as [`from_python`] does.
pub fn values_from_python(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<(Array, Arrays)> {
    if !obj.is_instance_of::<PyUntypedArray>() && is_tensor(obj)? {
        return Ok((from_tensor(obj, what)?, Arrays::Torch));
    }
    Ok((from_python(obj, what)?, Arrays::Numpy))
}

/// What keeps the memory of a block made from a tensor alive: the buffer
/// export of the numpy view of the tensor's memory, and the tensor, given
/// back by `values` while the array is exactly its memory and the tensor
/// still is that memory (see [`original`]).
#[derive(Debug)]
pub struct TorchOwner {
    /// the export of `tensor.detach().numpy()` (held for its memory)
    #[allow(dead_code)]
    export: pyo3::buffer::PyUntypedBuffer,
    tensor: Py<PyAny>,
    /// the tensor's `dtype` when it was taken (torch dtypes are singletons)
    dtype: Py<PyAny>,
    ptr: usize,
    shape: Vec<usize>,
    /// the tensor's `shape` (a `torch.Size`, immutable) when it was taken,
    /// compared with the current one without extracting it
    size: Py<PyAny>,
}

/// `torch.Tensor` and its unbound `data_ptr` and `is_contiguous`, fetched
/// once: `values` checks its tensor on every access (a training loop reads
/// it per block per batch), and looking the methods up by name each time
/// was most of that check's cost.
struct TensorMethods {
    class: Py<PyAny>,
    data_ptr: Py<PyAny>,
    is_contiguous: Py<PyAny>,
}

static TENSOR_METHODS: PyOnceLock<TensorMethods> = PyOnceLock::new();

impl TorchOwner {
    /// Whether the tensor still is the memory the block holds: the same
    /// data pointer, shape, dtype and C-contiguous strides. `t.set_(other)`,
    /// `t.data = other` or `t.resize_(...)` give the tensor other storage
    /// after the block took its memory; the block keeps the memory it
    /// checked against its labels.
    fn still_holds(&self, py: Python<'_>) -> PyResult<bool> {
        let tensor = self.tensor.bind(py);
        let methods = TENSOR_METHODS.get_or_try_init(py, || {
            let class = torch(py)?.getattr(pyo3::intern!(py, "Tensor"))?;
            Ok::<_, PyErr>(TensorMethods {
                data_ptr: class.getattr(pyo3::intern!(py, "data_ptr"))?.unbind(),
                is_contiguous: class.getattr(pyo3::intern!(py, "is_contiguous"))?.unbind(),
                class: class.unbind(),
            })
        })?;
        // a subclass may define these methods its own way: asked by name
        let exact = tensor.get_type().is(methods.class.bind(py));
        let ptr: usize = if exact {
            methods.data_ptr.bind(py).call1((tensor,))?
        } else {
            tensor.call_method0(pyo3::intern!(py, "data_ptr"))?
        }
        .extract()?;
        if ptr != self.ptr
            || !tensor
                .getattr(pyo3::intern!(py, "dtype"))?
                .is(self.dtype.bind(py))
        {
            return Ok(false);
        }
        if !tensor
            .getattr(pyo3::intern!(py, "shape"))?
            .eq(self.size.bind(py))?
        {
            return Ok(false);
        }
        if exact {
            methods.is_contiguous.bind(py).call1((tensor,))?
        } else {
            tensor.call_method0(pyo3::intern!(py, "is_contiguous"))?
        }
        .is_truthy()
    }

    /// The tensor held (visited by the garbage collector: `gc.rs`).
    pub fn tensor(&self) -> &Py<PyAny> {
        &self.tensor
    }
}

/// Bring a CPU tensor into blockmap: its memory is held (no copy) when it
/// is contiguous and aligned; otherwise `tensor.contiguous()` or
/// `tensor.clone()` makes such a tensor first (one copy, which autograd
/// follows). A tensor on another device, of a dtype blockmap does not
/// hold, or sparse, is refused.
pub fn from_tensor(tensor: &Bound<'_, PyAny>, what: &str) -> PyResult<Array> {
    let py = tensor.py();
    let device: String = tensor.getattr("device")?.getattr("type")?.extract()?;
    if device != "cpu" {
        return Err(invalid(
            py,
            format!(
                "{what}: the tensor is on the '{}' device, blockmap holds CPU memory: \
                 move it with `.cpu()` first",
                tensor.getattr("device")?.str()?
            ),
        ));
    }
    let layout = tensor.getattr("layout")?.str()?.to_string();
    if layout != "torch.strided" {
        return Err(invalid(
            py,
            format!("{what}: {layout} tensors are not supported, only dense (strided) ones"),
        ));
    }
    if tensor.getattr("dim")?.call0()?.extract::<usize>()? == 0 {
        return Err(invalid(
            py,
            format!("{what}: got a 0-dimensional tensor (a scalar)"),
        ));
    }
    let mut tensor = tensor.clone();
    if tensor.call_method0("is_conj")?.is_truthy()? || tensor.call_method0("is_neg")?.is_truthy()? {
        tensor = tensor
            .call_method0("resolve_conj")?
            .call_method0("resolve_neg")?;
    }
    if !tensor.call_method0("is_contiguous")?.is_truthy()? {
        tensor = tensor.call_method0("contiguous")?;
    }
    let element: usize = tensor.call_method0("element_size")?.extract()?;
    let ptr: usize = tensor.call_method0("data_ptr")?.extract()?;
    if element != 0 && !ptr.is_multiple_of(element) {
        tensor = tensor.call_method0("clone")?;
    }
    let detached = tensor.call_method0("detach")?;
    let view = detached.call_method0("numpy").map_err(|error| {
        wrong_type(
            py,
            format!(
                "{what}: unsupported dtype {}: {}",
                tensor
                    .getattr("dtype")
                    .and_then(|d| d.str())
                    .map_or_else(|_| "?".into(), |s| s.to_string()),
                error.value(py)
            ),
        )
    })?;
    let dtype = tensor.getattr("dtype")?.unbind();
    let size = tensor.getattr("shape")?.unbind();
    let tensor = tensor.unbind();
    from_python_array(&view, what, |export, shape| {
        Box::new(TorchOwner {
            ptr: export.buf_ptr() as usize,
            shape: shape.to_vec(),
            size,
            export,
            tensor,
            dtype,
        })
    })
}

/// The tensor a block gives back for `array`: the tensor it was made from
/// when the array is exactly that tensor's memory and the tensor still is
/// (see [`TorchOwner::still_holds`]), otherwise `torch.from_numpy` of a
/// view of the memory (writable when the memory is; torch warns once when
/// it is not, as for any read-only array). A tensor whose storage was
/// swapped after the block took it is thus never given back: the block
/// gives, saves, pickles, copies and joins the memory it holds, which its
/// labels describe.
pub fn to_tensor<'py>(py: Python<'py>, array: &Array) -> PyResult<Bound<'py, PyAny>> {
    if let Some(owner) = original(py, array)? {
        return Ok(owner.tensor.bind(py).clone());
    }
    let view = to_numpy(py, array)?;
    torch(py)?.call_method1("from_numpy", (view,))
}

/// The owner of `array` when the array is exactly the tensor it holds, and
/// the tensor still is that memory.
fn original<'a>(py: Python<'_>, array: &'a Array) -> PyResult<Option<&'a TorchOwner>> {
    let Some(owner) = array
        .buffer()
        .foreign_owner::<TorchOwner>()
        .filter(|owner| {
            owner.ptr == array.buffer().as_ptr() as usize && owner.shape == array.shape()
        })
    else {
        return Ok(None);
    };
    Ok(owner.still_holds(py)?.then_some(owner))
}

/// `values` of the array type `arrays`.
pub fn to_python_array<'py>(
    py: Python<'py>,
    array: &Array,
    arrays: Arrays,
) -> PyResult<Bound<'py, PyAny>> {
    match arrays {
        Arrays::Numpy => to_numpy(py, array),
        Arrays::Torch => to_tensor(py, array),
    }
}

/// Label values as a torch int32 tensor: a copy (the memory of Labels is
/// never reachable by writes).
pub fn label_tensor<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let copy = values.call_method0("copy")?;
    torch(py)?.call_method1("from_numpy", (copy,))
}

/// Every array of `block` (values, then each gradient, recursively, in
/// parameter order), the order [`requires_grad`] and [`with_leaves`] use.
fn arrays_of<'a>(block: &'a TensorBlock, out: &mut Vec<&'a Array>) {
    out.push(block.values());
    for gradient in block.gradients().values() {
        arrays_of(gradient, out);
    }
}

/// The positions (see [`arrays_of`]) of the arrays of `blocks` whose tensor
/// requires grad; a non-leaf tensor that requires grad is refused, as torch
/// refuses to send one to another process (`rule` says where).
pub fn requires_grad(py: Python<'_>, blocks: &[TensorBlock], rule: &str) -> PyResult<Vec<usize>> {
    let mut arrays = Vec::new();
    for block in blocks {
        arrays_of(block, &mut arrays);
    }
    let mut flagged = Vec::new();
    for (i, array) in arrays.iter().enumerate() {
        let Some(owner) = original(py, array)? else {
            continue;
        };
        let tensor = owner.tensor.bind(py);
        if !tensor.getattr("requires_grad")?.is_truthy()? {
            continue;
        }
        if !tensor.getattr("is_leaf")?.is_truthy()? {
            return Err(Class::BlockMapRuntimeError.err(py, rule.to_string()));
        }
        flagged.push(i);
    }
    Ok(flagged)
}

/// torch's rule for pickling (`torch.multiprocessing`'s reducer).
pub const PICKLE_RULE: &str = "Cowardly refusing to serialize non-leaf tensor which \
    requires_grad, since autograd does not support crossing process boundaries. If you just \
    want to transfer the data, call detach() on the tensor before serializing (e.g., putting \
    it on the queue).";

/// `block` with the arrays at `flagged` (positions from `*next` on, see
/// [`arrays_of`]) replaced by what `make` gives for them (their position
/// and array).
fn block_replacing(
    block: &TensorBlock,
    flagged: &[usize],
    next: &mut usize,
    make: &mut dyn FnMut(usize, &Array) -> PyResult<Array>,
) -> PyResult<TensorBlock> {
    block.map_arrays(&mut |array| {
        let position = *next;
        *next += 1;
        if flagged.contains(&position) {
            make(position, array)
        } else {
            Ok(array.clone())
        }
    })
}

/// `blocks` with the arrays at `flagged` made leaf tensors requiring grad.
pub fn with_leaves(
    py: Python<'_>,
    blocks: &[TensorBlock],
    flagged: &[usize],
) -> PyResult<Vec<TensorBlock>> {
    let mut next = 0;
    let mut leaf = |_: usize, array: &Array| {
        let tensor = to_tensor(py, array)?;
        let leaf = tensor.call_method0("detach")?;
        leaf.call_method1("requires_grad_", (true,))?;
        from_tensor(&leaf, "values")
    };
    blocks
        .iter()
        .map(|block| block_replacing(block, flagged, &mut next, &mut leaf))
        .collect()
}

/// The positions (see [`arrays_of`]) of the arrays of `blocks` whose tensor
/// requires grad, leaf or not.
pub fn grad_positions(py: Python<'_>, blocks: &[TensorBlock]) -> PyResult<Vec<usize>> {
    let mut arrays = Vec::new();
    for block in blocks {
        arrays_of(block, &mut arrays);
    }
    let mut flagged = Vec::new();
    for (i, array) in arrays.iter().enumerate() {
        if let Some(owner) = original(py, array)? {
            if owner
                .tensor
                .bind(py)
                .getattr("requires_grad")?
                .is_truthy()?
            {
                flagged.push(i);
            }
        }
    }
    Ok(flagged)
}

/// Deep copies of `blocks`, as metatensor-core makes them of torch arrays:
/// the tensors that require grad (leaves or not) copied by `clone()`, so
/// that the copies stay in the autograd graph, every other array copied in
/// Rust with the GIL released.
pub fn deep_copies(py: Python<'_>, blocks: &[TensorBlock]) -> PyResult<Vec<TensorBlock>> {
    let flagged = grad_positions(py, blocks)?;
    let mut arrays = Vec::new();
    for block in blocks {
        arrays_of(block, &mut arrays);
    }
    let mut clone = |position: usize, _: &Array| {
        let tensor = to_tensor(py, arrays[position])?;
        from_tensor(&tensor.call_method0("clone")?, "values")
    };
    let mut next = 0;
    blocks
        .iter()
        .map(|block| {
            // the arrays that are cloned are shared, not copied, here
            let copy = super::gil::detached(py, || block.deep_copy_except(&flagged, next))?;
            block_replacing(&copy, &flagged, &mut next, &mut clone)
        })
        .collect()
}

/// `map` with the arrays at `flagged` made leaf tensors requiring grad.
pub fn map_with_leaves(py: Python<'_>, map: &TensorMap, flagged: &[usize]) -> PyResult<TensorMap> {
    if flagged.is_empty() {
        return Ok(map.clone());
    }
    let blocks = with_leaves(py, map.blocks(), flagged)?;
    let mut rebuilt = TensorMap::new(map.keys().clone(), blocks)?;
    for (key, value) in map.info() {
        rebuilt.set_info(key.clone(), value.clone())?;
    }
    Ok(rebuilt)
}

/// `(reconstructor, args)` turning the unpickled numpy-backed twin of a
/// torch-backed object back into a torch-backed one.
pub fn reduce_as_torch<'py>(
    py: Python<'py>,
    twin: Bound<'py, PyAny>,
    flagged: Vec<usize>,
) -> PyResult<Bound<'py, PyTuple>> {
    let rebuild = py.import("blockmap._blockmap")?.getattr("_as_torch")?;
    PyTuple::new(
        py,
        [
            rebuild,
            PyTuple::new(py, [twin, flagged.into_pyobject(py)?.into_any()])?.into_any(),
        ],
    )
}
