//! The Delta statistics of a file made of other files' rows (a compaction
//! that copies row groups instead of re-encoding them): `numRecords` and each
//! `nullCount` add up, each `minValues`/`maxValues` entry is the least/greatest
//! of the inputs' by the column's Delta type. A column whose entry any input
//! lacks is left out (unknown), as is one whose values cannot be compared
//! (BINARY, whose stats are escaped text; an unparsable value); leaving a
//! column out only costs readers a skip, a wrong bound would lose rows.
//!
//! Entries are keyed as deltalake writes them: by the column's physical name
//! under column mapping, else by its name; STRUCT columns nest.

use std::cmp::Ordering;
use std::collections::HashMap;

use chrono::NaiveDateTime;
use deltalake::kernel::{DataType, PrimitiveType, StructType};
use serde_json::{Map, Value};

/// Delta's `delta.columnMapping.physicalName` field metadata key.
const PHYSICAL_NAME: &str = "delta.columnMapping.physicalName";

/// The stats of one file holding every row of `inputs` (each a file's Delta stats JSON), or
/// `None` when an input has no stats or they do not parse (the file then has no stats).
pub fn merge(inputs: &[Option<String>], schema: &StructType) -> Option<String> {
    let parsed: Vec<Map<String, Value>> = inputs
        .iter()
        .map(|s| match serde_json::from_str(s.as_deref()?) {
            Ok(Value::Object(o)) => Some(o),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let first = parsed.first()?;
    let mut out = Map::new();
    let mut records = 0i64;
    for p in &parsed {
        records = records.checked_add(p.get("numRecords")?.as_i64()?)?;
    }
    out.insert("numRecords".into(), records.into());
    for (key, pick) in [
        ("minValues", Ordering::Less),
        ("maxValues", Ordering::Greater),
    ] {
        if let Some(v) = all_objects(&parsed, key).and_then(|o| bounds(&o, schema, pick)) {
            out.insert(key.into(), Value::Object(v));
        }
    }
    if let Some(v) = all_objects(&parsed, "nullCount").and_then(|o| counts(&o)) {
        out.insert("nullCount".into(), Value::Object(v));
    }
    if first.contains_key("tightBounds") {
        let tight = parsed
            .iter()
            .all(|p| p.get("tightBounds").and_then(Value::as_bool) == Some(true));
        out.insert("tightBounds".into(), tight.into());
    }
    serde_json::to_string(&Value::Object(out)).ok()
}

/// The `key` object of every input, if all have one.
fn all_objects<'a>(
    parsed: &'a [Map<String, Value>],
    key: &str,
) -> Option<Vec<&'a Map<String, Value>>> {
    parsed.iter().map(|p| p.get(key)?.as_object()).collect()
}

/// The fields of `schema` by the name their stats use (physical name, and name).
fn fields_by_stats_key(schema: &StructType) -> HashMap<&str, &DataType> {
    let mut by = HashMap::new();
    for f in schema.fields() {
        by.insert(f.name().as_str(), f.data_type());
        if let Some(deltalake::kernel::MetadataValue::String(p)) = f.metadata().get(PHYSICAL_NAME) {
            by.insert(p.as_str(), f.data_type());
        }
    }
    by
}

/// Per key present in every input: the bound `pick` prefers (`Less` = min).
fn bounds(
    inputs: &[&Map<String, Value>],
    schema: &StructType,
    pick: Ordering,
) -> Option<Map<String, Value>> {
    let fields = fields_by_stats_key(schema);
    let mut out = Map::new();
    for key in inputs.first()?.keys() {
        let Some(data_type) = fields.get(key.as_str()) else {
            continue;
        };
        let values: Option<Vec<&Value>> = inputs.iter().map(|i| i.get(key)).collect();
        let Some(values) = values else { continue };
        let merged = match data_type {
            DataType::Struct(inner) => {
                let objects: Option<Vec<&Map<String, Value>>> =
                    values.iter().map(|v| v.as_object()).collect();
                objects
                    .and_then(|o| bounds(&o, inner, pick))
                    .filter(|m| !m.is_empty())
                    .map(Value::Object)
            }
            DataType::Primitive(p) => {
                // Every value must compare (a lone one with itself): else the column is left out.
                let mut best = values[0];
                let mut comparable = compare(p, best, best).is_some();
                for v in &values[1..] {
                    match compare(p, v, best) {
                        Some(o) if o == pick => best = v,
                        Some(_) => {}
                        None => comparable = false,
                    }
                }
                comparable.then(|| best.clone())
            }
            _ => None,
        };
        if let Some(m) = merged {
            out.insert(key.clone(), m);
        }
    }
    Some(out)
}

