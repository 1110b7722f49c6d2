//! `components_to_properties`: component dimensions moved to the front of
//! the properties, in every block and gradient.

use crate::block::TensorBlock;
use crate::error::{Error, Result};
use crate::labels::{Labels, Names};
use crate::tensor::TensorMap;

use super::copy::{into_array, permute_axes};
use super::finish;
use super::rows::RowSet;

/// Move the component dimensions `names` to the properties of every block
/// (and gradient), as metatensor-core's `components_to_properties` does:
/// each moved dimension goes in front of the properties in turn, so the
/// last one named comes first. The properties become every combination of
/// the moved entries and the old properties, in row-major order; the
/// values are permuted to match, each array copied once into new memory.
pub fn components_to_properties(map: &TensorMap, names: &[String]) -> Result<TensorMap> {
    if names.is_empty() {
        return Err(Error::invalid(
            "components_to_properties needs at least one component dimension to move",
        ));
    }
    let blocks = map
        .blocks()
        .iter()
        .map(|block| move_components(block, names))
        .collect::<Result<Vec<_>>>()?;
    finish(map, map.keys().clone(), blocks)
}

fn move_components(block: &TensorBlock, names: &[String]) -> Result<TensorBlock> {
    // component `k` is axis `k + 1`; the moved ones go, last named first,
    // just before the properties
    let components = block.components();
    let mut moved = Vec::with_capacity(names.len());
    for name in names {
        let k = components
            .iter()
            .position(|c| c.names()[0] == *name)
            .filter(|k| !moved.contains(k))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unable to find '{name}' in the components {}",
                    Names(&block.component_names())
                ))
            })?;
        moved.push(k);
    }
    let kept: Vec<usize> = (0..components.len())
        .filter(|k| !moved.contains(k))
        .collect();
    let values = block.values();
    let shape = values.shape();
    let last = shape.len() - 1;
    let mut order = vec![0];
    order.extend(kept.iter().map(|k| k + 1));
    order.extend(moved.iter().rev().map(|k| k + 1));
    order.push(last);

    let mut new_shape = vec![shape[0]];
    new_shape.extend(kept.iter().map(|&k| components[k].count()));
    let moved_count: usize = moved.iter().map(|&k| components[k].count()).product();
    new_shape.push(moved_count * shape[last]);
    let bytes = permute_axes(values, &order)?;
    let new_values = into_array(values.dtype(), new_shape, bytes)?;

    let properties = new_properties(
        &moved
            .iter()
            .rev()
            .map(|&k| &components[k])
            .collect::<Vec<_>>(),
        block.properties(),
    )?;
    let mut new_block = TensorBlock::new(
        new_values,
        block.samples().clone(),
        kept.iter().map(|&k| components[k].clone()).collect(),
        properties,
    )?;
    for (parameter, gradient) in block.gradients() {
        new_block.add_gradient(parameter, move_components(gradient, names)?)?;
    }
    Ok(new_block)
}

/// Every combination of the entries of `moved` (one dimension each) and of
/// `properties`, in row-major order.
fn new_properties(moved: &[&Labels], properties: &Labels) -> Result<Labels> {
    let mut names: Vec<String> = moved.iter().map(|c| c.names()[0].clone()).collect();
    names.extend_from_slice(properties.names());
    let counts: Vec<usize> = moved.iter().map(|c| c.count()).collect();
    let total = counts.iter().product::<usize>() * properties.count();
    let mut rows = RowSet::with_capacity(names.len(), total);
    let mut index = vec![0usize; moved.len()];
    let mut row = Vec::with_capacity(names.len());
    if total > 0 {
        loop {
            for p in 0..properties.count() {
                row.clear();
                row.extend(moved.iter().zip(&index).map(|(c, &i)| c.row(i)[0]));
                row.extend_from_slice(properties.row(p));
                rows.insert(&row);
            }
            // the next combination of moved entries, last dimension fastest
            let mut axis = moved.len();
            loop {
                if axis == 0 {
                    return rows.into_labels(names);
                }
                axis -= 1;
                index[axis] += 1;
                if index[axis] < counts[axis] {
                    break;
                }
                index[axis] = 0;
            }
        }
    }
    rows.into_labels(names)
}
