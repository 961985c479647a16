//! Dropping a table: its catalog entry, its sink (rows not yet committed are
//! discarded) and every file of its Delta table.

use futures::TryStreamExt;
use object_store::ObjectStoreExt;

use super::access::require_admin;
use crate::auth::Caller;
use crate::error::{Result, ServerError};
use crate::pod::Pod;

/// Drops table `full_name` (admin only).
pub async fn drop_table(pod: &Pod, caller: &Caller, full_name: &str) -> Result<()> {
    require_admin(caller)?;
    let _ddl = pod.ddl.lock().await;
    let entry = pod.catalog.drop_table(full_name)?;
    pod.sinks.remove(&entry.full_name)?;
    let url = url::Url::parse(&entry.storage_location)
        .map_err(|e| ServerError::Internal(format!("location: {e}")))?;
    let table = pod.warehouse.open_or_empty(&url).await?;
    let store = table.object_store();
    let paths: Vec<_> = store
        .list(None)
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .map_err(|e| ServerError::Internal(format!("listing table files: {e}")))?;
    for path in paths {
        store
            .delete(&path)
            .await
            .map_err(|e| ServerError::Internal(format!("deleting {path}: {e}")))?;
    }
    if let Ok(dir) = url.to_file_path() {
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(ServerError::io(format!("removing {}", dir.display()), e)),
        }
    }
    tracing::info!(table = %entry.full_name, "table dropped");
    Ok(())
}
