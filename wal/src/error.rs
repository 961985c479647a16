//! The crate's one error type, [`WalError`], and its [`Result`] alias.
//!
//! Callers branch on the variant: `NoSpace` is a full disk (the server answers
//! `RESOURCE_EXHAUSTED`), `Failed` means this log can never acknowledge again (an `fdatasync`
//! or write error is not retryable: the kernel may already have dropped the dirty pages),
//! `Corrupt` stops start-up and names the segment file and byte offset at fault.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong in the write-ahead log.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    /// A file-system operation failed; `context` names the operation and the path.
    #[error("{context}: {source}")]
    Io {
        /// The operation and the path it was on.
        context: String,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The device holding the log is full (`ENOSPC` or `EDQUOT`).
    #[error("no space left on the write-ahead log device: {context}")]
    NoSpace {
        /// The operation and the path that found the disk full.
        context: String,
    },
    /// The log hit a write or `fdatasync` error earlier and will never make data durable
    /// again in this process; the message describes the original error.
    #[error("write-ahead log failed and can no longer make data durable: {0}")]
    Failed(String),
    /// A segment does not hold what the format promises (see [`crate::RecoveryMode`]).
    #[error("corrupt write-ahead log segment {}: at byte offset {offset}: {reason}", segment.display())]
    Corrupt {
        /// The damaged segment file.
        segment: PathBuf,
        /// Byte offset in that file where the damage starts.
        offset: u64,
        /// What is wrong there.
        reason: String,
    },
    /// The log was closed; nothing more can be appended.
    #[error("write-ahead log is closed")]
    Closed,
    /// Another open log (in this or another process) holds the directory's lock.
    #[error("write-ahead log directory {} is already open elsewhere", .0.display())]
    Locked(PathBuf),
    /// The caller passed something the log refuses (bad options, an oversized frame).
    #[error("invalid write-ahead log argument: {0}")]
    InvalidArgument(String),
}

/// Result alias used throughout the crate.
pub type Result<T, E = WalError> = std::result::Result<T, E>;

impl WalError {
    /// Wraps an I/O error with context; a full disk becomes [`WalError::NoSpace`].
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        match source.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => WalError::NoSpace {
                context: format!("{}: {source}", context.into()),
            },
            _ => WalError::Io {
                context: context.into(),
                source,
            },
        }
    }

    pub(crate) fn corrupt(
        segment: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<String>,
    ) -> Self {
        WalError::Corrupt {
            segment: segment.into(),
            offset,
            reason: reason.into(),
        }
    }
}
