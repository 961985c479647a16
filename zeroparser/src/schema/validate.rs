//! The rules every schema obeys: at least one column, names unique ignoring case, non-empty
//! structs, legal map keys, bounded depth.

use std::collections::HashSet;

use super::column::{Column, ColumnType, TableSchema, MAX_DEPTH};
use crate::error::SchemaError;
use crate::path::{FieldPath, Segment};

impl TableSchema {
    /// Checks the rules every schema obeys: at least one column, names unique ignoring case,
    /// non-empty structs, legal map keys, depth at most [`MAX_DEPTH`].
    pub fn validate(&self) -> Result<(), SchemaError> {
        if self.columns.is_empty() {
            return Err(SchemaError::Empty);
        }
        validate_columns(&self.columns, &FieldPath::root(), 0)
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
    use crate::schema::column::column;

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
