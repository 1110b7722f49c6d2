//! A positioned file reader with a one-block cache and ranges read ahead.
//!
//! Reading an archive's structure means many small reads at scattered
//! offsets: a local header, then the NPY header right after it. `BufReader`
//! drops its buffer on every seek; this reader keeps a 4 KiB block and seeks
//! without a system call, so that each entry costs one `pread` or none.
//!
//! Better still, the central directory tells where every entry lies before
//! any is read: [`CachedFile::prefetch`] reads given ranges of the file
//! (the headers of the arrays a mapped load views, and the whole of the
//! small entries it copies: labels, `info.json`), neighbours merged, one
//! `pread` per run, into one allocation. W's structure is then about 200
//! reads instead of 500, and its labels are not copied a second time: they
//! view the ranges ([`Prefetched::view`]).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;

use crate::buffer::{Buffer, ALIGNMENT};
use crate::error::Result;

const BLOCK: usize = 4096;

/// Ranges closer than this are read as one: reading the bytes between two
/// of them costs less than a second system call.
const MERGE_GAP: u64 = 4096;

/// Ranges of a file held in memory, in one allocation that only the load
/// making them can reach: what Labels copied from it would hold anyway.
#[derive(Clone)]
pub(crate) struct Prefetched {
    bytes: Buffer,
    /// (start in the file, start in `bytes`, length), sorted by start in
    /// the file, disjoint
    ranges: Vec<(u64, usize, usize)>,
}

impl Prefetched {
    /// The range holding file offset `position`, as (start in the file,
    /// start in the bytes, length).
    fn find(&self, position: u64) -> Option<(u64, usize, usize)> {
        let after = self
            .ranges
            .partition_point(|&(start, _, _)| start <= position);
        let (start, at, len) = *self.ranges.get(after.checked_sub(1)?)?;
        (position - start < len as u64).then_some((start, at, len))
    }

    /// Where the file's bytes from offset `start` on lie in `bytes`: their
    /// start there, and how many of them the range holding `start` has.
    fn locate(&self, start: u64) -> Option<(usize, usize)> {
        let (range_start, at, range_len) = self.find(start)?;
        let offset = usize::try_from(start - range_start).ok()?;
        Some((at + offset, range_len - offset))
    }

    /// The bytes at `start..start + len` of the file when they lie in one
    /// range read ahead: a view of memory blockmap allocated, which nothing
    /// outside the load that read it can write.
    pub fn view(&self, start: u64, len: usize) -> Option<Buffer> {
        let (from, room) = self.locate(start)?;
        if len > room {
            return None;
        }
        self.bytes.slice(from, len).ok()
    }

    /// The bytes from `start` on, at most `len` of them, as far as the
    /// range holding `start` goes (borrowed: for headers, parsed and let go).
    pub fn bytes_up_to(&self, start: u64, len: usize) -> Option<&[u8]> {
        let (from, room) = self.locate(start)?;
        // private (`Buffer::filled`): seen in place
        self.bytes.private_bytes()?.get(from..from + len.min(room))
    }
}

pub(crate) struct CachedFile {
    file: File,
    len: u64,
    position: u64,
    block_start: u64,
    block: Vec<u8>,
    prefetched: Option<Prefetched>,
}

impl CachedFile {
    pub fn new(file: File) -> std::io::Result<Self> {
        let len = file.metadata()?.len();
        Ok(CachedFile {
            file,
            len,
            position: 0,
            block_start: 0,
            block: Vec::with_capacity(BLOCK),
            prefetched: None,
        })
    }

