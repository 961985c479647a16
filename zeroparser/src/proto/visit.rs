//! [`ProtoPlan::visit`]: the allocation-free single pass over one protobuf record. Every
//! field the plan maps is decoded, converted to its column's representation and validated
//! exactly as for the Arrow path (wire types, varints, lengths, UTF-8, VARIANT JSON, integer
//! ranges, enum names, depth), then handed to a [`Visitor`] in wire order. Strings and bytes
//! borrow from the record, enum names from the plan.
//!
//! The visitor sees the wire, not the merged record: a singular field that occurs twice is
//! reported twice (the later one wins), a singular message that occurs twice is entered twice
//! (merge them), setting one member of a oneof first [`clear`](Visitor::clear)s the others,
//! and map entries come in arrival order, duplicates included (the later value wins). NOT
//! NULL columns are not checked here; `RecordBatchBuilder::append_proto` checks them.

use super::checks::{expect_wire, nested, wrong_wire, zero};
use super::fast::{FastEntry, FastShape, MESSAGE_WIRE};
use super::plan::{FieldPlan, FieldShape, MapPlan, MapValuePlan, MessagePlan, ProtoPlan};
use super::visitor::Visitor;
use super::wire::Reader;
use crate::error::{DecodeError, WireType};
use crate::path::Segment;
use crate::value::{render_key, Scalar, Value};

impl ProtoPlan {
    /// Decodes and validates `record`, handing every mapped field to `visitor`; allocates
    /// nothing (except for VARIANT text that needs compacting and enum numbers the
    /// descriptor does not name). On error the visitor has seen a prefix of the record.
    pub fn visit<'a, V: Visitor<'a>>(
        &'a self,
        record: &'a [u8],
        visitor: &mut V,
    ) -> Result<(), DecodeError> {
        let mut reader = Reader::new(record, 0);
        visit_message(&self.root, &mut reader, visitor, 0)
    }
}

/// Visits the fields of one message up to the end of `reader`.
#[inline]
pub(crate) fn visit_message<'a, V: Visitor<'a>>(
    plan: &'a MessagePlan,
    reader: &mut Reader<'a>,
    visitor: &mut V,
    depth: usize,
) -> Result<(), DecodeError> {
    while !reader.is_empty() {
        // Fast path: a short tag, a fast-table entry with the matching wire type (a message
        // field's entry: entered here, with the field's plan).
        if let Some((tag, len)) = reader.peek_short_tag() {
            if let Some(&entry) = plan.fast.get((tag >> 3) as usize) {
                if u32::from(entry.wire) == tag & 7 {
                    reader.advance(len);
                    if let Err(e) = entry.visit(reader, visitor) {
                        return Err(in_field_of(plan, tag >> 3, e));
                    }
                    continue;
                }
                if V::NESTED && u32::from(entry.wire) == (tag & 7 | u32::from(MESSAGE_WIRE)) {
                    if let Some(message) = fast_message(plan, entry) {
                        let at = (WireType::Len, reader.offset());
                        reader.advance(len);
                        if let Err(e) = enter_message(message, at, reader, visitor, depth) {
                            return Err(in_field_of(plan, tag >> 3, e));
                        }
                        continue;
                    }
                }
            }
        }
        let tag_offset = reader.offset();
        let (number, wire) = reader.read_tag()?;
        let Some(field) = plan.lookup(number) else {
            reader.skip_field(number, wire, tag_offset, depth)?;
            continue;
        };
        if let Some(members) = field.oneof.and_then(|i| plan.oneofs.get(i)) {
            for &slot in members.iter().filter(|&&slot| slot != field.slot) {
                visitor.clear(slot);
            }
        }
        if let FieldShape::Scalar(scalar) = &field.shape {
            if scalar.kind.wire_type() != wire {
                return Err(
                    wrong_wire(scalar.kind.wire_type(), wire, tag_offset).in_field(&field.name)
                );
            }
            match scalar.read_scalar(reader) {
                Ok(value) => visitor.scalar(field.slot, value),
                Err(e) => return Err(e.in_field(&field.name)),
            }
            continue;
        }
        visit_field(field, wire, tag_offset, reader, visitor, depth)
            .map_err(|e| e.in_field(&field.name))?;
    }
    Ok(())
}

/// The message field a fast-table entry names, as [`enter_message`] takes it: the general
/// path's `Message` and `RepeatedMessage` arms without looking the field up. `None` (an
/// entry naming no message field, which the plan's compile never makes) leaves the field to
/// the general path.
#[inline]
fn fast_message(plan: &MessagePlan, entry: FastEntry) -> Option<(&MessagePlan, usize, bool)> {
    match plan.fields.get(entry.slot as usize) {
        Some(FieldPlan {
            slot,
            shape: FieldShape::Message(message) | FieldShape::RepeatedMessage(message),
            ..
        }) => Some((message, *slot, entry.shape == FastShape::Element)),
        _ => None,
    }
}

