//! A [`FileSystem`] that counts `fdatasync` calls: the WAL's own seam, used to report
//! fsyncs/s without touching the log.

use std::io::{self, IoSlice, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sluice_wal::env::{DefaultFileSystem, FileSystem, WritableFile};

/// The real file system plus a shared sync counter.
#[derive(Clone, Default)]
pub struct CountingFs {
    pub syncs: Arc<AtomicU64>,
}

impl CountingFs {
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }
}

struct CountingFile {
    inner: Box<dyn WritableFile>,
    syncs: Arc<AtomicU64>,
}

impl WritableFile for CountingFile {
    fn write_vectored_at(&mut self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        self.inner.write_vectored_at(bufs, offset)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.inner.sync_data()?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl FileSystem for CountingFs {
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        DefaultFileSystem.list_dir(dir)
    }

    fn create_preallocated(&self, path: &Path, len: u64) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(CountingFile {
            inner: DefaultFileSystem.create_preallocated(path, len)?,
            syncs: Arc::clone(&self.syncs),
        }))
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

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        DefaultFileSystem.remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        DefaultFileSystem.sync_dir(dir)
    }
}
