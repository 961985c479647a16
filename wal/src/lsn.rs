//! The log's position type.

/// Logical byte position in the log; continuous across segments.
pub type Lsn = u64;
