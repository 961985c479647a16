//! Cluster benchmark: real `etcd`, `sluice serve --join` pods and `sluice router` processes
//! on loopback, the official Rust SDK as producers (~200-byte proto records). Four tables:
//!
//! 1. router overhead: the same load (N unpaced streams, one pod) straight to the pod and
//!    through the router, in the same run: records/s, ack p50/p99;
//! 2. placement balance: 3 pods, pod-0 pre-loaded with streams connected to it directly; then
//!    new paced streams arrive through a router with each policy (p2c, round-robin, random);
//!    new streams per pod and the coefficient of variation (stddev/mean) across pods of
//!    total streams and of ingress bytes/s, from the pods' own load reports;
//! 3. drain: 64 paced streams on one pod, two idle pods join, the loaded pod is drained
//!    (`sluice pod drain`): time until it exited, and the producers' ack latency (max, p99)
//!    of records queued during the drain;
//! 4. commit rate: N pods appending to one Delta table with a short flush interval:
//!    commits/s the table reaches, and commit failures (conflict retries that gave up);
//! 5. committer: etcd + N pods + a router, one table written through the router by 6 paced
//!    streams with `--flush-interval 250ms`: Delta commits/s on the table (one elected
//!    committer per table: it must not grow with the pods), rows/s, and every row once
//!    (ids read back from the table's Parquet files);
//! 6. hot table: `sluice cluster up --pods N` (etcd, N pods, a router as its children), one
//!    table written through the router by unpaced streams: rows/s, the pods' own CPU seconds
//!    per GB (from /proc), commits/s, files per commit and their size, and freshness (per
//!    row: the commit's timestamp minus the time its producer queued it) p50/p99.
//!
//! Run: `scripts/bench-cluster.sh` (release build, then this). Options: `--sluice PATH`,
//! `--seconds N` (per measured phase, default 10), `--streams N` (overhead, default 16),
//! `--only overhead,balance,drain,commits,committer`, `--commit-pods 1,2,4,8`,
//! `--committer-pods 1,3`, `--hot-pods 1,4`, `--hot-streams 8`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use databricks_zerobus_ingest_sdk::{ProtoBytes, ZerobusSdk};
use sluice_bench::e2e::{
    descriptor, free_port, kek_file, padding, record, serve_args, start_etcd, wait_ready, AckTimes,
    Process, Timeline, CLIENT_ID, CLIENT_SECRET, ID_STRIDE,
};
use sluice_bench::stats::Samples;
use sluice_bench::table::Table;

/// Records per stream a timeline can hold.
const CAPACITY: usize = 2_000_000;

/// Cluster benchmark: router overhead, placement balance, drain, commit rate on one table.
#[derive(clap::Parser)]
struct Options {
    /// The `sluice` binary to benchmark.
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Seconds of each measured window.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Producer streams of the router-overhead scenario.
    #[arg(long, default_value_t = 16)]
    streams: usize,
    /// Scenarios to run: overhead, balance, drain, commits, committer, hot.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "overhead,balance,drain,commits,committer"
    )]
    only: Vec<String>,
    /// Pod counts of the commit-rate scenario.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    commit_pods: Vec<usize>,
    /// Pod counts of the committer scenario.
    #[arg(long, value_delimiter = ',', default_value = "1,3")]
    committer_pods: Vec<usize>,
    /// Pod counts of the hot-table scenario (`sluice cluster up --pods N`).
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    hot_pods: Vec<usize>,
    /// Unpaced producer streams of the hot-table scenario.
    #[arg(long, default_value_t = 8)]
    hot_streams: usize,
    /// Folder of this run's clusters.
    #[arg(skip = std::env::temp_dir().join(format!("sluice-cluster-bench-{}", std::process::id())))]
    work: PathBuf,
}

/// etcd, pods and routers of one scenario, under one folder; all killed on drop.
struct Cluster {
    sluice: PathBuf,
    dir: PathBuf,
    join: String,
    _etcd: Process,
    pods: Vec<(String, Process)>,
}

