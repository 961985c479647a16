//! One stream's requests, checked and parsed: offsets must start at 0 and grow
//! by 1, records must fit `--max-record-bytes` and the stream's format, and
//! each record's row goes into the stream's builder. Pure: no pod, no WAL.
//!
//! A resumed persistent stream expects its watermark + 1 next; requests at or
//! below the watermark are resent records already durable ([`RequestParser::already_durable`]).

use std::sync::Arc;

use bytes::Bytes;
use sluice_proto::EphemeralStreamRequest;
use sluice_proto::{ephemeral_stream_request, ingest_record_batch_request, ingest_record_request};
use sluice_zeroparser::RecordBatchBuilder;

use crate::error::{Result, ServerError};
use crate::journal::frames::RecordFormat;
use crate::journal::RecordPlan;

/// Parses a stream's requests into its builder, in offset order.
pub struct RequestParser {
    format: RecordFormat,
    /// Compiled descriptor (PROTO) or writer schema (AVRO); shared with the small runs
    /// the memtable keeps as records (parsed again at the flush).
    plan: Arc<RecordPlan>,
    builder: RecordBatchBuilder,
    max_record_bytes: usize,
    next_offset: i64,
    /// A resumed persistent stream's watermark: offsets at or below it are durable.
    durable_through: Option<i64>,
    /// Inside [`check`](Self::check): records are checked, not appended, where the
    /// builder can.
    checking: bool,
}

impl RequestParser {
    /// A parser for a stream of `format` records (`plan`: its compiled
    /// descriptor or writer schema) into `builder`, expecting offset 0 first.
    pub fn new(
        format: RecordFormat,
        plan: RecordPlan,
        builder: RecordBatchBuilder,
        max_record_bytes: usize,
    ) -> RequestParser {
        RequestParser {
            format,
            plan: Arc::new(plan),
            builder,
            max_record_bytes,
            next_offset: 0,
            durable_through: None,
            checking: false,
        }
    }

    /// Continues a persistent stream whose records up to `watermark` are durable:
    /// the next offset is `watermark + 1`.
    pub fn resume_after(&mut self, watermark: i64) {
        self.next_offset = watermark.saturating_add(1);
        self.durable_through = Some(watermark);
    }

    /// The offset of `request` when it is a resent record at or below the resumed
    /// watermark (acked and dropped, never written twice).
    pub fn already_durable(&self, request: &EphemeralStreamRequest) -> Option<i64> {
        use ephemeral_stream_request::Payload;
        let offset = match &request.payload {
            Some(Payload::IngestRecord(r)) => r.offset_id?,
            Some(Payload::IngestRecordBatch(b)) => b.offset_id?,
            _ => return None,
        };
        (offset <= self.durable_through?).then_some(offset)
    }

    /// Rows in the builder (of the requests parsed since the last `finish`,
    /// plus any leading rows of a batch request that failed part-way).
    #[cfg(test)]
    pub fn rows(&self) -> usize {
        self.builder.len()
    }

    /// Whether the stream's records can write top-level column `name`: a
    /// protobuf descriptor only its fields; a JSON record any column (the
    /// stream was opened with them all); Avro and Arrow are taken as writing
    /// every column.
    pub fn writes_column(&self, name: &str) -> bool {
        match self.plan.as_ref() {
            RecordPlan::Proto(plan) => plan.columns().any(|c| c.eq_ignore_ascii_case(name)),
            _ => true,
        }
    }

    /// Whether [`check`](Self::check) costs less than [`parse`](Self::parse): protobuf
    /// records into a flat builder are checked without writing any column
    /// (`RecordBatchBuilder::checks_proto_without_appending`). Every run of such a stream
    /// goes to the memtable as its records (`sink::deferred`); any other record would be
    /// parsed twice that way.
    pub fn checks_cheaply(&self) -> bool {
        matches!(self.plan.as_ref(), RecordPlan::Proto(_))
            && self.builder.checks_proto_without_appending()
    }

    /// Whether the stream sends JSON records.
    pub fn is_json(&self) -> bool {
        self.format == RecordFormat::Json
    }

