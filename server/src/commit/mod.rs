//! The per-table committer (issue 20, ARCHITECTURE "Exactly-once at scale"):
//! pods write Parquet files and *hand them off*; one committer per table
//! commits every pending hand-off in one Delta commit per interval, with a
//! `txn` per pod WAL and per persistent stream, and — fenced — the
//! committer's epoch.
//!
//! - `handoff`: what goes in ([`HandOff`]) and comes back ([`HandOffAck`],
//!   [`HandOffError`]).
//! - `committer`: the task and its handle ([`Committer`], [`CommitterConfig`]).
//! - `fence`: the epoch ([`Fencing`], [`COMMITTER_APP_ID`]).
//! - `covered`: which hand-offs the log already holds.
//! - `present`: the HEAD check of handed-off files.
//! - `attempt`: one commit without deltalake's retries.
//! - `route`: where a sink's hand-offs go ([`CommitRoute`], [`HandOffRoute`]).
//! - `schema_fence`: hand-offs written under an older schema are refused.

mod attempt;
mod committer;
mod covered;
#[cfg(test)]
mod fault_store;
mod fence;
mod handoff;
mod present;
mod properties;
mod route;
mod schema_fence;
#[cfg(test)]
mod tests;

pub(crate) use attempt::{lost_race, reload};
pub use committer::{Committer, CommitterConfig};
pub(crate) use covered::txn_of;
pub use fence::{log_epoch, Fencing, COMMITTER_APP_ID};
pub use handoff::{HandOff, HandOffAck, HandOffError};
pub(crate) use properties::commit_properties;
pub use properties::COMMIT_RETRIES;
pub use route::{CommitRoute, HandOffRoute};
pub use schema_fence::schema_id;
