//! One Produce partition into its table, the REST insert's path with Kafka's answers: the
//! caller's write right on the table (TOPIC_AUTHORIZATION_FAILED), the table
//! (UNKNOWN_TOPIC_OR_PARTITION), one v2 record batch decoded within the request limit
//! (MESSAGE_TOO_LARGE, CORRUPT_MESSAGE), every record's value a JSON object parsed by the
//! table's parser into one Arrow batch, all or nothing (INVALID_RECORD naming the record
//! and field), an idempotent producer's sequence judged ([`super::producers`]), then the
//! records logged as one WAL frame with the batch added to the memtable. The caller
//! answers once that frame is durable (acks=1 and acks=all alike).
//!
//! Tables with the opt-in columns `_kafka_key` (BINARY), `_kafka_headers`
//! (MAP<STRING, BINARY>) and `_kafka_timestamp` (TIMESTAMP) get them filled: the record
//! logged is the value's JSON object with these members appended (base64, an object of
//! base64 values, microseconds), so replay re-parses exactly what was acked.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine;
use bytes::Bytes;
use kafka_protocol::records::Record;
use sluice_wal::Lsn;
use tokio::sync::OnceCell;

use super::decode::{decode_batch, Batch, DecodeError};
use super::producers::{self, Producers, Verdict};
use crate::auth::Caller;
use crate::error::{Result, ServerError};
use crate::ingest::open::log_open_frame;
use crate::journal::frames::RecordFormat;
use crate::journal::frames::{encode_records, KIND_RECORDS};
use crate::pod::Pod;
use crate::rest::insert::MEMTABLE_LIMIT_FLUSHES;
use crate::sink::{SharedSink, StreamMark};

/// Kafka error codes this service answers.
pub mod code {
    /// Success.
    pub const NONE: i16 = 0;
    /// Something unexpected on this pod.
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    /// The batch does not decode.
    pub const CORRUPT_MESSAGE: i16 = 2;
    /// No such table, or a partition other than 0.
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    /// A record or the batch is over the limit.
    pub const MESSAGE_TOO_LARGE: i16 = 10;
    /// acks other than -1, 0 or 1.
    pub const INVALID_REQUIRED_ACKS: i16 = 21;
    /// The caller may not write the table.
    pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    /// Not supported (transactions).
    pub const INVALID_REQUEST: i16 = 42;
    /// A sequence gap or overlap.
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    /// An older producer epoch.
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    /// The WAL refused or failed.
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    /// A record does not fit the table.
    pub const INVALID_RECORD: i16 = 87;

    /// The gRPC code a refusal with Kafka error `code` is counted as in
    /// `sluice_refusals_total{code}` (the label every door shares).
    pub fn grpc(code: i16) -> tonic::Code {
        match code {
            NONE => tonic::Code::Ok,
            CORRUPT_MESSAGE | INVALID_REQUIRED_ACKS | INVALID_RECORD => {
                tonic::Code::InvalidArgument
            }
            UNKNOWN_TOPIC_OR_PARTITION => tonic::Code::NotFound,
            MESSAGE_TOO_LARGE => tonic::Code::ResourceExhausted,
            TOPIC_AUTHORIZATION_FAILED => tonic::Code::PermissionDenied,
            INVALID_REQUEST => tonic::Code::Unimplemented,
            OUT_OF_ORDER_SEQUENCE_NUMBER | INVALID_PRODUCER_EPOCH => {
                tonic::Code::FailedPrecondition
            }
            KAFKA_STORAGE_ERROR => tonic::Code::Unavailable,
            _ => tonic::Code::Internal,
        }
    }
}

/// The opt-in columns, in the order they are appended to a record.
pub const KAFKA_COLUMNS: [&str; 3] = ["_kafka_key", "_kafka_headers", "_kafka_timestamp"];

/// What one partition's produce came to.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Kafka error code (0: accepted).
    pub error_code: i16,
    /// The reason, for the client (Produce v8+).
    pub message: Option<String>,
    /// The record the reason is about (index in the batch, message).
    pub record_error: Option<(i32, String)>,
    /// The base offset answered: the WAL position of the batch's frame (-1: none).
    pub base_offset: i64,
    /// The frame to wait for before answering.
    pub durable: Option<Lsn>,
    /// The gRPC code of a refusal that came from a pod error (else [`code::grpc`]).
    pub grpc: Option<tonic::Code>,
}

impl Outcome {
    fn refused(error_code: i16, message: impl Into<String>) -> Outcome {
        Outcome {
            error_code,
            message: Some(message.into()),
            base_offset: -1,
            ..Outcome::default()
        }
    }

