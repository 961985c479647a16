//! The cluster layer's error type.

/// Result alias for the router crate.
pub type Result<T, E = RouterError> = std::result::Result<T, E>;

/// Everything that can go wrong talking to the meta store or proxying.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    /// A `--join` URL that is not `etcd://HOST:PORT[,HOST:PORT…]`.
    #[error("bad meta store URL {url:?}: {reason}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The etcd client failed.
    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
    /// A stored value could not be decoded.
    #[error("meta store value at {key}: {reason}")]
    Decode {
        /// The etcd key.
        key: String,
        /// Why.
        reason: String,
    },
    /// A pod that is not registered.
    #[error("no pod {0} is registered")]
    UnknownPod(String),
    /// Local I/O failed (binding the router's listener).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}
