//! [`RecordBatchBuilder`]: the open batch of one table (or stream), fed record by record
//! from protobuf or JSON and frozen into an Arrow `RecordBatch`.
//!
//! Contract: an append that returns `Err` leaves the builder exactly as it was.
//!
//! Two strategies keep it:
//! - flat tables (every column a scalar), protobuf records: one pass straight into the
//!   columns (`flat`); a failed record cuts every column back to the batch's row count;
//! - otherwise (nested columns, and every JSON record): the record is decoded into a
//!   per-record value tree and validated completely (NOT NULL, duplicate map keys) before
//!   the first Arrow builder is touched; the append step itself cannot fail.

use arrow_array::{ArrayRef, RecordBatch, StructArray};
use arrow_schema::{Fields, SchemaRef};

use crate::builders::ColumnBuilder;
use crate::error::{DecodeError, DecodeErrorKind};
use crate::flat::FlatColumns;
use crate::json_decode::{self, JsonPlan};
use crate::plan::{schema_id, ProtoPlan};
use crate::schema::TableSchema;
use crate::value::{finalize, Value};

/// Bound on a batch's size measure: Arrow's 32-bit offsets must not overflow.
const MAX_BATCH_WEIGHT: usize = i32::MAX as usize;

/// How the columns are built.
#[derive(Debug)]
enum Columns {
    /// Every column a scalar: single-pass protobuf appends.
    Flat(FlatColumns),
    /// Arrow builders fed from the value tree.
    Nested(Vec<ColumnBuilder>),
}

/// Accumulates records as Arrow columns.
#[derive(Debug)]
pub struct RecordBatchBuilder {
    schema: TableSchema,
    arrow_schema: SchemaRef,
    fields: Fields,
    columns: Columns,
    json: JsonPlan,
    schema_id: u64,
    len: usize,
    /// An upper bound on the bytes and elements any one column holds (input bytes times the
    /// plan's amplification), kept below `i32::MAX`.
    weight: usize,
}

impl RecordBatchBuilder {
    /// An empty builder for `schema`.
    pub fn new(schema: &TableSchema) -> Self {
        let arrow_schema = schema.arrow_schema();
        Self {
            schema: schema.clone(),
            fields: arrow_schema.fields().clone(),
            arrow_schema,
            columns: match FlatColumns::new(&schema.columns) {
                Some(flat) => Columns::Flat(flat),
                None => Columns::Nested(
                    schema
                        .columns
                        .iter()
                        .map(|c| ColumnBuilder::new(&c.data_type))
                        .collect(),
                ),
            },
            json: JsonPlan::new(&schema.columns),
            schema_id: schema_id(schema),
            len: 0,
            weight: 0,
        }
    }

    /// Decodes one protobuf record with `plan` and appends it; on error nothing is appended.
    pub fn append_proto(&mut self, plan: &ProtoPlan, record: &[u8]) -> Result<(), DecodeError> {
        if plan.schema_id != self.schema_id {
            return Err(DecodeError::new(DecodeErrorKind::PlanSchemaMismatch));
        }
        let weight = record.len().saturating_mul(plan.amplification);
        self.check_weight(weight)?;
        if let Columns::Flat(flat) = &mut self.columns {
            flat.append_proto(plan, record)?;
            self.len += 1;
            self.weight += weight;
            return Ok(());
        }
        let mut slots = crate::proto_decode::decode_record(plan, record)?;
        finalize(&self.schema.columns, &mut slots, Some(0))?;
        self.commit(&slots, weight);
        Ok(())
    }

    /// Decodes one JSON object and appends it; on error nothing is appended.
    pub fn append_json(&mut self, record: &str) -> Result<(), DecodeError> {
        let weight = record.len();
        self.check_weight(weight)?;
        let mut slots = json_decode::decode_record(&self.json, record)?;
        finalize(&self.schema.columns, &mut slots, None)?;
        self.commit(&slots, weight);
        Ok(())
    }

    fn check_weight(&self, weight: usize) -> Result<(), DecodeError> {
        if self.weight.saturating_add(weight) > MAX_BATCH_WEIGHT {
            return Err(DecodeError::new(DecodeErrorKind::BatchFull));
        }
        Ok(())
    }

    /// The append step: cannot fail.
    fn commit(&mut self, slots: &[Value<'_>], weight: usize) {
        match &mut self.columns {
            Columns::Flat(flat) => flat.append_values(slots),
            Columns::Nested(builders) => {
                for (builder, value) in builders.iter_mut().zip(slots) {
                    builder.append(value);
                }
            }
        }
        self.len += 1;
        self.weight += weight;
    }

    /// Records appended since the last [`finish`](Self::finish).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no record was appended since the last [`finish`](Self::finish).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The rows appended since the last finish, as a batch of
    /// [`arrow_schema`](Self::arrow_schema); the builder is reset and reusable.
    pub fn finish(&mut self) -> RecordBatch {
        let rows = self.len;
        self.len = 0;
        self.weight = 0;
        let arrays: Vec<ArrayRef> = match &mut self.columns {
            Columns::Flat(flat) => flat.finish(),
            Columns::Nested(builders) => builders.iter_mut().map(ColumnBuilder::finish).collect(),
        };
        if arrays.is_empty() {
            return RecordBatch::from(StructArray::new_empty_fields(rows, None));
        }
        RecordBatch::from(StructArray::new(self.fields.clone(), arrays, None))
    }

    /// The Arrow schema of the batches.
    pub fn arrow_schema(&self) -> SchemaRef {
        self.arrow_schema.clone()
    }
}
