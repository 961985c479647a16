//! The crate's one error type, [`SdkError`], and its [`Result`] alias.
//!
//! Callers branch on the variant: [`SdkError::Refused`] is the server's final word on the
//! stream (a bad record names its offset in `record`), [`SdkError::Full`] is `try_send`'s
//! back-pressure, [`SdkError::Dropped`] a record the full spool gave up (drop-oldest
//! policy). Errors are `Clone` so every waiting ack future can receive the same one.

use tonic::Code;

/// Everything that can go wrong in the SDK.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SdkError {
    /// A builder was given something it cannot work with.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The token endpoint could not be reached or refused the credentials.
    #[error("token request to {url} failed: {message}")]
    Token {
        /// The token endpoint.
        url: String,
        /// What went wrong (the endpoint's error text when it answered).
        message: String,
    },
    /// The server refused the stream for good (not a transient status); `record` is the
    /// offset of the record the server named, when it named one.
    #[error("server refused the stream ({code:?}): {message}")]
    Refused {
        /// The gRPC status code.
        code: Code,
        /// The server's message.
        message: String,
        /// The offset ([`crate::AckFuture::offset`]) of the record at fault, if any.
        record: Option<i64>,
    },
    /// The server stayed unreachable for longer than the open timeout.
    #[error("server unavailable: {0}")]
    Unavailable(String),
    /// A record this stream cannot carry (e.g. a JSON record that is not UTF-8).
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    /// `try_send`: the in-flight records or bytes limit (or the full spool) is reached.
    #[error("in-flight limit reached; wait for acks (send) or retry later")]
    Full,
    /// The stream was closed, or failed before; no more records are accepted.
    #[error("the stream is closed")]
    Closed,
    /// The record was dropped from the full spool (drop-oldest policy) and never sent.
    #[error("record {0} was dropped from the full spool (drop-oldest policy)")]
    Dropped(i64),
    /// The spool directory could not be opened, written or read.
    #[error("spool: {0}")]
    Spool(String),
    /// The persistent stream's state file could not be read or written.
    #[error("state file {path}: {message}")]
    State {
        /// The state file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// The crate's result type.
pub type Result<T, E = SdkError> = std::result::Result<T, E>;

impl SdkError {
    /// Whether a connection that ended with `status` may be tried again: UNAVAILABLE
    /// (connection loss, a pod stopping), ABORTED (the stream moved), RESOURCE_EXHAUSTED
    /// (server back-pressure), DEADLINE_EXCEEDED, UNKNOWN/INTERNAL from the transport
    /// (a reset connection), UNAUTHENTICATED (an expired token; a new one is fetched).
    pub fn retryable(code: Code) -> bool {
        matches!(
            code,
            Code::Unavailable
                | Code::Aborted
                | Code::ResourceExhausted
                | Code::DeadlineExceeded
                | Code::Unknown
                | Code::Internal
                | Code::Cancelled
                | Code::Unauthenticated
        )
    }
}

impl From<sluice_wal::WalError> for SdkError {
    fn from(e: sluice_wal::WalError) -> Self {
        SdkError::Spool(e.to_string())
    }
}
