//! Group-commit scaling: N tasks each append a record and wait until it is durable, in a
//! loop, for a fixed time. One fdatasync covers whatever arrived while the previous one ran.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_bench::stats::Samples;
use sluice_wal::{Wal, WalOptions};

use crate::counting_fs::CountingFs;

pub struct ScalingResult {
    pub records_per_s: f64,
    pub mb_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub fsyncs_per_s: f64,
    /// The disk's fdatasync latency during the run (every sync, rotations included).
    pub sync_p50_ms: f64,
    pub sync_p99_ms: f64,
    /// Median time of one `pwritev` (a batch's frames, the preparer's zeros too).
    pub write_p50_ms: f64,
    /// Rotations during the run, and how many of them adopted a prepared segment.
    pub rotations: u64,
    pub adopted: u64,
}

pub async fn run(
    dir: &Path,
    appenders: usize,
    size: usize,
    duration: Duration,
    prepare_segments: bool,
) -> anyhow::Result<ScalingResult> {
    let _ = std::fs::remove_dir_all(dir);
    let fs = CountingFs::default();
    let mut opts = WalOptions::new(dir);
    opts.prepare_segments = prepare_segments;
    let (wal, _) = Wal::open_with_fs(opts, Arc::new(fs.clone()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let syncs_before = fs.syncs();
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(appenders);
    for a in 0..appenders {
        let wal = wal.clone();
        let stop = Arc::clone(&stop);
        tasks.push(tokio::spawn(
            async move { appender(wal, a, size, stop).await },
        ));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut lat = Samples::new();
    let mut records = 0u64;
    for t in tasks {
        let (n, l) = t.await??;
        records += n;
        lat.extend(&l);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let syncs = fs.syncs() - syncs_before;
    let mut sync_ms = fs.sync_ms();
    let mut write_ms = fs.write_ms();
    let adopted = fs.adopted();
    // The first segment is created at open; every other one was created or adopted by a
    // rotation (a created spare that was never adopted is not a rotation).
    let rotations = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "wal"))
        .count()
        .saturating_sub(1) as u64;
    wal.close()?;
    Ok(ScalingResult {
        records_per_s: records as f64 / elapsed,
        mb_per_s: records as f64 * size as f64 / 1e6 / elapsed,
        p50_ms: lat.quantile(0.50),
        p99_ms: lat.quantile(0.99),
        fsyncs_per_s: syncs as f64 / elapsed,
        sync_p50_ms: sync_ms.quantile(0.50),
        sync_p99_ms: sync_ms.quantile(0.99),
        write_p50_ms: write_ms.quantile(0.50),
        rotations,
        adopted,
    })
}

async fn appender(
    wal: Wal,
    id: usize,
    size: usize,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<(u64, Samples)> {
    let mut lat = Samples::new();
    let mut n = 0u64;
    let payload = vec![(id % 251) as u8 | 1; size];
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let r = wal.reserve(size).await?;
        let end = wal.append(r, 1, payload.clone())?;
        wal.wait_durable(end).await?;
        lat.push_ms(t.elapsed());
        n += 1;
    }
    Ok((n, lat))
}

/// The run whose records/s is the median (its latencies come with it, so a row is one real
/// run, not a mix).
pub fn median(mut runs: Vec<ScalingResult>) -> ScalingResult {
    runs.sort_by(|a, b| a.records_per_s.total_cmp(&b.records_per_s));
    let mid = runs.len() / 2;
    runs.swap_remove(mid)
}
