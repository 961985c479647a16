//! Arrow streams of Sluice's own SDK (`.arrow(schema)`, Arrow Flight `DoPut`) against a
//! real `sluice serve`: batches with a dictionary column read back exactly from Delta; a
//! batch of another schema refused by the SDK, a schema the table cannot hold refused by
//! the pod at open; a network cut (a TCP proxy the test controls) mid-stream after which
//! every row is there (at least once: Arrow streams are ephemeral).

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{ArrayRef, DictionaryArray, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use sluice_sdk::{Client, Code, SdkError};

use crate::harness::{wait_for_rows, Server, CLIENT_ID, CLIENT_SECRET};
use crate::sdk_client::{assert_exactly, id_notes};
use crate::tcp_proxy::Proxy;

fn client(url: &str) -> Client {
    Client::builder(url)
        .credentials(CLIENT_ID, CLIENT_SECRET)
        .build()
        .expect("client")
}

fn schema() -> SchemaRef {
    let note = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("note", note, true),
    ]))
}

/// Rows `{id, note: n<id>}` for `ids`, the note dictionary-encoded.
fn batch(ids: std::ops::Range<i64>) -> RecordBatch {
    let notes: Vec<String> = ids.clone().map(|i| format!("n{i}")).collect();
    let notes: DictionaryArray<arrow_array::types::Int32Type> =
        notes.iter().map(|s| s.as_str()).collect();
    let columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from_iter_values(ids)), Arc::new(notes)];
    RecordBatch::try_new(schema(), columns).expect("batch")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_arrow_batches_are_read_back_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.sdk.arrow";
    let location = server
        .create_table_at(t, "id BIGINT NOT NULL, note STRING")
        .await;
    let stream = client(&server.url)
        .stream(t)
        .arrow(schema())
        .max_inflight_batches(8)
        .open()
        .await
        .expect("open");
    let mut acks = Vec::new();
    for b in 0..40i64 {
        acks.push(
            stream
                .send(batch(b * 250..(b + 1) * 250))
                .await
                .expect("send"),
        );
    }
    // Another schema is refused before it is sent; the stream goes on.
    let other =
        RecordBatch::try_from_iter([("id", Arc::new(Int64Array::from(vec![1i64])) as ArrayRef)])
            .expect("batch");
    assert!(matches!(
        stream.send(other).await,
        Err(SdkError::InvalidRecord(m)) if m.contains("not the stream's")
    ));
    let last = acks.pop().expect("acks").await.expect("acked");
    assert_eq!(last, 39, "acks report batch numbers");
    stream.close().await.expect("close");
    wait_for_rows(&location, 10_000, Duration::from_secs(30)).await;
    assert_exactly(&location, 0..10_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_the_table_cannot_hold_is_refused_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.sdk.arrowbad";
    server.create_table(t, "id BIGINT NOT NULL, note STRING");
    let wrong = Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, false)]));
    let err = client(&server.url)
        .stream(t)
        .arrow(wrong)
        .open()
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(&err, SdkError::Refused { code: Code::InvalidArgument, message, .. } if message.contains("id")),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arrow_stream_reconnects_after_a_network_cut_and_every_row_lands() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.sdk.arrowcut";
    let location = server
        .create_table_at(t, "id BIGINT NOT NULL, note STRING")
        .await;
    let proxy = Proxy::start(server.port).await;
    let stream = client(&proxy.url)
        .stream(t)
        .arrow(schema())
        .max_inflight_batches(4)
        .open()
        .await
        .expect("open");
    for b in 0..20i64 {
        stream
            .send(batch(b * 100..(b + 1) * 100))
            .await
            .expect("send");
    }
    proxy.cut();
    // Sent while cut: held unacked (4 at most), then resent once the network is back.
    let restore = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        proxy.restore();
        proxy
    });
    tokio::time::timeout(Duration::from_secs(60), async {
        for b in 20..40i64 {
            stream
                .send(batch(b * 100..(b + 1) * 100))
                .await
                .expect("send across the cut");
        }
    })
    .await
    .expect("the unacked batches were resent and acked");
    let _proxy = restore.await.expect("restored");
    tokio::time::timeout(Duration::from_secs(60), stream.close())
        .await
        .expect("closed in time")
        .expect("close");
    // Batches durable just before the cut but not yet acked are sent again (at-least-once).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let rows = loop {
        let mut rows = id_notes(&location).await;
        let total = rows.len();
        rows.dedup();
        if rows.len() >= 4_000 || std::time::Instant::now() > deadline {
            eprintln!("{total} rows for 4000 sent");
            break rows;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let want: Vec<(i64, String)> = (0..4_000).map(|i| (i, format!("n{i}"))).collect();
    assert!(rows == want, "every row at least once, nothing else");
}
