//! The log's file operations with their error context: the segment operations go through
//! the [`FileSystem`] seam (see [`crate::env`]); the directory lock, the small `wal-id` file
//! and the random bytes of the log id use `std` directly (nothing to inject there).
//!
//! Every function names the operation and the path in its error.
//!
//! Privacy: the log holds every record before it reaches Delta, so its directory is created
//! with mode [`DIR_MODE`] and every file in it (segments, spares, `wal-id`, `LOCK`) with
//! [`FILE_MODE`], set at creation (independent of the umask).

use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Read, Write};
use std::path::{Path, PathBuf};

use crate::env::file::{FileSystem, WritableFile};
pub(crate) use crate::env::os::owner_only;
pub use crate::env::os::{DIR_MODE, FILE_MODE};
use crate::error::{Result, WalError};

/// Name of the lock file inside the log directory.
const LOCK_FILE: &str = "LOCK";

pub(crate) fn create_dir_all(dir: &Path) -> Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, DIR_MODE);
    builder
        .create(dir)
        .map_err(|e| WalError::io(format!("create directory {}", dir.display()), e))
}

/// Takes an exclusive `flock` on `{dir}/LOCK` (what an open log holds), held until the
/// returned file is dropped: [`WalError::Locked`] while a log is open there. Tools that
/// must not run beside a live log take it too.
pub fn lock_dir(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let file = owner_only(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false),
    )
    .open(&path)
    .map_err(|e| WalError::io(format!("open lock file {}", path.display()), e))?;
    flock_exclusive(&file).map_err(|e| {
        if e.kind() == io::ErrorKind::WouldBlock {
            WalError::Locked(dir.to_path_buf())
        } else {
            WalError::io(format!("lock {}", path.display()), e)
        }
    })?;
    Ok(file)
}

#[cfg(unix)]
fn flock_exclusive(file: &File) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    loop {
        // SAFETY: the descriptor belongs to `file`, which outlives the call.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(not(unix))]
fn flock_exclusive(_file: &File) -> io::Result<()> {
    Ok(())
}

/// Paths of the entries of `dir`.
pub(crate) fn list_dir(env: &dyn FileSystem, dir: &Path) -> Result<Vec<PathBuf>> {
    env.list_dir(dir)
        .map_err(|e| WalError::io(format!("list directory {}", dir.display()), e))
}

/// Creates (or truncates) `path` and allocates `len` zero bytes to it, so that later writes
/// inside that range never change the file's size or block map.
pub(crate) fn create_preallocated(
    env: &dyn FileSystem,
    path: &Path,
    len: u64,
) -> Result<Box<dyn WritableFile>> {
    env.create_preallocated(path, len).map_err(|e| {
        WalError::io(
            format!("create and preallocate {len} bytes for {}", path.display()),
            e,
        )
    })
}

pub(crate) fn open_read(env: &dyn FileSystem, path: &Path) -> Result<Box<dyn Read + Send>> {
    env.open_read(path)
        .map_err(|e| WalError::io(format!("open {}", path.display()), e))
}

pub(crate) fn read_file(env: &dyn FileSystem, path: &Path) -> Result<Vec<u8>> {
    env.read_file(path)
        .map_err(|e| WalError::io(format!("read {}", path.display()), e))
}

/// Reads up to `buf.len()` bytes, fewer only at the end of the file.
pub(crate) fn read_full(reader: &mut impl Read, buf: &mut [u8], path: &Path) -> Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match reader.read(&mut buf[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(WalError::io(format!("read {}", path.display()), e)),
        }
    }
    Ok(done)
}

/// Writes all of `bufs` at file offset `offset`, looping over short writes and `EINTR`.
pub(crate) fn write_all_at(
    file: &mut dyn WritableFile,
    mut bufs: &mut [IoSlice<'_>],
    mut offset: u64,
    path: &Path,
) -> Result<()> {
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match file.write_vectored_at(bufs, offset) {
            Ok(0) => {
                return Err(WalError::io(
                    format!("write {} at offset {offset}", path.display()),
                    io::Error::new(io::ErrorKind::WriteZero, "writev wrote nothing"),
                ))
            }
            Ok(n) => {
                IoSlice::advance_slices(&mut bufs, n);
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(WalError::io(
                    format!("write {} at offset {offset}", path.display()),
                    e,
                ))
            }
        }
    }
    Ok(())
}

