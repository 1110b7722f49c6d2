//! Received labels gathered: the buffers of small labels copied into one
//! allocation, where they are compared and validated, equal ones made once.

use std::hash::BuildHasher;

use crate::buffer::{AlignedBytes, Buffer};
use crate::dtype::DType;
use crate::error::{Error, Result};

use super::header::{BlockHeader, Header, LabelsField, LabelsHeader};
use super::SHARED_LABELS_MAX;

/// Label buffers up to this size are copied into one allocation for all
/// of them (see [`gather_labels`]); larger ones get their own.
const GATHERED_LABELS_MAX: usize = 64 << 10;

/// What the labels of a received buffer are made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LabelsFrom {
    /// the received buffer, not gathered: the values are copied when the
    /// labels are made (or the buffer holds an array, not labels)
    Buffer,
    /// a copy in the gathered allocation: labels' own memory
    Own,
    /// as [`LabelsFrom::Own`], and equal labels later in the wire order
    /// share the labels made from it
    Shared,
    /// the same names and values as the labels of this earlier buffer
    Same(usize),
}

/// Where each labels header's buffer comes in the wire order, the order
/// the rebuild takes the buffers in: keys, then each block's values,
/// samples, components, properties (not for gradients) and its gradients
/// by parameter, recursively (no deeper than readers accept: deeper
/// headers are refused when rebuilt); references to earlier labels take
/// no buffer: the buffers they name go to `referenced`.
fn labels_in_order<'h, 'a>(
    header: &'h Header<'a>,
    referenced: &mut hashbrown::HashSet<usize>,
) -> Vec<(usize, &'h LabelsHeader<'a>)> {
    fn block<'h, 'a>(
        header: &'h BlockHeader<'a>,
        next: &mut usize,
        out: &mut Vec<(usize, &'h LabelsHeader<'a>)>,
        referenced: &mut hashbrown::HashSet<usize>,
        depth: usize,
    ) {
        if depth > crate::limits::MAX_GRADIENT_DEPTH {
            return;
        }
        *next += 1; // the values
        let labels = std::iter::once(&header.samples)
            .chain(&header.components)
            .chain(&header.properties);
        for labels in labels {
            match labels {
                LabelsField::Full(labels) => {
                    out.push((*next, labels));
                    *next += 1;
                }
                LabelsField::Same(index) => {
                    referenced.insert(*index);
                }
            }
        }
        for gradient in header.gradients.values() {
            block(gradient, next, out, referenced, depth + 1);
        }
    }
    let mut out = Vec::new();
    let mut next = 0;
    match header {
        Header::Tensor { keys, blocks, .. } => {
            out.push((0, keys));
            next = 1;
            for header in blocks {
                block(header, &mut next, &mut out, referenced, 0);
            }
        }
        Header::Block { block: header } => block(header, &mut next, &mut out, referenced, 0),
        Header::Labels { labels } => out.push((0, labels)),
    }
    out
}

/// Copy the buffers of small labels into one allocation, replacing them by views of it, so
/// that the labels own their values without an allocation each; small
/// labels equal to earlier ones (same names, same native int32 values) are
/// marked [`LabelsFrom::Same`] and share the first one's copy. Received buffers
/// may be the sender's memory, still written to: each is read once, by
/// its copy, and compared and validated on the copy only.
///
/// With `compare` false (version 3: the writer already refers to the
/// equal small labels it sent before), nothing is hashed or compared.
///
/// One allocation instead of one per labels is most of a small load's
/// time (figures in docs/benchmarks.md); a map of 10,000 blocks builds its
/// 10,000 equal components and properties once.
/// The allocation lives as long as any of the labels made from it.
pub(super) fn gather_labels(
    header: &Header<'_>,
    buffers: &mut [Buffer],
    referenced: &mut hashbrown::HashSet<usize>,
    compare: bool,
) -> Result<Vec<LabelsFrom>> {
    let mut from = Vec::new();
    from.try_reserve_exact(buffers.len())?;
    from.resize(buffers.len(), LabelsFrom::Buffer);
    let order = labels_in_order(header, referenced);
    let native = DType::I4.native_descr();
    // the labels to copy, with whether they may be shared, and an upper
    // bound of the memory their copies take
    let mut candidates = Vec::new();
    let mut total = 0_usize;
    for &(index, labels) in &order {
        // a crafted header may announce more buffers than given: the
        // labels that have none are refused when they are made
        let Some(buffer) = buffers.get(index) else {
            break;
        };
        let len = buffer.len();
        if len > GATHERED_LABELS_MAX {
            continue;
        }
        let shareable = compare && len <= SHARED_LABELS_MAX && labels.dtype == native;
        total = total
            .checked_add(len.next_multiple_of(crate::buffer::ALIGNMENT))
            .ok_or_else(|| Error::out_of_memory(usize::MAX))?;
        candidates.try_reserve(1)?;
        candidates.push((index, labels, shareable));
    }
    if candidates.is_empty() {
        return Ok(from);
    }
    // where each copy kept lies in the allocation
    let mut placed: Vec<(usize, usize)> = Vec::new();
    placed.try_reserve_exact(candidates.len())?;
    let hasher = hashbrown::DefaultHashBuilder::default();
    // from the allocator (or memory freed earlier, kept warm: see
    // `AlignedBytes::for_overwrite`), not `Buffer::filled`'s fresh mapping
    // with every page mapped at once: that mapping cost a quarter of a
    // small map's loads (docs/benchmarks.md, issue 45); every byte a label
    // views is written below, and the memory is frozen read-only after
    let mut arena = AlignedBytes::for_overwrite(total)?;
    {
        let memory = arena.as_mut_slice();
        let hash = |labels: &LabelsHeader, bytes: &[u8]| {
            hasher.hash_one((&labels.names.text, &labels.names.ends, bytes))
        };
        // shareable copies kept: (index, labels, offset, len)
        let mut seen = hashbrown::HashTable::<(usize, &LabelsHeader, usize, usize)>::new();
        let mut offset = 0;
        for &(index, labels, shareable) in &candidates {
            let len = buffers[index].len();
            // the one read of the received bytes
            buffers[index]
                .raw()
                .copy_to(&mut memory[offset..offset + len])?;
            if shareable {
                let copy = &memory[offset..offset + len];
                let h = hash(labels, copy);
                let same = |&(_, other, at, n): &(usize, &LabelsHeader, usize, usize)| {
                    other.names.text == labels.names.text
                        && other.names.ends == labels.names.ends
                        && memory[at..at + n] == *copy
                };
                if let Some(&(first, ..)) = seen.find(h, same) {
                    from[first] = LabelsFrom::Shared;
                    from[index] = LabelsFrom::Same(first);
                    // the copy is not kept: the next one overwrites it
                    continue;
                }
                seen.insert_unique(h, (index, labels, offset, len), |&(_, other, at, n)| {
                    hash(other, &memory[at..at + n])
                });
            }
            placed.push((index, offset));
            offset += len.next_multiple_of(crate::buffer::ALIGNMENT);
        }
    }
    let arena = Buffer::from(arena).into_read_only();
    for (index, offset) in placed {
        let len = buffers[index].len();
        buffers[index] = arena.slice(offset, len)?;
        if from[index] == LabelsFrom::Buffer {
            from[index] = LabelsFrom::Own;
        }
    }
    Ok(from)
}
