//! Sink throughput in-process: Arrow batches of the benchmark table (about
//! 16 MiB of Arrow data each, like a memtable at a 1 s flush under load)
//! written as Parquet with Sluice's file layout and committed to a local
//! Delta table, one commit per batch, exactly as a flush does (through the
//! sink's own `commit_append`). Reports MB/s
//! of Arrow data per wall second and per CPU second (getrusage of the
//! process: the "per core" figure).

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use arrow_array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use sluice_server::sink::{commit_append, AppendCommit, COMMIT_RETRIES};
use sluice_server::warehouse::{S3Settings, Warehouse};

/// What one run measured.
pub struct Throughput {
    pub arrow_mb: f64,
    pub parquet_mb: f64,
    pub wall_s: f64,
    pub cpu_s: f64,
}

/// CPU seconds (user + system) of this process so far.
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct we pass; no other memory is touched.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn batch(first: i64, rows: usize) -> Result<RecordBatch> {
    let schema = Arc::new(arrow_schema::Schema::new(vec![
        arrow_schema::Field::new("id", arrow_schema::DataType::Int64, false),
        arrow_schema::Field::new("device", arrow_schema::DataType::Utf8, true),
        arrow_schema::Field::new(
            "ts",
            arrow_schema::DataType::Timestamp(
                arrow_schema::TimeUnit::Microsecond,
                Some("UTC".into()),
            ),
            true,
        ),
        arrow_schema::Field::new("temp", arrow_schema::DataType::Float64, true),
        arrow_schema::Field::new("humidity", arrow_schema::DataType::Float64, true),
        arrow_schema::Field::new("payload", arrow_schema::DataType::Utf8, true),
    ]));
    let ids: Vec<i64> = (first..first + rows as i64).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.clone())),
        Arc::new(StringArray::from_iter_values(
            ids.iter().map(|i| format!("device-{}", i % 1000)),
        )),
        Arc::new(
            TimestampMicrosecondArray::from_iter_values(
                ids.iter().map(|i| 1_700_000_000_000_000 + i * 1000),
            )
            .with_timezone("UTC"),
        ),
        Arc::new(Float64Array::from_iter_values(
            ids.iter().map(|i| 20.0 + (i % 100) as f64 / 10.0),
        )),
        Arc::new(Float64Array::from_iter_values(
            ids.iter().map(|i| (i % 7) as f64 / 7.0),
        )),
        Arc::new(StringArray::from_iter_values(
            ids.iter().map(|i| format!("{i:016x}{}", "p".repeat(64))),
        )),
    ];
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// Commits `commits` batches of `rows` rows into a fresh local table.
pub async fn run(commits: usize, rows: usize) -> Result<Throughput> {
    let dir = tempfile_dir("throughput")?;
    let warehouse = Warehouse::parse(
        Some(dir.to_str().unwrap_or(".")),
        &dir,
        &S3Settings::default(),
    )?;
    let url = warehouse.table_url("bench", "sink", "throughput")?;
    let schema = sluice_zeroparser::TableSchema::parse(
        "id BIGINT NOT NULL, device STRING, ts TIMESTAMP, temp DOUBLE, humidity DOUBLE, payload STRING",
    )?;
    let mut table = warehouse
        .open_or_empty(&url)
        .await?
        .create()
        .with_columns(sluice_server::sink::delta_fields(&schema.columns)?)
        .await?;
    let batches: Vec<RecordBatch> = (0..commits)
        .map(|c| batch((c * rows) as i64, rows))
        .collect::<Result<_>>()?;
    let arrow_bytes: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
    let cpu0 = cpu_seconds();
    let wall0 = Instant::now();
    let mut parquet_bytes = 0i64;
    for (c, b) in batches.into_iter().enumerate() {
        let commit = AppendCommit {
            app_id: "sink-bench-throughput",
            txn_version: c as i64,
            max_retries: COMMIT_RETRIES,
            streams: &[],
        };
        commit_append(&mut table, b, commit).await?;
    }
    let wall_s = wall0.elapsed().as_secs_f64();
    let cpu_s = cpu_seconds() - cpu0;
    for f in table.snapshot()?.log_data().iter() {
        parquet_bytes += f.size();
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Throughput {
        arrow_mb: arrow_bytes as f64 / 1e6,
        parquet_mb: parquet_bytes as f64 / 1e6,
        wall_s,
        cpu_s,
    })
}

/// A fresh directory under the system temp dir.
pub fn tempfile_dir(what: &str) -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("sluice-sink-bench-{}-{what}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
