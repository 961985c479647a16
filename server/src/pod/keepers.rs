//! What the WAL purge must keep, for the whole pod: the stream-open frames records above
//! the purge point still need (the stream registry) and the REST idempotency keys still
//! inside their window (the key index). Both are logged again before segments go.

use std::sync::Arc;

use futures::future::BoxFuture;
use sluice_wal::{Lsn, Wal};

use crate::error::Result;
use crate::journal::StreamRegistry;
use crate::rest::idempotency::{now_ms, IdempotencyIndex};
use crate::sink::open_frames::{CommittedOf, OpenFrames};

/// The stream registry and the key index, as the sinks' purge sees them.
pub struct WalKeepers {
    /// Streams with frames in the WAL.
    pub streams: Arc<StreamRegistry>,
    /// REST idempotency keys.
    pub keys: Arc<IdempotencyIndex>,
}

impl OpenFrames for WalKeepers {
    fn relog_below<'a>(
        &'a self,
        wal: &'a Wal,
        point: Lsn,
        committed: CommittedOf<'a>,
    ) -> BoxFuture<'a, Result<Option<Lsn>>> {
        Box::pin(async move {
            let opens = self
                .streams
                .relog_open_frames_below(wal, point, committed)
                .await?;
            let keys = self.keys.relog_below(wal, point, now_ms()).await?;
            Ok(opens.max(keys))
        })
    }
}
