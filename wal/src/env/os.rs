//! The operating system's calls behind the file-system seam: the directory operations the
//! [`super::FileSystem`] methods default to, positioned `pwritev`, `fallocate`, and the
//! owner-only modes every file and directory of the log is created with. Plain `std` and
//! `libc`; nothing of the log.

use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Read};
use std::path::{Path, PathBuf};

/// Mode of the log directory (and of any parent it creates): owner only.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file of the log: owner read and write only.
pub const FILE_MODE: u32 = 0o600;

/// Makes `options` create its file with [`FILE_MODE`] (an existing file keeps its mode).
pub(crate) fn owner_only(options: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(options, FILE_MODE);
    options
}

#[cfg(unix)]
pub(crate) fn pwritev(file: &File, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
    use std::os::unix::io::AsRawFd;
    // IOV_MAX is 1024 on Linux; a longer list is written by the caller's loop.
    let count = bufs.len().min(1024);
    let off = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset overflows off_t"))?;
    // SAFETY: `IoSlice` is ABI-compatible with `iovec` on unix; the pointer and count
    // describe `count` live slices; the descriptor belongs to `file`, which outlives the call.
    let rc = unsafe {
        libc::pwritev(
            file.as_raw_fd(),
            bufs.as_ptr().cast::<libc::iovec>(),
            count as libc::c_int,
            off,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

#[cfg(not(unix))]
pub(crate) fn pwritev(file: &File, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = file;
    f.seek(SeekFrom::Start(offset))?;
    f.write_vectored(bufs)
}

pub(crate) fn list_dir(dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect()
}

/// Creates (or truncates) `path` with [`FILE_MODE`], for writing, and allocates `len` bytes.
pub(crate) fn create_preallocated(path: &Path, len: u64) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    owner_only(&mut options);
    let file = options.open(path)?;
    preallocate(&file, len)?;
    Ok(file)
}

pub(crate) fn open_read(path: &Path) -> io::Result<Box<dyn Read + Send>> {
    Ok(Box::new(File::open(path)?))
}

pub(crate) fn read_file(path: &Path) -> io::Result<Vec<u8>> {
    std::fs::read(path)
}

pub(crate) fn truncate(path: &Path, len: u64) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(path)?;
    file.set_len(len)?;
    file.sync_all()
}

pub(crate) fn shrink(path: &Path, len: u64) -> io::Result<()> {
    OpenOptions::new().write(true).open(path)?.set_len(len)
}

pub(crate) fn remove_file(path: &Path) -> io::Result<()> {
    std::fs::remove_file(path)
}

pub(crate) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)
}

pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(target_os = "linux")]
pub(crate) fn preallocate(file: &File, len: u64) -> io::Result<()> {
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
pub(crate) fn preallocate(file: &File, len: u64) -> io::Result<()> {
    file.set_len(len)
}
