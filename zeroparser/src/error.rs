//! The crate's two error types: [`SchemaError`] (schema text, schema validation, descriptor
//! compilation — fails stream creation) and [`DecodeError`] (one bad record — the record is
//! rejected and the builder is left untouched).
//!
//! Every message names the field path at fault; protobuf decode errors also carry the byte
//! offset within the record, so a producer can find the bad bytes.

use std::fmt;

use crate::path::{FieldPath, Segment};

/// Why a table schema or a descriptor cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The column list text does not parse.
    #[error("schema text at position {position}: expected {expected}, found {found}")]
    Syntax {
        /// Byte offset into the text.
        position: usize,
        /// What the parser was looking for.
        expected: String,
        /// What it found instead.
        found: String,
    },
    /// A schema with no columns.
    #[error("schema has no columns")]
    Empty,
    /// Two columns (or struct fields) whose names differ only in case, or not at all.
    #[error("duplicate column `{path}` (column names are case-insensitive)")]
    DuplicateColumn {
        /// The second occurrence.
        path: FieldPath,
    },
    /// A MAP whose key type is not integral, STRING or BOOLEAN.
    #[error("column `{path}`: MAP keys must be TINYINT, SMALLINT, INT, BIGINT, STRING or BOOLEAN, not {key_type}")]
    InvalidMapKey {
        /// The map column.
        path: FieldPath,
        /// The rejected key type, as SQL.
        key_type: String,
    },
    /// A STRUCT with no fields (Parquet cannot store it).
    #[error("column `{path}`: STRUCT needs at least one field")]
    EmptyStruct {
        /// The struct column.
        path: FieldPath,
    },
    /// Nesting deeper than the limit.
    #[error("`{path}` is nested deeper than {limit} levels")]
    DepthExceeded {
        /// Where the limit was hit.
        path: FieldPath,
        /// The limit.
        limit: usize,
    },
    /// The descriptor bytes are not an encoded `google.protobuf.DescriptorProto`.
    #[error("descriptor is not a valid encoded google.protobuf.DescriptorProto: {reason}")]
    InvalidDescriptor {
        /// The protobuf decoder's explanation.
        reason: String,
    },
    /// A field's `type_name` names no message or enum inside the descriptor.
    #[error("descriptor field `{path}`: cannot resolve type `{type_name}`")]
    UnresolvedType {
        /// The descriptor field.
        path: FieldPath,
        /// The unresolved reference.
        type_name: String,
    },
    /// A descriptor field with no column of that name.
    #[error("descriptor field `{path}` ({proto_type}) has no column in the table")]
    NoColumnForField {
        /// The descriptor field.
        path: FieldPath,
        /// Its protobuf type.
        proto_type: String,
    },
    /// A descriptor field whose type cannot fill its column.
    #[error(
        "descriptor field `{path}` is {proto_type}, which cannot fill column type {column_type}"
    )]
    IncompatibleType {
        /// The field / column.
        path: FieldPath,
        /// The protobuf type (with `repeated`/`map` where it applies).
        proto_type: String,
        /// The column type, as SQL.
        column_type: String,
    },
    /// A NOT NULL column that no descriptor field fills.
    #[error("NOT NULL column `{path}` has no field in the descriptor")]
    MissingNotNullField {
        /// The column.
        path: FieldPath,
    },
    /// Two descriptor fields that map to the same column (names equal ignoring case).
    #[error("descriptor fields `{first}` and `{second}` both map to column `{path}`")]
    DuplicateFieldMapping {
        /// The column.
        path: FieldPath,
        /// The first field's name.
        first: String,
        /// The second field's name.
        second: String,
    },
    /// A column whose name is reserved for a column the builder adds (`_rescued_data`).
    #[error("column `{path}` is reserved for the rescued-data column")]
    ReservedColumn {
        /// The column.
        path: FieldPath,
    },
    /// The Avro schema text does not parse as an Avro schema.
    #[error("Avro schema is not valid: {reason}")]
    InvalidAvroSchema {
        /// The Avro parser's explanation.
        reason: String,
    },
    /// The Avro schema's top-level type is not a record.
    #[error("Avro schema must be a record (its fields are the table's columns), found {found}")]
    AvroNotRecord {
        /// The type found.
        found: String,
    },
    /// An Avro field that does not fit its column (or has none).
    #[error("Avro field `{path}`: {reason}")]
    AvroField {
        /// The writer schema's field (or the column missing a field).
        path: FieldPath,
        /// What does not fit.
        reason: String,
    },
    /// A descriptor field that Sluice cannot decode (e.g. a group, a bad field number).
    #[error("descriptor field `{path}`: {reason}")]
    UnsupportedField {
        /// The descriptor field.
        path: FieldPath,
        /// What is wrong.
        reason: String,
    },
}

