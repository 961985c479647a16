//! [`LeafColumn`]: one scalar Arrow column as plain vectors (values, or offsets and bytes
//! for STRING and BINARY) plus the sorted list of its null rows, turned into an Arrow array
//! without copying on `finish`. Shared by the flat columns (`arrow::flat`) and the leaves of
//! the nested column tree (`arrow::node`).
//!
//! A column may hold one row more than its owner has committed: the open row of the record
//! being appended. Writing it again cuts the column back first ([`LeafColumn::truncate`]).

use std::borrow::Cow;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Float32Array, Float64Array, Int16Array,
    Int32Array, Int64Array, Int8Array, StringArray, TimestampMicrosecondArray,
};
use arrow_buffer::{
    BooleanBuffer, BooleanBufferBuilder, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer,
};

/// The typed singular-field methods of a proto [`Visitor`](crate::proto::Visitor) that
/// writes leaf columns through its own `write(slot, push)` (`push` returns `false` when the
/// value does not fit: then a null): one definition for the flat writer (`arrow::flat`)
/// and the column-tree writer (`arrow::nested`). With a method and visitor method names, the
/// same for another group (the column-tree writer's list elements through `push_element`).
macro_rules! leaf_visitor_writes {
    ($a:lifetime) => {
        $crate::arrow::leaf::leaf_visitor_writes!(
            $a, write: scalar, int, double, float, boolean, string, bytes
        );
    };
    ($a:lifetime, $write:ident: $scalar:ident, $int:ident, $double:ident, $float:ident,
     $boolean:ident, $string:ident, $bytes:ident) => {
        #[inline]
        fn $scalar(&mut self, slot: usize, value: Scalar<$a>) {
            self.$write(slot, |data| data.push(&value));
        }

        #[inline]
        fn $int(&mut self, slot: usize, value: i64) {
            self.$write(slot, |data| data.push_int(value));
        }

        #[inline]
        fn $double(&mut self, slot: usize, value: f64) {
            self.$write(slot, |data| data.push_double(value));
        }

        #[inline]
        fn $float(&mut self, slot: usize, value: f32) {
            self.$write(slot, |data| data.push_float(value));
        }

        #[inline]
        fn $boolean(&mut self, slot: usize, value: bool) {
            self.$write(slot, |data| data.push_bool(value));
        }

        #[inline]
        fn $string(&mut self, slot: usize, value: &$a str) {
            self.$write(slot, |data| data.push_str(value));
        }

        #[inline]
        fn $bytes(&mut self, slot: usize, value: &$a [u8]) {
            self.$write(slot, |data| data.push_bytes(value));
        }
    };
}
pub(crate) use leaf_visitor_writes;

use super::types::UTC;
use crate::schema::ColumnType;
use crate::value::{Scalar, Value};

/// The values of one column.
#[derive(Debug)]
pub(super) enum Data {
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    Date(Vec<i32>),
    Timestamp { values: Vec<i64>, utc: bool },
    Utf8 { offsets: Vec<i32>, bytes: Vec<u8> },
    Binary { offsets: Vec<i32>, bytes: Vec<u8> },
}

/// One scalar column.
#[derive(Debug)]
pub(super) struct LeafColumn {
    pub(super) data: Data,
    /// Rows in `data`.
    pub(super) len: usize,
    /// The null rows, ascending.
    nulls: Vec<u32>,
}

fn next_offset(bytes: &[u8]) -> i32 {
    // The batch builder keeps every column below i32::MAX bytes.
    i32::try_from(bytes.len()).unwrap_or(i32::MAX)
}

/// The last of `offsets` (the end of the committed values or entries), 0 if none.
#[inline]
pub(super) fn end_offset(offsets: &[i32]) -> usize {
    offsets
        .last()
        .map_or(0, |&o| usize::try_from(o).unwrap_or(0))
}

