//! The service behind a PUBLISH: the topic names the connection's one table
//! (`catalog.schema.table`, checked against the identity's grants on first use), and the
//! payload's records are written by the REST insert service (`rest::insert`: parsed
//! all-or-nothing by the table's parser, logged as one WAL frame of this listener's JSON
//! stream for the table, added to the memtable) — one-record payloads gathered with other
//! connections' into shared writes (`coalesce`) — and it returns once the frame is
//! durable, so the PUBACK/PUBREC that follows is the ack rule of streams.
//!
//! Each refusal is an MQTT 5 reason code with a reason string: 0x90 Topic Name invalid
//! (not three dotted names, no such table, or a second table on the connection), 0x87 Not
//! authorized (no MODIFY grant), 0x99 Payload format invalid (not JSON objects, or a
//! record that does not fit the table: the parser's message names the record and field),
//! 0x97 Quota exceeded (WAL disk full, memtable limits), 0x80 otherwise.

use std::sync::Arc;

use crate::journal::frames::Qos2Pair;
use crate::pod::Pod;
use crate::rest::{RestError, RestIngest};
use crate::sink::SharedSink;

use super::coalesce::Coalescer;
use super::credentials::Identity;
use super::payload;
use super::refusal::refusal;
pub use super::refusal::Refusal;
use super::wire::reason;

/// The connection's table, bound by its first accepted PUBLISH.
#[derive(Clone)]
pub struct Binding {
    /// Lower-case full name.
    pub table: String,
    /// Its sink.
    pub sink: SharedSink,
}

/// The binding of `topic` for `identity`: `bound` if the connection has one and the topic
/// names its table, else the table checked now (name, grant, existence).
pub async fn bind(
    pod: &Pod,
    identity: &Identity,
    bound: Option<&Binding>,
    topic: &str,
) -> Result<Binding, Refusal> {
    let table = topic.trim().to_ascii_lowercase();
    if let Some(b) = bound {
        if b.table == table {
            return Ok(b.clone());
        }
        return Err(Refusal::new(
            reason::TOPIC_NAME_INVALID,
            tonic::Code::InvalidArgument,
            format!(
                "one table per connection: this connection writes `{}`, not `{table}`; open \
                 another connection for another table",
                b.table
            ),
        ));
    }
    let parts: Vec<&str> = table.split('.').collect();
    if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
        return Err(Refusal::new(
            reason::TOPIC_NAME_INVALID,
            tonic::Code::InvalidArgument,
            format!("topic `{topic}` is not a table name: publish to `catalog.schema.table`"),
        ));
    }
    identity
        .authorize_write(pod, &table)
        .map_err(|e| Refusal::new(reason::NOT_AUTHORIZED, e.to_status().code(), e.to_string()))?;
    let sink = pod
        .sink_for(&table)
        .await
        .map_err(|e| refusal(RestError::Server(e)))?
        .ok_or_else(|| {
            Refusal::new(
                reason::TOPIC_NAME_INVALID,
                tonic::Code::NotFound,
                format!("table `{table}` does not exist"),
            )
        })?;
    Ok(Binding { table, sink })
}

/// Writes the records of `payload` into the bound table; returns how many once they are
/// durable. A payload of one record joins the table's gathered writes (`coalesce`); an
/// array of several is written on its own, all or nothing. `qos2`: a QoS 2 publish's
/// (client id, packet id), logged in the frame of its records (kind 7).
pub async fn write(
    pod: Arc<Pod>,
    rest: Arc<RestIngest>,
    coalescer: Arc<Coalescer>,
    binding: Binding,
    payload: bytes::Bytes,
    qos2: Option<Qos2Pair>,
) -> Result<usize, Refusal> {
    let records = payload::records(&payload).map_err(|e| {
        Refusal::new(
            reason::PAYLOAD_FORMAT_INVALID,
            tonic::Code::InvalidArgument,
            e,
        )
    })?;
    let written = match records.as_slice() {
        [one] => {
            let record = payload.slice_ref(one.as_bytes());
            coalescer
                .write(&binding.table, binding.sink.clone(), record, qos2)
                .await?
        }
        _ if qos2.is_some() => {
            let mut builder = binding
                .sink
                .batch_builder()
                .map_err(|e| refusal(RestError::Server(e)))?;
            for (i, record) in records.iter().enumerate() {
                crate::rest::append_record(&pod, &mut builder, i, record).map_err(refusal)?;
            }
            let pairs = qos2.into_iter().collect();
            crate::rest::insert_parsed(&pod, &rest, &binding.sink, builder, &records, pairs)
                .await
                .map_err(refusal)?
                .records
        }
        _ => {
            crate::rest::insert(&pod, &rest, &binding.sink, &records, None)
                .await
                .map_err(refusal)?
                .records
        }
    };
    metrics::counter!("sluice_mqtt_records_total").increment(written as u64);
    Ok(written)
}
