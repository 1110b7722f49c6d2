//! A `Write + Seek` over memory of fixed capacity.

use std::io::{Seek, SeekFrom, Write};
use std::mem::MaybeUninit;

use super::RawBytes;

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

impl FixedWriter<'_> {
    /// [`Write::write`], returning the bytes as they now lie in the
    /// writer's memory (a snapshot of `data`, which may change meanwhile).
    pub fn write_viewed(&mut self, data: RawBytes<'_>) -> std::io::Result<&[u8]> {
        let start = self.position;
        let n = self.write_raw(data)?;
        let written = &self.memory[start..start + n];
        // SAFETY: those `n` bytes were just written (initialised), `u8` and
        // `MaybeUninit<u8>` have the same layout, and the slice borrows
        // `self` (the `&mut` this takes): nothing writes them while it lives
        // (the writer's memory is its own: the aliasing rule, buffer/mod.rs).
        Ok(unsafe { std::slice::from_raw_parts(written.as_ptr().cast::<u8>(), n) })
    }
}

impl FixedWriter<'_> {
    /// [`Write::write`] from bytes others may write meanwhile, read by
    /// raw copies (the aliasing rule, buffer/mod.rs).
    fn write_raw(&mut self, data: RawBytes<'_>) -> std::io::Result<usize> {
        let end = self
            .position
            .checked_add(data.len())
            .filter(|&end| end <= self.memory.len())
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::WriteZero, "buffer full"))?;
        let target = &mut self.memory[self.position..end];
        // SAFETY: `target` and `data` have the same length, `u8` and
        // `MaybeUninit<u8>` the same layout, and a buffer's memory cannot
        // overlap the `&mut` memory this writer holds; raw pointers, no
        // `&[u8]` of the source (the aliasing rule, buffer/mod.rs).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), target.as_mut_ptr().cast(), data.len());
        }
        self.position = end;
        self.len = self.len.max(end);
        Ok(data.len())
    }
}

impl Write for FixedWriter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.write_raw(RawBytes::from_slice(data))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Where a seek from `position` in a stream of `len` bytes lands: None
/// before the start (or beyond `usize`).
pub fn seek_target(from: SeekFrom, position: usize, len: usize) -> Option<usize> {
    match from {
        SeekFrom::Start(offset) => usize::try_from(offset).ok(),
        SeekFrom::Current(offset) => isize::try_from(offset)
            .ok()
            .and_then(|o| position.checked_add_signed(o)),
        SeekFrom::End(offset) => isize::try_from(offset)
            .ok()
            .and_then(|o| len.checked_add_signed(o)),
    }
}

/// A seek of a writer: never past what was written (every byte below `len`
/// is initialised).
fn seek_written(from: SeekFrom, position: &mut usize, len: usize) -> std::io::Result<u64> {
    *position = seek_target(from, *position, len)
        .filter(|&p| p <= len)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad seek"))?;
    Ok(*position as u64)
}

impl Seek for FixedWriter<'_> {
    fn seek(&mut self, from: SeekFrom) -> std::io::Result<u64> {
        seek_written(from, &mut self.position, self.len)
    }
}

/// The length of the array data the archive writer is about to write, set
/// by it right before the data (see [`PiecedWriter`]).
pub type NextData = std::rc::Rc<std::cell::Cell<Option<usize>>>;

/// Memory for one piece, of at least the length asked: handed out by the
/// caller of [`PiecedWriter`], which keeps it alive (and unaliased) until
/// the writer is gone.
pub type PieceMemory<'a> = &'a mut [MaybeUninit<u8>];

/// Where a [`PiecedWriter`] gets its pieces.
pub trait Allocate<'a> {
    /// Memory for a piece of at least `capacity` bytes, kept alive and
    /// unaliased for 'a.
    fn allocate(&mut self, capacity: usize) -> std::io::Result<PieceMemory<'a>>;
}

struct Piece<'a> {
    /// where the piece starts in the whole
    start: usize,
    memory: PieceMemory<'a>,
}

