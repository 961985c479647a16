//! Freshness: from a record's ack to the moment a polling deltalake reader
//! (the Rust crate, with the warehouse's storage options) sees the version
//! that holds it. The reader polls as fast as it can (5 ms pause when
//! nothing changed) and reads the ids of every new file.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use object_store::ObjectStoreExt;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use sluice_bench::server::Server;
use sluice_bench::stats::Samples;
use sluice_server::warehouse::Warehouse;

use crate::producer::{columns, produce};

/// Runs one scenario; returns the freshness samples in ms.
pub async fn run(
    server: &Server,
    warehouse: &Warehouse,
    name: &str,
    rate: u64,
    seconds: u64,
) -> Result<Samples> {
    let location = server.create_table(name, columns()).await?;
    let url = url::Url::parse(&location)?;
    let table = warehouse.open(&url).await?;
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let poller = tokio::spawn(poll(table, start, stop.clone()));
    let (acks, _) = produce(server, name, rate, seconds, start).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let seen = poller.await??;
    let mut fresh = Samples::new();
    for (id, slot) in acks.at.iter().enumerate() {
        let acked = slot.load(Ordering::Relaxed);
        if let (true, Some(&visible)) = (acked > 0, seen.get(&(id as i64))) {
            fresh.push(visible.saturating_sub(acked) as f64 / 1e6);
        }
    }
    Ok(fresh)
}

async fn poll(
    mut table: deltalake::DeltaTable,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> Result<HashMap<i64, u64>> {
    let store = table.log_store().object_store(None);
    let mut known: HashSet<String> = HashSet::new();
    let mut seen = HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        let before = table.version();
        table.update_incremental(None).await?;
        if table.version() == before {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        let now = start.elapsed().as_nanos() as u64;
        let files: Vec<_> = table
            .snapshot()?
            .log_data()
            .iter()
            .map(|f| f.object_store_path())
            .collect();
        for path in files {
            if known.insert(path.to_string()) {
                let bytes = store.get(&path).await?.bytes().await?;
                let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)?;
                let mask = ProjectionMask::roots(builder.parquet_schema(), [0]);
                for batch in builder.with_projection(mask).build()? {
                    for id in batch?.column(0).as_primitive::<Int64Type>().values() {
                        seen.entry(*id).or_insert(now);
                    }
                }
            }
        }
    }
    Ok(seen)
}
