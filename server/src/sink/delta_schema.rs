//! Table schema → Delta schema. VARIANT columns are stored as Delta STRING
//! columns holding JSON text (the catalog keeps the VARIANT type), since the
//! Delta variant encoding is not written by Sluice yet.

use deltalake::kernel::{ArrayType, DataType, MapType, StructField};
use sluice_zeroparser::{Column, ColumnType};

use crate::error::{Result, ServerError};

/// The Delta type of a column type.
pub fn delta_type(t: &ColumnType) -> Result<DataType> {
    Ok(match t {
        ColumnType::TinyInt => DataType::BYTE,
        ColumnType::SmallInt => DataType::SHORT,
        ColumnType::Int => DataType::INTEGER,
        ColumnType::BigInt => DataType::LONG,
        ColumnType::Float => DataType::FLOAT,
        ColumnType::Double => DataType::DOUBLE,
        ColumnType::String | ColumnType::Variant => DataType::STRING,
        ColumnType::Boolean => DataType::BOOLEAN,
        ColumnType::Binary => DataType::BINARY,
        ColumnType::Date => DataType::DATE,
        ColumnType::Timestamp => DataType::TIMESTAMP,
        ColumnType::TimestampNtz => DataType::TIMESTAMP_NTZ,
        ColumnType::Array {
            element,
            contains_null,
        } => ArrayType::new(delta_type(element)?, *contains_null).into(),
        ColumnType::Map {
            key,
            value,
            value_contains_null,
        } => MapType::new(delta_type(key)?, delta_type(value)?, *value_contains_null).into(),
        ColumnType::Struct(fields) => DataType::try_struct_type(delta_fields(fields)?)
            .map_err(|e| ServerError::InvalidArgument(format!("struct type: {e}")))?,
    })
}

/// The Delta fields of a list of columns.
pub fn delta_fields(columns: &[Column]) -> Result<Vec<StructField>> {
    columns
        .iter()
        .map(|c| {
            Ok(StructField::new(
                c.name.clone(),
                delta_type(&c.data_type)?,
                c.nullable,
            ))
        })
        .collect()
}

/// The Delta columns of a table: its own, then `_rescued_data`, then the
/// system columns (each as `added` says).
pub fn delta_columns(
    schema: &sluice_zeroparser::TableSchema,
    added: super::added::AddedColumns,
) -> Result<Vec<StructField>> {
    let mut fields = delta_fields(&schema.columns)?;
    if added.rescued_data {
        fields.push(super::rescued_data::delta_field());
    }
    if added.system_columns {
        fields.extend(super::system_columns::delta_fields());
    }
    Ok(fields)
}
