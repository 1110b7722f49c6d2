//! `join` and `join_blocks`: maps (or blocks) put end to end along their
//! samples or their properties, with the semantics metatensor-operations
//! 0.5 gives them (the order of the joined labels, `add_dimension`, the
//! `joined_index`/`property` properties of inputs with different property
//! names, `different_keys`, gradients, and which check fails first).
//!
//! Each output array is allocated once and each input array copied once,
//! straight into its place: whole blocks of rows for samples, contiguous
//! runs of properties otherwise. This is the collate function of a batch.

use crate::array::Array;
use crate::block::TensorBlock;
use crate::error::{Error, Result};
use crate::labels::Labels;
use crate::tensor::TensorMap;

use super::copy::{gather, in_segment, Run, Scatter};

/// The axis along which to join.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    Samples,
    Properties,
}

/// What to do with keys that not every map has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DifferentKeys {
    /// every map must have the same keys (in any order)
    Error,
    /// only the keys that every map has
    Intersection,
    /// every key; maps that lack one count as having an empty block there
    Union,
}

/// Join `maps` along `axis` (see the module's documentation). The keys of
/// the result are those of the first map (after `different_keys` is
/// applied); its info is empty, as metatensor-operations builds a new map.
pub fn join(
    maps: &[&TensorMap],
    axis: Axis,
    different_keys: DifferentKeys,
    add_dimension: Option<&str>,
) -> Result<TensorMap> {
    let Some(&first) = maps.first() else {
        return Err(Error::invalid(
            "provide at least one `TensorMap` for joining",
        ));
    };
    if maps.len() == 1 {
        return Ok(first.clone());
    }
    let adjusted;
    let maps: Vec<&TensorMap> = match different_keys {
        DifferentKeys::Error => {
            for map in &maps[1..] {
                check_same_keys(first, map, "join")?;
            }
            maps.to_vec()
        }
        DifferentKeys::Intersection => {
            adjusted = intersection(maps)?;
            adjusted.iter().collect()
        }
        DifferentKeys::Union => {
            adjusted = union(maps, axis)?;
            adjusted.iter().collect()
        }
    };
    if axis == Axis::Samples {
        check_sample_names(maps.iter().map(|map| sample_names(map)), "tensor", "join")?;
    }
    let keys = maps[0].keys();
    let mut blocks = Vec::new();
    blocks.try_reserve_exact(keys.count())?;
    for i in 0..keys.count() {
        let key = keys.row(i);
        let mut to_join = Vec::with_capacity(maps.len());
        for map in &maps {
            to_join.push(block_of(map, key)?);
        }
        blocks.push(join_aligned(&to_join, axis, add_dimension, "join")?);
    }
    TensorMap::new(keys.clone(), blocks)
}

/// [`join`], with the arrays of the result written straight into one new
/// shared-memory segment (when joining along samples: the result is then at
/// most as large as the inputs, which bounds the segment; along properties
/// the gradients' union of samples can be larger, and the result is made
/// as by [`join`]). This is the collate function of a batch about to be
/// sent to another process: the data is copied once, already where the
/// receiver maps it.
pub fn join_in_segment(
    maps: &[&TensorMap],
    axis: Axis,
    different_keys: DifferentKeys,
    add_dimension: Option<&str>,
) -> Result<TensorMap> {
    fn arrays(block: &TensorBlock) -> usize {
        1 + block.gradients().values().map(arrays).sum::<usize>()
    }
    if axis == Axis::Properties || maps.len() < 2 {
        return join(maps, axis, different_keys, add_dimension);
    }
    // every array of every input, and the padding that aligns each
    let capacity = maps
        .iter()
        .flat_map(|map| map.blocks())
        .map(|block| block.nbytes() + crate::ALIGNMENT * arrays(block))
        .try_fold(0usize, usize::checked_add)
        .ok_or_else(|| Error::invalid("too much data to join"))?;
    in_segment(capacity, || join(maps, axis, different_keys, add_dimension))
}

/// Join `blocks` along `axis`, as metatensor-operations' `join_blocks`.
pub fn join_blocks(
    blocks: &[&TensorBlock],
    axis: Axis,
    add_dimension: Option<&str>,
) -> Result<TensorBlock> {
    if blocks.is_empty() {
        return Err(Error::invalid(
            "provide at least one `TensorBlock` for joining",
        ));
    }
    if axis == Axis::Samples {
        check_sample_names(
            blocks.iter().map(|block| block.samples().names()),
            "blocks",
            "join_blocks",
        )?;
    }
    join_aligned(blocks, axis, add_dimension, "join_blocks")
}

