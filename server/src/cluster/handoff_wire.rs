//! The hand-off on the wire (`sluice.cluster.v1.Committer/HandOff`): the
//! conversions between [`HandOff`] / [`HandOffAck`] / [`HandOffError`] and
//! their protobuf messages and gRPC statuses. Add actions travel as their
//! Delta-log JSON, so nothing of them is lost. A refusal carries its kind in
//! the `sluice-refusal` metadata, so the sender knows whether to resolve the
//! committer again, back off, or give up.

use deltalake::kernel::Add;
use sluice_proto::cluster::{HandOffRequest, HandOffResponse, StreamOffset};
use tonic::{Code, Status};

use crate::commit::{HandOff, HandOffAck, HandOffError};
use crate::error::ServerError;

/// Metadata key naming a refusal's kind.
pub const REFUSAL_KEY: &str = "sluice-refusal";
/// Metadata key of a busy committer's retry hint (milliseconds).
pub const RETRY_AFTER_KEY: &str = "retry-after-ms";
/// The retry hint a busy committer gives.
pub const BUSY_RETRY_MS: u64 = 200;

/// The request for `handoff`, addressed to the committer of `epoch`.
pub fn to_request(handoff: &HandOff, epoch: u64) -> Result<HandOffRequest, HandOffError> {
    let adds_json = handoff
        .adds
        .iter()
        .map(serde_json::to_string)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| HandOffError::Commit {
            table: handoff.table.clone(),
            message: format!("encoding Add actions: {e}"),
        })?;
    Ok(HandOffRequest {
        table: handoff.table.clone(),
        pod_id: handoff.pod_id.clone(),
        wal_id: handoff.wal_id.clone(),
        from_lsn: handoff.from_lsn,
        to_lsn: handoff.to_lsn,
        adds_json,
        streams: handoff
            .streams
            .iter()
            .map(|(stream_id, offset)| StreamOffset {
                stream_id: stream_id.clone(),
                offset: *offset,
            })
            .collect(),
        epoch,
        schema_id: handoff.schema_id.clone(),
    })
}

/// The hand-off a request carries, and the epoch it was addressed to.
pub fn from_request(request: HandOffRequest) -> Result<(HandOff, u64), Status> {
    let adds = request
        .adds_json
        .iter()
        .map(|json| serde_json::from_str::<Add>(json))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Status::invalid_argument(format!("an Add action does not decode: {e}")))?;
    if request.table.is_empty() || request.wal_id.is_empty() {
        return Err(Status::invalid_argument(
            "a hand-off names its table and WAL id",
        ));
    }
    if request.to_lsn <= request.from_lsn {
        return Err(Status::invalid_argument(format!(
            "empty WAL range ({}, {}]",
            request.from_lsn, request.to_lsn
        )));
    }
    let handoff = HandOff {
        table: request.table,
        pod_id: request.pod_id,
        wal_id: request.wal_id,
        from_lsn: request.from_lsn,
        to_lsn: request.to_lsn,
        adds,
        streams: request
            .streams
            .into_iter()
            .map(|s| (s.stream_id, s.offset))
            .collect(),
        schema_id: request.schema_id,
    };
    Ok((handoff, request.epoch))
}

/// The response for an answered hand-off.
pub fn to_response(ack: HandOffAck) -> HandOffResponse {
    HandOffResponse {
        version: ack.version,
        epoch: ack.epoch.unwrap_or(0),
        covered: ack.covered,
    }
}

/// The answer a response carries.
pub fn from_response(response: HandOffResponse) -> HandOffAck {
    HandOffAck {
        version: response.version,
        epoch: (response.epoch > 0).then_some(response.epoch),
        covered: response.covered,
    }
}

