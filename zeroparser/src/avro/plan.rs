//! [`AvroPlan`]: an Avro writer schema compiled against a table schema, once per stream —
//! one [`Op`] per writer type the datum walk meets, each already knowing its column's
//! representation (ranges, units, text forms), so decoding a datum decides nothing twice.

use super::types::Types;

/// A writer schema compiled against a table schema (see `avro::compile`).
#[derive(Debug, Clone, PartialEq)]
pub struct AvroPlan {
    /// The writer types (for rescued fields, rendered from the raw types).
    pub(crate) types: Types,
    /// The datum's record.
    pub(crate) root: RecordOp,
    /// The table schema it was compiled for.
    pub(crate) schema_id: u64,
    /// Compiled for a builder with the rescued-data column: top-level writer fields with no
    /// column are rescued (else they fail the compile).
    pub(crate) rescues: bool,
    /// Most column bytes or entries one input byte can produce (see `RecordBatchBuilder`).
    pub(crate) amplification: usize,
    /// The record's full name.
    pub(crate) record_name: String,
}

impl AvroPlan {
    /// The writer record's full name.
    pub fn record_name(&self) -> &str {
        &self.record_name
    }
}

/// A record: its writer fields in writer order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RecordOp {
    pub(crate) fields: Vec<FieldOp>,
}

/// One writer field of a record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FieldOp {
    /// Decoded into column (or struct field) `index`.
    Column {
        /// The column's position among its siblings.
        index: usize,
        /// The writer's field name (error paths).
        name: String,
        /// How its value is decoded.
        op: Op,
    },
    /// A top-level field with no column, kept in `_rescued_data` under its name.
    Rescue {
        /// The writer's field name.
        name: String,
        /// Its writer type (in [`AvroPlan::types`]).
        raw: usize,
    },
}

/// How one writer value is decoded into its column's representation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    /// `null`: NULL.
    Null,
    /// `boolean` → BOOLEAN.
    Bool,
    /// `int` (`long: false`) or `long`, times `mul`, range-checked: integer columns,
    /// DATE (days), TIMESTAMP[_NTZ] (µs).
    Int(IntOp),
    /// `float` → FLOAT (`to_double: false`) or DOUBLE.
    Float {
        /// The column is DOUBLE.
        to_double: bool,
    },
    /// `double` → DOUBLE.
    Double,
    /// `string` → STRING (`check` says what the text must be).
    Str(StrCheck),
    /// `bytes` → BINARY.
    Bytes,
    /// `fixed(n)` → BINARY.
    Fixed(usize),
    /// `fixed(16)` uuid → STRING (canonical text).
    UuidFixed,
    /// `decimal` → STRING (exact text) or DOUBLE.
    Decimal {
        /// The fixed size it lies on, or `None` for bytes.
        fixed: Option<usize>,
        /// Digits after the point.
        scale: usize,
        /// The column is DOUBLE.
        to_double: bool,
    },
    /// `enum` → STRING (the symbol).
    Enum(Vec<String>),
    /// `array` → ARRAY.
    Array(Box<Op>),
    /// `map` → MAP<STRING, V>.
    Map(Box<Op>),
    /// `record` → STRUCT.
    Record(RecordOp),
    /// A union: the branch named by the index read.
    Union(Vec<Op>),
}

/// An integer read and converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IntOp {
    /// Read as a `long` (else an `int`, which must fit 32 bits).
    pub(crate) long: bool,
    /// Unit factor (1000 for millis into a microsecond column).
    pub(crate) mul: i64,
    /// The column's range.
    pub(crate) min: i64,
    pub(crate) max: i64,
    /// The column's type name (errors).
    pub(crate) target: &'static str,
}

/// What a `string` must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StrCheck {
    /// Any UTF-8 text.
    Text,
    /// A UUID (`uuid` logical type): 8-4-4-4-12 hexadecimal digits.
    Uuid,
    /// JSON text (VARIANT column), stored compacted.
    Json,
}
