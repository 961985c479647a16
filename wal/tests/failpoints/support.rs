//! Opening logs on a fault-injecting file system.

use std::path::Path;
use std::sync::Arc;

use sluice_wal::env::FaultyFileSystem;
use sluice_wal::{Recovered, RecoveryMode, Wal, WalOptions};

/// A log in `dir` on a fresh [`FaultyFileSystem`] (4 KiB segments, so tests rotate), over
/// `O_DIRECT` segments when the run asks for them ([`crate::common::direct_io`]).
pub fn open_faulty(dir: &Path) -> (Wal, FaultyFileSystem) {
    let fs = if crate::common::direct_io() {
        FaultyFileSystem::direct()
    } else {
        FaultyFileSystem::new()
    };
    let (wal, _) = Wal::open_with_fs(crate::common::small_segments(dir), Arc::new(fs.clone()))
        .expect("open on the faulty file system");
    (wal, fs)
}

/// Reopens `dir` on the real file system, refusing any damage.
pub fn reopen_strict(dir: &Path) -> (Wal, Recovered) {
    let mut opts = crate::common::small_segments(dir);
    opts.recovery = RecoveryMode::AbsoluteConsistency;
    Wal::open(opts).expect("reopen with absolute consistency")
}

/// Reopens `dir` on the real file system with the default policy.
pub fn reopen(dir: &Path) -> (Wal, Recovered) {
    Wal::open(WalOptions {
        segment_bytes: 4096,
        direct_io: crate::common::direct_io(),
        ..WalOptions::new(dir)
    })
    .expect("reopen")
}
