//! Mode (d), "Avro into an Arrow RecordBatch": Sluice's `RecordBatchBuilder::append_avro` on
//! the same rows as the protobuf workloads, encoded as raw Avro datums by the `apache-avro`
//! crate under a writer schema derived from the table (nullable columns as `["null", T]`,
//! TIMESTAMP as timestamp-micros, DATE as date, STRUCT as records), beside apache-avro's
//! own datum decoder (to its value tree, no Arrow) on the same bytes.

#![allow(deprecated)] // apache-avro 0.22's datum functions: the encoding is the same

use std::hint::black_box;

use apache_avro::types::Value as Avro;
use apache_avro::Schema;
use serde_json::{json, Value as Json};
use sluice_zeroparser::{AvroPlan, Column, ColumnType, RecordBatchBuilder, TableSchema};

use crate::arrow_peers::batches;

/// The workload's rows as Avro: the writer schema's JSON and one datum per row; `None` if a
/// column type has no Avro form here (VARIANT, BINARY: the JSON rows leave them out).
pub struct AvroRows {
    pub schema_json: String,
    pub schema: Schema,
    pub datums: Vec<Vec<u8>>,
}

pub fn rows(table: &TableSchema, json_rows: &[String]) -> Option<AvroRows> {
    let mut names = 0;
    let fields: Vec<Json> = table
        .columns
        .iter()
        .map(|c| field_schema(c, &mut names))
        .collect::<Option<_>>()?;
    let schema_json = json!({"type": "record", "name": "Row", "fields": fields}).to_string();
    let schema = Schema::parse_str(&schema_json).ok()?;
    let datums = json_rows
        .iter()
        .map(|text| {
            let row: Json = serde_json::from_str(text).ok()?;
            let value = record_value(&table.columns, &row)?;
            apache_avro::to_avro_datum(&schema, value).ok()
        })
        .collect::<Option<_>>()?;
    Some(AvroRows {
        schema_json,
        schema,
        datums,
    })
}

fn field_schema(column: &Column, names: &mut usize) -> Option<Json> {
    let t = type_schema(&column.data_type, names)?;
    let t = if column.nullable {
        json!(["null", t])
    } else {
        t
    };
    Some(json!({"name": column.name, "type": t}))
}

fn type_schema(t: &ColumnType, names: &mut usize) -> Option<Json> {
    let nullable = |t: Json, null: bool| if null { json!(["null", t]) } else { t };
    Some(match t {
        ColumnType::TinyInt | ColumnType::SmallInt | ColumnType::Int => json!("int"),
        ColumnType::BigInt => json!("long"),
        ColumnType::Float => json!("float"),
        ColumnType::Double => json!("double"),
        ColumnType::String => json!("string"),
        ColumnType::Boolean => json!("boolean"),
        ColumnType::Date => json!({"type": "int", "logicalType": "date"}),
        ColumnType::Timestamp => json!({"type": "long", "logicalType": "timestamp-micros"}),
        ColumnType::TimestampNtz => {
            json!({"type": "long", "logicalType": "local-timestamp-micros"})
        }
        ColumnType::Binary | ColumnType::Variant => return None,
        ColumnType::Array {
            element,
            contains_null,
        } => {
            json!({"type": "array", "items": nullable(type_schema(element, names)?, *contains_null)})
        }
        ColumnType::Map {
            key,
            value,
            value_contains_null,
        } => {
            if **key != ColumnType::String {
                return None;
            }
            json!({"type": "map", "values": nullable(type_schema(value, names)?, *value_contains_null)})
        }
        ColumnType::Struct(columns) => {
            *names += 1;
            let name = format!("S{names}");
            let fields: Vec<Json> = columns
                .iter()
                .map(|c| field_schema(c, names))
                .collect::<Option<_>>()?;
            json!({"type": "record", "name": name, "fields": fields})
        }
    })
}

fn record_value(columns: &[Column], row: &Json) -> Option<Avro> {
    let fields = columns
        .iter()
        .map(|c| {
            let v = row.get(&c.name).unwrap_or(&Json::Null);
            Some((c.name.clone(), slot(&c.data_type, c.nullable, v)?))
        })
        .collect::<Option<_>>()?;
    Some(Avro::Record(fields))
}

fn slot(t: &ColumnType, nullable: bool, v: &Json) -> Option<Avro> {
    if !nullable {
        return value(t, v);
    }
    Some(match v {
        Json::Null => Avro::Union(0, Box::new(Avro::Null)),
        v => Avro::Union(1, Box::new(value(t, v)?)),
    })
}

fn value(t: &ColumnType, v: &Json) -> Option<Avro> {
    Some(match t {
        ColumnType::TinyInt | ColumnType::SmallInt | ColumnType::Int => {
            Avro::Int(i32::try_from(v.as_i64()?).ok()?)
        }
        ColumnType::BigInt => Avro::Long(v.as_i64()?),
        ColumnType::Float => Avro::Float(v.as_f64()? as f32),
        ColumnType::Double => Avro::Double(v.as_f64()?),
        ColumnType::String => Avro::String(v.as_str()?.to_owned()),
        ColumnType::Boolean => Avro::Boolean(v.as_bool()?),
        ColumnType::Date => Avro::Date(i32::try_from(v.as_i64()?).ok()?),
        ColumnType::Timestamp => Avro::TimestampMicros(v.as_i64()?),
        ColumnType::TimestampNtz => Avro::LocalTimestampMicros(v.as_i64()?),
        ColumnType::Binary | ColumnType::Variant => return None,
        ColumnType::Array {
            element,
            contains_null,
        } => Avro::Array(
            v.as_array()?
                .iter()
                .map(|e| slot(element, *contains_null, e))
                .collect::<Option<_>>()?,
        ),
        ColumnType::Map {
            value: values,
            value_contains_null,
            ..
        } => Avro::Map(
            v.as_object()?
                .iter()
                .map(|(k, e)| Some((k.clone(), slot(values, *value_contains_null, e)?)))
                .collect::<Option<_>>()?,
        ),
        ColumnType::Struct(columns) => record_value(columns, v)?,
    })
}

/// Sluice: every datum into Arrow through `builder` (kept across passes, see
/// [`arrow_peers::sluice`](crate::arrow_peers::sluice)), a batch finished at the end of
/// each of [`batches`]; returns the rows.
pub fn sluice(builder: &mut RecordBatchBuilder, plan: &AvroPlan, datums: &[Vec<u8>]) -> usize {
    let mut rows = 0;
    for chunk in batches(datums) {
        for datum in chunk {
            if builder.append_avro(plan, datum).is_ok() {
                rows += 1;
            }
        }
        black_box(builder.finish());
    }
    rows
}

/// apache-avro: every datum into its value tree; returns the datums decoded.
pub fn apache(schema: &Schema, datums: &[Vec<u8>]) -> usize {
    datums
        .iter()
        .filter(|d| {
            let mut reader = d.as_slice();
            black_box(apache_avro::from_avro_datum(schema, &mut reader, None)).is_ok()
        })
        .count()
}
