//! [`DefaultFileSystem`]: the real file system (`std::fs`, `pwritev`, `fdatasync`,
//! `fallocate`). Segments are created with mode [`crate::FILE_MODE`] (owner only),
//! whatever the process umask.

use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Read};
use std::path::{Path, PathBuf};

use super::file::{FileSystem, WritableFile};

/// The operating system's file system. Stateless; cheap to share.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultFileSystem;

struct StdFile(File);

impl WritableFile for StdFile {
    fn write_vectored_at(&mut self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        pwritev(&self.0, bufs, offset)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
}

#[cfg(unix)]
pub(super) fn pwritev(file: &File, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
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
pub(super) fn pwritev(file: &File, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = file;
    f.seek(SeekFrom::Start(offset))?;
    f.write_vectored(bufs)
}

/// Every method is the trait's default: the operating system's file system.
impl FileSystem for DefaultFileSystem {}

pub(super) fn list_dir(dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect()
}

pub(super) fn create_preallocated(path: &Path, len: u64) -> io::Result<Box<dyn WritableFile>> {
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    crate::fs::owner_only(&mut options);
    let file = options.open(path)?;
    preallocate(&file, len)?;
    Ok(Box::new(StdFile(file)))
}

pub(super) fn open_read(path: &Path) -> io::Result<Box<dyn Read + Send>> {
    Ok(Box::new(File::open(path)?))
}

pub(super) fn read_file(path: &Path) -> io::Result<Vec<u8>> {
    std::fs::read(path)
}

pub(super) fn truncate(path: &Path, len: u64) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(path)?;
    file.set_len(len)?;
    file.sync_all()
}

pub(super) fn shrink(path: &Path, len: u64) -> io::Result<()> {
    OpenOptions::new().write(true).open(path)?.set_len(len)
}

pub(super) fn remove_file(path: &Path) -> io::Result<()> {
    std::fs::remove_file(path)
}

pub(super) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)
}

pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(target_os = "linux")]
pub(super) fn preallocate(file: &File, len: u64) -> io::Result<()> {
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
pub(super) fn preallocate(file: &File, len: u64) -> io::Result<()> {
    file.set_len(len)
}