/// Every input must have the same set of sample names (their order is not
/// checked: metatensor-operations joins the values by position).
fn check_sample_names<'a>(
    names: impl Iterator<Item = &'a [String]> + Clone,
    inputs: &str,
    fname: &str,
) -> Result<()> {
    let mut unique: Vec<&str> = Vec::new();
    for name in names.clone().flatten() {
        if !unique.contains(&name.as_str()) {
            unique.push(name);
        }
    }
    if names.into_iter().any(|names| names.len() != unique.len()) {
        return Err(Error::invalid(format!(
            "Different {inputs} have different sample names in `{fname}`. Joining along \
             samples with different sample names will lose information and is not supported."
        )));
    }
    Ok(())
}

/// The `parameter` gradients of `blocks` (which all have it: checked),
/// refusing gradients of gradients.
fn gradients_of<'a>(blocks: &[&'a TensorBlock], parameter: &str) -> Result<Vec<&'a TensorBlock>> {
    blocks
        .iter()
        .map(|block| {
            let gradient = block.gradient(parameter)?;
            if gradient.gradients().is_empty() {
                Ok(gradient)
            } else {
                Err(Error::NotImplemented(
                    "gradients of gradients are not yet supported".into(),
                ))
            }
        })
        .collect()
}

fn sample_names(map: &TensorMap) -> &[String] {
    // metatensor's `TensorMap.sample_names`: those of the first block
    map.blocks()
        .first()
        .map_or(&[][..], |block| block.samples().names())
}

fn block_of<'a>(map: &'a TensorMap, key: &[i32]) -> Result<&'a TensorBlock> {
    let position = map
        .keys()
        .position(key)?
        .ok_or_else(|| Error::invalid(format!("no block has the key {key:?}")))?;
    Ok(&map.blocks()[position])
}

/// What joining maps of different keys takes, added to the messages of
/// `check_same_keys` (metatensor-operations' own messages say nothing of it).
const DIFFERENT_KEYS_HINT: &str = "; to join maps whose keys differ, pass \
    different_keys=\"union\" (every key, the blocks a map lacks taken as empty) or \
    different_keys=\"intersection\" (the keys all maps have)";

/// metatensor-operations' `check_same_keys_raise`, with the way out
/// ([`DIFFERENT_KEYS_HINT`]).
fn check_same_keys(a: &TensorMap, b: &TensorMap, fname: &str) -> Result<()> {
    let (keys_a, keys_b) = (a.keys(), b.keys());
    if keys_a.names() != keys_b.names() {
        return Err(Error::NotEqual(format!(
            "inputs to '{fname}' should have the same keys names, got '{:?}' and \
             '{:?}'{DIFFERENT_KEYS_HINT}",
            keys_a.names(),
            keys_b.names()
        )));
    }
    if keys_a.count() != keys_b.count() {
        return Err(Error::NotEqual(format!(
            "inputs to '{fname}' should have the same number of blocks, got {} and \
             {}{DIFFERENT_KEYS_HINT}",
            keys_a.count(),
            keys_b.count()
        )));
    }
    for i in 0..keys_b.count() {
        if keys_a.position(keys_b.row(i))?.is_none() {
            return Err(Error::NotEqual(format!(
                "inputs to '{fname}' should have the same keys{DIFFERENT_KEYS_HINT}"
            )));
        }
    }
    Ok(())
}

/// Every map reduced to the keys all of them have, in the order of the
/// intersection of their keys.
fn intersection(maps: &[&TensorMap]) -> Result<Vec<TensorMap>> {
    let mut keys = maps[0].keys().clone();
    for map in &maps[1..] {
        keys = keys.intersection(map.keys())?.0;
    }
    maps.iter()
        .map(|map| {
            let blocks = (0..keys.count())
                .map(|i| block_of(map, keys.row(i)).cloned())
                .collect::<Result<Vec<_>>>()?;
            TensorMap::new(keys.clone(), blocks)
        })
        .collect()
}

