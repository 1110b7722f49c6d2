//! Little-endian integers written into and read out of bytes, and the
//! bounded cursor decoders read through: the one place the zip records
//! (`zip/`), the NPY headers and the dataset layout (`dataset/v2/`) do
//! either.
//!
//! Every decoder reads bytes it owns (copied out of a file, a mapping or
//! a caller's buffer first: the aliasing rule, buffer/mod.rs). The
//! fixed-offset readers ([`le16`], [`le32`], [`le64`]) are for records
//! whose length was checked before; [`Cursor`] checks each length against
//! what is left, so that hostile bytes give an [`Error::Format`], never a
//! panic nor an allocation larger than the bytes read.

use crate::error::{Error, Result};

/// Append `value`, little-endian.
pub(crate) fn put_u16(out: &mut Vec<u8>, value: u16) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Append `value`, little-endian.
pub(crate) fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Append `value`, little-endian.
pub(crate) fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// The little-endian `u16` at `at` (the caller checked `bytes` holds it).
pub(crate) fn le16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

/// The little-endian `u32` at `at` (the caller checked `bytes` holds it).
pub(crate) fn le32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// The little-endian `u64` at `at` (the caller checked `bytes` holds it).
pub(crate) fn le64(bytes: &[u8], at: usize) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(raw)
}

/// A reader of bytes that checks every length against what is left. Its
/// errors are format errors naming what it reads (`what`, as "dataset
/// file: bad schema record") and where it stopped.
#[derive(Debug)]
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Cursor { bytes, at: 0, what }
    }

    /// The format error of what is read, with `detail` and the position.
    pub fn bad(&self, detail: &str) -> Error {
        Error::format(format!("{} ({detail}, at byte {})", self.what, self.at))
    }

    /// How many bytes were read.
    pub fn position(&self) -> usize {
        self.at
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| self.bad("truncated"))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.at..]
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16> {
        Ok(le16(self.take(2)?, 0))
    }

    pub fn u32(&mut self) -> Result<u32> {
        Ok(le32(self.take(4)?, 0))
    }

    pub fn u64(&mut self) -> Result<u64> {
        Ok(le64(self.take(8)?, 0))
    }

    /// A count (`u32`) of items each at least `each` bytes long: bounded
    /// by what is left, so that no allocation exceeds the bytes read.
    pub fn count(&mut self, each: usize) -> Result<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(each.max(1)) > self.bytes.len() - self.at {
            return Err(self.bad("a count larger than the record"));
        }
        Ok(n)
    }

    /// A string: its length (`u32`), then as many bytes of UTF-8.
    pub fn str(&mut self) -> Result<String> {
        let n = self.u32()? as usize;
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes)
            .map(str::to_string)
            .map_err(|_| self.bad("a name that is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_round_trip_little_endian() {
        let mut out = Vec::new();
        put_u16(&mut out, 0x0102);
        put_u32(&mut out, 0x0304_0506);
        put_u64(&mut out, 0x0708_090a_0b0c_0d0e);
        assert_eq!(out, [2, 1, 6, 5, 4, 3, 14, 13, 12, 11, 10, 9, 8, 7]);
        assert_eq!(
            (le16(&out, 0), le32(&out, 2), le64(&out, 6)),
            (0x0102, 0x0304_0506, 0x0708_090a_0b0c_0d0e)
        );
        let mut c = Cursor::new(&out, "test bytes");
        assert_eq!(
            (c.u16().unwrap(), c.u32().unwrap(), c.u64().unwrap()),
            (0x0102, 0x0304_0506, 0x0708_090a_0b0c_0d0e)
        );
        assert!(c.rest().is_empty());
    }

    #[test]
    fn the_cursor_refuses_what_is_not_there() {
        let mut bytes = Vec::new();
        put_u32(&mut bytes, 3);
        bytes.extend_from_slice(b"abc");
        put_u32(&mut bytes, 1000);
        let mut c = Cursor::new(&bytes, "test record");
        assert_eq!(c.str().unwrap(), "abc");
        assert_eq!(c.position(), 7);
        // a count of 1000 items of 4 bytes in 0 bytes: refused, not
        // allocated
        let error = c.count(4).unwrap_err();
        assert!(matches!(error, Error::Format(_)), "{error}");
        assert_eq!(
            error.to_string(),
            "test record (a count larger than the record, at byte 11)"
        );
        let mut c = Cursor::new(&bytes[..5], "test record");
        let error = c.str().unwrap_err().to_string();
        assert_eq!(error, "test record (truncated, at byte 4)");
        assert!(Cursor::new(&bytes, "t").take(usize::MAX).is_err());
        let mut bad_utf8 = Vec::new();
        put_u32(&mut bad_utf8, 1);
        bad_utf8.push(0xff);
        assert!(Cursor::new(&bad_utf8, "t").str().is_err());
    }
}
