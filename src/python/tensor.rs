//! The methods of `blockmap.TensorMap`.

use std::collections::BTreeMap;

use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyMemoryView, PyTuple};
use pyo3::PyTraverseError;

use super::block::{Origin, PyTensorBlock};
use super::cell::SwapCell;
use super::convert::SaturatingInt;
use super::entry::PyLabelsEntry;
use super::errors::{invalid, type_name, wrong_type};
use super::file::{FileArg, MmapArg, UseNumpy};
use super::labels::{extract_labels, LabelsArg};
use super::labels::{keys_arg, PyLabels};
use super::ops::{block_to, fill_bytes, keys_to_move, names, to_dtype};
use super::selection::{self, block_index, describe, resolve, Selection};
use super::torch::{arrays_arg, deep_copies, reduce_as_torch, requires_grad, Arrays, PICKLE_RULE};
use crate::arc::ForkArc;
use crate::block::TensorBlock;
use crate::data::{Data, DataRef, Kind};
use crate::ops;
use crate::tensor::TensorMap;

/// A set of :class:`TensorBlock`, one per entry of ``keys``.
///
/// ``TensorMap(keys, blocks)``. Every block must have the same sample,
/// component and property names and the same gradients. Unlike
/// metatensor-core, the blocks are not consumed: the block objects stay
/// usable and share their array memory with the map.
#[pyclass(name = "TensorMap", module = "blockmap", frozen, weakref)]
#[derive(Debug)]
pub struct PyTensorMap {
    pub map: SwapCell<TensorMap>,
    /// what the blocks' values are: numpy arrays or torch tensors
    pub arrays: Arrays,
    /// the dataset it was read from, when it pickles as a reference to it
    /// (boxed: the Python object of every map stays as small as it was,
    /// which keeps the maps of a dataset in memory dense; a fork worker
    /// that touches them copies fewer pages)
    pub origin: Option<Box<MapOrigin>>,
}

/// Where a map read from a dataset comes from: while its value is still
/// the one read (`snapshot`), it pickles as `dataset[index]`.
#[derive(Debug)]
pub struct MapOrigin {
    /// the Python dataset object (it pickles as a reference to its file)
    pub dataset: Py<PyAny>,
    pub index: usize,
    pub snapshot: ForkArc<TensorMap>,
}

impl PyTensorMap {
    /// A Python map holding `map`.
    pub fn from_map(map: TensorMap) -> Self {
        Self::with_arrays(map, Arrays::Numpy)
    }

    /// A Python map holding `map`, giving arrays as `arrays`.
    pub fn with_arrays(map: TensorMap, arrays: Arrays) -> Self {
        PyTensorMap {
            map: SwapCell::new(map),
            arrays,
            origin: None,
        }
    }

    /// Map `index` of `dataset`, as read from it.
    pub fn from_dataset(map: TensorMap, dataset: Py<PyAny>, index: usize) -> Self {
        let cell = SwapCell::new(map);
        let snapshot = cell.get();
        PyTensorMap {
            map: cell,
            arrays: Arrays::Numpy,
            origin: Some(Box::new(MapOrigin {
                dataset,
                index,
                snapshot,
            })),
        }
    }

    /// The `(dataset, index)` this map pickles as, while it is unchanged.
    pub fn reference(&self) -> Option<&MapOrigin> {
        let origin = self.origin.as_ref()?;
        ForkArc::ptr_eq(&origin.snapshot, &self.map()).then_some(origin)
    }

    /// The map's current value.
    pub fn map(&self) -> ForkArc<TensorMap> {
        self.map.get()
    }
}

/// Block `i` of `map`, as a Python block viewing it.
fn view(map: &TensorMap, i: usize, arrays: Arrays) -> PyTensorBlock {
    PyTensorBlock::new_view(map.blocks()[i].clone(), Origin::MapBlock).with_arrays(arrays)
}

/// A Python iterator over `items`.
fn iterate<'py, T>(py: Python<'py>, items: Vec<T>) -> PyResult<Bound<'py, PyAny>>
where
    T: IntoPyObject<'py>,
{
    Ok(PyList::new(py, items)?.try_iter()?.into_any())
}

