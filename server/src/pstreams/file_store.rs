//! The single-node persistent stream registry: `<data-dir>/persistent-streams.json`,
//! mode 0600, every change written to a temporary file, fsync'd and renamed over the old
//! one (as the catalog's file), so a crash leaves the old or the new registry, never a
//! torn one. One process owns the data directory (the WAL's lock), so the records are
//! cached in memory and the file is only read at open. Revisions live in memory only (one
//! counter per process, every record at 1 after an open): they guard concurrent writes
//! within the process, the only writer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::record::{PersistentStreamRecord, PersistentStreamStore, StoredStream};
use crate::catalog::persist_file;
use crate::error::{Result, ServerError};

/// File name of the registry in the data directory.
pub const FILE_NAME: &str = "persistent-streams.json";

/// The file's content.
#[derive(Default, Serialize, Deserialize)]
struct Registry {
    /// Records by stream id.
    streams: BTreeMap<String, PersistentStreamRecord>,
    /// Revisions by stream id (not stored).
    #[serde(skip)]
    revisions: BTreeMap<String, i64>,
    /// The last revision handed out (not stored).
    #[serde(skip)]
    revision: i64,
}

impl Registry {
    fn stored(&self, id: &str) -> Option<StoredStream> {
        let record = self.streams.get(id)?.clone();
        let revision = self.revisions.get(id).copied().unwrap_or(1);
        Some(StoredStream { record, revision })
    }
}

/// The registry file of one data directory.
pub struct FileStreamStore {
    path: PathBuf,
    registry: Mutex<Registry>,
}

impl FileStreamStore {
    /// Opens (reads) the registry in `data_dir`; a missing file is an empty registry.
    pub fn open(data_dir: &Path) -> Result<FileStreamStore> {
        let path = data_dir.join(FILE_NAME);
        let mut registry: Registry = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                ServerError::Internal(format!("{} is not a stream registry: {e}", path.display()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Registry::default(),
            Err(e) => return Err(ServerError::io(format!("reading {}", path.display()), e)),
        };
        registry.revision = 1;
        Ok(FileStreamStore {
            path,
            registry: Mutex::new(registry),
        })
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Registry>> {
        self.registry
            .lock()
            .map_err(|_| ServerError::Internal("persistent stream registry poisoned".into()))
    }
}

#[tonic::async_trait]
impl PersistentStreamStore for FileStreamStore {
    async fn get(&self, id: &str) -> Result<Option<StoredStream>> {
        Ok(self.lock()?.stored(id))
    }

    async fn replace(&self, expected: i64, record: PersistentStreamRecord) -> Result<bool> {
        let mut registry = self.lock()?;
        let current = registry.stored(&record.id).map_or(0, |s| s.revision);
        if current != expected {
            return Ok(false);
        }
        let previous = registry.streams.insert(record.id.clone(), record.clone());
        let bytes = serde_json::to_vec_pretty(&*registry)
            .map_err(|e| ServerError::Internal(format!("encoding the stream registry: {e}")));
        let written = bytes.and_then(|bytes| persist_file(&self.path, &bytes));
        if let Err(e) = written {
            // Keep memory equal to the file.
            match previous {
                Some(p) => registry.streams.insert(record.id, p),
                None => registry.streams.remove(&record.id),
            };
            return Err(e);
        }
        registry.revision += 1;
        let revision = registry.revision;
        registry.revisions.insert(record.id, revision);
        Ok(true)
    }

    async fn list(&self) -> Result<Vec<StoredStream>> {
        let registry = self.lock()?;
        Ok(registry
            .streams
            .keys()
            .filter_map(|id| registry.stored(id))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::pstreams::record::StreamRecordType;

    fn record(id: &str) -> PersistentStreamRecord {
        PersistentStreamRecord {
            id: id.into(),
            table: "main.a.b".into(),
            record_type: StreamRecordType::Proto,
            descriptor: vec![0, 1, 255],
            owner: "pod-1".into(),
            retired: false,
            created_at: "2026-12-05T00:00:00Z".into(),
        }
    }

    fn record_of(stored: Option<StoredStream>) -> Option<PersistentStreamRecord> {
        stored.map(|s| s.record)
    }

    #[tokio::test]
    async fn records_survive_a_reopen_in_a_private_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = FileStreamStore::open(dir.path()).expect("open");
        assert_eq!(store.get("s1").await.expect("get"), None);
        assert!(store.replace(0, record("s1")).await.expect("create"));
        let revision = store
            .get("s1")
            .await
            .expect("get")
            .map_or(0, |s| s.revision);
        let mut retired = record("s1");
        retired.retired = true;
        assert!(store.replace(revision, retired.clone()).await.expect("put"));
        assert!(store.replace(0, record("s2")).await.expect("create"));
        let mode = std::fs::metadata(dir.path().join(FILE_NAME))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let reopened = FileStreamStore::open(dir.path()).expect("reopen");
        assert_eq!(
            record_of(reopened.get("s1").await.expect("get")),
            Some(retired)
        );
        assert_eq!(
            record_of(reopened.get("s2").await.expect("get")),
            Some(record("s2"))
        );
        assert_eq!(reopened.list().await.expect("list").len(), 2);
    }

    #[tokio::test]
    async fn a_write_on_a_stale_revision_changes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = FileStreamStore::open(dir.path()).expect("open");
        assert!(store.replace(0, record("s1")).await.expect("create"));
        assert!(!store.replace(0, record("s1")).await.expect("second create"));
        let first = store
            .get("s1")
            .await
            .expect("get")
            .map_or(0, |s| s.revision);
        let mut moved = record("s1");
        moved.owner = "pod-2".into();
        assert!(store.replace(first, moved.clone()).await.expect("move"));
        let mut stale = record("s1");
        stale.owner = "pod-3".into();
        assert!(!store.replace(first, stale).await.expect("stale move"));
        assert_eq!(record_of(store.get("s1").await.expect("get")), Some(moved));
    }
}