/// Visits one message value of field `slot` (an element of a repeated field if `element`),
/// from the fast table or the general path alike.
#[inline]
fn enter_message<'a, V: Visitor<'a>>(
    (message, slot, element): (&'a MessagePlan, usize, bool),
    (wire, tag_offset): (WireType, usize),
    reader: &mut Reader<'a>,
    visitor: &mut V,
    depth: usize,
) -> Result<(), DecodeError> {
    let mut sub = nested(reader, wire, tag_offset, depth)?;
    if element {
        visitor.begin_element(slot);
    } else {
        visitor.begin_message(slot);
    }
    visit_message(message, &mut sub, visitor, depth + 1)?;
    visitor.end_message();
    Ok(())
}

/// Adds the name of field `number` to an error from the fast path.
#[cold]
fn in_field_of(plan: &MessagePlan, number: u32, error: DecodeError) -> DecodeError {
    match plan.lookup(number) {
        Some(field) => error.in_field(&field.name),
        None => error,
    }
}

fn visit_field<'a, V: Visitor<'a>>(
    field: &'a FieldPlan,
    wire: WireType,
    tag_offset: usize,
    reader: &mut Reader<'a>,
    visitor: &mut V,
    depth: usize,
) -> Result<(), DecodeError> {
    let slot = field.slot;
    match &field.shape {
        FieldShape::Scalar(scalar) => {
            expect_wire(scalar.kind.wire_type(), wire, tag_offset)?;
            visitor.scalar(slot, scalar.read_scalar(reader)?);
        }
        FieldShape::Message(message) => {
            enter_message(
                (message, slot, false),
                (wire, tag_offset),
                reader,
                visitor,
                depth,
            )?;
        }
        FieldShape::RepeatedScalar(scalar) => {
            // Error paths index elements within this occurrence of the field.
            if wire == WireType::Len && scalar.kind.packable() {
                let mut packed = reader.read_sub_reader()?;
                let mut index = 0;
                while !packed.is_empty() {
                    let item = scalar
                        .read_scalar(&mut packed)
                        .map_err(|e| e.within(Segment::Index(index)))?;
                    visitor.element(slot, item);
                    index += 1;
                }
            } else {
                expect_wire(scalar.kind.wire_type(), wire, tag_offset)?;
                let item = scalar
                    .read_scalar(reader)
                    .map_err(|e| e.within(Segment::Index(0)))?;
                visitor.element(slot, item);
            }
        }
        FieldShape::RepeatedMessage(message) => {
            enter_message(
                (message, slot, true),
                (wire, tag_offset),
                reader,
                visitor,
                depth,
            )?;
        }
        FieldShape::Map(map) => {
            let sub = nested(reader, wire, tag_offset, depth)?;
            visit_entry(slot, map, sub, tag_offset, visitor, depth + 1)?;
        }
    }
    Ok(())
}

/// The key of a map entry: field 1, last occurrence wins; absent: the zero value.
fn entry_key<'a>(
    map: &'a MapPlan,
    mut reader: Reader<'a>,
    entry_offset: usize,
    depth: usize,
) -> Result<Scalar<'a>, DecodeError> {
    let mut key = None;
    while !reader.is_empty() {
        let tag_offset = reader.offset();
        let (number, wire) = reader.read_tag()?;
        if number == 1 {
            let value = expect_wire(map.key.kind.wire_type(), wire, tag_offset)
                .and_then(|()| map.key.read_scalar(&mut reader))
                .map_err(|e| e.within(Segment::MapKey))?;
            key = Some(value);
        } else {
            reader.skip_field(number, wire, tag_offset, depth)?;
        }
    }
    match key {
        Some(key) => Ok(key),
        None => zero(&map.key, entry_offset).map_err(|e| e.within(Segment::MapKey)),
    }
}

fn key_segment(key: &Scalar<'_>) -> Segment {
    Segment::Key(render_key(&Value::from(key.clone())))
}

/// Visits one map entry: key = field 1, value = field 2, last occurrence wins (messages
/// merge), absent ones get the zero value.
fn visit_entry<'a, V: Visitor<'a>>(
    slot: usize,
    map: &'a MapPlan,
    mut reader: Reader<'a>,
    entry_offset: usize,
    visitor: &mut V,
    depth: usize,
) -> Result<(), DecodeError> {
    match &map.value {
        MapValuePlan::Scalar(scalar) => {
            let mut key: Option<Scalar<'a>> = None;
            let mut value: Option<Scalar<'a>> = None;
            while !reader.is_empty() {
                let tag_offset = reader.offset();
                let (number, wire) = reader.read_tag()?;
                match number {
                    1 => {
                        let k = expect_wire(map.key.kind.wire_type(), wire, tag_offset)
                            .and_then(|()| map.key.read_scalar(&mut reader))
                            .map_err(|e| e.within(Segment::MapKey))?;
                        key = Some(k);
                    }
                    2 => {
                        let v = expect_wire(scalar.kind.wire_type(), wire, tag_offset)
                            .and_then(|()| scalar.read_scalar(&mut reader))
                            .map_err(|e| match &key {
                                Some(key) => e.within(key_segment(key)),
                                None => e.within(Segment::MapValue),
                            })?;
                        value = Some(v);
                    }
                    _ => reader.skip_field(number, wire, tag_offset, depth)?,
                }
            }
            let key = match key {
                Some(key) => key,
                None => zero(&map.key, entry_offset).map_err(|e| e.within(Segment::MapKey))?,
            };
            let value = match value {
                Some(value) => value,
                None => zero(scalar, entry_offset).map_err(|e| e.within(key_segment(&key)))?,
            };
            visitor.map_entry(slot, key, value);
        }
        MapValuePlan::Message(message) => {
            // The key may follow the value on the wire: find it first.
            let key = entry_key(map, reader.clone(), entry_offset, depth)?;
            let segment = || key_segment(&key);
            visitor.begin_map_value(slot, key.clone());
            while !reader.is_empty() {
                let tag_offset = reader.offset();
                let (number, wire) = reader.read_tag()?;
                if number == 2 {
                    let mut sub = nested(&mut reader, wire, tag_offset, depth)
                        .map_err(|e| e.within(segment()))?;
                    visit_message(message, &mut sub, visitor, depth + 1)
                        .map_err(|e| e.within(segment()))?;
                } else {
                    reader.skip_field(number, wire, tag_offset, depth)?;
                }
            }
            visitor.end_message();
        }
    }
    Ok(())
}
