//! A pass-through [`FileSystem`] for tests that watch or steer the log's file operations:
//! [`Hooked`] forwards every call to the real file system and lets an [`FsHooks`] act
//! around the few that tests care about (creating a segment, renaming, the segment file
//! itself).

use std::io;
use std::path::Path;

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

/// The other operations are the trait's defaults: the real file system.
impl<H: FsHooks> FileSystem for Hooked<H> {
    fn create_preallocated(&self, path: &Path, len: u64) -> io::Result<Box<dyn WritableFile>> {
        self.0.before_create(path)?;
        let file = DefaultFileSystem.create_preallocated(path, len)?;
        Ok(self.0.wrap(file))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        DefaultFileSystem.rename(from, to)?;
        self.0.after_rename(from, to);
        Ok(())
    }
}
