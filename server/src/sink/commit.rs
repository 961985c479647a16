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

use crate::error::Result;

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
    Ok(RecordBatchWriter::for_table(table)?
        .with_writer_properties(super::file_layout::writer_properties()?))
}

/// Writes `batch` as Parquet files under `table` without committing them;
/// returns their Add actions (for a hand-off to the table's committer).
pub async fn write_files(table: &DeltaTable, batch: RecordBatch) -> Result<Vec<Add>> {
    let mut writer = layout_writer(table)?;
    let target = writer.arrow_schema();
    let batch = if super::fit::all_fit(&[&batch], &target) {
        batch
    } else {
        let renames = super::fit::renames(table.snapshot()?.metadata().configuration());
        super::fit::fit_batch(&batch, &target, &renames)?
    };
    writer.write(batch).await?;
    Ok(writer.flush().await?)
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
