//! Audit events of commands that change the control plane without a running pod
//! (`sluice keys rotate-kek` needs the server stopped). The command logs the event and
//! parks it: a single node's in `<data-dir>/audit-pending.jsonl` (0600, one JSON event a
//! line), a cluster's under `/sluice/audit/pending/` in etcd. The next pod that starts with
//! `--audit-table` appends the parked events to the audit table, then removes them.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use sluice_router::Meta;

use super::event::AuditEvent;
use crate::data_dir::FILE_MODE;
use crate::error::{Result, ServerError};
use crate::pod::Pod;

/// The data dir's file of parked events.
pub const PENDING_FILE: &str = "audit-pending.jsonl";
/// The etcd prefix of parked events.
pub const PENDING_PREFIX: &str = "/sluice/audit/pending/";

/// Appends `event` to the data dir's parked events (synced).
pub fn park_in_dir(data_dir: &Path, event: &AuditEvent) -> Result<()> {
    let path = data_dir.join(PENDING_FILE);
    let io = |e| ServerError::io(format!("parking an audit event in {}", path.display()), e);
    let mut line = serde_json::to_vec(event)
        .map_err(|e| ServerError::Internal(format!("audit event: {e}")))?;
    line.push(b'\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(FILE_MODE)
        .open(&path)
        .map_err(io)?;
    file.write_all(&line).map_err(io)?;
    file.sync_all().map_err(io)
}

/// Puts `event` under [`PENDING_PREFIX`] in etcd.
pub async fn park_in_etcd(meta: &Meta, event: &AuditEvent) -> Result<()> {
    let value = serde_json::to_vec(event)
        .map_err(|e| ServerError::Internal(format!("audit event: {e}")))?;
    let key = format!("{PENDING_PREFIX}{}", uuid::Uuid::new_v4());
    meta.client()
        .put(key, value, 0)
        .await
        .map_err(|e| ServerError::Unavailable(format!("parking an audit event in etcd: {e}")))
}

/// Appends the parked events (of the data dir, and of etcd with `meta`) to the audit table
/// and removes them; nothing without `--audit-table`.
pub async fn deliver(pod: &Pod, meta: Option<&Meta>) -> Result<()> {
    if pod.config.audit_table.is_none() {
        return Ok(());
    }
    let path = pod.config.data_dir.join(PENDING_FILE);
    if let Ok(text) = std::fs::read_to_string(&path) {
        let events: Vec<AuditEvent> = text
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        super::table::append(pod, &events).await?;
        std::fs::remove_file(&path)
            .map_err(|e| ServerError::io(format!("removing {}", path.display()), e))?;
        tracing::info!(events = events.len(), "appended parked audit events");
    }
    let Some(meta) = meta else {
        return Ok(());
    };
    let etcd_error = |e| ServerError::Unavailable(format!("parked audit events in etcd: {e}"));
    let parked = meta
        .client()
        .get_prefix(PENDING_PREFIX)
        .await
        .map_err(etcd_error)?;
    for kv in parked.kvs {
        if let Ok(event) = serde_json::from_slice::<AuditEvent>(&kv.value) {
            super::table::append(pod, std::slice::from_ref(&event)).await?;
        }
        meta.client().delete(kv.key).await.map_err(etcd_error)?;
    }
    Ok(())
}
