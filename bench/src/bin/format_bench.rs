//! Format benchmark: the same telemetry rows (~200 bytes as protobuf) pushed by the official
//! Rust SDK 2.12.0 into one table of a fresh `sluice serve` as Arrow Flight batches, as
//! protobuf record batches, as Avro record batches (raw datums, `AvroBytes`, encoded once by
//! apache-avro) and as JSON record batches, with 1 and with 16 streams, one run, side by
//! side. Per scenario: records/s and MB/s (MB of the rows' protobuf encoding, the
//! same for every format), the server process's CPU seconds (utime + stime from
//! `/proc/PID/stat`, from the first send to the last ack) per GB of those bytes and the rows
//! per server CPU-second, and ack latency p50/p99 per call (each call sends `--batch-rows`
//! rows: one Arrow batch, or one `ingest_records_offset` of that many records).
//!
//! Every call resends pre-built payloads, so the producers spend little CPU beside the
//! server on a small machine. The server flushes to Delta on its usual interval, so its CPU
//! includes Parquet writing and commits, which cost the same for every format.
//!
//! Run: `cargo run --release -p sluice-bench --features formatbench --bin format-bench`
//! after `cargo build --release -p sluice-server`. Options: `--sluice PATH`,
//! `--seconds N` (default 10), `--streams 1,16`, `--batch-rows N` (default 2000),
//! `--flush-interval 1s`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use arrow_array::{Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use clap::Parser;
use databricks_zerobus_ingest_sdk::{AvroBytes, JsonString, OffsetId, ProtoBytes, ZerobusSdk};
use sluice_bench::e2e::{descriptor, padding, record, CLIENT_ID, CLIENT_SECRET};
use sluice_bench::server::Server;
use sluice_bench::stats::Samples;
use sluice_bench::table::Table;
use tokio::sync::mpsc;

/// Format benchmark: Arrow Flight vs protobuf vs Avro vs JSON into one table.
#[derive(clap::Parser)]
struct Options {
    /// The `sluice` binary to benchmark.
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Seconds of sending per scenario.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Stream counts, one scenario per format each.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    streams: Vec<usize>,
    /// Rows per SDK call.
    #[arg(long, default_value_t = 2000)]
    batch_rows: usize,
    /// The server's `--flush-interval`.
    #[arg(long, default_value = "1s")]
    flush_interval: String,
}

/// How the rows travel.
#[derive(Clone, Copy, Debug)]
enum Format {
    Arrow,
    Proto,
    Avro,
    Json,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Arrow => "Arrow Flight",
            Format::Proto => "protobuf",
            Format::Avro => "Avro",
            Format::Json => "JSON",
        }
    }
}

/// One call's worth of rows in every format, built once.
struct Payloads {
    proto: Vec<Vec<u8>>,
    avro: Vec<Vec<u8>>,
    json: Vec<String>,
    arrow: RecordBatch,
    /// The protobuf bytes of the rows: the common measure of data volume.
    proto_bytes: u64,
}

fn arrow_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("device", DataType::Utf8, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("temp", DataType::Float64, true),
        Field::new("humidity", DataType::Float64, true),
        Field::new("payload", DataType::Utf8, true),
    ]))
}

/// The Avro writer schema of the telemetry rows.
const AVRO_SCHEMA: &str = r#"{"type":"record","name":"Telemetry","fields":[
    {"name":"id","type":"long"},
    {"name":"device","type":["null","string"]},
    {"name":"ts","type":["null",{"type":"long","logicalType":"timestamp-micros"}]},
    {"name":"temp","type":["null","double"]},
    {"name":"humidity","type":["null","double"]},
    {"name":"payload","type":["null","string"]}]}"#;

/// One telemetry row as a raw Avro datum.
#[allow(deprecated)] // apache-avro 0.22's datum writer function: the same encoding
fn avro_datum(
    schema: &apache_avro::Schema,
    id: i64,
    device: String,
    ts: i64,
    temp: f64,
    payload: &str,
) -> Result<Vec<u8>> {
    use apache_avro::types::Value as Avro;
    let some = |v: Avro| Avro::Union(1, Box::new(v));
    let value = Avro::Record(vec![
        ("id".into(), Avro::Long(id)),
        ("device".into(), some(Avro::String(device))),
        ("ts".into(), some(Avro::TimestampMicros(ts))),
        ("temp".into(), some(Avro::Double(temp))),
        ("humidity".into(), some(Avro::Double(0.45))),
        ("payload".into(), some(Avro::String(payload.to_string()))),
    ]);
    Ok(apache_avro::to_avro_datum(schema, value)?)
}

