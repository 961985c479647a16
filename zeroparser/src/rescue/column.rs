//! The rescued-data column itself: its name, the check that a schema leaves the name free,
//! its Arrow field and its builder.

use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::ArrayRef;
use arrow_schema::{DataType, Field};

use crate::error::SchemaError;
use crate::path::{FieldPath, Segment};
use crate::schema::TableSchema;

/// Name of the rescued-data column.
pub const RESCUED_DATA_COLUMN: &str = "_rescued_data";

/// Fails if `schema` has a column named [`RESCUED_DATA_COLUMN`] (any case), which would be
/// confused with the rescued-data column.
pub fn check_rescuable(schema: &TableSchema) -> Result<(), SchemaError> {
    match schema
        .columns
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(RESCUED_DATA_COLUMN))
    {
        Some(column) => Err(SchemaError::ReservedColumn {
            path: FieldPath::root().child(Segment::Field(column.name.clone())),
        }),
        None => Ok(()),
    }
}

/// The Arrow field of the rescued-data column.
pub(crate) fn arrow_field() -> Field {
    Field::new(RESCUED_DATA_COLUMN, DataType::Utf8, true)
}

/// The rescued-data column of an open batch.
#[derive(Debug, Default)]
pub(crate) struct RescuedColumn {
    texts: StringBuilder,
}

impl RescuedColumn {
    /// Appends one row's text (null when nothing was rescued).
    pub(crate) fn append(&mut self, text: Option<&str>) {
        self.texts.append_option(text);
    }

    /// The rows appended since the last finish; the column is reset.
    pub(crate) fn finish(&mut self) -> ArrayRef {
        Arc::new(self.texts.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_column_named_rescued_data_in_any_case_is_refused() {
        let schema = TableSchema::parse("id BIGINT, _Rescued_Data STRING").expect("schema");
        let error = check_rescuable(&schema).expect_err("reserved");
        assert_eq!(
            error.to_string(),
            "column `_Rescued_Data` is reserved for the rescued-data column"
        );
        let fine = TableSchema::parse("id BIGINT, rescued STRING").expect("schema");
        assert_eq!(check_rescuable(&fine), Ok(()));
    }
}
