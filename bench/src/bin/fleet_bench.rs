//! Fleet benchmark: many small streams on one pod, as an IoT fleet opens them. Two phases,
//! each on a fresh `sluice serve`:
//!
//! - **active**: `--streams N` streams (default 5 000), each sending `--rate R` ~200-byte
//!   protobuf records per second (default 10) on a fixed schedule (open loop: a record's ack
//!   latency runs from the time it was due, so a producer or pod falling behind shows) for
//!   `--seconds S`. Reported: records/s acked, ack p50/p99/p999, the pod's CPU (cores, from
//!   `/proc/PID/stat`; the producer's, this process, beside it) and its resident memory (`VmRSS` of `/proc/PID/status`) before the
//!   streams open, with them open, and at its peak, and RSS per open stream.
//! - **idle**: `--idle M` streams (default 50 000) opened, each sends one record and waits for
//!   its ack, then nothing for 5 s. Reported: pod RSS and the bytes each idle stream costs,
//!   and the pod's CPU while idle.
//!
//! The producer is `sluice-sdk` (one client, so one HTTP/2 connection, per 1 000 streams: the
//! pod's default `--h2-max-concurrent-streams` is 1 024), in this process. The pod runs with
//! `--max-streams` and `--max-streams-per-principal` raised to fit the fleet.
//!
//! Run: `cargo run --release -p sluice-bench --features sdkbench --bin fleet-bench` after
//! `cargo build --release -p sluice-server`. A debug build only smoke-tests it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Parser;
use sluice_bench::e2e::{descriptor, padding, record, AckTimes, Timeline, ID_STRIDE};
use sluice_bench::procstat::{cpu_seconds, rss_bytes};
use sluice_bench::server::Server;
use sluice_bench::stats::Samples;
use sluice_bench::table::Table;

/// Fleet benchmark: thousands of slow streams on one pod (ack latency, RSS per stream).
#[derive(clap::Parser)]
struct Options {
    /// The `sluice` binary to push to.
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Active streams.
    #[arg(long, default_value_t = 5_000)]
    streams: usize,
    /// Records per second of each active stream.
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
    /// Seconds of sending.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Idle streams of the second phase (0 = skip it).
    #[arg(long, default_value_t = 50_000)]
    idle: usize,
    /// The server's `--flush-interval`.
    #[arg(long, default_value = "1s")]
    flush_interval: String,
}

/// Streams per client (per HTTP/2 connection).
const STREAMS_PER_CLIENT: usize = 1_000;
/// Streams opened at once.
const OPEN_CONCURRENCY: usize = 256;

/// Samples a pod's RSS every 100 ms until stopped; returns the peak.
fn watch_peak_rss(pid: u32, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut peak = 0;
        while !stop.load(Ordering::Relaxed) {
            peak = peak.max(rss_bytes(pid).unwrap_or(0));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        peak
    })
}

