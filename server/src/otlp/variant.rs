//! OTLP values as the compact JSON text of VARIANT columns, written straight from the prost
//! messages: attributes (a `KeyValue` list) become an object (a repeated key: the last
//! wins when read back, as in JSON), `AnyValue`s their natural JSON — strings, booleans,
//! integers (exact, any i64), doubles (NaN and ±infinity, which JSON cannot hold, as the
//! strings `"NaN"`, `"Infinity"`, `"-Infinity"`), bytes as standard base64 strings,
//! arrays, key-value lists as objects; an empty `AnyValue` is `null`.

use std::io::Write;

use base64::Engine;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};

/// Writes `attributes` as a JSON object into `out` (cleared first) and returns it as text.
pub fn attributes<'a>(out: &'a mut Vec<u8>, attributes: &[KeyValue]) -> &'a str {
    out.clear();
    write_object(out, attributes);
    as_text(out)
}

/// Writes `value` as JSON into `out` (cleared first) and returns it as text.
pub fn any_value<'a>(out: &'a mut Vec<u8>, value: &AnyValue) -> &'a str {
    out.clear();
    write_value(out, value.value.as_ref());
    as_text(out)
}

fn as_text(out: &[u8]) -> &str {
    // Only JSON punctuation, serde_json's string escapes and numbers are written: UTF-8.
    std::str::from_utf8(out).unwrap_or("null")
}

fn write_object(out: &mut Vec<u8>, pairs: &[KeyValue]) {
    out.push(b'{');
    for (i, kv) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(out, &kv.key);
        out.push(b':');
        write_value(out, kv.value.as_ref().and_then(|v| v.value.as_ref()));
    }
    out.push(b'}');
}

fn write_string(out: &mut Vec<u8>, text: &str) {
    // Writing into a Vec does not fail; serde_json escapes as JSON requires.
    let _ = serde_json::to_writer(&mut *out, text);
}

fn write_value(out: &mut Vec<u8>, value: Option<&Value>) {
    match value {
        // A string-table index only means something inside a profile.
        None | Some(Value::StringValueStrindex(_)) => out.extend_from_slice(b"null"),
        Some(Value::StringValue(s)) => write_string(out, s),
        Some(Value::BoolValue(b)) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Some(Value::IntValue(i)) => {
            let _ = write!(out, "{i}");
        }
        Some(Value::DoubleValue(d)) => write_double(out, *d),
        Some(Value::BytesValue(b)) => {
            out.push(b'"');
            out.extend_from_slice(
                base64::engine::general_purpose::STANDARD
                    .encode(b)
                    .as_bytes(),
            );
            out.push(b'"');
        }
        Some(Value::ArrayValue(a)) => {
            out.push(b'[');
            for (i, v) in a.values.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, v.value.as_ref());
            }
            out.push(b']');
        }
        Some(Value::KvlistValue(kv)) => write_object(out, &kv.values),
    }
}

/// A double as JSON (NaN and infinities as strings).
pub fn write_double(out: &mut Vec<u8>, d: f64) {
    if d.is_nan() {
        out.extend_from_slice(b"\"NaN\"");
    } else if d.is_infinite() {
        out.extend_from_slice(if d > 0.0 {
            b"\"Infinity\""
        } else {
            b"\"-Infinity\""
        });
    } else {
        let _ = serde_json::to_writer(&mut *out, &d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{ArrayValue, KeyValueList};

    fn v(value: Value) -> Option<AnyValue> {
        Some(AnyValue { value: Some(value) })
    }

    fn kv(key: &str, value: Value) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: v(value),
            ..Default::default()
        }
    }

    #[test]
    fn attributes_become_one_json_object_of_every_value_kind() {
        let attrs = vec![
            kv("s", Value::StringValue("a\"b".into())),
            kv("b", Value::BoolValue(true)),
            kv("i", Value::IntValue(i64::MIN)),
            kv("d", Value::DoubleValue(1.5)),
            kv("nan", Value::DoubleValue(f64::NAN)),
            kv("bytes", Value::BytesValue(vec![0, 255])),
            kv(
                "arr",
                Value::ArrayValue(ArrayValue {
                    values: vec![
                        AnyValue { value: None },
                        AnyValue {
                            value: Some(Value::IntValue(2)),
                        },
                    ],
                }),
            ),
            kv(
                "kv",
                Value::KvlistValue(KeyValueList {
                    values: vec![kv("x", Value::DoubleValue(f64::NEG_INFINITY))],
                }),
            ),
        ];
        let mut buf = Vec::new();
        let text = attributes(&mut buf, &attrs).to_string();
        assert_eq!(
            text,
            r#"{"s":"a\"b","b":true,"i":-9223372036854775808,"d":1.5,"nan":"NaN","bytes":"AP8=","arr":[null,2],"kv":{"x":"-Infinity"}}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(parsed["i"], serde_json::json!(i64::MIN));
        assert_eq!(attributes(&mut buf, &[]), "{}");
    }
}
