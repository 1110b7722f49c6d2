//! The methods of `blockmap.TensorBlock`.

use pyo3::exceptions::PyAttributeError;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyMemoryView, PyTuple};
use pyo3::PyTraverseError;

use super::cell::SwapCell;
use super::errors::{invalid, type_name, wrong_type};
use super::file::{FileArg, MmapArg, UseNumpy};
use super::labels::{extract_labels, PyLabels};
use super::ops::{block_to, to_dtype};
use super::torch::{
    arrays_arg, deep_copies, reduce_as_torch, requires_grad, to_python_array, values_from_python,
    Arrays, PICKLE_RULE,
};
use crate::arc::ForkArc;
use crate::block::TensorBlock;
use crate::data::{Data, DataRef, Kind};
use crate::labels::Labels;

/// Where a Python block object comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// built by the user (or a copy): may get gradients
    Standalone,
    /// a block of a `TensorMap`
    MapBlock,
    /// a gradient of another block
    Gradient,
}

/// A labeled N-d array with axes ``[samples, *components, properties]``.
///
/// ``TensorBlock(values, samples, components, properties)``. ``values`` is
/// kept without a copy when it is a C-contiguous, aligned, native-byte-order
/// numpy array: the block holds a buffer export of it, and in-place edits
/// through either side are seen by both. Any other input (non-contiguous,
/// misaligned, big-endian, a list) is copied once into such an array.
#[pyclass(name = "TensorBlock", module = "blockmap", frozen, weakref)]
#[derive(Debug)]
pub struct PyTensorBlock {
    pub block: SwapCell<TensorBlock>,
    pub origin: Origin,
    /// for a gradient, the parameters leading to it from the block it was
    /// taken from (`["positions", "cell"]` for a gradient of a gradient)
    pub parameters: Vec<String>,
    /// what `values` (and the labels' values) are: numpy arrays or torch
    /// tensors
    pub arrays: Arrays,
}

impl PyTensorBlock {
    /// A Python block over `block`, coming from `origin`.
    pub fn new_view(block: TensorBlock, origin: Origin) -> Self {
        PyTensorBlock {
            block: SwapCell::new(block),
            origin,
            parameters: Vec::new(),
            arrays: Arrays::Numpy,
        }
    }

    /// A Python block over a gradient, reached through `parameters`.
    pub fn gradient_view(block: TensorBlock, parameters: Vec<String>) -> Self {
        PyTensorBlock {
            block: SwapCell::new(block),
            origin: Origin::Gradient,
            parameters,
            arrays: Arrays::Numpy,
        }
    }

    /// The same block, giving arrays as `arrays`.
    #[must_use]
    pub fn with_arrays(mut self, arrays: Arrays) -> Self {
        self.arrays = arrays;
        self
    }

    /// Labels of this block, giving values as its arrays.
    pub fn labels(&self, labels: &Labels) -> PyLabels {
        PyLabels::with_arrays(labels.clone(), self.arrays)
    }

