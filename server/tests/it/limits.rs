//! Limits that a real pod enforces across streams: the per-pod stream cap
//! (`--max-streams`) and per-principal pacing (`--rate-records`). Each test
//! drives a real `sluice serve` with raw tonic streams and checks that the
//! streams that stay within bounds keep getting acks and their rows land.

use std::time::{Duration, Instant};

use tonic::Code;

use crate::harness::{wait_for_rows, Server};
use crate::raw::{Call, OpenStream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_stream_cap_refuses_the_extra_stream_and_frees_a_slot_on_close() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with_args(dir.path(), "200ms", &["--max-streams", "2"]).await;
    let t = "main.limits.cap";
    let location = server.create_table_at(t, "id BIGINT NOT NULL").await;
    let url = server.url.as_str();
    let token = server.token().await;
    let call = || Call {
        url,
        table: t,
        token: Some(token.as_str()),
    };

    let mut first = OpenStream::open(call()).await.expect("first stream");
    let second = OpenStream::open(call()).await.expect("second stream");
    let refused = match OpenStream::open(call()).await {
        Ok(_) => panic!("a third stream opened past --max-streams 2"),
        Err(status) => status,
    };
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("--max-streams"),
        "the message names the flag: {}",
        refused.message()
    );

    // The streams inside the cap carry on.
    let o = first.send(r#"{"id": 1}"#).await;
    first.wait_acked(o).await;

    // Closing one frees its slot for a new stream.
    assert!(second.close().await.is_none(), "second stream ends OK");
    let mut third = reopen_within(call, Duration::from_secs(10)).await;
    let o = third.send(r#"{"id": 2}"#).await;
    third.wait_acked(o).await;
    assert!(first.close().await.is_none());
    assert!(third.close().await.is_none());
    wait_for_rows(&location, 2, Duration::from_secs(20)).await;
}

/// Opens a stream, retrying while the pod still counts a just-closed one.
async fn reopen_within<'a>(call: impl Fn() -> Call<'a>, limit: Duration) -> OpenStream {
    let deadline = Instant::now() + limit;
    loop {
        match OpenStream::open(call()).await {
            Ok(stream) => return stream,
            Err(status) if Instant::now() < deadline => {
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(status) => panic!("no slot freed after a close: {status:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_over_its_record_rate_is_paced_not_refused() {
    const RATE: u64 = 400;
    const RECORDS: i64 = 1600;
    let dir = tempfile::tempdir().expect("tempdir");
    let server =
        Server::start_with_args(dir.path(), "200ms", &["--rate-records", &RATE.to_string()]).await;
    let t = "main.limits.rate";
    let location = server.create_table_at(t, "id BIGINT NOT NULL").await;
    let token = server.token().await;
    let mut stream = OpenStream::open(Call {
        url: server.url.as_str(),
        table: t,
        token: Some(token.as_str()),
    })
    .await
    .expect("stream");

    let started = Instant::now();
    let mut last = -1;
    for id in 0..RECORDS {
        last = stream.send(&format!(r#"{{"id": {id}}}"#)).await;
    }
    stream.wait_acked(last).await;
    let elapsed = started.elapsed();
    // A one-second burst of RATE records, then RATE per second: the rest
    // cannot be acked sooner than (RECORDS - RATE) / RATE seconds.
    let floor = Duration::from_secs_f64((RECORDS as u64 - RATE) as f64 / RATE as f64 * 0.9);
    assert!(
        elapsed >= floor,
        "{RECORDS} records at --rate-records {RATE} were acked in {elapsed:?}, under {floor:?}"
    );
    assert!(stream.close().await.is_none(), "paced, never refused");
    wait_for_rows(&location, RECORDS as usize, Duration::from_secs(20)).await;
}
