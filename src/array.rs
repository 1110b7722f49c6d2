//! N-d arrays: an element type, a shape, and a [`Buffer`] holding the data.

use std::fmt;

use crate::buffer::{AlignedBytes, Buffer, RawBytes};
use crate::dtype::{ByteOrder, DType, Element};
use crate::error::{Error, Result};

/// How raw array data, from a file or a transport, lays out its elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// byte order of multi-byte elements
    pub order: ByteOrder,
    /// whether the data is column-major (Fortran order)
    pub fortran: bool,
}

impl Layout {
    /// Native byte order, row-major: what an [`Array`] holds.
    pub const NATIVE: Layout = Layout {
        order: ByteOrder::NATIVE,
        fortran: false,
    };

    /// Row-major data in byte order `order`.
    pub fn c_order(order: ByteOrder) -> Layout {
        Layout {
            order,
            fortran: false,
        }
    }

    fn needs_swap(self, dtype: DType) -> bool {
        self.order != ByteOrder::NATIVE && dtype.size() > 1
    }

    fn needs_transpose(self, shape: &[usize]) -> bool {
        self.fortran && shape.len() > 1
    }
}

/// A C-contiguous, native-byte-order N-d array viewing a [`Buffer`].
///
/// Invariants (checked by [`Array::new`]): the buffer holds exactly
/// `product(shape) * dtype.size()` bytes and starts at an address aligned
/// for the element type, so that typed views are always sound.
#[derive(Clone)]
pub struct Array {
    dtype: DType,
    shape: Vec<usize>,
    buffer: Buffer,
}

/// Number of bytes of an array, or an error when it overflows.
pub fn byte_len(dtype: DType, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(dtype.size(), |acc, &dim| acc.checked_mul(dim))
        .filter(|&len| isize::try_from(len).is_ok())
        .ok_or_else(|| Error::invalid(format!("array shape {shape:?} is too large")))
}

impl Array {
    /// Wrap `buffer` as an array of `dtype` with `shape`.
    pub fn new(dtype: DType, shape: Vec<usize>, buffer: Buffer) -> Result<Self> {
        let expected = byte_len(dtype, &shape)?;
        if buffer.len() != expected {
            return Err(Error::invalid(format!(
                "an array of {dtype} with shape {shape:?} needs {expected} bytes, \
                 the buffer has {}",
                buffer.len()
            )));
        }
        if !buffer.is_aligned_to(dtype.alignment()) {
            return Err(Error::invalid(format!(
                "memory for {dtype} data must be aligned to {} bytes",
                dtype.alignment()
            )));
        }
        Ok(Array {
            dtype,
            shape,
            buffer,
        })
    }

    /// An array of `dtype` and `shape` over raw data laid out as `layout`:
    /// **a view of `buffer` when it is aligned for `dtype`, native and
    /// row-major; otherwise a copy**, byte-swapped or transposed as needed,
    /// in new memory that is read-only when `buffer` was. This is the one
    /// rule every reader (files, buffers, pickles, shared memory) follows.
    pub fn view_or_convert(
        dtype: DType,
        shape: Vec<usize>,
        layout: Layout,
        buffer: Buffer,
    ) -> Result<Self> {
        check_len(dtype, &shape, buffer.len())?;
        let (swap, transpose) = (layout.needs_swap(dtype), layout.needs_transpose(&shape));
        if !swap && !transpose && buffer.is_aligned_to(dtype.alignment()) {
            return Array::new(dtype, shape, buffer);
        }
        let writable = buffer.is_writable();
        let mut out = if transpose {
            let mut out = AlignedBytes::for_overwrite(buffer.len())?;
            fortran_to_c(buffer.raw(), out.as_mut_slice(), dtype.size(), &shape)?;
            out
        } else {
            buffer.raw().to_aligned()?
        };
        if swap {
            swap_bytes(out.as_mut_slice(), dtype);
        }
        Array::new(dtype, shape, Buffer::from(out).with_access(writable))
    }

