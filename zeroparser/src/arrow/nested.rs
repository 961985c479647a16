//! [`NestedColumns`]: the Arrow columns of a table with STRUCT, ARRAY or MAP columns,
//! filled straight from [`ProtoPlan::visit`] in one pass, with no per-record value tree and
//! no per-record allocation (the stack of open structs is kept between records).
//!
//! The visitor's events map onto the column tree (`arrow::node`): a scalar writes the open
//! row of its leaf (a repeat replaces it); a singular message opens its struct's row and
//! leaves it open, so a later occurrence of the same message merges into it (scalars
//! replaced, repeated fields appended); an element of a repeated message or a map value
//! opens a row of the element struct and commits it at its end; scalar elements and map
//! entries are committed as they come; a oneof member that is cleared is cut back through
//! its offsets. At the end of the record every top-level column commits its open row.
//!
//! JSON records take the same column tree through `json::into` ([`JsonSink`]): members
//! write open rows, array elements and map entries are committed rows, and lists and maps
//! a record leaves out are NULL rather than empty.
//!
//! What the single pass does not decide itself it hands to the value tree, after cutting
//! every column back to the batch's row count: a record the visitor rejects (so errors,
//! their paths and offsets are the value tree's, unchanged), a NOT NULL column left empty,
//! and a map with a repeated key (the value tree keeps the first position with the last
//! value) or with more than [`MAX_SCANNED_ENTRIES`] entries (keys are compared by a linear
//! scan). Only these records pay for a second decode.

use arrow_array::ArrayRef;

use super::leaf::{bytes_print, Data};
use super::node::{Kind, Node, Tree};
use super::via_tree::{self, ValueRows};
use crate::avro::{self, AvroPlan};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::json::{decode_into, JsonPlan, JsonSink};
use crate::proto::{ProtoPlan, Visitor};
use crate::rescue::ObjectText;
use crate::schema::Column;
use crate::value::{Scalar, Value};

/// Maps with more entries in one record take the value-tree path (which finds repeated keys
/// with a hash map instead of a scan).
const MAX_SCANNED_ENTRIES: usize = 64;

/// The record node of the tree.
const ROOT: usize = 0;

/// A struct entered and not yet ended: the enclosing struct, its children, and whether ending
/// this one commits its row.
#[derive(Debug, Clone, Copy)]
struct Frame {
    outer: usize,
    first: usize,
    count: usize,
    element: bool,
}

/// All columns of a table with nested columns.
#[derive(Debug)]
pub(crate) struct NestedColumns {
    tree: Tree,
    /// The structs entered and not yet ended.
    stack: Vec<Frame>,
    /// Protobuf records handed to the value tree since the columns were made.
    via_tree: u64,
    /// JSON records handed to the value tree since the columns were made.
    json_via_tree: u64,
}

impl NestedColumns {
    /// Columns for `columns`.
    pub(crate) fn new(columns: &[Column]) -> NestedColumns {
        NestedColumns {
            tree: Tree::new(columns),
            stack: Vec::new(),
            via_tree: 0,
            json_via_tree: 0,
        }
    }

    /// Decodes one record straight into the columns; on error they are as before.
    /// `columns` are the table's (for the value-tree path).
    pub(crate) fn append_proto(
        &mut self,
        plan: &ProtoPlan,
        record: &[u8],
        columns: &[Column],
    ) -> Result<(), DecodeError> {
        self.stack.clear();
        let (first, count) = self.tree.children(ROOT);
        let mut writer = Writer {
            tree: &mut self.tree,
            stack: &mut self.stack,
            current: ROOT,
            first,
            count,
            failed: false,
        };
        let visited = plan.visit(record, &mut writer);
        if visited.is_ok() && !writer.failed && self.end_row().is_ok() {
            return Ok(());
        }
        self.rollback();
        self.via_tree += 1;
        via_tree::append_proto(self, plan, record, columns)
    }

    /// Decodes one JSON record straight into the columns (through the value tree if the
    /// one pass leaves it undecided, as for protobuf); on error they are as before.
    pub(crate) fn append_json(
        &mut self,
        plan: &JsonPlan,
        record: &str,
        columns: &[Column],
    ) -> Result<(), DecodeError> {
        self.tree.absent_is_empty = false;
        let mut writer = JsonWriter {
            tree: &mut self.tree,
            failed: false,
        };
        let decoded = decode_into(plan, record, &mut writer).is_some() && !writer.failed;
        let done = decoded && self.end_row().is_ok();
        self.tree.absent_is_empty = true;
        if done {
            return Ok(());
        }
        self.rollback();
        self.json_via_tree += 1;
        via_tree::append_json(self, plan, record, columns)
    }

