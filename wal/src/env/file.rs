//! The file-system contract the WAL is written against: a file it appends to and syncs,
//! and the directory operations around it.

use std::io::{self, IoSlice, Read};
use std::path::{Path, PathBuf};

use super::os;

/// A file opened for appending frames: the log's active segment.
pub trait WritableFile: Send {
    /// One `pwritev` at file offset `offset`: writes a prefix of `bufs` and returns its
    /// length, which may be short.
    fn write_vectored_at(&mut self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize>;
    /// `fdatasync`. After an error the file's unsynced pages may be lost: the log never
    /// retries it.
    fn sync_data(&mut self) -> io::Result<()>;
    /// Whether writes go through `O_DIRECT` (see [`super::DirectFileSystem`]).
    fn is_direct(&self) -> bool {
        false
    }
}

/// Every file-system operation the log performs on its segments. Each method but
/// [`FileSystem::create_preallocated`] defaults to the operating system's call; an
/// implementation overrides the ones it changes.
pub trait FileSystem: Send + Sync + 'static {
    /// Paths of the entries of `dir`.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        os::list_dir(dir)
    }
    /// Creates (or truncates) `path` and allocates `len` zero bytes to it.
    fn create_preallocated(&self, path: &Path, len: u64) -> io::Result<Box<dyn WritableFile>>;
    /// Opens `path` for sequential reading.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        os::open_read(path)
    }
    /// The whole content of `path`.
    fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        os::read_file(path)
    }
    /// Cuts `path` to `len` bytes and fsyncs it.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        os::truncate(path, len)
    }
    /// Cuts `path` to `len` bytes without syncing: a retired segment giving its blocks back
    /// a step at a time before it is removed.
    fn shrink(&self, path: &Path, len: u64) -> io::Result<()> {
        os::shrink(path, len)
    }
    /// Removes the file at `path` (durable only after [`FileSystem::sync_dir`]).
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        os::remove_file(path)
    }
    /// Renames `from` to `to`, replacing `to` (durable only after [`FileSystem::sync_dir`]).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        os::rename(from, to)
    }
    /// fsyncs the directory itself.
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        os::sync_dir(dir)
    }
}