/// Every map given the keys it lacks, each with an empty block shaped like
/// the first map's block that has the key (no samples, or no properties).
fn union(maps: &[&TensorMap], axis: Axis) -> Result<Vec<TensorMap>> {
    let mut all = maps[0].keys().clone();
    for map in &maps[1..] {
        all = all.union(map.keys())?.0;
    }
    maps.iter()
        .map(|map| {
            let mut blocks = map.blocks().to_vec();
            let mut missing = Vec::new();
            for i in 0..all.count() {
                let key = all.row(i);
                if map.keys().position(key)?.is_some() {
                    continue;
                }
                let reference = maps
                    .iter()
                    .find_map(|other| block_of(other, key).ok())
                    .ok_or_else(|| Error::internal("a key of the union is in no map"))?;
                blocks.push(empty_like(reference, axis)?);
                missing.extend_from_slice(key);
            }
            let missing = Labels::new(map.keys().names().to_vec(), &missing)?;
            TensorMap::new(map.keys().union(&missing)?.0, blocks)
        })
        .collect()
}

/// A block like `reference` with no entries along `axis`, and gradients
/// likewise.
fn empty_like(reference: &TensorBlock, axis: Axis) -> Result<TensorBlock> {
    // `block` with no entries along `axis`, and these properties
    let emptied = |block: &TensorBlock, properties: &Labels| -> Result<TensorBlock> {
        let mut shape = block.values().shape().to_vec();
        let samples = match axis {
            Axis::Samples => {
                shape[0] = 0;
                Labels::empty(block.samples().names().to_vec())?
            }
            Axis::Properties => {
                let last = shape.len() - 1;
                shape[last] = 0;
                block.samples().clone()
            }
        };
        TensorBlock::new(
            Array::zeros(block.dtype(), shape)?,
            samples,
            block.components().to_vec(),
            properties.clone(),
        )
    };
    let properties = match axis {
        Axis::Samples => reference.properties().clone(),
        Axis::Properties => Labels::empty(reference.properties().names().to_vec())?,
    };
    let mut block = emptied(reference, &properties)?;
    for (parameter, gradient) in reference.gradients() {
        if !gradient.gradients().is_empty() {
            return Err(Error::NotImplemented(
                "gradients of gradients are not supported".into(),
            ));
        }
        // along samples, a gradient without rows: no sample to refer to
        block.add_gradient(parameter, emptied(gradient, &properties)?)?;
    }
    Ok(block)
}

/// metatensor-operations' `check_blocks_raise` for `what` (samples,
/// components or properties).
fn check_blocks(a: &TensorBlock, b: &TensorBlock, fname: &str, what: &[&str]) -> Result<()> {
    for &metadata in what {
        let same = match metadata {
            "samples" => a.samples() == b.samples(),
            "properties" => a.properties() == b.properties(),
            _ => {
                if a.components().len() != b.components().len() {
                    return Err(Error::NotEqual(format!(
                        "inputs to '{fname}' have a different number of components"
                    )));
                }
                a.components() == b.components()
            }
        };
        if !same {
            return Err(Error::NotEqual(format!(
                "inputs to '{fname}' should have the same {metadata}, but they are not the \
                 same or not in the same order"
            )));
        }
    }
    Ok(())
}

/// metatensor-operations' `check_same_gradients_raise(..., ["components"])`.
fn check_same_gradients(a: &TensorBlock, b: &TensorBlock, fname: &str) -> Result<()> {
    let (ga, gb) = (a.gradients(), b.gradients());
    if ga.len() != gb.len() || ga.keys().any(|p| !gb.contains_key(p)) {
        return Err(Error::NotEqual(format!(
            "inputs to '{fname}' should have the same gradient parameters"
        )));
    }
    for (parameter, gradient_a) in ga {
        let gradient_b = &gb[parameter];
        let prefix = format!("inputs to '{fname}' should have the same gradients: ");
        if gradient_a.components().len() != gradient_b.components().len() {
            return Err(Error::NotEqual(format!(
                "{prefix}gradient '{parameter}' have different number of components"
            )));
        }
        if gradient_a.components() != gradient_b.components() {
            return Err(Error::NotEqual(format!(
                "{prefix}gradient '{parameter}' components are not the same or not in the \
                 same order"
            )));
        }
    }
    Ok(())
}