    /// [`Array::view_or_convert`] for data in memory blockmap just
    /// allocated (read from a file): byte-swapped in place, copied only to
    /// transpose.
    pub fn from_owned_bytes(
        dtype: DType,
        shape: Vec<usize>,
        layout: Layout,
        mut bytes: AlignedBytes,
    ) -> Result<Self> {
        check_len(dtype, &shape, bytes.len())?;
        if layout.needs_transpose(&shape) {
            return Array::view_or_convert(dtype, shape, layout, Buffer::from(bytes));
        }
        if layout.needs_swap(dtype) {
            swap_bytes(bytes.as_mut_slice(), dtype);
        }
        Array::new(dtype, shape, Buffer::from(bytes))
    }

    /// A zero-filled array in memory blockmap owns.
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Result<Self> {
        let bytes = AlignedBytes::zeroed(byte_len(dtype, &shape)?)?;
        Array::new(dtype, shape, Buffer::from(bytes))
    }

    /// An array of `T` owning a copy of `data`.
    pub fn from_slice<T: Element>(shape: Vec<usize>, data: &[T]) -> Result<Self> {
        // SAFETY: `T: Element` has no padding and every byte of it is
        // initialised, so its memory can be read as `size_of_val` bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data))
        };
        Array::new(T::DTYPE, shape, Buffer::copy_from(bytes)?)
    }

    /// A deep copy, in new memory blockmap owns (an error when the memory
    /// is gone: a mapped file that another program truncated).
    pub fn deep_copy(&self) -> Result<Self> {
        let copy = Buffer::from(self.buffer.raw().to_aligned()?);
        self.buffer.check_intact()?;
        Array::new(self.dtype, self.shape.clone(), copy)
    }

    /// This array with elements of `dtype`, in new memory blockmap owns,
    /// converted as numpy's `astype` converts them (see [`crate::cast`]);
    /// the array itself (sharing its memory) when it already is of `dtype`.
    /// A writable result, whatever this array's memory.
    pub fn cast_to(&self, dtype: DType) -> Result<Self> {
        if dtype == self.dtype {
            return Ok(self.clone());
        }
        let (from_size, to_size) = (self.dtype.size(), dtype.size());
        // memory others may write is read by copies, a piece at a time (the
        // aliasing rule, buffer/mod.rs); private memory is read in place
        let raw = self.buffer.raw();
        let private = raw.private();
        let mut scratch = Vec::new();
        let bytes =
            AlignedBytes::filled_in_order(byte_len(dtype, &self.shape)?, |offset, piece| {
                // pieces hold whole elements: their length is a multiple of
                // every element size but at the end
                let first = offset / to_size;
                let count = piece.len() / to_size;
                let (start, len) = (first * from_size, count * from_size);
                let from: &[u8] = if let Some(all) = private {
                    &all[start..start + len]
                } else {
                    scratch.resize(len, 0);
                    raw.copy_at(start, &mut scratch);
                    &scratch
                };
                crate::cast::cast(self.dtype, dtype, from, piece);
                Ok(())
            })?;
        // a mapped file truncated by another program: refuse the zeros
        self.buffer.check_intact()?;
        Array::new(dtype, self.shape.clone(), Buffer::from(bytes))
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer holding the data.
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// The raw bytes, row-major, read by copying (the aliasing rule,
    /// `buffer/mod.rs`).
    pub fn bytes(&self) -> RawBytes<'_> {
        self.buffer.raw()
    }

    /// The same array in private memory (see "Aliasing" in
    /// `buffer/mod.rs`): its own memory when it already is, or when it is
    /// memory blockmap allocated that nothing else references (then frozen
    /// read-only), a read-only copy otherwise.
    pub fn into_private(self) -> Result<Self> {
        let buffer = if self.buffer.is_private() {
            self.buffer
        } else {
            let frozen = self.buffer.into_read_only();
            if frozen.is_private() {
                frozen
            } else {
                let copy = frozen.snapshot()?;
                frozen.check_intact()?;
                copy
            }
        };
        Ok(Array { buffer, ..self })
    }

    /// A typed copy of the data, when `T` is the element type: made by raw
    /// copies, so any array's memory can be read this way (see "Aliasing"
    /// in `buffer/mod.rs`).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype {
            return Err(Error::invalid(format!(
                "array of {} read as {}",
                self.dtype,
                T::DTYPE
            )));
        }
        let mut out: Vec<T> = Vec::new();
        out.try_reserve_exact(self.len())?;
        let spare = out.spare_capacity_mut();
        // SAFETY: `u8` has no alignment, `spare` has room for `len()`
        // elements, `self.buffer.len()` bytes (checked in `new`), and is a
        // `&mut` into the Vec's own memory: the bytes are initialised after.
        let target = unsafe {
            std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<u8>(), self.buffer.len())
        };
        self.buffer.raw().copy_to(target)?;
        // SAFETY: the `len()` elements were written in full above, and
        // `T: Element` accepts every bit pattern.
        unsafe { out.set_len(self.len()) };
        Ok(out)
    }

    /// A typed view of the data, when `T` is the element type and the
    /// memory is private (see "Aliasing" in `buffer/mod.rs`; labels always
    /// are): memory others may write is read through [`Array::bytes`].
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        if T::DTYPE != self.dtype {
            return Err(Error::invalid(format!(
                "array of {} viewed as {}",
                self.dtype,
                T::DTYPE
            )));
        }
        if !self.buffer.is_private() {
            return Err(Error::internal(
                "a typed view of array memory others may write (read it by copying)",
            ));
        }
        // alignment was checked in `new`, the length follows from the shape
        debug_assert!(self.buffer.is_aligned_to(std::mem::align_of::<T>()));
        // SAFETY: the buffer holds `len()` elements of `T` (checked in `new`),
        // is aligned for `T` (checked in `new`), lives as long as `self`,
        // `T: Element` accepts every bit pattern, and the memory is private
        // (checked above): nothing writes it while the slice lives (the
        // aliasing rule, buffer/mod.rs).
        Ok(unsafe { std::slice::from_raw_parts(self.buffer.as_ptr().cast::<T>(), self.len()) })
    }
}

