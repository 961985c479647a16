//! [`ProtoPlan`]: a descriptor compiled against a table schema (by `proto::compile`), once
//! per stream. A tree of [`MessagePlan`]s that follows the table schema, each with a
//! field-number lookup table and a fast table for the decoder.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use super::fast::FastEntry;
use super::scalar::ScalarPlan;
use crate::schema::TableSchema;

/// Field numbers below this are looked up in a dense table, others by binary search.
const DENSE_FIELD_NUMBERS: usize = 256;

/// A descriptor compiled against a table schema: how to decode that stream's records.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtoPlan {
    pub(super) message_name: String,
    pub(crate) root: MessagePlan,
    pub(crate) schema_id: u64,
    /// Upper bound on output bytes per input byte (enum names can be longer than their
    /// one-byte encoding); used to keep a batch within Arrow's 32-bit offsets.
    pub(crate) amplification: usize,
}

/// How to decode one message into the slots of one struct (or the record).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MessagePlan {
    pub(crate) fields: Vec<FieldPlan>,
    /// Number of columns of the struct this message fills.
    pub(crate) slot_count: usize,
    /// Slots of the members of each oneof that has more than one mapped member.
    pub(crate) oneofs: Vec<Vec<usize>>,
    /// Slots of repeated fields (`false`) and map fields (`true`): empty, not NULL, when the
    /// message is present but the field is not.
    pub(crate) repeated_slots: Vec<(usize, bool)>,
    /// Field-number lookup, small numbers (see [`lookup_tables`]).
    pub(super) dense: Vec<u32>,
    /// Field-number lookup, the other numbers.
    pub(super) sparse: Vec<(u32, u32)>,
    /// The fast table, indexed by field number (see `proto::fast`).
    pub(crate) fast: Vec<FastEntry>,
}

/// One descriptor field and the column slot it fills.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldPlan {
    pub(crate) slot: usize,
    /// The column name, for error paths.
    pub(crate) name: String,
    /// Index into [`MessagePlan::oneofs`].
    pub(crate) oneof: Option<usize>,
    pub(crate) shape: FieldShape,
}

/// What a field holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FieldShape {
    Scalar(ScalarPlan),
    Message(Box<MessagePlan>),
    RepeatedScalar(ScalarPlan),
    RepeatedMessage(Box<MessagePlan>),
    Map(Box<MapPlan>),
}

/// A map field: its entry's key (field 1) and value (field 2).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MapPlan {
    pub(crate) key: ScalarPlan,
    pub(crate) value: MapValuePlan,
}

/// A map's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum MapValuePlan {
    Scalar(ScalarPlan),
    Message(MessagePlan),
}

impl MessagePlan {
    /// The plan of field `number`, if the message has it.
    #[inline]
    pub(crate) fn lookup(&self, number: u32) -> Option<&FieldPlan> {
        let index = match self.dense.get(number as usize) {
            Some(entry) => entry.checked_sub(1)?,
            None if (number as usize) < DENSE_FIELD_NUMBERS => return None,
            None => {
                let at = self
                    .sparse
                    .binary_search_by_key(&number, |(n, _)| *n)
                    .ok()?;
                self.sparse.get(at)?.1
            }
        };
        self.fields.get(index as usize)
    }
}

impl ProtoPlan {
    /// The root message's name, as the descriptor gives it.
    pub fn message_name(&self) -> &str {
        &self.message_name
    }

    /// The names of the table's top-level columns the descriptor has a field for.
    pub fn columns(&self) -> impl Iterator<Item = &str> {
        self.root.fields.iter().map(|f| f.name.as_str())
    }
}

/// A fingerprint of a schema, so a builder can tell a plan compiled for another table.
pub(crate) fn schema_id(schema: &TableSchema) -> u64 {
    let mut hasher = DefaultHasher::new();
    schema.to_sql().hash(&mut hasher);
    hasher.finish()
}

/// Field-number lookup: a dense table for small numbers, a sorted list for the rest.
pub(super) fn lookup_tables(numbers: &[(u32, u32)]) -> (Vec<u32>, Vec<(u32, u32)>) {
    let dense_len = numbers
        .iter()
        .map(|(n, _)| *n as usize)
        .filter(|n| *n < DENSE_FIELD_NUMBERS)
        .max()
        .map_or(0, |max| max + 1);
    let mut dense = vec![0u32; dense_len];
    let mut sparse = Vec::new();
    for (number, index) in numbers {
        match dense.get_mut(*number as usize) {
            Some(entry) => *entry = index + 1,
            None => sparse.push((*number, *index)),
        }
    }
    sparse.sort_unstable();
    (dense, sparse)
}
