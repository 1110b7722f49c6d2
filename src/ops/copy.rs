//! Moving array data into a new array: filled memory, rows scattered into
//! it in contiguous runs, and axes permuted. Everything works on raw bytes
//! (elements of `itemsize` bytes), so one code path serves every dtype.

use std::cell::RefCell;

use crate::array::{byte_len, Array};
use crate::buffer::{AlignedBytes, Buffer, SegmentArena};
use crate::dtype::DType;
use crate::error::Result;

thread_local! {
    /// The segment [`gather`] places its arrays in, during [`in_segment`].
    static ARENA: RefCell<Option<SegmentArena>> = const { RefCell::new(None) };
}

/// Run `work` with the arrays that [`gather`] makes on this thread placed,
/// as long as they fit, one after the other in one new shared-memory
/// segment of `capacity` bytes (an upper bound of what `work` makes).
///
/// Calls nest: a join that runs inside `work` on the same thread (a signal
/// handler's, called by the interrupt checker between two pieces of work)
/// places its arrays in a segment of its own, and the outer call's arena
/// is this thread's again once it returns, however it returns.
pub(super) fn in_segment<R>(capacity: usize, work: impl FnOnce() -> Result<R>) -> Result<R> {
    /// Puts the arena of the enclosing call (or none) back in the slot.
    struct Restore(Option<SegmentArena>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            ARENA.with(|arena| *arena.borrow_mut() = outer);
        }
    }
    let arena = SegmentArena::new(capacity)?;
    let _restore = Restore(ARENA.with(|cell| cell.borrow_mut().replace(arena)));
    work()
}

/// Write `fill` (one element's bytes) over all of `out`.
fn fill_with(out: &mut [u8], fill: &[u8]) {
    if out.is_empty() {
        return;
    }
    out[..fill.len()].copy_from_slice(fill);
    let mut done = fill.len();
    while done < out.len() {
        let n = done.min(out.len() - done);
        out.copy_within(..n, done);
        done += n;
    }
}

/// New memory for an array of `dtype` and `shape`, every element `fill`
/// (the bytes of one element). `dense`: the caller is about to overwrite
/// all of it (see [`AlignedBytes::for_overwrite`]).
pub(super) fn filled(
    dtype: DType,
    shape: &[usize],
    fill: &[u8],
    dense: bool,
) -> Result<AlignedBytes> {
    debug_assert_eq!(fill.len(), dtype.size());
    let len = byte_len(dtype, shape)?;
    let dense = dense || fill.iter().any(|&b| b != 0);
    let mut bytes = if dense {
        AlignedBytes::for_overwrite(len)?
    } else {
        AlignedBytes::zeroed(len)?
    };
    // memory that is not overwritten comes zeroed: a zero fill costs
    // nothing (and untouched pages of a large allocation are never mapped)
    if fill.iter().any(|&b| b != 0) {
        fill_with(bytes.as_mut_slice(), fill);
    }
    Ok(bytes)
}

/// The array of `dtype` and `shape` over `bytes`.
pub(super) fn into_array(dtype: DType, shape: Vec<usize>, bytes: AlignedBytes) -> Result<Array> {
    Array::new(dtype, shape, Buffer::from(bytes))
}

/// A contiguous run of properties: `len` properties from `input` onwards in
/// the source go to `output` onwards in the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Run {
    pub input: usize,
    pub output: usize,
    pub len: usize,
}

/// The runs of a property mapping (`mapping[i]` is where source property
/// `i` goes): maximal stretches of consecutive destinations.
pub(super) fn runs(mapping: &[usize]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for (i, &out) in mapping.iter().enumerate() {
        match runs.last_mut() {
            Some(run) if run.output + run.len == out => run.len += 1,
            _ => runs.push(Run {
                input: i,
                output: out,
                len: 1,
            }),
        }
    }
    runs
}

/// Where one block's data goes in the merged array: the rows of `source`
/// (axes `[rows, *inner, properties]`) go to rows `rows[i]` of the
/// destination, their properties in `runs`.
pub(super) struct Scatter<'a> {
    pub source: &'a Array,
    pub rows: &'a [usize],
    pub runs: &'a [Run],
}

