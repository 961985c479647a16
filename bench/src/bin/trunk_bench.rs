//! Trunk benchmark: the official Zerobus Rust SDK pushes ~200-byte protobuf
//! records into a real `sluice serve` process, with 1 and with 16 concurrent
//! streams, and the table reports records/s, MB/s, ack latency p50/p99 (from
//! queueing a record in the SDK to its ack callback) and freshness p50/p99
//! (from a record's ack to the moment a polling `deltalake` reader sees the
//! Delta version holding it). Ack latency starts when `ingest_record_offset`
//! returns (the record is queued for sending), so time spent waiting for
//! in-flight room in the SDK is not counted.
//!
//! Run: `scripts/bench-trunk.sh` (builds release binaries, then runs this).
//! Options: `--sluice PATH` (server binary, default target/release/sluice),
//! `--seconds N` per scenario (default 10), `--streams 1,16`,
//! `--flush-interval 1s`, `--max-inflight N` per stream (default 1000).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Parser;
use databricks_zerobus_ingest_sdk::{ProtoBytes, ZerobusSdk};
use sluice_bench::e2e::{
    descriptor, padding, record, AckTimes, Timeline, ID_STRIDE, TARGET_RECORD_BYTES,
};
use sluice_bench::server::Server;
use sluice_bench::stats::Samples;
use sluice_bench::table::Table;

/// Trunk benchmark: official-SDK streams into one `sluice serve`; prints records/s, ack latency and freshness.
#[derive(clap::Parser)]
struct Options {
    /// The `sluice` binary to benchmark.
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Seconds per scenario.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Stream counts, one scenario each.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    streams: Vec<usize>,
    /// The server's `--flush-interval`.
    #[arg(long, default_value = "1s")]
    flush_interval: String,
    /// Maximum in-flight requests per stream.
    #[arg(long, default_value_t = 1000)]
    max_inflight: usize,
}

struct ScenarioResult {
    streams: usize,
    records: u64,
    bytes: u64,
    seconds: f64,
    ack_ms: Samples,
    fresh_ms: Samples,
}

/// Capacity of the per-stream timelines (records per stream per run).
const TIMELINE_CAPACITY: usize = 4_000_000;

