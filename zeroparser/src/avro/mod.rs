//! Avro records: the writer schema (`avro_schema_json`) parsed by `apache-avro` into an
//! arena of writer types (`types`), compiled once per stream against the table schema
//! (`compile` into `plan`), and raw datums — no container framing — decoded by our own
//! single pass (`decode`, over the primitives in `reader` and the computed values in
//! `scalar`) straight into the Arrow columns through the JSON sink the columns already
//! implement. Top-level writer fields the table has no column for are rendered as JSON
//! (`render`) into `_rescued_data` when the builder keeps it.

mod compile;
mod decode;
mod plan;
mod reader;
mod render;
mod scalar;
mod types;

pub(crate) use decode::decode_into;
pub use plan::AvroPlan;
