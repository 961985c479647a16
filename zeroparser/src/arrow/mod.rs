//! Arrow output: the one mapping from column types to Arrow types (`types`), the nested
//! column builders fed from the value tree (`builders`), the flat columns filled straight
//! from the protobuf visitor (`flat`), and [`RecordBatchBuilder`], the open batch of one
//! table that ties the decoders to them (`batch`).

mod batch;
mod builders;
mod flat;
mod types;

pub use batch::RecordBatchBuilder;
