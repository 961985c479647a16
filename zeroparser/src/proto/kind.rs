//! [`ProtoKind`]: a protobuf field's declared type, which column types it may fill and what
//! wire type it uses.
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

use prost_types::field_descriptor_proto::Type;

use crate::error::WireType;
use crate::schema::ColumnType;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
