//! Replacing a file atomically, keeping what the user had.
//!
//! The contract (docs/format.md, "Saving"):
//! - the data goes to a temporary file in the directory of the target,
//!   renamed over the target once complete and synced: readers see the old
//!   file or the new one, never a part; a file something has mapped is
//!   replaced, never truncated;
//! - a symlink is followed: its target is what gets replaced, the link stays;
//! - the mode of the file replaced is kept (its owner and group too, where
//!   the process may set them); a new file gets `0o666` less the umask;
//! - the temporary file is unnamed while it is written (Linux `O_TMPFILE`),
//!   so a save killed at any moment leaves nothing behind; where that is not
//!   supported it is named `.bm-<16 random hex digits>.tmp`, a name short
//!   enough beside any valid name, retried when it exists;
//! - the file's data is synced (`fdatasync`) before the rename and the
//!   directory (`fsync`) after it, so a completed save survives a crash
//!   (a save asked not to be durable skips both syncs: it still survives
//!   the process being killed at any moment, not a crash of the system);
//! - on failure the temporary file is removed and the target is untouched;
//!   nothing is ever printed.

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// Symlinks followed at most (as the kernel's own limit, `MAXSYMLINKS`).
const MAX_SYMLINKS: usize = 40;

/// Attempts at a random temporary name before giving up.
const NAME_ATTEMPTS: usize = 32;

/// The file a save to `path` replaces: `path`, or what its chain of
/// symlinks points to (which need not exist yet).
pub(crate) fn resolve(path: &Path) -> Result<PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..MAX_SYMLINKS {
        match std::fs::symlink_metadata(&path) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                let target = std::fs::read_link(&path).map_err(|e| {
                    Error::io(format!("cannot follow the link '{}'", path.display()), e)
                })?;
                path = match path.parent() {
                    Some(parent) if target.is_relative() => parent.join(target),
                    _ => target,
                };
            }
            _ => return Ok(path),
        }
    }
    Err(Error::io(
        format!("cannot follow the link '{}'", path.display()),
        std::io::Error::from_raw_os_error(libc::ELOOP),
    ))
}

/// A temporary file beside the file it will replace.
#[derive(Debug)]
pub(crate) struct Temporary {
    file: Option<File>,
    directory: PathBuf,
    /// the name it has, when it is not an unnamed `O_TMPFILE`
    name: Option<PathBuf>,
}

