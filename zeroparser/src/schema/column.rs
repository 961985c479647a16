//! The table schema's types: [`TableSchema`], its [`Column`]s and their [`ColumnType`]s
//! (Delta / Unity Catalog types), column lookup by name, and what each primitive type
//! admits (map keys, integer ranges). Decoders take these types as their targets directly.
//!
//! The schema is authoritative: protobuf descriptors and JSON records are checked against it,
//! never the other way round.

/// Deepest nesting of ARRAY / MAP / STRUCT a schema may have.
pub const MAX_DEPTH: usize = 64;

/// A column's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnType {
    /// 8-bit signed integer.
    TinyInt,
    /// 16-bit signed integer.
    SmallInt,
    /// 32-bit signed integer.
    Int,
    /// 64-bit signed integer.
    BigInt,
    /// 32-bit float.
    Float,
    /// 64-bit float.
    Double,
    /// UTF-8 text.
    String,
    /// true / false.
    Boolean,
    /// Bytes.
    Binary,
    /// Days since 1970-01-01.
    Date,
    /// Microseconds since the epoch, UTC.
    Timestamp,
    /// Microseconds since the epoch, no time zone.
    TimestampNtz,
    /// Semi-structured value, stored as compact JSON text.
    Variant,
    /// A list.
    Array {
        /// Element type.
        element: Box<ColumnType>,
        /// Whether elements may be null (default true).
        contains_null: bool,
    },
    /// A map.
    Map {
        /// Key type: integral, STRING or BOOLEAN.
        key: Box<ColumnType>,
        /// Value type.
        value: Box<ColumnType>,
        /// Whether values may be null (default true).
        value_contains_null: bool,
    },
    /// A struct of named fields.
    Struct(Vec<Column>),
}

/// A named column (or struct field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Name as written (matching is exact first, then ASCII case-insensitive).
    pub name: String,
    /// Type.
    pub data_type: ColumnType,
    /// False for NOT NULL.
    pub nullable: bool,
}

/// A table's columns, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    /// The columns.
    pub columns: Vec<Column>,
}

impl TableSchema {
    /// A column by name: exact match first, then ASCII case-insensitive.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        find_column(&self.columns, name)
    }
}

/// Index of the column called `name`: exact match first, then ASCII case-insensitive.
pub(crate) fn find_column(columns: &[Column], name: &str) -> Option<usize> {
    columns.iter().position(|c| c.name == name).or_else(|| {
        columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    })
}

impl ColumnType {
    /// The keyword of a primitive type, `None` for ARRAY / MAP / STRUCT.
    pub fn primitive_name(&self) -> Option<&'static str> {
        Some(match self {
            ColumnType::TinyInt => "TINYINT",
            ColumnType::SmallInt => "SMALLINT",
            ColumnType::Int => "INT",
            ColumnType::BigInt => "BIGINT",
            ColumnType::Float => "FLOAT",
            ColumnType::Double => "DOUBLE",
            ColumnType::String => "STRING",
            ColumnType::Boolean => "BOOLEAN",
            ColumnType::Binary => "BINARY",
            ColumnType::Date => "DATE",
            ColumnType::Timestamp => "TIMESTAMP",
            ColumnType::TimestampNtz => "TIMESTAMP_NTZ",
            ColumnType::Variant => "VARIANT",
            ColumnType::Array { .. } | ColumnType::Map { .. } | ColumnType::Struct(_) => {
                return None
            }
        })
    }

    /// Whether this type may be a MAP key.
    pub fn is_valid_map_key(&self) -> bool {
        matches!(
            self,
            ColumnType::TinyInt
                | ColumnType::SmallInt
                | ColumnType::Int
                | ColumnType::BigInt
                | ColumnType::String
                | ColumnType::Boolean
        )
    }

    /// The inclusive range of an integer-valued type (DATE in days, TIMESTAMP[_NTZ] in µs);
    /// `None` for the others.
    pub(crate) fn int_range(&self) -> Option<(i64, i64)> {
        Some(match self {
            ColumnType::TinyInt => (i8::MIN.into(), i8::MAX.into()),
            ColumnType::SmallInt => (i16::MIN.into(), i16::MAX.into()),
            ColumnType::Int | ColumnType::Date => (i32::MIN.into(), i32::MAX.into()),
            ColumnType::BigInt | ColumnType::Timestamp | ColumnType::TimestampNtz => {
                (i64::MIN, i64::MAX)
            }
            _ => return None,
        })
    }

    /// Whether `value` lies in [`int_range`](Self::int_range) (`false` for a type with
    /// none): the decoders' inline check, where out of range only sends the record to the
    /// value-tree decode, whose `int_value` names the error.
    #[inline(always)]
    pub(crate) fn holds_int(&self, value: i64) -> bool {
        self.int_range()
            .is_some_and(|(min, max)| (min..=max).contains(&value))
    }
}

/// A column, for tests.
#[cfg(test)]
pub(super) fn column(name: &str, data_type: ColumnType, nullable: bool) -> Column {
    Column {
        name: name.into(),
        data_type,
        nullable,
    }
}
