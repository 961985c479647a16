//! The value-tree path the single-pass columns (`arrow::flat`, `arrow::nested`) hand a
//! record to when their one pass leaves it undecided: decode into the per-record value
//! tree, validate it, append it (see `value`). Errors are the value tree's.

use crate::error::DecodeError;
use crate::json::{self, JsonPlan};
use crate::proto::{decode_record, ProtoPlan};
use crate::schema::Column;
use crate::value::{finalize, Value};

/// Columns that take a decoded and validated record of the value tree.
pub(super) trait ValueRows {
    /// Appends one record's top-level values (cannot fail).
    fn append_values(&mut self, slots: &[Value<'_>]);
}

/// Decodes protobuf `record` through the value tree and appends it to `rows`.
#[cold]
#[inline(never)]
pub(super) fn append_proto<R: ValueRows>(
    rows: &mut R,
    plan: &ProtoPlan,
    record: &[u8],
    columns: &[Column],
) -> Result<(), DecodeError> {
    let mut slots = decode_record(plan, record)?;
    finalize(columns, &mut slots, Some(0))?;
    rows.append_values(&slots);
    Ok(())
}

/// Decodes JSON `record` through the value tree and appends it to `rows`.
#[cold]
#[inline(never)]
pub(super) fn append_json<R: ValueRows>(
    rows: &mut R,
    plan: &JsonPlan,
    record: &str,
    columns: &[Column],
) -> Result<(), DecodeError> {
    let mut slots = json::decode_record(plan, record)?;
    finalize(columns, &mut slots, None)?;
    rows.append_values(&slots);
    Ok(())
}
