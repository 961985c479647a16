//! The server's own records in the WAL: the payloads it writes into frames
//! ([`frames`]), the streams whose frames the log still needs ([`streams`]), the MQTT
//! QoS 2 publishes it holds as received ([`qos2`]),
//! and the start-up replay of what Delta does not hold yet ([`replay`]).
//!
//! The WAL crate knows frames as bytes with a kind; this module gives them
//! their meaning.

pub mod frames;
pub mod plan;
pub mod qos2;
pub mod replay;
pub mod streams;

pub use frames::FrameError;
pub use plan::{PlanError, RecordPlan};
pub use qos2::Qos2Ledger;
pub use replay::{replay, ReplayReport};
pub use streams::StreamRegistry;

use crate::error::ServerError;

/// A WAL payload that does not decode is a bug or a damaged log, never the
/// client's doing.
impl From<FrameError> for ServerError {
    fn from(e: FrameError) -> ServerError {
        ServerError::Internal(e.to_string())
    }
}