impl Data {
    fn new(data_type: &ColumnType) -> Option<Data> {
        Some(match data_type {
            ColumnType::TinyInt => Data::I8(Vec::new()),
            ColumnType::SmallInt => Data::I16(Vec::new()),
            ColumnType::Int => Data::I32(Vec::new()),
            ColumnType::BigInt => Data::I64(Vec::new()),
            ColumnType::Float => Data::F32(Vec::new()),
            ColumnType::Double => Data::F64(Vec::new()),
            ColumnType::Boolean => Data::Bool(Vec::new()),
            ColumnType::Date => Data::Date(Vec::new()),
            ColumnType::Timestamp => Data::Timestamp {
                values: Vec::new(),
                utc: true,
            },
            ColumnType::TimestampNtz => Data::Timestamp {
                values: Vec::new(),
                utc: false,
            },
            ColumnType::String | ColumnType::Variant => Data::Utf8 {
                offsets: vec![0],
                bytes: Vec::new(),
            },
            ColumnType::Binary => Data::Binary {
                offsets: vec![0],
                bytes: Vec::new(),
            },
            ColumnType::Array { .. } | ColumnType::Map { .. } | ColumnType::Struct(_) => {
                return None
            }
        })
    }

    /// Appends a value; `false` (nothing appended) if it does not fit the column, which
    /// validation rules out.
    #[inline]
    pub(super) fn push(&mut self, value: &Scalar<'_>) -> bool {
        match (self, value) {
            (Data::I64(v), Scalar::Int(x)) => v.push(*x),
            (Data::I32(v) | Data::Date(v), Scalar::Int(x)) => {
                v.push(i32::try_from(*x).unwrap_or_default())
            }
            (Data::I16(v), Scalar::Int(x)) => v.push(i16::try_from(*x).unwrap_or_default()),
            (Data::I8(v), Scalar::Int(x)) => v.push(i8::try_from(*x).unwrap_or_default()),
            (Data::Timestamp { values, .. }, Scalar::Int(x)) => values.push(*x),
            (Data::F64(v), Scalar::Double(x)) => v.push(*x),
            (Data::F32(v), Scalar::Float(x)) => v.push(*x),
            (Data::Bool(v), Scalar::Bool(x)) => v.push(*x),
            (Data::Utf8 { offsets, bytes }, Scalar::Str(s)) => {
                bytes.extend_from_slice(s.as_bytes());
                offsets.push(next_offset(bytes));
            }
            (Data::Binary { offsets, bytes }, Scalar::Bytes(b)) => {
                bytes.extend_from_slice(b);
                offsets.push(next_offset(bytes));
            }
            _ => return false,
        }
        true
    }

    /// Appends an integer (TINYINT to BIGINT, DATE, TIMESTAMP[_NTZ]); `false` if the column
    /// holds no integers.
    #[inline]
    pub(super) fn push_int(&mut self, value: i64) -> bool {
        match self {
            Data::I64(v) | Data::Timestamp { values: v, .. } => v.push(value),
            Data::I32(v) | Data::Date(v) => v.push(i32::try_from(value).unwrap_or_default()),
            Data::I16(v) => v.push(i16::try_from(value).unwrap_or_default()),
            Data::I8(v) => v.push(i8::try_from(value).unwrap_or_default()),
            _ => return false,
        }
        true
    }

    /// Appends a DOUBLE; `false` if the column is not one.
    #[inline]
    pub(super) fn push_double(&mut self, value: f64) -> bool {
        match self {
            Data::F64(v) => v.push(value),
            _ => return false,
        }
        true
    }

    /// Appends a FLOAT; `false` if the column is not one.
    #[inline]
    pub(super) fn push_float(&mut self, value: f32) -> bool {
        match self {
            Data::F32(v) => v.push(value),
            _ => return false,
        }
        true
    }

    /// Appends a BOOLEAN; `false` if the column is not one.
    #[inline]
    pub(super) fn push_bool(&mut self, value: bool) -> bool {
        match self {
            Data::Bool(v) => v.push(value),
            _ => return false,
        }
        true
    }

    /// Appends a STRING (or VARIANT text); `false` if the column is not one.
    #[inline]
    pub(super) fn push_str(&mut self, value: &str) -> bool {
        match self {
            Data::Utf8 { offsets, bytes } => {
                bytes.extend_from_slice(value.as_bytes());
                offsets.push(next_offset(bytes));
            }
            _ => return false,
        }
        true
    }

