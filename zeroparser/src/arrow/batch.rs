//! [`RecordBatchBuilder`]: the open batch of one table (or stream), fed record by record
//! from protobuf or JSON and frozen into an Arrow `RecordBatch`.
//!
//! Contract: an append that returns `Err` leaves the builder exactly as it was.
//!
//! Two strategies keep it:
//! - protobuf records: one pass straight into the columns (`arrow::flat` for tables whose
//!   columns are all scalars, `arrow::nested` otherwise); a failed record cuts every column
//!   back to the batch's row count, through the offsets of nested columns;
//! - JSON records (and the few protobuf records `arrow::nested` hands on): the record is
//!   decoded into a per-record value tree and validated completely (NOT NULL, duplicate map
//!   keys) before the first column is touched; the append step itself cannot fail.
//!
//! A builder made [`with_rescued_data`](RecordBatchBuilder::with_rescued_data) adds the
//! `_rescued_data` column after the schema's columns (see `rescue`): JSON records take the
//! rescuing decode (`json::rescue`), protobuf records the same decode as without it plus one
//! pass over their top-level tags (`rescue::proto`), both inside the same all-or-nothing
//! append. A builder without it runs exactly the code it ran before the column existed.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StructArray};
use arrow_schema::{Fields, Schema, SchemaRef};

use super::flat::FlatColumns;
use super::nested::NestedColumns;
use super::via_tree::{self, ValueRows};
use crate::avro::AvroPlan;
use crate::error::{DecodeError, DecodeErrorKind, SchemaError};
use crate::json::{self, JsonPlan};
use crate::proto::{schema_id, ProtoPlan};
use crate::rescue::{self, rescue_unknown, ObjectText, RescuedColumn};
use crate::schema::TableSchema;
use crate::value::{finalize, Value};

/// Bound on a batch's size measure: Arrow's 32-bit offsets must not overflow.
const MAX_BATCH_WEIGHT: usize = i32::MAX as usize;

/// How the columns are built.
#[derive(Debug)]
enum Columns {
    /// Every column a scalar: single-pass protobuf appends.
    Flat(FlatColumns),
    /// The same, for a builder with the rescued-data column: a variant of its own keeps
    /// the default flat path down to the one check it always had.
    FlatRescuing(FlatColumns),
    /// A column tree: single-pass protobuf appends, JSON through the value tree.
    Nested(NestedColumns),
}

