//! [`FlatColumns`]: the Arrow columns of a table whose columns are all scalars (no ARRAY,
//! MAP or STRUCT), filled straight from [`ProtoPlan::visit`] in one pass.
//!
//! Each column is a [`LeafColumn`] (`arrow::leaf`). A column longer than the batch's row count has been written by the record being
//! appended, and its last row belongs to that record, so:
//! - a field that occurs again (last one wins) cuts its column back to the batch's row count
//!   and pushes the new value; a oneof member that is cleared is cut back the same way;
//! - at the end of the record each column not written gets a null (a NOT NULL column instead
//!   fails the record);
//! - a failed record cuts every column back to the batch's row count, so the batch is exactly
//!   as it was before (the `RecordBatchBuilder` contract).
//!
//! No allocation per record and no per-record scratch: the column vectors grow amortised,
//! and when a record writes every column (the common case) completing it costs one compare.

use arrow_array::ArrayRef;

use super::leaf::{Data, LeafColumn};
use super::via_tree::{self, ValueRows};
use crate::avro::{self, AvroPlan};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::json::{decode_into, JsonPlan, JsonSink, RECORD};
use crate::proto::{ProtoPlan, Visitor};
use crate::rescue::ObjectText;
use crate::schema::Column;
use crate::value::{Scalar, Value};

/// All columns of a flat table.
#[derive(Debug)]
pub(crate) struct FlatColumns {
    columns: Vec<LeafColumn>,
    names: Vec<String>,
    required: Vec<bool>,
    rows: usize,
    /// JSON records handed to the value tree since the columns were made.
    json_via_tree: u64,
    /// [`check_proto`](Self::check_proto)'s scratch: one bit per column written.
    seen: Vec<u64>,
}

impl FlatColumns {
    /// Columns for `columns`, or `None` if any of them is not a scalar.
    pub(crate) fn new(columns: &[Column]) -> Option<FlatColumns> {
        let data = columns
            .iter()
            .map(|c| LeafColumn::new(&c.data_type))
            .collect::<Option<Vec<_>>>()?;
        Some(FlatColumns {
            columns: data,
            names: columns.iter().map(|c| c.name.clone()).collect(),
            required: columns.iter().map(|c| !c.nullable).collect(),
            rows: 0,
            json_via_tree: 0,
            seen: vec![0; columns.len().div_ceil(64)],
        })
    }

    /// Decodes one record straight into the columns; on error they are as before.
    pub(crate) fn append_proto(
        &mut self,
        plan: &ProtoPlan,
        record: &[u8],
    ) -> Result<(), DecodeError> {
        let mut writer = RowWriter {
            columns: &mut self.columns,
            rows: self.rows,
            filled: 0,
        };
        let result = plan.visit(record, &mut writer);
        let filled = writer.filled;
        let result = result.and_then(|()| self.end_row(filled));
        if result.is_err() {
            self.rollback();
        }
        result
    }

    /// Decodes one record and answers as [`append_proto`](Self::append_proto) would (the
    /// same error for the same record), writing no column: for a record that is only checked
    /// now and appended later. Touches one bit per column instead of the columns' memory.
    pub(crate) fn check_proto(
        &mut self,
        plan: &ProtoPlan,
        record: &[u8],
    ) -> Result<(), DecodeError> {
        self.seen.fill(0);
        let mut checker = RowChecker {
            seen: &mut self.seen,
            columns: self.columns.len(),
            filled: 0,
        };
        plan.visit(record, &mut checker)?;
        if checker.filled < self.columns.len() {
            for (i, required) in self.required.iter().enumerate() {
                if *required && !bit(&self.seen, i) {
                    let name = self.names.get(i).map_or("", String::as_str);
                    return Err(DecodeError::at(DecodeErrorKind::NotNull, 0).in_field(name));
                }
            }
        }
        Ok(())
    }

    /// Decodes one JSON record straight into the columns; a record the one pass does not
    /// accept (an error, a NOT NULL column left empty) is cut back and decoded through the
    /// value tree, which gives the error. On error the columns are as before.
    pub(crate) fn append_json(
        &mut self,
        plan: &JsonPlan,
        record: &str,
        columns: &[Column],
    ) -> Result<(), DecodeError> {
        let mut writer = JsonWriter {
            columns: &mut self.columns,
            rows: self.rows,
            failed: false,
        };
        let decoded = decode_into(plan, record, &mut writer).is_some() && !writer.failed;
        if decoded && self.end_row(0).is_ok() {
            return Ok(());
        }
        self.rollback();
        self.json_via_tree += 1;
        via_tree::append_json(self, plan, record, columns)
    }