async fn run_scenario(opts: &Options, streams: usize) -> Result<ScenarioResult> {
    let dir = std::env::temp_dir().join(format!(
        "sluice-trunk-bench-{}-{streams}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let server = Server::start(&opts.sluice, &dir, &opts.flush_interval, &[])?;
    server.wait_ready().await?;
    let table = format!("bench.trunk.s{streams}");
    let location = server
        .create_table(&table, sluice_bench::e2e::telemetry_columns())
        .await?;

    let sdk = Arc::new(
        ZerobusSdk::builder()
            .endpoint(&server.url)
            .unity_catalog_url(&server.url)
            .no_tls()
            .build()?,
    );
    let start = Instant::now();
    let timelines: Vec<Arc<Timeline>> = (0..streams)
        .map(|_| Arc::new(Timeline::new(start, TIMELINE_CAPACITY)))
        .collect();
    let stop_polling = Arc::new(AtomicBool::new(false));
    let poller = tokio::spawn(poll_visibility(
        location.clone(),
        start,
        stop_polling.clone(),
    ));
    let deadline = start + Duration::from_secs(opts.seconds);
    let pad = Arc::new(padding());
    let mut tasks = Vec::new();
    for (s, timeline) in timelines.iter().enumerate() {
        let sdk = sdk.clone();
        let timeline = timeline.clone();
        let table = table.clone();
        let pad = pad.clone();
        let max_inflight = opts.max_inflight;
        tasks.push(tokio::spawn(async move {
            let mut stream = sdk
                .stream_builder()
                .table(&table)
                .oauth(
                    sluice_bench::e2e::CLIENT_ID,
                    sluice_bench::e2e::CLIENT_SECRET,
                )
                .compiled_proto(descriptor())
                .max_inflight_requests(max_inflight)
                .ack_callback(Arc::new(AckTimes::new(timeline.clone())))
                .build()
                .await?;
            let mut bytes = 0u64;
            let mut offset = 0usize;
            while Instant::now() < deadline && offset < TIMELINE_CAPACITY {
                let rec = record(s as i64 * ID_STRIDE + offset as i64, &pad);
                bytes += rec.len() as u64;
                let got = stream.ingest_record_offset(ProtoBytes(rec)).await? as usize;
                // Queued in the SDK now (waits for in-flight room are not counted).
                timeline.mark_sent(got);
                offset += 1;
            }
            stream.flush().await?;
            stream.close().await?;
            anyhow::Ok((offset as u64, bytes))
        }));
    }
    let mut sent_records = 0;
    let mut sent_bytes = 0;
    for t in tasks {
        let (r, b) = t.await??;
        sent_records += r;
        sent_bytes += b;
    }
    // Give the reader time to see the last commit (flush interval + commit).
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop_polling.store(true, Ordering::Relaxed);
    let seen = poller.await??;

    let window_ns = opts.seconds * 1_000_000_000;
    let mut records = 0u64;
    let mut ack_ms = Samples::new();
    let mut fresh_ms = Samples::new();
    for (s, tl) in timelines.iter().enumerate() {
        for (offset, sent, acked) in tl.acked_records() {
            if acked <= window_ns {
                records += 1;
            }
            ack_ms.push(acked.saturating_sub(sent) as f64 / 1e6);
            let id = s as i64 * ID_STRIDE + offset as i64;
            if let Some(&visible) = seen.get(&id) {
                fresh_ms.push(visible.saturating_sub(acked) as f64 / 1e6);
            }
        }
    }
    let record_bytes = sent_bytes / sent_records.max(1);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(ScenarioResult {
        streams,
        records,
        bytes: records * record_bytes,
        seconds: opts.seconds as f64,
        ack_ms,
        fresh_ms,
    })
}

/// Polls the Delta table as fast as it can; for every new version, reads the
/// ids of the files it added and notes when they became visible (ns since
/// `start`). Returns id → visible time.
async fn poll_visibility(
    location: String,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> Result<std::collections::HashMap<i64, u64>> {
    let url = url::Url::parse(&location)?;
    let mut table = deltalake::open_table(url).await?;
    let mut known: HashSet<String> = table.get_file_uris()?.collect();
    let mut seen = std::collections::HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        let before = table.version();
        table.update_incremental(None).await?;
        if table.version() != before {
            let now = start.elapsed().as_nanos() as u64;
            let files: Vec<String> = table.get_file_uris()?.collect();
            for f in files {
                if known.insert(f.clone()) {
                    for id in read_ids(&f)? {
                        seen.entry(id).or_insert(now);
                    }
                }
            }
        } else {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    Ok(seen)
}

fn read_ids(uri: &str) -> Result<Vec<i64>> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ProjectionMask;
    let path = url::Url::parse(uri)
        .ok()
        .and_then(|u| u.to_file_path().ok())
        .unwrap_or_else(|| PathBuf::from(uri));
    let builder = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path)?)?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), [0]);
    let mut ids = Vec::new();
    for batch in builder.with_projection(mask).build()? {
        let batch = batch?;
        ids.extend(
            batch
                .column(0)
                .as_primitive::<Int64Type>()
                .values()
                .iter()
                .copied(),
        );
    }
    Ok(ids)
}

#[tokio::main]
async fn main() -> Result<()> {
    let opts = Options::parse();
    sluice_bench::server::require_binary(&opts.sluice)?;
    println!(
        "Sluice trunk benchmark: official Rust SDK 2.12.0, ~{TARGET_RECORD_BYTES}-byte proto records, \
         {} s per scenario, flush interval {}, max {} in-flight records per stream, {} cores",
        opts.seconds,
        opts.flush_interval,
        opts.max_inflight,
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );
    let mut table = Table::new(&[
        "streams",
        "records/s",
        "MB/s",
        "ack p50 ms",
        "ack p99 ms",
        "fresh p50 ms",
        "fresh p99 ms",
        "fresh samples",
    ]);
    for &n in &opts.streams {
        let mut r = run_scenario(&opts, n).await?;
        table.row(vec![
            r.streams.to_string(),
            format!("{:.0}", r.records as f64 / r.seconds),
            format!("{:.2}", r.bytes as f64 / r.seconds / 1e6),
            format!("{:.1}", r.ack_ms.median()),
            format!("{:.1}", r.ack_ms.quantile(0.99)),
            format!("{:.0}", r.fresh_ms.median()),
            format!("{:.0}", r.fresh_ms.quantile(0.99)),
            r.fresh_ms.len().to_string(),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}
