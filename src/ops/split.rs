//! `split` and `split_block`: one block cut into several along its samples
//! or its properties, with the semantics metatensor-operations 0.5 gives
//! them (through its `slice_block`): along samples, the selected rows in
//! the order given, gradient rows kept when their sample is, in their own
//! order, with the `sample` column renumbered; along properties, the
//! selected properties in the block's own order.
//!
//! The positions are resolved by the caller (from Labels with `select`, or
//! from index arrays as numpy would index): here each group is a list of
//! positions, and each output array is allocated once and filled in
//! contiguous runs.

use crate::array::Array;
use crate::block::TensorBlock;
use crate::buffer::{AlignedBytes, Buffer};
use crate::error::{Error, Result};
use crate::labels::Labels;

use super::copy::{gather, Run, Scatter};
use super::join::Axis;

/// The blocks of `block` at the positions of each group, along `axis`.
pub fn split_block(
    block: &TensorBlock,
    axis: Axis,
    groups: &[Vec<usize>],
) -> Result<Vec<TensorBlock>> {
    if !groups.is_empty()
        && block
            .gradients()
            .values()
            .any(|g| !g.gradients().is_empty())
    {
        return Err(Error::NotImplemented(
            "gradients of gradients are not supported".into(),
        ));
    }
    groups
        .iter()
        .map(|positions| match axis {
            Axis::Samples => take_samples(block, positions),
            Axis::Properties => take_properties(block, positions),
        })
        .collect()
}

/// Rows `positions` of `labels`, as new labels (refused when a position
/// comes twice: labels are unique).
fn take_labels(labels: &Labels, positions: &[usize]) -> Result<Labels> {
    let mut values = Vec::new();
    values.try_reserve_exact(positions.len() * labels.size())?;
    for &p in positions {
        values.extend_from_slice(labels.row(p));
    }
    Labels::new(labels.names().to_vec(), &values)
        .map_err(|e| e.context("the selection picks an entry twice, which labels cannot hold"))
}

/// Rows `positions` of `array` (first axis), in that order.
fn take_rows(array: &Array, positions: &[usize]) -> Result<Array> {
    let mut shape = array.shape().to_vec();
    let row: usize = shape[1..].iter().product::<usize>() * array.dtype().size();
    shape[0] = positions.len();
    let mut out = AlignedBytes::for_overwrite(positions.len() * row)?;
    let (input, output) = (array.bytes(), out.as_mut_slice());
    let mut i = 0;
    while i < positions.len() {
        // consecutive source rows are copied at once
        let start = positions[i];
        let mut n = 1;
        while i + n < positions.len() && positions[i + n] == start + n {
            n += 1;
        }
        input.copy_at(start * row, &mut output[i * row..(i + n) * row]);
        i += n;
    }
    Array::new(array.dtype(), shape, Buffer::from(out))
}

fn take_samples(block: &TensorBlock, positions: &[usize]) -> Result<TensorBlock> {
    let count = block.samples().count();
    if let Some(&p) = positions.iter().find(|&&p| p >= count) {
        return Err(Error::internal(format!(
            "sample position {p} out of {count}"
        )));
    }
    let samples = take_labels(block.samples(), positions)?;
    let mut result = TensorBlock::new(
        take_rows(block.values(), positions)?,
        samples,
        block.components().to_vec(),
        block.properties().clone(),
    )?;
    // where each old sample went (-1: not kept)
    let mut new_position = vec![-1i64; count];
    for (i, &p) in positions.iter().enumerate() {
        new_position[p] = i64::try_from(i).unwrap_or(i64::MAX);
    }
    for (parameter, gradient) in block.gradients() {
        let gradient_samples = gradient.samples();
        let width = gradient_samples.size();
        let mut kept = Vec::new();
        let mut values = Vec::new();
        for r in 0..gradient_samples.count() {
            let row = gradient_samples.row(r);
            let sample = usize::try_from(row[0]).ok();
            let Some(new) = sample
                .and_then(|s| new_position.get(s))
                .filter(|&&n| n >= 0)
            else {
                continue;
            };
            kept.push(r);
            values.push(i32::try_from(*new).map_err(|_| Error::internal("too many samples"))?);
            values.extend_from_slice(&row[1..]);
        }
        debug_assert_eq!(values.len(), kept.len() * width);
        let samples = Labels::new(gradient_samples.names().to_vec(), &values)?;
        result.add_gradient(
            parameter,
            TensorBlock::new(
                take_rows(gradient.values(), &kept)?,
                samples,
                gradient.components().to_vec(),
                block.properties().clone(),
            )?,
        )?;
    }
    Ok(result)
}

/// The columns `positions` (sorted, unique) of `array` (last axis).
fn take_columns(array: &Array, positions: &[usize]) -> Result<Array> {
    let mut runs: Vec<Run> = Vec::new();
    for (output, &input) in positions.iter().enumerate() {
        match runs.last_mut() {
            Some(run) if run.input + run.len == input => run.len += 1,
            _ => runs.push(Run {
                input,
                output,
                len: 1,
            }),
        }
    }
    let rows: Vec<usize> = (0..array.shape()[0]).collect();
    let scatter = Scatter {
        source: array,
        rows: &rows,
        runs: &runs,
    };
    let zero = vec![0; array.dtype().size()];
    gather(array, array.shape()[0], positions.len(), &[scatter], &zero)
}

fn take_properties(block: &TensorBlock, positions: &[usize]) -> Result<TensorBlock> {
    let count = block.properties().count();
    // a mask: the block's order, each property once
    let mut selected = vec![false; count];
    for &p in positions {
        *selected
            .get_mut(p)
            .ok_or_else(|| Error::internal(format!("property position {p} out of {count}")))? =
            true;
    }
    let kept: Vec<usize> = (0..count).filter(|&p| selected[p]).collect();
    let properties = take_labels(block.properties(), &kept)?;
    let mut result = TensorBlock::new(
        take_columns(block.values(), &kept)?,
        block.samples().clone(),
        block.components().to_vec(),
        properties.clone(),
    )?;
    for (parameter, gradient) in block.gradients() {
        result.add_gradient(
            parameter,
            TensorBlock::new(
                take_columns(gradient.values(), &kept)?,
                gradient.samples().clone(),
                gradient.components().to_vec(),
                properties.clone(),
            )?,
        )?;
    }
    Ok(result)
}
