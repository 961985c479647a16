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

/// Test helpers: a WAL of 4 KiB segments, and frames that fill it past its first segment.
#[cfg(test)]
pub(crate) mod testwal {
    use sluice_wal::{Lsn, Wal, WalOptions};

    /// A WAL of 4 KiB segments in `dir`.
    pub fn small(dir: &std::path::Path) -> Wal {
        let mut options = WalOptions::new(dir.join("wal"));
        options.segment_bytes = 4096;
        Wal::open(options).expect("wal").0
    }

    /// Appends frames past the first segment (so it can be purged); returns the last end
    /// LSN once it is durable.
    pub async fn fill_past_first_segment(wal: &Wal) -> Lsn {
        let mut last = 0;
        for _ in 0..8 {
            let r = wal.reserve(1000).await.expect("reserve");
            last = wal.append(r, 99, vec![0; 1000]).expect("append");
        }
        wal.wait_durable(last).await.expect("durable");
        last
    }
}
