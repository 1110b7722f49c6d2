//! The writer's lock: one writer at a time per dataset file, across
//! processes. An exclusive `flock` on the file itself (its inode), held
//! for the writer's life: the kernel drops it when the last descriptor of
//! the open file goes, so a writer killed by any signal (SIGKILL included)
//! releases it. Readers never take it.
//!
//! A writer that waits for the lock of the file at a path may find, once
//! it has it, that the path now names another file (a writer that
//! replaced it, see `Writer::create`): it then locks that one instead.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::io;

/// How long a writer waits for another writer's lock: `None` for as long
/// as it takes.
pub type Timeout = Option<Duration>;

/// When the wait ends (`None`: never).
fn deadline(timeout: Timeout) -> Option<Instant> {
    timeout.and_then(|t| Instant::now().checked_add(t))
}

/// Take the exclusive lock of `file` (at `path`), waiting until
/// `deadline` at most; an error naming the path when another writer holds
/// it still then.
pub(crate) fn lock(file: &File, path: &Path, timeout: Timeout) -> Result<()> {
    let until = deadline(timeout);
    let mut pause = Duration::from_millis(1);
    loop {
        // SAFETY: flock on a descriptor `file` owns, open for its whole
        // call; it changes no memory.
        let done = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if done == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EWOULDBLOCK) => {}
            Some(libc::EINTR) => {
                crate::interrupt::check()?;
                continue;
            }
            _ => {
                return Err(Error::io(
                    format!("cannot lock '{}' for writing", path.display()),
                    error,
                ))
            }
        }
        let now = Instant::now();
        if until.is_some_and(|until| now >= until) {
            let waited = match timeout {
                Some(t) if !t.is_zero() => format!(" (waited {:.3} s)", t.as_secs_f64()),
                _ => String::new(),
            };
            return Err(Error::io(
                format!(
                    "'{}' is being written by another DatasetWriter{waited}: a dataset has one \
                     writer at a time (pass timeout= to wait for it, None to wait as long as it \
                     takes)",
                    path.display()
                ),
                std::io::Error::from_raw_os_error(libc::EWOULDBLOCK),
            ));
        }
        crate::interrupt::check()?;
        let left = until.map_or(pause, |until| until.saturating_duration_since(now));
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Give the lock of `file` back now (also when a forked child still holds
/// a copy of its descriptor, which would keep it otherwise).
pub(crate) fn unlock(file: &File) {
    // SAFETY: flock on a descriptor `file` owns; it changes no memory. A
    // failure leaves the lock to be dropped with the descriptor.
    let _ = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
}

/// Whether `file` is the file at `path` now.
fn is_at(file: &File, path: &Path) -> Result<bool> {
    let ours = file
        .metadata()
        .map_err(|e| Error::io(format!("cannot read '{}'", path.display()), e))?;
    Ok(match std::fs::metadata(path) {
        Ok(there) => there.dev() == ours.dev() && there.ino() == ours.ino(),
        Err(_) => false,
    })
}

/// The file at `path` (after symlinks: callers resolve them), opened
/// (for writing too with `write`) and locked, waiting for another writer
/// at most `timeout`; `None` when there is no file there. The lock is of
/// the file at `path` when this returns: one replaced while this waited
/// is let go, and the new one locked.
pub(crate) fn open_locked(path: &Path, write: bool, timeout: Timeout) -> Result<Option<File>> {
    let until = deadline(timeout);
    loop {
        // without waiting: a FIFO at the path would block the open forever
        let file = match io::open_regular_with(path, OpenOptions::new().read(true).write(write)) {
            Ok(file) => file,
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let left = until.map(|until| until.saturating_duration_since(Instant::now()));
        lock(&file, path, left)?;
        if is_at(&file, path)? {
            return Ok(Some(file));
        }
        // replaced while this waited: the lock of the new file is wanted
        unlock(&file);
    }
}

/// The lock of the creation of the dataset at a path: `.<name>.lock`
/// beside it (hidden, as the temporary file of a new dataset is: no glob
/// of the folder's files matches it), locked, which exists before the dataset does (as LMDB's
/// `lock.mdb`), so that two writers creating the same new path take
/// turns. Its holder removes it when done (still holding its lock: a
/// writer that waited for it then finds it gone and makes another one);
/// one left by a killed writer is taken over by the next.
#[derive(Debug)]
pub(crate) struct CreationLock {
    file: File,
    path: std::path::PathBuf,
    pid: u32,
}

impl CreationLock {
    /// Take the creation lock of the dataset at `target`, waiting for
    /// another writer `timeout` at most.
    pub(crate) fn take(target: &Path, timeout: Timeout) -> Result<CreationLock> {
        let mut name = std::ffi::OsString::from(".");
        name.push(
            target
                .file_name()
                .ok_or_else(|| Error::invalid(format!("'{}' names no file", target.display())))?,
        );
        name.push(".lock");
        let path = target.with_file_name(name);
        let until = deadline(timeout);
        loop {
            let file = io::open_regular_with(
                &path,
                OpenOptions::new().read(true).write(true).create(true),
            )?;
            let left = until.map(|until| until.saturating_duration_since(Instant::now()));
            lock(&file, target, left)?;
            // removed by the writer that held it while this one waited
            if is_at(&file, &path)? {
                return Ok(CreationLock {
                    file,
                    path,
                    pid: std::process::id(),
                });
            }
            unlock(&file);
        }
    }
}

impl Drop for CreationLock {
    fn drop(&mut self) {
        // a forked child's copy: its parent holds the lock
        if self.pid != std::process::id() {
            return;
        }
        if is_at(&self.file, &self.path).unwrap_or(false) {
            let _ = std::fs::remove_file(&self.path);
        }
        unlock(&self.file);
    }
}

/// The error of a writer asked to create a dataset at a path that holds
/// one: the two ways to go on named.
pub(crate) fn exists(path: &Path) -> Error {
    Error::io(
        format!(
            "'{}' exists: pass overwrite=True to replace it, or append=True to add to it",
            path.display()
        ),
        std::io::Error::from_raw_os_error(libc::EEXIST),
    )
}
