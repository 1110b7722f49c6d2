//! Writing a file on a second thread while the archive is being made.
//!
//! A save does two things per piece of array data: copy it aside and
//! checksum it (the snapshot of `write.rs`), then hand it to the kernel
//! (`write`, which copies it into the page cache). Done one after the other
//! they add up; [`Pipelined`] overlaps them: the thread making the archive
//! copies array data straight into chunks (the copy is the snapshot, hashed
//! while it is in the CPU cache), a writer thread writes each chunk at its
//! offset (`pwrite`), and a save of W costs about what the kernel's part
//! costs alone (safetensors' `save_file` is nothing but that part).
//!
//! The kernel's part is made smaller and steadier twice: the disk space is
//! reserved first (`fallocate`, see [`preallocate`]), and the file is
//! written in whole chunks: the patches of each local header (its CRC and
//! sizes, once the entry is written: [`Sink::patch`]) change the chunk
//! being filled in place, or travel with it, instead of costing a system
//! call each (W: about 3,500 writes of 4 to 12 bytes before).
//!
//! [`Sink::patch`]: super::zip::writer::Sink::patch
//!
//! With `write_behind`, the writer thread also starts the writeback of what
//! it wrote, run by run, without waiting for it (Linux `sync_file_range`
//! with `SYNC_FILE_RANGE_WRITE`): the disk writes the start of the file
//! while the rest is being made, so the `fdatasync` that makes a durable
//! save durable waits for the last run only, not the whole file. That
//! changes no guarantee: the `fdatasync` still comes before the rename.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use crate::buffer::RawBytes;

/// The writer thread gets the data in chunks of this size.
pub(crate) const CHUNK: usize = 1 << 20;

/// Chunks waiting for the writer thread at most (the memory in flight is
/// `CHUNK` times this plus two: the one being filled and the one being
/// written).
const QUEUED: usize = 2;

/// Written data is handed to writeback in runs of this many bytes.
const WRITE_BEHIND: u64 = 8 << 20;

/// Bytes rewritten in a part of the file already sent to the writer thread
/// (below the chunk being filled) wait at most this long before they are
/// sent with it.
const PATCHES_AT_MOST: usize = 64 << 10;

/// A chunk of data and the file offset it goes to, and the rewrites of
/// earlier parts of the file (`(offset, bytes)`: headers whose CRC and
/// sizes are known once their entry is written) that came meanwhile, written
/// after it.
struct Chunk {
    offset: u64,
    bytes: Vec<u8>,
    patches: Vec<(u64, Vec<u8>)>,
}

/// The first error of the writer thread, kept for the archive's thread.
type Failure = Arc<Mutex<Option<std::io::Error>>>;

/// A `Write + Seek` over a file whose writes happen on a writer thread (see
/// the module docs). Made by [`with_pipeline`], which runs that thread.
pub(crate) struct Pipelined {
    sender: Option<SyncSender<Chunk>>,
    /// chunks the writer thread is done with, to fill again
    free: Receiver<Vec<u8>>,
    failure: Failure,
    current: Chunk,
    /// bytes held in `current.patches`
    patched: usize,
    position: u64,
    /// the end of the furthest write
    len: u64,
}

impl Pipelined {
    fn failed(&self) -> Option<std::io::Error> {
        let failure = self.failure.lock().ok()?;
        failure.as_ref().map(copy_error)
    }

    /// Send the chunk being filled to the writer thread (if it holds
    /// anything), and start a new one at `position`.
    fn send(&mut self) -> std::io::Result<()> {
        if let Some(error) = self.failed() {
            return Err(error);
        }
        if !self.current.bytes.is_empty() || !self.current.patches.is_empty() {
            let mut bytes = match self.free.try_recv() {
                Ok(bytes) => bytes,
                Err(_) => chunk_memory()?,
            };
            bytes.clear();
            let full = std::mem::replace(&mut self.current.bytes, bytes);
            let chunk = Chunk {
                offset: self.current.offset,
                bytes: full,
                patches: std::mem::take(&mut self.current.patches),
            };
            self.patched = 0;
            let sender = self.sender.as_ref().ok_or_else(stopped)?;
            sender
                .send(chunk)
                .map_err(|_| self.failed().unwrap_or_else(stopped))?;
        }
        self.current.offset = self.position;
        Ok(())
    }

    /// Send what is left and stop the writer thread (it then ends once it
    /// wrote everything).
    fn finish(&mut self) -> std::io::Result<()> {
        let sent = self.send();
        self.sender = None;
        sent
    }
}

