//! [`Scalar`]: one decoded scalar value in its column's representation, as the protobuf
//! visitor hands it out and as it enters the per-record value tree.

use std::borrow::Cow;

use super::tree::Value;

/// One decoded value in its column's representation.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar<'a> {
    /// BOOLEAN.
    Bool(bool),
    /// TINYINT / SMALLINT / INT / BIGINT / DATE (days) / TIMESTAMP[_NTZ] (µs), range-checked
    /// for the column.
    Int(i64),
    /// FLOAT.
    Float(f32),
    /// DOUBLE.
    Double(f64),
    /// STRING (enum names included) and VARIANT (compact JSON text).
    Str(Cow<'a, str>),
    /// BINARY.
    Bytes(&'a [u8]),
}

impl<'a> From<Scalar<'a>> for Value<'a> {
    fn from(scalar: Scalar<'a>) -> Self {
        match scalar {
            Scalar::Bool(v) => Value::Bool(v),
            Scalar::Int(v) => Value::Int(v),
            Scalar::Float(v) => Value::Float(v),
            Scalar::Double(v) => Value::Double(v),
            Scalar::Str(v) => Value::Str(v),
            Scalar::Bytes(v) => Value::Bytes(Cow::Borrowed(v)),
        }
    }
}
