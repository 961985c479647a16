//! REST `Idempotency-Key`s across the pods of a cluster (real etcd, `sluice serve --join`
//! pods sharing one local-folder warehouse, a `sluice router`), over plain HTTP:
//!
//! - a keyed request answered by pod A, retried directly at pod B and through the router:
//!   200 every time, B writes nothing, the rows are in Delta once;
//! - a keyed request whose pod is SIGKILLed after its records are durable and before the
//!   answer (test hook `SLUICE_TEST_REST_PAUSE_AFTER_DURABLE`), retried at another pod:
//!   503 with `Retry-After` naming the pod while it is down (first "being written", then
//!   "not registered" once its lease expired); after its restart and replay: 200, the
//!   rows once;
//! - the same with a pod that never comes back: `sluice pod forget` releases its pending
//!   key and the retry writes the request, the rows once;
//! - a key past `--idempotency-window` is accepted as new and written again.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use arrow_array::Int64Array;

use crate::cluster_harness::{wait_for_pods, Etcd, Router};
use crate::harness::{read_delta, Server};

const COLUMNS: &str = "id BIGINT NOT NULL, note STRING";
const PAUSE_HOOK: &str = "SLUICE_TEST_REST_PAUSE_AFTER_DURABLE";

/// Starts pod `id` joined to `etcd`, flushing every 200 ms, with `extra` flags and `env`.
async fn pod(root: &Path, id: &str, etcd: &Etcd, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let warehouse = root.join("warehouse");
    let mut args = vec![
        "--join",
        etcd.join.as_str(),
        "--pod-id",
        id,
        "--warehouse",
        warehouse.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(extra);
    Server::start_with_env(&root.join(id), "200ms", &args, env).await
}

/// etcd, `pod-a` (with `a_env`) and `pod-b`, both with `extra` flags, and `table`
/// created; with the table's location and an admin token.
struct TwoPods {
    etcd: Etcd,
    a: Server,
    b: Server,
    location: String,
    token: String,
}

async fn two_pods(root: &Path, table: &str, extra: &[&str], a_env: &[(&str, &str)]) -> TwoPods {
    let etcd = Etcd::start(&root.join("etcd")).await;
    let a = pod(root, "pod-a", &etcd, extra, a_env).await;
    let b = pod(root, "pod-b", &etcd, extra, &[]).await;
    let location = a.create_table_at(table, COLUMNS).await;
    let token = a.token().await;
    TwoPods {
        etcd,
        a,
        b,
        location,
        token,
    }
}

/// One HTTP answer.
#[derive(Debug)]
struct Answer {
    status: u16,
    retry_after: Option<String>,
    body: String,
}

/// POSTs records `ids` (one JSON array) to `table` at `base` with `key`.
async fn post(
    base: &str,
    table: &str,
    token: &str,
    key: &str,
    ids: std::ops::Range<i64>,
) -> Result<Answer, reqwest::Error> {
    let records: Vec<serde_json::Value> = ids
        .map(|id| serde_json::json!({"id": id, "note": key}))
        .collect();
    let response = reqwest::Client::new()
        .post(format!("{base}/zerobus/v1/tables/{table}/insert"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .json(&records)
        .timeout(Duration::from_secs(60))
        .send()
        .await?;
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response.text().await?;
    Ok(Answer {
        status,
        retry_after,
        body,
    })
}

async fn post_ok(base: &str, table: &str, token: &str, key: &str, ids: std::ops::Range<i64>) {
    let answer = post(base, table, token, key, ids)
        .await
        .expect("request answered");
    assert_eq!(answer.status, 200, "{base}: {answer:?}");
}

/// How many times each id is in the Delta table at `location`.
async fn id_counts(location: &str) -> BTreeMap<i64, usize> {
    let mut counts = BTreeMap::new();
    for batch in read_delta(location).await {
        let ids = batch
            .column_by_name("id")
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
            .expect("id column");
        for id in ids.iter().flatten() {
            *counts.entry(id).or_insert(0) += 1;
        }
    }
    counts
}

/// Waits until the table holds `rows` rows, then two more commit intervals, and returns
/// each id's count (so rows written late, twice, are seen).
async fn settled_counts(location: &str, rows: usize) -> BTreeMap<i64, usize> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while id_counts(location).await.values().sum::<usize>() < rows {
        assert!(
            Instant::now() < deadline,
            "fewer than {rows} rows after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    id_counts(location).await
}

fn each_once(ids: std::ops::Range<i64>) -> BTreeMap<i64, usize> {
    ids.map(|id| (id, 1)).collect()
}

async fn written_and_duplicates(pod: &Server) -> (f64, f64) {
    let v = pod
        .metrics(&[
            "sluice_rest_records_total",
            "sluice_rest_duplicate_requests_total",
        ])
        .await;
    (v[0], v[1])
}

/// Waits until `pod`'s log shows the test hook holding a durable request's answer.
async fn wait_for_paused_answer(pod: &Server) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !pod.log().contains("pausing") {
        assert!(Instant::now() < deadline, "no paused answer: {}", pod.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends a keyed request to `a` (which holds its answer after the write, test hook),
/// SIGKILLs `a` meanwhile, and checks that the retry at `b` is refused 503 with
/// `Retry-After` naming `pod-a`, until etcd no longer lists `pod-a` ("not registered").
async fn kill_between_write_and_answer(
    a: &mut Server,
    b: &Server,
    etcd: &Etcd,
    table: &str,
    token: &str,
    key: &str,
    ids: std::ops::Range<i64>,
) {
    let (table, token, key) = (table.to_string(), token.to_string(), key.to_string());
    let pending = {
        let (url, table, token, key, ids) = (
            a.url.clone(),
            table.clone(),
            token.clone(),
            key.clone(),
            ids.clone(),
        );
        tokio::spawn(async move { post(&url, &table, &token, &key, ids).await })
    };
    wait_for_paused_answer(a).await;
    a.kill();
    let lost = pending.await.expect("task");
    assert!(
        lost.as_ref().map_or(true, |answer| answer.status != 200),
        "the killed pod answered: {lost:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen_live = false;
    loop {
        let answer = post(&b.url, &table, &token, &key, ids.clone())
            .await
            .expect("answered");
        assert_eq!(answer.status, 503, "retry while pod-a is down: {answer:?}");
        assert!(answer.retry_after.is_some(), "no Retry-After: {answer:?}");
        assert!(
            answer.body.contains("TEMPORARILY_UNAVAILABLE") && answer.body.contains("pod-a"),
            "{answer:?}"
        );
        if answer.body.contains("not registered") {
            assert_eq!(answer.retry_after.as_deref(), Some("5"));
            break;
        }
        seen_live |= answer.body.contains("being written");
        assert!(
            Instant::now() < deadline,
            "pod-a still registered: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        seen_live,
        "a retry right after the kill finds pod-a still registered"
    );
    wait_for_pods(&etcd.join, Duration::from_secs(10), "pod-a gone", |p| {
        p.iter().all(|p| p["id"] != "pod-a")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_request_answered_by_one_pod_is_not_written_again_by_another() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let table = "main.idem.across";
    let p = two_pods(root, table, &[], &[]).await;
    let (a, b, location, token) = (&p.a, &p.b, &p.location, &p.token);
    let router = Router::start(&root.join("router"), &p.etcd.join).await;

    post_ok(&a.url, table, token, "k-1", 0..10).await;
    post_ok(&b.url, table, token, "k-1", 0..10).await;
    let b_after_retry = written_and_duplicates(b).await;
    for _ in 0..2 {
        post_ok(&router.url, table, token, "k-1", 0..10).await;
    }
    post_ok(&a.url, table, token, "k-1", 0..10).await;
    // A second key, first at pod-b, retried at pod-a.
    post_ok(&b.url, table, token, "k-2", 10..20).await;
    post_ok(&a.url, table, token, "k-2", 10..20).await;
    assert_eq!(settled_counts(location, 20).await, each_once(0..20));
    assert_eq!(
        b_after_retry,
        (0.0, 1.0),
        "pod-b acknowledged the retry without writing"
    );
    let (a_written, a_dups) = written_and_duplicates(a).await;
    let (b_written, b_dups) = written_and_duplicates(b).await;
    assert_eq!((a_written + b_written, a_dups + b_dups), (20.0, 5.0));
}

/// [`two_pods`] with pod-a's answers held after the write, and a request with `key`
/// whose pod-a was killed before answering ([`kill_between_write_and_answer`]).
async fn two_pods_after_a_kill(root: &Path, table: &str, key: &str) -> TwoPods {
    let mut p = two_pods(root, table, &[], &[(PAUSE_HOOK, "60s")]).await;
    kill_between_write_and_answer(&mut p.a, &p.b, &p.etcd, table, &p.token, key, 0..10).await;
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_whose_pod_died_before_answering_is_fenced_until_that_pod_replays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = "main.idem.killed";
    let mut p = two_pods_after_a_kill(dir.path(), table, "k-kill").await;
    // Still fenced: pod-a's WAL holds the records, only its replay can tell.
    let answer = post(&p.b.url, table, &p.token, "k-kill", 0..10)
        .await
        .expect("answered");
    assert_eq!(answer.status, 503, "{answer:?}");
    p.a.restart().await;
    post_ok(&p.b.url, table, &p.token, "k-kill", 0..10).await;
    assert_eq!(settled_counts(&p.location, 10).await, each_once(0..10));
    assert_eq!(written_and_duplicates(&p.b).await, (0.0, 1.0));
    let log = p.a.log();
    assert!(
        log.contains("durable=1") && log.contains("settled from its WAL"),
        "pod-a settled its key at start: {log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_pods_pending_key_is_released_and_the_retry_writes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = "main.idem.forgot";
    let p = two_pods_after_a_kill(dir.path(), table, "k-lost").await;
    let forget = p.b.cli(&["pod", "forget", "pod-a", "--join", &p.etcd.join]);
    let said = String::from_utf8_lossy(&forget.stdout).into_owned();
    assert!(
        forget.status.success() && said.contains("1 pending idempotency key(s) released"),
        "{said} {}",
        String::from_utf8_lossy(&forget.stderr)
    );
    post_ok(&p.b.url, table, &p.token, "k-lost", 0..10).await;
    assert_eq!(written_and_duplicates(&p.b).await, (10.0, 0.0));
    post_ok(&p.b.url, table, &p.token, "k-lost", 0..10).await;
    // pod-a never comes back: its WAL's copy is never committed.
    assert_eq!(settled_counts(&p.location, 10).await, each_once(0..10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_past_the_window_is_accepted_as_new() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let table = "main.idem.window";
    let p = two_pods(root, table, &["--idempotency-window", "3s"], &[]).await;
    let (a, b, location, token) = (&p.a, &p.b, &p.location, &p.token);

    post_ok(&a.url, table, token, "k-w", 0..10).await;
    post_ok(&b.url, table, token, "k-w", 0..10).await;
    assert_eq!(
        written_and_duplicates(b).await,
        (0.0, 1.0),
        "inside the window"
    );
    tokio::time::sleep(Duration::from_millis(3500)).await;
    post_ok(&b.url, table, token, "k-w", 0..10).await;
    assert_eq!(
        written_and_duplicates(b).await,
        (10.0, 1.0),
        "past the window"
    );
    post_ok(&a.url, table, token, "k-w", 0..10).await;
    assert_eq!(
        written_and_duplicates(a).await,
        (10.0, 1.0),
        "the new request's key counts again"
    );
    let twice: BTreeMap<i64, usize> = (0..10).map(|id| (id, 2)).collect();
    assert_eq!(settled_counts(location, 20).await, twice);
}
