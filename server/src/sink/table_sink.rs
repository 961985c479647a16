//! One table's memtable and its way into Delta.
//!
//! Streams append finished Arrow batches together with their WAL frame, under
//! one lock, so the memtable always holds exactly the table's frames after
//! `committed_lsn` (in LSN order) and `last_lsn` is the end of the newest.
//! A flush freezes the memtable, waits until the WAL is durable up to
//! `last_lsn` (so Delta never runs ahead of the log), writes Parquet (zstd)
//! and commits the Add actions with a `txn` action `(wal id, last_lsn)`.
//! On restart that txn version says where replay starts for this table.
//!
//! Exactly-once across failed commits: a commit that returns an error may
//! still have landed (the put-if-absent of the log entry succeeded but the
//! answer was lost). So after any failed commit the memtable remembers the
//! LSN it tried (`unsure`); before the next attempt the sink reloads the log
//! and reads its own txn version, and drops the batches that are already in
//! Delta instead of committing them twice. Conflicts with other writers
//! (another pod, compaction) are retried by deltalake at the next version
//! (blind appends never conflict logically), up to
//! [`super::COMMIT_RETRIES`] times (see `commit_properties`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use arrow_array::RecordBatch;
use deltalake::DeltaTable;
use sluice_wal::{Lsn, Wal};
use sluice_zeroparser::{RecordBatchBuilder, TableSchema};
use tokio::sync::Notify;

use super::commit::{commit_append, AppendCommit};
use super::stream_txns::{read_stream_txn, StreamMark};
use crate::error::{Result, ServerError};

#[derive(Default)]
struct Memtable {
    /// Batches in LSN order, each with the end LSN of its WAL frame.
    batches: Vec<(RecordBatch, Lsn)>,
    rows: usize,
    bytes: usize,
    last_lsn: Lsn,
    first_append: Option<Instant>,
    flushing: bool,
    /// The last LSN of a commit attempt that failed and may have landed.
    unsure: Option<Lsn>,
    /// Persistent streams' last offsets, each with the end LSN of its batch's frame.
    marks: Vec<(Lsn, StreamMark)>,
}

/// The columns the server adds after a table's own, in this order (each
/// opt-in per table, recorded in its catalog entry).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddedColumns {
    /// `_rescued_data` (see `rescued_data`).
    pub rescued_data: bool,
    /// `_sluice_stream_id`, `_sluice_offset`, `_sluice_ingested_at` (see
    /// `system_columns`).
    pub system_columns: bool,
}

/// The sink of one table.
pub struct TableSink {
    name: String,
    schema: TableSchema,
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
    pub fn new(
        name: String,
        schema: TableSchema,
        delta: DeltaTable,
        wal: Wal,
        committed_lsn: Lsn,
        flush_bytes: usize,
        added: AddedColumns,
    ) -> TableSink {
        TableSink {
            added,
            name,
            schema,
            memtable: Mutex::new(Memtable::default()),
            upkeep: super::upkeep::Upkeep::new(delta.clone()),
            delta: tokio::sync::Mutex::new(delta),
            wal,
            committed_lsn: AtomicU64::new(committed_lsn),
            dropped: AtomicBool::new(false),
            wake: Notify::new(),
            drained: Notify::new(),
            flush_bytes,
        }
    }

    /// Full table name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The table schema.
    pub fn schema(&self) -> &TableSchema {
        &self.schema
    }

