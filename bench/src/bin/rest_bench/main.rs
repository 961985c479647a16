//! REST benchmark: REST insert beside the gRPC stream path, side by side in one run, on
//! the same ~200-byte telemetry rows into a real `sluice serve` (a fresh one per
//! scenario). REST: `--clients` (64) concurrent clients, closed loop, for each
//! `--sizes` records per request (1, 10, 100, 1000): requests/s, records/s, p50/p99
//! latency; then the 100-record size again open loop at half of its saturation rate.
//! gRPC: `--grpc-streams` official-SDK streams, once with JSON records (the same objects
//! REST sends) and once with protobuf (the stream path's usual format). For every row the
//! server's CPU (user + system from /proc/<pid>/stat) per record and records per server
//! CPU-second; the goal lines compare REST with 100-record requests to gRPC (proto, and
//! JSON for a like-for-like parse). `--keys unkeyed,keyed` adds rows whose every request
//! carries a fresh `Idempotency-Key`; `--cluster` runs each scenario against a one-pod
//! cluster (its own etcd, the pod with `--join`), where a keyed request also claims and
//! settles its key in etcd, and adds etcd's CPU beside the pod's. `--mqtt-connections N`
//! adds MQTT rows (the pod with `--mqtt-listen`): N MQTT 5 connections publishing one record
//! per QoS 1 PUBLISH, closed loop, then open loop at half of that rate, with PUBACK p50/p99
//! (`mqtt_load`), and where the open loop's PUBACKs over p99 were sent (a few stalls or spread
//! out). Server CPU per GB counts ~TARGET_RECORD_BYTES per record.
//!
//! Run: `cargo build --release -p sluice-server && cargo run --release -p sluice-bench
//! --features e2e --bin rest-bench -- --seconds 10`.

mod grpc_load;
mod mqtt_load;
mod rest_load;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Parser;
use sluice_bench::e2e::{padding, TARGET_RECORD_BYTES};
use sluice_bench::procstat;
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
    /// REST rows without and/or with an `Idempotency-Key` per request.
    #[arg(long, value_delimiter = ',', default_value = "unkeyed")]
    keys: Vec<Keys>,
    /// Run every scenario against a one-pod cluster (etcd from PATH + `--join`).
    #[arg(long)]
    cluster: bool,
    /// Skip the gRPC rows (and the goal lines, which compare with them).
    #[arg(long)]
    no_grpc: bool,
    /// MQTT connections of the MQTT rows (0: no MQTT rows).
    #[arg(long, default_value_t = 0)]
    mqtt_connections: usize,
}

/// Whether REST requests carry an `Idempotency-Key`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Keys {
    Unkeyed,
    Keyed,
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
    /// etcd's CPU over the window (cluster runs).
    etcd_cpu_s: Option<f64>,
}

impl Row {
    fn records_per_cpu_s(&self) -> f64 {
        self.records as f64 / self.cpu_s.max(1e-9)
    }
}

/// A fresh server (with its etcd under `--cluster`) and the telemetry table.
struct Fresh {
    server: Server,
    etcd: Option<sluice_bench::e2e::Process>,
    dir: PathBuf,
    table: String,
}

impl Fresh {
    fn etcd_cpu(&self) -> Result<Option<f64>> {
        self.etcd
            .as_ref()
            .map(|e| procstat::cpu_seconds(e.child.id()))
            .transpose()
    }
}

async fn fresh_server(opts: &Options, name: &str) -> Result<Fresh> {
    fresh_server_with(opts, name, Vec::new()).await
}