    /// The answer to an error of the pod (WAL, store, catalog).
    pub fn from_error(e: &ServerError) -> Outcome {
        let code = match e {
            ServerError::NotFound(_) => code::UNKNOWN_TOPIC_OR_PARTITION,
            ServerError::PermissionDenied(_) | ServerError::Unauthenticated(_) => {
                code::TOPIC_AUTHORIZATION_FAILED
            }
            ServerError::InvalidArgument(_) => code::INVALID_RECORD,
            ServerError::Wal(_)
            | ServerError::ResourceExhausted(_)
            | ServerError::Unavailable(_) => code::KAFKA_STORAGE_ERROR,
            _ => code::UNKNOWN_SERVER_ERROR,
        };
        Outcome {
            grpc: Some(e.to_status().code()),
            ..Outcome::refused(code, e.to_string())
        }
    }

    /// The gRPC code this outcome counts as in `sluice_refusals_total{code}`.
    pub fn grpc_code(&self) -> tonic::Code {
        self.grpc.unwrap_or_else(|| code::grpc(self.error_code))
    }
}

/// The Kafka side of a pod: each table's stream for producers without an id, and the
/// idempotent producers.
#[derive(Default)]
pub struct KafkaIngest {
    /// Idempotent producers.
    pub producers: Producers,
    tables: Mutex<HashMap<String, Arc<OnceCell<PlainStream>>>>,
}

struct PlainStream {
    key: u64,
    next_offset: AtomicI64,
}

impl KafkaIngest {
    /// The stream of producers without an id on `sink`'s table, and the first offset of
    /// `count` records in it.
    async fn plain_stream(&self, pod: &Pod, sink: &SharedSink, count: usize) -> Result<(u64, i64)> {
        let cell = self
            .tables
            .lock()
            .map_err(|_| ServerError::Internal("Kafka streams poisoned".into()))?
            .entry(sink.name().to_string())
            .or_default()
            .clone();
        let stream = cell
            .get_or_try_init(|| async {
                Ok::<_, ServerError>(PlainStream {
                    key: log_open_frame(pod, sink, RecordFormat::Json, Vec::new(), None)
                        .await?
                        .key,
                    next_offset: AtomicI64::new(0),
                })
            })
            .await?;
        let first = stream
            .next_offset
            .fetch_add(count as i64, Ordering::Relaxed);
        Ok((stream.key, first))
    }
}

/// Produces `data` (one partition's records) into table `topic`; an error is answered
/// with [`Outcome::from_error`].
pub async fn produce(
    pod: &Pod,
    kafka: &KafkaIngest,
    caller: &Caller,
    topic: &str,
    partition: i32,
    data: Option<Bytes>,
) -> Result<Outcome> {
    let table = topic.trim().to_ascii_lowercase();
    if pod.is_shutting_down() {
        return Err(ServerError::Unavailable(
            "this pod is shutting down; retry after its restart".into(),
        ));
    }
    pod.auth.authorize_write(caller, &table)?;
    let Some(sink) = pod.sink_for(&table).await? else {
        return Ok(Outcome::refused(
            code::UNKNOWN_TOPIC_OR_PARTITION,
            format!("table `{table}` does not exist"),
        ));
    };
    if partition != 0 {
        return Ok(Outcome::refused(
            code::UNKNOWN_TOPIC_OR_PARTITION,
            format!("table `{table}` has one partition, 0; got {partition}"),
        ));
    }
    let Some(data) = data else {
        return Ok(Outcome::refused(code::CORRUPT_MESSAGE, "no records"));
    };
    let batch = match decode_batch(data, pod.config.max_message_bytes) {
        Ok(b) => b,
        Err(e @ DecodeError::TooLarge { .. }) => {
            return Ok(Outcome::refused(code::MESSAGE_TOO_LARGE, e.to_string()))
        }
        Err(e) => return Ok(Outcome::refused(code::CORRUPT_MESSAGE, e.to_string())),
    };
    if batch.transactional || batch.control {
        return Ok(Outcome::refused(
            code::INVALID_REQUEST,
            "transactional and control batches are not supported",
        ));
    }
    let texts = match record_texts(&sink, &batch, pod.config.limits.max_record_bytes) {
        Ok(t) => t,
        Err(outcome) => return Ok(outcome),
    };
    let mut builder = sink.batch_builder()?;
    for (i, text) in texts.iter().enumerate() {
        if let Err(e) = builder.append_json(text) {
            let message = format!("record {i}: {e}");
            return Ok(Outcome {
                record_error: Some((i as i32, message.clone())),
                ..Outcome::refused(code::INVALID_RECORD, message)
            });
        }
    }
    let rows = builder.finish();
    let bytes: usize = texts.iter().map(String::len).sum();
    let outcome = if batch.producer_id >= 0 {
        write_idempotent(pod, kafka, &sink, &batch, &texts, rows).await?
    } else {
        let (key, first) = kafka.plain_stream(pod, &sink, texts.len()).await?;
        let offsets: Vec<i64> = (0..texts.len() as i64).map(|i| first + i).collect();
        let lsn = write(pod, &sink, key, &offsets, &texts, rows, None).await?;
        accepted(lsn)
    };
    if outcome.error_code == code::NONE {
        metrics::counter!("sluice_kafka_records_total").increment(texts.len() as u64);
        sink.ingress().written(texts.len(), bytes);
        pod.load.record_ingress(bytes);
    }
    Ok(outcome)
}

