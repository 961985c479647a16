//! One Avro datum decoded in a single pass straight into the Arrow columns, through the
//! same [`JsonSink`] the JSON one pass writes to (implemented by `arrow`'s flat columns and
//! column tree): no per-record value tree, strings and bytes borrowed from the datum.
//!
//! The plan walks the writer schema in writer order. A record field writes the open row of
//! its column (a union's `null` branch clears it); an array item or map value is a
//! committed row of the element or value column; a map key is a committed row of the key
//! column. Unlike JSON, nothing is left for a second decode: the compile already checked
//! every type and nullability, so what can still fail is the datum itself (truncated,
//! bad union or enum index, a value outside its column's range, bad UTF-8, a repeated map
//! key, bytes after the end), and the error names the field path and the byte offset.
//! The caller cuts the columns back on error.

use std::borrow::Cow;

use super::plan::{AvroPlan, FieldOp, IntOp, Op, RecordOp, StrCheck};
use super::reader::Reader;
use super::render::{render, uuid_text};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::json::{JsonSink, RECORD};
use crate::path::Segment;
use crate::rescue::ObjectText;
use crate::value::{variant_text, Value};

/// Decodes `record` into `sink`; the rescued fields (plans compiled with rescue) go to
/// `rescued`.
pub(crate) fn decode_into<S: JsonSink>(
    plan: &AvroPlan,
    record: &[u8],
    sink: &mut S,
    mut rescued: Option<&mut ObjectText>,
) -> Result<(), DecodeError> {
    let mut walk = Walk {
        reader: Reader::new(record),
        sink,
    };
    for field in &plan.root.fields {
        match field {
            FieldOp::Column { index, name, op } => {
                let node = walk.sink.child(RECORD, *index);
                walk.value(op, node, false).map_err(|e| e.in_field(name))?;
            }
            FieldOp::Rescue { name, raw } => {
                let mut text = String::new();
                render(&plan.types, *raw, &mut walk.reader, &mut text, 0)
                    .map_err(|e| e.in_field(name))?;
                if let Some(object) = rescued.as_deref_mut() {
                    object.key(name);
                    object.raw(&text);
                }
            }
        }
    }
    let count = walk.reader.remaining();
    if count > 0 {
        return Err(DecodeError::at(
            DecodeErrorKind::TrailingBytes { count },
            walk.reader.pos(),
        ));
    }
    Ok(())
}

struct Walk<'a, 's, S> {
    reader: Reader<'a>,
    sink: &'s mut S,
}

