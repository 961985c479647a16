//! Parquet files in Sluice's layout (`file_layout`) and one-writer append
//! commits. A flush writes its files with [`write_files`] (no commit) and
//! hands them to the table's committer (`crate::commit`). [`commit_append`]
//! writes and commits in one go with the sink's commit properties
//! (`commit_properties`: the `txn` action, `readVersion`, deltalake's retry
//! budget, no checkpoint on the commit path): the per-writer commit every
//! pod made before the committer, which the sink benchmark still measures.

use arrow_array::RecordBatch;
use deltalake::kernel::Add;
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use deltalake::DeltaTable;

use crate::error::{Result, ServerError};

/// Who commits and how hard deltalake tries to land the commit.
#[derive(Debug, Clone, Copy)]
pub struct AppendCommit<'a> {
    /// The writer's app id (a WAL id), recorded in the `txn` action.
    pub app_id: &'a str,
    /// The `txn` version: the last LSN the commit covers.
    pub txn_version: i64,
    /// Lost races retried at a later version before the commit fails
    /// (sink-bench uses [`crate::commit::COMMIT_RETRIES`]).
    pub max_retries: usize,
    /// Persistent streams' last offsets in the commit: one `txn` per stream
    /// (see `stream_txns`); empty when the commit holds none.
    pub streams: &'a [super::stream_txns::StreamMark],
}

/// What an append commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommittedAppend {
    /// The table version the commit was built on.
    pub read_version: u64,
    /// The version it landed at.
    pub version: u64,
}

impl CommittedAppend {
    /// Whether another writer took the version this commit was built for, so
    /// deltalake checked for conflicts and committed at a later version.
    pub fn raced(&self) -> bool {
        self.version > self.read_version + 1
    }
}

/// A writer of Parquet files in Sluice's layout (`file_layout`) for `table`.
pub(crate) fn layout_writer(table: &DeltaTable) -> Result<RecordBatchWriter> {
    let writer = RecordBatchWriter::for_table(table)?;
    let properties = super::file_layout::writer_properties_for(&writer.arrow_schema())?;
    Ok(writer.with_writer_properties(properties))
}

/// Rows the Parquet writer is handed at a time, at least (unless the flush
/// has fewer, or [`WRITE_BYTES`] come first): smaller batches are
/// concatenated up to it.
pub const WRITE_ROWS: usize = 8192;

/// Arrow bytes at which a group is written whatever its rows: 8 192 rows of
/// 10 KiB would be an 80 MiB group, past the 32 MiB cap of glibc's mmap
/// threshold, so mapped and faulted in afresh each time.
pub const WRITE_BYTES: usize = 4 << 20;

/// Writes `batches` as Parquet files under `table` without committing them;
/// returns their Add actions (for a hand-off to the table's committer). The
/// batches are taken one at a time (a flush's are made as they are taken:
/// `deferred::batches`); the first error ends the write.
///
/// A flush holds a few thousand small batches when its runs came as batches
/// (one per run, ~120 rows at 200-byte records). They are never concatenated into one batch: that copy
/// was a tenth of the pod's perf samples at 200-byte records, most of it
/// faulting in the fresh pages of column buffers too large for glibc to
/// reuse. Nor are they handed to the writer one by one: its cost per call and
/// column made 100-column rows dearer (5.52–6.18 s of pod CPU per GB against
/// 4.67–4.99 in trunk-bench). Consecutive batches
/// are concatenated into groups of [`WRITE_ROWS`] rows or [`WRITE_BYTES`],
/// whose buffers the allocator can reuse from one group to the next (a batch
/// that large already is written as it is). A
/// batch built for an older schema than the table's is fitted to it first
/// (`fit::fit_batch`).
pub async fn write_files(
    table: &DeltaTable,
    batches: impl IntoIterator<Item = Result<RecordBatch>>,
) -> Result<Vec<Add>> {
    let mut writer = layout_writer(table)?;
    let target = writer.arrow_schema();
    let mut renames = None;
    let mut group = Group::default();
    for batch in batches {
        let batch = batch?;
        let batch = if super::fit::all_fit(&[&batch], &target) {
            batch
        } else {
            let renames = match &renames {
                Some(renames) => renames,
                None => renames.insert(super::fit::renames(
                    table.snapshot()?.metadata().configuration(),
                )),
            };
            super::fit::fit_batch(&batch, &target, renames)?
        };
        if group
            .batches
            .first()
            .is_some_and(|b| b.schema() != batch.schema())
        {
            group.write_to(&mut writer).await?;
        }
        group.rows += batch.num_rows();
        group.bytes += batch.get_array_memory_size();
        group.batches.push(batch);
        if group.rows >= WRITE_ROWS || group.bytes >= WRITE_BYTES {
            group.write_to(&mut writer).await?;
        }
    }
    group.write_to(&mut writer).await?;
    Ok(writer.flush().await?)
}

/// Consecutive batches of one schema, written as one.
#[derive(Default)]
struct Group {
    batches: Vec<RecordBatch>,
    rows: usize,
    bytes: usize,
}

impl Group {
    /// Writes the group's batches as one batch and empties it.
    async fn write_to(&mut self, writer: &mut RecordBatchWriter) -> Result<()> {
        let batch = match self.batches.as_slice() {
            [] => return Ok(()),
            [one] => one.clone(),
            [first, ..] => {
                deltalake::arrow::compute::concat_batches(&first.schema(), &self.batches).map_err(
                    |e| ServerError::Internal(format!("concatenating memtable batches: {e}")),
                )?
            }
        };
        self.batches.clear();
        (self.rows, self.bytes) = (0, 0);
        writer.write(batch).await?;
        Ok(())
    }
}

/// Writes `batch` as Parquet under `table` and commits it as one append.
pub async fn commit_append(
    table: &mut DeltaTable,
    batch: RecordBatch,
    commit: AppendCommit<'_>,
) -> Result<CommittedAppend> {
    let read_version = table.version().unwrap_or(0);
    let mut writer =
        layout_writer(table)?.with_commit_properties(super::stream_txns::with_stream_txns(
            crate::commit::commit_properties(commit.app_id, commit.txn_version, read_version)
                .with_max_retries(commit.max_retries),
            commit.streams,
        ));
    writer.write(batch).await?;
    let version = writer.flush_and_commit(table).await?;
    Ok(CommittedAppend {
        read_version,
        version,
    })
}
