//! VARIANT text: JSON checked to be one value and made compact (whitespace outside strings
//! dropped), as VARIANT columns and the rescued-data text store it.

use std::borrow::Cow;

use crate::error::DecodeErrorKind;

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
}
