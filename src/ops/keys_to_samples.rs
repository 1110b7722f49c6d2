//! `keys_to_samples`: merge the blocks that differ only by some key
//! dimensions along the samples, the moved dimensions becoming the last
//! sample dimensions.

use crate::array::Array;
use crate::block::TensorBlock;
use crate::error::Result;
use crate::tensor::TensorMap;

use super::copy::{gather, runs, Run, Scatter};
use super::keys::split;
use super::merge::{gradient_samples, samples, union_properties};
use super::{check_fill, check_group, finish};

/// Move the key dimensions `names` to the end of the sample dimensions,
/// merging the blocks that share the remaining key values, as
/// metatensor-core's `keys_to_samples` does.
///
/// The merged samples are every sample of the merged blocks extended with
/// the block's values of the moved dimensions, sorted when `sort_samples`
/// (otherwise in block order, then sample order). The merged properties
/// are the union of the blocks' properties (the first block's, then each
/// new entry in order); entries a block does not have are `fill` (the bytes
/// of one element of the map's dtype), in the values and in the gradients,
/// whose samples are the merged gradient entries, sorted. Every array is
/// new; each source array is copied once, straight into its place.
pub fn keys_to_samples(
    map: &TensorMap,
    names: &[String],
    fill: &[u8],
    sort_samples: bool,
) -> Result<TensorMap> {
    let split = split(map, names)?;
    check_fill(map, fill)?;
    let mut blocks = Vec::with_capacity(split.groups.len());
    for group in &split.groups {
        let members: Vec<&TensorBlock> = group.blocks.iter().map(|&i| &map.blocks()[i]).collect();
        check_group(&members, "keys_to_samples")?;
        blocks.push(merge(&members, &group.moved, names, fill, sort_samples)?);
    }
    finish(map, split.keys, blocks)
}

fn merge(
    blocks: &[&TensorBlock],
    moved: &[Vec<i32>],
    names: &[String],
    fill: &[u8],
    sort: bool,
) -> Result<TensorBlock> {
    let first = blocks[0];
    let merged_samples = samples(blocks, moved, Some(names), sort)?;
    let properties = union_properties(blocks)?;
    let property_runs: Vec<Vec<Run>> = properties.mappings.iter().map(|m| runs(m)).collect();

    let pieces = scatters(
        blocks.iter().map(|b| b.values()),
        &merged_samples.mappings,
        &property_runs,
    );
    let values = gather(
        first.values(),
        merged_samples.labels.count(),
        properties.labels.count(),
        &pieces,
        fill,
    )?;
    let mut block = TensorBlock::new(
        values,
        merged_samples.labels,
        first.components().to_vec(),
        properties.labels.clone(),
    )?;

    for (parameter, first_gradient) in first.gradients() {
        let gradients: Vec<&TensorBlock> = blocks
            .iter()
            .map(|b| b.gradient(parameter))
            .collect::<Result<_>>()?;
        let merged = gradient_samples(&gradients, &merged_samples.mappings)?;
        let pieces = scatters(
            gradients.iter().map(|g| g.values()),
            &merged.mappings,
            &property_runs,
        );
        let values = gather(
            first_gradient.values(),
            merged.labels.count(),
            properties.labels.count(),
            &pieces,
            fill,
        )?;
        let gradient = TensorBlock::new(
            values,
            merged.labels,
            first_gradient.components().to_vec(),
            properties.labels.clone(),
        )?;
        block.add_gradient(parameter, gradient)?;
    }
    Ok(block)
}

/// Each source with where its rows and properties go.
fn scatters<'a>(
    sources: impl Iterator<Item = &'a Array>,
    rows: &'a [Vec<usize>],
    runs: &'a [Vec<Run>],
) -> Vec<Scatter<'a>> {
    sources
        .zip(rows)
        .zip(runs)
        .map(|((source, rows), runs)| Scatter { source, rows, runs })
        .collect()
}
