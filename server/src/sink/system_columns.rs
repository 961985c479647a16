//! Opt-in system columns (`sluice table create --system-columns`, or the
//! table property `sluice.systemColumns=true` in the tables API), appended
//! after the table's own columns:
//!
//! | column | Delta type | value |
//! |---|---|---|
//! | `_sluice_stream_id` | STRING NOT NULL | the id the stream was given at creation |
//! | `_sluice_offset` | BIGINT NOT NULL | the record's offset in its stream (a batch shares its offset) |
//! | `_sluice_ingested_at` | TIMESTAMP NOT NULL | when the pod logged the record (replayed records: when replayed) |
//!
//! With them, per-stream order and exactly-once are a plain query:
//! `GROUP BY _sluice_stream_id, _sluice_offset HAVING count(*) > 1`.
//! They are not in the Unity Catalog columns the SDKs see (the server fills
//! them, a producer's descriptor must not name them). A stream's id is
//! derived from its WAL key, so replay gives replayed rows the same id.

use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, TimestampMicrosecondArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use deltalake::kernel::{DataType as DeltaType, StructField};

use crate::error::{Result, ServerError};

/// Table property that turns the system columns on.
pub const PROPERTY: &str = "sluice.systemColumns";

/// Names of the system columns, in order.
pub const NAMES: [&str; 3] = ["_sluice_stream_id", "_sluice_offset", "_sluice_ingested_at"];

/// The stream id of the stream with WAL key `key` (UUID-shaped).
pub fn stream_id(key: u64) -> String {
    uuid::Uuid::from_u64_pair(key, key.rotate_left(29) ^ 0x5_1c3e_0000_0000).to_string()
}

/// The Delta fields of the system columns.
pub fn delta_fields() -> Vec<StructField> {
    vec![
        StructField::new(NAMES[0], DeltaType::STRING, false),
        StructField::new(NAMES[1], DeltaType::LONG, false),
        StructField::new(NAMES[2], DeltaType::TIMESTAMP, false),
    ]
}

fn arrow_fields() -> [Field; 3] {
    [
        Field::new(NAMES[0], DataType::Utf8, false),
        Field::new(NAMES[1], DataType::Int64, false),
        Field::new(
            NAMES[2],
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
    ]
}

/// `schema` followed by the system columns.
pub fn extended_schema(schema: &Schema) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(arrow_fields());
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The system columns' values of a batch's rows, in row order.
#[derive(Default)]
pub struct SystemValues {
    stream_ids: StringBuilder,
    offsets: Vec<i64>,
    ingested_at: Vec<i64>,
}

impl SystemValues {
    /// Adds one row's values: its record's stream id and offset, and when it was logged.
    pub fn push(&mut self, stream_id: &str, offset: i64, ingested_at_micros: i64) {
        self.stream_ids.append_value(stream_id);
        self.offsets.push(offset);
        self.ingested_at.push(ingested_at_micros);
    }
}

/// Appends the system columns to `batch`: row `i` came from the record at
/// `offsets[i]` of stream `stream_id`, logged at `ingested_at_micros`.
pub fn extend(
    batch: RecordBatch,
    stream_id: &str,
    offsets: impl Iterator<Item = i64>,
    ingested_at_micros: i64,
) -> Result<RecordBatch> {
    let mut values = SystemValues::default();
    for offset in offsets.take(batch.num_rows()) {
        values.push(stream_id, offset, ingested_at_micros);
    }
    extend_with(batch, values)
}

/// Appends the system columns to `batch`, row `i` taking `values`' row `i`.
pub fn extend_with(batch: RecordBatch, mut values: SystemValues) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    if values.offsets.len() != rows {
        return Err(ServerError::Internal(format!(
            "system columns: {} offsets for {rows} rows",
            values.offsets.len()
        )));
    }
    let schema = extended_schema(batch.schema().as_ref());
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(values.stream_ids.finish()));
    columns.push(Arc::new(Int64Array::from(values.offsets)));
    columns.push(Arc::new(
        TimestampMicrosecondArray::from(values.ingested_at).with_timezone("UTC"),
    ));
    RecordBatch::try_new(schema, columns)
        .map_err(|e| ServerError::Internal(format!("system columns: {e}")))
}

/// Microseconds since the epoch, now.
pub fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, TimestampMicrosecondType};

    #[test]
    fn extend_appends_stream_id_offsets_and_time_to_every_row() {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![7, 8, 9]))])
            .expect("batch");
        let out = extend(batch, "s-1", [4, 4, 5].into_iter(), 1_000).expect("extend");
        assert_eq!(out.num_columns(), 4);
        assert_eq!(out.schema().field(1).name(), "_sluice_stream_id");
        assert_eq!(out.column(1).as_string::<i32>().value(2), "s-1");
        let offsets = out.column(2).as_primitive::<Int64Type>();
        assert_eq!(offsets.values().to_vec(), vec![4, 4, 5]);
        assert_eq!(
            out.column(3)
                .as_primitive::<TimestampMicrosecondType>()
                .value(0),
            1_000
        );
    }

    #[test]
    fn extend_refuses_fewer_offsets_than_rows() {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2]))])
            .expect("batch");
        assert!(extend(batch, "s", [0].into_iter(), 0).is_err());
    }

    #[test]
    fn stream_ids_are_stable_per_key_and_differ_between_keys() {
        assert_eq!(stream_id(42), stream_id(42));
        assert_ne!(stream_id(42), stream_id(43));
    }
}
