//! Compaction: bin-packs a table's small files into files of the target size
//! and commits the swap as one `OPTIMIZE` commit (Remove + Add, both with
//! `dataChange: false`).
//!
//! Runs beside appends without conflicts: an append reads nothing and
//! removes nothing, so when the two race for a log version deltalake's
//! conflict checker lets the loser commit at the next version. Two
//! compactions removing the same file (two pods) do conflict; the loser
//! fails with a concurrent-delete error and tries again later on fresh state.
//!
//! Bins: files smaller than half the target, in log order (roughly
//! ingest order, which keeps time-ordered data clustered), filled greedily
//! up to the target; a bin of one file is left alone. Each bin is read one
//! small file at a time (below half the target, so memory stays bounded)
//! and written into one new Parquet file.

use deltalake::kernel::transaction::CommitBuilder;
use deltalake::kernel::Action;
use deltalake::protocol::DeltaOperation;
use deltalake::table::config::TablePropertiesExt;
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use deltalake::DeltaTable;
use object_store::ObjectStoreExt;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde::Serialize;

use crate::error::{Result, ServerError};
use crate::sink::file_layout::writer_properties;

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
    let finalized = CommitBuilder::default()
        .with_actions(actions)
        .build(
            Some(table.snapshot()?),
            table.log_store(),
            DeltaOperation::Optimize {
                predicate: None,
                target_size: target,
            },
        )
        .await?;
    report.version = Some(finalized.version());
    table.update_incremental(None).await?;
    metrics::counter!("sluice_upkeep_files_compacted_total").increment(report.files_removed as u64);
    Ok(report)
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
    use super::bin_ranges;

    #[test]
    fn bins_fill_up_to_the_target_in_order() {
        assert_eq!(bin_ranges(&[10, 10, 10, 10, 10], 25), vec![2, 2, 1]);
        assert_eq!(bin_ranges(&[30, 1, 1], 25), vec![1, 2]);
        assert_eq!(bin_ranges(&[], 25), Vec::<usize>::new());
    }
}
