//! Compaction: bin-packs a table's small files into files of the target size
//! and commits the swap as one `OPTIMIZE` commit (Remove + Add, both with
//! `dataChange: false`).
//!
//! Runs beside appends without conflicts: an append reads nothing and
//! removes nothing, so a compaction that loses a log version to one simply
//! commits at the next. Two compactions removing the same file (two pods) do
//! conflict, and that check is ours: deltalake's conflict checker (1.1)
//! ignores a winning commit's removes whose `dataChange` is false, which is
//! every compaction's, so two OPTIMIZE commits could both remove the same
//! files and both add their rewrite: every row of them twice. So the commit
//! is made without deltalake's retries; after a lost race the table is
//! reloaded and the commit retried at the next version only if every file
//! it removes is still live and the schema is the one the files were
//! written with; otherwise the compaction is given up (its new files are
//! never referenced; vacuum removes them) and tried again later on fresh
//! state.
//!
//! Bins: files smaller than half the target, in log order (roughly
//! ingest order, which keeps time-ordered data clustered), filled greedily
//! up to the target; a bin of one file is left alone. Each bin is read one
//! small file at a time (below half the target, so memory stays bounded)
//! and written into one new Parquet file.

use std::collections::HashSet;

use deltalake::kernel::transaction::CommitBuilder;
use deltalake::kernel::Action;
use deltalake::protocol::DeltaOperation;
use deltalake::table::config::TablePropertiesExt;
use deltalake::writer::DeltaWriter;
use deltalake::DeltaTable;
use object_store::ObjectStoreExt;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde::Serialize;

use crate::commit::lost_race;
use crate::error::{Result, ServerError};
use crate::sink::commit::layout_writer;

use super::row_group_copy::{self, BinFile, CopyRule};
use super::stats_merge;

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
    /// Bins written by copying row groups (the rest were re-encoded).
    pub bins_copied: usize,
    /// Delta version of the OPTIMIZE commit, if one was made.
    pub version: Option<u64>,
    /// Set when a concurrent commit removed one of the files first (or
    /// changed the schema): nothing was committed.
    pub gave_up: bool,
}

/// Lost races (to appends) a compaction commit retries at a later version.
const COMMIT_ATTEMPTS: usize = 100;

struct SmallFile {
    path: object_store::path::Path,
    size: i64,
    /// Its Delta stats JSON (for a row-group copy's merged stats).
    stats: Option<String>,
    remove: deltalake::kernel::Remove,
}

/// A table's live data files as its snapshot lists them.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct FileStats {
    /// Live data files.
    pub files: usize,
    /// Their bytes.
    pub bytes: i64,
    /// Those below half the target size (what compaction would rewrite).
    pub small: usize,
}

impl FileStats {
    /// Sets the table's file gauges.
    pub fn publish(&self, table: &str) {
        let t = table.to_string();
        metrics::gauge!("sluice_table_files", "table" => t.clone()).set(self.files as f64);
        metrics::gauge!("sluice_table_size_bytes", "table" => t.clone()).set(self.bytes as f64);
        metrics::gauge!("sluice_table_small_files", "table" => t).set(self.small as f64);
    }
}

/// The live files of `table`'s loaded snapshot (no I/O).
pub fn file_stats(table: &DeltaTable) -> Result<FileStats> {
    let snapshot = table.snapshot()?;
    let target = snapshot.table_config().target_file_size().get() as i64;
    let mut stats = FileStats::default();
    for f in snapshot.log_data().iter() {
        stats.files += 1;
        stats.bytes += f.size();
        stats.small += usize::from(f.size() < target / 2);
    }
    Ok(stats)
}

