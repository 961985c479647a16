//! The top level of a JSON record for a builder with the rescued-data column: each member is
//! read as raw JSON text first, then decoded into its column; what has no column, and what
//! does not fit a nullable column, is kept as written in the rescued-data object text (the
//! rules are in the `rescue` module).
//!
//! Reading the raw text first is what lets a value that fails half-way (an array whose third
//! element has the wrong type) be kept whole. It costs a second scan of each top-level value,
//! paid only by tables that opt in; the default path (`json::seed::fill_struct`) is
//! untouched. NOT NULL columns keep today's behaviour exactly: their values are decoded and
//! checked like any other record's, and their errors fail the record.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::HashMap;

use serde::de::{DeserializeSeed, MapAccess};
use serde_json::value::RawValue;

use super::decode::{decode, FillRecord};
use super::plan::{JsonKind, JsonPlan, StructPlan};
use super::seed::{KeySeed, ValueSeed};
use super::side::{fail, structured, Side};
use crate::error::DecodeError;
use crate::rescue::ObjectText;
use crate::schema::Column;
use crate::value::{finalize_column, Value};

/// Decodes one JSON record into one slot per top-level column, rescuing what does not fit
/// `columns` (the plan's columns) into the rescued-data text.
pub(crate) fn decode_record_rescuing<'a>(
    plan: &JsonPlan,
    columns: &[Column],
    record: &'a str,
) -> Result<(Vec<Value<'a>>, Option<String>), DecodeError> {
    decode(Rescuing(&plan.root, columns), record)
}

/// What does not fit is rescued ; the plan's columns come along for their
/// nullability.
struct Rescuing<'p>(&'p StructPlan, &'p [Column]);

impl FillRecord for Rescuing<'_> {
    type Output<'de> = (Vec<Value<'de>>, Option<String>);

    fn fill<'de, A: MapAccess<'de>>(
        self,
        side: &Side,
        map: A,
    ) -> Result<Self::Output<'de>, A::Error> {
        fill_record(self.0, self.1, side, map)
    }
}

/// One member kept for the rescued-data text: its key as the record wrote it and its raw
/// value text.
struct Kept<'de> {
    key: Cow<'de, str>,
    raw: &'de str,
}

/// The members kept so far, in order; a later member with the same identity (the same
/// unknown key, or the same column) replaces the earlier one in its position.
#[derive(Default)]
struct KeptMembers<'de> {
    members: Vec<Option<Kept<'de>>>,
    by_key: HashMap<Cow<'de, str>, usize>,
    by_column: HashMap<usize, usize>,
}

impl<'de> KeptMembers<'de> {
    fn keep_unknown(&mut self, key: Cow<'de, str>, raw: &'de str) {
        let entry = self.by_key.entry(key.clone());
        place(&mut self.members, entry, Kept { key, raw });
    }

    fn keep_column(&mut self, column: usize, key: Cow<'de, str>, raw: &'de str) {
        let entry = self.by_column.entry(column);
        place(&mut self.members, entry, Kept { key, raw });
    }

    /// A later member filled `column`: what an earlier one left there is no longer rescued.
    fn forget_column(&mut self, column: usize) {
        if let Some(at) = self.by_column.remove(&column) {
            if let Some(member) = self.members.get_mut(at) {
                *member = None;
            }
        }
    }

    fn text(self) -> Option<String> {
        let mut object = ObjectText::default();
        for Kept { key, raw } in self.members.into_iter().flatten() {
            object.key(&key);
            object.compact(raw);
        }
        object.finish()
    }
}

/// Puts `kept` where the member with its identity (`entry`) is, or at the end.
fn place<'de, K>(
    members: &mut Vec<Option<Kept<'de>>>,
    entry: Entry<'_, K, usize>,
    kept: Kept<'de>,
) {
    match entry {
        Entry::Occupied(at) => {
            if let Some(member) = members.get_mut(*at.get()) {
                *member = Some(kept);
            }
        }
        Entry::Vacant(at) => {
            at.insert(members.len());
            members.push(Some(kept));
        }
    }
}

/// Reads a record object into one slot per column of `plan` (whose columns are `columns`)
/// and the rescued-data text.
pub(crate) fn fill_record<'de, A: MapAccess<'de>>(
    plan: &StructPlan,
    columns: &[Column],
    side: &Side,
    mut map: A,
) -> Result<(Vec<Value<'de>>, Option<String>), A::Error> {
    let mut slots = vec![Value::Null; plan.columns.len()];
    let mut kept = KeptMembers::default();
    while let Some(key) = map.next_key_seed(KeySeed)? {
        let raw: &'de RawValue = map.next_value()?;
        let raw = raw.get();
        let found = plan
            .find(&key)
            .and_then(|index| Some((index, &plan.columns.get(index)?.kind, columns.get(index)?)));
        let Some((index, kind, column)) = found else {
            kept.keep_unknown(key, raw);
            continue;
        };
        match decode_column(kind, column, raw) {
            Ok(value) => {
                if let Some(slot) = slots.get_mut(index) {
                    *slot = value;
                }
                kept.forget_column(index);
            }
            Err(_) if column.nullable => {
                if let Some(slot) = slots.get_mut(index) {
                    *slot = Value::Null;
                }
                kept.keep_column(index, key, raw);
            }
            Err(error) => return Err(fail(side, error)),
        }
    }
    Ok((slots, kept.text()))
}

/// Decodes the raw text of one top-level value into `column`; a nullable column's value is
/// also validated (NOT NULL elements, fields and map values inside it), so that anything in
/// it that does not fit is found here. A NOT NULL column is validated with the whole record.
fn decode_column<'de>(
    kind: &JsonKind,
    column: &Column,
    raw: &'de str,
) -> Result<Value<'de>, DecodeError> {
    let side: Side = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(raw);
    let mut value = ValueSeed { kind, side: &side }
        .deserialize(&mut deserializer)
        .map_err(|error| structured(side, &error).in_field(&column.name))?;
    if column.nullable {
        finalize_column(column, &mut value, None)?;
    }
    Ok(value)
}
