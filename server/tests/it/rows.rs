//! The all-types test table: its columns, the deterministic value of row `i`
//! as JSON, the same row as a protobuf message, and Arrow cells turned back
//! into JSON for comparison.

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use base64::Engine as _;
use databricks_zerobus_ingest_sdk::{DynamicMessage, MessageDescriptor, Value as PValue};
use prost_reflect::MapKey;
use serde_json::{json, Value};

/// Columns of the all-types table (every type of the mapping).
pub const ALL_TYPES: &str = "id BIGINT NOT NULL, device STRING, ts TIMESTAMP, ntz TIMESTAMP_NTZ, \
     day DATE, temp DOUBLE, ratio FLOAT, small SMALLINT, tiny TINYINT, count INT, ok BOOLEAN, \
     raw BINARY, doc VARIANT, tags ARRAY<STRING>, readings ARRAY<BIGINT>, \
     attrs MAP<STRING,STRING>, codes MAP<INT,DOUBLE>, loc STRUCT<lat: DOUBLE, lon: DOUBLE>";

/// Row `i` as JSON (what a JSON producer sends; NULLs as `null`).
pub fn expected(i: i64) -> Value {
    let nulls = i % 5 == 0;
    let opt = |v: Value| if nulls { Value::Null } else { v };
    json!({
        "id": i,
        "device": opt(json!(format!("dev-{}", i % 97))),
        "ts": opt(json!(1_700_000_000_000_000i64 + i * 1_000)),
        "ntz": opt(json!(1_600_000_000_000_000i64 - i)),
        "day": opt(json!(19_000 + (i % 400) as i32)),
        "temp": opt(json!(i as f64 / 8.0)),
        "ratio": opt(json!((i % 1000) as f32 / 4.0)),
        "small": opt(json!((i % 30_000) as i16)),
        "tiny": opt(json!((i % 120) as i8 - 60)),
        "count": opt(json!((i * 7) as i32)),
        "ok": opt(json!(i % 2 == 0)),
        "raw": opt(json!(base64::engine::general_purpose::STANDARD.encode([i as u8, 0, 255]))),
        "doc": opt(json!({"k": i, "s": "x"})),
        "tags": if nulls { json!([]) } else { json!(["a", format!("t{}", i % 3)]) },
        "readings": json!((0..(i % 4)).map(|k| i * 10 + k).collect::<Vec<_>>()),
        "attrs": if nulls { json!({}) } else { json!({"site": format!("s{}", i % 11)}) },
        "codes": json!({ (i % 50).to_string(): (i as f64) * 0.5 }),
        "loc": opt(json!({"lat": 52.5 + (i % 100) as f64 / 100.0, "lon": 13.4})),
    })
}

/// Row `i` as a protobuf message of `desc` (a descriptor built from the
/// table's UC columns by the official SDK).
pub fn proto_row(desc: &MessageDescriptor, i: i64) -> DynamicMessage {
    let row = expected(i);
    let mut m = DynamicMessage::new(desc.clone());
    let set = |m: &mut DynamicMessage, name: &str, v: PValue| {
        let field = desc
            .get_field_by_name(name)
            .unwrap_or_else(|| panic!("field {name}"));
        m.set_field(&field, v);
    };
    set(&mut m, "id", PValue::I64(i));
    if !row["device"].is_null() {
        set(
            &mut m,
            "device",
            PValue::String(row["device"].as_str().expect("s").into()),
        );
        set(&mut m, "ts", PValue::I64(row["ts"].as_i64().expect("ts")));
        set(
            &mut m,
            "ntz",
            PValue::I64(row["ntz"].as_i64().expect("ntz")),
        );
        set(
            &mut m,
            "day",
            PValue::I32(row["day"].as_i64().expect("day") as i32),
        );
        set(
            &mut m,
            "temp",
            PValue::F64(row["temp"].as_f64().expect("temp")),
        );
        set(
            &mut m,
            "ratio",
            PValue::F32(row["ratio"].as_f64().expect("ratio") as f32),
        );
        set(
            &mut m,
            "small",
            PValue::I32(row["small"].as_i64().expect("small") as i32),
        );
        set(
            &mut m,
            "tiny",
            PValue::I32(row["tiny"].as_i64().expect("tiny") as i32),
        );
        set(
            &mut m,
            "count",
            PValue::I32(row["count"].as_i64().expect("count") as i32),
        );
        set(&mut m, "ok", PValue::Bool(row["ok"].as_bool().expect("ok")));
        set(&mut m, "raw", PValue::Bytes(vec![i as u8, 0, 255].into()));
        set(&mut m, "doc", PValue::String(row["doc"].to_string()));
        let tags = row["tags"].as_array().expect("tags").iter();
        set(
            &mut m,
            "tags",
            PValue::List(
                tags.map(|t| PValue::String(t.as_str().expect("t").into()))
                    .collect(),
            ),
        );
        let attrs = row["attrs"].as_object().expect("attrs").iter();
        set(
            &mut m,
            "attrs",
            PValue::Map(
                attrs
                    .map(|(k, v)| {
                        (
                            MapKey::String(k.clone()),
                            PValue::String(v.as_str().expect("v").into()),
                        )
                    })
                    .collect(),
            ),
        );
        let loc_field = desc.get_field_by_name("loc").expect("loc");
        let loc_desc = loc_field.kind().as_message().expect("loc message").clone();
        let mut loc = DynamicMessage::new(loc_desc.clone());
        for k in ["lat", "lon"] {
            let f = loc_desc.get_field_by_name(k).expect("lat/lon");
            loc.set_field(&f, PValue::F64(row["loc"][k].as_f64().expect("f")));
        }
        m.set_field(&loc_field, PValue::Message(loc));
    }
    let readings = row["readings"].as_array().expect("readings").iter();
    set(
        &mut m,
        "readings",
        PValue::List(
            readings
                .map(|r| PValue::I64(r.as_i64().expect("r")))
                .collect(),
        ),
    );
    let codes = row["codes"].as_object().expect("codes").iter();
    set(
        &mut m,
        "codes",
        PValue::Map(
            codes
                .map(|(k, v)| {
                    (
                        MapKey::I32(k.parse().expect("int key")),
                        PValue::F64(v.as_f64().expect("v")),
                    )
                })
                .collect(),
        ),
    );
    m
}

