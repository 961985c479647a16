//! Range checks shared by the protobuf and JSON decoders: an integer for an integer-valued
//! column (TINYINT … BIGINT, DATE, TIMESTAMP[_NTZ]) and a double narrowed to FLOAT.

use crate::error::DecodeErrorKind;
use crate::schema::ColumnType;

/// Range-checks an integer for an integer-valued column type.
#[inline]
pub(crate) fn int_value(value: i128, target: &ColumnType) -> Result<i64, DecodeErrorKind> {
    let (min, max) = target.int_range().unwrap_or((i64::MIN, i64::MAX));
    if value < i128::from(min) || value > i128::from(max) {
        return Err(DecodeErrorKind::OutOfRange {
            value: value.to_string(),
            target: target.primitive_name().unwrap_or("integer"),
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
            target: "FLOAT",
        });
    }
    Ok(narrowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_outside_the_target_range_are_rejected() {
        assert_eq!(int_value(127, &ColumnType::TinyInt), Ok(127));
        assert_eq!(
            int_value(300, &ColumnType::TinyInt),
            Err(DecodeErrorKind::OutOfRange {
                value: "300".into(),
                target: "TINYINT"
            })
        );
        assert!(int_value(i128::from(u64::MAX), &ColumnType::BigInt).is_err());
        assert!(int_value(i128::from(i32::MIN) - 1, &ColumnType::Date).is_err());
    }

    #[test]
    fn doubles_too_large_for_float_are_out_of_range() {
        assert!(float_value(1e300).is_err());
        assert_eq!(float_value(1.5), Ok(1.5));
        assert!(matches!(float_value(f64::INFINITY), Ok(f) if f.is_infinite()));
    }
}