    /// Decodes one Avro datum straight into the column tree (the plan's compile checked
    /// every type and nullability, so there is no value-tree path; a map key that repeats
    /// is the decoder's error); on error the columns are as before.
    pub(crate) fn append_avro(
        &mut self,
        plan: &AvroPlan,
        record: &[u8],
        rescued: Option<&mut ObjectText>,
    ) -> Result<(), DecodeError> {
        self.tree.absent_is_empty = false;
        let mut writer = JsonWriter {
            tree: &mut self.tree,
            failed: false,
        };
        let decoded = avro::decode_into(plan, record, &mut writer, rescued);
        let result = match (decoded, writer.failed) {
            (Ok(()), false) => self
                .end_row()
                .map_err(|()| DecodeError::new(DecodeErrorKind::NotNull)),
            (Ok(()), true) => Err(DecodeError::new(DecodeErrorKind::NotNull)),
            (Err(e), _) => Err(e),
        };
        self.tree.absent_is_empty = true;
        if result.is_err() {
            self.rollback();
        }
        result
    }

    /// Protobuf records handed to the value tree since the columns were made, rejected
    /// ones included.
    pub(crate) fn via_tree(&self) -> u64 {
        self.via_tree
    }

    /// JSON records handed to the value tree since the columns were made, rejected ones
    /// included.
    pub(crate) fn json_via_tree(&self) -> u64 {
        self.json_via_tree
    }

    /// Commits the record's open row in every top-level column.
    fn end_row(&mut self) -> Result<(), ()> {
        let (first, count) = self.tree.children(ROOT);
        self.tree
            .close_children(first, count, true)
            .map_err(|_| ())?;
        if let Some(root) = self.tree.nodes.get_mut(ROOT) {
            root.rows += 1;
        }
        Ok(())
    }

    /// Removes the last row appended (its record turned out to be rejected after all).
    pub(crate) fn pop_row(&mut self) {
        if let Some(root) = self.tree.nodes.get_mut(ROOT) {
            if root.rows > 0 {
                root.rows -= 1;
                self.rollback();
            }
        }
    }

    /// Cuts every column back to the batch's row count.
    fn rollback(&mut self) {
        let rows = self.tree.rows_of(ROOT);
        let (first, count) = self.tree.children(ROOT);
        for id in first..first + count {
            self.tree.truncate(id, rows);
        }
    }

    /// Drops every row appended since the last finish; the columns keep their capacity.
    pub(crate) fn clear(&mut self) {
        if let Some(root) = self.tree.nodes.get_mut(ROOT) {
            root.rows = 0;
        }
        self.rollback();
    }

    /// The arrays of all rows appended since the last finish; the columns are reset.
    pub(crate) fn finish(&mut self) -> Vec<ArrayRef> {
        if let Some(root) = self.tree.nodes.get_mut(ROOT) {
            root.rows = 0;
        }
        let (first, count) = self.tree.children(ROOT);
        (first..first + count)
            .map(|id| self.tree.finish(id))
            .collect()
    }
}

impl ValueRows for NestedColumns {
    fn append_values(&mut self, slots: &[Value<'_>]) {
        let (first, count) = self.tree.children(ROOT);
        for i in 0..count {
            self.tree
                .append_value(first + i, slots.get(i).unwrap_or(&Value::Null));
        }
        if let Some(root) = self.tree.nodes.get_mut(ROOT) {
            root.rows += 1;
        }
    }
}

/// The JSON sink that writes one record's values into the column tree.
struct JsonWriter<'c> {
    tree: &'c mut Tree,
    /// The record must take the value-tree path.
    failed: bool,
}

