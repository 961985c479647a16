//! How a log is opened: [`WalOptions`] with its durability and recovery policies, and the
//! start-up check that rejects nonsense before any file is touched.

use std::path::PathBuf;

use crate::error::{Result, WalError};
use crate::format::{FRAME_HEADER_LEN, SEGMENT_HEADER_LEN};

/// When the writer may publish a batch as durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// `fdatasync` the segment after every batch, then publish. The only mode that keeps the
    /// promise "an ack never covers a record that is not on stable storage". Default.
    #[default]
    Fsync,
    /// Publish as soon as the batch is in the page cache. Explicitly unsafe: a power loss or
    /// kernel crash loses acknowledged data. For benchmarks only.
    UnsafeNoSync,
}

/// What recovery does with a damaged log (after raft-engine's `RecoveryMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecoveryMode {
    /// A torn tail in the newest segment (a crash mid-write: a bad or partial frame, with
    /// any valid-looking frames after it lying within the span of one unsynced batch,
    /// `MAX_BATCH_BYTES`) is cut back to the last good frame before the damage and
    /// fsync'd; a newest segment whose header is torn and whose body was never written is
    /// removed. Damage anywhere else is still an error. Default.
    #[default]
    TolerateTailCorruption,
    /// Any damage, including a torn tail, fails `open` with [`WalError::Corrupt`].
    AbsoluteConsistency,
}

/// Options for [`crate::Wal::open`].
#[derive(Clone, Debug)]
pub struct WalOptions {
    /// Directory holding the segments, the `wal-id` file and the `LOCK` file. Created if
    /// missing.
    pub dir: PathBuf,
    /// Size every segment file is preallocated to. A single frame larger than this gets a
    /// segment of its own, sized to fit. Default: 64 MiB.
    pub segment_bytes: u64,
    /// Default: [`Durability::Fsync`].
    pub durability: Durability,
    /// Bytes that may be reserved but not yet written before [`crate::Wal::reserve`] waits.
    /// Default: 64 MiB.
    pub max_queued_bytes: usize,
    /// Default: [`RecoveryMode::TolerateTailCorruption`].
    pub recovery: RecoveryMode,
    /// Keep a zero-filled segment ready for each rotation (a background thread writes it
    /// while the writer is idle), so fdatasyncs into it skip the journal commit that
    /// `fallocate`d blocks cost on ext4 and XFS: a lower fdatasync p50 once in it, but a
    /// second write of every segment's bytes, and while a segment is being prepared the
    /// writer's fdatasync p99 roughly doubles (see `spare`). Default: false.
    pub prepare_segments: bool,
    /// Write segments through `O_DIRECT` ([`crate::env::DirectFileSystem`]): no copy into
    /// the page cache, no writeback started by `fdatasync`, no cached pages to free when a
    /// retired segment is cut; each write is staged into whole 4 KiB blocks, rewriting the
    /// partial block the previous write ended in. Segments fall back to buffered writes
    /// where the file system refuses the flag (`EINVAL` at open). Read by [`crate::Wal::open`];
    /// [`crate::Wal::open_with_fs`] writes through the file system it is given. Default:
    /// false.
    pub direct_io: bool,
}

/// Smallest accepted `segment_bytes`: a header and at least a few small frames.
pub(crate) const MIN_SEGMENT_BYTES: u64 = 1024;
const _: () = assert!(MIN_SEGMENT_BYTES > (SEGMENT_HEADER_LEN + FRAME_HEADER_LEN) as u64);

impl WalOptions {
    /// Options with every default, for the log in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        WalOptions {
            dir: dir.into(),
            segment_bytes: 64 << 20,
            durability: Durability::default(),
            max_queued_bytes: 64 << 20,
            recovery: RecoveryMode::default(),
            prepare_segments: false,
            direct_io: false,
        }
    }

    /// Rejects options the log cannot work with.
    pub(crate) fn sanitize(&self) -> Result<()> {
        if self.segment_bytes < MIN_SEGMENT_BYTES {
            return Err(WalError::InvalidArgument(format!(
                "segment_bytes is {} but must be at least {MIN_SEGMENT_BYTES}",
                self.segment_bytes
            )));
        }
        if self.max_queued_bytes == 0 {
            return Err(WalError::InvalidArgument(
                "max_queued_bytes must be greater than 0".into(),
            ));
        }
        if self.dir.as_os_str().is_empty() {
            return Err(WalError::InvalidArgument("dir must not be empty".into()));
        }
        Ok(())
    }
}
