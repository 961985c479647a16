//! Local-folder warehouses: `object_store`'s `LocalFileSystem`, with every write made durable
//! before it is reported done.
//!
//! `LocalFileSystem` (object_store 0.13) writes a file and renames it into place but fsyncs
//! neither the file nor its folder. Sluice purges a WAL segment once the Delta commits holding
//! its records have returned, so on a local warehouse a power cut after such a commit could
//! lose acked rows that the WAL no longer has (a process crash cannot: the page cache outlives
//! the process). [`DurableLocal`] writes a put's bytes to a staging file, syncs it and only
//! then gives it its name ([`place`]: renamed over the target, or for a create-if-absent put,
//! a Delta commit, linked only if there is none), then syncs every folder from the file's own
//! up to the table's root (a put creates missing folders, and a new name is durable only once
//! its folder is). A name therefore never stands for bytes a power cut could take: a journaling
//! file system may commit a new name seconds before the data of a file written with delayed
//! allocation, and an empty commit file is a version that does not load. A completed multipart
//! upload, a copy or a rename returns once the file and its folders are synced (those files
//! are Parquet files, named by no commit until their write returned). Parquet files are
//! therefore durable before the commit that names them is written, and that commit is durable
//! before the WAL is purged. The warehouse's own folders (its root and each table's) are made
//! durable when they are created ([`create_dir_durable`]).
//!
//! Deletes are not synced: a delete lost to a power cut leaves a file that no commit names.
//! Each write's syncs are timed in `sluice_warehouse_sync_seconds`. A put whose data sync
//! fails placed nothing and is written anew to a new file (a failed fsync is not retried on
//! the same pages); one whose folder sync fails after its name was placed is placed and synced
//! again ([`unsynced`]). If no try holds, the put fails with the path and the OS error, and a
//! Delta log file whose name is there but not durable is kept unreadable to Sluice until a try
//! holds, so such a commit file is never counted as landed. A failed sync of a multipart
//! upload, copy or rename fails the write with the path and the OS error (the caller does not
//! use that file).

use std::fmt;
use std::io;
use std::path::{Path as FsPath, PathBuf};
use std::sync::{Arc, Once};
use std::time::Instant;

use async_trait::async_trait;
use deltalake::logstore::{
    object_store_factories, ObjectStoreFactory, ObjectStoreRef, StorageConfig,
};
use deltalake::{DeltaResult, DeltaTableError};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, MultipartUpload, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
    RenameOptions, Result, UploadPart,
};
use url::Url;

use place::{e_tag, place, PlaceError, Placement};
use unsynced::{is_log_file, Unsynced, REWRITE_PAUSES};

mod place;
mod unsynced;

/// How one path (file or folder) is made durable; tests record or fail it.
pub(crate) type SyncFn = Arc<dyn Fn(&FsPath) -> io::Result<()> + Send + Sync>;

/// `fsync` of a file or a folder.
fn fsync(path: &FsPath) -> io::Result<()> {
    std::fs::File::open(path)?.sync_all()
}

/// Makes deltalake open `file://` tables through [`DurableLocal`] (once per process).
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Ok(url) = Url::parse("file://") {
            object_store_factories().insert(url, Arc::new(DurableLocalFactory));
        }
    });
}

/// Builds a [`DurableLocal`] rooted at the table URL's folder. Unlike deltalake's default
/// factory it does not move the store's I/O to a separate runtime when the storage options
/// name one (`StorageConfig::runtime`): Sluice never sets those options, and
/// `LocalFileSystem` and the syncs already run on the blocking pool.
struct DurableLocalFactory;

impl ObjectStoreFactory for DurableLocalFactory {
    fn parse_url_opts(
        &self,
        url: &Url,
        _config: &StorageConfig,
    ) -> DeltaResult<(ObjectStoreRef, Path)> {
        let root = url
            .to_file_path()
            .map_err(|()| DeltaTableError::InvalidTableLocation(url.to_string()))?;
        let path = Path::from_url_path(url.path())
            .map_err(|e| DeltaTableError::InvalidTableLocation(format!("{url}: {e}")))?;
        Ok((Arc::new(DurableLocal::new(root)), path))
    }
}

/// `LocalFileSystem` (rooted at `/`) whose writes are durable when they return.
pub struct DurableLocal {
    inner: LocalFileSystem,
    /// The table's folder: syncs of a written file's folders stop there.
    root: PathBuf,
    sync: SyncFn,
    /// Log files written whose syncs failed (the process's registry, or a test's own).
    unsynced: Arc<Unsynced>,
}

impl DurableLocal {
    /// A store for the table whose folder is `root`.
    pub fn new(root: PathBuf) -> DurableLocal {
        DurableLocal {
            inner: LocalFileSystem::new(),
            root,
            sync: Arc::new(fsync),
            unsynced: Unsynced::process(),
        }
    }

