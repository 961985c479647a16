//! One commit attempt of a committer: the Add actions of the hand-offs and
//! their `txn` actions, built on the loaded snapshot and tried at exactly
//! the next version, without deltalake's retries. A lost race comes back
//! as an error ([`lost_race`]); the committer then reloads the log and
//! judges its hand-offs again (fencing and the covered-check need the new
//! log, which deltalake's retry loop would not show it).

use deltalake::kernel::transaction::{CommitBuilder, TransactionError};
use deltalake::kernel::{Action, Add, Transaction};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::{DeltaTable, DeltaTableError};

/// Commits `adds` with `txns` on the loaded snapshot of `table`, at its
/// version + 1 only. `read_version` (recorded in commitInfo) is the version
/// the first attempt of these hand-offs was built on, so a reader sees which
/// commits lost a race (None: the loaded one). Returns the version it landed at.
pub(crate) async fn commit_once(
    table: &mut DeltaTable,
    adds: Vec<Add>,
    txns: Vec<Transaction>,
    read_version: Option<u64>,
) -> Result<u64, DeltaTableError> {
    let snapshot = table.snapshot()?;
    let read_version = read_version.unwrap_or(snapshot.version());
    let partition_cols: Vec<String> = snapshot.metadata().partition_columns().to_vec();
    let operation = DeltaOperation::Write {
        mode: SaveMode::Append,
        partition_by: (!partition_cols.is_empty()).then_some(partition_cols),
        predicate: None,
    };
    let finalized = CommitBuilder::from(super::properties::commit_properties_with(
        txns,
        read_version,
    ))
    .with_actions(adds.into_iter().map(Action::Add).collect())
    .with_max_retries(0)
    .build(Some(snapshot), table.log_store(), operation)
    .await?;
    // The handle follows its own commits, so the next reload reads only
    // what others committed since.
    table.state = Some(finalized.snapshot());
    Ok(finalized.version())
}

/// Brings `table` to the newest version: incrementally, or afresh from the
/// newest checkpoint when the incremental update fails.
pub(crate) async fn reload(table: &mut DeltaTable) -> Result<(), DeltaTableError> {
    match table.update_incremental(None).await {
        Ok(()) => Ok(()),
        Err(e) => {
            tracing::debug!("incremental reload failed, loading afresh: {e}");
            table.state = None;
            table.update_incremental(None).await
        }
    }
}

/// Whether a commit failed only because another commit took its version.
pub(crate) fn lost_race(e: &DeltaTableError) -> bool {
    matches!(
        e,
        DeltaTableError::VersionAlreadyExists(_)
            | DeltaTableError::Transaction {
                source: TransactionError::MaxCommitAttempts(_)
                    | TransactionError::VersionAlreadyExists(_)
            }
    )
}
