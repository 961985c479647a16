//! Local-folder warehouses: `object_store`'s `LocalFileSystem`, with every write made durable
//! before it is reported done.
//!
//! `LocalFileSystem` (object_store 0.13) writes a file and renames it into place but fsyncs
//! neither the file nor its folder. Sluice purges a WAL segment once the Delta commits holding
//! its records have returned, so on a local warehouse a power cut after such a commit could
//! lose acked rows that the WAL no longer has (a process crash cannot: the page cache outlives
//! the process). [`DurableLocal`] syncs, before a put, a completed multipart upload, a copy or
//! a rename returns, the written file and then every folder from its own up to the table's
//! root (a put creates missing folders, and a new name is durable only once its folder is).
//! Parquet files are therefore durable before the commit that names them is written, and that
//! commit is durable before the WAL is purged. The warehouse's own folders (its root and each
//! table's) are made durable when they are created ([`create_dir_durable`]).
//!
//! Deletes are not synced: a delete lost to a power cut leaves a file that no commit names.
//! Each write's syncs are timed in `sluice_warehouse_sync_seconds`. A failed sync fails the
//! write with the path and the OS error; the committer treats it as any failed put (a commit
//! file found present afterwards counts as landed, as after a put that failed once written).

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
    CopyOptions, MultipartUpload, PutMultipartOptions, PutOptions, PutPayload, PutResult,
    RenameOptions, Result, UploadPart,
};
use url::Url;

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
}

impl DurableLocal {
    /// A store for the table whose folder is `root`.
    pub fn new(root: PathBuf) -> DurableLocal {
        DurableLocal::with_sync(root, Arc::new(fsync))
    }

    /// The same, with `sync` in place of `fsync` (tests).
    pub(crate) fn with_sync(root: PathBuf, sync: SyncFn) -> DurableLocal {
        DurableLocal {
            inner: LocalFileSystem::new(),
            root,
            sync,
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
        let sync = |path: &FsPath| (self.sync)(path).map_err(|e| failed(path, e));
        sync(&self.file)?;
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

super::wrapped_store!(DurableLocal, inner, {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let syncs = self.plan(location)?;
        let put = self.inner.put_opts(location, payload, opts).await?;
        syncs.run(None).await?;
        Ok(put)
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
