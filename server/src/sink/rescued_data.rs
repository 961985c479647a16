//! Opt-in rescued-data column (`sluice table create --rescued-data`, or the
//! table property `sluice.rescuedData=true` in the tables API): a nullable
//! STRING column `_rescued_data` right after the table's own columns (before
//! the system columns, when the table has both), holding per row a JSON object
//! text of what the record carried that the schema could not hold, or null.
//!
//! zeroparser fills it (`RecordBatchBuilder::with_rescued_data`; its `rescue`
//! module has the rules): JSON members with no column and values that do not
//! fit a nullable column, by name; protobuf fields the stream's descriptor does
//! not map, by field number. It is decoded from the raw record, so a WAL replay
//! gives the same text. Like the system columns it is not in the Unity Catalog
//! columns the SDKs see, and a table that keeps it may not have a column of its
//! own with that name (refused at creation).

use deltalake::kernel::{DataType as DeltaType, StructField};
use sluice_zeroparser::{check_rescuable, TableSchema, RESCUED_DATA_COLUMN};

use crate::error::{Result, ServerError};

/// Table property that turns the rescued-data column on.
pub const PROPERTY: &str = "sluice.rescuedData";

/// The Delta field of the rescued-data column.
pub fn delta_field() -> StructField {
    StructField::new(RESCUED_DATA_COLUMN, DeltaType::STRING, true)
}

/// Refuses a table schema that has its own `_rescued_data` column.
pub fn check_schema(schema: &TableSchema) -> Result<()> {
    check_rescuable(schema).map_err(|e| {
        ServerError::InvalidArgument(format!(
            "columns: {e}; rename it or create the table without {PROPERTY}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_with_its_own_rescued_data_column_is_refused() {
        let schema = TableSchema::parse("id BIGINT, _rescued_data STRING").expect("schema");
        let error = check_schema(&schema).expect_err("reserved");
        assert!(
            error.to_string().contains("`_rescued_data` is reserved"),
            "{error}"
        );
        let fine = TableSchema::parse("id BIGINT").expect("schema");
        assert!(check_schema(&fine).is_ok());
    }
}