    /// The same, with `sync` in place of `fsync` and a registry of its own (tests).
    #[cfg(test)]
    pub(crate) fn with_sync(root: PathBuf, sync: SyncFn) -> DurableLocal {
        DurableLocal {
            inner: LocalFileSystem::new(),
            root,
            sync,
            unsynced: Arc::default(),
        }
    }

    /// Places `payload` at `syncs.file` and syncs the folders ([`Syncs::put`]), trying
    /// again at once and after two pauses ([`REWRITE_PAUSES`]) while a sync fails: always
    /// with new bytes in a new staging file (never a second sync of the same pages), and,
    /// once a try has placed the name, over it. If no try holds, the put fails with the path
    /// and the OS error, and a Delta log file whose name was placed is kept as unsynced.
    /// Returns the durable file's metadata.
    async fn put_durably(
        &self,
        syncs: &Syncs,
        payload: &PutPayload,
        mut placement: Placement,
    ) -> Result<std::fs::Metadata> {
        let (mut placed, mut tries) = (false, 0);
        loop {
            let outcome = syncs.clone().put(payload.clone(), placement).await;
            let failed = match outcome {
                Ok((metadata, None)) => {
                    if tries > 0 {
                        rewritten("synced");
                        tracing::warn!(file = %syncs.file.display(), "written again and synced");
                    }
                    return Ok(metadata);
                }
                // Placed, its name not durable: the next try replaces the file.
                Ok((_, Some(folders))) => {
                    (placed, placement) = (true, Placement::Replace);
                    folders
                }
                Err(e @ PlaceError::Sync(_)) => e.into_store_error(&syncs.file),
                Err(e) => return Err(e.into_store_error(&syncs.file)),
            };
            if tries > 0 {
                rewritten("failed");
            }
            let Some(pause) = REWRITE_PAUSES.get(tries) else {
                if placed && is_log_file(&syncs.file) {
                    tracing::error!(file = %syncs.file.display(), "{failed}: not durable; Sluice reads of it fail until a rewrite syncs");
                    self.unsynced
                        .keep(syncs.file.clone(), payload.clone(), failed.to_string());
                }
                return Err(failed);
            };
            tracing::error!(file = %syncs.file.display(), "{failed}; writing the file again");
            tokio::time::sleep(*pause).await;
            tries += 1;
        }
    }

    /// Refuses a read of a log file kept as unsynced, after trying its rewrite once more;
    /// a rewrite that syncs makes it readable.
    async fn readable(&self, location: &Path) -> Result<()> {
        if self.unsynced.len() == 0 {
            return Ok(());
        }
        let syncs = self.plan(location)?;
        let Some(kept) = self.unsynced.kept(&syncs.file) else {
            return Ok(());
        };
        if !syncs.file.exists() {
            // Deleted since (log retention): nothing to make durable.
            self.unsynced.forget(&syncs.file);
            return Ok(());
        }
        match syncs.clone().rewrite(kept.bytes).await {
            Ok(()) => {
                rewritten("synced");
                tracing::warn!(file = %syncs.file.display(), "an unsynced log file written again and synced: readable");
                self.unsynced.forget(&syncs.file);
                Ok(())
            }
            Err(e) => {
                rewritten("failed");
                Err(object_store::Error::Generic {
                    store: "DurableLocal",
                    source: format!(
                        "{} is written but not durable (its fsync failed: {}; written again: {e}); \
                         it is not read until a rewrite syncs",
                        syncs.file.display(),
                        kept.error
                    )
                    .into(),
                })
            }
        }
    }

    /// What the syncs after writing `location` need, taken before the write.
    fn plan(&self, location: &Path) -> Result<Syncs> {
        Ok(Syncs {
            file: self.inner.path_to_filesystem(location)?,
            root: self.root.clone(),
            sync: Arc::clone(&self.sync),
        })
    }
}

/// The syncs that make one written file durable: the file, then its folders up to the root.
#[derive(Clone)]
struct Syncs {
    file: PathBuf,
    root: PathBuf,
    sync: SyncFn,
}

impl fmt::Debug for Syncs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Syncs({})", self.file.display())
    }
}

impl Syncs {
    /// Runs the syncs off the async workers, timed; `also` is one more folder to sync (a
    /// rename's source folder).
    async fn run(self, also: Option<PathBuf>) -> Result<()> {
        let started = Instant::now();
        let file = self.file.clone();
        let outcome = tokio::task::spawn_blocking(move || self.blocking(also.as_deref()))
            .await
            .map_err(|e| failed(&file, io::Error::other(format!("the sync task ended: {e}"))))?;
        metrics::histogram!("sluice_warehouse_sync_seconds").record(started.elapsed());
        outcome
    }

    fn blocking(&self, also: Option<&FsPath>) -> Result<()> {
        (self.sync)(&self.file).map_err(|e| failed(&self.file, e))?;
        self.folders(also)
    }

