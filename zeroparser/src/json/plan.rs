//! [`JsonPlan`]: the table schema prepared for JSON decoding, once per builder: per struct,
//! its columns with an exact-name lookup table (keys match exactly, else ASCII
//! case-insensitively), and per column what its JSON values must look like.

use std::collections::HashMap;

use crate::schema::{Column, ColumnType};

/// Structs with at most this many columns find a key by a scan instead of the hash table.
const LINEAR_LOOKUP: usize = 16;

/// The table schema prepared for JSON decoding (name lookup tables).
#[derive(Debug, Clone)]
pub(crate) struct JsonPlan {
    pub(super) root: StructPlan,
}

/// The columns of one struct (or the record), an exact-name lookup table, and the columns
/// in the order of their names.
#[derive(Debug, Clone)]
pub(crate) struct StructPlan {
    pub(crate) columns: Vec<JsonColumn>,
    exact: HashMap<String, usize>,
    /// `by_name[0]`: the column whose name sorts first (bytewise, as a sorted-keys writer
    /// such as serde_json's default `Map` orders members); `by_name[i + 1]`: the column
    /// whose name sorts after column `i`'s (`usize::MAX` after the last). Indexed like
    /// [`member`](Self::member)'s `after`.
    by_name: Vec<usize>,
}

/// One column: its name and what its values must look like.
#[derive(Debug, Clone)]
pub(crate) struct JsonColumn {
    /// The column name, for error paths.
    pub(super) name: String,
    pub(crate) kind: JsonKind,
}

/// What a column's JSON values must look like.
#[derive(Debug, Clone)]
pub(crate) enum JsonKind {
    Scalar(ColumnType),
    Array(Box<JsonKind>),
    Map {
        key: Option<ColumnType>,
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
    pub(crate) fn new(columns: &[Column]) -> Self {
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
            by_name: by_name(columns),
        }
    }

    /// The column of member `key`, which follows a member of column `after - 1` (`after`
    /// 0: the object's first member). Tried against column `after` (members in column
    /// order), then against the column whose name sorts after column `after - 1`'s (members
    /// sorted by name), and only then looked up by name.
    #[inline]
    pub(crate) fn member(&self, after: usize, key: &str) -> Option<usize> {
        let named = |index: usize| self.columns.get(index).is_some_and(|c| c.name == key);
        if named(after) {
            return Some(after);
        }
        match self.by_name.get(after) {
            Some(&sorted) if named(sorted) => Some(sorted),
            _ => self.find(key),
        }
    }

    pub(crate) fn find(&self, key: &str) -> Option<usize> {
        // A short scan beats hashing the key for the usual handful of columns.
        let exact = if self.columns.len() <= LINEAR_LOOKUP {
            self.columns.iter().position(|c| c.name == key)
        } else {
            self.exact.get(key).copied()
        };
        exact.or_else(|| {
            self.columns
                .iter()
                .position(|c| c.name.eq_ignore_ascii_case(key))
        })
    }
}

/// [`StructPlan::by_name`] of `columns`.
fn by_name(columns: &[Column]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..columns.len()).collect();
    order.sort_by(|&a, &b| columns[a].name.as_bytes().cmp(columns[b].name.as_bytes()));
    let mut table = vec![usize::MAX; columns.len() + 1];
    table[0] = order.first().copied().unwrap_or(usize::MAX);
    for pair in order.windows(2) {
        table[pair[0] + 1] = pair[1];
    }
    table
}

impl JsonKind {
    fn new(data_type: &ColumnType) -> Self {
        match data_type {
            ColumnType::Array { element, .. } => JsonKind::Array(Box::new(JsonKind::new(element))),
            ColumnType::Map { key, value, .. } => JsonKind::Map {
                key: key.primitive_name().map(|_| key.as_ref().clone()),
                value: Box::new(JsonKind::new(value)),
            },
            ColumnType::Struct(columns) => JsonKind::Struct(StructPlan::new(columns)),
            scalar => JsonKind::Scalar(scalar.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::TableSchema;

    #[test]
    fn each_column_names_the_one_whose_name_sorts_next() {
        let schema = TableSchema::parse("b INT, a INT, c INT, Z INT").expect("schema parses");
        let plan = StructPlan::new(&schema.columns);
        // Bytewise: "Z" (3) < "a" (1) < "b" (0) < "c" (2); entry i + 1 follows column i.
        assert_eq!(plan.by_name, vec![3, 2, 0, usize::MAX, 1]);
        assert!(StructPlan::new(&[]).by_name == vec![usize::MAX]);
    }

    #[test]
    fn members_in_column_order_sorted_or_neither_find_their_column() {
        let schema = TableSchema::parse("b INT, a INT, c INT, Z INT").expect("schema parses");
        let plan = StructPlan::new(&schema.columns);
        let walk = |keys: &[&str]| {
            let mut after = 0;
            keys.iter()
                .map(|key| {
                    let index = plan.member(after, key);
                    after = index.map_or(0, |i| i + 1);
                    index
                })
                .collect::<Vec<_>>()
        };
        let found = |indexes: &[usize]| indexes.iter().map(|&i| Some(i)).collect::<Vec<_>>();
        assert_eq!(walk(&["b", "a", "c", "Z"]), found(&[0, 1, 2, 3]));
        assert_eq!(walk(&["Z", "a", "b", "c"]), found(&[3, 1, 0, 2]));
        assert_eq!(walk(&["c", "Z", "B", "a"]), found(&[2, 3, 0, 1]));
        assert_eq!(walk(&["x"]), vec![None]);
    }
}
