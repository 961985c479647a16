//! Handlers of `POST /api/sluice/v1/tables/{full_name}/optimize` and
//! `/vacuum` (admin only): run a table's compaction or vacuum now, beside
//! ingest, and answer what it did. `sluice table optimize|vacuum` call them.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use serde::Deserialize;

use super::uc::error_response;
use crate::audit::{self, Action};
use crate::auth::Caller;
use crate::error::{Result, ServerError};
use crate::pod::Pod;
use crate::sink::SharedSink;

/// Body of a vacuum request.
#[derive(Deserialize, Default)]
pub struct VacuumRequest {
    /// Delete removed files older than this; default the table's
    /// `delta.deletedFileRetentionDuration` (7 days).
    #[serde(default)]
    retention_seconds: Option<u64>,
}

fn sink(pod: &Pod, caller: &Caller, full_name: &str) -> Result<SharedSink> {
    crate::tables::require_admin(caller)?;
    pod.sinks
        .get(full_name)
        .ok_or_else(|| ServerError::NotFound(format!("table {full_name} does not exist")))
}

fn respond<T: serde::Serialize>(r: Result<T>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => error_response(&e),
    }
}

/// POST …/optimize: compact small files now.
pub async fn optimize(
    State(pod): State<Arc<Pod>>,
    Extension(caller): Extension<Caller>,
    Path(full_name): Path<String>,
) -> Response {
    respond(
        async {
            let sink = sink(&pod, &caller, &full_name)?;
            let report = sink.upkeep.optimize(&pod.config.upkeep.copy).await?;
            tracing::info!(table = %full_name, ?report, "optimize");
            let detail = format!("{report:?}");
            audit::record(&pod, &caller, Action::TableOptimize, sink.name(), detail).await;
            Ok(report)
        }
        .await,
    )
}

/// POST …/vacuum: delete removed files past the retention now.
pub async fn vacuum(
    State(pod): State<Arc<Pod>>,
    Extension(caller): Extension<Caller>,
    Path(full_name): Path<String>,
    body: Option<Json<VacuumRequest>>,
) -> Response {
    let request = body.map(|Json(b)| b).unwrap_or_default();
    respond(
        async {
            let sink = sink(&pod, &caller, &full_name)?;
            let retention = request.retention_seconds.map(Duration::from_secs);
            let report = sink.upkeep.vacuum(retention).await?;
            tracing::info!(table = %full_name, ?report, "vacuum");
            let detail = format!("{report:?}");
            audit::record(&pod, &caller, Action::TableVacuum, sink.name(), detail).await;
            Ok(report)
        }
        .await,
    )
}
