//! Protobuf scalar field types: which column types each may fill, what wire type each uses,
//! and reading one value off the wire straight into its column's representation.
//!
//! | column            | protobuf types                                                    |
//! |-------------------|-------------------------------------------------------------------|
//! | TINYINT/SMALLINT/INT | int32, sint32, sfixed32, uint32, fixed32, enum (range-checked) |
//! | BIGINT            | any integer type, enum (uint64/fixed64 above i64::MAX rejected)    |
//! | FLOAT             | float                                                             |
//! | DOUBLE            | double, float                                                     |
//! | STRING            | string, enum (value name)                                         |
//! | VARIANT           | string holding JSON text                                          |
//! | BOOLEAN           | bool                                                              |
//! | BINARY            | bytes                                                             |
//! | DATE              | 32-bit integer types (days since epoch)                           |
//! | TIMESTAMP[_NTZ]   | 64-bit integer types (microseconds since epoch)                   |

use std::borrow::Cow;
use std::sync::Arc;

use prost_types::field_descriptor_proto::Type;

use super::wire::{zigzag32, zigzag64, Reader};
use crate::error::{DecodeError, DecodeErrorKind, WireType};
use crate::schema::ColumnType;
use crate::value::{float_value, int_value, variant_text, Scalar, Value};

/// A protobuf field type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProtoKind {
    Double,
    Float,
    Int64,
    Uint64,
    Int32,
    Fixed64,
    Fixed32,
    Bool,
    String,
    Bytes,
    Uint32,
    Sfixed32,
    Sfixed64,
    Sint32,
    Sint64,
    Enum,
    Message,
    Group,
}

impl ProtoKind {
    /// The kind of a descriptor type.
    pub(crate) fn from_type(t: Type) -> ProtoKind {
        match t {
            Type::Double => ProtoKind::Double,
            Type::Float => ProtoKind::Float,
            Type::Int64 => ProtoKind::Int64,
            Type::Uint64 => ProtoKind::Uint64,
            Type::Int32 => ProtoKind::Int32,
            Type::Fixed64 => ProtoKind::Fixed64,
            Type::Fixed32 => ProtoKind::Fixed32,
            Type::Bool => ProtoKind::Bool,
            Type::String => ProtoKind::String,
            Type::Group => ProtoKind::Group,
            Type::Message => ProtoKind::Message,
            Type::Bytes => ProtoKind::Bytes,
            Type::Uint32 => ProtoKind::Uint32,
            Type::Enum => ProtoKind::Enum,
            Type::Sfixed32 => ProtoKind::Sfixed32,
            Type::Sfixed64 => ProtoKind::Sfixed64,
            Type::Sint32 => ProtoKind::Sint32,
            Type::Sint64 => ProtoKind::Sint64,
        }
    }

