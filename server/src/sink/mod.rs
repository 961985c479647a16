//! The Delta sink: one [`TableSink`] per table, a flush task per table that
//! commits on the flush interval or size threshold, and WAL truncation once
//! every table has committed past a segment.
//!
//! Purge rule: let `P` be the WAL's durable position read first; for every
//! table with rows waiting or in flight, `P = min(P, committed_lsn)`. Every
//! frame ending at or below `P` is then in Delta (tables with nothing pending
//! have committed all their frames), so segments wholly below `P` can go —
//! after re-logging the stream-open frames that records above `P` still need.

mod added;
mod commit;
pub mod deferred;
mod delta_schema;
pub(crate) mod file_layout;
pub mod fit;
mod flush_lead;
pub mod ingress;
mod offload;
pub mod open_frames;
pub mod rescued_data;
pub mod stream_txns;
pub mod system_columns;
mod table_sink;
#[cfg(test)]
pub(crate) mod testparquet;
pub mod upkeep;

pub use crate::commit::COMMIT_RETRIES;
pub use added::AddedColumns;
pub use commit::{commit_append, write_files, AppendCommit, CommittedAppend};
pub use delta_schema::{delta_columns, delta_fields, delta_type};
use open_frames::OpenFrames;
pub use stream_txns::StreamMark;
pub use table_sink::{open_table, FlushOutcome, SharedSink, SinkOptions, TableSink};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_wal::{Lsn, Wal};
use tokio_util::sync::CancellationToken;

use crate::error::{Result, ServerError};

/// All table sinks of the pod.
pub struct Sinks {
    tables: Mutex<HashMap<String, SharedSink>>,
    wal: Wal,
    flush_interval: Duration,
    upkeep: upkeep::UpkeepConfig,
    streams: Arc<dyn OpenFrames>,
    tasks: tokio_util::task::TaskTracker,
    shutdown: CancellationToken,
}

impl Sinks {
    /// An empty registry over `wal`.
    pub fn new(
        wal: Wal,
        flush_interval: Duration,
        upkeep: upkeep::UpkeepConfig,
        streams: Arc<dyn OpenFrames>,
    ) -> Arc<Sinks> {
        Arc::new(Sinks {
            tables: Mutex::new(HashMap::new()),
            wal,
            streams,
            flush_interval,
            upkeep,
            tasks: tokio_util::task::TaskTracker::new(),
            shutdown: CancellationToken::new(),
        })
    }

