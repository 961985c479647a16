//! SDK benchmark: Sluice's own producer SDK (`sluice-sdk`) against the official Zerobus Rust
//! SDK 2.12.0, pushing the same ~200-byte protobuf telemetry records (built per send, the
//! same way for both) one at a time into a fresh `sluice serve`, with 1 and with 4 streams,
//! side by side in one run. Per scenario: records/s and MB/s acked within the window, the
//! producer's CPU seconds per GB (this process's utime + stime from `/proc/self/stat`: the
//! bench process is the producer, the pod is another process) beside the pod's CPU seconds
//! per GB (`/proc/PID/stat`), and ack latency p50/p99 (from the send call returning to the
//! ack callback). The last column is the producer CPU per GB of `sluice-sdk` over the
//! official SDK's in the same stream count.
//!
//! Run: `cargo run --release -p sluice-bench --features sdkbench --bin sdk-bench` after
//! `cargo build --release -p sluice-server`. Options: `--sluice PATH`, `--seconds N`
//! (default 10), `--streams 1,4`, `--flush-interval 1s`, `--max-inflight N` records per
//! stream (default 10 000). A debug build only smoke-tests it: its figures are no results.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Parser;
use databricks_zerobus_ingest_sdk::{AckCallback, ProtoBytes, ZerobusSdk};
use sluice_bench::e2e::{descriptor, padding, record, AckTimes, Timeline, ID_STRIDE};
use sluice_bench::procstat::cpu_seconds;
use sluice_bench::server::Server;
use sluice_bench::stats::Samples;
use sluice_bench::table::Table;

/// SDK benchmark: sluice-sdk vs the official Rust SDK 2.12.0 on the same rows.
#[derive(clap::Parser)]
struct Options {
    /// The `sluice` binary to push to.
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Seconds of sending per scenario.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Stream counts, one scenario per SDK each.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    streams: Vec<usize>,
    /// The server's `--flush-interval`.
    #[arg(long, default_value = "1s")]
    flush_interval: String,
    /// Unacked records per stream.
    #[arg(long, default_value_t = 10_000)]
    max_inflight: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Sdk {
    Sluice,
    Official,
}

impl Sdk {
    fn name(self) -> &'static str {
        match self {
            Sdk::Sluice => "sluice-sdk",
            Sdk::Official => "official 2.12.0",
        }
    }
}

struct Outcome {
    records: u64,
    bytes: u64,
    producer_cpu: f64,
    server_cpu: f64,
    ack_ms: Samples,
}

/// Records a run's timelines hold in all (16 bytes each), so one fast stream is not cut short.
const TOTAL_CAPACITY: usize = 32_000_000;

/// Records per stream a timeline holds with `streams` streams.
fn capacity(streams: usize) -> usize {
    TOTAL_CAPACITY / streams.max(1)
}

/// The pid of this process, for its own CPU time.
fn me() -> u32 {
    std::process::id()
}

async fn send_sluice(
    url: String,
    table: String,
    s: usize,
    deadline: Instant,
    timeline: Arc<Timeline>,
    max_inflight: usize,
) -> Result<u64> {
    let client = sluice_sdk::Client::builder(url)
        .credentials(
            sluice_bench::e2e::CLIENT_ID,
            sluice_bench::e2e::CLIENT_SECRET,
        )
        .build()?;
    let times = AckTimes::new(timeline.clone());
    let stream = client
        .stream(table)
        .proto(&descriptor())
        .max_inflight_records(max_inflight)
        .on_ack(move |offset| times.on_ack(offset))
        .open()
        .await?;
    let pad = padding();
    let mut n = 0usize;
    while Instant::now() < deadline && n < timeline.sent.len() {
        let ack = stream
            .send(record(s as i64 * ID_STRIDE + n as i64, &pad))
            .await?;
        timeline.mark_sent(ack.offset() as usize);
        n += 1;
    }
    stream.close().await?;
    Ok(n as u64)
}