    /// Read `ranges` of the file (clamped to its length, merged where they
    /// overlap or lie close) into one allocation, from which later reads
    /// of those bytes are served. Each range keeps its file offset's
    /// alignment to [`ALIGNMENT`] in the allocation, so that what is
    /// aligned in the file is aligned in memory.
    pub fn prefetch(&mut self, mut ranges: Vec<Range<u64>>) -> Result<Prefetched> {
        ranges.retain_mut(|range| {
            range.end = range.end.min(self.len);
            range.start < range.end
        });
        ranges.sort_unstable_by_key(|range| range.start);
        let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
        for range in ranges {
            match merged.last_mut() {
                Some(last) if range.start <= last.end.saturating_add(MERGE_GAP) => {
                    last.end = last.end.max(range.end);
                }
                _ => merged.push(range),
            }
        }
        let align = ALIGNMENT as u64;
        let mut placed = Vec::with_capacity(merged.len());
        let mut total = 0usize;
        for range in &merged {
            // the file offset's remainder modulo ALIGNMENT, kept in memory
            let skew = usize::try_from(range.start % align).unwrap_or(0);
            let at = total.next_multiple_of(ALIGNMENT) + skew;
            let len = usize::try_from(range.end - range.start)
                .map_err(|_| crate::error::Error::format("entry too large"))?;
            placed.push((range.start, at, len));
            total = at + len;
        }
        let bytes = Buffer::filled(total, |bytes| self.read_ranges(&mut placed, bytes))?;
        let prefetched = Prefetched {
            bytes,
            ranges: placed,
        };
        self.prefetched = Some(prefetched.clone());
        Ok(prefetched)
    }

    /// Read each of the `placed` ranges (start in the file, start in
    /// `bytes`, length) into `bytes`; a range the file ends in is shortened
    /// to what it holds.
    fn read_ranges(&self, placed: &mut [(u64, usize, usize)], bytes: &mut [u8]) -> Result<()> {
        for (start, at, len) in placed.iter_mut() {
            let (start, at) = (*start, *at);
            let mut done = 0;
            while done < *len {
                match self.read_at(&mut bytes[at + done..at + *len], start + done as u64) {
                    // the file shrank since its length was read: the range
                    // ends here (reads past it go to the file, and find it
                    // short)
                    Ok(0) => *len = done,
                    Ok(n) => done += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                        crate::interrupt::check()?;
                    }
                    Err(e) => return Err(crate::error::Error::io("reading the archive", e)),
                }
            }
        }
        Ok(())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        #[cfg(unix)]
        {
            std::os::unix::fs::FileExt::read_at(&self.file, buf, offset)
        }
        #[cfg(windows)]
        {
            std::os::windows::fs::FileExt::seek_read(&self.file, buf, offset)
        }
    }
}

impl Read for CachedFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(prefetched) = &self.prefetched {
            if let Some((start, at, len)) = prefetched.find(self.position) {
                // within the range: less than `len` bytes past its start
                let offset = usize::try_from(self.position - start).unwrap_or(0);
                let n = buf.len().min(len - offset);
                prefetched.bytes.raw().copy_at(at + offset, &mut buf[..n]);
                self.position += n as u64;
                return Ok(n);
            }
        }
        let cached = self.block_start..self.block_start + self.block.len() as u64;
        if !cached.contains(&self.position) {
            if buf.len() >= BLOCK {
                let n = self.read_at(buf, self.position)?;
                self.position += n as u64;
                return Ok(n);
            }
            let mut block = std::mem::take(&mut self.block);
            block.resize(BLOCK, 0);
            let n = self.read_at(&mut block, self.position);
            block.truncate(*n.as_ref().unwrap_or(&0));
            self.block = block;
            self.block_start = self.position;
            if n? == 0 {
                return Ok(0);
            }
        }
        // within the cached block: less than BLOCK bytes past its start
        let offset = usize::try_from(self.position - self.block_start)
            .map_err(|_| std::io::Error::other("position outside the cached block"))?;
        let n = buf.len().min(self.block.len() - offset);
        buf[..n].copy_from_slice(&self.block[offset..offset + n]);
        self.position += n as u64;
        Ok(n)
    }
}

