//! The scenarios on Sluice's WAL with its defaults (fsync durability, 64 MiB preallocated
//! segments): one task appends, keeping `window` frames unacknowledged, then reads every
//! frame back.

use std::collections::VecDeque;
use std::path::Path;
use std::time::Instant;

use sluice_wal::{Wal, WalOptions};

use super::{check, message, usage, window, Measured};

pub async fn run(dir: &Path, size: usize, count: usize) -> anyhow::Result<Measured> {
    let (wal, _) = Wal::open(WalOptions::new(dir))?;
    let window = window(size);
    let started = Instant::now();
    let mut pending = VecDeque::with_capacity(window);
    for seq in 0..count as u64 {
        if pending.len() == window {
            if let Some(oldest) = pending.pop_front() {
                wal.wait_durable(oldest).await?;
            }
        }
        let r = wal.reserve(size).await?;
        pending.push_back(wal.append(r, 1, message(seq, size))?);
    }
    if let Some(&last) = pending.back() {
        wal.wait_durable(last).await?;
    }
    let publish = started.elapsed();
    let disk_bytes = usage::allocated_bytes(dir);

    let started = Instant::now();
    let mut seq = 0u64;
    for frame in wal.read_from(0)? {
        check(seq, size, &frame?.payload)?;
        seq += 1;
    }
    let read = started.elapsed();
    anyhow::ensure!(seq == count as u64, "read back {seq} of {count} messages");
    wal.close()?;
    Ok(Measured {
        publish,
        read,
        disk_bytes,
        server: None,
    })
}