/// A refusal's kind, as sent in [`REFUSAL_KEY`].
fn kind(e: &HandOffError) -> &'static str {
    match e {
        HandOffError::Busy { .. } => "busy",
        HandOffError::Deposed { .. } => "deposed",
        HandOffError::Gap { .. } => "gap",
        HandOffError::Overlap { .. } => "overlap",
        HandOffError::WrongTable { .. } => "wrong-table",
        HandOffError::Commit { .. } => "commit",
        HandOffError::Stopped { .. } => "stopped",
        HandOffError::NotCommitter { .. } => "not-committer",
        HandOffError::Unreachable { .. } => "unreachable",
        HandOffError::MissingFile { .. } => "missing-file",
        HandOffError::StaleSchema { .. } => "stale-schema",
        HandOffError::Refused { .. } => "refused",
    }
}

/// The status a refusal is answered with: the code and message of the refusal as a
/// [`ServerError`] (one classification for both), plus the refusal kind and, when busy,
/// the retry hint in the metadata.
pub fn to_status(e: &HandOffError) -> Status {
    let mut status = ServerError::from(e.clone()).to_status();
    let metadata = status.metadata_mut();
    metadata.insert(
        REFUSAL_KEY,
        tonic::metadata::MetadataValue::from_static(kind(e)),
    );
    if matches!(e, HandOffError::Busy { .. }) {
        metadata.insert(RETRY_AFTER_KEY, BUSY_RETRY_MS.into());
    }
    status
}

/// The refusal a status of the committer of `table` means. A status without
/// a refusal kind (transport failure, an older pod) counts as unreachable.
pub fn from_status(table: &str, status: &Status) -> HandOffError {
    let table = table.to_string();
    let message = status.message().to_string();
    let kind = status
        .metadata()
        .get(REFUSAL_KEY)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match kind {
        "busy" => HandOffError::Busy {
            table,
            pending: 0,
            bytes: 0,
        },
        "deposed" | "stopped" | "not-committer" => HandOffError::NotCommitter {
            table,
            holder: message,
        },
        "commit" => HandOffError::Commit { table, message },
        "missing-file" => HandOffError::MissingFile {
            table,
            path: message,
        },
        "stale-schema" => HandOffError::StaleSchema {
            table,
            written: String::new(),
            current: message,
        },
        "" if matches!(
            status.code(),
            Code::Unavailable | Code::Unknown | Code::Cancelled | Code::DeadlineExceeded
        ) =>
        {
            HandOffError::Unreachable { table, message }
        }
        _ => HandOffError::Refused {
            table,
            message: format!("{:?}: {message}", status.code()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_keep_their_kind_across_the_wire() {
        let busy = HandOffError::Busy {
            table: "t".into(),
            pending: 3,
            bytes: 9,
        };
        let status = to_status(&busy);
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert!(status.metadata().get(RETRY_AFTER_KEY).is_some());
        assert!(matches!(
            from_status("t", &status),
            HandOffError::Busy { .. }
        ));
        let deposed = HandOffError::Deposed {
            table: "t".into(),
            epoch: 1,
            log_epoch: 2,
        };
        assert!(from_status("t", &to_status(&deposed)).re_resolve());
        let gap = HandOffError::Gap {
            table: "t".into(),
            wal_id: "w".into(),
            from_lsn: 9,
            committed: 1,
        };
        let back = from_status("t", &to_status(&gap));
        assert!(!back.re_resolve(), "{back:?}");
        let dropped = Status::unavailable("connection refused");
        assert!(from_status("t", &dropped).re_resolve());
    }

    #[test]
    fn a_hand_off_survives_the_round_trip() {
        let add: Add = serde_json::from_str(
            r#"{"path":"part-1.parquet","partitionValues":{},"size":10,"modificationTime":5,"dataChange":true,"stats":"{\"numRecords\":2}"}"#,
        )
        .expect("add");
        let handoff = HandOff {
            table: "main.s.t".into(),
            pod_id: "p".into(),
            wal_id: "w".into(),
            from_lsn: 1,
            to_lsn: 7,
            adds: vec![add],
            streams: vec![("s".into(), 4)],
            schema_id: "abc".into(),
        };
        let request = to_request(&handoff, 12).expect("request");
        let (back, epoch) = from_request(request).expect("decode");
        assert_eq!(back, handoff);
        assert_eq!(epoch, 12);
    }
}
