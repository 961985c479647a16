//! The single-node persistent stream registry: `<data-dir>/persistent-streams.json`,
//! mode 0600, every change written to a temporary file, fsync'd and renamed over the old
//! one (as the catalog's file), so a crash leaves the old or the new registry, never a
//! torn one. One process owns the data directory (the WAL's lock), so the records are
//! cached in memory and the file is only read at open.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::record::{PersistentStreamRecord, PersistentStreamStore};
use crate::catalog::persist_file;
use crate::error::{Result, ServerError};

/// File name of the registry in the data directory.
pub const FILE_NAME: &str = "persistent-streams.json";

/// The file's content.
#[derive(Default, Serialize, Deserialize)]
struct Registry {
    /// Records by stream id.
    streams: BTreeMap<String, PersistentStreamRecord>,
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
        let registry = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                ServerError::Internal(format!("{} is not a stream registry: {e}", path.display()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Registry::default(),
            Err(e) => return Err(ServerError::io(format!("reading {}", path.display()), e)),
        };
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

impl PersistentStreamStore for FileStreamStore {
    fn get(&self, id: &str) -> Result<Option<PersistentStreamRecord>> {
        Ok(self.lock()?.streams.get(id).cloned())
    }

    fn put(&self, record: PersistentStreamRecord) -> Result<()> {
        let mut registry = self.lock()?;
        let previous = registry.streams.insert(record.id.clone(), record.clone());
        let bytes = serde_json::to_vec_pretty(&*registry)
            .map_err(|e| ServerError::Internal(format!("encoding the stream registry: {e}")));
        let written = bytes.and_then(|bytes| persist_file(&self.path, &bytes));
        if written.is_err() {
            // Keep memory equal to the file.
            match previous {
                Some(p) => registry.streams.insert(record.id, p),
                None => registry.streams.remove(&record.id),
            };
        }
        written
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

    #[test]
    fn records_survive_a_reopen_in_a_private_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = FileStreamStore::open(dir.path()).expect("open");
        assert_eq!(store.get("s1").expect("get"), None);
        store.put(record("s1")).expect("put");
        let mut retired = record("s1");
        retired.retired = true;
        store.put(retired.clone()).expect("put");
        store.put(record("s2")).expect("put");
        let mode = std::fs::metadata(dir.path().join(FILE_NAME))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let reopened = FileStreamStore::open(dir.path()).expect("reopen");
        assert_eq!(reopened.get("s1").expect("get"), Some(retired));
        assert_eq!(reopened.get("s2").expect("get"), Some(record("s2")));
    }
}