/// `a` against `b` as values of `p` (`None`: not comparable, the column is left out).
fn compare(p: &PrimitiveType, a: &Value, b: &Value) -> Option<Ordering> {
    match p {
        PrimitiveType::Byte
        | PrimitiveType::Short
        | PrimitiveType::Integer
        | PrimitiveType::Long
        | PrimitiveType::Float
        | PrimitiveType::Double
        | PrimitiveType::Decimal(_) => match (a.as_i64(), b.as_i64()) {
            (Some(x), Some(y)) => Some(x.cmp(&y)),
            _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
        },
        // Compared as UTF-8 bytes, as Delta does; dates are fixed-width YYYY-MM-DD.
        PrimitiveType::String | PrimitiveType::Date => Some(a.as_str()?.cmp(b.as_str()?)),
        PrimitiveType::Boolean => Some(a.as_bool()?.cmp(&b.as_bool()?)),
        // deltalake omits a zero fraction ("…:05Z" vs "…:05.120Z"), so compare instants.
        PrimitiveType::Timestamp => {
            Some(instant(a, "%Y-%m-%dT%H:%M:%S%.fZ")?.cmp(&instant(b, "%Y-%m-%dT%H:%M:%S%.fZ")?))
        }
        PrimitiveType::TimestampNtz => {
            Some(instant(a, "%Y-%m-%d %H:%M:%S%.f")?.cmp(&instant(b, "%Y-%m-%d %H:%M:%S%.f")?))
        }
        // BINARY stats are escaped text; intervals and VOID have none.
        _ => None,
    }
}

fn instant(v: &Value, format: &str) -> Option<NaiveDateTime> {
    NaiveDateTime::parse_from_str(v.as_str()?, format).ok()
}

