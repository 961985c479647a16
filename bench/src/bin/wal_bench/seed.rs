//! The seed recipe through the WAL: one writer, 2300-byte records, each awaited until
//! durable (so every record gets its own fdatasync).

use std::path::Path;
use std::time::Instant;

use sluice_bench::stats::Samples;
use sluice_wal::{Wal, WalOptions};

pub struct SeedResult {
    pub iops: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

pub async fn run(dir: &Path, bytes: u64) -> anyhow::Result<SeedResult> {
    let _ = std::fs::remove_dir_all(dir);
    let (wal, _) = Wal::open(WalOptions::new(dir))?;
    let records = (bytes / 2300).max(1);
    let mut lat = Samples::new();
    let started = Instant::now();
    for i in 0..records {
        let payload = vec![(i % 251) as u8 | 1; 2300];
        let t = Instant::now();
        let r = wal.reserve(payload.len()).await?;
        let end = wal.append(r, 1, payload)?;
        wal.wait_durable(end).await?;
        lat.push_ms(t.elapsed());
    }
    let elapsed = started.elapsed();
    wal.close()?;
    drop(wal);
    let _ = std::fs::remove_dir_all(dir);
    Ok(SeedResult {
        iops: records as f64 / elapsed.as_secs_f64(),
        p50_ms: lat.quantile(0.50),
        p99_ms: lat.quantile(0.99),
    })
}
