//! Every raw file-system operation the log performs: create and preallocate, open, write,
//! `fdatasync`, truncate, remove, directory fsync, the directory lock and the random bytes of
//! the log id. Keeping them in one small module is what lets a later change put them behind
//! a trait for fault injection (as raft-engine's `env` does) without touching the log logic.
//!
//! Every function names the operation and the path in its error.

use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Result, WalError};

/// Name of the lock file inside the log directory.
const LOCK_FILE: &str = "LOCK";

pub(crate) fn create_dir_all(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| WalError::io(format!("create directory {}", dir.display()), e))
}

/// Takes an exclusive `flock` on `{dir}/LOCK`; held until the returned file is dropped.
pub(crate) fn lock_dir(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
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

/// Names of the entries of `dir`.
pub(crate) fn list_dir(dir: &Path) -> Result<Vec<PathBuf>> {
    let context = || format!("list directory {}", dir.display());
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| WalError::io(context(), e))? {
        out.push(entry.map_err(|e| WalError::io(context(), e))?.path());
    }
    Ok(out)
}

/// Creates (or truncates) `path` and allocates `len` zero bytes to it, so that later writes
/// inside that range never change the file's size or block map.
pub(crate) fn create_preallocated(path: &Path, len: u64) -> Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| WalError::io(format!("create {}", path.display()), e))?;
    preallocate(&file, len)
        .map_err(|e| WalError::io(format!("preallocate {len} bytes for {}", path.display()), e))?;
    Ok(file)
}

#[cfg(target_os = "linux")]
fn preallocate(file: &File, len: u64) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let off_len = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "segment size overflows off_t"))?;
    loop {
        // SAFETY: the descriptor belongs to `file`, which outlives the call.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, off_len) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => return file.set_len(len),
            _ => return Err(err),
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn preallocate(file: &File, len: u64) -> io::Result<()> {
    file.set_len(len)
}

pub(crate) fn open_read(path: &Path) -> Result<File> {
    File::open(path).map_err(|e| WalError::io(format!("open {}", path.display()), e))
}

pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| WalError::io(format!("read {}", path.display()), e))
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

pub(crate) fn write_all(file: &mut File, buf: &[u8], path: &Path) -> Result<()> {
    file.write_all(buf)
        .map_err(|e| WalError::io(format!("write {}", path.display()), e))
}

/// Writes all of `bufs` at the file's current position with as few `writev` calls as the
/// kernel allows.
pub(crate) fn write_all_vectored(
    file: &mut File,
    mut bufs: &mut [IoSlice<'_>],
    path: &Path,
) -> Result<()> {
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match file.write_vectored(bufs) {
            Ok(0) => {
                return Err(WalError::io(
                    format!("write {}", path.display()),
                    io::Error::new(io::ErrorKind::WriteZero, "writev wrote nothing"),
                ))
            }
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(WalError::io(format!("write {}", path.display()), e)),
        }
    }
    Ok(())
}

/// `fdatasync`: the file's data (and the metadata needed to read it back) is on stable
/// storage when this returns Ok.
pub(crate) fn sync_data(file: &File, path: &Path) -> Result<()> {
    file.sync_data()
        .map_err(|e| WalError::io(format!("fdatasync {}", path.display()), e))
}

/// Cuts `path` to `len` bytes and fsyncs it.
pub(crate) fn truncate(path: &Path, len: u64) -> Result<()> {
    let context = || format!("truncate {} to {len} bytes", path.display());
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| WalError::io(context(), e))?;
    file.set_len(len).map_err(|e| WalError::io(context(), e))?;
    file.sync_all().map_err(|e| WalError::io(context(), e))
}

pub(crate) fn remove_file(path: &Path) -> Result<()> {
    std::fs::remove_file(path).map_err(|e| WalError::io(format!("remove {}", path.display()), e))
}

/// fsyncs the directory itself, making creations, renames and removals in it durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    let context = || format!("fsync directory {}", dir.display());
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| WalError::io(context(), e))
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
    let mut file =
        File::create(&tmp).map_err(|e| WalError::io(format!("create {}", tmp.display()), e))?;
    write_all(&mut file, contents, &tmp)?;
    file.sync_all()
        .map_err(|e| WalError::io(format!("fsync {}", tmp.display()), e))?;
    drop(file);
    std::fs::rename(&tmp, &path)
        .map_err(|e| WalError::io(format!("rename {} to {}", tmp.display(), path.display()), e))?;
    sync_dir(dir)
}

/// Fills `buf` from the operating system's random source.
pub(crate) fn random_bytes(buf: &mut [u8]) -> Result<()> {
    let path = Path::new("/dev/urandom");
    let mut f = open_read(path)?;
    f.read_exact(buf)
        .map_err(|e| WalError::io(format!("read {}", path.display()), e))
}
