//! Persistent streams on this pod: their durable records ([`record`], kept by a
//! [`PersistentStreamStore`]; single node: [`file_store`]), which connection holds each
//! stream, and the highest offset this pod's WAL holds for each — the WAL half of a
//! stream's watermark (Delta's `txn`, see `sink::stream_txns`, is the other half).
//!
//! One connection at a time holds a stream: a resume (or a retire) signals the connection
//! holding it to end, and the resume waits for the hold to be released before it reads the
//! watermark, so no two connections of one stream ever log records at once on this pod.
//!
//! Across pods: a record's `owner` is the pod that holds the stream (empty: released). A
//! cluster keeps the records in etcd ([`etcd_store`]) and moves ownership by asking the
//! owner to release ([`StreamPeers`], served by `cluster::pstreams_grpc`) and then a
//! compare-and-swap of the owner; the sequence is `ingest::handover`.

pub mod etcd_store;
pub mod file_store;
pub mod forget;
pub mod record;

pub use etcd_store::EtcdStreamStore;
pub use file_store::FileStreamStore;
pub use record::{PersistentStreamRecord, PersistentStreamStore, StoredStream, StreamRecordType};

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use sluice_wal::Lsn;
use tokio::sync::{watch, OwnedMutexGuard};

use crate::error::{Result, ServerError};
use crate::journal::frames::RecordFormat;

/// Why a connection holding a persistent stream must end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The stream was retired.
    Retired,
    /// Another connection resumed the stream.
    Resumed,
}

/// This pod's view of one persistent stream.
struct Live {
    /// Highest offset logged in this pod's WAL and the end LSN of its frame.
    wal_mark: Option<(i64, Lsn)>,
    /// Held by the connection serving the stream.
    hold: Arc<tokio::sync::Mutex<()>>,
    /// `(generation, why)`: a connection attached at a lower generation ends.
    signals: watch::Sender<(u64, Ending)>,
}

impl Default for Live {
    fn default() -> Self {
        Live {
            wal_mark: None,
            hold: Arc::default(),
            signals: watch::channel((0, Ending::Resumed)).0,
        }
    }
}

/// A connection's hold on a persistent stream (released when dropped).
pub struct Attached {
    _hold: OwnedMutexGuard<()>,
    generation: u64,
    signals: watch::Receiver<(u64, Ending)>,
}

impl Attached {
    /// Resolves when this connection must end, with why (None: the signal's sender is
    /// gone, so it never ends that way). It watches a copy of the signal, so the hold stays
    /// with `self` (released when the connection's stream ends).
    pub fn ended(&self) -> futures::future::BoxFuture<'static, Option<Ending>> {
        Box::pin(ended_after(self.signals.clone(), self.generation))
    }
}

/// Why a connection of `generation` must end, once the signal passes it; None if the
/// signal's sender is gone first.
async fn ended_after(
    mut signals: watch::Receiver<(u64, Ending)>,
    generation: u64,
) -> Option<Ending> {
    loop {
        let (at, why) = *signals.borrow_and_update();
        if at > generation {
            return Some(why);
        }
        signals.changed().await.ok()?;
    }
}

/// What the owner of a stream answered a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Released {
    /// The stream's watermark after the owner committed its rows.
    pub watermark: Option<i64>,
    /// Whether the pod owned the stream and let it go.
    pub released: bool,
}

/// The other pods of a cluster, as persistent streams need them.
#[tonic::async_trait]
pub trait StreamPeers: Send + Sync {
    /// Asks pod `owner` to release stream `id`. `Err` says why it could not (not
    /// registered, not answering, refused): the stream is fenced until it can.
    async fn release(&self, owner: &str, id: &str) -> std::result::Result<Released, String>;
}

/// The persistent streams of a pod.
pub struct PersistentStreams {
    store: Box<dyn PersistentStreamStore>,
    pod_id: String,
    peers: Option<Box<dyn StreamPeers>>,
    live: Mutex<HashMap<String, Live>>,
}

impl PersistentStreams {
    /// The streams kept by `store`, served by pod `pod_id`; `peers`: the other pods of a
    /// cluster (None: single node).
    pub fn new(
        store: Box<dyn PersistentStreamStore>,
        pod_id: impl Into<String>,
        peers: Option<Box<dyn StreamPeers>>,
    ) -> Self {
        PersistentStreams {
            store,
            pod_id: pod_id.into(),
            peers,
            live: Mutex::new(HashMap::new()),
        }
    }