    /// Appends a BINARY; `false` if the column is not one.
    #[inline]
    pub(super) fn push_bytes(&mut self, value: &[u8]) -> bool {
        match self {
            Data::Binary { offsets, bytes } => {
                bytes.extend_from_slice(value);
                offsets.push(next_offset(bytes));
            }
            _ => return false,
        }
        true
    }

    /// Whether rows `a` and `b` hold the same value (map keys: integers, booleans,
    /// strings); `false` for other columns and rows out of range.
    pub(super) fn same(&self, a: usize, b: usize) -> bool {
        fn eq<T: PartialEq>(v: &[T], a: usize, b: usize) -> bool {
            matches!((v.get(a), v.get(b)), (Some(x), Some(y)) if x == y)
        }
        fn span<'b>(offsets: &[i32], bytes: &'b [u8], row: usize) -> Option<&'b [u8]> {
            let start = usize::try_from(*offsets.get(row)?).ok()?;
            let end = usize::try_from(*offsets.get(row + 1)?).ok()?;
            bytes.get(start..end)
        }
        match self {
            Data::I8(v) => eq(v, a, b),
            Data::I16(v) => eq(v, a, b),
            Data::I32(v) | Data::Date(v) => eq(v, a, b),
            Data::I64(v) | Data::Timestamp { values: v, .. } => eq(v, a, b),
            Data::Bool(v) => eq(v, a, b),
            Data::Utf8 { offsets, bytes } | Data::Binary { offsets, bytes } => {
                match (span(offsets, bytes, a), span(offsets, bytes, b)) {
                    (Some(x), Some(y)) => same_bytes(x, y),
                    _ => false,
                }
            }
            Data::F32(_) | Data::F64(_) => false,
        }
    }

    /// The print of row `row` (map keys: integers, booleans, strings; 0 for other columns
    /// and rows out of range): rows that are [`same`](Self::same) print alike, and rows
    /// that print differently are not the same ([`int_print`], [`bytes_print`]).
    #[inline]
    pub(super) fn key_print(&self, row: usize) -> u64 {
        match self {
            Data::I8(v) => v.get(row).map_or(0, |&x| int_print(x.into())),
            Data::I16(v) => v.get(row).map_or(0, |&x| int_print(x.into())),
            Data::I32(v) | Data::Date(v) => v.get(row).map_or(0, |&x| int_print(x.into())),
            Data::I64(v) | Data::Timestamp { values: v, .. } => {
                v.get(row).map_or(0, |&x| int_print(x))
            }
            Data::Bool(v) => v.get(row).map_or(0, |&x| u64::from(x)),
            Data::Utf8 { offsets, bytes } | Data::Binary { offsets, bytes } => {
                let span = (offsets.get(row), offsets.get(row + 1));
                let (Some(&start), Some(&end)) = span else {
                    return 0;
                };
                let (start, end) = (start.max(0) as usize, end.max(0) as usize);
                bytes.get(start..end).map_or(0, bytes_print)
            }
            Data::F32(_) | Data::F64(_) => 0,
        }
    }

    /// Appends a value of the value tree; `false` for NULL and values that do not fit.
    #[inline]
    pub(super) fn push_value(&mut self, value: &Value<'_>) -> bool {
        let scalar = match value {
            Value::Bool(v) => Scalar::Bool(*v),
            Value::Int(v) => Scalar::Int(*v),
            Value::Float(v) => Scalar::Float(*v),
            Value::Double(v) => Scalar::Double(*v),
            Value::Str(v) => Scalar::Str(Cow::Borrowed(v.as_ref())),
            Value::Bytes(v) => Scalar::Bytes(v.as_ref()),
            Value::Null | Value::List(_) | Value::Map(_) | Value::Struct(..) => return false,
        };
        self.push(&scalar)
    }

    fn push_default(&mut self) {
        match self {
            Data::I8(v) => v.push(0),
            Data::I16(v) => v.push(0),
            Data::I32(v) | Data::Date(v) => v.push(0),
            Data::I64(v) | Data::Timestamp { values: v, .. } => v.push(0),
            Data::F32(v) => v.push(0.0),
            Data::F64(v) => v.push(0.0),
            Data::Bool(v) => v.push(false),
            Data::Utf8 { offsets, bytes } | Data::Binary { offsets, bytes } => {
                offsets.push(next_offset(bytes))
            }
        }
    }

    /// Room for `rows` more values; a string or binary column also for that many times the
    /// bytes per row its buffers were sized for (the last batch's, see [`take_vec`]), at
    /// most `max_bytes`.
    fn reserve(&mut self, rows: usize, max_bytes: usize) {
        match self {
            Data::I8(v) => reserve_exact_copying(v, rows),
            Data::I16(v) => reserve_exact_copying(v, rows),
            Data::I32(v) | Data::Date(v) => reserve_exact_copying(v, rows),
            Data::I64(v) | Data::Timestamp { values: v, .. } => reserve_exact_copying(v, rows),
            Data::F32(v) => reserve_exact_copying(v, rows),
            Data::F64(v) => reserve_exact_copying(v, rows),
            Data::Bool(v) => reserve_exact_copying(v, rows),
            Data::Utf8 { offsets, bytes } | Data::Binary { offsets, bytes } => {
                let per_row = bytes.capacity().div_ceil(offsets.capacity().max(1));
                reserve_exact_copying(offsets, rows);
                reserve_exact_copying(bytes, rows.saturating_mul(per_row).min(max_bytes));
            }
        }
    }

    pub(super) fn truncate(&mut self, rows: usize) {
        match self {
            Data::I8(v) => v.truncate(rows),
            Data::I16(v) => v.truncate(rows),
            Data::I32(v) | Data::Date(v) => v.truncate(rows),
            Data::I64(v) | Data::Timestamp { values: v, .. } => v.truncate(rows),
            Data::F32(v) => v.truncate(rows),
            Data::F64(v) => v.truncate(rows),
            Data::Bool(v) => v.truncate(rows),
            Data::Utf8 { offsets, bytes } | Data::Binary { offsets, bytes } => {
                offsets.truncate(rows + 1);
                bytes.truncate(end_offset(offsets));
            }
        }
    }

    /// The Arrow array of everything appended; the column is left empty, with room for
    /// `rows` more rows.
    fn finish(&mut self, nulls: Option<NullBuffer>, rows: usize) -> ArrayRef {
        fn take<T>(v: &mut Vec<T>, rows: usize) -> ScalarBuffer<T>
        where
            T: arrow_buffer::ArrowNativeType,
        {
            ScalarBuffer::from(take_vec(v, rows))
        }
        fn take_bytes(offsets: &mut Vec<i32>, bytes: &mut Vec<u8>) -> (OffsetBuffer<i32>, Buffer) {
            let taken = take_vec(offsets, offsets.len());
            offsets.push(0);
            let data = take_vec(bytes, bytes.len());
            (
                OffsetBuffer::new(ScalarBuffer::from(taken)),
                Buffer::from_vec(data),
            )
        }
        match self {
            Data::I8(v) => Arc::new(Int8Array::new(take(v, rows), nulls)),
            Data::I16(v) => Arc::new(Int16Array::new(take(v, rows), nulls)),
            Data::I32(v) => Arc::new(Int32Array::new(take(v, rows), nulls)),
            Data::Date(v) => Arc::new(Date32Array::new(take(v, rows), nulls)),
            Data::I64(v) => Arc::new(Int64Array::new(take(v, rows), nulls)),
            Data::Timestamp { values, utc } => {
                let array = TimestampMicrosecondArray::new(take(values, rows), nulls);
                if *utc {
                    Arc::new(array.with_timezone(UTC))
                } else {
                    Arc::new(array)
                }
            }
            Data::F32(v) => Arc::new(Float32Array::new(take(v, rows), nulls)),
            Data::F64(v) => Arc::new(Float64Array::new(take(v, rows), nulls)),
            Data::Bool(v) => {
                let values = BooleanBuffer::from_iter(v.iter().copied());
                v.clear();
                Arc::new(BooleanArray::new(values, nulls))
            }
            Data::Utf8 { offsets, bytes } => {
                let (offsets, data) = take_bytes(offsets, bytes);
                Arc::new(string_array(offsets, data, nulls))
            }
            Data::Binary { offsets, bytes } => {
                let (offsets, data) = take_bytes(offsets, bytes);
                Arc::new(BinaryArray::new(offsets, data, nulls))
            }
        }
    }
}

