//! [`FlatColumns`]: the Arrow columns of a table whose columns are all scalars (no ARRAY,
//! MAP or STRUCT), filled straight from [`ProtoPlan::visit`] in one pass.
//!
//! Each column is a plain `Vec` of values (for STRING and BINARY an offsets `Vec` and a byte
//! `Vec`) plus the sorted list of its null rows, turned into Arrow buffers without copying on
//! `finish`. A column longer than the batch's row count has been written by the record being
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

use std::borrow::Cow;
use std::sync::Arc;

use arrow_array::{
    new_null_array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Float32Array, Float64Array,
    Int16Array, Int32Array, Int64Array, Int8Array, StringArray, TimestampMicrosecondArray,
};
use arrow_buffer::{
    BooleanBuffer, BooleanBufferBuilder, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer,
};
use arrow_schema::DataType;

use super::types::UTC;
use crate::error::{DecodeError, DecodeErrorKind};
use crate::proto::{ProtoPlan, Visitor};
use crate::schema::{Column, ColumnType};
use crate::value::{Scalar, Value};

/// The values of one column.
#[derive(Debug)]
enum Data {
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    Date(Vec<i32>),
    Timestamp { values: Vec<i64>, utc: bool },
    Utf8 { offsets: Vec<i32>, bytes: Vec<u8> },
    Binary { offsets: Vec<i32>, bytes: Vec<u8> },
}

/// One scalar column.
#[derive(Debug)]
struct FlatColumn {
    data: Data,
    /// Rows in `data`.
    len: usize,
    /// The null rows, ascending.
    nulls: Vec<u32>,
}

/// All columns of a flat table.
#[derive(Debug)]
pub(crate) struct FlatColumns {
    columns: Vec<FlatColumn>,
    names: Vec<String>,
    required: Vec<bool>,
    rows: usize,
}

fn next_offset(bytes: &[u8]) -> i32 {
    // The batch builder keeps every column below i32::MAX bytes.
    i32::try_from(bytes.len()).unwrap_or(i32::MAX)
}

impl Data {
    fn new(data_type: &ColumnType) -> Option<Data> {
        Some(match data_type {
            ColumnType::TinyInt => Data::I8(Vec::new()),
            ColumnType::SmallInt => Data::I16(Vec::new()),
            ColumnType::Int => Data::I32(Vec::new()),
            ColumnType::BigInt => Data::I64(Vec::new()),
            ColumnType::Float => Data::F32(Vec::new()),
            ColumnType::Double => Data::F64(Vec::new()),
            ColumnType::Boolean => Data::Bool(Vec::new()),
            ColumnType::Date => Data::Date(Vec::new()),
            ColumnType::Timestamp => Data::Timestamp {
                values: Vec::new(),
                utc: true,
            },
            ColumnType::TimestampNtz => Data::Timestamp {
                values: Vec::new(),
                utc: false,
            },
            ColumnType::String | ColumnType::Variant => Data::Utf8 {
                offsets: vec![0],
                bytes: Vec::new(),
            },
            ColumnType::Binary => Data::Binary {
                offsets: vec![0],
                bytes: Vec::new(),
            },
            ColumnType::Array { .. } | ColumnType::Map { .. } | ColumnType::Struct(_) => {
                return None
            }
        })
    }

    /// Appends a value; `false` (nothing appended) if it does not fit the column, which
    /// validation rules out.
    #[inline]
    fn push(&mut self, value: &Scalar<'_>) -> bool {
        match (self, value) {
            (Data::I64(v), Scalar::Int(x)) => v.push(*x),
            (Data::I32(v) | Data::Date(v), Scalar::Int(x)) => {
                v.push(i32::try_from(*x).unwrap_or_default())
            }
            (Data::I16(v), Scalar::Int(x)) => v.push(i16::try_from(*x).unwrap_or_default()),
            (Data::I8(v), Scalar::Int(x)) => v.push(i8::try_from(*x).unwrap_or_default()),
            (Data::Timestamp { values, .. }, Scalar::Int(x)) => values.push(*x),
            (Data::F64(v), Scalar::Double(x)) => v.push(*x),
            (Data::F32(v), Scalar::Float(x)) => v.push(*x),
            (Data::Bool(v), Scalar::Bool(x)) => v.push(*x),
            (Data::Utf8 { offsets, bytes }, Scalar::Str(s)) => {
                bytes.extend_from_slice(s.as_bytes());
                offsets.push(next_offset(bytes));
            }
            (Data::Binary { offsets, bytes }, Scalar::Bytes(b)) => {
                bytes.extend_from_slice(b);
                offsets.push(next_offset(bytes));
            }
            _ => return false,
        }
        true
    }

