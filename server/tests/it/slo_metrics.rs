//! The SLO metrics of a real pod after real ingest (official Rust SDK): ack latency and
//! freshness per table, commit duration, fsync duration, commit lag and pending bytes per
//! table, the local warehouse's fsyncs, and refusals by status code (a stream to a table that
//! does not exist).

use std::time::Duration;

use crate::harness::{push_ids_and_close, wait_for_rows, Server};

const TABLE: &str = "main.ops.slo";
const RECORDS: i64 = 300;

/// The value of the one sample of `series` (name with its labels, exactly as rendered).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_exports_its_slo_metrics_per_table_after_ingest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let location = server
        .create_table_at(TABLE, "id BIGINT NOT NULL, note STRING")
        .await;
    push_ids_and_close(server.json_stream(TABLE).await, RECORDS).await;
    wait_for_rows(&location, RECORDS as usize, Duration::from_secs(30)).await;
    match server
        .sdk()
        .stream_builder()
        .table("main.ops.absent")
        .oauth(crate::harness::CLIENT_ID, crate::harness::CLIENT_SECRET)
        .json()
        .build()
        .await
    {
        Ok(_) => panic!("a stream opened on a table that does not exist"),
        Err(e) => eprintln!("refused as expected: {e}"),
    }

    let text = server.metrics_text().await;
    let t = format!(r#"table="{TABLE}""#);
    let acks = value(&text, &format!("sluice_ack_latency_seconds_count{{{t}}}"));
    assert!(
        acks.is_some_and(|n| n >= 1.0),
        "ack latency per table:\n{text}"
    );
    let fresh = value(
        &text,
        &format!("sluice_table_freshness_seconds_count{{{t}}}"),
    );
    assert!(
        fresh.is_some_and(|n| n >= 1.0),
        "freshness per table:\n{text}"
    );
    let p99 = value(
        &text,
        &format!(r#"sluice_table_freshness_seconds{{{t},quantile="0.99"}}"#),
    );
    assert!(
        p99.is_some_and(|s| s > 0.0 && s < 30.0),
        "freshness p99 {p99:?}:\n{text}"
    );
    assert_eq!(
        value(&text, &format!("sluice_table_commit_lag_seconds{{{t}}}")),
        Some(0.0),
        "nothing uncommitted:\n{text}"
    );
    assert_eq!(
        value(&text, &format!("sluice_table_pending_bytes{{{t}}}")),
        Some(0.0),
        "{text}"
    );
    for count in [
        "sluice_sink_commit_seconds_count",
        "sluice_wal_fsync_seconds_count",
        // The local warehouse's writes (Parquet files, commit files) were fsync'd.
        "sluice_warehouse_sync_seconds_count",
    ] {
        assert!(
            value(&text, count).is_some_and(|n| n >= 1.0),
            "{count}:\n{text}"
        );
    }
    assert!(
        value(&text, r#"sluice_refusals_total{code="NotFound"}"#).is_some_and(|n| n >= 1.0),
        "refusals by status:\n{text}"
    );
}
