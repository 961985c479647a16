//! Mode (c), "JSON into an Arrow RecordBatch": Sluice's `RecordBatchBuilder::append_json`
//! against arrow-rs's own JSON decoder (`arrow_json::ReaderBuilder` with the same Arrow
//! schema), on the same newline-delimited JSON rows: each workload's protobuf records
//! rendered as JSON objects (field names as keys, enums by name, maps as objects). Both read
//! the same bytes: one text per batch, Sluice each row as a slice of it (as the pod reads
//! the records of a request from its buffer).

use std::hint::black_box;
use std::ops::Range;

use arrow_schema::SchemaRef;
use prost_reflect::{DynamicMessage, Kind, MapKey, MessageDescriptor, ReflectMessage, Value};
use serde_json::{json, Map, Value as Json};
use sluice_zeroparser::RecordBatchBuilder;

use crate::arrow_peers::{batches, BATCH_ROWS};

/// The JSON rows of `records`: one text per record, and the same rows newline-delimited in
/// [`batches`] for arrow-json; `None` if a record has BINARY data (whose JSON
/// forms the two decoders do not share).
pub fn rows(descriptor: &MessageDescriptor, records: &[Vec<u8>]) -> Option<Vec<String>> {
    records
        .iter()
        .map(|bytes| {
            let message = DynamicMessage::decode(descriptor.clone(), bytes.as_slice()).ok()?;
            message_json(&message).map(|row| row.to_string())
        })
        .collect()
}

/// One batch of [`batches`]: its rows joined by newlines, and where each row lies in it.
pub struct Ndjson {
    pub text: String,
    pub rows: Vec<Range<usize>>,
}

impl Ndjson {
    /// The batch's rows, each a slice of its text.
    pub fn rows(&self) -> impl Iterator<Item = &str> {
        self.rows
            .iter()
            .map(|range| self.text.get(range.clone()).unwrap_or_default())
    }
}

/// The rows joined by newlines, one text per batch of [`batches`].
pub fn ndjson_batches(rows: &[String]) -> Vec<Ndjson> {
    batches(rows)
        .map(|chunk| {
            let mut batch = Ndjson {
                text: String::with_capacity(chunk.iter().map(|row| row.len() + 1).sum()),
                rows: Vec::with_capacity(chunk.len()),
            };
            for row in chunk {
                if !batch.text.is_empty() {
                    batch.text.push('\n');
                }
                let start = batch.text.len();
                batch.text.push_str(row);
                batch.rows.push(start..batch.text.len());
            }
            batch
        })
        .collect()
}

fn message_json(message: &DynamicMessage) -> Option<Json> {
    let mut object = Map::new();
    for field in message.descriptor().fields() {
        if field.supports_presence() && !message.has_field(&field) {
            continue;
        }
        let value = value_json(&message.get_field(&field), &field.kind())?;
        object.insert(field.name().to_owned(), value);
    }
    Some(Json::Object(object))
}

fn value_json(value: &Value, kind: &Kind) -> Option<Json> {
    Some(match value {
        Value::Bool(v) => json!(v),
        Value::I32(v) => json!(v),
        Value::I64(v) => json!(v),
        Value::U32(v) => json!(v),
        Value::U64(v) => json!(v),
        Value::F32(v) => json!(v),
        Value::F64(v) => json!(v),
        Value::String(v) => json!(v),
        Value::Bytes(_) => return None,
        Value::EnumNumber(n) => match kind {
            Kind::Enum(e) => json!(e
                .get_value(*n)
                .map_or_else(|| n.to_string(), |v| v.name().to_owned())),
            _ => json!(n),
        },
        Value::Message(m) => message_json(m)?,
        Value::List(items) => Json::Array(
            items
                .iter()
                .map(|v| value_json(v, kind))
                .collect::<Option<_>>()?,
        ),
        Value::Map(entries) => {
            let value_kind = match kind {
                Kind::Message(entry) => entry.map_entry_value_field().kind(),
                _ => return None,
            };
            let mut object = Map::new();
            for (key, v) in entries {
                let key = match key {
                    MapKey::Bool(b) => b.to_string(),
                    MapKey::I32(i) => i.to_string(),
                    MapKey::I64(i) => i.to_string(),
                    MapKey::U32(i) => i.to_string(),
                    MapKey::U64(i) => i.to_string(),
                    MapKey::String(s) => s.clone(),
                };
                object.insert(key, value_json(v, &value_kind)?);
            }
            Json::Object(object)
        }
    })
}

/// Sluice: `append_json` per row into `builder` (kept across passes, see
/// [`arrow_peers::sluice`](crate::arrow_peers::sluice)), a batch finished at the end of
/// each of `batches`; rows decoded (a rejected row counts a million, so a failing decoder
/// cannot look fast).
pub fn sluice(builder: &mut RecordBatchBuilder, batches: &[Ndjson]) -> usize {
    let mut count = 0;
    for batch in batches {
        for row in batch.rows() {
            if builder.append_json(row).is_err() {
                count += 1_000_000;
            }
        }
        count += black_box(builder.finish()).num_rows();
    }
    count
}

/// arrow-json: `decoder` (one per workload, built with the same Arrow schema and
/// [`BATCH_ROWS`], kept across passes like Sluice's builder) decodes each batch of
/// newline-delimited rows and flushes it.
pub fn arrow_json(decoder: &mut arrow_json::reader::Decoder, batches: &[Ndjson]) -> usize {
    let mut count = 0;
    for batch in batches {
        if decoder.decode(batch.text.as_bytes()).is_err() {
            return 0;
        }
        match decoder.flush() {
            Ok(Some(batch)) => count += black_box(batch).num_rows(),
            _ => return 0,
        }
    }
    count
}

/// The arrow-json decoder [`arrow_json`] takes: `schema`, batches of [`BATCH_ROWS`].
pub fn arrow_json_decoder(schema: &SchemaRef) -> anyhow::Result<arrow_json::reader::Decoder> {
    Ok(arrow_json::ReaderBuilder::new(schema.clone())
        .with_batch_size(BATCH_ROWS)
        .build_decoder()?)
}