/// Memory for one chunk, empty, with room for [`CHUNK`] bytes.
fn chunk_memory() -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(CHUNK)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
    Ok(bytes)
}

/// The same error (an `io::Error` is not `Clone`): its OS error code when
/// it has one, which Python's `OSError.errno` shows.
fn copy_error(error: &std::io::Error) -> std::io::Error {
    match error.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::new(error.kind(), error.to_string()),
    }
}

fn stopped() -> std::io::Error {
    std::io::Error::other("the writer thread stopped")
}

impl Write for Pipelined {
    /// Appends to the chunk being filled, or rewrites what was written
    /// before (see [`Pipelined::rewrite`]) after a seek back.
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.rewrite(data)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

impl Pipelined {
    /// Write what fits of `data` at the position: appended to the chunk
    /// being filled; written into it in place when the position lies in
    /// it; kept as a patch sent with it when below it (a local header's
    /// CRC and sizes, given once its entry is written: see
    /// [`Sink::patch`](super::zip::writer::Sink::patch)), so that the file
    /// is written in whole chunks, not broken up by every header.
    fn rewrite(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let start = self.current.offset;
        let end = start + self.current.bytes.len() as u64;
        let below = usize::try_from(start.saturating_sub(self.position)).unwrap_or(usize::MAX);
        // a rewrite below the chunk (a header) waits as a patch; a large
        // one (the archive writer makes none) starts a chunk of its own
        if self.position < start
            && !self.current.bytes.is_empty()
            && below.min(data.len()) <= PATCHES_AT_MOST
        {
            let n = below.min(data.len());
            let out_of_memory = |_| std::io::Error::from(std::io::ErrorKind::OutOfMemory);
            // a rewrite that continues the last one extends it
            match self.current.patches.last_mut() {
                Some((offset, patch)) if *offset + patch.len() as u64 == self.position => {
                    patch.try_reserve(n).map_err(out_of_memory)?;
                    patch.extend_from_slice(&data[..n]);
                }
                _ => {
                    let mut patch = Vec::new();
                    patch.try_reserve_exact(n).map_err(out_of_memory)?;
                    patch.extend_from_slice(&data[..n]);
                    self.current.patches.push((self.position, patch));
                }
            }
            self.patched += n;
            self.position += n as u64;
            if self.patched >= PATCHES_AT_MOST {
                // sent now, with the chunk so far; what follows starts a
                // new chunk where it goes
                self.send()?;
            }
            return Ok(n);
        }
        if self.position >= start && self.position < end {
            let at = usize::try_from(self.position - start).unwrap_or(usize::MAX);
            let n = (self.current.bytes.len() - at).min(data.len());
            self.current.bytes[at..at + n].copy_from_slice(&data[..n]);
            self.position += n as u64;
            return Ok(n);
        }
        self.append(RawBytes::from_slice(data)).map(<[u8]>::len)
    }

    /// Append what fits of `data` to the chunk being filled (a new one
    /// when the position is elsewhere or the chunk is full); returns the
    /// bytes as they now lie in the chunk.
    fn append(&mut self, data: RawBytes<'_>) -> std::io::Result<&[u8]> {
        if self.position != self.current.offset + self.current.bytes.len() as u64
            || self.current.bytes.len() == CHUNK
        {
            self.send()?;
        }
        let at = self.current.bytes.len();
        // every chunk has room for CHUNK bytes (`chunk_memory`): this never
        // reallocates (raw copies: the aliasing rule, buffer/mod.rs)
        let n = data.extend_vec(&mut self.current.bytes, CHUNK - at);
        self.position += n as u64;
        self.len = self.len.max(self.position);
        Ok(&self.current.bytes[at..])
    }
}

/// Array data is copied into the chunks anyway: the copy is the snapshot,
/// hashed right after it is made (still in the CPU cache). The array's
/// memory is read once and copied once before the kernel's copy.
impl super::zip::writer::Sink for Pipelined {
    fn write_snapshot(
        &mut self,
        piece: RawBytes<'_>,
        crc: &mut crc32fast::Hasher,
        _scratch: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        super::zip::writer::snapshot_by_copy(self, piece, crc, Pipelined::append)
    }

