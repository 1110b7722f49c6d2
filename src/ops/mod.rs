//! Operations on maps that build new maps: metatensor-core's
//! `keys_to_samples`, `keys_to_properties` and `components_to_properties`,
//! with its semantics (the order of keys, samples and properties, fill
//! values, sorting, gradients, errors).
//!
//! Each output array is allocated once (filled, unless the fill is zero)
//! and each input array is copied once, straight into its place, in
//! contiguous runs. The inputs are never changed.

mod components_to_properties;
mod copy;
pub mod join;
mod keys;
mod keys_to_properties;
mod keys_to_samples;
mod merge;
mod rows;
pub mod split;

pub use components_to_properties::components_to_properties;
pub use keys_to_properties::keys_to_properties;
pub use keys_to_samples::keys_to_samples;

use crate::block::TensorBlock;
use crate::error::{Error, Result};
use crate::labels::{Labels, Names};
use crate::tensor::TensorMap;

/// Check that `fill` is one element of the map's dtype.
fn check_fill(map: &TensorMap, fill: &[u8]) -> Result<()> {
    if let Some(first) = map.blocks().first() {
        let size = first.dtype().size();
        if fill.len() != size {
            return Err(Error::invalid(format!(
                "the fill value must be one {} ({size} bytes), got {} bytes",
                first.dtype(),
                fill.len()
            )));
        }
    }
    Ok(())
}

/// Check that the blocks of one group can be merged: gradients without
/// gradients, the same components, and gradients with the same components.
fn check_group(blocks: &[&TensorBlock], operation: &str) -> Result<()> {
    let first = blocks[0];
    if first
        .gradients()
        .values()
        .any(|g| !g.gradients().is_empty())
    {
        return Err(Error::invalid(format!(
            "gradient of gradients are not supported yet in {operation}"
        )));
    }
    for block in &blocks[1..] {
        if block.components() != first.components() {
            return Err(Error::invalid(format!(
                "can not {operation} if the blocks have different components labels, \
                 call components_to_properties first"
            )));
        }
        for (parameter, gradient) in first.gradients() {
            if block.gradient(parameter)?.components() != gradient.components() {
                let names: Vec<String> = gradient
                    .components()
                    .iter()
                    .map(|c| c.names()[0].clone())
                    .collect();
                return Err(Error::invalid(format!(
                    "can not {operation}: the '{parameter}' gradients of the merged blocks \
                     have different entries in their components {}",
                    Names(&names)
                )));
            }
        }
    }
    Ok(())
}

/// The new map of `keys` and `blocks`, with the info of `map`.
fn finish(map: &TensorMap, keys: Labels, blocks: Vec<TensorBlock>) -> Result<TensorMap> {
    let mut result = TensorMap::new(keys, blocks)?;
    result.replace_info(crate::limits::try_clone_info(map.info())?)?;
    Ok(result)
}

#[cfg(test)]
mod tests;