    /// Builds the next rows with `builder` (the table's, after its schema
    /// changed); the current builder must be empty (after `finish`).
    pub fn set_builder(&mut self, builder: RecordBatchBuilder) {
        self.builder = builder;
    }

    /// Makes room in the builder for a run of `requests` requests of `record_bytes`
    /// (`RecordBatchBuilder::reserve`): a run's columns then grow once, not through every
    /// doubling (their reallocations were 2.4 % of the pod's perf samples at 200-byte
    /// records, 3030aeb, runs of ~120 requests).
    pub fn reserve(&mut self, requests: usize, record_bytes: usize) {
        self.builder.reserve(requests, record_bytes);
    }

    /// Takes the builder's rows as one batch.
    pub fn finish(&mut self) -> arrow_array::RecordBatch {
        self.builder.finish()
    }

    /// Drops the builder's rows (their records go on as records, parsed again at the
    /// flush); the builder keeps its capacity.
    pub fn discard(&mut self) {
        self.builder.clear()
    }

    /// The plan the records are parsed with.
    pub fn plan(&self) -> &Arc<RecordPlan> {
        &self.plan
    }

    /// Validates one request, appends its rows to the builder and its raw
    /// records to `records`; returns its offset and expects the next one.
    /// A batch request that fails part-way leaves its leading records in
    /// `records` and its leading rows in the builder: the caller drops them.
    pub fn parse(
        &mut self,
        request: EphemeralStreamRequest,
        records: &mut Vec<(i64, Bytes)>,
    ) -> Result<i64> {
        let offset = self.parse_payload(request, records)?;
        self.next_offset = offset + 1;
        Ok(offset)
    }

    /// [`parse`](Self::parse) for a request whose rows are not wanted now (a small run's,
    /// whose records are parsed again at the flush): a record the builder can check without
    /// writing its columns (a flat table's protobuf record, `check_proto`) answers the same
    /// and leaves no row; any other is appended as by `parse` and dropped by
    /// [`discard`](Self::discard).
    pub fn check(
        &mut self,
        request: EphemeralStreamRequest,
        records: &mut Vec<(i64, Bytes)>,
    ) -> Result<i64> {
        self.checking = true;
        let parsed = self.parse(request, records);
        self.checking = false;
        parsed
    }

    fn parse_payload(
        &mut self,
        request: EphemeralStreamRequest,
        records: &mut Vec<(i64, Bytes)>,
    ) -> Result<i64> {
        use ephemeral_stream_request::Payload;
        match request.payload {
            Some(Payload::IngestRecord(r)) => {
                let offset = self.check_offset(r.offset_id, "ingest_record")?;
                use ingest_record_request::Record;
                let record = match r.record {
                    Some(Record::ProtoEncodedRecord(b)) => self.parse_proto(offset, None, b)?,
                    Some(Record::JsonRecord(s)) => self.parse_json(offset, None, s)?,
                    Some(Record::AvroEncodedRecord(b)) => self.parse_avro(offset, None, b)?,
                    None => {
                        return Err(ServerError::InvalidArgument(format!(
                            "ingest_record at offset {offset} carries no record"
                        )))
                    }
                };
                records.push((offset, record));
                Ok(offset)
            }
            Some(Payload::IngestRecordBatch(b)) => {
                let offset = self.check_offset(b.offset_id, "ingest_record_batch")?;
                use ingest_record_batch_request::Batch;
                let before = records.len();
                match b.batch {
                    Some(Batch::ProtoEncodedBatch(batch)) => {
                        for (i, r) in batch.records.into_iter().enumerate() {
                            let r = self.parse_proto(offset, Some(i), r)?;
                            records.push((offset, r));
                        }
                    }
                    Some(Batch::JsonBatch(batch)) => {
                        for (i, r) in batch.records.into_iter().enumerate() {
                            let r = self.parse_json(offset, Some(i), r)?;
                            records.push((offset, r));
                        }
                    }
                    Some(Batch::AvroBatch(batch)) => {
                        for (i, r) in batch.records.into_iter().enumerate() {
                            let r = self.parse_avro(offset, Some(i), r)?;
                            records.push((offset, r));
                        }
                    }
                    None => {}
                }
                if records.len() == before {
                    return Err(ServerError::InvalidArgument(format!(
                        "ingest_record_batch at offset {offset} is empty"
                    )));
                }
                Ok(offset)
            }
            Some(Payload::CreateStream(_)) => Err(ServerError::FailedPrecondition(
                "create_stream sent twice on one stream".into(),
            )),
            None => Err(ServerError::InvalidArgument(
                "request carries no payload".into(),
            )),
        }
    }

