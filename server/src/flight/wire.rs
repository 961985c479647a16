//! The JSON the official SDKs put in Flight `app_metadata`: `{"offset_id": n}` on each
//! batch the producer sends; `{"ack_up_to_offset", "ack_up_to_records"
//! [, "close_stream_duration_ms"]}` on each `PutResult` the pod sends (the first one, with
//! offset -1, is the ready signal).

use arrow_flight::PutResult;
use serde::{Deserialize, Serialize};

use crate::ingest::acks::AckWire;

/// The offset of the ready signal.
pub const READY_OFFSET: i64 = -1;

/// A batch's metadata.
#[derive(Debug, Deserialize)]
struct BatchMetadata {
    offset_id: i64,
}

/// An acknowledgement's metadata.
#[derive(Debug, Serialize)]
struct AckMetadata {
    ack_up_to_offset: i64,
    ack_up_to_records: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    close_stream_duration_ms: Option<u64>,
}

/// The `offset_id` of a batch's `app_metadata`; the error says what is wrong.
pub fn batch_offset(app_metadata: &[u8]) -> Result<i64, String> {
    if app_metadata.is_empty() {
        return Err("the batch has no app_metadata; expected {\"offset_id\": n}".into());
    }
    serde_json::from_slice::<BatchMetadata>(app_metadata)
        .map(|m| m.offset_id)
        .map_err(|e| format!("the batch's app_metadata is not {{\"offset_id\": n}}: {e}"))
}

fn put_result(meta: &AckMetadata) -> PutResult {
    // Serializing two integers and an option cannot fail.
    let json = serde_json::to_vec(meta).unwrap_or_default();
    PutResult {
        app_metadata: json.into(),
    }
}

/// The ready signal: the stream is open, nothing is acked yet.
pub fn ready() -> PutResult {
    PutResult::ack(READY_OFFSET, 0)
}

impl AckWire for PutResult {
    fn ack(offset: i64, records: u64) -> Self {
        put_result(&AckMetadata {
            ack_up_to_offset: offset,
            ack_up_to_records: records,
            close_stream_duration_ms: None,
        })
    }

    /// The Flight form of `CloseStreamSignal`, repeating the last ack sent (the ready
    /// offset and 0 records before any), so it never reads as progress or regress.
    fn close_signal(grace: std::time::Duration, last_ack: Option<(i64, u64)>) -> Self {
        let (offset, records) = last_ack.unwrap_or((READY_OFFSET, 0));
        put_result(&AckMetadata {
            ack_up_to_offset: offset,
            ack_up_to_records: records,
            close_stream_duration_ms: Some(grace.as_millis() as u64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_metadata_is_read_and_bad_metadata_is_named() {
        assert_eq!(batch_offset(br#"{"offset_id": 42}"#), Ok(42));
        assert!(batch_offset(b"").is_err_and(|e| e.contains("no app_metadata")));
        assert!(batch_offset(b"{}").is_err_and(|e| e.contains("offset_id")));
    }

    #[test]
    fn acks_and_close_signals_are_the_sdk_json() {
        let ack: serde_json::Value =
            serde_json::from_slice(&PutResult::ack(7, 700).app_metadata).expect("json");
        assert_eq!(
            ack,
            serde_json::json!({"ack_up_to_offset": 7, "ack_up_to_records": 700})
        );
        let close: serde_json::Value = serde_json::from_slice(
            &PutResult::close_signal(std::time::Duration::from_secs(2), Some((3, 30))).app_metadata,
        )
        .expect("json");
        assert_eq!(close["close_stream_duration_ms"], 2000);
        assert_eq!(close["ack_up_to_records"], 30);
        let ready: serde_json::Value = serde_json::from_slice(&ready().app_metadata).expect("json");
        assert_eq!(ready["ack_up_to_offset"], -1);
    }
}