fn payloads(rows: usize) -> Result<Payloads> {
    let pad = padding();
    let ids: Vec<i64> = (0..rows as i64).collect();
    let proto: Vec<Vec<u8>> = ids.iter().map(|&id| record(id, &pad)).collect();
    let device = |id: i64| format!("device-{:04}", id % 1000);
    let ts = |id: i64| 1_700_000_000_000_000 + id;
    let temp = |id: i64| 20.0 + (id % 100) as f64 / 10.0;
    let json = ids
        .iter()
        .map(|&id| {
            serde_json::json!({
                "id": id, "device": device(id), "ts": ts(id), "temp": temp(id),
                "humidity": 0.45, "payload": pad,
            })
            .to_string()
        })
        .collect();
    let schema = apache_avro::Schema::parse_str(AVRO_SCHEMA)?;
    let avro = ids
        .iter()
        .map(|&id| avro_datum(&schema, id, device(id), ts(id), temp(id), &pad))
        .collect::<Result<Vec<_>>>()?;
    let arrow = RecordBatch::try_new(
        arrow_schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(StringArray::from_iter_values(
                ids.iter().map(|&i| device(i)),
            )),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(ids.iter().map(|&i| ts(i)))
                    .with_timezone("UTC"),
            ),
            Arc::new(Float64Array::from_iter_values(ids.iter().map(|&i| temp(i)))),
            Arc::new(Float64Array::from_iter_values(ids.iter().map(|_| 0.45))),
            Arc::new(StringArray::from_iter_values(
                ids.iter().map(|_| pad.as_str()),
            )),
        ],
    )?;
    let proto_bytes = proto.iter().map(|r| r.len() as u64).sum();
    Ok(Payloads {
        proto,
        avro,
        json,
        arrow,
        proto_bytes,
    })
}

/// CPU seconds (user + system) the process `pid` has used so far.
fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').context("stat format")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the command: state is field 3, utime 14 and stime 15 (1-based over the line).
    let utime: f64 = fields.get(11).context("utime")?.parse()?;
    let stime: f64 = fields.get(12).context("stime")?.parse()?;
    // SAFETY: sysconf reads a constant of the running system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok((utime + stime) / ticks)
}

/// One call's send time, to time its ack.
type Sent = (OffsetId, Instant);

/// Waits for each sent call's ack in order; returns the latencies in ms.
async fn time_acks<F, Fut>(mut sent: mpsc::UnboundedReceiver<Sent>, wait: F) -> Result<Samples>
where
    F: Fn(OffsetId) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut ms = Samples::new();
    while let Some((offset, at)) = sent.recv().await {
        wait(offset).await?;
        ms.push_ms(at.elapsed());
    }
    Ok(ms)
}

struct Outcome {
    calls: u64,
    ack_ms: Samples,
}

/// One stream sending `payloads` until `deadline`; returns its calls and ack latencies.
async fn run_stream(
    sdk: Arc<ZerobusSdk>,
    table: String,
    format: Format,
    payloads: Arc<Payloads>,
    deadline: Instant,
) -> Result<Outcome> {
    let (tx, rx) = mpsc::unbounded_channel::<Sent>();
    let mut calls = 0u64;
    let builder = sdk
        .stream_builder()
        .table(&table)
        .oauth(CLIENT_ID, CLIENT_SECRET);
    let ack_ms = match format {
        Format::Arrow => {
            let stream = Arc::new(
                builder
                    .arrow(arrow_schema())
                    .max_inflight_batches(64)
                    .build_arrow()
                    .await?,
            );
            let waiter = stream.clone();
            let acks = tokio::spawn(async move {
                time_acks(rx, |o| {
                    let s = waiter.clone();
                    async move { Ok(s.wait_for_offset(o).await?) }
                })
                .await
            });
            while Instant::now() < deadline {
                let offset = stream.ingest_batch(payloads.arrow.clone()).await?;
                tx.send((offset, Instant::now()))?;
                calls += 1;
            }
            drop(tx);
            stream.flush().await?;
            let ms = acks.await??;
            if let Ok(mut stream) = Arc::try_unwrap(stream) {
                stream.close().await?;
            }
            ms
        }
        Format::Proto | Format::Avro | Format::Json => {
            let builder = match format {
                Format::Proto => builder.compiled_proto(descriptor()),
                Format::Avro => builder.avro(AVRO_SCHEMA),
                _ => builder.json(),
            };
            let stream = Arc::new(builder.max_inflight_requests(64).build().await?);
            let waiter = stream.clone();
            let acks = tokio::spawn(async move {
                time_acks(rx, |o| {
                    let s = waiter.clone();
                    async move { Ok(s.wait_for_offset(o).await?) }
                })
                .await
            });
            while Instant::now() < deadline {
                let offset = match format {
                    Format::Proto => {
                        let records = payloads.proto.iter().cloned().map(ProtoBytes);
                        stream.ingest_records_offset(records).await?
                    }
                    Format::Avro => {
                        let records = payloads.avro.iter().cloned().map(AvroBytes);
                        stream.ingest_records_offset(records).await?
                    }
                    _ => {
                        let records = payloads.json.iter().cloned().map(JsonString);
                        stream.ingest_records_offset(records).await?
                    }
                };
                if let Some(offset) = offset {
                    tx.send((offset, Instant::now()))?;
                }
                calls += 1;
            }
            drop(tx);
            stream.flush().await?;
            let ms = acks.await??;
            if let Ok(mut stream) = Arc::try_unwrap(stream) {
                stream.close().await?;
            }
            ms
        }
    };
    Ok(Outcome { calls, ack_ms })
}