    fn push_default(&mut self) {
        match self {
            Data::I8(v) => v.push(0),
            Data::I16(v) => v.push(0),
            Data::I32(v) | Data::Date(v) => v.push(0),
            Data::I64(v) | Data::Timestamp { values: v, .. } => v.push(0),
            Data::F32(v) => v.push(0.0),
            Data::F64(v) => v.push(0.0),
            Data::Bool(v) => v.push(false),
            Data::Utf8 { offsets, bytes } | Data::Binary { offsets, bytes } => {
                offsets.push(next_offset(bytes))
            }
        }
    }

    fn truncate(&mut self, rows: usize) {
        match self {
            Data::I8(v) => v.truncate(rows),
            Data::I16(v) => v.truncate(rows),
            Data::I32(v) | Data::Date(v) => v.truncate(rows),
            Data::I64(v) | Data::Timestamp { values: v, .. } => v.truncate(rows),
            Data::F32(v) => v.truncate(rows),
            Data::F64(v) => v.truncate(rows),
            Data::Bool(v) => v.truncate(rows),
            Data::Utf8 { offsets, bytes } | Data::Binary { offsets, bytes } => {
                offsets.truncate(rows + 1);
                let end = offsets
                    .last()
                    .map_or(0, |&o| usize::try_from(o).unwrap_or(0));
                bytes.truncate(end);
            }
        }
    }

    /// The Arrow array of everything appended; the column is left empty, with room for
    /// `rows` more rows.
    fn finish(&mut self, nulls: Option<NullBuffer>, rows: usize) -> ArrayRef {
        fn take<T>(v: &mut Vec<T>, rows: usize) -> ScalarBuffer<T>
        where
            T: arrow_buffer::ArrowNativeType,
        {
            ScalarBuffer::from(std::mem::replace(v, Vec::with_capacity(rows)))
        }
        fn take_bytes(offsets: &mut Vec<i32>, bytes: &mut Vec<u8>) -> (OffsetBuffer<i32>, Buffer) {
            let mut fresh = Vec::with_capacity(offsets.len());
            fresh.push(0);
            let taken = std::mem::replace(offsets, fresh);
            let data = std::mem::replace(bytes, Vec::with_capacity(bytes.len()));
            (
                OffsetBuffer::new(ScalarBuffer::from(taken)),
                Buffer::from_vec(data),
            )
        }
        match self {
            Data::I8(v) => Arc::new(Int8Array::new(take(v, rows), nulls)),
            Data::I16(v) => Arc::new(Int16Array::new(take(v, rows), nulls)),
            Data::I32(v) => Arc::new(Int32Array::new(take(v, rows), nulls)),
            Data::Date(v) => Arc::new(Date32Array::new(take(v, rows), nulls)),
            Data::I64(v) => Arc::new(Int64Array::new(take(v, rows), nulls)),
            Data::Timestamp { values, utc } => {
                let array = TimestampMicrosecondArray::new(take(values, rows), nulls);
                if *utc {
                    Arc::new(array.with_timezone(UTC))
                } else {
                    Arc::new(array)
                }
            }
            Data::F32(v) => Arc::new(Float32Array::new(take(v, rows), nulls)),
            Data::F64(v) => Arc::new(Float64Array::new(take(v, rows), nulls)),
            Data::Bool(v) => {
                let values = BooleanBuffer::from_iter(v.iter().copied());
                v.clear();
                Arc::new(BooleanArray::new(values, nulls))
            }
            Data::Utf8 { offsets, bytes } => {
                let (offsets, data) = take_bytes(offsets, bytes);
                let len = offsets.len() - 1;
                match StringArray::try_new(offsets, data, nulls) {
                    Ok(array) => Arc::new(array),
                    // Unreachable: every string was checked as UTF-8 when decoded.
                    Err(_) => new_null_array(&DataType::Utf8, len),
                }
            }
            Data::Binary { offsets, bytes } => {
                let (offsets, data) = take_bytes(offsets, bytes);
                Arc::new(BinaryArray::new(offsets, data, nulls))
            }
        }
    }
}

impl FlatColumn {
    /// Appends a value for row `row` (the column's current length).
    #[inline]
    fn push(&mut self, value: &Scalar<'_>) {
        if self.data.push(value) {
            self.len += 1;
        } else {
            self.push_null();
        }
    }

    fn push_null(&mut self) {
        self.nulls.push(u32::try_from(self.len).unwrap_or(u32::MAX));
        self.data.push_default();
        self.len += 1;
    }

    fn push_value(&mut self, value: &Value<'_>) {
        let scalar = match value {
            Value::Bool(v) => Scalar::Bool(*v),
            Value::Int(v) => Scalar::Int(*v),
            Value::Float(v) => Scalar::Float(*v),
            Value::Double(v) => Scalar::Double(*v),
            Value::Str(v) => Scalar::Str(Cow::Borrowed(v.as_ref())),
            Value::Bytes(v) => Scalar::Bytes(v.as_ref()),
            Value::Null | Value::List(_) | Value::Map(_) | Value::Struct(..) => {
                return self.push_null()
            }
        };
        self.push(&scalar);
    }