/// The STRING array of a [`Data::Utf8`] column's offsets and bytes, without validating its
/// UTF-8 a second time when the column's invariant holds (it always does; checked anyway):
/// every value was appended as a whole `&str` (`push`, `push_str`, `push_value`) or is
/// empty (`push_default`), and `truncate` cuts bytes and offsets at the same row boundary,
/// so the bytes are whole strings end to end and every offset ends one. The only way an
/// offset could be wrong is a column past `i32::MAX` bytes (`next_offset` saturates; then
/// the last offset is `i32::MAX` and the column at least as long), which the check below
/// sends to arrow's validating constructor, as it does a null buffer of another length
/// (which the callers never make). Arrow's own `StringBuilder` skips the second
/// validation the same way; on rows of one 1 KB string it was a quarter of the instructions.
fn string_array(
    offsets: OffsetBuffer<i32>,
    data: Buffer,
    nulls: Option<NullBuffer>,
) -> StringArray {
    let whole = offsets
        .last()
        .is_some_and(|&end| usize::try_from(end).is_ok_and(|end| end == data.len()))
        && data.len() < i32::MAX as usize
        && nulls.as_ref().is_none_or(|n| n.len() == offsets.len() - 1);
    debug_assert!(std::str::from_utf8(data.as_slice()).is_ok());
    if whole {
        // SAFETY: `try_new` would not fail: the offsets are non-decreasing from 0 (an
        // `OffsetBuffer`) and end at the buffer's end, the null buffer (if any) has one bit
        // per string, and each offset ends a whole `&str` appended to the buffer, so every
        // slice between two offsets is valid UTF-8.
        return unsafe { StringArray::new_unchecked(offsets, data, nulls) };
    }
    let len = offsets.len() - 1;
    match StringArray::try_new(offsets, data, nulls) {
        Ok(array) => array,
        // Unreachable: every string was checked as UTF-8 when decoded.
        Err(_) => StringArray::new_null(len),
    }
}