struct Scenario {
    format: Format,
    streams: usize,
    rows: u64,
    bytes: u64,
    seconds: f64,
    cpu: f64,
    ack_ms: Samples,
}

async fn run_scenario(opts: &Options, format: Format, streams: usize) -> Result<Scenario> {
    let dir = std::env::temp_dir().join(format!(
        "sluice-format-bench-{}-{format:?}-{streams}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let server = Server::start(&opts.sluice, &dir, &opts.flush_interval, &[])?;
    server.wait_ready().await?;
    let table = format!("bench.formats.s{streams}");
    server
        .create_table(&table, sluice_bench::e2e::telemetry_columns())
        .await?;
    let sdk = sluice_bench::e2e::official_sdk(&server.url)?;
    let payloads = Arc::new(payloads(opts.batch_rows)?);
    let cpu_before = cpu_seconds(server.pid())?;
    let start = Instant::now();
    let deadline = start + Duration::from_secs(opts.seconds);
    let tasks: Vec<_> = (0..streams)
        .map(|_| {
            tokio::spawn(run_stream(
                sdk.clone(),
                table.clone(),
                format,
                payloads.clone(),
                deadline,
            ))
        })
        .collect();
    let mut calls = 0;
    let mut ack_ms = Samples::new();
    for t in tasks {
        let outcome = t.await??;
        calls += outcome.calls;
        ack_ms.extend(&outcome.ack_ms);
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds(server.pid())? - cpu_before;
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Scenario {
        format,
        streams,
        rows: calls * opts.batch_rows as u64,
        bytes: calls * payloads.proto_bytes,
        seconds,
        cpu,
        ack_ms,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let opts = Options::parse();
    sluice_bench::server::require_binary(&opts.sluice)?;
    println!(
        "Sluice format benchmark: official Rust SDK 2.12.0, the same ~200-byte telemetry rows, \
         {} rows per call, {} s of sending per scenario, flush interval {}, {} cores. \
         MB = MB of the rows' protobuf encoding; server CPU from /proc of the sluice process.",
        opts.batch_rows,
        opts.seconds,
        opts.flush_interval,
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    let mut table = Table::new(&[
        "format",
        "streams",
        "records/s",
        "MB/s",
        "server CPU s/GB",
        "rows per server CPU-s",
        "ack p50 ms",
        "ack p99 ms",
    ]);
    for &n in &opts.streams {
        for format in [Format::Arrow, Format::Proto, Format::Avro, Format::Json] {
            let mut r = run_scenario(&opts, format, n).await?;
            table.row(vec![
                r.format.name().to_string(),
                r.streams.to_string(),
                format!("{:.0}", r.rows as f64 / r.seconds),
                format!("{:.2}", r.bytes as f64 / r.seconds / 1e6),
                format!("{:.1}", r.cpu / (r.bytes as f64 / 1e9)),
                format!("{:.0}", r.rows as f64 / r.cpu),
                format!("{:.1}", r.ack_ms.median()),
                format!("{:.1}", r.ack_ms.quantile(0.99)),
            ]);
        }
    }
    print!("{}", table.render());
    Ok(())
}
