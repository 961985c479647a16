//! The gRPC load on the same rows: `streams` official-SDK (2.12.0) streams push the same
//! telemetry records for the window — as protobuf (the stream path's usual format) or as
//! the same JSON objects REST sends — each with up to `max_inflight` records in flight,
//! then flush and close.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use databricks_zerobus_ingest_sdk::{JsonString, ProtoBytes};
use sluice_bench::e2e::{descriptor, record, CLIENT_ID, CLIENT_SECRET, ID_STRIDE};

/// Records the streams sent inside the window (all acked: each stream is flushed).
pub async fn run(
    url: &str,
    table: &str,
    streams: usize,
    window: Duration,
    max_inflight: usize,
    padding: Arc<String>,
    json: bool,
) -> Result<u64> {
    let sdk = sluice_bench::e2e::official_sdk(url)?;
    let mut opened = Vec::new();
    for _ in 0..streams {
        let builder = sdk
            .stream_builder()
            .table(table)
            .oauth(CLIENT_ID, CLIENT_SECRET)
            .max_inflight_requests(max_inflight);
        let builder = if json {
            builder.json()
        } else {
            builder.compiled_proto(descriptor())
        };
        opened.push(builder.build().await?);
    }
    let deadline = Instant::now() + window;
    let mut tasks = Vec::new();
    for (s, mut stream) in opened.into_iter().enumerate() {
        let padding = padding.clone();
        tasks.push(tokio::spawn(async move {
            let mut sent = 0u64;
            while Instant::now() < deadline {
                let id = s as i64 * ID_STRIDE + sent as i64;
                if json {
                    let rec = crate::rest_load::json_record(id, &padding);
                    stream.ingest_record_offset(JsonString(rec)).await?;
                } else {
                    stream
                        .ingest_record_offset(ProtoBytes(record(id, &padding)))
                        .await?;
                }
                sent += 1;
            }
            stream.flush().await?;
            stream.close().await?;
            anyhow::Ok(sent)
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    Ok(total)
}
