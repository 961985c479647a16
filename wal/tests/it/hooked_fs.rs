//! A pass-through [`FileSystem`] for tests that watch or steer the log's file operations:
//! [`Hooked`] forwards every call to [`DefaultFileSystem`] and lets an [`FsHooks`] act
//! around the few that tests care about (creating a segment, renaming, the segment file
//! itself).

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use sluice_wal::env::{DefaultFileSystem, FileSystem, WritableFile};

/// What a test does around the real file system; every default passes through.
pub trait FsHooks: Send + Sync + 'static {
    /// Runs before a file is created; an error is returned instead of creating it.
    fn before_create(&self, _path: &Path) -> io::Result<()> {
        Ok(())
    }

    /// Wraps every file the log opens for writing.
    fn wrap(&self, file: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        file
    }

    /// Runs after a successful rename.
    fn after_rename(&self, _from: &Path, _to: &Path) {}
}

/// The real file system with `H` acting around it.
pub struct Hooked<H>(pub H);

impl<H: FsHooks> FileSystem for Hooked<H> {
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        DefaultFileSystem.list_dir(dir)
    }

    fn create_preallocated(&self, path: &Path, len: u64) -> io::Result<Box<dyn WritableFile>> {
        self.0.before_create(path)?;
        let file = DefaultFileSystem.create_preallocated(path, len)?;
        Ok(self.0.wrap(file))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        DefaultFileSystem.open_read(path)
    }

    fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        DefaultFileSystem.read_file(path)
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        DefaultFileSystem.truncate(path, len)
    }

    fn shrink(&self, path: &Path, len: u64) -> io::Result<()> {
        DefaultFileSystem.shrink(path, len)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        DefaultFileSystem.remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        DefaultFileSystem.rename(from, to)?;
        self.0.after_rename(from, to);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        DefaultFileSystem.sync_dir(dir)
    }
}
