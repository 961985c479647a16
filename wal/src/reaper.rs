//! Retired segments: how purged segment files leave the disk without stalling the writer's
//! syncs.
//!
//! # Why
//!
//! Removing a 64 MiB segment frees its blocks in one journal transaction. With online discard
//! (ext4 mounted `-o discard`, as this project's VM and many cloud images are) committing that
//! transaction also trims the blocks, and the writer's next `fdatasync`, which needs a
//! journal commit of its own, waits behind it. Measured on this VM (README, "Purged segments
//! shrink before they go"): one `unlink` of a written 64 MiB file took 12–26 ms and stalled
//! an `fdatasync` beside it by 9–16 ms, once per purged segment; shrinking the file 2 MiB at a
//! time, a few milliseconds apart, kept the same `fdatasync`s under 2 ms.
//!
//! # How
//!
//! [`crate::Wal::purge_below`] renames each purged segment to `retired-{base_lsn}.tmp` and
//! fsyncs the directory: from then on the file is not part of the log (its name never matches
//! a segment's, recovery never reads it, and [`remove_leftovers`] deletes any a crash left
//! behind at the next open). Only then is it handed to this module's thread, which cuts it
//! [`STEP`] bytes at a time, [`PAUSE`] apart, and removes it. The pauses are skipped while
//! more than [`BACKLOG`] files wait (a log purging faster than that does not pile retired
//! files up on the disk) and once the log is closing. A failed step is logged and counted
//! (`sluice_wal_reap_failures_total`); the file then stays until the next open.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use crate::env::FileSystem;
use crate::error::{Result, WalError};
use crate::fs;

/// File name prefix and suffix of retired segments.
const PREFIX: &str = "retired-";
const SUFFIX: &str = ".tmp";
/// Bytes given back per step.
pub(crate) const STEP: u64 = 2 << 20;
/// Time between two steps of one file.
const PAUSE: Duration = Duration::from_millis(3);
/// More files than this waiting: no pauses.
const BACKLOG: usize = 2;

/// Where a purged segment starting at `base_lsn` waits to be removed.
pub(crate) fn retired_path(dir: &Path, base_lsn: u64) -> PathBuf {
    dir.join(format!("{PREFIX}{base_lsn:020}{SUFFIX}"))
}

/// The thread that shrinks and removes retired segments, fed by [`Reaper::retire`].
pub(crate) struct Reaper {
    tx: Option<Sender<PathBuf>>,
    hurry: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Reaper {
    /// Starts the thread; it sleeps until a file is retired.
    pub(crate) fn start(env: Arc<dyn FileSystem>) -> Result<Self> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let hurry = Arc::new(AtomicBool::new(false));
        let thread_hurry = Arc::clone(&hurry);
        let thread = std::thread::Builder::new()
            .name("sluice-wal-reap".into())
            .spawn(move || run(env.as_ref(), &rx, &thread_hurry))
            .map_err(|e| WalError::io("spawn the WAL segment reaper thread", e))?;
        Ok(Reaper {
            tx: Some(tx),
            hurry,
            thread: Some(thread),
        })
    }

    /// Hands over a file that is no longer part of the log (renamed, directory synced).
    pub(crate) fn retire(&self, path: PathBuf) {
        let sent = self.tx.as_ref().map(|tx| tx.send(path));
        if !matches!(sent, Some(Ok(()))) {
            tracing::warn!(
                "the WAL segment reaper has stopped; a retired segment stays until the next open"
            );
        }
    }

    /// Removes what is still waiting without pauses, then ends the thread. Calling it again
    /// does nothing.
    pub(crate) fn stop(&mut self) {
        self.hurry.store(true, Ordering::Relaxed);
        self.tx = None;
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::warn!("the WAL segment reaper thread panicked");
            }
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(env: &dyn FileSystem, rx: &Receiver<PathBuf>, hurry: &AtomicBool) {
    while let Ok(path) = rx.recv() {
        let pause = || !hurry.load(Ordering::Relaxed) && rx.len() <= BACKLOG;
        match reap(env, &path, &pause) {
            Ok(()) => tracing::debug!(path = %path.display(), "removed a retired WAL segment"),
            Err(e) => {
                metrics::counter!("sluice_wal_reap_failures_total").increment(1);
                tracing::warn!(error = %e, "could not remove a retired WAL segment; it stays until the next open");
            }
        }
    }
}

/// Cuts `path` [`STEP`] bytes at a time (sleeping [`PAUSE`] between steps while `pause()`
/// says so), then removes it.
pub(crate) fn reap(env: &dyn FileSystem, path: &Path, pause: &dyn Fn() -> bool) -> Result<()> {
    let mut len = fs::file_len(path)?;
    while len > STEP {
        len -= STEP;
        fs::shrink(env, path, len)?;
        if pause() {
            std::thread::sleep(PAUSE);
        }
    }
    fs::remove_file(env, path)
}

/// Deletes the retired files a previous life of the log left in `dir` (a crash between the
/// purge's rename and the reaper's removal).
pub(crate) fn remove_leftovers(env: &dyn FileSystem, dir: &Path) -> Result<()> {
    fs::remove_named(env, dir, PREFIX, SUFFIX)
}