    fn map(&self) -> Result<std::sync::MutexGuard<'_, HashMap<String, SharedSink>>> {
        self.tables
            .lock()
            .map_err(|_| ServerError::Internal("sink registry poisoned".into()))
    }

    /// The sink of `table`, if registered.
    pub fn get(&self, table: &str) -> Option<SharedSink> {
        self.map().ok()?.get(&table.to_ascii_lowercase()).cloned()
    }

    /// All sinks.
    pub fn all(&self) -> Vec<SharedSink> {
        self.map()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Registers a sink and starts its flush task (on the Delta runtime, beside its committer:
    /// `crate::delta_runtime`) and its upkeep task (here: compaction is long CPU work).
    pub fn insert(self: &Arc<Self>, sink: SharedSink) -> Result<()> {
        self.map()?
            .insert(sink.name().to_ascii_lowercase(), sink.clone());
        let this = self.clone();
        let flushed = sink.clone();
        self.tasks.spawn_on(
            async move { this.flush_loop(flushed).await },
            &crate::delta_runtime::handle(),
        );
        let this = self.clone();
        self.tasks
            .spawn(async move { this.upkeep_loop(sink).await });
        Ok(())
    }

    /// Background upkeep of one table: a round every `upkeep.interval`;
    /// a failed round (e.g. a compaction that lost to another pod's) is
    /// logged and tried again next time.
    async fn upkeep_loop(self: Arc<Self>, sink: SharedSink) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.upkeep.interval) => {}
                _ = self.shutdown.cancelled() => return,
            }
            if sink.is_dropped() {
                return;
            }
            tokio::select! {
                r = sink.upkeep.round(&self.upkeep) => {
                    if let Err(e) = r {
                        tracing::warn!(table = sink.name(), "upkeep round failed, will retry: {e}");
                    }
                }
                _ = self.shutdown.cancelled() => return,
            }
        }
    }

    /// Unregisters a sink (table dropped); its rows are discarded.
    pub fn remove(&self, table: &str) -> Result<Option<SharedSink>> {
        let removed = self.map()?.remove(&table.to_ascii_lowercase());
        if let Some(s) = &removed {
            s.mark_dropped();
        }
        Ok(removed)
    }

    async fn flush_loop(self: Arc<Self>, sink: SharedSink) {
        loop {
            if sink.is_dropped() {
                return;
            }
            let due = match sink.due() {
                Ok(d) => d,
                Err(e) => {
                    tracing::error!(table = sink.name(), "flush loop stopped: {e}");
                    return;
                }
            };
            match due {
                None => {
                    tokio::select! {
                        _ = sink.wake.notified() => continue,
                        _ = self.shutdown.cancelled() => return,
                    }
                }
                Some((first, full)) => {
                    // Early by what recent flushes took, so the oldest row is visible about
                    // one flush interval after its append (`flush_lead`).
                    let lead = sink.flush_lead(self.flush_interval);
                    let deadline =
                        tokio::time::Instant::from_std(first + (self.flush_interval - lead));
                    if !full && tokio::time::Instant::now() < deadline {
                        tokio::select! {
                            _ = tokio::time::sleep_until(deadline) => {}
                            _ = sink.wake.notified() => continue,
                            _ = self.shutdown.cancelled() => return,
                        }
                    }
                    if let Err(e) = sink.flush().await {
                        tracing::warn!(table = sink.name(), "flush failed, will retry: {e}");
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                            _ = self.shutdown.cancelled() => return,
                        }
                    } else if let Err(e) = self.purge().await {
                        tracing::warn!("WAL purge failed: {e}");
                    }
                }
            }
        }
    }

    /// Commits every memtable now (used at shutdown and after replay). The
    /// tables flush at once, each to its own committer, so a committer
    /// waiting out its commit interval does not hold up the others.
    pub async fn flush_all(&self) -> Result<usize> {
        let sinks = self.all();
        let flushed = futures::future::join_all(sinks.iter().map(|s| s.flush())).await;
        let mut rows = 0;
        for outcome in flushed {
            rows += outcome?.rows;
        }
        self.purge().await?;
        Ok(rows)
    }

    /// The WAL position below which every frame is committed to Delta.
    pub fn purge_point(&self) -> Result<Lsn> {
        let mut point = self.wal.durable_lsn();
        for sink in self.all() {
            if sink.has_pending()? {
                point = point.min(sink.committed_lsn());
            }
        }
        Ok(point)
    }

    /// Deletes WAL segments that hold only committed frames.
    pub async fn purge(&self) -> Result<usize> {
        let point = self.purge_point()?;
        let relogged = self
            .streams
            .relog_below(&self.wal, point, &|table| {
                self.get(table).map(|s| s.committed_lsn())
            })
            .await?;
        if let Some(lsn) = relogged {
            self.wal.wait_durable(lsn).await?;
        }
        // Renames and a directory fsync: not on a worker that acks.
        let wal = self.wal.clone();
        offload::off_the_workers(async move { Ok(wal.purge_below(point)?) }).await
    }

    /// Stops the flush tasks (after a final `flush_all`).
    pub async fn stop(&self) {
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// Sets the per-table gauges a scrape reads: `sluice_table_commit_lag_seconds{table}` (age
/// of the oldest record not yet committed, 0 when none), `sluice_table_pending_bytes{table}`
/// (memtable bytes), and the pod's total `sluice_memtable_bytes`.
pub fn publish_table_gauges(sinks: &Sinks) {
    let mut total = 0;
    for sink in sinks.all() {
        let bytes = sink.memtable_bytes();
        total += bytes;
        let lag = sink
            .due()
            .ok()
            .flatten()
            .map_or(0.0, |(first, _)| first.elapsed().as_secs_f64());
        let table = sink.name().to_string();
        metrics::gauge!("sluice_table_commit_lag_seconds", "table" => table.clone()).set(lag);
        metrics::gauge!("sluice_table_pending_bytes", "table" => table).set(bytes as f64);
    }
    metrics::gauge!("sluice_memtable_bytes").set(total as f64);
}
