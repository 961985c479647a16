//! Rescue of unknown protobuf fields: one pass over the top-level tags of a record that has
//! already been decoded, collecting the fields whose numbers the plan does not map into the
//! rescued-data object text (format in `rescue`).
//!
//! It runs only for builders with the rescued-data column, after the decoder accepted the
//! record, so the default decode paths are untouched. The decoder reads the same top-level
//! tags and values (stricter: known fields must have their wire type), so a record it accepted
//! cannot fail here; errors are still returned, never assumed away.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::error::{DecodeError, WireType};
use crate::proto::wire::Reader;
use crate::proto::MessagePlan;

/// One unknown field's value, borrowed from the record.
#[derive(Clone, Copy)]
enum Unknown<'a> {
    /// Varint, fixed64 or fixed32, as an unsigned number.
    Number(u64),
    /// Length-delimited: written as base64.
    Bytes(&'a [u8]),
}

impl Unknown<'_> {
    fn write(self, out: &mut String) {
        match self {
            Unknown::Number(value) => push_decimal(out, value),
            Unknown::Bytes(bytes) => {
                out.push('"');
                STANDARD.encode_string(bytes, out);
                out.push('"');
            }
        }
    }
}

/// Appends `value` in decimal (without the formatting machinery: this runs per field).
fn push_decimal(out: &mut String, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        if let Some(digit) = digits.get_mut(at) {
            *digit = b'0' + (value % 10) as u8;
        }
        value /= 10;
        if value == 0 || at == 0 {
            break;
        }
    }
    for &digit in digits.get(at..).unwrap_or_default() {
        out.push(char::from(digit));
    }
}

/// The rescued-data text of `record`'s top-level fields that `plan` does not map, or `None`
/// if it has none. Allocates nothing for a record without such fields.
pub(crate) fn rescue_unknown(
    plan: &MessagePlan,
    record: &[u8],
) -> Result<Option<String>, DecodeError> {
    // (field number, value) in wire order.
    let mut found: Vec<(u32, Unknown<'_>)> = Vec::new();
    let mut reader = Reader::new(record, 0);
    while !reader.is_empty() {
        let tag_offset = reader.offset();
        let (number, wire) = reader.read_tag()?;
        if plan.lookup(number).is_some() {
            reader.skip_field(number, wire, tag_offset, 0)?;
            continue;
        }
        let value = match wire {
            WireType::Varint => Unknown::Number(reader.read_varint()?),
            WireType::I64 => Unknown::Number(reader.read_fixed64()?),
            WireType::I32 => Unknown::Number(u64::from(reader.read_fixed32()?)),
            WireType::Len => Unknown::Bytes(reader.read_len_delimited()?.0),
            WireType::SGroup | WireType::EGroup => {
                reader.skip_field(number, wire, tag_offset, 0)?;
                continue;
            }
        };
        found.push((number, value));
    }
    if found.is_empty() {
        return Ok(None);
    }
    let mut out = String::with_capacity(16 * found.len());
    let mut write_member =
        |first: bool, members: &mut dyn Iterator<Item = &(u32, Unknown<'_>)>, count: usize| {
            let mut members = members.peekable();
            let Some(&&(number, _)) = members.peek() else {
                return;
            };
            out.push(if first { '{' } else { ',' });
            out.push('"');
            push_decimal(&mut out, u64::from(number));
            out.push_str("\":");
            if count > 1 {
                out.push('[');
            }
            for (j, (_, value)) in members.enumerate() {
                if j > 0 {
                    out.push(',');
                }
                value.write(&mut out);
            }
            if count > 1 {
                out.push(']');
            }
        };
    if let [only] = found.as_slice() {
        write_member(true, &mut std::iter::once(only), 1);
    } else {
        let (by_number, groups) = groups(&found);
        for (k, &(_, start, end)) in groups.iter().enumerate() {
            let positions = by_number.get(start..end).unwrap_or_default();
            let mut members = positions.iter().filter_map(|&i| found.get(i));
            write_member(k == 0, &mut members, positions.len());
        }
    }
    out.push('}');
    Ok(Some(out))
}

/// Groups the values in `found` by field number, in order of first occurrence, each group's
/// values in wire order (sorting, not hashing: O(n log n) for any input). Returns the
/// positions sorted by (number, position) and the groups as `(first position, start, end)`
/// ranges into them.
fn groups(found: &[(u32, Unknown<'_>)]) -> (Vec<usize>, Vec<(usize, usize, usize)>) {
    let mut by_number: Vec<usize> = (0..found.len()).collect();
    by_number.sort_by_key(|&i| (found.get(i).map_or(0, |f| f.0), i));
    let mut groups: Vec<(usize, usize, usize)> = Vec::new();
    let mut last = None;
    for (at, &i) in by_number.iter().enumerate() {
        let number = found.get(i).map(|f| f.0);
        match groups.last_mut() {
            Some(group) if number == last => group.2 = at + 1,
            _ => groups.push((i, at, at + 1)),
        }
        last = number;
    }
    groups.sort_by_key(|group| group.0);
    (by_number, groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_written_in_full() {
        for value in [0, 7, 10, 4_000_000_000, u64::MAX] {
            let mut out = String::new();
            push_decimal(&mut out, value);
            assert_eq!(out, value.to_string());
        }
    }
}
