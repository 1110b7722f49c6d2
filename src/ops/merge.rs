//! The labels of merged blocks, with where each block's entries go: merged
//! samples, merged gradient samples, and the union of properties.

use crate::block::TensorBlock;
use crate::error::{Error, Result};
use crate::labels::Labels;

use super::rows::{is_sorted, label_value, RowSet};

/// Labels of merged blocks, and for each block, the position in them of
/// each of its entries.
pub(super) struct Merged {
    pub labels: Labels,
    pub mappings: Vec<Vec<usize>>,
}

fn identity(blocks: usize, count: usize) -> Vec<Vec<usize>> {
    vec![(0..count).collect(); blocks]
}

/// The samples of `blocks` merged: every distinct entry, in the order of
/// first appearance or sorted. With `moved_names`, each block's entries
/// are extended with its `moved` key values (keys moved to the samples).
pub(super) fn samples(
    blocks: &[&TensorBlock],
    moved: &[Vec<i32>],
    moved_names: Option<&[String]>,
    sort: bool,
) -> Result<Merged> {
    let first = blocks[0].samples();
    if moved_names.is_none()
        && blocks.iter().all(|b| b.samples() == first)
        && (!sort || is_sorted(first))
    {
        return Ok(Merged {
            labels: first.clone(),
            mappings: identity(blocks.len(), first.count()),
        });
    }
    let extra = moved_names.map_or(0, <[String]>::len);
    let width = first.size() + extra;
    let total = blocks.iter().map(|b| b.samples().count()).sum();
    let mut rows = RowSet::with_capacity(width, total);
    let mut mappings = Vec::with_capacity(blocks.len());
    let mut row = Vec::with_capacity(width);
    for (block, key) in blocks.iter().zip(moved) {
        let samples = block.samples();
        let mut mapping = Vec::with_capacity(samples.count());
        for i in 0..samples.count() {
            row.clear();
            row.extend_from_slice(samples.row(i));
            if moved_names.is_some() {
                row.extend_from_slice(key);
            }
            mapping.push(rows.insert(&row));
        }
        mappings.push(mapping);
    }
    if sort {
        let new_position = rows.sort();
        for mapping in &mut mappings {
            for position in mapping.iter_mut() {
                *position = new_position[*position];
            }
        }
    }
    let mut names = first.names().to_vec();
    if let Some(moved_names) = moved_names {
        names.extend_from_slice(moved_names);
    }
    Ok(Merged {
        labels: rows.into_labels(names)?,
        mappings,
    })
}

/// The samples of the gradients of merged blocks: each gradient entry with
/// its `sample` pointing into the merged samples (`sample_mappings`), all
/// distinct entries, sorted (as metatensor-core does, whatever the order
/// of the merged samples).
pub(super) fn gradient_samples(
    gradients: &[&TensorBlock],
    sample_mappings: &[Vec<usize>],
) -> Result<Merged> {
    let first = gradients[0].samples();
    let unchanged = |(gradient, mapping): (&&TensorBlock, &Vec<usize>)| {
        gradient.samples() == first && mapping.iter().enumerate().all(|(i, &m)| i == m)
    };
    if gradients.iter().zip(sample_mappings).all(unchanged) && is_sorted(first) {
        return Ok(Merged {
            labels: first.clone(),
            mappings: identity(gradients.len(), first.count()),
        });
    }
    let width = first.size();
    let total = gradients.iter().map(|g| g.samples().count()).sum();
    let mut rows = RowSet::with_capacity(width, total);
    let mut mappings = Vec::with_capacity(gradients.len());
    let mut row = Vec::with_capacity(width);
    for (gradient, sample_mapping) in gradients.iter().zip(sample_mappings) {
        let samples = gradient.samples();
        let mut mapping = Vec::with_capacity(samples.count());
        for i in 0..samples.count() {
            row.clear();
            row.extend_from_slice(samples.row(i));
            // the gradient rules make `sample` a valid index of the block
            let parent = usize::try_from(row[0]).map_err(|_| {
                Error::internal("a gradient 'sample' is negative despite the gradient rules")
            })?;
            row[0] = label_value(sample_mapping[parent])?;
            mapping.push(rows.insert(&row));
        }
        mappings.push(mapping);
    }
    let new_position = rows.sort();
    for mapping in &mut mappings {
        for position in mapping.iter_mut() {
            *position = new_position[*position];
        }
    }
    Ok(Merged {
        labels: rows.into_labels(first.names().to_vec())?,
        mappings,
    })
}

/// The union of the properties of `blocks`: the first block's entries,
/// then each new entry of the next blocks in their order.
pub(super) fn union_properties(blocks: &[&TensorBlock]) -> Result<Merged> {
    let first = blocks[0].properties();
    if blocks.iter().all(|b| b.properties() == first) {
        return Ok(Merged {
            labels: first.clone(),
            mappings: identity(blocks.len(), first.count()),
        });
    }
    let mut rows = RowSet::with_capacity(first.size(), first.count());
    let mappings = blocks
        .iter()
        .map(|block| {
            let properties = block.properties();
            (0..properties.count())
                .map(|i| rows.insert(properties.row(i)))
                .collect()
        })
        .collect();
    Ok(Merged {
        labels: rows.into_labels(first.names().to_vec())?,
        mappings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::Array;
    use crate::dtype::DType;
    use crate::fixtures::labels;

    fn block(samples: &[i32], properties: &[i32]) -> TensorBlock {
        TensorBlock::new(
            Array::zeros(DType::F8, vec![samples.len(), properties.len()]).unwrap(),
            labels(&["s"], samples),
            vec![],
            labels(&["p"], properties),
        )
        .unwrap()
    }

    #[test]
    fn merged_samples() {
        let (a, b) = (block(&[3, 1], &[0]), block(&[2, 1], &[0]));
        let merged = samples(&[&a, &b], &[vec![], vec![]], None, false).unwrap();
        assert_eq!(merged.labels.raw(), &[3, 1, 2]);
        assert_eq!(merged.mappings, vec![vec![0, 1], vec![2, 1]]);
        let sorted = samples(&[&a, &b], &[vec![], vec![]], None, true).unwrap();
        assert_eq!(sorted.labels.raw(), &[1, 2, 3]);
        assert_eq!(sorted.mappings, vec![vec![2, 0], vec![1, 0]]);

        let names = vec!["k".to_string()];
        let keyed = samples(&[&a, &b], &[vec![0], vec![1]], Some(&names), true).unwrap();
        assert_eq!(keyed.labels.names(), &["s", "k"]);
        assert_eq!(keyed.labels.raw(), &[1, 0, 1, 1, 2, 1, 3, 0]);
        assert_eq!(keyed.mappings, vec![vec![3, 0], vec![2, 1]]);
    }

    #[test]
    fn properties_union() {
        let (a, b) = (block(&[0], &[0, 1]), block(&[0], &[3, 1]));
        let merged = union_properties(&[&a, &b]).unwrap();
        assert_eq!(merged.labels.raw(), &[0, 1, 3]);
        assert_eq!(merged.mappings, vec![vec![0, 1], vec![2, 1]]);
    }
}
