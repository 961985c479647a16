//! The status crate's error type.

/// Result alias for the status crate.
pub type Result<T, E = StatusError> = std::result::Result<T, E>;

/// What can be wrong with the Prometheus text a snapshot is read from.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum StatusError {
    /// A sample line that is not `name{labels} value`.
    #[error("line {line} of the metrics text: {reason}")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
}
