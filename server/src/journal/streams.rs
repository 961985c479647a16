//! Which streams this pod's WAL knows, and where their stream-open frames are.
//!
//! Replay needs a stream's open frame (table, format, descriptor) to re-parse
//! its raw records. A stream's entry lives while the stream is open or while
//! its table has not committed its last record; before the WAL purges the
//! segment holding a needed open frame, the frame is logged again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sluice_wal::{Lsn, Wal};

use super::frames::KIND_STREAM_OPEN;
use crate::error::{Result, ServerError};
use crate::sink::open_frames::{CommittedOf, OpenFrames};

struct Entry {
    table: String,
    payload: Arc<Vec<u8>>,
    open_end_lsn: Lsn,
    last_record_lsn: LoggedMark,
    active: bool,
    /// Opened by the pod itself for a service that has no producer-held stream (the REST
    /// insert service, which MQTT, Kafka and OTLP write through): open for the pod's life,
    /// so a drain does not wait for it.
    internal: bool,
}

/// A stream's highest logged record LSN, shared by its registry entry and its run loop,
/// which raises it after every run without the registry's lock (a pod-wide mutex and a
/// map lookup per request were 1.4 % of the pod's CPU with 5 000 one-record streams).
#[derive(Clone)]
pub struct LoggedMark(Arc<AtomicU64>);

impl LoggedMark {
    fn at(lsn: Lsn) -> Self {
        LoggedMark(Arc::new(AtomicU64::new(lsn)))
    }

    /// Notes that the stream logged records up to `lsn`.
    pub fn logged(&self, lsn: Lsn) {
        self.0.fetch_max(lsn, Ordering::AcqRel);
    }

    fn get(&self) -> Lsn {
        self.0.load(Ordering::Acquire)
    }
}

/// The registry of streams with frames in the WAL.
#[derive(Default)]
pub struct StreamRegistry {
    entries: Mutex<HashMap<u64, Entry>>,
}

impl StreamRegistry {
    fn lock(&self) -> Result<std::sync::MutexGuard<'_, HashMap<u64, Entry>>> {
        self.entries
            .lock()
            .map_err(|_| ServerError::Internal("stream registry poisoned".into()))
    }

    /// Records a stream whose open frame ends at `open_end_lsn`; returns its logged-LSN
    /// mark, for the stream to raise as it logs records.
    pub fn register(
        &self,
        key: u64,
        table: &str,
        payload: Arc<Vec<u8>>,
        open_end_lsn: Lsn,
        active: bool,
    ) -> LoggedMark {
        let mark = LoggedMark::at(open_end_lsn);
        if let Ok(mut m) = self.lock() {
            m.insert(
                key,
                Entry {
                    table: table.to_string(),
                    payload,
                    open_end_lsn,
                    last_record_lsn: mark.clone(),
                    active,
                    internal: false,
                },
            );
        }
        mark
    }

    /// Marks an open stream as the pod's own (see `Entry::internal`): a drain does not wait
    /// for it.
    pub fn mark_internal(&self, key: u64) {
        if let Ok(mut m) = self.lock() {
            if let Some(e) = m.get_mut(&key) {
                e.internal = true;
            }
        }
    }

    /// Notes that the stream logged records up to `lsn`.
    pub fn records_logged(&self, key: u64, lsn: Lsn) {
        if let Ok(m) = self.lock() {
            if let Some(e) = m.get(&key) {
                e.last_record_lsn.logged(lsn);
            }
        }
    }

    /// Notes that the stream's connection ended.
    pub fn closed(&self, key: u64) {
        if let Ok(mut m) = self.lock() {
            if let Some(e) = m.get_mut(&key) {
                e.active = false;
            }
        }
    }

    /// Open streams that producers hold (not the pod's own internal ones): what a drain
    /// waits for.
    pub fn producer_streams(&self) -> usize {
        self.lock()
            .map(|m| m.values().filter(|e| e.active && !e.internal).count())
            .unwrap_or(0)
    }

    /// Re-logs the open frames at or below `point` that are still needed and
    /// forgets entries no longer needed. `committed` gives a table's committed
    /// LSN (None: the table is gone). Returns the end LSN of the last
    /// re-logged frame.
    pub async fn relog_open_frames_below(
        &self,
        wal: &Wal,
        point: Lsn,
        committed: CommittedOf<'_>,
    ) -> Result<Option<Lsn>> {
        let mut to_relog = Vec::new();
        {
            let mut m = self.lock()?;
            m.retain(|_, e| {
                e.active || committed(&e.table).is_some_and(|c| c < e.last_record_lsn.get())
            });
            for (key, e) in m.iter() {
                if e.open_end_lsn <= point {
                    to_relog.push((*key, e.payload.clone()));
                }
            }
        }
        let mut last = None;
        for (key, payload) in to_relog {
            let reservation = wal.reserve(payload.len()).await?;
            let lsn = wal.append(reservation, KIND_STREAM_OPEN, payload.as_ref().clone())?;
            if let Some(e) = self.lock()?.get_mut(&key) {
                e.open_end_lsn = lsn;
            }
            last = Some(lsn);
        }
        Ok(last)
    }
}

impl OpenFrames for StreamRegistry {
    fn relog_below<'a>(
        &'a self,
        wal: &'a Wal,
        point: Lsn,
        committed: CommittedOf<'a>,
    ) -> futures::future::BoxFuture<'a, Result<Option<Lsn>>> {
        Box::pin(self.relog_open_frames_below(wal, point, committed))
    }
}

#[cfg(test)]
mod tests {
    use sluice_wal::{Wal, WalOptions};

    use super::*;

    #[tokio::test]
    async fn a_closed_streams_entry_lives_until_its_table_commits_what_its_mark_says_it_logged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (wal, _) = Wal::open(WalOptions::new(dir.path())).expect("wal");
        let registry = StreamRegistry::default();
        let mark = registry.register(7, "main.s.t", Arc::new(vec![1, 2, 3]), 10, true);
        mark.logged(50);
        mark.logged(30);
        registry.closed(7);
        let behind: CommittedOf<'_> = &|_| Some(49);
        let relogged = registry
            .relog_open_frames_below(&wal, 100, behind)
            .await
            .expect("relog");
        assert!(
            relogged.is_some(),
            "records up to 50 are not committed: the open frame is still needed"
        );
        let caught_up: CommittedOf<'_> = &|_| Some(50);
        let relogged = registry
            .relog_open_frames_below(&wal, u64::MAX, caught_up)
            .await
            .expect("relog");
        assert!(relogged.is_none(), "committed up to the mark: forgotten");
        assert!(registry.lock().expect("lock").is_empty());
    }
}
