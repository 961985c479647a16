//! The validation pass over a decoded record's value tree: NOT NULL columns, non-null array
//! elements and map values, and duplicate map keys collapsed (the last value wins).

use std::collections::HashMap;

use crate::error::{DecodeError, DecodeErrorKind};
use crate::path::Segment;
use crate::schema::{Column, ColumnType};
use crate::value::tree::{render_key, Value};

/// Validates a decoded record (or struct) against its columns: NOT NULL columns, non-null
/// array elements and map values are present, and duplicate map keys are collapsed (a later
/// entry replaces the earlier value, keeping the first entry's position).
pub(crate) fn finalize(
    columns: &[Column],
    slots: &mut [Value<'_>],
    offset: Option<usize>,
) -> Result<(), DecodeError> {
    for (column, value) in columns.iter().zip(slots.iter_mut()) {
        finalize_column(column, value, offset)?;
    }
    Ok(())
}

/// [`finalize`] for the value of one column.
pub(crate) fn finalize_column(
    column: &Column,
    value: &mut Value<'_>,
    offset: Option<usize>,
) -> Result<(), DecodeError> {
    finalize_value(&column.data_type, column.nullable, value, offset)
        .map_err(|e| e.in_field(&column.name))
}

fn finalize_value(
    data_type: &ColumnType,
    nullable: bool,
    value: &mut Value<'_>,
    offset: Option<usize>,
) -> Result<(), DecodeError> {
    match (data_type, value) {
        (_, Value::Null) => {
            if nullable {
                Ok(())
            } else {
                Err(not_null(offset))
            }
        }
        (
            ColumnType::Array {
                element,
                contains_null,
            },
            Value::List(items),
        ) => {
            for (index, item) in items.iter_mut().enumerate() {
                finalize_value(element, *contains_null, item, offset)
                    .map_err(|e| e.within(Segment::Index(index)))?;
            }
            Ok(())
        }
        (
            ColumnType::Map {
                value: value_type,
                value_contains_null,
                ..
            },
            Value::Map(entries),
        ) => {
            dedupe_map(entries);
            for (key, item) in entries.iter_mut() {
                finalize_value(value_type, *value_contains_null, item, offset)
                    .map_err(|e| e.within(Segment::Key(render_key(key))))?;
            }
            Ok(())
        }
        (ColumnType::Struct(columns), Value::Struct(fields, own_offset)) => {
            finalize(columns, fields, own_offset.or(offset))
        }
        _ => Ok(()),
    }
}

fn not_null(offset: Option<usize>) -> DecodeError {
    match offset {
        Some(offset) => DecodeError::at(DecodeErrorKind::NotNull, offset),
        None => DecodeError::new(DecodeErrorKind::NotNull),
    }
}

#[derive(Hash, PartialEq, Eq)]
enum KeyRef<'k> {
    Int(i64),
    Bool(bool),
    Str(&'k str),
    Bytes(&'k [u8]),
    Other(usize),
}

fn key_ref<'k>(key: &'k Value<'_>, position: usize) -> KeyRef<'k> {
    match key {
        Value::Int(i) => KeyRef::Int(*i),
        Value::Bool(b) => KeyRef::Bool(*b),
        Value::Str(s) => KeyRef::Str(s),
        Value::Bytes(b) => KeyRef::Bytes(b),
        // Keys of other types cannot occur in a valid schema; never merge them.
        _ => KeyRef::Other(position),
    }
}

/// Collapses duplicate keys in linear time: the first occurrence keeps its position and
/// takes the value of the last occurrence.
fn dedupe_map(entries: &mut Vec<(Value<'_>, Value<'_>)>) {
    if entries.len() < 2 {
        return;
    }
    // For each entry, the position of the first entry with the same key.
    let first: Vec<usize> = {
        let mut seen: HashMap<KeyRef<'_>, usize> = HashMap::with_capacity(entries.len());
        entries
            .iter()
            .enumerate()
            .map(|(i, (key, _))| *seen.entry(key_ref(key, i)).or_insert(i))
            .collect()
    };
    if first.iter().enumerate().all(|(i, f)| *f == i) {
        return;
    }
    let mut out: Vec<(Value<'_>, Value<'_>)> = Vec::with_capacity(entries.len());
    let mut out_position = vec![0usize; entries.len()];
    for (i, (key, value)) in entries.drain(..).enumerate() {
        let owner = first.get(i).copied().unwrap_or(i);
        if owner == i {
            if let Some(slot) = out_position.get_mut(i) {
                *slot = out.len();
            }
            out.push((key, value));
        } else {
            let target = out_position.get(owner).copied().unwrap_or(usize::MAX);
            if let Some(entry) = out.get_mut(target) {
                entry.1 = value;
            }
        }
    }
    *entries = out;
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn s(text: &str) -> Value<'_> {
        Value::Str(Cow::Borrowed(text))
    }

    #[test]
    fn later_map_entries_replace_earlier_values_in_first_position() {
        let mut entries = vec![
            (s("a"), Value::Int(1)),
            (s("b"), Value::Int(2)),
            (s("a"), Value::Int(3)),
            (s("c"), Value::Int(4)),
            (s("b"), Value::Int(5)),
        ];
        dedupe_map(&mut entries);
        assert_eq!(
            entries,
            vec![
                (s("a"), Value::Int(3)),
                (s("b"), Value::Int(5)),
                (s("c"), Value::Int(4))
            ]
        );
    }

    #[test]
    fn dedupe_of_many_distinct_keys_keeps_them_all() {
        let mut entries: Vec<_> = (0..10_000)
            .map(|i| (Value::Int(i), Value::Int(i)))
            .collect();
        dedupe_map(&mut entries);
        assert_eq!(entries.len(), 10_000);
    }

    #[test]
    fn a_null_in_a_not_null_struct_field_names_the_full_path() {
        let columns = vec![Column {
            name: "loc".into(),
            data_type: ColumnType::Struct(vec![Column {
                name: "lon".into(),
                data_type: ColumnType::Double,
                nullable: false,
            }]),
            nullable: true,
        }];
        let mut slots = vec![Value::Struct(vec![Value::Null], Some(7))];
        let error = finalize(&columns, &mut slots, Some(0)).expect_err("lon is NOT NULL");
        assert_eq!(error.kind(), &DecodeErrorKind::NotNull);
        assert_eq!(error.path().to_string(), "loc.lon");
        assert_eq!(error.offset(), Some(7));
    }
}
