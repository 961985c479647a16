//! The file system behind a trait (after raft-engine's `env`), so that tests can swap it for
//! one that injects faults.
//!
//! [`FileSystem`] is the seam: every file operation the log performs on segments goes
//! through it (listing, creating and preallocating, reading, truncating, removing, directory
//! fsync), and the active segment is a [`WritableFile`] (positioned `writev`, `fdatasync`).
//! The methods are raw: they return [`std::io::Result`] and do no retrying, so that a short
//! write or an `EINTR` injected here exercises the log's own loops. The log adds the
//! operation and path to every error.
//!
//! Contract an implementation must keep (the log's durability rests on it):
//!
//! - [`WritableFile::sync_data`] returning `Ok` means every byte written to that file before
//!   the call is on stable storage and reads back after a power loss.
//! - [`FileSystem::sync_dir`] returning `Ok` makes every creation, removal and rename in that
//!   directory durable.
//! - [`FileSystem::create_preallocated`] reserves the space: writes inside `len` bytes do not
//!   change the file's size.
//! - [`FileSystem::rename`] replaces the target atomically; a [`WritableFile`] opened before
//!   keeps writing to the same file under its new name.
//!
//! [`DefaultFileSystem`] is the real thing (`std::fs` plus `fallocate`, `flock`-free).
//! With the cargo feature `failpoints`, [`FaultyFileSystem`] wraps it and injects short
//! writes, `EIO`/`ENOSPC` on write, `EIO` on `fdatasync`, `ENOSPC` on create, and a power
//! cut that drops every write made since the file's last successful `fdatasync`.

use std::io::{self, IoSlice, Read};
use std::path::{Path, PathBuf};

mod default;
#[cfg(feature = "failpoints")]
mod faulty;

pub use default::DefaultFileSystem;
#[cfg(feature = "failpoints")]
pub use faulty::FaultyFileSystem;

/// A file opened for appending frames: the log's active segment.
pub trait WritableFile: Send {
    /// One `pwritev` at file offset `offset`: writes a prefix of `bufs` and returns its
    /// length, which may be short.
    fn write_vectored_at(&mut self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize>;
    /// `fdatasync`. After an error the file's unsynced pages may be lost: the log never
    /// retries it.
    fn sync_data(&mut self) -> io::Result<()>;
}

/// Every file-system operation the log performs on its segments.
pub trait FileSystem: Send + Sync + 'static {
    /// Paths of the entries of `dir`.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    /// Creates (or truncates) `path` and allocates `len` zero bytes to it.
    fn create_preallocated(&self, path: &Path, len: u64) -> io::Result<Box<dyn WritableFile>>;
    /// Opens `path` for sequential reading.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>>;
    /// The whole content of `path`.
    fn read_file(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Cuts `path` to `len` bytes and fsyncs it.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    /// Removes the file at `path` (durable only after [`FileSystem::sync_dir`]).
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Renames `from` to `to`, replacing `to` (durable only after [`FileSystem::sync_dir`]).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// fsyncs the directory itself.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}
