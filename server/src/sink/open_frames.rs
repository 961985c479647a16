//! What the WAL purge needs from whoever keeps the stream-open frames: before segments
//! below a point are deleted, the open frames that records above it still need are logged
//! again. The journal's stream registry implements it; the sink only calls it, so the sink
//! does not depend on the journal.

use futures::future::BoxFuture;
use sluice_wal::{Lsn, Wal};

use crate::error::Result;

/// A table's committed LSN (`None`: the table is gone).
pub type CommittedOf<'a> = &'a (dyn Fn(&str) -> Option<Lsn> + Send + Sync);

/// Keeps the stream-open frames the WAL's records refer to.
pub trait OpenFrames: Send + Sync {
    /// Re-logs the open frames at or below `point` that are still needed and forgets the
    /// ones no longer needed; returns the end LSN of the last frame logged.
    fn relog_below<'a>(
        &'a self,
        wal: &'a Wal,
        point: Lsn,
        committed: CommittedOf<'a>,
    ) -> BoxFuture<'a, Result<Option<Lsn>>>;
}
