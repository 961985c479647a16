//! Names of the metrics the SDK records through the `metrics` facade (install any
//! recorder — Prometheus exporter, statsd — to see them). Stream metrics carry a `table`
//! label.
//!
//! | name | kind | meaning |
//! |---|---|---|
//! | `sluice_sdk_records_sent_total` | counter | records written to a connection (resends included) |
//! | `sluice_sdk_bytes_sent_total` | counter | their payload bytes |
//! | `sluice_sdk_records_acked_total` | counter | records acked as durable |
//! | `sluice_sdk_reconnects_total` | counter | connections opened again after a failure or a close signal |
//! | `sluice_sdk_ack_latency_seconds` | histogram | from `send` to the ack |
//! | `sluice_sdk_spool_bytes` | gauge | bytes waiting in the spool |
//! | `sluice_sdk_spool_dropped_records_total` | counter | records dropped from a full spool |

/// Records written to a connection.
pub const RECORDS_SENT: &str = "sluice_sdk_records_sent_total";
/// Payload bytes written.
pub const BYTES_SENT: &str = "sluice_sdk_bytes_sent_total";
/// Records acked.
pub const RECORDS_ACKED: &str = "sluice_sdk_records_acked_total";
/// Reconnects.
pub const RECONNECTS: &str = "sluice_sdk_reconnects_total";
/// Ack latency.
pub const ACK_LATENCY: &str = "sluice_sdk_ack_latency_seconds";