async fn fresh_server_with(opts: &Options, name: &str, more: Vec<String>) -> Result<Fresh> {
    let dir = std::env::temp_dir().join(format!("sluice-rest-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let (etcd, mut extra) = if opts.cluster {
        let (etcd, join) = sluice_bench::e2e::start_etcd(&dir, "bench").await?;
        let kek = sluice_bench::e2e::kek_file(&dir)?;
        let extra = vec![
            "--join".to_string(),
            join,
            "--pod-id".into(),
            "bench-pod".into(),
            "--secrets-key-file".into(),
            kek.display().to_string(),
        ];
        (Some(etcd), extra)
    } else {
        (None, Vec::new())
    };
    extra.extend(more);
    let pod_dir = dir.join("pod");
    std::fs::create_dir_all(&pod_dir)?;
    let server = Server::start(&opts.sluice, &pod_dir, &opts.flush_interval, &extra)?;
    server.wait_ready().await?;
    let table = format!("bench.rest.{name}");
    server
        .create_table(&table, sluice_bench::e2e::telemetry_columns())
        .await?;
    Ok(Fresh {
        server,
        etcd,
        dir,
        table,
    })
}

async fn rest_row(
    opts: &Options,
    per_request: usize,
    rate: Option<f64>,
    keys: Keys,
) -> Result<Row> {
    let keyed = keys == Keys::Keyed;
    let name = match rate {
        Some(_) => format!("half{per_request}"),
        None => format!("r{per_request}"),
    } + if keyed { "k" } else { "" };
    let fresh = fresh_server(opts, &name).await?;
    let server = &fresh.server;
    let url = format!("{}/zerobus/v1/tables/{}/insert", server.url, fresh.table);
    let token = server.token().await?;
    let window = Duration::from_secs(opts.seconds);
    let cpu_before = procstat::cpu_seconds(server.pid())?;
    let etcd_before = fresh.etcd_cpu()?;
    let started = Instant::now();
    let out = rest_load::run(
        url,
        token,
        rest_load::Shape {
            clients: opts.clients,
            per_request,
            window,
            rate,
            keyed,
        },
        Arc::new(padding()),
    )
    .await?;
    let seconds = started.elapsed().as_secs_f64().max(opts.seconds as f64);
    let cpu_s = procstat::cpu_seconds(server.pid())? - cpu_before;
    let etcd_cpu_s = fresh.etcd_cpu()?.zip(etcd_before).map(|(a, b)| a - b);
    let dir = fresh.dir.clone();
    drop(fresh);
    let _ = std::fs::remove_dir_all(&dir);
    let mut path = match rate {
        Some(r) => format!("REST, open loop {r:.0} req/s"),
        None => "REST".into(),
    };
    if keyed {
        path.push_str(", keyed");
    }
    Ok(Row {
        path,
        per_request: per_request.to_string(),
        requests: Some(out.requests),
        records: out.records,
        seconds,
        latency_ms: Some(out.latency_ms),
        cpu_s,
        etcd_cpu_s,
    })
}

/// An MQTT row and its (send time s, PUBACK latency ms) timeline.
async fn mqtt_row(opts: &Options, rate: Option<f64>) -> Result<(Row, Vec<(f64, f64)>)> {
    let port = sluice_bench::e2e::free_port()?;
    let name = if rate.is_some() { "mqtthalf" } else { "mqtt" };
    let listen = vec!["--mqtt-listen".to_string(), format!("127.0.0.1:{port}")];
    let fresh = fresh_server_with(opts, name, listen).await?;
    let server = &fresh.server;
    let cpu_before = procstat::cpu_seconds(server.pid())?;
    let started = Instant::now();
    let out = mqtt_load::run(
        mqtt_load::Shape {
            port,
            table: fresh.table.clone(),
            connections: opts.mqtt_connections,
            window: Duration::from_secs(opts.seconds),
            rate,
        },
        Arc::new(padding()),
    )
    .await?;
    let seconds = started.elapsed().as_secs_f64().max(opts.seconds as f64);
    let cpu_s = procstat::cpu_seconds(server.pid())? - cpu_before;
    let dir = fresh.dir.clone();
    drop(fresh);
    let _ = std::fs::remove_dir_all(&dir);
    let path = match rate {
        Some(r) => format!(
            "MQTT QoS 1, {} connections, open loop {r:.0}/s",
            opts.mqtt_connections
        ),
        None => format!("MQTT QoS 1, {} connections", opts.mqtt_connections),
    };
    let row = Row {
        path,
        per_request: "1 per PUBLISH".into(),
        requests: Some(out.records),
        records: out.records,
        seconds,
        latency_ms: Some(out.latency_ms),
        cpu_s,
        etcd_cpu_s: None,
    };
    Ok((row, out.timeline))
}

/// Prints where the samples over `p99_ms` were sent: in a few stalls (each holding every
/// connection's publish in flight) or spread out.
fn print_stalls(timeline: &[(f64, f64)], p99_ms: f64) {
    let found = sluice_bench::stats::episodes(timeline, p99_ms, 0.05);
    let over: usize = found.iter().map(|e| e.samples).sum();
    let largest: Vec<String> = found
        .iter()
        .take(4)
        .map(|e| {
            format!(
                "{:.2}-{:.2} s: {} samples, max {:.1} ms",
                e.from_s, e.to_s, e.samples, e.max_ms
            )
        })
        .collect();
    println!(
        "MQTT: the {over} PUBACKs over p99 were sent in {} stretches (sends < 50 ms apart); \
         the largest: {}",
        found.len(),
        largest.join("; ")
    );
}

async fn grpc_row(opts: &Options, json: bool) -> Result<Row> {
    let name = if json { "grpcjson" } else { "grpc" };
    let fresh = fresh_server(opts, name).await?;
    let (server, table) = (&fresh.server, &fresh.table);
    let cpu_before = procstat::cpu_seconds(server.pid())?;
    let etcd_before = fresh.etcd_cpu()?;
    let started = Instant::now();
    let records = grpc_load::run(
        &server.url,
        table,
        opts.grpc_streams,
        Duration::from_secs(opts.seconds),
        opts.max_inflight,
        Arc::new(padding()),
        json,
    )
    .await?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu_s = procstat::cpu_seconds(server.pid())? - cpu_before;
    let etcd_cpu_s = fresh.etcd_cpu()?.zip(etcd_before).map(|(a, b)| a - b);
    let dir = fresh.dir.clone();
    drop(fresh);
    let _ = std::fs::remove_dir_all(&dir);
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
        etcd_cpu_s,
    })
}

