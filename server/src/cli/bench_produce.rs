//! `sluice bench produce TABLE`: a load generator for sizing a cluster, built on
//! `sluice-sdk`. `--streams N` streams send JSON records `{"id": …, "payload": "…"}`
//! padded to `--record-bytes`, at `--rate` records/s in total (0: as fast as acks allow)
//! for `--seconds`; a live line each second, then records/s, MB/s and ack latency
//! p50/p99/p999 (from `send` returning to the ack). The table needs columns
//! `id BIGINT, payload STRING`; stream `s` uses ids `s·10⁹ + i`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use sluice_sdk::Client;

use super::client::ConnArgs;

/// `sluice bench produce` arguments.
#[derive(clap::Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    conn: ConnArgs,
    /// The table (columns `id BIGINT, payload STRING`).
    table: String,
    /// Concurrent streams.
    #[arg(long, default_value_t = 1)]
    streams: usize,
    /// Records per second over all streams (0: unlimited).
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Size of each JSON record in bytes.
    #[arg(long, default_value_t = 200)]
    record_bytes: usize,
    /// Seconds of sending.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
}

/// `sluice bench …` commands.
#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// Generate load on a table with sluice-sdk streams and report throughput and ack
    /// latency.
    Produce(ProduceArgs),
}

/// Runs a `sluice bench` command.
pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Produce(args) => produce(args).await,
    }
}

/// What all streams share: counters and ack latencies.
#[derive(Default)]
struct Totals {
    sent: AtomicU64,
    acked: AtomicU64,
    bytes: AtomicU64,
    latencies_us: Mutex<Vec<u64>>,
}

/// The record with id `id`, padded to `size` bytes.
fn record(id: i64, size: usize) -> String {
    let head = format!("{{\"id\": {id}, \"payload\": \"");
    let pad = size.saturating_sub(head.len() + 2);
    format!("{head}{}\"}}", "x".repeat(pad))
}

async fn produce(args: ProduceArgs) -> anyhow::Result<()> {
    let mut builder = Client::builder(args.conn.server());
    if let Some((id, secret)) = args.conn.credentials() {
        builder = builder.credentials(id, secret);
    }
    let client = builder.build().context("client")?;
    let totals = Arc::new(Totals::default());
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.seconds);
    let per_stream_rate = if args.rate == 0 {
        0.0
    } else {
        args.rate as f64 / args.streams.max(1) as f64
    };
    let mut tasks = Vec::new();
    for s in 0..args.streams.max(1) {
        let sent_at: Arc<Mutex<VecDeque<(i64, Instant)>>> = Arc::default();
        let (pending, t) = (Arc::clone(&sent_at), Arc::clone(&totals));
        let stream = client
            .stream(&args.table)
            .json()
            .on_ack(move |acked| {
                let now = Instant::now();
                let mut pending = pending.lock().unwrap_or_else(|p| p.into_inner());
                let mut lat = t.latencies_us.lock().unwrap_or_else(|p| p.into_inner());
                while pending.front().is_some_and(|(o, _)| *o <= acked) {
                    if let Some((_, at)) = pending.pop_front() {
                        lat.push(now.duration_since(at).as_micros() as u64);
                        t.acked.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
            .open()
            .await
            .with_context(|| format!("open stream {s}"))?;
        let t = Arc::clone(&totals);
        let size = args.record_bytes;
        tasks.push(tokio::spawn(async move {
            let mut i = 0i64;
            while Instant::now() < deadline {
                if per_stream_rate > 0.0 {
                    let due = started + Duration::from_secs_f64(i as f64 / per_stream_rate);
                    tokio::time::sleep_until(due.into()).await;
                }
                let rec = record(s as i64 * 1_000_000_000 + i, size);
                t.bytes.fetch_add(rec.len() as u64, Ordering::Relaxed);
                // Noted before the send: its ack may arrive before `send` returns. This
                // task is the stream's only sender, so the offset is the next one.
                let offset = stream.next_offset();
                sent_at
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push_back((offset, Instant::now()));
                stream.send(rec).await?;
                t.sent.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
            stream.close().await?;
            anyhow::Ok(())
        }));
    }
    let live = {
        let t = Arc::clone(&totals);
        tokio::spawn(async move {
            let mut last = (0u64, Instant::now());
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let sent = t.sent.load(Ordering::Relaxed);
                let secs = last.1.elapsed().as_secs_f64();
                eprintln!(
                    "{:>4.0} s: {} sent, {} acked, {:.0} records/s",
                    started.elapsed().as_secs_f64(),
                    sent,
                    t.acked.load(Ordering::Relaxed),
                    (sent - last.0) as f64 / secs
                );
                last = (sent, Instant::now());
            }
        })
    };
    for task in tasks {
        task.await.context("stream task")??;
    }
    live.abort();
    let secs = started.elapsed().as_secs_f64();
    let acked = totals.acked.load(Ordering::Relaxed);
    let bytes = totals.bytes.load(Ordering::Relaxed);
    let mut lat = std::mem::take(
        &mut *totals
            .latencies_us
            .lock()
            .unwrap_or_else(|p| p.into_inner()),
    );
    lat.sort_unstable();
    let q = |p: f64| -> f64 {
        if lat.is_empty() {
            return 0.0;
        }
        let i = ((lat.len() - 1) as f64 * p).round() as usize;
        lat[i.min(lat.len() - 1)] as f64 / 1000.0
    };
    println!(
        "| streams | records acked | records/s | MB/s | ack p50 ms | ack p99 ms | ack p999 ms |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {:.0} | {:.2} | {:.1} | {:.1} | {:.1} |",
        args.streams,
        acked,
        acked as f64 / secs,
        bytes as f64 / 1e6 / secs,
        q(0.5),
        q(0.99),
        q(0.999)
    );
    Ok(())
}