/// Join blocks whose other axes already match (checked here, as
/// metatensor-operations checks them, block after block).
fn join_aligned(
    blocks: &[&TensorBlock],
    axis: Axis,
    add_dimension: Option<&str>,
    fname: &str,
) -> Result<TensorBlock> {
    let first = blocks[0];
    if blocks.len() == 1 {
        return Ok(first.clone());
    }
    for block in blocks {
        let what: &[&str] = match axis {
            Axis::Samples => &["components", "properties"],
            Axis::Properties => &["samples", "components"],
        };
        check_blocks(first, block, fname, what)?;
        check_same_gradients(first, block, fname)?;
    }
    if blocks.iter().any(|block| block.dtype() != first.dtype()) {
        return Err(Error::invalid(format!(
            "inputs to '{fname}' have different dtypes: {} and {}",
            first.dtype(),
            blocks
                .iter()
                .find(|block| block.dtype() != first.dtype())
                .map_or(first.dtype(), |block| block.dtype())
        )));
    }
    match axis {
        Axis::Samples => join_samples(blocks, add_dimension),
        Axis::Properties => join_properties(blocks, add_dimension),
    }
}

/// Label values of `labels` one after the other, with an extra last column
/// holding the index of the labels it came from when `add` is set.
fn stacked(all: &[&Labels], add: bool) -> Result<Vec<i32>> {
    let width = all[0].size() + usize::from(add);
    let count: usize = all.iter().map(|labels| labels.count()).sum();
    let mut values = Vec::new();
    values.try_reserve_exact(
        count
            .checked_mul(width)
            .ok_or_else(|| Error::invalid("too many entries to join"))?,
    )?;
    for (i, labels) in all.iter().enumerate() {
        let index = i32::try_from(i).map_err(|_| Error::invalid("too many inputs to join"))?;
        if add {
            for row in 0..labels.count() {
                values.extend_from_slice(labels.row(row));
                values.push(index);
            }
        } else {
            values.extend_from_slice(labels.raw());
        }
    }
    Ok(values)
}

fn join_samples(blocks: &[&TensorBlock], add_dimension: Option<&str>) -> Result<TensorBlock> {
    let first = blocks[0];
    let all_samples: Vec<&Labels> = blocks.iter().map(|b| b.samples()).collect();
    let mut names = first.samples().names().to_vec();
    if let Some(name) = add_dimension {
        names.push(name.to_string());
    }
    let samples = Labels::new(names, &stacked(&all_samples, add_dimension.is_some())?)?;
    let values = concatenate_rows(blocks.iter().map(|b| b.values()))?;
    let mut block = TensorBlock::new(
        values,
        samples,
        first.components().to_vec(),
        first.properties().clone(),
    )?;
    for (parameter, first_gradient) in first.gradients() {
        let gradients = gradients_of(blocks, parameter)?;
        // the gradients' "sample" column follows the shift of the samples
        let width = first_gradient.samples().size();
        let count: usize = gradients.iter().map(|g| g.samples().count()).sum();
        let mut values = Vec::new();
        values.try_reserve_exact(count * width)?;
        let mut shift = 0i64;
        for (b, gradient) in blocks.iter().zip(&gradients) {
            for row in 0..gradient.samples().count() {
                let row = gradient.samples().row(row);
                let sample = i64::from(row[0]) + shift;
                values.push(i32::try_from(sample).map_err(|_| {
                    Error::invalid("the joined gradient samples do not fit in int32")
                })?);
                values.extend_from_slice(&row[1..]);
            }
            shift += i64::try_from(b.samples().count()).unwrap_or(i64::MAX);
        }
        let samples = Labels::new(first_gradient.samples().names().to_vec(), &values)?;
        let joined = concatenate_rows(gradients.iter().map(|g| g.values()))?;
        block.add_gradient(
            parameter,
            TensorBlock::new(
                joined,
                samples,
                first_gradient.components().to_vec(),
                first_gradient.properties().clone(),
            )?,
        )?;
    }
    Ok(block)
}

/// The arrays one after the other along their first axis (their other axes
/// are the same), each copied once.
fn concatenate_rows<'a>(arrays: impl Iterator<Item = &'a Array> + Clone) -> Result<Array> {
    let first = arrays
        .clone()
        .next()
        .ok_or_else(|| Error::internal("nothing to join"))?;
    let shape = first.shape();
    let properties = shape[shape.len() - 1];
    let rows: usize = arrays.clone().map(|a| a.shape()[0]).sum();
    let mut positions = Vec::new();
    let mut start = 0;
    for array in arrays.clone() {
        let n = array.shape()[0];
        positions.push((start..start + n).collect::<Vec<usize>>());
        start += n;
    }
    let runs = [Run {
        input: 0,
        output: 0,
        len: properties,
    }];
    let scatters: Vec<Scatter<'_>> = arrays
        .zip(&positions)
        .map(|(source, rows)| Scatter {
            source,
            rows,
            runs: &runs,
        })
        .collect();
    gather(
        first,
        rows,
        properties,
        &scatters,
        &vec![0; first.dtype().size()],
    )
}

