//! [`Tree`]: the Arrow columns of a table with nested columns, as a flat arena of nodes
//! that follows the table schema: a [`LeafColumn`] per scalar, offsets and null rows per
//! ARRAY and MAP, null rows per STRUCT. The root (node 0) is the record; the direct
//! children of a STRUCT (or the root) have consecutive ids, so walking them needs no
//! borrowed child list.
//!
//! Every node counts its committed rows. A record being appended keeps one row open in each
//! node it reaches (for a leaf, a value past the committed rows; for a list or map, the
//! child entries past its last offset; for a struct, the `open` flag and its children's open
//! rows). [`Tree::close`] commits the open row of a node whose parent row ends: NULL where
//! nothing was written (an error for a NOT NULL column of a present parent), empty lists and
//! maps in a present parent. [`Tree::truncate`] cuts a node and its descendants back to a
//! row count, through the offsets: that is how a failed record leaves the batch exactly as
//! it was, child offsets and null rows included.

use std::sync::Arc;

use arrow_array::{ArrayRef, ListArray, MapArray, StructArray};
use arrow_buffer::{BooleanBufferBuilder, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{FieldRef, Fields};

use super::leaf::{end_offset, take_vec, Data, LeafColumn};
use super::types::{list_field, map_entries_field, map_entry_fields, struct_fields};
use crate::schema::{Column, ColumnType};
use crate::value::Value;

/// A NOT NULL column of a present parent was left empty.
#[derive(Debug)]
pub(super) struct Missing;

/// What a node holds.
#[derive(Debug)]
pub(super) enum Kind {
    /// A scalar column.
    Leaf(LeafColumn),
    /// A STRUCT (or the record): children `first..first + count`.
    Struct {
        fields: Fields,
        first: usize,
        count: usize,
        /// The open row is present (its message has begun).
        open: bool,
    },
    /// An ARRAY: its element node.
    List {
        field: FieldRef,
        child: usize,
        offsets: Vec<i32>,
        /// The open row is present (a JSON array began).
        open: bool,
    },
    /// A MAP: its key node (the value node is `key + 1`).
    Map {
        entries_field: FieldRef,
        entry_fields: Fields,
        key: usize,
        offsets: Vec<i32>,
        /// The open row is present (a JSON object began).
        open: bool,
        /// The prints of the open row's keys checked so far, in order
        /// ([`Tree::key_repeats`]).
        prints: Vec<u64>,
    },
}

/// One column (or nested child) of the tree.
#[derive(Debug)]
pub(super) struct Node {
    /// Committed rows.
    pub(super) rows: usize,
    nullable: bool,
    /// The null rows among the committed ones, ascending (not used by leaves, which keep
    /// their own).
    nulls: Vec<u32>,
    pub(super) kind: Kind,
}

/// All columns of one table with nested columns.
#[derive(Debug)]
pub(super) struct Tree {
    pub(super) nodes: Vec<Node>,
    /// A list or map nobody began is empty in a present parent (protobuf: a repeated field
    /// that does not occur) rather than NULL (JSON: a member that is absent).
    pub(super) absent_is_empty: bool,
}

/// Whether `prints` holds `print`: four words a round, or'ed, with no exit inside (rows
/// hold at most [`MAX_SCANNED_ENTRIES`](super::nested) keys).
#[inline(always)]
fn holds(prints: &[u64], print: u64) -> bool {
    let mut rounds = prints.chunks_exact(4);
    let mut found = false;
    for round in &mut rounds {
        if let [a, b, c, d] = *round {
            found |= (a == print) | (b == print) | (c == print) | (d == print);
        }
    }
    found || rounds.remainder().contains(&print)
}

fn offset(count: usize) -> i32 {
    // The batch builder keeps every column below i32::MAX entries.
    i32::try_from(count).unwrap_or(i32::MAX)
}

fn row(count: usize) -> u32 {
    u32::try_from(count).unwrap_or(u32::MAX)
}

impl Tree {
    /// The tree of `columns`, the record at node 0.
    pub(super) fn new(columns: &[Column]) -> Tree {
        let mut nodes = vec![Node {
            rows: 0,
            nullable: false,
            nulls: Vec::new(),
            kind: Kind::Struct {
                fields: struct_fields(columns),
                first: 1,
                count: columns.len(),
                open: true,
            },
        }];
        add_children(&mut nodes, &of_columns(columns));
        Tree {
            nodes,
            absent_is_empty: true,
        }
    }

    /// Children `first..first + count` of the struct node `id` (none for other nodes).
    #[inline]
    pub(super) fn children(&self, id: usize) -> (usize, usize) {
        match self.nodes.get(id).map(|n| &n.kind) {
            Some(Kind::Struct { first, count, .. }) => (*first, *count),
            _ => (0, 0),
        }
    }

    /// Commits the open row of node `id`, whose parent row is `present` (or NULL).
    pub(super) fn close(&mut self, id: usize, present: bool) -> Result<(), Missing> {
        let Some(node) = self.nodes.get_mut(id) else {
            return Ok(());
        };
        if matches!(node.kind, Kind::Leaf(_)) {
            return close_leaf(node, present);
        }
        let rows = node.rows;
        node.rows += 1;
        let nullable = node.nullable;
        let (first, count, own) = match &mut node.kind {
            Kind::Leaf(_) => return Ok(()),
            Kind::Struct {
                first, count, open, ..
            } => {
                let own = present && *open;
                if present && !own && !nullable {
                    return Err(Missing);
                }
                *open = false;
                if !own {
                    node.nulls.push(row(rows));
                }
                (*first, *count, own)
            }
            Kind::List { child: c, .. } | Kind::Map { key: c, .. } => {
                // The new end offset: the child's committed rows.
                let c = *c;
                let end = self.rows_of(c);
                if let Some(Node { nulls, kind, .. }) = self.nodes.get_mut(id) {
                    if let Kind::Map { prints, .. } = kind {
                        prints.clear();
                    }
                    if let Kind::List { offsets, open, .. } | Kind::Map { offsets, open, .. } = kind
                    {
                        offsets.push(offset(end));
                        if !(present && (*open || self.absent_is_empty)) {
                            nulls.push(row(rows));
                        }
                        *open = false;
                    }
                }
                return Ok(());
            }
        };
        self.close_children(first, count, own)
    }

    /// [`close`](Self::close)s nodes `first..first + count`, the children of a struct whose
    /// row is `present`; leaves (most children) inline.
    pub(super) fn close_children(
        &mut self,
        first: usize,
        count: usize,
        present: bool,
    ) -> Result<(), Missing> {
        for child in first..first + count {
            match self.nodes.get_mut(child) {
                Some(
                    node @ Node {
                        kind: Kind::Leaf(_),
                        ..
                    },
                ) => close_leaf(node, present)?,
                _ => self.close(child, present)?,
            }
        }
        Ok(())
    }

    /// Child `index` of container `id`: a struct's field, a list's element (0), a map's key
    /// (0) or value (1); `usize::MAX` (no node) otherwise.
    #[inline]
    pub(super) fn child(&self, id: usize, index: usize) -> usize {
        match self.nodes.get(id).map(|n| &n.kind) {
            Some(Kind::Struct { first, count, .. }) if index < *count => first + index,
            Some(Kind::List { child, .. }) if index == 0 => *child,
            Some(Kind::Map { key, .. }) if index < 2 => key + index,
            _ => usize::MAX,
        }
    }

    /// Whether the key committed last in map `id` repeats a key of the map's open row, or
    /// the open row has more than `max` entries (then `true` too: the caller does not scan).
    /// The new key's print (`print`, from the caller that has the key's source, else
    /// [`Data::key_print`] of the committed key) is compared with the prints of the row's
    /// earlier keys, kept in the map node as they are checked; only a key whose print is
    /// equal is compared whole. A row of distinct keys costs one print and a loop over
    /// words per key: no key read back, no call per earlier key. If a key of the open row
    /// was committed without this check (the prints are fewer than the keys), the row's
    /// prints are taken again from its keys.
    #[inline]
    pub(super) fn key_repeats(&mut self, id: usize, max: usize, print: Option<u64>) -> bool {
        let key = match self.nodes.get(id).map(|n| &n.kind) {
            Some(Kind::Map { key, .. }) => *key,
            _ => return false,
        };
        // The key node follows its map (children come after their parent): both borrowed
        // at once, the map's prints mutably.
        let Some((map_and_before, [leaf, ..])) = (key > id).then(|| self.nodes.split_at_mut(key))
        else {
            return false;
        };
        let (
            Some(Node {
                kind: Kind::Map {
                    offsets, prints, ..
                },
                ..
            }),
            Node {
                rows,
                kind: Kind::Leaf(column),
                ..
            },
        ) = (map_and_before.get_mut(id), &*leaf)
        else {
            return false;
        };
        let data = &column.data;
        let last = rows.saturating_sub(1);
        let start = end_offset(offsets).min(last);
        let earlier = last - start;
        if earlier > max {
            return true;
        }
        let print = print.unwrap_or_else(|| data.key_print(last));
        if prints.len() == earlier {
            if holds(prints, print)
                && (prints.iter().enumerate())
                    .any(|(i, &p)| p == print && data.same(start + i, last))
            {
                return true;
            }
            prints.push(print);
        } else {
            if (start..last).any(|i| data.same(i, last)) {
                return true;
            }
            prints.clear();
            prints.extend((start..=last).map(|i| data.key_print(i)));
        }
        false
    }

    /// Writes the open row of leaf `id` with `push` (see `LeafColumn::write`); `false` if
    /// `id` is not a leaf.
    #[inline(always)]
    pub(super) fn write_leaf(&mut self, id: usize, push: impl FnOnce(&mut Data) -> bool) -> bool {
        match self.nodes.get_mut(id) {
            Some(Node {
                rows,
                kind: Kind::Leaf(column),
                ..
            }) => {
                column.write(*rows, push);
                true
            }
            _ => false,
        }
    }

    /// Commits the next row of leaf `id` with `push` (see `LeafColumn::push_with`); `false`
    /// if `id` is not a leaf.
    #[inline(always)]
    pub(super) fn push_leaf(&mut self, id: usize, push: impl FnOnce(&mut Data) -> bool) -> bool {
        match self.nodes.get_mut(id) {
            Some(Node {
                rows,
                kind: Kind::Leaf(column),
                ..
            }) => {
                column.push_with(push);
                *rows += 1;
                true
            }
            _ => false,
        }
    }

    /// Whether node `id` may hold NULL.
    pub(super) fn nullable(&self, id: usize) -> bool {
        self.nodes.get(id).is_some_and(|n| n.nullable)
    }

    /// Committed rows of node `id`.
    #[inline]
    pub(super) fn rows_of(&self, id: usize) -> usize {
        self.nodes.get(id).map_or(0, |n| n.rows)
    }

    /// Marks the open row of container node `id` present.
    #[inline]
    pub(super) fn open(&mut self, id: usize) {
        if let Some(Node {
            kind: Kind::Struct { open, .. } | Kind::List { open, .. } | Kind::Map { open, .. },
            ..
        }) = self.nodes.get_mut(id)
        {
            *open = true;
        }
    }

    /// Marks the open row of struct node `id` present and returns its children
    /// `first..first + count` (none for other nodes, which are only marked).
    #[inline]
    pub(super) fn open_struct(&mut self, id: usize) -> (usize, usize) {
        match self.nodes.get_mut(id).map(|n| &mut n.kind) {
            Some(Kind::Struct {
                first, count, open, ..
            }) => {
                *open = true;
                (*first, *count)
            }
            Some(Kind::List { open, .. } | Kind::Map { open, .. }) => {
                *open = true;
                (0, 0)
            }
            _ => (0, 0),
        }
    }

    /// Removes the open row of node `id` ([`truncate`](Self::truncate) to its committed
    /// rows). A list or map whose open row holds nothing (not begun, no entries past its
    /// last offset: every JSON array or object member the first time it occurs) is left
    /// as it is without the recursive walk, which was 4 % of the JSON lists ~32 B pass.
    pub(super) fn clear_open_row(&mut self, id: usize) {
        let Some(node) = self.nodes.get(id) else {
            return;
        };
        let empty = match &node.kind {
            Kind::List {
                child,
                offsets,
                open,
                ..
            } => !*open && self.holds_only(*child, end_offset(offsets)),
            Kind::Map {
                key, offsets, open, ..
            } => {
                let end = end_offset(offsets);
                !*open && self.holds_only(*key, end) && self.holds_only(*key + 1, end)
            }
            Kind::Leaf(_) | Kind::Struct { .. } => false,
        };
        if !empty {
            let rows = node.rows;
            self.truncate(id, rows);
        }
    }

    /// Whether node `id` holds exactly `rows` committed rows and, if a leaf, no value past
    /// them.
    fn holds_only(&self, id: usize, rows: usize) -> bool {
        match self.nodes.get(id) {
            Some(Node {
                rows: committed,
                kind: Kind::Leaf(column),
                ..
            }) => *committed == rows && column.len <= rows,
            Some(node) => node.rows == rows,
            None => false,
        }
    }

    /// Cuts node `id` and its descendants back to `rows` committed rows, its open row gone.
    pub(super) fn truncate(&mut self, id: usize, rows: usize) {
        let Some(node) = self.nodes.get_mut(id) else {
            return;
        };
        node.rows = node.rows.min(rows);
        while node.nulls.last().is_some_and(|&r| r as usize >= rows) {
            node.nulls.pop();
        }
        match &mut node.kind {
            Kind::Leaf(column) => column.truncate(rows),
            Kind::Struct {
                first, count, open, ..
            } => {
                *open = false;
                let (first, count) = (*first, *count);
                for child in first..first + count {
                    self.truncate(child, rows);
                }
            }
            Kind::List {
                child,
                offsets,
                open,
                ..
            } => {
                *open = false;
                offsets.truncate(rows + 1);
                let end = end_offset(offsets);
                let child = *child;
                self.truncate(child, end);
            }
            Kind::Map {
                key,
                offsets,
                open,
                prints,
                ..
            } => {
                *open = false;
                prints.clear();
                offsets.truncate(rows + 1);
                let end = end_offset(offsets);
                let key = *key;
                self.truncate(key, end);
                self.truncate(key + 1, end);
            }
        }
    }

    /// Appends one validated value of the value tree to node `id` as a committed row.
    pub(super) fn append_value(&mut self, id: usize, value: &Value<'_>) {
        if matches!(value, Value::Null) {
            // Cannot fail: a NULL parent has no NOT NULL children.
            let _ = self.close(id, false);
            return;
        }
        let Some(node) = self.nodes.get_mut(id) else {
            return;
        };
        match (&mut node.kind, value) {
            (Kind::Leaf(column), value) => {
                column.push_value(value);
                node.rows += 1;
            }
            (Kind::Struct { first, count, .. }, Value::Struct(fields, _)) => {
                node.rows += 1;
                let (first, count) = (*first, *count);
                for i in 0..count {
                    self.append_value(first + i, fields.get(i).unwrap_or(&Value::Null));
                }
            }
            (Kind::List { child, open, .. }, Value::List(items)) => {
                *open = true;
                let child = *child;
                for item in items {
                    self.append_value(child, item);
                }
                let _ = self.close(id, true);
            }
            (Kind::Map { key, open, .. }, Value::Map(entries)) => {
                *open = true;
                let key = *key;
                for (k, v) in entries {
                    self.append_value(key, k);
                    self.append_value(key + 1, v);
                }
                let _ = self.close(id, true);
            }
            // A value of the wrong shape (impossible after validation): NULL.
            _ => {
                let _ = self.close(id, false);
            }
        }
    }

    /// The array of node `id`'s committed rows; the node is reset.
    pub(super) fn finish(&mut self, id: usize) -> ArrayRef {
        let Some(node) = self.nodes.get_mut(id) else {
            return Arc::new(StructArray::new_empty_fields(0, None));
        };
        let rows = std::mem::take(&mut node.rows);
        let nulls = null_buffer(&mut node.nulls, rows);
        match &mut node.kind {
            Kind::Leaf(column) => column.finish(rows),
            Kind::Struct {
                fields,
                first,
                count,
                ..
            } => {
                let fields = fields.clone();
                let (first, count) = (*first, *count);
                if count == 0 {
                    return Arc::new(StructArray::new_empty_fields(rows, nulls));
                }
                let arrays = (first..first + count).map(|c| self.finish(c)).collect();
                Arc::new(StructArray::new(fields, arrays, nulls))
            }
            Kind::List {
                field,
                child,
                offsets,
                ..
            } => {
                let field = field.clone();
                let child = *child;
                let offsets = take_offsets(offsets);
                let values = self.finish(child);
                Arc::new(ListArray::new(field, offsets, values, nulls))
            }
            Kind::Map {
                entries_field,
                entry_fields,
                key,
                offsets,
                ..
            } => {
                let (entries_field, entry_fields) = (entries_field.clone(), entry_fields.clone());
                let key = *key;
                let offsets = take_offsets(offsets);
                let entries = StructArray::new(
                    entry_fields,
                    vec![self.finish(key), self.finish(key + 1)],
                    None,
                );
                Arc::new(MapArray::new(entries_field, offsets, entries, nulls, false))
            }
        }
    }
}

/// [`Tree::close`] of a leaf: commits its open row, a null where nothing was written.
#[inline(always)]
fn close_leaf(node: &mut Node, present: bool) -> Result<(), Missing> {
    let rows = node.rows;
    node.rows += 1;
    if let Kind::Leaf(column) = &mut node.kind {
        if column.len <= rows {
            if present && !node.nullable {
                return Err(Missing);
            }
            column.push_null();
        }
    }
    Ok(())
}

/// Adds the nodes of `children` (consecutive ids), then their descendants.
fn add_children(nodes: &mut Vec<Node>, children: &[(&ColumnType, bool)]) {
    let first = nodes.len();
    for (data_type, nullable) in children {
        nodes.push(Node {
            rows: 0,
            nullable: *nullable,
            nulls: Vec::new(),
            kind: shell(data_type),
        });
    }
    for (i, (data_type, _)) in children.iter().enumerate() {
        let next = nodes.len();
        match data_type {
            ColumnType::Struct(columns) => {
                if let Some(Kind::Struct { first, count, .. }) =
                    nodes.get_mut(first + i).map(|n| &mut n.kind)
                {
                    *first = next;
                    *count = columns.len();
                }
                add_children(nodes, &of_columns(columns));
            }
            ColumnType::Array {
                element,
                contains_null,
            } => {
                if let Some(Kind::List { child, .. }) =
                    nodes.get_mut(first + i).map(|n| &mut n.kind)
                {
                    *child = next;
                }
                add_children(nodes, &[(element.as_ref(), *contains_null)]);
            }
            ColumnType::Map {
                key,
                value,
                value_contains_null,
            } => {
                if let Some(Kind::Map { key: k, .. }) =
                    nodes.get_mut(first + i).map(|n| &mut n.kind)
                {
                    *k = next;
                }
                add_children(
                    nodes,
                    &[
                        (key.as_ref(), false),
                        (value.as_ref(), *value_contains_null),
                    ],
                );
            }
            _ => {}
        }
    }
}

/// The types and nullability of `columns`.
fn of_columns(columns: &[Column]) -> Vec<(&ColumnType, bool)> {
    columns.iter().map(|c| (&c.data_type, c.nullable)).collect()
}

/// A node of `data_type` whose child ids `add_children` fills in.
fn shell(data_type: &ColumnType) -> Kind {
    if let Some(column) = LeafColumn::new(data_type) {
        return Kind::Leaf(column);
    }
    match data_type {
        ColumnType::Array {
            element,
            contains_null,
        } => Kind::List {
            field: list_field(element, *contains_null),
            child: 0,
            offsets: vec![0],
            open: false,
        },
        ColumnType::Map {
            key,
            value,
            value_contains_null,
        } => Kind::Map {
            entries_field: map_entries_field(key, value, *value_contains_null),
            entry_fields: map_entry_fields(key, value, *value_contains_null),
            key: 0,
            offsets: vec![0],
            open: false,
            prints: Vec::new(),
        },
        ColumnType::Struct(columns) => Kind::Struct {
            fields: struct_fields(columns),
            first: 0,
            count: 0,
            open: false,
        },
        // Scalars are leaves (above).
        _ => Kind::Struct {
            fields: Fields::empty(),
            first: 0,
            count: 0,
            open: false,
        },
    }
}

/// The null buffer of `rows` rows with the null rows `nulls` (which is cleared).
fn null_buffer(nulls: &mut Vec<u32>, rows: usize) -> Option<NullBuffer> {
    if nulls.is_empty() {
        return None;
    }
    let mut valid = BooleanBufferBuilder::new(rows);
    valid.append_n(rows, true);
    for &r in nulls.iter() {
        if (r as usize) < rows {
            valid.set_bit(r as usize, false);
        }
    }
    nulls.clear();
    Some(NullBuffer::new(valid.finish()))
}

fn take_offsets(offsets: &mut Vec<i32>) -> OffsetBuffer<i32> {
    let taken = take_vec(offsets, offsets.len());
    offsets.push(0);
    OffsetBuffer::new(ScalarBuffer::from(taken))
}

#[cfg(test)]
mod tests {
    use super::Tree;
    use crate::schema::TableSchema;

    #[test]
    fn keys_committed_without_their_check_are_still_compared() {
        let schema = TableSchema::parse("m MAP<STRING, STRING>").expect("schema parses");
        let mut tree = Tree::new(&schema.columns);
        let map = 1;
        let key = tree.child(map, 0);
        tree.open(map);
        // "a" and "b" committed with no check: the map node holds no print of them.
        for k in ["a", "b"] {
            assert!(tree.push_leaf(key, |d| d.push_str(k)));
        }
        assert!(tree.push_leaf(key, |d| d.push_str("b")));
        assert!(
            tree.key_repeats(map, 64, None),
            "b repeats an unchecked key"
        );
        tree.truncate(key, 2);
        assert!(tree.push_leaf(key, |d| d.push_str("c")));
        assert!(!tree.key_repeats(map, 64, None), "c is new");
        assert!(tree.push_leaf(key, |d| d.push_str("a")));
        assert!(
            tree.key_repeats(map, 64, None),
            "a repeats, its print taken again"
        );
    }
}