fn accepted(lsn: Lsn) -> Outcome {
    Outcome {
        base_offset: lsn as i64,
        durable: Some(lsn),
        ..Outcome::default()
    }
}

/// An idempotent producer's batch: judged against its watermark, written if next.
async fn write_idempotent(
    pod: &Pod,
    kafka: &KafkaIngest,
    sink: &SharedSink,
    batch: &Batch,
    texts: &[String],
    rows: arrow_array::RecordBatch,
) -> Result<Outcome> {
    let pid = batch.producer_id;
    let epoch = batch.producer_epoch;
    if let Some(current) = kafka.producers.current_epoch(pid)? {
        if epoch < current {
            return Ok(Outcome::refused(
                code::INVALID_PRODUCER_EPOCH,
                format!("producer {pid} epoch {epoch} was fenced by epoch {current}"),
            ));
        }
    }
    let id = producers::stream_id(pid, sink.name());
    let fresh = kafka.producers.is_fresh(pid)?;
    let slot = kafka.producers.slot(pid, sink.name())?;
    let mut slot = slot.lock().await;
    // This pod owns the producer's stream, with its watermark current, for this batch.
    let _held = super::producer_stream::own(pod, sink, &id, fresh, &mut slot).await?;
    match producers::judge(slot.last, epoch, batch.base_sequence, texts.len()) {
        Verdict::Write => {}
        Verdict::Duplicate => {
            metrics::counter!("sluice_kafka_duplicate_batches_total").increment(1);
            return Ok(Outcome {
                base_offset: -1,
                durable: (slot.last_lsn > 0).then_some(slot.last_lsn),
                ..Outcome::default()
            });
        }
        Verdict::OutOfOrder(m) => {
            return Ok(Outcome::refused(code::OUT_OF_ORDER_SEQUENCE_NUMBER, m))
        }
        Verdict::Fenced(m) => return Ok(Outcome::refused(code::INVALID_PRODUCER_EPOCH, m)),
    }
    let key = match slot.stream_key {
        Some(key) => key,
        None => {
            let key = log_open_frame(pod, sink, RecordFormat::Json, Vec::new(), Some(&id))
                .await?
                .key;
            slot.stream_key = Some(key);
            key
        }
    };
    let offsets: Vec<i64> = (0..texts.len() as i32)
        .map(|i| producers::offset(epoch, batch.base_sequence + i))
        .collect();
    let last = offsets.last().copied().unwrap_or_default();
    let mark = StreamMark {
        stream_id: Arc::from(id.as_str()),
        offset: last,
    };
    let lsn = write(pod, sink, key, &offsets, texts, rows, Some(mark)).await?;
    pod.pstreams.wal_logged(&id, last, lsn);
    slot.last = Some(producers::watermark(last));
    slot.last_lsn = lsn;
    Ok(accepted(lsn))
}

/// Logs `texts` (at `offsets` of stream `key`) as one frame and `rows` into the memtable.
async fn write(
    pod: &Pod,
    sink: &SharedSink,
    key: u64,
    offsets: &[i64],
    texts: &[String],
    rows: arrow_array::RecordBatch,
    mark: Option<StreamMark>,
) -> Result<Lsn> {
    let rows = sink.with_system_columns(rows, key, offsets.iter().copied())?;
    let frame = encode_records(
        key,
        offsets
            .iter()
            .copied()
            .zip(texts.iter().map(|t| t.as_bytes())),
    );
    sink.wait_for_room(
        pod.config
            .flush_bytes
            .saturating_mul(MEMTABLE_LIMIT_FLUSHES),
    )
    .await;
    let lsn = sink
        .append_marked(KIND_RECORDS, frame, Some(rows), mark)
        .await?;
    pod.streams.records_logged(key, lsn);
    Ok(lsn)
}

