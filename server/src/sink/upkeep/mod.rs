//! Table upkeep in the background: checkpoints and log retention,
//! compaction of small files, vacuum of removed files. One upkeep per table,
//! with its own Delta table handle, so it never takes the flush path's lock:
//! ingest and commits go on while it works, and its commits race appends on
//! the log like any other writer (see `compact`). The manual commands
//! (`sluice table optimize|vacuum`) run the same steps under the same lock.

mod checkpoint;
mod compact;
mod log_cleanup;
mod row_group_copy;
mod stats_merge;
mod vacuum;

pub use compact::CompactReport;
pub use row_group_copy::{CopyRule, COPY_RULE};
pub use vacuum::VacuumReport;

use std::time::{Duration, Instant};

use deltalake::DeltaTable;
use serde::Serialize;

use crate::error::Result;

/// When the background upkeep acts.
#[derive(Clone, Debug)]
pub struct UpkeepConfig {
    /// How often each table is looked at. Default: 10 s.
    pub interval: Duration,
    /// Compact once a table has this many files below half the target size.
    /// Default: 16.
    pub compact_min_files: usize,
    /// Which row groups compaction copies as they are instead of re-encoding. Default:
    /// [`COPY_RULE`] (64 Ki rows or 8 MiB).
    pub copy: CopyRule,
    /// Vacuum each table this often (with the table's retention). Default: 1 h.
    pub vacuum_interval: Duration,
}

impl Default for UpkeepConfig {
    fn default() -> Self {
        UpkeepConfig {
            interval: Duration::from_secs(10),
            compact_min_files: 16,
            copy: COPY_RULE,
            vacuum_interval: Duration::from_secs(3600),
        }
    }
}

/// What a manual optimize did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct OptimizeReport {
    /// The compaction.
    pub compaction: CompactReport,
    /// Version of the checkpoint written afterwards, if one was due.
    pub checkpoint: Option<u64>,
}

struct State {
    table: DeltaTable,
    last_checkpoint: Option<u64>,
    log_cleanup: log_cleanup::LogCleanup,
    last_vacuum: Instant,
}

impl State {
    /// A checkpoint if one is due, then log retention (after a new
    /// checkpoint, or when a retention period passed; `round`: the upkeep
    /// interval). Returns the version of a new checkpoint.
    async fn checkpoint_and_clean(&mut self, round: Duration) -> Result<Option<u64>> {
        let written =
            checkpoint::checkpoint_if_due(&mut self.table, &mut self.last_checkpoint).await?;
        self.log_cleanup
            .run_if_due(&self.table, written.is_some(), round)
            .await?;
        Ok(written)
    }
}

/// The upkeep of one table.
pub struct Upkeep {
    name: String,
    state: tokio::sync::Mutex<State>,
}

impl Upkeep {
    /// Upkeep over its own handle of table `name`.
    pub fn new(name: String, table: DeltaTable) -> Upkeep {
        Upkeep {
            name,
            state: tokio::sync::Mutex::new(State {
                table,
                last_checkpoint: None,
                log_cleanup: log_cleanup::LogCleanup::default(),
                last_vacuum: Instant::now(),
            }),
        }
    }

    /// One background round: checkpoint if due, log retention, compact if
    /// enough small files, vacuum if its interval passed.
    pub async fn round(&self, config: &UpkeepConfig) -> Result<()> {
        let mut s = self.state.lock().await;
        s.checkpoint_and_clean(config.interval).await?;
        let compacted =
            compact::compact(&mut s.table, config.compact_min_files, &config.copy).await?;
        if compacted.files_removed > 0 {
            tracing::info!(
                files_removed = compacted.files_removed,
                files_added = compacted.files_added,
                version = compacted.version,
                "compacted small files"
            );
            s.checkpoint_and_clean(config.interval).await?;
        }
        if s.last_vacuum.elapsed() >= config.vacuum_interval {
            let (fresh, report) = vacuum::vacuum(&s.table, None).await?;
            s.table = fresh;
            s.last_vacuum = Instant::now();
            if report.files_deleted > 0 {
                tracing::info!(files = report.files_deleted, "vacuumed removed files");
            }
        }
        self.publish(&s.table);
        Ok(())
    }

    /// Sets the table's file gauges (`sluice_table_files`, `sluice_table_size_bytes`,
    /// `sluice_table_small_files`) from the handle's snapshot.
    fn publish(&self, table: &DeltaTable) {
        match compact::file_stats(table) {
            Ok(stats) => stats.publish(&self.name),
            Err(e) => tracing::debug!(table = %self.name, "no file figures: {e}"),
        }
    }

    /// Compacts every bin of two or more small files now (row groups large by `copy` are
    /// copied, not re-encoded).
    pub async fn optimize(&self, copy: &CopyRule) -> Result<OptimizeReport> {
        let mut s = self.state.lock().await;
        let compaction = compact::compact(&mut s.table, 2, copy).await?;
        let checkpoint = s
            .checkpoint_and_clean(UpkeepConfig::default().interval)
            .await?;
        self.publish(&s.table);
        Ok(OptimizeReport {
            compaction,
            checkpoint,
        })
    }

    /// Vacuums now, with `retention` or the table's own.
    pub async fn vacuum(&self, retention: Option<Duration>) -> Result<VacuumReport> {
        let mut s = self.state.lock().await;
        let (fresh, report) = vacuum::vacuum(&s.table, retention).await?;
        s.table = fresh;
        s.last_vacuum = Instant::now();
        self.publish(&s.table);
        Ok(report)
    }
}