    /// Places `bytes` at the file ([`place`]: synced in a new file, then named), then syncs
    /// the folders; off the async workers, timed with the syncs. `Err` means nothing was
    /// placed; a folder sync that failed after the name was placed is returned beside the
    /// file's metadata.
    async fn put(
        self,
        bytes: PutPayload,
        placement: Placement,
    ) -> std::result::Result<(std::fs::Metadata, Option<object_store::Error>), PlaceError> {
        let started = Instant::now();
        let outcome = tokio::task::spawn_blocking(move || {
            let metadata = place(&self.file, &bytes, placement, &*self.sync)?;
            Ok((metadata, self.folders(None).err()))
        })
        .await
        .unwrap_or_else(|e| {
            Err(PlaceError::Write(io::Error::other(format!(
                "the put task ended: {e}"
            ))))
        });
        metrics::histogram!("sluice_warehouse_sync_seconds").record(started.elapsed());
        outcome
    }

    /// Places `bytes` over the file ([`Syncs::put`] with [`Placement::Replace`]); `Ok` once
    /// the file and its folders are synced.
    async fn rewrite(self, bytes: PutPayload) -> Result<()> {
        let file = self.file.clone();
        match self.put(bytes, Placement::Replace).await {
            Ok((_, None)) => Ok(()),
            Ok((_, Some(folders))) => Err(folders),
            Err(e) => Err(e.into_store_error(&file)),
        }
    }

    /// Syncs the written file's folders up to the root, then `also`; an error names the
    /// folder and the file.
    fn folders(&self, also: Option<&FsPath>) -> Result<()> {
        let sync = |path: &FsPath| {
            (self.sync)(path).map_err(|e| {
                failed(
                    path,
                    io::Error::new(
                        e.kind(),
                        format!("{e} (a folder of {})", self.file.display()),
                    ),
                )
            })
        };
        let mut folder = self.file.parent();
        while let Some(dir) = folder {
            sync(dir)?;
            if dir == self.root || !dir.starts_with(&self.root) {
                break;
            }
            folder = dir.parent();
        }
        match also {
            Some(dir) if Some(dir) != self.file.parent() => sync(dir),
            _ => Ok(()),
        }
    }
}

/// Counts a put tried again after a failed sync, by how it came out.
fn rewritten(outcome: &'static str) {
    metrics::counter!("sluice_warehouse_rewrites_total", "outcome" => outcome).increment(1);
}

/// What `LocalFileSystem` does not do either.
fn not_implemented(operation: &str) -> object_store::Error {
    object_store::Error::NotImplemented {
        operation: operation.into(),
        implementer: "DurableLocal".into(),
    }
}

fn failed(path: &FsPath, e: io::Error) -> object_store::Error {
    object_store::Error::Generic {
        store: "DurableLocal",
        source: format!("fsync {}: {e}", path.display()).into(),
    }
}

impl fmt::Display for DurableLocal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DurableLocal({})", self.root.display())
    }
}

impl fmt::Debug for DurableLocal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

super::wrapped_store!(DurableLocal, inner, check = readable, {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let placement = match opts.mode {
            PutMode::Overwrite => Placement::Replace,
            PutMode::Create => Placement::IfAbsent,
            PutMode::Update(_) => return Err(not_implemented("`put_opts` with `PutMode::Update`")),
        };
        if !opts.attributes.is_empty() {
            return Err(not_implemented("`put_opts` with attributes"));
        }
        let syncs = self.plan(location)?;
        let metadata = self.put_durably(&syncs, &payload, placement).await?;
        self.unsynced.forget(&syncs.file);
        Ok(PutResult {
            e_tag: Some(e_tag(&metadata)),
            version: None,
        })
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let syncs = self.plan(location)?;
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(DurableUpload { inner, syncs }))
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let syncs = self.plan(to)?;
        self.inner.copy_opts(from, to, options).await?;
        syncs.run(None).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        let syncs = self.plan(to)?;
        let source = self.inner.path_to_filesystem(from)?;
        self.inner.rename_opts(from, to, options).await?;
        syncs.run(source.parent().map(FsPath::to_path_buf)).await
    }
});

/// A multipart upload whose completion returns once the file is durable.
#[derive(Debug)]
struct DurableUpload {
    inner: Box<dyn MultipartUpload>,
    syncs: Syncs,
}

#[async_trait]
impl MultipartUpload for DurableUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let put = self.inner.complete().await?;
        self.syncs.clone().run(None).await?;
        Ok(put)
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
    }
}

/// `create_dir_all`, then an fsync of the parent of each folder it created (outermost first),
/// so the new folders survive a power cut.
pub fn create_dir_durable(path: &FsPath) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut probe = Some(path);
    while let Some(dir) = probe {
        if dir.exists() {
            break;
        }
        missing.push(dir);
        probe = dir.parent();
    }
    std::fs::create_dir_all(path)?;
    for dir in missing.iter().rev() {
        if let Some(parent) = dir.parent() {
            fsync(parent)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
