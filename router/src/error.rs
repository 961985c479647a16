//! The cluster layer's error type.

use std::error::Error as _;

/// Result alias for the router crate.
pub type Result<T, E = RouterError> = std::result::Result<T, E>;

/// Everything that can go wrong talking to the meta store or proxying.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    /// A `--join` URL that is not `etcd://HOST:PORT[,HOST:PORT…]` (or `etcds://` for TLS).
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
    /// etcd refused the user name and password (or could not be asked).
    #[error("etcd authentication as user {user:?}: {}", describe(.status))]
    EtcdAuth {
        /// The etcd user.
        user: String,
        /// What etcd (or the transport) answered.
        status: tonic::Status,
    },
    /// TLS material given for etcd could not be used (unreadable file, plain `etcd://` URL).
    #[error("etcd TLS: {0}")]
    Tls(String),
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

/// A status as one line: its code, its message and, for a transport failure, the cause;
/// then what to do about it when the cause is a missing credential.
fn describe(status: &tonic::Status) -> String {
    let mut out = format!("{:?}: {}", status.code(), status.message());
    let mut cause = status.source();
    while let Some(e) = cause {
        out.push_str(": ");
        out.push_str(&e.to_string());
        cause = e.source();
    }
    if let Some(hint) = hint(&out) {
        out.push_str(" (");
        out.push_str(hint);
        out.push(')');
    }
    out
}

/// What an operator should do about a refusal, when the refusal says.
fn hint(described: &str) -> Option<&'static str> {
    if described.contains("user name is empty") {
        Some("etcd has authentication enabled: give --etcd-user and its password")
    } else if described.contains("tls handshake eof") {
        Some("etcd did not answer TLS: if it serves plain text, use an etcd:// URL")
    } else if described.contains("UnknownIssuer") {
        Some("etcd's certificate is not signed by the CA of --etcd-ca")
    } else {
        None
    }
}
