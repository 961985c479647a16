//! Checkpoints. A checkpoint is written once the table is
//! `delta.checkpointInterval` commits (default 100) past the last one.
//! Readers then start from the checkpoint instead of replaying every JSON
//! commit, and log retention (`log_cleanup`) may delete the commits it covers.

use deltalake::protocol::checkpoints::create_checkpoint;
use deltalake::table::config::TablePropertiesExt;
use deltalake::DeltaTable;
use object_store::ObjectStoreExt;

use crate::error::{Result, ServerError};

/// Writes a checkpoint if one is due; returns its version. `last` caches
/// the version of the newest checkpoint (read from `_last_checkpoint` the
/// first time).
pub async fn checkpoint_if_due(
    table: &mut DeltaTable,
    last: &mut Option<u64>,
) -> Result<Option<u64>> {
    table.update_incremental(None).await?;
    let Some(version) = table.version() else {
        return Ok(None);
    };
    let interval = table.snapshot()?.table_config().checkpoint_interval().get();
    let previous = match *last {
        Some(v) => v,
        None => last_checkpoint_version(table).await?.unwrap_or(0),
    };
    *last = Some(previous);
    if version < previous + interval {
        return Ok(None);
    }
    create_checkpoint(table, None).await?;
    *last = Some(version);
    metrics::counter!("sluice_upkeep_checkpoints_total").increment(1);
    Ok(Some(version))
}

/// The version in `_delta_log/_last_checkpoint`, if there is one.
async fn last_checkpoint_version(table: &DeltaTable) -> Result<Option<u64>> {
    let store = table.log_store().object_store(None);
    let path = object_store::path::Path::from("_delta_log/_last_checkpoint");
    let bytes = match store.get(&path).await {
        Ok(got) => got
            .bytes()
            .await
            .map_err(|e| ServerError::Internal(format!("reading _last_checkpoint: {e}")))?,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => {
            return Err(ServerError::Internal(format!(
                "reading _last_checkpoint: {e}"
            )))
        }
    };
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| ServerError::Internal(format!("_last_checkpoint: {e}")))?;
    Ok(v["version"].as_u64())
}
