//! JSON records: the schema prepared for decoding (`plan`), one record decoded straight into
//! the Arrow columns through a [`JsonSink`] (`into`, its text read by the strict scanner in
//! `scan`) or into the per-record value tree
//! (`decode`, with the serde seeds in `seed`, string conversions in `convert` and
//! `text_formats`, the structured-error slot in `side`), and the rescuing decode of a
//! builder with the rescued-data column (`rescue`).

mod convert;
mod decode;
mod into;
mod plan;
mod rescue;
mod scan;
mod seed;
mod side;
mod text_formats;

pub(crate) use decode::decode_record;
pub(crate) use into::{decode_into, JsonSink, RECORD};
pub(crate) use plan::JsonPlan;
pub(crate) use rescue::decode_record_rescuing;