    /// A header's CRC and sizes: written into the chunk being filled when
    /// they fall in it, otherwise kept as a patch sent with it (see
    /// [`Pipelined::rewrite`]); the position stays at `end`.
    fn patch(&mut self, offset: u64, bytes: &[u8], end: u64) -> std::io::Result<()> {
        self.position = offset;
        let mut rest = bytes;
        while !rest.is_empty() {
            let n = self.rewrite(rest)?;
            rest = &rest[n..];
        }
        self.position = end;
        Ok(())
    }
}

impl Seek for Pipelined {
    /// Positions past `i64::MAX` are refused, as a file's are (`EINVAL`):
    /// offsets then never overflow.
    fn seek(&mut self, from: SeekFrom) -> std::io::Result<u64> {
        let target = match from {
            SeekFrom::Start(offset) => Some(offset),
            SeekFrom::Current(offset) => self.position.checked_add_signed(offset),
            SeekFrom::End(offset) => self.len.checked_add_signed(offset),
        };
        self.position = target
            .filter(|&target| i64::try_from(target).is_ok())
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "invalid seek"))?;
        Ok(self.position)
    }
}

/// The writer thread: write each chunk at its offset, give it back; after
/// an error, keep it and write nothing more.
fn write_chunks(
    file: &File,
    chunks: Receiver<Chunk>,
    free: &SyncSender<Vec<u8>>,
    failure: &Failure,
    write_behind: bool,
) {
    let (mut started, mut end) = (0u64, 0u64);
    let mut failed = false;
    for chunk in chunks {
        if !failed {
            // the patches go to parts of the file written by earlier chunks
            let written = file
                .write_all_at(&chunk.bytes, chunk.offset)
                .and_then(|()| {
                    chunk
                        .patches
                        .iter()
                        .try_for_each(|(offset, bytes)| file.write_all_at(bytes, *offset))
                });
            match written {
                Ok(()) => {
                    end = end.max(chunk.offset + chunk.bytes.len() as u64);
                    if write_behind && end.saturating_sub(started) >= WRITE_BEHIND {
                        start_writeback(file, started, end);
                        started = end;
                    }
                }
                Err(error) => {
                    failed = true;
                    if let Ok(mut failure) = failure.lock() {
                        *failure = Some(error);
                    }
                }
            }
        }
        // the archive's thread may have stopped taking chunks back
        let _ = free.try_send(chunk.bytes);
    }
}

/// Start writing out `start..end` of `file` (best effort: an error here is
/// the `fdatasync`'s to report).
fn start_writeback(file: &File, start: u64, end: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        let (Ok(offset), Ok(len)) = (i64::try_from(start), i64::try_from(end - start)) else {
            return;
        };
        // SAFETY: the descriptor is that of `file`, open for the whole
        // call; `sync_file_range` reads and writes no memory of ours.
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
        };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, start, end);
}

/// Reserve `len` bytes of disk for `file` (empty) without changing its
/// size (Linux `fallocate` with `FALLOC_FL_KEEP_SIZE`), best effort: where
/// it cannot be done, the writes allocate as they go. Writes into reserved
/// blocks skip the file system's allocation work (faster saves:
/// docs/benchmarks.md). Returns whether anything was reserved.
fn preallocate(file: &File, len: u64) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        let Ok(len) = i64::try_from(len) else {
            return false;
        };
        // SAFETY: the descriptor is that of `file`, open for the whole
        // call; `fallocate` reads and writes no memory of ours.
        let done = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, len) };
        done == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, len);
        false
    }
}