    /// The `.proto` spelling.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ProtoKind::Double => "double",
            ProtoKind::Float => "float",
            ProtoKind::Int64 => "int64",
            ProtoKind::Uint64 => "uint64",
            ProtoKind::Int32 => "int32",
            ProtoKind::Fixed64 => "fixed64",
            ProtoKind::Fixed32 => "fixed32",
            ProtoKind::Bool => "bool",
            ProtoKind::String => "string",
            ProtoKind::Bytes => "bytes",
            ProtoKind::Uint32 => "uint32",
            ProtoKind::Sfixed32 => "sfixed32",
            ProtoKind::Sfixed64 => "sfixed64",
            ProtoKind::Sint32 => "sint32",
            ProtoKind::Sint64 => "sint64",
            ProtoKind::Enum => "enum",
            ProtoKind::Message => "message",
            ProtoKind::Group => "group",
        }
    }

    /// The wire type of one value of this kind.
    pub(crate) fn wire_type(self) -> WireType {
        match self {
            ProtoKind::Int64
            | ProtoKind::Uint64
            | ProtoKind::Int32
            | ProtoKind::Bool
            | ProtoKind::Uint32
            | ProtoKind::Sint32
            | ProtoKind::Sint64
            | ProtoKind::Enum => WireType::Varint,
            ProtoKind::Double | ProtoKind::Fixed64 | ProtoKind::Sfixed64 => WireType::I64,
            ProtoKind::Float | ProtoKind::Fixed32 | ProtoKind::Sfixed32 => WireType::I32,
            ProtoKind::String | ProtoKind::Bytes | ProtoKind::Message => WireType::Len,
            ProtoKind::Group => WireType::SGroup,
        }
    }

    /// Whether repeated values of this kind may be packed into one LEN field.
    pub(crate) fn packable(self) -> bool {
        matches!(
            self.wire_type(),
            WireType::Varint | WireType::I64 | WireType::I32
        )
    }

    fn is_32_bit_integer(self) -> bool {
        matches!(
            self,
            ProtoKind::Int32
                | ProtoKind::Sint32
                | ProtoKind::Sfixed32
                | ProtoKind::Uint32
                | ProtoKind::Fixed32
        )
    }

    fn is_64_bit_integer(self) -> bool {
        matches!(
            self,
            ProtoKind::Int64
                | ProtoKind::Sint64
                | ProtoKind::Sfixed64
                | ProtoKind::Uint64
                | ProtoKind::Fixed64
        )
    }

    /// Whether a value of this kind may fill a column of `target`.
    pub(crate) fn can_fill(self, target: &ColumnType) -> bool {
        match target {
            ColumnType::TinyInt | ColumnType::SmallInt | ColumnType::Int => {
                self.is_32_bit_integer() || self == ProtoKind::Enum
            }
            ColumnType::BigInt => {
                self.is_32_bit_integer() || self.is_64_bit_integer() || self == ProtoKind::Enum
            }
            ColumnType::Float => self == ProtoKind::Float,
            ColumnType::Double => matches!(self, ProtoKind::Double | ProtoKind::Float),
            ColumnType::String => matches!(self, ProtoKind::String | ProtoKind::Enum),
            ColumnType::Variant => self == ProtoKind::String,
            ColumnType::Boolean => self == ProtoKind::Bool,
            ColumnType::Binary => self == ProtoKind::Bytes,
            ColumnType::Date => self.is_32_bit_integer(),
            ColumnType::Timestamp | ColumnType::TimestampNtz => self.is_64_bit_integer(),
            ColumnType::Array { .. } | ColumnType::Map { .. } | ColumnType::Struct(_) => false,
        }
    }
}

/// An enum's value names by number (for enum → STRING).
#[derive(Debug, Clone, Default)]
pub(crate) struct EnumNames {
    /// Sorted by number; for aliases the first declared name wins.
    by_number: Vec<(i32, String)>,
}

impl EnumNames {
    /// Builds the table from `(number, name)` pairs in declaration order.
    pub(crate) fn new(values: impl IntoIterator<Item = (i32, String)>) -> Self {
        let mut by_number: Vec<(i32, String)> = values.into_iter().collect();
        by_number.sort_by_key(|(number, _)| *number); // stable: first alias stays first
        by_number.dedup_by_key(|(number, _)| *number);
        Self { by_number }
    }

    fn name(&self, number: i32) -> Option<&str> {
        self.by_number
            .binary_search_by_key(&number, |(n, _)| *n)
            .ok()
            .and_then(|i| self.by_number.get(i))
            .map(|(_, name)| name.as_str())
    }

    /// Length of the longest name.
    pub(crate) fn longest(&self) -> usize {
        self.by_number
            .iter()
            .map(|(_, name)| name.len())
            .max()
            .unwrap_or(0)
    }
}

/// How to read one scalar field and convert it to its column.
#[derive(Debug, Clone)]
pub(crate) struct ScalarPlan {
    pub(crate) kind: ProtoKind,
    /// The column type it fills (a primitive type).
    pub(crate) target: ColumnType,
    /// Set for enum fields that fill a STRING column.
    pub(crate) enum_names: Option<Arc<EnumNames>>,
}

/// A value as it comes off the wire, before conversion.
enum Raw<'a> {
    Signed(i64),
    Unsigned(u64),
    Bool(bool),
    F32(f32),
    F64(f64),
    Bytes(&'a [u8]),
}

impl ScalarPlan {
    /// Reads one value (the tag has been read and its wire type checked) into the per-record
    /// value tree.
    pub(crate) fn read<'a>(&'a self, reader: &mut Reader<'a>) -> Result<Value<'a>, DecodeError> {
        self.read_scalar(reader).map(Value::from)
    }