/// Writes one stream of bytes (an archive) into pieces of memory allocated
/// as it grows, each of about `target` bytes, never reading them. When the
/// archive writer announces array data ([`NextData`]) that does not fit in
/// what is left of the current piece, the data starts a new piece of its
/// own size or more: every array lies in one piece. Every piece starts at a
/// multiple of [`ALIGNMENT`](super::ALIGNMENT) in the stream, so arrays are
/// as aligned in their piece as in the stream. Other bytes (headers,
/// labels, the central directory) may lie across two pieces. Piece `i`
/// holds the bytes from its start to the next piece's start
/// ([`PiecedWriter::lengths`]); seeking is allowed back into any piece,
/// never past what was written.
pub struct PiecedWriter<'a, A: Allocate<'a>> {
    allocate: A,
    pieces: Vec<Piece<'a>>,
    target: usize,
    /// the most the whole stream will need (an upper bound), so that the
    /// last piece is not allocated larger than what remains
    bound: usize,
    position: usize,
    len: usize,
    next_data: NextData,
    /// where the last array's data ends
    array_end: usize,
}

/// Room kept after each array in its piece (at most the target size), for
/// the headers and labels that follow it.
const ARRAY_SLACK: usize = 64 << 10;

impl<'a, A: Allocate<'a>> std::fmt::Debug for PiecedWriter<'a, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PiecedWriter")
            .field("lengths", &self.lengths())
            .field("position", &self.position)
            .finish_non_exhaustive()
    }
}

impl<'a, A: Allocate<'a>> PiecedWriter<'a, A> {
    /// A writer taking pieces of about `target` bytes from `allocate`, for
    /// a stream of at most `bound` bytes (more is written all the same, in
    /// more pieces), told of array data through [`Self::next_data`].
    pub fn new(allocate: A, target: usize, bound: usize) -> Self {
        PiecedWriter {
            allocate,
            pieces: Vec::new(),
            target: target.max(1),
            bound,
            position: 0,
            len: 0,
            next_data: NextData::default(),
            array_end: 0,
        }
    }

    /// The signal the archive writer sets before each array's data.
    pub fn next_data(&self) -> NextData {
        NextData::clone(&self.next_data)
    }

    /// The length of each piece: the bytes written from its start to the
    /// next piece's start (the rest of its memory was never written).
    pub fn lengths(&self) -> Vec<usize> {
        let mut lengths: Vec<usize> = self
            .pieces
            .windows(2)
            .map(|pair| pair[1].start - pair[0].start)
            .collect();
        if let Some(last) = self.pieces.last() {
            lengths.push(self.len - last.start);
        }
        lengths
    }

    /// Room left in the last piece, at the end of the stream.
    fn room(&self) -> usize {
        self.pieces
            .last()
            .map_or(0, |last| last.start + last.memory.len() - self.len)
    }

    /// Start a new piece at the end of the stream, of at least `need`
    /// bytes.
    fn new_piece(&mut self, need: usize) -> std::io::Result<()> {
        let memory = self.piece_memory(need)?;
        self.pieces.try_reserve(1)?;
        self.pieces.push(Piece {
            start: self.len,
            memory,
        });
        Ok(())
    }

    fn piece_memory(&mut self, need: usize) -> std::io::Result<PieceMemory<'a>> {
        let rest = self.bound.saturating_sub(self.len);
        let capacity = need.max(self.target.min(rest)).max(1);
        let memory = self.allocate.allocate(capacity)?;
        if memory.len() < capacity {
            return Err(std::io::Error::other("a piece smaller than asked"));
        }
        Ok(memory)
    }

    /// Start a new piece for `need` more bytes when the last one is full,
    /// at a multiple of [`ALIGNMENT`](super::ALIGNMENT) in the stream: the
    /// bytes written since then move to the new piece. A reader gets each
    /// piece at an aligned address of its own, so every array in a piece
    /// stays as aligned as it is in the stream (and can be viewed).
    fn new_aligned_piece(&mut self, need: usize) -> std::io::Result<()> {
        let cut = self.len - self.len % super::ALIGNMENT;
        let Some(last) = self
            .pieces
            .last()
            .filter(|last| last.start < cut && cut >= self.array_end)
        else {
            // the last piece holds less than one aligned stretch, or the
            // cut would take the end of an array: the new piece starts
            // here, unaligned (its arrays are then copied by readers that
            // need alignment; the room kept after each array makes this
            // rare)
            return self.new_piece(need);
        };
        let (from, tail) = (cut - last.start, self.len - cut);
        let memory = self.piece_memory(need.saturating_add(tail))?;
        let last = self.pieces.last().expect("checked above");
        // SAFETY: `from + tail` is at most the last piece's length (`len`
        // lies in it), those bytes were written (initialised), and the new
        // piece, of at least `tail` bytes, is another allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(
                last.memory.as_ptr().add(from),
                memory.as_mut_ptr(),
                tail,
            );
        }
        self.pieces.try_reserve(1)?;
        self.pieces.push(Piece { start: cut, memory });
        Ok(())
    }
}