impl Seek for CachedFile {
    fn seek(&mut self, from: SeekFrom) -> std::io::Result<u64> {
        let target = match from {
            SeekFrom::Start(offset) => Some(offset),
            SeekFrom::Current(offset) => self.position.checked_add_signed(offset),
            SeekFrom::End(offset) => self.len.checked_add_signed(offset),
        };
        self.position = target.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start")
        })?;
        Ok(self.position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::TempDir;
    use std::io::Write;

    #[test]
    fn reads_like_a_file() {
        let dir = TempDir::new("cached");
        let path = dir.join("file");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        File::create(&path).unwrap().write_all(&data).unwrap();
        let mut file = CachedFile::new(File::open(&path).unwrap()).unwrap();
        for (start, len) in [
            (0, 10),
            (5, 100),
            (4090, 20),
            (100, 9000),
            (19_990, 50),
            (3, 1),
        ] {
            file.seek(SeekFrom::Start(start)).unwrap();
            let mut out = vec![0u8; len];
            let mut got = 0;
            while got < len {
                let n = file.read(&mut out[got..]).unwrap();
                if n == 0 {
                    break;
                }
                got += n;
            }
            let start = usize::try_from(start).unwrap();
            let end = (start + len).min(data.len());
            assert_eq!(&out[..got], &data[start..end], "{start} {len}");
        }
        assert_eq!(file.seek(SeekFrom::End(-4)).unwrap(), 19_996);
        assert!(file.seek(SeekFrom::Current(-20_000)).is_err());
    }

    fn read_all(file: &mut CachedFile, start: u64, len: usize) -> Vec<u8> {
        file.seek(SeekFrom::Start(start)).unwrap();
        let mut out = vec![0u8; len];
        let mut got = 0;
        while got < len {
            let n = file.read(&mut out[got..]).unwrap();
            if n == 0 {
                break;
            }
            got += n;
        }
        out.truncate(got);
        out
    }

    #[test]
    fn prefetched_ranges_read_like_the_file() {
        let dir = TempDir::new("prefetch");
        let path = dir.join("file");
        // large enough for a mapping of its own (Buffer::filled)
        let data: Vec<u8> = (0..2_000_000u32).map(|i| (i % 253) as u8).collect();
        File::create(&path).unwrap().write_all(&data).unwrap();
        let mut file = CachedFile::new(File::open(&path).unwrap()).unwrap();
        let ranges = vec![
            // out of order, overlapping, close (merged) and far apart
            900_000..1_200_000,
            1_000_000..1_100_000,
            3..100,
            1_201_000..1_300_000,
            // past the end: clamped; empty: dropped
            1_999_000..3_000_000,
            50..50,
        ];
        let ahead = file.prefetch(ranges).unwrap();
        // merged: [3, 100), [900_000, 1_300_000), [1_999_000, 2_000_000)
        assert_eq!(ahead.ranges.len(), 3);
        for &(start, at, len) in &ahead.ranges {
            // the file offset's alignment is kept in memory
            let address = ahead.bytes.as_ptr() as usize + at;
            assert_eq!(
                address % ALIGNMENT,
                usize::try_from(start).unwrap() % ALIGNMENT
            );
            let start = usize::try_from(start).unwrap();
            assert_eq!(
                &ahead.bytes.private_bytes().unwrap()[at..at + len],
                &data[start..start + len]
            );
        }
        // views lie in one range, and hold the file's bytes
        let view = ahead.view(950_000, 10_000).unwrap();
        assert_eq!(view.to_vec().unwrap(), &data[950_000..960_000]);
        assert!(!view.is_writable());
        assert!(
            ahead.view(1_299_000, 2_000).is_none(),
            "crosses the end of a range"
        );
        assert!(ahead.view(500_000, 10).is_none(), "not read ahead");
        // reads are the file's, inside, across and outside the ranges
        for (start, len) in [
            (0, 10),
            (5, 200),
            (899_990, 30),
            (1_250_000, 100_000),
            (1_999_500, 1_000),
            (600_000, 5_000),
        ] {
            let got = read_all(&mut file, start, len);
            let start = usize::try_from(start).unwrap();
            let end = (start + len).min(data.len());
            assert_eq!(got, &data[start..end], "{start} {len}");
        }
    }

    #[test]
    fn a_file_shorter_than_its_length_shortens_the_range() {
        let dir = TempDir::new("shrunk");
        let path = dir.join("file");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        File::create(&path).unwrap().write_all(&data).unwrap();
        let mut file = CachedFile::new(File::open(&path).unwrap()).unwrap();
        // the file shrinks after its length was read
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(6_000)
            .unwrap();
        let ahead = file
            .prefetch(std::iter::once(5_000..9_000).collect())
            .unwrap();
        assert_eq!(ahead.ranges[0].2, 1_000);
        assert!(ahead.view(5_500, 1_000).is_none());
        assert_eq!(read_all(&mut file, 5_500, 3_000), &data[5_500..6_000]);
    }
}