    /// Reads one value and converts it to its column's representation: integers
    /// range-checked, enum numbers named, strings checked as UTF-8 (VARIANT as JSON). Enum
    /// names borrow from the plan, strings and bytes from the record.
    #[inline]
    pub(crate) fn read_scalar<'a>(
        &'a self,
        reader: &mut Reader<'a>,
    ) -> Result<Scalar<'a>, DecodeError> {
        let start = reader.offset();
        // The common pairs first, each a direct conversion; the rest go through `convert`.
        match (self.kind, &self.target) {
            (ProtoKind::Double, ColumnType::Double) => {
                return Ok(Scalar::Double(f64::from_bits(reader.read_fixed64()?)))
            }
            (ProtoKind::Float, ColumnType::Float) => {
                return Ok(Scalar::Float(f32::from_bits(reader.read_fixed32()?)))
            }
            (
                ProtoKind::Int64,
                ColumnType::BigInt | ColumnType::Timestamp | ColumnType::TimestampNtz,
            ) => return Ok(Scalar::Int(reader.read_varint()? as i64)),
            (ProtoKind::Int32, ColumnType::Int | ColumnType::BigInt | ColumnType::Date) => {
                return Ok(Scalar::Int(i64::from(reader.read_varint()? as i32)))
            }
            (ProtoKind::Bool, _) => return Ok(Scalar::Bool(reader.read_varint()? != 0)),
            (ProtoKind::String, ColumnType::String) => {
                let (bytes, offset) = reader.read_len_delimited()?;
                return match std::str::from_utf8(bytes) {
                    Ok(text) => Ok(Scalar::Str(Cow::Borrowed(text))),
                    Err(_) => Err(DecodeError::at(DecodeErrorKind::InvalidUtf8, offset)),
                };
            }
            (ProtoKind::Bytes, ColumnType::Binary) => {
                return Ok(Scalar::Bytes(reader.read_len_delimited()?.0));
            }
            _ => {}
        }
        let raw = match self.kind {
            ProtoKind::Int32 | ProtoKind::Enum => {
                Raw::Signed(i64::from(reader.read_varint()? as i32))
            }
            ProtoKind::Int64 => Raw::Signed(reader.read_varint()? as i64),
            ProtoKind::Uint32 => Raw::Unsigned(u64::from(reader.read_varint()? as u32)),
            ProtoKind::Uint64 => Raw::Unsigned(reader.read_varint()?),
            ProtoKind::Sint32 => Raw::Signed(i64::from(zigzag32(reader.read_varint()? as u32))),
            ProtoKind::Sint64 => Raw::Signed(zigzag64(reader.read_varint()?)),
            ProtoKind::Bool => Raw::Bool(reader.read_varint()? != 0),
            ProtoKind::Fixed32 => Raw::Unsigned(u64::from(reader.read_fixed32()?)),
            ProtoKind::Sfixed32 => Raw::Signed(i64::from(reader.read_fixed32()? as i32)),
            ProtoKind::Fixed64 => Raw::Unsigned(reader.read_fixed64()?),
            ProtoKind::Sfixed64 => Raw::Signed(reader.read_fixed64()? as i64),
            ProtoKind::Float => Raw::F32(f32::from_bits(reader.read_fixed32()?)),
            ProtoKind::Double => Raw::F64(f64::from_bits(reader.read_fixed64()?)),
            ProtoKind::String | ProtoKind::Bytes | ProtoKind::Message | ProtoKind::Group => {
                let (bytes, offset) = reader.read_len_delimited()?;
                return self
                    .convert(Raw::Bytes(bytes))
                    .map_err(|kind| DecodeError::at(kind, offset));
            }
        };
        self.convert(raw)
            .map_err(|kind| DecodeError::at(kind, start))
    }

    /// The value of a field that is absent where a value is required (a map entry's key or
    /// value): the type's zero value.
    pub(crate) fn zero(&self) -> Result<Scalar<'_>, DecodeErrorKind> {
        let raw = match self.kind.wire_type() {
            WireType::Len => Raw::Bytes(&[]),
            _ if self.kind == ProtoKind::Bool => Raw::Bool(false),
            _ if self.kind == ProtoKind::Float => Raw::F32(0.0),
            _ if self.kind == ProtoKind::Double => Raw::F64(0.0),
            _ => Raw::Signed(0),
        };
        self.convert(raw)
    }

    fn convert<'a>(&'a self, raw: Raw<'a>) -> Result<Scalar<'a>, DecodeErrorKind> {
        match (&self.target, raw) {
            (ColumnType::String, Raw::Signed(number)) => Ok(Scalar::Str(self.enum_name(number))),
            (target, Raw::Signed(value)) => int_value(i128::from(value), target).map(Scalar::Int),
            (target, Raw::Unsigned(value)) => int_value(i128::from(value), target).map(Scalar::Int),
            (_, Raw::Bool(value)) => Ok(Scalar::Bool(value)),
            (ColumnType::Float, Raw::F32(value)) => Ok(Scalar::Float(value)),
            (ColumnType::Float, Raw::F64(value)) => float_value(value).map(Scalar::Float),
            (_, Raw::F32(value)) => Ok(Scalar::Double(f64::from(value))),
            (_, Raw::F64(value)) => Ok(Scalar::Double(value)),
            (ColumnType::Binary, Raw::Bytes(bytes)) => Ok(Scalar::Bytes(bytes)),
            (target, Raw::Bytes(bytes)) => {
                let text = std::str::from_utf8(bytes).map_err(|_| DecodeErrorKind::InvalidUtf8)?;
                if *target == ColumnType::Variant {
                    Ok(Scalar::Str(variant_text(text)?))
                } else {
                    Ok(Scalar::Str(Cow::Borrowed(text)))
                }
            }
        }
    }

    /// The name of an enum number; numbers the descriptor does not know (open enums) are
    /// stored as their decimal text.
    fn enum_name(&self, number: i64) -> Cow<'_, str> {
        let number = i32::try_from(number).unwrap_or_default();
        match self
            .enum_names
            .as_ref()
            .and_then(|names| names.name(number))
        {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Owned(number.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(kind: ProtoKind, target: ColumnType) -> ScalarPlan {
        ScalarPlan {
            kind,
            target,
            enum_names: None,
        }
    }

    #[test]
    fn the_compatibility_table_follows_the_architecture() {
        assert!(ProtoKind::Uint32.can_fill(&ColumnType::TinyInt));
        assert!(!ProtoKind::Int64.can_fill(&ColumnType::Int));
        assert!(ProtoKind::Fixed64.can_fill(&ColumnType::BigInt));
        assert!(ProtoKind::Float.can_fill(&ColumnType::Double));
        assert!(!ProtoKind::Double.can_fill(&ColumnType::Float));
        assert!(ProtoKind::Enum.can_fill(&ColumnType::String));
        assert!(!ProtoKind::Enum.can_fill(&ColumnType::Variant));
        assert!(ProtoKind::Sfixed32.can_fill(&ColumnType::Date));
        assert!(!ProtoKind::Int64.can_fill(&ColumnType::Date));
        assert!(ProtoKind::Sint64.can_fill(&ColumnType::TimestampNtz));
        assert!(!ProtoKind::Int32.can_fill(&ColumnType::Timestamp));
    }

    #[test]
    fn uint64_above_i64_max_is_out_of_range_for_bigint() {
        let bytes = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        let error = plan(ProtoKind::Uint64, ColumnType::BigInt)
            .read(&mut Reader::new(&bytes, 3))
            .expect_err("u64::MAX");
        assert!(matches!(error.kind(), DecodeErrorKind::OutOfRange { .. }));
        assert_eq!(error.offset(), Some(3));
    }

    #[test]
    fn negative_int32_is_sign_extended_and_range_checked() {
        // -1 as int32: ten-byte varint.
        let bytes = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        let plan = plan(ProtoKind::Int32, ColumnType::TinyInt);
        let value = plan
            .read(&mut Reader::new(&bytes, 0))
            .expect("-1 fits TINYINT");
        assert_eq!(value, Value::Int(-1));
    }

    #[test]
    fn unknown_enum_numbers_become_their_decimal_text() {
        let names = EnumNames::new([
            (0, "ZERO".to_owned()),
            (1, "ONE".to_owned()),
            (1, "UNO".to_owned()),
        ]);
        let plan = ScalarPlan {
            kind: ProtoKind::Enum,
            target: ColumnType::String,
            enum_names: Some(Arc::new(names)),
        };
        assert_eq!(
            plan.read(&mut Reader::new(&[1], 0)).expect("ONE"),
            Value::Str("ONE".into())
        );
        assert_eq!(
            plan.read(&mut Reader::new(&[7], 0)).expect("7"),
            Value::Str("7".into())
        );
        assert_eq!(plan.zero(), Ok(Scalar::Str("ZERO".into())));
    }
}