/// Run `produce` with a [`Pipelined`] writer over `file` (from its offset 0),
/// its writes done on a writer thread; returns once every write is done,
/// with the first error of either. `reserve` (an upper bound of what will
/// be written) is reserved on the disk first, and what is left of it past
/// the end released at the end.
pub(crate) fn with_pipeline<T>(
    file: &File,
    write_behind: bool,
    reserve: u64,
    produce: impl FnOnce(&mut Pipelined) -> crate::error::Result<T>,
) -> crate::error::Result<T> {
    let reserved = preallocate(file, reserve);
    if reserve > 0 && !reserved {
        // a reservation that failed part way (no space for all of it) may
        // keep what it got: the file is still empty, give it all back
        let _ = file.set_len(0);
    }
    let (sender, chunks) = sync_channel(QUEUED);
    let (give_back, free) = sync_channel(QUEUED + 2);
    let failure: Failure = Arc::default();
    let mut writer = Pipelined {
        sender: Some(sender),
        free,
        failure: Arc::clone(&failure),
        current: Chunk {
            offset: 0,
            bytes: chunk_memory().map_err(|e| crate::error::Error::io("writing the archive", e))?,
            patches: Vec::new(),
        },
        patched: 0,
        position: 0,
        len: 0,
    };
    let result = std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("blockmap-writer".into())
            .spawn_scoped(scope, || {
                write_chunks(file, chunks, &give_back, &failure, write_behind);
            })
            .map_err(|e| crate::error::Error::io("starting the writer thread", e))?;
        let produced = produce(&mut writer).and_then(|value| {
            writer
                .finish()
                .map_err(|e| crate::error::Error::io("writing the archive", e))?;
            Ok(value)
        });
        // on error too: the writer thread ends once the sender is gone
        writer.sender = None;
        thread
            .join()
            .map_err(|_| crate::error::Error::internal("the writer thread panicked"))?;
        produced
    })?;
    if let Some(error) = writer.failed() {
        return Err(crate::error::Error::io("writing the archive", error));
    }
    if reserved {
        // the size stays; blocks reserved past it are given back
        file.set_len(writer.len)
            .map_err(|e| crate::error::Error::io("writing the archive", e))?;
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::TempDir;
    use std::io::Read;

    /// A file `name` of `dir`, empty, opened to read and write.
    fn scratch_file(dir: &TempDir, name: &str) -> (std::path::PathBuf, File) {
        let path = dir.join(name);
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        (path, file)
    }

    #[test]
    fn writes_and_seeks_land_where_a_plain_file_puts_them() {
        let dir = TempDir::new("pipeline");
        let (path, file) = scratch_file(&dir, "same");
        let (plain_path, mut plain) = scratch_file(&dir, "plain");
        let big: Vec<u8> = (0..3 * CHUNK + 123)
            .map(|i| u8::try_from(i % 251).unwrap())
            .collect();
        let steps = |w: &mut dyn WriteSeek| -> std::io::Result<()> {
            w.write_all(b"header..")?;
            w.write_all(&big)?;
            let end = w.stream_position()?;
            w.seek(SeekFrom::Start(2))?;
            w.write_all(b"XY")?;
            w.seek(SeekFrom::End(0))?;
            assert_eq!(w.stream_position()?, end);
            w.write_all(b"tail")?;
            w.seek(SeekFrom::Current(-2))?;
            w.write_all(b"!")?;
            // past what a file offset can be: refused, as a file does
            assert!(w.seek(SeekFrom::Start(u64::MAX)).is_err());
            w.seek(SeekFrom::End(0))?;
            Ok(())
        };
        with_pipeline(&file, true, 0, |w| {
            steps(w).map_err(|e| crate::error::Error::io("test", e))
        })
        .unwrap();
        steps(&mut plain).unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        File::open(&path).unwrap().read_to_end(&mut a).unwrap();
        File::open(&plain_path)
            .unwrap()
            .read_to_end(&mut b)
            .unwrap();
        assert_eq!(a.len(), b.len());
        assert!(a == b, "the pipelined file differs from the plain one");
    }

    trait WriteSeek: Write + Seek {}
    impl<T: Write + Seek> WriteSeek for T {}

    /// One step of [`random_writes_and_seeks_give_the_plain_file`]: its
    /// kind, where it goes, its data.
    type Step<'a> = dyn FnMut(u64, u64, &[u8]) -> std::io::Result<()> + 'a;

    /// The same steps on a pipelined writer and a plain file give the same
    /// bytes: appends across chunks, snapshots, rewrites inside the chunk
    /// being filled and below it (patches), seeks past the end. The steps
    /// come from a fixed pseudo-random sequence (xorshift) of each seed.
    /// These four seeds, two with write-behind and two without, reach
    /// together every branch of `rewrite`, `append`, `send` and the writer
    /// thread that the seeds 1 to 40 reach (among them a patch that fills
    /// `PATCHES_AT_MOST`, reached by two of those 40 seeds only): checked
    /// by recording the branches each seed takes.
    #[test]
    fn random_writes_and_seeks_give_the_plain_file() {
        use crate::io::zip::writer::Sink;
        let dir = TempDir::new("pipeline");
        // every step's data is a slice of this pattern: byte `i` of a
        // step whose first byte is `b` is `b + i` (mod 256), made once
        let pattern: Vec<u8> = (0..2 * CHUNK + 256)
            .map(|i| u8::try_from(i % 256).unwrap())
            .collect();
        for seed in [4u64, 9, 18, 21] {
            let (path, file) = scratch_file(&dir, &format!("random-{seed}"));
            let (plain_path, mut plain) = scratch_file(&dir, &format!("random-plain-{seed}"));
            let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut next = move |bound: u64| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state % bound
            };
            let mut steps = Vec::new();
            for _ in 0..60 {
                let len = match next(4) {
                    0 => next(16) + 1,
                    1 => next(4096) + 1,
                    2 => next(CHUNK as u64 / 3) + 1,
                    _ => next(2 * CHUNK as u64) + 1,
                };
                let byte = u8::try_from(next(251)).unwrap();
                steps.push((next(6), next(1 << 24), usize::try_from(len).unwrap(), byte));
            }
            let run = |w: &mut Step<'_>| {
                for &(kind, where_to, len, byte) in &steps {
                    let first = usize::from(byte);
                    w(kind, where_to, &pattern[first..first + len])?;
                }
                Ok::<(), std::io::Error>(())
            };
            let mut plain_end = 0u64;
            run(&mut |kind, where_to, data| {
                match kind {
                    // rewrite somewhere in what was written
                    0 | 1 if plain_end > 0 => {
                        plain.seek(SeekFrom::Start(where_to % plain_end))?;
                    }
                    // past the end: a hole
                    2 => {
                        plain.seek(SeekFrom::End(i64::try_from(where_to % 5000).unwrap()))?;
                    }
                    _ => {
                        plain.seek(SeekFrom::End(0))?;
                    }
                }
                plain.write_all(data)?;
                plain_end = plain_end.max(plain.stream_position()?);
                Ok(())
            })
            .unwrap();
            let mut crc_checked = 0;
            with_pipeline(&file, seed % 2 == 0, 4 << 20, |w| {
                let mut end = 0u64;
                run(&mut |kind, where_to, data| {
                    match kind {
                        0 | 1 if end > 0 => {
                            w.seek(SeekFrom::Start(where_to % end))?;
                        }
                        2 => {
                            w.seek(SeekFrom::End(i64::try_from(where_to % 5000).unwrap()))?;
                        }
                        _ => {
                            w.seek(SeekFrom::End(0))?;
                        }
                    }
                    if kind == 5 {
                        // a snapshot's CRC is that of the bytes given
                        let mut crc = crc32fast::Hasher::new();
                        w.write_snapshot(RawBytes::from_slice(data), &mut crc, &mut Vec::new())?;
                        assert_eq!(crc.finalize(), crc32fast::hash(data));
                        crc_checked += 1;
                    } else {
                        w.write_all(data)?;
                    }
                    end = end.max(w.stream_position()?);
                    Ok(())
                })
                .map_err(|e| crate::error::Error::io("test", e))
            })
            .unwrap();
            assert!(crc_checked > 0);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            File::open(&path).unwrap().read_to_end(&mut a).unwrap();
            File::open(&plain_path)
                .unwrap()
                .read_to_end(&mut b)
                .unwrap();
            assert_eq!(a.len(), b.len(), "seed {seed}");
            assert!(
                a == b,
                "seed {seed}: the pipelined file differs from the plain one"
            );
        }
    }

    /// Disk reserved ahead of the writes and not used is given back: the
    /// file keeps the size written, and no more blocks than it needs.
    #[test]
    fn the_reserve_past_the_end_is_released() {
        use std::os::unix::fs::MetadataExt;
        let dir = TempDir::new("pipeline");
        let (path, file) = scratch_file(&dir, "reserve");
        with_pipeline(&file, false, 64 << 20, |w| {
            w.write_all(&vec![3u8; 3 * CHUNK + 5])
                .map_err(|e| crate::error::Error::io("test", e))
        })
        .unwrap();
        let metadata = std::fs::metadata(&path).unwrap();
        assert_eq!(metadata.len(), 3 * CHUNK as u64 + 5);
        let allocated = metadata.blocks() * 512;
        assert!(
            allocated < 4 * CHUNK as u64,
            "{allocated} bytes allocated for a file of {}",
            metadata.len()
        );
    }

    #[test]
    fn a_failed_write_is_the_result() {
        // a file opened for reading only: every pwrite fails
        let dir = TempDir::new("pipeline");
        let (path, _) = scratch_file(&dir, "readonly");
        let file = File::open(&path).unwrap();
        let result = with_pipeline(&file, false, 0, |w| {
            for _ in 0..8 {
                if let Err(e) = w.write_all(&vec![1u8; CHUNK]) {
                    return Err(crate::error::Error::io("test", e));
                }
            }
            Ok(())
        });
        match result {
            Err(crate::error::Error::Io { source, .. }) => {
                assert_eq!(source.raw_os_error(), Some(libc::EBADF), "{source}");
            }
            other => panic!("expected an I/O error, got {other:?}"),
        }
    }

    #[test]
    fn an_error_of_the_maker_stops_the_thread_and_is_returned() {
        let dir = TempDir::new("pipeline");
        let (_, file) = scratch_file(&dir, "maker");
        let result: crate::error::Result<()> = with_pipeline(&file, false, 0, |w| {
            w.write_all(&[7u8; 100]).unwrap();
            Err(crate::error::Error::invalid("stop here"))
        });
        assert!(result.unwrap_err().to_string().contains("stop here"));
    }
}
