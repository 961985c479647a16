//! The fencing epoch: in fenced mode every commit of a committer carries
//! `txn{appId: "sluice-committer", version: epoch}`, and a committer that
//! finds a higher epoch in the log has been deposed and never commits again.
//!
//! The refusal rests on the committer's own check, not on deltalake's
//! conflict checker: every commit is built on a freshly reloaded log and
//! tried at exactly the next version, without deltalake's retries (which
//! with `max_retries = 0` fail at once when the version is taken). A commit
//! of a deposed committer therefore either lands before the successor's
//! claim (it was still the committer then) or loses the version to the
//! claim, reloads, sees the higher epoch and is refused. (deltalake 1.1.3's
//! checker would also flag the race, as a `ConcurrentTransaction`: it fails
//! a commit whose own `txn` app ids appear in a winning commit; the test
//! `deltalake_flags_a_winner_with_the_same_txn_app_id` pins that down.)

use deltalake::kernel::Transaction;
use deltalake::DeltaTable;

use super::handoff::HandOffError;
use crate::error::Result;

/// The `txn` app id under which committers record their epoch.
pub const COMMITTER_APP_ID: &str = "sluice-committer";

/// Whether a committer's commits are fenced by an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fencing {
    /// No epoch (single-node pods: several may attach to one table with
    /// `--location` and must not depose each other).
    Unfenced,
    /// Elected with this epoch (strictly increasing over elections).
    Epoch(u64),
}

impl Fencing {
    /// The epoch, if fenced.
    pub fn epoch(self) -> Option<u64> {
        match self {
            Fencing::Unfenced => None,
            Fencing::Epoch(e) => Some(e),
        }
    }

    /// The `txn` action every commit of this committer carries, if fenced.
    pub(crate) fn txn(self) -> Result<Option<Transaction>> {
        self.epoch()
            .map(|e| {
                Ok(Transaction::new(
                    COMMITTER_APP_ID,
                    super::covered::txn_version(e)?,
                ))
            })
            .transpose()
    }

    /// Refuses when the log (`log_epoch`, None: never claimed) holds a newer
    /// epoch than this committer's.
    pub(crate) fn check(self, table: &str, log_epoch: Option<u64>) -> Result<(), HandOffError> {
        match (self.epoch(), log_epoch) {
            (Some(epoch), Some(log_epoch)) if log_epoch > epoch => Err(HandOffError::Deposed {
                table: table.to_string(),
                epoch,
                log_epoch,
            }),
            _ => Ok(()),
        }
    }
}

/// The committer epoch recorded in the loaded log (None: never claimed).
pub async fn log_epoch(table: &DeltaTable) -> Result<Option<u64>> {
    super::covered::txn_of(table, COMMITTER_APP_ID).await
}
