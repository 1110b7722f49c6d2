//! N-d arrays: an element type, a shape, and a [`Buffer`] holding the data.

use std::fmt;

use crate::buffer::{AlignedBytes, Buffer};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};

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

    /// A deep copy, in new memory blockmap owns.
    pub fn deep_copy(&self) -> Result<Self> {
        Array::new(
            self.dtype,
            self.shape.clone(),
            Buffer::copy_from(self.buffer.as_slice())?,
        )
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

    /// The raw bytes, row-major.
    pub fn bytes(&self) -> &[u8] {
        self.buffer.as_slice()
    }

    /// A typed view of the data, when `T` is the element type.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        if T::DTYPE != self.dtype {
            return Err(Error::invalid(format!(
                "array of {} viewed as {}",
                self.dtype,
                T::DTYPE
            )));
        }
        // alignment was checked in `new`, the length follows from the shape
        debug_assert!(self.buffer.is_aligned_to(std::mem::align_of::<T>()));
        // SAFETY: the buffer holds `len()` elements of `T` (checked in `new`),
        // is aligned for `T` (checked in `new`), lives as long as `self`, and
        // `T: Element` accepts every bit pattern.
        Ok(unsafe { std::slice::from_raw_parts(self.buffer.as_ptr().cast::<T>(), self.len()) })
    }
}

impl PartialEq for Array {
    /// Same element type, same shape, same bytes.
    fn eq(&self, other: &Self) -> bool {
        self.dtype == other.dtype && self.shape == other.shape && self.bytes() == other.bytes()
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
    fn typed_views() {
        let array = Array::from_slice(vec![2, 2], &[1.0f64, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(array.as_slice::<f64>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        assert!(array.as_slice::<i64>().is_err());
        assert_eq!(array.len(), 4);
        let copy = array.deep_copy().unwrap();
        assert_eq!(copy, array);
        assert_ne!(copy.buffer().as_ptr(), array.buffer().as_ptr());
    }
}
