//! The fast table of a [`MessagePlan`](crate::plan::MessagePlan): for each small field
//! number, an 8-byte entry saying which wire type the field must arrive with and how to read
//! it, for the scalar fields whose conversion cannot fail except on the bytes themselves
//! (truncation, UTF-8). The decoder's inner loop reads a one- or two-byte tag, indexes this
//! table, compares the wire type and reads the value, with no search and no further branching
//! on the field's shape; everything else (unknown fields, oneof members, range-checked
//! integers, enums, VARIANT, nested fields, wrong wire types) takes the general path.

use crate::convert::Target;
use crate::error::{DecodeError, DecodeErrorKind, WireType};
use crate::plan::{FieldPlan, FieldShape};
use crate::proto_scalar::ProtoKind;
use crate::visit::Visitor;
use crate::wire::{zigzag32, zigzag64, Reader};

/// How to read one fast field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FastOp {
    /// Not a fast field: take the general path.
    None,
    /// double → DOUBLE.
    Double,
    /// float → FLOAT.
    Float,
    /// float → DOUBLE.
    FloatToDouble,
    /// int64 → BIGINT / TIMESTAMP[_NTZ].
    Int64,
    /// int32 → INT / BIGINT / DATE.
    Int32,
    /// sint64 → BIGINT / TIMESTAMP[_NTZ].
    Sint64,
    /// sint32 → INT / BIGINT / DATE.
    Sint32,
    /// uint32 → BIGINT.
    Uint32,
    /// fixed32 → BIGINT.
    Fixed32,
    /// sfixed32 → INT / BIGINT / DATE.
    Sfixed32,
    /// sfixed64 → BIGINT / TIMESTAMP[_NTZ].
    Sfixed64,
    /// bool → BOOLEAN.
    Bool,
    /// string → STRING.
    Str,
    /// bytes → BINARY.
    Bytes,
}

/// One entry of the fast table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FastEntry {
    /// The wire type bits the field must arrive with; `u8::MAX` for no fast field.
    pub(crate) wire: u8,
    pub(crate) op: FastOp,
    /// The column slot.
    pub(crate) slot: u32,
}

impl FastEntry {
    pub(crate) const NONE: FastEntry = FastEntry {
        wire: u8::MAX,
        op: FastOp::None,
        slot: 0,
    };

    /// The entry of `field`, if it can take the fast path.
    pub(crate) fn of(field: &FieldPlan) -> FastEntry {
        let FieldShape::Scalar(scalar) = &field.shape else {
            return FastEntry::NONE;
        };
        if field.oneof.is_some() {
            return FastEntry::NONE;
        }
        let int32_target = matches!(scalar.target, Target::Int | Target::BigInt | Target::Date);
        let int64_target = matches!(
            scalar.target,
            Target::BigInt | Target::Timestamp | Target::TimestampNtz
        );
        let op = match scalar.kind {
            ProtoKind::Double if scalar.target == Target::Double => FastOp::Double,
            ProtoKind::Float if scalar.target == Target::Float => FastOp::Float,
            ProtoKind::Float if scalar.target == Target::Double => FastOp::FloatToDouble,
            ProtoKind::Int64 if int64_target => FastOp::Int64,
            ProtoKind::Sint64 if int64_target => FastOp::Sint64,
            ProtoKind::Sfixed64 if int64_target => FastOp::Sfixed64,
            ProtoKind::Int32 if int32_target => FastOp::Int32,
            ProtoKind::Sint32 if int32_target => FastOp::Sint32,
            ProtoKind::Sfixed32 if int32_target => FastOp::Sfixed32,
            ProtoKind::Uint32 if scalar.target == Target::BigInt => FastOp::Uint32,
            ProtoKind::Fixed32 if scalar.target == Target::BigInt => FastOp::Fixed32,
            ProtoKind::Bool if scalar.target == Target::Boolean => FastOp::Bool,
            ProtoKind::String if scalar.target == Target::String => FastOp::Str,
            ProtoKind::Bytes if scalar.target == Target::Binary => FastOp::Bytes,
            _ => return FastEntry::NONE,
        };
        FastEntry {
            wire: wire_bits(scalar.kind.wire_type()),
            op,
            slot: u32::try_from(field.slot).unwrap_or(u32::MAX),
        }
    }

    /// Reads the value (the tag has been consumed and its wire type matched) and hands it
    /// to the visitor's typed method.
    #[inline(always)]
    pub(crate) fn visit<'a, V: Visitor<'a>>(
        self,
        reader: &mut Reader<'a>,
        visitor: &mut V,
    ) -> Result<(), DecodeError> {
        let slot = self.slot as usize;
        match self.op {
            FastOp::Double => visitor.double(slot, f64::from_bits(reader.read_fixed64()?)),
            FastOp::Float => visitor.float(slot, f32::from_bits(reader.read_fixed32()?)),
            FastOp::FloatToDouble => {
                visitor.double(slot, f64::from(f32::from_bits(reader.read_fixed32()?)))
            }
            FastOp::Int64 => visitor.int(slot, reader.read_varint()? as i64),
            FastOp::Int32 => visitor.int(slot, i64::from(reader.read_varint()? as i32)),
            FastOp::Sint64 => visitor.int(slot, zigzag64(reader.read_varint()?)),
            FastOp::Sint32 => visitor.int(slot, i64::from(zigzag32(reader.read_varint()? as u32))),
            FastOp::Uint32 => visitor.int(slot, i64::from(reader.read_varint()? as u32)),
            FastOp::Fixed32 => visitor.int(slot, i64::from(reader.read_fixed32()?)),
            FastOp::Sfixed32 => visitor.int(slot, i64::from(reader.read_fixed32()? as i32)),
            FastOp::Sfixed64 => visitor.int(slot, reader.read_fixed64()? as i64),
            FastOp::Bool => visitor.boolean(slot, reader.read_varint()? != 0),
            FastOp::Str => {
                let (bytes, offset) = reader.read_len_delimited()?;
                match utf8(bytes) {
                    Some(text) => visitor.string(slot, text),
                    None => return Err(DecodeError::at(DecodeErrorKind::InvalidUtf8, offset)),
                }
            }
            FastOp::Bytes => visitor.bytes(slot, reader.read_len_delimited()?.0),
            // Never in the table with a matching wire type; nothing to read.
            FastOp::None => {}
        }
        Ok(())
    }
}

/// `bytes` as text if it is UTF-8. Short ASCII strings (codes, flags, names: most string
/// columns) are recognised inline, without the call into the general validator.
#[inline(always)]
pub(crate) fn utf8(bytes: &[u8]) -> Option<&str> {
    if bytes.len() <= 32 && bytes.is_ascii() {
        // SAFETY: every byte is ASCII, and ASCII text is valid UTF-8.
        return Some(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    std::str::from_utf8(bytes).ok()
}

/// The low three tag bits of a wire type.
pub(crate) fn wire_bits(wire: WireType) -> u8 {
    match wire {
        WireType::Varint => 0,
        WireType::I64 => 1,
        WireType::Len => 2,
        WireType::SGroup => 3,
        WireType::EGroup => 4,
        WireType::I32 => 5,
    }
}
