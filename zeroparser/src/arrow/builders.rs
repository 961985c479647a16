//! Arrow column builders, one per column, nested for ARRAY / MAP / STRUCT.
//!
//! Appending a validated [`Value`] cannot fail: all checks happened while decoding. The
//! builders uphold Arrow's invariants by construction (offsets start at 0 and never decrease,
//! children have one entry per parent slot, non-nullable children are null only where their
//! parent is null), so finishing never fails either.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Float32Builder, Float64Builder, Int16Builder,
    Int32Builder, Int64Builder, Int8Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, ListArray, MapArray, StructArray};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{FieldRef, Fields};

use super::types::{list_field, map_entries_field, map_entry_fields, struct_fields, UTC};
use crate::schema::ColumnType;
use crate::value::Value;

/// The builder of one column (or nested child).
#[derive(Debug)]
pub(crate) enum ColumnBuilder {
    Int8(Int8Builder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Utf8(StringBuilder),
    Boolean(BooleanBuilder),
    Binary(BinaryBuilder),
    Date32(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder),
    List(Box<ListBuilder>),
    Map(Box<MapBuilder>),
    Struct(Box<StructBuilder>),
}

#[derive(Debug)]
pub(crate) struct ListBuilder {
    field: FieldRef,
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
    child: ColumnBuilder,
}

#[derive(Debug)]
pub(crate) struct MapBuilder {
    entries_field: FieldRef,
    entry_fields: Fields,
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
    keys: ColumnBuilder,
    values: ColumnBuilder,
}

#[derive(Debug)]
pub(crate) struct StructBuilder {
    fields: Fields,
    children: Vec<ColumnBuilder>,
    nulls: NullBufferBuilder,
}

impl StructBuilder {
    pub(crate) fn new(fields: Fields, children: Vec<ColumnBuilder>) -> Self {
        Self {
            fields,
            children,
            nulls: NullBufferBuilder::new(0),
        }
    }

    fn append(&mut self, values: &[Value<'_>]) {
        self.nulls.append_non_null();
        for (i, child) in self.children.iter_mut().enumerate() {
            child.append(values.get(i).unwrap_or(&Value::Null));
        }
    }

    fn append_null(&mut self) {
        self.nulls.append_null();
        for child in &mut self.children {
            child.append_null();
        }
    }

    pub(crate) fn finish(&mut self) -> StructArray {
        let len = self.nulls.len();
        let nulls = self.nulls.finish();
        if self.children.is_empty() {
            return StructArray::new_empty_fields(len, nulls);
        }
        let arrays: Vec<ArrayRef> = self
            .children
            .iter_mut()
            .map(ColumnBuilder::finish)
            .collect();
        StructArray::new(self.fields.clone(), arrays, nulls)
    }
}

/// Next offset after `count` more child entries (saturating; batches are kept far below
/// `i32::MAX` entries by the batch builder's size guard).
fn next_offset(offsets: &[i32], count: usize) -> i32 {
    let last = offsets.last().copied().unwrap_or(0);
    last.saturating_add(i32::try_from(count).unwrap_or(i32::MAX))
}

fn take_offsets(offsets: &mut Vec<i32>) -> OffsetBuffer<i32> {
    let taken = std::mem::replace(offsets, vec![0]);
    OffsetBuffer::new(ScalarBuffer::from(taken))
}

impl ColumnBuilder {
    /// An empty builder for `data_type`.
    pub(crate) fn new(data_type: &ColumnType) -> Self {
        match data_type {
            ColumnType::TinyInt => ColumnBuilder::Int8(Int8Builder::new()),
            ColumnType::SmallInt => ColumnBuilder::Int16(Int16Builder::new()),
            ColumnType::Int => ColumnBuilder::Int32(Int32Builder::new()),
            ColumnType::BigInt => ColumnBuilder::Int64(Int64Builder::new()),
            ColumnType::Float => ColumnBuilder::Float32(Float32Builder::new()),
            ColumnType::Double => ColumnBuilder::Float64(Float64Builder::new()),
            ColumnType::String | ColumnType::Variant => ColumnBuilder::Utf8(StringBuilder::new()),
            ColumnType::Boolean => ColumnBuilder::Boolean(BooleanBuilder::new()),
            ColumnType::Binary => ColumnBuilder::Binary(BinaryBuilder::new()),
            ColumnType::Date => ColumnBuilder::Date32(Date32Builder::new()),
            ColumnType::Timestamp => {
                ColumnBuilder::Timestamp(TimestampMicrosecondBuilder::new().with_timezone(UTC))
            }
            ColumnType::TimestampNtz => {
                ColumnBuilder::Timestamp(TimestampMicrosecondBuilder::new())
            }
            ColumnType::Array {
                element,
                contains_null,
            } => ColumnBuilder::List(Box::new(ListBuilder {
                field: list_field(element, *contains_null),
                offsets: vec![0],
                nulls: NullBufferBuilder::new(0),
                child: ColumnBuilder::new(element),
            })),
            ColumnType::Map {
                key,
                value,
                value_contains_null,
            } => ColumnBuilder::Map(Box::new(MapBuilder {
                entries_field: map_entries_field(key, value, *value_contains_null),
                entry_fields: map_entry_fields(key, value, *value_contains_null),
                offsets: vec![0],
                nulls: NullBufferBuilder::new(0),
                keys: ColumnBuilder::new(key),
                values: ColumnBuilder::new(value),
            })),
            ColumnType::Struct(columns) => ColumnBuilder::Struct(Box::new(StructBuilder::new(
                struct_fields(columns),
                columns
                    .iter()
                    .map(|c| ColumnBuilder::new(&c.data_type))
                    .collect(),
            ))),
        }
    }

