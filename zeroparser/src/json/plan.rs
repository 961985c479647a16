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

/// The columns of one struct (or the record) and an exact-name lookup table.
#[derive(Debug, Clone)]
pub(crate) struct StructPlan {
    pub(crate) columns: Vec<JsonColumn>,
    exact: HashMap<String, usize>,
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
