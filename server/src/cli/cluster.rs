//! `sluice cluster status` and `sluice pod drain`: read and write the meta store directly
//! (they need etcd's address, not a pod's).

use std::time::Duration;

use sluice_router::pod_record::now_ms;
use sluice_router::{Meta, PodRecord};

use crate::error::{Result, ServerError};

fn meta_error(e: sluice_router::RouterError) -> ServerError {
    ServerError::Unavailable(format!("meta store: {e}"))
}

/// The registered pods.
pub async fn pods(join: &str) -> Result<Vec<PodRecord>> {
    let meta = Meta::connect(join).await.map_err(meta_error)?;
    meta.pods().await.map_err(meta_error)
}

/// The status table: one line per pod.
pub fn render_status(pods: &[PodRecord]) -> String {
    let now = now_ms();
    let mut out = format!(
        "{:<20} {:<28} {:<9} {:>7} {:>10} {:>6} {:>10} {:>10} {:>7}\n",
        "POD", "ADDRESS", "STATE", "STREAMS", "IN MiB/s", "CPU", "WAL QUEUE", "MEMTABLE", "AGE ms"
    );
    for p in pods {
        let state = match p.state {
            sluice_router::PodState::Ready => "ready",
            sluice_router::PodState::Draining => "draining",
        };
        out.push_str(&format!(
            "{:<20} {:<28} {:<9} {:>7} {:>10.2} {:>6.2} {:>10} {:>10} {:>7}\n",
            p.id,
            p.addr,
            state,
            p.load.open_streams,
            p.load.ingress_bytes_per_sec / (1024.0 * 1024.0),
            p.load.cpu_cores,
            p.load.wal_queue_bytes,
            p.load.memtable_bytes,
            now - p.reported_at_ms
        ));
    }
    let streams: u64 = pods.iter().map(|p| p.load.open_streams).sum();
    out.push_str(&format!("{} pods, {streams} streams\n", pods.len()));
    out
}

/// Asks pod `id` to drain; with `wait`, returns once it has left (or after `timeout`).
pub async fn drain(join: &str, id: &str, wait: Option<Duration>) -> Result<bool> {
    let meta = Meta::connect(join).await.map_err(meta_error)?;
    meta.request_drain(id).await.map_err(meta_error)?;
    let Some(timeout) = wait else {
        return Ok(false);
    };
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if !meta
            .pods()
            .await
            .map_err(meta_error)?
            .iter()
            .any(|p| p.id == id)
        {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(false)
}
