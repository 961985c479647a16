//! The Zerobus wire, seen from a producer: the opening message of an ephemeral or
//! persistent stream, record requests built from ledger entries, the server's answers
//! mapped to one [`Inbound`] type, and the record a refusal message names.

use bytes::Bytes;
use sluice_proto as pb;
use sluice_proto::{ephemeral_stream_request as eph_req, persistent_stream_request as per_req};

/// The record format of a stream.
#[derive(Debug, Clone)]
pub enum Format {
    /// JSON objects, one per record (UTF-8 text).
    Json,
    /// Protocol Buffers records; the serialized `DescriptorProto` of their message.
    Proto(Bytes),
}

impl Format {
    fn record_type(&self) -> pb::RecordType {
        match self {
            Format::Json => pb::RecordType::Json,
            Format::Proto(_) => pb::RecordType::Proto,
        }
    }

    fn descriptor(&self) -> Option<Bytes> {
        match self {
            Format::Json => None,
            Format::Proto(d) => Some(d.clone()),
        }
    }
}

/// How a connection begins.
#[derive(Debug, Clone)]
pub enum Opening {
    /// An ephemeral stream.
    Ephemeral,
    /// A new persistent stream.
    CreatePersistent,
    /// A persistent stream resumed by id.
    Resume(String),
}

/// What the server said on a stream.
#[derive(Debug)]
pub enum Inbound {
    /// The stream was created (persistent: its durable id).
    Created(Option<String>),
    /// A persistent stream resumed; every offset up to the watermark is durable.
    Resumed(Option<i64>),
    /// Every request up to this wire offset is durable.
    Ack(i64),
    /// The server asks the client to move on (drain, rotation) within `duration`.
    Close(Option<std::time::Duration>),
    /// An empty answer.
    Nothing,
}

/// One outgoing message, in the shape both services share.
#[derive(Debug)]
pub enum Outbound {
    /// The opening message.
    Open(pb::CreateIngestStreamRequest, Opening),
    /// One request of records with wire offset `offset`.
    Records(i64, Records),
}

/// The records of one request.
#[derive(Debug)]
pub enum Records {
    /// JSON texts.
    Json(Vec<String>),
    /// Encoded protobuf messages.
    Proto(Vec<Bytes>),
}

impl Records {
    /// The records of `payloads` in `format` (JSON payloads were checked as UTF-8 by
    /// `send`).
    pub fn build<'a>(format: &Format, payloads: impl Iterator<Item = &'a Bytes>) -> Records {
        match format {
            Format::Json => Records::Json(
                payloads
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .collect(),
            ),
            Format::Proto(_) => Records::Proto(payloads.cloned().collect()),
        }
    }
}

/// The opening message for `table` in `format`.
pub fn opening(table: &str, format: &Format, how: Opening) -> Outbound {
    let create = pb::CreateIngestStreamRequest {
        table_name: Some(table.to_string()),
        descriptor_proto: format.descriptor(),
        record_type: Some(format.record_type() as i32),
        avro_schema_json: None,
    };
    Outbound::Open(create, how)
}

fn batch(offset: i64, records: Records) -> pb::IngestRecordBatchRequest {
    use pb::ingest_record_batch_request::Batch;
    pb::IngestRecordBatchRequest {
        offset_id: Some(offset),
        batch: Some(match records {
            Records::Json(records) => Batch::JsonBatch(pb::JsonRecordBatch { records }),
            Records::Proto(records) => {
                Batch::ProtoEncodedBatch(pb::ProtoEncodedRecordBatch { records })
            }
        }),
    }
}

/// As an `EphemeralStream` message (records as one batch request).
pub fn ephemeral(out: Outbound) -> pb::EphemeralStreamRequest {
    let payload = match out {
        Outbound::Open(create, _) => eph_req::Payload::CreateStream(create),
        Outbound::Records(offset, records) => {
            eph_req::Payload::IngestRecordBatch(batch(offset, records))
        }
    };
    pb::EphemeralStreamRequest {
        payload: Some(payload),
    }
}

