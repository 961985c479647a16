//! One table's memtable and its way into Delta.
//!
//! Streams append finished Arrow batches (or a small run's records, parsed at
//! the flush: `deferred`) together with their WAL frame, under one lock, so
//! the memtable always holds exactly the table's frames after `committed_lsn`
//! (in LSN order) and `last_lsn` is the end of the newest.
//! A flush freezes the memtable, waits until the WAL is durable up to
//! `last_lsn` (so Delta never runs ahead of the log), writes Parquet (zstd)
//! *without committing* and hands the files off to the table's committer
//! (`crate::commit`), which commits them with a `txn` action
//! `(wal id, last_lsn)` and answers. On the answer `committed_lsn` rises and
//! the WAL below can be purged. On restart that txn version says where
//! replay starts for this table.
//!
//! Exactly-once across lost answers: a hand-off that failed or whose answer
//! was lost may still have been committed. So the sink keeps it (`staged`)
//! and sends the *same* hand-off — the same files — again before anything
//! newer; the committer answers it as covered if the log already holds it.
//! Files are never rewritten for a retry (no duplicate rows, no orphan file
//! per retry).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use arrow_array::RecordBatch;
use deltalake::DeltaTable;
use sluice_wal::{Lsn, Wal};
use sluice_zeroparser::{RecordBatchBuilder, TableSchema};
use tokio::sync::Notify;

use super::added::AddedColumns;
use super::commit::write_files;
use super::deferred::Rows;
use super::stream_txns::{read_stream_txn, StreamMark};
use crate::commit::{CommitRoute, CommitterConfig, HandOff, HandOffError, HandOffRoute};
use crate::error::{Result, ServerError};

#[derive(Default)]
struct Memtable {
    /// Rows in LSN order (batches, or small runs' records: `deferred`), each with the
    /// end LSN of its WAL frame.
    batches: Vec<(Rows, Lsn)>,
    rows: usize,
    bytes: usize,
    last_lsn: Lsn,
    first_append: Option<Instant>,
    flushing: bool,
    /// Persistent streams' last offsets, each with the end LSN of its batch's frame.
    marks: Vec<(Lsn, StreamMark)>,
    /// Files written and handed off without an answer (failed or lost): sent
    /// again, unchanged, before anything newer.
    staged: Option<Staged>,
}

impl Memtable {
    /// Adds `rows` (their frame ending at `lsn`) and counts them; returns whether the
    /// memtable was empty before.
    fn push(&mut self, rows: Rows, lsn: Lsn) -> bool {
        let was_empty = self.batches.is_empty();
        if was_empty {
            self.first_append = Some(Instant::now());
        }
        self.rows += rows.num_rows();
        self.bytes += rows.memory_size();
        self.batches.push((rows, lsn));
        was_empty
    }
}

/// A hand-off waiting to be sent again, with its row count.
struct Staged {
    handoff: HandOff,
    rows: usize,
    /// The memtable's rows the hand-off's files hold (batches, and runs kept as
    /// their records: `deferred`), kept until it is answered so that files
    /// deleted before the commit can be written again.
    memtable: Vec<(Rows, Lsn)>,
}

/// How many times one hand-off's rows are written again (a file gone, the
/// table altered meanwhile) before the hand-off is kept for the next flush.
const REWRITES: usize = 3;

/// The sink of one table.
pub struct TableSink {
    name: String,
    /// The table's columns as the catalog has them now (`evolve` swaps them
    /// after `sluice table alter`); streams compile against them at open.
    schema: std::sync::RwLock<Arc<TableSchema>>,
    memtable: Mutex<Memtable>,
    delta: tokio::sync::Mutex<DeltaTable>,
    /// The pod's WAL: every append is logged here first.
    wal: Wal,
    committed_lsn: AtomicU64,
    dropped: AtomicBool,
    /// Woken when the memtable goes from empty to non-empty or grows past the
    /// size threshold.
    pub(crate) wake: Notify,
    /// Woken after every flush attempt (memtable space may be free again).
    drained: Notify,
    flush_bytes: usize,
    /// The columns added after the table's own.
    added: AddedColumns,
    /// Checkpoints, compaction, vacuum (own table handle).
    pub(crate) upkeep: super::upkeep::Upkeep,
    /// The way to the table's committer: in process and unfenced (single
    /// node) or the elected committer (cluster).
    committer: CommitRoute,
    /// The pod named in hand-offs.
    pod_id: String,
    /// Whether JSON records with unknown keys add columns (`sluice.autoEvolve`).
    auto_evolve: AtomicBool,
    /// When an unknown key last added columns (auto-evolve is paced per table).
    last_auto_evolve: Mutex<Option<Instant>>,
    /// Counts the schema changes this sink applied; open streams watch it
    /// (a stream writing a column that went away ends).
    schema_changes: tokio::sync::watch::Sender<u64>,
    /// How long recent flushes took, to start the next one early enough.
    lead: Mutex<super::flush_lead::FlushLead>,
    /// The ingest counters of this table's writes.
    ingress: super::ingress::IngressMeters,
}

