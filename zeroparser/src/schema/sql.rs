//! Canonical SQL text of a schema and of a column type: `parse(to_sql())` gives back an
//! equal schema.

use super::column::{Column, ColumnType, TableSchema};

impl TableSchema {
    /// Canonical text: `parse(to_sql())` gives back an equal schema.
    pub fn to_sql(&self) -> String {
        let mut out = String::new();
        write_columns(&mut out, &self.columns, " ");
        out
    }
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
fn is_plain_identifier(name: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::column::column;

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
}
