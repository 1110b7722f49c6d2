//! File mappings owned by buffers.

use std::fs::File;
use std::ptr::NonNull;
use std::sync::Arc;

use super::{Buffer, Storage};
use crate::error::{Error, Result};

/// How a file is mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapMode {
    /// read-only: views of it cannot be written
    ReadOnly,
    /// private copy-on-write: writes through views change this process's
    /// pages, never the file
    CopyOnWrite,
}

/// A file mapping owned by a buffer.
#[allow(dead_code)] // held to be dropped with the buffer, never read
pub(super) enum Mapping {
    ReadOnly(memmap2::Mmap),
    CopyOnWrite(memmap2::MmapMut),
}

impl Buffer {
    /// Map the whole of `file` (opened for reading) in `mode`.
    ///
    /// The documented risk of every file mapping: were another process to
    /// truncate the file, reading the lost pages would fault. blockmap itself
    /// only replaces files by renaming, never truncating them.
    pub fn map_file(file: &File, mode: MapMode) -> Result<Buffer> {
        let error = |e| Error::io("cannot map the file", e);
        let (mapping, ptr, len) = match mode {
            MapMode::ReadOnly => {
                // SAFETY: a read-only shared mapping of a file; its memory
                // stays valid while the mapping (owned by the buffer) lives.
                let map = unsafe { memmap2::Mmap::map(file) }.map_err(error)?;
                let ptr = NonNull::new(map.as_ptr().cast_mut()).unwrap_or(NonNull::dangling());
                let len = map.len();
                (Mapping::ReadOnly(map), ptr, len)
            }
            MapMode::CopyOnWrite => {
                // SAFETY: a private mapping of a file; its memory stays
                // valid while the mapping (owned by the buffer) lives, and
                // writes to it never reach the file.
                let mut map =
                    unsafe { memmap2::MmapOptions::new().map_copy(file) }.map_err(error)?;
                let ptr = NonNull::new(map.as_mut_ptr()).unwrap_or(NonNull::dangling());
                let len = map.len();
                (Mapping::CopyOnWrite(map), ptr, len)
            }
        };
        Ok(Buffer {
            storage: Arc::new(Storage::Mapped(mapping)),
            ptr,
            len,
            writable: mode == MapMode::CopyOnWrite,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::OwnerKind;
    use std::io::Write;

    #[test]
    fn mapped_buffers() {
        let path = std::env::temp_dir().join(format!("blockmap-mapped-{}", std::process::id()));
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&[42u8; 4096])
            .unwrap();
        let file = File::open(&path).unwrap();
        let read_only = Buffer::map_file(&file, MapMode::ReadOnly).unwrap();
        assert_eq!(read_only.owner_kind(), OwnerKind::Mapped);
        assert!(!read_only.is_writable());
        assert_eq!(read_only.as_slice()[0], 42);

        let cow = Buffer::map_file(&file, MapMode::CopyOnWrite).unwrap();
        assert!(cow.is_writable());
        assert_eq!(cow.len(), 4096);
        std::fs::remove_file(&path).unwrap();
    }
}
