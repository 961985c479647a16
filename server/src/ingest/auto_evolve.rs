//! Opt-in auto-evolve (`sluice.autoEvolve = add-columns`, set with `sluice
//! table alter --set-property`): a JSON record whose top-level keys name no
//! column adds those columns, nullable, with the type its values suggest
//! (true/false BOOLEAN, an integer BIGINT, another number DOUBLE, text or
//! null STRING, an array or object VARIANT), through the same alter as
//! `sluice table alter --add-columns` (one Delta metadata commit), before
//! the record is parsed — also on a table with `_rescued_data`, where such a
//! key would otherwise be rescued. Cost, on opted-in tables only: every JSON
//! record is read once more (serde_json) for its keys. Paced to one change per table per
//! [`INTERVAL`] (a stream waits for its turn: back-pressure, not failure), at
//! most [`MAX_COLUMNS`] columns per change, each change logged as an audit
//! line (`sluice::audit`, action `table.alter`, who `auto-evolve`). Off by
//! default: the table stays the contract.

use std::collections::BTreeSet;
use std::time::Duration;

use sluice_proto::EphemeralStreamRequest;
use sluice_proto::{ephemeral_stream_request, ingest_record_batch_request, ingest_record_request};
use sluice_zeroparser::TableSchema;

use crate::error::{Result, ServerError};
use crate::evolve::Alter;
use crate::pod::Pod;
use crate::sink::SharedSink;

/// At most one auto-evolve change per table in this time.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// At most this many columns added by one record's change.
pub const MAX_COLUMNS: usize = 32;

/// Whether a JSON record of `request` has a top-level key with no column of
/// `schema`.
pub fn needs_columns(schema: &TableSchema, request: &EphemeralStreamRequest) -> bool {
    new_columns(schema, &json_records(request)).is_some()
}

/// The JSON records a request carries.
fn json_records(request: &EphemeralStreamRequest) -> Vec<&str> {
    use ephemeral_stream_request::Payload;
    match &request.payload {
        Some(Payload::IngestRecord(r)) => match &r.record {
            Some(ingest_record_request::Record::JsonRecord(s)) => vec![s.as_str()],
            _ => Vec::new(),
        },
        Some(Payload::IngestRecordBatch(b)) => match &b.batch {
            Some(ingest_record_batch_request::Batch::JsonBatch(batch)) => {
                batch.records.iter().map(String::as_str).collect()
            }
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// The SQL type a JSON value suggests.
fn inferred(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Bool(_) => "BOOLEAN",
        Value::Number(n) if n.is_i64() || n.is_u64() => "BIGINT",
        Value::Number(_) => "DOUBLE",
        Value::String(_) | Value::Null => "STRING",
        Value::Array(_) | Value::Object(_) => "VARIANT",
    }
}

/// The columns (SQL text) the top-level keys of `records` would add to
/// `schema`, record by record in key order; None when every key has a column
/// (or a key cannot be a column name).
pub fn new_columns(schema: &TableSchema, records: &[&str]) -> Option<String> {
    let mut added: BTreeSet<String> = BTreeSet::new();
    let mut columns: Vec<String> = Vec::new();
    for record in records {
        let Ok(serde_json::Value::Object(members)) = serde_json::from_str(record) else {
            continue;
        };
        for (key, value) in &members {
            let lower = key.to_ascii_lowercase();
            if schema.column_index(key).is_some() || added.contains(&lower) {
                continue;
            }
            let valid = !key.is_empty()
                && key.len() <= 255
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return None;
            }
            added.insert(lower);
            columns.push(format!("`{key}` {}", inferred(value)));
        }
    }
    (!columns.is_empty()).then(|| columns.join(", "))
}

/// Makes the table of `sink` hold a column for every top-level key of
/// `request`'s JSON records: adds the missing ones (paced, at most
/// [`MAX_COLUMNS`]), unless another stream already did.
pub async fn evolve_for(
    pod: &Pod,
    sink: &SharedSink,
    request: &EphemeralStreamRequest,
) -> Result<()> {
    let records = json_records(request);
    let Some(columns) = new_columns(&sink.schema(), &records) else {
        return Ok(());
    };
    let count = columns.split(", ").count();
    if count > MAX_COLUMNS {
        return Err(ServerError::InvalidArgument(format!(
            "auto-evolve: a record would add {count} columns to {}, more than {MAX_COLUMNS} \
             in one change; add them with `sluice table alter`",
            sink.name()
        )));
    }
    let wait = sink.book_auto_evolve(INTERVAL);
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
    // Another stream (here or on another pod) may have added them meanwhile.
    pod.sink_for(sink.name()).await?;
    let Some(columns) = new_columns(&sink.schema(), &records) else {
        return Ok(());
    };
    let alter = Alter {
        add_columns: Some(columns.clone()),
        ..Alter::default()
    };
    let entry = crate::tables::alter_table_unchecked(pod, sink.name(), alter).await?;
    metrics::counter!("sluice_auto_evolve_changes_total").increment(1);
    crate::audit::event::AuditEvent::now(
        "auto-evolve".into(),
        crate::audit::event::Action::TableAlter,
        &entry.full_name,
        pod.pod_id(),
        format!("schema version {}: added {columns}", entry.schema_version),
    )
    .log();
    tracing::warn!(table = %entry.full_name, %columns, schema_version = entry.schema_version, "auto-evolve added columns for unknown JSON keys");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_become_columns_of_the_type_their_values_suggest() {
        let schema = TableSchema::parse("id BIGINT NOT NULL, temp DOUBLE").expect("schema");
        let records = [
            r#"{"id": 1, "temp": 2.5, "Humidity": 40.5, "ok": true, "n": 3}"#,
            r#"{"id": 2, "humidity": 41, "site": {"a": 1}, "tags": [1], "note": null, "s": "x"}"#,
        ];
        assert_eq!(
            new_columns(&schema, &records).as_deref(),
            Some("`Humidity` DOUBLE, `n` BIGINT, `ok` BOOLEAN, `note` STRING, `s` STRING, `site` VARIANT, `tags` VARIANT")
        );
        assert_eq!(new_columns(&schema, &[r#"{"id": 1, "TEMP": 1}"#]), None);
        assert_eq!(new_columns(&schema, &[r#"{"id": 1, "bad key": 1}"#]), None);
        assert_eq!(new_columns(&schema, &["not json"]), None);
    }
}
