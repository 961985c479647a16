//! Trunk benchmark: the official Zerobus Rust SDK pushes ~200-byte protobuf
//! records into a real `sluice serve` process, with 1 and with 16 concurrent
//! streams, and the table reports records/s, MB/s, ack latency p50/p99 (from
//! queueing a record in the SDK to its ack callback) and freshness p50/p99
//! (from a record's ack to the moment a polling `deltalake` reader sees the
//! Delta version holding it). Ack latency starts when `ingest_record_offset`
//! returns (the record is queued for sending), so time spent waiting for
//! in-flight room in the SDK is not counted.
//!
//! Beside every throughput figure: the pod's CPU seconds per GB acked (its own utime + stime
//! from `/proc/PID/stat`, from the first send until the last commit is visible) and the
//! producer's (this process), since both share the machine's cores.
//!
//! `stored B/row`: the bytes of the Parquet files the flushes added (each file's size on
//! disk, read by the freshness poller) per row they hold, so a change of the file layout
//! shows beside its CPU.
//!
//! Open loop (`--open-loop 0.5`): after each closed-loop scenario, the same scenario again with
//! every stream sending on a fixed schedule at that fraction of the closed-loop rate. Its ack
//! latency runs from the time a record was due, so waiting for in-flight room counts; its
//! `enqueue p99 ms` column is the part of that spent before the SDK took the record (due →
//! `ingest_record_offset` returned: the producer task late, or the SDK out of in-flight room).
//! Every stream is open before the schedule, the window and the CPU counts start.
//!
//! Record shapes: `--record-bytes 200,1024,10240` (the telemetry record padded to that size)
//! and `--wide-columns 100` (an id and 99 doubles; 0 = none).
//!
//! Run: `scripts/bench-trunk.sh` (builds release binaries, then runs this).
//! Options: `--sluice PATH` (server binary, default target/release/sluice),
//! `--seconds N` per scenario (default 10), `--streams 1,16`,
//! `--flush-interval 1s`, `--max-inflight N` per stream (default 1000).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Parser;
use databricks_zerobus_ingest_sdk::ProtoBytes;
use sluice_bench::e2e::{
    descriptor, padding_to, record, wide_columns, wide_descriptor, wide_record, AckTimes, Timeline,
    ID_STRIDE,
};
use sluice_bench::procstat::cpu_seconds;
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
    /// Sizes of the telemetry record, one scenario each.
    #[arg(long, value_delimiter = ',', default_value = "200")]
    record_bytes: Vec<usize>,
    /// Columns of an extra wide-row scenario (0 = none).
    #[arg(long, default_value_t = 0)]
    wide_columns: usize,
    /// After each closed-loop scenario, run it open loop at this fraction of its rate (0 = no).
    #[arg(long, default_value_t = 0.0)]
    open_loop: f64,
    /// Extra `sluice serve` arguments, e.g. `--pod-arg=--commit-interval=1s`.
    #[arg(long = "pod-arg", allow_hyphen_values = true)]
    pod_args: Vec<String>,
}

/// What one scenario's records look like.
#[derive(Clone, Copy)]
enum Shape {
    /// The telemetry record padded to this many bytes.
    Telemetry(usize),
    /// An id and this many columns minus one doubles.
    Wide(usize),
}

impl Shape {
    fn label(self) -> String {
        match self {
            Shape::Telemetry(b) => format!("{b} B"),
            Shape::Wide(c) => format!("{c} cols"),
        }
    }

    fn descriptor(self) -> prost_types::DescriptorProto {
        match self {
            Shape::Telemetry(_) => descriptor(),
            Shape::Wide(c) => wide_descriptor(c),
        }
    }

    fn columns(self) -> serde_json::Value {
        match self {
            Shape::Telemetry(_) => sluice_bench::e2e::telemetry_columns(),
            Shape::Wide(c) => wide_columns(c),
        }
    }