/// `fdatasync`: the file's data (and the metadata needed to read it back) is on stable
/// storage when this returns Ok. Its errors are never [`WalError::NoSpace`]: a failed sync
/// is final whatever its cause.
pub(crate) fn sync_data(file: &mut dyn WritableFile, path: &Path) -> Result<()> {
    file.sync_data().map_err(|source| WalError::Io {
        context: format!("fdatasync {}", path.display()),
        source,
    })
}

/// Renames `from` to `to` (durable after [`sync_dir`]).
pub(crate) fn rename(env: &dyn FileSystem, from: &Path, to: &Path) -> Result<()> {
    env.rename(from, to)
        .map_err(|e| WalError::io(format!("rename {} to {}", from.display(), to.display()), e))
}

/// Cuts `path` to `len` bytes and fsyncs it.
pub(crate) fn truncate(env: &dyn FileSystem, path: &Path, len: u64) -> Result<()> {
    env.truncate(path, len)
        .map_err(|e| WalError::io(format!("truncate {} to {len} bytes", path.display()), e))
}

/// Removes every file of `dir` whose name starts with `prefix` and ends with `suffix`.
pub(crate) fn remove_named(
    env: &dyn FileSystem,
    dir: &Path,
    prefix: &str,
    suffix: &str,
) -> Result<()> {
    for path in list_dir(env, dir)? {
        let matches = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(prefix) && n.ends_with(suffix));
        if matches {
            remove_file(env, &path)?;
        }
    }
    Ok(())
}

/// Cuts `path` to `len` bytes without syncing it.
pub(crate) fn shrink(env: &dyn FileSystem, path: &Path, len: u64) -> Result<()> {
    env.shrink(path, len)
        .map_err(|e| WalError::io(format!("shrink {} to {len} bytes", path.display()), e))
}

/// The size of the file at `path`.
pub(crate) fn file_len(path: &Path) -> Result<u64> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| WalError::io(format!("stat {}", path.display()), e))
}

pub(crate) fn remove_file(env: &dyn FileSystem, path: &Path) -> Result<()> {
    env.remove_file(path)
        .map_err(|e| WalError::io(format!("remove {}", path.display()), e))
}

/// fsyncs the directory itself, making creations, renames and removals in it durable.
pub(crate) fn sync_dir(env: &dyn FileSystem, dir: &Path) -> Result<()> {
    env.sync_dir(dir)
        .map_err(|e| WalError::io(format!("fsync directory {}", dir.display()), e))
}

/// The contents of a small text file, or `None` if it does not exist.
pub(crate) fn read_to_string_if_exists(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(WalError::io(format!("read {}", path.display()), e)),
    }
}

/// Writes a small file atomically and durably: temporary file, fsync, rename, dir fsync.
pub(crate) fn write_file_durably(dir: &Path, name: &str, contents: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let mut file = owner_only(OpenOptions::new().write(true).create(true).truncate(true))
        .open(&tmp)
        .map_err(|e| WalError::io(format!("create {}", tmp.display()), e))?;
    file.write_all(contents)
        .map_err(|e| WalError::io(format!("write {}", tmp.display()), e))?;
    file.sync_all()
        .map_err(|e| WalError::io(format!("fsync {}", tmp.display()), e))?;
    drop(file);
    std::fs::rename(&tmp, &path)
        .map_err(|e| WalError::io(format!("rename {} to {}", tmp.display(), path.display()), e))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| WalError::io(format!("fsync directory {}", dir.display()), e))
}

/// Fills `buf` from the operating system's random source.
pub(crate) fn random_bytes(buf: &mut [u8]) -> Result<()> {
    let path = Path::new("/dev/urandom");
    let mut f =
        File::open(path).map_err(|e| WalError::io(format!("open {}", path.display()), e))?;
    f.read_exact(buf)
        .map_err(|e| WalError::io(format!("read {}", path.display()), e))
}
