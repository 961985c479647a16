//! JSON strings and object keys converted to column values: integer and numeric strings,
//! base64 BINARY, DATE and TIMESTAMP text (forms in `json::text_formats`), `"true"` /
//! `"false"` map keys; and what a column's JSON value must look like, for messages.

use std::borrow::Cow;

use super::text_formats::{decode_base64, parse_date, parse_timestamp, parse_timestamp_ntz};
use crate::error::DecodeErrorKind;
use crate::schema::ColumnType;
use crate::value::{float_value, int_value, Value};

/// What a JSON value for `target` must look like, for messages.
pub(super) fn expected_json(target: &ColumnType) -> &'static str {
    match target {
        ColumnType::TinyInt | ColumnType::SmallInt | ColumnType::Int | ColumnType::BigInt => {
            "integer"
        }
        ColumnType::Float | ColumnType::Double => "number",
        ColumnType::String => "string",
        ColumnType::Variant => "any JSON value",
        ColumnType::Boolean => "bool",
        ColumnType::Binary => "base64 string",
        ColumnType::Date => "integer days or YYYY-MM-DD string",
        ColumnType::Timestamp => "integer microseconds or RFC 3339 string",
        ColumnType::TimestampNtz => "integer microseconds or YYYY-MM-DD HH:MM:SS string",
        ColumnType::Array { .. } => "array",
        ColumnType::Map { .. } | ColumnType::Struct(_) => "object",
    }
}

/// Converts a JSON integer to a value of scalar column `target`.
#[inline]
pub(super) fn integer_value(
    target: &ColumnType,
    value: i128,
) -> Result<Value<'static>, DecodeErrorKind> {
    match target {
        ColumnType::Float => float_value(value as f64).map(Value::Float),
        ColumnType::Double => Ok(Value::Double(value as f64)),
        target if target.int_range().is_some() => int_value(value, target).map(Value::Int),
        _ => Err(DecodeErrorKind::JsonWrongType {
            expected: expected_json(target),
            found: "number",
        }),
    }
}

/// Converts a JSON number with a fraction or exponent to a value of scalar column `target`
/// (an integral one, `3.0` or `1e3`, also to an integer column).
#[inline]
pub(super) fn double_value(
    target: &ColumnType,
    value: f64,
) -> Result<Value<'static>, DecodeErrorKind> {
    match target {
        ColumnType::Float => float_value(value).map(Value::Float),
        ColumnType::Double => Ok(Value::Double(value)),
        target if target.int_range().is_some() => {
            if value.is_finite() && value.fract() == 0.0 {
                integer_value(target, value as i128)
            } else {
                Err(DecodeErrorKind::JsonWrongType {
                    expected: "integer",
                    found: "number with a fraction",
                })
            }
        }
        _ => Err(DecodeErrorKind::JsonWrongType {
            expected: expected_json(target),
            found: "number",
        }),
    }
}

/// Converts a JSON string to a column value.
#[inline]
pub(super) fn string_value<'a>(
    target: &ColumnType,
    text: Cow<'a, str>,
) -> Result<Value<'a>, DecodeErrorKind> {
    match target {
        ColumnType::String | ColumnType::Variant => Ok(Value::Str(text)),
        ColumnType::TinyInt | ColumnType::SmallInt | ColumnType::Int | ColumnType::BigInt => {
            let value = text
                .parse::<i128>()
                .map_err(|_| DecodeErrorKind::JsonWrongType {
                    expected: "integer",
                    found: "string that is not an integer",
                })?;
            int_value(value, target).map(Value::Int)
        }
        ColumnType::Float | ColumnType::Double => {
            let value = match text.as_ref() {
                "NaN" => f64::NAN,
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                other => other.parse::<f64>().ok().filter(|v| v.is_finite()).ok_or(
                    DecodeErrorKind::JsonWrongType {
                        expected: "number",
                        found: "string that is not a number",
                    },
                )?,
            };
            if *target == ColumnType::Float {
                float_value(value).map(Value::Float)
            } else {
                Ok(Value::Double(value))
            }
        }
        ColumnType::Boolean => Err(DecodeErrorKind::JsonWrongType {
            expected: "bool",
            found: "string",
        }),
        ColumnType::Binary => decode_base64(&text).map(|bytes| Value::Bytes(Cow::Owned(bytes))),
        ColumnType::Date => parse_date(&text).map(Value::Int),
        ColumnType::Timestamp => parse_timestamp(&text).map(Value::Int),
        ColumnType::TimestampNtz => parse_timestamp_ntz(&text).map(Value::Int),
        ColumnType::Array { .. } | ColumnType::Map { .. } | ColumnType::Struct(_) => {
            Err(DecodeErrorKind::JsonWrongType {
                expected: expected_json(target),
                found: "string",
            })
        }
    }
}

/// Converts an object key to a MAP key value.
pub(super) fn key_value<'a>(
    target: Option<&ColumnType>,
    text: Cow<'a, str>,
) -> Result<Value<'a>, DecodeErrorKind> {
    match target {
        Some(ColumnType::Boolean) => match text.as_ref() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(DecodeErrorKind::JsonWrongType {
                expected: "\"true\" or \"false\" key",
                found: "other string",
            }),
        },
        Some(target) => string_value(target, text),
        None => Err(DecodeErrorKind::JsonWrongType {
            expected: "scalar map key type",
            found: "string",
        }),
    }
}
