//! Rescued Avro fields as JSON text: a writer field the table has no column for is read
//! (by its writer type) and written as one JSON value — `null`, booleans and numbers as
//! such (the logical types over int and long as their numbers; a non-finite float as the
//! string `"NaN"`, `"Infinity"` or `"-Infinity"`), strings, enum symbols, uuids and
//! decimals (exact text) as strings, bytes and fixed as standard base64 strings, arrays as
//! arrays, maps and records as objects (map keys in datum order), a union as its branch's
//! value without a wrapper.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::reader::Reader;
use super::types::{Raw, Types};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::schema::MAX_DEPTH;

/// Reads one value of writer type `raw` and appends its JSON text to `out`.
pub(crate) fn render(
    types: &Types,
    raw: usize,
    reader: &mut Reader<'_>,
    out: &mut String,
    depth: usize,
) -> Result<(), DecodeError> {
    if depth > MAX_DEPTH {
        return Err(DecodeError::at(
            DecodeErrorKind::DepthExceeded { limit: MAX_DEPTH },
            reader.pos(),
        ));
    }
    match types.get(raw) {
        Raw::Null => out.push_str("null"),
        Raw::Boolean => out.push_str(if reader.boolean()? { "true" } else { "false" }),
        Raw::Int(_) => out.push_str(&reader.int()?.to_string()),
        Raw::Long(_) => out.push_str(&reader.long()?.to_string()),
        Raw::Float => number(out, f64::from(reader.float()?)),
        Raw::Double => number(out, reader.double()?),
        Raw::Bytes => base64(out, reader.bytes()?),
        Raw::Fixed(n) => base64(out, reader.take(*n)?),
        Raw::String | Raw::UuidString => string(out, reader.string()?),
        Raw::UuidFixed => string(out, &uuid_text(reader.take(16)?)),
        Raw::Decimal { fixed, scale } => string(out, &reader.decimal(*fixed, *scale)?),
        Raw::Enum(symbols) => string(out, reader.symbol(symbols)?),
        Raw::Array(items) => {
            let min_item = types.min_size(*items, &mut Vec::new()).max(1);
            out.push('[');
            items_of(reader, min_item, out, |reader, out| {
                render(types, *items, reader, out, depth + 1)
            })?;
            out.push(']');
        }
        Raw::Map(values) => {
            out.push('{');
            items_of(reader, 1, out, |reader, out| {
                string(out, reader.string()?);
                out.push(':');
                render(types, *values, reader, out, depth + 1)
            })?;
            out.push('}');
        }
        Raw::Record { fields, .. } => {
            out.push('{');
            for (i, (name, field)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(out, name);
                out.push(':');
                render(types, *field, reader, out, depth + 1)?;
            }
            out.push('}');
        }
        Raw::Union(branches) => {
            let branch = *reader.branch(branches)?;
            render(types, branch, reader, out, depth + 1)?;
        }
        // Refused by the compile; kept total.
        Raw::Unsupported(_) => out.push_str("null"),
    }
    Ok(())
}

/// Reads the blocks of an array or map, writing each item with `item`, commas between.
fn items_of(
    reader: &mut Reader<'_>,
    min_item: usize,
    out: &mut String,
    mut item: impl FnMut(&mut Reader<'_>, &mut String) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let mut first = true;
    loop {
        let count = reader.block(min_item)?;
        if count == 0 {
            return Ok(());
        }
        for _ in 0..count {
            if !first {
                out.push(',');
            }
            first = false;
            item(reader, out)?;
        }
    }
}

fn number(out: &mut String, value: f64) {
    if value.is_finite() {
        out.push_str(
            &serde_json::Number::from_f64(value).map_or_else(|| "0".into(), |n| n.to_string()),
        );
    } else if value.is_nan() {
        out.push_str("\"NaN\"");
    } else if value > 0.0 {
        out.push_str("\"Infinity\"");
    } else {
        out.push_str("\"-Infinity\"");
    }
}

fn string(out: &mut String, text: &str) {
    // Serialising a string cannot fail; the fallback keeps the text valid JSON anyway.
    out.push_str(&serde_json::to_string(text).unwrap_or_else(|_| String::from("\"\"")));
}

fn base64(out: &mut String, bytes: &[u8]) {
    out.push('"');
    STANDARD.encode_string(bytes, out);
    out.push('"');
}

/// 16 bytes as a lower-case 8-4-4-4-12 UUID.
pub(crate) fn uuid_text(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(36);
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(b & 0x0F), 16).unwrap_or('0'));
    }
    out
}
