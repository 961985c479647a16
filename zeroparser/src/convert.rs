//! Conversions shared by the protobuf and JSON decoders: the scalar column types as decode
//! targets, integer range checks, and VARIANT text (validated, made compact).

use std::borrow::Cow;

use crate::error::DecodeErrorKind;
use crate::schema::ColumnType;

/// A scalar column type as the target of a decoded value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    Float,
    Double,
    String,
    Variant,
    Boolean,
    Binary,
    Date,
    Timestamp,
    TimestampNtz,
}

impl Target {
    /// The target of a scalar column type; `None` for ARRAY / MAP / STRUCT.
    pub(crate) fn of(data_type: &ColumnType) -> Option<Target> {
        Some(match data_type {
            ColumnType::TinyInt => Target::TinyInt,
            ColumnType::SmallInt => Target::SmallInt,
            ColumnType::Int => Target::Int,
            ColumnType::BigInt => Target::BigInt,
            ColumnType::Float => Target::Float,
            ColumnType::Double => Target::Double,
            ColumnType::String => Target::String,
            ColumnType::Variant => Target::Variant,
            ColumnType::Boolean => Target::Boolean,
            ColumnType::Binary => Target::Binary,
            ColumnType::Date => Target::Date,
            ColumnType::Timestamp => Target::Timestamp,
            ColumnType::TimestampNtz => Target::TimestampNtz,
            ColumnType::Array { .. } | ColumnType::Map { .. } | ColumnType::Struct(_) => {
                return None
            }
        })
    }

    /// The SQL name, for messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Target::TinyInt => "TINYINT",
            Target::SmallInt => "SMALLINT",
            Target::Int => "INT",
            Target::BigInt => "BIGINT",
            Target::Float => "FLOAT",
            Target::Double => "DOUBLE",
            Target::String => "STRING",
            Target::Variant => "VARIANT",
            Target::Boolean => "BOOLEAN",
            Target::Binary => "BINARY",
            Target::Date => "DATE",
            Target::Timestamp => "TIMESTAMP",
            Target::TimestampNtz => "TIMESTAMP_NTZ",
        }
    }

    /// The inclusive range of an integer-valued target (DATE in days, timestamps in µs).
    pub(crate) fn int_range(self) -> Option<(i64, i64)> {
        Some(match self {
            Target::TinyInt => (i8::MIN.into(), i8::MAX.into()),
            Target::SmallInt => (i16::MIN.into(), i16::MAX.into()),
            Target::Int | Target::Date => (i32::MIN.into(), i32::MAX.into()),
            Target::BigInt | Target::Timestamp | Target::TimestampNtz => (i64::MIN, i64::MAX),
            _ => return None,
        })
    }
}

/// Range-checks an integer for an integer-valued target.
pub(crate) fn int_value(value: i128, target: Target) -> Result<i64, DecodeErrorKind> {
    let (min, max) = target.int_range().unwrap_or((i64::MIN, i64::MAX));
    if value < i128::from(min) || value > i128::from(max) {
        return Err(DecodeErrorKind::OutOfRange {
            value: value.to_string(),
            target: target.name(),
        });
    }
    Ok(i64::try_from(value).unwrap_or_default())
}

/// Narrows a double to FLOAT; finite values beyond f32's range are out of range.
pub(crate) fn float_value(value: f64) -> Result<f32, DecodeErrorKind> {
    let narrowed = value as f32;
    if value.is_finite() && !narrowed.is_finite() {
        return Err(DecodeErrorKind::OutOfRange {
            value: value.to_string(),
            target: Target::Float.name(),
        });
    }
    Ok(narrowed)
}

/// Checks that `text` is one JSON value and returns it without insignificant whitespace
/// (borrowed when it already is compact).
pub(crate) fn variant_text(text: &str) -> Result<Cow<'_, str>, DecodeErrorKind> {
    serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|e| {
        DecodeErrorKind::InvalidVariant {
            reason: e.to_string(),
        }
    })?;
    Ok(compact_json(text))
}

/// Removes whitespace outside strings from valid JSON text.
pub(crate) fn compact_json(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut in_string = false;
    let mut escaped = false;
    let mut out: Option<String> = None;
    let mut copied_up_to = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b' ' | b'\t' | b'\n' | b'\r' => {
                let buffer = out.get_or_insert_with(|| String::with_capacity(text.len()));
                buffer.push_str(text.get(copied_up_to..i).unwrap_or(""));
                copied_up_to = i + 1;
            }
            _ => {}
        }
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut buffer) => {
            buffer.push_str(text.get(copied_up_to..).unwrap_or(""));
            Cow::Owned(buffer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_outside_the_target_range_are_rejected() {
        assert_eq!(int_value(127, Target::TinyInt), Ok(127));
        assert_eq!(
            int_value(300, Target::TinyInt),
            Err(DecodeErrorKind::OutOfRange {
                value: "300".into(),
                target: "TINYINT"
            })
        );
        assert!(int_value(i128::from(u64::MAX), Target::BigInt).is_err());
        assert!(int_value(i128::from(i32::MIN) - 1, Target::Date).is_err());
    }

    #[test]
    fn compact_json_drops_whitespace_outside_strings_only() {
        assert_eq!(
            compact_json("{ \"a b\" : [1, 2],\n\"c\\\" d\": \" x \" }"),
            "{\"a b\":[1,2],\"c\\\" d\":\" x \"}"
        );
        assert!(matches!(compact_json("[1,2]"), Cow::Borrowed(_)));
    }

    #[test]
    fn variant_text_must_be_one_json_value() {
        assert!(variant_text("{\"a\": 1}").is_ok());
        assert!(matches!(
            variant_text("{\"a\": }"),
            Err(DecodeErrorKind::InvalidVariant { .. })
        ));
        assert!(variant_text("1 2").is_err());
        assert!(variant_text("").is_err());
    }

    #[test]
    fn doubles_too_large_for_float_are_out_of_range() {
        assert!(float_value(1e300).is_err());
        assert_eq!(float_value(1.5), Ok(1.5));
        assert!(matches!(float_value(f64::INFINITY), Ok(f) if f.is_infinite()));
    }
}