    /// JSON records handed to the value tree since the columns were made, rejected ones
    /// included.
    pub(crate) fn json_via_tree(&self) -> u64 {
        self.json_via_tree
    }

    /// Decodes one Avro datum straight into the columns (the plan's compile checked every
    /// type, so there is no value-tree path); on error the columns are as before.
    pub(crate) fn append_avro(
        &mut self,
        plan: &AvroPlan,
        record: &[u8],
        rescued: Option<&mut ObjectText>,
    ) -> Result<(), DecodeError> {
        let mut writer = JsonWriter {
            columns: &mut self.columns,
            rows: self.rows,
            failed: false,
        };
        let decoded = avro::decode_into(plan, record, &mut writer, rescued);
        let result = match (decoded, writer.failed) {
            (Ok(()), false) => self.end_row(0),
            (Ok(()), true) => Err(DecodeError::new(DecodeErrorKind::NotNull)),
            (Err(e), _) => Err(e),
        };
        if result.is_err() {
            self.rollback();
        }
        result
    }

    /// Completes the record, which wrote `filled` columns: nulls for the columns it left
    /// out, or an error for a NOT NULL one (in column order, like the value tree's
    /// validation).
    fn end_row(&mut self, filled: usize) -> Result<(), DecodeError> {
        if filled < self.columns.len() {
            for (i, column) in self.columns.iter_mut().enumerate() {
                if column.len > self.rows {
                    continue;
                }
                if self.required.get(i).copied().unwrap_or(false) {
                    let name = self.names.get(i).map_or("", String::as_str);
                    return Err(DecodeError::at(DecodeErrorKind::NotNull, 0).in_field(name));
                }
                column.push_null();
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// Removes the last row appended (its record turned out to be rejected after all).
    pub(crate) fn pop_row(&mut self) {
        if self.rows > 0 {
            self.rows -= 1;
            self.rollback();
        }
    }

    fn rollback(&mut self) {
        for column in &mut self.columns {
            column.truncate(self.rows);
        }
    }

    /// Room for `rows` more rows of `record_bytes` in all (see [`LeafColumn::reserve`]).
    pub(crate) fn reserve(&mut self, rows: usize, record_bytes: usize) {
        for column in &mut self.columns {
            column.reserve(rows, record_bytes);
        }
    }

    /// Drops every row appended since the last finish; the columns keep their capacity.
    pub(crate) fn clear(&mut self) {
        self.rows = 0;
        self.rollback();
    }

    /// The arrays of all rows appended since the last finish; the columns are reset.
    pub(crate) fn finish(&mut self) -> Vec<ArrayRef> {
        let rows = self.rows;
        self.rows = 0;
        self.columns.iter_mut().map(|c| c.finish(rows)).collect()
    }
}

impl ValueRows for FlatColumns {
    fn append_values(&mut self, slots: &[Value<'_>]) {
        for (column, value) in self.columns.iter_mut().zip(slots) {
            column.push_value(value);
        }
        for column in self.columns.iter_mut().skip(slots.len()) {
            column.push_null();
        }
        self.rows += 1;
    }
}

/// The JSON sink that writes one record's members into the columns (column `i` is node
/// `i + 1`; a flat table has no containers below the record).
struct JsonWriter<'c> {
    columns: &'c mut [LeafColumn],
    /// The batch's row count before this record.
    rows: usize,
    /// The record must take the value-tree path.
    failed: bool,
}

impl JsonSink for JsonWriter<'_> {
    fn child(&self, node: usize, index: usize) -> usize {
        if node == RECORD {
            index + 1
        } else {
            usize::MAX
        }
    }

    fn set(&mut self, node: usize, value: &Value<'_>) {
        match node.checked_sub(1).and_then(|i| self.columns.get_mut(i)) {
            Some(column) => column.set_value(self.rows, value),
            None => self.failed = true,
        }
    }

    fn clear(&mut self, node: usize) {
        self.set(node, &Value::Null);
    }

    #[inline(always)]
    fn set_str(&mut self, node: usize, text: &str) {
        self.write_leaf(node, |data| data.push_str(text));
    }

    #[inline(always)]
    fn set_int(&mut self, node: usize, value: i64) {
        self.write_leaf(node, |data| data.push_int(value));
    }

    #[inline(always)]
    fn set_double(&mut self, node: usize, value: f64) {
        self.write_leaf(node, |data| data.push_double(value));
    }

    // No containers: never called for a flat table's plan.
    fn push(&mut self, _: usize, _: &Value<'_>) {
        self.failed = true;
    }
    fn push_key(&mut self, _: usize, _: &Value<'_>) {
        self.failed = true;
    }
    fn begin(&mut self, _: usize) {
        self.failed = true;
    }
    fn commit(&mut self, _: usize) {
        self.failed = true;
    }
}

impl JsonWriter<'_> {
    /// Writes the open row of column `node` with `push` (see `LeafColumn::write`).
    #[inline(always)]
    fn write_leaf(&mut self, node: usize, push: impl FnOnce(&mut Data) -> bool) {
        match node.checked_sub(1).and_then(|i| self.columns.get_mut(i)) {
            Some(column) => {
                column.write(self.rows, push);
            }
            None => self.failed = true,
        }
    }
}

/// The [`Visitor`] methods of nested fields, for a flat table's visitors: its plan has none,
/// so they are never called.
macro_rules! no_nested_fields {
    ($a:lifetime) => {
        fn element(&mut self, _: usize, _: Scalar<$a>) {}
        fn map_entry(&mut self, _: usize, _: Scalar<$a>, _: Scalar<$a>) {}
        fn begin_message(&mut self, _: usize) {}
        fn begin_element(&mut self, _: usize) {}
        fn begin_map_value(&mut self, _: usize, _: Scalar<$a>) {}
        fn end_message(&mut self) {}
    };
}

/// Whether bit `i` of `bits` is set.
#[inline(always)]
fn bit(bits: &[u64], i: usize) -> bool {
    bits.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
}

/// The visitor that checks one record against the columns without writing them: it keeps
/// which columns the record wrote, as [`RowWriter`] keeps it in the columns' lengths.
struct RowChecker<'s> {
    seen: &'s mut [u64],
    /// Columns of the table (a slot beyond them is ignored, as by [`RowWriter`]).
    columns: usize,
    /// Columns this record has written so far.
    filled: usize,
}

