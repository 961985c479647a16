//! Prepared segments (opt-in, `WalOptions::prepare_segments`): a background thread keeps one
//! zero-filled, synced segment file ready so that the writer's fdatasyncs into it skip
//! block-allocation journaling.
//!
//! # Why
//!
//! `fallocate` reserves blocks as *unwritten* extents. On ext4 and XFS the first write into
//! such an extent converts it to written, a metadata change that every `fdatasync` covering
//! that write must journal: each sync is a data flush plus a journal commit. A file whose
//! blocks were really written once (zeros) has no unwritten extents left, so an `fdatasync`
//! of frames written into it is a data flush only. On this project's dev machine that cut
//! fio's seed-recipe fdatasync p50 from 0.17 to 0.11-0.12 ms (`fio --overwrite=1` against the
//! default, which preallocates). PostgreSQL zero-fills its WAL segments for the same reason
//! (`wal_init_zero`).
//!
//! # Why it is off by default
//!
//! The zeros compete with the writer for the disk. Measured with `wal-bench`: written in
//! 1 MiB steps whenever asked, they raised 256 appenders' ack p99 from 1.04 to 4.81 ms (200 B
//! records); gated as below, 256 appenders are unaffected (the preparer rarely gets a turn),
//! but a single closed-loop writer's ack p99 doubles while a segment is being prepared. And
//! every segment is written twice.
//!
//! # How
//!
//! Zero-filling a 64 MiB segment takes ~0.1-0.3 s of disk time, far too long for the writer's
//! critical path, so it happens here, one segment ahead, in 256 KiB steps, each synced, taken
//! only while the writer is blocked waiting for work. The writer asks for a spare once its
//! active segment is half full (so a log that never fills a segment never writes one), takes
//! the prepared file at rotation (header, `fdatasync`, rename, directory fsync:
//! [`crate::segment`]) and thereby asks for the next one. If none is ready (the writer outran
//! the preparer, or preparing failed, e.g. on a full disk) the writer creates a segment the
//! old way (`fallocate`), so a slow or failing preparer never delays or fails an append.
//! There are no timers: the thread sleeps on a condition variable until the writer wants a
//! spare or goes idle, and a failed attempt is not retried until the writer asks again.
//!
//! A spare is `{dir}/prepared-{n}.tmp`: it never matches a segment name, recovery ignores it,
//! and [`remove_leftovers`] deletes any at open (a crash can leave one, complete or not).
//! The first segment of an open log is created with `fallocate` (zero-filling it would delay
//! every open); every later one comes from here when ready.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::env::{FileSystem, WritableFile};
use crate::error::{Result, WalError};
use crate::fs;
use crate::sync::lock;

/// File name prefix and suffix of prepared segments.
const PREFIX: &str = "prepared-";
const SUFFIX: &str = ".tmp";
/// Zeros written (and synced) per step while preparing: a writer batch that arrives
/// during a step waits for at most this much device time (~0.5 ms here).
const ZERO_CHUNK: usize = 256 << 10;

/// A zero-filled file of `len` bytes, synced, not yet a segment.
pub(crate) struct Spare {
    pub file: Box<dyn WritableFile>,
    pub path: PathBuf,
    pub len: u64,
}

/// What the writer and the preparer thread share.
#[derive(Default)]
struct Slot {
    ready: Option<Spare>,
    /// The writer wants a (next) spare.
    wanted: bool,
    /// The writer is blocked waiting for work: the disk is the preparer's.
    writer_idle: bool,
    /// The thread is preparing a spare (and may wait for `writer_idle`).
    preparing: bool,
    stop: bool,
}

impl Slot {
    /// Whether the thread must wake: to stop, or to prepare a wanted spare.
    fn has_work(&self) -> bool {
        self.stop || (self.wanted && self.ready.is_none())
    }
}