/// Accumulates records as Arrow columns.
#[derive(Debug)]
pub struct RecordBatchBuilder {
    schema: TableSchema,
    arrow_schema: SchemaRef,
    fields: Fields,
    columns: Columns,
    json: JsonPlan,
    /// The `_rescued_data` column, for builders made with it.
    rescued: Option<RescuedColumn>,
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
                None => Columns::Nested(NestedColumns::new(&schema.columns)),
            },
            json: JsonPlan::new(&schema.columns),
            rescued: None,
            schema_id: schema_id(schema),
            len: 0,
            weight: 0,
        }
    }

    /// An empty builder for `schema` whose batches end with the `_rescued_data` column:
    /// fields that do not fit the schema are kept there instead of failing the record (see
    /// the `rescue` module for what is kept and how). Fails if `schema` has a column of
    /// that name.
    pub fn with_rescued_data(schema: &TableSchema) -> Result<Self, SchemaError> {
        rescue::check_rescuable(schema)?;
        let mut builder = Self::new(schema);
        let mut fields: Vec<_> = builder.fields.iter().cloned().collect();
        fields.push(Arc::new(rescue::arrow_field()));
        builder.fields = Fields::from(fields);
        builder.arrow_schema = Arc::new(Schema::new_with_metadata(
            builder.fields.clone(),
            builder.arrow_schema.metadata().clone(),
        ));
        builder.rescued = Some(RescuedColumn::default());
        if let Columns::Flat(flat) = builder.columns {
            builder.columns = Columns::FlatRescuing(flat);
        }
        Ok(builder)
    }

    /// Decodes one protobuf record with `plan` and appends it; on error nothing is appended.
    pub fn append_proto(&mut self, plan: &ProtoPlan, record: &[u8]) -> Result<(), DecodeError> {
        if plan.schema_id != self.schema_id {
            return Err(DecodeError::new(DecodeErrorKind::PlanSchemaMismatch));
        }
        let weight = record.len().saturating_mul(plan.amplification);
        self.check_weight(weight)?;
        match &mut self.columns {
            Columns::Flat(flat) => flat.append_proto(plan, record)?,
            Columns::Nested(nested) if self.rescued.is_none() => {
                nested.append_proto(plan, record, &self.schema.columns)?
            }
            _ => return self.append_proto_rescuing(plan, record, weight),
        }
        self.len += 1;
        self.weight += weight;
        Ok(())
    }

    /// Whether [`check_proto`](Self::check_proto) checks a record without appending it (a
    /// flat builder without `_rescued_data`): such a check visits the record as the append
    /// would but writes none of the columns.
    pub fn checks_proto_without_appending(&self) -> bool {
        matches!(self.columns, Columns::Flat(_))
    }

    /// Decodes one protobuf record with `plan` and answers as
    /// [`append_proto`](Self::append_proto) would, appending nothing: for a record that is
    /// only checked now and appended to another builder later. `None` where this builder
    /// cannot check without appending (a column tree, `_rescued_data`): append instead. A
    /// checked record counts toward the batch's size bound, as an appended one would, until
    /// the next [`clear`](Self::clear) or [`finish`](Self::finish).
    pub fn check_proto(
        &mut self,
        plan: &ProtoPlan,
        record: &[u8],
    ) -> Option<Result<(), DecodeError>> {
        let Columns::Flat(flat) = &mut self.columns else {
            return None;
        };
        if plan.schema_id != self.schema_id {
            return Some(Err(DecodeError::new(DecodeErrorKind::PlanSchemaMismatch)));
        }
        let weight = record.len().saturating_mul(plan.amplification);
        Some(
            check_weight(self.weight, weight)
                .and_then(|()| flat.check_proto(plan, record))
                .map(|()| self.weight += weight),
        )
    }

    /// [`append_proto`](Self::append_proto) with the `_rescued_data` column (cold: kept out
    /// of the default path's code).
    #[cold]
    #[inline(never)]
    fn append_proto_rescuing(
        &mut self,
        plan: &ProtoPlan,
        record: &[u8],
        weight: usize,
    ) -> Result<(), DecodeError> {
        match &mut self.columns {
            Columns::Flat(flat) | Columns::FlatRescuing(flat) => flat.append_proto(plan, record)?,
            Columns::Nested(nested) => nested.append_proto(plan, record, &self.schema.columns)?,
        }
        let text = rescue_unknown(&plan.root, record);
        self.end_rescued_row(text, weight)
    }

    /// Ends a row the columns already hold with its rescued-data `text`: checks the
    /// batch's bound with the text's weight, else (or on a failed `text`) takes the row
    /// back out of the columns.
    fn end_rescued_row(
        &mut self,
        text: Result<Option<String>, DecodeError>,
        weight: usize,
    ) -> Result<(), DecodeError> {
        let checked = text.and_then(|text| {
            let weight = rescued_weight(weight, text.as_deref());
            self.check_weight(weight)?;
            Ok((text, weight))
        });
        let (text, weight) = match checked {
            Ok(checked) => checked,
            Err(e) => {
                match &mut self.columns {
                    Columns::Flat(flat) | Columns::FlatRescuing(flat) => flat.pop_row(),
                    Columns::Nested(nested) => nested.pop_row(),
                }
                return Err(e);
            }
        };
        self.len += 1;
        self.weight += weight;
        if let Some(column) = &mut self.rescued {
            column.append(text.as_deref());
        }
        Ok(())
    }

    /// Decodes one JSON object and appends it; on error nothing is appended.
    pub fn append_json(&mut self, record: &str) -> Result<(), DecodeError> {
        self.append_json_by(record, true)
    }

    /// [`append_json`](Self::append_json) through the per-record value tree (serde_json)
    /// only, never the single pass: the reference the single pass is tested against.
    #[doc(hidden)]
    pub fn append_json_via_value_tree(&mut self, record: &str) -> Result<(), DecodeError> {
        self.append_json_by(record, false)
    }

    /// Appends one JSON record by the single pass (`one_pass`) or the value tree.
    #[inline(always)]
    fn append_json_by(&mut self, record: &str, one_pass: bool) -> Result<(), DecodeError> {
        let weight = record.len();
        self.check_weight(weight)?;
        if self.rescued.is_some() {
            return self.append_json_rescuing(record, weight);
        }
        let (plan, columns) = (&self.json, &self.schema.columns);
        match &mut self.columns {
            Columns::Flat(flat) if one_pass => flat.append_json(plan, record, columns)?,
            Columns::Flat(flat) => via_tree::append_json(flat, plan, record, columns)?,
            Columns::Nested(nested) if one_pass => nested.append_json(plan, record, columns)?,
            Columns::Nested(nested) => via_tree::append_json(nested, plan, record, columns)?,
            Columns::FlatRescuing(_) => return self.append_json_rescuing(record, weight),
        }
        self.len += 1;
        self.weight += weight;
        Ok(())
    }

    /// [`append_json`](Self::append_json) with the `_rescued_data` column (cold: kept out
    /// of the default path's code).
    #[cold]
    #[inline(never)]
    fn append_json_rescuing(&mut self, record: &str, weight: usize) -> Result<(), DecodeError> {
        let (mut slots, text) =
            json::decode_record_rescuing(&self.json, &self.schema.columns, record)?;
        finalize(&self.schema.columns, &mut slots, None)?;
        let weight = rescued_weight(weight, text.as_deref());
        self.check_weight(weight)?;
        self.commit(&slots, weight);
        if let Some(column) = &mut self.rescued {
            column.append(text.as_deref());
        }
        Ok(())
    }

    /// Decodes one raw Avro datum (no container framing) with `plan` and appends it; on
    /// error nothing is appended. A plan compiled for rescue needs a builder with the
    /// rescued-data column.
    pub fn append_avro(&mut self, plan: &AvroPlan, record: &[u8]) -> Result<(), DecodeError> {
        if plan.schema_id != self.schema_id || (plan.rescues && self.rescued.is_none()) {
            return Err(DecodeError::new(DecodeErrorKind::PlanSchemaMismatch));
        }
        let weight = record
            .len()
            .saturating_add(1)
            .saturating_mul(plan.amplification);
        self.check_weight(weight)?;
        match &mut self.columns {
            Columns::Flat(flat) => flat.append_avro(plan, record, None)?,
            Columns::Nested(nested) if self.rescued.is_none() => {
                nested.append_avro(plan, record, None)?
            }
            _ => return self.append_avro_rescuing(plan, record, weight),
        }
        self.len += 1;
        self.weight += weight;
        Ok(())
    }

    /// [`append_avro`](Self::append_avro) with the `_rescued_data` column (cold: kept out
    /// of the default path's code).
    #[cold]
    #[inline(never)]
    fn append_avro_rescuing(
        &mut self,
        plan: &AvroPlan,
        record: &[u8],
        weight: usize,
    ) -> Result<(), DecodeError> {
        let mut object = ObjectText::default();
        match &mut self.columns {
            Columns::Flat(flat) | Columns::FlatRescuing(flat) => {
                flat.append_avro(plan, record, Some(&mut object))?
            }
            Columns::Nested(nested) => nested.append_avro(plan, record, Some(&mut object))?,
        }
        self.end_rescued_row(Ok(object.finish()), weight)
    }

    fn check_weight(&self, weight: usize) -> Result<(), DecodeError> {
        check_weight(self.weight, weight)
    }

    /// The append step: cannot fail. Always inlined: it is the hot path's last step.
    #[inline(always)]
    fn commit(&mut self, slots: &[Value<'_>], weight: usize) {
        match &mut self.columns {
            Columns::Flat(flat) | Columns::FlatRescuing(flat) => flat.append_values(slots),
            Columns::Nested(nested) => nested.append_values(slots),
        }
        self.len += 1;
        self.weight += weight;
    }

    /// Protobuf records this builder decoded through the per-record value tree instead of
    /// the single pass since it was made, rejected ones included: only tables with STRUCT,
    /// ARRAY or MAP columns do, for a record the single pass rejects (so the error is the
    /// value tree's), one with a NOT NULL column left empty, and one with a map that repeats
    /// a key or has more than 64 entries. For tests and benchmarks.
    pub fn proto_records_via_value_tree(&self) -> u64 {
        match &self.columns {
            Columns::Nested(nested) => nested.via_tree(),
            Columns::Flat(_) | Columns::FlatRescuing(_) => 0,
        }
    }

    /// JSON records this builder decoded through the per-record value tree (serde_json)
    /// instead of the single pass since it was made, rejected ones included: a record the
    /// single pass rejects (so the error is the value tree's), one whose text has a form the
    /// scanner leaves to serde_json (`\u` escapes, integers beyond 64 bits) or a VARIANT
    /// value, one with a NOT NULL column left empty or a NULL element of a NOT NULL array,
    /// and one with a map that repeats a key or has more than 64 entries. Builders with the
    /// rescued-data column decode every JSON record through it and count none here. For
    /// tests and benchmarks.
    pub fn json_records_via_value_tree(&self) -> u64 {
        match &self.columns {
            Columns::Nested(nested) => nested.json_via_tree(),
            Columns::Flat(flat) => flat.json_via_tree(),
            Columns::FlatRescuing(_) => 0,
        }
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
        let mut arrays: Vec<ArrayRef> = match &mut self.columns {
            Columns::Flat(flat) | Columns::FlatRescuing(flat) => flat.finish(),
            Columns::Nested(nested) => nested.finish(),
        };
        if let Some(column) = &mut self.rescued {
            arrays.push(column.finish());
        }
        if arrays.is_empty() {
            return RecordBatch::from(StructArray::new_empty_fields(rows, None));
        }
        RecordBatch::from(StructArray::new(self.fields.clone(), arrays, None))
    }

    /// Makes room for `rows` more records of `record_bytes` in all, so that appending them
    /// does not regrow the columns through doublings (a regrowth copies the column): a
    /// flat table's columns reserve their values, and its string and binary columns as
    /// many bytes per row as they were sized for after the last batch, at most
    /// `record_bytes` each. A column tree grows as it goes. Only room: nothing changes if
    /// the records turn out more, fewer or larger.
    pub fn reserve(&mut self, rows: usize, record_bytes: usize) {
        match &mut self.columns {
            Columns::Flat(flat) | Columns::FlatRescuing(flat) => flat.reserve(rows, record_bytes),
            Columns::Nested(_) => {}
        }
    }

    /// Drops the rows appended since the last finish without building a batch: the
    /// columns keep their capacity, so a builder used only to check records (their rows
    /// are built again elsewhere) allocates nothing per record once warm.
    pub fn clear(&mut self) {
        self.len = 0;
        self.weight = 0;
        match &mut self.columns {
            Columns::Flat(flat) | Columns::FlatRescuing(flat) => flat.clear(),
            Columns::Nested(nested) => nested.clear(),
        }
        if let Some(column) = &mut self.rescued {
            drop(column.finish());
        }
    }

    /// The Arrow schema of the batches.
    pub fn arrow_schema(&self) -> SchemaRef {
        self.arrow_schema.clone()
    }
}

/// Fails if a record of `weight` would take a batch of `batch_weight` past the bound.
fn check_weight(batch_weight: usize, weight: usize) -> Result<(), DecodeError> {
    if batch_weight.saturating_add(weight) > MAX_BATCH_WEIGHT {
        return Err(DecodeError::new(DecodeErrorKind::BatchFull));
    }
    Ok(())
}

/// A record's weight with its rescued-data text: the text is one more column, so the
/// record weighs at least the text's length.
fn rescued_weight(weight: usize, text: Option<&str>) -> usize {
    weight.max(text.map_or(0, str::len))
}
