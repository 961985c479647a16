//! REST benchmark: REST insert beside the gRPC stream path, side by side in one run, on
//! the same ~200-byte telemetry rows into a real `sluice serve` (a fresh one per
//! scenario). REST: `--clients` (64) concurrent clients, closed loop, for each
//! `--sizes` records per request (1, 10, 100, 1000): requests/s, records/s, p50/p99
//! latency; then the 100-record size again open loop at half of its saturation rate.
//! gRPC: `--grpc-streams` official-SDK streams, once with JSON records (the same objects
//! REST sends) and once with protobuf (the stream path's usual format). For every row the
//! server's CPU (user + system from /proc/<pid>/stat) per record and records per server
//! CPU-second; the goal lines compare REST with 100-record requests to gRPC (proto, and
//! JSON for a like-for-like parse).
//!
//! Run: `cargo build --release -p sluice-server && cargo run --release -p sluice-bench
//! --features e2e --bin rest-bench -- --seconds 10`.

mod grpc_load;
mod rest_load;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Parser;
use sluice_bench::e2e::{padding, TARGET_RECORD_BYTES};
use sluice_bench::server::Server;
use sluice_bench::stats::Samples;
use sluice_bench::table::Table;

/// REST insert vs gRPC streams: throughput, latency, server CPU per record.
#[derive(clap::Parser)]
struct Options {
    /// The `sluice` binary to benchmark.
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Seconds per scenario.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Concurrent REST clients.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Records per REST request, one scenario each.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,1000")]
    sizes: Vec<usize>,
    /// gRPC streams of the comparison row.
    #[arg(long, default_value_t = 16)]
    grpc_streams: usize,
    /// Maximum in-flight records per gRPC stream.
    #[arg(long, default_value_t = 1000)]
    max_inflight: usize,
    /// The server's `--flush-interval`.
    #[arg(long, default_value = "1s")]
    flush_interval: String,
}

/// One row of the table.
struct Row {
    path: String,
    per_request: String,
    requests: Option<u64>,
    records: u64,
    seconds: f64,
    latency_ms: Option<Samples>,
    cpu_s: f64,
}

impl Row {
    fn records_per_cpu_s(&self) -> f64 {
        self.records as f64 / self.cpu_s.max(1e-9)
    }
}

