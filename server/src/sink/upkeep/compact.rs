//! Compaction: bin-packs a table's small files into files of the target size
//! and commits the swap as one `OPTIMIZE` commit (Remove + Add, both with
//! `dataChange: false`).
//!
//! Runs beside appends, but never lets deltalake move the commit to a later
//! version by itself: its conflict checker only counts a winner's removes
//! with `dataChange: true` as deletes, so two compactions of the same files
//! (the upkeeps of two pods on one table) would both land and every row of
//! those files would be in the table twice. So the commit is tried only at
//! the version after the snapshot it was built on (`max_retries(0)`); when
//! another writer took that version, the log is reloaded and the commit is
//! tried again on the new snapshot only if every file it removes is still in
//! it (appends never remove files, so they never stop a compaction); if one
//! is gone another compaction won, and this one gives up (its new files stay
//! unreferenced) and looks again next round. [`COMMIT_ATTEMPTS`] bounds it.
//!
//! Bins: files smaller than half the target, in log order (roughly
//! ingest order, which keeps time-ordered data clustered), filled greedily
//! up to the target; a bin of one file is left alone. Each bin is read one
//! small file at a time (below half the target, so memory stays bounded)
//! and written into one new Parquet file.

use deltalake::kernel::transaction::{CommitBuilder, TransactionError};
use deltalake::kernel::Action;
use deltalake::protocol::DeltaOperation;
use deltalake::table::config::TablePropertiesExt;
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use deltalake::{DeltaTable, DeltaTableError};
use object_store::ObjectStoreExt;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde::Serialize;

use crate::error::{Result, ServerError};
use crate::sink::file_layout::writer_properties;

/// Commit attempts of one compaction, each at the version after a fresh
/// snapshot that still holds every file it removes.
const COMMIT_ATTEMPTS: usize = 20;

/// What a compaction did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct CompactReport {
    /// Small files rewritten.
    pub files_removed: usize,
    /// Files written in their place.
    pub files_added: usize,
    /// Bytes of the files removed.
    pub bytes_removed: i64,
    /// Bytes of the files added.
    pub bytes_added: i64,
    /// Delta version of the OPTIMIZE commit, if one was made.
    pub version: Option<u64>,
}

struct SmallFile {
    path: object_store::path::Path,
    size: i64,
    remove: deltalake::kernel::Remove,
}

