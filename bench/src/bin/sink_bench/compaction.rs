//! Files before and after compaction: a paced producer for a fixed time at a
//! 1 s flush interval with background compaction off, then
//! `POST …/optimize` (what `sluice table optimize` calls).

use std::time::{Duration, Instant};

use anyhow::Result;
use sluice_bench::server::Server;
use sluice_server::warehouse::Warehouse;

use crate::producer::{columns, produce};

/// Files of a table: count, mean size in bytes and rows (from the Add
/// actions' `numRecords` statistics).
pub struct Files {
    pub count: usize,
    pub mean_bytes: f64,
    pub rows: usize,
}

/// What one run measured.
pub struct Compaction {
    pub seconds: u64,
    /// Records the producer sent (every one acked).
    pub sent: u64,
    pub before: Files,
    pub after: Files,
    pub optimize_s: f64,
}

pub async fn files(warehouse: &Warehouse, url: &url::Url) -> Result<Files> {
    let table = warehouse.open(url).await?;
    let (mut count, mut bytes, mut rows) = (0usize, 0i64, 0usize);
    for f in table.snapshot()?.log_data().iter() {
        count += 1;
        bytes += f.size();
        rows += f
            .num_records()
            .ok_or_else(|| anyhow::anyhow!("{} has no numRecords statistic", f.path()))?;
    }
    Ok(Files {
        count,
        mean_bytes: bytes as f64 / count.max(1) as f64,
        rows,
    })
}

pub async fn run(
    server: &Server,
    warehouse: &Warehouse,
    rate: u64,
    seconds: u64,
) -> Result<Compaction> {
    let name = "bench.sink.compaction";
    let location = server.create_table(name, columns()).await?;
    let url = url::Url::parse(&location)?;
    let (acks, _) = produce(server, name, rate, seconds, Instant::now()).await?;
    let unacked = acks
        .at
        .iter()
        .filter(|a| a.load(std::sync::atomic::Ordering::Relaxed) == 0)
        .count();
    if unacked > 0 {
        anyhow::bail!("{unacked} records were never acked");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = files(warehouse, &url).await?;
    let started = Instant::now();
    server
        .post(
            &format!("/api/sluice/v1/tables/{name}/optimize"),
            serde_json::json!({}),
        )
        .await?;
    let optimize_s = started.elapsed().as_secs_f64();
    let after = files(warehouse, &url).await?;
    Ok(Compaction {
        seconds,
        sent: rate * seconds,
        before,
        after,
        optimize_s,
    })
}
