//! OTLP benchmark: spans per server core into a real `sluice serve` (a fresh one per
//! scenario, a traces table made by `--otlp traces`), side by side in one run:
//! - the Rust load generator over gRPC (`TraceService/Export`) and OTLP/HTTP protobuf,
//!   `--clients` connections, `--spans-per-request` spans per export (512, the SDKs'
//!   batch size), closed loop;
//! - the official OpenTelemetry Python SDK's gRPC and HTTP exporters
//!   (`bench/python/otlp_exporter_load.py`, `--python-processes` processes);
//! - the peer: the Zerobus stream path (official Rust SDK, protobuf telemetry rows, the
//!   REST benchmark's gRPC load).
//!
//! For every row: items/s, server CPU (user + system from /proc/<pid>/stat), items per
//! server CPU-second (= items/s per fully used core), server CPU seconds per GB of request
//! bytes, and the ratio to the peer.
//!
//! Run: `cargo build --release -p sluice-server && cargo run --release -p sluice-bench
//! --features otlpbench --bin otlp-bench -- --seconds 10`.

#[path = "../rest_bench/grpc_load.rs"]
mod grpc_load;
mod load;
// The peer's gRPC load sends JSON rows through it (not used here: proto rows).
#[path = "../rest_bench/rest_load.rs"]
#[allow(dead_code)]
mod rest_load;
mod spans;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use load::Transport;
use sluice_bench::e2e::{padding, TARGET_RECORD_BYTES};
use sluice_bench::server::Server;
use sluice_bench::stats::Samples;
use sluice_bench::table::Table;

/// OTLP spans per server core, Rust and Python exporters, beside the Zerobus stream path.
#[derive(clap::Parser)]
struct Options {
    /// The `sluice` binary to benchmark.
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Seconds per scenario.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Concurrent connections of the Rust load generator.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Spans per export request of the Rust load generator.
    #[arg(long, default_value_t = 512)]
    spans_per_request: usize,
    /// The Python interpreter with the OpenTelemetry SDK (empty: skip the Python rows).
    #[arg(long, default_value = ".venv/bin/python")]
    python: String,
    /// Python exporter processes.
    #[arg(long, default_value_t = 2)]
    python_processes: usize,
    /// Zerobus gRPC streams of the peer row.
    #[arg(long, default_value_t = 16)]
    grpc_streams: usize,
    /// The server's `--flush-interval`.
    #[arg(long, default_value = "1s")]
    flush_interval: String,
}

/// One row of the table.
struct Row {
    path: String,
    items: u64,
    bytes: Option<u64>,
    seconds: f64,
    latency_ms: Option<Samples>,
    cpu_s: f64,
}

impl Row {
    fn per_cpu_s(&self) -> f64 {
        self.items as f64 / self.cpu_s.max(1e-9)
    }
}

const TABLE: &str = "bench.otlp.spans";

