//! The single-node catalog store: `<data-dir>/catalog.json`.
//!
//! Every change is written to a temporary file, fsync'd and renamed over the
//! old one (then the directory is fsync'd), so a crash leaves either the old or
//! the new catalog, never a torn one. One process owns the file (the WAL's
//! directory lock keeps a second pod off the data directory), so revisions
//! are an in-process counter. The file is created owner-only (0600).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};

use super::store::{CatalogStore, Stored};
use crate::data_dir::write_private;
use crate::error::{Result, ServerError};

const CATALOG_FILE: &str = "catalog.json";

/// The catalog file of one data directory.
pub struct FileStore {
    path: PathBuf,
    revision: AtomicI64,
}

impl FileStore {
    /// The store in `data_dir` (the file need not exist yet).
    pub fn open(data_dir: &Path) -> Result<FileStore> {
        let path = data_dir.join(CATALOG_FILE);
        let exists = path
            .try_exists()
            .map_err(|e| ServerError::io(format!("checking {}", path.display()), e))?;
        Ok(FileStore {
            path,
            revision: AtomicI64::new(i64::from(exists)),
        })
    }
}

impl CatalogStore for FileStore {
    fn load(&self) -> Result<Option<Stored>> {
        match std::fs::read(&self.path) {
            Ok(bytes) => Ok(Some(Stored {
                bytes,
                revision: self.revision.load(Ordering::Acquire).max(1),
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ServerError::io(
                format!("reading {}", self.path.display()),
                e,
            )),
        }
    }

    fn replace(&self, expected: i64, bytes: &[u8]) -> Result<Option<i64>> {
        if self.revision.load(Ordering::Acquire) != expected {
            return Ok(None);
        }
        persist_file(&self.path, bytes)?;
        let next = expected + 1;
        self.revision.store(next, Ordering::Release);
        Ok(Some(next))
    }

    fn revision_hint(&self) -> i64 {
        self.revision.load(Ordering::Acquire)
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }
}

/// Replaces the JSON file at `path` with `bytes` atomically: a temporary file created
/// owner-only (0600, umask-independent), fsync'd, renamed over `path`, then the directory
/// fsync'd.
pub(crate) fn persist_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    // A leftover temporary file would keep its old (maybe looser) mode.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(ServerError::io(format!("removing {}", tmp.display()), e))
        }
        _ => {}
    }
    write_private(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
        .map_err(|e| ServerError::io(format!("renaming {}", tmp.display()), e))?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| ServerError::io(format!("syncing {}", dir.display()), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replace_from_a_stale_revision_stores_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = FileStore::open(dir.path()).expect("open");
        assert!(store.load().expect("load").is_none());
        let first = store.replace(0, b"{\"v\":1}").expect("replace");
        assert_eq!(first, Some(1));
        assert_eq!(store.replace(0, b"{\"v\":2}").expect("stale"), None);
        let stored = store.load().expect("load").expect("stored");
        assert_eq!(stored.bytes, b"{\"v\":1}");
        assert_eq!(stored.revision, 1);
        assert_eq!(store.replace(1, b"{\"v\":3}").expect("replace"), Some(2));
        let reopened = FileStore::open(dir.path()).expect("reopen");
        assert_eq!(
            reopened.load().expect("load").map(|s| s.bytes),
            Some(b"{\"v\":3}".to_vec())
        );
    }
}