impl LeafColumn {
    /// An empty column of `data_type`, or `None` if it is not a scalar type.
    pub(super) fn new(data_type: &ColumnType) -> Option<LeafColumn> {
        Data::new(data_type).map(|data| LeafColumn {
            data,
            len: 0,
            nulls: Vec::new(),
        })
    }

    /// Writes the open row (row `rows`, after `rows` committed ones) with `push`, which
    /// returns `false` if the value does not fit the column (then a null); a value written
    /// there before is replaced. Returns whether the row was empty before.
    #[inline(always)]
    pub(super) fn write(&mut self, rows: usize, push: impl FnOnce(&mut Data) -> bool) -> bool {
        let fresh = self.len <= rows;
        if !fresh {
            self.truncate(rows);
        }
        if push(&mut self.data) {
            self.len += 1;
        } else {
            self.push_null();
        }
        fresh
    }

    /// Appends a row with `push`, which returns `false` if the value does not fit the column
    /// (then a null).
    #[inline(always)]
    pub(super) fn push_with(&mut self, push: impl FnOnce(&mut Data) -> bool) {
        if push(&mut self.data) {
            self.len += 1;
        } else {
            self.push_null();
        }
    }

    /// Room for `rows` more rows (see [`Data::reserve`]).
    pub(super) fn reserve(&mut self, rows: usize, max_bytes: usize) {
        self.data.reserve(rows, max_bytes);
    }

    pub(super) fn push_null(&mut self) {
        self.nulls.push(u32::try_from(self.len).unwrap_or(u32::MAX));
        self.data.push_default();
        self.len += 1;
    }

    #[inline]
    pub(super) fn push_value(&mut self, value: &Value<'_>) {
        if self.data.push_value(value) {
            self.len += 1;
        } else {
            self.push_null();
        }
    }

    /// Writes the open row after `rows` committed ones with `value` (NULL: none), replacing
    /// a value written there before.
    pub(super) fn set_value(&mut self, rows: usize, value: &Value<'_>) {
        if matches!(value, Value::Null) {
            self.truncate(rows);
        } else {
            self.write(rows, |data| data.push_value(value));
        }
    }