impl Temporary {
    /// A new temporary file in the directory of `target`, with the mode of
    /// `target` when it exists (applied once written).
    pub(crate) fn beside(target: &Path) -> Result<Temporary> {
        let directory = match target.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let shown = target.display();
        let error = |e| Error::io(format!("cannot create a file beside '{shown}'"), e);
        if let Some(file) = unnamed(&directory).map_err(error)? {
            return Ok(Temporary {
                file: Some(file),
                directory,
                name: None,
            });
        }
        for _ in 0..NAME_ATTEMPTS {
            let name = directory.join(format!(".bm-{:016x}.tmp", random()));
            match create_new(&name) {
                Ok(file) => {
                    return Ok(Temporary {
                        file: Some(file),
                        directory,
                        name: Some(name),
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(error(e)),
            }
        }
        Err(error(std::io::Error::from_raw_os_error(libc::EEXIST)))
    }

    /// The file, for writing.
    pub(crate) fn file(&mut self) -> Result<&mut File> {
        self.file
            .as_mut()
            .ok_or_else(|| Error::internal("the temporary file was already given back"))
    }

    /// The file, for reading and positioned writes.
    pub(crate) fn file_ref(&self) -> Result<&File> {
        self.file
            .as_ref()
            .ok_or_else(|| Error::internal("the temporary file was already given back"))
    }

    /// Put the file at `target` only when nothing is there (a new file's
    /// mode, synced as [`Temporary::replace`] syncs), giving it back;
    /// `None` when `target` exists (it is left as it is, and this
    /// temporary removed).
    pub(crate) fn place_new(mut self, target: &Path, durable: bool) -> Result<Option<File>> {
        let shown = target.display();
        let error = |e| Error::io(format!("cannot write '{shown}'"), e);
        let file = self.file_ref()?;
        if durable {
            file.sync_data().map_err(error)?;
        }
        keep_mode_and_owner(file, target).map_err(error)?;
        let linked = match &self.name {
            Some(name) => std::fs::hard_link(name, target),
            None => link_unnamed_at(file, target),
        };
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
            Err(e) => return Err(error(e)),
        }
        if let Some(name) = self.name.take() {
            let _ = std::fs::remove_file(name);
        }
        self.placed(durable, error).map(Some)
    }

    /// Sync the data, give it the mode (and owner) of `target` when it
    /// exists, put it in place of `target` and sync the directory; without
    /// `durable`, the same without the two syncs.
    pub(crate) fn replace(self, target: &Path, durable: bool) -> Result<()> {
        self.replace_keeping(target, durable).map(drop)
    }

    /// [`Temporary::replace`], giving back the file (open for writing,
    /// now at `target`).
    pub(crate) fn replace_keeping(mut self, target: &Path, durable: bool) -> Result<File> {
        let shown = target.display();
        let error = |e| Error::io(format!("cannot write '{shown}'"), e);
        let file = self
            .file
            .as_ref()
            .ok_or_else(|| Error::internal("the temporary file was already given back"))?;
        if durable {
            file.sync_data().map_err(error)?;
        }
        keep_mode_and_owner(file, target).map_err(error)?;
        match self.name.take() {
            Some(name) => {
                if let Err(e) = std::fs::rename(&name, target) {
                    self.name = Some(name);
                    return Err(error(e));
                }
            }
            None => link_unnamed(file, &self.directory, target).map_err(error)?,
        }
        self.placed(durable, error)
    }

    /// The file, now at its target, given back; with `durable`, the
    /// directory synced (the new name is durable once the directory is).
    fn placed(&mut self, durable: bool, error: impl Fn(std::io::Error) -> Error) -> Result<File> {
        let file = self
            .file
            .take()
            .ok_or_else(|| Error::internal("the temporary file was already given back"))?;
        if durable {
            if let Ok(directory) = File::open(&self.directory) {
                directory.sync_all().map_err(error)?;
            }
        }
        Ok(file)
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        self.file = None;
        if let Some(name) = self.name.take() {
            let _ = std::fs::remove_file(name);
        }
    }
}

/// A new file `name`, readable and writable by its owner only until it is
/// complete (then it takes the mode it will keep).
fn create_new(name: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).read(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(name)
}

/// A 64-bit number no other process or call is likely to draw: the
/// standard library's per-process random keys, the time and a counter.
fn random() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    hasher.finish()
}

/// The mode a new file gets: `0o666` less the umask, read without changing
/// it (from `/proc/self/status`); `0o644` when it cannot be read.
#[cfg(unix)]
fn default_mode() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Umask:"))
                .and_then(|umask| u32::from_str_radix(umask.trim(), 8).ok())
        })
        .map_or(0o644, |umask| 0o666 & !umask)
}

#[cfg(unix)]
fn keep_mode_and_owner(file: &File, target: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    match std::fs::metadata(target) {
        Ok(existing) => {
            let (uid, gid) = (existing.uid(), existing.gid());
            let ours = file.metadata()?;
            if ours.uid() != uid || ours.gid() != gid {
                // SAFETY: fchown on a descriptor the file owns; a refusal
                // (EPERM: not ours to give away) leaves the owner as it is.
                let _ = unsafe { libc::fchown(file.as_raw_fd(), uid, gid) };
            }
            file.set_permissions(std::fs::Permissions::from_mode(existing.mode() & 0o7777))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            file.set_permissions(std::fs::Permissions::from_mode(default_mode()))
        }
        Err(e) => Err(e),
    }
}

