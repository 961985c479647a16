//! Text forms that JSON records use for non-JSON types: base64 BINARY, `YYYY-MM-DD` DATE,
//! RFC 3339 TIMESTAMP and `YYYY-MM-DD[T ]HH:MM:SS[.ffffff]` TIMESTAMP_NTZ.

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use chrono::{DateTime, NaiveDate, NaiveDateTime};

use crate::error::DecodeErrorKind;

const PADDING_OPTIONAL: GeneralPurposeConfig =
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, PADDING_OPTIONAL);
const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, PADDING_OPTIONAL);

/// Decodes base64, standard or URL-safe alphabet, padded or not.
pub(crate) fn decode_base64(text: &str) -> Result<Vec<u8>, DecodeErrorKind> {
    let engine = if text.contains(['-', '_']) {
        &URL_SAFE
    } else {
        &STANDARD
    };
    engine
        .decode(text)
        .map_err(|e| DecodeErrorKind::InvalidBase64 {
            reason: e.to_string(),
        })
}

/// `YYYY-MM-DD` as days since 1970-01-01.
pub(crate) fn parse_date(text: &str) -> Result<i64, DecodeErrorKind> {
    let date =
        NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| DecodeErrorKind::InvalidDate {
            text: text.to_owned(),
        })?;
    Ok(date.signed_duration_since(NaiveDate::default()).num_days())
}

/// RFC 3339 text (with offset) as microseconds since the epoch.
pub(crate) fn parse_timestamp(text: &str) -> Result<i64, DecodeErrorKind> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_micros())
        .map_err(|_| DecodeErrorKind::InvalidTimestamp {
            text: text.to_owned(),
            expected: "RFC 3339, e.g. 2024-05-01T12:00:00Z",
        })
}

/// `YYYY-MM-DD[T ]HH:MM:SS[.ffffff]` (no offset) as microseconds since the epoch.
pub(crate) fn parse_timestamp_ntz(text: &str) -> Result<i64, DecodeErrorKind> {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f"))
        .map(|t| t.and_utc().timestamp_micros())
        .map_err(|_| DecodeErrorKind::InvalidTimestamp {
            text: text.to_owned(),
            expected: "YYYY-MM-DD[T ]HH:MM:SS[.ffffff]",
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_accepts_both_alphabets_with_or_without_padding() {
        assert_eq!(decode_base64("+/8="), Ok(vec![0xfb, 0xff]));
        assert_eq!(decode_base64("+/8"), Ok(vec![0xfb, 0xff]));
        assert_eq!(decode_base64("-_8"), Ok(vec![0xfb, 0xff]));
        assert_eq!(decode_base64("-_8="), Ok(vec![0xfb, 0xff]));
        assert!(matches!(
            decode_base64("not base64!"),
            Err(DecodeErrorKind::InvalidBase64 { .. })
        ));
    }

    #[test]
    fn dates_count_days_from_the_epoch() {
        assert_eq!(parse_date("1970-01-01"), Ok(0));
        assert_eq!(parse_date("1969-12-31"), Ok(-1));
        assert_eq!(parse_date("2024-03-01"), Ok(19783));
        assert!(matches!(
            parse_date("2024-02-30"),
            Err(DecodeErrorKind::InvalidDate { .. })
        ));
    }

    #[test]
    fn timestamps_parse_to_microseconds() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:01.5Z"), Ok(1_500_000));
        assert_eq!(parse_timestamp("1970-01-01T01:00:00+01:00"), Ok(0));
        assert!(parse_timestamp("1970-01-01 00:00:00").is_err());
        assert_eq!(parse_timestamp_ntz("1970-01-01T00:00:02"), Ok(2_000_000));
        assert_eq!(parse_timestamp_ntz("1970-01-01 00:00:00.000123"), Ok(123));
        assert!(matches!(
            parse_timestamp_ntz("1970-01-01T00:00:00Z"),
            Err(DecodeErrorKind::InvalidTimestamp { .. })
        ));
    }
}
