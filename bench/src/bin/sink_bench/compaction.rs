//! Files before and after compaction: a paced producer for a fixed time at a
//! 1 s flush interval with background compaction off, then
//! `POST …/optimize` (what `sluice table optimize` calls).

use std::time::{Duration, Instant};

use anyhow::Result;
use sluice_bench::server::Server;
use sluice_server::warehouse::Warehouse;

use crate::producer::{columns, produce};

/// Files of a table: count and mean size in bytes.
pub struct Files {
    pub count: usize,
    pub mean_bytes: f64,
}

/// What one run measured.
pub struct Compaction {
    pub seconds: u64,
    pub before: Files,
    pub after: Files,
    pub optimize_s: f64,
}

async fn files(warehouse: &Warehouse, url: &url::Url) -> Result<Files> {
    let table = warehouse.open(url).await?;
    let sizes: Vec<i64> = table
        .snapshot()?
        .log_data()
        .iter()
        .map(|f| f.size())
        .collect();
    Ok(Files {
        count: sizes.len(),
        mean_bytes: sizes.iter().sum::<i64>() as f64 / sizes.len().max(1) as f64,
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
    produce(server, name, rate, seconds, Instant::now()).await?;
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
        before,
        after,
        optimize_s,
    })
}
