//! JSON records: one object per record, keys naming columns (exact, else ASCII
//! case-insensitive), decoded in one pass into the per-record value tree.
//!
//! The decoder is a serde `DeserializeSeed` driven by the table schema, so strings without
//! escapes are borrowed from the input and nothing is built that the schema does not ask for.
//! A type error is recorded in a side slot as a structured [`DecodeError`] and surfaces
//! through serde as an opaque error; each enclosing level adds its path segment while serde
//! unwinds. Errors that did not come from the schema (bad syntax) are `InvalidJson`.
//!
//! Accepted forms: integers as JSON integers or integer strings (range-checked); FLOAT/DOUBLE
//! also as numeric strings and `"NaN"`, `"Infinity"`, `"-Infinity"`; BINARY as base64; DATE as
//! days or `YYYY-MM-DD`; TIMESTAMP as µs or RFC 3339; TIMESTAMP_NTZ as µs or
//! `YYYY-MM-DD[T ]HH:MM:SS[.ffffff]`; VARIANT as any JSON value, stored as compact text;
//! `null` as NULL. Duplicate keys: the last one wins.
//!
//! For a builder with the rescued-data column the record's top level is read by
//! `json_rescue` instead of `fill_struct` (the `FillRecord` the record seed is given);
//! every level below goes through the same seeds.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::convert::{compact_json, float_value, int_value, Target};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::json_rescue;
use crate::path::Segment;
use crate::schema::{Column, ColumnType};
use crate::text_formats::{decode_base64, parse_date, parse_timestamp, parse_timestamp_ntz};
use crate::value::Value;

/// The table schema prepared for JSON decoding (name lookup tables).
#[derive(Debug, Clone)]
pub(crate) struct JsonPlan {
    root: StructPlan,
}

#[derive(Debug, Clone)]
pub(crate) struct StructPlan {
    pub(crate) columns: Vec<JsonColumn>,
    exact: HashMap<String, usize>,
}

#[derive(Debug, Clone)]
pub(crate) struct JsonColumn {
    name: String,
    pub(crate) kind: JsonKind,
}

#[derive(Debug, Clone)]
pub(crate) enum JsonKind {
    Scalar(Target),
    Array(Box<JsonKind>),
    Map {
        key: Option<Target>,
        value: Box<JsonKind>,
    },
    Struct(StructPlan),
}

impl JsonPlan {
    pub(crate) fn new(columns: &[Column]) -> Self {
        Self {
            root: StructPlan::new(columns),
        }
    }
}

impl StructPlan {
    fn new(columns: &[Column]) -> Self {
        let mut exact = HashMap::with_capacity(columns.len());
        for (i, column) in columns.iter().enumerate() {
            exact.entry(column.name.clone()).or_insert(i);
        }
        Self {
            columns: columns
                .iter()
                .map(|c| JsonColumn {
                    name: c.name.clone(),
                    kind: JsonKind::new(&c.data_type),
                })
                .collect(),
            exact,
        }
    }

    pub(crate) fn find(&self, key: &str) -> Option<usize> {
        self.exact.get(key).copied().or_else(|| {
            self.columns
                .iter()
                .position(|c| c.name.eq_ignore_ascii_case(key))
        })
    }
}

impl JsonKind {
    fn new(data_type: &ColumnType) -> Self {
        match data_type {
            ColumnType::Array { element, .. } => JsonKind::Array(Box::new(JsonKind::new(element))),
            ColumnType::Map { key, value, .. } => JsonKind::Map {
                key: Target::of(key),
                value: Box::new(JsonKind::new(value)),
            },
            ColumnType::Struct(columns) => JsonKind::Struct(StructPlan::new(columns)),
            scalar => JsonKind::Scalar(Target::of(scalar).unwrap_or(Target::Variant)),
        }
    }
}

/// Where the structured error waits while serde unwinds.
pub(crate) type Side = RefCell<Option<DecodeError>>;

/// Decodes one JSON record into one slot per top-level column.
pub(crate) fn decode_record<'a>(
    plan: &JsonPlan,
    record: &'a str,
) -> Result<Vec<Value<'a>>, DecodeError> {
    decode(Plain(&plan.root), record)
}

/// Decodes one JSON record into one slot per top-level column, rescuing what does not fit
/// `columns` (the plan's columns) into the rescued-data text (see `json_rescue`).
pub(crate) fn decode_record_rescuing<'a>(
    plan: &JsonPlan,
    columns: &[Column],
    record: &'a str,
) -> Result<(Vec<Value<'a>>, Option<String>), DecodeError> {
    decode(Rescuing(&plan.root, columns), record)
}

fn decode<'a, F: FillRecord>(fill: F, record: &'a str) -> Result<F::Output<'a>, DecodeError> {
    let side: Side = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(record);
    let result = RecordSeed { fill, side: &side }
        .deserialize(&mut deserializer)
        .and_then(|slots| deserializer.end().map(|()| slots));
    result.map_err(|error| structured(side, &error))
}

