//! Commit rate on one table with 1, 2, 4 concurrent writers, each with its
//! own table handle (as separate pods have), each committing one-row
//! appends back to back for a fixed time through the sink's own
//! `commit_append`: its Parquet layout and commit properties (txn action of
//! the writer's app id, readVersion, no checkpoint on the commit path), with
//! the retry budget given (default the sink's `COMMIT_RETRIES`). A commit
//! whose version is past its read version + 1 lost at least one put-if-absent
//! race and was retried by deltalake at a later version. CPU time is this
//! process's (all writers; the S3 server is another process).

use std::time::{Duration, Instant};

use anyhow::Result;
use arrow_array::{Int64Array, RecordBatch};
use sluice_server::sink::{commit_append, AppendCommit};
use sluice_server::warehouse::Warehouse;

/// What one run measured.
pub struct CommitRate {
    pub commits: u64,
    pub raced: u64,
    pub failed: u64,
    pub seconds: f64,
    /// CPU seconds of this process during the run.
    pub cpu_s: f64,
    /// Each distinct error of a failed commit with its count.
    pub errors: std::collections::BTreeMap<String, u64>,
}

/// Creates the table `name` (one `id BIGINT NOT NULL` column) under `bench.commits`.
pub async fn create_table(warehouse: &Warehouse, name: &str) -> Result<url::Url> {
    let url = warehouse.table_url("bench", "commits", name)?;
    let schema = sluice_zeroparser::TableSchema::parse("id BIGINT NOT NULL")?;
    warehouse
        .open_or_empty(&url)
        .await?
        .create()
        .with_columns(sluice_server::sink::delta_fields(&schema.columns)?)
        .await?;
    Ok(url)
}

/// `rows` consecutive ids from `first`, in the table's one column.
pub fn id_batch(first: i64, rows: usize) -> Result<RecordBatch> {
    let schema = std::sync::Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
        "id",
        arrow_schema::DataType::Int64,
        false,
    )]));
    let ids: Int64Array = (first..first + rows as i64).collect::<Vec<_>>().into();
    Ok(RecordBatch::try_new(
        schema,
        vec![std::sync::Arc::new(ids)],
    )?)
}

/// Runs `writers` writers on a new table `name` for `seconds`, each commit
/// retrying up to `retries` lost races.
pub async fn run(
    warehouse: &Warehouse,
    name: &str,
    writers: usize,
    seconds: u64,
    retries: usize,
) -> Result<CommitRate> {
    let url = create_table(warehouse, name).await?;
    let started = Instant::now();
    let cpu_before = crate::throughput::cpu_seconds();
    let deadline = started + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for w in 0..writers {
        let mut table = warehouse.open(&url).await?;
        tasks.push(tokio::spawn(async move {
            let (mut commits, mut raced, mut failed) = (0u64, 0u64, 0u64);
            let mut errors = std::collections::BTreeMap::<String, u64>::new();
            let mut next = w as i64 * 1_000_000_000;
            while Instant::now() < deadline {
                let commit = AppendCommit {
                    app_id: &format!("sink-bench-writer-{w}"),
                    txn_version: next,
                    max_retries: retries,
                    streams: &[],
                };
                let batch = id_batch(next, 1)?;
                next += 1;
                match commit_append(&mut table, batch, commit).await {
                    Ok(committed) => {
                        commits += 1;
                        if committed.raced() {
                            raced += 1;
                        }
                    }
                    Err(e) => {
                        failed += 1;
                        *errors.entry(e.to_string()).or_default() += 1;
                        table.update_incremental(None).await?;
                    }
                }
            }
            anyhow::Ok((commits, raced, failed, errors))
        }));
    }
    let mut r = CommitRate {
        commits: 0,
        raced: 0,
        failed: 0,
        seconds: 0.0,
        cpu_s: 0.0,
        errors: Default::default(),
    };
    for t in tasks {
        let (c, x, f, errors) = t.await??;
        r.commits += c;
        r.raced += x;
        r.failed += f;
        for (e, n) in errors {
            *r.errors.entry(e).or_default() += n;
        }
    }
    r.seconds = started.elapsed().as_secs_f64();
    r.cpu_s = crate::throughput::cpu_seconds() - cpu_before;
    Ok(r)
}
