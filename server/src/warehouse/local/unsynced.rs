//! Files of a local warehouse whose fsync failed: written again until a sync holds, and
//! unreadable to Sluice until then.
//!
//! After a failed fsync, Linux may have marked the file's pages clean without writing them:
//! the error is reported once, and a second fsync of the same pages can succeed with nothing
//! on the disk. So a failed sync is never retried on the same file. [`rewrite`] writes the
//! caller's bytes to a new file beside it (`{name}#{digits}`, a staging name that
//! `LocalFileSystem`'s listings skip), syncs it, renames it over the file and syncs the
//! folders. A put that held its bytes tries that at once and after two pauses
//! ([`REWRITE_PAUSES`]).
//!
//! A Delta log file (a path with a `_delta_log` folder) whose rewrites all failed is kept in
//! [`Unsynced`] with its bytes: a commit file is then in the log for anyone who lists the
//! folder, but not durable. Every read of it through `DurableLocal` first tries the rewrite
//! again and fails, naming the fsync error, until one syncs. The committer therefore cannot
//! reload the log past it, never finds the hand-off covered, and the pod keeps the WAL that
//! holds its records; once the disk takes the rewrite, the next reload reads the commit and
//! the WAL is let go. Other files (Parquet files) are not kept: a put that failed is not
//! named by any commit (the flush writes again).
//!
//! What is kept lives in process memory: a pod restarted while a file is unsynced reads what
//! the page cache then holds as any other file. The gauge `sluice_warehouse_unsynced_files`
//! counts the kept files (alert `SluiceWarehouseFilesNotDurable`: do not restart the pod
//! while it fires); `sluice_warehouse_rewrites_total{outcome}` counts rewrites.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use object_store::PutPayload;

/// Pauses before each rewrite after a put's failed sync: at once, then twice later.
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

/// A name beside `file` that listings skip (`{name}#{digits}`) and no other writer uses.
fn staging(file: &FsPath) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut name = file.as_os_str().to_owned();
    name.push(format!("#9{}{nanos:09}{n}", std::process::id()));
    PathBuf::from(name)
}

/// Writes `bytes` to a new file beside `file`, makes it durable with `sync` and renames it
/// over `file` (the caller then syncs the folders). The new file is removed if any step
/// fails.
pub(super) fn rewrite(
    file: &FsPath,
    bytes: &PutPayload,
    sync: &dyn Fn(&FsPath) -> io::Result<()>,
) -> io::Result<()> {
    let fresh = staging(file);
    let outcome = (|| {
        let mut out = std::fs::File::create_new(&fresh)?;
        for chunk in bytes.iter() {
            out.write_all(chunk)?;
        }
        drop(out);
        sync(&fresh)?;
        std::fs::rename(&fresh, file)
    })();
    if outcome.is_err() {
        let _ = std::fs::remove_file(&fresh);
    }
    outcome
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
    fn a_rewrite_replaces_the_file_and_leaves_no_staging_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("00000000000000000001.json");
        std::fs::write(&file, b"torn").expect("write");
        let bytes: PutPayload = [
            bytes::Bytes::from_static(b"{\"a\""),
            bytes::Bytes::from_static(b":1}"),
        ]
        .into_iter()
        .collect();

        rewrite(&file, &bytes, &|p| std::fs::File::open(p)?.sync_all()).expect("rewrite");
        assert_eq!(std::fs::read(&file).expect("read"), b"{\"a\":1}");

        let err = rewrite(&file, &PutPayload::from_static(b"other"), &|_| {
            Err(io::Error::from_raw_os_error(5))
        })
        .expect_err("the sync fails");
        assert_eq!(err.raw_os_error(), Some(5));
        assert_eq!(
            std::fs::read(&file).expect("read"),
            b"{\"a\":1}",
            "untouched"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 1, "no staging file left: {names:?}");
    }

    #[test]
    fn staging_names_are_hidden_from_listings_and_distinct() {
        let file = FsPath::new("/w/t/_delta_log/00000000000000000001.json");
        let (a, b) = (staging(file), staging(file));
        assert_ne!(a, b);
        let name = a.file_name().and_then(|n| n.to_str()).expect("name");
        let (_, suffix) = name.split_once('#').expect("a # suffix");
        assert!(
            !suffix.is_empty() && suffix.bytes().all(|c| c.is_ascii_digit()),
            "{name}"
        );
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
