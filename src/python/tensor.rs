//! The methods of `blockmap.TensorMap`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyMemoryView, PyTuple};

use super::block::block_repr;
use super::classes::{Origin, PyLabels, PyLabelsEntry, PyTensorBlock, PyTensorMap};
use super::convert::{check_index, extract_labels, saturating_index};
use super::errors::{invalid, type_name, wrong_type};
use super::file::{FileArg, MmapArg};
use crate::block::TensorBlock;
use crate::data::{Data, DataRef, Kind};
use crate::labels::Names;
use crate::tensor::{describe_entry, TensorMap};

/// A selection given as an index, a dict, a `LabelsEntry`, a one-entry
/// `Labels` or keyword arguments.
enum Selection {
    All,
    Index(isize),
    Pairs(Vec<(String, i64)>),
}

fn selection(
    py: Python<'_>,
    selection: Option<&Bound<'_, PyAny>>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Selection> {
    let kwargs = kwargs.filter(|k| !k.is_empty());
    let Some(selection) = selection.filter(|s| !s.is_none()) else {
        return match kwargs {
            Some(kwargs) => pairs_from_dict(kwargs),
            None => Ok(Selection::All),
        };
    };
    if kwargs.is_some() {
        return Err(wrong_type(
            py,
            "give the selection either as an argument or as keyword arguments, not both",
        ));
    }
    if let Ok(entry) = selection.cast::<PyLabelsEntry>() {
        let entry = entry.get();
        return Ok(Selection::Pairs(
            entry
                .names()
                .iter()
                .cloned()
                .zip(entry.values().iter().map(|&v| i64::from(v)))
                .collect(),
        ));
    }
    if let Ok(labels) = selection.cast::<PyLabels>() {
        let labels = &labels.get().labels;
        if labels.count() != 1 {
            return Err(invalid(
                py,
                format!(
                    "a Labels selection must have exactly one entry, got {}",
                    labels.count()
                ),
            ));
        }
        return Ok(Selection::Pairs(
            labels
                .names()
                .iter()
                .cloned()
                .zip(labels.row(0).iter().map(|&v| i64::from(v)))
                .collect(),
        ));
    }
    if let Ok(dict) = selection.cast::<PyDict>() {
        return pairs_from_dict(dict);
    }
    if selection.is_instance_of::<pyo3::types::PyBool>() {
        return Err(wrong_type(py, "a block selection cannot be a bool"));
    }
    if let Some(index) = saturating_index(selection) {
        return Ok(Selection::Index(index));
    }
    Err(wrong_type(
        py,
        format!(
            "a block selection must be an int, a dict, a LabelsEntry or Labels, got {}",
            type_name(selection)
        ),
    ))
}

fn pairs_from_dict(dict: &Bound<'_, PyDict>) -> PyResult<Selection> {
    let mut pairs = Vec::with_capacity(dict.len());
    for (name, value) in dict.iter() {
        let name: String = name.extract().map_err(|_| {
            wrong_type(
                dict.py(),
                "the keys of a selection must be dimension names (str)",
            )
        })?;
        let value: i64 = value.extract().map_err(|_| {
            wrong_type(
                dict.py(),
                format!("the selected value of '{name}' must be an integer"),
            )
        })?;
        pairs.push((name, value));
    }
    Ok(Selection::Pairs(pairs))
}

/// Block `i` of `map`, as a Python block viewing it.
fn view(map: &TensorMap, i: usize) -> PyTensorBlock {
    PyTensorBlock::new_view(map.blocks()[i].clone(), Origin::MapBlock)
}

fn resolve(map: &TensorMap, selection: &Selection) -> PyResult<Vec<usize>> {
    match selection {
        Selection::All => Ok((0..map.blocks().len()).collect()),
        Selection::Index(index) => Ok(vec![block_index(map, *index)?]),
        Selection::Pairs(pairs) => Ok(map.blocks_matching(pairs)?),
    }
}

fn block_index(map: &TensorMap, index: isize) -> PyResult<usize> {
    check_index(index, map.blocks().len()).map_err(|_| {
        PyIndexError::new_err(format!(
            "block index {index} is out of range for a map of {} blocks",
            map.blocks().len()
        ))
    })
}

