//! A refused REST request: its HTTP status and `error_code`, following the gRPC mapping
//! of Zerobus' REST surface (INVALID_PARAMETER_VALUE 400, NOT_FOUND 404, NOT_IMPLEMENTED
//! 501, UNAUTHENTICATED 401, PERMISSION_DENIED 403, RESOURCE_EXHAUSTED 429,
//! TEMPORARILY_UNAVAILABLE 503), plus 413 and 415 for bodies, and 503 with `Retry-After`
//! for a key another request (on any pod of a cluster) is still writing.

use super::body::BodyError;
use crate::error::ServerError;

/// Why a REST request was refused.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    /// The body could not be taken apart into records.
    #[error(transparent)]
    Body(#[from] BodyError),
    /// An OTLP/HTTP request whose content type is neither protobuf nor JSON.
    #[error("unsupported content type {0:?}: OTLP/HTTP takes application/x-protobuf or application/json")]
    OtlpContentType(String),
    /// The pod refused it (auth, table, record, WAL).
    #[error(transparent)]
    Server(#[from] ServerError),
    /// A request with the same `Idempotency-Key` is being written (or its pod died before
    /// it settled the key): retry after `retry_after_secs`.
    #[error("{message}")]
    KeyPending {
        /// What holds the key.
        message: String,
        /// The `Retry-After` hint, seconds.
        retry_after_secs: u64,
    },
}

impl RestError {
    /// The HTTP status and `error_code` of this refusal.
    pub fn status(&self) -> (u16, &'static str) {
        match self {
            RestError::Body(BodyError::TooLarge { .. }) => (413, "REQUEST_LIMIT_EXCEEDED"),
            RestError::Body(BodyError::ContentType(_) | BodyError::Encoding(_))
            | RestError::OtlpContentType(_) => (415, "INVALID_PARAMETER_VALUE"),
            RestError::Body(_) => (400, "INVALID_PARAMETER_VALUE"),
            RestError::Server(e) => server_status(e),
            RestError::KeyPending { .. } => (503, "TEMPORARILY_UNAVAILABLE"),
        }
    }

    /// The gRPC code with the same meaning as [`RestError::status`] (the OTLP/HTTP protobuf
    /// body's `Status.code`, and the `code` label of `sluice_refusals_total`).
    pub fn grpc_code(&self) -> tonic::Code {
        match self.status().0 {
            400 | 415 => tonic::Code::InvalidArgument,
            401 => tonic::Code::Unauthenticated,
            403 => tonic::Code::PermissionDenied,
            404 => tonic::Code::NotFound,
            413 | 429 => tonic::Code::ResourceExhausted,
            501 => tonic::Code::Unimplemented,
            503 => tonic::Code::Unavailable,
            _ => tonic::Code::Internal,
        }
    }

    /// Counts this refusal in `sluice_refusals_total{code}`, beside the stream refusals.
    pub fn count(&self) {
        crate::ingest::acks::count_refusal_code(self.grpc_code());
    }

    /// The `Retry-After` seconds to answer with, if any.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            RestError::KeyPending {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            _ => None,
        }
    }
}

fn server_status(e: &ServerError) -> (u16, &'static str) {
    match e {
        ServerError::InvalidArgument(_) => (400, "INVALID_PARAMETER_VALUE"),
        ServerError::NotFound(_) => (404, "NOT_FOUND"),
        ServerError::Unauthenticated(_) => (401, "UNAUTHENTICATED"),
        ServerError::PermissionDenied(_) => (403, "PERMISSION_DENIED"),
        ServerError::ResourceExhausted(_) => (429, "RESOURCE_EXHAUSTED"),
        ServerError::Unimplemented(_) => (501, "NOT_IMPLEMENTED"),
        ServerError::Unavailable(_) => (503, "TEMPORARILY_UNAVAILABLE"),
        ServerError::Wal(sluice_wal::WalError::NoSpace { .. }) => (429, "RESOURCE_EXHAUSTED"),
        ServerError::Wal(_) => (503, "TEMPORARILY_UNAVAILABLE"),
        _ => (500, "INTERNAL_ERROR"),
    }
}
