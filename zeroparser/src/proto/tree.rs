//! Single-pass protobuf decoding of one record into the per-record value tree, following a
//! [`ProtoPlan`].
//!
//! Semantics: unknown field numbers are skipped (groups included); a singular scalar that
//! occurs again replaces the earlier value; a singular message that occurs again is merged
//! into the same slots; repeated scalars accept packed and unpacked encodings, mixed; map
//! entries with a missing key or value get the type's zero value; setting one member of a
//! oneof clears the others. Strings and bytes are borrowed from the record.

use super::checks::{expect_wire, nested, zero};
use super::plan::{FieldPlan, FieldShape, MapPlan, MapValuePlan, MessagePlan, ProtoPlan};
use super::wire::Reader;
use crate::error::{DecodeError, WireType};
use crate::path::Segment;
use crate::value::{render_key, Value};

/// Decodes `record` into one slot per top-level column.
pub(crate) fn decode_record<'a>(
    plan: &'a ProtoPlan,
    record: &'a [u8],
) -> Result<Vec<Value<'a>>, DecodeError> {
    let mut slots = vec![Value::Null; plan.root.slot_count];
    let mut reader = Reader::new(record, 0);
    decode_message(&plan.root, &mut reader, &mut slots, 0)?;
    Ok(slots)
}

fn decode_message<'a>(
    plan: &'a MessagePlan,
    reader: &mut Reader<'a>,
    slots: &mut [Value<'a>],
    depth: usize,
) -> Result<(), DecodeError> {
    while !reader.is_empty() {
        let tag_offset = reader.offset();
        let (number, wire) = reader.read_tag()?;
        let Some(field) = plan.lookup(number) else {
            reader.skip_field(number, wire, tag_offset, depth)?;
            continue;
        };
        if let Some(members) = field.oneof.and_then(|i| plan.oneofs.get(i)) {
            for &slot in members.iter().filter(|&&slot| slot != field.slot) {
                if let Some(other) = slots.get_mut(slot) {
                    *other = Value::Null;
                }
            }
        }
        let Some(slot) = slots.get_mut(field.slot) else {
            continue;
        };
        decode_field(field, wire, tag_offset, reader, slot, depth)
            .map_err(|e| e.in_field(&field.name))?;
    }
    fill_absent_repeated(plan, slots);
    Ok(())
}

/// Absent repeated and map fields of a present message are empty, not NULL.
fn fill_absent_repeated(plan: &MessagePlan, slots: &mut [Value<'_>]) {
    for &(slot, is_map) in &plan.repeated_slots {
        if let Some(value @ Value::Null) = slots.get_mut(slot) {
            *value = if is_map {
                Value::Map(Vec::new())
            } else {
                Value::List(Vec::new())
            };
        }
    }
}

fn decode_field<'a>(
    field: &'a FieldPlan,
    wire: WireType,
    tag_offset: usize,
    reader: &mut Reader<'a>,
    slot: &mut Value<'a>,
    depth: usize,
) -> Result<(), DecodeError> {
    match &field.shape {
        FieldShape::Scalar(scalar) => {
            expect_wire(scalar.kind.wire_type(), wire, tag_offset)?;
            *slot = scalar.read(reader)?;
        }
        FieldShape::Message(message) => {
            let mut sub = nested(reader, wire, tag_offset, depth)?;
            if !matches!(slot, Value::Struct(..)) {
                *slot = Value::empty_struct(message.slot_count, Some(tag_offset));
            }
            if let Value::Struct(fields, _) = slot {
                decode_message(message, &mut sub, fields, depth + 1)?;
            }
        }
        FieldShape::RepeatedScalar(scalar) => {
            let mut items = take_list(slot);
            if wire == WireType::Len && scalar.kind.packable() {
                let mut packed = reader.read_sub_reader()?;
                while !packed.is_empty() {
                    let item = scalar
                        .read(&mut packed)
                        .map_err(|e| e.within(Segment::Index(items.len())))?;
                    items.push(item);
                }
            } else {
                expect_wire(scalar.kind.wire_type(), wire, tag_offset)?;
                let item = scalar
                    .read(reader)
                    .map_err(|e| e.within(Segment::Index(items.len())))?;
                items.push(item);
            }
            *slot = Value::List(items);
        }
        FieldShape::RepeatedMessage(message) => {
            let mut items = take_list(slot);
            let index = items.len();
            let mut sub = nested(reader, wire, tag_offset, depth)
                .map_err(|e| e.within(Segment::Index(index)))?;
            let mut fields = vec![Value::Null; message.slot_count];
            decode_message(message, &mut sub, &mut fields, depth + 1)
                .map_err(|e| e.within(Segment::Index(index)))?;
            items.push(Value::Struct(fields, Some(tag_offset)));
            *slot = Value::List(items);
        }
        FieldShape::Map(map) => {
            let mut sub = nested(reader, wire, tag_offset, depth)?;
            let entry = decode_entry(map, &mut sub, tag_offset, depth + 1)?;
            let mut entries = match std::mem::replace(slot, Value::Null) {
                Value::Map(entries) => entries,
                _ => Vec::new(),
            };
            entries.push(entry);
            *slot = Value::Map(entries);
        }
    }
    Ok(())
}

