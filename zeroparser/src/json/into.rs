//! JSON records decoded in one pass straight into the Arrow columns, through a
//! [`JsonSink`] (implemented by `arrow`, which this module cannot import): no per-record
//! value tree and no serde. The record's text is read by `json::scan`'s [`Scanner`] in the
//! order of the schema's plan; scalars go through the same conversions (`json::convert`) as
//! the value-tree decode; objects, arrays and maps are reported to the sink by column node.
//!
//! A member is a write to the open row of its column (a repeated key replaces it, `null`
//! clears it); an array element, map key or map value is a committed row of the element,
//! key or value column. Whatever fails here (syntax, a type, an unknown member, a form the
//! scanner leaves to serde_json, a VARIANT column, or the sink refusing a repeated map key)
//! is only a signal: the caller cuts the columns back and decodes the record through the
//! value tree, which accepts or rejects it and gives the error its path.

use super::convert::{double_value, integer_value, key_value, string_value};
use super::plan::{JsonKind, JsonPlan, StructPlan};
use super::scan::{Number, Scanner};
use std::borrow::Cow;

use crate::schema::ColumnType;
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
    /// [`set`](Self::set) of a string, without building a [`Value`].
    fn set_str(&mut self, node: usize, text: &str) {
        self.set(node, &Value::Str(Cow::Borrowed(text)));
    }
    /// [`push`](Self::push) of a string, without building a [`Value`].
    fn push_str(&mut self, node: usize, text: &str) {
        self.push(node, &Value::Str(Cow::Borrowed(text)));
    }
    /// [`set`](Self::set) of an integer, without building a [`Value`].
    fn set_int(&mut self, node: usize, value: i64) {
        self.set(node, &Value::Int(value));
    }
    /// [`push`](Self::push) of an integer, without building a [`Value`].
    fn push_int(&mut self, node: usize, value: i64) {
        self.push(node, &Value::Int(value));
    }
    /// [`set`](Self::set) of a DOUBLE, without building a [`Value`].
    fn set_double(&mut self, node: usize, value: f64) {
        self.set(node, &Value::Double(value));
    }
    /// [`push`](Self::push) of a DOUBLE, without building a [`Value`].
    fn push_double(&mut self, node: usize, value: f64) {
        self.push(node, &Value::Double(value));
    }
    /// [`push_key`](Self::push_key) of a STRING key, without building a [`Value`].
    fn push_key_str(&mut self, map: usize, text: &str) {
        self.push_key(map, &Value::Str(Cow::Borrowed(text)));
    }
    /// [`push_key`](Self::push_key) of an integer key, without building a [`Value`].
    fn push_key_int(&mut self, map: usize, value: i64) {
        self.push_key(map, &Value::Int(value));
    }
}

/// Decodes `record` into `sink`; `None` if anything failed (see the module doc).
pub(crate) fn decode_into<S: JsonSink>(plan: &JsonPlan, record: &str, sink: &mut S) -> Option<()> {
    let mut scanner = Scanner::new(record);
    scanner.eat(b'{')?;
    fill_struct(&plan.root, RECORD, sink, &mut scanner)?;
    scanner.at_end().then_some(())
}

/// Reads an object's members (after its `{`) into the columns of struct node `node`.
fn fill_struct<S: JsonSink>(
    plan: &StructPlan,
    node: usize,
    sink: &mut S,
    scanner: &mut Scanner<'_>,
) -> Option<()> {
    if scanner.empty(b'}')? {
        return Some(());
    }
    // The column after the previous member's: where the next member's column is looked
    // for first (see `StructPlan::member`).
    let mut next = 0;
    loop {
        let key = scanner.string()?;
        let index = plan.member(next, &key)?;
        next = index + 1;
        let column = plan.columns.get(index)?;
        scanner.eat(b':')?;
        value(&column.kind, sink.child(node, index), false, sink, scanner)?;
        if !scanner.more(b'}')? {
            return Some(());
        }
    }
}

/// One value of column node `node`: a member (`element: false`, the open row) or an
/// element, key or value (a committed row).
fn value<S: JsonSink>(
    kind: &JsonKind,
    node: usize,
    element: bool,
    sink: &mut S,
    scanner: &mut Scanner<'_>,
) -> Option<()> {
    let first = scanner.peek()?;
    if first == b'n' {
        scanner.literal(b"null")?;
        match (element, kind) {
            (true, _) => sink.push(node, &Value::Null),
            (false, JsonKind::Scalar(_)) => sink.set(node, &Value::Null),
            (false, _) => sink.clear(node),
        }
        return Some(());
    }
    match kind {
        JsonKind::Scalar(target) => write_scalar(target, first, node, element, sink, scanner)?,
        JsonKind::Array(item) => {
            scanner.eat(b'[')?;
            begin(sink, node, element);
            let child = sink.child(node, 0);
            if scanner.empty(b']')? {
            } else if let JsonKind::Scalar(target) = &**item {
                // Scalar elements (the common array) in a loop of their own.
                loop {
                    let first = scanner.peek()?;
                    if first == b'n' {
                        scanner.literal(b"null")?;
                        sink.push(child, &Value::Null);
                    } else {
                        write_scalar(target, first, child, true, sink, scanner)?;
                    }
                    if !scanner.more(b']')? {
                        break;
                    }
                }
            } else {
                loop {
                    value(item, child, true, sink, scanner)?;
                    if !scanner.more(b']')? {
                        break;
                    }
                }
            }
            end(sink, node, element);
        }
        JsonKind::Struct(plan) => {
            scanner.eat(b'{')?;
            begin(sink, node, element);
            fill_struct(plan, node, sink, scanner)?;
            end(sink, node, element);
        }
        JsonKind::Map { key, value: item } => {
            scanner.eat(b'{')?;
            begin(sink, node, element);
            let value_node = sink.child(node, 1);
            if !scanner.empty(b'}')? {
                loop {
                    let text = scanner.string()?;
                    write_key(key.as_ref(), text, node, sink)?;
                    scanner.eat(b':')?;
                    value(item, value_node, true, sink, scanner)?;
                    if !scanner.more(b'}')? {
                        break;
                    }
                }
            }
            end(sink, node, element);
        }
    }
    Some(())
}