/// Each record as the JSON text to parse and log: its value, plus the opt-in columns the
/// table has. A refusal names the record.
fn record_texts(
    sink: &SharedSink,
    batch: &Batch,
    max_record: usize,
) -> std::result::Result<Vec<String>, Outcome> {
    let schema = sink.schema();
    let wanted: Vec<bool> = KAFKA_COLUMNS
        .iter()
        .map(|c| schema.columns.iter().any(|col| col.name == *c))
        .collect();
    let any = wanted.iter().any(|w| *w);
    let refuse = |i: usize, error_code: i16, message: String| {
        let message = format!("record {i}: {message}");
        Outcome {
            record_error: Some((i as i32, message.clone())),
            ..Outcome::refused(error_code, message)
        }
    };
    let mut texts = Vec::with_capacity(batch.records.len());
    for (i, record) in batch.records.iter().enumerate() {
        let Some(value) = &record.value else {
            return Err(refuse(
                i,
                code::INVALID_RECORD,
                "the value is null; a JSON object is expected".into(),
            ));
        };
        if value.len() > max_record {
            return Err(refuse(
                i,
                code::MESSAGE_TOO_LARGE,
                format!(
                    "value of {} bytes, over the record limit of {max_record}",
                    value.len()
                ),
            ));
        }
        let text = std::str::from_utf8(value).map_err(|e| {
            refuse(
                i,
                code::INVALID_RECORD,
                format!("the value is not UTF-8 JSON ({e})"),
            )
        })?;
        if !any {
            texts.push(text.to_string());
            continue;
        }
        texts.push(
            with_kafka_columns(text, record, &wanted)
                .map_err(|m| refuse(i, code::INVALID_RECORD, m))?,
        );
    }
    Ok(texts)
}

/// `text` (a JSON object) with the wanted Kafka members appended (a later member wins,
/// so a value cannot set them itself).
fn with_kafka_columns(
    text: &str,
    record: &Record,
    wanted: &[bool],
) -> std::result::Result<String, String> {
    let trimmed = text.trim();
    let object = serde_json::from_str::<&serde_json::value::RawValue>(trimmed)
        .ok()
        .filter(|_| trimmed.starts_with('{'))
        .ok_or_else(|| "the value is not a JSON object".to_string())?;
    let body = object.get();
    let inner = body[1..body.len() - 1].trim();
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let mut out = String::with_capacity(body.len() + 64);
    out.push('{');
    out.push_str(inner);
    let mut sep = !inner.is_empty();
    let mut member = |out: &mut String, name: &str, value: &str| {
        if sep {
            out.push(',');
        }
        sep = true;
        let _ = write!(out, "\"{name}\":{value}");
    };
    if wanted[0] {
        let key = match &record.key {
            Some(k) => format!("\"{}\"", b64(k)),
            None => "null".into(),
        };
        member(&mut out, KAFKA_COLUMNS[0], &key);
    }
    if wanted[1] {
        let mut headers = String::from("{");
        for (n, (name, value)) in record.headers.iter().enumerate() {
            if n > 0 {
                headers.push(',');
            }
            let name = serde_json::to_string(name.as_str()).map_err(|e| e.to_string())?;
            match value {
                Some(v) => {
                    let _ = write!(headers, "{name}:\"{}\"", b64(v));
                }
                None => {
                    let _ = write!(headers, "{name}:null");
                }
            }
        }
        headers.push('}');
        member(&mut out, KAFKA_COLUMNS[1], &headers);
    }
    if wanted[2] {
        let micros = record.timestamp.saturating_mul(1000).to_string();
        member(&mut out, KAFKA_COLUMNS[2], &micros);
    }
    out.push('}');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexMap;
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::TimestampType;

    fn record() -> Record {
        let mut headers = IndexMap::new();
        headers.insert(
            StrBytes::from_static_str("h\"1"),
            Some(Bytes::from_static(b"v")),
        );
        headers.insert(StrBytes::from_static_str("h2"), None);
        Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: -1,
            timestamp: 1_700_000_000_123,
            key: Some(Bytes::from_static(b"\x00k")),
            value: None,
            headers,
        }
    }

    #[test]
    fn the_kafka_members_come_last_so_they_win() {
        let text = with_kafka_columns(
            r#" {"id": 1, "_kafka_key": "forged"} "#,
            &record(),
            &[true, true, true],
        )
        .expect("object");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(v["id"], 1);
        assert_eq!(v["_kafka_key"], "AGs=");
        assert_eq!(v["_kafka_headers"]["h\"1"], "dg==");
        assert!(v["_kafka_headers"]["h2"].is_null());
        assert_eq!(v["_kafka_timestamp"], 1_700_000_000_123_000_i64);
        assert!(text.ends_with(r#""_kafka_timestamp":1700000000123000}"#));
    }

    #[test]
    fn an_empty_object_and_only_some_columns() {
        let text = with_kafka_columns("{}", &record(), &[false, false, true]).expect("object");
        assert_eq!(text, r#"{"_kafka_timestamp":1700000000123000}"#);
        assert!(with_kafka_columns("[1]", &record(), &[true, false, false]).is_err());
        assert!(with_kafka_columns("{\"a\":", &record(), &[true, false, false]).is_err());
    }
}