    /// The other pods of the cluster (None: single node).
    pub fn peers(&self) -> Option<&dyn StreamPeers> {
        self.peers.as_deref()
    }

    /// This pod's id (the owner of the streams it creates).
    pub fn pod_id(&self) -> &str {
        &self.pod_id
    }

    fn live(&self) -> Result<MutexGuard<'_, HashMap<String, Live>>> {
        self.live
            .lock()
            .map_err(|_| ServerError::Internal("persistent stream state poisoned".into()))
    }

    /// Registers a new stream of `table`, owned by this pod; returns its record.
    pub async fn create(
        &self,
        table: &str,
        format: RecordFormat,
        descriptor: Vec<u8>,
    ) -> Result<PersistentStreamRecord> {
        let record = PersistentStreamRecord {
            id: uuid::Uuid::new_v4().to_string(),
            table: table.to_string(),
            record_type: StreamRecordType::try_from(format)?,
            descriptor,
            owner: self.pod_id.clone(),
            retired: false,
            created_at: chrono::Utc::now().to_rfc3339(),
        };
        if !self.store.replace(0, record.clone()).await? {
            return Err(ServerError::Internal(format!(
                "persistent stream id `{}` is taken",
                record.id
            )));
        }
        Ok(record)
    }

    /// The record of stream `id` with its revision: NOT_FOUND when there is none.
    pub async fn get(&self, id: &str) -> Result<StoredStream> {
        self.store.get(id).await?.ok_or_else(|| {
            ServerError::NotFound(format!("persistent stream `{id}` does not exist"))
        })
    }

    /// Writes `record` if its revision is still `revision`; `false` when it changed first.
    pub async fn replace(&self, revision: i64, record: PersistentStreamRecord) -> Result<bool> {
        self.store.replace(revision, record).await
    }

    /// Every stream this pod owns (retired ones too).
    pub async fn owned(&self) -> Result<Vec<StoredStream>> {
        let mut all = self.store.list().await?;
        all.retain(|s| s.record.owner == self.pod_id);
        Ok(all)
    }

    /// Marks stream `id` retired (idempotent) and ends the connection holding it on this
    /// pod; returns the record (its owner holds any connection elsewhere).
    pub async fn retire(&self, id: &str) -> Result<PersistentStreamRecord> {
        let record = loop {
            let stored = self.get(id).await?;
            let mut record = stored.record;
            if record.retired {
                break record;
            }
            record.retired = true;
            if self.store.replace(stored.revision, record.clone()).await? {
                break record;
            }
        };
        self.signal(id, Ending::Retired)?;
        Ok(record)
    }

    /// Signals every connection attached to `id` so far to end; returns the new generation.
    fn signal(&self, id: &str, why: Ending) -> Result<(u64, Arc<tokio::sync::Mutex<()>>)> {
        let mut live = self.live()?;
        let entry = live.entry(id.to_string()).or_default();
        let generation = entry.signals.borrow().0 + 1;
        entry.signals.send_replace((generation, why));
        Ok((generation, entry.hold.clone()))
    }

    /// Takes the hold on stream `id` for a new connection: the connection holding it is
    /// told to end (`Ending::Resumed`) and this waits until it has.
    pub async fn attach(&self, id: &str) -> Result<Attached> {
        self.attach_ending(id, Ending::Resumed).await
    }

    /// Takes the hold on stream `id`: the connection holding it is told to end for `why`
    /// and this waits until it has.
    pub async fn attach_ending(&self, id: &str, why: Ending) -> Result<Attached> {
        let (generation, hold) = self.signal(id, why)?;
        let signals = self
            .live()?
            .get(id)
            .map(|e| e.signals.subscribe())
            .ok_or_else(|| ServerError::Internal(format!("stream `{id}` vanished")))?;
        let hold = hold.lock_owned().await;
        Ok(Attached {
            _hold: hold,
            generation,
            signals,
        })
    }

    /// Takes the hold on stream `id` without ending the connection holding it (waits for
    /// it): a writer that keeps no connection open between batches (a Kafka producer)
    /// holds the stream for one batch. Returns the stream's generation: it grows whenever
    /// a resume, a release or a retire signalled the stream, so a writer that loaded the
    /// watermark at a lower generation must take the stream over and load it again.
    pub async fn hold(&self, id: &str) -> Result<(OwnedMutexGuard<()>, u64)> {
        let hold = self.live()?.entry(id.to_string()).or_default().hold.clone();
        let guard = hold.lock_owned().await;
        Ok((guard, self.generation(id)?))
    }

    /// Stream `id`'s generation (see [`PersistentStreams::hold`]).
    pub fn generation(&self, id: &str) -> Result<u64> {
        Ok(self.live()?.get(id).map_or(0, |e| e.signals.borrow().0))
    }

    /// Notes that stream `id`'s records up to `offset` are logged in the frame ending at `lsn`.
    pub fn wal_logged(&self, id: &str, offset: i64, lsn: Lsn) {
        if let Ok(mut live) = self.live() {
            let mark = &mut live.entry(id.to_string()).or_default().wal_mark;
            if mark.is_none_or(|(o, _)| o < offset) {
                *mark = Some((offset, lsn));
            }
        }
    }

    /// The highest offset of stream `id` logged in this pod's WAL, with its frame's end LSN.
    pub fn wal_mark(&self, id: &str) -> Option<(i64, Lsn)> {
        self.live().ok()?.get(id).and_then(|e| e.wal_mark)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn streams(dir: &std::path::Path) -> PersistentStreams {
        let store = FileStreamStore::open(dir).expect("store");
        PersistentStreams::new(Box::new(store), "pod-a", None)
    }

    #[tokio::test]
    async fn a_resume_ends_the_connection_holding_the_stream_and_waits_for_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let streams = Arc::new(streams(dir.path()));
        let id = streams
            .create("main.a.b", RecordFormat::Json, Vec::new())
            .await
            .expect("create")
            .id;
        let first = streams.attach(&id).await.expect("attach");
        let second = {
            let streams = streams.clone();
            let id = id.clone();
            tokio::spawn(async move { streams.attach(&id).await.map(|_| ()) })
        };
        let why = tokio::time::timeout(Duration::from_secs(5), first.ended())
            .await
            .expect("the first connection is told to end");
        assert_eq!(why, Some(Ending::Resumed));
        assert!(
            !second.is_finished(),
            "waits while the first holds the stream"
        );
        drop(first);
        let attached = tokio::time::timeout(Duration::from_secs(5), second).await;
        assert!(matches!(attached, Ok(Ok(Ok(())))));
    }

    #[tokio::test]
    async fn retire_is_idempotent_and_ends_the_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let streams = streams(dir.path());
        let id = streams
            .create("main.a.b", RecordFormat::Json, Vec::new())
            .await
            .expect("create")
            .id;
        let held = streams.attach(&id).await.expect("attach");
        assert!(streams.retire(&id).await.expect("retire").retired);
        assert_eq!(held.ended().await, Some(Ending::Retired));
        assert!(streams.retire(&id).await.expect("again").retired);
        assert!(matches!(
            streams.retire("nope").await,
            Err(ServerError::NotFound(_))
        ));
        assert_eq!(streams.owned().await.expect("owned").len(), 1);
    }

    #[tokio::test]
    async fn a_release_waits_for_a_held_batch_and_moves_the_generation() {
        let dir = tempfile::tempdir().expect("tempdir");
        let streams = Arc::new(streams(dir.path()));
        let (batch, before) = streams.hold("k").await.expect("hold");
        let release = {
            let streams = streams.clone();
            tokio::spawn(async move { streams.attach("k").await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!release.is_finished(), "waits for the batch");
        drop(batch);
        let released = tokio::time::timeout(Duration::from_secs(5), release).await;
        assert!(matches!(released, Ok(Ok(Ok(())))));
        let (_next, after) = streams.hold("k").await.expect("hold");
        assert!(after > before, "{after} > {before}");
    }

    #[test]
    fn the_wal_mark_only_grows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let streams = streams(dir.path());
        assert_eq!(streams.wal_mark("s"), None);
        streams.wal_logged("s", 5, 100);
        streams.wal_logged("s", 3, 200);
        assert_eq!(streams.wal_mark("s"), Some((5, 100)));
    }
}
