//! The columns the server adds after a table's own ([`AddedColumns`]), and the builder of
//! a table's rows that has them ([`builder_for`]).

use sluice_zeroparser::{RecordBatchBuilder, SchemaError, TableSchema};

/// The columns the server adds after a table's own, in this order (each
/// opt-in per table, recorded in its catalog entry).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddedColumns {
    /// `_rescued_data` (see `rescued_data`).
    pub rescued_data: bool,
    /// `_sluice_stream_id`, `_sluice_offset`, `_sluice_ingested_at` (see
    /// `system_columns`).
    pub system_columns: bool,
}

/// A builder for `schema`, with the `_rescued_data` column when the table keeps it (the
/// system columns are added to its batches afterwards, see `system_columns`).
pub fn builder_for(
    schema: &TableSchema,
    added: AddedColumns,
) -> Result<RecordBatchBuilder, SchemaError> {
    if !added.rescued_data {
        return Ok(RecordBatchBuilder::new(schema));
    }
    RecordBatchBuilder::with_rescued_data(schema)
}
