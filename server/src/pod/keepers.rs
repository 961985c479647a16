//! What the WAL purge must keep, for the whole pod: the stream-open frames records above
//! the purge point still need (the stream registry) and the REST idempotency keys still
//! inside their window (the key index), and the MQTT QoS 2 publishes received and not
//! released (the QoS 2 ledger). All are logged again before segments go.

use std::sync::Arc;

use futures::future::BoxFuture;
use sluice_wal::{Lsn, Wal};

use crate::error::Result;
use crate::journal::{Qos2Ledger, StreamRegistry};
use crate::rest::idempotency::{now_ms, IdempotencyIndex};
use crate::sink::open_frames::{CommittedOf, OpenFrames};

/// The stream registry and the key index, as the sinks' purge sees them.
pub struct WalKeepers {
    /// Streams with frames in the WAL.
    pub streams: Arc<StreamRegistry>,
    /// REST idempotency keys.
    pub keys: Arc<IdempotencyIndex>,
    /// MQTT QoS 2 pairs received and not released.
    pub qos2: Arc<Qos2Ledger>,
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
            let qos2 = self.qos2.relog_below(wal, point).await?;
            Ok(opens.max(keys).max(qos2))
        })
    }
}