/// As a `PersistentStream` message (records as one batch request).
pub fn persistent(out: Outbound) -> pb::PersistentStreamRequest {
    let payload = match out {
        Outbound::Open(create, Opening::Resume(id)) => {
            per_req::Payload::ResumeStream(pb::ResumeIngestStreamRequest {
                identifier: Some(pb::resume_ingest_stream_request::Identifier::StreamId(id)),
                descriptor_proto: create.descriptor_proto,
                record_type: create.record_type,
            })
        }
        Outbound::Open(create, _) => {
            per_req::Payload::CreateStream(pb::CreatePersistentStreamRequest {
                create_stream: Some(create),
            })
        }
        Outbound::Records(offset, records) => {
            per_req::Payload::IngestRecordBatch(batch(offset, records))
        }
    };
    pb::PersistentStreamRequest {
        payload: Some(payload),
    }
}

fn duration(d: Option<prost_types::Duration>) -> Option<std::time::Duration> {
    d.map(|d| {
        std::time::Duration::from_secs(d.seconds.max(0) as u64)
            + std::time::Duration::from_nanos(d.nanos.max(0) as u64)
    })
}

impl From<pb::EphemeralStreamResponse> for Inbound {
    fn from(r: pb::EphemeralStreamResponse) -> Self {
        use pb::ephemeral_stream_response::Payload;
        match r.payload {
            Some(Payload::CreateStreamResponse(c)) => Inbound::Created(c.stream_id),
            Some(Payload::IngestRecordResponse(a)) => a
                .durability_ack_up_to_offset
                .map_or(Inbound::Nothing, Inbound::Ack),
            Some(Payload::CloseStreamSignal(c)) => Inbound::Close(duration(c.duration)),
            None => Inbound::Nothing,
        }
    }
}

impl From<pb::PersistentStreamResponse> for Inbound {
    fn from(r: pb::PersistentStreamResponse) -> Self {
        use pb::persistent_stream_response::Payload;
        match r.payload {
            Some(Payload::CreateStreamResponse(c)) => Inbound::Created(c.stream_id),
            Some(Payload::ResumeStreamResponse(r)) => Inbound::Resumed(r.last_committed_offset),
            Some(Payload::IngestRecordResponse(a)) => a
                .durability_ack_up_to_offset
                .map_or(Inbound::Nothing, Inbound::Ack),
            Some(Payload::CloseStreamSignal(c)) => Inbound::Close(duration(c.duration)),
            None => Inbound::Nothing,
        }
    }
}

/// The `(wire offset, index in the request)` a server refusal names: Sluice says
/// `record I of the batch at offset O: …` or `record at offset O: …`.
pub fn refused_place(message: &str) -> Option<(i64, usize)> {
    let number = |s: &str| -> Option<i64> {
        let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
        digits.parse().ok()
    };
    if let Some(rest) = message.split("record at offset ").nth(1) {
        return Some((number(rest)?, 0));
    }
    let rest = message.split("record ").nth(1)?;
    let index = number(rest)?;
    let offset = number(rest.split(" of the batch at offset ").nth(1)?)?;
    Some((offset, usize::try_from(index).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_messages_name_their_record() {
        assert_eq!(
            refused_place("record 3 of the batch at offset 12: field `id`: not a number"),
            Some((12, 3))
        );
        assert_eq!(refused_place("record at offset 7: truncated"), Some((7, 0)));
        assert_eq!(refused_place("table main.a.b not found"), None);
    }

    proptest::proptest! {
        #[test]
        fn any_message_is_parsed_without_panicking(message in ".{0,200}") {
            let _ = refused_place(&message);
        }

        #[test]
        fn the_named_place_is_found_behind_any_prefix(
            prefix in "[a-z ]{0,40}", offset in 0i64..i64::MAX, index in 0usize..100_000,
        ) {
            let batch = format!("{prefix}record {index} of the batch at offset {offset}: bad");
            proptest::prop_assert_eq!(refused_place(&batch), Some((offset, index)));
            let single = format!("record at offset {offset}: bad");
            proptest::prop_assert_eq!(refused_place(&single), Some((offset, 0)));
        }
    }

    #[test]
    fn a_resume_carries_the_stream_id_and_format() {
        let out = opening("main.a.b", &Format::Json, Opening::Resume("id-1".into()));
        let req = persistent(out);
        let Some(per_req::Payload::ResumeStream(r)) = req.payload else {
            panic!("not a resume: {req:?}");
        };
        assert_eq!(
            r.identifier,
            Some(pb::resume_ingest_stream_request::Identifier::StreamId(
                "id-1".into()
            ))
        );
        assert_eq!(r.record_type, Some(pb::RecordType::Json as i32));
    }
}
