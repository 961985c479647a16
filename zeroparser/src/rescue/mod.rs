//! The rescued-data column: where a table that opts in keeps what a record carried that the
//! schema could not hold, instead of rejecting the record.
//!
//! A builder made with [`RecordBatchBuilder::with_rescued_data`](crate::RecordBatchBuilder)
//! ends its batches with one more column, [`RESCUED_DATA_COLUMN`] (`_rescued_data`, nullable
//! STRING), holding one JSON object text per row, or null when the record had nothing to
//! rescue. The unit rescued is always a top-level field of the record:
//!
//! - JSON (`json::rescue`): a top-level key that names no column is kept under that key with
//!   its value as the record wrote it (compacted: whitespace outside strings dropped, nested
//!   objects and arrays included). A top-level value that does not fit its column — wrong
//!   JSON kind, out of range, bad base64 / date / timestamp text, or anything inside it that
//!   does not fit (an unknown key in a STRUCT, a null array element where elements are NOT
//!   NULL, …) — leaves the column null and is kept under its key, when the column is
//!   nullable; a NOT NULL column that does not fit fails the record with the same error as
//!   without rescue. Nothing is rescued below the top level: a STRUCT value is kept whole or
//!   not at all. Duplicate keys: the last one wins, as for columns (`{"a":"x","a":1}` fills
//!   `a` and rescues nothing).
//! - Protobuf (`rescue::proto`): a top-level field number the stream's plan does not map is
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

mod column;
mod object;
mod proto;

pub(crate) use column::{arrow_field, RescuedColumn};
pub use column::{check_rescuable, RESCUED_DATA_COLUMN};
pub(crate) use object::ObjectText;
pub(crate) use proto::rescue_unknown;