/// Writes a scalar value other than `null`, starting with `first`, to `node` (a member:
/// its open row; `element`: a committed row); strings into STRING columns and integers into
/// integer columns without building a [`Value`].
#[inline(always)]
fn write_scalar<S: JsonSink>(
    target: &ColumnType,
    first: u8,
    node: usize,
    element: bool,
    sink: &mut S,
    scanner: &mut Scanner<'_>,
) -> Option<()> {
    match (target, first) {
        (ColumnType::String, b'"') => {
            let text = scanner.string()?;
            if element {
                sink.push_str(node, &text);
            } else {
                sink.set_str(node, &text);
            }
        }
        (ColumnType::Double, b'-' | b'0'..=b'9') => {
            // As `integer_value` and `double_value` convert for DOUBLE.
            let value = match scanner.number()? {
                Number::Unsigned(n) => n as f64,
                Number::Negative(n) => n as f64,
                Number::Double(v) => v,
            };
            if element {
                sink.push_double(node, value);
            } else {
                sink.set_double(node, value);
            }
        }
        (
            ColumnType::TinyInt | ColumnType::SmallInt | ColumnType::Int | ColumnType::BigInt,
            b'-' | b'0'..=b'9',
        ) => {
            // Out of range is only a signal here (the value-tree decode names the error),
            // so the bounds are checked inline in i64 rather than through `int_value`.
            let value = match scanner.number()? {
                Number::Unsigned(n) => i64::try_from(n).ok()?,
                Number::Negative(n) => n,
                Number::Double(v) => match double_value(target, v).ok()? {
                    Value::Int(i) => i,
                    _ => return None,
                },
            };
            if !target.holds_int(value) {
                return None;
            }
            if element {
                sink.push_int(node, value);
            } else {
                sink.set_int(node, value);
            }
        }
        _ => {
            let value = scalar(target, first, scanner)?;
            if element {
                sink.push(node, &value);
            } else {
                sink.set(node, &value);
            }
        }
    }
    Some(())
}

/// Commits object key `text` as the next key of map `node`: STRING and integer keys without
/// building a [`Value`] (an integer key as `string_value` parses it: `i64` holds every
/// integer column's range), others through `key_value`. Every key through `key_value` (an
/// `i128` parse and a `Value`) cost 10 % more instructions on the 1 KB map row.
#[inline(always)]
fn write_key<S: JsonSink>(
    target: Option<&ColumnType>,
    text: Cow<'_, str>,
    node: usize,
    sink: &mut S,
) -> Option<()> {
    match target {
        Some(ColumnType::String) => sink.push_key_str(node, &text),
        Some(
            target @ (ColumnType::TinyInt
            | ColumnType::SmallInt
            | ColumnType::Int
            | ColumnType::BigInt),
        ) => {
            let value = text.parse::<i64>().ok()?;
            if !target.holds_int(value) {
                return None;
            }
            sink.push_key_int(node, value);
        }
        _ => sink.push_key(node, &key_value(target, text).ok()?),
    }
    Some(())
}

/// A scalar value other than `null`, starting with `first`, converted for `target`.
#[inline(always)]
fn scalar<'a>(target: &ColumnType, first: u8, scanner: &mut Scanner<'a>) -> Option<Value<'a>> {
    match first {
        // VARIANT keeps the value's text, which serde_json's raw value validates.
        _ if matches!(target, ColumnType::Variant) => None,
        b'"' if matches!(target, ColumnType::String) => scanner.string().map(Value::Str),
        b'"' => string_value(target, scanner.string()?).ok(),
        b't' | b'f' if matches!(target, ColumnType::Boolean) => {
            let truth = first == b't';
            scanner.literal(if truth { b"true" } else { b"false" })?;
            Some(Value::Bool(truth))
        }
        b'-' | b'0'..=b'9' => match scanner.number()? {
            Number::Unsigned(n) => integer_value(target, i128::from(n)).ok(),
            Number::Negative(n) => integer_value(target, i128::from(n)).ok(),
            Number::Double(v) => double_value(target, v).ok(),
        },
        _ => None,
    }
}

/// Starts the open row of a container (a member replaces what an earlier one wrote).
#[inline(always)]
fn begin<S: JsonSink>(sink: &mut S, node: usize, element: bool) {
    if !element {
        sink.clear(node);
    }
    sink.begin(node);
}

/// Ends a container value: elements are committed, members stay open.
#[inline(always)]
fn end<S: JsonSink>(sink: &mut S, node: usize, element: bool) {
    if element {
        sink.commit(node);
    }
}
