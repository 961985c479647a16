//! Vacuum: physically deletes data files that the log removed (compaction,
//! drops) more than a retention period ago. Only tombstoned files are
//! considered (deltalake's `lite` mode): files written by a commit still in
//! flight are never tombstones, so vacuum cannot race an append.
//! Retention: the table's `delta.deletedFileRetentionDuration` (default one
//! week) unless a retention is given (`sluice table vacuum --retention`).

use std::time::Duration;

use deltalake::operations::vacuum::VacuumMode;
use deltalake::DeltaTable;
use serde::Serialize;

use crate::error::{Result, ServerError};

/// What a vacuum did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct VacuumReport {
    /// Data files deleted.
    pub files_deleted: usize,
}

/// Vacuums `table`; returns the refreshed table and the report.
pub async fn vacuum(
    table: &DeltaTable,
    retention: Option<Duration>,
) -> Result<(DeltaTable, VacuumReport)> {
    let mut builder = table.clone().vacuum().with_mode(VacuumMode::Lite);
    if let Some(retention) = retention {
        let retention = chrono::Duration::from_std(retention)
            .map_err(|e| ServerError::InvalidArgument(format!("retention: {e}")))?;
        builder = builder
            .with_retention_period(retention)
            .with_enforce_retention_duration(false);
    }
    let (table, metrics) = builder.await?;
    metrics::counter!("sluice_upkeep_files_vacuumed_total")
        .increment(metrics.files_deleted.len() as u64);
    Ok((
        table,
        VacuumReport {
            files_deleted: metrics.files_deleted.len(),
        },
    ))
}
