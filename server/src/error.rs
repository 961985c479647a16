//! The server's error type and its one mapping to gRPC status codes.
//!
//! Codes are chosen on purpose and never reused for another meaning:
//! bad input is INVALID_ARGUMENT, a missing table NOT_FOUND, a protocol
//! misstep FAILED_PRECONDITION, credentials UNAUTHENTICATED /
//! PERMISSION_DENIED, full queues or disks RESOURCE_EXHAUSTED, and a WAL that
//! can no longer make data durable UNAVAILABLE.

use tonic::Status;

/// Result alias for the server crate.
pub type Result<T, E = ServerError> = std::result::Result<T, E>;

/// Everything that can go wrong in a pod.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A configuration value that cannot work.
    #[error("configuration: {0}")]
    Config(String),
    /// Bad input from a client (record, request, table definition).
    #[error("{0}")]
    InvalidArgument(String),
    /// A table or other object that does not exist.
    #[error("{0}")]
    NotFound(String),
    /// An object that already exists.
    #[error("{0}")]
    AlreadyExists(String),
    /// A request in the wrong state of the protocol.
    #[error("{0}")]
    FailedPrecondition(String),
    /// Missing or invalid credentials.
    #[error("{0}")]
    Unauthenticated(String),
    /// Valid credentials without the right to do this.
    #[error("{0}")]
    PermissionDenied(String),
    /// A limit or a full disk.
    #[error("{0}")]
    ResourceExhausted(String),
    /// The pod cannot take data now (shutting down, WAL failed).
    #[error("{0}")]
    Unavailable(String),
    /// A feature of the protocol Sluice does not serve.
    #[error("{0}")]
    Unimplemented(String),
    /// The write-ahead log failed.
    #[error("write-ahead log: {0}")]
    Wal(#[from] sluice_wal::WalError),
    /// The Delta table layer failed.
    #[error("delta: {0}")]
    Delta(#[from] deltalake::DeltaTableError),
    /// Local I/O failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A bug or an unexpected state.
    #[error("internal: {0}")]
    Internal(String),
}

impl ServerError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        ServerError::Io {
            context: context.into(),
            source,
        }
    }

    /// The gRPC status for this error.
    pub fn to_status(&self) -> Status {
        match self {
            ServerError::InvalidArgument(m) => Status::invalid_argument(m.clone()),
            ServerError::NotFound(m) => Status::not_found(m.clone()),
            ServerError::AlreadyExists(m) => Status::already_exists(m.clone()),
            ServerError::FailedPrecondition(m) => Status::failed_precondition(m.clone()),
            ServerError::Unauthenticated(m) => Status::unauthenticated(m.clone()),
            ServerError::PermissionDenied(m) => Status::permission_denied(m.clone()),
            ServerError::ResourceExhausted(m) => Status::resource_exhausted(m.clone()),
            ServerError::Unavailable(m) => Status::unavailable(m.clone()),
            ServerError::Unimplemented(m) => Status::unimplemented(m.clone()),
            ServerError::Wal(e) => wal_status(e),
            ServerError::Config(m) | ServerError::Internal(m) => Status::internal(m.clone()),
            ServerError::Delta(e) => Status::internal(format!("delta: {e}")),
            ServerError::Io { .. } => Status::internal(self.to_string()),
        }
    }
}

fn wal_status(e: &sluice_wal::WalError) -> Status {
    match e {
        sluice_wal::WalError::NoSpace { .. } => {
            Status::resource_exhausted(format!("write-ahead log disk is full: {e}"))
        }
        _ => Status::unavailable(format!(
            "write-ahead log cannot make records durable on this pod: {e}; reconnect to retry"
        )),
    }
}

impl From<ServerError> for Status {
    fn from(e: ServerError) -> Status {
        e.to_status()
    }
}