fn describe_pairs(selection: &Selection) -> String {
    match selection {
        Selection::All => "everything".into(),
        Selection::Index(i) => format!("index {i}"),
        Selection::Pairs(pairs) => {
            let pairs: Vec<String> = pairs.iter().map(|(n, v)| format!("{n}={v}")).collect();
            format!("{{{}}}", pairs.join(", "))
        }
    }
}

#[pymethods]
impl PyTensorMap {
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
            rust_blocks.push(TensorBlock::clone(&block.get().block()));
        }
        Ok(PyTensorMap::from_map(TensorMap::new(keys, rust_blocks)?))
    }

    /// The keys, one entry per block.
    #[getter]
    fn keys(&self) -> PyLabels {
        self.map().keys().clone().into()
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

    /// Move the map's data (values, gradients and labels) into one shared
    /// memory segment, in place, and return the map.
    ///
    /// Done once: a map already in shared memory is left as it is. Sending
    /// the map to another process through ``multiprocessing`` (``Queue``,
    /// ``Pipe``, ``Pool``, ``ProcessPoolExecutor``) then sends only its
    /// metadata and a file descriptor; the receiver maps the same memory, so
    /// writes by either process are seen by the other. The memory is freed
    /// when the last process drops its map. Blocks and arrays taken from the
    /// map before the call keep viewing the old memory. Linux only.
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
    fn is_shared(&self) -> PyResult<bool> {
        super::shm::is_shared(DataRef::Tensor(&self.map()))
    }

    fn __len__(&self) -> usize {
        self.map().blocks().len()
    }

    /// The one block matching the selection: an index, a dict of key
    /// values, a :class:`LabelsEntry`, a one-entry :class:`Labels` or
    /// keyword arguments. With no selection, the map must have exactly one
    /// block.
    #[pyo3(signature = (selection = None, **kwargs))]
    fn block(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyTensorBlock> {
        let selection = self::selection(py, selection, kwargs)?;
        let map = self.map();
        let matching = resolve(&map, &selection)?;
        match matching.as_slice() {
            [i] => Ok(view(&map, *i)),
            [] if matches!(selection, Selection::All) => Err(invalid(py, "this map has no blocks")),
            [] => Err(invalid(
                py,
                format!(
                    "no block matches the selection {}",
                    describe_pairs(&selection)
                ),
            )),
            many => Err(invalid(
                py,
                format!(
                    "{} blocks match the selection {}: use blocks() to get all of them",
                    many.len(),
                    describe_pairs(&selection)
                ),
            )),
        }
    }

    /// All blocks matching the selection (all blocks without one).
    #[pyo3(signature = (selection = None, **kwargs))]
    fn blocks(
        &self,
        py: Python<'_>,
        selection: Option<&Bound<'_, PyAny>>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Vec<PyTensorBlock>> {
        let selection = self::selection(py, selection, kwargs)?;
        let map = self.map();
        let matching = resolve(&map, &selection)?;
        Ok(matching.into_iter().map(|i| view(&map, i)).collect())
    }

    /// Indices of the blocks whose keys match the selection.
    fn blocks_matching(
        &self,
        py: Python<'_>,
        selection: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<usize>> {
        let selection = self::selection(py, Some(selection), None)?;
        resolve(&self.map(), &selection)
    }

    /// Block ``index`` (negative indices count from the end).
    fn block_by_id(&self, index: isize) -> PyResult<PyTensorBlock> {
        let map = self.map();
        Ok(view(&map, block_index(&map, index)?))
    }

    /// ``(key, block)`` pairs in key order.
    fn items(&self) -> Vec<(PyLabelsEntry, PyTensorBlock)> {
        let map = self.map();
        (0..map.blocks().len())
            .map(|i| (PyLabelsEntry::new(map.keys().clone(), i), view(&map, i)))
            .collect()
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyList::new(py, self.items())?.try_iter()?.into_any())
    }

    /// The info map, as a new dict.
    fn info(&self) -> BTreeMap<String, String> {
        self.map().info().clone()
    }

    /// The info value of ``key``, or None.
    fn get_info(&self, key: &str) -> Option<String> {
        self.map().info().get(key).cloned()
    }

    /// Set the info value of ``key`` (the info must fit in 64 MiB of JSON,
    /// as ``.mts`` files hold it).
    fn set_info(&self, key: String, value: String) -> PyResult<()> {
        Ok(self.map.modify(|map| map.set_info(key, value))?)
    }

    /// Pickle support: out-of-band buffers over this object's memory with
    /// protocol 5, the ``.mts`` archive in a bytes object before (see
    /// ``docs/pickle.md``).
    fn __reduce_ex__<'py>(&self, py: Python<'py>, protocol: i64) -> PyResult<Bound<'py, PyTuple>> {
        super::pickle::reduce(py, DataRef::Tensor(&self.map()), protocol)
    }

    /// Save to a path or binary file object (see ``blockmap.save``).
    fn save(&self, py: Python<'_>, file: FileArg<'_>) -> PyResult<()> {
        super::io::save(py, file, DataRef::Tensor(&self.map()))
    }

    /// Load a :class:`TensorMap` from a path or binary file object (see ``blockmap.load``).
    #[staticmethod]
    #[pyo3(signature = (file, mmap = MmapArg::default()), text_signature = "(file, mmap=False)")]
    fn load(py: Python<'_>, file: FileArg<'_>, mmap: MmapArg) -> PyResult<Py<PyAny>> {
        super::io::load(py, file, Kind::Tensor, mmap)
    }

    /// The ``.mts`` data, in a memoryview (see ``blockmap.save_buffer``).
    fn save_buffer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyMemoryView>> {
        super::io::save_buffer(py, DataRef::Tensor(&self.map()))
    }

    /// Load from a bytes-like object (see ``blockmap.load_buffer``).
    #[staticmethod]
    fn load_buffer(py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        super::io::load_buffer(py, buffer, Kind::Tensor)
    }

    /// A deep copy: all array memory new.
    fn copy(&self, py: Python<'_>) -> PyResult<Self> {
        let map = self.map();
        Ok(PyTensorMap::from_map(super::gil::detached(py, || {
            map.deep_copy()
        })?))
    }

    /// ``copy.deepcopy(tensor)``: the same as :meth:`copy`.
    #[pyo3(signature = (memo, /))]
    fn __deepcopy__(&self, py: Python<'_>, memo: &Bound<'_, PyAny>) -> PyResult<Self> {
        let _ = memo;
        self.copy(py)
    }

    /// ``copy.copy(tensor)``: a new map object sharing this one's memory.
    fn __copy__(&self) -> Self {
        PyTensorMap::from_map(TensorMap::clone(&self.map()))
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

    fn __repr__(&self) -> String {
        tensor_repr(&self.map())
    }
}