/// Compacts `table` if it has at least `min_files` small files; a bin whose row groups are
/// all large by `copy` (and whose files share one schema) is copied, the rest re-encoded.
pub async fn compact(
    table: &mut DeltaTable,
    min_files: usize,
    copy: &CopyRule,
) -> Result<CompactReport> {
    table.update_incremental(None).await?;
    let snapshot = table.snapshot()?;
    let target = snapshot.table_config().target_file_size().get() as i64;
    let small: Vec<SmallFile> = snapshot
        .log_data()
        .iter()
        // A file with a deletion vector is left alone: both ways of compacting read every
        // row of the Parquet file, so they would bring its deleted rows back.
        .filter(|f| f.size() < target / 2 && f.deletion_vector_descriptor().is_none())
        .map(|f| SmallFile {
            path: f.object_store_path(),
            size: f.size(),
            stats: f.stats(),
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
    let partitioned = !snapshot.metadata().partition_columns().is_empty();
    let delta_schema = snapshot.schema().clone();
    for bin in bins {
        let files: Vec<BinFile> = bin
            .iter()
            .map(|f| BinFile {
                path: &f.path,
                size: f.size,
            })
            .collect();
        // Copy the row groups when the files allow it (footers read; a slow table's small
        // row groups stop this at its first file) and their stats merge; else re-encode.
        let merged = if !partitioned && row_group_copy::copyable(&store, &files, copy).await? {
            let stats: Vec<Option<String>> = bin.iter().map(|f| f.stats.clone()).collect();
            stats_merge::merge(&stats, &delta_schema)
        } else {
            None
        };
        let adds = match merged {
            Some(stats) => {
                report.bins_copied += 1;
                vec![row_group_copy::copy(&store, &files, Some(stats)).await?]
            }
            None => reencode(table, &store, &bin).await?,
        };
        for add in adds {
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
    let removed: HashSet<String> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Remove(r) => Some(r.path.clone()),
            _ => None,
        })
        .collect();
    let schema = table.snapshot()?.metadata().schema_string().to_string();
    let mut attempt = 0;
    let finalized = loop {
        let committed = CommitBuilder::default()
            .with_actions(actions.clone())
            .with_max_retries(0)
            .build(
                Some(table.snapshot()?),
                table.log_store(),
                DeltaOperation::Optimize {
                    predicate: None,
                    target_size: target,
                },
            )
            .await;
        match committed {
            Ok(finalized) => break finalized,
            Err(e) if lost_race(&e) && attempt < COMMIT_ATTEMPTS => {
                attempt += 1;
                table.update_incremental(None).await?;
                let snapshot = table.snapshot()?;
                let live: HashSet<String> = snapshot
                    .log_data()
                    .iter()
                    .map(|f| f.path().to_string())
                    .collect();
                if *snapshot.metadata().schema_string() != schema
                    || !removed.iter().all(|p| live.contains(p))
                {
                    tracing::info!(
                        files = removed.len(),
                        "compaction given up: a concurrent commit removed its files or changed the schema"
                    );
                    metrics::counter!("sluice_upkeep_compactions_given_up_total").increment(1);
                    return Ok(CompactReport {
                        gave_up: true,
                        ..CompactReport::default()
                    });
                }
            }
            Err(e) => return Err(e.into()),
        }
    };
    report.version = Some(finalized.version());
    table.update_incremental(None).await?;
    metrics::counter!("sluice_upkeep_files_compacted_total").increment(report.files_removed as u64);
    metrics::counter!("sluice_upkeep_bins_copied_total").increment(report.bins_copied as u64);
    Ok(report)
}

/// `bin`'s rows decoded and written again through the table's writer (one small file at
/// a time, so memory stays bounded); the new files' Adds, `dataChange` false.
async fn reencode(
    table: &DeltaTable,
    store: &std::sync::Arc<dyn object_store::ObjectStore>,
    bin: &[SmallFile],
) -> Result<Vec<deltalake::kernel::Add>> {
    let mut writer = layout_writer(table)?;
    let schema = writer.arrow_schema();
    for file in bin {
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
            let batch =
                batch.map_err(|e| ServerError::Internal(format!("reading {}: {e}", file.path)))?;
            // Same columns; take the table's field metadata so the writer
            // sees no schema change.
            let batch = arrow_array::RecordBatch::try_new(schema.clone(), batch.columns().to_vec())
                .map_err(|e| ServerError::Internal(format!("{}: {e}", file.path)))?;
            writer.write(batch).await?;
        }
    }
    let mut adds = writer.flush().await?;
    for add in &mut adds {
        add.data_change = false;
    }
    Ok(adds)
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
    use arrow_schema::{DataType, Field, Schema};
    use deltalake::writer::{DeltaWriter, RecordBatchWriter};
    use object_store::ObjectStoreExt;

    use super::{bin_ranges, compact};
    use crate::sink::upkeep::COPY_RULE;
    use crate::warehouse::{S3Settings, Warehouse};

    #[test]
    fn bins_fill_up_to_the_target_in_order() {
        assert_eq!(bin_ranges(&[10, 10, 10, 10, 10], 25), vec![2, 2, 1]);
        assert_eq!(bin_ranges(&[30, 1, 1], 25), vec![1, 2]);
        assert_eq!(bin_ranges(&[], 25), Vec::<usize>::new());
    }

    /// The bytes of `path` under `table`'s root.
    async fn file_bytes(
        table: &deltalake::DeltaTable,
        path: &object_store::path::Path,
    ) -> bytes::Bytes {
        let store = table.log_store().object_store(None);
        store
            .get(path)
            .await
            .expect("get")
            .bytes()
            .await
            .expect("bytes")
    }

    /// Appends `ids` as one file in one commit.
    async fn append_ids(table: &mut deltalake::DeltaTable, ids: Vec<i64>) {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ids))]).expect("batch");
        let mut writer = RecordBatchWriter::for_table(table).expect("writer");
        writer.write(batch).await.expect("write");
        writer.flush_and_commit(table).await.expect("commit");
    }

    /// Rows of the table's live files, read back from Parquet.
    async fn live_ids(table: &mut deltalake::DeltaTable) -> Vec<i64> {
        table.update_incremental(None).await.expect("update");
        let mut ids = Vec::new();
        for file in table.snapshot().expect("snapshot").log_data().iter() {
            let bytes = file_bytes(table, &file.object_store_path()).await;
            ids.extend(crate::sink::testparquet::first_column_ids(bytes));
        }
        ids.sort_unstable();
        ids
    }

    /// Two compactions of the same small files racing for one log version: exactly one
    /// commits, the other gives up, and every row is still there exactly once.
    /// (deltalake's own conflict checker lets both commit, see the module docs.)
    #[tokio::test]
    async fn two_compactions_of_the_same_files_never_both_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let warehouse =
            Warehouse::parse(None, dir.path(), &S3Settings::default()).expect("warehouse");
        let mut gave_up = 0;
        for round in 0..5 {
            let url = warehouse
                .table_url("main", "compact", &format!("race{round}"))
                .expect("url");
            let mut table = warehouse.create_for_test(&url, "id BIGINT NOT NULL").await;
            for i in 0..8i64 {
                append_ids(&mut table, vec![i * 10, i * 10 + 1]).await;
            }
            let before = live_ids(&mut table).await;
            assert_eq!(before.len(), 16);
            let mut a = warehouse.open(&url).await.expect("open a");
            let mut b = warehouse.open(&url).await.expect("open b");
            let (ra, rb) = tokio::join!(
                compact(&mut a, 2, &COPY_RULE),
                compact(&mut b, 2, &COPY_RULE)
            );
            let (ra, rb) = (ra.expect("compaction a"), rb.expect("compaction b"));
            let committed = [&ra, &rb].iter().filter(|r| r.version.is_some()).count();
            assert_eq!(
                committed, 1,
                "round {round}: exactly one compaction commits"
            );
            if ra.gave_up || rb.gave_up {
                gave_up += 1;
            }
            assert_eq!(
                live_ids(&mut table).await,
                before,
                "round {round}: every row exactly once after both compactions"
            );
        }
        assert!(gave_up > 0, "the two compactions never raced for a version");
    }

    /// Files of large row groups are compacted by copying their row groups: every row once,
    /// the row groups kept as they were (a re-encode writes one group of up to 1 Mi rows),
    /// the Add's stats merged from the inputs'. Small row groups are re-encoded.
    #[tokio::test]
    async fn large_row_groups_are_copied_small_ones_re_encoded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let warehouse =
            Warehouse::parse(None, dir.path(), &S3Settings::default()).expect("warehouse");
        let rows = COPY_RULE.min_rows + 10;
        for (name, per_file, copied) in [("large", rows, 1), ("small", 100, 0)] {
            let url = warehouse.table_url("main", "compact", name).expect("url");
            let mut table = warehouse.create_for_test(&url, "id BIGINT NOT NULL").await;
            for f in 0..3i64 {
                append_ids(
                    &mut table,
                    (0..per_file).map(|i| 1_000_000 * (2 - f) + i).collect(),
                )
                .await;
            }
            let before = live_ids(&mut table).await;
            let report = compact(&mut table, 2, &COPY_RULE).await.expect("compact");
            assert_eq!(
                (report.bins_copied, report.files_removed, report.files_added),
                (copied, 3, 1),
                "{name}"
            );
            assert_eq!(
                live_ids(&mut table).await,
                before,
                "{name}: every row exactly once"
            );
            let snapshot = table.snapshot().expect("snapshot");
            let file = snapshot.log_data().iter().next().expect("one file");
            let stats: serde_json::Value =
                serde_json::from_str(&file.stats().expect("stats")).expect("json");
            assert_eq!(stats["numRecords"], 3 * per_file, "{name}");
            assert_eq!(stats["minValues"]["id"], 0, "{name}");
            assert_eq!(stats["maxValues"]["id"], 2_000_000 + per_file - 1, "{name}");
            assert_eq!(stats["nullCount"]["id"], 0, "{name}");
            let bytes = file_bytes(&table, &file.object_store_path()).await;
            let meta = parquet::file::metadata::ParquetMetaDataReader::new()
                .parse_and_finish(&bytes)
                .expect("footer");
            assert_eq!(
                meta.num_row_groups(),
                if copied == 1 { 3 } else { 1 },
                "{name}"
            );
        }
    }
}