/// A protobuf wire type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireType {
    /// 0: varint.
    Varint,
    /// 1: 8 little-endian bytes.
    I64,
    /// 2: length-delimited.
    Len,
    /// 3: start group (deprecated).
    SGroup,
    /// 4: end group (deprecated).
    EGroup,
    /// 5: 4 little-endian bytes.
    I32,
}

impl fmt::Display for WireType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WireType::Varint => "VARINT",
            WireType::I64 => "I64",
            WireType::Len => "LEN",
            WireType::SGroup => "SGROUP",
            WireType::EGroup => "EGROUP",
            WireType::I32 => "I32",
        })
    }
}

/// What went wrong in a record.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// The record ends inside a tag or value.
    #[error("record is truncated")]
    Truncated,
    /// A varint longer than 10 bytes, or one that does not fit 64 bits.
    #[error("varint is longer than 10 bytes or overflows 64 bits")]
    VarintOverflow,
    /// A tag with field number 0 or above 2^29-1.
    #[error("invalid field number {number}")]
    InvalidFieldNumber {
        /// The field number found.
        number: u64,
    },
    /// Wire type 6 or 7.
    #[error("invalid wire type {value}")]
    InvalidWireType {
        /// The wire type bits.
        value: u8,
    },
    /// A known field encoded with the wrong wire type.
    #[error("wrong wire type: expected {expected}, found {found}")]
    WrongWireType {
        /// What the descriptor implies.
        expected: WireType,
        /// What the record has.
        found: WireType,
    },
    /// A string field that is not UTF-8.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    /// A length prefix that runs past the end of its message.
    #[error("length {length} runs past the end of the enclosing message ({remaining} bytes left)")]
    LengthPastEnd {
        /// The length prefix.
        length: u64,
        /// Bytes left in the enclosing message.
        remaining: usize,
    },
    /// Messages or groups nested deeper than the limit.
    #[error("nesting deeper than {limit} levels")]
    DepthExceeded {
        /// The limit.
        limit: usize,
    },
    /// A group end without its start, or with another field number.
    #[error("unbalanced or mismatched group")]
    InvalidGroup,
    /// A NOT NULL column (or non-null element / map value) that is absent or null.
    #[error("value is null or absent but the column is NOT NULL")]
    NotNull,
    /// A value outside the range of its column type.
    #[error("value {value} is out of range for {target}")]
    OutOfRange {
        /// The value, as text.
        value: String,
        /// The column type.
        target: &'static str,
    },
    /// The text is not JSON.
    #[error("invalid JSON: {reason}")]
    InvalidJson {
        /// serde_json's explanation.
        reason: String,
    },
    /// The JSON record is not an object.
    #[error("JSON record must be an object, found {found}")]
    JsonNotObject {
        /// The JSON kind found.
        found: &'static str,
    },
    /// A JSON value of the wrong kind for its column.
    #[error("expected {expected}, found {found}")]
    JsonWrongType {
        /// What the column accepts.
        expected: &'static str,
        /// What the record has.
        found: &'static str,
    },
    /// A JSON key that names no column.
    #[error("unknown field `{name}`")]
    JsonUnknownField {
        /// The key.
        name: String,
    },
    /// A VARIANT value that is not JSON text.
    #[error("VARIANT value is not valid JSON: {reason}")]
    InvalidVariant {
        /// serde_json's explanation.
        reason: String,
    },
    /// A BINARY value in JSON that is not base64.
    #[error("invalid base64: {reason}")]
    InvalidBase64 {
        /// The decoder's explanation.
        reason: String,
    },
    /// A DATE string that is not `YYYY-MM-DD`.
    #[error("invalid DATE text {text:?}, expected YYYY-MM-DD")]
    InvalidDate {
        /// The text.
        text: String,
    },
    /// A TIMESTAMP / TIMESTAMP_NTZ string in the wrong format.
    #[error("invalid timestamp text {text:?}, expected {expected}")]
    InvalidTimestamp {
        /// The text.
        text: String,
        /// The format wanted.
        expected: &'static str,
    },
    /// The open batch cannot take this record without overflowing Arrow's 32-bit offsets.
    #[error("the open batch is full; finish it before appending more records")]
    BatchFull,
    /// An Avro union's branch index outside the union.
    #[error("union branch index {index} is out of range (the union has {branches} branches)")]
    UnionIndex {
        /// The index read.
        index: i64,
        /// Branches of the union.
        branches: usize,
    },
    /// An Avro enum's symbol index outside the enum.
    #[error("enum symbol index {index} is out of range (the enum has {symbols} symbols)")]
    EnumIndex {
        /// The index read.
        index: i64,
        /// Symbols of the enum.
        symbols: usize,
    },
    /// An Avro boolean byte other than 0 or 1.
    #[error("boolean byte {value} is neither 0 nor 1")]
    InvalidBoolean {
        /// The byte.
        value: u8,
    },
    /// An Avro length (bytes, string) that is negative.
    #[error("negative length {length}")]
    NegativeLength {
        /// The length read.
        length: i64,
    },
    /// Bytes left after the end of an Avro datum.
    #[error("{count} bytes follow the end of the datum")]
    TrailingBytes {
        /// How many.
        count: usize,
    },
    /// An Avro map that repeats a key.
    #[error("map key {key:?} repeats")]
    RepeatedMapKey {
        /// The key.
        key: String,
    },
    /// A `uuid` string that is not a UUID.
    #[error("invalid uuid text {text:?}")]
    InvalidUuid {
        /// The text.
        text: String,
    },
    /// An Avro decimal whose unscaled value has more than 16 significant bytes.
    #[error("decimal of {len} bytes does not fit 128 bits")]
    DecimalTooWide {
        /// Its byte length.
        len: usize,
    },
    /// A [`ProtoPlan`](crate::ProtoPlan) compiled for a different table schema.
    #[error("the plan was compiled for a different table schema (or rescued-data setting)")]
    PlanSchemaMismatch,
}

