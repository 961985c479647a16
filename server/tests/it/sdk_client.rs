//! Sluice's own producer SDK (`sluice-sdk`) against real `sluice serve` processes: records
//! read back exactly; a persistent stream whose pod is SIGKILLed and restarted twice
//! mid-stream, and whose producer restarts, with every record exactly once in Delta (read
//! by Python `deltalake` + `polars`); a network cut (a TCP proxy the test controls) during
//! which the offline spool fills, then drains once the network is back; a device process
//! (the `telemetry_device` example) that powers off with spooled readings and sends them
//! after its restart.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use arrow_array::{Array, Int64Array, RecordBatch, StringArray};
use sluice_sdk::{Client, SdkError, SpoolOptions, WhenFull};

use crate::harness::{read_delta, wait_for_rows, Server, CLIENT_ID, CLIENT_SECRET};
use crate::persistent_raw::assert_each_once;
use crate::tcp_proxy::Proxy;

const COLUMNS: &str = "id BIGINT NOT NULL, note STRING";

fn client(url: &str) -> Client {
    Client::builder(url)
        .credentials(CLIENT_ID, CLIENT_SECRET)
        .build()
        .expect("client")
}

fn note(id: i64) -> String {
    serde_json::json!({"id": id, "note": format!("n{id}")}).to_string()
}

/// Every `(id, note)` of the table, sorted.
pub async fn id_notes(location: &str) -> Vec<(i64, String)> {
    rows_of(&read_delta(location).await)
}

fn rows_of(batches: &[RecordBatch]) -> Vec<(i64, String)> {
    let mut rows = Vec::new();
    for b in batches {
        let ids = b
            .column_by_name("id")
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
            .expect("id column");
        let notes = b
            .column_by_name("note")
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .expect("note column");
        for i in 0..b.num_rows() {
            let note = if notes.is_null(i) {
                String::new()
            } else {
                notes.value(i).to_string()
            };
            rows.push((ids.value(i), note));
        }
    }
    rows.sort();
    rows
}