    /// Builds one record per call, as a producer would.
    fn encoder(self) -> impl Fn(i64) -> Vec<u8> + Send + Sync + 'static {
        let pad = match self {
            Shape::Telemetry(b) => padding_to(b),
            Shape::Wide(_) => String::new(),
        };
        move |id| match self {
            Shape::Telemetry(_) => record(id, &pad),
            Shape::Wide(c) => wide_record(id, c),
        }
    }
}

/// One scenario: how many streams, which records, and (open loop) records/s per stream.
#[derive(Clone, Copy)]
struct Scenario {
    streams: usize,
    shape: Shape,
    rate: Option<f64>,
}

struct ScenarioResult {
    records: u64,
    bytes: u64,
    seconds: f64,
    ack_ms: Samples,
    /// Open loop: due → the SDK took the record.
    enqueue_ms: Samples,
    fresh_ms: Samples,
    /// The flush files' bytes on disk and rows (the poller's `Visibility`).
    file_bytes: u64,
    file_rows: u64,
    /// Every acked byte, window or not (for CPU per GB).
    acked_bytes: u64,
    pod_cpu: f64,
    producer_cpu: f64,
}

/// Capacity of the per-stream timelines (records per stream per run).
const TIMELINE_CAPACITY: usize = 4_000_000;