/// Copy every `scatter` into `out`, an array of `out_properties` properties
/// whose middle axes (`inner` elements per row and property) are those of
/// the sources.
pub(super) fn scatter_rows(
    out: &mut [u8],
    itemsize: usize,
    inner: usize,
    out_properties: usize,
    scatters: &[Scatter<'_>],
) {
    let out_row = inner * out_properties * itemsize;
    for scatter in scatters {
        let input = scatter.source.bytes();
        let shape = scatter.source.shape();
        let in_properties = shape[shape.len() - 1];
        let in_row = inner * in_properties * itemsize;
        debug_assert_eq!(scatter.rows.len() * in_row, input.len());
        let whole_rows = matches!(
            scatter.runs,
            [Run { input: 0, output: 0, len }] if *len == in_properties && *len == out_properties
        );
        if whole_rows {
            // each source row is one contiguous piece of a destination row;
            // consecutive destinations are copied at once
            let mut i = 0;
            while i < scatter.rows.len() {
                let start = scatter.rows[i];
                let mut n = 1;
                while i + n < scatter.rows.len() && scatter.rows[i + n] == start + n {
                    n += 1;
                }
                input.copy_at(i * in_row, &mut out[start * out_row..(start + n) * out_row]);
                i += n;
            }
            continue;
        }
        for (i, &row) in scatter.rows.iter().enumerate() {
            let destination = &mut out[row * out_row..(row + 1) * out_row];
            for c in 0..inner {
                let source = i * in_row + c * in_properties * itemsize;
                let destination = &mut destination[c * out_properties * itemsize..];
                for run in scatter.runs {
                    let (from, to, len) = (
                        run.input * itemsize,
                        run.output * itemsize,
                        run.len * itemsize,
                    );
                    input.copy_at(source + from, &mut destination[to..to + len]);
                }
            }
        }
    }
}

/// A new array like `like` but for its first and last axes (`rows` rows,
/// `properties` properties), every element `fill`, with the `scatters`
/// copied in.
pub(super) fn gather(
    like: &Array,
    rows: usize,
    properties: usize,
    scatters: &[Scatter<'_>],
    fill: &[u8],
) -> Result<Array> {
    let dtype = like.dtype();
    let mut shape = like.shape().to_vec();
    let inner = shape[1..shape.len() - 1].iter().product();
    shape[0] = rows;
    let last = shape.len() - 1;
    shape[last] = properties;
    // the sources do not overlap in the destination: together, as large as
    // it, they cover it
    let covered: usize = scatters.iter().map(|s| s.source.bytes().len()).sum();
    let len = byte_len(dtype, &shape)?;
    let write = |out: &mut [u8]| {
        // the arena's memory comes zeroed, as `filled`'s does
        if fill.iter().any(|&b| b != 0) {
            fill_with(out, fill);
        }
        scatter_rows(out, dtype.size(), inner, properties, scatters);
    };
    let placed = ARENA.with(|arena| arena.borrow_mut().as_mut()?.place(len, write));
    if let Some(placed) = placed {
        let (buffer, ()) = placed?;
        return Array::new(dtype, shape, buffer);
    }
    let dense = covered >= len;
    let mut out = filled(dtype, &shape, fill, dense)?;
    scatter_rows(
        out.as_mut_slice(),
        dtype.size(),
        inner,
        properties,
        scatters,
    );
    into_array(dtype, shape, out)
}

/// The data of `input` with its axes permuted: output axis `k` is input
/// axis `order[k]`. The last axis must stay last (it is copied in runs).
pub(super) fn permute_axes(input: &Array, order: &[usize]) -> Result<AlignedBytes> {
    let shape = input.shape();
    let n = shape.len();
    debug_assert!(n >= 1 && order.len() == n && order[n - 1] == n - 1);
    let itemsize = input.dtype().size();
    // the trailing axes that stay in place are copied as one run (all of
    // them, for the identity: one copy of the whole array)
    let mut first_kept = n - 1;
    while first_kept > 0 && order[first_kept - 1] == first_kept - 1 {
        first_kept -= 1;
    }
    if first_kept == 0 || input.is_empty() {
        return input.bytes().to_aligned();
    }
    let mut out = AlignedBytes::for_overwrite(input.bytes().len())?;
    let run = shape[first_kept..].iter().product::<usize>() * itemsize;
    // the kept axes merged into one last axis of the same bytes
    let mut merged = shape[..first_kept].to_vec();
    merged.push(shape[first_kept..].iter().product());
    let (shape, order) = (&merged[..], &order[..=first_kept]);
    let n = first_kept + 1;
    // strides of the input, in bytes
    let mut strides = vec![0; n];
    let mut stride = itemsize;
    for axis in (0..n).rev() {
        strides[axis] = stride;
        stride *= shape[axis];
    }
    let out_shape: Vec<usize> = order.iter().map(|&axis| shape[axis]).collect();
    let out_strides: Vec<usize> = order.iter().map(|&axis| strides[axis]).collect();
    let source = input.bytes();
    let destination = out.as_mut_slice();
    // odometer over the output's leading axes, in output order
    let mut index = vec![0usize; n - 1];
    let mut offset = 0usize;
    for chunk in destination.chunks_exact_mut(run) {
        source.copy_at(offset, chunk);
        for axis in (0..n - 1).rev() {
            index[axis] += 1;
            offset += out_strides[axis];
            if index[axis] < out_shape[axis] {
                break;
            }
            offset -= out_strides[axis] * out_shape[axis];
            index[axis] = 0;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(shape: &[usize]) -> Array {
        let n: usize = shape.iter().product();
        let values: Vec<i32> = (0..i32::try_from(n).unwrap()).collect();
        Array::from_slice(shape.to_vec(), &values).unwrap()
    }

    fn ints(bytes: &[u8]) -> Vec<i32> {
        bytes
            .chunks_exact(4)
            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    }

    #[test]
    fn fill_and_runs() {
        let bytes = filled(DType::I4, &[3, 2], &7i32.to_ne_bytes(), false).unwrap();
        assert_eq!(ints(bytes.as_slice()), vec![7; 6]);
        let bytes = filled(DType::I4, &[0, 2], &7i32.to_ne_bytes(), false).unwrap();
        assert!(bytes.as_slice().is_empty());
        assert_eq!(
            runs(&[3, 4, 0, 1, 5]),
            vec![
                Run {
                    input: 0,
                    output: 3,
                    len: 2
                },
                Run {
                    input: 2,
                    output: 0,
                    len: 2
                },
                Run {
                    input: 4,
                    output: 5,
                    len: 1
                }
            ]
        );
    }

    #[test]
    fn rows_go_where_they_are_sent() {
        // source [2 rows, 2 inner, 2 properties] into [3 rows, 2 inner, 3 properties]
        let source = array(&[2, 2, 2]);
        let mut out = filled(DType::I4, &[3, 2, 3], &(-1i32).to_ne_bytes(), false).unwrap();
        let moved = runs(&[2, 0]);
        scatter_rows(
            out.as_mut_slice(),
            4,
            2,
            3,
            &[Scatter {
                source: &source,
                rows: &[2, 0],
                runs: &moved,
            }],
        );
        assert_eq!(
            ints(out.as_slice()),
            vec![5, -1, 4, 7, -1, 6, -1, -1, -1, -1, -1, -1, 1, -1, 0, 3, -1, 2]
        );
        // whole rows, consecutive destinations
        let mut out = filled(DType::I4, &[3, 2, 2], &[0; 4], false).unwrap();
        let identity = runs(&[0, 1]);
        scatter_rows(
            out.as_mut_slice(),
            4,
            2,
            2,
            &[Scatter {
                source: &source,
                rows: &[1, 2],
                runs: &identity,
            }],
        );
        assert_eq!(
            ints(out.as_slice()),
            vec![0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7]
        );
    }

    #[test]
    fn permuted_axes() {
        // [2, 3, 4, 2] -> axes [0, 2, 1, 3]
        let input = array(&[2, 3, 4, 2]);
        let out = permute_axes(&input, &[0, 2, 1, 3]).unwrap();
        let out = ints(out.as_slice());
        let values = ints(&input.bytes().to_vec().unwrap());
        for s in 0..2 {
            for a in 0..3 {
                for b in 0..4 {
                    for p in 0..2 {
                        let original = values[((s * 3 + a) * 4 + b) * 2 + p];
                        assert_eq!(out[((s * 4 + b) * 3 + a) * 2 + p], original);
                    }
                }
            }
        }
        let empty = array(&[0, 3, 2]);
        assert!(permute_axes(&empty, &[0, 1, 2])
            .unwrap()
            .as_slice()
            .is_empty());
    }

    /// `permute_axes` by the definition: output index -> input index.
    fn naive(input: &Array, order: &[usize]) -> Vec<i32> {
        let shape = input.shape();
        let values = ints(&input.bytes().to_vec().unwrap());
        let out_shape: Vec<usize> = order.iter().map(|&a| shape[a]).collect();
        let total: usize = shape.iter().product();
        let mut out = Vec::with_capacity(total);
        for flat in 0..total {
            let mut rest = flat;
            let mut out_index = vec![0; shape.len()];
            for axis in (0..shape.len()).rev() {
                out_index[axis] = rest % out_shape[axis];
                rest /= out_shape[axis];
            }
            let mut in_index = vec![0; shape.len()];
            for (k, &axis) in order.iter().enumerate() {
                in_index[axis] = out_index[k];
            }
            let offset = in_index
                .iter()
                .zip(shape)
                .fold(0, |acc, (&i, &n)| acc * n + i);
            out.push(values[offset]);
        }
        out
    }

    #[test]
    fn kept_trailing_axes_are_copied_in_one_run() {
        let input = array(&[2, 3, 4, 2]);
        for order in [
            [0, 1, 2, 3],
            [1, 0, 2, 3],
            [0, 2, 1, 3],
            [2, 1, 0, 3],
            [1, 2, 0, 3],
        ] {
            let out = permute_axes(&input, &order).unwrap();
            assert_eq!(ints(out.as_slice()), naive(&input, &order), "{order:?}");
        }
    }
}
