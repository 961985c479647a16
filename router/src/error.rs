//! The cluster layer's error type.

use std::error::Error as _;

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
    /// An etcd call failed: etcd refused it, or it never reached etcd (the status then
    /// carries the transport error as its source).
    #[error("etcd {call}: {}", describe(.status))]
    Etcd {
        /// The call (`range`, `put`, `watch`, …).
        call: &'static str,
        /// What tonic reported (its transport cause is part of the message, not a
        /// `source`, so a chain printer does not repeat it).
        status: tonic::Status,
    },
    /// etcd ended or canceled a watch (compacted start revision, lost leader, stream closed).
    #[error("etcd watch on {key}: {reason}")]
    Watch {
        /// The watched key.
        key: String,
        /// Why it ended.
        reason: String,
    },
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

impl RouterError {
    /// Wraps the status of a failed etcd `call`.
    pub fn etcd(call: &'static str) -> impl FnOnce(tonic::Status) -> RouterError {
        move |status| RouterError::Etcd { call, status }
    }
}

/// A status as one line: its code, its message and, for a transport failure, the cause.
fn describe(status: &tonic::Status) -> String {
    let mut out = format!("{:?}: {}", status.code(), status.message());
    let mut cause = status.source();
    while let Some(e) = cause {
        out.push_str(": ");
        out.push_str(&e.to_string());
        cause = e.source();
    }
    out
}