impl<'a, S: JsonSink> Walk<'a, '_, S> {
    /// Writes `value` to `node`: the open row of a member, or a committed row of an
    /// element.
    #[inline]
    fn put(&mut self, node: usize, element: bool, value: &Value<'_>) {
        if element {
            self.sink.push(node, value);
        } else {
            self.sink.set(node, value);
        }
    }

    fn value(&mut self, op: &Op, node: usize, element: bool) -> Result<(), DecodeError> {
        match op {
            Op::Null => {
                if element {
                    self.sink.push(node, &Value::Null);
                } else {
                    self.sink.clear(node);
                }
            }
            Op::Bool => {
                let v = self.reader.boolean()?;
                self.put(node, element, &Value::Bool(v));
            }
            Op::Int(int) => {
                let v = self.int(int)?;
                self.put(node, element, &Value::Int(v));
            }
            Op::Float { to_double } => {
                let v = self.reader.float()?;
                let value = if *to_double {
                    Value::Double(f64::from(v))
                } else {
                    Value::Float(v)
                };
                self.put(node, element, &value);
            }
            Op::Double => {
                let v = self.reader.double()?;
                self.put(node, element, &Value::Double(v));
            }
            Op::Str(check) => {
                let start = self.reader.pos();
                let text = self.reader.string()?;
                let text = match check {
                    StrCheck::Text => Cow::Borrowed(text),
                    StrCheck::Uuid => {
                        if !is_uuid(text) {
                            return Err(DecodeError::at(
                                DecodeErrorKind::InvalidUuid { text: text.into() },
                                start,
                            ));
                        }
                        // Hex digits are read in either case and stored lower case (RFC 4122's
                        // output form), as a uuid on fixed(16) is rendered and as apache-avro
                        // prints a uuid it read: one text per uuid in the column.
                        if text.bytes().any(|b| b.is_ascii_uppercase()) {
                            Cow::Owned(text.to_ascii_lowercase())
                        } else {
                            Cow::Borrowed(text)
                        }
                    }
                    StrCheck::Json => {
                        variant_text(text).map_err(|kind| DecodeError::at(kind, start))?
                    }
                };
                self.put(node, element, &Value::Str(text));
            }
            Op::Bytes => {
                let v = self.reader.bytes()?;
                self.put(node, element, &Value::Bytes(Cow::Borrowed(v)));
            }
            Op::Fixed(n) => {
                let v = self.reader.take(*n)?;
                self.put(node, element, &Value::Bytes(Cow::Borrowed(v)));
            }
            Op::UuidFixed => {
                let v = self.reader.take(16)?;
                self.put(node, element, &Value::Str(Cow::Owned(uuid_text(v))));
            }
            Op::Decimal {
                fixed,
                scale,
                to_double,
            } => {
                let text = self.reader.decimal(*fixed, *scale)?;
                let value = if *to_double {
                    Value::Double(text.parse::<f64>().unwrap_or(f64::NAN))
                } else {
                    Value::Str(Cow::Owned(text))
                };
                self.put(node, element, &value);
            }
            Op::Enum(symbols) => {
                let symbol = self.reader.symbol(symbols)?;
                self.put(node, element, &Value::Str(Cow::Borrowed(symbol)));
            }
            Op::Union(branches) => {
                let branch = self.reader.branch(branches)?;
                self.value(branch, node, element)?;
            }
            Op::Array(items) => {
                self.begin(node, element);
                let child = self.sink.child(node, 0);
                let min_item = items_min_size(items);
                let mut index = 0usize;
                loop {
                    let count = self.reader.block(min_item)?;
                    if count == 0 {
                        break;
                    }
                    for _ in 0..count {
                        self.value(items, child, true)
                            .map_err(|e| e.within(Segment::Index(index)))?;
                        index += 1;
                    }
                }
                self.end(node, element);
            }
            Op::Map(values) => {
                self.begin(node, element);
                let key_node = self.sink.child(node, 0);
                let value_node = self.sink.child(node, 1);
                let mut keys: Vec<(&'a str, usize)> = Vec::new();
                loop {
                    let count = self.reader.block(1)?;
                    if count == 0 {
                        break;
                    }
                    for _ in 0..count {
                        let start = self.reader.pos();
                        let key = self.reader.string()?;
                        keys.push((key, start));
                        self.sink.push(key_node, &Value::Str(Cow::Borrowed(key)));
                        self.value(values, value_node, true)
                            .map_err(|e| e.within(Segment::Key(key.to_owned())))?;
                    }
                }
                check_keys(&mut keys)?;
                self.end(node, element);
            }
            Op::Record(record) => {
                self.begin(node, element);
                self.record(record, node)?;
                self.end(node, element);
            }
        }
        Ok(())
    }

    fn record(&mut self, record: &RecordOp, node: usize) -> Result<(), DecodeError> {
        for field in &record.fields {
            if let FieldOp::Column { index, name, op } = field {
                let child = self.sink.child(node, *index);
                self.value(op, child, false).map_err(|e| e.in_field(name))?;
            }
        }
        Ok(())
    }

    /// Starts a container's row (a member replaces what was there).
    fn begin(&mut self, node: usize, element: bool) {
        if !element {
            self.sink.clear(node);
        }
        self.sink.begin(node);
    }

    /// Ends a container value: elements are committed, members stay open.
    fn end(&mut self, node: usize, element: bool) {
        if element {
            self.sink.commit(node);
        }
    }

    #[inline]
    fn int(&mut self, int: &IntOp) -> Result<i64, DecodeError> {
        let start = self.reader.pos();
        let raw = if int.long {
            self.reader.long()?
        } else {
            i64::from(self.reader.int()?)
        };
        match raw.checked_mul(int.mul) {
            Some(v) if v >= int.min && v <= int.max => Ok(v),
            _ => Err(DecodeError::at(
                DecodeErrorKind::OutOfRange {
                    value: raw.to_string(),
                    target: int.target,
                },
                start,
            )),
        }
    }
}

/// The fewest bytes one item of an array takes (the compile refused zero).
fn items_min_size(op: &Op) -> usize {
    match op {
        Op::Float { .. } => 4,
        Op::Double => 8,
        Op::Fixed(n) => (*n).max(1),
        Op::UuidFixed => 16,
        _ => 1,
    }
}

/// Fails if a map's keys repeat (the first repeat in key order).
fn check_keys(keys: &mut [(&str, usize)]) -> Result<(), DecodeError> {
    if keys.len() < 2 {
        return Ok(());
    }
    keys.sort_unstable();
    for pair in keys.windows(2) {
        if let [(a, _), (b, at)] = pair {
            if a == b {
                return Err(DecodeError::at(
                    DecodeErrorKind::RepeatedMapKey {
                        key: (*a).to_owned(),
                    },
                    *at,
                ));
            }
        }
    }
    Ok(())
}

/// Whether `text` is a UUID in its canonical 8-4-4-4-12 form (either case).
fn is_uuid(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}