async fn run_scenario(opts: &Options, sc: Scenario) -> Result<ScenarioResult> {
    let streams = sc.streams;
    let dir = std::env::temp_dir().join(format!(
        "sluice-trunk-bench-{}-{streams}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let server = Server::start(&opts.sluice, &dir, &opts.flush_interval, &opts.pod_args)?;
    server.wait_ready().await?;
    let table = format!("bench.trunk.s{streams}");
    let location = server.create_table(&table, sc.shape.columns()).await?;

    let sdk = sluice_bench::e2e::official_sdk(&server.url)?;
    let start = Instant::now();
    let timelines: Vec<Arc<Timeline>> = (0..streams)
        .map(|_| Arc::new(Timeline::new(start, TIMELINE_CAPACITY)))
        .collect();
    let stop_polling = Arc::new(AtomicBool::new(false));
    // The poller reads each new Parquet file synchronously: on a thread and runtime of its
    // own, so those reads never hold a worker the producers' tasks are queued on.
    let poller = {
        let (location, stop) = (location.clone(), stop_polling.clone());
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(poll_visibility(location, start, stop))
        })
    };
    // Every stream is open before the schedule starts: a record due while its stream was still
    // opening would count the opening (OAuth, connect, CreateStream) as its latency.
    let opening = timelines.iter().map(|timeline| {
        let (sdk, table) = (sdk.clone(), table.clone());
        let (timeline, max_inflight, shape) = (timeline.clone(), opts.max_inflight, sc.shape);
        tokio::spawn(async move {
            sdk.stream_builder()
                .table(&table)
                .oauth(
                    sluice_bench::e2e::CLIENT_ID,
                    sluice_bench::e2e::CLIENT_SECRET,
                )
                .compiled_proto(shape.descriptor())
                .max_inflight_requests(max_inflight)
                .ack_callback(Arc::new(AckTimes::new(timeline)))
                .build()
                .await
        })
    });
    let mut opened = Vec::with_capacity(streams);
    for stream in futures::future::join_all(opening).await {
        opened.push(stream??);
    }
    // The schedule, the window and the CPU counts start now, `base` ns after the timelines' start.
    let base = start.elapsed().as_nanos() as u64;
    let deadline = start + Duration::from_nanos(base) + Duration::from_secs(opts.seconds);
    let encode = Arc::new(sc.shape.encoder());
    let (pod_cpu0, producer_cpu0) = (cpu_seconds(server.pid())?, cpu_seconds(std::process::id())?);
    let mut tasks = Vec::new();
    for (s, (mut stream, timeline)) in opened
        .into_iter()
        .zip(timelines.iter().cloned())
        .enumerate()
    {
        let encode = encode.clone();
        // Open loop: record i of stream s is due at base + phase + i / rate.
        let period = sc.rate.map(|r| 1e9 / r);
        let phase = period.map_or(0.0, |p| p * s as f64 / streams as f64);
        tasks.push(tokio::spawn(async move {
            let mut bytes = 0u64;
            let mut offset = 0usize;
            let mut enqueue_ms = Samples::new();
            while Instant::now() < deadline && offset < TIMELINE_CAPACITY {
                let due = period.map(|p| base + (phase + p * offset as f64) as u64);
                if let Some(due) = due {
                    tokio::time::sleep_until((start + Duration::from_nanos(due)).into()).await;
                }
                let rec = encode(s as i64 * ID_STRIDE + offset as i64);
                bytes += rec.len() as u64;
                let got = stream.ingest_record_offset(ProtoBytes(rec)).await? as usize;
                match due {
                    // Open loop: latency runs from when the record was due.
                    Some(due) => {
                        timeline.mark_sent_at(got, due);
                        enqueue_ms.push(timeline.now().saturating_sub(due) as f64 / 1e6);
                    }
                    // Closed loop: queued in the SDK now (waits for in-flight room are not counted).
                    None => timeline.mark_sent(got),
                }
                offset += 1;
            }
            stream.flush().await?;
            stream.close().await?;
            anyhow::Ok((offset as u64, bytes, enqueue_ms))
        }));
    }
    let mut sent_records = 0;
    let mut sent_bytes = 0;
    let mut enqueue_ms = Samples::new();
    for t in tasks {
        let (r, b, e) = t.await??;
        sent_records += r;
        sent_bytes += b;
        enqueue_ms.extend(&e);
    }
    // Give the reader time to see the last commit (flush interval + commit).
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop_polling.store(true, Ordering::Relaxed);
    let Visibility {
        seen,
        file_bytes,
        file_rows,
    } = poller
        .join()
        .map_err(|_| anyhow::anyhow!("the visibility poller panicked"))??;
    let pod_cpu = cpu_seconds(server.pid())? - pod_cpu0;
    let producer_cpu = cpu_seconds(std::process::id())? - producer_cpu0;

    let window_ns = base + opts.seconds * 1_000_000_000;
    let mut records = 0u64;
    let mut ack_ms = Samples::new();
    let mut fresh_ms = Samples::new();
    let mut all_acked = 0u64;
    for (s, tl) in timelines.iter().enumerate() {
        for (offset, sent, acked) in tl.acked_records() {
            all_acked += 1;
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
    sluice_bench::e2e::remove_and_settle(&dir);
    Ok(ScenarioResult {
        records,
        bytes: records * record_bytes,
        seconds: opts.seconds as f64,
        ack_ms,
        enqueue_ms,
        fresh_ms,
        file_bytes,
        file_rows,
        acked_bytes: all_acked * record_bytes,
        pod_cpu,
        producer_cpu,
    })
}

/// What the visibility poller saw: id → visible time (ns since the start), and the files
/// that brought those rows (bytes on disk, rows).
struct Visibility {
    seen: std::collections::HashMap<i64, u64>,
    file_bytes: u64,
    file_rows: u64,
}

/// Polls the Delta table as fast as it can; for every new version, reads the
/// ids of the files it added and notes when they became visible (ns since
/// `start`), and counts those files' bytes and rows.
async fn poll_visibility(
    location: String,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> Result<Visibility> {
    let url = url::Url::parse(&location)?;
    let dir = url
        .to_file_path()
        .map_err(|_| anyhow::anyhow!("{location} is not a local table"))?;
    let mut table = deltalake::open_table(url).await?;
    let mut seen = std::collections::HashMap::new();
    let (mut file_bytes, mut file_rows) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let before = table.version().map_or(-1, |v| v as i64);
        table.update_incremental(None).await?;
        let after = table.version().map_or(-1, |v| v as i64);
        if after != before {
            let now = start.elapsed().as_nanos() as u64;
            // Only the files of new rows: a compaction's output (dataChange false) would
            // cost a long read of rows already seen, and delay seeing the next commits.
            for version in before + 1..=after {
                for file in sluice_bench::freshness::data_files_of_version(&dir, version)? {
                    let ids = sluice_bench::freshness::ids_of(&file)?;
                    file_bytes += std::fs::metadata(&file)?.len();
                    file_rows += ids.len() as u64;
                    for id in ids {
                        seen.entry(id).or_insert(now);
                    }
                }
            }
        } else {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    Ok(Visibility {
        seen,
        file_bytes,
        file_rows,
    })
}

/// The scenarios of a run: every stream count × every shape, each followed by its open-loop
/// twin when asked.
fn shapes(opts: &Options) -> Vec<Shape> {
    let mut shapes: Vec<Shape> = opts
        .record_bytes
        .iter()
        .map(|&b| Shape::Telemetry(b))
        .collect();
    if opts.wide_columns > 0 {
        shapes.push(Shape::Wide(opts.wide_columns));
    }
    shapes
}

fn row(table: &mut Table, sc: Scenario, r: &mut ScenarioResult) {
    let gb = r.acked_bytes as f64 / 1e9;
    table.row(vec![
        sc.streams.to_string(),
        sc.shape.label(),
        sc.rate.map_or("closed".into(), |x| {
            format!("{:.0}/s", x * sc.streams as f64)
        }),
        format!("{:.0}", r.records as f64 / r.seconds),
        format!("{:.2}", r.bytes as f64 / r.seconds / 1e6),
        format!("{:.2}", r.pod_cpu / gb),
        format!("{:.2}", r.producer_cpu / gb),
        format!("{:.1}", r.ack_ms.median()),
        format!("{:.1}", r.ack_ms.quantile(0.99)),
        if r.enqueue_ms.is_empty() {
            "—".into()
        } else {
            format!("{:.1}", r.enqueue_ms.quantile(0.99))
        },
        format!("{:.0}", r.fresh_ms.median()),
        format!("{:.0}", r.fresh_ms.quantile(0.99)),
        r.fresh_ms.len().to_string(),
        if r.file_rows == 0 {
            "—".into()
        } else {
            format!("{:.2}", r.file_bytes as f64 / r.file_rows as f64)
        },
    ]);
}

#[tokio::main]
async fn main() -> Result<()> {
    let opts = Options::parse();
    sluice_bench::server::require_binary(&opts.sluice)?;
    println!(
        "Sluice trunk benchmark: official Rust SDK 2.12.0, protobuf records, \
         {} s per scenario, flush interval {}, max {} in-flight records per stream, {}",
        opts.seconds,
        opts.flush_interval,
        opts.max_inflight,
        sluice_bench::host::describe()
    );
    println!(
        "pod CPU s/GB and producer CPU s/GB: utime + stime from /proc over the run (first send \
         to last commit visible) per GB acked; rate `closed` = as fast as acks allow"
    );
    let mut table = Table::new(&[
        "streams",
        "record",
        "rate",
        "records/s",
        "MB/s",
        "pod CPU s/GB",
        "producer CPU s/GB",
        "ack p50 ms",
        "ack p99 ms",
        "enqueue p99 ms",
        "fresh p50 ms",
        "fresh p99 ms",
        "fresh samples",
        "stored B/row",
    ]);
    for &streams in &opts.streams {
        for shape in shapes(&opts) {
            let sc = Scenario {
                streams,
                shape,
                rate: None,
            };
            let mut r = run_scenario(&opts, sc).await?;
            row(&mut table, sc, &mut r);
            if opts.open_loop > 0.0 {
                let per_stream = r.records as f64 / r.seconds / streams as f64 * opts.open_loop;
                let open = Scenario {
                    rate: Some(per_stream.max(1.0)),
                    ..sc
                };
                let mut r = run_scenario(&opts, open).await?;
                row(&mut table, open, &mut r);
            }
        }
    }
    print!("{}", table.render());
    Ok(())
}