impl Cluster {
    async fn start(opts: &Options, name: &str) -> Result<Cluster> {
        let dir = opts.work.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let (etcd, join) = start_etcd(&dir, "bench").await?;
        Ok(Cluster {
            sluice: opts.sluice.clone(),
            join,
            dir,
            _etcd: etcd,
            pods: Vec::new(),
        })
    }

    /// A cluster with `n` pods `pod-0`… flushing every `flush_interval`, and their URLs.
    async fn with_pods(
        opts: &Options,
        name: &str,
        n: usize,
        flush_interval: &str,
    ) -> Result<(Cluster, Vec<String>)> {
        let mut cluster = Cluster::start(opts, name).await?;
        let mut urls = Vec::new();
        for i in 0..n {
            urls.push(cluster.add_pod(&format!("pod-{i}"), flush_interval).await?);
        }
        Ok((cluster, urls))
    }

    async fn add_pod(&mut self, id: &str, flush_interval: &str) -> Result<String> {
        let port = free_port()?;
        let mut args = serve_args(&self.dir.join(id), port, flush_interval);
        for a in [
            "--join",
            &self.join,
            "--pod-id",
            id,
            "--warehouse",
            &self.dir.join("warehouse").display().to_string(),
            "--drain-grace",
            "10s",
            "--secrets-key-file",
            &self.kek_file()?.display().to_string(),
        ] {
            args.push(a.to_string());
        }
        let url = format!("http://127.0.0.1:{port}");
        let log = self.dir.join(format!("{id}.log"));
        let pod = Process::spawn(&self.sluice, &args, &log, url.clone())?;
        wait_ready(&format!("{url}/healthz")).await?;
        self.pods.push((id.to_string(), pod));
        self.wait_for(|pods| pods.iter().any(|p| p["id"] == id))
            .await?;
        Ok(url)
    }

