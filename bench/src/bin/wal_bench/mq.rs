//! The message-queue scenarios of the Milvus comparison of NATS and RocksMQ, on Sluice's
//! WAL alone: publish N messages of a size (every one durable: the last append is awaited
//! and the writer fsyncs every batch), then read them all back. Reports seconds per
//! operation, peak RSS, CPU seconds and bytes on disk. (The NATS JetStream and RocksDB
//! peers are not wired in yet.)

use std::path::Path;
use std::time::{Duration, Instant};

use sluice_wal::{Wal, WalOptions};

/// (message bytes, messages) per scenario.
pub const SCENARIOS: [(usize, usize); 4] = [
    (1 << 10, 50_000),
    (64 << 10, 10_000),
    (1 << 20, 500),
    (5 << 20, 100),
];

pub struct MqResult {
    pub publish: Duration,
    pub read: Duration,
    pub cpu_s: f64,
    pub peak_rss_mb: f64,
    pub disk_mb: f64,
}

pub async fn run(dir: &Path, size: usize, count: usize) -> anyhow::Result<MqResult> {
    let _ = std::fs::remove_dir_all(dir);
    let cpu_before = cpu_seconds();
    let (wal, _) = Wal::open(WalOptions::new(dir))?;
    let message = vec![0x42u8; size];
    let started = Instant::now();
    let mut last = 0;
    for _ in 0..count {
        let r = wal.reserve(size).await?;
        last = wal.append(r, 1, message.clone())?;
    }
    wal.wait_durable(last).await?;
    let publish = started.elapsed();
    let started = Instant::now();
    let mut read = 0usize;
    for frame in wal.read_from(0)? {
        read += frame?.payload.len();
    }
    let read_time = started.elapsed();
    anyhow::ensure!(read == size * count, "read back {read} bytes");
    wal.close()?;
    drop(wal);
    let disk_mb = allocated_bytes(dir) as f64 / 1e6;
    let _ = std::fs::remove_dir_all(dir);
    Ok(MqResult {
        publish,
        read: read_time,
        cpu_s: cpu_seconds() - cpu_before,
        peak_rss_mb: peak_rss_bytes() as f64 / 1e6,
        disk_mb,
    })
}

/// Bytes of disk the directory's files occupy (allocated blocks: preallocation counts).
fn allocated_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.blocks() * 512)
        .sum()
}

fn rusage() -> libc::rusage {
    // SAFETY: getrusage only writes into the zeroed struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage
}

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let u = rusage();
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// Peak resident set size of this process so far (a high-water mark over the whole run).
fn peak_rss_bytes() -> u64 {
    rusage().ru_maxrss as u64 * 1024
}
