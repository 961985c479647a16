//! Rescue of unknown protobuf fields: one pass over the top-level tags of a record that has
//! already been decoded, collecting the fields whose numbers the plan does not map into the
//! rescued-data object text (format in `rescue`).
//!
//! It runs only for builders with the rescued-data column, after the decoder accepted the
//! record, so the default decode paths are untouched. The decoder reads the same top-level
//! tags and values (stricter: known fields must have their wire type), so a record it accepted
//! cannot fail here; errors are still returned, never assumed away.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::error::{DecodeError, WireType};
use crate::plan::MessagePlan;
use crate::rescue::ObjectText;
use crate::wire::Reader;

/// The rescued-data text of `record`'s top-level fields that `plan` does not map, or `None`
/// if it has none.
pub(crate) fn rescue_unknown(
    plan: &MessagePlan,
    record: &[u8],
) -> Result<Option<String>, DecodeError> {
    // (field number, JSON text of each value in wire order), in order of first occurrence.
    let mut fields: Vec<(u32, Vec<String>)> = Vec::new();
    let mut position: HashMap<u32, usize> = HashMap::new();
    let mut reader = Reader::new(record, 0);
    while !reader.is_empty() {
        let tag_offset = reader.offset();
        let (number, wire) = reader.read_tag()?;
        if plan.lookup(number).is_some() {
            reader.skip_field(number, wire, tag_offset, 0)?;
            continue;
        }
        let value = match wire {
            WireType::Varint => reader.read_varint()?.to_string(),
            WireType::I64 => reader.read_fixed64()?.to_string(),
            WireType::I32 => reader.read_fixed32()?.to_string(),
            WireType::Len => {
                let (bytes, _) = reader.read_len_delimited()?;
                format!("\"{}\"", STANDARD.encode(bytes))
            }
            WireType::SGroup | WireType::EGroup => {
                reader.skip_field(number, wire, tag_offset, 0)?;
                continue;
            }
        };
        match position.entry(number) {
            Entry::Occupied(at) => {
                if let Some((_, values)) = fields.get_mut(*at.get()) {
                    values.push(value);
                }
            }
            Entry::Vacant(at) => {
                at.insert(fields.len());
                fields.push((number, vec![value]));
            }
        }
    }
    let mut object = ObjectText::default();
    for (number, values) in &fields {
        object.key(&number.to_string());
        match values.as_slice() {
            [one] => object.raw(one),
            many => {
                object.raw("[");
                object.raw(&many.join(","));
                object.raw("]");
            }
        }
    }
    Ok(object.finish())
}