/// A fresh server with the traces table (made by the CLI's `--otlp traces`).
async fn fresh_server(opts: &Options, name: &str) -> Result<(Server, PathBuf)> {
    let dir = std::env::temp_dir().join(format!("sluice-otlp-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let server = Server::start(&opts.sluice, &dir, &opts.flush_interval, &[])?;
    server.wait_ready().await?;
    let out = Command::new(&opts.sluice)
        .args([
            "table",
            "create",
            TABLE,
            "--otlp",
            "traces",
            "--server",
            &server.url,
        ])
        .env("SLUICE_CLIENT_ID", sluice_bench::server::CLIENT_ID)
        .env("SLUICE_CLIENT_SECRET", sluice_bench::server::CLIENT_SECRET)
        .output()?;
    if !out.status.success() {
        bail!("table create: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok((server, dir))
}

async fn rust_row(opts: &Options, transport: Transport) -> Result<Row> {
    let name = match transport {
        Transport::Grpc => "grpc",
        Transport::Http => "http",
    };
    let (server, dir) = fresh_server(opts, name).await?;
    let token = server.token().await?;
    let url = server.url.clone();
    let load = load::run(
        transport,
        &url,
        &token,
        TABLE,
        opts.clients,
        opts.spans_per_request,
        Duration::from_secs(opts.seconds),
    );
    let (out, seconds, cpu_s) = server.measure(&dir, load).await?;
    let seconds = seconds.max(opts.seconds as f64);
    Ok(Row {
        path: format!(
            "OTLP {}, Rust generator, {} connections × {} spans",
            if transport == Transport::Grpc {
                "gRPC"
            } else {
                "HTTP/protobuf"
            },
            opts.clients,
            opts.spans_per_request
        ),
        items: out.spans,
        bytes: Some(out.bytes),
        seconds,
        latency_ms: Some(out.latency_ms),
        cpu_s,
    })
}

async fn python_row(opts: &Options, protocol: &str) -> Result<Row> {
    let (server, dir) = fresh_server(opts, &format!("py{protocol}")).await?;
    let token = server.token().await?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/otlp_exporter_load.py");
    let grpc_endpoint = server.url.trim_start_matches("http://").to_string();
    let python = opts.python.clone();
    let args: Vec<String> = vec![
        script.into(),
        "--protocol".into(),
        protocol.into(),
        "--grpc-endpoint".into(),
        grpc_endpoint,
        "--http-endpoint".into(),
        server.url.clone(),
        "--token".into(),
        token,
        "--table".into(),
        TABLE.into(),
        "--seconds".into(),
        opts.seconds.to_string(),
        "--processes".into(),
        opts.python_processes.to_string(),
    ];
    let load = async {
        Ok(tokio::task::spawn_blocking(move || Command::new(python).args(args).output()).await??)
    };
    let (out, _, cpu_s) = server.measure(&dir, load).await?;
    if !out.status.success() {
        bail!("python exporter: {}", String::from_utf8_lossy(&out.stderr));
    }
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("python output {:?}", String::from_utf8_lossy(&out.stdout)))?;
    let failed = answer["failed"].as_u64().unwrap_or(0);
    if failed > 0 {
        bail!("python exporter: {failed} spans not exported");
    }
    Ok(Row {
        path: format!(
            "OTLP {}, Python SDK exporter, {} processes",
            if protocol == "grpc" {
                "gRPC"
            } else {
                "HTTP/protobuf"
            },
            opts.python_processes
        ),
        items: answer["spans"].as_u64().context("spans")?,
        bytes: None,
        seconds: answer["seconds"].as_f64().context("seconds")?,
        latency_ms: None,
        cpu_s,
    })
}

async fn peer_row(opts: &Options) -> Result<Row> {
    let dir = std::env::temp_dir().join(format!("sluice-otlp-bench-{}-peer", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let server = Server::start(&opts.sluice, &dir, &opts.flush_interval, &[])?;
    server.wait_ready().await?;
    let table = "bench.otlp.peer";
    server
        .create_table(table, sluice_bench::e2e::telemetry_columns())
        .await?;
    let url = server.url.clone();
    let load = grpc_load::run(
        &url,
        table,
        opts.grpc_streams,
        Duration::from_secs(opts.seconds),
        1000,
        Arc::new(padding()),
        false,
    );
    let (records, seconds, cpu_s) = server.measure(&dir, load).await?;
    Ok(Row {
        path: format!(
            "peer: Zerobus gRPC, {} SDK streams, ~{TARGET_RECORD_BYTES}-byte proto rows",
            opts.grpc_streams
        ),
        items: records,
        bytes: Some(records * TARGET_RECORD_BYTES as u64),
        seconds,
        latency_ms: None,
        cpu_s,
    })
}

fn cells(row: &mut Row, peer: f64) -> Vec<String> {
    let (p50, p99) = match &mut row.latency_ms {
        Some(l) if !l.is_empty() => (
            format!("{:.1}", l.median()),
            format!("{:.1}", l.quantile(0.99)),
        ),
        _ => ("-".into(), "-".into()),
    };
    vec![
        row.path.clone(),
        format!("{:.0}", row.items as f64 / row.seconds),
        p50,
        p99,
        format!("{:.2}", row.cpu_s),
        format!("{:.0}", row.per_cpu_s()),
        row.bytes.map_or("-".into(), |b| {
            format!("{:.0}", b as f64 / row.items.max(1) as f64)
        }),
        row.bytes.map_or("-".into(), |b| {
            format!("{:.1}", row.cpu_s / (b as f64 / 1e9))
        }),
        format!("{:.2}", row.per_cpu_s() / peer),
    ]
}

#[tokio::main]
async fn main() -> Result<()> {
    let opts = Options::parse();
    sluice_bench::server::require_binary(&opts.sluice)?;
    println!(
        "Sluice OTLP benchmark: {} s per scenario, flush interval {}, {} cores",
        opts.seconds,
        opts.flush_interval,
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    let mut rows = vec![
        rust_row(&opts, Transport::Grpc).await?,
        rust_row(&opts, Transport::Http).await?,
    ];
    if !opts.python.is_empty() {
        rows.push(python_row(&opts, "grpc").await?);
        rows.push(python_row(&opts, "http").await?);
    }
    let mut peer = peer_row(&opts).await?;
    let peer_rate = peer.per_cpu_s();
    let mut table = Table::new(&[
        "path",
        "items/s",
        "p50 ms",
        "p99 ms",
        "server CPU s",
        "items per server CPU-s",
        "bytes/item",
        "server CPU s/GB",
        "÷ peer (per CPU-s)",
    ]);
    for row in &mut rows {
        table.row(cells(row, peer_rate));
    }
    table.row(cells(&mut peer, peer_rate));
    print!("{}", table.render());
    Ok(())
}
