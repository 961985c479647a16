//! The two-column table of the upkeep tests (`id BIGINT NOT NULL, v STRING`,
//! row `i` = `{"id": i, "v": "v<i>"}`): pushing its records with the official
//! SDK, and checking that Python `deltalake` and `polars` read each row once.

use std::time::Duration;

use databricks_zerobus_ingest_sdk::{JsonString, ZerobusStream};

use crate::moto::PyRead;
use crate::rows::rows_as_json;

/// The table's columns.
pub const COLUMNS: &str = "id BIGINT NOT NULL, v STRING";

/// Sends rows `0..n` in requests of `batch` records, `pause` apart, then
/// waits until all are acked and closes the stream.
pub async fn push(mut stream: ZerobusStream, n: i64, batch: i64, pause: Duration) {
    for start in (0..n).step_by(batch as usize) {
        let records: Vec<_> = (start..(start + batch).min(n))
            .map(|i| JsonString(serde_json::json!({"id": i, "v": format!("v{i}")}).to_string()))
            .collect();
        stream.ingest_records_offset(records).await.expect("ingest");
        tokio::time::sleep(pause).await;
    }
    stream.flush().await.expect("acked");
    stream.close().await.expect("close");
}

/// Both Python readers saw rows `0..n`, each once, with its value.
pub fn assert_read_once(read: &PyRead, n: i64) {
    let s = &read.summary;
    assert_eq!(s["rows"], n, "{s}");
    assert_eq!(s["polars_rows"], n, "{s}");
    assert_eq!(s["polars_distinct_ids"], n, "{s}");
    let mut rows = rows_as_json(&read.batches);
    rows.sort_by_key(|r| r["id"].as_i64().expect("id"));
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["id"], i as i64);
        assert_eq!(r["v"], format!("v{i}"));
    }
}
