//! zeroparser: descriptor-driven, single-pass decoding of protobuf and JSON records straight
//! into Arrow builders, checked against a Delta / Unity Catalog table schema.
//!
//! ```text
//! TableSchema::parse("id BIGINT NOT NULL, tags ARRAY<STRING>")   schema, schema_text
//!   │  .arrow_schema()                                           arrow_types
//!   ▼
//! ProtoPlan::compile(descriptor, &schema)   once per stream      descriptor, plan, proto_scalar
//!   ▼
//! RecordBatchBuilder::append_proto / append_json, per record     batch
//!   │  flat tables, protobuf: one pass, no allocation            wire, visit, flat
//!   │    (ProtoPlan::visit → columns; a failed record is cut back)
//!   │  otherwise:
//!   │  1. decode into a per-record value tree (borrows input)    wire, proto_decode, json_decode
//!   │  2. validate it (NOT NULL, duplicate map keys)             value, convert, text_formats
//!   │  3. append to the Arrow builders (cannot fail)             builders
//!   ▼
//! RecordBatchBuilder::finish() -> RecordBatch
//! ```
//!
//! Opt-in: `RecordBatchBuilder::with_rescued_data` adds a `_rescued_data` column that keeps
//! what does not fit the schema instead of failing the record (`rescue`, `json_rescue`,
//! `rescue_proto`); builders without it run the default paths unchanged.
//!
//! A failed append leaves the builder untouched; errors name the field path and, for
//! protobuf, the byte offset. Nothing here panics on input bytes.

mod arrow;
mod error;
mod json;
mod path;
mod proto;
mod rescue;
mod schema;
mod value;

pub use arrow::RecordBatchBuilder;
pub use error::{DecodeError, DecodeErrorKind, SchemaError, WireType};
pub use path::{FieldPath, Segment};
pub use proto::wire::MAX_DEPTH as MAX_RECORD_DEPTH;
pub use proto::{ProtoPlan, Visitor};
pub use rescue::{check_rescuable, RESCUED_DATA_COLUMN};
pub use schema::{Column, ColumnType, TableSchema, MAX_DEPTH};
pub use value::Scalar;
