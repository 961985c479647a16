//! Token expiry mid-stream with Sluice's own SDK against a real `sluice serve` whose tokens
//! live 5 s (`--token-ttl 5s`, the shortest the pod allows): a persistent stream keeps
//! sending for 14 s while a TCP proxy the test controls cuts the connection after the
//! first token expired and again after the second did; each reconnect needs a fresh
//! token (the pod refuses the expired one, checked here), and every record lands once.

use std::time::{Duration, Instant};

use sluice_sdk::Client;
use tonic::Code;

use crate::harness::{wait_for_rows, Server, CLIENT_ID, CLIENT_SECRET};
use crate::raw::{create_json, exchange, Call};
use crate::sdk_client::assert_exactly;
use crate::tcp_proxy::Proxy;

const TTL: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_reconnects_across_token_expiry_with_refreshed_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let producer = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with_args(dir.path(), "200ms", &["--token-ttl", "5s"]).await;
    let t = "main.sdk.expiry";
    let location = server
        .create_table_at(t, "id BIGINT NOT NULL, note STRING")
        .await;
    let proxy = Proxy::start(server.port).await;
    let first_token = server.token().await;
    let started = Instant::now();
    let stream = Client::builder(&proxy.url)
        .credentials(CLIENT_ID, CLIENT_SECRET)
        .build()
        .expect("client")
        .stream(t)
        .json()
        .persistent(producer.path().join("stream.json"))
        .open()
        .await
        .expect("open");
    let total = 1_400i64;
    let mut cuts = vec![Duration::from_secs(7), Duration::from_secs(13)];
    for id in 0..total {
        let note = serde_json::json!({"id": id, "note": format!("n{id}")}).to_string();
        stream.send(note).await.expect("send");
        tokio::time::sleep(Duration::from_millis(10)).await;
        if cuts.first().is_some_and(|at| started.elapsed() >= *at) {
            cuts.remove(0);
            proxy.cut();
            tokio::time::sleep(Duration::from_millis(300)).await;
            proxy.restore();
        }
    }
    assert!(cuts.is_empty(), "both cuts happened while sending");
    assert!(
        started.elapsed() > 2 * TTL,
        "the stream outlived two tokens"
    );
    // The token the stream could have kept is refused by the pod now.
    let (_, status) = exchange(
        Call {
            url: &server.url,
            table: t,
            token: Some(&first_token),
        },
        vec![create_json(t)],
    )
    .await;
    assert_eq!(status.expect("refused").code(), Code::Unauthenticated);
    tokio::time::timeout(Duration::from_secs(30), stream.close())
        .await
        .expect("closed in time")
        .expect("close");
    wait_for_rows(&location, total as usize, Duration::from_secs(30)).await;
    assert_exactly(&location, 0..total).await;
}
