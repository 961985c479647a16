//! The one mapping from table column types to Arrow types. The Delta writer checks batches
//! against exactly these types, so every builder and every test goes through here.
//!
//! TINYINT Int8, SMALLINT Int16, INT Int32, BIGINT Int64, FLOAT Float32, DOUBLE Float64,
//! STRING and VARIANT Utf8, BOOLEAN Boolean, BINARY Binary, DATE Date32,
//! TIMESTAMP Timestamp(µs, "UTC"), TIMESTAMP_NTZ Timestamp(µs), ARRAY List("element"),
//! MAP Map("key_value": Struct["key", "value"], unsorted), STRUCT Struct.

use std::sync::Arc;

use arrow_schema::{DataType, Field, FieldRef, Fields, Schema, SchemaRef, TimeUnit};

use crate::schema::{Column, ColumnType, TableSchema};

/// Name of a list's element field.
pub const LIST_ELEMENT: &str = "element";
/// Name of a map's entries field.
pub const MAP_ENTRIES: &str = "key_value";
/// Name of a map entry's key field.
pub const MAP_KEY: &str = "key";
/// Name of a map entry's value field.
pub const MAP_VALUE: &str = "value";
/// Time zone of TIMESTAMP columns.
pub const UTC: &str = "UTC";

impl TableSchema {
    /// The Arrow schema of the batches built for this table.
    pub fn arrow_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(struct_fields(&self.columns)))
    }
}

impl Column {
    /// The Arrow field of this column.
    pub fn arrow_field(&self) -> Field {
        Field::new(&self.name, self.data_type.arrow_type(), self.nullable)
    }
}

impl ColumnType {
    /// The Arrow type of this column type.
    pub fn arrow_type(&self) -> DataType {
        match self {
            ColumnType::TinyInt => DataType::Int8,
            ColumnType::SmallInt => DataType::Int16,
            ColumnType::Int => DataType::Int32,
            ColumnType::BigInt => DataType::Int64,
            ColumnType::Float => DataType::Float32,
            ColumnType::Double => DataType::Float64,
            ColumnType::String | ColumnType::Variant => DataType::Utf8,
            ColumnType::Boolean => DataType::Boolean,
            ColumnType::Binary => DataType::Binary,
            ColumnType::Date => DataType::Date32,
            ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
            ColumnType::TimestampNtz => DataType::Timestamp(TimeUnit::Microsecond, None),
            ColumnType::Array {
                element,
                contains_null,
            } => DataType::List(list_field(element, *contains_null)),
            ColumnType::Map {
                key,
                value,
                value_contains_null,
            } => DataType::Map(map_entries_field(key, value, *value_contains_null), false),
            ColumnType::Struct(fields) => DataType::Struct(struct_fields(fields)),
        }
    }
}

/// The fields of a struct (or of the table).
pub(crate) fn struct_fields(columns: &[Column]) -> Fields {
    columns.iter().map(Column::arrow_field).collect()
}

/// The `element` field of a list.
pub(crate) fn list_field(element: &ColumnType, contains_null: bool) -> FieldRef {
    Arc::new(Field::new(
        LIST_ELEMENT,
        element.arrow_type(),
        contains_null,
    ))
}

/// The key and value fields of a map entry.
pub(crate) fn map_entry_fields(
    key: &ColumnType,
    value: &ColumnType,
    value_contains_null: bool,
) -> Fields {
    Fields::from(vec![
        Field::new(MAP_KEY, key.arrow_type(), false),
        Field::new(MAP_VALUE, value.arrow_type(), value_contains_null),
    ])
}

/// The `key_value` entries field of a map.
pub(crate) fn map_entries_field(
    key: &ColumnType,
    value: &ColumnType,
    value_contains_null: bool,
) -> FieldRef {
    Arc::new(Field::new(
        MAP_ENTRIES,
        DataType::Struct(map_entry_fields(key, value, value_contains_null)),
        false,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_column_type_maps_to_the_arrow_type_the_delta_writer_expects() {
        let schema = TableSchema::parse(
            "t TINYINT, s SMALLINT, i INT, b BIGINT NOT NULL, f FLOAT, d DOUBLE, str STRING, \
             v VARIANT, bo BOOLEAN, bi BINARY, da DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, \
             a ARRAY<STRING NOT NULL>, m MAP<STRING, INT>, st STRUCT<x: INT NOT NULL>",
        )
        .expect("parses");
        let arrow = schema.arrow_schema();
        let types: Vec<DataType> = arrow
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        assert_eq!(
            &types[..13],
            &[
                DataType::Int8,
                DataType::Int16,
                DataType::Int32,
                DataType::Int64,
                DataType::Float32,
                DataType::Float64,
                DataType::Utf8,
                DataType::Utf8,
                DataType::Boolean,
                DataType::Binary,
                DataType::Date32,
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                DataType::Timestamp(TimeUnit::Microsecond, None),
            ]
        );
        assert!(!arrow.field(3).is_nullable());
        assert!(arrow.field(0).is_nullable());
        assert_eq!(
            types[13],
            DataType::List(Arc::new(Field::new("element", DataType::Utf8, false)))
        );
        let entries = Field::new(
            "key_value",
            DataType::Struct(Fields::from(vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("value", DataType::Int32, true),
            ])),
            false,
        );
        assert_eq!(types[14], DataType::Map(Arc::new(entries), false));
        assert_eq!(
            types[15],
            DataType::Struct(Fields::from(vec![Field::new("x", DataType::Int32, false)]))
        );
    }
}
