//! Protobuf records: the wire format (`wire`), the descriptor a producer sends
//! (`descriptor`), the plan it compiles to against a table schema (`plan`, `compile`; the
//! type table in `kind`, scalar reads in `scalar`, the fast table in `fast`), and the two
//! passes over a record that follow a plan: the allocation-free [`Visitor`] pass (`visit`,
//! `visitor`) and the decode into the per-record value tree (`tree`), sharing their field
//! checks (`checks`).

mod checks;
mod compile;
mod descriptor;
mod fast;
mod kind;
mod plan;
mod scalar;
mod tree;
mod visit;
mod visitor;
pub(crate) mod wire;

pub use plan::ProtoPlan;
pub(crate) use plan::{schema_id, MessagePlan};
pub(crate) use tree::decode_record;
pub use visitor::Visitor;
