//! Test-only object store that fails the put of the next Delta commit file
//! (`_delta_log/<version>.json`): before writing it (the commit did not land)
//! or after writing it (it landed, but the committer hears an error) — the
//! two faces of an object store failing mid-commit.

use std::fmt;
use std::sync::{Arc, Mutex};

use object_store::path::Path;
use object_store::{
    CopyOptions, MultipartUpload, ObjectStore, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, Result,
};

/// When the armed fault strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    /// The put fails and nothing is written.
    Before,
    /// The put is done, then reported as failed.
    After,
}

/// Wraps a store; [`FaultStore::arm`] makes the next commit-file put fail once.
pub(super) struct FaultStore {
    inner: Arc<dyn ObjectStore>,
    armed: Mutex<Option<Fault>>,
}

impl FaultStore {
    pub(super) fn new(inner: Arc<dyn ObjectStore>) -> Arc<FaultStore> {
        Arc::new(FaultStore {
            inner,
            armed: Mutex::new(None),
        })
    }

    pub(super) fn arm(&self, fault: Fault) {
        *self.armed.lock().unwrap_or_else(|p| p.into_inner()) = Some(fault);
    }

    /// Whether the armed fault has struck (or none was armed).
    pub(super) fn struck(&self) -> bool {
        self.armed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// Takes the armed fault if `location` is a commit file.
    fn strike(&self, location: &Path) -> Option<Fault> {
        let s = location.as_ref();
        let commit = s.contains("_delta_log/") && s.ends_with(".json");
        let mut armed = self.armed.lock().unwrap_or_else(|p| p.into_inner());
        if commit {
            armed.take()
        } else {
            None
        }
    }
}

fn injected(location: &Path, fault: Fault) -> object_store::Error {
    object_store::Error::Generic {
        store: "fault",
        source: format!("injected failure {fault:?} the put of {location}").into(),
    }
}

impl fmt::Display for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultStore({})", self.inner)
    }
}

impl fmt::Debug for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultStore({})", self.inner)
    }
}

crate::warehouse::wrapped_store!(FaultStore, inner, {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        match self.strike(location) {
            Some(Fault::Before) => Err(injected(location, Fault::Before)),
            Some(Fault::After) => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(injected(location, Fault::After))
            }
            None => self.inner.put_opts(location, payload, opts).await,
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
});
