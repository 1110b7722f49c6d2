//! A positioned file reader with a one-block cache.
//!
//! Reading an archive's structure means many small reads at scattered
//! offsets: a local header, then the NPY header right after it. `BufReader`
//! drops its buffer on every seek; this reader keeps a 4 KiB block and seeks
//! without a system call, so that each entry costs one `pread` or none.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

const BLOCK: usize = 4096;

pub(crate) struct CachedFile {
    file: File,
    len: u64,
    position: u64,
    block_start: u64,
    block: Vec<u8>,
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
        })
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
    use std::io::Write;

    #[test]
    fn reads_like_a_file() {
        let path = std::env::temp_dir().join(format!("blockmap-cached-{}", std::process::id()));
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
        std::fs::remove_file(&path).unwrap();
    }
}
