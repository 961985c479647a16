//! Where a sink's hand-offs go: the pod's own unfenced committer (single
//! node), or — in a cluster — a [`HandOffRoute`] that finds the table's
//! elected committer (in process when it is this pod, over gRPC otherwise;
//! `crate::cluster::roles`).

use std::sync::Arc;

use deltalake::DeltaTable;
use futures::future::BoxFuture;

use super::committer::{Committer, CommitterConfig};
use super::fence::Fencing;
use super::handoff::{HandOff, HandOffAck, HandOffError};

/// Finds the committer of a table and hands it a hand-off, re-resolving and
/// resending as the committer changes.
pub trait HandOffRoute: Send + Sync {
    /// Hands `handoff` to the committer of its table (`table`: the sink's
    /// handle, from which an elected committer of this pod starts).
    fn hand_off<'a>(
        &'a self,
        table: &'a DeltaTable,
        handoff: HandOff,
    ) -> BoxFuture<'a, Result<HandOffAck, HandOffError>>;
}

/// A sink's way to its committer.
pub enum CommitRoute {
    /// The pod's own unfenced committer (single node).
    InProcess(Committer),
    /// The table's elected committer, wherever it runs (cluster).
    Elected(Arc<dyn HandOffRoute>),
}

impl CommitRoute {
    /// A route to a new in-process, unfenced committer of `name`.
    pub fn in_process(name: String, table: DeltaTable, config: CommitterConfig) -> CommitRoute {
        CommitRoute::InProcess(Committer::spawn(name, table, config, Fencing::Unfenced))
    }

    /// Hands `handoff` to the committer and waits for its answer.
    pub async fn hand_off(
        &self,
        table: &DeltaTable,
        handoff: HandOff,
    ) -> Result<HandOffAck, HandOffError> {
        match self {
            CommitRoute::InProcess(c) => c.hand_off(handoff).await,
            CommitRoute::Elected(route) => route.hand_off(table, handoff).await,
        }
    }
}
