//! What a pod publishes about itself in the meta store: identity, address, state and load.
//! Serialized as JSON under `/sluice/pods/<id>`, attached to the pod's lease.

use serde::{Deserialize, Serialize};

/// Whether a pod takes new streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PodState {
    /// Serving; new streams may be placed on it.
    Ready,
    /// Closing its streams; nothing new is placed on it.
    Draining,
}

/// A pod's load, refreshed every second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// Ingest streams open on the pod.
    pub open_streams: u64,
    /// Record bytes received per second (average over the last report interval).
    pub ingress_bytes_per_sec: f64,
    /// CPU used by the pod process, in cores (1.0 = one core busy).
    pub cpu_cores: f64,
    /// Bytes appended to the WAL and not yet durable.
    pub wal_queue_bytes: u64,
    /// Bytes of Arrow rows waiting in memtables for their Delta commit.
    pub memtable_bytes: u64,
}

/// A pod whose last report is older than this is not placed on (and shows as stale).
pub const STALE_AFTER_MS: i64 = 3_000;

/// One registered pod.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PodRecord {
    /// Stable pod id (`--pod-id`, default the host name and port).
    pub id: String,
    /// Where its gRPC and HTTP port is, as a URL (`http://127.0.0.1:50051`).
    pub addr: String,
    /// Ready or draining.
    pub state: PodState,
    /// Latest load report.
    pub load: Load,
    /// When the report was written, milliseconds since the Unix epoch.
    pub reported_at_ms: i64,
}

impl PodRecord {
    /// Whether new streams may go to this pod: ready, and its report is fresh (not older than
    /// `max_age_ms` at `now_ms`).
    pub fn placeable(&self, now_ms: i64, max_age_ms: i64) -> bool {
        self.state == PodState::Ready && now_ms - self.reported_at_ms <= max_age_ms
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
