//! The serde seeds that read one value of a column ([`ValueSeed`]), an object key
//! ([`KeySeed`]) and the members of a struct object ([`fill_struct`]) into the per-record
//! value tree, borrowing strings without escapes from the input.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::convert::{double_value, expected_json, integer_value, key_value, string_value};
use super::plan::{JsonKind, StructPlan};
use super::side::{fail, fail_kind, wrap, wrong_type, Side};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::path::Segment;
use crate::schema::ColumnType;
use crate::value::{compact_json, Value};

/// Reads an object's members into one slot per column of `plan`.
pub(super) fn fill_struct<'de, A: MapAccess<'de>>(
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
        if let JsonKind::Scalar(ColumnType::Variant) = self.kind {
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

impl<'p> ValueSeed<'p> {
    fn target(&self) -> Option<&'p ColumnType> {
        match self.kind {
            JsonKind::Scalar(target) => Some(target),
            _ => None,
        }
    }

    fn kind_name(&self) -> &'static str {
        match self.kind {
            JsonKind::Scalar(target) => expected_json(target),
            JsonKind::Array(_) => "array",
            JsonKind::Map { .. } | JsonKind::Struct(_) => "object",
        }
    }

    fn integer<'de, E: de::Error>(self, value: i128) -> Result<Value<'de>, E> {
        let Some(target) = self.target() else {
            return Err(wrong_type(self.side, self.kind_name(), "number"));
        };
        integer_value(target, value).map_err(|kind| fail_kind(self.side, kind))
    }

    fn string<'de, E: de::Error>(self, text: Cow<'de, str>) -> Result<Value<'de>, E> {
        let Some(target) = self.target() else {
            return Err(wrong_type(self.side, self.kind_name(), "string"));
        };
        string_value(target, text).map_err(|kind| fail_kind(self.side, kind))
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
            Some(ColumnType::Boolean) => Ok(Value::Bool(v)),
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
        let Some(target) = self.target() else {
            return Err(wrong_type(self.side, self.kind_name(), "number"));
        };
        double_value(target, v).map_err(|kind| fail_kind(self.side, kind))
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
                    let key = key_value(key.as_ref(), text.clone()).map_err(|kind| {
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
