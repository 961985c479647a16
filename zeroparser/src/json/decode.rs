//! JSON records: one object per record, keys naming columns (exact, else ASCII
//! case-insensitive), decoded in one pass into the per-record value tree.
//!
//! The decoder is a serde `DeserializeSeed` driven by the table schema, so strings without
//! escapes are borrowed from the input and nothing is built that the schema does not ask for.
//! A type error is recorded in a side slot (`json::side`) as a structured `DecodeError`
//! and surfaces through serde as an opaque error. Errors that did not come from the schema (bad syntax) are `InvalidJson`.
//!
//! Accepted forms: integers as JSON integers or integer strings (range-checked); FLOAT/DOUBLE
//! also as numeric strings and `"NaN"`, `"Infinity"`, `"-Infinity"`; BINARY as base64; DATE as
//! days or `YYYY-MM-DD`; TIMESTAMP as µs or RFC 3339; TIMESTAMP_NTZ as µs or
//! `YYYY-MM-DD[T ]HH:MM:SS[.ffffff]`; VARIANT as any JSON value, stored as compact text;
//! `null` as NULL. Duplicate keys: the last one wins.
//!
//! For a builder with the rescued-data column the record's top level is read by
//! `json::rescue` instead of `fill_struct` (the `FillRecord` the record seed is given);
//! every level below goes through the same seeds.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::plan::{JsonPlan, StructPlan};
use super::seed::fill_struct;
use super::side::{fail_kind, structured, Side};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::value::Value;

/// Decodes one JSON record into one slot per top-level column.
pub(crate) fn decode_record<'a>(
    plan: &JsonPlan,
    record: &'a str,
) -> Result<Vec<Value<'a>>, DecodeError> {
    decode(Plain(&plan.root), record)
}

/// Decodes one JSON record, its members read by `fill`.
pub(super) fn decode<'a, F: FillRecord>(
    fill: F,
    record: &'a str,
) -> Result<F::Output<'a>, DecodeError> {
    let side: Side = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(record);
    let result = RecordSeed { fill, side: &side }
        .deserialize(&mut deserializer)
        .and_then(|slots| deserializer.end().map(|()| slots));
    result.map_err(|error| structured(side, &error))
}

/// How a record object's members become the decode's output.
pub(super) trait FillRecord {
    /// What the decode returns.
    type Output<'de>;

    /// Reads the record object's members.
    fn fill<'de, A: MapAccess<'de>>(
        self,
        side: &Side,
        map: A,
    ) -> Result<Self::Output<'de>, A::Error>;
}

/// Every member must fit a column.
struct Plain<'p>(&'p StructPlan);

impl FillRecord for Plain<'_> {
    type Output<'de> = Vec<Value<'de>>;

    fn fill<'de, A: MapAccess<'de>>(
        self,
        side: &Side,
        map: A,
    ) -> Result<Self::Output<'de>, A::Error> {
        fill_struct(self.0, side, map)
    }
}

/// A whole record, its members read by `fill`.
struct RecordSeed<'p, F> {
    fill: F,
    side: &'p Side,
}

impl<'de, F: FillRecord> DeserializeSeed<'de> for RecordSeed<'_, F> {
    type Value = F::Output<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, F: FillRecord> Visitor<'de> for RecordSeed<'_, F> {
    type Value = F::Output<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.fill.fill(self.side, map)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Err(fail_kind(
            self.side,
            DecodeErrorKind::JsonNotObject { found: "bool" },
        ))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Err(fail_kind(
            self.side,
            DecodeErrorKind::JsonNotObject { found: "number" },
        ))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Err(fail_kind(
            self.side,
            DecodeErrorKind::JsonNotObject { found: "number" },
        ))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Err(fail_kind(
            self.side,
            DecodeErrorKind::JsonNotObject { found: "number" },
        ))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Err(fail_kind(
            self.side,
            DecodeErrorKind::JsonNotObject { found: "string" },
        ))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(fail_kind(
            self.side,
            DecodeErrorKind::JsonNotObject { found: "null" },
        ))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(fail_kind(
            self.side,
            DecodeErrorKind::JsonNotObject { found: "array" },
        ))
    }
}