/// The properties of blocks joined along them: theirs one after the
/// other (with the index of the block when `add_dimension` is set), or
/// `joined_index`/`property` pairs when their names differ.
fn joined_properties(blocks: &[&TensorBlock], add_dimension: Option<&str>) -> Result<Labels> {
    let first = blocks[0];
    let different_names = blocks
        .iter()
        .any(|b| b.properties().names() != first.properties().names());
    if !different_names {
        let all: Vec<&Labels> = blocks.iter().map(|b| b.properties()).collect();
        let mut names = first.properties().names().to_vec();
        if let Some(name) = add_dimension {
            names.push(name.to_string());
        }
        return Labels::new(names, &stacked(&all, add_dimension.is_some())?);
    }
    if add_dimension.is_some() {
        return Err(Error::invalid(
            "We can not add an extra dimension to properties when the inputs have \
             different property names",
        ));
    }
    let total: usize = blocks.iter().map(|b| b.properties().count()).sum();
    let mut values = Vec::new();
    values.try_reserve_exact(total * 2)?;
    for (i, b) in blocks.iter().enumerate() {
        let index = i32::try_from(i).map_err(|_| Error::invalid("too many inputs to join"))?;
        for p in 0..b.properties().count() {
            values.push(index);
            values.push(i32::try_from(p).map_err(|_| Error::invalid("too many properties"))?);
        }
    }
    Labels::new(vec!["joined_index", "property"], &values)
}

fn join_properties(blocks: &[&TensorBlock], add_dimension: Option<&str>) -> Result<TensorBlock> {
    let first = blocks[0];
    let properties = joined_properties(blocks, add_dimension)?;
    let total = properties.count();
    // each block's properties go to a contiguous run of the joined ones
    let mut runs = Vec::with_capacity(blocks.len());
    let mut offset = 0;
    for b in blocks {
        let n = b.properties().count();
        runs.push([Run {
            input: 0,
            output: offset,
            len: n,
        }]);
        offset += n;
    }
    let n_samples = first.samples().count();
    let identity: Vec<usize> = (0..n_samples).collect();
    let scatters: Vec<Scatter<'_>> = blocks
        .iter()
        .zip(&runs)
        .map(|(b, runs)| Scatter {
            source: b.values(),
            rows: &identity,
            runs,
        })
        .collect();
    let zero = vec![0; first.dtype().size()];
    let values = gather(first.values(), n_samples, total, &scatters, &zero)?;
    let mut block = TensorBlock::new(
        values,
        first.samples().clone(),
        first.components().to_vec(),
        properties.clone(),
    )?;
    for (parameter, first_gradient) in first.gradients() {
        let gradient =
            join_property_gradients(blocks, parameter, first_gradient, &runs, &properties)?;
        block.add_gradient(parameter, gradient)?;
    }
    Ok(block)
}

/// The `parameter` gradients of blocks joined along properties: on the
/// union of their samples, zeros where a block has no gradient row.
fn join_property_gradients(
    blocks: &[&TensorBlock],
    parameter: &str,
    first_gradient: &TensorBlock,
    runs: &[[Run; 1]],
    properties: &Labels,
) -> Result<TensorBlock> {
    let gradients = gradients_of(blocks, parameter)?;
    let mut samples = first_gradient.samples().clone();
    for gradient in &gradients {
        samples = samples.union(gradient.samples())?.0;
    }
    let mut rows = Vec::with_capacity(gradients.len());
    for gradient in &gradients {
        let (_, _, mapping) = samples.union(gradient.samples())?;
        rows.push(
            mapping
                .into_iter()
                .map(|i| usize::try_from(i).map_err(|_| Error::internal("negative row")))
                .collect::<Result<Vec<usize>>>()?,
        );
    }
    let scatters: Vec<Scatter<'_>> = gradients
        .iter()
        .zip(&rows)
        .zip(runs)
        .map(|((g, rows), runs)| Scatter {
            source: g.values(),
            rows,
            runs,
        })
        .collect();
    let zero = vec![0; first_gradient.dtype().size()];
    let values = gather(
        first_gradient.values(),
        samples.count(),
        properties.count(),
        &scatters,
        &zero,
    )?;
    TensorBlock::new(
        values,
        samples,
        first_gradient.components().to_vec(),
        properties.clone(),
    )
}