/// A fresh server with the telemetry table; returns it, its data dir and the table name.
async fn fresh_server(opts: &Options, name: &str) -> Result<(Server, PathBuf, String)> {
    let dir = std::env::temp_dir().join(format!("sluice-rest-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let server = Server::start(&opts.sluice, &dir, &opts.flush_interval, &[])?;
    server.wait_ready().await?;
    let table = format!("bench.rest.{name}");
    server
        .create_table(&table, sluice_bench::e2e::telemetry_columns())
        .await?;
    Ok((server, dir, table))
}

async fn rest_row(opts: &Options, per_request: usize, rate: Option<f64>) -> Result<Row> {
    let name = match rate {
        Some(_) => format!("half{per_request}"),
        None => format!("r{per_request}"),
    };
    let (server, dir, table) = fresh_server(opts, &name).await?;
    let url = format!("{}/zerobus/v1/tables/{table}/insert", server.url);
    let token = server.token().await?;
    let window = Duration::from_secs(opts.seconds);
    let load = rest_load::run(
        url,
        token,
        opts.clients,
        per_request,
        window,
        rate,
        Arc::new(padding()),
    );
    let (out, seconds, cpu_s) = server.measure(&dir, load).await?;
    let seconds = seconds.max(opts.seconds as f64);
    Ok(Row {
        path: match rate {
            Some(r) => format!("REST, open loop {r:.0} req/s"),
            None => "REST".into(),
        },
        per_request: per_request.to_string(),
        requests: Some(out.requests),
        records: out.records,
        seconds,
        latency_ms: Some(out.latency_ms),
        cpu_s,
    })
}

async fn grpc_row(opts: &Options, json: bool) -> Result<Row> {
    let name = if json { "grpcjson" } else { "grpc" };
    let (server, dir, table) = fresh_server(opts, name).await?;
    let url = server.url.clone();
    let load = grpc_load::run(
        &url,
        &table,
        opts.grpc_streams,
        Duration::from_secs(opts.seconds),
        opts.max_inflight,
        Arc::new(padding()),
        json,
    );
    let (records, seconds, cpu_s) = server.measure(&dir, load).await?;
    Ok(Row {
        path: format!(
            "gRPC, {} SDK streams ({})",
            opts.grpc_streams,
            if json { "JSON" } else { "proto" }
        ),
        per_request: "1 per ingest call".into(),
        requests: None,
        records,
        seconds,
        latency_ms: None,
        cpu_s,
    })
}

fn cells(row: &mut Row) -> Vec<String> {
    let (p50, p99) = match &mut row.latency_ms {
        Some(l) => (
            format!("{:.1}", l.median()),
            format!("{:.1}", l.quantile(0.99)),
        ),
        None => ("-".into(), "-".into()),
    };
    vec![
        row.path.clone(),
        row.per_request.clone(),
        row.requests
            .map_or("-".into(), |r| format!("{:.0}", r as f64 / row.seconds)),
        format!("{:.0}", row.records as f64 / row.seconds),
        p50,
        p99,
        format!("{:.2}", row.cpu_s),
        format!("{:.1}", row.cpu_s * 1e6 / row.records.max(1) as f64),
        format!("{:.0}", row.records_per_cpu_s()),
    ]
}

#[tokio::main]
async fn main() -> Result<()> {
    let opts = Options::parse();
    if !opts.sluice.exists() {
        bail!(
            "{} not found: build it with `cargo build --release -p sluice-server`",
            opts.sluice.display()
        );
    }
    println!(
        "Sluice REST benchmark: ~{TARGET_RECORD_BYTES}-byte telemetry rows, {} s per scenario, \
         {} REST clients, flush interval {}, {} cores",
        opts.seconds,
        opts.clients,
        opts.flush_interval,
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    let mut rows = Vec::new();
    for &size in &opts.sizes {
        rows.push(rest_row(&opts, size, None).await?);
    }
    let saturated_100 = rows
        .iter()
        .find(|r| r.per_request == "100")
        .and_then(|r| r.requests.map(|n| n as f64 / r.seconds));
    if let Some(rate) = saturated_100 {
        rows.push(rest_row(&opts, 100, Some(rate / 2.0)).await?);
    }
    let grpc_json = grpc_row(&opts, true).await?;
    let grpc_proto = grpc_row(&opts, false).await?;
    let (json_rate, proto_rate) = (
        grpc_json.records_per_cpu_s(),
        grpc_proto.records_per_cpu_s(),
    );
    rows.push(grpc_json);
    rows.push(grpc_proto);
    let mut table = Table::new(&[
        "path",
        "records/request",
        "requests/s",
        "records/s",
        "p50 ms",
        "p99 ms",
        "server CPU s",
        "CPU µs/record",
        "records per CPU-s",
    ]);
    for row in &mut rows {
        table.row(cells(row));
    }
    print!("{}", table.render());
    if let Some(rest) = rows
        .iter()
        .find(|r| r.per_request == "100" && r.path == "REST")
    {
        let rest = rest.records_per_cpu_s();
        let ratio = rest / proto_rate;
        println!(
            "goal 1: REST with 100-record requests at {:.0} % of the gRPC path's records per \
             server CPU-second (proto streams; goal ≥ 50 %): {}; {:.0} % of gRPC JSON streams",
            ratio * 100.0,
            if ratio >= 0.5 {
                "reached"
            } else {
                "NOT reached"
            },
            rest / json_rate * 100.0
        );
    }
    if let Some(half) = rows.iter_mut().find(|r| r.path.contains("open loop")) {
        let p99 = half
            .latency_ms
            .as_mut()
            .map_or(f64::NAN, |l| l.quantile(0.99));
        println!(
            "goal 2: p99 at half of saturation {p99:.1} ms (goal ≤ 20 ms): {}",
            if p99 <= 20.0 {
                "reached"
            } else {
                "NOT reached"
            }
        );
    }
    Ok(())
}
