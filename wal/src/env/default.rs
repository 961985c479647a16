//! [`DefaultFileSystem`]: the real file system (`std::fs`, `pwritev`, `fdatasync`,
//! `fallocate`). Segments are created with mode [`crate::FILE_MODE`] (owner only),
//! whatever the process umask.

use std::fs::File;
use std::io::{self, IoSlice};
use std::path::Path;

use super::file::{FileSystem, WritableFile};
use super::os;

/// The operating system's file system. Stateless; cheap to share.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultFileSystem;

struct StdFile(File);

impl WritableFile for StdFile {
    fn write_vectored_at(&mut self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        os::pwritev(&self.0, bufs, offset)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
}

/// Every other method is the trait's default: the operating system's.
impl FileSystem for DefaultFileSystem {
    fn create_preallocated(&self, path: &Path, len: u64) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(StdFile(os::create_preallocated(path, len)?)))
    }
}
