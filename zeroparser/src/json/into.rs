//! JSON records decoded in one pass straight into the Arrow columns, through a
//! [`JsonSink`] (implemented by `arrow`, which this module cannot import): no per-record
//! value tree. Scalars go through the same [`ValueSeed`] conversions as the value-tree
//! decode; objects, arrays and maps are walked here and reported to the sink by column node.
//!
//! A member is a write to the open row of its column (a repeated key replaces it, `null`
//! clears it); an array element, map key or map value is a committed row of the element,
//! key or value column. Whatever fails here (syntax, a type, an unknown member, or the sink
//! refusing a repeated map key) is only a signal: the caller cuts the columns back and
//! decodes the record through the value tree, which gives the error its path.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::convert::key_value;
use super::decode::{decode, FillRecord};
use super::plan::{JsonKind, JsonPlan, StructPlan};
use super::seed::{KeySeed, ValueSeed};
use super::side::Side;
use crate::value::Value;

/// The node of the record (its columns are its children).
pub(crate) const RECORD: usize = 0;

/// Where a JSON record's values go, by column node.
pub(crate) trait JsonSink {
    /// Child `index` of container `node`: a struct's field, a list's element (0), a map's
    /// key (0) or value (1).
    fn child(&self, node: usize, index: usize) -> usize;
    /// Writes the open row of scalar column `node` (replacing a value written before).
    fn set(&mut self, node: usize, value: &Value<'_>);
    /// Commits `value` (or a NULL) as the next row of `node` (a list element or map value).
    fn push(&mut self, node: usize, value: &Value<'_>);
    /// Commits `key` as the next key of map `map`.
    fn push_key(&mut self, map: usize, key: &Value<'_>);
    /// Removes the open row of `node` (so it is NULL unless written again).
    fn clear(&mut self, node: usize);
    /// Marks the open row of container `node` present.
    fn begin(&mut self, node: usize);
    /// Commits the open row of container `node` (a list element or map value).
    fn commit(&mut self, node: usize);
}

/// Decodes `record` into `sink`; `Err(())` if anything failed (see the module doc).
pub(crate) fn decode_into<S: JsonSink>(
    plan: &JsonPlan,
    record: &str,
    sink: &mut S,
) -> Result<(), ()> {
    decode(
        Record {
            plan: &plan.root,
            sink,
        },
        record,
    )
    .map_err(|_| ())
}

/// The record object, read into the record node's columns.
struct Record<'p, 's, S> {
    plan: &'p StructPlan,
    sink: &'s mut S,
}

impl<S: JsonSink> FillRecord for Record<'_, '_, S> {
    type Output<'de> = ();

    fn fill<'de, A: MapAccess<'de>>(self, side: &Side, map: A) -> Result<(), A::Error> {
        fill_struct(self.plan, RECORD, self.sink, side, map)
    }
}

/// Reads an object's members into the columns of struct node `node`.
fn fill_struct<'de, A: MapAccess<'de>, S: JsonSink>(
    plan: &StructPlan,
    node: usize,
    sink: &mut S,
    side: &Side,
    mut map: A,
) -> Result<(), A::Error> {
    while let Some(key) = map.next_key_seed(KeySeed)? {
        let Some((index, column)) = plan
            .find(&key)
            .and_then(|i| plan.columns.get(i).map(|c| (i, c)))
        else {
            return Err(de::Error::custom("unknown member"));
        };
        map.next_value_seed(Into {
            kind: &column.kind,
            node: sink.child(node, index),
            element: false,
            sink: &mut *sink,
            side,
        })?;
    }
    Ok(())
}

/// One value of column node `node`: a member (`element: false`, the open row) or an
/// element, key or value (a committed row).
struct Into<'p, 's, S> {
    kind: &'p JsonKind,
    node: usize,
    element: bool,
    sink: &'s mut S,
    side: &'p Side,
}

impl<S: JsonSink> Into<'_, '_, S> {
    /// Starts the open row of a container (a member replaces what an earlier one wrote).
    fn begin(&mut self) {
        if !self.element {
            self.sink.clear(self.node);
        }
        self.sink.begin(self.node);
    }

    /// Ends a container value: elements are committed, members stay open.
    fn end(&mut self) {
        if self.element {
            self.sink.commit(self.node);
        }
    }
}

impl<'de, S: JsonSink> DeserializeSeed<'de> for Into<'_, '_, S> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if let JsonKind::Scalar(_) = self.kind {
            let value = ValueSeed {
                kind: self.kind,
                side: self.side,
            }
            .deserialize(deserializer)?;
            if self.element {
                self.sink.push(self.node, &value);
            } else {
                self.sink.set(self.node, &value);
            }
            return Ok(());
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de, S: JsonSink> Visitor<'de> for Into<'_, '_, S> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array or object")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        if self.element {
            self.sink.push(self.node, &Value::Null);
        } else {
            self.sink.clear(self.node);
        }
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let JsonKind::Array(element) = self.kind else {
            return Err(de::Error::custom("not an array column"));
        };
        self.begin();
        let child = self.sink.child(self.node, 0);
        while seq
            .next_element_seed(Into {
                kind: element,
                node: child,
                element: true,
                sink: &mut *self.sink,
                side: self.side,
            })?
            .is_some()
        {}
        self.end();
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        match self.kind {
            JsonKind::Struct(plan) => {
                self.begin();
                fill_struct(plan, self.node, &mut *self.sink, self.side, map)?;
            }
            JsonKind::Map { key, value } => {
                self.begin();
                let value_node = self.sink.child(self.node, 1);
                while let Some(text) = map.next_key_seed(KeySeed)? {
                    let key =
                        key_value(key.as_ref(), text).map_err(|_| de::Error::custom("key"))?;
                    self.sink.push_key(self.node, &key);
                    map.next_value_seed(Into {
                        kind: value,
                        node: value_node,
                        element: true,
                        sink: &mut *self.sink,
                        side: self.side,
                    })?;
                }
            }
            _ => return Err(de::Error::custom("not an object column")),
        }
        self.end();
        Ok(())
    }
}
