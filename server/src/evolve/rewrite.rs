//! A rewriting alter (`sluice table alter … --rewrite`): widening a type,
//! dropping or renaming columns without any Delta table feature, by writing
//! every live data file again under the new schema and committing, in one
//! Delta commit, the new `metaData` (schema, properties, the renames in
//! [`crate::sink::fit::RENAMES_PROPERTY`]), a `remove` of every old file
//! and an `add` of every new one. Readers see the old table or the new one,
//! never a mix.
//!
//! The fence against streaming appends is the Delta log itself plus the
//! committer's schema fence: the commit is tried at exactly the next
//! version (no deltalake retries). When an append (or a compaction) took
//! that version, the log is reloaded: files no longer live are forgotten
//! (their rewrites are never referenced; vacuum deletes them), files added
//! since are rewritten too, and the commit is tried again — so every row
//! committed before the change is in the table after it, once. A hand-off
//! written under the old schema that reaches the committer after the change
//! is refused as stale (`commit::schema_fence`) and written again by its pod
//! under the new schema (`sink::fit` casts, leaves out dropped columns and
//! finds renamed ones under their old names), never committed as it was.
//!
//! Each old file is rewritten into its own new file(s), one file in memory
//! at a time, into the old file's partition when the table is partitioned
//! (the partition columns themselves are never changed: `evolve::plan`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use deltalake::kernel::engine::arrow_conversion::TryIntoArrow;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{Action, Add, LogicalFileView, MetadataExt, StructField, StructType};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::writer::{DeltaWriter, RecordBatchWriter, WriteMode};
use deltalake::DeltaTable;
use indexmap::IndexMap;
use object_store::ObjectStoreExt;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::delta::check_stale;
use crate::error::{Result, ServerError};
use crate::sink::fit::{self, Renames};

/// Lost races (appends landing first) retried before the alter gives up.
const ATTEMPTS: usize = 100;

/// Test hook: with this variable set to a duration (`2s`), the first commit
/// attempt waits that long after its files are written, so that appends
/// land first and the rewrite must take in the files they added.
pub const PAUSE_BEFORE_COMMIT_ENV: &str = "SLUICE_TEST_REWRITE_PAUSE_BEFORE_COMMIT";

/// What a rewriting alter did.
#[derive(Debug, Clone, Default)]
pub struct Rewritten {
    /// The Delta version of the commit.
    pub version: u64,
    /// Old files removed by it.
    pub files_removed: usize,
    /// New files added by it.
    pub files_added: usize,
    /// Rows in the new files.
    pub rows: u64,
    /// Commit attempts (more than one: appends landed meanwhile).
    pub attempts: usize,
    /// Seconds from the first read to the commit.
    pub seconds: f64,
}

/// The new Delta schema, its arrow form, the renames and where to write.
struct Target<'a> {
    schema: StructType,
    arrow: arrow_schema::SchemaRef,
    /// `arrow` without the partition columns: what a data file holds.
    file_arrow: arrow_schema::SchemaRef,
    /// The Delta partition columns (kept: a partition column is never changed).
    partitions: Vec<String>,
    renames: Renames,
    uri: String,
    storage: &'a HashMap<String, String>,
}