    pub(super) fn truncate(&mut self, rows: usize) {
        if self.len > rows {
            self.data.truncate(rows);
            self.len = rows;
            while self.nulls.last().is_some_and(|&r| r as usize >= rows) {
                self.nulls.pop();
            }
        }
    }

    pub(super) fn finish(&mut self, rows: usize) -> ArrayRef {
        let nulls = if self.nulls.is_empty() {
            None
        } else {
            let mut valid = BooleanBufferBuilder::new(rows);
            valid.append_n(rows, true);
            for &row in &self.nulls {
                if (row as usize) < rows {
                    valid.set_bit(row as usize, false);
                }
            }
            self.nulls.clear();
            Some(NullBuffer::new(valid.finish()))
        };
        self.len = 0;
        self.data.finish(nulls, rows)
    }
}

/// A finished column's buffer, taken from `v`, which is left empty with room for `hint`
/// elements and an eighth more, so a next batch up to an eighth larger than `hint` fills
/// it without regrowing it (a realloc that may copy the whole buffer: a batch of 8 192
/// rows after one of 1 808 did, every pass of the bench). The taken buffer keeps at most
/// that eighth of spare room; more (it regrew by doubling, or the batch came out smaller)
/// is given back in place. Not every buffer is shrunk: glibc serves a large allocation
/// from the heap only once a freed chunk at least as large raised its mmap threshold, so
/// batches shrunk below the next request's size made every batch a fresh mapping (measured:
/// page faults were 10 % of a JSON AirQuality ~1 KB pass).
pub(super) fn take_vec<T>(v: &mut Vec<T>, hint: usize) -> Vec<T> {
    let mut taken = std::mem::replace(v, Vec::with_capacity(hint.saturating_add(hint / 8)));
    if taken.capacity() - taken.len() > taken.len() / 8 {
        taken.shrink_to_fit();
    }
    taken
}

/// Room in `v` for `additional` more elements. A vector that lacks it moves to a new one
/// of exactly that room, copying only its elements: it is empty or nearly so when a run
/// begins, and `Vec::reserve`'s realloc copied its whole old room (in a first version the
/// reallocations moved from the appends into the reserve, 1.8 % of the pod's perf samples).
fn reserve_exact_copying<T: Copy>(v: &mut Vec<T>, additional: usize) {
    if v.capacity() - v.len() < additional {
        let mut room = Vec::with_capacity(v.len().saturating_add(additional));
        room.extend_from_slice(v);
        *v = room;
    }
}

/// The print of an integer map key (of any width, or a DATE or TIMESTAMP): the value itself.
#[inline(always)]
fn int_print(x: i64) -> u64 {
    x as u64
}

/// The print of a STRING or BINARY map key: its length and its first and last (up to) 8
/// bytes folded into one word. Computed by the caller from the key's source bytes where it
/// has them: read back from the column just written, the last word spans the bytes the copy
/// stored a moment before (a store-forwarding stall: on maps ~1 KB that one load was 19 %
/// of the old key hash's samples, and 10 % of `Tree::key_repeats`' in a first version of
/// the prints that still read the key back).
#[inline(always)]
pub(super) fn bytes_print(text: &[u8]) -> u64 {
    // Whole words loaded as such, a shorter key byte by byte (not a `memcpy` call for a few
    // bytes).
    let (head, tail) = end_words(text).unwrap_or_else(|| {
        let word = text
            .iter()
            .rev()
            .fold(0u64, |word, &b| (word << 8) | u64::from(b));
        (word, word)
    });
    head ^ tail.rotate_left(29) ^ (text.len() as u64).rotate_left(53)
}

/// The first and the last 8 bytes of `bytes` as little-endian words (overlapping below 16
/// bytes); `None` below 8 bytes.
#[inline]
fn end_words(bytes: &[u8]) -> Option<(u64, u64)> {
    let (head, tail) = (bytes.first_chunk::<8>()?, bytes.last_chunk::<8>()?);
    Some((u64::from_le_bytes(*head), u64::from_le_bytes(*tail)))
}