async fn send_official(
    sdk: Arc<ZerobusSdk>,
    table: String,
    s: usize,
    deadline: Instant,
    timeline: Arc<Timeline>,
    max_inflight: usize,
) -> Result<u64> {
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
    let pad = padding();
    let mut n = 0usize;
    while Instant::now() < deadline && n < timeline.sent.len() {
        let rec = record(s as i64 * ID_STRIDE + n as i64, &pad);
        let got = stream.ingest_record_offset(ProtoBytes(rec)).await? as usize;
        timeline.mark_sent(got);
        n += 1;
    }
    stream.flush().await?;
    stream.close().await?;
    Ok(n as u64)
}

async fn run_scenario(opts: &Options, sdk: Sdk, streams: usize) -> Result<Outcome> {
    let dir = std::env::temp_dir().join(format!(
        "sluice-sdk-bench-{}-{streams}-{}",
        std::process::id(),
        sdk.name().len()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let server = Server::start(&opts.sluice, &dir, &opts.flush_interval, &[])?;
    server.wait_ready().await?;
    let table = format!("bench.sdk.s{streams}");
    server
        .create_table(&table, sluice_bench::e2e::telemetry_columns())
        .await?;
    let official = sluice_bench::e2e::official_sdk(&server.url)?;
    let start = Instant::now();
    let deadline = start + Duration::from_secs(opts.seconds);
    let timelines: Vec<Arc<Timeline>> = (0..streams)
        .map(|_| Arc::new(Timeline::new(start, capacity(streams))))
        .collect();
    let (cpu0, server_cpu0) = (cpu_seconds(me())?, cpu_seconds(server.pid())?);
    let mut tasks = Vec::new();
    for (s, tl) in timelines.iter().enumerate() {
        let (table, tl) = (table.clone(), tl.clone());
        let max = opts.max_inflight;
        tasks.push(match sdk {
            Sdk::Sluice => {
                tokio::spawn(send_sluice(server.url.clone(), table, s, deadline, tl, max))
            }
            Sdk::Official => {
                tokio::spawn(send_official(official.clone(), table, s, deadline, tl, max))
            }
        });
    }
    for t in tasks {
        t.await??;
    }
    let producer_cpu = cpu_seconds(me())? - cpu0;
    let server_cpu = cpu_seconds(server.pid())? - server_cpu0;
    let window_ns = opts.seconds * 1_000_000_000;
    let record_bytes = record(0, &padding()).len() as u64;
    let (mut records, mut ack_ms) = (0u64, Samples::new());
    for tl in &timelines {
        for (_, sent, acked) in tl.acked_records() {
            if acked <= window_ns {
                records += 1;
            }
            ack_ms.push(acked.saturating_sub(sent) as f64 / 1e6);
        }
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Outcome {
        records,
        bytes: records * record_bytes,
        producer_cpu,
        server_cpu,
        ack_ms,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let opts = Options::parse();
    sluice_bench::server::require_binary(&opts.sluice)?;
    let mut table = Table::new(&[
        "SDK",
        "streams",
        "records/s",
        "MB/s",
        "producer CPU s/GB",
        "pod CPU s/GB",
        "ack p50 ms",
        "ack p99 ms",
        "producer CPU/GB vs official",
    ]);
    for &streams in &opts.streams {
        let mut per_gb = [0.0f64; 2];
        let mut rows = Vec::new();
        for (i, sdk) in [Sdk::Official, Sdk::Sluice].into_iter().enumerate() {
            let mut o = run_scenario(&opts, sdk, streams).await?;
            let gb = (o.bytes as f64 / 1e9).max(1e-12);
            let secs = opts.seconds as f64;
            per_gb[i] = o.producer_cpu / gb;
            rows.push(vec![
                sdk.name().to_string(),
                streams.to_string(),
                format!("{:.0}", o.records as f64 / secs),
                format!("{:.1}", o.bytes as f64 / 1e6 / secs),
                format!("{:.1}", o.producer_cpu / gb),
                format!("{:.1}", o.server_cpu / gb),
                format!("{:.1}", o.ack_ms.median()),
                format!("{:.1}", o.ack_ms.quantile(0.99)),
            ]);
        }
        let ratio = per_gb[1] / per_gb[0].max(1e-12);
        for (i, mut row) in rows.into_iter().enumerate() {
            row.push(if i == 1 {
                format!("{ratio:.2}×")
            } else {
                "1×".into()
            });
            table.row(row);
        }
    }
    println!("{}", table.render());
    Ok(())
}
