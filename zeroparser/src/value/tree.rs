//! [`Value`]: the per-record value tree that both decoders fill before anything touches the
//! Arrow builders.
//!
//! Decoding a record into this small tree first (strings and bytes borrowed from the input
//! where possible) is what makes appends atomic: every check — wire format, types, ranges,
//! NOT NULL — happens before the first builder is touched, so a rejected record leaves the
//! batch exactly as it was. Values are already converted to their column's type (integers
//! range-checked, enum names resolved, dates in days, timestamps in microseconds), so the
//! append step cannot fail.

use std::borrow::Cow;

/// One decoded value, already in its column's representation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    /// Absent or null.
    Null,
    /// BOOLEAN.
    Bool(bool),
    /// TINYINT / SMALLINT / INT / BIGINT / DATE (days) / TIMESTAMP[_NTZ] (µs), range-checked.
    Int(i64),
    /// FLOAT.
    Float(f32),
    /// DOUBLE.
    Double(f64),
    /// STRING / VARIANT (compact JSON text).
    Str(Cow<'a, str>),
    /// BINARY.
    Bytes(Cow<'a, [u8]>),
    /// ARRAY.
    List(Vec<Value<'a>>),
    /// MAP entries in arrival order; duplicates are removed by [`finalize`](super::finalize::finalize).
    Map(Vec<(Value<'a>, Value<'a>)>),
    /// STRUCT: one slot per field, in column order, and the byte offset of the message in a
    /// protobuf record (for NOT NULL errors).
    Struct(Vec<Value<'a>>, Option<usize>),
}

impl Value<'_> {
    /// An empty struct of `len` absent fields.
    pub(crate) fn empty_struct(len: usize, offset: Option<usize>) -> Self {
        Value::Struct(vec![Value::Null; len], offset)
    }
}

/// A map key as path text.
pub(crate) fn render_key(key: &Value<'_>) -> String {
    match key {
        Value::Int(i) => i.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Str(s) => s.to_string(),
        other => format!("{other:?}"),
    }
}
