//! Kafka benchmark: the Kafka producer protocol beside the gRPC stream path, side by side
//! in one run, on the same ~200-byte telemetry rows into a real `sluice serve` (a fresh
//! one per row, `--kafka-listen` on). Kafka: `--producers` connections of a raw producer
//! (SASL PLAIN, acks=all, batches of 64 KiB LZ4, 5 requests in flight; JSON values).
//! gRPC: `--grpc-streams` official-SDK streams with protobuf records (the stream path's
//! usual format) and with the same JSON objects. Per row: records/s, the server's CPU
//! (user + system from /proc/<pid>/stat) per record and records per server CPU-second;
//! the goal line compares Kafka with gRPC (goal: ≥ 50 % of gRPC's records per server
//! CPU-second).
//!
//! Run: `cargo build --release -p sluice-server && cargo run --release -p sluice-bench
//! --features kafkabench --bin kafka-bench -- --seconds 10`.

#[path = "../rest_bench/grpc_load.rs"]
mod grpc_load;
mod kafka_load;
#[path = "../rest_bench/rest_load.rs"]
#[allow(dead_code)]
mod rest_load;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::Parser;
use sluice_bench::e2e::{free_port, padding};
use sluice_bench::server::Server;
use sluice_bench::table::Table;

/// Kafka produce vs gRPC streams: throughput and server CPU per record.
#[derive(clap::Parser)]
struct Options {
    /// The `sluice` binary to benchmark.
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Seconds per row.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Kafka producer connections.
    #[arg(long, default_value_t = 4)]
    producers: usize,
    /// Uncompressed bytes per record batch (librdkafka's batch.size).
    #[arg(long, default_value_t = 64 << 10)]
    batch_bytes: usize,
    /// Produce requests in flight per connection (max.in.flight).
    #[arg(long, default_value_t = 5)]
    in_flight: usize,
    /// gRPC streams of the comparison rows.
    #[arg(long, default_value_t = 4)]
    grpc_streams: usize,
    /// Maximum in-flight records per gRPC stream.
    #[arg(long, default_value_t = 1000)]
    max_inflight: usize,
    /// The server's `--flush-interval`.
    #[arg(long, default_value = "1s")]
    flush_interval: String,
}

struct Row {
    path: &'static str,
    records: u64,
    seconds: f64,
    cpu_s: f64,
}

impl Row {
    fn per_cpu_second(&self) -> f64 {
        self.records as f64 / self.cpu_s.max(1e-9)
    }
}

#[derive(Clone, Copy)]
enum Path {
    Kafka,
    GrpcProto,
    GrpcJson,
}

async fn row(opts: &Options, path: Path) -> Result<Row> {
    let dir = std::env::temp_dir().join(format!("kafka-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let kport = free_port()?;
    let extra = vec!["--kafka-listen".to_string(), format!("127.0.0.1:{kport}")];
    let server = Server::start(&opts.sluice, &dir, &opts.flush_interval, &extra)?;
    server.wait_ready().await?;
    let table = "bench.kafka.t";
    server
        .create_table(table, sluice_bench::e2e::telemetry_columns())
        .await?;
    let window = Duration::from_secs(opts.seconds);
    let padding = Arc::new(padding());
    let url = server.url.clone();
    let (records, seconds, cpu_s) = match path {
        Path::Kafka => {
            let shape = kafka_load::Shape {
                producers: opts.producers,
                window,
                batch_bytes: opts.batch_bytes,
                in_flight: opts.in_flight,
            };
            server
                .measure(&dir, kafka_load::run(kport, table, shape, padding))
                .await?
        }
        Path::GrpcProto | Path::GrpcJson => {
            let json = matches!(path, Path::GrpcJson);
            let load = grpc_load::run(
                &url,
                table,
                opts.grpc_streams,
                window,
                opts.max_inflight,
                padding,
                json,
            );
            server.measure(&dir, load).await?
        }
    };
    Ok(Row {
        path: match path {
            Path::Kafka => "Kafka Produce (JSON values, lz4, 64 KiB batches, acks=all)",
            Path::GrpcProto => "gRPC stream (protobuf records)",
            Path::GrpcJson => "gRPC stream (JSON records)",
        },
        records,
        seconds,
        cpu_s,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let opts = Options::parse();
    sluice_bench::server::require_binary(&opts.sluice)?;
    let mut rows = Vec::new();
    for path in [Path::Kafka, Path::GrpcProto, Path::GrpcJson] {
        rows.push(row(&opts, path).await?);
    }
    let mut table = Table::new(&[
        "path",
        "records",
        "records/s",
        "server CPU s",
        "µs CPU/record",
        "records per CPU-s",
    ]);
    for r in &rows {
        table.row(vec![
            r.path.to_string(),
            r.records.to_string(),
            format!("{:.0}", r.records as f64 / r.seconds),
            format!("{:.2}", r.cpu_s),
            format!("{:.2}", r.cpu_s * 1e6 / r.records.max(1) as f64),
            format!("{:.0}", r.per_cpu_second()),
        ]);
    }
    println!("{}", table.render());
    let kafka = rows[0].per_cpu_second();
    for r in &rows[1..] {
        let ratio = kafka / r.per_cpu_second().max(1e-9);
        println!(
            "goal: Kafka records per server CPU-second >= 50 % of {}: {:.0} %{}",
            r.path,
            ratio * 100.0,
            if ratio >= 0.5 { " (met)" } else { " (NOT met)" }
        );
    }
    Ok(())
}
