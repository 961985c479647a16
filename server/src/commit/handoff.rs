//! What a pod hands its table's committer and what it gets back: the
//! [`HandOff`] (Parquet files already written, the WAL range and stream
//! offsets they hold), the [`HandOffAck`] sent once a Delta commit holds it,
//! and the typed refusals ([`HandOffError`]).

use deltalake::kernel::Add;
use sluice_wal::Lsn;

use crate::error::ServerError;

/// Files of one table written by one pod from one WAL range, waiting to be
/// committed. Resent unchanged (same files) until it is answered.
#[derive(Debug, Clone, PartialEq)]
pub struct HandOff {
    /// Full name of the table the files belong to.
    pub table: String,
    /// The pod that wrote the files.
    pub pod_id: String,
    /// The id of the pod's WAL: the `txn` app id the commit records.
    pub wal_id: String,
    /// The WAL position the table was committed up to when the files were
    /// written (exclusive start of the range).
    pub from_lsn: Lsn,
    /// The end LSN of the newest WAL frame in the files: the `txn` version.
    pub to_lsn: Lsn,
    /// Add actions of the Parquet files, already in the table's location.
    pub adds: Vec<Add>,
    /// Persistent streams in the files: (stream id, last offset), recorded
    /// as one `txn` each.
    pub streams: Vec<(String, i64)>,
    /// The Delta schema the files were written with (`schema_id`; empty:
    /// not checked).
    pub schema_id: String,
}

impl HandOff {
    /// Bytes of Parquet the hand-off adds to the table.
    pub fn bytes(&self) -> u64 {
        self.adds.iter().map(|a| a.size.max(0) as u64).sum()
    }

    /// Whether `other` is the same hand-off sent again (same pod WAL and range).
    pub fn same_range(&self, other: &HandOff) -> bool {
        self.wal_id == other.wal_id
            && self.from_lsn == other.from_lsn
            && self.to_lsn == other.to_lsn
    }
}

/// The committer's answer to a hand-off it accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandOffAck {
    /// The table version holding the hand-off (for a covered hand-off: the
    /// version the committer read when it found it covered).
    pub version: u64,
    /// The committer's fencing epoch (None: unfenced).
    pub epoch: Option<u64>,
    /// True when the log already held the hand-off (`txn(wal id) >= to_lsn`)
    /// and nothing was committed for it.
    pub covered: bool,
}

/// Why a committer did not commit a hand-off.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandOffError {
    /// Too many hand-offs or bytes are pending; retry later.
    #[error("committer of {table} busy: {pending} hand-offs, {bytes} bytes pending")]
    Busy {
        /// The table.
        table: String,
        /// Hand-offs pending at the refusal.
        pending: usize,
        /// Bytes pending at the refusal.
        bytes: u64,
    },
    /// A committer with a newer epoch has claimed the table: this one may
    /// never commit again. Resend to the new committer.
    #[error("committer of {table} deposed: its epoch {epoch}, the log's {log_epoch}")]
    Deposed {
        /// The table.
        table: String,
        /// This committer's epoch.
        epoch: u64,
        /// The epoch the log holds.
        log_epoch: u64,
    },
    /// The hand-off starts after what the log holds of its WAL: a range in
    /// between was never handed off.
    #[error("hand-off of {table} from WAL {wal_id} starts at {from_lsn}, the log holds up to {committed}")]
    Gap {
        /// The table.
        table: String,
        /// The pod WAL.
        wal_id: String,
        /// The hand-off's start.
        from_lsn: Lsn,
        /// What the log (and earlier pending hand-offs) hold of that WAL.
        committed: Lsn,
    },
    /// The hand-off overlaps a range already committed or pending, without
    /// being that same hand-off: committing it would duplicate rows.
    #[error("hand-off of {table} from WAL {wal_id} ({from_lsn}, {to_lsn}] overlaps {committed}")]
    Overlap {
        /// The table.
        table: String,
        /// The pod WAL.
        wal_id: String,
        /// The hand-off's start.
        from_lsn: Lsn,
        /// The hand-off's end.
        to_lsn: Lsn,
        /// What the log (and earlier pending hand-offs) hold of that WAL.
        committed: Lsn,
    },
    /// The hand-off names another table than the committer's.
    #[error("hand-off for table {got} sent to the committer of {table}")]
    WrongTable {
        /// The committer's table.
        table: String,
        /// The table the hand-off names.
        got: String,
    },
    /// The commit failed; it may or may not have landed. Resend the same
    /// hand-off: the committer then finds it covered or commits it.
    #[error("commit of {table} failed: {message}")]
    Commit {
        /// The table.
        table: String,
        /// The store's or Delta's error.
        message: String,
    },
    /// The committer stopped before answering.
    #[error("committer of {table} stopped")]
    Stopped {
        /// The table.
        table: String,
    },
    /// The pod asked is not the table's committer (or not with the epoch the
    /// sender resolved): resolve the committer again and resend.
    #[error("this pod is not the committer of {table}; the committer is {holder}")]
    NotCommitter {
        /// The table.
        table: String,
        /// Who holds the role (`pod@addr epoch N`), or "none yet".
        holder: String,
    },
    /// The committer could not be reached (connection failure, timeout).
    #[error("committer of {table} unreachable: {message}")]
    Unreachable {
        /// The table.
        table: String,
        /// The transport's error.
        message: String,
    },
    /// The committer refused for another reason (a remote refusal without a
    /// typed counterpart here, e.g. a gap, overlap or authentication).
    #[error("committer of {table} refused the hand-off: {message}")]
    Refused {
        /// The table.
        table: String,
        /// The committer's status.
        message: String,
    },
    /// The files were written under another Delta schema than the table's
    /// now (an alter committed meanwhile): write the rows again under the
    /// table's schema and resend the range with the new files.
    #[error("hand-off of {table} was written under schema {written}, the table's is {current} now (altered meanwhile)")]
    StaleSchema {
        /// The table.
        table: String,
        /// The schema id the files were written with.
        written: String,
        /// The table's schema id.
        current: String,
    },
    /// A file of the hand-off is not in the store: only that hand-off is
    /// refused, the rest of the batch commits.
    #[error("hand-off of {table} names a file that is not in the store: {path}")]
    MissingFile {
        /// The table.
        table: String,
        /// The Add path that is missing.
        path: String,
    },
}

impl HandOffError {
    /// Whether the same hand-off should be sent again after resolving the
    /// committer afresh (the committer changed, stopped or was unreachable).
    pub fn re_resolve(&self) -> bool {
        matches!(
            self,
            HandOffError::Deposed { .. }
                | HandOffError::Stopped { .. }
                | HandOffError::NotCommitter { .. }
                | HandOffError::Unreachable { .. }
        )
    }
}

impl From<HandOffError> for ServerError {
    fn from(e: HandOffError) -> Self {
        let message = e.to_string();
        match e {
            HandOffError::Busy { .. } => ServerError::ResourceExhausted(message),
            HandOffError::Deposed { .. }
            | HandOffError::Gap { .. }
            | HandOffError::Overlap { .. }
            | HandOffError::WrongTable { .. }
            | HandOffError::NotCommitter { .. }
            | HandOffError::Refused { .. }
            | HandOffError::StaleSchema { .. } => ServerError::FailedPrecondition(message),
            HandOffError::Stopped { .. } | HandOffError::Unreachable { .. } => {
                ServerError::Unavailable(message)
            }
            HandOffError::MissingFile { .. } => ServerError::NotFound(message),
            HandOffError::Commit { .. } => ServerError::Internal(message),
        }
    }
}