/// Asserts the table holds exactly `{id, note: n<id>}` for `ids`, each once.
pub async fn assert_exactly(location: &str, ids: std::ops::Range<i64>) {
    let rows = id_notes(location).await;
    let want: Vec<(i64, String)> = ids.map(|i| (i, format!("n{i}"))).collect();
    assert_eq!(rows.len(), want.len(), "row count");
    assert!(rows == want, "rows differ from what was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_records_are_read_back_exactly_and_acks_complete_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.sdk.exact";
    let location = server.create_table_at(t, COLUMNS).await;
    let stream = client(&server.url)
        .stream(t)
        .json()
        .max_inflight_records(500)
        .batch(64, 1 << 20)
        .open()
        .await
        .expect("open");
    let mut last = None;
    for id in 0..5000 {
        let ack = stream.send(note(id)).await.expect("send");
        assert_eq!(ack.offset(), id);
        last = Some(ack);
    }
    assert_eq!(last.expect("an ack").await.ok(), Some(4999));
    stream.close().await.expect("close");
    wait_for_rows(&location, 5000, Duration::from_secs(30)).await;
    assert_exactly(&location, 0..5000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_record_fails_the_stream_naming_its_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.sdk.bad";
    server.create_table(t, COLUMNS);
    let stream = client(&server.url)
        .stream(t)
        .json()
        .open()
        .await
        .expect("open");
    for id in 0..10 {
        stream.send(note(id)).await.expect("send");
    }
    let bad = stream.send(r#"{"id": "eleven"}"#).await.expect("send");
    let err = bad.await.expect_err("refused");
    match &err {
        SdkError::Refused {
            record, message, ..
        } => {
            assert_eq!(*record, Some(10), "{message}");
            assert!(message.contains("id"), "{message}");
        }
        other => panic!("not a refusal: {other}"),
    }
    assert!(matches!(
        stream.close().await,
        Err(SdkError::Refused { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_sdk_stream_survives_pod_sigkills_and_a_producer_restart_exactly_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let producer = tempfile::tempdir().expect("tempdir");
    let state = producer.path().join("stream.json");
    let mut server = Server::start(dir.path(), "200ms").await;
    let t = "main.sdk.pkill";
    let location = server.create_table_at(t, COLUMNS).await;
    let total = 30_000i64;
    let url = server.url.clone();

    // The first producer process: sends 0..20000 while the pod is SIGKILLed twice.
    let first = {
        let (url, state) = (url.clone(), state.clone());
        tokio::spawn(async move {
            let stream = client(&url)
                .stream(t)
                .json()
                .persistent(&state)
                .max_inflight_records(2_000)
                .open()
                .await
                .expect("open");
            for id in 0..20_000 {
                stream.send(note(id)).await.expect("send");
                if id % 500 == 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            stream.flush().await.expect("flush");
            // The process dies here without closing: nothing after the flush is needed.
            drop(stream);
        })
    };
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(
            !first.is_finished(),
            "the pod is killed while the producer sends"
        );
        server.kill();
        tokio::time::sleep(Duration::from_millis(200)).await;
        server.restart().await;
    }
    tokio::time::timeout(Duration::from_secs(120), first)
        .await
        .expect("first producer finished")
        .expect("first producer ok");

    // The producer restarts with its state file: resumes the same stream past 19999.
    let stream = client(&url)
        .stream(t)
        .json()
        .persistent(&state)
        .open()
        .await
        .expect("resume");
    assert_eq!(
        stream.next_offset(),
        20_000,
        "resumed at the server's watermark"
    );
    for id in stream.next_offset()..total {
        stream.send(note(id)).await.expect("send");
    }
    stream.close().await.expect("close");
    server.terminate();
    assert_each_once(&location, total);
    assert_exactly(&location, 0..total).await;
}

fn spool(dir: &Path, max_bytes: u64, when_full: WhenFull) -> SpoolOptions {
    SpoolOptions::new(dir)
        .max_bytes(max_bytes)
        .when_full(when_full)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spool_fills_while_the_network_is_cut_and_drains_when_it_returns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let device = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.sdk.cut";
    let location = server.create_table_at(t, COLUMNS).await;
    let proxy = Proxy::start(server.port).await;
    let stream = client(&proxy.url)
        .stream(t)
        .json()
        .persistent(device.path().join("stream.json"))
        .spool(spool(
            &device.path().join("spool"),
            8 << 20,
            WhenFull::Block,
        ))
        .max_inflight_records(1_000)
        .open()
        .await
        .expect("open");
    for id in 0..2_000 {
        stream.send(note(id)).await.expect("send");
    }
    // Cut while records are still in flight: they are resent on the resumed stream.
    proxy.cut();
    // The network is down: sends are still accepted (into the spool), nothing is acked.
    let started = Instant::now();
    for id in 2_000..12_000 {
        stream.send(note(id)).await.expect("send while cut");
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "sends did not block"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let waiting = stream.spool_waiting_bytes();
    assert!(
        waiting > 100_000,
        "the spool holds the records sent while cut: {waiting} bytes"
    );
    assert!(
        stream.acked_offset() < 2_000 + 1_000,
        "acked {}",
        stream.acked_offset()
    );
    proxy.restore();
    tokio::time::timeout(Duration::from_secs(60), stream.flush())
        .await
        .expect("drained in time")
        .expect("flush");
    assert_eq!(stream.spool_waiting_bytes(), 0, "drained");
    stream.close().await.expect("close");
    wait_for_rows(&location, 12_000, Duration::from_secs(30)).await;
    assert_exactly(&location, 0..12_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_spool_drops_the_oldest_records_and_says_which() {
    let dir = tempfile::tempdir().expect("tempdir");
    let device = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.sdk.drop";
    let location = server.create_table_at(t, COLUMNS).await;
    let proxy = Proxy::start(server.port).await;
    let stream = client(&proxy.url)
        .stream(t)
        .json()
        .spool(spool(
            &device.path().join("spool"),
            64 << 10,
            WhenFull::DropOldest,
        ))
        .max_inflight_records(100)
        .open()
        .await
        .expect("open");
    proxy.cut();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut acks = Vec::new();
    for id in 0..5_000 {
        acks.push(stream.send(note(id)).await.expect("send while cut"));
    }
    proxy.restore();
    stream.flush().await.expect("flush");
    let (mut kept, mut dropped) = (Vec::new(), 0);
    for ack in acks {
        let offset = ack.offset();
        match ack.await {
            Ok(_) => kept.push(offset),
            Err(SdkError::Dropped(o)) => {
                assert_eq!(o, offset);
                dropped += 1;
            }
            Err(e) => panic!("record {offset}: {e}"),
        }
    }
    assert!(
        dropped > 1_000,
        "the 64 KiB spool could not hold 5000 records: {dropped} dropped"
    );
    assert!(kept.contains(&4_999), "the newest record is kept");
    stream.close().await.expect("close");
    wait_for_rows(&location, kept.len(), Duration::from_secs(30)).await;
    let ids: Vec<i64> = id_notes(&location)
        .await
        .into_iter()
        .map(|(i, _)| i)
        .collect();
    // Ephemeral: records in flight at the cut may come twice; every kept one is there.
    let mut distinct = ids.clone();
    distinct.dedup();
    assert_eq!(distinct, kept, "exactly the records not dropped");
}

/// Builds (if needed) and returns the `telemetry_device` example binary.
fn telemetry_device() -> PathBuf {
    let root = crate::moto::repo_root();
    let status = std::process::Command::new(env!("CARGO"))
        .args([
            "build",
            "-q",
            "-p",
            "sluice-sdk",
            "--example",
            "telemetry_device",
        ])
        .current_dir(&root)
        .status()
        .expect("cargo build the example");
    assert!(
        status.success(),
        "building the telemetry_device example failed"
    );
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    target.join("debug/examples/telemetry_device")
}

fn run_device(
    bin: &Path,
    url: &str,
    table: &str,
    spool: &Path,
    first: i64,
    n: i64,
    power_off: bool,
) -> String {
    let out = std::process::Command::new(bin)
        .env("SLUICE_ENDPOINT", url)
        .env("SLUICE_CLIENT_ID", CLIENT_ID)
        .env("SLUICE_CLIENT_SECRET", CLIENT_SECRET)
        .env("TABLE", table)
        .env("SPOOL_DIR", spool)
        .env("FIRST_ID", first.to_string())
        .env("READINGS", n.to_string())
        .env("POWER_OFF", if power_off { "1" } else { "0" })
        .output()
        .expect("run the device");
    assert!(
        out.status.success(),
        "device failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_restarted_with_spooled_readings_sends_them_once() {
    let bin = telemetry_device();
    let dir = tempfile::tempdir().expect("tempdir");
    let device = tempfile::tempdir().expect("tempdir");
    let spool_dir = device.path().join("spool");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.sdk.device";
    let location = server
        .create_table_at(t, "id BIGINT NOT NULL, device STRING, temp DOUBLE")
        .await;
    let proxy = Proxy::start(server.port).await;
    // Online: 200 readings sent and acked.
    let out = run_device(&bin, &proxy.url, t, &spool_dir, 0, 200, false);
    assert!(out.contains("every spooled reading acked"), "{out}");
    // Offline: 300 readings spooled, then the device powers off.
    proxy.cut();
    let out = run_device(&bin, &proxy.url, t, &spool_dir, 200, 300, true);
    assert!(out.contains("spooled 300"), "{out}");
    wait_for_rows(&location, 200, Duration::from_secs(30)).await;
    // Back online after a restart: the spooled readings go first, then 100 new ones.
    proxy.restore();
    let out = run_device(&bin, &proxy.url, t, &spool_dir, 500, 100, false);
    assert!(out.contains("every spooled reading acked"), "{out}");
    wait_for_rows(&location, 600, Duration::from_secs(30)).await;
    let mut ids: Vec<i64> = read_delta(&location)
        .await
        .iter()
        .flat_map(|b| {
            let col = b
                .column_by_name("id")
                .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
                .expect("id");
            col.values().to_vec()
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        (0..600).collect::<Vec<i64>>(),
        "each reading exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_pod_stop_moves_the_stream_on_without_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "200ms").await;
    let t = "main.sdk.drain";
    let location = server.create_table_at(t, COLUMNS).await;
    let url = server.url.clone();
    let total = 20_000i64;
    let producer = tokio::spawn(async move {
        let stream = client(&url)
            .stream(t)
            .json()
            .max_inflight_records(1_000)
            .open()
            .await
            .expect("open");
        for id in 0..total {
            stream
                .send(note(id))
                .await
                .expect("send: no error reaches the caller");
            if id % 200 == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        stream
            .close()
            .await
            .expect("close: no error reaches the caller");
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !producer.is_finished(),
        "the pod stops while the producer sends"
    );
    // SIGTERM: the pod acks what it logged, sends CloseStreamSignal, ends with UNAVAILABLE.
    server.terminate();
    server.restart().await;
    tokio::time::timeout(Duration::from_secs(120), producer)
        .await
        .expect("producer finished")
        .expect("producer ok");
    wait_for_rows(&location, total as usize, Duration::from_secs(30)).await;
    assert_exactly(&location, 0..total).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_over_tls_trusts_custom_roots_and_not_an_unknown_ca() {
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let (ca, cert, key) = crate::tls::make_certs(dir.path());
    let ca_pem = std::fs::read(&ca).expect("ca pem");
    let server = crate::tls::start_tls(dir.path(), &cert, &key, &ca_pem).await;
    let t = "main.sdk.tls";
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["table", "create", t, "--columns", COLUMNS])
        .env("SLUICE_SERVER", &server.url)
        .env("SLUICE_CLIENT_ID", CLIENT_ID)
        .env("SLUICE_CLIENT_SECRET", CLIENT_SECRET)
        .env("SSL_CERT_FILE", &ca)
        .output()
        .expect("cli");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Custom roots: token over HTTPS and gRPC over TLS both trust the test CA.
    let trusted = Client::builder(&server.url)
        .credentials(CLIENT_ID, CLIENT_SECRET)
        .ca_pem(ca_pem.clone())
        .build()
        .expect("client");
    let stream = trusted
        .stream(t)
        .json()
        .open()
        .await
        .expect("open over TLS");
    let mut last = None;
    for id in 0..100 {
        last = Some(stream.send(note(id)).await.expect("send"));
    }
    assert_eq!(last.expect("ack").await.ok(), Some(99));
    stream.close().await.expect("close");
    // System roots do not hold the test CA: the stream never opens.
    let untrusted = client(&server.url);
    let refused = untrusted
        .stream(t)
        .json()
        .open_timeout(Duration::from_secs(3))
        .open()
        .await
        .err()
        .expect("an unknown CA is not trusted");
    assert!(matches!(refused, SdkError::Unavailable(_)), "{refused}");
}

#[derive(Clone, PartialEq, prost::Message)]
struct Row {
    #[prost(int64, optional, tag = "1")]
    id: Option<i64>,
    #[prost(string, optional, tag = "2")]
    note: Option<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_protobuf_records_are_read_back_exactly() {
    use prost::Message;
    use prost_types::field_descriptor_proto::Type;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.sdk.proto";
    let location = server.create_table_at(t, COLUMNS).await;
    let encoded = crate::raw::descriptor(&[("id", 1, Type::Int64), ("note", 2, Type::String)]);
    let descriptor = prost_types::DescriptorProto::decode(&encoded[..]).expect("descriptor");
    let stream = client(&server.url)
        .stream(t)
        .proto(&descriptor)
        .open()
        .await
        .expect("open");
    for id in 0..3000 {
        let row = Row {
            id: Some(id),
            note: Some(format!("n{id}")),
        };
        stream.send(row.encode_to_vec()).await.expect("send");
    }
    stream.close().await.expect("close");
    wait_for_rows(&location, 3000, Duration::from_secs(30)).await;
    assert_exactly(&location, 0..3000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_pool_spreads_records_over_its_streams_and_each_lands_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.sdk.pool";
    let location = server.create_table_at(t, COLUMNS).await;
    let pool = client(&server.url)
        .stream(t)
        .json()
        .open_pool(4)
        .await
        .expect("open pool");
    let mut per_stream = [0usize; 4];
    let mut acks = Vec::new();
    for id in 0..8_000 {
        let sent = pool.send(note(id)).await.expect("send");
        per_stream[sent.stream] += 1;
        acks.push(sent.ack);
    }
    assert_eq!(per_stream, [2_000; 4], "round-robin over 4 streams");
    pool.flush().await.expect("flush");
    assert!(acks.iter().all(|a| a.is_acked()), "every record acked");
    pool.close().await.expect("close");
    wait_for_rows(&location, 8_000, Duration::from_secs(30)).await;
    assert_exactly(&location, 0..8_000).await;
}
