//! Opt-in system columns: a table created with `--system-columns` gets
//! `_sluice_stream_id`, `_sluice_offset` and `_sluice_ingested_at` on every
//! row, filled by the pod both on WAL replay (the first stream's rows, which
//! the pod only commits after a SIGKILL and restart) and on the live path
//! (a second stream); the SDK-facing UC columns never show them.

use std::collections::BTreeMap;

use databricks_zerobus_ingest_sdk::JsonString;

use crate::harness::{read_delta, Server};
use crate::rows::rows_as_json;

/// Pushes ids `lo..hi`: the first half one record per request (offsets
/// 0, 1, …), the rest in batches of 10 (one offset per batch); all acked.
async fn push(stream: &mut databricks_zerobus_ingest_sdk::ZerobusStream, lo: i64, hi: i64) {
    let half = lo + (hi - lo) / 2;
    for i in lo..half {
        let rec = serde_json::json!({ "id": i }).to_string();
        stream
            .ingest_record_offset(JsonString(rec))
            .await
            .expect("ingest");
    }
    for start in (half..hi).step_by(10) {
        let recs: Vec<JsonString> = (start..(start + 10).min(hi))
            .map(|i| JsonString(serde_json::json!({ "id": i }).to_string()))
            .collect();
        stream
            .ingest_records_offset(recs)
            .await
            .expect("ingest batch");
    }
    stream.flush().await.expect("acked");
}

/// The offset the record of id `i` got in a stream that pushed `lo..hi`.
fn offset_of(i: i64, lo: i64, hi: i64) -> i64 {
    let half = lo + (hi - lo) / 2;
    if i < half {
        i - lo
    } else {
        (half - lo) + (i - half) / 10
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_system_columns_when_rows_are_replayed_or_live_then_each_row_names_its_stream_offset_and_time(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "1h").await;
    let table = "main.sys.rows";
    server.create_table_with_flags(table, "id BIGINT NOT NULL", &["--system-columns"]);
    let info = server.table_info(table).await;
    let names: Vec<&str> = info["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, vec!["id"], "UC columns stay the producer's columns");
    let location = info["storage_location"]
        .as_str()
        .expect("location")
        .to_string();

    let started = chrono::Utc::now().timestamp_micros();
    {
        let mut stream = server.json_stream(table).await;
        push(&mut stream, 0, 1000).await;
        server.kill();
        drop(stream);
    }
    server.restart().await; // replays 0..1000 and commits them
    let mut stream = server.json_stream(table).await;
    push(&mut stream, 1000, 1600).await;
    stream.close().await.expect("close");
    server.terminate();
    let finished = chrono::Utc::now().timestamp_micros();

    let rows = rows_as_json(&read_delta(&location).await);
    assert_eq!(rows.len(), 1600);
    let mut streams: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for r in &rows {
        let at = r["_sluice_ingested_at"].as_i64().expect("ingested_at");
        assert!(
            (started..=finished).contains(&at),
            "ingested_at {at} out of the run"
        );
        streams
            .entry(
                r["_sluice_stream_id"]
                    .as_str()
                    .expect("stream id")
                    .to_string(),
            )
            .or_default()
            .push((
                r["id"].as_i64().expect("id"),
                r["_sluice_offset"].as_i64().expect("offset"),
            ));
    }
    assert_eq!(streams.len(), 2, "two streams: {:?}", streams.keys());
    for (id, mut rows) in streams {
        rows.sort();
        let (lo, hi) = if rows[0].0 == 0 {
            (0, 1000)
        } else {
            (1000, 1600)
        };
        assert_eq!(rows.len() as i64, hi - lo, "stream {id}");
        for (i, offset) in rows {
            assert_eq!(offset, offset_of(i, lo, hi), "stream {id}, id {i}");
        }
    }
}