/// Compacts `table` if it has at least `min_files` small files.
pub async fn compact(table: &mut DeltaTable, min_files: usize) -> Result<CompactReport> {
    table.update_incremental(None).await?;
    let snapshot = table.snapshot()?;
    let target = snapshot.table_config().target_file_size().get() as i64;
    let small: Vec<SmallFile> = snapshot
        .log_data()
        .iter()
        .filter(|f| f.size() < target / 2)
        .map(|f| SmallFile {
            path: f.object_store_path(),
            size: f.size(),
            remove: f.remove_action(false),
        })
        .collect();
    if small.len() < min_files.max(2) {
        return Ok(CompactReport::default());
    }
    let bins = bin_pack(small, target);
    let store = table.log_store().object_store(None);
    let mut report = CompactReport::default();
    let mut actions = Vec::new();
    for bin in bins {
        let mut writer =
            RecordBatchWriter::for_table(table)?.with_writer_properties(writer_properties()?);
        let schema = writer.arrow_schema();
        for file in &bin {
            let bytes = store
                .get(&file.path)
                .await
                .map_err(|e| ServerError::Internal(format!("reading {}: {e}", file.path)))?
                .bytes()
                .await
                .map_err(|e| ServerError::Internal(format!("reading {}: {e}", file.path)))?;
            let batches = ParquetRecordBatchReaderBuilder::try_new(bytes)
                .and_then(|b| b.build())
                .map_err(|e| ServerError::Internal(format!("reading {}: {e}", file.path)))?;
            for batch in batches {
                let batch = batch
                    .map_err(|e| ServerError::Internal(format!("reading {}: {e}", file.path)))?;
                // Same columns; take the table's field metadata so the writer
                // sees no schema change.
                let batch =
                    arrow_array::RecordBatch::try_new(schema.clone(), batch.columns().to_vec())
                        .map_err(|e| ServerError::Internal(format!("{}: {e}", file.path)))?;
                writer.write(batch).await?;
            }
        }
        for mut add in writer.flush().await? {
            add.data_change = false;
            report.files_added += 1;
            report.bytes_added += add.size;
            actions.push(Action::Add(add));
        }
        for file in bin {
            report.files_removed += 1;
            report.bytes_removed += file.size;
            actions.push(Action::Remove(file.remove));
        }
    }
    let removed: Vec<String> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Remove(r) => Some(r.path.clone()),
            _ => None,
        })
        .collect();
    let operation = DeltaOperation::Optimize {
        predicate: None,
        target_size: target,
    };
    let mut landed = None;
    for _ in 0..COMMIT_ATTEMPTS {
        let attempt = CommitBuilder::default()
            .with_actions(actions.clone())
            .with_max_retries(0)
            .build(
                Some(table.snapshot()?),
                table.log_store(),
                operation.clone(),
            )
            .await;
        match attempt {
            Ok(finalized) => {
                landed = Some(finalized.version());
                break;
            }
            Err(DeltaTableError::Transaction {
                source: TransactionError::MaxCommitAttempts(_),
            }) => {
                table.update_incremental(None).await?;
                if !all_active(table, &removed)? {
                    tracing::info!(
                        files = removed.len(),
                        "another writer compacted these files first; giving up this compaction"
                    );
                    return Ok(CompactReport::default());
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    let Some(version) = landed else {
        return Ok(CompactReport::default());
    };
    report.version = Some(version);
    table.update_incremental(None).await?;
    metrics::counter!("sluice_upkeep_files_compacted_total").increment(report.files_removed as u64);
    Ok(report)
}

/// Whether every path of `removed` is a file of the table's current snapshot.
fn all_active(table: &DeltaTable, removed: &[String]) -> Result<bool> {
    let active: std::collections::HashSet<String> = table
        .snapshot()?
        .log_data()
        .iter()
        .map(|f| f.path().to_string())
        .collect();
    Ok(removed.iter().all(|p| active.contains(p)))
}

/// Greedy bins of files (in the given order) up to `target` bytes; bins of
/// one file are dropped.
fn bin_pack(files: Vec<SmallFile>, target: i64) -> Vec<Vec<SmallFile>> {
    let sizes: Vec<i64> = files.iter().map(|f| f.size).collect();
    let mut out: Vec<Vec<SmallFile>> = Vec::new();
    let mut files = files.into_iter();
    for group in bin_ranges(&sizes, target) {
        out.push(files.by_ref().take(group).collect());
    }
    out.retain(|b| b.len() > 1);
    out
}

/// Lengths of consecutive groups whose sizes add up to at most `target`
/// (a group always takes at least one file).
fn bin_ranges(sizes: &[i64], target: i64) -> Vec<usize> {
    let mut groups = Vec::new();
    let (mut len, mut bytes) = (0usize, 0i64);
    for &size in sizes {
        if len > 0 && bytes + size > target {
            groups.push(len);
            (len, bytes) = (0, 0);
        }
        len += 1;
        bytes += size;
    }
    if len > 0 {
        groups.push(len);
    }
    groups
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch};
    use deltalake::writer::{DeltaWriter, RecordBatchWriter};

    use super::{bin_ranges, compact};
    use crate::warehouse::{S3Settings, Warehouse};

    /// Rows of the table's current snapshot (from the Add actions' statistics).
    fn rows(table: &deltalake::DeltaTable) -> usize {
        table
            .snapshot()
            .expect("snapshot")
            .log_data()
            .iter()
            .map(|f| f.num_records().expect("numRecords"))
            .sum()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_compactions_of_the_same_files_never_both_land() {
        let dir = tempfile::tempdir().expect("tempdir");
        let warehouse =
            Warehouse::parse(None, dir.path(), &S3Settings::default()).expect("warehouse");
        let url = warehouse.table_url("c", "s", "t").expect("url");
        let schema = sluice_zeroparser::TableSchema::parse("id BIGINT NOT NULL").expect("schema");
        let mut table = warehouse
            .open_or_empty(&url)
            .await
            .expect("open")
            .create()
            .with_columns(crate::sink::delta_fields(&schema.columns).expect("fields"))
            .await
            .expect("create");
        let arrow = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
            "id",
            arrow_schema::DataType::Int64,
            false,
        )]));
        let (files, per_file) = (40i64, 1000i64);
        for f in 0..files {
            let ids: Vec<i64> = (f * per_file..(f + 1) * per_file).collect();
            let batch = RecordBatch::try_new(arrow.clone(), vec![Arc::new(Int64Array::from(ids))])
                .expect("batch");
            let mut writer = RecordBatchWriter::for_table(&table).expect("writer");
            writer.write(batch).await.expect("write");
            writer.flush_and_commit(&mut table).await.expect("commit");
        }
        // Two upkeeps (two pods) with their own handles compact at once.
        let mut a = warehouse.open(&url).await.expect("open a");
        let mut b = warehouse.open(&url).await.expect("open b");
        let (ra, rb) = tokio::join!(compact(&mut a, 2), compact(&mut b, 2));
        let (ra, rb) = (ra.expect("compaction a"), rb.expect("compaction b"));
        assert_eq!(
            [ra.files_removed, rb.files_removed]
                .iter()
                .filter(|n| **n > 0)
                .count(),
            1,
            "exactly one compaction lands: {ra:?} {rb:?}"
        );
        let mut check = warehouse.open(&url).await.expect("open check");
        check.update_incremental(None).await.expect("update");
        assert_eq!(rows(&check), (files * per_file) as usize);
    }

    #[test]
    fn bins_fill_up_to_the_target_in_order() {
        assert_eq!(bin_ranges(&[10, 10, 10, 10, 10], 25), vec![2, 2, 1]);
        assert_eq!(bin_ranges(&[30, 1, 1], 25), vec![1, 2]);
        assert_eq!(bin_ranges(&[], 25), Vec::<usize>::new());
    }
}
