//! Files of a local warehouse that have their name but may not survive a power cut: written
//! again until the syncs hold, and unreadable to Sluice until then.
//!
//! A put syncs its bytes before they get their name (`place`), so a failed data sync leaves
//! no file behind. Once the name is there, the folders' syncs make it durable; if one fails,
//! the name is visible to every lister of the folder but may be lost to a power cut. Either
//! way the put is tried again at once and after two pauses ([`REWRITE_PAUSES`]), each time
//! with its bytes in a new staging file (after a failed fsync Linux may have marked the pages
//! clean without writing them, so a second fsync of the same pages proves nothing), renamed
//! over the name once a try has placed it (`DurableLocal::put_durably`).
//!
//! A Delta log file (a path with a `_delta_log` folder) for which none of that held is kept
//! in [`Unsynced`] with its bytes: a commit file is then in the log for anyone who lists
//! the folder, but not durable. Every read of it through `DurableLocal` first tries once
//! more and fails, naming the sync error, until one holds. The committer therefore cannot
//! reload the log past it, never finds the hand-off covered, and the pod keeps the WAL that
//! holds its records; once the disk takes the syncs, the next reload reads the commit and
//! the WAL is let go. Other files (Parquet files) are not kept: a put that failed is not
//! named by any commit (the flush writes again).
//!
//! What is kept lives in process memory: a pod restarted while a file is unsynced reads it
//! as any other file. The gauge `sluice_warehouse_unsynced_files` counts the kept files
//! (alert `SluiceWarehouseFilesNotDurable`: do not restart the pod while it fires);
//! `sluice_warehouse_rewrites_total{outcome}` counts the puts tried again.

use std::collections::HashMap;
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use object_store::PutPayload;

/// Pauses before each new try after a put's failed sync: at once, then twice later.
pub(super) const REWRITE_PAUSES: [Duration; 3] = [
    Duration::ZERO,
    Duration::from_millis(100),
    Duration::from_secs(1),
];

/// Kept files: the path, with the bytes it must hold and the last sync error.
#[derive(Default)]
pub(crate) struct Unsynced {
    files: Mutex<HashMap<PathBuf, Kept>>,
    /// `files.len()`, read without the lock on every read of the store.
    count: AtomicUsize,
}

#[derive(Clone)]
pub(super) struct Kept {
    pub(super) bytes: PutPayload,
    pub(super) error: String,
}

/// The process's one registry (every table's store shares it: a table opened twice is the
/// same files). Made with the first local table's store, which also exports the gauge at 0.
static PROCESS: LazyLock<Arc<Unsynced>> = LazyLock::new(|| {
    metrics::gauge!("sluice_warehouse_unsynced_files").set(0.0);
    Arc::default()
});

impl Unsynced {
    pub(super) fn process() -> Arc<Unsynced> {
        Arc::clone(&PROCESS)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<PathBuf, Kept>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn recount(&self, files: &HashMap<PathBuf, Kept>) {
        self.count.store(files.len(), Ordering::Relaxed);
        if std::ptr::eq(self, &**PROCESS) {
            metrics::gauge!("sluice_warehouse_unsynced_files").set(files.len() as f64);
        }
    }

    /// Keeps `file` with the bytes it must hold.
    pub(super) fn keep(&self, file: PathBuf, bytes: PutPayload, error: String) {
        let mut files = self.lock();
        files.insert(file, Kept { bytes, error });
        self.recount(&files);
    }

    /// Forgets `file` (written anew, or made durable).
    pub(super) fn forget(&self, file: &FsPath) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut files = self.lock();
        if files.remove(file).is_some() {
            self.recount(&files);
        }
    }

    /// What `file` must hold, if it is kept.
    pub(super) fn kept(&self, file: &FsPath) -> Option<Kept> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.lock().get(file).cloned()
    }

    /// How many files are kept.
    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}

/// Whether a failed `file` is kept until a rewrite holds: Delta log files.
pub(super) fn is_log_file(file: &FsPath) -> bool {
    file.parent()
        .and_then(FsPath::file_name)
        .is_some_and(|d| d == "_delta_log")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_of_a_delta_log_are_kept() {
        assert!(is_log_file(FsPath::new(
            "/w/t/_delta_log/00000000000000000003.json"
        )));
        assert!(is_log_file(FsPath::new("/w/t/_delta_log/_last_checkpoint")));
        assert!(!is_log_file(FsPath::new("/w/t/part-0001.parquet")));
        assert!(!is_log_file(FsPath::new("/w/t/_delta_log")));
    }

    #[test]
    fn the_registry_keeps_and_forgets() {
        let kept = Unsynced::default();
        let file = PathBuf::from("/w/t/_delta_log/00000000000000000001.json");
        assert!(kept.kept(&file).is_none());
        kept.keep(file.clone(), PutPayload::from_static(b"x"), "EIO".into());
        assert_eq!(kept.len(), 1);
        assert_eq!(kept.kept(&file).map(|k| k.error), Some("EIO".to_string()));
        kept.forget(&file);
        assert_eq!(kept.len(), 0);
        assert!(kept.kept(&file).is_none());
    }
}