/// The preparer thread and its slot. [`Preparer::stop`] is what the log calls; dropping it
/// without that only tells the thread to end (an unused spare then stays until the next open).
pub(crate) struct Preparer {
    shared: Arc<(Mutex<Slot>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Preparer {
    /// Starts the thread, idle until the first [`Preparer::request`] or [`Preparer::take`].
    pub(crate) fn start(env: Arc<dyn FileSystem>, dir: PathBuf, len: u64) -> Result<Self> {
        let shared = Arc::new((Mutex::new(Slot::default()), Condvar::new()));
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("sluice-wal-prep".into())
            .spawn(move || run(env.as_ref(), &dir, len, &thread_shared))
            .map_err(|e| WalError::io("spawn the WAL segment preparer thread", e))?;
        Ok(Preparer {
            shared,
            thread: Some(thread),
        })
    }

    /// Asks for a spare unless one is ready (or being prepared, which comes to the same).
    pub(crate) fn request(&self) {
        let (slot, wake) = &*self.shared;
        let mut slot = lock(slot);
        if slot.ready.is_none() && !slot.wanted {
            slot.wanted = true;
            wake.notify_one();
        }
    }

    /// The writer is about to block waiting for work (`true`) or has work again (`false`).
    /// The preparer writes its zeros only while the writer is idle, so under a steady
    /// load it yields the disk (and rotations fall back to `fallocate`); it prepares
    /// between bursts and on a lightly loaded log, where fdatasync latency is what counts.
    pub(crate) fn set_writer_idle(&self, idle: bool) {
        let (slot, wake) = &*self.shared;
        let mut slot = lock(slot);
        slot.writer_idle = idle;
        if idle && slot.preparing {
            wake.notify_one();
        }
    }

    /// The prepared spare, if one is ready and holds at least `min_len` bytes (a frame
    /// larger than a segment gets a segment of its own size, created by the writer); the
    /// thread then prepares the next one.
    pub(crate) fn take(&self, min_len: u64) -> Option<Spare> {
        let (slot, wake) = &*self.shared;
        let mut slot = lock(slot);
        if slot.ready.as_ref().is_some_and(|spare| spare.len < min_len) {
            return None;
        }
        let spare = slot.ready.take();
        slot.wanted = true;
        wake.notify_one();
        spare
    }

    /// Stops the thread (waiting for a preparation in progress to finish) and deletes an
    /// unused spare. Errors deleting it are only logged: the next open removes it.
    pub(crate) fn stop(&mut self, env: &dyn FileSystem) {
        let (slot, wake) = &*self.shared;
        lock(slot).stop = true;
        wake.notify_one();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::warn!("the WAL segment preparer thread panicked");
            }
        }
        if let Some(spare) = lock(slot).ready.take() {
            discard(env, spare);
        }
    }
}

impl Drop for Preparer {
    /// Without [`Preparer::stop`] (the writer thread panicked), still lets the thread end.
    fn drop(&mut self) {
        let (slot, wake) = &*self.shared;
        lock(slot).stop = true;
        wake.notify_one();
    }
}

fn run(env: &dyn FileSystem, dir: &Path, len: u64, shared: &(Mutex<Slot>, Condvar)) {
    let (slot, wake) = shared;
    let mut next_id = 0u64;
    loop {
        {
            let mut guard = lock(slot);
            while !guard.has_work() {
                guard = wake.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
            if guard.stop {
                return;
            }
            guard.wanted = false;
            guard.preparing = true;
        }
        let path = dir.join(format!("{PREFIX}{next_id}{SUFFIX}"));
        next_id += 1;
        // One chunk at a time, only while the writer is idle; false once stopping.
        let my_turn = || {
            let mut guard = lock(slot);
            while !guard.stop && !guard.writer_idle {
                guard = wake.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
            !guard.stop
        };
        let prepared = prepare(env, &path, len, &my_turn);
        lock(slot).preparing = false;
        match prepared {
            Ok(spare) => {
                metrics::counter!("sluice_wal_segments_prepared_total").increment(1);
                let mut guard = lock(slot);
                if guard.stop {
                    drop(guard);
                    discard(env, spare);
                    return;
                }
                guard.ready = Some(spare);
            }
            Err(WalError::Closed) => {
                let _ = fs::remove_file(env, &path);
                return;
            }
            Err(e) => {
                // Not retried until the writer asks again: it creates its own segment meanwhile.
                tracing::warn!(error = %e, "could not prepare the next WAL segment");
                if let Err(e) = fs::remove_file(env, &path) {
                    tracing::debug!(error = %e, "no half-prepared segment to remove");
                }
            }
        }
    }
}

/// Creates `path` with `len` bytes really written (zeros) and synced; gives up when
/// `my_turn()` (which waits for the writer to be idle) says the log is stopping.
fn prepare(
    env: &dyn FileSystem,
    path: &Path,
    len: u64,
    my_turn: &dyn Fn() -> bool,
) -> Result<Spare> {
    let mut file = fs::create_preallocated(env, path, len)?;
    let zeros = vec![0u8; ZERO_CHUNK];
    let mut offset = 0u64;
    while offset < len {
        if !my_turn() {
            return Err(WalError::Closed);
        }
        let n = (len - offset).min(ZERO_CHUNK as u64) as usize;
        fs::write_all_at(
            file.as_mut(),
            &mut [std::io::IoSlice::new(&zeros[..n])],
            offset,
            path,
        )?;
        // Synced chunk by chunk: one fdatasync of the whole segment would queue all of it
        // on the device at once, and the writer's next fdatasync would wait behind it
        // (measured: 97 ms fdatasync p99 at 256 appenders). Each sync here queues at most
        // one chunk, and only while the writer is idle.
        fs::sync_data(file.as_mut(), path)?;
        offset += n as u64;
    }
    Ok(Spare {
        file,
        path: path.to_path_buf(),
        len,
    })
}

/// Deletes a spare that will not be used.
pub(crate) fn discard(env: &dyn FileSystem, spare: Spare) {
    drop(spare.file);
    if let Err(e) = fs::remove_file(env, &spare.path) {
        tracing::warn!(error = %e, "could not remove an unused prepared WAL segment");
    }
}

/// Deletes the prepared files a previous life of the log left in `dir`.
pub(crate) fn remove_leftovers(env: &dyn FileSystem, dir: &Path) -> Result<()> {
    fs::remove_named(env, dir, PREFIX, SUFFIX)
}