    fn check_offset(&self, offset: Option<i64>, what: &str) -> Result<i64> {
        let offset = offset.ok_or_else(|| {
            ServerError::InvalidArgument(format!(
                "{what} without offset_id (expected {})",
                self.next_offset
            ))
        })?;
        if offset != self.next_offset {
            return Err(ServerError::InvalidArgument(format!(
                "{what} has offset_id {offset}, expected {} (offsets must start at 0 and grow by 1)",
                self.next_offset
            )));
        }
        Ok(offset)
    }

    /// RESOURCE_EXHAUSTED for a record over `--max-record-bytes`.
    fn check_record_size(&self, offset: i64, index: Option<usize>, len: usize) -> Result<()> {
        let limit = self.max_record_bytes;
        if len > limit {
            return Err(ServerError::ResourceExhausted(format!(
                "{}: record of {len} bytes exceeds the limit of {limit} bytes (--max-record-bytes)",
                place(offset, index)
            )));
        }
        Ok(())
    }

    fn parse_proto(&mut self, offset: i64, index: Option<usize>, record: Bytes) -> Result<Bytes> {
        self.check_record_size(offset, index, record.len())?;
        let RecordPlan::Proto(plan) = self.plan.as_ref() else {
            return Err(self.wrong_format(offset, index, "proto"));
        };
        let checked = match self.checking {
            true => self.builder.check_proto(plan, &record),
            false => None,
        };
        checked
            .unwrap_or_else(|| self.builder.append_proto(plan, &record))
            .map_err(|e| ServerError::InvalidArgument(format!("{}: {e}", place(offset, index))))?;
        Ok(record)
    }

    fn parse_json(&mut self, offset: i64, index: Option<usize>, record: String) -> Result<Bytes> {
        self.check_record_size(offset, index, record.len())?;
        if self.format != RecordFormat::Json {
            return Err(self.wrong_format(offset, index, "JSON"));
        }
        self.builder
            .append_json(&record)
            .map_err(|e| ServerError::InvalidArgument(format!("{}: {e}", place(offset, index))))?;
        Ok(Bytes::from(record.into_bytes()))
    }

    fn parse_avro(&mut self, offset: i64, index: Option<usize>, record: Bytes) -> Result<Bytes> {
        self.check_record_size(offset, index, record.len())?;
        let RecordPlan::Avro(plan) = self.plan.as_ref() else {
            return Err(self.wrong_format(offset, index, "Avro"));
        };
        self.builder
            .append_avro(plan, &record)
            .map_err(|e| ServerError::InvalidArgument(format!("{}: {e}", place(offset, index))))?;
        Ok(record)
    }

    /// INVALID_ARGUMENT for a record of another format than the stream's.
    fn wrong_format(&self, offset: i64, index: Option<usize>, what: &str) -> ServerError {
        let stream = match self.format {
            RecordFormat::Proto => "PROTO",
            RecordFormat::Json => "JSON",
            RecordFormat::Avro => "AVRO",
            RecordFormat::Arrow => "Arrow",
        };
        ServerError::InvalidArgument(format!(
            "{}: {what} record on a{} {stream} stream",
            place(offset, index),
            if stream == "AVRO" || stream == "Arrow" {
                "n"
            } else {
                ""
            }
        ))
    }
}

fn place(offset: i64, index: Option<usize>) -> String {
    match index {
        Some(i) => format!("record {i} of the batch at offset {offset}"),
        None => format!("record at offset {offset}"),
    }
}

/// The records a request carries and their bytes in all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestSize {
    /// One, or its batch's count; 0 for a request with none.
    pub records: usize,
    /// The records' bytes (what the memtable, the WAL and the pace count).
    pub bytes: usize,
}

