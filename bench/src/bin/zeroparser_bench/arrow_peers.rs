//! Mode (b), "parse into an Arrow RecordBatch": Sluice's `RecordBatchBuilder::append_proto`
//! against prost-reflect `DynamicMessage` plus Arrow's own builders filled from it (the way a
//! runtime-schema ingester without zeroparser would do it).

use std::hint::black_box;

use arrow_array::builder::{
    make_builder, ArrayBuilder, BinaryBuilder, BooleanBuilder, Float32Builder, Float64Builder,
    Int32Builder, Int64Builder, ListBuilder, MapBuilder, StringBuilder, StructBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, SchemaRef};
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, Value};
use sluice_zeroparser::{ProtoPlan, RecordBatchBuilder};

/// The most rows per RecordBatch (a memtable flush is larger; this keeps the builders in
/// cache).
pub const BATCH_ROWS: usize = 8192;

/// `items` in batches of nearly equal size (the last at most a few rows shorter), at most
/// [`BATCH_ROWS`] each: 10 000 records are two batches of 5 000, not 8 192 and 1 808. A
/// kept builder finishes each batch with room for one an eighth larger
/// (`RecordBatchBuilder::finish`); with 8 192 after 1 808, every pass regrew its columns (a
/// realloc, copying or not depending on where the heap put the buffer: AirQuality ~1 KB
/// into Arrow measured 0.49× to 1.02× prost that way, on code unchanged on its path), a
/// cost of the bench's split, not of a stream whose requests keep their size.
pub fn batches<T>(items: &[T]) -> std::slice::Chunks<'_, T> {
    let count = items.len().div_ceil(BATCH_ROWS).max(1);
    items.chunks(items.len().div_ceil(count).max(1))
}

/// Sluice: append every record into `builder`, finish a batch at the end of each of
/// [`batches`]. The
/// caller keeps one builder across passes, as the pod keeps one per stream (a finished
/// builder keeps its columns' capacity), so a pass measures appends, not buffer regrowth.
pub fn sluice(builder: &mut RecordBatchBuilder, plan: &ProtoPlan, records: &[Vec<u8>]) -> usize {
    let mut rows = 0;
    for chunk in batches(records) {
        for bytes in chunk {
            if builder.append_proto(plan, bytes).is_err() {
                rows += 1_000_000;
            }
        }
        rows += black_box(builder.finish()).num_rows();
    }
    rows
}

/// prost-reflect + Arrow builders, one per column of the same Arrow schema.
pub fn prost_reflect(
    descriptor: &MessageDescriptor,
    schema: &SchemaRef,
    records: &[Vec<u8>],
) -> usize {
    let fields: Vec<FieldDescriptor> = descriptor.fields().collect();
    let mut rows = 0;
    for chunk in batches(records) {
        let mut builders: Vec<Box<dyn ArrayBuilder>> = schema
            .fields()
            .iter()
            .map(|f| make_builder(f.data_type(), chunk.len()))
            .collect();
        for bytes in chunk {
            let Ok(message) = DynamicMessage::decode(descriptor.clone(), bytes.as_slice()) else {
                continue;
            };
            for ((field, builder), arrow_field) in
                fields.iter().zip(&mut builders).zip(schema.fields().iter())
            {
                let value = if field.supports_presence() && !message.has_field(field) {
                    None
                } else {
                    Some(message.get_field(field))
                };
                append(
                    builder.as_mut(),
                    arrow_field.data_type(),
                    &field.kind(),
                    value.as_deref(),
                );
            }
        }
        let columns: Vec<(String, ArrayRef)> = schema
            .fields()
            .iter()
            .zip(&mut builders)
            .map(|(f, b)| (f.name().clone(), b.finish()))
            .collect();
        if let Ok(batch) = RecordBatch::try_from_iter(columns) {
            rows += black_box(batch).num_rows();
        }
    }
    rows
}

fn downcast<T: 'static>(builder: &mut dyn ArrayBuilder) -> Option<&mut T> {
    builder.as_any_mut().downcast_mut::<T>()
}

fn enum_name(kind: &Kind, number: i32) -> String {
    match kind {
        Kind::Enum(e) => e
            .get_value(number)
            .map_or_else(|| number.to_string(), |v| v.name().to_owned()),
        _ => number.to_string(),
    }
}