impl<'a, A: Allocate<'a>> PiecedWriter<'a, A> {
    /// [`Write::write`], returning the bytes as they now lie in the
    /// writer's memory (a snapshot of `data`, which may change meanwhile).
    pub fn write_viewed(&mut self, data: RawBytes<'_>) -> std::io::Result<&[u8]> {
        let Some((index, offset, n)) = self.write_at(data)? else {
            return Ok(&[]);
        };
        let written = &self.pieces[index].memory[offset..offset + n];
        // SAFETY: those `n` bytes were just written (initialised), `u8` and
        // `MaybeUninit<u8>` have the same layout, and the slice borrows
        // `self` (the `&mut` this takes): nothing writes them while it lives
        // (the writer's memory is its own: the aliasing rule, buffer/mod.rs).
        Ok(unsafe { std::slice::from_raw_parts(written.as_ptr().cast::<u8>(), n) })
    }

    /// Write what fits of `data` at the position; returns where it went
    /// (piece, offset in it, length), None for no data.
    fn write_at(&mut self, data: RawBytes<'_>) -> std::io::Result<Option<(usize, usize, usize)>> {
        if data.is_empty() {
            return Ok(None);
        }
        if self.position == self.len {
            if let Some(array) = self.next_data.take() {
                // room for the array and for the headers and labels after
                // it (see `new_aligned_piece`), no more than the bound says
                // can follow
                let after = self.bound.saturating_sub(self.len.saturating_add(array));
                let need = array.saturating_add(self.target.min(ARRAY_SLACK).min(after));
                if self.room() < need {
                    self.new_piece(need)?;
                }
                self.array_end = self.len.saturating_add(array);
            }
            if self.room() == 0 {
                self.new_aligned_piece(data.len())?;
            }
        }
        // the piece holding `position` (< len, or the end with room left)
        let index = self
            .pieces
            .partition_point(|piece| piece.start <= self.position)
            - 1;
        let end = self
            .pieces
            .get(index + 1)
            .map_or(self.pieces[index].memory.len(), |next| {
                next.start - self.pieces[index].start
            });
        let piece = &mut self.pieces[index];
        let offset = self.position - piece.start;
        let n = data.len().min(end - offset);
        let target = &mut piece.memory[offset..offset + n];
        // SAFETY: `target` and `data[..n]` have the same length, `u8` and
        // `MaybeUninit<u8>` the same layout, and a buffer's memory cannot
        // overlap the `&mut` memory this writer holds; raw pointers, no
        // `&[u8]` of the source (the aliasing rule, buffer/mod.rs).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), target.as_mut_ptr().cast(), n);
        }
        self.position += n;
        self.len = self.len.max(self.position);
        Ok(Some((index, offset, n)))
    }
}