impl RowChecker<'_> {
    /// Notes that the record wrote column `slot` (`_push`, the value's write, is not run).
    #[inline(always)]
    fn write(&mut self, slot: usize, _push: impl FnOnce(&mut Data) -> bool) {
        if slot >= self.columns {
            return;
        }
        if let Some(word) = self.seen.get_mut(slot / 64) {
            let mask = 1 << (slot % 64);
            if *word & mask == 0 {
                *word |= mask;
                self.filled += 1;
            }
        }
    }
}

impl<'a> Visitor<'a> for RowChecker<'_> {
    const NESTED: bool = false;

    // The values are decoded and checked by the visit; only which column they go to counts.
    super::leaf::leaf_visitor_writes!('a);

    fn clear(&mut self, slot: usize) {
        if let Some(word) = self.seen.get_mut(slot / 64) {
            let mask = 1 << (slot % 64);
            if *word & mask != 0 {
                *word &= !mask;
                self.filled = self.filled.saturating_sub(1);
            }
        }
    }

    no_nested_fields!('a);
}

/// The visitor that writes one record's fields into the columns.
struct RowWriter<'c> {
    columns: &'c mut [LeafColumn],
    /// The batch's row count before this record.
    rows: usize,
    /// Columns this record has written so far.
    filled: usize,
}

impl RowWriter<'_> {
    /// Writes the record's value of column `slot` with `push` (which returns `false` if the
    /// value does not fit the column: then a null); a value written before is replaced.
    #[inline(always)]
    fn write(&mut self, slot: usize, push: impl FnOnce(&mut Data) -> bool) {
        let rows = self.rows;
        let Some(column) = self.columns.get_mut(slot) else {
            return;
        };
        if column.len > rows {
            column.truncate(rows);
        } else {
            self.filled += 1;
        }
        if push(&mut column.data) {
            column.len += 1;
        } else {
            column.push_null();
        }
    }
}

impl<'a> Visitor<'a> for RowWriter<'_> {
    // A flat table's plan has no repeated fields.
    const NESTED: bool = false;

    super::leaf::leaf_visitor_writes!('a);

    fn clear(&mut self, slot: usize) {
        let rows = self.rows;
        if let Some(column) = self.columns.get_mut(slot) {
            if column.len > rows {
                column.truncate(rows);
                self.filled = self.filled.saturating_sub(1);
            }
        }
    }

    no_nested_fields!('a);
}
