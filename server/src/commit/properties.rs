//! What every append commit of the sink carries and how hard deltalake tries
//! to land it: the `txn` action `(WAL id, last LSN)` that recovery reads, the
//! `readVersion` in commitInfo (a reader sees which commits lost a race), no
//! checkpoint or log cleanup on the ingest path (upkeep does them), and a
//! retry budget for lost races sized for many writers on one table.
//!
//! Why the budget: a put-if-absent commit that finds its version taken lists
//! the log, checks the winners' actions for conflicts (appends with other
//! writers' app ids never conflict) and tries the next version — without
//! back-off. With several writers committing back to back, one writer can
//! lose many times in a row; deltalake's default of 15 retries then gives
//! up with `MaxCommitAttempts`, although nothing conflicts. A given-up
//! commit wastes its Parquet file (written, never referenced, never removed
//! by lite vacuum) and its rows wait a flush interval to be written again.
//! Losing is cheap next to that, so the budget is [`COMMIT_RETRIES`].

use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::Transaction;

/// Lost races a commit may retry at a later version before it fails.
/// deltalake's default is 15.
pub const COMMIT_RETRIES: usize = 100;

/// Properties of an append commit by WAL `app_id` up to `txn_version` (its
/// last LSN), built on table version `read_version`.
pub fn commit_properties(app_id: &str, txn_version: i64, read_version: u64) -> CommitProperties {
    commit_properties_with(vec![Transaction::new(app_id, txn_version)], read_version)
}

/// Properties of an append commit carrying the `txns` (one per writer WAL,
/// persistent stream, committer epoch), built on table version
/// `read_version`.
pub fn commit_properties_with(txns: Vec<Transaction>, read_version: u64) -> CommitProperties {
    CommitProperties::default()
        .with_application_transactions(txns)
        // Recorded in commitInfo, so a reader sees which commits lost a
        // race for their version and were retried.
        .with_metadata([("readVersion".to_string(), serde_json::json!(read_version))])
        .with_max_retries(COMMIT_RETRIES)
        // Checkpoints and log cleanup run in the upkeep task, not on the
        // ingest path.
        .with_create_checkpoint(false)
        .with_cleanup_expired_logs(Some(false))
}
