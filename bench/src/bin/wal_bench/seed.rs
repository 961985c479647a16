//! The seed recipe through the WAL: one writer, 2300-byte records, each awaited until
//! durable (so every record gets its own fdatasync). Run twice: on a fresh log, whose first
//! segment is `fallocate`d (like fio's fresh file), and on the zero-filled segment a running
//! log rotates into (like fio `--overwrite=1`); and a third time on a fresh log written
//! through `O_DIRECT`.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use sluice_bench::stats::Samples;
use sluice_wal::{Wal, WalOptions};

use crate::counting_fs::CountingFs;

/// Which segment the measured records go to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Segment {
    /// The first segment of a fresh log (`fallocate`d at open).
    First,
    /// The same, written through `O_DIRECT` (`WalOptions::direct_io`).
    FirstDirect,
    /// A prepared (zero-filled) segment, adopted at a rotation.
    Prepared,
}

/// Filler frame used to reach a rotation onto a prepared segment.
const FILLER_BYTES: usize = 1 << 20;
/// Give up if no prepared segment was adopted after this many filler frames.
const MAX_FILLER_FRAMES: usize = 2048;

pub struct SeedResult {
    pub iops: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

pub async fn run(dir: &Path, bytes: u64, segment: Segment) -> anyhow::Result<SeedResult> {
    let _ = std::fs::remove_dir_all(dir);
    let fs = if segment == Segment::FirstDirect {
        CountingFs::direct()
    } else {
        CountingFs::default()
    };
    let mut opts = WalOptions::new(dir);
    opts.prepare_segments = segment == Segment::Prepared;
    let (wal, _) = Wal::open_with_fs(opts, Arc::new(fs.clone()))?;
    if segment == Segment::Prepared {
        rotate_onto_prepared(&wal, &fs).await?;
    }
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

/// Appends durable 1 MiB filler frames until a rotation has adopted a prepared segment; at
/// most one filler frame is then in it, so the measured records fit behind it.
async fn rotate_onto_prepared(wal: &Wal, fs: &CountingFs) -> anyhow::Result<()> {
    let filler = vec![0xa5u8; FILLER_BYTES];
    for _ in 0..MAX_FILLER_FRAMES {
        let r = wal.reserve(filler.len()).await?;
        let end = wal.append(r, 1, filler.clone())?;
        wal.wait_durable(end).await?;
        if fs.adopted() > 0 {
            return Ok(());
        }
    }
    anyhow::bail!("no prepared segment adopted after {MAX_FILLER_FRAMES} MiB of filler frames")
}