/// Per key present in every input: the sum of the counts (STRUCTs nest).
fn counts(inputs: &[&Map<String, Value>]) -> Option<Map<String, Value>> {
    let mut out = Map::new();
    for (key, first) in inputs.first()?.iter() {
        let values: Option<Vec<&Value>> = inputs.iter().map(|i| i.get(key)).collect();
        let Some(values) = values else { continue };
        let merged = if first.is_object() {
            let objects: Option<Vec<&Map<String, Value>>> =
                values.iter().map(|v| v.as_object()).collect();
            objects.and_then(|o| counts(&o)).map(Value::Object)
        } else {
            values
                .iter()
                .try_fold(0i64, |sum, v| sum.checked_add(v.as_i64()?))
                .map(Value::from)
        };
        if let Some(m) = merged {
            out.insert(key.clone(), m);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use deltalake::kernel::{DataType, StructField, StructType};
    use serde_json::{json, Value};

    use super::merge;

    fn schema() -> StructType {
        StructType::try_new(vec![
            StructField::new("id", DataType::LONG, false),
            StructField::new("name", DataType::STRING, true),
            StructField::new("t", DataType::TIMESTAMP, true),
            StructField::new("ntz", DataType::TIMESTAMP_NTZ, true),
            StructField::new("raw", DataType::BINARY, true),
            StructField::new("x", DataType::DOUBLE, true),
            StructField::new(
                "s",
                DataType::try_struct_type([StructField::new("v", DataType::INTEGER, true)])
                    .expect("struct"),
                true,
            ),
        ])
        .expect("schema")
    }

    fn merged(inputs: &[Value]) -> Value {
        let raw: Vec<Option<String>> = inputs.iter().map(|v| Some(v.to_string())).collect();
        serde_json::from_str(&merge(&raw, &schema()).expect("stats")).expect("json")
    }

    #[test]
    fn counts_add_up_and_bounds_take_the_extremes_by_type() {
        let a = json!({"numRecords": 3,
            "minValues": {"id": 5, "name": "b", "t": "2026-12-05T07:00:05Z", "ntz": "2026-12-05 07:00:05",
                          "raw": "\\x01", "x": 1.5, "s": {"v": 9}},
            "maxValues": {"id": 9, "name": "zz", "t": "2026-12-05T07:00:09Z", "ntz": "2026-12-05 07:00:09",
                          "raw": "\\x09", "x": 2.5, "s": {"v": 10}},
            "nullCount": {"id": 0, "name": 1, "t": 0, "ntz": 0, "raw": 0, "x": 0, "s": {"v": 2}},
            "tightBounds": true});
        let b = json!({"numRecords": 4,
            "minValues": {"id": -1, "name": "a", "t": "2026-12-05T07:00:05.120Z", "ntz": "2026-12-05 07:00:04.500",
                          "raw": "\\x00", "x": -0.5, "s": {"v": 3}},
            "maxValues": {"id": 7, "name": "zzz", "t": "2026-12-05T07:00:09.500Z", "ntz": "2026-12-05 07:00:08",
                          "raw": "\\x10", "x": 1e10, "s": {"v": 4}},
            "nullCount": {"id": 0, "name": 2, "t": 1, "ntz": 0, "raw": 0, "x": 3, "s": {"v": 0}},
            "tightBounds": true});
        let m = merged(&[a, b]);
        assert_eq!(m["numRecords"], 7);
        assert_eq!(m["tightBounds"], true);
        assert_eq!(
            m["minValues"],
            // "…:05Z" is before "…:05.120Z" although it sorts after it as text.
            json!({"id": -1, "name": "a", "t": "2026-12-05T07:00:05Z", "ntz": "2026-12-05 07:00:04.500",
                   "x": -0.5, "s": {"v": 3}})
        );
        assert_eq!(
            m["maxValues"],
            json!({"id": 9, "name": "zzz", "t": "2026-12-05T07:00:09.500Z", "ntz": "2026-12-05 07:00:09",
                   "x": 1e10, "s": {"v": 10}})
        );
        assert_eq!(
            m["nullCount"],
            json!({"id": 0, "name": 3, "t": 1, "ntz": 0, "raw": 0, "x": 3, "s": {"v": 2}})
        );
    }

    #[test]
    fn a_column_any_input_lacks_or_cannot_compare_is_left_out() {
        let a = json!({"numRecords": 1, "minValues": {"id": 1, "name": "a"},
                       "maxValues": {"id": 1, "name": "a"}, "nullCount": {"id": 0, "name": 0}});
        let b = json!({"numRecords": 1, "minValues": {"id": 2},
                       "maxValues": {"id": 2, "t": "not a time"}, "nullCount": {"id": 0}});
        let m = merged(&[a, b]);
        assert_eq!(m["minValues"], json!({"id": 1}));
        assert_eq!(m["maxValues"], json!({"id": 2}));
        assert_eq!(m["nullCount"], json!({"id": 0}));
        assert!(m.get("tightBounds").is_none());
        let c = json!({"numRecords": 1, "minValues": {"t": "2026-12-05T07:00:05Z"},
                       "maxValues": {"t": "garbage"}, "nullCount": {}});
        let d = json!({"numRecords": 1, "minValues": {"t": "2026-12-05T07:00:06Z"},
                       "maxValues": {"t": "2026-12-05T07:00:06Z"}, "nullCount": {}});
        let m = merged(&[c, d]);
        assert_eq!(m["minValues"], json!({"t": "2026-12-05T07:00:05Z"}));
        assert_eq!(m["maxValues"], json!({}));
    }

    #[test]
    fn no_stats_on_any_input_means_none() {
        let some = Some(json!({"numRecords": 1}).to_string());
        assert_eq!(merge(&[some.clone(), None], &schema()), None);
        assert_eq!(merge(&[some, Some("{".into())], &schema()), None);
        assert_eq!(merge(&[], &schema()), None);
    }

    #[test]
    fn physical_names_key_the_stats_under_column_mapping() {
        let field = StructField::new("renamed", DataType::LONG, true).with_metadata([(
            super::PHYSICAL_NAME.to_string(),
            deltalake::kernel::MetadataValue::String("col-1".into()),
        )]);
        let schema = StructType::try_new(vec![field]).expect("schema");
        let raw = [
            Some(json!({"numRecords": 1, "minValues": {"col-1": 4}, "maxValues": {"col-1": 4}, "nullCount": {"col-1": 0}}).to_string()),
            Some(json!({"numRecords": 1, "minValues": {"col-1": 2}, "maxValues": {"col-1": 8}, "nullCount": {"col-1": 1}}).to_string()),
        ];
        let m: Value = serde_json::from_str(&merge(&raw, &schema).expect("stats")).expect("json");
        assert_eq!(m["minValues"], json!({"col-1": 2}));
        assert_eq!(m["maxValues"], json!({"col-1": 8}));
        assert_eq!(m["nullCount"], json!({"col-1": 1}));
    }
}