/// A record that cannot be decoded: what, where (field path) and, for protobuf, at which byte.
///
/// Boxed so that `Result<_, DecodeError>` stays one word on the hot path.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeError(Box<DecodeErrorInner>);

#[derive(Debug, Clone, PartialEq)]
struct DecodeErrorInner {
    kind: DecodeErrorKind,
    path: FieldPath,
    offset: Option<usize>,
}

impl DecodeError {
    /// An error of `kind` at the record level, with no offset.
    pub fn new(kind: DecodeErrorKind) -> Self {
        Self(Box::new(DecodeErrorInner {
            kind,
            path: FieldPath::root(),
            offset: None,
        }))
    }

    /// An error of `kind` at byte `offset` of the record.
    pub fn at(kind: DecodeErrorKind, offset: usize) -> Self {
        let mut error = Self::new(kind);
        error.0.offset = Some(offset);
        error
    }

    /// What went wrong.
    pub fn kind(&self) -> &DecodeErrorKind {
        &self.0.kind
    }

    /// The value at fault, from the record's top level.
    pub fn path(&self) -> &FieldPath {
        &self.0.path
    }

    /// Byte offset in the protobuf record, where known.
    pub fn offset(&self) -> Option<usize> {
        self.0.offset
    }

    /// Adds an enclosing path segment (called while the error unwinds outwards).
    pub(crate) fn within(mut self, segment: Segment) -> Self {
        self.0.path.push_outer(segment);
        self
    }

    /// Adds an enclosing field name.
    pub(crate) fn in_field(self, name: &str) -> Self {
        self.within(Segment::Field(name.to_owned()))
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.0;
        if inner.path.is_root() {
            f.write_str("record")?;
        } else {
            write!(f, "field `{}`", inner.path)?;
        }
        if let Some(offset) = inner.offset {
            write!(f, " at byte {offset}")?;
        }
        write!(f, ": {}", inner.kind)
    }
}

impl std::error::Error for DecodeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_error_display_names_path_offset_and_kind() {
        let error = DecodeError::at(
            DecodeErrorKind::WrongWireType {
                expected: WireType::I64,
                found: WireType::Varint,
            },
            12,
        )
        .in_field("lat")
        .in_field("loc");
        assert_eq!(
            error.to_string(),
            "field `loc.lat` at byte 12: wrong wire type: expected I64, found VARINT"
        );
        let json = DecodeError::new(DecodeErrorKind::NotNull)
            .within(Segment::Index(3))
            .in_field("tags");
        assert_eq!(
            json.to_string(),
            "field `tags[3]`: value is null or absent but the column is NOT NULL"
        );
    }

    #[test]
    fn decode_error_is_one_word() {
        assert_eq!(
            std::mem::size_of::<DecodeError>(),
            std::mem::size_of::<usize>()
        );
    }
}
