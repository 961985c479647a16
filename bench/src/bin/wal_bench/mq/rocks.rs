//! The scenarios on RocksDB (feature `peers`): default options, every `put` with
//! `sync = true` (its WAL is fsync'd before the put returns; concurrent puts share one
//! write group and one fsync). `window` threads put one message at a time, keyed by the
//! big-endian sequence number so that iteration order is publish order; then one iterator
//! reads everything back.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rocksdb::{IteratorMode, Options, WriteOptions, DB};

use super::{check, message, usage, window, Measured};

pub fn run(dir: &Path, size: usize, count: usize) -> anyhow::Result<Measured> {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    let db = DB::open(&opts, dir)?;
    let next = AtomicU64::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..window(size))
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<()> {
                    let mut sync = WriteOptions::default();
                    sync.set_sync(true);
                    loop {
                        let seq = next.fetch_add(1, Ordering::Relaxed);
                        if seq >= count as u64 {
                            return Ok(());
                        }
                        db.put_opt(seq.to_be_bytes(), message(seq, size), &sync)?;
                    }
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .map_err(|_| anyhow::anyhow!("a RocksDB writer panicked"))?
        })
    })?;
    let publish = started.elapsed();
    let disk_bytes = usage::allocated_bytes(dir);

    let started = Instant::now();
    let mut seq = 0u64;
    for item in db.iterator(IteratorMode::Start) {
        let (key, value) = item?;
        anyhow::ensure!(*key == seq.to_be_bytes(), "key out of order at {seq}");
        check(seq, size, &value)?;
        seq += 1;
    }
    let read = started.elapsed();
    anyhow::ensure!(seq == count as u64, "read back {seq} of {count} messages");
    drop(db);
    Ok(Measured {
        publish,
        read,
        disk_bytes,
        server: None,
    })
}
