//! The state a stream's handle and its connection task share: the ledger, the next
//! offset, the spool, the persistent stream's identity, and the wake-ups between them.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};

use crate::acks::AckState;
use crate::error::{Result, SdkError};
use crate::ledger::Ledger;
use crate::plan::Plan;
use crate::spool::Spool;
use crate::state_file::{self, PersistentState};
use crate::wire::Format;

/// A callback told the highest offset acked so far, after each ack.
pub type AckCallback = Arc<dyn Fn(i64) + Send + Sync>;

/// Limits and sizes of one stream.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub max_records: usize,
    pub max_bytes: usize,
    pub batch_records: usize,
    pub batch_bytes: usize,
}

impl Limits {
    /// Records per request of a persistent stream: the batch size, but at most a quarter
    /// of the in-flight limit (so several requests are in flight and full ones form).
    pub fn persistent_batch(&self) -> u32 {
        let n = self.batch_records.min((self.max_records / 4).max(1));
        u32::try_from(n).unwrap_or(u32::MAX)
    }
}

/// A persistent stream's identity and local state file.
#[derive(Debug)]
pub(crate) struct Persist {
    pub path: PathBuf,
    pub stream_id: Option<String>,
    pub watermark: i64,
    pub saved: Instant,
    /// Which records each request carries (see [`crate::plan`]).
    pub plan: Plan,
    /// The wire offset of the next request not yet planned.
    pub next_wire: i64,
}

/// The state `send` and the driver share (never held across an `.await`).
pub(crate) struct State {
    pub ledger: Ledger,
    pub next_seq: i64,
    pub closing: bool,
    pub failed: Option<SdkError>,
    pub spool: Option<Spool>,
    pub persist: Option<Persist>,
}

/// What a stream's handle and its driver share.
pub(crate) struct Shared {
    pub state: Mutex<State>,
    /// Woken when acks (or the driver taking spooled records) free room.
    pub room: Notify,
    /// Wakes the driver: records to send, or closing.
    pub work: Notify,
    pub acks: watch::Sender<AckState>,
    pub limits: Limits,
    pub table: String,
    pub format: Format,
    pub on_ack: Option<AckCallback>,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent state (no partial updates of
        // the ledger escape a panic), so a poisoned lock is still used.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ends the stream for good: every waiting ack future gets `e`.
    pub(crate) fn fail(&self, e: SdkError) {
        self.lock().failed = Some(e.clone());
        self.acks.send_modify(|s| s.failed = Some(e));
        self.room.notify_waiters();
    }
}

/// Saves a persistent stream's state now (or, without `force`, at most every 200 ms).
pub(crate) fn save_persist(table: &str, persist: &mut Persist, force: bool) -> Result<()> {
    if !force && persist.saved.elapsed() < Duration::from_millis(200) {
        return Ok(());
    }
    let Some(id) = &persist.stream_id else {
        return Ok(());
    };
    persist.saved = Instant::now();
    state_file::save(
        &persist.path,
        &PersistentState {
            stream_id: id.clone(),
            table: table.to_string(),
            watermark: persist.watermark,
            cuts: persist.plan.cuts().to_vec(),
        },
    )
}