    /// Appends one validated value. A value of the wrong shape (impossible after
    /// validation) is appended as null rather than panicking.
    pub(crate) fn append(&mut self, value: &Value<'_>) {
        match (self, value) {
            (builder, Value::Null) => builder.append_null(),
            (ColumnBuilder::Int8(b), Value::Int(v)) => {
                b.append_value(i8::try_from(*v).unwrap_or_default())
            }
            (ColumnBuilder::Int16(b), Value::Int(v)) => {
                b.append_value(i16::try_from(*v).unwrap_or_default())
            }
            (ColumnBuilder::Int32(b), Value::Int(v)) => {
                b.append_value(i32::try_from(*v).unwrap_or_default())
            }
            (ColumnBuilder::Date32(b), Value::Int(v)) => {
                b.append_value(i32::try_from(*v).unwrap_or_default())
            }
            (ColumnBuilder::Int64(b), Value::Int(v)) => b.append_value(*v),
            (ColumnBuilder::Timestamp(b), Value::Int(v)) => b.append_value(*v),
            (ColumnBuilder::Float32(b), Value::Float(v)) => b.append_value(*v),
            (ColumnBuilder::Float64(b), Value::Double(v)) => b.append_value(*v),
            (ColumnBuilder::Utf8(b), Value::Str(v)) => b.append_value(v),
            (ColumnBuilder::Boolean(b), Value::Bool(v)) => b.append_value(*v),
            (ColumnBuilder::Binary(b), Value::Bytes(v)) => b.append_value(v),
            (ColumnBuilder::List(list), Value::List(items)) => {
                for item in items {
                    list.child.append(item);
                }
                let next = next_offset(&list.offsets, items.len());
                list.offsets.push(next);
                list.nulls.append_non_null();
            }
            (ColumnBuilder::Map(map), Value::Map(entries)) => {
                for (key, item) in entries {
                    map.keys.append(key);
                    map.values.append(item);
                }
                let next = next_offset(&map.offsets, entries.len());
                map.offsets.push(next);
                map.nulls.append_non_null();
            }
            (ColumnBuilder::Struct(builder), Value::Struct(fields, _)) => builder.append(fields),
            (builder, _) => builder.append_null(),
        }
    }

    /// Appends a null (for a null struct, its children get nulls too).
    pub(crate) fn append_null(&mut self) {
        match self {
            ColumnBuilder::Int8(b) => b.append_null(),
            ColumnBuilder::Int16(b) => b.append_null(),
            ColumnBuilder::Int32(b) => b.append_null(),
            ColumnBuilder::Int64(b) => b.append_null(),
            ColumnBuilder::Float32(b) => b.append_null(),
            ColumnBuilder::Float64(b) => b.append_null(),
            ColumnBuilder::Utf8(b) => b.append_null(),
            ColumnBuilder::Boolean(b) => b.append_null(),
            ColumnBuilder::Binary(b) => b.append_null(),
            ColumnBuilder::Date32(b) => b.append_null(),
            ColumnBuilder::Timestamp(b) => b.append_null(),
            ColumnBuilder::List(list) => {
                let next = next_offset(&list.offsets, 0);
                list.offsets.push(next);
                list.nulls.append_null();
            }
            ColumnBuilder::Map(map) => {
                let next = next_offset(&map.offsets, 0);
                map.offsets.push(next);
                map.nulls.append_null();
            }
            ColumnBuilder::Struct(builder) => builder.append_null(),
        }
    }

    /// The array of everything appended since the last finish; the builder is reset.
    pub(crate) fn finish(&mut self) -> ArrayRef {
        match self {
            ColumnBuilder::Int8(b) => Arc::new(b.finish()),
            ColumnBuilder::Int16(b) => Arc::new(b.finish()),
            ColumnBuilder::Int32(b) => Arc::new(b.finish()),
            ColumnBuilder::Int64(b) => Arc::new(b.finish()),
            ColumnBuilder::Float32(b) => Arc::new(b.finish()),
            ColumnBuilder::Float64(b) => Arc::new(b.finish()),
            ColumnBuilder::Utf8(b) => Arc::new(b.finish()),
            ColumnBuilder::Boolean(b) => Arc::new(b.finish()),
            ColumnBuilder::Binary(b) => Arc::new(b.finish()),
            ColumnBuilder::Date32(b) => Arc::new(b.finish()),
            ColumnBuilder::Timestamp(b) => Arc::new(b.finish()),
            ColumnBuilder::List(list) => {
                let offsets = take_offsets(&mut list.offsets);
                let nulls = list.nulls.finish();
                let values = list.child.finish();
                Arc::new(ListArray::new(list.field.clone(), offsets, values, nulls))
            }
            ColumnBuilder::Map(map) => {
                let offsets = take_offsets(&mut map.offsets);
                let nulls = map.nulls.finish();
                let entries = StructArray::new(
                    map.entry_fields.clone(),
                    vec![map.keys.finish(), map.values.finish()],
                    None,
                );
                Arc::new(MapArray::new(
                    map.entries_field.clone(),
                    offsets,
                    entries,
                    nulls,
                    false,
                ))
            }
            ColumnBuilder::Struct(builder) => Arc::new(builder.finish()),
        }
    }
}