impl JsonSink for JsonWriter<'_> {
    #[inline]
    fn child(&self, node: usize, index: usize) -> usize {
        self.tree.child(node, index)
    }

    #[inline]
    fn set(&mut self, node: usize, value: &Value<'_>) {
        match self.tree.nodes.get_mut(node) {
            Some(Node {
                rows,
                kind: Kind::Leaf(column),
                ..
            }) => column.set_value(*rows, value),
            _ => self.failed = true,
        }
    }

    #[inline(always)]
    fn push(&mut self, node: usize, value: &Value<'_>) {
        if matches!(value, Value::Null) && !self.tree.nullable(node) {
            self.failed = true;
            return;
        }
        match self.tree.nodes.get_mut(node) {
            Some(Node {
                rows,
                kind: Kind::Leaf(column),
                ..
            }) => {
                column.push_value(value);
                *rows += 1;
            }
            Some(_) if matches!(value, Value::Null) => {
                // A NULL parent has no NOT NULL children to miss.
                let _ = self.tree.close(node, false);
            }
            _ => self.failed = true,
        }
    }

    #[inline(always)]
    fn set_str(&mut self, node: usize, text: &str) {
        self.write_leaf(node, |data| data.push_str(text));
    }

    #[inline(always)]
    fn push_str(&mut self, node: usize, text: &str) {
        self.push_leaf(node, |data| data.push_str(text));
    }

    #[inline(always)]
    fn set_int(&mut self, node: usize, value: i64) {
        self.write_leaf(node, |data| data.push_int(value));
    }

    #[inline(always)]
    fn push_int(&mut self, node: usize, value: i64) {
        self.push_leaf(node, |data| data.push_int(value));
    }

    #[inline(always)]
    fn set_double(&mut self, node: usize, value: f64) {
        self.write_leaf(node, |data| data.push_double(value));
    }

    #[inline(always)]
    fn push_double(&mut self, node: usize, value: f64) {
        self.push_leaf(node, |data| data.push_double(value));
    }

    fn push_key(&mut self, map: usize, key: &Value<'_>) {
        let key_node = self.tree.child(map, 0);
        self.push(key_node, key);
        self.check_key(map, None);
    }

    #[inline(always)]
    fn push_key_str(&mut self, map: usize, text: &str) {
        let print = bytes_print(text.as_bytes());
        self.push_key_with(map, Some(print), |data| data.push_str(text));
    }

    #[inline(always)]
    fn push_key_int(&mut self, map: usize, value: i64) {
        // Printed from the column: reading back a word just stored costs nothing extra.
        self.push_key_with(map, None, |data| data.push_int(value));
    }

    fn clear(&mut self, node: usize) {
        self.tree.clear_open_row(node);
    }

    fn begin(&mut self, node: usize) {
        self.tree.open(node);
    }

    fn commit(&mut self, node: usize) {
        if self.tree.close(node, true).is_err() {
            self.failed = true;
        }
    }
}

impl JsonWriter<'_> {
    /// Commits the next key of map `map` with `push` and checks it, by `print` if the
    /// caller has it from the key's source (see [`Self::check_key`]).
    #[inline(always)]
    fn push_key_with(
        &mut self,
        map: usize,
        print: Option<u64>,
        push: impl FnOnce(&mut Data) -> bool,
    ) {
        let key_node = self.tree.child(map, 0);
        self.push_leaf(key_node, push);
        self.check_key(map, print);
    }

    /// Fails the record if the key map `map` committed last (print `print`, if known)
    /// repeats one of its open row's (the value tree keeps the first position with the last
    /// value) or the row is too long.
    #[inline(always)]
    fn check_key(&mut self, map: usize, print: Option<u64>) {
        if self.tree.key_repeats(map, MAX_SCANNED_ENTRIES, print) {
            self.failed = true;
        }
    }

    /// Writes the open row of leaf `node` with `push` (see [`Tree::write_leaf`]).
    #[inline(always)]
    fn write_leaf(&mut self, node: usize, push: impl FnOnce(&mut Data) -> bool) {
        if !self.tree.write_leaf(node, push) {
            self.failed = true;
        }
    }

    /// Commits the next row of leaf `node` with `push` (see [`Tree::push_leaf`]).
    #[inline(always)]
    fn push_leaf(&mut self, node: usize, push: impl FnOnce(&mut Data) -> bool) {
        if !self.tree.push_leaf(node, push) {
            self.failed = true;
        }
    }
}

/// The visitor that writes one record's fields into the column tree.
struct Writer<'c> {
    tree: &'c mut Tree,
    stack: &'c mut Vec<Frame>,
    /// The struct node whose fields arrive.
    current: usize,
    /// Its children.
    first: usize,
    count: usize,
    /// The record must take the value-tree path.
    failed: bool,
}