/// How a record object's members become the decode's output.
trait FillRecord {
    type Output<'de>;

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

/// What does not fit is rescued (`json_rescue`); the plan's columns come along for their
/// nullability.
struct Rescuing<'p>(&'p StructPlan, &'p [Column]);

impl FillRecord for Rescuing<'_> {
    type Output<'de> = (Vec<Value<'de>>, Option<String>);

    fn fill<'de, A: MapAccess<'de>>(
        self,
        side: &Side,
        map: A,
    ) -> Result<Self::Output<'de>, A::Error> {
        json_rescue::fill_record(self.0, self.1, side, map)
    }
}

/// The structured cause of a failed decode: the one in `side`, else a JSON syntax error.
pub(crate) fn structured(side: Side, error: &serde_json::Error) -> DecodeError {
    side.into_inner().unwrap_or_else(|| {
        DecodeError::new(DecodeErrorKind::InvalidJson {
            reason: error.to_string(),
        })
    })
}

/// Records `error` as the structured cause and returns serde's opaque error.
pub(crate) fn fail<E: de::Error>(side: &Side, error: DecodeError) -> E {
    let message = error.to_string();
    *side.borrow_mut() = Some(error);
    E::custom(message)
}

fn fail_kind<E: de::Error>(side: &Side, kind: DecodeErrorKind) -> E {
    fail(side, DecodeError::new(kind))
}

/// Adds `segment` to the structured cause, if there is one, as the error passes outwards.
fn wrap<E>(side: &Side, error: E, segment: impl FnOnce() -> Segment) -> E {
    let mut slot = side.borrow_mut();
    if let Some(cause) = slot.take() {
        *slot = Some(cause.within(segment()));
    }
    error
}

fn wrong_type<E: de::Error>(side: &Side, expected: &'static str, found: &'static str) -> E {
    fail_kind(side, DecodeErrorKind::JsonWrongType { expected, found })
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

/// Reads an object's members into one slot per column of `plan`.
fn fill_struct<'de, A: MapAccess<'de>>(
    plan: &StructPlan,
    side: &Side,
    mut map: A,
) -> Result<Vec<Value<'de>>, A::Error> {
    let mut slots = vec![Value::Null; plan.columns.len()];
    while let Some(key) = map.next_key_seed(KeySeed)? {
        let Some((index, column)) = plan
            .find(&key)
            .and_then(|i| plan.columns.get(i).map(|c| (i, c)))
        else {
            return Err(fail_kind(
                side,
                DecodeErrorKind::JsonUnknownField {
                    name: key.into_owned(),
                },
            ));
        };
        let value = map
            .next_value_seed(ValueSeed {
                kind: &column.kind,
                side,
            })
            .map_err(|e| wrap(side, e, || Segment::Field(column.name.clone())))?;
        if let Some(slot) = slots.get_mut(index) {
            *slot = value;
        }
    }
    Ok(slots)
}

/// An object key, borrowed when it has no escapes.
pub(crate) struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// One value of a column of `kind`.
#[derive(Clone, Copy)]
pub(crate) struct ValueSeed<'p> {
    pub(crate) kind: &'p JsonKind,
    pub(crate) side: &'p Side,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        if let JsonKind::Scalar(Target::Variant) = self.kind {
            let raw: &'de RawValue = de::Deserialize::deserialize(deserializer)?;
            let text = raw.get();
            if text == "null" {
                return Ok(Value::Null);
            }
            return Ok(Value::Str(compact_json(text)));
        }
        deserializer.deserialize_any(self)
    }
}

impl ValueSeed<'_> {
    fn target(&self) -> Option<Target> {
        match self.kind {
            JsonKind::Scalar(target) => Some(*target),
            _ => None,
        }
    }

    fn kind_name(&self) -> &'static str {
        match self.kind {
            JsonKind::Scalar(target) => expected_json(*target),
            JsonKind::Array(_) => "array",
            JsonKind::Map { .. } | JsonKind::Struct(_) => "object",
        }
    }

    fn integer<'de, E: de::Error>(self, value: i128) -> Result<Value<'de>, E> {
        let converted = match self.target() {
            Some(Target::Float) => float_value(value as f64).map(Value::Float),
            Some(Target::Double) => Ok(Value::Double(value as f64)),
            Some(target) if target.int_range().is_some() => {
                int_value(value, target).map(Value::Int)
            }
            _ => return Err(wrong_type(self.side, self.kind_name(), "number")),
        };
        converted.map_err(|kind| fail_kind(self.side, kind))
    }

    fn string<'de, E: de::Error>(self, text: Cow<'de, str>) -> Result<Value<'de>, E> {
        let Some(target) = self.target() else {
            return Err(wrong_type(self.side, self.kind_name(), "string"));
        };
        string_value(target, text).map_err(|kind| fail_kind(self.side, kind))
    }
}

