//! The fast table of a `MessagePlan` (`proto::plan`): for each small field
//! number, an 8-byte entry saying which wire type the field must arrive with and how to read
//! it, for the scalar fields whose conversion cannot fail except on the bytes themselves
//! (truncation, UTF-8). The decoder's inner loop reads a one- or two-byte tag, indexes this
//! table, compares the wire type and reads the value, with no search and no further branching
//! on the field's shape. Repeated fields of the same kinds have entries too: strings and bytes
//! one element per tag, numbers and booleans as a packed run (their unpacked form, legal but
//! rare, takes the general path); their values go to the visitor's typed element methods.
//! Message fields (singular, and repeated ones one element per tag) have entries that
//! `proto::visit` enters itself, recursing into the field's plan. Everything else (unknown
//! fields, oneof members, range-checked integers, enums, VARIANT, maps, wrong wire types)
//! takes the general path.

use super::kind::ProtoKind;
use super::scalar::ScalarPlan;
use super::visitor::Visitor;
use super::wire::{zigzag32, zigzag64, Reader};
use crate::error::{DecodeError, DecodeErrorKind, WireType};
use crate::path::Segment;
use crate::schema::ColumnType;

/// Set in the `wire` of a message field's entry: a tag's wire type (0..=7) never equals it,
/// so the scalar fast path never takes the entry, and `proto::visit` tries message entries
/// only after that test fails (`wire == tag & 7 | MESSAGE_WIRE`).
pub(crate) const MESSAGE_WIRE: u8 = 0x08;

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
    /// A message field (STRUCT, or an element of an ARRAY of STRUCT): `slot` is the field's
    /// index in its `MessagePlan::fields`, `wire` has [`MESSAGE_WIRE`] set; `proto::visit`
    /// enters it.
    Message,
}

/// Which of the visitor's methods a fast field's values go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FastShape {
    /// A singular field: the typed scalar methods.
    Singular,
    /// One element of a repeated field per tag: the typed element methods.
    Element,
    /// A packed run of elements of a repeated field (wire type LEN).
    Packed,
}

/// One entry of the fast table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FastEntry {
    /// The wire type bits the field must arrive with ([`MESSAGE_WIRE`] set for a message
    /// field); `u8::MAX` for no fast field.
    pub(crate) wire: u8,
    pub(crate) op: FastOp,
    pub(crate) shape: FastShape,
    /// The column slot.
    pub(crate) slot: u32,
}

impl FastEntry {
    pub(crate) const NONE: FastEntry = FastEntry {
        wire: u8::MAX,
        op: FastOp::None,
        shape: FastShape::Singular,
        slot: 0,
    };

    /// The entry of a repeated scalar field whose elements are `scalar`, filling the ARRAY
    /// column `slot`: packed runs for packable kinds, one element per tag for strings and
    /// bytes.
    pub(crate) fn repeated(scalar: &ScalarPlan, slot: usize) -> FastEntry {
        let entry = FastEntry::of(scalar, slot);
        if entry.op == FastOp::None {
            return FastEntry::NONE;
        }
        if scalar.kind.packable() {
            FastEntry {
                wire: WireType::Len.bits(),
                shape: FastShape::Packed,
                ..entry
            }
        } else {
            FastEntry {
                shape: FastShape::Element,
                ..entry
            }
        }
    }