    fn truncate(&mut self, rows: usize) {
        if self.len > rows {
            self.data.truncate(rows);
            self.len = rows;
            while self.nulls.last().is_some_and(|&r| r as usize >= rows) {
                self.nulls.pop();
            }
        }
    }

    fn finish(&mut self, rows: usize) -> ArrayRef {
        let nulls = if self.nulls.is_empty() {
            None
        } else {
            let mut valid = BooleanBufferBuilder::new(rows);
            valid.append_n(rows, true);
            for &row in &self.nulls {
                if (row as usize) < rows {
                    valid.set_bit(row as usize, false);
                }
            }
            self.nulls.clear();
            Some(NullBuffer::new(valid.finish()))
        };
        self.len = 0;
        self.data.finish(nulls, rows)
    }
}

impl FlatColumns {
    /// Columns for `columns`, or `None` if any of them is not a scalar.
    pub(crate) fn new(columns: &[Column]) -> Option<FlatColumns> {
        let data = columns
            .iter()
            .map(|c| {
                Data::new(&c.data_type).map(|data| FlatColumn {
                    data,
                    len: 0,
                    nulls: Vec::new(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(FlatColumns {
            columns: data,
            names: columns.iter().map(|c| c.name.clone()).collect(),
            required: columns.iter().map(|c| !c.nullable).collect(),
            rows: 0,
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

    /// Appends one decoded and validated record of the value tree (the JSON path).
    pub(crate) fn append_values(&mut self, slots: &[Value<'_>]) {
        for (column, value) in self.columns.iter_mut().zip(slots) {
            column.push_value(value);
        }
        for column in self.columns.iter_mut().skip(slots.len()) {
            column.push_null();
        }
        self.rows += 1;
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

    /// The arrays of all rows appended since the last finish; the columns are reset.
    pub(crate) fn finish(&mut self) -> Vec<ArrayRef> {
        let rows = self.rows;
        self.rows = 0;
        self.columns.iter_mut().map(|c| c.finish(rows)).collect()
    }
}

/// The visitor that writes one record's fields into the columns.
struct RowWriter<'c> {
    columns: &'c mut [FlatColumn],
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
    #[inline]
    fn scalar(&mut self, slot: usize, value: Scalar<'a>) {
        self.write(slot, |data| data.push(&value));
    }

    #[inline]
    fn int(&mut self, slot: usize, value: i64) {
        self.write(slot, |data| {
            match data {
                Data::I64(v) | Data::Timestamp { values: v, .. } => v.push(value),
                Data::I32(v) | Data::Date(v) => v.push(i32::try_from(value).unwrap_or_default()),
                Data::I16(v) => v.push(i16::try_from(value).unwrap_or_default()),
                Data::I8(v) => v.push(i8::try_from(value).unwrap_or_default()),
                _ => return false,
            }
            true
        });
    }

    #[inline]
    fn double(&mut self, slot: usize, value: f64) {
        self.write(slot, |data| match data {
            Data::F64(v) => {
                v.push(value);
                true
            }
            _ => false,
        });
    }

    #[inline]
    fn float(&mut self, slot: usize, value: f32) {
        self.write(slot, |data| match data {
            Data::F32(v) => {
                v.push(value);
                true
            }
            _ => false,
        });
    }

    #[inline]
    fn boolean(&mut self, slot: usize, value: bool) {
        self.write(slot, |data| match data {
            Data::Bool(v) => {
                v.push(value);
                true
            }
            _ => false,
        });
    }

    #[inline]
    fn string(&mut self, slot: usize, value: &'a str) {
        self.write(slot, |data| match data {
            Data::Utf8 { offsets, bytes } => {
                bytes.extend_from_slice(value.as_bytes());
                offsets.push(next_offset(bytes));
                true
            }
            _ => false,
        });
    }

    #[inline]
    fn bytes(&mut self, slot: usize, value: &'a [u8]) {
        self.write(slot, |data| match data {
            Data::Binary { offsets, bytes } => {
                bytes.extend_from_slice(value);
                offsets.push(next_offset(bytes));
                true
            }
            _ => false,
        });
    }

    fn clear(&mut self, slot: usize) {
        let rows = self.rows;
        if let Some(column) = self.columns.get_mut(slot) {
            if column.len > rows {
                column.truncate(rows);
                self.filled = self.filled.saturating_sub(1);
            }
        }
    }

    // A flat table's plan has no nested fields: these are never called.
    fn element(&mut self, _: usize, _: Scalar<'a>) {}
    fn map_entry(&mut self, _: usize, _: Scalar<'a>, _: Scalar<'a>) {}
    fn begin_message(&mut self, _: usize) {}
    fn begin_element(&mut self, _: usize) {}
    fn begin_map_value(&mut self, _: usize, _: Scalar<'a>) {}
    fn end_message(&mut self) {}
}