/// One Arrow cell as JSON, in the same conventions as [`expected`].
pub fn cell(array: &ArrayRef, row: usize) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    match array.data_type() {
        DataType::Int8 => json!(array.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => json!(array.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => json!(array.as_primitive::<Int32Type>().value(row)),
        DataType::Int64 => json!(array.as_primitive::<Int64Type>().value(row)),
        DataType::Float32 => json!(array.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => json!(array.as_primitive::<Float64Type>().value(row)),
        DataType::Date32 => json!(array.as_primitive::<Date32Type>().value(row)),
        DataType::Timestamp(_, _) => {
            json!(array.as_primitive::<TimestampMicrosecondType>().value(row))
        }
        DataType::Boolean => json!(array.as_boolean().value(row)),
        DataType::Utf8 => json!(array.as_string::<i32>().value(row)),
        DataType::Binary => {
            json!(base64::engine::general_purpose::STANDARD
                .encode(array.as_binary::<i32>().value(row)))
        }
        DataType::List(_) => {
            let values = array.as_list::<i32>().value(row);
            Value::Array((0..values.len()).map(|k| cell(&values, k)).collect())
        }
        DataType::Map(_, _) => {
            let entries = array.as_map().value(row);
            let keys = entries.column(0).clone();
            let vals = entries.column(1).clone();
            let mut out = serde_json::Map::new();
            for k in 0..entries.len() {
                let key = match cell(&keys, k) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(key, cell(&vals, k));
            }
            Value::Object(out)
        }
        DataType::Struct(fields) => {
            let s = array.as_struct();
            let mut out = serde_json::Map::new();
            for (f, col) in fields.iter().zip(s.columns()) {
                out.insert(f.name().clone(), cell(col, row));
            }
            Value::Object(out)
        }
        other => panic!("unexpected type {other}"),
    }
}

/// Every row of `batches` as JSON objects keyed by column name.
pub fn rows_as_json(batches: &[RecordBatch]) -> Vec<Value> {
    let mut out = Vec::new();
    for b in batches {
        let schema = b.schema();
        for r in 0..b.num_rows() {
            let mut obj = serde_json::Map::new();
            for (f, col) in schema.fields().iter().zip(b.columns()) {
                obj.insert(f.name().clone(), cell(col, r));
            }
            out.push(Value::Object(obj));
        }
    }
    out
}

/// The VARIANT column holds compact JSON text; normalise `expected` to it.
pub fn expected_as_stored(i: i64) -> Value {
    let mut v = expected(i);
    if let Some(doc) = v.get("doc").cloned() {
        v["doc"] = if doc.is_null() {
            Value::Null
        } else {
            json!(doc.to_string())
        };
    }
    v
}
