//! [`ScalarPlan`]: how one scalar field is read off the wire straight into its column's
//! representation (integers range-checked, enum numbers named, strings checked as UTF-8,
//! VARIANT as JSON), with the enum names it needs (`EnumNames`). Which kinds may fill which
//! columns is in `proto::kind`.

use std::borrow::Cow;
use std::sync::Arc;

use super::kind::ProtoKind;
use super::wire::{zigzag32, zigzag64, Reader};
use crate::error::{DecodeError, DecodeErrorKind, WireType};
use crate::schema::ColumnType;
use crate::value::{float_value, int_value, variant_text, Scalar, Value};

/// An enum's value names by number (for enum → STRING).
#[derive(Debug, Clone, Default, PartialEq)]
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
#[derive(Debug, Clone, PartialEq)]
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
        // The common pairs first, each a direct conversion; the rest go through `convert` below.
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
                return match crate::utf8::text(bytes) {
                    Some(text) => Ok(Scalar::Str(Cow::Borrowed(text))),
                    None => Err(DecodeError::at(DecodeErrorKind::InvalidUtf8, offset)),
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
                let text = crate::utf8::text(bytes).ok_or(DecodeErrorKind::InvalidUtf8)?;
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
