//! Archives blockmap did not write, read with the bounds of its own
//! readers: metatrain's `DiskDataset` zip, whose members are `.mts`
//! archives wrapped in NPY arrays of bytes, and metatomic's `system.mta`
//! zip of NPY arrays and archives ([`zip_members`]).
//!
//! A member is read whole into memory (then loaded as a map), at most
//! [`RATIO`] times the zip's size plus [`FLOOR`]: a member declaring more
//! is refused before anything is allocated for it, and one inflating past
//! what it declares is refused when it does (the zip reader stops at the
//! declared size). STORED members (what `zipfile` writes by default, and
//! metatrain with it) always fit: they are in the file. CRCs are checked,
//! NPY headers read by blockmap's reader (at most 1 MiB of text).

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use super::pieces::Pieces;
use super::read;
use super::zip::reader::{self, DirEntry, Directory};
use crate::array::Array;
use crate::buffer::Buffer;
use crate::error::{Error, Result};

/// A member may take this many times the zip's size in memory...
pub const RATIO: u64 = 8;
/// ... plus this many bytes.
pub const FLOOR: u64 = 16 << 20;

/// The entry of member `name`, refused when it is encrypted or declares
/// more than `limit` bytes (before anything is allocated for it).
fn bounded_entry<'d>(directory: &'d Directory, name: &str, limit: u64) -> Result<&'d DirEntry> {
    let member = directory
        .index_of(name)
        .map(|index| directory.entry(index))
        .ok_or_else(|| Error::format("no such member"))?;
    if member.encrypted() {
        return Err(Error::format("encrypted members are not supported"));
    }
    if member.size > limit {
        return Err(Error::format(format!(
            "it declares {} bytes, more than the {limit} a member of this zip may take \
             ({RATIO} times its size and {} MiB): refused, as a zip bomb would be",
            member.size,
            FLOOR >> 20
        )));
    }
    Ok(member)
}

/// The bytes of `entry` (one [`bounded_entry`] gave), read whole: the
/// entry reader stops at the declared size and checks the CRC at the end;
/// one byte more asked finds data past the declared size.
fn raw_bytes<R: Read + std::io::Seek>(
    reader: &mut R,
    entry: &DirEntry,
    name: &str,
) -> Result<Vec<u8>> {
    let size = usize::try_from(entry.size).map_err(|_| Error::format("member too large"))?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(size)?;
    let read = reader::open(reader, entry, name).and_then(|data| {
        data.take(entry.size + 1)
            .read_to_end(&mut bytes)
            .map_err(reader::read_error)
    })?;
    if read != size {
        return Err(Error::format(format!(
            "it holds {read} bytes, not the {size} it declares"
        )));
    }
    Ok(bytes)
}

/// A foreign zip, open.
#[derive(Debug)]
pub struct ForeignZip {
    path: PathBuf,
    reader: BufReader<File>,
    directory: Directory,
    limit: u64,
}

impl ForeignZip {
    /// Open the zip at `path` (its central directory is read).
    pub fn open(path: &Path) -> Result<ForeignZip> {
        let in_file = |e: Error| e.context(format!("'{}'", path.display()));
        let file = super::open_regular(path)?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("cannot read '{}'", path.display()), e))?
            .len();
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let directory = Directory::read(&mut reader).map_err(in_file)?;
        Ok(ForeignZip {
            path: path.to_path_buf(),
            reader,
            directory,
            limit: len.saturating_mul(RATIO).saturating_add(FLOOR),
        })
    }

    /// The members' names, in the zip's order.
    pub fn names(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        names.try_reserve_exact(self.directory.len())?;
        names.extend(self.directory.names().map(str::to_string));
        Ok(names)
    }

    /// The bytes wrapped in the NPY array of bytes that member `name` is.
    pub fn wrapped_bytes(&mut self, name: &str) -> Result<Buffer> {
        let context = self.member_context(name);
        let member = bounded_entry(&self.directory, name, self.limit).map_err(&context)?;
        let size = member.size;
        reader::open(&mut self.reader, member, name)
            .and_then(|member| read::read_npy(member, size))
            .and_then(read::Npy::into_wrapped_bytes)
            .map_err(context)
    }

    /// The bytes of member `name` (a `system.mta`: a zip itself), its CRC
    /// checked, within the same bounds.
    pub fn raw_bytes(&mut self, name: &str) -> Result<Vec<u8>> {
        let context = self.member_context(name);
        let member = bounded_entry(&self.directory, name, self.limit).map_err(&context)?;
        raw_bytes(&mut self.reader, member, name).map_err(context)
    }

    /// What an error about member `name` says first.
    fn member_context(&self, name: &str) -> impl Fn(Error) -> Error {
        let context = format!("member '{name}' of '{}'", self.path.display());
        move |e: Error| e.context(&context)
    }
}

/// A zip held in memory, read by [`zip_members`]: every member's name (in
/// the zip's order), the arrays of the NPY members asked for and the bytes
/// of the other members asked for (in the order asked).
#[derive(Debug)]
pub struct ZipMembers {
    pub names: Vec<String>,
    pub arrays: Vec<Array>,
    pub raw: Vec<Vec<u8>>,
}

/// The members of the zip held in `buffer` (metatomic's `system.mta`): the
/// NPY members named in `npy` as arrays, the members named in `raw` as
/// their bytes (a neighbor list's `options.json`, an `.mts` archive). The
/// zip's structure and the NPY headers are read through copies (the buffer
/// may be caller memory others write), with [`ForeignZip`]'s bounds: a
/// member may take [`RATIO`] times the zip's size plus [`FLOOR`], and one
/// declaring more is refused before anything is allocated for it. A name
/// asked for that is not a member is an error, and so is a zip after other
/// bytes (what a truncated zip whose last member is itself an archive looks
/// like: that member's end record is found).
pub fn zip_members(buffer: Buffer, npy: &[String], raw: &[String]) -> Result<ZipMembers> {
    let len = u64::try_from(buffer.len()).map_err(|_| Error::format("the zip is too large"))?;
    let limit = len.saturating_mul(RATIO).saturating_add(FLOOR);
    let mut reader = Pieces::one(buffer).reader();
    let directory = Directory::read(&mut reader)?;
    // the end record found last may be that of an archive stored inside
    // (a `.mts` member), when the zip's own is cut off: its entries do not
    // start at the beginning of the data
    if directory.len() > 0 && !(0..directory.len()).any(|i| directory.entry(i).header == 0) {
        return Err(Error::format(
            "no entry starts at the beginning of the data: the zip is truncated, \
             or follows other bytes",
        ));
    }
    let mut names = Vec::new();
    names.try_reserve_exact(directory.len())?;
    names.extend(directory.names().map(str::to_string));
    let member = |name: &str| {
        bounded_entry(&directory, name, limit).map_err(|e| e.context(format!("member '{name}'")))
    };
    let mut arrays = Vec::new();
    arrays.try_reserve_exact(npy.len())?;
    for name in npy {
        let entry = member(name)?;
        let array = reader::open(&mut reader, entry, name)
            .and_then(|data| read::read_npy(data, entry.size))
            .and_then(read::Npy::into_array)
            .map_err(|e| e.context(format!("member '{name}'")))?;
        arrays.push(array);
    }
    let mut raws = Vec::new();
    raws.try_reserve_exact(raw.len())?;
    for name in raw {
        let entry = member(name)?;
        let bytes = raw_bytes(&mut reader, entry, name)
            .map_err(|e| e.context(format!("member '{name}'")))?;
        raws.push(bytes);
    }
    Ok(ZipMembers {
        names,
        arrays,
        raw: raws,
    })
}
