//! Shared by the fuzz targets: Arrow rows as JSON values (floats as bit patterns, so NaN
//! compares equal to itself; binary as hex; map entries sorted by key).

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    TimestampMicrosecondType,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use serde_json::{json, Value as Json};

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn f64_json(v: f64) -> Json {
    json!(format!("f64:{:016x}", v.to_bits()))
}

pub fn f32_json(v: f32) -> Json {
    json!(format!("f32:{:08x}", v.to_bits()))
}

/// Sorts `[key, value]` pairs by the key's JSON text.
pub fn sort_pairs(pairs: &mut [Json]) {
    pairs.sort_by_key(|p| p.get(0).map(|k| k.to_string()).unwrap_or_default());
}

pub fn cell(array: &dyn Array, row: usize) -> Json {
    if array.is_null(row) {
        return Json::Null;
    }
    match array.data_type() {
        DataType::Int8 => json!(array.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => json!(array.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => json!(array.as_primitive::<Int32Type>().value(row)),
        DataType::Int64 => json!(array.as_primitive::<Int64Type>().value(row)),
        DataType::Date32 => json!(array.as_primitive::<Date32Type>().value(row)),
        DataType::Timestamp(..) => {
            json!(array.as_primitive::<TimestampMicrosecondType>().value(row))
        }
        DataType::Float32 => f32_json(array.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => f64_json(array.as_primitive::<Float64Type>().value(row)),
        DataType::Boolean => json!(array.as_boolean().value(row)),
        DataType::Utf8 => json!(array.as_string::<i32>().value(row)),
        DataType::Binary => json!(hex(array.as_binary::<i32>().value(row))),
        DataType::List(_) => {
            let list = array.as_list::<i32>().value(row);
            Json::Array((0..list.len()).map(|i| cell(list.as_ref(), i)).collect())
        }
        DataType::Map(..) => {
            let entries = array.as_map().value(row);
            let mut pairs: Vec<Json> = (0..entries.len())
                .map(|i| {
                    json!([
                        cell(entries.column(0).as_ref(), i),
                        cell(entries.column(1).as_ref(), i)
                    ])
                })
                .collect();
            sort_pairs(&mut pairs);
            Json::Array(pairs)
        }
        DataType::Struct(fields) => {
            let s = array.as_struct();
            Json::Object(
                fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| (f.name().clone(), cell(s.column(i).as_ref(), row)))
                    .collect(),
            )
        }
        other => panic!("unexpected type {other}"),
    }
}

/// Every row of a batch as a JSON object keyed by column name.
pub fn rows(batch: &RecordBatch) -> Vec<Json> {
    (0..batch.num_rows())
        .map(|row| {
            Json::Object(
                batch
                    .schema()
                    .fields()
                    .iter()
                    .enumerate()
                    .map(|(i, f)| (f.name().clone(), cell(batch.column(i).as_ref(), row)))
                    .collect(),
            )
        })
        .collect()
}