impl Writer<'_> {
    /// The node of field `slot` of the current struct.
    #[inline(always)]
    fn node(&self, slot: usize) -> Option<usize> {
        (slot < self.count).then_some(self.first + slot)
    }

    /// Writes the open row of the leaf of `slot` with `push` (see `LeafColumn::write`).
    #[inline(always)]
    fn write(&mut self, slot: usize, push: impl FnOnce(&mut Data) -> bool) {
        let Some(id) = self.node(slot) else {
            return;
        };
        if !self.tree.write_leaf(id, push) {
            self.failed = true;
        }
    }

    /// Commits `value` as the next row of leaf `id`.
    #[inline]
    fn push(&mut self, id: usize, value: &Scalar<'_>) {
        self.push_with(id, |data| data.push(value));
    }

    /// Commits the next row of leaf `id` with `push` (see `LeafColumn::push_with`).
    #[inline(always)]
    fn push_with(&mut self, id: usize, push: impl FnOnce(&mut Data) -> bool) {
        if !self.tree.push_leaf(id, push) {
            self.failed = true;
        }
    }

    /// Commits the next element of the list of `slot` with `push`.
    #[inline(always)]
    fn push_element(&mut self, slot: usize, push: impl FnOnce(&mut Data) -> bool) {
        if let Some(child) = self.list_child(slot) {
            self.push_with(child, push);
        }
    }

    /// The child of the list of `slot`.
    #[inline]
    fn list_child(&mut self, slot: usize) -> Option<usize> {
        match self.node(slot).and_then(|id| self.tree.nodes.get(id)) {
            Some(Node {
                kind: Kind::List { child, .. },
                ..
            }) => Some(*child),
            _ => {
                self.failed = true;
                None
            }
        }
    }

    /// Commits `key` in the map of `slot` and returns the key node (the value node is the
    /// next); marks the record for the value tree if the key repeats an earlier one of this
    /// map or the map is too long to scan.
    fn map_key(&mut self, slot: usize, key: &Scalar<'_>) -> Option<usize> {
        let Some(map) = self.node(slot) else {
            self.failed = true;
            return None;
        };
        let key_id = self.tree.child(map, 0);
        self.push(key_id, key);
        if self
            .tree
            .key_repeats(map, MAX_SCANNED_ENTRIES, source_print(key))
        {
            self.failed = true;
        }
        Some(key_id)
    }

    /// Enters struct `id`; `element`: its row is committed when it ends.
    #[inline]
    fn enter(&mut self, id: usize, element: bool) {
        self.stack.push(Frame {
            outer: self.current,
            first: self.first,
            count: self.count,
            element,
        });
        self.current = id;
        (self.first, self.count) = self.tree.open_struct(id);
    }
}

impl<'a> Visitor<'a> for Writer<'_> {
    super::leaf::leaf_visitor_writes!('a);

    fn clear(&mut self, slot: usize) {
        if let Some(id) = self.node(slot) {
            self.tree.clear_open_row(id);
        }
    }

    super::leaf::leaf_visitor_writes!('a, push_element: element, element_int, element_double,
        element_float, element_bool, element_str, element_bytes);

    fn map_entry(&mut self, slot: usize, key: Scalar<'a>, value: Scalar<'a>) {
        if let Some(key_id) = self.map_key(slot, &key) {
            self.push(key_id + 1, &value);
        }
    }

    fn begin_message(&mut self, slot: usize) {
        match self.node(slot) {
            Some(id) => self.enter(id, false),
            None => {
                self.failed = true;
                // Keep the stack balanced for `end_message`.
                self.enter(self.current, false);
            }
        }
    }

    fn begin_element(&mut self, slot: usize) {
        match self.list_child(slot) {
            Some(child) => self.enter(child, true),
            None => self.enter(self.current, false),
        }
    }

    fn begin_map_value(&mut self, slot: usize, key: Scalar<'a>) {
        match self.map_key(slot, &key) {
            Some(key_id) => self.enter(key_id + 1, true),
            None => self.enter(self.current, false),
        }
    }

    fn end_message(&mut self) {
        let Some(frame) = self.stack.pop() else {
            return;
        };
        if frame.element && self.tree.close(self.current, true).is_err() {
            self.failed = true;
        }
        self.current = frame.outer;
        (self.first, self.count) = (frame.first, frame.count);
    }
}

/// The print of a STRING or BINARY map key from its source bytes (see
/// [`bytes_print`]); `None` for other keys, printed from the column.
#[inline(always)]
fn source_print(key: &Scalar<'_>) -> Option<u64> {
    match key {
        Scalar::Str(text) => Some(bytes_print(text.as_bytes())),
        Scalar::Bytes(bytes) => Some(bytes_print(bytes)),
        _ => None,
    }
}