    async fn router(&self, policy: &str) -> Result<Process> {
        let port = free_port()?;
        let args: Vec<String> = [
            "router",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--join",
            &self.join,
            "--placement",
            policy,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let url = format!("http://127.0.0.1:{port}");
        let log = self.dir.join(format!("router-{policy}.log"));
        let router = Process::spawn(&self.sluice, &args, &log, url.clone())?;
        wait_ready(&format!("{url}/readyz")).await?;
        Ok(router)
    }

    /// The cluster's key-encryption key file.
    fn kek_file(&self) -> Result<PathBuf> {
        kek_file(&self.dir)
    }

    fn status(&self) -> Result<Vec<serde_json::Value>> {
        let out = std::process::Command::new(&self.sluice)
            .args(["cluster", "status", "--json", "--join", &self.join])
            .output()?;
        if !out.status.success() {
            bail!("cluster status: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(serde_json::from_slice(&out.stdout)?)
    }

    async fn wait_for(&self, pred: impl Fn(&[serde_json::Value]) -> bool) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if pred(&self.status()?) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!(
            "cluster did not reach the expected state: {:#?}",
            self.status()?
        )
    }
}

/// One producer: sends until `stop` (at `per_sec` records/s when paced), then flushes and
/// closes. Returns the records sent.
fn spawn_producer(
    sdk: Arc<ZerobusSdk>,
    table: String,
    stream_no: usize,
    timeline: Arc<Timeline>,
    per_sec: Option<u32>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Result<u64>> {
    tokio::spawn(async move {
        let mut stream = sdk
            .stream_builder()
            .table(&table)
            .oauth(CLIENT_ID, CLIENT_SECRET)
            .compiled_proto(descriptor())
            .max_inflight_requests(1000)
            .recovery(true)
            .recovery_retries(1000)
            .recovery_backoff_ms(50)
            .ack_callback(Arc::new(AckTimes::new(timeline.clone())))
            .build()
            .await?;
        let pad = padding();
        let mut sent = 0usize;
        // Paced streams send bursts of 1/10 s worth every 100 ms.
        let burst = per_sec.map(|r| (r / 10).max(1) as usize);
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        while !stop.load(Ordering::Relaxed) && sent < CAPACITY {
            if let Some(burst) = burst {
                tick.tick().await;
                for _ in 0..burst {
                    let rec = record(stream_no as i64 * ID_STRIDE + sent as i64, &pad);
                    let got = stream.ingest_record_offset(ProtoBytes(rec)).await? as usize;
                    timeline.mark_sent(got);
                    sent += 1;
                }
            } else {
                let rec = record(stream_no as i64 * ID_STRIDE + sent as i64, &pad);
                let got = stream.ingest_record_offset(ProtoBytes(rec)).await? as usize;
                timeline.mark_sent(got);
                sent += 1;
            }
        }
        stream.flush().await?;
        stream.close().await?;
        Ok(sent as u64)
    })
}

async fn join_all(tasks: Vec<tokio::task::JoinHandle<Result<u64>>>) -> Result<u64> {
    let mut n = 0;
    for t in tasks {
        n += t.await??;
    }
    Ok(n)
}

/// Ack latencies (ms) of records queued in `[from_ns, to_ns)`, and how many of them were
/// acked by `to_ns`.
fn ack_latencies(timelines: &[Arc<Timeline>], from_ns: u64, to_ns: u64) -> (Samples, u64) {
    let mut samples = Samples::new();
    let mut acked_in_window = 0;
    for tl in timelines {
        for i in 0..CAPACITY {
            let sent = tl.sent[i].load(Ordering::Relaxed);
            if sent == 0 {
                break;
            }
            let acked = tl.acked[i].load(Ordering::Relaxed);
            if sent >= from_ns && sent < to_ns && acked > 0 {
                samples.push(acked.saturating_sub(sent) as f64 / 1e6);
                if acked < to_ns {
                    acked_in_window += 1;
                }
            }
        }
    }
    (samples, acked_in_window)
}

fn cv(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if mean == 0.0 {
        return 0.0;
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    var.sqrt() / mean
}

async fn overhead(opts: &Options) -> Result<()> {
    let mut cluster = Cluster::start(opts, "overhead").await?;
    let pod_url = cluster.add_pod("pod-0", "1s").await?;
    let router = cluster.router("p2c").await?;
    let table = "bench.cluster.overhead";
    sluice_bench::e2e::create_table(&pod_url, table).await?;
    let mut out = Table::new(&[
        "path",
        "streams",
        "records/s",
        "MB/s",
        "ack p50 ms",
        "ack p99 ms",
    ]);
    let mut rates = Vec::new();
    for (path, url) in [("direct to pod", &pod_url), ("via router", &router.url)] {
        let sdk = sluice_bench::e2e::official_sdk(url)?;
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let timelines: Vec<_> = (0..opts.streams)
            .map(|_| Arc::new(Timeline::new(start, CAPACITY)))
            .collect();
        let tasks: Vec<_> = (0..opts.streams)
            .map(|s| {
                spawn_producer(
                    sdk.clone(),
                    table.into(),
                    s,
                    timelines[s].clone(),
                    None,
                    stop.clone(),
                )
            })
            .collect();
        // 1 s warm-up, then the measured window.
        let from = Duration::from_secs(1);
        let to = from + Duration::from_secs(opts.seconds);
        tokio::time::sleep(to).await;
        stop.store(true, Ordering::Relaxed);
        join_all(tasks).await?;
        let (mut lat, acked) =
            ack_latencies(&timelines, from.as_nanos() as u64, to.as_nanos() as u64);
        let rate = acked as f64 / opts.seconds as f64;
        rates.push(rate);
        out.row(vec![
            path.into(),
            opts.streams.to_string(),
            format!("{rate:.0}"),
            format!(
                "{:.2}",
                rate * sluice_bench::e2e::TARGET_RECORD_BYTES as f64 / 1e6
            ),
            format!("{:.1}", lat.median()),
            format!("{:.1}", lat.quantile(0.99)),
        ]);
    }
    println!(
        "\n1. Router overhead (one pod, unpaced streams, {} s window after 1 s warm-up)",
        opts.seconds
    );
    print!("{}", out.render());
    if let [direct, routed] = rates[..] {
        println!(
            "throughput via router: {:+.1} % vs direct",
            (routed / direct - 1.0) * 100.0
        );
    }
    Ok(())
}

async fn balance(opts: &Options) -> Result<()> {
    const PRELOAD: usize = 12;
    const NEW: usize = 24;
    const PER_SEC: u32 = 500;
    let mut cluster = Cluster::start(opts, "balance").await?;
    let pod0 = cluster.add_pod("pod-0", "1s").await?;
    cluster.add_pod("pod-1", "1s").await?;
    cluster.add_pod("pod-2", "1s").await?;
    let table = "bench.cluster.balance";
    sluice_bench::e2e::create_table(&pod0, table).await?;
    let mut out = Table::new(&[
        "policy",
        "new streams pod-0/1/2",
        "CV streams",
        "MiB/s pod-0/1/2",
        "CV bytes/s",
    ]);
    for policy in ["p2c", "round-robin", "random"] {
        let router = cluster.router(policy).await?;
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        let pre_sdk = sluice_bench::e2e::official_sdk(&pod0)?;
        for s in 0..PRELOAD {
            let tl = Arc::new(Timeline::new(start, CAPACITY));
            tasks.push(spawn_producer(
                pre_sdk.clone(),
                table.into(),
                s,
                tl,
                Some(PER_SEC),
                stop.clone(),
            ));
        }
        cluster
            .wait_for(|p| {
                p.iter()
                    .any(|x| x["id"] == "pod-0" && x["load"]["open_streams"] == PRELOAD as u64)
            })
            .await?;
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let new_sdk = sluice_bench::e2e::official_sdk(&router.url)?;
        for s in PRELOAD..PRELOAD + NEW {
            let tl = Arc::new(Timeline::new(start, CAPACITY));
            tasks.push(spawn_producer(
                new_sdk.clone(),
                table.into(),
                s,
                tl,
                Some(PER_SEC),
                stop.clone(),
            ));
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        let pods = cluster.status()?;
        stop.store(true, Ordering::Relaxed);
        join_all(tasks).await?;
        drop(router);
        let streams: Vec<f64> = ["pod-0", "pod-1", "pod-2"]
            .iter()
            .map(|id| {
                pods.iter()
                    .find(|p| p["id"] == *id)
                    .and_then(|p| p["load"]["open_streams"].as_f64())
                    .unwrap_or(0.0)
            })
            .collect();
        let bytes: Vec<f64> = ["pod-0", "pod-1", "pod-2"]
            .iter()
            .map(|id| {
                pods.iter()
                    .find(|p| p["id"] == *id)
                    .and_then(|p| p["load"]["ingress_bytes_per_sec"].as_f64())
                    .unwrap_or(0.0)
            })
            .collect();
        let new: Vec<String> = streams
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{}", *s as usize - if i == 0 { PRELOAD } else { 0 }))
            .collect();
        out.row(vec![
            policy.into(),
            new.join("/"),
            format!("{:.2}", cv(&streams)),
            bytes
                .iter()
                .map(|b| format!("{:.2}", b / (1024.0 * 1024.0)))
                .collect::<Vec<_>>()
                .join("/"),
            format!("{:.2}", cv(&bytes)),
        ]);
        cluster
            .wait_for(|p| p.iter().all(|x| x["load"]["open_streams"] == 0))
            .await?;
    }
    println!(
        "\n2. Placement balance (3 pods; pod-0 pre-loaded with {PRELOAD} streams; {NEW} new streams \
         through the router, 150 ms apart; every stream {PER_SEC} records/s; figures from the pods' \
         load reports 3 s after the last stream opened)"
    );
    print!("{}", out.render());
    Ok(())
}

async fn drain(opts: &Options) -> Result<()> {
    const STREAMS: usize = 64;
    const PER_SEC: u32 = 100;
    let mut cluster = Cluster::start(opts, "drain").await?;
    let pod0 = cluster.add_pod("pod-0", "1s").await?;
    let router = cluster.router("p2c").await?;
    let table = "bench.cluster.drain";
    sluice_bench::e2e::create_table(&pod0, table).await?;
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let sdk = sluice_bench::e2e::official_sdk(&router.url)?;
    let timelines: Vec<_> = (0..STREAMS)
        .map(|_| Arc::new(Timeline::new(start, CAPACITY)))
        .collect();
    let tasks: Vec<_> = (0..STREAMS)
        .map(|s| {
            spawn_producer(
                sdk.clone(),
                table.into(),
                s,
                timelines[s].clone(),
                Some(PER_SEC),
                stop.clone(),
            )
        })
        .collect();
    cluster
        .wait_for(|p| {
            p.iter()
                .any(|x| x["id"] == "pod-0" && x["load"]["open_streams"] == STREAMS as u64)
        })
        .await?;
    cluster.add_pod("pod-1", "1s").await?;
    cluster.add_pod("pod-2", "1s").await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let drain_from = start.elapsed();
    let out = std::process::Command::new(&cluster.sluice)
        .args(["pod", "drain", "pod-0", "--join", &cluster.join])
        .output()?;
    if !out.status.success() {
        bail!("pod drain: {}", String::from_utf8_lossy(&out.stderr));
    }
    let (_, pod) = cluster
        .pods
        .iter_mut()
        .find(|(id, _)| id == "pod-0")
        .context("pod-0")?;
    pod.wait_exit(Duration::from_secs(60))?;
    let drain_to = start.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let moved = cluster.status()?;
    stop.store(true, Ordering::Relaxed);
    join_all(tasks).await?;
    let (mut lat, _) = ack_latencies(
        &timelines,
        drain_from.as_nanos() as u64,
        drain_to.as_nanos() as u64,
    );
    let on: Vec<String> = moved
        .iter()
        .map(|p| {
            format!(
                "{}={}",
                p["id"].as_str().unwrap_or("?"),
                p["load"]["open_streams"]
            )
        })
        .collect();
    let mut t = Table::new(&[
        "streams",
        "drain s",
        "ack p50 ms",
        "ack p99 ms",
        "max ack stall ms",
        "streams after",
    ]);
    t.row(vec![
        STREAMS.to_string(),
        format!("{:.2}", (drain_to - drain_from).as_secs_f64()),
        format!("{:.1}", lat.median()),
        format!("{:.1}", lat.quantile(0.99)),
        format!("{:.1}", lat.quantile(1.0)),
        on.join(" "),
    ]);
    println!(
        "\n3. Drain ({STREAMS} streams x {PER_SEC} records/s on pod-0, two idle pods; from `sluice pod drain` \
         to pod-0's exit; ack latency of records queued meanwhile)"
    );
    print!("{}", t.render());
    Ok(())
}

async fn metric_sum(url: &str, name: &str) -> f64 {
    let Ok(resp) = reqwest::get(format!("{url}/metrics")).await else {
        return 0.0;
    };
    let text = resp.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn commits(opts: &Options) -> Result<()> {
    const PER_SEC: u32 = 1000;
    let mut out = Table::new(&[
        "pods",
        "flush interval",
        "table commits/s",
        "per pod/s",
        "commit failures",
    ]);
    for &n in &opts.commit_pods {
        let (_cluster, urls) = Cluster::with_pods(opts, &format!("commits-{n}"), n, "10ms").await?;
        let table = "bench.cluster.commits";
        let location = sluice_bench::e2e::create_table(&urls[0], table).await?;
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for (i, url) in urls.iter().enumerate() {
            let tl = Arc::new(Timeline::new(start, CAPACITY));
            tasks.push(spawn_producer(
                sluice_bench::e2e::official_sdk(url)?,
                table.into(),
                i,
                tl,
                Some(PER_SEC),
                stop.clone(),
            ));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let url = url::Url::parse(&location)?;
        let v0 = deltalake::open_table(url.clone())
            .await?
            .version()
            .unwrap_or(0);
        tokio::time::sleep(Duration::from_secs(opts.seconds)).await;
        let v1 = deltalake::open_table(url).await?.version().unwrap_or(0);
        let mut failures = 0.0;
        for u in &urls {
            failures += metric_sum(u, "sluice_sink_commit_failures_total").await;
        }
        stop.store(true, Ordering::Relaxed);
        join_all(tasks).await?;
        let rate = (v1 - v0) as f64 / opts.seconds as f64;
        out.row(vec![
            n.to_string(),
            "10ms".into(),
            format!("{rate:.1}"),
            format!("{:.1}", rate / n as f64),
            format!("{failures:.0}"),
        ]);
    }
    println!(
        "\n4. Commit rate on one Delta table (local-folder warehouse; each pod one stream of \
         {PER_SEC} records/s and --flush-interval 10ms, so every pod commits as fast as it can)"
    );
    print!("{}", out.render());
    Ok(())
}

/// Data commits (with `add` actions that change data) in the table's log whose commit
/// time is in `[from_ms, to_ms)`.
fn data_commits_between(location: &str, from_ms: i64, to_ms: i64) -> Result<usize> {
    let dir = url::Url::parse(location)?
        .to_file_path()
        .map_err(|_| anyhow::anyhow!("not a local table: {location}"))?
        .join("_delta_log");
    let mut n = 0;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let (mut time, mut data) = (0i64, false);
        for line in std::fs::read_to_string(&path)?.lines() {
            let action: serde_json::Value = serde_json::from_str(line)?;
            if let Some(add) = action.get("add") {
                data |= add["dataChange"].as_bool().unwrap_or(true);
            }
            if let Some(info) = action.get("commitInfo") {
                time = info["timestamp"].as_i64().unwrap_or(0);
            }
        }
        n += usize::from(data && time >= from_ms && time < to_ms);
    }
    Ok(n)
}

/// Every `id` in the table's live files: (rows, distinct ids).
async fn ids_in(location: &str) -> Result<(usize, usize)> {
    let table = deltalake::open_table(url::Url::parse(location)?).await?;
    let mut ids = std::collections::HashSet::new();
    let mut rows = 0;
    for uri in table.get_file_uris()?.collect::<Vec<_>>() {
        // Local files come as plain paths or as file:// URLs.
        let path = url::Url::parse(&uri)
            .ok()
            .and_then(|u| u.to_file_path().ok())
            .unwrap_or_else(|| PathBuf::from(&uri));
        let col = sluice_bench::freshness::ids_of(&path)?;
        rows += col.len();
        ids.extend(col);
    }
    Ok((rows, ids.len()))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

async fn committer(opts: &Options) -> Result<()> {
    const STREAMS: usize = 6;
    const PER_SEC: u32 = 1000;
    let mut out = Table::new(&[
        "pods",
        "table commits/s",
        "rows/s",
        "records sent",
        "rows in Delta",
        "distinct ids",
    ]);
    for &n in &opts.committer_pods {
        let (cluster, urls) =
            Cluster::with_pods(opts, &format!("committer-{n}"), n, "250ms").await?;
        let router = cluster.router("p2c").await?;
        let table = "bench.cluster.committer";
        let location = sluice_bench::e2e::create_table(&urls[0], table).await?;
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let sdk = sluice_bench::e2e::official_sdk(&router.url)?;
        let tasks: Vec<_> = (0..STREAMS)
            .map(|i| {
                let tl = Arc::new(Timeline::new(start, CAPACITY));
                spawn_producer(
                    sdk.clone(),
                    table.into(),
                    i,
                    tl,
                    Some(PER_SEC),
                    stop.clone(),
                )
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (from, rows0) = (now_ms(), ids_in(&location).await?.0);
        tokio::time::sleep(Duration::from_secs(opts.seconds)).await;
        let (to, rows1) = (now_ms(), ids_in(&location).await?.0);
        stop.store(true, Ordering::Relaxed);
        let sent = join_all(tasks).await?;
        // The last hand-offs: wait until the table holds what was sent (or 30 s).
        let deadline = Instant::now() + Duration::from_secs(30);
        let (mut rows, mut distinct) = ids_in(&location).await?;
        while (rows as u64) < sent && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(500)).await;
            (rows, distinct) = ids_in(&location).await?;
        }
        let seconds = (to - from) as f64 / 1000.0;
        let commits = data_commits_between(&location, from, to)?;
        out.row(vec![
            n.to_string(),
            format!("{:.2}", commits as f64 / seconds),
            format!("{:.0}", (rows1 - rows0) as f64 / seconds),
            sent.to_string(),
            rows.to_string(),
            distinct.to_string(),
        ]);
        drop(router);
    }
    println!(
        "\n5. One committer per table: etcd + N pods + router, one table, {STREAMS} official-SDK \
         streams through the router at {PER_SEC} records/s each, --flush-interval 250ms, \
         default --commit-interval (250 ms)"
    );
    print!("{}", out.render());
    Ok(())
}

/// `sluice cluster up --pods n` as a child (its pods, etcd and router are its children),
/// on free ports under `dir`; returns it and the router's URL once a request through the
/// router reaches a pod.
async fn cluster_up(opts: &Options, dir: &Path, n: usize) -> Result<(Process, String)> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    // etcd takes port and port + 1, pods first..first + n: find free runs.
    let etcd_port = free_run(2)?;
    let first_pod = free_run(n as u16)?;
    let router = format!("127.0.0.1:{}", free_port()?);
    let args: Vec<String> = [
        "cluster",
        "up",
        "--pods",
        &n.to_string(),
        "--dir",
        &dir.display().to_string(),
        "--etcd-port",
        &etcd_port.to_string(),
        "--first-pod-port",
        &first_pod.to_string(),
        "--router-listen",
        &router,
        "--bootstrap-principal",
        &format!("{CLIENT_ID}:{CLIENT_SECRET}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let url = format!("http://{router}");
    let up = Process::spawn(&opts.sluice, &args, &dir.join("up.log"), url.clone())?;
    // The tables API answers through the router once a pod is placeable.
    let deadline = Instant::now() + Duration::from_secs(60);
    while sluice_bench::e2e::token(&url).await.is_err() {
        if Instant::now() > deadline {
            bail!("cluster up with {n} pods did not answer through its router");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok((up, url))
}

/// The first of `len` consecutive free loopback ports.
fn free_run(len: u16) -> Result<u16> {
    for _ in 0..100 {
        let first = free_port()?;
        let ok = (0..len).all(|i| {
            first
                .checked_add(i)
                .is_some_and(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        });
        if ok {
            return Ok(first);
        }
    }
    bail!("no run of {len} free ports")
}

async fn hot(opts: &Options) -> Result<()> {
    let mut out = Table::new(&[
        "pods",
        "rows/s",
        "MB/s",
        "pod CPU s/GB",
        "commits/s",
        "files/commit",
        "KiB/file",
        "freshness p50 ms",
        "freshness p99 ms",
        "rows once",
    ]);
    for &n in &opts.hot_pods {
        let dir = opts.work.join(format!("hot-{n}"));
        let (mut up, url) = cluster_up(opts, &dir, n).await?;
        let table = "bench.cluster.hot";
        let location = sluice_bench::e2e::create_table(&url, table).await?;
        let table_dir = url::Url::parse(&location)?
            .to_file_path()
            .map_err(|_| anyhow::anyhow!("not a local table: {location}"))?;
        let pods = sluice_bench::procstat::children_matching(up.child.id(), "serve")?;
        let (wall0, start) = (now_ms() as f64, Instant::now());
        let stop = Arc::new(AtomicBool::new(false));
        let sdk = sluice_bench::e2e::official_sdk(&url)?;
        let timelines: Vec<_> = (0..opts.hot_streams)
            .map(|_| Arc::new(Timeline::new(start, CAPACITY)))
            .collect();
        let tasks: Vec<_> = timelines
            .iter()
            .enumerate()
            .map(|(i, tl)| {
                spawn_producer(sdk.clone(), table.into(), i, tl.clone(), None, stop.clone())
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (from, cpu0) = (now_ms(), sluice_bench::procstat::cpu_seconds_sum(&pods));
        tokio::time::sleep(Duration::from_secs(opts.seconds)).await;
        let (to, cpu1) = (now_ms(), sluice_bench::procstat::cpu_seconds_sum(&pods));
        stop.store(true, Ordering::Relaxed);
        let sent = join_all(tasks).await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        let (mut rows, mut distinct) = ids_in(&location).await?;
        while (rows as u64) < sent && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(500)).await;
            (rows, distinct) = ids_in(&location).await?;
        }
        let sent_ms = |id: i64| {
            let tl = timelines.get(usize::try_from(id / ID_STRIDE).ok()?)?;
            let ns = tl.sent.get(usize::try_from(id % ID_STRIDE).ok()?)?;
            let ns = ns.load(Ordering::Relaxed);
            (ns > 0).then(|| wall0 + ns as f64 / 1e6)
        };
        let mut w = sluice_bench::freshness::window(&table_dir, from, to, sent_ms)?;
        let seconds = (to - from) as f64 / 1000.0;
        let bytes = w.rows as f64 * sluice_bench::e2e::TARGET_RECORD_BYTES as f64;
        out.row(vec![
            n.to_string(),
            format!("{:.0}", w.rows as f64 / seconds),
            format!("{:.1}", bytes / seconds / 1e6),
            format!("{:.0}", (cpu1 - cpu0) / (bytes / 1e9)),
            format!("{:.2}", w.commits as f64 / seconds),
            format!("{:.1}", w.files as f64 / w.commits.max(1) as f64),
            format!(
                "{:.0}",
                w.file_bytes as f64 / w.files.max(1) as f64 / 1024.0
            ),
            format!("{:.0}", w.freshness_ms.quantile(0.5)),
            format!("{:.0}", w.freshness_ms.quantile(0.99)),
            format!("{}", rows as u64 == sent && distinct == rows),
        ]);
        up.terminate();
        if up.wait_exit(Duration::from_secs(60)).is_err() {
            eprintln!("cluster up with {n} pods did not stop within 60 s; killing it");
        }
    }
    println!(
        "\n6. Hot table: `sluice cluster up --pods N` (etcd, N pods, a router; default flush \
         and commit intervals, 1 s and 250 ms), one table, {} unpaced official-SDK streams through the \
         router; rows and freshness of the commits in the {} s window (rows/s counts committed \
         rows; MB/s at ~{} B per record; pod CPU summed over the pods from /proc)",
        opts.hot_streams,
        opts.seconds,
        sluice_bench::e2e::TARGET_RECORD_BYTES
    );
    print!("{}", out.render());
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let opts = Options::parse();
    sluice_bench::server::require_binary(&opts.sluice)?;
    println!(
        "Sluice cluster benchmark: official Rust SDK 2.12.0, ~{}-byte proto records, {} cores, \
         everything (etcd, pods, router, producers) on this machine",
        sluice_bench::e2e::TARGET_RECORD_BYTES,
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    for scenario in &opts.only {
        match scenario.as_str() {
            "overhead" => overhead(&opts).await?,
            "balance" => balance(&opts).await?,
            "drain" => drain(&opts).await?,
            "commits" => commits(&opts).await?,
            "committer" => committer(&opts).await?,
            "hot" => hot(&opts).await?,
            other => bail!("unknown scenario {other}"),
        }
    }
    let _ = std::fs::remove_dir_all(&opts.work);
    Ok(())
}
