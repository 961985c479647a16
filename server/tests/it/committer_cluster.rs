//! One committer per table in a cluster (ARCHITECTURE "Exactly-once at scale"), on real
//! etcd and real `sluice serve --join` pods sharing one local warehouse, with official-SDK
//! producers:
//! - three pods writing one table: every row once, every data commit carries the elected
//!   committer's epoch `txn`, and the table gets about one commit per `--commit-interval`,
//!   not one per pod;
//! - the committer's pod SIGKILLed mid-load: another pod is elected with a higher epoch;
//! - the committer SIGSTOPped past its lease: another pod claims; after SIGCONT no commit
//!   of the old epoch follows the claim;
//! - etcd killed while the pods stream: acks continue; etcd back → commits resume;
//! - a committer that may hold one pending hand-off (`--committer-max-pending 1`) and
//!   pods flushing every 20 ms: the committer answers busy, the pods back off, and the
//!   producers see no error.
//!
//! In every case each acked row is in Delta once (records unacked at a pod kill may repeat:
//! ephemeral streams are at-least-once across a reconnect).

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cluster_harness::{wait_for_pods, Etcd, Router};
use crate::elect_harness::{
    log_commits, now_ms, signal, start_pod_with, wait_for_committer, LogCommit,
};
use crate::harness::{sdk_at, Server};
use crate::ledger::{
    finish_producers, lock, open_stream, produce, snapshot_unacked, Ledger, Ledgers, Verdict,
};

const COLUMNS: &str = "id BIGINT NOT NULL, stream BIGINT, seq BIGINT";

/// etcd, `n` pods and one table created on the first; returns (etcd, pods, table location).
async fn cluster(root: &Path, n: usize, table: &str) -> (Etcd, Vec<Server>, String) {
    let warehouse = root.join("warehouse");
    let etcd = Etcd::start(&root.join("etcd")).await;
    let mut pods = Vec::new();
    for i in 0..n {
        // The commit interval these tests count commits against (the default is 250 ms).
        let extra = ["--commit-interval", "1s"];
        let id = format!("pod-{i}");
        pods.push(start_pod_with(root, &id, &etcd.join, &warehouse, "250ms", &extra).await);
    }
    wait_for_pods(
        &etcd.join,
        Duration::from_secs(10),
        "pods registered",
        |p| p.len() == n,
    )
    .await;
    let location = pods[0].create_table_at(table, COLUMNS).await;
    (etcd, pods, location)
}

/// Restarts `pod` (one of a 3-pod cluster) so that its rewriting alters wait `pause` between
/// their pending record (and rewritten files) and their first Delta commit attempt.
async fn restart_pausing_rewrites(etcd: &Etcd, pod: &mut Server, pause: &str) {
    pod.terminate();
    pod.env.push((
        "SLUICE_TEST_REWRITE_PAUSE_BEFORE_COMMIT".into(),
        pause.into(),
    ));
    pod.restart().await;
    wait_for_pods(
        &etcd.join,
        Duration::from_secs(20),
        "pods registered",
        |p| p.len() == 3,
    )
    .await;
}

/// Producers writing `table`: `per_pod` streams on each of `urls`.
struct Load {
    stop: Arc<AtomicBool>,
    ledgers: Ledgers,
    producers: Vec<tokio::task::JoinHandle<Result<u64, String>>>,
}

impl Load {
    async fn start(urls: &[String], per_pod: usize, table: &str) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let mut ledgers: Ledgers = Vec::new();
        let mut producers = Vec::new();
        for url in urls {
            let sdk = sdk_at(url);
            for _ in 0..per_pod {
                let s = ledgers.len() as i64;
                let ledger = Arc::new(Mutex::new(Ledger::default()));
                ledgers.push(ledger.clone());
                let stream = open_stream(&sdk, table, &ledger).await;
                producers.push(tokio::spawn(produce(stream, s, ledger, stop.clone())));
            }
        }
        Load {
            stop,
            ledgers,
            producers,
        }
    }

    /// Offsets acked so far over all streams.
    fn acked(&self) -> i64 {
        self.ledgers
            .iter()
            .map(|l| lock(l).acked_up_to().map_or(0, |a| a + 1))
            .sum()
    }

    async fn finish(self, log: impl Fn() -> String) -> (Ledgers, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let sent = finish_producers(self.producers, Duration::from_secs(120), log).await;
        (self.ledgers, sent)
    }
}