    /// The block's current value.
    pub fn block(&self) -> ForkArc<TensorBlock> {
        self.block.get()
    }
}

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyTensorBlock {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.traverse(&visit)
    }

    fn __clear__(&self) {
        self.clear();
    }

    #[new]
    fn new(
        values: &Bound<'_, PyAny>,
        samples: &Bound<'_, PyAny>,
        components: &Bound<'_, PyAny>,
        properties: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let py = values.py();
        let samples = extract_labels(samples, "samples")?;
        let properties = extract_labels(properties, "properties")?;
        if components.is_instance_of::<PyLabels>() {
            return Err(wrong_type(
                py,
                "components must be a list of Labels, got a single Labels",
            ));
        }
        let components = components
            .try_iter()
            .map_err(|_| {
                wrong_type(
                    py,
                    format!(
                        "components must be a list of Labels, got {}",
                        type_name(components)
                    ),
                )
            })?
            .enumerate()
            .map(|(i, c)| extract_labels(&c?, &format!("component {i}")))
            .collect::<PyResult<Vec<_>>>()?;
        let (values, arrays) = values_from_python(values, "values")?;
        let block = TensorBlock::new(values, samples, components, properties)?;
        Ok(PyTensorBlock::new_view(block, Origin::Standalone).with_arrays(arrays))
    }

    /// The values: a numpy array viewing the block's memory (no copy),
    /// writable when that memory is; a torch tensor over the same memory
    /// for a block of torch tensors (the very tensor the block was made
    /// from, autograd graph included, while the block holds its memory).
    #[getter]
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python_array(py, self.block().values(), self.arrays)
    }

    /// The array type of the values: ``"numpy"`` or ``"torch"``.
    #[getter]
    fn _arrays(&self) -> &'static str {
        self.arrays.name()
    }

    /// Labels of the first axis.
    #[getter]
    fn samples(&self) -> PyLabels {
        self.labels(self.block().samples())
    }

    /// Labels of the middle axes, one dimension each.
    #[getter]
    fn components(&self) -> Vec<PyLabels> {
        self.block()
            .components()
            .iter()
            .map(|c| self.labels(c))
            .collect()
    }

    /// Labels of the last axis.
    #[getter]
    fn properties(&self) -> PyLabels {
        self.labels(self.block().properties())
    }

    /// The values cannot be replaced (as in metatensor-core): write into
    /// them with ``block.values[:] = new_values``.
    #[setter]
    #[allow(clippy::unused_self)] // a Python setter takes the object
    fn set_values(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let _ = value;
        Err(PyAttributeError::new_err(
            "Direct assignment to `values` is not possible. Please use \
             block.values[:] = new_values instead.",
        ))
    }

    /// Number of samples (the length of the values).
    fn __len__(&self) -> usize {
        self.block().values().shape()[0]
    }

    /// The device of every array in the block: ``"cpu"``, or
    /// ``torch.device("cpu")`` when the values are torch tensors (as
    /// metatensor-core gives it).
    #[getter]
    fn device<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        super::torch::device_of(py, self.arrays)
    }

    /// Whether this block is a view inside a :class:`TensorMap` or another
    /// block (a block of a map, or a gradient).
    #[getter]
    fn is_view(&self) -> bool {
        self.origin != Origin::Standalone
    }

    /// The block with every array of ``dtype``, given as ``arrays`` (see
    /// :meth:`TensorMap.to`).
    ///
    /// Parameters
    /// ----------
    /// *args : str, torch.device or dtype
    ///     A device or a dtype, given positionally as in metatensor-core.
    /// dtype : numpy or torch dtype, optional
    ///     The dtype of every array (arrays already of it are shared).
    /// device : str or torch.device, optional
    ///     Only ``"cpu"``.
    /// arrays : {"numpy", "torch"}, optional
    ///     The array type of the result (numpy arrays by default); torch
    ///     tensors share the same memory.
    /// non_blocking : bool, optional
    ///     torch's argument, accepted (nothing is copied across devices).
    ///
    /// Returns
    /// -------
    /// TensorBlock
    ///     The converted block.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If an argument has an invalid value.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    /// ModuleNotFoundError
    ///     If ``arrays="torch"`` and torch is not installed.
    #[pyo3(signature = (*args, dtype = None, device = None, arrays = None, non_blocking = false))]
    fn to<'py>(
        &self,
        args: &Bound<'py, PyTuple>,
        dtype: Option<Bound<'py, PyAny>>,
        device: Option<Bound<'py, PyAny>>,
        arrays: Option<&str>,
        non_blocking: bool,
    ) -> PyResult<Self> {
        let _ = non_blocking;
        let dtype = to_dtype("`TensorBlock.to`", args, dtype, device, arrays)?;
        let arrays = arrays_arg(args.py(), arrays, self.arrays)?;
        let block = block_to(&self.block(), dtype, arrays == Arrays::Torch)?;
        Ok(PyTensorBlock::new_view(block, Origin::Standalone).with_arrays(arrays))
    }

    /// Shape of the values.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.block().values().shape())
    }

    /// dtype of the values: a numpy dtype, or a ``torch.dtype`` when the
    /// values are torch tensors (as metatensor-core gives it).
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        super::torch::dtype_of(py, self.block().dtype(), self.arrays)
    }

    /// Bytes of array data in this block, its labels and its gradients.
    #[getter]
    fn nbytes(&self) -> usize {
        self.block().nbytes()
    }

    /// Move the block's values (and its gradients' values) into one shared
    /// memory segment, in place, and return the block (see
    /// ``TensorMap.share_memory``). For a block taken from a map, only this
    /// block object changes, not the map.
    ///
    /// Returns
    /// -------
    /// TensorBlock
    ///     This block.
    ///
    /// Raises
    /// ------
    /// BlockMapIOError
    ///     If the shared-memory segment cannot be made.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn share_memory<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        let this = slf.get();
        super::shm::share_in_place(
            slf.py(),
            &this.block,
            |block| DataRef::Block(block),
            Data::into_block,
        )?;
        Ok(slf.clone())
    }

    /// Whether all of the block's data lives in shared memory.
    ///
    /// Returns
    /// -------
    /// bool
    ///     Whether every array lives in shared memory.
    fn is_shared(&self) -> PyResult<bool> {
        super::shm::is_shared(DataRef::Block(&self.block()))
    }

    /// Add the gradient with respect to ``parameter``.
    ///
    /// The gradient's first sample dimension is ``sample`` (an index into
    /// this block's samples), its components are extra leading components
    /// followed by this block's, its properties and dtype are this block's.
    /// The gradient block stays usable and shares its memory with this one.
    ///
    /// Parameters
    /// ----------
    /// parameter : str
    ///     The gradient's name.
    /// gradient : TensorBlock
    ///     The gradient block.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If the gradient breaks the rules (docs/design.md, "Validation"), or
    ///     this block is a view inside a map.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn add_gradient(
        slf: &Bound<'_, Self>,
        parameter: &str,
        gradient: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = slf.py();
        let gradient = gradient.cast::<PyTensorBlock>().map_err(|_| {
            wrong_type(
                py,
                format!(
                    "a gradient must be a TensorBlock, got {}",
                    type_name(gradient)
                ),
            )
        })?;
        // clone the gradient before borrowing `slf` mutably: they may be
        // the same object
        let gradient = TensorBlock::clone(&gradient.get().block());
        let this = slf.get();
        match this.origin {
            Origin::Standalone => {}
            Origin::MapBlock => {
                return Err(invalid(
                    py,
                    "cannot add a gradient to a block of a TensorMap: all blocks of a map \
                     have the same gradients; add gradients before building the map",
                ))
            }
            Origin::Gradient => {
                return Err(invalid(
                    py,
                    "cannot add a gradient to a block obtained with gradient(): add it to \
                     the gradient block before adding that to its parent",
                ))
            }
        }
        Ok(this
            .block
            .modify(|block| block.add_gradient(parameter, gradient))?)
    }

    /// The gradient with respect to ``parameter``.
    ///
    /// Parameters
    /// ----------
    /// parameter : str
    ///     The gradient's name.
    ///
    /// Returns
    /// -------
    /// TensorBlock
    ///     The gradient, a view of this block's.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If there is no such gradient.
    fn gradient(&self, parameter: &str) -> PyResult<Self> {
        let gradient = self.block().gradient(parameter)?.clone();
        Ok(self.of_gradient(gradient, parameter))
    }

    /// Parameters of the gradients, sorted.
    ///
    /// Returns
    /// -------
    /// list of str
    ///     The gradients' names.
    fn gradients_list(&self) -> Vec<String> {
        self.block().gradients().keys().cloned().collect()
    }

    /// An iterator over ``(parameter, gradient block)`` pairs, sorted by
    /// parameter.
    ///
    /// Returns
    /// -------
    /// iterator of (str, TensorBlock)
    ///     The gradients and their names.
    ///
    /// Raises
    /// ------
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn gradients<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let pairs: Vec<(String, Self)> = self
            .block()
            .gradients()
            .iter()
            .map(|(p, g)| (p.clone(), self.of_gradient(g.clone(), p)))
            .collect();
        Ok(PyList::new(py, pairs)?.try_iter()?.into_any())
    }

    /// Whether there is a gradient with respect to ``parameter``.
    ///
    /// Parameters
    /// ----------
    /// parameter : str
    ///     A gradient's name.
    ///
    /// Returns
    /// -------
    /// bool
    ///     Whether the block has it.
    fn has_gradient(&self, parameter: &str) -> bool {
        self.block().gradients().contains_key(parameter)
    }

    /// Pickle support: out-of-band buffers over this object's memory with
    /// protocol 5, the ``.mts`` archive in a bytes object before (see
    /// ``docs/pickle.md``).
    /// A block of torch tensors pickles as its numpy twin (the same
    /// memory) and the positions of the leaf tensors requiring grad; a
    /// non-leaf tensor requiring grad is refused, as torch refuses it.
    fn __reduce_ex__<'py>(&self, py: Python<'py>, protocol: i64) -> PyResult<Bound<'py, PyTuple>> {
        let block = self.block();
        if self.arrays == Arrays::Torch {
            let flagged = requires_grad(py, std::slice::from_ref(&*block), PICKLE_RULE)?;
            let twin = PyTensorBlock::new_view(TensorBlock::clone(&block), Origin::Standalone);
            return reduce_as_torch(py, Bound::new(py, twin)?.into_any(), flagged);
        }
        super::pickle::reduce(py, DataRef::Block(&block), protocol)
    }

    /// The same block as metatensor-torch's ``TensorBlock`` (see
    /// :func:`blockmap.metatensor_torch.to_metatensor_torch`): values are
    /// shared, labels copied once. Needs metatensor-torch installed.
    ///
    /// Returns
    /// -------
    /// metatensor.torch.TensorBlock
    ///     The same block.
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

    /// The same `TensorBlock` as metatensor-core's ``metatensor.TensorBlock`` (see
    /// :func:`blockmap.metatensor.to_metatensor`): arrays are shared, labels
    /// are copied once. Needs metatensor-core installed.
    ///
    /// Returns
    /// -------
    /// metatensor.TensorBlock
    ///     The same block.
    ///
    /// Raises
    /// ------
    /// ModuleNotFoundError
    ///     If metatensor-core is not installed.
    fn to_metatensor<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        super::convert::bridge(slf.as_any(), "to_metatensor")
    }

    /// Save to a path or binary file object (see ``blockmap.save``).
    ///
    /// Parameters
    /// ----------
    /// file : str, os.PathLike or binary file object
    ///     The path (``.mts`` appended when missing) or a writable file object.
    /// use_numpy : bool, optional
    ///     metatensor-core's argument, accepted and ignored.
    /// durable : bool, optional
    ///     For a path: sync the data and the rename to disk before returning
    ///     (the default).
    ///
    /// Raises
    /// ------
    /// BlockMapIOError
    ///     If the operating system refuses the write, the file object fails or
    ///     holds data after its position that it cannot cut off, or mapped
    ///     data was lost (its file truncated by another program).
    /// ValidationError
    ///     If an argument has an invalid value.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    #[pyo3(signature = (file, use_numpy = UseNumpy, *, durable = true), text_signature = "($self, file, use_numpy=False, *, durable=True)")]
    fn save(
        &self,
        py: Python<'_>,
        file: FileArg<'_>,
        use_numpy: UseNumpy,
        durable: bool,
    ) -> PyResult<()> {
        let _ = use_numpy;
        super::io::save(py, file, DataRef::Block(&self.block()), durable)
    }

    /// Load a :class:`TensorBlock` from a path or binary file object (see ``blockmap.load``).
    ///
    /// Parameters
    /// ----------
    /// file : str, os.PathLike or binary file object
    ///     The path, or a readable binary file object.
    /// use_numpy : bool, optional
    ///     metatensor-core's argument, accepted and ignored.
    /// mmap : bool or {"r", "c"}, optional
    ///     Map the file instead of reading it (paths only): read-only views
    ///     (``True`` or ``"r"``) or copy-on-write views (``"c"``).
    /// arrays : {"numpy", "torch"}, optional
    ///     The array type of the result (numpy arrays by default); torch
    ///     tensors share the same memory.
    ///
    /// Returns
    /// -------
    /// TensorBlock
    ///     The block.
    ///
    /// Raises
    /// ------
    /// MissingFileError
    ///     If ``file`` is a path that does not exist.
    /// BlockMapIOError
    ///     If the operating system refuses the read, or the file object fails.
    /// FormatError
    ///     If the data is not a valid archive of the expected kind.
    /// ValidationError
    ///     If an argument has an invalid value.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    /// ModuleNotFoundError
    ///     If ``arrays="torch"`` and torch is not installed.
    #[staticmethod]
    #[pyo3(signature = (file, use_numpy = UseNumpy, *, mmap = MmapArg::default(), arrays = None), text_signature = "(file, use_numpy=False, *, mmap=False, arrays=None)")]
    fn load(
        py: Python<'_>,
        file: FileArg<'_>,
        use_numpy: UseNumpy,
        mmap: MmapArg,
        arrays: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let _ = use_numpy;
        let arrays = arrays_arg(py, arrays, Arrays::Numpy)?;
        let block = super::io::load(py, file, Kind::Block, mmap, None)?.into_block()?;
        let block = PyTensorBlock::new_view(block, Origin::Standalone).with_arrays(arrays);
        Ok(Py::new(py, block)?.into_any())
    }

    /// The ``.mts`` data, in a memoryview (see ``blockmap.save_buffer``).
    ///
    /// Parameters
    /// ----------
    /// use_numpy : bool, optional
    ///     metatensor-core's argument, accepted and ignored.
    ///
    /// Returns
    /// -------
    /// memoryview
    ///     The ``.mts`` archive.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If an argument has an invalid value.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    /// BlockMapIOError
    ///     If mapped data was lost (its file truncated by another program).
    #[pyo3(signature = (use_numpy = UseNumpy), text_signature = "($self, use_numpy=False)")]
    fn save_buffer<'py>(
        &self,
        py: Python<'py>,
        use_numpy: UseNumpy,
    ) -> PyResult<Bound<'py, PyMemoryView>> {
        let _ = use_numpy;
        super::io::save_buffer(py, DataRef::Block(&self.block()))
    }

    /// Load from a bytes-like object (see ``blockmap.load_block_buffer``).
    ///
    /// Parameters
    /// ----------
    /// buffer : bytes-like object
    ///     The archive: ``bytes``, ``bytearray``, ``memoryview``, a numpy array, ...
    /// use_numpy : bool, optional
    ///     metatensor-core's argument, accepted and ignored.
    /// arrays : {"numpy", "torch"}, optional
    ///     The array type of the result (numpy arrays by default); torch
    ///     tensors share the same memory.
    ///
    /// Returns
    /// -------
    /// TensorBlock
    ///     The block.
    ///
    /// Raises
    /// ------
    /// FormatError
    ///     If the data is not a valid archive of the expected kind.
    /// ValidationError
    ///     If an argument has an invalid value.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    /// ModuleNotFoundError
    ///     If ``arrays="torch"`` and torch is not installed.
    #[staticmethod]
    #[pyo3(signature = (buffer, use_numpy = UseNumpy, *, arrays = None), text_signature = "(buffer, use_numpy=False, *, arrays=None)")]
    fn load_buffer(
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        use_numpy: UseNumpy,
        arrays: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let _ = use_numpy;
        let arrays = arrays_arg(py, arrays, Arrays::Numpy)?;
        let block = super::io::load_buffer(py, buffer, Kind::Block, None)?.into_block()?;
        let block = PyTensorBlock::new_view(block, Origin::Standalone).with_arrays(arrays);
        Ok(Py::new(py, block)?.into_any())
    }

    /// A copy of the block, which may get gradients: with ``deep`` (the
    /// default) values and gradients are in new memory; otherwise they are
    /// shared with this block.
    ///
    /// Parameters
    /// ----------
    /// deep : bool, optional
    ///     Copy the arrays (the default) or share them.
    ///
    /// Returns
    /// -------
    /// TensorBlock
    ///     The copy.
    ///
    /// Raises
    /// ------
    /// BlockMapIOError
    ///     If mapped data was lost (its file truncated by another program).
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    #[pyo3(signature = (deep = true))]
    fn copy(&self, py: Python<'_>, deep: bool) -> PyResult<Self> {
        if !deep {
            return Ok(self.__copy__());
        }
        let block = self.block();
        let copy = match self.arrays {
            Arrays::Torch => deep_copies(py, std::slice::from_ref(&*block))?.remove(0),
            Arrays::Numpy => super::gil::detached(py, || block.deep_copy())?,
        };
        Ok(PyTensorBlock::new_view(copy, Origin::Standalone).with_arrays(self.arrays))
    }

    /// ``copy.deepcopy(block)``: the same as :meth:`copy`.
    #[pyo3(signature = (memo, /))]
    fn __deepcopy__(&self, py: Python<'_>, memo: &Bound<'_, PyAny>) -> PyResult<Self> {
        let _ = memo;
        self.copy(py, true)
    }

    /// ``copy.copy(block)``: a new block object sharing this one's memory.
    fn __copy__(&self) -> Self {
        PyTensorBlock::new_view(TensorBlock::clone(&self.block()), Origin::Standalone)
            .with_arrays(self.arrays)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.cast::<PyTensorBlock>() {
            Ok(other) => *self.block() == *other.get().block(),
            Err(_) => false,
        }
    }

    fn __ne__(&self, other: &Bound<'_, PyAny>) -> bool {
        !self.__eq__(other)
    }

    /// metatensor's layout: shape, label names and gradients.
    fn __repr__(&self) -> String {
        let block = self.block();
        format!(
            "{}\n    {}",
            super::repr::block(&block, &self.parameters),
            super::repr::arrays(std::iter::once(&*block), self.arrays)
        )
    }

    /// metatensor's layout (``print(block)``), as metatensor-core's repr.
    fn __str__(&self) -> String {
        super::repr::block(&self.block(), &self.parameters)
    }
}

impl PyTensorBlock {
    /// The gradient `gradient` of this block, with respect to `parameter`.
    fn of_gradient(&self, gradient: TensorBlock, parameter: &str) -> Self {
        let mut parameters = self.parameters.clone();
        parameters.push(parameter.to_string());
        PyTensorBlock::gradient_view(gradient, parameters).with_arrays(self.arrays)
    }
}