    /// The entry of a message field (not a oneof member) at `index` of its message's fields:
    /// a singular one fills a STRUCT column, a repeated one an ARRAY of STRUCT.
    pub(crate) fn message(index: usize, repeated: bool) -> FastEntry {
        FastEntry {
            wire: WireType::Len.bits() | MESSAGE_WIRE,
            op: FastOp::Message,
            shape: if repeated {
                FastShape::Element
            } else {
                FastShape::Singular
            },
            slot: u32::try_from(index).unwrap_or(u32::MAX),
        }
    }

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
            shape: FastShape::Singular,
            slot: u32::try_from(slot).unwrap_or(u32::MAX),
        }
    }

    /// Reads the value or values (the tag has been consumed and its wire type matched) and
    /// hands them to the visitor's typed methods. Singular fields are read inline; repeated
    /// ones out of line, so the hot loop of flat tables stays as small as it was.
    #[inline(always)]
    pub(crate) fn visit<'a, V: Visitor<'a>>(
        self,
        reader: &mut Reader<'a>,
        visitor: &mut V,
    ) -> Result<(), DecodeError> {
        if !V::NESTED || self.shape == FastShape::Singular {
            return self.read(reader, &mut Singular(visitor));
        }
        self.visit_repeated(reader, visitor)
    }

    /// The elements of a repeated field: one, or a packed run. Errors name the element's
    /// index within this occurrence of the field, as the general path's do.
    #[inline(never)]
    fn visit_repeated<'a, V: Visitor<'a>>(
        self,
        reader: &mut Reader<'a>,
        visitor: &mut V,
    ) -> Result<(), DecodeError> {
        if self.shape != FastShape::Packed {
            return self
                .read(reader, &mut Elements(visitor))
                .map_err(|e| e.within(Segment::Index(0)));
        }
        let mut packed = reader.read_sub_reader()?;
        let mut index = 0;
        while !packed.is_empty() {
            self.read(&mut packed, &mut Elements(&mut *visitor))
                .map_err(|e| e.within(Segment::Index(index)))?;
            index += 1;
        }
        Ok(())
    }

    /// Reads one value and hands it to `sink`'s typed method.
    #[inline(always)]
    fn read<'a, S: TypedSink<'a>>(
        self,
        reader: &mut Reader<'a>,
        sink: &mut S,
    ) -> Result<(), DecodeError> {
        let slot = self.slot as usize;
        match self.op {
            FastOp::Double => sink.double(slot, f64::from_bits(reader.read_fixed64()?)),
            FastOp::Float => sink.float(slot, f32::from_bits(reader.read_fixed32()?)),
            FastOp::FloatToDouble => {
                sink.double(slot, f64::from(f32::from_bits(reader.read_fixed32()?)))
            }
            FastOp::Int64 => sink.int(slot, reader.read_varint()? as i64),
            FastOp::Int32 => sink.int(slot, i64::from(reader.read_varint()? as i32)),
            FastOp::Sint64 => sink.int(slot, zigzag64(reader.read_varint()?)),
            FastOp::Sint32 => sink.int(slot, i64::from(zigzag32(reader.read_varint()? as u32))),
            FastOp::Uint32 => sink.int(slot, i64::from(reader.read_varint()? as u32)),
            FastOp::Fixed32 => sink.int(slot, i64::from(reader.read_fixed32()?)),
            FastOp::Sfixed32 => sink.int(slot, i64::from(reader.read_fixed32()? as i32)),
            FastOp::Sfixed64 => sink.int(slot, reader.read_fixed64()? as i64),
            FastOp::Bool => sink.boolean(slot, reader.read_varint()? != 0),
            FastOp::Str => {
                let (bytes, offset) = reader.read_len_delimited()?;
                match crate::utf8::text(bytes) {
                    Some(text) => sink.string(slot, text),
                    None => return Err(DecodeError::at(DecodeErrorKind::InvalidUtf8, offset)),
                }
            }
            FastOp::Bytes => sink.bytes(slot, reader.read_len_delimited()?.0),
            // Never in the table with a matching wire type; nothing to read.
            FastOp::None => {}
            // Never here either (a message's wire has `MESSAGE_WIRE` set, and `proto::visit`
            // enters it); were it read, its value would be skipped as an unknown field's.
            FastOp::Message => drop(reader.read_len_delimited()?),
        }
        Ok(())
    }
}

/// Where [`FastEntry::read`] hands a typed value: a visitor's singular-field methods
/// ([`Singular`]) or its element methods ([`Elements`]).
trait TypedSink<'a> {
    fn int(&mut self, slot: usize, value: i64);
    fn double(&mut self, slot: usize, value: f64);
    fn float(&mut self, slot: usize, value: f32);
    fn boolean(&mut self, slot: usize, value: bool);
    fn string(&mut self, slot: usize, value: &'a str);
    fn bytes(&mut self, slot: usize, value: &'a [u8]);
}

/// A visitor's singular-field methods.
struct Singular<'v, V>(&'v mut V);

/// A visitor's element methods.
struct Elements<'v, V>(&'v mut V);

/// Implements [`TypedSink`] for `$sink` with the visitor methods named.
macro_rules! typed_sink {
    ($sink:ident: $int:ident, $double:ident, $float:ident, $boolean:ident, $string:ident, $bytes:ident) => {
        impl<'a, V: Visitor<'a>> TypedSink<'a> for $sink<'_, V> {
            #[inline(always)]
            fn int(&mut self, slot: usize, value: i64) {
                self.0.$int(slot, value);
            }
            #[inline(always)]
            fn double(&mut self, slot: usize, value: f64) {
                self.0.$double(slot, value);
            }
            #[inline(always)]
            fn float(&mut self, slot: usize, value: f32) {
                self.0.$float(slot, value);
            }
            #[inline(always)]
            fn boolean(&mut self, slot: usize, value: bool) {
                self.0.$boolean(slot, value);
            }
            #[inline(always)]
            fn string(&mut self, slot: usize, value: &'a str) {
                self.0.$string(slot, value);
            }
            #[inline(always)]
            fn bytes(&mut self, slot: usize, value: &'a [u8]) {
                self.0.$bytes(slot, value);
            }
        }
    };
}

typed_sink!(Singular: int, double, float, boolean, string, bytes);
typed_sink!(Elements: element_int, element_double, element_float, element_bool, element_str, element_bytes);