impl std::ops::AddAssign for RequestSize {
    fn add_assign(&mut self, other: RequestSize) {
        self.records += other.records;
        self.bytes += other.bytes;
    }
}

impl std::iter::Sum for RequestSize {
    fn sum<I: Iterator<Item = RequestSize>>(sizes: I) -> RequestSize {
        sizes.fold(RequestSize::default(), |mut all, size| {
            all += size;
            all
        })
    }
}

/// How many records `request` carries, and their bytes, in any format.
pub fn request_size(request: &EphemeralStreamRequest) -> RequestSize {
    use ephemeral_stream_request::Payload;
    use ingest_record_batch_request::Batch;
    use ingest_record_request::Record;
    fn batch(lens: impl ExactSizeIterator<Item = usize>) -> RequestSize {
        RequestSize {
            records: lens.len(),
            bytes: lens.sum(),
        }
    }
    match &request.payload {
        Some(Payload::IngestRecord(r)) => RequestSize {
            records: 1,
            bytes: match &r.record {
                Some(Record::ProtoEncodedRecord(b)) => b.len(),
                Some(Record::JsonRecord(s)) => s.len(),
                Some(Record::AvroEncodedRecord(b)) => b.len(),
                None => 0,
            },
        },
        Some(Payload::IngestRecordBatch(b)) => match &b.batch {
            Some(Batch::ProtoEncodedBatch(x)) => batch(x.records.iter().map(|r| r.len())),
            Some(Batch::JsonBatch(x)) => batch(x.records.iter().map(|r| r.len())),
            Some(Batch::AvroBatch(x)) => batch(x.records.iter().map(|r| r.len())),
            None => RequestSize::default(),
        },
        _ => RequestSize::default(),
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;
    use prost_types::{field_descriptor_proto, DescriptorProto, FieldDescriptorProto};
    use sluice_proto::{
        ingest_record_batch_request::Batch, ingest_record_request::Record, AvroRecordBatch,
        CreateIngestStreamRequest, IngestRecordBatchRequest, IngestRecordRequest, JsonRecordBatch,
        ProtoEncodedRecordBatch,
    };
    use sluice_zeroparser::TableSchema;

    use super::*;
    use ephemeral_stream_request::Payload;

    const LIMIT: usize = 64;

    fn schema() -> TableSchema {
        TableSchema::parse("id BIGINT NOT NULL").expect("schema")
    }

    fn json_parser() -> RequestParser {
        RequestParser::new(
            RecordFormat::Json,
            RecordPlan::Json,
            RecordBatchBuilder::new(&schema()),
            LIMIT,
        )
    }

    /// A PROTO parser for messages `R { int64 id = 1; }`.
    fn proto_parser() -> RequestParser {
        let descriptor = DescriptorProto {
            name: Some("R".into()),
            field: vec![FieldDescriptorProto {
                name: Some("id".into()),
                number: Some(1),
                r#type: Some(field_descriptor_proto::Type::Int64 as i32),
                label: Some(field_descriptor_proto::Label::Optional as i32),
                ..Default::default()
            }],
            ..Default::default()
        };
        let plan = sluice_zeroparser::ProtoPlan::compile(&descriptor.encode_to_vec(), &schema())
            .expect("plan");
        RequestParser::new(
            RecordFormat::Proto,
            RecordPlan::Proto(plan),
            RecordBatchBuilder::new(&schema()),
            LIMIT,
        )
    }

    fn request(payload: Payload) -> EphemeralStreamRequest {
        EphemeralStreamRequest {
            payload: Some(payload),
        }
    }

    fn json(offset: Option<i64>, record: &str) -> EphemeralStreamRequest {
        request(Payload::IngestRecord(IngestRecordRequest {
            offset_id: offset,
            record: Some(Record::JsonRecord(record.into())),
        }))
    }

    fn json_batch(offset: i64, records: &[&str]) -> EphemeralStreamRequest {
        request(Payload::IngestRecordBatch(IngestRecordBatchRequest {
            offset_id: Some(offset),
            batch: Some(Batch::JsonBatch(JsonRecordBatch {
                records: records.iter().map(|r| r.to_string()).collect(),
            })),
        }))
    }

    /// The error of parsing `r` as the next request of `p`.
    fn error(p: &mut RequestParser, r: EphemeralStreamRequest) -> ServerError {
        match p.parse(r, &mut Vec::new()) {
            Ok(offset) => panic!("accepted at offset {offset}"),
            Err(e) => e,
        }
    }

    #[test]
    fn a_resumed_stream_drops_resent_offsets_and_expects_the_watermark_plus_one() {
        let mut p = json_parser();
        p.resume_after(4);
        assert_eq!(p.already_durable(&json(Some(2), r#"{"id":1}"#)), Some(2));
        assert_eq!(p.already_durable(&json_batch(4, &[r#"{"id":1}"#])), Some(4));
        assert_eq!(p.already_durable(&json(Some(5), r#"{"id":1}"#)), None);
        assert!(matches!(
            error(&mut p, json(Some(6), r#"{"id":1}"#)),
            ServerError::InvalidArgument(m) if m.contains("expected 5")
        ));
        assert_eq!(
            p.parse(json(Some(5), r#"{"id":1}"#), &mut Vec::new()).ok(),
            Some(5)
        );
        assert_eq!(json_parser().already_durable(&json(Some(0), "{}")), None);
    }

    #[test]
    fn offsets_start_at_zero_and_grow_by_one() {
        let mut p = json_parser();
        let mut records = Vec::new();
        assert_eq!(
            p.parse(json(Some(0), r#"{"id":1}"#), &mut records).ok(),
            Some(0)
        );
        assert_eq!(
            p.parse(json(Some(1), r#"{"id":2}"#), &mut records).ok(),
            Some(1)
        );
        assert_eq!(p.rows(), 2);
        let offsets: Vec<i64> = records.iter().map(|(o, _)| *o).collect();
        assert_eq!(offsets, [0, 1]);
        assert_eq!(records[1].1.as_ref(), br#"{"id":2}"#);
        let e = error(&mut p, json(Some(3), r#"{"id":3}"#));
        assert!(
            matches!(&e, ServerError::InvalidArgument(m) if m.contains("offset_id 3, expected 2")),
            "{e}"
        );
        let e = error(&mut p, json(None, r#"{"id":3}"#));
        assert!(
            matches!(&e, ServerError::InvalidArgument(m) if m.contains("without offset_id (expected 2)")),
            "{e}"
        );
        // A refused request does not move the expected offset.
        assert_eq!(
            p.parse(json(Some(2), r#"{"id":3}"#), &mut records).ok(),
            Some(2)
        );
        assert_eq!(p.finish().num_rows(), 3);
        assert_eq!(p.rows(), 0);
    }

    #[test]
    fn a_batch_takes_one_offset_for_all_its_records() {
        let mut p = json_parser();
        let mut records = Vec::new();
        let batch = json_batch(0, &[r#"{"id":1}"#, r#"{"id":2}"#, r#"{"id":3}"#]);
        assert_eq!(p.parse(batch, &mut records).ok(), Some(0));
        assert_eq!(records.len(), 3);
        assert!(records.iter().all(|(o, _)| *o == 0));
        assert_eq!(
            p.parse(json(Some(1), r#"{"id":4}"#), &mut records).ok(),
            Some(1)
        );
        assert_eq!(p.rows(), 4);
    }

    #[test]
    fn a_batch_failing_part_way_leaves_its_leading_records_for_the_caller_to_drop() {
        let mut p = json_parser();
        let mut records = Vec::new();
        let e = p
            .parse(json_batch(0, &[r#"{"id":1}"#, "not json"]), &mut records)
            .err();
        assert!(
            matches!(&e, Some(ServerError::InvalidArgument(m)) if m.starts_with("record 1 of the batch at offset 0: ")),
            "{e:?}"
        );
        assert_eq!(records.len(), 1);
        assert_eq!(p.rows(), 1);
    }

    #[test]
    fn empty_and_payloadless_requests_are_invalid() {
        let mut p = json_parser();
        let e = error(&mut p, json_batch(0, &[]));
        assert!(
            matches!(&e, ServerError::InvalidArgument(m) if m == "ingest_record_batch at offset 0 is empty"),
            "{e}"
        );
        let no_record = request(Payload::IngestRecord(IngestRecordRequest {
            offset_id: Some(0),
            record: None,
        }));
        let e = error(&mut p, no_record);
        assert!(
            matches!(&e, ServerError::InvalidArgument(m) if m.contains("carries no record")),
            "{e}"
        );
        let e = error(&mut p, EphemeralStreamRequest { payload: None });
        assert!(matches!(e, ServerError::InvalidArgument(_)), "{e}");
        let again = request(Payload::CreateStream(CreateIngestStreamRequest::default()));
        assert!(matches!(
            error(&mut p, again),
            ServerError::FailedPrecondition(_)
        ));
    }

    /// An AVRO parser for records `R { long id; }`.
    fn avro_parser() -> RequestParser {
        let json = r#"{"type":"record","name":"R","fields":[{"name":"id","type":"long"}]}"#;
        let plan = RecordPlan::compile(RecordFormat::Avro, json.as_bytes(), &schema(), false)
            .expect("plan");
        RequestParser::new(
            RecordFormat::Avro,
            plan,
            RecordBatchBuilder::new(&schema()),
            LIMIT,
        )
    }

    fn avro_batch(offset: i64, records: &[&'static [u8]]) -> EphemeralStreamRequest {
        request(Payload::IngestRecordBatch(IngestRecordBatchRequest {
            offset_id: Some(offset),
            batch: Some(Batch::AvroBatch(AvroRecordBatch {
                records: records.iter().map(|r| Bytes::from_static(r)).collect(),
            })),
        }))
    }

    #[test]
    fn avro_datums_become_rows_and_a_truncated_one_is_refused() {
        let mut p = avro_parser();
        let mut records = Vec::new();
        // id = 7 (zig-zag 14), id = -1 (zig-zag 1).
        assert_eq!(
            p.parse(avro_batch(0, &[&[14], &[1]]), &mut records).ok(),
            Some(0)
        );
        assert_eq!(records[0].1.as_ref(), &[14]);
        let e = error(&mut p, avro_batch(1, &[&[0x80]]));
        assert!(
            matches!(&e, ServerError::InvalidArgument(m)
                if m == "record 0 of the batch at offset 1: field `id` at byte 1: record is truncated"),
            "{e}"
        );
        let e = error(&mut p, json(Some(1), r#"{"id":1}"#));
        assert!(
            matches!(&e, ServerError::InvalidArgument(m) if m.contains("JSON record on an AVRO stream")),
            "{e}"
        );
        let e = error(&mut json_parser(), avro_batch(0, &[&[14]]));
        assert!(
            matches!(&e, ServerError::InvalidArgument(m) if m.contains("Avro record on a JSON stream")),
            "{e}"
        );
        let rows = p.finish();
        let ids = rows
            .column(0)
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .expect("BIGINT");
        assert_eq!(ids.values().to_vec(), vec![7, -1]);
    }

    #[test]
    fn records_over_the_size_limit_are_resource_exhausted() {
        let mut p = json_parser();
        let big = format!(r#"{{"id":1,"pad":"{}"}}"#, "x".repeat(LIMIT));
        let e = error(&mut p, json(Some(0), &big));
        assert!(
            matches!(&e, ServerError::ResourceExhausted(m) if m.contains("--max-record-bytes")),
            "{e}"
        );
        assert_eq!(p.rows(), 0);
    }

    #[test]
    fn records_must_fit_the_stream_format() {
        let mut p = json_parser();
        let proto = request(Payload::IngestRecord(IngestRecordRequest {
            offset_id: Some(0),
            record: Some(Record::ProtoEncodedRecord(Bytes::from_static(&[8, 1]))),
        }));
        let e = error(&mut p, proto);
        assert!(
            matches!(&e, ServerError::InvalidArgument(m) if m.contains("proto record on a JSON stream")),
            "{e}"
        );
        let mut p = proto_parser();
        let e = error(&mut p, json(Some(0), r#"{"id":1}"#));
        assert!(
            matches!(&e, ServerError::InvalidArgument(m) if m.contains("JSON record on a PROTO stream")),
            "{e}"
        );
    }

    #[test]
    fn checked_proto_records_leave_no_row_and_fail_as_parsed_ones_do() {
        let one = |offset: i64, bytes: &'static [u8]| {
            request(Payload::IngestRecord(IngestRecordRequest {
                offset_id: Some(offset),
                record: Some(Record::ProtoEncodedRecord(Bytes::from_static(bytes))),
            }))
        };
        let mut p = proto_parser();
        let mut records = Vec::new();
        assert_eq!(p.check(one(0, &[8, 7]), &mut records).ok(), Some(0));
        assert_eq!(p.check(one(1, &[8, 9]), &mut records).ok(), Some(1));
        assert_eq!((records.len(), p.rows()), (2, 0));
        // The id is NOT NULL: an empty record fails, checked or parsed, with one message.
        let checked = p
            .check(one(2, &[]), &mut records)
            .map_err(|e| e.to_string());
        let mut q = proto_parser();
        let mut parsed_records = Vec::new();
        for offset in 0..2 {
            q.parse(one(offset, &[8, 1]), &mut parsed_records)
                .expect("valid record");
        }
        let parsed = q
            .parse(one(2, &[]), &mut parsed_records)
            .map_err(|e| e.to_string());
        assert!(checked.is_err(), "{checked:?}");
        assert_eq!(checked, parsed);
        assert!(
            checked.as_ref().is_err_and(|m| m.contains("id")),
            "{checked:?}"
        );
        // Offsets are checked as by parse: the failed record took none.
        assert_eq!(p.check(one(2, &[8, 3]), &mut records).ok(), Some(2));
        assert_eq!((records.len(), p.rows()), (3, 0));
        // A batch's records are checked one by one the same way.
        let batch = request(Payload::IngestRecordBatch(IngestRecordBatchRequest {
            offset_id: Some(3),
            batch: Some(Batch::ProtoEncodedBatch(ProtoEncodedRecordBatch {
                records: vec![Bytes::from_static(&[8, 4]), Bytes::from_static(&[8, 5])],
            })),
        }));
        assert_eq!(p.check(batch, &mut records).ok(), Some(3));
        assert_eq!((records.len(), p.rows()), (5, 0));
    }

    #[test]
    fn proto_records_become_rows() {
        let mut p = proto_parser();
        let mut records = Vec::new();
        // Field 1 (varint) = 7, then = 8.
        let batch = request(Payload::IngestRecordBatch(IngestRecordBatchRequest {
            offset_id: Some(0),
            batch: Some(Batch::ProtoEncodedBatch(ProtoEncodedRecordBatch {
                records: vec![Bytes::from_static(&[8, 7]), Bytes::from_static(&[8, 8])],
            })),
        }));
        assert_eq!(p.parse(batch, &mut records).ok(), Some(0));
        assert_eq!(records[1].1.as_ref(), &[8, 8]);
        let rows = p.finish();
        let ids = rows
            .column(0)
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .expect("BIGINT column");
        assert_eq!(ids.values().to_vec(), [7, 8]);
    }

    #[test]
    fn request_size_counts_records_and_their_bytes_of_any_format() {
        let size = |records, bytes| RequestSize { records, bytes };
        assert_eq!(request_size(&json(Some(0), "12345")), size(1, 5));
        assert_eq!(request_size(&json_batch(0, &["12", "345"])), size(2, 5));
        assert_eq!(
            request_size(&json_batch(0, &["{}", "{}", "{}"])),
            size(3, 6)
        );
        assert_eq!(request_size(&json_batch(0, &[])), size(0, 0));
        assert_eq!(
            request_size(&request(Payload::CreateStream(Default::default()))),
            size(0, 0)
        );
        assert_eq!(
            request_size(&EphemeralStreamRequest { payload: None }),
            size(0, 0)
        );
        // A run's size is the sum of its requests'.
        let run = [json(Some(0), "12345"), json_batch(1, &["12", "345"])];
        assert_eq!(
            run.iter().map(request_size).sum::<RequestSize>(),
            size(3, 10)
        );
    }
}