fn print_table(rows: &mut [Row]) {
    let mut table = Table::new(&[
        "path",
        "records/request",
        "requests/s",
        "records/s",
        "p50 ms",
        "p99 ms",
        "server CPU s",
        "etcd CPU s",
        "CPU µs/record",
        "records per CPU-s",
        "CPU s/GB",
    ]);
    for row in rows.iter_mut() {
        table.row(cells(row));
    }
    print!("{}", table.render());
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
        row.etcd_cpu_s.map_or("-".into(), |c| format!("{c:.2}")),
        format!("{:.1}", row.cpu_s * 1e6 / row.records.max(1) as f64),
        format!("{:.0}", row.records_per_cpu_s()),
        format!(
            "{:.1}",
            row.cpu_s / (row.records.max(1) as f64 * TARGET_RECORD_BYTES as f64 / 1e9)
        ),
    ]
}

#[tokio::main]
async fn main() -> Result<()> {
    let opts = Options::parse();
    sluice_bench::server::require_binary(&opts.sluice)?;
    println!(
        "Sluice REST benchmark: ~{TARGET_RECORD_BYTES}-byte telemetry rows, {} s per scenario, \
         {} REST clients, flush interval {}, {}, {} cores",
        opts.seconds,
        opts.clients,
        opts.flush_interval,
        if opts.cluster {
            "one-pod cluster (etcd + --join)"
        } else {
            "single node"
        },
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    let mut rows = Vec::new();
    for &size in &opts.sizes {
        for &keys in &opts.keys {
            rows.push(rest_row(&opts, size, None, keys).await?);
        }
    }
    let saturated_100 = rows
        .iter()
        .find(|r| r.per_request == "100" && r.path == "REST")
        .and_then(|r| r.requests.map(|n| n as f64 / r.seconds));
    if let (Some(rate), false) = (saturated_100, opts.no_grpc) {
        rows.push(rest_row(&opts, 100, Some(rate / 2.0), Keys::Unkeyed).await?);
    }
    if opts.mqtt_connections > 0 {
        let (saturated, _) = mqtt_row(&opts, None).await?;
        let rate = saturated.records as f64 / saturated.seconds;
        rows.push(saturated);
        let (half, timeline) = mqtt_row(&opts, Some(rate / 2.0)).await?;
        rows.push(half);
        if let Some(half) = rows.last_mut() {
            let p99 = half
                .latency_ms
                .as_mut()
                .map_or(f64::NAN, |l| l.quantile(0.99));
            println!(
                "MQTT: QoS 1 PUBACK p99 at half of saturation {p99:.1} ms (goal ≤ 20 ms): {}",
                if p99 <= 20.0 {
                    "reached"
                } else {
                    "NOT reached"
                }
            );
            print_stalls(&timeline, p99);
        }
    }
    if opts.no_grpc {
        print_table(&mut rows);
        return Ok(());
    }
    let grpc_json = grpc_row(&opts, true).await?;
    let grpc_proto = grpc_row(&opts, false).await?;
    let (json_rate, proto_rate) = (
        grpc_json.records_per_cpu_s(),
        grpc_proto.records_per_cpu_s(),
    );
    rows.push(grpc_json);
    rows.push(grpc_proto);
    print_table(&mut rows);
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