/// Moves the list out of a slot (an empty one if the slot holds none yet); the caller puts
/// it back. On error the half-built record is dropped, so nothing needs restoring.
fn take_list<'a>(slot: &mut Value<'a>) -> Vec<Value<'a>> {
    match std::mem::replace(slot, Value::Null) {
        Value::List(items) => items,
        _ => Vec::new(),
    }
}

/// Decodes one map entry: key = field 1, value = field 2, last occurrence wins (messages
/// merge), absent ones get the zero value.
fn decode_entry<'a>(
    map: &'a MapPlan,
    reader: &mut Reader<'a>,
    entry_offset: usize,
    depth: usize,
) -> Result<(Value<'a>, Value<'a>), DecodeError> {
    let mut key: Option<Value<'a>> = None;
    let mut value: Option<Value<'a>> = None;
    let value_error = |key: &Option<Value<'_>>, e: DecodeError| match key {
        Some(key) => e.within(Segment::Key(render_key(key))),
        None => e.within(Segment::MapValue),
    };
    while !reader.is_empty() {
        let tag_offset = reader.offset();
        let (number, wire) = reader.read_tag()?;
        match (number, &map.value) {
            (1, _) => {
                expect_wire(map.key.kind.wire_type(), wire, tag_offset)
                    .and_then(|()| map.key.read(reader))
                    .map(|k| key = Some(k))
                    .map_err(|e| e.within(Segment::MapKey))?;
            }
            (2, MapValuePlan::Scalar(scalar)) => {
                expect_wire(scalar.kind.wire_type(), wire, tag_offset)
                    .and_then(|()| scalar.read(reader))
                    .map(|v| value = Some(v))
                    .map_err(|e| value_error(&key, e))?;
            }
            (2, MapValuePlan::Message(message)) => {
                let mut sub =
                    nested(reader, wire, tag_offset, depth).map_err(|e| value_error(&key, e))?;
                let slot = value.get_or_insert_with(|| {
                    Value::empty_struct(message.slot_count, Some(tag_offset))
                });
                if let Value::Struct(fields, _) = slot {
                    decode_message(message, &mut sub, fields, depth + 1)
                        .map_err(|e| value_error(&key, e))?;
                }
            }
            _ => reader.skip_field(number, wire, tag_offset, depth)?,
        }
    }
    let key = match key {
        Some(key) => key,
        None => zero(&map.key, entry_offset)
            .map(Value::from)
            .map_err(|e| e.within(Segment::MapKey))?,
    };
    let value = match value {
        Some(value) => value,
        None => match &map.value {
            MapValuePlan::Scalar(scalar) => zero(scalar, entry_offset)
                .map(Value::from)
                .map_err(|e| e.within(Segment::Key(render_key(&key))))?,
            MapValuePlan::Message(message) => {
                let mut value = Value::empty_struct(message.slot_count, Some(entry_offset));
                if let Value::Struct(fields, _) = &mut value {
                    fill_absent_repeated(message, fields);
                }
                value
            }
        },
    };
    Ok((key, value))
}
