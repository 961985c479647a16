//! The cluster catalog store: one etcd key (`/sluice/catalog`) shared by every pod.
//!
//! The catalog's API is synchronous (a read is a lock and a map lookup), etcd's is async, and
//! the catalog is used from tokio tasks. So the store owns a small thread with its own
//! single-threaded runtime and etcd connection: `load` and `replace` send it a request and
//! wait for the answer (a loopback round trip, and only on changes: reads use the catalog's
//! in-memory copy). The same thread watches the key and raises [`CatalogStore::revision_hint`]
//! when another pod changes the catalog, so the next read reloads it.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use sluice_router::etcd::EtcdOptions;
use sluice_router::meta::{Meta, CATALOG_KEY};
use tokio::sync::mpsc as tmpsc;

use super::store::{CatalogStore, Stored};
use crate::error::{Result, ServerError};

/// How long a catalog request waits for etcd before failing.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

enum Request {
    Load(mpsc::SyncSender<Result<Option<Stored>>>),
    Replace(i64, Vec<u8>, mpsc::SyncSender<Result<Option<i64>>>),
}

/// The catalog in etcd.
pub struct EtcdStore {
    join: String,
    requests: tmpsc::UnboundedSender<Request>,
    hint: Arc<AtomicI64>,
}

impl EtcdStore {
    /// Connects to etcd at `join` (`etcd://HOST:PORT[,…]`, `etcds://` for TLS) with
    /// `options` (TLS material, credentials) on a thread of its own.
    pub fn connect(join: &str, options: EtcdOptions) -> Result<EtcdStore> {
        let (requests, inbox) = tmpsc::unbounded_channel();
        let hint = Arc::new(AtomicI64::new(0));
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let url = join.to_string();
        let thread_hint = hint.clone();
        std::thread::Builder::new()
            .name("catalog-etcd".into())
            .spawn(move || serve(url, options, inbox, thread_hint, ready_tx))
            .map_err(|e| ServerError::io("starting the catalog's etcd thread", e))?;
        ready_rx
            .recv_timeout(REQUEST_TIMEOUT)
            .map_err(|_| ServerError::Unavailable(format!("etcd at {join} did not answer")))??;
        Ok(EtcdStore {
            join: join.to_string(),
            requests,
            hint,
        })
    }

    fn ask<T>(&self, make: impl FnOnce(mpsc::SyncSender<Result<T>>) -> Request) -> Result<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.requests
            .send(make(tx))
            .map_err(|_| ServerError::Unavailable("the catalog's etcd thread stopped".into()))?;
        rx.recv_timeout(REQUEST_TIMEOUT).map_err(|_| {
            ServerError::Unavailable(format!("etcd at {} did not answer in time", self.join))
        })?
    }
}

impl CatalogStore for EtcdStore {
    fn load(&self) -> Result<Option<Stored>> {
        let stored = self.ask(Request::Load)?;
        if let Some(s) = &stored {
            self.hint.fetch_max(s.revision, Ordering::AcqRel);
        }
        Ok(stored)
    }

    fn replace(&self, expected: i64, bytes: &[u8]) -> Result<Option<i64>> {
        let revision = self.ask(|tx| Request::Replace(expected, bytes.to_vec(), tx))?;
        if let Some(r) = revision {
            self.hint.fetch_max(r, Ordering::AcqRel);
        }
        Ok(revision)
    }

    fn revision_hint(&self) -> i64 {
        self.hint.load(Ordering::Acquire)
    }

    fn describe(&self) -> String {
        format!("{}{CATALOG_KEY}", self.join)
    }
}

fn etcd_error(e: sluice_router::RouterError) -> ServerError {
    ServerError::Unavailable(format!("catalog in etcd: {e}"))
}

fn serve(
    url: String,
    options: EtcdOptions,
    mut inbox: tmpsc::UnboundedReceiver<Request>,
    hint: Arc<AtomicI64>,
    ready: mpsc::SyncSender<Result<()>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(ServerError::io("building the catalog's runtime", e)));
            return;
        }
    };
    runtime.block_on(async move {
        let meta = match Meta::connect(&url, &options).await {
            Ok(m) => m,
            Err(e) => {
                let _ = ready.send(Err(etcd_error(e)));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        let watcher = meta.clone();
        tokio::spawn(async move {
            loop {
                let hint = hint.clone();
                let watched = watcher
                    .watch_revisions(CATALOG_KEY, move |r| {
                        hint.fetch_max(r, Ordering::AcqRel);
                    })
                    .await;
                if let Err(e) = watched {
                    tracing::warn!("watching the catalog in etcd failed: {e}; retrying");
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        while let Some(request) = inbox.recv().await {
            match request {
                Request::Load(reply) => {
                    let got = meta.get(CATALOG_KEY).await.map_err(etcd_error).map(|v| {
                        v.map(|v| Stored {
                            bytes: v.value,
                            revision: v.revision,
                        })
                    });
                    let _ = reply.send(got);
                }
                Request::Replace(expected, bytes, reply) => {
                    let put = meta
                        .compare_and_put(CATALOG_KEY, expected, bytes)
                        .await
                        .map_err(etcd_error);
                    let _ = reply.send(put);
                }
            }
        }
    });
}
