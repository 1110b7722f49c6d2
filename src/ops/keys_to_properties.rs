//! `keys_to_properties`: merge the blocks that differ only by some key
//! dimensions along the properties, the moved dimensions becoming the
//! first property dimensions.

use crate::array::Array;
use crate::block::TensorBlock;
use crate::error::{Error, Result};
use crate::labels::Labels;
use crate::tensor::TensorMap;

use super::copy::{gather, Run, Scatter};
use super::keys::split;
use super::merge::{gradient_samples, samples};
use super::rows::RowSet;
use super::{check_fill, check_group, finish};

/// Move the key dimensions named by `keys_to_move` to the front of the
/// property dimensions, merging the blocks that share the remaining key
/// values, as metatensor-core's `keys_to_properties` does.
///
/// Without entries in `keys_to_move` (only its names count), the merged
/// properties are each block's properties prefixed by its values of the
/// moved dimensions, block after block. With entries, the blocks must have
/// the same properties, and the merged properties are every entry of
/// `keys_to_move` (in its order) followed by every property: a block whose
/// key is not among the entries gives no data, and entries no block has
/// are `fill`. The merged samples are every sample of the merged blocks,
/// sorted when `sort_samples` (otherwise in order of appearance); entries
/// a block does not have are `fill` (the bytes of one element of the map's
/// dtype), in the values and in the gradients, whose samples are the
/// merged gradient entries, sorted. Every array is new; each source array
/// is copied once, straight into its place.
pub fn keys_to_properties(
    map: &TensorMap,
    keys_to_move: &Labels,
    fill: &[u8],
    sort_samples: bool,
) -> Result<TensorMap> {
    let names = keys_to_move.names();
    let split = split(map, names)?;
    check_fill(map, fill)?;
    let entries = (!keys_to_move.is_empty()).then_some(keys_to_move);
    let mut blocks = Vec::with_capacity(split.groups.len());
    for group in &split.groups {
        let members: Vec<&TensorBlock> = group.blocks.iter().map(|&i| &map.blocks()[i]).collect();
        check_group(&members, "keys_to_properties")?;
        blocks.push(merge(
            &members,
            &group.moved,
            names,
            entries,
            fill,
            sort_samples,
        )?);
    }
    finish(map, split.keys, blocks)
}

/// The merged properties and, for each block, where its properties start
/// in them (`None`: the block gives no data).
fn properties(
    blocks: &[&TensorBlock],
    moved: &[Vec<i32>],
    names: &[String],
    entries: Option<&Labels>,
) -> Result<(Labels, Vec<Option<usize>>)> {
    let first = blocks[0].properties();
    let mut all_names = names.to_vec();
    all_names.extend_from_slice(first.names());
    let width = all_names.len();
    let mut row = Vec::with_capacity(width);
    match entries {
        None => {
            // blocks of one group differ by their moved values, so each
            // block's properties are new entries, one after the other
            let total = blocks.iter().map(|b| b.properties().count()).sum();
            let mut rows = RowSet::with_capacity(width, total);
            let mut starts = Vec::with_capacity(blocks.len());
            for (block, key) in blocks.iter().zip(moved) {
                let properties = block.properties();
                starts.push((!properties.is_empty()).then_some(rows.len()));
                for i in 0..properties.count() {
                    row.clear();
                    row.extend_from_slice(key);
                    row.extend_from_slice(properties.row(i));
                    rows.insert(&row);
                }
            }
            Ok((rows.into_labels(all_names)?, starts))
        }
        Some(entries) => {
            if blocks.iter().any(|b| b.properties() != first) {
                return Err(Error::invalid(
                    "can not provide values for the keys to move to properties if the \
                     blocks have different property labels",
                ));
            }
            let mut rows = RowSet::with_capacity(width, entries.count() * first.count());
            for e in 0..entries.count() {
                for i in 0..first.count() {
                    row.clear();
                    row.extend_from_slice(entries.row(e));
                    row.extend_from_slice(first.row(i));
                    rows.insert(&row);
                }
            }
            let mut starts = Vec::with_capacity(blocks.len());
            for key in moved {
                let start = match entries.position(key)? {
                    Some(e) if !first.is_empty() => Some(e * first.count()),
                    _ => None,
                };
                starts.push(start);
            }
            Ok((rows.into_labels(all_names)?, starts))
        }
    }
}

fn merge(
    blocks: &[&TensorBlock],
    moved: &[Vec<i32>],
    names: &[String],
    entries: Option<&Labels>,
    fill: &[u8],
    sort: bool,
) -> Result<TensorBlock> {
    let first = blocks[0];
    let merged_samples = samples(blocks, moved, None, sort)?;
    let (properties, starts) = properties(blocks, moved, names, entries)?;
    let runs: Vec<[Run; 1]> = blocks
        .iter()
        .zip(&starts)
        .map(|(block, start)| {
            [Run {
                input: 0,
                output: start.unwrap_or(0),
                len: block.properties().count(),
            }]
        })
        .collect();

    let values = gather(
        first.values(),
        merged_samples.labels.count(),
        properties.count(),
        &scatters(
            blocks.iter().map(|b| b.values()),
            &merged_samples.mappings,
            &runs,
            &starts,
        ),
        fill,
    )?;
    let mut block = TensorBlock::new(
        values,
        merged_samples.labels,
        first.components().to_vec(),
        properties.clone(),
    )?;

    for (parameter, first_gradient) in first.gradients() {
        let gradients: Vec<&TensorBlock> = blocks
            .iter()
            .map(|b| b.gradient(parameter))
            .collect::<Result<_>>()?;
        let merged = gradient_samples(&gradients, &merged_samples.mappings)?;
        let values = gather(
            first_gradient.values(),
            merged.labels.count(),
            properties.count(),
            &scatters(
                gradients.iter().map(|g| g.values()),
                &merged.mappings,
                &runs,
                &starts,
            ),
            fill,
        )?;
        let gradient = TensorBlock::new(
            values,
            merged.labels,
            first_gradient.components().to_vec(),
            properties.clone(),
        )?;
        block.add_gradient(parameter, gradient)?;
    }
    Ok(block)
}

/// Each source that gives data, with where its rows and properties go.
fn scatters<'a>(
    sources: impl Iterator<Item = &'a Array>,
    rows: &'a [Vec<usize>],
    runs: &'a [[Run; 1]],
    starts: &[Option<usize>],
) -> Vec<Scatter<'a>> {
    sources
        .zip(rows)
        .zip(runs)
        .zip(starts)
        .filter(|(_, start)| start.is_some())
        .map(|(((source, rows), runs), _)| Scatter { source, rows, runs })
        .collect()
}