/// How a sink flushes and hands off, beside its table and WAL.
#[derive(Clone)]
pub struct SinkOptions {
    /// Flush once the memtable holds this many bytes of Arrow data.
    pub flush_bytes: usize,
    /// The columns added after the table's own.
    pub added: AddedColumns,
    /// The pod named in hand-offs.
    pub pod_id: String,
    /// The in-process committer's interval and bounds.
    pub commit: CommitterConfig,
    /// In a cluster: the route to the table's elected committer (None: an
    /// in-process, unfenced committer of this sink's own).
    pub elected: Option<Arc<dyn HandOffRoute>>,
}

/// What a flush did.
#[derive(Debug, Default, Clone, Copy)]
pub struct FlushOutcome {
    /// Rows committed.
    pub rows: usize,
    /// Delta version created, if any.
    pub version: Option<i64>,
}

impl TableSink {
    /// A sink over an opened Delta table whose data is committed up to
    /// `committed_lsn` of the pod's `wal`, which it logs every append to.
    /// Without an elected route, starts the table's committer (in process,
    /// unfenced) on its own handle.
    pub fn new(
        name: String,
        schema: TableSchema,
        delta: DeltaTable,
        wal: Wal,
        committed_lsn: Lsn,
        options: SinkOptions,
    ) -> TableSink {
        let committer = match options.elected {
            Some(route) => CommitRoute::Elected(route),
            None => CommitRoute::in_process(name.clone(), delta.clone(), options.commit),
        };
        let ingress = super::ingress::IngressMeters::for_table(&name);
        TableSink {
            added: options.added,
            upkeep: super::upkeep::Upkeep::new(name.clone(), delta.clone()),
            name,
            schema: std::sync::RwLock::new(Arc::new(schema)),
            memtable: Mutex::new(Memtable::default()),
            delta: tokio::sync::Mutex::new(delta),
            wal,
            committed_lsn: AtomicU64::new(committed_lsn),
            dropped: AtomicBool::new(false),
            wake: Notify::new(),
            drained: Notify::new(),
            flush_bytes: options.flush_bytes,
            committer,
            pod_id: options.pod_id,
            auto_evolve: AtomicBool::new(false),
            last_auto_evolve: Mutex::new(None),
            schema_changes: tokio::sync::watch::Sender::new(0),
            lead: Mutex::new(Default::default()),
            ingress,
        }
    }

    /// The ingest counters of this table's writes.
    pub fn ingress(&self) -> &super::ingress::IngressMeters {
        &self.ingress
    }

    /// A receiver that sees every schema change this sink applies.
    pub fn watch_schema(&self) -> tokio::sync::watch::Receiver<u64> {
        self.schema_changes.subscribe()
    }

    /// Whether JSON records with unknown top-level keys add columns.
    pub fn auto_evolve(&self) -> bool {
        self.auto_evolve.load(Ordering::Acquire)
    }

    /// Sets whether JSON records with unknown top-level keys add columns.
    pub fn set_auto_evolve(&self, on: bool) {
        self.auto_evolve.store(on, Ordering::Release);
    }

    /// Paces auto-evolve: returns how long to wait before the next change
    /// (at most one per `interval`), and books the slot.
    pub fn book_auto_evolve(&self, interval: std::time::Duration) -> std::time::Duration {
        let Ok(mut last) = self.last_auto_evolve.lock() else {
            return interval;
        };
        let now = Instant::now();
        let at = last.map_or(now, |t| (t + interval).max(now));
        *last = Some(at);
        at - now
    }

