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
    /// Where its MQTT listener is (`HOST:PORT`), if it serves MQTT: routers relay MQTT
    /// connections there. Absent in records of pods that predate it (read as none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mqtt_addr: Option<String>,
    /// Where its Kafka listener is (`HOST:PORT`), if it serves Kafka producers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_addr: Option<String>,
}

/// Where a pod is reached: its gRPC/HTTP URL and its optional TCP front doors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodAddrs {
    /// The gRPC and HTTP URL (`http://127.0.0.1:50051`).
    pub url: String,
    /// The MQTT listener, `HOST:PORT`.
    pub mqtt: Option<String>,
    /// The Kafka listener, `HOST:PORT`.
    pub kafka: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A record written by a pod without the front-door fields still decodes, and a record
    /// without them is written without them (older routers read it unchanged).
    #[test]
    fn the_front_door_addresses_are_optional_both_ways() {
        let old = r#"{"id":"p","addr":"http://h:1","state":"ready","load":{"open_streams":0,
            "ingress_bytes_per_sec":0.0,"cpu_cores":0.0,"wal_queue_bytes":0,"memtable_bytes":0},
            "reported_at_ms":5}"#;
        let record: PodRecord = serde_json::from_str(old).expect("old record");
        assert_eq!((record.mqtt_addr, record.kafka_addr), (None, None));
        let mut with = serde_json::from_str::<PodRecord>(old).expect("old record");
        let text = serde_json::to_string(&with).expect("json");
        assert!(
            !text.contains("mqtt_addr") && !text.contains("kafka_addr"),
            "{text}"
        );
        with.kafka_addr = Some("h:9092".into());
        let back: PodRecord =
            serde_json::from_str(&serde_json::to_string(&with).expect("json")).expect("back");
        assert_eq!(back.kafka_addr.as_deref(), Some("h:9092"));
    }
}
