//! Log retention: deletes `_delta_log` commits (and older checkpoints) that are older
//! than `delta.logRetentionDuration` (default 30 days) and covered by a checkpoint,
//! unless `delta.enableExpiredLogCleanup` is false. deltalake decides what is safe
//! (`cleanup_metadata`: never a file inside the retention window, never past the newest
//! checkpoint that is outside it); this module decides when: after every new
//! checkpoint, and between checkpoints once per retention period (at least one upkeep
//! round, at most an hour), so commits also expire on a table that stopped receiving
//! commits. Each run is one LIST of `_delta_log` plus the deletes.

use std::time::{Duration, Instant};

use deltalake::protocol::checkpoints::cleanup_metadata;
use deltalake::table::config::TablePropertiesExt;
use deltalake::DeltaTable;

use crate::error::Result;

/// Longest time between two cleanups of a table whose log does not move.
const MAX_PERIOD: Duration = Duration::from_secs(3600);

/// When the log of one table was last cleaned.
#[derive(Debug, Default)]
pub struct LogCleanup {
    last: Option<Instant>,
}

impl LogCleanup {
    /// Deletes expired log files if a checkpoint was just written or a retention
    /// period (clamped to `round`..=1 h) passed since the last run. Returns how many
    /// files were deleted. `table` must be up to date.
    pub async fn run_if_due(
        &mut self,
        table: &DeltaTable,
        checkpointed: bool,
        round: Duration,
    ) -> Result<usize> {
        let config = table.snapshot()?.table_config();
        if !config.enable_expired_log_cleanup() {
            return Ok(0);
        }
        let period = config
            .log_retention_duration()
            .clamp(round, MAX_PERIOD.max(round));
        let due = checkpointed || self.last.is_none_or(|t| t.elapsed() >= period);
        if !due {
            return Ok(0);
        }
        let removed = cleanup_metadata(table, None).await?;
        self.last = Some(Instant::now());
        metrics::counter!("sluice_upkeep_log_files_removed_total").increment(removed as u64);
        if removed > 0 {
            tracing::debug!(removed, "removed expired log files");
        }
        Ok(removed)
    }
}