/// Waits until every acked row is in the table (the last hand-offs committed).
async fn settle(ledgers: &Ledgers, location: &str, may_repeat: &HashSet<i64>) -> Verdict {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let verdict = Verdict::of_table(ledgers, location, may_repeat).await;
        if verdict.missing.is_empty() || Instant::now() > deadline {
            return verdict;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn data_commits(location: &str) -> Vec<LogCommit> {
    log_commits(location)
        .into_iter()
        .filter(|c| c.adds > 0)
        .collect()
}

fn logs(pods: &[Server]) -> String {
    pods.iter()
        .map(|p| format!("--- {}\n{}", p.url, p.log()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_pods_one_table_commit_through_one_committer_about_once_per_interval() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = "main.elect.three";
    let (etcd, pods, location) = cluster(dir.path(), 3, table).await;
    let urls: Vec<String> = pods.iter().map(|p| p.url.clone()).collect();
    let load = Load::start(&urls, 2, table).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let window_start = now_ms();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let window_end = now_ms();
    let (ledgers, sent) = load.finish(|| logs(&pods)).await;
    let verdict = settle(&ledgers, &location, &HashSet::new()).await;
    let holder = wait_for_committer(&etcd.join, table, Duration::from_secs(1), |_| true).await;

    let commits = data_commits(&location);
    let in_window = commits
        .iter()
        .filter(|c| c.timestamp >= window_start && c.timestamp < window_end)
        .count();
    let seconds = (window_end - window_start) as f64 / 1000.0;
    eprintln!(
        "three pods: {sent} records; {} data commits, {in_window} in {seconds:.1} s \
         ({:.2}/s); committer {holder:?}; {}",
        commits.len(),
        in_window as f64 / seconds,
        verdict.summary()
    );
    verdict.assert_holds();
    assert!(verdict.duplicates.is_empty(), "no row twice");
    for c in &commits {
        assert_eq!(
            c.epoch(),
            Some(holder.2 as i64),
            "data commit {} carries the committer's epoch txn: {c:?}",
            c.version
        );
    }
    // Every pod flushes every 250 ms: per-pod commits would give ≥ 3/s (one per pod per
    // 1 s commit interval); one committer gives ~1/s.
    assert!(
        (in_window as f64) <= seconds * 1.5 + 1.0,
        "{in_window} data commits in {seconds:.1} s: more than one committer per table?"
    );
    // All three pods handed off (each WAL has its txn in the log).
    let wals: HashSet<&String> = commits
        .iter()
        .flat_map(|c| c.txns.keys())
        .filter(|k| k.as_str() != crate::elect_harness::COMMITTER_APP_ID)
        .collect();
    assert!(wals.len() >= 3, "hand-offs of 3 pod WALs: {wals:?}");
    drop(pods);
    drop(etcd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_committers_pod_killed_mid_load_another_is_elected_and_every_acked_row_is_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = "main.elect.killed";
    let (etcd, mut pods, location) = cluster(dir.path(), 3, table).await;
    let router = Router::start(&dir.path().join("router"), &etcd.join).await;
    let load = Load::start(std::slice::from_ref(&router.url), 6, table).await;
    let first = wait_for_committer(&etcd.join, table, Duration::from_secs(20), |_| true).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let victim = pods
        .iter()
        .position(|p| p.data_dir.ends_with(&first.0))
        .expect("the committer is one of the pods");
    pods[victim].kill();
    let mut unacked = HashSet::new();
    snapshot_unacked(&load.ledgers, &mut unacked);
    let second = wait_for_committer(&etcd.join, table, Duration::from_secs(30), |h| {
        h.0 != first.0
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The killed pod comes back with its volume and hands off what its WAL holds.
    pods[victim].restart().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (ledgers, sent) = load.finish(|| router.log()).await;
    for pod in pods.iter_mut() {
        pod.terminate();
    }
    let verdict = Verdict::of_table(&ledgers, &location, &unacked).await;
    let epochs: Vec<i64> = data_commits(&location)
        .iter()
        .filter_map(|c| c.epoch())
        .collect();
    eprintln!(
        "committer killed: {sent} records; committer {first:?} then {second:?}; epochs of \
         data commits {:?}..{:?}; {}",
        epochs.first(),
        epochs.last(),
        verdict.summary()
    );
    verdict.assert_holds();
    assert!(second.2 > first.2, "a higher epoch: {first:?} → {second:?}");
    assert!(
        epochs.contains(&(second.2 as i64)),
        "the new committer committed with its epoch"
    );
    assert!(
        epochs.windows(2).all(|w| w[0] <= w[1]),
        "epochs never go back in the log: {epochs:?}"
    );
    drop(router);
    drop(etcd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committer_paused_past_its_lease_cannot_commit_after_its_successor_claimed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = "main.elect.paused";
    let (etcd, pods, location) = cluster(dir.path(), 3, table).await;
    let urls: Vec<String> = pods.iter().map(|p| p.url.clone()).collect();
    let load = Load::start(&urls, 1, table).await;
    let first = wait_for_committer(&etcd.join, table, Duration::from_secs(20), |_| true).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let paused = pods
        .iter()
        .position(|p| p.data_dir.ends_with(&first.0))
        .expect("the committer is one of the pods");
    signal(&pods[paused], libc::SIGSTOP);
    let second = wait_for_committer(&etcd.join, table, Duration::from_secs(30), |h| {
        h.0 != first.0
    })
    .await;
    // The successor claims (a commit of its epoch) while the old one sleeps.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !log_commits(&location)
        .iter()
        .any(|c| c.epoch() == Some(second.2 as i64))
    {
        assert!(Instant::now() < deadline, "the successor never claimed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    signal(&pods[paused], libc::SIGCONT);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (ledgers, sent) = load.finish(|| logs(&pods)).await;
    let verdict = settle(&ledgers, &location, &HashSet::new()).await;
    let commits = log_commits(&location);
    let claim = commits
        .iter()
        .position(|c| c.epoch() == Some(second.2 as i64))
        .expect("the claim");
    let stale: Vec<&LogCommit> = commits[claim..]
        .iter()
        .filter(|c| c.epoch().is_some_and(|e| e < second.2 as i64))
        .collect();
    eprintln!(
        "paused committer: {sent} records; {first:?} then {second:?}; claim at version {}; \
         {} commits after it with an older epoch; {}",
        commits[claim].version,
        stale.len(),
        verdict.summary()
    );
    assert!(stale.is_empty(), "commits of a deposed epoch: {stale:?}");
    verdict.assert_holds();
    assert!(verdict.duplicates.is_empty(), "no row twice");
    // It learns it either from the log (a commit refused as deposed), from the election (its
    // role dropped) or from its lease (expired while it slept: every role dropped at once).
    let all = logs(&pods);
    assert!(
        [
            "deposed",
            "no longer the committer",
            "committer role lost with the lease"
        ]
        .iter()
        .any(|said| all.contains(said)),
        "the old committer learnt it was replaced; its log:\n{}",
        pods[paused].log()
    );
    drop(pods);
    drop(etcd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_etcd_down_pods_keep_acking_and_commits_resume_when_it_returns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = "main.elect.etcd_down";
    let (mut etcd, pods, location) = cluster(dir.path(), 2, table).await;
    let urls: Vec<String> = pods.iter().map(|p| p.url.clone()).collect();
    let load = Load::start(&urls, 2, table).await;
    wait_for_committer(&etcd.join, table, Duration::from_secs(20), |_| true).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    etcd.kill();
    let before = load.acked();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let during = load.acked();
    let commits_down = data_commits(&location).len();
    etcd.restart().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (ledgers, sent) = load.finish(|| logs(&pods)).await;
    let verdict = settle(&ledgers, &location, &HashSet::new()).await;
    let commits_after = data_commits(&location).len();
    eprintln!(
        "etcd down 6 s: acked {before} → {during} while down; {commits_down} → \
         {commits_after} data commits; {sent} records; {}",
        verdict.summary()
    );
    assert!(during > before + 100, "acks continued while etcd was down");
    assert!(
        commits_after > commits_down,
        "commits resumed when etcd returned"
    );
    verdict.assert_holds();
    assert!(verdict.duplicates.is_empty(), "no row twice");
    drop(pods);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_committer_makes_the_pods_back_off_and_the_producers_see_no_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = "main.elect.busy";
    let warehouse = dir.path().join("warehouse");
    let etcd = Etcd::start(&dir.path().join("etcd")).await;
    let mut pods = Vec::new();
    for i in 0..2 {
        let id = format!("pod-{i}");
        let extra = ["--committer-max-pending", "1"];
        pods.push(start_pod_with(dir.path(), &id, &etcd.join, &warehouse, "20ms", &extra).await);
    }
    wait_for_pods(
        &etcd.join,
        Duration::from_secs(10),
        "pods registered",
        |p| p.len() == 2,
    )
    .await;
    let location = pods[0].create_table_at(table, COLUMNS).await;
    let urls: Vec<String> = pods.iter().map(|p| p.url.clone()).collect();
    let load = Load::start(&urls, 2, table).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    // The producers never saw an error: finish() fails on a producer's error.
    let (ledgers, sent) = load.finish(|| logs(&pods)).await;
    let verdict = settle(&ledgers, &location, &HashSet::new()).await;
    let mut busy = 0.0;
    for pod in &pods {
        busy += pod.metric("sluice_committer_busy_refusals_total").await;
    }
    eprintln!(
        "busy committer: {sent} records, {busy} busy refusals, {}",
        verdict.summary()
    );
    assert!(busy > 0.0, "the committer answered busy at least once");
    verdict.assert_holds();
    assert!(verdict.duplicates.is_empty(), "no row twice");
    drop(pods);
    drop(etcd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alter_under_load_reaches_every_pod_and_no_file_of_the_old_schema_is_committed_after_it()
{
    let dir = tempfile::tempdir().expect("tempdir");
    let table = "main.elect.evolve";
    let (etcd, pods, location) = cluster(dir.path(), 3, table).await;
    let urls: Vec<String> = pods.iter().map(|p| p.url.clone()).collect();
    let load = Load::start(&urls, 2, table).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The alter goes through pod 1 while every pod streams and hands off.
    let out = pods[1].cli(&["table", "alter", table, "--add-columns", "note STRING"]);
    assert!(
        out.status.success(),
        "alter: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info = pods[1].table_info(table).await;
    let version = info["schema_version"].as_u64().expect("schema version");
    // Every pod accepts a new stream writing the new column at once (its catalog watch
    // brought the change; the stream open applies it).
    let mut extra = 0;
    for (p, url) in urls.iter().enumerate() {
        let mut stream = crate::harness::admin_json_stream(&sdk_at(url), table).await;
        for i in 0..3i64 {
            let id = 9_000_000_000_000 + (p as i64) * 100 + i;
            let record =
                serde_json::json!({"id": id, "stream": -1, "seq": i, "note": format!("pod {p}")});
            stream
                .ingest_record_offset(databricks_zerobus_ingest_sdk::JsonString(
                    record.to_string(),
                ))
                .await
                .expect("a record with the new column");
            extra += 1;
        }
        stream.flush().await.expect("acked");
        stream.close().await.expect("close");
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (ledgers, sent) = load.finish(|| logs(&pods)).await;
    let verdict = settle(&ledgers, &location, &HashSet::new()).await;
    eprintln!(
        "evolve under load: {sent} records + {extra} with the new column; alter at version \
         {version}; {}",
        verdict.summary()
    );
    verdict.assert_holds();
    assert!(verdict.duplicates.is_empty(), "no row twice");
    let after: Vec<(u64, String)> = log_commits(&location)
        .into_iter()
        .filter(|c| c.version > version)
        .flat_map(|c| c.stats.into_iter().map(move |s| (c.version, s)))
        .collect();
    assert!(!after.is_empty(), "data was committed after the alter");
    for (v, stats) in &after {
        assert!(
            stats.contains("\"note\""),
            "commit {v} after the alter (version {version}) holds a file written without \
             the new column: {stats}\n{}",
            logs(&pods)
        );
    }
    let rows = crate::rows::rows_as_json(&crate::harness::read_delta(&location).await);
    let notes = rows.iter().filter(|r| r["note"].is_string()).count();
    assert_eq!(
        notes, extra,
        "every record of the new column landed with it"
    );
    drop(pods);
    drop(etcd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewriting_alter_under_load_loses_no_acked_row_and_leaves_only_files_of_the_new_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (etcd, mut pods, _) = cluster(dir.path(), 3, "main.elect.unused").await;
    let table = "main.elect.rewrite";
    let location = pods[0]
        .create_table_at(table, "id BIGINT NOT NULL, stream INT, seq BIGINT")
        .await;
    let urls: Vec<String> = pods.iter().map(|p| p.url.clone()).collect();
    // Pod 1 pauses 2 s between writing the rewritten files and its first commit attempt,
    // so appends land first and the rewrite must take in the files they added.
    restart_pausing_rewrites(&etcd, &mut pods[1], "2s").await;
    let load = Load::start(&urls, 2, table).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Through pod 1, while all six streams (two per pod) send and every pod hands off.
    let out = pods[1].cli(&[
        "table",
        "alter",
        table,
        "--widen",
        "stream INT TO BIGINT",
        "--rewrite",
    ]);
    assert!(
        out.status.success(),
        "alter: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let version = pods[1].table_info(table).await["schema_version"]
        .as_u64()
        .expect("schema version");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (ledgers, sent) = load.finish(|| logs(&pods)).await;
    let verdict = settle(&ledgers, &location, &HashSet::new()).await;
    let rewrite = pods[1]
        .log()
        .lines()
        .find(|l| l.contains("table rewritten under its new schema"))
        .map(str::to_string)
        .unwrap_or_default();
    eprintln!(
        "rewrite under load: {sent} records; alter at version {version}; {}; {rewrite}",
        verdict.summary()
    );
    verdict.assert_holds();
    assert!(verdict.duplicates.is_empty(), "no row twice");
    assert!(
        !rewrite.contains("attempts=1 "),
        "the first commit attempt lost its race: {rewrite}"
    );
    // Every live file, old rows rewritten and rows committed after the alter, has the
    // new type.
    let files = crate::harness::live_file_schemas(&location).await;
    assert!(!files.is_empty());
    for (file, schema) in &files {
        let field = schema.field_with_name("stream").expect("stream").clone();
        assert_eq!(
            field.data_type(),
            &arrow_schema::DataType::Int64,
            "{file} is not of the new schema\n{}",
            logs(&pods)
        );
    }
    assert!(
        log_commits(&location)
            .iter()
            .any(|c| c.version > version && c.adds > 0),
        "rows were committed after the alter"
    );
    drop(pods);
    drop(etcd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_through_one_pod_ends_a_stream_writing_the_column_on_another() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = "main.elect.dropped";
    let (etcd, pods, location) = cluster(dir.path(), 3, table).await;
    let token = pods[2].token().await;
    let mut raw = crate::raw::OpenStream::open(crate::raw::Call {
        url: &pods[2].url,
        table,
        token: Some(&token),
    })
    .await
    .expect("raw stream on pod 2");
    let last = raw.send(r#"{"id": 1, "stream": 1, "seq": 1}"#).await;
    raw.wait_acked(last).await;
    let out = pods[0].cli(&[
        "table",
        "alter",
        table,
        "--drop-columns",
        "seq",
        "--rewrite",
    ]);
    assert!(
        out.status.success(),
        "alter: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Pod 2 sees the change through the catalog watch (applied to its open sinks once a
    // second) and ends the stream; nothing new opened there meanwhile.
    let signals = raw.close_signals.clone();
    let status = raw
        .ended_by_server(Duration::from_secs(15))
        .await
        .expect("a status");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("column `seq`"), "{status:?}");
    assert_eq!(signals.load(Ordering::SeqCst), 1);
    let rows = crate::rows::rows_as_json(&crate::harness::read_delta(&location).await);
    assert_eq!(rows.len(), 1, "the acked row stays: {rows:?}");
    assert_eq!(rows[0]["id"], serde_json::json!(1));
    assert!(rows[0].get("seq").is_none(), "{rows:?}");
    drop(pods);
    drop(etcd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_alters_through_two_pods_never_lose_a_change_and_leave_one_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = "main.elect.alters";
    let (etcd, pods, location) = cluster(dir.path(), 3, table).await;
    let mut outcomes = Vec::new();
    for round in 0..4 {
        let (a, b) = (format!("a{round} DOUBLE"), format!("b{round} DOUBLE"));
        let (url_a, url_b) = (pods[0].url.clone(), pods[2].url.clone());
        let alter = |url: String, columns: String| {
            tokio::task::spawn_blocking(move || {
                crate::harness::cli_at(&url, &["table", "alter", table, "--add-columns", &columns])
            })
        };
        let (ra, rb) = tokio::join!(alter(url_a, a.clone()), alter(url_b, b.clone()));
        for (columns, out) in [(a, ra.expect("join")), (b, rb.expect("join"))] {
            let stderr = String::from_utf8_lossy(&out.stderr).to_string();
            assert!(
                // Stale as the catalog sees it ("the table changed meanwhile") or as the
                // Delta log does ("another alter changed it meanwhile").
                out.status.success() || stderr.contains("meanwhile"),
                "an alter either lands or is refused as stale: {stderr}"
            );
            outcomes.push((columns, out.status.success()));
        }
    }
    // Every pod shows the same columns, the Delta table has exactly them, and every alter
    // answered 200 is in them.
    let mut seen = Vec::new();
    for pod in &pods {
        seen.push(column_names(&pod.table_info(table).await["columns"]));
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
    let delta_names: Vec<String> = delta_fields(&location)
        .await
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        delta_names, seen[0],
        "the catalog and the Delta table agree"
    );
    for (columns, landed) in &outcomes {
        let name = columns.split(' ').next().expect("name");
        assert_eq!(
            seen[0].iter().any(|n| n == name),
            *landed,
            "{columns}: answered {}, in the table {:?}",
            if *landed { "200" } else { "409" },
            seen[0]
        );
    }
    eprintln!("concurrent alters: {outcomes:?}");
    drop(pods);
    drop(etcd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_rewriting_alters_through_two_pods_lose_no_change_and_leave_files_of_one_schema()
{
    let dir = tempfile::tempdir().expect("tempdir");
    let (etcd, pods, _) = cluster(dir.path(), 3, "main.elect.unused").await;
    let table = "main.elect.rewrites";
    let location = pods[0]
        .create_table_at(
            table,
            "id BIGINT NOT NULL, a INT, b STRING, c STRING, d FLOAT",
        )
        .await;
    let stream = pods[0].json_stream(table).await;
    for id in 0..5 {
        let record =
            serde_json::json!({"id": id, "a": id, "b": "b", "c": format!("c{id}"), "d": 0.5});
        stream
            .ingest_record_offset(databricks_zerobus_ingest_sdk::JsonString(
                record.to_string(),
            ))
            .await
            .expect("ingest");
    }
    stream.flush().await.expect("acked");
    drop(stream);
    // Waited for by the Rust reader: polars_rows compares two readers, which can see
    // different versions while the rows are still being committed.
    crate::harness::wait_for_rows(&location, 5, Duration::from_secs(30)).await;
    // Two rounds of two rewriting alters at once through pods 0 and 2; each
    // (arguments, what shows it landed: a column name present or absent).
    let rounds: [[(&[&str], &str, bool); 2]; 2] = [
        [
            (&["--widen", "a INT TO BIGINT"], "a", true),
            (&["--drop-columns", "b"], "b", false),
        ],
        [
            (&["--rename-column", "c TO c2"], "c2", true),
            (&["--widen", "d FLOAT TO DOUBLE"], "d", true),
        ],
    ];
    let mut outcomes = Vec::new();
    for round in rounds {
        let alter = |url: String, args: &'static [&'static str]| {
            tokio::task::spawn_blocking(move || {
                let mut all = vec!["table", "alter", table, "--rewrite"];
                all.extend_from_slice(args);
                crate::harness::cli_at(&url, &all)
            })
        };
        let (ra, rb) = tokio::join!(
            alter(pods[0].url.clone(), round[0].0),
            alter(pods[2].url.clone(), round[1].0)
        );
        for ((args, _, _), out) in round.iter().zip([ra, rb]) {
            let out = out.expect("join");
            let stderr = String::from_utf8_lossy(&out.stderr).to_string();
            assert!(
                out.status.success() || stderr.contains("meanwhile"),
                "a rewriting alter either lands or is refused as stale: {stderr}"
            );
            outcomes.push((args.join(" "), out.status.success()));
        }
    }
    eprintln!("concurrent rewriting alters: {outcomes:?}");
    let mut seen = Vec::new();
    for pod in &pods {
        seen.push(pod.table_info(table).await["columns"].clone());
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
    let delta = deltalake::open_table(url::Url::parse(&location).expect("url"))
        .await
        .expect("open");
    let snapshot = delta.snapshot().expect("snapshot");
    let fields = snapshot_fields(snapshot);
    assert_eq!(
        fields.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        column_names(&seen[0]),
        "the catalog and the Delta table agree"
    );
    // Every alter answered 200 is in the schema; one refused is not.
    let has = |name: &str, ty: &str| fields.iter().any(|(n, t)| n == name && t == ty);
    let effects = [
        has("a", "long"),
        !has("b", "string"),
        has("c2", "string") && !has("c", "string"),
        has("d", "double"),
    ];
    for ((args, landed), effect) in outcomes.iter().zip(effects) {
        assert_eq!(
            *landed, effect,
            "{args}: landed {landed}, schema {fields:?}"
        );
    }
    assert!(outcomes.iter().any(|(_, l)| *l), "{outcomes:?}");
    // Every live file has the final schema, and the 5 rows are there once.
    let arrow: arrow_schema::Schema =
        deltalake::kernel::engine::arrow_conversion::TryIntoArrow::try_into_arrow(
            snapshot.schema().as_ref(),
        )
        .expect("arrow");
    let types = |s: &arrow_schema::Schema| {
        s.fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect::<Vec<_>>()
    };
    let files = crate::harness::live_file_schemas(&location).await;
    assert!(!files.is_empty());
    for (file, schema) in &files {
        assert_eq!(types(schema), types(&arrow), "{file}");
    }
    let (rows, _) = crate::evolve::polars_rows(&location);
    let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().expect("id")).collect();
    assert_eq!(ids, [0, 1, 2, 3, 4], "{rows:?}");
    drop(pods);
    drop(etcd);
}

/// The table's Delta schema: (column, Delta type) in order.
async fn delta_fields(location: &str) -> Vec<(String, String)> {
    let delta = deltalake::open_table(url::Url::parse(location).expect("url"))
        .await
        .expect("open");
    snapshot_fields(delta.snapshot().expect("snapshot"))
}

/// (column, Delta type) of a snapshot's schema, in order.
fn snapshot_fields(snapshot: &deltalake::table::state::DeltaTableState) -> Vec<(String, String)> {
    snapshot
        .schema()
        .fields()
        .map(|f| (f.name().clone(), f.data_type().to_string()))
        .collect()
}

/// The names of a tables-API answer's `columns`, in order.
fn column_names(columns: &serde_json::Value) -> Vec<String> {
    columns
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| c["name"].as_str().expect("name").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alter_while_another_pods_alter_is_under_way_is_refused_and_the_first_lands_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (etcd, mut pods, _) = cluster(dir.path(), 3, "main.elect.unused").await;
    let table = "main.elect.held";
    let location = pods[0]
        .create_table_at(table, "id BIGINT NOT NULL, a INT")
        .await;
    // Pod 1's rewriting alter waits 3 s between its pending record and its Delta commit.
    restart_pausing_rewrites(&etcd, &mut pods[1], "3s").await;
    let url = pods[1].url.clone();
    let held = tokio::task::spawn_blocking(move || {
        let args = [
            "table",
            "alter",
            table,
            "--widen",
            "a INT TO BIGINT",
            "--rewrite",
        ];
        crate::harness::cli_at(&url, &args)
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Meanwhile, through pod 2: refused, and pod 1's alter is not forgotten.
    let out = pods[2].cli(&["table", "alter", table, "--add-columns", "b DOUBLE"]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success() && stderr.contains("is under way") && stderr.contains("meanwhile"),
        "an alter while another pod's is pending: {stderr}\n{}",
        logs(&pods)
    );
    let out = held.await.expect("join");
    assert!(
        out.status.success(),
        "the held alter: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = [("id", "long"), ("a", "long")].map(|(n, t)| (n.to_string(), t.to_string()));
    assert_eq!(delta_fields(&location).await, want);
    // Afterwards the table takes the second alter, and every pod's catalog agrees with Delta.
    let out = pods[2].cli(&["table", "alter", table, "--add-columns", "b DOUBLE"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fields = delta_fields(&location).await;
    assert_eq!(
        fields.last(),
        Some(&("b".to_string(), "double".to_string()))
    );
    for pod in &pods {
        let info = pod.table_info(table).await;
        assert_eq!(column_names(&info["columns"]), ["id", "a", "b"], "{info}");
    }
    drop(pods);
    drop(etcd);
}
