//! Decoded values and the checks between decoding and the Arrow builders: the per-record
//! value tree (`tree`), one scalar in its column's representation (`scalar`), the range
//! checks both decoders share (`convert`), VARIANT text (`variant`) and the validation pass
//! over a decoded record (`finalize`).

mod convert;
mod finalize;
mod scalar;
mod tree;
mod variant;

pub(crate) use convert::{float_value, int_value};
pub(crate) use finalize::{finalize, finalize_column};
pub use scalar::Scalar;
pub(crate) use tree::{render_key, Value};
pub(crate) use variant::{compact_json, variant_text};