/// `map` with the info of `like`.
fn with_info(mut map: TensorMap, like: &TensorMap) -> crate::Result<TensorMap> {
    map.replace_info(crate::limits::try_clone_info(like.info())?)?;
    Ok(map)
}

// numpydoc sections name parameters and exception classes bare, as help() shows them
#[allow(clippy::doc_markdown)]
#[pymethods]
impl PyTensorMap {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.traverse(&visit)
    }

    fn __clear__(&self) {
        self.clear();
    }

    #[new]
    fn new(keys: &Bound<'_, PyAny>, blocks: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = keys.py();
        let keys = extract_labels(keys, "keys")?;
        let iter = blocks.try_iter().map_err(|_| {
            wrong_type(
                py,
                format!(
                    "blocks must be a list of TensorBlock, got {}",
                    type_name(blocks)
                ),
            )
        })?;
        let mut rust_blocks = Vec::new();
        let mut arrays: Option<Arrays> = None;
        for (i, block) in iter.enumerate() {
            let block = block?;
            let block = block.cast::<PyTensorBlock>().map_err(|_| {
                wrong_type(
                    py,
                    format!(
                        "blocks[{i}] must be a TensorBlock, got {}",
                        type_name(&block)
                    ),
                )
            })?;
            let block = block.get();
            match arrays {
                Some(arrays) if arrays != block.arrays => {
                    return Err(invalid(
                        py,
                        format!(
                            "blocks[{i}] holds {} arrays, the blocks before it {}: convert \
                             them with `block.to(arrays=...)` first",
                            block.arrays.name(),
                            arrays.name()
                        ),
                    ))
                }
                _ => arrays = Some(block.arrays),
            }
            rust_blocks.push(TensorBlock::clone(&block.block()));
        }
        Ok(PyTensorMap::with_arrays(
            TensorMap::new(keys, rust_blocks)?,
            arrays.unwrap_or_default(),
        ))
    }

    /// The array type of the values: ``"numpy"`` or ``"torch"``.
    #[getter]
    fn _arrays(&self) -> &'static str {
        self.arrays.name()
    }

    /// The keys, one entry per block.
    #[getter]
    fn keys(&self) -> PyLabels {
        PyLabels::with_arrays(self.map().keys().clone(), self.arrays)
    }

    /// Sample names shared by all blocks.
    #[getter]
    fn sample_names(&self) -> Vec<String> {
        self.map().sample_names()
    }

    /// Component names shared by all blocks.
    #[getter]
    fn component_names(&self) -> Vec<String> {
        self.map().component_names()
    }

    /// Property names shared by all blocks.
    #[getter]
    fn property_names(&self) -> Vec<String> {
        self.map().property_names()
    }

    /// Bytes of array data in the map (values, gradients, labels).
    #[getter]
    fn nbytes(&self) -> usize {
        self.map().nbytes()
    }

    /// Move the map's values (of every block and gradient) into one shared
    /// memory segment, in place, and return the map. Labels stay in memory
    /// the map owns: they travel with each message (docs/transports.md).
    ///
    /// Done once: a map already in shared memory is left as it is. Sending
    /// the map to another process through ``multiprocessing`` (``Queue``,
    /// ``Pipe``, ``Pool``, ``ProcessPoolExecutor``) then sends only its
    /// metadata and a file descriptor; the receiver maps the same memory, so
    /// writes by either process are seen by the other. The memory is freed
    /// when the last process drops its map. Blocks and arrays taken from the
    /// map before the call keep viewing the old memory. Linux only.
    ///
    /// Returns
    /// -------
    /// TensorMap
    ///     This map.
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
            &this.map,
            |map| DataRef::Tensor(map),
            Data::into_tensor,
        )?;
        Ok(slf.clone())
    }

    /// Whether all of the map's data lives in shared memory (see
    /// ``share_memory``).
    ///
    /// Returns
    /// -------
    /// bool
    ///     Whether every array lives in shared memory.
    fn is_shared(&self) -> PyResult<bool> {
        super::shm::is_shared(DataRef::Tensor(&self.map()))
    }

    fn __len__(&self) -> usize {
        self.map().blocks().len()
    }

    /// The one block matching ``selection``, as metatensor-core finds it:
    /// an ``int`` is a position (:meth:`block_by_id`); a dict of key
    /// values, a :class:`LabelsEntry` or :class:`Labels` (any number of
    /// entries, a subset of the key dimensions) select the blocks whose
    /// keys match one of their entries. Without a selection, the keyword
    /// arguments are the dict. Raises ``ValueError`` when no block or more
    /// than one matches.
    ///
    /// Parameters
    /// ----------
    /// selection : int, dict, LabelsEntry or Labels, optional
    ///     A position or key values.
    /// **kwargs : int
    ///     Key values, when ``selection`` is not given.
    ///
    /// Returns
    /// -------
    /// TensorBlock
    ///     The block, a view of the map's.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If no block or more than one matches.
    /// BlockMapIndexError
    ///     If a position is out of range.
    /// BlockMapOverflowError
    ///     If a selected value does not fit in int32.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    #[pyo3(signature = (selection = None, **kwargs))]
    fn block(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyTensorBlock> {
        let selection = selection::read(py, selection, kwargs, false)?;
        let map = self.map();
        let matching = resolve(&map, &selection)?;
        match matching.as_slice() {
            [i] => Ok(view(&map, *i, self.arrays)),
            [] if map.blocks().is_empty() => {
                Err(invalid(py, "there are no blocks in this TensorMap"))
            }
            [] => Err(invalid(
                py,
                format!("couldn't find any block matching {}", describe(&selection)),
            )),
            many => Err(invalid(
                py,
                format!(
                    "more than one block matched {} ({} blocks), use `TensorMap.blocks` to \
                     get all of them",
                    describe(&selection),
                    many.len()
                ),
            )),
        }
    }

    /// The blocks matching ``selection`` (all of them without one), as
    /// metatensor-core finds them: an ``int`` or a list of ``int`` are
    /// positions (:meth:`blocks_by_id`); a dict, a :class:`LabelsEntry` or
    /// :class:`Labels` select by key, as in :meth:`block`. Raises
    /// ``ValueError`` when nothing matches in a map that has blocks.
    ///
    /// Parameters
    /// ----------
    /// selection : int, dict, LabelsEntry or Labels, optional
    ///     A position, a list of positions or key values.
    /// **kwargs : int
    ///     Key values, when ``selection`` is not given.
    ///
    /// Returns
    /// -------
    /// list of TensorBlock
    ///     The blocks, views of the map's.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If nothing matches in a map that has blocks.
    /// BlockMapIndexError
    ///     If a position is out of range.
    /// BlockMapOverflowError
    ///     If a selected value does not fit in int32.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    #[pyo3(signature = (selection = None, **kwargs))]
    fn blocks(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Vec<PyTensorBlock>> {
        let selection = selection::read(py, selection, kwargs, true)?;
        let map = self.map();
        let matching = resolve(&map, &selection)?;
        if matching.is_empty() && !map.blocks().is_empty() {
            return Err(invalid(
                py,
                format!("Couldn't find any block matching {}", describe(&selection)),
            ));
        }
        Ok(matching
            .into_iter()
            .map(|i| view(&map, i, self.arrays))
            .collect())
    }

    /// ``tensor[selection]``: the same as :meth:`block`.
    fn __getitem__(&self, py: Python<'_>, selection: &Bound<'_, PyAny>) -> PyResult<PyTensorBlock> {
        self.block(py, Some(selection), None)
    }

    /// Positions of the blocks whose keys match the selection (a dict, a
    /// :class:`LabelsEntry` or :class:`Labels`); empty when none does.
    ///
    /// Parameters
    /// ----------
    /// selection : dict, LabelsEntry or Labels
    ///     Key values.
    ///
    /// Returns
    /// -------
    /// list of int
    ///     The positions of the matching blocks.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If the selection names a dimension the keys do not have.
    /// BlockMapOverflowError
    ///     If a selected value does not fit in int32.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    fn blocks_matching(
        &self,
        py: Python<'_>,
        selection: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<usize>> {
        let selection = selection::read(py, Some(selection), None, false)?;
        if !matches!(selection, Selection::Keys(_)) {
            return Err(wrong_type(
                py,
                "blocks_matching takes a dict, a LabelsEntry or Labels",
            ));
        }
        resolve(&self.map(), &selection)
    }

    /// Block ``index`` (negative indices count from the end); raises
    /// ``IndexError`` out of range.
    ///
    /// Parameters
    /// ----------
    /// index : int
    ///     A position.
    ///
    /// Returns
    /// -------
    /// TensorBlock
    ///     The block, a view of the map's.
    ///
    /// Raises
    /// ------
    /// BlockMapIndexError
    ///     If ``index`` is out of range or not an integer.
    fn block_by_id(&self, index: &Bound<'_, PyAny>) -> PyResult<PyTensorBlock> {
        let py = index.py();
        let map = self.map();
        let index = super::convert::saturating_index(index).ok_or_else(|| {
            wrong_type(
                py,
                format!("a block index must be an int, got {}", type_name(index)),
            )
        })?;
        Ok(view(&map, block_index(&map, &index)?, self.arrays))
    }

    /// The blocks at ``indices``, in that order.
    ///
    /// Parameters
    /// ----------
    /// indices : sequence of int
    ///     Positions.
    ///
    /// Returns
    /// -------
    /// list of TensorBlock
    ///     The blocks, views of the map's.
    ///
    /// Raises
    /// ------
    /// BlockMapIndexError
    ///     If an index is out of range or not an integer.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    fn blocks_by_id(&self, indices: &Bound<'_, PyAny>) -> PyResult<Vec<PyTensorBlock>> {
        let py = indices.py();
        let map = self.map();
        let mut blocks = Vec::new();
        let indices = indices.try_iter().map_err(|_| {
            wrong_type(
                py,
                format!(
                    "blocks_by_id takes a sequence of block indices, got {}",
                    type_name(indices)
                ),
            )
        })?;
        for index in indices {
            let index = index?;
            let position = super::convert::saturating_index(&index).ok_or_else(|| {
                wrong_type(
                    py,
                    format!("a block index must be an int, got {}", type_name(&index)),
                )
            })?;
            blocks.push(view(&map, block_index(&map, &position)?, self.arrays));
        }
        Ok(blocks)
    }

    /// An iterator over ``(key, block)`` pairs, in key order.
    ///
    /// Returns
    /// -------
    /// iterator of (LabelsEntry, TensorBlock)
    ///     The keys and blocks.
    ///
    /// Raises
    /// ------
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let map = self.map();
        let pairs: Vec<(PyLabelsEntry, PyTensorBlock)> = (0..map.blocks().len())
            .map(|i| {
                (
                    PyLabelsEntry::new(map.keys().clone(), i).with_arrays(self.arrays),
                    view(&map, i, self.arrays),
                )
            })
            .collect();
        iterate(py, pairs)
    }

    /// ``for block in tensor``: the blocks, in key order.
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let map = self.map();
        iterate(
            py,
            (0..map.blocks().len())
                .map(|i| view(&map, i, self.arrays))
                .collect(),
        )
    }

    /// Merge blocks along the samples, moving the key dimensions
    /// ``keys_to_move`` (a name, a list of names, or :class:`Labels` without
    /// entries) to the end of the sample dimensions, as metatensor-core's
    /// ``keys_to_samples``: properties are the union of the merged blocks'
    /// (missing entries are ``fill_value``, gradients too); samples are
    /// sorted when ``sort_samples``, otherwise in block order.
    ///
    /// Parameters
    /// ----------
    /// keys_to_move : str, sequence of str or Labels
    ///     The key dimensions to move.
    /// fill_value : float, optional
    ///     The value of missing entries.
    /// sort_samples : bool, optional
    ///     Sort the samples of the result.
    ///
    /// Returns
    /// -------
    /// TensorMap
    ///     The merged map.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If a dimension is not a key dimension, or the blocks cannot be merged.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    #[pyo3(
        signature = (keys_to_move, *, fill_value = FillValue::Default, sort_samples = true),
        text_signature = "(self, /, keys_to_move, *, fill_value=0.0, sort_samples=True)"
    )]
    fn keys_to_samples(
        &self,
        py: Python<'_>,
        keys_to_move: &Bound<'_, PyAny>,
        fill_value: FillValue<'_>,
        sort_samples: bool,
    ) -> PyResult<Self> {
        let keys_to_move = self::keys_to_move(keys_to_move)?;
        if !keys_to_move.is_empty() {
            return Err(invalid(
                py,
                "user provided values for the keys to move is not yet implemented, \
                 `keys_to_move` should not contain any entry when calling keys_to_samples",
            ));
        }
        let map = self.map();
        let fill = fill(py, &map, fill_value)?;
        let result =
            py.detach(|| ops::keys_to_samples(&map, keys_to_move.names(), &fill, sort_samples))?;
        Ok(PyTensorMap::with_arrays(result, self.arrays))
    }

    /// Merge blocks along the properties, moving the key dimensions
    /// ``keys_to_move`` to the front of the property dimensions, as
    /// metatensor-core's ``keys_to_properties``. Given as names (or
    /// :class:`Labels` without entries), the new properties are each merged
    /// block's, prefixed by its key values; given as :class:`Labels` with
    /// entries, they are every entry followed by every (shared) property.
    /// Missing entries are ``fill_value`` (gradients too); samples are
    /// sorted when ``sort_samples``, otherwise in order of appearance.
    ///
    /// Parameters
    /// ----------
    /// keys_to_move : str, sequence of str or Labels
    ///     The key dimensions to move.
    /// fill_value : float, optional
    ///     The value of missing entries.
    /// sort_samples : bool, optional
    ///     Sort the samples of the result.
    ///
    /// Returns
    /// -------
    /// TensorMap
    ///     The merged map.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If a dimension is not a key dimension, or the blocks cannot be merged.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    #[pyo3(
        signature = (keys_to_move, *, fill_value = FillValue::Default, sort_samples = true),
        text_signature = "(self, /, keys_to_move, *, fill_value=0.0, sort_samples=True)"
    )]
    fn keys_to_properties(
        &self,
        py: Python<'_>,
        keys_to_move: &Bound<'_, PyAny>,
        fill_value: FillValue<'_>,
        sort_samples: bool,
    ) -> PyResult<Self> {
        let keys_to_move = self::keys_to_move(keys_to_move)?;
        let map = self.map();
        let fill = fill(py, &map, fill_value)?;
        let result =
            py.detach(|| ops::keys_to_properties(&map, &keys_to_move, &fill, sort_samples))?;
        Ok(PyTensorMap::with_arrays(result, self.arrays))
    }

    /// Move the component dimensions ``dimensions`` (a name or a list of
    /// names) to the front of the properties of every block and gradient,
    /// as metatensor-core's ``components_to_properties`` (the last one
    /// named comes first).
    ///
    /// Parameters
    /// ----------
    /// dimensions : str or sequence of str
    ///     The component dimensions to move.
    ///
    /// Returns
    /// -------
    /// TensorMap
    ///     The new map.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If a name is not a component dimension.
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn components_to_properties(
        &self,
        py: Python<'_>,
        dimensions: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let dimensions = names(dimensions, "dimensions")?;
        let map = self.map();
        let result = py.detach(|| ops::components_to_properties(&map, &dimensions))?;
        Ok(PyTensorMap::with_arrays(result, self.arrays))
    }

    /// The dtype of every array in the map (None for a map without
    /// blocks): a numpy dtype, or a ``torch.dtype`` for torch tensors.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.map()
            .blocks()
            .first()
            .map(|block| super::torch::dtype_of(py, block.dtype(), self.arrays))
            .transpose()
    }

    /// The device of every array in the map: ``"cpu"``, or
    /// ``torch.device("cpu")`` for torch tensors.
    #[getter]
    fn device<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        super::torch::device_of(py, self.arrays)
    }

    /// Whether this map is a view inside another object: never.
    #[getter]
    #[allow(clippy::unused_self)] // a Python property takes the object
    fn is_view(&self) -> bool {
        false
    }

    /// The map with every array of ``dtype`` (a numpy or torch dtype,
    /// converted as numpy's ``astype`` converts, by blockmap itself; torch
    /// tensors by ``tensor.to``; arrays already of that dtype are
    /// shared, not copied), on ``device`` (only ``"cpu"``), given as
    /// ``arrays``: ``"numpy"`` or ``"torch"`` (the same memory either way,
    /// nothing is copied). Positional arguments are a device (a str or a
    /// ``torch.device``) or a dtype, as in metatensor-core.
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
    /// TensorMap
    ///     The converted map.
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
        let dtype = to_dtype("`TensorMap.to`", args, dtype, device, arrays)?;
        let arrays = arrays_arg(args.py(), arrays, self.arrays)?;
        let map = self.map();
        if dtype.is_none() {
            return Ok(PyTensorMap::with_arrays(TensorMap::clone(&map), arrays));
        }
        let blocks = map
            .blocks()
            .iter()
            .map(|block| block_to(block, dtype, arrays == Arrays::Torch))
            .collect::<PyResult<Vec<_>>>()?;
        let converted = TensorMap::new(map.keys().clone(), blocks)?;
        Ok(PyTensorMap::with_arrays(
            with_info(converted, &map)?,
            arrays,
        ))
    }

    /// The map printed with at most ``max_keys`` keys (all of them when
    /// negative), in metatensor-core's layout.
    ///
    /// Parameters
    /// ----------
    /// max_keys : int
    ///     The most keys shown (all when negative).
    ///
    /// Returns
    /// -------
    /// str
    ///     The text.
    ///
    /// Raises
    /// ------
    /// BlockMapTypeError
    ///     If an argument has the wrong type.
    #[pyo3(name = "print")]
    #[allow(clippy::needless_pass_by_value)] // a Python argument
    fn print_(&self, max_keys: SaturatingInt) -> String {
        super::repr::tensor(&self.map(), max_keys.0)
    }

    /// The info map, as a new dict.
    ///
    /// Returns
    /// -------
    /// dict of str to str
    ///     A copy of the info.
    ///
    /// Raises
    /// ------
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn info(&self) -> BTreeMap<String, String> {
        self.map().info().clone()
    }

    /// The info value of ``key``, or None.
    ///
    /// Parameters
    /// ----------
    /// key : str
    ///     The info key.
    ///
    /// Returns
    /// -------
    /// str or None
    ///     Its value, or None when absent.
    fn get_info(&self, key: &str) -> Option<String> {
        self.map().info().get(key).cloned()
    }

    /// Set the info value of ``key`` (the info must fit in 64 MiB of JSON,
    /// as ``.mts`` files hold it).
    ///
    /// Parameters
    /// ----------
    /// key : str
    ///     The info key.
    /// value : str
    ///     Its value.
    ///
    /// Raises
    /// ------
    /// ValidationError
    ///     If the info would exceed 64 MiB of JSON.
    /// BlockMapMemoryError
    ///     If memory for the result cannot be allocated.
    fn set_info(&self, key: String, value: String) -> PyResult<()> {
        Ok(self.map.modify(|map| map.set_info(key, value))?)
    }

    /// Pickle support: out-of-band buffers over this object's memory with
    /// protocol 5, the ``.mts`` archive in a bytes object before (see
    /// ``docs/pickle.md``).
    ///
    /// A map of torch tensors pickles as its numpy twin (the same memory)
    /// and the positions of the leaf tensors requiring grad, rebuilt as a
    /// map of torch tensors; a non-leaf tensor requiring grad is refused,
    /// as torch refuses it.
    fn __reduce_ex__<'py>(&self, py: Python<'py>, protocol: i64) -> PyResult<Bound<'py, PyTuple>> {
        let map = self.map();
        if self.arrays == Arrays::Torch {
            let flagged = requires_grad(py, map.blocks(), PICKLE_RULE)?;
            let twin = PyTensorMap::from_map(TensorMap::clone(&map));
            return reduce_as_torch(py, Bound::new(py, twin)?.into_any(), flagged);
        }
        super::pickle::reduce(py, DataRef::Tensor(&map), protocol)
    }

    /// Whether multiprocessing's reducer sends this map as a reference to
    /// the dataset it was read from (it was read from one, read-only, and
    /// is unchanged since); pickle itself always writes its data.
    #[getter]
    fn _pickles_as_reference(&self) -> bool {
        self.reference().is_some()
    }

    /// ``(dataset, index)`` this map was read as, while it is unchanged;
    /// ``None`` otherwise.
    #[getter]
    fn _dataset_origin(&self, py: Python<'_>) -> Option<(Py<PyAny>, usize)> {
        self.reference()
            .map(|origin| (origin.dataset.clone_ref(py), origin.index))
    }

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
        super::io::save(py, file, DataRef::Tensor(&self.map()), durable)
    }

    /// Load a :class:`TensorMap` from a path or binary file object (see ``blockmap.load``).
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
    /// keys : Labels, optional
    ///     Load only the blocks whose keys match these entries.
    ///
    /// Returns
    /// -------
    /// TensorMap
    ///     The map.
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
    #[pyo3(signature = (file, use_numpy = UseNumpy, *, mmap = MmapArg::default(), arrays = None, keys = None), text_signature = "(file, use_numpy=False, *, mmap=False, arrays=None, keys=None)")]
    fn load(
        py: Python<'_>,
        file: FileArg<'_>,
        use_numpy: UseNumpy,
        mmap: MmapArg,
        arrays: Option<&str>,
        keys: Option<LabelsArg>,
    ) -> PyResult<Py<PyAny>> {
        let _ = use_numpy;
        let arrays = arrays_arg(py, arrays, Arrays::Numpy)?;
        let keys = keys_arg(keys);
        let loaded = super::io::load(py, file, Kind::Tensor, mmap, keys.as_ref())?;
        let tensor = PyTensorMap::with_arrays(loaded.into_tensor()?, arrays);
        Ok(Py::new(py, tensor)?.into_any())
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
        super::io::save_buffer(py, DataRef::Tensor(&self.map()))
    }

    /// Load from a bytes-like object (see ``blockmap.load_buffer``).
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
    /// keys : Labels, optional
    ///     Load only the blocks whose keys match these entries.
    ///
    /// Returns
    /// -------
    /// TensorMap
    ///     The map.
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
    #[pyo3(signature = (buffer, use_numpy = UseNumpy, *, arrays = None, keys = None), text_signature = "(buffer, use_numpy=False, *, arrays=None, keys=None)")]
    fn load_buffer(
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        use_numpy: UseNumpy,
        arrays: Option<&str>,
        keys: Option<LabelsArg>,
    ) -> PyResult<Py<PyAny>> {
        let _ = use_numpy;
        let arrays = arrays_arg(py, arrays, Arrays::Numpy)?;
        let keys = keys_arg(keys);
        let map = super::io::load_buffer(py, buffer, Kind::Tensor, keys.as_ref())?.into_tensor()?;
        Ok(Py::new(py, PyTensorMap::with_arrays(map, arrays))?.into_any())
    }

    /// A copy of the map: with ``deep`` (the default) all array memory is
    /// new; otherwise the copy's blocks share this map's arrays.
    ///
    /// Parameters
    /// ----------
    /// deep : bool, optional
    ///     Copy the arrays (the default) or share them.
    ///
    /// Returns
    /// -------
    /// TensorMap
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
        let map = self.map();
        if !deep {
            return Ok(self.__copy__());
        }
        let copy = match self.arrays {
            Arrays::Torch => {
                let blocks = deep_copies(py, map.blocks())?;
                with_info(TensorMap::new(map.keys().clone(), blocks)?, &map)?
            }
            Arrays::Numpy => super::gil::detached(py, || map.deep_copy())?,
        };
        Ok(PyTensorMap::with_arrays(copy, self.arrays))
    }

    /// ``copy.deepcopy(tensor)``: the same as :meth:`copy`.
    #[pyo3(signature = (memo, /))]
    fn __deepcopy__(&self, py: Python<'_>, memo: &Bound<'_, PyAny>) -> PyResult<Self> {
        let _ = memo;
        self.copy(py, true)
    }

    /// ``copy.copy(tensor)``: a new map object sharing this one's memory.
    fn __copy__(&self) -> Self {
        PyTensorMap::with_arrays(TensorMap::clone(&self.map()), self.arrays)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.cast::<PyTensorMap>() {
            Ok(other) => *self.map() == *other.get().map(),
            Err(_) => false,
        }
    }

    fn __ne__(&self, other: &Bound<'_, PyAny>) -> bool {
        !self.__eq__(other)
    }

    /// ``tensor + other``: ``blockmap.operations.add`` (metatensor-core's
    /// operators are metatensor-operations' functions; they need it
    /// installed, as metatensor-core does).
    fn __add__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        operation(slf, "add", other)
    }

    /// ``tensor - other``: ``blockmap.operations.subtract``.
    fn __sub__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        operation(slf, "subtract", other)
    }

    /// ``tensor * other``: ``blockmap.operations.multiply``.
    fn __mul__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        operation(slf, "multiply", other)
    }

    /// ``tensor @ other``: ``blockmap.operations.dot``.
    fn __matmul__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        operation(slf, "dot", other)
    }

    /// ``tensor / other``: ``blockmap.operations.divide``.
    fn __truediv__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        operation(slf, "divide", other)
    }

    /// ``tensor ** other``: ``blockmap.operations.pow``. As metatensor-core's
    /// two-argument ``__pow__``, ``pow(tensor, other, modulo)`` is a `TypeError`.
    fn __pow__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
        modulo: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if !modulo.is_none() {
            return Err(wrong_type(
                slf.py(),
                "TensorMap.__pow__() takes 2 positional arguments but 3 were given",
            ));
        }
        operation(slf, "pow", other)
    }

    /// ``-tensor``: ``blockmap.operations.multiply(tensor, -1)``.
    fn __neg__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        operation(
            slf,
            "multiply",
            &(-1i64).into_pyobject(slf.py())?.into_any(),
        )
    }

    /// ``+tensor``: the map itself, as in metatensor-core.
    fn __pos__<'py>(slf: &Bound<'py, Self>) -> Bound<'py, Self> {
        slf.clone()
    }

    /// metatensor's layout, with every key.
    fn __repr__(&self) -> String {
        let map = self.map();
        format!(
            "{}\n    {}",
            super::repr::tensor(&map, -1),
            super::repr::arrays(map.blocks().iter(), self.arrays)
        )
    }

    /// metatensor's layout, with at most 7 keys.
    fn __str__(&self) -> String {
        super::repr::tensor(&self.map(), 7)
    }
}

/// ``blockmap.operations.<name>(map, other)``, imported on first use.
fn operation<'py>(
    map: &Bound<'py, PyTensorMap>,
    name: &str,
    other: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let operations = map.py().import("blockmap.operations")?;
    operations.getattr(name)?.call1((map, other))
}

/// The ``fill_value`` of ``keys_to_*``: 0.0 when not given (an explicit
/// None is numpy's, as in metatensor-core: NaN for floats).
pub enum FillValue<'py> {
    Default,
    Value(Bound<'py, PyAny>),
}

impl<'py> FromPyObject<'_, 'py> for FillValue<'py> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        Ok(FillValue::Value(obj.to_owned()))
    }
}

/// ``numpy.array(fill_value, dtype=map.dtype)``, as bytes.
fn fill(py: Python<'_>, map: &TensorMap, fill_value: FillValue<'_>) -> PyResult<Vec<u8>> {
    match fill_value {
        FillValue::Value(value) => fill_bytes(map, &value),
        FillValue::Default => fill_bytes(map, &0.0f64.into_pyobject(py)?.into_any()),
    }
}