fn tensor_repr(map: &TensorMap) -> String {
    let mut repr = String::new();
    write_tensor_repr(&mut repr, map).expect("writing to a String cannot fail");
    repr
}

fn write_tensor_repr(repr: &mut String, map: &TensorMap) -> std::fmt::Result {
    let blocks = map.blocks();
    write!(
        repr,
        "TensorMap(keys={}, {} block{}",
        Names(map.keys().names()),
        blocks.len(),
        if blocks.len() == 1 { "" } else { "s" }
    )?;
    if let Some(first) = blocks.first() {
        let dtypes: Vec<String> = blocks.iter().map(|b| b.dtype().to_string()).collect();
        let dtype = if dtypes.iter().all(|d| *d == dtypes[0]) {
            dtypes[0].clone()
        } else {
            "mixed".into()
        };
        write!(
            repr,
            ", samples={}, components={}, properties={}",
            Names(first.samples().names()),
            Names(&first.component_names()),
            Names(first.properties().names())
        )?;
        if !first.gradients().is_empty() {
            let gradients: Vec<String> = first.gradients().keys().cloned().collect();
            write!(repr, ", gradients={}", Names(&gradients))?;
        }
        write!(repr, ", dtype={dtype}")?;
        if blocks.len() <= 2 {
            for (i, block) in blocks.iter().enumerate() {
                write!(
                    repr,
                    ", {}: {}",
                    describe_entry(map.keys(), i),
                    block_repr(block)
                )?;
            }
        }
    }
    write!(repr, ", {})", human_bytes(map.nbytes()))
}

/// `794.1 MB`.
fn human_bytes(bytes: usize) -> String {
    let units = ["B", "kB", "MB", "GB", "TB"];
    // display only: the value is rounded to one decimal, so the precision
    // an `f64` lacks above 2^53 bytes cannot show
    #[allow(clippy::cast_precision_loss)]
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < units.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}