async fn start_pod(opts: &Options, name: &str, streams: usize) -> Result<(Server, PathBuf)> {
    let dir = std::env::temp_dir().join(format!("sluice-fleet-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let limit = (streams + 16).to_string();
    let extra = [
        "--max-streams".to_string(),
        limit.clone(),
        "--max-streams-per-principal".to_string(),
        limit,
    ];
    let server = Server::start(&opts.sluice, &dir, &opts.flush_interval, &extra)?;
    server.wait_ready().await?;
    server
        .create_table("bench.fleet.t", sluice_bench::e2e::telemetry_columns())
        .await?;
    Ok((server, dir))
}

fn clients(url: &str, streams: usize) -> Result<Vec<sluice_sdk::Client>> {
    (0..streams.div_ceil(STREAMS_PER_CLIENT).max(1))
        .map(|_| {
            sluice_sdk::Client::builder(url)
                .credentials(
                    sluice_bench::e2e::CLIENT_ID,
                    sluice_bench::e2e::CLIENT_SECRET,
                )
                .build()
                .map_err(Into::into)
        })
        .collect()
}

/// Opens `n` streams (`OPEN_CONCURRENCY` at a time), stream `s` acking into `timelines[s]`.
async fn open_streams(
    clients: &[sluice_sdk::Client],
    timelines: &[Arc<Timeline>],
) -> Result<Vec<sluice_sdk::Stream>> {
    let mut streams = Vec::with_capacity(timelines.len());
    for chunk in timelines.chunks(OPEN_CONCURRENCY) {
        let base = streams.len();
        let opening = chunk.iter().enumerate().map(|(i, tl)| {
            let client = &clients[(base + i) / STREAMS_PER_CLIENT];
            let times = AckTimes::new(tl.clone());
            client
                .stream("bench.fleet.t")
                .proto(&descriptor())
                .max_inflight_records(64)
                .on_ack(move |offset| {
                    databricks_zerobus_ingest_sdk::AckCallback::on_ack(&times, offset)
                })
                .open()
        });
        for s in futures::future::join_all(opening).await {
            streams.push(s?);
        }
    }
    Ok(streams)
}

struct Active {
    records: u64,
    ack_ms: Samples,
    pod_cores: f64,
    producer_cores: f64,
    rss_before: u64,
    rss_open: u64,
    rss_peak: u64,
}

async fn active(opts: &Options) -> Result<Active> {
    let (server, dir) = start_pod(opts, "active", opts.streams).await?;
    let pid = server.pid();
    let rss_before = rss_bytes(pid)?;
    let stop = Arc::new(AtomicBool::new(false));
    let peak = watch_peak_rss(pid, stop.clone());
    let capacity = (opts.rate * opts.seconds as f64) as usize + 16;
    let origin = Instant::now();
    let timelines: Vec<Arc<Timeline>> = (0..opts.streams)
        .map(|_| Arc::new(Timeline::new(origin, capacity)))
        .collect();
    let clients = clients(&server.url, opts.streams)?;
    let streams = open_streams(&clients, &timelines).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_open = rss_bytes(pid)?;
    let start_ns = origin.elapsed().as_nanos() as u64;
    let (cpu0, producer0) = (cpu_seconds(pid)?, cpu_seconds(std::process::id())?);
    let period = 1e9 / opts.rate;
    let sent = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (s, (stream, tl)) in streams
        .into_iter()
        .zip(timelines.iter().cloned())
        .enumerate()
    {
        let phase = period * s as f64 / opts.streams as f64;
        let (seconds, sent) = (opts.seconds, sent.clone());
        tasks.push(tokio::spawn(async move {
            let pad = padding();
            let mut i = 0usize;
            loop {
                let due = start_ns + (phase + period * i as f64) as u64;
                if due >= start_ns + seconds * 1_000_000_000 || i + 1 >= capacity {
                    break;
                }
                tokio::time::sleep_until((origin + Duration::from_nanos(due)).into()).await;
                let ack = stream
                    .send(record(s as i64 * ID_STRIDE + i as i64, &pad))
                    .await?;
                tl.mark_sent_at(ack.offset() as usize, due);
                sent.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
            stream.close().await?;
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let pod_cores = (cpu_seconds(pid)? - cpu0) / opts.seconds as f64;
    let producer_cores = (cpu_seconds(std::process::id())? - producer0) / opts.seconds as f64;
    stop.store(true, Ordering::Relaxed);
    let rss_peak = peak.await?;
    let (mut records, mut ack_ms) = (0u64, Samples::new());
    for tl in &timelines {
        for (_, due, acked) in tl.acked_records() {
            records += 1;
            ack_ms.push(acked.saturating_sub(due) as f64 / 1e6);
        }
    }
    let expected = sent.load(Ordering::Relaxed);
    if records != expected {
        anyhow::bail!("{expected} records sent, {records} acked");
    }
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
    Ok(Active {
        records,
        ack_ms,
        pod_cores,
        producer_cores,
        rss_before,
        rss_open,
        rss_peak,
    })
}

struct Idle {
    rss_before: u64,
    rss_idle: u64,
    idle_cores: f64,
}

async fn idle(opts: &Options) -> Result<Idle> {
    let (server, dir) = start_pod(opts, "idle", opts.idle).await?;
    let pid = server.pid();
    let rss_before = rss_bytes(pid)?;
    let origin = Instant::now();
    let timelines: Vec<Arc<Timeline>> = (0..opts.idle)
        .map(|_| Arc::new(Timeline::new(origin, 2)))
        .collect();
    let clients = clients(&server.url, opts.idle)?;
    let streams = open_streams(&clients, &timelines).await?;
    let pad = padding();
    for chunk in streams.chunks(OPEN_CONCURRENCY) {
        let mut acks = Vec::new();
        for (i, s) in chunk.iter().enumerate() {
            acks.push(s.send(record(i as i64, &pad)).await?);
        }
        for ack in acks {
            ack.await?;
        }
    }
    let cpu0 = cpu_seconds(pid)?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle_cores = (cpu_seconds(pid)? - cpu0) / 5.0;
    let rss_idle = rss_bytes(pid)?;
    for s in streams {
        s.close().await?;
    }
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
    Ok(Idle {
        rss_before,
        rss_idle,
        idle_cores,
    })
}

fn mib(b: u64) -> String {
    format!("{:.0}", b as f64 / (1 << 20) as f64)
}

#[tokio::main]
async fn main() -> Result<()> {
    let opts = Options::parse();
    sluice_bench::server::require_binary(&opts.sluice)?;
    println!(
        "Sluice fleet benchmark: sluice-sdk streams of ~200-byte protobuf records, open loop, \
         flush interval {}, {}",
        opts.flush_interval,
        sluice_bench::host::describe()
    );
    let mut a = active(&opts).await?;
    let mut table = Table::new(&[
        "streams",
        "rate each",
        "records/s",
        "ack p50 ms",
        "ack p99 ms",
        "ack p999 ms",
        "pod cores",
        "producer cores",
        "pod RSS MiB: start",
        "open",
        "peak",
        "RSS KiB per stream",
    ]);
    table.row(vec![
        opts.streams.to_string(),
        format!("{}/s", opts.rate),
        format!("{:.0}", a.records as f64 / opts.seconds as f64),
        format!("{:.1}", a.ack_ms.median()),
        format!("{:.1}", a.ack_ms.quantile(0.99)),
        format!("{:.1}", a.ack_ms.quantile(0.999)),
        format!("{:.2}", a.pod_cores),
        format!("{:.2}", a.producer_cores),
        mib(a.rss_before),
        mib(a.rss_open),
        mib(a.rss_peak),
        format!(
            "{:.1}",
            a.rss_peak.saturating_sub(a.rss_before) as f64 / 1024.0 / opts.streams as f64
        ),
    ]);
    print!("{}", table.render());
    if opts.idle > 0 {
        let i = idle(&opts).await?;
        let mut table = Table::new(&[
            "idle streams",
            "pod RSS MiB: start",
            "idle",
            "bytes per idle stream",
            "pod cores while idle",
        ]);
        table.row(vec![
            opts.idle.to_string(),
            mib(i.rss_before),
            mib(i.rss_idle),
            format!(
                "{:.0}",
                i.rss_idle.saturating_sub(i.rss_before) as f64 / opts.idle as f64
            ),
            format!("{:.3}", i.idle_cores),
        ]);
        print!("{}", table.render());
    }
    Ok(())
}
