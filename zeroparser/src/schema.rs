//! The table schema: Delta / Unity Catalog column types, their canonical SQL text, and the
//! validation rules every schema obeys (unique names, non-empty structs, legal map keys,
//! bounded depth).
//!
//! The schema is authoritative: protobuf descriptors and JSON records are checked against it,
//! never the other way round. Parsing the column-list text lives in `schema_text`, the Arrow
//! mapping in `arrow_types`.

use std::collections::HashSet;

use crate::error::SchemaError;
use crate::path::{FieldPath, Segment};

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
    /// Parses a column list such as `id BIGINT NOT NULL, tags ARRAY<STRING>`; see
    /// `schema_text` for the grammar.
    pub fn parse(text: &str) -> Result<TableSchema, SchemaError> {
        crate::schema_text::parse_schema(text)
    }

    /// Canonical text: `parse(to_sql())` gives back an equal schema.
    pub fn to_sql(&self) -> String {
        let mut out = String::new();
        write_columns(&mut out, &self.columns, " ");
        out
    }

    /// Checks the rules every schema obeys: at least one column, names unique ignoring case,
    /// non-empty structs, legal map keys, depth at most [`MAX_DEPTH`].
    pub fn validate(&self) -> Result<(), SchemaError> {
        if self.columns.is_empty() {
            return Err(SchemaError::Empty);
        }
        validate_columns(&self.columns, &FieldPath::root(), 0)
    }

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
    /// The type as SQL: `ARRAY<STRING>`, `STRUCT<lat: DOUBLE, lon: DOUBLE NOT NULL>`.
    ///
    /// `ARRAY<T NOT NULL>` and `MAP<K, V NOT NULL>` spell `contains_null = false` and
    /// `value_contains_null = false`.
    pub fn sql(&self) -> String {
        let mut out = String::new();
        write_type(&mut out, self);
        out
    }

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
}

fn write_columns(out: &mut String, columns: &[Column], separator: &str) {
    for (i, column) in columns.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_name(out, &column.name);
        out.push_str(separator);
        write_type(out, &column.data_type);
        if !column.nullable {
            out.push_str(" NOT NULL");
        }
    }
}

fn write_type(out: &mut String, data_type: &ColumnType) {
    if let Some(name) = data_type.primitive_name() {
        out.push_str(name);
        return;
    }
    match data_type {
        ColumnType::Array {
            element,
            contains_null,
        } => {
            out.push_str("ARRAY<");
            write_type(out, element);
            if !contains_null {
                out.push_str(" NOT NULL");
            }
            out.push('>');
        }
        ColumnType::Map {
            key,
            value,
            value_contains_null,
        } => {
            out.push_str("MAP<");
            write_type(out, key);
            out.push_str(", ");
            write_type(out, value);
            if !value_contains_null {
                out.push_str(" NOT NULL");
            }
            out.push('>');
        }
        ColumnType::Struct(fields) => {
            out.push_str("STRUCT<");
            write_columns(out, fields, ": ");
            out.push('>');
        }
        _ => {}
    }
}

/// Whether `name` can be written without backquotes.
pub(crate) fn is_plain_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn write_name(out: &mut String, name: &str) {
    if is_plain_identifier(name) {
        out.push_str(name);
    } else {
        out.push('`');
        out.push_str(&name.replace('`', "``"));
        out.push('`');
    }
}

fn validate_columns(columns: &[Column], path: &FieldPath, depth: usize) -> Result<(), SchemaError> {
    let mut seen = HashSet::with_capacity(columns.len());
    for column in columns {
        let column_path = path.child(Segment::Field(column.name.clone()));
        if !seen.insert(column.name.to_ascii_lowercase()) {
            return Err(SchemaError::DuplicateColumn { path: column_path });
        }
        validate_type(&column.data_type, &column_path, depth)?;
    }
    Ok(())
}

fn validate_type(
    data_type: &ColumnType,
    path: &FieldPath,
    depth: usize,
) -> Result<(), SchemaError> {
    let nested = matches!(
        data_type,
        ColumnType::Array { .. } | ColumnType::Map { .. } | ColumnType::Struct(_)
    );
    if nested && depth >= MAX_DEPTH {
        return Err(SchemaError::DepthExceeded {
            path: path.clone(),
            limit: MAX_DEPTH,
        });
    }
    match data_type {
        ColumnType::Array { element, .. } => {
            validate_type(element, &path.child(Segment::Element), depth + 1)
        }
        ColumnType::Map { key, value, .. } => {
            if !key.is_valid_map_key() {
                return Err(SchemaError::InvalidMapKey {
                    path: path.clone(),
                    key_type: key.sql(),
                });
            }
            validate_type(value, &path.child(Segment::MapValue), depth + 1)
        }
        ColumnType::Struct(fields) => {
            if fields.is_empty() {
                return Err(SchemaError::EmptyStruct { path: path.clone() });
            }
            validate_columns(fields, path, depth + 1)
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(name: &str, data_type: ColumnType, nullable: bool) -> Column {
        Column {
            name: name.into(),
            data_type,
            nullable,
        }
    }

    #[test]
    fn nested_types_render_as_canonical_sql() {
        let loc = ColumnType::Struct(vec![
            column("lat", ColumnType::Double, true),
            column("lon", ColumnType::Double, false),
        ]);
        assert_eq!(loc.sql(), "STRUCT<lat: DOUBLE, lon: DOUBLE NOT NULL>");
        let tags = ColumnType::Array {
            element: Box::new(ColumnType::String),
            contains_null: true,
        };
        assert_eq!(tags.sql(), "ARRAY<STRING>");
        let attrs = ColumnType::Map {
            key: Box::new(ColumnType::String),
            value: Box::new(ColumnType::Int),
            value_contains_null: false,
        };
        assert_eq!(attrs.sql(), "MAP<STRING, INT NOT NULL>");
    }

    #[test]
    fn names_that_are_not_identifiers_are_backquoted() {
        let schema = TableSchema {
            columns: vec![
                column("a b", ColumnType::Int, true),
                column("x`y", ColumnType::Int, false),
            ],
        };
        assert_eq!(schema.to_sql(), "`a b` INT, `x``y` INT NOT NULL");
    }

    #[test]
    fn validation_rejects_duplicate_names_ignoring_case() {
        let schema = TableSchema {
            columns: vec![
                column("Id", ColumnType::Int, true),
                column("iD", ColumnType::Int, true),
            ],
        };
        assert!(matches!(
            schema.validate(),
            Err(SchemaError::DuplicateColumn { .. })
        ));
    }

    #[test]
    fn validation_rejects_too_deep_nesting() {
        let mut data_type = ColumnType::Int;
        for _ in 0..=MAX_DEPTH {
            data_type = ColumnType::Array {
                element: Box::new(data_type),
                contains_null: true,
            };
        }
        let schema = TableSchema {
            columns: vec![column("deep", data_type, true)],
        };
        assert!(matches!(
            schema.validate(),
            Err(SchemaError::DepthExceeded { .. })
        ));
    }
}