/// Rewrites `table` (whose Delta columns must still be `expected`) under
/// `next`, renaming `renames` (`(old, new)`) and setting the `delta.*`
/// `properties`, in one commit; returns what it did.
pub async fn commit_rewrite(
    table: &mut DeltaTable,
    storage: &HashMap<String, String>,
    name: &str,
    expected: &[StructField],
    next: &[StructField],
    properties: &BTreeMap<String, String>,
    renames: &[(String, String)],
) -> Result<Rewritten> {
    let started = Instant::now();
    crate::commit::reload(table).await?;
    let snapshot = table.snapshot()?;
    let partitions = snapshot.metadata().partition_columns().to_vec();
    super::delta::check_features(snapshot.protocol(), next)?;
    let mut all_renames = fit::renames(snapshot.metadata().configuration());
    for (old, new) in renames {
        all_renames = fit::renamed(all_renames, old, new);
    }
    let schema = StructType::try_new(next.to_vec())
        .map_err(|e| ServerError::InvalidArgument(format!("alter: {e}")))?;
    let arrow: arrow_schema::Schema = (&schema)
        .try_into_arrow()
        .map_err(|e| ServerError::Internal(format!("alter of {name}: {e}")))?;
    let file_arrow = arrow_schema::Schema::new(
        arrow
            .fields()
            .iter()
            .filter(|f| !partitions.contains(f.name()))
            .cloned()
            .collect::<Vec<_>>(),
    );
    let target = Target {
        schema,
        arrow: Arc::new(arrow),
        file_arrow: Arc::new(file_arrow),
        partitions,
        renames: all_renames,
        uri: table.table_url().to_string(),
        storage,
    };
    // Each live file's path → the Adds of its rewrite and its rows.
    let mut done: HashMap<String, (Vec<Add>, u64)> = HashMap::new();
    for attempt in 1..=ATTEMPTS {
        if attempt > 1 {
            crate::commit::reload(table).await?;
        }
        check_stale(table, name, expected)?;
        let snapshot = table.snapshot()?;
        let live: Vec<_> = snapshot
            .log_data()
            .iter()
            .map(|f| {
                let remove = f.remove_action(true);
                (f.path().to_string(), f, remove)
            })
            .collect();
        let paths: HashSet<&String> = live.iter().map(|(p, _, _)| p).collect();
        done.retain(|p, _| paths.contains(p));
        for (path, file, _) in &live {
            if !done.contains_key(path) {
                let rewritten = rewrite_file(table, file, &target).await?;
                done.insert(path.clone(), rewritten);
            }
        }
        let kernel =
            |e: deltalake::kernel::Error| ServerError::Internal(format!("alter of {name}: {e}"));
        let mut metadata = snapshot
            .metadata()
            .clone()
            .with_schema(&target.schema)
            .map_err(kernel)?;
        for (k, v) in properties {
            metadata = metadata
                .add_config_key(k.clone(), v.clone())
                .map_err(kernel)?;
        }
        if !target.renames.is_empty() {
            let json = serde_json::to_string(&target.renames)
                .map_err(|e| ServerError::Internal(format!("alter of {name}: {e}")))?;
            metadata = metadata
                .add_config_key(fit::RENAMES_PROPERTY.to_string(), json)
                .map_err(kernel)?;
        }
        let mut actions = vec![Action::Metadata(metadata)];
        let mut report = Rewritten {
            files_removed: live.len(),
            attempts: attempt,
            ..Rewritten::default()
        };
        for (_, _, remove) in &live {
            actions.push(Action::Remove(remove.clone()));
        }
        for (adds, rows) in done.values() {
            report.files_added += adds.len();
            report.rows += rows;
            actions.extend(adds.iter().cloned().map(Action::Add));
        }
        if attempt == 1 {
            if let Some(pause) = std::env::var(PAUSE_BEFORE_COMMIT_ENV)
                .ok()
                .and_then(|v| humantime::parse_duration(&v).ok())
            {
                tracing::warn!(
                    table = name,
                    "test hook: pausing before the rewrite's first commit"
                );
                tokio::time::sleep(pause.min(std::time::Duration::from_secs(60))).await;
            }
        }
        let attempt = CommitBuilder::from(CommitProperties::default())
            .with_actions(actions)
            .with_max_retries(0)
            .build(
                Some(snapshot),
                table.log_store(),
                DeltaOperation::Write {
                    mode: SaveMode::Overwrite,
                    partition_by: (!target.partitions.is_empty())
                        .then(|| target.partitions.clone()),
                    predicate: None,
                },
            )
            .await;
        match attempt {
            Ok(committed) => {
                table.state = Some(committed.snapshot());
                report.version = committed.version();
                report.seconds = started.elapsed().as_secs_f64();
                return Ok(report);
            }
            Err(e) if crate::commit::lost_race(&e) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ServerError::Unavailable(format!(
        "alter of {name}: lost {ATTEMPTS} races in a row against other commits; retry"
    )))
}

/// Reads the live data `file` and writes its rows under `target` into the
/// same partition (its partition values, if the table has partitions);
/// returns the new files' Adds and the rows.
async fn rewrite_file(
    table: &DeltaTable,
    file: &LogicalFileView,
    target: &Target<'_>,
) -> Result<(Vec<Add>, u64)> {
    let location = &file.object_store_path();
    let values: IndexMap<String, _> = file
        .partition_values()
        .map(|v| {
            v.fields()
                .iter()
                .map(|f| f.name().clone())
                .zip(v.values().iter().cloned())
                .collect()
        })
        .unwrap_or_default();
    let read =
        |e: &dyn std::fmt::Display| ServerError::Internal(format!("reading {location}: {e}"));
    let bytes = table
        .log_store()
        .object_store(None)
        .get(location)
        .await
        .map_err(|e| read(&e))?
        .bytes()
        .await
        .map_err(|e| read(&e))?;
    let batches = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|b| b.build())
        .map_err(|e| read(&e))?;
    let mut writer = RecordBatchWriter::try_new(
        &target.uri,
        target.arrow.clone(),
        (!target.partitions.is_empty()).then(|| target.partitions.clone()),
        Some(target.storage.clone()),
    )?
    .with_writer_properties(crate::sink::file_layout::writer_properties_for(
        &target.file_arrow,
    )?);
    let mut rows = 0u64;
    for batch in batches {
        let batch = batch.map_err(|e| read(&e))?;
        rows += batch.num_rows() as u64;
        let batch = fit::fit_batch(&batch, &target.file_arrow, &target.renames)?;
        writer
            .write_partition(batch, &values, WriteMode::Default)
            .await?;
    }
    Ok((writer.flush().await?, rows))
}
