//! A paced producer: one official-SDK JSON stream sending ~200-byte
//! telemetry records at a fixed rate, recording when each offset was acked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use databricks_zerobus_ingest_sdk::{AckCallback, JsonString, OffsetId};
use sluice_bench::server::{Server, CLIENT_ID, CLIENT_SECRET};

pub use sluice_bench::server::telemetry_columns as columns;

/// Record `id` as JSON text (~200 bytes).
pub fn record(id: i64) -> String {
    serde_json::json!({
        "id": id,
        "device": format!("device-{}", id % 1000),
        "ts": 1_700_000_000_000_000i64 + id * 1000,
        "temp": 20.0 + (id % 100) as f64 / 10.0,
        "humidity": 0.5,
        "payload": "p".repeat(80),
    })
    .to_string()
}

/// Ack times (ns since `start`, 0 = not acked) per offset; id = offset.
pub struct Acks {
    pub start: Instant,
    pub at: Vec<AtomicU64>,
}

struct Callback(Arc<Acks>);

impl AckCallback for Callback {
    fn on_ack(&self, offset: OffsetId) {
        if let Some(slot) = self.0.at.get(offset as usize) {
            slot.store(
                self.0.start.elapsed().as_nanos().max(1) as u64,
                Ordering::Relaxed,
            );
        }
    }
    fn on_error(&self, offset: OffsetId, error_message: &str) {
        eprintln!("record {offset} failed: {error_message}");
    }
}

/// Sends `rate` records/s for `seconds` into `table`; returns the ack times
/// and the records' total bytes.
pub async fn produce(
    server: &Server,
    table: &str,
    rate: u64,
    seconds: u64,
    start: Instant,
) -> Result<(Arc<Acks>, u64)> {
    let total = (rate * seconds) as usize;
    let acks = Arc::new(Acks {
        start,
        at: (0..total).map(|_| AtomicU64::new(0)).collect(),
    });
    let sdk = sluice_bench::e2e::official_sdk(&server.url)?;
    let mut stream = sdk
        .stream_builder()
        .table(table)
        .oauth(CLIENT_ID, CLIENT_SECRET)
        .json()
        .ack_callback(Arc::new(Callback(acks.clone())))
        .build()
        .await?;
    let begun = Instant::now();
    let mut bytes = 0u64;
    for i in 0..total {
        let due = begun + Duration::from_secs_f64(i as f64 / rate as f64);
        tokio::time::sleep_until(due.into()).await;
        let text = record(i as i64);
        bytes += text.len() as u64;
        stream.ingest_record_offset(JsonString(text)).await?;
    }
    stream.flush().await?;
    stream.close().await?;
    Ok((acks, bytes))
}
