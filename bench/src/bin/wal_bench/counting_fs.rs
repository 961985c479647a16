//! A [`FileSystem`] that times `pwritev` calls, counts and times `fdatasync` calls, and counts the prepared segments
//! adopted (besides a purge, which this bench never runs, the WAL renames only those): the WAL's own seam, used to report fsyncs/s, the
//! fdatasync latency the disk gave during a run and the rotations, without touching the log.

use std::io::{self, IoSlice};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use sluice_bench::stats::Samples;

use sluice_wal::env::{DefaultFileSystem, DirectFileSystem, FileSystem, WritableFile};

/// The real file system plus shared counters.
#[derive(Clone, Default)]
pub struct CountingFs {
    counters: Arc<Counters>,
    /// Segments written through `O_DIRECT` ([`DirectFileSystem`]).
    direct: bool,
}

#[derive(Default)]
struct Counters {
    syncs: AtomicU64,
    renames: AtomicU64,
    /// Duration of every file `fdatasync`, in milliseconds.
    sync_ms: Mutex<Samples>,
    /// Duration of every `pwritev` call, in milliseconds.
    write_ms: Mutex<Samples>,
}

impl CountingFs {
    /// Counting over [`DirectFileSystem`]: segments written through `O_DIRECT`.
    pub fn direct() -> Self {
        CountingFs {
            direct: true,
            ..Self::default()
        }
    }

    pub fn syncs(&self) -> u64 {
        self.counters.syncs.load(Ordering::Relaxed)
    }

    /// Prepared (zero-filled) segments adopted by a rotation: without purges, the WAL renames
    /// only those.
    pub fn adopted(&self) -> u64 {
        self.counters.renames.load(Ordering::Relaxed)
    }

    /// The `fdatasync` durations recorded so far.
    pub fn sync_ms(&self) -> Samples {
        lock(&self.counters.sync_ms).clone()
    }

    /// The `pwritev` durations recorded so far.
    pub fn write_ms(&self) -> Samples {
        lock(&self.counters.write_ms).clone()
    }
}

struct CountingFile {
    inner: Box<dyn WritableFile>,
    counters: Arc<Counters>,
}

impl WritableFile for CountingFile {
    fn write_vectored_at(&mut self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        let started = Instant::now();
        let written = self.inner.write_vectored_at(bufs, offset)?;
        lock(&self.counters.write_ms).push_ms(started.elapsed());
        Ok(written)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        let started = Instant::now();
        self.inner.sync_data()?;
        let took = started.elapsed();
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        lock(&self.counters.sync_ms).push_ms(took);
        Ok(())
    }
}

fn lock(samples: &Mutex<Samples>) -> std::sync::MutexGuard<'_, Samples> {
    samples.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The other operations are the trait's defaults: the real file system.
impl FileSystem for CountingFs {
    fn create_preallocated(&self, path: &Path, len: u64) -> io::Result<Box<dyn WritableFile>> {
        let inner = if self.direct {
            DirectFileSystem.create_preallocated(path, len)?
        } else {
            DefaultFileSystem.create_preallocated(path, len)?
        };
        Ok(Box::new(CountingFile {
            inner,
            counters: Arc::clone(&self.counters),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        DefaultFileSystem.rename(from, to)?;
        self.counters.renames.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
