//! The fast table of a `MessagePlan` (`proto::plan`): for each small field
//! number, an 8-byte entry saying which wire type the field must arrive with and how to read
//! it, for the scalar fields whose conversion cannot fail except on the bytes themselves
//! (truncation, UTF-8). The decoder's inner loop reads a one- or two-byte tag, indexes this
//! table, compares the wire type and reads the value, with no search and no further branching
//! on the field's shape; everything else (unknown fields, oneof members, range-checked
//! integers, enums, VARIANT, nested fields, wrong wire types) takes the general path.

use super::kind::ProtoKind;
use super::scalar::ScalarPlan;
use super::visitor::Visitor;
use super::wire::{zigzag32, zigzag64, Reader};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::schema::ColumnType;

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
#[derive(Debug, Clone, Copy, PartialEq)]
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

    /// The entry of a singular scalar field (not a oneof member) of `scalar` filling column
    /// `slot`, if it can take the fast path.
    pub(crate) fn of(scalar: &ScalarPlan, slot: usize) -> FastEntry {
        let target = &scalar.target;
        let int32_target = matches!(
            target,
            ColumnType::Int | ColumnType::BigInt | ColumnType::Date
        );
        let int64_target = matches!(
            target,
            ColumnType::BigInt | ColumnType::Timestamp | ColumnType::TimestampNtz
        );
        let op = match (scalar.kind, target) {
            (ProtoKind::Double, ColumnType::Double) => FastOp::Double,
            (ProtoKind::Float, ColumnType::Float) => FastOp::Float,
            (ProtoKind::Float, ColumnType::Double) => FastOp::FloatToDouble,
            (ProtoKind::Int64, _) if int64_target => FastOp::Int64,
            (ProtoKind::Sint64, _) if int64_target => FastOp::Sint64,
            (ProtoKind::Sfixed64, _) if int64_target => FastOp::Sfixed64,
            (ProtoKind::Int32, _) if int32_target => FastOp::Int32,
            (ProtoKind::Sint32, _) if int32_target => FastOp::Sint32,
            (ProtoKind::Sfixed32, _) if int32_target => FastOp::Sfixed32,
            (ProtoKind::Uint32, ColumnType::BigInt) => FastOp::Uint32,
            (ProtoKind::Fixed32, ColumnType::BigInt) => FastOp::Fixed32,
            (ProtoKind::Bool, ColumnType::Boolean) => FastOp::Bool,
            (ProtoKind::String, ColumnType::String) => FastOp::Str,
            (ProtoKind::Bytes, ColumnType::Binary) => FastOp::Bytes,
            _ => return FastEntry::NONE,
        };
        FastEntry {
            wire: scalar.kind.wire_type().bits(),
            op,
            slot: u32::try_from(slot).unwrap_or(u32::MAX),
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
fn utf8(bytes: &[u8]) -> Option<&str> {
    if bytes.len() <= 32 && bytes.is_ascii() {
        // SAFETY: every byte is ASCII, and ASCII text is valid UTF-8.
        return Some(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    std::str::from_utf8(bytes).ok()
}