impl<'a, A: Allocate<'a>> Write for PiecedWriter<'a, A> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        Ok(self
            .write_at(RawBytes::from_slice(data))?
            .map_or(0, |(_, _, n)| n))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a, A: Allocate<'a>> Seek for PiecedWriter<'a, A> {
    fn seek(&mut self, from: SeekFrom) -> std::io::Result<u64> {
        seek_written(from, &mut self.position, self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces from leaked boxes (the test's memory, never freed), each
    /// remembered by address so that the test can read it back.
    struct Leaked(Vec<(usize, usize)>);

    impl Allocate<'static> for &mut Leaked {
        fn allocate(&mut self, capacity: usize) -> std::io::Result<PieceMemory<'static>> {
            let memory = Box::leak(vec![MaybeUninit::new(0xEE_u8); capacity].into_boxed_slice());
            self.0.push((memory.as_ptr() as usize, capacity));
            Ok(memory)
        }
    }

    fn contents(writer: &PiecedWriter<'static, &mut Leaked>, leaked: &[(usize, usize)]) -> Vec<u8> {
        let mut all = Vec::new();
        for (length, &(address, capacity)) in writer.lengths().iter().zip(leaked) {
            assert!(*length <= capacity);
            // SAFETY: the piece was leaked (lives forever) and its first
            // `length` bytes were written (the rest holds the 0xEE fill).
            all.extend_from_slice(unsafe {
                std::slice::from_raw_parts(address as *const u8, *length)
            });
        }
        all
    }

    #[test]
    fn pieces_keep_arrays_whole_and_start_aligned() {
        let mut leaked = Leaked(Vec::new());
        let mut writer = PiecedWriter::new(&mut leaked, 1000, 100_000);
        let next = writer.next_data();
        let mut expected = Vec::new();
        let mut arrays = Vec::new();
        for (i, (before, array)) in [
            (70, 600),
            (30, 700),
            (5, 2500),
            (900, 64),
            (3, 100),
            (5003, 10),
        ]
        .into_iter()
        .enumerate()
        {
            // a header (unaligned length), then the array's data at an
            // aligned offset, as the archive writer lays them out
            let header = vec![u8::try_from(i).unwrap(); before];
            writer.write_all(&header).unwrap();
            expected.extend_from_slice(&header);
            let pad = expected.len().next_multiple_of(64) - expected.len();
            writer.write_all(&vec![0xAA; pad]).unwrap();
            expected.extend(std::iter::repeat_n(0xAA, pad));
            next.set(Some(array));
            arrays.push((expected.len(), array));
            let data: Vec<u8> = (0..array).map(|k| u8::try_from(k % 251).unwrap()).collect();
            for (k, chunk) in data.chunks(256).enumerate() {
                if (i + k) % 2 == 0 {
                    writer.write_all(chunk).unwrap();
                    continue;
                }
                // the copy written is handed back (an archive hashes it)
                let mut rest = chunk;
                while !rest.is_empty() {
                    let copy = writer.write_viewed(RawBytes::from_slice(rest)).unwrap();
                    assert!(!copy.is_empty());
                    assert_eq!(copy, &rest[..copy.len()]);
                    let n = copy.len();
                    rest = &rest[n..];
                }
            }
            expected.extend_from_slice(&data);
        }
        // a seek back into an earlier piece, then on at the end
        writer.seek(SeekFrom::Start(3)).unwrap();
        writer.write_all(b"XYZ").unwrap();
        expected[3..6].copy_from_slice(b"XYZ");
        writer.seek(SeekFrom::End(0)).unwrap();
        writer.write_all(b"end").unwrap();
        expected.extend_from_slice(b"end");

        let lengths = writer.lengths();
        assert!(lengths.len() >= 4, "{lengths:?}");
        assert_eq!(contents(&writer, &leaked_copy(&writer)), expected);
        let starts: Vec<usize> = lengths
            .iter()
            .scan(0, |start, length| {
                let this = *start;
                *start += length;
                Some(this)
            })
            .collect();
        assert!(starts.iter().all(|start| start % 64 == 0), "{starts:?}");
        for (offset, len) in arrays {
            let piece = starts.partition_point(|&start| start <= offset) - 1;
            let end = starts.get(piece + 1).copied().unwrap_or(expected.len());
            assert!(
                offset + len <= end,
                "the array at {offset} lies across pieces"
            );
        }
    }

    fn leaked_copy(writer: &PiecedWriter<'static, &mut Leaked>) -> Vec<(usize, usize)> {
        writer.allocate.0.clone()
    }

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
    fn write_viewed_hands_back_the_copy_and_stops_at_the_capacity() {
        let mut memory = vec![MaybeUninit::<u8>::uninit(); 6];
        let mut writer = FixedWriter::new(&mut memory);
        assert_eq!(
            writer.write_viewed(RawBytes::from_slice(b"abcd")).unwrap(),
            b"abcd"
        );
        writer.seek(SeekFrom::Start(1)).unwrap();
        assert_eq!(
            writer.write_viewed(RawBytes::from_slice(b"XY")).unwrap(),
            b"XY"
        );
        writer.seek(SeekFrom::End(0)).unwrap();
        let refused = writer
            .write_viewed(RawBytes::from_slice(b"efg"))
            .unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::WriteZero);
        assert_eq!(
            writer.write_viewed(RawBytes::from_slice(b"ef")).unwrap(),
            b"ef"
        );
        assert_eq!(writer.len(), 6);
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
