//! An archive held in several buffers, one after the other: the form a
//! pickle of protocol < 5 carries a large map in (see docs/pickle.md,
//! version 2). It is read as one archive without joining the pieces: the
//! archive reader reads the structure through [`PiecesReader`], and each array
//! views the piece that holds it.

use std::io::{Read, Seek, SeekFrom};

use crate::buffer::{seek_target, AlignedBytes, Buffer};
use crate::error::{Error, Result};

/// Buffers read as one archive: piece `i` holds the bytes from `starts[i]`.
#[derive(Clone)]
pub struct Pieces {
    buffers: Vec<Buffer>,
    /// where each piece starts in the archive (ascending; the first is 0)
    starts: Vec<usize>,
    len: usize,
    /// whether every piece may be written: the buffers made here (empty,
    /// or copies across pieces) are read-only otherwise, as views are
    writable: bool,
}

impl Pieces {
    /// The archive in `buffers`, in order (empty ones are left out).
    pub fn new(buffers: Vec<Buffer>) -> Result<Self> {
        let buffers: Vec<Buffer> = buffers.into_iter().filter(|b| !b.is_empty()).collect();
        let mut starts = Vec::new();
        starts.try_reserve_exact(buffers.len())?;
        let mut len = 0usize;
        for buffer in &buffers {
            starts.push(len);
            len = len
                .checked_add(buffer.len())
                .ok_or_else(|| Error::format("the pieces are larger than memory"))?;
        }
        let writable = buffers.iter().all(Buffer::is_writable);
        Ok(Pieces {
            buffers,
            starts,
            len,
            writable,
        })
    }

    /// The archive in one buffer.
    pub fn one(buffer: Buffer) -> Self {
        let len = buffer.len();
        let writable = buffer.is_writable();
        if len == 0 {
            return Pieces {
                buffers: Vec::new(),
                starts: Vec::new(),
                len,
                writable,
            };
        }
        Pieces {
            buffers: vec![buffer],
            starts: vec![0],
            len,
            writable,
        }
    }

    /// The piece holding byte `offset` (`offset < len`).
    fn piece_of(&self, offset: usize) -> usize {
        self.starts.partition_point(|&start| start <= offset) - 1
    }

    /// Bytes `[offset, offset + len)`: a view of the piece holding them, or
    /// a copy when they lie across pieces; None when outside the archive.
    pub fn slice(&self, offset: usize, len: usize) -> Result<Option<Buffer>> {
        let Some(end) = offset.checked_add(len).filter(|&end| end <= self.len) else {
            return Ok(None);
        };
        if len == 0 {
            return Ok(Some(self.made(Buffer::empty())));
        }
        let first = self.piece_of(offset);
        let start = self.starts[first];
        let buffer = &self.buffers[first];
        if end - start <= buffer.len() {
            return buffer.slice(offset - start, len).map(Some);
        }
        let mut bytes = AlignedBytes::for_overwrite(len)?;
        let mut reader = self.reader();
        reader.position = offset;
        reader
            .read_exact(bytes.as_mut_slice())
            .map_err(|e| Error::internal(format!("reading pieces in bounds failed: {e}")))?;
        Ok(Some(self.made(Buffer::from(bytes))))
    }

    /// A buffer made here for bytes of the archive, read-only when a piece
    /// is: read-only input gives read-only arrays, as views of it are.
    fn made(&self, buffer: Buffer) -> Buffer {
        if self.writable {
            buffer
        } else {
            buffer.into_read_only()
        }
    }

    /// A `Read + Seek` over the bytes, from the start.
    pub fn reader(&self) -> PiecesReader {
        PiecesReader {
            pieces: self.clone(),
            position: 0,
        }
    }
}

/// Reads [`Pieces`] as one stream of bytes.
pub struct PiecesReader {
    pieces: Pieces,
    position: usize,
}

impl Read for PiecesReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.position >= self.pieces.len || out.is_empty() {
            return Ok(0);
        }
        let index = self.pieces.piece_of(self.position);
        let piece = self.pieces.buffers[index].raw();
        let at = self.position - self.pieces.starts[index];
        let n = (piece.len() - at).min(out.len());
        piece.copy_at(at, &mut out[..n]);
        self.position += n;
        Ok(n)
    }
}

impl Seek for PiecesReader {
    fn seek(&mut self, from: SeekFrom) -> std::io::Result<u64> {
        let target = seek_target(from, self.position, self.pieces.len);
        // past the end is allowed (reads there give nothing), before the
        // start is not
        self.position = target.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start")
        })?;
        Ok(self.position as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(parts: &[&[u8]]) -> Pieces {
        Pieces::new(
            parts
                .iter()
                .map(|p| Buffer::from(AlignedBytes::copy_from(p).unwrap()))
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn reads_and_seeks_across_pieces() {
        let all = pieces(&[b"abc", b"", b"defg", b"h"]);
        assert_eq!(all.len, 8);
        let mut text = String::new();
        all.reader().read_to_string(&mut text).unwrap();
        assert_eq!(text, "abcdefgh");
        let mut reader = all.reader();
        reader.seek(SeekFrom::End(-3)).unwrap();
        let mut two = [0u8; 2];
        reader.read_exact(&mut two).unwrap();
        assert_eq!(&two, b"fg");
        assert!(reader.seek(SeekFrom::Current(-10)).is_err());
        reader.seek(SeekFrom::Start(100)).unwrap();
        assert_eq!(reader.read(&mut two).unwrap(), 0);
    }

    #[test]
    fn slices_view_one_piece_and_copy_across() {
        let all = pieces(&[b"abc", b"defg"]);
        let inside = all.slice(3, 4).unwrap().unwrap();
        assert_eq!(inside.to_vec().unwrap(), b"defg");
        assert_eq!(
            inside.as_ptr(),
            all.buffers[1].as_ptr(),
            "a view of the second piece"
        );
        assert_eq!(all.slice(1, 4).unwrap().unwrap().to_vec().unwrap(), b"bcde");
        assert!(all.slice(5, 3).unwrap().is_none());
        assert!(all.slice(usize::MAX, 2).unwrap().is_none());
        assert!(all.slice(8, 0).unwrap().is_none());
        assert_eq!(all.slice(7, 0).unwrap().unwrap().len(), 0);
    }
}