    /// Full table name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The table schema (the newest this pod applied).
    pub fn schema(&self) -> Arc<TableSchema> {
        match self.schema.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Applies a changed schema of the table (after `sluice table alter`,
    /// here or on another pod): the table handle is reloaded so that the
    /// next files are written with the new Delta schema, and streams opened
    /// from now on compile against `schema`. Streams already open keep their
    /// rows' shape; a flush fits them to the new schema (`fit`).
    pub async fn evolve(&self, schema: TableSchema) -> Result<()> {
        let mut delta = self.delta.lock().await;
        crate::commit::reload(&mut delta).await?;
        let mut current = self
            .schema
            .write()
            .map_err(|_| ServerError::Internal(format!("schema of {} poisoned", self.name)))?;
        *current = Arc::new(schema);
        drop(current);
        self.schema_changes.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Whether the table keeps `_rescued_data` (its batches end with it).
    pub fn keeps_rescued_data(&self) -> bool {
        self.added.rescued_data
    }

    /// A builder for this table's rows: the table's columns, then
    /// `_rescued_data` if the table keeps it (the system columns are added by
    /// [`with_system_columns`](Self::with_system_columns)).
    pub fn batch_builder(&self) -> Result<RecordBatchBuilder> {
        self.batch_builder_for(&self.schema())
    }

    /// [`batch_builder`](Self::batch_builder) for `schema` (one the sink had).
    pub fn batch_builder_for(&self, schema: &TableSchema) -> Result<RecordBatchBuilder> {
        super::added::builder_for(schema, self.added)
            .map_err(|e| ServerError::Internal(format!("table {}: {e}", self.name)))
    }

    /// Adds the system columns to a batch of a stream's rows if this table
    /// has them (`offsets`: the offset of each row's record, in row order).
    pub fn with_system_columns(
        &self,
        batch: RecordBatch,
        stream_key: u64,
        offsets: impl Iterator<Item = i64>,
    ) -> Result<RecordBatch> {
        if !self.added.system_columns {
            return Ok(batch);
        }
        super::system_columns::extend(
            batch,
            &super::system_columns::stream_id(stream_key),
            offsets,
            super::system_columns::now_micros(),
        )
    }

    /// The offset of persistent stream `stream_id` committed to this table (its `txn`
    /// version in the Delta log, reloaded now; None: none of its records is committed).
    pub async fn stream_txn(&self, stream_id: &str) -> Result<Option<i64>> {
        read_stream_txn(&mut *self.delta.lock().await, stream_id).await
    }

    /// WAL position up to which this table's frames are in Delta.
    pub fn committed_lsn(&self) -> Lsn {
        self.committed_lsn.load(Ordering::Acquire)
    }

    /// Marks the table dropped: appends fail, nothing more is committed.
    pub fn mark_dropped(&self) {
        self.dropped.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Whether the table was dropped.
    pub fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    fn lock(&self) -> Result<MutexGuard<'_, Memtable>> {
        self.memtable
            .lock()
            .map_err(|_| ServerError::Internal(format!("memtable of {} poisoned", self.name)))
    }

    /// Logs `payload` as one WAL frame and adds `batch` to the memtable,
    /// atomically with respect to flushes. Returns the frame's end LSN.
    ///
    /// Back-pressure: first reserves room in the WAL's queue, waiting while it
    /// is full, so a stream that awaits this reads no more requests meanwhile.
    /// A WAL that refuses (disk full, stopped) fails the append with its error.
    pub async fn append(
        &self,
        kind: u8,
        payload: Vec<u8>,
        batch: Option<RecordBatch>,
    ) -> Result<Lsn> {
        self.append_marked(kind, payload, batch, None).await
    }

    /// [`append`](Self::append) for a persistent stream's batch: `mark` (its stream id
    /// and last offset) goes into the commit that holds the batch as a `txn`.
    pub async fn append_marked(
        &self,
        kind: u8,
        payload: Vec<u8>,
        batch: Option<RecordBatch>,
        mark: Option<StreamMark>,
    ) -> Result<Lsn> {
        self.append_rows(kind, payload, batch.map(Rows::Batch), mark)
            .await
    }

    /// [`append_marked`](Self::append_marked) for any [`Rows`]: a batch, or a small
    /// run kept as its records (the flush parses them, see `deferred`).
    pub async fn append_rows(
        &self,
        kind: u8,
        payload: Vec<u8>,
        rows: Option<Rows>,
        mark: Option<StreamMark>,
    ) -> Result<Lsn> {
        let reservation = self.wal.reserve(payload.len()).await?;
        if self.is_dropped() {
            return Err(ServerError::NotFound(format!(
                "table {} was dropped",
                self.name
            )));
        }
        let mut m = self.lock()?;
        let lsn = self.wal.append(reservation, kind, payload)?;
        if let Some(rows) = rows.filter(|r| r.num_rows() > 0) {
            let was_empty = m.push(rows, lsn);
            m.marks.extend(mark.map(|mark| (lsn, mark)));
            m.last_lsn = lsn;
            if was_empty || m.bytes >= self.flush_bytes {
                self.wake.notify_one();
            }
        }
        Ok(lsn)
    }

    /// Adds replayed rows (already durable in the WAL) to the memtable
    /// (`mark`: a persistent stream's id and last offset in them).
    pub fn append_replayed(
        &self,
        batch: RecordBatch,
        end_lsn: Lsn,
        mark: Option<StreamMark>,
    ) -> Result<()> {
        let mut m = self.lock()?;
        m.marks.extend(mark.map(|mark| (end_lsn, mark)));
        m.push(batch.into(), end_lsn);
        m.last_lsn = m.last_lsn.max(end_lsn);
        Ok(())
    }

    /// How long before its oldest row is `interval` old a flush starts (see `flush_lead`).
    pub fn flush_lead(&self, interval: std::time::Duration) -> std::time::Duration {
        self.lead
            .lock()
            .map(|l| l.lead(interval))
            .unwrap_or_default()
    }

    /// When the memtable must be flushed (None: empty), and whether it is
    /// already over the size threshold.
    pub fn due(&self) -> Result<Option<(Instant, bool)>> {
        let m = self.lock()?;
        Ok(m.first_append.map(|t| (t, m.bytes >= self.flush_bytes)))
    }

    /// Whether rows are waiting or being committed.
    pub fn has_pending(&self) -> Result<bool> {
        let m = self.lock()?;
        Ok(!m.batches.is_empty() || m.flushing || m.staged.is_some())
    }

    /// Bytes of Arrow data waiting in the memtable.
    pub fn memtable_bytes(&self) -> usize {
        self.lock().map(|m| m.bytes).unwrap_or(0)
    }

    /// Back-pressure: waits while the memtable holds more than `limit` bytes
    /// (commits are slower than ingest, or failing).
    pub async fn wait_for_room(&self, limit: usize) {
        loop {
            let drained = self.drained.notified();
            if self.memtable_bytes() <= limit || self.is_dropped() {
                return;
            }
            self.wake.notify_one();
            drained.await;
        }
    }

    /// Commits everything in the memtable to Delta: first a hand-off still
    /// unanswered (same files), then the memtable's rows as new files.
    pub async fn flush(&self) -> Result<FlushOutcome> {
        let mut delta = self.delta.lock().await;
        let mut outcome = FlushOutcome::default();
        let staged = self.lock()?.staged.take();
        if let Some(staged) = staged {
            if self.is_dropped() {
                return Ok(outcome);
            }
            outcome = self.hand_off(&mut delta, staged).await?;
        }
        let (batches, marks, last_lsn, first_append) = {
            let mut m = self.lock()?;
            if m.batches.is_empty() {
                m.first_append = None;
                return Ok(outcome);
            }
            m.flushing = true;
            m.rows = 0;
            m.bytes = 0;
            let first_append = m.first_append.take();
            (
                std::mem::take(&mut m.batches),
                std::mem::take(&mut m.marks),
                m.last_lsn,
                first_append,
            )
        };
        if self.is_dropped() {
            self.lock()?.flushing = false;
            return Ok(outcome);
        }
        let taken = Instant::now();
        let rows: usize = batches.iter().map(|(b, _)| b.num_rows()).sum();
        let written = async {
            self.wal.wait_durable(last_lsn).await?;
            // Parsing deferred runs, fitting and encoding take tens of ms of CPU: not on a
            // worker. The worker keeps its own handles on the rows (Arc clones), so a
            // failure — even a panic of the encoding thread — can put every row back; their
            // last handles are then freed off the workers too (`drop_off_the_workers` below).
            let (table, memtable, added) = (delta.clone(), batches.clone(), self.added);
            super::offload::off_the_workers(async move {
                let schema_id = crate::commit::schema_id(&table)?;
                let adds = write_files(&table, super::deferred::batches(&memtable, added)).await?;
                Ok((adds, memtable, schema_id))
            })
            .await
        }
        .await;
        let (adds, written_rows, schema_id) = match written {
            Ok(written) => written,
            Err(e) => {
                // Put the rows back in front, in order, for the next flush.
                let mut m = self.lock()?;
                m.flushing = false;
                let newer = std::mem::replace(&mut m.batches, batches);
                m.batches.extend(newer);
                let newer = std::mem::replace(&mut m.marks, marks);
                m.marks.extend(newer);
                m.rows = m.batches.iter().map(|(b, _)| b.num_rows()).sum();
                m.bytes = m.batches.iter().map(|(b, _)| b.memory_size()).sum();
                m.first_append.get_or_insert_with(Instant::now);
                self.drained.notify_waiters();
                metrics::counter!("sluice_sink_commit_failures_total").increment(1);
                return Err(e);
            }
        };
        super::offload::drop_off_the_workers(batches);
        let handoff = HandOff {
            table: self.name.clone(),
            pod_id: self.pod_id.clone(),
            wal_id: self.wal.id().to_string(),
            from_lsn: self.committed_lsn(),
            to_lsn: last_lsn,
            adds,
            streams: stream_offsets(&marks),
            schema_id,
        };
        let next = self
            .hand_off(
                &mut delta,
                Staged {
                    handoff,
                    rows,
                    memtable: written_rows,
                },
            )
            .await?;
        if let Ok(mut lead) = self.lead.lock() {
            lead.record(taken.elapsed());
        }
        if let Some(first) = first_append {
            // Freshness: the oldest record of this flush, from its append (logged, about
            // to be acked) until its rows are visible in Delta.
            metrics::histogram!("sluice_table_freshness_seconds", "table" => self.name.clone())
                .record(first.elapsed().as_secs_f64());
        }
        Ok(FlushOutcome {
            rows: outcome.rows + next.rows,
            version: next.version.or(outcome.version),
        })
    }

    /// Hands `staged` to the committer and waits for the answer. On a
    /// refusal or failure it stays staged, to be sent again unchanged — but
    /// when the committer finds one of its files gone (deleted before the
    /// commit) or written under a schema the table no longer has (altered
    /// meanwhile: the schema fence), its rows are written again as new files
    /// (under the table's schema, reloaded) and the same WAL range is sent
    /// with them at once, so the rows are never stuck.
    async fn hand_off(&self, delta: &mut DeltaTable, mut staged: Staged) -> Result<FlushOutcome> {
        self.lock()?.flushing = true;
        let started = Instant::now();
        let mut answer = self.committer.hand_off(delta, staged.handoff.clone()).await;
        for _ in 0..REWRITES {
            let why = match &answer {
                Err(HandOffError::MissingFile { path, .. }) => format!("file {path} is gone"),
                Err(e @ HandOffError::StaleSchema { .. }) => {
                    if let Err(e) = crate::commit::reload(delta).await {
                        tracing::warn!(table = %self.name, "reloading the table failed: {e}");
                        break;
                    }
                    e.to_string()
                }
                _ => break,
            };
            let rewritten = async {
                let schema_id = crate::commit::schema_id(delta)?;
                let batches = super::deferred::batches(&staged.memtable, self.added);
                Ok::<_, ServerError>((write_files(delta, batches).await?, schema_id))
            }
            .await;
            match rewritten {
                Ok((adds, schema_id)) => {
                    tracing::warn!(table = %self.name, "a hand-off's {why}; its rows are written again as new files");
                    metrics::counter!("sluice_sink_files_rewritten_total").increment(1);
                    staged.handoff.adds = adds;
                    staged.handoff.schema_id = schema_id;
                    answer = self.committer.hand_off(delta, staged.handoff.clone()).await;
                }
                Err(e) => {
                    tracing::warn!(table = %self.name, "rewriting the files of a hand-off failed ({why}): {e}");
                    break;
                }
            }
        }
        let mut m = self.lock()?;
        m.flushing = false;
        self.drained.notify_waiters();
        let (rows, last_lsn) = (staged.rows, staged.handoff.to_lsn);
        match answer {
            Ok(ack) => {
                self.committed_lsn.fetch_max(last_lsn, Ordering::AcqRel);
                drop(m);
                // The rows' last handles: their thousands of arrays are freed off the workers.
                super::offload::drop_off_the_workers(staged.memtable);
                let version = i64::try_from(ack.version).ok();
                if ack.covered {
                    tracing::info!(table = %self.name, last_lsn, "a hand-off sent again was already committed; not committing it twice");
                    return Ok(FlushOutcome { rows, version });
                }
                metrics::counter!("sluice_sink_rows_committed_total").increment(rows as u64);
                metrics::counter!("sluice_sink_commits_total").increment(1);
                let table = self.name.clone();
                metrics::counter!("sluice_table_rows_committed_total", "table" => table.clone())
                    .increment(rows as u64);
                metrics::gauge!("sluice_table_last_commit_timestamp_seconds", "table" => table)
                    .set(sluice_router::pod_record::now_ms() as f64 / 1000.0);
                metrics::histogram!("sluice_sink_commit_seconds")
                    .record(started.elapsed().as_secs_f64());
                tracing::info!(table = %self.name, rows, version, last_lsn, "committed");
                Ok(FlushOutcome { rows, version })
            }
            Err(e) => {
                m.staged = Some(staged);
                m.first_append.get_or_insert_with(Instant::now);
                metrics::counter!("sluice_sink_commit_failures_total").increment(1);
                Err(e.into())
            }
        }
    }
}

/// Each persistent stream's highest offset among `marks` (its `txn` in the commit).
fn stream_offsets(marks: &[(Lsn, StreamMark)]) -> Vec<(String, i64)> {
    let mut highest: Vec<(String, i64)> = Vec::new();
    for (_, mark) in marks {
        match highest.iter_mut().find(|(id, _)| **id == *mark.stream_id) {
            Some((_, offset)) => *offset = (*offset).max(mark.offset),
            None => highest.push((mark.stream_id.to_string(), mark.offset)),
        }
    }
    highest
}

/// Reads how far `wal_id` is committed in an opened Delta table.
pub async fn open_table(mut table: DeltaTable, wal_id: &str) -> Result<(DeltaTable, Lsn)> {
    table.update_incremental(None).await?;
    let lsn = crate::commit::txn_of(&table, wal_id).await?.unwrap_or(0);
    Ok((table, lsn))
}

/// Shared handle to a sink.
pub type SharedSink = Arc<TableSink>;

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use arrow_array::{Int64Array, RecordBatch};
    use sluice_wal::{Wal, WalOptions};
    use sluice_zeroparser::TableSchema;

    use super::{SinkOptions, TableSink};
    use crate::commit::CommitterConfig;
    use crate::journal::frames::KIND_RECORDS;
    use crate::warehouse::{S3Settings, Warehouse};

    /// The Parquet files in the table folder `dir`.
    fn parquet_paths(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir)
            .expect("table dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
            .collect()
    }

    fn parquet_files(dir: &std::path::Path) -> usize {
        parquet_paths(dir).len()
    }

    /// Flushes `sink` while the Delta log of the table at `location` cannot be written
    /// (a file where its folder was): the flush fails after writing its file and the
    /// hand-off stays staged. The log is restored before this returns.
    async fn flush_with_the_log_blocked(sink: &TableSink, location: &std::path::Path) {
        let log = location.join("_delta_log");
        let moved = location.join("_delta_log.away");
        std::fs::rename(&log, &moved).expect("move the log away");
        std::fs::write(&log, b"not a directory").expect("block the log");
        assert!(sink.flush().await.is_err(), "the commit must fail");
        std::fs::remove_file(&log).expect("unblock");
        std::fs::rename(&moved, &log).expect("restore the log");
    }

    /// A sink of `main.s.t` (`id BIGINT NOT NULL`, in-process committer) whose
    /// memtable holds ids 1, 2, 3 (logged at `lsn`).
    struct Setup {
        dir: tempfile::TempDir,
        warehouse: Warehouse,
        url: url::Url,
        sink: TableSink,
        lsn: sluice_wal::Lsn,
        schema: TableSchema,
    }

    impl Setup {
        async fn new() -> Setup {
            let dir = tempfile::tempdir().expect("tempdir");
            let warehouse = Warehouse::parse(None, &dir.path().join("wh"), &S3Settings::default())
                .expect("warehouse");
            let url = warehouse.table_url("main", "s", "t").expect("url");
            let table = warehouse.create_for_test(&url, "id BIGINT NOT NULL").await;
            let (wal, _) = Wal::open(WalOptions::new(dir.path().join("wal"))).expect("wal");
            let options = SinkOptions {
                flush_bytes: 1 << 20,
                added: Default::default(),
                pod_id: "p".into(),
                commit: CommitterConfig {
                    interval: Duration::from_millis(10),
                    ..CommitterConfig::default()
                },
                elected: None,
            };
            let schema = TableSchema::parse("id BIGINT NOT NULL").expect("schema");
            let sink = TableSink::new("main.s.t".into(), schema.clone(), table, wal, 0, options);
            let arrow = sink.schema().arrow_schema();
            let batch =
                RecordBatch::try_new(arrow, vec![Arc::new(Int64Array::from(vec![1, 2, 3]))])
                    .expect("batch");
            let lsn = sink
                .append(KIND_RECORDS, vec![0; 16], Some(batch))
                .await
                .expect("append");
            Setup {
                dir,
                warehouse,
                url,
                sink,
                lsn,
                schema,
            }
        }
    }

    /// A flush of new rows that committed sets how early the next one starts (its
    /// duration, at most half the interval); a failed one, or the resend of its hand-off,
    /// does not.
    #[tokio::test]
    async fn a_committed_flush_sets_the_lead_a_failed_one_does_not() {
        let Setup {
            dir: _dir,
            url,
            sink,
            schema,
            ..
        } = Setup::new().await;
        let second = Duration::from_secs(1);
        assert_eq!(sink.flush_lead(second), Duration::ZERO);
        let location = url.to_file_path().expect("local table");
        flush_with_the_log_blocked(&sink, &location).await;
        assert_eq!(sink.flush_lead(second), Duration::ZERO, "a failed flush");
        sink.flush().await.expect("sent again");
        assert_eq!(sink.flush_lead(second), Duration::ZERO, "a resend");
        let batch = RecordBatch::try_new(
            schema.arrow_schema(),
            vec![Arc::new(Int64Array::from(vec![4]))],
        )
        .expect("batch");
        sink.append(KIND_RECORDS, vec![0; 16], Some(batch))
            .await
            .expect("append");
        let started = std::time::Instant::now();
        assert_eq!(sink.flush().await.expect("flush").rows, 1);
        let lead = sink.flush_lead(Duration::from_secs(3600));
        assert!(
            lead > Duration::ZERO && lead <= started.elapsed(),
            "{lead:?}"
        );
        assert!(sink.flush_lead(Duration::from_nanos(2)) <= Duration::from_nanos(1));
    }

    /// `schema`'s JSON records `texts`, as a small run of stream 1 kept as records.
    fn record_run(schema: &TableSchema, texts: &[&'static str]) -> super::Rows {
        let records = texts
            .iter()
            .zip(0..)
            .map(|(t, offset)| (offset, bytes::Bytes::from_static(t.as_bytes())))
            .collect();
        super::Rows::Records(Arc::new(crate::sink::deferred::RecordRun::new(
            Arc::new(crate::journal::plan::RecordPlan::Json),
            Arc::new(schema.clone()),
            records,
            1,
        )))
    }

    /// A small run kept as records is parsed at the flush and committed beside the
    /// batches; one whose record the flush's parse refuses fails the flush and stays, with
    /// every row before it, in the memtable (nothing committed, nothing dropped).
    #[tokio::test]
    async fn record_runs_are_parsed_at_the_flush_and_a_refused_one_keeps_every_row() {
        let Setup {
            dir: _dir,
            sink,
            schema,
            lsn,
            ..
        } = Setup::new().await;
        let run = record_run(&schema, &[r#"{"id":4}"#, r#"{"id":5}"#]);
        sink.append_rows(KIND_RECORDS, vec![0; 16], Some(run), None)
            .await
            .expect("append");
        assert_eq!(sink.flush().await.expect("flush").rows, 5);

        let bad = record_run(&schema, &[r#"{"id":6}"#, r#"{"no_id":7}"#]);
        let bad_lsn = sink
            .append_rows(KIND_RECORDS, vec![0; 16], Some(bad), None)
            .await
            .expect("append");
        let committed = sink.committed_lsn();
        assert!(committed > lsn && bad_lsn > committed);
        let failed = sink.flush().await.expect_err("the parse refuses");
        assert!(failed.to_string().contains("offset 1"), "{failed}");
        assert_eq!(sink.committed_lsn(), committed);
        assert!(sink.has_pending().expect("pending"));
        assert!(sink.memtable_bytes() > 0, "the run is back in the memtable");
    }

    /// A flush of many small batches (one per run) writes every row once, in the order of
    /// the memtable, whether a batch lands in a group of `WRITE_ROWS` or in the last one.
    #[tokio::test]
    async fn a_flush_of_many_small_batches_writes_every_row_in_order() {
        let setup = Setup::new().await;
        let (sink, schema) = (&setup.sink, &setup.schema);
        let per_batch = 1000;
        let batches = 2 * crate::sink::commit::WRITE_ROWS / per_batch + 3;
        for b in 0..batches {
            let first = 4 + (b * per_batch) as i64;
            let ids = Int64Array::from_iter_values(first..first + per_batch as i64);
            let batch =
                RecordBatch::try_new(schema.arrow_schema(), vec![Arc::new(ids)]).expect("batch");
            sink.append(KIND_RECORDS, vec![0; 16], Some(batch))
                .await
                .expect("append");
        }
        let rows = 3 + batches * per_batch;
        assert_eq!(sink.flush().await.expect("flush").rows, rows);
        let location = setup.url.to_file_path().expect("local table");
        let files = parquet_paths(&location);
        assert_eq!(files.len(), 1, "{files:?}");
        let file = std::fs::File::open(&files[0]).expect("open");
        let ids = crate::sink::testparquet::first_column_ids(file);
        assert_eq!(ids, (1..=rows as i64).collect::<Vec<_>>());
    }

    /// A hand-off that fails is kept and sent again with the same files: no
    /// second Parquet file, one commit, the committed LSN only after it.
    #[tokio::test]
    async fn a_failed_hand_off_is_sent_again_with_the_same_files() {
        let Setup {
            dir: _dir,
            warehouse,
            url,
            sink,
            lsn,
            ..
        } = Setup::new().await;

        // The log cannot be written: the hand-off fails after its file was written.
        let location = url.to_file_path().expect("local table");
        flush_with_the_log_blocked(&sink, &location).await;
        assert_eq!(sink.committed_lsn(), 0);
        assert!(sink.has_pending().expect("pending"));
        assert_eq!(parquet_files(&location), 1);

        let out = sink.flush().await.expect("sent again");
        assert_eq!(out.rows, 3);
        assert_eq!(sink.committed_lsn(), lsn);
        assert!(!sink.has_pending().expect("pending"));
        assert_eq!(parquet_files(&location), 1, "no file rewritten");
        let delta = warehouse.open(&url).await.expect("open");
        assert_eq!(
            delta
                .snapshot()
                .expect("snapshot")
                .log_data()
                .iter()
                .count(),
            1
        );
    }

    /// A staged hand-off whose file was deleted before its commit is written
    /// again from its rows and committed once: no row stuck, none twice.
    #[tokio::test]
    async fn a_hand_off_whose_file_is_gone_is_written_again_and_committed_once() {
        let Setup {
            dir: _dir,
            warehouse,
            url,
            sink,
            lsn,
            ..
        } = Setup::new().await;

        // The first hand-off fails (the log is blocked), so it stays staged ...
        let location = url.to_file_path().expect("local table");
        flush_with_the_log_blocked(&sink, &location).await;
        // ... and its file is deleted before it is sent again.
        for entry in std::fs::read_dir(&location).expect("table dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|x| x == "parquet") {
                std::fs::remove_file(path).expect("delete the staged file");
            }
        }
        assert_eq!(parquet_files(&location), 0);

        let out = sink.flush().await.expect("written again and committed");
        assert_eq!(out.rows, 3);
        assert_eq!(sink.committed_lsn(), lsn);
        assert!(!sink.has_pending().expect("pending"));
        assert_eq!(parquet_files(&location), 1, "one new file");
        let delta = warehouse.open(&url).await.expect("open");
        let live: Vec<String> = delta
            .snapshot()
            .expect("snapshot")
            .log_data()
            .iter()
            .map(|f| f.path().to_string())
            .collect();
        assert_eq!(live.len(), 1, "one commit of one file: {live:?}");
        assert!(
            location.join(&live[0]).exists(),
            "the committed file exists"
        );
    }

    /// The table is altered between a flush's write and its commit (here:
    /// behind the sink's back, as another pod would): the committer refuses
    /// the hand-off (schema fence), the sink writes the rows again under the
    /// new schema and they land once. The committed file carries the new
    /// column; the stale one stays out of the log.
    #[tokio::test]
    async fn a_hand_off_written_before_an_alter_is_written_again_under_the_new_schema() {
        let Setup {
            dir: _dir,
            warehouse,
            url,
            sink,
            lsn,
            schema,
        } = Setup::new().await;

        let mut other = warehouse.open(&url).await.expect("open");
        let added = super::AddedColumns::default();
        let old = crate::sink::delta_columns(&schema, added).expect("old");
        let new = TableSchema::parse("id BIGINT NOT NULL, humidity DOUBLE").expect("schema");
        let next = crate::sink::delta_columns(&new, added).expect("next");
        crate::evolve::delta::commit_schema(
            &mut other,
            "main.s.t",
            &old,
            &next,
            &Default::default(),
            &next[1..],
        )
        .await
        .expect("alter");

        let out = sink.flush().await.expect("written again and committed");
        assert_eq!(out.rows, 3);
        assert_eq!(sink.committed_lsn(), lsn);
        let delta = warehouse.open(&url).await.expect("open");
        let snapshot = delta.snapshot().expect("snapshot");
        let stats: Vec<String> = snapshot
            .log_data()
            .iter()
            .map(|f| f.stats().unwrap_or_default())
            .collect();
        assert_eq!(stats.len(), 1, "one file committed: {stats:?}");
        assert!(
            stats[0].contains("humidity"),
            "the committed file was written under the new schema: {stats:?}"
        );
        let location = url.to_file_path().expect("local table");
        assert_eq!(
            parquet_files(&location),
            2,
            "the stale file stays out of the log"
        );
    }
}
