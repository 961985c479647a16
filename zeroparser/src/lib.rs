//! zeroparser: descriptor-driven, single-pass decoding of protobuf and JSON records straight
//! into Arrow builders, checked against a Delta / Unity Catalog table schema.
//!
//! ```text
//! TableSchema::parse("id BIGINT NOT NULL, tags ARRAY<STRING>")   schema/ (column, text, sql,
//!   │  .arrow_schema()                                             validate), arrow/types
//!   ▼
//! ProtoPlan::compile(descriptor, &schema)   once per stream      proto/ (descriptor, compile,
//!   │                                                              plan, scalar, fast)
//!   ▼
//! AvroPlan::compile(avro_schema_json, &schema, rescued)          avro/ (types, compile,
//!   │  once per stream (Avro streams)                              plan)
//!   ▼
//! RecordBatchBuilder::append_proto / append_json / append_avro   arrow/batch
//!   │  one pass, no per-record value tree                        proto/ (wire, visit, visitor,
//!   │    (protobuf: ProtoPlan::visit; JSON: json::into, Avro:      fast, checks), json/into,
//!   │    avro::decode, both through the JsonSink → flat           avro/ (decode, reader,
//!   │                                                              scalar, render),
//!   │    columns or the column tree; a failed record is cut        arrow/ (leaf, flat, node,
//!   │    back through the offsets)                                 nested)
//!   │  records the one pass leaves undecided (rejected, NOT
//!   │  NULL left empty, repeated map key), and `_rescued_data`:
//!   │  1. decode into a per-record value tree (borrows input)    proto/tree, json/ (plan,
//!   │                                                              decode, seed, convert, side)
//!   │  2. validate it (NOT NULL, duplicate map keys)             value/ (tree, scalar, convert,
//!   │                                                              variant, finalize)
//!   │  3. append to the same columns (cannot fail)               arrow/ (flat, node)
//!   ▼
//! RecordBatchBuilder::finish() -> RecordBatch
//! ```
//!
//! Opt-in: `RecordBatchBuilder::with_rescued_data` adds a `_rescued_data` column that keeps
//! what does not fit the schema instead of failing the record (`rescue/`: the column, its
//! object text, the protobuf unknown-field pass; `json/rescue` for JSON records); builders
//! without it run the default paths unchanged.
//!
//! Imports point one way, with no cycles (`scripts/module-cycles.py zeroparser/src`):
//! `arrow` → `avro` → `json` → `rescue` → `proto` → `value` → `schema` (each may use any
//! to its right); `error` and `path` are shared by all.
//!
//! A failed append leaves the builder untouched; errors name the field path and, for
//! protobuf, the byte offset. Nothing here panics on input bytes.

mod arrow;
mod avro;
mod error;
mod json;
mod path;
mod proto;
mod rescue;
mod schema;
mod utf8;
mod value;

pub use arrow::RecordBatchBuilder;
pub use avro::AvroPlan;
pub use error::{DecodeError, DecodeErrorKind, SchemaError, WireType};
pub use path::{FieldPath, Segment};
pub use proto::wire::MAX_DEPTH as MAX_RECORD_DEPTH;
pub use proto::{ProtoPlan, Visitor};
pub use rescue::{check_rescuable, RESCUED_DATA_COLUMN};
pub use schema::{Column, ColumnType, TableSchema, MAX_DEPTH};
pub use value::Scalar;