#[cfg(not(unix))]
fn keep_mode_and_owner(_file: &File, _target: &Path) -> std::io::Result<()> {
    Ok(())
}

/// An unnamed temporary file in `directory` (`O_TMPFILE`), or `None` where
/// the system or the file system does not have them.
#[cfg(target_os = "linux")]
fn unnamed(directory: &Path) -> std::io::Result<Option<File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = OpenOptions::new()
        .write(true)
        .read(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(directory);
    match opened {
        Ok(file) => Ok(Some(file)),
        Err(e) => match e.raw_os_error() {
            // not supported here: a named temporary file instead
            Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL | libc::ENOENT) => Ok(None),
            _ => Err(e),
        },
    }
}

#[cfg(not(target_os = "linux"))]
fn unnamed(_directory: &Path) -> std::io::Result<Option<File>> {
    Ok(None)
}

/// Give the unnamed `file` a random name in `directory` (through
/// `/proc/self/fd`, which needs no privilege), then rename it over `target`.
#[cfg(target_os = "linux")]
fn link_unnamed(file: &File, directory: &Path, target: &Path) -> std::io::Result<()> {
    for _ in 0..NAME_ATTEMPTS {
        let name = directory.join(format!(".bm-{:016x}.tmp", random()));
        match link_unnamed_at(file, &name) {
            // a name taken: another one is tried
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(error),
            Ok(()) => {
                return std::fs::rename(&name, target).inspect_err(|_| {
                    let _ = std::fs::remove_file(&name);
                })
            }
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::EEXIST))
}

/// Give the unnamed `file` the name `target`, which must not exist
/// (`AlreadyExists` otherwise).
#[cfg(target_os = "linux")]
fn link_unnamed_at(file: &File, target: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let source = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_err(std::io::Error::other)?;
    let destination = CString::new(target.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: two NUL-terminated paths; linkat only reads them, and never
    // replaces an existing name.
    let linked = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            source.as_ptr(),
            libc::AT_FDCWD,
            destination.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if linked != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn link_unnamed_at(_file: &File, _target: &Path) -> std::io::Result<()> {
    Err(std::io::Error::other("unnamed temporary files need Linux"))
}

#[cfg(not(target_os = "linux"))]
fn link_unnamed(_file: &File, _directory: &Path, _target: &Path) -> std::io::Result<()> {
    Err(std::io::Error::other("unnamed temporary files need Linux"))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::fixtures::TempDir;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    fn write(target: &Path, text: &str) {
        let mut temporary = Temporary::beside(target).unwrap();
        temporary
            .file()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        temporary.replace(target, true).unwrap();
    }

    #[test]
    fn replaces_keeping_mode_and_following_links() {
        let dir = TempDir::new("replace-keep");
        let real = dir.join("real.mts");
        std::fs::write(&real, "old").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.join("link.mts");
        std::os::unix::fs::symlink("real.mts", &link).unwrap();

        write(&resolve(&link).unwrap(), "new");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // nothing else in the directory
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn a_dropped_temporary_leaves_nothing() {
        let dir = TempDir::new("replace-drop");
        let target = dir.join("x".repeat(250));
        let mut temporary = Temporary::beside(&target).unwrap();
        temporary.file().unwrap().write_all(b"half").unwrap();
        drop(temporary);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // a 250-byte name: the temporary name is short
        write(&target, "done");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "done");
    }

    #[test]
    fn link_loops_are_an_error() {
        let dir = TempDir::new("replace-loop");
        std::os::unix::fs::symlink("b", dir.join("a")).unwrap();
        std::os::unix::fs::symlink("a", dir.join("b")).unwrap();
        assert!(resolve(&dir.join("a")).is_err());
        // a dangling link resolves to its target, to be created
        std::os::unix::fs::symlink("new.mts", dir.join("dangling")).unwrap();
        assert_eq!(resolve(&dir.join("dangling")).unwrap(), dir.join("new.mts"));
    }
}
