//! A `Write + Seek` over memory of fixed capacity.

use std::io::{Seek, SeekFrom, Write};
use std::mem::MaybeUninit;

/// Writes into memory of fixed capacity that may be uninitialised, never
/// reading it: the target for building an archive in place, in memory
/// blockmap owns or in a Python `bytes` object. Unlike `Cursor`, seeking
/// from the end is relative to what was written, not to the capacity;
/// writing past the capacity fails with `WriteZero`.
#[derive(Debug)]
pub struct FixedWriter<'a> {
    memory: &'a mut [MaybeUninit<u8>],
    position: usize,
    len: usize,
}

impl<'a> FixedWriter<'a> {
    /// A writer into `memory`, which need not be initialised.
    pub fn new(memory: &'a mut [MaybeUninit<u8>]) -> Self {
        FixedWriter {
            memory,
            position: 0,
            len: 0,
        }
    }

    /// A writer into initialised bytes.
    pub fn over_bytes(bytes: &'a mut [u8]) -> Self {
        let len = bytes.len();
        // SAFETY: `MaybeUninit<u8>` has the layout of `u8`; the writer only
        // ever stores initialised bytes, so `bytes` stays initialised.
        let memory = unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast(), len) };
        FixedWriter::new(memory)
    }

    /// Number of bytes written: the end of the furthest write. Every byte
    /// before it has been written.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Write for FixedWriter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let end = self
            .position
            .checked_add(data.len())
            .filter(|&end| end <= self.memory.len())
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::WriteZero, "buffer full"))?;
        let target = &mut self.memory[self.position..end];
        // SAFETY: `target` and `data` have the same length, `u8` and
        // `MaybeUninit<u8>` the same layout, and a `&[u8]` cannot overlap
        // the `&mut` memory this writer holds.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), target.as_mut_ptr().cast(), data.len());
        }
        self.position = end;
        self.len = self.len.max(end);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Seek for FixedWriter<'_> {
    fn seek(&mut self, from: SeekFrom) -> std::io::Result<u64> {
        let target = match from {
            SeekFrom::Start(offset) => usize::try_from(offset).ok(),
            SeekFrom::Current(offset) => isize::try_from(offset)
                .ok()
                .and_then(|o| self.position.checked_add_signed(o)),
            SeekFrom::End(offset) => isize::try_from(offset)
                .ok()
                .and_then(|o| self.len.checked_add_signed(o)),
        };
        // never past what was written: every byte below `len` is initialised
        self.position = target
            .filter(|&p| p <= self.len)
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad seek"))?;
        Ok(self.position as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_seeks_and_refuses_overflow() {
        let mut bytes = [0u8; 8];
        let mut writer = FixedWriter::over_bytes(&mut bytes);
        writer.write_all(b"abcdef").unwrap();
        assert_eq!(writer.seek(SeekFrom::End(-2)).unwrap(), 4);
        writer.write_all(b"XY").unwrap();
        assert_eq!(writer.seek(SeekFrom::Start(1)).unwrap(), 1);
        writer.write_all(b"b").unwrap();
        assert!(
            writer.seek(SeekFrom::Start(7)).is_err(),
            "past what was written"
        );
        assert!(writer.seek(SeekFrom::Current(-5)).is_err());
        writer.seek(SeekFrom::End(0)).unwrap();
        let error = writer.write_all(b"123").unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::WriteZero);
        assert_eq!(writer.len(), 6);
        assert_eq!(&bytes[..6], b"abcdXY");
    }

    #[test]
    fn uninitialised_memory() {
        let mut memory = vec![MaybeUninit::<u8>::uninit(); 4];
        let mut writer = FixedWriter::new(&mut memory);
        writer.write_all(&[1, 2, 3]).unwrap();
        assert_eq!(writer.len(), 3);
        // SAFETY: the first three bytes were written above.
        let written: Vec<u8> = memory[..3]
            .iter()
            .map(|b| unsafe { b.assume_init() })
            .collect();
        assert_eq!(written, vec![1, 2, 3]);
    }
}