fn append(
    builder: &mut dyn ArrayBuilder,
    data_type: &DataType,
    kind: &Kind,
    value: Option<&Value>,
) {
    match data_type {
        DataType::Int32 => {
            if let Some(b) = downcast::<Int32Builder>(builder) {
                b.append_option(value.and_then(Value::as_i32));
            }
        }
        DataType::Int64 => {
            if let Some(b) = downcast::<Int64Builder>(builder) {
                b.append_option(value.and_then(|v| match v {
                    Value::I64(i) => Some(*i),
                    Value::I32(i) => Some(i64::from(*i)),
                    Value::U32(i) => Some(i64::from(*i)),
                    Value::U64(i) => i64::try_from(*i).ok(),
                    _ => None,
                }));
            }
        }
        DataType::Float32 => {
            if let Some(b) = downcast::<Float32Builder>(builder) {
                b.append_option(value.and_then(Value::as_f32));
            }
        }
        DataType::Float64 => {
            if let Some(b) = downcast::<Float64Builder>(builder) {
                b.append_option(value.and_then(Value::as_f64));
            }
        }
        DataType::Boolean => {
            if let Some(b) = downcast::<BooleanBuilder>(builder) {
                b.append_option(value.and_then(Value::as_bool));
            }
        }
        DataType::Binary => {
            if let Some(b) = downcast::<BinaryBuilder>(builder) {
                b.append_option(value.and_then(Value::as_bytes));
            }
        }
        DataType::Utf8 => {
            if let Some(b) = downcast::<StringBuilder>(builder) {
                match value {
                    Some(Value::String(s)) => b.append_value(s),
                    Some(Value::EnumNumber(n)) => b.append_value(enum_name(kind, *n)),
                    _ => b.append_null(),
                }
            }
        }
        DataType::List(item) => {
            if let Some(b) = downcast::<ListBuilder<Box<dyn ArrayBuilder>>>(builder) {
                for v in value.and_then(Value::as_list).unwrap_or(&[]) {
                    append(b.values().as_mut(), item.data_type(), kind, Some(v));
                }
                b.append(true);
            }
        }
        DataType::Map(entries, _) => {
            let (DataType::Struct(kv), Kind::Message(entry)) = (entries.data_type(), kind) else {
                return;
            };
            let (Some(key_type), Some(value_type)) = (kv.first(), kv.get(1)) else {
                return;
            };
            let key_kind = entry.map_entry_key_field().kind();
            let value_kind = entry.map_entry_value_field().kind();
            if let Some(b) =
                downcast::<MapBuilder<Box<dyn ArrayBuilder>, Box<dyn ArrayBuilder>>>(builder)
            {
                if let Some(map) = value.and_then(Value::as_map) {
                    for (k, v) in map {
                        let key = match k {
                            MapKey::String(s) => Value::String(s.clone()),
                            MapKey::I32(i) => Value::I32(*i),
                            MapKey::I64(i) => Value::I64(*i),
                            MapKey::U32(i) => Value::U32(*i),
                            MapKey::U64(i) => Value::U64(*i),
                            MapKey::Bool(x) => Value::Bool(*x),
                        };
                        append(
                            b.keys().as_mut(),
                            key_type.data_type(),
                            &key_kind,
                            Some(&key),
                        );
                        append(
                            b.values().as_mut(),
                            value_type.data_type(),
                            &value_kind,
                            Some(v),
                        );
                    }
                }
                let _ = b.append(true);
            }
        }
        DataType::Struct(children) => {
            let (Some(b), Kind::Message(descriptor)) = (downcast::<StructBuilder>(builder), kind)
            else {
                return;
            };
            let message = value.and_then(Value::as_message);
            for ((child, child_builder), field) in children
                .iter()
                .zip(b.field_builders_mut())
                .zip(descriptor.fields())
            {
                let child_value = message
                    .filter(|m| !field.supports_presence() || m.has_field(&field))
                    .map(|m| m.get_field(&field));
                append(
                    child_builder.as_mut(),
                    child.data_type(),
                    &field.kind(),
                    child_value.as_deref(),
                );
            }
            b.append(message.is_some());
        }
        _ => {}
    }
}