/// What a JSON value for `target` must look like, for messages.
fn expected_json(target: Target) -> &'static str {
    match target {
        Target::TinyInt | Target::SmallInt | Target::Int | Target::BigInt => "integer",
        Target::Float | Target::Double => "number",
        Target::String => "string",
        Target::Variant => "any JSON value",
        Target::Boolean => "bool",
        Target::Binary => "base64 string",
        Target::Date => "integer days or YYYY-MM-DD string",
        Target::Timestamp => "integer microseconds or RFC 3339 string",
        Target::TimestampNtz => "integer microseconds or YYYY-MM-DD HH:MM:SS string",
    }
}

/// Converts a JSON string to a column value.
fn string_value(target: Target, text: Cow<'_, str>) -> Result<Value<'_>, DecodeErrorKind> {
    match target {
        Target::String | Target::Variant => Ok(Value::Str(text)),
        Target::TinyInt | Target::SmallInt | Target::Int | Target::BigInt => {
            let value = text
                .parse::<i128>()
                .map_err(|_| DecodeErrorKind::JsonWrongType {
                    expected: "integer",
                    found: "string that is not an integer",
                })?;
            int_value(value, target).map(Value::Int)
        }
        Target::Float | Target::Double => {
            let value = match text.as_ref() {
                "NaN" => f64::NAN,
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                other => other.parse::<f64>().ok().filter(|v| v.is_finite()).ok_or(
                    DecodeErrorKind::JsonWrongType {
                        expected: "number",
                        found: "string that is not a number",
                    },
                )?,
            };
            if target == Target::Float {
                float_value(value).map(Value::Float)
            } else {
                Ok(Value::Double(value))
            }
        }
        Target::Boolean => Err(DecodeErrorKind::JsonWrongType {
            expected: "bool",
            found: "string",
        }),
        Target::Binary => decode_base64(&text).map(|bytes| Value::Bytes(Cow::Owned(bytes))),
        Target::Date => parse_date(&text).map(Value::Int),
        Target::Timestamp => parse_timestamp(&text).map(Value::Int),
        Target::TimestampNtz => parse_timestamp_ntz(&text).map(Value::Int),
    }
}

/// Converts an object key to a MAP key value.
fn key_value(target: Option<Target>, text: Cow<'_, str>) -> Result<Value<'_>, DecodeErrorKind> {
    match target {
        Some(Target::Boolean) => match text.as_ref() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(DecodeErrorKind::JsonWrongType {
                expected: "\"true\" or \"false\" key",
                found: "other string",
            }),
        },
        Some(target) => string_value(target, text),
        None => Err(DecodeErrorKind::JsonWrongType {
            expected: "scalar map key type",
            found: "string",
        }),
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind_name())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        match self.target() {
            Some(Target::Boolean) => Ok(Value::Bool(v)),
            _ => Err(wrong_type(self.side, self.kind_name(), "bool")),
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.integer(i128::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.integer(i128::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        match self.target() {
            Some(Target::Float) => float_value(v)
                .map(Value::Float)
                .map_err(|kind| fail_kind(self.side, kind)),
            Some(Target::Double) => Ok(Value::Double(v)),
            // An integral number written with a fraction or exponent (`3.0`, `1e3`).
            Some(target) if target.int_range().is_some() => {
                if v.is_finite() && v.fract() == 0.0 {
                    self.integer(v as i128)
                } else {
                    Err(wrong_type(self.side, "integer", "number with a fraction"))
                }
            }
            _ => Err(wrong_type(self.side, self.kind_name(), "number")),
        }
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        self.string(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.string(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        self.string(Cow::Owned(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let JsonKind::Array(element) = self.kind else {
            return Err(wrong_type(self.side, self.kind_name(), "array"));
        };
        let seed = ValueSeed {
            kind: element,
            side: self.side,
        };
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        loop {
            let index = items.len();
            match seq
                .next_element_seed(seed)
                .map_err(|e| wrap(self.side, e, || Segment::Index(index)))?
            {
                Some(item) => items.push(item),
                None => break,
            }
        }
        Ok(Value::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        match self.kind {
            JsonKind::Struct(plan) => Ok(Value::Struct(fill_struct(plan, self.side, map)?, None)),
            JsonKind::Map { key, value } => {
                let seed = ValueSeed {
                    kind: value,
                    side: self.side,
                };
                let mut entries = Vec::new();
                while let Some(text) = map.next_key_seed(KeySeed)? {
                    let segment = || Segment::Key(text.to_string());
                    let item = map
                        .next_value_seed(seed)
                        .map_err(|e| wrap(self.side, e, segment))?;
                    let key = key_value(*key, text.clone()).map_err(|kind| {
                        fail(self.side, DecodeError::new(kind).within(segment()))
                    })?;
                    entries.push((key, item));
                }
                Ok(Value::Map(entries))
            }
            _ => Err(wrong_type(self.side, self.kind_name(), "object")),
        }
    }
}
