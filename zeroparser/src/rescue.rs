//! The rescued-data column: where a table that opts in keeps what a record carried that the
//! schema could not hold, instead of rejecting the record.
//!
//! A builder made with [`RecordBatchBuilder::with_rescued_data`](crate::RecordBatchBuilder)
//! ends its batches with one more column, [`RESCUED_DATA_COLUMN`] (`_rescued_data`, nullable
//! STRING), holding one JSON object text per row, or null when the record had nothing to
//! rescue. The unit rescued is always a top-level field of the record:
//!
//! - JSON (`json_rescue`): a top-level key that names no column is kept under that key with
//!   its value as the record wrote it (compacted: whitespace outside strings dropped, nested
//!   objects and arrays included). A top-level value that does not fit its column — wrong
//!   JSON kind, out of range, bad base64 / date / timestamp text, or anything inside it that
//!   does not fit (an unknown key in a STRUCT, a null array element where elements are NOT
//!   NULL, …) — leaves the column null and is kept under its key, when the column is
//!   nullable; a NOT NULL column that does not fit fails the record with the same error as
//!   without rescue. Nothing is rescued below the top level: a STRUCT value is kept whole or
//!   not at all. Duplicate keys: the last one wins, as for columns (`{"a":"x","a":1}` fills
//!   `a` and rescues nothing).
//! - Protobuf (`rescue_proto`): a top-level field number the stream's plan does not map is
//!   kept under its number as a string key: varint → its value as an unsigned 64-bit number,
//!   fixed64 / fixed32 → the unsigned number, length-delimited → standard base64 (padded); a
//!   number that occurs more than once → an array of its values in wire order. Keys follow
//!   the first occurrence of each number. Unknown fields inside nested messages are skipped
//!   (protobuf semantics: the message still fits its STRUCT column), and so are groups
//!   (deprecated; their contents have no JSON form worth keeping).
//!
//! The text depends only on the record's bytes and the schema (and, for protobuf, the
//! plan), so decoding the same record again — a WAL replay — gives the same text. A schema
//! that has a column named `_rescued_data` (any case) cannot be given the column
//! ([`check_rescuable`]), so the name always means this column.

use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::ArrayRef;
use arrow_schema::{DataType, Field};

use crate::convert::compact_json;
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

/// The members of one JSON object text, written in order: `{"k":v,...}`.
#[derive(Debug, Default)]
pub(crate) struct ObjectText {
    text: String,
}

impl ObjectText {
    /// Starts the member `key` (JSON-escaped here); its value follows.
    pub(crate) fn key(&mut self, key: &str) {
        self.text.push(if self.text.is_empty() { '{' } else { ',' });
        // Serialising a string cannot fail; the fallback keeps the text valid JSON anyway.
        let quoted = serde_json::to_string(key).unwrap_or_else(|_| String::from("\"\""));
        self.text.push_str(&quoted);
        self.text.push(':');
    }

    /// Appends a JSON value text with whitespace outside strings dropped.
    pub(crate) fn compact(&mut self, json: &str) {
        self.text.push_str(&compact_json(json));
    }

    /// The object text, or `None` if it has no members.
    pub(crate) fn finish(mut self) -> Option<String> {
        if self.text.is_empty() {
            return None;
        }
        self.text.push('}');
        Some(self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_text_escapes_keys_and_compacts_values() {
        let mut object = ObjectText::default();
        object.key("a\"b");
        object.compact("{ \"x\" : [1, 2] }");
        object.key("c");
        object.compact("3");
        assert_eq!(
            object.finish().as_deref(),
            Some(r#"{"a\"b":{"x":[1,2]},"c":3}"#)
        );
        assert_eq!(ObjectText::default().finish(), None);
    }

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