fn check_len(dtype: DType, shape: &[usize], len: usize) -> Result<()> {
    let expected = byte_len(dtype, shape)?;
    if len != expected {
        return Err(Error::format(format!(
            "{len} bytes of data for {dtype} of shape {shape:?}, which needs {expected}"
        )));
    }
    Ok(())
}

/// Reverse the bytes of every element (complex numbers: of each half).
fn swap_bytes(data: &mut [u8], dtype: DType) {
    let size = match dtype {
        DType::C8 => 4,
        DType::C16 => 8,
        other => other.size(),
    };
    for element in data.chunks_exact_mut(size) {
        element.reverse();
    }
}

/// Copy column-major `src` into row-major `dst`, elements of `size` bytes.
fn fortran_to_c(src: RawBytes<'_>, dst: &mut [u8], size: usize, shape: &[usize]) -> Result<()> {
    let n = shape.len();
    // strides (in elements) of the Fortran-ordered source
    let mut strides = vec![1usize; n];
    for d in 1..n {
        strides[d] = strides[d - 1] * shape[d - 1];
    }
    let count: usize = shape.iter().product();
    let mut index = vec![0usize; n];
    for i in 0..count {
        let offset: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
        src.get(offset * size, size)
            .ok_or_else(|| Error::internal("transposed element out of range"))?
            .copy_to(&mut dst[i * size..(i + 1) * size])?;
        // advance the row-major index
        for d in (0..n).rev() {
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    Ok(())
}

impl PartialEq for Array {
    /// Same element type, same shape, same bytes.
    fn eq(&self, other: &Self) -> bool {
        self.dtype == other.dtype
            && self.shape == other.shape
            && self.bytes().same_as(other.bytes())
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Array")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("buffer", &self.buffer)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_are_written_a_piece_at_a_time_element_for_element() {
        // 3 MiB of int32 into int64 (6 MiB), int8 and float64: pieces of
        // the output start mid-input, and every element is its own cast
        let count = 3 << 18;
        let data: Vec<i32> = (0..count)
            .map(|i| i32::try_from(i).unwrap().wrapping_mul(-7919))
            .collect();
        let array = Array::from_slice(vec![count / 4, 4], &data).unwrap();
        let wide = array.cast_to(DType::I8).unwrap();
        assert_eq!(wide.shape(), &[count / 4, 4]);
        assert!(wide.buffer().is_writable());
        let wide = wide.to_vec::<i64>().unwrap();
        let narrow = array.cast_to(DType::I1).unwrap();
        let narrow = narrow.to_vec::<i8>().unwrap();
        let floats = array.cast_to(DType::F8).unwrap();
        let floats = floats.to_vec::<f64>().unwrap();
        for (i, &value) in data.iter().enumerate() {
            assert_eq!(wide[i], i64::from(value));
            assert_eq!(narrow[i], value.to_le_bytes()[0].cast_signed());
            assert_eq!(floats[i].to_bits(), f64::from(value).to_bits());
        }
        // the same dtype: the same memory
        let same = array.cast_to(DType::I4).unwrap();
        assert_eq!(same.bytes().as_ptr(), array.bytes().as_ptr());
        let empty = Array::zeros(DType::F8, vec![0, 3]).unwrap();
        assert_eq!(empty.cast_to(DType::C8).unwrap().shape(), &[0, 3]);
    }

    #[test]
    fn size_must_match_shape() {
        let buffer = Buffer::copy_from(&[0u8; 24]).unwrap();
        assert!(Array::new(DType::F8, vec![3], buffer.clone()).is_ok());
        assert!(Array::new(DType::F8, vec![2], buffer.clone()).is_err());
        assert!(Array::new(DType::F4, vec![2, 3], buffer.clone()).is_ok());
        assert!(Array::new(DType::F4, vec![2, 2], buffer).is_err());
    }

    #[test]
    fn overflowing_shape() {
        assert!(byte_len(DType::F8, &[usize::MAX, 2]).is_err());
        assert!(byte_len(DType::U1, &[1 << 32, 1 << 32]).is_err());
        assert_eq!(byte_len(DType::F8, &[0, usize::MAX]).unwrap(), 0);
        assert_eq!(byte_len(DType::C16, &[]).unwrap(), 16);
    }

    #[test]
    fn misaligned_memory_is_refused() {
        let buffer = Buffer::copy_from(&[0u8; 17]).unwrap().slice(1, 16).unwrap();
        assert!(Array::new(DType::F8, vec![2], buffer.clone()).is_err());
        assert!(Array::new(DType::U1, vec![16], buffer).is_ok());
    }

    #[test]
    fn fortran_to_c_order() {
        // a 2x3 array [[0, 1, 2], [3, 4, 5]] stored column-major
        let src: Vec<u8> = vec![0, 3, 1, 4, 2, 5];
        let mut dst = vec![0u8; 6];
        fortran_to_c(RawBytes::from_slice(&src), &mut dst, 1, &[2, 3]).unwrap();
        assert_eq!(dst, vec![0, 1, 2, 3, 4, 5]);
        // 2x2x2
        let src: Vec<u8> = vec![0, 4, 2, 6, 1, 5, 3, 7];
        let mut dst = vec![0u8; 8];
        fortran_to_c(RawBytes::from_slice(&src), &mut dst, 1, &[2, 2, 2]).unwrap();
        assert_eq!(dst, (0..8).collect::<Vec<u8>>());
    }

    #[test]
    fn byte_swapping() {
        let mut data = 1.5f64.to_be_bytes().to_vec();
        swap_bytes(&mut data, DType::F8);
        assert_eq!(data, 1.5f64.to_ne_bytes());
        let mut complex: Vec<u8> = [1.0f32.to_be_bytes(), 2.0f32.to_be_bytes()].concat();
        swap_bytes(&mut complex, DType::C8);
        assert_eq!(complex[..4], 1.0f32.to_ne_bytes());
        assert_eq!(complex[4..], 2.0f32.to_ne_bytes());
    }

    #[test]
    fn view_or_convert_views_only_native_aligned_data() {
        let bytes: Vec<u8> = [1.0f64, 2.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let buffer = Buffer::copy_from(&bytes).unwrap().into_read_only();
        let view =
            Array::view_or_convert(DType::F8, vec![2], Layout::NATIVE, buffer.clone()).unwrap();
        assert_eq!(view.buffer().as_ptr(), buffer.as_ptr());

        // misaligned: copied, and a copy of read-only memory stays read-only
        let mut shifted = vec![0u8; 17];
        shifted[1..].copy_from_slice(&bytes);
        let misaligned = Buffer::copy_from(&shifted).unwrap().slice(1, 16).unwrap();
        let copy = Array::view_or_convert(
            DType::F8,
            vec![2],
            Layout::NATIVE,
            misaligned.clone().into_read_only(),
        )
        .unwrap();
        assert_ne!(copy.buffer().as_ptr(), misaligned.as_ptr());
        assert!(!copy.buffer().is_writable());
        assert_eq!(copy.to_vec::<f64>().unwrap(), &[1.0, 2.0]);

        // the other byte order: swapped
        let swapped: Vec<u8> = [1.0f64, 2.0].iter().flat_map(|v| v.to_be_bytes()).collect();
        let big = Layout::c_order(ByteOrder::Big);
        let converted = Array::view_or_convert(
            DType::F8,
            vec![2],
            big,
            Buffer::copy_from(&swapped).unwrap(),
        );
        if cfg!(target_endian = "little") {
            assert_eq!(converted.unwrap().to_vec::<f64>().unwrap(), &[1.0, 2.0]);
        }
        let owned = Array::from_owned_bytes(
            DType::F8,
            vec![2],
            big,
            AlignedBytes::copy_from(&swapped).unwrap(),
        )
        .unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(owned.to_vec::<f64>().unwrap(), &[1.0, 2.0]);
        }
        // Fortran order: transposed
        let column_major: Vec<u8> = vec![0, 3, 1, 4, 2, 5];
        let fortran = Layout {
            order: ByteOrder::NATIVE,
            fortran: true,
        };
        let transposed = Array::view_or_convert(
            DType::U1,
            vec![2, 3],
            fortran,
            Buffer::copy_from(&column_major).unwrap(),
        )
        .unwrap();
        assert_eq!(transposed.bytes().to_vec().unwrap(), &[0, 1, 2, 3, 4, 5]);
        // a wrong length is a format error
        assert!(matches!(
            Array::view_or_convert(DType::F8, vec![3], Layout::NATIVE, buffer),
            Err(Error::Format(_))
        ));
    }

    #[test]
    fn typed_views() {
        let array = Array::from_slice(vec![2, 2], &[1.0f64, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(array.to_vec::<f64>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        assert!(array.to_vec::<i64>().is_err());
        // a typed view only of private memory (the aliasing rule)
        assert!(array.as_slice::<f64>().is_err(), "writable memory");
        let private = array.clone().into_private().unwrap();
        assert!(!private.buffer().is_writable());
        assert_ne!(
            private.buffer().as_ptr(),
            array.buffer().as_ptr(),
            "shared: copied"
        );
        assert_eq!(private.as_slice::<f64>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        let ptr = array.buffer().as_ptr();
        drop(private);
        let frozen = array.into_private().unwrap();
        assert_eq!(
            frozen.buffer().as_ptr(),
            ptr,
            "last handle: frozen in place"
        );
        assert!(frozen.as_slice::<f64>().is_ok());
        assert_eq!(frozen.len(), 4);
        let copy = frozen.deep_copy().unwrap();
        assert_eq!(copy, frozen);
        assert_ne!(copy.buffer().as_ptr(), frozen.buffer().as_ptr());
    }
}