/// `x == y` for map keys: keys of 8 to 16 bytes (most keys) are compared as their first and
/// last words, inline; a key that differs there (most pairs of distinct keys) costs no
/// `memcmp` call either.
#[inline]
fn same_bytes(x: &[u8], y: &[u8]) -> bool {
    if x.len() != y.len() {
        return false;
    }
    match (end_words(x), end_words(y)) {
        (Some(a), Some(b)) if a != b => false,
        (Some(_), Some(_)) if x.len() <= 16 => true,
        _ => x == y,
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::Array;

    use super::*;

    fn offsets(ends: &[i32]) -> OffsetBuffer<i32> {
        OffsetBuffer::new(ScalarBuffer::from(ends.to_vec()))
    }

    #[test]
    fn strings_are_finished_unchecked_only_when_the_column_is_whole() {
        // A column as the leaves make it: whole strings end to end, a null row.
        let mut column = LeafColumn::new(&ColumnType::String).expect("a leaf");
        column.push_with(|data| data.push_str("héllo"));
        column.push_null();
        column.push_with(|data| data.push_str(""));
        column.push_with(|data| data.push_str("x"));
        column.push_with(|data| data.push_str("dropped"));
        column.truncate(4);
        let array = column.finish(4);
        let strings = array
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("STRING");
        let rows: Vec<_> = strings.iter().collect();
        assert_eq!(rows, [Some("héllo"), None, Some(""), Some("x")]);

        // Offsets that stop short of the bytes (here inside a character), or a null buffer
        // of another length: arrow's own constructor decides (and refuses), never the
        // unchecked one.
        let split = string_array(
            offsets(&[0, 1]),
            Buffer::from_vec("é".as_bytes().to_vec()),
            None,
        );
        assert_eq!((split.len(), split.null_count()), (1, 1));
        let prefix = string_array(offsets(&[0, 2]), Buffer::from_vec(b"abc".to_vec()), None);
        assert_eq!(prefix.iter().collect::<Vec<_>>(), [Some("ab")]);
        let nulls = NullBuffer::new(BooleanBuffer::from(vec![true, false, true]));
        let mismatched = string_array(
            offsets(&[0, 3]),
            Buffer::from_vec(b"abc".to_vec()),
            Some(nulls),
        );
        assert_eq!((mismatched.len(), mismatched.null_count()), (1, 1));
        // The same inputs made whole take the unchecked path and keep their values.
        let whole = string_array(offsets(&[0, 1, 3]), Buffer::from_vec(b"abc".to_vec()), None);
        assert_eq!(whole.iter().collect::<Vec<_>>(), [Some("a"), Some("bc")]);
    }

    #[test]
    fn string_keys_that_are_the_same_print_alike_and_distinct_ones_mostly_do_not() {
        // Keys of every length around the 8-byte word, each twice, apart.
        let keys: Vec<String> = (0..20)
            .map(|n| {
                (0..n)
                    .map(|i| char::from(b'a' + (i * 7 + n) as u8 % 26))
                    .collect()
            })
            .collect();
        let mut data = Data::new(&ColumnType::String).expect("a STRING column");
        for key in keys.iter().chain(&keys) {
            assert!(data.push_str(key));
        }
        let n = keys.len();
        let mut prints = std::collections::HashSet::new();
        for (row, key) in keys.iter().enumerate() {
            assert!(data.same(row, row + n));
            assert_eq!(data.key_print(row), data.key_print(row + n), "{key:?}");
            prints.insert(data.key_print(row));
        }
        // Every key of the list prints differently (a print shared by distinct keys would
        // still be correct, only slower: they are then compared whole).
        assert_eq!(prints.len(), n, "{prints:?}");
        // One byte apart, first or last, in a longer key: a different print here.
        assert!(data.push_str("abcdefghijklmnopq") && data.push_str("abcdefghijklmnopr"));
        assert!(data.push_str("xbcdefghijklmnopq"));
        let last = 2 * n;
        assert!(!data.same(last, last + 1));
        assert_ne!(data.key_print(last), data.key_print(last + 1));
        assert_ne!(data.key_print(last), data.key_print(last + 2));
        // Keys that print alike yet differ (a bit of the first word and the bit of the last
        // that folds onto it; tests/it/json.rs decodes them as map keys).
        assert!(data.push_str("abcdefghijklmnop") && data.push_str("aBcdefghijklmnnp"));
        let (x, y) = (last + 3, last + 4);
        assert_eq!(data.key_print(x), data.key_print(y));
        assert!(!data.same(x, y));
    }

    #[test]
    fn keys_are_the_same_only_when_every_byte_is() {
        for len in 0..40usize {
            let key: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            assert!(same_bytes(&key, &key.clone()), "len {len}");
            for at in 0..len {
                let mut other = key.clone();
                other[at] ^= 0x20;
                assert!(!same_bytes(&key, &other), "len {len}, byte {at}");
            }
            let longer = [key.as_slice(), b"a"].concat();
            assert!(!same_bytes(&key, &longer), "len {len} against {}", len + 1);
        }
    }

    #[test]
    fn reserved_rows_are_appended_without_regrowing() {
        let mut column = LeafColumn::new(&ColumnType::String).expect("a scalar column");
        for _ in 0..10 {
            column.push_with(|data| data.push(&Scalar::Str(Cow::Borrowed("0123456789"))));
        }
        drop(column.finish(10));
        column.reserve(100, usize::MAX);
        let Data::Utf8 { offsets, bytes } = &column.data else {
            panic!("a string column");
        };
        let room = (offsets.capacity(), bytes.capacity());
        assert!(room.0 >= 101 && room.1 >= 1000, "room {room:?}");
        for _ in 0..100 {
            column.push_with(|data| data.push(&Scalar::Str(Cow::Borrowed("0123456789"))));
        }
        let Data::Utf8 { offsets, bytes } = &column.data else {
            panic!("a string column");
        };
        assert_eq!((offsets.capacity(), bytes.capacity()), room, "regrown");
        let array = column.finish(100);
        let strings = array
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("a string array");
        assert_eq!(strings.len(), 100);
        assert!(strings.iter().all(|s| s == Some("0123456789")));
        let mut ints = LeafColumn::new(&ColumnType::BigInt).expect("a scalar column");
        ints.push_with(|data| data.push(&Scalar::Int(7)));
        ints.reserve(1000, 0);
        let Data::I64(values) = &ints.data else {
            panic!("a long column");
        };
        assert!(values.capacity() >= 1001, "room {}", values.capacity());
        ints.push_with(|data| data.push(&Scalar::Int(8)));
        let array = ints.finish(2);
        let longs = array
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("a long array");
        assert_eq!(longs.values().to_vec(), vec![7, 8], "kept across the move");
        // A binary column sized for 100-byte rows, asked for 1 000 rows of 5 000 bytes in
        // all: 5 000 bytes of room, not 100 000.
        let mut capped = LeafColumn::new(&ColumnType::Binary).expect("a scalar column");
        for _ in 0..10 {
            capped.push_with(|data| data.push(&Scalar::Bytes(&[7; 100])));
        }
        drop(capped.finish(10));
        capped.reserve(1000, 5000);
        let Data::Binary { bytes, .. } = &capped.data else {
            panic!("a binary column");
        };
        assert_eq!(bytes.capacity(), 5000, "not held to max_bytes");
    }

    #[test]
    fn a_finished_buffer_keeps_at_most_an_eighth_spare_and_its_successor_an_eighth_more() {
        let mut column = Vec::with_capacity(100);
        column.extend(0..64u32);
        let taken = take_vec(&mut column, 64);
        assert_eq!((taken.len(), taken.capacity()), (64, 64));
        assert!(column.is_empty());
        assert!(column.capacity() >= 72, "room for {}", column.capacity());
        column.extend(0..70u32);
        let room = column.capacity();
        let taken = take_vec(&mut column, 70);
        assert_eq!(taken.capacity(), room, "within the eighth: kept as it is");
        let mut bytes = Vec::with_capacity(64);
        bytes.extend_from_slice(b"more than an eighth spare");
        let taken = take_vec(&mut bytes, 0);
        assert_eq!(
            taken.capacity(),
            taken.len(),
            "more than the eighth: shrunk"
        );
    }
}