    /// A builder for this table's rows: the table's columns, then
    /// `_rescued_data` if the table keeps it (the system columns are added by
    /// [`with_system_columns`](Self::with_system_columns)).
    pub fn batch_builder(&self) -> Result<RecordBatchBuilder> {
        if !self.added.rescued_data {
            return Ok(RecordBatchBuilder::new(&self.schema));
        }
        RecordBatchBuilder::with_rescued_data(&self.schema)
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
        let reservation = self.wal.reserve(payload.len()).await?;
        if self.is_dropped() {
            return Err(ServerError::NotFound(format!(
                "table {} was dropped",
                self.name
            )));
        }
        let mut m = self.lock()?;
        let lsn = self.wal.append(reservation, kind, payload)?;
        if let Some(batch) = batch.filter(|b| b.num_rows() > 0) {
            let was_empty = m.batches.is_empty();
            m.rows += batch.num_rows();
            m.bytes += batch.get_array_memory_size();
            m.batches.push((batch, lsn));
            m.marks.extend(mark.map(|mark| (lsn, mark)));
            m.last_lsn = lsn;
            if was_empty {
                m.first_append = Some(Instant::now());
            }
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
        if m.batches.is_empty() {
            m.first_append = Some(Instant::now());
        }
        m.rows += batch.num_rows();
        m.bytes += batch.get_array_memory_size();
        m.batches.push((batch, end_lsn));
        m.last_lsn = m.last_lsn.max(end_lsn);
        Ok(())
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
        Ok(!m.batches.is_empty() || m.flushing)
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

    /// Commits everything in the memtable to Delta.
    pub async fn flush(&self) -> Result<FlushOutcome> {
        let wal_id = self.wal.id();
        let mut delta = self.delta.lock().await;
        let (mut batches, mut marks, last_lsn, unsure) = {
            let mut m = self.lock()?;
            if m.batches.is_empty() {
                return Ok(FlushOutcome::default());
            }
            m.flushing = true;
            m.rows = 0;
            m.bytes = 0;
            m.first_append = None;
            (
                std::mem::take(&mut m.batches),
                std::mem::take(&mut m.marks),
                m.last_lsn,
                m.unsure.take(),
            )
        };
        if self.is_dropped() {
            self.lock()?.flushing = false;
            return Ok(FlushOutcome::default());
        }
        let started = Instant::now();
        let result = async {
            self.wal.wait_durable(last_lsn).await?;
            if let Some(unsure) = unsure {
                let landed = committed_lsn(&mut delta, wal_id).await?;
                if landed >= unsure {
                    tracing::info!(table = %self.name, landed, "a commit reported as failed had landed; not committing it twice");
                }
                batches.retain(|(_, lsn)| *lsn > landed);
                marks.retain(|(lsn, _)| *lsn > landed);
                self.committed_lsn.fetch_max(landed, Ordering::AcqRel);
            }
            if batches.is_empty() {
                return Ok(None);
            }
            let marks: Vec<StreamMark> = marks.iter().map(|(_, mark)| mark.clone()).collect();
            commit(&mut delta, &batches, wal_id, last_lsn, &marks)
                .await
                .map(Some)
        }
        .await;
        let rows: usize = batches.iter().map(|(b, _)| b.num_rows()).sum();
        let mut m = self.lock()?;
        m.flushing = false;
        self.drained.notify_waiters();
        match result {
            Ok(version) => {
                self.committed_lsn.store(last_lsn, Ordering::Release);
                drop(m);
                metrics::counter!("sluice_sink_rows_committed_total").increment(rows as u64);
                metrics::counter!("sluice_sink_commits_total").increment(1);
                metrics::histogram!("sluice_sink_commit_seconds")
                    .record(started.elapsed().as_secs_f64());
                tracing::info!(table = %self.name, rows, version, last_lsn, "committed");
                Ok(FlushOutcome { rows, version })
            }
            Err(e) => {
                // Put the rows back in front, in order, so the next flush
                // retries them, after checking whether this attempt landed.
                let newer = std::mem::replace(&mut m.batches, batches);
                m.batches.extend(newer);
                let newer = std::mem::replace(&mut m.marks, marks);
                m.marks.extend(newer);
                m.rows = m.batches.iter().map(|(b, _)| b.num_rows()).sum();
                m.bytes = m
                    .batches
                    .iter()
                    .map(|(b, _)| b.get_array_memory_size())
                    .sum();
                m.first_append.get_or_insert_with(Instant::now);
                m.unsure = Some(last_lsn);
                metrics::counter!("sluice_sink_commit_failures_total").increment(1);
                Err(e)
            }
        }
    }
}

/// Reloads the log and reads how far `wal_id` is committed.
async fn committed_lsn(table: &mut DeltaTable, wal_id: &str) -> Result<Lsn> {
    table.update_incremental(None).await?;
    let version = table
        .snapshot()?
        .transaction_version(table.log_store().as_ref(), wal_id)
        .await?;
    Ok(version.map(|v| v.max(0) as Lsn).unwrap_or(0))
}

async fn commit(
    table: &mut DeltaTable,
    batches: &[(RecordBatch, Lsn)],
    wal_id: &str,
    last_lsn: Lsn,
    streams: &[StreamMark],
) -> Result<i64> {
    let txn_version = i64::try_from(last_lsn)
        .map_err(|_| ServerError::Internal(format!("LSN {last_lsn} exceeds i64")))?;
    let schema = batches
        .first()
        .map(|(b, _)| b.schema())
        .ok_or_else(|| ServerError::Internal("flush of no batches".into()))?;
    let combined =
        deltalake::arrow::compute::concat_batches(&schema, batches.iter().map(|(b, _)| b))
            .map_err(|e| ServerError::Internal(format!("concatenating memtable batches: {e}")))?;
    let commit = AppendCommit {
        app_id: wal_id,
        txn_version,
        max_retries: super::commit_properties::COMMIT_RETRIES,
        streams,
    };
    let committed = commit_append(table, combined, commit).await?;
    if committed.raced() {
        metrics::counter!("sluice_sink_commit_races_total").increment(1);
    }
    i64::try_from(committed.version).map_err(|_| {
        ServerError::Internal(format!("Delta version {} exceeds i64", committed.version))
    })
}

/// Reads how far `wal_id` is committed in an opened Delta table.
pub async fn open_table(mut table: DeltaTable, wal_id: &str) -> Result<(DeltaTable, Lsn)> {
    let lsn = committed_lsn(&mut table, wal_id).await?;
    Ok((table, lsn))
}

/// Shared handle to a sink.
pub type SharedSink = Arc<TableSink>;
