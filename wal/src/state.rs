//! State shared between the [`crate::Wal`] handles and the writer thread: the published
//! [`DurableState`], the sticky failure, the full-disk stall, the list of segments on disk
//! and the semaphore that bounds queued bytes.
//!
//! The writer thread is the only publisher of `DurableState` (it owns the
//! `watch::Sender`); when it exits, receivers see the channel closed and keep the last value.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Semaphore;

use crate::error::WalError;
use crate::lsn::Lsn;
use crate::segment::SegmentMeta;
use crate::sync::lock;

/// What [`crate::Wal::subscribe`] publishes after every batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurableState {
    /// Every frame that ends at or below this LSN is on stable storage (with
    /// [`crate::Durability::Fsync`]).
    pub durable: Lsn,
    /// Set, forever, once the log can no longer make data durable; the text says why.
    pub failed: Option<Arc<str>>,
}

/// Why the log stopped making data durable.
#[derive(Clone, Debug)]
pub(crate) enum Failure {
    NoSpace(String),
    Other(String),
}

impl Failure {
    pub(crate) fn from_error(e: &WalError) -> Self {
        match e {
            WalError::NoSpace { context } => Failure::NoSpace(context.clone()),
            other => Failure::Other(other.to_string()),
        }
    }

    pub(crate) fn message(&self) -> String {
        match self {
            Failure::NoSpace(context) => format!("no space left on device: {context}"),
            Failure::Other(m) => m.clone(),
        }
    }

    /// The error every later call reports.
    pub(crate) fn to_error(&self) -> WalError {
        match self {
            Failure::NoSpace(context) => WalError::NoSpace {
                context: context.clone(),
            },
            Failure::Other(m) => WalError::Failed(m.clone()),
        }
    }
}

pub(crate) struct Shared {
    /// Segments on disk in base LSN order; the last one is the writer's active segment.
    pub segments: Mutex<Vec<SegmentMeta>>,
    /// Set once by the writer, before it publishes `DurableState::failed`.
    pub failure: OnceLock<Failure>,
    /// One permit per byte that may be queued but not yet written.
    pub queue: Arc<Semaphore>,
    /// Set while the writer holds a batch because the disk is full (a fast check for
    /// `append`); `stall` says why.
    pub stalled: AtomicBool,
    pub stall: Mutex<Option<String>>,
}

impl Shared {
    pub(crate) fn new(segments: Vec<SegmentMeta>, queue_permits: usize) -> Self {
        Shared {
            segments: Mutex::new(segments),
            failure: OnceLock::new(),
            queue: Arc::new(Semaphore::new(queue_permits)),
            stalled: AtomicBool::new(false),
            stall: Mutex::new(None),
        }
    }

    pub(crate) fn is_stalled(&self) -> bool {
        self.stalled.load(Ordering::Acquire)
    }

    /// Only the writer calls this.
    pub(crate) fn set_stalled(&self, reason: Option<String>) {
        let mut stall = lock(&self.stall);
        self.stalled.store(reason.is_some(), Ordering::Release);
        *stall = reason;
    }

    /// The error new work gets: the final failure, else the full-disk stall.
    pub(crate) fn refusal(&self) -> Option<WalError> {
        if let Some(e) = self.failure_error() {
            return Some(e);
        }
        if self.is_stalled() {
            let context = lock(&self.stall).clone()?;
            return Some(WalError::NoSpace { context });
        }
        None
    }

    pub(crate) fn failure_error(&self) -> Option<WalError> {
        self.failure.get().map(Failure::to_error)
    }
}
