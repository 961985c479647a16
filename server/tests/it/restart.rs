//! Crash recovery of the trunk: records acked by the WAL but not yet
//! committed to Delta (the flush interval is an hour) survive a SIGKILL; the
//! restart replays them exactly once, and a second restart adds nothing.

use std::time::Duration;

use databricks_zerobus_ingest_sdk::JsonString;

use crate::harness::{delta_row_count, read_delta, Server};
use crate::rows::rows_as_json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acked_records_survive_sigkill_and_replay_never_duplicates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "1h").await;
    let table = "main.trunk.restart";
    let location = server
        .create_table_at(table, "id BIGINT NOT NULL, note STRING")
        .await;

    let n = 5_000;
    // No close: the server dies under the open stream.
    server.push_notes_then_kill(table, n).await;
    assert_eq!(
        delta_row_count(&location).await,
        0,
        "nothing committed before the kill"
    );

    server.restart().await;
    crate::harness::wait_for_rows(&location, n as usize, Duration::from_secs(30)).await;
    server.kill();
    server.restart().await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut rows = rows_as_json(&read_delta(&location).await);
    Server::assert_pushed_notes(&mut rows, n);
    assert!(
        server.log().contains("replayed WAL records"),
        "replay happened"
    );
}

/// A batch request that fails part-way (its third record is bad) ends the
/// stream after the valid requests before it were acked; the batch's two
/// valid leading records were never acked and must not come back on replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_a_rejected_batch_are_not_replayed_after_a_crash() {
    use crate::raw::{create_json, exchange, json_batch, json_record, token, Call};
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "1h").await;
    let table = "main.trunk.rejected_batch";
    let location = server.create_table_at(table, "id BIGINT NOT NULL").await;
    let token = token(
        &server.url,
        crate::harness::CLIENT_ID,
        crate::harness::CLIENT_SECRET,
        &[table],
    )
    .await;
    let (acks, status) = exchange(
        Call {
            url: &server.url,
            table,
            token: Some(&token),
        },
        vec![
            create_json(table),
            json_record(0, r#"{"id": 0}"#),
            json_record(1, r#"{"id": 1}"#),
            json_batch(
                2,
                vec![
                    r#"{"id": 2}"#.into(),
                    r#"{"id": 3}"#.into(),
                    r#"{"id": "not a number"}"#.into(),
                ],
            ),
        ],
    )
    .await;
    assert_eq!(acks.last(), Some(&1), "valid prefix acked: {acks:?}");
    assert_eq!(status.map(|s| s.code()), Some(tonic::Code::InvalidArgument));
    server.kill();
    server.restart().await;
    server.terminate();
    let mut ids: Vec<i64> = rows_as_json(&read_delta(&location).await)
        .iter()
        .map(|r| r["id"].as_i64().expect("id"))
        .collect();
    ids.sort();
    assert_eq!(ids, vec![0, 1], "only the acked records, once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_commits_every_acked_record_before_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "1h").await;
    let table = "main.trunk.graceful";
    let location = server.create_table_at(table, "id BIGINT NOT NULL").await;
    let mut stream = server.json_stream(table).await;
    for i in 0..1000 {
        let rec = serde_json::json!({ "id": i }).to_string();
        stream
            .ingest_record_offset(JsonString(rec))
            .await
            .expect("ingest");
    }
    stream.flush().await.expect("acked");
    stream.close().await.expect("close");
    assert_eq!(
        delta_row_count(&location).await,
        0,
        "flush interval not reached yet"
    );
    server.terminate();
    assert_eq!(
        delta_row_count(&location).await,
        1000,
        "graceful stop committed everything"
    );
    assert!(server.log().contains("pod stopped; memtables committed"));
}
