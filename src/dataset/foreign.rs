//! Members of a foreign zip (metatrain's `DiskDataset`) read as raw bytes:
//! its `<i>/system.mta` members, which are zips themselves rather than NPY
//! arrays of bytes. The bounds are those of `io::foreign`: a member takes
//! at most [`foreign::RATIO`] times the zip's size plus [`foreign::FLOOR`]
//! bytes, its CRC is checked.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::io::foreign;
use crate::io::zip::reader::{self, Directory};

/// A foreign zip whose members are read raw.
#[derive(Debug)]
pub struct RawZip {
    path: PathBuf,
    reader: BufReader<File>,
    directory: Directory,
    limit: u64,
}

impl RawZip {
    /// Open the zip at `path` (its central directory is read).
    pub fn open(path: &Path) -> Result<RawZip> {
        let in_file = |e: Error| e.context(format!("'{}'", path.display()));
        let file = crate::io::open_regular(path)?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("cannot read '{}'", path.display()), e))?
            .len();
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let directory = Directory::read(&mut reader).map_err(in_file)?;
        Ok(RawZip {
            path: path.to_path_buf(),
            reader,
            directory,
            limit: len
                .saturating_mul(foreign::RATIO)
                .saturating_add(foreign::FLOOR),
        })
    }

    /// The bytes of member `name`, CRC checked.
    pub fn member(&mut self, name: &str) -> Result<Vec<u8>> {
        let shown = self.path.display().to_string();
        let context = |e: Error| e.context(format!("member '{name}' of '{shown}'"));
        let member = self
            .directory
            .index_of(name)
            .map(|index| self.directory.entry(index))
            .ok_or_else(|| context(Error::format("no such member")))?;
        if member.encrypted() {
            return Err(context(Error::format(
                "encrypted members are not supported",
            )));
        }
        let size = member.size;
        if size > self.limit {
            return Err(context(Error::format(format!(
                "it declares {size} bytes, more than the {} a member of this zip may take: \
                 refused, as a zip bomb would be",
                self.limit
            ))));
        }
        let len = usize::try_from(size).map_err(|_| context(Error::format("too large")))?;
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(len)?;
        let mut entry = reader::open(&mut self.reader, member).map_err(context)?;
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| context(Error::format(format!("cannot read it: {e}"))))?;
        if bytes.len() as u64 != size {
            return Err(context(Error::format("shorter than it declares")));
        }
        Ok(bytes)
    }
}
