//! Arrow output: the one mapping from column types to Arrow types (`types`), the scalar
//! column as plain vectors (`leaf`), the flat columns filled straight from the protobuf
//! visitor (`flat`), the column tree of tables with nested columns (`node`) filled straight
//! from the visitor or from the value tree (`nested`), the value-tree path both hand
//! undecided records to (`via_tree`), and [`RecordBatchBuilder`], the open
//! batch of one table that ties the decoders to them (`batch`).

mod batch;
mod flat;
mod leaf;
mod nested;
mod node;
mod types;
mod via_tree;

pub use batch::RecordBatchBuilder;
